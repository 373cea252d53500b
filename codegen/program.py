"""Kernel AST -> ProgramSpec: optimize, lower, render."""
from __future__ import annotations
from ir.ops import Ops
from ir import tracing
from ir.helpers import prod
from ir.switches import DEBUG
from ir.uop import UOp, smax
from codegen.heuristic import hand_coded_optimizations
from codegen.kernel import Kernel, Opt
from codegen.lowerer import CORE_VARS, lower
from codegen.renderer import ProgramSpec, Renderer, estimate

def print_linear(uops: list[UOp]) -> None:
  """One line per linear UOp: position, op, dtype, the positions of its sources, arg."""
  at: dict[UOp, int] = {}
  for i, u in enumerate(uops):
    print(f"{i:4d} {u.op.name:14s} {str(u.dtype):22s} {[at[s] for s in u.src if s in at]} {u.arg!r}")
    at[u] = i

def get_program(ast: UOp, renderer: Renderer, opts: list[Opt] | None = None) -> ProgramSpec:
  k = Kernel(ast, renderer)
  if opts is None: hand_coded_optimizations(k, renderer.vector_width, renderer.vector_registers)
  else:
    for opt in opts: k.apply_opt(opt)
  return program_of(k, renderer)

def lowered(k: Kernel, renderer: Renderer) -> tuple[list[UOp], tuple, tuple]:
  """k's linear program and launch sizes for `renderer`."""
  return lower(k, renderer.splits_across_cores, launch_dims=renderer.launch_dims, masked_loads=renderer.masked_loads)

def program_of(k: Kernel, renderer: Renderer, lowered_k: tuple[list[UOp], tuple, tuple] | None = None) -> ProgramSpec:
  """The program of optimized kernel k, from `lowered_k` when it was lowered already (BEAM's estimate does)."""
  ast = k.ast
  tracing.stage("optimize", k)
  uops, launch_global, launch_local = lowered_k or lowered(k, renderer)
  tracing.stage("lower", uops)
  name = k.name
  if DEBUG >= 6: print_linear(uops)
  src = renderer.render(name, uops)
  tracing.stage("render", src)
  flops, mem = estimate(uops)
  user_vars = [u for u in uops if u.op is Ops.DEFINE_VAR and u.arg[0] not in CORE_VARS]
  if renderer.launch_dims: global_size, local_size = launch_global, launch_local
  else:  # CPU: the outer loop's trip count (a symbolic one at its largest), which the runtime splits across threads
    global_size, local_size = (prod(smax(k.full_shape[a]) for a in k.core_axes), 1, 1), None
  outs = [s.src[0].arg for s in ast.src]
  ins = sorted({u.src[0].arg for u in ast.toposort() if u.op is Ops.LOAD})
  return ProgramSpec(name, src, renderer.device, uops, global_size, local_size, [g.arg for g in k.globals], user_vars, outs, ins,
                     list(k.applied_opts), flops, mem)
