"""Loss functions against numpy references written from the definitions of torch.nn.functional (forward and gradients)."""
import numpy as np
import pytest
from tg import Tensor, dtypes
from tests.tg.opcheck import check_op, needs

NUMPY_LABELS = needs(dtypes.int64, why="the labels are numpy's int64 arrays")

def np_log_softmax(x, axis=-1):
  m = x.max(axis, keepdims=True)
  return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))

def np_reduce(loss, reduction):
  return {"none": lambda: loss, "sum": lambda: loss.sum(), "mean": lambda: loss.mean()}[reduction]()

def np_ce_index(logits, y, axis=1, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
  """cross entropy with class indices: -((1 - ls) * logp[y] + ls / C * sum_c logp[c]); ignored entries count nothing;
  'mean' divides by the number of counted entries."""
  logp = np.moveaxis(np_log_softmax(logits, axis), axis, -1)   # (..., C)
  c = logp.shape[-1]
  keep = y != ignore_index
  picked = np.take_along_axis(logp, np.where(keep, y, 0)[..., None], -1)[..., 0]
  loss = np.where(keep, -(1 - label_smoothing) * picked - label_smoothing / c * logp.sum(-1), 0.0)
  if reduction == "mean": return loss.sum() / keep.sum()
  return np_reduce(loss, reduction)

def labels(shape, classes, seed=0, ignore=None, ignore_value=-100):
  y = np.random.default_rng(seed).integers(0, classes, shape)
  if ignore is not None: y[ignore] = ignore_value
  return y

def logits(shape, seed=1): return np.random.default_rng(seed).uniform(-3, 3, shape)

# ---------------- sparse_categorical_crossentropy ----------------
@NUMPY_LABELS
def test_sparse_categorical_crossentropy():
  check_op(lambda x, y: x.sparse_categorical_crossentropy(y), lambda x, y: np_ce_index(x, y, axis=-1, ignore_index=-1),
           inputs=[logits((5, 4)), labels(5, 4)])

@NUMPY_LABELS
def test_sparse_categorical_crossentropy_label_smoothing():
  check_op(lambda x, y: x.sparse_categorical_crossentropy(y, label_smoothing=0.1),
           lambda x, y: np_ce_index(x, y, axis=-1, ignore_index=-1, label_smoothing=0.1), inputs=[logits((5, 4)), labels(5, 4, seed=2)])

@NUMPY_LABELS
def test_sparse_categorical_crossentropy_ignore_index():
  y = labels(6, 3, seed=3, ignore=[1, 4], ignore_value=2)  # class 2 is ignored
  check_op(lambda x, y: x.sparse_categorical_crossentropy(y, ignore_index=2),
           lambda x, y: np_ce_index(x, y, axis=-1, ignore_index=2), inputs=[logits((6, 3)), y])
  y = labels(6, 3, seed=4, ignore=[0, 5], ignore_value=-1)  # the default ignore_index
  check_op(lambda x, y: x.sparse_categorical_crossentropy(y, label_smoothing=0.2),
           lambda x, y: np_ce_index(x, y, axis=-1, ignore_index=-1, label_smoothing=0.2), inputs=[logits((6, 3)), y])

@NUMPY_LABELS
@pytest.mark.parametrize("reduction", ["sum", "none"])
def test_sparse_categorical_crossentropy_reduction(reduction):
  y = labels((2, 3), 5, seed=5, ignore=(0, 1), ignore_value=-1)
  check_op(lambda x, y: x.sparse_categorical_crossentropy(y, reduction=reduction),
           lambda x, y: np_ce_index(x, y, axis=-1, ignore_index=-1, reduction=reduction), inputs=[logits((2, 3, 5)), y])

def test_sparse_categorical_crossentropy_bad_labels():
  with pytest.raises(TypeError): Tensor.zeros(3, 4).sparse_categorical_crossentropy(Tensor.zeros(3))
  with pytest.raises(ValueError): Tensor.zeros(3, 4).sparse_categorical_crossentropy(Tensor(np.zeros(4, np.int32)))

# ---------------- cross_entropy ----------------
@NUMPY_LABELS
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_cross_entropy_index_2d(reduction, label_smoothing):
  check_op(lambda x, y: x.cross_entropy(y, reduction=reduction, label_smoothing=label_smoothing),
           lambda x, y: np_ce_index(x, y, label_smoothing=label_smoothing, reduction=reduction), inputs=[logits((4, 5)), labels(4, 5, seed=6)])

@NUMPY_LABELS
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_index_4d(reduction):
  # (N, C, H, W) logits with (N, H, W) targets; -100 is ignored by default
  y = labels((2, 3, 2), 3, seed=7, ignore=(1, 0, 1))
  check_op(lambda x, y: x.cross_entropy(y, reduction=reduction, label_smoothing=0.05),
           lambda x, y: np_ce_index(x, y, label_smoothing=0.05, reduction=reduction), inputs=[logits((2, 3, 3, 2)), y])

@NUMPY_LABELS
def test_cross_entropy_index_1d():
  # a single sample: (C,) logits and a 0-d target
  check_op(lambda x, y: x.cross_entropy(y), lambda x, y: -np_log_softmax(x)[y], inputs=[logits((5,)), np.array(3)])

def np_ce_probs(x, p, axis=1, label_smoothing=0.0, reduction="mean"):
  c = x.shape[axis]
  return np_reduce(-(np_log_softmax(x, axis) * (p * (1 - label_smoothing) + label_smoothing / c)).sum(axis), reduction)

def probs(shape, axis=1, seed=8):
  e = np.random.default_rng(seed).uniform(0.1, 1, shape)
  return e / e.sum(axis, keepdims=True)

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
def test_cross_entropy_probabilities(reduction, label_smoothing):
  check_op(lambda x, p: x.cross_entropy(p, reduction=reduction, label_smoothing=label_smoothing),
           lambda x, p: np_ce_probs(x, p, label_smoothing=label_smoothing, reduction=reduction), inputs=[logits((3, 4)), probs((3, 4))])

def test_cross_entropy_probabilities_4d():
  check_op(lambda x, p: x.cross_entropy(p), lambda x, p: np_ce_probs(x, p), inputs=[logits((2, 3, 2, 2)), probs((2, 3, 2, 2))])

def test_cross_entropy_bad_reduction():
  with pytest.raises(ValueError): Tensor.zeros(2, 3).cross_entropy(Tensor.zeros(2, 3), reduction="avg")
  with pytest.raises(RuntimeError, match=r"\(2, 4\)"): Tensor.zeros(2, 3).cross_entropy(Tensor.zeros(2, 4))  # PyTorch's type

# ---------------- nll_loss ----------------
@NUMPY_LABELS
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(reduction):
  lp = np_log_softmax(logits((5, 4), seed=9))
  check_op(lambda x, y: x.nll_loss(y, reduction=reduction), lambda x, y: np_reduce(-x[np.arange(5), y], reduction), inputs=[lp, labels(5, 4, seed=10)])

def np_nll(x, y, weight=None, ignore_index=None, reduction="mean"):
  """-weight[y] * x[n, y, ...]; 'mean' divides by the summed weights of the entries that are not ignored."""
  c = x.shape[1]
  w = np.ones(c) if weight is None else weight
  keep = np.ones(y.shape, bool) if ignore_index is None else y != ignore_index
  safe = np.where(keep, y, 0)
  picked = np.take_along_axis(np.moveaxis(x, 1, -1), safe[..., None], -1)[..., 0]
  wy = np.where(keep, w[safe], 0.0)
  loss = -wy * picked
  return loss.sum() / wy.sum() if reduction == "mean" else np_reduce(loss, reduction)

@NUMPY_LABELS
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_weight_ignore_index(reduction):
  y = labels(6, 4, seed=11)
  y[[1, 3]] = 2
  check_op(lambda x, y, w: x.nll_loss(y, weight=w, ignore_index=2, reduction=reduction),
           lambda x, y, w: np_nll(x, y, w, 2, reduction), inputs=[logits((6, 4), seed=12), y, np.array([0.5, 2.0, 1.0, 1.5])])

@NUMPY_LABELS
def test_nll_loss_weight_3d():
  y = labels((2, 3), 4, seed=13)
  y[0, 1] = -100
  check_op(lambda x, y, w: x.nll_loss(y, weight=w, ignore_index=-100), lambda x, y, w: np_nll(x, y, w, -100),
           inputs=[logits((2, 4, 3), seed=14), y, np.array([1.0, 0.25, 3.0, 0.5])])

# ---------------- binary cross entropy ----------------
def np_bce(p, y, reduction="mean"):
  return np_reduce(-(y * np.maximum(np.log(p), -100) + (1 - y) * np.maximum(np.log(1 - p), -100)), reduction)

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_crossentropy(reduction):
  rng = np.random.default_rng(15)
  p, y = rng.uniform(0.05, 0.95, (3, 4)), (rng.uniform(0, 1, (3, 4)) > 0.5).astype(np.float64)
  check_op(lambda p, y: p.binary_crossentropy(y, reduction=reduction), lambda p, y: np_bce(p, y, reduction), inputs=[p, y])

def test_binary_crossentropy_soft_targets():
  rng = np.random.default_rng(16)
  check_op(lambda p, y: p.binary_crossentropy(y), lambda p, y: np_bce(p, y), inputs=[rng.uniform(0.05, 0.95, 6), rng.uniform(0, 1, 6)])

def test_binary_crossentropy_clamps_log():
  # log(0) is clamped at -100 like torch
  out = Tensor(np.array([0.0, 1.0], np.float32)).binary_crossentropy(Tensor(np.array([1.0, 0.0], np.float32)), reduction="none")
  np.testing.assert_allclose(out.numpy(), [100.0, 100.0])

def np_sigmoid(x): return 1 / (1 + np.exp(-x))

def np_bce_logits(x, y, pos_weight=None, reduction="mean"):
  pw = 1.0 if pos_weight is None else pos_weight
  return np_reduce(-(pw * y * np.log(np_sigmoid(x)) + (1 - y) * np.log(1 - np_sigmoid(x))), reduction)

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_crossentropy_logits(reduction):
  rng = np.random.default_rng(17)
  x, y = rng.uniform(-4, 4, (3, 4)), (rng.uniform(0, 1, (3, 4)) > 0.5).astype(np.float64)
  check_op(lambda x, y: x.binary_crossentropy_logits(y, reduction=reduction), lambda x, y: np_bce_logits(x, y, reduction=reduction), inputs=[x, y])

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_crossentropy_logits_pos_weight(reduction):
  rng = np.random.default_rng(18)
  x, y, pw = rng.uniform(-4, 4, (3, 4)), rng.uniform(0, 1, (3, 4)), np.array([0.5, 1.0, 2.0, 3.0])
  check_op(lambda x, y, w: x.binary_crossentropy_logits(y, reduction=reduction, pos_weight=w),
           lambda x, y, w: np_bce_logits(x, y, w, reduction), inputs=[x, y, pw])

def test_binary_crossentropy_logits_large_logits_stable():
  x = Tensor(np.array([-200.0, 200.0, 0.0], np.float32))
  out = x.binary_crossentropy_logits(Tensor(np.array([1.0, 0.0, 1.0], np.float32)), reduction="none").numpy()
  np.testing.assert_allclose(out, [200.0, 200.0, np.log(2)], rtol=1e-6)

# ---------------- optional comparisons against torch ----------------
def test_torch_losses():
  torch = pytest.importorskip("torch")
  F = torch.nn.functional
  rng = np.random.default_rng(19)
  x = rng.uniform(-3, 3, (4, 5, 2)).astype(np.float32)
  y = rng.integers(0, 5, (4, 2))
  y[1, 1] = -100
  ty = Tensor(y.astype(np.int32))  # class indices in int32, which every device holds (PyTorch takes int64)
  for red in ("mean", "sum", "none"):
    for ls in (0.0, 0.15):
      ref = F.cross_entropy(torch.tensor(x), torch.tensor(y), reduction=red, label_smoothing=ls).numpy()
      np.testing.assert_allclose(Tensor(x).cross_entropy(ty, reduction=red, label_smoothing=ls).numpy(), ref, rtol=1e-5, atol=1e-6)
  p = rng.uniform(0, 1, (4, 5, 2)).astype(np.float32)
  ref = F.cross_entropy(torch.tensor(x), torch.tensor(p), label_smoothing=0.1).numpy()
  np.testing.assert_allclose(Tensor(x).cross_entropy(Tensor(p), label_smoothing=0.1).numpy(), ref, rtol=1e-5, atol=1e-6)
  w = rng.uniform(0.5, 2, 5).astype(np.float32)
  lp = F.log_softmax(torch.tensor(x), 1)
  y2 = np.where(y == -100, 3, y)
  for red in ("mean", "sum", "none"):
    ref = F.nll_loss(lp, torch.tensor(y2), weight=torch.tensor(w), ignore_index=3, reduction=red).numpy()
    np.testing.assert_allclose(Tensor(lp.numpy()).nll_loss(Tensor(y2.astype(np.int32)), weight=Tensor(w), ignore_index=3, reduction=red).numpy(), ref, rtol=1e-5, atol=1e-6)
  z, t, pw = rng.uniform(-5, 5, (3, 4)).astype(np.float32), rng.uniform(0, 1, (3, 4)).astype(np.float32), rng.uniform(0.5, 3, 4).astype(np.float32)
  ref = F.binary_cross_entropy_with_logits(torch.tensor(z), torch.tensor(t), pos_weight=torch.tensor(pw)).numpy()
  np.testing.assert_allclose(Tensor(z).binary_crossentropy_logits(Tensor(t), pos_weight=Tensor(pw)).numpy(), ref, rtol=1e-5, atol=1e-6)
  sz = np_sigmoid(z).astype(np.float32)
  ref = F.binary_cross_entropy(torch.tensor(sz), torch.tensor(t)).numpy()
  np.testing.assert_allclose(Tensor(sz).binary_crossentropy(Tensor(t)).numpy(), ref, rtol=1e-5, atol=1e-6)

def test_labels_outside_the_classes_give_nan_not_zero():
  logits = Tensor([[1., 2., 3.], [1., 2., 3.]])
  assert np.isnan(logits.sparse_categorical_crossentropy(Tensor([5, 0])).item())
  assert np.isnan(logits.cross_entropy(Tensor([0, -3])).item())
  assert np.isnan(logits.log_softmax().nll_loss(Tensor([3, 0])).item())
  assert not np.isnan(logits.cross_entropy(Tensor([-100, 1])).item())  # the ignore index stays ignored
  assert not np.isnan(logits.log_softmax().nll_loss(Tensor([-100, 1]), ignore_index=-100).item())

@NUMPY_LABELS
def test_losses_of_huge_logits_are_exact_with_finite_gradients():
  x = np.array([[1e4, -1e4, 0.0], [-1e4, 1e4, 1e4 - 1], [30.0, -30.0, 1e30]], np.float32)
  y = np.array([0, 2, 1])
  t = Tensor(x, requires_grad=True)
  loss = t.cross_entropy(Tensor(y))
  loss.backward()
  np.testing.assert_allclose(loss.item(), np_ce_index(x.astype(np.float64), y), rtol=1e-6)
  p = np.exp(np_log_softmax(x.astype(np.float64)))
  np.testing.assert_allclose(t.grad.numpy(), (p - np.eye(3)[y]) / 3, rtol=1e-5, atol=1e-7)  # d mean CE = (softmax - onehot) / N
  z, target = Tensor(np.array([1e4, -1e4, 1e4, -1e4], np.float32), requires_grad=True), np.array([1.0, 0.0, 0.0, 1.0])
  bce = z.binary_crossentropy_logits(Tensor(target.astype(np.float32)), reduction="sum")
  bce.backward()
  np.testing.assert_allclose(bce.item(), 2e4, rtol=1e-6)
  np.testing.assert_allclose(z.grad.numpy(), np.array([1.0, 0.0, 1.0, 0.0]) - target, atol=1e-7)  # sigmoid(z) - y, sigmoid saturated

def test_uint8_labels_work_with_negative_ignore_indices():
  logits = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
  labels = np.array([0, 2, 1, 2], dtype=np.uint8)
  ref = -np.mean(logits[np.arange(4), labels] - np.log(np.exp(logits).sum(1)))
  np.testing.assert_allclose(Tensor(logits).sparse_categorical_crossentropy(Tensor(labels)).item(), ref, rtol=1e-5)
  np.testing.assert_allclose(Tensor(logits).cross_entropy(Tensor(labels)).item(), ref, rtol=1e-5)
  np.testing.assert_allclose(Tensor(logits).log_softmax().nll_loss(Tensor(labels), ignore_index=-100).item(), ref, rtol=1e-5)
