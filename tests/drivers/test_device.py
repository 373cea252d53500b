import ctypes.util, gc, os, subprocess, sys, pathlib
import numpy as np
import pytest
from ir.dtype import dtypes
from ir.switches import Context
from drivers.device import Buffer, Compiled, Device, DeviceUnavailable, GlobalCounters

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
def test_nv_without_the_kernel_module_says_why_and_default_moves_on():
  with pytest.raises(DeviceUnavailable, match=r"NV unavailable: no NVIDIA kernel module \(can't open /dev/nvidiactl"): Device["NV"]
  env = {k: v for k, v in os.environ.items() if k != "DEV"}  # the probe for a default tries NV (and CUDA) before CPU
  out = subprocess.run([sys.executable, "-c", "from tg import Device; print(Device.DEFAULT)"], env=env, capture_output=True, text=True, cwd=ROOT, check=True)
  assert out.stdout.split() == ["CPU"]

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
  assert lines[-2].startswith("opened device CPU from pid:") and lines[-1] == "CPU"

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
