"""The PM4 front end of the AMD model, fed packets built here from nvd.h's field layouts (the encoders below write the
numbers of the header, not the model's tables): fences and KFD events from RELEASE_MEM, a WAIT_REG_MEM that holds the
queue until the CPU writes memory, indirect buffers, the dispatch registers decoded into a Dispatch, and faults that
name the opcode or the address."""
import time
import numpy as np
import pytest
from drivers.system import memoryview_at
from tests.drivers.mock.test_amd_kfd import BASE, GTT, VRAM, amd  # noqa: F401 (the fixture)

def pkt3(op: int, *payload: int) -> list[int]:
  """nvd.h PACKET3(op, n): type 3 in 31:30, n = payload dwords - 1 in 29:16, opcode in 15:8."""
  return [3 << 30 | (len(payload) - 1) << 16 | op << 8, *payload]

def set_sh(reg: int, *values: int) -> list[int]: return pkt3(0x76, reg - 0x2C00, *values)

def release_mem(addr: int, data: int, data_sel: int = 1, int_sel: int = 0, ctxid: int = 0) -> list[int]:
  # dword 1: event_type 0x14 (CACHE_FLUSH_AND_INV_TS) | event_index 5 (END_OF_PIPE) << 8; dword 2: int_sel 26:24, data_sel 31:29
  return pkt3(0x49, 0x14 | 5 << 8, int_sel << 24 | data_sel << 29, addr & 0xFFFFFFFF, addr >> 32, data & 0xFFFFFFFF, data >> 32, ctxid)

def wait_mem(addr: int, ref: int, func: int = 5) -> list[int]:
  # WAIT_REG_MEM: function 2:0, mem_space 4 = memory; address, reference, mask, poll interval
  return pkt3(0x3C, func | 1 << 4, addr & 0xFFFFFFFF, addr >> 32, ref, 0xFFFFFFFF, 4)

def write_data(addr: int, *values: int) -> list[int]:
  return pkt3(0x37, 5 << 8 | 1 << 20, addr & 0xFFFFFFFF, addr >> 32, *values)   # dst_sel 5 memory, wr_confirm

def indirect(addr: int, dwords: int, chain: bool = False) -> list[int]:
  return pkt3(0x3F, addr & 0xFFFFFFFF, addr >> 32, dwords | 1 << 23 | int(chain) << 20)   # size 19:0, VALID 23

class PM4Queue:
  def __init__(self, amd):
    self.amd = amd
    self.q, self.ring, self.ptrs = amd.queue(0)
    self.ring32 = np.frombuffer(self.ring, np.uint32)
    bell = amd.sys.mmap(0, 0x2000, 3, 1, amd.kfd, self.q.doorbell_offset & ~0x1FFF)
    self.doorbell = np.frombuffer(memoryview_at(bell + (self.q.doorbell_offset & 0x1FFF), 8), np.uint64)
    self.wptr = 0
  def submit(self, words: list[int]) -> None:
    for w in words:
      self.ring32[self.wptr % len(self.ring32)] = w
      self.wptr += 1
    np.frombuffer(self.ptrs, np.uint64)[56 // 8] = self.wptr   # wptr memory first, then the doorbell
    self.doorbell[0] = self.wptr
  @property
  def rptr(self) -> int: return int(np.frombuffer(self.ptrs, np.uint64)[128 // 8])

def until(cond, what: str, limit_s: float = 10.0):
  """Polls `cond` until true (the model runs on its own thread); fails naming `what` if it never becomes true."""
  end = time.monotonic() + limit_s
  while not cond():
    if time.monotonic() > end: pytest.fail(f"never happened: {what}")
    time.sleep(0.001)

@pytest.fixture
def pm4(amd):
  amd.acquire()
  return PM4Queue(amd)

def test_release_mem_writes_and_signals_an_event(pm4):
  amd = pm4.amd
  page, handle, page_mem = amd.buffer(0x8000)
  ev = amd.event(0, handle)
  sig, _, sig_mem = amd.buffer(0x1000)
  mailbox = page + 8 * ev.event_slot_index
  pm4.submit(release_mem(sig, 0x1234_5678_9ABC, data_sel=2) + release_mem(sig + 8, 0, data_sel=3)
             + release_mem(mailbox, ev.event_id, data_sel=1, int_sel=2, ctxid=ev.event_id))
  result, _ = amd.wait([ev.event_id], 10000)
  assert result == 0
  vals = np.frombuffer(sig_mem, np.uint64)
  assert vals[0] == 0x1234_5678_9ABC and vals[1] > 0    # the 64-bit payload, then a GPU clock stamp
  assert np.frombuffer(page_mem, np.uint64)[ev.event_id] == 2**64 - 1   # amdkfd acknowledged the slot
  until(lambda: pm4.rptr == pm4.wptr, "rptr reaches wptr")

def test_an_interrupt_without_the_mailbox_write_signals_nothing(pm4):
  amd = pm4.amd
  page, handle, _ = amd.buffer(0x8000)
  ev = amd.event(0, handle)
  sig, _, sig_mem = amd.buffer(0x1000)
  pm4.submit(release_mem(sig, 0, data_sel=0, int_sel=2, ctxid=ev.event_id) + write_data(sig, 1))
  until(lambda: np.frombuffer(sig_mem, np.uint32)[0] == 1, "the packets ran")
  assert amd.wait([ev.event_id], 0)[0] == 1   # kfd_signal_event_interrupt wants the slot written

def test_wait_reg_mem_holds_the_queue_until_the_cpu_writes(pm4):
  amd = pm4.amd
  sig, _, sig_mem = amd.buffer(0x1000)
  words = np.frombuffer(sig_mem, np.uint32)
  pm4.submit(wait_mem(sig, 5) + write_data(sig + 4, 0xAB))
  until(lambda: pm4.rptr == 0, "the queue started")
  time.sleep(0.05)
  assert words[1] == 0 and pm4.rptr == 0    # still parked on the WAIT_REG_MEM (0 >= 5 is false)
  other = PM4Queue(amd)                       # other queues keep running meanwhile
  other.submit(write_data(sig + 8, 7))
  until(lambda: words[2] == 7, "the second queue ran past the first one's wait")
  words[0] = 4
  time.sleep(0.02)
  assert words[1] == 0
  words[0] = 5
  until(lambda: words[1] == 0xAB, "the write after the wait")

def test_indirect_buffers_nest_two_deep(pm4):
  amd = pm4.amd
  sig, _, sig_mem = amd.buffer(0x1000)
  ib2_va, _, ib2 = amd.buffer(0x1000)
  ib1_va, _, ib1 = amd.buffer(0x1000)
  inner = write_data(sig + 4, 22)
  np.frombuffer(ib2, np.uint32)[:len(inner)] = inner
  outer = write_data(sig, 11) + indirect(ib2_va, len(inner))
  np.frombuffer(ib1, np.uint32)[:len(outer)] = outer
  pm4.submit(indirect(ib1_va, len(outer)) + write_data(sig + 8, 33))
  until(lambda: list(np.frombuffer(sig_mem, np.uint32)[:3]) == [11, 22, 33], "IB1, IB2 and the ring after them")
  ib3_va, _, ib3 = amd.buffer(0x1000)   # an IB2 that starts a third level faults
  deeper = indirect(ib3_va, 4)
  np.frombuffer(ib2, np.uint32)[:len(deeper)] = deeper
  pm4.submit(indirect(ib1_va, len(outer)))
  until(lambda: amd.model.faults, "a fault")
  assert "nesting depth 3" in amd.model.faults[0]

def test_dispatch_registers_become_a_dispatch(pm4):
  amd, seen = pm4.amd, []
  amd.gpu.shader = lambda d, mem: seen.append(d)
  code = 0x7F00_1234_5600
  regs = (set_sh(0x2E0C, code >> 8 & 0xFFFFFFFF, code >> 40) + set_sh(0x2E12, 0xAA, 0x92 | 3 << 15) + set_sh(0x2E28, 0x5)
          + set_sh(0x2E18, 4 << 12) + set_sh(0x2E10, 0x100, 0x2) + set_sh(0x2E40, 11, 22, 33)
          + set_sh(0x2E07, 64, 2, 1) + set_sh(0x2E04, 0, 0, 0))
  pm4.submit(regs + pkt3(0x15, 3, 4, 5, 1 | 1 << 2 | 1 << 15))
  until(lambda: seen, "the dispatch")
  d = seen[0]
  assert (d.arch, d.code_va, d.rsrc1, d.rsrc2, d.rsrc3) == ("gfx1100", code, 0xAA, 0x92 | 3 << 15, 5)
  assert d.user_data[:4] == (11, 22, 33, 0) and len(d.user_data) == 16
  assert (d.groups, d.group_size, d.wave32, d.lds_bytes) == ((3, 4, 5), (64, 2, 1), True, 3 * 512)
  assert (d.scratch_va, d.scratch_wave_bytes) == ((2 << 32 | 0x100) << 8, 4 * 256)

def test_a_shader_fault_raises_the_memory_event_with_the_page(pm4):
  amd = pm4.amd
  def bad(d, mem): mem.span(0xDEAD_0000_1234, 0xDEAD_0000_1238)
  amd.gpu.shader = bad
  mem_ev = amd.event(8)
  pm4.submit(set_sh(0x2E0C, 1, 0) + set_sh(0x2E07, 1, 1, 1) + pkt3(0x15, 1, 1, 1, 1))
  result, data = amd.wait([mem_ev.event_id], 10000)
  assert result == 0
  va, gpu_id = np.frombuffer(data[16:24], np.uint64)[0], np.frombuffer(data[24:28], np.uint32)[0]
  assert (va, gpu_id, data[0]) == (0xDEAD_0000_1000, amd.gpu_id, 1)    # the page, the GPU, NotPresent
  assert "0xdead00001234" in amd.model.faults[0]

def test_a_release_to_an_unmapped_address_faults_with_that_address(pm4):
  amd = pm4.amd
  mem_ev = amd.event(8)
  pm4.submit(release_mem(0x5000_0000_0040, 1))
  assert amd.wait([mem_ev.event_id], 10000)[0] == 0
  assert "0x500000000040" in amd.model.faults[0] and "RELEASE_MEM" in amd.model.faults[0]

def test_an_unknown_opcode_stops_the_queue_naming_it(pm4):
  amd = pm4.amd
  hw = amd.event(3)
  sig, _, sig_mem = amd.buffer(0x1000)
  pm4.submit(write_data(sig, 1) + pkt3(0x77, 0) + write_data(sig, 2))
  assert amd.wait([hw.event_id], 10000)[0] == 0
  assert "opcode 0x77" in amd.model.faults[0] and "ring offset 0x14" in amd.model.faults[0]
  assert np.frombuffer(sig_mem, np.uint32)[0] == 1 and pm4.rptr == 5   # stopped on the bad packet

def test_a_wrong_payload_length_faults(pm4):
  pm4.submit(pkt3(0x49, 0, 0, 0))   # RELEASE_MEM with 3 of its 7 dwords
  until(lambda: pm4.amd.model.faults, "a fault")
  assert "RELEASE_MEM" in pm4.amd.model.faults[0] and "7" in pm4.amd.model.faults[0]

def test_copy_data_and_acquire_mem_length_per_arch(pm4):
  amd = pm4.amd
  sig, _, sig_mem = amd.buffer(0x1000)
  np.frombuffer(sig_mem, np.uint64)[0] = 0x0102_0304_0506_0708
  # COPY_DATA: src_sel 1 (memory) 3:0, dst_sel 5 (memory) 11:8, count_sel 16 (64 bits); then gfx10+'s 7-dword ACQUIRE_MEM
  pm4.submit(pkt3(0x40, 1 | 5 << 8 | 1 << 16, sig & 0xFFFFFFFF, sig >> 32, (sig + 8) & 0xFFFFFFFF, (sig + 8) >> 32)
             + pkt3(0x58, 0, 0xFFFFFFFF, 0xFFFFFF, 0, 0, 10, 0) + write_data(sig + 16, 1))
  until(lambda: np.frombuffer(sig_mem, np.uint32)[4] == 1, "the packets ran")
  assert np.frombuffer(sig_mem, np.uint64)[1] == 0x0102_0304_0506_0708
  pm4.submit(pkt3(0x58, 0, 0xFFFFFFFF, 0xFFFFFF, 0, 0, 10))   # gfx9's 6-dword form on a gfx11 queue
  until(lambda: amd.model.faults, "a fault")
  assert "ACQUIRE_MEM" in amd.model.faults[0] and "gfx1100" in amd.model.faults[0]
