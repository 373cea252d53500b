"""tg.helpers offers what tinygrad's docs import from tinygrad.helpers, and the progress bar reads like tqdm's."""
import io, os, pathlib, re, subprocess, sys
import numpy as np
import pytest
from tg import Tensor, dtypes
from tg import helpers, progress

ROOT = pathlib.Path(__file__).parents[2]

class FakeClock:
  def __init__(self): self.now = 100.0
  def __call__(self) -> float: return self.now

def bar_text(out: io.StringIO) -> list[str]: return [s.rstrip("\n") for s in out.getvalue().replace("\033[K", "").split("\r") if s.strip()]

def test_slow_iterations_read_seconds_per_item(monkeypatch):
  clock = FakeClock()
  monkeypatch.setattr(progress.time, "perf_counter", clock)
  out = io.StringIO()
  t = helpers.tqdm(total=4, desc="train", file=out)
  clock.now += 5.0
  t.update(2)  # 2 items in 5 s
  assert bar_text(out)[-1] == "train:  50%|##########..........| 2/4 [5.0s, 2.50s/it]"
  clock.now += 0.5
  t.update(2)  # 4 items in 5.5 s
  assert bar_text(out)[-1].endswith("4/4 [5.5s, 1.38s/it]")
  t.close()
  assert len(bar_text(out)) == 2, "closing doesn't draw the same state again"

def test_fast_iterations_read_items_per_second(monkeypatch):
  clock = FakeClock()
  monkeypatch.setattr(progress.time, "perf_counter", clock)
  out = io.StringIO()
  seen = []
  for i in (t := helpers.trange(3, file=out)):
    clock.now += 0.25
    seen.append(i)
  assert seen == [0, 1, 2] and t.n == 3
  assert bar_text(out)[-1].endswith("3/3 [0.8s, 4.00it/s]")
  out = io.StringIO()
  with helpers.tqdm(total=3_000_000, unit="B", unit_scale=True, file=out) as t:
    clock.now += 2.0
    t.update(3_000_000)
  assert bar_text(out)[-1].endswith("3.00M/3.00M [2.0s, 1.50MB/s]")

def test_disable_none_draws_only_on_a_terminal():
  out = io.StringIO()
  for _ in helpers.tqdm(range(3), disable=None, file=out): pass
  assert out.getvalue() == ""

def test_timing_prints_milliseconds(capsys):
  with helpers.Timing("step: ", on_exit=lambda ns: f" ({ns} ns)"): sum(range(1000))
  out = capsys.readouterr().out
  assert re.fullmatch(r"step:\s+\d+\.\d\d ms \(\d+ ns\)\n", out), out
  with helpers.Timing("quiet", enabled=False) as t: pass
  assert capsys.readouterr().out == "" and t.et >= 0

def test_tinygrad_helper_names():
  from ir import switches
  assert helpers.getenv is switches.getenv and helpers.Context is switches.Context and helpers.DEBUG is switches.DEBUG and helpers.DEV is switches.DEV
  assert helpers.partition([1, 2, 3, 4, 5], lambda x: x % 2) == ([1, 3, 5], [2, 4])
  assert helpers.prod((2, 3, 4)) == 24 and helpers.dedup([3, 1, 3]) == [3, 1] and helpers.flatten([[1], [2, 3]]) == [1, 2, 3]

def test_docs_examples_run_with_tinygrad_renamed_tg():
  """The quickstart's Timing example and the DEV/DEBUG/getenv imports, as tinygrad's docs write them, with s/tinygrad/tg/."""
  code = "\n".join([
    "from tinygrad import Tensor, Context, GlobalCounters",
    "from tinygrad.helpers import Timing, DEV, DEBUG, getenv, trange, colored",
    "with Timing('Time: '):",
    "  for _ in trange(2): x = (Tensor.rand(8, 8) @ Tensor.rand(8, 8)).numpy()",
    "with Context(DEBUG=0): print(DEV.device or 'default', DEBUG.value, getenv('NOT_SET_ANYWHERE', 7), x.shape)"]).replace("tinygrad", "tg")
  out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "DEV": "CPU"})
  assert out.returncode == 0, out.stderr[-2000:]
  lines = out.stdout.splitlines()
  assert re.fullmatch(r"Time:\s+\d+\.\d\d ms", lines[0]) and lines[1] == "CPU 0 7 (8, 8)"

# np.float64 is a subclass of Python's float, so it is taken as one (the default float dtype), as tinygrad takes it
@pytest.mark.parametrize("scalar,dtype", [(np.float32(1.5), dtypes.float32), (np.float64(-2.25), dtypes.float32), (np.int64(7), dtypes.int64),
                                          (np.uint8(200), dtypes.uint8), (np.bool_(True), dtypes.bool), (np.float16(0.5), dtypes.float16)])
def test_numpy_scalars_become_0d_tensors(scalar, dtype):
  """As in PyTorch (torch.tensor(np.float32(1.5)) is a float32 0-d tensor): a 0-d tensor of the scalar's own dtype."""
  t = Tensor(scalar)
  assert t.shape == () and t.dtype == dtype and t.item() == scalar.item()
  assert (Tensor([1.0, 2.0]) * Tensor(np.float32(2))).tolist() == [2.0, 4.0]
