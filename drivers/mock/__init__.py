"""The MOCK interface: a System whose device files are software models. A vendor model registers the paths it
serves (`register(prefix, model)`); opening such a path gives a file descriptor whose ioctls and mmaps go to the
model, which also plays the GPU's command processor. Everything else behaves like a missing device. The vendor
models in this package are registered on first use."""
from __future__ import annotations
import errno, functools, importlib, os, re
from dataclasses import dataclass
from typing import Any
from drivers.system import PCIDevice, System, mmap_anonymous

@dataclass(frozen=True)
class NewFile:
  """What a model's ioctl returns to hand out a new file descriptor (e.g. VFIO_GROUP_GET_DEVICE_FD)."""
  handle: Any

class DeviceModel:
  """A model of one kernel interface (and the hardware behind it). Subclasses override what their driver uses.
  `system` is the MockSystem it is registered with (to resolve file descriptors passed inside ioctl arguments)."""
  pci: list[PCIDevice] = []
  system: Any = None
  def file_of(self, fd: int) -> Any:
    """The handle of this model's file behind descriptor `fd`, or None (closed, another model's, not a mock file)."""
    model, handle = self.system.files.get(fd, (None, None)) if self.system is not None else (None, None)
    return handle if model is self else None
  def open(self, path: str) -> Any: return path
  def close(self, handle: Any) -> None: pass
  def ioctl(self, handle: Any, name: str, request: int, arg) -> int: raise OSError(errno.ENOTTY, f"ioctl {name} ({request:#x}): not modelled")
  def mmap(self, handle: Any, addr: int, size: int, prot: int, flags: int, offset: int) -> int: return mmap_anonymous(size)
  def munmap(self, handle: Any, addr: int, size: int) -> None: pass  # the model owns the memory it mapped
  def toolchain(self, arch: str) -> tuple[Any, Any] | None: return None
  def read_text(self, path: str) -> str: raise OSError(errno.ENOENT, f"{path}: not modelled")
  def read_bytes(self, path: str) -> bytes: raise OSError(errno.ENOENT, f"{path}: not modelled")
  def listdir(self, path: str) -> list[str]: return []
  def library(self, ffi) -> Any: raise OSError(errno.ENOENT, f"{type(self).__name__} models no library")

# path prefix (a device file, a sysfs directory, or a shared library's name) -> "module:Class" of the built-in vendor
# models; one instance of a class serves all its prefixes (amdkfd answers /dev/kfd, the render nodes and sysfs)
_KFD = "drivers.mock.amd.kfd:KFDModel"
BUILTIN_MODELS = {"/dev/nvidia": "drivers.mock.nv.model:NVModel", "libcuda": "drivers.mock.nv.libcuda:LibCUDAModel",
                  "/dev/kfd": _KFD, "/dev/dri/renderD": _KFD, "/sys/devices/virtual/kfd": _KFD, "/sys/class/drm": _KFD,
                  "/dev/kgsl": "drivers.mock.qcom.kgsl:KGSLModel"}

class MockSystem(System):
  def __init__(self, usb_bridge: bool = True):
    """usb_bridge: whether the machine has the default modelled USB bridge (with a GPU behind it)."""
    super().__init__()
    self.usb_bridge = usb_bridge
    self.models: dict[str, DeviceModel] = {}
    self.files: dict[int, tuple[DeviceModel, Any]] = {}
    self.mappings: dict[int, tuple[DeviceModel, Any]] = {}  # address -> the model (and file) that mapped it
    self._next_fd = 1 << 20  # far from real descriptors
    self.usb_devices: list = []  # modelled USB devices (drivers/mock/usb); a bridge with a GPU behind it by default
    self.pci_functions: dict = {}  # PCI address -> a PCIFunction model (drivers/mock/pci_function.py) with no driver bound
  def register(self, prefix: str, model: DeviceModel) -> None:
    self.models[prefix] = model
    model.system = self
  def _model(self, path: str) -> DeviceModel:
    for prefix, model in self.models.items():
      if path.startswith(prefix): return model
    for prefix, where in BUILTIN_MODELS.items():
      if path.startswith(prefix):
        module, cls = where.split(":")
        model = getattr(importlib.import_module(module), cls)()
        for other, same in BUILTIN_MODELS.items():
          if same == where and other not in self.models: self.register(other, model)
        return model
    raise OSError(errno.ENOENT, f"can't open {path}: no such device in the mock system")
  def server_of(self, path: str) -> object: return self._model(path)  # a model registered in its place serves anew
  def toolchain(self, vendor_path: str, arch: str):
    return self._model(vendor_path).toolchain(arch)
  def library(self, ffi, name: str):
    return self._model(f"lib{name}").library(ffi)
  def _open(self, path: str, flags: int = os.O_RDWR) -> int:
    model = self._model(path)
    fd, self._next_fd = self._next_fd, self._next_fd + 1
    self.files[fd] = (model, model.open(path))
    return fd
  def _close(self, fd: int) -> None:
    model, handle = self.files.pop(fd)
    model.close(handle)
  def _file(self, fd: int) -> tuple[DeviceModel, Any]:
    if fd not in self.files: raise OSError(errno.EBADF, f"bad file descriptor {fd}")
    return self.files[fd]
  def _ioctl(self, fd: int, name: str, request: int, arg) -> int:
    model, handle = self._file(fd)
    ret = model.ioctl(handle, name, request, arg)
    if isinstance(ret, NewFile):
      new_fd, self._next_fd = self._next_fd, self._next_fd + 1
      self.files[new_fd] = (model, ret.handle)
      return new_fd
    return ret
  def _mmap(self, addr: int, size: int, prot: int, flags: int, fd: int, offset: int) -> int:
    if fd == -1: return mmap_anonymous(size, prot)
    model, handle = self._file(fd)
    at = model.mmap(handle, addr, size, prot, flags, offset)
    self.mappings[at] = (model, handle)
    return at
  def _munmap(self, addr: int, size: int) -> None:
    if (mapped := self.mappings.pop(addr, None)) is None: return super()._munmap(addr, size)
    mapped[0].munmap(mapped[1], addr, size)
  def usb_backend(self):
    from drivers.mock.usb.asm24 import default_bridge
    from drivers.mock.usb.backend import ModelBackend
    if not self.usb_devices and self.usb_bridge: self.usb_devices.append(default_bridge())
    return ModelBackend(self.usb_devices)
  def pci_devices(self, vendor: int | None = None) -> list[PCIDevice]:
    bare = [PCIDevice(a, f.config_read(0, 2), f.config_read(2, 2), f.config_read(8, 4) >> 8) for a, f in self.pci_functions.items()]
    return [d for d in [d for m in self.models.values() for d in m.pci] + bare if vendor is None or d.vendor == vendor]
  def pci_config_read(self, address: str, offset: int, size: int = 4) -> int: return self._function(address).config_read(offset, size)
  def pci_config_write(self, address: str, offset: int, value: int, size: int = 4) -> None: self._function(address).config_write(offset, value, size)
  def map_bar(self, address: str, i: int):
    """As a sysfs resource file mapped: a memory BAR's loads and stores reach its memory, a register BAR's the model."""
    from drivers.pci import MappedBar
    from drivers.mock.pci_function import ModelBar
    fn = self._function(address)
    return ModelBar(fn, i) if fn.bars[i].registers is not None else MappedBar(fn.bars[i].memory)
  def _function(self, address: str):
    if (f := self.pci_functions.get(address)) is None: raise OSError(errno.ENOENT, f"/sys/bus/pci/devices/{address}: no such function in the model")
    return f
  def pci_driver(self, address: str) -> str: return ""  # the models' functions are bound to no kernel driver
  def read_text(self, path: str) -> str:
    if (m := re.fullmatch(r"/sys/bus/pci/devices/([\w:.]+)/resource", path)) and m[1] in self.pci_functions:
      return self.pci_functions[m[1]].resource_file()
    try: model = self._model(path)
    except OSError: raise OSError(errno.ENOENT, f"{path}: not modelled") from None
    return model.read_text(path)
  def listdir(self, path: str) -> list[str]:
    try: return self._model(path.rstrip("/") + "/").listdir(path)
    except OSError: return []
  def _file_model(self, path: str) -> DeviceModel | None:
    """The model registered for `path`'s folder, if any (files elsewhere are the real ones: a test's own folder)."""
    return next((m for prefix, m in self.models.items() if path.startswith(prefix)), None)
  def read_bytes(self, path: str) -> bytes:
    return super().read_bytes(path) if (model := self._file_model(path)) is None else model.read_bytes(path)
  def is_file(self, path: str) -> bool:
    if (model := self._file_model(path)) is None: return super().is_file(path)
    try: model.read_bytes(path)
    except OSError: return False
    return True

mock_system = MockSystem()

def _with_amd_firmware(system: MockSystem) -> MockSystem:
  """`system` with linux-firmware's amdgpu files (the model's) where AMD_FIRMWARE_DIR points."""
  from ir.switches import AMD_FIRMWARE_DIR
  from drivers.mock.amd.firmware_files import FirmwareFolder
  system.register(AMD_FIRMWARE_DIR.value.rstrip("/") + "/", FirmwareFolder(AMD_FIRMWARE_DIR.value))
  return system

def new_bare_pci_machine() -> MockSystem:
  """A machine whose PCI bus has an RDNA3 GPU that no kernel driver is bound to, and linux-firmware's files for it."""
  from drivers.mock.amd.pci_gpu import enumerated_gpu
  system = MockSystem(usb_bridge=False)
  system.pci_functions["0000:03:00.0"] = enumerated_gpu()
  return _with_amd_firmware(system)

def new_usb_machine() -> MockSystem:
  """A machine with an ASM24xx bridge on its USB bus, an RDNA3 GPU behind it, and linux-firmware's files for it."""
  return _with_amd_firmware(MockSystem(usb_bridge=True))

bare_pci_machine = functools.cache(new_bare_pci_machine)  # DEV=MOCKPCI+...'s machine
usb_machine = functools.cache(new_usb_machine)            # DEV=MOCKUSB+...'s machine
