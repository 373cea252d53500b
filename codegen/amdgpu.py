"""Renders a linear program as LLVM IR for AMD GPUs (amdgcn-amd-amdhsa): one amdgpu_kernel taking global buffer
pointers, then int32 Variables, through the kernarg segment only. Launch indices are LLVM's workgroup/workitem id
intrinsics, local memory is an addrspace(3) array, accumulators live in private memory (addrspace(5)). The
arithmetic, casts and bfloat16 handling are the CPU LLVM renderer's (codegen/llvmir.py)."""
from __future__ import annotations
import math, re
from ir.dtype import DType, dtypes
from ir.helpers import prod
from ir.ops import Ops
from ir.uop import UOp
from codegen.llvmir import _Function, _suffix, const_text, imm, ltype, with_scalar
from codegen.renderer import Renderer
from codegen.sine import pi_over_2_parts
from codegen.tensor_core import mfma_16x16x16, wmma_16x16x16

GLOBAL, LOCAL, PRIVATE = 1, 3, 5  # AMDGPUUsage.rst "Address Spaces": global, local (LDS), private (scratch)
# workgroup id / workitem id intrinsics per SPECIAL prefix (AMDGPUUsage.rst "LLVM IR Intrinsics")
SPECIAL_INTRINSICS = {"g": "llvm.amdgcn.workgroup.id", "l": "llvm.amdgcn.workitem.id"}
# implicit inputs the driver never provides: LLVM must neither read them nor reserve hidden kernel arguments for them
# (AMDGPUAttributes.def; "amdgpu-implicitarg-num-bytes"="0" keeps the metadata's hidden_* arguments away)
NO_IMPLICIT_INPUTS = ("amdgpu-no-implicitarg-ptr", "amdgpu-no-dispatch-ptr", "amdgpu-no-queue-ptr", "amdgpu-no-dispatch-id",
                      "amdgpu-no-hostcall-ptr", "amdgpu-no-heap-ptr", "amdgpu-no-multigrid-sync-arg", "amdgpu-no-completion-action",
                      "amdgpu-no-default-queue", "amdgpu-no-lds-kernel-id")
PI_OVER_2_PARTS = pi_over_2_parts(33)  # k * part is exact in double precision for |k| < 2**20

def parse_arch(arch: str) -> tuple[int, int, int]:
  """gfx<major><minor hex><stepping hex> -> (major, minor, stepping); ValueError for anything else or pre-gfx9."""
  if not (m := re.fullmatch(r"gfx(\d{1,2})([0-9a-f])([0-9a-f])", arch)) or int(m.group(1)) < 9:
    raise ValueError(f"the AMDGPU renderer targets gfx9 and newer (e.g. gfx1100, gfx942), not {arch!r}")
  return int(m.group(1)), int(m.group(2), 16), int(m.group(3), 16)

def wave_size(arch: str) -> int:
  """RDNA (gfx10+) runs wave32 (tg's choice; it also has wave64), CDNA/GCN (gfx9) only wave64."""
  return 32 if parse_arch(arch)[0] >= 10 else 64

def tensor_core_kinds(arch: str) -> tuple:
  """gfx11 (RDNA3) has v_wmma in wave32, gfx94x/gfx950 (CDNA3/4) v_mfma 16x16x16 in wave64 (gfx90a's bf16 form is
  another instruction); gfx12 lays WMMA fragments out differently."""
  major, minor, _ = parse_arch(arch)
  if major == 11: return (wmma_16x16x16,)
  return (mfma_16x16x16,) if major == 9 and minor in (4, 5) else ()

class AMDGPURenderer(Renderer):
  device = "AMD"
  has_local = True
  launch_dims = 3
  vector_width = 4  # 128-bit global loads and stores (global_load_b128 / global_load_dwordx4)
  def __init__(self, arch: str = "gfx1100"):
    parse_arch(arch)
    self.arch = arch
    self.tensor_cores = tuple(tc(dt) for tc in tensor_core_kinds(arch) for dt in (dtypes.float16, dtypes.bfloat16))
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
    if u.op is Ops.WMMA: return self.mfma(u) if u.arg.instruction == "mfma" else self.wmma(u)
    return super().render_one(u)

  def wmma(self, u: UOp) -> str:
    """D = A @ B + C through LLVM's wave32 WMMA intrinsic (IntrinsicsAMDGPU.td int_amdgcn_wmma_f32_16x16x16_f16/_bf16):
    A and B as <16 x half>, or bfloat16 as <16 x i16> bits (its registers hold floats that are already bfloat16)."""
    a, b, c = u.src
    bf16 = a.dtype.scalar == dtypes.bfloat16
    ra, rb = (self.float_to_bf16_bits(self.ref(x), ltype(x.dtype)) if bf16 else self.ref(x) for x in (a, b))
    t, tc, td = with_scalar(ltype(a.dtype), "i16") if bf16 else ltype(a.dtype), ltype(c.dtype), ltype(u.dtype)
    fname = f"llvm.amdgcn.wmma.f32.16x16x16.{'bf16' if bf16 else 'f16'}.{_suffix(td)}.{_suffix(t)}"
    self.decls.add(f"declare {td} @{fname}({t}, {t}, {tc})")
    return self.op(f"call {td} @{fname}({t} {ra}, {t} {rb}, {tc} {self.ref(c)})")

  def mfma(self, u: UOp) -> str:
    """D = A @ B + C through LLVM's wave64 MFMA intrinsic (IntrinsicsAMDGPU.td int_amdgcn_mfma_f32_16x16x16f16 and
    _16x16x16bf16_1k: A and B as <4 x half> or <4 x i16> bfloat16 bits, then cbsz, abid, blgp = 0: no broadcast)."""
    a, b, c = u.src
    bf16 = a.dtype.scalar == dtypes.bfloat16
    ra, rb = (self.float_to_bf16_bits(self.ref(x), ltype(x.dtype)) if bf16 else self.ref(x) for x in (a, b))
    t, tc, td = with_scalar(ltype(a.dtype), "i16") if bf16 else ltype(a.dtype), ltype(c.dtype), ltype(u.dtype)
    fname = f"llvm.amdgcn.mfma.f32.16x16x16{'bf16.1k' if bf16 else 'f16'}"
    self.decls.add(f"declare {td} @{fname}({t}, {t}, {tc}, i32, i32, i32)")
    return self.op(f"call {td} @{fname}({t} {ra}, {t} {rb}, {tc} {self.ref(c)}, i32 0, i32 0, i32 0)")

  def special(self, u: UOp) -> str:
    kind, dim = u.arg[0][0], int(u.arg[0][-1])
    if kind == "l": self.local_dims[dim] = u.arg[1]
    fname = f"{SPECIAL_INTRINSICS[kind]}.{'xyz'[dim]}"
    self.decls.add(f"declare i32 @{fname}()")
    out = self.op(f"call i32 @{fname}()")
    return out if ltype(u.dtype) == "i32" else self.op(f"zext i32 {out} to {ltype(u.dtype)}")

  # ---- exp2, log2 and sin: double precision has no instruction and LLVM no library to call; v_sin's error is absolute ----
  FUSED = "fma"
  def fmax(self, a: str, b: str, t: str) -> str: return self.intrinsic("maximum", t, [a, b])  # v_max_f32 and its NaN rules
  def sin(self, x: str, dt: DType) -> str: return self.sin_f64(x, ltype(dt)) if dt.scalar == dtypes.float64 else self.in_float32(x, dt, self.sin_f32)
  def exp2(self, x: str, dt: DType) -> str: return self.exp2_f64(x, ltype(dt)) if dt.scalar == dtypes.float64 else self.intrinsic("exp2", ltype(dt), [x])
  def log2(self, x: str, dt: DType) -> str: return self.log2_f64(x, ltype(dt)) if dt.scalar == dtypes.float64 else self.intrinsic("log2", ltype(dt), [x])

  def quadrant_bits(self, k: str, t: str, ti: str) -> str:  # exact up to 2**31: AMD's sin has no libm for large lanes
    return self.intrinsic("fptosi.sat", t, [k], ret_type=ti)

  def exp2_f64(self, x: str, t: str) -> str:
    """2**x = 2**n * 2**f with n = rint(x) and |f| <= 1/2 (f exact): 2**f by its Taylor series (terms (f ln2)^k / k!
    below 2**-56 after k = 14), scaled by ldexp. x is clamped to +-1100 first, beyond which the result is inf or 0."""
    ti = with_scalar(t, "i32")
    big = self.select(self.op(f"fcmp ogt {t} {x}, {imm(t, '1100.0')}"), t, imm(t, "1100.0"), x)  # NaN stays NaN
    xc = self.select(self.op(f"fcmp olt {t} {big}, {imm(t, '-1100.0')}"), t, imm(t, "-1100.0"), big)
    n = self.intrinsic("rint", t, [xc])
    f = self.op(f"fsub {t} {xc}, {n}")
    poly = self.horner(f, t, [math.log(2) ** k / math.factorial(k) for k in range(15)])
    return self.ldexp(poly, self.intrinsic("fptosi.sat", t, [n], ret_type=ti), t, ti)

  def log2_f64(self, x: str, t: str) -> str:
    """x = m * 2**e with m in [sqrt(1/2), sqrt(2)): log2 x = e + 2 atanh(s) / ln 2, s = (m - 1) / (m + 1), |s| < 0.172,
    atanh by its series (12 terms: the rest is under 2**-60). Zero, negatives, inf and NaN as C's log2."""
    ti = with_scalar(t, "i32")
    fname = f"llvm.frexp.{_suffix(t)}.{_suffix(ti)}"
    self.decls.add(f"declare {{ {t}, {ti} }} @{fname}({t})")
    parts = self.op(f"call {{ {t}, {ti} }} @{fname}({t} {x})")
    m, e = self.op(f"extractvalue {{ {t}, {ti} }} {parts}, 0"), self.op(f"extractvalue {{ {t}, {ti} }} {parts}, 1")
    low = self.op(f"fcmp olt {t} {m}, {imm(t, const_text(math.sqrt(0.5), dtypes.float64))}")
    m = self.select(low, t, self.op(f"fmul {t} {m}, {imm(t, '2.0')}"), m)
    borrow = self.op(f"zext {with_scalar(t, 'i1')} {low} to {ti}")
    e = self.op(f"sub {ti} {e}, {borrow}")
    one = imm(t, "1.0")
    s = self.op(f"fdiv {t} {self.op(f'fsub {t} {m}, {one}')}, {self.op(f'fadd {t} {m}, {one}')}")
    series = self.horner(self.op(f"fmul {t} {s}, {s}"), t, [1 / (2 * k + 1) for k in range(12)])
    twice_s = self.op(f"fmul {t} {s}, {imm(t, '2.0')}")
    ln_m = self.op(f"fmul {t} {twice_s}, {series}")
    out = self.intrinsic("fma", t, [ln_m, imm(t, const_text(1 / math.log(2), dtypes.float64)), self.op(f"sitofp {ti} {e} to {t}")])
    return self.log2_special_cases(x, t, out)

  def sin_f64(self, x: str, t: str) -> str:
    """x = k pi/2 + r, |r| <= pi/4, with pi/2 in three 33-bit parts (k * part exact for |k| < 2**20, so r keeps its
    bits up to |x| ~ 1.6e6); then +-sin r or +-cos r by quadrant k mod 4, each by its Taylor series to the r**20 term."""
    ti = with_scalar(t, "i32")
    k = self.intrinsic("rint", t, [self.op(f"fmul {t} {x}, {imm(t, const_text(2 / math.pi, dtypes.float64))}")])
    neg_k, r = self.op(f"fneg {t} {k}"), x
    for part in PI_OVER_2_PARTS: r = self.intrinsic("fma", t, [neg_k, imm(t, const_text(part, dtypes.float64)), r])
    z = self.op(f"fmul {t} {r}, {r}")
    sin_r = self.op(f"fmul {t} {r}, {self.horner(z, t, [(-1) ** j / math.factorial(2 * j + 1) for j in range(10)])}")
    cos_r = self.horner(z, t, [(-1) ** j / math.factorial(2 * j) for j in range(11)])
    return self.by_quadrant(x, k, sin_r, cos_r, t, ti)

  def ldexp(self, x: str, n: str, t: str, ti: str) -> str:
    fname = f"llvm.ldexp.{_suffix(t)}.{_suffix(ti)}"
    self.decls.add(f"declare {t} @{fname}({t}, {ti})")
    return self.op(f"call {t} @{fname}({t} {x}, {ti} {n})")

