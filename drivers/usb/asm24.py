"""The ASMedia ASM2464/ASM2462 USB-to-PCIe bridge with its stock firmware: vendor SCSI commands read and write the
bridge's XDATA (its 8051's memory-mapped registers), and a TLP engine in XDATA sends one PCIe request at a time
(configuration and memory reads and writes of up to 4 bytes) to the device behind it. The command and register
facts are the ones tinygrad's usbgpu work reverse-engineered (extra/usbgpu, tinygrad/runtime/support/usb.py); the
TLP formats and completion statuses are the PCIe base spec's."""
from __future__ import annotations
import struct, time
from dataclasses import dataclass
import usb.core, usb.util
from drivers.pci import BAR0
from drivers.usb.bulk_only import BulkOnly

# (vendor, product) of the bridges: ASMedia's own, and tinygrad's usbgpu firmware patch
BRIDGE_IDS = ((0x174C, 0x2464), (0x174C, 0x2463), (0x174C, 0x2462), (0xADD1, 0x0001))
READ_XDATA, WRITE_XDATA = 0xE4, 0xE5   # vendor CDB opcodes
XDATA_WINDOW = 0x500000                # the CDB addresses XDATA through this window (17 address bits)
# the TLP engine's registers (XDATA)
TLP_FMT_TYPE, TLP_BYTE_ENABLE, TLP_ADDRESS, TLP_ADDRESS_HI, TLP_DATA = 0xB210, 0xB217, 0xB218, 0xB21C, 0xB220
TLP_COMPLETION, TLP_COMPLETION_DATA, TLP_START, TLP_STATUS = 0xB22A, 0xB284, 0xB254, 0xB296
TLP_DONE, TLP_ERROR = 0x2, 0x1          # TLP_STATUS bits
# TLP registers that keep what was last written until the next write: a byte already holding its value isn't sent again
# (the engine itself writes TLP_DATA, with a read's completion data)
HELD_REGISTERS = frozenset([TLP_FMT_TYPE, TLP_BYTE_ENABLE, *range(TLP_ADDRESS, TLP_ADDRESS + 8), *range(TLP_DATA, TLP_DATA + 4)])
SCSI_WRITE16 = 0x8A                     # SCSI WRITE(16): the data lands in the bridge's SRAM, from its start
SECTOR, SRAM_WRITE_MAX = 512, 0x10000   # the bridge takes whole sectors, at most 64 KiB a command
# XDATA writes tinygrad's usbgpu makes after each SCSI WRITE (their meaning isn't documented anywhere public)
AFTER_SRAM_WRITE = ((0x171, b"\xff\xff\xff"), (0xCE6E, b"\x00\x00"))
# the XDATA writes tinygrad's usbgpu makes before its first TLP (their meaning isn't documented anywhere public)
INIT_WRITES = ((0x54B, b" "), (0x54E, b"\x04"), (0x5A8, b"\x02"), (0x5F8, b"\x04"), (0x7EC, b"\x01\x00\x00\x00"), (0xC422, b"\x02"), (0x0, b"\x33"))
# PCIe TLP fmt/type bytes (PCIe base spec 2.2.1): configuration type 0/1, memory with a 64-bit address
CFG_READ, CFG_WRITE, MEM_READ64, MEM_WRITE64 = 0x04, 0x44, 0x20, 0x60
COMPLETION_STATUS = {0b001: "Unsupported Request", 0b010: "Configuration Request Retry Status", 0b100: "Completer Abort"}
TLP_RETRIES, TLP_TIMEOUT_S = 10, 1.0
COMMAND, COMMAND_MEMORY = 0x04, 1 << 1   # PCI configuration header: the command register, memory space enable
BAR_WINDOW = 0x10_0000_0000  # 64-bit BARs no firmware placed go here, BAR i at BAR_WINDOW + i * 64 GiB

@dataclass(frozen=True)
class SRAMWindow:
  """Part of the bridge's SRAM that PCIe devices behind it reach as system memory: at `xdata` for the bridge's 8051
  (and so for XDATA reads and writes), at `bus` for the devices' memory requests."""
  xdata: int
  bus: int
  size: int

# where the stock firmware's SRAM appears (tinygrad's usbgpu, runtime/ops_amd.py USBIface): SCSI WRITE's buffer, and the
# page usbgpu keeps its signals in; XDATA reads reach both below 0x20000
COPY_WINDOW = SRAMWindow(0xF000, 0x200000, SRAM_WRITE_MAX)
SIGNAL_WINDOW = SRAMWindow(0xA000, 0x820000, 0x1000)

class PCIeError(RuntimeError):
  """A PCIe request through the bridge failed: the completion's status, or no completion at all."""

def find_bridges(backend=None) -> list:
  """The ASM24xx bridges pyusb sees (through `backend`: None for libusb, or a model's)."""
  return list(usb.core.find(find_all=True, backend=backend, custom_match=lambda d: (d.idVendor, d.idProduct) in BRIDGE_IDS))

class ASM24Bridge:
  """One bridge, opened: its bulk-only interface claimed and the bridge set up for TLPs."""
  def __init__(self, dev, timeout_ms: int = 2000):
    self.dev = dev
    if dev.is_kernel_driver_active(0): dev.detach_kernel_driver(0)  # usb-storage binds the bridge as a disk
    dev.set_configuration()
    usb.util.claim_interface(dev, 0)
    self.bot = BulkOnly(dev, timeout_ms=timeout_ms)
    self.held: dict[int, int] = {}  # HELD_REGISTERS' bytes as last written
    for addr, data in INIT_WRITES: self.write(addr, data)

  @property
  def product(self) -> str: return usb.util.get_string(self.dev, self.dev.iProduct) or ""
  @property
  def firmware(self) -> str:
    """The firmware release as the device descriptor's bcdDevice says it."""
    return f"{self.dev.bcdDevice >> 8:x}.{self.dev.bcdDevice & 0xFF:02x}"

  # ---- XDATA
  def read(self, addr: int, n: int) -> bytes:
    out = b""
    for at in range(addr, addr + n, 0xFF):  # the CDB's length byte: at most 255 bytes a command
      size = min(0xFF, addr + n - at)
      x = (at & 0x1FFFF) | XDATA_WINDOW
      out += self.bot.command(struct.pack(">BBBHB", READ_XDATA, size, x >> 16, x & 0xFFFF, 0), data_in=size, what=f"XDATA read of {size} bytes at {at:#x}")
    return out

  def write(self, addr: int, data: bytes) -> None:
    for i, value in enumerate(data):
      at = addr + i
      if at in HELD_REGISTERS and self.held.get(at) == value: continue
      self.held.pop(at, None)  # unknown until the write is known to have landed
      x = (at & 0x1FFFF) | XDATA_WINDOW
      self.bot.command(struct.pack(">BBBHB", WRITE_XDATA, value, x >> 16, x & 0xFFFF, 0), what=f"XDATA write at {at:#x}")
      if at in HELD_REGISTERS: self.held[at] = value

  def sram_write(self, data: bytes) -> None:
    """`data` (at most SRAM_WRITE_MAX bytes) into the SRAM at COPY_WINDOW's start, in one SCSI WRITE(16)."""
    if len(data) > SRAM_WRITE_MAX: raise ValueError(f"a SCSI WRITE moves at most {SRAM_WRITE_MAX} bytes into the bridge's SRAM, not {len(data)}")
    padded = data + bytes(-len(data) % SECTOR)
    self.bot.command(struct.pack(">BBQIBB", SCSI_WRITE16, 0, 0, len(padded) // SECTOR, 0, 0), data_out=padded, what=f"SCSI WRITE of {len(padded)} bytes to SRAM")
    for addr, value in AFTER_SRAM_WRITE: self.write(addr, value)

  # ---- PCIe requests
  def request(self, fmt_type: int, address: int, value: int | None = None, size: int = 4) -> int | None:
    """One TLP of `size` (1..4) bytes at `address`; a read's value. Writes to memory are posted (no completion)."""
    offset = address & 3
    if not 0 < size <= 4 - offset: raise ValueError(f"a TLP moves 1 to 4 bytes within one dword, not {size} at {address:#x}")
    if value is not None: self.write(TLP_DATA, struct.pack(">I", value << (8 * offset)))
    self.write(TLP_ADDRESS, struct.pack(">I", address & 0xFFFFFFFC))
    self.write(TLP_ADDRESS_HI, struct.pack(">I", address >> 32))
    self.write(TLP_BYTE_ENABLE, bytes([((1 << size) - 1) << offset]))
    self.write(TLP_FMT_TYPE, bytes([fmt_type]))
    for attempt in range(TLP_RETRIES):
      self.write(TLP_START, b"\x0f")
      self.write(TLP_STATUS, b"\x04")
      if fmt_type == MEM_WRITE64: return None
      status = self._wait_for_completion(fmt_type, address)
      if status & TLP_DONE: break
      self.write(TLP_STATUS, bytes([TLP_ERROR]))  # clear the error and send it again
    else: raise PCIeError(f"TLP {fmt_type:#04x} at {address:#x}: no completion after {TLP_RETRIES} tries")
    header = struct.unpack(">H", self.read(TLP_COMPLETION, 2))[0]
    if (status := header >> 13 & 7): raise PCIeError(f"TLP {fmt_type:#04x} at {address:#x}: {COMPLETION_STATUS.get(status, f'completion status {status:#05b}')}")
    if value is not None: return None
    for at in range(TLP_DATA, TLP_DATA + 4): self.held.pop(at, None)  # the completion's data is there now
    return struct.unpack(">I", self.read(TLP_DATA, 4))[0] >> (8 * offset) & ((1 << (8 * size)) - 1)

  def _wait_for_completion(self, fmt_type: int, address: int) -> int:
    deadline = time.perf_counter() + TLP_TIMEOUT_S
    while not (status := self.read(TLP_STATUS, 1)[0]) & (TLP_DONE | TLP_ERROR):
      if time.perf_counter() > deadline: raise PCIeError(f"TLP {fmt_type:#04x} at {address:#x}: no completion in {TLP_TIMEOUT_S} s (is the PCIe link up?)")
    return status

  def config_read(self, bus: int, dev: int, fn: int, offset: int, size: int = 4) -> int:
    return self.request(CFG_READ | (bus > 0), _config_address(bus, dev, fn, offset), None, size)
  def config_write(self, bus: int, dev: int, fn: int, offset: int, value: int, size: int = 4) -> None:
    self.request(CFG_WRITE | (bus > 0), _config_address(bus, dev, fn, offset), value, size)
  def mem_read(self, address: int, size: int = 4) -> int: return self.request(MEM_READ64, address, None, size)
  def mem_write(self, address: int, value: int, size: int = 4) -> None: self.request(MEM_WRITE64, address, value, size)

class BridgedBar:
  """A BAR of the function behind a bridge: memory TLPs at its address."""
  def __init__(self, bridge: ASM24Bridge, base: int): self.bridge, self.base = bridge, base
  def read32(self, offset: int) -> int: return self.bridge.mem_read(self.base + offset)
  def write32(self, offset: int, value: int) -> None: self.bridge.mem_write(self.base + offset, value)
  def write(self, offset: int, data: bytes) -> None:  # a memory write TLP per dword (the bridge's DMA path isn't used yet)
    for at in range(0, len(data), 4): self.bridge.mem_write(self.base + offset + at, int.from_bytes(data[at:at + 4], "little"))

class BridgedFunction:
  """The PCI function at bus:dev.fn behind a bridge (a drivers/pci.py PCIAccess). Nothing enumerated it, so
  `bar` places a BAR that has no address (each in its own 64 GiB slot of BAR_WINDOW) and turns memory decoding on."""
  def __init__(self, bridge: ASM24Bridge, bus: int = 1, dev: int = 0, fn: int = 0): self.bridge, self.where = bridge, (bus, dev, fn)
  def config_read(self, offset: int, size: int = 4) -> int: return self.bridge.config_read(*self.where, offset, size)
  def config_write(self, offset: int, value: int, size: int = 4) -> None: self.bridge.config_write(*self.where, offset, value, size)
  def bar(self, i: int) -> BridgedBar:
    at = BAR0 + 4 * i
    low = self.config_read(at)
    wide = low & 0x6 == 0x4
    base = (low & ~0xF) | (self.config_read(at + 4) << 32 if wide else 0)
    if not base:
      base = BAR_WINDOW + (i << 36) if wide else 0xC000_0000 + (i << 24)  # a 32-bit BAR below 4 GiB
      self.config_write(at, base & 0xFFFFFFFF)
      if wide: self.config_write(at + 4, base >> 32)
    self.config_write(COMMAND, self.config_read(COMMAND, 2) | COMMAND_MEMORY, 2)
    return BridgedBar(self.bridge, base)

def _config_address(bus: int, dev: int, fn: int, offset: int) -> int:
  """A configuration request's address: bus, device, function and register (PCIe base spec 2.2.6.2)."""
  if not (0 <= bus < 256 and 0 <= dev < 32 and 0 <= fn < 8 and 0 <= offset < 4096): raise ValueError(f"no config register {bus}:{dev}.{fn} +{offset:#x}")
  return bus << 24 | dev << 19 | fn << 16 | offset
