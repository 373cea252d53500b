"""The model of amdkfd as one process sees it: /dev/kfd and its ioctls, the render nodes /dev/dri/renderD<minor>
(ACQUIRE_VM's DRM file, whose mmap offsets give the CPU view of buffers), and the sysfs files the driver reads
(the KFD topology, IP discovery). Every rule it enforces is amdkfd's (drivers/gpu/drm/amd/amdkfd, cited per rule)
or the UAPI header's (linux/kfd_ioctl.h). Memory is real host memory at the GPU VA the driver chose, so CPU VA ==
GPU VA; the GPUs (gpu.py) reach only what MAP_MEMORY_TO_GPU mapped to them."""
from __future__ import annotations
import errno, itertools, os, re, threading, time
from dataclasses import dataclass, field
import cffi
from ir.switches import getenv, DEV
from ir.target import parse_targets, target_for
from drivers import system
from drivers.amd import kfd as uapi
from drivers.mock import DeviceModel
from drivers.mock.amd.gpu import ARCHS, GPU, HDP_UNWRITTEN, Arch, GPUFault, Queue
from drivers.mock.amd.pm4 import PM4Engine
from drivers.mock.amd.sdma import SDMAEngine

UAPI_VERSION = (1, 17)          # what GET_VERSION reports (kfd_ioctl.h KFD_IOCTL_MAJOR/MINOR_VERSION; 1.14 added RUNTIME_ENABLE)

# args the driver's cffi module does not declare (linux/kfd_ioctl.h)
_ffi = cffi.FFI()
_ffi.cdef("""
struct kfd_ioctl_event_id_args { uint32_t event_id; uint32_t pad; };   /* the layout of destroy/set/reset_event_args */
struct kfd_ioctl_runtime_enable_args { uint64_t r_debug; uint32_t mode_mask; uint32_t capabilities_mask; };
struct kfd_memory_exception_failure { uint32_t NotPresent; uint32_t ReadOnly; uint32_t NoExecute; uint32_t imprecise; };
struct kfd_hsa_memory_exception_data { struct kfd_memory_exception_failure failure; uint64_t va; uint32_t gpu_id; uint32_t ErrorType; };
struct kfd_hsa_hw_exception_data { uint32_t reset_type; uint32_t reset_cause; uint32_t memory_lost; uint32_t gpu_id; };
struct kfd_event_data { union { struct kfd_hsa_memory_exception_data memory_exception_data;
  struct kfd_hsa_hw_exception_data hw_exception_data; }; uint64_t kfd_event_data_ext; uint32_t event_id; uint32_t pad; };
""")
MODEL_STRUCTS = {"kfd_ioctl_event_id_args", "kfd_ioctl_runtime_enable_args"}

# linux/kfd_ioctl.h constants
QUEUE_COMPUTE, QUEUE_SDMA, QUEUE_COMPUTE_AQL, QUEUE_SDMA_XGMI = 0, 1, 2, 3
MAX_QUEUE_PERCENTAGE, MAX_QUEUE_PRIORITY = 100, 15
EVENT_SIGNAL, EVENT_HW_EXCEPTION, EVENT_MEMORY = 0, 3, 8
WAIT_COMPLETE, WAIT_TIMEOUT = 0, 1
SIGNAL_EVENT_LIMIT = 4096
HW_EXCEPTION_PER_ENGINE_RESET, HW_EXCEPTION_GPU_HANG = 1, 0
VRAM, GTT, USERPTR, DOORBELL, MMIO_REMAP = 1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4
KNOWN_FLAGS = VRAM | GTT | USERPTR | DOORBELL | MMIO_REMAP | sum(1 << b for b in range(23, 32))  # CONTIGUOUS..WRITABLE
PUBLIC = 1 << 29
ENOTSUPP = 524                   # the kernel-internal errno set_queue_properties_from_user returns for a bad type
# kfd_priv.h mmap offsets of /dev/kfd: type in bits 63:62, gpu_id in 61:46
MMAP_TYPE_SHIFT, MMAP_GPU_ID_SHIFT = 62, 46
MMAP_DOORBELL, MMAP_EVENTS, MMAP_MMIO = 3, 2, 0
HDP_MEM_FLUSH_CNTL = 0          # kfd_ioctl.h enum kfd_mmio_remap: its offset in the MMIO remap page
DOORBELL_SLICE = 2 * 4096        # kfd_doorbell.c kfd_doorbell_process_slice: 1024 queues x 8-byte doorbells (SOC15)
UNSIGNALED = (1 << 64) - 1       # kfd_events.c UNSIGNALED_EVENT_SLOT
FIRST_NONSIGNAL_EVENT_ID = (2**31 - 1 >> 1) + 1   # kfd_events.h KFD_FIRST_NONSIGNAL_EVENT_ID
DRM_OFFSET_START = 1 << 32       # drm_vma_manager: DRM_FILE_PAGE_OFFSET_START pages, in bytes
SDMA_DOORBELL_BASE = 0x100       # doorbell ids the model keeps for SDMA queues (amdgpu doorbell_index sdma_engine[0])
KFD_TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology"

_libc_ffi = cffi.FFI()
_libc_ffi.cdef("void *mremap(void *old, size_t old_size, size_t new_size, int flags, ...); int msync(void *addr, size_t len, int flags);")
_libc = _libc_ffi.dlopen(None)
MAP_FIXED, MAP_NORESERVE = 0x10, 0x4000

def _mmap_fixed(addr: int, size: int, prot: int, flags: int) -> None:
  at = int(system.ffi.cast("uintptr_t", system.libc.mmap(system.ffi.cast("void*", addr), size, prot, flags | MAP_FIXED, -1, 0)))
  if at != addr: raise OSError(errno.ENOMEM, f"can't back {size:#x} bytes at {addr:#x}")

def _alias(src: int, size: int, at: int | None) -> int:
  """A second mapping of the shared pages at `src` (at `at` if given, replacing what is there)."""
  args = (3, _libc_ffi.cast("void *", at)) if at else (1,)   # MREMAP_MAYMOVE (| MREMAP_FIXED)
  addr = int(_libc_ffi.cast("uintptr_t", _libc.mremap(_libc_ffi.cast("void *", src), 0, size, *args)))
  if addr == 2**64 - 1: raise OSError(_libc_ffi.errno, f"can't map {size:#x} bytes of model memory a second time")
  return addr

def _shared_pages(size: int) -> int:
  addr = int(system.ffi.cast("uintptr_t", system.libc.mmap(system.ffi.NULL, size, 3, system.MAP_SHARED | system.MAP_ANONYMOUS, -1, 0)))
  if addr == 2**64 - 1: raise OSError(errno.ENOMEM, f"can't allocate {size:#x} bytes of model memory")
  return addr

def _page_align(n: int) -> int: return -(-n // system.PAGE_SIZE) * system.PAGE_SIZE

def _user_range_mapped(addr: int, size: int) -> bool:
  return _libc.msync(_libc_ffi.cast("void *", addr), size, 1) == 0   # MS_ASYNC; ENOMEM when a page is unmapped

def arch_name() -> str:
  """MOCKGPU_AMD_ARCH, else the arch of DEV's AMD target if the model has it, else gfx1100."""
  if name := getenv("MOCKGPU_AMD_ARCH", ""):
    if name not in ARCHS: raise ValueError(f"MOCKGPU_AMD_ARCH={name!r}: the AMD model knows {', '.join(ARCHS)}")
    return name
  target = target_for(parse_targets(DEV.value), "AMD")
  return target.arch if target.arch in ARCHS else "gfx1100"

@dataclass(eq=False)
class Buffer:
  """An allocation (a kgd_mem): `host` backs GPU VAs [va, va+size)."""
  handle: int
  gpu_id: int
  va: int
  size: int
  flags: int
  host: int
  drm_offset: int
  mapped: set[int] = field(default_factory=set)   # gpu_ids it is mapped to
  cpu_mapped: bool = False                        # the render-node mapping at va is in place
  freed: bool = False
  queue_refs: int = 0                             # kfd_queue.c: bo_va->queue_refcount

@dataclass(eq=False)
class Event:
  event_id: int
  type: int
  auto_reset: bool
  signaled: bool = False
  waiters: list = field(default_factory=list)
  data: dict = field(default_factory=dict)        # memory / hw exception data of the last fault

@dataclass(eq=False)
class File:
  path: str
  gpu: GPU | None = None                          # the render node's GPU

class KFDModel(DeviceModel):
  prefixes = ("/dev/kfd", "/dev/dri/renderD", "/sys/devices/virtual/kfd", "/sys/class/drm")

  def __init__(self, arch: str | None = None, count: int | None = None):
    self.arch: Arch = ARCHS[arch or arch_name()]
    self.lock = threading.RLock()
    self.changed = threading.Condition(self.lock)
    n = count or getenv("MOCKGPU_COUNT", 1)
    # kfd_topology.c kfd_generate_gpu_id hashes PCI data into 16 bits; any distinct nonzero values do
    self.gpus = [GPU(self.arch, 0x1000 + 0x2F1 * (i + 1), self.lock, self.interrupt, self.fault) for i in range(n)]
    self.doorbells = {g.gpu_id: _shared_pages(DOORBELL_SLICE) for g in self.gpus}
    self.mmio = {g.gpu_id: _shared_pages(system.PAGE_SIZE) for g in self.gpus}
    for g in self.gpus:
      g.hdp_flush_cntl = system.memoryview_at(self.mmio[g.gpu_id] + HDP_MEM_FLUSH_CNTL, 4).cast("I")
      g.hdp_flush_cntl[0] = HDP_UNWRITTEN
    self.vms: dict[int, File] = {}                 # gpu_id -> the render file ACQUIRE_VM bound
    self.buffers: dict[int, Buffer] = {}
    self.idr = {g.gpu_id: itertools.count() for g in self.gpus}
    self.drm_offsets = itertools.count(DRM_OFFSET_START, 1 << 32)
    self.events: dict[int, Event] = {}
    self.signal_page: Buffer | None = None
    self.queues: dict[int, tuple[GPU, Queue, list[Buffer]]] = {}
    self.vram_used = {g.gpu_id: 0 for g in self.gpus}
    self.runtime_enabled = False

  @property
  def faults(self) -> list[str]: return [f for g in self.gpus for f in g.faults]
  def stop(self) -> None:
    for g in self.gpus: g.stop()
  def gpu_by_id(self, gpu_id: int) -> GPU | None: return next((g for g in self.gpus if g.gpu_id == gpu_id), None)
  def render_minor(self, gpu: GPU) -> int: return 128 + self.gpus.index(gpu)

  # ---------------- files ----------------
  def open(self, path: str) -> File:
    if path == "/dev/kfd": return File(path)
    if (m := re.fullmatch(r"/dev/dri/renderD(\d+)", path)) and 0 <= int(m.group(1)) - 128 < len(self.gpus):
      return File(path, self.gpus[int(m.group(1)) - 128])
    raise OSError(errno.ENOENT, f"can't open {path}: no such device")

  def mmap(self, handle: File, addr: int, size: int, prot: int, flags: int, offset: int) -> int:
    with self.lock:
      return self.render_mmap(handle, addr, size, prot, offset) if handle.gpu else self.kfd_mmap(addr, size, offset)

  def kfd_mmap(self, addr: int, size: int, offset: int) -> int:
    kind, gpu_id = offset >> MMAP_TYPE_SHIFT, offset >> MMAP_GPU_ID_SHIFT & 0xFFFF
    if self.gpu_by_id(gpu_id) is None: raise OSError(errno.EINVAL, f"mmap of /dev/kfd at {offset:#x}: no GPU with gpu_id {gpu_id:#x}")
    if kind == MMAP_DOORBELL:   # kfd_doorbell.c kfd_doorbell_mmap: exactly the process's doorbell slice
      if size != DOORBELL_SLICE: raise OSError(errno.EINVAL, f"doorbell mmap of {size:#x} bytes: the slice is {DOORBELL_SLICE:#x}")
      return _alias(self.doorbells[gpu_id], size, addr or None)
    if kind == MMAP_MMIO:       # kfd_chardev.c kfd_mmio_mmap: one page
      if size != system.PAGE_SIZE: raise OSError(errno.EINVAL, f"MMIO mmap of {size:#x} bytes: it is one page")
      return _alias(self.mmio[gpu_id], size, addr or None)
    raise OSError(errno.EINVAL, f"mmap of /dev/kfd at {offset:#x}: type {kind} is not modelled (dGPU event pages are user memory)")

  def render_mmap(self, handle: File, addr: int, size: int, prot: int, offset: int) -> int:
    buf = next((b for b in self.buffers.values() if b.drm_offset == offset and b.gpu_id == handle.gpu.gpu_id), None)
    if buf is None: raise OSError(errno.EINVAL, f"mmap of {handle.path} at offset {offset:#x}: no buffer has that offset")
    if buf.flags & USERPTR: raise OSError(errno.EPERM, f"mmap of userptr buffer {buf.handle:#x}")   # amdgpu_gem.c amdgpu_gem_object_mmap
    # amdgpu_amdkfd_gpuvm.c: VRAM without PUBLIC is AMDGPU_GEM_CREATE_NO_CPU_ACCESS, which amdgpu_gem_object_mmap refuses
    if buf.flags & VRAM and not buf.flags & PUBLIC: raise OSError(errno.EPERM, f"mmap of VRAM buffer {buf.handle:#x} allocated without PUBLIC")
    if buf.flags & VRAM: handle.gpu.cpu_maps_vram(buf.va, _page_align(buf.size))
    if _page_align(size) > _page_align(buf.size): raise OSError(errno.EINVAL, f"mmap of {size:#x} bytes of a {buf.size:#x}-byte buffer")
    if addr == buf.va:   # the pages already back the VA: the CPU view is them
      system.mprotect(buf.va, _page_align(size), prot)
      buf.cpu_mapped = True
      return buf.va
    return _alias(buf.host, _page_align(size), addr or None)

  def munmap(self, handle: File, addr: int, size: int) -> None:
    with self.lock:
      buf = next((b for b in self.buffers.values() if b.va == addr and b.cpu_mapped), None) if handle.gpu else None
      if buf is None: return system.munmap(addr, _page_align(size))
      buf.cpu_mapped = False
      if buf.freed: self.release(buf)

  # ---------------- sysfs ----------------
  def read_text(self, path: str) -> str:
    if (text := self.sysfs().get(path.rstrip("/"))) is None: raise OSError(errno.ENOENT, f"{path}: no such file")
    return text

  def listdir(self, path: str) -> list[str]:
    prefix = path.rstrip("/") + "/"
    return sorted({p[len(prefix):].split("/")[0] for p in self.sysfs() if p.startswith(prefix)})

  def sysfs(self) -> dict[str, str]:
    files = {f"{KFD_TOPOLOGY}/generation_id": "1\n", f"{KFD_TOPOLOGY}/system_properties": "platform_oem 0\nplatform_id 0\nplatform_rev 0\n"}
    nodes = [("cpu", None), *[("gpu", g) for g in self.gpus]]
    for n, (kind, gpu) in enumerate(nodes):
      base = f"{KFD_TOPOLOGY}/nodes/{n}"
      props = self.cpu_properties() if gpu is None else self.gpu_properties(gpu)
      files[f"{base}/gpu_id"] = f"{gpu.gpu_id if gpu else 0}\n"
      files[f"{base}/name"] = f"{gpu.arch.name if gpu else 'AMD Ryzen (model host)'}\n"
      files[f"{base}/properties"] = "".join(f"{k} {v}\n" for k, v in props.items())
      if gpu is not None:
        files[f"{base}/mem_banks/0/properties"] = f"heap_type 1\nsize_in_bytes {gpu.arch.vram_bytes}\nflags 0\nwidth 64\nmem_clk_max 1250\n"
        for hwid, (major, minor, rev) in gpu.arch.ip:
          ip = f"/sys/class/drm/renderD{self.render_minor(gpu)}/device/ip_discovery/die/0/{hwid}/0"
          files.update({f"{ip}/major": f"{major}\n", f"{ip}/minor": f"{minor}\n", f"{ip}/revision": f"{rev}\n"})
    return files

  @staticmethod
  def cpu_properties() -> dict[str, int]:
    return {"cpu_cores_count": os.cpu_count() or 1, "simd_count": 0, "mem_banks_count": 1, "caches_count": 0, "io_links_count": 0,
            "cpu_core_id_base": 0, "simd_id_base": 0, "max_waves_per_simd": 0, "lds_size_in_kb": 0, "gds_size_in_kb": 0,
            "wave_front_size": 0, "array_count": 0, "simd_arrays_per_engine": 0, "cu_per_simd_array": 0, "simd_per_cu": 0,
            "vendor_id": 0, "device_id": 0, "drm_render_minor": 0, "gfx_target_version": 0, "num_xcc": 0}

  def gpu_properties(self, gpu: GPU) -> dict[str, int]:
    """kfd_topology.c node_props names and order (node_show)."""
    a, i = gpu.arch, self.gpus.index(gpu)
    return {"cpu_cores_count": 0, "simd_count": a.simd_count, "mem_banks_count": 1, "caches_count": 0, "io_links_count": 1,
            "p2p_links_count": 0, "cpu_core_id_base": 0, "simd_id_base": 0x80000000 + i * 0x1000,
            "max_waves_per_simd": a.max_waves_per_simd, "lds_size_in_kb": a.lds_size_in_kb, "gds_size_in_kb": 0, "num_gws": 0,
            "wave_front_size": a.wave_front_size, "array_count": a.array_count, "simd_arrays_per_engine": a.simd_arrays_per_engine,
            "cu_per_simd_array": a.cu_per_simd_array, "simd_per_cu": a.simd_per_cu, "max_slots_scratch_cu": a.max_slots_scratch_cu,
            "gfx_target_version": a.gfx_target_version, "vendor_id": 4098, "device_id": a.device_id, "location_id": (3 + i) << 8,
            "domain": 0, "drm_render_minor": self.render_minor(gpu), "hive_id": 0, "num_sdma_engines": a.num_sdma_engines,
            "num_sdma_xgmi_engines": a.num_sdma_xgmi_engines, "num_sdma_queues_per_engine": 6, "num_cp_queues": 8 * a.num_xcc,
            "max_engine_clk_fcompute": 2500, "local_mem_size": 0, "fw_version": 2000, "capability": 0, "debug_prop": 0,
            "sdma_fw_version": 20, "unique_id": 0x5A17_0000 + i, "num_xcc": a.num_xcc, "max_engine_clk_ccompute": 4000}

  # ---------------- ioctls ----------------
  def ioctl(self, handle: File, name: str, request: int, arg) -> int:
    if handle.gpu is not None: raise OSError(errno.ENOTTY, f"{name} ({request:#x}) on {handle.path}: the model's render node takes no ioctls")
    calls = {0x01: ("kfd_ioctl_get_version_args", self.get_version), 0x02: ("kfd_ioctl_create_queue_args", self.create_queue),
             0x03: ("kfd_ioctl_destroy_queue_args", self.destroy_queue), 0x08: ("kfd_ioctl_create_event_args", self.create_event),
             0x09: ("kfd_ioctl_event_id_args", self.destroy_event), 0x0A: ("kfd_ioctl_event_id_args", self.set_event),
             0x0B: ("kfd_ioctl_event_id_args", self.reset_event), 0x0C: ("kfd_ioctl_wait_events_args", self.wait_events),
             0x15: ("kfd_ioctl_acquire_vm_args", self.acquire_vm), 0x16: ("kfd_ioctl_alloc_memory_of_gpu_args", self.alloc),
             0x17: ("kfd_ioctl_free_memory_of_gpu_args", self.free), 0x18: ("kfd_ioctl_map_memory_to_gpu_args", self.map),
             0x19: ("kfd_ioctl_unmap_memory_from_gpu_args", self.unmap), 0x25: ("kfd_ioctl_runtime_enable_args", self.runtime_enable)}
    nr = request & 0xFF
    if request >> 8 & 0xFF != ord("K") or nr not in calls: raise OSError(errno.EINVAL, f"{name} ({request:#x}): no such amdkfd ioctl in the model")
    struct, run = calls[nr]
    ffi = _ffi if struct in MODEL_STRUCTS else uapi.ffi
    if request >> 16 & 0x3FFF != ffi.sizeof(f"struct {struct}"):   # kfd_chardev.c kfd_ioctl: the size must match the table's
      raise OSError(errno.EINVAL, f"{name} ({request:#x}) encodes {request >> 16 & 0x3FFF} bytes, struct {struct} has {ffi.sizeof(f'struct {struct}')}")
    address = arg if isinstance(arg, int) else int(uapi.ffi.cast("uintptr_t", arg))
    args = ffi.cast(f"struct {struct} *", address)
    if run is self.wait_events: return run(args)   # waits without the lock
    with self.lock:
      run(args)
    return 0

  def get_version(self, a) -> None: a.major_version, a.minor_version = UAPI_VERSION
  def runtime_enable(self, a) -> None: self.runtime_enabled = True   # kfd_chardev.c kfd_ioctl_runtime_enable (no debugger)

  def gpu_of(self, gpu_id: int, what: str) -> GPU:
    if (gpu := self.gpu_by_id(gpu_id)) is None: raise OSError(errno.EINVAL, f"{what}: no GPU with gpu_id {gpu_id:#x}")
    return gpu

  def bound(self, gpu_id: int, what: str, err: int) -> GPU:
    """kfd_process.c kfd_bind_process_to_device: the GPU needs a VM (ACQUIRE_VM) first."""
    gpu = self.gpu_of(gpu_id, what)
    if gpu_id not in self.vms: raise OSError(err, f"{what}: gpu_id {gpu_id:#x} has no VM yet (ACQUIRE_VM first)")
    return gpu

  def acquire_vm(self, a) -> None:
    # kfd_chardev.c kfd_ioctl_acquire_vm: the fd must be a DRM file of that GPU; a second, different one is EBUSY
    gpu = self.gpu_of(a.gpu_id, "ACQUIRE_VM")
    f = self.file_of(a.drm_fd)
    if f is None or f.gpu is None: raise OSError(errno.EINVAL, f"ACQUIRE_VM: drm_fd {a.drm_fd} is no render node of the model")
    if f.gpu is not gpu: raise OSError(errno.EINVAL, f"ACQUIRE_VM: drm_fd {a.drm_fd} is {f.path}, not gpu_id {a.gpu_id:#x}'s render node")
    if (held := self.vms.get(a.gpu_id)) is not None and held is not f: raise OSError(errno.EBUSY, f"ACQUIRE_VM: gpu_id {a.gpu_id:#x} already has a VM from another DRM file")
    self.vms[a.gpu_id] = f

  # ---- memory
  def alloc(self, a) -> None:
    flags, size, va = a.flags, a.size, a.va_addr
    if size == 0: raise OSError(errno.EINVAL, "ALLOC_MEMORY_OF_GPU: size 0")   # kfd_chardev.c kfd_ioctl_alloc_memory_of_gpu
    if flags & ~KNOWN_FLAGS: raise OSError(errno.EINVAL, f"ALLOC_MEMORY_OF_GPU: flags {flags:#x} set bits kfd_ioctl.h doesn't define ({flags & ~KNOWN_FLAGS:#x})")
    gpu = self.bound(a.gpu_id, "ALLOC_MEMORY_OF_GPU", errno.ENODEV)
    kinds = [k for k in (VRAM, GTT, USERPTR, DOORBELL, MMIO_REMAP) if flags & k]
    # amdgpu_amdkfd_gpuvm.c amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu: one domain (VRAM, GTT, USERPTR, DOORBELL or MMIO_REMAP)
    if len(kinds) != 1: raise OSError(errno.EINVAL, f"ALLOC_MEMORY_OF_GPU: flags {flags:#x} name {len(kinds)} memory domains, not one")
    kind, pages = kinds[0], _page_align(size)
    # amdgpu_vm.c amdgpu_vm_bo_map: page-aligned VA, no overlap with another mapping of the VM (checked here at ALLOC)
    if va % system.PAGE_SIZE: raise OSError(errno.EINVAL, f"ALLOC_MEMORY_OF_GPU: va_addr {va:#x} is not page aligned")
    if (hit := next((b for b in self.buffers.values() if b.gpu_id == a.gpu_id and b.va < va + pages and va < b.va + _page_align(b.size)), None)):
      raise OSError(errno.EINVAL, f"ALLOC_MEMORY_OF_GPU: [{va:#x}, {va + pages:#x}) overlaps buffer {hit.handle:#x} at {hit.va:#x}")
    if kind == DOORBELL and size != DOORBELL_SLICE: raise OSError(errno.EINVAL, f"DOORBELL allocation of {size:#x} bytes: the slice is {DOORBELL_SLICE:#x}")
    if kind == MMIO_REMAP and size != system.PAGE_SIZE: raise OSError(errno.EINVAL, f"MMIO_REMAP allocation of {size:#x} bytes: it is one page")
    if kind == VRAM and self.vram_used[a.gpu_id] + pages > gpu.arch.vram_bytes:
      raise OSError(errno.ENOMEM, f"ALLOC_MEMORY_OF_GPU: {size:#x} bytes of VRAM; {gpu.arch.vram_bytes - self.vram_used[a.gpu_id]:#x} free")
    host = self.back(kind, a, pages)
    idr = next(self.idr[a.gpu_id])
    buf = Buffer(a.gpu_id << 32 | idr, a.gpu_id, va, size, flags, host, next(self.drm_offsets))   # kfd_priv.h MAKE_HANDLE
    self.buffers[buf.handle] = buf
    if kind == VRAM: self.vram_used[a.gpu_id] += pages
    a.handle = buf.handle
    # kfd_chardev.c: MMIO is mapped through /dev/kfd; everything else through the render node's DRM offset
    a.mmap_offset = MMAP_MMIO << MMAP_TYPE_SHIFT | a.gpu_id << MMAP_GPU_ID_SHIFT if kind == MMIO_REMAP else buf.drm_offset

  def back(self, kind: int, a, pages: int) -> int:
    """Host memory for a new buffer: the user's pages (USERPTR) or pages placed at its VA."""
    if kind == USERPTR:
      user = a.mmap_offset
      if not user or user % system.PAGE_SIZE: raise OSError(errno.EINVAL, f"USERPTR allocation: user address {user:#x} is 0 or not page aligned")
      # amdgpu_ttm.c amdgpu_ttm_tt_get_user_pages: the user range must be mapped
      if not _user_range_mapped(user, pages): raise OSError(errno.EFAULT, f"USERPTR allocation: [{user:#x}, {user + pages:#x}) is not mapped in the process")
      return user
    if kind in (DOORBELL, MMIO_REMAP):
      return _alias(self.doorbells[a.gpu_id] if kind == DOORBELL else self.mmio[a.gpu_id], pages, a.va_addr)
    _mmap_fixed(a.va_addr, pages, 3, system.MAP_SHARED | system.MAP_ANONYMOUS)
    return a.va_addr

  def buffer(self, handle: int, what: str) -> Buffer:
    self.gpu_of(handle >> 32, what)
    if (buf := self.buffers.get(handle)) is None: raise OSError(errno.EINVAL, f"{what}: no buffer with handle {handle:#x}")
    return buf

  def free(self, a) -> None:
    buf = self.buffer(a.handle, "FREE_MEMORY_OF_GPU")
    # amdgpu_amdkfd_gpuvm_free_memory_of_gpu: still mapped to a GPU -> EBUSY
    if buf.mapped: raise OSError(errno.EBUSY, f"FREE_MEMORY_OF_GPU: buffer {buf.handle:#x} at {buf.va:#x} is still mapped to GPU(s) {sorted(map(hex, buf.mapped))}")
    del self.buffers[buf.handle]
    buf.freed = True
    if buf.flags & VRAM: self.vram_used[buf.gpu_id] -= _page_align(buf.size)
    self.gpu_by_id(buf.gpu_id).cpu_written.pop(buf.va, None)
    if self.signal_page is buf: self.signal_page = None
    if not buf.cpu_mapped: self.release(buf, reserve=True)

  def release(self, buf: Buffer, reserve: bool = False) -> None:
    """Gives the VA back: to the driver's PROT_NONE reservation (never CPU-mapped) or unmapped (its munmap came)."""
    if buf.flags & USERPTR: return
    if reserve: _mmap_fixed(buf.va, _page_align(buf.size), 0, system.MAP_PRIVATE | system.MAP_ANONYMOUS | MAP_NORESERVE)
    else: system.munmap(buf.va, _page_align(buf.size))

  def device_ids(self, a, what: str) -> list[int]:
    # kfd_chardev.c kfd_ioctl_map_memory_to_gpu: an empty list or n_success > n_devices is EINVAL
    if not a.n_devices: raise OSError(errno.EINVAL, f"{what}: device_ids array is empty")
    if a.n_success > a.n_devices: raise OSError(errno.EINVAL, f"{what}: n_success {a.n_success} > n_devices {a.n_devices}")
    return list(uapi.ffi.cast("uint32_t *", a.device_ids_array_ptr)[0:a.n_devices])

  def map(self, a) -> None:
    buf, ids = self.buffer(a.handle, "MAP_MEMORY_TO_GPU"), self.device_ids(a, "MAP_MEMORY_TO_GPU")
    for i in range(a.n_success, a.n_devices):
      gpu = self.bound(ids[i], f"MAP_MEMORY_TO_GPU device_ids[{i}]", errno.EINVAL)
      if gpu.gpu_id not in buf.mapped:   # mapping twice is harmless (amdgpu_amdkfd_gpuvm_map_memory_to_gpu skips mapped VMs)
        gpu.map(buf.va, _page_align(buf.size), buf.host)
        buf.mapped.add(gpu.gpu_id)
      a.n_success = i + 1

  def unmap(self, a) -> None:
    buf, ids = self.buffer(a.handle, "UNMAP_MEMORY_FROM_GPU"), self.device_ids(a, "UNMAP_MEMORY_FROM_GPU")
    for i in range(a.n_success, a.n_devices):
      gpu = self.gpu_of(ids[i], f"UNMAP_MEMORY_FROM_GPU device_ids[{i}]")
      # amdgpu_amdkfd_gpuvm_unmap_memory_from_gpu: not mapped there -> EINVAL; a live queue's buffer -> EBUSY
      if gpu.gpu_id not in buf.mapped: raise OSError(errno.EINVAL, f"UNMAP_MEMORY_FROM_GPU: buffer {buf.handle:#x} is not mapped to gpu_id {gpu.gpu_id:#x}")
      if buf.queue_refs: raise OSError(errno.EBUSY, f"UNMAP_MEMORY_FROM_GPU: buffer {buf.handle:#x} at {buf.va:#x} belongs to a live queue")
      gpu.unmap(buf.va)
      buf.mapped.discard(gpu.gpu_id)
      a.n_success = i + 1

  # ---- queues
  def queue_buffer(self, gpu: GPU, addr: int, size: int, what: str) -> Buffer:
    """kfd_queue.c kfd_queue_buffer_get: addr's page starts a buffer mapped to this GPU, of exactly `size` bytes (0: any)."""
    page = addr & ~(system.PAGE_SIZE - 1)
    buf = next((b for b in self.buffers.values() if gpu.gpu_id in b.mapped and b.va == page), None)
    if buf is None: raise OSError(errno.EINVAL, f"CREATE_QUEUE: {what} at {addr:#x} is not at the start of a buffer mapped to gpu_id {gpu.gpu_id:#x}")
    if size and _page_align(buf.size) != size: raise OSError(errno.EINVAL, f"CREATE_QUEUE: {what} buffer at {buf.va:#x} holds {_page_align(buf.size):#x} bytes, the queue needs {size:#x}")
    return buf

  def create_queue(self, a) -> None:
    # kfd_chardev.c set_queue_properties_from_user
    if a.queue_percentage & 0xFF > MAX_QUEUE_PERCENTAGE: raise OSError(errno.EINVAL, f"CREATE_QUEUE: queue_percentage {a.queue_percentage & 0xFF} > 100")
    if a.queue_priority > MAX_QUEUE_PRIORITY: raise OSError(errno.EINVAL, f"CREATE_QUEUE: queue_priority {a.queue_priority} > 15")
    if a.ring_size & (a.ring_size - 1) or not a.ring_size: raise OSError(errno.EINVAL, f"CREATE_QUEUE: ring_size {a.ring_size:#x} is not a power of 2")
    if a.queue_type not in (QUEUE_COMPUTE, QUEUE_SDMA, QUEUE_COMPUTE_AQL, QUEUE_SDMA_XGMI): raise OSError(ENOTSUPP, f"CREATE_QUEUE: queue_type {a.queue_type}")
    if a.queue_type == QUEUE_COMPUTE_AQL: raise OSError(errno.EINVAL, "CREATE_QUEUE: AQL queues are not modelled (PM4 and SDMA are)")
    gpu = self.bound(a.gpu_id, "CREATE_QUEUE", errno.ESRCH)
    compute, arch = a.queue_type == QUEUE_COMPUTE, gpu.arch
    used = [self.queue_buffer(gpu, a.write_pointer_address, system.PAGE_SIZE, "write pointer"),
            self.queue_buffer(gpu, a.read_pointer_address, system.PAGE_SIZE, "read pointer"),
            self.queue_buffer(gpu, a.ring_base_address, a.ring_size, "ring")]
    if compute:   # kfd_queue.c kfd_queue_acquire_buffers: EOP and CWSR sizes as the topology node computes them
      if a.eop_buffer_address:
        if a.eop_buffer_size != arch.eop_buffer_size: raise OSError(errno.EINVAL, f"CREATE_QUEUE: eop_buffer_size {a.eop_buffer_size:#x}, the node's is {arch.eop_buffer_size:#x}")
        used.append(self.queue_buffer(gpu, a.eop_buffer_address, arch.eop_buffer_size, "EOP buffer"))
      if a.ctl_stack_size != arch.ctl_stack_size: raise OSError(errno.EINVAL, f"CREATE_QUEUE: ctl_stack_size {a.ctl_stack_size:#x}, the node's is {arch.ctl_stack_size:#x}")
      if a.ctx_save_restore_size < arch.cwsr_size: raise OSError(errno.EINVAL, f"CREATE_QUEUE: ctx_save_restore_size {a.ctx_save_restore_size:#x} is below the node's {arch.cwsr_size:#x}")
      total = -(-(a.ctx_save_restore_size + arch.debug_memory_size) * arch.num_xcc // 4096) * 4096  # kfd_queue_acquire_buffers total_cwsr_size
      used.append(self.queue_buffer(gpu, a.ctx_save_restore_address, total, "CWSR area"))
    qid = next(i for i in itertools.count() if i not in self.queues)   # kfd_process_queue_manager.c find_available_queue_slot
    doorbell_id = self.doorbell_id(gpu, compute)
    q = Queue(qid, "pm4" if compute else "sdma", a.ring_base_address, a.ring_size, a.read_pointer_address, a.write_pointer_address,
              system.memoryview_at(self.doorbells[gpu.gpu_id] + 8 * doorbell_id, 8).cast("Q"), doorbell_id)
    q.doorbell[0] = 0  # a new queue's write pointer is 0 (kfd_mqd_manager_v11.c init_mqd zeroes the MQD), whatever its reused doorbell slot held
    q.engine = (PM4Engine if compute else SDMAEngine)(gpu, q)
    for b in used: b.queue_refs += 1
    self.queues[qid] = (gpu, q, used)
    a.queue_id = qid
    # kfd_chardev.c kfd_ioctl_create_queue: doorbell mmap type, gpu_id and the byte offset in the process's slice (SOC15)
    a.doorbell_offset = MMAP_DOORBELL << MMAP_TYPE_SHIFT | a.gpu_id << MMAP_GPU_ID_SHIFT | 8 * doorbell_id
    gpu.add_queue(q)

  def doorbell_id(self, gpu: GPU, compute: bool) -> int:
    """kfd_device_queue_manager.c allocate_doorbell: CP queues take the first free id, SDMA queues the SDMA range."""
    taken = {q.doorbell_id for g, q, _ in self.queues.values() if g is gpu}
    ids = range(SDMA_DOORBELL_BASE) if compute else range(SDMA_DOORBELL_BASE, 2 * SDMA_DOORBELL_BASE)
    return next(i for i in ids if i not in taken)

  def destroy_queue(self, a) -> None:
    # kfd_process_queue_manager.c pqm_destroy_queue: an unknown id is EINVAL
    if (entry := self.queues.pop(a.queue_id, None)) is None: raise OSError(errno.EINVAL, f"DESTROY_QUEUE: no queue {a.queue_id}")
    gpu, q, used = entry
    gpu.remove_queue(q)
    for b in used: b.queue_refs -= 1

  # ---- events (kfd_events.c)
  def slots(self):
    return uapi.ffi.cast("uint64_t *", self.signal_page.host) if self.signal_page else None

  def create_event(self, a) -> None:
    if a.event_page_offset:   # the dGPU event page: a GTT buffer the user allocated, named by its handle on the first call
      if self.signal_page is not None: raise OSError(errno.EBUSY, "CREATE_EVENT: the process already has an event page")   # kfd_event_page_set
      buf = self.buffer(a.event_page_offset, "CREATE_EVENT event_page_offset")
      if not buf.flags & GTT: raise OSError(errno.EINVAL, f"CREATE_EVENT: event page {buf.handle:#x} is not GTT memory")  # amdgpu_amdkfd_gpuvm_map_gtt_bo_to_kernel
      if buf.size < SIGNAL_EVENT_LIMIT * 8: raise OSError(errno.EINVAL, f"CREATE_EVENT: event page of {buf.size:#x} bytes, needs {SIGNAL_EVENT_LIMIT * 8:#x}")
      self.signal_page = buf
      system.memoryview_at(buf.host, SIGNAL_EVENT_LIMIT * 8)[:] = b"\xff" * (SIGNAL_EVENT_LIMIT * 8)
    if a.event_type == EVENT_SIGNAL:
      if self.signal_page is None: raise OSError(errno.ENOMEM, "CREATE_EVENT: a signal event needs the event page (dGPUs pass it first)")
      ids = range(SIGNAL_EVENT_LIMIT)
    else: ids = range(FIRST_NONSIGNAL_EVENT_ID, 2**31)
    eid = next((i for i in ids if i not in self.events), None)
    if eid is None: raise OSError(errno.ENOSPC, "CREATE_EVENT: all 4096 signal slots are in use")
    self.events[eid] = Event(eid, a.event_type, bool(a.auto_reset))
    if a.event_type == EVENT_SIGNAL:
      self.slots()[eid] = UNSIGNALED
      a.event_page_offset, a.event_slot_index = MMAP_EVENTS << MMAP_TYPE_SHIFT, eid
    a.event_id, a.event_trigger_data = eid, eid

  def event(self, eid: int, what: str) -> Event:
    if (ev := self.events.get(eid)) is None: raise OSError(errno.EINVAL, f"{what}: no event {eid}")
    return ev

  def destroy_event(self, a) -> None: del self.events[self.event(a.event_id, "DESTROY_EVENT").event_id]
  def set_event(self, a) -> None:
    ev = self.event(a.event_id, "SET_EVENT")
    if ev.type != EVENT_SIGNAL: raise OSError(errno.EINVAL, f"SET_EVENT: event {ev.event_id} (type {ev.type}) can't be signalled by the CPU")
    self.signal(ev)
  def reset_event(self, a) -> None: self.event(a.event_id, "RESET_EVENT").signaled = False

  def signal(self, ev: Event) -> None:
    """kfd_events.c set_event: waiters wake; an auto-reset event with waiters stays unsignaled."""
    ev.signaled = not ev.auto_reset or not ev.waiters
    for w in ev.waiters: w[ev.event_id] = True
    self.changed.notify_all()

  def interrupt(self, ctxid: int, bits: int) -> None:
    """kfd_events.c kfd_signal_event_interrupt: the event named by the context id if its slot was written, else every
    signal event whose slot is no longer UNSIGNALED; the slot is reset (acknowledge_signal)."""
    slots = self.slots()
    if slots is None: return
    ev = self.events.get(ctxid) if ctxid < SIGNAL_EVENT_LIMIT and bits >= 12 else None
    hits = [ev] if ev is not None and slots[ctxid] != UNSIGNALED else \
           [e for e in self.events.values() if e.type == EVENT_SIGNAL and slots[e.event_id] != UNSIGNALED]
    for e in hits:
      slots[e.event_id] = UNSIGNALED
      self.signal(e)

  def fault(self, gpu: GPU, e: GPUFault) -> None:
    """A queue fault: kfd_signal_vm_fault_event (memory events get the faulting page) or a reset's HW exception."""
    gpu_id = gpu.gpu_id
    for ev in self.events.values():
      if e.address is not None and ev.type == EVENT_MEMORY:
        ev.data = {"va": e.address & ~(system.PAGE_SIZE - 1), "gpu_id": gpu_id, "NotPresent": 1}
        self.signal(ev)
      elif e.address is None and ev.type == EVENT_HW_EXCEPTION:
        ev.data = {"reset_type": HW_EXCEPTION_PER_ENGINE_RESET, "reset_cause": HW_EXCEPTION_GPU_HANG, "memory_lost": 0, "gpu_id": gpu_id}
        self.signal(ev)

  def wait_events(self, a) -> int:
    # kfd_events.c kfd_wait_on_events: unknown ids are EINVAL; timeout 0 returns at once, 0xFFFFFFFF never times out
    datas = _ffi.cast("struct kfd_event_data *", a.events_ptr)
    deadline = None if a.timeout == 0xFFFFFFFF else time.monotonic() + a.timeout / 1000
    with self.lock:
      evs = [self.event(datas[i].event_id, "WAIT_EVENTS") for i in range(a.num_events)]
      hit: dict[int, bool] = {}
      for ev in evs:   # init_event_waiter: a signaled event counts; an auto-reset one is consumed
        hit[ev.event_id] = ev.signaled
        if ev.auto_reset: ev.signaled = False
        ev.waiters.append(hit)
      try:
        while not (all if a.wait_for_all else any)(hit[ev.event_id] for ev in evs):
          left = None if deadline is None else deadline - time.monotonic()
          if left is not None and left <= 0:
            a.wait_result = WAIT_TIMEOUT
            return 0
          self.changed.wait(left)
        for i, ev in enumerate(evs):   # copy_signaled_event_data
          if hit[ev.event_id] and ev.data: self.copy_event_data(datas[i], ev)
        a.wait_result = WAIT_COMPLETE
        return 0
      finally:
        for ev in evs: ev.waiters.remove(hit)

  @staticmethod
  def copy_event_data(out, ev: Event) -> None:
    if ev.type == EVENT_MEMORY:
      m = out.memory_exception_data
      m.va, m.gpu_id, m.failure.NotPresent, m.ErrorType = ev.data["va"], ev.data["gpu_id"], ev.data["NotPresent"], 0
    else:
      h = out.hw_exception_data
      h.reset_type, h.reset_cause, h.memory_lost, h.gpu_id = ev.data["reset_type"], ev.data["reset_cause"], ev.data["memory_lost"], ev.data["gpu_id"]
