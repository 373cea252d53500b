"""UOp: the immutable, hash-consed node every layer of tg speaks (tensor graphs, kernel ASTs, linear programs)."""
from __future__ import annotations
import _weakref, functools, math, weakref
from typing import Any
from ir.dtype import DType, dtypes, as_const, truncate
from ir.ops import Ops, ALU, ELEMENTWISE, MOVEMENT, COMPARISON, exec_alu

_UNSET = object()
_set = object.__setattr__  # UOps are immutable: their own __setattr__ refuses

def _cache_key(op: Ops, dtype: DType, src: tuple, arg: Any) -> tuple:
  # 0.0 == -0.0 in Python, but they are different constants
  return (op, dtype, src, arg, math.copysign(1.0, arg)) if type(arg) is float else (op, dtype, src, arg)

# every live node by its key: a plain dict of weak references (WeakValueDictionary's get is Python code, and this is the
# lowering's most frequent lookup); a freed node's entry goes when its reference dies, unless a new node took the key
_ucache: dict[tuple, weakref.KeyedRef] = {}
def _forget(ref: weakref.KeyedRef) -> None: _weakref._remove_dead_weakref(_ucache, ref.key)

SMALL_INT = 1 << 12  # integer constants of less magnitude are kept once made (at most 8192 per dtype): index arithmetic makes them by the hundred thousand
_small_ints: dict[tuple[DType, int], UOp] = {}

class UOp:
  """A node (op, dtype, src, arg). Two structurally equal nodes are the same object, so `is` and `==` mean equality."""
  __slots__ = ("op", "dtype", "src", "arg", "_shape", "_bounds", "_device", "__weakref__")

  def __new__(cls, op: Ops, dtype: DType = dtypes.void, src: tuple[UOp, ...] = (), arg: Any = None):
    key = _cache_key(op, dtype, src, arg)
    if (ref := _ucache.get(key)) is not None and (ret := ref()) is not None: return ret
    ret = super().__new__(cls)
    _set(ret, "op", op); _set(ret, "dtype", dtype); _set(ret, "src", src); _set(ret, "arg", arg)
    _set(ret, "_shape", None); _set(ret, "_bounds", None); _set(ret, "_device", _UNSET)
    _ucache[key] = weakref.KeyedRef(ret, _forget, key)
    return ret
  def __setattr__(self, name, value): raise AttributeError(f"UOp is immutable (tried to set {name})")
  def __reduce__(self): return UOp, (self.op, self.dtype, self.src, self.arg)
  def __repr__(self) -> str: return pretty(self)
  def replace(self, **kw) -> UOp:
    return UOp(kw.get("op", self.op), kw.get("dtype", self.dtype), kw.get("src", self.src), kw.get("arg", self.arg))

  def toposort(self, stop=lambda u: False) -> list[UOp]:
    """All nodes reachable from self, each after its sources; traversal does not enter nodes for which `stop` is true."""
    seen: set[UOp] = set()
    order: list[UOp] = []
    stack: list[tuple[UOp, bool]] = [(self, False)]
    while stack:
      node, expanded = stack.pop()
      if expanded: order.append(node); continue
      if node in seen: continue
      seen.add(node)
      stack.append((node, True))
      if not stop(node): stack.extend((s, False) for s in reversed(node.src) if s not in seen)
    return order

  # ---- constants and arithmetic (used for symbolic index math and by the Tensor frontend) ----
  @staticmethod
  def const(dtype: DType, value, device: str | None = None) -> UOp:
    if isinstance(value, UOp): return value
    if device is None and type(value) is int and (hit := _small_ints.get((dtype, value))) is not None: return hit
    out = UOp(Ops.CONST, dtype, (UOp(Ops.DEVICE, arg=device),) if device is not None else (), as_const(value, dtype))
    if device is None and type(value) is int and -SMALL_INT <= value < SMALL_INT and out.arg == value: _small_ints[(dtype, value)] = out
    return out
  def const_like(self, value) -> UOp:
    return UOp.const(self.dtype, value, self.src[0].arg if self.op is Ops.CONST and self.src else None)
  @staticmethod
  def variable(name: str, vmin: int, vmax: int, dtype: DType = dtypes.int32) -> UOp:
    if not vmin <= vmax: raise ValueError(f"Variable {name!r} has an empty range [{vmin}, {vmax}]")
    if not dtypes.min(dtype) <= vmin <= vmax <= dtypes.max(dtype): raise ValueError(f"Variable {name!r}: [{vmin}, {vmax}] doesn't fit {dtype.name}")
    return UOp(Ops.DEFINE_VAR, dtype, (), (name, vmin, vmax))
  def bind(self, value: int) -> UOp:
    assert self.op is Ops.DEFINE_VAR, "only a Variable can be bound"
    if not self.arg[1] <= value <= self.arg[2]: raise ValueError(f"value {value} is outside the range of Variable {self.arg[0]!r} [{self.arg[1]}, {self.arg[2]}]")
    return UOp(Ops.BIND, self.dtype, (self, UOp.const(self.dtype, value)))
  def unbind(self) -> tuple[UOp, int]:
    assert self.op is Ops.BIND
    return self.src[0], self.src[1].arg

  def alu(self, op: Ops, *src: UOp) -> UOp:
    """An ALU node with `self` as first operand; the result dtype is bool for comparisons, else the operands' dtype."""
    out = dtypes.bool if op in COMPARISON else (src[-1].dtype if op is Ops.WHERE else self.dtype)
    if all(s.op is Ops.CONST for s in (self, *src)) and all(not s.src for s in (self, *src)):
      return UOp.const(out, exec_alu(op, out, tuple(s.arg for s in (self, *src)), self.dtype))
    return UOp(op, out, (self, *src))
  def _operand(self, x) -> UOp: return x if isinstance(x, UOp) else UOp.const(self.dtype, x)
  def _binop(self, op: Ops, x, reverse: bool = False) -> UOp:
    a, b = (self._operand(x), self) if reverse else (self, self._operand(x))
    return a.alu(op, b)
  def __add__(self, x): return self._binop(Ops.ADD, x)
  def __radd__(self, x): return self._binop(Ops.ADD, x, True)
  def __sub__(self, x): return self._binop(Ops.SUB, x)
  def __rsub__(self, x): return self._binop(Ops.SUB, x, True)
  def __mul__(self, x): return self._binop(Ops.MUL, x)
  def __rmul__(self, x): return self._binop(Ops.MUL, x, True)
  def __floordiv__(self, x): return self._binop(Ops.IDIV, x)
  def __mod__(self, x): return self._binop(Ops.MOD, x)
  def __truediv__(self, x): return self._binop(Ops.FDIV, x)
  def __neg__(self): return self.alu(Ops.NEG)
  def __lt__(self, x): return self._binop(Ops.CMPLT, x)
  def __gt__(self, x): return self._binop(Ops.CMPLT, x, True)
  def __ge__(self, x): return (self < x).logical_not()
  def __le__(self, x): return (self > x).logical_not()
  def __and__(self, x):
    if self.dtype == dtypes.bool and isinstance(x, UOp) and x.op is Ops.CONST and not x.src: return self if x.arg else x
    if self.dtype == dtypes.bool and self.op is Ops.CONST and not self.src and isinstance(x, UOp): return x if self.arg else self
    return self._binop(Ops.AND, x)
  def __or__(self, x): return self._binop(Ops.OR, x)
  def __xor__(self, x): return self._binop(Ops.XOR, x)
  def __lshift__(self, x): return self._binop(Ops.SHL, x)
  def __rshift__(self, x): return self._binop(Ops.SHR, x)
  __hash__ = object.__hash__
  def __index__(self) -> int: raise TypeError(f"{pretty(self)} is symbolic: this needs a concrete int (an op that doesn't take symbolic sizes?)")
  def __bool__(self) -> bool:
    """A comparison is true or false when the bounds of its Variables decide it (so `size < 4` works on a symbolic
    size that is always below 4); one they don't decide is an error instead of a silently true object."""
    if self.op not in COMPARISON: return True
    lo, hi = self.bounds
    if lo != hi: raise TypeError(f"the truth of {pretty(self)} depends on the values of its Variables")
    return bool(lo)
  def eq(self, x) -> UOp: return self._binop(Ops.CMPEQ, x)
  def ne(self, x) -> UOp: return self._binop(Ops.CMPNE, x)
  def maximum(self, x) -> UOp: return self._binop(Ops.MAX, x)
  def minimum(self, x) -> UOp: return -((-self).maximum(-self._operand(x)))
  def logical_not(self) -> UOp: return self.ne(True)
  def where(self, a, b) -> UOp:
    ref = a if isinstance(a, UOp) else b
    a, b = (x if isinstance(x, UOp) else UOp.const(ref.dtype, x) for x in (a, b))
    return self.alu(Ops.WHERE, a, b)
  def cast(self, dtype: DType) -> UOp:
    if self.dtype == dtype: return self
    if self.op is Ops.CONST and not self.src: return UOp.const(dtype, self.arg)
    return UOp(Ops.CAST, dtype, (self,))
  def bitcast(self, dtype: DType) -> UOp: return self if self.dtype == dtype else UOp(Ops.BITCAST, dtype, (self,))
  def sink(self, *more: UOp) -> UOp: return UOp(Ops.SINK, dtypes.void, (self, *more))

  # ---- value bounds (for symbolic simplification of integer index math) ----
  @property
  def vmin(self): return self.bounds[0]
  @property
  def vmax(self): return self.bounds[1]
  @property
  def bounds(self) -> tuple:
    if self._bounds is None: object.__setattr__(self, "_bounds", _bounds(self))
    return self._bounds

  # ---- tensor-graph properties and constructors ----
  @property
  def shape(self) -> tuple[sint, ...]:
    if self._shape is None: object.__setattr__(self, "_shape", _infer_shape(self))
    return self._shape
  @property
  def device(self) -> str | tuple[str, ...] | None:
    """Where a tensor-level node lives: from its DEVICE, BUFFER or COPY, else from its first source that has one."""
    if self._device is _UNSET:
      # a new node over known ones (each op the frontend builds) needs no walk of the graph
      order = [self] if all(s._device is not _UNSET for s in self.src) else self.toposort(stop=lambda x: x._device is not _UNSET)
      for u in order:
        if u._device is not _UNSET: continue
        if u.op is Ops.DEVICE or u.op is Ops.COPY: d = u.arg
        elif u.op is Ops.BUFFER: d = u.arg[0].device
        elif u.op is Ops.MULTI: d = tuple(x._device for x in u.src)
        else: d = next((x._device for x in u.src if x._device is not None), None)
        object.__setattr__(u, "_device", d)
    return self._device
  @property
  def base(self) -> UOp:
    """The node under a chain of movement ops."""
    u = self
    while u.op in MOVEMENT: u = u.src[0]
    return u
  def reshape(self, shape: tuple[sint, ...]) -> UOp:
    shape = tuple(ssimplify(s) for s in shape)
    if any(smin(s) < 0 for s in shape): raise ValueError(f"can't reshape {self.shape} to {shape}: negative size")
    if sprod(shape) != sprod(self.shape):
      raise ValueError(f"can't reshape {self.shape} to {shape}: {sprod(self.shape)} elements into {sprod(shape)}")
    return self if shape == self.shape else UOp(Ops.RESHAPE, self.dtype, (self,), shape)
  def permute(self, order: tuple[int, ...]) -> UOp:
    order = tuple(order)
    if sorted(order) != list(range(len(self.shape))): raise ValueError(f"permute order {order} is not a permutation of the axes of shape {self.shape}")
    return self if order == tuple(range(len(order))) else UOp(Ops.PERMUTE, self.dtype, (self,), order)
  def expand(self, shape: tuple[sint, ...]) -> UOp:
    shape = tuple(ssimplify(s) for s in shape)
    if len(shape) != len(self.shape) or any(s != n and s != 1 for s, n in zip(self.shape, shape)):
      raise ValueError(f"can't expand {self.shape} to {shape}")
    return self if shape == self.shape else UOp(Ops.EXPAND, self.dtype, (self,), shape)
  def pad(self, padding: tuple[tuple[sint, sint], ...]) -> UOp:
    padding = tuple((_dim(a), _dim(b)) for a, b in padding)
    if len(padding) != len(self.shape) or any(smin(a) < 0 or smin(b) < 0 for a, b in padding): raise ValueError(f"invalid padding {padding} for shape {self.shape}")
    return self if all(p == (0, 0) for p in padding) else UOp(Ops.PAD, self.dtype, (self,), padding)
  def shrink(self, bounds: tuple[tuple[sint, sint], ...]) -> UOp:
    bounds = tuple((_dim(a), _dim(b)) for a, b in bounds)
    if len(bounds) != len(self.shape) or not all(_shrink_fits(a, b, s) for (a, b), s in zip(bounds, self.shape)):
      raise ValueError(f"invalid shrink {bounds} for shape {self.shape}: a range must lie in [0, size] (where the size is fixed, for every value its Variables may take)")
    return self if all(b == (0, s) for b, s in zip(bounds, self.shape)) else UOp(Ops.SHRINK, self.dtype, (self,), bounds)
  def flip(self, axes: tuple[bool, ...]) -> UOp:
    axes = tuple(bool(a) for a in axes)
    if len(axes) != len(self.shape): raise ValueError(f"flip needs one flag per axis of shape {self.shape}, got {axes}")
    return self if not any(axes) else UOp(Ops.FLIP, self.dtype, (self,), axes)
  def r(self, op: Ops, axes: tuple[int, ...]) -> UOp:
    """Reduce over `axes`, keeping them as size-1 dims."""
    axes = tuple(sorted({a for a in axes if self.shape[a] != 1}))
    if not axes: return self
    return UOp(Ops.REDUCE_AXIS, self.dtype, (self,), (op, axes))

def _infer_shape(u: UOp) -> tuple[sint, ...]:
  if u.op is Ops.BUFFER: return (u.arg[0].size,)
  if u.op in (Ops.CONST, Ops.DEFINE_VAR, Ops.BIND): return ()
  if u.op is Ops.ARANGE: return (u.arg,)
  if u.op is Ops.TAKE: return u.src[1].shape
  if u.op is Ops.GRAD_OVERRIDE: return u.src[0].shape
  if u.op is Ops.MULTI:
    if u.arg is None: return u.src[0].shape
    return tuple(s * len(u.src) if i == u.arg else s for i, s in enumerate(u.src[0].shape))
  if u.op in (Ops.RESHAPE, Ops.EXPAND): return u.arg
  if u.op is Ops.PERMUTE: return tuple(u.src[0].shape[i] for i in u.arg)
  if u.op is Ops.PAD: return tuple(ssimplify(s + a + b) for s, (a, b) in zip(u.src[0].shape, u.arg))
  if u.op is Ops.SHRINK: return tuple(ssimplify(b - a) for a, b in u.arg)
  if u.op is Ops.REDUCE_AXIS: return tuple(1 if i in u.arg[1] else s for i, s in enumerate(u.src[0].shape))
  if u.op is Ops.VIEW: return u.arg.shape
  if u.op in ELEMENTWISE or u.op in (Ops.FLIP, Ops.CONTIGUOUS, Ops.CONTIGUOUS_BACKWARD, Ops.DETACH, Ops.COPY, Ops.ASSIGN):
    shapes = {s.shape for s in u.src if s.op is not Ops.DEVICE}
    if len(shapes) > 1: raise ValueError(f"{u.op} of mismatched shapes {sorted(shapes)}")
    return shapes.pop()
  raise ValueError(f"{u.op} has no shape")

def _bounds(u: UOp) -> tuple:
  if u.op is Ops.CONST: return (u.arg, u.arg)
  if u.op is Ops.DEFINE_VAR: return (u.arg[1], u.arg[2])
  if u.op is Ops.BIND: return u.src[0].bounds
  if u.op is Ops.RANGE: return (u.src[0].vmin, max(u.src[0].vmin, u.src[1].vmax - 1))
  if u.op is Ops.SPECIAL: return (0, u.arg[1] - 1)
  lo, hi = dtypes.min(u.dtype), dtypes.max(u.dtype)
  if u.op not in ALU and u.op is not Ops.CAST: return (lo, hi)
  s = [x.bounds for x in u.src]
  if u.op is Ops.ADD: return (s[0][0] + s[1][0], s[0][1] + s[1][1])
  if u.op is Ops.SUB: return (s[0][0] - s[1][1], s[0][1] - s[1][0])
  if u.op is Ops.NEG and dtypes.is_int(u.dtype): return (-s[0][1], -s[0][0])
  if u.op is Ops.MUL and not dtypes.is_float(u.dtype):
    vals = [a * b for a in s[0] for b in s[1]]
    return (min(vals), max(vals))
  if u.op is Ops.MAX: return (max(s[0][0], s[1][0]), max(s[0][1], s[1][1]))
  if u.op is Ops.IDIV and dtypes.is_int(u.dtype) and s[1][0] == s[1][1] and s[1][0] > 0 and s[0][0] >= 0:
    return (s[0][0] // s[1][0], s[0][1] // s[1][0])
  if u.op is Ops.MOD and dtypes.is_int(u.dtype) and s[1][0] > 0 and s[0][0] >= 0:
    return (0, min(s[0][1], s[1][1] - 1)) if s[0][1] >= s[1][1] or s[1][0] != s[1][1] else (s[0][0], s[0][1])
  if u.op is Ops.CMPLT: return (s[0][1] < s[1][0], s[0][0] < s[1][1])
  if u.op is Ops.CMPNE:
    if s[0][0] == s[0][1] == s[1][0] == s[1][1]: return (False, False)
    return (s[0][1] < s[1][0] or s[0][0] > s[1][1], True)
  if u.op is Ops.CMPEQ:
    if s[0][0] == s[0][1] == s[1][0] == s[1][1]: return (True, True)
    return (False, not (s[0][1] < s[1][0] or s[0][0] > s[1][1]))
  if u.op is Ops.AND and u.dtype == dtypes.bool: return (s[0][0] and s[1][0], s[0][1] and s[1][1])
  if u.op is Ops.OR and u.dtype == dtypes.bool: return (s[0][0] or s[1][0], s[0][1] or s[1][1])
  if u.op is Ops.WHERE: return (min(s[1][0], s[2][0]), max(s[1][1], s[2][1]))
  if u.op is Ops.CAST and dtypes.is_int(u.dtype) and (dtypes.is_int(u.src[0].dtype) or u.src[0].dtype == dtypes.bool) and lo <= s[0][0] and s[0][1] <= hi:
    return (int(s[0][0]), int(s[0][1]))
  return (lo, hi)

@functools.lru_cache(maxsize=4096)
def _evaluation_order(u: UOp) -> list[UOp]: return u.toposort()  # the same expressions (patched queue words) come back every replay

def sym_infer(u: UOp, var_vals: dict[str, int]) -> int:
  """Evaluate an integer expression with concrete values for its Variables."""
  if u.op is Ops.DEFINE_VAR: return var_vals[u.arg[0]]  # a bare Variable (a queue's patched word, on every JIT replay)
  vals: dict[UOp, Any] = {}
  for n in _evaluation_order(u):
    if n.op is Ops.CONST: vals[n] = n.arg
    elif n.op is Ops.DEFINE_VAR: vals[n] = var_vals[n.arg[0]]
    elif n.op is Ops.BIND: vals[n] = vals[n.src[1]]
    elif n.op is Ops.CAST: vals[n] = truncate(vals[n.src[0]], n.dtype)
    else: vals[n] = exec_alu(n.op, n.dtype, tuple(vals[s] for s in n.src), n.src[0].dtype)
  return vals[u]

def pretty(u: UOp, depth: int = 3) -> str:
  if u.op is Ops.CONST: return f"{u.arg!r}" if u.dtype in (dtypes.int32, dtypes.bool, dtypes.float32) else f"{u.arg!r}:{u.dtype.name}"
  if u.op is Ops.DEFINE_VAR: return u.arg[0]
  if u.op is Ops.BIND: return f"{u.src[0].arg[0]}={u.src[1].arg}"
  if u.op is Ops.RANGE: return f"r{u.arg}"
  if u.op is Ops.SPECIAL: return u.arg[0]
  if depth == 0: return f"<{u.op.name}>"
  args = ", ".join(pretty(s, depth - 1) for s in u.src)
  return f"{u.op.name}({args}{', ' if args and u.arg is not None else ''}{'' if u.arg is None else repr(u.arg)})"

def variables(u: UOp) -> list[UOp]:
  """The DEFINE_VAR nodes under `u`, sorted by name."""
  return sorted((x for x in u.toposort() if x.op is Ops.DEFINE_VAR), key=lambda v: v.arg)

# ---- symbolic dimensions: a shape entry is an int or an integer UOp of Variables (bound ones in tensor graphs) ----
sint = int | UOp

def ssimplify(x: sint) -> sint:
  """A dimension in canonical form (so equal expressions are the same node: a sum's terms in one order), as an int
  when it is constant."""
  if not isinstance(x, UOp): return x
  from ir.symbolic import build_sum, simplify, split_terms  # ir.symbolic builds on this module
  x = simplify(x)
  if x.op is Ops.CONST and not x.src: return x.arg
  terms, k = split_terms(x)
  return build_sum(dict(sorted(terms.items(), key=lambda t: pretty(t[0], 8))), k, x) if len(terms) > 1 else x

def _dim(x) -> sint: return ssimplify(x) if isinstance(x, UOp) else int(x)

def sprod(xs) -> sint:
  """The product of dimensions; symbolic factors multiply in one order (by their text) so equal products are one node."""
  out, syms = 1, []
  for x in xs:
    if isinstance(x, UOp): syms.append(x)
    else: out *= x
  if not syms or out == 0: return out
  acc = None
  for x in sorted(syms, key=lambda u: pretty(u, 8)): acc = x if acc is None else acc * x
  return ssimplify(acc * out)

def smin(x: sint) -> int: return x.vmin if isinstance(x, UOp) else x
def smax(x: sint) -> int: return x.vmax if isinstance(x, UOp) else x
def all_int(xs) -> bool: return all(isinstance(x, int) for x in xs)

def sym_value(x: sint) -> int | None:
  """The value of a dimension with the values its bound Variables carry; None when it holds an unbound one."""
  if not isinstance(x, UOp): return x
  try: return sym_infer(x, {b.src[0].arg[0]: b.src[1].arg for b in x.toposort() if b.op is Ops.BIND})
  except KeyError: return None

def _shrink_fits(a: sint, b: sint, s: sint) -> bool:
  """0 <= a <= b <= s for the bound values; where the dimension is fixed, also for every value the Variables may take
  (a later value, such as a JIT replay's, must not reach past it)."""
  now = [sym_value(x) for x in (a, b, s)]
  if None not in now and not 0 <= now[0] <= now[1] <= now[2]: return False
  return not isinstance(s, int) or (smin(a) >= 0 and smin(ssimplify(b - a)) >= 0 and smax(b) <= s)

def map_args(root: UOp, arg_fn, node_fn=lambda n: n) -> dict[UOp, UOp]:
  """{node under root: its replacement}, where every UOp inside a node's arg (shapes, paddings, shrink bounds) is
  replaced by arg_fn(it), and a node by node_fn(node) where that gives another node."""
  done: dict[UOp, UOp] = {}
  def arg_of(a):
    if isinstance(a, UOp): return arg_fn(a)
    if not isinstance(a, tuple): return a
    new = tuple(arg_of(x) for x in a)
    return a if all(x is y for x, y in zip(new, a)) else new
  for n in root.toposort():
    if (m := node_fn(n)) is not n: done[n] = m; continue
    src, arg = tuple(done[s] for s in n.src), arg_of(n.arg) if n.op is not Ops.VIEW else n.arg
    done[n] = n if arg is n.arg and all(a is b for a, b in zip(src, n.src)) else UOp(n.op, n.dtype, src, arg)
  return done
