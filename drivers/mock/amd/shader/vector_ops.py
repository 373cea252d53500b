"""Semantics of the vector ALU (VOP1, VOP2, VOPC, VOP3, VOP3SD, VOP3P) per the RDNA3 ISA guide chapter 16
pseudocode, over all lanes of a group at once: sources read with their abs/neg/opsel modifiers, results written
under EXEC with clamp/omod. Keyed by mnemonic; `OPS[name](state, group, instruction)`."""
from __future__ import annotations
import dataclasses
import numpy as np
from drivers.mock.amd.shader import float_rules as fr
from drivers.mock.amd.shader.instruction import Instruction, Operand
from drivers.mock.amd.shader.wave_state import Group, WaveState

OPS: dict = {}
_DT = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i16": np.int16, "u16": np.uint16, "b16": np.uint16,
       "i32": np.int32, "u32": np.uint32, "b32": np.uint32, "i64": np.int64, "u64": np.uint64, "b64": np.uint64}
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
_VCC = Operand("vcc_lo")

def _size(t: str) -> int: return {"16": 2, "32": 4, "64": 8}[t[1:]]

def src(st: WaveState, g: Group, ins: Instruction, i: int, t: str) -> np.ndarray:
  """Source i as type t (f16/f32/f64/i32/u32/u64/...): 16-bit halves by op_sel, abs/neg on the sign bit, denormals
  flushed where the mode says so."""
  f, op = ins.fields, ins.fields[f"src{i}"]
  size = _size(t)
  if size == 8: raw = np.asarray(st.vread(g, op, 2, 64 if t == "f64" else 32), np.uint64)
  else:
    raw = np.asarray(st.vread(g, op, 1, 16 if size == 2 else 32), np.uint32)
    if size == 2:
      if op.hi or f.get("opsel", 0) >> i & 1: raw = raw >> np.uint32(16)
      raw = (raw & np.uint32(0xFFFF)).astype(np.uint16)
  sign = _UINT[size](1 << (8 * size - 1))
  if f.get("abs", 0) >> i & 1: raw = raw & ~sign
  if f.get("neg", 0) >> i & 1 and "opsel_hi" not in f: raw = raw ^ sign
  x = raw.view(_DT[t])
  if t[0] == "f" and st.flush(t): x = fr.ftz(x)
  return x

# 16-bit results gfx9 writes with the VGPR's upper half cleared (gfx10+ keeps it), by executing mnemonic
# (llvm/lib/Target/AMDGPU/GCNSubtarget.cpp GCNSubtarget::zeroesHigh16BitsOfDest: there V_MAD_U16_e64 and its kin are
# the VI opcodes gfx9 renames v_mad_legacy_u16 etc.; gfx9's own op_sel forms, v_mad_u16 0x204 etc., are not listed.
# v_add_u16 and v_sub_u16 run as RDNA3's v_add_nc_u16 and v_sub_nc_u16, cdna3._RDNA3_NAME)
_GFX9_CLEARS_HIGH = frozenset({
  "v_cvt_f16_f32", "v_cvt_f16_u16", "v_cvt_f16_i16", "v_rcp_f16", "v_rsq_f16", "v_sqrt_f16", "v_log_f16", "v_exp_f16",
  "v_sin_f16", "v_cos_f16", "v_floor_f16", "v_ceil_f16", "v_trunc_f16", "v_rndne_f16", "v_fract_f16", "v_frexp_mant_f16",
  "v_frexp_exp_i16_f16", "v_ldexp_f16", "v_lshlrev_b16", "v_lshrrev_b16", "v_ashrrev_i16", "v_add_nc_u16",
  "v_sub_nc_u16", "v_subrev_u16", "v_mul_lo_u16", "v_add_f16", "v_sub_f16", "v_subrev_f16", "v_mul_f16", "v_max_f16",
  "v_min_f16", "v_max_u16", "v_min_u16", "v_max_i16", "v_min_i16", "v_mad_legacy_f16", "v_mad_legacy_u16",
  "v_mad_legacy_i16", "v_fma_legacy_f16", "v_div_fixup_legacy_f16"})

def dst(st: WaveState, g: Group, ins: Instruction, x, t: str) -> None:
  """Write the result as type t to vdst: omod and clamp for floats, 16-bit results into one half of the VGPR (on gfx9
  most clear the other half)."""
  f = ins.fields
  x = np.asarray(x)
  if t[0] == "f":
    x = x.astype(_DT[t])
    if f.get("omod"): x = (x * _DT[t]({1: 2.0, 2: 4.0, 3: 0.5}[f["omod"]])).astype(_DT[t])
    if f.get("clamp"): x = np.where(np.isnan(x), _DT[t](0), np.clip(x, _DT[t](0), _DT[t](1))).astype(_DT[t])
    if st.flush(t): x = fr.ftz(x)
  else: x = x.astype(_DT[t]) if x.dtype.kind != "f" else x.astype(np.int64).astype(_DT[t])
  bits, hi = np.ascontiguousarray(x).view(_UINT[_size(t)]), f.get("opsel", 0) >> 3 & 1
  if _size(t) == 2 and not hi and st.gfx9_halves and ins.name in _GFX9_CLEARS_HIGH: st.vwrite(g, f["vdst"].index, bits.astype(np.uint32))
  else: write_bits(st, g, f["vdst"], bits, _size(t), hi)

def write_bits(st: WaveState, g: Group, vdst: Operand, bits: np.ndarray, size: int, hi: int = 0) -> None:
  if size == 8: st.vwrite(g, vdst.index, bits, 2)
  elif size == 4: st.vwrite(g, vdst.index, bits)
  else:
    old = st.V[vdst.index, g.ln]
    b = bits.astype(np.uint32)
    st.vwrite(g, vdst.index, (old & np.uint32(0xFFFF)) | b << np.uint32(16) if (vdst.hi or hi) else (old & np.uint32(0xFFFF0000)) | b)

def _op(name: str, types: str, fn) -> None:
  """name computes fn(state, *sources) with types 'dst src0 src1 ...'. An integer op with CLAMP saturates: it is
  computed on int64 sources and clipped to the destination's range (LLVM's *add.sat/*sub.sat)."""
  t = types.split()
  def run(st: WaveState, g: Group, ins: Instruction) -> None:
    srcs = [src(st, g, ins, i, ts) for i, ts in enumerate(t[1:])]
    if ins.fields.get("clamp") and t[0][0] in "iu":
      info = np.iinfo(_DT[t[0]])
      dst(st, g, ins, np.clip(fn(st, *(x.astype(np.int64) for x in srcs)), info.min, info.max), t[0])
    else: dst(st, g, ins, fn(st, *srcs), t[0])
  OPS[name] = run

# ---- float arithmetic (f16, f32, f64)
for ft in ("f16", "f32", "f64"):
  three, two, one = f"{ft} {ft} {ft} {ft}", f"{ft} {ft} {ft}", f"{ft} {ft}"
  _op(f"v_add_{ft}", two, lambda st, a, b: a + b)
  _op(f"v_sub_{ft}", two, lambda st, a, b: a - b)
  _op(f"v_subrev_{ft}", two, lambda st, a, b: b - a)
  _op(f"v_mul_{ft}", two, lambda st, a, b: a * b)
  _op(f"v_max_{ft}", two, lambda st, a, b: fr.minmax(a, b, True, st.ieee))
  _op(f"v_min_{ft}", two, lambda st, a, b: fr.minmax(a, b, False, st.ieee))
  _op(f"v_max3_{ft}", three, lambda st, a, b, c: fr.minmax(fr.minmax(a, b, True, st.ieee), c, True, st.ieee))
  _op(f"v_min3_{ft}", three, lambda st, a, b, c: fr.minmax(fr.minmax(a, b, False, st.ieee), c, False, st.ieee))
  _op(f"v_med3_{ft}", three, lambda st, a, b, c: fr.minmax(fr.minmax(a, b, False, st.ieee), fr.minmax(fr.minmax(a, b, True, st.ieee), c, False, st.ieee), True, st.ieee))
  _op(f"v_fma_{ft}", three, lambda st, a, b, c: fr.fma(a, b, c))
  _op(f"v_fmac_{ft}", three, lambda st, a, b, c: fr.fma(a, b, c))
  _op(f"v_fmamk_{ft}", three, lambda st, a, b, c: fr.fma(a, b, c))
  _op(f"v_fmaak_{ft}", three, lambda st, a, b, c: fr.fma(a, b, c))
  _op(f"v_div_fixup_{ft}", three, lambda st, q, d, n: fr.div_fixup(q, d, n))
  _op(f"v_trunc_{ft}", one, lambda st, a: np.trunc(a))
  _op(f"v_ceil_{ft}", one, lambda st, a: np.ceil(a))
  _op(f"v_floor_{ft}", one, lambda st, a: np.floor(a))
  _op(f"v_rndne_{ft}", one, lambda st, a: np.rint(a))
  _op(f"v_fract_{ft}", one, lambda st, a: np.where(np.isinf(a), np.nan, np.minimum(a - np.floor(a), np.nextafter(a.dtype.type(1), a.dtype.type(0)))).astype(a.dtype))
  _op(f"v_rcp_{ft}", one, lambda st, a: (1 / a.astype(np.float64)).astype(a.dtype))
  _op(f"v_rsq_{ft}", one, lambda st, a: (1 / np.sqrt(a.astype(np.float64))).astype(a.dtype))
  _op(f"v_sqrt_{ft}", one, lambda st, a: np.sqrt(a))
# gfx12 IEEE 754-2019 minimum/maximum: a NaN operand gives a quiet NaN, -0 < +0 (RDNA4 ISA guide V_MINIMUM_F32)
def minimum_maximum(a: np.ndarray, b: np.ndarray, is_max: bool) -> np.ndarray:
  r = fr.minmax(a, b, is_max, False)
  return np.where(np.isnan(a) | np.isnan(b), a.dtype.type(np.nan), r).astype(a.dtype)
for ft in ("f16", "f32", "f64"):
  _op(f"v_maximum_{ft}", f"{ft} {ft} {ft}", lambda st, a, b: minimum_maximum(a, b, True))
  _op(f"v_minimum_{ft}", f"{ft} {ft} {ft}", lambda st, a, b: minimum_maximum(a, b, False))
  _op(f"v_maximum3_{ft}", f"{ft} {ft} {ft} {ft}", lambda st, a, b, c: minimum_maximum(minimum_maximum(a, b, True), c, True))
  _op(f"v_minimum3_{ft}", f"{ft} {ft} {ft} {ft}", lambda st, a, b, c: minimum_maximum(minimum_maximum(a, b, False), c, False))
_op("v_ldexp_f32", "f32 f32 i32", lambda st, a, e: np.ldexp(a, np.clip(e, -1000, 1000)).astype(np.float32))
_op("v_ldexp_f64", "f64 f64 i32", lambda st, a, e: np.ldexp(a, np.clip(e, -3000, 3000)))
_op("v_ldexp_f16", "f16 f16 i16", lambda st, a, e: np.ldexp(a.astype(np.float32), np.clip(e.astype(np.int32), -100, 100)).astype(np.float16))
_op("v_mul_dx9_zero_f32", "f32 f32 f32", lambda st, a, b: np.where((a == 0) | (b == 0), np.float32(0), a * b))
_op("v_fma_dx9_zero_f32", "f32 f32 f32 f32", lambda st, a, b, c: np.where((a == 0) | (b == 0), c, fr.fma(a, b, c)))
_op("v_fmac_dx9_zero_f32", "f32 f32 f32 f32", lambda st, a, b, c: np.where((a == 0) | (b == 0), c, fr.fma(a, b, c)))
_op("v_rcp_iflag_f32", "f32 f32", lambda st, a: (1 / a.astype(np.float64)).astype(np.float32))
_op("v_exp_f32", "f32 f32", lambda st, a: np.exp2(a))
_op("v_log_f32", "f32 f32", lambda st, a: np.log2(a))
_op("v_exp_f16", "f16 f16", lambda st, a: np.exp2(a.astype(np.float32)).astype(np.float16))
_op("v_log_f16", "f16 f16", lambda st, a: np.log2(a.astype(np.float32)).astype(np.float16))
_TWO_PI = 2 * np.pi
_op("v_sin_f32", "f32 f32", lambda st, a: np.sin(a.astype(np.float64) * _TWO_PI).astype(np.float32))
_op("v_cos_f32", "f32 f32", lambda st, a: np.cos(a.astype(np.float64) * _TWO_PI).astype(np.float32))
_op("v_sin_f16", "f16 f16", lambda st, a: np.sin(a.astype(np.float64) * _TWO_PI).astype(np.float16))
_op("v_cos_f16", "f16 f16", lambda st, a: np.cos(a.astype(np.float64) * _TWO_PI).astype(np.float16))
def _frexp_mant(st, a): return np.where(np.isfinite(a), np.frexp(a)[0], a).astype(a.dtype)
def _frexp_exp(st, a): return np.where(np.isfinite(a), np.frexp(a)[1], 0)
for ft, it in (("f32", "i32"), ("f64", "i32"), ("f16", "i16")):
  _op(f"v_frexp_mant_{ft}", f"{ft} {ft}", _frexp_mant)
  _op(f"v_frexp_exp_{it}_{ft}", f"{it} {ft}", _frexp_exp)

# ---- conversions (round to nearest even, float->int truncates and saturates: RDNA3 ISA guide f32_to_i32 etc.)
_op("v_cvt_f32_i32", "f32 i32", lambda st, a: a.astype(np.float32))
_op("v_cvt_f32_u32", "f32 u32", lambda st, a: a.astype(np.float32))
_op("v_cvt_i32_f32", "i32 f32", lambda st, a: fr.to_int(a, np.int32))
_op("v_cvt_u32_f32", "u32 f32", lambda st, a: fr.to_int(a, np.uint32))
_op("v_cvt_floor_i32_f32", "i32 f32", lambda st, a: fr.to_int(np.floor(a), np.int32))
_op("v_cvt_nearest_i32_f32", "i32 f32", lambda st, a: fr.to_int(np.floor(a + np.float32(0.5)), np.int32))
_op("v_cvt_f16_f32", "f16 f32", lambda st, a: a.astype(np.float16))
_op("v_cvt_f32_f16", "f32 f16", lambda st, a: a.astype(np.float32))
_op("v_cvt_f64_f32", "f64 f32", lambda st, a: a.astype(np.float64))
_op("v_cvt_f32_f64", "f32 f64", lambda st, a: a.astype(np.float32))
_op("v_cvt_f64_i32", "f64 i32", lambda st, a: a.astype(np.float64))
_op("v_cvt_f64_u32", "f64 u32", lambda st, a: a.astype(np.float64))
_op("v_cvt_i32_f64", "i32 f64", lambda st, a: fr.to_int(a, np.int32))
_op("v_cvt_u32_f64", "u32 f64", lambda st, a: fr.to_int(a, np.uint32))
_op("v_cvt_f16_i16", "f16 i16", lambda st, a: a.astype(np.float16))
_op("v_cvt_f16_u16", "f16 u16", lambda st, a: a.astype(np.float16))
_op("v_cvt_i16_f16", "i16 f16", lambda st, a: fr.to_int(a, np.int16))
_op("v_cvt_u16_f16", "u16 f16", lambda st, a: fr.to_int(a, np.uint16))
_op("v_cvt_i32_i16", "i32 i16", lambda st, a: a.astype(np.int32))
_op("v_cvt_u32_u16", "u32 u16", lambda st, a: a.astype(np.uint32))
for k in range(4): _op(f"v_cvt_f32_ubyte{k}", "f32 u32", lambda st, a, k=k: ((a >> np.uint32(8 * k)) & np.uint32(0xFF)).astype(np.float32))
_op("v_cvt_pk_rtz_f16_f32", "u32 f32 f32", lambda st, a, b: fr.to_f16_rtz(a).view(np.uint16).astype(np.uint32) | fr.to_f16_rtz(b).view(np.uint16).astype(np.uint32) << np.uint32(16))
_op("v_pack_b32_f16", "u32 f16 f16", lambda st, a, b: a.view(np.uint16).astype(np.uint32) | b.view(np.uint16).astype(np.uint32) << np.uint32(16))
# gfx950 (CDNA4 ISA guide V_CVT_PK_F16_F32): two floats to halves rounded to nearest even, S0 in the low half
_op("v_cvt_pk_f16_f32", "u32 f32 f32", lambda st, a, b: a.astype(np.float16).view(np.uint16).astype(np.uint32) | b.astype(np.float16).view(np.uint16).astype(np.uint32) << np.uint32(16))
def _bf16_bits(x: np.ndarray) -> np.ndarray:
  """float32 -> bfloat16 bits, rounded to nearest even (NaN stays a quiet NaN)."""
  bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
  rounded = (bits + np.uint32(0x7FFF) + (bits >> np.uint32(16) & np.uint32(1))) >> np.uint32(16)
  return np.where(np.isnan(x), (bits >> np.uint32(16)) | np.uint32(0x40), rounded).astype(np.uint32)
_op("v_cvt_pk_bf16_f32", "u32 f32 f32", lambda st, a, b: _bf16_bits(a) | _bf16_bits(b) << np.uint32(16))  # gfx950, as v_cvt_pk_f16_f32
_op("v_cvt_pk_u16_u32", "u32 u32 u32", lambda st, a, b: np.minimum(a, 0xFFFF) | np.minimum(b, 0xFFFF) << np.uint32(16))
_op("v_cvt_pk_i16_i32", "u32 i32 i32", lambda st, a, b: (np.clip(a, -32768, 32767).astype(np.uint32) & np.uint32(0xFFFF)) | np.clip(b, -32768, 32767).astype(np.uint32) << np.uint32(16))

# ---- integer arithmetic and bit operations
M32 = np.uint64(0xFFFFFFFF)
def _u64(x) -> np.ndarray: return np.asarray(x).astype(np.uint64)
def _sx(x, bits: int) -> np.ndarray:
  """Sign-extend the low `bits` of x to int64."""
  v = _u64(x) & np.uint64((1 << bits) - 1)
  return (v.astype(np.int64) ^ (1 << (bits - 1))) - (1 << (bits - 1))
_op("v_mov_b32", "u32 u32", lambda st, a: a)
_op("v_mov_b16", "u16 u16", lambda st, a: a)
_op("v_mov_b64", "u64 u64", lambda st, a: a)  # CDNA3 only
_op("v_add_nc_u32", "u32 u32 u32", lambda st, a, b: a + b)
_op("v_sub_nc_u32", "u32 u32 u32", lambda st, a, b: a - b)
_op("v_subrev_nc_u32", "u32 u32 u32", lambda st, a, b: b - a)
_op("v_add_nc_i32", "i32 i32 i32", lambda st, a, b: a + b)
_op("v_sub_nc_i32", "i32 i32 i32", lambda st, a, b: a - b)
_op("v_add3_u32", "u32 u32 u32 u32", lambda st, a, b, c: a + b + c)
_op("v_mul_lo_u32", "u32 u32 u32", lambda st, a, b: a * b)
_op("v_mul_hi_u32", "u32 u32 u32", lambda st, a, b: (_u64(a) * _u64(b)) >> np.uint64(32))
_op("v_mul_hi_i32", "u32 i32 i32", lambda st, a, b: (a.astype(np.int64) * b) >> 32)
_op("v_mul_u32_u24", "u32 u32 u32", lambda st, a, b: (a & np.uint32(0xFFFFFF)) * (b & np.uint32(0xFFFFFF)))
_op("v_mul_hi_u32_u24", "u32 u32 u32", lambda st, a, b: (_u64(a & np.uint32(0xFFFFFF)) * _u64(b & np.uint32(0xFFFFFF))) >> np.uint64(32))
_op("v_mul_i32_i24", "u32 u32 u32", lambda st, a, b: _u64(_sx(a, 24) * _sx(b, 24)) & M32)
_op("v_mul_hi_i32_i24", "u32 u32 u32", lambda st, a, b: _u64((_sx(a, 24) * _sx(b, 24)) >> 32) & M32)
_op("v_mad_u32_u24", "u32 u32 u32 u32", lambda st, a, b, c: (a & np.uint32(0xFFFFFF)) * (b & np.uint32(0xFFFFFF)) + c)
_op("v_mad_i32_i24", "u32 u32 u32 u32", lambda st, a, b, c: _u64(_sx(a, 24) * _sx(b, 24) + _sx(c, 32)) & M32)
_op("v_mad_u32_u16", "u32 u16 u16 u32", lambda st, a, b, c: a.astype(np.uint32) * b + c)
_op("v_lshlrev_b32", "u32 u32 u32", lambda st, a, b: b << (a & np.uint32(31)))
_op("v_lshrrev_b32", "u32 u32 u32", lambda st, a, b: b >> (a & np.uint32(31)))
_op("v_ashrrev_i32", "i32 u32 i32", lambda st, a, b: b >> (a & np.uint32(31)).astype(np.int32))
_op("v_lshlrev_b64", "u64 u32 u64", lambda st, a, b: b << (a & np.uint32(63)).astype(np.uint64))
_op("v_lshrrev_b64", "u64 u32 u64", lambda st, a, b: b >> (a & np.uint32(63)).astype(np.uint64))
_op("v_ashrrev_i64", "i64 u32 i64", lambda st, a, b: b >> (a & np.uint32(63)).astype(np.int64))
_op("v_lshl_add_u32", "u32 u32 u32 u32", lambda st, a, b, c: (a << (b & np.uint32(31))) + c)
_op("v_add_lshl_u32", "u32 u32 u32 u32", lambda st, a, b, c: (a + b) << (c & np.uint32(31)))
_op("v_lshl_add_u64", "u64 u64 u32 u64", lambda st, a, b, c: (a << (b & np.uint32(7)).astype(np.uint64)) + c)  # CDNA3 only
_op("v_lshl_or_b32", "u32 u32 u32 u32", lambda st, a, b, c: (a << (b & np.uint32(31))) | c)
_op("v_and_or_b32", "u32 u32 u32 u32", lambda st, a, b, c: (a & b) | c)
_op("v_or3_b32", "u32 u32 u32 u32", lambda st, a, b, c: a | b | c)
_op("v_xor3_b32", "u32 u32 u32 u32", lambda st, a, b, c: a ^ b ^ c)
# gfx950 v_bitop3_b16/b32 (MI355X ISA guide V_BITOP3_B32): bit i of D is bit (S0[i] << 2 | S1[i] << 1 | S2[i]) of the
# 8-bit truth table, which the encoding keeps in omod:abs:neg (so they modify no source)
def _bitop3(t: str):
  def run(st: WaveState, g: Group, ins: Instruction) -> None:
    plain = dataclasses.replace(ins, fields={**ins.fields, "neg": 0, "abs": 0, "omod": 0})
    a, b, c = (src(st, g, plain, i, t) for i in range(3))
    out = np.zeros_like(a)
    for k in range(8):
      if ins.fields["bitop3"] >> k & 1: out |= (a if k & 4 else ~a) & (b if k & 2 else ~b) & (c if k & 1 else ~c)
    dst(st, g, plain, out, t)
  return run
OPS.update({"v_bitop3_b16": _bitop3("u16"), "v_bitop3_b32": _bitop3("u32")})
_op("v_xad_u32", "u32 u32 u32 u32", lambda st, a, b, c: (a ^ b) + c)
_op("v_and_b32", "u32 u32 u32", lambda st, a, b: a & b)
_op("v_or_b32", "u32 u32 u32", lambda st, a, b: a | b)
_op("v_xor_b32", "u32 u32 u32", lambda st, a, b: a ^ b)
_op("v_xnor_b32", "u32 u32 u32", lambda st, a, b: ~(a ^ b))
_op("v_not_b32", "u32 u32", lambda st, a: ~a)
def _bfe(st, a, b, c) -> np.ndarray:
  """V_BFE_U32/I32: `c` bits of `a` from bit `b` (offset and width taken mod 32), sign-extended for signed `a`."""
  off, width = (b & np.uint32(31)).astype(np.int64), (c & np.uint32(31)).astype(np.int64)
  field = a.astype(np.int64) >> off
  if a.dtype == np.uint32: return field & ((np.int64(1) << width) - 1)
  return np.where(width == 0, 0, (field << (64 - width)) >> (64 - np.maximum(width, 1)))
_op("v_bfe_u32", "u32 u32 u32 u32", _bfe)
_op("v_bfe_i32", "i32 i32 u32 u32", _bfe)
_op("v_bfi_b32", "u32 u32 u32 u32", lambda st, a, b, c: (a & b) | (~a & c))
_op("v_bfm_b32", "u32 u32 u32", lambda st, a, b: ((np.uint64(1) << _u64(a & np.uint32(31))) - np.uint64(1)).astype(np.uint32) << (b & np.uint32(31)))
_op("v_alignbit_b32", "u32 u32 u32 u32", lambda st, a, b, c: ((_u64(a) << np.uint64(32) | _u64(b)) >> _u64(c & np.uint32(31))) & M32)
_op("v_alignbyte_b32", "u32 u32 u32 u32", lambda st, a, b, c: ((_u64(a) << np.uint64(32) | _u64(b)) >> (_u64(c & np.uint32(3)) * np.uint64(8))) & M32)
_op("v_bcnt_u32_b32", "u32 u32 u32", lambda st, a, b: np.bitwise_count(a).astype(np.uint32) + b)
_op("v_min_i32", "i32 i32 i32", lambda st, a, b: np.minimum(a, b))
_op("v_max_i32", "i32 i32 i32", lambda st, a, b: np.maximum(a, b))
_op("v_min_u32", "u32 u32 u32", lambda st, a, b: np.minimum(a, b))
_op("v_max_u32", "u32 u32 u32", lambda st, a, b: np.maximum(a, b))
for it in ("i32", "u32", "i16", "u16"):
  _op(f"v_min3_{it}", f"{it} {it} {it} {it}", lambda st, a, b, c: np.minimum(np.minimum(a, b), c))
  _op(f"v_max3_{it}", f"{it} {it} {it} {it}", lambda st, a, b, c: np.maximum(np.maximum(a, b), c))
  _op(f"v_med3_{it}", f"{it} {it} {it} {it}", lambda st, a, b, c: np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c)))
for it in ("i16", "u16"):
  _op(f"v_min_{it}", f"{it} {it} {it}", lambda st, a, b: np.minimum(a, b))
  _op(f"v_max_{it}", f"{it} {it} {it}", lambda st, a, b: np.maximum(a, b))
_op("v_add_nc_u16", "u16 u16 u16", lambda st, a, b: a + b)
_op("v_sub_nc_u16", "u16 u16 u16", lambda st, a, b: a - b)
_op("v_add_nc_i16", "i16 i16 i16", lambda st, a, b: a + b)
_op("v_sub_nc_i16", "i16 i16 i16", lambda st, a, b: a - b)
_op("v_mul_lo_u16", "u16 u16 u16", lambda st, a, b: a * b)
_op("v_mad_u16", "u16 u16 u16 u16", lambda st, a, b, c: a * b + c)
_op("v_mad_i16", "i16 i16 i16 i16", lambda st, a, b, c: a * b + c)
# gfx9 keeps VI's opcodes of these under new names (MI300 ISA guide VOP3 opcodes 0x1eb, 0x1ec, 0x1ee, 0x1ef): the same
# arithmetic with the upper half cleared (_GFX9_CLEARS_HIGH); v_fma_f16 and v_div_fixup_f16 are defined above
for _legacy in ("v_mad_legacy_u16", "v_mad_legacy_i16", "v_fma_legacy_f16", "v_div_fixup_legacy_f16"): OPS[_legacy] = OPS[_legacy.replace("_legacy", "")]
_op("v_lshlrev_b16", "u16 u16 u16", lambda st, a, b: b << (a & np.uint16(15)))
_op("v_lshrrev_b16", "u16 u16 u16", lambda st, a, b: b >> (a & np.uint16(15)))
_op("v_ashrrev_i16", "i16 u16 i16", lambda st, a, b: b >> (a & np.uint16(15)).astype(np.int16))
_op("v_and_b16", "u16 u16 u16", lambda st, a, b: a & b)
_op("v_or_b16", "u16 u16 u16", lambda st, a, b: a | b)
_op("v_xor_b16", "u16 u16 u16", lambda st, a, b: a ^ b)
_op("v_not_b16", "u16 u16", lambda st, a: ~a)

def _bitrev(a) -> np.ndarray:
  a = np.asarray(a, np.uint32)
  b = np.unpackbits(np.ascontiguousarray(np.atleast_1d(a)).view(np.uint8), bitorder="little").reshape(-1, 32)[:, ::-1]
  return np.packbits(np.ascontiguousarray(b), axis=1, bitorder="little").view(np.uint32).reshape(a.shape)

def _first_one(a, from_top: bool) -> np.ndarray:
  """V_CLZ_I32_U32 / V_CTZ_I32_B32: position of the first 1 from the MSB (or LSB), -1 when there is none."""
  a = np.asarray(a, np.uint32)
  if from_top:
    n = np.where(a == 0, -1, 31 - np.floor(np.log2(np.maximum(a, 1).astype(np.float64))).astype(np.int64))
  else:
    low = a & (~a + np.uint32(1))
    n = np.where(a == 0, -1, np.floor(np.log2(np.maximum(low, 1).astype(np.float64))).astype(np.int64))
  return n
_op("v_bfrev_b32", "u32 u32", lambda st, a: _bitrev(a))
_op("v_clz_i32_u32", "i32 u32", lambda st, a: _first_one(a, True))
_op("v_ctz_i32_b32", "i32 u32", lambda st, a: _first_one(a, False))
_op("v_cls_i32", "i32 i32", lambda st, a: np.where((a == 0) | (a == -1), -1, _first_one(np.where(a < 0, ~a, a).astype(np.uint32), True)))

def _perm(st, a, b, sel) -> np.ndarray:
  """V_PERM_B32: each selector byte picks a byte of {S0, S1} (0-7), 0x00/0xFF constants or a sign byte."""
  data = (_u64(a) << np.uint64(32)) | _u64(b)
  out = np.zeros(np.broadcast(a, b, sel).shape, np.uint64)
  for k in range(4):
    s = (_u64(sel) >> np.uint64(8 * k)) & np.uint64(0xFF)
    byte = (data >> (np.minimum(s, 7) * np.uint64(8))) & np.uint64(0xFF)
    sign = lambda bit: np.where((data >> np.uint64(bit)) & np.uint64(1), np.uint64(0xFF), np.uint64(0))
    byte = np.where(s == 8, sign(15), np.where(s == 9, sign(31), np.where(s == 10, sign(47), np.where(s == 11, sign(63), byte))))
    byte = np.where(s == 12, np.uint64(0), np.where(s > 12, np.uint64(0xFF), byte))
    out |= byte << np.uint64(8 * k)
  return out
_op("v_perm_b32", "u32 u32 u32 u32", _perm)

# ---- carries: VOP2 forms use VCC, VOP3SD name an SGPR (RDNA3 ISA guide V_ADD_CO_U32, V_ADD_CO_CI_U32)
def _carry(name: str, sub: bool, rev: bool, carry_in: bool) -> None:
  def run(st: WaveState, g: Group, ins: Instruction) -> None:
    a, b = _u64(src(st, g, ins, 0, "u32")), _u64(src(st, g, ins, 1, "u32"))
    if rev: a, b = b, a
    c = st.mask_read(g, ins.fields["src2"]).astype(np.uint64) if carry_in else np.uint64(0)
    r = a - b - c if sub else a + b + c
    out = (b + c > a) if sub else (r > M32)
    st.mask_write(g, ins.fields.get("sdst") or _VCC, np.broadcast_to(out, g.em.shape))
    st.vwrite(g, ins.fields["vdst"].index, r & M32)
  OPS[name] = run
for nm, sub, rev in (("add", False, False), ("sub", True, False), ("subrev", True, True)):
  _carry(f"v_{nm}_co_u32", sub, rev, False)
  _carry(f"v_{nm}_co_ci_u32", sub, rev, True)

def _mad64(name: str, signed: bool) -> None:
  """V_MAD_U64_U32 / V_MAD_I64_I32: 64-bit D = S0 * S1 + S2, carry out to the SGPR destination."""
  def run(st: WaveState, g: Group, ins: Instruction) -> None:
    if signed:
      a, b = src(st, g, ins, 0, "i32").astype(np.int64), src(st, g, ins, 1, "i32").astype(np.int64)
      c = src(st, g, ins, 2, "i64")
      r = (a * b) + c
      carry = ((a * b > 0) & (c > 0) & (r < 0)) | ((a * b < 0) & (c < 0) & (r >= 0))
    else:
      a, b = _u64(src(st, g, ins, 0, "u32")), _u64(src(st, g, ins, 1, "u32"))
      c = src(st, g, ins, 2, "u64")
      p = a * b
      r = p + c
      carry = r < c
    st.mask_write(g, ins.fields["sdst"], np.broadcast_to(carry, g.em.shape))
    st.vwrite(g, ins.fields["vdst"].index, np.asarray(r).view(np.uint64) if np.asarray(r).dtype == np.int64 else r, 2)
  OPS[name] = run
_mad64("v_mad_u64_u32", False)
_mad64("v_mad_i64_i32", True)

def _cndmask(name: str, t: str) -> None:
  def run(st: WaveState, g: Group, ins: Instruction) -> None:
    sel = st.mask_read(g, ins.fields["src2"])
    a, b = src(st, g, ins, 0, t), src(st, g, ins, 1, t)
    dst(st, g, ins, np.where(sel, b, a), t)
  OPS[name] = run
_cndmask("v_cndmask_b32", "u32")
_cndmask("v_cndmask_b16", "u16")

def _div_scale(name: str, t: str) -> None:
  def run(st: WaveState, g: Group, ins: Instruction) -> None:
    d, vcc = fr.div_scale(src(st, g, ins, 0, t), src(st, g, ins, 1, t), src(st, g, ins, 2, t))
    st.mask_write(g, ins.fields["sdst"], np.broadcast_to(vcc, g.em.shape))
    dst(st, g, ins, d, t)
  OPS[name] = run
_div_scale("v_div_scale_f32", "f32")
_div_scale("v_div_scale_f64", "f64")

def _div_fmas(name: str, t: str) -> None:
  def run(st: WaveState, g: Group, ins: Instruction) -> None:
    vcc = st.mask_read(g, _VCC)
    dst(st, g, ins, fr.div_fmas(src(st, g, ins, 0, t), src(st, g, ins, 1, t), src(st, g, ins, 2, t), vcc), t)
  OPS[name] = run
_div_fmas("v_div_fmas_f32", "f32")
_div_fmas("v_div_fmas_f64", "f64")

# ---- cross-lane reads and writes
def _lanes(st: WaveState, g: Group) -> np.ndarray: return np.arange(g.em.size) % st.L

def _readfirstlane(st: WaveState, g: Group, ins: Instruction) -> None:
  vals = np.broadcast_to(np.asarray(st.vread(g, ins.fields["src0"]), np.uint32), g.em.shape).reshape(g.nw, st.L)
  first = np.argmax(g.em.reshape(g.nw, st.L), axis=1)
  st.swrite_op(g, ins.fields["vdst"], vals[np.arange(g.nw), first])

def _readlane(st: WaveState, g: Group, ins: Instruction) -> None:
  vals = np.broadcast_to(np.asarray(st.vread(g, ins.fields["src0"]), np.uint32), g.em.shape).reshape(g.nw, st.L)
  lane = np.broadcast_to(st.sread(g, ins.fields["src1"]), (g.nw,)) % st.L
  st.swrite_op(g, ins.fields["vdst"], vals[np.arange(g.nw), lane])

def _writelane(st: WaveState, g: Group, ins: Instruction) -> None:
  value = np.broadcast_to(st.sread(g, ins.fields["src0"]), (g.nw,))
  lane = np.broadcast_to(st.sread(g, ins.fields["src1"]), (g.nw,)) % st.L
  hit = _lanes(st, g).reshape(g.nw, st.L) == lane[:, None].astype(np.int64)
  full = Group(g.wv, g.ln, g.nw, hit.ravel())
  st.vwrite(full, ins.fields["vdst"].index, np.repeat(value, st.L))

def _mbcnt(high: bool):
  def run(st: WaveState, g: Group, ins: Instruction) -> None:
    mask, acc = _u64(src(st, g, ins, 0, "u32")), src(st, g, ins, 1, "u32")
    lane = _lanes(st, g).astype(np.int64) - (32 if high else 0)
    below = np.where(lane <= 0, np.uint64(0), np.where(lane >= 32, M32, (np.uint64(1) << np.clip(lane, 0, 63).astype(np.uint64)) - np.uint64(1)))
    dst(st, g, ins, np.bitwise_count(mask & below).astype(np.uint32) + acc, "u32")
  return run
OPS.update({"v_readfirstlane_b32": _readfirstlane, "v_readlane_b32": _readlane, "v_writelane_b32": _writelane,
            "v_mbcnt_lo_u32_b32": _mbcnt(False), "v_mbcnt_hi_u32_b32": _mbcnt(True)})

# ---- compares: VOPC writes VCC (or the VOP3 SGPR destination), v_cmpx writes EXEC (RDNA3 ISA guide 16.8)
_FCMP = {"f": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool), "lt": np.less, "eq": np.equal, "le": np.less_equal,
         "gt": np.greater, "lg": lambda a, b: (a < b) | (a > b), "ge": np.greater_equal,
         "o": lambda a, b: ~np.isnan(a) & ~np.isnan(b), "u": lambda a, b: np.isnan(a) | np.isnan(b),
         "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)), "ngt": lambda a, b: ~(a > b),
         "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b), "nlt": lambda a, b: ~(a < b),
         "t": lambda a, b: np.ones(np.broadcast(a, b).shape, bool)}
_ICMP = {"f": _FCMP["f"], "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "ne": np.not_equal,
         "ge": np.greater_equal, "t": _FCMP["t"]}

_EXEC = Operand("exec_lo")

def _compare(name: str, t: str, fn, t1: str | None = None) -> None:
  """A gfx9 v_cmpx writes its result to the named destination (VCC or an SGPR pair) and to EXEC (MI300 ISA guide,
  "VOPC Instructions": V_CMPX_* "EXEC = VCC = ..."); an RDNA3 v_cmpx names EXEC itself."""
  writes_exec = name.startswith("v_cmpx")
  def run(st: WaveState, g: Group, ins: Instruction) -> None:
    r = np.broadcast_to(fn(src(st, g, ins, 0, t), src(st, g, ins, 1, t1 or t)), g.em.shape)
    st.mask_write(g, ins.fields["sdst"], r)
    if writes_exec and ins.fields["sdst"].kind != "exec_lo": st.mask_write(g, _EXEC, r)
  OPS[name] = run
for x in ("cmp", "cmpx"):
  for ft in ("f16", "f32", "f64"):
    for c, fn in _FCMP.items(): _compare(f"v_{x}_{c}_{ft}", ft, fn)
    _compare(f"v_{x}_class_{ft}", ft, lambda a, m: fr.classify(a, m), "u16" if ft == "f16" else "u32")
  for it in ("i16", "u16", "i32", "u32", "i64", "u64"):
    for c, fn in _ICMP.items(): _compare(f"v_{x}_{c}_{it}", it, fn)

# ---- mixed precision and packed math (VOP3P: op_sel picks each source's half for the low result, op_sel_hi for
# the high one; neg_lo/neg_hi negate per half; for v_fma_mix op_sel_hi marks f16 sources: RDNA3 ISA guide 16.11)
def _mix_source(st: WaveState, g: Group, ins: Instruction, i: int) -> np.ndarray:
  f = ins.fields
  raw = np.asarray(st.vread(g, f[f"src{i}"], 1, 16 if f["opsel_hi"] >> i & 1 else 32), np.uint32)
  if f["opsel_hi"] >> i & 1:
    half = (raw >> np.uint32(16 * (f["opsel"] >> i & 1))) & np.uint32(0xFFFF)
    x = half.astype(np.uint16).view(np.float16).astype(np.float32)
  else: x = raw.view(np.float32)
  if f["neg_hi"] >> i & 1: x = np.abs(x)
  if f["neg"] >> i & 1: x = -x
  return x

def _fma_mix(out: str):
  def run(st: WaveState, g: Group, ins: Instruction) -> None:
    r = fr.fma(*(_mix_source(st, g, ins, i) for i in range(3)))
    if ins.fields.get("clamp"): r = np.clip(r, 0, 1)
    if out == "f32": st.vwrite(g, ins.fields["vdst"].index, np.asarray(r, np.float32).view(np.uint32))
    else: write_bits(st, g, ins.fields["vdst"], np.asarray(r).astype(np.float16).view(np.uint16), 2, out == "hi")
  return run
OPS.update({"v_fma_mix_f32": _fma_mix("f32"), "v_fma_mixlo_f16": _fma_mix("lo"), "v_fma_mixhi_f16": _fma_mix("hi")})

def _packed_halves(st: WaveState, g: Group, ins: Instruction, i: int, t: str) -> tuple[np.ndarray, np.ndarray]:
  f = ins.fields
  raw = np.asarray(st.vread(g, f[f"src{i}"], 1, 16 if t == "f16" else 32), np.uint32)
  if f[f"src{i}"].kind in ("int", "float"):  # an inline constant stands for the same value in both halves
    raw = (raw & np.uint32(0xFFFF)) | (raw & np.uint32(0xFFFF)) << np.uint32(16)
  lo = ((raw >> np.uint32(16 * (f["opsel"] >> i & 1))) & np.uint32(0xFFFF)).astype(np.uint16)
  hi = ((raw >> np.uint32(16 * (f["opsel_hi"] >> i & 1))) & np.uint32(0xFFFF)).astype(np.uint16)
  if t == "f16":
    lo = lo ^ np.uint16(0x8000) if f["neg"] >> i & 1 else lo
    hi = hi ^ np.uint16(0x8000) if f["neg_hi"] >> i & 1 else hi
  return lo.view(_DT[t]), hi.view(_DT[t])

def _packed(name: str, t: str, nsrc: int, fn) -> None:
  def run(st: WaveState, g: Group, ins: Instruction) -> None:
    halves = [_packed_halves(st, g, ins, i, t) for i in range(nsrc)]
    lo = np.asarray(fn(st, *(h[0] for h in halves))).astype(_DT[t])
    hi = np.asarray(fn(st, *(h[1] for h in halves))).astype(_DT[t])
    if ins.fields.get("clamp") and t == "f16": lo, hi = (np.clip(x, 0, 1).astype(np.float16) for x in (lo, hi))
    bits = np.ascontiguousarray(lo).view(np.uint16).astype(np.uint32) | np.ascontiguousarray(hi).view(np.uint16).astype(np.uint32) << np.uint32(16)
    st.vwrite(g, ins.fields["vdst"].index, bits)
  OPS[name] = run
_packed("v_pk_add_f16", "f16", 2, lambda st, a, b: a + b)
_packed("v_pk_mul_f16", "f16", 2, lambda st, a, b: a * b)
_packed("v_pk_fma_f16", "f16", 3, lambda st, a, b, c: fr.fma(a, b, c))
_packed("v_pk_max_f16", "f16", 2, lambda st, a, b: fr.minmax(a, b, True, st.ieee))
_packed("v_pk_min_f16", "f16", 2, lambda st, a, b: fr.minmax(a, b, False, st.ieee))
_packed("v_pk_maximum_f16", "f16", 2, lambda st, a, b: minimum_maximum(a, b, True))
_packed("v_pk_minimum_f16", "f16", 2, lambda st, a, b: minimum_maximum(a, b, False))
# gfx950 (CDNA4 ISA guide V_PK_MAXIMUM3_F16 / V_PK_MINIMUM3_F16): per half, the IEEE 754-2019 maximum/minimum of three
_packed("v_pk_maximum3_f16", "f16", 3, lambda st, a, b, c: minimum_maximum(minimum_maximum(a, b, True), c, True))
_packed("v_pk_minimum3_f16", "f16", 3, lambda st, a, b, c: minimum_maximum(minimum_maximum(a, b, False), c, False))
_packed("v_pk_add_u16", "u16", 2, lambda st, a, b: a + b)
_packed("v_pk_sub_u16", "u16", 2, lambda st, a, b: a - b)
_packed("v_pk_add_i16", "i16", 2, lambda st, a, b: a + b)
_packed("v_pk_sub_i16", "i16", 2, lambda st, a, b: a - b)
_packed("v_pk_mul_lo_u16", "u16", 2, lambda st, a, b: a * b)
_packed("v_pk_mad_u16", "u16", 3, lambda st, a, b, c: a * b + c)
_packed("v_pk_mad_i16", "i16", 3, lambda st, a, b, c: a * b + c)
_packed("v_pk_lshlrev_b16", "u16", 2, lambda st, a, b: b << (a & np.uint16(15)))
_packed("v_pk_lshrrev_b16", "u16", 2, lambda st, a, b: b >> (a & np.uint16(15)))
_packed("v_pk_ashrrev_i16", "i16", 2, lambda st, a, b: b >> (a.view(np.uint16) & np.uint16(15)).astype(np.int16))
_packed("v_pk_max_u16", "u16", 2, lambda st, a, b: np.maximum(a, b))
_packed("v_pk_min_u16", "u16", 2, lambda st, a, b: np.minimum(a, b))
_packed("v_pk_max_i16", "i16", 2, lambda st, a, b: np.maximum(a, b))
_packed("v_pk_min_i16", "i16", 2, lambda st, a, b: np.minimum(a, b))

def _dual(st: WaveState, g: Group, ins: Instruction) -> None:
  """VOPD: both halves read their sources before either writes (RDNA3 ISA guide 7.6 "Dual issue VALU")."""
  x, y = ins.fields["x"], ins.fields["y"]
  if _reads(y) & {x.fields["vdst"].index}:
    snapshot = st.V[x.fields["vdst"].index].copy()
    OPS[x.name](st, g, x)
    written, st.V[x.fields["vdst"].index] = st.V[x.fields["vdst"].index].copy(), snapshot
    OPS[y.name](st, g, y)
    st.V[x.fields["vdst"].index] = written
  else:
    OPS[x.name](st, g, x)
    OPS[y.name](st, g, y)

def _reads(ins: Instruction) -> set[int]:
  return {op.index for k, op in ins.fields.items() if k.startswith("src") and isinstance(op, Operand) and op.kind == "v"}
OPS["v_dual"] = _dual

# ---- packed f32 (CDNA3): each source is a 64-bit register pair; op_sel bit i picks the dword of source i for the low
# result and op_sel_hi bit i the one for the high result; neg_lo/neg_hi negate per half (MI300 ISA guide, VOP3P
# "V_PK_FMA_F32 / V_PK_MUL_F32 / V_PK_ADD_F32 / V_PK_MOV_B32")
def _dwords(st: WaveState, g: Group, ins: Instruction, i: int) -> tuple[np.ndarray, np.ndarray]:
  """(low, high) dword of source i; a 32-bit constant stands in both dwords (LLVM's OPERAND_REG_INLINE_C_V2FP32)."""
  op = ins.fields[f"src{i}"]
  if op.kind in ("int", "float", "literal"):
    word = np.asarray(st.vread(g, op, 1, 32), np.uint32)
    return word, word
  pair = np.asarray(st.vread(g, op, 2, 32), np.uint64)
  return (pair & M32).astype(np.uint32), (pair >> np.uint64(32)).astype(np.uint32)

def _write_pair(st: WaveState, g: Group, ins: Instruction, lo: np.ndarray, hi: np.ndarray) -> None:
  lo, hi = (_u64(np.broadcast_to(np.ascontiguousarray(x).view(np.uint32), g.em.shape)) for x in (lo, hi))
  st.vwrite(g, ins.fields["vdst"].index, lo | hi << np.uint64(32), 2)

def _packed_f32(name: str, nsrc: int, fn) -> None:
  def run(st: WaveState, g: Group, ins: Instruction) -> None:
    f, halves = ins.fields, ([], [])
    for i in range(nsrc):
      words = _dwords(st, g, ins, i)
      for out, sel, neg in ((halves[0], f["opsel"], f["neg"]), (halves[1], f["opsel_hi"], f["neg_hi"])):
        x = (words[sel >> i & 1] ^ np.uint32(0x80000000 if neg >> i & 1 else 0)).view(np.float32)
        out.append(fr.ftz(x) if st.flush("f32") else x)
    res = []
    for xs in halves:
      r = np.asarray(fn(*xs)).astype(np.float32)
      if f.get("clamp"): r = np.where(np.isnan(r), np.float32(0), np.clip(r, np.float32(0), np.float32(1))).astype(np.float32)
      res.append(fr.ftz(r) if st.flush("f32") else r)
    _write_pair(st, g, ins, *res)
  OPS[name] = run
_packed_f32("v_pk_fma_f32", 3, lambda a, b, c: fr.fma(a, b, c))
_packed_f32("v_pk_mul_f32", 2, lambda a, b: a * b)
_packed_f32("v_pk_add_f32", 2, lambda a, b: a + b)

def _pk_mov_b32(st: WaveState, g: Group, ins: Instruction) -> None:
  """D[31:0] = the dword op_sel[0] picks of S0, D[63:32] = the dword op_sel[1] picks of S1."""
  sel = ins.fields["opsel"]
  _write_pair(st, g, ins, _dwords(st, g, ins, 0)[sel & 1], _dwords(st, g, ins, 1)[sel >> 1 & 1])
OPS["v_pk_mov_b32"] = _pk_mov_b32
