import math
import numpy as np
import pytest
from ir.dtype import dtypes, least_upper_dtype, truncate, to_dtype, float_to_bf16, bf16_to_float, SCALARS
from ir.switches import Context

# PyTorch's promotion table for these pairs (torch.promote_types), written out by hand
PROMOTIONS = [
  (dtypes.bool, dtypes.bool, dtypes.bool), (dtypes.bool, dtypes.int8, dtypes.int8), (dtypes.int8, dtypes.uint8, dtypes.int16),
  (dtypes.uint8, dtypes.int16, dtypes.int16), (dtypes.int32, dtypes.int64, dtypes.int64), (dtypes.uint8, dtypes.uint16, dtypes.uint16),
  (dtypes.int32, dtypes.float16, dtypes.float16), (dtypes.int64, dtypes.bfloat16, dtypes.bfloat16), (dtypes.float16, dtypes.bfloat16, dtypes.float32),
  (dtypes.float16, dtypes.float32, dtypes.float32), (dtypes.float32, dtypes.float64, dtypes.float64), (dtypes.uint32, dtypes.int32, dtypes.int64),
  (dtypes.uint64, dtypes.int64, dtypes.fp8e4m3), (dtypes.bool, dtypes.float32, dtypes.float32), (dtypes.int16, dtypes.uint32, dtypes.int64)]

@pytest.mark.parametrize("a,b,out", PROMOTIONS)
def test_promotion(a, b, out):
  assert least_upper_dtype(a, b) == out and least_upper_dtype(b, a) == out

def test_promotion_is_an_upper_bound_for_every_pair():
  for a in SCALARS:
    for b in SCALARS:
      c = least_upper_dtype(a, b)
      assert least_upper_dtype(a, c) == c and least_upper_dtype(b, c) == c

def test_default_dtypes_follow_switches():
  assert dtypes.default_float == dtypes.float32 and dtypes.default_int == dtypes.int32
  with Context(DEFAULT_FLOAT="half", DEFAULT_INT="int64"):
    assert dtypes.default_float == dtypes.float16 and dtypes.default_int == dtypes.int64
    assert dtypes.from_py(1.5) == dtypes.float16 and dtypes.from_py([1, 2]) == dtypes.int64
  assert dtypes.from_py([1, 2.0]) == dtypes.float32 and dtypes.from_py([True, False]) == dtypes.bool and dtypes.from_py([True, 1]) == dtypes.int32

def test_names_and_errors():
  assert to_dtype("float") == dtypes.float32 and to_dtype("long") == dtypes.int64 and to_dtype("bfloat16") == dtypes.bfloat16
  with pytest.raises(ValueError, match="floaty"): to_dtype("floaty")

@pytest.mark.parametrize("dt,np_dt", [(dtypes.uint8, np.uint8), (dtypes.int8, np.int8), (dtypes.int16, np.int16), (dtypes.int32, np.int32),
                                      (dtypes.uint32, np.uint32), (dtypes.float16, np.float16), (dtypes.float32, np.float32)])
def test_truncate_matches_numpy(dt, np_dt):
  for v in [0, 1, -1, 300, -129, 70000, 2**31 + 5, 1.5, -2.75, 1 / 3, 65504.0, 1e10]:
    if dtypes.is_int(dt):
      if isinstance(v, float): continue
      assert truncate(v, dt) == int(np.array(v).astype(np.int64).astype(np_dt))
    else:
      with np.errstate(over="ignore"): assert truncate(v, dt) == float(np.array(v, dtype=np.float64).astype(np_dt))

def test_bfloat16_rounding():
  assert bf16_to_float(float_to_bf16(1.0)) == 1.0
  assert bf16_to_float(float_to_bf16(1 + 2**-8)) == 1.0  # tie rounds to even
  assert bf16_to_float(float_to_bf16(1 + 3 * 2**-8)) == 1 + 2**-6
  assert math.isnan(bf16_to_float(float_to_bf16(math.nan))) and bf16_to_float(float_to_bf16(math.inf)) == math.inf

def test_vector_and_pointer_types():
  assert dtypes.float.vec(4).itemsize == 16 and dtypes.float.vec(4).scalar == dtypes.float
  assert dtypes.int.ptr().base == dtypes.int

@pytest.mark.parametrize("dt", SCALARS, ids=str)
def test_min_max_of_every_dtype(dt):
  """Both spellings, tinygrad's: dtypes.min(dt) and dt.min; floats (fp8 too) run from -inf to inf, not finfo's range."""
  if dt == dtypes.bool: lo, hi = False, True
  elif dtypes.is_float(dt): lo, hi = -math.inf, math.inf
  else: lo, hi = int(np.iinfo(np.dtype(dt.fmt)).min), int(np.iinfo(np.dtype(dt.fmt)).max)
  assert dtypes.min(dt) == dt.min == lo and dtypes.max(dt) == dt.max == hi
  assert type(dt.min) is type(lo) and type(dt.max) is type(hi)
  assert dt.vec(4).min == lo and dt.vec(4).max == hi  # a vector's lanes have its scalar's range
