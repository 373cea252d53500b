"""Model state: finding a model's tensors (get_state_dict / get_parameters), loading them back (load_state_dict), and
safetensors files, read lazily from a DISK tensor (only what is used gets copied)."""
from __future__ import annotations
import json, os, pathlib, struct, tempfile, warnings
from typing import Any
from ir.dtype import DType, dtypes
from ir.helpers import prod
from tg.tensor import Tensor

SAFETENSORS_DTYPES: dict[str, DType] = {
  "F64": dtypes.float64, "F32": dtypes.float32, "F16": dtypes.float16, "BF16": dtypes.bfloat16, "F8_E4M3": dtypes.fp8e4m3,
  "F8_E5M2": dtypes.fp8e5m2, "I64": dtypes.int64, "I32": dtypes.int32, "I16": dtypes.int16, "I8": dtypes.int8, "U64": dtypes.uint64,
  "U32": dtypes.uint32, "U16": dtypes.uint16, "U8": dtypes.uint8, "BOOL": dtypes.bool}
_SAFETENSORS_NAMES = {v: k for k, v in SAFETENSORS_DTYPES.items()}
MAX_HEADER = 100 * 1024 * 1024
MAX_DIMS = 64  # numpy's limit: a tensor with more dims couldn't be read back

def get_state_dict(obj: Any, prefix: str = "", tensor_type: type = Tensor) -> dict[str, Tensor]:
  """Every tensor reachable from obj's attributes, lists, tuples and dicts, keyed like "layers.0.weight"."""
  if isinstance(obj, tensor_type): return {prefix.strip("."): obj}
  if hasattr(obj, "_asdict"): return get_state_dict(obj._asdict(), prefix, tensor_type)  # namedtuple
  if isinstance(obj, dict): items = obj.items()
  elif isinstance(obj, (list, tuple)): items = enumerate(obj)
  elif hasattr(obj, "__dict__"): items = vars(obj).items()
  else: return {}
  out: dict[str, Tensor] = {}
  for k, v in items: out.update(get_state_dict(v, f"{prefix}{k}.", tensor_type))
  return out

def get_parameters(obj: Any) -> list[Tensor]: return list(get_state_dict(obj).values())

def load_state_dict(model: Any, state_dict: dict[str, Tensor], strict: bool = True, verbose: bool = True, consume: bool = False,
                    realize: bool = True) -> list[Tensor]:
  """Load `state_dict` into the model's tensors (in place) and return them. strict: every model key must be present;
  keys the model lacks are warned about (always under strict, else when verbose). Shapes must match (a scalar and a
  1-element vector stand for each other, as PyTorch's BatchNorm num_batches_tracked is ()); floats are converted to the
  model's dtype, any other dtype change is an error. Everything is checked before anything is loaded."""
  model_sd = get_state_dict(model)
  missing = [k for k in model_sd if k not in state_dict]
  unexpected = [k for k in state_dict if k not in model_sd]
  if strict and missing: raise KeyError(f"state dict doesn't match the model: missing {missing[:10]}{'...' if len(missing) > 10 else ''}")
  if unexpected and (strict or verbose):
    warnings.warn(f"load_state_dict: {len(unexpected)} state dict tensors are not in the model, not loaded: {unexpected[:10]}", stacklevel=2)
  if verbose and missing: print(f"load_state_dict: {len(missing)} model tensors are not in the state dict: {missing[:5]}")
  todo: list[tuple[str, Tensor, Tensor]] = []
  for k, v in model_sd.items():
    if k not in state_dict: continue
    src = state_dict[k]
    if src.shape != v.shape:
      if {src.shape, v.shape} != {(), (1,)}: raise ValueError(f"shape mismatch for {k!r}: model has {v.shape}, state dict has {src.shape}")
      src = src.reshape(v.shape)
    if src.dtype != v.dtype and not (dtypes.is_float(src.dtype) and dtypes.is_float(v.dtype)):
      raise TypeError(f"dtype mismatch for {k!r}: model has {v.dtype}, state dict has {src.dtype}")
    todo.append((k, v, src))
  for k, v, src in todo:
    v.replace(src.to(v.device).cast(v.dtype).contiguous())
    if consume: del state_dict[k]
  loaded = [v for _, v, _ in todo]
  if realize: Tensor.realize_all(*loaded)
  return loaded

# ---------------- safetensors ----------------

def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
  out: dict[str, Any] = {}
  for k, v in pairs:
    if k in out: raise ValueError(f"duplicate key {k[:100]!r}")  # json.loads would keep the last one silently
    out[k] = v
  return out

def _uint(x: Any) -> bool: return isinstance(x, int) and not isinstance(x, bool) and x >= 0

def safe_load_metadata(t: Tensor | str | os.PathLike) -> tuple[Tensor, int, dict[str, Any]]:
  """(the file as a uint8 tensor, where the data starts, the parsed JSON header). The header is checked as the format's
  reference reader checks it: no duplicate keys; each tensor entry has a known dtype, a shape of at most MAX_DIMS
  non-negative ints and data_offsets [begin, end] holding exactly its bytes; __metadata__ maps strings to strings; and
  the tensors, sorted by offset, tile the data section exactly (no overlaps, no gaps, nothing after the last). Any
  violation is a ValueError naming the file and the problem."""
  name = str(t) if not isinstance(t, Tensor) else "tensor"
  if not isinstance(t, Tensor): t = Tensor(pathlib.Path(t))
  if t.numel() < 8: raise ValueError(f"{name}: {t.numel()} bytes is too short for a safetensors file")
  n = struct.unpack("<Q", t[0:8].to("CPU").numpy().tobytes())[0]
  if n > MAX_HEADER or 8 + n > t.numel(): raise ValueError(f"{name}: header of {n} bytes at offset 8 runs past the end of the {t.numel()}-byte file")
  try: header = json.loads(t[8:8 + n].to("CPU").numpy().tobytes(), object_pairs_hook=_json_object)
  except (ValueError, RecursionError) as e: raise ValueError(f"{name}: header at offset 8 is not valid safetensors JSON: {type(e).__name__}: {e}") from None
  if not isinstance(header, dict): raise ValueError(f"{name}: header is not a JSON object")
  size, spans = t.numel() - 8 - n, []
  for key, info in header.items():
    if key == "__metadata__":
      if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()): raise ValueError(f"{name}: __metadata__ must map strings to strings")
      continue
    what = f"{name}: header entry for tensor {key[:200]!r}"
    if not isinstance(info, dict): raise ValueError(f"{what} is a {type(info).__name__}, not an object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in SAFETENSORS_DTYPES: raise ValueError(f"{what} has unknown dtype {str(dtype)[:50]!r}")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(_uint(d) for d in shape):
      raise ValueError(f"{what} has shape {str(shape)[:100]}, not a list of at most {MAX_DIMS} non-negative ints")
    if prod(max(d, 1) for d in shape) * SAFETENSORS_DTYPES[dtype].itemsize >= 2**63: raise ValueError(f"{what} has shape {shape}, too big to index even if empty")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_uint(o) for o in offsets) and offsets[0] <= offsets[1] <= size):
      raise ValueError(f"{what} has data_offsets {str(offsets)[:100]}, not [begin, end] inside the {size}-byte data section")
    if (need := prod(shape) * SAFETENSORS_DTYPES[dtype].itemsize) != offsets[1] - offsets[0]:
      raise ValueError(f"{what}: shape {str(shape)[:100]} of {dtype} needs {need} bytes, data_offsets {offsets} hold {offsets[1] - offsets[0]}")
    spans.append((offsets[0], offsets[1], key))
  pos, prev = 0, None
  for begin, end, key in sorted(spans):
    if begin < pos: raise ValueError(f"{name}: tensor {key[:200]!r} at data bytes [{begin}, {end}) overlaps tensor {prev[:200]!r}, which ends at {pos}")
    if begin > pos: raise ValueError(f"{name}: data bytes [{pos}, {begin}) before tensor {key[:200]!r} belong to no tensor")
    pos, prev = end, key
  if pos != size: raise ValueError(f"{name}: the data section has {size} bytes but the tensors end at byte {pos} of it")
  return t, 8 + n, header

def safe_load(fn: Tensor | str | os.PathLike) -> dict[str, Tensor]:
  """name -> Tensor; each one is a lazy view of the file (DISK) until it is used or copied."""
  t, start, header = safe_load_metadata(fn)
  out: dict[str, Tensor] = {}
  for name, info in header.items():
    if name == "__metadata__": continue
    dt, shape, (begin, end) = SAFETENSORS_DTYPES[info["dtype"]], tuple(info["shape"]), info["data_offsets"]
    out[name] = t[start + begin:start + end].bitcast(dt).reshape(shape) if prod(shape) else Tensor.empty(*shape, dtype=dt)
  return out

def safe_save(tensors: dict[str, Tensor], fn: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
  """Write a safetensors file; it is written to a temporary name first, so a failure never leaves a partial file."""
  header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
  blobs, offset = [], 0
  for name, t in tensors.items():
    if t.dtype not in _SAFETENSORS_NAMES: raise TypeError(f"safetensors can't store {t.dtype} (tensor {name!r})")
    data = t._contiguous_buffer().as_bytes() if t.numel() else b""
    header[name] = {"dtype": _SAFETENSORS_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
    blobs.append(data)
    offset += len(data)
  head = json.dumps(header, separators=(",", ":")).encode()
  head += b" " * (-len(head) % 8)  # the data section starts 8-byte aligned
  path = pathlib.Path(fn)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(struct.pack("<Q", len(head)) + head)
      for b in blobs: f.write(b)
    os.replace(tmp, path)
  except BaseException:
    os.unlink(tmp)
    raise

from tg.nn.torch_format import torch_load  # noqa: E402,F401  (re-exported: tg.nn.state is where users look)
from tg.nn.gguf import gguf_load  # noqa: E402,F401
from tg.nn.tar import tar_extract  # noqa: E402,F401
