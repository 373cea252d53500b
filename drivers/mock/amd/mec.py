"""The compute micro engine (MEC) of an RDNA3 GPU as a driver without amdgpu.ko maps a queue on it: the HQD registers
of the queue GRBM_GFX_CNTL selects, written directly (gfx_v11_0.c gfx_v11_0_kiq_init_register's order, ACTIVE
last). Its rules, from amdgpu's side:
- compute queues live on ME 1 (MEC 0; ME 0 is the graphics engine: gfx_v11_0_compute_ring_init sets me = mec + 1);
- a queue runs only once the RLC booted (gfx_v11_0_hw_init waits for its autoload before gfx_v11_0_cp_resume);
- a pipe runs only once the PSP loaded the RS64 MEC image and that pipe's stack (psp_gfx_if.h RS64_MEC,
  RS64_MEC_P<n>_STACK; gfx_v11_0_init_microcode), its program counter starts where the firmware's header says
  (gfx_v11_0_config_gfx_rs64: CP_MEC_RS64_PRGRM_CNTR_START), and CP_MEC_RS64_CNTL has MEC_HALT and the pipe's
  reset clear and its ACTIVE bit set (gfx_v11_0_cp_compute_enable); the model's MEC starts halted;
- the queue's doorbell must be enabled and inside CP_MEC_DOORBELL_RANGE_LOWER..UPPER (byte offsets in the doorbell
  BAR: gfx_v11_0_cp_set_doorbell_range); a 64-bit doorbell write carries the write pointer in dwords;
- the ring holds 2 << QUEUE_SIZE dwords at PQ_BASE << 8; the CP reports its 32-bit read pointer at
  PQ_RPTR_REPORT_ADDR (gfx_v11_0_ring_get_rptr_compute: "gfx11 hardware is 32bit rptr");
- DEQUEUE_REQUEST takes an active queue off the pipe.
A queue that breaks a rule is not started; `problems` says why (a real MEC would sit idle)."""
from __future__ import annotations
from typing import Callable
from drivers.mock.amd.gpu import GPU, Queue
from drivers.mock.amd.pm4 import PM4Engine

# gc_11_0_0_offset.h: (BASE_IDX, offset)
GRBM_GFX_CNTL, RS64_CNTL, PRGRM_CNTR_START, PRGRM_CNTR_START_HI = (1, 0x900), (1, 0x2904), (1, 0x2900), (1, 0x2938)
DOORBELL_RANGE_LOWER, DOORBELL_RANGE_UPPER, PQ_WPTR_POLL_CNTL, PQ_STATUS = (0, 0x1DFC), (0, 0x1DFD), (0, 0x1E23), (0, 0x1E58)
HQD_FIRST, HQD_LAST = 0x1FA9, 0x1FE0  # CP_MQD_BASE_ADDR .. CP_HQD_PQ_WPTR_HI: one bank per (ME, pipe, queue)
MQD_BASE_ADDR, HQD_ACTIVE, HQD_VMID, PQ_BASE, PQ_BASE_HI = 0x1FA9, 0x1FAB, 0x1FAC, 0x1FB1, 0x1FB2
PQ_RPTR, RPTR_REPORT_ADDR, RPTR_REPORT_ADDR_HI, WPTR_POLL_ADDR, WPTR_POLL_ADDR_HI = 0x1FB3, 0x1FB4, 0x1FB5, 0x1FB6, 0x1FB7
PQ_DOORBELL_CONTROL, PQ_CONTROL, DEQUEUE_REQUEST, EOP_BASE_ADDR, PQ_WPTR_LO, PQ_WPTR_HI = 0x1FB8, 0x1FBA, 0x1FC1, 0x1FCE, 0x1FDF, 0x1FE0
# gc_11_0_0_sh_mask.h
MEC_HALT, PIPE_RESET_SHIFT, PIPE_ACTIVE_SHIFT = 1 << 30, 16, 26
DOORBELL_EN, DOORBELL_OFFSET = 1 << 30, 0x0FFFFFFC
# psp_gfx_if.h enum psp_gfx_fw_type
RS64_MEC, RS64_MEC_P0_STACK = 89, 94
COMPUTE_ME = 1

class MEC:
  """`gpu_of(vmid)`: the model's memory view of a VMID; `doorbells`: the doorbell BAR's memory; `loaded(fw_type)`:
  the image the PSP loaded of a type (None if none); `firmware`: the RS64 MEC image and stack the model's MEC runs,
  and `start`: its program counter start (the file header's ucode_start_addr); `watch(queue)`: sets up the checks of
  a new queue's doorbell (the HDP rule); `rlc_booted()`: whether the RLC runs."""
  def __init__(self, gpu_of: Callable[[int], GPU], doorbells: memoryview, loaded: Callable[[int], bytes | None],
               firmware: tuple[bytes, bytes], start: int, watch: Callable[[Queue], None], rlc_booted: Callable[[], bool]):
    self.gpu_of, self.doorbells, self.loaded, self.firmware, self.start, self.watch = gpu_of, doorbells, loaded, firmware, start, watch
    self.rlc_booted = rlc_booted
    self.regs = {GRBM_GFX_CNTL: 0, RS64_CNTL: MEC_HALT | 0xF << PIPE_RESET_SHIFT, DOORBELL_RANGE_LOWER: 0, DOORBELL_RANGE_UPPER: 0,
                 PQ_WPTR_POLL_CNTL: 0, PQ_STATUS: 0}
    self.program_counter: dict[int, int] = {}        # pipe -> its PRGRM_CNTR_START (64-bit, in dwords)
    self.banks: dict[tuple[int, int, int], dict[int, int]] = {}
    self.queues: dict[tuple[int, int, int], tuple[GPU, Queue]] = {}
    self.problems: list[str] = []

  def registers(self) -> list[tuple[int, int]]: return [*self.regs, PRGRM_CNTR_START, PRGRM_CNTR_START_HI, *((0, r) for r in range(HQD_FIRST, HQD_LAST + 1))]

  @property
  def selected(self) -> tuple[int, int, int]:
    """(ME, pipe, queue) that GRBM_GFX_CNTL selects (PIPEID 1:0, MEID 3:2, QUEUEID 10:8)."""
    v = self.regs[GRBM_GFX_CNTL]
    return v >> 2 & 0x3, v & 0x3, v >> 8 & 0x7
  def bank(self) -> dict[int, int]: return self.banks.setdefault(self.selected, {})

  def read(self, reg: tuple[int, int]) -> int:
    if reg in (PRGRM_CNTR_START, PRGRM_CNTR_START_HI):
      pc = self.program_counter.get(self.selected[1], 0)
      return pc & 0xFFFFFFFF if reg == PRGRM_CNTR_START else pc >> 32
    if reg[0] == 0 and HQD_FIRST <= reg[1] <= HQD_LAST: return self.bank().get(reg[1], 0)
    return self.regs[reg]

  def write(self, reg: tuple[int, int], value: int) -> None:
    if reg in (PRGRM_CNTR_START, PRGRM_CNTR_START_HI):
      pipe, pc = self.selected[1], self.program_counter.get(self.selected[1], 0)
      self.program_counter[pipe] = pc & ~0xFFFFFFFF | value if reg == PRGRM_CNTR_START else pc & 0xFFFFFFFF | value << 32
      return
    if not (reg[0] == 0 and HQD_FIRST <= reg[1] <= HQD_LAST):
      self.regs[reg] = value
      return
    bank, where = self.bank(), self.selected
    if reg[1] == DEQUEUE_REQUEST and value & 0xF:
      self.stop(where)
      bank[HQD_ACTIVE] = 0
      return
    if reg[1] == HQD_ACTIVE and value & 1 and not bank.get(HQD_ACTIVE, 0) & 1:
      if (problem := self.start_problem(where, bank)) is not None:
        self.problems.append(f"queue (ME {where[0]}, pipe {where[1]}, queue {where[2]}) not started: {problem}")
        return
      self.run(where, bank)
    bank[reg[1]] = value

  def start_problem(self, where: tuple[int, int, int], bank: dict[int, int]) -> str | None:
    me, pipe, _ = where
    if me != COMPUTE_ME: return f"ME {me} is not the compute micro engine (MEC 0 is ME 1)"
    if not self.rlc_booted(): return "the RLC hasn't booted (no AUTOLOAD_RLC after all of GC's firmware)"
    if self.loaded(RS64_MEC) != self.firmware[0]: return "the PSP has not loaded the RS64 MEC firmware (GFX_FW_TYPE_RS64_MEC)"
    if self.loaded(RS64_MEC_P0_STACK + pipe) != self.firmware[1]: return f"the PSP has not loaded pipe {pipe}'s stack (GFX_FW_TYPE_RS64_MEC_P{pipe}_STACK)"
    if self.program_counter.get(pipe) != self.start: return f"pipe {pipe}'s CP_MEC_RS64_PRGRM_CNTR_START is {self.program_counter.get(pipe, 0):#x}, the firmware starts at {self.start:#x}"
    cntl = self.regs[RS64_CNTL]
    if cntl & MEC_HALT or cntl >> (PIPE_RESET_SHIFT + pipe) & 1 or not cntl >> (PIPE_ACTIVE_SHIFT + pipe) & 1:
      return f"CP_MEC_RS64_CNTL {cntl:#010x} has the MEC halted or pipe {pipe} in reset or inactive"
    door = bank.get(PQ_DOORBELL_CONTROL, 0)
    if not door & DOORBELL_EN: return "its doorbell is not enabled (CP_HQD_PQ_DOORBELL_CONTROL.DOORBELL_EN)"
    lower, upper = self.regs[DOORBELL_RANGE_LOWER] & 0xFFC, self.regs[DOORBELL_RANGE_UPPER] & 0xFFC
    if not lower <= door & DOORBELL_OFFSET <= upper: return f"its doorbell at byte {door & DOORBELL_OFFSET:#x} is outside the MEC's doorbell range {lower:#x}..{upper:#x}"
    if (door & DOORBELL_OFFSET) % 8 or (door & DOORBELL_OFFSET) + 8 > len(self.doorbells): return f"its doorbell at byte {door & DOORBELL_OFFSET:#x} is not a 64-bit doorbell in the BAR"
    return None

  def run(self, where: tuple[int, int, int], bank: dict[int, int]) -> None:
    pair = lambda lo, hi, mask: bank.get(lo, 0) & mask | (bank.get(hi, 0) & 0xFFFF) << 32
    ring = (bank.get(PQ_BASE, 0) | bank.get(PQ_BASE_HI, 0) << 32) << 8
    offset = bank[PQ_DOORBELL_CONTROL] & DOORBELL_OFFSET
    gpu = self.gpu_of(bank.get(HQD_VMID, 0) & 0xF)
    q = Queue(len(self.queues), "pm4", ring, 4 * (2 << (bank.get(PQ_CONTROL, 0) & 0x3F)), pair(RPTR_REPORT_ADDR, RPTR_REPORT_ADDR_HI, ~3),
              pair(WPTR_POLL_ADDR, WPTR_POLL_ADDR_HI, ~7), self.doorbells[offset:offset + 8].cast("Q"), offset // 8, rptr_bits=32)
    q.doorbell[0] = bank.get(PQ_WPTR_LO, 0) | bank.get(PQ_WPTR_HI, 0) << 32  # the doorbell BAR is memory here: start from the HQD's write pointer
    self.watch(q)
    q.engine = PM4Engine(gpu, q)
    self.queues[where] = (gpu, q)
    gpu.add_queue(q)

  def stop(self, where: tuple[int, int, int]) -> None:
    if (entry := self.queues.pop(where, None)) is not None: entry[0].remove_queue(entry[1])
