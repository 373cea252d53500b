"""Reference interpreter for PTX, the subset a code generator emits: a module is parsed once (each instruction decoded
into a closure) and an entry runs with numpy over every thread of the launch at once, blocks laid out block-major as
lanes, one array element per lane and register. Each lane has its own pc; a step runs the instruction at the smallest
pc among live lanes for the lanes that sit there, which reconverges if/else and loops. bar.sync holds a block until all
its live lanes wait at the same barrier. Global memory is any object with byte load/store (ArrayMemory: numpy arrays)."""
from __future__ import annotations
import bisect, functools, math, re
from typing import Callable, NamedTuple, Protocol
import numpy as np

class PTXError(Exception):
  """Malformed or unsupported PTX (the message names the line and its text), or a launch that cannot finish."""

class PTXFault(Exception):
  """A memory access outside what the launch may touch, or misaligned. `index` is the position of the first bad access
  among those a memory object was given; the interpreter re-raises with the kernel, line, block and thread."""
  def __init__(self, address: int, size: int, index: int = 0, *, why: str = "out of bounds", space: str = "global",
               kernel: str | None = None, line: int | None = None, block: tuple | None = None, thread: tuple | None = None):
    self.address, self.size, self.index, self.why, self.space = address, size, index, why, space
    self.kernel, self.line, self.block, self.thread = kernel, line, block, thread
    where = f" in kernel {kernel} (line {line}), block {block} thread {thread}" if kernel is not None else ""
    super().__init__(f"{space} access of {size} bytes at {address:#x} is {why}{where}")

class Memory(Protocol):
  def load(self, addrs: np.ndarray, size: int) -> np.ndarray: ...
  def store(self, addrs: np.ndarray, data: np.ndarray) -> None: ...

class ArrayMemory:
  """Global memory made of numpy arrays placed at virtual addresses; an access not fully inside one array faults.
  Stores from several lanes to one address keep the last lane's value (numpy assigns repeated indices in order)."""
  def __init__(self, regions: list[tuple[int, np.ndarray]] = ()):
    self._va, self._buf, self._table = [], [], None
    for va, array in sorted(regions, key=lambda r: r[0]): self.add(va, array)
  def add(self, va: int, array: np.ndarray) -> None:
    if not array.flags.c_contiguous: raise ValueError("ArrayMemory needs C-contiguous arrays (writes must reach them)")
    buf, i = array.reshape(-1).view(np.uint8), bisect.bisect(self._va, va)
    if (i and self._va[i-1] + len(self._buf[i-1]) > va) or (i < len(self._va) and va + len(buf) > self._va[i]):
      raise ValueError(f"region at {va:#x} of {len(buf)} bytes overlaps another")
    self._va.insert(i, va); self._buf.insert(i, buf)
    self._table = None
  def remove(self, va: int) -> None:
    """Drops the region that starts at va."""
    i = bisect.bisect_left(self._va, va)
    if i == len(self._va) or self._va[i] != va: raise ValueError(f"no region starts at {va:#x}")
    del self._va[i], self._buf[i]
    self._table = None
  def _find(self, addrs: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    if self._table is None:  # region starts and lengths, plus a dummy empty region that addresses below every region pick
      self._table = np.array(self._va + [0], np.uint64), np.array([len(b) for b in self._buf] + [0], np.uint64)
    starts, lens = self._table
    r = np.searchsorted(starts[:-1], addrs, "right").astype(np.int64) - 1
    off = addrs - starts[r]
    ok = (r >= 0) & (off < lens[r]) & (lens[r] - off >= size)
    if not ok.all():
      i = int(np.argmin(ok)); raise PTXFault(int(addrs[i]), size, i)
    return r, off
  def span(self, va: int, size: int) -> np.ndarray:
    """The bytes [va, va + size) as a writable view into one region (PTXFault where they aren't all in one)."""
    (r,), (off,) = self._find(np.array([va], np.uint64), size)
    return self._buf[r][int(off):int(off) + size]
  def load(self, addrs: np.ndarray, size: int) -> np.ndarray:
    addrs = np.asarray(addrs, np.uint64)
    r, off = self._find(addrs, size)
    if len(r) and r.min() == r.max(): return _gather(self._buf[r[0]], off, size)
    out = np.empty((len(addrs), size), np.uint8)
    for k in np.unique(r): out[r == k] = _gather(self._buf[k], off[r == k], size)
    return out
  def store(self, addrs: np.ndarray, data: np.ndarray) -> None:
    addrs, data = np.asarray(addrs, np.uint64), np.asarray(data, np.uint8)
    r, off = self._find(addrs, data.shape[1])
    if len(r) and r.min() == r.max(): return _scatter(self._buf[r[0]], off, data)
    for k in np.unique(r): _scatter(self._buf[k], off[r == k], data[r == k])

def _gather(buf: np.ndarray, off: np.ndarray, size: int) -> np.ndarray:
  if not (off % size).any():  # aligned: one fancy index over size-byte items
    return buf[:len(buf) // size * size].view(np.dtype((np.void, size)))[off // size].view(np.uint8).reshape(len(off), size)
  return buf[off.astype(np.int64)[:, None] + np.arange(size)]

def _scatter(buf: np.ndarray, off: np.ndarray, data: np.ndarray) -> None:
  size = data.shape[1]
  if not (off % size).any():
    buf[:len(buf) // size * size].view(np.dtype((np.void, size)))[off // size] = np.ascontiguousarray(data).view(np.dtype((np.void, size)))[:, 0]
  else: buf[off.astype(np.int64)[:, None] + np.arange(size)] = data

# ---- types and values: registers hold raw bits (uintN, bool for .pred); instructions view them as their type

class T(NamedTuple):
  name: str
  kind: str  # b (bits) u s f p (predicate)
  bits: int
  np: type  # dtype of the values; bf16 values are float32 numbers that bfloat16 represents exactly

_U = {1: np.bool_, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_S = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
TYPES = {"pred": T("pred", "p", 1, np.bool_), "f16": T("f16", "f", 16, np.float16), "bf16": T("bf16", "f", 16, np.float32),
         "f32": T("f32", "f", 32, np.float32), "f64": T("f64", "f", 64, np.float64),
         **{f"{k}{b}": T(f"{k}{b}", k, b, (_S if k == "s" else _U)[b]) for k in "bus" for b in (8, 16, 32, 64)}}
F32, F64, U32, U64, B16 = (TYPES[n] for n in ("f32", "f64", "u32", "u64", "b16"))
_CANON_NAN = {"f16": np.uint16(0x7FFF).view(np.float16), "f32": np.uint32(0x7FFFFFFF).view(np.float32),
              "bf16": np.uint32(0x7FFFFFFF).view(np.float32), "f64": np.uint64(0x7FFFFFFFFFFFFFFF).view(np.float64)}

def _bf16_value(bits) -> np.ndarray: return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)
def _bf16_bits(x) -> np.ndarray:  # NaNs stay NaN: a payload only in the low half would turn into infinity
  x = np.asarray(x, np.float32)
  return ((x.view(np.uint32) >> np.uint32(16)) | np.where(np.isnan(x), np.uint32(0x40), np.uint32(0))).astype(np.uint16)

Reader = Callable[[list, object], object]

def _reader(slot: int, width: int, t: T) -> Reader:
  """Register `slot` (width bits) read as t: a wider register gives its low bits, a narrower one is extended."""
  if t.kind == "p": return lambda R, s: R[slot][s]
  if t.name == "bf16":
    raw = _reader(slot, width, B16)
    return lambda R, s: _bf16_value(raw(R, s))
  dt = t.np
  if width == t.bits: return lambda R, s: R[slot][s].view(dt)
  if width < t.bits and t.kind == "s":
    sw = _S[width]
    return lambda R, s: R[slot][s].view(sw).astype(dt)
  u = _U[t.bits]
  return lambda R, s: R[slot][s].astype(u).view(dt)

def _writer(slot: int, width: int, t: T):
  """Writes t's values into register `slot`: truncated to a narrower register, extended (by t's sign) to a wider one."""
  if t.kind == "p":
    def w(R, s, v):
      if s is ALL and type(v) is np.ndarray and v.base is None and v.dtype == np.bool_ and v.shape == R[slot].shape: R[slot] = v
      else: R[slot][s] = v
    return w
  if t.name == "bf16":
    raw = _writer(slot, width, B16)
    return lambda R, s, v: raw(R, s, _bf16_bits(v))
  dt, u, uw = t.np, _U[t.bits], _U[width]
  if width == t.bits:
    def w(R, s, v):
      if s is ALL and type(v) is np.ndarray and v.base is None and v.dtype == dt and v.shape == R[slot].shape:
        R[slot] = v.view(u)  # a fresh array for every lane: take it instead of copying
      else: R[slot][s] = np.asarray(v, dt).view(u)
  elif width > t.bits and t.kind == "s":
    sw = _S[width]
    def w(R, s, v): R[slot][s] = np.asarray(v, dt).astype(sw).view(uw)
  else:
    def w(R, s, v): R[slot][s] = np.asarray(v, dt).view(u).astype(uw)
  return w

_INT = re.compile(r"(-?)(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)[uU]?")
_FBITS = re.compile(r"0([fF][0-9a-fA-F]{8}|[dD][0-9a-fA-F]{16})")
_FDEC = re.compile(r"-?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?|-?\d+[eE][+-]?\d+")

def _const(text: str, t: T):
  """The immediate `text` as a numpy scalar of t's values, or None if it isn't an immediate of that type."""
  if m := _FBITS.fullmatch(text):
    wide = m[1][0] in "dD"
    bits = int(m[1][1:], 16)
    if t.kind != "f": return _int_const(bits, t)
    return _float_const(float(np.array(bits, np.uint64 if wide else np.uint32).view(np.float64 if wide else np.float32)), t)
  if m := _INT.fullmatch(text):
    d = m[2]
    v = int(d, 8) if d[0] == "0" and d[1:2].isdigit() else int(d, 0)  # C-style: a leading 0 means octal
    if t.kind != "f": return _int_const(-v if m[1] else v, t)
    if d[:2].lower() in ("0x", "0b") and not m[1]: return _float_bits(v, t)  # hex for a float type spells its bits
    return _float_const(float(-v if m[1] else v), t)
  if _FDEC.fullmatch(text) and t.kind == "f": return _float_const(float(text), t)
  return None

def _int_const(v: int, t: T):
  if t.kind == "p": return np.bool_(v != 0)
  if t.kind == "f": return _float_bits(v, t)
  return np.array(v & ((1 << t.bits) - 1), _U[t.bits]).view(t.np)[()]

def _float_bits(v: int, t: T):
  if v >> t.bits: return None
  if t.name == "bf16": return _bf16_value(v)[()]
  return np.array(v, _U[t.bits]).view(t.np)[()]

def _float_const(x: float, t: T):
  return _round(np.float64(x), None, "rn", t)[()] if t.name == "bf16" else t.np(x)

# ---- floating-point rounding: results are computed as a float64 s plus the sign of a residual e, then rounded

_RND = ("rn", "rz", "rm", "rp")
_IRND = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}

def _f64(x) -> np.ndarray: return np.asarray(x, np.float64)

def _two_sum(a, b):  # a + b == s + e exactly
  s = a + b
  bb = s - a
  return s, (a - (s - bb)) + (b - bb)

def _split(a):  # Veltkamp: a == h + l with 26-bit halves, so their products are exact
  c = a * 134217729.0
  h = c - (c - a)
  return h, a - h

def _two_prod(a, b):  # a * b == p + e exactly (barring over/underflow)
  p = a * b
  ah, al = _split(a)
  bh, bl = _split(b)
  return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl

def _tie_possible(s: np.ndarray, t: T) -> bool:
  """Whether some float64 in s lies exactly halfway between two values of t (or in t's subnormal range)."""
  info = np.finfo(t.np)
  return bool(((s.view(np.uint64) << np.uint64(12 + info.nmant)) == np.uint64(1 << 63)).any() or np.abs(s).min(initial=np.inf) < info.tiny)

def _round(s, e, rnd: str, t: T) -> np.ndarray:
  """s + e rounded to t with mode rnd. s is the float64 nearest the exact value and e the residual, of which only the
  sign matters (None: s is exact). Returns t's values."""
  s = _f64(s)
  if t.name == "bf16": return _round_bf16(s, e, rnd)
  r = s.astype(t.np)
  if rnd == "rn" and (e is None or t.bits == 64 or not _tie_possible(s, t)): return r
  e = np.float64(0) if e is None else e
  d = r.astype(np.float64) - s  # r - (s + e) has the sign of d, or of -e where d is 0
  if rnd == "rn":  # s sits halfway and went to even: the residual says which side the exact value is on
    away = np.nextafter(r, np.where(d > 0, -np.inf, np.inf).astype(t.np))
    return np.where((d != 0) & (away.astype(np.float64) - s == -d) & (d * e < 0), away, r)
  above, below = (d > 0) | ((d == 0) & (e < 0)), (d < 0) | ((d == 0) & (e > 0))
  move, to = {"rz": ((above & (r > 0)) | (below & (r < 0)), 0.0), "rm": (above, -np.inf), "rp": (below, np.inf)}[rnd]
  return np.where(move, np.nextafter(r, t.np(to)), r)

def _round_bf16(s: np.ndarray, e, rnd: str) -> np.ndarray:
  x = _round(s, e, "rz", F32)  # truncate to float32 and set the last bit if inexact: rounding to odd keeps a sticky bit
  sticky = (x.astype(np.float64) != s) | (False if e is None else (e != 0))
  bits = x.view(np.uint32) | np.asarray(sticky).astype(np.uint32)
  lo, hi, neg = bits & np.uint32(0xFFFF), bits >> np.uint32(16), (bits >> np.uint32(31)) == 1
  up = {"rn": (lo > 0x8000) | ((lo == 0x8000) & ((hi & np.uint32(1)) == 1)), "rz": False, "rm": neg & (lo != 0), "rp": ~neg & (lo != 0)}[rnd]
  return np.where(np.isnan(x), np.float32(np.nan), ((hi + up) << np.uint32(16)).astype(np.uint32).view(np.float32))

def _flush(x, t: T):  # .ftz: subnormal inputs and results become zero of the same sign
  return np.where(np.abs(x) < np.finfo(np.float32 if t.name == "bf16" else t.np).tiny, x * t.np(0), x)

def _saturate(x, t: T):  # .sat: clamp to [0, 1], NaN to +0
  return np.clip(np.where(np.isnan(x), t.np(0), x), t.np(0), t.np(1)) + t.np(0)

def _narrow(x, t: T):  # an f32 result of an approximate function, in t
  return np.asarray(x, np.float32) if t.name == "f32" else _round(x, None, "rn", t)

def _fma_narrow(a, b, c, rnd: str, t: T):
  p, c = _f64(a) * _f64(b), _f64(c)  # the product of two f32 (or f16) is exact in float64
  s = p + c
  if rnd == "rn" and t.name != "bf16" and not _tie_possible(s, t): return s.astype(t.np)
  return _round(*_two_sum(p, c), rnd, t)

def _fma64(rnd: str):
  def f(a, b, c):  # Boldo & Melquiond: exact product and sum, the low parts added with rounding to odd
    a, b, c = _f64(a), _f64(b), _f64(c)
    uh, ul = _two_prod(a, b)
    th, tl = _two_sum(c, uh)
    v, ve = _two_sum(tl, ul)
    v = np.where((ve != 0) & ((np.asarray(v).view(np.uint64) & np.uint64(1)) == 0), np.nextafter(v, np.where(ve > 0, np.inf, -np.inf)), v)
    r = _round(*_two_sum(th, v), rnd, F64)
    return np.where(np.isfinite(r), r, a * b + c)  # infinities, NaN and overflow: plain arithmetic has them right
  return f

def _div(rnd: str, t: T):
  def f(a, b):
    a, b = _f64(a), _f64(b)
    q = a / b
    p, e = _two_prod(q, b)
    return _round(q, np.sign((a - p) - e) * np.sign(b), rnd, t)
  return f

def _sqrt(rnd: str, t: T):
  def f(a):
    a = _f64(a)
    s = np.sqrt(a)
    p, e = _two_prod(s, s)
    return _round(s, np.sign((a - p) - e), rnd, t)
  return f

def _minmax(is_max: bool, nan: bool, t: T):
  F, canon = t.np, _CANON_NAN[t.name]
  g = (np.maximum if nan else np.fmax) if is_max else (np.minimum if nan else np.fmin)  # fmax/fmin drop a NaN operand
  def f(a, b):
    a, b = np.asarray(a, F), np.asarray(b, F)
    r = g(a, b)
    if (zeros := (a == 0) & (b == 0)).any():  # +0 counts as greater than -0: the sum of zeros is +0 unless both are -0
      r = np.where(zeros, a + b if is_max else -(-a - b), r)
    return np.where(nans, canon, r) if (nans := np.isnan(r)).any() else r
  return f

def _lg2_approx(a):
  # lg2.approx's error is absolute, not relative (PTX ISA): an H200 returned log2(1 + 2^-20) about 1e-7 (2^-23.2) off,
  # which near 1 is most of the result. The model rounds log2 to a multiple of 2^-22, an error of up to 2^-23.
  r = np.log2(np.asarray(a, np.float64))
  return np.where(np.isfinite(r), np.round(r * 2.0 ** 22) / 2.0 ** 22, r)

def _absolute(fn):
  # sin.approx and cos.approx: the PTX ISA gives their error as absolute over [-pi, pi]; an H200 returned sin(x) about
  # 2^-21.5 off at every magnitude (sin(1e-6) 19 % off, sin(4e-16) 0). The model rounds to a multiple of 2^-22.
  def f(a):
    r = fn(np.asarray(a, np.float64))
    return np.where(np.isfinite(r), np.round(r * 2.0 ** 22) / 2.0 ** 22, r)
  return f

def _ex2_approx(a):
  # ex2.approx's error is relative (PTX ISA); an H200 was up to 2 ulp off (2^-22.75), and even exp2 of integers wasn't
  # exact. The model keeps 22 significant bits, an error of up to 1 ulp.
  r = np.exp2(np.asarray(a, np.float64))
  m, e = np.frexp(r)
  return np.where(np.isfinite(r) & (r >= 2.0 ** -126), np.ldexp(np.round(m * 2.0 ** 22) / 2.0 ** 22, e), r)

_APPROX = {"ex2": _ex2_approx, "lg2": _lg2_approx, "sin": _absolute(np.sin), "cos": _absolute(np.cos), "tanh": np.tanh}

def _float_fn(op: str, t: T, flags: list[str]):
  bad = [f for f in flags if f not in ("rn", "rz", "rm", "rp", "ftz", "sat", "approx", "full", "NaN")]
  if bad: raise _Bad(f"unsupported modifier .{bad[0]} for {op}.{t.name}")
  rnd, F = next((f for f in flags if f in _RND), "rn"), t.np
  native = rnd == "rn" and t.name != "bf16"  # numpy's own float ops round to nearest even (f16 via f32 is innocuous)
  fast = "approx" in flags or "full" in flags
  if op in ("add", "sub", "mul"):
    if native: fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op]
    elif op == "mul": fn = lambda a, b: _round(*_two_prod(_f64(a), _f64(b)), rnd, t)
    else:
      sign = 1.0 if op == "add" else -1.0
      fn = lambda a, b: _round(*_two_sum(_f64(a), sign * _f64(b)), rnd, t)
  elif op in ("fma", "mad"): fn = _fma64(rnd) if t.bits == 64 else (lambda a, b, c: _fma_narrow(a, b, c, rnd, t))
  elif op == "div": fn = np.divide if (native or fast) and t.name != "bf16" else _div(rnd, t)
  elif op == "rcp":
    div = np.divide if (native or fast) and t.name != "bf16" else _div(rnd, t)
    fn = lambda a: div(F(1), a)
  elif op == "sqrt": fn = np.sqrt if (native or fast) and t.name != "bf16" else _sqrt(rnd, t)
  elif op == "rsqrt": fn = lambda a: _narrow(1 / np.sqrt(np.asarray(a, np.float32)), t) if t.bits < 64 else 1 / np.sqrt(a)
  elif op in _APPROX:
    g = _APPROX[op]
    fn = lambda a: _narrow(g(np.asarray(a, np.float32)), t)
  elif op in ("neg", "abs"): fn = np.negative if op == "neg" else np.abs
  else: fn = _minmax(op == "max", "NaN" in flags, t)
  if "ftz" in flags:
    inner = fn
    fn = lambda *xs: _flush(inner(*[_flush(x, t) for x in xs]), t)
  if "sat" in flags:
    unsat = fn
    fn = lambda *xs: _saturate(unsat(*xs), t)
  return fn

# ---- integer operations (numpy wraps around like the hardware)

def _mulhi(t: T):
  if t.bits < 64:
    wide, sh = (np.int64 if t.kind == "s" else np.uint64), t.bits
    return lambda a, b: ((np.asarray(a).astype(wide) * np.asarray(b).astype(wide)) >> sh).astype(t.np)
  M, h = np.uint64(0xFFFFFFFF), np.uint64(32)
  def f(a, b):  # 64x64 -> high 64 bits from 32-bit limbs; signed: subtract the other operand where one is negative
    ua, ub = np.asarray(a).astype(np.uint64), np.asarray(b).astype(np.uint64)
    a0, a1, b0, b1 = ua & M, ua >> h, ub & M, ub >> h
    p01, p10 = a0 * b1, a1 * b0
    mid = ((a0 * b0) >> h) + (p01 & M) + (p10 & M)
    hi = a1 * b1 + (p01 >> h) + (p10 >> h) + (mid >> h)
    if t.kind == "s": hi = hi - np.where(np.asarray(a) < 0, ub, np.uint64(0)) - np.where(np.asarray(b) < 0, ua, np.uint64(0))
    return hi.astype(t.np)
  return f

def _idiv(t: T, rem: bool):
  F, ones = t.np, np.array(-1).astype(t.np)[()]
  def f(a, b):
    a, b = np.broadcast_arrays(np.asarray(a, F), np.asarray(b, F))
    zero = b == 0
    b1 = np.where(zero, F(1), b)
    q = a // b1
    r = a - q * b1
    if t.kind == "s":  # numpy floors; PTX truncates toward zero
      fix = (r != 0) & ((a < 0) != (b1 < 0))
      q, r = q + fix.astype(F), r - np.where(fix, b1, F(0))
    # division by zero is unspecified in PTX: give all ones, and the dividend as the remainder
    return np.where(zero, a, r) if rem else np.where(zero, ones, q)
  return f

def _shift(left: bool, t: T):
  W, F = t.bits, t.np
  def f(a, b):  # the amount is a u32; amounts past the width clamp to it (zero, or all sign bits for shr.s)
    b = np.asarray(b, np.uint32)
    if b.ndim == 0 and b < W: return np.asarray(a, F) << F(b) if left else np.asarray(a, F) >> F(b)
    k = np.minimum(b, np.uint32(W - 1)).astype(F)
    r = np.asarray(a, F) << k if left else np.asarray(a, F) >> k
    return r if t.kind == "s" and not left else np.where(b >= W, F(0), r)
  return f

def _clz(t: T):
  def f(a):
    a = np.asarray(a).astype(np.uint64)
    hi, lo = a >> np.uint64(32), a & np.uint64(0xFFFFFFFF)
    length = np.where(hi > 0, 32 + np.frexp(hi.astype(np.float64))[1], np.frexp(lo.astype(np.float64))[1])
    return (t.bits - length).astype(np.uint32)
  return f

def _int_fn(op: str, t: T, flags: list[str]):
  F = t.np
  if op in ("and", "or", "xor", "not"):
    if t.kind == "p": return {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor, "not": np.logical_not}[op]
    return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor, "not": np.invert}[op]
  if op in ("add", "sub"):
    g = np.add if op == "add" else np.subtract
    if "sat" not in flags: return g
    return lambda a, b: np.clip(g(np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64)), -2**31, 2**31 - 1)
  if op in ("mul", "mad"):
    mode = next((f for f in flags if f in ("lo", "hi", "wide")), None)
    if mode is None: raise _Bad(f"{op}.{t.name} needs .lo, .hi or .wide")
    if mode == "wide":
      w = _WIDE[t.name].np
      g = lambda a, b: np.asarray(a).astype(w) * np.asarray(b).astype(w)
    else: g = np.multiply if mode == "lo" else _mulhi(t)
    return g if op == "mul" else (lambda a, b, c: g(a, b) + c)
  if op in ("div", "rem"): return _idiv(t, op == "rem")
  if op in ("shl", "shr"): return _shift(op == "shl", t)
  if op == "popc": return lambda a: np.bitwise_count(np.asarray(a)).astype(np.uint32)
  if op == "clz": return _clz(t)
  return {"min": np.minimum, "max": np.maximum, "neg": np.negative, "abs": np.abs}[op]

_WIDE = {"s16": TYPES["s32"], "u16": TYPES["u32"], "s32": TYPES["s64"], "u32": TYPES["u64"]}
_FCMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}
_UCMP = {"lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal}

def _compare(cmp: str, t: T):
  if t.kind == "f":
    unordered = lambda a, b: np.isnan(a) | np.isnan(b)
    if cmp == "nan": return unordered
    if cmp == "num": return lambda a, b: ~unordered(a, b)
    if cmp in ("equ", "neu", "ltu", "leu", "gtu", "geu"):
      g = _FCMP[cmp[:2]]
      return lambda a, b: g(a, b) | unordered(a, b)
    if cmp == "ne": return lambda a, b: (a != b) & ~unordered(a, b)  # ordered: false when either is NaN
    if cmp in _FCMP: return _FCMP[cmp]
  elif cmp in _UCMP:
    g, u = _UCMP[cmp], _U[t.bits]
    return lambda a, b: g(np.asarray(a).astype(u), np.asarray(b).astype(u))
  elif cmp in _FCMP: return _FCMP[cmp]
  raise _Bad(f"unsupported comparison {cmp} for .{t.name}")

# ---- conversions

def _int_to_f64(x, t: T):
  """An integer's value as float64 s plus residual e (s + e is exact)."""
  if t.bits < 64: return _f64(x), None
  x = np.asarray(x)
  hi = (x >> 32).astype(np.float64) * 4294967296.0
  return _two_sum(hi, (x & t.np(0xFFFFFFFF)).astype(np.float64))

def _float_to_int(v: np.ndarray, t: T):
  """Integral float64 values saturated to t's range, NaN to 0."""
  info = np.iinfo(t.np)
  top = float(info.max) if t.bits < 64 else math.ldexp(1.0, t.bits - (t.kind == "s"))  # 2**63 / 2**64 as floats
  v = np.where(np.isnan(v), 0.0, v)
  r = np.clip(v, float(info.min), np.nextafter(top, 0.0) if t.bits == 64 else top).astype(t.np)
  return np.where(v >= top, info.max, r) if t.bits == 64 else r

def _cvt(dt: T, st: T, rnd: str | None, sat: bool, ftz: bool):
  if dt.kind == "p" or st.kind == "p": raise _Bad("cvt has no .pred form")
  if st.kind != "f" and dt.kind != "f":
    if rnd: raise _Bad("integer-to-integer cvt takes no rounding modifier")
    if not sat: return lambda a: np.asarray(a).astype(dt.np)  # numpy extends by the source's sign, truncates by width
    info, src = np.iinfo(dt.np), np.iinfo(st.np)
    lo, hi = max(info.min, src.min), min(info.max, src.max)
    return lambda a: np.clip(np.asarray(a), st.np(lo), st.np(hi)).astype(dt.np)
  if dt.kind != "f":
    if rnd not in _IRND: raise _Bad("float-to-integer cvt needs .rni, .rzi, .rmi or .rpi")
    g = _IRND[rnd]
    return lambda a: _float_to_int(g(_f64(_flush(a, st) if ftz else a)), dt)
  if st.kind != "f":
    if rnd not in _RND: raise _Bad("integer-to-float cvt needs .rn, .rz, .rm or .rp")
    post = (lambda x: _saturate(x, dt)) if sat else (lambda x: x)
    if rnd == "rn" and st.bits <= 32 and dt.name in ("f32", "f64"): return lambda a: post(np.asarray(a).astype(dt.np))  # one rounding
    return lambda a: post(_round(*_int_to_f64(a, st), rnd, dt))
  narrowing = dt.bits < st.bits or {st.name, dt.name} == {"f16", "bf16"}
  if narrowing and rnd not in _RND: raise _Bad(f"cvt.{dt.name}.{st.name} needs .rn, .rz, .rm or .rp")
  if not narrowing and rnd in _RND: raise _Bad(f"cvt.{dt.name}.{st.name} loses nothing and takes no .{rnd}")
  g = _IRND.get(rnd, lambda x: x)
  def f(a):
    v = g(_f64(_flush(a, st) if ftz and st.name == "f32" else a))
    r = _round(v, None, rnd if narrowing else "rn", dt)
    r = _saturate(r, dt) if sat else r
    return _flush(r, dt) if ftz and dt.name == "f32" else r
  return f

# ---- decoding: each instruction becomes (kind, guard slot, guard negated, arg, line)

_OP, _BRA, _EXIT, _BAR = range(4)
ALL = slice(None)  # the lane selection "every lane of the batch"
_SPECIALS = {f"%{r}.{c}" for r in ("tid", "ntid", "ctaid", "nctaid") for c in "xyz"} | {"%laneid", "%warpid"}
_IGNORED = {"nc", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "volatile", "relaxed", "weak", "cta", "gpu", "sys"}

class _Bad(Exception):
  """A decoding error without its line; the parser adds the line and the text."""

class _Ctx:
  def __init__(self, regs: dict, shared: dict, params: dict, labels: dict):
    self.regs, self.shared, self.params, self.labels = regs, shared, params, labels
    self.specials: dict[str, int] = {}
  def _slot(self, name: str) -> tuple[int, int] | None:
    if name in self.regs: return self.regs[name]
    if name in _SPECIALS:
      if name not in self.specials: self.specials[name] = len(self.regs) + len(self.specials)
      return self.specials[name], 32
    return None
  def _check(self, name: str, width: int, t: T, relaxed: bool):
    if (t.kind == "p") != (width == 1) or (width != t.bits and not (relaxed and width > t.bits)):
      raise _Bad(f"register {name} ({width} bits) does not fit .{t.name}")
  def read(self, text: str, t: T, relaxed: bool = False) -> Reader:
    if (r := self._slot(text)) is not None:
      if text not in _SPECIALS: self._check(text, r[1], t, relaxed)
      return _reader(r[0], r[1], t)
    c = _const(str(self.shared[text]), t) if text in self.shared and t.kind in "bu" else _const(text, t)
    if c is None: raise _Bad(f"bad .{t.name} operand {text!r}")
    return lambda R, s: c
  def write(self, text: str, t: T, relaxed: bool = False):
    if text == "_": return lambda R, s, v: None
    if text not in self.regs: raise _Bad(f"destination {text!r} is not a register")
    slot, width = self.regs[text]
    self._check(text, width, t, relaxed)
    return _writer(slot, width, t)
  def pred(self, text: str) -> tuple[int, bool]:
    neg = text.startswith("!")
    name = text[1:].strip() if neg else text
    if name not in self.regs or self.regs[name][1] != 1: raise _Bad(f"{name!r} is not a predicate register")
    return self.regs[name][0], neg
  def addr(self, text: str, space: str):
    """[base], [base+imm]: a constant (shared variable, param, number) or a reader of a u64 address."""
    m = re.fullmatch(r"\[\s*([^\]+\s-][^\]+\s]*?)\s*(?:([+-])\s*(-?\w+))?\s*\]", text)
    if not m: raise _Bad(f"bad address {text!r}")
    off = 0
    if m[3]:
      off = _const(m[3], TYPES["s64"])
      if off is None: raise _Bad(f"bad address offset {m[3]!r}")
      off = int(off) * (-1 if m[2] == "-" else 1)
    base = m[1]
    if space == "param":
      if base not in self.params: raise _Bad(f"{base!r} is not a parameter")
      return self.params[base][1] + off
    if space == "shared" and base in self.shared: return self.shared[base] + off
    if (r := self._slot(base)) is not None:
      read, o = self.read(base, U64, relaxed=True) if r[1] == 64 else self.read(base, U32), np.uint64(off % 2**64)
      return lambda R, s: np.asarray(read(R, s)).astype(np.uint64) + o
    if (c := _const(base, U64)) is not None: return int(c) + off
    raise _Bad(f"bad address base {base!r}")

def _split_operands(text: str) -> list[str]:
  out, depth, cur = [], 0, ""
  for ch in text:
    depth += (ch in "{[") - (ch in "}]")
    if ch == "," and depth == 0: out, cur = out + [cur.strip()], ""
    else: cur += ch
  return out + [cur.strip()] if cur.strip() else out

def _vector(text: str) -> list[str]:
  if not (text.startswith("{") and text.endswith("}")): raise _Bad(f"expected a vector operand, got {text!r}")
  return [x.strip() for x in text[1:-1].split(",")]

def _apply(write, fn, reads: list[Reader]):
  if len(reads) == 1:
    a, = reads
    return lambda st, s: write(st.R, s, fn(a(st.R, s)))
  if len(reads) == 2:
    a, b = reads
    return lambda st, s: write(st.R, s, fn(a(st.R, s), b(st.R, s)))
  a, b, c = reads
  return lambda st, s: write(st.R, s, fn(a(st.R, s), b(st.R, s), c(st.R, s)))

def _type(name: str) -> T:
  if name not in TYPES: raise _Bad(f"unknown type .{name}")
  return TYPES[name]

def _arity(ops: list[str], n: int, op: str):
  if len(ops) != n: raise _Bad(f"{op} takes {n} operands, got {len(ops)}")

_ARITH = {"add": 2, "sub": 2, "mul": 2, "mad": 3, "fma": 3, "div": 2, "rem": 2, "min": 2, "max": 2, "neg": 1, "abs": 1,
          "and": 2, "or": 2, "xor": 2, "not": 1, "shl": 2, "shr": 2, "popc": 1, "clz": 1, "rcp": 1, "sqrt": 1,
          "rsqrt": 1, "ex2": 1, "lg2": 1, "sin": 1, "cos": 1, "tanh": 1}
_FLOAT_ONLY, _INT_ONLY = {"fma", "rcp", "sqrt", "rsqrt", *_APPROX}, {"rem", "and", "or", "xor", "not", "shl", "shr", "popc", "clz"}

def _d_arith(ctx: _Ctx, op: str, mods: list[str], ops: list[str]):
  t = _type(mods[-1])
  _arity(ops, _ARITH[op] + 1, op)
  if t.kind == "f" and op not in _INT_ONLY: fn, dst, srcs = _float_fn(op, t, mods[:-1]), t, [t] * _ARITH[op]
  elif t.kind != "f" and op not in _FLOAT_ONLY:
    bad = [m for m in mods[:-1] if m not in ("lo", "hi", "wide", "sat")]
    if bad: raise _Bad(f"unsupported modifier .{bad[0]} for {op}.{t.name}")
    if t.kind == "p" and op not in ("and", "or", "xor", "not"): raise _Bad(f"{op} has no .pred form")
    fn, dst, srcs = _int_fn(op, t, mods[:-1]), t, [t] * _ARITH[op]
    if "wide" in mods:
      if t.name not in _WIDE: raise _Bad(f"{op}.wide has no .{t.name} form")
      dst = _WIDE[t.name]
      srcs = [t, t, dst][:len(srcs)]
    if op in ("shl", "shr"): srcs = [t, U32]
    if op in ("popc", "clz"): dst = U32
  else: raise _Bad(f"{op} has no .{t.name} form")
  return _OP, _apply(ctx.write(ops[0], dst), fn, [ctx.read(o, ty) for o, ty in zip(ops[1:], srcs)])

def _d_setp(ctx: _Ctx, op: str, mods: list[str], ops: list[str]):
  t, cmp = _type(mods[-1]), mods[0]
  flags = mods[1:-1]
  boolop = next((f for f in flags if f in ("and", "or", "xor")), None)
  if any(f not in ("and", "or", "xor", "ftz") for f in flags): raise _Bad(f"unsupported setp modifier in {'.'.join(mods)}")
  _arity(ops, 4 if boolop else 3, f"setp{'.' + boolop if boolop else ''}")
  g, a, b = _compare(cmp, t), ctx.read(ops[1], t), ctx.read(ops[2], t)
  if "ftz" in flags: a, b = (lambda r: lambda R, s: _flush(r(R, s), t))(a), (lambda r: lambda R, s: _flush(r(R, s), t))(b)
  dsts = [d.strip() for d in ops[0].split("|")]
  wp = ctx.write(dsts[0], TYPES["pred"])
  wq = ctx.write(dsts[1], TYPES["pred"]) if len(dsts) > 1 else None
  comb = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(boolop)
  if comb:
    cslot, cneg = ctx.pred(ops[3])
  def run(st, s):
    R = st.R
    r = np.asarray(g(a(R, s), b(R, s)))
    c = (~R[cslot][s] if cneg else R[cslot][s]) if comb else None
    wp(R, s, comb(r, c) if comb else r)
    if wq: wq(R, s, comb(~r, c) if comb else ~r)
  return _OP, run

def _d_selp(ctx: _Ctx, op: str, mods: list[str], ops: list[str]):
  t = _type(mods[-1])
  _arity(ops, 4, "selp")
  return _OP, _apply(ctx.write(ops[0], t), np.where, [ctx.pred_reader(ops[3]), ctx.read(ops[1], t), ctx.read(ops[2], t)])

def _pred_reader(self: _Ctx, text: str) -> Reader:
  slot, neg = self.pred(text)
  return (lambda R, s: ~R[slot][s]) if neg else (lambda R, s: R[slot][s])
_Ctx.pred_reader = _pred_reader

def _d_mov(ctx: _Ctx, op: str, mods: list[str], ops: list[str]):
  t = _type(mods[-1]) if op == "mov" else (U64 if mods[-1] == "u64" else U32)
  if op == "cvta" and not (set(mods[:-1]) <= {"to", "global", "shared"} and ("global" in mods or "shared" in mods)):
    raise _Bad(f"unsupported cvta form {'.'.join(mods)}")
  _arity(ops, 2, op)
  d, a = ops
  if d.startswith("{") or a.startswith("{"):  # pack lanes into one register, or split it, low part first
    parts = _vector(d if d.startswith("{") else a)
    ew = t.bits // len(parts)
    et, u = _type(f"b{ew}"), _U[t.bits]
    if d.startswith("{"):
      src, dsts = ctx.read(a, t), [ctx.write(p, et) for p in parts]
      def run(st, s):
        v = np.asarray(src(st.R, s)).view(u)
        for k, w in enumerate(dsts): w(st.R, s, (v >> u(k * ew)).astype(et.np))
      return _OP, run
    srcs, dst = [ctx.read(p, et) for p in parts], ctx.write(d, t)
    def run(st, s):
      v = u(0)
      for k, r in enumerate(srcs): v = v | (np.asarray(r(st.R, s)).astype(u) << u(k * ew))
      dst(st.R, s, np.asarray(v).view(t.np))
    return _OP, run
  return _OP, _apply(ctx.write(d, t), lambda x: x, [ctx.read(a, t)])

def _d_cvt(ctx: _Ctx, op: str, mods: list[str], ops: list[str]):
  if len(mods) < 2: raise _Bad("cvt needs a destination and a source type")
  dt, st = _type(mods[-2]), _type(mods[-1])
  flags = mods[:-2]
  rnds = [f for f in flags if f in _RND or f in _IRND]
  if len(rnds) > 1 or any(f not in ("ftz", "sat") and f not in rnds for f in flags): raise _Bad(f"unsupported cvt modifiers {'.'.join(flags)}")
  _arity(ops, 2, "cvt")
  fn = _cvt(dt, st, rnds[0] if rnds else None, "sat" in flags, "ftz" in flags)
  return _OP, _apply(ctx.write(ops[0], dt, relaxed=True), fn, [ctx.read(ops[1], st, relaxed=True)])

def _d_mem(ctx: _Ctx, op: str, mods: list[str], ops: list[str]):
  space = next((m for m in mods if m in ("param", "global", "shared", "local", "const")), "generic")
  if space not in ("param", "global", "shared") or (op == "st" and space == "param"): raise _Bad(f"{op} from {space} space is not supported")
  t = _type(mods[-1])
  if t.kind == "p" or t.name == "bf16": raise _Bad(f"{op} has no .{t.name} form")
  nvec = 4 if "v4" in mods else 2 if "v2" in mods else 1
  extra = [m for m in mods[:-1] if m not in (space, "v2", "v4") and m not in _IGNORED and "::" not in m]
  if extra: raise _Bad(f"unsupported {op} modifier .{extra[0]}")
  _arity(ops, 2, op)
  esize = max(t.bits // 8, 1)
  size, eu = esize * nvec, _U[esize * 8]
  if size > 16: raise _Bad("vector accesses are at most 16 bytes")
  vals, where = (ops[0], ops[1]) if op == "ld" else (ops[1], ops[0])
  elems = _vector(vals) if nvec > 1 else [vals]
  if len(elems) != nvec: raise _Bad(f"expected {nvec} vector elements")
  addr = ctx.addr(where, space)
  if space == "param":
    if addr < 0 or addr + size > ctx.param_size: raise _Bad("parameter access out of range")
    fetch = lambda st, s: np.frombuffer(st.params, np.uint8, size, addr)[None, :]
  else:
    get = (lambda R, s: addr) if isinstance(addr, int) else addr
    fetch = lambda st, s: _shared_load(st, s, get, size) if space == "shared" else _global_load(st, s, get, size)
  if op == "ld":
    dsts = [ctx.write(e, t, relaxed=True) for e in elems]
    def run(st, s):
      v = np.ascontiguousarray(fetch(st, s)).view(eu)
      for k, w in enumerate(dsts): w(st.R, s, v[:, k].view(t.np))
    return _OP, run
  srcs = [ctx.read(e, t, relaxed=True) for e in elems]
  def run(st, s):
    n = st.n if s is ALL else len(s)
    data = np.stack([np.broadcast_to(np.asarray(r(st.R, s), t.np).view(eu), (n,)) for r in srcs], axis=1).view(np.uint8)
    (_shared_store if space == "shared" else _global_store)(st, s, get, data)
  return _OP, run

def _addresses(st, s, get, size: int, space: str) -> np.ndarray:
  a = np.broadcast_to(np.asarray(get(st.R, s), np.uint64), (st.n if s is ALL else len(s),))
  if (bad := a % np.uint64(size) != 0).any():  # PTX requires natural alignment of the whole access
    i = int(np.argmax(bad)); raise PTXFault(int(a[i]), size, i, why="misaligned", space=space)
  return a

def _global_load(st, s, get, size: int) -> np.ndarray:
  a = _addresses(st, s, get, size, "global")
  return np.asarray(st.mem.load(a, size), np.uint8).reshape(len(a), size)

def _global_store(st, s, get, data: np.ndarray) -> None: st.mem.store(_addresses(st, s, get, data.shape[1], "global"), data)

def _shared_index(st, s, get, size: int) -> np.ndarray:
  a = _addresses(st, s, get, size, "shared")
  if (bad := (a >= np.uint64(st.S)) | (np.uint64(st.S) - a < size)).any():
    i = int(np.argmax(bad)); raise PTXFault(int(a[i]), size, i, space="shared")
  return (st.sbase[s] + a.astype(np.int64)) // size  # each block's window is a multiple of 16 bytes

def _shared_load(st, s, get, size: int) -> np.ndarray:
  return st.shared.view(np.dtype((np.void, size)))[_shared_index(st, s, get, size)].view(np.uint8).reshape(-1, size)

def _shared_store(st, s, get, data: np.ndarray) -> None:
  size = data.shape[1]
  st.shared.view(np.dtype((np.void, size)))[_shared_index(st, s, get, size)] = np.ascontiguousarray(data).view(np.dtype((np.void, size)))[:, 0]

def _d_bra(ctx: _Ctx, op: str, mods: list[str], ops: list[str]):
  if set(mods) - {"uni"}: raise _Bad(f"unsupported bra modifier {'.'.join(mods)}")
  _arity(ops, 1, "bra")
  if ops[0] not in ctx.labels: raise _Bad(f"unknown label {ops[0]!r}")
  return _BRA, ctx.labels[ops[0]]

def _d_exit(ctx: _Ctx, op: str, mods: list[str], ops: list[str]):
  if set(mods) - {"uni"} or ops: raise _Bad(f"unsupported {op} form")
  return _EXIT, None

def _d_bar(ctx: _Ctx, op: str, mods: list[str], ops: list[str]):
  # every barrier counts the whole block: ids and thread counts are not modelled
  if "sync" not in mods or set(mods) - {"sync", "aligned", "cta"} or not 1 <= len(ops) <= 2: raise _Bad(f"unsupported {op} form")
  for o in ops: ctx.read(o, U32)
  return _BAR, None

def _d_nop(ctx: _Ctx, op: str, mods: list[str], ops: list[str]): return _OP, None  # memory is coherent in lockstep

# mma.m16n8k16 fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16"): lane l of a warp is group g = l // 4 and
# thread t = l % 4 in it; element i of each fragment sits at these (row, column) of A (16x16), B (16x8) and C/D (16x8)
_LANE_G, _LANE_T = np.arange(32) // 4, np.arange(32) % 4
_MMA_A = [(_LANE_G + 8 * (i // 2 % 2), 2 * _LANE_T + i % 2 + 8 * (i // 4)) for i in range(8)]
_MMA_B = [(2 * _LANE_T + i % 2 + 8 * (i // 2), _LANE_G) for i in range(4)]
_MMA_C = [(_LANE_G + 8 * (i // 2), 2 * _LANE_T + i % 2) for i in range(4)]

def _halves(regs: list, kind: str) -> list[np.ndarray]:
  """The 16-bit elements packed in 32-bit registers (low half first) as float64, read as f16 or bf16."""
  out = []
  for r in regs:
    bits = np.asarray(r).astype(np.uint32)
    for h in (bits & 0xFFFF, bits >> 16):
      out.append(h.astype(np.uint16).view(np.float16).astype(np.float64) if kind == "f16" else _bf16_value(h).astype(np.float64))
  return out

def _d_mma(ctx: _Ctx, op: str, mods: list[str], ops: list[str]):
  """mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32: each warp computes D = A @ B + C, A and B
  packed two halves per .b32 register (the low half is the lower-numbered element). Computed in float64 and rounded
  once to f32 (hardware may round the sum in other steps)."""
  if mods[:6] != ["sync", "aligned", "m16n8k16", "row", "col", "f32"] or len(mods) != 9 or mods[6] != mods[7] \
     or mods[6] not in ("f16", "bf16") or mods[8] != "f32" or len(ops) != 4:
    raise _Bad("unsupported mma form (the interpreter has mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32)")
  d, a, b, c = (_vector(o) for o in ops)
  if (len(d), len(a), len(b), len(c)) != (4, 4, 2, 4): raise _Bad("m16n8k16 takes 4 D, 4 A, 2 B and 4 C registers")
  f32, b32 = TYPES["f32"], TYPES["b32"]
  wd, ra, rb, rc = [ctx.write(x, f32) for x in d], [ctx.read(x, b32) for x in a], [ctx.read(x, b32) for x in b], [ctx.read(x, f32) for x in c]
  def run(st, s):
    w = len(_whole_groups(st, s, 32, "mma.sync"))
    A, B, C = np.zeros((w, 16, 16)), np.zeros((w, 16, 8)), np.zeros((w, 16, 8))
    for (row, col), v in zip(_MMA_A, _halves([r(st.R, s) for r in ra], mods[6])): A[:, row, col] = v.reshape(w, 32)
    for (row, col), v in zip(_MMA_B, _halves([r(st.R, s) for r in rb], mods[6])): B[:, row, col] = v.reshape(w, 32)
    for (row, col), r in zip(_MMA_C, rc): C[:, row, col] = np.asarray(r(st.R, s)).astype(np.float64).reshape(w, 32)
    D = (A @ B + C).astype(np.float32)
    for (row, col), wr in zip(_MMA_C, wd): wr(st.R, s, D[:, row, col].reshape(-1))
  return _OP, run

def _whole_groups(st, s, size: int, what: str) -> np.ndarray:
  """The executing lanes as rows of `size` consecutive lanes of one block starting at a multiple of size."""
  lanes = np.arange(st.n)[s]
  first = lanes[::size] % st.bt
  if len(lanes) % size or (first % size).any() or (st.bt - first < size).any() or (np.diff(lanes.reshape(-1, size)) != 1).any():
    raise PTXError(f"{what} needs whole {'warps' if size == 32 else 'warpgroups'} executing together ({size} converged threads of one block)")
  return lanes.reshape(-1, size)

def _d_wgmma(ctx: _Ctx, op: str, mods: list[str], ops: list[str]):
  """wgmma.fence / commit_group / wait_group (no-ops: each mma_async completes at once) and
  wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16} d, {a}, b-desc, scale-d, 1, 1, 0: A in registers
  (warp w holds rows 16w..16w+15 in the m16n8k16 layout), B (16 x N, K-major) in shared memory as described by the
  descriptor (no swizzle), D laid out per warp like m16n8's C, once per 8 columns."""
  if mods[0] in ("fence", "commit_group", "wait_group"):
    if mods[1:] != ["sync", "aligned"] or len(ops) != (mods[0] == "wait_group"): raise _Bad(f"unsupported wgmma.{'.'.join(mods)} form")
    return _OP, None
  shape = re.fullmatch(r"m64n(\d+)k16", mods[3]) if len(mods) == 7 else None
  if mods[:3] != ["mma_async", "sync", "aligned"] or shape is None or mods[4] != "f32" or mods[5] != mods[6] or mods[5] not in ("f16", "bf16"):
    raise _Bad("unsupported wgmma form (the interpreter has wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16})")
  n = int(shape[1])
  if len(ops) != 7 or not ops[1].startswith("{") or ops[4:] != ["1", "1", "0"] or n % 8 or not 8 <= n <= 256:
    raise _Bad("the interpreter's wgmma takes A in registers, scale-a = scale-b = 1 and an untransposed (K-major) B")
  d, a = _vector(ops[0]), _vector(ops[1])
  if (len(d), len(a)) != (n // 2, 4): raise _Bad(f"m64n{n}k16 takes {n // 2} D and 4 A registers")
  f32, b32 = TYPES["f32"], TYPES["b32"]
  wd, rd, ra = [ctx.write(x, f32) for x in d], [ctx.read(x, f32) for x in d], [ctx.read(x, b32) for x in a]
  desc, scale_d = ctx.read(ops[2], U64), _pred_reader(ctx, ops[3]) if ops[3] in ctx.regs else ctx.read(ops[3], TYPES["u32"])
  k_, n_ = np.arange(16)[:, None], np.arange(n)[None, :]
  def run(st, s):
    groups = _whole_groups(st, s, 128, "wgmma")
    lanes = groups.reshape(-1)
    descs = np.broadcast_to(np.asarray(desc(st.R, lanes), np.uint64), (len(lanes),)).reshape(-1, 128)
    if (descs != descs[:, :1]).any(): raise PTXError("wgmma: the B descriptor differs between the lanes of a warpgroup")
    A, B = np.zeros((len(groups), 64, 16)), np.zeros((len(groups), 16, n))
    for warp in range(4):
      sel = groups[:, 32 * warp:32 * warp + 32].reshape(-1)
      for (row, col), h in zip(_MMA_A, _halves([r(st.R, sel) for r in ra], mods[5])): A[:, 16 * warp + row, col] = h.reshape(-1, 32)
    for g, dsc in enumerate(int(x) for x in descs[:, 0]):
      start, lbo, sbo = (dsc & 0x3FFF) << 4, (dsc >> 16 & 0x3FFF) << 4, (dsc >> 32 & 0x3FFF) << 4
      if dsc >> 49 & 0x7 or dsc >> 62: raise PTXError(f"wgmma: descriptor {dsc:#x} asks for a swizzle or base offset, which the model lacks")
      at = start + n_ // 8 * sbo + k_ // 8 * lbo + n_ % 8 * 16 + k_ % 8 * 2
      if at.max() + 2 > st.S: raise PTXFault(int(at.max()), 2, int(groups[g, 0]), space="shared")
      at = at + int(st.sbase[groups[g, 0]])
      B[g] = _halves([st.shared[at] | st.shared[at + 1].astype(np.uint32) << 8], mods[5])[0]
    keep = np.broadcast_to(np.asarray(scale_d(st.R, lanes)).astype(bool), (len(lanes),)).reshape(-1, 128)[:, 0]
    D = A @ B
    for warp in range(4):
      sel = groups[:, 32 * warp:32 * warp + 32].reshape(-1)
      for j, (wr, r) in enumerate(zip(wd, rd)):
        row, col = _MMA_C[j % 4][0] + 16 * warp, _MMA_C[j % 4][1] + 8 * (j // 4)
        c = np.where(keep[:, None], np.asarray(r(st.R, sel), np.float64).reshape(-1, 32), 0.0)  # scale-d 0: D's old value unread
        wr(st.R, sel, (D[:, row, col] + c).astype(np.float32).reshape(-1))
  return _OP, run

_DECODERS = {**{op: _d_arith for op in _ARITH}, "setp": _d_setp, "selp": _d_selp, "mov": _d_mov, "cvta": _d_mov, "cvt": _d_cvt,
             "ld": _d_mem, "st": _d_mem, "bra": _d_bra, "ret": _d_exit, "exit": _d_exit, "bar": _d_bar, "barrier": _d_bar,
             "membar": _d_nop, "fence": _d_nop, "mma": _d_mma, "wgmma": _d_wgmma}
_INSTR = re.compile(r"(?:@(!?)\s*(\S+)\s+)?([\w.:]+)\s*(.*)", re.S)

def _decode(ctx: _Ctx, text: str) -> tuple:
  m = _INSTR.fullmatch(text)
  if not m: raise _Bad("cannot parse the instruction")
  op, *mods = m[3].split(".")
  if op not in _DECODERS: raise _Bad(f"unknown instruction {op}")
  kind, arg = _DECODERS[op](ctx, op, mods, _split_operands(m[4]))
  guard, neg = ctx.pred(m[1] + m[2]) if m[2] else (None, False)
  return kind, guard, neg, arg

# ---- module parsing

class _Kernel(NamedTuple):
  name: str
  params: list  # (name, ptx type, offset, size)
  param_size: int
  prog: list  # (kind, guard, negated, arg, line)
  texts: list
  regs: list  # storage dtype per slot
  specials: dict  # special register name -> slot
  shared: int  # static shared bytes (dynamic shared starts there)
  ntid: tuple | None  # (.maxntid or .reqntid, required)

_PARAM = re.compile(r"\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+(?:\.ptr(?:\.\w+)*(?:\s+\d+)?\s+)?(?:\.align\s+(\d+)\s+)?([\w$]+)\s*(?:\[\s*(\d+)\s*\])?")
_SHARED = re.compile(r"(\.extern\s+)?\.shared\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([\w$]+)\s*((?:\[\s*\d*\s*\]\s*)*)")
_REG = re.compile(r"\.reg\s+\.(\w+)\s+(.+)")
_LABEL = re.compile(r"([A-Za-z_$][\w$]*)\s*:(?!:)")
_ENTRY = re.compile(r"(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$]+)\s*\(([^)]*)\)([^{;]*)\{")

def _shared_decl(text: str) -> tuple[str, int, int, bool]:
  m = _SHARED.fullmatch(text)
  if not m: raise _Bad("bad .shared declaration")
  t = _type(m[3])
  dims = re.findall(r"\[\s*(\d*)\s*\]", m[5])
  if "" in dims and not m[1]: raise _Bad("only .extern .shared arrays may leave their size open")
  esize = max(t.bits // 8, 1)
  return m[4], int(m[2] or esize), esize * math.prod(int(d or 0) for d in dims), bool(m[1])

def _parse_entry(name: str, ptext: str, directives: str, body: str, at: int, line_of, module_shared: list) -> _Kernel:
  def fail(pos: int, msg: str, text: str): raise PTXError(f"line {line_of(pos)}: {msg}: `{text}`")
  params, offset = [], 0
  for p in [p.strip() for p in ptext.split(",") if p.strip()]:
    m = _PARAM.fullmatch(p)
    if not m or m[2] not in TYPES or m[2] == "pred": fail(at, "bad parameter", p)
    esize = TYPES[m[2]].bits // 8
    align = int(m[1] or m[3] or esize)
    offset = -(-offset // align) * align
    params.append((m[4], m[2], offset, esize * int(m[5] or 1)))
    offset += esize * int(m[5] or 1)
  ntid = None
  if dm := re.search(r"\.(maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", directives):
    ntid = (tuple(int(x or 1) for x in dm.groups()[1:]), dm[1] == "reqntid")
  regs, shared_decls, labels, instrs, i = {}, list(module_shared), {}, [], 0
  while True:
    while i < len(body) and body[i].isspace(): i += 1
    if i >= len(body): break
    if body[i] in "{}": i += 1; continue  # nested scopes: register names stay unique in generated code
    if m := _LABEL.match(body, i):
      labels[m[1]] = len(instrs); i = m.end(); continue
    j = body.find(";", i)
    if j < 0: fail(at + i, "missing ';'", body[i:i + 60].strip())
    stmt, pos, i = " ".join(body[i:j].split()), at + i, j + 1
    try:
      if m := _REG.fullmatch(stmt):
        t = _type(m[1])
        for part in m[2].split(","):
          if not (rm := re.fullmatch(r"\s*([%\w$]+)\s*(?:<\s*(\d+)\s*>)?\s*", part)): raise _Bad("bad register name")
          for r in [f"{rm[1]}{k}" for k in range(int(rm[2]))] if rm[2] else [rm[1]]: regs[r] = (len(regs), t.bits)
      elif stmt.startswith((".shared", ".extern")): shared_decls.append(_shared_decl(stmt))
      elif stmt.startswith(".pragma"): pass
      elif stmt.startswith("."): raise _Bad("unsupported directive")
      else: instrs.append((stmt, pos))
    except _Bad as e: fail(pos, str(e), stmt)
  shared, size = {}, 0
  for sname, align, nbytes, extern in sorted(shared_decls, key=lambda d: d[3]):  # dynamic shared memory goes last
    size = -(-size // max(align, 16 if extern else 1)) * max(align, 16 if extern else 1)
    shared[sname], size = size, size + nbytes
  ctx = _Ctx(regs, shared, {p[0]: (TYPES[p[1]], p[2]) for p in params}, labels)
  ctx.param_size = offset
  prog, texts = [], []
  for stmt, pos in instrs:
    try: prog.append((*_decode(ctx, stmt), line_of(pos)))
    except _Bad as e: fail(pos, str(e), stmt)
    texts.append(stmt)
  prog.append((_EXIT, None, False, None, line_of(at + len(body))))  # falling off the end exits
  texts.append("}")
  storage = [_U[w] for _, w in sorted(regs.values())]
  return _Kernel(name, params, offset, prog, texts, storage, ctx.specials, size, ntid)

@functools.lru_cache(maxsize=64)
def _parse(src: str) -> dict[str, _Kernel]:
  text = re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m[0]), src, flags=re.S)  # keeps line numbers
  newlines = [m.start() for m in re.finditer("\n", text)]
  line_of = lambda pos: bisect.bisect_left(newlines, pos) + 1
  kernels, module_shared, pos = {}, [], 0
  while True:
    pos = re.compile(r"\s*").match(text, pos).end()
    if pos >= len(text): return kernels
    if text.startswith((".version", ".target", ".address_size"), pos):
      pos = len(text) if (e := text.find("\n", pos)) < 0 else e
    elif m := _ENTRY.match(text, pos):
      depth, j = 1, m.end()
      while depth and j < len(text): depth, j = depth + (text[j] == "{") - (text[j] == "}"), j + 1
      if depth: raise PTXError(f"line {line_of(pos)}: entry {m[1]} has no closing brace")
      kernels[m[1]] = _parse_entry(m[1], m[2], m[3], text[m.end():j - 1], m.end(), line_of, module_shared)
      pos = j
    elif text.startswith((".shared", ".extern"), pos) and (j := text.find(";", pos)) > 0:
      try: module_shared.append(_shared_decl(" ".join(text[pos:j].split())))
      except _Bad as e: raise PTXError(f"line {line_of(pos)}: {e}: `{text[pos:j]}`") from None
      pos = j + 1
    else: raise PTXError(f"line {line_of(pos)}: unsupported module-level statement: `{text[pos:].splitlines()[0]}`")

# ---- execution

_WAIT, _EXITED = 1 << 30, 1 << 40  # pc offsets: a lane waiting at a barrier, a lane that has exited

class _State:
  __slots__ = ("R", "n", "bt", "mem", "params", "shared", "S", "sbase")

def _narrow_sel(sel, p: np.ndarray):
  """The lanes of `sel` where p holds: sel itself when all do, None when none do."""
  k = int(np.count_nonzero(p))
  if k == len(p): return sel
  if k == 0: return None
  return np.flatnonzero(p) if sel is ALL else sel[p]

class PTXModule:
  """A parsed PTX module (parsing is cached per source text); `run` launches one of its entries."""
  def __init__(self, src: str): self._kernels = _parse(src)
  @property
  def entries(self) -> list[str]: return list(self._kernels)
  def param_layout(self, entry: str) -> list[tuple[str, str, int, int]]:
    """(name, ptx type, byte offset, size) of each parameter, naturally aligned, as they sit in the parameter buffer."""
    return list(self._kernel(entry).params)
  def param_size(self, entry: str) -> int: return self._kernel(entry).param_size
  def shared_size(self, entry: str) -> int:
    """Bytes of static shared memory the entry declares."""
    return self._kernel(entry).shared
  def max_threads(self, entry: str) -> tuple[int, int, int] | None:
    """The entry's .maxntid or .reqntid, if it declares one."""
    ntid = self._kernel(entry).ntid
    return None if ntid is None else ntid[0]
  def _kernel(self, entry: str) -> _Kernel:
    if entry not in self._kernels: raise KeyError(f"no entry {entry!r} in this module (it has {', '.join(self._kernels)})")
    return self._kernels[entry]

  def run(self, entry: str, grid=(1, 1, 1), block=(1, 1, 1), params: list | bytes = (), memory: Memory | None = None, *,
          dynamic_shared: int = 0, max_steps: int = 10_000_000, max_lanes: int = 1 << 22) -> None:
    """Runs entry over the grid; params are values in declaration order or the packed parameter buffer. Blocks run in
    batches of at most max_lanes threads; max_steps bounds the instructions executed, so a bad loop cannot hang."""
    k = self._kernel(entry)
    grid, block = ((tuple(int(x) for x in (d if isinstance(d, (tuple, list)) else (d,))) + (1, 1))[:3] for d in (grid, block))
    bt, nblocks = math.prod(block), math.prod(grid)
    if min(grid + block) < 1 or bt > 1024: raise PTXError(f"kernel {k.name}: bad launch grid {grid} block {block}")
    if k.ntid and (block != k.ntid[0] if k.ntid[1] else any(b > m for b, m in zip(block, k.ntid[0]))):
      raise PTXError(f"kernel {k.name}: block {block} violates .{'reqntid' if k.ntid[1] else 'maxntid'} {k.ntid[0]}")
    st = _State()
    st.mem, st.params = memory, _pack_params(k, params)
    st.S = -(-(k.shared + dynamic_shared) // 16) * 16
    per, steps = max(1, max_lanes // bt), [0, max_steps]
    with np.errstate(all="ignore"):
      for b0 in range(0, nblocks, per): _run_batch(k, st, b0, min(per, nblocks - b0), grid, block, steps)

def _pack_params(k: _Kernel, params) -> bytes:
  if isinstance(params, (bytes, bytearray, memoryview)):
    if len(params) < k.param_size: raise ValueError(f"kernel {k.name} needs {k.param_size} parameter bytes, got {len(params)}")
    return bytes(params)
  if len(params) != len(k.params): raise ValueError(f"kernel {k.name} takes {len(k.params)} parameters, got {len(params)}")
  buf = bytearray(k.param_size)
  for (name, ty, off, size), v in zip(k.params, params):
    t = TYPES[ty]
    if isinstance(v, (bytes, bytearray)): raw = bytes(v)
    elif t.kind == "f": raw = (_bf16_bits(_float_const(float(v), t)) if t.name == "bf16" else np.array(v, t.np)).tobytes()
    else: raw = np.array(int(v) & ((1 << t.bits) - 1), _U[t.bits]).tobytes()
    if len(raw) != size: raise ValueError(f"parameter {name} is {size} bytes, got {len(raw)}")
    buf[off:off + size] = raw
  return bytes(buf)

def _run_batch(k: _Kernel, st: _State, b0: int, nb: int, grid: tuple, block: tuple, steps: list) -> None:
  bt = math.prod(block)
  n, st.bt = nb * bt, bt
  st.n = n
  lane = np.arange(n, dtype=np.int64)
  blk, thr = b0 + lane // bt, lane % bt
  unravel = lambda i, dims: (i % dims[0], i // dims[0] % dims[1], i // (dims[0] * dims[1]))
  tid, ctaid = unravel(thr, block), unravel(blk, grid)
  special = {**{f"%tid.{c}": tid[j] for j, c in enumerate("xyz")}, **{f"%ctaid.{c}": ctaid[j] for j, c in enumerate("xyz")},
             **{f"%ntid.{c}": np.broadcast_to(np.int64(block[j]), (n,)) for j, c in enumerate("xyz")},
             **{f"%nctaid.{c}": np.broadcast_to(np.int64(grid[j]), (n,)) for j, c in enumerate("xyz")}, "%laneid": thr % 32, "%warpid": thr // 32}
  st.R = [np.zeros(n, dt) for dt in k.regs] + [None] * len(k.specials)  # np.zeros is lazily zeroed memory: unused registers are free
  for name, slot in k.specials.items(): st.R[slot] = special[name].astype(np.uint32)
  st.shared, st.sbase = np.zeros(nb * st.S, np.uint8), (lane // bt) * st.S
  R, prog, live, nlive, live_sel, upc, pcs = st.R, k.prog, None, n, ALL, 0, None
  where = lambda lanes: (unravel(b0 + lanes // bt, grid), unravel(lanes % bt, block))
  while True:
    if upc is not None: pc, sel = upc, live_sel  # converged: every live lane is at upc
    else:
      pc = int(pcs.min())
      if pc >= _WAIT:
        if pc >= _EXITED: return
        _release(k, pcs, bt, b0, grid, unravel); continue
      at = pcs == pc
      if int(np.count_nonzero(at)) == nlive: upc, pcs, sel = pc, None, live_sel
      else: sel = np.flatnonzero(at)
    kind, g, neg, arg, line = prog[pc]
    steps[0] += 1
    if steps[0] > steps[1]:
      raise PTXError(f"kernel {k.name}: gave up after {steps[1]} steps at line {line} (pc {pc}: `{k.texts[pc]}`); does a loop never end?")
    run = sel if g is None else _narrow_sel(sel, ~R[g][sel] if neg else R[g][sel])
    if kind == _OP:
      dest = pc + 1
      if run is not None and arg is not None:
        try: arg(st, run)
        except PTXFault as f:
          if f.kernel is not None: raise
          b, t = where(int(lane[run][min(f.index, len(lane[run]) - 1)]))
          raise PTXFault(f.address, f.size, f.index, why=f.why, space=f.space, kernel=k.name, line=line, block=b, thread=t) from None
    elif kind == _BRA: dest = arg
    elif kind == _EXIT:
      dest = _EXITED
      if run is not None:
        if live is None: live = np.ones(n, bool)
        live[run] = False
        if (nlive := int(np.count_nonzero(live))) == 0: return
        live_sel = np.flatnonzero(live)
    else: dest = pc + 1 if upc is not None and run is sel else pc + _WAIT  # converged lanes all arrived together
    # lanes in `run` go to dest, the rest of `sel` to the next instruction
    if run is None or dest == pc + 1: run, dest = sel, pc + 1
    if upc is not None:
      if run is sel or dest == _EXITED: upc = pc + 1 if dest == _EXITED else dest
      else:  # part of a converged group branches or waits: from here lanes keep their own pcs
        pcs = np.full(n, _EXITED, np.int64)
        pcs[live_sel], pcs[run], upc = pc + 1, dest, None
    else:
      if run is not sel: pcs[sel] = pc + 1
      pcs[run] = dest

def _release(k: _Kernel, pcs: np.ndarray, bt: int, b0: int, grid: tuple, unravel) -> None:
  """Every live lane waits at a barrier: blocks whose lanes all wait at the same one go on; any other block never will."""
  P = pcs.reshape(-1, bt)
  lo, hi = P.min(axis=1), np.where(P >= _EXITED, -1, P).max(axis=1)
  if (bad := np.flatnonzero((hi >= 0) & (lo != hi))).size:
    b = int(bad[0])
    lines = sorted({k.prog[p - _WAIT][4] for p in np.unique(P[b]) if p < _EXITED})
    raise PTXError(f"kernel {k.name}: block {unravel(b0 + b, grid)} deadlocks: its threads wait at different barriers (lines {lines})")
  waiting = pcs < _EXITED
  pcs[waiting] -= _WAIT - 1
