"""The QCOM model's own tables of what the Adreno command processor decodes: PM4 type-4/type-7 headers (kgsl
adreno_pm4types.h cp_type4_packet / cp_type7_packet / pkt_is_type4 / pkt_is_type7), opcodes and packet payloads
(Mesa src/freedreno/registers/adreno/adreno_pm4.xml) and the compute registers (Mesa .../adreno/a6xx.xml, whose
offsets differ between a6xx and a7xx). Field layouts are (shift, width) pairs."""
from __future__ import annotations

def field(word: int, shift: int, width: int) -> int: return (word >> shift) & ((1 << width) - 1)

def odd_parity(value: int) -> int:
  """adreno_pm4types.h pm4_calc_odd_parity_bit: 1 when `value` has an even number of set bits (0x9669 per nibble)."""
  fold = 0
  for i in range(0, 32, 4): fold ^= value >> i
  return (0x9669 >> (fold & 0xF)) & 1

# ---------------- packet headers (adreno_pm4types.h) ----------------
TYPE4, TYPE7 = 4, 7                          # CP_TYPE4_PKT (4 << 28), CP_TYPE7_PKT (7 << 28)
PKT4_COUNT, PKT4_COUNT_PARITY = (0, 7), 7    # cp_type4_packet: cnt 6:0, parity of cnt at 7
PKT4_REG, PKT4_PARITY_SPAN, PKT4_REG_PARITY = (8, 18), (8, 19), 27  # reg 25:8; pkt_is_type4 checks parity of (pkt >> 8) & 0x7FFFF at 27
PKT7_COUNT, PKT7_COUNT_PARITY = (0, 14), 15  # cp_type7_packet: cnt 13:0, parity at 15
PKT7_OPCODE, PKT7_OPCODE_PARITY = (16, 7), 23  # opcode 22:16, parity at 23
PKT7_RESERVED = (24, 4)                      # pkt_is_type7: bits 27:24 are 0

# ---------------- opcodes (adreno_pm4.xml enum adreno_pm4_type3_packets, the a6xx/a7xx variants) ----------------
OP = {"CP_NOP": 0x10, "CP_WAIT_MEM_WRITES": 0x12, "CP_WAIT_FOR_ME": 0x13, "CP_WAIT_FOR_IDLE": 0x26, "CP_RUN_OPENCL": 0x31,
      "CP_LOAD_STATE6_GEOM": 0x32, "CP_EXEC_CS": 0x33, "CP_LOAD_STATE6_FRAG": 0x34, "CP_LOAD_STATE6": 0x36,
      "CP_WAIT_REG_MEM": 0x3C, "CP_MEM_WRITE": 0x3D, "CP_REG_TO_MEM": 0x3E, "CP_INDIRECT_BUFFER": 0x3F,
      "CP_EXEC_CS_INDIRECT": 0x41, "CP_SET_DRAW_STATE": 0x43, "CP_EVENT_WRITE": 0x46, "CP_INDIRECT_BUFFER_CHAIN": 0x57,
      "CP_SET_MODE": 0x63, "CP_SET_MARKER": 0x65, "CP_REG_WRITE": 0x6D, "CP_MEM_TO_MEM": 0x73, "CP_MEMCPY": 0x75}
OP_NAME = {v: k for k, v in OP.items()}
def op_name(opcode: int, gen: int) -> str:
  """CP_EVENT_WRITE7 reuses 0x46 on a7xx (adreno_pm4.xml variants A7XX-)."""
  return "CP_EVENT_WRITE7" if opcode == OP["CP_EVENT_WRITE"] and gen >= 7 else OP_NAME.get(opcode, f"opcode {opcode:#x}")

# CP_INDIRECT_BUFFER (domain CP_INDIRECT_BUFFER): IB_BASE 64-bit, IB_SIZE 19:0 in dwords
IB_SIZE = (0, 20)

# CP_SET_MARKER (domain CP_SET_MARKER, A6XX-A7XX stripe): MODE 3:0 (a6xx_marker) unless MARKER_MODE (b8) selects IFPC
MARKER_MODE_BIT, MARKER_MODE = 8, (0, 4)
MARKERS = {1: "RM6_DIRECT_RENDER", 2: "RM6_BIN_VISIBILITY", 3: "RM6_BIN_DIRECT", 4: "RM6_BIN_RENDER_START",
           5: "RM6_BIN_END_OF_DRAWS", 6: "RM6_BIN_RESOLVE", 7: "RM6_BIN_RENDER_END", 8: "RM6_COMPUTE", 12: "RM6_BLIT2DSCALE",
           13: "RM6_IB1LIST_START", 14: "RM6_IB1LIST_END", 15: "RM7_BIN_VISIBILITY_END"}

# CP_LOAD_STATE6 dword 0 (domain CP_LOAD_STATE6): DST_OFF 13:0, STATE_TYPE 15:14, STATE_SRC 17:16, STATE_BLOCK 21:18,
# NUM_UNIT 31:22; dwords 1-2 EXT_SRC_ADDR (bits 31:2 of the low word)
LS6_DST_OFF, LS6_STATE_TYPE, LS6_STATE_SRC, LS6_STATE_BLOCK, LS6_NUM_UNIT = (0, 14), (14, 2), (16, 2), (18, 4), (22, 10)
ST6 = {0: "ST6_SHADER", 1: "ST6_CONSTANTS", 2: "ST6_UBO", 3: "ST6_UAV"}                     # a6xx_state_type
SS6 = {0: "SS6_DIRECT", 1: "SS6_BINDLESS", 2: "SS6_INDIRECT", 3: "SS6_UBO"}                # a6xx_state_src
SB6 = {0: "SB6_VS_TEX", 1: "SB6_HS_TEX", 2: "SB6_DS_TEX", 3: "SB6_GS_TEX", 4: "SB6_FS_TEX", 5: "SB6_CS_TEX",
       8: "SB6_VS_SHADER", 9: "SB6_HS_SHADER", 10: "SB6_DS_SHADER", 11: "SB6_GS_SHADER", 12: "SB6_FS_SHADER",
       13: "SB6_CS_SHADER", 14: "SB6_UAV", 15: "SB6_CS_UAV"}                                # a6xx_state_block
ST6_SHADER, ST6_CONSTANTS, ST6_UAV, SS6_DIRECT, SS6_INDIRECT, SB6_CS_TEX, SB6_CS_SHADER = 0, 1, 3, 0, 2, 5, 13
CONST_UNIT_BYTES = 16                        # constants load in vec4 units
SHADER_UNIT_BYTES = 128                      # ir3_compiler.c: instr_align 16 instructions (8 bytes each) on a6xx/a7xx
# 128-byte units of a shader preload (ST6_SHADER into SB6_CS_SHADER) the instruction cache holds, by generation: the
# a630 64, a7xx 127 (Mesa freedreno_devices.py a6xx_gen1 / a7xx_base instr_cache_size: "we hang with 128")
INSTR_CACHE_UNITS = {6: 64, 7: 127}
# the CS descriptor tables a CP_LOAD_STATE6_FRAG fills, by (STATE_BLOCK, STATE_TYPE), and each unit's size in dwords:
# gallium fd6_texture.cc build_texture_state (SB6_CS_TEX: ST6_SHADER samplers of 4 dwords, ST6_CONSTANTS texture
# descriptors of 16) and computerator a6xx.cc cs_ibo_emit (ST6_UAV / SB6_CS_SHADER: 16-dword IBO descriptors)
DESCRIPTOR_TABLES = {(SB6_CS_TEX, ST6_SHADER): "sampler", (SB6_CS_TEX, ST6_CONSTANTS): "texture", (SB6_CS_SHADER, ST6_UAV): "uav"}
DESCRIPTOR_DWORDS = {"sampler": 4, "texture": 16, "uav": 16}
# the register that holds each table's address and its alignment (a6xx.xml reg64 align=)
TABLE_BASE = {"sampler": ("SP_CS_SAMPLER_BASE", 16), "texture": ("SP_CS_TEXMEMOBJ_BASE", 64), "uav": ("SP_CS_UAV_BASE", 16)}
CONST_FILE_VEC4 = {6: 256, 7: 512}           # a6xx.xml a6xx_const_ram_mode: CONSTLEN_256, CONSTLEN_512 "a7xx only"

# CP_EVENT_WRITE (a6xx) dword 0: EVENT 7:0, TIMESTAMP b30 (write the timestamp instead of the value)
EV_EVENT, EV_TIMESTAMP = (0, 8), 30
# CP_EVENT_WRITE7 (a7xx) dword 0: EVENT 7:0, WRITE_SRC 22:20, WRITE_DST b24, WRITE_ENABLED b27, IRQ b31; then addr, payload
EV7_WRITE_SRC, EV7_WRITE_DST, EV7_WRITE_ENABLED = (20, 3), 24, 27
EV7_SRC = {0: "EV_WRITE_USER_32B", 1: "EV_WRITE_USER_64B", 2: "EV_WRITE_TIMESTAMP_SUM", 3: "EV_WRITE_ALWAYSON",
           4: "EV_WRITE_REGS_CONTENT"}       # event_write_src
# vgt_event_type values the model knows, per generation (variants A6XX / A7XX-); the *_TS ones write a timestamp
EVENTS = {6: {0x04: "CACHE_FLUSH_TS", 0x08: "WT_DONE_TS", 0x0F: "START_COMPUTE_CTRS", 0x10: "STOP_COMPUTE_CTRS",
              0x16: "RB_DONE_TS", 0x18: "PC_CCU_INVALIDATE_DEPTH", 0x19: "PC_CCU_INVALIDATE_COLOR", 0x1A: "PC_CCU_RESOLVE_TS",
              0x1C: "PC_CCU_FLUSH_DEPTH_TS", 0x1D: "PC_CCU_FLUSH_COLOR_TS", 0x31: "CACHE_INVALIDATE"},
          7: {0x01: "DUMMY_EVENT", 0x04: "CACHE_FLUSH_TS", 0x0F: "START_COMPUTE_CTRS", 0x10: "STOP_COMPUTE_CTRS",
              0x16: "RB_DONE_TS", 0x18: "CCU_INVALIDATE_DEPTH", 0x19: "CCU_INVALIDATE_COLOR", 0x1A: "CCU_RESOLVE_CLEAN",
              0x1C: "CCU_FLUSH_DEPTH", 0x1D: "CCU_FLUSH_COLOR", 0x20: "CCU_CLEAN_DEPTH", 0x21: "CCU_CLEAN_COLOR",
              0x30: "CACHE_RESET", 0x31: "CACHE_CLEAN", 0x32: "CACHE_FLUSH7", 0x33: "CACHE_INVALIDATE7"}}

# CP_WAIT_REG_MEM dword 0 (domain CP_WAIT_REG_MEM): FUNCTION 2:0 (cp_cond_function), SIGNED_COMPARE b3, POLL 5:4
# (poll_memory_type), WRITE_MEMORY b8; POLL_ADDR, REF, MASK, DELAY_LOOP_CYCLES follow
WAIT_FUNCTION, WAIT_SIGNED, WAIT_POLL, WAIT_WRITE_MEMORY = (0, 3), 3, (4, 2), 8
WAIT_PAYLOAD = 6
POLL_REGISTER, POLL_MEMORY = 0, 1
FUNCTIONS = {0: ("WRITE_ALWAYS", lambda v, r: True), 1: ("WRITE_LT", lambda v, r: v < r), 2: ("WRITE_LE", lambda v, r: v <= r),
             3: ("WRITE_EQ", lambda v, r: v == r), 4: ("WRITE_NE", lambda v, r: v != r), 5: ("WRITE_GE", lambda v, r: v >= r),
             6: ("WRITE_GT", lambda v, r: v > r)}

# CP_REG_TO_MEM dword 0: REG 17:0, CNT 29:18 (max(CNT, 1) dwords), 64B b30, ACCUMULATE b31; DEST 64-bit
R2M_REG, R2M_CNT, R2M_64B, R2M_ACCUMULATE = (0, 18), (18, 12), 30, 31
# CP_MEM_TO_MEM dword 0: NEG_A/B/C b0-2, DOUBLE b29, WAIT_FOR_MEM_WRITES b30, UNK31; DST then source addresses
M2M_DOUBLE = 29
ALWAYS_ON_HZ = 19_200_000                    # kgsl.c: "XO cycles(19.2MHz)", the always-on counter's clock

# ---------------- registers (a6xx.xml; dword offsets) ----------------
COMMON = {"CP_ALWAYS_ON_COUNTER": 0x0980, "CP_ALWAYS_ON_COUNTER_HI": 0x0981,   # reg64, variants A6XX-A7XX
          "SP_CS_CNTL_0": 0xA9B0, "SP_CS_CNTL_1": 0xA9B1, "SP_CS_BOOLEAN_CF_MASK": 0xA9B2,
          "SP_CS_PROGRAM_COUNTER_OFFSET": 0xA9B3, "SP_CS_BASE": 0xA9B4, "SP_CS_BASE_HI": 0xA9B5, "SP_CS_PVT_MEM_PARAM": 0xA9B6,
          "SP_CS_PVT_MEM_BASE": 0xA9B7, "SP_CS_PVT_MEM_BASE_HI": 0xA9B8, "SP_CS_PVT_MEM_SIZE": 0xA9B9, "SP_CS_TSIZE": 0xA9BA,
          "SP_CS_CONFIG": 0xA9BB, "SP_CS_INSTR_SIZE": 0xA9BC, "SP_CS_PVT_MEM_STACK_OFFSET": 0xA9BD,
          "SP_CS_WIE_CNTL_0": 0xA9C2, "SP_CS_WIE_CNTL_1": 0xA9C3, "SP_CS_SAMPLER_BASE": 0xA9E2, "SP_CS_SAMPLER_BASE_HI": 0xA9E3,
          "SP_CS_TEXMEMOBJ_BASE": 0xA9E6, "SP_CS_TEXMEMOBJ_BASE_HI": 0xA9E7, "SP_CS_USIZE": 0xAA00, "SP_MODE_CNTL": 0xAB00,
          "SP_PERFCTR_SHADER_MASK": 0xAE0F, "TPL1_CS_BORDER_COLOR_BASE": 0xB180, "TPL1_CS_BORDER_COLOR_BASE_HI": 0xB181,
          "TPL1_MODE_CNTL": 0xB309, "TPL1_DBG_ECO_CNTL": 0xB600}
REGS = {6: {**COMMON, "SP_CS_UAV_BASE": 0xA9F2, "SP_CS_UAV_BASE_HI": 0xA9F3, "SP_REG_PROG_ID_0": 0xB983, "SP_REG_PROG_ID_1": 0xB984,
            "SP_REG_PROG_ID_2": 0xB985, "SP_REG_PROG_ID_3": 0xB986, "SP_CS_CONST_CONFIG": 0xB987,
            **{f"SP_CS_NDRANGE_{i}": 0xB990 + i for i in range(7)}, "SP_CS_CONST_CONFIG_0": 0xB997, "SP_CS_WGE_CNTL": 0xB998,
            "SP_CS_KERNEL_GROUP_X": 0xB999, "SP_CS_KERNEL_GROUP_Y": 0xB99A, "SP_CS_KERNEL_GROUP_Z": 0xB99B,
            "HLSQ_CS_CTRL_REG1": 0xB9D0, "SP_UPDATE_CNTL": 0xBB08},
        7: {**COMMON, "SP_CS_UAV_BASE": 0xA9F8, "SP_CS_UAV_BASE_HI": 0xA9F9, "SP_REG_PROG_ID_0": 0xA9C8, "SP_REG_PROG_ID_1": 0xA9C9,
            "SP_REG_PROG_ID_2": 0xA9CA, "SP_REG_PROG_ID_3": 0xA9CB, "SP_CS_CONST_CONFIG": 0xA9CD,
            **{f"SP_CS_NDRANGE_{i}": 0xA9D4 + i for i in range(7)}, "SP_CS_WGE_CNTL": 0xA9DB,
            "SP_CS_KERNEL_GROUP_X": 0xA9DC, "SP_CS_KERNEL_GROUP_Y": 0xA9DD, "SP_CS_KERNEL_GROUP_Z": 0xA9DE,
            "SP_CS_NDRANGE_7": 0xA9DF, "SP_UPDATE_CNTL": 0xAB1F}}
REG_NAMES = {gen: {v: k for k, v in regs.items()} for gen, regs in REGS.items()}
# where the workgroup-id / local-id register ids come from: SP_CS_CONST_CONFIG_0 (variants A6XX) on a6xx; on a7xx only
# SP_CS_WIE_CNTL_0 ("new in a6xx gen4, matches SP_CS_CONST_CONFIG_0") exists
IDS_REG = {6: "SP_CS_CONST_CONFIG_0", 7: "SP_CS_WIE_CNTL_0"}

# register fields (a6xx.xml bitsets)
FIELDS = {
  "SP_CS_CNTL_0": {"THREADMODE": (0, 1), "HALFREGFOOTPRINT": (1, 6), "FULLREGFOOTPRINT": (7, 6), "BRANCHSTACK": (14, 6),
                   "THREADSIZE": (20, 1), "EARLYPREAMBLE": (23, 1), "MERGEDREGS": (31, 1)},   # a6xx_sp_xs_cntl_0 + SP_CS_CNTL_0
  "SP_CS_CNTL_1": {"SHARED_SIZE": (0, 5), "CONSTANTRAMMODE": (5, 2)},
  "SP_CS_CONST_CONFIG": {"CONSTLEN": (0, 8), "ENABLED": (8, 1)},                                # a6xx_xs_const_config (CONSTLEN shr=2)
  "SP_CS_NDRANGE_0": {"KERNELDIM": (0, 2), "LOCALSIZEX": (2, 10), "LOCALSIZEY": (12, 10), "LOCALSIZEZ": (22, 10)},
  "SP_CS_CONST_CONFIG_0": {"WGIDCONSTID": (0, 8), "WGSIZECONSTID": (8, 8), "WGOFFSETCONSTID": (16, 8), "LOCALIDREGID": (24, 8)},
  "SP_CS_WIE_CNTL_0": {"WGIDCONSTID": (0, 8), "WGSIZECONSTID": (8, 8), "WGOFFSETCONSTID": (16, 8), "LOCALIDREGID": (24, 8)},
  "SP_CS_CONFIG": {"BINDLESS_TEX": (0, 1), "BINDLESS_SAMP": (1, 1), "BINDLESS_UAV": (2, 1), "BINDLESS_UBO": (3, 1),
                   "ENABLED": (8, 1), "NTEX": (9, 8), "NSAMP": (17, 5), "NUAV": (22, 7)},        # a6xx_sp_xs_config
  "SP_UPDATE_CNTL": {"CS_STATE": (5, 1), "CS_UAV": (6, 1), "CS_BINDLESS": (9, 5)},
  "SP_MODE_CNTL": {"CONSTANT_DEMOTION_ENABLE": (0, 1), "ISAMMODE": (1, 2), "SHARED_CONSTS_ENABLE": (3, 1)},
  "SP_CS_TSIZE": {"COUNT": (0, 8)}, "SP_CS_USIZE": {"COUNT": (0, 7)},                            # reg32 low=0 high=7 / high=6
  "SP_CS_WGE_CNTL": {"LINEARLOCALIDREGID": (0, 8), "THREADSIZE": (9, 1)},                       # THREADSIZE "Must match SP_CS_CTRL"
}
ISAM_MODES = {1: "ISAMMODE_CL", 2: "ISAMMODE_GL"}   # a6xx.xml <enum name="a6xx_isam_mode">
CONSTANT_RAM_VEC4 = {0: 128, 1: 192, 2: 256, 3: 512}   # a6xx_const_ram_mode: CONSTLEN_128 .. CONSTLEN_512
CONSTLEN_SHR = 2                             # a6xx_xs_const_config CONSTLEN shr="2": the field holds vec4 count / 4
SHARED_SIZE_UNIT, SHARED_SIZE_ALL = 1024, 32 * 1024  # SP_CS_CNTL_1 SHARED_SIZE: 0 = all 32k, else (SHARED_SIZE + 1) * 1k

def fields_of(name: str, value: int) -> dict[str, int]:
  return {f: field(value, *bits) for f, bits in FIELDS.get(name, {}).items()}
