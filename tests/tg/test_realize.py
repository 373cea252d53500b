"""The realize loop's caches stay bounded: compiled kernels and binaries are dropped least recently used first."""
import numpy as np
from tg import Tensor, Device, realize
from codegen import compiler

def test_compiled_kernels_and_binaries_are_bounded(monkeypatch):
  monkeypatch.setattr(realize, "MAX_RUNNERS", 4)
  monkeypatch.setattr(compiler, "MAX_IN_MEMORY", 4)
  for n in range(2, 12):  # ten kernels, one per shape
    np.testing.assert_array_equal((Tensor(np.arange(n, dtype=np.int32)) * 3).numpy(), np.arange(n) * 3)
  assert len(realize._runners) <= 4 and len(Device[Device.DEFAULT].compiler._memory) <= 4
  np.testing.assert_array_equal((Tensor(np.arange(2, dtype=np.int32)) * 3).numpy(), [0, 3])  # one that fell out compiles again
