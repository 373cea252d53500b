"""Processing ops (products, einsum, convolution, pooling, interpolation, normalization, attention, dropout): forward
against numpy references written from the documented definitions, gradients against finite differences of them."""
import math
import numpy as np
import pytest
from tg import Tensor, Context, dtypes
from tests.tg.opcheck import check_op, needs, refused

POOL_INDICES = needs(dtypes.int64, why="pooling indices are int64, as PyTorch's")

def _tup(v, n): return (v,) * n if isinstance(v, int) else tuple(v)

# ---------------- matmul / dot / einsum / linear ----------------
@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (4, 3)), ((3, 4), (4,)), ((5,), (5,)),
                                   ((2, 3, 4), (4, 2)), ((3,), (2, 3, 2))])
def test_matmul(sa, sb):
  out = check_op(lambda a, b: a @ b, lambda a, b: a @ b, [sa, sb])
  assert out.shape == np.matmul(np.zeros(sa), np.zeros(sb)).shape

def test_matmul_dot_aliases():
  check_op(lambda a, b: a.dot(b), lambda a, b: a @ b, [(2, 3), (3, 4)])
  check_op(lambda a, b: a.matmul(b), lambda a, b: a @ b, [(2, 2, 3), (2, 3, 4)])

def test_matmul_mismatch_raises():
  with pytest.raises(ValueError) as e: Tensor.zeros(3, 4) @ Tensor.zeros(5, 2)
  assert "(3, 4)" in str(e.value) and "(5, 2)" in str(e.value)
  with pytest.raises(ValueError) as e: Tensor.zeros(3) @ Tensor.zeros(2, 4, 1)
  assert "(3,)" in str(e.value) and "(2, 4, 1)" in str(e.value)
  with pytest.raises(ValueError) as e: Tensor.zeros(2, 3) @ Tensor.zeros(2)
  assert "(2, 3)" in str(e.value) and "(2,)" in str(e.value)

@pytest.mark.parametrize("formula,shapes", [
  ("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]), ("ii->i", [(3, 3)]), ("ij->", [(2, 3)]),
  ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 2)]), ("...ij,...jk->...ik", [(3, 4), (4, 2)]), ("ij,jk", [(2, 3), (3, 4)]),
  ("ij->ji", [(2, 3)]), ("i,i->", [(4,), (4,)]), ("i,j->ij", [(3,), (2,)]), ("bik,k->bi", [(2, 3, 4), (4,)]), ("ji", [(2, 3)])])
def test_einsum(formula, shapes):
  check_op(lambda *ts: Tensor.einsum(formula, *ts), lambda *xs: np.einsum(formula, *xs), shapes)

def test_einsum_operands_as_a_list():
  check_op(lambda a, b: Tensor.einsum("ij,jk->ik", [a, b]), lambda a, b: a @ b, [(2, 3), (3, 4)])
  check_op(lambda a, b, c: Tensor.einsum("i,ij,j->", (a, b, c)), lambda a, b, c: np.einsum("i,ij,j->", a, b, c), [(2,), (2, 3), (3,)])
  check_op(lambda a: Tensor.einsum("ii", [a]), lambda a: np.trace(a), [(3, 3)])

def test_einsum_errors_are_runtime_errors():
  # PyTorch raises RuntimeError for a formula that doesn't fit its operands
  a, b = Tensor.zeros(2, 3), Tensor.zeros(3, 4)
  with pytest.raises(RuntimeError, match="2 operands, got 1"): Tensor.einsum("ij,jk->ik", a)
  with pytest.raises(RuntimeError, match="1 operands, got 2"): Tensor.einsum("ij->ji", [a, b])
  with pytest.raises(RuntimeError): Tensor.einsum("ijk,jk->i", a, b)
  with pytest.raises(RuntimeError): Tensor.einsum("ij,ij->i", a, b)

def test_linear():
  check_op(lambda x, w, b: x.linear(w, b), lambda x, w, b: x @ w + b, [(2, 4), (4, 3), (3,)])
  check_op(lambda x, w: x.linear(w), lambda x, w: x @ w, [(2, 2, 4), (4, 3)])

# ---------------- convolution ----------------
def _pairs(padding, n):
  """int, one int per spatial dim, or torch's flat (left, right, top, bottom, ...) starting from the last dim."""
  if isinstance(padding, int): return [(padding, padding)] * n
  padding = tuple(padding)
  if len(padding) == n: return [(p, p) for p in padding]
  return [(padding[2 * i], padding[2 * i + 1]) for i in range(n)][::-1]

def np_conv(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
  """Cross-correlation as in torch.nn.functional.convNd: one shifted, strided slice of the padded input per kernel tap."""
  n = w.ndim - 2
  s, d = _tup(stride, n), _tup(dilation, n)
  xp = np.pad(x, [(0, 0), (0, 0)] + _pairs(padding, n))
  kernel = w.shape[2:]
  out_sp = [(xp.shape[2 + i] - d[i] * (kernel[i] - 1) - 1) // s[i] + 1 for i in range(n)]
  cin_g, cout_g = x.shape[1] // groups, w.shape[0] // groups
  out = np.zeros((x.shape[0], w.shape[0], *out_sp))
  for tap in np.ndindex(*kernel):
    sl = tuple(slice(tap[i] * d[i], tap[i] * d[i] + (out_sp[i] - 1) * s[i] + 1, s[i]) for i in range(n))
    patch = xp[(slice(None), slice(None)) + sl]
    for g in range(groups):
      wg = w[(slice(g * cout_g, (g + 1) * cout_g), slice(None)) + tap]                 # (cout_g, cin_g)
      out[:, g * cout_g:(g + 1) * cout_g] += np.einsum("nc...,oc->no...", patch[:, g * cin_g:(g + 1) * cin_g], wg)
  return out + b.reshape(1, -1, *[1] * n) if b is not None else out

@pytest.mark.parametrize("kw", [dict(), dict(stride=2), dict(padding=1), dict(padding=(1, 2)), dict(padding=(1, 2, 0, 1)),
                                dict(dilation=2), dict(stride=(2, 1), dilation=(1, 2), padding=(2, 0))])
def test_conv2d(kw):
  check_op(lambda x, w: x.conv2d(w, **kw), lambda x, w: np_conv(x, w, **kw), [(2, 2, 5, 6), (3, 2, 3, 2)], rtol=1e-4, atol=1e-5)

def test_conv2d_bias():
  check_op(lambda x, w, b: x.conv2d(w, b, padding=1, stride=2), lambda x, w, b: np_conv(x, w, b, padding=1, stride=2),
           [(1, 3, 5, 5), (2, 3, 3, 3), (2,)], rtol=1e-4, atol=1e-5)

def test_conv2d_groups():
  check_op(lambda x, w, b: x.conv2d(w, b, groups=2, padding=1), lambda x, w, b: np_conv(x, w, b, groups=2, padding=1),
           [(1, 4, 4, 4), (6, 2, 3, 3), (6,)], rtol=1e-4, atol=1e-5)

def test_conv2d_depthwise():
  # groups == channels, two filters per channel
  check_op(lambda x, w: x.conv2d(w, groups=3, stride=2, padding=(1, 0)), lambda x, w: np_conv(x, w, groups=3, stride=2, padding=(1, 0)),
           [(2, 3, 5, 4), (6, 1, 3, 2)], rtol=1e-4, atol=1e-5)

def test_conv_shape_errors_are_runtime_errors():
  # PyTorch raises RuntimeError for every one of these
  x = Tensor.zeros(1, 3, 4, 4)
  with pytest.raises(RuntimeError, match="channels"): x.conv2d(Tensor.zeros(2, 2, 3, 3))
  with pytest.raises(RuntimeError): x.conv2d(Tensor.zeros(4, 3, 3, 3), groups=2)
  with pytest.raises(RuntimeError): Tensor.zeros(3, 4, 4).conv2d(Tensor.zeros(2, 3, 3, 3))
  with pytest.raises(RuntimeError): x.conv2d(Tensor.zeros(3, 3))
  with pytest.raises(RuntimeError, match="larger than input"): x.conv2d(Tensor.zeros(2, 3, 5, 3))
  with pytest.raises(RuntimeError): x.conv2d(Tensor.zeros(2, 3, 3, 3), padding="same", stride=2)
  with pytest.raises(RuntimeError): x.conv2d(Tensor.zeros(2, 3, 3, 3), padding="valid-ish")
  with pytest.raises(RuntimeError): x.conv_transpose2d(Tensor.zeros(2, 3, 3, 3))
  with pytest.raises(RuntimeError): x.max_pool2d(5)
  with pytest.raises(RuntimeError, match="half"): x.max_pool2d(2, padding=2)

def test_conv1d():
  check_op(lambda x, w, b: x.conv1d(w, b, stride=2, padding=1, dilation=2), lambda x, w, b: np_conv(x, w, b, stride=2, padding=1, dilation=2),
           [(2, 3, 9), (4, 3, 3), (4,)], rtol=1e-4, atol=1e-5)
  check_op(lambda x, w: x.conv1d(w, groups=2, padding=(2, 0)), lambda x, w: np_conv(x, w, groups=2, padding=(2, 0)),
           [(1, 4, 6), (2, 2, 2)], rtol=1e-4, atol=1e-5)

def test_conv3d():
  check_op(lambda x, w, b: x.conv2d(w, b, padding=(1, 0, 1), stride=(1, 2, 1)), lambda x, w, b: np_conv(x, w, b, padding=(1, 0, 1), stride=(1, 2, 1)),
           [(1, 2, 3, 4, 3), (2, 2, 2, 2, 2), (2,)], rtol=1e-4, atol=1e-5)

@pytest.mark.parametrize("shapes, kw", [([(2, 6, 5, 7), (4, 6, 1, 1), (4,)], {}), ([(3, 8, 9), (5, 8, 1), (5,)], {}),
                                        ([(2, 3, 4, 5, 6), (7, 3, 1, 1, 1), (7,)], {}), ([(2, 64, 9, 9), (48, 64, 1, 1), (48,)], {}),
                                        ([(2, 8, 6, 7), (128, 8, 3, 3), (128,)], dict(padding=1, stride=2)),
                                        ([(1, 4, 9, 8), (160, 4, 3, 2), (160,)], dict(padding=(2, 1), dilation=2))])
def test_conv_as_product(shapes, kw):
  """Convolutions a CPU computes as a product of channels-last windows and the weight: 1x1 ones (stride 1, no padding)
  in 1, 2 and 3 dimensions, and many output channels on small planes (with padding, stride and dilation): values and
  all three gradients against numpy."""
  check_op(lambda x, w, b: x.conv2d(w, b, **kw), lambda x, w, b: np_conv(x, w, b, **kw), shapes, rtol=1e-4, atol=1e-4)

def np_conv_transpose(x, w, b=None, stride=1, padding=0, output_padding=0, dilation=1, groups=1):
  """torch.nn.functional.conv_transposeNd by scatter-add: input pixel i, kernel tap k adds x*w at output i*stride + k*dilation,
  then `padding` is cut from both ends (output_padding only grows the far end)."""
  n = w.ndim - 2
  s, p, op, d = _tup(stride, n), _tup(padding, n), _tup(output_padding, n), _tup(dilation, n)
  cin_g, cout_g = x.shape[1] // groups, w.shape[1]
  spatial, kernel = x.shape[2:], w.shape[2:]
  full = [(spatial[i] - 1) * s[i] + d[i] * (kernel[i] - 1) + 1 + op[i] for i in range(n)]
  out = np.zeros((x.shape[0], cout_g * groups, *full))
  for pos in np.ndindex(*spatial):
    for tap in np.ndindex(*kernel):
      at = tuple(pos[i] * s[i] + tap[i] * d[i] for i in range(n))
      for g in range(groups):
        xv = x[(slice(None), slice(g * cin_g, (g + 1) * cin_g)) + pos]              # (N, cin_g)
        wv = w[(slice(g * cin_g, (g + 1) * cin_g), slice(None)) + tap]              # (cin_g, cout_g)
        out[(slice(None), slice(g * cout_g, (g + 1) * cout_g)) + at] += xv @ wv
  out = out[(slice(None), slice(None)) + tuple(slice(p[i], full[i] - p[i]) for i in range(n))]
  return out + b.reshape(1, -1, *[1] * n) if b is not None else out

@pytest.mark.parametrize("kw", [dict(), dict(stride=2), dict(stride=2, padding=1), dict(stride=2, padding=1, output_padding=1),
                                dict(stride=(3, 2), output_padding=(2, 0), padding=(0, 1)), dict(dilation=2, padding=1),
                                dict(dilation=(1, 2), stride=2, output_padding=1)])
def test_conv_transpose2d(kw):
  check_op(lambda x, w: x.conv_transpose2d(w, **kw), lambda x, w: np_conv_transpose(x, w, **kw), [(1, 2, 3, 3), (2, 3, 3, 2)], rtol=1e-4, atol=1e-5)

def test_conv_transpose2d_groups_bias():
  kw = dict(groups=2, stride=2, padding=1, output_padding=1)
  check_op(lambda x, w, b: x.conv_transpose2d(w, b, **kw), lambda x, w, b: np_conv_transpose(x, w, b, **kw),
           [(2, 4, 3, 2), (4, 2, 3, 3), (4,)], rtol=1e-4, atol=1e-5)

def test_conv_transpose1d():
  check_op(lambda x, w, b: x.conv_transpose1d(w, b, stride=3, padding=1), lambda x, w, b: np_conv_transpose(x, w, b, stride=3, padding=1),
           [(2, 2, 4), (2, 3, 3), (3,)], rtol=1e-4, atol=1e-5)

def test_conv_transpose_is_conv_input_gradient():
  # conv_transpose2d(g, w) is d(sum(conv2d(x, w) * g))/dx
  rng = np.random.default_rng(0)
  x, w = rng.uniform(-1, 1, (1, 2, 7, 6)).astype(np.float32), rng.uniform(-1, 1, (3, 2, 3, 3)).astype(np.float32)
  tx = Tensor(x, requires_grad=True)
  out = tx.conv2d(Tensor(w), stride=2, padding=1)
  g = rng.uniform(-1, 1, out.shape).astype(np.float32)
  (out * Tensor(g)).sum().backward()
  ct = Tensor(g).conv_transpose2d(Tensor(w), stride=2, padding=1, output_padding=(0, 1))
  assert ct.shape == x.shape
  np.testing.assert_allclose(ct.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)

# ---------------- pooling ----------------
def _pool_out(size, k, s, p, d, ceil_mode):
  """torch's documented output size for max/avg pooling."""
  out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
  if ceil_mode and (out - 1) * s >= size + p: out -= 1  # the last window has to start inside the input or left padding
  return out

def np_pool(x, kernel, stride=None, padding=0, dilation=1, ceil_mode=False, kind="max", count_include_pad=True):
  """max / avg pooling over the trailing len(kernel) dims; returns (values, flat argmax indices)."""
  n = len(kernel)
  s, p, d = _tup(stride if stride is not None else kernel, n), _tup(padding, n), _tup(dilation, n)
  spatial = x.shape[-n:]
  outs = [_pool_out(spatial[i], kernel[i], s[i], p[i], d[i], ceil_mode) for i in range(n)]
  vals, inds = np.zeros(x.shape[:-n] + tuple(outs)), np.zeros(x.shape[:-n] + tuple(outs), dtype=np.int64)
  for o in np.ndindex(*outs):
    taps = [tuple(o[i] * s[i] - p[i] + t[i] * d[i] for i in range(n)) for t in np.ndindex(*kernel)]
    inside = [q for q in taps if all(0 <= q[i] < spatial[i] for i in range(n))]
    window = np.stack([x[(..., *q)] for q in inside], -1)
    if kind == "max":
      best = window.argmax(-1)
      vals[(..., *o)] = window.max(-1)
      inds[(..., *o)] = np.array([np.ravel_multi_index(q, spatial) for q in inside])[best]
    else:
      # count_include_pad: taps inside the input or its explicit padding count; the extra of ceil_mode does not
      count = sum(all(-p[i] <= q[i] < spatial[i] + p[i] for i in range(n)) for q in taps) if count_include_pad else len(inside)
      vals[(..., *o)] = window.sum(-1) / count
  return vals, inds

MAXPOOL_CASES = [dict(kernel_size=(2, 2)), dict(kernel_size=(3, 3), stride=2, padding=1), dict(kernel_size=(3, 3), stride=2, padding=1, ceil_mode=True),
                 dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1), ceil_mode=True), dict(kernel_size=(2, 2), stride=1, dilation=2),
                 dict(kernel_size=(3, 2), stride=2, dilation=(1, 2), padding=(1, 0), ceil_mode=True), dict(kernel_size=(3, 3), stride=3, ceil_mode=True)]

@pytest.mark.parametrize("kw", MAXPOOL_CASES)
def test_max_pool2d(kw):
  ref_kw = {k: v for k, v in kw.items() if k != "kernel_size"}
  check_op(lambda x: x.max_pool2d(**kw), lambda x: np_pool(x, kw["kernel_size"], kind="max", **ref_kw)[0], [(1, 2, 6, 7)])

def test_max_pool2d_int_kernel():
  check_op(lambda x: x.max_pool2d(3, stride=2), lambda x: np_pool(x, (3, 3), 2)[0], [(1, 2, 7, 5)])

@POOL_INDICES
@pytest.mark.parametrize("kw", MAXPOOL_CASES)
def test_max_pool2d_return_indices(kw):
  x = np.random.default_rng(1).uniform(-2, 2, (2, 2, 6, 7)).astype(np.float32)
  ref_kw = {k: v for k, v in kw.items() if k != "kernel_size"}
  vals, inds = Tensor(x).max_pool2d(**kw, return_indices=True)
  rv, ri = np_pool(x.astype(np.float64), kw["kernel_size"], kind="max", **ref_kw)
  np.testing.assert_allclose(vals.numpy(), rv, rtol=1e-6)
  np.testing.assert_array_equal(inds.numpy(), ri)

def test_max_pool1d():
  check_op(lambda x: x.max_pool1d(3, stride=2, padding=1), lambda x: np_pool(x, (3,), 2, padding=1)[0], [(2, 3, 8)])

@POOL_INDICES
def test_max_pool2d_indices_ties_and_gradient():
  # torch's indices: the flat position in each input plane of the first maximum met in the window (row-major)
  x = np.array([[[[1, 3, 3, 0], [3, 2, 0, 0], [5, 5, 1, 1], [5, 4, 1, 1]]]], np.float32)
  vals, inds = Tensor(x).max_pool2d(2, return_indices=True)
  np.testing.assert_array_equal(vals.numpy(), [[[[3, 3], [5, 1]]]])
  np.testing.assert_array_equal(inds.numpy(), [[[[1, 2], [8, 10]]]])
  assert inds.dtype == Tensor(np.zeros(1, np.int64)).dtype
  # a NaN is the maximum, and PyTorch's scan keeps the last NaN it meets
  x[0, 0, 0, 1], x[0, 0, 1, 0], x[0, 0, 3, 3] = np.nan, np.nan, np.nan
  vals, inds = Tensor(x).max_pool2d(2, return_indices=True)
  np.testing.assert_array_equal(vals.numpy(), [[[[np.nan, 3], [5, np.nan]]]])
  np.testing.assert_array_equal(inds.numpy(), [[[[4, 2], [8, 15]]]])
  check_op(lambda x: x.max_pool2d((3, 2), stride=(2, 1), padding=1, return_indices=True)[0],
           lambda x: np_pool(x, (3, 2), (2, 1), padding=1)[0], [(2, 2, 5, 4)])

def np_max_unpool(x, idx, out_spatial):
  """torch.nn.functional.max_unpoolNd: value x[..., i] goes to the flat position idx[..., i] of its output plane, in order
  (a later value for the same place replaces the earlier one)."""
  lead = x.shape[:-len(out_spatial)]
  out = np.zeros(lead + (int(np.prod(out_spatial)),))
  for l in np.ndindex(*lead):
    for v, i in zip(x[l].reshape(-1), idx[l].reshape(-1)): out[l + (i,)] = v
  return out.reshape(lead + tuple(out_spatial))

@pytest.mark.parametrize("kw,default", [(dict(kernel_size=(2, 2)), (6, 8)), (dict(kernel_size=(3, 3), stride=2, padding=1), (5, 7)),
                                        (dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1)), (6, 8)), (dict(kernel_size=(3, 3), stride=1), (6, 8))])
@POOL_INDICES
def test_max_unpool2d(kw, default):
  # indices from max_pool2d (overlapping windows repeat some), then values and gradient of the unpooling into the input's size
  x = np.random.default_rng(2).uniform(-2, 2, (2, 2, 6, 8)).astype(np.float32)
  vals, inds = Tensor(x).max_pool2d(**kw, return_indices=True)
  pooled, idx = vals.numpy(), inds.numpy()
  ref_kw = {k: v for k, v in kw.items() if k != "kernel_size"}
  np.testing.assert_array_equal(idx, np_pool(x.astype(np.float64), kw["kernel_size"], **ref_kw)[1])
  assert Tensor(pooled).max_unpool2d(Tensor(idx), **kw).shape == (2, 2, *default)  # PyTorch's (in - 1) * stride - 2 * pad + kernel
  out = check_op(lambda v, i: v.max_unpool2d(i, **kw, output_size=x.shape), lambda v, i: np_max_unpool(v, i, x.shape[-2:]), inputs=[pooled, idx])
  # every maximum is back where max_pool2d found it
  np.testing.assert_array_equal(np.where(out.numpy() != 0, x, 0), out.numpy())

@POOL_INDICES
def test_max_unpool2d_later_value_wins_and_output_size():
  v = np.array([[[[1.0, 2.0], [3.0, 4.0]]]], np.float32)
  i = np.array([[[[0, 5], [5, 15]]]])  # 2.0 and 3.0 both go to position 5: the later (3.0) stays, as in PyTorch
  np.testing.assert_array_equal(Tensor(v).max_unpool2d(Tensor(i)).numpy(), np_max_unpool(v, i, (4, 4)))
  assert Tensor(v).max_unpool2d(Tensor(i)).numpy()[0, 0, 1, 1] == 3.0
  # output_size within a stride of the default (4, 4), spatial or with the leading dims
  for size in ((5, 5), (1, 1, 5, 4), (3, 5)):
    check_op(lambda v, i: v.max_unpool2d(i, output_size=size), lambda v, i: np_max_unpool(v, i, size[-2:]), inputs=[v, i % 9])
  with pytest.raises(ValueError): Tensor(v).max_unpool2d(Tensor(i), output_size=(6, 4))
  with pytest.raises(ValueError): Tensor(v).max_unpool2d(Tensor(i), output_size=(1, 4, 4))
  with pytest.raises(RuntimeError): Tensor(v).max_unpool2d(Tensor(i[..., :1]))

@POOL_INDICES
def test_max_unpool1d_and_3d_like_tinygrad():
  # any number of spatial dims, from len(kernel_size)
  x = np.random.default_rng(3).uniform(-2, 2, (2, 3, 8)).astype(np.float32)
  vals, inds = Tensor(x).max_pool2d((2,), return_indices=True)
  check_op(lambda v, i: v.max_unpool2d(i, (2,)), lambda v, i: np_max_unpool(v, i, (8,)), inputs=[vals.numpy(), inds.numpy()])
  x = np.random.default_rng(4).uniform(-2, 2, (1, 1, 4, 4, 4)).astype(np.float32)
  vals, inds = Tensor(x).max_pool2d((2, 2, 2), return_indices=True)
  check_op(lambda v, i: v.max_unpool2d(i, (2, 2, 2)), lambda v, i: np_max_unpool(v, i, (4, 4, 4)), inputs=[vals.numpy(), inds.numpy()])

AVGPOOL_CASES = [dict(kernel_size=(2, 2)), dict(kernel_size=(3, 3), stride=2, padding=1), dict(kernel_size=(3, 3), stride=2, padding=1, ceil_mode=True),
                 dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1), ceil_mode=True), dict(kernel_size=(3, 3), stride=3, ceil_mode=True),
                 dict(kernel_size=(3, 2), stride=2, padding=(1, 0))]

@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("kw", AVGPOOL_CASES)
def test_avg_pool2d(kw, count_include_pad):
  ref_kw = {k: v for k, v in kw.items() if k != "kernel_size"}
  check_op(lambda x: x.avg_pool2d(**kw, count_include_pad=count_include_pad),
           lambda x: np_pool(x, kw["kernel_size"], kind="avg", count_include_pad=count_include_pad, **ref_kw)[0], [(1, 2, 6, 7)])

def test_avg_pool2d_dilation():
  # torch has no dilation for avg_pool2d; without padding the average of the dilated window is unambiguous
  check_op(lambda x: x.avg_pool2d((2, 2), stride=1, dilation=2), lambda x: np_pool(x, (2, 2), 1, dilation=2, kind="avg")[0], [(1, 2, 5, 6)])

def test_avg_pool1d():
  check_op(lambda x: x.avg_pool1d(3, stride=2, padding=1, count_include_pad=False),
           lambda x: np_pool(x, (3,), 2, padding=1, kind="avg", count_include_pad=False)[0], [(2, 3, 8)])

# ---------------- interpolate ----------------
def interp_matrix(n_in, n_out, mode, align_corners=False):
  """(n_out, n_in) matrix of one axis of torch.nn.functional.interpolate given an output size."""
  m, scale = np.zeros((n_out, n_in)), n_in / n_out
  for j in range(n_out):
    if mode == "nearest": m[j, min(math.floor(j * scale), n_in - 1)] = 1
    elif mode == "nearest-exact": m[j, min(math.floor((j + 0.5) * scale), n_in - 1)] = 1
    else:
      if align_corners: src = j * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
      else: src = max((j + 0.5) * scale - 0.5, 0.0)
      lo = min(math.floor(src), n_in - 1)
      hi, lam = min(lo + 1, n_in - 1), src - lo
      m[j, lo] += 1 - lam
      m[j, hi] += lam
  return m

def np_interpolate(x, size, mode, align_corners=False):
  for i, n_out in enumerate(size):
    axis = x.ndim - len(size) + i
    x = np.moveaxis(np.tensordot(interp_matrix(x.shape[axis], n_out, mode, align_corners), np.moveaxis(x, axis, 0), 1), 0, axis)
  return x

@pytest.mark.parametrize("mode,align_corners", [("nearest", False), ("nearest-exact", False), ("linear", False), ("linear", True)])
@pytest.mark.parametrize("size_in,size_out", [(4, 7), (7, 3), (5, 5), (6, 4)])
def test_interpolate_1d(mode, align_corners, size_in, size_out):
  check_op(lambda x: x.interpolate((size_out,), mode=mode, align_corners=align_corners),
           lambda x: np_interpolate(x, (size_out,), mode, align_corners), [(2, 2, size_in)])

@pytest.mark.parametrize("mode,align_corners", [("nearest", False), ("nearest-exact", False), ("linear", False), ("linear", True)])
@pytest.mark.parametrize("size_in,size_out", [((3, 4), (5, 7)), ((5, 6), (2, 4)), ((4, 3), (4, 6))])
def test_interpolate_2d(mode, align_corners, size_in, size_out):
  check_op(lambda x: x.interpolate(size_out, mode=mode, align_corners=align_corners),
           lambda x: np_interpolate(x, size_out, mode, align_corners), [(1, 2, *size_in)])

@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "linear"])
@pytest.mark.parametrize("size_in,size_out", [((6,), (12,)), ((6,), (18,)), ((5,), (20,)), ((12,), (6,)), ((12,), (4,)), ((12,), (3,)),
                                              ((4, 6), (8, 3)), ((3, 2), (9, 8))], ids=str)
def test_interpolate_by_whole_factors(mode, size_in, size_out):
  """Sizes a whole factor apart resize through views (repeats, strided views, blends of shifted views): the same
  values and gradients as PyTorch's coordinate mapping, ends included."""
  check_op(lambda x: x.interpolate(size_out, mode=mode), lambda x: np_interpolate(x, size_out, mode), [(2, *size_in)])

def test_interpolate_by_a_whole_factor_reads_no_computed_index():
  """x2 bilinear and /2 linear of an image are each one kernel of views, x2 nearest a view: no index arithmetic, no
  gather (a 12x12 resize of the same image computes its indices)."""
  x = Tensor.empty(1, 2, 8, 8)
  for size, mode, kernels in (((16, 16), "linear", 1), ((16, 16), "nearest", 0), ((4, 4), "linear", 1)):
    items = x.interpolate(size, mode=mode).schedule()
    assert len(items) == kernels and not any({"ARANGE", "TRUNC"} & {u.op.name for u in it.ast.toposort()} for it in items), (size, mode)
  assert any("ARANGE" in {u.op.name for u in it.ast.toposort()} for it in x.interpolate((12, 12), mode="linear").schedule())

def test_interpolate_to_the_same_size_is_the_input():
  x = np.array([[[1.0, np.inf, -2.0]]], np.float32)  # a blend would give the inf's neighbour 0 * inf = nan
  np.testing.assert_array_equal(Tensor(x).interpolate((3,), mode="linear").numpy(), x)

def np_bilinear(x, size, align_corners):
  """torch.nn.functional.interpolate(mode="bilinear") pixel by pixel, from PyTorch's documented source-coordinate
  mapping: align_corners maps the corner pixels onto each other (src = dst * (in - 1) / (out - 1)), otherwise pixel
  centres ((dst + 0.5) * in / out - 0.5, clamped at 0); a source point blends its 4 neighbours (the far one clamped)."""
  (h, w), (oh, ow) = x.shape[-2:], size
  def source(dst, n_in, n_out):
    if align_corners: src = dst * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else: src = max((dst + 0.5) * n_in / n_out - 0.5, 0.0)
    lo = min(int(math.floor(src)), n_in - 1)
    return lo, min(lo + 1, n_in - 1), src - lo
  out = np.zeros(x.shape[:-2] + (oh, ow))
  for oy in range(oh):
    y0, y1, fy = source(oy, h, oh)
    for ox in range(ow):
      x0, x1, fx = source(ox, w, ow)
      out[..., oy, ox] = ((1 - fy) * ((1 - fx) * x[..., y0, x0] + fx * x[..., y0, x1]) + fy * ((1 - fx) * x[..., y1, x0] + fx * x[..., y1, x1]))
  return out

@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size_in,size_out", [((3, 4), (5, 7)), ((5, 6), (2, 4)), ((4, 3), (4, 6)), ((2, 2), (1, 3)), ((1, 3), (4, 1))])
def test_interpolate_bilinear(align_corners, size_in, size_out):
  check_op(lambda x: x.interpolate(size_out, mode="bilinear", align_corners=align_corners),
           lambda x: np_bilinear(x, size_out, align_corners), [(2, 2, *size_in)])

def test_interpolate_bilinear_hand_computed():
  x = Tensor(np.array([[[[0.0, 1.0], [2.0, 3.0]]]], np.float32))
  # align_corners: the corners stay, the middle is the average of its neighbours
  np.testing.assert_allclose(x.interpolate((3, 3), mode="bilinear", align_corners=True).numpy()[0, 0], [[0, 0.5, 1], [1, 1.5, 2], [2, 2.5, 3]])
  # pixel centres: outputs at source 0 (clamped from -0.25), 0.25, 0.75 and 1 (1.25 blends the last pixel with itself)
  np.testing.assert_allclose(x.interpolate((1, 4), mode="bilinear").numpy()[0, 0], [[1.0, 1.25, 1.75, 2.0]])
  np.testing.assert_allclose(x.interpolate((2, 4), mode="bilinear").numpy()[0, 0], [[0, 0.25, 0.75, 1], [2, 2.25, 2.75, 3]])

def test_interpolate_trilinear_is_linear_on_3_dims():
  x = np.random.default_rng(9).uniform(-2, 2, (1, 1, 2, 3, 4)).astype(np.float32)
  for ac in (False, True):
    np.testing.assert_allclose(Tensor(x).interpolate((3, 2, 5), mode="trilinear", align_corners=ac).numpy(),
                               np_interpolate(x.astype(np.float64), (3, 2, 5), "linear", ac), rtol=1e-5, atol=1e-6)

def test_interpolate_errors_are_pytorchs_types():
  x = Tensor.zeros(1, 1, 4, 4)
  with pytest.raises(NotImplementedError): x.interpolate((8, 8), mode="cubic")
  with pytest.raises(NotImplementedError): x.interpolate((8,), mode="bilinear")
  with pytest.raises(NotImplementedError): x.interpolate((8, 8), mode="trilinear")
  with pytest.raises(ValueError): x.interpolate((8, 8), mode="nearest", align_corners=True)

# ---------------- normalization ----------------
def np_layernorm(x, axis, eps):
  mu = x.mean(axis, keepdims=True)
  return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis, keepdims=True) + eps)

def test_layernorm():
  check_op(lambda x: x.layernorm(), lambda x: np_layernorm(x, -1, 1e-5), [(3, 5)], rtol=1e-4, atol=1e-5)
  check_op(lambda x: x.layernorm(axis=(-2, -1), eps=1e-3), lambda x: np_layernorm(x, (-2, -1), 1e-3), [(2, 3, 4)], rtol=1e-4, atol=1e-5)
  check_op(lambda x: x.layernorm(axis=1), lambda x: np_layernorm(x, 1, 1e-5), [(2, 4, 3)], rtol=1e-4, atol=1e-5)

def test_batchnorm():
  rng = np.random.default_rng(2)
  x, w, b, mean = rng.uniform(-2, 2, (2, 3, 2, 2)), rng.uniform(0.5, 1.5, 3), rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)
  invstd = 1 / np.sqrt(rng.uniform(0.5, 2, 3) + 1e-5)
  shp = (1, 3, 1, 1)
  check_op(lambda x, w, b, m, s: x.batchnorm(w, b, m, s), lambda x, w, b, m, s: (x - m.reshape(shp)) * w.reshape(shp) * s.reshape(shp) + b.reshape(shp),
           inputs=[x, w, b, mean, invstd], rtol=1e-5, atol=1e-5)
  check_op(lambda x, m, s: x.batchnorm(None, None, m, s), lambda x, m, s: (x - m.reshape(shp)) * s.reshape(shp), inputs=[x, mean, invstd])
  # channels last
  check_op(lambda x, w, b, m, s: x.batchnorm(w, b, m, s, axis=-1), lambda x, w, b, m, s: (x - m) * w * s + b,
           inputs=[rng.uniform(-2, 2, (4, 3)), w, b, mean, invstd])

def test_normalize():
  check_op(lambda x: x.normalize(), lambda x: x / np.maximum(np.sqrt((x ** 2).sum(1, keepdims=True)), 1e-12), [(3, 4)], rtol=1e-5, atol=1e-5)
  check_op(lambda x: x.normalize(p=1, dim=-1), lambda x: x / np.maximum(np.abs(x).sum(-1, keepdims=True), 1e-12), [(2, 3, 4)], rtol=1e-5, atol=1e-5)
  check_op(lambda x: x.normalize(dim=0), lambda x: x / np.maximum(np.sqrt((x ** 2).sum(0, keepdims=True)), 1e-12), [(3, 4)], rtol=1e-5, atol=1e-5)

def test_normalize_zero_row_eps():
  x = np.array([[0.0, 0.0, 0.0], [3.0, 0.0, 4.0]], np.float32)
  np.testing.assert_allclose(Tensor(x).normalize(dim=1).numpy(), [[0, 0, 0], [0.6, 0, 0.8]], rtol=1e-6)

# ---------------- attention ----------------
def np_softmax(x, axis=-1):
  e = np.exp(x - x.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)

def np_sdpa(q, k, v, mask=None, is_causal=False):
  scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
  if is_causal: mask = np.tril(np.ones((q.shape[-2], k.shape[-2]), dtype=bool))
  if mask is not None: scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask
  return np_softmax(scores) @ v

def test_sdpa_plain():
  check_op(lambda q, k, v: q.scaled_dot_product_attention(k, v), lambda q, k, v: np_sdpa(q, k, v), [(2, 3, 4), (2, 5, 4), (2, 5, 3)], rtol=1e-5, atol=1e-5)

def test_sdpa_bool_mask():
  rng = np.random.default_rng(3)
  mask = np.array([[True, False, True, True, False], [False, False, True, False, False], [True, True, True, True, True]])
  q, k, v = rng.uniform(-2, 2, (2, 1, 3, 4)), rng.uniform(-2, 2, (2, 1, 5, 4)), rng.uniform(-2, 2, (2, 1, 5, 2))
  check_op(lambda q, k, v, m: q.scaled_dot_product_attention(k, v, attn_mask=m), lambda q, k, v, m: np_sdpa(q, k, v, m),
           inputs=[q, k, v, mask], rtol=1e-5, atol=1e-5)

def test_sdpa_float_mask():
  rng = np.random.default_rng(4)
  q, k, v, m = rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (5, 4)), rng.uniform(-2, 2, (5, 2)), rng.uniform(-3, 0, (3, 5))
  check_op(lambda q, k, v, m: q.scaled_dot_product_attention(k, v, attn_mask=m), lambda q, k, v, m: np_sdpa(q, k, v, m),
           inputs=[q, k, v, m], rtol=1e-5, atol=1e-5)

def test_sdpa_causal():
  check_op(lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True), lambda q, k, v: np_sdpa(q, k, v, is_causal=True),
           [(2, 2, 4, 3), (2, 2, 4, 3), (2, 2, 4, 3)], rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("hq,hk", [(4, 2), (6, 1), (3, 3)])
def test_sdpa_grouped_query_attention(hq, hk):
  # PyTorch's enable_gqa: key/value head j serves query heads j*g .. j*g+g-1 (g = hq // hk), i.e. heads repeated in place
  g = hq // hk
  ref = lambda q, k, v, **kw: np_sdpa(q, np.repeat(k, g, axis=-3), np.repeat(v, g, axis=-3), **kw)
  check_op(lambda q, k, v: q.scaled_dot_product_attention(k, v, enable_gqa=True), ref, [(2, hq, 3, 4), (2, hk, 5, 4), (2, hk, 5, 2)], rtol=1e-5, atol=1e-5)
  check_op(lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True, enable_gqa=True), lambda q, k, v: ref(q, k, v, is_causal=True),
           [(hq, 4, 3), (hk, 4, 3), (hk, 4, 3)], rtol=1e-5, atol=1e-5)

def test_sdpa_errors():
  q, k = Tensor.zeros(1, 4, 3, 2), Tensor.zeros(1, 3, 3, 2)
  with pytest.raises(RuntimeError, match="multiple"): q.scaled_dot_product_attention(k, k, enable_gqa=True)
  with pytest.raises(RuntimeError): q.scaled_dot_product_attention(q, q, attn_mask=Tensor.ones(3, 3, dtype="bool"), is_causal=True)

# ---------------- dropout ----------------
def test_dropout_identity_outside_training():
  check_op(lambda x: x.dropout(0.5), lambda x: x, [(3, 4)])
  check_op(lambda x: x.dropout(0.9), lambda x: x, [(5,)])

def test_dropout_training():
  p = 0.3
  x = np.random.default_rng(5).uniform(1, 2, (100, 100)).astype(np.float32)
  Tensor.manual_seed(1234)
  with Context(TRAINING=1):
    out = Tensor(x).dropout(p).numpy()
  zero = out == 0
  assert abs(zero.mean() - p) < 0.03, f"{zero.mean()} of the elements are zero, expected about {p}"
  np.testing.assert_allclose(out[~zero], x[~zero] / (1 - p), rtol=1e-6)

def test_dropout_training_draws_new_masks_and_gradient_matches():
  x = np.random.default_rng(6).uniform(1, 2, (32, 32)).astype(np.float32)
  masks = []
  with Context(TRAINING=1):
    for _ in range(3):  # several draws in a row: the generator state moves on between them
      t = Tensor(x, requires_grad=True)
      a = t.dropout(0.5)
      a_np = a.numpy()
      a.sum().backward()
      # the gradient uses the mask of the forward pass
      np.testing.assert_allclose(t.grad.numpy(), (a_np != 0) / 0.5, rtol=1e-6)
      masks.append(a_np == 0)
  assert not np.array_equal(masks[0], masks[1]), "two dropout calls used the same mask"

def test_dropout_edge_probabilities():
  x = Tensor(np.ones((4, 4), np.float32))
  with Context(TRAINING=1):
    np.testing.assert_array_equal(x.dropout(0.0).numpy(), np.ones((4, 4)))
    np.testing.assert_array_equal(x.dropout(1.0).numpy(), np.zeros((4, 4)))
  with pytest.raises(ValueError): x.dropout(1.5)

# ---------------- optional comparisons against torch ----------------
def test_torch_conv_pool_interpolate():
  torch = pytest.importorskip("torch")
  F = torch.nn.functional
  rng = np.random.default_rng(7)
  x, w = rng.uniform(-1, 1, (2, 4, 7, 6)).astype(np.float32), rng.uniform(-1, 1, (4, 2, 3, 3)).astype(np.float32)
  tx, tw = torch.tensor(x), torch.tensor(w)
  np.testing.assert_allclose(Tensor(x).conv2d(Tensor(w), groups=2, stride=2, padding=1, dilation=(1, 2)).numpy(),
                             F.conv2d(tx, tw, groups=2, stride=2, padding=1, dilation=(1, 2)).numpy(), rtol=1e-4, atol=1e-5)
  wt = rng.uniform(-1, 1, (4, 3, 3, 2)).astype(np.float32)
  np.testing.assert_allclose(Tensor(x).conv_transpose2d(Tensor(wt), groups=2, stride=2, padding=1, output_padding=1, dilation=2).numpy(),
                             F.conv_transpose2d(tx, torch.tensor(wt), groups=2, stride=2, padding=1, output_padding=1, dilation=2).numpy(), rtol=1e-4, atol=1e-5)
  for ceil_mode in (False, True):
    tv, ti = F.max_pool2d(tx, 3, 2, padding=1, ceil_mode=ceil_mode, return_indices=True)
    np.testing.assert_allclose(Tensor(x).max_pool2d((3, 3), 2, padding=1, ceil_mode=ceil_mode).numpy(), tv.numpy())
    if refused(dtypes.int64) is None:  # the indices are int64, as PyTorch's (WEBGPU and QCOM hold no 64-bit types)
      v, i = Tensor(x).max_pool2d((3, 3), 2, padding=1, ceil_mode=ceil_mode, return_indices=True)
      np.testing.assert_allclose(v.numpy(), tv.numpy())
      np.testing.assert_array_equal(i.numpy(), ti.numpy())
    for cip in (False, True):
      np.testing.assert_allclose(Tensor(x).avg_pool2d((3, 3), 2, padding=1, ceil_mode=ceil_mode, count_include_pad=cip).numpy(),
                                 F.avg_pool2d(tx, 3, 2, padding=1, ceil_mode=ceil_mode, count_include_pad=cip).numpy(), rtol=1e-5, atol=1e-6)
  for mode in ("nearest", "nearest-exact"):
    np.testing.assert_allclose(Tensor(x).interpolate((5, 9), mode=mode).numpy(), F.interpolate(tx, size=(5, 9), mode=mode).numpy())
  for ac in (False, True):
    np.testing.assert_allclose(Tensor(x).interpolate((5, 9), mode="linear", align_corners=ac).numpy(),
                               F.interpolate(tx, size=(5, 9), mode="bilinear", align_corners=ac).numpy(), rtol=1e-5, atol=1e-6)

def test_torch_sdpa():
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(8)
  q, k, v = (rng.uniform(-1, 1, (2, 3, 4, 8)).astype(np.float32) for _ in range(3))
  mask = rng.uniform(0, 1, (4, 4)) > 0.3
  mask[:, 0] = True
  ref = torch.nn.functional.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v), attn_mask=torch.tensor(mask)).numpy()
  np.testing.assert_allclose(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), attn_mask=Tensor(mask)).numpy(), ref, rtol=1e-5, atol=1e-6)
  ref = torch.nn.functional.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v), is_causal=True).numpy()
  np.testing.assert_allclose(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True).numpy(), ref, rtol=1e-5, atol=1e-6)
