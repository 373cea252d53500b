"""The CL device on a real OpenCL runtime (what the ICD loader finds: PoCL on this machine, installed by .ci/run; or
Intel's CPU runtime with CL_RUNTIME=intel): every path of the OpenCL C renderer (codegen/opencl.py) run by an
independent compiler and checked against numpy or the CPU device, and the runtime's errors. The whole op/nn/optim/JIT
suites on DEV=CL run in tests/tg/test_on_other_devices.py, on Intel's runtime where the `cl` extra installed it
(about 45 ms per new kernel; on PoCL, about 250, they are the slow run)."""
import pathlib
import numpy as np
import pytest
from ir.switches import Context
from codegen.compiler import CompileError
from drivers.device import Buffer, Device, DeviceUnavailable
from drivers.cl import intel_runtime_path
from tg import Tensor, TinyJit, dtypes

def cl_available() -> bool:
  try: Device["CL"]
  except DeviceUnavailable: return False
  return True

pytestmark = pytest.mark.skipif(not cl_available(), reason="no OpenCL runtime (apt-get install pocl-opencl-icd ocl-icd-libopencl1)")

def on_cl(*arrays: np.ndarray) -> list[Tensor]: return [Tensor(a, device="CL") for a in arrays]

def test_float_math_matches_numpy():
  a = np.random.default_rng(0).uniform(0.1, 4, 257).astype(np.float32)
  (x,) = on_cl(a)
  np.testing.assert_allclose(((x.exp2() + x.log2()) * x.sin() / x.sqrt() - x.reciprocal()).numpy(),
                             (np.exp2(a) + np.log2(a)) * np.sin(a) / np.sqrt(a) - 1 / a, rtol=1e-5, atol=1e-6)

def test_integer_division_shifts_and_wrapping_do_not_trap():
  a = np.array([7, -7, np.iinfo(np.int32).min, 5, 0], np.int32)
  b = np.array([2, 2, -1, 0, 3], np.int32)
  x, y = on_cl(a, b)
  with np.errstate(all="ignore"):
    np.testing.assert_array_equal((x // y).numpy(), (Tensor(a) // Tensor(b)).numpy())  # the CPU's answer, INT_MIN // -1 included
    np.testing.assert_array_equal((x % y).numpy(), (Tensor(a) % Tensor(b)).numpy())
  np.testing.assert_array_equal((x << 3).numpy(), a << 3)
  np.testing.assert_array_equal((Tensor(np.array([250, 7], np.uint8), device="CL") + 10).numpy(), np.array([4, 17], np.uint8))
  big = np.array([2**40, -(2**50)], np.int64)
  np.testing.assert_array_equal((Tensor(big, device="CL") * 3 + 1).numpy(), big * 3 + 1)

def test_float_to_int_saturates_and_nan_is_zero():
  a = np.array([1.9, -1.9, 3e9, -3e9, np.nan, np.inf], np.float32)
  np.testing.assert_array_equal(Tensor(a, device="CL").cast(dtypes.int32).numpy(), Tensor(a).cast(dtypes.int32).numpy())
  np.testing.assert_array_equal(Tensor(a, device="CL").cast(dtypes.int32).numpy()[:2], [1, -1])

def test_max_propagates_nan_and_bools_round_trip():
  a = np.array([1.0, np.nan, -2.0, 3.0], np.float32)
  x = Tensor(a, device="CL")
  np.testing.assert_array_equal(x.maximum(0.5).numpy(), np.maximum(a, 0.5))
  assert np.isnan(x.max().item())
  m = x > 0.5
  np.testing.assert_array_equal(m.numpy(), a > 0.5)
  np.testing.assert_array_equal(m.where(x, -x).numpy(), np.where(a > 0.5, a, -a))
  np.testing.assert_array_equal((m & (x < 2)).numpy(), (a > 0.5) & (a < 2))

def test_half_and_bfloat16_round_like_the_other_devices():
  a = np.random.default_rng(1).uniform(-100, 100, 64).astype(np.float16)
  x = Tensor(a, device="CL")
  np.testing.assert_array_equal((x * 3 + 1).numpy(), a * np.float16(3) + np.float16(1))
  np.testing.assert_array_equal(x.cast(dtypes.float32).numpy(), a.astype(np.float32))
  np.testing.assert_array_equal(x.bitcast(dtypes.uint16).numpy(), a.view(np.uint16))
  f = a.astype(np.float32)
  bf_cl, bf_cpu = Tensor(f, device="CL").cast(dtypes.bfloat16), Tensor(f).cast(dtypes.bfloat16)
  np.testing.assert_array_equal((bf_cl * 1.5 - 2).cast(dtypes.float32).numpy(), (bf_cpu * 1.5 - 2).cast(dtypes.float32).numpy())

def test_reductions_with_workgroups_and_matmul():
  rng = np.random.default_rng(2)
  a, b = rng.standard_normal((128, 1000)).astype(np.float32), rng.standard_normal((64, 48)).astype(np.float32)
  x, w = on_cl(a, b)
  np.testing.assert_allclose(x.sum(1).numpy(), a.astype(np.float64).sum(1), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(x.max(0).numpy(), a.max(0))
  np.testing.assert_allclose((x[:, :64] @ w).numpy(), a[:, :64].astype(np.float64) @ b, rtol=1e-4, atol=1e-4)

def test_training_step_under_tinyjit():
  rng = np.random.default_rng(3)
  w0 = rng.standard_normal((8, 4)).astype(np.float32)
  w = Tensor(w0, device="CL", requires_grad=True)
  @TinyJit
  def step(x: Tensor) -> Tensor:
    loss = (x @ w).relu().sum()
    w.grad = None
    loss.backward()
    w.assign(w - 0.1 * w.grad).realize()
    return loss.realize()
  xs = [rng.standard_normal((2, 8)).astype(np.float32) for _ in range(4)]
  ref = w0.astype(np.float64)
  for xa in xs:
    step(Tensor(xa, device="CL"))
    h = xa @ ref
    ref = ref - 0.1 * xa.T @ (h > 0).astype(np.float64)
  np.testing.assert_allclose(w.numpy(), ref, rtol=1e-5, atol=1e-5)

def test_a_buffer_view_at_an_aligned_offset_is_a_kernel_argument():
  dev = Device["CL"]
  base = Buffer("CL", 1024, dtypes.float32).copyin(memoryview(np.arange(1024, dtype=np.float32)))
  view = base.view(16, dtypes.float32, dev.base_align)  # a sub-buffer: the device's base alignment is the smallest offset
  t = Tensor(np.zeros(16, np.float32), device="CL")
  (item,) = (t + 1).schedule()
  from tg.realize import get_runner
  runner, scalars = get_runner("CL", item.ast)
  out = Buffer("CL", 16, dtypes.float32).ensure_allocated()
  runner.prg(out._buf, view.ensure_allocated()._buf, global_size=runner.spec.global_size, local_size=runner.spec.local_size,
             vals=tuple(scalars[v.arg[0]] for v in runner.spec.vars), wait=True)
  np.testing.assert_array_equal(np.frombuffer(out.as_bytes(), np.float32), np.arange(16) + dev.base_align // 4 + 1)

def test_build_errors_show_the_build_log_and_timing_uses_profiling():
  with pytest.raises(CompileError, match=r"(?s)OpenCL build failed.*error.*undeclared"):
    Device["CL"].compiler.compile("__kernel void broken(__global float *a) { a[0] = nothere; }")
  with Context(DEBUG=2):
    from drivers.device import GlobalCounters
    before = GlobalCounters.time_sum_s
    (Tensor(np.ones(1 << 16, np.float32), device="CL") * 2).realize()
    assert GlobalCounters.time_sum_s > before  # measured by the runtime's profiling events

def test_profile_puts_kernels_on_the_timeline():
  """PROFILE on a device that isn't queue-driven: each kernel an event lasting what the runtime's profiling measured."""
  from drivers.hcq import profile_events
  before = len(profile_events)
  with Context(PROFILE=1): (Tensor(np.ones(1 << 16, np.float32), device="CL") * 2).realize()
  (event,) = [e for e in profile_events[before:] if e.device == Device["CL"].device]
  assert event.name.startswith("E_") and 0 < event.end_us - event.start_us < 10e6

def test_missing_devices_say_why():
  with pytest.raises(DeviceUnavailable, match=r"CL unavailable: CL:7 asked for, OpenCL reports \d+ device"): Device["CL:7"]
  with Context(DEV="MOCK+CL", CL_RUNTIME=""), pytest.raises(DeviceUnavailable, match=r"CL unavailable: libOpenCL\.so .*not found"):
    from drivers.cl import CLDevice
    CLDevice("CL:3")

def test_intel_runtime_missing_or_through_a_model_says_why(monkeypatch):
  import drivers.cl as cl
  monkeypatch.setattr(cl, "intel_runtime_path", lambda: None)
  with pytest.raises(DeviceUnavailable, match=r"CL unavailable: CL_RUNTIME=intel, but .* not installed \(pip install -e '\.\[cl\]'"):
    cl.load_intel_runtime.__wrapped__()  # uncached: a library this process opened stays open
  with Context(CL_RUNTIME="intel", DEV="MOCK+CL"), pytest.raises(DeviceUnavailable, match=r"CL unavailable: CL_RUNTIME=intel .* MOCK interface"):
    cl.CLDevice("CL")

@pytest.mark.skipif(intel_runtime_path() is None, reason="Intel's OpenCL CPU runtime isn't installed (pip install -e '.[cl]')")
def test_intel_runtime_is_a_release_that_compiles_these_right():
  """CL_RUNTIME=intel, in a process of its own (uncached): the pinned intel-opencl-rt release. 2026.2.0 makes max(~x)
  over 5..28 come out 30 (not -6), and its vectorizer crashes on a uchar -> uint sum; judged by it, correct kernels fail."""
  import os, subprocess, sys
  code = ("import numpy as np; from tg import Device, Tensor; print(Device['CL'].driver); x = np.arange(24, dtype=np.int32) + 5; "
          "print(int((~Tensor(x)).max().item()), int(Tensor(x).argmin().item()), int(Tensor(np.full(300, 200, np.uint8)).sum().item()))")
  out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "DEV": "CL", "CL_RUNTIME": "intel", "CCACHE": "0"},
                       cwd=pathlib.Path(__file__).parents[2], capture_output=True, text=True)
  assert out.returncode == 0, out.stderr[-3000:]
  driver, values = out.stdout.splitlines()
  assert driver.startswith("2024.18.") and values.split() == ["-6", "0", "60000"], out.stdout

def test_an_opencl_device_on_the_host_cpu_is_not_the_default():
  assert Device["CL"].host_cpu  # PoCL
  import os, subprocess, sys
  env = {k: v for k, v in os.environ.items() if k != "DEV"}
  out = subprocess.run([sys.executable, "-c", "from tg import Device; print(Device.DEFAULT)"], env=env, capture_output=True, text=True, check=True)
  assert out.stdout.split() == ["CPU"]
