"""One schedule's intermediates share a block of host memory where their lifetimes don't overlap (tg/memory_plan.py):
values stay right, buffers live at the same time never overlap in memory, and what a tensor holds is never shared."""
import numpy as np
from ir.ops import Ops
from tg import Tensor, memory_plan
from tg import tensor as tensor_module

N = 1 << 17  # float32 elements: 512 KiB, above MIN_SHARED_BYTES

def _chain(x: Tensor, steps: int) -> Tensor:
  """`steps` kernels, each reading only the one before (contiguous() stops fusion)."""
  for i in range(steps): x = (x * 1.5 + i).contiguous()
  return x

def _chain_reference(x: np.ndarray, steps: int) -> np.ndarray:
  for i in range(steps): x = x * np.float32(1.5) + np.float32(i)
  return x

def _planned_items(monkeypatch) -> list:
  ran: list = []
  real = tensor_module.run_schedule
  monkeypatch.setattr(tensor_module, "run_schedule", lambda items: (ran.append(items), real(items))[1])
  return ran

def _byte_range(b) -> tuple[int, int]: return b.offset, b.offset + b.nbytes

def test_a_chain_of_intermediates_shares_memory_and_keeps_its_values(monkeypatch):
  ran = _planned_items(monkeypatch)
  x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
  out = _chain(Tensor(x), 6).sum()
  np.testing.assert_allclose(out.item(), _chain_reference(x, 6).sum(dtype=np.float64), rtol=1e-5)
  items = max(ran, key=len)
  views = {b for it in items for b in it.bufs if b.base is not b}
  assert len(views) >= 5 and len({v.base for v in views}) == 1  # every intermediate a view of one block
  block = next(iter(views)).base
  assert block.nbytes < sum(v.nbytes for v in views)  # and it is smaller than they are together

def test_buffers_live_at_the_same_time_never_overlap(monkeypatch):
  """Any pair of intermediates that one item uses together (or whose uses interleave) gets disjoint bytes."""
  ran = _planned_items(monkeypatch)
  rng = np.random.default_rng(1)
  a, b = (rng.standard_normal(N).astype(np.float32) for _ in range(2))
  ta, tb = _chain(Tensor(a), 2), _chain(Tensor(b), 3)  # two chains whose intermediates are live together
  out = ((ta + 1).contiguous() * (tb - 1).contiguous()).contiguous().sum()
  expect = ((_chain_reference(a, 2) + 1) * (_chain_reference(b, 3) - 1)).sum(dtype=np.float64)
  np.testing.assert_allclose(out.item(), expect, rtol=1e-4)
  items = max(ran, key=len)
  span: dict = {}
  for i, it in enumerate(items):
    for buf in it.bufs:
      if buf.base is not buf: span[buf] = (span.get(buf, (i, i))[0], i)
  assert len(span) >= 4
  for p in span:
    for q in span:
      if p is not q and span[p][0] <= span[q][1] and span[q][0] <= span[p][1]:  # live at the same time
        (s1, e1), (s2, e2) = _byte_range(p), _byte_range(q)
        assert e1 <= s2 or e2 <= s1, f"{p} and {q} overlap while both are live"

def test_a_tensor_realized_in_the_schedule_keeps_its_own_memory():
  """A tensor realized beside the others (here `kept`) must not be a view of the shared block, or a later schedule
  reusing that block would overwrite it."""
  x = np.random.default_rng(2).standard_normal(N).astype(np.float32)
  kept = _chain(Tensor(x), 3)
  total = _chain(kept, 3).sum()
  Tensor.realize_all(kept, total)
  buf = kept.uop.base.arg[0]
  assert buf.base is buf
  _chain(Tensor(x), 6).sum().item()  # another schedule of the same shapes takes the freed block again
  np.testing.assert_allclose(kept.numpy(), _chain_reference(x, 3), rtol=1e-6, atol=1e-5)

def test_offsets_first_fit_by_hand():
  """Three 1-page buffers: the first two live together, the third only after both: it reuses offset 0."""
  class Fake:
    def __init__(self, nbytes): self.nbytes = nbytes
  p, q, r = Fake(4096), Fake(4096), Fake(4096)
  at, size = memory_plan._offsets({p: (0, 1), q: (1, 2), r: (3, 4)})
  assert sorted([at[p], at[q]]) == [0, 4096] and at[r] == 0 and size == 8192
  at, size = memory_plan._offsets({p: (0, 1), q: (2, 3)})  # never live together: one page for both
  assert at[p] == at[q] == 0 and size == 4096

def test_small_and_copied_buffers_are_left_alone(monkeypatch):
  ran = _planned_items(monkeypatch)
  small = np.arange(64, dtype=np.float32)
  np.testing.assert_allclose(_chain(Tensor(small), 4).numpy(), _chain_reference(small, 4))
  assert all(b.base is b for items in ran for it in items for b in it.bufs)
  assert all(it.ast.op is not Ops.COPY or all(b.base is b for b in it.bufs) for items in ran for it in items)
