"""The one place that talks to the operating system: libc through cffi (memory mappings for now)."""
from __future__ import annotations
import os
import cffi

ffi = cffi.FFI()
ffi.cdef("""
void *mmap(void *addr, size_t length, int prot, int flags, int fd, long offset);
int munmap(void *addr, size_t length);
int mprotect(void *addr, size_t len, int prot);
void *dlopen(const char *filename, int flags);
void *dlsym(void *handle, const char *symbol);
""")
libc = ffi.dlopen(None)

PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4
MAP_SHARED, MAP_PRIVATE, MAP_ANONYMOUS = 0x01, 0x02, 0x20
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_MAP_FAILED = 2**64 - 1

def _check(ret: int, call: str) -> int:
  if ret == -1 or ret == _MAP_FAILED:
    err = ffi.errno
    raise OSError(err, f"{call} failed: {os.strerror(err)}")
  return ret

def mmap_anonymous(size: int, prot: int = PROT_READ | PROT_WRITE) -> int:
  """Address of `size` bytes of fresh zeroed private memory."""
  return _check(int(ffi.cast("uintptr_t", libc.mmap(ffi.NULL, size, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))), f"mmap({size} bytes)")

def munmap(addr: int, size: int) -> None: _check(libc.munmap(ffi.cast("void*", addr), size), f"munmap({addr:#x}, {size})")
def mprotect(addr: int, size: int, prot: int) -> None: _check(libc.mprotect(ffi.cast("void*", addr), size, prot), f"mprotect({addr:#x}, {size}, {prot})")

def memoryview_at(addr: int, size: int) -> memoryview:
  """A writable byte view of process memory at `addr` (the caller keeps the memory alive)."""
  return memoryview(ffi.buffer(ffi.cast("char*", addr), size)).cast("B")

def address_of(buf) -> int:
  """Address of the first byte of a writable buffer-protocol object (numpy array, bytearray, memoryview)."""
  return int(ffi.cast("uintptr_t", ffi.from_buffer(buf, require_writable=True)))

RTLD_NOW = 2
_libraries: dict[str | None, object] = {}

def find_symbol(name: str, libraries: tuple[str | None, ...] = (None, "libm.so.6", "libgcc_s.so.1")) -> int | None:
  """Address of a symbol in the process or in one of `libraries` (loaded on first use), or None."""
  for lib in libraries:
    if lib not in _libraries:
      handle = libc.dlopen(lib.encode() if lib else ffi.NULL, RTLD_NOW)
      _libraries[lib] = handle if handle != ffi.NULL else None
    if _libraries[lib] is not None and (addr := libc.dlsym(_libraries[lib], name.encode())) != ffi.NULL:
      return int(ffi.cast("uintptr_t", addr))
  return None
