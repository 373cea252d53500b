"""The OS seam: ioctl errors name the request, PCI enumeration reads sysfs, and the MOCK interface routes device
files to software models."""
import errno, os, shutil, subprocess
import pytest
from drivers.amd import kfd
from drivers.mock import DeviceModel, MockSystem
from drivers.system import CPU_CACHES, DEFAULT_CORE_CACHE, IOR, IOWR, PCIDevice, System, core_cache_bytes, ffi, real_system, system_for

def test_ioctl_numbers_follow_the_kernel_encoding():
  assert IOR("K", 0x01, 8) == 0x80084B01 and IOWR("K", 0x02, 88) == 0xC0584B02

def test_ioctl_failure_names_request_and_errno():
  fd = real_system.open("/dev/null")
  try:
    args = kfd.ffi.new("struct kfd_ioctl_get_version_args*")
    with pytest.raises(OSError, match=r"AMDKFD_IOC_GET_VERSION \(0x80084b01\) failed: .*errno 25") as e:
      real_system.ioctl(fd, "AMDKFD_IOC_GET_VERSION", kfd.IOCTLS["AMDKFD_IOC_GET_VERSION"], args)
    assert e.value.errno == errno.ENOTTY
  finally: real_system.close(fd)

def test_open_failure_names_path():
  with pytest.raises(OSError, match="/dev/nvidia-does-not-exist"): real_system.open("/dev/nvidia-does-not-exist")

def test_pci_enumeration_reads_sysfs():
  devices = real_system.pci_devices()
  if not os.path.isdir("/sys/bus/pci/devices") or not devices: pytest.skip("no PCI devices visible")
  d = devices[0]
  assert len(d.address.split(":")) == 3
  assert int(open(f"/sys/bus/pci/devices/{d.address}/vendor").read(), 16) == d.vendor
  assert all(x.vendor == d.vendor for x in real_system.pci_devices(vendor=d.vendor))

class EchoModel(DeviceModel):
  """A toy kernel interface: ioctl 1 doubles the u32 it is given; its PCI function is 10de:2335."""
  pci = [PCIDevice("0000:05:00.0", 0x10DE, 0x2335, 0x030200)]
  def __init__(self): self.opened = []
  def open(self, path): self.opened.append(path); return path
  def ioctl(self, handle, name, request, arg):
    if request != 1: return super().ioctl(handle, name, request, arg)
    p = ffi.cast("uint32_t*", arg)
    p[0] *= 2
    return 0

def test_mock_system_routes_to_models():
  system = MockSystem()
  model = EchoModel()
  system.register("/dev/echo", model)
  fd = system.open("/dev/echo0")
  value = ffi.new("uint32_t*", 21)
  system.ioctl(fd, "ECHO", 1, value)
  assert value[0] == 42 and model.opened == ["/dev/echo0"]
  with pytest.raises(OSError, match="ioctl OTHER"): system.ioctl(fd, "OTHER", 2, value)
  with pytest.raises(OSError, match="no such device"): system.open("/dev/nonexistent")
  assert system.pci_devices(vendor=0x10DE) == EchoModel.pci and system.pci_devices(vendor=0x1002) == []
  mem = system.mmap(0, 4096, 3, 0x22, fd, 0)
  assert mem != 0
  system.close(fd)
  with pytest.raises(OSError, match="bad file descriptor"): system.ioctl(fd, "ECHO", 1, value)

def test_system_for_interfaces():
  assert system_for("") is real_system and isinstance(system_for("MOCK"), MockSystem)
  with pytest.raises(ValueError, match="'USBX'"): system_for("USBX")
  assert isinstance(real_system, System)

class VFIOModel(DeviceModel):
  """Just enough of vfio-pci for VFIODevice: one viable group, one device with a 4 KiB mappable BAR."""
  def __init__(self): self.calls = []
  def ioctl(self, handle, name, request, arg):
    from drivers import vfio
    from drivers.mock import NewFile
    assert request == vfio.IOCTLS[name], name
    self.calls.append(name)
    if name == "VFIO_GROUP_GET_STATUS": vfio.ffi.cast("struct vfio_group_status*", arg).flags = vfio.VFIO_GROUP_FLAGS_VIABLE
    elif name == "VFIO_GROUP_GET_DEVICE_FD": return NewFile(("device", vfio.ffi.string(vfio.ffi.cast("char*", arg)).decode()))
    elif name == "VFIO_DEVICE_GET_INFO": vfio.ffi.cast("struct vfio_device_info*", arg).num_regions = 1
    elif name == "VFIO_DEVICE_GET_REGION_INFO":
      info = vfio.ffi.cast("struct vfio_region_info*", arg)
      info.size, info.offset, info.flags = 4096, 0, vfio.VFIO_REGION_INFO_FLAG_MMAP
    return 0

def test_vfio_device_through_a_model():
  from drivers.vfio import VFIODevice
  system = MockSystem()
  model = VFIOModel()
  system.register("/dev/vfio/", model)
  dev = VFIODevice(system, "0000:05:00.0", 7)
  addr, size = dev.map_region(0)
  assert size == 4096 and addr != 0
  assert model.calls == ["VFIO_GET_API_VERSION", "VFIO_GROUP_GET_STATUS", "VFIO_GROUP_SET_CONTAINER", "VFIO_SET_IOMMU",
                         "VFIO_GROUP_GET_DEVICE_FD", "VFIO_DEVICE_GET_INFO", "VFIO_DEVICE_GET_REGION_INFO"]
  with pytest.raises(ValueError, match="1 regions"): dev.region(3)

def test_a_cores_cache_size_is_its_level_2_cache_from_sysfs(tmp_path):
  """The level-2 entry among a core's caches, whatever its index (here after two level-1 ones and before the shared
  level 3), in K or M; the default where there is no level 2 or no sysfs."""
  def caches(*entries) -> str:
    root = tmp_path / f"cpu{len(list(tmp_path.iterdir()))}"
    for i, (level, kind, size) in enumerate(entries):
      (d := root / f"index{i}").mkdir(parents=True)
      for name, text in (("level", level), ("type", kind), ("size", size)): (d / name).write_text(f"{text}\n")
    return str(root)
  l1 = [("1", "Data", "48K"), ("1", "Instruction", "32K")]
  assert core_cache_bytes(caches(*l1, ("2", "Unified", "1280K"), ("3", "Unified", "307200K"))) == 1280 * 1024
  assert core_cache_bytes(caches(*l1, ("2", "Unified", "2M"))) == 2 << 20
  assert core_cache_bytes(caches(*l1)) == DEFAULT_CORE_CACHE
  assert core_cache_bytes(str(tmp_path / "absent")) == DEFAULT_CORE_CACHE

@pytest.mark.skipif(not os.path.isdir(CPU_CACHES) or shutil.which("getconf") is None, reason="needs Linux's sysfs and getconf")
def test_this_machines_core_cache_matches_getconf():
  """glibc's getconf reads the level-2 size its own way (CPUID on x86)."""
  reported = subprocess.run(["getconf", "LEVEL2_CACHE_SIZE"], capture_output=True, text=True).stdout.strip()
  if not reported.isdigit() or int(reported) == 0: pytest.skip(f"getconf reports no level-2 size ({reported!r})")
  assert core_cache_bytes() == int(reported)
