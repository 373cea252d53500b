"""Datasets: MNIST (and Fashion-MNIST) from their IDX files. tg ships a real MNIST subset (9,000 training and 1,000
test images, data/mnist) that mnist() falls back to when the download fails, so the MNIST example runs offline."""
from __future__ import annotations
import gzip, os, pathlib, struct, sys, urllib.error, urllib.request, zlib
import numpy as np
from ir.switches import getenv
from tg.progress import tqdm
from tg.tensor import Tensor

MNIST_URLS = {False: "https://storage.googleapis.com/cvdf-datasets/mnist/", True: "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"}
MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
BUNDLED_MNIST = pathlib.Path(__file__).parent / "data" / "mnist"

class DownloadError(RuntimeError):
  """A dataset file couldn't be downloaded: names the URL, the reason and where the files can be put instead."""
  def __init__(self, url: str, reason: str, folder: pathlib.Path):
    self.url, self.reason = url, reason
    super().__init__(f"can't download {url} ({reason}); without network access, put the files {', '.join(MNIST_FILES)} (optionally .gz) "
                     f"in {folder} or point MNIST_DIR at a folder that has them")

def read_idx(path: pathlib.Path) -> np.ndarray:
  """An IDX file (optionally gzipped) as a numpy array; ValueError naming the file when it is malformed."""
  raw = path.read_bytes()
  if raw[:2] == b"\x1f\x8b":
    try: raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e: raise ValueError(f"{path}: corrupt gzip data: {e}") from None
  if len(raw) < 4 or raw[:2] != b"\0\0": raise ValueError(f"{path}: not an IDX file (bad magic at offset 0)")
  kind, ndim = raw[2], raw[3]
  types = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
  if kind not in types: raise ValueError(f"{path}: unknown IDX element type {kind:#x} at offset 2")
  if len(raw) < 4 + 4 * ndim: raise ValueError(f"{path}: truncated IDX header")
  dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
  itemsize, body = np.dtype(types[kind]).itemsize, len(raw) - 4 - 4 * ndim
  if body != int(np.prod(dims)) * itemsize: raise ValueError(f"{path}: header says {dims} ({int(np.prod(dims)) * itemsize} bytes of data), file holds {body}")
  data = np.frombuffer(raw, dtype=types[kind], offset=4 + 4 * ndim)
  return data.reshape(dims).astype(np.dtype(types[kind]).newbyteorder("="))

def _download(url: str, dest: pathlib.Path) -> pathlib.Path:
  """Download to a temporary name with a progress bar, then move into place (no half-written files)."""
  tmp = dest.with_suffix(dest.suffix + ".part")
  try:
    with urllib.request.urlopen(url, timeout=30) as r:
      dest.parent.mkdir(parents=True, exist_ok=True)  # only once the server answers: an offline run leaves no empty folders
      with open(tmp, "wb") as f, tqdm(total=int(r.headers.get("content-length", 0)) or None, desc=dest.name, unit="B", unit_scale=True) as bar:
        while chunk := r.read(1 << 16):
          f.write(chunk)
          bar.update(len(chunk))
    os.replace(tmp, dest)
    return dest
  except (urllib.error.URLError, OSError) as e:
    tmp.unlink(missing_ok=True)
    raise DownloadError(url, str(e), dest.parent) from None

def _find(directory: pathlib.Path, name: str) -> pathlib.Path | None:
  return next((p for p in (directory / name, directory / f"{name}.gz") if p.exists()), None)

def mnist(device: str | None = None, fashion: bool = False, directory: str | os.PathLike | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """(X_train uint8 (N,1,28,28), Y_train uint8 (N,), X_test, Y_test). Files come from `directory`, else MNIST_DIR,
  else ~/.cache/tg/(fashion-)mnist, downloaded there when missing. When that download fails and no folder was named,
  MNIST (not Fashion-MNIST) comes from the subset shipped with tg, with a one-line notice on stderr."""
  named = directory or getenv("MNIST_DIR", "")
  default = pathlib.Path(getenv("XDG_CACHE_HOME", str(pathlib.Path.home() / ".cache"))) / "tg" / ("fashion-mnist" if fashion else "mnist")
  folder = pathlib.Path(named or default)
  try: paths = [_find(folder, name) or _download(MNIST_URLS[fashion] + f"{name}.gz", folder / f"{name}.gz") for name in MNIST_FILES]
  except DownloadError as e:
    if named or fashion: raise
    print(f"mnist: can't download {e.url} ({e.reason}); using the MNIST subset shipped with tg (9,000 training, 1,000 test images)", file=sys.stderr)
    paths = [BUNDLED_MNIST / f"{name}.gz" for name in MNIST_FILES]
  x_train, y_train, x_test, y_test = [read_idx(p) for p in paths]
  return (Tensor(x_train.reshape(-1, 1, 28, 28), device=device), Tensor(y_train, device=device),
          Tensor(x_test.reshape(-1, 1, 28, 28), device=device), Tensor(y_test, device=device))
