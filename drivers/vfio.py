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

VFIO_API_VERSION = 0

class VFIODevice:
  """A PCI function bound to vfio-pci, opened through `system` (real or MOCK): its regions (BARs) can be mapped."""
  def __init__(self, system, pci_address: str, iommu_group: int):
    self.system, self.address = system, pci_address
    self.container = system.open("/dev/vfio/vfio")
    if (version := system.ioctl(self.container, "VFIO_GET_API_VERSION", IOCTLS["VFIO_GET_API_VERSION"], 0)) != VFIO_API_VERSION:
      raise RuntimeError(f"VFIO API version {version}, expected {VFIO_API_VERSION}")
    self.group = system.open(f"/dev/vfio/{iommu_group}")
    status = ffi.new("struct vfio_group_status*", {"argsz": ffi.sizeof("struct vfio_group_status")})
    system.ioctl(self.group, "VFIO_GROUP_GET_STATUS", IOCTLS["VFIO_GROUP_GET_STATUS"], status)
    if not status.flags & VFIO_GROUP_FLAGS_VIABLE:
      raise RuntimeError(f"IOMMU group {iommu_group} of {pci_address} is not viable: bind every device in it to vfio-pci")
    system.ioctl(self.group, "VFIO_GROUP_SET_CONTAINER", IOCTLS["VFIO_GROUP_SET_CONTAINER"], ffi.new("int*", self.container))
    system.ioctl(self.container, "VFIO_SET_IOMMU", IOCTLS["VFIO_SET_IOMMU"], VFIO_TYPE1v2_IOMMU)
    self.fd = system.ioctl(self.group, "VFIO_GROUP_GET_DEVICE_FD", IOCTLS["VFIO_GROUP_GET_DEVICE_FD"], ffi.new("char[]", pci_address.encode()))
    self.info = ffi.new("struct vfio_device_info*", {"argsz": ffi.sizeof("struct vfio_device_info")})
    system.ioctl(self.fd, "VFIO_DEVICE_GET_INFO", IOCTLS["VFIO_DEVICE_GET_INFO"], self.info)

  def region(self, index: int):
    if not 0 <= index < self.info.num_regions: raise ValueError(f"{self.address} has {self.info.num_regions} regions, asked for {index}")
    info = ffi.new("struct vfio_region_info*", {"argsz": ffi.sizeof("struct vfio_region_info"), "index": index})
    self.system.ioctl(self.fd, "VFIO_DEVICE_GET_REGION_INFO", IOCTLS["VFIO_DEVICE_GET_REGION_INFO"], info)
    return info

  def map_region(self, index: int) -> tuple[int, int]:
    """(address, size) of region `index` mapped into this process."""
    info = self.region(index)
    if not info.flags & VFIO_REGION_INFO_FLAG_MMAP: raise RuntimeError(f"region {index} of {self.address} can't be mapped")
    from drivers.system import MAP_SHARED, PROT_READ, PROT_WRITE
    return self.system.mmap(0, info.size, PROT_READ | PROT_WRITE, MAP_SHARED, self.fd, info.offset), info.size
