"""The parts of Qualcomm's KGSL interface (include/uapi/linux/msm_kgsl.h, ioctl type 0x09) that tg's QCOM driver
uses, declared once for cffi; tests compare every offset and size with the header's layout on a 64-bit kernel."""
from __future__ import annotations
import errno
import cffi
from drivers.system import IOW, IOWR

ffi = cffi.FFI()
# msm_kgsl.h: struct kgsl_devinfo, kgsl_device_getproperty, kgsl_device_waittimestamp_ctxtid, kgsl_drawctxt_create,
# kgsl_drawctxt_destroy, kgsl_cmdstream_readtimestamp_ctxtid, kgsl_gpuobj_alloc, kgsl_gpuobj_free, kgsl_gpuobj_info,
# kgsl_command_object, kgsl_gpu_command (the header's own types: `unsigned long` and `__kernel_size_t` are 64-bit here)
ffi.cdef("""
struct kgsl_devinfo { unsigned int device_id; unsigned int chip_id; unsigned int mmu_enabled; unsigned long gmem_gpubaseaddr;
  unsigned int gpu_id; size_t gmem_sizebytes; };
struct kgsl_device_getproperty { unsigned int type; void *value; size_t sizebytes; };
struct kgsl_device_waittimestamp_ctxtid { unsigned int context_id; unsigned int timestamp; unsigned int timeout; };
struct kgsl_drawctxt_create { unsigned int flags; unsigned int drawctxt_id; };
struct kgsl_drawctxt_destroy { unsigned int drawctxt_id; };
struct kgsl_cmdstream_readtimestamp_ctxtid { unsigned int context_id; unsigned int type; unsigned int timestamp; };
struct kgsl_gpuobj_alloc { uint64_t size; uint64_t flags; uint64_t va_len; uint64_t mmapsize; unsigned int id; unsigned int metadata_len;
  uint64_t metadata; };
struct kgsl_gpuobj_free { uint64_t flags; uint64_t priv; unsigned int id; unsigned int type; unsigned int len; };
struct kgsl_gpuobj_info { uint64_t gpuaddr; uint64_t flags; uint64_t size; uint64_t va_len; uint64_t va_addr; unsigned int id; };
struct kgsl_command_object { uint64_t offset; uint64_t gpuaddr; uint64_t size; unsigned int flags; unsigned int id; };
struct kgsl_gpu_command { uint64_t flags; uint64_t cmdlist; unsigned int cmdsize; unsigned int numcmds; uint64_t objlist;
  unsigned int objsize; unsigned int numobjs; uint64_t synclist; unsigned int syncsize; unsigned int numsyncs;
  unsigned int context_id; unsigned int timestamp; };
""")

KGSL_IOC_TYPE = 0x09
def _size(name: str) -> int: return ffi.sizeof(f"struct {name}")
# (request number, struct) by name; msm_kgsl.h IOCTL_KGSL_*: _IOW/_IOWR(KGSL_IOC_TYPE, nr, struct)
IOCTLS: dict[str, tuple[int, str]] = {name: (io(KGSL_IOC_TYPE, nr, _size(struct)), struct) for name, io, nr, struct in (
  ("DEVICE_GETPROPERTY", IOWR, 0x02, "kgsl_device_getproperty"),
  ("DEVICE_WAITTIMESTAMP_CTXTID", IOW, 0x07, "kgsl_device_waittimestamp_ctxtid"),
  ("DRAWCTXT_CREATE", IOWR, 0x13, "kgsl_drawctxt_create"),
  ("DRAWCTXT_DESTROY", IOW, 0x14, "kgsl_drawctxt_destroy"),
  ("CMDSTREAM_READTIMESTAMP_CTXTID", IOWR, 0x16, "kgsl_cmdstream_readtimestamp_ctxtid"),
  ("GPUOBJ_ALLOC", IOWR, 0x45, "kgsl_gpuobj_alloc"),
  ("GPUOBJ_FREE", IOW, 0x46, "kgsl_gpuobj_free"),
  ("GPUOBJ_INFO", IOWR, 0x47, "kgsl_gpuobj_info"),
  ("GPU_COMMAND", IOWR, 0x4A, "kgsl_gpu_command"))}

# constants of the same header
PROP_DEVICE_INFO, PROP_GPU_RESET_STAT = 0x1, 0x9
CONTEXT_NO_GMEM_ALLOC, CONTEXT_PREAMBLE, CONTEXT_NO_FAULT_TOLERANCE = 0x2, 0x10, 0x200
CONTEXT_PRIORITY_SHIFT, CONTEXT_TYPE_SHIFT, CONTEXT_TYPE_CL = 12, 20, 2
CONTEXT_PREEMPT_STYLE_SHIFT, CONTEXT_PREEMPT_STYLE_FINEGRAIN = 25, 0x2
MEMFLAGS_USE_CPU_MAP, MEMALIGN_SHIFT, CACHEMODE_SHIFT, CACHEMODE_UNCACHED = 1 << 28, 16, 26, 1
CMDLIST_IB = 0x1
TIMESTAMP_RETIRED = 0x2
# enum kgsl_ctx_reset_stat: what GPU_RESET_STAT says about a context
CTX_STAT_NO_ERROR, CTX_STAT_GUILTY, CTX_STAT_INNOCENT, CTX_STAT_UNKNOWN = 0, 1, 2, 3
RESET_STATS = {CTX_STAT_GUILTY: "its own commands faulted (guilty context reset)", CTX_STAT_INNOCENT: "another context's fault reset the GPU",
               CTX_STAT_UNKNOWN: "the GPU was reset for an unknown cause"}
# the errors adreno.c adreno_waittimestamp returns for a context that faulted: EDEADLK once it is invalidated,
# EPROTO (a "success" error, kgsl.c) when it faulted since the last wait
FAULT_ERRNOS = {errno.EDEADLK: "the context was invalidated after a GPU fault", errno.EPROTO: "the context faulted since the last wait"}

def call(system, fd: int, name: str, **fields):
  """IOCTL_KGSL_<name> on `fd` with a new struct of its type holding `fields`; the struct as the kernel left it.
  OSError names the ioctl and the errno."""
  request, struct = IOCTLS[name]
  arg = ffi.new(f"struct {struct} *", fields)
  system.ioctl(fd, f"IOCTL_KGSL_{name}", request, arg)
  return arg

def get_property(system, fd: int, prop: int, ctype: str, init=None):
  """DEVICE_GETPROPERTY of `prop` into a new `ctype` ("struct kgsl_devinfo", "unsigned int") holding `init` first; the
  value the kernel wrote."""
  value = ffi.new(f"{ctype} *", init)
  call(system, fd, "DEVICE_GETPROPERTY", type=prop, value=value, sizebytes=ffi.sizeof(ctype))
  return value[0]
