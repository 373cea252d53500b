"""The NVIDIA kernel modules as a MOCK model: the RM escapes on /dev/nvidiactl and /dev/nvidiaN (objects in a handle
tree, controls, CPU mappings) and nvidia-uvm's GPU virtual address space, over one GPU from drivers/mock/nv/gpu.py.
Every rule it enforces is taken from NVIDIA's open-gpu-kernel-modules (580 branch) and cited where it is checked: which
file an escape is valid on, which file a CPU mapping goes through (a control file for system memory, the GPU's file
for BAR memory) and how it is mmapped, GPU attach state, UVM channel windows and ranges, scheduling and token
preconditions, escape sizes (the request number encodes them), control parameter sizes (NV_ERR_INVALID_PARAM_STRUCT),
parents and classes (NV_ERR_INVALID_OBJECT_PARENT, NV_ERR_INVALID_CLASS) and handles. It is stricter than RM in one
place: allocation parameters must have their exact size too, since RM copies its own struct size unchecked
(src/nvidia/src/kernel/rmapi/param_copy.c) and a layout from the wrong driver branch would otherwise go unnoticed.

MOCKGPU_ARCH (ampere, ada, hopper, blackwell; default hopper) picks the GPUs, MOCKGPU_COUNT (default 1) how many there
are (/dev/nvidia0, /dev/nvidia1, ...), and MOCKGPU_DRIVER (default 580.159.03) the module version and so the ABI branch.
Each open of /dev/nvidia-uvm is its own GPU virtual address space, as in nvidia-uvm."""
from __future__ import annotations
import errno, itertools, re, threading
from dataclasses import dataclass, field
from typing import Any
from ir.helpers import round_up
from ir.switches import getenv
from codegen.ptx import PTXRenderer
from drivers import system
from drivers.mock import DeviceModel
from drivers.nv import rm_abi as nv
from drivers.mock.nv.gpu import ARCHS, GPU, Channel, Memory, Tsg, page_span
from drivers.mock.nv.toolchain import MockCubinCompiler

GPU_ID, UUID = 0x100, bytes(range(0xA0, 0xB0))  # of GPU 0; GPU i has GPU_ID + i and UUID with i added to its last byte
def uuid_of(i: int) -> bytes: return UUID[:15] + bytes([UUID[15] + i])
VRAM_BYTES = 8 << 30    # what NV_ERR_NO_MEMORY is measured against (pages are only backed once touched)
PAGE = 0x1000

class RmFailure(Exception):
  """An RM call that returns a status other than NV_OK."""
  def __init__(self, status: str, why: str):
    super().__init__(why)
    self.code = next(code for code, name in nv.NV_STATUS.items() if name == status)

@dataclass(eq=False)
class RmObject:
  cls: int
  parent: int
  state: Any = None        # Memory, Channel, Tsg or the VA space's hVASpace, depending on the class
  children: list[int] = field(default_factory=list)

@dataclass(eq=False)
class UvmSpace:
  """The GPU virtual address space of one /dev/nvidia-uvm file."""
  ranges: dict[int, int] = field(default_factory=dict)                       # external ranges: base -> length
  channel_ranges: dict[int, tuple[int, int]] = field(default_factory=dict)   # channel group -> where UVM put its context buffers
  gpus: set[int] = field(default_factory=set)                                # GPUs registered (UVM_REGISTER_GPU)
  gpu_vaspaces: set[int] = field(default_factory=set)                        # GPUs with a VA space registered (UVM_REGISTER_GPU_VASPACE)
  peers: set[frozenset[int]] = field(default_factory=set)                    # GPU pairs with peer access enabled
  mapped: dict[int, set[int]] = field(default_factory=dict)                  # mapped range base -> the GPUs it is mapped on
  def taken(self) -> list[tuple[int, int]]: return [*self.ranges.items(), *self.channel_ranges.values()]

@dataclass(eq=False)
class File:
  path: str
  # the mmap context RM_MAP_MEMORY gave this file (memory, offset, page-rounded length): one per open file, kept until close
  # (kernel-open/nvidia/nv-usermap.c nv_add_mapping_context_to_file)
  context: tuple[Memory, int, int] | None = None
  ctl: File | None = None          # the control file REGISTER_FD tied this one to
  uvm_ready: bool = False          # /dev/nvidia-uvm: UVM_INITIALIZE done
  space: UvmSpace = field(default_factory=UvmSpace)  # /dev/nvidia-uvm: its address space
  @property
  def is_ctl(self) -> bool: return self.path == "/dev/nvidiactl"

# escapes only the control file takes; on /dev/nvidiaN they fail with EINVAL (kernel-open/nvidia/nv.c nvidia_ioctl
# and src/nvidia/arch/nvalloc/unix/src/escape.c RmIoctl: NV_CTL_DEVICE_ONLY)
CTL_ONLY = {nv.NV_ESC_CHECK_VERSION_STR, nv.NV_ESC_CARD_INFO, nv.NV_ESC_RM_ALLOC, nv.NV_ESC_RM_CONTROL, nv.NV_ESC_RM_FREE, nv.NV_ESC_RM_MAP_MEMORY}
# the end of the VA a channel's UVM window may reach (kernel-open/nvidia-uvm/uvm_ampere.c, uvm_hopper.c max_channel_va)
MAX_CHANNEL_VA = {"ampere": 1 << 40, "ada": 1 << 40, "hopper": 1 << 57, "blackwell": 1 << 57}
# a GR channel group's context buffers: GSP reports the real sizes at run time; these are the model's stand-ins
CTX_BUFFER_BYTES, CTX_BUFFER_ALIGN = 12 << 20, 2 << 20

MEMORY_CLASSES = (nv.NV01_MEMORY_SYSTEM, nv.NV01_MEMORY_LOCAL_USER)

def free_gap(space: UvmSpace, lo: int, hi: int, size: int, align: int) -> int | None:
  """The first `align`-aligned start of `size` free bytes of `space` in [lo, hi) (uvm_user_channel.c find_va_in_range)."""
  start = round_up(lo, align)
  while start + size <= hi:
    if (hit := next(((b, n) for b, n in space.taken() if b < start + size and start < b + n), None)) is None: return start
    start = round_up(hit[0] + hit[1], align)
  return None
USERMODE_PARAMS = {nv.HOPPER_USERMODE_A: "NV_HOPPER_USERMODE_A_PARAMS", nv.BLACKWELL_USERMODE_A: "NV_HOPPER_USERMODE_A_PARAMS"}

class NVModel(DeviceModel):
  def __init__(self, arch: str | None = None, driver: str | None = None, uvm: bool = True, count: int | None = None, link: str = "pcie"):
    arch = arch or getenv("MOCKGPU_ARCH", "hopper")
    if arch not in ARCHS: raise ValueError(f"MOCKGPU_ARCH={arch!r}: the NV model knows {', '.join(ARCHS)}")
    self.version = driver or getenv("MOCKGPU_DRIVER", "580.159.03")
    self.uvm_loaded = uvm  # nvidia-uvm is a module of its own: a system may have nvidia.ko without it
    if link not in ("pcie", "nvlink", "none"): raise ValueError(f"link={link!r}: the NV model knows pcie, nvlink and none")
    self.link = link       # what joins every pair of GPUs: PCIe P2P, NVLink, or nothing peers can use
    try: self.abi = nv.abi_for(self.version)
    except ValueError: self.abi = nv.abi_for("580")  # a module tg doesn't support: only its version query will be asked
    lock = threading.RLock()
    self.gpus = [GPU(ARCHS[arch], lock) for _ in range(count or getenv("MOCKGPU_COUNT", 1))]
    self.objects: dict[int, RmObject] = {}
    self.handles = itertools.count(0xC1D00001)
    self.tokens = itertools.count(1)
    self.vram_used = [0] * len(self.gpus)
    self.gpu_opens = [0] * len(self.gpus)  # open /dev/nvidiaN files: GPU N is attached while there is one
    self.perf_boost = [0] * len(self.gpus)  # the PERF_BOOST flags last asked for each GPU (0: none, its idle clocks)
    self.spaces: list[UvmSpace] = []       # every UVM address space (one per initialized /dev/nvidia-uvm file)
    self.uvm_vaspaces: set[int] = set()  # VA spaces registered with UVM (they then have a page directory)
    self.unbound: set[int] = set()     # GR channels on an externally owned VA space not yet registered with UVM

  @property
  def gpu(self) -> GPU: return self.gpus[0]
  @property
  def faults(self) -> list[str]: return [f for g in self.gpus for f in g.faults]
  def stop(self) -> None:
    for g in self.gpus: g.stop()
  def toolchain(self, arch: str): return PTXRenderer(arch), MockCubinCompiler(arch)

  # ---- files
  def minor(self, path: str) -> int | None:
    """N of /dev/nvidiaN for a GPU the model has, else None."""
    m = re.fullmatch(r"/dev/nvidia(\d+)", path)
    return int(m.group(1)) if m and int(m.group(1)) < len(self.gpus) else None

  def open(self, path: str) -> File:
    gpu = self.minor(path)
    if (gpu is None and path not in ("/dev/nvidiactl", "/dev/nvidia-uvm")) or (path == "/dev/nvidia-uvm" and not self.uvm_loaded):
      raise OSError(errno.ENOENT, f"can't open {path}: no such device")
    if gpu is not None: self.gpu_opens[gpu] += 1  # the first open attaches the GPU (kernel-open/nvidia/nv.c nv_open_device)
    return File(path)

  def close(self, handle: File) -> None:
    if (gpu := self.minor(handle.path)) is not None: self.gpu_opens[gpu] -= 1  # the last close detaches it (nv.c nv_stop_device)
    handle.context = None

  def mmap(self, handle: File, addr: int, size: int, prot: int, flags: int, offset: int) -> int:
    # kernel-open/nvidia/nv-mmap.c nvidia_mmap_helper: the context of the file mmapped, at offset 0; a GPU file maps exactly
    # the mapped size (ENXIO), the control file at most that (ERANGE)
    if handle.context is None: raise OSError(errno.EINVAL, f"mmap of {handle.path}: no NV_ESC_RM_MAP_MEMORY named this file in params.fd")
    if offset: raise OSError(errno.EINVAL, f"mmap of {handle.path} at offset {offset:#x}: RM mappings start at 0")
    mem, at, length = handle.context
    pages = page_span(0, size)[1]
    if not handle.is_ctl and pages != length: raise OSError(errno.ENXIO, f"mmap of {size:#x} bytes of {handle.path}: the mapping is {length:#x}")
    if handle.is_ctl and pages > length: raise OSError(errno.ERANGE, f"mmap of {size:#x} bytes of {handle.path}: the mapping is {length:#x}")
    return mem.alias(at, size, addr or None)

  def munmap(self, handle: File, addr: int, size: int) -> None:
    system.munmap(*page_span(addr, size))

  def ioctl(self, handle: File, name: str, request: int, arg) -> int:
    with self.gpu.lock:
      if handle.path == "/dev/nvidia-uvm": return self.uvm_ioctl(handle, name, request, arg)
      nr, size = request & 0xFF, request >> 16 & 0x3FFF
      escapes = {nv.NV_ESC_CHECK_VERSION_STR: ("nv_ioctl_rm_api_version_t", self.check_version),
                 nv.NV_ESC_REGISTER_FD: ("nv_ioctl_register_fd_t", self.register_fd),
                 nv.NV_ESC_RM_ALLOC: ("NVOS21_PARAMETERS", self.rm_alloc), nv.NV_ESC_RM_CONTROL: ("NVOS54_PARAMETERS", self.rm_control),
                 nv.NV_ESC_RM_FREE: ("NVOS00_PARAMETERS", self.rm_free),
                 nv.NV_ESC_RM_MAP_MEMORY: ("nv_ioctl_nvos33_parameters_with_fd", self.rm_map_memory)}
      if nr in CTL_ONLY and not handle.is_ctl: raise OSError(errno.EINVAL, f"{name}: escape {nr:#x} is only valid on /dev/nvidiactl, not {handle.path}")
      if nr == nv.NV_ESC_CARD_INFO: return self.card_info(arg, size)
      if nr not in escapes: raise OSError(errno.EINVAL, f"{name}: RM escape {nr:#x} is not modelled")
      struct, run = escapes[nr]
      if request != nv.escape_request(nr, self.abi.sizeof(struct)):
        raise OSError(errno.EINVAL, f"{name}: request {request:#x} encodes {size} bytes, {self.version} takes a {self.abi.sizeof(struct)}-byte {struct}")
      run(handle, arg)
      return 0

  # ---- RM escapes
  def check_version(self, handle: File, arg) -> None:
    if arg.cmd != nv.NV_RM_API_VERSION_CMD_QUERY: raise OSError(errno.EINVAL, "the model only answers CHECK_VERSION_STR queries")
    arg.reply, arg.versionString = nv.NV_RM_API_VERSION_REPLY_RECOGNIZED, self.version.encode()

  def card_info(self, cards, size: int) -> int:
    if size != 64 * self.abi.sizeof("nv_ioctl_card_info_t"): raise OSError(errno.EINVAL, f"NV_ESC_CARD_INFO takes 64 entries, got {size} bytes")
    for i, gpu in enumerate(self.gpus):
      cards[i] = {"valid": 1, "gpu_id": GPU_ID + i, "minor_number": i,
                  "pci_info": {"domain": 0, "bus": 1 + i, "vendor_id": 0x10DE, "device_id": gpu.arch.pci_device}}
    return 0

  def register_fd(self, handle: File, arg) -> None:
    # escape.c RmIoctl NV_ESC_REGISTER_FD: ctl_fd must be another control file, itself unregistered, and only once per file
    ctl = self.file_of(arg.ctl_fd)
    if ctl is None or not ctl.is_ctl or ctl is handle or ctl.ctl is not None or handle.ctl is not None:
      raise OSError(errno.EINVAL, f"NV_ESC_REGISTER_FD on {handle.path}: ctl_fd {arg.ctl_fd} is not a fresh control file")
    handle.ctl = ctl

  def rm_map_memory(self, handle: File, arg) -> None:
    p = arg.params
    p.status = self.status_of(lambda: self.map_memory(arg.fd, p))

  def map_memory(self, fd: int, p) -> None:
    obj = self.lookup(p.hMemory, "hMemory")
    if not isinstance(obj.state, Memory): raise RmFailure("NV_ERR_INVALID_OBJECT", f"object {p.hMemory:#x} (class {obj.cls:#x}) is no memory")
    if p.offset + p.length > obj.state.size: raise RmFailure("NV_ERR_INVALID_LIMIT", f"mapping {p.length:#x} bytes at {p.offset:#x} of {obj.state.size:#x}")
    # system memory is mmapped through a control file, BAR memory (video memory, the usermode window) through the GPU's
    # file (src/nvidia/arch/nvalloc/unix/src/osapi.c RmCreateMmapContextLocked); params.fd names it, and the file
    # takes one context for its lifetime (kernel-open/nvidia/nv-usermap.c nv_add_mapping_context_to_file)
    target, owner = self.file_of(fd), f"/dev/nvidia{self.gpu_index(p.hMemory)}"
    want = "/dev/nvidiactl" if obj.cls == nv.NV01_MEMORY_SYSTEM else owner  # a GPU file must be the owning GPU's
    if target is None or target.path != want:
      raise RmFailure("NV_ERR_INVALID_ARGUMENT", f"params.fd {fd} must be a {want} file to map class {obj.cls:#x}")
    if target.context is not None: raise RmFailure("NV_ERR_STATE_IN_USE", f"params.fd {fd} already holds a mapping (each mapping needs its own open file)")
    target.context = (obj.state, p.offset, page_span(0, p.length)[1])

  def rm_free(self, handle: File, arg) -> None:
    def free() -> None:
      self.lookup(arg.hObjectOld, "hObjectOld")
      self.free(arg.hObjectOld)
    arg.status = self.status_of(free)

  def rm_alloc(self, handle: File, arg) -> None:
    arg.status = self.status_of(lambda: self.alloc(arg))

  def rm_control(self, handle: File, arg) -> None:
    arg.status = self.status_of(lambda: self.control(arg))

  @staticmethod
  def status_of(call) -> int:
    try: call()
    except RmFailure as e: return e.code
    return nv.NV_OK

  def gpu_index(self, h: int) -> int:
    """The GPU an object belongs to: its NV01_DEVICE_0 ancestor's device instance."""
    obj = self.objects[h]
    while obj.cls != nv.NV01_DEVICE_0: obj = self.objects[obj.parent]
    return obj.state
  def gpu_of(self, h: int) -> GPU: return self.gpus[self.gpu_index(h)]

  def lookup(self, h: int, what: str, classes: tuple[int, ...] | None = None) -> RmObject:
    if (obj := self.objects.get(h)) is None: raise RmFailure("NV_ERR_INVALID_OBJECT_HANDLE", f"{what} {h:#x} is no object")
    if classes is not None and obj.cls not in classes: raise RmFailure("NV_ERR_INVALID_OBJECT", f"{what} {h:#x} has class {obj.cls:#x}")
    return obj

  def params(self, arg, pointer: int, size: int, struct: str | None):
    """The caller's parameter struct, after RM's exact size check."""
    want = self.abi.sizeof(struct) if struct else 0
    if size != want: raise RmFailure("NV_ERR_INVALID_PARAM_STRUCT", f"paramsSize {size}, {struct or 'no params'} is {want} bytes")
    if struct and not pointer: raise RmFailure("NV_ERR_INVALID_POINTER", f"{struct} pointer is NULL")
    return self.abi.ffi.cast(f"{struct} *", pointer) if struct else None

  # ---- allocation
  def alloc(self, arg) -> None:
    cls, parent = arg.hClass, arg.hObjectParent
    if cls == nv.NV01_ROOT_CLIENT: return self.add(arg, RmObject(cls, 0))
    if cls not in self.gpu.arch.classes: raise RmFailure("NV_ERR_INVALID_CLASS", f"class {cls:#x} is not on this GPU")
    if arg.hRoot not in self.objects or self.objects[arg.hRoot].cls != nv.NV01_ROOT_CLIENT:
      raise RmFailure("NV_ERR_INVALID_CLIENT", f"hRoot {arg.hRoot:#x} is no client")
    parent_obj = self.lookup(parent, "hObjectParent")
    wants, struct = self.placement(cls)  # each class's parents, as src/nvidia/src/kernel/rmapi/alloc_free.c checks them
    if parent_obj.cls not in wants: raise RmFailure("NV_ERR_INVALID_OBJECT_PARENT", f"class {cls:#x} can't live under class {parent_obj.cls:#x}")
    p = self.params(arg, arg.pAllocParms, arg.paramsSize, struct)
    self.add(arg, RmObject(cls, parent, self.create(cls, parent_obj, p, None if cls == nv.NV01_DEVICE_0 else self.gpu_index(parent))))

  def placement(self, cls: int) -> tuple[tuple[int, ...], str | None]:
    """(parent classes allowed, the parameter struct) for an allocatable class."""
    arch = self.gpu.arch
    if cls == nv.NV01_DEVICE_0: return (nv.NV01_ROOT_CLIENT,), "NV0080_ALLOC_PARAMETERS"
    if cls == nv.NV20_SUBDEVICE_0: return (nv.NV01_DEVICE_0,), "NV2080_ALLOC_PARAMETERS"
    if cls in arch.usermode: return (nv.NV20_SUBDEVICE_0,), USERMODE_PARAMS.get(cls)
    if cls in MEMORY_CLASSES: return (nv.NV01_DEVICE_0,), "NV_MEMORY_ALLOCATION_PARAMS"
    if cls == nv.FERMI_VASPACE_A: return (nv.NV01_DEVICE_0,), "NV_VASPACE_ALLOCATION_PARAMETERS"
    if cls == nv.KEPLER_CHANNEL_GROUP_A: return (nv.NV01_DEVICE_0,), "NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS"
    if cls == nv.FERMI_CONTEXT_SHARE_A: return (nv.KEPLER_CHANNEL_GROUP_A,), "NV_CTXSHARE_ALLOCATION_PARAMETERS"
    if cls in arch.gpfifo: return (nv.KEPLER_CHANNEL_GROUP_A,), "NV_CHANNEL_ALLOC_PARAMS"
    if cls in (arch.compute, arch.dma): return arch.gpfifo, None
    raise RmFailure("NV_ERR_INVALID_CLASS", f"the model can't allocate class {cls:#x}")

  def create(self, cls: int, parent: RmObject, p, gpu: int | None) -> Any:
    arch = self.gpu.arch
    if cls == nv.NV01_DEVICE_0:
      if p.deviceId >= len(self.gpus): raise RmFailure("NV_ERR_INVALID_ARGUMENT", f"deviceId {p.deviceId}: the model has {len(self.gpus)} GPU(s)")
      return p.deviceId
    if cls == nv.FERMI_VASPACE_A: return p.flags
    if cls == nv.FERMI_CONTEXT_SHARE_A:
      vaspace = self.lookup(p.hVASpace, "hVASpace", (nv.FERMI_VASPACE_A,))
      # src/nvidia/src/kernel/gpu/fifo/kernel_ctxshare.c kctxshareInitCommon_IMPL: an externally owned VA space needs the
      # page directory UVM_REGISTER_GPU_VASPACE sets
      if vaspace.state & nv.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED and p.hVASpace not in self.uvm_vaspaces:
        raise RmFailure("NV_ERR_INVALID_STATE", f"VA space {p.hVASpace:#x} is externally owned and not registered with UVM yet")
      return vaspace.state
    if cls in arch.usermode: return self.gpus[gpu].usermode
    if cls in MEMORY_CLASSES: return self.memory(cls, p, gpu)
    if cls == nv.KEPLER_CHANNEL_GROUP_A: return Tsg()
    if cls in arch.gpfifo: return self.channel(cls, parent, p, gpu)
    if cls in (arch.compute, arch.dma):
      if cls in parent.state.objects: raise RmFailure("NV_ERR_INVALID_STATE", f"channel already has an object of class {cls:#x}")
      parent.state.objects.add(cls)
    return None

  def memory(self, cls: int, p, gpu: int) -> Memory:
    if p.size == 0: raise RmFailure("NV_ERR_INVALID_ARGUMENT", "a memory object of 0 bytes")  # mem_mgr/standard_mem.c stdmemValidateParams
    # gpu/mem_mgr/arch/maxwell/mem_mgr_gm107.c memmgrAllocDetermineAlignment_GM107: a forced alignment must be a multiple
    # or a divisor of the hardware's (the page size); the size is padded, not checked
    if p.flags & nv.NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE and p.alignment and p.alignment % PAGE and PAGE % p.alignment:
      raise RmFailure("NV_ERR_INVALID_ARGUMENT", f"forced alignment {p.alignment:#x} doesn't fit the {PAGE:#x}-byte page")
    if cls == nv.NV01_MEMORY_LOCAL_USER:
      if self.vram_used[gpu] + p.size > VRAM_BYTES: raise RmFailure("NV_ERR_NO_MEMORY", f"{p.size:#x} bytes of video memory, {self.vram_used[gpu]:#x} in use")
      self.vram_used[gpu] += p.size
    return Memory(p.size)

  def channel(self, cls: int, tsg: RmObject, p, gpu: int) -> Channel:
    notifier = self.lookup(p.hObjectError, "hObjectError", MEMORY_CLASSES).state
    userd = self.lookup(p.hUserdMemory[0], "hUserdMemory[0]", MEMORY_CLASSES).state
    self.lookup(p.hContextShare, "hContextShare", (nv.FERMI_CONTEXT_SHARE_A,))
    if p.userdOffset[0] + 512 > userd.size: raise RmFailure("NV_ERR_INVALID_OFFSET", f"USERD at {p.userdOffset[0]:#x} past its {userd.size:#x}-byte memory")
    # USERD is 512-byte aligned (src/nvidia/src/kernel/gpu/fifo/arch/volta/kernel_channel_gv100.c kchannelCreateUserdMemDesc_GV100)
    if p.userdOffset[0] % 512: raise RmFailure("NV_ERR_INVALID_ADDRESS", f"USERD offset {p.userdOffset[0]:#x} is not 512-byte aligned")
    if p.flags & 3: raise RmFailure("NV_ERR_NOT_SUPPORTED", "only physical channels (kernel_channel.c kchannelConstruct_IMPL)")
    ch = Channel(f"{cls:#x}#{len(self.gpus[gpu].channels)}", cls, next(self.tokens), p.gpFifoOffset, p.gpFifoEntries, userd, p.userdOffset[0],
                 notifier, tsg.state)
    self.gpus[gpu].add_channel(ch)
    if self.lookup(p.hContextShare, "hContextShare").state & nv.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED: self.unbound.add(ch)
    return ch

  def add(self, arg, obj: RmObject) -> None:
    h = arg.hObjectNew or next(self.handles)
    if h in self.objects: raise RmFailure("NV_ERR_INSERT_DUPLICATE_NAME", f"handle {h:#x} is taken")
    self.objects[h] = obj
    if obj.parent: self.objects[obj.parent].children.append(h)
    arg.hObjectNew = h

  def free(self, h: int) -> None:
    obj = self.objects[h]
    for child in list(obj.children): self.free(child)
    gpu = self.gpu_index(h) if obj.cls not in (nv.NV01_ROOT_CLIENT,) else None
    del self.objects[h]
    if obj.parent in self.objects: self.objects[obj.parent].children.remove(h)
    if isinstance(obj.state, Channel):
      self.gpus[gpu].remove_channel(obj.state)
      self.unbound.discard(obj.state)
    if obj.cls == nv.KEPLER_CHANNEL_GROUP_A:
      for space in self.spaces: space.channel_ranges.pop(h, None)
    if isinstance(obj.state, Memory):
      if obj.cls == nv.NV01_MEMORY_LOCAL_USER: self.vram_used[gpu] -= obj.state.size
      obj.state.free()

  # ---- controls
  def control(self, arg) -> None:
    obj = self.lookup(arg.hObject, "hObject")
    controls = {nv.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2: (nv.NV01_ROOT_CLIENT, "NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS", self.id_info),
                nv.NV0080_CTRL_CMD_GPU_GET_CLASSLIST: (nv.NV01_DEVICE_0, "NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS", self.class_list),
                nv.NV2080_CTRL_CMD_GPU_GET_GID_INFO: (nv.NV20_SUBDEVICE_0, "NV2080_CTRL_GPU_GET_GID_INFO_PARAMS", self.gid_info),
                nv.NV2080_CTRL_CMD_GR_GET_INFO: (nv.NV20_SUBDEVICE_0, "NV2080_CTRL_GR_GET_INFO_PARAMS", self.gr_info),
                nv.NV2080_CTRL_CMD_GR_GET_CTX_BUFFER_SIZE: (nv.NV20_SUBDEVICE_0, "NV2080_CTRL_GR_GET_CTX_BUFFER_SIZE_PARAMS", self.ctx_buffer_size),
                nv.NV2080_CTRL_CMD_PERF_BOOST: (nv.NV20_SUBDEVICE_0, "NV2080_CTRL_PERF_BOOST_PARAMS", self.boost),
                nv.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE: (nv.KEPLER_CHANNEL_GROUP_A, "NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS", self.schedule),
                nv.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN: (None, "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS", self.token)}
    if arg.cmd not in controls: raise RmFailure("NV_ERR_NOT_SUPPORTED", f"control {arg.cmd:#x} is not modelled")
    cls, struct, run = controls[arg.cmd]
    if (cls is None and not isinstance(obj.state, Channel)) or (cls is not None and obj.cls != cls):
      raise RmFailure("NV_ERR_INVALID_OBJECT_HANDLE", f"control {arg.cmd:#x} on object of class {obj.cls:#x}")
    run(obj, self.params(arg, arg.params, arg.paramsSize, struct))

  def id_info(self, obj: RmObject, p) -> None:
    # src/nvidia/src/kernel/gpu_mgr/gpu_mgr.c gpumgrGetGpuIdInfoV2: only attached GPUs are found, and a GPU is attached
    # while one of its /dev/nvidiaN files is open (without persistence mode)
    i = p.gpuId - GPU_ID
    if not 0 <= i < len(self.gpus) or not self.gpu_opens[i]: raise RmFailure("NV_ERR_INVALID_ARGUMENT", f"gpuId {p.gpuId:#x} is not attached")
    p.deviceInstance, p.subDeviceInstance = i, 0

  def class_list(self, obj: RmObject, p) -> None:
    classes = self.gpu.arch.classes
    if p.classList:
      if p.numClasses < len(classes): raise RmFailure("NV_ERR_INVALID_PARAM_STRUCT", f"room for {p.numClasses} of {len(classes)} classes")
      self.abi.ffi.cast("uint32_t *", p.classList)[0:len(classes)] = classes
    p.numClasses = len(classes)

  def gid_info(self, obj: RmObject, p) -> None:
    if p.flags != nv.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY: raise RmFailure("NV_ERR_NOT_SUPPORTED", "only the binary GID format is modelled")
    p.length, p.data[0:16] = 16, list(uuid_of(self.gpu_index(obj.parent)))

  def gr_info(self, obj: RmObject, p) -> None:
    arch = self.gpu.arch
    values = {nv.NV2080_CTRL_GR_INFO_INDEX_SM_VERSION: arch.sm_version, nv.NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM: arch.max_warps_per_sm,
              nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS: arch.gpcs, nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC: arch.tpc_per_gpc,
              nv.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC: arch.sm_per_tpc}
    entries = self.abi.ffi.cast("NV2080_CTRL_GR_INFO *", p.grInfoList)
    for i in range(p.grInfoListSize):
      if entries[i].index not in values: raise RmFailure("NV_ERR_INVALID_ARGUMENT", f"GR info index {entries[i].index:#x} is not modelled")
      entries[i].data = values[entries[i].index]

  def ctx_buffer_size(self, obj: RmObject, p) -> None:
    # kernel_graphics.c subdeviceCtrlCmdKGrGetCtxBufferSize_IMPL: the aligned sizes plus one alignment of slack, for a
    # channel (kernel_channel.c CliGetKernelChannel: any other object, its channel group too, is NV_ERR_INVALID_CHANNEL)
    if self.lookup(p.hChannel, "hChannel").cls not in self.gpu.arch.gpfifo:
      raise RmFailure("NV_ERR_INVALID_CHANNEL", f"hChannel {p.hChannel:#x} is no channel")
    p.totalBufferSize = CTX_BUFFER_BYTES + CTX_BUFFER_ALIGN

  def boost(self, obj: RmObject, p) -> None:
    # ctrl2080perf.h NV2080_CTRL_CMD_PERF_BOOST: the duration has to be at most DURATION_MAX seconds, or INFINITE,
    # else NV_ERR_INVALID_ARGUMENT (kern_perf_boost.c subdeviceCtrlCmdKPerfBoost_IMPL checks it so itself on GB10Y
    # and hands other GPUs' requests to GSP)
    if p.duration > nv.NV2080_CTRL_PERF_BOOST_DURATION_MAX and p.duration != nv.NV2080_CTRL_PERF_BOOST_DURATION_INFINITE:
      raise RmFailure("NV_ERR_INVALID_ARGUMENT", f"boost duration {p.duration} s is over {nv.NV2080_CTRL_PERF_BOOST_DURATION_MAX} and not INFINITE")
    self.perf_boost[self.gpu_index(obj.parent)] = p.flags

  def schedule(self, obj: RmObject, p) -> None:
    # kernel_channel_group_api.c kchangrpapiCtrlCmdGpFifoSchedule_IMPL: every GR channel on an externally owned VA
    # space must have its context buffers bound through UVM_REGISTER_CHANNEL (kchannelIsSchedulable_IMPL)
    if p.bEnable and (waiting := [c for c in obj.children if self.objects[c].state in self.unbound]):
      raise RmFailure("NV_ERR_INVALID_STATE", f"channel {waiting[0]:#x} is not registered with UVM")
    obj.state.scheduled = bool(p.bEnable)
    if p.bEnable: self.gpu_of(obj.parent).start()

  def token(self, obj: RmObject, p) -> None:
    # kernel_fifo_ga100.c kfifoGenerateWorkSubmitTokenHal_GA100: the channel needs a runlist, which its engine object sets
    if not obj.state.objects: raise RmFailure("NV_ERR_INVALID_STATE", "GET_WORK_SUBMIT_TOKEN before an engine object is allocated on the channel")
    p.workSubmitToken = obj.state.token

  # ---- nvidia-uvm
  def uvm_ioctl(self, handle: File, name: str, request: int, arg) -> int:
    calls = {nv.UVM_INITIALIZE: self.uvm_initialize, nv.UVM_MM_INITIALIZE: lambda h, a: None,
             nv.UVM_REGISTER_GPU: self.uvm_register_gpu, nv.UVM_REGISTER_GPU_VASPACE: self.uvm_register_vaspace,
             nv.UVM_REGISTER_CHANNEL: self.uvm_register_channel, nv.UVM_CREATE_EXTERNAL_RANGE: self.uvm_create_range,
             nv.UVM_MAP_EXTERNAL_ALLOCATION: self.uvm_map, nv.UVM_FREE: self.uvm_free, nv.UVM_ENABLE_PEER_ACCESS: self.uvm_enable_peer_access}
    if request not in calls: raise OSError(errno.ENOTTY, f"{name} ({request:#x}): not a modelled UVM ioctl")
    if request not in (nv.UVM_INITIALIZE, nv.UVM_MM_INITIALIZE) and not handle.uvm_ready:
      raise OSError(errno.EINVAL, f"{name} before UVM_INITIALIZE on this file")
    arg.rmStatus = self.status_of(lambda: calls[request](handle, arg))
    return 0

  def uvm_initialize(self, handle: File, arg) -> None:
    handle.uvm_ready = True
    self.spaces.append(handle.space)

  def check_uuid(self, uuid, space: UvmSpace | None = None) -> int:
    """The GPU with this UUID (registered in `space`, when given)."""
    i = next((i for i in range(len(self.gpus)) if bytes(uuid.uuid) == uuid_of(i)), None)
    if i is None or (space is not None and i not in space.gpus):
      raise RmFailure("NV_ERR_GPU_UUID_NOT_FOUND", f"GPU UUID {bytes(uuid.uuid).hex()} is not {'a GPU' if i is None else 'registered in this address space'}")
    return i

  def uvm_register_gpu(self, handle: File, arg) -> None:
    gpu = self.check_uuid(arg.gpu_uuid)
    # kernel-open/nvidia-uvm/uvm_va_space.c uvm_va_space_register_gpu: a GPU is registered once per address space
    if gpu in handle.space.gpus: raise RmFailure("NV_ERR_INVALID_DEVICE", f"GPU {gpu} is already registered in this address space")
    if self.link == "nvlink": handle.space.peers |= {frozenset((gpu, other)) for other in handle.space.gpus}  # register_gpu_peers
    handle.space.gpus.add(gpu)

  def uvm_register_vaspace(self, handle: File, arg) -> None:
    gpu = self.check_uuid(arg.gpuUuid, handle.space)
    self.lookup(arg.hVaSpace, "hVaSpace", (nv.FERMI_VASPACE_A,))
    self.uvm_vaspaces.add(arg.hVaSpace)
    handle.space.gpu_vaspaces.add(gpu)

  def uvm_register_channel(self, handle: File, arg) -> None:
    # kernel-open/nvidia-uvm/uvm_user_channel.c: [base, base+length) is a reserved window; UVM places the channel group's
    # context buffers in its first free aligned gap and owns that range from then on
    space = handle.space
    self.check_uuid(arg.gpuUuid, space)
    if not self.uvm_vaspaces: raise RmFailure("NV_ERR_INVALID_DEVICE", "the GPU has no VA space registered with UVM")
    obj = self.lookup(arg.hChannel, "hChannel")
    if not isinstance(obj.state, Channel): raise RmFailure("NV_ERR_INVALID_CHANNEL", f"{arg.hChannel:#x} is no channel")
    if obj.state not in self.unbound: raise RmFailure("NV_ERR_INVALID_CHANNEL", f"channel {arg.hChannel:#x} is already registered")
    base, length = arg.base, arg.length
    if base % PAGE or length % PAGE or not base or not length: raise RmFailure("NV_ERR_INVALID_ADDRESS", f"window {base:#x}+{length:#x} is not a page-aligned range")
    if base + length >= MAX_CHANNEL_VA[self.gpu.arch.name]: raise RmFailure("NV_ERR_OUT_OF_RANGE", f"window {base:#x}+{length:#x} ends past the channel VA limit")
    if obj.parent not in space.channel_ranges:  # a TSG's channels share its buffers
      start = free_gap(space, base, base + length, CTX_BUFFER_BYTES, CTX_BUFFER_ALIGN)
      if start is None: raise RmFailure("NV_ERR_INVALID_ADDRESS", f"window {base:#x}+{length:#x} has no free {CTX_BUFFER_BYTES:#x}-byte gap for the context buffers")
      space.channel_ranges[obj.parent] = (start, CTX_BUFFER_BYTES)
    self.unbound.discard(obj.state)

  def uvm_create_range(self, handle: File, arg) -> None:
    base, length, space = arg.base, arg.length, handle.space
    # uvm_map_external.c uvm_create_external_range: uvm_api_range_invalid_4k, then no overlap with any UVM range
    if base % PAGE or length % PAGE or not length or not base: raise RmFailure("NV_ERR_INVALID_ADDRESS", f"range {base:#x}+{length:#x} is not page aligned")
    if any(b < base + length and base < b + n for b, n in space.taken()):
      raise RmFailure("NV_ERR_UVM_ADDRESS_IN_USE", f"range {base:#x}+{length:#x} overlaps another")
    space.ranges[base] = length

  def uvm_map(self, handle: File, arg) -> None:
    # kernel-open/nvidia-uvm/uvm_map_external.c uvm_map_external_allocation: the whole span inside one external range,
    # 1..UVM_MAX_GPUS attributes, each GPU registered here with a VA space; each call maps on the GPUs it lists, keeping
    # the range's mappings on other GPUs
    space = handle.space
    if not any(b <= arg.base and arg.base + arg.length <= b + n for b, n in space.ranges.items()):
      raise RmFailure("NV_ERR_INVALID_ADDRESS", f"{arg.base:#x}+{arg.length:#x} is inside no external range")
    if not 0 < arg.gpuAttributesCount <= nv.UVM_MAX_GPUS: raise RmFailure("NV_ERR_INVALID_ARGUMENT", f"{arg.gpuAttributesCount} GPU attributes")
    obj = self.lookup(arg.hMemory, "hMemory", MEMORY_CLASSES)
    mem = obj.state
    if arg.offset + arg.length > mem.size: raise RmFailure("NV_ERR_INVALID_LIMIT", f"{arg.length:#x} bytes at {arg.offset:#x} of a {mem.size:#x}-byte object")
    owner = self.gpu_index(arg.hMemory) if obj.cls == nv.NV01_MEMORY_LOCAL_USER else None  # system memory has no owning GPU
    for attrs in arg.perGpuAttributes[0:arg.gpuAttributesCount]:
      gpu = self.uuid_gpu(attrs.gpuUuid)
      if gpu not in space.gpu_vaspaces: raise RmFailure("NV_ERR_INVALID_DEVICE", f"GPU {gpu} has no VA space registered in this address space")
      # uvm_map_external.c set_ext_gpu_map_location: another GPU's video memory needs peer access (its first check, that the
      # owner is registered here, fails with the same status, and peers are registered GPUs only)
      if owner is not None and owner != gpu and frozenset((owner, gpu)) not in space.peers:
        raise RmFailure("NV_ERR_INVALID_DEVICE", f"GPU {gpu} maps GPU {owner}'s video memory without peer access (UVM_ENABLE_PEER_ACCESS)")
      self.gpus[gpu].map(arg.base, arg.length, mem, arg.offset)
      space.mapped.setdefault(arg.base, set()).add(gpu)

  def uuid_gpu(self, uuid) -> int:
    i = next((i for i in range(len(self.gpus)) if bytes(uuid.uuid) == uuid_of(i)), None)
    if i is None: raise RmFailure("NV_ERR_INVALID_DEVICE", f"GPU UUID {bytes(uuid.uuid).hex()} is no GPU")
    return i

  def uvm_enable_peer_access(self, handle: File, arg) -> None:
    # kernel-open/nvidia-uvm/uvm_va_space.c uvm_api_enable_peer_access: two different GPUs registered in this address
    # space (retain_pcie_peers_from_uuids) that can be peers (uvm_gpu.c parent_peers_init) over PCIe, not NVLink
    # (uvm_gpu_retain_pcie_peer_access; NVLink peers are enabled at registration), a pair enabled once
    a, b = self.uuid_gpu(arg.gpuUuidA), self.uuid_gpu(arg.gpuUuidB)
    if a == b or a not in handle.space.gpus or b not in handle.space.gpus:
      raise RmFailure("NV_ERR_INVALID_DEVICE", f"peer access between GPU {a} and GPU {b}: two different GPUs registered in this address space")
    if self.link == "none": raise RmFailure("NV_ERR_NOT_SUPPORTED", f"GPU {a} and GPU {b} have no peer-to-peer link")
    if self.link == "nvlink": raise RmFailure("NV_ERR_INVALID_DEVICE", f"GPU {a} and GPU {b} are NVLink peers, not PCIe peers")
    if frozenset((a, b)) in handle.space.peers: raise RmFailure("NV_ERR_INVALID_DEVICE", f"peer access between GPU {a} and GPU {b} is already enabled")
    handle.space.peers.add(frozenset((a, b)))

  def uvm_free(self, handle: File, arg) -> None:
    space = handle.space
    if arg.base not in space.ranges: raise RmFailure("NV_ERR_INVALID_ADDRESS", f"no range starts at {arg.base:#x}")
    length = space.ranges.pop(arg.base)
    for gpu in space.mapped.pop(arg.base, ()): self.gpus[gpu].unmap(arg.base, length)
