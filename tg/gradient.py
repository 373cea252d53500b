"""Reverse-mode differentiation over tensor-level UOp graphs: one local rule per primitive op."""
from __future__ import annotations
import math
from ir.dtype import dtypes
from ir.helpers import argsort
from ir.ops import Ops
from ir.uop import UOp

def full_like(u: UOp, value) -> UOp:
  return UOp.const(u.dtype, value, u.device).reshape((1,) * len(u.shape)).expand(u.shape)

def _where(cond: UOp, a: UOp, b: UOp) -> UOp: return cond.alu(Ops.WHERE, a, b)
def _zeros(u: UOp) -> UOp: return full_like(u, 0)

def _reduce_grad(u: UOp, g: UOp) -> UOp:
  op, axes = u.arg
  x = u.src[0]
  if op is Ops.ADD: return g.expand(x.shape)
  ret = u.expand(x.shape)
  if op is Ops.MAX:  # shared evenly between the elements that reach the maximum
    hit = x.alu(Ops.CMPEQ, ret).cast(g.dtype)
    count = hit.r(Ops.ADD, axes)
    return hit * (g.alu(Ops.FDIV, count)).expand(x.shape)
  # product: the product of the other elements, exact when some are zero
  is_zero = x.alu(Ops.CMPEQ, _zeros(x))
  nonzero = _where(is_zero, full_like(x, 1), x)
  prod_nonzero = nonzero.r(Ops.MUL, axes).expand(x.shape)
  zeros = is_zero.cast(dtypes.int32).r(Ops.ADD, axes).expand(x.shape)
  no_zero = zeros.alu(Ops.CMPEQ, full_like(zeros, 0))
  one_zero_here = zeros.alu(Ops.CMPEQ, full_like(zeros, 1)).alu(Ops.AND, is_zero)
  others = _where(no_zero, ret.alu(Ops.FDIV, _where(is_zero, full_like(x, 1), x)), _where(one_zero_here, prod_nonzero, _zeros(x)))
  return others * g.expand(x.shape)

def _take_grad(u: UOp, g: UOp) -> UOp:
  """Scatter-add g back to the gathered positions: sum over i of g[.., i, ..] * (idx[.., i, ..] == j)."""
  x, idx = u.src
  dim, n = u.arg, x.shape[u.arg]
  wide = g.shape[:dim + 1] + (n,) + g.shape[dim + 1:]
  at = lambda t: t.reshape(t.shape[:dim + 1] + (1,) + t.shape[dim + 1:]).expand(wide)
  positions = UOp(Ops.ARANGE, dtypes.int32, (UOp(Ops.DEVICE, arg=g.device),), n).cast(idx.dtype)
  positions = positions.reshape((1,) * (dim + 1) + (n,) + (1,) * (len(g.shape) - dim - 1)).expand(wide)
  hit = at(idx).alu(Ops.CMPEQ, positions)
  summed = _where(hit, at(g), full_like(at(g), 0)).r(Ops.ADD, (dim,))
  return summed.reshape(g.shape[:dim] + (n,) + g.shape[dim + 1:])

def grad_rule(u: UOp, g: UOp) -> tuple[UOp | None, ...]:
  """Gradients of u's sources given the gradient `g` of u."""
  op, s = u.op, u.src
  if op is Ops.ADD: return (g, g)
  if op is Ops.SUB: return (g, -g)
  if op is Ops.MUL: return (g * s[1], g * s[0])
  if op is Ops.FDIV: return (g.alu(Ops.FDIV, s[1]), -(g * s[0]).alu(Ops.FDIV, s[1] * s[1]))
  if op is Ops.NEG: return (-g,)
  if op is Ops.RECIP: return (-(g * u * u),)
  if op is Ops.SQRT: return (g.alu(Ops.FDIV, u * full_like(u, 2)),)
  if op is Ops.EXP2: return (g * u * full_like(u, math.log(2)),)
  if op is Ops.LOG2: return (g.alu(Ops.FDIV, s[0] * full_like(s[0], math.log(2))),)
  if op is Ops.SIN: return (g * (full_like(s[0], math.pi / 2) - s[0]).alu(Ops.SIN),)
  if op is Ops.MAX:
    gt, eq = s[0].alu(Ops.CMPLT, s[1]), s[0].alu(Ops.CMPEQ, s[1])
    half = g * full_like(g, 0.5)
    return (_where(eq, half, _where(gt, _zeros(g), g)), _where(eq, half, _where(gt, g, _zeros(g))))
  if op is Ops.WHERE: return (None, _where(s[0], g, _zeros(g)), _where(s[0], _zeros(g), g))
  if op is Ops.MULACC: return (g * s[1], g * s[0], g)
  if op is Ops.CAST: return (g.cast(s[0].dtype) if dtypes.is_float(s[0].dtype) else None,)
  if op is Ops.REDUCE_AXIS: return (_reduce_grad(u, g),)
  if op is Ops.TAKE: return (_take_grad(u, g), None)
  if op is Ops.GRAD_OVERRIDE: return (None, *u.arg(g, *s))
  if op is Ops.RESHAPE: return (g.reshape(s[0].shape),)
  if op is Ops.PERMUTE: return (g.permute(tuple(argsort(u.arg))),)
  if op is Ops.EXPAND: return (g.r(Ops.ADD, tuple(i for i, (a, b) in enumerate(zip(s[0].shape, u.shape)) if a != b)),)
  if op is Ops.PAD: return (g.shrink(tuple((lo, lo + n) for (lo, _), n in zip(u.arg, s[0].shape))),)
  if op is Ops.SHRINK: return (g.pad(tuple((lo, n - hi) for (lo, hi), n in zip(u.arg, s[0].shape))),)
  if op is Ops.FLIP: return (g.flip(u.arg),)
  if op is Ops.CONTIGUOUS: return (UOp(Ops.CONTIGUOUS, g.dtype, (g,)),)  # materialized where the forward was
  if op is Ops.CONTIGUOUS_BACKWARD: return (UOp(Ops.CONTIGUOUS, g.dtype, (g,)),)
  if op is Ops.COPY: return (UOp(Ops.COPY, g.dtype, (g,), s[0].device),)
  if op is Ops.ASSIGN: return (None, g)
  return tuple(None for _ in s)  # comparisons, integer ops, bitcasts, DETACH: no gradient

def compute_gradient(root: UOp, root_grad: UOp, targets: list[UOp]) -> dict[UOp, UOp]:
  """d(root)/d(target) for each target reachable from root, given d(loss)/d(root) = root_grad."""
  order = root.toposort()
  wanted = set(targets)
  on_path: dict[UOp, bool] = {}
  for u in order: on_path[u] = u in wanted or (u.op is not Ops.DETACH and any(on_path[x] for x in u.src))
  grads: dict[UOp, UOp] = {root: root_grad}
  for u in reversed(order):
    if (g := grads.get(u)) is None or u in wanted and u is not root and not u.src: continue
    for src, sg in zip(u.src, grad_rule(u, g)):
      if sg is None or not on_path.get(src, False): continue
      grads[src] = grads[src] + sg if src in grads else sg
  return {t: grads[t] for t in targets if t in grads}
