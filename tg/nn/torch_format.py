"""PyTorch checkpoints (`torch.save` files) without torch: `torch_load(fn)` returns name -> Tensor.

Three layouts are read:
- zip (the default since torch 1.6): `<archive>/data.pkl` is the pickled object; each tensor storage is the raw bytes
  of entry `<archive>/data/<key>`; `<archive>/byteorder` says "little" or "big". torch stores entries uncompressed,
  so a storage is a lazy view of the file at the data offset given by the entry's local file header.
- legacy (torch < 1.6, or `_use_new_zipfile_serialization=False`): consecutive pickles (magic number, protocol version
  1001, system info, the object, the list of storage keys), then each listed storage as an int64 element count and the
  raw elements.
- legacy tar (torch < 0.4): a tar with members `storages`, `tensors` and `pickle`.

Unpickling is restricted: `find_class` resolves only the names a tensor checkpoint uses, to stand-ins defined here
(no torch import, nothing from the file runs); any other global raises `UnsafeGlobalError` (a pickle.UnpicklingError)
naming it. Tensors are rebuilt from (storage, offset, size, stride): a contiguous tensor is a zero-copy view of the
file (on DISK), a strided one is copied to the compute device and rebuilt there with movement ops."""
from __future__ import annotations
import io, os, pickle, struct, zipfile
from collections import OrderedDict
from typing import Any, Callable
import numpy as np
from ir.dtype import DType, dtypes
from ir.helpers import prod
from drivers.device import Device
from tg.tensor import Tensor
from tg.nn.tar import ByteSource, tar_members

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001

class UnsafeGlobalError(pickle.UnpicklingError):
  """The checkpoint's pickle names a global outside the allow-list (it could run code): nothing was loaded."""

class _Corrupt(Exception):
  """A structural problem found while rebuilding; torch_load re-raises it as a ValueError naming the file."""

# ---------------- stand-ins for the globals a checkpoint may name ----------------
class _Frozen:
  """A read-only record: no __dict__, no attribute writes, no pickle state. A pickle's BUILD opcode writes state into
  whatever object is on its stack; aimed at one of these shared stand-ins (or at the records made from the file) it
  must fail rather than alter them for later loads. (A frozen dataclass won't do: with slots it gets a __setstate__,
  without them a __dict__ that BUILD writes straight into.)"""
  __slots__ = ()
  def __init__(self, *values):
    for name, value in zip(self.__slots__, values, strict=True): object.__setattr__(self, name, value)
  def __setattr__(self, name, value): raise AttributeError(f"{type(self).__name__} is read-only")
  def __delattr__(self, name): raise AttributeError(f"{type(self).__name__} is read-only")
  def __setstate__(self, state): raise _Corrupt(f"the pickle tries to set the state of {self!r}")
  def __reduce__(self): raise TypeError(f"{type(self).__name__} can't be pickled")
  def __repr__(self) -> str: return f"{type(self).__name__}({', '.join(repr(getattr(self, n)) for n in self.__slots__)})"
  def replace(self, **changes): return type(self)(*(changes.get(n, getattr(self, n)) for n in self.__slots__))

class _StorageType(_Frozen):
  """torch.FloatStorage etc.; dtype None is untyped bytes (torch.storage.UntypedStorage)."""
  __slots__ = ("name", "dtype")

class _Storage(_Frozen):
  """Bytes [byte_offset, byte_offset + nbytes) of stored storage `key` (nbytes None: to its end); legacy pickles can
  name a view of a storage."""
  __slots__ = ("key", "dtype", "byte_offset", "nbytes")

class _TensorRef(_Frozen):
  """A tensor to rebuild: `offset` (in elements of dtype), `size` and `stride` over `storage`."""
  __slots__ = ("storage", "offset", "size", "stride", "dtype", "requires_grad")

class _TypeMarker(_Frozen):
  """torch.Tensor, torch.nn.parameter.Parameter, torch.FloatTensor...: named by a pickle, only ever passed along."""
  __slots__ = ("name",)
  def __call__(self, data: Any = None, requires_grad: bool = True, *args) -> Any:
    if self.name == "torch.nn.parameter.Parameter" and isinstance(data, _TensorRef): return data.replace(requires_grad=bool(requires_grad))
    raise _Corrupt(f"{self.name} can't be called here")

class _DTypeMarker(_Frozen):
  """torch.float32 etc.: the tg dtype a v3 rebuild names."""
  __slots__ = ("dtype",)

class _Fn(_Frozen):
  """An allowed function, callable by the pickle but closed to attribute writes."""
  __slots__ = ("fn",)
  def __call__(self, *args, **kwargs) -> Any: return self.fn(*args, **kwargs)

def _ints(x: Any, what: str) -> tuple[int, ...]:
  if not isinstance(x, (tuple, list)) or not all(isinstance(i, int) and not isinstance(i, bool) for i in x):
    raise _Corrupt(f"tensor {what} must be a tuple of ints, got {x!r}")
  return tuple(x)

def _tensor_ref(storage: Any, storage_offset: Any, size: Any, stride: Any, dtype: DType | None, requires_grad: Any = False) -> _TensorRef:
  if not isinstance(storage, _Storage): raise _Corrupt(f"a tensor is rebuilt from {type(storage).__name__}, not a storage")
  if not isinstance(storage_offset, int) or storage_offset < 0: raise _Corrupt(f"bad storage offset {storage_offset!r}")
  size, stride = _ints(size, "size"), _ints(stride, "stride")
  if len(size) != len(stride) or any(s < 0 for s in size) or any(s < 0 for s in stride):
    raise _Corrupt(f"bad tensor size {size} / stride {stride}")
  if dtype is None: raise _Corrupt(f"storage {storage.key} is untyped and the tensor names no dtype")
  return _TensorRef(storage, storage_offset, size, stride, dtype, bool(requires_grad))

def _rebuild_tensor(storage, storage_offset, size, stride):
  return _tensor_ref(storage, storage_offset, size, stride, getattr(storage, "dtype", None))
def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None):
  return _tensor_ref(storage, storage_offset, size, stride, getattr(storage, "dtype", None), requires_grad)
def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None):
  if not isinstance(dtype, _DTypeMarker): raise _Corrupt(f"unsupported tensor dtype {dtype!r}")
  return _tensor_ref(storage, storage_offset, size, stride, dtype.dtype, requires_grad)
def _rebuild_parameter(data, requires_grad, backward_hooks, state=None):
  if not isinstance(data, _TensorRef): raise _Corrupt(f"a Parameter is rebuilt from {type(data).__name__}, not a tensor")
  return data.replace(requires_grad=bool(requires_grad))
def _rebuild_from_type_v2(func, new_type, args, state):
  if not isinstance(func, _Fn) or func.fn not in (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter):
    raise _Corrupt(f"can't rebuild a tensor with {func!r}")
  if not isinstance(args, tuple): raise _Corrupt(f"rebuild arguments must be a tuple, got {type(args).__name__}")
  return func(*args)
def _codecs_encode(text, encoding="utf-8"):  # protocol-2 pickles write bytes as _codecs.encode(str, "latin1")
  if not isinstance(text, str) or encoding not in ("latin1", "latin-1"): raise _Corrupt(f"_codecs.encode({text!r:.40}, {encoding!r}) is not a bytes literal")
  return text.encode("latin1")

STORAGE_TYPES = {"Float": dtypes.float32, "Double": dtypes.float64, "Half": dtypes.float16, "BFloat16": dtypes.bfloat16,
                 "Long": dtypes.int64, "Int": dtypes.int32, "Short": dtypes.int16, "Char": dtypes.int8, "Byte": dtypes.uint8,
                 "Bool": dtypes.bool}
TORCH_DTYPES = {"float32": dtypes.float32, "float64": dtypes.float64, "float16": dtypes.float16, "bfloat16": dtypes.bfloat16,
                "int64": dtypes.int64, "int32": dtypes.int32, "int16": dtypes.int16, "int8": dtypes.int8, "uint8": dtypes.uint8,
                "bool": dtypes.bool, "uint16": dtypes.uint16, "uint32": dtypes.uint32, "uint64": dtypes.uint64,
                "float8_e4m3fn": dtypes.fp8e4m3, "float8_e5m2": dtypes.fp8e5m2}

ALLOWED_GLOBALS: dict[str, Any] = {
  "collections.OrderedDict": OrderedDict,
  "torch._utils._rebuild_tensor": _Fn(_rebuild_tensor), "torch._utils._rebuild_tensor_v2": _Fn(_rebuild_tensor_v2),
  "torch._utils._rebuild_tensor_v3": _Fn(_rebuild_tensor_v3), "torch._utils._rebuild_parameter": _Fn(_rebuild_parameter),
  "torch._utils._rebuild_parameter_with_state": _Fn(_rebuild_parameter), "torch._tensor._rebuild_from_type_v2": _Fn(_rebuild_from_type_v2),
  "torch.storage.UntypedStorage": _StorageType("UntypedStorage", None), "torch.UntypedStorage": _StorageType("UntypedStorage", None),
  "torch.Size": tuple, "torch.device": str, "_codecs.encode": _Fn(_codecs_encode),
  "builtins.set": set, "builtins.frozenset": frozenset, "builtins.bytearray": bytearray, "builtins.complex": complex,
  **{f"torch.{k}Storage": _StorageType(f"{k}Storage", v) for k, v in STORAGE_TYPES.items()},
  **{f"torch.{k}": _DTypeMarker(v) for k, v in TORCH_DTYPES.items()},
  **{f"torch.{k}Tensor": _TypeMarker(f"torch.{k}Tensor") for k in STORAGE_TYPES},
  **{n: _TypeMarker(n) for n in ("torch.Tensor", "torch.nn.parameter.Parameter")}}

class _RestrictedUnpickler(pickle.Unpickler):
  def __init__(self, file, persistent: Callable[[Any], Any] | None = None):
    super().__init__(file)
    self._persistent = persistent
  def find_class(self, module: str, name: str) -> Any:
    key = f"{'builtins' if module == '__builtin__' else module}.{name}"
    if key in ALLOWED_GLOBALS: return ALLOWED_GLOBALS[key]
    raise UnsafeGlobalError(f"refusing to load the global {key}: a tensor checkpoint only needs torch tensor/storage "
                            "rebuilds and containers, and anything else could run code")
  def persistent_load(self, pid: Any) -> Any:
    if self._persistent is None: raise pickle.UnpicklingError(f"unexpected persistent id {pid!r}")
    return self._persistent(pid)

def _unpickle(f, fn: str, what: str, persistent: Callable[[Any], Any] | None = None) -> Any:
  try: return _RestrictedUnpickler(f, persistent).load()
  except UnsafeGlobalError: raise
  except _Corrupt as e: raise ValueError(f"{fn}: corrupt checkpoint ({what}): {e}") from None
  except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError, struct.error, UnicodeDecodeError) as e:
    raise ValueError(f"{fn}: corrupt or truncated pickle ({what}): {type(e).__name__}: {e}") from None

class _SourceFile(io.RawIOBase):
  """A seekable read-only file over a ByteSource (so zipfile and pickle can read a path or a Tensor alike)."""
  def __init__(self, src: ByteSource, start: int = 0, end: int | None = None):
    self.src, self.start, self.end, self.pos = src, start, src.size if end is None else end, start
  def readable(self) -> bool: return True
  def seekable(self) -> bool: return True
  def tell(self) -> int: return self.pos - self.start
  def seek(self, offset: int, whence: int = 0) -> int:
    base = {0: self.start, 1: self.pos, 2: self.end}[whence]
    self.pos = max(self.start, base + offset)
    return self.pos - self.start
  def readinto(self, b) -> int:
    n = max(0, min(len(b), self.end - self.pos))
    b[:n] = self.src.read(self.pos, n)
    self.pos += n
    return n

# ---------------- rebuilding tensors ----------------
def _as_strided(flat: Tensor, shape: tuple[int, ...], stride: tuple[int, ...]) -> Tensor | None:
  """out[i0, i1, ...] = flat[sum(i_k * stride_k)] with movement ops, or None when dims overlap in memory. Dims are
  nested outermost (largest stride) first: the flat range is padded to n*stride, reshaped to (n, stride) and cut to the
  extent of the dims inside; stride-0 dims are expanded at the end."""
  dims = sorted((i for i, (n, st) in enumerate(zip(shape, stride)) if n != 1 and st != 0), key=lambda i: -stride[i])
  extents = [1]
  for i in reversed(dims):
    if stride[i] < extents[-1]: return None  # this dim's steps land inside the inner dims' range: overlapping
    extents.append((shape[i] - 1) * stride[i] + extents[-1])
  extents.reverse()  # extents[k]: elements spanned by dims[k:]
  x = flat[:extents[0]]
  for k, i in enumerate(dims):
    n, st = shape[i], stride[i]
    if n * st > extents[k]: x = x.pad([None] * (x.ndim - 1) + [(0, n * st - extents[k])])
    x = x.reshape(*x.shape[:-1], n, st)[..., :extents[k + 1]]
  x = x.reshape(x.shape[:-1])
  x = x.permute(sorted(range(len(dims)), key=lambda k: dims[k]))
  return x.reshape(tuple(shape[i] if i in dims else 1 for i in range(len(shape)))).expand(shape)

def _build(ref: _TensorRef, src: ByteSource, start: int, nbytes: int, little_endian: bool, where: str) -> Tensor:
  """The tensor `ref` over storage bytes [start, start + nbytes) of `src`."""
  dt, size, stride = ref.dtype, ref.size, ref.stride
  isz = dt.itemsize
  storage_start = start + ref.storage.byte_offset
  storage_bytes = nbytes - ref.storage.byte_offset if ref.storage.nbytes is None else ref.storage.nbytes
  if ref.storage.byte_offset + storage_bytes > nbytes:
    raise _Corrupt(f"{where}: the storage should hold {storage_bytes} bytes from its byte {ref.storage.byte_offset}, but only {nbytes} bytes "
                   f"are stored at file offset {start}")
  if prod(size) == 0: return Tensor.zeros(*size, dtype=dt)
  span = ref.offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1  # elements the view touches, from element 0
  if span * isz > storage_bytes:
    raise _Corrupt(f"{where}: the view (offset {ref.offset}, size {size}, stride {stride}) reaches element {span - 1}, but the storage "
                   f"has {storage_bytes // isz} {dt} elements ({storage_bytes} bytes at file offset {storage_start})")
  row_major = [prod(size[i + 1:]) for i in range(len(size))]
  contiguous = all(s == r for n, s, r in zip(size, stride, row_major) if n != 1)
  first, count = storage_start + ref.offset * isz, (prod(size) if contiguous else span - ref.offset)
  if little_endian or isz == 1:
    if contiguous: return src.view(first, count * isz, where, dt).reshape(size)
    flat = src.view(first, count * isz, where, dt)
  else:  # big-endian storage: reverse the bytes of each element on the compute device
    raw = src.view(first, count * isz, where)
    raw = raw.to(Device.DEFAULT) if raw.device.startswith("DISK") else raw
    flat = raw.reshape(count, isz).flip(1).reshape(count * isz).contiguous().bitcast(dt)
    if contiguous: return flat.reshape(size)
  if flat.device.startswith("DISK"): flat = flat.to(Device.DEFAULT)
  if (out := _as_strided(flat, size, stride)) is not None: return out
  # dims overlap in memory (rare in checkpoints): index on the host
  host = flat.numpy()
  idx = sum(np.arange(n).reshape([-1 if k == d else 1 for k in range(len(size))]) * s for d, (n, s) in enumerate(zip(size, stride)))
  return Tensor(np.ascontiguousarray(host[idx]), device=flat.device, dtype=dt)

def _collect(obj: Any, build: Callable[[_TensorRef, str], Tensor]) -> OrderedDict[str, Tensor]:
  """The tensors of the loaded object by dotted name; a dict holding 'state_dict' or 'model' is unwrapped first."""
  if isinstance(obj, dict):
    for key in ("state_dict", "model"):
      if isinstance(obj.get(key), dict):
        obj = obj[key]
        break
  out: OrderedDict[str, Tensor] = OrderedDict()
  def walk(name: str, o: Any) -> None:
    if isinstance(o, _TensorRef): out[name] = build(o, name)
    elif isinstance(o, dict):
      for k, v in o.items(): walk(f"{name}.{k}" if name else str(k), v)
    elif isinstance(o, (list, tuple)):
      for k, v in enumerate(o): walk(f"{name}.{k}" if name else str(k), v)
  walk("", obj)
  return out

def _storage_pid(pid: Any, storages: dict[str, _Storage]) -> _Storage:
  """('storage', type, key, location, numel[, view_metadata]) -> the storage (views of one key share its bytes)."""
  if not isinstance(pid, tuple) or len(pid) not in (5, 6) or (pid[0].decode("ascii") if isinstance(pid[0], bytes) else pid[0]) != "storage":
    raise _Corrupt(f"unexpected persistent id {pid!r:.200} (only tensor storages are supported)")
  stype, key, numel = pid[1], str(pid[2]), pid[4]
  if not isinstance(stype, _StorageType): raise _Corrupt(f"storage {key} has type {stype!r}, not a storage class")
  if not isinstance(numel, int) or numel < 0: raise _Corrupt(f"storage {key} has bad size {numel!r}")
  isz = 1 if stype.dtype is None else stype.dtype.itemsize
  if key not in storages: storages[key] = _Storage(key, stype.dtype, 0, numel * isz)
  view = pid[5] if len(pid) == 6 else None
  if view is None: return storages[key]
  if not (isinstance(view, tuple) and len(view) == 3 and all(isinstance(v, int) for v in view[1:])): raise _Corrupt(f"bad storage view {view!r}")
  return _Storage(key, stype.dtype, view[1] * isz, view[2] * isz)

# ---------------- the three layouts ----------------
def _load_zip(src: ByteSource, fn: str) -> OrderedDict[str, Tensor]:
  try:
    zf = zipfile.ZipFile(_SourceFile(src))
    names = zf.namelist()
  except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error) as e: raise ValueError(f"{fn}: not a readable zip archive: {e}") from None
  pkls = sorted((n for n in names if n == "data.pkl" or n.endswith("/data.pkl")), key=lambda n: n.count("/"))
  if not pkls: raise ValueError(f"{fn}: the zip archive has no data.pkl entry (not a torch.save checkpoint)")
  prefix = pkls[0][:-len("data.pkl")]

  def entry_bytes(name: str) -> bytes:
    try: return zf.read(name)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error, NotImplementedError) as e:
      raise ValueError(f"{fn}: zip entry {name!r} can't be read: {e}") from None

  little = True
  if prefix + "byteorder" in names:
    order = entry_bytes(prefix + "byteorder").decode("ascii", "replace").strip()
    if order not in ("little", "big"): raise ValueError(f"{fn}: zip entry {prefix}byteorder says {order!r}, expected 'little' or 'big'")
    little = order == "little"
  storages: dict[str, _Storage] = {}
  def persistent(pid): return _storage_pid(pid, storages)
  obj = _unpickle(io.BytesIO(entry_bytes(pkls[0])), fn, pkls[0], persistent)

  located: dict[str, tuple[ByteSource, int, int]] = {}
  def locate(key: str) -> tuple[ByteSource, int, int]:
    if key in located: return located[key]
    name = f"{prefix}data/{key}"
    try: info = zf.getinfo(name)
    except KeyError: raise ValueError(f"{fn}: missing zip entry {name!r} for tensor storage {key}") from None
    if info.compress_type != zipfile.ZIP_STORED:  # compressed (not what torch writes): inflate into memory
      data = entry_bytes(name)
      located[key] = (ByteSource(Tensor(data) if data else Tensor.empty(0, dtype=dtypes.uint8)), 0, len(data))
      return located[key]
    at = info.header_offset
    hdr = src.read(at, 30, f"local header of zip entry {name!r}")
    if hdr[:4] != b"PK\x03\x04": raise ValueError(f"{fn}: zip entry {name!r} has no local file header at offset {at} (corrupt archive)")
    name_len, extra_len = struct.unpack("<HH", hdr[26:30])
    data_at = at + 30 + name_len + extra_len
    if data_at + info.file_size > src.size:
      raise ValueError(f"{fn}: zip entry {name!r} data at offset {data_at} ({info.file_size} bytes) runs past the end of the file ({src.size} bytes)")
    located[key] = (src, data_at, info.file_size)
    return located[key]

  def build(ref: _TensorRef, name: str) -> Tensor:
    where_src, start, nbytes = locate(ref.storage.key)
    try: return _build(ref, where_src, start, nbytes, little, f"tensor {name!r} (storage {ref.storage.key})")
    except _Corrupt as e: raise ValueError(f"{fn}: {e}") from None
  return _collect(obj, build)

def _load_legacy(src: ByteSource, fn: str) -> OrderedDict[str, Tensor]:
  f = _SourceFile(src)
  magic = _unpickle(f, fn, "magic number")
  if magic != LEGACY_MAGIC: raise ValueError(f"{fn}: not a PyTorch checkpoint: no zip or tar header, and the legacy magic number at offset 0 is {magic!r:.40}")
  protocol = _unpickle(f, fn, "protocol version")
  if protocol != LEGACY_PROTOCOL: raise ValueError(f"{fn}: unsupported legacy protocol version {protocol!r} (expected {LEGACY_PROTOCOL})")
  sys_info = _unpickle(f, fn, "system info")
  little = not isinstance(sys_info, dict) or bool(sys_info.get("little_endian", True))
  storages: dict[str, _Storage] = {}
  obj = _unpickle(f, fn, "the saved object", lambda pid: _storage_pid(pid, storages))
  keys = _unpickle(f, fn, "storage keys")
  if not isinstance(keys, list): raise ValueError(f"{fn}: the storage key list is a {type(keys).__name__}")
  located: dict[str, tuple[int, int]] = {}
  pos = f.tell()
  for key in map(str, keys):
    if key not in storages: raise ValueError(f"{fn}: storage key {key} at offset {pos} is not used by any tensor")
    isz = 1 if storages[key].dtype is None else storages[key].dtype.itemsize
    count = struct.unpack("<q", src.read(pos, 8, f"size of storage {key}"))[0]
    if count < 0 or pos + 8 + count * isz > src.size:
      raise ValueError(f"{fn}: storage {key} at offset {pos} claims {count} elements of {isz} bytes, past the end of the file ({src.size} bytes)")
    located[key] = (pos + 8, count * isz)
    pos += 8 + count * isz

  def build(ref: _TensorRef, name: str) -> Tensor:
    if ref.storage.key not in located: raise ValueError(f"{fn}: tensor {name!r} uses storage {ref.storage.key}, which has no data in the file")
    start, nbytes = located[ref.storage.key]
    try: return _build(ref, src, start, nbytes, little, f"tensor {name!r} (storage {ref.storage.key})")
    except _Corrupt as e: raise ValueError(f"{fn}: {e}") from None
  return _collect(obj, build)

def _load_tar(src: ByteSource, fn: str, members: dict[str, tuple[int, int]]) -> OrderedDict[str, Tensor]:
  for need in ("storages", "tensors", "pickle"):
    if need not in members: raise ValueError(f"{fn}: the tar archive has no {need!r} member (not a legacy PyTorch checkpoint)")
  def member(name: str) -> _SourceFile:
    off, size = members[name]
    return _SourceFile(src, off, off + size)
  def key(k: Any) -> str: return str(k.decode() if isinstance(k, bytes) else k)

  f = member("storages")
  storages: dict[str, tuple[DType, int, int]] = {}  # key -> (dtype, file offset, bytes)
  count = _unpickle(f, fn, "storage count")
  if not isinstance(count, int) or count < 0: raise ValueError(f"{fn}: bad storage count {count!r}")
  for _ in range(count):
    entry = _unpickle(f, fn, "storage header")
    if not (isinstance(entry, tuple) and len(entry) == 3 and isinstance(entry[2], _StorageType) and entry[2].dtype is not None):
      raise ValueError(f"{fn}: bad storage header {entry!r:.200} in member 'storages' at offset {f.start + f.tell()}")
    dt, at = entry[2].dtype, f.start + f.tell()
    n = struct.unpack("<q", src.read(at, 8, f"size of storage {key(entry[0])}"))[0]
    if n < 0 or at + 8 + n * dt.itemsize > f.end:
      raise ValueError(f"{fn}: storage {key(entry[0])} at offset {at} claims {n} elements, past the end of the 'storages' member")
    storages[key(entry[0])] = (dt, at + 8, n * dt.itemsize)
    f.seek(8 + n * dt.itemsize, 1)
  views = _unpickle(f, fn, "storage views")
  for view in views if isinstance(views, list) else []:
    target, root, offset, numel = view
    if key(root) not in storages: raise ValueError(f"{fn}: storage view {key(target)} of unknown storage {key(root)}")
    dt, at, nbytes = storages[key(root)]
    if offset < 0 or numel < 0 or (offset + numel) * dt.itemsize > nbytes: raise ValueError(f"{fn}: storage view {key(target)} is outside storage {key(root)}")
    storages[key(target)] = (dt, at + offset * dt.itemsize, numel * dt.itemsize)

  f = member("tensors")
  refs: dict[str, _TensorRef] = {}
  count = _unpickle(f, fn, "tensor count")
  if not isinstance(count, int) or count < 0: raise ValueError(f"{fn}: bad tensor count {count!r}")
  for _ in range(count):
    entry = _unpickle(f, fn, "tensor header")
    if not (isinstance(entry, tuple) and len(entry) == 3) or key(entry[1]) not in storages:
      raise ValueError(f"{fn}: bad tensor header {entry!r:.200} in member 'tensors' at offset {f.start + f.tell()}")
    at = f.start + f.tell()
    ndim = struct.unpack("<i", src.read(at, 4, "tensor dims"))[0]
    if not 0 <= ndim <= 64: raise ValueError(f"{fn}: tensor {key(entry[0])} at offset {at} has {ndim} dims")
    fields = struct.unpack(f"<{2 * ndim + 1}q", src.read(at + 8, 8 * (2 * ndim + 1), f"shape of tensor {key(entry[0])}"))
    f.seek(8 + 8 * (2 * ndim + 1), 1)
    dt = storages[key(entry[1])][0]
    try: ref = _tensor_ref(_Storage(key(entry[1]), dt, 0, None), fields[-1], fields[:ndim], fields[ndim:2 * ndim], dt)
    except _Corrupt as e: raise ValueError(f"{fn}: tensor {key(entry[0])}: {e}") from None
    refs[key(entry[0])] = ref

  def persistent(pid: Any) -> Any:
    if key(pid) not in refs: raise _Corrupt(f"the pickle names tensor {pid!r:.100}, which is not in the 'tensors' member")
    return refs[key(pid)]
  obj = _unpickle(member("pickle"), fn, "the saved object", persistent)

  def build(ref: _TensorRef, name: str) -> Tensor:
    _, start, nbytes = storages[ref.storage.key]
    try: return _build(ref, src, start, nbytes, True, f"tensor {name!r} (storage {ref.storage.key})")
    except _Corrupt as e: raise ValueError(f"{fn}: {e}") from None
  return _collect(obj, build)

def torch_load(fn: str | os.PathLike | Tensor) -> OrderedDict[str, Tensor]:
  """name -> Tensor from a file written by torch.save (zip, legacy or legacy tar layout), given as a path or a 1-d uint8
  Tensor of its bytes. Contiguous tensors are lazy views of the file (on DISK for a path). A dict holding 'state_dict'
  or 'model' is unwrapped; nested dicts and lists get dotted names; non-tensor values are left out. A pickle naming
  any global outside the allow-list raises UnsafeGlobalError (a pickle.UnpicklingError) before anything runs;
  corrupt or truncated files raise ValueError naming the file and the problem."""
  src = ByteSource(fn)
  name = src.name
  if src.size == 0: raise ValueError(f"{name}: the file is empty")
  head = src.read(0, min(src.size, 512))
  if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"): return _load_zip(src, name)
  if head[257:262] == b"ustar": return _load_tar(src, name, tar_members(src))
  if head[:1] == b"\x80": return _load_legacy(src, name)
  try: members = tar_members(src) if len(head) == 512 else None  # a pre-POSIX tar has no magic
  except ValueError: members = None
  if members: return _load_tar(src, name, members)
  raise ValueError(f"{name}: not a PyTorch checkpoint: no zip, tar or pickle header at offset 0 (starts with {head[:8]!r})")
