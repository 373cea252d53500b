"""The Tensor op tests again with DEV=PYTHON: every kernel is run by the UOp interpreter instead of LLVM, so the
codegen's output is checked independently of the CPU backend. (The suites run in full; their shapes are small.)"""
import os, pathlib, subprocess, sys

ROOT = pathlib.Path(__file__).parents[2]
SUITES = ["tests/tg/test_ops_elementwise.py", "tests/tg/test_ops_reduce.py", "tests/tg/test_ops_movement.py",
          "tests/tg/test_ops_processing.py", "tests/tg/test_losses.py"]

def test_op_suites_pass_on_python_device():
  env = {**os.environ, "DEV": "PYTHON"}
  out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *SUITES], cwd=ROOT, env=env,
                       capture_output=True, text=True)
  assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
  assert " passed" in out.stdout.splitlines()[-1]
