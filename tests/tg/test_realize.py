"""The realize loop: its caches stay bounded (compiled kernels and binaries are dropped least recently used first),
and a realize visits only the live tensors that may need its results."""
import numpy as np
import pytest
from ir.ops import Ops
from tg import Tensor, Device, realize
from codegen import compiler

def test_compiled_kernels_and_binaries_are_bounded(monkeypatch):
  monkeypatch.setattr(realize, "MAX_RUNNERS", 4)
  monkeypatch.setattr(compiler, "MAX_IN_MEMORY", 4)
  for n in range(2, 12):  # ten kernels, one per shape
    np.testing.assert_array_equal((Tensor(np.arange(n, dtype=np.int32)) * 3).numpy(), np.arange(n) * 3)
  assert len(realize._runners) <= 4 and len(Device[Device.DEFAULT].compiler._memory) <= 4
  np.testing.assert_array_equal((Tensor(np.arange(2, dtype=np.int32)) * 3).numpy(), [0, 3])  # one that fell out compiles again

def test_a_device_fault_while_loading_a_program_is_raised_not_retried(monkeypatch):
  """A program's upload waits for the device, so an earlier kernel's fault can surface there; it must reach the user
  (once it was taken for a bad cached binary, recompiled, and the faulted kernel's output silently read as zeros)."""
  from drivers.hcq import DeviceFault
  dev = Device[Device.DEFAULT]
  compiles, real_runtime = [], dev.runtime
  def runtime(*args):
    compiles.append(args[0])
    raise DeviceFault("earlier kernel faulted")
  monkeypatch.setattr(dev, "runtime", runtime)
  with pytest.raises(DeviceFault, match="earlier kernel faulted"): (Tensor([1.0, 2.0]) * 7.5).realize()
  assert len(compiles) == 1
  monkeypatch.setattr(dev, "runtime", real_runtime)
  assert (Tensor([1.0, 2.0]) * 7.5).tolist() == [7.5, 15.0]

def test_profile_records_kernels_of_devices_that_time_them_alone():
  """A device without HCQ queues (NULL here; CL, WEBGPU, CUDA) gets an event per kernel, on the host's clock."""
  from drivers.hcq import profile_events
  from ir.switches import Context
  before = len(profile_events)
  with Context(PROFILE=1): (Tensor.ones(8, device="NULL").contiguous() * 2).realize()
  new = [e for e in profile_events[before:] if e.device == "NULL"]
  assert [e.name[:2] for e in new] == ["E_"] * len(new) and new and all(e.start_us <= e.end_us for e in new)

def test_only_tensors_that_may_need_a_realizes_results_are_visited_by_it():
  """A realize updates the live tensors whose graphs may contain what it computed; tensors reading buffers (a model's
  weights) are not among them, so a realize costs the same however many of those are alive."""
  weights = [Tensor.ones(3).contiguous().realize() for _ in range(3)] + [Tensor.empty(2)]
  lazy = weights[0] * 2
  reader = lazy + 1  # reads lazy's node: realizing lazy must point it at lazy's new buffer
  assert all(id(w) not in Tensor._pending for w in weights) and id(lazy) in Tensor._pending
  lazy.realize()
  assert id(lazy) not in Tensor._pending and id(reader) in Tensor._pending
  assert any(u.op is Ops.BUFFER and u.arg[0] is lazy.uop.base.arg[0] for u in reader.uop.toposort())
  np.testing.assert_array_equal(reader.numpy(), [3, 3, 3])
  assert id(reader) not in Tensor._pending

def test_a_realized_split_reduction_reads_its_buffer_afterwards():
  """A reduction big enough to be split in two kernels, realized, is its stored result afterwards: nothing is
  computed again when it is read (its tensor once kept the graph, and every read ran both kernels again)."""
  from drivers.device import GlobalCounters
  from tg.tensor import _is_realized
  x = np.random.default_rng(0).standard_normal((64, 4, 32, 32)).astype(np.float32)  # 65536 summed into each of 4
  for realize_with_consumer in (False, True):
    s = Tensor(x).sum((0, 2, 3))
    if realize_with_consumer: Tensor.realize_all(s, s * 2)  # the second kernel could be fused into the consumer
    else: s.realize()
    assert _is_realized(s.uop)
    before = GlobalCounters.kernel_count
    np.testing.assert_allclose(s.numpy(), x.sum((0, 2, 3), dtype=np.float64), rtol=1e-5)
    assert GlobalCounters.kernel_count == before
