"""What each DEBUG level prints while realizing a small program (each test uses its own shape so it compiles fresh)."""
import re
from tg import Tensor, Context

def run(level: int, n: int, capsys) -> str:
  with Context(DEBUG=level): ((Tensor.ones(n, n).contiguous() * 2).sum(1)).realize()
  return capsys.readouterr().out

def test_debug1_schedule_line(capsys):
  assert re.search(r"scheduled\s+2 kernels in .* ms", run(1, 3, capsys))

def test_debug2_one_line_per_kernel(capsys):
  out = run(2, 5, capsys)
  lines = [l for l in out.splitlines() if "*** CPU" in l]
  assert len(lines) == 2
  assert all(re.search(r"arg\s+\d+ mem\s+[\d.]+ GB tm\s+[\d.]+us/\s*[\d.]+ms \(\s*\d+ GFLOPS", l) for l in lines)
  assert "E_25" in lines[0] and "r_5_5" in lines[1]

def test_debug3_applied_opts(capsys): assert "opts:" in run(3, 6, capsys)
def test_debug4_generated_code(capsys): assert "define void @" in run(4, 7, capsys)
def test_debug5_kernel_uops(capsys): assert re.search(r"c\d+ = UOp\(Ops.REDUCE_AXIS", run(5, 8, capsys))
def test_debug6_linearized_uops(capsys):
  out = run(6, 9, capsys)
  assert re.search(r"RANGE", out) and re.search(r"ENDRANGE", out) and "DEFINE_ACC" in out
def test_debug7_assembly(capsys):
  out = run(7, 10, capsys)
  assert re.search(r"^\s+ret", out, re.M) and "buffer: allocate" in out

def test_debug7_assembly_when_the_binary_is_cached(capsys):
  """A kernel whose binary is already in the compile cache still shows its assembly at DEBUG=7."""
  from tg import realize
  before = set(realize._runners)
  run(0, 11, capsys)
  for k in set(realize._runners) - before: del realize._runners[k]  # the next realize builds its runners again, from cached binaries
  out = run(7, 11, capsys)
  assert len(re.findall(r"^\s+ret", out, re.M)) >= 2, "one assembly listing per kernel"

def test_debug2_times_jit_replays_to_completion(capsys):
  """A replayed JIT graph is timed until the device is done, not until it was submitted: the counted time is most of the
  call's wall time, and the result is complete when the call returns."""
  import time
  import numpy as np
  from tg import TinyJit, GlobalCounters, Device
  @TinyJit
  def chain(a: Tensor, b: Tensor) -> Tensor: return (((a @ b) @ b) @ b @ b).realize()
  a, b = Tensor.rand(512, 512).realize(), (Tensor.rand(512, 512) / 256).realize()
  with Context(DEBUG=2):
    for _ in range(3): chain(a, b)
    capsys.readouterr()
    dev = Device[a.device]
    t0, st = GlobalCounters.time_sum_s, time.perf_counter()
    out = chain(a, b)
    wall = time.perf_counter() - st
    assert dev.timeline_signal.value >= dev.timeline_value - 1, "the replay returned before the device finished"
  counted = GlobalCounters.time_sum_s - t0
  assert counted >= 0.5 * wall, f"replay counted {counted * 1e3:.2f} ms of {wall * 1e3:.2f} ms wall time"
  assert re.search(r"batched \d+ .* tm\s+[\d.]+us/\s*[\d.]+ms", capsys.readouterr().out)
  an, bn = a.numpy().astype(np.float64), b.numpy().astype(np.float64)
  np.testing.assert_allclose(out.numpy(), an @ bn @ bn @ bn @ bn, rtol=1e-3)
