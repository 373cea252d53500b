"""tg.nn layers: parameter shapes and initialization, forward passes against numpy references written from each layer's
definition (evaluated in float64 with the layer's own weights), and gradients of every parameter (values checked by
central finite differences of the float64 reference, or analytic formulas)."""
import math
import numpy as np
import pytest
from tg import Tensor, Context, dtypes, nn
from tg.nn.state import get_state_dict, get_parameters
from tests.tg.opcheck import needs, skip_refused

# ---------------- helpers ----------------

def rnd(*shape, seed=0, low=-1.0, high=1.0) -> np.ndarray:
  return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32).astype(np.float64)

def set_param(t: Tensor, arr: np.ndarray) -> np.ndarray:
  """Give a layer parameter new values in place (the tensor object, its requires_grad and leaf-ness stay)."""
  t.replace(Tensor(np.asarray(arr, dtype=np.float32)))
  return t.numpy().astype(np.float64)

def params_of(layer, names) -> dict[str, np.ndarray]:
  return {n: getattr(layer, n).numpy().astype(np.float64) for n in names}

def fd_grad(f, arr: np.ndarray, eps: float = 1e-6) -> np.ndarray:
  """d f(arr) / d arr by central differences (f returns a scalar, arr is float64)."""
  g = np.zeros_like(arr)
  for idx in np.ndindex(arr.shape):
    p, m = arr.copy(), arr.copy()
    p[idx] += eps
    m[idx] -= eps
    g[idx] = (f(p) - f(m)) / (2 * eps)
  return g

def check_layer(layer, inputs: list[np.ndarray], ref, names: list[str], rtol=1e-5, atol=1e-5, grad_rtol=1e-3, grad_atol=1e-4,
                input_grads=True, seed=7):
  """Forward `layer(*inputs)` against `ref(*inputs, **params)` (float64); then backward of sum(out * G) and compare the
  gradient of every named parameter (and every float input) with finite differences of the reference."""
  params = params_of(layer, names)
  xs = [Tensor(x.astype(np.float32), requires_grad=input_grads) for x in inputs]
  out = layer(*xs)
  outs = out if isinstance(out, tuple) else (out,)
  refs = ref(*inputs, **params)
  refs = refs if isinstance(refs, tuple) else (refs,)
  assert len(outs) == len(refs)
  for o, r in zip(outs, refs):
    assert o.shape == r.shape, f"shape {o.shape} != reference {r.shape}"
    np.testing.assert_allclose(o.numpy(), r, rtol=rtol, atol=atol)
  rng = np.random.default_rng(seed)
  G = [rng.uniform(0.5, 1.5, r.shape) for r in refs]
  loss = sum((o * Tensor(g.astype(np.float32))).sum() for o, g in zip(outs, G))
  loss.backward()

  def scalar(**over):
    args = [over.get(f"_in{i}", x) for i, x in enumerate(inputs)]
    rs = ref(*args, **{**params, **{k: v for k, v in over.items() if not k.startswith("_in")}})
    rs = rs if isinstance(rs, tuple) else (rs,)
    return sum(float((r * g).sum()) for r, g in zip(rs, G))

  for n in names:
    t = getattr(layer, n)
    assert t.grad is not None, f"parameter {n} got no gradient"
    assert t.grad.shape == t.shape
    expected = fd_grad(lambda a: scalar(**{n: a}), params[n])
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=grad_rtol, atol=grad_atol, err_msg=f"gradient of {n}")
  if input_grads:
    for i, x in enumerate(xs):
      assert x.grad is not None, f"input {i} got no gradient"
      expected = fd_grad(lambda a: scalar(**{f"_in{i}": a}), inputs[i])
      np.testing.assert_allclose(x.grad.numpy(), expected, rtol=grad_rtol, atol=grad_atol, err_msg=f"gradient of input {i}")
  return outs

def assert_uniform_init(t: Tensor, bound: float):
  """Values lie in [-bound, bound] and look uniform there (spread to near the edges, std near bound/sqrt(3))."""
  a = t.numpy()
  assert t.requires_grad is True and t.dtype == dtypes.float32
  assert np.all(np.abs(a) <= bound * (1 + 1e-6)), f"|values| up to {np.abs(a).max()} exceed bound {bound}"
  assert a.size >= 100, "use enough samples to judge the spread"
  assert np.abs(a).max() > 0.8 * bound
  assert abs(a.mean()) < 0.25 * bound
  assert 0.75 * bound / math.sqrt(3) < a.std() < 1.25 * bound / math.sqrt(3)

def all_params_get_grads(layer, out):
  out = out if isinstance(out, tuple) else (out,)
  sum(o.square().sum() for o in out).backward()
  ps = [p for p in get_parameters(layer) if p.requires_grad]
  assert ps
  for p in ps:
    assert p.grad is not None and p.grad.shape == p.shape
    assert np.isfinite(p.grad.numpy()).all()

# ---------------- numpy references ----------------

def np_norm(x, axes, eps):
  m = x.mean(axes, keepdims=True)
  v = ((x - m) ** 2).mean(axes, keepdims=True)
  return (x - m) / np.sqrt(v + eps)

def chan(v, ndim):  # a per-channel vector shaped to broadcast over (N, C, ...)
  return v.reshape(1, -1, *[1] * (ndim - 2))

def np_conv(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
  """N-d cross-correlation, out[n, o, p] = sum_{c in o's group, k} x_pad[n, c, p*s + k*d] * w[o, c, k] + b[o]."""
  nd = w.ndim - 2
  s, d = (stride,) * nd if isinstance(stride, int) else stride, (dilation,) * nd if isinstance(dilation, int) else dilation
  k = w.shape[2:]
  if padding == "same":
    pads = [(dd * (kk - 1) // 2, dd * (kk - 1) - dd * (kk - 1) // 2) for dd, kk in zip(d, k)]
  elif isinstance(padding, int): pads = [(padding, padding)] * nd
  else: pads = [(p, p) for p in padding]
  xp = np.pad(x, [(0, 0), (0, 0), *pads])
  out_sp = [(xp.shape[2 + i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(nd)]
  n, cin = x.shape[:2]
  cout = w.shape[0]
  cg, og = cin // groups, cout // groups
  out = np.zeros((n, cout, *out_sp))
  for kidx in np.ndindex(*k):
    sl = tuple(slice(kidx[i] * d[i], kidx[i] * d[i] + (out_sp[i] - 1) * s[i] + 1, s[i]) for i in range(nd))
    patch = xp[(slice(None), slice(None)) + sl]
    for g in range(groups):
      out[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", patch[:, g * cg:(g + 1) * cg], w[(slice(g * og, (g + 1) * og), slice(None)) + kidx])
  return out if b is None else out + chan(b, out.ndim)

def np_conv_transpose(x, w, b=None, stride=1, padding=0, output_padding=0, dilation=1, groups=1):
  """Scatter form: every input x[n, c, i] adds x * w[c, o, k] at output position i*s - p + k*d (o in c's group)."""
  nd = w.ndim - 2
  tup = lambda v: (v,) * nd if isinstance(v, int) else tuple(v)
  s, p, op, d = tup(stride), tup(padding), tup(output_padding), tup(dilation)
  k = w.shape[2:]
  n, cin = x.shape[:2]
  og, cg = w.shape[1], cin // groups
  insp = x.shape[2:]
  full = [(insp[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 + op[i] for i in range(nd)]
  out = np.zeros((n, og * groups, *full))
  for kidx in np.ndindex(*k):
    sl = tuple(slice(kidx[i] * d[i], kidx[i] * d[i] + (insp[i] - 1) * s[i] + 1, s[i]) for i in range(nd))
    for g in range(groups):
      contrib = np.einsum("nc...,co->no...", x[:, g * cg:(g + 1) * cg], w[(slice(g * cg, (g + 1) * cg), slice(None)) + kidx])
      out[(slice(None), slice(g * og, (g + 1) * og)) + sl] += contrib
  size = [(insp[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1 for i in range(nd)]
  out = out[(slice(None), slice(None)) + tuple(slice(p[i], p[i] + size[i]) for i in range(nd))]
  return out if b is None else out + chan(b, out.ndim)

def sigmoid(x): return 1 / (1 + np.exp(-x))

def np_lstm(x, h, c, weight_ih, weight_hh, bias_ih=None, bias_hh=None):
  gates = x @ weight_ih.T + h @ weight_hh.T
  if bias_ih is not None: gates = gates + bias_ih + bias_hh
  i, f, g, o = np.split(gates, 4, axis=1)
  c2 = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
  return sigmoid(o) * np.tanh(c2), c2

# ---------------- BatchNorm ----------------

@needs(dtypes.int64, why="BatchNorm counts batches in int64")
def test_batchnorm_params_and_alias():
  assert nn.BatchNorm2d is nn.BatchNorm
  bn = nn.BatchNorm2d(5)
  assert bn.weight.shape == bn.bias.shape == bn.running_mean.shape == bn.running_var.shape == (5,)
  np.testing.assert_array_equal(bn.weight.numpy(), np.ones(5))
  np.testing.assert_array_equal(bn.bias.numpy(), np.zeros(5))
  np.testing.assert_array_equal(bn.running_mean.numpy(), np.zeros(5))
  np.testing.assert_array_equal(bn.running_var.numpy(), np.ones(5))
  assert bn.weight.requires_grad is True and bn.bias.requires_grad is True
  assert bn.running_mean.requires_grad is False and bn.running_var.requires_grad is False
  assert bn.num_batches_tracked.item() == 0

@needs(dtypes.int64, why="BatchNorm counts batches in int64")
def test_batchnorm_training_batch_stats_and_running_update():
  bn = nn.BatchNorm2d(3, momentum=0.2)
  w, b = set_param(bn.weight, [0.5, -1.5, 2.0]), set_param(bn.bias, [0.1, 0.0, -0.3])
  x1, x2 = rnd(4, 3, 2, 2, seed=1, low=-2, high=3), rnd(4, 3, 2, 2, seed=2, low=-1, high=1)
  rm, rv = np.zeros(3), np.ones(3)
  n = 4 * 2 * 2
  with Context(TRAINING=1):
    for x in (x1, x2):
      out = bn(Tensor(x.astype(np.float32))).numpy()
      mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))  # biased variance normalizes the batch
      np.testing.assert_allclose(out, (x - chan(mean, 4)) / np.sqrt(chan(var, 4) + 1e-5) * chan(w, 4) + chan(b, 4), rtol=1e-5, atol=1e-5)
      rm = 0.8 * rm + 0.2 * mean
      rv = 0.8 * rv + 0.2 * var * n / (n - 1)  # unbiased variance goes into the running estimate
      np.testing.assert_allclose(bn.running_mean.numpy(), rm, rtol=1e-5, atol=1e-6)
      np.testing.assert_allclose(bn.running_var.numpy(), rv, rtol=1e-5, atol=1e-6)
  assert bn.num_batches_tracked.item() == 2
  # eval mode: running statistics, and they stay put
  x3 = rnd(2, 3, 2, 2, seed=3)
  out = bn(Tensor(x3.astype(np.float32))).numpy()
  np.testing.assert_allclose(out, (x3 - chan(rm, 4)) / np.sqrt(chan(rv, 4) + 1e-5) * chan(w, 4) + chan(b, 4), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(bn.running_mean.numpy(), rm, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(bn.running_var.numpy(), rv, rtol=1e-5, atol=1e-6)
  assert bn.num_batches_tracked.item() == 2

def test_batchnorm_eval_uses_running_stats():
  bn = nn.BatchNorm(4, eps=1e-3)
  rm, rv = set_param(bn.running_mean, [0.5, -1.0, 0.0, 2.0]), set_param(bn.running_var, [1.0, 4.0, 0.25, 2.0])
  w, b = set_param(bn.weight, [1.0, 2.0, -1.0, 0.5]), set_param(bn.bias, [0.0, 1.0, 0.5, -0.5])
  x = rnd(3, 4, 5, seed=4)  # (N, C, L)
  out = bn(Tensor(x.astype(np.float32))).numpy()
  np.testing.assert_allclose(out, (x - chan(rm, 3)) / np.sqrt(chan(rv, 3) + 1e-3) * chan(w, 3) + chan(b, 3), rtol=1e-5, atol=1e-5)

def test_batchnorm_1d_input_and_affine_false():
  bn = nn.BatchNorm1d(3, affine=False)
  assert bn.weight is None and bn.bias is None
  x = rnd(6, 3, seed=5, low=-3, high=3)  # (N, C)
  with Context(TRAINING=1): out = bn(Tensor(x.astype(np.float32))).numpy()
  np.testing.assert_allclose(out, np_norm(x, (0,), 1e-5), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * x.mean(0), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * x.var(0, ddof=1), rtol=1e-5, atol=1e-6)
  assert "weight" not in get_state_dict(bn) and "running_mean" in get_state_dict(bn)

def test_batchnorm_no_running_stats_uses_batch_stats_in_eval():
  bn = nn.BatchNorm2d(2, track_running_stats=False)
  assert not hasattr(bn, "running_mean") and not hasattr(bn, "running_var")
  x = rnd(3, 2, 2, 3, seed=6, low=0, high=4)
  ref = np_norm(x, (0, 2, 3), 1e-5)
  np.testing.assert_allclose(bn(Tensor(x.astype(np.float32))).numpy(), ref, rtol=1e-5, atol=1e-5)
  with Context(TRAINING=1): np.testing.assert_allclose(bn(Tensor(x.astype(np.float32))).numpy(), ref, rtol=1e-5, atol=1e-5)

def test_batchnorm_training_gradients():
  bn = nn.BatchNorm2d(2)
  set_param(bn.weight, [1.5, -0.5])
  set_param(bn.bias, [0.2, 0.3])
  ref = lambda x, weight, bias: np_norm(x, (0, 2, 3), 1e-5) * chan(weight, 4) + chan(bias, 4)
  with Context(TRAINING=1): check_layer(bn, [rnd(3, 2, 2, 2, seed=8)], ref, ["weight", "bias"])

def test_batchnorm_eval_gradients():
  bn = nn.BatchNorm2d(2)
  rm, rv = set_param(bn.running_mean, [0.3, -0.2]), set_param(bn.running_var, [0.5, 2.0])
  set_param(bn.weight, [1.5, -0.5])
  ref = lambda x, weight, bias: (x - chan(rm, 4)) / np.sqrt(chan(rv, 4) + 1e-5) * chan(weight, 4) + chan(bias, 4)
  check_layer(bn, [rnd(2, 2, 2, 2, seed=9)], ref, ["weight", "bias"])
  assert bn.running_mean.grad is None and bn.running_var.grad is None

def test_batchnorm_rejects_1d_input():
  bn = nn.BatchNorm(4)
  with pytest.raises(ValueError, match=r"\(4,\)"): bn(Tensor.ones(4))
  with pytest.raises(ValueError, match=r"\(4,\)"), Context(TRAINING=1): bn(Tensor.ones(4))

# ---------------- convolutions ----------------

@pytest.mark.parametrize("cin,cout,k,kw", [
  (2, 3, 3, {}),
  (2, 4, 3, {"stride": 2, "padding": 1}),
  (2, 3, (3, 2), {"padding": (1, 2), "stride": (1, 2)}),
  (2, 2, 3, {"padding": "same"}),
  (1, 2, 4, {"padding": "same", "dilation": 2}),
  (2, 3, 2, {"dilation": 2, "padding": 1}),
  (4, 6, 3, {"groups": 2, "padding": 1}),
  (3, 3, 3, {"groups": 3, "bias": False}),
])
def test_conv2d_forward(cin, cout, k, kw):
  conv = nn.Conv2d(cin, cout, k, **kw)
  kk = (k, k) if isinstance(k, int) else k
  assert conv.weight.shape == (cout, cin // kw.get("groups", 1), *kk)
  if kw.get("bias", True): assert conv.bias.shape == (cout,)
  else: assert conv.bias is None and "bias" not in get_state_dict(conv)
  x = rnd(2, cin, 6, 5, seed=10)
  w = conv.weight.numpy().astype(np.float64)
  b = conv.bias.numpy().astype(np.float64) if conv.bias is not None else None
  ref = np_conv(x, w, b, **{a: v for a, v in kw.items() if a != "bias"})
  out = conv(Tensor(x.astype(np.float32)))
  assert out.shape == ref.shape
  if kw.get("padding") == "same": assert out.shape[2:] == x.shape[2:]
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)

def test_conv2d_init_bounds():
  conv = nn.Conv2d(4, 8, 3, groups=2)
  bound = 1 / math.sqrt(4 // 2 * 9)
  assert_uniform_init(conv.weight, bound)
  b = conv.bias.numpy()
  assert conv.bias.requires_grad is True and np.all(np.abs(b) <= bound) and b.std() > 0
  assert_uniform_init(nn.Conv2d(8, 16, (1, 2)).weight, 1 / math.sqrt(16))

def test_conv2d_groups_must_divide():
  with pytest.raises(ValueError): nn.Conv2d(3, 4, 3, groups=2)
  with pytest.raises(ValueError): nn.Conv2d(4, 3, 3, groups=2)

def test_conv2d_gradients():
  conv = nn.Conv2d(2, 3, 3, padding=1)
  ref = lambda x, weight, bias: np_conv(x, weight, bias, padding=1)
  check_layer(conv, [rnd(1, 2, 4, 4, seed=11)], ref, ["weight", "bias"])

def test_conv2d_gradients_strided_grouped():
  conv = nn.Conv2d(4, 2, (2, 3), stride=2, padding=(1, 0), dilation=(1, 2), groups=2)
  ref = lambda x, weight, bias: np_conv(x, weight, bias, stride=2, padding=(1, 0), dilation=(1, 2), groups=2)
  check_layer(conv, [rnd(2, 4, 5, 6, seed=12)], ref, ["weight", "bias"])

def test_conv2d_bias_false_gradients():
  conv = nn.Conv2d(2, 2, 2, bias=False)
  check_layer(conv, [rnd(1, 2, 3, 3, seed=13)], lambda x, weight: np_conv(x, weight), ["weight"])

@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 1}, {"padding": "same", "dilation": 2}, {"groups": 2, "bias": False}])
def test_conv1d_forward(kw):
  conv = nn.Conv1d(2, 4, 3, **kw)
  assert conv.weight.shape == (4, 2 // kw.get("groups", 1), 3)
  x = rnd(2, 2, 7, seed=14)
  b = conv.bias.numpy().astype(np.float64) if conv.bias is not None else None
  ref = np_conv(x, conv.weight.numpy().astype(np.float64), b, **{a: v for a, v in kw.items() if a != "bias"})
  out = conv(Tensor(x.astype(np.float32)))
  assert out.shape == ref.shape
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)

def test_conv1d_init_and_gradients():
  assert_uniform_init(nn.Conv1d(16, 8, 3).weight, 1 / math.sqrt(16 * 3))
  conv = nn.Conv1d(2, 3, 2, stride=2)
  check_layer(conv, [rnd(2, 2, 5, seed=15)], lambda x, weight, bias: np_conv(x, weight, bias, stride=2), ["weight", "bias"])

@pytest.mark.parametrize("cin,cout,k,kw", [
  (2, 3, 3, {}),
  (2, 3, 3, {"stride": 2, "padding": 1, "output_padding": 1}),
  (2, 2, (2, 3), {"stride": (2, 1), "padding": (0, 1)}),
  (2, 3, 2, {"dilation": 2}),
  (4, 6, 3, {"groups": 2, "stride": 2}),
  (2, 2, 3, {"bias": False, "padding": 1}),
])
def test_conv_transpose2d_forward(cin, cout, k, kw):
  conv = nn.ConvTranspose2d(cin, cout, k, **kw)
  kk = (k, k) if isinstance(k, int) else k
  assert conv.weight.shape == (cin, cout // kw.get("groups", 1), *kk)
  x = rnd(2, cin, 3, 4, seed=16)
  b = conv.bias.numpy().astype(np.float64) if conv.bias is not None else None
  ref = np_conv_transpose(x, conv.weight.numpy().astype(np.float64), b, **{a: v for a, v in kw.items() if a != "bias"})
  out = conv(Tensor(x.astype(np.float32)))
  assert out.shape == ref.shape
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)

def test_conv_transpose2d_init_and_gradients():
  conv = nn.ConvTranspose2d(4, 6, 3, groups=2)
  assert_uniform_init(conv.weight, 1 / math.sqrt(6 // 2 * 9))
  conv = nn.ConvTranspose2d(2, 2, 2, stride=2, padding=1)
  ref = lambda x, weight, bias: np_conv_transpose(x, weight, bias, stride=2, padding=1)
  check_layer(conv, [rnd(1, 2, 3, 3, seed=17)], ref, ["weight", "bias"])

def test_conv_transpose1d():
  conv = nn.ConvTranspose1d(2, 3, 3, stride=3, padding=1, output_padding=2)
  assert conv.weight.shape == (2, 3, 3) and conv.bias.shape == (3,)
  ref = lambda x, weight, bias: np_conv_transpose(x, weight, bias, stride=3, padding=1, output_padding=2)
  out, = check_layer(conv, [rnd(2, 2, 4, seed=18)], ref, ["weight", "bias"])
  assert out.shape == (2, 3, (4 - 1) * 3 - 2 + 3 + 2)
  assert_uniform_init(nn.ConvTranspose1d(3, 20, 4).weight, 1 / math.sqrt(20 * 4))

# ---------------- Linear ----------------

def test_linear_shapes_and_init():
  lin = nn.Linear(64, 32)
  assert lin.weight.shape == (32, 64) and lin.bias.shape == (32,)
  assert_uniform_init(lin.weight, 1 / math.sqrt(64))
  assert np.all(np.abs(lin.bias.numpy()) <= 1 / 8) and lin.bias.requires_grad is True
  assert nn.Linear(3, 2, bias=False).bias is None

def test_linear_forward_and_analytic_gradients():
  lin = nn.Linear(4, 3)
  W, b = lin.weight.numpy().astype(np.float64), lin.bias.numpy().astype(np.float64)
  x = rnd(5, 4, seed=20, low=-2, high=2)
  xt = Tensor(x.astype(np.float32), requires_grad=True)
  out = lin(xt)
  np.testing.assert_allclose(out.numpy(), x @ W.T + b, rtol=1e-5, atol=1e-6)
  G = rnd(5, 3, seed=21)
  (out * Tensor(G.astype(np.float32))).sum().backward()
  np.testing.assert_allclose(lin.weight.grad.numpy(), G.T @ x, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(lin.bias.grad.numpy(), G.sum(0), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(xt.grad.numpy(), G @ W, rtol=1e-5, atol=1e-6)

def test_linear_batched_input_no_bias():
  lin = nn.Linear(3, 2, bias=False)
  ref = lambda x, weight: x @ weight.T
  check_layer(lin, [rnd(2, 3, 3, seed=22)], ref, ["weight"])

# ---------------- normalization layers ----------------

def test_groupnorm():
  gn = nn.GroupNorm(2, 4)
  assert gn.weight.shape == gn.bias.shape == (4,)
  np.testing.assert_array_equal(gn.weight.numpy(), np.ones(4))
  np.testing.assert_array_equal(gn.bias.numpy(), np.zeros(4))
  set_param(gn.weight, [1.0, -2.0, 0.5, 3.0])
  set_param(gn.bias, [0.1, 0.2, -0.3, 0.0])
  def ref(x, weight, bias):
    y = np_norm(x.reshape(x.shape[0], 2, -1), (2,), 1e-5).reshape(x.shape)
    return y * chan(weight, x.ndim) + chan(bias, x.ndim)
  check_layer(gn, [rnd(2, 4, 3, seed=23, low=-2, high=2)], ref, ["weight", "bias"])
  x = rnd(2, 4, 2, 2, seed=24)
  np.testing.assert_allclose(gn(Tensor(x.astype(np.float32))).numpy(), ref(x, **params_of(gn, ["weight", "bias"])), rtol=1e-5, atol=1e-5)

def test_groupnorm_no_affine_and_bad_groups():
  gn = nn.GroupNorm(3, 6, eps=1e-3, affine=False)
  assert gn.weight is None and gn.bias is None and get_parameters(gn) == []
  x = rnd(2, 6, 4, seed=25)
  np.testing.assert_allclose(gn(Tensor(x.astype(np.float32))).numpy(), np_norm(x.reshape(2, 3, 8), (2,), 1e-3).reshape(x.shape), rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError): nn.GroupNorm(3, 4)

def test_instancenorm():
  inorm = nn.InstanceNorm(3)
  assert inorm.weight.shape == inorm.bias.shape == (3,)
  set_param(inorm.weight, [2.0, 0.5, -1.0])
  set_param(inorm.bias, [0.0, 1.0, 0.25])
  ref = lambda x, weight, bias: np_norm(x, tuple(range(2, x.ndim)), 1e-5) * chan(weight, x.ndim) + chan(bias, x.ndim)
  check_layer(inorm, [rnd(2, 3, 4, seed=26)], ref, ["weight", "bias"])
  x = rnd(2, 3, 2, 3, seed=27)
  np.testing.assert_allclose(inorm(Tensor(x.astype(np.float32))).numpy(), ref(x, **params_of(inorm, ["weight", "bias"])), rtol=1e-5, atol=1e-5)
  plain = nn.InstanceNorm(3, affine=False)
  assert plain.weight is None
  np.testing.assert_allclose(plain(Tensor(x.astype(np.float32))).numpy(), np_norm(x, (2, 3), 1e-5), rtol=1e-5, atol=1e-5)

def test_layernorm_int_shape_and_gradients():
  ln = nn.LayerNorm(5)
  assert ln.weight.shape == ln.bias.shape == (5,)
  np.testing.assert_array_equal(ln.weight.numpy(), np.ones(5))
  np.testing.assert_array_equal(ln.bias.numpy(), np.zeros(5))
  set_param(ln.weight, rnd(5, seed=28, low=0.5, high=2))
  set_param(ln.bias, rnd(5, seed=29))
  ref = lambda x, weight, bias: np_norm(x, (-1,), 1e-5) * weight + bias
  check_layer(ln, [rnd(2, 3, 5, seed=30, low=-2, high=2)], ref, ["weight", "bias"])

def test_layernorm_default_params_gradients():
  ln = nn.LayerNorm(4, eps=1e-3)
  ref = lambda x, weight, bias: np_norm(x, (-1,), 1e-3) * weight + bias
  check_layer(ln, [rnd(3, 4, seed=31)], ref, ["weight", "bias"])

def test_layernorm_tuple_shape():
  ln = nn.LayerNorm((3, 4))
  assert ln.weight.shape == ln.bias.shape == (3, 4)
  set_param(ln.weight, rnd(3, 4, seed=32, low=0.5, high=1.5))
  set_param(ln.bias, rnd(3, 4, seed=33))
  ref = lambda x, weight, bias: np_norm(x, (-2, -1), 1e-5) * weight + bias
  check_layer(ln, [rnd(2, 3, 4, seed=34)], ref, ["weight", "bias"])

def test_layernorm_no_affine():
  ln = nn.LayerNorm([2, 3], elementwise_affine=False)
  assert ln.weight is None and ln.bias is None and get_parameters(ln) == []
  x = rnd(4, 2, 3, seed=35)
  np.testing.assert_allclose(ln(Tensor(x.astype(np.float32))).numpy(), np_norm(x, (-2, -1), 1e-5), rtol=1e-5, atol=1e-5)

def test_layernorm_shape_mismatch():
  with pytest.raises(ValueError): nn.LayerNorm(4)(Tensor.ones(2, 5))
  with pytest.raises(ValueError): nn.LayerNorm((3, 4))(Tensor.ones(2, 4, 3))

def test_layernorm2d():
  ln = nn.LayerNorm2d(3)
  assert ln.weight.shape == (3,)
  set_param(ln.weight, [1.0, 2.0, -0.5])
  set_param(ln.bias, [0.5, 0.0, 0.1])
  ref = lambda x, weight, bias: np_norm(x, (1,), 1e-5) * chan(weight, 4) + chan(bias, 4)
  out, = check_layer(ln, [rnd(2, 3, 2, 2, seed=36)], ref, ["weight", "bias"])
  assert out.shape == (2, 3, 2, 2)
  with pytest.raises(ValueError): ln(Tensor.ones(1, 4, 2, 2))

def test_rmsnorm():
  rn = nn.RMSNorm(4)
  assert rn.weight.shape == (4,)
  np.testing.assert_array_equal(rn.weight.numpy(), np.ones(4))
  set_param(rn.weight, [0.5, 1.0, 2.0, -1.0])
  ref = lambda x, weight: x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6) * weight
  check_layer(rn, [rnd(2, 3, 4, seed=37)], ref, ["weight"])
  plain = nn.RMSNorm(4, eps=1e-2, elementwise_affine=False)
  assert plain.weight is None
  x = rnd(3, 4, seed=38)
  np.testing.assert_allclose(plain(Tensor(x.astype(np.float32))).numpy(), x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-2), rtol=1e-5, atol=1e-6)

# ---------------- Embedding ----------------

def test_embedding_init():
  emb = nn.Embedding(20, 8)
  assert emb.weight.shape == (20, 8)
  assert_uniform_init(emb.weight, math.sqrt(6 / (20 + 8)))

@pytest.mark.parametrize("idx", [np.array([3, 0, 3, 9], dtype=np.int32), np.array([[1, 2, 2], [9, 0, 5]], dtype=np.int64),
                                 np.array([[[4]], [[4]]], dtype=np.int32)])
def test_embedding_lookup_and_gradient(idx):
  skip_refused(idx.dtype)
  emb = nn.Embedding(10, 3)
  W = emb.weight.numpy()
  out = emb(Tensor(idx))
  assert out.shape == (*idx.shape, 3)
  np.testing.assert_array_equal(out.numpy(), W[idx])
  G = rnd(*idx.shape, 3, seed=39)
  (out * Tensor(G.astype(np.float32))).sum().backward()
  expected = np.zeros((10, 3))
  np.add.at(expected, idx, G)  # repeated indices accumulate
  np.testing.assert_allclose(emb.weight.grad.numpy(), expected, rtol=1e-6, atol=1e-6)

def test_embedding_rejects_float_indices():
  emb = nn.Embedding(5, 2)
  with pytest.raises(TypeError): emb(Tensor([1.0, 2.0]))
  with pytest.raises(TypeError): emb(Tensor([0.0], dtype="float16"))

# ---------------- LSTMCell ----------------

def test_lstmcell_shapes_and_init():
  cell = nn.LSTMCell(5, 6)
  assert cell.weight_ih.shape == (24, 5) and cell.weight_hh.shape == (24, 6)
  assert cell.bias_ih.shape == cell.bias_hh.shape == (24,)
  bound = 1 / math.sqrt(6)
  assert_uniform_init(cell.weight_ih, bound)
  assert_uniform_init(cell.weight_hh, bound)
  for b in (cell.bias_ih, cell.bias_hh): assert b.requires_grad is True and np.all(np.abs(b.numpy()) <= bound)
  nb = nn.LSTMCell(2, 3, bias=False)
  assert nb.bias_ih is None and nb.bias_hh is None

def test_lstmcell_with_state():
  cell = nn.LSTMCell(3, 2)
  names = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
  params = params_of(cell, names)
  # input gradients of x, h and c
  check_layer(lambda x, h, c: cell(x, (h, c)), [rnd(2, 3, seed=40, low=-2, high=2), rnd(2, 2, seed=41), rnd(2, 2, seed=42)],
              lambda x, h, c: np_lstm(x, h, c, **params), [])
  # parameter gradients
  for n in names: getattr(cell, n).grad = None
  x, h, c = rnd(2, 3, seed=43), rnd(2, 2, seed=44), rnd(2, 2, seed=45)
  h2, c2 = cell(Tensor(x.astype(np.float32)), (Tensor(h.astype(np.float32)), Tensor(c.astype(np.float32))))
  rh, rc = np_lstm(x, h, c, **params)
  np.testing.assert_allclose(h2.numpy(), rh, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(c2.numpy(), rc, rtol=1e-5, atol=1e-6)
  Gh, Gc = rnd(2, 2, seed=46, low=0.5, high=1.5), rnd(2, 2, seed=47, low=0.5, high=1.5)
  ((h2 * Tensor(Gh.astype(np.float32))).sum() + (c2 * Tensor(Gc.astype(np.float32))).sum()).backward()
  def scalar(name, a):
    hh, cc = np_lstm(x, h, c, **{**params, name: a})
    return (hh * Gh).sum() + (cc * Gc).sum()
  for n in names:
    g = getattr(cell, n).grad
    assert g is not None, n
    np.testing.assert_allclose(g.numpy(), fd_grad(lambda a: scalar(n, a), params[n]), rtol=1e-3, atol=1e-5, err_msg=n)

def test_lstmcell_without_state():
  cell = nn.LSTMCell(4, 3)
  p = params_of(cell, ["weight_ih", "weight_hh", "bias_ih", "bias_hh"])
  x = rnd(2, 4, seed=48, low=-2, high=2)
  h, c = cell(Tensor(x.astype(np.float32)))
  rh, rc = np_lstm(x, np.zeros((2, 3)), np.zeros((2, 3)), **p)
  assert h.shape == c.shape == (2, 3)
  np.testing.assert_allclose(h.numpy(), rh, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(c.numpy(), rc, rtol=1e-5, atol=1e-6)
  # a second step feeding the state back
  h2, c2 = cell(Tensor(x[::-1].copy().astype(np.float32)), (h, c))
  rh2, rc2 = np_lstm(x[::-1], rh, rc, **p)
  np.testing.assert_allclose(h2.numpy(), rh2, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(c2.numpy(), rc2, rtol=1e-5, atol=1e-6)
  all_params_get_grads(cell, (h2, c2))

def test_lstmcell_gate_order():
  """With zero weights the gates are the biases: only the 'cell' block (third) feeds tanh, the 'output' block (fourth) gates h."""
  cell = nn.LSTMCell(1, 1)
  set_param(cell.weight_ih, np.zeros((4, 1)))
  set_param(cell.weight_hh, np.zeros((4, 1)))
  set_param(cell.bias_hh, np.zeros(4))
  i, f, g, o = 0.3, -0.7, 1.1, 0.4
  set_param(cell.bias_ih, [i, f, g, o])
  c0 = 0.5
  h, c = cell(Tensor([[0.0]]), (Tensor([[0.0]]), Tensor([[c0]])))
  ec = sigmoid(f) * c0 + sigmoid(i) * np.tanh(g)
  np.testing.assert_allclose(c.numpy(), [[ec]], rtol=1e-5)
  np.testing.assert_allclose(h.numpy(), [[sigmoid(o) * np.tanh(ec)]], rtol=1e-5)

def test_lstmcell_no_bias():
  cell = nn.LSTMCell(2, 2, bias=False)
  p = params_of(cell, ["weight_ih", "weight_hh"])
  x, h, c = rnd(3, 2, seed=49), rnd(3, 2, seed=50), rnd(3, 2, seed=51)
  h2, c2 = cell(Tensor(x.astype(np.float32)), (Tensor(h.astype(np.float32)), Tensor(c.astype(np.float32))))
  rh, rc = np_lstm(x, h, c, **p)
  np.testing.assert_allclose(h2.numpy(), rh, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(c2.numpy(), rc, rtol=1e-5, atol=1e-6)

# ---------------- every layer: all parameters get gradients ----------------

@pytest.mark.parametrize("make,shape", [
  (lambda: nn.BatchNorm2d(2), (2, 2, 2, 2)),
  (lambda: nn.Conv2d(2, 2, 2, groups=2), (1, 2, 3, 3)),
  (lambda: nn.Conv1d(2, 2, 2), (1, 2, 3)),
  (lambda: nn.ConvTranspose2d(2, 2, 2), (1, 2, 2, 2)),
  (lambda: nn.ConvTranspose1d(2, 2, 2), (1, 2, 3)),
  (lambda: nn.Linear(3, 2), (2, 3)),
  (lambda: nn.GroupNorm(1, 2), (2, 2, 3)),
  (lambda: nn.InstanceNorm(2), (2, 2, 3)),
  (lambda: nn.LayerNorm(3), (2, 3)),
  (lambda: nn.LayerNorm2d(2), (1, 2, 2, 2)),
  (lambda: nn.RMSNorm(3), (2, 3)),
  (lambda: nn.LSTMCell(3, 2), (2, 3)),
])
def test_all_parameters_get_gradients(make, shape):
  layer = make()
  x = Tensor(rnd(*shape, seed=52).astype(np.float32))
  with Context(TRAINING=1): all_params_get_grads(layer, layer(x))

def test_embedding_parameter_gets_gradient():
  emb = nn.Embedding(4, 2)
  all_params_get_grads(emb, emb(Tensor([[0, 3], [3, 3]])))
  assert emb.weight.grad.numpy()[1:3].tolist() == [[0, 0], [0, 0]]

# ---------------- state dict ----------------

class Block:
  def __init__(self):
    self.layers = [nn.Linear(2, 3), nn.Linear(3, 1, bias=False)]
    self.norm = nn.LayerNorm(3)
    self.convs = (nn.Conv2d(1, 1, 1),)
    self.extra = {"emb": nn.Embedding(4, 2), "bn": nn.BatchNorm(3)}
    self.scale, self.name = 2.0, "block"

def test_state_dict_keys():
  m = Block()
  sd = get_state_dict(m)
  assert set(sd) == {"layers.0.weight", "layers.0.bias", "layers.1.weight", "norm.weight", "norm.bias", "convs.0.weight", "convs.0.bias",
                     "extra.emb.weight", "extra.bn.weight", "extra.bn.bias", "extra.bn.running_mean", "extra.bn.running_var",
                     "extra.bn.num_batches_tracked"}
  assert sd["layers.0.weight"] is m.layers[0].weight and sd["extra.bn.running_var"] is m.extra["bn"].running_var
  assert sd["layers.1.weight"].shape == (1, 3)
  params = get_parameters(m)
  assert len(params) == len(sd) and all(p is q for p, q in zip(params, sd.values()))
  assert set(get_state_dict(nn.LSTMCell(2, 2))) == {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}
  assert set(get_state_dict([nn.RMSNorm(2), nn.Conv1d(1, 1, 1, bias=False)])) == {"0.weight", "1.weight"}

# ---------------- cross-checks against torch (only where torch is installed) ----------------

def _t(a): return Tensor(np.asarray(a, dtype=np.float32))

def test_torch_crosscheck_layers():
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(60)
  x = rng.uniform(-1, 1, (2, 4, 5, 5)).astype(np.float32)
  for kw in [{"stride": 2, "padding": 1, "groups": 2}, {"padding": "same", "dilation": 2}]:
    ours = nn.Conv2d(4, 2, 3, **kw)
    ref = torch.nn.Conv2d(4, 2, 3, **kw)
    with torch.no_grad(): ref.weight.copy_(torch.from_numpy(ours.weight.numpy())); ref.bias.copy_(torch.from_numpy(ours.bias.numpy()))
    np.testing.assert_allclose(ours(_t(x)).numpy(), ref(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
  ours = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1, groups=2)
  ref = torch.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1, groups=2)
  with torch.no_grad(): ref.weight.copy_(torch.from_numpy(ours.weight.numpy())); ref.bias.copy_(torch.from_numpy(ours.bias.numpy()))
  np.testing.assert_allclose(ours(_t(x)).numpy(), ref(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
  ours, ref = nn.LSTMCell(5, 3), torch.nn.LSTMCell(5, 3)
  with torch.no_grad():
    for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"): getattr(ref, n).copy_(torch.from_numpy(getattr(ours, n).numpy()))
  xi, h, c = (rng.uniform(-1, 1, s).astype(np.float32) for s in [(2, 5), (2, 3), (2, 3)])
  oh, oc = ours(_t(xi), (_t(h), _t(c)))
  rh, rc = ref(torch.from_numpy(xi), (torch.from_numpy(h), torch.from_numpy(c)))
  np.testing.assert_allclose(oh.numpy(), rh.detach().numpy(), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(oc.numpy(), rc.detach().numpy(), rtol=1e-5, atol=1e-6)
  # BatchNorm: two training steps then eval
  ours, ref = nn.BatchNorm2d(4, momentum=0.3), torch.nn.BatchNorm2d(4, momentum=0.3)
  for i in range(2):
    xb = rng.uniform(-2, 3, (3, 4, 2, 2)).astype(np.float32)
    with Context(TRAINING=1): o = ours(_t(xb)).numpy()
    ref.train()
    np.testing.assert_allclose(o, ref(torch.from_numpy(xb)).detach().numpy(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ours.running_mean.numpy(), ref.running_mean.numpy(), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(ours.running_var.numpy(), ref.running_var.numpy(), rtol=1e-5, atol=1e-6)
  ref.eval()
  np.testing.assert_allclose(ours(_t(x)).numpy(), ref(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
  ours, ref = nn.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4)
  np.testing.assert_allclose(ours(_t(x)).numpy(), ref(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
