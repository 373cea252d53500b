"""The SDMA engine of the AMD model, fed packets built here from sdma_v6_0_0_pkt_open.h's layouts: a linear copy
checked against numpy, FENCE + TRAP signalling a KFD event, a POLL_REGMEM that waits for the CPU, a timestamp, and
the COPY_LINEAR count limit of each SDMA version."""
import numpy as np
import pytest
from drivers.system import memoryview_at
from tests.drivers.mock.test_amd_kfd import VRAM, BASE, amd  # noqa: F401 (the fixture)
from tests.drivers.mock.test_amd_pm4 import until

def hdr(op: int, sub: int = 0, extra: int = 0) -> int: return op | sub << 8 | extra << 16   # op 7:0, sub_op 15:8
def copy_linear(dst: int, src: int, nbytes: int) -> list[int]:
  return [hdr(1), nbytes - 1, 0, src & 0xFFFFFFFF, src >> 32, dst & 0xFFFFFFFF, dst >> 32]
def fence(addr: int, value: int) -> list[int]: return [hdr(5), addr & 0xFFFFFFFF, addr >> 32, value]
def trap(context: int) -> list[int]: return [hdr(6), context]
def poll_mem(addr: int, ref: int, func: int = 3) -> list[int]:
  return [hdr(8) | func << 28 | 1 << 31, addr & 0xFFFFFFFF, addr >> 32, ref, 0xFFFFFFFF, 4 | 0xFFF << 16]
def timestamp(addr: int) -> list[int]: return [hdr(13, 2), addr & 0xFFFFFFFF, addr >> 32]

class SDMAQueue:
  def __init__(self, amd):
    self.amd = amd
    self.q, self.ring, self.ptrs = amd.queue(1)
    bell = amd.sys.mmap(0, 0x2000, 3, 1, amd.kfd, self.q.doorbell_offset & ~0x1FFF)
    self.doorbell = np.frombuffer(memoryview_at(bell + (self.q.doorbell_offset & 0x1FFF), 8), np.uint64)
    self.ring32, self.wptr = np.frombuffer(self.ring, np.uint32), 0
  def submit(self, words: list[int]) -> None:
    for w in words:
      self.ring32[(self.wptr // 4) % len(self.ring32)] = w
      self.wptr += 4                                  # SDMA pointers count bytes
    np.frombuffer(self.ptrs, np.uint64)[56 // 8] = self.wptr
    self.doorbell[0] = self.wptr
  @property
  def rptr(self) -> int: return int(np.frombuffer(self.ptrs, np.uint64)[128 // 8])

@pytest.fixture
def sdma(amd):
  amd.acquire()
  return SDMAQueue(amd)

def test_copy_then_fence_and_trap_signal_an_event(sdma):
  amd = sdma.amd
  page, handle, _ = amd.buffer(0x8000)
  ev = amd.event(0, handle)
  src_va, _, src = amd.buffer(0x3000, VRAM | BASE)
  dst_va, _, dst = amd.buffer(0x3000, VRAM | BASE)
  src[:] = np.random.default_rng(1).integers(0, 256, 0x3000, dtype=np.uint8)
  amd.flush_hdp()
  sdma.submit(copy_linear(dst_va + 3, src_va + 5, 0x2001) + fence(page + 8 * ev.event_slot_index, ev.event_id) + trap(ev.event_id))
  assert amd.wait([ev.event_id], 10000)[0] == 0
  expect = np.zeros(0x3000, np.uint8)
  expect[3:3 + 0x2001] = src[5:5 + 0x2001]
  np.testing.assert_array_equal(dst, expect)
  until(lambda: sdma.rptr == sdma.wptr, "rptr (bytes) reaches wptr")

def test_poll_regmem_waits_for_the_cpu_then_stamps(sdma):
  amd = sdma.amd
  sig, _, sig_mem = amd.buffer(0x1000)
  words = np.frombuffer(sig_mem, np.uint64)
  sdma.submit(poll_mem(sig, 9) + timestamp(sig + 8) + fence(sig + 16, 1))
  until(lambda: sdma.rptr == 0 and amd.gpu.queues, "the queue started")
  assert words[1] == 0 and words[2] == 0
  np.frombuffer(sig_mem, np.uint32)[0] = 9
  until(lambda: words[2] == 1, "the fence after the poll")
  assert words[1] > 0

def test_a_copy_from_unmapped_memory_faults_with_the_address(sdma):
  amd = sdma.amd
  mem_ev = amd.event(8)
  dst_va, _, _ = amd.buffer(0x1000)
  sdma.submit(copy_linear(dst_va, 0x6000_0000_0000, 16))
  assert amd.wait([mem_ev.event_id], 10000)[0] == 0
  assert "0x600000000000" in amd.model.faults[0] and "copy source" in amd.model.faults[0]

@pytest.mark.parametrize("amd", ["gfx942"], indirect=True)
def test_sdma4_copy_count_has_22_bits(sdma):
  amd = sdma.amd
  dst_va, _, _ = amd.buffer(0x1000)
  sdma.submit(copy_linear(dst_va, dst_va, (1 << 22) + 1))   # count = 4 MiB: one bit past vega10's count field
  until(lambda: amd.model.faults, "a fault")
  assert "22-bit" in amd.model.faults[0]

def test_sdma6_copy_count_has_30_bits(sdma):
  amd = sdma.amd
  src_va, _, src = amd.buffer(0x500000, VRAM | BASE)
  dst_va, _, dst = amd.buffer(0x500000, VRAM | BASE)
  src[::4096] = 7
  amd.flush_hdp()
  sdma.submit(copy_linear(dst_va, src_va, 0x500000) + fence(dst_va, 0))
  until(lambda: sdma.rptr == sdma.wptr, "the 5 MiB copy")
  assert not amd.model.faults and (dst[4096::4096] == 7).all()

def test_video_memory_the_cpu_wrote_reaches_the_gpu_at_an_hdp_flush(sdma):
  """A copy that reads CPU-mapped VRAM with no HDP flush since the mapping faults naming the address (amdgpu flushes
  HDP after CPU writes through the BAR); after a write to HDP_MEM_FLUSH_CNTL the same copy works."""
  amd = sdma.amd
  mem_ev = amd.event(8)
  src_va, _, src = amd.buffer(0x1000, VRAM | BASE)
  dst_va, _, dst = amd.buffer(0x1000)
  src[:] = 5
  sdma.submit(copy_linear(dst_va, src_va, 0x1000))
  assert amd.wait([mem_ev.event_id], 10000)[0] == 0
  assert f"{src_va:#x}" in amd.model.faults[0] and "no HDP flush" in amd.model.faults[0]
  again = SDMAQueue(amd)
  amd.flush_hdp()
  again.submit(copy_linear(dst_va, src_va, 0x1000))
  until(lambda: again.rptr == again.wptr, "the copy after the flush")
  assert len(amd.model.faults) == 1 and (dst == 5).all()

def test_unknown_sdma_opcode_faults(sdma):
  sdma.submit([hdr(0x33)])
  until(lambda: sdma.amd.model.faults, "a fault")
  assert "unknown SDMA opcode 51" in sdma.amd.model.faults[0]
