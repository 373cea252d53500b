"""The scheduler: cuts a lazy tensor graph into kernels.

Every node that must exist in memory (requested outputs, reductions, CONTIGUOUS, COPY, ASSIGN, and elementwise work
that would otherwise be recomputed many times under a broadcast) becomes a kernel root. A kernel is built by pushing
the root's view down through elementwise ops to the loads of other roots and buffers, so a chain of elementwise ops
is one kernel and elementwise work before a reduction runs inside it. A reduction whose only consumer kernel reads it
through a plain reshape is then fused into that kernel, so elementwise work after a reduction runs in it too. An
elementwise node that a permuted CONTIGUOUS copy stores and other nodes read is stored once, laid out as the copy.
Before any of this, factors that don't vary along a sum's axes move out of it (so equal sums meet as one node), and big
reductions are split in two kernels.

Variables bound in the graph (`t[:v.bind(3)]`) are taken out first (`unbind`): kernels see the Variable, so one
compiled kernel serves every value; a symbolically shaped result gets a buffer for the Variables' largest values."""
from __future__ import annotations
import collections, functools, operator, sys
from dataclasses import dataclass, field
from ir.dtype import dtypes
from ir.helpers import argsort, prod
from ir.ops import Ops, ALU, ELEMENTWISE, MOVEMENT, STORED_ZEROS, TRANSCENDENTAL, ZERO_PRESERVING
from ir.switches import SPLIT_REDUCEOP
from ir import tracing
from ir.pattern import substitute
from ir.shapetracker import ShapeTracker, is_symbolic, strides_for_shape
from ir.uop import UOp, all_int, map_args, smax, sprod
from drivers.device import Buffer, Device, Image, image_for

sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))

# an elementwise node that a broadcast makes every consumer recompute many times is stored once when it costs this much
EXPENSIVE_ALU_OPS = 8
# an elementwise node a reduction reads through a broadcast (a convolution's input, a matmul's operand) is recomputed
# for each output that reads it: one of at least this many elements is stored when it does any arithmetic (a smaller
# one costs less to recompute than a kernel launch)
STORED_OPERAND_SIZE = 1 << 16
# reductions over at least SPLIT_MIN_REDUCE elements per output, and over at least SPLIT_MIN_RATIO times as many
# elements as there are outputs, are split in two kernels (up to SPLIT_MAX_OUTPUT partial results); a convolution's
# weight gradient qualifies: a chunk of the batch then stays in cache while every output reads it
SPLIT_MIN_REDUCE, SPLIT_MIN_RATIO, SPLIT_MAX_OUTPUT = 1 << 14, 0.25, 1 << 22
# a kernel that would hold more than this many (node, view) pairs (cat/pad chains multiply their views) stores an
# intermediate instead, so lowering stays linear in the graph's size
MAX_KERNEL_NODES = 1024
# a product tree is split into at most this many factors when constants are pulled out of a sum (x*x*x*... shares nodes)
MAX_FACTORS = 32
# the arg of a CONTIGUOUS whose buffer should be an image (IMAGE=1: Tensor.image_conv2d's packed operands)
AS_IMAGE = "image"

class _KernelTooBig(Exception):
  def __init__(self, views: collections.Counter): self.views = views  # how often each node was reached, so far

@dataclass
class ScheduleItem:
  ast: UOp                     # a SINK of STOREs (a kernel), or a COPY
  bufs: list[Buffer]           # DEFINE_GLOBAL order: outputs first; for a COPY (dest, src)
  var_vals: dict[str, int] = field(default_factory=dict)
  writes_version: int = 0      # k > 0: the k-th ASSIGN into an existing buffer in this schedule; 0: a fresh buffer
  reads: dict[Buffer, int] = field(default_factory=dict)  # version of each buffer read (k: as left by the k-th ASSIGN)

def movement_view(u: UOp, stop=lambda u: False) -> tuple[UOp, ShapeTracker]:
  """(base, view): the node under `u`'s movement ops (or the first one `stop` accepts), and how `u` indexes it."""
  chain = []
  while u.op in MOVEMENT and (not chain or not stop(u)):
    chain.append(u)
    u = u.src[0]
  st = ShapeTracker.from_shape(u.shape)
  for m in reversed(chain): st = getattr(st, m.op.name.lower())(m.arg)
  return u, st

def _permuted(u: UOp) -> tuple[UOp, tuple[int, ...]]:
  """(base, order): `u` is base.permute(order), through any number of PERMUTEs (none: the identity order)."""
  order = tuple(range(len(u.shape)))
  while u.op is Ops.PERMUTE:
    order = tuple(u.arg[o] for o in order)
    u = u.src[0]
  return u, order

def buffer_of(u: UOp) -> tuple[Buffer, ShapeTracker] | None:
  """The buffer `u` reads in place, with its view, when `u` is movement ops over a realized BUFFER (or over an
  ASSIGN into one, which is the same memory)."""
  base, st = movement_view(u)
  if base.op is Ops.ASSIGN:
    if (inner := buffer_of(base.src[0])) is None: return None
    return inner[0], inner[1] + st
  return (base.arg[0], st) if base.op is Ops.BUFFER else None

def contiguous_region(u: UOp) -> Buffer | None:
  """The memory `u` covers when it is a row-major byte range of a realized buffer (the buffer or a view of it)."""
  found = buffer_of(u)
  if found is None or any(is_symbolic(v) for v in found[1].views): return None
  buf, st = found
  v = st.views[0]
  if len(st.views) != 1 or v.mask is not None or v.offset < 0 or v.strides != strides_for_shape(st.shape): return None
  if v.offset == 0 and st.size == buf.size and u.dtype == buf.dtype: return buf
  if buf.base.image is not None: return None  # an image's memory has no byte ranges to view
  return buf.base.view(st.size, u.dtype, buf.offset + v.offset * buf.dtype.itemsize)

def _masked(st: ShapeTracker) -> bool: return any(v.mask is not None for v in st.views)

def split_reduce(u: UOp) -> UOp | None:
  """A big reduction into a small output as two kernels: chunks of its outermost reduced axis first (so each
  chunk's inputs stay in cache and the chunks run in parallel), then the sum over chunks."""
  op, axes = u.arg
  x = u.src[0]
  if not all_int(x.shape): return None  # its size is known only at run time
  reduced, out = prod(x.shape[a] for a in axes), prod(u.shape)
  if reduced < SPLIT_MIN_REDUCE or reduced < SPLIT_MIN_RATIO * out: return None
  a = axes[0]
  size = x.shape[a]
  split = next((f for f in (32, 16, 8, 4, 2) if size % f == 0 and size // f >= 2 and f * out <= SPLIT_MAX_OUTPUT), None)
  if split is None: return None
  x2 = x.reshape(x.shape[:a] + (split, size // split) + x.shape[a + 1:])
  new_axes = tuple(ax + 1 if ax >= a else ax for ax in axes)  # reduce everything but the chunk axis
  first = UOp(Ops.CONTIGUOUS, u.dtype, (x2.r(op, new_axes),))
  return first.r(op, (a,)).reshape(u.shape)

def _split(u: UOp) -> UOp: return (split_reduce(u) or u) if SPLIT_REDUCEOP and u.op is Ops.REDUCE_AXIS else u

def _invariant(u: UOp, axes: tuple[int, ...], memo: dict[UOp, UOp | None]) -> UOp | None:
  """u with size 1 along `axes` when it doesn't vary along them (a broadcast, or elementwise math on broadcasts)."""
  if u not in memo:
    memo[u] = None
    if u.op is Ops.EXPAND and all(u.src[0].shape[a] == 1 for a in axes):
      memo[u] = u.src[0].expand(tuple(1 if i in axes else s for i, s in enumerate(u.shape)))
    elif u.op in ELEMENTWISE:
      src: list[UOp] = []
      for s in u.src:
        if (small := _invariant(s, axes, memo)) is None: return None
        src.append(small)
      memo[u] = UOp(u.op, u.dtype, tuple(src), u.arg)
  return memo[u]

def _factors(u: UOp) -> tuple[list[UOp], bool]:
  """The factors of a product tree (through MUL and NEG) and whether the product is negated."""
  factors, negated, stack = [], False, [u]
  while stack:
    n = stack.pop()
    if n.op is Ops.MUL and len(stack) + len(factors) < MAX_FACTORS: stack += reversed(n.src)
    elif n.op is Ops.NEG: stack.append(n.src[0]); negated = not negated
    else: factors.append(n)
  return factors, negated

def factor_sum(u: UOp) -> UOp | None:
  """sum(a * c) as c * sum(a) when c doesn't vary along the summed axes: the sums of a normalization's backward pass
  (sum(g * w * (x - mean)), sum(g * invstd * (x - mean)), ...) then become the same node, computed once."""
  op, axes = u.arg
  if op is not Ops.ADD: return None
  factors, negated = _factors(u.src[0])
  memo: dict[UOp, UOp | None] = {}
  small = [_invariant(f, axes, memo) for f in factors]
  varying = [f for f, s in zip(factors, small) if s is None]
  if not varying or len(varying) == len(factors) and not negated: return None
  out = _split(functools.reduce(operator.mul, varying).r(Ops.ADD, axes))
  for s in small:
    if s is not None: out = out * s
  return -out if negated else out

def _rewrite_reductions(targets: list[UOp]) -> tuple[list[UOp], dict[UOp, UOp]]:
  """The targets with constant factors pulled out of float sums and every big reduction split; {original node: its
  replacement} for nodes that changed."""
  new: dict[UOp, UOp] = {}
  for n in UOp(Ops.SINK, dtypes.void, tuple(targets)).toposort()[:-1]:
    src = tuple(new[x] for x in n.src)
    rebuilt = n if all(a is b for a, b in zip(src, n.src)) else UOp(n.op, n.dtype, src, n.arg)
    new[n] = rebuilt
    if rebuilt.op is Ops.REDUCE_AXIS and dtypes.is_float(n.dtype):
      if (factored := factor_sum(rebuilt)) is not None: new[n] = _reported(rebuilt, factored, factor_sum)
      else: new[n] = _reported(rebuilt, _split(rebuilt), split_reduce)
  return [new[t] for t in targets], {k: v for k, v in new.items() if k is not v}

def _reported(before: UOp, after: UOp, rule) -> UOp:
  """`after`, told to a watching tracer (VIZ) as a rewrite of `before` by `rule` when it differs."""
  if after is not before and tracing.tracer is not None: tracing.tracer.rewrite(before, after, [rule])
  return after

class Scheduler:
  def __init__(self, targets: list[UOp]):
    tracing.stage("graph", targets)
    targets, self.replaced = _rewrite_reductions(targets)
    tracing.stage("reductions", targets)
    self.targets = targets
    self.order = UOp(Ops.SINK, dtypes.void, tuple(targets)).toposort()[:-1]
    self.position = {u: i for i, u in enumerate(self.order)}
    self.devices: dict[UOp, str] = {}
    self.consumers: dict[UOp, list[UOp]] = {u: [] for u in self.order}
    for u in self.order:
      for s in u.src: self.consumers[s].append(u)
      self.devices[u] = self._device(u)
    self.roots: set[UOp] = set()
    self.items: list[ScheduleItem] = []
    self.becomes: dict[UOp, UOp] = {}
    self.assign_version: dict[UOp, int] = {}
    self.assigns_into: dict[Buffer, int] = {}
    self.layouts: dict[UOp, tuple[UOp, tuple[int, ...]]] = {}  # stored node: (its permuted copy, the copy's axes in the node's order)

  def _device(self, u: UOp) -> str | None:
    if u.op is Ops.BUFFER: return u.arg[0].device
    if u.op is Ops.DEVICE: return u.arg
    if u.op is Ops.COPY: return u.arg
    return next((d for s in u.src if (d := self.devices.get(s)) is not None), None)

  # ---- which nodes are stored ----
  def choose_roots(self) -> None:
    for t in self.targets:
      base = t.base
      if base.op is Ops.BUFFER: continue
      self.roots.add(t if base.op in (Ops.CONST, Ops.DEFINE_VAR, Ops.ARANGE) else base)
    for u in self.order:
      if u.op in (Ops.CONTIGUOUS, Ops.COPY, Ops.ASSIGN, Ops.REDUCE_AXIS): self.roots.add(u)
      if u.op is Ops.TAKE and buffer_of(u.src[0]) is None: self.roots.add(u.src[0])  # a gather reads memory
      if u.op is Ops.CONTIGUOUS and self._is_whole_buffer(u.src[0]) and self._image_of(u) is None:  # already contiguous memory: nothing to copy
        self.roots.discard(u)
        self.becomes[u] = u.src[0]
      if u.op is Ops.COPY and contiguous_region(u.src[0]) is None: self.roots.add(u.src[0])
      if u.op is Ops.ASSIGN and u.src[1].op is Ops.COPY and contiguous_region(u.src[0]) is not None: self.roots.discard(u.src[1])
    for u in self.order:
      if u.op in ELEMENTWISE and u not in self.roots and self._broadcast_consumed(u) and self._local_cost(u) >= EXPENSIVE_ALU_OPS: self.roots.add(u)
      if u.op in ELEMENTWISE and u not in self.roots and self._big_reduction_operand(u) and self._local_cost(u) >= 1 and self._reads_memory(u): self.roots.add(u)
      # padding read through overlapping windows (convolutions): store it once, so the windowed loads need no masks
      if u.op is Ops.PAD and self._broadcast_consumed(u): self.roots.add(u)
    for u in self.order:
      if u.op is Ops.CONTIGUOUS and u in self.roots: self._store_in_copy_layout(u)

  def _store_in_copy_layout(self, copy: UOp) -> None:
    """A CONTIGUOUS copy of a permuted elementwise node that other nodes read too and that isn't stored otherwise: the
    node is stored once, laid out as the copy is, and the copy is a view of it, so the other readers don't compute it
    again (a ReLU's gradient that a convolution's weight gradient reads with channels innermost and its bias gradient
    sums). A node stored anyway keeps its row-major buffer: readers through other views (a padded copy) are slower on
    the permuted one."""
    base, order = _permuted(copy.src[0])
    if base.op not in ELEMENTWISE or base in self.roots or len(self._value_consumers(base)) < 2: return
    if not all_int(base.shape) or prod(base.shape) == 0 or self._image_of(copy) is not None: return
    if any(t.base is base for t in self.targets): return  # a requested output keeps its own row-major buffer
    self.roots.discard(copy)
    self.roots.add(base)
    self.layouts[base] = (copy, tuple(argsort(order)))

  def _is_whole_buffer(self, u: UOp) -> bool:
    b = buffer_of(u)
    return b is not None and b[1].contiguous and b[1].size == b[0].size

  def _value_consumers(self, u: UOp) -> list[UOp]:
    """The nodes that use `u`'s value, seen through the ops that pass it on unchanged (DETACH, CONTIGUOUS_BACKWARD,
    and GRAD_OVERRIDE, whose other sources are only for the backward pass)."""
    out: list[UOp] = []
    for c in self.consumers[u]:
      if c.op in (Ops.DETACH, Ops.CONTIGUOUS_BACKWARD) or (c.op is Ops.GRAD_OVERRIDE and c.src[0] is u): out += self._value_consumers(c)
      elif c.op is not Ops.GRAD_OVERRIDE: out.append(c)
    return out

  def _broadcast_consumed(self, u: UOp) -> bool:
    """Does some consumer reach `u` through an EXPAND (so a fused kernel would compute it more than once)?"""
    stack = self._value_consumers(u)
    while stack:
      c = stack.pop()
      if c.op is Ops.EXPAND: return True
      if c.op in MOVEMENT: stack.extend(self._value_consumers(c))
    return False

  def _big_reduction_operand(self, u: UOp) -> bool:
    """Is `u` at least STORED_OPERAND_SIZE elements that a reduction reads through a broadcast (movement ops, an
    EXPAND, then elementwise ops), so that every element is computed again for each output reading it?"""
    if not all_int(u.shape) or sprod(u.shape) < STORED_OPERAND_SIZE: return False
    stack, seen = [(c, False) for c in self._value_consumers(u)], set()
    while stack:
      c, expanded = stack.pop()
      if (c, expanded) in seen: continue
      seen.add((c, expanded))
      if c.op is Ops.REDUCE_AXIS and expanded: return True
      if c.op in MOVEMENT or (expanded and c.op in ELEMENTWISE): stack.extend((n, expanded or c.op is Ops.EXPAND) for n in self._value_consumers(c))
    return False

  def _reads_memory(self, u: UOp) -> bool:
    """Does computing `u` load anything? A function of indices alone (a triangular mask from two aranges) costs a
    kernel no more to compute again than to load."""
    loaded = lambda n: n.op is Ops.BUFFER or (n is not u and n in self.roots)
    return any(loaded(n) for n in u.toposort(stop=loaded))  # up to the stored nodes it reads, not past them

  def _local_cost(self, u: UOp) -> int:
    """ALU ops a kernel recomputes to produce one element of `u` (transcendental ops count as expensive)."""
    seen, cost, stack = set(), 0, [u]
    while stack:
      n = stack.pop()
      if n in seen or (n is not u and n in self.roots) or n.op is Ops.BUFFER: continue
      seen.add(n)
      if n.op in ALU: cost += EXPENSIVE_ALU_OPS if n.op in TRANSCENDENTAL else 1
      stack.extend(n.src)
    return cost

  # ---- kernel construction ----
  def schedule(self) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
    self.choose_roots()
    for u in self.order:
      if u in self.roots: self._schedule_root(u)
    keep = {b[0] for t in self.targets for n in (t, t.base) if n in self.becomes and (b := buffer_of(self.becomes[n]))}
    dropped = _fuse_reductions(self.items, keep)
    self.becomes = {k: v for k, v in self.becomes.items() if (b := buffer_of(v)) is None or b[0] not in dropped}
    for old, new in self.replaced.items():  # nodes of the caller's graph that were rewritten (split reductions)
      if new in self.becomes: self.becomes[old] = self.becomes[new]
      elif new.base in self.becomes: self.becomes[old] = substitute(new, {new.base: self.becomes[new.base]})  # a view of a stored node
    items = _order(_merge_sibling_reductions(self.items))
    tracing.stage("kernels", items)
    return items, self.becomes

  def _schedule_root(self, u: UOp) -> None:
    if sprod(u.shape) == 0 and u.op is not Ops.ASSIGN:
      self.becomes[u] = UOp(Ops.BUFFER, u.dtype, (), (Buffer(self.devices[u], 0, u.dtype),)).reshape(u.shape)
      return
    if u.op is Ops.COPY:
      if not all_int(u.shape): raise NotImplementedError(f"copying a tensor of symbolic shape {u.shape} to {u.arg} is not supported")
      src = contiguous_region(u.src[0]) or contiguous_region(self.becomes[u.src[0]])
      out = self._new_buffer(u)
      self.items.append(ScheduleItem(u, [out, src]))
      return
    if u.op is Ops.ASSIGN: self._schedule_assign(u)
    elif u in self.layouts: self._schedule_in_copy_layout(u)
    else:
      out = self._new_buffer(u)
      self._emit_kernel(u, out, ShapeTracker.from_shape(u.shape), self._value_of(u))

  def _schedule_in_copy_layout(self, u: UOp) -> None:
    copy, back = self.layouts[u]
    out = self._new_buffer(copy)
    self.becomes[u] = self.becomes[copy].permute(back)
    self._emit_kernel(u, out, ShapeTracker.from_shape(copy.shape).permute(back), u)

  def _value_of(self, u: UOp) -> UOp:
    return u.src[0] if u.op is Ops.CONTIGUOUS else u

  def _image_of(self, u: UOp) -> Image | None:
    """The image a CONTIGUOUS asked to be stored as one (Tensor._as_image) becomes, where its device has images."""
    if u.op is not Ops.CONTIGUOUS or u.arg != AS_IMAGE or not isinstance(device := self.devices[u], str): return None
    return image_for(u.shape, u.dtype, Device[device].image_size)

  def _new_buffer(self, u: UOp) -> Buffer:
    """A buffer for `u`; for a symbolic shape one as big as the Variables' largest values, read through the front."""
    size = sprod(u.shape)
    buf = Buffer(self.devices[u], smax(size), u.dtype, options=self._image_of(u))
    whole = UOp(Ops.BUFFER, u.dtype, (), (buf,))
    self.becomes[u] = (whole if isinstance(size, int) else whole.shrink(((0, size),))).reshape(u.shape)
    return buf

  def _schedule_assign(self, u: UOp) -> None:
    target, value = u.src
    if (tb := buffer_of(target)) is None: raise RuntimeError("ASSIGN target is not a realized buffer")
    buf, st = tb
    if value.op is Ops.COPY and (dest := contiguous_region(target)) is not None and (src := contiguous_region(value.src[0])) is not None:
      # a copy straight into the target's memory (the way to write a DISK tensor)
      item = ScheduleItem(value, [dest, src])
      item.writes_version = self.assign_version[u] = self.assigns_into[buf] = self.assigns_into.get(buf, 0) + 1
      self.items.append(item)
      self.becomes[u] = _resolve(target)
      return
    item = self._build_kernel(u, buf, st, value)
    if any(x.op is Ops.LOAD and item.bufs[x.src[0].arg] is buf and (x.src[1].arg != st or len(x.src) > 2 or buf.image) for x in item.ast.toposort()):
      # the value reads the target at other places than the kernel writes (or the target is an image, which a kernel
      # can't both read and write): store the value first
      self.roots.add(value)
      self._schedule_root(value)
      item = self._build_kernel(u, buf, st, value)
    item.writes_version = self.assign_version[u] = self.assigns_into[buf] = self.assigns_into.get(buf, 0) + 1
    self.items.append(item)
    self.becomes[u] = _resolve(target)

  def _emit_kernel(self, root: UOp, out: Buffer, st: ShapeTracker, value: UOp) -> None:
    self.items.append(self._build_kernel(root, out, st, value))

  def _build_kernel(self, root: UOp, out: Buffer, out_st: ShapeTracker, value: UOp) -> ScheduleItem:
    """The kernel storing `value` into `out`; while it is too big, the fused node nearest the root that it reads through
    several views is stored first (scheduled now: everything that node reads is already scheduled)."""
    while True:
      try: return self._fused_kernel(root, out, out_st, value, MAX_KERNEL_NODES)
      except _KernelTooBig as big: views = big.views
      shared = [n for n, count in views.items() if count > 1 and n is not root and n.op in ELEMENTWISE and n not in self.roots]
      if not shared: return self._fused_kernel(root, out, out_st, value)
      split = max(shared, key=self.position.__getitem__)
      self.roots.add(split)
      self._schedule_root(split)

  def _fused_kernel(self, root: UOp, out: Buffer, out_st: ShapeTracker, value: UOp, limit: int | None = None) -> ScheduleItem:
    """The kernel with every non-root node fused in; raises _KernelTooBig past `limit` (node, view) pairs."""
    bufs: list[Buffer] = [out]
    reads: dict[Buffer, int] = {}
    memo: dict[tuple[UOp, ShapeTracker], UOp] = {}
    def glob(b: Buffer) -> UOp:
      if b not in bufs: bufs.append(b)
      return UOp(Ops.DEFINE_GLOBAL, b.dtype.ptr(b.size, image=b.image), (), bufs.index(b))

    def build(n: UOp, st: ShapeTracker) -> UOp:
      if (hit := memo.get((n, st))) is not None: return hit
      memo[(n, st)] = ret = _build(n, st)
      if limit is not None and len(memo) > limit: raise _KernelTooBig(collections.Counter(n for n, _ in memo))
      return ret
    def _build(n: UOp, st: ShapeTracker) -> UOp:
      if n is not root and (n in self.becomes or n.op is Ops.BUFFER):
        b, inner = buffer_of(self.becomes.get(n, n))
        reads[b] = max(reads.get(b, 0), self.assign_version.get(n, 0))
        load = UOp(Ops.LOAD, n.dtype, (glob(b), UOp(Ops.VIEW, arg=inner + st)))
        if n.op is not Ops.PAD: return load
        interior = ShapeTracker.from_shape(n.src[0].shape).pad(n.arg) + st  # where the stored padding isn't zero
        return UOp(Ops.VALID, dtypes.bool, (UOp(Ops.VIEW, arg=interior),), STORED_ZEROS).where(load, UOp.const(n.dtype, 0))
      if n.op in MOVEMENT:
        base, inner = movement_view(n, stop=lambda x: x in self.becomes)
        return build(base, inner + st)
      if n.op is Ops.CONST: return UOp(Ops.VIEW, n.dtype, (UOp.const(n.dtype, n.arg),), st)
      if n.op is Ops.TAKE:
        b, x_view = buffer_of(self.becomes.get(n.src[0], n.src[0]))
        reads[b] = max(reads.get(b, 0), self.assign_version.get(n.src[0].base, 0))
        return UOp(Ops.LOAD, n.dtype, (glob(b), UOp(Ops.VIEW, arg=st), build(n.src[1], st)), (n.arg, x_view, n.shape))
      if n.op is Ops.ARANGE: return UOp(Ops.ARANGE, n.dtype, (UOp(Ops.VIEW, arg=st),))
      if n.op is Ops.DEFINE_VAR: return UOp(Ops.VIEW, n.dtype, (n,), st)
      if n.op in (Ops.DETACH, Ops.CONTIGUOUS_BACKWARD, Ops.CONTIGUOUS, Ops.GRAD_OVERRIDE): return build(n.src[0], st)
      if n.op is Ops.REDUCE_AXIS:
        assert n is root, "a reduction is always a kernel root"
        return UOp(Ops.REDUCE_AXIS, n.dtype, (build(n.src[0], ShapeTracker.from_shape(n.src[0].shape)),), n.arg)
      if n.op in ELEMENTWISE:
        out = UOp(n.op, n.dtype, tuple(build(s, st) for s in n.src), n.arg)
        if _masked(st) and n.op not in ZERO_PRESERVING: out = UOp(Ops.VALID, dtypes.bool, (UOp(Ops.VIEW, arg=st),)).where(out, UOp.const(n.dtype, 0))
        return out
      raise RuntimeError(f"can't schedule {n.op} inside a kernel")

    val = build(value, ShapeTracker.from_shape(value.shape)) if root.op is Ops.REDUCE_AXIS else build(value, ShapeTracker.from_shape(root.shape))
    store = UOp(Ops.STORE, dtypes.void, (glob(out), UOp(Ops.VIEW, arg=out_st), val))
    return ScheduleItem(UOp(Ops.SINK, dtypes.void, (store,)), bufs, reads=reads)

def _loads_of(ast: UOp, index: int) -> list[UOp]: return [u for u in ast.toposort() if u.op is Ops.LOAD and u.src[0].arg == index]

def _fuse_reductions(items: list[ScheduleItem], keep: set[Buffer]) -> set[Buffer]:
  """Move a reduction kernel into the one elementwise kernel that reads its result through a plain reshape.
  Returns the buffers that are no longer written."""
  dropped: set[Buffer] = set()
  changed = True
  while changed:
    changed = False
    for r in items:
      red = r.ast.src[0].src[2] if r.ast.op is Ops.SINK else None
      if red is None or red.op is not Ops.REDUCE_AXIS or r.writes_version or r.bufs[0] in keep: continue
      readers = [it for it in items if it is not r and r.bufs[0] in it.bufs]
      if len(readers) != 1 or readers[0].ast.op is not Ops.SINK or readers[0].bufs[0] in r.bufs: continue
      e = readers[0]
      if (idx := e.bufs.index(r.bufs[0])) == 0 or not _fuse_into(r, red, e, idx): continue
      items.remove(r)
      dropped.add(r.bufs[0])
      changed = True
      break
  return dropped

def _fuse_into(r: ScheduleItem, red: UOp, e: ScheduleItem, idx: int) -> bool:
  store = e.ast.src[0]
  out_shape = r.ast.src[0].src[1].arg.shape
  kernel_shape = store.src[1].arg.shape
  if sprod(kernel_shape) != sprod(out_shape): return False
  if any(u.op is Ops.REDUCE_AXIS for u in e.ast.toposort()): return False
  for load in _loads_of(e.ast, idx):
    st = load.src[1].arg
    if len(load.src) > 2 or not st.contiguous or st.shape != kernel_shape: return False
  # renumber the reduction's buffers into e's list and re-express e in the reduction's output space
  bufs = list(e.bufs)
  for b in r.bufs[1:]:
    if b not in bufs: bufs.append(b)
  fused_red = _renumber(red, {i: bufs.index(b) for i, b in enumerate(r.bufs) if i})
  nodes = e.ast.toposort()
  mapping = {u: u.replace(arg=u.arg.reshape(out_shape)) for u in nodes if u.op is Ops.VIEW}
  mapping.update({u: fused_red for u in nodes if u.op is Ops.LOAD and u.src[0].arg == idx})
  e.ast = substitute(e.ast, mapping)
  for b, v in r.reads.items(): e.reads[b] = max(e.reads.get(b, 0), v)
  e.reads.pop(r.bufs[0], None)
  # the reduction's buffer is no longer read: drop it from e and renumber the globals after it
  used = sorted({u.arg for u in e.ast.toposort() if u.op is Ops.DEFINE_GLOBAL})
  e.ast, e.bufs = _renumber(e.ast, {old: new for new, old in enumerate(used)}), [bufs[i] for i in used]
  return True

def _outputs(item: ScheduleItem) -> list[Buffer]: return item.bufs[:len(item.ast.src)] if item.ast.op is Ops.SINK else item.bufs[:1]

def _sibling_key(item: ScheduleItem) -> tuple | None:
  """What two reductions must share to run as one kernel: device, iteration space, reduced axes and output view."""
  if item.ast.op is not Ops.SINK or len(item.ast.src) != 1 or item.writes_version: return None
  store = item.ast.src[0]
  red = store.src[2]
  if red.op is not Ops.REDUCE_AXIS: return None
  space = next(v.arg.shape for v in red.toposort() if v.op is Ops.VIEW)
  return (item.bufs[0].device, space, red.arg[1], store.src[1].arg)

def _merge_sibling_reductions(items: list[ScheduleItem]) -> list[ScheduleItem]:
  """Reductions over the same iteration space that read a common buffer, neither needing the other, become one kernel
  with a store for each: the loads and elementwise work they share are done once (a normalization's backward sums)."""
  groups: dict[tuple, list[ScheduleItem]] = {}
  for it in items:
    if (key := _sibling_key(it)) is not None: groups.setdefault(key, []).append(it)
  if all(len(g) == 1 for g in groups.values()): return items
  deps = _dependencies(items)
  def needs(a: ScheduleItem, b: ScheduleItem) -> bool:  # must b run before a (directly or through other kernels)?
    seen, stack = set(), [id(a)]
    while stack:
      if (i := stack.pop()) == id(b): return True
      if i not in seen: seen.add(i); stack += deps[i]
    return False
  for group in groups.values():
    while len(group) > 1:
      first = group.pop(0)
      second = next((b for b in group if set(first.bufs[1:]) & set(b.bufs[1:]) and not needs(first, b) and not needs(b, first)), None)
      if second is None: continue
      group.remove(second)
      merged = _merged(first, second)
      items[items.index(first)] = merged
      items.remove(second)
      deps[id(merged)] = (deps.pop(id(first)) | deps.pop(id(second))) - {id(first), id(second)}
      for d in deps.values():
        if id(first) in d or id(second) in d: d -= {id(first), id(second)}; d.add(id(merged))
  return items

def _merged(first: ScheduleItem, second: ScheduleItem) -> ScheduleItem:
  """One kernel storing both reductions' outputs (the first two buffers), reading the union of their inputs."""
  bufs = [first.bufs[0], second.bufs[0]] + list(dict.fromkeys(first.bufs[1:] + second.bufs[1:]))
  stores = tuple(_renumber(it.ast, {i: bufs.index(b) for i, b in enumerate(it.bufs)}).src[0] for it in (first, second))
  reads = {b: max(first.reads.get(b, 0), second.reads.get(b, 0)) for b in {**first.reads, **second.reads}}
  return ScheduleItem(UOp(Ops.SINK, dtypes.void, stores), bufs, reads=reads)

def _renumber(ast: UOp, new_index: dict[int, int]) -> UOp:
  return substitute(ast, {g: UOp(Ops.DEFINE_GLOBAL, g.dtype, (), new_index[g.arg]) for g in ast.toposort() if g.op is Ops.DEFINE_GLOBAL})

def _dependencies(items: list[ScheduleItem]) -> dict[int, set[int]]:
  """{id(item): ids of the items that must run before it}: a kernel reading version v of a buffer runs after the write
  that made version v and before the ASSIGN that makes version v+1; fresh buffers are read after they are written."""
  deps: dict[int, set[int]] = {id(it): set() for it in items}
  for a in items:
    for b, out in ((b, out) for out in _outputs(a) for b in items):
      if a is b or out not in b.bufs: continue
      if b.writes_version and b.bufs[0] is out:
        if a.writes_version and a.writes_version < b.writes_version: deps[id(b)].add(id(a))
        if not a.writes_version and out not in b.reads: deps[id(b)].add(id(a))
        continue
      if out not in b.reads: continue
      if not a.writes_version or b.reads[out] >= a.writes_version: deps[id(b)].add(id(a))
      else: deps[id(a)].add(id(b))
  return deps

def _order(items: list[ScheduleItem]) -> list[ScheduleItem]:
  """The items in an order that respects their dependencies."""
  deps = _dependencies(items)
  done: set[int] = set()
  ordered: list[ScheduleItem] = []
  pending = list(items)
  while pending:
    ready = next((it for it in pending if deps[id(it)] <= done), None)
    if ready is None: raise RuntimeError("schedule has a dependency cycle between ASSIGNs and their readers")
    ordered.append(ready); done.add(id(ready)); pending.remove(ready)
  return ordered

def _resolve(u: UOp) -> UOp:
  """`u` with every ASSIGN under its movement ops replaced by the memory it wrote (its target)."""
  base = u.base
  if base.op is not Ops.ASSIGN: return u
  chain = []
  while u.op in MOVEMENT:
    chain.append(u)
    u = u.src[0]
  out = _resolve(base.src[0])
  for m in reversed(chain): out = UOp(m.op, m.dtype, (out,), m.arg)
  return out

def _holds_uop(arg: tuple) -> bool:
  for x in arg:  # a plain loop: this runs on every node of every schedule
    if x.__class__ is UOp or (x.__class__ is tuple and _holds_uop(x)): return True
  return False

def unbind(sink: UOp, order: list[UOp]) -> tuple[dict[UOp, UOp], dict[str, int]]:
  """({node under sink: the node with every bound Variable replaced by the Variable}, {name: bound value}) for the
  graph whose toposort is `order`; ({}, {}) when it has no Variables. A name bound to two values, or two Variables
  of one name, is an error."""
  for n in order:
    if n.op is Ops.BIND or n.op is Ops.DEFINE_VAR or (n.arg.__class__ is tuple and _holds_uop(n.arg)): break
  else: return {}, {}
  var_vals: dict[str, int] = {}
  named: dict[str, UOp] = {}
  memo: dict[UOp, UOp] = {}
  def unbound(x: UOp) -> UOp:
    if x in memo: return memo[x]
    nodes = x.toposort()
    for n in nodes:
      if n.op is Ops.DEFINE_VAR and named.setdefault(n.arg[0], n) is not n:
        raise ValueError(f"two Variables named {n.arg[0]!r} with different ranges: {named[n.arg[0]].arg[1:]} and {n.arg[1:]}")
      if n.op is Ops.BIND and var_vals.setdefault(n.src[0].arg[0], n.src[1].arg) != n.src[1].arg:
        raise ValueError(f"Variable {n.src[0].arg[0]!r} is bound to both {var_vals[n.src[0].arg[0]]} and {n.src[1].arg}")
    binds = {b: b.src[0] for b in nodes if b.op is Ops.BIND}
    memo[x] = substitute(x, binds) if binds else x
    return memo[x]
  mapping = map_args(sink, unbound, lambda n: unbound(n) if n.op in (Ops.BIND, Ops.DEFINE_VAR) else n)
  if missing := sorted(set(named) - set(var_vals)): raise ValueError(f"Variable {missing[0]!r} is not bound to a value: use {missing[0]}.bind(n)")
  return mapping, var_vals

def rebind(u: UOp, var_vals: dict[str, int]) -> UOp:
  """`u` with each Variable in its shapes bound to its value in var_vals (the inverse of unbind)."""
  def bound(x: UOp) -> UOp:
    vs = {v: v.bind(var_vals[v.arg[0]]) for v in x.toposort() if v.op is Ops.DEFINE_VAR and v.arg[0] in var_vals}
    return substitute(x, vs) if vs else x
  return map_args(u, bound)[u]
