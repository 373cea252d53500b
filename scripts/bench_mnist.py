"""Training-step time of the beautiful_mnist model (Conv/BatchNorm/max_pool, Adam) on random data: tg with TinyJit
next to PyTorch (when installed) on the same CPU, same model and batch. Prints one table.
Switches: BS (batch, default 512), STEPS (timed steps after warm-up, default 10)."""
from __future__ import annotations
import os, statistics, sys, time
import numpy as np
from script_help import exit_on_help
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

def tg_step(bs: int):
  from tg import Tensor
  from beautiful_mnist import Model, make_train_step
  rng = np.random.default_rng(0)
  X = Tensor(rng.integers(0, 256, (bs * 4, 1, 28, 28), dtype=np.uint8))
  Y = Tensor(rng.integers(0, 10, bs * 4).astype(np.int32))
  step = make_train_step(Model(), X, Y, bs)
  return lambda: step().item()

def torch_step(bs: int):
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
  def step():
    samples = torch.randint(0, X.shape[0], (bs,))
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(X[samples].float()), Y[samples])
    loss.backward()
    opt.step()
    return loss.item()
  return step

def timed(fn) -> float:
  st = time.perf_counter()
  fn()
  return time.perf_counter() - st

if __name__ == "__main__":
  exit_on_help(__doc__)
  bs, steps = int(os.environ.get("BS", 512)), int(os.environ.get("STEPS", 10))
  steppers = {"tg": tg_step(bs), "PyTorch": torch_step(bs)}
  times: dict[str, list[float]] = {name: [] for name, fn in steppers.items() if fn is not None}
  timed_steps: dict[str, list[float]] = {name: [] for name in times}
  for block in range(2):  # tg, PyTorch, tg, PyTorch: a drift in machine load hits both; each block warms up 2 steps
    for name in times:
      block_times = [timed(steppers[name]) for _ in range(steps // 2 + 2)]
      times[name] += block_times
      timed_steps[name] += block_times[2:]
  med = {name: statistics.median(t) for name, t in timed_steps.items()}
  print(f"beautiful_mnist training step, batch {bs}, median of {len(timed_steps['tg'])} steps (two blocks each, alternating, "
        f"2 warm-up steps per block)")
  print(f"{'':10s} {'first step (s)':>15s} {'median step (ms)':>17s} {'torch/tg':>9s}")
  print(f"{'tg':10s} {times['tg'][0]:15.2f} {med['tg'] * 1e3:17.1f} {'':>9s}")
  if "PyTorch" not in times: print(f"{'PyTorch':10s} {'not installed':>15s}")
  else: print(f"{'PyTorch':10s} {times['PyTorch'][0]:15.2f} {med['PyTorch'] * 1e3:17.1f} {med['PyTorch'] / med['tg']:9.2f}x")
