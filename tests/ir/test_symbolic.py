"""Property tests: symbolic simplification never changes the value of an integer expression."""
from hypothesis import given, settings, strategies as st
from ir.dtype import dtypes
from ir.symbolic import simplify
from ir.uop import UOp, sym_infer

VARS = [("a", 0, 12), ("b", 0, 7), ("c", -5, 9)]

@st.composite
def expr(draw, depth=4):
  if depth == 0 or draw(st.integers(0, 4)) == 0:
    if draw(st.booleans()): return UOp.variable(*draw(st.sampled_from(VARS)))
    return UOp.const(dtypes.int32, draw(st.integers(-10, 20)))
  a = draw(expr(depth - 1))
  kind = draw(st.sampled_from(["add", "sub", "mul", "div", "mod", "max", "where", "neg"]))
  if kind == "add": return a + draw(expr(depth - 1))
  if kind == "sub": return a - draw(expr(depth - 1))
  if kind == "mul": return a * draw(st.integers(-4, 6))
  if kind == "div": return a // draw(st.integers(1, 9))
  if kind == "mod": return a % draw(st.integers(1, 9))
  if kind == "max": return a.maximum(draw(expr(depth - 1)))
  if kind == "neg": return -a
  return (a < draw(st.integers(-5, 30))).where(a, draw(expr(depth - 1)))

values = st.fixed_dictionaries({n: st.integers(lo, hi) for n, lo, hi in VARS})

@settings(max_examples=400, deadline=None)
@given(expr(), st.lists(values, min_size=1, max_size=6))
def test_simplify_preserves_value(e, points):
  s = simplify(e)
  for p in points: assert sym_infer(s, p) == sym_infer(e, p), (e, s, p)

@settings(max_examples=200, deadline=None)
@given(expr(), st.lists(values, min_size=1, max_size=6))
def test_bounds_contain_every_value(e, points):
  for p in points: assert e.vmin <= sym_infer(e, p) <= e.vmax

@settings(max_examples=200, deadline=None)
@given(expr(), st.integers(-20, 40), st.lists(values, min_size=1, max_size=6))
def test_comparisons_preserve_value(e, c, points):
  cmp = e < c
  s = simplify(cmp)
  for p in points: assert sym_infer(s, p) == sym_infer(cmp, p)

def test_known_folds():
  a, b = UOp.variable("a", 0, 10), UOp.variable("b", 0, 3)
  assert simplify((a * 4 + b) // 4) is a
  assert simplify((a * 4 + b) % 4) is b
  assert simplify((a // 4) * 4 + a % 4) is a
  assert simplify(a * 4 + b < 8) is simplify(a < 2)
  assert simplify(a + 3 - a).arg == 3
  assert simplify((a % 16) // 4) is simplify((a // 4) % 4)
  assert simplify(b < 4).arg is True and simplify(b // 4).arg == 0
  assert simplify(a * 2 + a * 3) is simplify(a * 5)
