"""A PCI(e) function's model: its 4 KiB configuration space with the type-0 header (vendor, device, class, command
and memory BARs that size themselves as the PCI Local Bus spec 3.0 section 6.2.5.1 says: writing all ones reads
back the size mask; bits 3:0 are read-only type flags) and what is behind each BAR: memory, or registers a device
model answers."""
from __future__ import annotations
import struct
from dataclasses import dataclass, field
from typing import Protocol
from drivers import system

VENDOR_ID, DEVICE_ID, COMMAND, REVISION_CLASS, HEADER_TYPE, BAR0 = 0x00, 0x02, 0x04, 0x08, 0x0E, 0x10
COMMAND_MEMORY = 1 << 1  # memory space enable: BARs decode only with it set
BAR_64BIT, BAR_PREFETCHABLE = 0x4, 0x8
MAP_NORESERVE = 0x4000

def reserve(size: int) -> memoryview:
  """`size` bytes of zeroed memory, backed only where touched (a model GPU's video memory is many GiB)."""
  at = system._check(int(system.ffi.cast("uintptr_t", system.libc.mmap(system.ffi.NULL, size, system.PROT_READ | system.PROT_WRITE,
                                                                      system.MAP_PRIVATE | system.MAP_ANONYMOUS | MAP_NORESERVE, -1, 0))), f"mmap({size} bytes)")
  return system.memoryview_at(at, size)

class Registers(Protocol):
  """What answers the requests to a register BAR (offsets from the BAR's start)."""
  def read(self, offset: int, size: int) -> bytes: ...
  def write(self, offset: int, data: bytes) -> None: ...

@dataclass
class Bar:
  """A BAR and what is behind it: registers a device model answers, or memory (its own, or a view of the device's,
  such as a GPU's video memory aperture) that loads and stores reach directly."""
  size: int
  wide: bool = True                  # 64 bits (two BAR registers), prefetchable memory; else 32-bit, not prefetchable
  registers: Registers | None = None
  memory: memoryview | None = field(default=None, repr=False)  # None with no registers: fresh memory of `size` bytes
  def __post_init__(self):
    if self.registers is None and self.memory is None: self.memory = reserve(self.size)
  @property
  def flags(self) -> int: return BAR_64BIT | BAR_PREFETCHABLE if self.wide else 0

class PCIFunction:
  """`bars`: BAR index -> Bar (a 64-bit BAR takes index and index + 1)."""
  def __init__(self, vendor: int, device: int, class_code: int, revision: int = 0, bars: dict[int, Bar] | None = None):
    self.config = bytearray(4096)
    struct.pack_into("<HH", self.config, VENDOR_ID, vendor, device)
    struct.pack_into("<I", self.config, REVISION_CLASS, class_code << 8 | revision)
    self.bars = bars or {}
    for i, bar in self.bars.items(): struct.pack_into("<I", self.config, BAR0 + 4 * i, bar.flags)

  def config_read(self, offset: int, size: int = 4) -> int: return int.from_bytes(self.config[offset:offset + size], "little")

  def config_write(self, offset: int, value: int, size: int = 4) -> None:
    for k in range(size):  # byte by byte, as byte enables select them
      at, byte = offset + k, value >> (8 * k) & 0xFF
      if at < 4 or REVISION_CLASS <= at < REVISION_CLASS + 4 or at == HEADER_TYPE: continue  # read-only registers
      if (hit := self._bar_at(at)) is None:
        self.config[at] = byte
        continue
      i, bar = hit
      start, width = BAR0 + 4 * i, 8 if bar.wide else 4
      old = int.from_bytes(self.config[start:start + width], "little")
      shift = 8 * (at - start)
      new = (old & ~(0xFF << shift) | byte << shift) & ~(bar.size - 1) & ((1 << 8 * width) - 1) | bar.flags
      self.config[start:start + width] = new.to_bytes(width, "little")

  def _bar_at(self, at: int) -> tuple[int, Bar] | None:
    """The BAR whose register(s) hold config byte `at`."""
    for i, bar in self.bars.items():
      if BAR0 + 4 * i <= at < BAR0 + 4 * i + (8 if bar.wide else 4): return i, bar
    return None

  def bar_address(self, i: int) -> int:
    width = 8 if self.bars[i].wide else 4
    return int.from_bytes(self.config[BAR0 + 4 * i:BAR0 + 4 * i + width], "little") & ~0xF

  def decode(self, address: int, size: int) -> tuple[int, int] | None:
    """(BAR, offset in it) that a memory request of `size` bytes at `address` reaches, or None."""
    if not self.config_read(COMMAND, 2) & COMMAND_MEMORY: return None
    for i, bar in self.bars.items():
      base = self.bar_address(i)
      if base and base <= address and address + size <= base + bar.size: return i, address - base
    return None

  def read(self, bar: int, offset: int, size: int) -> bytes:
    b = self.bars[bar]
    return b.registers.read(offset, size) if b.registers is not None else bytes(b.memory[offset:offset + size])
  def write(self, bar: int, offset: int, data: bytes) -> None:
    b = self.bars[bar]
    if b.registers is not None: return b.registers.write(offset, data)
    b.memory[offset:offset + len(data)] = data

  def resource_file(self) -> str:
    """The sysfs `resource` file: "start end flags" of each of the six BARs (a 64-bit BAR's upper register reads as unused)."""
    rows = []
    for i in range(6):
      bar = self.bars.get(i)
      start = self.bar_address(i) if bar is not None else 0
      rows.append(f"{start:#018x} {start + bar.size - 1 if bar is not None and start else 0:#018x} {0x200 | bar.flags if bar is not None else 0:#018x}")
    return "\n".join(rows) + "\n"

class ModelBar:
  """A register BAR i of a modelled function as a mapped BAR (drivers/pci.py Bar): accesses go to the function's
  model, so register side effects (an index/data window) happen as on hardware. (A memory BAR maps as memory.)"""
  def __init__(self, function: PCIFunction, i: int): self.function, self.i = function, i
  def read32(self, offset: int) -> int: return int.from_bytes(self.function.read(self.i, offset, 4), "little")
  def write32(self, offset: int, value: int) -> None: self.function.write(self.i, offset, value.to_bytes(4, "little"))
  def write(self, offset: int, data: bytes) -> None:
    at = 0
    while at < len(data):  # as a CPU's stores reach registers: a dword at a time
      self.function.write(self.i, offset + at, data[at:at + 4])
      at += 4
