"""The operation set of the UOp graph, grouped by what each layer needs to know about them."""
from __future__ import annotations
import enum, math
from ir.dtype import DType, dtypes, truncate

class Ops(enum.Enum):
  # leaves of tensor graphs
  BUFFER = enum.auto(); CONST = enum.auto(); DEVICE = enum.auto(); DEFINE_VAR = enum.auto(); BIND = enum.auto()
  ARANGE = enum.auto()  # 0, 1, ..., n-1 along one axis: arg n in tensor graphs; in kernels the index through a VIEW
  TAKE = enum.auto()    # out[.., i, ..] = x[.., idx[.., i, ..], ..] along arg=dim (tensor graphs); in kernels: a LOAD at a computed index
  # movement (tensor graphs only; the scheduler folds them into views)
  RESHAPE = enum.auto(); PERMUTE = enum.auto(); EXPAND = enum.auto(); PAD = enum.auto(); SHRINK = enum.auto(); FLIP = enum.auto()
  # tensor-graph markers
  CONTIGUOUS = enum.auto(); CONTIGUOUS_BACKWARD = enum.auto(); DETACH = enum.auto(); COPY = enum.auto(); ASSIGN = enum.auto()
  MULTI = enum.auto()  # one logical tensor over several devices: src = its part on each device, arg = the axis split (None: copies)
  GRAD_OVERRIDE = enum.auto()  # value src[0]; its gradient with respect to src[1:] is arg(grad, *src) instead of src[0]'s own
  # reduction over axes (tensor graphs and kernel ASTs); REDUCE is its lowered form over loop ranges
  REDUCE_AXIS = enum.auto(); REDUCE = enum.auto()
  # unary
  EXP2 = enum.auto(); LOG2 = enum.auto(); SIN = enum.auto(); SQRT = enum.auto(); RECIP = enum.auto(); NEG = enum.auto(); TRUNC = enum.auto()
  CAST = enum.auto(); BITCAST = enum.auto()
  # binary
  ADD = enum.auto(); SUB = enum.auto(); MUL = enum.auto(); FDIV = enum.auto(); IDIV = enum.auto(); MOD = enum.auto(); MAX = enum.auto()
  CMPLT = enum.auto(); CMPNE = enum.auto(); CMPEQ = enum.auto(); AND = enum.auto(); OR = enum.auto(); XOR = enum.auto(); SHL = enum.auto(); SHR = enum.auto()
  # ternary
  WHERE = enum.auto(); MULACC = enum.auto()
  # kernel ASTs
  SINK = enum.auto(); DEFINE_GLOBAL = enum.auto(); VIEW = enum.auto(); LOAD = enum.auto(); STORE = enum.auto(); VALID = enum.auto()
  # linear programs
  RANGE = enum.auto(); ENDRANGE = enum.auto(); SPECIAL = enum.auto(); DEFINE_ACC = enum.auto(); INDEX = enum.auto()
  DEFINE_LOCAL = enum.auto(); BARRIER = enum.auto(); IF = enum.auto(); ENDIF = enum.auto(); VECTORIZE = enum.auto(); GEP = enum.auto()
  WMMA = enum.auto()  # a tensor-core step D = A @ B + C (src A, B, C fragments; wgmma: A, B's shared buffer, C, B's byte offset)
  def __repr__(self) -> str: return f"Ops.{self.name}"
  __hash__ = object.__hash__  # members are singletons; Enum's own hash (of the name, in Python) is the hottest call in lowering

# VALID(view) with this arg guards a load that already reads zero where the view is invalid (stored padding): the
# condition isn't needed for the value, it only tells a reduction which of its steps add nothing
STORED_ZEROS = "stored zeros"

UNARY = {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.NEG, Ops.TRUNC}
BINARY = {Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR}
TERNARY = {Ops.WHERE, Ops.MULACC}
ALU = UNARY | BINARY | TERNARY
ELEMENTWISE = ALU | {Ops.CAST, Ops.BITCAST}
MOVEMENT = {Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP}
COMMUTATIVE = {Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR}
COMPARISON = {Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ}
TRANSCENDENTAL = {Ops.EXP2, Ops.LOG2, Ops.SIN}
# f(0, 0, ...) == 0: such ops may be evaluated on the zero a padded view reads without changing the result
ZERO_PRESERVING = {Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.NEG, Ops.SQRT, Ops.SIN, Ops.TRUNC, Ops.CMPLT, Ops.CMPNE, Ops.AND, Ops.OR,
                   Ops.XOR, Ops.SHL, Ops.SHR, Ops.WHERE, Ops.MULACC, Ops.CAST, Ops.BITCAST}
# the value a reduction starts from
def reduce_identity(op: Ops, dt: DType):
  if op is Ops.ADD: return truncate(0, dt)
  if op is Ops.MUL: return truncate(1, dt)
  if op is Ops.MAX: return dtypes.min(dt) if dt != dtypes.bool else False
  raise ValueError(f"{op} is not a reduction")

def _idiv(a: int, b: int) -> int: return 0 if b == 0 else abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
def _imod(a: int, b: int) -> int: return 0 if b == 0 else a - _idiv(a, b) * b
def _exp2(x: float) -> float:
  try: return 2.0 ** x
  except OverflowError: return math.inf
def _log2(x: float) -> float: return math.log2(x) if x > 0 else (-math.inf if x == 0 else math.nan)
def _sin(x: float) -> float: return math.sin(x) if math.isfinite(x) else math.nan
def _recip(x: float) -> float: return 1 / x if x != 0 else math.copysign(math.inf, x)
def _fdiv(a: float, b: float) -> float:
  if b != 0: return a / b
  return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1.0, b)
def _shift(a: int, b: int, left: bool, dt: DType) -> int:
  b &= dt.itemsize * 8 - 1
  return a << b if left else (a >> b if a >= 0 or not dtypes.is_unsigned(dt) else (a % 2**(8*dt.itemsize)) >> b)

# C semantics of each ALU op on Python scalars: integer division truncates, shifts take the amount modulo the width
PYTHON_ALU = {
  Ops.EXP2: _exp2, Ops.LOG2: _log2, Ops.SIN: _sin, Ops.SQRT: lambda x: math.sqrt(x) if x >= 0 else math.nan, Ops.RECIP: _recip,
  Ops.NEG: lambda x: (not x) if isinstance(x, bool) else -x, Ops.TRUNC: lambda x: math.trunc(x) if math.isfinite(x) else x,
  Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b, Ops.FDIV: _fdiv, Ops.IDIV: _idiv, Ops.MOD: _imod,
  Ops.MAX: lambda a, b: a if (a != a) or a > b else b, Ops.CMPLT: lambda a, b: a < b, Ops.CMPNE: lambda a, b: a != b,
  Ops.CMPEQ: lambda a, b: a == b, Ops.AND: lambda a, b: a & b, Ops.OR: lambda a, b: a | b, Ops.XOR: lambda a, b: a ^ b,
  Ops.WHERE: lambda c, a, b: a if c else b, Ops.MULACC: lambda a, b, c: a * b + c}

def exec_alu(op: Ops, dtype: DType, operands: tuple, operand_dtype: DType | None = None):
  """Evaluate one ALU op on Python scalars and wrap the result into `dtype`."""
  if op in (Ops.SHL, Ops.SHR): return truncate(_shift(operands[0], operands[1], op is Ops.SHL, operand_dtype or dtype), dtype)
  if op is Ops.TRUNC and dtypes.is_int(dtype): return operands[0]
  return truncate(PYTHON_ALU[op](*operands), dtype)
