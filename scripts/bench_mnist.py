"""Training-step time of the beautiful_mnist model (Conv/BatchNorm/max_pool, Adam) on random data: tg with TinyJit
on its default device next to PyTorch (when installed), same model and batch: on the same CPU, or on the GPU when
tg runs on one (DEV=NV, CUDA or AMD) and PyTorch sees one. Each side runs in a process of its own (a library's worker
threads spin after its calls and would slow the other side), alternating over several rounds; the table gives the
median step of all rounds and the spread of the per-round medians.
Switches: BS (batch, default 512), STEPS (timed steps after warm-up, default 10), ROUNDS (default 3), TORCH_DEVICE
(PyTorch's device, default as above)."""
from __future__ import annotations
import json, os, statistics, sys, time
import numpy as np
from script_help import exit_on_help, run_worker, worker_label
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

def tg_step(bs: int):
  from tg import Device, Tensor
  from beautiful_mnist import Model, make_train_step
  rng = np.random.default_rng(0)
  X = Tensor(rng.integers(0, 256, (bs * 4, 1, 28, 28), dtype=np.uint8))
  Y = Tensor(rng.integers(0, 10, bs * 4).astype(np.int32))
  step = make_train_step(Model(), X, Y, bs)
  return Device.DEFAULT, lambda: step().item()

def torch_device(torch) -> str:
  """TORCH_DEVICE, else cuda where tg runs on a GPU and PyTorch sees one, else cpu."""
  on_gpu = os.environ.get("DEV", "").split(":")[0] in ("NV", "CUDA", "AMD")
  return os.environ.get("TORCH_DEVICE") or ("cuda" if on_gpu and torch.cuda.is_available() else "cpu")

def torch_step(bs: int):
  try: import torch
  except ImportError: return None
  nn, dev = torch.nn, torch_device(torch)
  model = nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(), nn.Conv2d(32, 32, 5), nn.ReLU(), nn.BatchNorm2d(32), nn.MaxPool2d(2),
                        nn.Conv2d(32, 64, 3), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(), nn.BatchNorm2d(64), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(576, 10)).to(dev)
  opt = torch.optim.Adam(model.parameters(), lr=0.001)
  rng = np.random.default_rng(0)
  X = torch.tensor(rng.integers(0, 256, (bs * 4, 1, 28, 28), dtype=np.uint8), device=dev)
  Y = torch.tensor(rng.integers(0, 10, bs * 4), dtype=torch.long, device=dev)
  def step():
    samples = torch.randint(0, X.shape[0], (bs,), device=dev)
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(X[samples].float()), Y[samples])
    loss.backward()
    opt.step()
    return loss.item()
  return dev, step

def timed(fn) -> float:
  st = time.perf_counter()
  fn()
  return time.perf_counter() - st

WARMUP = 2

def measure(side: str, bs: int, steps: int) -> None:
  """In the child process: the first step's and the timed steps' seconds of one side, as JSON on stdout."""
  made = tg_step(bs) if side == "tg" else torch_step(bs)
  if made is None: return print(json.dumps(None))
  device, step = made
  times = [timed(step) for _ in range(WARMUP + steps)]
  print(json.dumps({"device": device, "first": times[0], "steps": times[WARMUP:]}))

if __name__ == "__main__":
  exit_on_help(__doc__)
  bs, steps, rounds = int(os.environ.get("BS", 512)), int(os.environ.get("STEPS", 10)), int(os.environ.get("ROUNDS", 3))
  if (side := worker_label()) is not None: sys.exit(measure(side, bs, steps))
  results: dict[str, list[dict]] = {"tg": [], "PyTorch": []}
  for _ in range(rounds):  # tg, PyTorch, tg, PyTorch, ...: a drift in machine load hits both
    for name in results:
      if (r := run_worker(__file__, name)) is not None: results[name].append(r)
  print(f"beautiful_mnist training step, batch {bs}: {rounds} rounds, each side in a fresh process per round, "
        f"{steps} timed steps after {WARMUP} warm-up steps")
  print(f"{'':14s} {'first step (s)':>15s} {'median step (ms)':>17s} {'round medians (ms)':>22s} {'tg/torch':>9s}")
  med = {name: statistics.median(t for r in rs for t in r["steps"]) for name, rs in results.items() if rs}
  for name, rs in results.items():
    if not rs:
      print(f"{name:14s} {'not installed':>15s}")
      continue
    per_round = sorted(statistics.median(r["steps"]) * 1e3 for r in rs)
    ratio = f"{med['tg'] / med['PyTorch']:8.2f}x" if name == "tg" and "PyTorch" in med else ""
    print(f"{name + ' ' + rs[0]['device']:14s} {statistics.median(r['first'] for r in rs):15.2f} {med[name] * 1e3:17.1f} "
          f"{f'{per_round[0]:.0f}-{per_round[-1]:.0f}':>22s} {ratio:>9s}")
