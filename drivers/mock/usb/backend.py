"""A pyusb backend (usb.backend.IBackend) whose devices are models: descriptors, string descriptors through control
transfers, and bulk endpoints that call the model. Descriptor layouts and standard requests are the USB 2.0 spec's
(chapter 9: GET_DESCRIPTOR, descriptor types); what pyusb asks of a backend is its IBackend interface."""
from __future__ import annotations
import array, errno
from dataclasses import dataclass, field
import usb.backend, usb.core, usb.util

GET_DESCRIPTOR, DESC_STRING = 6, 3    # USB 2.0 table 9-4 and 9-5
CLASS_INTERFACE_OUT, MASS_STORAGE_RESET = 0x21, 0xFF  # Bulk-Only Transport 1.0 section 3.1
LANGID_EN_US = 0x0409
BULK = 2                               # bmAttributes transfer type

@dataclass
class Descriptor:
  """Any descriptor: pyusb reads its fields as attributes."""
  fields: dict
  def __getattr__(self, name):
    try: return self.fields[name]
    except KeyError: raise AttributeError(name) from None

class ModelDevice:
  """What a modelled device answers; subclasses implement the bulk endpoints. `claims`: interface -> the open handle
  that claimed it (one at a time, as libusb_claim_interface answers LIBUSB_ERROR_BUSY to a second)."""
  vendor, product, release = 0, 0, 0x0100
  strings: tuple[str, ...] = ()          # string descriptors 1, 2, ...: manufacturer, product
  endpoints: tuple[int, ...] = ()        # bulk endpoint addresses of interface 0
  def __init__(self): self.claims: dict[int, object] = {}
  def bulk_out(self, ep: int, data: bytes) -> None: raise NotImplementedError
  def bulk_in(self, ep: int, n: int) -> bytes: raise NotImplementedError
  def reset(self) -> None: pass
  def mass_storage_reset(self) -> None: pass

@dataclass(eq=False)
class _Handle:
  device: ModelDevice
  config: int = 0
  claimed: set = field(default_factory=set)

class ModelBackend(usb.backend.IBackend):
  """pyusb's view of `devices` (each on bus 1 at its index + 1)."""
  def __init__(self, devices: list[ModelDevice]): self.devices = devices

  def enumerate_devices(self): yield from self.devices
  def get_device_descriptor(self, dev):
    i = self.devices.index(dev)
    return Descriptor(dict(bLength=18, bDescriptorType=1, bcdUSB=0x0320, bDeviceClass=0, bDeviceSubClass=0, bDeviceProtocol=0,
                           bMaxPacketSize0=9, idVendor=dev.vendor, idProduct=dev.product, bcdDevice=dev.release, iManufacturer=1 if dev.strings else 0,
                           iProduct=2 if len(dev.strings) > 1 else 0, iSerialNumber=0, bNumConfigurations=1, address=i + 1, bus=1,
                           port_number=i + 1, port_numbers=(i + 1,), speed=usb.util.SPEED_SUPER))
  def get_configuration_descriptor(self, dev, config):
    if config != 0: raise IndexError(config)
    return Descriptor(dict(bLength=9, bDescriptorType=2, wTotalLength=9 + 9 + 7 * len(dev.endpoints), bNumInterfaces=1, bConfigurationValue=1,
                           iConfiguration=0, bmAttributes=0x80, bMaxPower=224, extra_descriptors=[]))
  def get_interface_descriptor(self, dev, intf, alt, config):
    if (intf, alt, config) != (0, 0, 0): raise IndexError((intf, alt, config))
    return Descriptor(dict(bLength=9, bDescriptorType=4, bInterfaceNumber=0, bAlternateSetting=0, bNumEndpoints=len(dev.endpoints),
                           bInterfaceClass=8, bInterfaceSubClass=6, bInterfaceProtocol=0x50, iInterface=0, extra_descriptors=[]))  # mass storage, SCSI, BOT
  def get_endpoint_descriptor(self, dev, ep, intf, alt, config):
    return Descriptor(dict(bLength=7, bDescriptorType=5, bEndpointAddress=dev.endpoints[ep], bmAttributes=BULK, wMaxPacketSize=1024,
                           bInterval=0, bRefresh=0, bSynchAddress=0, extra_descriptors=[]))

  def open_device(self, dev): return _Handle(dev)
  def close_device(self, dev_handle):
    for intf in list(dev_handle.claimed): self.release_interface(dev_handle, intf)
  def set_configuration(self, dev_handle, config_value): dev_handle.config = config_value
  def get_configuration(self, dev_handle): return dev_handle.config
  def set_interface_altsetting(self, dev_handle, intf, altsetting): pass
  def claim_interface(self, dev_handle, intf):
    if dev_handle.device.claims.setdefault(intf, dev_handle) is not dev_handle:
      raise usb.core.USBError(f"interface {intf} is claimed by another handle", None, errno.EBUSY)
    dev_handle.claimed.add(intf)
  def release_interface(self, dev_handle, intf):
    dev_handle.claimed.discard(intf)
    if dev_handle.device.claims.get(intf) is dev_handle: del dev_handle.device.claims[intf]
  def is_kernel_driver_active(self, dev_handle, intf): return False
  def detach_kernel_driver(self, dev_handle, intf): pass
  def attach_kernel_driver(self, dev_handle, intf): pass
  def reset_device(self, dev_handle): dev_handle.device.reset()
  def clear_halt(self, dev_handle, ep): dev_handle.device.clear_halt(ep)

  def bulk_write(self, dev_handle, ep, intf, data, timeout):
    self._claimed(dev_handle, intf)
    dev_handle.device.bulk_out(ep, bytes(data))
    return len(data)
  def bulk_read(self, dev_handle, ep, intf, buff, timeout):
    self._claimed(dev_handle, intf)
    data = dev_handle.device.bulk_in(ep | 0x80, len(buff))
    buff[:len(data)] = array.array("B", data)  # pyusb reads into an array('B')
    return len(data)
  def ctrl_transfer(self, dev_handle, bmRequestType, bRequest, wValue, wIndex, data, timeout):
    if bmRequestType & 0x80 and bRequest == GET_DESCRIPTOR and wValue >> 8 == DESC_STRING:
      index = wValue & 0xFF
      if index == 0: text = bytes([4, DESC_STRING]) + LANGID_EN_US.to_bytes(2, "little")  # the languages: US English
      else:
        chars = dev_handle.device.strings[index - 1].encode("utf-16-le")
        text = bytes([2 + len(chars), DESC_STRING]) + chars
      n = min(len(text), len(data))
      data[:n] = array.array("B", text[:n])
      return n
    if (bmRequestType, bRequest) == (CLASS_INTERFACE_OUT, MASS_STORAGE_RESET):
      dev_handle.device.mass_storage_reset()
      return 0
    raise usb.core.USBError(f"control request {bRequest:#x} is not modelled", None, errno.EPIPE)

  @staticmethod
  def _claimed(dev_handle, intf) -> None:
    if intf not in dev_handle.claimed: raise usb.core.USBError(f"interface {intf} is not claimed", None, errno.EBUSY)
