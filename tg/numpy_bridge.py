"""Conversion between tg dtypes and numpy arrays, including the formats numpy lacks (bfloat16, fp8)."""
from __future__ import annotations
import numpy as np
from ir.dtype import DType, dtypes

_NUMPY = {dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16, dtypes.uint16: np.uint16,
          dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64, dtypes.uint64: np.uint64,
          dtypes.float16: np.float16, dtypes.float32: np.float32, dtypes.float64: np.float64}
# how a dtype without a numpy equivalent is stored, and what numpy type its values come back as
_STORAGE = {dtypes.bfloat16: np.uint16, dtypes.fp8e4m3: np.uint8, dtypes.fp8e5m2: np.uint8}

def storage_dtype(dt: DType) -> np.dtype: return np.dtype(_NUMPY.get(dt) or _STORAGE[dt])
def value_dtype(dt: DType) -> np.dtype: return np.dtype(_NUMPY.get(dt, np.float32))

def dtype_of_numpy(a: np.ndarray) -> DType:
  for dt, npt in _NUMPY.items():
    if a.dtype == npt: return dt
  raise TypeError(f"numpy dtype {a.dtype} has no tg equivalent")

def encode(a: np.ndarray, dt: DType) -> np.ndarray:
  """`a` converted to dtype `dt`, as the bytes a buffer of `dt` holds."""
  if dt in _NUMPY: return np.ascontiguousarray(a, dtype=_NUMPY[dt]) if a.dtype != np.bool_ or dt == dtypes.bool else np.ascontiguousarray(a.astype(_NUMPY[dt]))
  f = np.ascontiguousarray(a, dtype=np.float32)
  if dt == dtypes.bfloat16:
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(f), np.uint16(0x7FC0), rounded)
  return _float_to_fp8(f, dt)

def decode(raw: np.ndarray, dt: DType) -> np.ndarray:
  """Values of a buffer of `dt` (given as its storage array) in the nearest numpy dtype."""
  if dt in _NUMPY: return raw
  if dt == dtypes.bfloat16: return (raw.astype(np.uint32) << 16).view(np.float32)
  return _fp8_to_float(raw, dt)

def _fp8_params(dt: DType) -> tuple[int, int, int]:
  """(exponent bits, mantissa bits, exponent bias)."""
  return (4, 3, 7) if dt == dtypes.fp8e4m3 else (5, 2, 15)

def _fp8_to_float(raw: np.ndarray, dt: DType) -> np.ndarray:
  ebits, mbits, bias = _fp8_params(dt)
  r = raw.astype(np.int32)
  sign = np.where(r >> 7, -1.0, 1.0)
  exp, man = (r >> mbits) & ((1 << ebits) - 1), r & ((1 << mbits) - 1)
  normal = (1 + man / 2**mbits) * np.exp2(exp.astype(np.float64) - bias)
  sub = man / 2**mbits * 2.0**(1 - bias)
  out = sign * np.where(exp == 0, sub, normal)
  if dt == dtypes.fp8e4m3: out = np.where((r & 0x7F) == 0x7F, np.nan, out)  # e4m3fn: no infinities, one NaN code
  else: out = np.where(exp == 31, np.where(man == 0, sign * np.inf, np.nan), out)
  return out.astype(np.float32)

def _float_to_fp8(f: np.ndarray, dt: DType) -> np.ndarray:
  """Round to nearest even over the finite fp8 values (saturating e4m3 to its largest value, e5m2 overflowing to inf)."""
  table = _fp8_to_float(np.arange(256, dtype=np.uint8), dt).astype(np.float64)
  codes = np.array([c for c in range(128) if np.isfinite(table[c])], dtype=np.uint8)
  values = table[codes]
  x = np.abs(f.astype(np.float64))
  idx = np.clip(np.searchsorted(values, x), 1, len(values) - 1)
  lo, hi = values[idx - 1], values[idx]
  pick_hi = (x - lo > hi - x) | ((x - lo == hi - x) & (codes[idx] % 2 == 0))
  out = np.where(pick_hi, codes[idx], codes[idx - 1]).astype(np.uint8)
  if dt == dtypes.fp8e5m2: out = np.where(x > values[-1] + (values[-1] - values[-2]) / 2, np.uint8(0x7C), out)
  else: out = np.where(x > values[-1], codes[-1], out)
  out = out | np.where(np.signbit(f), np.uint8(0x80), np.uint8(0))
  return np.where(np.isnan(f), np.uint8(0x7F), out).astype(np.uint8)
