"""Lowering: a Kernel (AST + iteration space) becomes a linear program of UOps: loops as RANGE/ENDRANGE, reductions
through accumulators, unrolled axes as copies of the computation, every index simplified symbolically. An axis of
symbolic size is a loop up to its Variable expression; where it is launched over (GPU launch indices, the CPU's
outermost loop split across cores) the launch covers the Variables' largest values and an IF skips the rest, so the
launch dimensions are the same for every value (a captured graph then patches only the Variables' argument words)."""
from __future__ import annotations
import functools, itertools
from ir.dtype import DType, dtypes
from ir.helpers import prod
from ir.ops import Ops, reduce_identity, ELEMENTWISE, STORED_ZEROS
from ir.shapetracker import unravel
from ir.symbolic import build_sum, simplify, split_terms
from ir.uop import UOp, smax, smin
from codegen.kernel import REDUCE_TYPES, AxisType, Kernel, moving_axes
from codegen.tensor_core import CORE_ROWS, CORE_ROW_BYTES, Place

CORE_VARS = ("core_start", "core_end")  # the range of the shared outer loop a CPU thread runs

VECTOR_WIDTHS = (2, 4, 8, 16)

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
  def open_if(self, cond: UOp) -> UOp:
    self.emit(cond)
    branch = UOp(Ops.IF, dtypes.void, (cond,), len(self.uops))
    self.uops.append(branch)
    self.open_scope()
    return branch
  def close_if(self, branch: UOp) -> None:
    self.uops.append(UOp(Ops.ENDIF, dtypes.void, (branch,)))
    self.close_scope()

def _magnitude(x) -> int: return max(abs(smin(x)), abs(smax(x)))

def index_dtype(k: Kernel) -> DType:
  """int32 unless a buffer, one axis (a loop's bound), the output positions a launch may fold into one index, or a flat
  index some view computes (a far slice of a huge arange) needs 64 bits (for symbolic sizes and strides, at any value of
  their Variables). The whole iteration space is no bound: reduce axes are looped one by one, never flattened together
  with the output's, so a 3072^3 matmul indexes in 32 bits."""
  reach = [_magnitude(v.offset) + sum(_magnitude(st) * (smax(s) - 1) for st, s in zip(v.strides, v.shape)) + 1 for st in k.sts for v in st.flattened_views()]
  outputs = prod(smax(s) for s, t in zip(k.full_shape, k.axis_types) if t not in REDUCE_TYPES)
  biggest = max([g.dtype.size for g in k.globals] + [smax(s) for s in k.full_shape] + [outputs] + reach + [1])
  return dtypes.int32 if biggest < 2**31 else dtypes.int64

class Lowerer:
  def __init__(self, k: Kernel, split_first_axis_across_cores: bool, vectorize: bool = True, launch_dims: int = 0, masked_loads: bool = False):
    self.k, self.b, self.idx_dtype = k, ProgramBuilder(), index_dtype(k)
    self.split_cores, self.launch_dims, self.masked_loads = split_first_axis_across_cores, launch_dims, masked_loads
    self.global_size: list[int] = []
    self.local_size: list[int] = []
    self.view_st = dict(zip(k.views, k.sts))
    self.accs: dict[tuple[UOp, tuple], UOp] = {}
    # one upcast or unrolled axis becomes the lanes of vector values (the kernel's choice, else the innermost upcast)
    upcasts = k.axes_of(AxisType.UPCAST)
    default = upcasts[-1] if upcasts else None
    axis = k.vector_axis if k.vector_axis is not None else default
    usable = vectorize and axis is not None and k.full_shape[axis] in VECTOR_WIDTHS and k.tensor_core is None
    self.vec_axis = axis if usable else None
    self.width = k.full_shape[self.vec_axis] if self.vec_axis is not None else 1
    self.vec_is_reduce = self.vec_axis is not None and k.axis_types[self.vec_axis] is AxisType.UNROLL
    self.vec_memo: dict[tuple[UOp, ...], UOp] = {}
    self.topo_memo: dict[UOp, list[tuple[UOp, tuple[int, ...]]]] = {}  # _value's walk of a node, with each node's axes
    self.value_memo: dict[tuple, UOp] = {}
    # the axes along which each view reads different places or changes validity (its outermost view's)
    self.moving = {view: sorted(moving_axes(st.views[-1])) for view, st in self.view_st.items()}
    self.index_memo: dict[tuple, tuple[UOp, UOp]] = {}
    self.lane = UOp.const(self.idx_dtype, 0)  # a tensor core's lane (its thread index)
    self.tc_axes = {t: k.axes_of(t)[0] for t in (AxisType.TC_M, AxisType.TC_N, AxisType.TC_K)} if k.tensor_core is not None else {}
    self.b_staging: UOp | None = None          # wgmma: the shared memory its B tiles are staged in
    self.in_range: list[UOp] = []              # launched-over symbolic axes: index < size, for the guarding IF

  def _size(self, a: int) -> UOp:
    """Axis a's size as an index value (a symbolic size is its Variable expression)."""
    s = self.k.full_shape[a]
    return UOp.const(self.idx_dtype, s) if isinstance(s, int) else s.cast(self.idx_dtype)

  def _combos(self, *types: AxisType, skip: int | None = None) -> list[dict[int, UOp]]:
    axes = [a for a in self.k.axes_of(*types) if a != skip]
    return [{a: UOp.const(self.idx_dtype, i) for a, i in zip(axes, vals)}
            for vals in itertools.product(*(range(self.k.full_shape[a]) for a in axes))]
  def _lanes(self, tile: dict[int, UOp]) -> list[dict[int, UOp]]:
    """The combinations of one tile, one per lane of the vector axis."""
    if self.vec_axis is None: return [tile]
    return [{**tile, self.vec_axis: UOp.const(self.idx_dtype, i)} for i in range(self.width)]
  def _store_lanes(self, tile: dict[int, UOp]) -> list[dict[int, UOp]]:
    return [tile] if self.vec_is_reduce else self._lanes(tile)
  def _tile_key(self, combo: dict[int, UOp]) -> tuple:
    return tuple(sorted((a, c.arg) for a, c in combo.items() if a != self.vec_axis and self.k.axis_types[a] is AxisType.UPCAST))

  def lower(self) -> list[UOp]:
    k, b = self.k, self.b
    for g in k.globals: b.emit(g)
    for v in k.variables: b.emit(v)  # every argument before any loop, also those only in symbolic view sizes
    idxs: list[UOp] = [UOp.const(self.idx_dtype, 0)] * len(k.full_shape)
    global_axes = k.axes_of(AxisType.GLOBAL)
    opened: list[UOp] = []
    if self.launch_dims: self._launch_indices(idxs, global_axes, "gidx", self.global_size)
    else:
      shared = k.core_axes if self.split_cores else []
      if shared: opened += self._core_loops(idxs, shared)
      for a in global_axes:
        if a in shared: continue
        opened.append(idxs_a := b.open_range(UOp.const(self.idx_dtype, 0), self._size(a), a))
        idxs[a] = idxs_a
    first_local = 0
    if k.tensor_core is not None:  # the warp's (or warpgroup's) lanes are the innermost thread dimension
      self.lane = b.emit(UOp(Ops.SPECIAL, self.idx_dtype, (), ("lidx0", k.tensor_core.threads)))
      self.local_size.append(k.tensor_core.threads)
      first_local = 1
    self._launch_indices(idxs, k.axes_of(AxisType.LOCAL, AxisType.GROUP), "lidx", self.local_size, first_local)
    guard = b.open_if(functools.reduce(UOp.__and__, self.in_range)) if self.in_range else None
    tiles = self._combos(AxisType.UPCAST, skip=None if self.vec_is_reduce else self.vec_axis)
    if k.reduceops: self._lower_reduce(idxs, tiles)
    branch = self._lower_group(idxs) if k.axes_of(AxisType.GROUP) else None
    for store in k.ast.src:
      buf, view, value = store.src
      scattered: list[tuple[dict[int, UOp], UOp, list[tuple[UOp, UOp]]]] = []  # tiles whose lanes aren't adjacent in memory
      for tile in tiles:
        if k.tensor_core is not None:
          self._store_tensor_core_tile(store, idxs, tile)
          continue
        lanes = self._store_lanes(tile)
        ats = [self._at(idxs, lane, post_reduce=True) for lane in lanes]
        places = [self._index(view, at) for at in ats]
        vec = self._lanes_value(value, ats, lanes)
        if len(lanes) > 1 and vec.dtype != dtypes.bool.vec(self.width) and all(_offset(places[0][0], idx) == i for i, (idx, _) in enumerate(places)):
          gate = self.vectorize([valid for _, valid in places])
          b.append(UOp(Ops.STORE, dtypes.void, (buf, places[0][0], self._widen(vec)) + (() if _always(gate) else (gate,))))
        else: scattered.append((tile, vec, places))
      for idx, val, valid in self._scattered_stores(scattered):
        if not (valid.op is Ops.CONST and not valid.arg):  # a padded place: nothing to store
          b.append(UOp(Ops.STORE, dtypes.void, (buf, idx, val) + (() if _always(valid) else (valid,))))
    if branch is not None: b.close_if(branch)
    if guard is not None: b.close_if(guard)
    for rng in reversed(opened): b.close_range(rng)
    return b.uops

  def _scattered_stores(self, scattered: list[tuple[dict[int, UOp], UOp, list[tuple[UOp, UOp]]]]) -> list[tuple[UOp, UOp, UOp]]:
    """(index, value, validity) of each store for tiles whose vector lanes are apart in memory: lane by lane; but on a
    CPU, where the tiles along an upcast axis put each lane's values side by side (a convolution's lanes along its
    output channels, stored with rows contiguous), one vector per lane along that axis, in one store."""
    by_lane = [(idx, _lane(vec, i), valid) for _, vec, places in scattered for i, (idx, valid) in enumerate(places)]
    if not self.split_cores or self.vec_is_reduce or len(scattered) < 2 or by_lane[0][1].dtype == dtypes.bool or \
        not all(_always(valid) for _, _, valid in by_lane): return by_lane
    lanes = range(len(scattered[0][2]))
    for axis in self.k.axes_of(AxisType.UPCAST):
      if axis == self.vec_axis: continue
      rows: dict[tuple, list] = {}  # the tiles that differ only along `axis`, in its order
      for tile, vec, places in sorted(scattered, key=lambda t: t[0][axis].arg):
        rows.setdefault(tuple((a, c.arg) for a, c in sorted(tile.items()) if a != axis), []).append((vec, [idx for idx, _ in places]))
      if all(_offset(row[0][1][lane], idxs[lane]) == j for row in rows.values() for j, (_, idxs) in enumerate(row) for lane in lanes):
        true = UOp.const(dtypes.bool, True)
        return [(row[0][1][lane], self.vectorize([_lane(vec, lane) for vec, _ in row]), true) for row in rows.values() for lane in lanes]
    return by_lane

  def _lower_group(self, idxs: list[UOp]) -> UOp:
    """Combine the workgroup's partial reductions through local memory as a tree: every thread stores its partial
    result, then at each level (after a barrier) the lower threads of the group fold in the partials of the upper ones,
    halving the count until one is left; the threads at group position 0 read it (and go on to store the output). A
    group of G partials takes about log2(G) levels instead of one thread's loop over G."""
    k, b = self.k, self.b
    def linear(axes: list[int]) -> tuple[UOp, int]:
      """The threads' index over `axes` (row-major) and their count."""
      index, count = UOp.const(self.idx_dtype, 0), 1
      for a in axes: index, count = index * k.full_shape[a] + idxs[a], count * k.full_shape[a]
      return simplify(index), count
    (r,) = k.reduceops
    (output, outputs), (member, size) = linear(k.axes_of(AxisType.LOCAL)), linear(k.axes_of(AxisType.GROUP))
    base = simplify(output * size)  # each output's partials side by side
    mem = b.emit(UOp(Ops.DEFINE_LOCAL, r.dtype.ptr(outputs * size, local=True), (), "partials"))
    mine = simplify(base + member)
    b.append(UOp(Ops.STORE, dtypes.void, (mem, mine, UOp(Ops.LOAD, r.dtype, (self.accs[(r, ())],)))))
    left = size
    while left > 1:
      half = (left + 1) // 2  # the partials at [half, left) fold onto those at [0, left - half)
      b.append(UOp(Ops.BARRIER, dtypes.void, (mem,)))
      folds = member < left - half
      level = b.open_if(folds)
      other = simplify(folds.where(mine + half, mine))  # the address stays in bounds where the branch isn't taken
      b.append(UOp(Ops.STORE, dtypes.void, (mem, mine, UOp(Ops.LOAD, r.dtype, (mem, mine)).alu(r.arg[0], UOp(Ops.LOAD, r.dtype, (mem, other))))))
      b.close_if(level)
      left = half
    branch = b.open_if(member.eq(0))
    total = b.emit(UOp(Ops.DEFINE_ACC, r.dtype, (UOp.const(r.dtype, reduce_identity(r.arg[0], r.dtype)),), len(self.accs)))
    b.append(UOp(Ops.STORE, dtypes.void, (total, UOp(Ops.LOAD, r.dtype, (mem, base)))))
    self.accs[(r, ())] = total
    return branch

  def _core_loops(self, idxs: list[UOp], axes: list[int]) -> list[UOp]:
    """The loops over `axes` whose iterations, counted outer to inner as one flat range, the CPU's threads share in
    pieces [core_start, core_end): two axes become two nested loops whose bounds cut out that piece, so no index
    needs a division per iteration."""
    start, end = (UOp.variable(name, 0, prod(smax(self.k.full_shape[a]) for a in axes)).cast(self.idx_dtype) for name in CORE_VARS)
    if len(axes) == 1:
      idxs[axes[0]] = rng = self.b.open_range(start, end, axes[0])
      if isinstance(self.k.full_shape[axes[0]], UOp): self.in_range.append(rng < self._size(axes[0]))
      return [rng]
    inner = self.k.full_shape[axes[1]]  # bounds in simplified form: index math simplified later rebuilds the same loops
    idxs[axes[0]] = outer = self.b.open_range(simplify(start // inner), simplify((end + inner - 1) // inner), axes[0])
    lo, hi = simplify((start - outer * inner).maximum(0)), simplify((end - outer * inner).minimum(inner))
    idxs[axes[1]] = within = self.b.open_range(lo, hi, axes[1])
    return [outer, within]

  def _launch_indices(self, idxs: list[UOp], axes: list[int], prefix: str, sizes: list[int], first_dim: int = 0) -> None:
    """Axes as launch indices from dim `first_dim` on: the innermost axis first; axes beyond the last dim share it
    (split by div/mod)."""
    if not axes: return
    dims = [[a] for a in reversed(axes)]
    while len(dims) > self.launch_dims - first_dim: dims[-2:] = [dims[-1] + dims[-2]]  # outer axes fold into the last dim
    for d, group in enumerate(dims, first_dim):
      total = prod(smax(self.k.full_shape[a]) for a in group)
      special = self.b.emit(UOp(Ops.SPECIAL, self.idx_dtype, (), (f"{prefix}{d}", total)))  # once, outside every loop
      sizes.append(total)
      inner = 1
      for a in reversed(group):  # group lists axes outer to inner after the fold; recover each by div/mod
        size = smax(self.k.full_shape[a])
        idxs[a] = special if len(group) == 1 else simplify((special // inner) % size)
        if isinstance(self.k.full_shape[a], UOp): self.in_range.append(idxs[a] < self._size(a))
        inner *= size

  def _lower_reduce(self, idxs: list[UOp], tiles: list[dict[int, UOp]]) -> None:
    k, b = self.k, self.b
    for r in k.reduceops:
      for tile in tiles:
        init = UOp.const(r.dtype, reduce_identity(r.arg[0], r.dtype))
        init = self._widen(init) if k.tensor_core is None else UOp(Ops.VECTORIZE, r.dtype.vec(len(k.tensor_core.c)), (init,) * len(k.tensor_core.c))
        self.accs[(r, self._tile_key(tile))] = b.emit(UOp(Ops.DEFINE_ACC, init.dtype, (init,), len(self.accs)))
    b.open_scope()  # accumulator reads inside the reduction must not be reused after it
    bounds = self._nonzero_steps(idxs, tiles)
    loops = [b.open_range(*bounds.get(a, (UOp.const(self.idx_dtype, 0), self._size(a))), a) for a in k.axes_of(AxisType.REDUCE)]
    for a, rng in zip(k.axes_of(AxisType.REDUCE), loops): idxs[a] = rng
    unrolls = self._combos(AxisType.UNROLL, skip=self.vec_axis if self.vec_is_reduce else None)
    if k.tensor_core is not None: self._tensor_core_reduce(idxs, tiles, unrolls)
    else:
      for r in k.reduceops:
        for tile in tiles:
          acc = self.accs[(r, self._tile_key(tile))]
          total = UOp(Ops.LOAD, acc.dtype, (acc,))
          for unroll in unrolls:
            lanes = self._lanes(tile)
            value = self._lanes_value(r.src[0], [self._at(idxs, {**lane, **unroll}) for lane in lanes], lanes)
            total = total.alu(r.arg[0], self._widen(value))
          b.append(UOp(Ops.STORE, dtypes.void, (acc, total)))
    for rng in reversed(loops): b.close_range(rng)
    b.close_scope()

  def _nonzero_steps(self, idxs: list[UOp], tiles: list[dict[int, UOp]]) -> dict[int, tuple[UOp, UOp]]:
    """{reduction loop axis: (start, end)} for loops whose other steps only add zeros: every sum is of products with a
    factor read from stored padding, and that factor's window (its STORED_ZEROS condition) bounds the loop index by
    the indices outside the loop. The bounds cover every tile, lane and unrolled step. Only where the outer indices
    are loops (CPU): with launch indices the threads of a group would loop different counts."""
    k = self.k
    if self.launch_dims or k.tensor_core is not None or any(r.arg[0] is not Ops.ADD for r in k.reduceops): return {}
    guards = [_stored_padding_factor(r.src[0]) for r in k.reduceops]
    loops = k.axes_of(AxisType.REDUCE)
    if not guards or None in guards or any(isinstance(k.full_shape[a], UOp) for a in loops): return {}
    steps = {a: UOp.variable(f"step{a}", 0, k.full_shape[a] - 1, self.idx_dtype) for a in loops}
    at_loop = [steps.get(a, i) for a, i in enumerate(idxs)]
    fixed_axes = k.axes_of(AxisType.UPCAST, AxisType.UNROLL)
    conditions: list[UOp] = []  # each guard's condition at each distinct place of the tiles and unrolled steps
    for view in dict.fromkeys(guards):
      window_axes = self._window_axes(view, at_loop, fixed_axes)
      for vals in itertools.product(*(range(k.full_shape[a]) for a in window_axes)):
        place = dict(zip(window_axes, vals))
        point = tuple(UOp.const(self.idx_dtype, place.get(x, 0)) if x in fixed_axes else i for x, i in enumerate(at_loop))
        conditions.append(self._index(view, point)[1])
    out: dict[int, tuple[UOp, UOp]] = {}
    for a in loops:
      lower, upper = _Hull(min), _Hull(max)
      for valid in conditions:
        lo, hi = _step_window(valid, steps[a], set(steps.values()))
        lower.add(lo); upper.add(hi)
      if lower.rest is None and upper.rest is None: continue
      size = k.full_shape[a]
      start = UOp.const(self.idx_dtype, 0) if lower.rest is None else simplify((lower.const - lower.rest).maximum(0))
      end = UOp.const(self.idx_dtype, size) if upper.rest is None else simplify(-((-(upper.const - upper.rest)).maximum(-size)))
      out[a] = (start, end)
    return out

  def _window_axes(self, view: UOp, at_loop: list[UOp], fixed_axes: list[int]) -> list[int]:
    """The tile and unrolled axes that `view`'s validity depends on (a batch tile reads every image through the same
    window): found by asking for its validity with those axes as variables."""
    probe = {a: UOp.variable(f"place{a}", 0, self.k.full_shape[a] - 1, self.idx_dtype) for a in fixed_axes if a in self.moving[view]}
    _, valid = self.view_st[view].to_uops([probe.get(a, i) for a, i in enumerate(at_loop)], self.idx_dtype)
    used = set(simplify(valid).toposort())
    return [a for a, v in probe.items() if v in used]

  # ---- tensor cores ----
  def _tc_place(self, place: Place) -> UOp:
    """A fragment coordinate of this lane: each run of lane bits scaled (highest first), plus the constant; a run that
    reaches the top lane bit needs no modulo."""
    top = (self.k.tensor_core.threads - 1).bit_length()
    out = UOp.const(self.idx_dtype, 0)
    for shift, width, scale in reversed(place.runs()):
      out = out + (self.lane if shift + width >= top else self.lane % (1 << (shift + width))) // (1 << shift) * scale
    return simplify(out + place.const)

  def _tc_at(self, idxs: list[UOp], fixed: dict[int, UOp], places: dict[AxisType, UOp]) -> tuple[UOp, ...]:
    """The index of one operand element: `fixed` axes, and each tensor-core axis at its place (0 where unused)."""
    zero = UOp.const(self.idx_dtype, 0)
    return self._at(idxs, {**fixed, **{a: places.get(t, zero) for t, a in self.tc_axes.items()}})

  def _tc_fragment(self, operand: UOp, idxs: list[UOp], fixed: dict[int, UOp], tile: dict[int, UOp], layout,
                   row_type: AxisType, col_type: AxisType) -> UOp:
    """The lane's register elements of one operand tile: `operand` evaluated at each (row, column) of `layout`. Elements
    go in pairs (one 32-bit register), so a pair that is adjacent in memory is one load."""
    values = [self._value(operand, self._tc_at(idxs, fixed, {row_type: self._tc_place(r), col_type: self._tc_place(c)}), tile)
              for r, c in layout]
    pairs = [self.vectorize(values[i:i + 2]) for i in range(0, len(values), 2)]
    return UOp(Ops.VECTORIZE, operand.dtype.vec(len(values)), tuple(_lane(p, j) for p in pairs for j in range(2)))

  def _tensor_core_reduce(self, idxs: list[UOp], tiles: list[dict[int, UOp]], unrolls: list[dict[int, UOp]]) -> None:
    """One tensor-core step per tile and unrolled reduction step; each step is placed at once, since a wgmma reads
    the B tiles staged just before it."""
    k, b = self.k, self.b
    tc, (a_op, b_op), (r,) = k.tensor_core, k.tc_operands, k.reduceops
    accs = {self._tile_key(t): self.accs[(r, self._tile_key(t))] for t in tiles}
    totals = {key: UOp(Ops.LOAD, acc.dtype, (acc,)) for key, acc in accs.items()}
    for unroll in unrolls:
      b_offsets = self._stage_b(b_op, idxs, unroll, tiles) if tc.b_in_shared else {}
      for tile in tiles:
        key, fixed = self._tile_key(tile), {**tile, **unroll}
        A = self._tc_fragment(a_op, idxs, fixed, tile, tc.a, AxisType.TC_M, AxisType.TC_K)
        if tc.b_in_shared: src = (A, self.b_staging, totals[key], UOp.const(self.idx_dtype, b_offsets[key]))
        else: src = (A, self._tc_fragment(b_op, idxs, fixed, tile, tc.b, AxisType.TC_K, AxisType.TC_N), totals[key])
        totals[key] = b.emit(UOp(Ops.WMMA, totals[key].dtype, src, tc))
    for key, acc in accs.items(): b.append(UOp(Ops.STORE, dtypes.void, (acc, totals[key])))

  def _stage_b(self, b_op: UOp, idxs: list[UOp], unroll: dict[int, UOp], tiles: list[dict[int, UOp]]) -> dict[tuple, int]:
    """The warpgroup writes each tile's B (K x N) into shared memory in the core-matrix layout, lane by lane along
    consecutive addresses; returns each tile's byte offset there. Barriers keep the previous step's readers safe and
    make the writes visible to the tensor cores (the async proxy)."""
    tc, b = self.k.tensor_core, self.b
    _, N, K = tc.dims
    axes = [a for a in self.k.axes_of(AxisType.UPCAST) if a in self.k.varying_axes(b_op)]  # one staged B per combination
    if self.b_staging is None:
      count = prod(self.k.full_shape[a] for a in axes)
      self.b_staging = b.emit(UOp(Ops.DEFINE_LOCAL, tc.dtype_in.ptr(count * N * K, local=True), (), "b_tiles"))
    per_row = CORE_ROW_BYTES // tc.dtype_in.itemsize   # K elements in one core-matrix row
    lbo, sbo = (x // tc.dtype_in.itemsize for x in tc.b_strides)
    b.append(UOp(Ops.BARRIER, dtypes.void, (self.b_staging,)))
    offsets: dict[tuple, int] = {}
    staged: set[int] = set()
    for tile in tiles:
      region = 0
      for a in axes: region = region * self.k.full_shape[a] + tile[a].arg
      offsets[self._tile_key(tile)] = region * tc.b_tile_bytes
      if region in staged: continue  # tiles that differ only along M share their B
      staged.add(region)
      for i in range(N * K // tc.threads):
        e = self.lane + i * tc.threads  # this lane's element: consecutive lanes write consecutive addresses
        kk = simplify(e // lbo % (K // per_row) * per_row + e % per_row)
        nn = simplify(e // sbo * CORE_ROWS + e // per_row % CORE_ROWS)
        value = self._value(b_op, self._tc_at(idxs, {**tile, **unroll}, {AxisType.TC_K: kk, AxisType.TC_N: nn}), tile)
        b.append(UOp(Ops.STORE, dtypes.void, (self.b_staging, simplify(e + region * N * K), value)))
    b.append(UOp(Ops.BARRIER, dtypes.void, (self.b_staging,), "async"))
    return offsets

  def _store_tensor_core_tile(self, store: UOp, idxs: list[UOp], tile: dict[int, UOp]) -> None:
    """Store one tile of results: each lane holds the output elements at the accumulator layout's places."""
    buf, view, value = store.src
    m, n = self.tc_axes[AxisType.TC_M], self.tc_axes[AxisType.TC_N]
    for elem, (row, col) in enumerate(self.k.tensor_core.c):
      at = self._at(idxs, {**tile, m: self._tc_place(row), n: self._tc_place(col)}, post_reduce=True)
      idx, valid = self._index(view, at)
      if valid.op is Ops.CONST and not valid.arg: continue
      self.b.append(UOp(Ops.STORE, dtypes.void, (buf, idx, self._value(value, at, tile, elem)) + (() if _always(valid) else (valid,))))

  # ---- lanes -> vectors ----
  def _widen(self, x: UOp, width: int | None = None) -> UOp:
    """x as a vector of `width` lanes, by default the kernel's (a uniform scalar is broadcast)."""
    width = width or self.width
    if width == 1 or x.dtype.count == width: return x
    return UOp(Ops.VECTORIZE, x.dtype.vec(width), (x,) * width)

  def vectorize(self, lanes: list[UOp]) -> UOp:
    """One value for all lanes: the scalar itself when every lane is the same, else a vector UOp built op by op,
    with loads of consecutive addresses merged into one wide load (and in reverse, one load with its lanes reversed;
    guarded ones, where the renderer can, one masked load)."""
    first = lanes[0]
    if all(l is first for l in lanes): return first
    key = tuple(lanes)
    if (hit := self.vec_memo.get(key)) is not None: return hit
    n = len(lanes)
    loads = first.op is Ops.LOAD and len(first.src) == 2 and first.dtype != dtypes.bool and all(l.op is Ops.LOAD and len(l.src) == 2 and l.src[0] is first.src[0] for l in lanes)
    if all(l.op is Ops.GEP and l.src[0] is first.src[0] and l.arg == i for i, l in enumerate(lanes)) and first.src[0].dtype.count == n:
      out = first.src[0]
    elif loads and (step := _step([(i, l.src[1]) for i, l in enumerate(lanes)])) is not None:  # reversed: a flipped view
      out = UOp(Ops.LOAD, first.dtype.vec(n), first.src) if step == 1 else _reversed(UOp(Ops.LOAD, first.dtype.vec(n), lanes[-1].src))
    elif self.masked_loads and (masked := self._masked_load(lanes)) is not None: out = masked
    elif first.op in ELEMENTWISE and all(l.op is first.op and l.dtype == first.dtype and l.arg == first.arg and len(l.src) == len(first.src) for l in lanes):
      out = UOp(first.op, first.dtype.vec(n), tuple(self._widen(self.vectorize([l.src[j] for l in lanes]), n) for j in range(len(first.src))), first.arg)
    else: out = UOp(Ops.VECTORIZE, first.dtype.vec(n), tuple(lanes))
    self.vec_memo[key] = out
    return out

  def _masked_load(self, lanes: list[UOp]) -> UOp | None:
    """Lanes that are guarded loads of one buffer at consecutive addresses (forward or reversed), some of them
    padding (zero): one vector load of the lanes whose gate is set (a padded or concatenated view read along the
    vector), else None."""
    parts = [_guarded_parts(l) for l in lanes]
    if any(p is None for p in parts): return None
    read = [(i, p) for i, p in enumerate(parts) if p != ()]
    if not read or all(_always(p[1]) for _, p in read): return None
    (i0, (buf, _, a0)), n = read[0], len(lanes)
    if any(p[0] is not buf for _, p in read) or buf.dtype.base == dtypes.bool: return None
    if (step := _step([(i, a) for i, (_, _, a) in read])) is None: return None
    gates = [p[1] if p != () else UOp.const(dtypes.bool, False) for p in parts]
    start = simplify(a0 - (i0 if step == 1 else n - 1 - i0))  # the address of lane 0, or of lane n - 1 reversed
    whole = UOp(Ops.LOAD, lanes[i0].dtype.vec(n), (buf, start, self._widen(self.vectorize(gates if step == 1 else gates[::-1]), n)))
    return whole if step == 1 else _reversed(whole)

  def _at(self, idxs: list[UOp], fixed: dict[int, UOp], post_reduce: bool = False) -> tuple[UOp, ...]:
    zero = UOp.const(self.idx_dtype, 0)
    return tuple(fixed.get(a, zero if post_reduce and t in (AxisType.REDUCE, AxisType.UNROLL, AxisType.GROUP) else i)
                 for a, (i, t) in enumerate(zip(idxs, self.k.axis_types)))

  def _index(self, view: UOp, at: tuple[UOp, ...]) -> tuple[UOp, UOp]:
    """(offset, validity) of `view` at `at`; computed once for all places that differ only along axes the view ignores
    (the lanes and tiles of an upcast kernel mostly do)."""
    key = (view, *(at[a] for a in self.moving[view]))
    if (hit := self.index_memo.get(key)) is not None: return hit
    st = self.view_st[view]
    idx, valid = st.to_uops(list(at), self.idx_dtype)
    if len(st.views) > 1: idx, valid = simplify(idx), simplify(valid)  # one view gives a canonical sum and only necessary conditions
    self.index_memo[key] = (idx, valid)
    return idx, valid

  def _walk(self, node: UOp) -> list[tuple[UOp, tuple[int, ...]]]:
    """The nodes _value computes for `node`, each after its sources, with the axes its value depends on: those its views
    move along, and for a reduction's result the upcast axes (one accumulator per tile and lane)."""
    if (hit := self.topo_memo.get(node)) is not None: return hit
    upcast_axes = set(self.k.axes_of(AxisType.UPCAST))
    axes: dict[UOp, set[int]] = {}
    for n in node.toposort(stop=lambda u: u.op is Ops.REDUCE_AXIS and u is not node):
      if n.op is Ops.REDUCE_AXIS: axes[n] = upcast_axes
      else: axes[n] = set(self.moving[view]) if (view := _view_read(n)) is not None else set()
      for s in n.src: axes[n] = axes[n] | axes.get(s, set())
    self.topo_memo[node] = out = [(n, tuple(sorted(a))) for n, a in axes.items()]
    return out

  def _value(self, node: UOp, at: tuple[UOp, ...], upcast: dict[int, UOp], tc_elem: int = 0) -> UOp:
    """The UOp computing `node` at index `at` (unrolled axes are constants in `at`); a reduction computed by tensor
    cores reads element `tc_elem` of its accumulator."""
    memo: dict[UOp, UOp] = {}
    needed, misses = {node}, []
    for n, axes in reversed(self._walk(node)):  # each node before its sources: a node made before needs none of them
      if n not in needed: continue
      key = (n, tc_elem, *(at[a] for a in axes))  # a node is made once for all places that agree on its axes
      if (hit := self.value_memo.get(key)) is not None: memo[n] = hit
      else:
        misses.append((n, key))
        if n.op in ELEMENTWISE or n.op is Ops.VIEW or n.op is Ops.LOAD: needed.update(n.src)
    for n, key in reversed(misses): memo[n] = self.value_memo[key] = self._node(n, memo, at, upcast, tc_elem)
    return memo[node]

  def _lanes_value(self, node: UOp, ats: list[tuple[UOp, ...]], lanes: list[dict[int, UOp]]) -> UOp:
    """vectorize([_value(node, at, lane) for each lane]), built node by node: a node that doesn't move along the vector
    axis is made once as a scalar, an elementwise node of vector sources is one vector op, and only the rest (loads,
    reads of views and accumulators) is made lane by lane."""
    if len(lanes) == 1: return self._value(node, ats[0], lanes[0])
    memo: dict[UOp, UOp] = {}
    for n, axes in self._walk(node):
      if self.vec_axis not in axes:
        key = (n, 0, *(ats[0][a] for a in axes))
        if (hit := self.value_memo.get(key)) is None: hit = self.value_memo[key] = self._node(n, memo, ats[0], lanes[0], 0)
        memo[n] = hit
      elif n.op is Ops.WHERE and _always(memo[n.src[0]]): memo[n] = memo[n.src[1]]
      elif n.op in ELEMENTWISE and all(memo[s].dtype.count == 1 for s in n.src):  # its lanes turned out all the same
        memo[n] = UOp(n.op, n.dtype, tuple(memo[s] for s in n.src), n.arg)
      elif n.op in ELEMENTWISE and not (n.op is Ops.WHERE and _some_lane_always(memo[n.src[0]])):
        memo[n] = UOp(n.op, n.dtype.vec(self.width), tuple(self._widen(memo[s]) for s in n.src), n.arg)
      else: memo[n] = self.vectorize([self._value(n, at, lane) for at, lane in zip(ats, lanes)])
    return memo[node]

  def _node(self, n: UOp, memo: dict[UOp, UOp], at: tuple[UOp, ...], upcast: dict[int, UOp], tc_elem: int) -> UOp:
    """Node n at `at`, its sources' values in memo."""
    if n.op is Ops.LOAD and len(n.src) == 3: return self._gather(n, at, memo[n.src[2]])
    if n.op is Ops.LOAD: return _guarded_load(n, *self._index(n.src[1], at))
    if n.op is Ops.VALID: return UOp.const(dtypes.bool, True) if n.arg == STORED_ZEROS else self._index(n.src[0], at)[1]
    if n.op is Ops.VIEW and n.src:  # a value broadcast over a view: zero where the view is padding
      valid = self._index(n, at)[1]
      return memo[n.src[0]] if valid.op is Ops.CONST and valid.arg else valid.where(memo[n.src[0]], UOp.const(n.dtype, 0))
    if n.op is Ops.ARANGE:
      idx, valid = self._index(n.src[0], at)
      return simplify(valid.where(idx, 0)).cast(n.dtype)
    if n.op is Ops.REDUCE_AXIS:
      acc = self.accs[(n, self._tile_key(upcast))]
      total = UOp(Ops.LOAD, acc.dtype, (acc,))
      if self.k.tensor_core is not None: return UOp(Ops.GEP, n.dtype, (total,), tc_elem)
      if self.vec_axis is None: return total
      return _horizontal(total, n.arg[0]) if self.vec_is_reduce else UOp(Ops.GEP, n.dtype, (total,), upcast[self.vec_axis].arg)
    if n.op is Ops.WHERE and _always(memo[n.src[0]]): return memo[n.src[1]]
    if n.op in ELEMENTWISE: return UOp(n.op, n.dtype, tuple(memo[s] for s in n.src), n.arg)
    if n.op in (Ops.CONST, Ops.DEFINE_VAR, Ops.DEFINE_GLOBAL, Ops.VIEW): return n
    raise ValueError(f"can't lower {n.op} in a kernel")

  def _gather(self, n: UOp, at: tuple[UOp, ...], index_value: UOp) -> UOp:
    """LOAD(buf, VIEW(kernel -> output position), index): x at the output position with axis `dim` replaced by index."""
    dim, x_view, out_shape = n.arg
    flat, valid = self.view_st[n.src[1]].to_uops(list(at), self.idx_dtype)
    pos = unravel(flat, out_shape)
    pos[dim] = index_value.cast(self.idx_dtype)
    valid = valid & (pos[dim] >= 0) & (pos[dim] < x_view.shape[dim])  # out of range reads 0
    idx, inner_valid = x_view.to_uops(pos, self.idx_dtype)
    return _guarded_load(n, simplify(idx), simplify(valid & inner_valid))

def _view_read(n: UOp) -> UOp | None:
  """The view whose index or validity node n reads, if any."""
  if n.op in (Ops.LOAD, Ops.VALID, Ops.ARANGE): return n.src[1] if n.op is Ops.LOAD else n.src[0]
  return n if n.op is Ops.VIEW and n.src else None

def _guarded_load(n: UOp, idx: UOp, valid: UOp) -> UOp:
  """The load `n` makes from its buffer at `idx`, zero where `valid` is false (the address is kept in bounds there)."""
  if valid.op is Ops.CONST: return UOp(Ops.LOAD, n.dtype, (n.src[0], idx)) if valid.arg else UOp.const(n.dtype, 0)
  return valid.where(UOp(Ops.LOAD, n.dtype, (n.src[0], simplify(valid.where(idx, 0)))), UOp.const(n.dtype, 0))

def _guarded_parts(lane: UOp) -> tuple | None:
  """(buffer, gate, address) of a load _guarded_load made, () for a lane it made zero (never valid), else None."""
  if lane.op is Ops.CONST: return () if lane.arg == 0 else None
  if lane.op is Ops.LOAD and len(lane.src) == 2: return lane.src[0], UOp.const(dtypes.bool, True), lane.src[1]
  if lane.op is not Ops.WHERE or lane.src[2].op is not Ops.CONST or lane.src[2].arg != 0: return None
  gate, load = lane.src[0], lane.src[1]
  if load.op is not Ops.LOAD or len(load.src) != 2: return None
  address = load.src[1]
  if address.op is not Ops.WHERE or address.src[0] is not gate or address.src[2].op is not Ops.CONST or address.src[2].arg != 0: return None
  return load.src[0], gate, address.src[1]

def _step(addresses: list[tuple[int, UOp]]) -> int | None:
  """1 where each (lane, address) reads the first one's address plus the lanes between them, -1 where minus them (a
  flipped view), else None."""
  i0, a0 = addresses[0]
  return next((step for step in (1, -1) if all(_offset(a0, a) == step * (i - i0) for i, a in addresses)), None)

def _reversed(v: UOp) -> UOp:
  """Vector v with its lanes in reverse order."""
  n = v.dtype.count
  return UOp(Ops.VECTORIZE, v.dtype, tuple(UOp(Ops.GEP, v.dtype.scalar, (v,), n - 1 - i) for i in range(n)))

def _offset(base: UOp, idx: UOp) -> int | None:
  """idx - base when it is a constant."""
  if idx is base: return 0
  (t1, k1), (t2, k2) = _terms(base), _terms(idx)
  return k2 - k1 if t1 == t2 else None

@functools.lru_cache(maxsize=1 << 14)
def _terms(idx: UOp) -> tuple[frozenset, int]:
  """idx's terms and constant (split_terms), made once: every lane of a vector is compared with the first."""
  terms, const = split_terms(idx)
  return frozenset(terms.items()), const

def _horizontal(x: UOp, op: Ops) -> UOp:
  """Combine the lanes of vector x with op, pairwise."""
  vals = [UOp(Ops.GEP, x.dtype.scalar, (x,), i) for i in range(x.dtype.count)]
  while len(vals) > 1: vals = [vals[i].alu(op, vals[i + 1]) if i + 1 < len(vals) else vals[i] for i in range(0, len(vals), 2)]
  return vals[0]

def _stored_padding_factor(x: UOp) -> UOp | None:
  """The view of a STORED_ZEROS condition guarding a factor of the product x, if there is one."""
  seen, stack = set(), [x]
  while stack:
    if (n := stack.pop()) in seen: continue
    seen.add(n)
    if n.op in (Ops.MUL, Ops.CAST): stack += n.src
    elif n.op is Ops.WHERE and n.src[0].op is Ops.VALID and n.src[0].arg == STORED_ZEROS and n.src[2].op is Ops.CONST and n.src[2].arg == 0:
      return n.src[0].src[0]
  return None

class _Hull:
  """One side of a loop bound, `const - rest` (rest: the same sum of outer indices everywhere), widened by `pick` over
  every place it is needed; rest None means unbounded on this side."""
  def __init__(self, pick):
    self.pick, self.const, self.rest, self.unbounded = pick, 0, None, False
  def add(self, bound: tuple[int, UOp] | None) -> None:
    if self.unbounded: return
    if bound is None or (self.rest is not None and bound[1] is not self.rest):
      self.unbounded, self.rest = True, None
      return
    self.const = bound[0] if self.rest is None else self.pick(self.const, bound[0])
    self.rest = bound[1]

def _step_window(valid: UOp, step: UOp, steps: set[UOp]) -> tuple[tuple[int, UOp] | None, tuple[int, UOp] | None]:
  """From the conditions `step + rest >= c` and `step + rest < c` among the conjuncts of valid: the tightest lower
  bound and end of step, each as (c', rest) meaning c' - rest; None where no condition bounds that side."""
  lower: tuple[int, UOp] | None = None
  upper: tuple[int, UOp] | None = None
  clauses, stack = [], [valid]
  while stack:
    c = stack.pop()
    if c.op is Ops.AND: stack += c.src
    else: clauses.append(c)
  for c in clauses:
    negated = c.op is Ops.CMPNE and c.src[1].op is Ops.CONST and c.src[1].arg is True
    cmp = c.src[0] if negated else c
    if cmp.op is not Ops.CMPLT or cmp.src[1].op is not Ops.CONST: continue
    terms, const = split_terms(cmp.src[0])
    if terms.get(step) != 1 or any(t in steps for t in terms if t is not step): continue
    rest = simplify(build_sum({t: v for t, v in terms.items() if t is not step}, 0, cmp.src[0]))
    bound = (cmp.src[1].arg - const, rest)
    if negated and (lower is None or (lower[1] is rest and bound[0] > lower[0])): lower = bound
    if not negated and (upper is None or (upper[1] is rest and bound[0] < upper[0])): upper = bound
  return lower, upper

def _always(gate: UOp) -> bool: return gate.op is Ops.CONST and gate.arg is True

def _some_lane_always(gate: UOp) -> bool:
  """Whether a lane of vector `gate` is the constant True (only a VECTORIZE has lanes of its own)."""
  return gate.op is Ops.VECTORIZE and any(_always(s) for s in gate.src)

def _lane(x: UOp, i: int) -> UOp: return UOp(Ops.GEP, x.dtype.scalar, (x,), i) if x.dtype.count > 1 else x

def lower(k: Kernel, split_first_axis_across_cores: bool = False, vectorize: bool = True, launch_dims: int = 0,
          masked_loads: bool = False) -> tuple[list[UOp], tuple, tuple]:
  """(linear program, global size, local size); the sizes are those of the launch indices (1s on CPU)."""
  lw = Lowerer(k, split_first_axis_across_cores, vectorize, launch_dims, masked_loads)
  uops = lw.lower()
  pad = lambda xs: tuple(xs + [1] * (3 - len(xs))) if len(xs) <= 3 else tuple(xs)
  return uops, pad(lw.global_size), pad(lw.local_size)
