"""The checks a first run on a GPU makes, shared by the vendor scripts (nv_check.py, amd_check.py): elementwise,
reduction, matmul (fp32, fp16, bf16), convolution and a TinyJit MNIST training step against numpy, then matmul TFLOPS
(fp32, and fp16 on tensor cores) next to the GPU's published peak, host<->device copy bandwidth and kernel launch
latency. `run` prints one table, then each failure whole; a device that can't open is reported, not fatal.
Switches: N (matmul size for the timing, default 4096; 64 on a model), LAUNCHES (default 1000; 20 on a model),
COPY_MB (copy size, default 256; 1 on a model)."""
from __future__ import annotations
import os, sys, time, traceback
from typing import Callable
import numpy as np
from tg import Tensor, TinyJit, dtypes, Device
from ir.switches import getenv

ON_MODEL = "MOCK" in os.environ.get("DEV", "")
N = getenv("N", 64 if ON_MODEL else 4096)
LAUNCHES = getenv("LAUNCHES", 20 if ON_MODEL else 1000)
COPY_MB = getenv("COPY_MB", 1 if ON_MODEL else 256)

def close(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str:
  err = float(np.max(np.abs(got.astype(np.float64) - want) / (atol + rtol * np.abs(want)))) if want.size else 0.0
  return f"ok ({err:.2f} of tol)" if err <= 1 else f"FAIL ({err:.1f}x tol)"

def check_elementwise(dev: str) -> str:
  a, b = np.random.default_rng(0).standard_normal((2, 1 << 16), dtype=np.float32)
  got = (Tensor(a, device=dev) * Tensor(b, device=dev) + 1).relu().exp2().numpy()
  return close(got, np.exp2(np.maximum(a * b + 1, 0)), 1e-5, 1e-6)

def check_reduction(dev: str) -> str:
  a = np.random.default_rng(1).standard_normal((256, 1000), dtype=np.float32)
  t = Tensor(a, device=dev)
  return close(np.concatenate([t.sum(1).numpy(), t.max(0).numpy()]), np.concatenate([a.sum(1), a.max(0)]), 1e-4, 1e-4)

def check_matmul(dev: str, dtype, rtol: float) -> str:
  rng = np.random.default_rng(2)
  a, b = rng.standard_normal((2, 128, 128), dtype=np.float32)
  got = (Tensor(a, device=dev).cast(dtype) @ Tensor(b, device=dev).cast(dtype)).float().numpy()
  ref = a.astype(np.float64) @ b.astype(np.float64)
  return close(got, ref, rtol, rtol * 4)

def check_conv(dev: str) -> str:
  rng = np.random.default_rng(4)
  x, w = rng.standard_normal((2, 3, 12, 12), dtype=np.float32), rng.standard_normal((4, 3, 3, 3), dtype=np.float32)
  got = Tensor(x, device=dev).conv2d(Tensor(w, device=dev), padding=1).numpy()
  xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
  ref = np.zeros((2, 4, 12, 12))
  for i in range(3):
    for j in range(3): ref += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 12, j:j + 12], w[:, :, i, j].astype(np.float64))
  return close(got, ref, 1e-4, 1e-4)

def mnist_reference(x, y, w1, w2, lr: float, steps: int):
  """The same MLP step in numpy: relu(x @ w1) @ w2, mean cross-entropy, SGD."""
  for _ in range(steps):
    h = x @ w1
    a = np.maximum(h, 0)
    logits = a @ w2
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    d = p.copy()
    d[np.arange(len(y)), y] -= 1
    d /= len(y)
    gw2 = a.T @ d
    gw1 = x.T @ ((d @ w2.T) * (h > 0))
    w1, w2 = w1 - lr * gw1, w2 - lr * gw2
  return w1, w2

def check_mnist_step(dev: str) -> str:
  rng = np.random.default_rng(3)
  x = rng.random((64, 784), dtype=np.float32)
  y = rng.integers(0, 10, 64).astype(np.int32)
  w1, w2 = (rng.standard_normal(s, dtype=np.float32) * 0.05 for s in ((784, 128), (128, 10)))
  W1, W2 = Tensor(w1, device=dev, requires_grad=True), Tensor(w2, device=dev, requires_grad=True)
  X, Y = Tensor(x, device=dev), Tensor(y, device=dev)
  @TinyJit
  def step():
    loss = (X @ W1).relu().matmul(W2).sparse_categorical_crossentropy(Y)
    W1.grad = W2.grad = None
    loss.backward()
    W1.assign(W1 - 0.1 * W1.grad).realize()
    W2.assign(W2 - 0.1 * W2.grad).realize()
    return loss.realize()
  for _ in range(4): step()
  r1, r2 = mnist_reference(x.astype(np.float64), y, w1.astype(np.float64), w2.astype(np.float64), 0.1, 4)
  return close(np.concatenate([W1.numpy().ravel(), W2.numpy().ravel()]), np.concatenate([r1.ravel(), r2.ravel()]), 1e-3, 1e-5)

def time_matmul(dev: str, dtype, peak: Callable[[str, str], float | None]) -> str:
  a, b = (Tensor.rand(N, N, device=dev).cast(dtype).realize() for _ in range(2))
  best = float("inf")
  for _ in range(3):
    Device[dev].synchronize()
    st = time.perf_counter()
    (a @ b).realize()
    Device[dev].synchronize()
    best = min(best, time.perf_counter() - st)
  tflops, top = 2 * N ** 3 / best / 1e12, None if ON_MODEL else peak(dev, "fp32" if dtype == dtypes.float32 else "fp16")
  return f"{tflops:.3f} TFLOPS (N={N})" + (f", {100 * tflops / top:.0f}% of {top:g} peak" if top else "")

def time_copies(dev: str) -> str:
  host = np.random.default_rng(5).random(COPY_MB << 18, dtype=np.float32)
  Tensor(host[:1024], device=dev).realize()
  Device[dev].synchronize()
  st = time.perf_counter()
  t = Tensor(host, device=dev).realize()
  Device[dev].synchronize()
  h2d = time.perf_counter() - st
  st = time.perf_counter()
  back = t.numpy()
  d2h = time.perf_counter() - st
  ok = "" if np.array_equal(back, host) else " (DATA MISMATCH)"
  return f"H2D {host.nbytes / h2d / 1e9:.2f} GB/s, D2H {host.nbytes / d2h / 1e9:.2f} GB/s ({COPY_MB} MB){ok}"

def time_launch(dev: str) -> str:
  x = Tensor.zeros(1, device=dev).contiguous().realize()
  (x + 1).realize()
  Device[dev].synchronize()
  st = time.perf_counter()
  for _ in range(LAUNCHES): x.assign(x + 1).realize()
  Device[dev].synchronize()
  per = (time.perf_counter() - st) / LAUNCHES
  return f"{per * 1e6:.1f} us/launch" + ("" if x.item() == LAUNCHES + 0 else " (WRONG COUNT)")

def checks(peak: Callable[[str, str], float | None]) -> list[tuple[str, Callable[[str], str]]]:
  return [("elementwise f32", check_elementwise), ("reduction f32", check_reduction),
          ("matmul f32", lambda d: check_matmul(d, dtypes.float32, 1e-4)), ("matmul f16", lambda d: check_matmul(d, dtypes.float16, 2e-2)),
          ("matmul bf16", lambda d: check_matmul(d, dtypes.bfloat16, 6e-2)), ("conv2d f32", check_conv), ("TinyJit MNIST step", check_mnist_step),
          ("matmul f32 speed", lambda d: time_matmul(d, dtypes.float32, peak)),
          ("matmul f16 speed (TC)", lambda d: time_matmul(d, dtypes.float16, peak)), ("copy bandwidth", time_copies), ("launch latency", time_launch)]

def run(devices: list[str], peak: Callable[[str, str], float | None]) -> None:
  """Runs every check on each device, prints the table and the failures, and exits 1 if anything failed."""
  named = checks(peak)
  results: dict[str, list[str]] = {}
  failures: list[str] = []
  for dev in devices:
    try: Device[dev]
    except Exception as e:
      results[dev] = ["unavailable (below)"] + [""] * (len(named) - 1)
      failures.append(f"{dev} bring-up: {e}" + (f"\n  caused by {type(e.__cause__).__name__}: {e.__cause__}" if e.__cause__ else ""))
      continue
    row = []
    for name, fn in named:
      st = time.perf_counter()
      try: row.append(fn(dev))
      except Exception as e:
        if getenv("DEBUG", 0) >= 1: traceback.print_exc()
        row.append(f"ERROR {type(e).__name__} (below)")
        failures.append(f"{dev} {name}: {type(e).__name__}: {e}")
      print(f"{dev:5s} {name:20s} {row[-1]}  [{time.perf_counter() - st:.1f} s]", file=sys.stderr)
    results[dev] = row
  width = max(len(v) for r in results.values() for v in r) + 2
  print(f"{'check':22s}" + "".join(f"{d:{width}s}" for d in devices))
  for i, (name, _) in enumerate(named): print(f"{name:22s}" + "".join(f"{results[d][i]:{width}s}" for d in devices))
  for f in failures: print(f"\n{f}")
  sys.exit(1 if failures or any("FAIL" in v or "WRONG" in v or "MISMATCH" in v for r in results.values() for v in r) else 0)
