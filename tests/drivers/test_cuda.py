"""The CUDA device (libcuda's driver API through cffi) against the libcuda model, in this process: kernels rendered
by tg and loaded as PTX run there and match numpy (tensor cores included), programs unload their modules, and the
library's failures surface as errors naming the call, the ordinal or the size."""
import gc
import numpy as np
import pytest
from codegen.program import get_program
from drivers.cuda import CUDADevice, CUDAError
from drivers.device import DeviceUnavailable
from drivers.mock import mock_system
from drivers.mock.nv.libcuda import LibCUDAModel
from ir.ops import Ops
from ir.switches import Context
from tg import Tensor
from tg.numpy_bridge import storage_dtype

def open_cuda(arch: str, device: str = "CUDA") -> CUDADevice:
  mock_system.register("libcuda", LibCUDAModel(arch))
  with Context(DEV="MOCK+CUDA"): return CUDADevice(device)

def run_on(dev: CUDADevice, out: Tensor) -> tuple[np.ndarray, object, object]:
  """Compiles `out`'s one kernel (inputs: realized CPU tensors) for dev, runs it there; (result as float32, its
  ProgramSpec, the program)."""
  (item,) = [i for i in out.schedule() if i.ast.op is Ops.SINK]
  spec = get_program(item.ast, dev.renderer)
  prg = dev.runtime(spec.name, dev.compiler.compile(spec.src), spec)
  bufs = [dev.allocator.alloc(max(b.nbytes, 1)) for b in item.bufs]
  for buf, b in zip(bufs[1:], item.bufs[1:]): dev.allocator.copyin(buf, memoryview(b.as_bytes()))
  prg(*bufs, global_size=spec.global_size, local_size=spec.local_size, wait=True)
  raw = np.empty(out.shape, storage_dtype(out.dtype))
  dev.allocator.copyout(memoryview(raw).cast("B"), bufs[0])
  return raw.astype(np.float32), spec, prg

@pytest.mark.parametrize("arch,cc", [("ampere", "sm_86"), ("hopper", "sm_90a")])
def test_kernels_run_through_the_driver_api(arch, cc):
  dev = open_cuda(arch)
  assert dev.renderer.arch == cc
  rng = np.random.default_rng(0)
  x, y = rng.standard_normal((64, 48), dtype=np.float32), rng.standard_normal((48, 64), dtype=np.float32)
  got = run_on(dev, (Tensor(x) @ Tensor(y)).relu())[0]
  np.testing.assert_allclose(got, np.maximum(x @ y, 0), rtol=1e-5, atol=1e-5)
  big = rng.standard_normal(5000).astype(np.float32)
  np.testing.assert_allclose(run_on(dev, Tensor(big).sum())[0], big.sum(dtype=np.float64), rtol=1e-5, atol=1e-4)
  xh, yh = Tensor(x).half().realize(), Tensor(y).half().realize()
  got, spec, _ = run_on(dev, xh @ yh)
  assert ("wgmma.mma_async" if arch == "hopper" else "mma.sync") in spec.src  # tensor cores
  np.testing.assert_allclose(got, xh.numpy().astype(np.float64) @ yh.numpy().astype(np.float64), rtol=2e-3, atol=2e-3)

def test_programs_unload_their_modules():
  dev = open_cuda("hopper")
  lib = dev.cu.lib
  prg = run_on(dev, Tensor(np.arange(8, dtype=np.float32)) * 2)[2]
  assert len(lib.modules) == 1
  del prg
  gc.collect()
  assert lib.modules == {}

def test_failures_name_the_call():
  dev = open_cuda("hopper")
  with pytest.raises(CUDAError, match=r"cuModuleLoadData failed: a PTX JIT compilation failed \(218\)"):
    dev.runtime("k", b"this is not PTX\0", None)
  spec = get_program([i for i in (Tensor(np.ones(4, np.float32)) + 1).schedule() if i.ast.op is Ops.SINK][0].ast, dev.renderer)
  prg = dev.runtime(spec.name, dev.compiler.compile(spec.src), spec)
  out = dev.allocator.alloc(16)
  with pytest.raises(CUDAError, match=r"cuLaunchKernel failed: an illegal memory access was encountered \(700\)"):
    prg(out, 0x1000, global_size=spec.global_size, local_size=spec.local_size, wait=True)  # the input is no device memory
  with pytest.raises(MemoryError, match="out of memory"): dev.allocator.alloc(64 << 30)
  with pytest.raises(DeviceUnavailable, match=r"CUDA:1 asked for, the driver reports 1 GPU"): open_cuda("hopper", "CUDA:1")
