import pickle, weakref, gc
import pytest
from ir.dtype import dtypes
from ir.ops import Ops
from ir.pattern import PatternMatcher, UPat, graph_rewrite, RewriteLimitError
from ir.uop import UOp

def test_hash_consing_and_immutability():
  a, b = UOp.variable("a", 0, 10), UOp.variable("b", 0, 10)
  assert (a + b) is (a + b) and (a + b) is not (b + a)
  assert UOp.const(dtypes.float, 0.0) is not UOp.const(dtypes.float, -0.0)
  assert UOp.const(dtypes.float, 1) is UOp.const(dtypes.float, 1.0)
  with pytest.raises(AttributeError): (a + b).op = Ops.MUL  # type: ignore[misc]
  assert pickle.loads(pickle.dumps(a * 3 + b)) is a * 3 + b

def test_unreferenced_uops_are_released():
  ref = weakref.ref(UOp.variable("tmp_var", 0, 4) * 7)
  gc.collect()
  assert ref() is None

def test_toposort_orders_sources_first():
  a = UOp.variable("a", 0, 10)
  e = (a + 1) * (a + 1)
  order = e.toposort()
  assert order[-1] is e and order.index(a) < order.index(a + 1) < order.index(e) and len(order) == 4

def test_const_folding_at_construction():
  assert (UOp.const(dtypes.int32, 7) // 2).arg == 3 and (UOp.const(dtypes.int32, -7) // 2).arg == -3  # C division truncates
  assert (UOp.const(dtypes.uint8, 250) + 10).arg == 4

def test_upat_commutative_and_named():
  x = UOp.variable("x", 0, 9)
  pat = UPat.var("v") + UPat.cvar("c")
  assert pat.match(x + 3, {})[0]["c"].arg == 3
  assert pat.match(UOp.const(dtypes.int32, 3) + x, {})[0]["v"] is x
  assert UPat(Ops.ADD, src=(UPat.var("v"), UPat.cvar("c"))).match(UOp.const(dtypes.int32, 3) + x, {}) == []
  same = UPat(Ops.MUL, src=(UPat.var("y"), UPat.var("y")))
  assert same.match(x * x, {}) and not same.match(x * (x + 1), {})

def test_graph_rewrite_reaches_fixed_point():
  # x*2 -> x+x, then x+x -> (x<<1): both rules must apply, bottom-up, to every node
  pm = PatternMatcher([
    (UPat.var("x") * 2, lambda x: x + x),
    (UPat(Ops.ADD, src=(UPat.var("x"), UPat.var("x"))), lambda x: x << 1)])
  a = UOp.variable("a", 0, 10)
  out = graph_rewrite((a * 2) * 2 + 5, pm)
  assert out is ((a << 1) << 1) + 5

def test_graph_rewrite_with_ctx_and_deep_graph():
  seen = []
  pm = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda ctx, v: seen.append(v.arg[0]) or None)])
  x = UOp.variable("a", 0, 10)
  for _ in range(5000): x = x + 1  # deeper than Python's recursion limit
  graph_rewrite(x, pm, ctx=seen)
  assert seen == ["a"]

def test_graph_rewrite_loop_is_detected():
  a = UOp.variable("a", 0, 10)
  pm = PatternMatcher([(UPat(Ops.ADD, name="x"), lambda x: x.src[1] + x.src[0])])
  with pytest.raises(RewriteLimitError): graph_rewrite(a + 1, pm, limit=1000)

def test_tensor_level_shapes_and_errors():
  buf_uop = UOp.const(dtypes.float, 1.0, "CPU").reshape((1, 1)).expand((4, 6))
  assert buf_uop.shape == (4, 6) and buf_uop.device == "CPU"
  assert buf_uop.permute((1, 0)).shape == (6, 4) and buf_uop.pad(((1, 0), (0, 2))).shape == (5, 8)
  assert buf_uop.shrink(((1, 3), (0, 6))).shape == (2, 6) and buf_uop.r(Ops.ADD, (1,)).shape == (4, 1)
  with pytest.raises(ValueError, match=r"\(4, 6\)"): buf_uop.reshape((5, 5))
  with pytest.raises(ValueError): buf_uop.permute((0, 0))
  with pytest.raises(ValueError): buf_uop.expand((4, 7))
  with pytest.raises(ValueError): buf_uop.shrink(((0, 5), (0, 6)))
  assert buf_uop.reshape((4, 6)) is buf_uop and buf_uop.permute((0, 1)) is buf_uop
