import ctypes.util, gc, os, re, subprocess, sys, pathlib, time
import numpy as np
import pytest
from ir.dtype import dtypes
from ir.switches import Context
from drivers.device import ALL_DEVICES, Buffer, Compiled, Device, DeviceUnavailable, GlobalCounters

ROOT = pathlib.Path(__file__).parents[2]

def test_canonical_names():
  assert Device.canonicalize("cpu") == "CPU" and Device.canonicalize("cpu:0") == "CPU"
  assert Device.canonicalize("nv") == "NV" and Device.canonicalize("nv:1") == "NV:1"
  assert Device.canonicalize("disk:/tmp/Some/File") == "DISK:/tmp/Some/File"

def test_unknown_device_lists_known():
  with pytest.raises(KeyError) as e: Device["TPU"]
  assert "'TPU'" in str(e.value) and "CPU" in str(e.value) and "NV" in str(e.value)

def test_device_without_driver_says_why():
  with pytest.raises(DeviceUnavailable, match="METAL unavailable"): Device["METAL"]

@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="this machine has the NVIDIA kernel module")
def first_available() -> str:
  """The device Device.DEFAULT picks without DEV: the first of ALL_DEVICES that opens here and isn't the host CPU
  through another runtime (PoCL's OpenCL device)."""
  for kind in ALL_DEVICES:
    try: dev = Device[kind]
    except DeviceUnavailable: continue
    if not dev.host_cpu: return kind
  raise AssertionError("no device opens")

def test_nv_without_the_kernel_module_says_why_and_default_moves_on():
  with pytest.raises(DeviceUnavailable, match=r"NV unavailable: no NVIDIA kernel module \(can't open /dev/nvidiactl"): Device["NV"]
  env = {k: v for k, v in os.environ.items() if k != "DEV"}  # the probe for a default tries NV (and CUDA) before CPU
  out = subprocess.run([sys.executable, "-c", "from tg import Device; print(Device.DEFAULT)"], env=env, capture_output=True, text=True, cwd=ROOT, check=True)
  assert out.stdout.split() == [first_available()] and "NV" not in out.stdout

@pytest.mark.skipif(ctypes.util.find_library("cuda") is not None, reason="this machine has libcuda")
def test_cuda_without_libcuda_says_why():
  with pytest.raises(DeviceUnavailable, match=r"CUDA unavailable: libcuda\.so .* not found"): Device["CUDA"]

def test_cpu_is_cached_and_default():
  assert Device["cpu"] is Device["CPU"]
  assert Device.DEFAULT == "CPU"
  with pytest.raises(AttributeError): Device.DEFAULT = "NV"

def test_dev_switch_chooses_default():
  with Context(DEV="CPU:LLVM"): assert Device.DEFAULT == "CPU"
  with Context(DEV="NV:PTX;CPU"): assert Device.DEFAULT == "NV"

def test_debug_prints_opened_device_line():
  env = {**os.environ, "DEBUG": "1"}
  env.pop("DEV", None)
  out = subprocess.run([sys.executable, "-c", "from tg import Device; print(Device.DEFAULT)"], env=env, capture_output=True, text=True, cwd=ROOT, check=True)
  lines = out.stdout.strip().splitlines()
  assert lines[-2].startswith(f"opened device {first_available()} from pid:") and lines[-1] == first_available()

def test_buffer_roundtrip_and_views():
  b = Buffer("CPU", 16, dtypes.int32)
  assert not b.is_allocated()
  data = np.arange(16, dtype=np.int32)
  b.copyin(memoryview(data))
  v = b.view(4, dtypes.int32, 8)
  out = np.zeros(4, np.int32)
  v.copyout(memoryview(out))
  assert out.tolist() == [2, 3, 4, 5]
  v.copyin(memoryview(np.full(4, -1, np.int32)))
  assert np.frombuffer(b.as_bytes(), np.int32).tolist() == [0, 1] + [-1] * 4 + list(range(6, 16))
  with pytest.raises(ValueError): b.view(4, dtypes.int32, 56)
  with pytest.raises(ValueError): b.copyin(memoryview(np.zeros(3, np.int32)))

def test_buffer_bad_sizes():
  with pytest.raises(ValueError, match="-1"): Buffer("CPU", -1, dtypes.float)
  with pytest.raises(ValueError): Buffer("CPU", 2.5, dtypes.float)  # type: ignore[arg-type]
  with pytest.raises(MemoryError, match="bytes"): Buffer("CPU", 2**62, dtypes.float)
  with pytest.raises(TypeError): Buffer("CPU", 4, dtypes.float.ptr())

def test_buffer_is_freed_when_unreferenced():
  gc.collect()  # garbage from earlier tests must not be counted as this buffer's
  before = GlobalCounters.mem_used
  b = Buffer("CPU", 1000, dtypes.float32).ensure_allocated()
  assert GlobalCounters.mem_used == before + 4000
  del b
  gc.collect()
  assert GlobalCounters.mem_used == before

def test_debug7_prints_allocations(capsys):
  with Context(DEBUG=7):
    b = Buffer("CPU", 8, dtypes.float64).ensure_allocated()
    del b
    gc.collect()
  out = capsys.readouterr().out
  assert "buffer: allocate 64 bytes on CPU" in out and "buffer: deallocate 64 bytes on CPU" in out

def test_device_that_cannot_hold_a_dtype():
  class NoDouble(Compiled): unsupported_dtypes = frozenset([dtypes.float64])
  with pytest.raises(TypeError, match="double"): NoDouble("X", None, None, None, None).check_dtype(dtypes.float64)

def test_cpu_rejects_foreign_isa():
  from drivers.cpu import CPUDevice
  with Context(DEV="CPU:LLVM:riscv64"):
    with pytest.raises(ValueError, match="riscv64"): CPUDevice("CPU")
  with Context(DEV="CPU:CLANG"):
    with pytest.raises(ValueError, match="CLANG"): CPUDevice("CPU")

def run_tg(code: str, **env) -> subprocess.CompletedProcess:
  """`code` in a fresh interpreter with `env` added (DEV unset unless given): a bad target may end it."""
  full = {k: v for k, v in os.environ.items() if k != "DEV"}
  return subprocess.run([sys.executable, "-c", code], env={**full, **env}, capture_output=True, text=True, cwd=ROOT, timeout=300)

ADD_ONE = "from tg import Tensor; print((Tensor([1.0, 2.0]) * Tensor([3.0, 4.0]) + 1).tolist())"

def test_bad_switch_value_is_named_not_hidden_as_no_device():
  out = run_tg(ADD_ONE, HCQDEV_WAIT_TIMEOUT_MS="abc")
  assert out.returncode == 1 and "HCQDEV_WAIT_TIMEOUT_MS='abc' is not a valid int" in out.stderr and "no usable devices" not in out.stderr, out.stderr[-2000:]
  out = run_tg("from tg import Device; Device['CPU']", HCQDEV_WAIT_TIMEOUT_MS="abc")
  assert out.returncode == 1 and "SwitchError" in out.stderr and "unavailable" not in out.stderr, out.stderr[-2000:]

def host_features() -> tuple[list[str], list[str]]:
  """(features this CPU has, features it lacks), as LLVM names them."""
  import llvmlite.binding as llvm
  feats = llvm.get_host_cpu_features()
  return sorted(f for f, on in feats.items() if on), sorted(f for f, on in feats.items() if not on)

def test_unknown_cpu_name_is_a_clear_error():
  out = run_tg(ADD_ONE, DEV="CPU:LLVM:notacpu")
  assert out.returncode == 1 and "LLVM ERROR" not in out.stderr, out.stderr[-2000:]
  assert "SwitchError: DEV='CPU:LLVM:notacpu': 'notacpu' is not a CPU LLVM knows for" in out.stderr.splitlines()[-1]
  out = run_tg(ADD_ONE, DEV="CPU:LLVM:+notafeature")
  assert out.returncode == 1 and "LLVM knows no feature 'notafeature'" in out.stderr.splitlines()[-1], out.stderr[-2000:]

def test_features_this_cpu_lacks_are_refused_by_name():
  _, lacking = host_features()
  if not lacking: pytest.skip("this CPU reports every feature LLVM knows")
  out = run_tg(ADD_ONE, DEV=f"CPU:LLVM:+{lacking[0]}")
  assert out.returncode == 1 and f"needs {lacking[0]}" in out.stderr.splitlines()[-1] and "which this machine's CPU lacks" in out.stderr, out.stderr[-2000:]

@pytest.mark.skipif(os.uname().machine != "x86_64", reason="an x86 CPU model")
def test_cpu_model_with_features_this_cpu_lacks_is_refused():
  """bdver2 (AMD Piledriver) has XOP and FMA4, which no Intel CPU and no AMD CPU since Zen has: its code would die with SIGILL."""
  if "xop" in host_features()[0]: pytest.skip("this CPU has XOP")
  out = run_tg("from tg import Tensor; a = Tensor.rand(64, 64); print((a @ a).sum().item(), (a * a + a).sum().item())", DEV="CPU:LLVM:bdver2")
  assert out.returncode == 1 and "xop" in out.stderr.splitlines()[-1] and "which this machine's CPU lacks" in out.stderr, (out.returncode, out.stderr[-2000:])
  out = run_tg(ADD_ONE, DEV="CPU:LLVM:i386")  # a 32-bit CPU: LLVM can't make x86_64 code for it and would end the process
  assert out.returncode == 1 and "SwitchError: DEV='CPU:LLVM:i386': LLVM can't compile for" in out.stderr and "64-bit" in out.stderr.splitlines()[-1], out.stderr[-2000:]

def test_features_this_cpu_has_can_be_named():
  have, _ = host_features()
  feature = next(f for f in ("avx2", "sse4.2", "neon", "fp-armv8") if f in have)
  for arch in (f"+{feature}", f"{os.uname().machine},+{feature}"):
    out = run_tg(ADD_ONE, DEV=f"CPU:LLVM:{arch}")
    assert out.returncode == 0 and out.stdout.split("\n")[0] == "[4.0, 9.0]", (arch, out.stderr[-2000:])

def test_buffer_larger_than_the_device_is_refused_without_asking_it(monkeypatch):
  alloc = Device["CPU"].allocator
  assert alloc.capacity == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  monkeypatch.setattr(type(alloc), "_alloc", lambda self, size, options=None: pytest.fail("the allocator was asked"))
  with pytest.raises(MemoryError, match=rf"can't allocate {alloc.capacity + 1} bytes on CPU: it has {alloc.capacity} bytes of memory"):
    Buffer("CPU", alloc.capacity + 1, dtypes.uint8).allocate()

def test_too_large_tensor_fails_at_once_and_the_process_exits():
  n = Device["CPU"].allocator.capacity // 8 + 1024
  if n > 2**34: pytest.skip("the kernel that fills it would have more iterations than a CPU kernel's int32 bounds hold")
  code = f"from tg import Tensor\ntry: Tensor.ones({n}, dtype='float64').contiguous().realize()\nexcept MemoryError as e: print(e)\n"
  start = time.perf_counter()
  out = run_tg(code, DEV="CPU")
  assert out.returncode == 0 and time.perf_counter() - start < 60, out.stderr[-2000:]
  assert out.stdout == f"can't allocate {8 * n} bytes on CPU: it has {Device['CPU'].allocator.capacity} bytes of memory\n", out.stdout
