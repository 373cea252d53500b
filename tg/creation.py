"""Tensor constructors: constants, ranges, identity, and random numbers from a counter-based generator (Threefry-2x32)
that runs on the device, so the same seed gives the same numbers everywhere and a JIT replay draws new ones."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Any
from ir.dtype import DType, check_fits, dtypes, to_dtype
from ir.helpers import ceildiv, prod
from ir.ops import Ops
from ir.uop import UOp
from drivers.device import Buffer, Device, HostMemory

if TYPE_CHECKING: from tg.tensor import Tensor

def _shape(shape: tuple) -> tuple[int, ...]:
  """`f(2, 3)` and `f((2, 3))` both mean shape (2, 3)."""
  out = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else tuple(shape)
  if not all(isinstance(s, int) and not isinstance(s, bool) for s in out): raise TypeError(f"a shape is a tuple of ints, got {out}")
  if any(s < 0 for s in out): raise RuntimeError(f"negative dimension in shape {out}")  # PyTorch's type
  return out

def _device(device: str | tuple[str, ...] | None) -> str | tuple[str, ...]:
  """The canonical device name, or names for a tensor on several devices (made as one copy on each)."""
  if isinstance(device, (tuple, list)): return tuple(Device.canonicalize(d) for d in device)
  return Device.canonicalize(device) if device is not None else Device.DEFAULT

class _RNG:
  """Per-device generator state: a key from the seed and a counter of numbers drawn, both device tensors."""
  seed = 0
  keys: dict[str, Tensor] = {}
  counters: dict[str, Tensor] = {}

def _threefry2x32(x0: Tensor, x1: Tensor, k0: Tensor, k1: Tensor) -> tuple[Tensor, Tensor]:
  """The Threefry-2x32 block cipher with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3")."""
  ks = [k0, k1, k0 ^ k1 ^ 0x1BD11BDA]
  rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
  x0, x1 = x0 + ks[0], x1 + ks[1]
  for block in range(5):
    for r in rotations[block % 2]:
      x0 = x0 + x1
      x1 = ((x1 << r) | (x1 >> (32 - r))) ^ x0
    x0, x1 = x0 + ks[(block + 1) % 3], x1 + ks[(block + 2) % 3] + (block + 1)
  return x0, x1

class CreationMixin:
  __slots__ = ()

  @classmethod
  def empty(cls, *shape, device: str | None = None, dtype: DType | str | None = None, requires_grad: bool | None = None) -> Tensor:
    shape, dt = _shape(shape), to_dtype(dtype) if dtype is not None else dtypes.default_float
    buf = Buffer(_device(device), prod(shape), dt)
    return cls(UOp(Ops.BUFFER, dt, (), (buf,)).reshape(shape), requires_grad=requires_grad)

  @classmethod
  def from_blob(cls, ptr: int, shape: tuple[int, ...], device: str | None = None, dtype: DType | str | None = None,
                requires_grad: bool | None = None) -> Tensor:
    """The elements of `shape` (of `dtype`, default float) at host address `ptr`, used in place: nothing is copied and
    the memory stays the caller's, so it must outlive the tensor, and what is written to the tensor lands in it. The
    device must reach host memory directly (CPU; AMD maps the pages on the GPU)."""
    shape = _shape(tuple(shape) if isinstance(shape, (tuple, list)) else (shape,))
    dt, dev = to_dtype(dtype) if dtype is not None else dtypes.default_float, _device(device)
    if isinstance(dev, tuple): raise ValueError(f"from_blob makes a tensor on one device, not {dev}")
    if isinstance(ptr, bool) or not isinstance(ptr, int) or ptr <= 0: raise ValueError(f"from_blob needs a host address (an int > 0), got {ptr!r}")
    if ptr % dt.itemsize: raise ValueError(f"from_blob: address {ptr:#x} is not aligned to {dt}'s {dt.itemsize} bytes")
    if not Device[dev].allocator.uses_host_memory:
      raise ValueError(f"from_blob: {dev} can't use host memory in place; make the tensor on CPU and copy it with .to({dev!r})")
    buf = Buffer(dev, prod(shape), dt, options=HostMemory(ptr))
    return cls(UOp(Ops.BUFFER, dt, (), (buf,)).reshape(shape), requires_grad=requires_grad)

  @classmethod
  def full(cls, shape, fill_value: Any, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool | None = None) -> Tensor:
    shape = _shape((shape,) if isinstance(shape, int) else tuple(shape))
    dt = check_fits(fill_value, to_dtype(dtype)) if dtype is not None else dtypes.from_py(fill_value)
    return cls(UOp.const(dt, fill_value, _device(device)).reshape((1,) * len(shape)).expand(shape), requires_grad=requires_grad)
  @classmethod
  def zeros(cls, *shape, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool | None = None) -> Tensor:
    return cls.full(_shape(shape), 0, dtype=to_dtype(dtype) if dtype is not None else dtypes.default_float, device=device, requires_grad=requires_grad)
  @classmethod
  def ones(cls, *shape, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool | None = None) -> Tensor:
    return cls.full(_shape(shape), 1, dtype=to_dtype(dtype) if dtype is not None else dtypes.default_float, device=device, requires_grad=requires_grad)
  def full_like(self, fill_value: Any, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    return type(self).full(self.shape, fill_value, dtype=dtype or self.dtype, device=device or self.device)
  def zeros_like(self, **kw) -> Tensor: return self.full_like(0, **kw)
  def ones_like(self, **kw) -> Tensor: return self.full_like(1, **kw)
  def empty_like(self, dtype=None, device=None) -> Tensor:
    return type(self).empty(self.shape, dtype=dtype or self.dtype, device=device or self.device)

  @classmethod
  def arange(cls, start, stop=None, step=1, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    """start, start+step, ... up to (not including) stop; a single argument is the stop. As tinygrad: the dtype is the
    default float if start, stop or step is a float, else the default int (int64 when the values need it), and values
    an integer dtype can't hold raise OverflowError; a step pointing away from stop gives an empty tensor (PyTorch raises)."""
    if stop is None: start, stop = 0, start
    if step == 0: raise RuntimeError("arange step must be non-zero")
    n = max(ceildiv(stop - start, step) if all(isinstance(v, int) for v in (start, stop, step)) else math.ceil((stop - start) / step), 0)  # exact for ints, numpy's for floats
    last = start + (n - 1) * step if n else start
    if dtype is not None: dt = to_dtype(dtype)
    else: dt = dtypes.default_float if any(isinstance(v, float) for v in (start, stop, step)) else dtypes.from_py([start, last])
    if n: check_fits(start, dt), check_fits(last, dt)
    idx = cls(UOp(Ops.ARANGE, dtypes.int32 if n < 2**31 else dtypes.int64, (UOp(Ops.DEVICE, arg=_device(device)),), n))
    if (start, step) == (0, 1): return idx.cast(dt)
    wide = dtypes.int64 if dtypes.is_int(dt) else dt  # a step of -1 in uint8, or a start past int32, still computes
    return (idx.cast(wide) * step + start).cast(dt)

  @classmethod
  def linspace(cls, start: float, stop: float, steps: int, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    """`steps` evenly spaced values from start to stop, both included; the default float unless dtype is given."""
    if steps < 0: raise RuntimeError(f"linspace needs steps >= 0, got {steps}")
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if steps == 1: return cls.full((1,), start, dtype=dt, device=device)
    step = (stop - start) / max(steps - 1, 1)
    return (cls.arange(steps, device=device).cast(dtypes.float64 if dt == dtypes.float64 else dtypes.float32) * step + start).cast(dt)

  @classmethod
  def eye(cls, n: int, m: int | None = None, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    if n < 0 or (m is not None and m < 0): raise RuntimeError(f"eye needs sizes >= 0, got {n}, {m}")
    rows, cols = cls.arange(n, device=device).reshape(n, 1), cls.arange(n if m is None else m, device=device).reshape(1, -1)
    return (rows == cols).cast(to_dtype(dtype) if dtype is not None else dtypes.default_float)

  # ---------------- random ----------------
  @classmethod
  def manual_seed(cls, seed: int = 0) -> None:
    """Restart every device's generator from `seed`."""
    _RNG.seed, _RNG.keys, _RNG.counters = int(seed), {}, {}

  @classmethod
  def random_bits(cls, n: int, device: str | None = None) -> Tensor:
    """n uniformly random uint32 values; each call draws new ones."""
    dev = _device(device)
    if dev not in _RNG.keys:
      seed = _RNG.seed & (2**64 - 1)
      _RNG.keys[dev] = cls([seed & 0xFFFFFFFF, seed >> 32], device=dev, dtype=dtypes.uint32)
      _RNG.counters[dev] = cls([0], device=dev, dtype=dtypes.uint32)
    key, counter = _RNG.keys[dev], _RNG.counters[dev]
    half = ceildiv(n, 2)
    x0 = cls.arange(half, device=dev, dtype=dtypes.uint32) + counter._broadcast_to((half,))
    x1 = cls.zeros(half, device=dev, dtype=dtypes.uint32)
    k0, k1 = key[0]._broadcast_to((half,)), key[1]._broadcast_to((half,))
    y0, y1 = _threefry2x32(x0, x1, k0, k1)
    counter.assign(counter + half)
    bits = y0.cat(y1)[:n] if n else cls.zeros(0, device=dev, dtype=dtypes.uint32)
    # drawn now: a lazy graph re-evaluated after the counter moved on (e.g. by backward) would draw different numbers
    return bits.realize(counter)

  @classmethod
  def rand(cls, *shape, device: str | None = None, dtype: DType | str | None = None, requires_grad: bool | None = None) -> Tensor:
    """Uniform in [0, 1)."""
    shape, dt = _shape(shape), to_dtype(dtype) if dtype is not None else dtypes.default_float
    if not dtypes.is_float(dt): raise RuntimeError(f"rand makes floating point numbers, not {dt}")
    mantissa = {dtypes.float16: 11, dtypes.bfloat16: 8, dtypes.float64: 32}.get(dt, 24)
    bits = cls.random_bits(prod(shape), device)
    wide = dtypes.float64 if dt == dtypes.float64 else dtypes.float32
    out = ((bits >> (32 - mantissa)).cast(wide) * (2.0 ** -mantissa)).cast(dt).reshape(shape)
    out.requires_grad, out._leaf = requires_grad, True
    return out
  @classmethod
  def uniform(cls, *shape, low: float = 0.0, high: float = 1.0, **kw) -> Tensor:
    rg = kw.pop("requires_grad", None)
    out = (cls.rand(*shape, **kw) * (high - low) + low).cast(kw.get("dtype") or dtypes.default_float)
    return out.requires_grad_(rg)
  @classmethod
  def randn(cls, *shape, device: str | None = None, dtype: DType | str | None = None, requires_grad: bool | None = None) -> Tensor:
    """Standard normal, by the Box-Muller transform."""
    shape, dt = _shape(shape), to_dtype(dtype) if dtype is not None else dtypes.default_float
    u = cls.rand(2, *shape, device=device, dtype=dtypes.float64 if dt == dtypes.float64 else dtypes.float32)
    out = ((1 - u[0]).log() * -2).sqrt() * (u[1] * (2 * math.pi)).cos()
    return out.cast(dt).requires_grad_(requires_grad)
  @classmethod
  def normal(cls, *shape, mean: float = 0.0, std: float = 1.0, **kw) -> Tensor:
    rg = kw.pop("requires_grad", None)
    return (cls.randn(*shape, **kw) * std + mean).requires_grad_(rg)
  @classmethod
  def randint(cls, *shape, low: int = 0, high: int = 10, device: str | None = None, dtype: DType | str = dtypes.int32) -> Tensor:
    if high <= low: raise RuntimeError(f"randint needs low < high, got [{low}, {high})")
    dt = to_dtype(dtype)
    return (cls.rand(*shape, device=device, dtype=dtypes.float64) * (high - low)).cast(dtypes.int64).cast(dt) + low
  @classmethod
  def randperm(cls, n: int, device: str | None = None, dtype: DType | str = dtypes.int32) -> Tensor:
    return cls.rand(n, device=device).argsort().cast(to_dtype(dtype))
  def rand_like(self, **kw) -> Tensor:
    return type(self).rand(*self.shape, device=kw.pop("device", self.device), dtype=kw.pop("dtype", self.dtype), **kw)
  def randn_like(self, **kw) -> Tensor:
    return type(self).randn(*self.shape, device=kw.pop("device", self.device), dtype=kw.pop("dtype", self.dtype), **kw)

  @classmethod
  def scaled_uniform(cls, *shape, **kw) -> Tensor:
    rg = kw.pop("requires_grad", None)
    return (cls.uniform(*shape, low=-1.0, high=1.0, **kw) * (prod(_shape(shape)) ** -0.5)).requires_grad_(rg)
  @classmethod
  def glorot_uniform(cls, *shape, **kw) -> Tensor:
    shape = _shape(shape)
    bound = math.sqrt(6 / (shape[0] + prod(shape[1:])))
    return cls.uniform(*shape, low=-bound, high=bound, **kw)
  @classmethod
  def kaiming_uniform(cls, *shape, a: float = 0.01, **kw) -> Tensor:
    shape = _shape(shape)
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(shape[1:]))
    return cls.uniform(*shape, low=-bound, high=bound, **kw)
  @classmethod
  def kaiming_normal(cls, *shape, a: float = 0.01, **kw) -> Tensor:
    shape = _shape(shape)
    std = math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(shape[1:]))
    return cls.normal(*shape, mean=0.0, std=std, **kw)

  def requires_grad_(self, requires_grad: bool | None = True) -> Tensor:
    """Mark a tensor made by a constructor as a leaf that does (True), doesn't (False) or may (None) require grad."""
    if requires_grad and not dtypes.is_float(self.dtype): raise RuntimeError(f"only floating point tensors can require gradients, got {self.dtype}")
    self.requires_grad, self._leaf = requires_grad, True
    return self
