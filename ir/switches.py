"""Runtime switches: typed, cached environment reads and `Context`-overridable settings."""
from __future__ import annotations
import contextlib, dataclasses, functools, os
from typing import Any, ClassVar
from ir.target import Target, parse_targets, target_for

_FALSE_WORDS = ("", "0", "false", "no", "off")

class SwitchError(ValueError):
  """A runtime switch set (in the environment or with `Context`) to a value it can't take; names the switch."""

@functools.cache
def getenv(key: str, default: Any = 0) -> Any:
  """The environment variable `key` converted to the type of `default`; `default` when unset or empty."""
  raw = os.environ.get(key)
  if raw is None or (raw == "" and not isinstance(default, str)): return default
  if isinstance(default, bool): return raw.strip().lower() not in _FALSE_WORDS
  try: return type(default)(raw)
  except ValueError: raise SwitchError(f"environment variable {key}={raw!r} is not a valid {type(default).__name__}") from None

class ContextVar:
  """One runtime switch: its value comes from the environment at start and can be overridden with `Context`; a
  switch with `choices` takes only those values (names in any case, kept lower-cased: DEFAULT_FLOAT=HALF is half)."""
  _cache: ClassVar[dict[str, ContextVar]] = {}
  def __init__(self, key: str, default: Any, choices: tuple = ()):
    if key in ContextVar._cache: raise ValueError(f"switch {key} is already defined")
    self.key, self.default, self.choices = key, default, choices
    self.value = self.coerce(getenv(key, default))
    ContextVar._cache[key] = self
  def coerce(self, v: Any) -> Any:
    """`v` as this switch's type; SwitchError naming the switch and `v` when it isn't a value the switch can take."""
    try: v = v if v is None or isinstance(self.default, (bool, float)) or isinstance(v, type(self.default)) else type(self.default)(v)
    except (TypeError, ValueError): raise SwitchError(f"switch {self.key}={v!r} is not a valid {type(self.default).__name__}") from None
    if self.choices and isinstance(v, str): v = v.lower()
    if self.choices and v not in self.choices: raise SwitchError(f"switch {self.key}={v!r} is not allowed; choose one of {', '.join(map(str, self.choices))}")
    return v
  def __bool__(self) -> bool: return bool(self.value)
  def __eq__(self, x) -> bool: return self.value == (x.value if isinstance(x, ContextVar) else x)
  def __hash__(self) -> int: return id(self)
  def __ge__(self, x) -> bool: return self.value >= x
  def __gt__(self, x) -> bool: return self.value > x
  def __le__(self, x) -> bool: return self.value <= x
  def __lt__(self, x) -> bool: return self.value < x
  def __int__(self) -> int: return int(self.value)
  def __repr__(self) -> str: return f"{self.key}={self.value!r}"

class Context(contextlib.ContextDecorator):
  """`with Context(DEBUG=2): ...` or `@Context(DEBUG=2)`: sets switches for the block and restores them on exit."""
  def __init__(self, **switches: Any):
    if unknown := sorted(k for k in switches if k not in ContextVar._cache):
      raise KeyError(f"unknown switch(es) {unknown}; known: {sorted(ContextVar._cache)}")
    self.switches, self._saved = switches, []
  def __enter__(self) -> Context:
    values = {k: ContextVar._cache[k].coerce(v) for k, v in self.switches.items()}  # all checked before any is set
    self._saved.append({k: ContextVar._cache[k].value for k in values})
    for k, v in values.items(): ContextVar._cache[k].value = v
    return self
  def __exit__(self, *exc) -> None:
    for k, v in self._saved.pop().items(): ContextVar._cache[k].value = v

class _DEV(ContextVar):
  """The DEV switch holds its parsed targets: `DEV.value` is a list of `Target`s (set it, or `Context(DEV=...)`, to a
  string split on ';', a Target or a list of them); `DEV.device/renderer/arch/interface/indices` read the first target."""
  _targets: list[Target]
  @property
  def value(self) -> list[Target]: return self._targets
  @value.setter
  def value(self, v: Any) -> None: self._targets = self.coerce(v)
  def coerce(self, v: Any) -> list[Target]:
    if isinstance(v, Target): return [v]
    if isinstance(v, (list, tuple)) and all(isinstance(t, Target) for t in v): return list(v) or [Target()]
    if not isinstance(v, str): raise SwitchError(f"switch DEV={v!r} is not a target string, a Target or a list of Targets")
    try: return list(parse_targets(v)) or [Target()]  # unset DEV is one target that applies to every device
    except ValueError as e: raise SwitchError(f"switch DEV={v!r}: {e}") from None
  def target(self, device: str, **defaults: Any) -> Target:
    """`device`'s target: the first that names it (or no device), with `defaults` filling the fields it leaves empty."""
    t = target_for(tuple(self._targets), device)
    return dataclasses.replace(t, **{k: v for k, v in defaults.items() if not getattr(t, k)})
  def __getattr__(self, name: str) -> Any:
    if name in ("device", "renderer", "arch", "interface", "indices"): return getattr(self._targets[0], name)
    raise AttributeError(f"DEV has no attribute {name!r}")
  def __eq__(self, x) -> bool: return self._targets == (x.value if isinstance(x, ContextVar) else self.coerce(x))
  def __hash__(self) -> int: return id(self)
  def __repr__(self) -> str: return ";".join(map(str, self._targets))

# the switches every layer reads (defaults follow tinygrad's documentation)
DEBUG, DEV, BEAM, BEAM_ESTIMATE = ContextVar("DEBUG", 0), _DEV("DEV", ""), ContextVar("BEAM", 0), ContextVar("BEAM_ESTIMATE", 1)
# the spellings of ir.dtype's float and int dtypes (which imports this module; tests/ir/test_switches.py keeps them in step)
FLOAT_NAMES = ("fp8e4m3", "fp8e5m2", "float16", "half", "bfloat16", "float32", "float", "float64", "double")
INT_NAMES = ("int8", "char", "uint8", "uchar", "int16", "short", "uint16", "ushort", "int32", "int", "uint32", "uint", "int64", "long", "uint64", "ulong")
NOOPT = ContextVar("NOOPT", 0)
DEFAULT_FLOAT, DEFAULT_INT = ContextVar("DEFAULT_FLOAT", "float32", FLOAT_NAMES), ContextVar("DEFAULT_INT", "int32", INT_NAMES)
IMAGE, FLOAT16 = ContextVar("IMAGE", 0), ContextVar("FLOAT16", 0)
JIT, JIT_BATCH_SIZE, CAPTURING = ContextVar("JIT", 1), ContextVar("JIT_BATCH_SIZE", 32), ContextVar("CAPTURING", 1)
VIZ, VIZ_PORT = ContextVar("VIZ", 0), ContextVar("VIZ_PORT", 8000)
TRACE_IOCTL = ContextVar("TRACE_IOCTL", 0)  # 1: every open/ioctl/mmap through drivers/system.py's seam is logged to stderr, decoded
PROFILE = ContextVar("PROFILE", abs(VIZ.value))
ALLOW_TF32, WEBGPU_BACKEND, CUDA_PATH = ContextVar("ALLOW_TF32", 0), ContextVar("WEBGPU_BACKEND", ""), ContextVar("CUDA_PATH", "")
CL_RUNTIME = ContextVar("CL_RUNTIME", "", ("", "intel"))  # CL: "" the ICD loader (libOpenCL); intel: Intel's CPU runtime from the intel-opencl-rt wheel
CCACHE, SCACHE, TRAINING = ContextVar("CCACHE", 1), ContextVar("SCACHE", 1), ContextVar("TRAINING", 0)
NUM_CPU_THREADS = ContextVar("NUM_CPU_THREADS", len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
SPLIT_REDUCEOP = ContextVar("SPLIT_REDUCEOP", 1)
TC = ContextVar("TC", 1)  # 0: the heuristics and BEAM don't use tensor cores
HCQDEV_WAIT_TIMEOUT_MS = ContextVar("HCQDEV_WAIT_TIMEOUT_MS", 30000)  # how long a queue wait may go without progress
AMD_FIRMWARE_DIR = ContextVar("AMD_FIRMWARE_DIR", "/lib/firmware/amdgpu")  # where the AM driver finds linux-firmware's amdgpu files
