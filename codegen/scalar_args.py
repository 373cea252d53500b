"""Float constants as kernel arguments: kernels that differ only in the value of a float32 constant (`x * lr` with a
new `lr` every step) can share one compiled program that takes the constants as arguments."""
from __future__ import annotations
import math
from ir.dtype import dtypes
from ir.ops import Ops
from ir.pattern import substitute
from ir.uop import UOp

ARG_PREFIX = "scalar_arg"
FOLDED = (0.0, 1.0, -1.0)  # values the code generator simplifies away; kept in the program

def is_scalar_arg(var: UOp) -> bool: return var.arg[0].startswith(ARG_PREFIX)

def lift_scalars(ast: UOp) -> tuple[UOp, dict[str, float]]:
  """`ast` with each float32 constant that a view broadcasts (other than 0, +-1 and non-finite values) replaced by a
  Variable, and the Variables' values; (ast, {}) when there is none."""
  consts = [u.src[0] for u in ast.toposort() if u.op is Ops.VIEW and u.src and u.src[0].op is Ops.CONST]
  lifted = list(dict.fromkeys(c for c in consts if c.dtype == dtypes.float32 and math.isfinite(c.arg) and c.arg not in FOLDED))
  if not lifted: return ast, {}
  names = [f"{ARG_PREFIX}{i}" for i in range(len(lifted))]
  variables = {c: UOp.variable(name, -math.inf, math.inf, dtypes.float32) for c, name in zip(lifted, names)}
  return substitute(ast, variables), {name: c.arg for c, name in zip(lifted, names)}
