"""DISK: files as device memory (read lazily, written by copies), no compute."""
import os, pathlib, subprocess, sys
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

def test_file_truncated_by_another_process(tmp_path):
  """Reads go through the file descriptor: a file cut short after it was opened gives an OSError naming the file, the
  range and the new size (through a mapping it would be SIGBUS, so the reads run in a child process)."""
  path = tmp_path / "data.bin"
  np.arange(4096, dtype=np.float32).tofile(path)
  code = f"""import os, sys
sys.path.insert(0, {str(pathlib.Path(__file__).resolve().parents[2])!r})
from tg import Tensor
t = Tensor(__import__("pathlib").Path({str(path)!r})).bitcast("float32")
print(t[:4].numpy().tolist(), flush=True)
os.truncate({str(path)!r}, 100)
print(t[10:20].numpy().tolist(), flush=True)
try: t[1000:2000].numpy()
except OSError as e: print("OSError", e)"""
  p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert p.returncode == 0, f"the reader died (exit {p.returncode}; -7 is SIGBUS): {p.stderr[-2000:]}"
  assert p.stdout.splitlines() == ["[0.0, 1.0, 2.0, 3.0]", str([float(i) for i in range(10, 20)]),
                                   f"OSError {path}: can't read 4000 bytes at offset 4000: the file is now 100 bytes (truncated by another process?)"]

def test_replaced_file_is_opened_again(tmp_path):
  """A new file at the path (os.replace, as safe_save does) is read anew; a buffer made before keeps the old file."""
  path = tmp_path / "data.bin"
  np.arange(8, dtype=np.uint8).tofile(path)
  old = Tensor(path)
  assert old.numpy().tolist() == list(range(8))
  np.arange(100, 108, dtype=np.uint8).tofile(tmp_path / "new.bin")
  os.replace(tmp_path / "new.bin", path)
  assert Tensor(path).numpy().tolist() == list(range(100, 108))
  assert old[2:4].numpy().tolist() == [2, 3]
