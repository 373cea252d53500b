"""Where the first training step's time goes: beautiful_mnist's model (BS=512), the first jitted Adam step on random
data, cold (an empty compile cache) and warm (the same cache again), each in a fresh process. Prints the time per
phase (model set-up; scheduling; lowering = optimization actions + lowering + rendering; waiting for compiles, which
run in worker processes while later kernels are lowered; the rest: running and Python), the kernel count, and PyTorch's
first step (when installed) in the same run.
Switches: BS (batch, default 512), ROUNDS (cold+warm pairs, default 1)."""
from __future__ import annotations
import json, os, sys, tempfile, time
from script_help import exit_on_help, run_worker, worker_label
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

def tg_first_step(bs: int) -> dict:
  """Seconds per phase of the model's set-up and first step, measured by wrapping tg's entry points."""
  import numpy as np
  import tg.realize as realize
  import tg.tensor as tensor
  from tg import Tensor
  spent = {"schedule": 0.0, "lower": 0.0, "compile": 0.0}
  kernels = []
  def timed(phase, fn):
    def wrapper(*args, **kwargs):
      st = time.perf_counter()
      try: return fn(*args, **kwargs)
      finally: spent[phase] += time.perf_counter() - st
    return wrapper
  tensor.create_schedule = timed("schedule", tensor.create_schedule)
  build = realize.CompiledRunner._build
  def counted_build(self, ast):
    build(self, ast)
    kernels.append(self)
  realize.CompiledRunner._build = counted_build
  from beautiful_mnist import Model, make_train_step
  st = time.perf_counter()
  rng = np.random.default_rng(0)
  X = Tensor(rng.integers(0, 256, (bs * 4, 1, 28, 28), dtype=np.uint8))
  Y = Tensor(rng.integers(0, 10, bs * 4).astype(np.int32))
  step = make_train_step(Model(), X, Y, bs)
  setup = time.perf_counter() - st
  setup_kernels = len(kernels)
  st = time.perf_counter()
  step().item()
  first = time.perf_counter() - st
  spent["lower"] = sum(k.search_s for k in kernels)  # set-up and first step
  spent["compile"] = sum(k.wait_s for k in kernels)  # waiting for binaries (and compiling those no worker started): compiles overlap lowering
  measured = {"setup": setup, "first": first, "kernels": len(kernels), "setup_kernels": setup_kernels, **spent}
  st = time.perf_counter()
  step().item()
  return {**measured, "second": time.perf_counter() - st}

def torch_first_step(bs: int) -> float | None:
  try: import torch
  except ImportError: return None
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  from bench_mnist import torch_step
  _, step = torch_step(bs)
  st = time.perf_counter()
  step()
  return time.perf_counter() - st

def run(what: str, cache: str) -> dict: return run_worker(__file__, what, {"CACHEDB": cache})

if __name__ == "__main__":
  exit_on_help(__doc__)
  bs = int(os.environ.get("BS", 512))
  if (what := worker_label()) is not None:
    print(json.dumps(tg_first_step(bs) if what == "tg" else {"first": torch_first_step(bs)}))
    sys.exit(0)
  rows = []
  for _ in range(int(os.environ.get("ROUNDS", 1))):
    with tempfile.TemporaryDirectory() as tmp:
      cache = os.path.join(tmp, "cache.db")
      rows += [("tg cold", run("tg", cache)), ("tg warm", run("tg", cache))]
  torch = run("torch", "")["first"]
  print(f"beautiful_mnist, batch {bs}: model set-up and first jitted Adam step, each row a fresh process (seconds)")
  print(f"{'':8s} {'set-up':>7s} {'1st step':>9s} {'2nd step':>9s} {'kernels':>8s} {'schedule':>9s} {'lower':>7s} {'compile':>8s} {'other':>7s} {'vs torch':>9s}")
  for name, r in rows:
    other = r["setup"] + r["first"] - r["schedule"] - r["lower"] - r["compile"]
    ratio = f"{r['first'] / torch:8.1f}x" if torch else "   n/a"
    print(f"{name:8s} {r['setup']:7.2f} {r['first']:9.2f} {r['second']:9.2f} {r['kernels']:8d} {r['schedule']:9.2f} {r['lower']:7.2f} "
          f"{r['compile']:8.2f} {other:7.2f} {ratio:>9s}")
  print(f"{'PyTorch':8s} {'':7s} {torch:9.2f}" if torch is not None else "PyTorch  not installed")
