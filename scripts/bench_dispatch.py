"""The JIT's dispatch overhead: a TinyJit function of 100 tiny dependent kernels (one element each, so the kernels
themselves cost next to nothing), replayed; prints microseconds per kernel for the replay as a whole (waiting for
the device) and for the host's share (submitting only), on the default device, next to a TinyJit function of one
such kernel (the whole cost of a call: checking the inputs, submitting, waiting) and an eager run of the same
kernels (one realize for all, and a realize per kernel, alone and with LIVE other realized tensors alive, as a
model's weights are). Switches: KERNELS (default 100), REPLAYS (default 50), LIVE (default 10000)."""
from __future__ import annotations
import os, statistics, time
import numpy as np
from tg import Device, Tensor, TinyJit
from script_help import exit_on_help

def chain(x: Tensor, n: int, realize_each: bool = False) -> Tensor:
  for i in range(n):
    x = (x * 1.0001 + i).contiguous()  # contiguous: one kernel per step
    if realize_each: x.realize()
  return x

if __name__ == "__main__":
  exit_on_help(__doc__)
  n, replays = int(os.environ.get("KERNELS", 100)), int(os.environ.get("REPLAYS", 50))
  dev = Device[Device.DEFAULT]
  x = Tensor(np.ones(1, np.float32)).realize()
  step = TinyJit(lambda x: chain(x, n).realize())
  for _ in range(3): step(x)  # run, capture, first replay
  dev.synchronize()
  whole, host = [], []
  for _ in range(replays):
    st = time.perf_counter()
    step(x)
    submitted = time.perf_counter()
    dev.synchronize()
    done = time.perf_counter()
    host.append(submitted - st)
    whole.append(done - st)
  single = TinyJit(lambda x: chain(x, 1).realize())
  for _ in range(3): single(x)
  dev.synchronize()
  calls = []
  for _ in range(replays * 40):
    st = time.perf_counter()
    single(x)
    dev.synchronize()
    calls.append(time.perf_counter() - st)
  def eager_run(realize_each: bool) -> float:
    """Median seconds of 5 eager runs of the chain."""
    times = []
    for _ in range(5):
      st = time.perf_counter()
      chain(x, n, realize_each).realize()
      dev.synchronize()
      times.append(time.perf_counter() - st)
    return statistics.median(times)
  eager, eager_each = eager_run(False), eager_run(True)
  held = [Tensor.empty(4) for _ in range(int(os.environ.get("LIVE", 10000)))]
  eager_each_held = eager_run(True)
  print(f"{Device.DEFAULT}: {n} one-element kernels, median of {replays} replays (eager: median of 5 runs)")
  print(f"{'':32s} {'us/kernel':>10s}")
  print(f"{'JIT replay, to done':32s} {statistics.median(whole) / n * 1e6:10.2f}")
  print(f"{'JIT replay, host only':32s} {statistics.median(host) / n * 1e6:10.2f}")
  print(f"{'one-kernel JIT call, to done':32s} {statistics.median(calls) * 1e6:10.2f}")
  print(f"{'eager (no JIT)':32s} {eager / n * 1e6:10.2f}")
  print(f"{'eager, realize per kernel':32s} {eager_each / n * 1e6:10.2f}")
  print(f"{f'  the same, {len(held)} tensors live':32s} {eager_each_held / n * 1e6:10.2f}")
