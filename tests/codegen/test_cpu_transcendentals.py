"""The CPU's float32 exp2, log2 and sin (codegen/exp2_log2.py, codegen/sine.py, rendered by codegen/llvmir.py): exp2
and log2 within 1 ulp of the exact value (float64 numpy, itself far more precise) over their whole range, denormals
included, sin within 2 ulp up to |x| = 2**20 and libm's beyond; C's results for the special values; vector code
rather than a libm call per lane."""
import re
import numpy as np
import pytest
from tg import Device, Tensor, dtypes
from ir.ops import Ops
from codegen.llvmir import LLVMRenderer
from codegen.program import get_program
from codegen.sine import SIN_POLY_MAX

pytestmark = pytest.mark.skipif(not isinstance(Device["CPU"].renderer, LLVMRenderer), reason="the LLVM renderer's CPU code")

def ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
  """|got - exact| in units of the float32 spacing at the exact value (2**-149 for denormals)."""
  return np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(exact.astype(np.float32))).astype(np.float64)

def cpu(x: np.ndarray, op: str) -> np.ndarray: return getattr(Tensor(x, device="CPU"), op)().numpy()

def test_exp2_is_within_an_ulp_from_denormal_results_to_overflow():
  rng = np.random.default_rng(1)
  x = np.concatenate([rng.uniform(-151, 128, 400_000), rng.uniform(-0.5, 0.5, 100_000), rng.uniform(-150.5, -125, 100_000),
                      rng.uniform(127, 128, 50_000), np.arange(-149, 128)]).astype(np.float32)
  got, exact = cpu(x, "exp2"), np.exp2(x.astype(np.float64))
  finite = exact < np.finfo(np.float32).max
  assert ulps(got[finite], exact[finite]).max() <= 1
  assert (got[:-277][~finite[:-277]] == np.inf).all()
  assert (got[-277:] == np.exp2(np.arange(-149, 128, dtype=np.float64)).astype(np.float32)).all()  # powers of two exactly

def test_exp2_special_values():
  x = np.array([np.inf, -np.inf, np.nan, 128, 200, -150, -151, -1000, 0, -0.0], np.float32)
  got = cpu(x, "exp2")
  assert got[0] == np.inf and got[1] == 0 and np.isnan(got[2]) and (got[3:5] == np.inf).all()
  assert (got[5:8] == 0).all() and (got[8:] == 1).all()

def test_log2_is_within_an_ulp_for_every_exponent_and_near_one():
  rng = np.random.default_rng(2)
  positive = rng.integers(1, 0x7F800000, 800_000, dtype=np.int64).astype(np.uint32).view(np.float32)  # denormals too
  x = np.concatenate([positive, (1 + rng.uniform(-1e-3, 1e-3, 200_000)).astype(np.float32)])
  assert ulps(cpu(x, "log2"), np.log2(x.astype(np.float64))).max() <= 1
  powers = np.exp2(np.arange(-149, 128, dtype=np.float64)).astype(np.float32)
  assert (cpu(powers, "log2") == np.arange(-149, 128)).all()

def test_log2_special_values_as_c():
  got = cpu(np.array([0, -0.0, np.inf, -np.inf, -1, -1e-40, np.nan, 1], np.float32), "log2")
  assert (got[:2] == -np.inf).all() and got[2] == np.inf and np.isnan(got[3:7]).all() and got[7] == 0

@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.bfloat16])
def test_narrow_floats_go_through_float32(dtype):
  x = np.linspace(-14, 15, 4001, dtype=np.float32)  # normal half results
  ex = Tensor(x, device="CPU").cast(dtype).exp2().cast(dtypes.float32).numpy()
  lg = Tensor(np.abs(x) + 1e-3, device="CPU").cast(dtype).log2().cast(dtypes.float32).numpy()
  rel = 2.0 ** -(11 if dtype == dtypes.float16 else 8)  # an ulp of the narrow type (its rounding of input and output)
  xin = Tensor(x, device="CPU").cast(dtype).cast(dtypes.float32).numpy().astype(np.float64)
  np.testing.assert_allclose(ex, np.exp2(xin), rtol=rel)
  yin = Tensor(np.abs(x) + 1e-3, device="CPU").cast(dtype).cast(dtypes.float32).numpy().astype(np.float64)
  np.testing.assert_allclose(lg, np.log2(yin), rtol=rel, atol=rel)

def test_float32_code_calls_no_library_function_and_float64_keeps_libm():
  """LLVM turns llvm.exp2/llvm.log2 on float vectors into a libm call per lane; double precision keeps them (libm's exp2
  and log2 are correctly rounded there, and no float64 polynomial is written here). sin keeps libm for far lanes only."""
  for dtype, want in ((dtypes.float32, False), (dtypes.float64, True)):
    x = Tensor.empty(4096, dtype=dtype, device="CPU")
    for op, name in ((x.exp2(), "exp2"), (x.log2(), "log2")):
      (item,) = [i for i in op.schedule() if i.ast.op is Ops.SINK]
      src = get_program(item.ast, Device["CPU"].renderer).src
      assert (f"@llvm.{name}." in src) is want, src
  (item,) = [i for i in Tensor.empty(4096, device="CPU").sin().schedule() if i.ast.op is Ops.SINK]
  src = get_program(item.ast, Device["CPU"].renderer).src
  libm_block = re.search(r"\nsin_libm\d+:\n(.*?)\nsin_done\d+:", src, re.S)
  assert libm_block and len(re.findall(r"call .*@llvm\.sin\.", src)) == 1 and "@llvm.sin." in libm_block.group(1), src

def test_sin_is_within_two_ulps_up_to_its_bound_near_multiples_of_pi_too():
  """Where sin x is near 0 the reduction x - n pi/2 must keep pi/2 to far more than 53 bits: with parts of math.pi/2
  these came back 15 ulp off by |x| = 1e4."""
  rng = np.random.default_rng(3)
  near_roots = (np.arange(1, 300_000) * np.pi).astype(np.float32)  # the float32 nearest k pi: |sin| down to 1e-8
  x = np.concatenate([rng.uniform(-SIN_POLY_MAX, SIN_POLY_MAX, 300_000), rng.uniform(-4, 4, 100_000), 10.0 ** rng.uniform(-30, -1, 10_000),
                      near_roots[near_roots < SIN_POLY_MAX]]).astype(np.float32)
  assert ulps(cpu(x, "sin"), np.sin(x.astype(np.float64))).max() <= 2

def test_sin_beyond_the_bound_takes_libm_in_those_lanes_only():
  rng = np.random.default_rng(4)
  far = (10.0 ** rng.uniform(6.1, 38, 4096) * rng.choice([-1, 1], 4096)).astype(np.float32)
  x = np.where(np.arange(4096) % 16 == 3, far, rng.uniform(-10, 10, 4096)).astype(np.float32)  # one far lane per vector
  assert ulps(cpu(x, "sin"), np.sin(x.astype(np.float64))).max() <= 1.5
  got = cpu(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40], np.float32), "sin")
  assert got[0] == 0 and np.signbit(got[1]) and np.isnan(got[2:5]).all() and got[5] == np.float32(1e-40)
