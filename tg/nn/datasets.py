"""Datasets: MNIST (and Fashion-MNIST) from their IDX files."""
from __future__ import annotations
import gzip, os, pathlib, struct, urllib.error, urllib.request, zlib
import numpy as np
from ir.switches import getenv
from tg.progress import ProgressBar
from tg.tensor import Tensor

MNIST_URLS = {False: "https://storage.googleapis.com/cvdf-datasets/mnist/", True: "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"}
MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")

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

def _fetch(url: str, dest: pathlib.Path) -> None:
  """Download to a temporary name with a progress bar, then move into place (no half-written files)."""
  dest.parent.mkdir(parents=True, exist_ok=True)
  tmp = dest.with_suffix(dest.suffix + ".part")
  try:
    with urllib.request.urlopen(url, timeout=30) as r, open(tmp, "wb") as f:
      bar = ProgressBar(total=int(r.headers.get("content-length", 0)) or None, desc=dest.name, unit="B", unit_scale=True)
      while chunk := r.read(1 << 16):
        f.write(chunk)
        bar.update(len(chunk))
      bar.close()
    os.replace(tmp, dest)
  except (urllib.error.URLError, OSError) as e:
    tmp.unlink(missing_ok=True)
    raise RuntimeError(f"can't download {url} ({e}); without network access, put the files {', '.join(MNIST_FILES)} (optionally .gz) "
                       f"in {dest.parent} or point MNIST_DIR at a folder that has them") from None

def _find(directory: pathlib.Path, name: str) -> pathlib.Path | None:
  return next((p for p in (directory / name, directory / f"{name}.gz") if p.exists()), None)

def mnist(device: str | None = None, fashion: bool = False, directory: str | os.PathLike | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """(X_train uint8 (N,1,28,28), Y_train uint8 (N,), X_test, Y_test). Files come from `directory`, else MNIST_DIR,
  else ~/.cache/tg/(fashion-)mnist, downloaded there when missing."""
  default = pathlib.Path(getenv("XDG_CACHE_HOME", str(pathlib.Path.home() / ".cache"))) / "tg" / ("fashion-mnist" if fashion else "mnist")
  folder = pathlib.Path(directory or getenv("MNIST_DIR", "") or default)
  arrays = []
  for name in MNIST_FILES:
    path = _find(folder, name)
    if path is None:
      path = folder / f"{name}.gz"
      _fetch(MNIST_URLS[fashion] + f"{name}.gz", path)
    arrays.append(read_idx(path))
  x_train, y_train, x_test, y_test = arrays
  return (Tensor(x_train.reshape(-1, 1, 28, 28), device=device), Tensor(y_train, device=device),
          Tensor(x_test.reshape(-1, 1, 28, 28), device=device), Tensor(y_test, device=device))
