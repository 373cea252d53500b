"""Processing ops: matrix products, einsum, convolutions and pooling (over sliding-window views), interpolation,
normalization, dropout and attention."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Callable, Sequence
from dataclasses import dataclass
from ir.dtype import DType, dtypes
from ir.ops import Ops
from ir.uop import UOp, all_int
from ir.helpers import argsort, broadcast_shape, ceildiv, flatten, prod, round_up
from ir.switches import FLOAT16, IMAGE, TRAINING

if TYPE_CHECKING: from tg.tensor import Tensor

def _tuple(x, n: int) -> tuple[int, ...]:
  if isinstance(x, int): return (x,) * n
  x = tuple(x)
  if len(x) != n: raise ValueError(f"expected {n} values, got {x}")
  return x

def _conv_padding(padding, n: int) -> list[tuple[int, int]]:
  """int, one int per spatial dim, or torch's flat (left, right, top, bottom, ...) from the last dim."""
  if isinstance(padding, int): return [(padding, padding)] * n
  padding = tuple(padding)
  if len(padding) == n: return [(p, p) for p in padding]
  if len(padding) == 2 * n: return [(padding[2 * i], padding[2 * i + 1]) for i in range(n)][::-1]
  raise ValueError(f"padding {padding} doesn't fit {n} spatial dims")

def _as_matrices(x: Tensor, w: Tensor) -> tuple[Tensor, Tensor, bool, bool]:
  """A matmul's operands with 1-d ones made a row (x) and a column (w), and whether the result loses those dims."""
  if x.ndim == 0 or w.ndim == 0: raise ValueError(f"matmul needs at least 1-d tensors, got {x.shape} and {w.shape}")
  k, wk = x.shape[-1], w.shape[-2] if w.ndim > 1 else w.shape[0]
  if k != wk: raise ValueError(f"matmul shapes {x.shape} and {w.shape} don't match: inner dimensions {k} and {wk}")
  return x.reshape(1, k) if x.ndim == 1 else x, w.reshape(k, 1) if w.ndim == 1 else w, x.ndim == 1, w.ndim == 1

def _squeezed(out: Tensor, rows: bool, cols: bool) -> Tensor:
  """A matmul's result without the row (of a 1-d x) and column (of a 1-d w) it was computed with."""
  if cols: out = out.squeeze(-1)
  return out.squeeze(-2 if not cols else -1) if rows else out

def _check_groups(cin: int, weight_shape: tuple, groups: int) -> None:
  """A RuntimeError, as PyTorch's, when `cin` input channels and a (cout, cin/groups, ...) weight don't fit `groups`."""
  if cin != weight_shape[1] * groups or weight_shape[0] % groups:
    raise RuntimeError(f"conv input channels {cin} don't match weight {weight_shape} with groups={groups}")

def _stored_as_image(t: Tensor) -> Tensor:
  """t stored as an image (Tensor._as_image), in halves with FLOAT16=1 (read back as t's dtype)."""
  return t.cast(dtypes.float16)._as_image().cast(t.dtype) if FLOAT16 and t.dtype != dtypes.float16 else t._as_image()

@dataclass(frozen=True)
class ConvGrad:
  """Gradients of a convolution: the input's by a transposed convolution (no window scatter), the weight's by
  differentiating the forward graph. A value object, so equal convolutions give equal graphs (schedule cache hits)."""
  groups: int
  stride: tuple[int, ...]
  dilation: tuple[int, ...]
  pads: tuple[tuple[int, int], ...]
  def __call__(self, g: UOp, value: UOp, x: UOp, w: UOp) -> tuple[UOp, UOp]:
    from tg.gradient import compute_gradient
    from tg.tensor import Tensor
    gt, wt = Tensor(g), Tensor(w)
    spatial = x.shape[2:]
    out_pad = [size + lo + hi - ((o - 1) * s + d * (k - 1) + 1)
               for size, (lo, hi), o, s, d, k in zip(spatial, self.pads, g.shape[2:], self.stride, self.dilation, w.shape[2:])]
    if _channel_lanes(wt, wt.shape[0] // self.groups):  # the weight's gradient reads g with channels innermost: they become vector lanes
      gt = _stored_with_innermost(gt, 1)  # (the input's gradient pads this copy channels-last too)
    gx = gt.conv_transpose2d(wt, groups=self.groups, stride=self.stride, dilation=self.dilation, padding=0, output_padding=out_pad)
    gx = gx.shrink([None, None, *[(lo, lo + size) for (lo, _), size in zip(self.pads, spatial)]])
    gw = compute_gradient(value, gt.uop, [w]).get(w)
    return gx.uop, gw

def _cpu_lanes(t: Tensor) -> int:
  """Float lanes of a vector register when `t` is a float tensor on CPU devices (whose kernels split their outer
  loop across cores; a sharded tensor's devices are all of one kind), else 0."""
  from drivers.device import Device
  if not dtypes.is_float(t.dtype): return 0
  renderer = Device[t.device if isinstance(t.device, str) else t.device[0]].renderer
  return getattr(renderer, "vector_width", 0) if getattr(renderer, "splits_across_cores", False) else 0

def _stored_with_innermost(t: Tensor, axis: int) -> Tensor:
  """A copy of `t` laid out in memory with `axis` innermost, seen in t's own axis order."""
  order = [a for a in range(t.ndim) if a != axis] + [axis]
  return t.permute(*order).contiguous().permute(*argsort(order))

def _channel_lanes(weight: Tensor, cout_per_group: int) -> bool:
  """Whether a convolution on a CPU should read its weight with output channels contiguous (a small copy), so that a
  whole vector of output channels is computed from one broadcast input value."""
  return bool(lanes := _cpu_lanes(weight)) and cout_per_group % lanes == 0

PANEL_MIN = 256  # matmuls with k and m at least this big read their right operand through packed panels
PANEL_MIN_BYTES = 768 * 768 * 4  # ... when it is larger than this (about what an L2 cache holds): up to here, reading w
# in place ran 4-10% faster than packing plus the packed product (384-768 squared); at 1024 and 1536 squared, whose rows
# of w are 4 and 6 KiB apart and share few cache sets, it ran at 40% of the packed speed

# ... or when its rows share few cache sets: (rows a multiple of this many bytes apart, w over this many bytes). GFLOPS in
# place -> packed: w 1024x512 158 -> 393, 512x1024 183 -> 392, 256x1024 304 -> 384; but 512x512 (1 MiB) 433 in place
# against 347 packed, and 512x1100 (rows 4400 bytes apart) 354 -> 361
ALIASED_ROWS = ((4096, 0), (2048, 1 << 20))

COPY_MIN_ROWS = 32  # x @ w copies w (into panels, or padded) only for an x of this many rows or more: the copy costs what
# about 24 rows of the product gain (microseconds, read in place -> copied: 1024x1024 w packed, 16 rows 232-236 -> 306-327,
# 32 rows 446-450 -> 375-407; 1000x1000 w padded, 16 rows 231-253 -> 296-303, 32 rows 404-442 -> 365-390)

def _product_lanes(x: Tensor, w: Tensor) -> int:
  """Float lanes of a vector register for x @ w on a CPU whose w is a matrix of at least PANEL_MIN x PANEL_MIN and
  whose x has at least COPY_MIN_ROWS rows, or 0 (the products that packing and padding w are for)."""
  lanes = _cpu_lanes(w)
  if w.ndim != 2 or not lanes or not all_int(w.shape): return 0
  k, m = w.shape
  return lanes if k >= PANEL_MIN and m >= PANEL_MIN and x.numel() // k >= COPY_MIN_ROWS else 0

def _panel_width(x: Tensor, w: Tensor, copied: bool = False) -> int:
  """Lanes of a packed panel of `w` for x @ w, or 0 when packing doesn't pay (small, batched, or not a CPU).
  `copied`: w is copied anyway (padded), so that packing it costs nothing more, at any size (700 squared: 400 -> 435
  GFLOPS)."""
  lanes = _product_lanes(x, w)
  if not lanes or w.shape[1] % lanes: return 0
  size, row = w.numel() * w.dtype.itemsize, w.shape[1] * w.dtype.itemsize
  aliased = any(row % apart == 0 and size > over for apart, over in ALIASED_ROWS)
  return lanes if size > PANEL_MIN_BYTES or copied or aliased else 0

# multiply-adds of a product below which padding w's columns costs more than it saves: columns that 4 lanes divide
# (part-vectors), and columns that they don't (a kernel without vectors: 384x100 @ 100x31 278 -> 38 us)
PAD_MIN_MACS, UNVECTORIZED_PAD_MIN_MACS = 1 << 21, 1 << 16

def _padding_lanes(x: Tensor, w: Tensor) -> int:
  """Float lanes of a CPU vector register for x @ w whose w is a matrix and whose sizes are all integers, else 0: the
  products whose operands _lane_padding and _row_padding may pad."""
  lanes = _cpu_lanes(w)
  return lanes if lanes and w.ndim == 2 and all_int((*x.shape, *w.shape)) else 0

def _lane_padding(x: Tensor, w: Tensor) -> int:
  """Zero columns that bring w's to whole pairs of vector registers for x @ w on a CPU, or 0 (a multiple already,
  small, or not a CPU): columns that only half-vectors divide run at about half speed, and an odd count of vectors
  (1808 = 113 x 16) leaves the register tile one vector wide (squared, GFLOPS unpadded -> padded: 1000 232 -> 408-440,
  1800 417 -> 460, 3000 229 -> 456; the padding and the dropped columns included). Other products of PAD_MIN_MACS or more
  pad to whole vectors (255x777 @ 777x127: 4.2 ms -> 0.18 ms; 640x100 @ 100x300: 0.78 ms -> 0.14 ms; 24x256 @ 256x1500,
  quarter vectors: 0.26 -> 0.21 ms; 16x1024 @ 1024x1021: 2.5 ms -> 0.16 ms copying + 0.28 ms), except an x of few rows
  @ a large w whose columns half-vectors divide: copying w costs more than they lose."""
  if (lanes := _product_lanes(x, w)): return -w.shape[1] % (2 * lanes)
  if not (lanes := _padding_lanes(x, w)): return 0
  macs, m = x.numel() * w.shape[1], w.shape[1]
  if m % 4: return -m % lanes if macs >= UNVECTORIZED_PAD_MIN_MACS and m > 1 else 0  # one column: vectors along k
  few_rows = min(w.shape) >= PANEL_MIN and x.numel() // w.shape[0] < COPY_MIN_ROWS
  return -m % lanes if macs >= PAD_MIN_MACS and not (few_rows and m % (lanes // 2) == 0) else 0

ROW_TILES = range(4, 9)  # rows a CPU matmul's register tile can hold: x with a row count that none of these divides
ROW_PAD = 8             # is padded with zero rows to a multiple of this (rows computed one at a time read all of w each:
# x of 31x1024 @ 1024x1024 ran at 16 GFLOPS, 197x768 @ 768x768 at 147, 0.11x and 0.47x numpy)

def _row_padding(x: Tensor, w: Tensor) -> int:
  """Zero rows that give x @ w's register tile a whole number of steps on a CPU, or 0 (a row count some tile
  divides, a product of fewer than PAD_MIN_MACS multiply-adds, or not a CPU)."""
  rows = x.shape[-2]
  if not _padding_lanes(x, w) or rows < ROW_PAD: return 0
  if x.numel() * w.shape[1] < PAD_MIN_MACS or any(rows % tile == 0 for tile in ROW_TILES): return 0
  return -rows % ROW_PAD

ROW_COPY_MAX_K = 512  # x @ w reads a w stored with k innermost through a copy up to this k (beyond, the copy costs more)

def _reduce_axis_innermost(x: Tensor, w: Tensor) -> bool:
  """Whether x @ w on a CPU reads w along a short k contiguously (w a transposed view, as in q @ k.T), so that its
  kernel's vectors would run along k and each output end in a horizontal sum: a copy of w with m innermost costs far
  less (8x16x512x64 attention scores: 89 ms -> 1.7 ms copy + 13 ms; at k = 1024 the copy costs 10% more)."""
  from tg.schedule import movement_view
  k, lanes = w.shape[-2], _cpu_lanes(w)
  if not all_int((k, x.shape[-2], w.shape[-1])): return False  # symbolic sizes: left as they are
  if not lanes or k > ROW_COPY_MAX_K or x.shape[-2] < lanes or w.shape[-1] < lanes: return False
  _, st = movement_view(w.uop)
  strides = st.views[-1].strides
  return len(st.views) == 1 and strides[-2] == 1 and strides[-1] != 0

def _reduce_axis_strided(x: Tensor) -> bool:
  """Whether x, the left operand of x @ w, is a view that steps along k with a stride (a transposed x, as in the weight
  gradient x.T @ dy): its kernel would read each step of k from another row of memory, rows that a power-of-two width
  puts in few cache sets (2048 squared: 153 GFLOPS against 417 for a contiguous x)."""
  from tg.schedule import movement_view
  _, st = movement_view(x.uop)
  return len(st.views) == 1 and st.views[0].strides[-1] not in (0, 1)

IM2COL_MAX_PLANE, IM2COL_MIN_COUT = 196, 128  # output positions per image and channels of the im2col convolutions below

def _conv_as_product(weight: Tensor, groups: int, stride: tuple, pads: list, out_sp: tuple) -> bool:
  """Whether a convolution runs on a CPU as a product of its channels-last windows (im2col) and the weight: a pointwise
  one (1x1 kernel, stride 1, no padding), whose windows are the input itself (8x256x14x14 to 512 channels: 167 -> 350
  GFLOPS, PyTorch 356), and one of IM2COL_MIN_COUT output channels or more on planes of IM2COL_MAX_PLANE positions or
  fewer, where the convolution's own kernel finds no register tile (3x3, 8x512x7x7 to 512: 80 -> 362 GFLOPS, 8x256x14x14
  to 256: 105 -> 239). Fewer channels on a large batch (the MNIST model's 32 to 64 on 12x12) run faster as they are."""
  if groups != 1 or not _cpu_lanes(weight) or not all_int((*weight.shape, *out_sp)): return False
  pointwise = all(k == 1 for k in weight.shape[2:]) and all(s == 1 for s in stride) and not any(p for pair in pads for p in pair)
  return pointwise or (weight.shape[0] >= IM2COL_MIN_COUT and prod(out_sp) <= IM2COL_MAX_PLANE)

class ProcessingMixin:
  __slots__ = ()

  # ---------------- products ----------------
  def dot(self, w: Tensor, dtype: DType | str | None = None) -> Tensor:
    """self @ w: 1-d operands are a row and a column, leading dims broadcast; with IMAGE=1 (floats) an image_dot."""
    if IMAGE and dtypes.is_float(self.dtype) and dtypes.is_float(w.dtype): return self.image_dot(w, dtype)
    return self._dot(w, dtype)
  def _dot(self, w: Tensor, dtype: DType | str | None = None) -> Tensor:
    """dot without IMAGE (which a pointwise convolution computes with, also inside image_conv2d)."""
    x, w, squeeze_rows, squeeze_cols = _as_matrices(self, w)
    k, rows, columns = x.shape[-1], x.shape[-2], w.shape[-1]
    if (extra_rows := _row_padding(x, w)): x = x.pad(((0, 0),) * (x.ndim - 2) + ((0, extra_rows), (0, 0))).contiguous()
    if (extra := _lane_padding(x, w)): w = w.pad(((0, 0), (0, extra)))  # zero columns, dropped from the product below
    if (lanes := _panel_width(x, w, copied=bool(extra))):
      if _reduce_axis_strided(x): x = x.contiguous()
      # for CPU caches: copy w into column panels (lanes wide, contiguous along k), so the kernel reads each panel
      # sequentially instead of one row of w per step (rows of w far apart thrash the cache and TLB)
      m = w.shape[1]
      panels = w.reshape(k, m // lanes, lanes).permute(1, 0, 2).contiguous()                         # (m/lanes, k, lanes)
      xs = x.reshape(*x.shape[:-1], 1, 1, k)                                                           # (..., n, 1, 1, k)
      out = (xs * panels.permute(0, 2, 1).reshape(1, m // lanes, lanes, k)).sum(-1, dtype=dtype).reshape(*x.shape[:-1], m)
    else:
      if extra or _reduce_axis_innermost(x, w): w = w.contiguous()  # padded columns are stored, not masked in each load
      wt = w.transpose(-1, -2).reshape(*w.shape[:-2], 1, w.shape[-1], k)  # (..., 1, m, k)
      out = (x.reshape(*x.shape[:-1], 1, k) * wt).sum(-1, dtype=dtype)  # (..., n, 1, k) * (..., 1, m, k)
    if extra_rows: out = out[..., :rows, :]
    return _squeezed(out[..., :columns] if extra else out, squeeze_rows, squeeze_cols)
  def matmul(self, w: Tensor, dtype: DType | str | None = None) -> Tensor: return self.dot(w, dtype)
  def image_dot(self, w: Tensor, dtype: DType | str | None = None) -> Tensor:
    """self @ w as a 1x1 image_conv2d (what dot does with IMAGE=1): the rows of self are the pixels of a one-column
    input, the columns of w the output channels; batched operands are the groups of one convolution."""
    x, w, squeeze_rows, squeeze_cols = _as_matrices(self, w)
    k, n = x.shape[-1], w.shape[-1]
    if w.ndim == 2:
      rows = x.reshape(-1, k)
      out = rows.transpose().reshape(1, k, rows.shape[0], 1).image_conv2d(w.transpose().reshape(n, k, 1, 1), dtype=dtype)
      out = out.reshape(n, rows.shape[0]).transpose().reshape(*x.shape[:-1], n)
    else:
      batch, m = broadcast_shape(x.shape[:-2], w.shape[:-2]), x.shape[-2]
      groups = prod(batch)
      xs, ws = x.expand(*batch, m, k).reshape(groups, m, k), w.expand(*batch, k, n).reshape(groups, k, n)
      out = xs.permute(0, 2, 1).reshape(1, groups * k, m, 1).image_conv2d(ws.permute(0, 2, 1).reshape(groups * n, k, 1, 1), groups=groups, dtype=dtype)
      out = out.reshape(groups, n, m).permute(0, 2, 1).reshape(*batch, m, n)
    return _squeezed(out, squeeze_rows, squeeze_cols)
  def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """self @ weight + bias, with weight of shape (in, out) (a 1-d weight scales elementwise)."""
    out = self * weight if weight.ndim == 1 else self.dot(weight)
    return out + bias if bias is not None else out
  def sequential(self, layers: Sequence[Callable]) -> Tensor:
    out = self
    for f in layers: out = f(out)
    return out

  @staticmethod
  def einsum(formula: str, *operands: Tensor | Sequence[Tensor]) -> Tensor:
    """Einstein summation, e.g. "ij,jk->ik", with "..." for broadcast dims and repeated letters for diagonals. The
    operands come one by one or as one list (as PyTorch); a formula that doesn't fit them is a RuntimeError (PyTorch's)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)): operands = tuple(operands[0])
    lhs, arrow, rhs = formula.replace(" ", "").partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(operands): raise RuntimeError(f"einsum {formula!r} names {len(inputs)} operands, got {len(operands)}")
    ell_dims = max((t.ndim - len(s.replace("...", "")) for s, t in zip(inputs, operands) if "..." in s), default=0)
    ell = "".join(chr(0x391 + i) for i in range(ell_dims))  # letters no formula uses
    inputs = [s.replace("...", ell[len(ell) - (t.ndim - len(s.replace('...', ''))):] if "..." in s else "") for s, t in zip(inputs, operands)]
    if not arrow: rhs = ell + "".join(sorted(c for c in set("".join(inputs)) - set(ell) if "".join(inputs).count(c) == 1))
    else: rhs = rhs.replace("...", ell)
    sizes: dict[str, int] = {}
    prepared = []
    for letters, t in zip(inputs, operands):
      if len(letters) != t.ndim: raise RuntimeError(f"einsum operand {letters!r} doesn't match shape {t.shape}")
      while len(set(letters)) != len(letters):  # repeated letter: take the diagonal
        c = next(c for c in letters if letters.count(c) > 1)
        i, j = letters.index(c), letters.index(c, letters.index(c) + 1)
        t = t.diagonal(0, i, j)
        letters = "".join(x for k, x in enumerate(letters) if k not in (i, j)) + c
      for c, s in zip(letters, t.shape):
        if sizes.setdefault(c, s) != s and s != 1 and sizes[c] != 1: raise RuntimeError(f"einsum letter {c!r} has sizes {sizes[c]} and {s}")
        sizes[c] = max(sizes[c], s)
      prepared.append((letters, t))
    order = list(dict.fromkeys("".join(l for l, _ in prepared) + rhs))
    out = None
    for letters, t in prepared:
      t = t.permute(*[letters.index(c) for c in order if c in letters]).reshape(*[t.shape[letters.index(c)] if c in letters else 1 for c in order])
      out = t if out is None else out * t
    summed = [i for i, c in enumerate(order) if c not in rhs]
    out = out.expand(*[sizes[c] for c in order]).sum(summed) if summed else out.expand(*[sizes[c] for c in order])
    kept = [c for c in order if c in rhs]
    return out.permute(*[kept.index(c) for c in rhs]) if kept else out

  # ---------------- sliding windows ----------------
  def _pool(self, kernel: tuple[int, ...], stride: int | tuple[int, ...] = 1, dilation: int | tuple[int, ...] = 1) -> Tensor:
    """(..., *spatial) -> (..., *out, *kernel): every window of the last len(kernel) dims, as views."""
    n = len(kernel)
    if self.ndim < n: raise RuntimeError(f"a {n}-d window needs at least {n} dims, got shape {self.shape}")
    stride, dilation = _tuple(stride, n), _tuple(dilation, n)
    x = self
    for i, (k, s, d) in enumerate(zip(kernel, stride, dilation)):
      dim = self.ndim - n + i  # spatial dims keep their place; each window axis is appended at the end
      size = x.shape[dim]
      span = d * (k - 1) + 1
      if size < span: raise RuntimeError(f"window {k} (dilation {d}) is larger than input size {size} in dim {dim}")
      out = (size - span) // s + 1
      if k == s and d == 1:  # windows side by side: a reshape, whose gradient is a reshape too
        y = x.shrink([(0, out * k) if j == dim else None for j in range(x.ndim)]).reshape(*x.shape[:dim], out, k, *x.shape[dim + 1:])
        x = y.permute(*[j for j in range(y.ndim) if j != dim + 1], dim + 1)
        continue
      # k copies of the axis laid end to end, re-cut into rows of size+d: row r starts d*r further in
      reps = ceildiv(k * (size + d), size)
      y = x.unsqueeze(dim).expand(*x.shape[:dim], reps, *x.shape[dim:]).flatten(dim, dim + 1)
      y = y.shrink([(0, k * (size + d)) if j == dim else None for j in range(y.ndim)])
      y = y.reshape(*y.shape[:dim], k, size + d, *y.shape[dim + 1:])
      keep = out * s
      y = y.pad([(0, max(keep - (size + d), 0)) if j == dim + 1 else None for j in range(y.ndim)])
      y = y.shrink([(0, keep) if j == dim + 1 else None for j in range(y.ndim)])
      y = y.reshape(*y.shape[:dim + 1], out, s, *y.shape[dim + 2:]).shrink([(0, 1) if j == dim + 2 else None for j in range(y.ndim + 1)])
      y = y.reshape(*y.shape[:dim + 2], *y.shape[dim + 3:])    # (..., k, out, ...)
      x = y.permute(*[j for j in range(y.ndim) if j != dim], dim)  # window axis to the end
    return x

  def conv2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride=1, dilation=1, padding=0,
             dtype: DType | str | None = None) -> Tensor:
    """N-d convolution (N from the weight): self (batch, cin, *spatial), weight (cout, cin/groups, *kernel). Shapes
    that don't fit are a RuntimeError, as in PyTorch. With IMAGE=1 a 2-d float convolution is an image_conv2d."""
    if IMAGE and weight.ndim == 4 and self.ndim == 4 and dtypes.is_float(self.dtype) and dtypes.is_float(weight.dtype):
      return self.image_conv2d(weight, bias, groups, stride, dilation, padding, dtype)
    return self._conv(weight, bias, groups, stride, dilation, padding, dtype)
  def _conv(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride=1, dilation=1, padding=0,
            dtype: DType | str | None = None, channels_inner: bool = False) -> Tensor:
    """conv2d without IMAGE; `channels_inner` sums the input channels in the innermost loop, inside the kernel's taps."""
    n = weight.ndim - 2
    if n < 1: raise RuntimeError(f"conv weight needs at least 3 dims (cout, cin/groups, *kernel), got {weight.shape}")
    if self.ndim != n + 2: raise RuntimeError(f"conv input {self.shape} needs {n + 2} dims for weight {weight.shape}")
    bs, cin = self.shape[:2]
    cout, cin_g = weight.shape[:2]
    _check_groups(cin, weight.shape, groups)
    if isinstance(padding, str):
      if padding != "same" or any(s != 1 for s in _tuple(stride, n)): raise RuntimeError(f"padding={padding!r} needs 'same' and stride 1")
      total = [d * (k - 1) for d, k in zip(_tuple(dilation, n), weight.shape[2:])]
      pads = [(t // 2, t - t // 2) for t in total]
    else: pads = _conv_padding(padding, n)
    x = self.pad([None, None, *pads])._pool(weight.shape[2:], stride, dilation)    # (bs, cin, *out, *k)
    out_sp = x.shape[2:2 + n]
    if not channels_inner and _conv_as_product(weight, groups, _tuple(stride, n), pads, out_sp):
      taps = prod(weight.shape[2:])
      windows = x.permute(0, *range(2, 2 + n), 1, *range(2 + n, 2 + 2 * n)).reshape(-1, cin * taps)  # (bs * out, cin * taps)
      if taps > 1: windows = windows.contiguous()  # each window stored once, not gathered by every product step
      out = windows._dot(weight.reshape(cout, cin * taps).transpose(), dtype=dtype).reshape(bs, *out_sp, cout)
      out = out.permute(0, n + 1, *range(1, n + 1)).contiguous()
      return out + bias.reshape(1, -1, *[1] * n) if bias is not None else out
    x = x.reshape(bs, groups, 1, cin_g, *out_sp, *weight.shape[2:])
    w = weight.reshape(groups, cout // groups, cin_g, *weight.shape[2:])
    if _channel_lanes(weight, cout // groups):  # a copy of the weight with output channels innermost: they become vector lanes
      w = _stored_with_innermost(w, 1)
    w = w.reshape(1, groups, cout // groups, cin_g, *[1] * n, *weight.shape[2:])
    taps = range(4 + n, 4 + 2 * n)
    products = (x * w).permute(0, 1, 2, *range(4, 4 + n), *taps, 3) if channels_inner else x * w
    out = products.sum([*range(3 + n, 4 + 2 * n)] if channels_inner else [3, *taps], dtype=dtype).reshape(bs, cout, *out_sp)
    if dtypes.is_float(out.dtype):
      rule = ConvGrad(groups, _tuple(stride, n), _tuple(dilation, n), tuple(tuple(p) for p in pads))
      out = out._new(UOp(Ops.GRAD_OVERRIDE, out.dtype, (out.uop, self.uop, weight.uop), rule), self, weight)
    return out + bias.reshape(1, -1, *[1] * n) if bias is not None else out
  def conv1d(self, weight: Tensor, bias: Tensor | None = None, **kw) -> Tensor: return self.conv2d(weight, bias, **kw)

  def image_conv2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride=1, dilation=1, padding=0,
                   dtype: DType | str | None = None) -> Tensor:
    """conv2d (what it is with IMAGE=1) reading its operands from images and writing its result to one, on devices
    with images (elsewhere the same buffers are plain memory): input and output are stored channels-last (NHWC) and
    the weight as (cout, H, W, cin), each group's channels padded with zeros to a multiple of 4 so that a pixel holds
    4 channels. With FLOAT16=1 the images hold halves."""
    if self.ndim != 4 or weight.ndim != 4: raise RuntimeError(f"image_conv2d takes a 4-d input and weight, got {self.shape} and {weight.shape}")
    (bs, cin, iy, ix), (cout, cin_g, H, W) = self.shape, weight.shape
    _check_groups(cin, weight.shape, groups)
    rcout = cout // groups
    c4, o4 = round_up(cin_g, 4), round_up(rcout, 4)
    x = self.reshape(bs, groups, cin_g, iy, ix).pad([None, None, (0, c4 - cin_g), None, None])
    x = _stored_as_image(x.permute(0, 3, 4, 1, 2).reshape(bs, iy, ix, groups * c4))
    w = weight.reshape(groups, rcout, cin_g, H, W).pad([None, (0, o4 - rcout), (0, c4 - cin_g), None, None])
    w = _stored_as_image(w.permute(0, 1, 3, 4, 2).reshape(groups * o4, H, W, c4))
    out = x.permute(0, 3, 1, 2)._conv(w.permute(0, 3, 1, 2), groups=groups, stride=stride, dilation=dilation, padding=padding, dtype=dtype)
    oy, ox = out.shape[2:]
    out = _stored_as_image(out.permute(0, 2, 3, 1)).reshape(bs, oy, ox, groups, o4)[..., :rcout]
    out = out.reshape(bs, oy, ox, cout).permute(0, 3, 1, 2)
    return out + bias.reshape(1, -1, 1, 1) if bias is not None else out

  def conv_transpose2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride=1, dilation=1, padding=0,
                       output_padding=0) -> Tensor:
    """The gradient of conv2d with respect to its input: weight (cin, cout/groups, *kernel)."""
    n = weight.ndim - 2
    stride, dilation, out_pad = _tuple(stride, n), _tuple(dilation, n), _tuple(output_padding, n)
    pads = _conv_padding(padding, n)
    cin, cout_g = weight.shape[:2]
    if self.ndim != n + 2 or self.shape[1] != cin or cin % groups:
      raise RuntimeError(f"conv_transpose input {self.shape} doesn't match weight {weight.shape} with groups={groups}")
    x = self
    for i, s in enumerate(stride):  # insert s-1 zeros between inputs
      if s == 1: continue
      dim = 2 + i
      size = x.shape[dim]
      x = x.unsqueeze(dim + 1).pad([(0, s - 1) if j == dim + 1 else None for j in range(x.ndim + 1)]).flatten(dim, dim + 1)
      x = x.shrink([(0, (size - 1) * s + 1) if j == dim else None for j in range(x.ndim)])
    w = weight.reshape(groups, cin // groups, cout_g, *weight.shape[2:]).transpose(1, 2).reshape(groups * cout_g, cin // groups, *weight.shape[2:])
    w = w.flip(*range(2, 2 + n))
    pairs = [(d * (k - 1) - p_lo, d * (k - 1) - p_hi + op) for (p_lo, p_hi), d, k, op in zip(pads, dilation, weight.shape[2:], out_pad)]
    if _cpu_lanes(x) and not IMAGE and all(lo >= 0 and hi >= 0 for lo, hi in pairs):
      # on a CPU the padded input is stored channels-last and its channels are summed innermost: a tile of batch rows
      # then reads contiguous channels, and its loops over the taps skip the padding that a tile along x would multiply
      x = x.permute(0, *range(2, 2 + n), 1).pad([None, *pairs, None]).permute(0, n + 1, *range(1, n + 1))
      return x._conv(w, bias, groups=groups, dilation=dilation, channels_inner=True)
    return x.conv2d(w, bias, groups=groups, dilation=dilation, padding=flatten(pairs[::-1]))
  def conv_transpose1d(self, weight: Tensor, bias: Tensor | None = None, **kw) -> Tensor: return self.conv_transpose2d(weight, bias, **kw)

  def _pool_prepare(self, kernel_size, stride, dilation, padding, ceil_mode: bool, fill: float) -> tuple[Tensor, tuple, list]:
    n = 2 if isinstance(kernel_size, int) else len(kernel_size)
    k = _tuple(kernel_size, n)
    s = _tuple(stride if stride is not None else k, n)
    d = _tuple(dilation, n)
    pads = _conv_padding(padding, n)
    if any(lo > kk // 2 for (lo, _), kk in zip(pads, k)): raise RuntimeError(f"pool padding {padding} should be at most half of kernel {k}")
    extra = []
    for i, ((lo, hi), kk, ss, dd) in enumerate(zip(pads, k, s, d)):
      size = self.shape[self.ndim - n + i] + lo + hi
      span = dd * (kk - 1) + 1
      out = (ceildiv(size - span, ss) if ceil_mode else (size - span) // ss) + 1
      if ceil_mode and (out - 1) * ss >= self.shape[self.ndim - n + i] + lo: out -= 1  # torch: the last window must start inside
      extra.append(max((out - 1) * ss + span - size, 0))
    all_pads = [(lo, hi + e) for (lo, hi), e in zip(pads, extra)]
    return self.pad([None] * (self.ndim - n) + all_pads, value=fill), (k, s, d), all_pads

  def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    x, (k, s, d), all_pads = self._float()._pool_prepare(kernel_size, stride, dilation, padding, ceil_mode, 0.0)
    windows = x._pool(k, s, d)
    n = len(k)
    total = windows.sum(tuple(range(-n, 0)))
    pads, spatial = _conv_padding(padding, n), self.shape[-n:]
    if count_include_pad:  # explicit padding counts, the extra right padding of ceil_mode does not
      counted = type(self).ones(*[sz + lo + hi for sz, (lo, hi) in zip(spatial, pads)], device=self.device)
      counted = counted.pad([(0, hi - p_hi) for (_, hi), (_, p_hi) in zip(all_pads, pads)])
    else: counted = type(self).ones(*spatial, device=self.device).pad(all_pads)
    divisor = counted._pool(k, s, d).sum(tuple(range(-n, 0)))
    return total / divisor
  def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode: bool = False, return_indices: bool = False):
    """Max over windows of the last len(kernel_size) dims. return_indices adds, as PyTorch, the int64 flat index into
    each input plane of the maximum: the first one in the window, or the last NaN where the window holds one."""
    low = -math.inf if dtypes.is_float(self.dtype) else dtypes.min(self.dtype)
    x, (k, s, d), all_pads = self._pool_prepare(kernel_size, stride, dilation, padding, ceil_mode, low)
    n = len(k)
    windows = x._pool(k, s, d)
    out = windows.max(tuple(range(-n, 0)))
    if not return_indices: return out
    spatial = self.shape[-n:]
    pos = type(self).arange(prod(spatial), device=self.device, dtype=dtypes.int32).reshape(*spatial)
    pos = (pos + 1).pad(all_pads)._pool(k, s, d) - 1   # padding reads as -1
    hit = windows == out.reshape(*out.shape, *[1] * n)
    first = hit.where(pos, prod(spatial)).min(tuple(range(-n, 0)))
    if dtypes.is_float(self.dtype):  # PyTorch's scan takes every NaN it meets as the new maximum
      first = out.isnan().where(windows.isnan().where(pos, -1).max(tuple(range(-n, 0))), first)
    return out, first.cast(dtypes.int64)
  def max_unpool2d(self, indices: Tensor, kernel_size=(2, 2), stride=None, dilation=1, padding=0, output_size=None) -> Tensor:
    """Partial inverse of max_pool2d: each value lands at its flat index (`indices` from max_pool2d(return_indices=True))
    in a plane of zeros, over the last len(kernel_size) dims (any number of them, as tinygrad). The plane is
    (in - 1) * stride - pad_lo - pad_hi + dilation * (kernel - 1) + 1 per dim, or `output_size` (spatial, optionally
    after the leading dims) within a stride of that, as PyTorch. Two values for one place: the later wins (PyTorch; tinygrad
    adds them). Indices are not read: negative ones count from the end of the plane, too large ones are dropped
    (PyTorch raises, which needs a data read)."""
    n = 2 if isinstance(kernel_size, int) else len(kernel_size)
    k, d = _tuple(kernel_size, n), _tuple(dilation, n)
    s, pads = _tuple(stride if stride is not None else k, n), _conv_padding(padding, n)
    if indices.shape != self.shape: raise RuntimeError(f"max_unpool2d indices of shape {indices.shape} must match the input's {self.shape}")
    if self.ndim < n: raise RuntimeError(f"max_unpool2d over {n} dims needs at least {n} dims, got shape {self.shape}")
    lead = self.shape[:-n]
    default = [(i - 1) * ss - lo - hi + dd * (kk - 1) + 1 for i, kk, ss, dd, (lo, hi) in zip(self.shape[-n:], k, s, d, pads)]
    if output_size is None: out_sp = default
    else:
      out_sp = list(output_size)[-n:]
      if len(output_size) not in (n, self.ndim): raise ValueError(f"output_size {output_size} needs {n} or {self.ndim} sizes")
      if any(not o - ss < size < o + ss for o, ss, size in zip(default, s, out_sp)):
        raise ValueError(f"output_size {output_size} must be within a stride of {tuple(default)} in each dim")
    plane = type(self).zeros(*lead, prod(out_sp), dtype=self.dtype, device=self.device)
    return plane.scatter(-1, indices.reshape(*lead, -1), self.reshape(*lead, -1)).reshape(*lead, *out_sp)
  def avg_pool1d(self, kernel_size=2, stride=None, **kw) -> Tensor: return self.avg_pool2d((kernel_size,) if isinstance(kernel_size, int) else kernel_size, stride, **kw)
  def max_pool1d(self, kernel_size=2, stride=None, **kw): return self.max_pool2d((kernel_size,) if isinstance(kernel_size, int) else kernel_size, stride, **kw)

  def interpolate(self, size: Sequence[int], mode: str = "linear", align_corners: bool = False) -> Tensor:
    """Resize the trailing len(size) dims with PyTorch's coordinate mapping. "linear" interpolates along each of them (so
    bilinear on 2, as tinygrad); "bilinear" and "trilinear" (PyTorch's names) are the same on exactly 2 and 3 dims.
    An unknown mode, or a size that doesn't fit the mode, is NotImplementedError, as in PyTorch."""
    if mode not in ("linear", "bilinear", "trilinear", "nearest", "nearest-exact"): raise NotImplementedError(f"unknown interpolate mode {mode!r}")
    size = tuple(size)
    if (need := {"bilinear": 2, "trilinear": 3}.get(mode)) and len(size) != need: raise NotImplementedError(f"{mode} interpolation needs {need} sizes, got {size}")
    if align_corners and mode.startswith("nearest"): raise ValueError(f"align_corners only goes with the linear modes, not {mode!r}")
    if len(size) > self.ndim: raise ValueError(f"interpolate size {size} has more dims than input {self.shape}")
    x = self
    for i, out in enumerate(size):
      dim = self.ndim - len(size) + i
      n = x.shape[dim]
      if not align_corners and (whole := _resized_by_a_whole_factor(x, dim, out, mode)) is not None:
        x = whole
        continue
      pos = type(self).arange(out, device=self.device, dtype=dtypes.float32)
      if mode == "nearest": src = (pos * (n / out)).floor()
      elif mode == "nearest-exact": src = ((pos + 0.5) * (n / out)).floor()
      elif align_corners: src = pos * ((n - 1) / (out - 1)) if out > 1 else pos * 0
      else: src = ((pos + 0.5) * (n / out) - 0.5).maximum(0)
      index = [slice(None)] * x.ndim
      if mode.startswith("nearest"):
        index[dim] = src.clamp(max_=n - 1).cast(dtypes.int32)
        x = x[tuple(index)]
        continue
      lo = src.floor().clamp(max_=n - 1)
      w = (src - lo).reshape(*[out if j == dim else 1 for j in range(x.ndim)])
      lo_i, hi_i = lo.cast(dtypes.int32), (lo + 1).clamp(max_=n - 1).cast(dtypes.int32)
      index[dim] = lo_i
      a = x[tuple(index)]
      index[dim] = hi_i
      x = a * (1 - w) + x[tuple(index)] * w
    return x

  # ---------------- normalization, dropout, attention ----------------
  def layernorm(self, axis=-1, eps: float = 1e-5) -> Tensor:
    x = self._float()
    y = x - x.mean(axis, keepdim=True)
    return y * (y * y).mean(axis, keepdim=True).add(eps).rsqrt()
  def batchnorm(self, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor, axis: int | tuple = 1) -> Tensor:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(self._axis(a) for a in axes)
    shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
    x = self - mean.reshape(shape)
    if weight is not None: x = x * weight.reshape(shape)
    out = x * (invstd.reshape(shape) if invstd.ndim == len(axes) else invstd)
    return out + bias.reshape(shape) if bias is not None else out
  def dropout(self, p: float = 0.5) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p), only while TRAINING."""
    if not 0 <= p <= 1: raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not TRAINING or p == 0: return self
    if p == 1: return self * 0
    keep = type(self).rand(*self.shape, device=self.device) >= p
    return keep.where(self, 0) * (1 / (1 - p))
  def scaled_dot_product_attention(self, key: Tensor, value: Tensor, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                   is_causal: bool = False, enable_gqa: bool = False) -> Tensor:
    """softmax(self @ key^T / sqrt(d) + mask) @ value. A bool mask keeps where true; is_causal keeps the lower triangle.
    enable_gqa (grouped-query attention, as PyTorch): key and value have fewer heads (dim -3), each serving a group of
    consecutive query heads, so they are repeated to the query's head count."""
    if is_causal and attn_mask is not None: raise RuntimeError("attn_mask can't be given with is_causal=True")
    if enable_gqa and self.ndim >= 3:
      hq = self.shape[-3]
      if hq % key.shape[-3] or hq % value.shape[-3]: raise RuntimeError(f"query heads {hq} must be a multiple of key and value heads {key.shape[-3]}, {value.shape[-3]}")
      key, value = key.repeat_interleave(hq // key.shape[-3], -3), value.repeat_interleave(hq // value.shape[-3], -3)
    scores = self.matmul(key.transpose(-1, -2)) / math.sqrt(self.shape[-1])
    if is_causal:
      attn_mask = type(self).ones(self.shape[-2], key.shape[-2], dtype=dtypes.bool, device=self.device).tril()
    if attn_mask is not None:
      scores = attn_mask.where(scores, -math.inf) if attn_mask.dtype == dtypes.bool else scores + attn_mask
    return scores.softmax(-1).dropout(dropout_p).matmul(value)

def _resized_by_a_whole_factor(x: Tensor, dim: int, out: int, mode: str) -> Tensor | None:
  """interpolate's resize of x along dim (pixel centres mapped, not corners) through views where the sizes differ by a
  whole factor s, or None: each output then reads the same one or two inputs at a fixed offset from its block's, so
  it is a repeat, a strided view, or blends of shifted views, and needs no gather (and one of the same size is x, as
  PyTorch returns it). Upscaled, output i * s + r sits at input i + (r + 0.5) / s - 0.5, whose neighbours past the
  ends are the end pixels (a replicate pad)."""
  n = x.shape[dim]
  if not isinstance(n, int) or n == 0 or out == 0: return None
  if out == n: return x
  if out % n == 0:
    s = out // n
    if mode.startswith("nearest"): return x.repeat_interleave(s, dim)
    ends = x.pad([(1, 1) if a == dim else None for a in range(x.ndim)], mode="replicate")
    shifted = lambda d: ends.shrink([(1 + d, 1 + d + n) if a == dim else None for a in range(x.ndim)])  # x[i + d], ends repeated
    phases = []
    for r in range(s):
      src = (r + 0.5) / s - 0.5
      d = math.floor(src)
      phases.append(shifted(d) if src == d else shifted(d) * (1 - (src - d)) + shifted(d + 1) * (src - d))
    return type(x).stack(*phases, dim=dim + 1).flatten(dim, dim + 1)
  if n % out == 0:
    s = n // out
    every = lambda j: x[(slice(None),) * dim + (slice(j, n, s),)]  # the inputs at j, j + s, j + 2s, ...
    if mode == "nearest": return every(0)
    if mode == "nearest-exact" or s % 2: return every(s // 2)
    return every(s // 2 - 1) * 0.5 + every(s // 2) * 0.5
  return None
