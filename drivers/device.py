"""Devices and their memory: the registry (`Device["CPU"]`, `Device.DEFAULT`), `Buffer`, allocators, and the base
of devices that compile and run kernels."""
from __future__ import annotations
import importlib, os
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable
from ir.dtype import DType, Image, PtrDType, dtypes
from ir.helpers import prod
from ir.switches import DEBUG, DEV, SwitchError
from ir.target import parse_targets

class GlobalCounters:
  """Totals since the last `reset()`: kernels run, arithmetic ops, bytes moved, seconds; plus bytes allocated now."""
  global_ops: int = 0
  global_mem: int = 0
  time_sum_s: float = 0.0
  kernel_count: int = 0
  mem_used: int = 0
  @staticmethod
  def reset() -> None: GlobalCounters.global_ops, GlobalCounters.global_mem, GlobalCounters.time_sum_s, GlobalCounters.kernel_count = 0, 0, 0.0, 0

# ---------------- allocators ----------------

@dataclass(frozen=True)
class HostMemory:
  """Buffer options for memory the caller owns at host address `address` (Tensor.from_blob): used in place, never freed."""
  address: int

IMAGE_DTYPES = (dtypes.float32, dtypes.float16)

def image_for(shape: tuple, dtype: DType, max_size: tuple[int, int] | None) -> Image | None:
  """The image holding a tensor of `shape` within `max_size` (width, height): a row per index of all but the last two
  axes (an NHWC tensor: a row per line of each picture), else wider rows, else the last axis alone. None where the
  device has no images or the tensor can't be one (dtype, symbolic size, last axis not a multiple of 4 elements)."""
  if max_size is None or dtype not in IMAGE_DTYPES or not shape or not all(isinstance(d, int) for d in shape) or shape[-1] % 4: return None
  total = prod(shape) // 4
  for axis in sorted(range(len(shape)), key=lambda a: (a == len(shape) - 1 and len(shape) > 1, -a)):
    width = prod(shape[axis:]) // 4
    if 0 < width <= max_size[0] and total // width <= max_size[1]: return Image(total // width, width)
  return None

class Allocator:
  """Device memory: `alloc` returns an opaque handle; `offset` makes a handle to part of one. `capacity`: the bytes
  the device has (None: unknown); a buffer larger than that is refused before asking the device. An allocator that
  `uses_host_memory` can `wrap` the caller's host memory as a handle (and `unwrap` it, leaving the memory alone)."""
  capacity: int | None = None
  uses_host_memory: bool = False
  def alloc(self, size: int, options: Any = None) -> Any: raise NotImplementedError
  def free(self, opaque: Any, size: int, options: Any = None) -> None: pass
  def wrap(self, address: int, size: int) -> Any: raise NotImplementedError(f"{type(self).__name__} can't use host memory in place")
  def unwrap(self, opaque: Any) -> None: pass
  def copyin(self, dest: Any, src: memoryview) -> None: raise NotImplementedError
  def copyout(self, dest: memoryview, src: Any) -> None: raise NotImplementedError
  def offset(self, opaque: Any, size: int, offset: int) -> Any: raise NotImplementedError(f"{type(self).__name__} has no sub-buffers")

class LRUAllocator(Allocator):
  """Keeps freed memory by (size, options) and hands it out again before asking the device for more."""
  def __init__(self): self.cache: dict[tuple[int, Any], list[Any]] = defaultdict(list)
  def _alloc(self, size: int, options: Any) -> Any: raise NotImplementedError
  def _free(self, opaque: Any, size: int, options: Any) -> None: pass
  def alloc(self, size: int, options: Any = None) -> Any:
    if cached := self.cache.get((size, options)): return cached.pop()
    try: return self._alloc(size, options)
    except MemoryError:
      self.free_cache()
      return self._alloc(size, options)
  def free(self, opaque: Any, size: int, options: Any = None) -> None: self.cache[(size, options)].append(opaque)
  def free_cache(self) -> None:
    for (size, options), opaques in self.cache.items():
      for o in opaques: self._free(o, size, options)
    self.cache.clear()

# ---------------- buffers ----------------

MAX_BUFFER_BYTES = 2**48

class Buffer:
  """`size` elements of `dtype` on `device`. Memory is taken on first use (`ensure_allocated`) and given back when
  the Buffer is garbage. A Buffer with a `base` is a view of part of that base's memory."""
  def __init__(self, device: str, size: int, dtype: DType, opaque: Any = None, options: Any = None,
               base: Buffer | None = None, offset: int = 0):
    if isinstance(size, bool) or not isinstance(size, int) or size < 0: raise ValueError(f"invalid buffer size {size!r} (need an int >= 0)")
    if isinstance(dtype, PtrDType) or dtype == dtypes.void or dtype.count != 1: raise TypeError(f"a buffer can't hold {dtype}")
    if size * dtype.itemsize > MAX_BUFFER_BYTES: raise MemoryError(f"buffer of {size} x {dtype} ({size * dtype.itemsize} bytes) is too large for {device}")
    self.device, self.size, self.dtype, self.options, self.offset = device, size, dtype, options, offset
    if base is not None:
      if base.base is not base: raise ValueError("a buffer view must be made from a base buffer")
      if offset < 0 or offset + self.nbytes > base.nbytes: raise ValueError(f"view of {self.nbytes} bytes at offset {offset} is outside a {base.nbytes}-byte buffer")
    self._base = base
    if opaque is not None: self.allocate(opaque)
  @property
  def base(self) -> Buffer: return self._base if self._base is not None else self
  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize
  @property
  def image(self) -> Image | None: return self.options if isinstance(self.options, Image) else None
  def __repr__(self) -> str:
    return f"<buf device:{self.device} size:{self.size} dtype:{self.dtype}{' offset:' + str(self.offset) if self._base else ''}>"
  def is_allocated(self) -> bool: return hasattr(self, "_buf")
  def ensure_allocated(self) -> Buffer: return self if self.is_allocated() else self.allocate()
  def allocate(self, opaque: Any = None) -> Buffer:
    assert not self.is_allocated(), "buffer is already allocated"
    dev = Device[self.device]
    if self._base is not None:
      self._base.ensure_allocated()
      self._buf = dev.allocator.offset(self._base._buf, self.nbytes, self.offset)
      return self
    dev.check_dtype(self.dtype)
    if opaque is None and isinstance(self.options, HostMemory):
      self._buf = dev.allocator.wrap(self.options.address, self.nbytes)
      return self
    if opaque is None:
      if (cap := dev.allocator.capacity) is not None and self.nbytes > cap:  # refused now: an overcommitted host would fail later, while in use
        raise MemoryError(f"can't allocate {self.nbytes} bytes on {self.device}: it has {cap} bytes of memory")
      try: opaque = dev.allocator.alloc(self.nbytes, self.options)
      except MemoryError as e: raise MemoryError(f"can't allocate {self.nbytes} bytes on {self.device}: {e}") from None
    self._buf = opaque
    GlobalCounters.mem_used += self.nbytes
    if DEBUG >= 7: print(f"buffer: allocate {self.nbytes} bytes on {self.device}")
    return self
  def __del__(self):
    if getattr(self, "_base", True) is not None or not self.is_allocated(): return  # a view, or never allocated
    if isinstance(self.options, HostMemory): Device[self.device].allocator.unwrap(self._buf)
    else:
      GlobalCounters.mem_used -= self.nbytes
      if DEBUG >= 7: print(f"buffer: deallocate {self.nbytes} bytes on {self.device}")
      Device[self.device].allocator.free(self._buf, self.nbytes, self.options)
  def view(self, size: int, dtype: DType, offset: int) -> Buffer:
    """A Buffer over `size` elements of `dtype` starting `offset` bytes into this one."""
    return Buffer(self.device, size, dtype, base=self.base, offset=self.offset + offset)
  def copyin(self, src: memoryview) -> Buffer:
    src = memoryview(src).cast("B")
    if src.nbytes != self.nbytes: raise ValueError(f"copyin of {src.nbytes} bytes into a {self.nbytes}-byte buffer")
    self.ensure_allocated()
    Device[self.device].synchronize()  # queued work may still read this memory
    Device[self.device].allocator.copyin(self._buf, src)
    return self
  def copyout(self, dest: memoryview) -> memoryview:
    dest = memoryview(dest).cast("B")
    if dest.nbytes != self.nbytes: raise ValueError(f"copyout of a {self.nbytes}-byte buffer into {dest.nbytes} bytes")
    self.ensure_allocated()
    Device[self.device].synchronize()
    Device[self.device].allocator.copyout(dest, self._buf)
    return dest
  def as_bytes(self) -> bytes:
    out = bytearray(self.nbytes)
    self.copyout(memoryview(out))
    return bytes(out)

# ---------------- devices ----------------

class Compiled:
  """A device that runs compiled kernels: memory (allocator), source (renderer), binaries (compiler) and the
  program runtime `runtime(name, lib, spec) -> callable(*bufs, global_size=, local_size=, vals=, wait=)`, and
  optionally a `graph(calls, input_slots)` that runs a batch of captured kernels as one (TinyJit)."""
  unsupported_dtypes: frozenset[DType] = frozenset()
  host_cpu: bool = False  # the host's CPU through another runtime (an OpenCL CPU device): never chosen as the default
  image_size: tuple[int, int] | None = None  # the largest 2-D image (width, height) in pixels; None: no images
  def __init__(self, device: str, allocator: Allocator, renderer, compiler, runtime: Callable, graph: Callable | None = None):
    self.device, self.allocator, self.renderer, self.compiler, self.runtime, self.graph = device, allocator, renderer, compiler, runtime, graph
  def synchronize(self) -> None: pass
  def check_dtype(self, dtype: DType) -> None:
    if dtype in self.unsupported_dtypes: raise TypeError(f"{self.device} can't hold {dtype}")

class DeviceUnavailable(RuntimeError): pass

# name -> "module:Class"; None where tg has no driver yet
DRIVERS: dict[str, str | None] = {
  "CPU": "drivers.cpu:CPUDevice", "METAL": None, "AMD": "drivers.amd.device:AMDDevice", "NV": "drivers.nv.device:NVDevice", "CUDA": "drivers.cuda:CUDADevice", "QCOM": "drivers.qcom.device:QCOMDevice", "CL": "drivers.cl:CLDevice",
  "DSP": None, "WEBGPU": "drivers.webgpu:WebGPUDevice", "PYTHON": "drivers.python:PythonDevice", "NULL": "drivers.null:NullDevice", "DISK": "drivers.disk:DiskDevice"}
ALL_DEVICES = ["METAL", "AMD", "NV", "CUDA", "QCOM", "CL", "CPU", "DSP", "WEBGPU"]  # the order Device.DEFAULT probes in

class _Device:
  def __init__(self):
    self._opened: dict[str, Compiled] = {}
    self._probed: str | None = None

  @staticmethod
  def canonicalize(name: str) -> str:
    """"cpu" -> "CPU", "nv:1" -> "NV:1", "cpu:0" -> "CPU"; a DISK path keeps its case."""
    if not isinstance(name, str) or not name: raise ValueError(f"invalid device name {name!r}")
    head, sep, rest = name.partition(":")
    head = head.upper()
    if head == "DISK": return f"DISK:{rest}" if sep else head
    if head not in DRIVERS: raise KeyError(f"unknown device {name!r}; known devices: {', '.join(DRIVERS)}")
    if sep and rest != "0" and not rest.isdigit(): raise ValueError(f"invalid device index in {name!r}")
    return head if not sep or rest == "0" else f"{head}:{int(rest)}"

  def __getitem__(self, name: str) -> Compiled:
    name = self.canonicalize(name)
    if (dev := self._opened.get(name)) is not None: return dev
    kind = name.split(":")[0]
    if (where := DRIVERS[kind]) is None: raise DeviceUnavailable(f"{kind} unavailable: tg has no {kind} driver yet")
    module, cls = where.split(":")
    try: dev = getattr(importlib.import_module(module), cls)(name)
    except (DeviceUnavailable, SwitchError): raise  # a bad switch value is the user's to fix, not a device to skip
    except Exception as e: raise DeviceUnavailable(f"{name} unavailable: {type(e).__name__}: {e}") from e
    if DEBUG >= 1: print(f"opened device {name} from pid:{os.getpid()}")
    self._opened[name] = dev
    return dev

  @property
  def DEFAULT(self) -> str:
    if targets := parse_targets(DEV.value):
      if targets[0].device: return self.canonicalize(targets[0].device)
    if self._probed is None:
      for kind in ALL_DEVICES:
        try: dev = self[kind]
        except DeviceUnavailable: continue
        if dev.host_cpu: continue  # tg's own CPU device is the better default
        self._probed = kind
        os.environ["DEV"] = os.environ.get("DEV") or kind  # child processes (BEAM workers) agree on the default
        break
      else: raise DeviceUnavailable(f"no usable devices (tried {', '.join(ALL_DEVICES)})")
    return self._probed
  @DEFAULT.setter
  def DEFAULT(self, _): raise AttributeError("Device.DEFAULT is read-only; use Context(DEV=...) or the DEV environment variable")

  def opened(self) -> list[str]: return list(self._opened)

Device = _Device()

def holds(device: str | tuple[str, ...], dtype: DType) -> bool:
  """Whether the device (every one of a sharded tensor's devices) can hold dtype."""
  return not any(dtype in Device[d].unsupported_dtypes for d in (device if isinstance(device, tuple) else (device,)))
