"""DISK device: a file as device memory, through mmap. It runs no kernels; tensors on it are read by copying (views
of it are byte ranges) and written by copying into it."""
from __future__ import annotations
import mmap, os
from dataclasses import dataclass
from drivers.device import Allocator, Compiled

@dataclass(frozen=True)
class DiskRegion:
  """Bytes [offset, offset+size) of one mapping of the file (a buffer keeps the mapping it was made from)."""
  mem: mmap.mmap
  writable: bool
  offset: int
  size: int

class DiskAllocator(Allocator):
  def __init__(self, dev: DiskDevice): self.dev = dev
  def alloc(self, size: int, options=None) -> DiskRegion:
    mem, writable = self.dev.open(size)
    return DiskRegion(mem, writable, 0, size)
  def offset(self, opaque: DiskRegion, size: int, offset: int) -> DiskRegion: return DiskRegion(opaque.mem, opaque.writable, opaque.offset + offset, size)
  def copyin(self, dest: DiskRegion, src: memoryview) -> None:
    if not dest.writable: raise PermissionError(f"{self.dev.path} is opened read-only")
    dest.mem[dest.offset:dest.offset + dest.size] = src
  def copyout(self, dest: memoryview, src: DiskRegion) -> None: dest[:] = src.mem[src.offset:src.offset + src.size]

class DiskDevice(Compiled):
  def __init__(self, device: str):
    self.path = device.split(":", 1)[1] if ":" in device else ""
    if not self.path: raise ValueError("a DISK device needs a path: DISK:/path/to/file")
    self._mapped: tuple | None = None  # (file identity, mapping, writable) of the current file
    super().__init__(device, DiskAllocator(self), None, None, None)

  def open(self, size: int) -> tuple[mmap.mmap, bool]:
    """A mapping of the file as it is now (a replaced or regrown file is mapped again), at least `size` bytes;
    a missing or shorter file is created or extended."""
    st = os.stat(self.path) if os.path.exists(self.path) else None
    identity = (st.st_ino, st.st_size, st.st_mtime_ns) if st else None
    if self._mapped is not None and self._mapped[0] == identity and len(self._mapped[1]) >= size: return self._mapped[1], self._mapped[2]
    if st is not None and st.st_size >= size:
      writable = os.access(self.path, os.W_OK)
      with open(self.path, "r+b" if writable else "rb") as f:
        mem = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ) if st.st_size else mmap.mmap(-1, 1)
    else:
      with open(self.path, "r+b" if st else "w+b") as f:
        f.truncate(size)
        mem, writable = (mmap.mmap(f.fileno(), 0) if size else mmap.mmap(-1, 1)), True
      st = os.stat(self.path)
      identity = (st.st_ino, st.st_size, st.st_mtime_ns)
    self._mapped = (identity, mem, writable)
    return mem, writable
