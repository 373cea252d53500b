"""VIZ: with VIZ=1, tg records its schedules, each kernel's way through codegen and the PROFILE timeline, and when the
program ends it serves a viewer at http://127.0.0.1:VIZ_PORT until Ctrl-C (VIZ=-1 only saves the file).
`tg.viz.serve()` serves what was recorded so far; `python3 -m tg.viz FILE` opens a saved file."""
from __future__ import annotations
import atexit, sys
from ir.switches import VIZ
from tg.viz import capture as _capture, trace_file

def document() -> dict:
  """Everything recorded so far, in the saved file's form."""
  from drivers.hcq import profile_events  # the timeline PROFILE recorded on queue-driven devices
  return trace_file.document(_capture.capture, profile_events[_capture.capture.first_event:])

def save(path: str | None = None) -> str:
  """Save the recording (default: tg_viz.json in the temp folder); returns the path."""
  return trace_file.save(document(), path)

def serve(port: int | None = None, path: str | None = None) -> None:
  """Serve the recording so far (or the file at `path`) at http://127.0.0.1:port (VIZ_PORT by default) until Ctrl-C."""
  from tg.viz.server import serve as _serve
  if path is not None: _serve(trace_file.load(path), path, port)
  else: _serve(document(), "this run", port)

def _at_exit() -> None:
  if not VIZ or not (_capture.capture.runs or _capture.capture.programs): return
  path = save()
  print(f"VIZ: saved {path} (open it later with: python3 -m tg.viz {path})", file=sys.stderr, flush=True)
  if VIZ > 0: serve(path=path)

atexit.register(_at_exit)
