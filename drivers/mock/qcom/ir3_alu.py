"""What the ir3 ALU instructions compute (cat1 mov/cov, cat2, cat3, cat4), over numpy arrays of register bits: one
element per fiber, uint32 for full-precision values, uint16 for half. Semantics from Mesa's ir3 (ir3_compiler_nir.c
emit_alu: which nir op each instruction implements; nir_opcodes.py for those ops' definitions; the ISA XML docs).
Choices where Mesa documents nothing, all deliberate:
- float ops run in float32 (full) or float16 (half) with numpy's IEEE round-to-nearest-even; min.f/max.f are
  np.fmin/np.fmax (a NaN operand yields the other operand, as nir fmin/fmax allow).
- mad.f32 is fused (float64 product + addend, one rounding to float32): ir3 emits it for nir ffma, and Mesa asks nir to
  fuse fmul+fadd into ffma (ir3_nir.c options fuse_ffma32); mad.f16 is computed the same way, rounded to float16.
- cat4 (SFU) ops are computed exactly in float32 with numpy (rcp = 1/x, rsq = 1/sqrt(x), log2, exp2, sin, cos, sqrt);
  half versions convert their float16 source to float32, compute, and round the result to float16.
- cov float->int rounds toward zero by default (nir f2i semantics), else by the cat1 ROUND field ((even), (pos_infinity),
  (neg_infinity)); the result saturates to the destination range and NaN becomes 0. float->float and int->float use
  round-to-nearest-even; f32->f16 overflow gives +-inf. int->int truncates to the destination width after sign/zero
  extension by the source type. 8-bit destinations are stored zero- (u8) or sign- (type 7) extended in a half register;
  cat1 type 7 (printed u8_32) is treated as a signed 8-bit value in a half register (ir3-cat1.xml HALF expression).
- shl.b/shr.b/ashr.b use the shift amount modulo the register width (nir ishl/ishr/ushr semantics).
- clz.b of 0 is the register width; cmps.* write 1 or 0."""
from __future__ import annotations
import numpy as np

MASK = {32: 0xFFFFFFFF, 16: 0xFFFF}

def as_float(raw: np.ndarray) -> np.ndarray:
  """Register bits as float32 (uint32 input) or float16 (uint16 input)."""
  return raw.view(np.float32) if raw.dtype == np.uint32 else raw.view(np.float16)

def float_bits(x: np.ndarray, half: bool) -> np.ndarray:
  """A float array as float16/float32 register bits."""
  return np.asarray(x, np.float16).view(np.uint16) if half else np.asarray(x, np.float32).view(np.uint32)

def as_int(raw: np.ndarray, signed: bool) -> np.ndarray:
  """Register bits as int64, sign- or zero-extended from the register width."""
  if not signed: return raw.astype(np.int64)
  return raw.view(np.int32 if raw.dtype == np.uint32 else np.int16).astype(np.int64)

def int_bits(x: np.ndarray, half: bool) -> np.ndarray:
  """An integer array truncated to the register width (wraparound)."""
  return (np.asarray(x, np.int64) & (0xFFFF if half else 0xFFFFFFFF)).astype(np.uint16 if half else np.uint32)

def fmods(x: np.ndarray, neg: bool, ab: bool) -> np.ndarray:
  """(abs) then (neg) on a float source (ir3.h IR3_REG_FABS / IR3_REG_FNEG)."""
  if ab: x = np.abs(x)
  return -x if neg else x

def imods(x: np.ndarray, neg: bool, ab: bool, bitwise: bool) -> np.ndarray:
  """(abs)/(neg) on an integer source: integer abs/negate (IR3_REG_SABS/SNEG), or bitwise not for .b ops (BNOT)."""
  if ab: x = np.abs(x)
  if neg: x = ~x if bitwise else -x
  return x

def _rndaz(a): return np.copysign(np.floor(np.abs(a) + np.asarray(0.5, a.dtype)), a)

FLOAT1 = {"absneg.f": lambda a: a, "floor.f": np.floor, "ceil.f": np.ceil, "rndne.f": np.rint, "trunc.f": np.trunc,
          "sign.f": np.sign, "rndaz.f": _rndaz}
FLOAT2 = {"add.f": np.add, "mul.f": np.multiply, "min.f": np.fmin, "max.f": np.fmax}
CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal}

def _bfrev(a, w):
  out = np.zeros_like(a)
  for i in range(w): out |= ((a >> i) & 1) << (w - 1 - i)
  return out

def _cbits(a, w):
  out = np.zeros_like(a)
  for i in range(w): out += (a >> i) & 1
  return out

def _clz(a, w):
  out = np.full_like(a, w)
  for i in range(w): out = np.where((a >> i) & 1 == 1, w - 1 - i, out)
  return out

def _s24(a): return ((a & 0xFFFFFF) ^ 0x800000) - 0x800000

# integer ops on int64 (signed ops see sign-extended sources); w = register width in bits
INT1 = {"absneg.s": lambda a, w: a, "not.b": lambda a, w: ~a, "bfrev.b": _bfrev, "cbits.b": _cbits, "clz.b": _clz}
INT2 = {"add.u": lambda a, b, w: a + b, "add.s": lambda a, b, w: a + b, "sub.u": lambda a, b, w: a - b,
        "sub.s": lambda a, b, w: a - b, "min.u": lambda a, b, w: np.minimum(a, b), "max.u": lambda a, b, w: np.maximum(a, b),
        "min.s": lambda a, b, w: np.minimum(a, b), "max.s": lambda a, b, w: np.maximum(a, b),
        "and.b": lambda a, b, w: a & b, "or.b": lambda a, b, w: a | b, "xor.b": lambda a, b, w: a ^ b,
        "shl.b": lambda a, b, w: a << (b & (w - 1)), "shr.b": lambda a, b, w: a >> (b & (w - 1)),
        "ashr.b": lambda a, b, w: a >> (b & (w - 1)),
        "mul.u24": lambda a, b, w: (a & 0xFFFFFF) * (b & 0xFFFFFF), "mul.s24": lambda a, b, w: _s24(a) * _s24(b),
        # the low half of each source (src/compiler/nir/nir_opcodes.py umul_low, which ir3 emits as mull.u)
        "mull.u": lambda a, b, w: (a & ((1 << w // 2) - 1)) * (b & ((1 << w // 2) - 1))}
SIGNED = {"add.s", "sub.s", "min.s", "max.s", "absneg.s", "ashr.b", "cmps.s"}

def cat2_float(name: str, srcs: list, dst_half: bool, sat: bool) -> np.ndarray:
  """A cat2 .f op on float sources (modifiers already applied) -> destination bits."""
  r = FLOAT1[name](srcs[0]) if name in FLOAT1 else FLOAT2[name](srcs[0], srcs[1])
  if sat: r = np.clip(r, 0, 1)
  return float_bits(r, dst_half)

def cat2_int(name: str, srcs: list, w: int, dst_half: bool) -> np.ndarray:
  """A cat2 integer op on int64 sources -> destination bits (wraparound)."""
  r = INT1[name](srcs[0], w) if name in INT1 else INT2[name](srcs[0], srcs[1], w)
  return int_bits(r, dst_half)

def cat3(name: str, a, b, c, dst_half: bool) -> np.ndarray:
  """cat3 on prepared sources: floats for mad.f*, int64 for integer mads, raw bits for sel (b is the condition).
  madsh.m16 = ((a >> 16) * (b & 0xffff) << 16) + c (nir_opcodes.py imadsh_mix16)."""
  if name in ("mad.f32", "mad.f16"): return float_bits(a.astype(np.float64) * b + c, dst_half)
  if name == "mad.u24": return int_bits((a & 0xFFFFFF) * (b & 0xFFFFFF) + c, dst_half)
  if name == "mad.s24": return int_bits(_s24(a) * _s24(b) + c, dst_half)
  if name in ("mad.u16", "mad.s16"): return int_bits(a * b + c, dst_half)
  if name == "madsh.m16": return int_bits((((a >> 16) & 0xFFFF) * (b & 0xFFFF) << 16) + c, dst_half)
  raise KeyError(name)

def sfu(name: str, x: np.ndarray, dst_half: bool) -> np.ndarray:
  """cat4: the op computed in float32 (ir3-cat4.xml names; h* are the half-precision opcodes)."""
  x = x.astype(np.float32)
  op = name[1:] if name in ("hrsq", "hlog2", "hexp2") else name
  with np.errstate(all="ignore"):
    r = {"rcp": lambda v: np.float32(1) / v, "rsq": lambda v: np.float32(1) / np.sqrt(v), "log2": np.log2,
         "exp2": np.exp2, "sin": np.sin, "cos": np.cos, "sqrt": np.sqrt}[op](x)
  return float_bits(r.astype(np.float32), dst_half)

# cat1 types: (is float, signed, bits of the value)
TYPE_INFO = {"f16": (True, True, 16), "f32": (True, True, 32), "u16": (False, False, 16), "u32": (False, False, 32),
             "s16": (False, True, 16), "s32": (False, True, 32), "u8": (False, False, 8), "u8_32": (False, True, 8)}

def cov(raw: np.ndarray, st: str, dt: str, rnd: int, sat: bool) -> np.ndarray:
  """cat1 mov/cov: source bits of type st -> destination bits of type dt (see the module docstring for rounding)."""
  sf, ss, sb = TYPE_INFO[st]
  df, ds, db = TYPE_INFO[dt]
  dhalf = db <= 16
  if sf: v = as_float(raw.astype(np.uint16) if sb == 16 else raw.astype(np.uint32))
  elif sb == 8: v = (raw.astype(np.int64) & 0xFF) - (((raw.astype(np.int64) >> 7) & 1) << 8 if ss else 0)
  else: v = as_int(raw.astype(np.uint16) if sb == 16 else raw.astype(np.uint32), ss)
  if df:
    with np.errstate(all="ignore"): r = np.asarray(v, np.float16 if db == 16 else np.float32)
    return float_bits(np.clip(r, 0, 1) if sat else r, dhalf)
  if sf:
    with np.errstate(all="ignore"):
      f = (np.trunc, np.rint, np.ceil, np.floor)[rnd](v.astype(np.float64))
      lo, hi = (-(1 << (db - 1)), (1 << (db - 1)) - 1) if ds else (0, (1 << db) - 1)
      v = np.where(np.isnan(f), 0, np.clip(np.nan_to_num(f), lo, hi)).astype(np.int64)
  if db == 8: v = ((v & 0xFF) ^ 0x80) - 0x80 if ds else v & 0xFF
  return int_bits(v, dhalf)
