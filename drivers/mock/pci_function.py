"""A PCI(e) function's model: its 4 KiB configuration space with the type-0 header (vendor, device, class, command
and memory BARs that size themselves as the PCI Local Bus spec 3.0 section 6.2.5.1 says: writing all ones reads
back the size mask) and the memory behind its BARs."""
from __future__ import annotations
import struct

VENDOR_ID, DEVICE_ID, COMMAND, REVISION_CLASS, HEADER_TYPE, BAR0 = 0x00, 0x02, 0x04, 0x08, 0x0E, 0x10
COMMAND_MEMORY = 1 << 1  # memory space enable: BARs decode only with it set
BAR_64BIT_PREFETCHABLE = 0xC
PAGE = 4096  # a request of up to 4 bytes at a 4-byte-aligned dword never crosses one

class PCIFunction:
  """`bars`: the size of each 64-bit prefetchable memory BAR (BAR0/1, BAR2/3, ...)."""
  def __init__(self, vendor: int, device: int, class_code: int, revision: int = 0, bars: tuple[int, ...] = ()):
    self.config = bytearray(4096)
    struct.pack_into("<HH", self.config, VENDOR_ID, vendor, device)
    struct.pack_into("<I", self.config, REVISION_CLASS, class_code << 8 | revision)
    self.bar_sizes = bars
    self.pages: dict[tuple[int, int], bytearray] = {}  # (BAR, page): the BARs' memory, made as it is written (a GPU's is large)
    for i in range(len(bars)): struct.pack_into("<I", self.config, BAR0 + 8 * i, BAR_64BIT_PREFETCHABLE)

  def config_read(self, offset: int, size: int) -> int: return int.from_bytes(self.config[offset:offset + size], "little")

  def config_write(self, offset: int, value: int, size: int) -> None:
    for k in range(size):  # byte by byte, as byte enables select them
      at, byte = offset + k, value >> (8 * k) & 0xFF
      if at < 4 or REVISION_CLASS <= at < REVISION_CLASS + 4 or at == HEADER_TYPE: continue  # read-only registers
      bar = (at - BAR0) // 4
      if 0 <= bar < 2 * len(self.bar_sizes):
        size_mask = ~(self.bar_sizes[bar // 2] - 1) & 0xFFFFFFFFFFFFFFFF
        word = bar // 2 * 8 + BAR0
        old = int.from_bytes(self.config[word:word + 8], "little")
        shift = 8 * (at - word)
        new = (old & ~(0xFF << shift) | byte << shift) & size_mask | BAR_64BIT_PREFETCHABLE  # low bits: flags, read-only
        self.config[word:word + 8] = new.to_bytes(8, "little")
      else: self.config[at] = byte

  def bar_address(self, i: int) -> int: return int.from_bytes(self.config[BAR0 + 8 * i:BAR0 + 8 * i + 8], "little") & ~0xF

  def decode(self, address: int, size: int) -> tuple[int, int] | None:
    """(BAR, offset in it) that a memory request of `size` bytes at `address` reaches, or None."""
    if not self.config_read(COMMAND, 2) & COMMAND_MEMORY: return None
    for i, n in enumerate(self.bar_sizes):
      base = self.bar_address(i)
      if base and base <= address and address + size <= base + n: return i, address - base
    return None

  def read(self, bar: int, offset: int, size: int) -> bytes:
    page = self.pages.get((bar, offset // PAGE))
    return bytes(size) if page is None else bytes(page[offset % PAGE:offset % PAGE + size])
  def write(self, bar: int, offset: int, data: bytes) -> None:
    page = self.pages.setdefault((bar, offset // PAGE), bytearray(PAGE))
    page[offset % PAGE:offset % PAGE + len(data)] = data
