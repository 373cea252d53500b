"""Kernel speed on this CPU: tg (heuristics eagerly, the same under TinyJit, and BEAM=2's kernels under TinyJit) next
to numpy and, when installed, PyTorch, measured in the same run, as GFLOPS or GB/s with tg/numpy ratios and, for
GFLOPS cases, the fraction of this CPU's fp32 peak (measured first with register-only FMA chains on tg's threads) and
peak/numpy, the most any kernel's ratio to numpy could be; plus the median build time (optimize + lower + compile) per
kernel. The eager column pays for building and scheduling the graph at every call; the JIT columns are the kernels and
their launch. Each side is timed after a pause, so another library's worker threads that spin after a call
(OpenBLAS's, OpenMP's) have gone idle. Switches: REPEAT (timed runs per case, default 5; they go on until they have
lasted 0.2 s), SIZES (matmul sizes, default 256,512,1024,2048,4096; then a.T @ b at 1024, a weight gradient's form)."""
from __future__ import annotations
import os, statistics, sys, time
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tg import Tensor, Context, Device, TinyJit
from tg.realize import _runners
from drivers.elf import LoadedImage
from ir.switches import NUM_CPU_THREADS
from script_help import exit_on_help

REPEAT = int(os.environ.get("REPEAT", 5))

SETTLE_S = 0.3  # OpenBLAS's threads spin for about 2**28 cycles after a call before they sleep

MIN_TIMED_S = 0.2  # and the timed runs last at least this long: the first replays after a BEAM search run slow (256
                   # and 512 matmuls at one thread's speed in 5 of 6 processes with 5 runs, none with 20)

def best(fn, repeat: int = REPEAT) -> float:
  time.sleep(SETTLE_S)
  fn()
  times: list[float] = []
  while len(times) < repeat or sum(times) < MIN_TIMED_S:
    st = time.perf_counter()
    fn()
    times.append(time.perf_counter() - st)
  return min(times)

def tg_time(make, beam: int, jit: bool = False) -> float:
  """Seconds per call of `make().realize()` (eager: building, scheduling and launching the graph each call) or, with
  `jit`, of its TinyJit replay (the kernels and their launch only), waiting for the device each time."""
  realized = TinyJit(lambda: make().realize()) if jit else lambda: make().realize()
  def run():
    realized()
    Device["CPU"].synchronize()
  with Context(BEAM=beam): return best(run)

def torch_time(fn) -> float | None:
  try: import torch
  except ImportError: return None
  return best(lambda: fn(torch))

CHAINS = 12  # independent FMA chains: enough to cover the FMA latency on every port

def peak_ir(lanes: int, steps: int) -> str:
  """An entry (tg's argv ABI) that runs `steps` x CHAINS vector FMAs on registers per iteration and stores their sum."""
  v = f"<{lanes} x float>"
  acc = [f"%acc{c}" for c in range(CHAINS)]
  # each chain starts from its own value: chains alike in every step are one chain to a compiler that finds equal phis
  phis = [f"  {a} = phi {v} [splat (float {1 + c / 16}), %outer], [{a}.n, %inner]" for c, a in enumerate(acc)]
  fmas = [f"  {a}.n = call {v} @llvm.fma.v{lanes}f32({v} {a}, {v} splat (float 0.5), {v} splat (float 0.25))" for a in acc]
  sums = [f"  %s{c} = fadd {v} %s{c - 1}, {acc[c]}.n" if c else f"  %s0 = fadd {v} zeroinitializer, %acc0.n" for c in range(CHAINS)]
  return "\n".join([f"declare {v} @llvm.fma.v{lanes}f32({v}, {v}, {v})",
    "define void @peak(ptr %argv, i32 %start, i32 %end) {", "entry:", "  br label %outer",
    "outer:", "  %i = phi i32 [%start, %entry], [%i1, %store]", "  %go = icmp slt i32 %i, %end", "  br i1 %go, label %inner, label %out",
    "inner:", "  %k = phi i32 [0, %outer], [%k1, %inner]", *phis, *fmas, "  %k1 = add i32 %k, 1",
    f"  %more = icmp slt i32 %k1, {steps}", "  br i1 %more, label %inner, label %store",
    "store:", *sums, "  %buf.i = load i64, ptr %argv", "  %buf = inttoptr i64 %buf.i to ptr",
    f"  store {v} %s{CHAINS - 1}, ptr %buf, align 4", "  %i1 = add i32 %i, 1", "  br label %outer", "out:", "  ret void", "}", ""])

def peak_gflops(iterations: int = 2000, steps: int = 1000) -> float:
  """This CPU's fp32 FMA peak on all of tg's threads (GFLOPS): register-only FMA chains, split across threads as
  tg's kernels are."""
  dev = Device["CPU"]
  lanes, threads = dev.renderer.vector_width, NUM_CPU_THREADS.value
  image = LoadedImage(dev.compiler.compile(peak_ir(lanes, steps)))
  out = np.zeros(lanes, np.float32)
  argv = np.array([out.ctypes.data], np.int64)
  pool = dev.pool(threads)
  run = lambda: pool.run(image.symbols["peak"], argv.ctypes.data, iterations, threads * 4, wake=True)
  return iterations * steps * CHAINS * lanes * 2 / best(run) / 1e9

def cases():
  rng = np.random.default_rng(0)
  for n in [int(s) for s in os.environ.get("SIZES", "256,512,1024,2048,4096").split(",")]:
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    ta, tb = Tensor(a).realize(), Tensor(b).realize()
    yield (f"matmul {n}", 2 * n ** 3, "GFLOPS", lambda ta=ta, tb=tb: ta @ tb, lambda a=a, b=b: a @ b,
           lambda torch, a=a, b=b: torch.from_numpy(a) @ torch.from_numpy(b))
  a, b = rng.random((1024, 1024), dtype=np.float32), rng.random((1024, 1024), dtype=np.float32)
  ta, tb = Tensor(a).realize(), Tensor(b).realize()
  yield ("matmul 1024 a.T@b", 2 * 1024 ** 3, "GFLOPS", lambda: ta.T @ tb, lambda: a.T @ b, lambda torch: torch.from_numpy(a).T @ torch.from_numpy(b))
  n = 16 * 1024 * 1024  # 64 MiB of float32
  x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
  tx, ty = Tensor(x).realize(), Tensor(y).realize()
  yield ("add 64 MiB", 3 * n * 4, "GB/s", lambda: tx + ty, lambda: x + y, lambda torch: torch.from_numpy(x) + torch.from_numpy(y))
  m = x.reshape(4096, 4096)
  tm = Tensor(m).realize()
  yield ("row sum 64 MiB", n * 4, "GB/s", lambda: tm.sum(1), lambda: m.sum(1), lambda torch: torch.from_numpy(m).sum(1))
  yield ("row cumsum 64 MiB", 2 * n * 4, "GB/s", lambda: tm.cumsum(1), lambda: m.cumsum(1), lambda torch: torch.from_numpy(m).cumsum(1))
  def np_softmax(a):
    e = np.exp(a - a.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)
  yield ("row softmax 64 MiB", 2 * n * 4, "GB/s", lambda: tm.softmax(1), lambda: np_softmax(m), lambda torch: torch.from_numpy(m).softmax(1))
  img, w = rng.random((256, 1, 28, 28), dtype=np.float32), rng.random((32, 1, 5, 5), dtype=np.float32)
  timg, tw = Tensor(img).realize(), Tensor(w).realize()
  windows = np.lib.stride_tricks.sliding_window_view(img, (5, 5), axis=(2, 3))
  yield ("conv2d mnist l1", 2 * 256 * 32 * 24 * 24 * 25, "GFLOPS", lambda: timg.conv2d(tw), lambda: np.einsum("bcyxij,ocij->boyx", windows, w, optimize=True),
         lambda torch: torch.nn.functional.conv2d(torch.from_numpy(img), torch.from_numpy(w)))

if __name__ == "__main__":
  exit_on_help(__doc__)
  peak = peak_gflops()
  print(f"fp32 peak of this CPU on {NUM_CPU_THREADS.value} threads (register-only FMA chains): {peak:.1f} GFLOPS")
  print(f"{'case':18s} {'unit':7s} {'tg':>8s} {'tg JIT':>8s} {'BEAM=2 JIT':>10s} {'numpy':>8s} {'torch':>8s} {'tg/numpy':>9s} {'JIT/numpy':>10s} "
        f"{'BEAM/numpy':>11s} {'JIT/peak':>9s} {'numpy/peak':>11s} {'peak/numpy':>11s}", flush=True)
  for name, work, unit, make, np_fn, torch_fn in cases():
    times = tg_time(make, 0), tg_time(make, 0, jit=True), tg_time(make, 2, jit=True), best(np_fn), torch_time(torch_fn)
    heur, jit, beam, np_v, torch_v = (work / t / 1e9 if t else None for t in times)
    tv = f"{torch_v:8.1f}" if torch_v else f"{'-':>8s}"
    of_peak = f"{jit / peak:9.0%} {np_v / peak:11.0%} {peak / np_v:10.2f}x" if unit == "GFLOPS" else ""
    print(f"{name:18s} {unit:7s} {heur:8.1f} {jit:8.1f} {beam:10.1f} {np_v:8.1f} {tv} {heur / np_v:8.2f}x {jit / np_v:9.2f}x "
          f"{beam / np_v:10.2f}x {of_peak}", flush=True)
  builds = sorted(r.build_s for r in _runners.values() if r.search_s < 0.5)  # heuristic kernels (BEAM search time excluded)
  print(f"median build time per kernel (optimize, lower, render, compile): {statistics.median(builds) * 1e3:.0f} ms over {len(builds)} kernels")
