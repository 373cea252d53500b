"""DISK device: a file as device memory, through mmap. It runs no kernels; tensors on it are read by copying (views
of it are byte ranges) and written by copying into it."""
from __future__ import annotations
import mmap, os
from dataclasses import dataclass
from drivers.device import Allocator, Compiled

@dataclass(frozen=True)
class DiskRegion:
  device: "DiskDevice"
  offset: int
  size: int

class DiskAllocator(Allocator):
  def __init__(self, dev: DiskDevice): self.dev = dev
  def alloc(self, size: int, options=None) -> DiskRegion:
    self.dev.open(size)
    return DiskRegion(self.dev, 0, size)
  def offset(self, opaque: DiskRegion, size: int, offset: int) -> DiskRegion: return DiskRegion(self.dev, opaque.offset + offset, size)
  def copyin(self, dest: DiskRegion, src: memoryview) -> None:
    if not self.dev.writable: raise PermissionError(f"{self.dev.path} is opened read-only")
    self.dev.mem[dest.offset:dest.offset + dest.size] = src
  def copyout(self, dest: memoryview, src: DiskRegion) -> None: dest[:] = self.dev.mem[src.offset:src.offset + src.size]

class DiskDevice(Compiled):
  def __init__(self, device: str):
    self.path = device.split(":", 1)[1] if ":" in device else ""
    if not self.path: raise ValueError("a DISK device needs a path: DISK:/path/to/file")
    self.mem: mmap.mmap | None = None
    self.writable = False
    super().__init__(device, DiskAllocator(self), None, None, None)

  def open(self, size: int) -> None:
    """Map the file, creating (or growing) it to `size` bytes when it is shorter."""
    if self.mem is not None and len(self.mem) >= size: return
    exists = os.path.exists(self.path)
    if exists and os.path.getsize(self.path) >= size:
      self.writable = os.access(self.path, os.W_OK)
      with open(self.path, "r+b" if self.writable else "rb") as f:
        self.mem = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ) if size else mmap.mmap(-1, 1)
      return
    with open(self.path, "r+b" if exists else "w+b") as f:
      f.truncate(size)
      self.mem, self.writable = (mmap.mmap(f.fileno(), 0) if size else mmap.mmap(-1, 1)), True
