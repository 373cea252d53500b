"""The SDMA engines of an RDNA3 GPU (SDMA 6.0, whose registers sit in GC 11.0.0's) as a driver without amdgpu.ko
starts their first queue: the QUEUE0 ring registers written directly (sdma_v6_0.c sdma_v6_0_gfx_resume_instance).
Its rules, from amdgpu's side:
- an engine runs only once the PSP loaded both SDMA firmware threads (psp_gfx_if.h SDMA_UCODE_TH0/TH1) and
  SDMA0_F32_CNTL has HALT and TH1_RESET clear (the unhalt comes before RB_ENABLE); the model's engines start halted;
- RB_ENABLE starts the ring: 4 << RB_SIZE bytes (RB_SIZE = log2 of the ring's dwords) at RB_BASE << 8, in the VMID
  of RB_CNTL.RB_VMID; the read pointer, in bytes, is written back to RB_RPTR_ADDR if RPTR_WRITEBACK_ENABLE is set;
- its doorbell must be enabled (QUEUE0_DOORBELL.ENABLE) at QUEUE0_DOORBELL_OFFSET (a byte offset in the doorbell
  BAR); a 64-bit doorbell write carries the write pointer in bytes (sdma_v6_0_ring_set_wptr).
A ring that breaks a rule is not started; `problems` says why."""
from __future__ import annotations
from typing import Callable
from drivers.mock.amd.gpu import GPU, Queue
from drivers.mock.amd.sdma import SDMAEngine

# gc_11_0_0_offset.h, SDMA0's QUEUE0 (BASE_IDX 0; SDMA1 is 0x600 further) and F32_CNTL (BASE_IDX 1; 0x20 further)
RB_CNTL, RB_BASE, RB_BASE_HI, RB_RPTR, RB_RPTR_HI, RB_WPTR, RB_WPTR_HI = 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86
RB_RPTR_ADDR_HI, RB_RPTR_ADDR_LO, IB_CNTL, DOORBELL, DOORBELL_OFFSET = 0x88, 0x89, 0x8A, 0x92, 0xAB
WPTR_POLL_ADDR_HI, WPTR_POLL_ADDR_LO, MINOR_PTR_UPDATE, F32_CNTL = 0xB2, 0xB3, 0xB5, 0x589A
QUEUE_REGS = (RB_CNTL, RB_BASE, RB_BASE_HI, RB_RPTR, RB_RPTR_HI, RB_WPTR, RB_WPTR_HI, RB_RPTR_ADDR_HI, RB_RPTR_ADDR_LO, IB_CNTL,
              DOORBELL, DOORBELL_OFFSET, WPTR_POLL_ADDR_HI, WPTR_POLL_ADDR_LO, MINOR_PTR_UPDATE)
ENGINE_STRIDE, F32_STRIDE, ENGINES = 0x600, 0x20, 2
# gc_11_0_0_sh_mask.h
RB_ENABLE, RPTR_WRITEBACK_ENABLE, RB_VMID_SHIFT = 1 << 0, 1 << 12, 24
DOORBELL_ENABLE, OFFSET_MASK = 1 << 28, 0x0FFFFFFC
HALT, TH1_RESET = 1 << 0, 1 << 13
SDMA_UCODE_TH0, SDMA_UCODE_TH1 = 71, 72  # psp_gfx_if.h

class SDMAQueues:
  """Like the MEC model: `gpu_of`, `doorbells`, `loaded`, `watch`; `firmware`: the two threads' images the model runs."""
  def __init__(self, gpu_of: Callable[[int], GPU], doorbells: memoryview, loaded: Callable[[int], bytes | None],
               firmware: tuple[bytes, bytes], watch: Callable[[Queue], None]):
    self.gpu_of, self.doorbells, self.loaded, self.firmware, self.watch = gpu_of, doorbells, loaded, firmware, watch
    self.regs = {**{(0, e * ENGINE_STRIDE + r): 0 for e in range(ENGINES) for r in QUEUE_REGS},
                 **{(1, F32_CNTL + e * F32_STRIDE): HALT | TH1_RESET for e in range(ENGINES)}}
    self.queues: dict[int, tuple[GPU, Queue]] = {}
    self.problems: list[str] = []

  def registers(self) -> list[tuple[int, int]]: return list(self.regs)
  def read(self, reg: tuple[int, int]) -> int: return self.regs[reg]

  def write(self, reg: tuple[int, int], value: int) -> None:
    seg, offset = reg
    engine = (offset - F32_CNTL) // F32_STRIDE if seg == 1 else offset // ENGINE_STRIDE
    r = lambda name: self.regs[(0, engine * ENGINE_STRIDE + name)]
    was = self.regs[reg]
    self.regs[reg] = value
    if seg != 0 or offset % ENGINE_STRIDE != RB_CNTL: return
    if was & RB_ENABLE and not value & RB_ENABLE and (entry := self.queues.pop(engine, None)) is not None: entry[0].remove_queue(entry[1])
    if was & RB_ENABLE or not value & RB_ENABLE: return
    if (problem := self.start_problem(engine, r)) is not None:
      self.problems.append(f"SDMA{engine} queue 0 not started: {problem}")
      self.regs[reg] = was
      return
    at = r(DOORBELL_OFFSET) & OFFSET_MASK
    gpu = self.gpu_of(value >> RB_VMID_SHIFT & 0xF)
    q = Queue(100 + engine, "sdma", (r(RB_BASE) | r(RB_BASE_HI) << 32) << 8, 4 << (value >> 1 & 0x1F), r(RB_RPTR_ADDR_LO) & ~3 | r(RB_RPTR_ADDR_HI) << 32,
              r(WPTR_POLL_ADDR_LO) & ~3 | r(WPTR_POLL_ADDR_HI) << 32, self.doorbells[at:at + 8].cast("Q"), at // 8,
              rptr_bits=64 if value & RPTR_WRITEBACK_ENABLE else 0)
    q.doorbell[0] = r(RB_WPTR) | r(RB_WPTR_HI) << 32
    self.watch(q)
    q.engine = SDMAEngine(gpu, q)
    self.queues[engine] = (gpu, q)
    gpu.add_queue(q)

  def start_problem(self, engine: int, r) -> str | None:
    if (self.loaded(SDMA_UCODE_TH0), self.loaded(SDMA_UCODE_TH1)) != self.firmware: return "the PSP has not loaded both SDMA firmware threads (SDMA_UCODE_TH0/TH1)"
    if (f32 := self.regs[(1, F32_CNTL + engine * F32_STRIDE)]) & (HALT | TH1_RESET): return f"SDMA{engine}_F32_CNTL {f32:#x} still has HALT or TH1_RESET set"
    if not r(DOORBELL) & DOORBELL_ENABLE: return "its doorbell is not enabled (QUEUE0_DOORBELL.ENABLE)"
    at = r(DOORBELL_OFFSET) & OFFSET_MASK
    if at % 8 or at + 8 > len(self.doorbells): return f"its doorbell at byte {at:#x} is not a 64-bit doorbell in the BAR"
    return None
