"""Renders a linear program as LLVM IR for AMD GPUs (amdgcn-amd-amdhsa): one amdgpu_kernel taking global buffer
pointers, then int32 Variables, through the kernarg segment only. Launch indices are LLVM's workgroup/workitem id
intrinsics, local memory is an addrspace(3) array, accumulators live in private memory (addrspace(5)). The
arithmetic, casts and bfloat16 handling are the CPU LLVM renderer's (codegen/llvmir.py)."""
from __future__ import annotations
import math, re, struct
from ir.dtype import DType, dtypes
from ir.helpers import prod
from ir.ops import Ops
from ir.uop import UOp
from codegen.llvmir import _Function, _as_float, const_text, imm, ltype, with_scalar
from codegen.renderer import Renderer

GLOBAL, LOCAL, PRIVATE = 1, 3, 5  # AMDGPUUsage.rst "Address Spaces": global, local (LDS), private (scratch)
# workgroup id / workitem id intrinsics per SPECIAL prefix (AMDGPUUsage.rst "LLVM IR Intrinsics")
SPECIAL_INTRINSICS = {"g": "llvm.amdgcn.workgroup.id", "l": "llvm.amdgcn.workitem.id"}
# implicit inputs the driver never provides: LLVM must neither read them nor reserve hidden kernel arguments for them
# (AMDGPUAttributes.def; "amdgpu-implicitarg-num-bytes"="0" keeps the metadata's hidden_* arguments away)
NO_IMPLICIT_INPUTS = ("amdgpu-no-implicitarg-ptr", "amdgpu-no-dispatch-ptr", "amdgpu-no-queue-ptr", "amdgpu-no-dispatch-id",
                      "amdgpu-no-hostcall-ptr", "amdgpu-no-heap-ptr", "amdgpu-no-multigrid-sync-arg", "amdgpu-no-completion-action",
                      "amdgpu-no-default-queue", "amdgpu-no-lds-kernel-id")
# 2*pi split in two floats (Cody-Waite) so that sin's argument reduction keeps the low bits
TWO_PI_HI, TWO_PI_LO = 6.28318548202514648, -1.7484555314695172e-07

def _f32(x: float) -> str:
  """x rounded to float32, as an LLVM float constant."""
  return const_text(struct.unpack("<f", struct.pack("<f", x))[0], dtypes.float32)

def parse_arch(arch: str) -> tuple[int, int, int]:
  """gfx<major><minor hex><stepping hex> -> (major, minor, stepping); ValueError for anything else or pre-gfx9."""
  if not (m := re.fullmatch(r"gfx(\d{1,2})([0-9a-f])([0-9a-f])", arch)) or int(m.group(1)) < 9:
    raise ValueError(f"the AMDGPU renderer targets gfx9 and newer (e.g. gfx1100, gfx942), not {arch!r}")
  return int(m.group(1)), int(m.group(2), 16), int(m.group(3), 16)

def wave_size(arch: str) -> int:
  """RDNA (gfx10+) runs wave32 (tg's choice; it also has wave64), CDNA/GCN (gfx9) only wave64."""
  return 32 if parse_arch(arch)[0] >= 10 else 64

class AMDGPURenderer(Renderer):
  device = "AMD"
  has_local = True
  launch_dims = 3
  vector_width = 4  # 128-bit global loads and stores (global_load_b128 / global_load_dwordx4)
  def __init__(self, arch: str = "gfx1100"):
    parse_arch(arch)
    self.arch = arch
  def render(self, name: str, uops: list[UOp]) -> str: return _Kernel(name).render(uops)

class _Kernel(_Function):
  def __init__(self, name: str):
    super().__init__(name)
    self.local_dims, self.locals = [1, 1, 1], []

  def preamble(self) -> list[str]: return ['target triple = "amdgcn-amd-amdhsa"', *self.locals]
  def head(self) -> str: return f"define amdgpu_kernel void @{self.name}({', '.join(self.params)}) #0 !reqd_work_group_size !0 {{\nentry:"
  def attributes(self) -> str:
    attrs = " ".join(f'"{a}"' for a in NO_IMPLICIT_INPUTS)
    return (f'attributes #0 = {{ nounwind "amdgpu-flat-work-group-size"="1,{prod(self.local_dims)}" "amdgpu-implicitarg-num-bytes"="0" '
            f'{attrs} "uniform-work-group-size"="true" "no-trapping-math"="true" }}\n'
            f"!0 = !{{{', '.join(f'i32 {d}' for d in self.local_dims)}}}")
  def ptr_of(self, u: UOp) -> str:
    if u.op is Ops.DEFINE_ACC: return f"ptr addrspace({PRIVATE})"
    return f"ptr addrspace({LOCAL if getattr(u.dtype, 'local', False) else GLOBAL})"
  def alloca(self, t: str) -> str: return f"alloca {t}, addrspace({PRIVATE})"

  def render_one(self, u: UOp) -> str | None:
    if u.op is Ops.DEFINE_GLOBAL:
      self.params.append(f"ptr addrspace({GLOBAL}) noalias %data{u.arg}")
      return f"%data{u.arg}"
    if u.op is Ops.SPECIAL: return self.special(u)
    if u.op is Ops.DEFINE_LOCAL:
      name = f"@local{len(self.locals)}"
      self.locals.append(f"{name} = internal addrspace({LOCAL}) global [{max(u.dtype.size, 1) * u.dtype.base.itemsize} x i8] poison, align 16")
      return name
    if u.op is Ops.BARRIER:  # every lane's LDS writes before the barrier are seen by every lane after it
      self.decls.add("declare void @llvm.amdgcn.s.barrier()")
      self.emit('fence syncscope("workgroup") release')
      self.emit("call void @llvm.amdgcn.s.barrier()")
      self.emit('fence syncscope("workgroup") acquire')
      return None
    if u.op is Ops.WMMA: raise TypeError("the AMDGPU renderer has no tensor-core instructions yet (WMMA)")
    return super().render_one(u)

  def special(self, u: UOp) -> str:
    kind, dim = u.arg[0][0], int(u.arg[0][-1])
    if kind == "l": self.local_dims[dim] = u.arg[1]
    fname = f"{SPECIAL_INTRINSICS[kind]}.{'xyz'[dim]}"
    self.decls.add(f"declare i32 @{fname}()")
    out = self.op(f"call i32 @{fname}()")
    return out if ltype(u.dtype) == "i32" else self.op(f"zext i32 {out} to {ltype(u.dtype)}")

  def alu(self, u: UOp) -> str:
    dt = _as_float(u.src[0].dtype)
    if u.op is Ops.SIN: return self.in_float32(self.ref(u.src[0]), dt, self.sin)
    if u.op in (Ops.EXP2, Ops.LOG2) and dt.scalar == dtypes.float64:  # AMDGPU has them in single precision only (as NV)
      return self.in_float32(self.ref(u.src[0]), dt, lambda x, tf: self.intrinsic(u.op.name.lower(), tf, [x]))
    return super().alu(u)

  def in_float32(self, x: str, dt: DType, fn) -> str:
    """fn(x, float type) computed in float32 for a half, float or double x, and converted back."""
    t, tf = ltype(dt), with_scalar(ltype(dt), "float")
    if dt.scalar == dtypes.float32: return fn(x, tf)
    out = fn(self.op(f"{'fpext' if dt.scalar.itemsize < 4 else 'fptrunc'} {t} {x} to {tf}"), tf)
    return self.op(f"{'fptrunc' if dt.scalar.itemsize < 4 else 'fpext'} {tf} {out} to {t}")

  def sin(self, xf: str, tf: str) -> str:
    """LLVM lowers llvm.sin to the hardware's v_sin, accurate only near zero: take whole turns off first (half and
    double go through float32, as on NV: AMDGPU has no double-precision sine instruction)."""
    turns = self.op(f"fmul {tf} {xf}, {imm(tf, _f32(1 / (2 * math.pi)))}")
    whole = self.intrinsic("rint", tf, [turns])
    neg = self.op(f"fneg {tf} {whole}")
    hi = self.intrinsic("fma", tf, [neg, imm(tf, _f32(TWO_PI_HI)), xf])
    r = self.intrinsic("fma", tf, [neg, imm(tf, _f32(TWO_PI_LO)), hi])
    return self.intrinsic("sin", tf, [r])
