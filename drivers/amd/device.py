"""AMD: AMD GPUs (RDNA3/RDNA4, CDNA3/CDNA4) driven from userspace over amdkfd. The GPU is found in KFD's topology
(sysfs); memory is allocated through /dev/kfd at addresses tg reserves, so the CPU and the GPU see a buffer at the
same virtual address; tg writes PM4 packets to a compute queue and SDMA packets to a copy queue and rings their
doorbells itself. Kernels are LLVM's AMDGPU code objects, linked by tg. With DEV=MOCK+AMD the same code runs
against drivers/mock/amd."""
from __future__ import annotations
import functools, time
from dataclasses import dataclass, field
import numpy as np
from ir.dtype import bits_of
from ir.helpers import round_up
from ir.switches import DEV, HCQDEV_WAIT_TIMEOUT_MS
from ir.target import parse_targets, target_for
from codegen.amdgpu import AMDGPURenderer
from codegen.amdgpu_compiler import AMDGPUCompiler
from codegen.amdgpu_elf import read as read_code_object
from codegen.renderer import ProgramSpec
from drivers.device import DeviceUnavailable
from drivers.gpu_memory import ArgumentPool, GPUAllocator, GPUBuffer
from drivers.hcq import HCQCompiled, HCQProgram, HCQTimeoutError
from drivers.system import MAP_ANONYMOUS, MAP_PRIVATE, MAP_SHARED, PROT_READ, PROT_WRITE, memoryview_at, system_for
from drivers.amd import kfd, pm4
from drivers.amd.queues import AMDSignal, queues_for

TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology/nodes"
MAP_FIXED, MAP_NORESERVE, PROT_NONE = 0x10, 0x4000, 0
PAGE = 0x1000
RING_BYTES = 1 << 20
EOP_BYTES = 0x1000  # the node's eop_buffer_size on gfx9 and newer (kfd_queue.c kfd_queue_ctx_save_restore_size)
DOORBELL_PAGE = 0x2000
HDP_MEM_FLUSH_CNTL = 0  # its offset in the MMIO remap page (kfd_ioctl.h enum kfd_mmio_remap)
WAKE_POLL_MS = 10  # a wait in WAIT_EVENTS wakes at least this often (to check for faults)
GPU_CLOCK_MHZ = 100  # RELEASE_MEM's GPU clock counter
USER_SGPR_KERNARG_PTR = 1 << 3  # kernel_code_properties bits (AMDHSAKernelDescriptor.h)
USER_SGPRS_UNSUPPLIED = {0: "private segment buffer", 1: "dispatch ptr", 2: "queue ptr", 4: "dispatch id", 5: "flat scratch init"}

def is_missing(e: OSError) -> bool: return e.errno in (2, 6, 19)  # ENOENT, ENXIO, ENODEV

@dataclass(eq=False)
class Session:
  """What the AMD devices of a process share: KFD keeps one process per address space however often /dev/kfd is
  opened (amdkfd/kfd_process.c kfd_create_process), so one file and one event page (set once per process:
  kfd_events.c kfd_event_page_set) serve every GPU."""
  server: object  # what serves /dev/kfd: a new kernel module (or model) starts a new session
  kfd: int
  event_page: GPUBuffer | None = None
  runtime_enabled: bool = False
  devices: list[AMDDevice] = field(default_factory=list)

_sessions: dict[int, Session] = {}  # id(System) -> its session

def session_of(system) -> Session:
  server = system.server_of("/dev/kfd")
  if (session := _sessions.get(id(system))) is None or session.server is not server:
    session = _sessions[id(system)] = Session(server, system.open("/dev/kfd"))
  return session

@dataclass(frozen=True)
class Node:
  """A GPU in KFD's topology: its node directory number, gpu_id and `properties` (key -> int)."""
  number: int
  gpu_id: int
  props: dict[str, int]
  @property
  def gfx_version(self) -> int: return self.props["gfx_target_version"]
  @property
  def arch(self) -> str:
    v = self.gfx_version
    return f"gfx{v // 10000}{(v // 100) % 100:x}{v % 100:x}"
  @property
  def xccs(self) -> int: return max(self.props.get("num_xcc", 1), 1)
  @property
  def cus_per_xcc(self) -> int: return self.props["simd_count"] // self.props["simd_per_cu"] // self.xccs

def gpu_nodes(system) -> list[Node]:
  """The GPU nodes of KFD's topology (gpu_id != 0; node 0 is usually the CPU), in node order."""
  nodes = []
  for name in sorted(system.listdir(TOPOLOGY), key=lambda n: int(n) if n.isdigit() else -1):
    if not name.isdigit(): continue
    try: gpu_id = int(system.read_text(f"{TOPOLOGY}/{name}/gpu_id").strip() or 0)
    except OSError: continue
    if gpu_id == 0: continue
    props = {k: int(v) for k, v in (line.split() for line in system.read_text(f"{TOPOLOGY}/{name}/properties").splitlines() if line.strip())}
    nodes.append(Node(int(name), gpu_id, props))
  return nodes

def cwsr_sizes(node: Node) -> tuple[int, int, int]:
  """(ctl_stack_size, ctx_save_restore_size, the whole CWSR buffer with the debugger's part, for every XCC) as KFD
  computes and checks them (amdkfd/kfd_queue.c kfd_queue_ctx_save_restore_size, kfd_queue_acquire_buffers)."""
  gfxv, p, cus = node.gfx_version, node.props, node.cus_per_xcc
  vgpr = 0x80000 if gfxv in (90402, 90010, 90008, 90500) else 0x60000 if gfxv in (110000, 110001, 120000, 120001) else 0x40000
  lds = p["lds_size_in_kb"] << 10 if gfxv == 90500 else 0x10000
  waves = min(cus * 40, p["array_count"] // p["simd_arrays_per_engine"] * 512) if gfxv < 100100 else cus * 32
  wg_data = round_up(cus * (vgpr + 0x4000 + lds + 0x1000), PAGE)
  ctl_stack = round_up(40 + waves * (12 if gfxv >= 100100 else 8) + 8, PAGE)
  if gfxv // 10000 == 10: ctl_stack = min(ctl_stack, 0x7000)
  debug = round_up(waves * 32, 64)
  return ctl_stack, ctl_stack + wg_data, round_up((ctl_stack + wg_data + debug) * node.xccs, PAGE)

class Ring:
  """A queue's ring (memory the engine reads), the page holding its write and read pointers, and its 64-bit doorbell.
  PM4 rings count dwords, SDMA rings bytes; a submission never wraps: the ring's tail is filled with NOPs and it goes
  on at the start. `flush` runs before the doorbell (the AM driver's HDP flush); `fetch(view)` makes a view of the
  pointer page show what the engine wrote (behind the USB bridge); `release` takes the queue down."""
  def __init__(self, dev, name: str, unit: int, nop, ring: GPUBuffer, pointers: GPUBuffer, doorbell, release, flush=lambda: None,
               fetch=lambda view: None):
    self.dev, self.name, self.unit, self.nop, self.ring, self.pointers, self.doorbell = dev, name, unit, nop, ring, pointers, doorbell
    self.release, self.flush, self.fetch = release, flush, fetch
    self.words = np.frombuffer(memoryview_at(self.ring.cpu, RING_BYTES), dtype=np.uint32)
    pointers_view = np.frombuffer(memoryview_at(self.pointers.cpu, 0x100), dtype=np.uint64)
    self.wptr_mem, self.rptr_mem = pointers_view[0:1], pointers_view[16:17]  # wptr at 0, rptr at 0x80: one page
    self.wptr = 0  # in pointer steps, never wrapping
    self.rung = 0  # the write pointer the doorbell last told the engine
    self.seen_rptr = 0  # the read pointer as last read: the ring has at least the room it showed

  def destroy(self) -> None: self.release()

  @property
  def rptr(self) -> int:
    self.fetch(self.rptr_mem)
    return int(self.rptr_mem[0])

  def submit(self, words: list[int]) -> None:
    steps_per_dword, ring_steps = 4 // self.unit, RING_BYTES // self.unit
    n = len(words) * steps_per_dword
    if n >= ring_steps // 2: raise ValueError(f"{len(words)} command dwords don't fit a {RING_BYTES}-byte ring")
    at = self.wptr % ring_steps
    pad = ring_steps - at if at + n > ring_steps else 0
    self.wait_for_room(pad + n, ring_steps)
    if pad:
      filler = self.nop(pad // steps_per_dword)
      self.words[at // steps_per_dword:] = filler
      self.wptr, at = self.wptr + pad, 0
    self.words[at // steps_per_dword:at // steps_per_dword + len(words)] = words
    self.wptr += n
    self.wptr_mem[0] = self.wptr
    self.ring_doorbell()

  def ring_doorbell(self) -> None:
    """Tell the engine about everything up to the write pointer (again, where a failed transfer lost a doorbell)."""
    if self.rung == self.wptr: return
    self.flush()
    self.doorbell[0] = self.wptr
    self.rung = self.wptr

  def wait_for_room(self, steps: int, ring_steps: int) -> None:
    full = lambda: (self.wptr - self.seen_rptr) % ring_steps + steps >= ring_steps  # the read pointer may count on or wrap: compare modulo
    if not full(): return
    deadline = time.perf_counter() + HCQDEV_WAIT_TIMEOUT_MS.value / 1000
    while True:
      self.seen_rptr = self.rptr
      if not full(): return
      if (err := self.dev.check_faults()) is not None or time.perf_counter() > deadline:
        raise HCQTimeoutError(err or f"{self.dev.device}: {self.name} stays full (read pointer {self.seen_rptr}, write pointer {self.wptr})")
      time.sleep(50e-6)

def kfd_ring(dev: AMDDevice, queue_type: int, nop) -> Ring:
  """A KFD user-mode queue (CREATE_QUEUE) on a ring and pointer page in host memory."""
  ring, pointers = dev.alloc_memory(RING_BYTES, host=True, uncached=True), dev.alloc_memory(PAGE, host=True, uncached=True)
  extra, owned = {}, [ring, pointers]
  if queue_type == kfd.QUEUE_TYPE_COMPUTE:
    ctl_stack, save_restore, cwsr_bytes = cwsr_sizes(dev.node)
    eop, cwsr = dev.alloc_memory(EOP_BYTES), dev.alloc_memory(cwsr_bytes)
    owned += [eop, cwsr]
    extra = dict(eop_buffer_address=eop.va, eop_buffer_size=EOP_BYTES, ctx_save_restore_address=cwsr.va, ctx_save_restore_size=save_restore, ctl_stack_size=ctl_stack)
  args = dev.kfd_call("CREATE_QUEUE", "kfd_ioctl_create_queue_args", ring_base_address=ring.va, ring_size=RING_BYTES,
                      write_pointer_address=pointers.va, read_pointer_address=pointers.va + 0x80, gpu_id=dev.node.gpu_id,
                      queue_type=queue_type, queue_percentage=kfd.MAX_QUEUE_PERCENTAGE, queue_priority=7, **extra)
  def release():
    dev.kfd_call("DESTROY_QUEUE", "kfd_ioctl_destroy_queue_args", queue_id=args.queue_id)
    for buf in owned: dev.free_memory(buf)
  return Ring(dev, f"queue {args.queue_id}", 4 if queue_type == kfd.QUEUE_TYPE_COMPUTE else 1, nop, ring, pointers, dev.doorbell_at(args.doorbell_offset), release)

class AMDProgram(HCQProgram):
  """A kernel of a linked code object: the image in video memory, and the compute registers from its descriptor."""
  def __init__(self, dev: AMDDevice, name: str, lib: bytes, spec: ProgramSpec):
    super().__init__(dev, name)
    code = read_code_object(lib)
    if name not in code.kernels: raise RuntimeError(f"the code object has no kernel {name!r} (it has {', '.join(code.kernels)})")
    self.kernel = kernel = code.kernels[name]
    kd = kernel.descriptor
    if unsupplied := [what for bit, what in USER_SGPRS_UNSUPPLIED.items() if kd.kernel_code_properties >> bit & 1]:
      raise RuntimeError(f"{name}: the kernel wants {', '.join(unsupplied)} in user SGPRs; tg supplies only the kernarg pointer")
    if not kd.kernel_code_properties & USER_SGPR_KERNARG_PTR and kernel.args:
      raise RuntimeError(f"{name}: the kernel takes {len(kernel.args)} arguments but no kernarg pointer")
    if kd.private_segment_fixed_size: dev.ensure_scratch(kd.private_segment_fixed_size)
    self.image = dev.upload(code.image + bytes(round_up(len(code.image), PAGE) - len(code.image)))
    self.code_va = self.image.va + kernel.kd_offset + kd.kernel_code_entry_byte_offset
    if self.code_va % 256: raise RuntimeError(f"{name}: code at {self.code_va:#x} is not 256-byte aligned, as COMPUTE_PGM_LO needs")
    lds = kd.group_segment_fixed_size
    if lds > dev.node.props.get("lds_size_in_kb", 64) * 1024: raise RuntimeError(f"{name}: {lds} bytes of LDS per workgroup; the GPU has {dev.node.props.get('lds_size_in_kb', 64)} KiB")
    self.rsrc1, self.rsrc2, self.rsrc3 = kd.rsrc1, kd.rsrc2 | (round_up(lds, 512) // 512) << 15, kd.rsrc3  # LDS_SIZE in 512-byte granules
    self.wave32 = bool(kd.kernel_code_properties >> 10 & 1)
    self.var_dtypes = [v.dtype for v in spec.vars]
    if len(kernel.args) != len(spec.globals) + len(spec.vars):
      raise RuntimeError(f"{name}: the code object declares {len(kernel.args)} arguments, tg passes {len(spec.globals) + len(spec.vars)}")
  def execute(self, args, global_size, local_size) -> None: raise RuntimeError("AMD kernels run through the compute queue")
  def kernel_args(self, bufs: tuple, vals: tuple) -> list: return [*bufs, *(bits_of(v, dt) for v, dt in zip(vals, self.var_dtypes))]

class AMDAllocator(GPUAllocator):
  """Video memory, and the caller's host memory used in place (Tensor.from_blob) through USERPTR."""
  uses_host_memory = True
  def wrap(self, address: int, size: int) -> GPUBuffer: return self.dev.register_host_memory(address, size)
  def unwrap(self, opaque: GPUBuffer) -> None: self.dev.unregister_host_memory(opaque)

class AMDDevice(HCQCompiled):
  """The timeline's signals raise an interrupt that KFD turns into the device's wake event, so a wait that outlasts
  its spin sleeps in WAIT_EVENTS instead of polling."""
  timestamp_ticks_per_us = GPU_CLOCK_MHZ
  signal_t = AMDSignal
  def __new__(cls, device: str):
    """Over a PCI function with no kernel driver (DEV=PCI+AMD, MOCKPCI+AMD) the AM driver runs it (am_device.py), and
    behind a USB bridge (DEV=USB+AMD, MOCKUSB+AMD) too (am_usb_device.py)."""
    target = target_for(parse_targets(DEV.value), "AMD")
    if target.renderer not in ("", "LLVM"): raise ValueError(f"AMD has no renderer {target.renderer!r} (known: LLVM)")
    if cls is AMDDevice and target.interface in ("USB", "MOCKUSB"):
      from drivers.amd.am_usb_device import AMUSBDevice
      return super().__new__(AMUSBDevice)
    if cls is AMDDevice and target.interface in ("PCI", "MOCKPCI"):
      from drivers.amd.am_device import AMPCIDevice
      return super().__new__(AMPCIDevice)
    return super().__new__(cls)

  def __init__(self, device: str):
    target = target_for(parse_targets(DEV.value), "AMD")
    self.system = system_for(target.interface)
    index = int(device.split(":")[1]) if ":" in device else 0
    try: self.session = session_of(self.system)
    except OSError as e:
      if is_missing(e): raise DeviceUnavailable(f"AMD unavailable: no amdkfd ({e.strerror})") from None
      raise
    self.kfd = self.session.kfd
    nodes = gpu_nodes(self.system)
    if index >= len(nodes): raise DeviceUnavailable(f"AMD unavailable: {device} asked for, KFD's topology has {len(nodes)} GPU(s)")
    self.node = nodes[index]
    self.arch, self.gfx = self.node.arch, self.node.gfx_version // 10000
    if target.arch and target.arch != self.arch: raise ValueError(f"DEV asks for {target.arch}, but {device} is a {self.arch}")
    self.render = self.system.open(f"/dev/dri/renderD{self.node.props['drm_render_minor']}")
    version = self.kfd_call("GET_VERSION", "kfd_ioctl_get_version_args")
    self.kfd_version = (version.major_version, version.minor_version)
    self.kfd_call("ACQUIRE_VM", "kfd_ioctl_acquire_vm_args", drm_fd=self.render, gpu_id=self.node.gpu_id)
    if self.kfd_version >= (1, 14) and not self.session.runtime_enabled:  # once per process (kfd_chardev.c kfd_ioctl_runtime_enable)
      arg = kfd.ffi_1_14.new("struct kfd_ioctl_runtime_enable_args *", {"mode_mask": kfd.RUNTIME_ENABLE_MODE_ENABLE})
      self.system.ioctl(self.kfd, "AMDKFD_IOC_RUNTIME_ENABLE", kfd.RUNTIME_ENABLE, arg)
      self.session.runtime_enabled = True
    self.doorbells: dict[int, np.ndarray] = {}
    self.hdp_flush_cntl = self.map_mmio_remap()[HDP_MEM_FLUSH_CNTL // 4:][:1]
    self.retired: list[tuple[GPUBuffer, list[int]]] = []
    first = self.session.event_page is None
    if first: self.session.event_page = self.alloc_memory(0x8000, host=True, uncached=True)  # KFD's signal slots, 8 bytes each
    self.fault_events = [self.kfd_call("CREATE_EVENT", "kfd_ioctl_create_event_args", event_type=kind, node_id=self.node.number, auto_reset=1,
                                       event_page_offset=self.session.event_page.handle if first and i == 0 else 0).event_id
                         for i, kind in enumerate((kfd.EVENT_MEMORY, kfd.EVENT_HW_EXCEPTION))]
    if not first: self.map_here(self.session.event_page)  # this GPU's engines write its wake slot there
    wake = self.kfd_call("CREATE_EVENT", "kfd_ioctl_create_event_args", event_type=kfd.EVENT_SIGNAL, node_id=self.node.number, auto_reset=1)
    self.wake_event = wake.event_id
    self.scratch: GPUBuffer | None = None
    self.tmpring_size, self.scratch_base, self.scratch_per_lane = 0, (0, 0), 0
    self.signal_memory = self.alloc_memory(0x10000, host=True, uncached=True)
    self.arguments = ArgumentPool(self)
    self.rings = self.new_rings()
    self.registered: dict[int, list] = {}  # first page of the caller's memory registered as USERPTR -> [its GPUBuffer, users]
    super().__init__(device, AMDAllocator(self), AMDGPURenderer(self.arch), AMDGPUCompiler(self.arch), functools.partial(AMDProgram, self),
                     *queues_for(self.gfx),
                     signal_memory=(self.signal_memory.view().view(np.uint64), self.signal_memory.va))
    self.timeline_signal.wake = (self.session.event_page.va + 8 * wake.event_slot_index, self.wake_event)
    self.timeline_signal.idle = self.sleep_until_woken
    self.peers: set[int] = set()  # gpu ids of the GPUs whose video memory this one maps (and they its)
    for other in self.session.devices: self.join(other)
    self.session.devices.append(self)

  def join(self, other: AMDDevice) -> None:
    """Each GPU waits on the other's signals (system memory, mapped on both); where one maps the other's video memory
    (MAP_MEMORY_TO_GPU with the peer's id, kfd_chardev.c kfd_ioctl_map_memory_to_gpu), copies between them run on the
    destination's SDMA engine, else through the host."""
    self.map_here(other.signal_memory)
    other.map_here(self.signal_memory)
    probe = other.alloc_memory(PAGE)
    try: self.map_here(probe)
    except OSError: return
    finally: other.free_memory(probe)
    self.peers.add(other.node.gpu_id)
    other.peers.add(self.node.gpu_id)

  def map_here(self, buf: GPUBuffer) -> None:
    """Maps another AMD GPU's buffer on this one too (once), at the address it has there."""
    base = buf.base or buf
    if self.node.gpu_id in base.mapped_on: return
    gpus = np.array([self.node.gpu_id], dtype=np.uint32)
    self.kfd_call("MAP_MEMORY_TO_GPU", "kfd_ioctl_map_memory_to_gpu_args", handle=base.handle, device_ids_array_ptr=gpus.ctypes.data, n_devices=1)
    base.mapped_on.add(self.node.gpu_id)

  def can_transfer_from(self, src_dev) -> bool: return isinstance(src_dev, AMDDevice) and src_dev.node.gpu_id in self.peers
  def transfer(self, dest: GPUBuffer, src: GPUBuffer, nbytes: int, src_dev: HCQCompiled) -> None:
    self.map_here(src)  # this GPU's SDMA engine reads the peer's video memory directly
    super().transfer(dest, src, nbytes, src_dev)

  def new_rings(self) -> dict[str, Ring]: return {"compute": kfd_ring(self, kfd.QUEUE_TYPE_COMPUTE, pm4.nop), "copy": kfd_ring(self, kfd.QUEUE_TYPE_SDMA, sdma_nop)}

  def kfd_call(self, name: str, struct: str, **fields): return kfd.call(self.system, self.kfd, name, struct, **fields)

  def map_mmio_remap(self) -> np.ndarray:
    """The GPU's MMIO remap page (the registers amdgpu lets user mode write: HDP flushes), mapped through /dev/kfd."""
    va = self.system.mmap(0, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    args = self.kfd_call("ALLOC_MEMORY_OF_GPU", "kfd_ioctl_alloc_memory_of_gpu_args", va_addr=va, size=PAGE, gpu_id=self.node.gpu_id,
                         flags=kfd.ALLOC_MMIO_REMAP | kfd.ALLOC_WRITABLE | kfd.ALLOC_NO_SUBSTITUTE)
    cpu = self.system.mmap(va, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, self.kfd, args.mmap_offset)
    return np.frombuffer(memoryview_at(cpu, PAGE), dtype=np.uint32)

  def doorbell_at(self, offset: int) -> np.ndarray:
    """The 64-bit doorbell at KFD's mmap offset `offset` (the doorbell page is mapped once)."""
    page = offset & ~(DOORBELL_PAGE - 1)
    if page not in self.doorbells:
      cpu = self.system.mmap(0, DOORBELL_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, self.kfd, page)
      self.doorbells[page] = np.frombuffer(memoryview_at(cpu, DOORBELL_PAGE), dtype=np.uint64)
    return self.doorbells[page][(offset - page) // 8:][:1]

  # ---- memory ----
  def alloc_memory(self, size: int, host: bool = False, uncached: bool = False, cpu_access: bool = False) -> GPUBuffer:
    """`size` bytes of video memory (host=False; `cpu_access`: in the part of it the CPU reaches through the BAR) or
    system memory the CPU maps too (host=True; `uncached` for what the CPU and the GPU both poll: rings, signals), at
    one virtual address for both."""
    if self.retired: self.free_retired()
    size = round_up(max(size, 1), PAGE)
    flags = kfd.ALLOC_WRITABLE | kfd.ALLOC_EXECUTABLE | kfd.ALLOC_NO_SUBSTITUTE
    flags |= (kfd.ALLOC_GTT | (kfd.ALLOC_COHERENT | kfd.ALLOC_UNCACHED if uncached else 0)) if host else kfd.ALLOC_VRAM | (kfd.ALLOC_PUBLIC if cpu_access else 0)
    va = self.system.mmap(0, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)  # the address, reserved
    try: args = self.kfd_call("ALLOC_MEMORY_OF_GPU", "kfd_ioctl_alloc_memory_of_gpu_args", va_addr=va, size=size, gpu_id=self.node.gpu_id, flags=flags)
    except OSError as e:
      self.system.munmap(va, size)
      if e.errno == 12: raise MemoryError(f"AMD: out of {'system' if host else 'video'} memory for {size} bytes") from None
      raise
    buf = GPUBuffer(va, size, handle=args.handle, host=host)
    if host or cpu_access:
      buf.cpu = self.system.mmap(va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, self.render, args.mmap_offset)
      if buf.cpu != va: raise RuntimeError(f"the CPU mapping of GPU memory at {va:#x} landed at {buf.cpu:#x}")
    self.map_memory(buf)
    return buf

  def upload(self, data: bytes) -> GPUBuffer:
    """`data` in video memory: written by the CPU through the BAR, then an HDP flush (writing HDP_MEM_FLUSH_CNTL in
    the MMIO remap page, as hdp_v5_0.c hdp_v5_0_flush_hdp does) so the GPU reads it; through the copy engine when the
    CPU-visible part of video memory is used up."""
    try: buf = self.alloc_memory(len(data), cpu_access=True)
    except MemoryError:
      buf = self.alloc_memory(len(data))
      self.allocator.copyin(buf, memoryview(data))
      return buf
    buf.view()[:len(data)] = np.frombuffer(data, np.uint8)
    self.hdp_flush_cntl[0] = 0
    return buf

  def map_memory(self, buf: GPUBuffer) -> None:
    gpus = np.array([self.node.gpu_id], dtype=np.uint32)
    mapped = self.kfd_call("MAP_MEMORY_TO_GPU", "kfd_ioctl_map_memory_to_gpu_args", handle=buf.handle, device_ids_array_ptr=gpus.ctypes.data, n_devices=1)
    if mapped.n_success != 1: raise RuntimeError(f"AMD: memory at {buf.va:#x} mapped on {mapped.n_success} of 1 GPU")

  def register_host_memory(self, address: int, size: int) -> GPUBuffer:
    """The caller's host memory [address, address+size) mapped on this GPU at the same address (USERPTR: amdgpu pins
    the pages, kfd_ioctl_alloc_memory_of_gpu takes the CPU address in mmap_offset); whole pages, shared by the
    buffers that lie in the same ones."""
    lo = address & ~(PAGE - 1)
    hi = max(round_up(address + size, PAGE), lo + PAGE)
    if (entry := self.registered.get(lo)) is not None and entry[0].va + entry[0].size >= hi:
      entry[1] += 1
      return entry[0].offset(size, address - lo)
    if clash := [b for b, _ in self.registered.values() if b.va < hi and lo < b.va + b.size]:
      raise ValueError(f"host memory [{address:#x}, {address + size:#x}) shares pages with memory already used in place on {self.device} "
                       f"at [{clash[0].va:#x}, {clash[0].va + clash[0].size:#x})")
    flags = kfd.ALLOC_USERPTR | kfd.ALLOC_WRITABLE | kfd.ALLOC_EXECUTABLE | kfd.ALLOC_NO_SUBSTITUTE
    args = self.kfd_call("ALLOC_MEMORY_OF_GPU", "kfd_ioctl_alloc_memory_of_gpu_args", va_addr=lo, size=hi - lo, gpu_id=self.node.gpu_id,
                         flags=flags, mmap_offset=lo)
    buf = GPUBuffer(lo, hi - lo, cpu=lo, handle=args.handle, host=True, user=True)
    self.map_memory(buf)
    self.registered[lo] = [buf, 1]
    return buf.offset(size, address - lo)

  def unregister_host_memory(self, view: GPUBuffer) -> None:
    entry = self.registered[view.base.va]
    entry[1] -= 1
    if entry[1]: return
    self.synchronize()  # queued kernels may still use the memory
    del self.registered[view.base.va]
    self.free_memory(entry[0])

  def retire(self, buf: GPUBuffer, release: list[int]) -> None:
    """Free `buf` once the timeline passed release[0] (memory a dropped queue's commands may still be read from)."""
    self.retired.append((buf, release))

  def free_retired(self) -> None:
    done = self.timeline_signal.value
    still = [(b, r) for b, r in self.retired if r[0] > done]
    for buf, release in self.retired:
      if release[0] <= done: self.free_memory(buf)
    self.retired = still

  def free_memory(self, buf: GPUBuffer) -> None:
    gpus = np.array([self.node.gpu_id, *buf.mapped_on], dtype=np.uint32)
    self.kfd_call("UNMAP_MEMORY_FROM_GPU", "kfd_ioctl_unmap_memory_from_gpu_args", handle=buf.handle, device_ids_array_ptr=gpus.ctypes.data, n_devices=len(gpus))
    self.kfd_call("FREE_MEMORY_OF_GPU", "kfd_ioctl_free_memory_of_gpu_args", handle=buf.handle)
    if not buf.user: self.system.munmap(buf.va, buf.size)

  def ensure_scratch(self, per_lane: int) -> None:
    """Scratch (private memory) for `per_lane` bytes on every wave slot of the GPU: COMPUTE_TMPRING_SIZE's WAVESIZE
    counts 256-byte units on gfx10+ and 1 KiB on gfx9."""
    per_lane = round_up(per_lane, 16 if self.gfx < 10 else 4)
    if per_lane <= self.scratch_per_lane: return
    unit = 1024 if self.gfx < 10 else 256
    wave_bytes = round_up(per_lane * 64, unit)  # sized for the wider wave either way
    waves = self.node.cus_per_xcc * self.node.props.get("max_waves_per_simd", 16) * self.node.props.get("simd_per_cu", 2)
    self.synchronize()
    if self.scratch is not None: self.free_memory(self.scratch)
    self.scratch = self.alloc_memory(wave_bytes * waves * self.node.xccs)
    self.scratch_per_lane = per_lane
    self.tmpring_size = min(waves, 0xFFF) | (wave_bytes // unit) << 12
    self.scratch_base = (self.scratch.va >> 8 & 0xFFFFFFFF, self.scratch.va >> 40)

  def sleep_until_woken(self) -> int:
    """Blocks until an engine signals the timeline or WAKE_POLL_MS pass (a wait also checks for faults); KFD's
    wait result (kfd.WAIT_RESULT_COMPLETE when woken)."""
    events = kfd.ffi.new("struct kfd_event_data[]", [{"event_id": self.wake_event}])
    return self.kfd_call("WAIT_EVENTS", "kfd_ioctl_wait_events_args", events_ptr=int(kfd.ffi.cast("uintptr_t", events)), num_events=1, wait_for_all=0, timeout=WAKE_POLL_MS).wait_result

  # ---- faults ----
  def check_faults(self) -> str | None:
    """A memory or hardware exception KFD reported on this GPU (asked without waiting; the events are the process's).
    A fault stops the GPU's queues for good, so new ones replace them and the device goes on; the error stays in
    `self.error` until synchronize reports it (the events reset once read)."""
    if self.error is not None: return self.error
    if (fault := self._fault()) is None: return None
    for ring in self.rings.values(): ring.destroy()
    self.rings = self.new_rings()
    self.error = fault
    return fault

  def _fault(self) -> str | None:
    events = kfd.ffi.new("struct kfd_event_data[]", [{"event_id": e} for e in self.fault_events])
    args = self.kfd_call("WAIT_EVENTS", "kfd_ioctl_wait_events_args", events_ptr=int(kfd.ffi.cast("uintptr_t", events)),
                         num_events=len(self.fault_events), wait_for_all=0, timeout=0)
    if args.wait_result != kfd.WAIT_RESULT_COMPLETE: return None
    memory, hw = events[0].memory_exception_data, events[1].hw_exception_data
    if memory.gpu_id == self.node.gpu_id: return f"{self.device}: GPU memory fault at {memory.va:#x}{' (page not present)' if memory.failure.NotPresent else ''}{' (write to a read-only page)' if memory.failure.ReadOnly else ''}"
    if hw.gpu_id == self.node.gpu_id: return f"{self.device}: GPU hardware exception (reset type {hw.reset_type}, cause {hw.reset_cause})"
    return None

def sdma_nop(dwords: int) -> list[int]: return [0] * dwords  # SDMA's NOP packet is one zero dword
