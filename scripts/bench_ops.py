"""Kernel speed on this CPU: tg (heuristics, and BEAM=2) next to numpy and, when installed, PyTorch, measured in the
same run, as GFLOPS or GB/s with tg/numpy ratios; plus the median build time (optimize + lower + compile) per kernel.
Switches: REPEAT (timed runs per case, default 5), SIZES (matmul sizes, default 256,512,1024,2048)."""
from __future__ import annotations
import os, statistics, sys, time
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tg import Tensor, Context, Device
from tg.realize import _runners
from script_help import exit_on_help

REPEAT = int(os.environ.get("REPEAT", 5))

def best(fn, repeat: int = REPEAT) -> float:
  fn()
  times = []
  for _ in range(repeat):
    st = time.perf_counter()
    fn()
    times.append(time.perf_counter() - st)
  return min(times)

def tg_time(make, beam: int) -> float:
  def run():
    make().realize()
    Device["CPU"].synchronize()
  with Context(BEAM=beam): return best(run)

def torch_time(fn) -> float | None:
  try: import torch
  except ImportError: return None
  return best(lambda: fn(torch))

def cases():
  rng = np.random.default_rng(0)
  for n in [int(s) for s in os.environ.get("SIZES", "256,512,1024,2048").split(",")]:
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    ta, tb = Tensor(a).realize(), Tensor(b).realize()
    yield (f"matmul {n}", 2 * n ** 3, "GFLOPS", lambda ta=ta, tb=tb: ta @ tb, lambda a=a, b=b: a @ b,
           lambda torch, a=a, b=b: torch.from_numpy(a) @ torch.from_numpy(b))
  n = 16 * 1024 * 1024  # 64 MiB of float32
  x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
  tx, ty = Tensor(x).realize(), Tensor(y).realize()
  yield ("add 64 MiB", 3 * n * 4, "GB/s", lambda: tx + ty, lambda: x + y, lambda torch: torch.from_numpy(x) + torch.from_numpy(y))
  m = x.reshape(4096, 4096)
  tm = Tensor(m).realize()
  yield ("row sum 64 MiB", n * 4, "GB/s", lambda: tm.sum(1), lambda: m.sum(1), lambda torch: torch.from_numpy(m).sum(1))
  img, w = rng.random((256, 1, 28, 28), dtype=np.float32), rng.random((32, 1, 5, 5), dtype=np.float32)
  timg, tw = Tensor(img).realize(), Tensor(w).realize()
  windows = np.lib.stride_tricks.sliding_window_view(img, (5, 5), axis=(2, 3))
  yield ("conv2d mnist l1", 2 * 256 * 32 * 24 * 24 * 25, "GFLOPS", lambda: timg.conv2d(tw), lambda: np.einsum("bcyxij,ocij->boyx", windows, w, optimize=True),
         lambda torch: torch.nn.functional.conv2d(torch.from_numpy(img), torch.from_numpy(w)))

if __name__ == "__main__":
  exit_on_help(__doc__)
  rows = []
  for name, work, unit, make, np_fn, torch_fn in cases():
    scale = 1e9
    t_heur, t_beam, t_np, t_torch = tg_time(make, 0), tg_time(make, 2), best(np_fn), torch_time(torch_fn)
    rows.append((name, unit, *(work / t / scale if t else None for t in (t_heur, t_beam, t_np, t_torch))))
  builds = sorted(r.build_s for r in _runners.values() if r.search_s < 0.5)  # heuristic kernels (BEAM search time excluded)
  print(f"{'case':18s} {'unit':7s} {'tg':>8s} {'tg BEAM=2':>10s} {'numpy':>8s} {'torch':>8s} {'tg/numpy':>9s} {'BEAM/numpy':>11s}")
  for name, unit, heur, beam, np_v, torch_v in rows:
    tv = f"{torch_v:8.1f}" if torch_v else f"{'-':>8s}"
    print(f"{name:18s} {unit:7s} {heur:8.1f} {beam:10.1f} {np_v:8.1f} {tv} {heur / np_v:8.2f}x {beam / np_v:10.2f}x")
  print(f"median build time per kernel (optimize, lower, render, compile): {statistics.median(builds) * 1e3:.0f} ms over {len(builds)} kernels")
