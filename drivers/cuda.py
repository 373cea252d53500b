"""CUDA: the same PTX kernels through NVIDIA's driver library (libcuda, via cffi), the vendor path the NV driver is
measured against. The driver library JIT-compiles the PTX itself (cuModuleLoadData), so no ptxas is needed. With
DEV=MOCK+CUDA the library is the software model drivers/mock/nv/libcuda.py."""
from __future__ import annotations
import contextlib, time
import cffi
from ir.dtype import C_TYPES
from ir.switches import DEV
from ir.target import parse_targets, target_for
from codegen.compiler import Compiler
from codegen.ptx import PTXRenderer
from codegen.renderer import ProgramSpec
from drivers.device import Compiled, DeviceUnavailable, LRUAllocator
from drivers.system import System, system_for

ffi = cffi.FFI()
ffi.cdef("""
typedef int CUresult; typedef int CUdevice; typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext; typedef struct CUmod_st *CUmodule; typedef struct CUfunc_st *CUfunction; typedef struct CUstream_st *CUstream;
CUresult cuInit(unsigned int flags);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice device);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice device);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxSynchronize(void);
CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t size);
CUresult cuMemFree_v2(CUdeviceptr ptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t size);
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t size);
CUresult cuModuleLoadData(CUmodule *module, const void *image);
CUresult cuModuleUnload(CUmodule module);
CUresult cuModuleGetFunction(CUfunction *fn, CUmodule module, const char *name);
CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz,
                        unsigned int shared, CUstream stream, void **params, void **extra);
CUresult cuGetErrorString(CUresult error, const char **str);
""")
CC_MAJOR, CC_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_*

class CUDAError(RuntimeError): pass

class _Driver:
  """libcuda, with every call checked."""
  def __init__(self, system: System):
    try: self.lib = system.library(ffi, "cuda")
    except OSError: raise DeviceUnavailable("CUDA unavailable: libcuda.so (the NVIDIA driver library) not found") from None
  def __call__(self, fn: str, *args) -> None:
    if (status := getattr(self.lib, fn)(*args)) != 0:
      msg = ffi.new("const char **")
      self.lib.cuGetErrorString(status, msg)
      raise CUDAError(f"{fn} failed: {ffi.string(msg[0]).decode() if msg[0] != ffi.NULL else 'error'} ({status})")

class CUDAAllocator(LRUAllocator):
  def __init__(self, dev: CUDADevice):
    super().__init__()
    self.dev = dev
  def _alloc(self, size: int, options=None) -> int:
    ptr = ffi.new("CUdeviceptr *")
    try: self.dev.cu("cuMemAlloc_v2", ptr, max(size, 1))
    except CUDAError as e: raise MemoryError(str(e)) from None
    return ptr[0]
  def _free(self, opaque: int, size: int, options=None) -> None: self.dev.cu("cuMemFree_v2", opaque)
  def offset(self, opaque: int, size: int, offset: int) -> int: return opaque + offset
  def copyin(self, dest: int, src: memoryview) -> None: self.dev.cu("cuMemcpyHtoD_v2", dest, ffi.from_buffer(src), src.nbytes)
  def copyout(self, dest: memoryview, src: int) -> None:
    self.dev.synchronize()
    self.dev.cu("cuMemcpyDtoH_v2", ffi.from_buffer(dest, require_writable=True), src, dest.nbytes)

class PTXText(Compiler):
  """The 'binary' CUDA loads is the PTX text itself."""
  def __init__(self, arch: str): super().__init__(f"ptx_{arch}")
  def compile(self, src: str) -> bytes: return src.encode() + b"\0"

class CUDAProgram:
  def __init__(self, dev: CUDADevice, name: str, lib: bytes, spec: ProgramSpec):
    self.dev, self.name = dev, name
    self.module, fn = ffi.new("CUmodule *"), ffi.new("CUfunction *")
    dev.cu("cuModuleLoadData", self.module, lib)
    dev.cu("cuModuleGetFunction", fn, self.module[0], name.encode())
    self.fn, self.var_types = fn[0], [C_TYPES[v.dtype] for v in spec.vars]
  def __del__(self):
    with contextlib.suppress(Exception): self.dev.cu("cuModuleUnload", self.module[0])  # the library may be gone at exit
  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=None, vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    values = [ffi.new("CUdeviceptr *", b) for b in bufs] + [ffi.new(f"{t} *", v) for t, v in zip(self.var_types, vals)]
    params = ffi.new("void *[]", [ffi.cast("void *", v) for v in values])
    local_size = tuple(local_size or (1, 1, 1))
    if wait: self.dev.synchronize()
    st = time.perf_counter()
    self.dev.cu("cuLaunchKernel", self.fn, *global_size, *local_size, 0, ffi.NULL, params, ffi.NULL)
    if not wait: return None
    self.dev.synchronize()
    return time.perf_counter() - st

class CUDADevice(Compiled):
  def __init__(self, device: str):
    target = target_for(parse_targets(DEV.value), "CUDA")
    if target.renderer not in ("", "PTX"): raise ValueError(f"CUDA has no renderer {target.renderer!r} (known: PTX)")
    self.cu = _Driver(system_for(target.interface))
    index = int(device.split(":")[1]) if ":" in device else 0
    count, handle, ctx = ffi.new("int *"), ffi.new("CUdevice *"), ffi.new("CUcontext *")
    try:
      self.cu("cuInit", 0)
      self.cu("cuDeviceGetCount", count)
    except CUDAError as e: raise DeviceUnavailable(f"CUDA unavailable: {e}") from None
    if index >= count[0]: raise DeviceUnavailable(f"CUDA unavailable: {device} asked for, the driver reports {count[0]} GPU(s)")
    self.cu("cuDeviceGet", handle, index)
    cc = [ffi.new("int *"), ffi.new("int *")]
    for attr, out in zip((CC_MAJOR, CC_MINOR), cc): self.cu("cuDeviceGetAttribute", out, attr, handle[0])
    self.cu("cuDevicePrimaryCtxRetain", ctx, handle[0])
    self.context = ctx[0]
    self.cu("cuCtxSetCurrent", self.context)
    arch = target.arch or f"sm_{cc[0][0]}{cc[1][0]}" + ("a" if (cc[0][0], cc[1][0]) == (9, 0) else "")  # wgmma needs sm_90a
    super().__init__(device, CUDAAllocator(self), PTXRenderer(arch), PTXText(arch), lambda name, lib, spec: CUDAProgram(self, name, lib, spec))
  def synchronize(self) -> None: self.cu("cuCtxSynchronize")
