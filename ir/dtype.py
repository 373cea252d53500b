"""Data types, their promotion lattice, and conversion of Python values into them."""
from __future__ import annotations
import functools, math, struct
from dataclasses import dataclass, fields
from ir.switches import DEFAULT_FLOAT, DEFAULT_INT

@dataclass(frozen=True, eq=True)
class DType:
  priority: int     # orders dtypes of the same kind for promotion
  itemsize: int     # bytes of one element (of the whole vector for vector types)
  name: str
  fmt: str | None   # struct/numpy format character; None where Python has none (bfloat16, fp8)
  count: int = 1    # lanes of a vector type
  def __post_init__(self):  # dtypes are compared and hashed constantly (every UOp): both go through a precomputed key
    key = tuple(getattr(self, f.name) for f in fields(self))
    object.__setattr__(self, "_key", key)
    object.__setattr__(self, "_hash", hash(key))
  def __eq__(self, other) -> bool: return self is other or (type(other) is type(self) and self._key == other._key)
  def __hash__(self) -> int: return self._hash
  def __reduce__(self): return type(self), self._key  # rebuilt through __init__: string hashes differ between processes
  def __repr__(self) -> str: return f"dtypes.{self.name}"
  @property
  def scalar(self) -> DType: return self if self.count == 1 else getattr(dtypes, self.name[:-len(str(self.count))])
  def vec(self, n: int) -> DType:
    assert self.count == 1, f"can't vectorize {self}"
    return self if n == 1 else _vector(self, n)
  def ptr(self, size: int = -1, local: bool = False, image: Image | None = None) -> PtrDType:
    return PtrDType(self.priority, 8, f"{self.name}*", None, 1, self, size, local, image)
  @property
  def min(self):
    """The smallest value: -2**(bits-1) or 0 for ints, False for bool, -inf for every float (as tinygrad, not PyTorch's finfo.min)."""
    return dtype_min(self)
  @property
  def max(self):
    """The largest value: 2**(bits-1)-1 or 2**bits-1 for ints, True for bool, inf for every float."""
    return dtype_max(self)

@functools.cache
def _vector(scalar: DType, n: int) -> DType:
  """The n-lane vector of `scalar`, made once (lowering asks for vector types by the ten thousand)."""
  return DType(scalar.priority, scalar.itemsize * n, f"{scalar.name}{n}", None, n)

@dataclass(frozen=True)
class Image:
  """A 2-D image of `height` rows of `width` pixels of 4 elements (IMAGE=1): how a buffer is laid out in memory, and
  what a kernel pointer to it says."""
  height: int
  width: int

@dataclass(frozen=True, eq=True)
class PtrDType(DType):
  base: DType = None    # type: ignore[assignment]
  size: int = -1        # elements, -1 when unknown
  local: bool = False   # workgroup-shared memory rather than global memory
  image: Image | None = None  # a 2-D image of 4-element pixels rather than plain memory
  def __repr__(self) -> str:
    return f"{self.base!r}.ptr({self.size}{', local=True' if self.local else ''}{f', image={self.image}' if self.image else ''})"

class _DTypesMeta(type):
  @property
  def default_float(cls) -> DType: return dtype_named(DEFAULT_FLOAT.value)
  @property
  def default_int(cls) -> DType: return dtype_named(DEFAULT_INT.value)

class dtypes(metaclass=_DTypesMeta):
  void = DType(-1, 0, "void", None)
  bool = DType(0, 1, "bool", "?")
  int8 = DType(1, 1, "char", "b")
  uint8 = DType(2, 1, "uchar", "B")
  int16 = DType(3, 2, "short", "h")
  uint16 = DType(4, 2, "ushort", "H")
  int32 = DType(5, 4, "int", "i")
  uint32 = DType(6, 4, "uint", "I")
  int64 = DType(7, 8, "long", "q")
  uint64 = DType(8, 8, "ulong", "Q")
  fp8e4m3 = DType(9, 1, "fp8e4m3", None)
  fp8e5m2 = DType(10, 1, "fp8e5m2", None)
  float16 = DType(11, 2, "half", "e")
  bfloat16 = DType(12, 2, "bfloat16", None)
  float32 = DType(13, 4, "float", "f")
  float64 = DType(14, 8, "double", "d")
  half, float, double = float16, float32, float64
  char, uchar, short, ushort, int, uint, long, ulong = int8, uint8, int16, uint16, int32, uint32, int64, uint64

  @staticmethod
  def is_float(t: DType) -> bool: return t.scalar in FLOATS
  @staticmethod
  def is_int(t: DType) -> bool: return t.scalar in INTS
  @staticmethod
  def is_unsigned(t: DType) -> bool: return t.scalar in UINTS
  @staticmethod
  def is_bool(t: DType) -> bool: return t.scalar == dtypes.bool

  @staticmethod
  def from_py(x) -> DType:
    """The dtype a Python value becomes: bool, default_int, default_float, or the promotion of a sequence's items."""
    if isinstance(x, (list, tuple)): return least_upper_dtype(*(dtypes.from_py(v) for v in x)) if x else dtypes.default_float
    if isinstance(x, bool): return dtypes.bool
    if isinstance(x, int): return dtypes.default_int if fits(x, dtypes.default_int) else check_fits(x, dtypes.int64)  # as PyTorch: int64 when needed
    if isinstance(x, float): return dtypes.default_float
    raise TypeError(f"can't infer a dtype from {type(x).__name__}")

  @staticmethod
  def min(t: DType): return dtype_min(t)
  @staticmethod
  def max(t: DType): return dtype_max(t)
  @staticmethod
  def fields() -> dict[str, DType]: return dict(DTYPES_BY_NAME)

SCALARS = (dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64,
           dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
FLOATS = frozenset((dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64))
UINTS = frozenset((dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64))
SINTS = frozenset((dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64))
INTS = UINTS | SINTS
# every spelling a user may pass: "float32", "float", "half", "int64", "long", ...
DTYPES_BY_NAME: dict[str, DType] = {k: v for k, v in vars(dtypes).items() if isinstance(v, DType) and k != "void"}

def dtype_named(name: str) -> DType:
  if (dt := DTYPES_BY_NAME.get(name)) is None: raise ValueError(f"unknown dtype {name!r}; known: {sorted(DTYPES_BY_NAME)}")
  return dt

def to_dtype(x: DType | str) -> DType: return x if isinstance(x, DType) else dtype_named(x)

# PyTorch-style promotion: each dtype lists the dtypes directly above it; the result is the lowest common upper bound
_PROMOTES_TO: dict[DType, tuple[DType, ...]] = {
  dtypes.bool: (dtypes.int8, dtypes.uint8), dtypes.int8: (dtypes.int16,), dtypes.int16: (dtypes.int32,), dtypes.int32: (dtypes.int64,),
  dtypes.int64: (dtypes.fp8e4m3, dtypes.fp8e5m2), dtypes.uint8: (dtypes.int16, dtypes.uint16), dtypes.uint16: (dtypes.int32, dtypes.uint32),
  dtypes.uint32: (dtypes.int64, dtypes.uint64), dtypes.uint64: (dtypes.fp8e4m3, dtypes.fp8e5m2),
  dtypes.fp8e4m3: (dtypes.float16, dtypes.bfloat16), dtypes.fp8e5m2: (dtypes.float16, dtypes.bfloat16),
  dtypes.float16: (dtypes.float32,), dtypes.bfloat16: (dtypes.float32,), dtypes.float32: (dtypes.float64,), dtypes.float64: ()}

@functools.cache
def _upper_set(t: DType) -> frozenset[DType]:
  return frozenset([t]).union(*(_upper_set(u) for u in _PROMOTES_TO[t]))

def least_upper_dtype(*ts: DType) -> DType:
  common = frozenset.intersection(*(_upper_set(t.scalar) for t in ts))
  return min(common, key=lambda t: t.priority)

def least_upper_float(t: DType) -> DType: return t if dtypes.is_float(t) else least_upper_dtype(t, dtypes.default_float)

def dtype_min(t: DType):
  t = t.scalar  # a vector's lanes have the range of its scalar
  if dtypes.is_int(t): return 0 if dtypes.is_unsigned(t) else -2**(8*t.itemsize-1)
  return False if t == dtypes.bool else -math.inf
def dtype_max(t: DType):
  t = t.scalar
  if dtypes.is_int(t): return 2**(8*t.itemsize) - 1 if dtypes.is_unsigned(t) else 2**(8*t.itemsize-1) - 1
  return True if t == dtypes.bool else math.inf

# C names of the scalar types a kernel argument can have (cffi signatures)
C_TYPES = {dtypes.int32: "int32_t", dtypes.uint32: "uint32_t", dtypes.int64: "int64_t", dtypes.float32: "float", dtypes.float64: "double"}

def bits_of(x, t: DType) -> int:
  """The bit pattern of value `x` stored as scalar dtype `t` (how a kernel argument travels in a constant buffer)."""
  if not dtypes.is_float(t): return int(x) & (2**(8*t.itemsize) - 1)
  return int.from_bytes(struct.pack({2: "e", 4: "f", 8: "d"}[t.itemsize], x), "little")

def fits(x, t: DType) -> bool:
  """Whether a Python number is representable by dtype `t` without wrapping (any number fits a float dtype)."""
  return not dtypes.is_int(t) or isinstance(x, float) or dtype_min(t) <= x <= dtype_max(t)

def check_fits(x, t: DType) -> DType:
  """`t`, after making sure Python number `x` fits it: ints outside an integer dtype's range raise instead of wrapping."""
  if not fits(x, t): raise OverflowError(f"{x} is out of range for {t.name} [{dtype_min(t)}, {dtype_max(t)}]")
  return t

def truncate(x, t: DType):
  """`x` as a value of dtype `t` would hold it: ints wrap, floats round to the format's precision."""
  if t == dtypes.bool: return bool(x)
  if dtypes.is_int(t):
    if isinstance(x, float): x = int(x) if math.isfinite(x) else 0
    x = int(x) & (2**(8*t.itemsize) - 1)
    return x - 2**(8*t.itemsize) if not dtypes.is_unsigned(t) and x >= 2**(8*t.itemsize-1) else x
  x = float(x)
  if t == dtypes.float32: return struct.unpack("f", struct.pack("f", x))[0] if abs(x) < 3.4028235677973366e38 or not math.isfinite(x) else math.copysign(math.inf, x)
  if t == dtypes.float16: return struct.unpack("e", struct.pack("e", x))[0] if abs(x) < 65520.0 or not math.isfinite(x) else math.copysign(math.inf, x)
  if t == dtypes.bfloat16: return bf16_to_float(float_to_bf16(x))
  return x

def float_to_bf16(x: float) -> int:
  """The bfloat16 bit pattern nearest to `x` (round half to even)."""
  bits = struct.unpack("I", struct.pack("f", x))[0] if abs(x) < 3.4028235677973366e38 or not math.isfinite(x) else (0xff800000 if x < 0 else 0x7f800000)
  if math.isnan(x): return 0x7fc0
  return ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) & 0xffff

def bf16_to_float(b: int) -> float: return struct.unpack("f", struct.pack("I", b << 16))[0]

def as_const(x, t: DType):
  """A Python constant of the right kind for dtype `t` (bool, int or float), wrapped/rounded like the dtype."""
  return truncate(x, t.scalar)
