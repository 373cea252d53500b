"""Semantics of the scalar ALU (SOP1, SOP2, SOPC, SOPK) per the RDNA3 ISA guide chapter 16 pseudocode: each op reads
its sources per wave, writes its destination and SCC. Keyed by mnemonic; `OPS[name](state, group, instruction)`."""
from __future__ import annotations
import numpy as np
from drivers.mock.amd.shader import float_rules as fr
from drivers.mock.amd.shader.instruction import Instruction, Operand
from drivers.mock.amd.shader.operand_widths import widths
from drivers.mock.amd.shader.vector_ops import minimum_maximum
from drivers.mock.amd.shader.wave_state import Group, WaveState

M32, M64 = np.uint64(0xFFFFFFFF), np.uint64(0xFFFFFFFFFFFFFFFF)
OPS: dict = {}

def _u64(x) -> np.ndarray: return np.asarray(x).astype(np.uint64)
def _i64(x, bits: int) -> np.ndarray:
  """Sign-extend the low `bits` of x to int64."""
  v = _u64(x) & np.uint64((1 << bits) - 1)
  return (v.astype(np.int64) ^ (1 << (bits - 1))) - (1 << (bits - 1)) if bits < 64 else v.view(np.int64)

def _binary(name: str, fn, scc=None) -> None:
  """dst = fn(a, b) at the op's width; scc(a, b, result) -> bool per wave when the op writes SCC."""
  def op(st: WaveState, g: Group, ins: Instruction) -> None:
    wd = widths(name)
    a, b = _u64(st.sread(g, ins.fields["ssrc0"], wd[1])), _u64(st.sread(g, ins.fields["ssrc1"], wd[2]))
    r = fn(a, b)
    mask = M64 if wd[0] == 2 else M32
    if scc is not None: st.scc[g.wv] = np.broadcast_to(scc(a, b, r), (g.nw,))
    st.swrite_op(g, ins.fields["sdst"], np.broadcast_to(_u64(r) & mask, (g.nw,)), wd[0])
  OPS[name] = op

def _unary(name: str, fn, scc=None) -> None:
  def op(st: WaveState, g: Group, ins: Instruction) -> None:
    wd = widths(name)
    a = _u64(st.sread(g, ins.fields["ssrc0"], wd[1]))
    r = fn(a)
    if scc is not None: st.scc[g.wv] = np.broadcast_to(scc(a, r), (g.nw,))
    st.swrite_op(g, ins.fields["sdst"], np.broadcast_to(_u64(r) & (M64 if wd[0] == 2 else M32), (g.nw,)), wd[0])
  OPS[name] = op

_nz = lambda a, b, r: r != 0
for w, m in (("b32", M32), ("b64", M64)):
  _binary(f"s_and_{w}", lambda a, b: a & b, _nz)
  _binary(f"s_or_{w}", lambda a, b: a | b, _nz)
  _binary(f"s_xor_{w}", lambda a, b: a ^ b, _nz)
  _binary(f"s_nand_{w}", lambda a, b, m=m: ~(a & b) & m, _nz)
  _binary(f"s_nor_{w}", lambda a, b, m=m: ~(a | b) & m, _nz)
  _binary(f"s_xnor_{w}", lambda a, b, m=m: ~(a ^ b) & m, _nz)
  _binary(f"s_and_not1_{w}", lambda a, b, m=m: a & ~b & m, _nz)
  _binary(f"s_or_not1_{w}", lambda a, b, m=m: (a | ~b) & m, _nz)
  _unary(f"s_not_{w}", lambda a, m=m: ~a & m, lambda a, r: r != 0)
  _unary(f"s_mov_{w}", lambda a: a)
_binary("s_add_u32", lambda a, b: a + b, lambda a, b, r: r > M32)
_binary("s_sub_u32", lambda a, b: (a - b) & M32, lambda a, b, r: b > a)
_binary("s_add_i32", lambda a, b: a + b, lambda a, b, r: ((_i64(a, 32) + _i64(b, 32)) != _i64(r, 32)))
_binary("s_sub_i32", lambda a, b: (a - b) & M32, lambda a, b, r: ((_i64(a, 32) - _i64(b, 32)) != _i64(r, 32)))
_binary("s_min_i32", lambda a, b: np.where(_i64(a, 32) < _i64(b, 32), a, b), lambda a, b, r: _i64(a, 32) < _i64(b, 32))
_binary("s_max_i32", lambda a, b: np.where(_i64(a, 32) >= _i64(b, 32), a, b), lambda a, b, r: _i64(a, 32) >= _i64(b, 32))
_binary("s_min_u32", lambda a, b: np.minimum(a, b), lambda a, b, r: a < b)
_binary("s_max_u32", lambda a, b: np.maximum(a, b), lambda a, b, r: a >= b)
_binary("s_lshl_b32", lambda a, b: (a << (b & np.uint64(31))) & M32, _nz)
_binary("s_lshl_b64", lambda a, b: (a << (b & np.uint64(63))) & M64, _nz)
_binary("s_lshr_b32", lambda a, b: a >> (b & np.uint64(31)), _nz)
_binary("s_lshr_b64", lambda a, b: a >> (b & np.uint64(63)), _nz)
_binary("s_ashr_i32", lambda a, b: _u64(_i64(a, 32) >> (b & np.uint64(31)).astype(np.int64)) & M32, _nz)
_binary("s_ashr_i64", lambda a, b: _u64(_i64(a, 64) >> (b & np.uint64(63)).astype(np.int64)), _nz)
for k in (1, 2, 3, 4): _binary(f"s_lshl{k}_add_u32", lambda a, b, k=k: ((a << np.uint64(k)) & M32) + b, lambda a, b, r: r > M32)
_binary("s_mul_i32", lambda a, b: a * b & M32)
_binary("s_mul_hi_u32", lambda a, b: (a * b) >> np.uint64(32))
_binary("s_mul_hi_i32", lambda a, b: _u64((_i64(a, 32) * _i64(b, 32)) >> 32) & M32)
_binary("s_absdiff_i32", lambda a, b: _u64(np.abs(_i64(a, 32) - _i64(b, 32))) & M32, _nz)
_binary("s_bfm_b32", lambda a, b: ((np.uint64(1) << (a & np.uint64(31))) - np.uint64(1)) << (b & np.uint64(31)) & M32)
def _bfe(bits: int, signed: bool):
  """S_BFE_*: a field of S0 at offset S1[5:0] (S1[4:0] for 32 bits), S1[22:16] bits wide, sign-extended if signed."""
  def fn(a, b):
    off = (b & np.uint64(bits - 1)).astype(np.int64)
    width = np.minimum(((b >> np.uint64(16)) & np.uint64(127)).astype(np.int64), bits)
    field = (_i64(a, bits) if signed else _u64(a).astype(np.int64) if bits == 32 else _u64(a).view(np.int64)) >> off
    if signed: out = np.where(width == 0, 0, (field << (64 - width)) >> (64 - np.maximum(width, 1)))
    else: out = _u64(field) & np.where(width >= 64, M64, (np.uint64(1) << _u64(np.minimum(width, 63))) - np.uint64(1))
    return _u64(out) & (M32 if bits == 32 else M64)
  return fn
_binary("s_bfe_u32", _bfe(32, False), _nz)
_binary("s_bfe_i32", _bfe(32, True), _nz)
_binary("s_bfe_u64", _bfe(64, False), _nz)
_binary("s_bfe_i64", _bfe(64, True), _nz)
_binary("s_pack_ll_b32_b16", lambda a, b: (a & np.uint64(0xFFFF)) | (b & np.uint64(0xFFFF)) << np.uint64(16))
_binary("s_pack_lh_b32_b16", lambda a, b: (a & np.uint64(0xFFFF)) | (b & np.uint64(0xFFFF0000)))
_binary("s_pack_hh_b32_b16", lambda a, b: (a >> np.uint64(16)) | (b & np.uint64(0xFFFF0000)))
_binary("s_pack_hl_b32_b16", lambda a, b: (a >> np.uint64(16)) | (b & np.uint64(0xFFFF)) << np.uint64(16))
_unary("s_abs_i32", lambda a: _u64(np.abs(_i64(a, 32))) & M32, lambda a, r: r != 0)
_unary("s_sext_i32_i8", lambda a: _u64(_i64(a, 8)) & M32)
_unary("s_sext_i32_i16", lambda a: _u64(_i64(a, 16)) & M32)
_unary("s_bcnt1_i32_b32", lambda a: _popcount(a), lambda a, r: r != 0)
_unary("s_bcnt1_i32_b64", lambda a: _popcount(a), lambda a, r: r != 0)
_unary("s_bcnt0_i32_b32", lambda a: 32 - _popcount(a), lambda a, r: r != 0)
_unary("s_brev_b32", lambda a: _u64([int(f"{int(x):032b}"[::-1], 2) for x in np.atleast_1d(a)]))
_unary("s_ctz_i32_b32", lambda a: _first_bit(a, 32, low=True))
_unary("s_ctz_i32_b64", lambda a: _first_bit(a, 64, low=True))
_unary("s_clz_i32_u32", lambda a: _first_bit(a, 32, low=False))
_unary("s_clz_i32_u64", lambda a: _first_bit(a, 64, low=False))

def _popcount(a) -> np.ndarray: return np.bitwise_count(_u64(a)).astype(np.uint64)

def _first_bit(a, bits: int, low: bool) -> np.ndarray:
  """Index of the lowest set bit (ctz) or leading zeros (clz); -1 (all ones) when there is none."""
  out = []
  for x in np.atleast_1d(a):
    x = int(x)
    if x == 0: out.append(0xFFFFFFFF)
    else: out.append((x & -x).bit_length() - 1 if low else bits - x.bit_length())
  return _u64(out)

def _cselect(name: str, regs: int) -> None:
  def op(st: WaveState, g: Group, ins: Instruction) -> None:
    a, b = st.sread(g, ins.fields["ssrc0"], regs), st.sread(g, ins.fields["ssrc1"], regs)
    st.swrite_op(g, ins.fields["sdst"], np.where(st.scc[g.wv], a, b), regs)
  OPS[name] = op
_cselect("s_cselect_b32", 1)
_cselect("s_cselect_b64", 2)

def _cmov(name: str, regs: int) -> None:
  def op(st: WaveState, g: Group, ins: Instruction) -> None:
    new, old = st.sread(g, ins.fields["ssrc0"], regs), st.sread(g, ins.fields["sdst"], regs)
    st.swrite_op(g, ins.fields["sdst"], np.where(st.scc[g.wv], new, old), regs)
  OPS[name] = op
_cmov("s_cmov_b32", 1)
_cmov("s_cmov_b64", 2)

def _carry(name: str, sub: bool) -> None:
  def op(st: WaveState, g: Group, ins: Instruction) -> None:
    a, b = _u64(st.sread(g, ins.fields["ssrc0"])), _u64(st.sread(g, ins.fields["ssrc1"]))
    c = st.scc[g.wv].astype(np.uint64)
    r = (a - b - c) if sub else (a + b + c)
    st.scc[g.wv] = (b + c > a) if sub else (r > M32)
    st.swrite_op(g, ins.fields["sdst"], np.broadcast_to(r & M32, (g.nw,)))
  OPS[name] = op
_carry("s_addc_u32", False)
_carry("s_subb_u32", True)

# s_*_saveexec: dst = EXEC; EXEC = f(src, EXEC); SCC = EXEC != 0 (RDNA3 ISA guide 16.2 SOP1)
_SAVEEXEC = {"and": lambda s, e, m: s & e, "or": lambda s, e, m: s | e, "xor": lambda s, e, m: s ^ e,
             "nand": lambda s, e, m: ~(s & e) & m, "nor": lambda s, e, m: ~(s | e) & m, "xnor": lambda s, e, m: ~(s ^ e) & m,
             "and_not0": lambda s, e, m: ~s & e & m, "or_not0": lambda s, e, m: (~s | e) & m,
             "and_not1": lambda s, e, m: s & ~e & m, "or_not1": lambda s, e, m: (s | ~e) & m}
def _saveexec(name: str, fn, regs: int) -> None:
  def op(st: WaveState, g: Group, ins: Instruction) -> None:
    mask = M64 if regs == 2 else M32
    s = _u64(st.sread(g, ins.fields["ssrc0"], regs))
    e = _u64(st.sread(g, _EXEC_OP, regs))
    new = np.broadcast_to(fn(s, e, mask) & mask, (g.nw,))
    st.swrite_op(g, ins.fields["sdst"], e, regs)
    st.swrite_op(g, _EXEC_OP, new, regs)
    st.scc[g.wv] = new != 0
  OPS[name] = op
_EXEC_OP = Operand("exec_lo")
for base, fn in _SAVEEXEC.items():
  _saveexec(f"s_{base}_saveexec_b32", fn, 1)
  _saveexec(f"s_{base}_saveexec_b64", fn, 2)

# SOPC compares: SCC = a op b (RDNA3 ISA guide 16.4)
_CMP = {"eq": np.equal, "lg": np.not_equal, "gt": np.greater, "ge": np.greater_equal, "lt": np.less, "le": np.less_equal}
def _compare(name: str, fn, signed: bool, regs: int) -> None:
  def op(st: WaveState, g: Group, ins: Instruction) -> None:
    a, b = _u64(st.sread(g, ins.fields["ssrc0"], regs)), _u64(st.sread(g, ins.fields["ssrc1"], regs))
    if signed: a, b = _i64(a, 32), _i64(b, 32)
    st.scc[g.wv] = np.broadcast_to(fn(a, b), (g.nw,))
  OPS[name] = op
for c, fn in _CMP.items():
  _compare(f"s_cmp_{c}_i32", fn, True, 1)
  _compare(f"s_cmp_{c}_u32", fn, False, 1)
_compare("s_cmp_eq_u64", np.equal, False, 2)
_compare("s_cmp_lg_u64", np.not_equal, False, 2)

def _bitcmp(name: str, want: int, regs: int) -> None:
  def op(st: WaveState, g: Group, ins: Instruction) -> None:
    a, b = _u64(st.sread(g, ins.fields["ssrc0"], regs)), _u64(st.sread(g, ins.fields["ssrc1"]))
    st.scc[g.wv] = np.broadcast_to(((a >> (b & np.uint64(32 * regs - 1))) & np.uint64(1)) == want, (g.nw,))
  OPS[name] = op
_bitcmp("s_bitcmp0_b32", 0, 1); _bitcmp("s_bitcmp1_b32", 1, 1); _bitcmp("s_bitcmp0_b64", 0, 2); _bitcmp("s_bitcmp1_b64", 1, 2)

# SOP1 s_bitset0/1: D.u[S0.u[4:0]] = 0 or 1, the rest of D kept (RDNA3 ISA guide 16.2; S0.u[5:0] for _b64)
def _bitset(name: str, value: int, regs: int) -> None:
  def op(st: WaveState, g: Group, ins: Instruction) -> None:
    d, b = _u64(st.sread(g, ins.fields["sdst"], regs)), _u64(st.sread(g, ins.fields["ssrc0"])) & np.uint64(32 * regs - 1)
    bit = np.uint64(1) << b
    st.swrite_op(g, ins.fields["sdst"], d | bit if value else d & ~bit, regs)
  OPS[name] = op
_bitset("s_bitset0_b32", 0, 1); _bitset("s_bitset1_b32", 1, 1); _bitset("s_bitset0_b64", 0, 2); _bitset("s_bitset1_b64", 1, 2)

# SOPK: the 16-bit immediate, sign-extended for the _i32 forms and zero-extended for _u32 (RDNA3 ISA guide 16.3)
def _simm(ins: Instruction, signed: bool) -> np.uint64:
  v = ins.fields["simm16"]
  return np.uint64((v - 0x10000 if signed and v & 0x8000 else v) & 0xFFFFFFFF)

def _sopk_compare(name: str, fn, signed: bool) -> None:
  def op(st: WaveState, g: Group, ins: Instruction) -> None:
    a, k = _u64(st.sread(g, ins.fields["sdst"])), _simm(ins, signed)
    if signed: a, k = _i64(a, 32), _i64(k, 32)
    st.scc[g.wv] = np.broadcast_to(fn(a, k), (g.nw,))
  OPS[name] = op
for c, fn in _CMP.items():
  _sopk_compare(f"s_cmpk_{c}_i32", fn, True)
  _sopk_compare(f"s_cmpk_{c}_u32", fn, False)

def _movk(st: WaveState, g: Group, ins: Instruction) -> None:
  st.swrite_op(g, ins.fields["sdst"], np.full(g.nw, _simm(ins, True), np.uint64))
def _cmovk(st: WaveState, g: Group, ins: Instruction) -> None:
  old = _u64(st.sread(g, ins.fields["sdst"]))
  st.swrite_op(g, ins.fields["sdst"], np.where(st.scc[g.wv], _simm(ins, True), old))
def _addk(st: WaveState, g: Group, ins: Instruction) -> None:
  a, k = _u64(st.sread(g, ins.fields["sdst"])), _simm(ins, True)
  r = (a + k) & M32
  st.scc[g.wv] = (_i64(a, 32) + _i64(k, 32)) != _i64(r, 32)
  st.swrite_op(g, ins.fields["sdst"], r)
def _mulk(st: WaveState, g: Group, ins: Instruction) -> None:
  st.swrite_op(g, ins.fields["sdst"], _u64(st.sread(g, ins.fields["sdst"])) * _simm(ins, True) & M32)
OPS.update({"s_movk_i32": _movk, "s_cmovk_i32": _cmovk, "s_addk_i32": _addk, "s_mulk_i32": _mulk})

# ---- gfx12 64-bit integer adds and multiply (RDNA4 ISA guide S_ADD_NC_U64, S_SUB_NC_U64, S_MUL_U64: SCC unchanged)
_binary("s_add_nc_u64", lambda a, b: a + b)
_binary("s_sub_nc_u64", lambda a, b: a - b)
_binary("s_mul_u64", lambda a, b: a * b)

# ---- SALU float ops of gfx1150/gfx12 (RDNA4 ISA guide S_ADD_F32 ... S_CMP_*_F16): one value per wave, the VALU's
# rounding, NaN and denormal rules (float_rules.py)
_FLOAT = {"f32": (np.float32, np.uint32), "f16": (np.float16, np.uint16)}

def _fsrc(st: WaveState, g: Group, op: Operand, t: str) -> np.ndarray:
  raw = st.vread(g, op, 1, 16) if op.kind == "float" and t == "f16" else st.sread(g, op)
  x = (np.broadcast_to(np.asarray(raw, np.uint32), (g.nw,)) & np.uint32(0xFFFF if t == "f16" else 0xFFFFFFFF)).astype(_FLOAT[t][1]).view(_FLOAT[t][0])
  return fr.ftz(x) if st.flush(t) else x

def _fresult(st: WaveState, x: np.ndarray, t: str) -> np.ndarray:
  x = np.asarray(x).astype(_FLOAT[t][0])
  return (fr.ftz(x) if st.flush(t) else x).view(_FLOAT[t][1]).astype(np.uint32)

def _modified(x: np.ndarray, f: dict, i: int) -> np.ndarray:
  """VOP3 abs/neg of source i (the pseudo-scalar v_s_* ops); SALU encodings have neither field."""
  if f.get("abs", 0) >> i & 1: x = np.abs(x)
  return -x if f.get("neg", 0) >> i & 1 else x

def _salu_float(name: str, types: str, fn, fields=("ssrc0", "ssrc1"), dst: str = "sdst") -> None:
  """name: dst = fn(st, *sources) with types 'dst src...' (a float dst is rounded; an integer one is taken as is)."""
  t = types.split()
  def op(st: WaveState, g: Group, ins: Instruction) -> None:
    srcs = [_modified(_fsrc(st, g, ins.fields[k], ts), ins.fields, i) if ts in _FLOAT else np.broadcast_to(st.sread(g, ins.fields[k]), (g.nw,))
            for i, (k, ts) in enumerate(zip(fields, t[1:]))]
    r = fn(st, *srcs)
    st.swrite_op(g, ins.fields[dst], _fresult(st, r, t[0]) if t[0] in _FLOAT else np.asarray(r).astype(np.uint32))
  OPS[name] = op

for ft in _FLOAT:
  two, one = f"{ft} {ft} {ft}", f"{ft} {ft}"
  _salu_float(f"s_add_{ft}", two, lambda st, a, b: a + b)
  _salu_float(f"s_sub_{ft}", two, lambda st, a, b: a - b)
  _salu_float(f"s_mul_{ft}", two, lambda st, a, b: a * b)
  _salu_float(f"s_max_{ft}", two, lambda st, a, b: fr.minmax(a, b, True, False))
  _salu_float(f"s_min_{ft}", two, lambda st, a, b: fr.minmax(a, b, False, False))
  _salu_float(f"s_fmac_{ft}", f"{ft} {ft} {ft} {ft}", lambda st, a, b, c: fr.fma(a, b, c), ("ssrc0", "ssrc1", "sdst"))
  _salu_float(f"s_maximum_{ft}", two, lambda st, a, b: minimum_maximum(a, b, True))
  _salu_float(f"s_minimum_{ft}", two, lambda st, a, b: minimum_maximum(a, b, False))
  # gfx12 pseudo-scalar transcendentals: VOP3 words with an SGPR source and destination (RDNA4 ISA guide V_S_EXP_F32)
  for r, fn in (("exp", np.exp2), ("log", np.log2), ("sqrt", np.sqrt), ("rcp", lambda a: 1 / a), ("rsq", lambda a: 1 / np.sqrt(a))):
    _salu_float(f"v_s_{r}_{ft}", one, lambda st, a, fn=fn: fn(a.astype(np.float64)), ("src0",), "vdst")
  for r, fn in (("ceil", np.ceil), ("floor", np.floor), ("trunc", np.trunc), ("rndne", np.rint)):
    _salu_float(f"s_{r}_{ft}", one, lambda st, a, fn=fn: fn(a), ("ssrc0",))
_salu_float("s_fmaak_f32", "f32 f32 f32 f32", lambda st, a, b, k: fr.fma(a, b, k), ("ssrc0", "ssrc1", "literal"))
_salu_float("s_fmamk_f32", "f32 f32 f32 f32", lambda st, a, k, b: fr.fma(a, k, b), ("ssrc0", "literal", "ssrc1"))
_salu_float("s_cvt_f32_i32", "f32 i32", lambda st, a: a.view(np.int32).astype(np.float32), ("ssrc0",))
_salu_float("s_cvt_f32_u32", "f32 u32", lambda st, a: a.astype(np.float32), ("ssrc0",))
_salu_float("s_cvt_i32_f32", "i32 f32", lambda st, a: fr.to_int(a, np.int32).view(np.uint32), ("ssrc0",))
_salu_float("s_cvt_u32_f32", "u32 f32", lambda st, a: fr.to_int(a, np.uint32), ("ssrc0",))
_salu_float("s_cvt_f16_f32", "f16 f32", lambda st, a: a.astype(np.float16), ("ssrc0",))
_salu_float("s_cvt_f32_f16", "f32 f16", lambda st, a: a.astype(np.float32), ("ssrc0",))
_salu_float("s_cvt_hi_f32_f16", "f32 u32", lambda st, a: (a >> np.uint32(16)).astype(np.uint16).view(np.float16).astype(np.float32), ("ssrc0",))

# SOPC float compares: the n* forms are the negation, so they hold for unordered operands (RDNA4 ISA guide S_CMP_NGE_F32)
_FCMP = {"lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "lg": lambda a, b: (a < b) | (a > b),
         "ge": np.greater_equal, "o": lambda a, b: ~np.isnan(a) & ~np.isnan(b), "u": lambda a, b: np.isnan(a) | np.isnan(b)}
_FCMP.update({f"n{k}": (lambda a, b, fn=_FCMP[k]: ~fn(a, b)) for k in ("ge", "lg", "gt", "le", "lt")})
_FCMP["neq"] = lambda a, b: ~np.equal(a, b)
def _float_compare(name: str, fn, t: str) -> None:
  def op(st: WaveState, g: Group, ins: Instruction) -> None:
    st.scc[g.wv] = fn(_fsrc(st, g, ins.fields["ssrc0"], t), _fsrc(st, g, ins.fields["ssrc1"], t))
  OPS[name] = op
for c, fn in _FCMP.items():
  for ft in _FLOAT: _float_compare(f"s_cmp_{c}_{ft}", fn, ft)
