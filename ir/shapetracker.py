"""Views: how a shaped index maps to a buffer offset (strides, offset, and a validity mask for padding).
A ShapeTracker stacks views where one strided view can't express a reshape of the one before. Sizes, strides, offsets
and masks may be symbolic (integer UOps of Variables): they stay in canonical form, and comparisons that their bounds
can't decide are kept as conditions or make a reshape stack views instead."""
from __future__ import annotations
import functools
from dataclasses import dataclass
from ir.dtype import DType, dtypes
from ir.helpers import prod
from ir.ops import Ops
from ir.uop import UOp, sint, smax, smin, sprod, ssimplify

Mask = tuple[tuple[sint, sint], ...]

def strides_for_shape(shape: tuple[sint, ...]) -> tuple[sint, ...]:
  """Row-major strides, with 0 for size-1 axes (their index is always 0)."""
  return tuple(0 if s == 1 else sprod(shape[i + 1:]) for i, s in enumerate(shape))

def _empty_range(lo: sint, hi: sint) -> bool:
  """[lo, hi) holds nothing for every value of its Variables."""
  return smax(ssimplify(hi - lo)) <= 0

def _bigger(a: sint, b: sint) -> sint:
  if smin(a) >= smax(b): return a
  if smin(b) >= smax(a): return b
  return ssimplify(a.maximum(b) if isinstance(a, UOp) else b.maximum(a))
def _smaller(a: sint, b: sint) -> sint:
  if smax(a) <= smin(b): return a
  if smax(b) <= smin(a): return b
  return ssimplify(a.minimum(b) if isinstance(a, UOp) else b.minimum(a))

def _idx(x: sint, dtype: DType) -> UOp: return UOp.const(dtype, x) if isinstance(x, int) else x.cast(dtype)

def is_symbolic(v: View) -> bool:
  return any(isinstance(x, UOp) for x in (*v.shape, *v.strides, v.offset, *(b for m in v.mask or () for b in m)))

@dataclass(frozen=True)
class View:
  shape: tuple[sint, ...]
  strides: tuple[sint, ...]
  offset: sint
  mask: Mask | None
  contiguous: bool

  @staticmethod
  @functools.lru_cache(maxsize=1 << 16)
  def create(shape: tuple[sint, ...], strides: tuple[sint, ...] | None = None, offset: sint = 0, mask: Mask | None = None) -> View:
    strides = strides_for_shape(shape) if strides is None else tuple(0 if s == 1 else st for s, st in zip(shape, strides))
    if mask is not None:
      if any(_empty_range(lo, hi) for lo, hi in mask):  # nothing is valid: canonical empty view
        return View(shape, (0,) * len(shape), 0, ((0, 0),) * len(shape), False)
      # an axis masked to a single index always reads the same place: fold it into the offset
      single = [ssimplify(hi - lo) == 1 for lo, hi in mask]
      offset = ssimplify(offset + sum(lo * st for st, (lo, _), one in zip(strides, mask, single) if one))
      strides = tuple(0 if one else st for st, one in zip(strides, single))
      if all(m == (0, s) for m, s in zip(mask, shape)): mask = None
    return View(shape, strides, offset, mask, offset == 0 and mask is None and strides == strides_for_shape(shape))

  @property
  def size(self) -> sint: return sprod(self.shape)
  def is_empty(self) -> bool: return self.mask is not None and any(_empty_range(lo, hi) for lo, hi in self.mask)

  def permute(self, order: tuple[int, ...]) -> View:
    return View.create(tuple(self.shape[i] for i in order), tuple(self.strides[i] for i in order), self.offset,
                       tuple(self.mask[i] for i in order) if self.mask else None)
  def expand(self, new_shape: tuple[int, ...]) -> View:
    mask = None
    if self.mask: mask = tuple(m if s == n else ((0, n) if m == (0, 1) else (0, 0)) for m, s, n in zip(self.mask, self.shape, new_shape))
    return View.create(new_shape, self.strides, self.offset, mask)
  def pad(self, arg: tuple[tuple[sint, sint], ...]) -> View:
    shape = tuple(ssimplify(s + a + b) for s, (a, b) in zip(self.shape, arg))
    old = self.mask or tuple((0, s) for s in self.shape)
    mask = tuple((ssimplify(lo + a), ssimplify(hi + a)) for (lo, hi), (a, _) in zip(old, arg))
    return View.create(shape, self.strides, ssimplify(self.offset - sum(a * st for (a, _), st in zip(arg, self.strides))), mask)
  def shrink(self, arg: tuple[tuple[sint, sint], ...]) -> View:
    shape = tuple(ssimplify(b - a) for a, b in arg)
    mask = None
    if self.mask:
      mask = tuple((_bigger(ssimplify(lo - a), 0), _bigger(_smaller(ssimplify(hi - a), n), 0)) for (lo, hi), (a, _), n in zip(self.mask, arg, shape))
    if mask and any(_empty_range(lo, hi) for lo, hi in mask): return View.create(shape, mask=tuple((0, 0) for _ in shape))
    return View.create(shape, self.strides, ssimplify(self.offset + sum(a * st for (a, _), st in zip(arg, self.strides))), mask)
  def flip(self, axes: tuple[bool, ...]) -> View:
    offset = ssimplify(self.offset + sum((s - 1) * st for s, st, f in zip(self.shape, self.strides, axes) if f))
    mask = tuple((ssimplify(s - hi), ssimplify(s - lo)) if f else (lo, hi) for (lo, hi), s, f in zip(self.mask, self.shape, axes)) if self.mask else None
    return View.create(self.shape, tuple(-st if f else st for st, f in zip(self.strides, axes)), offset, mask)

  def reshape(self, new_shape: tuple[sint, ...]) -> View | None:
    """The same elements in `new_shape` as one view, or None when one strided view can't express it (a symbolic
    axis is only carried over whole, as the same expression)."""
    if new_shape == self.shape: return self
    if 0 in self.shape: return View.create(new_shape)  # no elements: any layout is right
    if self.is_empty(): return empty_view(new_shape)
    if self.contiguous: return View.create(new_shape)
    old = [(s, st, m) for s, st, m in zip(self.shape, self.strides, self.mask or [(0, s) for s in self.shape]) if s != 1]
    new = [n for n in new_shape if n != 1]
    strides_out: list[int] = []
    mask_out: list[tuple[int, int]] = []
    oi = ni = 0
    while ni < len(new):
      group_old, group_new = [old[oi]], [new[ni]]
      po, pn = old[oi][0], new[ni]
      while po != pn:
        if isinstance(po, UOp) or isinstance(pn, UOp): return None
        if po < pn: oi += 1; group_old.append(old[oi]); po = ssimplify(po * old[oi][0])
        else: ni += 1; group_new.append(new[ni]); pn = ssimplify(pn * new[ni])
      oi, ni = oi + 1, ni + 1
      if (placed := _reshape_group(group_old, group_new)) is None: return None
      strides_out.extend(placed[0]); mask_out.extend(placed[1])
    it_s, it_m = iter(strides_out), iter(mask_out)
    strides = tuple(0 if n == 1 else next(it_s) for n in new_shape)
    mask = tuple((0, 1) if n == 1 else next(it_m) for n in new_shape)
    return View.create(new_shape, strides, self.offset, mask if self.mask else None)

  def to_uops(self, idxs: list[UOp], idx_dtype: DType = dtypes.int32) -> tuple[UOp, UOp]:
    """(buffer offset, validity) of the element at `idxs`, as a canonical sum with one constant term; mask
    conditions that the indices' bounds already guarantee are left out."""
    if self.is_empty(): return UOp.const(idx_dtype, 0), UOp.const(dtypes.bool, False)
    offset, terms = self.offset, []
    for i, st in zip(idxs, self.strides):
      if st == 0: continue
      if i.op is Ops.CONST: offset = ssimplify(offset + i.arg * st)
      else: terms.append((i, st))
    idx = _strided_sum(tuple(terms), idx_dtype)
    idx = _idx(offset, idx_dtype) if idx is None else (idx + _idx(offset, idx_dtype) if offset != 0 else idx)
    valid = UOp.const(dtypes.bool, True)
    for i, (lo, hi) in zip(idxs, self.mask or ()):
      if i.vmin < smax(lo): valid = valid & (i >= _idx(lo, idx_dtype))
      if i.vmax >= smin(hi): valid = valid & (i < _idx(hi, idx_dtype))
    return idx, valid

@functools.lru_cache(maxsize=1 << 16)
def _strided_sum(terms: tuple[tuple[UOp, sint], ...], idx_dtype: DType) -> UOp | None:
  """The sum of index * stride over `terms` (None for none), built once: the lanes of an upcast kernel differ only in
  the constant part of their offsets."""
  idx = None
  for i, st in terms:
    term = i if st == 1 else i * _idx(st, idx_dtype)
    idx = term if idx is None else idx + term
  return idx

def empty_view(shape: tuple[sint, ...]) -> View | None:
  """A view of `shape` where nothing is valid; None for shape (), which has no axis to carry the mask (the caller
  keeps the views stacked instead)."""
  return View.create(shape, mask=tuple((0, 0) for _ in shape)) if shape else None

def _reshape_group(old: list[tuple[int, int, tuple[int, int]]], new: list[int]) -> tuple[list[int], list[tuple[int, int]]] | None:
  """Strides and masks for new axes holding exactly the elements of the old axes `old` (size, stride, mask)."""
  if len(old) == 1 and len(new) == 1: return [old[0][1]], [old[0][2]]  # the same axis (a symbolic one included)
  if any(old[k][1] != old[k + 1][1] * old[k + 1][0] for k in range(len(old) - 1)): return None  # not one strided run
  if any(m != (0, s) for s, _, m in old[1:]): return None  # a masked inner axis can't be merged
  size = prod(s for s, _, _ in old)
  inner = size // old[0][0]
  lo, hi = old[0][2][0] * inner, old[0][2][1] * inner  # the valid flat range of the group
  strides, masks, acc = [], [], size
  for n in new:
    acc //= n
    strides.append(ssimplify(old[-1][1] * acc))
    if lo % acc == 0 and hi % acc == 0: masks.append((lo // acc, hi // acc)); lo, hi = 0, acc
    elif lo // acc == (hi - 1) // acc:
      q = lo // acc
      masks.append((q, q + 1)); lo, hi = lo - q * acc, hi - q * acc
    else: return None
  return strides, masks

def _digits(value: int, shape: tuple[int, ...]) -> list[int]:
  """Mixed-radix digits of value >= 0 over `shape` (the top digit takes whatever is left)."""
  out = []
  for c in (prod(shape[m + 1:]) for m in range(len(shape))):
    out.append(value // c if c else 0)
    value -= out[-1] * c if c else 0
  return out

def merge_views(inner: View, outer: View) -> View | None:
  """One view equal to `outer` indexing a contiguous array of inner.shape, then `inner` indexing the buffer; None
  when no single view can express it. The flat index of outer, over its valid region, is written as base +
  sum(|stride_k| * j_k) with j_k >= 0; the merge exists when no mixed-radix digit of inner.shape can carry."""
  if inner.contiguous: return outer
  if inner.is_empty() and 0 not in outer.shape: return empty_view(outer.shape)
  if 0 in inner.shape or 0 in outer.shape or outer.is_empty() or inner.is_empty() or is_symbolic(inner) or is_symbolic(outer): return None
  ranges = outer.mask or tuple((0, s) for s in outer.shape)
  base = outer.offset + sum(st * (lo if st > 0 else hi - 1) for st, (lo, hi) in zip(outer.strides, ranges))
  if base < 0 or base >= inner.size: return None
  D = _digits(base, inner.shape)
  terms = [(_digits(abs(st), inner.shape), hi - 1 - lo) for st, (lo, hi) in zip(outer.strides, ranges)]
  for m, size in enumerate(inner.shape):
    if D[m] + sum(e[m] * jmax for e, jmax in terms) >= size: return None  # a carry: not linear
  strides, offset = [], inner.offset + sum(t * d for t, d in zip(inner.strides, D))
  for (e, _), st, (lo, hi) in zip(terms, outer.strides, ranges):
    u = sum(em * t for em, t in zip(e, inner.strides))
    strides.append(u if st > 0 else -u if st < 0 else 0)
    offset += -u * lo if st > 0 else u * (hi - 1) if st < 0 else 0
  mask = list(ranges)
  for m, (lo1, hi1) in enumerate(inner.mask or ()):
    movers = [k for k, (e, jmax) in enumerate(terms) if e[m] and jmax]
    low, high = D[m], D[m] + sum(e[m] * jmax for e, jmax in terms)
    if lo1 <= low and high < hi1: continue
    if not movers:
      if not lo1 <= D[m] < hi1: return empty_view(outer.shape)
      continue
    if len(movers) > 1: return None
    k = movers[0]
    e, (lo, hi), st = terms[k][0][m], ranges[k], outer.strides[k]
    jlo, jhi = max(-(-(lo1 - D[m]) // e), 0), min((hi1 - 1 - D[m]) // e, hi - 1 - lo)  # valid j_k, inclusive
    ilo, ihi = (lo + jlo, lo + jhi) if st > 0 else (hi - 1 - jhi, hi - 1 - jlo)
    mask[k] = (max(mask[k][0], ilo), min(mask[k][1], ihi + 1))
  return View.create(outer.shape, tuple(strides), offset, tuple(mask) if outer.mask or inner.mask else None)

def unravel(idx: UOp, shape: tuple[sint, ...]) -> list[UOp]:
  """Per-axis indices of flat index `idx` into a contiguous array of `shape`."""
  out, acc = [], 1
  for i, s in enumerate(reversed(shape)):
    if s == 1: out.append(UOp.const(idx.dtype, 0))
    else: out.append(idx // _idx(acc, idx.dtype) if i == len(shape) - 1 else (idx // _idx(acc, idx.dtype)) % _idx(s, idx.dtype))
    acc = ssimplify(acc * s)
  return out[::-1]

@dataclass(frozen=True)
class ShapeTracker:
  views: tuple[View, ...]

  @staticmethod
  def from_shape(shape: tuple[sint, ...]) -> ShapeTracker: return ShapeTracker((View.create(tuple(shape)),))
  @property
  def shape(self) -> tuple[sint, ...]: return self.views[-1].shape
  @property
  def size(self) -> sint: return self.views[-1].size
  @property
  def contiguous(self) -> bool: return len(self.views) == 1 and self.views[0].contiguous
  def __add__(self, other: ShapeTracker) -> ShapeTracker:
    """`other` applied on top of self (other's first view indexes a contiguous array of self's shape)."""
    out = self
    for v in other.views:
      out = out.reshape(v.shape) if v.contiguous and v.size == out.size else ShapeTracker(out.views + (v,)).simplify()
    return out
  def simplify(self) -> ShapeTracker:
    """Merge the last two views while one view can express both."""
    views = self.views
    while len(views) >= 2 and (merged := merge_views(views[-2], views[-1])) is not None: views = views[:-2] + (merged,)
    return self if views is self.views else ShapeTracker(views)

  def _last(self, v: View) -> ShapeTracker: return ShapeTracker(self.views[:-1] + (v,)).simplify()
  def permute(self, order) -> ShapeTracker: return self._last(self.views[-1].permute(tuple(order)))
  def expand(self, shape) -> ShapeTracker: return self._last(self.views[-1].expand(tuple(shape)))
  def pad(self, arg) -> ShapeTracker: return self._last(self.views[-1].pad(tuple(arg)))
  def shrink(self, arg) -> ShapeTracker: return self._last(self.views[-1].shrink(tuple(arg)))
  def flip(self, axes) -> ShapeTracker: return self._last(self.views[-1].flip(tuple(axes)))
  def reshape(self, shape) -> ShapeTracker:
    shape = tuple(shape)
    if (v := self.views[-1].reshape(shape)) is not None: return self._last(v)
    return ShapeTracker(self.views + (View.create(shape),)).simplify()

  def to_uops(self, idxs: list[UOp], idx_dtype: DType = dtypes.int32) -> tuple[UOp, UOp]:
    """(buffer offset, validity) of the element at `idxs`, through every view: the next view in gets its indices by
    regrouping these where this view is a contiguous split of its axes, else by unravelling this view's flat index."""
    views, valid = self.views[::-1], None
    for outer, inner in zip(views, views[1:]):
      if (groups := _regroupable(outer, inner)) is not None:
        idxs = [_joined([idxs[a] for a in group], [outer.shape[a] for a in group], idx_dtype) for group in groups]
        continue
      idx, outer_valid = outer.to_uops(idxs, idx_dtype)
      valid = outer_valid if valid is None else valid & outer_valid
      idxs = unravel(idx, inner.shape)
    idx, inner_valid = views[-1].to_uops(idxs, idx_dtype)
    return idx, inner_valid if valid is None else valid & inner_valid

  def flattened_views(self) -> list[View]:
    """The views to_uops computes a flat index of (the innermost one's is the buffer offset); the others' indices only
    regroup axes, so their flat index, which can span far more than the buffer, never exists."""
    return [outer for outer, inner in zip(self.views[:0:-1], self.views[-2::-1]) if _regroupable(outer, inner) is None] + [self.views[0]]

def _regroupable(outer: View, inner: View) -> list[list[int]] | None:
  """For a contiguous `outer` whose axes split `inner`'s (each inner axis is a run of consecutive outer axes, axes of
  size 1 aside), the outer axes of each inner axis; else None."""
  if not outer.contiguous or not all(isinstance(s, int) for s in (*outer.shape, *inner.shape)): return None
  axes = [a for a, s in enumerate(outer.shape) if s != 1]
  groups, at = [], 0
  for size in inner.shape:
    group, span = [], 1
    while span < size and at < len(axes):
      group.append(axes[at]); span *= outer.shape[axes[at]]; at += 1
    if span != size: return None
    groups.append(group)
  return groups if at == len(axes) else None

def _joined(idxs: list[UOp], sizes: list[int], idx_dtype: DType) -> UOp:
  """The index into one axis of the consecutive axes `sizes` split it into (the first outermost)."""
  if not idxs: return UOp.const(idx_dtype, 0)
  out = idxs[0]
  for i, size in zip(idxs[1:], sizes[1:]): out = out * _idx(size, idx_dtype) + i
  return out
