"""scripts/nv_check.py and scripts/amd_check.py, the scripts for a first run on a real GPU, run green against the
models (every check row present and ok, exit status 0), so the first lent GPU runs a script known to work end to end."""
import os, pathlib, subprocess, sys
import pytest

ROOT = pathlib.Path(__file__).parents[2]

@pytest.mark.parametrize("script, dev", [("nv_check.py", "MOCK+NV"), ("amd_check.py", "MOCK+AMD")])
def test_the_check_runs_green_on_the_model(script, dev):
  run = subprocess.run([sys.executable, f"scripts/{script}"], cwd=ROOT, env={**os.environ, "DEV": dev}, capture_output=True, text=True, timeout=600)
  assert run.returncode == 0, run.stdout + run.stderr[-3000:]
  rows = {line[:22].strip(): line[22:].strip() for line in run.stdout.splitlines()[1:] if line.strip()}  # the name column is 22 wide
  for check in ("elementwise f32", "reduction f32", "matmul f32", "matmul f16", "matmul bf16", "conv2d f32", "TinyJit MNIST step"):
    assert rows[check].startswith("ok"), (check, rows[check])
  assert "TFLOPS" in rows["matmul f16 speed (TC)"] and "GB/s" in rows["copy bandwidth"] and "us/launch" in rows["launch latency"]

@pytest.mark.skipif(os.path.exists("/dev/kfd"), reason="this machine has amdkfd: DEV=AMD opens")
def test_a_device_that_cant_open_turns_the_exit_status_red():
  """A device that can't open is a row of its own and exit status 1 (DEV=AMD is the real driver, absent here)."""
  run = subprocess.run([sys.executable, "scripts/amd_check.py"], cwd=ROOT, env={**os.environ, "DEV": "AMD"}, capture_output=True, text=True, timeout=600)
  assert run.returncode == 1 and "unavailable" in run.stdout and "AMD bring-up" in run.stdout, run.stdout + run.stderr[-2000:]

@pytest.mark.parametrize("script", ["nv_check.py", "amd_check.py"])
def test_help_names_the_switches(script):
  run = subprocess.run([sys.executable, f"scripts/{script}", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
  assert run.returncode == 0 and "COPY_MB" in run.stdout and "DEV=MOCK+" in run.stdout
