"""Scatters through sorted indices: for k indices writing into n positions, the sum (product, max, min, or last value)
of what each position receives, in O((k + n) log k) work where the one-hot form (every index compared with every
position) costs k * n. The indices are sorted along their axis, each position finds the end of its run of equal
indices by binary search, and the values taken in sorted order are combined within runs by a log-step scan (the last
value is taken as it is). scatter_reduce, [] = with tensor indices and a gather's gradient take this form where the
one-hot one would be big."""
from __future__ import annotations
from dataclasses import dataclass
from typing import TYPE_CHECKING
from ir.dtype import dtypes
from ir.helpers import prod
from ir.uop import all_int

if TYPE_CHECKING: from tg.tensor import Tensor

SORTED_SCATTER_MIN = 1 << 24  # one-hot terms (indices x positions x columns) below which the one-hot form is kept
# one-hot terms that cost as much as one element of one step of the sorted form (sorting network, scan or search).
# On a CPU, where each column has its own indices: one-hot 1.3-1.5x faster at 12 and 16 terms a step, sorted 1.7-2.4x
# faster at 34 and 35 (rows of 1024 or 4096 scattering 256 to 4096 values); one index line for every column sorted
# 3-27x faster from 23 up
SORTED_STEP_TERMS = 32

def sorted_pays(k: int, n: int, columns: int, sorted_columns: int) -> bool:
  """Whether k indices into n positions, in `columns` columns of which `sorted_columns` have indices of their own (1
  where one index line serves every column), are cheaper to scatter sorted than one-hot."""
  steps = k.bit_length()
  sort_and_search = sorted_columns * (k * steps * (steps + 1) // 2 + n * steps)
  return k * n * columns >= SORTED_STEP_TERMS * (sort_and_search + columns * (k * steps + n))

def sorted_scatter_index(index: Tensor, dim: int, n) -> Tensor | None:
  """The index to scatter into n positions through sorted indices with (its one line along dim where it is that line
  broadcast), or None where the one-hot form is cheaper."""
  if not all_int(index.shape) or not isinstance(n, int): return None
  k, columns = index.shape[dim], prod(s for a, s in enumerate(index.shape) if a != dim)
  if k * n * columns < SORTED_SCATTER_MIN: return None
  line = index_line(index, dim)
  if not sorted_pays(k, n, columns, 1 if line is not None else columns): return None
  return index if line is None else along(line, dim, index.ndim)

def index_line(index: Tensor, dim: int) -> Tensor | None:
  """The 1-d index along `dim` when `index` is it broadcast over every other axis (as x[idx] makes it), else None."""
  from tg.schedule import movement_view
  _, st = movement_view(index.uop)
  if len(st.views) != 1 or st.views[0].mask is not None or any(s != 0 for a, s in enumerate(st.views[0].strides) if a != dim): return None
  return index.shrink([None if a == dim else (0, 1) for a in range(index.ndim)]).reshape(index.shape[dim])

def along(line: Tensor, dim: int, ndim: int) -> Tensor:
  """A 1-d tensor as an ndim-d one running along `dim`."""
  return line.reshape(*[line.shape[0] if a == dim else 1 for a in range(ndim)])

def empty_value(reduce: str, dtype) -> float | int:
  """What a position nobody writes holds after the reduction: the reduction's identity (0 for the last value)."""
  if reduce == "prod": return 1
  if reduce in ("amax", "amin"):
    big = float("inf") if dtypes.is_float(dtype) else dtypes.max(dtype)
    return big if reduce == "amin" else -big if dtypes.is_float(dtype) else dtypes.min(dtype)
  return 0

def segment_reduce(src: Tensor, index: Tensor, dim: int, n: int, reduce: str, ordered: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
  """(combined, count): for each position j in [0, n) along `dim`, the `reduce` ("sum", "prod", "amax", "amin", or
  "replace": the last in order) of src's slices whose index is j, and how many there are; empty_value where none is.
  `index` has src's shape, or 1 on every axis but `dim` (one line of indices for every column); indices outside
  [0, n) write nothing, as a gather reads 0 there. combined has src's shape with n at `dim`, count index's. `ordered`:
  the index sorted along dim and the order that sorts it (stable), where the caller has them."""
  k = index.shape[dim]
  def shifted(t: Tensor, by: int, fill) -> Tensor:  # t moved `by` along dim, `fill` coming in at the front
    return t.shrink([(0, t.shape[dim] - by) if a == dim else None for a in range(t.ndim)]).pad([(by, 0) if a == dim else None for a in range(t.ndim)], value=fill)
  key_dtype = dtypes.int64 if n >= 2**31 else dtypes.int32  # 32-bit keys sort packed with their positions
  if index.dtype.itemsize < key_dtype.itemsize: index = index.cast(key_dtype)  # room for n, which marks the indices out of range
  keys, order = ordered or ((index >= 0) & (index < n)).where(index, n).cast(key_dtype).sort(dim)  # an index that writes nowhere sorts last
  vals = src._take(dim, order.expand(src.shape))
  combine = {"sum": lambda a, b: a + b, "prod": lambda a, b: a * b, "amax": lambda a, b: a.maximum(b), "amin": lambda a, b: a.minimum(b)}.get(reduce)
  shift = 1
  while combine is not None and shift < k:  # now each value combines the 2*shift values ending at it that share its index
    same = shifted(keys, shift, -1) == keys  # -1: before every key
    vals = same.where(combine(vals, shifted(vals, shift, 0)), vals).contiguous()
    shift *= 2
  wanted = along(type(src).arange(n, device=src.device, dtype=keys.dtype), dim, keys.ndim)
  end = type(src).zeros(*[n if a == dim else s for a, s in enumerate(keys.shape)], device=src.device, dtype=dtypes.int32)
  step = 1 << (k.bit_length() - 1)
  while step:  # end: how many keys are at most j, the end of j's run
    probe = end + step
    ok = (probe <= k) & (keys._take(dim, (probe - 1).clip(0, k - 1)) <= wanted)
    end = ok.where(probe, end).contiguous()
    step //= 2
  count = end - shifted(end, 1, 0)
  last = (end - 1).clip(0, k - 1).expand(*[n if a == dim else s for a, s in enumerate(src.shape)])
  return (count > 0).where(vals._take(dim, last), empty_value(reduce, src.dtype)), count

def segment_sum(src: Tensor, index: Tensor, dim: int, n: int) -> tuple[Tensor, Tensor]:
  """segment_reduce's sum and count, the sum's gradient with respect to src a gather of the positions' gradients."""
  from tg.elementwise import _with_grad
  total, count = segment_reduce(src, index, dim, n, "sum")
  return _with_grad(total, _SegmentSumGrad(dim), src, index), count

@dataclass(frozen=True)
class _SegmentSumGrad:
  """Each value's gradient is its position's (0 for an index outside the positions). Equal for equal dims, so that
  graphs built again match the ones cached."""
  dim: int
  def __call__(self, g: Tensor, _out: Tensor, src: Tensor, index: Tensor) -> tuple[Tensor, None]:
    return g._take(self.dim, index.expand(src.shape)), None

@dataclass(frozen=True)
class SortedTakeGrad:
  """The gradient of x._take(dim, index) with respect to x: g summed by index through segment_sum (index: the take's,
  or its one line along dim)."""
  dim: int
  def __call__(self, g: Tensor, _out: Tensor, x: Tensor, index: Tensor) -> tuple[Tensor, None]:
    return segment_sum(g, index, self.dim, x.shape[self.dim])[0], None
