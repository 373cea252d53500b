"""The MNIST subset shipped inside tg (tg/nn/data/mnist) and mnist()'s fallback to it when the download fails, with the
mirror made unreachable (urlopen replaced) in a fresh interpreter whose cache folder is empty."""
import gzip, json, os, pathlib, struct, subprocess, sys
import numpy as np
from tg.nn.datasets import BUNDLED_MNIST, MNIST_FILES

ROOT = pathlib.Path(__file__).parents[2]

def parse_idx_gz(path: pathlib.Path) -> np.ndarray:
  """An unsigned-byte IDX file read with gzip + struct, independently of tg."""
  raw = gzip.decompress(path.read_bytes())
  zero, kind, ndim = struct.unpack(">HBB", raw[:4])
  assert zero == 0 and kind == 0x08
  dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
  return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)

def test_shipped_subset_is_real_mnist():
  x_train, y_train, x_test, y_test = (parse_idx_gz(BUNDLED_MNIST / f"{n}.gz") for n in MNIST_FILES)
  assert x_train.shape == (9000, 28, 28) and y_train.shape == (9000,) and x_test.shape == (1000, 28, 28) and y_test.shape == (1000,)
  for y in (y_train, y_test): assert set(np.unique(y)) == set(range(10)) and np.bincount(y).min() > 0.07 * len(y)
  assert x_train.max() == 255 and 0.1 < (x_train > 0).mean() < 0.25, "digits: mostly black background, about a fifth of pixels inked"
  shared = pathlib.Path("/work/shared/datasets/mnist-mini")
  if shared.is_dir():
    for n in MNIST_FILES: assert (BUNDLED_MNIST / f"{n}.gz").read_bytes() == (shared / f"{n}.gz").read_bytes(), n

OFFLINE = """
import json, sys, urllib.error, urllib.request
calls = []
def unreachable(url, *a, **k):
  calls.append(url)
  raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")
urllib.request.urlopen = unreachable
from tg.nn.datasets import mnist
try: arrays = mnist(fashion=len(sys.argv) > 1)
except RuntimeError as e: print(json.dumps({"error": type(e).__name__ + ": " + str(e), "calls": calls})); raise SystemExit
print(json.dumps({"shapes": [list(t.shape) for t in arrays], "sums": [int(t.numpy().astype("int64").sum()) for t in arrays], "calls": calls}))
"""

def run_offline(tmp_path, *args: str, **env: str) -> tuple[dict, str]:
  full = {k: v for k, v in os.environ.items() if k != "MNIST_DIR"}
  r = subprocess.run([sys.executable, "-c", OFFLINE, *args], env={**full, "XDG_CACHE_HOME": str(tmp_path / "cache"), **env}, cwd=ROOT,
                     capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stderr[-2000:]
  return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr

def test_unreachable_mirror_falls_back_to_the_shipped_subset(tmp_path):
  out, err = run_offline(tmp_path)
  assert out["shapes"] == [[9000, 1, 28, 28], [9000], [1000, 1, 28, 28], [1000]]
  want = [int(parse_idx_gz(BUNDLED_MNIST / f"{n}.gz").astype(np.int64).sum()) for n in MNIST_FILES]
  assert out["sums"] == want
  assert len(out["calls"]) == 1 and out["calls"][0].endswith("train-images-idx3-ubyte.gz"), "one failed download is enough to fall back"
  notice = err.strip().splitlines()
  assert len(notice) == 1 and "can't download https://" in notice[0] and "Temporary failure in name resolution" in notice[0] and \
    "MNIST subset shipped with tg" in notice[0], err
  assert not (tmp_path / "cache").exists(), "nothing is left in the cache folder"

def test_no_fallback_when_a_folder_is_named_or_for_fashion(tmp_path):
  (tmp_path / "empty").mkdir()
  out, _ = run_offline(tmp_path, MNIST_DIR=str(tmp_path / "empty"))
  assert out["error"].startswith("DownloadError: can't download") and str(tmp_path / "empty") in out["error"]
  out, _ = run_offline(tmp_path, "fashion")
  assert out["error"].startswith("DownloadError") and "fashion" in out["error"]
