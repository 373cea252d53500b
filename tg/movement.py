"""Movement and indexing: reshape/permute/expand/pad/shrink/flip and everything built from them (slicing, cat, stack,
split, roll, repeat, gather, scatter, masks), plus `[]` and `[]=`. Integer-tensor indexing is a gather that the
consumer kernel reads through; scatters combine through one-hot masks or, where those would be big, through sorted
indices (tg/sorted_scatter.py)."""
from __future__ import annotations
from typing import TYPE_CHECKING, Sequence
import numpy as np
from ir.dtype import dtypes
from ir.helpers import argsort, broadcast_shape, prod
from ir.ops import Ops
from ir.uop import UOp, all_int, smin, sprod, ssimplify
from tg.sorted_scatter import SortedTakeGrad, empty_value, segment_reduce, segment_sum, sorted_scatter_index

if TYPE_CHECKING: from tg.tensor import Tensor

def _from_the_end(index: Tensor, n) -> Tensor:
  """index with its negative values counted from the end of an axis of n (unsigned ones have none)."""
  return index if dtypes.is_unsigned(index.dtype) else (index < 0).where(index + n, index)

def _flat_shape(args) -> tuple:
  return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)

def _tensor_list(first, rest) -> list:
  """Tensors given one by one, as lists, or mixed (cat/stack take both forms)."""
  tensors = [t for a in (first, *rest) for t in (a if isinstance(a, (list, tuple)) else (a,))]
  if not tensors: raise RuntimeError("expected a non-empty list of tensors")
  return tensors

def _symbolic_slice(i: slice, n) -> tuple:
  """(start, stop) of a step-1 slice with a bound Variable in its bounds or its dimension's size; negative ints count
  from the end as in Python (the shrink checks the range)."""
  if i.step not in (None, 1): raise IndexError(f"a slice with symbolic bounds or of a symbolic size takes step 1, got {i}")
  at = lambda v, default: default if v is None else ssimplify(n + v) if isinstance(v, int) and v < 0 else v
  return at(i.start, 0), at(i.stop, n)

class MovementMixin:
  __slots__ = ()

  def _axis(self, dim: int, ndim: int | None = None) -> int:
    n = self.ndim if ndim is None else ndim
    if not isinstance(dim, int) or isinstance(dim, bool): raise TypeError(f"dimension must be an int, got {type(dim).__name__}")
    if not -max(n, 1) <= dim < max(n, 1): raise IndexError(f"dimension {dim} is out of range for a {n}-d tensor (expected [{-max(n, 1)}, {max(n, 1) - 1}])")
    return dim + n if dim < 0 else dim

  # ---------------- primitives ----------------
  def reshape(self, *shape) -> Tensor:
    shape = tuple(s if s is not None else self.shape[i] for i, s in enumerate(_flat_shape(shape)))
    if shape.count(-1) > 1: raise ValueError(f"only one dimension can be -1 in reshape {shape}")
    if -1 in shape:
      # symbolic sizes kept from self's shape cancel out; the rest must divide by the remaining sizes
      rest, known = [self.numel()] if all_int(self.shape) else list(self.shape), 1
      for s in shape:
        if isinstance(s, UOp) and s in rest: rest.remove(s)
        elif s != -1: known = known * s
      missing = ssimplify(sprod(rest) // known) if isinstance(known, int) and known != 0 else None
      if missing is None or sprod((missing, known)) != sprod(rest): raise ValueError(f"can't reshape {self.shape} to {shape}")
      shape = tuple(missing if s == -1 else s for s in shape)
    if any(not isinstance(s, (int, UOp)) or smin(s) < 0 for s in shape): raise ValueError(f"invalid shape {shape}")
    return self._new(self.uop.reshape(shape))
  def view(self, *shape) -> Tensor: return self.reshape(*shape)
  def permute(self, *order) -> Tensor:
    order = tuple(self._axis(d) for d in _flat_shape(order))
    return self._new(self.uop.permute(order))
  def expand(self, *shape) -> Tensor:
    shape = _flat_shape(shape)
    if len(shape) < self.ndim: raise ValueError(f"can't expand {self.shape} to {shape}: fewer dimensions")
    base = (1,) * (len(shape) - self.ndim) + self.shape
    for i, (s, b) in enumerate(zip(shape, base)):
      if not isinstance(s, (int, UOp)) or smin(s) < -1 or (s == -1 and i < len(shape) - self.ndim) or (b != 1 and s not in (-1, b)):
        raise ValueError(f"can't expand {self.shape} to {shape}: each size must be -1 (keep), the existing size, or any size >= 0 where it is 1")
    return self._new(self.uop.reshape(base).expand(tuple(b if s == -1 else s for s, b in zip(shape, base))))
  def expand_as(self, other: Tensor) -> Tensor: return self.expand(other.shape)
  def shrink(self, arg: Sequence[tuple[int, int] | None]) -> Tensor:
    if len(arg) != self.ndim: raise ValueError(f"shrink needs one range per dimension of {self.shape}, got {arg}")
    return self._new(self.uop.shrink(tuple((0, s) if a is None else a for a, s in zip(arg, self.shape))))
  def flip(self, *axis) -> Tensor:
    axes = {self._axis(a) for a in _flat_shape(axis)}
    return self._new(self.uop.flip(tuple(i in axes for i in range(self.ndim))))
  def pad(self, padding, mode: str = "constant", value: float = 0.0) -> Tensor:
    """`padding` is torch's flat (left, right, top, bottom, ...) from the last dim, or one (before, after)/None per dim.
    Negative amounts remove elements. Modes: constant, reflect, replicate, circular. Errors are PyTorch's types: an
    unknown mode is NotImplementedError, bad amounts RuntimeError."""
    if all(isinstance(p, (int, UOp)) for p in padding):
      if len(padding) % 2 or len(padding) // 2 > self.ndim: raise RuntimeError(f"flat padding {padding} needs pairs for at most {self.ndim} dims")
      pairs = [(0, 0)] * (self.ndim - len(padding) // 2) + [(padding[i], padding[i + 1]) for i in range(len(padding) - 2, -1, -2)]
    else:
      if len(padding) != self.ndim: raise RuntimeError(f"padding {padding} needs one pair per dimension of {self.shape}")
      pairs = [(0, 0) if p is None else tuple(p) for p in padding]
    if mode not in ("constant", "reflect", "replicate", "circular"): raise NotImplementedError(f"unknown pad mode {mode!r}")
    symbolic = not all_int((*self.shape, *(p for pair in pairs for p in pair)))
    if symbolic and mode != "constant": raise NotImplementedError(f"pad mode {mode!r} of symbolic sizes (shape {self.shape}, padding {pairs}); only 'constant' is supported")
    cut = lambda a: min(a, 0) if isinstance(a, int) else 0  # a symbolic amount only adds (UOp.pad rejects one that may be negative)
    x = self.shrink([(-cut(a), s + cut(b)) for (a, b), s in zip(pairs, self.shape)])
    pos = [(a - cut(a), b - cut(b)) for a, b in pairs]
    if mode == "constant":
      out = x._new(x.uop.pad(tuple(pos)))
      if value == 0: return out
      inside = type(self)(UOp.const(dtypes.bool, True, x.device).reshape((1,) * x.ndim).expand(x.shape).pad(tuple(pos)))
      return inside.where(out, value)
    for d, (a, b) in enumerate(pos):
      if a == 0 and b == 0: continue
      n = x.shape[d]
      if mode == "reflect" and (a >= n or b >= n): raise RuntimeError(f"reflect padding {a, b} must be smaller than dimension {d} of size {n}")
      if mode == "circular" and (a > n or b > n): raise RuntimeError(f"circular padding {a, b} can't exceed dimension {d} of size {n}")
      sl = lambda lo, hi: x.shrink([(lo, hi) if i == d else None for i in range(x.ndim)])
      if mode == "reflect": left, right = sl(1, a + 1).flip(d), sl(n - b - 1, n - 1).flip(d)
      elif mode == "replicate": left, right = sl(0, 1).expand(*[a if i == d else -1 for i in range(x.ndim)]), sl(n - 1, n).expand(*[b if i == d else -1 for i in range(x.ndim)])
      else: left, right = sl(n - a, n), sl(0, b)
      x = left.cat(x, right, dim=d)
    return x

  # ---------------- derived ----------------
  def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
    order = list(range(self.ndim))
    a, b = self._axis(dim0), self._axis(dim1)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)
  @property
  def T(self) -> Tensor: return self.transpose()
  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if self.ndim == 0: return self.reshape(1)
    a, b = self._axis(start_dim), self._axis(end_dim)
    return self.reshape(*self.shape[:a], prod(self.shape[a:b + 1]), *self.shape[b + 1:])
  def unflatten(self, dim: int, sizes: Sequence[int]) -> Tensor:
    d = self._axis(dim)
    return self.reshape(*self.shape[:d], *sizes, *self.shape[d + 1:])
  def squeeze(self, dim: int | Sequence[int] | None = None) -> Tensor:
    """Remove size-1 dims: all of them, or those of `dim`, one int or a tuple (PyTorch 2); a named dim of another size stays."""
    if dim is None: return self.reshape(*[s for s in self.shape if s != 1])
    dims = {self._axis(d) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
    return self.reshape(*[s for i, s in enumerate(self.shape) if i not in dims or s != 1])
  def unsqueeze(self, dim: int) -> Tensor:
    d = self._axis(dim, self.ndim + 1)
    return self.reshape(*self.shape[:d], 1, *self.shape[d:])
  def repeat(self, *repeats) -> Tensor:
    repeats = _flat_shape(repeats)
    if len(repeats) < self.ndim: raise ValueError(f"repeat needs at least {self.ndim} counts, got {repeats}")
    base = (1,) * (len(repeats) - self.ndim) + self.shape
    x = self.reshape(base)
    interleaved = tuple(v for s in base for v in (1, s))
    expanded = tuple(v for r, s in zip(repeats, base) for v in (r, s))
    return x.reshape(interleaved).expand(expanded).reshape(*[r * s for r, s in zip(repeats, base)])
  def repeat_interleave(self, repeats: int, dim: int | None = None) -> Tensor:
    x, d = (self.flatten(), 0) if dim is None else (self, self._axis(dim))
    return x.unsqueeze(d + 1).expand(*x.shape[:d + 1], repeats, *x.shape[d + 1:]).flatten(d, d + 1)
  def roll(self, shifts, dims=None) -> Tensor:
    if dims is None: return self.flatten().roll(shifts, 0).reshape(self.shape)
    shifts, dims = (shifts,) if isinstance(shifts, int) else tuple(shifts), (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims): raise ValueError(f"roll got {len(shifts)} shifts for {len(dims)} dims")
    x = self
    for s, d in zip(shifts, dims):
      d = x._axis(d)
      n = x.shape[d]
      if n == 0: continue
      s %= n
      if s: x = x.shrink([(n - s, n) if i == d else None for i in range(x.ndim)]).cat(x.shrink([(0, n - s) if i == d else None for i in range(x.ndim)]), dim=d)
    return x

  def cat(self, *others: Tensor, dim: int = 0) -> Tensor:
    """Join along `dim`: `a.cat(b, c)`, or `Tensor.cat([a, b, c])` with one list as PyTorch's torch.cat."""
    tensors = _tensor_list(self, others)
    first = tensors[0]
    d = first._axis(dim)
    for t in tensors:
      if t.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != d):
        raise ValueError(f"cat needs equal shapes except in dimension {d}, got {[t.shape for t in tensors]}")
    from ir.dtype import least_upper_dtype
    dt = least_upper_dtype(*(t.dtype for t in tensors))
    total, out, at = sum(t.shape[d] for t in tensors), None, 0
    for t in tensors:
      part = t.cast(dt).pad([(at, total - at - t.shape[d]) if i == d else None for i in range(first.ndim)])
      out = part if out is None else out + part
      at += t.shape[d]
    return out
  def stack(self, *others: Tensor, dim: int = 0) -> Tensor:
    """Join along a new dim: `a.stack(b, c)`, `Tensor.stack(a, b)` or `Tensor.stack([a, b], dim=1)` (tinygrad)."""
    tensors = _tensor_list(self, others)
    d = tensors[0]._axis(dim, tensors[0].ndim + 1)
    return tensors[0].unsqueeze(d).cat(*(t.unsqueeze(d) for t in tensors[1:]), dim=d)
  def split(self, sizes: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    d = self._axis(dim)
    n = self.shape[d]
    if isinstance(sizes, int):
      if sizes <= 0: raise ValueError(f"split size must be positive, got {sizes}")
      sizes = [min(sizes, n - i) for i in range(0, n, sizes)] or [0]
    if sum(sizes) != n: raise ValueError(f"split sizes {list(sizes)} don't add up to dimension {d} of size {n}")
    out, at = [], 0
    for s in sizes:
      out.append(self.shrink([(at, at + s) if i == d else None for i in range(self.ndim)]))
      at += s
    return tuple(out)
  def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    if chunks <= 0: raise ValueError(f"chunk needs a positive number of chunks, got {chunks}")
    n = self.shape[self._axis(dim)]
    return self.split(max(-(-n // chunks), 1), dim)
  def unbind(self, dim: int = 0) -> tuple[Tensor, ...]: return tuple(t.squeeze(dim) for t in self.split(1, dim))
  def unfold(self, dim: int, size: int, step: int) -> Tensor:
    """Windows of `size` every `step` along `dim` (PyTorch's Tensor.unfold): `dim` becomes the window count
    (n - size) // step + 1 and a new last dim holds each window. All views."""
    if self.ndim == 0: return self.reshape(1).unfold(0, size, step).reshape(size)
    d = self._axis(dim)
    if not 0 <= size <= self.shape[d]: raise RuntimeError(f"unfold size {size} must be in [0, {self.shape[d]}] for dimension {d} of {self.shape}")
    if step <= 0: raise RuntimeError(f"unfold step must be positive, got {step}")
    order = [i for i in range(self.ndim) if i != d] + [d]
    return self.permute(*order)._pool((size,), step).permute(*argsort(order), self.ndim)
  def meshgrid(self, *others: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
    if indexing not in ("ij", "xy"): raise ValueError(f"indexing must be 'ij' or 'xy', got {indexing!r}")
    ts = [self, *others]
    shape = tuple(t.numel() for t in ts)
    out = [t.reshape(*[-1 if i == j else 1 for j in range(len(ts))]).expand(shape) for i, t in enumerate(ts)]
    return tuple(o.transpose(0, 1) for o in out) if indexing == "xy" and len(ts) >= 2 else tuple(out)

  def tril(self, diagonal: int = 0) -> Tensor: return self._tri(diagonal, lower=True)
  def triu(self, diagonal: int = 0) -> Tensor: return self._tri(diagonal, lower=False)
  def _tri(self, diagonal: int, lower: bool) -> Tensor:
    if self.ndim < 2: raise ValueError(f"tril/triu need at least 2 dimensions, got shape {self.shape}")
    r, c = self.shape[-2:]
    rows, cols = type(self).arange(r, device=self.device).reshape(r, 1), type(self).arange(c, device=self.device).reshape(1, c)
    keep = (cols <= rows + diagonal) if lower else (cols >= rows + diagonal)
    return keep.where(self, self.zeros_like())
  def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal `offset` above (below, if negative) the main one of the dim1/dim2 planes, as a new last dim (a view)."""
    a, b = self._axis(dim1), self._axis(dim2)
    if a == b: raise RuntimeError(f"diagonal dimensions can't be the same, got {dim1} and {dim2}")
    rest = [i for i in range(self.ndim) if i not in (a, b)]
    x = self.permute(*rest, a, b)
    n, m = x.shape[-2:]
    x = x[..., max(-offset, 0):, max(offset, 0):] if offset else x
    k = max(min(x.shape[-2], x.shape[-1]), 0)
    x = x[..., :k, :k].flatten(-2, -1)
    return x.pad([None] * (x.ndim - 1) + [(0, k)])[..., :k * (k + 1)].reshape(*x.shape[:-1], k, k + 1)[..., 0] if k else x.reshape(*x.shape[:-1], 0)
  def diag(self) -> Tensor:
    if self.ndim == 1: return self.unsqueeze(1) * (self.eye(self.shape[0], device=self.device, dtype=self.dtype))
    if self.ndim == 2: return self.diagonal()
    raise ValueError(f"diag needs a 1-d or 2-d tensor, got shape {self.shape}")

  # ---------------- selection with index tensors ----------------
  def _onehot(self, n: int, axis_after: int = -1) -> Tensor:
    """(self[..., None] == arange(n)): a bool mask with the class axis last; negative indices wrap."""
    idx = _from_the_end(self, n)
    return idx.unsqueeze(-1) == type(self).arange(n, device=self.device, dtype=idx.dtype)
  def one_hot(self, num_classes: int = -1) -> Tensor:
    if not dtypes.is_int(self.dtype): raise TypeError(f"one_hot needs an integer tensor, got {self.dtype}")
    if num_classes == -1: num_classes = int(self.max().item()) + 1
    return self._onehot(num_classes).cast(dtypes.default_int)
  def gather(self, dim: int, index: Tensor) -> Tensor:
    """out[.., i, ..] = self[.., index[.., i, ..], ..] along `dim` (torch.gather); negative indices wrap."""
    d = self._axis(dim)
    if index.ndim != self.ndim or any(i > s for j, (i, s) in enumerate(zip(index.shape, self.shape)) if j != d):
      raise RuntimeError(f"gather index shape {index.shape} doesn't fit input {self.shape} at dim {d}")
    if not dtypes.is_int(index.dtype): raise RuntimeError(f"gather index must be an integer tensor, got {index.dtype}")
    x = self.shrink([None if j == d else (0, i) for j, i in enumerate(index.shape)])
    n = self.shape[d]
    return x._take(d, _from_the_end(index, n))
  def _take(self, dim: int, index: Tensor) -> Tensor:
    """The gather primitive: index has self's shape except at `dim`; indices outside [0, n) read 0. Where summing the
    gradient over every (index, position) pair would cost more than sorting the indices, it is summed through the
    sorted indices instead (tg/sorted_scatter.py)."""
    out = self._new(UOp(Ops.TAKE, self.dtype, (self.uop, index.uop), dim), index)
    if not dtypes.is_float(self.dtype) or (keyed := sorted_scatter_index(index, dim, self.shape[dim])) is None: return out
    from tg.elementwise import _with_grad
    return _with_grad(out, SortedTakeGrad(dim), self, keyed)
  def take_along_dim(self, indices: Tensor, dim: int) -> Tensor: return self.gather(dim, indices)
  def scatter(self, dim: int, index: Tensor, src: Tensor | float, reduce: str | None = None) -> Tensor:
    """out[.., index[i], ..] = src[i] along `dim` (reduce: None, 'add' or 'multiply')."""
    if reduce not in (None, "add", "multiply"): raise RuntimeError(f"scatter reduce must be None, 'add' or 'multiply', got {reduce!r}")
    return self.scatter_reduce(dim, index, src, {None: "replace", "add": "sum", "multiply": "prod"}[reduce])
  def scatter_reduce(self, dim: int, index: Tensor, src: Tensor | float, reduce: str, include_self: bool = True) -> Tensor:
    """self with src's values combined into the positions `index` names along `dim` (torch.scatter_reduce): 'sum',
    'prod', 'mean', 'amax', 'amin', or 'replace' (scatter's; for repeated indices the last one wins). include_self=False
    leaves self's value out where something is written. Negative indices count from the end; others outside the axis
    write nothing. Big scatters go through sorted indices (tg/sorted_scatter.py), the others through one-hot masks."""
    if reduce not in ("replace", "sum", "prod", "mean", "amax", "amin"): raise RuntimeError(f"unknown scatter_reduce reduction {reduce!r}")
    d = self._axis(dim)
    if index.ndim != self.ndim: raise RuntimeError(f"scatter index must have {self.ndim} dims, got shape {index.shape}")
    if not dtypes.is_int(index.dtype): raise RuntimeError(f"scatter index must be an integer tensor, got {index.dtype}")
    src_t = src if isinstance(src, type(self)) else type(self).full(index.shape, src, dtype=self.dtype, device=self.device)
    src_t = src_t.shrink([(0, s) for s in index.shape]).cast(self.dtype)
    n = self.shape[d]
    pads = [None if j == d else (0, s - i) for j, (i, s) in enumerate(zip(index.shape, self.shape))]
    if (keyed := sorted_scatter_index(index, d, n)) is not None:
      keyed = _from_the_end(keyed, n)
      combined, count = segment_sum(src_t, keyed, d, n) if reduce in ("sum", "mean") else segment_reduce(src_t, keyed, d, n, reduce)
      combined = combined.pad(pads, value=empty_value(reduce, self.dtype))
      count = count.expand(*[n if j == d else s for j, s in enumerate(index.shape)]).pad(pads)
    else: combined, count = self._scatter_onehot(d, _from_the_end(index, n), src_t.pad(pads), reduce, pads)
    hit = count > 0
    if reduce == "replace": return hit.where(combined, self)
    if reduce == "sum": return combined + self if include_self else hit.where(combined, self)
    if reduce == "mean":
      summed, terms = (combined + self, count + 1) if include_self else (combined, count)
      return hit.where(summed / terms if dtypes.is_float(self.dtype) else summed // terms.cast(self.dtype), self)
    if reduce == "prod": return combined * self if include_self else hit.where(combined, self)
    if include_self: combined = combined.maximum(self) if reduce == "amax" else combined.minimum(self)
    return hit.where(combined, self)
  def _scatter_onehot(self, d: int, index: Tensor, vals: Tensor, reduce: str, pads: list) -> tuple[Tensor, Tensor]:
    """segment_reduce's (combined, count) through a mask of every index against every position along d (index's values
    in range or written nowhere, vals padded to self's shape)."""
    n = self.shape[d]
    mask = (index.unsqueeze(-1) == type(self).arange(n, device=self.device, dtype=index.dtype))
    mask = mask.permute(*range(d + 1), index.ndim, *range(d + 1, index.ndim))  # (.., k, n, ..)
    mask = mask.pad(pads[:d + 1] + [None] + pads[d + 1:])
    vals = vals.unsqueeze(d + 1)                                  # (.., k, 1, ..)
    count = mask.sum(d, dtype=dtypes.default_int)
    if reduce == "replace":  # for repeated indices the last write wins
      order = (type(self).arange(index.shape[d], device=self.device) + 1).reshape(*[index.shape[d] if j == d else 1 for j in range(mask.ndim)])
      winner = mask.where(order, 0).max(d, keepdim=True)
      return ((order == winner) & mask).where(vals, 0).sum(d, dtype=self.dtype), count
    if reduce in ("sum", "mean"): return mask.where(vals, 0).sum(d, dtype=self.dtype), count
    if reduce == "prod": return mask.where(vals, 1).prod(d), count
    empty = empty_value(reduce, self.dtype)
    return (mask.where(vals, empty).max(d) if reduce == "amax" else mask.where(vals, empty).min(d)), count
  def masked_fill(self, mask: Tensor, value) -> Tensor: return mask.where(value, self)
  def masked_select(self, mask: Tensor, size: int | None = None, fill_value=0) -> Tensor:
    """The elements where `mask` is true (both broadcast to one shape), in order, as a 1-d tensor. Without `size` the
    mask is read to count them (not lazy); with `size=N` (tinygrad) the result has N elements, the first N selected
    then `fill_value`, and nothing is read."""
    if mask.dtype != dtypes.bool: raise RuntimeError(f"masked_select needs a bool mask, got {mask.dtype}")
    shape = broadcast_shape(self.shape, mask.shape)
    x, keep = self._broadcast_to(shape).flatten(), mask._broadcast_to(shape).flatten()
    if size is not None: return keep._compact(x.unsqueeze(1), size, fill_value).reshape(size)
    keep_np = keep.numpy()
    return x[type(self)(np.flatnonzero(keep_np).astype(np.int32), device=self.device)] if keep_np.any() else type(self).zeros(0, dtype=self.dtype, device=self.device)
  def nonzero(self, size: int | None = None, fill_value: int = 0) -> Tensor:
    """(count, ndim) int32 indices of the nonzero elements in row-major order (tinygrad's dtype; PyTorch's is int64).
    Without `size` the data is read to count them; with `size=N` (tinygrad) there are N rows, the first N found then
    rows of `fill_value`, and nothing is read."""
    if size is None: return type(self)(np.argwhere(self.numpy()).astype(np.int32), device=self.device)
    strides = [prod(self.shape[i + 1:]) for i in range(self.ndim)]
    flat = type(self).arange(self.numel(), device=self.device, dtype=dtypes.int32).unsqueeze(1)
    coords = flat // type(self)(np.array(strides, np.int32), device=self.device) % type(self)(np.array(self.shape, np.int32), device=self.device)
    return (self != 0).flatten()._compact(coords, size, fill_value)
  def _compact(self, values: Tensor, size: int, fill_value) -> Tensor:
    """Rows of `values` (n, k) where this bool (n,) is true, in order: the first `size` of them, then rows of `fill_value`.
    Row j goes to slot (number of true entries up to j) - 1, so it is one-hot masks and sums, no data read."""
    slot = type(self).arange(size, device=self.device, dtype=dtypes.int32)
    rank = self.cast(dtypes.int32).cumsum(0) - 1
    pick = self.unsqueeze(0) & (rank.unsqueeze(0) == slot.unsqueeze(1))                     # (size, n)
    out = pick.unsqueeze(2).where(values.unsqueeze(0), 0).sum(1).cast(values.dtype)      # (size, k): one term or none
    return (slot < self.cast(dtypes.int32).sum()).unsqueeze(1).where(out, fill_value).cast(values.dtype)

  # ---------------- [] ----------------
  def _normalize_index(self, indices) -> list:
    """Indices as a list with one entry per dim (Ellipsis expanded, trailing dims filled). Lists, tuples and arrays
    are checked on the host (IndexError out of range, as PyTorch) and become tensors; a bool mask covers as many dims
    as it has, must match them, and becomes the integer tensors of its true positions (read once). Integer tensors are
    not read: their out-of-range values select 0 (tinygrad)."""
    if not isinstance(indices, tuple): indices = (indices,)
    items: list = []
    for i in indices:
      if isinstance(i, (list, tuple, np.ndarray)):
        arr = np.asarray(i)
        if arr.size == 0 and arr.dtype != np.bool_: arr = arr.astype(np.int64)  # [] indexes nothing, as numpy
        if arr.dtype.kind not in "iub": raise IndexError(f"index arrays must be integer or bool, got {i!r}")
        i = arr
      elif isinstance(i, bool) or not (i is None or i is Ellipsis or isinstance(i, (int, slice, type(self)))):
        raise IndexError(f"invalid index {i!r} of type {type(i).__name__}")
      elif isinstance(i, type(self)) and not (dtypes.is_int(i.dtype) or i.dtype == dtypes.bool): raise IndexError(f"index tensors must be integer or bool, got {i.dtype}")
      items.append(i)
    is_mask = lambda i: (isinstance(i, np.ndarray) and i.dtype == np.bool_) or (isinstance(i, type(self)) and i.dtype == dtypes.bool)
    ellipses = [k for k, i in enumerate(items) if i is Ellipsis]
    if len(ellipses) > 1: raise IndexError("an index can only have a single ellipsis")
    consumed = sum(i.ndim if is_mask(i) else 1 for i in items if i is not None and i is not Ellipsis)
    if consumed > self.ndim: raise IndexError(f"too many indices for a tensor of dimension {self.ndim}")
    fill = [slice(None)] * (self.ndim - consumed)
    items = items[:ellipses[0]] + fill + items[ellipses[0] + 1:] if ellipses else items + fill
    out: list = []
    for i in items:
      dim = sum(1 for j in out if j is not None)
      if is_mask(i):  # a bool mask selects where it is true
        if i.ndim == 0: raise IndexError("a 0-d bool index is not supported")
        if i.shape != self.shape[dim:dim + i.ndim]: raise IndexError(f"mask of shape {i.shape} doesn't match the indexed {self.shape[dim:dim + i.ndim]}")
        out.extend(type(self)(a.astype(np.int32), device=self.device) for a in np.nonzero(i if isinstance(i, np.ndarray) else i.numpy()))
      elif isinstance(i, np.ndarray):
        n = self.shape[dim]
        if (bad := i[(i < -n) | (i >= n)]).size: raise IndexError(f"index {bad.flat[0]} is out of bounds for dimension {dim} with size {n}")
        out.append(type(self)(i.astype(np.int32), device=self.device))
      else: out.append(i)
    return out

  def _basic_index(self, idx: list) -> tuple[Tensor, list[tuple[int, Tensor]]]:
    """Apply ints, slices and None; return the view and the (dim in the view, index tensor) pairs left to apply."""
    x, dim, squeeze, tensors = self, 0, [], []
    for i in idx:
      if i is None:
        x = x.unsqueeze(dim); dim += 1
        continue
      n = x.shape[dim]
      if isinstance(i, type(self)): tensors.append((dim, i)); dim += 1; continue
      if isinstance(i, int) and isinstance(n, UOp):  # one place of a symbolic size: a step-1 slice, squeezed
        x = x.shrink([_symbolic_slice(slice(i, i + 1 if i != -1 else None), n) if k == dim else None for k in range(x.ndim)])
        squeeze.append(dim); dim += 1
        continue
      if isinstance(i, int):
        if not -n <= i < n: raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {n}")
        i = i + n if i < 0 else i
        x = x.shrink([(i, i + 1) if k == dim else None for k in range(x.ndim)])
        squeeze.append(dim); dim += 1
        continue
      if any(isinstance(v, UOp) for v in (i.start, i.stop, n)):
        x = x.shrink([_symbolic_slice(i, n) if k == dim else None for k in range(x.ndim)])
        dim += 1
        continue
      start, stop, step = i.indices(n)
      count = len(range(start, stop, step))
      if step < 0: x, start, step = x.flip(dim), n - 1 - start, -step
      x = x.shrink([(start, start + (count - 1) * step + 1 if count else start) if k == dim else None for k in range(x.ndim)])
      if step > 1 and count > 1:
        x = x.pad([(0, count * step - x.shape[dim]) if k == dim else None for k in range(x.ndim)])
        x = x.reshape(*x.shape[:dim], count, step, *x.shape[dim + 1:]).shrink([(0, 1) if k == dim + 1 else None for k in range(x.ndim + 1)])
        x = x.reshape(*x.shape[:dim + 1], *x.shape[dim + 2:])
      dim += 1
    keep = [k for k in range(x.ndim) if k not in squeeze]
    remap = {k: n for n, k in enumerate(keep)}
    return x.reshape(*[x.shape[k] for k in keep]), [(remap[d], t) for d, t in tensors]

  def __getitem__(self, indices) -> Tensor:
    """ints, slices (any step), None, Ellipsis and advanced indices (integer tensors, lists, tuples, arrays, bool masks).
    Ints select first, as in PyTorch and tinygrad (numpy instead counts an int among arrays as an advanced index); the
    advanced indices then broadcast together and their dims take the place of the indexed ones when those are adjacent
    in what is left, else go to the front."""
    x, tensors = self._basic_index(self._normalize_index(indices))
    if not tensors: return x
    return x._advanced_index(tensors)

  def _advanced_index(self, tensors: list[tuple[int, Tensor]]) -> Tensor:
    """Integer-array indexing of the view left by the basic indices: the indexed dims are flattened into one and
    gathered with one index."""
    dims = [d for d, _ in tensors]
    try: bshape = broadcast_shape(*(t.shape for _, t in tensors))
    except ValueError as e: raise IndexError(f"index arrays don't broadcast together: {e}") from None
    rest = [d for d in range(self.ndim) if d not in dims]
    sizes = [self.shape[d] for d in dims]
    flat, inside = None, None
    for (d, t), n, stride in zip(tensors, sizes, [prod(sizes[k + 1:]) for k in range(len(sizes))]):
      t = t._broadcast_to(bshape).cast(dtypes.int64 if prod(sizes) >= 2**31 else dtypes.int32)
      t = _from_the_end(t, n)
      ok = (t >= 0) & (t < n)
      flat, inside = (t * stride, ok) if flat is None else (flat + t * stride, inside & ok)
    flat = inside.where(flat, -1)  # a bad index in any dim reads 0
    x = self.permute(*dims, *rest).reshape(prod(sizes), *[self.shape[d] for d in rest])
    nb = prod(bshape)
    index = flat.reshape(nb, *[1] * len(rest)).expand(nb, *x.shape[1:])
    out = x._take(0, index).reshape(*bshape, *x.shape[1:])
    nbd = len(bshape)
    if dims == list(range(dims[0], dims[0] + len(dims))) and dims[0] > 0:  # adjacent index dims stay in place
      out = out.permute(*range(nbd, nbd + dims[0]), *range(nbd), *range(nbd + dims[0], out.ndim))
    return out

  def _check_index_tensors(self, idx: list) -> None:
    """Raise IndexError for an index tensor entry outside its dimension (reads give 0 there; a write must not land)."""
    dims = [k for k in idx if k is not None]
    for d, i in enumerate(dims):
      if not isinstance(i, type(self)) or i.numel() == 0: continue
      values, n = i.numpy(), self.shape[d]
      if (bad := values[(values < -n) | (values >= n)]).size: raise IndexError(f"index {bad.flat[0]} is out of bounds for dimension {d} with size {n}")

  def __setitem__(self, indices, value) -> None:
    idx = self._normalize_index(indices)
    value = value if isinstance(value, type(self)) else type(self)(value, device=self.device, dtype=self.dtype)
    if self.uop.base.op is not Ops.BUFFER: self.realize()
    if not any(isinstance(i, type(self)) for i in idx):
      view, _ = self._basic_index(idx)
      view.assign(value._broadcast_to(view.shape).cast(self.dtype)).realize()
      return
    self._check_index_tensors(idx)
    # integer tensors: a scatter into the flat tensor of the positions they pick (for repeated ones the last one wins)
    positions = type(self).arange(self.numel(), device=self.device).reshape(self.shape)
    chosen = positions[tuple(indices) if isinstance(indices, tuple) else indices]
    value, chosen = value._broadcast_to(chosen.shape).cast(self.dtype).flatten(), chosen.flatten()
    if sorted_scatter_index(chosen, 0, self.numel()) is None:
      self.assign(self.flatten().scatter_reduce(0, chosen, value, "replace").reshape(self.shape)).realize()
      return
    # the index tensors were read to check them already: the positions are sorted here, not by a network on the device
    picked = chosen.numpy()
    order = np.argsort(picked, kind="stable").astype(np.int32)
    ordered = (type(self)(picked[order], device=self.device), type(self)(order, device=self.device))
    new, count = segment_reduce(value, chosen, 0, self.numel(), "replace", ordered)
    self.assign((count > 0).where(new, self.flatten()).reshape(self.shape)).realize()
