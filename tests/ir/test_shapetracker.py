"""Every movement op on a ShapeTracker indexes the same elements numpy's equivalent does."""
import itertools
import numpy as np
from hypothesis import given, settings, strategies as st
from ir.helpers import prod
from ir.shapetracker import ShapeTracker, View
from ir.symbolic import simplify
from ir.uop import UOp, sym_infer

PAD_VALUE = -1

def apply_numpy(a, op, arg):
  if op == "reshape": return a.reshape(arg)
  if op == "permute": return a.transpose(arg)
  if op == "expand": return np.broadcast_to(a, arg)
  if op == "pad": return np.pad(a, arg, constant_values=PAD_VALUE)
  if op == "shrink": return a[tuple(slice(lo, hi) for lo, hi in arg)]
  return np.flip(a, [i for i, f in enumerate(arg) if f]) if any(arg) else a

@st.composite
def movement(draw, shape):
  op = draw(st.sampled_from(["reshape", "permute", "expand", "pad", "shrink", "flip"]))
  if op == "reshape":
    size, dims = prod(shape), []
    for _ in range(draw(st.integers(1, 3))):
      d = draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0]))
      dims.append(d); size //= d
    return op, tuple(dims[:-1]) + (dims[-1] * size,)
  if op == "permute": return op, tuple(draw(st.permutations(range(len(shape)))))
  if op == "expand": return op, tuple(draw(st.sampled_from([1, 2, 3])) if s == 1 else s for s in shape)
  if op == "pad": return op, tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in shape)
  if op == "shrink":
    out = []
    for s in shape:
      lo = draw(st.integers(0, max(s - 1, 0)))
      out.append((lo, draw(st.integers(min(lo + 1, s), s))))
    return op, tuple(out)
  return op, tuple(draw(st.booleans()) for _ in shape)

@settings(max_examples=300, deadline=None)
@given(st.data())
def test_movement_chains_match_numpy(data):
  shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
  ref = np.arange(prod(shape)).reshape(shape)
  tracker = ShapeTracker.from_shape(shape)
  for _ in range(data.draw(st.integers(1, 6))):
    op, arg = data.draw(movement(ref.shape))
    ref, tracker = apply_numpy(ref, op, arg), getattr(tracker, op)(arg)
  assert tracker.shape == ref.shape
  idxs = [UOp.variable(f"i{d}", 0, s - 1) for d, s in enumerate(tracker.shape)]
  idx, valid = tracker.to_uops(idxs)
  sidx, svalid = simplify(idx), simplify(valid)
  for pos in itertools.product(*(range(s) for s in tracker.shape)):
    point = {f"i{d}": p for d, p in enumerate(pos)}
    ok = sym_infer(valid, point)
    assert sym_infer(svalid, point) == ok
    got = sym_infer(sidx, point) if ok else PAD_VALUE
    assert got == ref[pos]
    if ok: assert sym_infer(idx, point) == got

def test_single_view_for_common_chains():
  st_ = ShapeTracker.from_shape((4, 6)).permute((1, 0)).reshape((6, 2, 2))
  assert len(st_.views) == 1 and st_.views[0].strides == (1, 12, 6)
  padded = ShapeTracker.from_shape((4, 6)).pad(((1, 1), (0, 0))).reshape((6, 2, 3))
  assert len(padded.views) == 1
  assert ShapeTracker.from_shape((4, 6)).reshape((24,)).contiguous
  assert View.create((3, 1, 4)).strides == (4, 0, 1)

def test_non_mergeable_reshape_stacks_a_view():
  st_ = ShapeTracker.from_shape((4, 6)).permute((1, 0)).reshape((24,))
  assert len(st_.views) == 2
