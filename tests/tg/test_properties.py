"""Property tests of whole Tensor programs against numpy: random movement-op chains (every pad mode, strided and
single-element picks, cat, roll) must read exactly the elements numpy reads, and random elementwise + reduce
expressions in float64 must agree with numpy to rounding."""
import numpy as np
from hypothesis import given, settings, strategies as st
from ir.dtype import dtypes
from ir.helpers import prod
from tg import Tensor

NP_PAD_MODE = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}

@st.composite
def movement(draw, shape: tuple[int, ...]):
  """One movement op valid for `shape`, as (name, argument)."""
  ops = ["reshape", "permute", "shrink", "flip", "slice", "cat", "roll", "expand"]
  if shape: ops += ["pick", "pad"]
  op = draw(st.sampled_from(ops))
  size = prod(shape)
  if op == "reshape":
    dims = []
    for _ in range(draw(st.integers(0, 3))):
      d = draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0] or [0]))
      dims.append(d)
      size = size // d if d else 0
    if size != 1 or not dims: dims.append(size)
    return op, tuple(dims)
  if op == "permute": return op, tuple(draw(st.permutations(range(len(shape)))))
  if op == "pad":
    mode = draw(st.sampled_from(list(NP_PAD_MODE)))
    limit = {"constant": lambda s: 2, "reflect": lambda s: min(s - 1, 2), "replicate": lambda s: 2 if s else 0, "circular": lambda s: min(s, 2)}[mode]
    return op, (mode, tuple((draw(st.integers(0, max(limit(s), 0))), draw(st.integers(0, max(limit(s), 0)))) for s in shape))
  if op == "shrink":
    ranges = []
    for s in shape:
      lo = draw(st.integers(0, s))
      ranges.append((lo, draw(st.integers(lo, s))))
    return op, tuple(ranges)
  if op == "flip": return op, tuple(i for i in range(len(shape)) if draw(st.booleans()))
  if op == "slice":
    return op, tuple(slice(draw(st.integers(-s - 1, s + 1)) if s else None, draw(st.one_of(st.none(), st.integers(-s - 1, s + 1))),
                           draw(st.sampled_from([1, 2, 3, -1, -2]))) for s in shape)
  if op == "cat": return op, (draw(st.integers(0, len(shape) - 1)) if shape else None, draw(st.integers(0, 2)))
  if op == "roll": return op, (draw(st.integers(-5, 5)), draw(st.integers(0, len(shape) - 1)) if shape else None)
  if op == "expand": return op, tuple(draw(st.integers(1, 3)) if s == 1 else s for s in shape)
  return op, tuple(draw(st.integers(-s, s - 1)) if s and draw(st.booleans()) else slice(None) for s in shape)

def apply(x, op: str, arg, is_np: bool):
  """`op` on a numpy array or a Tensor, written so both sides say the same thing in their own API."""
  if op == "reshape": return x.reshape(arg)
  if op == "permute": return x.transpose(arg) if is_np else x.permute(arg)
  if op == "pad": return np.pad(x, arg[1], mode=NP_PAD_MODE[arg[0]]) if is_np else x.pad(arg[1], mode=arg[0])
  if op == "shrink": return x[tuple(slice(lo, hi) for lo, hi in arg)] if is_np else x.shrink(arg)
  if op == "flip": return (np.flip(x, arg) if is_np else x.flip(arg)) if arg else x
  if op in ("slice", "pick"): return x[arg]
  if op == "expand": return np.broadcast_to(x, arg) if is_np else x.expand(arg)
  if op == "roll":
    shift, axis = arg
    if axis is None: return x
    return np.roll(x, shift, axis) if is_np else x.roll(shift, axis)
  axis, extra = arg  # cat with a slice of itself along `axis`
  if axis is None: return x
  part = x[tuple(slice(0, extra) if i == axis else slice(None) for i in range(x.ndim))]
  return np.concatenate([x, part], axis) if is_np else x.cat(part, dim=axis)

@st.composite
def movement_chain(draw):
  shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=3)))
  ops, cur = [], np.zeros(shape)
  for _ in range(draw(st.integers(1, 5))):
    op, arg = draw(movement(cur.shape))
    nxt = apply(cur, op, arg, True)
    if nxt.size > 512: break
    ops.append((op, arg)); cur = nxt
  return shape, ops

@settings(max_examples=400, deadline=None)
@given(movement_chain())
def test_movement_chains_read_what_numpy_reads(case):
  shape, ops = case
  a = np.arange(1, prod(shape) + 1, dtype=np.float32).reshape(shape)  # distinct nonzero values: a wrong read shows
  ref, t = a, Tensor(a)
  for op, arg in ops: ref, t = apply(ref, op, arg, True), apply(t, op, arg, False)
  np.testing.assert_array_equal((t * 1).numpy(), ref, err_msg=f"{shape} {ops}")
  np.testing.assert_array_equal(t.contiguous().numpy(), ref, err_msg=f"{shape} {ops}")

class IllConditioned(Exception):
  """The expression's value moves by more than the tolerance under a rounding of its argument."""

def np_sin(x):
  # |x| up to e**(e**(e**2)): an argument 1e-13 off (a few float64 roundings through exps) moves sin by up to 1e-13 * |x|
  if np.max(np.abs(x)) > 1e3: raise IllConditioned
  return np.sin(x)

UNARY = {"neg": (lambda x: -x, lambda x: -x), "exp": (lambda x: x.exp(), np.exp), "log1p_abs": (lambda x: (x.abs() + 1).log(), lambda x: np.log(np.abs(x) + 1)),
         "sqrt_abs": (lambda x: x.abs().sqrt(), lambda x: np.sqrt(np.abs(x))), "sin": (lambda x: x.sin(), np_sin),
         "relu": (lambda x: x.relu(), lambda x: np.maximum(x, 0)), "sigmoid": (lambda x: x.sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
         "tanh": (lambda x: x.tanh(), np.tanh), "square": (lambda x: x * x, lambda x: x * x)}
BINARY = {"add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract), "mul": (lambda a, b: a * b, np.multiply),
          "div": (lambda a, b: a / (b.abs() + 1), lambda a, b: a / (np.abs(b) + 1)), "max": (lambda a, b: a.maximum(b), np.maximum),
          "min": (lambda a, b: a.minimum(b), np.minimum), "where": (lambda a, b: (a > b).where(a, b * 2), lambda a, b: np.where(a > b, a, b * 2))}
REDUCE = {"sum": (lambda x, ax: x.sum(ax, keepdim=True), lambda x, ax: x.sum(ax, keepdims=True)),
          "max": (lambda x, ax: x.max(ax, keepdim=True), lambda x, ax: x.max(ax, keepdims=True)),
          "mean": (lambda x, ax: x.mean(ax, keepdim=True), lambda x, ax: x.mean(ax, keepdims=True))}

@st.composite
def expression(draw, depth: int = 0):
  """A random expression tree over inputs 0 and 1 (both of shape (3, 4)); results keep the ndim, so broadcasting
  between a reduced and an unreduced operand happens naturally."""
  kind = draw(st.sampled_from(["input"] if depth >= 4 else ["input", "unary", "binary", "binary", "reduce"]))
  if kind == "input": return ("input", draw(st.integers(0, 1)))
  if kind == "unary": return ("unary", draw(st.sampled_from(sorted(UNARY))), draw(expression(depth + 1)))
  if kind == "binary": return ("binary", draw(st.sampled_from(sorted(BINARY))), draw(expression(depth + 1)), draw(expression(depth + 1)))
  return ("reduce", draw(st.sampled_from(sorted(REDUCE))), draw(st.sampled_from([0, 1])), draw(expression(depth + 1)))

def evaluate(expr, inputs, side: int):
  """side 0: tg, side 1: numpy."""
  if expr[0] == "input": return inputs[expr[1]]
  if expr[0] == "unary": return UNARY[expr[1]][side](evaluate(expr[2], inputs, side))
  if expr[0] == "binary": return BINARY[expr[1]][side](evaluate(expr[2], inputs, side), evaluate(expr[3], inputs, side))
  return REDUCE[expr[1]][side](evaluate(expr[3], inputs, side), expr[2])

@settings(max_examples=200, deadline=None)
@given(expression(), st.integers(0, 2**16))
def test_elementwise_and_reduce_expressions_match_numpy_in_float64(expr, seed):
  rng = np.random.default_rng(seed)
  arrays = [rng.uniform(-2, 2, size=(3, 4)) for _ in range(2)]
  try:
    with np.errstate(over="ignore"): ref = np.asarray(evaluate(expr, arrays, 1), dtype=np.float64)
  except IllConditioned: return  # sin of e**(e**x): the roundings on the way decide its value; nothing to compare
  if not np.all(np.isfinite(ref)): return  # exp of exp overflows on both sides; nothing to compare
  got = evaluate(expr, [Tensor(a, dtype=dtypes.float64) for a in arrays], 0)
  if not isinstance(got, Tensor): got = Tensor(got, dtype=dtypes.float64)
  np.testing.assert_allclose(got.numpy(), np.broadcast_to(ref, got.shape), rtol=1e-9, atol=1e-12, err_msg=repr(expr))
