"""PCI functions as drivers reach them without a kernel driver of their own: configuration space and BARs. Two
ways in: the OS's sysfs files (`config`, and `resourceN` mapped into the process) through the system seam, or a
USB-to-PCIe bridge's TLPs (drivers/usb/asm24.py BridgedFunction). BAR sizing as the PCI Local Bus spec 3.0 section
6.2.5.1 describes it."""
from __future__ import annotations
import struct
from typing import Protocol

BAR0 = 0x10

class Bar(Protocol):
  """A mapped BAR: 32-bit reads and writes at byte offsets from its start, and bulk writes (a multiple of 4 bytes)."""
  def read32(self, offset: int) -> int: ...
  def write32(self, offset: int, value: int) -> None: ...
  def write(self, offset: int, data: bytes) -> None: ...

class PCIAccess(Protocol):
  """One PCI function: its configuration space, and its BARs mapped (placed and decoding where they weren't)."""
  def config_read(self, offset: int, size: int = 4) -> int: ...
  def config_write(self, offset: int, value: int, size: int = 4) -> None: ...
  def bar(self, i: int) -> Bar: ...

def bar_size(pci: PCIAccess, i: int) -> tuple[int, bool]:
  """(size, 64-bit) of BAR i, by writing all ones and reading back the mask; the BAR is restored."""
  at = BAR0 + 4 * i
  old = pci.config_read(at)
  wide = old & 0x6 == 0x4
  pci.config_write(at, 0xFFFFFFFF)
  mask = pci.config_read(at)
  if wide:
    old_hi = pci.config_read(at + 4)
    pci.config_write(at + 4, 0xFFFFFFFF)
    mask |= pci.config_read(at + 4) << 32
    pci.config_write(at + 4, old_hi)
  pci.config_write(at, old)
  return (~(mask & ~0xF) + 1) & ((1 << (64 if wide else 32)) - 1), wide

class Window(Protocol):
  """A memory BAR as the CPU uses it: `view`, its bytes; `sync(ranges)` makes the CPU's stores to the (offset, size)
  ranges reach the BAR, before the device is told to look; `fetch(part)` makes a part of `view` (a numpy view into it)
  show what the device wrote there."""
  view: memoryview
  def sync(self, ranges: dict[int, int]) -> None: ...
  def fetch(self, part) -> None: ...

class MappedBar:
  """A BAR mapped into this process (a sysfs resourceN file): loads and stores to its memory, which reach it as they
  are made (so `sync` and `fetch` have nothing to do)."""
  def __init__(self, view: memoryview): self.view = view
  def read32(self, offset: int) -> int: return struct.unpack_from("<I", self.view, offset)[0]
  def write32(self, offset: int, value: int) -> None: struct.pack_into("<I", self.view, offset, value)
  def write(self, offset: int, data: bytes) -> None: self.view[offset:offset + len(data)] = data
  def sync(self, ranges: dict[int, int]) -> None: pass
  def fetch(self, part) -> None: pass

class SysfsFunction:
  """The function at `address` ("0000:03:00.0") through the system's sysfs files."""
  def __init__(self, system, address: str): self.system, self.address = system, address
  def config_read(self, offset: int, size: int = 4) -> int: return self.system.pci_config_read(self.address, offset, size)
  def config_write(self, offset: int, value: int, size: int = 4) -> None: self.system.pci_config_write(self.address, offset, value, size)
  def bar(self, i: int) -> Bar: return self.system.map_bar(self.address, i)
