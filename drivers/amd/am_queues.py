"""The queues the AM driver maps itself, without amdgpu.ko or its KIQ: a compute queue on MEC 0 through the HQD
registers of the queue GRBM_GFX_CNTL selects (gfx_v11_0.c gfx_v11_0_kiq_init_register's order, ACTIVE last), after
starting the RS64 MEC (gfx_v11_0_config_gfx_rs64, gfx_v11_0_cp_compute_enable); and SDMA0's first queue through its
ring registers (sdma_v6_0.c sdma_v6_0_gfx_resume_instance). Addresses are GPU virtual addresses in `vmid`."""
from __future__ import annotations
from typing import Callable
from drivers.amd.pci_gpu import wait_for

Write = Callable[[tuple[int, int], int], None]  # (GC segment, offset), value
Read = Callable[[tuple[int, int]], int]

# gc_11_0_0_offset.h: (BASE_IDX, offset)
GRBM_GFX_CNTL, MEC_RS64_CNTL, PRGRM_CNTR_START, PRGRM_CNTR_START_HI = (1, 0x900), (1, 0x2904), (1, 0x2900), (1, 0x2938)
MEC_DOORBELL_RANGE_LOWER, MEC_DOORBELL_RANGE_UPPER, PQ_WPTR_POLL_CNTL = (0, 0x1DFC), (0, 0x1DFD), (0, 0x1E23)
MQD_BASE_ADDR, MQD_BASE_ADDR_HI, HQD_ACTIVE, HQD_VMID, PERSISTENT_STATE = (0, 0x1FA9), (0, 0x1FAA), (0, 0x1FAB), (0, 0x1FAC), (0, 0x1FAD)
PQ_BASE, PQ_BASE_HI, PQ_RPTR, RPTR_REPORT_ADDR, RPTR_REPORT_ADDR_HI = (0, 0x1FB1), (0, 0x1FB2), (0, 0x1FB3), (0, 0x1FB4), (0, 0x1FB5)
WPTR_POLL_ADDR, WPTR_POLL_ADDR_HI, PQ_DOORBELL_CONTROL, PQ_CONTROL = (0, 0x1FB6), (0, 0x1FB7), (0, 0x1FB8), (0, 0x1FBA)
DEQUEUE_REQUEST = (0, 0x1FC1)
MQD_CONTROL, EOP_BASE_ADDR, EOP_BASE_ADDR_HI, EOP_CONTROL, PQ_WPTR_LO, PQ_WPTR_HI = (0, 0x1FCB), (0, 0x1FCE), (0, 0x1FCF), (0, 0x1FD0), (0, 0x1FDF), (0, 0x1FE0)
SDMA0_RB_CNTL, SDMA0_RB_BASE, SDMA0_RB_BASE_HI, SDMA0_RB_RPTR, SDMA0_RB_RPTR_HI = (0, 0x80), (0, 0x81), (0, 0x82), (0, 0x83), (0, 0x84)
SDMA0_RB_WPTR, SDMA0_RB_WPTR_HI, SDMA0_RPTR_ADDR_HI, SDMA0_RPTR_ADDR_LO, SDMA0_IB_CNTL = (0, 0x85), (0, 0x86), (0, 0x88), (0, 0x89), (0, 0x8A)
SDMA0_DOORBELL, SDMA0_DOORBELL_OFFSET, SDMA0_WPTR_POLL_ADDR_HI, SDMA0_WPTR_POLL_ADDR_LO = (0, 0x92), (0, 0xAB), (0, 0xB2), (0, 0xB3)
SDMA0_MINOR_PTR_UPDATE, SDMA0_F32_CNTL = (0, 0xB5), (1, 0x589A)
# gc_11_0_0_sh_mask.h fields, and the values amdgpu gives them
MEC_HALT, PIPE_RESET, PIPE_ACTIVE = 1 << 30, 0xF << 16, 0xF << 26
COMPUTE_ME = 1                                  # MEC 0 is ME 1 (gfx_v11_0_compute_ring_init)
DOORBELL_EN = 1 << 30
EOP_SIZE = 8                                    # 2 KiB (GFX11_MEC_HPD_SIZE): 2^(8+1) dwords
RPTR_BLOCK_SIZE, UNORD_DISPATCH, PRIV_STATE, KMD_QUEUE = 9 << 8, 1 << 28, 1 << 30, 1 << 31
PRELOAD_SIZE = 0x55 << 8
DEQUEUE_WAIT_S = 1.0
MEC_DOORBELL_RANGE_END = 0x8A * 2 << 2          # (AMDGPU_NAVI10_DOORBELL_USERQUEUE_END * 2) << 2, in bytes
RB_ENABLE, RB_PRIV, RPTR_WRITEBACK_ENABLE, F32_WPTR_POLL_ENABLE = 1 << 0, 1 << 23, 1 << 12, 1 << 11
SDMA_DOORBELL_ENABLE, IB_ENABLE, F32_HALT, F32_TH1_RESET = 1 << 28, 1 << 0, 1 << 0, 1 << 13
# amdgpu_doorbell.h AMDGPU_NAVI10_DOORBELL_ASSIGNMENT (64-bit slots): byte offsets in the doorbell BAR
MEC_RING0_DOORBELL, SDMA_ENGINE0_DOORBELL = 0x003 * 8, 0x100 * 8

def log2(n: int) -> int:
  if n & (n - 1): raise ValueError(f"a ring of {n} bytes: rings are a power of two")
  return n.bit_length() - 1

def start_mec(write: Write, start_address: int, pipes: int = 4) -> None:
  """Start MEC 0's pipes at the RS64 firmware's `start_address` (the PSP loaded it) and unhalt the MEC."""
  for pipe in range(pipes):
    write(GRBM_GFX_CNTL, pipe | COMPUTE_ME << 2)
    write(PRGRM_CNTR_START, (start_address & 0xFFFFFFFF) >> 2 | (start_address >> 32) << 30 & 0xFFFFFFFF)
    write(PRGRM_CNTR_START_HI, (start_address >> 32) >> 2)
  write(GRBM_GFX_CNTL, 0)
  write(MEC_RS64_CNTL, MEC_HALT | PIPE_RESET)
  write(MEC_RS64_CNTL, PIPE_ACTIVE)

def map_compute_queue(read: Read, write: Write, vmid: int, ring: int, ring_bytes: int, rptr: int, wptr: int, eop: int, mqd: int, pipe: int = 0, queue: int = 0) -> int:
  """Map a PM4 ring on MEC 0 (`pipe`, `queue`), taking off the queue an earlier driver left there; the byte offset of
  its doorbell in the doorbell BAR. TimeoutError if the old queue doesn't leave."""
  doorbell = MEC_RING0_DOORBELL + 8 * (pipe * 8 + queue)
  write(GRBM_GFX_CNTL, pipe | COMPUTE_ME << 2 | queue << 8)
  write(PQ_WPTR_POLL_CNTL, 0)
  write(EOP_BASE_ADDR, eop >> 8 & 0xFFFFFFFF)
  write(EOP_BASE_ADDR_HI, eop >> 40)
  write(EOP_CONTROL, EOP_SIZE)
  write(PQ_DOORBELL_CONTROL, doorbell | DOORBELL_EN)
  if read(HQD_ACTIVE) & 1:
    write(DEQUEUE_REQUEST, 1)
    if not wait_for(lambda: read(HQD_ACTIVE), lambda v: not v & 1, DEQUEUE_WAIT_S)[0]:
      raise TimeoutError(f"MEC pipe {pipe} queue {queue} stays active {DEQUEUE_WAIT_S} s after a dequeue request (CP_HQD_ACTIVE)")
    for reg in (DEQUEUE_REQUEST, PQ_RPTR, PQ_WPTR_LO, PQ_WPTR_HI): write(reg, 0)
  write(MQD_BASE_ADDR, mqd & 0xFFFFFFFC)
  write(MQD_BASE_ADDR_HI, mqd >> 32)
  write(MQD_CONTROL, 0)
  write(PQ_BASE, ring >> 8 & 0xFFFFFFFF)
  write(PQ_BASE_HI, ring >> 40)
  write(PQ_CONTROL, log2(ring_bytes // 4) - 1 | RPTR_BLOCK_SIZE | UNORD_DISPATCH | PRIV_STATE | KMD_QUEUE)
  write(RPTR_REPORT_ADDR, rptr & 0xFFFFFFFC)
  write(RPTR_REPORT_ADDR_HI, rptr >> 32 & 0xFFFF)
  write(WPTR_POLL_ADDR, wptr & 0xFFFFFFF8)
  write(WPTR_POLL_ADDR_HI, wptr >> 32 & 0xFFFF)
  write(MEC_DOORBELL_RANGE_LOWER, 0)
  write(MEC_DOORBELL_RANGE_UPPER, MEC_DOORBELL_RANGE_END)
  write(PQ_DOORBELL_CONTROL, doorbell | DOORBELL_EN)
  write(PQ_WPTR_LO, 0)
  write(PQ_WPTR_HI, 0)
  write(HQD_VMID, vmid)
  write(PERSISTENT_STATE, PRELOAD_SIZE)
  write(HQD_ACTIVE, 1)
  write(GRBM_GFX_CNTL, 0)
  return doorbell

def start_sdma_queue(write: Write, vmid: int, ring: int, ring_bytes: int, rptr: int, wptr: int) -> int:
  """Start SDMA0's first ring; the byte offset of its doorbell in the doorbell BAR."""
  cntl = log2(ring_bytes // 4) << 1 | RB_PRIV | vmid << 24
  write(SDMA0_RB_CNTL, cntl)
  for reg in (SDMA0_RB_RPTR, SDMA0_RB_RPTR_HI, SDMA0_RB_WPTR, SDMA0_RB_WPTR_HI): write(reg, 0)
  write(SDMA0_WPTR_POLL_ADDR_LO, wptr & 0xFFFFFFFC)
  write(SDMA0_WPTR_POLL_ADDR_HI, wptr >> 32)
  write(SDMA0_RPTR_ADDR_HI, rptr >> 32)
  write(SDMA0_RPTR_ADDR_LO, rptr & 0xFFFFFFFC)
  cntl |= RPTR_WRITEBACK_ENABLE | F32_WPTR_POLL_ENABLE
  write(SDMA0_RB_BASE, ring >> 8 & 0xFFFFFFFF)
  write(SDMA0_RB_BASE_HI, ring >> 40)
  write(SDMA0_MINOR_PTR_UPDATE, 1)
  write(SDMA0_DOORBELL, SDMA_DOORBELL_ENABLE)
  write(SDMA0_DOORBELL_OFFSET, SDMA_ENGINE0_DOORBELL)
  write(SDMA0_MINOR_PTR_UPDATE, 0)
  write(SDMA0_F32_CNTL, 0)  # HALT and TH1_RESET clear
  write(SDMA0_RB_CNTL, cntl | RB_ENABLE)
  write(SDMA0_IB_CNTL, IB_ENABLE)
  return SDMA_ENGINE0_DOORBELL

def unmap_compute_queue(write: Write, pipe: int = 0, queue: int = 0) -> None:
  """Take the queue off its pipe (DEQUEUE_REQUEST, as gfx_v11_0_kiq_init_register does before remapping one)."""
  write(GRBM_GFX_CNTL, pipe | COMPUTE_ME << 2 | queue << 8)
  write(DEQUEUE_REQUEST, 1)
  write(DEQUEUE_REQUEST, 0)
  write(GRBM_GFX_CNTL, 0)

def stop_sdma_queue(write: Write) -> None: write(SDMA0_RB_CNTL, 0)
