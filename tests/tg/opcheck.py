"""Checks a Tensor op against an independent reference: the forward pass against a numpy function evaluated in
float64, the backward pass against central finite differences of that same float64 function."""
from __future__ import annotations
from typing import Callable, Sequence
import numpy as np
import pytest
from ir.dtype import DType
from tg import Device, Tensor, dtypes

def make_inputs(shapes: Sequence[tuple[int, ...]], low: float = -2.0, high: float = 2.0, seed: int = 0) -> list[np.ndarray]:
  rng = np.random.default_rng(seed)
  return [rng.uniform(low, high, size=s) for s in shapes]

def refused(*dts) -> DType | None:
  """The first of dts (DTypes, or numpy dtypes and their names) the default device can't hold (WEBGPU has no 64-bit
  types), or None."""
  dts = tuple(dt if isinstance(dt, DType) else getattr(dtypes, np.dtype(dt).name) for dt in dts)
  return next((dt for dt in dts if dt in Device[Device.DEFAULT].unsupported_dtypes), None)
def needs(*dts, why: str) -> pytest.MarkDecorator:
  """Skips a test on a default device that can't hold one of dts; `why` says where the test meets them."""
  return pytest.mark.skipif(refused(*dts) is not None, reason=f"{Device.DEFAULT} can't hold {refused(*dts)}: {why}")
def skip_refused(*dts) -> None:
  """In a parametrized test: skip the cases whose dtypes the default device can't hold."""
  if (dt := refused(*dts)) is not None: pytest.skip(f"{Device.DEFAULT} can't hold {dt}")
# results that need IEEE NaN, inf and -0. through arithmetic, or compensated sums ((1 + x) - 1 kept as written)
ieee_math = pytest.mark.skipif(Device[Device.DEFAULT].renderer.finite_math,
                               reason=f"{Device.DEFAULT}'s shader compiler may assume finite floats and reassociate (WGSL allows it)")

def numerical_grads(fn: Callable, inputs: list[np.ndarray], weights: np.ndarray, eps: float = 1e-6) -> list[np.ndarray]:
  """d/dx sum(fn(*inputs) * weights) for every input, by central differences in float64."""
  grads = []
  for i, x in enumerate(inputs):
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
      plus, minus = [a.copy() for a in inputs], [a.copy() for a in inputs]
      plus[i][idx] += eps
      minus[i][idx] -= eps
      g[idx] = (np.sum(np.asarray(fn(*plus)) * weights) - np.sum(np.asarray(fn(*minus)) * weights)) / (2 * eps)
    grads.append(g)
  return grads

def check_op(tg_fn: Callable, np_fn: Callable, shapes: Sequence[tuple[int, ...]] | None = None, inputs: list[np.ndarray] | None = None,
             grad: bool = True, low: float = -2.0, high: float = 2.0, rtol: float = 1e-5, atol: float = 1e-6,
             grad_rtol: float = 1e-3, grad_atol: float = 1e-4, dtype=np.float32, seed: int = 0) -> Tensor:
  """Run `tg_fn` on Tensors and `np_fn` on float64 arrays of the same values; compare outputs and gradients."""
  if inputs is None: inputs = make_inputs(shapes or [], low, high, seed)
  inputs = [np.asarray(x, dtype=dtype).astype(np.float64) if np.issubdtype(np.asarray(x).dtype, np.floating) else np.asarray(x) for x in inputs]
  float_in = [np.issubdtype(x.dtype, np.floating) for x in inputs]
  tensors = [Tensor(x.astype(dtype), requires_grad=grad and f) if f else Tensor(x) for x, f in zip(inputs, float_in)]
  out = tg_fn(*tensors)
  ref = np.asarray(np_fn(*inputs))
  got = out.numpy()
  assert got.shape == ref.shape, f"shape {got.shape} != reference {ref.shape}"
  np.testing.assert_allclose(got.astype(np.float64) if got.dtype != np.bool_ else got, ref, rtol=rtol, atol=atol)
  if grad and any(float_in):
    weights = np.random.default_rng(seed + 1).uniform(0.5, 1.5, size=ref.shape)
    (out * Tensor(weights.astype(np.float32))).sum().backward()
    diff_inputs = [i for i, f in enumerate(float_in) if f]
    def fn_of_floats(*floats):
      args = list(inputs)
      for i, v in zip(diff_inputs, floats): args[i] = v
      return np_fn(*args)
    expected = numerical_grads(fn_of_floats, [inputs[i] for i in diff_inputs], weights)
    for i, g in zip(diff_inputs, expected):
      assert tensors[i].grad is not None, f"input {i} got no gradient"
      np.testing.assert_allclose(tensors[i].grad.numpy(), g, rtol=grad_rtol, atol=grad_atol, err_msg=f"gradient of input {i}")
  return out

try:
  import torch
except ImportError:
  torch = None
