"""The JIT's dispatch overhead: a TinyJit function of 100 tiny dependent kernels (one element each, so the kernels
themselves cost next to nothing), replayed; prints microseconds per kernel for the replay as a whole (waiting for
the device) and for the host's share (submitting only), on the default device, next to an eager run of the same
kernels. Switches: KERNELS (default 100), REPLAYS (default 50)."""
from __future__ import annotations
import os, statistics, time
import numpy as np
from tg import Device, Tensor, TinyJit
from script_help import exit_on_help

def chain(x: Tensor, n: int) -> Tensor:
  for i in range(n): x = (x * 1.0001 + i).contiguous()  # contiguous: one kernel per step
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
  eager = []
  for _ in range(5):
    st = time.perf_counter()
    chain(x, n).realize()
    dev.synchronize()
    eager.append(time.perf_counter() - st)
  print(f"{Device.DEFAULT}: {n} one-element kernels, median of {replays} replays (eager: median of 5 runs)")
  print(f"{'':24s} {'us/kernel':>10s}")
  print(f"{'JIT replay, to done':24s} {statistics.median(whole) / n * 1e6:10.2f}")
  print(f"{'JIT replay, host only':24s} {statistics.median(host) / n * 1e6:10.2f}")
  print(f"{'eager (no JIT)':24s} {statistics.median(eager) / n * 1e6:10.2f}")
