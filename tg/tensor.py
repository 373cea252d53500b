"""Tensor: a lazy, differentiable n-dimensional array. Ops build a UOp graph; `realize()` (and everything that reads
data) schedules the graph into kernels and runs them. The op surface lives in the mixins next to this file."""
from __future__ import annotations
import functools, pathlib, weakref
from typing import Any, Sequence
import numpy as np
from ir.dtype import DType, check_fits, dtypes, fits, least_upper_dtype, to_dtype
from ir.helpers import broadcast_shape, dedup
from ir.ops import Ops, ALU, MOVEMENT
from ir.uop import UOp, all_int, map_args, sint, sprod, ssimplify, sym_value
from drivers.device import Buffer, Device
from tg.creation import CreationMixin
from tg.elementwise import ElementwiseMixin
from tg.gradient import compute_gradient
from tg.losses import LossMixin
from tg.movement import MovementMixin
from tg.numpy_bridge import decode, dtype_of_numpy, encode, storage_dtype, value_dtype
from tg.processing import ProcessingMixin
from tg.realize import capture_stack, run_schedule
from tg.memory_plan import share_memory
from tg.reduce import ReduceMixin
from tg.schedule import AS_IMAGE, buffer_of, contiguous_region
from tg.schedule_cache import create_schedule
from tg.multi import distribute, shard as shard_uop
from ir.pattern import substitute as substitute_nodes

def _buffer_uop(arr: np.ndarray, device: str, dtype: DType) -> UOp:
  data = encode(arr, dtype)
  buf = Buffer(device, data.size, dtype).copyin(memoryview(data.reshape(-1)).cast("B"))
  return UOp(Ops.BUFFER, dtype, (), (buf,)).reshape(arr.shape)

def _parts(u: UOp) -> tuple[UOp, ...]: return u.src if u.op is Ops.MULTI else (u,)
def _is_realized(u: UOp) -> bool: return u.base.op is Ops.BUFFER or (u.op is Ops.MULTI and all(_is_realized(s) for s in u.src))

def _expanded(u: UOp, shape: tuple) -> UOp:
  """u broadcast to `shape` (which it fits): leading size-1 axes added, then expanded."""
  return u if u.shape == shape else u.reshape((1,) * (len(shape) - len(u.shape)) + u.shape).expand(shape)

def _variable_expression(y: Any) -> bool:
  return isinstance(y, UOp) and dtypes.is_int(y.dtype) and all(n.op in (Ops.BIND, Ops.DEFINE_VAR) or n.op in ALU or (n.op is Ops.CONST and not n.src) for n in y.toposort())

class Tensor(CreationMixin, ElementwiseMixin, MovementMixin, ReduceMixin, ProcessingMixin, LossMixin):
  """An n-dimensional array on a device. `Tensor(data, device=None, dtype=None, requires_grad=False)` takes a Python
  scalar, nested lists, bytes, a numpy array, a pathlib.Path (a DISK tensor) or a UOp."""
  __slots__ = ("uop", "requires_grad", "grad", "_leaf", "_aliases", "__weakref__")
  _live: weakref.WeakSet[Tensor] = weakref.WeakSet()
  # the live tensors whose graph may need a realize's results (every one not known to read a buffer), by id: a
  # WeakSet would compare tensors with ==, which is elementwise
  _pending: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()
  __array_ufunc__ = None  # numpy defers to the Tensor's reflected operators (np.float32(2) * t is a Tensor, not an object array)

  def __init__(self, data: Any, device: str | None = None, dtype: DType | str | None = None, requires_grad: bool | None = None):
    dtype = to_dtype(dtype) if dtype is not None else None
    devices = tuple(Device.canonicalize(d) for d in device) if isinstance(device, (tuple, list)) else None  # made on the first, then copied
    dev = devices[0] if devices else Device.canonicalize(device) if device is not None else None
    if isinstance(data, UOp): uop = data if dtype is None else data.cast(dtype)
    elif data is None or isinstance(data, (bool, int, float)):
      value = 0.0 if data is None else data
      uop = UOp.const(check_fits(value, dtype) if dtype else dtypes.from_py(value), value, dev or Device.DEFAULT)
    elif isinstance(data, (list, tuple)): uop = self._from_sequence(data, dev or Device.DEFAULT, dtype)
    elif isinstance(data, (bytes, bytearray, memoryview)):
      uop = _buffer_uop(np.frombuffer(bytes(data), dtype=np.uint8), dev or Device.DEFAULT, dtype or dtypes.uint8)
    elif isinstance(data, (np.ndarray, np.generic)):
      dt = dtype or dtype_of_numpy(data)
      uop = UOp.const(dt, data.item(), dev or Device.DEFAULT) if data.ndim == 0 else _buffer_uop(data, dev or Device.DEFAULT, dt)
    elif isinstance(data, pathlib.Path):
      size = data.stat().st_size
      uop = UOp(Ops.BUFFER, dtypes.uint8, (), (Buffer(f"DISK:{data}", size, dtypes.uint8),)).reshape((size,))
    else: raise TypeError(f"can't make a Tensor from {type(data).__name__}")
    if devices and len(devices) > 1 and not isinstance(data, UOp): uop = shard_uop(uop, devices, None)
    # _aliases: graph nodes that named this leaf before a realize or an assign moved it (held weakly: only graphs built
    # from them need them), so gradients of those graphs still reach it
    self.grad, self._aliases = None, None
    self._point_at(uop)
    # None: never set (autograd treats it as False; an optimizer given this tensor trains it); True/False: explicit
    self.requires_grad: bool | None = requires_grad
    self._leaf = True
    if requires_grad and not dtypes.is_float(uop.dtype): raise RuntimeError(f"only floating point tensors can require gradients, got {uop.dtype}")
    Tensor._live.add(self)

  def _point_at(self, uop: UOp) -> None:
    """Make `uop` this tensor's graph (the one place that changes it)."""
    self.uop = uop
    if uop.base.op is not Ops.BUFFER: Tensor._pending[id(self)] = self

  @staticmethod
  def _from_sequence(data: Sequence, device: str, dtype: DType | None) -> UOp:
    try: arr = np.array(data)
    except ValueError as e: raise ValueError(f"nested sequence is ragged, every level must have one length: {e}") from None
    if arr.dtype == object:
      if all(isinstance(v, int) for v in arr.flat): raise OverflowError(f"{max(arr.flat, key=abs)} is out of range for every integer dtype")
      raise ValueError("nested sequence is ragged or holds non-numbers")
    explicit = dtype is not None
    if dtype is None: dtype = dtypes.bool if arr.dtype == np.bool_ else (dtypes.default_float if arr.dtype.kind == "f" or arr.size == 0 else dtypes.default_int)
    if arr.dtype.kind in "iu" and arr.size and dtypes.is_int(dtype):
      lo, hi = int(arr.min()), int(arr.max())
      if not explicit and not (fits(lo, dtype) and fits(hi, dtype)): dtype = dtypes.int64  # as PyTorch: int64 when needed
      check_fits(lo, dtype), check_fits(hi, dtype)
    return _buffer_uop(arr, device, dtype)

  def _new(self, uop: UOp, *parents: Tensor) -> Tensor:
    """A tensor computed from self (and parents): it requires grad if any of them does."""
    if uop.op not in MOVEMENT and uop.op not in (Ops.BUFFER, Ops.COPY, Ops.ASSIGN) and isinstance(dev := uop.device, str) and dev.startswith("DISK"):
      raise RuntimeError(f"{dev} stores data but can't compute ({uop.op.name}); copy it to a compute device first, e.g. .to(\"CPU\")")
    out = Tensor(uop)
    out.requires_grad = bool(self.requires_grad or any(p.requires_grad for p in parents))
    out._leaf = not out.requires_grad
    return out

  # ---------------- properties ----------------
  @property
  def shape(self) -> tuple[sint, ...]:
    """The sizes; a symbolic one is an expression of bound Variables (`Tensor.ones(10)[:Variable("i", 1, 10).bind(3)]`)."""
    return self.uop.shape
  @property
  def dtype(self) -> DType: return self.uop.dtype
  @property
  def device(self) -> str: return self.uop.device
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> sint: return sprod(self.shape)
  def element_size(self) -> int: return self.dtype.itemsize
  @property
  def nbytes(self) -> int: return self.numel() * self.element_size()
  def is_floating_point(self) -> bool: return dtypes.is_float(self.dtype)
  def size(self, dim: int | None = None) -> tuple[int, ...] | int: return self.shape if dim is None else self.shape[self._axis(dim)]
  @property
  def is_leaf(self) -> bool: return self._leaf
  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    if not isinstance(self.shape[0], int): raise TypeError(f"len() of a tensor whose first size is symbolic ({self.shape[0]})")
    return self.shape[0]
  def __bool__(self): raise TypeError("the truth value of a Tensor is ambiguous; use .item(), .any() or .all()")
  def __repr__(self) -> str: return f"<Tensor {self.uop.op.name} on {self.device} with shape {self.shape}, dtype {self.dtype}{', requires_grad' if self.requires_grad else ''}>"
  def __hash__(self) -> int: return id(self)
  def __reduce__(self): return Tensor, (self.numpy(), self.device, self.dtype, self.requires_grad)

  # ---------------- realization and data ----------------
  def realize(self, *others: Tensor) -> Tensor:
    """Compute self (and `others`) in one schedule; afterwards they read from buffers."""
    Tensor.realize_all(self, *others)
    return self
  @staticmethod
  def realize_all(*tensors: Tensor) -> None:
    tensors = tuple(t for t in tensors if not _is_realized(t.uop))
    if not tensors: return
    first: dict[UOp, Tensor] = {}
    for t in tensors:  # distinct tensors computing one value (two Tensor.zeros(3)) each get memory of their own
      if first.setdefault(t.uop, t) is not t and t._own_buffer_possible(): t._point_at(t._into_new_buffer())
    targets = dedup(t.uop for t in tensors)
    plan = distribute(targets)  # multi-device tensors as one graph per device
    items, becomes, _ = create_schedule(dedup(p for t in targets for p in _parts(plan.get(t, t))))
    memo: dict[UOp, UOp] = {}
    for n, d in plan.items():  # logical nodes whose every part was stored (the targets, and what the scheduler kept) read those
      parts = tuple(_substituted(p, becomes, memo) for p in _parts(d))
      if all(_is_realized(p) for p in parts): becomes[n] = UOp(Ops.MULTI, d.dtype, parts, d.arg) if d.op is Ops.MULTI else parts[0]
    pointings = _new_graphs(becomes, {t.uop: t for t in tensors})
    run_schedule(share_memory(items, list(becomes.values()), held=[new for _, new in pointings]))
    _point_all(pointings)
  def _own_buffer_possible(self) -> bool: return isinstance(self.device, str) and all_int(self.shape)
  def _into_new_buffer(self) -> UOp:
    """self's value written into a new buffer: the node of a tensor that shares no memory with any other."""
    return Tensor.empty(self.shape, dtype=self.dtype, device=self.device).assign(Tensor(self.uop)).uop
  def schedule(self, *others: Tensor) -> list:
    """The kernels and copies realizing self and `others` would run (nothing is run)."""
    targets = dedup(t.uop for t in (self, *others) if not _is_realized(t.uop))
    plan = distribute(targets)
    return create_schedule(dedup(p for t in targets for p in _parts(plan.get(t, t))))[0]

  def _contiguous_buffer(self) -> Buffer:
    """A buffer holding exactly self's elements in row-major order (computing them if needed)."""
    self.realize()
    if (region := contiguous_region(self.uop)) is not None: return region
    t = Tensor(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,))).realize()
    return buffer_of(t.uop)[0]

  def numpy(self) -> np.ndarray:
    """The values as a new numpy array (bfloat16 and fp8 come back as float32)."""
    if capture_stack: raise RuntimeError("cannot access tensor data during JIT capture, the value would be baked in")
    if isinstance(self.device, tuple): return self.to(self.device[0]).numpy()
    if not all_int(self.shape): return self._concrete().numpy()
    if self.numel() == 0: return np.zeros(self.shape, dtype=value_dtype(self.dtype))
    buf = self._contiguous_buffer()
    raw = np.frombuffer(buf.as_bytes(), dtype=storage_dtype(self.dtype))
    return decode(raw, self.dtype).reshape(self.shape).copy()
  def _concrete(self) -> Tensor:
    """self with its bound Variables' values in place of its symbolic sizes: realized (in row-major order) first, so
    the kernels computing it are the ones every value shares and what is left is a view of the front of a buffer."""
    self.realize()
    found = buffer_of(self.uop)
    t = self if found is not None and found[1].contiguous else Tensor(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,))).realize()
    def value(x: UOp) -> int:
      if (v := sym_value(x)) is None: raise ValueError(f"can't read a tensor of shape {self.shape}: it has an unbound Variable")
      return v
    return Tensor(map_args(t.uop, value)[t.uop])
  def tolist(self) -> Any: return self.numpy().tolist()
  def item(self) -> Any:
    if self.numel() != 1: raise ValueError(f"item() needs a tensor with one element, this one has shape {self.shape}")
    return self.numpy().reshape(()).item()
  def data(self) -> memoryview:
    arr = self.numpy()
    return memoryview(arr) if arr.ndim else memoryview(arr.reshape(1)).cast(arr.dtype.char)

  # ---------------- graph plumbing ----------------
  def detach(self) -> Tensor: return Tensor(UOp(Ops.DETACH, self.dtype, (self.uop,)))
  def contiguous(self) -> Tensor: return self._new(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,)))
  def _as_image(self) -> Tensor:
    """contiguous(), kept as a 2-D image where the device has images and the shape fits (IMAGE=1's packed operands)."""
    return self._new(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,), AS_IMAGE))
  def contiguous_backward(self) -> Tensor: return self._new(UOp(Ops.CONTIGUOUS_BACKWARD, self.dtype, (self.uop,)))
  def clone(self) -> Tensor:
    """A copy in memory of its own (an assign to either never shows in the other; a multi-device or symbolic-size
    tensor's copy may share a realized one's memory); gradients flow through it."""
    if not self._own_buffer_possible(): return self._new(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,)))
    return Tensor.empty(self.shape, dtype=self.dtype, device=self.device).assign(self)
  def to(self, device: str | tuple[str, ...] | None) -> Tensor:
    """A copy on `device`; a tuple of devices replicates (a multi-device tensor is gathered first)."""
    if isinstance(device, (tuple, list)):
      devices = tuple(Device.canonicalize(d) for d in device)
      if devices == self.device: return self
      return (self.to(self.device[0]) if isinstance(self.device, tuple) else self).shard(devices)
    device = Device.canonicalize(device) if device is not None else Device.DEFAULT
    if device == self.device: return self
    out = self._new(UOp(Ops.COPY, self.dtype, (self.uop,), device))
    if self.grad is not None: out.grad = self.grad.to(device)
    return out
  def to_(self, device: str | None) -> Tensor:
    self._point_at(self.to(device).uop)
    return self
  def cpu(self) -> Tensor: return self.to("CPU")
  def shard(self, devices: Sequence[str], axis: int | None = None) -> Tensor:
    """self split evenly along `axis` over `devices` (axis None: a whole copy on each); the result is one logical
    tensor of the same shape whose ops run on every device. The axis must divide evenly (as in tinygrad)."""
    if isinstance(self.device, tuple): raise RuntimeError(f"can't shard a tensor that is already on {self.device}; gather it with .to(device) first")
    devices = tuple(Device.canonicalize(d) for d in devices)
    if len(set(devices)) != len(devices): raise ValueError(f"shard devices must be distinct, got {devices}")
    if len(devices) == 1: return self.to(devices[0])
    return self._new(shard_uop(self.uop, devices, None if axis is None else self._axis(axis)))
  def shard_(self, devices: Sequence[str], axis: int | None = None) -> Tensor:
    self._point_at(self.shard(devices, axis).uop)
    return self
  def replace(self, x: Tensor) -> Tensor:
    if x.shape != self.shape: raise ValueError(f"replace needs the same shape, got {x.shape} for {self.shape}")
    self._point_at(x.uop)
    return self
  def assign(self, x: Any) -> Tensor:
    """Write x into self's memory (in place when self is realized); x is broadcast and cast to self."""
    x = x if isinstance(x, Tensor) else Tensor(x, device=self.device, dtype=self.dtype)
    if x.device != self.device: raise ValueError(f"assign across devices: {x.device} into {self.device}")
    if x.dtype != self.dtype: x = x.cast(self.dtype)
    x = x._broadcast_to(self.shape)
    if self.requires_grad and self._leaf: self._remember_alias()
    elif x.requires_grad: self.requires_grad, self._leaf = True, False  # as torch's copy_: the value's graph flows through
    self._point_at(UOp(Ops.ASSIGN, self.dtype, (self.uop, x.uop)) if _is_realized(self.uop) else x.uop)
    return self
  def _remember_alias(self) -> None:
    if self._aliases is None: self._aliases = weakref.WeakSet()
    self._aliases.add(self.uop)

  # ---------------- broadcasting ----------------
  def _broadcast_to(self, shape: tuple[int, ...]) -> Tensor:
    shape = tuple(shape)
    if self.shape == shape: return self
    if len(shape) < self.ndim or broadcast_shape(self.shape, shape) != shape: raise ValueError(f"can't broadcast {self.shape} to {shape}")
    return self._new(_expanded(self.uop, shape))

  def _scalar_dtype(self, y: bool | int | float) -> DType:
    if isinstance(y, bool): return self.dtype
    if isinstance(y, int): return self.dtype if self.dtype != dtypes.bool else dtypes.from_py(y)
    return self.dtype if dtypes.is_float(self.dtype) else dtypes.default_float

  def _broadcasted(self, y: Any, reverse: bool = False, match_dtype: bool = True) -> tuple[Tensor, Tensor]:
    x = self
    if not isinstance(y, Tensor):
      if _variable_expression(y): y = ssimplify(y)  # a bound Variable or an expression of them, such as a symbolic size
      if isinstance(y, np.generic) and y.ndim == 0 and y.dtype.kind in "biuf": y = y.item()  # a numpy scalar is a Python scalar here, as in PyTorch
      if isinstance(y, (bool, int, float)):
        const = UOp.const(check_fits(y, dt := x._scalar_dtype(y)), y, x.device)
        if dt == x.dtype:  # the usual case: the scalar, broadcast to x's shape as one node, is all there is to do
          y = Tensor(_expanded(const, x.shape))
          return (y, x) if reverse else (x, y)
        y = Tensor(const)
      elif _variable_expression(y): y = Tensor(UOp(Ops.CAST, x._scalar_dtype(0), (y,)) if y.dtype != x.dtype else y)
      else: raise TypeError(f"can't combine a Tensor with {type(y).__name__}")
    elif y.device != x.device: raise ValueError(f"tensors are on different devices: {x.device} and {y.device}")
    if match_dtype and x.dtype != y.dtype:
      dt = least_upper_dtype(x.dtype, y.dtype)
      x, y = x.cast(dt), y.cast(dt)
    shape = broadcast_shape(x.shape, y.shape)
    x, y = x._broadcast_to(shape), y._broadcast_to(shape)
    return (y, x) if reverse else (x, y)

  # ---------------- autograd ----------------
  def gradient(self, *targets: Tensor, gradient: Tensor | None = None) -> list[Tensor]:
    """d(self)/d(target) for each target. self must be a scalar unless `gradient` (d(loss)/d(self)) is given."""
    if gradient is None:
      if self.shape != (): raise RuntimeError(f"gradient of a non-scalar tensor (shape {self.shape}) needs a `gradient` argument")
      gradient = Tensor(1.0, device=self.device, dtype=self.dtype)
    if not dtypes.is_float(self.dtype): raise RuntimeError(f"only float tensors have gradients, got {self.dtype}")
    for t in targets:
      if not dtypes.is_float(t.dtype): raise RuntimeError(f"only float tensors have gradients, target has {t.dtype}")
    root = _autograd_graph(self.uop)
    names = [dedup((t.uop, *(t._aliases or ()))) for t in targets]
    grads = compute_gradient(root, gradient._broadcast_to(self.shape).cast(self.dtype).uop, [n for ns in names for n in ns])
    out = []
    for t, ns in zip(targets, names):
      found = [g for n in ns if (g := grads.get(n)) is not None]
      out.append(Tensor(functools.reduce(UOp.__add__, found)) if found else Tensor.zeros(*t.shape, device=t.device, dtype=t.dtype))
    return out

  def backward(self, gradient: Tensor | None = None) -> Tensor:
    """Accumulate d(self)/d(leaf) into `.grad` of every live leaf tensor with requires_grad that self depends on."""
    in_graph = set(_autograd_graph(self.uop).toposort())
    leaves = [t for t in list(Tensor._live) if t.requires_grad and t._leaf and (t.uop in in_graph or any(a in in_graph for a in t._aliases or ()))]
    if not self.requires_grad: raise RuntimeError("backward() on a tensor that does not require grad (no input has requires_grad=True)")
    for t, g in zip(leaves, self.gradient(*leaves, gradient=gradient)):
      g = g.cast(t.dtype) if g.dtype != t.dtype else g
      t.grad = g if t.grad is None else t.grad + g
    return self

def _substituted(u: UOp, becomes: dict[UOp, UOp], memo: dict[UOp, UOp]) -> UOp:
  """u with every node in `becomes` replaced by what it became (memo: shared between calls with the same becomes)."""
  for n in u.toposort(stop=lambda x: x in memo or x.op is Ops.BUFFER):
    if n in memo: continue
    if n in becomes: memo[n] = becomes[n]
    elif n.src and any(memo.get(s, s) is not s for s in n.src): memo[n] = UOp(n.op, n.dtype, tuple(memo.get(s, s) for s in n.src), n.arg)
    else: memo[n] = n
  return memo[u]

def _new_graphs(becomes: dict[UOp, UOp], realized: dict[UOp, Tensor]) -> list[tuple[Tensor, UOp]]:
  """Each live tensor with its graph reading the buffers it was just computed into. Another tensor whose whole value
  is one that was realized stays as it is: it was made on its own (a second Tensor.zeros(3)), and sharing the buffer
  would let an assign to one change the other."""
  memo: dict[UOp, UOp] = {}
  pointings: list[tuple[Tensor, UOp]] = []
  for t in {**Tensor._pending, **{id(t): t for t in realized.values()}}.values():
    # a tensor reading a buffer changes only when it is one of those realized (a view of a buffer, copied into its own)
    if t.uop.base.op is Ops.BUFFER and t.uop not in becomes: pointings.append((t, t.uop))
    elif (owner := realized.get(t.uop)) is None or owner is t: pointings.append((t, _substituted(t.uop, becomes, memo)))
  return pointings

def _point_all(pointings: list[tuple[Tensor, UOp]]) -> None:
  """Point each tensor at its new graph (_new_graphs), once the schedule has run."""
  for t, new in pointings:
    if new is not t.uop:
      if t.requires_grad:
        if t._leaf: t._remember_alias()  # graphs built before this realize still name the leaf by its old node
        else: _grad_origins[new] = t.uop
      t._point_at(new)
    if new.base.op is Ops.BUFFER: Tensor._pending.pop(id(t), None)

# a realized non-leaf's buffer view -> the graph that computed it, so gradients can flow through realized tensors
_grad_origins: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()

def _autograd_graph(u: UOp) -> UOp:
  """`u` with every realized intermediate replaced by the graph that computed it."""
  while mapping := {n: _grad_origins[n] for n in u.toposort() if n in _grad_origins}: u = substitute_nodes(u, mapping)
  return u
