"""Hand-written optimization choices (used unless NOOPT or BEAM): pick an axis whose loads are contiguous to compute
as vector lanes (an output axis, or a reduction axis summed lane-wise), tile output axes whose loads can be reused
across the tile, and unroll short reductions, keeping the accumulators within the register file."""
from __future__ import annotations
from ir.helpers import prod
from codegen.kernel import AxisType, Kernel, KernelOptError, Opt, OptOps

VECTOR_WIDTH = 4        # floats per vector lane group (an SSE/NEON register; AVX2 pairs them well)
MAX_ACCUMULATORS = 12   # vector accumulators a register tile may hold
MAX_UNROLL = 8          # reduction steps unrolled into one loop iteration (besides the vector lanes)

def _load_strides(k: Kernel, axis: int) -> list[int | None]:
  """Each memory load's stride along `axis` (None where stacked views make it irregular)."""
  out = []
  for view, st in zip(k.views, k.sts):
    if view.src or view in k.store_views: continue  # broadcast constants and stores
    out.append(st.views[-1].strides[axis] if len(st.views) == 1 else None)
  return out

def _vector_score(k: Kernel, axis: int, is_output: bool) -> int:
  """How well `axis` vectorizes: contiguous loads gain, broadcast loads are free, anything else is a gather."""
  score = sum(2 if s == 1 else 0 if s == 0 else -1 for s in _load_strides(k, axis))
  if is_output:  # the store must be contiguous too, or it is scattered lane by lane
    store = [st for v, st in zip(k.views, k.sts) if v in k.store_views]
    score += sum(2 if len(st.views) == 1 and st.views[-1].strides[axis] == 1 else -3 for st in store)
  return score

def hand_coded_optimizations(k: Kernel) -> list[Opt]:
  """Apply the heuristic's choices to `k` and return them."""
  applied: list[Opt] = []
  def try_opt(opt: Opt) -> bool:
    try: k.apply_opt(opt)
    except KernelOptError: return False
    applied.append(opt)
    return True
  def tile() -> int: return prod(k.full_shape[u] for u in k.axes_of(AxisType.UPCAST))

  if not k.reduce_op:
    # elementwise: a strip of VECTOR_WIDTH along the innermost output axis that is contiguous
    for a in reversed(k.axes_of(AxisType.GLOBAL)):
      if k.full_shape[a] % VECTOR_WIDTH == 0 and k.full_shape[a] > VECTOR_WIDTH and _vector_score(k, a, True) > 0:
        if try_opt(Opt(OptOps.UPCAST, a, VECTOR_WIDTH)): k.vector_axis = a + 1
        break
    return applied

  # 1. the vector axis: the best-scoring output or reduction axis that splits into whole vectors (4 lanes, else 2)
  candidates = [(_vector_score(k, a, k.axis_types[a] is AxisType.GLOBAL), width, a) for a in k.axes_of(AxisType.GLOBAL, AxisType.REDUCE)
                for width in (VECTOR_WIDTH, 2) if k.full_shape[a] % width == 0]
  best = max(candidates, default=None)
  lanes = 1
  if best is not None and best[0] > 0:
    _, width, a = best
    op = OptOps.UPCAST if k.axis_types[a] is AxisType.GLOBAL else OptOps.UNROLL
    splits = k.full_shape[a] != width
    if try_opt(Opt(op, a, width)): k.vector_axis, lanes = (a + 1 if splits else a), width
  vec_is_output = k.vector_axis is not None and k.axis_types[k.vector_axis] is AxisType.UPCAST

  # 2. register tile: upcast output axes along which some load is constant (loaded once for the whole tile)
  while True:
    accumulators = tile() // (lanes if vec_is_output else 1)
    choice = None
    for a in k.axes_of(AxisType.GLOBAL):
      reuse = sum(s == 0 for s in _load_strides(k, a))
      if not reuse: continue
      for amt in (4, 3, 2):
        if k.full_shape[a] % amt == 0 and accumulators * amt <= MAX_ACCUMULATORS:
          if choice is None or (reuse, amt) > choice[0]: choice = ((reuse, amt), a, amt)
          break
    if choice is None or not try_opt(Opt(OptOps.UPCAST, choice[1], choice[2])): break

  # 3. unroll the innermost non-vector reduction when it is short
  reduces = [a for a in k.axes_of(AxisType.REDUCE)]
  if reduces:
    a = reduces[-1]
    size = k.full_shape[a]
    if size <= MAX_UNROLL: try_opt(Opt(OptOps.UNROLL, a, 0))
    elif size % 2 == 0: try_opt(Opt(OptOps.UNROLL, a, 2))
  return applied
