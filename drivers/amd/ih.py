"""The interrupt handler ring without amdgpu.ko (OSSSYS 6.0): ring 0 set up in ih_v6_0.c's order (ih_v6_0_irq_init:
interrupts off, ih_v6_0_enable_ring, ih_v6_0_toggle_interrupts), its vectors polled rather than waited for (no MSI),
decoded as amdgpu_ih_decode_iv_helper does, and the GPU's faults among them named as amdgpu's handlers name them
(gmc_v11_0_process_interrupt, gfx_v11_0_handle_priv_fault). Register offsets and fields: osssys_6_0_0_offset.h and
_sh_mask.h; client and source ids: soc15_ih_clientid.h (soc21), irqsrcs_gfx_11_0_0.h, irqsrcs_vmc_1_0.h."""
from __future__ import annotations
from dataclasses import dataclass
from typing import Callable
import numpy as np

RING_BYTES, ENTRY_BYTES = 256 << 10, 32   # amdgpu_ih.h IH_RING_SIZE; a vector is 8 dwords
# osssys_6_0_0_offset.h (BASE_IDX 0)
RB_CNTL, RB_BASE, RB_BASE_HI, RB_RPTR, RB_WPTR, RB_WPTR_ADDR_HI, RB_WPTR_ADDR_LO, DOORBELL_RPTR = 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87
# IH_RB_CNTL as ih_v6_0_rb_cntl leaves it: MC_SPACE 4 (an MC address), WPTR_OVERFLOW_ENABLE, WPTR_WRITEBACK_ENABLE, MC_SNOOP;
# RPTR_REARM only with MSI, which tg doesn't use
RB_ENABLE, WPTR_WRITEBACK_ENABLE, WPTR_OVERFLOW_ENABLE, ENABLE_INTR, MC_SNOOP, WPTR_OVERFLOW_CLEAR = 1 << 0, 1 << 8, 1 << 16, 1 << 17, 1 << 20, 1 << 31
MC_SPACE_MC, RB_OVERFLOW, OFFSET_MASK = 4 << 28, 1 << 0, 0x3FFFC
# soc21 clients and their sources
CLIENT_GFX, CLIENT_VMC, CLIENT_GRBM_CP = 0x0A, 0x12, 0x14
VM_FAULT = 0x00  # UTCL2_1_0__SRCID__FAULT from GFX, VMC_1_0__SRCID__VM_FAULT from VMC
CP_ERRORS = {0xB7: "a bad packet opcode (CP_BAD_OPCODE_ERROR)", 0xB8: "a privileged register access (CP_PRIV_REG_FAULT)",
             0xB9: "a privileged instruction (CP_PRIV_INSTR_FAULT)"}
SQ_INTERRUPT_ID = 0xEF

@dataclass(frozen=True)
class Vector:
  """One interrupt vector (amdgpu_iv_entry's fields tg uses)."""
  client: int
  source: int
  ring: int
  vmid: int
  data: tuple[int, int, int, int]

def decode(words) -> Vector:
  w = [int(x) for x in words]
  return Vector(w[0] & 0xFF, w[0] >> 8 & 0xFF, w[0] >> 16 & 0xFF, w[0] >> 24 & 0xF, tuple(w[4:8]))

def fault(v: Vector) -> str | None:
  """What went wrong, for a vector that reports a fault; None for any other."""
  if (v.client, v.source) in ((CLIENT_GFX, VM_FAULT), (CLIENT_VMC, VM_FAULT)):
    address = v.data[0] << 12 | (v.data[1] & 0xF) << 44
    return f"GPU memory fault at {address:#x} (VMID {v.vmid}, {'MM' if v.client == CLIENT_VMC else 'GFX'} hub)"
  where = f"ME {v.ring >> 2 & 3} pipe {v.ring & 3} queue {v.ring >> 4 & 7}"
  if v.client == CLIENT_GRBM_CP and v.source in CP_ERRORS: return f"the command processor met {CP_ERRORS[v.source]} on {where}"
  if v.client == CLIENT_GRBM_CP and v.source == SQ_INTERRUPT_ID: return f"a shader raised an error interrupt (SQ_INTERRUPT_ID) on {where}"
  return None

class IHRing:
  """Ring 0 in CPU-visible video memory at MC address `ring_mc` (its CPU view `ring`, uint32), the write pointer's copy
  at `wptr_mc` (its view `wptr`); `fetch(view)` makes a view show what the GPU wrote (behind the USB bridge)."""
  def __init__(self, read: Callable[[int], int], write: Callable[[int, int], None], ring_mc: int, ring: np.ndarray, wptr_mc: int, wptr: np.ndarray,
               fetch: Callable[[np.ndarray], None]):
    self.read, self.write, self.ring, self.wptr, self.fetch = read, write, ring, wptr, fetch
    self.rptr, self.mask = 0, ring.nbytes - 1
    rb_size = (ring.nbytes // 4).bit_length() - 1  # log2 of the ring's dwords
    self.cntl = MC_SPACE_MC | WPTR_OVERFLOW_ENABLE | rb_size << 1 | WPTR_WRITEBACK_ENABLE | MC_SNOOP
    write(RB_CNTL, 0)  # ih_v6_0_toggle_ring_interrupts(false): the ring off, both pointers at 0
    write(RB_RPTR, 0)
    write(RB_WPTR, 0)
    write(RB_BASE, ring_mc >> 8 & 0xFFFFFFFF)
    write(RB_BASE_HI, ring_mc >> 40 & 0xFF)
    write(RB_CNTL, self.cntl | WPTR_OVERFLOW_CLEAR)
    write(RB_WPTR_ADDR_LO, wptr_mc & 0xFFFFFFFF)
    write(RB_WPTR_ADDR_HI, wptr_mc >> 32 & 0xFFFF)
    write(RB_WPTR, 0)
    write(RB_RPTR, 0)
    write(DOORBELL_RPTR, 0)  # no doorbell: the read pointer goes back through IH_RB_RPTR (ih_v6_0_set_rptr)
    self.cntl |= RB_ENABLE   # ih_v6_0_toggle_ring_interrupts(true): enable, pulse WPTR_OVERFLOW_CLEAR, then ENABLE_INTR
    write(RB_CNTL, self.cntl)
    write(RB_CNTL, self.cntl | WPTR_OVERFLOW_CLEAR)
    self.cntl |= ENABLE_INTR
    write(RB_CNTL, self.cntl)

  def clear_overflow(self) -> None:
    self.write(RB_CNTL, self.cntl | WPTR_OVERFLOW_CLEAR)
    self.write(RB_CNTL, self.cntl)

  def vectors(self) -> list[Vector]:
    """The vectors the GPU wrote since the last call (ih_v6_0_get_wptr, then amdgpu_ih_process's loop); after an
    overflow, from the oldest one the GPU didn't overwrite."""
    self.fetch(self.wptr)
    wptr = int(self.wptr[0])
    if wptr & RB_OVERFLOW and (wptr := self.read(RB_WPTR)) & RB_OVERFLOW:
      self.rptr = (wptr & OFFSET_MASK) + ENTRY_BYTES & self.mask
      self.clear_overflow()
    wptr &= self.mask & OFFSET_MASK & ~(ENTRY_BYTES - 1)  # whole vectors: a pointer between them must not be chased forever
    out = []
    while self.rptr != wptr:
      entry = self.ring[self.rptr // 4:self.rptr // 4 + ENTRY_BYTES // 4]
      self.fetch(entry)
      out.append(decode(entry))
      self.rptr = (self.rptr + ENTRY_BYTES) & self.mask
    if out: self.write(RB_RPTR, self.rptr)
    return out
