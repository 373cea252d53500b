"""The ISA's float rules that numpy doesn't follow by itself (RDNA3 ISA guide chapter 16 pseudocode): min/max with
IEEE-mode NaN handling and +0 > -0, the fdiv helpers v_div_scale/v_div_fmas/v_div_fixup, v_cmp_class, rounding
toward zero of v_cvt_pk_rtz_f16_f32, float->int conversions that saturate, denormal flushing, and an fma."""
from __future__ import annotations
import numpy as np

_QUIET = {np.dtype(np.float16): 0x0200, np.dtype(np.float32): 0x00400000, np.dtype(np.float64): 0x0008000000000000}
_UINT = {np.dtype(np.float16): np.uint16, np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}
_MANT = {np.dtype(np.float16): 10, np.dtype(np.float32): 23, np.dtype(np.float64): 52}

def bits(x: np.ndarray) -> np.ndarray: return x.view(_UINT[x.dtype])

def is_signaling(x: np.ndarray) -> np.ndarray:
  return np.isnan(x) & ((bits(x) & _UINT[x.dtype](_QUIET[x.dtype])) == 0)

def quiet(x: np.ndarray) -> np.ndarray:
  return (bits(x) | _UINT[x.dtype](_QUIET[x.dtype])).view(x.dtype)

def exponent(x: np.ndarray) -> np.ndarray:
  """The biased exponent field."""
  m = _MANT[x.dtype]
  width = x.dtype.itemsize * 8 - 1 - m
  return ((bits(x) >> _UINT[x.dtype](m)) & _UINT[x.dtype]((1 << width) - 1)).astype(np.int64)

def minmax(a: np.ndarray, b: np.ndarray, is_max: bool, ieee: bool) -> np.ndarray:
  """V_MAX_F32 / V_MIN_F32: a NaN operand yields the other one (a signaling NaN in IEEE mode yields it quieted);
  +0 counts as greater than -0."""
  a, b = np.broadcast_arrays(a, b)
  gt = (a > b) | ((a == 0) & (b == 0) & ~np.signbit(a) & np.signbit(b))
  lt = (a < b) | ((a == 0) & (b == 0) & np.signbit(a) & ~np.signbit(b))
  r = np.where(gt if is_max else lt, a, b)
  r = np.where(np.isnan(b), a, np.where(np.isnan(a), b, r))
  if ieee:
    r = np.where(is_signaling(b), quiet(b), r)
    r = np.where(is_signaling(a), quiet(a), r)
  return r

def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
  """a*b+c rounded once for f32 (the f64 product is exact); f64 and f16 through an error-compensated sum."""
  dt = np.result_type(a, b, c)
  if dt == np.float32 or dt == np.float16:
    return (np.asarray(a, np.float64) * b + c).astype(dt)
  a, b, c = (np.asarray(x, np.float64) for x in (a, b, c))
  p = a * b
  split = 134217729.0  # 2^27 + 1: Dekker's splitting of a double into two 26-bit halves
  ah = a * split; ah = ah - (ah - a); al = a - ah
  bh = b * split; bh = bh - (bh - b); bl = b - bh
  err = ((ah * bh - p) + ah * bl + al * bh) + al * bl
  s = p + c
  bb = s - p
  serr = (p - (s - bb)) + (c - bb)
  out = s + (err + serr)
  return np.where(np.isfinite(out) & np.isfinite(p), out, p + c)

def ftz(x: np.ndarray) -> np.ndarray:
  """Flush denormals to a zero of the same sign (FLOAT_DENORM_MODE 0)."""
  tiny = np.finfo(x.dtype).tiny
  return np.where(np.abs(x) < tiny, np.copysign(np.zeros((), x.dtype), x), x).astype(x.dtype)

def div_scale(s0: np.ndarray, s1: np.ndarray, s2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """V_DIV_SCALE_F32/F64: (scaled S0, VCC) for the fdiv expansion; S1 is the denominator, S2 the numerator."""
  f64 = s0.dtype == np.float64
  scale, big, tiny_exp = (128, 768, 53) if f64 else (64, 96, 23)
  s0, s1, s2 = np.broadcast_arrays(s0, s1, s2)
  s1d, s2d = s1.astype(np.float64), s2.astype(np.float64)
  tiny = np.finfo(s0.dtype).tiny
  with np.errstate(all="ignore"):
    rcp_denorm = np.abs(1.0 / s1d) < np.finfo(np.float64).tiny
    quot = (s2 / s1)
  quot_denorm = (np.abs(quot) < tiny) & (quot != 0)
  s1_denorm = (np.abs(s1) < tiny) & (s1 != 0)
  ediff = exponent(s2) - exponent(s1)
  up, down = np.ldexp(s0, scale).astype(s0.dtype), np.ldexp(s0, -scale).astype(s0.dtype)
  d = s0.copy()
  zero = (s2d == 0) | (s1d == 0)
  c1 = ~zero & (ediff >= big)
  c2 = ~zero & ~c1 & s1_denorm
  c3 = ~zero & ~c1 & ~c2 & rcp_denorm & quot_denorm
  c4 = ~zero & ~c1 & ~c2 & ~c3 & rcp_denorm
  c5 = ~zero & ~c1 & ~c2 & ~c3 & ~c4 & quot_denorm
  c6 = ~zero & ~c1 & ~c2 & ~c3 & ~c4 & ~c5 & (exponent(s2) <= tiny_exp)
  vcc = c1 | c3 | c5
  d = np.where((c1 | c3) & (s0 == s1), up, d)
  d = np.where(c2 | c6 | (c5 & (s0 == s2)), up, d)
  d = np.where(c4, down, d)
  d = np.where(zero, np.array(np.nan, s0.dtype), d)
  return d.astype(s0.dtype), vcc

def div_fmas(a, b, c, vcc: np.ndarray) -> np.ndarray:
  """V_DIV_FMAS: in the lanes VCC marks, the fma undoes V_DIV_SCALE's scaling: by 2^64 (f32; 2^128 for f64) when the
  quotient S2 is at least 1, else by 2^-64, rounded once. The guide's pseudocode writes a fixed 2^32 (2^64), which
  would leave the 2^64 of V_DIV_SCALE half undone; this is the scaling under which LLVM's fdiv expansion (correctly
  rounded on hardware) is exact, which the fdiv kernel test checks."""
  dt = np.result_type(a, b, c)
  k, bias = (128, 1023) if dt == np.float64 else (64, 127)
  scale = np.where(exponent(np.asarray(c, dt)) > bias, float(k), float(-k))
  if dt == np.float64:
    r = fma(a, b, c)
    return np.where(vcc, np.ldexp(r, np.where(vcc, scale, 0).astype(int)), r)
  wide = np.asarray(a, np.float64) * b + c
  return np.where(vcc, np.ldexp(wide, np.where(vcc, scale, 0).astype(int)), wide).astype(dt)

def div_fixup(q: np.ndarray, den: np.ndarray, num: np.ndarray) -> np.ndarray:
  """V_DIV_FIXUP: the quotient's special cases (NaN, 0/0, inf/inf, x/0, x/inf, overflow) and sign."""
  q, den, num = np.broadcast_arrays(q, den, num)
  dt = q.dtype
  sign = np.signbit(den) ^ np.signbit(num)
  inf, nan = np.array(np.inf, dt), np.array(np.nan, dt)
  mag = np.abs(q)
  out = np.where(sign, -mag, mag)
  limit = {np.dtype(np.float16): 31, np.dtype(np.float32): 255, np.dtype(np.float64): 2047}[dt]
  out = np.where(exponent(den) == limit, np.where(sign, -np.finfo(dt).max, np.finfo(dt).max), out)
  out = np.where((np.abs(den) == inf) | (num == 0), np.where(sign, -np.zeros((), dt), np.zeros((), dt)), out)
  out = np.where((den == 0) | (np.abs(num) == inf), np.where(sign, -inf, inf), out)
  out = np.where((np.abs(den) == inf) & (np.abs(num) == inf), -nan, out)
  out = np.where((den == 0) & (num == 0), -nan, out)
  out = np.where(np.isnan(den), quiet(den), out)
  out = np.where(np.isnan(num), quiet(num), out)
  return out.astype(dt)

def classify(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
  """V_CMP_CLASS: bit of `mask` for x's class (0 sNaN, 1 qNaN, 2 -inf, 3 -normal, 4 -denorm, 5 -0, 6 +0,
  7 +denorm, 8 +normal, 9 +inf)."""
  neg = np.signbit(x)
  tiny = np.finfo(x.dtype).tiny
  cls = np.where(np.isinf(x), np.where(neg, 2, 9),
        np.where(x == 0, np.where(neg, 5, 6),
        np.where(np.abs(x) < tiny, np.where(neg, 4, 7), np.where(neg, 3, 8))))
  cls = np.where(np.isnan(x), np.where(is_signaling(x), 0, 1), cls)
  return ((np.asarray(mask, np.uint64) >> cls.astype(np.uint64)) & np.uint64(1)).astype(bool)

def to_f16_rtz(x: np.ndarray) -> np.ndarray:
  """f32 -> f16 rounding toward zero (V_CVT_PK_RTZ_F16_F32)."""
  h = x.astype(np.float16)
  hb = h.view(np.uint16)
  away = np.isfinite(x) & (np.abs(h.astype(np.float32)) > np.abs(x))
  return np.where(away, (hb - np.uint16(1)).astype(np.uint16), hb).view(np.float16)

def to_int(x: np.ndarray, dtype) -> np.ndarray:
  """Float -> integer truncating toward zero, saturating at the type's range, NaN -> 0 (f32_to_i32 and friends)."""
  info = np.iinfo(dtype)
  t = np.trunc(np.asarray(x, np.float64))
  t = np.where(np.isnan(t), 0, np.clip(t, info.min, info.max))
  return t.astype(dtype)
