"""The model's own tables of the AMD command formats it decodes: PM4 type-3 packets (amdgpu nvd.h for gfx10-12,
soc15d.h for gfx9), the compute registers they write (gc_11_0_0_offset.h, gc_9_4_3_offset.h), and SDMA packets
(sdma_v6_0_0_pkt_open.h, vega10_sdma_pkt_open.h). Field layouts are (shift, width) pairs."""
from __future__ import annotations

def field(word: int, shift: int, width: int) -> int: return (word >> shift) & ((1 << width) - 1)

# ---------------- PM4 (nvd.h / soc15d.h PACKET3 and PACKET_TYPE*) ----------------
PM4_TYPE2_FILLER = 0x80000000            # nvd.h PACKET2(0): a one-dword filler
PM4_TYPE3 = 3                            # header[31:30]
def pm4_header(word: int) -> tuple[int, int, int]:
  """(type, opcode, payload dwords) of a PM4 header: type[31:30], count[29:16] = payload-1, opcode[15:8]."""
  return word >> 30, field(word, 8, 8), field(word, 16, 14) + 1

OP = {  # nvd.h PACKET3_* opcodes (the same numbers in soc15d.h for what gfx9 has)
  "NOP": 0x10, "DISPATCH_DIRECT": 0x15, "WRITE_DATA": 0x37, "WAIT_REG_MEM": 0x3C, "INDIRECT_BUFFER": 0x3F,
  "COPY_DATA": 0x40, "EVENT_WRITE": 0x46, "RELEASE_MEM": 0x49, "ACQUIRE_MEM": 0x58, "SET_SH_REG": 0x76,
  "SET_UCONFIG_REG": 0x79,
}
OP_NAME = {v: k for k, v in OP.items()}

SH_REG_START, SH_REG_END = 0x2C00, 0x3000              # nvd.h PACKET3_SET_SH_REG_START/END (dword addresses)
UCONFIG_REG_START, UCONFIG_REG_END = 0xC000, 0x10000   # nvd.h PACKET3_SET_UCONFIG_REG_START/END

# payload dwords per packet where the format fixes them (nvd.h / soc15d.h field lists)
ACQUIRE_MEM_PAYLOAD = {"gfx9": 6, "gfx10+": 7}         # soc15d.h: COHER_CNTL..POLL; nvd.h: +GCR_CNTL
RELEASE_MEM_PAYLOAD, WAIT_REG_MEM_PAYLOAD, DISPATCH_DIRECT_PAYLOAD = 7, 6, 4

# RELEASE_MEM dword 2 (nvd.h PACKET3_RELEASE_MEM_DST_SEL/INT_SEL/DATA_SEL)
RELEASE_DST_SEL, RELEASE_INT_SEL, RELEASE_DATA_SEL = (16, 2), (24, 3), (29, 3)
DATA_SEL_NONE, DATA_SEL_LOW32, DATA_SEL_64, DATA_SEL_CLOCK = 0, 1, 2, 3
INT_SEL_NONE = 0                         # 1..2: an interrupt (2 after the write confirms), 3: none (data only)
INT_SEL_INTERRUPTS = (1, 2)

# WAIT_REG_MEM dword 1 (nvd.h WAIT_REG_MEM_FUNCTION/MEM_SPACE/OPERATION/ENGINE)
WAIT_FUNCTION, WAIT_MEM_SPACE, WAIT_OPERATION = (0, 3), (4, 2), (6, 2)
COMPARE = {0: lambda v, ref: True, 1: lambda v, ref: v < ref, 2: lambda v, ref: v <= ref, 3: lambda v, ref: v == ref,
           4: lambda v, ref: v != ref, 5: lambda v, ref: v >= ref, 6: lambda v, ref: v > ref}

# INDIRECT_BUFFER dword 3 (nvd.h INDIRECT_BUFFER_VALID, PACKET3_INDIRECT_BUFFER chain bit, IB size 19:0)
IB_SIZE, IB_CHAIN, IB_VALID = (0, 20), 20, 23
MAX_IB_DEPTH = 2                         # the ring starts IB1, which may start IB2 (PM4 has no IB3)

# WRITE_DATA / COPY_DATA control (nvd.h WRITE_DATA_DST_SEL, WR_ONE_ADDR; COPY_DATA_SRC_SEL/DST_SEL/COUNT_SEL)
WRITE_DST_SEL, WRITE_ONE_ADDR = (8, 4), 16
DST_SEL_REGISTER, DST_SEL_MEMORY = 0, (1, 2, 5)   # 1 memory (sync), 2 TC/L2, 5 memory (async)
COPY_SRC_SEL, COPY_DST_SEL, COPY_COUNT_SEL = (0, 4), (8, 4), 16
COPY_SRC_MEMORY, COPY_SRC_IMMEDIATE, COPY_SRC_CLOCK = (1, 2), 5, 9

# DISPATCH_INITIATOR (gc_11_0_0_sh_mask.h COMPUTE_DISPATCH_INITIATOR__*)
INIT_COMPUTE_SHADER_EN, INIT_FORCE_START_AT_000, INIT_CS_W32_EN = 0, 2, 15

# ---------------- compute registers (dword addresses, gc_11_0_0_offset.h / gc_9_4_3_offset.h regCOMPUTE_*) ----------------
REG = {
  "COMPUTE_DISPATCH_INITIATOR": 0x2E00, "COMPUTE_START_X": 0x2E04, "COMPUTE_START_Y": 0x2E05, "COMPUTE_START_Z": 0x2E06,
  "COMPUTE_NUM_THREAD_X": 0x2E07, "COMPUTE_NUM_THREAD_Y": 0x2E08, "COMPUTE_NUM_THREAD_Z": 0x2E09,
  "COMPUTE_PGM_LO": 0x2E0C, "COMPUTE_PGM_HI": 0x2E0D, "COMPUTE_DISPATCH_SCRATCH_BASE_LO": 0x2E10,
  "COMPUTE_DISPATCH_SCRATCH_BASE_HI": 0x2E11, "COMPUTE_PGM_RSRC1": 0x2E12, "COMPUTE_PGM_RSRC2": 0x2E13,
  "COMPUTE_RESOURCE_LIMITS": 0x2E15, "COMPUTE_TMPRING_SIZE": 0x2E18, "COMPUTE_USER_DATA_0": 0x2E40,
}
RSRC3 = {"gfx9": 0x2E2D, "gfx10+": 0x2E28}   # regCOMPUTE_PGM_RSRC3: gc_9_4_3_offset.h vs gc_11_0_0_offset.h
USER_DATA_COUNT = 16
GRBM_GFX_INDEX = 0xC200                       # gc_11_0_0_offset.h regGRBM_GFX_INDEX (a UCONFIG register)

RSRC2_LDS_SIZE = (15, 9)                      # COMPUTE_PGM_RSRC2__LDS_SIZE
LDS_GRANULE = 512                             # 128 dwords per LDS_SIZE unit on gfx7..gfx11 (AMDGPUUsage, compute_pgm_rsrc2)
NUM_THREAD_FULL = (0, 16)                     # COMPUTE_NUM_THREAD_X__NUM_THREAD_FULL
TMPRING_WAVESIZE = {"gfx9": ((12, 13), 1024), "gfx10+": ((12, 15), 256)}  # (field, bytes per unit)

# ---------------- SDMA (sdma_v6_0_0_pkt_open.h / vega10_sdma_pkt_open.h) ----------------
SDMA_OP = {"NOP": 0, "COPY": 1, "WRITE": 2, "INDIRECT": 4, "FENCE": 5, "TRAP": 6, "POLL_REGMEM": 8, "TIMESTAMP": 13,
           "GCR_REQ": 17}
SDMA_OP_NAME = {v: k for k, v in SDMA_OP.items()}
SDMA_SUBOP_COPY_LINEAR, SDMA_SUBOP_WRITE_LINEAR, SDMA_SUBOP_TIMESTAMP_GET_GLOBAL = 0, 0, 2
SDMA_GCR_REQ_DWORDS = 5                       # sdma_v6_0_0_pkt_open.h SDMA_PKT_GCR_REQ: header + 4 payload words
# COPY_LINEAR COUNT width: 30 bits on SDMA 6 (count_mask 0x3FFFFFFF), 22 on SDMA 4 (vega10: 0x003FFFFF)
SDMA_COPY_COUNT_BITS = {"gfx9": 22, "gfx10+": 30}
SDMA_POLL_FUNC, SDMA_POLL_MEM = (28, 3), 31   # POLL_REGMEM header: func[30:28], mem_poll[31]
SDMA_TRAP_CONTEXT = (0, 28)                   # TRAP INT_CONTEXT int_context[27:0]
