"""Optimizers. Each keeps its learning rate and state as device Tensors and updates parameters with `assign`, so a
TinyJit-captured step replays the whole update (and `opt.lr.assign(...)` changes the rate between replays)."""
from __future__ import annotations
from ir.dtype import dtypes
from ir.switches import TRAINING
from tg.tensor import Tensor

class Optimizer:
  """Trains the float tensors in `params` that require grad (those with requires_grad unset are switched on);
  tensors with requires_grad=False (e.g. BatchNorm running statistics) are kept realized as buffers."""
  def __init__(self, params: list[Tensor], lr: float, device: str | None = None):
    params = list({id(p): p for p in params}.values())
    self.params = [p for p in params if p.requires_grad is not False and dtypes.is_float(p.dtype)]
    for p in self.params: p.requires_grad_(True)
    trained = {id(p) for p in self.params}
    self.buffers = [p for p in params if id(p) not in trained]
    if not self.params: raise ValueError("optimizer got no parameters to train")
    self.device = device or self.params[0].device
    self.lr = Tensor([lr], device=self.device, dtype=dtypes.float32).contiguous().realize()
    # initial values still to compute (random init) would otherwise be recomputed inside the first step's kernels,
    # which then differ from every later step's and are compiled twice
    Tensor.realize_all(*params)

  def zero_grad(self) -> None:
    for p in self.params: p.grad = None

  def step(self) -> None:
    """Apply one update (realizes parameters, optimizer state, buffers and the gradients in one schedule: a gradient
    left unrealized would keep the intermediates its graph reads alive until zero_grad)."""
    Tensor.realize_all(*self.schedule_step(), *[p.grad for p in self.params if p.grad is not None])

  def schedule_step(self) -> list[Tensor]:
    """The tensors an update writes, not yet realized: updated params, optimizer state, buffers."""
    if not TRAINING: raise RuntimeError("optimizer step outside training mode; wrap the training step in `with Context(TRAINING=1):`")
    missing = [i for i, p in enumerate(self.params) if p.grad is None]
    if len(missing) == len(self.params): raise RuntimeError("no parameter has a gradient; call backward() before step()")
    return self._update([i for i in range(len(self.params)) if i not in missing]) + self.buffers

  def _update(self, indices: list[int]) -> list[Tensor]: raise NotImplementedError

class OptimizerGroup(Optimizer):
  """Several optimizers stepped together (e.g. different learning rates for different layers)."""
  def __init__(self, *optimizers: Optimizer):
    self.optimizers = optimizers
    self.params = [p for o in optimizers for p in o.params]
    self.buffers = [b for o in optimizers for b in o.buffers]
  def __getitem__(self, i: int) -> Optimizer: return self.optimizers[i]
  def zero_grad(self) -> None:
    for o in self.optimizers: o.zero_grad()
  def schedule_step(self) -> list[Tensor]: return [t for o in self.optimizers for t in o.schedule_step()]

class LARS(Optimizer):
  """SGD with momentum and a layer-wise trust ratio r = tcoef*|w|/(|g| + wd*|w|) (1 when either norm is 0; tcoef=0: plain
  SGD). pre_wd adds wd*w to the gradient; otherwise the decay is decoupled: w *= 1 - wd*lr before the step. classic
  scales the gradient by r*lr before the momentum buffer; otherwise the buffer's output is scaled by r*lr."""
  def __init__(self, params: list[Tensor], lr: float = 0.001, momentum: float = 0.9, weight_decay: float = 1e-4, nesterov: bool = False,
               classic: bool = True, pre_wd: bool = True, tcoef: float = 0.001):
    super().__init__(params, lr)
    self.momentum, self.wd, self.nesterov, self.classic, self.pre_wd, self.tcoef = momentum, weight_decay, nesterov, classic, pre_wd, tcoef
    self.b = [Tensor.zeros(*p.shape, device=p.device, dtype=p.dtype).contiguous().realize() for p in self.params] if momentum else []

  def _update(self, indices: list[int]) -> list[Tensor]:
    out = []
    for i in indices:
      p, g = self.params[i], self.params[i].grad.detach()
      scale = self.lr  # r * lr, applied before (classic) or after the momentum buffer
      if self.tcoef != 0:
        wnorm, gnorm = p.detach().square().sum().sqrt(), g.square().sum().sqrt()
        scale = ((wnorm > 0) & (gnorm > 0)).where(self.tcoef * wnorm / (gnorm + self.wd * wnorm), 1.0) * self.lr
      if self.pre_wd and self.wd: g = g + self.wd * p.detach()
      if self.classic: g = g * scale
      if self.momentum:
        self.b[i].assign(self.momentum * self.b[i] + g)
        g = (g + self.momentum * self.b[i]) if self.nesterov else self.b[i]
        out.append(self.b[i])
      if not self.classic: g = g * scale
      w = p.detach() * (1 - self.wd * self.lr) if not self.pre_wd and self.wd else p.detach()
      p.assign((w - g).cast(p.dtype))
      out.append(p)
    return out

def SGD(params: list[Tensor], lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
        classic: bool = False) -> LARS:
  """torch.optim.SGD: b = momentum*b + (g + wd*w); w -= lr * (nesterov ? g + momentum*b : b)."""
  return LARS(params, lr, momentum, weight_decay, nesterov, classic, pre_wd=True, tcoef=0.0)

class LAMB(Optimizer):
  """Adam moments with a layer-wise trust ratio |w|/|update| (adam=True: ratio 1, i.e. AdamW with decoupled decay)."""
  def __init__(self, params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6, weight_decay: float = 0.0,
               adam: bool = False):
    super().__init__(params, lr)
    self.b1, self.b2, self.eps, self.wd, self.adam = b1, b2, eps, weight_decay, adam
    # running powers b^t in float64: 1 - b2^t cancels badly in float32 during the first steps
    self.b1_t = Tensor.ones(1, dtype=dtypes.float64, device=self.device).contiguous().realize()
    self.b2_t = Tensor.ones(1, dtype=dtypes.float64, device=self.device).contiguous().realize()
    self.m = [Tensor.zeros(*p.shape, device=p.device, dtype=dtypes.float32).contiguous().realize() for p in self.params]
    self.v = [Tensor.zeros(*p.shape, device=p.device, dtype=dtypes.float32).contiguous().realize() for p in self.params]

  def _update(self, indices: list[int]) -> list[Tensor]:
    self.b1_t.assign(self.b1_t * self.b1)
    self.b2_t.assign(self.b2_t * self.b2)
    out: list[Tensor] = [self.b1_t, self.b2_t]
    for i in indices:
      p, g = self.params[i], self.params[i].grad.detach().cast(dtypes.float32)
      self.m[i].assign(self.b1 * self.m[i] + (1 - self.b1) * g)
      self.v[i].assign(self.b2 * self.v[i] + (1 - self.b2) * g * g)
      m_hat, v_hat = self.m[i] / (1 - self.b1_t).cast(dtypes.float32), self.v[i] / (1 - self.b2_t).cast(dtypes.float32)
      up = m_hat / (v_hat.sqrt() + self.eps) + self.wd * p.detach()
      if not self.adam:
        wnorm, unorm = p.detach().square().sum().sqrt(), up.square().sum().sqrt()
        up = up * ((wnorm > 0) & (unorm > 0)).where(wnorm / unorm, 1.0)
      p.assign(p.detach() - (self.lr * up).cast(p.dtype))
      out.extend([self.m[i], self.v[i], p])
    return out

def Adam(params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> LAMB:
  return LAMB(params, lr, b1, b2, eps, 0.0, adam=True)
def AdamW(params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.01) -> LAMB:
  return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True)
