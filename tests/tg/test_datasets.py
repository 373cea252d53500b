"""MNIST loading from IDX files (gzipped or not), the MNIST_DIR switch, and the download path with the network faked.

The real files are the 9000/1000-image subset in /work/shared/datasets/mnist-mini; the reference values come from
reading those gzip IDX files here with gzip + struct."""
import gzip, io, json, os, pathlib, struct, subprocess, sys, urllib.error, urllib.request
import numpy as np
import pytest
from tg.nn import datasets
from tg.nn.datasets import MNIST_FILES, mnist, read_idx

MINI = pathlib.Path("/work/shared/datasets/mnist-mini")
REPO = pathlib.Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not MINI.is_dir(), reason="mnist-mini is not available")

def parse_idx_gz(path: pathlib.Path) -> tuple[tuple[int, ...], bytes]:
  """(dims, raw element bytes) of an unsigned-byte IDX file, read independently of tg."""
  with gzip.open(path, "rb") as f: raw = f.read()
  zero, kind, ndim = struct.unpack(">HBB", raw[:4])
  assert zero == 0 and kind == 0x08
  dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
  return dims, raw[4 + 4 * ndim:]

@pytest.fixture(scope="module")
def reference():
  ref = {}
  for name in MNIST_FILES:
    dims, body = parse_idx_gz(MINI / f"{name}.gz")
    ref[name] = (dims, body)
  return ref

def _check_loaded(arrays, reference):
  x_train, y_train, x_test, y_test = arrays
  assert x_train.shape == (9000, 1, 28, 28) and y_train.shape == (9000,)
  assert x_test.shape == (1000, 1, 28, 28) and y_test.shape == (1000,)
  xs = [t.numpy() for t in arrays]
  for a in xs: assert a.dtype == np.uint8
  for labels in (xs[1], xs[3]): assert labels.min() >= 0 and labels.max() <= 9 and len(np.unique(labels)) == 10
  dims, body = reference["train-labels-idx1-ubyte"]
  assert dims == (9000,) and int(xs[1][0]) == body[0] and bytes(xs[1][:50]) == body[:50]
  dims, body = reference["train-images-idx3-ubyte"]
  assert dims == (9000, 28, 28)
  assert xs[0][0, 0].tobytes() == body[:784]
  assert xs[0][-1, 0].tobytes() == body[-784:]
  assert xs[2][0, 0].tobytes() == reference["t10k-images-idx3-ubyte"][1][:784]
  assert int(xs[3][-1]) == reference["t10k-labels-idx1-ubyte"][1][-1]
  assert xs[0].max() == 255 and xs[0][0].sum() > 0

def test_mnist_from_directory(reference):
  _check_loaded(mnist(directory=MINI), reference)
  _check_loaded(mnist(directory=str(MINI)), reference)

def test_mnist_from_env_switch(tmp_path):
  empty = tmp_path / "empty"
  empty.mkdir()
  script = f"""
import json, urllib.error, urllib.request
import numpy as np
from tg.nn.datasets import mnist
xt, yt, xv, yv = mnist()
out = {{"shapes": [list(t.shape) for t in (xt, yt, xv, yv)], "dtype": str(xt.numpy().dtype), "label0": int(yt.numpy()[0]),
        "pix0": xt.numpy()[0].reshape(-1).tolist()}}
def offline(*a, **k): raise urllib.error.URLError("offline")
urllib.request.urlopen = offline
try: mnist(directory={str(empty)!r})
except RuntimeError as e: out["explicit_dir_error"] = str(e)
print(json.dumps(out))
"""
  env = {**os.environ, "MNIST_DIR": str(MINI), "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
  r = subprocess.run([sys.executable, "-c", script], env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr
  out = json.loads(r.stdout.strip().splitlines()[-1])
  assert out["shapes"] == [[9000, 1, 28, 28], [9000], [1000, 1, 28, 28], [1000]]
  assert out["dtype"] == "uint8"
  _, labels = parse_idx_gz(MINI / "train-labels-idx1-ubyte.gz")
  _, images = parse_idx_gz(MINI / "train-images-idx3-ubyte.gz")
  assert out["label0"] == labels[0] and bytes(out["pix0"]) == images[:784]
  assert str(empty) in out.get("explicit_dir_error", ""), "directory= takes precedence over MNIST_DIR"

def test_uncompressed_idx_files(tmp_path, reference):
  for name in MNIST_FILES: (tmp_path / name).write_bytes(gzip.decompress((MINI / f"{name}.gz").read_bytes()))
  _check_loaded(mnist(directory=tmp_path), reference)

def test_mixed_compressed_and_uncompressed(tmp_path, reference):
  for i, name in enumerate(MNIST_FILES):
    src = (MINI / f"{name}.gz").read_bytes()
    if i % 2: (tmp_path / name).write_bytes(gzip.decompress(src))
    else: (tmp_path / f"{name}.gz").write_bytes(src)
  _check_loaded(mnist(directory=tmp_path), reference)

# ---------------- read_idx ----------------

def test_read_idx_wider_types(tmp_path):
  vals = np.array([[1, -2, 70000], [-(2**31), 2**31 - 1, 0]], dtype=">i4")
  p = tmp_path / "i4"
  p.write_bytes(b"\0\0\x0c\x02" + struct.pack(">II", 2, 3) + vals.tobytes())
  got = read_idx(p)
  assert got.shape == (2, 3) and got.dtype == np.int32 and got.dtype.isnative
  np.testing.assert_array_equal(got, vals.astype(np.int32))
  f = np.array([1.5, -0.25, 1e300], dtype=">f8")
  q = tmp_path / "f8.gz"
  q.write_bytes(gzip.compress(b"\0\0\x0e\x01" + struct.pack(">I", 3) + f.tobytes()))
  np.testing.assert_array_equal(read_idx(q), f.astype(np.float64))

def _corrupt_cases() -> dict[str, bytes]:
  labels_gz = (MINI / "train-labels-idx1-ubyte.gz").read_bytes()
  labels = gzip.decompress(labels_gz)
  mid = len(labels_gz) // 2
  return {
    "bad_magic": b"\x01\x02\x08\x01" + labels[4:],
    "bad_magic_gz": gzip.compress(b"PK\x03\x04" + labels[4:]),
    "empty": b"",
    "unknown_type": b"\0\0\x07\x01" + labels[4:],
    "truncated_header": b"\0\0\x08\x03" + struct.pack(">I", 10),
    "truncated_header_gz": gzip.compress(b"\0\0\x08\x02\0\0"),
    "size_short": labels[:-1],
    "size_long": labels + b"\0\0",
    "size_mismatch_i4": b"\0\0\x0c\x01" + struct.pack(">I", 2) + b"\0\0\0\1\0\0",
    "gzip_truncated": labels_gz[:mid],
    "gzip_bad_method": b"\x1f\x8b" + b"not really gzip" * 5,
    "gzip_bad_crc": labels_gz[:-8] + bytes(8),
    "gzip_corrupt_deflate": labels_gz[:mid] + bytes(b ^ 0xFF for b in labels_gz[mid:mid + 40]) + labels_gz[mid + 40:],
  }

@pytest.mark.parametrize("case", list(_corrupt_cases()) if MINI.is_dir() else [])
def test_read_idx_corrupt_files(tmp_path, case):
  p = tmp_path / f"{case}-file"
  p.write_bytes(_corrupt_cases()[case])
  with pytest.raises(ValueError) as e: read_idx(p)
  assert str(p) in str(e.value), f"message doesn't name the file: {e.value}"

def test_mnist_reports_corrupt_file(tmp_path):
  for name in MNIST_FILES: (tmp_path / f"{name}.gz").write_bytes((MINI / f"{name}.gz").read_bytes())
  bad = tmp_path / "t10k-labels-idx1-ubyte.gz"
  bad.write_bytes(bad.read_bytes()[:100])
  with pytest.raises(ValueError, match="t10k-labels-idx1-ubyte"): mnist(directory=tmp_path)

# ---------------- downloading (network faked) ----------------

class FakeResponse:
  def __init__(self, data: bytes, fail_after: int | None = None):
    self.buf, self.fail_after, self.served = io.BytesIO(data), fail_after, 0
    self.headers = {"content-length": str(len(data)), "Content-Length": str(len(data))}
  def __enter__(self): return self
  def __exit__(self, *a): return False
  def read(self, n: int = -1) -> bytes:
    if self.fail_after is not None and self.served >= self.fail_after: raise urllib.error.URLError("connection reset")
    chunk = self.buf.read(n)
    self.served += len(chunk)
    return chunk
  def close(self): pass

def test_offline_without_files_raises(tmp_path, monkeypatch):
  calls = []
  def offline(url, *a, **k):
    calls.append(url)
    raise urllib.error.URLError("Temporary failure in name resolution")
  monkeypatch.setattr(urllib.request, "urlopen", offline)
  target = tmp_path / "data" / "mnist"
  with pytest.raises(RuntimeError) as e: mnist(directory=target)
  msg = str(e.value)
  assert str(target) in msg and "MNIST_DIR" in msg
  assert calls and calls[0].endswith(".gz")
  leftovers = [p.name for p in tmp_path.rglob("*") if p.is_file()]
  assert leftovers == [], leftovers

def test_download_interrupted_leaves_no_partial_file(tmp_path, monkeypatch):
  data = (MINI / "train-images-idx3-ubyte.gz").read_bytes()
  monkeypatch.setattr(urllib.request, "urlopen", lambda url, *a, **k: FakeResponse(data, fail_after=100_000))
  with pytest.raises(RuntimeError) as e: mnist(directory=tmp_path)
  assert str(tmp_path) in str(e.value) and "MNIST_DIR" in str(e.value)
  leftovers = [p.name for p in tmp_path.rglob("*")]
  assert leftovers == [], leftovers

def test_simulated_download(tmp_path, monkeypatch, reference, capsys):
  requested = []
  def serve(url, *a, **k):
    requested.append(url)
    return FakeResponse((MINI / url.rsplit("/", 1)[-1]).read_bytes())
  monkeypatch.setattr(urllib.request, "urlopen", serve)
  target = tmp_path / "new" / "dir"
  _check_loaded(mnist(directory=target), reference)
  assert sorted(u.rsplit("/", 1)[-1] for u in requested) == sorted(f"{n}.gz" for n in MNIST_FILES)
  assert all(u.startswith(datasets.MNIST_URLS[False]) for u in requested)
  assert sorted(p.name for p in target.iterdir()) == sorted(f"{n}.gz" for n in MNIST_FILES)
  for n in MNIST_FILES: assert (target / f"{n}.gz").read_bytes() == (MINI / f"{n}.gz").read_bytes()
  # present now: no network needed
  def offline(*a, **k): raise urllib.error.URLError("offline")
  monkeypatch.setattr(urllib.request, "urlopen", offline)
  _check_loaded(mnist(directory=target), reference)

def test_simulated_download_fashion_url(tmp_path, monkeypatch):
  requested = []
  def serve(url, *a, **k):
    requested.append(url)
    return FakeResponse((MINI / url.rsplit("/", 1)[-1]).read_bytes())
  monkeypatch.setattr(urllib.request, "urlopen", serve)
  x, y, _, _ = mnist(fashion=True, directory=tmp_path)
  assert x.shape == (9000, 1, 28, 28) and y.shape == (9000,)
  assert len(requested) == 4 and all(u.startswith(datasets.MNIST_URLS[True]) for u in requested)
