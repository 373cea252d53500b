"""The NVIDIA kernel modules as tg's NV driver uses them: a resource-manager (RM) client on /dev/nvidiactl (objects,
controls, CPU mappings through files named in RM_MAP_MEMORY) and nvidia-uvm (the GPU virtual address space). GPU memory is
mapped through UVM alone and the version is read with the string query, so the same calls work on a host kernel and
under gVisor's nvproxy (which refuses RM_MAP_MEMORY_DMA and GET_BUILD_VERSION_V2)."""
from __future__ import annotations
import errno
from drivers.system import MAP_SHARED, PROT_READ, PROT_WRITE, System
from drivers.nv import rm_abi as nv

class RMError(RuntimeError): pass

def _check(status: int, what: str, sent: str = "") -> None:
  if status != nv.NV_OK: raise RMError(f"{what} failed: {nv.status_name(status)} ({status:#x}){' with ' + sent if sent else ''}")

def query_version(system: System, ctl: int) -> str:
  """The kernel module's version string ("580.159.03"), from the query form of CHECK_VERSION_STR."""
  abi = nv.abi_for("580")  # nv_ioctl_rm_api_version_t is the same on every branch
  arg = abi.new("nv_ioctl_rm_api_version_t", cmd=nv.NV_RM_API_VERSION_CMD_QUERY)
  system.ioctl(ctl, "NV_ESC_CHECK_VERSION_STR", abi.escape(nv.NV_ESC_CHECK_VERSION_STR, "nv_ioctl_rm_api_version_t"), arg)
  return abi.ffi.string(arg.versionString).decode()

class RMClient:
  """A root client and the calls made under it; every object handle is allocated by the RM."""
  def __init__(self, system: System, minor: int | None = None):
    self.sys = system
    self.ctl = system.open("/dev/nvidiactl")
    self.version = query_version(system, self.ctl)
    try: self.abi = nv.abi_for(self.version)
    except ValueError as e: raise RMError(str(e)) from None
    self.client = self.alloc(0, nv.NV01_ROOT_CLIENT)

  def escape(self, fd: int, nr: int, struct: str, arg, name: str, params=None) -> None:
    try: self.sys.ioctl(fd, name, self.abi.escape(nr, struct), arg, params)
    except OSError as e: raise OSError(e.errno, f"{e.strerror} with {struct} {self.abi.describe(arg)}") from None

  def alloc(self, parent: int, cls: int, params=None, params_type: str | None = None) -> int:
    """A new object of class `cls` under `parent`; its handle."""
    root = self.client if cls != nv.NV01_ROOT_CLIENT else 0
    arg = self.abi.new("NVOS21_PARAMETERS", hRoot=root, hObjectParent=parent, hClass=cls,
                       pAllocParms=self.abi.address(params) if params is not None else 0,
                       paramsSize=self.abi.sizeof(params_type) if params_type else 0)
    self.escape(self.ctl, nv.NV_ESC_RM_ALLOC, "NVOS21_PARAMETERS", arg, "NV_ESC_RM_ALLOC", params)
    _check(arg.status, f"RM_ALLOC of class {cls:#x} under {parent:#x}", self.abi.describe(params) if params is not None else "")
    return arg.hObjectNew

  def alloc_with(self, parent: int, cls: int, params_type: str, **fields) -> int:
    return self.alloc(parent, cls, self.abi.new(params_type, **fields), params_type)

  def control(self, obj: int, cmd: int, params_type: str, **fields):
    """RM control `cmd` on object `obj`; the filled-in params."""
    params = self.abi.new(params_type, **fields)
    arg = self.abi.new("NVOS54_PARAMETERS", hClient=self.client, hObject=obj, cmd=cmd, params=self.abi.address(params),
                       paramsSize=self.abi.sizeof(params_type))
    self.escape(self.ctl, nv.NV_ESC_RM_CONTROL, "NVOS54_PARAMETERS", arg, "NV_ESC_RM_CONTROL", params)
    _check(arg.status, f"RM control {cmd:#x} on {obj:#x}", f"{params_type} {self.abi.describe(params)}")
    return params

  def free(self, obj: int, parent: int) -> None:
    arg = self.abi.new("NVOS00_PARAMETERS", hRoot=self.client, hObjectParent=parent, hObjectOld=obj)
    self.escape(self.ctl, nv.NV_ESC_RM_FREE, "NVOS00_PARAMETERS", arg, "NV_ESC_RM_FREE")
    _check(arg.status, f"RM_FREE of {obj:#x}")

  def card_info(self) -> list:
    """The GPUs the module knows (valid entries of CARD_INFO), each its own copy (not a view of a freed array)."""
    cards = self.abi.ffi.new("nv_ioctl_card_info_t[64]")
    self.sys.ioctl(self.ctl, "NV_ESC_CARD_INFO", nv.escape_request(nv.NV_ESC_CARD_INFO, self.abi.ffi.sizeof(cards)), cards)
    return [self.abi.ffi.new("nv_ioctl_card_info_t *", c) for c in cards if c.valid]

  def open_gpu_file(self, minor: int) -> int:
    """A /dev/nvidiaN file registered with this client's control file; while one is open the GPU stays attached."""
    fd = self.sys.open(f"/dev/nvidia{minor}")
    arg = self.abi.new("nv_ioctl_register_fd_t", ctl_fd=self.ctl)
    self.escape(fd, nv.NV_ESC_REGISTER_FD, "nv_ioctl_register_fd_t", arg, "NV_ESC_REGISTER_FD")
    return fd

  def map_to_cpu(self, minor: int, device: int, memory: int, size: int, system_memory: bool) -> tuple[int, int]:
    """(CPU address, file) of a mapping of `memory` (the file must stay open while the mapping is used). The escape goes
    to the client's control file and names, in params.fd, a fresh file that takes the mapping: /dev/nvidiactl for
    system memory, the GPU's /dev/nvidiaN for what lies behind a BAR (the usermode window, video memory)."""
    fd = self.sys.open("/dev/nvidiactl" if system_memory else f"/dev/nvidia{minor}")
    arg = self.abi.new("nv_ioctl_nvos33_parameters_with_fd", params={"hClient": self.client, "hDevice": device, "hMemory": memory,
                                                                     "length": size}, fd=fd)
    try:
      self.escape(self.ctl, nv.NV_ESC_RM_MAP_MEMORY, "nv_ioctl_nvos33_parameters_with_fd", arg, "NV_ESC_RM_MAP_MEMORY")
      _check(arg.params.status, f"RM_MAP_MEMORY of {memory:#x}", self.abi.describe(arg))
      return self.sys.mmap(0, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), fd
    except Exception:
      self.sys.close(fd)
      raise

class UVM:
  """nvidia-uvm: the process's GPU virtual address space, into which RM memory objects are mapped."""
  def __init__(self, rm: RMClient):
    self.rm, self.sys, self.abi = rm, rm.sys, rm.abi
    self.fd = self.sys.open("/dev/nvidia-uvm")
    self.mm_fd = self.sys.open("/dev/nvidia-uvm")
    self.call(nv.UVM_INITIALIZE, "UVM_INITIALIZE_PARAMS", flags=0)
    try: self.call(nv.UVM_MM_INITIALIZE, "UVM_MM_INITIALIZE_PARAMS", fd=self.mm_fd, uvmFd=self.fd)
    except (RMError, OSError): pass  # older modules lack it; the first file then serves alone

  def call(self, request: int, params_type: str, fd: int | None = None, **fields):
    params = self.abi.new(params_type, **fields)
    self.sys.ioctl(self.fd if fd is None else fd, params_type.removesuffix("_PARAMS"), request, params)
    _check(params.rmStatus, params_type.removesuffix("_PARAMS"), self.abi.describe(params))
    return params

  def register_gpu(self, uuid: bytes, vaspace: int) -> None:
    self.call(nv.UVM_REGISTER_GPU, "UVM_REGISTER_GPU_PARAMS", gpu_uuid={"uuid": uuid}, rmCtrlFd=-1)
    self.call(nv.UVM_REGISTER_GPU_VASPACE, "UVM_REGISTER_GPU_VASPACE_PARAMS", gpuUuid={"uuid": uuid}, rmCtrlFd=self.rm.ctl,
              hClient=self.rm.client, hVaSpace=vaspace)

  def map(self, uuid: bytes, va: int, size: int, memory: int) -> None:
    """Map RM memory object `memory` at GPU address `va` on the GPU `uuid`, in a new range."""
    self.call(nv.UVM_CREATE_EXTERNAL_RANGE, "UVM_CREATE_EXTERNAL_RANGE_PARAMS", base=va, length=size)
    try: self.map_on(uuid, va, size, memory)
    except RMError:
      self.unmap(va, size)
      raise

  def map_on(self, uuid: bytes, va: int, size: int, memory: int) -> None:
    """Map `memory`, whose range starts at `va`, on one more GPU (another GPU's video memory needs peer access)."""
    self.call(nv.UVM_MAP_EXTERNAL_ALLOCATION, "UVM_MAP_EXTERNAL_ALLOCATION_PARAMS", base=va, length=size, offset=0,
              perGpuAttributes=[{"gpuUuid": {"uuid": uuid}, "gpuMappingType": nv.UvmGpuMappingTypeReadWriteAtomic}],
              gpuAttributesCount=1, rmCtrlFd=self.rm.ctl, hClient=self.rm.client, hMemory=memory)

  def enable_peer_access(self, uuid_a: bytes, uuid_b: bytes) -> None:
    self.call(nv.UVM_ENABLE_PEER_ACCESS, "UVM_ENABLE_PEER_ACCESS_PARAMS", gpuUuidA={"uuid": uuid_a}, gpuUuidB={"uuid": uuid_b})

  def unmap(self, va: int, size: int) -> None: self.call(nv.UVM_FREE, "UVM_FREE_PARAMS", base=va, length=size)

  def register_channel(self, uuid: bytes, channel: int, va: int, size: int) -> None:
    self.call(nv.UVM_REGISTER_CHANNEL, "UVM_REGISTER_CHANNEL_PARAMS", gpuUuid={"uuid": uuid}, rmCtrlFd=self.rm.ctl,
              hClient=self.rm.client, hChannel=channel, base=va, length=size)

def is_missing(e: OSError) -> bool:
  """An error that means there is no NVIDIA module (as opposed to one that failed)."""
  return e.errno in (errno.ENOENT, errno.ENODEV, errno.ENXIO, errno.EACCES, errno.EPERM)
