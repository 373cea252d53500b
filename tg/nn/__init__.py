"""Neural-network layers: plain classes whose parameters are Tensor attributes and whose `__call__` is the forward
pass. Parameters require grad; BatchNorm's running statistics don't (optimizers keep them realized as buffers)."""
from __future__ import annotations
import math
from ir.dtype import dtypes
from ir.helpers import prod
from ir.switches import TRAINING
from tg.tensor import Tensor
from tg.nn import datasets, optim, state  # noqa: F401  (tg.nn.optim etc. after `from tg import nn`)

def _uniform(shape, bound: float) -> Tensor: return Tensor.uniform(*shape, low=-bound, high=bound).requires_grad_(True)
def _tuple(x, n: int) -> tuple[int, ...]: return (x,) * n if isinstance(x, int) else tuple(x)

class BatchNorm:
  """Normalizes over every axis but 1 (channels); batch statistics and running-stat updates while TRAINING."""
  def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True, momentum: float = 0.1):
    self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
    self.weight: Tensor | None = Tensor.ones(sz, requires_grad=True) if affine else None
    self.bias: Tensor | None = Tensor.zeros(sz, requires_grad=True) if affine else None
    self.num_batches_tracked = Tensor.zeros(1, dtype=dtypes.int64, requires_grad=False)
    if track_running_stats: self.running_mean, self.running_var = Tensor.zeros(sz, requires_grad=False), Tensor.ones(sz, requires_grad=False)

  def calc_stats(self, x: Tensor) -> tuple[Tensor, Tensor]:
    axes = tuple(a for a in range(x.ndim) if a != 1)
    mean = x.mean(axes)
    # var's gradient through mean is 2*mean(x - mean) = 0, so it is left out rather than computed as one more sum
    var = ((x - mean.detach().reshape(1, -1, *[1] * (x.ndim - 2))) ** 2).mean(axes)
    return mean, var

  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2: raise ValueError(f"BatchNorm needs (batch, channels, ...) input, got shape {x.shape}")
    use_batch = TRAINING or not self.track_running_stats
    if use_batch:
      mean, var = self.calc_stats(x)
      if TRAINING and self.track_running_stats:
        n = prod(x.shape) // x.shape[1]
        self.running_mean.assign((1 - self.momentum) * self.running_mean + self.momentum * mean.detach())
        self.running_var.assign((1 - self.momentum) * self.running_var + self.momentum * var.detach() * (n / max(n - 1, 1)))
        self.num_batches_tracked.assign(self.num_batches_tracked + 1)
    else: mean, var = self.running_mean, self.running_var
    return x.batchnorm(self.weight, self.bias, mean, (var + self.eps).rsqrt())
BatchNorm2d = BatchNorm3d = BatchNorm1d = BatchNorm

class Conv2d:
  """N-d convolution (N = len(kernel_size)); weight and bias uniform in +-1/sqrt(in_channels/groups * prod(kernel))."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1, bias: bool = True):
    self.kernel_size = _tuple(kernel_size, 2)
    if in_channels % groups or out_channels % groups: raise ValueError(f"channels {in_channels}->{out_channels} must be divisible by groups={groups}")
    self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
    bound = 1 / math.sqrt(in_channels // groups * prod(self.kernel_size))
    self.weight = _uniform((out_channels, in_channels // groups, *self.kernel_size), bound)
    self.bias: Tensor | None = _uniform((out_channels,), bound) if bias else None
  def __call__(self, x: Tensor) -> Tensor:
    return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation, padding=self.padding)

def Conv1d(in_channels: int, out_channels: int, kernel_size: int, stride=1, padding=0, dilation=1, groups: int = 1, bias: bool = True) -> Conv2d:
  return Conv2d(in_channels, out_channels, (kernel_size,) if isinstance(kernel_size, int) else kernel_size, stride, padding, dilation, groups, bias)

class ConvTranspose2d:
  """Transposed convolution; weight (in_channels, out_channels/groups, *kernel)."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, dilation=1, groups: int = 1,
               bias: bool = True):
    self.kernel_size = _tuple(kernel_size, 2)
    self.stride, self.padding, self.output_padding, self.dilation, self.groups = stride, padding, output_padding, dilation, groups
    bound = 1 / math.sqrt(out_channels // groups * prod(self.kernel_size))
    self.weight = _uniform((in_channels, out_channels // groups, *self.kernel_size), bound)
    self.bias: Tensor | None = _uniform((out_channels,), bound) if bias else None
  def __call__(self, x: Tensor) -> Tensor:
    return x.conv_transpose2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation,
                              padding=self.padding, output_padding=self.output_padding)

def ConvTranspose1d(in_channels: int, out_channels: int, kernel_size: int, stride=1, padding=0, output_padding=0, dilation=1,
                    groups: int = 1, bias: bool = True) -> ConvTranspose2d:
  return ConvTranspose2d(in_channels, out_channels, (kernel_size,) if isinstance(kernel_size, int) else kernel_size, stride, padding,
                         output_padding, dilation, groups, bias)

class Linear:
  """x @ weight.T + bias with weight (out_features, in_features), both uniform in +-1/sqrt(in_features)."""
  def __init__(self, in_features: int, out_features: int, bias: bool = True):
    bound = 1 / math.sqrt(in_features)
    self.weight = _uniform((out_features, in_features), bound)
    self.bias: Tensor | None = _uniform((out_features,), bound) if bias else None
  def __call__(self, x: Tensor) -> Tensor: return x.linear(self.weight.transpose(), self.bias)

class GroupNorm:
  def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
    if num_channels % num_groups: raise ValueError(f"{num_channels} channels can't be split into {num_groups} groups")
    self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
    self.weight: Tensor | None = Tensor.ones(num_channels, requires_grad=True) if affine else None
    self.bias: Tensor | None = Tensor.zeros(num_channels, requires_grad=True) if affine else None
  def __call__(self, x: Tensor) -> Tensor:
    x = x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps).reshape(x.shape)
    if self.weight is None: return x
    shape = (1, -1, *[1] * (x.ndim - 2))
    return x * self.weight.reshape(shape) + self.bias.reshape(shape)

class InstanceNorm:
  def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True):
    self.num_features, self.eps = num_features, eps
    self.weight: Tensor | None = Tensor.ones(num_features, requires_grad=True) if affine else None
    self.bias: Tensor | None = Tensor.zeros(num_features, requires_grad=True) if affine else None
  def __call__(self, x: Tensor) -> Tensor:
    x = x.reshape(x.shape[0], x.shape[1], -1).layernorm(eps=self.eps).reshape(x.shape)
    if self.weight is None: return x
    shape = (1, -1, *[1] * (x.ndim - 2))
    return x * self.weight.reshape(shape) + self.bias.reshape(shape)

class LayerNorm:
  def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True):
    self.normalized_shape = _tuple(normalized_shape, 1)
    self.axis, self.eps = tuple(-1 - i for i in range(len(self.normalized_shape))), eps
    self.weight: Tensor | None = Tensor.ones(*self.normalized_shape, requires_grad=True) if elementwise_affine else None
    self.bias: Tensor | None = Tensor.zeros(*self.normalized_shape, requires_grad=True) if elementwise_affine else None
  def __call__(self, x: Tensor) -> Tensor:
    if x.shape[-len(self.normalized_shape):] != self.normalized_shape:
      raise ValueError(f"LayerNorm over {self.normalized_shape} got input of shape {x.shape}")
    x = x.layernorm(eps=self.eps, axis=self.axis)
    return x if self.weight is None else x * self.weight + self.bias

class LayerNorm2d(LayerNorm):
  """LayerNorm over the channels of an NCHW tensor."""
  def __call__(self, x: Tensor) -> Tensor: return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

class RMSNorm:
  def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True):
    self.eps = eps
    self.weight: Tensor | None = Tensor.ones(dim, requires_grad=True) if elementwise_affine else None
  def __call__(self, x: Tensor) -> Tensor:
    x = x * (x.square().mean(-1, keepdim=True) + self.eps).rsqrt()
    return x if self.weight is None else x * self.weight

class Embedding:
  """A lookup table: integer indices -> rows of `weight` (glorot-uniform initialized)."""
  def __init__(self, vocab_size: int, embed_size: int):
    self.vocab_size, self.embed_size = vocab_size, embed_size
    self.weight = Tensor.glorot_uniform(vocab_size, embed_size).requires_grad_(True)
  def __call__(self, idx: Tensor) -> Tensor:
    if not dtypes.is_int(idx.dtype): raise TypeError(f"Embedding indices must be integers, got {idx.dtype}")
    return self.weight[idx]

class LSTMCell:
  """One LSTM step: (x, (h, c)) -> (h', c'), gates in torch's order (input, forget, cell, output)."""
  def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
    bound = 1 / math.sqrt(hidden_size)
    self.hidden_size = hidden_size
    self.weight_ih, self.weight_hh = _uniform((4 * hidden_size, input_size), bound), _uniform((4 * hidden_size, hidden_size), bound)
    self.bias_ih: Tensor | None = _uniform((4 * hidden_size,), bound) if bias else None
    self.bias_hh: Tensor | None = _uniform((4 * hidden_size,), bound) if bias else None
  def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    if hc is None: hc = (Tensor.zeros(x.shape[0], self.hidden_size, device=x.device),) * 2
    h, c = hc
    gates = x.linear(self.weight_ih.T, self.bias_ih) + h.linear(self.weight_hh.T, self.bias_hh)
    i, f, g, o = gates.chunk(4, dim=1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c
