"""PyTorch checkpoints (`torch.save` files) without torch: `torch_load(fn)` returns name -> Tensor.

Three layouts are read:
- zip (the default since torch 1.6): `<archive>/data.pkl` is the pickled object; each tensor storage is the raw bytes
  of entry `<archive>/data/<key>`; `<archive>/byteorder` says "little" or "big". torch stores entries uncompressed,
  so a storage is a lazy view of the file at the data offset given by the entry's local file header.
- legacy (torch < 1.6, or `_use_new_zipfile_serialization=False`): consecutive pickles (magic number, protocol version
  1001, system info, the object, the list of storage keys), then each listed storage as an int64 element count and the
  raw elements.
- legacy tar (torch < 0.4): a tar with members `storages`, `tensors` and `pickle`.

Pickles are run by a small machine written here (`_Unpickler`), not by the `pickle` module: globals resolve only to
the names a tensor checkpoint uses, mapped to stand-ins defined here (no torch import, nothing from the file runs), and
any other global raises `UnsafeGlobalError` naming it. The machine bounds what a hostile pickle can make it do: an
argument is read only when the pickle has that many bytes left, the memo is a dict (a huge index is just a key), dict
keys and set members must hash in bounded time, and the only callables are the allowed globals, which check their
arguments. Everything a file can cause raises a ValueError naming the file (for a pickle, also the offset of the
opcode); `UnsafeGlobalError` is a ValueError too. Tensors are rebuilt from (storage, offset, size, stride): a contiguous
tensor is a zero-copy view of the file (on DISK), a strided one is copied to the compute device and rebuilt there with
movement ops."""
from __future__ import annotations
import codecs, io, lzma, os, pickle, pickletools, reprlib, struct, zipfile, zlib
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
MAX_PICKLE = 100 * 1024 * 1024  # bytes a compressed data.pkl may inflate to (the cap safetensors puts on its header)
MAX_KEY_ITEMS = 1024            # items, nested ones included, in one dict key or set member
MAX_DIMS = 64
NAME_CHARS_PER_BYTE = 16        # tensor names may add up to 1 MiB plus this many characters per byte of pickle
_ZIP_ERRORS = (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error, NotImplementedError, RuntimeError, zlib.error, lzma.LZMAError)

class UnsafeGlobalError(pickle.UnpicklingError, ValueError):
  """The checkpoint's pickle names a global outside the allow-list (it could run code): nothing was loaded."""

class _Corrupt(Exception):
  """A structural problem found while unpickling or rebuilding; torch_load re-raises it as a ValueError naming the file."""

class _Show(reprlib.Repr):
  """repr for error messages, bounded in depth, width and length whatever the pickle built (shared references nested
  deep, huge ints and bytes)."""
  def __init__(self):
    super().__init__()
    self.maxlevel, self.maxstring, self.maxother = 3, 60, 60
  def repr_int(self, x: int, level: int) -> str: return repr(x) if x.bit_length() <= 128 else f"<int of {x.bit_length()} bits>"
  def repr_bytes(self, x: bytes, level: int) -> str: return repr(x[:self.maxstring]) + ("..." if len(x) > self.maxstring else "")
  repr_bytearray = repr_bytes
  def repr_OrderedDict(self, x: dict, level: int) -> str: return self.repr_dict(x, level)
_show = _Show().repr

# ---------------- stand-ins for the globals a checkpoint may name ----------------
class _Frozen:
  """A read-only record: no __dict__, no attribute writes. The stand-ins are shared by every load, so nothing a pickle
  does may alter them (and the unpickler applies no state to them)."""
  __slots__ = ()
  def __init__(self, *values):
    for name, value in zip(self.__slots__, values, strict=True): object.__setattr__(self, name, value)
  def __setattr__(self, name, value): raise AttributeError(f"{type(self).__name__} is read-only")
  def __delattr__(self, name): raise AttributeError(f"{type(self).__name__} is read-only")
  def __reduce__(self): raise TypeError(f"{type(self).__name__} can't be pickled")
  def __repr__(self) -> str: return f"{type(self).__name__}({', '.join(_show(getattr(self, n)) for n in self.__slots__)})"
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
    raise _Corrupt(f"tensor {what} must be a tuple of ints, got {_show(x)}")
  if len(x) > MAX_DIMS: raise _Corrupt(f"tensor {what} has {len(x)} dims, more than {MAX_DIMS}")
  return tuple(x)

def _tensor_ref(storage: Any, storage_offset: Any, size: Any, stride: Any, dtype: DType | None, requires_grad: Any = False) -> _TensorRef:
  if not isinstance(storage, _Storage): raise _Corrupt(f"a tensor is rebuilt from {type(storage).__name__}, not a storage")
  if not isinstance(storage_offset, int) or storage_offset < 0: raise _Corrupt(f"bad storage offset {_show(storage_offset)}")
  size, stride = _ints(size, "size"), _ints(stride, "stride")
  if len(size) != len(stride) or any(s < 0 for s in size) or any(s < 0 for s in stride):
    raise _Corrupt(f"bad tensor size {size} / stride {stride}")
  if prod(max(s, 1) for s in size) >= 2**63: raise _Corrupt(f"tensor size {size} is too big to index even if empty")
  if dtype is None: raise _Corrupt(f"storage {storage.key} is untyped and the tensor names no dtype")
  return _TensorRef(storage, storage_offset, size, stride, dtype, bool(requires_grad))

def _rebuild_tensor(storage, storage_offset, size, stride):
  return _tensor_ref(storage, storage_offset, size, stride, getattr(storage, "dtype", None))
def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None):
  return _tensor_ref(storage, storage_offset, size, stride, getattr(storage, "dtype", None), requires_grad)
def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None):
  if not isinstance(dtype, _DTypeMarker): raise _Corrupt(f"unsupported tensor dtype {_show(dtype)}")
  return _tensor_ref(storage, storage_offset, size, stride, dtype.dtype, requires_grad)
def _rebuild_parameter(data, requires_grad, backward_hooks, state=None):
  if not isinstance(data, _TensorRef): raise _Corrupt(f"a Parameter is rebuilt from {type(data).__name__}, not a tensor")
  return data.replace(requires_grad=bool(requires_grad))
def _rebuild_from_type_v2(func, new_type, args, state):
  if not isinstance(func, _Fn) or func.fn not in (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter):
    raise _Corrupt(f"can't rebuild a tensor with {_show(func)}")
  if not isinstance(args, tuple): raise _Corrupt(f"rebuild arguments must be a tuple, got {type(args).__name__}")
  return func(*args)
def _codecs_encode(text, encoding="utf-8"):  # protocol-2 pickles write bytes as _codecs.encode(str, "latin1")
  if not isinstance(text, str) or encoding not in ("latin1", "latin-1"): raise _Corrupt(f"_codecs.encode({_show(text)}, {_show(encoding)}) is not a bytes literal")
  return text.encode("latin1")

def _key(k: Any) -> Any:
  """k, if it may be a dict key or set member: hashing a tuple walks all of it, and a pickle can nest tuples that share
  one object (exponentially many items in a few bytes), so a key may hold at most MAX_KEY_ITEMS items in all."""
  todo, n = [k], 0
  while todo:
    x = todo.pop()
    if isinstance(x, (tuple, frozenset)):
      if (n := n + len(x)) > MAX_KEY_ITEMS: raise _Corrupt(f"a dict key or set member holds more than {MAX_KEY_ITEMS} items")
      todo.extend(x)
    elif not isinstance(x, (str, bytes, int, float, complex, type(None), type, _Frozen)):
      raise _Corrupt(f"a {type(x).__name__} can't be a dict key or set member")
  return k

def _pairs(items: list) -> list[tuple[Any, Any]]:
  if len(items) % 2: raise _Corrupt(f"{len(items)} items can't be read as (key, value) pairs")
  return [(_key(k), v) for k, v in zip(items[::2], items[1::2])]

def _ordered_dict(items: Any = ()) -> OrderedDict:
  pairs = list(items.items() if isinstance(items, dict) else items)
  if not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs): raise _Corrupt("OrderedDict(...) needs (key, value) pairs")
  return OrderedDict((_key(k), v) for k, v in pairs)
def _set(items: Any = ()) -> set: return {_key(k) for k in items}
def _frozenset(items: Any = ()) -> frozenset: return frozenset(_key(k) for k in items)
def _bytearray(data: Any = b"", encoding: Any = None) -> bytearray:  # protocol 2 writes bytearray(str, "latin-1")
  if isinstance(data, (bytes, bytearray)) and encoding is None: return bytearray(data)
  if isinstance(data, str) and isinstance(encoding, str): return bytearray(data, encoding)
  raise _Corrupt(f"bytearray({_show(data)}, {_show(encoding)}) is not a bytes literal")  # bytearray(n) would allocate n bytes
def _device(kind: Any, index: Any = None) -> str:  # torch.device("cuda", 0): only ever a label here
  if not isinstance(kind, str) or not (index is None or isinstance(index, int)): raise _Corrupt(f"bad torch.device({_show(kind)}, {_show(index)})")
  return kind if index is None else f"{kind}:{index}"

STORAGE_TYPES = {"Float": dtypes.float32, "Double": dtypes.float64, "Half": dtypes.float16, "BFloat16": dtypes.bfloat16,
                 "Long": dtypes.int64, "Int": dtypes.int32, "Short": dtypes.int16, "Char": dtypes.int8, "Byte": dtypes.uint8,
                 "Bool": dtypes.bool}
TORCH_DTYPES = {"float32": dtypes.float32, "float64": dtypes.float64, "float16": dtypes.float16, "bfloat16": dtypes.bfloat16,
                "int64": dtypes.int64, "int32": dtypes.int32, "int16": dtypes.int16, "int8": dtypes.int8, "uint8": dtypes.uint8,
                "bool": dtypes.bool, "uint16": dtypes.uint16, "uint32": dtypes.uint32, "uint64": dtypes.uint64,
                "float8_e4m3fn": dtypes.fp8e4m3, "float8_e5m2": dtypes.fp8e5m2}

ALLOWED_GLOBALS: dict[str, Any] = {
  "collections.OrderedDict": _Fn(_ordered_dict),
  "torch._utils._rebuild_tensor": _Fn(_rebuild_tensor), "torch._utils._rebuild_tensor_v2": _Fn(_rebuild_tensor_v2),
  "torch._utils._rebuild_tensor_v3": _Fn(_rebuild_tensor_v3), "torch._utils._rebuild_parameter": _Fn(_rebuild_parameter),
  "torch._utils._rebuild_parameter_with_state": _Fn(_rebuild_parameter), "torch._tensor._rebuild_from_type_v2": _Fn(_rebuild_from_type_v2),
  "torch.storage.UntypedStorage": _StorageType("UntypedStorage", None), "torch.UntypedStorage": _StorageType("UntypedStorage", None),
  "torch.Size": tuple, "torch.device": _Fn(_device), "_codecs.encode": _Fn(_codecs_encode),
  "builtins.set": _Fn(_set), "builtins.frozenset": _Fn(_frozenset), "builtins.bytearray": _Fn(_bytearray), "builtins.complex": complex,
  **{f"torch.{k}Storage": _StorageType(f"{k}Storage", v) for k, v in STORAGE_TYPES.items()},
  **{f"torch.{k}": _DTypeMarker(v) for k, v in TORCH_DTYPES.items()},
  **{f"torch.{k}Tensor": _TypeMarker(f"torch.{k}Tensor") for k in STORAGE_TYPES},
  **{n: _TypeMarker(n) for n in ("torch.Tensor", "torch.nn.parameter.Parameter")}}
_CALLABLE = {id(v) for v in ALLOWED_GLOBALS.values() if callable(v)}  # the values live as long as the module: ids are theirs

def _find_class(module: Any, name: Any) -> Any:
  if not isinstance(module, str) or not isinstance(name, str): raise _Corrupt(f"a global is named by {_show(module)}, {_show(name)}, not two strings")
  key = f"{'builtins' if module == '__builtin__' else module}.{name}"
  if key in ALLOWED_GLOBALS: return ALLOWED_GLOBALS[key]
  raise UnsafeGlobalError(f"refusing to load the global {key[:200]}: a tensor checkpoint only needs torch tensor/storage "
                          "rebuilds and containers, and anything else could run code")

# ---------------- the pickle machine ----------------
class _Unpickler:
  """Runs one pickle from a seekable binary file, reading exactly up to its STOP (legacy checkpoints are several pickles
  back to back). It implements the opcodes of protocols 0-5 that build plain data, memoize, call globals and name
  persistent ids; those that make arbitrary objects (INST, OBJ, NEWOBJ, EXT*, out-of-band buffers) are refused, and
  BUILD is accepted only as a dict's attribute state (a state_dict's `_metadata`), which is dropped. `at` is the
  offset of the opcode being run."""
  def __init__(self, f, persistent: Callable[[Any], Any] | None):
    self.f, self.persistent = f, persistent
    self.pos = self.at = f.tell()
    self.end = f.seek(0, 2)
    f.seek(self.pos)
    self.stack: list = []
    self.marks: list[list] = []
    self.memo: dict[int, Any] = {}

  def load(self) -> Any:
    while True:
      self.at = self.pos
      code = self.take(1)
      if code == pickle.STOP: return self.pop()
      if (handler := _OPS.get(code)) is None:
        op = pickletools.code2op.get(code.decode("latin1"))
        raise _Corrupt(f"opcode {op.name} is not used by tensor checkpoints" if op else f"unknown opcode {code!r}")
      handler(self)

  def take(self, n: int) -> bytes:
    if not 0 <= n <= self.end - self.pos: raise _Corrupt(f"an argument of {n} bytes runs past the end of the pickle ({self.end - self.pos} bytes left)")
    data = self.f.read(n)
    if len(data) != n: raise _Corrupt("the pickle is truncated")
    self.pos += n
    return data
  def unpack(self, fmt: str) -> Any: return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
  def counted(self, fmt: str) -> bytes: return self.take(self.unpack(fmt))
  def line(self) -> bytes:
    """A protocol-0 text argument, up to its newline."""
    parts = []
    while chunk := self.f.read(min(1 << 16, self.end - self.pos)):
      if (nl := chunk.find(b"\n")) >= 0:
        parts.append(chunk[:nl])
        self.pos += nl + 1
        self.f.seek(self.pos)
        return b"".join(parts)
      parts.append(chunk)
      self.pos += len(chunk)
    raise _Corrupt("a text argument runs to the end of the pickle without a newline")

  def push(self, x: Any) -> None: self.stack.append(x)
  def pop(self) -> Any:
    if not self.stack: raise _Corrupt("the stack is empty")
    return self.stack.pop()
  def pop_n(self, n: int) -> tuple:
    if len(self.stack) < n: raise _Corrupt(f"the stack holds fewer than {n} items")
    items = tuple(self.stack[len(self.stack) - n:])
    del self.stack[len(self.stack) - n:]
    return items
  def top(self, kind: type = object) -> Any:
    if not self.stack: raise _Corrupt("the stack is empty")
    if not isinstance(self.stack[-1], kind): raise _Corrupt(f"expected a {kind.__name__} on the stack, found a {type(self.stack[-1]).__name__}")
    return self.stack[-1]
  def mark(self) -> None:
    self.marks.append(self.stack)
    self.stack = []
  def pop_mark(self) -> list:
    if not self.marks: raise _Corrupt("no MARK to pop to")
    items, self.stack = self.stack, self.marks.pop()
    return items

  def proto(self) -> None:
    if (v := self.take(1)[0]) > pickle.HIGHEST_PROTOCOL: raise _Corrupt(f"unsupported pickle protocol {v}")
  def text_int(self) -> int:
    text = self.line()
    return {b"00": False, b"01": True}[text] if text in (b"00", b"01") else int(text, 0)  # protocol 0 spells bools as 00/01
  def string(self) -> str:
    text = self.line()
    if len(text) < 2 or text[:1] != text[-1:] or text[:1] not in (b"'", b'"'): raise _Corrupt("a STRING argument is not quoted")
    return codecs.escape_decode(text[1:-1])[0].decode("ascii")
  def append(self) -> None:
    value = self.pop()
    self.top(list).append(value)
  def appends(self) -> None:
    items = self.pop_mark()
    self.top(list).extend(items)
  def setitem(self) -> None:
    value, key = self.pop(), self.pop()
    self.top(dict)[_key(key)] = value
  def setitems(self) -> None:
    pairs = _pairs(self.pop_mark())
    self.top(dict).update(pairs)
  def additems(self) -> None:
    items = [_key(k) for k in self.pop_mark()]
    self.top(set).update(items)
  def stack_global(self) -> Any:
    name, module = self.pop(), self.pop()
    return _find_class(module, name)
  def reduce(self) -> Any:
    args, fn = self.pop(), self.pop()
    if id(fn) not in _CALLABLE: raise _Corrupt(f"the pickle calls {_show(fn)}, which is not an allowed global")
    if not isinstance(args, tuple): raise _Corrupt(f"call arguments must be a tuple, got {type(args).__name__}")
    return fn(*args)
  def build(self) -> None:
    state = self.pop()
    if not (isinstance(self.top(), dict) and isinstance(state, dict)): raise _Corrupt(f"the pickle sets the state of {_show(self.top())}")
  def persistent_id(self, pid: Any) -> Any:
    if self.persistent is None: raise _Corrupt(f"unexpected persistent id {_show(pid)}")
    return self.persistent(pid)
  def get(self, i: int) -> None:
    if i not in self.memo: raise _Corrupt(f"memo entry {i} is read before it is written")
    self.push(self.memo[i])
  def put(self, i: int) -> None: self.memo[i] = self.top()

_U = _Unpickler
_OPS: dict[bytes, Callable[[_Unpickler], Any]] = {
  pickle.PROTO: _U.proto, pickle.FRAME: lambda u: u.take(8),  # frames only group opcodes for buffered reading
  pickle.MARK: _U.mark, pickle.POP: lambda u: u.pop() if u.stack else u.pop_mark(), pickle.POP_MARK: _U.pop_mark,
  pickle.DUP: lambda u: u.push(u.top()), pickle.NONE: lambda u: u.push(None), pickle.NEWTRUE: lambda u: u.push(True),
  pickle.NEWFALSE: lambda u: u.push(False),
  pickle.INT: lambda u: u.push(u.text_int()),
  pickle.BININT: lambda u: u.push(u.unpack("<i")), pickle.BININT1: lambda u: u.push(u.unpack("<B")),
  pickle.BININT2: lambda u: u.push(u.unpack("<H")), pickle.LONG: lambda u: u.push(int(u.line().removesuffix(b"L"), 0)),
  pickle.LONG1: lambda u: u.push(int.from_bytes(u.counted("<B"), "little", signed=True)),
  pickle.LONG4: lambda u: u.push(int.from_bytes(u.counted("<i"), "little", signed=True)),
  pickle.FLOAT: lambda u: u.push(float(u.line())), pickle.BINFLOAT: lambda u: u.push(u.unpack(">d")),
  pickle.STRING: lambda u: u.push(u.string()), pickle.BINSTRING: lambda u: u.push(u.counted("<i").decode("ascii")),
  pickle.SHORT_BINSTRING: lambda u: u.push(u.counted("<B").decode("ascii")),
  pickle.UNICODE: lambda u: u.push(u.line().decode("raw-unicode-escape")),
  pickle.BINUNICODE: lambda u: u.push(u.counted("<I").decode("utf-8", "surrogatepass")),
  pickle.SHORT_BINUNICODE: lambda u: u.push(u.counted("<B").decode("utf-8", "surrogatepass")),
  pickle.BINUNICODE8: lambda u: u.push(u.counted("<Q").decode("utf-8", "surrogatepass")),
  pickle.BINBYTES: lambda u: u.push(u.counted("<I")), pickle.SHORT_BINBYTES: lambda u: u.push(u.counted("<B")),
  pickle.BINBYTES8: lambda u: u.push(u.counted("<Q")), pickle.BYTEARRAY8: lambda u: u.push(bytearray(u.counted("<Q"))),
  pickle.EMPTY_LIST: lambda u: u.push([]), pickle.EMPTY_TUPLE: lambda u: u.push(()), pickle.EMPTY_DICT: lambda u: u.push({}),
  pickle.EMPTY_SET: lambda u: u.push(set()), pickle.LIST: lambda u: u.push(u.pop_mark()),
  pickle.TUPLE: lambda u: u.push(tuple(u.pop_mark())), pickle.TUPLE1: lambda u: u.push(u.pop_n(1)),
  pickle.TUPLE2: lambda u: u.push(u.pop_n(2)), pickle.TUPLE3: lambda u: u.push(u.pop_n(3)),
  pickle.DICT: lambda u: u.push(dict(_pairs(u.pop_mark()))), pickle.FROZENSET: lambda u: u.push(frozenset(map(_key, u.pop_mark()))),
  pickle.APPEND: _U.append, pickle.APPENDS: _U.appends, pickle.SETITEM: _U.setitem,
  pickle.SETITEMS: _U.setitems, pickle.ADDITEMS: _U.additems,
  pickle.GLOBAL: lambda u: u.push(_find_class(u.line().decode("utf-8"), u.line().decode("utf-8"))),
  pickle.STACK_GLOBAL: lambda u: u.push(u.stack_global()), pickle.REDUCE: lambda u: u.push(u.reduce()), pickle.BUILD: _U.build,
  pickle.PERSID: lambda u: u.push(u.persistent_id(u.line().decode("ascii"))), pickle.BINPERSID: lambda u: u.push(u.persistent_id(u.pop())),
  pickle.GET: lambda u: u.get(int(u.line())), pickle.BINGET: lambda u: u.get(u.unpack("<B")), pickle.LONG_BINGET: lambda u: u.get(u.unpack("<I")),
  pickle.PUT: lambda u: u.put(int(u.line())), pickle.BINPUT: lambda u: u.put(u.unpack("<B")), pickle.LONG_BINPUT: lambda u: u.put(u.unpack("<I")),
  pickle.MEMOIZE: lambda u: u.put(len(u.memo))}

def _unpickle(f, fn: str, what: str, persistent: Callable[[Any], Any] | None = None) -> Any:
  """One pickle from `f` (a _SourceFile, or a BytesIO holding a zip entry); any failure is a ValueError naming the
  file and the offset of the opcode (in the file, or in the entry)."""
  u = _Unpickler(f, persistent)
  try: return u.load()
  except UnsafeGlobalError as e: raise UnsafeGlobalError(f"{fn}: {e} ({what}, opcode at {_where(f, u.at)})") from None
  except (_Corrupt, ValueError, TypeError, KeyError, IndexError, AttributeError, struct.error, OverflowError, MemoryError) as e:
    detail = str(e) if isinstance(e, _Corrupt) else f"{type(e).__name__}: {e}"
    raise ValueError(f"{fn}: corrupt or truncated pickle ({what}, opcode at {_where(f, u.at)}): {detail[:500]}") from None

def _where(f, at: int) -> str: return f"file offset {f.start + at}" if isinstance(f, _SourceFile) else f"offset {at} of the entry"

class _SourceFile(io.RawIOBase):
  """A seekable read-only file over a ByteSource (so zipfile and the unpickler can read a path or a Tensor alike); a
  read never returns, or allocates, more than is left."""
  def __init__(self, src: ByteSource, start: int = 0, end: int | None = None):
    self.src, self.start, self.end, self.pos = src, start, src.size if end is None else end, start
  def readable(self) -> bool: return True
  def seekable(self) -> bool: return True
  def tell(self) -> int: return self.pos - self.start
  def seek(self, offset: int, whence: int = 0) -> int:
    base = {0: self.start, 1: self.pos, 2: self.end}[whence]
    self.pos = max(self.start, base + offset)
    return self.pos - self.start
  def read(self, n: int | None = -1) -> bytes:
    n = max(0, self.end - self.pos if n is None or n < 0 else min(n, self.end - self.pos))
    if n == 0: return b""
    out = self.src.read(self.pos, n)
    self.pos += n
    return out

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

def _collect(obj: Any, build: Callable[[_TensorRef, str], Tensor], fn: str, pickle_bytes: int) -> OrderedDict[str, Tensor]:
  """The tensors of the loaded object by dotted name; a dict holding 'state_dict' or 'model' is unwrapped first. The
  walk visits each container once (a pickle can share one container at many places, or put it inside itself: its
  tensors keep the names of the first path) and builds each tensor once (names reaching the same tensor share it).
  The names may add up to 1 MiB plus NAME_CHARS_PER_BYTE characters per byte of pickle (deep nesting repeats them)."""
  if isinstance(obj, dict):
    for key in ("state_dict", "model"):
      if isinstance(obj.get(key), dict):
        obj = obj[key]
        break
  out: OrderedDict[str, Tensor] = OrderedDict()
  built: dict[int, Tensor] = {}
  walked: set[int] = set()
  budget = (1 << 20) + NAME_CHARS_PER_BYTE * pickle_bytes
  todo: list[tuple[str, Any]] = [("", obj)]
  while todo:
    name, o = todo.pop()
    if isinstance(o, _TensorRef):
      if id(o) not in built: built[id(o)] = build(o, name)
      out[name] = built[id(o)]
    elif isinstance(o, (dict, list, tuple)) and id(o) not in walked:
      walked.add(id(o))
      children = []
      for k, v in (o.items() if isinstance(o, dict) else enumerate(o)):
        if not isinstance(v, (_TensorRef, dict, list, tuple)): continue
        label = k if isinstance(k, str) else _show(k)  # str() of a key from the pickle could be huge
        child = f"{name}.{label}" if name else label
        if (budget := budget - len(child)) < 0:
          raise ValueError(f"{fn}: the tensor names add up to more than {(1 << 20) + NAME_CHARS_PER_BYTE * pickle_bytes} characters "
                           f"(containers nested too deep under {name[:100]!r}...)")
        children.append((child, v))
      todo.extend(reversed(children))
  return out

def _storage_pid(pid: Any, storages: dict[str, _Storage]) -> _Storage:
  """('storage', type, key, location, numel[, view_metadata]) -> the storage (views of one key share its bytes)."""
  if not isinstance(pid, tuple) or len(pid) not in (5, 6) or pid[0] not in ("storage", b"storage"):
    raise _Corrupt(f"unexpected persistent id {_show(pid)} (only tensor storages are supported)")
  stype, key, numel = pid[1], pid[2], pid[4]
  if not isinstance(key, (str, int)) or isinstance(key, bool) or isinstance(key, int) and key.bit_length() > 64:
    raise _Corrupt(f"storage key {_show(key)} is not a string or an int")
  key = str(key)
  if not isinstance(stype, _StorageType): raise _Corrupt(f"storage {key} has type {_show(stype)}, not a storage class")
  if not isinstance(numel, int) or numel < 0: raise _Corrupt(f"storage {key} has bad size {_show(numel)}")
  isz = 1 if stype.dtype is None else stype.dtype.itemsize
  if key not in storages: storages[key] = _Storage(key, stype.dtype, 0, numel * isz)
  view = pid[5] if len(pid) == 6 else None
  if view is None: return storages[key]
  if not (isinstance(view, tuple) and len(view) == 3 and all(isinstance(v, int) and v >= 0 for v in view[1:])): raise _Corrupt(f"bad storage view {_show(view)}")
  return _Storage(key, stype.dtype, view[1] * isz, view[2] * isz)

# ---------------- the three layouts ----------------
def _load_zip(src: ByteSource, fn: str) -> OrderedDict[str, Tensor]:
  try:
    zf = zipfile.ZipFile(_SourceFile(src))
    names = zf.namelist()
  except _ZIP_ERRORS as e: raise ValueError(f"{fn}: not a readable zip archive: {e}") from None
  pkls = sorted((n for n in names if n == "data.pkl" or n.endswith("/data.pkl")), key=lambda n: n.count("/"))
  if not pkls: raise ValueError(f"{fn}: the zip archive has no data.pkl entry (not a torch.save checkpoint)")
  prefix = pkls[0][:-len("data.pkl")]

  def entry_bytes(info: zipfile.ZipInfo, n: int) -> bytes:
    """The first n bytes of an entry (fewer if it is shorter): a compressed entry is inflated only that far."""
    try:
      with zf.open(info) as f: return f.read(n)
    except _ZIP_ERRORS as e: raise ValueError(f"{fn}: zip entry {info.filename!r} can't be read: {e}") from None

  little = True
  if prefix + "byteorder" in names:
    order = entry_bytes(zf.getinfo(prefix + "byteorder"), 64).decode("ascii", "replace").strip()
    if order not in ("little", "big"): raise ValueError(f"{fn}: zip entry {prefix}byteorder says {order[:20]!r}, expected 'little' or 'big'")
    little = order == "little"
  info = zf.getinfo(pkls[0])
  limit = src.size if info.compress_type == zipfile.ZIP_STORED else MAX_PICKLE
  if info.file_size > limit: raise ValueError(f"{fn}: zip entry {pkls[0]!r} claims {info.file_size} bytes, more than the {limit} a pickle may have here")
  pkl = entry_bytes(info, info.file_size)
  storages: dict[str, _Storage] = {}
  obj = _unpickle(io.BytesIO(pkl), fn, f"zip entry {pkls[0]!r}", lambda pid: _storage_pid(pid, storages))

  located: dict[str, tuple[ByteSource, int, int]] = {}
  def locate(key: str) -> tuple[ByteSource, int, int]:
    if key in located: return located[key]
    name = f"{prefix}data/{key}"
    try: info = zf.getinfo(name)
    except KeyError: raise ValueError(f"{fn}: missing zip entry {name!r} for tensor storage {key}") from None
    if info.compress_type != zipfile.ZIP_STORED:  # compressed (not what torch writes): inflate only what the storage holds
      data = entry_bytes(info, storages[key].nbytes)
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
  return _collect(obj, build, fn, len(pkl))

def _load_legacy(src: ByteSource, fn: str) -> OrderedDict[str, Tensor]:
  f = _SourceFile(src)
  magic = _unpickle(f, fn, "magic number")
  if magic != LEGACY_MAGIC: raise ValueError(f"{fn}: not a PyTorch checkpoint: no zip or tar header, and the legacy magic number at offset 0 is {_show(magic)}")
  protocol = _unpickle(f, fn, "protocol version")
  if protocol != LEGACY_PROTOCOL: raise ValueError(f"{fn}: unsupported legacy protocol version {_show(protocol)} (expected {LEGACY_PROTOCOL})")
  sys_info = _unpickle(f, fn, "system info")
  little = not isinstance(sys_info, dict) or bool(sys_info.get("little_endian", True))
  storages: dict[str, _Storage] = {}
  obj_at = f.tell()
  obj = _unpickle(f, fn, "the saved object", lambda pid: _storage_pid(pid, storages))
  obj_bytes = f.tell() - obj_at
  keys = _unpickle(f, fn, "storage keys")
  if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys): raise ValueError(f"{fn}: the storage key list is {_show(keys)}, not a list of strings")
  located: dict[str, tuple[int, int]] = {}
  pos = f.tell()
  for key in keys:
    if key not in storages: raise ValueError(f"{fn}: storage key {key[:100]} at offset {pos} is not used by any tensor")
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
  return _collect(obj, build, fn, obj_bytes)

def _load_tar(src: ByteSource, fn: str, members: dict[str, tuple[int, int]]) -> OrderedDict[str, Tensor]:
  for need in ("storages", "tensors", "pickle"):
    if need not in members: raise ValueError(f"{fn}: the tar archive has no {need!r} member (not a legacy PyTorch checkpoint)")
  def member(name: str) -> _SourceFile:
    off, size = members[name]
    return _SourceFile(src, off, off + size)
  def key(k: Any, f: _SourceFile) -> str:
    if isinstance(k, str) or isinstance(k, int) and not isinstance(k, bool) and k.bit_length() <= 64: return str(k)
    if isinstance(k, bytes): return k.decode("utf-8", "surrogateescape")
    raise ValueError(f"{fn}: key {_show(k)} before offset {f.start + f.tell()} is not a string or an int")

  f = member("storages")
  storages: dict[str, tuple[DType, int, int]] = {}  # key -> (dtype, file offset, bytes)
  count = _unpickle(f, fn, "storage count")
  if not isinstance(count, int) or count < 0: raise ValueError(f"{fn}: bad storage count {_show(count)}")
  for _ in range(count):
    entry = _unpickle(f, fn, "storage header")
    if not (isinstance(entry, tuple) and len(entry) == 3 and isinstance(entry[2], _StorageType) and entry[2].dtype is not None):
      raise ValueError(f"{fn}: bad storage header {_show(entry)} in member 'storages' at offset {f.start + f.tell()}")
    dt, at, skey = entry[2].dtype, f.start + f.tell(), key(entry[0], f)
    n = struct.unpack("<q", src.read(at, 8, f"size of storage {skey}"))[0]
    if n < 0 or at + 8 + n * dt.itemsize > f.end:
      raise ValueError(f"{fn}: storage {skey} at offset {at} claims {n} elements, past the end of the 'storages' member")
    storages[skey] = (dt, at + 8, n * dt.itemsize)
    f.seek(8 + n * dt.itemsize, 1)
  views = _unpickle(f, fn, "storage views")
  for view in views if isinstance(views, list) else []:
    if not (isinstance(view, tuple) and len(view) == 4 and all(isinstance(v, int) for v in view[2:])):
      raise ValueError(f"{fn}: bad storage view {_show(view)} in member 'storages'")
    target, root, offset, numel = key(view[0], f), key(view[1], f), view[2], view[3]
    if root not in storages: raise ValueError(f"{fn}: storage view {target} of unknown storage {root}")
    dt, at, nbytes = storages[root]
    if offset < 0 or numel < 0 or (offset + numel) * dt.itemsize > nbytes: raise ValueError(f"{fn}: storage view {target} is outside storage {root}")
    storages[target] = (dt, at + offset * dt.itemsize, numel * dt.itemsize)

  f = member("tensors")
  refs: dict[str, _TensorRef] = {}
  count = _unpickle(f, fn, "tensor count")
  if not isinstance(count, int) or count < 0: raise ValueError(f"{fn}: bad tensor count {_show(count)}")
  for _ in range(count):
    entry = _unpickle(f, fn, "tensor header")
    if not (isinstance(entry, tuple) and len(entry) == 3) or key(entry[1], f) not in storages:
      raise ValueError(f"{fn}: bad tensor header {_show(entry)} in member 'tensors' at offset {f.start + f.tell()}")
    at, tkey, skey = f.start + f.tell(), key(entry[0], f), key(entry[1], f)
    ndim = struct.unpack("<i", src.read(at, 4, "tensor dims"))[0]
    if not 0 <= ndim <= MAX_DIMS: raise ValueError(f"{fn}: tensor {tkey} at offset {at} has {ndim} dims")
    fields = struct.unpack(f"<{2 * ndim + 1}q", src.read(at + 8, 8 * (2 * ndim + 1), f"shape of tensor {tkey}"))
    f.seek(8 + 8 * (2 * ndim + 1), 1)
    dt = storages[skey][0]
    try: ref = _tensor_ref(_Storage(skey, dt, 0, None), fields[-1], fields[:ndim], fields[ndim:2 * ndim], dt)
    except _Corrupt as e: raise ValueError(f"{fn}: tensor {tkey}: {e}") from None
    refs[tkey] = ref

  def persistent(pid: Any) -> Any:
    if (k := key(pid, f)) not in refs: raise _Corrupt(f"the pickle names tensor {k[:100]}, which is not in the 'tensors' member")
    return refs[k]
  f = member("pickle")
  obj = _unpickle(f, fn, "the saved object", persistent)

  def build(ref: _TensorRef, name: str) -> Tensor:
    _, start, nbytes = storages[ref.storage.key]
    try: return _build(ref, src, start, nbytes, True, f"tensor {name!r} (storage {ref.storage.key})")
    except _Corrupt as e: raise ValueError(f"{fn}: {e}") from None
  return _collect(obj, build, fn, members["pickle"][1])

def torch_load(fn: str | os.PathLike | Tensor) -> OrderedDict[str, Tensor]:
  """name -> Tensor from a file written by torch.save (zip, legacy or legacy tar layout), given as a path or a 1-d uint8
  Tensor of its bytes. Contiguous tensors are lazy views of the file (on DISK for a path). A dict holding 'state_dict'
  or 'model' is unwrapped; nested dicts and lists get dotted names; non-tensor values are left out. A pickle naming
  any global outside the allow-list raises UnsafeGlobalError (a ValueError and a pickle.UnpicklingError) before anything
  runs; corrupt, truncated or hostile files raise ValueError naming the file and the problem."""
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
