"""DISK device: a file as device memory. It runs no kernels; tensors on it are read by copying (views of it are byte
ranges) and written by copying into it. Copies go through the file descriptor (preadv/pwritev), not a mapping: a
mapped file that another process truncates kills the reader with SIGBUS, while a short read is an error to raise."""
from __future__ import annotations
import os, weakref
from dataclasses import dataclass
from drivers.device import Allocator, Compiled

class DiskFile:
  """One opening of the file; the descriptor is closed when the last region made from it is gone."""
  def __init__(self, path: str, writable: bool):
    self.path, self.writable = path, writable
    self.fd = os.open(path, os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY, 0o666)
    weakref.finalize(self, os.close, self.fd)

@dataclass(frozen=True)
class DiskRegion:
  """Bytes [offset, offset+size) of one opening of the file (a buffer keeps the opening it was made from)."""
  file: DiskFile
  offset: int
  size: int

class DiskAllocator(Allocator):
  def __init__(self, dev: DiskDevice): self.dev = dev
  def alloc(self, size: int, options=None) -> DiskRegion: return DiskRegion(self.dev.open(size), 0, size)
  def offset(self, opaque: DiskRegion, size: int, offset: int) -> DiskRegion: return DiskRegion(opaque.file, opaque.offset + offset, size)
  def copyin(self, dest: DiskRegion, src: memoryview) -> None:
    if not dest.file.writable: raise PermissionError(f"{self.dev.path} is opened read-only")
    done = 0
    while done < dest.size: done += os.pwritev(dest.file.fd, [src[done:]], dest.offset + done)  # a write may stop short at 2 GiB
  def copyout(self, dest: memoryview, src: DiskRegion) -> None:
    done = 0
    while done < src.size:
      if (n := os.preadv(src.file.fd, [dest[done:]], src.offset + done)) == 0:
        raise OSError(f"{src.file.path}: can't read {src.size} bytes at offset {src.offset}: the file is now {os.fstat(src.file.fd).st_size} "
                      "bytes (truncated by another process?)")
      done += n

class DiskDevice(Compiled):
  def __init__(self, device: str):
    self.path = device.split(":", 1)[1] if ":" in device else ""
    if not self.path: raise ValueError("a DISK device needs a path: DISK:/path/to/file")
    self._opened: tuple[tuple[int, int], DiskFile] | None = None  # ((st_dev, st_ino), opening) of the current file
    super().__init__(device, DiskAllocator(self), None, None, None)

  def open(self, size: int) -> DiskFile:
    """The file as it is now (a replaced file is opened again), at least `size` bytes long: a missing or shorter file
    is created or extended."""
    st = os.stat(self.path) if os.path.exists(self.path) else None
    if self._opened is not None and st is not None and self._opened[0] == (st.st_dev, st.st_ino) and st.st_size >= size: return self._opened[1]
    if st is not None and st.st_size >= size: f = DiskFile(self.path, os.access(self.path, os.W_OK))
    else:
      f = DiskFile(self.path, True)
      os.ftruncate(f.fd, size)
    st = os.fstat(f.fd)
    self._opened = ((st.st_dev, st.st_ino), f)
    return f
