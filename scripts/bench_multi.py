"""Multi-device scaling: a data-parallel training step on 1 vs 2 devices (tg's CPU devices, and GPUs of the NV model),
and allreduce bandwidth against the bytes reduced, ring against direct (tg picks direct on devices sharing host memory). Each device kind runs in its own process (DEV
and MOCKGPU_COUNT are read at start). Prints one table per measurement.
Switches: STEPS (timed steps per configuration, default 6), BS (batch of the CPU step, default 512)."""
from __future__ import annotations
import json, os, statistics, sys, time
import numpy as np
from script_help import exit_on_help, run_worker, worker_label
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

# (kind, DEV, model): the CPU trains beautiful_mnist's convnet; the NV model interprets PTX, so it trains a small MLP
CONFIGS = {"CPU": ("CPU", "convnet"), "NV model": ("MOCK+NV", "mlp")}
ALLREDUCE_BYTES = {"CPU": [1 << 12, 1 << 16, 1 << 20, 1 << 24], "NV model": [1 << 12, 1 << 16, 1 << 18]}

def devices_of(kind: str, count: int) -> tuple[str, ...]: return tuple(f"{kind}:{i}" for i in range(count))

def step_time(model_name: str, kind: str, count: int, bs: int, steps: int) -> float:
  """Median seconds of a jitted Adam step with the batch split over `count` devices (weights on every one)."""
  from tg import Tensor, nn
  from beautiful_mnist import Model, make_train_step
  class MLP:
    def __init__(self): self.l1, self.l2 = nn.Linear(784, 128), nn.Linear(128, 10)
    def __call__(self, x: Tensor) -> Tensor: return self.l2(self.l1(x.flatten(1)).relu())
  model = Model() if model_name == "convnet" else MLP()
  rng = np.random.default_rng(0)
  X = Tensor(rng.integers(0, 256, (bs * 4, 1, 28, 28), dtype=np.uint8), device=f"{kind}:0").float() / 255
  Y = Tensor(rng.integers(0, 10, bs * 4).astype(np.int32), device=f"{kind}:0")
  devices = devices_of(kind, count) if count > 1 else None
  if devices:
    for p in nn.state.get_parameters(model): p.to_(devices)
  step = make_train_step(model, X.realize(), Y, bs, devices)
  times = []
  for _ in range(steps + 2):  # two warm-up steps: the first runs eagerly, the second captures the JIT
    st = time.perf_counter()
    step().item()
    times.append(time.perf_counter() - st)
  return statistics.median(times[2:])

def allreduce_time(kind: str, count: int, nbytes: int, ring: bool, reps: int = 5) -> float:
  """Median seconds to sum a float32 array of `nbytes` held on each of `count` devices into every one of them."""
  from tg import Device, Tensor, multi
  multi.use_ring = lambda devices, nbytes: ring  # both ways, whatever tg would pick
  devices = devices_of(kind, count)
  n = nbytes // 4
  x = Tensor(np.ones((count, n), np.float32)).shard(devices, 0).realize()
  times = []
  for _ in range(reps + 1):
    st = time.perf_counter()
    x.sum(0).realize()
    for d in devices: Device[d].synchronize()
    times.append(time.perf_counter() - st)
  return statistics.median(times[1:])

def worker(label: str) -> dict:
  kind = "NV" if label == "NV model" else "CPU"
  model_name = CONFIGS[label][1]
  bs, steps = (int(os.environ.get("BS", 512)), int(os.environ.get("STEPS", 6))) if model_name == "convnet" else (64, 4)
  out: dict = {"bs": bs, "model": model_name, "step": {n: step_time(model_name, kind, n, bs, steps) for n in (1, 2)}, "allreduce": []}
  for nbytes in ALLREDUCE_BYTES[label]:
    for count in (2, 4):
      out["allreduce"].append((nbytes, count, allreduce_time(kind, count, nbytes, ring=False), allreduce_time(kind, count, nbytes, ring=True)))
  return out

def run(label: str) -> dict: return run_worker(__file__, label, {"DEV": CONFIGS[label][0], "MOCKGPU_COUNT": "4"})

if __name__ == "__main__":
  exit_on_help(__doc__)
  if (label := worker_label()) is not None:
    print(json.dumps(worker(label)))
    sys.exit(0)
  results = {label: run(label) for label in CONFIGS}
  print("data-parallel training step (jitted Adam step, batch split over the devices, weights replicated)")
  print(f"{'devices':10s} {'model':8s} {'batch':>6s} {'1 device (ms)':>14s} {'2 devices (ms)':>15s} {'speedup':>8s}")
  for label, r in results.items():
    one, two = r["step"]["1"], r["step"]["2"]
    print(f"{label:10s} {r['model']:8s} {r['bs']:6d} {one * 1e3:14.1f} {two * 1e3:15.1f} {one / two:7.2f}x")
  print("\nallreduce (sum of a float32 array on each device into every device), algorithm bandwidth = bytes / time")
  print(f"{'devices':10s} {'bytes':>10s} {'n':>2s} {'direct (ms)':>12s} {'ring (ms)':>10s} {'direct MB/s':>12s} {'ring MB/s':>10s} {'ring/direct':>12s}")
  for label, r in results.items():
    for nbytes, count, direct, ring in r["allreduce"]:
      print(f"{label:10s} {nbytes:10d} {count:2d} {direct * 1e3:12.2f} {ring * 1e3:10.2f} {nbytes / direct / 1e6:12.1f} {nbytes / ring / 1e6:10.1f} "
            f"{direct / ring:11.2f}x")
