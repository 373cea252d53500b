"""A model of NVIDIA's driver library (libcuda) for DEV=MOCK+CUDA: the driver-API calls drivers/cuda.py makes, with
their C calling conventions (results through cffi out-pointers, CUresult codes), over device memory made of numpy
arrays. cuModuleLoadData takes PTX text, as the real library's JIT does, and launches run it on the reference PTX
interpreter, synchronously. MOCKGPU_ARCH picks the GPU (its compute capability), as for the NV model."""
from __future__ import annotations
import itertools
import numpy as np
from ir.helpers import round_up
from ir.switches import getenv
from drivers.mock import DeviceModel
from drivers.mock.nv.gpu import ARCHS
from drivers.mock.nv.model import VRAM_BYTES
from drivers.mock.nv.ptx_interpreter import ArrayMemory, PTXError, PTXFault, PTXModule

# CUresult codes (cuda.h) and their cuGetErrorString texts
SUCCESS, INVALID_VALUE, OUT_OF_MEMORY, INVALID_DEVICE, INVALID_PTX, INVALID_HANDLE, NOT_FOUND, ILLEGAL_ADDRESS, LAUNCH_FAILED = \
  0, 1, 2, 101, 218, 400, 500, 700, 719
MESSAGES = {SUCCESS: "no error", INVALID_VALUE: "invalid argument", OUT_OF_MEMORY: "out of memory", INVALID_DEVICE: "invalid device ordinal",
            INVALID_PTX: "a PTX JIT compilation failed", INVALID_HANDLE: "invalid resource handle", NOT_FOUND: "named symbol not found",
            ILLEGAL_ADDRESS: "an illegal memory access was encountered", LAUNCH_FAILED: "unspecified launch failure"}
COMPUTE_CAPABILITY_MAJOR, COMPUTE_CAPABILITY_MINOR = 75, 76  # CUdevice_attribute
BASE_VA, ALIGN = 0x7F00_0000_0000, 256  # where allocations start; cuMemAlloc aligns at least this much

class LibCUDA:
  """The library object drivers/cuda.py calls: one GPU, one context, modules and functions as integer handles."""
  def __init__(self, ffi, arch: str):
    if arch not in ARCHS: raise ValueError(f"MOCKGPU_ARCH={arch!r}: the CUDA model knows {', '.join(ARCHS)}")
    self.ffi, self.cc = ffi, divmod(ARCHS[arch].sm, 10)
    self.memory, self.sizes, self.next_va = ArrayMemory(), {}, BASE_VA
    self.modules: dict[int, PTXModule] = {}
    self.functions: dict[int, tuple[PTXModule, str]] = {}
    self.handles = itertools.count(1)
    self.strings = {code: ffi.new("char[]", text.encode()) for code, text in MESSAGES.items()}  # kept alive for the caller

  def _out(self, ptr, ctype: str, value) -> int:
    ptr[0] = self.ffi.cast(ctype, value) if ctype else value
    return SUCCESS

  def cuInit(self, flags: int) -> int: return SUCCESS if flags == 0 else INVALID_VALUE
  def cuDeviceGetCount(self, count) -> int: return self._out(count, "", 1)
  def cuDeviceGet(self, device, ordinal: int) -> int: return self._out(device, "", 0) if ordinal == 0 else INVALID_DEVICE
  def cuDeviceGetAttribute(self, value, attribute: int, device: int) -> int:
    if device != 0: return INVALID_DEVICE
    if attribute not in (COMPUTE_CAPABILITY_MAJOR, COMPUTE_CAPABILITY_MINOR): return INVALID_VALUE
    return self._out(value, "", self.cc[attribute == COMPUTE_CAPABILITY_MINOR])
  def cuDevicePrimaryCtxRetain(self, ctx, device: int) -> int: return self._out(ctx, "CUcontext", 1) if device == 0 else INVALID_DEVICE
  def cuCtxSetCurrent(self, ctx) -> int: return SUCCESS
  def cuCtxSynchronize(self) -> int: return SUCCESS  # launches and copies complete before they return

  def cuMemAlloc_v2(self, ptr, size: int) -> int:
    if size == 0: return INVALID_VALUE
    if sum(self.sizes.values()) + size > VRAM_BYTES: return OUT_OF_MEMORY
    va, self.next_va = self.next_va, round_up(self.next_va + size, ALIGN)
    self.memory.add(va, np.zeros(size, np.uint8))
    self.sizes[va] = size
    return self._out(ptr, "", va)
  def cuMemFree_v2(self, va: int) -> int:
    if self.sizes.pop(va, None) is None: return INVALID_VALUE
    self.memory.remove(va)
    return SUCCESS
  def _span(self, va: int, size: int) -> np.ndarray | None:
    try: return self.memory.span(va, size)
    except PTXFault: return None
  def cuMemcpyHtoD_v2(self, dst: int, src, size: int) -> int:
    if (span := self._span(dst, size)) is None: return INVALID_VALUE
    span[:] = np.frombuffer(self.ffi.buffer(src, size), np.uint8)
    return SUCCESS
  def cuMemcpyDtoH_v2(self, dst, src: int, size: int) -> int:
    if (span := self._span(src, size)) is None: return INVALID_VALUE
    self.ffi.buffer(dst, size)[:] = span.tobytes()
    return SUCCESS

  def cuModuleLoadData(self, module, image: bytes) -> int:
    try: loaded = PTXModule(bytes(image).split(b"\0", 1)[0].decode())
    except (PTXError, UnicodeDecodeError): return INVALID_PTX
    self.modules[handle := next(self.handles)] = loaded
    return self._out(module, "CUmodule", handle)
  def cuModuleUnload(self, module) -> int:
    return SUCCESS if self.modules.pop(int(self.ffi.cast("uintptr_t", module)), None) is not None else INVALID_HANDLE
  def cuModuleGetFunction(self, fn, module, name: bytes) -> int:
    if (loaded := self.modules.get(int(self.ffi.cast("uintptr_t", module)))) is None: return INVALID_HANDLE
    if name.decode() not in loaded.entries: return NOT_FOUND
    self.functions[handle := next(self.handles)] = (loaded, name.decode())
    return self._out(fn, "CUfunction", handle)
  def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared: int, stream, params, extra) -> int:
    if (found := self.functions.get(int(self.ffi.cast("uintptr_t", fn)))) is None: return INVALID_HANDLE
    module, entry = found
    layout = module.param_layout(entry)
    packed = bytearray(module.param_size(entry))
    for i, (_, _, offset, size) in enumerate(layout): packed[offset:offset + size] = self.ffi.buffer(params[i], size)
    try: module.run(entry, (gx, gy, gz), (bx, by, bz), bytes(packed), self.memory, dynamic_shared=shared)
    except PTXFault: return ILLEGAL_ADDRESS
    except PTXError: return LAUNCH_FAILED
    return SUCCESS
  def cuGetErrorString(self, status: int, text) -> int:
    if status not in self.strings: return INVALID_VALUE
    return self._out(text, "", self.strings[status])

class LibCUDAModel(DeviceModel):
  """The MOCK system's libcuda: a fresh library (one GPU of `arch`, default MOCKGPU_ARCH) each time it is loaded."""
  def __init__(self, arch: str | None = None): self.arch = arch or getenv("MOCKGPU_ARCH", "hopper")
  def library(self, ffi) -> LibCUDA: return LibCUDA(ffi, self.arch)
