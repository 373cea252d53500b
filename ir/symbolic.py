"""Symbolic simplification of integer (index) expressions: constant folding, canonical sums, and div/mod/compare
folding that uses the value bounds of variables and loop ranges. Integer rules only fire where they are exact under
C semantics (truncating division), i.e. on provably non-negative numerators."""
from __future__ import annotations
import functools, math
from ir.dtype import dtypes
from ir.ops import Ops, ALU, exec_alu
from ir import tracing
from ir.pattern import PatternMatcher, UPat, graph_rewrite
from ir.uop import UOp

Terms = dict[UOp, int]

def _is_int(u: UOp) -> bool: return dtypes.is_int(u.dtype)
def _const(u: UOp) -> bool: return u.op is Ops.CONST and not u.src

def split_terms(u: UOp) -> tuple[Terms, int]:
  """`u` as sum(coeff * term) + constant, distributing constant multiplications over sums."""
  if _const(u): return {}, u.arg
  if u.op in (Ops.ADD, Ops.SUB):
    (ta, ka), (tb, kb) = split_terms(u.src[0]), split_terms(u.src[1])
    sign = 1 if u.op is Ops.ADD else -1
    out = dict(ta)
    for t, c in tb.items(): out[t] = out.get(t, 0) + sign * c
    return {t: c for t, c in out.items() if c != 0}, ka + sign * kb
  if u.op is Ops.NEG: return _scale(*split_terms(u.src[0]), -1)
  if u.op is Ops.MUL and (_const(u.src[0]) or _const(u.src[1])):
    x, c = (u.src[1], u.src[0].arg) if _const(u.src[0]) else (u.src[0], u.src[1].arg)
    return _scale(*split_terms(x), c)
  return {u: 1}, 0

def _scale(terms: Terms, k: int, c: int) -> tuple[Terms, int]:
  return ({t: v * c for t, v in terms.items()} if c else {}), k * c

def _merge_divmod(terms: Terms) -> Terms:
  """(x//a)*a*m + (x%a)*m -> x*m."""
  for t, c in list(terms.items()):
    if t.op is Ops.MOD and _const(t.src[1]) and t in terms:
      a = t.src[1].arg
      div = UOp(Ops.IDIV, t.dtype, (t.src[0], t.src[1]))
      if terms.get(div) == a * c:
        del terms[t], terms[div]
        terms[t.src[0]] = terms.get(t.src[0], 0) + c
        if terms[t.src[0]] == 0: del terms[t.src[0]]
  return terms

def build_sum(terms: Terms, k: int, like: UOp) -> UOp:
  """Rebuild sum(coeff * term) + k in canonical form."""
  out: UOp | None = None
  for t, c in terms.items():
    x = t if c == 1 else UOp(Ops.MUL, t.dtype, (t, UOp.const(t.dtype, c)))
    out = x if out is None else UOp(Ops.ADD, like.dtype, (out, x))
  if out is None: return UOp.const(like.dtype, k)
  return out if k == 0 else UOp(Ops.ADD, like.dtype, (out, UOp.const(like.dtype, k)))

def canonical_sum(x: UOp) -> UOp | None:
  if not _is_int(x): return None
  terms, k = split_terms(x)
  return build_sum(_merge_divmod(terms), k, x)

def _gcd_all(values) -> int: return math.gcd(*values) if values else 0

def fold_idiv(x: UOp, d: int) -> UOp | None:
  if d <= 0 or x.vmin < 0: return None
  if d == 1: return x
  if x.op is Ops.IDIV and _const(x.src[1]) and x.src[1].arg > 0: return x.src[0] // (x.src[1].arg * d)
  if x.op is Ops.MOD and _const(x.src[1]) and x.src[1].arg % d == 0: return (x.src[0] // d) % (x.src[1].arg // d)
  terms, k = split_terms(x)
  quot = {t: c // d for t, c in terms.items() if c % d == 0}
  rest = {t: c for t, c in terms.items() if c % d != 0}
  remainder = build_sum(rest, k % d, x)
  if remainder.vmin < 0: return None
  if remainder.vmin // d == remainder.vmax // d: tail = UOp.const(x.dtype, remainder.vmin // d)
  elif (g := _gcd_all([*rest.values(), d])) > 1:
    tail = UOp(Ops.IDIV, x.dtype, (build_sum({t: c // g for t, c in rest.items()}, (k % d) // g, x), UOp.const(x.dtype, d // g)))
  else: tail = UOp(Ops.IDIV, x.dtype, (remainder, UOp.const(x.dtype, d)))
  out = build_sum(quot, k // d, x)
  if _const(tail) and tail.arg == 0: return out
  return tail if _const(out) and out.arg == 0 else UOp(Ops.ADD, x.dtype, (out, tail))

def fold_mod(x: UOp, d: int) -> UOp | None:
  if d <= 0 or x.vmin < 0: return None
  if d == 1: return UOp.const(x.dtype, 0)
  if x.op is Ops.MOD and _const(x.src[1]) and x.src[1].arg % d == 0: return x.src[0] % d
  terms, k = split_terms(x)
  rest = {t: c % d for t, c in terms.items() if c % d != 0}
  r = build_sum(rest, k % d, x)
  if r.vmin < 0: return None
  if r.vmax < d: return r
  if (g := _gcd_all([*rest.values(), d])) > 1:
    inner = build_sum({t: c // g for t, c in rest.items()}, (k % d) // g, x)
    if inner.vmin >= 0:
      return build_sum({UOp(Ops.MOD, x.dtype, (inner, UOp.const(x.dtype, d // g))): g}, (k % d) % g, x)
  return UOp(Ops.MOD, x.dtype, (r, UOp.const(x.dtype, d)))

def is_multiple_of(x: UOp, d: int) -> bool:
  """Whether x is known to be a multiple of d (a non-negative index)."""
  mod = fold_mod(x, d)
  return mod is not None and _const(mod) and mod.arg == 0

def fold_cmplt(x: UOp, c: int) -> UOp | None:
  """sum < c: move the constant across and divide out common factors."""
  terms, k = split_terms(x)
  if not terms: return None
  bound = c - k
  for g in sorted({abs(v) for v in terms.values()}, reverse=True):
    if g <= 1: break
    big = {t: v // g for t, v in terms.items() if v % g == 0}
    small = build_sum({t: v for t, v in terms.items() if v % g != 0}, 0, x)
    if big and bound % g == 0 and 0 <= small.vmin and small.vmax < g:
      return UOp(Ops.CMPLT, dtypes.bool, (build_sum(big, 0, x), UOp.const(x.dtype, bound // g)))
  if k != 0: return UOp(Ops.CMPLT, dtypes.bool, (build_sum(terms, 0, x), UOp.const(x.dtype, bound)))
  return None

def _fold_consts(x: UOp) -> UOp | None:
  if x.op in ALU and all(_const(s) for s in x.src):
    return UOp.const(x.dtype, exec_alu(x.op, x.dtype, tuple(s.arg for s in x.src), x.src[0].dtype))
  return None

def _fold_by_bounds(x: UOp) -> UOp | None:
  if x.op in ALU and (_is_int(x) or x.dtype == dtypes.bool) and x.vmin == x.vmax: return UOp.const(x.dtype, x.vmin)
  return None

symbolic = PatternMatcher([
  (UPat(tuple(ALU), name="x"), _fold_consts),
  (UPat(tuple(ALU), name="x"), _fold_by_bounds),
  # identities that hold for every dtype
  (UPat.var("x") * 1, lambda x: x),
  (UPat.var("x") // 1, lambda x: x if _is_int(x) else None),
  (UPat(Ops.WHERE, src=(UPat.var(), UPat.var("a"), UPat.var("a"))), lambda a: a),
  (UPat(Ops.WHERE, src=(UPat.const(dtypes.bool, True), UPat.var("a"), UPat.var())), lambda a: a),
  (UPat(Ops.WHERE, src=(UPat.const(dtypes.bool, False), UPat.var(), UPat.var("b"))), lambda b: b),
  (UPat(Ops.CAST, name="c", src=(UPat.var("x"),)), lambda c, x: x if c.dtype == x.dtype else None),
  # boolean logic
  (UPat.var("x") & UPat.const(dtypes.bool, True), lambda x: x),
  (UPat.var("x") & UPat.const(dtypes.bool, False), lambda x: UOp.const(dtypes.bool, False)),
  (UPat.var("x") | UPat.const(dtypes.bool, False), lambda x: x),
  (UPat.var("x") | UPat.const(dtypes.bool, True), lambda x: UOp.const(dtypes.bool, True)),
  (UPat(Ops.AND, src=(UPat.var("x"), UPat.var("x"))), lambda x: x),
  (UPat(Ops.OR, src=(UPat.var("x"), UPat.var("x"))), lambda x: x),
  (UPat.var("x").ne(True).ne(True), lambda x: x if x.dtype == dtypes.bool else None),
  # integer-only algebra
  (UPat(Ops.MUL, name="x", src=[UPat.var(), UPat.const(None, 0)]), lambda x: UOp.const(x.dtype, 0) if _is_int(x) else None),
  (UPat({Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG}, name="x"), lambda x: canonical_sum(x) if _is_int(x) else None),
  (UPat(Ops.IDIV, src=(UPat.var("x"), UPat.cvar("d"))), lambda x, d: fold_idiv(x, d.arg) if _is_int(x) else None),
  (UPat(Ops.MOD, src=(UPat.var("x"), UPat.cvar("d"))), lambda x, d: fold_mod(x, d.arg) if _is_int(x) else None),
  (UPat(Ops.CMPLT, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: fold_cmplt(x, c.arg) if _is_int(x) else None),
  (UPat(Ops.MAX, src=(UPat.var("a"), UPat.var("b"))), lambda a, b: (a if a.vmin >= b.vmax else b if b.vmin >= a.vmax else None) if _is_int(a) else None),
  (UPat(Ops.CMPNE, src=(UPat.var("x"), UPat.var("x"))), lambda x: UOp.const(dtypes.bool, False) if _is_int(x) else None),
  (UPat(Ops.CMPEQ, src=(UPat.var("x"), UPat.var("x"))), lambda x: UOp.const(dtypes.bool, True) if _is_int(x) else None),
])

def simplify(u: UOp) -> UOp:
  """`u` rewritten by the symbolic rules to a fixed point (results are cached: UOps are immutable; not while a tracer
  watches, so that it sees every rewrite)."""
  return _simplified(u) if tracing.tracer is None else graph_rewrite(u, symbolic)

@functools.lru_cache(maxsize=1 << 16)
def _simplified(u: UOp) -> UOp: return graph_rewrite(u, symbolic)
