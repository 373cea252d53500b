"""Hand-written optimization choices (used unless NOOPT or BEAM): pick an axis whose loads are contiguous to compute
as vector lanes (an output axis, or a reduction axis summed lane-wise), tile output axes so that each load and cache
line serves as many FMAs as the register file allows, and unroll short reductions. On GPUs (targets with
workgroups) output axes become the threads of a workgroup, and a reduction with few outputs is shared by one. An
axis of symbolic size is never split; estimates take it at its largest."""
from __future__ import annotations
import math
from ir.helpers import prod
from ir.ops import ELEMENTWISE
from ir.uop import smax
from ir.switches import TC
from codegen.kernel import AxisType, Kernel, KernelOptError, Opt, OptOps

LINE_BYTES = 64         # a cache line
LINE_COST = 2           # filling a cache line from L2 takes about as long as two loads (a core fills one line a cycle, issues two loads)
TILE_SLACK = 1.05       # register tiles whose costs are within this factor are taken as equally fast
LANES_IN_FLIGHT = 16    # accumulator lanes a reduction keeps in flight: enough to hide an add's latency
LONG_CHAIN = 100        # adds into one accumulator from which that matters (a BN statistic's 3200: 5.2 -> 3.6 ms; max over rows of 250: 0.7-1.0 -> 0.24-0.32 ms)
MAX_UNROLL = 8          # reduction steps unrolled into one loop iteration (besides the vector lanes)
LONG_UNROLLED = 256     # a CPU reduction this long is unrolled by 4, not 2: half the loop's own instructions, which share
                        # ports with the FMAs (a matmul's 8x32 tile: 512 squared 446 -> 463 GFLOPS, 1024 463 -> 467); shorter
                        # ones stay at 2, as lowering a body twice as large costs time (a cold MNIST step took 0.1 s longer)
CACHE_SHARE = 2         # a cache block of re-read data holds at most this fraction of a core's cache (2 MiB of L2: a 896
                        # matmul's blocks of B panels ran at 467 GFLOPS with 800 KiB, 416-458 with 1.6 MiB)
PAGE_BYTES = 4096       # hardware prefetchers follow a stream within a page, and addresses a page apart share an L1 set
TRANSPOSE_BLOCK = 8     # rows a transposing copy reads side by side (a matmul's 1024x1024 B packed into panels: 35 -> 60 GB/s)
WORKGROUP_THREADS = 128    # threads per GPU workgroup the heuristics aim for
GROUP_THREADS = 256        # threads sharing one reduction
FEW_OUTPUTS = 2048         # below this many outputs a GPU reduction is shared by a workgroup
GPU_MIN_THREADS = 1024     # a register tile on a GPU leaves at least this many threads (one per tile)

def view_itemsize(k: Kernel, view) -> int:
  """Element size of the buffer a load view reads."""
  load = next(u for u in k.ast.toposort() if u.op.name == "LOAD" and u.src[1] is view)
  return load.src[0].dtype.base.itemsize

def _load_views(k: Kernel) -> list:
  """(view, ShapeTracker) of each memory load."""
  loaded = {u.src[1] for u in k.ast.toposort() if u.op.name == "LOAD"}
  return [(view, st) for view, st in zip(k.views, k.sts) if view in loaded]

def _loads(k: Kernel) -> list:
  """The ShapeTrackers of the memory loads that change along some axis (broadcast constants, stores and values read
  at one place for the whole kernel don't matter to the choices here)."""
  return [st for _, st in _load_views(k) if not (len(st.views) == 1 and st.views[-1].mask is None and not any(st.views[-1].strides))]

def _stride(st, axis: int) -> int | None:
  """A view's stride along `axis` (None where stacked views make it irregular)."""
  return st.views[-1].strides[axis] if len(st.views) == 1 else None

def _load_strides(k: Kernel, axis: int) -> list[int | None]:
  """Each memory load's stride along `axis` (None where stacked views make it irregular)."""
  return [_stride(st, axis) for st in _loads(k)]

def _window_reuse(k: Kernel, axis: int) -> int:
  """Loads that slide along `axis` as they do along the innermost reduction (which step 4 unrolls), like a
  convolution's input along its window: neighbouring positions of a tile along `axis` read the same values."""
  reduces = k.axes_of(AxisType.REDUCE)
  if not reduces: return 0
  strides = [st.views[-1].strides for st in _loads(k) if len(st.views) == 1]
  return sum(1 for s in strides if s[axis] != 0 and s[axis] == s[reduces[-1]])

def _bounds_padded_loop(k: Kernel, axis: int) -> bool:
  """Does stored padding tie `axis` to a reduction axis that stays a loop (all but the innermost, which is unrolled),
  so that the loop's bounds depend on it (a transposed convolution's output row and its kernel row)?"""
  loops = k.axes_of(AxisType.REDUCE)[:-1]
  hints = [st.views[-1].strides for view, st in zip(k.views, k.sts) if view in k.hint_views]
  return any(s[axis] != 0 and any(s[axis] == s[r] for r in loops) for s in hints)

def _step_ops(k: Kernel) -> int:
  """The arithmetic operations a reduction computes at each of its steps: those that depend on a value read along a
  reduction axis (the rest, such as a normalization's per-channel factors, is the same at every step)."""
  views, reduces = dict(zip(k.views, k.sts)), k.axes_of(AxisType.REDUCE)
  moving: set = set()
  for r in k.reduceops:
    for u in r.src[0].toposort():
      read = u.src[1] if u.op.name == "LOAD" else u.src[0] if u.op.name in ("VALID", "ARANGE") else None
      if (read is not None and any(_stride(views[read], a) != 0 for a in reduces)) or any(s in moving for s in u.src): moving.add(u)
  return sum(1 for u in moving if u.op in ELEMENTWISE)

def _lane_cost(k: Kernel, axis: int, width: int, ops: int, loads: list) -> float:
  """Estimated instructions per lane and reduction step when `axis` is computed as vectors of `width` lanes: each of
  the `ops` operations of a step (_step_ops, at least one) and each of the `loads` (_loads) that is contiguous or
  broadcast take one instruction per vector, any other load one per lane. An output axis's stores count the same way,
  but happen once per output, so they are spread over the reduction."""
  def per_lane(stride) -> float: return 1 / width if stride in (0, 1) else 1.0
  reduces = k.axes_of(AxisType.REDUCE)
  steps = max(prod(smax(k.full_shape[a]) for a in reduces), 1)
  def per_step(st) -> float:  # a load that doesn't move along the reduction (an epilogue's operand) happens once per output
    return 1 / steps if reduces and all(_stride(st, r) == 0 for r in reduces) else 1.0
  cost = ops / width + sum(per_lane(_stride(st, axis)) * per_step(st) for st in loads)
  if k.axis_types[axis] is AxisType.GLOBAL:
    stores = [_stride(st, axis) for v, st in zip(k.views, k.sts) if v in k.store_views]
    cost += sum(per_lane(s) for s in stores) / steps
  elif width > 1:  # lanes along the reduction: each output folds them, a shuffle and an op per halving
    cost += 2 * math.log2(width) / steps
  return cost

def _memory_operands(k: Kernel) -> list:
  """The ShapeTracker of every load and store; a view two loads read through (a ReLU's gradient reads its input and
  the incoming gradient alike) is there twice."""
  views = dict(zip(k.views, k.sts))
  return [views[u.src[1]] for u in k.ast.toposort() if u.op.name in ("LOAD", "STORE")]

def _copy_lane_cost(operands: list, axis: int, width: int) -> float:
  """Instructions per lane of an elementwise kernel with `width` lanes along output `axis`: each of its memory operands
  (_memory_operands) that is contiguous along it takes one per vector, any other one per lane; broadcast loads are left
  out (their value is one register, mostly hoisted out of the loop)."""
  return sum(0 if s == 0 else 1 / width if s == 1 else 1.0 for s in (_stride(st, axis) for st in operands))

def _tiles(k: Kernel, axes: list[int], budget: int):
  """Every register tile over `axes` (axis -> amount, each dividing the axis) whose positions fit in `budget`."""
  if not axes:
    yield {}
    return
  first, rest = axes[0], axes[1:]
  for amt in range(1, budget + 1):
    if k.full_shape[first] % amt == 0:
      for tile in _tiles(k, rest, budget // amt): yield {first: amt, **tile}

def _unrolled_steps(k: Kernel, size: int, slides: bool) -> int:
  """How many steps of an innermost reduction of `size` go into one loop iteration (step 4): all of a short one, else 4
  or 2 when the register tile slides along it (each step then loads only the values entering the window) or a CPU
  kernel's reduction is LONG_UNROLLED steps or more, else 2 (1 when neither divides it)."""
  if size <= MAX_UNROLL: return size
  by_four = slides or (k.splits_across_cores and size >= LONG_UNROLLED)
  return next((d for d in ((4, 2) if by_four else (2,)) if size % d == 0), 1)

def _tile_model(k: Kernel, lanes: int):
  """A function that estimates, for a register tile, (cost, registers): the cost of one reduction step per vector
  FMA, in load instructions plus LINE_COST per cache line filled, and the registers the tile's accumulators and
  operands hold. A tile is the current upcast axes plus more positions along output axes ({axis: amount}).
  - A load constant along a tile axis is shared by the tile's positions there.
  - One that slides along a tile axis as it does along the unrolled innermost reduction (a convolution's input
    along its window) is shared with the next steps, and those steps' values are live together.
  - Of the other loads, all but the one with the most values stay live while that one streams through a register
    (a matmul's B vectors stay, its A broadcasts stream).
  - A load contiguous along the vector lanes is one instruction; any other reads lane by lane.
  - Each step moves a load by its stride along the innermost reduction: a fresh line per position once that stride
    spans a line, a fraction of one before.
  - A load that doesn't move along the reduction (an epilogue's operand) is not part of the step."""
  reduces = k.axes_of(AxisType.REDUCE)
  inner = reduces[-1] if reduces else None
  upcast = {u: k.full_shape[u] for u in k.axes_of(AxisType.UPCAST)}
  loads = []
  for view, st in _load_views(k):
    regular = len(st.views) == 1 and all(isinstance(s, int) for s in st.views[-1].strides)
    if regular and all(st.views[-1].strides[r] == 0 for r in reduces): continue  # read once per output, after the reduction
    loads.append((st.views[-1].strides if regular else None, view_itemsize(k, view)))
  def model(extra: dict[int, int]) -> tuple[float, float]:
    tile = upcast | extra
    accumulators = prod(tile.values()) // lanes * max(len(k.reduceops), 1)
    cost, window_values, values = 0.0, 0.0, []
    for strides, itemsize in loads:
      if strides is None:  # irregular: every lane of every position is its own load and line
        cost += prod(tile.values()) * (1 + LINE_COST)
        values.append(prod(tile.values()) / lanes)
        continue
      slides = [a for a in tile if inner is not None and strides[a] and strides[a] == strides[inner]]
      unrolled = _unrolled_steps(k, k.full_shape[inner], bool(slides)) if inner is not None and isinstance(k.full_shape[inner], int) else 1
      instructions, live, lines = 1.0, 1.0, 1.0
      for a, n in tile.items():
        if strides[a] == 0: continue
        if a == k.vector_axis: per_step = live_values = 1 if strides[a] == 1 else n
        elif a in slides:
          if n > unrolled + 1: return math.inf, math.inf  # measured slower: x12 over a 5-wide window 1.4x, x10 over 3 wide 1.2x
          per_step, live_values = (n + unrolled - 1) / unrolled, n + unrolled - 1
        else: per_step = live_values = n
        instructions, live = instructions * per_step, live * live_values
        lines *= n if abs(strides[a]) * itemsize >= LINE_BYTES else n * abs(strides[a]) * itemsize / LINE_BYTES
      advance = abs(strides[inner]) * itemsize if inner is not None else 0
      cost += instructions + LINE_COST * max(lines, 1.0) * min(advance, LINE_BYTES) / LINE_BYTES
      if slides: window_values += live
      else: values.append(live)
    streamed = max(values, default=1.0) - 1
    return cost / max(accumulators, 1), accumulators + window_values + sum(values) - streamed
  return model

def hand_coded_optimizations(k: Kernel, vector_width: int = 4, vector_registers: int = 16) -> list[Opt]:
  """Apply the heuristic's choices to `k` and return them (vector_width: float lanes of the target's registers;
  vector_registers: how many of them a thread has)."""
  VECTOR_WIDTH = vector_width
  applied: list[Opt] = []
  def try_opt(opt: Opt) -> bool:
    try: k.apply_opt(opt)
    except KernelOptError: return False
    applied.append(opt)
    return True

  if TC and k.tensor_core_matches() and try_opt(Opt(OptOps.TC, 0, 0)):
    _tensor_core_tiles(k, try_opt)
    return applied

  if k.has_local and k.reduce_op and len(k.reduceops) == 1 and prod(smax(s) for s in k.output_shape) < FEW_OUTPUTS:
    reduces = k.axes_of(AxisType.REDUCE)
    amt = max((d for d in (GROUP_THREADS, 128, 64, 32, 16) if k.full_shape[reduces[-1]] % d == 0), default=None)
    if amt is not None and try_opt(Opt(OptOps.GROUP, reduces[-1], amt)):
      _workgroup(k, try_opt, GROUP_THREADS // amt)
      return applied

  if not k.reduce_op:
    # elementwise: vector lanes (as many as divide it) along the innermost output axis where they take fewer
    # instructions than scalar code (_copy_lane_cost); when that is fewer than a register holds, each iteration also
    # takes several steps of the next axis out. An outer axis whose loads are contiguous doesn't win over a store-
    # contiguous inner one: a scattered store to memory outside the caches costs more than gathered loads (the MNIST
    # step's ReLU gradient stored channels-last ran 8% slower in the step that way, though 20% faster from cache).
    operands = _memory_operands(k)
    for a in reversed(k.axes_of(AxisType.GLOBAL)):
      size = k.full_shape[a]
      width = max((w for w in (16, 8, 4, 2) if w <= VECTOR_WIDTH and isinstance(size, int) and size % w == 0), default=0)
      if not width or _copy_lane_cost(operands, a, width) >= _copy_lane_cost(operands, a, 1): continue
      if not try_opt(Opt(OptOps.UPCAST, a, width)): break
      try_opt(Opt(OptOps.VECTORIZE, a + 1 if size != width else a, 0))
      outer = [o for o in k.axes_of(AxisType.GLOBAL) if o < a]
      if width < VECTOR_WIDTH and outer:
        more = max((d for d in range(2, 2 * VECTOR_WIDTH // width + 1) if k.full_shape[outer[-1]] % d == 0), default=0)
        if more: try_opt(Opt(OptOps.UPCAST, outer[-1], more))
      break
    if k.splits_across_cores: _block_transposing_loads(k, try_opt)
    if k.has_local: _workgroup(k, try_opt, WORKGROUP_THREADS)
    return applied

  # 1. the vector axis: the output or reduction axis, split into whole vectors, with the lowest cost per lane
  widths = [w for w in (16, 8, 4, 2) if w <= max(VECTOR_WIDTH, 4)]
  ops, loads = max(_step_ops(k), 1), _loads(k)
  candidates = [(_lane_cost(k, a, width, ops, loads), width, a) for a in k.axes_of(AxisType.GLOBAL, AxisType.REDUCE)
                for width in widths if k.full_shape[a] % width == 0]
  # the cheapest (to a millionth), then the widest, then lanes along the reduction: each output's sum is then split
  # over the lanes, which keeps a long float32 sum exact for longer (2**32 ones summed to 2**32, not 2**29)
  best = min(candidates, key=lambda c: (round(c[0], 6), -c[1], k.axis_types[c[2]] is not AxisType.REDUCE), default=None)
  lanes = 1
  if best is not None and best[0] < min(_lane_cost(k, a, 1, ops, loads) for a in k.axes_of(AxisType.GLOBAL, AxisType.REDUCE)):
    _, width, a = best
    op = OptOps.UPCAST if k.axis_types[a] is AxisType.GLOBAL else OptOps.UNROLL
    splits = k.full_shape[a] != width
    if try_opt(Opt(op, a, width)) and try_opt(Opt(OptOps.VECTORIZE, a + 1 if splits else a, 0)): lanes = width
  vec_is_output = k.vector_axis is not None and k.axis_types[k.vector_axis] is AxisType.UPCAST

  # 2. register tile: the output axes to upcast, and by how much, that need the fewest loads and cache-line fills per
  # vector FMA with accumulators and operands in registers (_tile_model); only axes along which some load is
  # constant or slides, and not axes that bound a reduction loop through stored padding (a tile along them would
  # skip only the steps all its rows skip)
  tile_axes = [a for a in k.axes_of(AxisType.GLOBAL) if isinstance(k.full_shape[a], int) and not _bounds_padded_loop(k, a)
               and (any(s == 0 for s in _load_strides(k, a)) or _window_reuse(k, a))]
  model = _tile_model(k, lanes if vec_is_output else 1)
  scored = [(model(tile), tile) for tile in _tiles(k, tile_axes, vector_registers)]
  outputs = prod(smax(k.full_shape[a]) for a in k.axes_of(AxisType.GLOBAL))
  def parallel(tile: dict[int, int]) -> bool:  # a GPU keeps enough threads to fill its cores; a CPU splits rows
    return not k.has_local or outputs // prod(tile.values()) >= min(outputs, GPU_MIN_THREADS)
  fitting = [(cost, tile) for (cost, registers), tile in scored if registers <= vector_registers and parallel(tile)] or [(0.0, {})]
  cheapest = min(cost for cost, _ in fitting)
  # the smallest of the tiles that cost about the least: a larger one gains nothing measurable, and costs lowering time
  best = min((tile for cost, tile in fitting if cost <= cheapest * TILE_SLACK), key=lambda t: prod(t.values()))
  for a in sorted(best, reverse=True):  # from the last axis, so that splitting one leaves the others' positions alone
    if best[a] > 1: try_opt(Opt(OptOps.UPCAST, a, best[a]))

  # 2b. accumulators in flight: each add into an accumulator waits for the one before (a few cycles), so where each
  # accumulator takes a long chain of adds (LONG_CHAIN: too long for the core to overlap the next outputs' chains), a
  # tile whose accumulators hold fewer than LANES_IN_FLIGHT lanes in all takes more positions along output axes
  vector_lanes = k.full_shape[k.vector_axis] if k.vector_axis is not None else 1
  summed = prod(smax(k.full_shape[a]) for a in k.axes_of(AxisType.REDUCE, AxisType.UNROLL))
  chain = summed if vec_is_output else summed // vector_lanes  # lanes along a reduction split its chain
  if k.splits_across_cores and chain >= LONG_CHAIN:
    in_flight = vector_lanes * prod(k.full_shape[u] for u in k.axes_of(AxisType.UPCAST) if u != k.vector_axis)
    for a in reversed(k.axes_of(AxisType.GLOBAL)):  # innermost first
      if in_flight >= LANES_IN_FLIGHT or not isinstance(size := k.full_shape[a], int): continue
      amt = max((d for d in range(2, -(-LANES_IN_FLIGHT // in_flight) + 1) if size % d == 0), default=0)
      if amt and try_opt(Opt(OptOps.UPCAST, a, amt)): in_flight *= amt

  # 3. cache blocking: the loads that don't change along the outer output axis (a panel of B in a matmul) are read
  # again for each of its iterations; block the inner axis so one block of that data stays in cache
  if k.splits_across_cores and len(k.axes_of(AxisType.GLOBAL)) >= 2 and isinstance(k.full_shape[k.axes_of(AxisType.GLOBAL)[-1]], int):
    outer, inner = k.axes_of(AxisType.GLOBAL)[0], k.axes_of(AxisType.GLOBAL)[-1]
    reduced = prod(smax(k.full_shape[a]) for a in k.axes_of(AxisType.REDUCE, AxisType.UNROLL))
    per_step = 0
    for view, st in _load_views(k):
      if len(st.views) != 1: continue
      strides = st.views[-1].strides
      if strides[outer] == 0 and strides[inner] != 0:
        per_step += view_itemsize(k, view) * reduced * prod(k.full_shape[u] for u in k.axes_of(AxisType.UPCAST) if strides[u] != 0)
    if per_step:
      block, size = max(1, k.core_cache_bytes // CACHE_SHARE // per_step), k.full_shape[inner]
      # the largest block whose count splits evenly over the cores, else the largest: the loop over blocks becomes the
      # one cut into the cores' shares, each core working whole blocks of its own (a 896 matmul: 4 blocks 473 GFLOPS,
      # 7 blocks 468, as Kernel.core_axes shares an odd count with the rows; 413 before it did); one block leaves the
      # outer axis to be cut
      def even(d: int) -> bool: return size // d == 1 or (size // d) % k.cores == 0
      divisor = max((d for d in range(1, min(block, size) + 1) if size % d == 0), key=lambda d: (even(d), d))
      # blocks of one iteration: the whole inner axis goes outside (a THREAD amount of 0; 1 would split off nothing)
      if divisor < k.full_shape[inner]: try_opt(Opt(OptOps.THREAD, inner, divisor if divisor > 1 else 0))

  if k.has_local: _workgroup(k, try_opt, WORKGROUP_THREADS)

  # 4. unroll the innermost non-vector reduction: whole when it is short, else by 4 or 2 (_unrolled_steps)
  reduces = [a for a in k.axes_of(AxisType.REDUCE) if isinstance(k.full_shape[a], int)]
  if reduces:
    a = reduces[-1]
    size = k.full_shape[a]
    steps = _unrolled_steps(k, size, any(_window_reuse(k, u) for u in k.axes_of(AxisType.UPCAST)))
    if steps == size: try_opt(Opt(OptOps.UNROLL, a, 0))
    elif steps > 1: try_opt(Opt(OptOps.UNROLL, a, steps))
  return applied

def _block_transposing_loads(k: Kernel, try_opt) -> None:
  """An elementwise kernel that reads one page further at each step of its inner output axis, but a cache line or
  less further along an outer one (a transpose), reads TRANSPOSE_BLOCK rows side by side: the inner axis is cut into
  blocks that become the outermost loop, so each step of the outer axis reads on from where the last one read in every
  row of the block."""
  outputs = [a for a in k.axes_of(AxisType.GLOBAL) if isinstance(k.full_shape[a], int)]
  if len(outputs) < 2 or k.full_shape[inner := outputs[-1]] % TRANSPOSE_BLOCK or k.full_shape[inner] == TRANSPOSE_BLOCK: return
  def transposes(view, st) -> bool:
    size = view_itemsize(k, view)
    return (_stride(st, inner) or 0) * size >= PAGE_BYTES and any(0 < (_stride(st, o) or 0) * size <= LINE_BYTES for o in outputs[:-1])
  if any(transposes(view, st) for view, st in _load_views(k)): try_opt(Opt(OptOps.THREAD, inner, TRANSPOSE_BLOCK))

def _workgroup(k: Kernel, try_opt, max_threads: int) -> None:
  """Output axes become a workgroup's threads, innermost first (neighbouring threads touch neighbouring memory); an
  innermost axis that no useful size divides is padded first."""
  axes = [a for a in k.axes_of(AxisType.GLOBAL) if isinstance(k.full_shape[a], int)]
  if axes and k.full_shape[axes[-1]] > 32 and k.full_shape[axes[-1]] % 16: try_opt(Opt(OptOps.PADTO, axes[-1], 32))
  threads = prod(k.full_shape[a] for a in k.axes_of(AxisType.LOCAL, AxisType.GROUP))
  for a in reversed(axes):
    size = k.full_shape[a]
    amt = max((d for d in (256, 128, 64, 32, 16, 8, 4, 2) if size % d == 0 and threads * d <= max_threads), default=None)
    if amt is not None and try_opt(Opt(OptOps.LOCAL, a, amt)): threads *= amt
    if threads * 2 > max_threads: break

def _tensor_core_tiles(k: Kernel, try_opt) -> None:
  """After TC: each warp computes 2x2 tensor-core tiles (every operand fragment it loads serves two tiles), and a
  workgroup holds up to 2x2 warps. The tiles' outer axes sit just before their tensor-core axes."""
  for op, amt in ((OptOps.UPCAST, 2), (OptOps.LOCAL, 2)):
    for kind in (AxisType.TC_N, AxisType.TC_M):
      outer = k.axes_of(kind)[0] - 1
      if outer >= 0 and k.axis_types[outer] is AxisType.GLOBAL and k.full_shape[outer] % amt == 0: try_opt(Opt(op, outer, amt))
