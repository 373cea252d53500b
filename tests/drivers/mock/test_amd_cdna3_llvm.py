"""The CDNA3 decoder against LLVM itself: hand-written LLVM IR kernels (vector add with fdiv, an LDS + barrier
reduction loop, f16, bf16, f64, 64-bit integer math, int8 vectors, packed math, atomics, scratch, wave intrinsics,
MFMA on f16, bf16 and f64, buffer loads and stores, ds_swizzle, s_sendmsg) and kernels tg renders are compiled by llvmlite for gfx942 and gfx950; every instruction of the object's .text
must decode to the text of LLVM's own assembly listing of the same module, and branches must land on its labels."""
import re
import pytest
import llvmlite.binding as llvm
from drivers.elf import parse_sections
from drivers.mock.amd.shader.cdna3 import decode

ARCHS = ["gfx942", "gfx950"]
HEADER = """target triple = "amdgcn-amd-amdhsa"
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare void @llvm.amdgcn.s.barrier()
"""
KERNELS = {
  "vadd_fdiv": """
define amdgpu_kernel void @vadd(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %g = call i32 @llvm.amdgcn.workgroup.id.x()
  %g2 = mul i32 %g, 256
  %i = add i32 %g2, %t
  %pa = getelementptr float, ptr addrspace(1) %a, i32 %i
  %pb = getelementptr float, ptr addrspace(1) %b, i32 %i
  %pc = getelementptr float, ptr addrspace(1) %c, i32 %i
  %x = load float, ptr addrspace(1) %pa
  %y = load float, ptr addrspace(1) %pb
  %z = fadd float %x, %y
  %w = fdiv float %z, %y
  store float %w, ptr addrspace(1) %pc
  ret void
}""",
  "reduce": """
@lds = internal addrspace(3) global [256 x float] poison, align 4
define amdgpu_kernel void @reduce(ptr addrspace(1) %out, ptr addrspace(1) %in) {
entry:
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %g = call i32 @llvm.amdgcn.workgroup.id.x()
  %base = shl i32 %g, 8
  %i = add i32 %base, %t
  %p = getelementptr float, ptr addrspace(1) %in, i32 %i
  %x = load float, ptr addrspace(1) %p
  %l = getelementptr [256 x float], ptr addrspace(3) @lds, i32 0, i32 %t
  store float %x, ptr addrspace(3) %l
  call void @llvm.amdgcn.s.barrier()
  br label %loop
loop:
  %s = phi i32 [128, %entry], [%s2, %body]
  %c = icmp ult i32 %t, %s
  br i1 %c, label %add, label %body
add:
  %o = add i32 %t, %s
  %lo = getelementptr [256 x float], ptr addrspace(3) @lds, i32 0, i32 %o
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
}""",
  "half": """
define amdgpu_kernel void @half(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr half, ptr addrspace(1) %a, i32 %t
  %pb = getelementptr half, ptr addrspace(1) %b, i32 %t
  %pc = getelementptr half, ptr addrspace(1) %c, i32 %t
  %x = load half, ptr addrspace(1) %pa
  %y = load half, ptr addrspace(1) %pb
  %m = fmul half %x, %y
  %s = fadd half %m, 0xH3C00
  %mx = call half @llvm.maxnum.f16(half %s, half %x)
  %e = fpext half %mx to float
  %e2 = call float @llvm.exp2.f32(float %e)
  %h = fptrunc float %e2 to half
  store half %h, ptr addrspace(1) %pc
  ret void
}
declare half @llvm.maxnum.f16(half, half)
declare float @llvm.exp2.f32(float)""",
  "double": """
define amdgpu_kernel void @dbl(ptr addrspace(1) %a, ptr addrspace(1) %c, double %k) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr double, ptr addrspace(1) %a, i32 %t
  %pc = getelementptr double, ptr addrspace(1) %c, i32 %t
  %x = load double, ptr addrspace(1) %pa
  %m = fmul double %x, %k
  %d = fdiv double %m, 3.0
  %s = call double @llvm.sqrt.f64(double %d)
  %f = fsub double %s, 0.5
  %cmp = fcmp olt double %f, 0.0
  %r = select i1 %cmp, double 0.0, double %f
  %i = fptosi double %r to i32
  %b = sitofp i32 %i to double
  %r2 = fadd double %r, %b
  store double %r2, ptr addrspace(1) %pc
  ret void
}
declare double @llvm.sqrt.f64(double)""",
  "i64": """
define amdgpu_kernel void @i64(ptr addrspace(1) %a, ptr addrspace(1) %c, i64 %k, i32 %n) {
entry:
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %t64 = zext i32 %t to i64
  %pa = getelementptr i64, ptr addrspace(1) %a, i64 %t64
  %x = load i64, ptr addrspace(1) %pa
  br label %loop
loop:
  %i = phi i32 [0, %entry], [%i2, %loop]
  %acc = phi i64 [%x, %entry], [%acc3, %loop]
  %m = mul i64 %acc, %k
  %acc2 = add i64 %m, 12345678901
  %sh = lshr i64 %acc2, 7
  %acc3 = xor i64 %acc2, %sh
  %i2 = add i32 %i, 1
  %c1 = icmp slt i32 %i2, %n
  br i1 %c1, label %loop, label %done
done:
  %dv = udiv i64 %acc3, %k
  %pc = getelementptr i64, ptr addrspace(1) %c, i64 %t64
  store i64 %dv, ptr addrspace(1) %pc
  ret void
}""",
  "intmath": """
define amdgpu_kernel void @intmath(ptr addrspace(1) %a, ptr addrspace(1) %c, i32 %k) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr i32, ptr addrspace(1) %a, i32 %t
  %x = load i32, ptr addrspace(1) %pa
  %d = sdiv i32 %x, %k
  %r = urem i32 %x, 7
  %mn = call i32 @llvm.smin.i32(i32 %d, i32 %r)
  %b = and i32 %mn, 255
  %f = sitofp i32 %b to float
  %g = call float @llvm.floor.f32(float %f)
  %l = call float @llvm.log2.f32(float %g)
  %q = fptoui float %l to i32
  %u8 = trunc i32 %q to i8
  %pc = getelementptr i8, ptr addrspace(1) %c, i32 %t
  store i8 %u8, ptr addrspace(1) %pc
  ret void
}
declare i32 @llvm.smin.i32(i32, i32)
declare float @llvm.floor.f32(float)
declare float @llvm.log2.f32(float)""",
  "mfma": """
declare <4 x float> @llvm.amdgcn.mfma.f32.16x16x16f16(<4 x half>, <4 x half>, <4 x float>, i32, i32, i32)
define amdgpu_kernel void @mfma(ptr addrspace(1) %a, ptr addrspace(1) %c) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr <4 x half>, ptr addrspace(1) %a, i32 %t
  %x = load <4 x half>, ptr addrspace(1) %pa
  %pc = getelementptr <4 x float>, ptr addrspace(1) %c, i32 %t
  %acc = load <4 x float>, ptr addrspace(1) %pc
  %r = call <4 x float> @llvm.amdgcn.mfma.f32.16x16x16f16(<4 x half> %x, <4 x half> %x, <4 x float> %acc, i32 0, i32 0, i32 0)
  store <4 x float> %r, ptr addrspace(1) %pc
  ret void
}""",
  "mods": """
define amdgpu_kernel void @mods(ptr addrspace(1) %a, ptr addrspace(1) %c) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr float, ptr addrspace(1) %a, i32 %t
  %x = load float, ptr addrspace(1) %pa
  %ax = call float @llvm.fabs.f32(float %x)
  %n = fneg float %ax
  %f = call float @llvm.fma.f32(float %n, float %x, float 0.25)
  %g = call float @llvm.fma.f32(float %f, float %ax, float -1.0)
  %cl = call float @llvm.minnum.f32(float %g, float 1.0)
  %cl2 = call float @llvm.maxnum.f32(float %cl, float 0.0)
  %sq = call float @llvm.sqrt.f32(float %cl2)
  %m2 = fmul float %sq, 2.0
  %s = call float @llvm.sin.f32(float %m2)
  %e = fcmp ueq float %s, %x
  %r = select i1 %e, float 3.0, float %s
  %pc = getelementptr float, ptr addrspace(1) %c, i32 %t
  store float %r, ptr addrspace(1) %pc, align 4
  %pc2 = getelementptr float, ptr addrspace(1) %pc, i32 1000
  store float %x, ptr addrspace(1) %pc2, align 4
  ret void
}
declare float @llvm.fabs.f32(float)
declare float @llvm.fma.f32(float, float, float)
declare float @llvm.minnum.f32(float, float)
declare float @llvm.maxnum.f32(float, float)
declare float @llvm.sqrt.f32(float)
declare float @llvm.sin.f32(float)""",
  "atomics": """
define amdgpu_kernel void @atomics(ptr addrspace(1) %a, ptr addrspace(1) %c, i32 %k) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %p = getelementptr i32, ptr addrspace(1) %a, i32 %t
  %old = atomicrmw add ptr addrspace(1) %p, i32 %k syncscope("agent") monotonic
  %o2 = atomicrmw max ptr addrspace(1) %c, i32 %old syncscope("agent") monotonic
  %pf = getelementptr float, ptr addrspace(1) %c, i32 4
  %o3 = atomicrmw fadd ptr addrspace(1) %pf, float 1.0 syncscope("agent") monotonic
  %q = getelementptr i32, ptr addrspace(1) %c, i32 %t
  %pair = cmpxchg ptr addrspace(1) %q, i32 %o2, i32 7 syncscope("agent") monotonic monotonic
  %v = extractvalue { i32, i1 } %pair, 0
  %vol = load volatile i32, ptr addrspace(1) %q
  %sum = add i32 %v, %vol
  store atomic i32 %sum, ptr addrspace(1) %p syncscope("agent") release, align 4
  ret void
}""",
  "bytes": """
define amdgpu_kernel void @bytes(ptr addrspace(1) %a, ptr addrspace(1) %c) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr <4 x i8>, ptr addrspace(1) %a, i32 %t
  %x = load <4 x i8>, ptr addrspace(1) %pa
  %y = add <4 x i8> %x, <i8 1, i8 2, i8 3, i8 4>
  %z = mul <4 x i8> %y, %x
  %pc = getelementptr <4 x i8>, ptr addrspace(1) %c, i32 %t
  store <4 x i8> %z, ptr addrspace(1) %pc
  %ps = getelementptr i16, ptr addrspace(1) %a, i32 %t
  %s = load i16, ptr addrspace(1) %ps
  %s2 = ashr i16 %s, 3
  %s3 = mul i16 %s2, %s
  %pcs = getelementptr i16, ptr addrspace(1) %c, i32 %t
  store i16 %s3, ptr addrspace(1) %pcs
  ret void
}""",
  "pk": """
define amdgpu_kernel void @pk(ptr addrspace(1) %a, ptr addrspace(1) %c) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr <2 x half>, ptr addrspace(1) %a, i32 %t
  %x = load <2 x half>, ptr addrspace(1) %pa
  %y = fmul <2 x half> %x, %x
  %z = call <2 x half> @llvm.fma.v2f16(<2 x half> %y, <2 x half> %x, <2 x half> <half 1.0, half 2.0>)
  %pc = getelementptr <2 x half>, ptr addrspace(1) %c, i32 %t
  store <2 x half> %z, ptr addrspace(1) %pc
  %pf = getelementptr <2 x float>, ptr addrspace(1) %a, i32 %t
  %f = load <2 x float>, ptr addrspace(1) %pf
  %g = fmul <2 x float> %f, %f
  %h = fadd <2 x float> %g, %f
  %pcf = getelementptr <2 x float>, ptr addrspace(1) %c, i32 %t
  store <2 x float> %h, ptr addrspace(1) %pcf
  ret void
}
declare <2 x half> @llvm.fma.v2f16(<2 x half>, <2 x half>, <2 x half>)""",
  "bf16": """
define amdgpu_kernel void @bf(ptr addrspace(1) %a, ptr addrspace(1) %c) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr bfloat, ptr addrspace(1) %a, i32 %t
  %x = load bfloat, ptr addrspace(1) %pa
  %e = fpext bfloat %x to float
  %m = fmul float %e, %e
  %b = fptrunc float %m to bfloat
  %pc = getelementptr bfloat, ptr addrspace(1) %c, i32 %t
  store bfloat %b, ptr addrspace(1) %pc
  ret void
}""",
  "scratch": """
define amdgpu_kernel void @scr(ptr addrspace(1) %a, ptr addrspace(1) %c, i32 %k) {
  %arr = alloca [64 x i32], align 4, addrspace(5)
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  br label %fill
fill:
  %i = phi i32 [0, %0], [%i2, %fill]
  %pi = getelementptr [64 x i32], ptr addrspace(5) %arr, i32 0, i32 %i
  %v = mul i32 %i, %t
  store volatile i32 %v, ptr addrspace(5) %pi
  %i2 = add i32 %i, 1
  %d = icmp eq i32 %i2, 64
  br i1 %d, label %done, label %fill
done:
  %pk = getelementptr [64 x i32], ptr addrspace(5) %arr, i32 0, i32 %k
  %r = load volatile i32, ptr addrspace(5) %pk
  %pc = getelementptr i32, ptr addrspace(1) %c, i32 %t
  store i32 %r, ptr addrspace(1) %pc
  ret void
}""",
  "wave": """
declare i32 @llvm.amdgcn.mbcnt.lo(i32, i32)
declare i32 @llvm.amdgcn.mbcnt.hi(i32, i32)
declare i32 @llvm.amdgcn.ds.bpermute(i32, i32)
declare i32 @llvm.amdgcn.readlane.i32(i32, i32)
declare i32 @llvm.amdgcn.update.dpp.i32(i32, i32, i32, i32, i32, i1)
declare i64 @llvm.amdgcn.s.memtime()
@lds2 = internal addrspace(3) global [512 x float] poison, align 16
define amdgpu_kernel void @wave(ptr addrspace(1) %c, i32 %k) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %lo = call i32 @llvm.amdgcn.mbcnt.lo(i32 -1, i32 0)
  %id = call i32 @llvm.amdgcn.mbcnt.hi(i32 -1, i32 %lo)
  %a4 = shl i32 %id, 2
  %x = call i32 @llvm.amdgcn.ds.bpermute(i32 %a4, i32 %t)
  %y = call i32 @llvm.amdgcn.update.dpp.i32(i32 0, i32 %x, i32 273, i32 15, i32 15, i1 false)
  %z = call i32 @llvm.amdgcn.readlane.i32(i32 %y, i32 5)
  %p0 = getelementptr [512 x float], ptr addrspace(3) @lds2, i32 0, i32 %t
  %p1 = getelementptr float, ptr addrspace(3) %p0, i32 64
  %f0 = load float, ptr addrspace(3) %p0
  %f1 = load float, ptr addrspace(3) %p1
  %fs = fadd float %f0, %f1
  %fi = fptosi float %fs to i32
  %tm = call i64 @llvm.amdgcn.s.memtime()
  %tl = trunc i64 %tm to i32
  %s = add i32 %z, %fi
  %s2 = add i32 %s, %tl
  %pc = getelementptr i32, ptr addrspace(1) %c, i32 %t
  store i32 %s2, ptr addrspace(1) %pc
  ret void
}""",
  "vec": """
define amdgpu_kernel void @vec(ptr addrspace(1) %a, ptr addrspace(1) %c, i64 %n) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr <4 x float>, ptr addrspace(1) %a, i32 %t
  %x = load <4 x float>, ptr addrspace(1) %pa, align 16
  %pb = getelementptr <4 x float>, ptr addrspace(1) %pa, i32 -3
  %y = load <4 x float>, ptr addrspace(1) %pb, align 16
  %z = fsub <4 x float> %x, %y
  %pc = getelementptr <3 x float>, ptr addrspace(1) %c, i32 %t
  %w = shufflevector <4 x float> %z, <4 x float> poison, <3 x i32> <i32 0, i32 1, i32 2>
  store <3 x float> %w, ptr addrspace(1) %pc, align 4
  %q = sdiv i64 %n, 3
  %u = icmp ugt i64 %n, 1000
  br i1 %u, label %s, label %e
s:
  %pq = getelementptr i64, ptr addrspace(1) %c, i64 %q
  store i64 %n, ptr addrspace(1) %pq
  br label %e
e:
  ret void
}""",
  "buffer_mfma_swizzle": """
declare i32 @llvm.amdgcn.ds.swizzle(i32, i32)
declare void @llvm.amdgcn.s.sendmsg(i32, i32)
declare void @llvm.amdgcn.s.sleep(i32)
declare float @llvm.amdgcn.raw.buffer.load.f32(<4 x i32>, i32, i32, i32)
declare void @llvm.amdgcn.raw.buffer.store.f32(float, <4 x i32>, i32, i32, i32)
declare <16 x float> @llvm.amdgcn.mfma.f32.32x32x8bf16.1k(<4 x i16>, <4 x i16>, <16 x float>, i32, i32, i32)
declare <4 x double> @llvm.amdgcn.mfma.f64.16x16x4f64(double, double, <4 x double>, i32, i32, i32)
declare i32 @llvm.amdgcn.perm(i32, i32, i32)
declare i32 @llvm.amdgcn.ubfe.i32(i32, i32, i32)
declare i32 @llvm.fshr.i32(i32, i32, i32)
define amdgpu_kernel void @extra(ptr addrspace(1) %c, <4 x i32> %rsrc, i32 %k) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %sw = call i32 @llvm.amdgcn.ds.swizzle(i32 %t, i32 31)
  call void @llvm.amdgcn.s.sleep(i32 2)
  %b = call float @llvm.amdgcn.raw.buffer.load.f32(<4 x i32> %rsrc, i32 %t, i32 16, i32 0)
  %p = call i32 @llvm.amdgcn.perm(i32 %t, i32 %sw, i32 %k)
  %u = call i32 @llvm.amdgcn.ubfe.i32(i32 %p, i32 3, i32 5)
  %f = call i32 @llvm.fshr.i32(i32 %u, i32 %t, i32 %k)
  %bf = bitcast i32 %f to <2 x i16>
  %a4 = shufflevector <2 x i16> %bf, <2 x i16> %bf, <4 x i32> <i32 0, i32 1, i32 0, i32 1>
  %pa = getelementptr <16 x float>, ptr addrspace(1) %c, i32 %t
  %acc = load <16 x float>, ptr addrspace(1) %pa
  %r = call <16 x float> @llvm.amdgcn.mfma.f32.32x32x8bf16.1k(<4 x i16> %a4, <4 x i16> %a4, <16 x float> %acc, i32 1, i32 2, i32 3)
  store <16 x float> %r, ptr addrspace(1) %pa
  %pd = getelementptr <4 x double>, ptr addrspace(1) %c, i32 %k
  %accd = load <4 x double>, ptr addrspace(1) %pd
  %bd = fpext float %b to double
  %rd = call <4 x double> @llvm.amdgcn.mfma.f64.16x16x4f64(double %bd, double %bd, <4 x double> %accd, i32 0, i32 0, i32 0)
  store <4 x double> %rd, ptr addrspace(1) %pd
  %ff = bitcast i32 %f to float
  %pf = getelementptr float, ptr addrspace(1) %c, i32 %t
  %old = atomicrmw fmax ptr addrspace(1) %pf, float %ff syncscope("agent") monotonic
  call void @llvm.amdgcn.raw.buffer.store.f32(float %old, <4 x i32> %rsrc, i32 %t, i32 32, i32 0)
  call void @llvm.amdgcn.s.sendmsg(i32 1, i32 0)
  ret void
}""",
}

# gfx9 mnemonic -> the RDNA3 mnemonic the executor knows it by (RDNA3 ISA guide names of the same operation)
RDNA3_NAMES = {
  "s_load_dword": "s_load_b32", "s_load_dwordx2": "s_load_b64", "s_load_dwordx4": "s_load_b128",
  "s_load_dwordx8": "s_load_b256", "s_load_dwordx16": "s_load_b512",
  "global_load_dword": "global_load_b32", "global_load_dwordx2": "global_load_b64", "global_load_dwordx4": "global_load_b128",
  "global_load_ushort": "global_load_u16", "global_load_ubyte": "global_load_u8", "global_load_sbyte": "global_load_i8",
  "global_load_sshort": "global_load_i16", "global_store_dword": "global_store_b32", "global_store_dwordx2": "global_store_b64",
  "global_store_dwordx3": "global_store_b96", "global_store_dwordx4": "global_store_b128", "global_store_short": "global_store_b16",
  "global_store_byte": "global_store_b8", "global_load_short_d16_hi": "global_load_d16_hi_b16",
  "global_store_short_d16_hi": "global_store_d16_hi_b16", "scratch_load_dword": "scratch_load_b32",
  "scratch_store_dword": "scratch_store_b32", "global_atomic_add": "global_atomic_add_u32",
  "global_atomic_smax": "global_atomic_max_i32", "global_atomic_cmpswap": "global_atomic_cmpswap_b32",
  "ds_write_b32": "ds_store_b32", "ds_read_b32": "ds_load_b32", "ds_read2st64_b32": "ds_load_2addr_stride64_b32",
  "ds_read2_b32": "ds_load_2addr_b32", "ds_write2_b32": "ds_store_2addr_b32", "ds_write_b64": "ds_store_b64",
  "ds_read_b64": "ds_load_b64", "ds_write_b128": "ds_store_b128", "ds_read_b128": "ds_load_b128",
  "v_add_u32": "v_add_nc_u32", "v_sub_u32": "v_sub_nc_u32", "v_subrev_u32": "v_subrev_nc_u32", "v_add_u16": "v_add_nc_u16",
  "v_sub_u16": "v_sub_nc_u16", "v_ffbh_u32": "v_clz_i32_u32", "v_ffbl_b32": "v_ctz_i32_b32",
  "s_andn2_b64": "s_and_not1_b64", "s_orn2_b64": "s_or_not1_b64", "s_andn2_saveexec_b64": "s_and_not1_saveexec_b64",
  "s_ff1_i32_b64": "s_ctz_i32_b64", "s_flbit_i32_b32": "s_clz_i32_u32", "v_cvt_pkrtz_f16_f32": "v_cvt_pk_rtz_f16_f32",
  "v_cvt_flr_i32_f32": "v_cvt_floor_i32_f32", "buffer_load_dword": "buffer_load_b32",
  "buffer_store_dword": "buffer_store_b32", "v_addc_co_u32": "v_add_co_ci_u32", "v_subb_co_u32": "v_sub_co_ci_u32",
  "v_subbrev_co_u32": "v_subrev_co_ci_u32",
}

def listing(asm: str) -> tuple[list[str], dict[str, int]]:
  """(instruction lines, label -> index of the instruction it precedes) of LLVM's assembly text."""
  lines, labels = [], {}
  for raw in asm.split("\n"):
    if re.match(r"^\.LBB\w+:", raw): labels[raw.split(":")[0]] = len(lines)
    elif raw.startswith("\t") and raw.strip() and not raw.lstrip().startswith((".", ";")):
      lines.append(" ".join(raw.split(";")[0].split()))
  return lines, labels

def text_section(obj: bytes) -> bytes:
  _, sections = parse_sections(obj)
  s = next(s for s in sections if s.name == ".text")
  return obj[s.offset:s.offset + s.size]

def check_against_listing(code: bytes, asm: str) -> int:
  """Decode all of `code`; compare with LLVM's listing line by line; return the number of instructions checked."""
  want, labels = listing(asm)
  insts, offsets, at = [], [], 0
  while at < len(code):
    insts.append(decode(code, at)); offsets.append(at); at += insts[-1].size
  assert len(insts) >= len(want)
  assert {i.text for i in insts[len(want):]} <= {"s_nop 0"}, "only padding may follow the listed code"
  for inst, line in zip(insts, want):
    label = re.search(r"\.LBB\w+", line)
    if label:  # LLVM prints the label; the decoder prints the raw offset and resolves the target
      assert inst.text.split()[0] == line.split()[0]
      assert inst.fields["target"] == offsets[labels[label.group()]], line
    else: assert inst.text == line
    mnemonic = re.sub(r"_(e32|e64|sdwa|dpp)$", "", line.split()[0])
    assert inst.name == RDNA3_NAMES.get(mnemonic, mnemonic), line
  return len(want)

@pytest.fixture(scope="module")
def machines():
  llvm.initialize_all_targets(); llvm.initialize_all_asmprinters()
  return {a: llvm.Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(cpu=a, opt=2, reloc="pic") for a in ARCHS}

@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_llvm_kernel_decodes_to_llvm_listing(machines, arch, kernel):
  src = HEADER + KERNELS[kernel]
  tm = machines[arch]
  # codegen rewrites the module (control flow structurizing), so each emission gets a fresh parse
  asm, obj = tm.emit_assembly(llvm.parse_assembly(src)), tm.emit_object(llvm.parse_assembly(src))
  assert check_against_listing(text_section(obj), asm) > 5

def test_families_reached():
  """The kernels above exercise every family the decoder claims for LLVM's output."""
  llvm.initialize_all_targets(); llvm.initialize_all_asmprinters()
  tm = llvm.Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(cpu="gfx942", opt=2, reloc="pic")
  seen = set()
  for src in KERNELS.values():
    code = text_section(tm.emit_object(llvm.parse_assembly(HEADER + src)))
    at = 0
    while at < len(code):
      inst = decode(code, at); at += inst.size
      seen.add(inst.encoding + (":" + inst.fields["modifier"] if "modifier" in inst.fields else ""))
  assert seen >= {"SOP1", "SOP2", "SOPC", "SOPK", "SOPP", "SMEM", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3P", "DS",
                  "GLOBAL", "SCRATCH", "MUBUF", "VOP2:SDWA", "VOP1:DPP"}

def tg_programs():
  """Kernels tg renders itself: elementwise float math, a reduction over workgroup-shared memory, 64-bit integer
  division, f16 math."""
  import numpy as np
  from tg import Tensor, dtypes
  from ir.ops import Ops
  from codegen.kernel import Opt, OptOps
  x = Tensor(np.random.default_rng(0).random((33, 17)).astype(np.float32), device="PYTHON").realize()
  i64 = Tensor(np.arange(-9, 11, dtype=np.int64), device="PYTHON").realize()
  a, b = x[:7, :13].contiguous().realize(), x[:13, :10].contiguous().realize()
  out = [("math", x.sin() + x.exp() / (x + 1), None), ("sum", x.sum(1), None), ("i64", i64 // 3 + i64 % 7, None),
         ("f16", x.cast(dtypes.float16).sqrt() * 2, None),
         ("matmul_local", a @ b, [Opt(OptOps.LOCAL, 0, 7), Opt(OptOps.GROUP, 2, 0)])]
  return [(label, si.ast, opts) for label, t, opts in out for si in t.schedule() if si.ast.op is Ops.SINK]

@pytest.mark.parametrize("arch", ARCHS)
def test_tg_rendered_kernels_decode_to_llvm_listing(arch):
  amdgpu = pytest.importorskip("codegen.amdgpu")
  from codegen.amdgpu_compiler import AMDGPUCompiler
  from codegen.program import get_program
  renderer, compiler = amdgpu.AMDGPURenderer(arch), AMDGPUCompiler(arch)
  checked = 0
  for label, ast, opts in tg_programs():
    spec = get_program(ast, renderer, opts)
    checked += check_against_listing(text_section(compiler.compile(spec.src)), compiler.disassemble(spec.src, b""))
  assert checked > 100
