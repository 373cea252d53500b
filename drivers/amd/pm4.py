"""PM4 type-3 packets for the compute queues of AMD GPUs (amdgpu's nvd.h for gfx10-12, soc15d.h for gfx9) and the
compute registers they set (gc_11_0_0_offset.h, gc_9_4_3_offset.h: dword addresses, SH registers from 0x2C00)."""
from __future__ import annotations

NOP, DISPATCH_DIRECT, WRITE_DATA, WAIT_REG_MEM, INDIRECT_BUFFER = 0x10, 0x15, 0x37, 0x3C, 0x3F
EVENT_WRITE, RELEASE_MEM, ACQUIRE_MEM, SET_SH_REG = 0x46, 0x49, 0x58, 0x76
SH_REG_START = 0x2C00
TYPE2_FILLER = 0x80000000  # one dword that does nothing

def header(opcode: int, payload: int) -> int:
  """PACKET3(op, n): n is the payload length minus one."""
  return 3 << 30 | (payload - 1) << 16 | opcode << 8

# compute registers (dword addresses)
DISPATCH_INITIATOR, START_X, NUM_THREAD_X = 0x2E00, 0x2E04, 0x2E07
PGM_LO, SCRATCH_BASE_LO, PGM_RSRC1, RESOURCE_LIMITS, TMPRING_SIZE, RESTART_X = 0x2E0C, 0x2E10, 0x2E12, 0x2E15, 0x2E18, 0x2E1B
USER_DATA_0 = 0x2E40
def pgm_rsrc3(gfx: int) -> int: return 0x2E2D if gfx < 10 else 0x2E28  # moved on gfx10

# DISPATCH_INITIATOR bits
COMPUTE_SHADER_EN, FORCE_START_AT_000, CS_W32_EN = 1 << 0, 1 << 2, 1 << 15

# EVENT_WRITE / RELEASE_MEM event types and indices
CS_PARTIAL_FLUSH, CACHE_FLUSH_AND_INV_TS_EVENT = 0x07, 0x14
INDEX_CS_PARTIAL_FLUSH, INDEX_END_OF_PIPE = 4, 5
DATA_SEL_NONE, DATA_SEL_LOW32, DATA_SEL_64, DATA_SEL_GPU_CLOCK = 0, 1, 2, 3
INT_SEL_AFTER_WRITE_CONFIRM = 2  # RELEASE_MEM INT_SEL: interrupt once the data is written
WAIT_GEQ, WAIT_MEM_SPACE = 5, 1 << 4

def set_sh_reg(reg: int, *values: int) -> list[int]:
  if not SH_REG_START <= reg < 0x3000: raise ValueError(f"register {reg:#x} is no SH register")
  return [header(SET_SH_REG, 1 + len(values)), reg - SH_REG_START, *values]

def dispatch_direct(groups: tuple[int, int, int], wave32: bool) -> list[int]:
  return [header(DISPATCH_DIRECT, 4), *groups, COMPUTE_SHADER_EN | FORCE_START_AT_000 | (CS_W32_EN if wave32 else 0)]

def cs_partial_flush() -> list[int]: return [header(EVENT_WRITE, 1), CS_PARTIAL_FLUSH | INDEX_CS_PARTIAL_FLUSH << 8]

def acquire_mem(gfx: int) -> list[int]:
  """Invalidate (and write back) the GPU's caches over all memory before the next dispatch reads it."""
  full_range = [0xFFFFFFFF, 0xFFFFFF, 0, 0, 0xA]  # size lo/hi, base lo/hi, poll interval
  if gfx < 10:  # CP_COHER_CNTL: TC_WB, TCL1, TC, SH_KCACHE, SH_ICACHE actions
    return [header(ACQUIRE_MEM, 6), 1 << 18 | 1 << 22 | 1 << 23 | 1 << 27 | 1 << 29, *full_range]
  gcr = 1 | 1 << 4 | 1 << 5 | 1 << 7 | 1 << 8 | 1 << 9 | 1 << 14 | 1 << 15  # GLI, GLM wb/inv, GLK, GLV, GL1 inv, GL2 inv+wb
  return [header(ACQUIRE_MEM, 7), 0, *full_range, gcr]

def release_mem(gfx: int, address: int, data_sel: int, lo=0, hi=0, interrupt: int | None = None) -> list:
  """At the end of the pipe, after writing back the caches: write the value (lo, hi: 32-bit words, ints or UOps) or
  the GPU clock at `address`; then, with `interrupt`, raise an end-of-pipe interrupt with that context id."""
  caches = (1 << 15 | 1 << 17 if gfx < 10 else 1 << 21 | 1 << 20 | 1 << 14 | 1 << 13 | 1 << 12 | 1 << 22)  # TC wb/inv; GL2 wb/inv, GLV/GLM, SEQ
  event = CACHE_FLUSH_AND_INV_TS_EVENT | INDEX_END_OF_PIPE << 8 | caches
  int_sel = 0 if interrupt is None else INT_SEL_AFTER_WRITE_CONFIRM
  return [header(RELEASE_MEM, 7), event, data_sel << 29 | int_sel << 24, address & 0xFFFFFFFF, address >> 32, lo, hi, interrupt or 0]

def wait_reg_mem(address: int, ref) -> list:
  """Wait until the 32-bit word at `address` is >= ref (an int or a UOp of 32 bits)."""
  return [header(WAIT_REG_MEM, 6), WAIT_GEQ | WAIT_MEM_SPACE, address & 0xFFFFFFFF, address >> 32, ref, 0xFFFFFFFF, 4]

def indirect_buffer(address: int, dwords: int) -> list[int]:
  """Run `dwords` command dwords at `address` (4-byte aligned) as if they were in the ring (INDIRECT_BUFFER_VALID set)."""
  return [header(INDIRECT_BUFFER, 3), address & 0xFFFFFFFC, address >> 32, dwords | 1 << 23]

def nop(dwords: int) -> list[int]:
  """Filler of exactly `dwords` dwords."""
  return [TYPE2_FILLER] if dwords == 1 else [header(NOP, dwords - 1), *[0] * (dwords - 1)] if dwords > 1 else []
