"""drivers/qcom/kgsl.py against Qualcomm's msm_kgsl.h: every declared struct's size and field offsets, the ioctl request
numbers, and the chip id -> generation/arch rule of the device."""
import pytest
from drivers.device import DeviceUnavailable
from drivers.qcom import kgsl
from drivers.qcom.device import chip_arch

# Hand-transcribed from include/uapi/linux/msm_kgsl.h (qualcomm-linux/kgsl b61a2ad) for a 64-bit kernel (LP64: unsigned
# long, __kernel_size_t and pointers 8 bytes, aligned to 8): "size", then "field offset" in declaration order.
MSM_KGSL_H = {
  "kgsl_devinfo": (40, "device_id 0 chip_id 4 mmu_enabled 8 gmem_gpubaseaddr 16 gpu_id 24 gmem_sizebytes 32"),
  "kgsl_device_getproperty": (24, "type 0 value 8 sizebytes 16"),
  "kgsl_device_waittimestamp_ctxtid": (12, "context_id 0 timestamp 4 timeout 8"),
  "kgsl_drawctxt_create": (8, "flags 0 drawctxt_id 4"),
  "kgsl_drawctxt_destroy": (4, "drawctxt_id 0"),
  "kgsl_cmdstream_readtimestamp_ctxtid": (12, "context_id 0 type 4 timestamp 8"),
  "kgsl_gpuobj_alloc": (48, "size 0 flags 8 va_len 16 mmapsize 24 id 32 metadata_len 36 metadata 40"),
  "kgsl_gpuobj_free": (32, "flags 0 priv 8 id 16 type 20 len 24"),
  "kgsl_gpuobj_info": (48, "gpuaddr 0 flags 8 size 16 va_len 24 va_addr 32 id 40"),
  "kgsl_command_object": (32, "offset 0 gpuaddr 8 size 16 flags 24 id 28"),
  "kgsl_gpu_command": (64, "flags 0 cmdlist 8 cmdsize 16 numcmds 20 objlist 24 objsize 32 numobjs 36 synclist 40 syncsize 48 "
                           "numsyncs 52 context_id 56 timestamp 60"),
}

@pytest.mark.parametrize("struct", sorted(MSM_KGSL_H))
def test_struct_layout_matches_msm_kgsl_h(struct):
  size, layout = MSM_KGSL_H[struct]
  words = layout.split()
  assert kgsl.ffi.sizeof(f"struct {struct}") == size
  assert [f for f, _ in kgsl.ffi.typeof(f"struct {struct}").fields] == words[0::2], "fields in the header's order"
  for field, offset in zip(words[0::2], words[1::2]): assert kgsl.ffi.offsetof(f"struct {struct}", field) == int(offset), f"{struct}.{field}"

# the request numbers docs/qcom.md section 1 lists (dir << 30 | size << 16 | 0x09 << 8 | nr)
DOCS_QCOM_MD = {"DEVICE_GETPROPERTY": 0xC0180902, "DEVICE_WAITTIMESTAMP_CTXTID": 0x400C0907, "DRAWCTXT_CREATE": 0xC0080913,
                "DRAWCTXT_DESTROY": 0x40040914, "CMDSTREAM_READTIMESTAMP_CTXTID": 0xC00C0916, "GPUOBJ_ALLOC": 0xC0300945,
                "GPUOBJ_FREE": 0x40200946, "GPUOBJ_INFO": 0xC0300947, "GPU_COMMAND": 0xC040094A}

def test_ioctl_numbers_match_the_fact_sheet():
  assert {name: request for name, (request, _) in kgsl.IOCTLS.items()} == DOCS_QCOM_MD

def test_constants_match_msm_kgsl_h():
  assert (kgsl.PROP_DEVICE_INFO, kgsl.PROP_GPU_RESET_STAT, kgsl.CMDLIST_IB, kgsl.TIMESTAMP_RETIRED) == (0x1, 0x9, 0x1, 0x2)
  assert (kgsl.CONTEXT_NO_GMEM_ALLOC, kgsl.CONTEXT_PREAMBLE, kgsl.CONTEXT_NO_FAULT_TOLERANCE) == (0x2, 0x10, 0x200)
  assert kgsl.CONTEXT_TYPE_CL << kgsl.CONTEXT_TYPE_SHIFT == 0x00200000 and kgsl.CONTEXT_PREEMPT_STYLE_FINEGRAIN << kgsl.CONTEXT_PREEMPT_STYLE_SHIFT == 0x04000000
  assert kgsl.MEMFLAGS_USE_CPU_MAP == 1 << 28 and 12 << kgsl.MEMALIGN_SHIFT == 0x000C0000 and kgsl.CACHEMODE_UNCACHED << kgsl.CACHEMODE_SHIFT == 0x04000000

def test_a_failed_ioctl_names_itself():
  class Refusing:
    def ioctl(self, fd, name, request, arg): raise OSError(22, f"ioctl {name} ({request:#x}) failed: Invalid argument")
  with pytest.raises(OSError, match=r"IOCTL_KGSL_GPUOBJ_ALLOC \(0xc0300945\)"): kgsl.call(Refusing(), 3, "GPUOBJ_ALLOC", size=4096)

def test_get_property_passes_the_value_and_its_size():
  seen = {}
  class Kernel:
    def ioctl(self, fd, name, request, arg):
      seen.update(name=name, type=arg.type, size=arg.sizebytes)
      kgsl.ffi.cast("struct kgsl_devinfo *", arg.value).chip_id = 0x06030001
  assert kgsl.get_property(Kernel(), 3, kgsl.PROP_DEVICE_INFO, "struct kgsl_devinfo").chip_id == 0x06030001
  assert seen == {"name": "IOCTL_KGSL_DEVICE_GETPROPERTY", "type": 1, "size": 40}

@pytest.mark.parametrize("chip, expected", [(0x06030001, (6, "a630")), (0x06060001, (6, "a660")), (0x06040001, (6, "a640")),
                                            (0x07030001, (7, "a730")), (0x43050A01, (7, "a740")), (0x43051401, (7, "a750")),
                                            (0x07000200, (6, "a702"))])  # a702: kgsl adreno-gpulist.h gives it the a6xx gpudev
def test_chip_ids_name_generation_and_arch(chip, expected):
  assert chip_arch(chip) == expected

@pytest.mark.parametrize("chip", [0x05030002, 0x44050001, 0x43990000, 0x08000000])
def test_other_chips_are_refused_by_id(chip):
  with pytest.raises(DeviceUnavailable, match=f"{chip:#010x}"): chip_arch(chip)
