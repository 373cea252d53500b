"""NV: NVIDIA GPUs (Ampere, Ada, Hopper, Blackwell) driven from userspace. The RM client allocates the device, a
virtual address space, memory and one channel group with a compute and a copy channel; tg writes the push buffers
and GPFIFO entries itself and rings the usermode doorbell. Kernels are PTX assembled to cubins (ptxas or
nvJitLink); a launch is a QMD plus constant buffer 0. With DEV=MOCK+NV the same code runs against drivers/mock/nv."""
from __future__ import annotations
import functools, time
from dataclasses import dataclass, field
import numpy as np
from ir.dtype import bits_of
from ir.helpers import round_up
from ir.switches import DEV, HCQDEV_WAIT_TIMEOUT_MS
from ir.target import parse_targets, target_for
from codegen.ptx import PTXRenderer
from codegen.ptx_compiler import PTXCompiler
from codegen.renderer import ProgramSpec
from drivers.device import DeviceUnavailable
from drivers.hcq import HCQCompiled, HCQProgram, HCQSignal, HCQTimeoutError
from drivers.system import memoryview_at, system_for
from drivers.nv import pushbuf as pb, qmd as qmdlib, rm_abi as nv
from drivers.nv.cubin import Cubin
from drivers.gpu_memory import AddressSpace, ArgumentPool, GPUAllocator, GPUBuffer
from drivers.nv.queues import NVComputeQueue, NVCopyQueue, NVQueue
from drivers.nv.rm import UVM, RMClient, RMError, is_missing

# preferred classes, newest first: the first one the GPU lists is used
GPFIFO_CLASSES = (nv.BLACKWELL_CHANNEL_GPFIFO_B, nv.BLACKWELL_CHANNEL_GPFIFO_A, nv.HOPPER_CHANNEL_GPFIFO_A, nv.AMPERE_CHANNEL_GPFIFO_A)
COMPUTE_CLASSES = (nv.BLACKWELL_COMPUTE_B, nv.BLACKWELL_COMPUTE_A, nv.HOPPER_COMPUTE_A, nv.ADA_COMPUTE_A, nv.AMPERE_COMPUTE_B, nv.AMPERE_COMPUTE_A)
DMA_CLASSES = (nv.BLACKWELL_DMA_COPY_B, nv.BLACKWELL_DMA_COPY_A, nv.HOPPER_DMA_COPY_A, nv.AMPERE_DMA_COPY_B, nv.AMPERE_DMA_COPY_A)
USERMODE_CLASSES = (nv.BLACKWELL_USERMODE_A, nv.HOPPER_USERMODE_A, nv.TURING_USERMODE_A)  # gVisor allows these (not AMPERE/VOLTA)

VA_START, VA_END = 0x200000000, 1 << 40    # push buffers and QMDs must sit below 2**40
SHARED_WINDOW, LOCAL_WINDOW = 0x729400000000, 0x729300000000  # 4 GiB aligned, as Hopper requires
GPFIFO_ENTRIES, COMMAND_RING = 0x400, 4 << 20
FENCE_DWORDS = 6  # the command ring always keeps room for a drain's semaphore release
DOORBELL = 0x90  # in the usermode page: a channel's work-submit token written here makes the GPU read its GPPut
STACK_TOP = 0xFFFDC0   # where CUDA-ABI code starts its stack in the local window
ABI_LOCAL_RESERVE = 0x240  # per-thread local memory the ABI keeps above the stack
CARVEOUTS_KB = (8, 16, 32, 64, 100, 132, 164, 196, 228)  # the shared-memory sizes an SM can be configured with (CUDA guide)
MAX_BLOCKS_PER_SM, REGISTERS_PER_SM = 32, 65536  # CUDA guide, compute capabilities 8.0-10.0 (8.6 and 8.9 run fewer blocks)
NOTIFIER_STATUS = 14       # NvNotification: u64 time, u32 info32, u16 info16, u16 status

@dataclass(eq=False)
class Session:
  """What the NV devices of a process share: one RM client, and one UVM address space, since GPUs reach each other's
  memory only inside one (kernel-open/nvidia-uvm/uvm_map_external.c), with one allocator of its addresses."""
  server: object                        # what serves /dev/nvidiactl: a new kernel module (or model) starts a new session
  rm: RMClient
  uvm: UVM | None = None                # opened once a GPU is attached
  addresses: AddressSpace = field(default_factory=lambda: AddressSpace(VA_START, VA_END))
  devices: list[NVDevice] = field(default_factory=list)

_sessions: dict[int, Session] = {}  # id(System) -> its session

def session_of(system) -> Session:
  server = system.server_of("/dev/nvidiactl")
  if (session := _sessions.get(id(system))) is None or session.server is not server:
    session = _sessions[id(system)] = Session(server, RMClient(system))
  return session

def pick(wanted: tuple[int, ...], available: set[int], what: str) -> int:
  if (cls := next((c for c in wanted if c in available), None)) is None:
    raise RMError(f"unsupported GPU: no known {what} class among the {len(available)} it lists ({', '.join(f'{c:#x}' for c in sorted(available))})")
  return cls

@dataclass(frozen=True)
class LaunchABI:
  """Where an architecture's SASS reads launch facts in constant buffer 0 (nv.md section 4)."""
  ntid: int
  nctaid: int
  local_window: int
  stack_pointer: int
  shared_window: int | None

def launch_abi(sm: int) -> LaunchABI:
  if sm >= 100: return LaunchABI(0x360, 0x370, 0x2F8, 0x37C, None)
  if sm >= 90: return LaunchABI(0x0, 0xC, 0x20, 0x28, None)
  return LaunchABI(0x0, 0xC, 0x20, 0x28, 0x18)

class Channel:
  """A GPFIFO channel: its ring and USERD (in one host-visible allocation), a command ring the push buffers are
  copied into, and the token that rings its doorbell."""
  def __init__(self, dev: NVDevice, gpfifo_class: int, engine_class: int, tsg: int):
    self.dev = dev
    self.notifier = dev.alloc_memory(0x1000, host=True)  # where the RM reports a channel error
    self.ring = dev.alloc_memory(GPFIFO_ENTRIES * 8 + 0x1000, host=True)
    self.userd = np.frombuffer(memoryview_at(self.ring.cpu + GPFIFO_ENTRIES * 8, pb.USERD_SIZE), dtype=np.uint32)
    self.entries = np.frombuffer(memoryview_at(self.ring.cpu, GPFIFO_ENTRIES * 8), dtype=np.uint64)
    self.handle = dev.rm.alloc_with(tsg, gpfifo_class, "NV_CHANNEL_ALLOC_PARAMS", gpFifoOffset=self.ring.va, gpFifoEntries=GPFIFO_ENTRIES,
                                    hContextShare=dev.ctxshare, hObjectError=self.notifier.handle, hObjectBuffer=self.ring.handle,
                                    hUserdMemory=[self.ring.handle], userdOffset=[GPFIFO_ENTRIES * 8])
    self.engine = dev.rm.alloc(self.handle, engine_class)
    self.token = dev.rm.control(self.handle, nv.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
                                "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS").workSubmitToken
    dev.uvm.register_channel(dev.uuid, self.handle, *dev.context_window(self.handle))
    self.commands = dev.alloc_memory(COMMAND_RING, host=True)
    self.words = np.frombuffer(memoryview_at(self.commands.cpu, COMMAND_RING), dtype=np.uint32)
    self.put, self.cmd_at = 0, 0
    self.fence: HCQSignal | None = None
    self.fence_value = 0

  def submit(self, words: list[int]) -> None:
    n = len(words)
    if n * 4 > COMMAND_RING: raise ValueError(f"a push buffer of {n} dwords is larger than the {COMMAND_RING}-byte command ring")
    if self.cmd_at + n + FENCE_DWORDS > len(self.words):  # reuse the ring from the start once the GPU is done with all of it
      self.drain()
      self.cmd_at = 0
    self.words[self.cmd_at:self.cmd_at + n] = np.array(words, dtype=np.uint32)
    self.push(self.commands.va + 4 * self.cmd_at, n)
    self.cmd_at += n

  @property
  def gp_get(self) -> int: return int(self.userd[pb.USERD_GP_GET // 4])

  def push(self, va: int, dwords: int) -> None:
    """Append a GPFIFO entry for the push buffer at `va` and ring the doorbell."""
    deadline = time.perf_counter() + HCQDEV_WAIT_TIMEOUT_MS.value / 1000
    while (self.put + 1) % GPFIFO_ENTRIES == self.gp_get:  # the ring is full
      if (err := self.error()) is not None or time.perf_counter() > deadline:
        raise HCQTimeoutError(err or f"{self.dev.device}: GPFIFO of channel {self.handle:#x} stays full")
      time.sleep(50e-6)
    self.entries[self.put] = pb.gpfifo_entry(va, dwords)
    self.put = (self.put + 1) % GPFIFO_ENTRIES
    self.userd[pb.USERD_GP_PUT // 4] = self.put
    self.dev.doorbell[DOORBELL // 4] = self.token

  def drain(self) -> None:
    """Wait until the channel has executed everything submitted: a semaphore released behind it."""
    if self.fence is None: self.fence = self.dev.new_signal(f"channel {self.handle:#x} fence")
    self.fence_value += 1
    words = NVQueue().signal(self.fence, self.fence_value).resolved()
    self.words[self.cmd_at:self.cmd_at + len(words)] = words
    self.push(self.commands.va + 4 * self.cmd_at, len(words))
    self.fence.wait(self.fence_value, failed=lambda: self.error() is not None)
    if (err := self.error()) is not None: raise RuntimeError(f"{self.dev.device}: {err}")

  def error(self) -> str | None:
    status = int(self.notifier.view()[NOTIFIER_STATUS:NOTIFIER_STATUS + 2].view(np.uint16)[0])
    if not status: return None
    info32 = int(self.notifier.view()[8:12].view(np.uint32)[0])
    return f"channel {self.handle:#x} stopped: error notifier status {status:#x}, info {info32}"

class NVProgram(HCQProgram):
  """A kernel loaded from a cubin: its image in video memory, the launch facts from .nv.info, and the template of
  its constant buffer 0 and QMD."""
  def __init__(self, dev: NVDevice, name: str, lib: bytes, spec: ProgramSpec):
    super().__init__(dev, name)
    cubin = Cubin(lib)
    self.info = info = cubin.kernel(name)
    self.image = dev.alloc_memory(round_up(len(cubin.image), 256) + 0x1000)  # slack for instruction prefetch
    linked = cubin.link(self.image.va)
    dev.allocator.copyin(self.image, memoryview(linked + bytes(self.image.size - len(linked))))
    self.param_offset = info.param_offset
    self.var_dtypes = [v.dtype for v in spec.vars]
    sizes = [8] * len(spec.globals) + [v.dtype.itemsize for v in spec.vars]
    offsets = [info.param_offset + sum(sizes[:i]) for i in range(len(sizes))]
    self.param_layout = list(zip(offsets, sizes))
    if sum(sizes) != info.param_size: raise RuntimeError(f"{name}: the cubin declares {info.param_size} parameter bytes, tg passes {sum(sizes)}")
    self.shared = round_up(info.shared_size + (0x400 if cubin.sm < 90 else 0), 128)  # sm_8x cubins leave out the 1 KiB the system reserves
    self.local_per_thread = round_up(info.stack_size + ABI_LOCAL_RESERVE, 16) if info.stack_size else 0
    if self.local_per_thread: dev.ensure_local_memory(self.local_per_thread)
    self.banks = {n: (self.image.va + off, size) for n, (off, size) in info.const_banks.items()}
    self._launches: dict[tuple, tuple[bytes, bytes]] = {}

  def launch_memory(self, global_size: tuple, local_size: tuple) -> tuple[bytes, bytes]:
    """(constant buffer 0 without the parameters, the QMD without its constant buffer 0 address)."""
    if (hit := self._launches.get((global_size, local_size))) is None:
      hit = self._launches[(global_size, local_size)] = self._build_launch(global_size, local_size)
    return hit

  def _build_launch(self, global_size: tuple, local_size: tuple) -> tuple[bytes, bytes]:
    dev, info = self.dev, self.info
    threads = local_size[0] * local_size[1] * local_size[2]
    if threads > 1024 or threads * max(info.registers, 1) > 65536:
      raise RuntimeError(f"{self.name}: {threads} threads per block with {info.registers} registers each don't fit one SM")
    cb0 = bytearray(round_up(info.cbank0_size, 16))
    abi = launch_abi(dev.sm)
    words = np.frombuffer(cb0, dtype=np.uint32)
    words[abi.ntid // 4:abi.ntid // 4 + 3] = local_size
    words[abi.nctaid // 4:abi.nctaid // 4 + 3] = global_size
    if abi.shared_window is not None: words[abi.shared_window // 4:abi.shared_window // 4 + 2] = (SHARED_WINDOW & 0xFFFFFFFF, SHARED_WINDOW >> 32)
    words[abi.local_window // 4:abi.local_window // 4 + 2] = (LOCAL_WINDOW & 0xFFFFFFFF, LOCAL_WINDOW >> 32)
    words[abi.stack_pointer // 4] = STACK_TOP
    layout = dev.qmd_layout
    fields = dict(qmd_major_version=layout.major, qmd_minor_version=layout.minor, api_visible_call_limit=qmdlib.API_VISIBLE_CALL_LIMIT_NO_CHECK,
                  sampler_index=1, grid_width=global_size[0], grid_height=global_size[1], grid_depth=global_size[2],
                  block_dim_x=local_size[0], block_dim_y=local_size[1], block_dim_z=local_size[2], register_count=info.registers,
                  barrier_count=1, shared_memory_size=self.shared, sass_version=dev.sm // 10 << 4 | dev.sm % 10,
                  cwd_membar_type=qmdlib.CWD_MEMBAR_L1_SYSMEMBAR, shader_local_memory_high_size=self.local_per_thread,
                  program_address=self.image.va + info.entry, program_prefetch_address=(self.image.va + info.entry) & ~0xFF,
                  program_prefetch_size=min(info.code_size >> 8, 0x1FF), cb0_size=len(cb0), cb0_valid=1, cb0_invalidate=1,
                  **{name: 1 for name in layout.fields if name.startswith("invalidate_")}, **dev.shared_memory_config(self.shared, threads, info.registers))
    optional = {"qmd_type": qmdlib.QMD_TYPE_GRID_CTA, "group_id": 0x3F, "sm_global_caching_enable": 1}  # not on every QMD version
    fields.update({k: v for k, v in optional.items() if k in layout.fields})
    for n, (va, size) in self.banks.items(): fields.update({f"cb{n}_address": va, f"cb{n}_size": round_up(size, 16), f"cb{n}_valid": 1})
    return bytes(cb0), bytes(qmdlib.encode(layout, **fields))

  def finish_qmd(self, qmd_bytes: bytes, cb0_va: int) -> bytes:
    out = bytearray(qmd_bytes)
    qmdlib.set_fields(self.dev.qmd_layout, out, cb0_address=cb0_va)
    return bytes(out)

  def execute(self, args, global_size, local_size) -> None: raise RuntimeError("NV kernels run through the compute queue")
  def kernel_args(self, bufs: tuple, vals: tuple) -> list: return [*bufs, *(bits_of(v, dt) for v, dt in zip(vals, self.var_dtypes))]

class NVDevice(HCQCompiled):
  timestamp_ticks_per_us = 1000  # the GPU's semaphore timestamps are nanoseconds
  def __init__(self, device: str):
    target = target_for(parse_targets(DEV.value), "NV")
    if target.renderer not in ("", "PTX"): raise ValueError(f"NV has no renderer {target.renderer!r} (known: PTX)")
    self.system = system_for(target.interface)
    index = int(device.split(":")[1]) if ":" in device else 0
    try: self.session = session_of(self.system)
    except OSError as e:
      if is_missing(e): raise DeviceUnavailable(f"NV unavailable: no NVIDIA kernel module ({e.strerror})") from None
      raise
    self.rm = self.session.rm
    cards = self.rm.card_info()
    if index >= len(cards): raise DeviceUnavailable(f"NV unavailable: {device} asked for, the module reports {len(cards)} GPU(s)")
    self.minor = cards[index].minor_number
    self.gpu_file = self.rm.open_gpu_file(self.minor)  # kept open: the first open attaches the GPU, and RM knows only attached ones
    info = self.rm.control(self.rm.client, nv.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, "NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS", gpuId=cards[index].gpu_id)
    try: self.uvm = self.session.uvm = self.session.uvm or UVM(self.rm)
    except OSError as e:
      if is_missing(e): raise DeviceUnavailable(f"NV unavailable: can't open /dev/nvidia-uvm ({e.strerror}); load the nvidia-uvm module (modprobe nvidia-uvm)") from None
      raise
    rm = self.rm
    self.device_handle = rm.alloc_with(rm.client, nv.NV01_DEVICE_0, "NV0080_ALLOC_PARAMETERS", deviceId=info.deviceInstance, hClientShare=rm.client)
    self.subdevice = rm.alloc_with(self.device_handle, nv.NV20_SUBDEVICE_0, "NV2080_ALLOC_PARAMETERS", subDeviceId=0)
    # without a boost the GPU stays at its idle clocks (an H200's SMs at 345 MHz ran tg's kernels 5-7x slower than CUDA did)
    rm.control(self.subdevice, nv.NV2080_CTRL_CMD_PERF_BOOST, "NV2080_CTRL_PERF_BOOST_PARAMS", duration=nv.NV2080_CTRL_PERF_BOOST_DURATION_INFINITE,
               flags=nv.NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_TO_MAX | nv.NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_YES | nv.NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_PRIORITY_HIGH)
    classes = self.class_list()
    usermode_class = pick(USERMODE_CLASSES, classes, "usermode")
    if usermode_class == nv.TURING_USERMODE_A: self.usermode = rm.alloc(self.subdevice, usermode_class)
    else: self.usermode = rm.alloc_with(self.subdevice, usermode_class, "NV_HOPPER_USERMODE_A_PARAMS", bBar1Mapping=1, bPriv=0)
    doorbell_cpu, self._doorbell_fd = rm.map_to_cpu(self.minor, self.subdevice, self.usermode, 0x10000, system_memory=False)
    self.doorbell = np.frombuffer(memoryview_at(doorbell_cpu, 0x10000), dtype=np.uint32)
    self.vaspace = rm.alloc_with(self.device_handle, nv.FERMI_VASPACE_A, "NV_VASPACE_ALLOCATION_PARAMETERS", vaBase=0x1000, vaSize=0x1FFFFFB000000,
                                 flags=nv.NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING | nv.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED)
    gid = rm.control(self.subdevice, nv.NV2080_CTRL_CMD_GPU_GET_GID_INFO, "NV2080_CTRL_GPU_GET_GID_INFO_PARAMS",
                     flags=nv.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY, length=16)
    self.uuid = bytes(gid.data[0:16])
    self.uvm.register_gpu(self.uuid, self.vaspace)
    self.addresses = self.session.addresses
    self.gr = self.gr_info()
    self.sm = (self.gr["sm_version"] >> 8) * 10 + (self.gr["sm_version"] & 0xF)
    self.arch = f"sm_{self.sm}" + ("a" if self.sm == 90 else "")  # Hopper's wgmma exists only in sm_90a code

    self.compute_class, self.dma_class = pick(COMPUTE_CLASSES, classes, "compute"), pick(DMA_CLASSES, classes, "copy")
    self.qmd_layout = qmdlib.QMD_LAYOUTS[qmdlib.qmd_version_for_class(self.compute_class)]
    self.tsg = rm.alloc_with(self.device_handle, nv.KEPLER_CHANNEL_GROUP_A, "NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS", engineType=nv.NV2080_ENGINE_TYPE_GRAPHICS)
    self.ctxshare = rm.alloc_with(self.tsg, nv.FERMI_CONTEXT_SHARE_A, "NV_CTXSHARE_ALLOCATION_PARAMETERS", hVASpace=self.vaspace,
                                  flags=nv.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC)
    gpfifo = pick(GPFIFO_CLASSES, classes, "GPFIFO channel")
    self.channel_window: tuple[int, int] | None = None  # the VA UVM places the channel group's context buffers in
    self.channels = {"compute": Channel(self, gpfifo, self.compute_class, self.tsg), "copy": Channel(self, gpfifo, self.dma_class, self.tsg)}
    rm.control(self.tsg, nv.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, "NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS", bEnable=1)

    self.signal_memory = self.alloc_memory(0x10000, host=True)
    self.arguments = ArgumentPool(self)
    self.local_memory: GPUBuffer | None = None
    toolchain = self.system.toolchain("/dev/nvidia", self.arch)
    renderer, compiler = toolchain if toolchain is not None else (PTXRenderer(self.arch), PTXCompiler(self.arch))
    super().__init__(device, GPUAllocator(self), renderer, compiler, functools.partial(NVProgram, self), NVComputeQueue, NVCopyQueue,
                     signal_memory=(self.signal_memory.view().view(np.uint64), self.signal_memory.va))
    self.submit("compute", pb.method(pb.SUBC_COMPUTE, pb.Host.SET_OBJECT, self.compute_class) +
                pb.method(pb.SUBC_COMPUTE, pb.Compute.SET_SHADER_SHARED_MEMORY_WINDOW_A, SHARED_WINDOW >> 32, SHARED_WINDOW & 0xFFFFFFFF) +
                pb.method(pb.SUBC_COMPUTE, pb.Compute.SET_SHADER_LOCAL_MEMORY_WINDOW_A, LOCAL_WINDOW >> 32, LOCAL_WINDOW & 0xFFFFFFFF))
    self.submit("copy", pb.method(pb.SUBC_COPY, pb.Host.SET_OBJECT, self.dma_class))
    self.peers: set[bytes] = set()  # GPUs whose video memory this one reaches (and they its)
    for other in self.session.devices: self.join(other)
    self.session.devices.append(self)

  def join(self, other: NVDevice) -> None:
    """Each GPU waits on the other's signals (system memory, mapped on both), and copies from its video memory where
    the two are peers: PCIe peers once UVM_ENABLE_PEER_ACCESS succeeds, NVLink peers from registration (where that
    call fails). Without a link, copies between them bounce through the host."""
    self.uvm.map_on(other.uuid, self.signal_memory.va, self.signal_memory.size, self.signal_memory.handle)
    self.uvm.map_on(self.uuid, other.signal_memory.va, other.signal_memory.size, other.signal_memory.handle)
    try: self.uvm.enable_peer_access(self.uuid, other.uuid)
    except RMError: pass  # NVLink peers, or no link: mapping the other's memory tells which
    if self.reaches(other):
      self.peers.add(other.uuid)
      other.peers.add(self.uuid)

  def reaches(self, other: NVDevice) -> bool:
    """Whether this GPU can map the other's video memory (tried on a page of it)."""
    probe = other.alloc_memory(0x1000)
    try: self.uvm.map_on(self.uuid, probe.va, probe.size, probe.handle)
    except RMError: return False
    finally: other.free_memory(probe)
    return True

  # ---- bring-up helpers ----
  def class_list(self) -> set[int]:
    count = self.rm.control(self.device_handle, nv.NV0080_CTRL_CMD_GPU_GET_CLASSLIST, "NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS").numClasses
    ids = self.rm.abi.ffi.new(f"uint32_t[{count}]")
    self.rm.control(self.device_handle, nv.NV0080_CTRL_CMD_GPU_GET_CLASSLIST, "NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS", numClasses=count,
                    classList=self.rm.abi.address(ids))
    return set(ids)

  def gr_info(self) -> dict[str, int]:
    wanted = {"sm_version": nv.NV2080_CTRL_GR_INFO_INDEX_SM_VERSION, "max_warps_per_sm": nv.NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM,
              "gpcs": nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS, "tpc_per_gpc": nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC,
              "sm_per_tpc": nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC}
    entries = self.rm.abi.ffi.new(f"NV2080_CTRL_GR_INFO[{len(wanted)}]", [{"index": i} for i in wanted.values()])
    self.rm.control(self.subdevice, nv.NV2080_CTRL_CMD_GR_GET_INFO, "NV2080_CTRL_GR_GET_INFO_PARAMS", grInfoListSize=len(wanted),
                    grInfoList=self.rm.abi.address(entries))
    return {name: e.data for name, e in zip(wanted, entries)}

  def context_window(self, channel: int) -> tuple[int, int]:
    """A VA window for UVM to place the channel group's GR context buffers in (both channels share it, so the first
    channel's size serves): taken from the address space for good, since UVM never says which part it used and ranges
    over that part would fail."""
    if self.channel_window is None:
      need = self.rm.control(self.subdevice, nv.NV2080_CTRL_CMD_GR_GET_CTX_BUFFER_SIZE, "NV2080_CTRL_GR_GET_CTX_BUFFER_SIZE_PARAMS", hChannel=channel).totalBufferSize
      size = round_up(2 * need, 2 << 20)  # twice the total: UVM aligns each buffer on its own
      self.channel_window = (self.addresses.alloc(size, 2 << 20), size)
    return self.channel_window

  # ---- memory ----
  def alloc_memory(self, size: int, host: bool = False) -> GPUBuffer:
    """`size` bytes of video memory (host=False) or pinned system memory (host=True, mapped for the CPU too)."""
    huge = not host and size >= 2 << 20
    size = round_up(max(size, 1), (2 << 20) if huge else 0x1000)
    if host:
      attr = nv.bits(nv.NVOS32_ATTR_LOCATION, nv.NVOS32_ATTR_LOCATION_PCI) | nv.bits(nv.NVOS32_ATTR_PHYSICALITY, nv.NVOS32_ATTR_PHYSICALITY_NONCONTIGUOUS) \
           | nv.bits(nv.NVOS32_ATTR_COHERENCY, nv.NVOS32_ATTR_COHERENCY_CACHED)
      attr2 = nv.bits(nv.NVOS32_ATTR2_GPU_CACHEABLE, nv.NVOS32_ATTR2_GPU_CACHEABLE_NO)
      cls, kind, flags = nv.NV01_MEMORY_SYSTEM, nv.NVOS32_TYPE_NOTIFIER, nv.NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE
    else:
      attr = nv.bits(nv.NVOS32_ATTR_LOCATION, nv.NVOS32_ATTR_LOCATION_VIDMEM) \
           | nv.bits(nv.NVOS32_ATTR_PHYSICALITY, nv.NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS) \
           | nv.bits(nv.NVOS32_ATTR_PAGE_SIZE, nv.NVOS32_ATTR_PAGE_SIZE_HUGE if huge else nv.NVOS32_ATTR_PAGE_SIZE_4KB)
      attr2 = nv.bits(nv.NVOS32_ATTR2_GPU_CACHEABLE, nv.NVOS32_ATTR2_GPU_CACHEABLE_YES) | \
              nv.bits(nv.NVOS32_ATTR2_PAGE_SIZE_HUGE, nv.NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB if huge else nv.NVOS32_ATTR2_PAGE_SIZE_HUGE_DEFAULT)
      cls, kind, flags = nv.NV01_MEMORY_LOCAL_USER, nv.NVOS32_TYPE_IMAGE, nv.NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE | nv.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED
    align = (2 << 20) if huge else 0x1000
    try:
      handle = self.rm.alloc_with(self.device_handle, cls, "NV_MEMORY_ALLOCATION_PARAMS", owner=self.rm.client, type=kind, flags=flags,
                                  attr=attr, attr2=attr2, format=6, size=size, alignment=align, limit=size - 1)
    except RMError as e:
      if "NV_ERR_NO_MEMORY" in str(e): raise MemoryError(f"NV: out of {'system' if host else 'video'} memory for {size} bytes") from None
      raise
    va = self.addresses.alloc(size, align)
    self.uvm.map(self.uuid, va, size, handle)
    buf = GPUBuffer(va, size, handle=handle, host=host)
    if host: buf.cpu, buf.fd = self.rm.map_to_cpu(self.minor, self.device_handle, handle, size, system_memory=True)
    return buf

  def map_peer(self, buf: GPUBuffer) -> None:
    """Maps another GPU's buffer on this one, once, at the address it has there (one address space)."""
    base = buf.base or buf
    if self.uuid not in base.mapped_on:
      self.uvm.map_on(self.uuid, base.va, base.size, base.handle)
      base.mapped_on.add(self.uuid)

  def free_memory(self, buf: GPUBuffer) -> None:
    self.uvm.unmap(buf.va, buf.size)
    self.addresses.free(buf.va, buf.size)
    if buf.cpu is not None:
      self.system.munmap(buf.cpu, buf.size)
      self.system.close(buf.fd)
    self.rm.free(buf.handle, self.device_handle)

  def ensure_local_memory(self, per_thread: int) -> None:
    """Local memory (stack, spills) for `per_thread` bytes on every thread the GPU can hold at once."""
    if self.local_memory is not None and self.local_per_thread >= per_thread: return
    per_tpc = round_up(per_thread * 32 * max(self.gr["max_warps_per_sm"], 1) * max(self.gr["sm_per_tpc"], 1), 0x20000)
    tpcs = max(self.gr["gpcs"] * self.gr["tpc_per_gpc"], 1)
    self.synchronize()
    if self.local_memory is not None: self.free_memory(self.local_memory)
    self.local_memory, self.local_per_thread = self.alloc_memory(per_tpc * tpcs), per_thread
    va = self.local_memory.va
    self.submit("compute", pb.method(pb.SUBC_COMPUTE, pb.Compute.SET_SHADER_LOCAL_MEMORY_A, va >> 32, va & 0xFFFFFFFF) +
                pb.method(pb.SUBC_COMPUTE, pb.Compute.SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A, per_tpc >> 32, per_tpc & 0xFFFFFFFF, 0xFF))

  def shared_memory_config(self, shared: int, threads: int = 1, registers: int = 0) -> dict[str, int]:
    """The SM's shared-memory carve-out fields (value = KiB / 4 + 1) for blocks of `threads` threads using `shared`
    bytes and `registers` registers each: the smallest carve-out that holds as many blocks as the SM's warps and
    registers allow at once, the rest staying L1 (room for one block held an H200's tensor-core matmul to one block
    per SM: 5.5 ms instead of 2.25)."""
    max_kb = 228 if self.sm >= 90 else 164 if self.sm == 80 else 100
    warps = -(-threads // 32)
    blocks = min(MAX_BLOCKS_PER_SM, max(self.gr["max_warps_per_sm"], 1) // warps, REGISTERS_PER_SM // max(round_up(registers, 8) * 32 * warps, 1))
    need = min(max(blocks, 1) * shared, max_kb << 10)
    kb = next(k for k in CARVEOUTS_KB if k << 10 >= need or k == max_kb)
    return {"min_sm_config_shared_mem_size": 8 // 4 + 1, "target_sm_config_shared_mem_size": kb // 4 + 1, "max_sm_config_shared_mem_size": max_kb // 4 + 1}

  def can_transfer_from(self, src_dev) -> bool: return isinstance(src_dev, NVDevice) and src_dev.uuid in self.peers
  def transfer(self, dest: GPUBuffer, src: GPUBuffer, nbytes: int, src_dev: HCQCompiled) -> None:
    self.map_peer(src)  # this GPU's copy engine reads the peer's video memory directly
    super().transfer(dest, src, nbytes, src_dev)

  # ---- submission ----
  def submit(self, channel: str, words: list[int]) -> None: self.channels[channel].submit(words)

  def busy_queues(self) -> str | None:
    busy = [f"{name} channel {ch.handle:#x} at GPFIFO entry {ch.gp_get} of {ch.put}" for name, ch in self.channels.items() if ch.gp_get != ch.put]
    return "stuck: " + ", ".join(busy) if busy else None

  def check_faults(self) -> str | None:
    errors = [f"{name} {err}" for name, ch in self.channels.items() if (err := ch.error()) is not None]
    return f"{self.device}: " + "; ".join(errors) if errors else None
