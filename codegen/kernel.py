"""A kernel AST with its iteration space: every view is reshaped in step, and optimization actions (upcast, unroll,
...) split axes and give them roles. The lowerer turns the result into a linear program. An axis may have a
symbolic size (a Variable's expression): it is looped over (or launched over) whole, and no action splits it."""
from __future__ import annotations
import enum
from dataclasses import dataclass
from ir.helpers import prod
from ir.ops import Ops, STORED_ZEROS, ZERO_PRESERVING
from ir.shapetracker import ShapeTracker, is_symbolic
from ir.uop import UOp, sprod, variables
from codegen.renderer import Renderer
from codegen.tensor_core import TensorCore

class AxisType(enum.Enum):
  GLOBAL = "g"   # an output axis, looped over (CPU) or launched over (GPU)
  LOCAL = "l"    # an output axis inside a workgroup (GPU)
  REDUCE = "r"   # a reduction axis, looped over
  GROUP = "G"    # a reduction axis shared by a workgroup through local memory (GPU)
  UPCAST = "u"   # an output axis unrolled into registers
  UNROLL = "U"   # a reduction axis unrolled
  TC_M = "m"     # a tensor-core tile's rows, spread over a warp's lanes and registers
  TC_N = "n"     # a tensor-core tile's columns
  TC_K = "k"     # a tensor-core tile's reduction

REDUCE_TYPES = (AxisType.REDUCE, AxisType.GROUP, AxisType.UNROLL, AxisType.TC_K)

class OptOps(enum.Enum):
  UPCAST = enum.auto()     # split an output axis; the inner part is unrolled into registers
  UNROLL = enum.auto()     # split a reduction axis; the inner part is unrolled
  VECTORIZE = enum.auto()  # compute an upcast or unrolled axis as the lanes of vector values
  THREAD = enum.auto()     # make an output axis (amt > 0: its outer part, size/amt) the outermost loop, which a CPU splits across cores
  PADTO = enum.auto()      # pad an axis to a multiple of amt (the extra iterations are masked out)
  LOCAL = enum.auto()      # split an output axis; the inner part becomes threads of a workgroup (GPU)
  GROUP = enum.auto()      # split a reduction axis; the inner part is shared by a workgroup through local memory (GPU)
  TC = enum.auto()         # compute a matmul-shaped reduction with tensor cores (first action only; axis picks the axes)
  def __repr__(self) -> str: return f"OptOps.{self.name}"

@dataclass(frozen=True)
class TensorCoreMatch:
  """A way a tensor core can compute the reduction: sum over axis k of a[m, k] * b[k, n] (a, b: the operand subtrees)."""
  tc: TensorCore
  a: UOp
  b: UOp
  m: int
  n: int
  k: int

@dataclass(frozen=True)
class Opt:
  op: OptOps
  axis: int
  amt: int
  def __repr__(self) -> str: return f"Opt(op={self.op!r}, axis={self.axis}, arg={self.amt})"

class KernelOptError(ValueError): pass

def _boundaries(shape) -> set[int]:
  """The flat offsets at which the axes of a row-major `shape` begin to repeat."""
  return {prod(shape[i:]) for i in range(len(shape) + 1)}

def _crossings(outer, inner_shape) -> set[int]:
  """Flat offsets (in `outer`'s iteration order) where one of its axes, walking with its stride through the row-major
  index space of `inner_shape`, steps from one axis of that shape to the next."""
  marks = set()
  for a, (size, stride) in enumerate(zip(outer.shape, outer.strides)):
    if stride <= 0: continue
    for b in _boundaries(inner_shape):
      if b % stride == 0 and 1 < b // stride < size and size % (b // stride) == 0: marks.add(prod(outer.shape[a + 1:]) * (b // stride))
  return marks

def moving_axes(v) -> set[int]:
  """The axes along which view `v` reads different places or changes validity."""
  return {i for i, (s, n) in enumerate(zip(v.strides, v.shape)) if s != 0 or (v.mask is not None and v.mask[i] != (0, n))}

VECTOR_SIZES = (2, 4, 8, 16)

class Kernel:
  def __init__(self, ast: UOp, renderer=None):
    if ast.op is not Ops.SINK or not all(s.op is Ops.STORE for s in ast.src): raise ValueError("a kernel AST is a SINK of STOREs")
    self.ast = ast
    order = ast.toposort()
    self.views: list[UOp] = [u for u in order if u.op is Ops.VIEW]
    self.sts: list[ShapeTracker] = [v.arg for v in self.views]
    self.reduceops: list[UOp] = [u for u in order if u.op is Ops.REDUCE_AXIS]
    self.store_views: set[UOp] = {s.src[1] for s in ast.src}
    self.hint_views: set[UOp] = {u.src[0] for u in order if u.op is Ops.VALID and u.arg == STORED_ZEROS}
    self.globals: list[UOp] = sorted((u for u in order if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)
    ranks = {len(st.shape) for st in self.sts}
    if len(ranks) != 1: raise ValueError(f"kernel views have different ranks: {sorted(st.shape for st in self.sts)}")
    # post-reduce views have size 1 on reduced axes: an axis's size is any other size a view has there (0 included)
    self.full_shape: tuple = tuple(next((d for d in dims if d != 1), 1) for dims in zip(*(st.shape for st in self.sts)))
    reduce_axes = {a for r in self.reduceops for a in r.arg[1]}
    self.axis_types: list[AxisType] = [AxisType.REDUCE if i in reduce_axes else AxisType.GLOBAL for i in range(len(self.full_shape))]
    self.applied_opts: list[Opt] = []
    self.vector_axis: int | None = None  # the upcast or unrolled axis computed as vector lanes (None: the innermost upcast)
    self.has_local = bool(getattr(renderer, "has_local", False))
    self.splits_across_cores = bool(getattr(renderer, "splits_across_cores", False))
    self.cores = int(getattr(renderer, "cores", 1))
    self.core_cache_bytes = int(getattr(renderer, "core_cache_bytes", Renderer.core_cache_bytes))
    self.tensor_cores: tuple[TensorCore, ...] = tuple(getattr(renderer, "tensor_cores", ()))
    self.tensor_core: TensorCore | None = None   # set by TC, with the operand subtrees (A: m x k, B: k x n)
    self.tc_operands: tuple[UOp, UOp] = ()
    self._unstack_views()
    self._simplify()
    self.lanes_pinned = False  # vector_axis holds an image pixel's 4 channels and may not change (_pin_image_lanes)
    self._pin_image_lanes()

  @property
  def reduce_op(self) -> bool: return bool(self.reduceops)
  @property
  def variables(self) -> list[UOp]:
    """The Variables the kernel takes (in values and in symbolic view sizes), sorted by name."""
    found = {u for u in self.ast.toposort() if u.op is Ops.DEFINE_VAR}
    for st in self.sts:
      for v in st.views:
        found.update(x for d in (*v.shape, *v.strides, v.offset, *(b for m in v.mask or () for b in m)) if isinstance(d, UOp) for x in variables(d))
    return sorted(found, key=lambda v: v.arg)
  def axes_of(self, *types: AxisType) -> list[int]: return [i for i, t in enumerate(self.axis_types) if t in types]
  @property
  def core_axes(self) -> list[int]:
    """The output axes whose iterations a CPU's threads share, as one loop: the first, or the first two flattened when
    the first alone doesn't come out even over the cores (a 776 matmul's 5 blocks of B panels kept one of 2 cores busy
    3 blocks, the other 2)."""
    outputs = self.axes_of(AxisType.GLOBAL)
    if len(outputs) < 2 or not all(isinstance(self.full_shape[a], int) for a in outputs[:2]): return outputs[:1]
    return outputs[:1] if self.full_shape[outputs[0]] % self.cores == 0 else outputs[:2]
  @property
  def output_shape(self) -> tuple[int, ...]:
    return tuple(1 if t in REDUCE_TYPES else s for s, t in zip(self.full_shape, self.axis_types))

  def _reshape_all(self, new_shape_of) -> None:
    """Reshape the full shape and every view; `new_shape_of(shape)` maps an axis-aligned shape to its new form."""
    self.sts = [st.reshape(new_shape_of(st.shape)) for st in self.sts]
    self.full_shape = new_shape_of(self.full_shape)

  def _simplify(self) -> None:
    """Drop size-1 axes and merge neighbours that every view can walk as one axis."""
    keep = [i for i, s in enumerate(self.full_shape) if s != 1]
    self._reshape_all(lambda shape: tuple(shape[i] for i in keep))
    self.axis_types = [self.axis_types[i] for i in keep]
    i = 0
    while i < len(self.full_shape) - 1:
      if self.axis_types[i] == self.axis_types[i + 1] and all(self._mergeable(st, i) for st in self.sts):
        self._reshape_all(lambda shape, i=i: shape[:i] + (sprod(shape[i:i + 2]),) + shape[i + 2:])
        del self.axis_types[i + 1]
      else: i += 1

  def _unstack_views(self) -> None:
    """Iterate over a finer shape where that turns stacked views into single ones (a pool's window reshaped and
    permuted, say): each load then indexes with strides instead of a chain of divisions. An axis of the outermost view
    is cut where its walk (its stride) crosses an axis boundary of the view beneath; this repeats while it removes
    views. The cuts must divide each other; views after a reduction keep size 1 on the pieces of reduced axes."""
    if any(is_symbolic(v) for st in self.sts for v in st.views): return
    while True:
      marks = _boundaries(self.full_shape)
      for view, st in zip(self.views, self.sts):
        if view not in self.hint_views and len(st.views) > 1 and st.size == prod(self.full_shape):
          marks |= _crossings(st.views[-1], st.views[-2].shape)
      chain = sorted(marks)
      if len(chain) == len(_boundaries(self.full_shape)) or 0 in chain or any(b % a for a, b in zip(chain, chain[1:])): return
      groups, inner = [], 1  # each axis's pieces, outermost first
      for s in reversed(self.full_shape):
        cuts = [m for m in chain if inner <= m <= inner * s]
        groups.insert(0, tuple(b // a for a, b in zip(cuts, cuts[1:]))[::-1])
        inner *= s
      def finer(shape) -> tuple[int, ...]: return tuple(p if n == full else 1 for n, full, g in zip(shape, self.full_shape, groups) for p in g)
      sts = [st.reshape(finer(st.shape)) for st in self.sts]
      def stacked(sts) -> int: return sum(len(st.views) for view, st in zip(self.views, sts) if view not in self.hint_views)
      if stacked(sts) >= stacked(self.sts): return
      self.axis_types = [t for t, g in zip(self.axis_types, groups) for _ in g]
      self.sts, self.full_shape = sts, finer(self.full_shape)

  def _pin_image_lanes(self) -> None:
    """A kernel writes an image a whole pixel at a time: the output axis its stores walk contiguously is split by 4
    and those 4 become the vector lanes, for good (no later action may pick other lanes or resize these)."""
    image_views = {s.src[1] for s in self.ast.src if s.src[0].dtype.image}
    if not image_views: return
    def contiguous_axis(st: ShapeTracker) -> int | None:
      if len(st.views) != 1 or st.views[0].mask is not None: return None
      return next((a for a, (n, stride) in enumerate(zip(st.shape, st.views[0].strides))
                   if stride == 1 and self.axis_types[a] is AxisType.GLOBAL and isinstance(n, int) and n % 4 == 0), None)
    axes = {contiguous_axis(st) for v, st in zip(self.views, self.sts) if v in image_views}
    if len(axes) != 1 or (axis := axes.pop()) is None:
      raise ValueError(f"a kernel can write an image only through an unmasked view whose contiguous output axis is a multiple of 4 long, got {self.full_shape}")
    if self.full_shape[axis] == 4: self.axis_types[axis] = AxisType.UPCAST
    else:
      self.split_axis(axis, 4, AxisType.UPCAST)
      axis += 1
    self.vector_axis, self.lanes_pinned = axis, True

  @staticmethod
  def _mergeable(st: ShapeTracker, i: int) -> bool:
    v = st.views[-1]
    return v.reshape(v.shape[:i] + (v.shape[i] * v.shape[i + 1],) + v.shape[i + 2:]) is not None

  def split_axis(self, axis: int, amt: int, new_type: AxisType) -> None:
    """Split `axis` into (size/amt, amt); the new inner axis gets `new_type`."""
    size = self.full_shape[axis]
    if isinstance(size, UOp) or amt <= 1 or size % amt: raise KernelOptError(f"can't split axis {axis} of size {size} by {amt}")
    def split(shape):
      inner = (size // amt, amt) if shape[axis] == size else (1, 1)
      return shape[:axis] + inner + shape[axis + 1:]
    self._reshape_all(split)
    self.axis_types.insert(axis + 1, new_type)
    if self.vector_axis is not None and self.vector_axis > axis: self.vector_axis += 1

  def apply_opt(self, opt: Opt) -> None:
    """Apply one action; KernelOptError (and no change) when it doesn't fit this kernel or its target."""
    if not 0 <= opt.axis < len(self.full_shape): raise KernelOptError(f"{opt} names an axis outside {self.full_shape}")
    kind, size = self.axis_types[opt.axis], self.full_shape[opt.axis]
    if isinstance(size, UOp) and opt.op is not OptOps.TC and not (opt.op is OptOps.THREAD and opt.amt == 0):
      raise KernelOptError(f"{opt} acts on axis {opt.axis}, whose size {size} is known only at run time")
    amt = opt.amt if opt.amt != 0 else size
    if opt.op is OptOps.TC: self._apply_tensor_core(opt)
    elif opt.op is OptOps.VECTORIZE:
      if self.tensor_core is not None: raise KernelOptError("VECTORIZE doesn't combine with tensor cores")
      if kind not in (AxisType.UPCAST, AxisType.UNROLL) or size not in VECTOR_SIZES:
        raise KernelOptError(f"VECTORIZE needs an upcast or unrolled axis of {VECTOR_SIZES} lanes, axis {opt.axis} is {size}{kind.value}")
      if self.lanes_pinned and opt.axis != self.vector_axis: raise KernelOptError("an image-writing kernel's lanes are its pixels' channels")
      self.vector_axis = opt.axis
    elif opt.op is OptOps.THREAD:
      if not self.splits_across_cores or kind is not AxisType.GLOBAL: raise KernelOptError(f"THREAD needs an output axis on a CPU target")
      if opt.amt and amt != size: self.split_axis(opt.axis, amt, AxisType.GLOBAL)  # outer blocks of amt iterations
      self._move_to_front(opt.axis)
    elif opt.op is OptOps.PADTO:
      if self.lanes_pinned and opt.axis == self.vector_axis: raise KernelOptError("an image pixel's channels can't be padded")
      if kind in (AxisType.TC_M, AxisType.TC_N, AxisType.TC_K): raise KernelOptError("a tensor-core axis can't be padded")
      self._pad_to(opt.axis, amt)
    else:
      wanted = {OptOps.UPCAST: (AxisType.GLOBAL, AxisType.UPCAST), OptOps.UNROLL: (AxisType.REDUCE, AxisType.UNROLL),
                OptOps.LOCAL: (AxisType.GLOBAL, AxisType.LOCAL), OptOps.GROUP: (AxisType.REDUCE, AxisType.GROUP)}[opt.op]
      if kind is not wanted[0]: raise KernelOptError(f"{opt.op.name} needs a {wanted[0].name} axis, axis {opt.axis} is {kind.name}")
      if opt.op in (OptOps.LOCAL, OptOps.GROUP) and not self.has_local: raise KernelOptError(f"{opt.op.name} needs a target with workgroups")
      if opt.op is OptOps.LOCAL and self.tensor_core is not None and self.tensor_core.b_in_shared:
        raise KernelOptError("LOCAL doesn't combine with wgmma (a workgroup is one warpgroup staging its B tiles)")
      if opt.op is OptOps.GROUP and (self.axes_of(AxisType.UPCAST) or len(self.reduceops) > 1 or self.tensor_core is not None):
        raise KernelOptError("GROUP works on kernels with one reduction, no upcast axes and no tensor cores")
      if opt.op is OptOps.UPCAST and AxisType.GROUP in self.axis_types: raise KernelOptError("UPCAST after GROUP is not supported")
      if amt == size: self.axis_types[opt.axis] = wanted[1]
      else: self.split_axis(opt.axis, amt, wanted[1])
    self.applied_opts.append(opt)

  def tensor_core_matches(self) -> list[TensorCoreMatch]:
    """The ways this kernel's reduction maps onto the target's tensor cores, innermost axes first."""
    if not self.tensor_cores or len(self.reduceops) != 1 or self.reduceops[0].arg[0] is not Ops.ADD: return []
    r = self.reduceops[0]
    src = r.src[0]
    if src.op is Ops.CAST and src.src[0].op is Ops.MUL: operands = src.src[0].src      # cast(a * b)
    elif src.op is Ops.MUL and all(s.op is Ops.CAST for s in src.src): operands = tuple(s.src[0] for s in src.src)  # cast(a) * cast(b)
    else: return []
    varies = [self.varying_axes(x) for x in operands]
    out = []
    for tc in self.tensor_cores:
      if r.dtype != tc.dtype_acc or any(x.dtype != tc.dtype_in for x in operands): continue
      M, N, K = tc.dims
      pairs = list(zip(operands, varies))
      for (a, va), (b, vb) in (pairs, pairs[::-1]):
        fits = lambda i, d: isinstance(self.full_shape[i], int) and self.full_shape[i] % d == 0
        ms = [i for i in self.axes_of(AxisType.GLOBAL) if i in va and i not in vb and fits(i, M)]
        ns = [i for i in self.axes_of(AxisType.GLOBAL) if i in vb and i not in va and fits(i, N)]
        ks = [i for i in self.axes_of(AxisType.REDUCE) if i in va and i in vb and fits(i, K)]
        out += [TensorCoreMatch(tc, a, b, m, n, k) for m in reversed(ms) for n in reversed(ns) for k in reversed(ks)]
    return out

  def varying_axes(self, node: UOp) -> set[int]:
    """The axes along which `node`'s value may change (all of them where views are stacked or indices computed)."""
    every = set(range(len(self.full_shape)))
    view_st = dict(zip(self.views, self.sts))
    out: set[int] = set()
    for u in node.toposort():
      if u.op is Ops.LOAD and len(u.src) == 3: return every
      if u.op is not Ops.VIEW: continue
      st = view_st[u]
      if len(st.views) != 1: return every
      out |= moving_axes(st.views[0])
    return out

  def _apply_tensor_core(self, opt: Opt) -> None:
    if self.applied_opts: raise KernelOptError("TC must be the first action")
    matches = self.tensor_core_matches()
    if opt.amt != 0 or not 0 <= opt.axis < len(matches):
      raise KernelOptError(f"{opt}: this kernel has {len(matches)} tensor-core mapping(s) on this target (arg must be 0)")
    match = matches[opt.axis]
    M, N, K = match.tc.dims
    # split from the last axis back, so the earlier axis numbers stay valid; each split adds one axis after its own
    splits = sorted([(match.m, M, AxisType.TC_M), (match.n, N, AxisType.TC_N), (match.k, K, AxisType.TC_K)], reverse=True)
    for axis, amt, kind in splits:
      if self.full_shape[axis] == amt: self.axis_types[axis] = kind
      else: self.split_axis(axis, amt, kind)
    self.tensor_core, self.tc_operands = match.tc, (match.a, match.b)

  def _move_to_front(self, axis: int) -> None:
    """Reorder the output axes so that `axis` is the outermost loop."""
    first = self.axes_of(AxisType.GLOBAL)[0]
    order = list(range(len(self.full_shape)))
    order.insert(first, order.pop(axis))
    self.sts = [st.permute(order) for st in self.sts]
    self.full_shape = tuple(self.full_shape[i] for i in order)
    self.axis_types = [self.axis_types[i] for i in order]
    if self.vector_axis is not None: self.vector_axis = order.index(self.vector_axis)

  def _pad_to(self, axis: int, amt: int) -> None:
    """Grow `axis` to a multiple of amt; views read zeros (and stores skip) the padded part. A reduction axis may only
    be padded when every op between the loads and the sum keeps zero at zero."""
    size = self.full_shape[axis]
    if amt <= 1 or size % amt == 0: raise KernelOptError(f"PADTO {amt} on axis {axis} of size {size} changes nothing")
    if self.axis_types[axis] in REDUCE_TYPES:
      if any(r.arg[0] is not Ops.ADD for r in self.reduceops): raise KernelOptError("only a sum can be padded along its reduction axis")
      for r in self.reduceops:
        if any(u.op not in ZERO_PRESERVING and u.op not in (Ops.LOAD, Ops.VIEW, Ops.CONST, Ops.DEFINE_GLOBAL, Ops.VALID, Ops.DEFINE_VAR)
               for u in r.src[0].toposort()):
          raise KernelOptError("padding this reduction would add nonzero values")
    extra = -size % amt
    self.sts = [st.pad(tuple((0, extra if i == axis and st.shape[i] == size else 0) for i in range(len(st.shape)))) for st in self.sts]
    self.full_shape = self.full_shape[:axis] + (size + extra,) + self.full_shape[axis + 1:]

  @property
  def name(self) -> str:
    kind = "r" if self.reduce_op else "E"
    dim = lambda s: str(s) if isinstance(s, int) else "".join(v.arg[0] for v in variables(s))  # a symbolic size by its Variables
    return kind + "".join(f"_{dim(s)}" for s in self.full_shape) if self.full_shape else kind
  @property
  def colored_shape(self) -> str:
    return " ".join(f"{s}{t.value}" for s, t in zip(self.full_shape, self.axis_types))
