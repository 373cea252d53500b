import os, sys
import pytest
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

@pytest.hookimpl(trylast=True)  # after -m and -k have deselected what they deselect
def pytest_collection_modifyitems(config, items):
  """Start the device runs of tests/tg/test_on_other_devices.py as soon as a selected test needs them: they run beside
  the rest of the suite, on the core its one process leaves idle, instead of after it."""
  if config.option.collectonly: return
  if item := next((i for i in items if "runs" in getattr(i, "fixturenames", ()) and getattr(i, "module", None) and i.module.__name__.endswith("test_on_other_devices")), None):
    item.module.device_runs()
