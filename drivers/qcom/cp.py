"""Adreno command-processor (CP) packets and the compute registers tg's QCOM driver writes, for a6xx and a7xx.
A packet is a type-4 header (write consecutive registers) or a type-7 header (an opcode with a payload); both carry
odd-parity bits over their count and register/opcode fields. Register offsets are dword offsets from Mesa's
src/freedreno/registers/adreno/a6xx.xml, which describes both generations (elements with variants="A6XX" or
"A7XX-"); packet opcodes and payload layouts from src/freedreno/registers/adreno/adreno_pm4.xml. A payload word may
be a UOp or PatchSlot (filled in at submit), so field builders take only the words that are always plain ints."""
from __future__ import annotations
from dataclasses import dataclass
from typing import Any
from drivers.hcq import hi32, lo32

# adreno_pm4.xml <enum name="adreno_pm4_packet_type">
CP_TYPE4_PKT, CP_TYPE7_PKT = 0x40000000, 0x70000000

def parity(x: int) -> int:
  """The odd-parity bit of a header field: 1 when `x` has an even number of set bits (Linux adreno_pm4types.h PM4_PARITY)."""
  return (bin(x).count("1") + 1) & 1

def pkt4(reg: int, *values: Any) -> list[Any]:
  """Type-4 packet: `values` into consecutive registers from dword offset `reg`: [6:0] count, [7] its parity,
  [25:8] register, [27] its parity, [31:28] 4 (Linux adreno_pm4types.h cp_type4_packet)."""
  if not 0 < len(values) <= 0x7F: raise ValueError(f"a type-4 packet writes 1..127 registers, not {len(values)}")
  if not 0 <= reg < 1 << 18: raise ValueError(f"register offset {reg:#x} doesn't fit a type-4 header's 18 bits")
  n = len(values)
  return [CP_TYPE4_PKT | n | parity(n) << 7 | reg << 8 | parity(reg) << 27, *values]

def pkt7(opcode: int, *payload: Any) -> list[Any]:
  """Type-7 packet: [13:0] payload dwords, [15] its parity, [22:16] opcode, [23] its parity, [31:28] 7
  (Linux adreno_pm4types.h cp_type7_packet)."""
  n = len(payload)
  if n >= 1 << 14: raise ValueError(f"a type-7 packet carries at most {(1 << 14) - 1} dwords, not {n}")
  return [CP_TYPE7_PKT | n | parity(n) << 15 | opcode << 16 | parity(opcode) << 23, *payload]

# adreno_pm4.xml <enum name="adreno_pm4_type3_packets">
CP_NOP, CP_WAIT_MEM_WRITES, CP_WAIT_FOR_ME, CP_WAIT_FOR_IDLE = 0x10, 0x12, 0x13, 0x26
CP_EXEC_CS, CP_LOAD_STATE6_FRAG, CP_WAIT_REG_MEM, CP_MEM_WRITE, CP_REG_TO_MEM = 0x33, 0x34, 0x3C, 0x3D, 0x3E
CP_EVENT_WRITE = CP_EVENT_WRITE7 = 0x46  # the same opcode; a7xx's payload differs (variants A2XX-A6XX / A7XX-)
CP_SET_MARKER, CP_MEMCPY = 0x65, 0x75
# <enum name="vgt_event_type">: CACHE_FLUSH_TS writes back UCHE then writes the value; CACHE_INVALIDATE is a6xx's,
# CACHE_FLUSH7/CACHE_INVALIDATE7 a7xx's
CACHE_FLUSH_TS, CACHE_INVALIDATE, CACHE_FLUSH7, CACHE_INVALIDATE7 = 0x04, 0x31, 0x32, 0x33
# <domain name="CP_SET_MARKER"> <enum name="a6xx_marker">
RM6_COMPUTE = 8
# <domain name="CP_LOAD_STATE6"> enums a6xx_state_type, a6xx_state_src, a6xx_state_block
ST6_SHADER, ST6_CONSTANTS, ST6_UAV = 0, 1, 3
SS6_DIRECT, SS6_INDIRECT = 0, 2
SB6_CS_TEX, SB6_CS_SHADER = 5, 13  # in SB6_CS_TEX, ST6_SHADER loads samplers and ST6_CONSTANTS texture descriptors
# <enum name="cp_cond_function">, <enum name="poll_memory_type">
WRITE_EQ, WRITE_GE, POLL_MEMORY = 3, 5, 1
# a6xx.xml <enum name="a6xx_threadsize">, <enum name="a6xx_isam_mode">, <enum name="a6xx_const_ram_mode">
THREAD64, THREAD128 = 0, 1
ISAMMODE_GL = 2
CONSTLEN_128, CONSTLEN_192, CONSTLEN_256, CONSTLEN_512 = 0, 1, 2, 3
INVALID_REG = 0xFC  # regid(63, 0): a register id field that names no register (ir3 INVALID_REG)
ALWAYS_ON_HZ = 19_200_000  # CP_ALWAYS_ON_COUNTER's rate (kgsl adreno.h: the always-on counter ticks at 19.2 MHz)

@dataclass(frozen=True)
class Registers:
  """The compute registers of one generation (a6xx.xml; None where the generation has no such register)."""
  gen: int
  sp_update_cntl: int         # <reg32 name="SP_UPDATE_CNTL"> 0xbb08 A6XX, 0xab1f A7XX-
  sp_cs_const_config: int     # <reg32 name="SP_CS_CONST_CONFIG"> 0xb987 A6XX, 0xa9cd A7XX-
  sp_cs_ndrange_0: int        # <reg32 name="SP_CS_NDRANGE_0">, followed by NDRANGE_1..6: 0xb990 A6XX, 0xa9d4 A7XX-
  sp_cs_wge_cntl: int         # <reg32 name="SP_CS_WGE_CNTL"> 0xb998 A6XX, 0xa9db A7XX-
  sp_cs_kernel_group_x: int   # <reg32 name="SP_CS_KERNEL_GROUP_X"> (then _Y, _Z): 0xb999 A6XX, 0xa9dc A7XX-
  sp_cs_uav_base: int         # <reg64 name="SP_CS_UAV_BASE"> 0xa9f2 A6XX, 0xa9f8 A7XX-
  sp_cs_const_config_0: int | None  # <reg32 name="SP_CS_CONST_CONFIG_0"> 0xb997, A6XX only
  sp_cs_wie_cntl_0: int | None      # <reg32 name="SP_CS_WIE_CNTL_0"> 0xa9c2 (a6xx gen4 and A7XX-; tg writes it on a7xx)
  sp_cs_wie_cntl_1: int | None      # <reg32 name="SP_CS_WIE_CNTL_1" variants="A7XX-"> 0xa9c3 (THREADSIZE at bit 8)
  sp_cs_ndrange_7: int | None       # <reg32 name="SP_CS_NDRANGE_7" variants="A7XX-"> 0xa9df: the last workgroup's size
  sp_ps_wave_cntl: int | None       # <reg32 name="SP_PS_WAVE_CNTL" variants="A7XX-"> 0xa9c6 (computerator sets it on a7xx)
  sp_reg_prog_id_0: int | None      # <reg32 name="SP_REG_PROG_ID_0" variants="A7XX-"> 0xa9c8 (then _1.._3)
  # the same on both (no variants)
  sp_cs_cntl_0: int = 0xA9B0        # <reg32 name="SP_CS_CNTL_0">, then SP_CS_CNTL_1, BOOLEAN_CF_MASK, PROGRAM_COUNTER_OFFSET, SP_CS_BASE (64)
  sp_cs_tsize: int = 0xA9BA         # <reg32 name="SP_CS_TSIZE">: textures loaded; then SP_CS_CONFIG, SP_CS_INSTR_SIZE
  sp_cs_config: int = 0xA9BB        # <reg32 name="SP_CS_CONFIG">, then SP_CS_INSTR_SIZE 0xa9bc
  sp_cs_sampler_base: int = 0xA9E2  # <reg64 name="SP_CS_SAMPLER_BASE">
  sp_cs_texmemobj_base: int = 0xA9E6  # <reg64 name="SP_CS_TEXMEMOBJ_BASE">: the texture descriptors
  sp_cs_usize: int = 0xAA00         # <reg32 name="SP_CS_USIZE">: UAVs (IBOs) loaded
  sp_mode_cntl: int = 0xAB00        # <reg32 name="SP_MODE_CNTL">
  cp_always_on_counter: int = 0x0980  # <reg64 name="CP_ALWAYS_ON_COUNTER">

A6XX = Registers(6, sp_update_cntl=0xBB08, sp_cs_const_config=0xB987, sp_cs_ndrange_0=0xB990, sp_cs_wge_cntl=0xB998,
                 sp_cs_kernel_group_x=0xB999, sp_cs_uav_base=0xA9F2, sp_cs_const_config_0=0xB997, sp_cs_wie_cntl_0=None,
                 sp_cs_wie_cntl_1=None, sp_cs_ndrange_7=None, sp_ps_wave_cntl=None, sp_reg_prog_id_0=None)
A7XX = Registers(7, sp_update_cntl=0xAB1F, sp_cs_const_config=0xA9CD, sp_cs_ndrange_0=0xA9D4, sp_cs_wge_cntl=0xA9DB,
                 sp_cs_kernel_group_x=0xA9DC, sp_cs_uav_base=0xA9F8, sp_cs_const_config_0=None, sp_cs_wie_cntl_0=0xA9C2,
                 sp_cs_wie_cntl_1=0xA9C3, sp_cs_ndrange_7=0xA9DF, sp_ps_wave_cntl=0xA9C6, sp_reg_prog_id_0=0xA9C8)
REGISTERS = {6: A6XX, 7: A7XX}

# ---------------- register fields (a6xx.xml bitsets) ----------------

SP_UPDATE_CNTL_CS_STATE, SP_UPDATE_CNTL_CS_UAV = 1 << 5, 1 << 6    # <reg32 name="SP_UPDATE_CNTL"> CS_STATE, CS_UAV
SP_MODE_CNTL_CONSTANT_DEMOTION_ENABLE = 1 << 0                      # <reg32 name="SP_MODE_CNTL">, ISAMMODE at [2:1]
SP_CS_CONFIG_ENABLED = 1 << 8                                       # <bitset name="a6xx_sp_xs_config"> ENABLED
SP_CS_CONST_CONFIG_ENABLED = 1 << 8                                 # <bitset name="a6xx_xs_const_config"> ENABLED

def sp_mode_cntl() -> int: return SP_MODE_CNTL_CONSTANT_DEMOTION_ENABLE | ISAMMODE_GL << 1

def sp_cs_cntl_0(half_regs: int, full_regs: int, branchstack: int, threadsize: int = THREAD64) -> int:
  """<bitset name="a6xx_sp_xs_cntl_0"> HALFREGFOOTPRINT [6:1], FULLREGFOOTPRINT [12:7], BRANCHSTACK [19:14]; SP_CS_CNTL_0
  THREADSIZE b20, MERGEDREGS b31 left 0 (full and half registers are separate files)."""
  for name, v in (("half register footprint", half_regs), ("full register footprint", full_regs), ("branch stack", branchstack)):
    if not 0 <= v < 64: raise ValueError(f"{name} {v} doesn't fit SP_CS_CNTL_0's 6-bit field")
  return half_regs << 1 | full_regs << 7 | branchstack << 14 | threadsize << 20

def sp_cs_config(textures: int = 0, samplers: int = 0, uavs: int = 0) -> int:
  """<bitset name="a6xx_sp_xs_config"> ENABLED b8, NTEX [16:9], NSAMP [21:17], NUAV [28:22] (not bindless)."""
  for name, n, bits in (("textures", textures, 8), ("samplers", samplers, 5), ("UAVs", uavs, 7)):
    if not 0 <= n < 1 << bits: raise ValueError(f"{n} {name} don't fit SP_CS_CONFIG's {bits}-bit count")
  return SP_CS_CONFIG_ENABLED | textures << 9 | samplers << 17 | uavs << 22

def const_ram_mode(constlen: int) -> int:
  """<enum name="a6xx_const_ram_mode"> for `constlen` vec4s, chosen as computerator a6xx.cc cs_program_emit_regs does."""
  return CONSTLEN_512 if constlen > 256 else CONSTLEN_256 if constlen > 192 else CONSTLEN_192 if constlen > 128 else CONSTLEN_128

def sp_cs_cntl_1(shared_bytes: int, constlen: int) -> int:
  """<reg32 name="SP_CS_CNTL_1"> SHARED_SIZE [4:0] ((SHARED_SIZE + 1) KiB enabled; computerator programs
  max((shared - 1) / 1024, 1)), CONSTANTRAMMODE [6:5]."""
  return max((shared_bytes - 1) // 1024, 1) | const_ram_mode(constlen) << 5

def sp_cs_const_config(constlen: int) -> int:
  """<bitset name="a6xx_xs_const_config"> CONSTLEN [7:0] with shr="2" (vec4s / 4; computerator aligns to 4), ENABLED b8."""
  units = -(-constlen // 4)
  if units > 0xFF: raise ValueError(f"{constlen} constant vec4s don't fit SP_CS_CONST_CONFIG's CONSTLEN")
  return units | SP_CS_CONST_CONFIG_ENABLED

def sp_cs_ndrange_0(local: tuple[int, int, int]) -> int:
  """<reg32 name="SP_CS_NDRANGE_0"> KERNELDIM [1:0] = 3, LOCALSIZEX/Y/Z - 1 at [11:2], [21:12], [31:22]."""
  if any(not 1 <= n <= 1024 for n in local): raise ValueError(f"local size {local}: each dimension must be 1..1024")
  return 3 | (local[0] - 1) << 2 | (local[1] - 1) << 12 | (local[2] - 1) << 22

def sp_cs_ndrange_7(local: tuple[int, int, int]) -> int:
  """<reg32 name="SP_CS_NDRANGE_7" variants="A7XX-"> LOCALSIZEX/Y/Z - 1 at [11:2], [21:12], [31:22] (no KERNELDIM)."""
  return sp_cs_ndrange_0(local) & ~3

def work_ids(wgid_regid: int, localid_regid: int) -> int:
  """SP_CS_CONST_CONFIG_0 (a6xx) / SP_CS_WIE_CNTL_0: WGIDCONSTID [7:0], WGSIZECONSTID [15:8], WGOFFSETCONSTID [23:16]
  (both unused: INVALID_REG), LOCALIDREGID [31:24]."""
  return wgid_regid | INVALID_REG << 8 | INVALID_REG << 16 | localid_regid << 24

def sp_cs_wge_cntl(threadsize: int = THREAD64) -> int:
  """<reg32 name="SP_CS_WGE_CNTL"> LINEARLOCALIDREGID [7:0] (unused), THREADSIZE b9 on both generations."""
  return INVALID_REG | threadsize << 9

def sp_cs_wie_cntl_1(threadsize: int = THREAD64) -> int:
  """<reg32 name="SP_CS_WIE_CNTL_1" variants="A7XX-"> LINEARLOCALIDREGID [7:0] (unused), THREADSIZE b8,
  WORKITEMRASTORDER b15 = LINEAR (0)."""
  return INVALID_REG | threadsize << 8

# ---------------- packet payloads (adreno_pm4.xml domains) ----------------

def load_state6_0(state_type: int, state_src: int, state_block: int, num_unit: int, dst_off: int = 0) -> int:
  """<domain name="CP_LOAD_STATE6"> dword 0: DST_OFF [13:0], STATE_TYPE [15:14], STATE_SRC [17:16], STATE_BLOCK [21:18],
  NUM_UNIT [31:22]."""
  if not 0 < num_unit < 1 << 10: raise ValueError(f"CP_LOAD_STATE6 loads 1..1023 units, not {num_unit}")
  return dst_off | state_type << 14 | state_src << 16 | state_block << 18 | num_unit << 22

def shader_preload_units(gen: int, instrlen: int) -> int:
  """How many of a shader's 128-byte units to preload with CP_LOAD_STATE6: no more than the SP's instruction cache holds
  (Mesa freedreno_devices.py instr_cache_size: 64 on the first a6xx, 127 on later ones and a7xx; fd6_program.cc
  fd6_emit_shader preloads MIN2(instrlen, instr_cache_size)); the SP fetches the rest from SP_CS_BASE."""
  return min(instrlen, 127 if gen >= 7 else 64)

def load_state6(state_type: int, num_unit: int, address: Any, state_block: int = SB6_CS_SHADER) -> list[Any]:
  """CP_LOAD_STATE6_FRAG of `num_unit` units of the compute shader's state from GPU memory at `address` (the FRAG form
  loads CS state: adreno_pm4.xml's note on CP_LOAD_STATE6)."""
  return pkt7(CP_LOAD_STATE6_FRAG, load_state6_0(state_type, SS6_INDIRECT, state_block, num_unit), lo32(address), hi32(address))

def exec_cs(groups: tuple[int, int, int]) -> list[Any]:
  """<domain name="CP_EXEC_CS">: dword 0 reserved, then NGROUPS_X/Y/Z."""
  return pkt7(CP_EXEC_CS, 0, *groups)

def event_write(gen: int, event: int, address: Any = None, value: Any = None) -> list[Any]:
  """CP_EVENT_WRITE (a6xx: <domain name="CP_EVENT_WRITE"> EVENT [7:0], then ADDR (64) and the value) or its a7xx form
  CP_EVENT_WRITE7 (<domain name="CP_EVENT_WRITE7"> EVENT [7:0], WRITE_SRC [22:20] = EV_WRITE_USER_32B (0), WRITE_DST b24 =
  EV_DST_RAM (0), WRITE_ENABLED b27); with an address, the 32-bit `value` is written there once the event is done."""
  if address is None: return pkt7(CP_EVENT_WRITE, event)
  return pkt7(CP_EVENT_WRITE, event | (1 << 27 if gen >= 7 else 0), lo32(address), hi32(address), lo32(value))

def wait_reg_mem(address: Any, reference: Any, function: int = WRITE_GE, delay_cycles: int = 32) -> list[Any]:
  """<domain name="CP_WAIT_REG_MEM">: FUNCTION [2:0], POLL [5:4] = POLL_MEMORY; POLL_ADDR (64), REF, MASK, DELAY_LOOP_CYCLES:
  the CP stalls until (*address & MASK) compares true (unsigned) against REF."""
  return pkt7(CP_WAIT_REG_MEM, function | POLL_MEMORY << 4, lo32(address), hi32(address), lo32(reference), 0xFFFFFFFF, delay_cycles)

def reg_to_mem(reg: int, address: Any, count: int = 2) -> list[Any]:
  """<domain name="CP_REG_TO_MEM">: REG [17:0], CNT [29:18], 64B b30 (a 64-bit register pair); DEST (64)."""
  return pkt7(CP_REG_TO_MEM, reg | count << 18 | 1 << 30, lo32(address), hi32(address))
