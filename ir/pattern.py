"""A pattern language over UOps and `graph_rewrite`, which applies patterns until nothing changes."""
from __future__ import annotations
import inspect, itertools
from typing import Any, Callable
from ir.dtype import DType
from ir.ops import Ops
from ir.uop import UOp
from ir import tracing

_ANY = object()

class UPat:
  """Matches a UOp by op, dtype, arg and sources, binding named parts for the rewrite function.
  `src` is None (anything), a tuple (sources in order), a list (sources in any order) or one UPat (every source)."""
  __slots__ = ("op", "dtype", "src", "arg", "name", "allow_any_len")
  def __init__(self, op: Ops | tuple[Ops, ...] | set[Ops] | None = None, dtype: DType | tuple[DType, ...] | None = None,
               src: tuple | list | UPat | None = None, arg: Any = _ANY, name: str | None = None, allow_any_len: bool = False):
    self.op = (op,) if isinstance(op, Ops) else (tuple(op) if op is not None else None)
    self.dtype = (dtype,) if isinstance(dtype, DType) else dtype
    self.src, self.arg, self.name, self.allow_any_len = src, arg, name, allow_any_len

  @staticmethod
  def var(name: str | None = None, dtype=None) -> UPat: return UPat(dtype=dtype, name=name)
  @staticmethod
  def cvar(name: str | None = None, dtype=None) -> UPat: return UPat(Ops.CONST, dtype, src=(), name=name)
  @staticmethod
  def const(dtype, value) -> UPat: return UPat(Ops.CONST, dtype, src=(), arg=value)
  def named(self, name: str) -> UPat: return UPat(self.op, self.dtype, self.src, self.arg, name, self.allow_any_len)

  def _alu(self, op: Ops, *others, ordered: bool = False) -> UPat:
    srcs = [self, *(o if isinstance(o, UPat) else UPat(Ops.CONST, arg=o, src=()) for o in others)]
    return UPat(op, src=tuple(srcs) if ordered or len(srcs) != 2 else srcs)
  def __add__(self, x): return self._alu(Ops.ADD, x)
  def __mul__(self, x): return self._alu(Ops.MUL, x)
  def __sub__(self, x): return self._alu(Ops.SUB, x, ordered=True)
  def __floordiv__(self, x): return self._alu(Ops.IDIV, x, ordered=True)
  def __mod__(self, x): return self._alu(Ops.MOD, x, ordered=True)
  def __lt__(self, x): return self._alu(Ops.CMPLT, x, ordered=True)
  def __and__(self, x): return self._alu(Ops.AND, x)
  def __or__(self, x): return self._alu(Ops.OR, x)
  def ne(self, x): return self._alu(Ops.CMPNE, x)
  def maximum(self, x): return self._alu(Ops.MAX, x)
  def where(self, a, b): return self._alu(Ops.WHERE, a, b, ordered=True)
  def cast(self, dtype=None): return UPat(Ops.CAST, dtype, (self,))

  def match(self, u: UOp, store: dict[str, UOp]) -> list[dict[str, UOp]]:
    """Every way `u` matches this pattern, as bindings extending `store`."""
    if self.op is not None and u.op not in self.op: return []
    if self.dtype is not None and u.dtype not in self.dtype and u.dtype.scalar not in self.dtype: return []
    if self.arg is not _ANY and self.arg != u.arg: return []
    if self.name is not None:
      if (prev := store.get(self.name)) is not None and prev is not u: return []
      store = {**store, self.name: u}
    if self.src is None: return [store]
    if isinstance(self.src, UPat): orders = [[self.src] * len(u.src)]
    elif isinstance(self.src, tuple):
      if len(u.src) < len(self.src) or (len(u.src) > len(self.src) and not self.allow_any_len): return []
      orders = [list(self.src)]
    else:
      if len(u.src) != len(self.src): return []
      orders = [list(p) for p in itertools.permutations(self.src)]
    out: list[dict[str, UOp]] = []
    for pats in orders:
      stores = [store]
      for pat, s in zip(pats, u.src):
        stores = [m for st in stores for m in pat.match(s, st)]
        if not stores: break
      out.extend(stores)
    return out

class PatternMatcher:
  """An ordered list of (pattern, function). The first function that returns a UOp (other than its input) wins.
  Functions receive the pattern's named bindings as keyword arguments, plus `ctx` when they declare it."""
  def __init__(self, rules: list[tuple[UPat, Callable]]):
    self.rules = rules
    self.by_op: dict[Ops, list[tuple[UPat, Callable, bool]]] = {}
    for pat, fn in rules:
      wants_ctx = "ctx" in inspect.signature(fn).parameters
      for op in pat.op if pat.op is not None else tuple(Ops): self.by_op.setdefault(op, []).append((pat, fn, wants_ctx))
  def __add__(self, other: PatternMatcher) -> PatternMatcher: return PatternMatcher(self.rules + other.rules)
  def rewrite(self, u: UOp, ctx: Any = None, fired: list[Callable] | None = None) -> UOp | None:
    """The first rule's replacement of `u`, or None; the winning rule's function is appended to `fired` when given."""
    for pat, fn, wants_ctx in self.by_op.get(u.op, ()):
      for store in pat.match(u, {}):
        ret = fn(ctx=ctx, **store) if wants_ctx else fn(**store)
        if ret is not None and ret is not u:
          if fired is not None: fired.append(fn)
          return ret
    return None

class RewriteLimitError(RuntimeError): pass

def graph_rewrite(root: UOp, pm: PatternMatcher, ctx: Any = None, limit: int = 1_000_000) -> UOp:
  """Rewrite every node of the graph bottom-up until no pattern applies anywhere (a fixed point)."""
  watcher = tracing.tracer
  fired: list[Callable] | None = [] if watcher is not None else None  # which rules applied, only while someone watches
  done: dict[UOp, UOp] = {}
  stack: list[tuple[UOp, int, UOp | None]] = [(root, 0, None)]
  steps = 0
  while stack:
    node, stage, pending = stack.pop()
    if stage == 0:
      if node in done: continue
      stack.append((node, 1, None))
      stack.extend((s, 0, None) for s in reversed(node.src) if s not in done)
    elif stage == 1:
      new_src = tuple(done[s] for s in node.src)
      new = node if all(a is b for a, b in zip(new_src, node.src)) else UOp(node.op, node.dtype, new_src, node.arg)
      steps += 1
      if steps > limit: raise RewriteLimitError(f"graph_rewrite did not reach a fixed point after {limit} rewrites")
      if (rewritten := pm.rewrite(new, ctx, fired)) is None: done[node] = new
      elif rewritten in done: done[node] = done[rewritten]
      else: stack.extend(((node, 2, rewritten), (rewritten, 0, None)))
    else:
      done[node] = done[pending]
  if fired: watcher.rewrite(root, done[root], fired)
  return done[root]

def substitute(root: UOp, mapping: dict[UOp, UOp]) -> UOp:
  """`root` with each node in `mapping` replaced once (replacements are not searched again), rebuilt bottom-up."""
  done: dict[UOp, UOp] = {}
  for n in root.toposort(stop=lambda x: x in mapping):
    if n in mapping: done[n] = mapping[n]
    else:
      src = tuple(done[s] for s in n.src)
      done[n] = n if all(a is b for a, b in zip(src, n.src)) else UOp(n.op, n.dtype, src, n.arg)
  return done[root]
