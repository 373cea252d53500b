"""The userspace ABI of NVIDIA's kernel modules on x86-64: the RM escapes of nvidia.ko (on /dev/nvidiactl and
/dev/nvidiaN), the RM alloc/control parameter structs the bring-up uses, and nvidia-uvm.ko's ioctls, declared once
for cffi per driver branch (570, 580). Facts are from NVIDIA/open-gpu-kernel-modules (OGKM) at tags 570.211.01 and
580.142; tests/drivers/nv/test_rm_abi.py checks every size and offset against numbers measured from those headers."""
from __future__ import annotations
import functools, re
from dataclasses import dataclass
import cffi
from drivers.system import IOWR

# NvHandle/NvV32 are uint32_t, NvBool uint8_t, NvP64 uint64_t (user pointers travel as 64-bit integers), NV_STATUS uint32_t
_COMMON = """
typedef struct { uint32_t hRoot, hObjectParent, hObjectNew, hClass; uint64_t pAllocParms; uint32_t paramsSize, status; } NVOS21_PARAMETERS;
typedef struct { uint32_t hRoot, hObjectParent, hObjectNew, hClass; uint64_t pAllocParms, pRightsRequested;
  uint32_t paramsSize, flags, status; } NVOS64_PARAMETERS;
typedef struct { uint32_t hClient, hObject, cmd, flags; uint64_t params; uint32_t paramsSize, status; } NVOS54_PARAMETERS;
typedef struct { uint32_t hRoot, hObjectParent, hObjectOld, status; } NVOS00_PARAMETERS;
typedef struct { uint32_t hRoot, hObjectParent, hObjectNew, hClass, flags; uint64_t pMemory, limit; uint32_t status; } NVOS02_PARAMETERS;
typedef struct { NVOS02_PARAMETERS params; int32_t fd; } nv_ioctl_nvos02_parameters_with_fd;
typedef struct { uint32_t hClient, hDevice, hMemory; uint64_t offset, length, pLinearAddress; uint32_t status, flags; } NVOS33_PARAMETERS;
typedef struct { NVOS33_PARAMETERS params; int32_t fd; } nv_ioctl_nvos33_parameters_with_fd;
typedef struct { uint32_t hClient, hDevice, hMemory; uint64_t pLinearAddress; uint32_t status, flags; } NVOS34_PARAMETERS;
typedef struct { uint32_t hClient, hDevice, hDma, hMemory, flags; uint64_t dmaOffset, size; uint32_t status; } NVOS47_PARAMETERS;
typedef struct { uint32_t hClient, hParent, hObject, hClientSrc, hObjectSrc, flags, status; } NVOS55_PARAMETERS;

typedef struct { uint32_t domain; uint8_t bus, slot, function; uint16_t vendor_id, device_id; } nv_pci_info_t;
typedef struct { uint8_t valid; nv_pci_info_t pci_info; uint32_t gpu_id; uint16_t interrupt_line;
  uint64_t reg_address, reg_size, fb_address, fb_size; uint32_t minor_number; uint8_t dev_name[10]; } nv_ioctl_card_info_t;
typedef struct { int32_t ctl_fd; } nv_ioctl_register_fd_t;
typedef struct { uint32_t cmd, reply; char versionString[64]; } nv_ioctl_rm_api_version_t;
typedef struct { int32_t rc; uint32_t adapterStatus; } nv_ioctl_wait_open_complete_t;

typedef struct { uint32_t deviceId, hClientShare, hTargetClient, hTargetDevice, flags;
  uint64_t vaSpaceSize, vaStartInternal, vaLimitInternal; uint32_t vaMode; } NV0080_ALLOC_PARAMETERS;
typedef struct { uint32_t subDeviceId; } NV2080_ALLOC_PARAMETERS;
typedef struct { uint32_t owner, type, flags, width, height; int32_t pitch; uint32_t attr, attr2, format, comprCovg, zcullCovg;
  uint64_t rangeLo, rangeHi, size, alignment, offset, limit, address;
  uint32_t ctagOffset, hVASpace, internalflags, tag; int32_t numaNode; } NV_MEMORY_ALLOCATION_PARAMS;
typedef struct { uint32_t hObjectError, hObjectEccError, hVASpace, engineType; uint8_t bIsCallingContextVgpuPlugin; }
  NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS;
typedef struct { uint32_t hVASpace, flags, subctxId; } NV_CTXSHARE_ALLOCATION_PARAMETERS;
typedef struct { uint64_t base, size; uint32_t addressSpace, cacheAttrib; } NV_MEMORY_DESC_PARAMS;
typedef struct { uint32_t hObjectError, hObjectBuffer; uint64_t gpFifoOffset; uint32_t gpFifoEntries, flags, hContextShare, hVASpace;
  uint32_t hUserdMemory[8]; uint64_t userdOffset[8]; uint32_t engineType, cid, subDeviceId, hObjectEccError;
  NV_MEMORY_DESC_PARAMS instanceMem, userdMem, ramfcMem, mthdbufMem; uint32_t hPhysChannelGroup, internalFlags;
  NV_MEMORY_DESC_PARAMS errorNotifierMem, eccErrorNotifierMem; uint32_t ProcessID, SubProcessID;
  uint32_t encryptIv[3], decryptIv[3], hmacNonce[8], tpcConfigID; } NV_CHANNEL_ALLOC_PARAMS;
typedef struct { uint64_t offset, limit; uint32_t hVASpace; } NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS;
typedef struct { uint8_t bBar1Mapping, bPriv; } NV_HOPPER_USERMODE_A_PARAMS;
typedef struct { uint32_t version, flags, size, caps; } NV_GR_ALLOCATION_PARAMETERS;

typedef struct { uint32_t gpuId, gpuFlags, deviceInstance, subDeviceInstance, sliStatus, boardId, gpuInstance; int32_t numaId; }
  NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS;
typedef struct { uint32_t numClasses; uint64_t classList; } NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS;
typedef struct { uint32_t index, flags, length; uint8_t data[256]; } NV2080_CTRL_GPU_GET_GID_INFO_PARAMS;
typedef struct { uint32_t workSubmitToken; } NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS;
typedef struct { uint32_t index, data; } NV2080_CTRL_GR_INFO;
typedef struct { uint32_t flags; uint64_t route; } NV2080_CTRL_GR_ROUTE_INFO;
typedef struct { uint32_t grInfoListSize; uint64_t grInfoList; NV2080_CTRL_GR_ROUTE_INFO grRouteInfo; } NV2080_CTRL_GR_GET_INFO_PARAMS;
typedef struct { uint32_t hChannel; uint64_t totalBufferSize; } NV2080_CTRL_GR_GET_CTX_BUFFER_SIZE_PARAMS;
typedef struct { uint32_t flags, duration; } NV2080_CTRL_PERF_BOOST_PARAMS;

typedef struct { uint8_t uuid[16]; } NvProcessorUuid;
typedef struct { uint64_t flags; uint32_t rmStatus; } UVM_INITIALIZE_PARAMS;
typedef struct { int32_t uvmFd; uint32_t rmStatus; } UVM_MM_INITIALIZE_PARAMS;
typedef struct { NvProcessorUuid gpu_uuid; uint8_t numaEnabled; int32_t numaNodeId, rmCtrlFd; uint32_t hClient, hSmcPartRef, rmStatus; }
  UVM_REGISTER_GPU_PARAMS;
typedef struct { NvProcessorUuid gpu_uuid; uint32_t rmStatus; } UVM_UNREGISTER_GPU_PARAMS;
typedef struct { NvProcessorUuid gpuUuid; int32_t rmCtrlFd; uint32_t hClient, hVaSpace, rmStatus; } UVM_REGISTER_GPU_VASPACE_PARAMS;
typedef struct { NvProcessorUuid gpuUuid; uint32_t rmStatus; } UVM_UNREGISTER_GPU_VASPACE_PARAMS;
typedef struct { NvProcessorUuid gpuUuid; int32_t rmCtrlFd; uint32_t hClient, hChannel; uint64_t base, length; uint32_t rmStatus; }
  UVM_REGISTER_CHANNEL_PARAMS;
typedef struct { uint64_t base, length; uint32_t rmStatus; } UVM_CREATE_EXTERNAL_RANGE_PARAMS;
typedef struct { NvProcessorUuid gpuUuid; uint32_t gpuMappingType, gpuCachingType, gpuFormatType, gpuElementBits, gpuCompressionType; }
  UvmGpuMappingAttributes;
typedef struct { uint64_t base, length, offset; UvmGpuMappingAttributes perGpuAttributes[256]; uint64_t gpuAttributesCount;
  int32_t rmCtrlFd; uint32_t hClient, hMemory, rmStatus; } UVM_MAP_EXTERNAL_ALLOCATION_PARAMS;
typedef struct { uint64_t base, length; NvProcessorUuid gpuUuid; uint32_t rmStatus; } UVM_UNMAP_EXTERNAL_PARAMS;
typedef struct { uint64_t base, length; uint32_t rmStatus; } UVM_FREE_PARAMS;
typedef struct { NvProcessorUuid gpuUuidA, gpuUuidB; uint32_t rmStatus; } UVM_ENABLE_PEER_ACCESS_PARAMS;
"""

# what changed at 580.65.06: NVOS46 gained flags2 and kindOverride, the VA space params pasid, the class-list maximum 100 -> 200,
# GPFIFO_SCHEDULE bSkipEnable and GET_PROBED_IDS gpuFlags (controls are size-checked exactly, so these matter too)
_BRANCH = {
  "570": """
typedef struct { uint32_t hClient, hDevice, hDma, hMemory; uint64_t offset, length; uint32_t flags; uint64_t dmaOffset; uint32_t status; }
  NVOS46_PARAMETERS;
typedef struct { uint32_t index, flags; uint64_t vaSize, vaStartInternal, vaLimitInternal; uint32_t bigPageSize; uint64_t vaBase; }
  NV_VASPACE_ALLOCATION_PARAMETERS;
typedef struct { uint32_t numClasses, classList[100]; } NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS;
typedef struct { uint8_t bEnable, bSkipSubmit; } NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS;
typedef struct { uint32_t gpuIds[32], excludedGpuIds[32]; } NV0000_CTRL_GPU_GET_PROBED_IDS_PARAMS;
""",
  "580": """
typedef struct { uint32_t hClient, hDevice, hDma, hMemory; uint64_t offset, length; uint32_t flags, flags2, kindOverride; uint64_t dmaOffset;
  uint32_t status; } NVOS46_PARAMETERS;
typedef struct { uint32_t index, flags; uint64_t vaSize, vaStartInternal, vaLimitInternal; uint32_t bigPageSize; uint64_t vaBase;
  uint32_t pasid; } NV_VASPACE_ALLOCATION_PARAMETERS;
typedef struct { uint32_t numClasses, classList[200]; } NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS;
typedef struct { uint8_t bEnable, bSkipSubmit, bSkipEnable; } NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS;
typedef struct { uint32_t gpuIds[32], excludedGpuIds[32], gpuFlags[32]; } NV0000_CTRL_GPU_GET_PROBED_IDS_PARAMS;
""",
}

@dataclass(frozen=True)
class RmAbi:
  """One driver branch's structure layouts."""
  branch: str
  ffi: cffi.FFI
  def new(self, name: str, **fields):
    """A zeroed `name` (pointer cdata) with `fields` set; nested structs take dicts, arrays lists or bytes."""
    try: return self.ffi.new(f"{name} *", fields)
    except KeyError as e: raise KeyError(f"{name} has no field {e.args[0]!r}") from None
  def sizeof(self, name: str) -> int: return self.ffi.sizeof(name)
  def address(self, cdata) -> int:
    """The address of a cdata pointer, as an NvP64 field wants it."""
    return int(self.ffi.cast("uintptr_t", cdata))
  def describe(self, cdata, depth: int = 2) -> str:
    """A struct's fields as "name=value" (ints in hex, nested structs in braces, arrays by their first entries), for
    error messages that show what was sent and what came back."""
    t = self.ffi.typeof(cdata)
    if t.kind == "pointer": cdata, t = cdata[0], t.item
    if t.kind == "array": return "[" + ", ".join(self.describe(v, depth - 1) if not isinstance(v, int) else f"{v:#x}" for v in list(cdata)[:4]) + (", ...]" if len(cdata) > 4 else "]")
    if t.kind != "struct" or depth < 0: return "..."
    def value(name: str) -> str:
      v = getattr(cdata, name)
      return f"{v:#x}" if isinstance(v, int) else self.describe(v, depth - 1)
    return "{" + ", ".join(f"{name}={value(name)}" for name, _ in t.fields) + "}"
  def escape(self, nr: int, name: str) -> int:
    """The request number of RM escape `nr` taking a `name` argument."""
    return escape_request(nr, self.ffi.sizeof(name))

# 590 and later keep every layout here but UVM_FREE_PARAMS (no `length`: 16 B, rmStatus at 8), which UVM copies unchecked
@functools.cache
def _abi(branch: str) -> RmAbi:
  ffi = cffi.FFI()
  ffi.cdef(_COMMON + _BRANCH[branch])
  return RmAbi(branch, ffi)

def abi_for(version: str) -> RmAbi:
  """The layouts for a driver version string ("580.159.03"): 570.x uses the 570 branch, 580 and later the 580 one."""
  major = int(m.group(1)) if (m := re.fullmatch(r"(\d+)(\.\d+)*", version.strip())) else 0
  if major == 570 or major >= 580: return _abi("570" if major == 570 else "580")
  raise ValueError(f"unsupported NVIDIA driver version {version!r} (supported branches: 570.x and 580 or newer)")

# ---------------- RM escapes (nv-ioctl-numbers.h, nv_escape.h); _IOWR('F', nr, sizeof(argument)), size-checked by nvidia.ko

NV_ESC_CARD_INFO, NV_ESC_REGISTER_FD, NV_ESC_CHECK_VERSION_STR, NV_ESC_IOCTL_XFER_CMD = 200, 201, 210, 211
NV_ESC_ATTACH_GPUS_TO_FD, NV_ESC_WAIT_OPEN_COMPLETE = 212, 218
NV_ESC_RM_ALLOC_MEMORY, NV_ESC_RM_FREE, NV_ESC_RM_CONTROL, NV_ESC_RM_ALLOC, NV_ESC_RM_DUP_OBJECT = 0x27, 0x29, 0x2A, 0x2B, 0x34
NV_ESC_RM_VID_HEAP_CONTROL, NV_ESC_RM_MAP_MEMORY, NV_ESC_RM_UNMAP_MEMORY = 0x4A, 0x4E, 0x4F
NV_ESC_RM_MAP_MEMORY_DMA, NV_ESC_RM_UNMAP_MEMORY_DMA = 0x57, 0x58

def escape_request(nr: int, struct_size: int) -> int: return IOWR("F", nr, struct_size)

# nv-ioctl.h: CHECK_VERSION_STR commands (QUERY returns the module's version string) and replies
NV_RM_API_VERSION_CMD_STRICT, NV_RM_API_VERSION_CMD_RELAXED, NV_RM_API_VERSION_CMD_QUERY = 0, ord("1"), ord("2")
NV_RM_API_VERSION_REPLY_UNRECOGNIZED, NV_RM_API_VERSION_REPLY_RECOGNIZED = 0, 1

# ---------------- UVM ioctls (uvm_linux_ioctl.h, uvm_ioctl.h): plain numbers, the argument copied unchecked

UVM_INITIALIZE, UVM_DEINITIALIZE = 0x30000001, 0x30000002
UVM_CREATE_RANGE_GROUP, UVM_REGISTER_GPU_VASPACE, UVM_UNREGISTER_GPU_VASPACE, UVM_REGISTER_CHANNEL = 23, 25, 26, 27
UVM_ENABLE_PEER_ACCESS, UVM_MAP_EXTERNAL_ALLOCATION, UVM_FREE, UVM_REGISTER_GPU, UVM_UNREGISTER_GPU = 29, 33, 34, 37, 38
UVM_UNMAP_EXTERNAL, UVM_VALIDATE_VA_RANGE, UVM_CREATE_EXTERNAL_RANGE, UVM_MM_INITIALIZE = 66, 72, 73, 75
UVM_MAX_GPUS = 256  # NV_MAX_DEVICES (32) x UVM_PARENT_ID_MAX_SUB_PROCESSORS (8): the perGpuAttributes length
# nv_uvm_user_types.h UvmGpuMappingType
UvmGpuMappingTypeDefault, UvmGpuMappingTypeReadWriteAtomic, UvmGpuMappingTypeReadWrite, UvmGpuMappingTypeReadOnly = 0, 1, 2, 3

# ---------------- RM control commands (ctrl/ctrl*.h) and their constants

NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, NV0000_CTRL_CMD_GPU_GET_PROBED_IDS = 0x205, 0x214
NV0080_CTRL_CMD_GPU_GET_CLASSLIST, NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 = 0x800201, 0x800292
NV2080_CTRL_CMD_GPU_GET_GID_INFO, NV2080_CTRL_CMD_GR_GET_INFO = 0x2080014A, 0x20801201
NV2080_CTRL_CMD_GR_GET_CTX_BUFFER_SIZE = 0x20801218  # ctrl2080gr.h: bytes a channel's context buffers need in its UVM window (hChannel: the channel, not its TSG)
NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, NVA06C_CTRL_CMD_GPFIFO_SCHEDULE = 0xC36F0108, 0xA06C0101
NV2080_CTRL_CMD_PERF_BOOST = 0x2080200A  # ctrl2080perf.h: raise the GPU's P-state (clocks) while this client runs, as CUDA does
# NV2080_CTRL_PERF_BOOST_FLAGS: CMD 1:0 (CLEAR 0, BOOST_1LEVEL 1, BOOST_TO_MAX 2), CUDA 4:4, ASYNC 5:5, CUDA_PRIORITY 6:6 (HIGH 1)
NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_TO_MAX, NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_YES, NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_PRIORITY_HIGH = 2, 1 << 4, 1 << 6
NV2080_CTRL_PERF_BOOST_DURATION_MAX, NV2080_CTRL_PERF_BOOST_DURATION_INFINITE = 3600, 0xFFFFFFFF  # seconds; INFINITE lasts until cleared
NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY = 2  # FORMAT 1:0; the UUID as 16 raw bytes
NV0000_CTRL_GPU_INVALID_ID = 0xFFFFFFFF  # an unused slot of GET_PROBED_IDS
# ctrl0080gr.h NV0080_CTRL_GR_INFO_INDEX_* (the NV2080 names alias them)
NV2080_CTRL_GR_INFO_INDEX_SM_VERSION, NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM = 0x0C, 0x0D
NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS, NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC = 0x14, 0x17
NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC = 0x20

# ---------------- classes (class/cl*.h)

NV01_ROOT_CLIENT, NV01_DEVICE_0, NV20_SUBDEVICE_0 = 0x41, 0x80, 0x2080
NV01_MEMORY_SYSTEM, NV01_MEMORY_LOCAL_USER, NV01_MEMORY_VIRTUAL, NV01_MEMORY_SYSTEM_OS_DESCRIPTOR = 0x3E, 0x40, 0x70, 0x71
FERMI_CONTEXT_SHARE_A, FERMI_VASPACE_A, GT200_DEBUGGER, KEPLER_CHANNEL_GROUP_A = 0x9067, 0x90F1, 0x83DE, 0xA06C
VOLTA_USERMODE_A, TURING_USERMODE_A, AMPERE_USERMODE_A, HOPPER_USERMODE_A, BLACKWELL_USERMODE_A = 0xC361, 0xC461, 0xC561, 0xC661, 0xC761
AMPERE_CHANNEL_GPFIFO_A, HOPPER_CHANNEL_GPFIFO_A, BLACKWELL_CHANNEL_GPFIFO_A, BLACKWELL_CHANNEL_GPFIFO_B = 0xC56F, 0xC86F, 0xC96F, 0xCA6F
AMPERE_COMPUTE_A, AMPERE_COMPUTE_B, ADA_COMPUTE_A, HOPPER_COMPUTE_A = 0xC6C0, 0xC7C0, 0xC9C0, 0xCBC0
BLACKWELL_COMPUTE_A, BLACKWELL_COMPUTE_B = 0xCDC0, 0xCEC0
AMPERE_DMA_COPY_A, AMPERE_DMA_COPY_B, HOPPER_DMA_COPY_A, BLACKWELL_DMA_COPY_A, BLACKWELL_DMA_COPY_B = 0xC6B5, 0xC7B5, 0xC8B5, 0xC9B5, 0xCAB5

# ---------------- allocation flags and attribute fields (nvos.h, cl2080_notification.h); a field is (high bit, low bit)

def bits(field: tuple[int, int], value: int) -> int:
  """`value` placed in bit field `field` (NVIDIA's DRF_NUM)."""
  hi, lo = field
  if not 0 <= value < 1 << (hi - lo + 1): raise ValueError(f"{value:#x} does not fit in bits {hi}:{lo}")
  return value << lo

NVOS32_TYPE_IMAGE, NVOS32_TYPE_NOTIFIER = 0, 13  # NV_MEMORY_ALLOCATION_PARAMS.type
NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE, NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED, NVOS32_ALLOC_FLAGS_PERSISTENT_VIDMEM = 0x100, 0x8000, 0x10000
NVOS32_ATTR_PAGE_SIZE = (24, 23)
NVOS32_ATTR_PAGE_SIZE_DEFAULT, NVOS32_ATTR_PAGE_SIZE_4KB, NVOS32_ATTR_PAGE_SIZE_BIG, NVOS32_ATTR_PAGE_SIZE_HUGE = 0, 1, 2, 3
NVOS32_ATTR_LOCATION = (26, 25)
NVOS32_ATTR_LOCATION_VIDMEM, NVOS32_ATTR_LOCATION_PCI, NVOS32_ATTR_LOCATION_ANY = 0, 1, 3
NVOS32_ATTR_PHYSICALITY = (28, 27)
NVOS32_ATTR_PHYSICALITY_DEFAULT, NVOS32_ATTR_PHYSICALITY_NONCONTIGUOUS, NVOS32_ATTR_PHYSICALITY_CONTIGUOUS = 0, 1, 2
NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS = 3
NVOS32_ATTR_COHERENCY = (31, 29)
NVOS32_ATTR_COHERENCY_UNCACHED, NVOS32_ATTR_COHERENCY_CACHED, NVOS32_ATTR_COHERENCY_WRITE_COMBINE = 0, 1, 2
NVOS32_ATTR2_GPU_CACHEABLE = (3, 2)
NVOS32_ATTR2_GPU_CACHEABLE_DEFAULT, NVOS32_ATTR2_GPU_CACHEABLE_YES, NVOS32_ATTR2_GPU_CACHEABLE_NO = 0, 1, 2
NVOS32_ATTR2_PAGE_SIZE_HUGE = (21, 20)
NVOS32_ATTR2_PAGE_SIZE_HUGE_DEFAULT, NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB, NVOS32_ATTR2_PAGE_SIZE_HUGE_512MB = 0, 1, 2
# NVOS02 (RM_ALLOC_MEMORY) flags
NVOS02_FLAGS_PHYSICALITY, NVOS02_FLAGS_PHYSICALITY_CONTIGUOUS, NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS = (7, 4), 0, 1
NVOS02_FLAGS_LOCATION, NVOS02_FLAGS_LOCATION_PCI, NVOS02_FLAGS_LOCATION_VIDMEM = (11, 8), 0, 2
NVOS02_FLAGS_COHERENCY, NVOS02_FLAGS_COHERENCY_UNCACHED, NVOS02_FLAGS_COHERENCY_CACHED = (15, 12), 0, 1
NVOS02_FLAGS_MAPPING, NVOS02_FLAGS_MAPPING_DEFAULT, NVOS02_FLAGS_MAPPING_NO_MAP = (31, 30), 0, 1
# NVOS46 (RM_MAP_MEMORY_DMA) flags
NVOS46_FLAGS_CACHE_SNOOP, NVOS46_FLAGS_CACHE_SNOOP_DISABLE, NVOS46_FLAGS_CACHE_SNOOP_ENABLE = (4, 4), 0, 1
NVOS46_FLAGS_PAGE_SIZE, NVOS46_FLAGS_PAGE_SIZE_DEFAULT, NVOS46_FLAGS_PAGE_SIZE_4KB, NVOS46_FLAGS_PAGE_SIZE_BIG = (11, 8), 0, 1, 2
NVOS46_FLAGS_PAGE_SIZE_HUGE = 4
NVOS46_FLAGS_DMA_OFFSET_FIXED, NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE = (15, 15), 1
NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED, NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING = 1 << 3, 1 << 6
NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SYNC, NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC = 0, 1  # SUBCONTEXT 1:0
NV2080_ENGINE_TYPE_NULL, NV2080_ENGINE_TYPE_GRAPHICS, NV2080_ENGINE_TYPE_COPY0 = 0, 1, 9

# ---------------- NV_STATUS (nvstatuscodes.h at 580.142)

# the NV_ERR_* codes 0x01..0x8B are consecutive; 570.211.01 lacks 0x85 and 0x87..0x8B, 595.45.04 moves DMA_XFER_FAILED to 0x8C
_ERRORS = """BROKEN_FB BUFFER_TOO_SMALL BUSY_RETRY CALLBACK_NOT_SCHEDULED CARD_NOT_PRESENT CYCLE_DETECTED DMA_IN_USE DMA_MEM_NOT_LOCKED
  DMA_MEM_NOT_UNLOCKED DUAL_LINK_INUSE ECC_ERROR FIFO_BAD_ACCESS FREQ_NOT_SUPPORTED GPU_DMA_NOT_INITIALIZED GPU_IS_LOST
  GPU_IN_FULLCHIP_RESET GPU_NOT_FULL_POWER GPU_UUID_NOT_FOUND HOT_SWITCH I2C_ERROR I2C_SPEED_TOO_HIGH ILLEGAL_ACTION IN_USE
  INFLATE_COMPRESSED_DATA_FAILED INSERT_DUPLICATE_NAME INSUFFICIENT_RESOURCES INSUFFICIENT_PERMISSIONS INSUFFICIENT_POWER
  INVALID_ACCESS_TYPE INVALID_ADDRESS INVALID_ARGUMENT INVALID_BASE INVALID_CHANNEL INVALID_CLASS INVALID_CLIENT INVALID_COMMAND
  INVALID_DATA INVALID_DEVICE INVALID_DMA_SPECIFIER INVALID_EVENT INVALID_FLAGS INVALID_FUNCTION INVALID_HEAP INVALID_INDEX
  INVALID_IRQ_LEVEL INVALID_LIMIT INVALID_LOCK_STATE INVALID_METHOD INVALID_OBJECT INVALID_OBJECT_BUFFER INVALID_OBJECT_HANDLE
  INVALID_OBJECT_NEW INVALID_OBJECT_OLD INVALID_OBJECT_PARENT INVALID_OFFSET INVALID_OPERATION INVALID_OWNER INVALID_PARAM_STRUCT
  INVALID_PARAMETER INVALID_PATH INVALID_POINTER INVALID_REGISTRY_KEY INVALID_REQUEST INVALID_STATE INVALID_STRING_LENGTH
  INVALID_READ INVALID_WRITE INVALID_XLATE IRQ_NOT_FIRING IRQ_EDGE_TRIGGERED MEMORY_TRAINING_FAILED MISMATCHED_SLAVE
  MISMATCHED_TARGET MISSING_TABLE_ENTRY MODULE_LOAD_FAILED MORE_DATA_AVAILABLE MORE_PROCESSING_REQUIRED MULTIPLE_MEMORY_TYPES
  NO_FREE_FIFOS NO_INTR_PENDING NO_MEMORY NO_SUCH_DOMAIN NO_VALID_PATH NOT_COMPATIBLE NOT_READY NOT_SUPPORTED OBJECT_NOT_FOUND
  OBJECT_TYPE_MISMATCH OPERATING_SYSTEM OTHER_DEVICE_FOUND OUT_OF_RANGE OVERLAPPING_UVM_COMMIT PAGE_TABLE_NOT_AVAIL PID_NOT_FOUND
  PROTECTION_FAULT RC_ERROR REJECTED_VBIOS RESET_REQUIRED STATE_IN_USE SIGNAL_PENDING TIMEOUT TIMEOUT_RETRY TOO_MANY_PRIMARIES
  UVM_ADDRESS_IN_USE MAX_SESSION_LIMIT_REACHED LIB_RM_VERSION_MISMATCH PRIV_SEC_VIOLATION GPU_IN_DEBUG_MODE FEATURE_NOT_ENABLED
  RESOURCE_LOST PMU_NOT_READY FLCN_ERROR FATAL_ERROR MEMORY_ERROR INVALID_LICENSE NVLINK_INIT_ERROR NVLINK_MINION_ERROR
  NVLINK_CLOCK_ERROR NVLINK_TRAINING_ERROR NVLINK_CONFIGURATION_ERROR RISCV_ERROR FABRIC_MANAGER_NOT_PRESENT ALREADY_SIGNALLED
  QUEUE_TASK_SLOT_NOT_AVAILABLE KEY_ROTATION_IN_PROGRESS TEST_ONLY_CODE_NOT_ENABLED SECURE_BOOT_FAILED INSUFFICIENT_ZBC_ENTRY
  NVLINK_FABRIC_NOT_READY NVLINK_FABRIC_FAILURE GPU_MEMORY_ONLINING_FAILURE REDUCTION_MANAGER_NOT_AVAILABLE THRESHOLD_CROSSED
  RESOURCE_RETIREMENT_ERROR FABRIC_STATE_OUT_OF_SYNC BUFFER_FULL BUFFER_EMPTY MC_FLA_OFFSET_TABLE_FULL DMA_XFER_FAILED"""
_WARNINGS = """HOT_SWITCH INCORRECT_PERFMON_DATA MISMATCHED_SLAVE MISMATCHED_TARGET MORE_PROCESSING_REQUIRED NOTHING_TO_DO NULL_OBJECT
  OUT_OF_RANGE THRESHOLD_CROSSED"""
NV_STATUS: dict[int, str] = {0: "NV_OK", 0xFFFF: "NV_ERR_GENERIC", **{i: f"NV_ERR_{n}" for i, n in enumerate(_ERRORS.split(), 1)},
                             **{0x10000 + i: f"NV_WARN_{n}" for i, n in enumerate(_WARNINGS.split(), 1)}}
NV_OK = 0

def status_name(code: int) -> str: return NV_STATUS.get(code, f"NV_STATUS {code:#x}")
