"""Matmul speed beyond squares: tg's TinyJit replay of x @ w next to numpy's product for random (rows, k, columns)
drawn (seeded) from sizes with primes, odd counts and powers of two among them, each side timed after a pause so that
numpy's worker threads have gone idle (bench_ops.best: without it they spin on a core and halve tg's speed); prints a
row per shape with tg/numpy (above 1: tg is faster), then the shapes under SLOW. Switches: COUNT (shapes, default 40),
SEED (default 0), MAX_MACS (largest product in multiply-adds, default 2**30)."""
from __future__ import annotations
import os, sys
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tg import Device, Tensor, TinyJit
from bench_ops import best
from script_help import exit_on_help

SIZES = (1, 3, 8, 17, 31, 64, 100, 127, 200, 255, 256, 300, 384, 500, 512, 640, 777, 1000, 1024, 1500, 2048)
SLOW = 0.7  # tg/numpy under which a shape is listed again at the end

def shapes(count: int, seed: int, max_macs: int) -> list[tuple[int, int, int]]:
  """`count` (rows, k, columns) triples of SIZES, each product at most max_macs multiply-adds."""
  rng, out = np.random.default_rng(seed), []
  while len(out) < count:
    n, k, m = (int(v) for v in rng.choice(SIZES, 3))
    if n * k * m <= max_macs: out.append((n, k, m))
  return out

def seconds(n: int, k: int, m: int, rng: np.random.Generator) -> tuple[float, float]:
  """(tg's replay, numpy's product) of one shape, in seconds per call."""
  a, b = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((k, m), dtype=np.float32)
  ta, tb = Tensor(a).realize(), Tensor(b).realize()
  replay = TinyJit(lambda: (ta @ tb).realize())
  return best(lambda: (replay(), Device["CPU"].synchronize())), best(lambda: a @ b)

if __name__ == "__main__":
  exit_on_help(__doc__)
  count, seed, max_macs = int(os.environ.get("COUNT", 40)), int(os.environ.get("SEED", 0)), int(os.environ.get("MAX_MACS", 2**30))
  rng = np.random.default_rng(seed + 1)
  print(f"{'rows':>5s} {'k':>5s} {'cols':>5s} {'tg JIT us':>10s} {'numpy us':>10s} {'tg/numpy':>9s}", flush=True)
  slow = []
  for n, k, m in shapes(count, seed, max_macs):
    tg_s, np_s = seconds(n, k, m, rng)
    line = f"{n:5d} {k:5d} {m:5d} {tg_s * 1e6:10.1f} {np_s * 1e6:10.1f} {np_s / tg_s:8.2f}x"
    print(line, flush=True)
    if np_s / tg_s < SLOW: slow.append(line)
  print(f"{len(slow)} of {count} shapes under {SLOW}x numpy" + (":" if slow else ""))
  for line in slow: print(line)
