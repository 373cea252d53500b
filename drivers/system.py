"""The one place that talks to the operating system: libc through cffi. Drivers reach devices only through a
`System` (open, ioctl, mmap, sysfs, PCI enumeration); `system_for("MOCK")` gives the software model instead
(drivers/mock), so the same driver code runs against a model of the kernel interface and the GPU."""
from __future__ import annotations
import ctypes.util, errno, os, pathlib
from dataclasses import dataclass
import cffi
from ir.switches import TRACE_IOCTL
from drivers import trace_ioctl as trace

ffi = cffi.FFI()
ffi.cdef("""
void *mmap(void *addr, size_t length, int prot, int flags, int fd, long offset);
int munmap(void *addr, size_t length);
int mprotect(void *addr, size_t len, int prot);
void *dlopen(const char *filename, int flags);
void *dlsym(void *handle, const char *symbol);
int ioctl(int fd, unsigned long request, void *arg);
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

CPU_CACHES = "/sys/devices/system/cpu/cpu0/cache"  # one indexN folder per cache of the first core (level, type, size)
DEFAULT_CORE_CACHE = 1 << 20  # bytes assumed for a core's level-2 cache where the OS doesn't say (as on Zen 4, Skylake-SP)

def core_cache_bytes(caches: str = CPU_CACHES) -> int:
  """The size of a CPU core's level-2 cache, as Linux's sysfs reports it ("2048K"); DEFAULT_CORE_CACHE where it
  doesn't (another OS, no level 2)."""
  try:
    for entry in sorted(os.listdir(caches)):
      read = lambda name: pathlib.Path(caches, entry, name).read_text().strip()
      if entry.startswith("index") and read("level") == "2" and read("type") in ("Unified", "Data"):
        size = read("size")
        return int(size.rstrip("KM")) * {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
  except (OSError, ValueError): pass
  return DEFAULT_CORE_CACHE

def find_symbol(name: str, libraries: tuple[str | None, ...] = (None, "libm.so.6", "libgcc_s.so.1")) -> int | None:
  """Address of a symbol in the process or in one of `libraries` (loaded on first use), or None."""
  for lib in libraries:
    if lib not in _libraries:
      handle = libc.dlopen(lib.encode() if lib else ffi.NULL, RTLD_NOW)
      _libraries[lib] = handle if handle != ffi.NULL else None
    if _libraries[lib] is not None and (addr := libc.dlsym(_libraries[lib], name.encode())) != ffi.NULL:
      return int(ffi.cast("uintptr_t", addr))
  return None

# ---------------- ioctl numbers (asm-generic/ioctl.h: dir 2 bits, size 14, type 8, number 8) ----------------

IOC_NONE, IOC_WRITE, IOC_READ = 0, 1, 2
def IOC(direction: int, kind: str | int, nr: int, size: int) -> int:
  kind = ord(kind) if isinstance(kind, str) else kind
  return (direction << 30) | (size << 16) | (kind << 8) | nr
def IO(kind, nr: int) -> int: return IOC(IOC_NONE, kind, nr, 0)
def IOR(kind, nr: int, size: int) -> int: return IOC(IOC_READ, kind, nr, size)
def IOW(kind, nr: int, size: int) -> int: return IOC(IOC_WRITE, kind, nr, size)
def IOWR(kind, nr: int, size: int) -> int: return IOC(IOC_READ | IOC_WRITE, kind, nr, size)

# ---------------- the seam ----------------

@dataclass(frozen=True)
class PCIDevice:
  address: str      # "0000:01:00.0"
  vendor: int
  device: int
  pci_class: int

class System:
  """The operating system as drivers see it (the real one: libc and sysfs). Drivers call open/close/ioctl/mmap/munmap,
  which log each call with TRACE_IOCTL=1; a System for other hardware (the MOCK models) overrides the underscored
  methods that do the work."""
  def __init__(self): self.paths: dict[int, str] = {}  # open file descriptor -> the path it was opened from (for traces)
  def open(self, path: str, flags: int = os.O_RDWR) -> int:
    if not TRACE_IOCTL: return self._open(path, flags)
    try: fd = self._open(path, flags)
    except OSError as e:
      trace.log(f"open {path} -> {trace.failure(e)}")
      raise
    self.paths[fd] = path
    trace.log(f"open {path} -> fd {fd}")
    return fd
  def close(self, fd: int) -> None:
    if TRACE_IOCTL: trace.log(f"close fd {fd} ({self.paths.pop(fd, '?')})")
    self._close(fd)
  def ioctl(self, fd: int, name: str, request: int, arg, params=None) -> int:
    """ioctl(fd, request, arg); OSError naming the request and errno on failure. `params`: what a pointer inside
    `arg` points to (RM's parameter structs), traced too."""
    if not TRACE_IOCTL: return self._ioctl(fd, name, request, arg)
    head = f"ioctl fd {fd} ({self.paths.get(fd, '?')}) {name} {request:#x}"
    try: ret = self._ioctl(fd, name, request, arg)
    except OSError as e:
      trace.log(f"{head} {trace.decode_call(arg, params)} -> {trace.failure(e)}")
      raise
    trace.log(f"{head} {trace.decode_call(arg, params)} -> {ret}")
    return ret
  def mmap(self, addr: int, size: int, prot: int, flags: int, fd: int, offset: int) -> int:
    if not TRACE_IOCTL: return self._mmap(addr, size, prot, flags, fd, offset)
    head = (f"mmap fd {fd} ({self.paths.get(fd, 'anonymous' if fd == -1 else '?')}) addr {addr:#x} size {size:#x} "
            f"prot {trace.flags(prot, trace.PROT_NAMES)} flags {trace.flags(flags, trace.MAP_NAMES)} offset {offset:#x}")
    try: at = self._mmap(addr, size, prot, flags, fd, offset)
    except OSError as e:
      trace.log(f"{head} -> {trace.failure(e)}")
      raise
    trace.log(f"{head} -> {at:#x}")
    return at
  def munmap(self, addr: int, size: int) -> None:
    if TRACE_IOCTL: trace.log(f"munmap {addr:#x} size {size:#x}")
    self._munmap(addr, size)

  def _open(self, path: str, flags: int) -> int:
    try: return os.open(path, flags | os.O_CLOEXEC)
    except OSError as e: raise OSError(e.errno, f"can't open {path}: {os.strerror(e.errno)}") from None
  def _close(self, fd: int) -> None: os.close(fd)
  def _ioctl(self, fd: int, name: str, request: int, arg) -> int:
    ret = libc.ioctl(fd, request, ffi.cast("void*", arg) if not isinstance(arg, ffi.CData) or ffi.typeof(arg).kind != "pointer" else arg)
    if ret < 0:
      err = ffi.errno
      raise OSError(err, f"ioctl {name} ({request:#x}) failed: {os.strerror(err)} (errno {err})")
    return ret
  def _mmap(self, addr: int, size: int, prot: int, flags: int, fd: int, offset: int) -> int:
    return _check(int(ffi.cast("uintptr_t", libc.mmap(ffi.cast("void*", addr), size, prot, flags, fd, offset))), f"mmap of {size} bytes at offset {offset:#x}")
  def _munmap(self, addr: int, size: int) -> None: munmap(addr, size)
  def read_text(self, path: str) -> str: return pathlib.Path(path).read_text()
  def read_bytes(self, path: str) -> bytes: return pathlib.Path(path).read_bytes()
  def is_file(self, path: str) -> bool: return pathlib.Path(path).is_file()
  def toolchain(self, vendor_path: str, arch: str):
    """(renderer, compiler) for the GPUs behind `vendor_path`, or None for the vendor's real toolchain (a software
    model supplies one whose binaries it can run)."""
    return None
  def library(self, ffi, name: str):
    """The shared library lib`name` opened through `ffi` (which declares its functions); OSError when it is absent."""
    return ffi.dlopen(ctypes.util.find_library(name) or f"lib{name}.so.1")
  def server_of(self, path: str) -> object:
    """What serves the device file `path`: the same object for as long as the same kernel driver does (drivers key
    what their process shares by it). The real kernel's modules serve for the life of the process."""
    return self
  def listdir(self, path: str) -> list[str]: return sorted(os.listdir(path)) if os.path.isdir(path) else []
  def pci_driver(self, address: str) -> str:
    """The kernel driver bound to PCI function `address` ("" if none)."""
    link = f"/sys/bus/pci/devices/{address}/driver"
    return os.path.basename(os.path.realpath(link)) if os.path.islink(link) else ""
  def pci_config_read(self, address: str, offset: int, size: int = 4) -> int:
    """Bytes [offset, offset+size) of function `address`'s configuration space (its sysfs `config` file)."""
    fd = self.open(f"/sys/bus/pci/devices/{address}/config", os.O_RDONLY)
    try: data = os.pread(fd, size, offset)
    finally: self.close(fd)
    if len(data) != size: raise OSError(errno.EIO, f"{address}: config read of {size} bytes at {offset:#x} got {len(data)} (past 64 bytes it needs root)")
    return int.from_bytes(data, "little")
  def pci_config_write(self, address: str, offset: int, value: int, size: int = 4) -> None:
    fd = self.open(f"/sys/bus/pci/devices/{address}/config")
    try: os.pwrite(fd, value.to_bytes(size, "little"), offset)
    finally: self.close(fd)
  def map_bar(self, address: str, i: int):
    """BAR i of function `address` mapped into this process (its sysfs `resource{i}` file)."""
    from drivers.pci import MappedBar
    fd = self.open(f"/sys/bus/pci/devices/{address}/resource{i}")
    try:
      size = os.fstat(fd).st_size
      at = self.mmap(0, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
    finally: self.close(fd)
    return MappedBar(memoryview_at(at, size))
  def usb_backend(self):
    """The pyusb backend USB drivers go through: None is pyusb's default (libusb)."""
    return None
  def pci_devices(self, vendor: int | None = None) -> list[PCIDevice]:
    """PCI functions from sysfs, optionally only one vendor's."""
    out = []
    for addr in self.listdir("/sys/bus/pci/devices"):
      base = f"/sys/bus/pci/devices/{addr}"
      try: dev = PCIDevice(addr, int(self.read_text(f"{base}/vendor"), 16), int(self.read_text(f"{base}/device"), 16), int(self.read_text(f"{base}/class"), 16))
      except (OSError, ValueError): continue
      if vendor is None or dev.vendor == vendor: out.append(dev)
    return out

real_system = System()

def system_for(interface: str) -> System:
  """The System a driver uses for a DEV interface: "" for the real one, "MOCK" for the software models, "MOCKPCI" for a
  machine whose PCI bus has a GPU with no driver bound, "MOCKUSB" for one with a GPU behind a USB bridge."""
  if interface in ("", "PCI", "USB"): return real_system
  if interface == "MOCK":
    from drivers.mock import mock_system
    return mock_system
  if interface == "MOCKUSB":
    from drivers.mock import usb_machine
    return usb_machine()
  if interface == "MOCKPCI":
    from drivers.mock import bare_pci_machine
    return bare_pci_machine()
  raise ValueError(f"unknown device interface {interface!r} (known: MOCK, MOCKUSB, MOCKPCI, PCI, USB)")
