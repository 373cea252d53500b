"""The CPU device's JIT graphs: stretches of single-threaded kernels run as one call of a compiled batch function
(checked by what the compute engine is given and by the results against numpy); kernels with enough work for the
thread pool, and replays with new inputs and Variable values, stay right."""
import numpy as np
import pytest
from ir.switches import Context
from drivers.cpu import BatchProgram, CPUProgram
from drivers.device import Device
from drivers.hcq import SoftwareEngine
from tg import Tensor, TinyJit, Variable

def executed(monkeypatch) -> list[list]:
  """The programs of each command list the CPU's compute engine is given from now on."""
  seen: list[list] = []
  submit = SoftwareEngine.submit
  def record(self, words):
    if self.dev is Device["CPU"] and self.name == "compute":
      seen.append([type(words[i + 1]) for i, w in enumerate(words) if isinstance(w, str) and w == "exec"])
    submit(self, words)
  monkeypatch.setattr(SoftwareEngine, "submit", record)
  return seen

def test_a_replay_runs_its_small_kernels_as_one_batch(monkeypatch):
  @TinyJit
  def step(x):
    for i in range(10): x = (x * 2 + i).contiguous()
    return x.realize()
  ref = lambda v: [v := v * 2 + i for i in range(10)][-1]
  for k in range(3): step(Tensor(np.full(4, k, np.float32), device="CPU"))
  seen = executed(monkeypatch)
  for k in range(3, 6):
    np.testing.assert_allclose(step(Tensor(np.full(4, k, np.float32), device="CPU")).numpy(), np.full(4, ref(float(k)), np.float32))
  assert seen[0] == [BatchProgram], seen  # ten kernels, one call, with each replay's new input
  assert seen[1:] and all(s == seen[0] for s in seen)

def test_kernels_that_use_the_thread_pool_run_on_their_own(monkeypatch):
  big = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)
  with Context(NUM_CPU_THREADS=2):
    @TinyJit
    def step(x, y):
      s = (x + 1).contiguous()
      s = (s * 3).contiguous()
      return ((y * 2).contiguous() + s.sum()).realize()  # the 1M-element kernel is split over threads
    for k in range(3): step(Tensor(np.full(4, k, np.float32), device="CPU"), Tensor(big, device="CPU"))
    seen = executed(monkeypatch)
    out = step(Tensor(np.full(4, 5.0, np.float32), device="CPU"), Tensor(big, device="CPU")).numpy()
  np.testing.assert_allclose(out, big * 2 + 4 * 18, rtol=1e-5)
  assert CPUProgram in seen[0] and BatchProgram in seen[0], seen

@pytest.mark.parametrize("n", [2, 7, 3])
def test_variable_values_reach_batched_kernels(n):
  a = np.arange(10, dtype=np.float32)
  @TinyJit
  def step(x, v):
    y = (x[:v] + 1).contiguous()
    return (y * v).contiguous().realize()
  x = Tensor(a, device="CPU").realize()
  for m in (4, 5): step(x, Variable("i", 1, 10).bind(m))  # captured with other values
  np.testing.assert_allclose(step(x, Variable("i", 1, 10).bind(n)).numpy(), (a[:n] + 1) * n)
