"""What a renderer promises to the rest of codegen, and the description of one rendered program."""
from __future__ import annotations
from dataclasses import dataclass, field
from ir.ops import Ops, ALU
from ir.uop import UOp
from ir.dtype import dtypes
from ir.helpers import prod

class Renderer:
  device: str = ""
  has_local: bool = False            # workgroups with shared memory (GPUs)
  splits_across_cores: bool = False  # the outer loop (Kernel.core_axes) is split into [core_start, core_end) chunks (CPU)
  cores: int = 1                     # ... over this many threads
  core_cache_bytes: int = 2 << 20    # one core's own (level-2) cache, which CPU kernels block their reused data for (the
                                     # CPU device passes the host's; 2 MiB: the L2 the CPU thresholds were measured with)
  launch_dims: int = 0               # > 0: global axes become launch indices (at most this many dims) instead of loops
  vector_width: int = 4              # float lanes per vector register
  vector_registers: int = 16         # vector registers a thread has for its register tile and operands
  tensor_cores: tuple = ()           # TensorCore instructions the target offers (codegen.tensor_core)
  finite_math: bool = False          # the target's compiler may assume no NaN, inf or -0. and reassociate floats (WGSL allows it)
  masked_loads: bool = False         # renders LOAD(buf, idx, lanes' gates): a vector load of only the lanes whose gate is set
  def render(self, name: str, uops: list[UOp]) -> str: raise NotImplementedError

def buffers_written(uops: list[UOp]) -> set[UOp]:
  """The buffers a linear program stores to; TypeError for an image it also loads from (an image is read or written
  by a kernel, not both: CL's read_only/write_only images, QCOM's textures and IBOs)."""
  written = {u.src[0] for u in uops if u.op is Ops.STORE and len(u.src) >= 3}
  read = {u.src[0] for u in uops if u.op is Ops.LOAD and len(u.src) >= 2}
  if both := [g.arg for g in written & read if g.dtype.image]: raise TypeError(f"buffer {both[0]} is an image: a kernel can read it or write it, not both")
  return written

@dataclass
class ProgramSpec:
  name: str
  src: str
  device: str
  uops: list[UOp]
  global_size: tuple[int, int, int] = (1, 1, 1)
  local_size: tuple[int, int, int] | None = None
  globals: list[int] = field(default_factory=list)  # buffer indices, in parameter order
  vars: list[UOp] = field(default_factory=list)     # user Variables (int32), passed after the buffers in this order
  outs: list[int] = field(default_factory=list)   # buffer indices written
  ins: list[int] = field(default_factory=list)    # buffer indices read
  applied_opts: list = field(default_factory=list)
  flops: int = 0
  mem_bytes: int = 0

def estimate(uops: list[UOp]) -> tuple[int, int]:
  """(arithmetic ops, bytes loaded and stored) the program executes, counting every loop iteration."""
  flops = mem = 0
  mult, stack = prod(u.arg[1] for u in uops if u.op is Ops.SPECIAL), []  # every GPU thread runs the whole program
  for u in uops:
    if u.op is Ops.RANGE:
      size = u.src[1].vmax - u.src[0].vmin if u.src[1].op is not Ops.CONST or u.src[0].op is not Ops.CONST else u.src[1].arg - u.src[0].arg
      stack.append(mult); mult *= max(size, 0)
    elif u.op is Ops.ENDRANGE: mult = stack.pop()
    elif u.op in ALU and u.dtype.scalar not in (dtypes.int32, dtypes.int64, dtypes.bool): flops += mult * u.dtype.count
    elif u.op is Ops.WMMA: flops += mult * u.arg.flops_per_thread
    elif u.op is Ops.LOAD and len(u.src) == 2: mem += mult * u.dtype.itemsize
    elif u.op is Ops.STORE and len(u.src) == 3: mem += mult * u.src[2].dtype.itemsize
  return flops, mem
