"""DISK: files as device memory (read lazily, written by copies), no compute."""
import numpy as np
import pytest
from tg import Tensor

def test_write_read_and_slices(tmp_path):
  path = tmp_path / "data.bin"
  t = Tensor.empty(4, device=f"disk:{path}", dtype="float32")
  t.assign(Tensor([1.0, 2.0, 3.0, 4.0]).to(t.device)).realize()
  assert np.fromfile(path, np.float32).tolist() == [1, 2, 3, 4] and t.to("CPU").tolist() == [1, 2, 3, 4]
  t[1:3].assign(Tensor([9.0, 8.0]).to(t.device)).realize()
  assert np.fromfile(path, np.float32).tolist() == [1, 9, 8, 4]
  assert (Tensor(path)[4:12].bitcast("float32").to("CPU") * 2).tolist() == [18.0, 16.0]

def test_compute_on_disk_is_refused_at_the_op(tmp_path):
  path = tmp_path / "x.bin"
  np.arange(8, dtype=np.uint8).tofile(path)
  t = Tensor(path)
  with pytest.raises(RuntimeError, match=r"DISK:.*can't compute \(ADD\).*\.to"): t + 1
