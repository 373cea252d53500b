"""How many 32-bit registers each operand of an instruction spans, read from its mnemonic's type suffixes (the ISA
guide's naming: v_cvt_f64_i32 writes 64 bits from a 32-bit source) plus the exceptions whose operands differ from
their suffixes. Decoders use it to print register ranges; the executor to read and write wide values."""
from __future__ import annotations
import re
from functools import lru_cache

_TYPE = re.compile(r"[biuf](8|16|24|32|64|96|128|256|512)")
MASK = -1  # a lane mask (VCC-like): one SGPR in wave32, a pair in wave64

# mnemonic -> (dst, src0, src1, src2) widths in registers where the suffix rule is wrong (RDNA3 ISA guide, per opcode)
_EXCEPTIONS: dict[str, tuple[int, ...]] = {
  "v_lshlrev_b64": (2, 1, 2), "v_lshrrev_b64": (2, 1, 2), "v_ashrrev_i64": (2, 1, 2),
  "v_ldexp_f64": (2, 2, 1), "v_trig_preop_f64": (2, 2, 1), "v_cmp_class_f64": (MASK, 2, 1),
  "v_cmpx_class_f64": (MASK, 2, 1), "v_mad_u64_u32": (2, 1, 1, 2), "v_mad_i64_i32": (2, 1, 1, 2),
  "s_lshl_b64": (2, 2, 1), "s_lshr_b64": (2, 2, 1), "s_ashr_i64": (2, 2, 1), "s_bfe_u64": (2, 2, 1),
  "s_bfe_i64": (2, 2, 1), "s_bfm_b64": (2, 1, 1), "s_bitset0_b64": (2, 1), "s_bitset1_b64": (2, 1),
  "s_bitcmp0_b64": (0, 2, 1), "s_bitcmp1_b64": (0, 2, 1), "s_bitreplicate_b64_b32": (2, 1),
  "s_getpc_b64": (2,), "s_setpc_b64": (0, 2), "s_swappc_b64": (2, 2), "s_rfe_b64": (0, 2),
  "v_readlane_b32": (1, 1, 1), "v_writelane_b32": (1, 1, 1), "v_qsad_pk_u16_u8": (2, 2, 1, 2),
  "v_mqsad_pk_u16_u8": (2, 2, 1, 2), "v_mqsad_u32_u8": (4, 2, 1, 4),
}

def _regs(bits: int) -> int: return max(1, bits // 32)

@lru_cache(maxsize=None)
def widths(name: str) -> tuple[int, ...]:
  """(dst, src0, src1, src2) register counts; MASK where the operand is a lane mask (VOPC results, carries)."""
  if name in _EXCEPTIONS: return _EXCEPTIONS[name] + (1,) * (4 - len(_EXCEPTIONS[name]))
  types = [int(m.group(1)) for p in name.split("_") if (m := _TYPE.fullmatch(p))]
  if not types: return (1, 1, 1, 1)
  dst, src = _regs(types[0]), _regs(types[-1])
  if name.startswith(("v_cmp_", "v_cmpx_")): return (MASK, src, src, src)
  if name.startswith(("s_cmp_", "s_cmpk_")): return (0, src, src, src)
  return (dst, src, src, src)

def data_regs(name: str) -> int:
  """Registers a memory instruction moves per lane (loads, stores, atomics): b64 -> 2, b96 -> 3, b128 -> 4."""
  for bits, regs in (("b512", 16), ("b256", 8), ("b128", 4), ("b96", 3), ("b64", 2), ("u64", 2), ("i64", 2), ("f64", 2)):
    if name.endswith(bits): return regs
  return 1

@lru_cache(maxsize=None)
def halves(name: str) -> tuple[bool, bool, bool, bool]:
  """Which of (dst, src0, src1, src2) are 16-bit values (true16 operands: one half of a VGPR); packed ops are not."""
  types = [int(m.group(1)) for p in name.split("_") if (m := _TYPE.fullmatch(p))]
  if not types or name.startswith(("v_pk_", "v_dot", "v_fma_mix", "v_wmma")) or "_pk_" in name: return (False,) * 4
  src = types[-1] == 16
  dst = types[0] == 16 and not name.startswith(("v_pack", "v_cmp"))
  if name in ("v_cndmask_b16",): return (True, True, True, False)
  return (dst, src, src, src)
