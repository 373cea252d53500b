"""USB Mass Storage Bulk-Only Transport (the USB-IF "Mass Storage Class Bulk-Only Transport" 1.0 spec): a command
block wrapper (CBW) on the bulk OUT endpoint, the data stage if any, then a command status wrapper (CSW) on bulk IN.
Each command is one call; a transfer error, a stalled endpoint or a CSW that doesn't match its CBW raises USBError
naming the command and the stage. After a stall or a timeout the interface gets the spec's reset recovery (5.3.4:
Bulk-Only Mass Storage Reset, then both endpoints' halts cleared), so the next command runs."""
from __future__ import annotations
import errno, itertools, struct
import usb.core

CBW_SIGNATURE, CSW_SIGNATURE = 0x43425355, 0x53425355  # "USBC", "USBS" (spec sections 5.1, 5.2)
CBW_FORMAT, CSW_FORMAT = "<IIIBBB16s", "<IIIB"
CBW_DATA_IN = 0x80
CSW_PASSED, CSW_FAILED, CSW_PHASE_ERROR = 0, 1, 2
CLASS_INTERFACE_OUT, MASS_STORAGE_RESET = 0x21, 0xFF  # the class request's bmRequestType and bRequest (spec 3.1)

class USBError(RuntimeError):
  """A USB transfer failed; the message names the command and the stage (CBW, data, CSW)."""

class BulkOnly:
  """Commands to one bulk-only interface of an open pyusb device."""
  def __init__(self, dev, out_ep: int = 0x02, in_ep: int = 0x81, timeout_ms: int = 2000, interface: int = 0):
    self.dev, self.out_ep, self.in_ep, self.timeout_ms, self.interface = dev, out_ep, in_ep, timeout_ms, interface
    self.tags = itertools.count(1)

  def command(self, cdb: bytes, data_in: int = 0, data_out: bytes = b"", what: str = "") -> bytes:
    """Run one command (`cdb`, at most 16 bytes); returns the `data_in` bytes it read."""
    assert len(cdb) <= 16 and not (data_in and data_out), "a command reads or writes, not both"
    what = what or f"SCSI command {cdb[0]:#04x}"
    tag = next(self.tags)
    cbw = struct.pack(CBW_FORMAT, CBW_SIGNATURE, tag, data_in or len(data_out), CBW_DATA_IN if data_in else 0, 0, len(cdb), cdb)
    self._transfer("CBW", what, lambda: self.dev.write(self.out_ep, cbw, self.timeout_ms))
    data = b""
    if data_out: self._transfer("data OUT", what, lambda: self.dev.write(self.out_ep, data_out, self.timeout_ms))
    if data_in: data = bytes(self._transfer("data IN", what, lambda: self.dev.read(self.in_ep, data_in, self.timeout_ms)))
    csw = bytes(self._transfer("CSW", what, lambda: self.dev.read(self.in_ep, 13, self.timeout_ms)))
    if len(csw) != 13: raise USBError(f"{what}: a {len(csw)}-byte CSW (13 expected)")
    sig, rtag, residue, status = struct.unpack(CSW_FORMAT, csw)
    if sig != CSW_SIGNATURE or rtag != tag: raise USBError(f"{what}: CSW signature {sig:#x} tag {rtag} for CBW tag {tag}")
    if status != CSW_PASSED: raise USBError(f"{what}: the device reports {'phase error' if status == CSW_PHASE_ERROR else 'failure'} (CSW status {status})")
    if data_in and (len(data) != data_in or residue): raise USBError(f"{what}: read {len(data)} of {data_in} bytes (residue {residue})")
    return data

  def _transfer(self, stage: str, what: str, fn):
    try: return fn()
    except usb.core.USBTimeoutError: raise USBError(f"{what}: {stage} timed out after {self.timeout_ms} ms{self.reset_recovery()}") from None
    except usb.core.USBError as e: raise USBError(f"{what}: {stage} failed: {e}{self.reset_recovery() if e.errno == errno.EPIPE else ''}") from None

  def reset_recovery(self) -> str:
    """The spec's reset recovery (5.3.4), after which the device takes a new CBW; what to add to the error."""
    try:
      self.dev.ctrl_transfer(CLASS_INTERFACE_OUT, MASS_STORAGE_RESET, 0, self.interface, None, self.timeout_ms)
      for ep in (self.in_ep, self.out_ep): self.dev.clear_halt(ep)
    except usb.core.USBError as e: return f" (and the reset recovery failed: {e})"
    return " (the interface was reset: Bulk-Only reset recovery)"
