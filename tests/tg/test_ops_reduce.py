"""Reductions, statistics, softmax, cumulative ops and sorting of tg.Tensor (forward against numpy in float64,
gradients against finite differences), reduction dtypes and axis errors; plus the creation and random ops."""
import math
import numpy as np
import pytest
from tg import Tensor, dtypes
from tests.tg.opcheck import check_op, ieee_math, needs, skip_refused

ARGMAX_INT64 = needs(dtypes.int64, why="argmax counts down an arange the frontend computes in int64")

AXES_3D = [None, 0, 1, -1, (0, 2), (-1, -3), (1, 2), (0, 1, 2)]

def np_axis(axis): return axis if not isinstance(axis, list) else tuple(axis)

def away_from_zero(shape, lo=0.5, hi=1.5, seed=0):
  rng = np.random.default_rng(seed)
  return rng.uniform(lo, hi, size=shape) * rng.choice([-1.0, 1.0], size=shape)

# ---------------- sum / prod / max / min / mean ----------------
REDUCE = {
  "sum": (lambda t, ax, kd: t.sum(ax, keepdim=kd), lambda a, ax, kd: np.sum(a, axis=ax, keepdims=kd)),
  "prod": (lambda t, ax, kd: t.prod(ax, keepdim=kd), lambda a, ax, kd: np.prod(a, axis=ax, keepdims=kd)),
  "max": (lambda t, ax, kd: t.max(ax, keepdim=kd), lambda a, ax, kd: np.max(a, axis=ax, keepdims=kd)),
  "min": (lambda t, ax, kd: t.min(ax, keepdim=kd), lambda a, ax, kd: np.min(a, axis=ax, keepdims=kd)),
  "mean": (lambda t, ax, kd: t.mean(ax, keepdim=kd), lambda a, ax, kd: np.mean(a, axis=ax, keepdims=kd)),
}

@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", AXES_3D, ids=str)
@pytest.mark.parametrize("name", list(REDUCE))
def test_reduce_3d(name, axis, keepdim):
  tg_fn, np_fn = REDUCE[name]
  x = away_from_zero((2, 3, 4), seed=1)
  check_op(lambda t: tg_fn(t, axis, keepdim), lambda a: np_fn(a, axis, keepdim), inputs=[x])

@pytest.mark.parametrize("shape,axis", [((), None), ((7,), None), ((7,), 0), ((7,), -1), ((3, 5), 0), ((3, 5), 1), ((1, 4), 0), ((4, 1), (0, 1))], ids=str)
@pytest.mark.parametrize("name", list(REDUCE))
def test_reduce_small_shapes(name, shape, axis):
  tg_fn, np_fn = REDUCE[name]
  x = away_from_zero(shape, seed=2)
  for kd in (False, True):
    check_op(lambda t: tg_fn(t, axis, kd), lambda a: np_fn(a, axis, kd), inputs=[x])

def test_reduce_list_axis():
  x = away_from_zero((2, 3, 4), seed=3)
  check_op(lambda t: t.sum([0, 2]), lambda a: a.sum((0, 2)), inputs=[x])

def test_prod_with_zeros_gradient():
  x = np.array([[2.0, 0.0, 3.0], [1.5, -2.0, 0.5], [0.0, 0.0, 4.0]])
  check_op(lambda t: t.prod(1), lambda a: a.prod(1), inputs=[x])

def test_max_of_chained_ops_gradient():
  x = away_from_zero((3, 4), seed=4)
  check_op(lambda t: (t * 2 + 1).max(0) * t.min(1).sum(), lambda a: (a * 2 + 1).max(0) * a.min(1).sum(), inputs=[x])

@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.int64, np.float16, np.bool_])
@pytest.mark.parametrize("name", ["sum", "max", "min", "prod"])
def test_reduce_dtypes_forward(name, dtype):
  skip_refused(dtype)
  rng = np.random.default_rng(5)
  if dtype == np.bool_: x = rng.random((3, 4)) > 0.5
  elif dtype == np.float16: x = rng.uniform(-2, 2, (3, 4)).astype(dtype)
  elif dtype == np.uint8: x = rng.integers(0, 250, (3, 4)).astype(dtype)
  else: x = rng.integers(-10, 10, (3, 4)).astype(dtype)
  for axis in (None, 0, 1):
    out = getattr(Tensor(x), name)(axis)
    if dtype == np.float16:
      np.testing.assert_allclose(out.numpy().astype(np.float64), getattr(np, name)(x.astype(np.float64), axis=axis), rtol=2e-3, atol=2e-3)
    elif name in ("sum", "prod"):
      np.testing.assert_array_equal(out.numpy(), getattr(np, name)(x.astype(np.int64), axis=axis).astype(out.numpy().dtype))
    else:
      np.testing.assert_array_equal(out.numpy(), getattr(np, name)(x, axis=axis))
      assert out.dtype == Tensor(x).dtype

@pytest.mark.parametrize("src,expected", [(dtypes.int8, dtypes.int32), (dtypes.int16, dtypes.int32), (dtypes.bool, dtypes.int32),
                                          (dtypes.uint8, dtypes.uint32), (dtypes.uint16, dtypes.uint32), (dtypes.int32, dtypes.int32),
                                          (dtypes.int64, dtypes.int64), (dtypes.uint32, dtypes.uint32), (dtypes.float16, dtypes.float16),
                                          (dtypes.float32, dtypes.float32), (dtypes.float64, dtypes.float64)])
def test_sum_dtype(src, expected):
  skip_refused(src)
  t = Tensor([[1, 0, 1], [1, 1, 0]], dtype=src)
  assert t.sum().dtype == expected
  assert t.sum(0).dtype == expected
  assert t.sum().item() == 4

@needs(dtypes.int64, why="it sums into int64")
def test_sum_explicit_dtype():
  t = Tensor([100, 100, 100], dtype=dtypes.int8)
  assert t.sum(dtype=dtypes.int64).dtype == dtypes.int64
  assert t.sum(dtype=dtypes.int64).item() == 300
  assert t.sum().item() == 300

def test_sum_small_int_no_overflow():
  x = np.full(300, 200, dtype=np.uint8)
  assert Tensor(x).sum().item() == 60000
  x = np.full(300, -100, dtype=np.int8)
  assert Tensor(x).sum().item() == -30000
  assert Tensor(np.ones(1000, dtype=bool)).sum().item() == 1000

def test_sum_float16_accumulates_precisely():
  x = np.full(4096, 1.0, dtype=np.float16)  # float16 stops counting at 2048 if it accumulated in float16
  out = Tensor(x).sum()
  assert out.dtype == dtypes.float16
  assert out.item() == 4096.0

@pytest.mark.parametrize("dtype", [dtypes.int32, dtypes.int8, dtypes.uint8, dtypes.bool])
def test_mean_of_ints_is_float(dtype):
  x = np.array([[1, 2, 0], [4, 1, 1]])
  if dtype == dtypes.bool: x = x > 0
  t = Tensor(x, dtype=dtype)
  out = t.mean()
  assert out.dtype == dtypes.float32
  np.testing.assert_allclose(out.numpy(), x.mean(), rtol=1e-6)
  np.testing.assert_allclose(t.mean(1).numpy(), x.mean(1), rtol=1e-6)
  assert t.var().dtype == dtypes.float32

def test_mean_float16_keeps_dtype():
  x = np.array([1.0, 2.0, 4.0], dtype=np.float16)
  out = Tensor(x).mean()
  assert out.dtype == dtypes.float16
  np.testing.assert_allclose(out.item(), 7 / 3, rtol=1e-3)

# ---------------- var / std ----------------
@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), (1,)], ids=str)
def test_var_std(axis, keepdim, correction):
  x = np.random.default_rng(6).uniform(-2, 2, (2, 3, 4))
  kw = dict(axis=axis, keepdims=keepdim, ddof=correction)
  check_op(lambda t: t.var(axis, keepdim=keepdim, correction=correction), lambda a: np.var(a, **kw), inputs=[x])
  check_op(lambda t: t.std(axis, keepdim=keepdim, correction=correction), lambda a: np.std(a, **kw), inputs=[x])
  check_op(lambda t: t.var_mean(axis, keepdim=keepdim, correction=correction)[0], lambda a: np.var(a, **kw), inputs=[x])
  check_op(lambda t: t.var_mean(axis, keepdim=keepdim, correction=correction)[1], lambda a: np.mean(a, axis=axis, keepdims=keepdim), inputs=[x])
  check_op(lambda t: t.std_mean(axis, keepdim=keepdim, correction=correction)[0], lambda a: np.std(a, **kw), inputs=[x])
  check_op(lambda t: t.std_mean(axis, keepdim=keepdim, correction=correction)[1], lambda a: np.mean(a, axis=axis, keepdims=keepdim), inputs=[x])

@needs(dtypes.float64, why="numpy's float64 input")
def test_var_std_default_correction_is_one():
  x = np.array([1.0, 2.0, 4.0, 7.0])
  np.testing.assert_allclose(Tensor(x).var().item(), np.var(x, ddof=1), rtol=1e-6)
  np.testing.assert_allclose(Tensor(x).std().item(), np.std(x, ddof=1), rtol=1e-6)

def test_var_std_mean_combined_gradient():
  x = np.random.default_rng(7).uniform(-2, 2, (3, 5))
  def tg_fn(t):
    v, m = t.var_mean(1)
    s, m2 = t.std_mean(0, correction=0)
    return v * m + (s * m2).sum()
  def np_fn(a): return np.var(a, 1, ddof=1) * np.mean(a, 1) + (np.std(a, 0) * np.mean(a, 0)).sum()
  check_op(tg_fn, np_fn, inputs=[x])

@ieee_math
def test_var_of_constant_and_single_element():
  assert Tensor([3.0, 3.0, 3.0]).var().item() == 0.0
  assert Tensor([3.0]).var(correction=0).item() == 0.0
  out = Tensor([3.0]).var().item()  # n - correction == 0
  assert math.isnan(out) or math.isinf(out)

# ---------------- argmax / argmin / any / all ----------------
@ARGMAX_INT64
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, 2], ids=str)
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_first_tie(name, axis, keepdim):
  x = np.random.default_rng(8).integers(0, 3, (3, 4, 5)).astype(np.float32)  # many ties
  out = getattr(Tensor(x), name)(axis, keepdim=keepdim)
  ref = getattr(np, name)(x, axis=axis, keepdims=keepdim)  # numpy also returns the first index of a tie
  assert out.dtype == dtypes.int32
  assert out.shape == ref.shape
  np.testing.assert_array_equal(out.numpy(), ref)

@ARGMAX_INT64
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8, np.float16, np.bool_])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_dtypes(name, dtype):
  rng = np.random.default_rng(9)
  x = rng.random((4, 6)) > 0.5 if dtype == np.bool_ else rng.integers(0, 100, (4, 6)).astype(dtype)
  x[0, :] = x[0, 0]  # an all-equal row: index 0
  if dtype == np.uint8: x[1, 2], x[1, 4] = 255, 0
  if dtype == np.int8: x[1, 2], x[1, 4] = 127, -128
  for axis in (None, 0, 1):
    np.testing.assert_array_equal(getattr(Tensor(x), name)(axis).numpy(), getattr(np, name)(x, axis=axis))

@ARGMAX_INT64
def test_argmax_simple_values():
  assert Tensor([1.0, 5.0, 5.0, 2.0]).argmax().item() == 1
  assert Tensor([1.0, -5.0, -5.0, 2.0]).argmin().item() == 1
  assert Tensor([[1, 9], [9, 1]]).argmax(1).tolist() == [1, 0]
  assert Tensor(3.0).argmax().item() == 0

@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.float32])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)], ids=str)
def test_any_all(axis, keepdim, dtype):
  rng = np.random.default_rng(10)
  x = (rng.random((3, 4, 2)) > 0.3)
  x[0] = True
  x[1, :, 0] = False
  x = x.astype(dtype) * (np.array(2, dtype=dtype) if dtype != np.bool_ else True)
  for name in ("any", "all"):
    out = getattr(Tensor(x), name)(axis, keepdim=keepdim)
    assert out.dtype == dtypes.bool
    np.testing.assert_array_equal(out.numpy(), getattr(np, name)(x, axis=axis, keepdims=keepdim))

def test_any_all_float_nonzero():
  t = Tensor([[0.0, -0.5], [0.0, 0.0]])
  assert t.any().item() is True and t.all().item() is False
  assert t.any(1).tolist() == [True, False]
  assert Tensor([0.1, -3.0]).all().item() is True

# ---------------- logsumexp / softmax ----------------
def np_lse(a, axis, keepdims=False):
  m = np.max(a, axis=axis, keepdims=True)
  out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
  return out if keepdims else np.squeeze(out, axis=axis) if axis is not None else out.reshape(())

@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)], ids=str)
def test_logsumexp(axis, keepdim):
  check_op(lambda t: t.logsumexp(axis, keepdim=keepdim), lambda a: np_lse(a, axis, keepdim), shapes=[(2, 3, 4)], low=-3, high=3)

def test_logsumexp_large_and_infinite():
  x = np.array([[1000.0, 1000.0], [-1000.0, -999.0], [-np.inf, -np.inf], [-np.inf, 0.0]], dtype=np.float32)
  out = Tensor(x).logsumexp(1).numpy()
  with np.errstate(invalid="ignore"):
    np.testing.assert_allclose(out, [1000 + math.log(2), -999 + math.log1p(math.exp(-1)), -np.inf, 0.0], rtol=1e-6)

def np_softmax(a, axis):
  e = np.exp(a - a.max(axis=axis, keepdims=True))
  return e / e.sum(axis=axis, keepdims=True)

SOFTMAXES = {
  "softmax": (lambda t, ax: t.softmax(ax), np_softmax),
  "log_softmax": (lambda t, ax: t.log_softmax(ax), lambda a, ax: np.log(np_softmax(a, ax))),
  "softmin": (lambda t, ax: t.softmin(ax), lambda a, ax: np_softmax(-a, ax)),
}

@pytest.mark.parametrize("shape,axis", [((5,), 0), ((5,), -1), ((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), 2), ((2, 3, 4), -1), ((3, 1), 1)], ids=str)
@pytest.mark.parametrize("name", list(SOFTMAXES))
def test_softmax_family(name, shape, axis):
  tg_fn, np_fn = SOFTMAXES[name]
  check_op(lambda t: tg_fn(t, axis), lambda a: np_fn(a, axis), shapes=[shape], low=-3, high=3)

def test_softmax_default_axis_and_large_inputs():
  x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -1000.0]], dtype=np.float32)
  np.testing.assert_allclose(Tensor(x).softmax().numpy(), np_softmax(x.astype(np.float64), -1), rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(Tensor(x).log_softmax().numpy(), np.log(np_softmax(x.astype(np.float64), -1)), rtol=1e-5, atol=1e-5)

def test_softmax_of_ints_is_float():
  out = Tensor([1, 2, 3]).softmax()
  assert out.dtype == dtypes.float32
  np.testing.assert_allclose(out.numpy(), np_softmax(np.array([1.0, 2.0, 3.0]), -1), rtol=1e-6)
  assert Tensor([1.0, 2.0]).softmax(dtype=dtypes.float64).dtype == dtypes.float64

# ---------------- cumulative ----------------
@pytest.mark.parametrize("shape,axis", [((6,), 0), ((3, 4), 0), ((3, 4), 1), ((3, 4), -1), ((2, 3, 4), 1), ((2, 3, 4), -3), ((1,), 0)], ids=str)
def test_cumsum(shape, axis):
  check_op(lambda t: t.cumsum(axis), lambda a: np.cumsum(a, axis), shapes=[shape])

def test_cumsum_default_axis_and_scalar():
  check_op(lambda t: t.cumsum(), lambda a: np.cumsum(a, 0), shapes=[(3, 2)])
  assert Tensor(2.5).cumsum().item() == 2.5

@pytest.mark.parametrize("n", [257, 1000])
def test_cumsum_long_axis_blocked(n):
  x = np.random.default_rng(11).uniform(-1, 1, (2, n))
  check_op(lambda t: t.cumsum(1), lambda a: np.cumsum(a, 1), inputs=[x], rtol=1e-4, atol=1e-4)

def test_cumsum_long_axis_not_last():
  x = np.random.default_rng(12).integers(-5, 5, (600, 2)).astype(np.int32)
  np.testing.assert_array_equal(Tensor(x).cumsum(0).numpy(), np.cumsum(x, 0))

@pytest.mark.parametrize("dtype,expected", [(np.int8, dtypes.int32), (np.bool_, dtypes.int32), (np.uint8, dtypes.uint32), (np.int32, dtypes.int32)])
def test_cumsum_int_dtypes(dtype, expected):
  x = (np.arange(300) % 7 > 2) if dtype == np.bool_ else (np.arange(300) % 100).astype(dtype)
  out = Tensor(x).cumsum()
  assert out.dtype == expected
  np.testing.assert_array_equal(out.numpy(), np.cumsum(x.astype(np.int64)))

@pytest.mark.parametrize("shape,axis", [((6,), 0), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), -1), ((2, 3, 4), 0)], ids=str)
def test_cumprod(shape, axis):
  check_op(lambda t: t.cumprod(axis), lambda a: np.cumprod(a, axis), inputs=[away_from_zero(shape, seed=13)])

def test_cumprod_long_axis_and_ints():
  x = np.random.default_rng(14).uniform(0.98, 1.02, (300,))
  check_op(lambda t: t.cumprod(0), lambda a: np.cumprod(a), inputs=[x], rtol=1e-4, atol=1e-5, grad=False)
  xi = np.array([[1, 2, -1, 3], [2, 2, 2, 0]], dtype=np.int32)
  np.testing.assert_array_equal(Tensor(xi).cumprod(1).numpy(), np.cumprod(xi, 1))

def hand_cum_extreme(x: np.ndarray, axis: int, largest: bool):
  """Running max (or min) along axis and the last index at which the running value was reached."""
  xm = np.moveaxis(x, axis, -1)
  vals, idx = np.empty_like(xm), np.empty(xm.shape, dtype=np.int64)
  for pos in np.ndindex(xm.shape[:-1]):
    best, best_i = None, 0
    for i, v in enumerate(xm[pos]):
      if best is None or (v >= best if largest else v <= best): best, best_i = v, i
      vals[pos + (i,)], idx[pos + (i,)] = best, best_i
  return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)

@pytest.mark.parametrize("shape,axis,dtype", [((8,), 0, np.float32), ((3, 6), 1, np.float32), ((3, 6), 0, np.float32), ((2, 3, 5), -1, np.float32),
                                              ((2, 3, 5), 1, np.float32), ((3, 6), 1, np.int32), ((2, 3, 5), 0, np.int32), ((8,), 0, np.uint8),
                                              ((3, 6), 0, np.uint8)], ids=str)
@pytest.mark.parametrize("largest", [True, False], ids=["cummax", "cummin"])
def test_cummax_cummin_values_indices(largest, shape, axis, dtype):
  x = np.random.default_rng(15).integers(0, 4, shape).astype(dtype)  # lots of ties
  values, indices = (Tensor(x).cummax(axis) if largest else Tensor(x).cummin(axis))
  ref_v, ref_i = hand_cum_extreme(x, axis, largest)
  assert values.dtype == Tensor(x).dtype
  np.testing.assert_array_equal(values.numpy(), ref_v)
  np.testing.assert_array_equal(indices.numpy(), ref_i)

def test_cummax_hand_example():
  values, indices = Tensor([1.0, 3.0, 2.0, 3.0, 5.0, 0.0]).cummax(0)
  assert values.tolist() == [1.0, 3.0, 3.0, 3.0, 5.0, 5.0]
  assert indices.tolist() == [0, 1, 1, 3, 4, 4]
  values, indices = Tensor([4, 2, 3, 2, 1, 7]).cummin(0)
  assert values.tolist() == [4, 2, 2, 2, 1, 1]
  assert indices.tolist() == [0, 1, 1, 3, 4, 4]

@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), -1)], ids=str)
def test_cummax_cummin_gradient(shape, axis):
  x = np.random.default_rng(16).uniform(-2, 2, shape)
  check_op(lambda t: t.cummax(axis)[0], lambda a: np.maximum.accumulate(a, axis), inputs=[x])
  check_op(lambda t: t.cummin(axis)[0], lambda a: np.minimum.accumulate(a, axis), inputs=[x])

def test_cummax_long_axis():
  x = np.random.default_rng(17).uniform(-1, 1, (2, 700)).astype(np.float32)
  values, indices = Tensor(x).cummax(1)
  ref_v, ref_i = hand_cum_extreme(x, 1, True)
  np.testing.assert_array_equal(values.numpy(), ref_v)
  np.testing.assert_array_equal(indices.numpy(), ref_i)

@pytest.mark.parametrize("shape,axis", [((6,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1)], ids=str)
def test_logcumsumexp(shape, axis):
  check_op(lambda t: t.logcumsumexp(axis), lambda a: np.log(np.cumsum(np.exp(a), axis)), shapes=[shape], low=-3, high=3)

def test_logcumsumexp_large_values():
  x = np.array([500.0, 501.0, 499.0], dtype=np.float32)
  ref = np.log(np.cumsum(np.exp(x.astype(np.float64) - 501))) + 501
  np.testing.assert_allclose(Tensor(x).logcumsumexp(0).numpy(), ref, rtol=1e-6)

# ---------------- sort / argsort / topk ----------------
def distinct(shape, seed=0):
  n = int(np.prod(shape))
  return (np.random.default_rng(seed).permutation(n) * 0.37 - n * 0.1).reshape(shape)

SORT_CASES = [((5,), 0), ((8,), -1), ((3, 7), 1), ((3, 7), 0), ((2, 5, 3), 1), ((2, 5, 3), 0), ((2, 5, 3), -1), ((1,), 0), ((4, 1), 1),
              ((16,), 0), ((2, 11), 1)]

def np_sort_values(a, dim, descending):
  return np.take_along_axis(a, np.argsort(-a if descending else a, axis=dim, kind="stable"), dim)

@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("shape,dim", SORT_CASES, ids=str)
def test_sort(shape, dim, descending):
  x = distinct(shape, seed=18)
  order = np.argsort(-x if descending else x, axis=dim, kind="stable")
  values, indices = Tensor(x.astype(np.float32)).sort(dim, descending=descending)
  assert indices.dtype == dtypes.int32
  np.testing.assert_allclose(values.numpy(), np_sort_values(x, dim, descending), rtol=1e-6)
  np.testing.assert_array_equal(indices.numpy(), order)
  np.testing.assert_array_equal(Tensor(x.astype(np.float32)).argsort(dim, descending=descending).numpy(), order)

# the backward of the sorting network gets expensive fast with the axis length, so gradients use short axes
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("shape,dim", [((4,), 0), ((3, 4), 1), ((4, 3), 0), ((2, 3, 2), 1), ((2, 2, 3), -1), ((1,), 0)], ids=str)
def test_sort_gradient(shape, dim, descending):
  check_op(lambda t: t.sort(dim, descending=descending)[0], lambda a: np_sort_values(a, dim, descending), inputs=[distinct(shape, seed=21)])

@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8, np.float16])
def test_sort_dtypes(dtype):
  x = np.random.default_rng(19).permutation(100)[:12].astype(dtype).reshape(3, 4)
  for desc in (False, True):
    values, indices = Tensor(x).sort(-1, descending=desc)
    order = np.argsort(-x.astype(np.int64) if desc else x, axis=-1, kind="stable")
    assert values.dtype == Tensor(x).dtype
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, order, -1))
    np.testing.assert_array_equal(indices.numpy(), order)

@ieee_math
def test_sort_orders_nans_last_and_signed_zeros_as_equal():
  """PyTorch's order: NaN above +inf (first when descending), -0 equal to 0 (the first index first)."""
  x = np.array([3, np.nan, -0.0, 0.0, -np.inf, 1, np.nan, -1], np.float32)
  for descending, want in ((False, [4, 7, 2, 3, 5, 0, 1, 6]), (True, [1, 6, 0, 5, 2, 3, 7, 4])):
    values, indices = Tensor(x).sort(descending=descending)
    np.testing.assert_array_equal(indices.numpy(), want)
    np.testing.assert_array_equal(np.signbit(values.numpy()), np.signbit(x[want]))  # values are x's, -0 kept
    np.testing.assert_array_equal(values.numpy(), x[want])

@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.float16, np.float32, np.float64])
def test_sort_extremes_of_each_dtype(dtype):
  """Each dtype's least and greatest values (keys packed with their index for 32 bits and less, pairs above)."""
  skip_refused(dtype)
  info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else np.finfo(dtype)
  x = np.array([info.max, info.min, 0, 1, info.min, 5, info.max, 2], dtype=dtype)
  for descending in (False, True):
    order = np.argsort(-x.astype(np.float64) if descending else x, kind="stable")
    values, indices = Tensor(x).sort(descending=descending)
    np.testing.assert_array_equal(indices.numpy(), order)
    np.testing.assert_array_equal(values.numpy(), x[order])

@needs(dtypes.uint64, dtypes.int64, why="32-bit keys are packed with their index in uint64; the pairs' case sorts int64")
def test_a_sort_of_32_bit_keys_is_a_kernel_a_step():
  """Keys of 32 bits or less travel packed with their index: after blocks of 32 are sorted by rank, each of the 40
  steps of 1024 elements is one kernel, where 64-bit keys and their indices take two (but in the last step, whose
  keys nothing reads)."""
  steps = sum(range(6, 11))
  kernels = lambda dt: len(Tensor.empty(1024, dtype=dt).sort()[1].schedule())
  assert kernels(dtypes.float32) == kernels(dtypes.int8) < steps + 6
  assert kernels(dtypes.int64) - kernels(dtypes.float32) >= steps - 1

def test_sort_blocks_by_rank_with_padding():
  """Rows padded to the next power of two put alike padding items in the rank sort's blocks: they must take
  distinct ranks (a row of 5 in a block of 8, rows of 40 over two blocks of 32)."""
  for n in (5, 40):
    x = np.random.default_rng(n).integers(0, 4, (3, n)).astype(np.float32)
    np.testing.assert_array_equal(Tensor(x).argsort(-1).numpy(), np.argsort(x, -1, kind="stable"))

def test_sort_ties_are_stable():
  x = np.array([[2.0, 1.0, 2.0, 1.0, 0.0, 2.0], [5.0, 5.0, 5.0, 5.0, 5.0, 5.0]], dtype=np.float32)
  np.testing.assert_array_equal(Tensor(x).argsort(-1).numpy(), np.argsort(x, -1, kind="stable"))
  np.testing.assert_array_equal(Tensor(x).argsort(-1, descending=True).numpy(), np.argsort(-x, -1, kind="stable"))

@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("shape,dim,k", [((8,), 0, 3), ((3, 7), 1, 2), ((3, 7), 0, 3), ((2, 5, 3), 1, 4), ((6,), -1, 6), ((4, 3), -1, 0)], ids=str)
def test_topk(shape, dim, k, largest):
  x = distinct(shape, seed=20)
  order = np.take(np.argsort(-x if largest else x, axis=dim, kind="stable"), np.arange(k), axis=dim)
  values, indices = Tensor(x.astype(np.float32)).topk(k, dim, largest=largest)
  np.testing.assert_allclose(values.numpy(), np.take_along_axis(x, order, dim), rtol=1e-6)
  np.testing.assert_array_equal(indices.numpy(), order)

@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("shape,dim,k", [((4,), 0, 2), ((3, 4), 1, 3), ((4, 2), 0, 1)], ids=str)
def test_topk_gradient(shape, dim, k, largest):
  def np_fn(a): return np.take(np_sort_values(a, dim, largest), np.arange(k), axis=dim)
  check_op(lambda t: t.topk(k, dim, largest=largest)[0], np_fn, inputs=[distinct(shape, seed=23)])

@pytest.mark.parametrize("n,k,dtype", [(200, 16, np.float32), (130, 8, np.float32), (97, 5, np.int32), (300, 1, np.int32)], ids=str)
def test_topk_of_long_rows_merges_sorted_blocks(n, k, dtype):
  """Rows at least 4 blocks long take the block-merging path: the same values and indices as a stable sort, ties
  (values from 50 only) broken by the first index, blocks that don't fill the row and odd counts of blocks (13, 17,
  13 and 300 blocks merged down) included."""
  x = np.random.default_rng(n).integers(0, 50, (3, n)).astype(dtype)
  for largest in (True, False):
    order = np.argsort(-x.astype(np.int64) if largest else x, axis=-1, kind="stable")[:, :k]
    values, indices = Tensor(x).topk(k, -1, largest=largest)
    np.testing.assert_array_equal(indices.numpy(), order)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, order, -1))
  assert values.dtype == Tensor(x).dtype

@pytest.mark.parametrize("n,k", [(2001, 10), (3000, 1), (1500, 3)], ids=str)
def test_topk_of_very_long_rows_searches_the_groups_holding_it(n, k):
  """Rows of 32 * pow2(k) or more: the k groups of 8 whose best elements are best hold the top k (once, twice and
  three times over for 2001/10, 1500/3 and 3000/1), a last group cut short included; ties (values from 50 only) go
  to the first index, and NaN is the largest, as in a stable sort."""
  x = np.random.default_rng(n).integers(0, 50, (2, n)).astype(np.float32)
  x[1, n // 3] = np.nan
  for largest in (True, False):
    order = np.argsort(np.where(np.isnan(x), -np.inf if largest else np.inf, -x if largest else x), axis=-1, kind="stable")[:, :k]
    values, indices = Tensor(x).topk(k, -1, largest=largest)
    np.testing.assert_array_equal(indices.numpy(), order)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, order, -1))

def test_topk_of_long_rows_writes_a_fraction_of_what_a_sort_writes():
  """k = 10 of 256: blocks of 16 sorted and merged (5 steps over half the data at each halving) instead of a whole
  sort: a quarter of the elements written. Of 1024: the best of each group of 8 (one pass that writes an eighth),
  their top 10 by blocks, and 80 elements of the 10 groups they name: 3%."""
  written = lambda t: sum(i.bufs[0].size for i in t.schedule() if i.ast.op.name == "SINK")
  x = Tensor.empty(64, 256)
  assert written(x.topk(10)[0]) <= 0.3 * written(x.sort(-1, descending=True)[0])
  x = Tensor.empty(64, 1024)
  assert written(x.topk(10)[0]) <= 0.05 * written(x.sort(-1, descending=True)[0])

def test_topk_gradient_of_long_rows():
  def np_fn(a): return np.take(np_sort_values(a, 1, True), np.arange(2), axis=1)
  check_op(lambda t: t.topk(2, 1)[0], np_fn, inputs=[distinct((2, 12), seed=24)])

def test_topk_k_out_of_range():
  with pytest.raises(RuntimeError): Tensor([1.0, 2.0]).topk(3)  # PyTorch's type

# ---------------- axis errors ----------------
@pytest.mark.parametrize("fn", [lambda t: t.sum(3), lambda t: t.sum(-4), lambda t: t.max((0, 3)), lambda t: t.mean(5), lambda t: t.argmax(3),
                                lambda t: t.softmax(3), lambda t: t.cumsum(3), lambda t: t.var(-4), lambda t: t.sort(3), lambda t: t.prod(3)],
                         ids=["sum", "sum_neg", "max_tuple", "mean", "argmax", "softmax", "cumsum", "var", "sort", "prod"])
def test_axis_out_of_range_raises_index_error(fn):
  with pytest.raises(IndexError) as e: fn(Tensor.ones(2, 3, 4))
  msg = str(e.value)
  assert "dimension" in msg and any(d in msg for d in ("3", "-4", "5"))

@pytest.mark.parametrize("axis", [(0, 0), (1, -2), (0, 2, -1)], ids=str)
def test_repeated_axis_raises(axis):
  with pytest.raises(RuntimeError): Tensor.ones(2, 3, 4).sum(axis)  # PyTorch's type
  with pytest.raises(RuntimeError): Tensor.ones(2, 3, 4).max(axis)
  with pytest.raises(RuntimeError): Tensor.ones(2, 3, 4).mean(axis)

# ---------------- creation ----------------
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 0, 4)], ids=str)
def test_zeros_ones_full(shape):
  z, o, f = Tensor.zeros(*shape), Tensor.ones(*shape), Tensor.full(shape, 2.5)
  assert z.dtype == o.dtype == f.dtype == dtypes.float32
  np.testing.assert_array_equal(z.numpy(), np.zeros(shape, np.float32))
  np.testing.assert_array_equal(o.numpy(), np.ones(shape, np.float32))
  np.testing.assert_array_equal(f.numpy(), np.full(shape, 2.5, np.float32))
  np.testing.assert_array_equal(Tensor.zeros(shape).numpy(), np.zeros(shape, np.float32))  # shape as one tuple
  assert Tensor.full(shape, 7).dtype == dtypes.int32 and Tensor.full(shape, True).dtype == dtypes.bool

@pytest.mark.parametrize("dtype", [dtypes.int32, dtypes.uint8, dtypes.float16, dtypes.bool, dtypes.int64, dtypes.float64])
def test_creation_dtype_and_device(dtype):
  for t, value in [(Tensor.zeros(2, 3, dtype=dtype, device="CPU"), 0), (Tensor.ones(2, 3, dtype=dtype, device="CPU"), 1),
                   (Tensor.full((2, 3), 1, dtype=dtype, device="CPU"), 1)]:
    assert t.dtype == dtype and t.shape == (2, 3) and t.device.startswith("CPU")
    np.testing.assert_array_equal(t.numpy(), np.full((2, 3), value))
  e = Tensor.empty(4, 5, dtype=dtype, device="CPU")
  assert e.shape == (4, 5) and e.dtype == dtype and e.device.startswith("CPU")
  assert Tensor.eye(3, dtype=dtype, device="CPU").dtype == dtype
  assert Tensor.arange(4, dtype=dtype, device="CPU").dtype == dtype

def test_empty_shape_only():
  e = Tensor.empty(3, 2)
  assert e.shape == (3, 2) and e.dtype == dtypes.float32
  assert e.numpy().shape == (3, 2)
  assert Tensor.empty((0, 4)).shape == (0, 4)

@pytest.mark.parametrize("n,m", [(1, None), (3, None), (3, 5), (4, 2), (0, None), (2, 0)])
def test_eye(n, m):
  t = Tensor.eye(n, m)
  assert t.dtype == dtypes.float32
  np.testing.assert_array_equal(t.numpy(), np.eye(n, m, dtype=np.float32))

@pytest.mark.parametrize("args", [(5,), (0,), (2, 7), (2, 8, 2), (10, 0, -3), (5, -5, -1), (3, 3), (5, 2), (-4, 4, 3), (0.0, 1.0, 0.1),
                                  (1.5, -2.0, -0.5), (5.0,), (0, 5, 0.5), (-1.0, 1.0, 0.25)], ids=str)
def test_arange(args):
  if all(isinstance(a, int) for a in args) and len(args) > 1: skip_refused(dtypes.int64)  # the frontend steps integer aranges in int64
  t = Tensor.arange(*args)
  ref = np.arange(*args)
  assert t.shape == ref.shape
  assert t.dtype == (dtypes.float32 if ref.dtype.kind == "f" else dtypes.int32)
  np.testing.assert_allclose(t.numpy(), ref, rtol=1e-6, atol=1e-6)

@needs(dtypes.int64, why="the frontend steps integer aranges in int64")
def test_arange_errors_and_dtype():
  with pytest.raises(RuntimeError): Tensor.arange(0, 5, 0)
  np.testing.assert_array_equal(Tensor.arange(4, dtype=dtypes.float32).numpy(), np.arange(4, dtype=np.float32))
  np.testing.assert_array_equal(Tensor.arange(1, 10, 3, dtype=dtypes.int64).numpy(), np.arange(1, 10, 3))

@pytest.mark.parametrize("start,stop,steps", [(0, 1, 5), (-2.0, 3.0, 11), (5, -5, 4), (1, 1, 3), (3.0, 4.0, 1), (0, 1, 0), (0, 10, 101)])
def test_linspace(start, stop, steps):
  t = Tensor.linspace(start, stop, steps)
  assert t.dtype == dtypes.float32
  np.testing.assert_allclose(t.numpy(), np.linspace(start, stop, steps), rtol=1e-6, atol=1e-6)

def test_linspace_dtype():
  t = Tensor.linspace(0, 10, 6, dtype=dtypes.int32)
  assert t.dtype == dtypes.int32
  np.testing.assert_array_equal(t.numpy(), [0, 2, 4, 6, 8, 10])
  assert Tensor.linspace(0, 1, 3, dtype=dtypes.float64).dtype == dtypes.float64
  with pytest.raises(RuntimeError): Tensor.linspace(0, 1, -1)

@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.int32, dtypes.uint8, dtypes.float16, dtypes.bool])
def test_like_constructors(dtype):
  base = Tensor([[1, 2, 3], [4, 5, 6]], dtype=dtype)
  for t, value in [(base.zeros_like(), 0), (base.ones_like(), 1), (base.full_like(1), 1)]:
    assert t.shape == (2, 3) and t.dtype == dtype and t.device == base.device
    np.testing.assert_array_equal(t.numpy(), np.full((2, 3), value))
  t = base.full_like(3, dtype=dtypes.float16)
  assert t.dtype == dtypes.float16
  np.testing.assert_array_equal(t.numpy(), np.full((2, 3), 3))
  assert base.zeros_like(dtype=dtypes.int8).dtype == dtypes.int8
  assert base.ones_like(device="CPU").device.startswith("CPU")

def test_invalid_shape_raises():  # PyTorch's types
  with pytest.raises(RuntimeError, match="-1"): Tensor.zeros(-1, 2)
  with pytest.raises(TypeError): Tensor.ones(2.5)
  with pytest.raises(RuntimeError): Tensor.eye(-1)

# ---------------- random ----------------
def test_manual_seed_reproducible():
  Tensor.manual_seed(1234)
  a = Tensor.rand(64).numpy()
  Tensor.manual_seed(1234)
  b = Tensor.rand(64).numpy()
  Tensor.manual_seed(4321)
  c = Tensor.rand(64).numpy()
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c)

@needs(dtypes.float64, why="randint draws through float64")
def test_manual_seed_reproduces_sequence_of_calls():
  Tensor.manual_seed(7)
  first = [Tensor.rand(5).numpy(), Tensor.randn(3, 2).numpy(), Tensor.randint(6, low=0, high=100).numpy()]
  Tensor.manual_seed(7)
  second = [Tensor.rand(5).numpy(), Tensor.randn(3, 2).numpy(), Tensor.randint(6, low=0, high=100).numpy()]
  for x, y in zip(first, second): np.testing.assert_array_equal(x, y)

def test_consecutive_rand_calls_differ():
  Tensor.manual_seed(0)
  a, b = Tensor.rand(100).numpy(), Tensor.rand(100).numpy()
  assert not np.array_equal(a, b)
  assert len(np.unique(np.concatenate([a, b]))) > 190

def test_rand_range_and_mean():
  Tensor.manual_seed(42)
  t = Tensor.rand(100, 100)
  assert t.shape == (100, 100) and t.dtype == dtypes.float32
  x = t.numpy()
  assert x.min() >= 0.0 and x.max() < 1.0
  assert abs(x.mean() - 0.5) < 0.02
  assert abs(x.var() - 1 / 12) < 0.01
  assert len(np.unique(x)) > 9900
  hist = np.histogram(x, bins=10, range=(0, 1))[0]
  assert hist.min() > 850 and hist.max() < 1150

@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.float64])
def test_rand_dtypes(dtype):
  skip_refused(dtype)
  t = Tensor.rand(2000, dtype=dtype)
  assert t.dtype == dtype
  x = t.numpy()
  assert x.min() >= 0 and x.max() < 1 and abs(x.mean() - 0.5) < 0.05

def test_rand_int_dtype_is_runtime_error():
  with pytest.raises(RuntimeError): Tensor.rand(3, dtype=dtypes.int32)  # PyTorch's type

def test_randn_moments():
  Tensor.manual_seed(3)
  x = Tensor.randn(10000).numpy()
  assert np.isfinite(x).all()
  assert abs(x.mean()) < 0.05 and abs(x.std() - 1) < 0.05
  assert 0.63 < np.mean(np.abs(x) < 1) < 0.73  # ~68% within one sigma

@needs(dtypes.float64, why="randint draws through float64")
def test_randint_range():
  Tensor.manual_seed(5)
  t = Tensor.randint(5000, low=-3, high=4)
  assert t.dtype == dtypes.int32
  x = t.numpy()
  assert x.min() >= -3 and x.max() < 4
  assert set(np.unique(x).tolist()) == set(range(-3, 4))
  with pytest.raises(RuntimeError): Tensor.randint(3, low=2, high=2)
  assert Tensor.randint(10, low=0, high=3, dtype=dtypes.int64).dtype == dtypes.int64

def test_uniform_and_normal():
  Tensor.manual_seed(6)
  u = Tensor.uniform(10000, low=-2.0, high=3.0).numpy()
  assert u.min() >= -2.0 and u.max() < 3.0 and abs(u.mean() - 0.5) < 0.1
  n = Tensor.normal(10000, mean=3.0, std=0.5).numpy()
  assert abs(n.mean() - 3.0) < 0.05 and abs(n.std() - 0.5) < 0.03

def test_random_requires_grad_flag():
  t = Tensor.rand(3, requires_grad=True)
  assert t.requires_grad and t.is_leaf
  (t * 2).sum().backward()
  np.testing.assert_array_equal(t.grad.numpy(), [2.0, 2.0, 2.0])
  assert Tensor.randn(2, requires_grad=True).requires_grad

@pytest.mark.parametrize("shape", [(64, 32), (16, 8, 3, 3)], ids=str)
def test_kaiming_glorot_uniform_bounds(shape):
  fan_in, fan_out = int(np.prod(shape[1:])), shape[0]
  k = Tensor.kaiming_uniform(*shape).numpy()
  k_bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + 0.01 ** 2)) / math.sqrt(fan_in)
  assert k.shape == shape and np.abs(k).max() <= k_bound and np.abs(k).max() > 0.9 * k_bound
  assert abs(k.mean()) < 0.1 * k_bound
  g = Tensor.glorot_uniform(*shape).numpy()
  g_bound = math.sqrt(6 / (fan_out + fan_in))
  assert g.shape == shape and np.abs(g).max() <= g_bound and np.abs(g).max() > 0.9 * g_bound
  assert abs(g.mean()) < 0.1 * g_bound

@ieee_math
def test_max_and_maximum_propagate_nan_from_either_side():
  """A NaN anywhere in a row (first, inside a vector, last, in a row of 1000 the kernel splits into chains) makes its
  max and min NaN, and maximum/minimum NaN where either operand is, in either position, as PyTorch's."""
  rng = np.random.default_rng(3)
  a = rng.standard_normal((5, 1000)).astype(np.float32)
  for row, col in ((0, 0), (1, 7), (2, 999), (3, 500)): a[row, col] = np.nan
  np.testing.assert_array_equal(np.isnan(Tensor(a).max(1).numpy()), [True, True, True, True, False])
  np.testing.assert_array_equal(np.isnan(Tensor(a).min(1).numpy()), [True, True, True, True, False])
  np.testing.assert_array_equal(Tensor(a).max(1).numpy()[4], a[4].max())
  b = rng.standard_normal((5, 1000)).astype(np.float32)
  for x, y in ((a, b), (b, a)):
    np.testing.assert_array_equal(Tensor(x).maximum(Tensor(y)).numpy(), np.maximum(x, y))
    np.testing.assert_array_equal(Tensor(x).minimum(Tensor(y)).numpy(), np.minimum(x, y))

@ARGMAX_INT64
def test_argmax_argmin_point_at_the_first_nan():
  a = np.array([[1., np.nan, 3., np.nan], [4., 2., 0., 1.]], dtype=np.float32)
  for name in ("argmax", "argmin"):
    np.testing.assert_array_equal(getattr(Tensor(a), name)(1).numpy(), getattr(np, name)(a, axis=1))
    assert getattr(Tensor(a), name)().item() == getattr(np, name)(a)

# ---------------- empty axes (PyTorch's values and error types) ----------------
EMPTY_CASES = [((0,), None), ((0,), 0), ((0, 3), 0), ((0, 3), None), ((3, 0), 1), ((3, 0), -1), ((2, 0, 4), (0, 1)), ((2, 0, 4), 1)]

@ieee_math
@pytest.mark.parametrize("shape,axis", EMPTY_CASES, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions_over_an_empty_axis_give_the_identity(shape, axis, keepdim):
  x, xi = np.zeros(shape, np.float32), np.zeros(shape, np.int8)
  kw = dict(axis=axis, keepdims=keepdim)
  for out, ref in [(Tensor(x).sum(axis, keepdim), np.sum(x, **kw)), (Tensor(x).prod(axis, keepdim), np.prod(x, **kw)),
                   (Tensor(xi).sum(axis, keepdim), np.sum(xi, **kw)), (Tensor(xi).prod(axis, keepdim), np.prod(xi, **kw)),
                   (Tensor(x).any(axis, keepdim), np.any(x, **kw)), (Tensor(x).all(axis, keepdim), np.all(x, **kw)),
                   (Tensor(x > 0).any(axis, keepdim), np.any(x, **kw)), (Tensor(x > 0).all(axis, keepdim), np.all(x, **kw))]:
    assert out.shape == ref.shape
    np.testing.assert_array_equal(out.numpy(), ref)
  for stat in (Tensor(x).mean(axis, keepdim), Tensor(x).var(axis, keepdim), Tensor(x).std(axis, keepdim)):
    assert stat.shape == np.sum(x, **kw).shape and np.isnan(stat.numpy()).all()  # NaN, as PyTorch
  lse = Tensor(x).logsumexp(axis, keepdim)
  assert lse.shape == np.sum(x, **kw).shape and (lse.numpy() == -np.inf).all()  # log of an empty sum

@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin"])
def test_max_min_argmax_over_an_empty_axis_raise_as_pytorch(name):
  with pytest.raises(RuntimeError, match=r"\(0, 3\)"): getattr(Tensor.empty(0, 3), name)()  # no axis: RuntimeError
  with pytest.raises(IndexError, match=r"\(0, 3\)"): getattr(Tensor.empty(0, 3), name)(0)  # an empty axis: IndexError
  with pytest.raises(IndexError, match=r"\(4, 0\)"): getattr(Tensor.empty(4, 0, dtype=dtypes.int32), name)(-1)
  assert getattr(Tensor.empty(0, 3), name)(1).shape == (0,)  # another axis is empty: an empty result, no error
  if name in ("max", "min"):
    with pytest.raises(IndexError): getattr(Tensor.empty(2, 0, 3), name)((0, 1))

@pytest.mark.parametrize("shape,axis", [((0,), 0), ((0, 3), 0), ((3, 0), 1), ((3, 0), 0), ((2, 0, 4), 1)], ids=str)
def test_scans_over_an_empty_axis_are_empty(shape, axis):
  x = Tensor(np.zeros(shape, np.float32))
  for out in (x.cumsum(axis), x.cumprod(axis), x.logcumsumexp(axis), *x.cummax(axis), *x.cummin(axis), x.softmax(axis), x.log_softmax(axis), x.softmin(axis)):
    assert out.shape == shape and out.numpy().shape == shape
  assert Tensor(np.zeros(shape, np.int8)).cumsum(axis).dtype == dtypes.int32 and x.cummax(axis)[1].dtype == dtypes.int32

def test_empty_reduction_gradient():
  x = Tensor(np.zeros((0, 3), np.float32), requires_grad=True)
  (x.sum(0) * Tensor([1.0, 2.0, 3.0])).sum().backward()
  assert x.grad.shape == (0, 3) and x.grad.numpy().shape == (0, 3)

# ---------------- explicit accumulation dtypes ----------------
@needs(dtypes.int64, why="it reduces into int64")
def test_sum_prod_explicit_dtype():
  big = Tensor([100] * 5, dtype=dtypes.int8)
  assert big.prod(dtype=dtypes.int64).dtype == dtypes.int64 and big.prod(dtype=dtypes.int64).item() == 100 ** 5
  assert big.prod(dtype="int64").item() == 100 ** 5 and big.sum(dtype="int16").dtype == dtypes.int16
  h = Tensor(np.full(3000, 1.5, np.float16))
  assert h.sum(dtype=dtypes.float32).dtype == dtypes.float32 and h.sum(dtype=dtypes.float32).item() == 4500.0
  f = Tensor(np.array([[1e-8, 1.0], [3.0, 1e8]], np.float32))
  out = f.prod(1, dtype=dtypes.float64)
  assert out.dtype == dtypes.float64
  np.testing.assert_allclose(out.numpy(), np.prod(np.float32([[1e-8, 1.0], [3.0, 1e8]]).astype(np.float64), 1), rtol=1e-12)
  assert Tensor([True, True, False]).sum(dtype=dtypes.float32).item() == 2.0

# ---------------- creation dtypes follow DEFAULT_INT / DEFAULT_FLOAT (tinygrad) ----------------
@needs(dtypes.int64, dtypes.float64, why="it sets them as the default dtypes")
def test_arange_linspace_one_hot_dtypes_follow_the_defaults():
  from tg import Context
  for dint, dfloat in [("int32", "float32"), ("int64", "float64"), ("int16", "float16")]:
    with Context(DEFAULT_INT=dint, DEFAULT_FLOAT=dfloat):
      assert Tensor.arange(5).dtype == Tensor.arange(1, 9, 2).dtype == getattr(dtypes, dint)
      assert Tensor.arange(5.0).dtype == Tensor.arange(0, 1, 0.25).dtype == Tensor.arange(0, 3.0).dtype == getattr(dtypes, dfloat)
      assert Tensor.linspace(0, 10, 5).dtype == getattr(dtypes, dfloat)
      assert Tensor([0, 2, 1]).one_hot(3).dtype == getattr(dtypes, dint)  # tinygrad's (PyTorch's is int64)
      np.testing.assert_array_equal(Tensor([0, 2, 1]).one_hot(3).numpy(), np.eye(3, dtype=np.int64)[[0, 2, 1]])
  assert Tensor.arange(2**31, 2**31 + 2).dtype == dtypes.int64  # values the default int can't hold widen
  assert Tensor.arange(2**31).dtype == dtypes.int32  # the values decide, not the exclusive stop (tinygrad)

@needs(dtypes.int64, why="the frontend steps integer aranges in int64")
def test_arange_in_small_int_dtypes():
  np.testing.assert_array_equal(Tensor.arange(10, 0, -3, dtype=dtypes.uint8).numpy(), np.arange(10, 0, -3, dtype=np.uint8))
  np.testing.assert_array_equal(Tensor.arange(-100, 120, 37, dtype=dtypes.int8).numpy(), np.arange(-100, 120, 37, dtype=np.int8))
  with pytest.raises(OverflowError, match="299"): Tensor.arange(300, dtype=dtypes.uint8)  # tinygrad's error, not a wrap
  with pytest.raises(OverflowError): Tensor.arange(-1, 3, dtype=dtypes.uint16)

def test_arange_step_away_from_stop_is_empty():
  assert Tensor.arange(5, 0).shape == (0,) and Tensor.arange(0, 5, -1).shape == (0,)  # tinygrad (PyTorch raises)

# ---------------- normalize ----------------
def np_normalize(a, p, dim, eps=1e-12):
  norm = np.max(np.abs(a), axis=dim, keepdims=True) if p == np.inf else np.sum(np.abs(a) ** p, axis=dim, keepdims=True) ** (1 / p)
  return a / np.maximum(norm, eps)

@pytest.mark.parametrize("p,dim", [(2.0, 1), (2.0, 0), (1.0, -1), (3.0, 1), (1.5, 0), (np.inf, 1)], ids=str)
def test_normalize(p, dim):
  check_op(lambda t: t.normalize(p=p, dim=dim), lambda a: np_normalize(a, p, dim), inputs=[away_from_zero((3, 4), seed=20)])

def test_normalize_of_a_zero_vector_is_zero_with_a_finite_gradient():
  x = Tensor([[0.0, 0.0, 0.0], [3.0, 0.0, 4.0]], requires_grad=True)
  out = x.normalize(dim=1)
  np.testing.assert_allclose(out.numpy(), [[0, 0, 0], [0.6, 0, 0.8]], rtol=1e-6)
  (out * Tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])).sum().backward()
  # the zero row: x / eps, so w / eps (PyTorch's: the norm's subgradient at 0 is 0); the other row: w/n - x (w.x) / n^3
  np.testing.assert_allclose(x.grad.numpy()[0], np.array([1.0, 2.0, 3.0]) / 1e-12, rtol=1e-6)
  np.testing.assert_allclose(x.grad.numpy()[1], 1 / 5 - np.array([3.0, 0.0, 4.0]) * 7 / 125, rtol=1e-5, atol=1e-7)
  for p in (1.0, 3.0, np.inf):
    z = Tensor.zeros(2, 3, requires_grad=True)
    z.normalize(p=p).sum().backward()
    assert (z.normalize(p=p).numpy() == 0).all() and np.isfinite(z.grad.numpy()).all()

# ---------------- softmax family far out ----------------
EXTREME_ROWS = np.array([[-1e4, 0.0, 1e4, 3.0], [1e30, -1e30, 1e30, 0.0], [-1e30, -1e30, -1e30, -1e30], [1e4, 1e4 - 1, 1e4 - 2, -1e4]])

@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
def test_softmax_family_of_huge_inputs_exact_with_finite_gradients(name):
  w = np.random.default_rng(21).uniform(0.5, 1.5, EXTREME_ROWS.shape)
  x = Tensor(EXTREME_ROWS.astype(np.float32), requires_grad=True)
  out = getattr(x, name)(-1)
  (out * Tensor(w.astype(np.float32))).sum().backward()
  a = EXTREME_ROWS.astype(np.float32).astype(np.float64)
  s = np_softmax(-a if name == "softmin" else a, -1)
  m = a - a.max(-1, keepdims=True)
  if name == "log_softmax": ref, grad = m - np.log(np.exp(m).sum(-1, keepdims=True)), w - s * w.sum(-1, keepdims=True)
  else: ref, grad = s, (-1 if name == "softmin" else 1) * s * (w - (w * s).sum(-1, keepdims=True))
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6, atol=1e-6)
  assert np.isfinite(x.grad.numpy()).all()
  np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-5, atol=1e-6)
