"""Host memory for devices whose kernels run in this process (CPU, PYTHON, NULL): 64-byte aligned numpy byte arrays;
a sub-buffer is a slice of its base. A buffer larger than the machine's physical memory is refused."""
from __future__ import annotations
import os
import numpy as np
from drivers.device import LRUAllocator
from drivers.system import memoryview_at

ALIGN = 64  # bytes: the widest vector register (AVX-512)

class HostBuffer(np.ndarray):
  """A byte array that knows its address (`addr`), taken once when the array (or a view of it) is made: kernels are
  called with it every launch, and numpy takes a microsecond to derive it."""
  def __array_finalize__(self, obj) -> None: self.addr: int = self.ctypes.data

def _with_address(a: np.ndarray) -> HostBuffer: return a.view(HostBuffer)

class HostAllocator(LRUAllocator):
  capacity = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  uses_host_memory = True
  def wrap(self, address: int, size: int) -> HostBuffer: return _with_address(np.frombuffer(memoryview_at(address, size), dtype=np.uint8))
  def _alloc(self, size: int, options=None) -> HostBuffer:
    raw = np.empty(size + ALIGN, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGN
    return _with_address(raw[start:start + size])
  def offset(self, opaque: np.ndarray, size: int, offset: int) -> HostBuffer: return _with_address(opaque[offset:offset + size])
  def copyin(self, dest: np.ndarray, src: memoryview) -> None: dest[:] = np.frombuffer(src, dtype=np.uint8)
  def copyout(self, dest: memoryview, src: np.ndarray) -> None: np.frombuffer(dest, dtype=np.uint8)[:] = src
