"""scripts/nv_check.py, the script for a first run on a real GPU, runs green against the NV model (every check row
present and ok, exit status 0), so the first lent GPU runs a script that is known to work end to end."""
import os, pathlib, subprocess, sys

ROOT = pathlib.Path(__file__).parents[3]

def test_nv_check_runs_green_on_the_model():
  run = subprocess.run([sys.executable, "scripts/nv_check.py"], cwd=ROOT, env={**os.environ, "DEV": "MOCK+NV"}, capture_output=True, text=True, timeout=600)
  assert run.returncode == 0, run.stdout + run.stderr[-3000:]
  rows = {line[:22].strip(): line[22:].strip() for line in run.stdout.splitlines()[1:] if line.strip()}  # the name column is 22 wide
  for check in ("elementwise f32", "reduction f32", "matmul f32", "matmul f16", "matmul bf16", "conv2d f32", "TinyJit MNIST step"):
    assert rows[check].startswith("ok"), (check, rows[check])
  assert "TFLOPS" in rows["matmul f16 speed (TC)"] and "GB/s" in rows["copy bandwidth"] and "us/launch" in rows["launch latency"]
