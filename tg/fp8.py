"""fp8 (e4m3fn and e5m2) conversions written as Tensor ops on the raw bytes, so every device can cast fp8 with the
integer and float arithmetic it already has."""
from __future__ import annotations
from typing import TYPE_CHECKING
from ir.dtype import DType, dtypes

if TYPE_CHECKING: from tg.tensor import Tensor

FP8 = (dtypes.fp8e4m3, dtypes.fp8e5m2)

def _params(dt: DType) -> tuple[int, int, int, float]:
  """(exponent bits, mantissa bits, bias, largest finite value)."""
  return (4, 3, 7, 448.0) if dt == dtypes.fp8e4m3 else (5, 2, 15, 57344.0)

def fp8_to_float(x: Tensor) -> Tensor:
  """fp8 -> float32."""
  ebits, mbits, bias, _ = _params(x.dtype)
  b = x.bitcast(dtypes.uint8).cast(dtypes.int32)
  exp, man = (b >> mbits) & ((1 << ebits) - 1), (b & ((1 << mbits) - 1)).cast(dtypes.float32)
  normal = (exp - bias).cast(dtypes.float32).exp2() * (1 + man * 2.0 ** -mbits)
  value = (exp == 0).where(man * 2.0 ** (1 - bias - mbits), normal)
  value = ((b >> 7) == 1).where(-value, value)
  if x.dtype == dtypes.fp8e4m3: return ((b & 0x7F) == 0x7F).where(float("nan"), value)
  top = exp == (1 << ebits) - 1
  return top.where((man == 0).where(((b >> 7) == 1).where(float("-inf"), float("inf")), float("nan")), value)

def float_to_fp8(x: Tensor, dt: DType) -> Tensor:
  """float -> fp8, rounding to nearest even; e4m3 saturates to +-448, e5m2 overflows to inf."""
  ebits, mbits, bias, largest = _params(dt)
  f = x.cast(dtypes.float32)
  a = f.abs()
  exp = a.log2().floor().clamp(1 - bias, (1 << ebits) - 2 - bias if dt == dtypes.fp8e5m2 else (1 << ebits) - 1 - bias)
  quantum = (exp - mbits).exp2()
  r = (a / quantum).round() * quantum                               # the nearest representable magnitude
  if dt == dtypes.fp8e4m3: r = r.minimum(largest)
  over = r > largest
  rexp = r.log2().floor().clamp(1 - bias, None)
  sub = r < 2.0 ** (1 - bias)
  code_sub = (r * 2.0 ** (bias - 1 + mbits)).cast(dtypes.int32)
  code_norm = ((rexp + bias).cast(dtypes.int32) << mbits) | ((r / (rexp - mbits).exp2()).cast(dtypes.int32) - (1 << mbits))
  code = sub.where(code_sub, code_norm)
  if dt == dtypes.fp8e5m2: code = over.where(0x7C, code)
  code = (f < 0).where(code | 0x80, code)
  code = (f.isnan()).where(0x7F, code)
  return code.cast(dtypes.uint8).bitcast(dt)
