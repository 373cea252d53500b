"""The kgsl kernel driver as a MOCK model: /dev/kgsl-3d0 and its ioctls, the id-based mmap of GPU objects, and an
Adreno GPU behind it whose command processor is cp.py. Every rule is kgsl's (qualcomm-linux/kgsl: msm_kgsl.h, kgsl.c,
kgsl_ioctl.c, kgsl_drawobj.c, adreno.c, adreno_drawctxt.c, adreno_dispatch.c, kgsl_sharedmem.c; cited per rule).

Stricter than kgsl in one place: an ioctl's request must encode exactly the header's size and direction. kgsl
(kgsl_ioctl.c kgsl_ioctl_helper) dispatches on the number alone and copies min(its size, the caller's) bytes, so a
struct from another header version would be silently truncated; the model answers EINVAL instead. Likewise
GPU_COMMAND's cmdsize/objsize/syncsize must be the structs' sizes (kgsl_drawobj.c copy_struct_from_user would
zero-fill a short one).

Faults: a GPU fault in a context's commands (a refused or malformed packet, a page fault, a shader hazard) does what
kgsl does for a context without fault tolerance (adreno_dispatch.c process_cmdobj_fault -> adreno_drawctxt_set_guilty):
the context is invalidated with reset status GUILTY, its queued commands are dropped and its retired timestamp jumps to
the last queued one (adreno_drawctxt_invalidate). GPU_COMMAND and DEVICE_WAITTIMESTAMP_CTXTID on it then fail with
EDEADLK (kgsl_device.h kgsl_check_context_state, adreno.c adreno_waittimestamp) and GETPROPERTY(GPU_RESET_STAT) reads
KGSL_CTX_STAT_GUILTY_CONTEXT_RESET_EXT once. The fault's message is kept (`faults`, the context's `fault`) and is the
text of those EDEADLK errors.

Execution: a context's submissions run in order; a GPU_COMMAND runs its IBs at once until they finish or a
CP_WAIT_REG_MEM is unmet, and a poll thread continues blocked contexts, so a wait blocks only its own context.
MOCKGPU_QCOM_ARCH (a630, a740; else DEV's QCOM arch if known, else a630) picks the GPU, read when the model is made."""
from __future__ import annotations
import errno, itertools, threading, time
from collections import deque
from dataclasses import dataclass, field
import cffi
from ir.switches import DEV, getenv
from ir.target import parse_targets, target_for
from drivers import system
from drivers.mock import DeviceModel
from drivers.mock.qcom.cp import CP, CPFault, Memory

_ffi = cffi.FFI()
_ffi.cdef("""
struct kgsl_device_getproperty { unsigned int type; void *value; size_t sizebytes; };
struct kgsl_devinfo { unsigned int device_id; unsigned int chip_id; unsigned int mmu_enabled; unsigned long gmem_gpubaseaddr;
  unsigned int gpu_id; size_t gmem_sizebytes; };
struct kgsl_version { unsigned int drv_major, drv_minor, dev_major, dev_minor; };
struct kgsl_device_waittimestamp_ctxtid { unsigned int context_id, timestamp, timeout; };
struct kgsl_drawctxt_create { unsigned int flags; unsigned int drawctxt_id; };
struct kgsl_drawctxt_destroy { unsigned int drawctxt_id; };
struct kgsl_map_user_mem { int fd; unsigned long gpuaddr; size_t len; size_t offset; unsigned long hostptr; int memtype; unsigned int flags; };
struct kgsl_cmdstream_readtimestamp_ctxtid { unsigned int context_id, type, timestamp; };
struct kgsl_sharedmem_free { unsigned long gpuaddr; };
struct kgsl_timestamp_event { int type; unsigned int timestamp; unsigned int context_id; void *priv; size_t len; };
struct kgsl_gpuobj_alloc { uint64_t size, flags, va_len, mmapsize; unsigned int id, metadata_len; uint64_t metadata; };
struct kgsl_gpuobj_free { uint64_t flags, priv; unsigned int id, type, len; };
struct kgsl_gpu_event_timestamp { unsigned int context_id, timestamp; };
struct kgsl_gpuobj_info { uint64_t gpuaddr, flags, size, va_len, va_addr; unsigned int id; };
struct kgsl_gpuobj_sync_obj { uint64_t offset, length; unsigned int id, op; };
struct kgsl_gpuobj_sync { uint64_t objs; unsigned int obj_len, count; };
struct kgsl_command_object { uint64_t offset, gpuaddr, size; unsigned int flags, id; };
struct kgsl_command_syncpoint { uint64_t priv, size; unsigned int type; };
struct kgsl_cmd_syncpoint_timestamp { unsigned int context_id, timestamp; };
struct kgsl_gpu_command { uint64_t flags, cmdlist; unsigned int cmdsize, numcmds; uint64_t objlist; unsigned int objsize, numobjs;
  uint64_t synclist; unsigned int syncsize, numsyncs, context_id, timestamp; };
struct kgsl_device_constraint { unsigned int type, context_id; void *data; size_t size; };
void *mremap(void *old, size_t old_size, size_t new_size, int flags, ...);
int msync(void *addr, size_t len, int flags);
""")
_libc = _ffi.dlopen(None)

# ---- msm_kgsl.h
KGSL_IOC_TYPE = 0x09
IOCTLS = {0x02: ("DEVICE_GETPROPERTY", "kgsl_device_getproperty", 3), 0x07: ("DEVICE_WAITTIMESTAMP_CTXTID", "kgsl_device_waittimestamp_ctxtid", 1),
          0x13: ("DRAWCTXT_CREATE", "kgsl_drawctxt_create", 3), 0x14: ("DRAWCTXT_DESTROY", "kgsl_drawctxt_destroy", 1),
          0x15: ("MAP_USER_MEM", "kgsl_map_user_mem", 3), 0x16: ("CMDSTREAM_READTIMESTAMP_CTXTID", "kgsl_cmdstream_readtimestamp_ctxtid", 3),
          0x21: ("SHAREDMEM_FREE", "kgsl_sharedmem_free", 1), 0x32: ("SETPROPERTY", "kgsl_device_getproperty", 1),
          0x33: ("TIMESTAMP_EVENT", "kgsl_timestamp_event", 3), 0x45: ("GPUOBJ_ALLOC", "kgsl_gpuobj_alloc", 3),
          0x46: ("GPUOBJ_FREE", "kgsl_gpuobj_free", 1), 0x47: ("GPUOBJ_INFO", "kgsl_gpuobj_info", 3),
          0x49: ("GPUOBJ_SYNC", "kgsl_gpuobj_sync", 1), 0x4A: ("GPU_COMMAND", "kgsl_gpu_command", 3)}   # dir: _IOW 1, _IOWR 3
def request_of(nr: int) -> int:
  """The ioctl value msm_kgsl.h's _IOW/_IOWR macro gives number `nr`."""
  _, struct, direction = IOCTLS[nr]
  return system.IOC(direction, KGSL_IOC_TYPE, nr, _ffi.sizeof(f"struct {struct}"))

CONTEXT_NO_GMEM_ALLOC, CONTEXT_CTX_SWITCH, CONTEXT_PREAMBLE = 0x2, 0x8, 0x10
CONTEXT_PER_CONTEXT_TS, CONTEXT_USER_GENERATED_TS, CONTEXT_NO_FAULT_TOLERANCE = 0x40, 0x80, 0x200
CONTEXT_PWR_CONSTRAINT, CONTEXT_PRIORITY_MASK, CONTEXT_IFH_NOP, CONTEXT_SECURE = 0x800, 0xF000, 0x10000, 0x20000
CONTEXT_NO_SNAPSHOT, CONTEXT_TYPE_MASK, CONTEXT_PREEMPT_STYLE_MASK = 0x40000, 0x01F00000, 0x0E000000
CONTEXT_INVALIDATE_ON_FAULT, CONTEXT_LPAC, CONTEXT_FAULT_INFO = 0x10000000, 0x20000000, 0x40000000
# adreno_drawctxt.c adreno_drawctxt_create: the flags a context keeps (others are dropped quietly)
CONTEXT_KEPT = (CONTEXT_PREAMBLE | CONTEXT_NO_GMEM_ALLOC | CONTEXT_PER_CONTEXT_TS | CONTEXT_USER_GENERATED_TS | CONTEXT_NO_FAULT_TOLERANCE
                | CONTEXT_INVALIDATE_ON_FAULT | CONTEXT_CTX_SWITCH | CONTEXT_PRIORITY_MASK | CONTEXT_TYPE_MASK | CONTEXT_PWR_CONSTRAINT
                | CONTEXT_IFH_NOP | CONTEXT_SECURE | CONTEXT_PREEMPT_STYLE_MASK | CONTEXT_LPAC | CONTEXT_NO_SNAPSHOT | CONTEXT_FAULT_INFO)
PRIORITY_SHIFT, PRIORITY_MED = 12, 0x8          # adreno_drawctxt.c KGSL_CONTEXT_PRIORITY_MED: the default priority
MAX_CONTEXTS_PER_PROC = 200                     # kgsl.h KGSL_MAX_CONTEXTS_PER_PROC

MEMFLAGS_SECURE, MEMFLAGS_GPUREADONLY = 1 << 3, 1 << 24
MEMFLAGS_USE_CPU_MAP, MEMFLAGS_IOCOHERENT, MEMFLAGS_FORCE_32BIT, MEMFLAGS_GUARD_PAGE, MEMFLAGS_VBO = 1 << 28, 1 << 31, 1 << 32, 1 << 33, 1 << 34
CACHEMODE_MASK, CACHEMODE_SHIFT, CACHEMODE_WRITETHROUGH, CACHEMODE_WRITEBACK = 0x0C000000, 26, 2, 3
MEMTYPE_MASK, MEMALIGN_MASK, MEMALIGN_SHIFT = 0x0000FF00, 0x00FF0000, 16
MEMFLAGS_USERMEM_ADDR = (2 + 1) << 5            # KGSL_USERMEM_FLAG(KGSL_USER_MEM_TYPE_ADDR)
MEM_ENTRY_USER, MEM_ENTRY_ION = 2 + 1, 3 + 1    # kgsl.h KGSL_MEM_ENTRY_USER / _ION: the user memtype + 1
# kgsl.c gpumem_alloc_entry: the flags an allocation keeps
ALLOC_KEPT = (MEMFLAGS_GPUREADONLY | CACHEMODE_MASK | MEMTYPE_MASK | MEMALIGN_MASK | MEMFLAGS_USE_CPU_MAP | MEMFLAGS_SECURE
              | MEMFLAGS_FORCE_32BIT | MEMFLAGS_IOCOHERENT | MEMFLAGS_GUARD_PAGE)
# kgsl.c kgsl_ioctl_map_user_mem: the flags a user mapping keeps
USERMEM_KEPT = MEMFLAGS_GPUREADONLY | MEMTYPE_MASK | MEMALIGN_MASK | MEMFLAGS_USE_CPU_MAP | MEMFLAGS_SECURE | MEMFLAGS_IOCOHERENT
MAX_ALIGN_LOG2 = 25                             # kgsl.c cap_alignment: KGSL_MAX_ALIGN 32 MB
GPUOBJ_FREE_ON_EVENT, GPU_EVENT_TIMESTAMP = 1, 1

PROP_DEVICE_INFO, PROP_MMU_ENABLE, PROP_VERSION, PROP_GPU_RESET_STAT = 0x1, 0x6, 0x8, 0x9
PROP_PWR_CONSTRAINT, PROP_UCHE_GMEM_VADDR, PROP_DEVICE_BITNESS = 0x12, 0x13, 0x18
CTX_STAT_NO_ERROR, CTX_STAT_GUILTY = 0, 1       # enum kgsl_ctx_reset_stat
VERSION = (3, 14, 3, 1)                         # KGSL_VERSION_MAJOR/MINOR; kgsl.c kgsl_prop_version dev_major 3, dev_minor 1
CONSTRAINT_NONE, CONSTRAINT_PWRLEVEL, CONSTRAINT_PWR_MAXLEVELS = 0, 1, 2

TIMESTAMP_CONSUMED, TIMESTAMP_RETIRED, TIMESTAMP_QUEUED = 1, 2, 3
TIMESTAMP_EVENT_FENCE = 2
CMDBATCH_MARKER, CMDBATCH_SYNC = 0x2, 0x400
CMDLIST_IB, CMDLIST_CTXTSWITCH_PREAMBLE, CMDLIST_IB_PREAMBLE, OBJLIST_MEMOBJ = 0x1, 0x2, 0x4, 0x8
CMDLIST_FLAGS = CMDLIST_IB | CMDLIST_CTXTSWITCH_PREAMBLE | CMDLIST_IB_PREAMBLE   # kgsl_drawobj.c CMDLIST_FLAGS
SYNCPOINT_TIMESTAMP = 0
MAX_NUMIBS, MAX_SYNCPOINTS = 2000, 32           # kgsl.h KGSL_MAX_NUMIBS / KGSL_MAX_SYNCPOINTS
MAX_IB_DWORDS = 0xFFFFF                         # adreno.c _verify_ib: "maximum allowable size for an IB in the CP"
TIMESTAMP_WINDOW = 0x80000000                   # kgsl.h KGSL_TIMESTAMP_WINDOW

# the model's GPU address ranges: non-SVM objects get VAs above the CPU's 47-bit user space, so they never meet a
# USE_CPU_MAP address; everything the GPU reaches is below 2^48 (what kgsl_mmu_gpuaddr_in_range accepts here)
GPU_VA_START, GPU_VA_END = 1 << 47, 1 << 48
HOT_POLL_S, IDLE_LONG_S, DOZE_S = 0.0005, 0.1, 0.002   # re-check blocked waits often at first, then doze
MAP_FIXED, MAP_NORESERVE = 0x10, 0x4000

def timestamp_cmp(a: int, b: int) -> int:
  """kgsl.h timestamp_cmp: 1, 0 or -1 comparing a to b with 32-bit wraparound."""
  if a == b: return 0
  if a > b and a - b < TIMESTAMP_WINDOW: return 1
  a, b = (a + TIMESTAMP_WINDOW) % 2**32, (b + TIMESTAMP_WINDOW) % 2**32
  return 1 if a > b and a - b <= TIMESTAMP_WINDOW else -1

@dataclass(frozen=True)
class Arch:
  name: str
  chip_id: int       # kgsl_devinfo chip_id: core.major.minor.patch bytes (Mesa freedreno_devices.py names the same ids)
  gen: int
  gmem_bytes: int    # adreno-gpulist.h gmem_size
ARCHS = {"a630": Arch("a630", 0x06030001, 6, 1 << 20),        # adreno_gpu_core_a630v2: SZ_1M
         "a740": Arch("a740", 0x43050A01, 7, 3 << 20)}        # adreno_gpu_core_gen7_2_0: 3 * SZ_1M; Mesa FD740 chip_id 0x43050a01

def arch_name() -> str:
  """MOCKGPU_QCOM_ARCH, else the arch of DEV's QCOM target if the model has it, else a630."""
  if name := getenv("MOCKGPU_QCOM_ARCH", ""):
    if name not in ARCHS: raise ValueError(f"MOCKGPU_QCOM_ARCH={name!r}: the QCOM model knows {', '.join(ARCHS)}")
    return name
  target = target_for(parse_targets(DEV.value), "QCOM")
  return target.arch if target.arch in ARCHS else "a630"

def _page_align(n: int) -> int: return -(-n // system.PAGE_SIZE) * system.PAGE_SIZE

def _shared_pages(size: int) -> int:
  """Fresh zeroed MAP_SHARED pages, which mremap can map a second time (the CPU mapping)."""
  addr = int(system.ffi.cast("uintptr_t", system.libc.mmap(system.ffi.NULL, size, 3, system.MAP_SHARED | system.MAP_ANONYMOUS, -1, 0)))
  if addr == 2**64 - 1: raise OSError(errno.ENOMEM, f"can't allocate {size:#x} bytes of model memory")
  return addr

def _alias(src: int, size: int, at: int) -> int:
  """A second mapping of the shared pages at `src`, placed at `at` (replacing what is there)."""
  addr = int(_ffi.cast("uintptr_t", _libc.mremap(_ffi.cast("void *", src), 0, size, 3, _ffi.cast("void *", at))))  # MAYMOVE | FIXED
  if addr == 2**64 - 1: raise OSError(_ffi.errno, f"can't map {size:#x} bytes of model memory a second time")
  return addr

def _user_range_mapped(addr: int, size: int) -> bool: return _libc.msync(_ffi.cast("void *", addr), size, 1) == 0   # ENOMEM if unmapped

def user(ptr, size: int, what: str) -> int:
  """A user pointer the model reads or writes `size` bytes at: copy_from_user / copy_to_user fail with EFAULT."""
  addr = ptr if isinstance(ptr, int) else int(_ffi.cast("uintptr_t", ptr))
  start = addr & ~(system.PAGE_SIZE - 1)
  if not addr or not _user_range_mapped(start, _page_align(addr + size - start)): raise OSError(errno.EFAULT, f"{what}: {size} bytes at {addr:#x} are not mapped")
  return addr

@dataclass(eq=False)
class Allocation:
  """A kgsl_mem_entry: `host` backs it; `gpuaddr` is 0 until a USE_CPU_MAP object is mmapped."""
  id: int
  size: int
  flags: int
  host: int
  gpuaddr: int = 0
  guard: bool = False
  user: bool = False                           # MAP_USER_MEM: the caller's pages
  reserved: bool = False                       # its SVM range is held after the CPU mapping's munmap
  @property
  def footprint(self) -> int:                  # kgsl_sharedmem.h kgsl_memdesc_footprint
    return _page_align(self.size + system.PAGE_SIZE) if self.guard else self.size
  @property
  def align(self) -> int:                      # kgsl.c get_align: the SVM address alignment
    bit = (self.flags & MEMALIGN_MASK) >> MEMALIGN_SHIFT
    return next((a for a in (1 << 21, 1 << 20, 1 << 16) if bit >= a.bit_length() - 1), system.PAGE_SIZE)

@dataclass(eq=False)
class Job:
  timestamp: int
  ibs: list[tuple[int, int]]                   # (GPU address, dwords)
  syncs: list[tuple[object, int]] = field(default_factory=list)   # (context, timestamp) to wait for first
  started: bool = False

@dataclass(eq=False)
class Context:
  id: int
  flags: int
  file: object
  cp: CP
  timestamp: int = 0                           # the last queued (drawctxt->timestamp)
  consumed: int = 0
  retired: int = 0
  jobs: deque = field(default_factory=deque)
  invalid: bool = False
  reset_status: int = CTX_STAT_NO_ERROR
  fault: str | None = None
  frees: list[tuple[int, Allocation]] = field(default_factory=list)   # GPUOBJ_FREE on a timestamp

@dataclass(eq=False)
class File:
  path: str
  contexts: set[int] = field(default_factory=set)

class KGSLModel(DeviceModel):
  def __init__(self, arch: str | None = None):
    self.arch = ARCHS[arch or arch_name()]
    self.lock = threading.RLock()
    self.work = threading.Condition(self.lock)        # a context has blocked work
    self.retire = threading.Condition(self.lock)      # a timestamp retired or a context faulted
    self.memory = Memory()
    self.allocations: dict[int, Allocation] = {}
    self.contexts: dict[int, Context] = {}
    self.faults: list[str] = []
    self.last_context: int | None = None              # whose commands the GPU ran last (for CTXTSWITCH_PREAMBLE IBs)
    self._thread: threading.Thread | None = None
    self._stop = threading.Event()
    self._woken = time.perf_counter()                 # when work last arrived (the poll thread dozes after a while)

  def stop(self) -> None:
    self._stop.set()
    with self.lock: self.work.notify_all()
    if self._thread is not None: self._thread.join()

  # ---------------- files and mmap ----------------
  def open(self, path: str) -> File:
    if path != "/dev/kgsl-3d0": raise OSError(errno.ENOENT, f"can't open {path}: the model has /dev/kgsl-3d0 only")
    return File(path)

  def close(self, handle: File) -> None:
    with self.lock:
      for cid in list(handle.contexts): self.detach(self.contexts[cid])

  def mmap(self, handle: File, addr: int, size: int, prot: int, flags: int, offset: int) -> int:
    with self.lock:
      # kgsl.c get_mmap_entry: the page offset is an object id, else a GPU address
      entry = self.allocations.get(offset >> 12) or next((a for a in self.allocations.values() if a.gpuaddr and a.gpuaddr <= offset < a.gpuaddr + a.size), None)
      if entry is None: raise OSError(errno.EINVAL, f"mmap at offset {offset:#x}: no GPU object has id {offset >> 12} or that address")
      if entry.user: raise OSError(errno.EBUSY, f"mmap of object {entry.id}: user memory (MAP_USER_MEM) can't be mapped again")
      cpu_map = bool(entry.flags & MEMFLAGS_USE_CPU_MAP)
      if size != entry.footprint and (cpu_map or size != entry.size):
        raise OSError(errno.ERANGE, f"mmap of {size:#x} bytes of object {entry.id}: {'exactly' if cpu_map else 'its size or'} its {entry.footprint:#x}-byte footprint")
      if cpu_map and entry.gpuaddr: raise OSError(errno.EBUSY, f"mmap of object {entry.id}: its GPU address {entry.gpuaddr:#x} is set by an earlier mmap")
      align = entry.align if cpu_map else system.PAGE_SIZE
      if flags & MAP_FIXED and addr % align: raise OSError(errno.EINVAL, f"MAP_FIXED at {addr:#x}: object {entry.id} needs {align:#x} alignment")  # get_svm_unmapped_area
      at = addr if flags & MAP_FIXED else self.place(size, align)
      cpu = _alias(entry.host, entry.size, at)
      if cpu_map:   # kgsl.c _gpu_set_svm_region: the GPU address is the CPU address
        entry.gpuaddr = cpu
        self.memory.map(cpu, entry.size, entry.host)
      return cpu

  @staticmethod
  def place(size: int, align: int) -> int:
    """A free `align`-aligned CPU range of `size` bytes (reserved, then the slack given back)."""
    span = size + align
    base = system.mmap_anonymous(span, 0)
    start = -(-base // align) * align
    if start > base: system.munmap(base, start - base)
    if base + span > start + size: system.munmap(start + size, base + span - start - size)
    return start

  def munmap(self, handle: File, addr: int, size: int) -> None:
    """A USE_CPU_MAP object keeps its SVM range (GPU VA == CPU VA) until it is freed, so the range stays reserved."""
    with self.lock:
      entry = next((e for e in self.allocations.values() if e.flags & MEMFLAGS_USE_CPU_MAP and e.gpuaddr == addr), None)
      if entry is None: return system.munmap(addr, _page_align(size))
      at = system.libc.mmap(system.ffi.cast("void *", addr), _page_align(size), 0, system.MAP_PRIVATE | system.MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0)
      if int(system.ffi.cast("uintptr_t", at)) != addr: raise OSError(errno.ENOMEM, f"can't keep the SVM range at {addr:#x} reserved")
      entry.reserved = True

  # ---------------- ioctls ----------------
  def ioctl(self, handle: File, name: str, request: int, arg) -> int:
    nr = request & 0xFF
    # kgsl_ioctl.c kgsl_ioctl / adreno_ioctl.c adreno_ioctl_helper: an unknown number is -ENOIOCTLCMD (ENOTTY)
    if nr not in IOCTLS: raise OSError(errno.ENOTTY, f"{name} ({request:#x}): ioctl number {nr:#x} is not a kgsl ioctl the model has")
    what, struct, _ = IOCTLS[nr]
    # the model's own rule, stricter than kgsl (which copies min(its size, the caller's)): the request must encode msm_kgsl.h's size and direction
    if request != request_of(nr):
      raise OSError(errno.EINVAL, f"{name} ({request:#x}): {what} is {request_of(nr):#x} (struct {struct}, {_ffi.sizeof(f'struct {struct}')} bytes); "
                                  f"this encodes {request >> 16 & 0x3FFF} bytes, direction {request >> 30}")
    address = arg if isinstance(arg, int) else int(system.ffi.cast("uintptr_t", arg))
    a = _ffi.cast(f"struct {struct} *", address)
    if nr == 0x07: return self.wait_timestamp(handle, a)   # sleeps without the lock
    with self.lock:
      getattr(self, what.lower())(handle, a)
    return 0

  def context(self, handle: File, cid: int, what: str) -> Context:
    """kgsl_device.h kgsl_context_get_owner: a live context created on this file, else EINVAL."""
    if cid not in handle.contexts: raise OSError(errno.EINVAL, f"{what}: no context {cid} on this file")
    return self.contexts[cid]

  @staticmethod
  def check_state(ctx: Context, what: str) -> None:
    """kgsl_device.h kgsl_check_context_state: an invalidated (faulted) context is EDEADLK."""
    if ctx.invalid: raise OSError(errno.EDEADLK, f"{what}: context {ctx.id} was invalidated by a GPU fault: {ctx.fault}")

  # ---- properties (kgsl.c kgsl_ioctl_device_getproperty, adreno.c adreno_getproperty)
  def device_getproperty(self, handle: File, a) -> None:
    if a.type == PROP_VERSION:   # kgsl.c kgsl_prop_version: exactly the struct
      if a.sizebytes != _ffi.sizeof("struct kgsl_version"): raise OSError(errno.EINVAL, f"PROP_VERSION: sizebytes {a.sizebytes}, struct kgsl_version has 16")
      self.copy_out(a, _ffi.new("struct kgsl_version *", VERSION))
    elif a.type == PROP_GPU_RESET_STAT:   # kgsl.c kgsl_prop_gpu_reset_stat: u32 context id in, status out, then cleared
      if a.sizebytes != 4: raise OSError(errno.EINVAL, f"PROP_GPU_RESET_STAT: sizebytes {a.sizebytes}, the value is a u32 context id")
      value = _ffi.cast("uint32_t *", user(a.value, 4, "PROP_GPU_RESET_STAT value"))
      ctx = self.context(handle, value[0], "PROP_GPU_RESET_STAT")
      value[0], ctx.reset_status = ctx.reset_status, CTX_STAT_NO_ERROR
    elif a.type == PROP_DEVICE_INFO:   # adreno.c adreno_prop_device_info; copy_prop copies min(size, sizebytes)
      info = _ffi.new("struct kgsl_devinfo *", {"device_id": 1, "chip_id": self.arch.chip_id, "mmu_enabled": 1, "gmem_sizebytes": self.arch.gmem_bytes})
      self.copy_out(a, info)
    elif a.type in (PROP_MMU_ENABLE, PROP_DEVICE_BITNESS):   # adreno_prop_s32 / adreno_prop_u32: paged MMU, 48-bit (adreno_support_64bit)
      self.copy_out(a, _ffi.new("uint32_t *", 1 if a.type == PROP_MMU_ENABLE else 48))
    elif a.type == PROP_UCHE_GMEM_VADDR: self.copy_out(a, _ffi.new("uint64_t *", 0))
    else: raise OSError(errno.ENODEV, f"DEVICE_GETPROPERTY: property {a.type:#x} is not modelled")   # adreno_getproperty's default

  @staticmethod
  def copy_out(a, value) -> None:
    n = min(_ffi.sizeof(_ffi.typeof(value).item), a.sizebytes)
    if n: system.memoryview_at(user(a.value, n, "DEVICE_GETPROPERTY value"), n)[:] = bytes(_ffi.buffer(value))[:n]

  def setproperty(self, handle: File, a) -> None:
    # adreno.c adreno_setproperty / adreno_set_constraint
    if a.type != PROP_PWR_CONSTRAINT: raise OSError(errno.EINVAL, f"SETPROPERTY: property {a.type:#x} is not modelled (PWR_CONSTRAINT is)")
    if a.sizebytes != _ffi.sizeof("struct kgsl_device_constraint"): raise OSError(errno.EINVAL, f"PWR_CONSTRAINT: sizebytes {a.sizebytes}, struct kgsl_device_constraint has 24")
    c = _ffi.cast("struct kgsl_device_constraint *", user(a.value, 24, "PWR_CONSTRAINT value"))
    self.context(handle, c.context_id, "PWR_CONSTRAINT")
    if c.type == CONSTRAINT_PWRLEVEL:
      if c.size != 4: raise OSError(errno.EINVAL, f"PWR_CONSTRAINT PWRLEVEL: size {c.size}, struct kgsl_device_constraint_pwrlevel has 4")
      if (level := _ffi.cast("uint32_t *", user(c.data, 4, "PWR_CONSTRAINT data"))[0]) >= CONSTRAINT_PWR_MAXLEVELS: raise OSError(errno.EINVAL, f"PWR_CONSTRAINT: level {level} (PWR_MIN 0 or PWR_MAX 1)")
    elif c.type != CONSTRAINT_NONE: raise OSError(errno.EINVAL, f"PWR_CONSTRAINT: constraint type {c.type} is not modelled (NONE, PWRLEVEL)")

  # ---- contexts (adreno_drawctxt.c adreno_drawctxt_create, kgsl.c kgsl_context_init / kgsl_ioctl_drawctxt_destroy)
  def drawctxt_create(self, handle: File, a) -> None:
    flags = a.flags & CONTEXT_KEPT
    if not flags & CONTEXT_PREAMBLE or not flags & CONTEXT_NO_GMEM_ALLOC:
      raise OSError(errno.EINVAL, f"DRAWCTXT_CREATE flags {a.flags:#x}: PREAMBLE and NO_GMEM_ALLOC are required (legacy context switch not supported)")
    if flags & CONTEXT_SECURE: raise OSError(errno.EOPNOTSUPP, "DRAWCTXT_CREATE: secure contexts are not supported (no secure MMU)")
    if flags & CONTEXT_LPAC: raise OSError(errno.EOPNOTSUPP, "DRAWCTXT_CREATE: LPAC contexts are not supported (LPAC is not enabled)")
    if len(handle.contexts) > MAX_CONTEXTS_PER_PROC: raise OSError(errno.ENOSPC, f"DRAWCTXT_CREATE: more than {MAX_CONTEXTS_PER_PROC} contexts")
    flags |= CONTEXT_PER_CONTEXT_TS
    if not flags & CONTEXT_PRIORITY_MASK: flags |= PRIORITY_MED << PRIORITY_SHIFT
    cid = next(i for i in itertools.count(1) if i not in self.contexts)   # idr_alloc(.., 1, ..): the lowest free id
    self.contexts[cid] = Context(cid, flags, handle, CP(self.arch.gen, self.memory))
    handle.contexts.add(cid)
    a.flags, a.drawctxt_id = flags, cid

  def drawctxt_destroy(self, handle: File, a) -> None: self.detach(self.context(handle, a.drawctxt_id, "DRAWCTXT_DESTROY"))

  def detach(self, ctx: Context) -> None:
    """The context goes away with whatever it still had queued (kgsl waits for it first; a blocked wait would never end)."""
    del self.contexts[ctx.id]
    ctx.file.contexts.discard(ctx.id)
    for _, entry in ctx.frees: self.release(entry)
    self.retire.notify_all()

  # ---- memory (kgsl.c gpumem_alloc_entry, kgsl_sharedmem.c kgsl_alloc_pages / kgsl_memdesc_init)
  def new_id(self) -> int: return next(i for i in itertools.count(1) if i not in self.allocations)   # idr_alloc(.., 1, 0, ..)

  def gpu_range(self, size: int) -> int:
    """A free GPU VA range for an object without USE_CPU_MAP (kgsl_mmu_get_gpuaddr)."""
    va = GPU_VA_START
    for r in self.memory.regions:
      if r.va >= va + size: break
      va = max(va, _page_align(r.va + r.size))
    if va + size > GPU_VA_END: raise OSError(errno.ENOMEM, f"no {size:#x}-byte GPU address range left")
    return va

  def gpuobj_alloc(self, handle: File, a) -> None:
    flags = a.flags
    if flags & MEMFLAGS_VBO: raise OSError(errno.EOPNOTSUPP, "GPUOBJ_ALLOC: virtual buffer objects (VBO) are not modelled")
    flags &= ALLOC_KEPT
    if flags & MEMFLAGS_SECURE: raise OSError(errno.EOPNOTSUPP, "GPUOBJ_ALLOC: secure memory is not supported")
    size = _page_align(a.size)
    if a.size == 0 or size > 0xFFFFFFFF: raise OSError(errno.EINVAL, f"GPUOBJ_ALLOC: size {a.size:#x} (1 byte .. 4 GiB)")
    align = min(max((flags & MEMALIGN_MASK) >> MEMALIGN_SHIFT, 12), MAX_ALIGN_LOG2)   # cap_alignment, kgsl_memdesc_init (>= PAGE_SHIFT)
    flags = flags & ~MEMALIGN_MASK | align << MEMALIGN_SHIFT
    if (flags & CACHEMODE_MASK) >> CACHEMODE_SHIFT == CACHEMODE_WRITETHROUGH:   # kgsl_filter_cachemode (arm64): write-back instead
      flags = flags & ~CACHEMODE_MASK | CACHEMODE_WRITEBACK << CACHEMODE_SHIFT
    flags &= ~MEMFLAGS_IOCOHERENT   # kgsl_memdesc_init: the model's MMU has no IO coherence
    entry = Allocation(self.new_id(), size, flags, _shared_pages(size), guard=bool(flags & MEMFLAGS_GUARD_PAGE))
    if not flags & MEMFLAGS_USE_CPU_MAP:
      entry.gpuaddr = self.gpu_range(size)
      self.memory.map(entry.gpuaddr, size, entry.host)
    self.allocations[entry.id] = entry
    a.size, a.flags, a.mmapsize, a.id = size, flags, entry.footprint, entry.id

  def entry(self, eid: int, what: str) -> Allocation:
    if (e := self.allocations.get(eid)) is None: raise OSError(errno.EINVAL, f"{what}: no GPU object with id {eid}")
    return e

  def gpuobj_info(self, handle: File, a) -> None:
    # kgsl.c kgsl_ioctl_gpuobj_info: id 0 is EINVAL; va_addr is always 0 (an object may have several CPU mappings)
    if not a.id: raise OSError(errno.EINVAL, "GPUOBJ_INFO: id 0")
    e = self.entry(a.id, "GPUOBJ_INFO")
    a.gpuaddr, a.flags, a.size, a.va_len, a.va_addr = e.gpuaddr, e.flags, e.size, e.footprint, 0

  def gpuobj_free(self, handle: File, a) -> None:
    e = self.entry(a.id, "GPUOBJ_FREE")
    if not a.flags & GPUOBJ_FREE_ON_EVENT: return self.release(e)
    if a.type != GPU_EVENT_TIMESTAMP: raise OSError(errno.EINVAL, f"GPUOBJ_FREE on event type {a.type}: only TIMESTAMP (1) is modelled")
    if a.len != 8: raise OSError(errno.EINVAL, f"GPUOBJ_FREE: len {a.len}, struct kgsl_gpu_event_timestamp has 8")
    ev = _ffi.cast("struct kgsl_gpu_event_timestamp *", user(a.priv, 8, "GPUOBJ_FREE priv"))
    if ev.context_id == 0: raise OSError(errno.EINVAL, "GPUOBJ_FREE: context id 0")   # kgsl.c gpuobj_free_on_timestamp
    ctx = self.context(handle, ev.context_id, "GPUOBJ_FREE")
    if timestamp_cmp(ctx.retired, ev.timestamp) >= 0: return self.release(e)
    del self.allocations[e.id]
    ctx.frees.append((ev.timestamp, e))

  def release(self, e: Allocation) -> None:
    """The object is gone: its id, its GPU mapping and the model's own view of its pages (a CPU mapping stays valid
    until its munmap, as the vma holds the pages)."""
    self.allocations.pop(e.id, None)
    if e.gpuaddr: self.memory.unmap(e.gpuaddr)
    if e.reserved: system.munmap(e.gpuaddr, e.footprint)
    if not e.user: system.munmap(e.host, e.size)

  def gpuobj_sync(self, handle: File, a) -> None:
    # kgsl.c kgsl_ioctl_gpuobj_sync: 1..128 objects; unknown ids are skipped; the model's memory is coherent
    if not 0 < a.count <= 128: raise OSError(errno.EINVAL, f"GPUOBJ_SYNC: count {a.count} (1..128)")

  def map_user_mem(self, handle: File, a) -> None:
    # kgsl.c kgsl_ioctl_map_user_mem / _map_usermem_addr / kgsl_setup_useraddr / kgsl_setup_anon_useraddr
    if a.flags & MEMFLAGS_SECURE: raise OSError(errno.EOPNOTSUPP, "MAP_USER_MEM: secure memory is not supported")
    memtype = a.memtype + 1
    if memtype == MEM_ENTRY_ION: raise OSError(errno.EINVAL, "MAP_USER_MEM: dma-buf imports are not modelled")
    if memtype != MEM_ENTRY_USER: raise OSError(errno.EOPNOTSUPP, f"MAP_USER_MEM: memtype {a.memtype} (KGSL_USER_MEM_TYPE_ADDR is 2)")
    flags = a.flags & USERMEM_KEPT & ~MEMFLAGS_IOCOHERENT | MEMFLAGS_USERMEM_ADDR
    if a.hostptr == 0 or a.hostptr % system.PAGE_SIZE: raise OSError(errno.EINVAL, f"MAP_USER_MEM: hostptr {a.hostptr:#x} is 0 or not page aligned")
    if a.len == 0 or a.offset != 0 or a.len % system.PAGE_SIZE: raise OSError(errno.EINVAL, f"MAP_USER_MEM: len {a.len:#x} / offset {a.offset:#x} (whole pages, offset 0)")
    if not _user_range_mapped(a.hostptr, a.len): raise OSError(errno.EFAULT, f"MAP_USER_MEM: [{a.hostptr:#x}, {a.hostptr + a.len:#x}) is not mapped")
    gpuaddr = a.hostptr if flags & MEMFLAGS_USE_CPU_MAP else self.gpu_range(a.len)
    if any(r.va < gpuaddr + a.len and gpuaddr < r.va + r.size for r in self.memory.regions):
      raise OSError(errno.EBUSY, f"MAP_USER_MEM: GPU range [{gpuaddr:#x}, {gpuaddr + a.len:#x}) is taken")   # kgsl_mmu_set_svm_region
    e = Allocation(self.new_id(), a.len, flags, a.hostptr, gpuaddr, user=True)
    self.memory.map(gpuaddr, a.len, a.hostptr)
    self.allocations[e.id] = e
    a.flags, a.gpuaddr = flags, gpuaddr

  def sharedmem_free(self, handle: File, a) -> None:
    # kgsl.c kgsl_ioctl_sharedmem_free / kgsl_sharedmem_find: the object containing gpuaddr
    e = next((e for e in self.allocations.values() if e.gpuaddr and e.gpuaddr <= a.gpuaddr < e.gpuaddr + e.size), None)
    if e is None: raise OSError(errno.EINVAL, f"SHAREDMEM_FREE: no GPU object at {a.gpuaddr:#x}")
    self.release(e)

  # ---- timestamps (adreno.c adreno_readtimestamp / adreno_waittimestamp, adreno_drawctxt.c adreno_drawctxt_wait)
  def cmdstream_readtimestamp_ctxtid(self, handle: File, a) -> None:
    ctx = self.context(handle, a.context_id, "READTIMESTAMP_CTXTID")
    values = {TIMESTAMP_CONSUMED: ctx.consumed, TIMESTAMP_RETIRED: ctx.retired, TIMESTAMP_QUEUED: ctx.timestamp}
    if a.type not in values: raise OSError(errno.EINVAL, f"READTIMESTAMP_CTXTID: type {a.type} (CONSUMED 1, RETIRED 2, QUEUED 3)")
    a.timestamp = values[a.type]

  def wait_timestamp(self, handle: File, a) -> int:
    with self.lock:
      ctx = self.context(handle, a.context_id, "WAITTIMESTAMP_CTXTID")
      self.check_state(ctx, "WAITTIMESTAMP_CTXTID")
      # kgsl_events.c kgsl_add_event: a timestamp not yet queued can't be waited for
      if timestamp_cmp(a.timestamp, ctx.timestamp) > 0: raise OSError(errno.EINVAL, f"WAITTIMESTAMP_CTXTID: timestamp {a.timestamp} is past the last queued ({ctx.timestamp})")
      deadline = None if a.timeout == 0 or a.timeout >= 0x7FFFFFFF else time.monotonic() + a.timeout / 1000   # 0: forever
      while timestamp_cmp(ctx.retired, a.timestamp) < 0 and not ctx.invalid and ctx.id in self.contexts:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0: raise OSError(errno.ETIMEDOUT, f"WAITTIMESTAMP_CTXTID: context {ctx.id} timestamp {a.timestamp} not retired in {a.timeout} ms (retired {ctx.retired})")
        self.retire.wait(left)
      if ctx.id not in self.contexts: raise OSError(errno.ENOENT, f"WAITTIMESTAMP_CTXTID: context {ctx.id} was destroyed")
      self.check_state(ctx, "WAITTIMESTAMP_CTXTID")
    return 0

  def timestamp_event(self, handle: File, a) -> None:
    # kgsl.c kgsl_ioctl_timestamp_event: only KGSL_TIMESTAMP_EVENT_FENCE exists; the model makes no sync_file fds
    if a.type != TIMESTAMP_EVENT_FENCE: raise OSError(errno.EINVAL, f"TIMESTAMP_EVENT: type {a.type} (FENCE is 2)")
    raise OSError(errno.EOPNOTSUPP, "TIMESTAMP_EVENT(FENCE): sync_file fences are not modelled")

  # ---- submission (kgsl.c kgsl_ioctl_gpu_command, kgsl_drawobj.c, adreno_dispatch.c adreno_dispatcher_queue_cmds)
  def gpu_command(self, handle: File, a) -> None:
    if a.numcmds > MAX_NUMIBS or a.numobjs > MAX_NUMIBS or a.numsyncs > MAX_SYNCPOINTS:   # _process_command_input
      raise OSError(errno.EINVAL, f"GPU_COMMAND: {a.numcmds} cmds / {a.numobjs} objs / {a.numsyncs} syncs (at most {MAX_NUMIBS}, {MAX_NUMIBS}, {MAX_SYNCPOINTS})")
    ctx = self.context(handle, a.context_id, "GPU_COMMAND")
    marker = bool(a.flags & CMDBATCH_MARKER) or (not a.numcmds and not a.numsyncs)
    if a.flags & CMDBATCH_SYNC: raise OSError(errno.EINVAL, "GPU_COMMAND: SYNC-only command batches are not modelled")
    syncs = [self.syncpoint(handle, s) for s in self.items(a.synclist, a.syncsize, a.numsyncs, "kgsl_command_syncpoint", "synclist")]
    cmds = [] if marker else self.items(a.cmdlist, a.cmdsize, a.numcmds, "kgsl_command_object", "cmdlist")
    objs = [] if marker else self.items(a.objlist, a.objsize, a.numobjs, "kgsl_command_object", "objlist")
    for i, c in enumerate(cmds):
      if not c.flags & CMDLIST_FLAGS: raise OSError(errno.EINVAL, f"GPU_COMMAND: cmdlist[{i}] flags {c.flags:#x} name no IB kind (IB 1, CTXTSWITCH_PREAMBLE 2, IB_PREAMBLE 4)")
    for i, o in enumerate(objs):
      if not o.flags & OBJLIST_MEMOBJ: raise OSError(errno.EINVAL, f"GPU_COMMAND: objlist[{i}] flags {o.flags:#x} lack OBJLIST_MEMOBJ (8)")
    self.check_state(ctx, "GPU_COMMAND")
    for i, c in enumerate(cmds):   # adreno.c _verify_ib
      if c.size == 0 or c.size >> 2 > MAX_IB_DWORDS: raise OSError(errno.EINVAL, f"GPU_COMMAND: cmdlist[{i}] size {c.size:#x} bytes (1 .. {MAX_IB_DWORDS:#x} dwords)")
      if not 0 < c.gpuaddr < GPU_VA_END or c.gpuaddr % 4: raise OSError(errno.EINVAL, f"GPU_COMMAND: cmdlist[{i}] gpuaddr {c.gpuaddr:#x} is out of range or not dword aligned")
    if ctx.flags & CONTEXT_USER_GENERATED_TS:   # adreno_dispatch.c get_timestamp
      if timestamp_cmp(ctx.timestamp, a.timestamp) >= 0: raise OSError(errno.ERANGE, f"GPU_COMMAND: user timestamp {a.timestamp} is not after {ctx.timestamp}")
      ctx.timestamp = a.timestamp
    else: ctx.timestamp = (ctx.timestamp + 1) % 2**32
    preamble = ctx.id != self.last_context   # a6xx_ringbuffer_submitcmd: CTXTSWITCH_PREAMBLE IBs only after a context switch
    ctx.jobs.append(Job(ctx.timestamp, [(c.gpuaddr, c.size >> 2) for c in cmds if preamble or not c.flags & CMDLIST_CTXTSWITCH_PREAMBLE], syncs))
    if cmds: self.last_context = ctx.id
    a.timestamp = ctx.timestamp
    self.pump(ctx)
    if ctx.jobs: self.wake()

  @staticmethod
  def items(ptr: int, size: int, count: int, struct: str, what: str) -> list:
    """kgsl_drawobj.c _verify_input_list: all of count, pointer and size or none of them; each item is the struct."""
    if count == 0 and ptr == 0 and size == 0: return []
    if count == 0 or ptr == 0 or size == 0: raise OSError(errno.EINVAL, f"GPU_COMMAND: {what} count {count}, pointer {ptr:#x}, size {size}: all or none must be given")
    if size != _ffi.sizeof(f"struct {struct}"): raise OSError(errno.EINVAL, f"GPU_COMMAND: {what} item size {size}, struct {struct} has {_ffi.sizeof(f'struct {struct}')}")
    items = _ffi.cast(f"struct {struct} *", user(ptr, size * count, f"GPU_COMMAND {what}"))
    return [items[i] for i in range(count)]

  def syncpoint(self, handle: File, s) -> tuple[Context, int]:
    # kgsl_drawobj.c kgsl_drawobj_sync_add_sync / drawobj_add_sync_timestamp
    if s.type != SYNCPOINT_TIMESTAMP: raise OSError(errno.EINVAL, f"GPU_COMMAND: syncpoint type {s.type} is not modelled (TIMESTAMP 0 is)")
    if s.size != 8: raise OSError(errno.EINVAL, f"GPU_COMMAND: syncpoint size {s.size}, struct kgsl_cmd_syncpoint_timestamp has 8")
    t = _ffi.cast("struct kgsl_cmd_syncpoint_timestamp *", user(s.priv, 8, "GPU_COMMAND syncpoint"))
    if (other := self.contexts.get(t.context_id)) is None: raise OSError(errno.EINVAL, f"GPU_COMMAND: syncpoint on unknown context {t.context_id}")
    if timestamp_cmp(t.timestamp, other.timestamp) > 0: raise OSError(errno.EINVAL, f"GPU_COMMAND: syncpoint for future timestamp {t.timestamp} (queued {other.timestamp})")
    return other, t.timestamp

  # ---------------- the GPU ----------------
  def pump(self, ctx: Context) -> None:
    """Runs the context's queued submissions until done, a wait that is not met, or a fault."""
    try:
      while ctx.jobs and not ctx.invalid:
        job = ctx.jobs[0]
        if not job.started:
          if any(timestamp_cmp(o.retired, ts) < 0 and not o.invalid and o.id in self.contexts for o, ts in job.syncs): return
          job.started, ctx.consumed = True, job.timestamp
        while True:
          if ctx.cp.frames and not ctx.cp.run(): return
          if not job.ibs: break
          ctx.cp.start(*job.ibs.pop(0))
        ctx.jobs.popleft()
        self.retired(ctx, job.timestamp)
    except CPFault as e: self.fault(ctx, str(e))
    except Exception as e: self.fault(ctx, f"{type(e).__name__}: {e}")   # a model bug must not kill the GPU thread

  def retired(self, ctx: Context, timestamp: int) -> None:
    ctx.retired = timestamp
    for entry in [e for ts, e in ctx.frees if timestamp_cmp(timestamp, ts) >= 0]: self.release(entry)
    ctx.frees = [(ts, e) for ts, e in ctx.frees if timestamp_cmp(timestamp, ts) < 0]
    self.retire.notify_all()

  def fault(self, ctx: Context, message: str) -> None:
    """adreno_drawctxt.c adreno_drawctxt_set_guilty + adreno_drawctxt_invalidate."""
    ctx.invalid, ctx.reset_status, ctx.fault = True, CTX_STAT_GUILTY, message
    self.faults.append(f"context {ctx.id}: {message}")
    ctx.jobs.clear()
    ctx.cp.frames = []
    self.retired(ctx, ctx.timestamp)

  def wake(self) -> None:
    if self._thread is None:
      self._thread = threading.Thread(target=self._poll, name=f"kgsl-model-{self.arch.name}", daemon=True)
      self._thread.start()
    self._woken = time.perf_counter()
    self.work.notify_all()

  def _poll(self) -> None:
    while not self._stop.is_set():
      with self.lock:
        for ctx in [c for c in self.contexts.values() if c.jobs]: self.pump(ctx)
        if not any(c.jobs for c in self.contexts.values()):
          self.work.wait()
          continue
      time.sleep(HOT_POLL_S if time.perf_counter() - self._woken < IDLE_LONG_S else DOZE_S)
