"""Lowering: a Kernel (AST + iteration space) becomes a linear program of UOps: loops as RANGE/ENDRANGE, reductions
through accumulators, unrolled axes as copies of the computation, every index simplified symbolically."""
from __future__ import annotations
import itertools
from ir.dtype import DType, dtypes
from ir.ops import Ops, reduce_identity, ELEMENTWISE
from ir.shapetracker import unravel
from ir.symbolic import simplify
from ir.uop import UOp
from codegen.kernel import AxisType, Kernel

class ProgramBuilder:
  """Appends UOps in execution order; a value computed inside a loop is only reused while that loop is open."""
  def __init__(self):
    self.uops: list[UOp] = []
    self.scopes: list[list[UOp]] = [[]]
    self.live: set[UOp] = set()
  def emit(self, u: UOp) -> UOp:
    for n in u.toposort(stop=lambda x: x in self.live):
      if n not in self.live:
        self.uops.append(n)
        self.live.add(n)
        self.scopes[-1].append(n)
    return u
  def append(self, u: UOp) -> UOp:
    """Emit a side effect (a store): always placed, never deduplicated."""
    for s in u.src: self.emit(s)
    self.uops.append(u)
    return u
  def open_scope(self) -> None: self.scopes.append([])
  def close_scope(self) -> None:
    for n in self.scopes.pop(): self.live.discard(n)
  def open_range(self, start: UOp, end: UOp, axis: int) -> UOp:
    self.emit(start); self.emit(end)
    rng = UOp(Ops.RANGE, start.dtype, (start, end), axis)
    self.uops.append(rng)
    self.open_scope()
    self.scopes[-1].append(rng)
    self.live.add(rng)
    return rng
  def close_range(self, rng: UOp) -> None:
    self.uops.append(UOp(Ops.ENDRANGE, dtypes.void, (rng,)))
    self.close_scope()

def index_dtype(k: Kernel) -> DType:
  biggest = max([g.dtype.size for g in k.globals] + [st.size for st in k.sts] + [1])
  return dtypes.int32 if biggest < 2**31 else dtypes.int64

class Lowerer:
  def __init__(self, k: Kernel, split_first_axis_across_cores: bool):
    self.k, self.b, self.idx_dtype = k, ProgramBuilder(), index_dtype(k)
    self.split_cores = split_first_axis_across_cores
    self.view_st = dict(zip(k.views, k.sts))
    self.accs: dict[tuple[UOp, tuple], UOp] = {}

  def _combos(self, *types: AxisType) -> list[dict[int, UOp]]:
    axes = self.k.axes_of(*types)
    return [{a: UOp.const(self.idx_dtype, i) for a, i in zip(axes, vals)}
            for vals in itertools.product(*(range(self.k.full_shape[a]) for a in axes))]

  def lower(self) -> list[UOp]:
    k, b = self.k, self.b
    for g in k.globals: b.emit(g)
    for v in sorted({u for u in k.ast.toposort() if u.op is Ops.DEFINE_VAR}, key=lambda v: v.arg): b.emit(v)
    idxs: list[UOp] = [UOp.const(self.idx_dtype, 0)] * len(k.full_shape)
    global_axes = k.axes_of(AxisType.GLOBAL)
    opened: list[UOp] = []
    for n, a in enumerate(global_axes):
      size = k.full_shape[a]
      if n == 0 and self.split_cores:
        start, end = UOp.variable("core_start", 0, size).cast(self.idx_dtype), UOp.variable("core_end", 0, size).cast(self.idx_dtype)
      else: start, end = UOp.const(self.idx_dtype, 0), UOp.const(self.idx_dtype, size)
      opened.append(idxs_a := b.open_range(start, end, a))
      idxs[a] = idxs_a
    upcasts = self._combos(AxisType.UPCAST)
    if k.reduceops: self._lower_reduce(idxs, upcasts)
    for store in k.ast.src:
      buf, view, value = store.src
      for combo in upcasts:
        at = self._at(idxs, combo, post_reduce=True)
        idx, valid = self._index(view, at)
        if valid.op is not Ops.CONST or valid.arg is not True: raise ValueError(f"kernel stores through a masked view {view.arg}")
        b.append(UOp(Ops.STORE, dtypes.void, (buf, idx, self._value(value, at, combo))))
    for rng in reversed(opened): b.close_range(rng)
    return b.uops

  def _lower_reduce(self, idxs: list[UOp], upcasts: list[dict[int, UOp]]) -> None:
    k, b = self.k, self.b
    for r in k.reduceops:
      for combo in upcasts:
        key = (r, tuple(sorted((a, c.arg) for a, c in combo.items())))
        self.accs[key] = b.emit(UOp(Ops.DEFINE_ACC, r.dtype, (UOp.const(r.dtype, reduce_identity(r.arg[0], r.dtype)),), len(self.accs)))
    b.open_scope()  # accumulator reads inside the reduction must not be reused after it
    loops = [b.open_range(UOp.const(self.idx_dtype, 0), UOp.const(self.idx_dtype, k.full_shape[a]), a) for a in k.axes_of(AxisType.REDUCE)]
    for a, rng in zip(k.axes_of(AxisType.REDUCE), loops): idxs[a] = rng
    unrolls = self._combos(AxisType.UNROLL)
    for r in k.reduceops:
      for combo in upcasts:
        acc = self.accs[(r, tuple(sorted((a, c.arg) for a, c in combo.items())))]
        total = UOp(Ops.LOAD, r.dtype, (acc,))
        for unroll in unrolls:
          total = total.alu(r.arg[0], self._value(r.src[0], self._at(idxs, {**combo, **unroll}), combo))
        b.append(UOp(Ops.STORE, dtypes.void, (acc, total)))
    for rng in reversed(loops): b.close_range(rng)
    b.close_scope()

  def _at(self, idxs: list[UOp], fixed: dict[int, UOp], post_reduce: bool = False) -> tuple[UOp, ...]:
    zero = UOp.const(self.idx_dtype, 0)
    return tuple(fixed.get(a, zero if post_reduce and t in (AxisType.REDUCE, AxisType.UNROLL) else i)
                 for a, (i, t) in enumerate(zip(idxs, self.k.axis_types)))

  def _index(self, view: UOp, at: tuple[UOp, ...]) -> tuple[UOp, UOp]:
    idx, valid = self.view_st[view].to_uops(list(at), self.idx_dtype)
    return simplify(idx), simplify(valid)

  def _value(self, node: UOp, at: tuple[UOp, ...], upcast: dict[int, UOp]) -> UOp:
    """The UOp computing `node` at index `at` (unrolled axes are constants in `at`)."""
    memo: dict[UOp, UOp] = {}
    for n in node.toposort(stop=lambda u: u.op is Ops.REDUCE_AXIS and u is not node):
      if n.op is Ops.LOAD and len(n.src) == 3: memo[n] = self._gather(n, at, memo[n.src[2]])
      elif n.op is Ops.LOAD:
        idx, valid = self._index(n.src[1], at)
        if valid.op is Ops.CONST: memo[n] = UOp(Ops.LOAD, n.dtype, (n.src[0], idx)) if valid.arg else UOp.const(n.dtype, 0)
        else: memo[n] = valid.where(UOp(Ops.LOAD, n.dtype, (n.src[0], simplify(valid.where(idx, 0)))), UOp.const(n.dtype, 0))
      elif n.op is Ops.VALID: memo[n] = self._index(n.src[0], at)[1]
      elif n.op is Ops.VIEW and n.src:  # a value broadcast over a view: zero where the view is padding
        valid = self._index(n, at)[1]
        memo[n] = memo[n.src[0]] if valid.op is Ops.CONST and valid.arg else valid.where(memo[n.src[0]], UOp.const(n.dtype, 0))
      elif n.op is Ops.ARANGE:
        idx, valid = self._index(n.src[0], at)
        memo[n] = simplify(valid.where(idx, 0)).cast(n.dtype)
      elif n.op is Ops.REDUCE_AXIS:
        acc = self.accs[(n, tuple(sorted((a, c.arg) for a, c in upcast.items())))]
        memo[n] = UOp(Ops.LOAD, n.dtype, (acc,))
      elif n.op in ELEMENTWISE: memo[n] = UOp(n.op, n.dtype, tuple(memo[s] for s in n.src), n.arg)
      elif n.op in (Ops.CONST, Ops.DEFINE_VAR, Ops.DEFINE_GLOBAL, Ops.VIEW): memo[n] = n
      else: raise ValueError(f"can't lower {n.op} in a kernel")
    return memo[node]

  def _gather(self, n: UOp, at: tuple[UOp, ...], index_value: UOp) -> UOp:
    """LOAD(buf, VIEW(kernel -> output position), index): x at the output position with axis `dim` replaced by index."""
    dim, x_view, out_shape = n.arg
    flat, valid = self.view_st[n.src[1]].to_uops(list(at), self.idx_dtype)
    pos = unravel(flat, out_shape)
    pos[dim] = index_value.cast(self.idx_dtype)
    valid = valid & (pos[dim] >= 0) & (pos[dim] < x_view.shape[dim])  # out of range reads 0
    idx, inner_valid = x_view.to_uops(pos, self.idx_dtype)
    valid, idx = simplify(valid & inner_valid), simplify(idx)
    if valid.op is Ops.CONST: return UOp(Ops.LOAD, n.dtype, (n.src[0], idx)) if valid.arg else UOp.const(n.dtype, 0)
    return valid.where(UOp(Ops.LOAD, n.dtype, (n.src[0], simplify(valid.where(idx, 0)))), UOp.const(n.dtype, 0))

def lower(k: Kernel, split_first_axis_across_cores: bool = False) -> list[UOp]:
  return Lowerer(k, split_first_axis_across_cores).lower()
