"""The RDNA4 decoder and executor against LLVM itself: LLVM IR kernels written here and kernels tg renders are compiled
by llvmlite for gfx1201; every instruction of the object's .text must decode to the line of LLVM's own assembly
listing of the same module (branches to its labels), and the kernels run on the model against numpy: workgroup ids in
ttmp9/ttmp7, the split barrier, SALU floats, pseudo-scalar transcendentals, IEEE minimum/maximum, 64-bit scalar math,
sub-dword scalar loads, atomics returning through TH, f16 and f64 math."""
from __future__ import annotations
import re
import numpy as np
import pytest
import llvmlite.binding as llvm
from drivers.mock.amd.shader.rdna4 import RDNA3_NAME, decode
from tests.drivers.mock.test_amd_cdna3_llvm import listing, text_section, tg_programs
from tests.drivers.mock.test_amd_shader_kernels import ATTRS, HEAD, compile_kernel, launch

ARCH = "gfx1201"
DECL = """declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare i32 @llvm.amdgcn.workgroup.id.y()
declare i32 @llvm.amdgcn.workgroup.id.z()
declare void @llvm.amdgcn.s.barrier()
declare float @llvm.exp2.f32(float)
declare float @llvm.sqrt.f32(float)
declare float @llvm.minimum.f32(float, float)
declare float @llvm.maximum.f32(float, float)
declare float @llvm.maxnum.f32(float, float)
"""
def module(body: str) -> str: return HEAD + DECL + body + f"\nattributes #0 = {{ {ATTRS} }}\n"

KERNELS = {
  "vadd_fdiv": module("""
define amdgpu_kernel void @k(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c, i32 %n) #0 {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %g = call i32 @llvm.amdgcn.workgroup.id.x()
  %g2 = mul i32 %g, 32
  %i = add i32 %g2, %t
  %ok = icmp slt i32 %i, %n
  br i1 %ok, label %body, label %end
body:
  %pa = getelementptr float, ptr addrspace(1) %a, i32 %i
  %pb = getelementptr float, ptr addrspace(1) %b, i32 %i
  %pc = getelementptr float, ptr addrspace(1) %c, i32 %i
  %x = load float, ptr addrspace(1) %pa
  %y = load float, ptr addrspace(1) %pb
  %z = fadd float %x, %y
  %w = fdiv float %z, %y
  store float %w, ptr addrspace(1) %pc
  br label %end
end:
  ret void
}"""),
  "group_ids": module("""
define amdgpu_kernel void @k(ptr addrspace(1) %out) #0 {
  %x = call i32 @llvm.amdgcn.workgroup.id.x()
  %y = call i32 @llvm.amdgcn.workgroup.id.y()
  %z = call i32 @llvm.amdgcn.workgroup.id.z()
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %y100 = mul i32 %y, 100
  %z10k = mul i32 %z, 10000
  %v0 = add i32 %x, %y100
  %v = add i32 %v0, %z10k
  %zi = mul i32 %z, 6
  %yi = mul i32 %y, 3
  %g0 = add i32 %zi, %yi
  %g = add i32 %g0, %x
  %g4 = mul i32 %g, 4
  %i = add i32 %g4, %t
  %p = getelementptr i32, ptr addrspace(1) %out, i32 %i
  store i32 %v, ptr addrspace(1) %p
  ret void
}"""),
  "reduce": module("""
@lds = internal addrspace(3) global [64 x float] poison, align 4
define amdgpu_kernel void @k(ptr addrspace(1) %out, ptr addrspace(1) %in) #0 {
entry:
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %g = call i32 @llvm.amdgcn.workgroup.id.x()
  %base = shl i32 %g, 6
  %i = add i32 %base, %t
  %p = getelementptr float, ptr addrspace(1) %in, i32 %i
  %x = load float, ptr addrspace(1) %p
  %l = getelementptr [64 x float], ptr addrspace(3) @lds, i32 0, i32 %t
  store float %x, ptr addrspace(3) %l
  call void @llvm.amdgcn.s.barrier()
  br label %loop
loop:
  %s = phi i32 [32, %entry], [%s2, %body]
  %c = icmp ult i32 %t, %s
  br i1 %c, label %add, label %body
add:
  %o = add i32 %t, %s
  %lo = getelementptr [64 x float], ptr addrspace(3) @lds, i32 0, i32 %o
  %a = load float, ptr addrspace(3) %l
  %b = load float, ptr addrspace(3) %lo
  %ab = fadd float %a, %b
  store float %ab, ptr addrspace(3) %l
  br label %body
body:
  call void @llvm.amdgcn.s.barrier()
  %s2 = lshr i32 %s, 1
  %d = icmp eq i32 %s2, 0
  br i1 %d, label %done, label %loop
done:
  %z = icmp eq i32 %t, 0
  br i1 %z, label %w, label %e
w:
  %r = load float, ptr addrspace(3) @lds
  %q = getelementptr float, ptr addrspace(1) %out, i32 %g
  store float %r, ptr addrspace(1) %q
  br label %e
e:
  ret void
}"""),
  "scalar_float": module("""
define amdgpu_kernel void @k(ptr addrspace(1) %out, float %a, float %b, float %c) #0 {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %m = fmul float %a, %b
  %s = fadd float %m, %c
  %mx = call float @llvm.maxnum.f32(float %s, float %b)
  %e = call float @llvm.exp2.f32(float %a)
  %q = call float @llvm.sqrt.f32(float %c)
  %lt = fcmp olt float %a, %c
  %sel = select i1 %lt, float %e, float %q
  %tf = uitofp i32 %t to float
  %r0 = fadd float %tf, %mx
  %r = fadd float %r0, %sel
  %p = getelementptr float, ptr addrspace(1) %out, i32 %t
  store float %r, ptr addrspace(1) %p
  %ci = fptosi float %c to i32
  %p2 = getelementptr i32, ptr addrspace(1) %out, i32 64
  store i32 %ci, ptr addrspace(1) %p2
  ret void
}"""),
  "minmax": module("""
define amdgpu_kernel void @k(ptr addrspace(1) %out, ptr addrspace(1) %a, ptr addrspace(1) %b) #0 {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr float, ptr addrspace(1) %a, i32 %t
  %pb = getelementptr float, ptr addrspace(1) %b, i32 %t
  %x = load float, ptr addrspace(1) %pa
  %y = load float, ptr addrspace(1) %pb
  %mn = call float @llvm.minimum.f32(float %x, float %y)
  %mx = call float @llvm.maximum.f32(float %x, float %y)
  %nm = call float @llvm.maxnum.f32(float %x, float %y)
  %i = mul i32 %t, 3
  %p0 = getelementptr float, ptr addrspace(1) %out, i32 %i
  store float %mn, ptr addrspace(1) %p0
  %p1 = getelementptr float, ptr addrspace(1) %p0, i32 1
  store float %mx, ptr addrspace(1) %p1
  %p2 = getelementptr float, ptr addrspace(1) %p0, i32 2
  store float %nm, ptr addrspace(1) %p2
  ret void
}"""),
  "int64": module("""
define amdgpu_kernel void @k(ptr addrspace(1) %out, i64 %a, i64 %b, ptr addrspace(4) %bytes) #0 {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %s = add i64 %a, %b
  %m = mul i64 %a, %b
  %pb = getelementptr i8, ptr addrspace(4) %bytes, i64 3
  %u8 = load i8, ptr addrspace(4) %pb
  %u = zext i8 %u8 to i32
  %ph = getelementptr i16, ptr addrspace(4) %bytes, i64 3
  %i16 = load i16, ptr addrspace(4) %ph
  %h = sext i16 %i16 to i32
  %uh = add i32 %u, %h
  %uh64 = sext i32 %uh to i64
  %w0 = xor i64 %s, %m
  %w = add i64 %w0, %uh64
  %t64 = zext i32 %t to i64
  %tm = mul i64 %t64, %a
  %v = add i64 %tm, %w
  %p = getelementptr i64, ptr addrspace(1) %out, i32 %t
  store i64 %v, ptr addrspace(1) %p
  ret void
}"""),
  "atomics": module("""
define amdgpu_kernel void @k(ptr addrspace(1) %out, ptr addrspace(1) %ctr) #0 {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %old = atomicrmw add ptr addrspace(1) %ctr, i32 1 syncscope("agent") monotonic
  %mx = atomicrmw max ptr addrspace(1) %ctr, i32 0 syncscope("agent") monotonic
  %p = getelementptr i32, ptr addrspace(1) %out, i32 %t
  store i32 %old, ptr addrspace(1) %p
  ret void
}"""),
  "half_double": module("""
define amdgpu_kernel void @k(ptr addrspace(1) %h, ptr addrspace(1) %d) #0 {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %ph = getelementptr half, ptr addrspace(1) %h, i32 %t
  %x = load half, ptr addrspace(1) %ph
  %x2 = fmul half %x, %x
  %x3 = fadd half %x2, 0xH3C00
  store half %x3, ptr addrspace(1) %ph
  %pd = getelementptr double, ptr addrspace(1) %d, i32 %t
  %y = load double, ptr addrspace(1) %pd
  %y2 = fdiv double 1.0, %y
  %y3 = fadd double %y2, %y
  store double %y3, ptr addrspace(1) %pd
  ret void
}"""),
}

def check_against_listing(code: bytes, asm: str) -> list:
  """Decode all of `code` and compare with LLVM's listing line by line; returns the decoded instructions."""
  want, labels = listing(asm)
  insts, offsets, at = [], [], 0
  while at < len(code):
    insts.append(decode(code, at)); offsets.append(at); at += insts[-1].size
  assert len(insts) >= len(want)
  assert {i.text for i in insts[len(want):]} <= {"s_code_end"}, "only padding may follow the listed code"
  for inst, off, line in zip(insts, offsets, want):
    label = re.search(r"\.LBB\w+", line)
    if label:  # LLVM prints the label; the word holds the dword distance from the next instruction
      assert inst.text.split()[0] == line.split()[0]
      simm = inst.fields["simm16"]
      assert off + 4 + 4 * (simm - 0x10000 if simm & 0x8000 else simm) == offsets[labels[label.group()]], line
    else: assert inst.text == line
    mnemonic = re.sub(r"_(e32|e64)$", "", line.split()[0])
    if mnemonic.startswith("v_dual"): continue
    assert inst.name == RDNA3_NAME.get(mnemonic, mnemonic), line
  return insts[:len(want)]

@pytest.mark.parametrize("kernel", list(KERNELS))
def test_llvm_kernel_decodes_to_llvm_listing(kernel):
  asm, obj = compile_kernel(KERNELS[kernel], ARCH)
  assert len(check_against_listing(text_section(obj), asm)) > 5

def test_families_and_gfx12_instructions_reached():
  """The kernels above exercise every family the decoder claims and the gfx12-only forms the executor runs."""
  seen, names = set(), set()
  for src in KERNELS.values():
    asm, obj = compile_kernel(src, ARCH)
    for inst in check_against_listing(text_section(obj), asm):
      seen.add(inst.encoding); names.add(inst.text.split()[0])
  assert seen >= {"SOP1", "SOP2", "SOPC", "SOPP", "SMEM", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "DS", "GLOBAL"}
  assert names >= {"s_barrier_signal", "s_barrier_wait", "s_wait_kmcnt", "s_wait_loadcnt", "s_wait_dscnt", "s_wait_alu",
                   "v_s_exp_f32", "v_minimum_f32", "v_maximum_f32", "s_load_u8", "s_load_i16", "s_add_nc_u64",
                   "v_mad_co_u64_u32", "s_fmac_f32"}, sorted(names)

def test_tg_rendered_kernels_decode_to_llvm_listing():
  amdgpu = pytest.importorskip("codegen.amdgpu")
  from codegen.amdgpu_compiler import AMDGPUCompiler
  from codegen.program import get_program
  renderer, compiler = amdgpu.AMDGPURenderer(ARCH), AMDGPUCompiler(ARCH)
  checked = 0
  for _, ast, opts in tg_programs():
    spec = get_program(ast, renderer, opts)
    checked += len(check_against_listing(text_section(compiler.compile(spec.src)), compiler.disassemble(spec.src, b"")))
  assert checked > 100

# ---- the same kernels run on the model
RNG = np.random.default_rng(12)

def test_vadd_fdiv_partial_grid_uses_ttmp9():
  n = 70
  a, b = RNG.random(96).astype(np.float32), RNG.random(96).astype(np.float32) + 0.5
  c = np.full(96, -1, np.float32)
  launch(KERNELS["vadd_fdiv"], "k", (3, 1, 1), (32, 1, 1), [a, b, c, np.int32(n)], arch=ARCH)
  np.testing.assert_array_equal(c[:n], (a[:n] + b[:n]) / b[:n])   # LLVM's fdiv expansion is correctly rounded
  assert (c[n:] == -1).all()

def test_workgroup_ids_in_three_dimensions():
  out = np.zeros(3 * 2 * 2 * 4, np.int32)
  launch(KERNELS["group_ids"], "k", (3, 2, 2), (4, 1, 1), [out], arch=ARCH)
  want = [x + 100 * y + 10000 * z for z in range(2) for y in range(2) for x in range(3) for _ in range(4)]
  np.testing.assert_array_equal(out, want)

def test_lds_reduction_over_the_split_barrier():
  x = RNG.random(4 * 64).astype(np.float32)
  out = np.zeros(4, np.float32)
  launch(KERNELS["reduce"], "k", (4, 1, 1), (64, 1, 1), [out, x], arch=ARCH)
  np.testing.assert_allclose(out, x.reshape(4, 64).sum(1), rtol=1e-6)

@pytest.mark.parametrize("a, b, c", [(1.5, -2.25, 4.0), (3.0, 0.5, 2.0)])
def test_scalar_float_math_and_pseudo_scalar_transcendentals(a, b, c):
  out = np.zeros(65, np.float32)
  launch(KERNELS["scalar_float"], "k", (1, 1, 1), (32, 1, 1), [out, np.float32(a), np.float32(b), np.float32(c)], arch=ARCH)
  f = np.float32
  s = f(f(a) * f(b) + f(c))
  sel = f(2.0 ** a) if a < c else f(np.sqrt(c))
  want = (np.arange(32, dtype=np.float32) + max(s, f(b))) + sel
  np.testing.assert_allclose(out[:32], want, rtol=2e-7)
  assert out[64:].view(np.int32)[0] == int(c)

def test_ieee_minimum_maximum_and_maxnum():
  a = np.array([1, np.nan, -0.0, 0.0, 3, -np.inf, 2, np.nan] * 4, np.float32)
  b = np.array([2, 1, 0.0, -0.0, np.nan, 5, 2, np.nan] * 4, np.float32)
  out = np.zeros(96, np.float32)
  launch(KERNELS["minmax"], "k", (1, 1, 1), (32, 1, 1), [out, a, b], arch=ARCH)
  got = out.reshape(32, 3)
  np.testing.assert_array_equal(got[:, 0], np.minimum(a, b))     # numpy's minimum/maximum propagate NaN like IEEE's
  np.testing.assert_array_equal(got[:, 1], np.maximum(a, b))
  np.testing.assert_array_equal(got[:, 2], np.fmax(a, b))
  assert np.signbit(got[2:4, 0]).all() and not np.signbit(got[2:4, 1]).any()

def test_int64_scalar_math_and_sub_dword_scalar_loads():
  a, b = 0x1234_5678_9ABC_DEF1, 0x0FED_CBA9_8765_4321
  data = np.array([0x11, 0x22, 0x33, 0xF7, 0, 0, 0x18, 0xFC], np.uint8)   # byte 3 = 0xF7, i16 at 6 = -1000
  out = np.zeros(32, np.uint64)
  launch(KERNELS["int64"], "k", (1, 1, 1), (32, 1, 1), [out, np.uint64(a), np.uint64(b), data], arch=ARCH)
  m = 2 ** 64
  want = [(t * a + (((a + b) % m) ^ (a * b % m)) + 0xF7 - 1000) % m for t in range(32)]
  assert out.tolist() == want

def test_atomics_return_the_old_value():
  out, ctr = np.zeros(64, np.uint32), np.array([5], np.uint32)
  launch(KERNELS["atomics"], "k", (1, 1, 1), (64, 1, 1), [out, ctr], arch=ARCH)
  assert sorted(out.tolist()) == list(range(5, 5 + 64)) and ctr[0] == 5 + 64

def test_half_and_double():
  h = (RNG.random(32) * 4 - 2).astype(np.float16)
  d = RNG.random(32) + 0.25
  h0, d0 = h.copy(), d.copy()
  launch(KERNELS["half_double"], "k", (1, 1, 1), (32, 1, 1), [h, d], arch=ARCH)
  np.testing.assert_array_equal(h, (h0 * h0 + np.float16(1)).astype(np.float16))
  np.testing.assert_array_equal(d, 1.0 / d0 + d0)
