"""Reductions and what is built on them: sum/prod/max/min and statistics, arg-reductions, softmax, cumulative ops
(over sliding windows, blocked for long axes), and sorting (blocks sorted by rank, then a bitonic network of
compare-exchange steps; the top k of a long axis narrowed to the groups that hold it, then by merging sorted blocks)."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Callable
from drivers.device import holds
from ir.dtype import DType, dtypes, to_dtype
from ir.helpers import prod
from ir.ops import Ops

if TYPE_CHECKING: from tg.tensor import Tensor

# cumulative ops on an axis longer than this work block by block, each block a masked sum of at most CUM_BLOCK values
# per element and the blocks' totals scanned the same way (16 against 256: a (512, 256) cumsum 5.6x faster on a CPU)
CUM_BLOCK = 16
# sorting starts with blocks this long sorted by rank: 2 passes of 32 compares an item against the network's 15
# (4096 rows of 1024: 7.7 ms against 19.4 on a CPU; 64 is even, 16 slower)
RANK_BLOCK = 32
# top-k of an axis at least TOPK_GROUP_FROM * TOPK_GROUP * pow2(k) long searches groups of TOPK_GROUP (see _topk_items)
# (on a CPU, against 16/4, 16/2, 4/4 and 32/2: the fastest or within 5% on 4096x1024 k=10, 64x32768 k=100,
# 8x131072 k=50, 1x2**20 k=1000 and 16384x256 k=5)
TOPK_GROUP, TOPK_GROUP_FROM = 8, 4

def sum_dtype(dt: DType) -> DType:
  """What a sum accumulates in: small ints in int32, unsigned in uint32, low-precision floats in float32."""
  if dt in (dtypes.bool, dtypes.int8, dtypes.int16): return dtypes.int32
  if dt in (dtypes.uint8, dtypes.uint16): return dtypes.uint32
  if dt in (dtypes.float16, dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2): return dtypes.float32
  return dt

class ReduceMixin:
  __slots__ = ()

  def _axes(self, axis) -> tuple[int, ...]:
    if axis is None: return tuple(range(self.ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = tuple(sorted({self._axis(a) for a in axes}))
    if len(out) != len(axes): raise RuntimeError(f"axis {axis} names a dimension more than once")  # PyTorch's type
    return out
  def _reduce(self, op: Ops, axis, keepdim: bool) -> Tensor:
    """An empty axis reduces to the op's identity: 0 for ADD, 1 for MUL, False for MAX of bools."""
    axes = self._axes(axis)
    if self.ndim == 0: return self
    out = self._new(self.uop.r(op, axes))
    return out if keepdim else out.reshape(*[s for i, s in enumerate(self.shape) if i not in axes])
  def _nonempty(self, name: str, axis) -> None:
    """max/min/argmax/argmin of nothing has no value: RuntimeError for a whole empty tensor, IndexError for an empty
    axis, as PyTorch raises."""
    if axis is None and self.numel() == 0: raise RuntimeError(f"{name}() of an empty tensor (shape {self.shape}) has no value; give an axis")
    if axis is not None and self.ndim and (empty := [a for a in self._axes(axis) if self.shape[a] == 0]):
      raise IndexError(f"{name}() over axis {empty[0]} of shape {self.shape}, which is empty, has no value")
  def _empty_axis(self, axis) -> bool: return self.ndim > 0 and any(self.shape[a] == 0 for a in self._axes(axis))

  def sum(self, axis=None, keepdim: bool = False, dtype: DType | str | None = None) -> Tensor:
    acc = to_dtype(dtype) if dtype is not None else sum_dtype(self.dtype)
    out = self.cast(acc)._reduce(Ops.ADD, axis, keepdim)
    return out.cast(self.dtype) if dtype is None and acc != self.dtype and dtypes.is_float(self.dtype) else out
  def prod(self, axis=None, keepdim: bool = False, dtype: DType | str | None = None) -> Tensor:
    acc = to_dtype(dtype) if dtype is not None else sum_dtype(self.dtype)
    out = self.cast(acc)._reduce(Ops.MUL, axis, keepdim)
    return out.cast(self.dtype) if dtype is None and acc != self.dtype and dtypes.is_float(self.dtype) else out
  def max(self, axis=None, keepdim: bool = False) -> Tensor:
    self._nonempty("max", axis)
    return self._reduce(Ops.MAX, axis, keepdim)
  def min(self, axis=None, keepdim: bool = False) -> Tensor:
    self._nonempty("min", axis)
    if dtypes.is_float(self.dtype): return -((-self).max(axis, keepdim))
    return ~((~self).max(axis, keepdim))  # ~ reverses the order of ints without overflow
  def any(self, axis=None, keepdim: bool = False) -> Tensor:
    """Whether some element is true; False over an empty axis."""
    return self.cast(dtypes.bool)._reduce(Ops.MAX, axis, keepdim)
  def all(self, axis=None, keepdim: bool = False) -> Tensor:
    """Whether every element is true; True over an empty axis."""
    return self.cast(dtypes.bool).logical_not().any(axis, keepdim).logical_not()
  def mean(self, axis=None, keepdim: bool = False) -> Tensor:
    """NaN over an empty axis, as PyTorch."""
    x = self._float()
    n = prod(self.shape[a] for a in self._axes(axis))
    return x.sum(axis, keepdim) / n if n else x.sum(axis, keepdim) * math.nan
  def var(self, axis=None, keepdim: bool = False, correction: int = 1) -> Tensor:
    x = self._float()
    n = prod(self.shape[a] for a in self._axes(axis))
    dev = x - x.mean(axis, keepdim=True)
    return (dev * dev).sum(axis, keepdim) / max(n - correction, 0)
  def std(self, axis=None, keepdim: bool = False, correction: int = 1) -> Tensor: return self.var(axis, keepdim, correction).sqrt()
  def var_mean(self, axis=None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
    return self.var(axis, keepdim, correction), self.mean(axis, keepdim)
  def std_mean(self, axis=None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
    return self.std(axis, keepdim, correction), self.mean(axis, keepdim)

  def argmax(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the first maximum (int32); a NaN counts as the maximum, as in numpy and PyTorch."""
    self._nonempty("argmax", axis)
    if axis is None: return self.flatten().argmax(0).reshape(*([1] * self.ndim if keepdim else []))
    a = self._axis(axis)
    n = self.shape[a]
    countdown = type(self).arange(n, 0, -1, device=self.device, dtype=dtypes.int32).reshape(*[n if i == a else 1 for i in range(self.ndim)])
    hit = self == self.max(a, keepdim=True)
    if dtypes.is_float(self.dtype): hit = hit | self.isnan()  # max is NaN exactly when a NaN is present
    return (n - hit.where(countdown, 0).max(a, keepdim)).cast(dtypes.int32)
  def argmin(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
    self._nonempty("argmin", axis)
    return (-self if dtypes.is_float(self.dtype) else ~self).argmax(axis, keepdim)

  def logsumexp(self, axis=None, keepdim: bool = False) -> Tensor:
    """log(sum(exp(self))) without overflow; -inf over an empty axis (the log of an empty sum)."""
    if self._empty_axis(axis): return self.exp().sum(axis, keepdim).log()
    m = self.max(axis, keepdim=True)
    m = m.isinf().where(0, m)  # all -inf (or inf) rows: let the log give the answer
    out = (self - m).exp().sum(axis, keepdim=True).log() + m
    return out if keepdim else out.reshape(*[s for i, s in enumerate(self.shape) if i not in self._axes(axis)])
  def softmax(self, axis: int = -1, dtype: DType | str | None = None) -> Tensor:
    x = self.cast(dtype) if dtype is not None else self._float()
    if x._empty_axis(axis): return x  # nothing to normalize
    e = (x - x.max(axis, keepdim=True)).exp()
    return e / e.sum(axis, keepdim=True)
  def log_softmax(self, axis: int = -1, dtype: DType | str | None = None) -> Tensor:
    x = self.cast(dtype) if dtype is not None else self._float()
    if x._empty_axis(axis): return x
    top, log_sum = x._max_and_log_sum(axis)
    return x - top - log_sum
  def _max_and_log_sum(self, axis: int) -> tuple[Tensor, Tensor]:
    """The max along `axis` and the log of the sum of exp(self - max), both with `axis` kept: log_softmax is
    self - max - log_sum (the cross-entropy reads it at the label only)."""
    top = self.max(axis, keepdim=True)
    return top, (self - top).exp().sum(axis, keepdim=True).log()
  def softmin(self, axis: int = -1) -> Tensor: return (-self).softmax(axis)
  def normalize(self, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """self / max(p-norm over dim, eps), as torch.nn.functional.normalize. The norm of a zero vector is 0 with gradient
    0 (PyTorch's subgradient), so a zero vector stays zero and its gradient is 1/eps, never NaN."""
    a = self._float().abs()
    if p == math.inf: norm = a.max(dim, keepdim=True)
    else:
      s = (a ** p).sum(dim, keepdim=True)
      nonzero = s > 0
      norm = nonzero.where(nonzero.where(s, 1) ** (1 / p), 0)  # the root's own gradient at 0 is infinite
    return self / norm.maximum(eps)

  # ---------------- cumulative ----------------
  def _cumulative(self, axis: int, op: Ops) -> Tensor:
    a = self._axis(axis)
    if self._empty_axis(a): return self  # a scan of nothing is empty
    x = self.transpose(a, -1) if a != self.ndim - 1 else self
    out = x._cum_last(op)
    return out.transpose(a, -1) if a != self.ndim - 1 else out
  def _cum_last(self, op: Ops) -> Tensor:
    n = self.shape[-1]
    identity = {Ops.ADD: 0, Ops.MUL: 1, Ops.MAX: -math.inf if dtypes.is_float(self.dtype) else dtypes.min(self.dtype)}[op]
    if n <= CUM_BLOCK:  # row i of an (n, n) mask keeps elements 0..i: its gradient is a plain masked sum too
      rows, cols = (type(self).arange(n, device=self.device).reshape(shape) for shape in ((n, 1), (1, n)))
      return (cols <= rows).where(self.unsqueeze(-2), identity)._reduce(op, -1, False)
    blocks = -(-n // CUM_BLOCK)
    x = self.pad([None] * (self.ndim - 1) + [(0, blocks * CUM_BLOCK - n)], value=identity).reshape(*self.shape[:-1], blocks, CUM_BLOCK)
    inner = x._cum_last(op)                                                       # within each block
    totals = inner[..., -1]                                                       # (..., blocks)
    carry = totals._cum_last(op).pad([None] * (totals.ndim - 1) + [(1, 0)], value=identity)[..., :-1].unsqueeze(-1)
    combined = {Ops.ADD: inner + carry, Ops.MUL: inner * carry, Ops.MAX: inner.maximum(carry)}[op]
    return combined.reshape(*self.shape[:-1], blocks * CUM_BLOCK)[..., :n]
  def cumsum(self, axis: int = 0) -> Tensor:
    if self.ndim == 0: return self
    return self.cast(sum_dtype(self.dtype))._cumulative(axis, Ops.ADD)
  def cumprod(self, axis: int) -> Tensor:
    if self.ndim == 0: return self
    return self.cast(sum_dtype(self.dtype))._cumulative(axis, Ops.MUL)
  def cummax(self, axis: int = 0) -> tuple[Tensor, Tensor]:
    """(running maximum, index where it was reached last)."""
    if self.ndim == 0: return self, type(self).zeros((), dtype=dtypes.int32, device=self.device)
    values = self._cumulative(axis, Ops.MAX)
    a = self._axis(axis)
    n = self.shape[a]
    pos = type(self).arange(n, device=self.device, dtype=dtypes.int32).reshape(*[n if i == a else 1 for i in range(self.ndim)])._broadcast_to(self.shape)
    at_max = (self == values).where(pos, -1)
    return values, at_max._cumulative(axis, Ops.MAX)
  def cummin(self, axis: int = 0) -> tuple[Tensor, Tensor]:
    flipped = -self if dtypes.is_float(self.dtype) else ~self
    values, idx = flipped.cummax(axis)
    return (-values if dtypes.is_float(self.dtype) else ~values), idx
  def logcumsumexp(self, axis: int = 0) -> Tensor:
    if self._empty_axis(axis): return self._float()
    m = self.max(axis, keepdim=True)
    m = m.isinf().where(0, m)
    return (self - m).exp().cumsum(axis).log() + m

  # ---------------- sorting ----------------
  def sort(self, dim: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
    """(values, int32 indices) along `dim`, by a bitonic sorting network (ties keep their original order)."""
    if self.ndim == 0: return self, type(self).zeros((), dtype=dtypes.int32, device=self.device)
    return self._ordered(self._axis(dim), descending, None)
  def argsort(self, dim: int = -1, descending: bool = False) -> Tensor: return self.sort(dim, descending)[1]
  def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True) -> tuple[Tensor, Tensor]:
    """The k largest (or smallest) along `dim` and their int32 indices, best first (ties: the first index first): a
    long axis is narrowed to the groups that hold them, and sorted blocks are merged (see _topk_items)."""
    d = self._axis(dim)
    if not 0 <= k <= self.shape[d]: raise RuntimeError(f"topk k={k} is out of range for dimension {d} of size {self.shape[d]}")
    return self._ordered(d, largest, k)

  def _ordered(self, d: int, descending: bool, k: int | None) -> tuple[Tensor, Tensor]:
    """sort (k None) or topk along axis d: the network orders items built from x (see _items), and the values are
    gathered from x by the indices it leaves."""
    x = self.transpose(d, -1) if d != self.ndim - 1 else self
    n = x.shape[-1]
    items = _items(x, descending)
    items = _bitonic_sort(_padded(items, _pow2_at_least(n))) if k is None else _topk_items(items, k, lambda at: _items(x, descending, at))
    idx = _index_of(items)[..., :n if k is None else k]
    values = x._take(x.ndim - 1, idx)
    if d != self.ndim - 1: values, idx = values.transpose(d, -1), idx.transpose(d, -1)
    return values, idx

# ---------------- the bitonic network ----------------
# It orders items along the last axis: where the key fits in 32 bits, one uint64 per element, the key's order bits
# above its index (a step is one load of each partner, a compare and a store); else (key, index) pairs, compared by key
# and then by index. Either way ties keep their original order.
def _pow2_at_least(n: int) -> int: return 1 << max(n - 1, 0).bit_length()

def _order_bits(x: Tensor) -> Tensor:
  """Unsigned integers of 32 bits (64 for 64-bit x) whose order is x's: every NaN after +inf, -0 equal to 0."""
  wide = x.dtype.itemsize == 8
  unsigned, sign = (dtypes.uint64, 1 << 63) if wide else (dtypes.uint32, 1 << 31)
  if dtypes.is_float(x.dtype):
    x = x if wide else x.cast(dtypes.float32)
    bits = (x != x).where(math.nan, (x == 0).where(0.0, x)).bitcast(unsigned)
    return (bits >> (8 * unsigned.itemsize - 1) == 1).where(~bits, bits ^ sign)  # negatives reversed, below positives
  if dtypes.is_unsigned(x.dtype) or x.dtype == dtypes.bool: return x.cast(unsigned)
  return x.cast(dtypes.int64 if wide else dtypes.int32).bitcast(unsigned) ^ sign

def _items(x: Tensor, descending: bool, at: Tensor | None = None) -> tuple[Tensor, ...]:
  """The network's items for x along its last axis, or for its elements at positions `at` (where those are past the
  end, items that order after every real one): packed where x's order fits 32 bits and the device holds 64-bit
  integers, else pairs."""
  n = x.shape[-1]
  bits = _order_bits(x if at is None else x._take(x.ndim - 1, at))
  bits = ~bits if descending else bits
  if at is None: at = type(x).arange(n, device=x.device, dtype=dtypes.int32)._broadcast_to(bits.shape)
  else: bits = (at < n).where(bits, dtypes.max(bits.dtype))
  return _pack(bits, at, bits.dtype == dtypes.uint32 and holds(x.device, dtypes.uint64))

def _pack(bits: Tensor, index: Tensor, packed: bool) -> tuple[Tensor, ...]:
  return ((bits.cast(dtypes.uint64) << 32) | index.cast(dtypes.uint64),) if packed else (bits, index)

def _padded(items: tuple[Tensor, ...], size: int) -> tuple[Tensor, ...]:
  """items padded along the last axis to `size` with distinct items that order after every real one: the greatest
  key, and indices counting down from the greatest (the index is an item's last part)."""
  n = items[0].shape[-1]
  if size == n: return items
  def fill(t: Tensor, last: bool) -> Tensor:
    top = type(t).full((*t.shape[:-1], size - n), dtypes.max(t.dtype), dtype=t.dtype, device=t.device)
    return top - type(t).arange(size - n, device=t.device, dtype=t.dtype) if last else top
  return tuple(t.cat(fill(t, i == len(items) - 1), dim=-1) for i, t in enumerate(items))

def _index_of(items: tuple[Tensor, ...]) -> Tensor:
  return (items[0] & 0xFFFFFFFF).cast(dtypes.int32) if len(items) == 1 else items[1]

def _precedes(a: tuple[Tensor, ...], b: tuple[Tensor, ...]) -> Tensor:
  """Whether item a orders before item b: packed items by value, pairs by key and then by index."""
  if len(a) == 1: return a[0] < b[0]
  (ka, ia), (kb, ib) = a, b
  return (ka < kb) | ((ka == kb) & (ia < ib))

def _compare_exchange(items: tuple[Tensor, ...], half: int, flip: bool) -> tuple[Tensor, ...]:
  """One step of the network on the last axis: in each group of 2*half, position i and i + half (or, with flip, the
  mirrored position) are put in order. Each position reads its partner through a view (halves swapped, or the group
  reversed), so both reads are vector loads and the result needs no interleaving."""
  lead, size = items[0].shape[:-1], items[0].shape[-1]
  def partner(t: Tensor) -> Tensor:
    groups = t.reshape(*lead, size // (2 * half), 2 * half)
    swapped = groups.flip(-1) if flip else groups.reshape(*lead, size // (2 * half), 2, half).flip(-2)
    return swapped.reshape(t.shape)
  partners = tuple(partner(t) for t in items)
  lower = (type(items[0]).arange(size, device=items[0].device, dtype=dtypes.int32) & half) == 0  # keeps the smaller of the two
  take = lower.where(_precedes(partners, items), _precedes(items, partners))
  return tuple(take.where(p, t).contiguous() for p, t in zip(partners, items))

def _rank_sort(items: tuple[Tensor, ...], block: int) -> tuple[Tensor, ...]:
  """items sorted within blocks of `block` along the last axis in two kernels: each item's rank (how many in its
  block precede it; items are distinct), then each position's item (the one of that rank; items are unsigned, so a
  max picks it)."""
  items = tuple(t.contiguous() for t in items)  # read `block` times each
  lead = items[0].shape[:-1]
  blocks = tuple(t.reshape(*lead, -1, block) for t in items)
  rank = _precedes(tuple(b.unsqueeze(-2) for b in blocks), tuple(b.unsqueeze(-1) for b in blocks)).sum(-1, dtype=dtypes.int32).contiguous()
  position = type(items[0]).arange(block, device=items[0].device, dtype=dtypes.int32)
  at = rank.unsqueeze(-2) == position.reshape(block, 1)
  return tuple(at.where(b.unsqueeze(-2), 0).max(-1).reshape(t.shape) for b, t in zip(blocks, items))

def _bitonic_sort(items: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
  """items sorted along the last axis (a power of two long): blocks of up to RANK_BLOCK sorted by rank, then stages
  of merges of sorted runs."""
  block = min(RANK_BLOCK, items[0].shape[-1])
  items = _rank_sort(items, block)
  for stage in range(block.bit_length(), items[0].shape[-1].bit_length()):
    for sub in range(stage, 0, -1): items = _compare_exchange(items, 1 << (sub - 1), sub == stage)
  return items

def _firsts_of_groups(groups: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
  """Items for the groups along the second last axis: each the key of the group's first item and the group's position,
  which orders the groups as their first items order (groups are runs of positions, ties go to the first)."""
  packed = len(groups) == 1
  bits = groups[0].min(-1) >> 32 if packed else groups[0].min(-1)
  return _pack(bits, type(bits).arange(bits.shape[-1], device=bits.device, dtype=dtypes.int32)._broadcast_to(bits.shape), packed)

def _topk_items(items: tuple[Tensor, ...], k: int, gather: Callable | None = None) -> tuple[Tensor, ...]:
  """The first k items along the last axis, in order; gather(positions) makes the items at positions (by default,
  gathered from `items`). A long axis is cut into groups of TOPK_GROUP: the first k items all lie in the k groups
  whose first items order first (items are distinct), so one pass finds each group's first, their top k is found the
  same way, and the k groups they name are searched. Else, where the axis holds 4 blocks of K = pow2(k) or more,
  blocks of K are sorted alone, then neighbours merged while more than one is left, each pair's smaller half kept (min
  of one and the other reversed: the K smallest of both, in a bitonic order that log2(K) steps sort). Else the axis is
  sorted."""
  n, block, lead = items[0].shape[-1], _pow2_at_least(k), items[0].shape[:-1]
  if k == 0: return tuple(t[..., :0] for t in items)
  if n >= TOPK_GROUP_FROM * TOPK_GROUP * block:
    groups = tuple(t.reshape(*lead, -1, TOPK_GROUP) for t in _padded(items, -(-n // TOPK_GROUP) * TOPK_GROUP))
    chosen = _index_of(_topk_items(_firsts_of_groups(groups), k))
    at = (chosen.unsqueeze(-1) * TOPK_GROUP + type(chosen).arange(TOPK_GROUP, device=chosen.device, dtype=dtypes.int32)).reshape(*lead, k * TOPK_GROUP)
    return _topk_items(gather(at) if gather is not None else tuple(t.reshape(*lead, -1)._take(len(lead), at) for t in groups), k)
  if n < 4 * block: return tuple(t[..., :k] for t in _bitonic_sort(_padded(items, _pow2_at_least(n))))
  items = _bitonic_sort(tuple(t.reshape(*lead, -1, block) for t in _padded(items, -(-n // block) * block)))
  while (blocks := items[0].shape[-2]) > 1:
    if blocks % 2: items = tuple(t.pad([None] * (t.ndim - 2) + [(0, 1), None], value=dtypes.max(t.dtype)) for t in items)
    pairs = (*lead, items[0].shape[-2] // 2, 2, block)
    a = tuple(t.reshape(pairs)[..., 0, :] for t in items)
    b = tuple(t.reshape(pairs)[..., 1, :].flip(-1) for t in items)
    take_b = _precedes(b, a)
    items = tuple(take_b.where(tb, ta) for ta, tb in zip(a, b))
    for sub in range(block.bit_length() - 1, 0, -1): items = _compare_exchange(items, 1 << (sub - 1), False)
  return tuple(t.reshape(*lead, block)[..., :k] for t in items)
