"""The ASM24xx bridge's model: bulk-only transport (CBW -> data -> CSW, USB-IF Mass Storage Bulk-Only Transport 1.0
sections 5.1-5.3 and 6.6: a command it can't run stalls the pipe until clear_halt), the vendor XDATA read/write
commands, and the TLP engine that forwards configuration and memory requests to the PCI functions behind it and
writes back the completion (register layout as tinygrad's usbgpu reverse-engineered it, extra/usbgpu and
runtime/support/usb.py; TLP formats, completion statuses and config addresses from the PCIe base spec 2.2). SCSI
WRITE(16) puts its data into the SRAM at XDATA 0xF000, and the functions behind the bridge reach two SRAM windows as
system memory at their bus addresses (usbgpu's ops_amd.py USBIface): `system_memory` answers their requests. Faults
for tests: a stalled endpoint, a transfer that errors, a link that is down."""
from __future__ import annotations
import errno, struct
import usb.core
from drivers import system
from drivers.mock.pci_function import PCIFunction, reserve
from drivers.mock.usb.backend import ModelDevice

CBW_SIGNATURE, CSW_SIGNATURE = 0x43425355, 0x53425355
READ_XDATA, WRITE_XDATA, XDATA_WINDOW = 0xE4, 0xE5, 0x500000
TLP_FMT_TYPE, TLP_BYTE_ENABLE, TLP_ADDRESS, TLP_ADDRESS_HI, TLP_DATA = 0xB210, 0xB217, 0xB218, 0xB21C, 0xB220
TLP_COMPLETION, TLP_COMPLETION_DATA, TLP_START, TLP_STATUS = 0xB22A, 0xB284, 0xB254, 0xB296
UNSUPPORTED_REQUEST = 0b001  # PCIe completion status
SCSI_WRITE16, SECTOR, SRAM_WRITE_MAX = 0x8A, 512, 0x10000
CSW_FAILED, CSW_PHASE_ERROR = 1, 2
# SRAM the functions reach as system memory: (XDATA address, bus address, bytes)
SRAM_WINDOWS = ((0xF000, 0x200000, 0x10000), (0xA000, 0x820000, 0x1000))

class ASM24Model(ModelDevice):
  vendor, product, release = 0x174C, 0x2464, 0x0101
  strings = ("ASMedia", "ASM2464PD (model)")
  endpoints = (0x81, 0x02)

  def __init__(self, functions: dict[tuple[int, int, int], PCIFunction] | None = None):
    super().__init__()
    self.functions = functions if functions is not None else {}   # (bus, device, function) behind the bridge
    self.xdata = reserve(0x20000)   # at a fixed address: the functions' memory requests reach the SRAM in it
    self.link_up = True
    self.gpu = None   # the GPU model behind it, where default_bridge made one
    self.fail_next: str | None = None   # "stall": the next bulk transfer stalls; "error": it fails with EIO
    self.reset()

  def reset(self) -> None:
    self.stalled: set[int] = set()
    self.mass_storage_reset()

  def mass_storage_reset(self) -> None:
    """BOT 3.1: ready for a new CBW; the endpoints' STALL conditions stay until cleared."""
    self.pending_in = b""      # the data stage then CSW the host reads next
    self.expect_out: tuple[bytes, int, int] | None = None  # (CDB, tag, length) of a command whose data stage comes next

  def clear_halt(self, ep: int) -> None: self.stalled.discard(ep)

  # ---- bulk-only transport
  def bulk_out(self, ep: int, data: bytes) -> None:
    self._check(ep)
    if self.expect_out is not None:   # the data stage of the command before (BOT 5.1: its length is the CBW's)
      (cdb, tag, length), self.expect_out = self.expect_out, None
      status = self.write_sram(cdb, data) if len(data) == length else CSW_PHASE_ERROR
      self.pending_in = struct.pack("<IIIB", CSW_SIGNATURE, tag, length - len(data) if len(data) <= length else 0, status)
      return
    if len(data) != 31 or struct.unpack_from("<I", data)[0] != CBW_SIGNATURE:  # not a valid CBW: stall (BOT 6.6.1)
      self.stalled.add(ep)
      raise usb.core.USBError("pipe stalled: invalid CBW", None, errno.EPIPE)
    _, tag, length, flags, _, cb_len, cdb = struct.unpack("<IIIBBB16s", data)
    if length and not flags & 0x80:
      self.expect_out = (cdb[:cb_len], tag, length)
      return
    data_in, status = self.execute(cdb[:cb_len])
    self.pending_in = data_in[:length] if flags & 0x80 else b""
    self.pending_in += struct.pack("<IIIB", CSW_SIGNATURE, tag, 0, status)

  def bulk_in(self, ep: int, n: int) -> bytes:
    self._check(ep)
    out, self.pending_in = self.pending_in[:n], self.pending_in[n:]
    return out

  def _check(self, ep: int) -> None:
    if ep in self.stalled: raise usb.core.USBError(f"endpoint {ep:#04x} is stalled", None, errno.EPIPE)
    if (fault := self.fail_next) is not None:
      self.fail_next = None
      if fault == "stall":
        self.stalled.add(ep)
        raise usb.core.USBError(f"endpoint {ep:#04x} stalled", None, errno.EPIPE)
      raise usb.core.USBError("transfer failed", None, errno.EIO)

  # ---- the vendor commands
  def execute(self, cdb: bytes) -> tuple[bytes, int]:
    """(data for the host, CSW status) of one command."""
    if cdb[0] == READ_XDATA:
      size, addr = cdb[1], self._xdata_address(cdb)
      return bytes(self.xdata[addr:addr + size]), 0
    if cdb[0] == WRITE_XDATA:
      addr = self._xdata_address(cdb)
      self.xdata[addr] = cdb[1]
      if addr == TLP_STATUS: self._status_written(cdb[1])
      return b"", 0
    return b"", 1  # an unknown command fails (CSW status 1)

  def write_sram(self, cdb: bytes, data: bytes) -> int:
    """A SCSI WRITE(16)'s data into the SRAM at XDATA 0xF000: whole sectors, as many as the CDB says. The model's
    reading of usbgpu, which always sends LBA 0 and at most SRAM_WRITE_MAX bytes: it ignores the LBA and refuses more.
    The CSW status."""
    if cdb[0] != SCSI_WRITE16: return CSW_FAILED
    sectors = struct.unpack_from(">I", cdb, 10)[0]
    if sectors * SECTOR != len(data) or len(data) > SRAM_WRITE_MAX: return CSW_FAILED
    self.xdata[0xF000:0xF000 + len(data)] = data
    return 0

  def system_memory(self, bus: int, size: int) -> int | None:
    """The host address of [bus, bus + size) in an SRAM window, as the functions' memory requests reach it; None
    outside them (the request would complete as Unsupported Request)."""
    for xdata, base, n in SRAM_WINDOWS:
      if base <= bus and bus + size <= base + n: return system.address_of(self.xdata) + xdata + bus - base
    return None

  @staticmethod
  def _xdata_address(cdb: bytes) -> int: return (cdb[2] << 16 | cdb[3] << 8 | cdb[4]) & 0x1FFFF

  def _status_written(self, value: int) -> None:
    if value == 0x04: self._send_tlp()             # start
    elif value & 0x01: self.xdata[TLP_STATUS] = 0  # clearing an error

  def _send_tlp(self) -> None:
    if not self.link_up:
      self.xdata[TLP_STATUS] = 0  # nothing comes back: the host's wait must time out
      return
    fmt_type, byte_enable = self.xdata[TLP_FMT_TYPE], self.xdata[TLP_BYTE_ENABLE]
    address = struct.unpack_from(">I", self.xdata, TLP_ADDRESS_HI)[0] << 32 | struct.unpack_from(">I", self.xdata, TLP_ADDRESS)[0]
    offset = (byte_enable & -byte_enable).bit_length() - 1  # the first enabled byte
    size = bin(byte_enable).count("1")
    value = struct.unpack_from(">I", self.xdata, TLP_DATA)[0] >> (8 * offset)
    status, data = 0, None
    if fmt_type & 0xBE == 0x04:   # configuration type 0 or 1 (PCIe 2.2.7): bus 31:24, device 23:19, function 18:16
      fn = self.functions.get((address >> 24, address >> 19 & 0x1F, address >> 16 & 7))
      if fn is None: status = UNSUPPORTED_REQUEST
      elif fmt_type & 0x40: fn.config_write(address & 0xFFF, value & ((1 << 8 * size) - 1), size)
      else: data = fn.config_read((address & 0xFFF) + offset, size)
    elif fmt_type & 0xDF in (0x00, 0x40):   # memory read / write, 3 or 4 dwords of header
      hit = next(((f, d) for f in self.functions.values() if (d := f.decode(address + offset, size)) is not None), None)
      if hit is None: status = UNSUPPORTED_REQUEST
      else:
        fn, (bar, at) = hit
        if fmt_type & 0x40:
          fn.write(bar, at, (value & ((1 << 8 * size) - 1)).to_bytes(size, "little"))
          self.xdata[TLP_STATUS] = 0x2
          return  # posted: no completion
        data = int.from_bytes(fn.read(bar, at, size), "little")
    else: status = UNSUPPORTED_REQUEST
    byte_count = 4 if fmt_type & 0xBE == 0x04 else size  # a configuration completion always counts 4 bytes
    struct.pack_into(">H", self.xdata, TLP_COMPLETION, status << 13 | byte_count)
    self.xdata[TLP_COMPLETION_DATA] = int(data is not None)
    if data is not None: struct.pack_into(">I", self.xdata, TLP_DATA, data << (8 * offset))
    self.xdata[TLP_STATUS] = 0x2

def default_bridge() -> ASM24Model:
  """A bridge with an RDNA3 GPU behind its downstream port (bus 1, device 0), as drivers/mock/amd/pci_gpu.py models it,
  whose system memory is the bridge's SRAM."""
  from drivers.mock.amd.pci_gpu import AMDPCIGPU
  gpu = AMDPCIGPU()
  bridge = ASM24Model({(1, 0, 0): gpu.function})
  gpu.hub.system_memory = bridge.system_memory
  bridge.gpu = gpu
  return bridge
