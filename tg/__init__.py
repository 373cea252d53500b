"""tg: a deep-learning stack that owns every layer down to the GPU."""
from ir.switches import Context, getenv
from ir.dtype import dtypes
from ir.uop import UOp
from drivers.device import Device, GlobalCounters
from tg.tensor import Tensor
from tg.jit import TinyJit
from tg import nn

def Variable(name: str, min_val: int, max_val: int) -> UOp:
  """A named integer in [min_val, max_val]; `.bind(value)` gives it a value for one use."""
  return UOp.variable(name, min_val, max_val)

__all__ = ["Tensor", "TinyJit", "nn", "dtypes", "Context", "getenv", "Device", "GlobalCounters", "Variable", "UOp"]
