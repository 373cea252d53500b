"""Variables as symbolic sizes: `t[:Variable("i", 1, 10).bind(n)]`, reshape and shrink by a bound Variable, compared
against numpy for several values; one compiled kernel serves every value; errors name the problem."""
import numpy as np
import pytest
from tg import Tensor, Variable, Device
from tg import realize
from codegen.program import get_program
from codegen.python_renderer import PythonRenderer
from ir.ops import Ops
from ir.shapetracker import ShapeTracker
from ir.uop import UOp, sym_infer

A = np.random.default_rng(0).standard_normal((3, 10)).astype(np.float32)
B = np.random.default_rng(1).standard_normal((10, 5)).astype(np.float32)
VALUES = (1, 4, 10)

@pytest.fixture
def compiled(monkeypatch):
  """The kernel ASTs compiled while a test runs."""
  asts: list[UOp] = []
  init = realize.CompiledRunner.__init__
  def counting(self, device, ast):
    asts.append(ast)
    init(self, device, ast)
  monkeypatch.setattr(realize.CompiledRunner, "__init__", counting)
  return asts

def test_a_slice_by_a_bound_variable_has_the_variable_as_its_size():
  v = Variable("i", 1, 10).bind(3)
  x = Tensor.ones(10).contiguous()[:v]
  assert x.shape == (v,) and x.shape[0].op is Ops.BIND
  assert Tensor.ones(10).contiguous().shrink(((0, v),)).shape == (v,)
  np.testing.assert_equal(x.numpy(), np.ones(3))

@pytest.mark.parametrize("n", VALUES)
def test_documented_examples_match_numpy(n):
  v = Variable("i", 1, 10).bind(n)
  np.testing.assert_equal(Tensor.ones(10).contiguous()[:v].numpy(), np.ones(n))
  np.testing.assert_equal(Tensor.ones(10).contiguous().shrink(((0, v),)).sum().item(), n)
  np.testing.assert_equal(Tensor.arange(30)[:v * 3].reshape(v, 3).numpy(), np.arange(3 * n).reshape(n, 3))
  np.testing.assert_equal(Tensor.arange(30).shrink(((0, v * 3),)).reshape(v, 3).sum(0).numpy(), np.arange(3 * n).reshape(n, 3).sum(0))

@pytest.mark.parametrize("n", VALUES)
def test_ops_on_a_symbolic_axis_match_numpy(n):
  a, b = Tensor(A), Tensor(B)
  v = Variable("i", 1, 10).bind(n)
  x, ref = a[:, :v], A[:, :n]
  np.testing.assert_allclose((x * 2 + 1).numpy(), ref * 2 + 1, rtol=1e-6)
  np.testing.assert_allclose(x.sum(1).numpy(), ref.sum(1), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(x.sum().numpy(), ref.sum(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(x.max(1).numpy(), ref.max(1))
  np.testing.assert_allclose(x.mean().item(), ref.mean(), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose((x @ b[:v]).numpy(), ref @ B[:n], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(x.T.contiguous().numpy(), ref.T)
  np.testing.assert_allclose(x.reshape(3, 1, v).expand(3, 2, v).sum(1).numpy(), ref * 2, rtol=1e-6)
  np.testing.assert_allclose((x + 1).pad((None, (0, 10 - x.shape[1]))).numpy(), np.pad(ref + 1, ((0, 0), (0, 10 - n))), rtol=1e-6)
  np.testing.assert_allclose(x.cat(a[:, :2], dim=1).numpy(), np.concatenate([ref, A[:, :2]], 1))
  np.testing.assert_allclose(x[:, -1].numpy(), ref[:, -1])
  np.testing.assert_allclose((x * v).numpy(), ref * n, rtol=1e-6)

def test_two_variables():
  a = Tensor(A)
  for n, m in ((1, 2), (3, 7), (2, 10)):
    x = a[:Variable("r", 1, 3).bind(n), :Variable("c", 1, 10).bind(m)]
    np.testing.assert_allclose((x + 1).numpy(), A[:n, :m] + 1, rtol=1e-6)
    np.testing.assert_allclose(x.sum(0).numpy(), A[:n, :m].sum(0), rtol=1e-5, atol=1e-6)

def test_one_kernel_serves_every_value(compiled):
  a, b = Tensor(A).realize(), Tensor(B).realize()
  def run(n):
    x = a[:, :Variable("i", 1, 10).bind(n)]
    return [(x * 3 + 1).numpy(), x.sum(1).numpy(), (x @ b[:Variable("i", 1, 10).bind(n)]).numpy()]
  run(2)
  assert compiled, "the first value compiles the kernels"
  compiled.clear()
  for n in (3, 7, 10):
    got = run(n)
    np.testing.assert_allclose(got[0], A[:, :n] * 3 + 1, rtol=1e-6)
    np.testing.assert_allclose(got[1], A[:, :n].sum(1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], A[:, :n] @ B[:n], rtol=1e-5, atol=1e-5)
  assert compiled == [], "other values reuse the compiled kernels"

def test_kernels_take_the_variable_and_keep_their_launch_size():
  a = Tensor(A).realize()
  items = [(a[:, :Variable("i", 1, 10).bind(n)] * 2).schedule() for n in (2, 5)]
  (first,), (second,) = items
  assert first.ast is second.ast, "the kernel AST doesn't depend on the value"
  assert (first.var_vals, second.var_vals) == ({"i": 2}, {"i": 5})
  spec = get_program(first.ast, PythonRenderer())
  assert [v.arg[0] for v in spec.vars] == ["i"]
  assert all(isinstance(s, int) for s in spec.global_size), "launched over the Variable's largest value; an IF skips the rest"
  assert any(u.op is Ops.IF for u in spec.uops)

def test_float_constants_as_arguments_with_a_symbolic_size():
  a = Tensor(A)
  for c, n in ((2.5, 3), (3.5, 6), (0.25, 9)):  # from the second constant on, one program takes it as an argument
    np.testing.assert_allclose((a[:, :Variable("i", 1, 10).bind(n)] * c).numpy(), A[:, :n] * np.float32(c), rtol=1e-6)

def test_symbolic_views_index_like_numpy():
  i = UOp.variable("i", 1, 6)
  base = np.arange(48).reshape(6, 8)
  cases = [(ShapeTracker.from_shape((6, 8)).shrink(((0, i), (2, 7))), lambda n: base[:n, 2:7]),
           (ShapeTracker.from_shape((48,)).shrink(((0, i * 8),)).reshape((i, 2, 4)), lambda n: base[:n].reshape(n, 2, 4)),
           (ShapeTracker.from_shape((6, 8)).shrink(((0, i), (0, 3))).permute((1, 0)).reshape((3 * i,)), lambda n: base[:n, :3].T.reshape(-1)),
           (ShapeTracker.from_shape((6, 8)).shrink(((0, i), (0, 8))).pad(((0, 6 - i), (1, 0))), lambda n: np.pad(base[:n], ((0, 6 - n), (1, 0)), constant_values=-1))]
  for st, expected in cases:
    idxs = [UOp.variable(f"x{d}", 0, 100) for d in range(len(st.shape))]
    idx, valid = st.to_uops(idxs)
    for n in (1, 4, 6):
      ref = expected(n)
      assert tuple(sym_infer(s, {"i": n}) if isinstance(s, UOp) else s for s in st.shape) == ref.shape
      for pos in np.ndindex(*ref.shape):
        point = {"i": n, **{f"x{d}": p for d, p in enumerate(pos)}}
        assert (sym_infer(idx, point) if sym_infer(valid, point) else -1) == ref[pos]

def test_a_contiguous_symbolic_reshape_is_one_view():
  i = UOp.variable("i", 1, 6)
  assert len(ShapeTracker.from_shape((48,)).shrink(((0, i * 8),)).reshape((i, 2, 4)).views) == 1
  assert len(ShapeTracker.from_shape((6, 8)).shrink(((0, i), (0, 8))).reshape((i, 2, 4)).views) == 1, "the symbolic axis carries over whole"

def test_errors_name_the_problem():
  v = Variable("i", 1, 10)
  with pytest.raises(ValueError, match="outside the range"): v.bind(11)
  with pytest.raises(ValueError, match="invalid shrink"): Tensor.ones(3).contiguous()[:v.bind(2)]  # 10 could reach past 3
  ones = Tensor.ones(10).contiguous()
  with pytest.raises(ValueError, match="bound to both 2 and 3"): (ones[:v.bind(2)].sum() + ones[:v.bind(3)].sum()).item()
  with pytest.raises(ValueError, match="two Variables named 'i'"): (ones[:v.bind(2)].sum() + ones[:Variable("i", 1, 9).bind(2)].sum()).item()
  with pytest.raises(ValueError, match="not bound"): ones[:v].numpy()
  x = ones[:v.bind(4)]
  with pytest.raises(ValueError, match="can't reshape"): x.reshape(4)
  with pytest.raises(IndexError, match="step 1"): ones[:v.bind(4):2]
  with pytest.raises(NotImplementedError, match="reflect"): x.pad(((1, 1),), mode="reflect")
  with pytest.raises(TypeError, match="symbolic"): len(x)
  with pytest.raises(TypeError, match="depends on the values"): bool(x.shape[0] < 4)
  assert bool(x.shape[0] < 11), "a comparison the Variable's range decides is a plain bool"
  other = "PYTHON" if Device.DEFAULT != "PYTHON" else "CPU"
  with pytest.raises(NotImplementedError, match="symbolic shape"): x.to(other).realize()
