"""A kernel AST with its iteration space: every view is reshaped in step, and optimization actions (upcast, unroll,
...) split axes and give them roles. The lowerer turns the result into a linear program."""
from __future__ import annotations
import enum
from dataclasses import dataclass
from ir.helpers import prod
from ir.ops import Ops
from ir.shapetracker import ShapeTracker
from ir.uop import UOp

class AxisType(enum.Enum):
  GLOBAL = "g"   # an output axis, looped over (CPU) or launched over (GPU)
  LOCAL = "l"    # an output axis inside a workgroup (GPU)
  REDUCE = "r"   # a reduction axis, looped over
  GROUP = "G"    # a reduction axis shared by a workgroup through local memory (GPU)
  UPCAST = "u"   # an output axis unrolled into registers
  UNROLL = "U"   # a reduction axis unrolled

REDUCE_TYPES = (AxisType.REDUCE, AxisType.GROUP, AxisType.UNROLL)

class OptOps(enum.Enum):
  UPCAST = enum.auto(); UNROLL = enum.auto(); LOCAL = enum.auto(); GROUP = enum.auto(); PADTO = enum.auto(); THREAD = enum.auto()
  def __repr__(self) -> str: return f"OptOps.{self.name}"

@dataclass(frozen=True)
class Opt:
  op: OptOps
  axis: int
  amt: int
  def __repr__(self) -> str: return f"Opt(op={self.op!r}, axis={self.axis}, arg={self.amt})"

class KernelOptError(ValueError): pass

class Kernel:
  def __init__(self, ast: UOp):
    if ast.op is not Ops.SINK or not all(s.op is Ops.STORE for s in ast.src): raise ValueError("a kernel AST is a SINK of STOREs")
    self.ast = ast
    order = ast.toposort()
    self.views: list[UOp] = [u for u in order if u.op is Ops.VIEW]
    self.sts: list[ShapeTracker] = [v.arg for v in self.views]
    self.reduceops: list[UOp] = [u for u in order if u.op is Ops.REDUCE_AXIS]
    self.store_views: set[UOp] = {s.src[1] for s in ast.src}
    self.globals: list[UOp] = sorted((u for u in order if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)
    ranks = {len(st.shape) for st in self.sts}
    if len(ranks) != 1: raise ValueError(f"kernel views have different ranks: {sorted(st.shape for st in self.sts)}")
    # post-reduce views have size 1 on reduced axes: an axis's size is any other size a view has there (0 included)
    self.full_shape: tuple[int, ...] = tuple(next((d for d in dims if d != 1), 1) for dims in zip(*(st.shape for st in self.sts)))
    reduce_axes = {a for r in self.reduceops for a in r.arg[1]}
    self.axis_types: list[AxisType] = [AxisType.REDUCE if i in reduce_axes else AxisType.GLOBAL for i in range(len(self.full_shape))]
    self.applied_opts: list[Opt] = []
    self.vector_axis: int | None = None  # the upcast or unrolled axis computed as vector lanes (None: the innermost upcast)
    self._simplify()

  @property
  def reduce_op(self) -> bool: return bool(self.reduceops)
  def axes_of(self, *types: AxisType) -> list[int]: return [i for i, t in enumerate(self.axis_types) if t in types]
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
        self._reshape_all(lambda shape, i=i: shape[:i] + (shape[i] * shape[i + 1],) + shape[i + 2:])
        del self.axis_types[i + 1]
      else: i += 1

  @staticmethod
  def _mergeable(st: ShapeTracker, i: int) -> bool:
    v = st.views[-1]
    return v.reshape(v.shape[:i] + (v.shape[i] * v.shape[i + 1],) + v.shape[i + 2:]) is not None

  def split_axis(self, axis: int, amt: int, new_type: AxisType) -> None:
    """Split `axis` into (size/amt, amt); the new inner axis gets `new_type`."""
    size = self.full_shape[axis]
    if amt <= 1 or size % amt: raise KernelOptError(f"can't split axis {axis} of size {size} by {amt}")
    def split(shape):
      inner = (size // amt, amt) if shape[axis] == size else (1, 1)
      return shape[:axis] + inner + shape[axis + 1:]
    self._reshape_all(split)
    self.axis_types.insert(axis + 1, new_type)
    if self.vector_axis is not None and self.vector_axis > axis: self.vector_axis += 1

  def apply_opt(self, opt: Opt) -> None:
    if not 0 <= opt.axis < len(self.full_shape): raise KernelOptError(f"{opt} names an axis outside {self.full_shape}")
    kind = self.axis_types[opt.axis]
    amt = opt.amt if opt.amt != 0 else self.full_shape[opt.axis]
    if opt.op is OptOps.UPCAST:
      if kind is not AxisType.GLOBAL: raise KernelOptError(f"UPCAST needs an output axis, axis {opt.axis} is {kind.name}")
      target = AxisType.UPCAST
    elif opt.op is OptOps.UNROLL:
      if kind is not AxisType.REDUCE: raise KernelOptError(f"UNROLL needs a reduce axis, axis {opt.axis} is {kind.name}")
      target = AxisType.UNROLL
    else: raise KernelOptError(f"{opt.op} is not supported by this kernel's target")
    if amt == self.full_shape[opt.axis]: self.axis_types[opt.axis] = target
    else: self.split_axis(opt.axis, amt, target)
    self.applied_opts.append(opt)

  @property
  def name(self) -> str:
    kind = "r" if self.reduce_op else "E"
    return kind + "".join(f"_{s}" for s in self.full_shape) if self.full_shape else kind
  @property
  def colored_shape(self) -> str:
    return " ".join(f"{s}{t.value}" for s, t in zip(self.full_shape, self.axis_types))
