"""The parts of the Linux KFD interface (linux/kfd_ioctl.h, ioctl base 'K') that an AMD compute driver uses,
declared once for cffi; tests compare every offset and size with the system header."""
from __future__ import annotations
import cffi
from drivers.system import IOR, IOW, IOWR

ffi = cffi.FFI()
ffi.cdef("""
struct kfd_ioctl_get_version_args { uint32_t major_version; uint32_t minor_version; };
struct kfd_ioctl_create_queue_args {
  uint64_t ring_base_address; uint64_t write_pointer_address; uint64_t read_pointer_address; uint64_t doorbell_offset;
  uint32_t ring_size; uint32_t gpu_id; uint32_t queue_type; uint32_t queue_percentage; uint32_t queue_priority; uint32_t queue_id;
  uint64_t eop_buffer_address; uint64_t eop_buffer_size; uint64_t ctx_save_restore_address;
  uint32_t ctx_save_restore_size; uint32_t ctl_stack_size; };
struct kfd_ioctl_destroy_queue_args { uint32_t queue_id; uint32_t pad; };
struct kfd_ioctl_create_event_args {
  uint64_t event_page_offset; uint32_t event_trigger_data; uint32_t event_type; uint32_t auto_reset; uint32_t node_id;
  uint32_t event_id; uint32_t event_slot_index; };
struct kfd_ioctl_destroy_event_args { uint32_t event_id; uint32_t pad; };
struct kfd_ioctl_set_event_args { uint32_t event_id; uint32_t pad; };
struct kfd_ioctl_reset_event_args { uint32_t event_id; uint32_t pad; };
struct kfd_memory_exception_failure { uint32_t NotPresent; uint32_t ReadOnly; uint32_t NoExecute; uint32_t imprecise; };
struct kfd_hsa_memory_exception_data { struct kfd_memory_exception_failure failure; uint64_t va; uint32_t gpu_id; uint32_t ErrorType; };
struct kfd_hsa_hw_exception_data { uint32_t reset_type; uint32_t reset_cause; uint32_t memory_lost; uint32_t gpu_id; };
struct kfd_event_data {
  union { struct kfd_hsa_memory_exception_data memory_exception_data; struct kfd_hsa_hw_exception_data hw_exception_data; };
  uint64_t kfd_event_data_ext; uint32_t event_id; uint32_t pad; };
struct kfd_ioctl_wait_events_args { uint64_t events_ptr; uint32_t num_events; uint32_t wait_for_all; uint32_t timeout; uint32_t wait_result; };
struct kfd_ioctl_acquire_vm_args { uint32_t drm_fd; uint32_t gpu_id; };
struct kfd_ioctl_alloc_memory_of_gpu_args { uint64_t va_addr; uint64_t size; uint64_t handle; uint64_t mmap_offset; uint32_t gpu_id; uint32_t flags; };
struct kfd_ioctl_free_memory_of_gpu_args { uint64_t handle; };
struct kfd_ioctl_map_memory_to_gpu_args { uint64_t handle; uint64_t device_ids_array_ptr; uint32_t n_devices; uint32_t n_success; };
struct kfd_ioctl_unmap_memory_from_gpu_args { uint64_t handle; uint64_t device_ids_array_ptr; uint32_t n_devices; uint32_t n_success; };
""")

def _size(name: str) -> int: return ffi.sizeof(f"struct {name}")
# request numbers, by name (the name is what a failing ioctl reports)
IOCTLS: dict[str, int] = {
  "AMDKFD_IOC_GET_VERSION": IOR("K", 0x01, _size("kfd_ioctl_get_version_args")),
  "AMDKFD_IOC_CREATE_QUEUE": IOWR("K", 0x02, _size("kfd_ioctl_create_queue_args")),
  "AMDKFD_IOC_DESTROY_QUEUE": IOWR("K", 0x03, _size("kfd_ioctl_destroy_queue_args")),
  "AMDKFD_IOC_CREATE_EVENT": IOWR("K", 0x08, _size("kfd_ioctl_create_event_args")),
  "AMDKFD_IOC_DESTROY_EVENT": IOW("K", 0x09, _size("kfd_ioctl_destroy_event_args")),
  "AMDKFD_IOC_SET_EVENT": IOW("K", 0x0A, _size("kfd_ioctl_set_event_args")),
  "AMDKFD_IOC_RESET_EVENT": IOW("K", 0x0B, _size("kfd_ioctl_reset_event_args")),
  "AMDKFD_IOC_WAIT_EVENTS": IOWR("K", 0x0C, _size("kfd_ioctl_wait_events_args")),
  "AMDKFD_IOC_ACQUIRE_VM": IOW("K", 0x15, _size("kfd_ioctl_acquire_vm_args")),
  "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU": IOWR("K", 0x16, _size("kfd_ioctl_alloc_memory_of_gpu_args")),
  "AMDKFD_IOC_FREE_MEMORY_OF_GPU": IOW("K", 0x17, _size("kfd_ioctl_free_memory_of_gpu_args")),
  "AMDKFD_IOC_MAP_MEMORY_TO_GPU": IOWR("K", 0x18, _size("kfd_ioctl_map_memory_to_gpu_args")),
  "AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU": IOWR("K", 0x19, _size("kfd_ioctl_unmap_memory_from_gpu_args")),
}

# RUNTIME_ENABLE came with UAPI 1.14, after the system header this is checked against: its layout from a newer
# kfd_ioctl.h (struct kfd_ioctl_runtime_enable_args: u64 r_debug, u32 mode_mask, u32 capabilities_mask)
ffi_1_14 = cffi.FFI()
ffi_1_14.cdef("struct kfd_ioctl_runtime_enable_args { uint64_t r_debug; uint32_t mode_mask; uint32_t capabilities_mask; };")
RUNTIME_ENABLE = IOWR("K", 0x25, ffi_1_14.sizeof("struct kfd_ioctl_runtime_enable_args"))
RUNTIME_ENABLE_MODE_ENABLE = 1 << 0

# constants of the same header
QUEUE_TYPE_COMPUTE, QUEUE_TYPE_SDMA = 0x0, 0x1
MAX_QUEUE_PERCENTAGE, MAX_QUEUE_PRIORITY = 100, 15
EVENT_SIGNAL, EVENT_HW_EXCEPTION, EVENT_MEMORY = 0, 3, 8
WAIT_RESULT_COMPLETE, WAIT_RESULT_TIMEOUT, WAIT_RESULT_FAIL = 0, 1, 2
ALLOC_VRAM, ALLOC_GTT, ALLOC_USERPTR, ALLOC_DOORBELL, ALLOC_MMIO_REMAP = 1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4
ALLOC_WRITABLE, ALLOC_EXECUTABLE, ALLOC_PUBLIC, ALLOC_NO_SUBSTITUTE = 1 << 31, 1 << 30, 1 << 29, 1 << 28
ALLOC_COHERENT, ALLOC_UNCACHED = 1 << 26, 1 << 25

def call(system, fd: int, name: str, struct: str, **fields):
  """AMDKFD_IOC_<name> on `fd` with a new `struct kfd_..._args` holding `fields`; the struct as the kernel left it.
  OSError names the ioctl and the errno."""
  arg = ffi.new(f"struct {struct} *", fields)
  system.ioctl(fd, f"AMDKFD_IOC_{name}", IOCTLS[f"AMDKFD_IOC_{name}"], arg)
  return arg
