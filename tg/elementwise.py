"""Elementwise Tensor ops: arithmetic and its operators, comparisons, bitwise ops, casts, math functions and
activations. Everything is built from the primitive ALU ops of the IR."""
from __future__ import annotations
import decimal, math, struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable
from ir.dtype import DType, bits_of, dtypes, least_upper_dtype, least_upper_float, to_dtype, truncate
from ir.ops import Ops
from ir.uop import UOp
from ir.helpers import prod
from tg.schedule import contiguous_region
from tg.fp8 import FP8, float_to_fp8, fp8_to_float

PI_2_LO = 6.123233995736766e-17  # pi/2 minus the float64 nearest it

if TYPE_CHECKING: from tg.tensor import Tensor

LOG2_E, LN_2 = 1 / math.log(2), math.log(2)

def _ln2_split() -> tuple[float, float]:
  """ln 2 as LN2_HI + LN2_LO in float64: LN2_HI with its low 21 mantissa bits zero, so n * LN2_HI is exact for
  |n| < 2**21; LN2_LO the rest, from ln 2 to 40 digits (math.log(2)'s own rounding would be n times too big an error)."""
  exact = decimal.Context(prec=40).ln(decimal.Decimal(2))
  hi = struct.unpack("<d", struct.pack("<Q", bits_of(float(exact), dtypes.float64) & ~((1 << 21) - 1)))[0]
  return hi, float(exact - decimal.Decimal(hi))
LN2_HI, LN2_LO = _ln2_split()
SHIFTER_F64 = 1.5 * 2.0 ** 52  # its sum with an integer-valued float64 n holds n in its low bits

def _by_zero_is_zero(quotient: Tensor, divisor: Tensor) -> Tensor:
  """Integer division and modulo by zero give 0 as in numpy (PyTorch raises, which would need the divisor read back)."""
  return (divisor == 0).where(0, quotient)

@dataclass(frozen=True)
class _TensorGrad:
  """A GRAD_OVERRIDE rule written with Tensors: fn(g, out, *inputs) gives the gradients of the inputs (None: none)."""
  fn: Callable
  def __call__(self, g: UOp, *src: UOp) -> tuple[UOp, ...]:
    from tg.tensor import Tensor
    return tuple(None if t is None else t.uop for t in self.fn(*(Tensor(u) for u in (g, *src))))

def _with_grad(out: Tensor, fn: Callable, *inputs: Tensor) -> Tensor:
  """`out`, whose gradient with respect to `inputs` is fn(g, out, *inputs) rather than that of the graph computing it."""
  return out._new(UOp(Ops.GRAD_OVERRIDE, out.dtype, (out.uop, *(t.uop for t in inputs)), _TensorGrad(fn)), *inputs)

def _pow_grad(g: Tensor, out: Tensor, base: Tensor, exp: Tensor) -> tuple[Tensor, Tensor]:
  """PyTorch's: exp * base**(exp-1), 0 where exp == 0; out * log(base), 0 where base == 0 and exp >= 0."""
  return (g * (exp == 0).where(0, exp * base.pow(exp - 1)), g * ((base == 0) & (exp >= 0)).where(0, out * base.log()))
def _sigmoid_grad(g: Tensor, s: Tensor, x: Tensor) -> tuple[Tensor]: return (g * s * (1 - s),)
def _relu_grad(g: Tensor, out: Tensor, x: Tensor) -> tuple[Tensor]: return ((out <= 0).where(0, g),)  # out <= 0 exactly where x <= 0
def _tanh_grad(g: Tensor, t: Tensor, x: Tensor) -> tuple[Tensor]: return (g * (1 - t * t),)
def _exp_grad(g: Tensor, out: Tensor, x: Tensor) -> tuple[Tensor]: return (g * out,)
def _erf_grad(g: Tensor, y: Tensor, x: Tensor) -> tuple[Tensor]: return (g * (2 / math.sqrt(math.pi)) * (-(x * x)).exp(),)

class ElementwiseMixin:
  __slots__ = ()

  # ---------------- plumbing ----------------
  def _unary(self, op: Ops) -> Tensor:
    if self.dtype in FP8: return self.cast(dtypes.float32)._unary(op).cast(self.dtype)
    return self._new(self.uop.alu(op))
  def _binary(self, op: Ops, x: Any, reverse: bool = False) -> Tensor:
    dt = least_upper_dtype(self.dtype, x.dtype) if isinstance(x, type(self)) else self._scalar_dtype(x) if isinstance(x, (bool, int, float)) else None
    if dt in FP8:  # fp8 math happens in float32, rounded back after each op
      xf = x.cast(dtypes.float32) if isinstance(x, type(self)) else x
      out = self.cast(dtypes.float32)._binary(op, xf, reverse)
      return out if out.dtype == dtypes.bool else out.cast(dt)
    a, b = self._broadcasted(x, reverse)
    return a._new(a.uop.alu(op, b.uop), b)
  def _float(self) -> Tensor: return self if dtypes.is_float(self.dtype) else self.cast(least_upper_float(self.dtype))
  def _require(self, kind: str, ok: bool, what: str) -> None:
    if not ok: raise RuntimeError(f"{what} is only defined for {kind} tensors, got {self.dtype}")  # PyTorch's type

  def cast(self, dtype: DType | str) -> Tensor:
    dt = to_dtype(dtype)
    if dt == self.dtype: return self
    if self.dtype in FP8: return fp8_to_float(self).cast(dt)
    if dt in FP8: return float_to_fp8(self, dt)
    return self._new(self.uop.cast(dt))
  def bitcast(self, dtype: DType | str) -> Tensor:
    """Reinterpret the bytes (the last dim scales when the sizes differ). On a realized contiguous tensor this is
    a view of the same memory, so it works on devices that run no kernels (DISK)."""
    dt = to_dtype(dtype)
    if dt != self.dtype and (region := contiguous_region(self.uop)) is not None and (self.shape[-1:] and (self.shape[-1] * self.dtype.itemsize) % dt.itemsize == 0 or not self.shape and dt.itemsize == self.dtype.itemsize):
      shape = (*self.shape[:-1], self.shape[-1] * self.dtype.itemsize // dt.itemsize) if self.shape else ()
      view = region.base.view(prod(shape), dt, region.offset)
      return self._new(UOp(Ops.BUFFER, dt, (), (view,)).reshape(shape))
    if dt.itemsize != self.dtype.itemsize:
      if self.ndim == 0 or (self.shape[-1] * self.dtype.itemsize) % dt.itemsize: raise ValueError(f"can't bitcast {self.dtype} {self.shape} to {dt}")
      return self._bitcast_resize(dt)
    return self if dt == self.dtype else self._new(self.uop.bitcast(dt))
  def _bitcast_resize(self, dt: DType) -> Tensor:
    """Bitcast between sizes (e.g. 4 uint8 -> 1 uint32) by shifting bytes, little-endian."""
    small, big = (self.dtype, dt) if self.dtype.itemsize < dt.itemsize else (dt, self.dtype)
    ratio = big.itemsize // small.itemsize
    u_small, u_big = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32}[small.itemsize], {2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}[big.itemsize]
    if self.dtype.itemsize < dt.itemsize:
      parts = self.bitcast(u_small).reshape(*self.shape[:-1], self.shape[-1] // ratio, ratio).cast(u_big)
      shifts = [parts[..., i] << (8 * small.itemsize * i) for i in range(ratio)]
      out = shifts[0]
      for s in shifts[1:]: out = out | s
      return out.bitcast(dt)
    wide = self.bitcast(u_big)
    pieces = [((wide >> (8 * small.itemsize * i)) & (2 ** (8 * small.itemsize) - 1)).cast(u_small) for i in range(ratio)]
    return type(self).stack(*pieces, dim=-1).reshape(*self.shape[:-1], self.shape[-1] * ratio).bitcast(dt)
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def bfloat16(self) -> Tensor: return self.cast(dtypes.bfloat16)
  def double(self) -> Tensor: return self.cast(dtypes.float64)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
  def long(self) -> Tensor: return self.cast(dtypes.int64)
  def short(self) -> Tensor: return self.cast(dtypes.int16)
  def bool(self) -> Tensor: return self.cast(dtypes.bool)

  # ---------------- arithmetic ----------------
  def add(self, x, reverse: bool = False) -> Tensor:
    return self._binary(Ops.OR if self._result_is_bool(x) else Ops.ADD, x, reverse)
  def sub(self, x, reverse: bool = False) -> Tensor:
    if self._result_is_bool(x): raise RuntimeError("subtraction of bool tensors is not defined; use logical_xor or ^")
    return self._binary(Ops.SUB, x, reverse)
  def mul(self, x, reverse: bool = False) -> Tensor:
    return self._binary(Ops.AND if self._result_is_bool(x) else Ops.MUL, x, reverse)
  def _result_is_bool(self, x) -> bool:
    return self.dtype == dtypes.bool and (isinstance(x, bool) or getattr(x, "dtype", None) == dtypes.bool)
  def div(self, x, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
    """True division (ints become floats); rounding_mode "trunc" or "floor" rounds the quotient like torch."""
    a, b = self._broadcasted(x, reverse)
    if rounding_mode == "trunc":
      return _by_zero_is_zero(a._new(a.uop.alu(Ops.IDIV, b.uop), b), b) if dtypes.is_int(a.dtype) else (a._float() / b._float()).trunc().cast(a.dtype)
    if rounding_mode == "floor": return a.floordiv(b)
    if rounding_mode is not None: raise RuntimeError(f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    a, b = a._float(), b._float()
    return a._new(a.uop.alu(Ops.FDIV, b.uop), b)
  def floordiv(self, x, reverse: bool = False) -> Tensor:
    """Python's floor division (rounds toward negative infinity); an integer divided by zero gives 0, as in numpy."""
    a, b = self._broadcasted(x, reverse)
    if not dtypes.is_int(a.dtype): return (a / b).floor()
    q = a._new(a.uop.alu(Ops.IDIV, b.uop), b)
    r = a - q * b
    return _by_zero_is_zero(((r != 0) & ((r < 0) != (b < 0))).where(q - 1, q) if not dtypes.is_unsigned(a.dtype) else q, b)
  def mod(self, x, reverse: bool = False) -> Tensor:
    """Python's modulo (the result takes the divisor's sign); an integer modulo zero gives 0, as in numpy."""
    a, b = self._broadcasted(x, reverse)
    if not dtypes.is_int(a.dtype): return a - (a / b).floor() * b
    r = a._new(a.uop.alu(Ops.MOD, b.uop), b)
    return _by_zero_is_zero(((r != 0) & ((r < 0) != (b < 0))).where(r + b, r) if not dtypes.is_unsigned(a.dtype) else r, b)
  def fmod(self, x) -> Tensor:
    """C's remainder (the result takes the dividend's sign); integers modulo zero give 0."""
    a, b = self._broadcasted(x)
    if dtypes.is_int(a.dtype): return _by_zero_is_zero(a._new(a.uop.alu(Ops.MOD, b.uop), b), b)
    return a - (a / b).trunc() * b
  def neg(self) -> Tensor: return self.logical_not() if self.dtype == dtypes.bool else self._unary(Ops.NEG)
  def reciprocal(self) -> Tensor: return self._float()._unary(Ops.RECIP)
  def pow(self, x, reverse: bool = False) -> Tensor:
    """Values as C's pow and np.power of two arrays (NaN for a negative base and a non-integer exponent, 0**0 = 1, 1**nan = 1,
    (-1)**inf = 1, (-0.)**-1 = -inf, (-inf)**0.5 = inf where numpy's and PyTorch's sqrt shortcut for a scalar 0.5 give NaN);
    gradients as PyTorch's formulas. Integers to integer powers stay integers
    (to a negative power: 0 unless the base is 1 or -1, as PyTorch; a negative Python int exponent is refused as PyTorch)."""
    if not reverse and isinstance(x, (int, float)) and not isinstance(x, bool):
      if isinstance(x, float) and not dtypes.is_float(self.dtype): return self._float().pow(x)  # a float exponent makes a float
      if isinstance(x, int) and x < 0 and dtypes.is_int(self.dtype): raise RuntimeError("integers to negative integer powers are not allowed")
      if x == 0: return self.isfinite().where(self * 0 + 1, 1).cast(self.dtype)  # 1, still in the autograd graph
      if x == 1: return self
      if x == 2: return self * self
      if x == 3: return self * self * self
      if x == -1: return self.reciprocal()
      if isinstance(x, int) and dtypes.is_int(self.dtype): return self._int_pow(x)
    base, exp = self._broadcasted(x, reverse)
    if dtypes.is_int(base.dtype) and dtypes.is_int(exp.dtype):
      out = base.cast(dtypes.float64).pow(exp.cast(dtypes.float64)).round()
      return ((exp < 0) & (base == 0)).where(0, out).cast(base.dtype)  # 0 ** -n would be inf
    base, exp = base._float(), exp._float()
    if isinstance(x, float) and x == 0.5 and not reverse: out = (base == -math.inf).where(math.inf, base.sqrt())  # sqrt is exact; np.power(-inf, 0.5) is inf
    else: out = base._real_pow(exp)
    return _with_grad(out, _pow_grad, base, exp)
  def _real_pow(self, exp: Tensor) -> Tensor:
    """self ** exp for floats of one shape, by exp2(exp * log2|self|) and the sign rules of C's pow."""
    mag = (self.abs().log2() * exp).exp2()
    is_int = exp == exp.trunc()
    odd = is_int & ((exp.abs() % 2) == 1)
    sign_bit = (self < 0) | ((self == 0) & (self.reciprocal() < 0))  # -0. too: (-0.)**-1 is -inf
    out = (sign_bit & odd).where(-mag, mag)
    out = ((self < 0) & (self != -math.inf) & is_int.logical_not()).where(math.nan, out)
    return ((exp == 0) | (self == 1) | ((self == -1) & exp.isinf())).where(1.0, out)
  def _int_pow(self, n: int) -> Tensor:
    out, sq = None, self
    while n:
      if n & 1: out = sq if out is None else out * sq
      n >>= 1
      if n: sq = sq * sq
    return out
  def maximum(self, x) -> Tensor:
    a, b = self._broadcasted(x)
    if a.dtype == dtypes.bool: return a | b
    return a._new(a.uop.alu(Ops.MAX, b.uop), b)
  def minimum(self, x) -> Tensor:
    a, b = self._broadcasted(x)
    if a.dtype == dtypes.bool: return a & b
    if dtypes.is_float(a.dtype): return -((-a).maximum(-b))
    return (a < b).where(a, b)
  def where(self, x, y) -> Tensor:
    """x where self is true, else y (self is the condition)."""
    cond = self if self.dtype == dtypes.bool else self.cast(dtypes.bool)
    if not isinstance(x, type(self)) and not isinstance(y, type(self)):
      x = type(self)(UOp.const(least_upper_dtype(dtypes.from_py(x), dtypes.from_py(y)), x, self.device))
    x_t, y_t = x._broadcasted(y) if isinstance(x, type(self)) else y._broadcasted(x, reverse=True)
    cond, x_t = cond._broadcasted(x_t, match_dtype=False)
    cond, y_t = cond._broadcasted(y_t, match_dtype=False)
    return x_t._new(cond.uop.alu(Ops.WHERE, x_t.uop, y_t.uop), y_t, cond)
  def lerp(self, end, weight) -> Tensor: return self + (end - self) * weight
  def clamp(self, min_=None, max_=None) -> Tensor:
    """min(max(self, min_), max_) (max_ wins if min_ > max_; NaN stays NaN). The gradient passes where min_ <= self <= max_,
    bounds included, as PyTorch; a tensor bound gets it where it was chosen."""
    if min_ is None and max_ is None: raise RuntimeError("clamp needs at least one of min_ and max_")
    out = self if min_ is None else (self < min_).where(min_, self)
    return out if max_ is None else (out > max_).where(max_, out)
  clip = clamp
  def copysign(self, other) -> Tensor:
    a, b = self._float()._broadcasted(other)
    return ((b < 0) | ((b == 0) & (1 / b < 0))).where(-a.abs(), a.abs())
  def logaddexp(self, other) -> Tensor:
    a, b = self._float()._broadcasted(other)
    m = a.maximum(b)
    return m + ((a - m).exp() + (b - m).exp()).log()

  # ---------------- comparisons and logic ----------------
  def __lt__(self, x) -> Tensor: return self._binary(Ops.CMPLT, x)
  def __gt__(self, x) -> Tensor: return self._binary(Ops.CMPLT, x, reverse=True)
  def __le__(self, x) -> Tensor:
    a, b = self._broadcasted(x)
    return (a < b) | (a == b) if dtypes.is_float(a.dtype) else (b < a).logical_not()
  def __ge__(self, x) -> Tensor:
    a, b = self._broadcasted(x)
    return (b < a) | (a == b) if dtypes.is_float(a.dtype) else (a < b).logical_not()
  def __eq__(self, x) -> Tensor: return self._binary(Ops.CMPEQ, x)  # type: ignore[override]
  def __ne__(self, x) -> Tensor: return self._binary(Ops.CMPNE, x)  # type: ignore[override]
  def eq(self, x) -> Tensor: return self == x
  def ne(self, x) -> Tensor: return self != x
  def logical_not(self) -> Tensor: return self._binary(Ops.CMPNE, True) if self.dtype == dtypes.bool else self == 0
  def isnan(self) -> Tensor: return self != self
  def isinf(self, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
    return ((self == math.inf) & detect_positive) | ((self == -math.inf) & detect_negative)
  def isfinite(self) -> Tensor: return (self.isinf() | self.isnan()).logical_not()
  def isclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    a, b = self._broadcasted(other)
    close = (a == b) | (a.isfinite() & b.isfinite() & ((a - b).abs() <= atol + rtol * b.abs()))
    return close | (a.isnan() & b.isnan()) if equal_nan else close
  def allclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

  # ---------------- bitwise ----------------
  def _bitwise(self, op: Ops, x, reverse: bool = False) -> Tensor:
    out = self._binary(op, x, reverse)
    self._require("integer or bool", dtypes.is_int(out.dtype) or out.dtype == dtypes.bool, op.name.lower())
    return out
  def bitwise_and(self, x) -> Tensor: return self._bitwise(Ops.AND, x)
  def bitwise_or(self, x) -> Tensor: return self._bitwise(Ops.OR, x)
  def bitwise_xor(self, x) -> Tensor: return self._bitwise(Ops.XOR, x)
  def bitwise_not(self) -> Tensor:
    self._require("integer or bool", dtypes.is_int(self.dtype) or self.dtype == dtypes.bool, "bitwise_not")
    return self.logical_not() if self.dtype == dtypes.bool else self ^ -1 if not dtypes.is_unsigned(self.dtype) else self ^ (2 ** (8 * self.dtype.itemsize) - 1)
  def lshift(self, x, reverse: bool = False) -> Tensor:
    """self << x on integers; a shift by a negative amount or by at least the bit width gives 0, as PyTorch."""
    return self._shift(Ops.SHL, x, reverse)
  def rshift(self, x, reverse: bool = False) -> Tensor:
    """self >> x on integers (arithmetic for signed); a shift by a negative amount or by at least the bit width gives
    the sign (-1 or 0), as PyTorch."""
    return self._shift(Ops.SHR, x, reverse)
  def _shift(self, op: Ops, x, reverse: bool) -> Tensor:
    what = "<<" if op is Ops.SHL else ">>"
    self._require("integer", dtypes.is_int(self.dtype), what)
    value, amount = self._broadcasted(x, reverse)
    value._require("integer", dtypes.is_int(value.dtype), what)
    out = value._new(value.uop.alu(op, amount.uop), amount)
    bits = 8 * value.dtype.itemsize
    if isinstance(x, int) and not reverse and 0 <= x < bits: return out
    outside = (amount >= bits) if dtypes.is_unsigned(amount.dtype) else (amount < 0) | (amount >= bits)  # the hardware's result is undefined there
    fill = (value < 0).where(-1, 0).cast(value.dtype) if op is Ops.SHR and not dtypes.is_unsigned(value.dtype) else 0
    return outside.where(fill, out)

  # ---------------- operators ----------------
  def __add__(self, x): return self.add(x)
  def __radd__(self, x): return self.add(x, True)
  def __sub__(self, x): return self.sub(x)
  def __rsub__(self, x): return self.sub(x, True)
  def __mul__(self, x): return self.mul(x)
  def __rmul__(self, x): return self.mul(x, True)
  def __truediv__(self, x): return self.div(x)
  def __rtruediv__(self, x): return self.div(x, True)
  def __floordiv__(self, x): return self.floordiv(x)
  def __rfloordiv__(self, x): return self.floordiv(x, True)
  def __mod__(self, x): return self.mod(x)
  def __rmod__(self, x): return self.mod(x, True)
  def __pow__(self, x): return self.pow(x)
  def __rpow__(self, x): return self.pow(x, True)
  def __matmul__(self, x): return self.matmul(x)
  def __rmatmul__(self, x): return x.matmul(self) if hasattr(x, "matmul") else self._as_tensor(x).matmul(self)
  def __and__(self, x): return self._bitwise(Ops.AND, x)
  def __rand__(self, x): return self._bitwise(Ops.AND, x, True)
  def __or__(self, x): return self._bitwise(Ops.OR, x)
  def __ror__(self, x): return self._bitwise(Ops.OR, x, True)
  def __xor__(self, x): return self._bitwise(Ops.XOR, x)
  def __rxor__(self, x): return self._bitwise(Ops.XOR, x, True)
  def __lshift__(self, x): return self.lshift(x)
  def __rshift__(self, x): return self.rshift(x)
  def __rlshift__(self, x): return self.lshift(x, True)
  def __rrshift__(self, x): return self.rshift(x, True)
  def __neg__(self): return self.neg()
  def __invert__(self): return self.bitwise_not()
  def __abs__(self): return self.abs()
  def _inplace(self, out: Tensor) -> Tensor: return self.assign(out)
  def __iadd__(self, x): return self._inplace(self + x)
  def __isub__(self, x): return self._inplace(self - x)
  def __imul__(self, x): return self._inplace(self * x)
  def __itruediv__(self, x): return self._inplace(self / x)
  def __ifloordiv__(self, x): return self._inplace(self // x)
  def __imod__(self, x): return self._inplace(self % x)
  def __ipow__(self, x): return self._inplace(self ** x)
  def __iand__(self, x): return self._inplace(self & x)
  def __ior__(self, x): return self._inplace(self | x)
  def __ixor__(self, x): return self._inplace(self ^ x)
  def __ilshift__(self, x): return self._inplace(self << x)
  def __irshift__(self, x): return self._inplace(self >> x)
  def __imatmul__(self, x): return self._inplace(self @ x)
  def _as_tensor(self, x) -> Tensor:
    return x if isinstance(x, type(self)) else type(self)(x, device=self.device)

  # ---------------- math ----------------
  def exp(self) -> Tensor:
    x = self._float()
    return _with_grad(x._exp_float64(), _exp_grad, x) if x.dtype == dtypes.float64 else (x * LOG2_E)._unary(Ops.EXP2)
  def _exp_float64(self) -> Tensor:
    """exp within about an ulp: x = n ln2 + r with |r| <= ln2/2 (ln 2 in two parts), exp2(r log2 e) times 2**n as two
    powers of two built from their bits (x clamped to where exp is 0 and inf, NaN put back). exp2(x log2 e) alone was
    430 ulps off near x = 700: the product's rounding error, |x| ulps of it, is multiplied into the result. n's integer
    bits come from the rounding shifter, one add, rather than a conversion (1M exps on the CPU took 3.10 ms with one)."""
    clamped = self.clip(-746.0, 710.0)
    n = (clamped * LOG2_E + 0.5).floor()
    r = clamped - n * LN2_HI - n * LN2_LO
    k = (n + SHIFTER_F64).bitcast(dtypes.int64) - bits_of(SHIFTER_F64, dtypes.float64)
    half = k >> 1  # floor(k / 2), negative k too
    def power_of_two(e: Tensor) -> Tensor: return ((e + 1023) << 52).bitcast(dtypes.float64)
    return self.isnan().where(self, (r * LOG2_E)._unary(Ops.EXP2) * power_of_two(half) * power_of_two(k - half))
  def exp2(self) -> Tensor: return self._float()._unary(Ops.EXP2)
  def log(self) -> Tensor: return self._float()._unary(Ops.LOG2) * LN_2
  def log2(self) -> Tensor: return self._float()._unary(Ops.LOG2)
  def log10(self) -> Tensor: return self.log2() * (LN_2 / math.log(10))
  def log1p(self) -> Tensor:
    """log(1+x), accurate near 0: log(u) * x / (u - 1) with u = 1 + x rounded."""
    x = self._float()
    u = x + 1
    exact = u == 1
    return exact.where(x, u.log() * x / exact.where(1, u - 1))  # the unused branch stays finite, so do its gradients
  def expm1(self) -> Tensor:
    """exp(x)-1, accurate near 0: (u - 1) * x / log(u) with u = exp(x) rounded."""
    x = self._float()
    u = x.exp()
    exact, floor = u == 1, (u - 1) == -1
    return exact.where(x, floor.where(-1.0, (u - 1) * x / (exact | floor).where(1, u.log())))
  def sqrt(self) -> Tensor: return self._float()._unary(Ops.SQRT)
  def rsqrt(self) -> Tensor: return self.sqrt().reciprocal()
  def square(self) -> Tensor: return self * self
  def sin(self) -> Tensor: return self._float()._unary(Ops.SIN)
  def cos(self) -> Tensor:
    """sin(pi/2 - |x|), pi/2 split in two of x's floats: near +-pi/2, where cos is small, hi - |x| is exact (Sterbenz),
    so cos keeps its relative accuracy there (pi/2 - x in one rounding lost it: cos(1.57) was 4.5e-4 off in float32)."""
    x = self._float()
    hi = truncate(math.pi / 2, x.dtype)
    lo = truncate(math.pi / 2 - hi + PI_2_LO, x.dtype)
    return ((hi - x.abs()) + lo).sin()
  def tan(self) -> Tensor: return self.sin() / self.cos()
  def asin(self) -> Tensor:
    x = self._float()
    return (x / (1 - x * x).sqrt()).atan()  # |x| > 1 gives sqrt of a negative: NaN
  def acos(self) -> Tensor: return math.pi / 2 - self.asin()
  def atan(self) -> Tensor:
    """Range-reduced to |x| <= tan(pi/12), then a short series (max error ~1e-7)."""
    x = self._float()
    big = x.abs() > 1
    t = big.where(1 / x.abs(), x.abs())
    shift = t > (2 - math.sqrt(3))
    s = shift.where((t * math.sqrt(3) - 1) / (t + math.sqrt(3)), t)
    s2 = s * s
    poly = s * (1 + s2 * (-1 / 3 + s2 * (1 / 5 + s2 * (-1 / 7 + s2 * (1 / 9 - s2 / 11)))))
    r = shift.where(poly + math.pi / 6, poly)
    r = big.where(math.pi / 2 - r, r)
    return (x < 0).where(-r, r)
  def sinh(self) -> Tensor: return (self.exp() - (-self).exp()) / 2
  def cosh(self) -> Tensor: return (self.exp() + (-self).exp()) / 2
  def tanh(self) -> Tensor:
    """-expm1(-2|x|) / (2 + expm1(-2|x|)) with x's sign: accurate near 0, exactly +-1 far out; gradient 1 - tanh^2 as PyTorch."""
    x = self._float()
    m = (x.abs() * -2).expm1()
    t = -m / (m + 2)
    return _with_grad((x < 0).where(-t, (x == 0).where(x, t)), _tanh_grad, x)  # tanh(-0.) is -0.
  def asinh(self) -> Tensor: return (self.abs() + (self * self + 1).sqrt()).log() * self.sign()
  def acosh(self) -> Tensor: return (self + (self * self - 1).sqrt()).log()
  def atanh(self) -> Tensor: return ((1 + self) / (1 - self)).log() / 2
  def erf(self) -> Tensor:
    """Abramowitz & Stegun 7.1.26 refined: max abs error 1.5e-7. It reads x clamped to [-6, 6], past which erf rounds to
    +-1 in float64 too, so that exp(-x*x) stays a normal float (denormals took a 16M-element float32 erf from 3 to 45 ms)."""
    x = self._float()
    xc = x.clamp(-6, 6)
    t = 1.0 / (1.0 + 0.3275911 * xc.abs())
    y = 1 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * (-(xc * xc)).exp()
    return _with_grad(x.sign() * y, _erf_grad, x)  # the exact derivative; the fit's own is 0 at x = 0
  def trunc(self) -> Tensor: return self if not dtypes.is_float(self.dtype) else self._unary(Ops.TRUNC)
  def floor(self) -> Tensor:
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self < t).where(t - 1, t)
  def ceil(self) -> Tensor:
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self > t).where(t + 1, t)
  def round(self) -> Tensor:
    """Round half to even, like numpy and torch."""
    if not dtypes.is_float(self.dtype): return self
    f = self.floor()
    d = self - f
    up = (d > 0.5) | ((d == 0.5) & ((f * 0.5).floor() * 2 != f))
    return up.where(f + 1, f)
  def abs(self) -> Tensor:
    if self.dtype == dtypes.bool or dtypes.is_unsigned(self.dtype): return self
    return self.maximum(-self) + 0.0 if dtypes.is_float(self.dtype) else (self < 0).where(-self, self)  # + 0.: max(0., -0.) may be -0.
  def sign(self) -> Tensor:
    if self.dtype == dtypes.bool: return self
    s = (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype) if not dtypes.is_unsigned(self.dtype) else (self > 0).cast(self.dtype)
    return self.isnan().where(self, s) if dtypes.is_float(self.dtype) else s

  # ---------------- activations ----------------
  def relu(self) -> Tensor:
    """max(x, 0); NaN stays NaN, as in PyTorch. Its gradient reads the output, not x (as PyTorch's does): training
    then keeps one activation per layer, and a layer's ReLU runs in the kernel that computes its input."""
    return _with_grad((self <= 0).where(0, self), _relu_grad, self)
  def relu6(self) -> Tensor: return self.hardtanh(0, 6)
  def leaky_relu(self, neg_slope: float = 0.01) -> Tensor: return (self > 0).where(self, self * neg_slope)
  def elu(self, alpha: float = 1.0) -> Tensor: return (self > 0).where(self, alpha * (self.exp() - 1))
  def celu(self, alpha: float = 1.0) -> Tensor: return self.maximum(0) + (alpha * ((self / alpha).exp() - 1)).minimum(0)
  def selu(self, alpha: float = 1.67326, gamma: float = 1.0507) -> Tensor: return gamma * (self > 0).where(self, alpha * (self.exp() - 1))
  def sigmoid(self) -> Tensor:
    """1 / (1 + e^-x) with PyTorch's gradient s * (1 - s), finite everywhere (the graph's own is 0 * inf far below 0)."""
    x = self._float()
    return _with_grad((1 + (-x).exp()).reciprocal(), _sigmoid_grad, x)
  def logsigmoid(self) -> Tensor: return -(-self).softplus()
  def hardsigmoid(self, alpha: float = 1 / 6, beta: float = 0.5) -> Tensor: return (alpha * self + beta).hardtanh(0, 1)  # no gradient at the kinks, as PyTorch
  def silu(self) -> Tensor: return self * self.sigmoid()
  swish = silu
  def hardswish(self) -> Tensor: return self * (self + 3).clamp(0, 6) * (1 / 6)  # clamp's gradient at the kinks gives PyTorch's -0.5 and 1.5
  def hardtanh(self, min_val: float = -1, max_val: float = 1) -> Tensor:
    """clamp(min_val, max_val) with PyTorch's gradient for hardtanh: 0 at the bounds themselves."""
    out = (self <= min_val).where(min_val, self)
    return (out >= max_val).where(max_val, out)
  def gelu(self, approximate: str = "tanh") -> Tensor:
    """x * Phi(x): by tanh ("tanh", tinygrad's default; PyTorch's default is "none") or by erf ("none"). The tanh form's
    cubic reads x clamped to [-10, 10], past which tanh is +-1 even in float64: finite gradients for any finite x."""
    if approximate == "none": return 0.5 * self * (1 + (self * (1 / math.sqrt(2))).erf())
    if approximate != "tanh": raise RuntimeError(f"gelu approximate must be 'none' or 'tanh', got {approximate!r}")
    xc = self.clamp(-10, 10)
    return 0.5 * self * (1 + (math.sqrt(2 / math.pi) * (xc + 0.044715 * xc * xc * xc)).tanh())
  def quick_gelu(self) -> Tensor: return self * (self * 1.702).sigmoid()
  def mish(self) -> Tensor: return self * self.softplus().tanh()
  def softplus(self, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    bx = self * beta
    return (bx > threshold).where(self, (bx.maximum(0) + (-bx.abs()).exp().log1p()) * (1 / beta))
  def softsign(self) -> Tensor: return self / (1 + self.abs())
