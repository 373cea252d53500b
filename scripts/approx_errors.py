"""How far the default device's exp2 and sin are from float64 numpy, by magnitude: what a GPU's fast instructions
(PTX ex2.approx, and the sine tg renders) really give, measured on the GPU itself. The H200 showed sin.approx's error
is absolute (about 2^-21.5 even for tiny arguments) and ex2.approx is up to 2 ulp off; the NV model errs the same way.

  DEV=NV python scripts/approx_errors.py       # a real GPU
  python scripts/approx_errors.py              # the CPU device
Switch: N (points per range, default 200000)."""
from __future__ import annotations
import os, sys
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tg import Device, Tensor
from script_help import exit_on_help

def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
  """|got - want| in units of the float32 spacing at want."""
  return np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)

def rows(n: int) -> list[tuple[str, float, float]]:
  """(what, largest error in ulp, largest absolute error) per function and range of arguments (exp2: relative)."""
  rng, out = np.random.default_rng(0), []
  x = np.concatenate([np.linspace(-1, 1, n), rng.uniform(-125, 127, n)]).astype(np.float32)
  got, want = Tensor(x).exp2().numpy(), np.exp2(x.astype(np.float64))
  out.append(("exp2, x in [-125, 127] (rel)", ulps(got, want).max(), (np.abs(got - want) / want).max()))
  for lo, hi in ((0, 1e-6), (1e-6, 1e-3), (1e-3, 0.1), (0.1, 1), (1, np.pi), (np.pi, 1000)):
    s = (rng.uniform(lo, hi, n) * rng.choice([-1, 1], n)).astype(np.float32)
    got, want = Tensor(s).sin().numpy(), np.sin(s.astype(np.float64))
    out.append((f"sin, |x| in [{lo:g}, {hi:g})", ulps(got, want).max(), np.abs(got - want).max()))
  return out

def main() -> None:
  exit_on_help(__doc__)
  print(f"{Device.DEFAULT}: error against float64 numpy")
  print(f"{'function and arguments':<30} {'max ulp':>12} {'max error':>12}")
  for what, u, a in rows(int(os.environ.get("N", 200000))): print(f"{what:<30} {u:>12.2f} {a:>12.3e}")

if __name__ == "__main__": main()
