"""Training-step time of the beautiful_mnist model (Conv/BatchNorm/max_pool, Adam) on random data: tg with TinyJit
next to PyTorch (when installed) on the same CPU, same model and batch. Prints one table.
Switches: BS (batch, default 512), STEPS (timed steps after warm-up, default 10)."""
from __future__ import annotations
import os, statistics, sys, time
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

def bench_tg(bs: int, steps: int) -> tuple[float, float]:
  from tg import Tensor
  from beautiful_mnist import Model, make_train_step
  rng = np.random.default_rng(0)
  X = Tensor(rng.integers(0, 256, (bs * 4, 1, 28, 28), dtype=np.uint8))
  Y = Tensor(rng.integers(0, 10, bs * 4).astype(np.int32))
  step = make_train_step(Model(), X, Y, bs)
  times = []
  for _ in range(steps + 2):
    st = time.perf_counter()
    step().item()
    times.append(time.perf_counter() - st)
  return times[0], statistics.median(times[2:])

def bench_torch(bs: int, steps: int) -> tuple[float, float] | None:
  try: import torch
  except ImportError: return None
  nn = torch.nn
  model = nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(), nn.Conv2d(32, 32, 5), nn.ReLU(), nn.BatchNorm2d(32), nn.MaxPool2d(2),
                        nn.Conv2d(32, 64, 3), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(), nn.BatchNorm2d(64), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(576, 10))
  opt = torch.optim.Adam(model.parameters(), lr=0.001)
  rng = np.random.default_rng(0)
  X = torch.tensor(rng.integers(0, 256, (bs * 4, 1, 28, 28), dtype=np.uint8))
  Y = torch.tensor(rng.integers(0, 10, bs * 4), dtype=torch.long)
  times = []
  for _ in range(steps + 2):
    st = time.perf_counter()
    samples = torch.randint(0, X.shape[0], (bs,))
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(X[samples].float()), Y[samples])
    loss.backward()
    opt.step()
    loss.item()
    times.append(time.perf_counter() - st)
  return times[0], statistics.median(times[2:])

if __name__ == "__main__":
  bs, steps = int(os.environ.get("BS", 512)), int(os.environ.get("STEPS", 10))
  tg_first, tg_med = bench_tg(bs, steps)
  ref = bench_torch(bs, steps)
  print(f"beautiful_mnist training step, batch {bs}, median of {steps} steps after 2 warm-up steps")
  print(f"{'':10s} {'first step (s)':>15s} {'median step (ms)':>17s} {'torch/tg':>9s}")
  print(f"{'tg':10s} {tg_first:15.2f} {tg_med * 1e3:17.1f} {'':>9s}")
  if ref is None: print(f"{'PyTorch':10s} {'not installed':>15s}")
  else: print(f"{'PyTorch':10s} {ref[0]:15.2f} {ref[1] * 1e3:17.1f} {ref[1] / tg_med:9.2f}x")
