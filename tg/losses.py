"""Loss functions (reduction: 'mean', 'sum' or 'none')."""
from __future__ import annotations
from typing import TYPE_CHECKING
from ir.dtype import dtypes

if TYPE_CHECKING: from tg.tensor import Tensor

def _reduce(loss: Tensor, reduction: str) -> Tensor:
  if reduction == "none": return loss
  if reduction == "sum": return loss.sum()
  if reduction == "mean": return loss.mean()
  raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")

def _signed_labels(Y: Tensor) -> Tensor:
  """Labels in a signed type that holds them and any ignore index (uint8 MNIST labels compared with -1 or -100)."""
  return Y if Y.dtype in (dtypes.int32, dtypes.int64) else Y.cast(dtypes.int64 if Y.dtype.itemsize >= 4 else dtypes.int32)

def _nan_outside_classes(loss: Tensor, Y: Tensor, classes: int) -> Tensor:
  return ((Y < 0) | (Y >= classes)).where(float("nan"), loss)

class LossMixin:
  __slots__ = ()

  def sparse_categorical_crossentropy(self, Y: Tensor, ignore_index: int = -1, label_smoothing: float = 0.0, reduction: str = "mean") -> Tensor:
    """self: logits (..., classes); Y: integer class indices (...); entries equal to ignore_index don't count. A label
    outside [0, classes) makes its loss NaN: PyTorch raises there, which needs the labels read back (no laziness,
    no TinyJit), and a silent 0 would hide the bug."""
    if not dtypes.is_int(Y.dtype): raise TypeError(f"class indices must be integers, got {Y.dtype}")
    if Y.shape != self.shape[:-1]: raise ValueError(f"labels of shape {Y.shape} don't match logits {self.shape}")
    Y = _signed_labels(Y)
    x = self._float()
    top, log_sum = x._max_and_log_sum(-1)
    # the log-probability of the label read where it is (one element a row), not picked out of every class's
    picked = (x.gather(-1, Y.unsqueeze(-1)) - top - log_sum).squeeze(-1)
    loss = -picked if label_smoothing == 0 else -(1 - label_smoothing) * picked - label_smoothing * x.log_softmax(-1).mean(-1)
    keep = Y != ignore_index
    loss = keep.where(_nan_outside_classes(loss, Y, self.shape[-1]), 0)
    if reduction == "mean": return loss.sum() / keep.sum().maximum(1).cast(loss.dtype)
    return _reduce(loss, reduction)

  def cross_entropy(self, Y: Tensor, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """self: logits with classes on axis 1 (or 0 for 1-d); Y: class indices or class probabilities."""
    axis = 1 if self.ndim > 1 else 0
    if dtypes.is_int(Y.dtype):
      logits = self.permute(*[i for i in range(self.ndim) if i != axis], axis)  # classes last
      return logits.sparse_categorical_crossentropy(Y, ignore_index=-100, label_smoothing=label_smoothing, reduction=reduction)
    if Y.shape != self.shape: raise RuntimeError(f"class probabilities of shape {Y.shape} don't match logits {self.shape}")  # PyTorch's type
    n = self.shape[axis]
    target = Y * (1 - label_smoothing) + label_smoothing / n
    return _reduce(-(self.log_softmax(axis) * target).sum(axis), reduction)

  def nll_loss(self, Y: Tensor, weight: Tensor | None = None, ignore_index: int | None = None, reduction: str = "mean") -> Tensor:
    """self: log-probabilities with classes on axis 1 (or 0 for 1-d); Y: class indices (outside the classes: NaN loss)."""
    axis = 1 if self.ndim > 1 else 0
    lp = self.permute(*[i for i in range(self.ndim) if i != axis], axis)  # classes last
    Y = _signed_labels(Y)
    onehot = Y._onehot(lp.shape[-1])
    picked = onehot.where(lp, 0).sum(-1)
    w = onehot.where(weight, 0).sum(-1) if weight is not None else picked.ones_like()
    if ignore_index is not None: w = (Y != ignore_index).where(w, 0)
    loss = _nan_outside_classes(-picked * w, Y, lp.shape[-1])
    if ignore_index is not None: loss = (Y != ignore_index).where(loss, 0)
    if reduction == "mean": return loss.sum() / w.sum()
    return _reduce(loss, reduction)

  def binary_crossentropy(self, Y: Tensor, reduction: str = "mean") -> Tensor:
    """self: probabilities; like torch, each log is clamped at -100."""
    return _reduce(-(Y * self.log().maximum(-100) + (1 - Y) * (1 - self).log().maximum(-100)), reduction)

  def binary_crossentropy_logits(self, Y: Tensor, reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    """self: logits; computed stably as (1-y)x + (1+(w-1)y) (log(1+e^-|x|) + max(-x, 0))."""
    log_w = 1 + (pos_weight - 1) * Y if pos_weight is not None else 1
    return _reduce((1 - Y) * self + log_w * ((-self.abs()).exp().log1p() + (-self).relu()), reduction)
