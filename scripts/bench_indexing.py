"""Sorting, selection, scatters and padded or resized views on this CPU: tg's kernels under TinyJit next to PyTorch
(eager, on the same number of threads) and, where it has the op, numpy, measured in the same run, in milliseconds with
the tg/torch ratio. The cases: sort and argsort of rows and columns, topk of short and long rows, a graph's messages
scattered into its nodes (sum, amax, and the sum with its gradient), an embedding's gradient, x[rows, cols] = v
(eager: []= realizes), a reflect pad, a concatenation along rows, and 2x bilinear interpolation. Switches: REPEAT
(timed runs per case, default 5; they go on until they have lasted 0.2 s)."""
from __future__ import annotations
import os, sys
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tg import Device, Tensor, TinyJit
from bench_ops import best, torch_time
from ir.switches import NUM_CPU_THREADS
from script_help import exit_on_help

def jit_time(fn, *arrays) -> float:
  """Seconds per TinyJit replay of fn on tensors of `arrays` (every output realized), waiting for the device."""
  tensors = [Tensor(a).realize() for a in arrays]
  step = TinyJit(lambda *ts: [t.realize() for t in (lambda out: out if isinstance(out, (tuple, list)) else (out,))(fn(*ts))])
  for _ in range(2): step(*tensors)  # run, then capture: the replays are what is timed
  return best(lambda: (step(*tensors), Device["CPU"].synchronize()))

def tg_grad(fn):
  """The gradient of the sum of fn's squared output with respect to fn's first input, in tg."""
  def grad(x, *rest):
    x.requires_grad_()
    fn(x, *rest).square().sum().backward()
    return x.grad
  return grad

def torch_grad(fn):
  """The same in PyTorch (fn takes torch first)."""
  def grad(torch, x, *rest):
    x = x.clone().requires_grad_()
    fn(torch, x, *rest).square().sum().backward()
    return x.grad
  return grad

def cases():
  rng = np.random.default_rng(0)
  rows, tall = rng.standard_normal((1024, 1024), dtype=np.float32), rng.standard_normal((4096, 1024), dtype=np.float32)
  long_rows = rng.standard_normal((64, 32768), dtype=np.float32)
  yield "sort rows 1024x1024", lambda x: x.sort(-1), lambda t, x: x.sort(-1), lambda x: np.sort(x, -1), (rows,)
  yield "argsort cols 1024x1024", lambda x: x.argsort(0), lambda t, x: x.argsort(0), lambda x: np.argsort(x, 0, kind="stable"), (rows,)
  yield "topk 10 of rows of 1024", lambda x: x.topk(10), lambda t, x: x.topk(10), None, (tall,)
  yield "topk 100 of rows of 32768", lambda x: x.topk(100), lambda t, x: x.topk(100), None, (long_rows,)
  nodes, edges, msgs = np.zeros((30000, 16), np.float32), rng.integers(0, 30000, 40000).astype(np.int32), rng.standard_normal((40000, 16), dtype=np.float32)
  def add_at(n, e, m):
    out = n.copy()
    np.add.at(out, e, m)
    return out
  scatter = lambda n, e, m, how: n.scatter_reduce(0, e.reshape(-1, 1).expand(-1, 16), m, how)
  torch_scatter = lambda t, n, e, m, how: n.scatter_reduce(0, e.long().reshape(-1, 1).expand(-1, 16), m, how)
  for how in ("sum", "amax"):
    yield (f"scatter {how} 40000 -> 30000x16", lambda n, e, m, how=how: scatter(n, e, m, how), lambda t, n, e, m, how=how: torch_scatter(t, n, e, m, how),
           add_at if how == "sum" else None, (nodes, edges, msgs))
  yield ("scatter sum, its gradient", tg_grad(lambda m, n, e: scatter(n, e, m, "sum")), torch_grad(lambda t, m, n, e: torch_scatter(t, n, e, m, "sum")),
         None, (msgs, nodes, edges))
  yield ("embedding 50000x256 gradient", tg_grad(lambda w, i: w[i]), torch_grad(lambda t, w, i: w[i.long()]), None,
         (rng.standard_normal((50000, 256), dtype=np.float32), rng.integers(0, 50000, 8192).astype(np.int32)))
  images = rng.standard_normal((16, 64, 128, 128), dtype=np.float32)
  yield "pad reflect 2 of 16x64x128x128", lambda x: x.pad((2, 2, 2, 2), mode="reflect"), lambda t, x: t.nn.functional.pad(x, (2, 2, 2, 2), mode="reflect"), \
        lambda x: np.pad(x, ((0, 0), (0, 0), (2, 2), (2, 2)), mode="reflect"), (images,)
  halves = rng.standard_normal((4096, 2048), dtype=np.float32)
  yield "cat 4096x2048 twice on dim 1", lambda x, y: x.cat(y, dim=1), lambda t, x, y: t.cat([x, y], 1), lambda x, y: np.concatenate([x, y], 1), (halves, halves + 1)
  yield "bilinear 2x of 16x64x128x128", lambda x: x.interpolate((256, 256), mode="linear"), \
        lambda t, x: t.nn.functional.interpolate(x, (256, 256), mode="bilinear"), None, (images,)

def setitem_times(rng) -> tuple[float, float | None]:
  """x[rows, cols] = v into 1000x1000 with 5000 picks (eager in tg: []= realizes), and PyTorch's."""
  x, r, c, v = rng.standard_normal((1000, 1000), dtype=np.float32), rng.integers(0, 1000, 5000), rng.integers(0, 1000, 5000), rng.standard_normal(5000, dtype=np.float32)
  tr, tc, tv = (Tensor(a.astype(np.int32) if a.dtype != np.float32 else a).realize() for a in (r, c, v))
  def tg_set():
    t = Tensor(x)
    t[tr, tc] = tv
    Device["CPU"].synchronize()
  def torch_set(torch):
    t = torch.from_numpy(x.copy())
    t[torch.from_numpy(r), torch.from_numpy(c)] = torch.from_numpy(v)
  return best(tg_set), torch_time(torch_set)

def row(name: str, tg_s: float, torch_s: float | None, numpy_s: float | None) -> None:
  ms = lambda s: f"{s * 1e3:9.2f}" if s else f"{'-':>9s}"
  print(f"{name:34s} {ms(tg_s)} {ms(torch_s)} {ms(numpy_s)} {f'{tg_s / torch_s:9.2f}x' if torch_s else f'{chr(45):>10s}'}", flush=True)

if __name__ == "__main__":
  exit_on_help(__doc__)
  try:
    import torch
    torch.set_num_threads(NUM_CPU_THREADS.value)
  except ImportError: torch = None
  print(f"{'case (ms)':34s} {'tg JIT':>9s} {'torch':>9s} {'numpy':>9s} {'tg/torch':>10s}", flush=True)
  for name, tg_fn, torch_fn, np_fn, arrays in cases():
    torch_s = torch_time(lambda t: torch_fn(t, *(t.from_numpy(a) for a in arrays))) if torch is not None else None
    row(name, jit_time(tg_fn, *arrays), torch_s, best(lambda: np_fn(*arrays)) if np_fn is not None else None)
  row("x[rows, cols] = v, 5000 of 10**6", *setitem_times(np.random.default_rng(1)), None)
