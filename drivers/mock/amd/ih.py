"""The interrupt handler (IH, OSSSYS 6.0) of an RDNA3 GPU: the ring of 32-byte interrupt vectors the GPU writes for
the driver to read, as amdgpu sets up ring 0 (ih_v6_0.c ih_v6_0_enable_ring, ih_v6_0_toggle_ring_interrupts; register
offsets and fields from osssys_6_0_0_offset.h / _sh_mask.h). Its rules:
- vectors are written only while IH_RB_CNTL.RB_ENABLE is set;
- the ring is 4 << RB_SIZE bytes at IH_RB_BASE/BASE_HI << 8, a memory-controller address (MC_SPACE 4); the model has
  no GART, so it reaches only the frame buffer aperture, video memory at [FB_BASE, FB_BASE + size), and writes
  nothing where the ring lies elsewhere (`problems` says so);
- the write pointer (a byte offset, IH_RB_WPTR.OFFSET) goes to IH_RB_WPTR_ADDR_LO/HI after each vector when
  WPTR_WRITEBACK_ENABLE is set (amdgpu reads that copy: ih_v6_0_get_wptr); the driver hands back space by writing the
  read pointer to IH_RB_RPTR (ih_v6_0_set_rptr without a doorbell);
- a vector that finds the ring full overwrites the oldest and sets IH_RB_WPTR.RB_OVERFLOW when WPTR_OVERFLOW_ENABLE is
  set (ih_v6_0_get_wptr then skips the read pointer past it); a WPTR_OVERFLOW_CLEAR write clears the bit. Without
  WPTR_OVERFLOW_ENABLE the model drops the vector (its own choice);
- a vector's dwords are amdgpu_ih_decode_iv_helper's: client [7:0], source [15:8], ring [23:16], VMID [27:24] of dword
  0, a 48-bit timestamp in dwords 1-2, PASID in dword 3, four words of source data."""
from __future__ import annotations
import struct, time
from typing import Callable

# osssys_6_0_0_offset.h (BASE_IDX 0)
RB_CNTL, RB_BASE, RB_BASE_HI, RB_RPTR, RB_WPTR, RB_WPTR_ADDR_HI, RB_WPTR_ADDR_LO, DOORBELL_RPTR = 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87
# osssys_6_0_0_sh_mask.h: IH_RB_CNTL, IH_RB_WPTR, IH_DOORBELL_RPTR
RB_ENABLE, RB_SIZE_SHIFT, WPTR_WRITEBACK_ENABLE, WPTR_OVERFLOW_ENABLE, MC_SPACE_SHIFT, WPTR_OVERFLOW_CLEAR = 1 << 0, 1, 1 << 8, 1 << 16, 28, 1 << 31
RB_OVERFLOW, OFFSET_MASK, DOORBELL_ENABLE = 1 << 0, 0x3FFFC, 1 << 28
MC_SPACE_MC = 4  # ih_v6_0_rb_cntl: MC_SPACE 4 unless the ring is a bus address (2)
ENTRY_BYTES = 32

class IHModel:
  """`read_memory`/`write_memory(video memory offset, ...)` reach video memory; `fb_base`/`vram_bytes` place the frame
  buffer aperture in the memory controller's space."""
  def __init__(self, write_memory: Callable[[int, bytes], None], fb_base: int, vram_bytes: int):
    self.write_memory, self.fb_base, self.vram_bytes = write_memory, fb_base, vram_bytes
    self.regs = dict.fromkeys((RB_CNTL, RB_BASE, RB_BASE_HI, RB_RPTR, RB_WPTR, RB_WPTR_ADDR_HI, RB_WPTR_ADDR_LO, DOORBELL_RPTR), 0)
    self.problems: list[str] = []
    self.dropped = 0  # vectors the ring had no place for

  def read(self, reg: int) -> int: return self.regs[reg]
  def write(self, reg: int, value: int) -> None:
    if reg == RB_CNTL and value & WPTR_OVERFLOW_CLEAR: self.regs[RB_WPTR] &= ~RB_OVERFLOW
    if reg == DOORBELL_RPTR and value & DOORBELL_ENABLE: self.problems.append("IH_DOORBELL_RPTR.ENABLE: a read pointer through the doorbell is not modelled")
    self.regs[reg] = value & OFFSET_MASK if reg in (RB_RPTR, RB_WPTR) else value

  def _video_memory(self, mc: int, size: int, what: str) -> int | None:
    """The video memory offset of MC address `mc`, or None (and a problem) outside the frame buffer aperture."""
    if self.fb_base <= mc and mc + size <= self.fb_base + self.vram_bytes: return mc - self.fb_base
    self.problems.append(f"the IH {what} at MC address {mc:#x} is outside the frame buffer aperture [{self.fb_base:#x}, {self.fb_base + self.vram_bytes:#x})")
    return None

  def interrupt(self, client: int, source: int, ring: int = 0, vmid: int = 0, data: tuple[int, ...] = ()) -> None:
    """The GPU raises one interrupt: its vector goes into the ring, if the ring takes it."""
    cntl = self.regs[RB_CNTL]
    if not cntl & RB_ENABLE:
      self.dropped += 1
      return
    size = 4 << (cntl >> RB_SIZE_SHIFT & 0x1F)
    if cntl >> MC_SPACE_SHIFT & 7 != MC_SPACE_MC:
      self.problems.append(f"IH_RB_CNTL.MC_SPACE {cntl >> MC_SPACE_SHIFT & 7}: the model reaches the ring only as an MC address (4)")
      return
    base = (self.regs[RB_BASE] | (self.regs[RB_BASE_HI] & 0xFF) << 32) << 8
    if (ring_at := self._video_memory(base, size, "ring")) is None: return
    wptr = self.regs[RB_WPTR] & OFFSET_MASK & (size - 1)
    if (wptr + ENTRY_BYTES) % size == self.regs[RB_RPTR] & (size - 1):  # full: the next vector would meet the read pointer
      if not cntl & WPTR_OVERFLOW_ENABLE:
        self.dropped += 1
        return
      self.regs[RB_WPTR] |= RB_OVERFLOW
    stamp = int(time.monotonic() * 1e8) & (1 << 48) - 1  # the GPU's 100 MHz clock
    words = (client & 0xFF | (source & 0xFF) << 8 | (ring & 0xFF) << 16 | (vmid & 0xF) << 24, stamp & 0xFFFFFFFF, stamp >> 32, 0,
             *(tuple(data) + (0, 0, 0, 0))[:4])
    self.write_memory(ring_at + wptr, struct.pack("<8I", *words))
    self.regs[RB_WPTR] = (wptr + ENTRY_BYTES) % size | self.regs[RB_WPTR] & RB_OVERFLOW
    if cntl & WPTR_WRITEBACK_ENABLE:
      address = (self.regs[RB_WPTR_ADDR_HI] & 0xFFFF) << 32 | self.regs[RB_WPTR_ADDR_LO] & ~3
      if (at := self._video_memory(address, 4, "write pointer copy")) is not None: self.write_memory(at, struct.pack("<I", self.regs[RB_WPTR]))
