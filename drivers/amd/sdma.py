"""SDMA packets for the copy queues of AMD GPUs (amdgpu's sdma_v6_0_0_pkt_open.h for gfx11/12, vega10_sdma_pkt_open.h
for gfx9): the header is op[7:0] | sub_op[15:8] | flags, and the ring counts bytes."""
from __future__ import annotations

OP_NOP, OP_COPY, OP_FENCE, OP_TRAP, OP_POLL_REGMEM, OP_TIMESTAMP = 0, 1, 5, 6, 8, 13
SUB_COPY_LINEAR, SUB_TIMESTAMP_GET_GLOBAL = 0, 2
POLL_FUNC_GEQ = 5

def max_copy(gfx: int) -> int:
  """Bytes one COPY_LINEAR moves: its count field (bytes - 1) has 30 bits on SDMA 6 (gfx11+), 22 before."""
  return 1 << 30 if gfx >= 11 else 1 << 22

def copy_linear(dest: tuple, src: tuple, nbytes: int) -> list:
  """Copy `nbytes` from src to dest, each address given as its (lo, hi) words (ints, or PatchSlots of a JIT input)."""
  return [OP_COPY | SUB_COPY_LINEAR << 8, nbytes - 1, 0, *src, *dest]

def fence(gfx: int, address: int, value) -> list:
  """Write the 32-bit `value` (an int or a UOp) at `address` once earlier packets are done (uncached on gfx10+: MTYPE 3)."""
  return [OP_FENCE | (3 << 16 if gfx >= 10 else 0), address & 0xFFFFFFFF, address >> 32, value]

def trap(context: int) -> list[int]:
  """Raise an interrupt with the 28-bit context id `context` once earlier packets are done."""
  return [OP_TRAP, context & 0xFFFFFFF]

def poll_regmem(address: int, ref) -> list:
  """Wait until the 32-bit word at `address` is >= ref (an int or a UOp; polling memory, retrying without end)."""
  return [OP_POLL_REGMEM | POLL_FUNC_GEQ << 28 | 1 << 31, address & 0xFFFFFFFF, address >> 32, ref, 0xFFFFFFFF, 0xFFF << 16 | 10]

def timestamp(address: int) -> list[int]:
  """Write the 64-bit global GPU timestamp at `address`."""
  return [OP_TIMESTAMP | SUB_TIMESTAMP_GET_GLOBAL << 8, address & 0xFFFFFFFF, address >> 32]
