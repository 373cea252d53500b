"""NULL compiles kernels and runs none; reading its data back is refused unless NULL_ALLOW_COPYOUT=1."""
import os, pathlib, subprocess, sys
import pytest
from tg import Tensor, GlobalCounters

def test_kernels_compile_and_count_without_running():
  GlobalCounters.reset()
  x = (Tensor.ones(32, 32, device="NULL") @ Tensor.ones(32, 32, device="NULL")).relu()
  x.realize()
  assert GlobalCounters.kernel_count == 1 and GlobalCounters.global_ops > 0
  with pytest.raises(RuntimeError, match="NULL_ALLOW_COPYOUT"): x.numpy()

def test_allow_copyout_reads_zeros():
  code = "from tg import Tensor; print((Tensor.ones(4, device='NULL') + 1).tolist())"
  out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "NULL_ALLOW_COPYOUT": "1"}, capture_output=True, text=True,
                       cwd=pathlib.Path(__file__).parents[2], check=True)
  assert out.stdout.strip() == "[0.0, 0.0, 0.0, 0.0]"

def test_null_python_renderer():
  code = "from tg import Tensor, Device; (Tensor.ones(4) * 2).realize(); print(type(Device['NULL'].renderer).__name__)"
  out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "DEV": "NULL:PYTHON"}, capture_output=True, text=True,
                       cwd=pathlib.Path(__file__).parents[2], check=True)
  assert out.stdout.strip() == "PythonRenderer"
