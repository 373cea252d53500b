"""Elementwise ops of tg.Tensor: forward values against numpy (float64) and gradients against finite differences,
plus dtype promotion, integer semantics, bitwise ops, casts and bitcasts."""
import math
import numpy as np
import pytest
from tg import Device, Tensor, dtypes
from codegen.ptx import PTXRenderer
from codegen.scalar_args import lift_scalars
from tests.tg.opcheck import check_op, ieee_math, needs, skip_refused

UNARY_SHAPES = [(), (5,), (2, 3), (2, 3, 2)]
BINARY_SHAPES = [[(), ()], [(4,), (4,)], [(2, 3), (2, 3)], [(2, 3, 2), (3, 1)], [(3, 1), (1, 4)], [(), (2, 3)], [(2, 3), ()]]

def away_from_zero(shape, lo=0.5, hi=2.0, seed=0):
  """Random values with |x| in [lo, hi] and random signs."""
  rng = np.random.default_rng(seed)
  return rng.uniform(lo, hi, size=shape) * rng.choice([-1.0, 1.0], size=shape)

def np_erf(x): return np.vectorize(math.erf, otypes=[np.float64])(x)
def np_sigmoid(x): return 1 / (1 + np.exp(-x))
def np_softplus(x, beta=1.0): return np.log1p(np.exp(beta * x)) / beta

# ---------------- arithmetic ----------------
ARITH = {
  "add": (lambda a, b: a + b, lambda a, b: a + b),
  "sub": (lambda a, b: a - b, lambda a, b: a - b),
  "mul": (lambda a, b: a * b, lambda a, b: a * b),
  "div": (lambda a, b: a / b, lambda a, b: a / b),
  "add_method": (lambda a, b: a.add(b), lambda a, b: a + b),
  "sub_method": (lambda a, b: a.sub(b), lambda a, b: a - b),
  "mul_method": (lambda a, b: a.mul(b), lambda a, b: a * b),
  "div_method": (lambda a, b: a.div(b), lambda a, b: a / b),
  "maximum": (lambda a, b: a.maximum(b), np.maximum),
  "minimum": (lambda a, b: a.minimum(b), np.minimum),
}

@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", list(ARITH))
def test_binary_arith(name, shapes):
  tg_fn, np_fn = ARITH[name]
  inputs = [away_from_zero(s, seed=i) for i, s in enumerate(shapes)]
  check_op(tg_fn, np_fn, inputs=inputs)

@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_binary_arith_python_scalar(name):
  tg_fn, np_fn = ARITH[name]
  x = away_from_zero((2, 3))
  check_op(lambda a: tg_fn(a, 1.5), lambda a: np_fn(a, 1.5), inputs=[x])
  check_op(lambda a: tg_fn(1.5, a), lambda a: np_fn(1.5, a), inputs=[x])
  check_op(lambda a: tg_fn(a, 3), lambda a: np_fn(a, 3), inputs=[x])

def test_maximum_minimum_ties_split_gradient():
  a = np.array([1.0, 2.0, -3.0, 0.5])
  b = np.array([1.0, 1.0, -3.0, 0.7])
  check_op(lambda x, y: x.maximum(y), np.maximum, inputs=[a, b])
  check_op(lambda x, y: x.minimum(y), np.minimum, inputs=[a, b])

def test_maximum_minimum_scalar():
  x = away_from_zero((3, 4))
  check_op(lambda a: a.maximum(0.25), lambda a: np.maximum(a, 0.25), inputs=[x])
  check_op(lambda a: a.minimum(-0.25), lambda a: np.minimum(a, -0.25), inputs=[x])

@pytest.mark.parametrize("op,dtype", [(op, dt) for op in ["add", "mul", "maximum", "minimum", "sub"]
                                      for dt in ["float32", "float16", "int32", "uint8", "int8", "int64", "bool"] if (op, dt) != ("sub", "bool")])
def test_binary_dtypes_forward(op, dtype):
  skip_refused(dtype)
  rng = np.random.default_rng(1)
  npdt = np.dtype(dtype)
  if dtype == "bool": a, b = rng.random((3, 4)) > 0.5, rng.random((3, 4)) > 0.5
  elif npdt.kind == "f": a, b = rng.uniform(-4, 4, (3, 4)).astype(npdt), rng.uniform(-4, 4, (3, 4)).astype(npdt)
  elif npdt.kind == "u": a, b = rng.integers(0, 200, (3, 4)).astype(npdt), rng.integers(0, 200, (3, 4)).astype(npdt)
  else: a, b = rng.integers(-60, 60, (3, 4)).astype(npdt), rng.integers(-60, 60, (3, 4)).astype(npdt)
  fns = {"add": (lambda x, y: x + y, np.add), "mul": (lambda x, y: x * y, np.multiply), "sub": (lambda x, y: x - y, np.subtract),
         "maximum": (lambda x, y: x.maximum(y), np.maximum), "minimum": (lambda x, y: x.minimum(y), np.minimum)}
  tg_fn, np_fn = fns[op]
  out = tg_fn(Tensor(a), Tensor(b))
  assert out.dtype == getattr(dtypes, dtype)
  with np.errstate(over="ignore"):
    if dtype == "float16":
      np.testing.assert_allclose(out.numpy().astype(np.float64), np_fn(a.astype(np.float64), b.astype(np.float64)), rtol=2e-3, atol=2e-3)
    else:
      np.testing.assert_array_equal(out.numpy(), np_fn(a, b))  # ints wrap like numpy, bool add is or / mul is and

def test_bool_sub_is_runtime_error():
  with pytest.raises(RuntimeError): Tensor([True, False]) - Tensor([True, True])  # PyTorch's type

def test_int_true_division_gives_float():
  a, b = np.array([7, -7, 1, 9, 0], dtype=np.int32), np.array([2, 2, 3, -4, 5], dtype=np.int32)
  out = Tensor(a) / Tensor(b)
  assert out.dtype == dtypes.float32
  np.testing.assert_allclose(out.numpy(), a / b, rtol=1e-6)
  out = Tensor(a) / 2
  assert out.dtype == dtypes.float32
  np.testing.assert_allclose(out.numpy(), a / 2, rtol=1e-6)
  out = 1 / Tensor(b)
  assert out.dtype == dtypes.float32
  np.testing.assert_allclose(out.numpy(), 1 / b, rtol=1e-6)

# ---------------- integer division and remainder ----------------
INT_A = np.array([7, -7, 7, -7, 0, 6, -6, 1, -1, 13, -13, 100], dtype=np.int32)
INT_B = np.array([2, 2, -2, -2, 3, 3, -3, 5, 5, -4, 4, -7], dtype=np.int32)

@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.int64])
def test_floordiv_mod_python_semantics_ints(dtype):
  skip_refused(dtype)
  a, b = INT_A.astype(dtype), INT_B.astype(dtype)
  np.testing.assert_array_equal((Tensor(a) // Tensor(b)).numpy(), a // b)
  np.testing.assert_array_equal((Tensor(a) % Tensor(b)).numpy(), a % b)
  np.testing.assert_array_equal(Tensor(a).floordiv(Tensor(b)).numpy(), a // b)
  np.testing.assert_array_equal(Tensor(a).mod(Tensor(b)).numpy(), a % b)
  # python int scalars on either side
  np.testing.assert_array_equal((Tensor(a) // -3).numpy(), a // -3)
  np.testing.assert_array_equal((Tensor(a) % -3).numpy(), a % -3)
  np.testing.assert_array_equal((Tensor(a) // 3).numpy(), a // 3)
  np.testing.assert_array_equal((Tensor(a) % 3).numpy(), a % 3)
  np.testing.assert_array_equal((17 // Tensor(b)).numpy(), 17 // b)
  np.testing.assert_array_equal((-17 % Tensor(b)).numpy(), -17 % b)

def test_floordiv_mod_python_semantics_matches_python_ints():
  out_q, out_r = (Tensor(INT_A) // Tensor(INT_B)).tolist(), (Tensor(INT_A) % Tensor(INT_B)).tolist()
  assert out_q == [int(x) // int(y) for x, y in zip(INT_A, INT_B)]
  assert out_r == [int(x) % int(y) for x, y in zip(INT_A, INT_B)]

def test_floordiv_mod_unsigned():
  a, b = np.array([7, 200, 0, 255, 9], dtype=np.uint8), np.array([2, 3, 5, 16, 10], dtype=np.uint8)
  np.testing.assert_array_equal((Tensor(a) // Tensor(b)).numpy(), a // b)
  np.testing.assert_array_equal((Tensor(a) % Tensor(b)).numpy(), a % b)

@pytest.mark.parametrize("shapes", [[(6,), (6,)], [(2, 3), (3,)], [(), ()]], ids=str)
def test_floordiv_mod_float(shapes):
  inputs = [away_from_zero(shapes[0], 0.3, 5.0, seed=3), away_from_zero(shapes[1], 0.6, 2.0, seed=4)]
  check_op(lambda a, b: a // b, lambda a, b: a // b, inputs=inputs)
  check_op(lambda a, b: a % b, lambda a, b: np.mod(a, b), inputs=inputs, rtol=1e-5, atol=1e-5)

def test_div_rounding_modes_int():
  a, b = Tensor(INT_A), Tensor(INT_B)
  trunc = a.div(b, rounding_mode="trunc")
  assert trunc.dtype == dtypes.int32
  np.testing.assert_array_equal(trunc.numpy(), np.trunc(INT_A / INT_B).astype(np.int32))
  floor = a.div(b, rounding_mode="floor")
  assert floor.dtype == dtypes.int32
  np.testing.assert_array_equal(floor.numpy(), INT_A // INT_B)
  np.testing.assert_allclose(a.div(b).numpy(), INT_A / INT_B, rtol=1e-6)
  with pytest.raises(RuntimeError, match="round"): a.div(b, rounding_mode="round")

@pytest.mark.parametrize("mode,np_fn", [("trunc", lambda a, b: np.trunc(a / b)), ("floor", lambda a, b: np.floor(a / b))])
def test_div_rounding_modes_float(mode, np_fn):
  inputs = [away_from_zero((3, 4), 0.3, 5.0, seed=5), away_from_zero((3, 4), 0.6, 2.0, seed=6)]
  out = check_op(lambda a, b: a.div(b, rounding_mode=mode), np_fn, inputs=inputs)
  assert out.dtype == dtypes.float32

def test_fmod_int():
  np.testing.assert_array_equal(Tensor(INT_A).fmod(Tensor(INT_B)).numpy(), np.fmod(INT_A, INT_B))
  np.testing.assert_array_equal(Tensor(INT_A).fmod(3).numpy(), np.fmod(INT_A, 3))

@pytest.mark.parametrize("shapes", [[(6,), (6,)], [(2, 3), (2, 1)], [(), ()]], ids=str)
def test_fmod_float(shapes):
  inputs = [away_from_zero(shapes[0], 0.3, 5.0, seed=7), away_from_zero(shapes[1], 0.6, 2.0, seed=8)]
  check_op(lambda a, b: a.fmod(b), np.fmod, inputs=inputs, atol=1e-5)

# ---------------- pow ----------------
@pytest.mark.parametrize("shapes", [[(), ()], [(5,), (5,)], [(2, 3), (3,)], [(2, 1, 3), (4, 1)]], ids=str)
def test_pow_tensor_tensor_positive_base(shapes):
  inputs = [np.random.default_rng(9).uniform(0.5, 2.0, shapes[0]), np.random.default_rng(10).uniform(-2.0, 2.0, shapes[1])]
  check_op(lambda a, b: a ** b, np.power, inputs=inputs, rtol=1e-5)
  check_op(lambda a, b: a.pow(b), np.power, inputs=inputs, rtol=1e-5)

@pytest.mark.parametrize("exponent", [2, 3, 0, 1, -1, -2, 0.5, 2.5, -1.5, 4])
def test_pow_tensor_scalar(exponent):
  positive_only = not float(exponent).is_integer()
  x = np.random.default_rng(11).uniform(0.5, 2.0, (2, 3)) if positive_only else away_from_zero((2, 3), seed=11)
  check_op(lambda a: a ** exponent, lambda a: np.power(a, float(exponent)), inputs=[x], rtol=1e-5)

@pytest.mark.parametrize("base", [2, 2.0, 0.5, 10])
def test_rpow_scalar_tensor(base):
  check_op(lambda a: base ** a, lambda a: np.power(float(base), a), shapes=[(2, 3)], rtol=1e-5)

def test_pow_negative_base():
  base = np.array([-2.0, -2.0, -1.5, -3.0, 0.0, 2.0])
  exp = np.array([3.0, 2.0, 2.0, -1.0, 0.0, 0.5])
  np.testing.assert_allclose((Tensor(base.astype(np.float32)) ** Tensor(exp.astype(np.float32))).numpy(), np.power(base, exp), rtol=1e-5)
  out = (Tensor([-2.0]) ** Tensor([0.5])).numpy()
  assert np.isnan(out).all()

@needs(dtypes.float64, why="integer ** integer computes through float64")
def test_pow_int_int():
  a, b = np.array([2, 3, -2, 5, 0, 1, -3], dtype=np.int32), np.array([3, 2, 3, 0, 4, 9, 2], dtype=np.int32)
  out = Tensor(a) ** Tensor(b)
  assert out.dtype == dtypes.int32
  np.testing.assert_array_equal(out.numpy(), a ** b)
  out = Tensor(a) ** 2
  assert out.dtype == dtypes.int32
  np.testing.assert_array_equal(out.numpy(), a ** 2)
  np.testing.assert_array_equal((Tensor(a) ** 5).numpy(), a ** 5)
  np.testing.assert_array_equal((2 ** Tensor(b)).numpy(), 2 ** b)

# ---------------- unary math ----------------
# name: (tg fn, numpy fn, low, high)
UNARY = {
  "neg": (lambda x: -x, np.negative, -2, 2),
  "neg_method": (lambda x: x.neg(), np.negative, -2, 2),
  "abs": (lambda x: x.abs(), np.abs, -2, 2),
  "sign": (lambda x: x.sign(), np.sign, -2, 2),
  "reciprocal": (lambda x: x.reciprocal(), np.reciprocal, 0.5, 2),
  "sqrt": (lambda x: x.sqrt(), np.sqrt, 0.1, 4),
  "rsqrt": (lambda x: x.rsqrt(), lambda x: 1 / np.sqrt(x), 0.1, 4),
  "square": (lambda x: x.square(), np.square, -2, 2),
  "exp": (lambda x: x.exp(), np.exp, -3, 3),
  "exp2": (lambda x: x.exp2(), np.exp2, -3, 3),
  "log": (lambda x: x.log(), np.log, 0.1, 5),
  "log2": (lambda x: x.log2(), np.log2, 0.1, 5),
  "log10": (lambda x: x.log10(), np.log10, 0.1, 5),
  "sin": (lambda x: x.sin(), np.sin, -4, 4),
  "cos": (lambda x: x.cos(), np.cos, -4, 4),
  "tan": (lambda x: x.tan(), np.tan, -1.3, 1.3),
  "sinh": (lambda x: x.sinh(), np.sinh, -2, 2),
  "cosh": (lambda x: x.cosh(), np.cosh, -2, 2),
  "tanh": (lambda x: x.tanh(), np.tanh, -3, 3),
  "asin": (lambda x: x.asin(), np.arcsin, -0.9, 0.9),
  "acos": (lambda x: x.acos(), np.arccos, -0.9, 0.9),
  "atan": (lambda x: x.atan(), np.arctan, -4, 4),
  "asinh": (lambda x: x.asinh(), np.arcsinh, -3, 3),
  "acosh": (lambda x: x.acosh(), np.arccosh, 1.1, 4),
  "atanh": (lambda x: x.atanh(), np.arctanh, -0.9, 0.9),
  "erf": (lambda x: x.erf(), np_erf, -2.5, 2.5),
  "trunc": (lambda x: x.trunc(), np.trunc, -4, 4),
  "floor": (lambda x: x.floor(), np.floor, -4, 4),
  "ceil": (lambda x: x.ceil(), np.ceil, -4, 4),
  "round": (lambda x: x.round(), np.round, -4, 4),
  "log1p": (lambda x: x.log1p(), np.log1p, -0.5, 3),
  "expm1": (lambda x: x.expm1(), np.expm1, -2, 2),
}

@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, shape):
  tg_fn, np_fn, low, high = UNARY[name]
  check_op(tg_fn, np_fn, shapes=[shape], low=low, high=high, rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "reciprocal", "abs", "neg", "atan", "erf"])
def test_unary_float16_forward(name):
  tg_fn, np_fn = {"sigmoid": (lambda x: x.sigmoid(), np_sigmoid)}.get(name, UNARY.get(name, (None, None, 0, 0))[:2])
  low, high = (0.1, 4) if name in ("log", "sqrt", "reciprocal") else (-2, 2)
  x = np.random.default_rng(12).uniform(low, high, (4, 5)).astype(np.float16)
  out = tg_fn(Tensor(x))
  assert out.dtype == dtypes.float16
  np.testing.assert_allclose(out.numpy().astype(np.float64), np_fn(x.astype(np.float64)), rtol=5e-3, atol=5e-3)

@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "cos", "reciprocal", "log2", "exp2", "tanh", "erf"])
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.bool_])
def test_unary_float_of_ints(name, dtype):
  """Float functions of integer and bool tensors compute in (and return) float32."""
  tg_fn, np_fn = UNARY[name][:2]
  x = np.array([1, 2, 3, 5], dtype=dtype) if dtype != np.bool_ else np.array([True, False, True])
  out = tg_fn(Tensor(x))
  assert out.dtype == dtypes.float32
  with np.errstate(divide="ignore"):
    np.testing.assert_allclose(out.numpy(), np_fn(x.astype(np.float64)), rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8])
def test_int_unary_ops_keep_dtype(dtype):
  x = np.array([3, 0, 7, 100, 1], dtype=dtype) if dtype == np.uint8 else np.array([-3, 0, 7, -100, 1], dtype=dtype)
  for fn, ref in [(lambda t: t.abs(), np.abs), (lambda t: t.sign(), np.sign), (lambda t: t.trunc(), np.trunc), (lambda t: t.floor(), np.floor),
                  (lambda t: t.ceil(), np.ceil), (lambda t: t.round(), np.round), (lambda t: t.square(), np.square)]:
    out = fn(Tensor(x))
    assert out.dtype == Tensor(x).dtype
    np.testing.assert_array_equal(out.numpy(), ref(x).astype(dtype))
  if dtype != np.uint8: np.testing.assert_array_equal((-Tensor(x)).numpy(), -x)

def test_round_half_to_even():
  x = np.array([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5, 0.49, 2.51, -3.7, 1e6 + 0.5, -7.0, 0.0], dtype=np.float32)
  np.testing.assert_array_equal(Tensor(x).round().numpy(), np.round(x))

def test_trunc_floor_ceil_exact_values():
  x = np.array([-2.5, -2.0, -0.3, 0.0, 0.3, 2.0, 2.7, -1e7 - 1, 123456.75], dtype=np.float32)
  np.testing.assert_array_equal(Tensor(x).trunc().numpy(), np.trunc(x))
  np.testing.assert_array_equal(Tensor(x).floor().numpy(), np.floor(x))
  np.testing.assert_array_equal(Tensor(x).ceil().numpy(), np.ceil(x))

def test_sign_abs_special_values():
  x = np.array([-np.inf, -2.0, 0.0, 3.0, np.inf, np.nan], dtype=np.float32)
  np.testing.assert_array_equal(Tensor(x).sign().numpy(), np.sign(x))
  np.testing.assert_array_equal(Tensor(x).abs().numpy(), np.abs(x))
  assert not np.signbit(Tensor([0.0, -0.0]).abs().numpy()).any()  # |+-0.| is +0., as numpy and PyTorch
  z = Tensor([0.0, -0.0], requires_grad=True)
  z.abs().sum().backward()
  np.testing.assert_array_equal(z.grad.numpy(), [0, 0])  # PyTorch's sgn(0) = 0

@needs(dtypes.float64, why="float64 exp")
@pytest.mark.skipif(isinstance(Device[Device.DEFAULT].renderer, PTXRenderer), reason="PTX has exp2 in single precision only (codegen/ptx.py)")
def test_float64_exp_is_within_two_ulps_up_to_overflow_and_into_denormals():
  """Against numpy's exp in long double: within 2 ulps of float64 for normal results (exp2(x log2 e) alone was 430
  ulps off near x = 700; 0.82 on the CPU, whose exp2 is libm's, 1.05-1.13 on CL and AMD), within the smallest denormal
  below 2**-1022, and exact at the special values; its gradient is exp."""
  x = np.concatenate([np.random.default_rng(3).uniform(-746, 710, 200_000), np.linspace(-3, 3, 1001), [709.78, -708.39, -745.13]])
  got, exact = Tensor(x).exp().numpy(), np.exp(x.astype(np.longdouble))
  normal = (exact > np.finfo(np.float64).tiny) & (exact < np.finfo(np.float64).max)
  assert (np.abs(got[normal] - exact[normal]) / np.spacing(exact[normal].astype(np.float64))).max() <= 2
  assert (np.abs(got[~normal & (exact < 1)] - exact[~normal & (exact < 1)]) <= np.finfo(np.float64).smallest_subnormal).all()
  assert (got[exact >= np.finfo(np.float64).max] == np.inf).all()
  special = Tensor(np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e300, -1e300])).exp().numpy()
  np.testing.assert_array_equal(special, [np.inf, 0, np.nan, 1, 1, np.inf, 0])
  t = Tensor(np.linspace(-5, 5, 11), requires_grad=True)
  t.exp().sum().backward()
  np.testing.assert_allclose(t.grad.numpy(), np.exp(np.linspace(-5, 5, 11)), rtol=1e-15)

@ieee_math
def test_log1p_expm1_small_arguments_are_accurate():
  x = np.array([1e-9, -1e-8, 1e-6, 3e-5], dtype=np.float32)
  np.testing.assert_allclose(Tensor(x).log1p().numpy(), np.log1p(x.astype(np.float64)), rtol=1e-4)
  np.testing.assert_allclose(Tensor(x).expm1().numpy(), np.expm1(x.astype(np.float64)), rtol=1e-4)

@pytest.mark.skipif(Device.DEFAULT == "WEBGPU", reason="WGSL bounds sin's error only absolutely (2^-11 over [-pi, pi])")
def test_sin_is_accurate_relative_to_its_value():
  """Within a few ulp of the value at every magnitude, tiny arguments included (a GPU's fast sine is off by about
  2^-21.5 absolutely: sin(1e-6) 19 % off on an H200), and sin(-0.) is -0."""
  x = np.array([1e-30, -1e-12, 1e-8, -1e-6, 3e-5, 1e-3, 0.1, -0.7, 1.5, 2.5, -3.1, 4.0, 7.5, -20.0], dtype=np.float32)
  np.testing.assert_allclose(Tensor(x).sin().numpy(), np.sin(x.astype(np.float64)), rtol=4e-7, atol=0)
  assert np.signbit(Tensor([-0.0]).sin().numpy()[0])

def test_sin_of_large_arguments_keeps_the_quadrant():
  """Up to 1e8, within 1e-3 of the value: the reduction by pi/2 picks the right quadrant (an exact quadrant only below
  2**22 made AMD's sin(7e6) 0.80 instead of -0.60); past 2**20 the float32 reductions lose digits, not the sign."""
  x = np.array([1e5, -4e5, 1e6, 3e6, 7e6, -1e7, 3e7, 1e8, -5e7], dtype=np.float32)
  np.testing.assert_allclose(Tensor(x).sin().numpy(), np.sin(x.astype(np.float64)), rtol=0, atol=1e-3)

@pytest.mark.skipif(Device.DEFAULT == "WEBGPU", reason="WGSL bounds sin's error only absolutely (2^-11 over [-pi, pi])")
def test_cos_is_accurate_relative_to_its_value_near_half_pi():
  """Near +-pi/2, where cos is small, within a few ulp of its value (pi/2 - x rounded once made cos(1.570796) 14 % off)."""
  x = np.array([1.5, 1.57, 1.5707, 1.570796, -1.570796, -1.5708, 1.5708, 1.6], dtype=np.float32)
  np.testing.assert_allclose(Tensor(x).cos().numpy(), np.cos(x.astype(np.float64)), rtol=4e-7, atol=0)

def test_sqrt_log_of_invalid():
  out_sqrt = Tensor([-1.0, 0.0, 4.0]).sqrt().numpy()
  assert np.isnan(out_sqrt[0]) and out_sqrt[1] == 0 and out_sqrt[2] == 2
  out_log = Tensor([-1.0, 0.0, 1.0]).log().numpy()
  assert np.isnan(out_log[0]) and out_log[1] == -np.inf and out_log[2] == 0
  assert Tensor([0.0]).reciprocal().numpy()[0] == np.inf

# ---------------- clamp, where, lerp, copysign, logaddexp ----------------
@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
def test_clamp(shape):
  x = np.random.default_rng(13).uniform(-2, 2, shape)
  x = np.where(np.abs(np.abs(x) - 1) < 0.05, x + 0.1, x)  # stay away from the kinks at +-1
  check_op(lambda a: a.clamp(-1.0, 1.0), lambda a: np.clip(a, -1, 1), inputs=[x])
  check_op(lambda a: a.clip(-1.0, 1.0), lambda a: np.clip(a, -1, 1), inputs=[x])
  check_op(lambda a: a.clamp(min_=-1.0), lambda a: np.maximum(a, -1), inputs=[x])
  check_op(lambda a: a.clamp(max_=1.0), lambda a: np.minimum(a, 1), inputs=[x])

def test_clamp_tensor_bounds_and_ints():
  x = np.array([-5, -1, 0, 3, 9], dtype=np.int32)
  out = Tensor(x).clamp(-2, 4)
  assert out.dtype == dtypes.int32
  np.testing.assert_array_equal(out.numpy(), np.clip(x, -2, 4))
  lo, hi = np.array([-0.5, 0.0, -1.0]), np.array([0.5, 1.0, 0.0])
  xs = np.array([-0.8, 0.6, 0.3])
  check_op(lambda a, l, h: a.clamp(l, h), lambda a, l, h: np.clip(a, l, h), inputs=[xs, lo, hi])
  with pytest.raises(RuntimeError): Tensor([1.0]).clamp()

@pytest.mark.parametrize("shapes", [[(4,), (4,), (4,)], [(2, 3), (2, 3), (3,)], [(2, 1), (1, 3), ()], [(), (2, 2), (2, 2)]], ids=str)
def test_where(shapes):
  rng = np.random.default_rng(14)
  cond = rng.random(shapes[0]) > 0.5
  x, y = rng.uniform(-2, 2, shapes[1]), rng.uniform(-2, 2, shapes[2])
  check_op(lambda c, a, b: c.where(a, b), lambda c, a, b: np.where(c, a, b), inputs=[cond, x, y])

def test_where_scalars_and_dtypes():
  cond = np.array([True, False, True])
  out = Tensor(cond).where(1, 0)
  assert out.dtype == dtypes.int32
  np.testing.assert_array_equal(out.numpy(), [1, 0, 1])
  out = Tensor(cond).where(1.5, 0)
  assert out.dtype == dtypes.float32
  np.testing.assert_array_equal(out.numpy(), [1.5, 0, 1.5])
  check_op(lambda c, a: c.where(a, 0.0), lambda c, a: np.where(c, a, 0.0), inputs=[cond, np.array([1.0, 2.0, 3.0])])
  check_op(lambda c, a: c.where(-1.0, a), lambda c, a: np.where(c, -1.0, a), inputs=[cond, np.array([1.0, 2.0, 3.0])])
  # a non-bool condition is truthiness
  np.testing.assert_array_equal(Tensor([0, 2, -1]).where(Tensor([1, 1, 1]), Tensor([7, 7, 7])).numpy(), [7, 1, 1])
  # int and float branches promote
  out = Tensor(cond).where(Tensor([1, 2, 3]), Tensor([0.5, 0.5, 0.5]))
  assert out.dtype == dtypes.float32
  np.testing.assert_array_equal(out.numpy(), [1, 0.5, 3])

@pytest.mark.parametrize("shapes", [[(4,), (4,), (4,)], [(2, 3), (3,), (2, 1)], [(), (), ()]], ids=str)
def test_lerp(shapes):
  check_op(lambda a, b, w: a.lerp(b, w), lambda a, b, w: a + (b - a) * w, shapes=shapes)

def test_lerp_scalar_weight():
  check_op(lambda a, b: a.lerp(b, 0.3), lambda a, b: a + (b - a) * 0.3, shapes=[(3, 2), (3, 2)])

@pytest.mark.parametrize("shapes", [[(5,), (5,)], [(2, 3), (3,)], [(), ()]], ids=str)
def test_copysign(shapes):
  inputs = [away_from_zero(shapes[0], seed=15), away_from_zero(shapes[1], seed=16)]
  check_op(lambda a, b: a.copysign(b), np.copysign, inputs=inputs)

def test_copysign_signed_zero_and_scalar():
  a = np.array([1.0, 2.0, -3.0, -4.0], dtype=np.float32)
  b = np.array([0.0, -0.0, 0.0, -0.0], dtype=np.float32)
  np.testing.assert_array_equal(Tensor(a).copysign(Tensor(b)).numpy(), np.copysign(a, b))
  np.testing.assert_array_equal(Tensor(a).copysign(-1.0).numpy(), np.copysign(a, -1.0))
  out = Tensor([1, -2, 3]).copysign(-1)
  assert out.dtype == dtypes.float32
  np.testing.assert_array_equal(out.numpy(), [-1, -2, -3])

@pytest.mark.parametrize("shapes", [[(5,), (5,)], [(2, 3), (2, 1)], [(), (3,)]], ids=str)
def test_logaddexp(shapes):
  check_op(lambda a, b: a.logaddexp(b), np.logaddexp, shapes=shapes, low=-4, high=4)

def test_logaddexp_large_values():
  a, b = np.array([100.0, -100.0, 50.0], dtype=np.float32), np.array([100.0, -101.0, -50.0], dtype=np.float32)
  np.testing.assert_allclose(Tensor(a).logaddexp(Tensor(b)).numpy(), np.logaddexp(a.astype(np.float64), b), rtol=1e-6)

# ---------------- isnan / isinf / isfinite / isclose ----------------
SPECIAL = np.array([0.0, -1.5, np.nan, np.inf, -np.inf, 3e38, -0.0], dtype=np.float32)

@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_isnan_isinf_isfinite(dtype):
  x = SPECIAL.astype(dtype) if dtype == np.float32 else np.array([0.0, -1.5, np.nan, np.inf, -np.inf, 6e4], dtype=np.float16)
  t = Tensor(x)
  for got, ref in [(t.isnan(), np.isnan(x)), (t.isinf(), np.isinf(x)), (t.isfinite(), np.isfinite(x)),
                   (t.isinf(detect_negative=False), np.isposinf(x)), (t.isinf(detect_positive=False), np.isneginf(x))]:
    assert got.dtype == dtypes.bool
    np.testing.assert_array_equal(got.numpy(), ref)

def test_isnan_isinf_ints():
  t = Tensor([1, -2, 3])
  np.testing.assert_array_equal(t.isnan().numpy(), [False] * 3)
  np.testing.assert_array_equal(t.isinf().numpy(), [False] * 3)
  np.testing.assert_array_equal(t.isfinite().numpy(), [True] * 3)

def test_isclose():
  a = np.array([1.0, 1.0, 1e-9, np.nan, np.inf, 100.0, -np.inf], dtype=np.float32)
  b = np.array([1.0 + 1e-6, 1.1, 0.0, np.nan, np.inf, 100.001, np.inf], dtype=np.float32)
  np.testing.assert_array_equal(Tensor(a).isclose(Tensor(b)).numpy(), np.isclose(a, b))
  np.testing.assert_array_equal(Tensor(a).isclose(Tensor(b), equal_nan=True).numpy(), np.isclose(a, b, equal_nan=True))
  np.testing.assert_array_equal(Tensor(a).isclose(Tensor(b), rtol=1e-3, atol=0.0).numpy(), np.isclose(a, b, rtol=1e-3, atol=0.0))
  assert Tensor([1.0, 2.0]).allclose(Tensor([1.0, 2.0 + 1e-7]))
  assert not Tensor([1.0, 2.0]).allclose(Tensor([1.0, 2.1]))

# ---------------- comparisons ----------------
CMP = {
  "lt": (lambda a, b: a < b, np.less), "le": (lambda a, b: a <= b, np.less_equal), "gt": (lambda a, b: a > b, np.greater),
  "ge": (lambda a, b: a >= b, np.greater_equal), "eq": (lambda a, b: a == b, np.equal), "ne": (lambda a, b: a != b, np.not_equal),
  "eq_method": (lambda a, b: a.eq(b), np.equal), "ne_method": (lambda a, b: a.ne(b), np.not_equal),
}

@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.bool_])
@pytest.mark.parametrize("name", list(CMP))
def test_comparisons(name, dtype):
  tg_fn, np_fn = CMP[name]
  rng = np.random.default_rng(17)
  if dtype == np.bool_: a, b = rng.random((3, 4)) > 0.5, rng.random((4,)) > 0.5
  else:
    a, b = rng.integers(0, 5, (3, 4)).astype(dtype), rng.integers(0, 5, (4,)).astype(dtype)  # many equal pairs
    if np.dtype(dtype).kind == "f": a = a + np.array(0.5, dtype=dtype) * (rng.random((3, 4)) > 0.7)
  out = tg_fn(Tensor(a), Tensor(b))
  assert out.dtype == dtypes.bool and out.shape == (3, 4)
  np.testing.assert_array_equal(out.numpy(), np_fn(a, b))

@pytest.mark.parametrize("name", ["lt", "le", "gt", "ge", "eq", "ne"])
def test_comparisons_python_scalars(name):
  tg_fn, np_fn = CMP[name]
  a = np.array([-1.0, 0.0, 1.0, 2.0, 2.5], dtype=np.float32)
  np.testing.assert_array_equal(tg_fn(Tensor(a), 1.0).numpy(), np_fn(a, 1.0))
  np.testing.assert_array_equal(tg_fn(1.0, Tensor(a)).numpy(), np_fn(1.0, a))
  ai = np.array([-3, 0, 1, 2, 7], dtype=np.int32)
  np.testing.assert_array_equal(tg_fn(Tensor(ai), 1).numpy(), np_fn(ai, 1))
  np.testing.assert_array_equal(tg_fn(Tensor(ai), 1.5).numpy(), np_fn(ai, 1.5))

@pytest.mark.parametrize("name", list(CMP))
def test_comparisons_nan(name):
  tg_fn, np_fn = CMP[name]
  a = np.array([np.nan, 1.0, np.nan, np.inf, -np.inf, 2.0], dtype=np.float32)
  b = np.array([1.0, np.nan, np.nan, np.inf, np.inf, 2.0], dtype=np.float32)
  with np.errstate(invalid="ignore"):
    np.testing.assert_array_equal(tg_fn(Tensor(a), Tensor(b)).numpy(), np_fn(a, b))
    np.testing.assert_array_equal(tg_fn(Tensor(a), 1.0).numpy(), np_fn(a, 1.0))

def test_comparison_has_no_gradient_but_keeps_graph():
  x = Tensor([1.0, -2.0, 3.0], requires_grad=True)
  (x * (x > 0).cast(dtypes.float32)).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 1.0])

# ---------------- bitwise ----------------
BITWISE = {"and": (lambda a, b: a & b, np.bitwise_and), "or": (lambda a, b: a | b, np.bitwise_or), "xor": (lambda a, b: a ^ b, np.bitwise_xor),
           "and_method": (lambda a, b: a.bitwise_and(b), np.bitwise_and), "or_method": (lambda a, b: a.bitwise_or(b), np.bitwise_or),
           "xor_method": (lambda a, b: a.bitwise_xor(b), np.bitwise_xor)}

def int_data(dtype, shape, seed=0):
  rng = np.random.default_rng(seed)
  if dtype == np.bool_: return rng.random(shape) > 0.5
  info = np.iinfo(dtype)
  return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)

@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8, np.uint32, np.int64, np.bool_])
@pytest.mark.parametrize("name", list(BITWISE))
def test_bitwise(name, dtype):
  skip_refused(dtype)
  tg_fn, np_fn = BITWISE[name]
  a, b = int_data(dtype, (3, 4), 1), int_data(dtype, (4,), 2)
  out = tg_fn(Tensor(a), Tensor(b))
  assert out.dtype == Tensor(a).dtype
  np.testing.assert_array_equal(out.numpy(), np_fn(a, b))

def test_bitwise_python_scalars():
  a = np.array([0, 5, -6, 255, 1 << 20], dtype=np.int32)
  np.testing.assert_array_equal((Tensor(a) & 0xF0).numpy(), a & 0xF0)
  np.testing.assert_array_equal((0xF0 & Tensor(a)).numpy(), a & 0xF0)
  np.testing.assert_array_equal((Tensor(a) | 3).numpy(), a | 3)
  np.testing.assert_array_equal((3 | Tensor(a)).numpy(), a | 3)
  np.testing.assert_array_equal((Tensor(a) ^ -1).numpy(), a ^ -1)
  np.testing.assert_array_equal((-1 ^ Tensor(a)).numpy(), a ^ -1)
  np.testing.assert_array_equal((Tensor([True, False]) & True).numpy(), [True, False])

@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8, np.uint32, np.int16, np.bool_])
def test_bitwise_not(dtype):
  a = int_data(dtype, (2, 5), 3)
  out = ~Tensor(a)
  assert out.dtype == Tensor(a).dtype
  np.testing.assert_array_equal(out.numpy(), ~a)
  np.testing.assert_array_equal(Tensor(a).bitwise_not().numpy(), ~a)

@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.uint32, np.int64, np.uint16])
def test_shifts(dtype):
  skip_refused(dtype)
  bits = 8 * np.dtype(dtype).itemsize
  a = np.random.default_rng(4).integers(0, min(2**31, 2**(bits - 1)), (3, 4)).astype(dtype)
  s = np.random.default_rng(5).integers(0, bits, (3, 4)).astype(dtype)
  np.testing.assert_array_equal((Tensor(a) << Tensor(s)).numpy(), a << s)  # bits shifted out are dropped
  np.testing.assert_array_equal((Tensor(a) >> Tensor(s)).numpy(), a >> s)
  np.testing.assert_array_equal((Tensor(a) << 3).numpy(), a << dtype(3))
  np.testing.assert_array_equal((Tensor(a) >> 2).numpy(), a >> dtype(2))
  np.testing.assert_array_equal(Tensor(a).lshift(1).numpy(), a << dtype(1))
  np.testing.assert_array_equal(Tensor(a).rshift(1).numpy(), a >> dtype(1))

def test_uint8_shift_wraps():
  a = np.array([1, 129, 255, 64], dtype=np.uint8)
  out = Tensor(a) << 1
  assert out.dtype == dtypes.uint8
  np.testing.assert_array_equal(out.numpy(), a << np.uint8(1))

@pytest.mark.parametrize("fn", [lambda a, b: a & b, lambda a, b: a | b, lambda a, b: a ^ b, lambda a, b: a << b, lambda a, b: a >> b,
                                lambda a, b: ~a, lambda a, b: a.bitwise_and(b), lambda a, b: a & 1, lambda a, b: a << 1],
                         ids=["and", "or", "xor", "shl", "shr", "not", "and_method", "and_scalar", "shl_scalar"])
def test_bitwise_on_floats_is_runtime_error(fn):
  with pytest.raises(RuntimeError, match="float"): fn(Tensor([1.0, 2.0]), Tensor([1.0, 3.0]))  # PyTorch's type

def test_bool_shift_is_runtime_error():
  with pytest.raises(RuntimeError): Tensor([True]) << 1

@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.float32, np.uint8])
def test_logical_not(dtype):
  x = np.array([0, 1, 2, 0, 5], dtype=dtype) if dtype != np.bool_ else np.array([True, False, True])
  out = Tensor(x).logical_not()
  assert out.dtype == dtypes.bool
  np.testing.assert_array_equal(out.numpy(), np.logical_not(x))

def test_neg_of_bool_is_logical_not():
  np.testing.assert_array_equal((-Tensor([True, False])).numpy(), [False, True])

# ---------------- cast and bitcast ----------------
CAST_CASES = [
  (np.float32, np.int32, np.array([-2.7, -1.5, -0.2, 0.0, 0.9, 3.99, 1000.5])),
  (np.float32, np.int8, np.array([-100.7, -1.5, 0.2, 127.9])),
  (np.float32, np.uint8, np.array([0.0, 0.9, 200.7, 255.0])),
  (np.float32, np.float16, np.array([1.0, -2.5, 1e-3, 3.14159, 65504.0])),
  (np.float32, np.float64, np.array([1.0, -2.5, 1e-3, 3.14159])),
  (np.float32, np.bool_, np.array([0.0, -0.0, 0.5, -2.0, np.nan])),
  (np.float16, np.float32, np.array([1.0, -2.5, 1e-3, 3.14159, 65504.0])),
  (np.int32, np.float32, np.array([-5, 0, 7, 1 << 20])),
  (np.int32, np.uint8, np.array([-1, 0, 255, 256, 300, -200])),
  (np.int32, np.int8, np.array([-129, 127, 128, 5])),
  (np.int32, np.int64, np.array([-(1 << 31), 5, (1 << 31) - 1])),
  (np.int64, np.int32, np.array([(1 << 33) + 5, -7])),
  (np.uint8, np.int32, np.array([0, 128, 255])),
  (np.uint8, np.float32, np.array([0, 128, 255])),
  (np.int8, np.uint8, np.array([-1, -128, 5])),
  (np.uint32, np.float32, np.array([0, 1 << 31, 12345])),
  (np.bool_, np.int32, np.array([True, False])),
  (np.bool_, np.float32, np.array([True, False])),
  (np.int32, np.bool_, np.array([0, 3, -1])),
]

@pytest.mark.parametrize("src,dst,values", CAST_CASES, ids=lambda v: v.__name__ if isinstance(v, type) else "")
def test_cast(src, dst, values):
  skip_refused(src, dst)
  x = values.astype(src)
  out = Tensor(x).cast(Tensor(np.zeros(1, dst)).dtype)
  with np.errstate(invalid="ignore"): ref = x.astype(dst)
  assert out.dtype == Tensor(ref).dtype
  np.testing.assert_array_equal(out.numpy(), ref)

@pytest.mark.parametrize("src", [np.float32, np.float64])
@pytest.mark.parametrize("dst", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64])
def test_float_to_int_casts_saturate_and_take_nan_to_zero(src, dst):
  """Out of the integer type's range, a float becomes its nearest end and NaN becomes 0 (LLVM's fptosi.sat, which
  the CPU renders with compares and selects); in range it truncates toward zero."""
  skip_refused(src, dst)
  x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 1e20, -1e20, 2147483520.0, 255.9, 256.0, 127.5, -128.5, 1.5, -1.5, -0.7, -0.0], src)
  info = np.iinfo(dst)
  want = [0 if np.isnan(v) else info.max if v >= info.max + 1.0 else info.min if v < info.min else int(np.trunc(v)) for v in x.astype(np.float64)]
  np.testing.assert_array_equal(Tensor(x).cast(Tensor(np.zeros(1, dst)).dtype).numpy().astype(np.int64), np.array(want, np.int64))

def test_cast_by_name_and_shortcuts():
  t = Tensor([1.7, -2.2])
  assert t.cast("int32").dtype == dtypes.int32 and t.int().dtype == dtypes.int32 and t.half().dtype == dtypes.float16
  assert t.long().dtype == dtypes.int64 and t.double().dtype == dtypes.float64 and t.bool().dtype == dtypes.bool
  np.testing.assert_array_equal(t.int().numpy(), [1, -2])
  np.testing.assert_array_equal(Tensor([1, 2]).float().numpy(), np.array([1.0, 2.0], dtype=np.float32))

@needs(dtypes.float64, why="it casts through float64")
def test_cast_gradient():
  check_op(lambda a: a.cast(dtypes.float64).square().cast(dtypes.float32), np.square, shapes=[(3,)])
  # values exact in float16, so the round trip is the identity and the gradient passes through the casts
  check_op(lambda a: a.cast(dtypes.float16).cast(dtypes.float32) * 2, lambda a: a * 2, inputs=[np.array([0.5, 1.25, -3.0])])

BITCAST_CASES = [
  (np.float32, np.int32, np.array([1.0, -2.0, 0.0, -0.0, np.inf, 3.14159])),
  (np.float32, np.uint32, np.array([1.0, -2.0, 0.5])),
  (np.int32, np.float32, np.array([0x3F800000, -0x40000000, 0, 1])),
  (np.uint32, np.float32, np.array([0x3F800000, 0xC0000000, 0x7F800000])),
  (np.float16, np.int16, np.array([1.0, -2.0, 0.5, 65504.0])),
  (np.int16, np.float16, np.array([0x3C00, -0x4000, 1])),
  (np.uint16, np.int16, np.array([0, 0x8000, 0xFFFF, 0x1234])),
  (np.int8, np.uint8, np.array([-1, -128, 0, 127])),
  (np.float64, np.int64, np.array([1.0, -2.0, 1e300])),
]

@pytest.mark.parametrize("src,dst,values", BITCAST_CASES, ids=lambda v: v.__name__ if isinstance(v, type) else "")
def test_bitcast_same_size(src, dst, values):
  skip_refused(src, dst)
  x = values.astype(src)
  out = Tensor(x).bitcast(Tensor(np.zeros(1, dst)).dtype)
  assert out.shape == x.shape
  np.testing.assert_array_equal(out.numpy().view(np.uint8), x.view(dst).view(np.uint8))

def test_bitcast_round_trip_of_computed_values():
  x = np.array([1.5, -0.25, 100.0], dtype=np.float32)
  out = (Tensor(x) * 2).bitcast(dtypes.int32)
  np.testing.assert_array_equal(out.numpy(), (x * 2).view(np.int32))
  back = (out + 0).bitcast(dtypes.float32)
  np.testing.assert_array_equal(back.numpy(), x * 2)

@pytest.mark.parametrize("src,dst,shape", [(np.uint8, np.uint32, (2, 8)), (np.uint8, np.int16, (6,)), (np.float32, np.uint8, (2, 3)),
                                           (np.uint32, np.uint16, (4,)), (np.int16, np.float32, (2, 4)), (np.float16, np.float32, (4,))],
                         ids=str)
def test_bitcast_resize(src, dst, shape):
  x = np.random.default_rng(6).integers(0, 255, int(np.prod(shape)) * np.dtype(src).itemsize).astype(np.uint8).view(src).reshape(shape)
  if np.dtype(src).kind == "f": x = np.random.default_rng(6).uniform(-3, 3, shape).astype(src)
  out = Tensor(x).bitcast(Tensor(np.zeros(1, dst)).dtype)
  ref = x.view(dst)
  assert out.shape == ref.shape
  np.testing.assert_array_equal(out.numpy().view(np.uint8), ref.view(np.uint8))

def test_bitcast_bad_size_raises():
  with pytest.raises(ValueError): Tensor(np.zeros(3, np.uint8)).bitcast(dtypes.uint32)

# ---------------- activations ----------------
def np_gelu_tanh(x): return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
def np_gelu_erf(x): return 0.5 * x * (1 + np_erf(x / math.sqrt(2)))
SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805

ACTIVATIONS = {
  "relu": (lambda x: x.relu(), lambda x: np.maximum(x, 0), -3, 3),
  "relu6": (lambda x: x.relu6(), lambda x: np.clip(x, 0, 6), -3, 9),
  "leaky_relu": (lambda x: x.leaky_relu(), lambda x: np.where(x > 0, x, 0.01 * x), -3, 3),
  "leaky_relu_0.2": (lambda x: x.leaky_relu(0.2), lambda x: np.where(x > 0, x, 0.2 * x), -3, 3),
  "elu": (lambda x: x.elu(), lambda x: np.where(x > 0, x, np.expm1(x)), -3, 3),
  "elu_0.5": (lambda x: x.elu(0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x)), -3, 3),
  "celu": (lambda x: x.celu(), lambda x: np.maximum(x, 0) + np.minimum(0, np.expm1(x)), -3, 3),
  "celu_2": (lambda x: x.celu(2.0), lambda x: np.maximum(x, 0) + np.minimum(0, 2.0 * np.expm1(x / 2.0)), -3, 3),
  "selu": (lambda x: x.selu(), lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x)), -3, 3),
  "sigmoid": (lambda x: x.sigmoid(), np_sigmoid, -6, 6),
  "logsigmoid": (lambda x: x.logsigmoid(), lambda x: -np_softplus(-x), -6, 6),
  "hardsigmoid": (lambda x: x.hardsigmoid(), lambda x: np.clip(x / 6 + 0.5, 0, 1), -5, 5),
  "silu": (lambda x: x.silu(), lambda x: x * np_sigmoid(x), -5, 5),
  "swish": (lambda x: x.swish(), lambda x: x * np_sigmoid(x), -5, 5),
  "hardswish": (lambda x: x.hardswish(), lambda x: x * np.clip(x + 3, 0, 6) / 6, -5, 5),
  "hardtanh": (lambda x: x.hardtanh(), lambda x: np.clip(x, -1, 1), -3, 3),
  "hardtanh_2": (lambda x: x.hardtanh(-2, 0.5), lambda x: np.clip(x, -2, 0.5), -3, 3),
  "gelu_tanh": (lambda x: x.gelu(approximate="tanh"), np_gelu_tanh, -4, 4),
  "gelu_none": (lambda x: x.gelu(approximate="none"), np_gelu_erf, -4, 4),
  "quick_gelu": (lambda x: x.quick_gelu(), lambda x: x * np_sigmoid(1.702 * x), -4, 4),
  "mish": (lambda x: x.mish(), lambda x: x * np.tanh(np_softplus(x)), -4, 4),
  "softplus": (lambda x: x.softplus(), np_softplus, -5, 5),
  "softplus_beta2": (lambda x: x.softplus(beta=2.0), lambda x: np_softplus(x, 2.0), -5, 5),
  "softsign": (lambda x: x.softsign(), lambda x: x / (1 + np.abs(x)), -4, 4),
}

@pytest.mark.parametrize("shape", [(), (7,), (3, 4), (2, 2, 3)], ids=str)
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation(name, shape):
  tg_fn, np_fn, low, high = ACTIVATIONS[name]
  x = np.random.default_rng(len(shape) + 20).uniform(low, high, shape)
  x = np.where(np.abs(x) < 0.05, 0.1, x)  # keep away from the kink at 0
  x = np.where(np.abs(np.abs(x) - 1) < 0.02, x + 0.05, x)  # hardtanh kinks
  x = np.where(np.abs(np.abs(x) - 3) < 0.02, x + 0.05, x)  # hardsigmoid / hardswish kinks
  x = np.where(np.abs(x - 6) < 0.02, x + 0.05, x)  # relu6
  check_op(tg_fn, np_fn, inputs=[x], rtol=1e-5, atol=2e-6)

def test_softplus_threshold_is_linear():
  x = np.array([25.0, 30.0, -30.0, 1.0])
  check_op(lambda a: a.softplus(), lambda a: np.where(a > 20, a, np_softplus(a)), inputs=[x])

def test_activations_extreme_inputs_are_finite():
  x = Tensor([-100.0, -20.0, 0.0, 20.0, 100.0])
  np.testing.assert_allclose(x.sigmoid().numpy(), np_sigmoid(np.array([-100.0, -20.0, 0.0, 20.0, 100.0])), rtol=1e-5, atol=1e-30)
  np.testing.assert_allclose(x.tanh().numpy(), np.tanh([-100.0, -20.0, 0.0, 20.0, 100.0]), atol=1e-6)
  np.testing.assert_allclose(x.softplus().numpy(), np_softplus(np.array([-100.0, -20.0, 0.0, 20.0, 100.0])), rtol=1e-5, atol=1e-30)
  np.testing.assert_allclose(x.logsigmoid().numpy(), -np_softplus(-np.array([-100.0, -20.0, 0.0, 20.0, 100.0])), rtol=1e-5, atol=1e-30)
  np.testing.assert_allclose(x.gelu().numpy(), np_gelu_tanh(np.array([-100.0, -20.0, 0.0, 20.0, 100.0])), atol=1e-5)

@pytest.mark.parametrize("name", ["relu", "sigmoid", "silu", "gelu_tanh", "softplus", "elu", "hardswish"])
def test_activation_float16_forward(name):
  tg_fn, np_fn, low, high = ACTIVATIONS[name]
  x = np.random.default_rng(30).uniform(low, high, (4, 5)).astype(np.float16)
  out = tg_fn(Tensor(x))
  assert out.dtype == dtypes.float16
  np.testing.assert_allclose(out.numpy().astype(np.float64), np_fn(x.astype(np.float64)), rtol=1e-2, atol=5e-3)

# ---------------- dtype promotion ----------------
def test_int_tensor_times_float_scalar_is_float32():
  out = Tensor([1, 2, 3]) * 2.5
  assert out.dtype == dtypes.float32
  np.testing.assert_array_equal(out.numpy(), [2.5, 5.0, 7.5])
  out = 2.5 * Tensor([1, 2, 3])
  assert out.dtype == dtypes.float32

@needs(dtypes.int64, why="int64 is among the integer dtypes it checks")
def test_int_tensor_with_int_scalar_keeps_dtype():
  for dt in (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8):
    assert (Tensor([1, 2], dtype=dt) + 1).dtype == dt
    assert (Tensor([1, 2], dtype=dt) * 3).dtype == dt

def test_uint8_arithmetic_wraps_but_a_scalar_it_cant_hold_raises():
  with pytest.raises(OverflowError, match="300 is out of range for uchar"): Tensor(np.array([1, 2], dtype=np.uint8)) + 300  # as PyTorch
  out = Tensor([250, 5], dtype=dtypes.uint8) + 10
  assert out.tolist() == [4, 15]
  out = Tensor([5], dtype=dtypes.uint8) - 10
  assert out.tolist() == [251]

def test_int8_plus_uint8_is_int16():
  out = Tensor(np.array([-100, 100], dtype=np.int8)) + Tensor(np.array([200, 200], dtype=np.uint8))
  assert out.dtype == dtypes.int16
  assert out.tolist() == [100, 300]

@pytest.mark.parametrize("a,b,expected", [
  ("int8", "int16", "int16"), ("int32", "int64", "int64"), ("uint8", "uint16", "uint16"), ("uint16", "int16", "int32"),
  ("uint32", "int32", "int64"), ("int32", "float16", "float16"), ("int64", "float32", "float32"), ("float16", "float32", "float32"),
  ("float32", "float64", "float64"), ("bool", "int8", "int8"), ("bool", "uint8", "uint8"), ("bool", "float32", "float32"),
  ("bool", "bool", "bool"), ("uint8", "int8", "int16")])
def test_tensor_tensor_promotion(a, b, expected):
  skip_refused(a, b)
  x, y = Tensor([1, 0], dtype=a), Tensor([1, 1], dtype=b)
  assert (x + y).dtype == getattr(dtypes, expected)
  assert (y + x).dtype == getattr(dtypes, expected)
  assert (x * y).dtype == getattr(dtypes, expected)

def test_bool_plus_bool():
  a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
  out = Tensor(a) + Tensor(b)
  assert out.dtype == dtypes.bool
  np.testing.assert_array_equal(out.numpy(), a + b)
  out = Tensor(a) * Tensor(b)
  assert out.dtype == dtypes.bool
  np.testing.assert_array_equal(out.numpy(), a * b)

def test_bool_with_python_scalars():
  t = Tensor([True, False])
  out = t + 1
  assert out.dtype == dtypes.int32
  assert out.tolist() == [2, 1]
  out = t * 1.5
  assert out.dtype == dtypes.float32
  assert out.tolist() == [1.5, 0.0]
  out = t + True
  assert out.dtype == dtypes.bool

def test_int_div_int_tensor_is_float32():
  out = Tensor([1, 2, 3], dtype=dtypes.int32) / Tensor([2, 2, 2], dtype=dtypes.int32)
  assert out.dtype == dtypes.float32
  np.testing.assert_allclose(out.numpy(), [0.5, 1.0, 1.5])
  out = Tensor([1, 2], dtype=dtypes.uint8) / Tensor([4, 4], dtype=dtypes.int8)
  assert out.dtype == dtypes.float32
  np.testing.assert_allclose(out.numpy(), [0.25, 0.5])

def test_float16_tensor_with_python_float_stays_float16():
  out = Tensor(np.array([1.0, 2.0], dtype=np.float16)) * 0.5
  assert out.dtype == dtypes.float16
  np.testing.assert_array_equal(out.numpy(), np.array([0.5, 1.0], dtype=np.float16))

@pytest.mark.parametrize("s1,s2", [((2, 3), (4,)), ((2, 3), (3, 2)), ((5,), (4,)), ((2, 1, 3), (2, 2))])
def test_broadcast_mismatch_names_both_shapes(s1, s2):
  with pytest.raises(ValueError) as e: Tensor.ones(*s1) + Tensor.ones(*s2)
  assert str(s1) in str(e.value) and str(s2) in str(e.value)
  with pytest.raises(ValueError): Tensor.ones(*s1).maximum(Tensor.ones(*s2))
  with pytest.raises(ValueError): Tensor.ones(*s1) < Tensor.ones(*s2)

def test_combining_with_unsupported_type_raises():
  with pytest.raises(TypeError): Tensor([1.0]) + "a"

def test_relu_keeps_nan_and_passes_no_gradient_at_zero():
  """The gradient is read from the output (out <= 0 passes none), which agrees with x <= 0 everywhere: at -0.0, at 0,
  and at NaN, where it passes the gradient on as PyTorch's threshold_backward does."""
  np.testing.assert_array_equal(Tensor([np.nan, -1., 0., 2.]).relu().numpy(), [np.nan, 0., 0., 2.])
  x = Tensor([np.nan, -1., -0., 0., 2.], requires_grad=True)
  (x.relu() * Tensor([3., 5., 7., 11., 13.])).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [3., 0., 0., 0., 13.])

@pytest.mark.parametrize("dtype", [dtypes.int32, dtypes.int8, dtypes.uint16, dtypes.int64])
def test_integer_division_and_modulo_by_zero_give_zero_like_numpy(dtype):
  skip_refused(dtype)
  a, b = np.array([5, 7, 0, 9, 3], dtype=np.int64), np.array([0, 2, 0, 4, 0], dtype=np.int64)
  if not dtypes.is_unsigned(dtype): a, b = a * np.array([1, -1, 1, -1, -1]), b * np.array([1, 1, 1, -1, 1])
  A, B = Tensor(a, dtype=dtype), Tensor(b, dtype=dtype)
  with np.errstate(divide="ignore"):
    np.testing.assert_array_equal((A // B).numpy(), a // b)
    np.testing.assert_array_equal((A % B).numpy(), a % b)
    np.testing.assert_array_equal(A.fmod(B).numpy(), np.fmod(a, b))
    np.testing.assert_array_equal(A.div(B, rounding_mode="trunc").numpy(), np.where(b == 0, 0, np.trunc(a / np.where(b == 0, 1, b))))
    np.testing.assert_array_equal((A // 0).numpy(), np.zeros(5))

@needs(dtypes.int64, why="Python ints past int32 become int64")
def test_python_ints_outside_the_dtype_raise_or_widen():
  t = Tensor([2**31])
  assert t.dtype == dtypes.int64 and t.item() == 2**31  # as PyTorch: int64 where the value needs it
  assert Tensor([-2**31 - 1, 0]).numpy().tolist() == [-2**31 - 1, 0]
  assert Tensor(2**40).item() == 2**40 and Tensor.full((2,), 2**40).numpy().tolist() == [2**40] * 2
  with pytest.raises(OverflowError, match="1099511627776 is out of range for int"): Tensor([1, 2]) + 2**40
  with pytest.raises(OverflowError, match="300 is out of range for uchar"): Tensor([300], dtype=dtypes.uint8)
  with pytest.raises(OverflowError, match="out of range"): Tensor.full((2,), 2**40, dtype=dtypes.int32)
  with pytest.raises(OverflowError, match="out of range"): Tensor([2**64])
  np.testing.assert_array_equal((Tensor([1., 2.]) + 2**40).numpy(), np.float32([1, 2]) + np.float32(2**40))  # floats hold it, rounded
  assert (Tensor([1, 2], dtype=dtypes.int64) + 2**40).numpy().tolist() == [2**40 + 1, 2**40 + 2]

@needs(dtypes.int64, why="the values pass int32")
def test_arange_far_past_int32_indexes_in_64_bits():
  np.testing.assert_array_equal(Tensor.arange(2**31 + 8, dtype=dtypes.int64)[-3:].numpy(), [2**31 + 5, 2**31 + 6, 2**31 + 7])

def test_kernels_differing_in_a_float_constant_share_one_program():
  from tg import realize
  base = np.arange(16, dtype=np.float32)
  t = Tensor(base).realize()
  before = set(realize._runners)  # keys, not a count: the bounded cache may drop old kernels meanwhile
  for c in (0.25, 0.3, 1.7, -2.5, 3.75, 1e-3, 0.3):  # the first compiles with c in the code, the second with c as an argument
    np.testing.assert_array_equal((t * c + 0.125).numpy(), base * np.float32(c) + np.float32(0.125))
  assert len(set(realize._runners) - before) == 2
  np.testing.assert_array_equal((t * 0.0 + 1.0).numpy(), np.ones(16, np.float32))  # folded constants stay in the code

def test_a_kernel_seen_again_with_its_constants_as_arguments_skips_lifting_them(monkeypatch):
  """An eager loop makes the same kernels with the same constants each time: the second time, the shared program and
  the constants' values come from a table, without rewriting the kernel again; the values stay right."""
  from tg import realize
  base = np.arange(16, dtype=np.float32)
  t = Tensor(base).realize()
  for c in (0.61, 0.62): (t * c).realize()  # the second constant compiles the program taking it as an argument
  lifts = []
  monkeypatch.setattr(realize, "lift_scalars", lambda ast: lifts.append(ast) or lift_scalars(ast))
  for _ in range(3): np.testing.assert_array_equal((t * 0.62).numpy(), base * np.float32(0.62))
  assert lifts == []
  np.testing.assert_array_equal((t * 0.63).numpy(), base * np.float32(0.63))  # a new constant is lifted once
  assert len(lifts) == 1

# ---------------- edges: pow, clamp, shifts, saturating activations (values numpy float64, gradients PyTorch's formulas) ----------------
POW_BASE = np.array([-8., -2., 0., -0., 1., -1., -np.inf, np.inf, np.nan, 2., -1., -np.inf, -np.inf, -0., -2., -0.5, 1., 0., 3., -3., 0., 0., 2.])
POW_EXP = np.array([1 / 3, .5, 0., -1., np.nan, np.inf, .5, -.5, 0., np.nan, -np.inf, 3., -.5, .5, np.inf, np.inf, -np.inf, -np.inf, 2.5, 3., .5, -1., 0.])

@ieee_math
def test_pow_special_values_match_np_power():
  with np.errstate(all="ignore"): ref = np.power(POW_BASE, POW_EXP)
  out = Tensor(POW_BASE.astype(np.float32)) ** Tensor(POW_EXP.astype(np.float32))
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)
  assert np.signbit(out.numpy()[3]) and out.numpy()[3] == -np.inf  # (-0.)**-1 is -inf

@ieee_math
@pytest.mark.parametrize("c", [0.5, 2, 3, -1, 0, 1, 1.5, -0.5, 2.0, 4, -3.0])
def test_pow_python_exponent_special_values(c):
  """Every shortcut for a Python exponent agrees with np.power of an array exponent ((-inf)**0.5 is inf, as C's pow)."""
  with np.errstate(all="ignore"): ref = np.power(POW_BASE, np.full_like(POW_BASE, c))
  np.testing.assert_allclose((Tensor(POW_BASE.astype(np.float32)) ** c).numpy(), ref, rtol=1e-6)

@ieee_math
def test_pow_gradients_are_pytorchs_formulas():
  b, e = POW_BASE[np.isfinite(POW_BASE) & np.isfinite(POW_EXP)], POW_EXP[np.isfinite(POW_BASE) & np.isfinite(POW_EXP)]
  with np.errstate(all="ignore"):
    gb = np.where(e == 0, 0, e * np.power(b, e - 1))
    ge = np.where((b == 0) & (e >= 0), 0, np.power(b, e) * np.log(b))
  tb, te = Tensor(b.astype(np.float32), requires_grad=True), Tensor(e.astype(np.float32), requires_grad=True)
  (tb ** te).sum().backward()
  np.testing.assert_allclose(tb.grad.numpy(), gb, rtol=1e-5)
  np.testing.assert_allclose(te.grad.numpy(), ge, rtol=1e-5)
  assert np.isnan(tb.grad.numpy()[:2]).all()  # a negative base to a fractional power: NaN value, NaN gradient

@pytest.mark.parametrize("c", [1.5, 0.5, -0.5, 2.5])
def test_pow_of_negative_base_fractional_scalar_is_nan_with_nan_gradient(c):
  x = Tensor([-2.0, -0.5, 4.0], requires_grad=True)
  out = x ** c
  out.sum().backward()
  assert np.isnan(out.numpy()[:2]).all() and np.isnan(x.grad.numpy()[:2]).all()
  np.testing.assert_allclose([out.numpy()[2], x.grad.numpy()[2]], [4.0 ** c, c * 4.0 ** (c - 1)], rtol=1e-6)

def test_pow_zero_to_zero_is_one_with_zero_gradient():
  x = Tensor([0.0, 2.0, -3.0], requires_grad=True)
  for out in (x ** 0, x ** 0.0, x ** Tensor([0.0, 0.0, 0.0])):
    np.testing.assert_array_equal(out.numpy(), [1, 1, 1])
    x.grad = None
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 0])

@ieee_math
def test_pow_integer_base_float_exponent_is_float():
  a = np.array([2, 3, 4, 0, 1], dtype=np.int32)
  for out, ref in [(Tensor(a) ** 0.5, np.power(a, 0.5)), (Tensor(a) ** 2.0, np.power(a, 2.0)), (Tensor(a) ** -1.5, None),
                   (Tensor(a) ** Tensor([0.5, -1.0, 1.5, 2.0, 3.0]), np.power(a, [0.5, -1.0, 1.5, 2.0, 3.0])), (2.5 ** Tensor(a), np.power(2.5, a))]:
    assert out.dtype == dtypes.float32
    with np.errstate(divide="ignore"): np.testing.assert_allclose(out.numpy(), np.power(a, -1.5) if ref is None else ref, rtol=1e-6)

@needs(dtypes.float64, why="integer ** integer computes through float64")
def test_pow_integer_negative_exponents():
  # integer tensors to negative integer powers, as PyTorch: 0 unless the base is 1 or -1
  out = Tensor([2, 1, -1, 0, 3, -1], dtype=dtypes.int32) ** Tensor([-1, -3, -3, -1, -2, -2], dtype=dtypes.int32)
  assert out.dtype == dtypes.int32 and out.tolist() == [0, 1, -1, 0, 0, 1]
  with pytest.raises(RuntimeError, match="negative integer powers"): Tensor([2, 3]) ** -1  # PyTorch's error

def test_clamp_passes_gradient_at_the_bounds():
  x = Tensor([-2.0, -1.0, 0.0, 1.0, 2.0, np.nan], requires_grad=True)
  out = x.clamp(-1.0, 1.0)
  np.testing.assert_array_equal(out.numpy(), [-1, -1, 0, 1, 1, np.nan])
  out.sum().backward()
  np.testing.assert_array_equal(x.grad.numpy()[:5], [0, 1, 1, 1, 0])
  x.grad = None
  x.clip(min_=0.0).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy()[:5], [0, 0, 1, 1, 1])
  x.grad = None
  x.clip(max_=0.0).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy()[:5], [1, 1, 1, 0, 0])

def test_clamp_tensor_bounds_gradient_and_min_above_max():
  x, lo, hi = (Tensor(v, requires_grad=True) for v in ([-1.0, 0.5, 3.0, 1.0], [0.0, 0.5, 0.0, 2.0], [2.0, 2.0, 2.0, 0.5]))
  out = x.clamp(lo, hi)
  np.testing.assert_array_equal(out.numpy(), np.minimum(np.maximum([-1.0, 0.5, 3.0, 1.0], [0.0, 0.5, 0.0, 2.0]), [2.0, 2.0, 2.0, 0.5]))
  out.sum().backward()
  # the value's own position gets the gradient (a tie with a bound included); min > max: max wins
  np.testing.assert_array_equal(x.grad.numpy(), [0, 1, 0, 0])
  np.testing.assert_array_equal(lo.grad.numpy(), [1, 0, 0, 0])
  np.testing.assert_array_equal(hi.grad.numpy(), [0, 0, 1, 1])

def test_hardtanh_and_relu6_pass_no_gradient_at_the_bounds():
  x = Tensor([-2.0, -1.0, 0.0, 1.0, 2.0, 6.0, 7.0], requires_grad=True)
  x.hardtanh().sum().backward()  # PyTorch's hardtanh_backward: strictly inside the bounds
  np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 1, 0, 0, 0, 0])
  x.grad = None
  out = x.relu6()
  np.testing.assert_array_equal(out.numpy(), [0, 0, 0, 1, 2, 6, 6])
  out.sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 0, 1, 1, 0, 0])

def test_maximum_minimum_tie_gradients_split_evenly():
  a, b = Tensor([1.0, 2.0, 3.0], requires_grad=True), Tensor([1.0, 1.0, 4.0], requires_grad=True)
  a.maximum(b).sum().backward()
  np.testing.assert_array_equal(a.grad.numpy(), [0.5, 1, 0])
  np.testing.assert_array_equal(b.grad.numpy(), [0.5, 0, 1])
  a.grad = b.grad = None
  a.minimum(b).sum().backward()
  np.testing.assert_array_equal(a.grad.numpy(), [0.5, 0, 1])
  np.testing.assert_array_equal(b.grad.numpy(), [0.5, 1, 0])

@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32])
def test_shift_by_the_width_or_more_or_negative(dtype):
  skip_refused(dtype)
  """As PyTorch: << gives 0, >> gives the sign (0 or -1), never the hardware's masked shift."""
  bits = 8 * np.dtype(dtype).itemsize
  a = np.array([1, 5, 100] if np.dtype(dtype).kind == "u" else [1, -5, 100], dtype=dtype)
  amounts = np.array([bits, bits + 3, 2 * bits] if np.dtype(dtype).kind == "u" else [bits, -1, bits + 3], dtype=dtype)
  sign = np.where(a < 0, -1, 0).astype(dtype)
  np.testing.assert_array_equal((Tensor(a) << Tensor(amounts)).numpy(), np.zeros(3, dtype))
  np.testing.assert_array_equal((Tensor(a) >> Tensor(amounts)).numpy(), sign)
  np.testing.assert_array_equal((Tensor(a) << bits).numpy(), np.zeros(3, dtype))
  np.testing.assert_array_equal((Tensor(a) >> (bits + 1)).numpy(), sign)
  if np.dtype(dtype).kind == "i": np.testing.assert_array_equal((Tensor(a) >> -2).numpy(), sign)
  ok = np.array([0, 1, bits - 1], dtype=dtype)  # in range: the plain shift
  np.testing.assert_array_equal((Tensor(a) << Tensor(ok)).numpy(), a << ok)
  np.testing.assert_array_equal((Tensor(a) >> Tensor(ok)).numpy(), a >> ok)

def test_reflected_shifts_and_their_errors():
  s = np.array([0, 1, 4, 31], dtype=np.int32)
  np.testing.assert_array_equal((1 << Tensor(s)).numpy(), 1 << s)
  np.testing.assert_array_equal((-256 >> Tensor(s)).numpy(), -256 >> s)
  np.testing.assert_array_equal(Tensor(s).lshift(3, reverse=True).numpy(), 3 << s)
  assert (1 << Tensor(s, dtype=dtypes.uint8)).dtype == dtypes.uint8
  for fn in (lambda: Tensor([1]) << 1.5, lambda: 2.0 << Tensor([1]), lambda: Tensor([1.0]) >> Tensor([1]), lambda: Tensor([1]) << Tensor([1.0])):
    with pytest.raises(RuntimeError, match="integer"): fn()

EDGE_X = np.array([-1e30, -1e10, -1e4, -100.0, -20.0, -3.0, -1e-3, -0.0, 0.0, 1e-3, 3.0, 20.0, 100.0, 1e4, 1e10, 1e30])
K_GELU = math.sqrt(2 / math.pi)
def sig64(x): return np.exp(-np.logaddexp(0, -x))
# name: (tg fn, value in float64, derivative in float64)
SATURATING = {
  "sigmoid": (lambda t: t.sigmoid(), sig64, lambda x: sig64(x) * sig64(-x)),
  "tanh": (lambda t: t.tanh(), np.tanh, lambda x: 1 - np.tanh(x) ** 2),
  "gelu_tanh": (lambda t: t.gelu(), lambda x: 0.5 * x * (1 + np.tanh(K_GELU * (x + 0.044715 * x ** 3))),
                lambda x: 0.5 * (1 + np.tanh(K_GELU * (x + 0.044715 * x ** 3)))
                + 0.5 * x * (1 - np.tanh(K_GELU * (x + 0.044715 * x ** 3)) ** 2) * K_GELU * (1 + 3 * 0.044715 * x ** 2)),
  "gelu_erf": (lambda t: t.gelu(approximate="none"), np_gelu_erf, lambda x: 0.5 * (1 + np_erf(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)),
  "quick_gelu": (lambda t: t.quick_gelu(), lambda x: x * sig64(1.702 * x), lambda x: sig64(1.702 * x) + 1.702 * x * sig64(1.702 * x) * sig64(-1.702 * x)),
  "silu": (lambda t: t.silu(), lambda x: x * sig64(x), lambda x: sig64(x) + x * sig64(x) * sig64(-x)),
  "erf": (lambda t: t.erf(), np_erf, lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x)),
}

@pytest.mark.parametrize("name", list(SATURATING))
def test_saturating_activations_far_out_are_exact_and_finite(name):
  tg_fn, f, df = SATURATING[name]
  x = Tensor(EDGE_X.astype(np.float32), requires_grad=True)
  out = tg_fn(x)
  out.sum().backward()
  with np.errstate(all="ignore"): ref, dref = f(EDGE_X), np.nan_to_num(df(EDGE_X))  # 0 * inf in the float64 formula is a true 0
  assert np.isfinite(out.numpy()).all() and np.isfinite(x.grad.numpy()).all()
  np.testing.assert_allclose(out.numpy(), ref, rtol=2e-6, atol=1e-6)
  np.testing.assert_allclose(x.grad.numpy(), dref, rtol=2e-6, atol=1e-6)

@ieee_math
def test_tanh_keeps_the_sign_of_zero_and_is_accurate_near_zero():
  x = np.array([-0.0, 0.0, 1e-30, -1e-8, 1e-4, -0.02], dtype=np.float32)
  out = Tensor(x).tanh().numpy()
  np.testing.assert_array_equal(np.signbit(out[:2]), [True, False])
  np.testing.assert_allclose(out, np.tanh(x.astype(np.float64)), rtol=1e-6)

def test_gelu_rejects_an_unknown_approximation():
  with pytest.raises(RuntimeError, match="approximate"): Tensor([1.0]).gelu(approximate="erf")

def test_backward_through_comparisons_and_where_conditions():
  x = Tensor([-2.0, 0.5, 3.0], requires_grad=True)
  y = Tensor([1.0, 1.0, 1.0], requires_grad=True)
  out = (x > y).where(x * 2, y * 3) + (x < 0).cast(dtypes.float32) * x + (x == y).cast(dtypes.float32)
  out.sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [1, 0, 2])
  np.testing.assert_array_equal(y.grad.numpy(), [3, 3, 0])
  z = Tensor([1.0, 2.0], requires_grad=True)
  (z > 1).cast(dtypes.float32).sum().backward()  # a graph holding only comparisons: gradient 0, no error
  np.testing.assert_array_equal(z.grad.numpy(), [0, 0])

def test_hardsigmoid_hardswish_gradients_at_the_kinks_are_pytorchs():
  x = Tensor([-4.0, -3.0, 0.0, 3.0, 4.0], requires_grad=True)
  x.hardsigmoid().sum().backward()  # 1/6 strictly inside (-3, 3)
  np.testing.assert_allclose(x.grad.numpy(), [0, 0, 1 / 6, 0, 0], rtol=1e-6)
  x.grad = None
  x.hardswish().sum().backward()  # 0 below -3, x/3 + 0.5 on [-3, 3], 1 above
  np.testing.assert_allclose(x.grad.numpy(), [0, -0.5, 0.5, 1.5, 1], rtol=1e-6)
