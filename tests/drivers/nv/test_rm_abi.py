"""drivers/nv/rm_abi.py against NVIDIA's headers: every declared struct's size and field offsets as measured from
open-gpu-kernel-modules, the sizes and offsets docs/nv.md §1 states, request numbers, constants, and the branch choice."""
import pytest
from drivers.nv import rm_abi
from drivers.nv.rm_abi import abi_for

# Measured, not derived: a throw-away C program including OGKM's nvos.h, nv-ioctl.h, nv-unix-nvos-params-wrappers.h,
# class/cl0080.h, cl2080.h, cl0070.h, alloc/alloc_channel.h, ctrl/ctrl0000/ctrl0000gpu.h, ctrl0080/ctrl0080gpu.h,
# ctrl2080/ctrl2080gpu.h, ctrl2080gr.h, ctrlc36f.h, ctrla06c.h and kernel-open/nvidia-uvm/uvm_ioctl.h printed sizeof and
# offsetof (x86-64 gcc) at tag 580.142 (580.65.06 gives the same numbers). "size", "field offset ..." in declaration order.
MEASURED_580 = {
  "NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS": (32, "gpuId 0 gpuFlags 4 deviceInstance 8 subDeviceInstance 12 sliStatus 16 boardId 20 "
                                                "gpuInstance 24 numaId 28"),
  "NV0000_CTRL_GPU_GET_PROBED_IDS_PARAMS": (384, "gpuIds 0 excludedGpuIds 128 gpuFlags 256"),
  "NV0080_ALLOC_PARAMETERS": (56, "deviceId 0 hClientShare 4 hTargetClient 8 hTargetDevice 12 flags 16 vaSpaceSize 24 vaStartInternal 32 "
                                  "vaLimitInternal 40 vaMode 48"),
  "NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS": (16, "numClasses 0 classList 8"),
  "NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS": (804, "numClasses 0 classList 4"),
  "NV2080_ALLOC_PARAMETERS": (4, "subDeviceId 0"),
  "NV2080_CTRL_GPU_GET_GID_INFO_PARAMS": (268, "index 0 flags 4 length 8 data 12"),
  "NV2080_CTRL_GR_GET_CTX_BUFFER_SIZE_PARAMS": (16, "hChannel 0 totalBufferSize 8"),  # measured the same way at 595.45.04
  "NV2080_CTRL_GR_GET_INFO_PARAMS": (32, "grInfoListSize 0 grInfoList 8 grRouteInfo 16"),
  "NV2080_CTRL_GR_INFO": (8, "index 0 data 4"),
  "NV2080_CTRL_GR_ROUTE_INFO": (16, "flags 0 route 8"),
  "NV2080_CTRL_PERF_BOOST_PARAMS": (8, "flags 0 duration 4"),  # ctrl2080perf.h, measured the same way at 595.45.04
  "NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS": (3, "bEnable 0 bSkipSubmit 1 bSkipEnable 2"),
  "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS": (4, "workSubmitToken 0"),
  "NVOS00_PARAMETERS": (16, "hRoot 0 hObjectParent 4 hObjectOld 8 status 12"),
  "NVOS02_PARAMETERS": (48, "hRoot 0 hObjectParent 4 hObjectNew 8 hClass 12 flags 16 pMemory 24 limit 32 status 40"),
  "NVOS21_PARAMETERS": (32, "hRoot 0 hObjectParent 4 hObjectNew 8 hClass 12 pAllocParms 16 paramsSize 24 status 28"),
  "NVOS33_PARAMETERS": (48, "hClient 0 hDevice 4 hMemory 8 offset 16 length 24 pLinearAddress 32 status 40 flags 44"),
  "NVOS34_PARAMETERS": (32, "hClient 0 hDevice 4 hMemory 8 pLinearAddress 16 status 24 flags 28"),
  "NVOS46_PARAMETERS": (64, "hClient 0 hDevice 4 hDma 8 hMemory 12 offset 16 length 24 flags 32 flags2 36 kindOverride 40 dmaOffset 48 "
                            "status 56"),
  "NVOS47_PARAMETERS": (48, "hClient 0 hDevice 4 hDma 8 hMemory 12 flags 16 dmaOffset 24 size 32 status 40"),
  "NVOS54_PARAMETERS": (32, "hClient 0 hObject 4 cmd 8 flags 12 params 16 paramsSize 24 status 28"),
  "NVOS55_PARAMETERS": (28, "hClient 0 hParent 4 hObject 8 hClientSrc 12 hObjectSrc 16 flags 20 status 24"),
  "NVOS64_PARAMETERS": (48, "hRoot 0 hObjectParent 4 hObjectNew 8 hClass 12 pAllocParms 16 pRightsRequested 24 paramsSize 32 flags 36 "
                            "status 40"),
  "NV_CHANNEL_ALLOC_PARAMS": (368, "hObjectError 0 hObjectBuffer 4 gpFifoOffset 8 gpFifoEntries 16 flags 20 hContextShare 24 hVASpace 28 "
                                   "hUserdMemory 32 userdOffset 64 engineType 128 cid 132 subDeviceId 136 hObjectEccError 140 instanceMem 144 "
                                   "userdMem 168 ramfcMem 192 mthdbufMem 216 hPhysChannelGroup 240 internalFlags 244 errorNotifierMem 248 "
                                   "eccErrorNotifierMem 272 ProcessID 296 SubProcessID 300 encryptIv 304 decryptIv 316 hmacNonce 328 "
                                   "tpcConfigID 360"),
  "NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS": (20, "hObjectError 0 hObjectEccError 4 hVASpace 8 engineType 12 bIsCallingContextVgpuPlugin 16"),
  "NV_CTXSHARE_ALLOCATION_PARAMETERS": (12, "hVASpace 0 flags 4 subctxId 8"),
  "NV_GR_ALLOCATION_PARAMETERS": (16, "version 0 flags 4 size 8 caps 12"),
  "NV_HOPPER_USERMODE_A_PARAMS": (2, "bBar1Mapping 0 bPriv 1"),
  "NV_MEMORY_ALLOCATION_PARAMS": (128, "owner 0 type 4 flags 8 width 12 height 16 pitch 20 attr 24 attr2 28 format 32 comprCovg 36 zcullCovg 40 "
                                       "rangeLo 48 rangeHi 56 size 64 alignment 72 offset 80 limit 88 address 96 ctagOffset 104 hVASpace 108 "
                                       "internalflags 112 tag 116 numaNode 120"),
  "NV_MEMORY_DESC_PARAMS": (24, "base 0 size 8 addressSpace 16 cacheAttrib 20"),
  "NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS": (24, "offset 0 limit 8 hVASpace 16"),
  "NV_VASPACE_ALLOCATION_PARAMETERS": (56, "index 0 flags 4 vaSize 8 vaStartInternal 16 vaLimitInternal 24 bigPageSize 32 vaBase 40 pasid 48"),
  "NvProcessorUuid": (16, "uuid 0"),
  "UVM_CREATE_EXTERNAL_RANGE_PARAMS": (24, "base 0 length 8 rmStatus 16"),
  "UVM_ENABLE_PEER_ACCESS_PARAMS": (36, "gpuUuidA 0 gpuUuidB 16 rmStatus 32"),  # measured the same way at 595.45.04
  "UVM_FREE_PARAMS": (24, "base 0 length 8 rmStatus 16"),
  "UVM_INITIALIZE_PARAMS": (16, "flags 0 rmStatus 8"),
  "UVM_MAP_EXTERNAL_ALLOCATION_PARAMS": (9264, "base 0 length 8 offset 16 perGpuAttributes 24 gpuAttributesCount 9240 rmCtrlFd 9248 "
                                               "hClient 9252 hMemory 9256 rmStatus 9260"),
  "UVM_MM_INITIALIZE_PARAMS": (8, "uvmFd 0 rmStatus 4"),
  "UVM_REGISTER_CHANNEL_PARAMS": (56, "gpuUuid 0 rmCtrlFd 16 hClient 20 hChannel 24 base 32 length 40 rmStatus 48"),
  "UVM_REGISTER_GPU_PARAMS": (40, "gpu_uuid 0 numaEnabled 16 numaNodeId 20 rmCtrlFd 24 hClient 28 hSmcPartRef 32 rmStatus 36"),
  "UVM_REGISTER_GPU_VASPACE_PARAMS": (32, "gpuUuid 0 rmCtrlFd 16 hClient 20 hVaSpace 24 rmStatus 28"),
  "UVM_UNMAP_EXTERNAL_PARAMS": (40, "base 0 length 8 gpuUuid 16 rmStatus 32"),
  "UVM_UNREGISTER_GPU_PARAMS": (20, "gpu_uuid 0 rmStatus 16"),
  "UVM_UNREGISTER_GPU_VASPACE_PARAMS": (20, "gpuUuid 0 rmStatus 16"),
  "UvmGpuMappingAttributes": (36, "gpuUuid 0 gpuMappingType 16 gpuCachingType 20 gpuFormatType 24 gpuElementBits 28 gpuCompressionType 32"),
  "nv_ioctl_card_info_t": (72, "valid 0 pci_info 4 gpu_id 16 interrupt_line 20 reg_address 24 reg_size 32 fb_address 40 fb_size 48 "
                               "minor_number 56 dev_name 60"),
  "nv_ioctl_nvos02_parameters_with_fd": (56, "params 0 fd 48"),
  "nv_ioctl_nvos33_parameters_with_fd": (56, "params 0 fd 48"),
  "nv_ioctl_register_fd_t": (4, "ctl_fd 0"),
  "nv_ioctl_rm_api_version_t": (72, "cmd 0 reply 4 versionString 8"),
  "nv_ioctl_wait_open_complete_t": (8, "rc 0 adapterStatus 4"),
  "nv_pci_info_t": (12, "domain 0 bus 4 slot 5 function 6 vendor_id 8 device_id 10"),
}
# the same program at tag 570.211.01 (570.86.15 gives the same numbers): every other struct measured as at 580.142
MEASURED_570 = {**MEASURED_580,
  "NV0000_CTRL_GPU_GET_PROBED_IDS_PARAMS": (256, "gpuIds 0 excludedGpuIds 128"),
  "NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS": (404, "numClasses 0 classList 4"),
  "NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS": (2, "bEnable 0 bSkipSubmit 1"),
  "NVOS46_PARAMETERS": (56, "hClient 0 hDevice 4 hDma 8 hMemory 12 offset 16 length 24 flags 32 dmaOffset 40 status 48"),
  "NV_VASPACE_ALLOCATION_PARAMETERS": (48, "index 0 flags 4 vaSize 8 vaStartInternal 16 vaLimitInternal 24 bigPageSize 32 vaBase 40"),
}
MEASURED = {"570": MEASURED_570, "580": MEASURED_580}
VERSIONS = {"570": "570.211.01", "580": "580.159.03"}

@pytest.mark.parametrize("branch", ["570", "580"])
def test_layouts_match_measured_headers(branch):
  ffi = abi_for(VERSIONS[branch]).ffi
  assert sorted(ffi.list_types()[0]) == sorted(MEASURED[branch])  # every declaration is measured, and only those
  for name, (size, fields) in MEASURED[branch].items():
    words = fields.split()
    assert ffi.sizeof(name) == size, name
    assert [f for f, _ in ffi.typeof(name).fields] == words[0::2], name
    for field, offset in zip(words[0::2], words[1::2]): assert ffi.offsetof(name, field) == int(offset), f"{name}.{field}"

# docs/nv.md §1, the independent reference: one size, or {branch: size} where the branches differ
NV_MD_SIZES = {
  "NVOS21_PARAMETERS": 32, "NVOS64_PARAMETERS": 48, "NVOS54_PARAMETERS": 32, "NVOS00_PARAMETERS": 16,
  "nv_ioctl_nvos02_parameters_with_fd": 56, "nv_ioctl_nvos33_parameters_with_fd": 56, "NVOS34_PARAMETERS": 32,
  "NVOS46_PARAMETERS": {"570": 56, "580": 64}, "NVOS47_PARAMETERS": 48, "nv_ioctl_card_info_t": 72, "nv_ioctl_register_fd_t": 4,
  "nv_ioctl_rm_api_version_t": 72,
  "NV0080_ALLOC_PARAMETERS": 56, "NV2080_ALLOC_PARAMETERS": 4, "NV_MEMORY_ALLOCATION_PARAMS": 128,
  "NV_VASPACE_ALLOCATION_PARAMETERS": {"570": 48, "580": 56}, "NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS": 20,
  "NV_CTXSHARE_ALLOCATION_PARAMETERS": 12, "NV_CHANNEL_ALLOC_PARAMS": 368, "NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS": 24,
  "NV_HOPPER_USERMODE_A_PARAMS": 2, "NV_GR_ALLOCATION_PARAMETERS": 16,
  "NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS": 32, "NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS": 16, "NV2080_CTRL_GPU_GET_GID_INFO_PARAMS": 268,
  "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS": 4, "NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS": {"570": 404, "580": 804},
  "UVM_INITIALIZE_PARAMS": 16, "UVM_MM_INITIALIZE_PARAMS": 8, "UVM_REGISTER_GPU_PARAMS": 40, "UVM_REGISTER_GPU_VASPACE_PARAMS": 32,
  "UVM_CREATE_EXTERNAL_RANGE_PARAMS": 24, "UVM_MAP_EXTERNAL_ALLOCATION_PARAMS": 9264, "UVM_REGISTER_CHANNEL_PARAMS": 56,
  "UVM_FREE_PARAMS": 24, "UvmGpuMappingAttributes": 36,
}
NV_MD_OFFSETS = {
  ("NVOS21_PARAMETERS", "pAllocParms"): 16, ("NVOS21_PARAMETERS", "paramsSize"): 24, ("NVOS21_PARAMETERS", "status"): 28,
  ("NVOS54_PARAMETERS", "params"): 16, ("NVOS54_PARAMETERS", "paramsSize"): 24, ("NVOS54_PARAMETERS", "status"): 28,
  ("nv_ioctl_nvos33_parameters_with_fd", "params", "offset"): 16, ("nv_ioctl_nvos33_parameters_with_fd", "params", "length"): 24,
  ("nv_ioctl_nvos33_parameters_with_fd", "params", "pLinearAddress"): 32, ("nv_ioctl_nvos33_parameters_with_fd", "params", "status"): 40,
  ("nv_ioctl_nvos33_parameters_with_fd", "params", "flags"): 44, ("nv_ioctl_nvos33_parameters_with_fd", "fd"): 48,
  ("nv_ioctl_card_info_t", "valid"): 0, ("nv_ioctl_card_info_t", "gpu_id"): 16, ("nv_ioctl_card_info_t", "minor_number"): 56,
  ("UVM_MAP_EXTERNAL_ALLOCATION_PARAMS", "perGpuAttributes"): 24, ("UVM_MAP_EXTERNAL_ALLOCATION_PARAMS", "gpuAttributesCount"): 9240,
  ("UVM_MAP_EXTERNAL_ALLOCATION_PARAMS", "rmCtrlFd"): 9248, ("UVM_MAP_EXTERNAL_ALLOCATION_PARAMS", "rmStatus"): 9260,
}

@pytest.mark.parametrize("branch", ["570", "580"])
def test_sizes_and_offsets_of_nv_md(branch):
  abi = abi_for(VERSIONS[branch])
  for name, size in NV_MD_SIZES.items(): assert abi.sizeof(name) == (size[branch] if isinstance(size, dict) else size), name
  for (name, *path), offset in NV_MD_OFFSETS.items(): assert abi.ffi.offsetof(name, *path) == offset, (name, path)
  assert abi.sizeof("UVM_MAP_EXTERNAL_ALLOCATION_PARAMS") - 24 - 24 == rm_abi.UVM_MAX_GPUS * abi.sizeof("UvmGpuMappingAttributes")

def test_request_numbers():
  abi = abi_for("580.159.03")
  assert rm_abi.escape_request(rm_abi.NV_ESC_CARD_INFO, 64 * abi.sizeof("nv_ioctl_card_info_t")) == 0xD20046C8  # nv.md §1 step 4
  assert abi.escape(rm_abi.NV_ESC_RM_ALLOC, "NVOS21_PARAMETERS") == 0xC020462B
  assert abi.escape(rm_abi.NV_ESC_RM_CONTROL, "NVOS54_PARAMETERS") == 0xC020462A
  assert abi.escape(rm_abi.NV_ESC_RM_MAP_MEMORY_DMA, "NVOS46_PARAMETERS") == 0xC0404657
  assert abi_for("570.211.01").escape(rm_abi.NV_ESC_RM_MAP_MEMORY_DMA, "NVOS46_PARAMETERS") == 0xC0384657

# docs/nv.md §1 and §2 (every constant in rm_abi was also compared with the headers' macros by the layout program)
NV_MD_CONSTANTS = {
  "NV_ESC_CARD_INFO": 200, "NV_ESC_REGISTER_FD": 201, "NV_ESC_CHECK_VERSION_STR": 210, "NV_ESC_IOCTL_XFER_CMD": 211,
  "NV_ESC_ATTACH_GPUS_TO_FD": 212, "NV_ESC_WAIT_OPEN_COMPLETE": 218, "NV_ESC_RM_ALLOC_MEMORY": 0x27, "NV_ESC_RM_FREE": 0x29,
  "NV_ESC_RM_CONTROL": 0x2A, "NV_ESC_RM_ALLOC": 0x2B, "NV_ESC_RM_DUP_OBJECT": 0x34, "NV_ESC_RM_VID_HEAP_CONTROL": 0x4A,
  "NV_ESC_RM_MAP_MEMORY": 0x4E, "NV_ESC_RM_UNMAP_MEMORY": 0x4F, "NV_ESC_RM_MAP_MEMORY_DMA": 0x57, "NV_ESC_RM_UNMAP_MEMORY_DMA": 0x58,
  "UVM_INITIALIZE": 0x30000001, "UVM_DEINITIALIZE": 0x30000002, "UVM_CREATE_RANGE_GROUP": 23, "UVM_REGISTER_GPU_VASPACE": 25,
  "UVM_REGISTER_CHANNEL": 27, "UVM_ENABLE_PEER_ACCESS": 29, "UVM_MAP_EXTERNAL_ALLOCATION": 33, "UVM_FREE": 34, "UVM_REGISTER_GPU": 37,
  "UVM_UNMAP_EXTERNAL": 66, "UVM_VALIDATE_VA_RANGE": 72, "UVM_CREATE_EXTERNAL_RANGE": 73, "UVM_MM_INITIALIZE": 75,
  "NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2": 0x205, "NV0080_CTRL_CMD_GPU_GET_CLASSLIST": 0x800201, "NV2080_CTRL_CMD_GPU_GET_GID_INFO": 0x2080014A,
  "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN": 0xC36F0108, "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE": 0xA06C0101,
  "NV2080_CTRL_CMD_GR_GET_INFO": 0x20801201, "NV2080_CTRL_GR_INFO_INDEX_SM_VERSION": 0xC, "NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM": 0xD,
  "NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS": 0x14, "NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC": 0x17,
  "NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC": 0x20,
  "NV01_ROOT_CLIENT": 0x41, "NV01_DEVICE_0": 0x80, "NV20_SUBDEVICE_0": 0x2080, "NV01_MEMORY_LOCAL_USER": 0x40, "NV01_MEMORY_SYSTEM": 0x3E,
  "NV01_MEMORY_SYSTEM_OS_DESCRIPTOR": 0x71, "NV01_MEMORY_VIRTUAL": 0x70, "FERMI_VASPACE_A": 0x90F1, "KEPLER_CHANNEL_GROUP_A": 0xA06C,
  "FERMI_CONTEXT_SHARE_A": 0x9067, "GT200_DEBUGGER": 0x83DE, "TURING_USERMODE_A": 0xC461, "VOLTA_USERMODE_A": 0xC361,
  "AMPERE_CHANNEL_GPFIFO_A": 0xC56F, "HOPPER_CHANNEL_GPFIFO_A": 0xC86F, "BLACKWELL_CHANNEL_GPFIFO_A": 0xC96F,
  "BLACKWELL_CHANNEL_GPFIFO_B": 0xCA6F, "AMPERE_COMPUTE_A": 0xC6C0, "AMPERE_COMPUTE_B": 0xC7C0, "ADA_COMPUTE_A": 0xC9C0,
  "HOPPER_COMPUTE_A": 0xCBC0, "BLACKWELL_COMPUTE_A": 0xCDC0, "BLACKWELL_COMPUTE_B": 0xCEC0, "AMPERE_DMA_COPY_A": 0xC6B5,
  "AMPERE_DMA_COPY_B": 0xC7B5, "HOPPER_DMA_COPY_A": 0xC8B5, "BLACKWELL_DMA_COPY_A": 0xC9B5, "BLACKWELL_DMA_COPY_B": 0xCAB5,
  "AMPERE_USERMODE_A": 0xC561, "HOPPER_USERMODE_A": 0xC661, "BLACKWELL_USERMODE_A": 0xC761,
  "NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING": 1 << 6, "NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED": 1 << 3,
  "NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED": 0x8000, "NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE": 0x100, "NVOS32_TYPE_IMAGE": 0, "NVOS32_TYPE_NOTIFIER": 13,
  "NVOS32_ATTR_PHYSICALITY": (28, 27), "NVOS32_ATTR_LOCATION": (26, 25), "NVOS32_ATTR_PAGE_SIZE": (24, 23),
  "NVOS32_ATTR2_GPU_CACHEABLE": (3, 2), "NVOS32_ATTR2_PAGE_SIZE_HUGE": (21, 20), "NVOS02_FLAGS_PHYSICALITY": (7, 4),
  "NVOS02_FLAGS_COHERENCY": (15, 12), "NVOS02_FLAGS_MAPPING": (31, 30), "UvmGpuMappingTypeReadWriteAtomic": 1,
}

def test_constants():
  assert {n: getattr(rm_abi, n) for n in NV_MD_CONSTANTS} == NV_MD_CONSTANTS

def test_bits():
  assert rm_abi.bits(rm_abi.NVOS02_FLAGS_MAPPING, rm_abi.NVOS02_FLAGS_MAPPING_NO_MAP) == 1 << 30
  assert rm_abi.bits(rm_abi.NVOS32_ATTR_LOCATION, rm_abi.NVOS32_ATTR_LOCATION_PCI) | rm_abi.bits(rm_abi.NVOS32_ATTR_PAGE_SIZE, 3) == 0x3800000
  with pytest.raises(ValueError, match="bits 26:25"): rm_abi.bits(rm_abi.NVOS32_ATTR_LOCATION, 4)

def test_status_codes():
  # nvstatuscodes.h at 580.142: 150 codes
  expected = {"NV_OK": 0, "NV_ERR_GENERIC": 0xFFFF, "NV_ERR_BROKEN_FB": 0x01, "NV_ERR_ILLEGAL_ACTION": 0x16, "NV_ERR_INSUFFICIENT_RESOURCES": 0x1A,
              "NV_ERR_INVALID_ARGUMENT": 0x1F, "NV_ERR_INVALID_CLASS": 0x22, "NV_ERR_INVALID_OBJECT_HANDLE": 0x33, "NV_ERR_INVALID_STATE": 0x40,
              "NV_ERR_NO_MEMORY": 0x51, "NV_ERR_NOT_SUPPORTED": 0x56, "NV_ERR_OBJECT_NOT_FOUND": 0x57, "NV_ERR_TIMEOUT": 0x65,
              "NV_ERR_DMA_XFER_FAILED": 0x8B, "NV_WARN_HOT_SWITCH": 0x10001, "NV_WARN_THRESHOLD_CROSSED": 0x10009}
  assert {n: c for c, n in rm_abi.NV_STATUS.items() if n in expected} == expected
  assert len(rm_abi.NV_STATUS) == 150
  assert rm_abi.status_name(0x1F) == "NV_ERR_INVALID_ARGUMENT" and rm_abi.status_name(0x12345) == "NV_STATUS 0x12345"

def test_abi_for_picks_the_branch():
  assert abi_for("570.211.01").branch == "570"
  assert abi_for("580.159.03").branch == "580" and abi_for("595.45.04").branch == "580"
  assert abi_for("580.142").ffi is abi_for("580.159.04").ffi  # one FFI per branch
  for bad in ("535.0", "575.64.05", "garbage", ""):
    with pytest.raises(ValueError, match=f"{bad!r}.*570.*580"): abi_for(bad)

def test_building_an_rm_alloc():
  abi = abi_for("580.159.03")
  params = abi.new("NV0080_ALLOC_PARAMETERS", deviceId=1, hClientShare=0xC1D00001)
  args = abi.new("NVOS21_PARAMETERS", hRoot=0xC1D00001, hObjectParent=0xC1D00001, hClass=rm_abi.NV01_DEVICE_0,
                 pAllocParms=abi.address(params), paramsSize=abi.sizeof("NV0080_ALLOC_PARAMETERS"))
  assert abi.ffi.cast("NV0080_ALLOC_PARAMETERS *", args.pAllocParms).hClientShare == 0xC1D00001
  assert bytes(abi.ffi.buffer(args))[12:16] == (0x80).to_bytes(4, "little") and args.paramsSize == 56
  attrs = abi.new("UVM_MAP_EXTERNAL_ALLOCATION_PARAMS", perGpuAttributes=[{"gpuUuid": {"uuid": bytes(range(16))}, "gpuMappingType": 1}])
  assert bytes(attrs.perGpuAttributes[0].gpuUuid.uuid) == bytes(range(16)) and attrs.perGpuAttributes[1].gpuMappingType == 0
  with pytest.raises(KeyError, match="NVOS21_PARAMETERS has no field 'hBogus'"): abi.new("NVOS21_PARAMETERS", hBogus=1)
