"""VFIO (linux/vfio.h, ioctl type ';' base 100): a PCI device handed to user space, for drivers that talk to a GPU
over bare PCI. Structures are declared once for cffi and checked against the system header by the tests."""
from __future__ import annotations
import cffi
from drivers.system import IO

ffi = cffi.FFI()
ffi.cdef("""
struct vfio_group_status { uint32_t argsz; uint32_t flags; };
struct vfio_device_info { uint32_t argsz; uint32_t flags; uint32_t num_regions; uint32_t num_irqs; uint32_t cap_offset; };
struct vfio_region_info { uint32_t argsz; uint32_t flags; uint32_t index; uint32_t cap_offset; uint64_t size; uint64_t offset; };
struct vfio_irq_set { uint32_t argsz; uint32_t flags; uint32_t index; uint32_t start; uint32_t count; uint8_t data[]; };
""")

VFIO_TYPE, VFIO_BASE = ";", 100
IOCTLS: dict[str, int] = {name: IO(VFIO_TYPE, VFIO_BASE + n) for name, n in (
  ("VFIO_GET_API_VERSION", 0), ("VFIO_CHECK_EXTENSION", 1), ("VFIO_SET_IOMMU", 2), ("VFIO_GROUP_GET_STATUS", 3),
  ("VFIO_GROUP_SET_CONTAINER", 4), ("VFIO_GROUP_GET_DEVICE_FD", 6), ("VFIO_DEVICE_GET_INFO", 7), ("VFIO_DEVICE_GET_REGION_INFO", 8),
  ("VFIO_DEVICE_SET_IRQS", 10), ("VFIO_DEVICE_RESET", 11))}
VFIO_GROUP_FLAGS_VIABLE, VFIO_TYPE1v2_IOMMU = 1, 3
VFIO_REGION_INFO_FLAG_MMAP = 1 << 2
