"""Real kernels on the shader core: LLVM IR written here, compiled by llvmlite's AMDGPU target for gfx1100 (and gfx942,
decoded by cdna3.py), run by execute.run from the object's .text and kernel descriptor, and compared with numpy."""
from __future__ import annotations
import struct
from functools import lru_cache
import numpy as np
import pytest
import llvmlite.binding as llvm
from drivers.elf import parse_sections
from drivers.mock.amd.shader.dispatch import Dispatch, ShaderFault
from drivers.mock.amd.shader.execute import run

llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()
HEAD = 'target triple = "amdgcn-amd-amdhsa"\n'
ATTRS = '"amdgpu-no-dispatch-ptr" "amdgpu-no-queue-ptr" "amdgpu-no-dispatch-id" "amdgpu-no-implicitarg-ptr"'

@lru_cache(maxsize=None)
def compile_kernel(ir: str, cpu: str = "gfx1100") -> tuple[str, bytes]:
  """(LLVM's assembly listing, the relocatable object) of one module."""
  tm = llvm.Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(cpu=cpu, opt=2)
  return tm.emit_assembly(llvm.parse_assembly(ir)), tm.emit_object(llvm.parse_assembly(ir))

def section(obj: bytes, name: str) -> bytes:
  s = next(s for s in parse_sections(obj)[1] if s.name == name)
  return obj[s.offset:s.offset + s.size]

def symbols(obj: bytes) -> dict[str, tuple[int, int]]:
  """name -> (section index, value) of the object's symbols."""
  secs = parse_sections(obj)[1]
  symtab = next(s for s in secs if s.type == 2)
  strtab = secs[symtab.link]
  out = {}
  for i in range(symtab.size // 24):
    nm, _, _, shndx, value, _ = struct.unpack_from("<IBBHQQ", obj, symtab.offset + 24 * i)
    out[obj[strtab.offset + nm:obj.index(b"\0", strtab.offset + nm)].decode()] = (shndx, value)
  return out

class Memory:
  """GPUMemory over numpy arrays placed at chosen GPU addresses."""
  def __init__(self):
    self.maps: list[tuple[int, np.ndarray]] = []
  def add(self, va: int, data: np.ndarray) -> int:
    self.maps.append((va, data.view(np.uint8).reshape(-1)))
    return va
  def span(self, lo: int, hi: int):
    for va, buf in self.maps:
      if va <= lo and hi <= va + buf.size: return buf, va
    raise ShaderFault(f"address {lo:#x} is not mapped", lo)

# kernel_code_properties bits -> user SGPRs they take (AMDGPUUsage.rst "Kernel Descriptor" / "Initial Kernel Execution State")
_USER_SGPRS = [(0, 4), (1, 2), (2, 2), (3, 2), (4, 2), (5, 2), (6, 1)]

def launch(ir: str, name: str, groups, group_size, args: list, lds: int = 0, arch: str = "gfx1100", **kw) -> Memory:
  """Run kernel `name` of module `ir` compiled for `arch` with kernel arguments `args` (numpy arrays become buffers,
  numpy scalars are packed by their type); returns the memory (the arrays are updated in place)."""
  _, obj = compile_kernel(ir, arch)
  text, rodata = section(obj, ".text"), section(obj, ".rodata")
  syms = symbols(obj)
  kd = rodata[syms[f"{name}.kd"][1]:syms[f"{name}.kd"][1] + 64]
  group_fixed, private_fixed = struct.unpack_from("<II", kd, 0)
  rsrc3, rsrc1, rsrc2, props = struct.unpack_from("<IIIH", kd, 44)
  mem = Memory()
  code_va = mem.add(0x100000, np.frombuffer(text + b"\0" * 64, np.uint8).copy()) + syms[name][1]
  kernarg, va = bytearray(), 0x1000000
  for a in args:
    if isinstance(a, np.ndarray):
      kernarg += b"\0" * (-len(kernarg) % 8) + struct.pack("<Q", mem.add(va, a))
      va += 0x1000000
    else:
      kernarg += b"\0" * (-len(kernarg) % a.itemsize) + a.tobytes()
  kernarg_va = mem.add(0x800000, np.frombuffer(bytes(kernarg) + b"\0" * 256, np.uint8).copy())
  user = []
  for bit, n in _USER_SGPRS:
    if props >> bit & 1: user += [kernarg_va & 0xFFFFFFFF, kernarg_va >> 32] if bit == 3 else [0] * n
  wave = 32 if props >> 10 & 1 else 64
  d = Dispatch(arch, code_va, rsrc1, rsrc2, rsrc3, tuple(user), tuple(groups), tuple(group_size),
               wave == 32, max(lds, group_fixed), scratch_va=0x4000000, scratch_wave_bytes=private_fixed * wave)
  run(d, mem, **kw)
  return mem

# gfx942 code comes through cdna3.py's decoder (RDNA3 mnemonics where the behaviour is the same) into the same executor
ARCHS = ["gfx1100", "gfx942"]
WI = "declare i32 @llvm.amdgcn.workitem.id.x()\ndeclare i32 @llvm.amdgcn.workgroup.id.x()\n"

VADD = HEAD + WI + f"""
define amdgpu_kernel void @vadd(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c, i32 %n) #0 {{
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %gid = call i32 @llvm.amdgcn.workgroup.id.x()
  %base = mul i32 %gid, 64
  %i = add i32 %base, %tid
  %ok = icmp slt i32 %i, %n
  br i1 %ok, label %body, label %end
body:
  %pa = getelementptr float, ptr addrspace(1) %a, i32 %i
  %pb = getelementptr float, ptr addrspace(1) %b, i32 %i
  %pc = getelementptr float, ptr addrspace(1) %c, i32 %i
  %x = load float, ptr addrspace(1) %pa
  %y = load float, ptr addrspace(1) %pb
  %z = fadd float %x, %y
  store float %z, ptr addrspace(1) %pc
  br label %end
end:
  ret void
}}
attributes #0 = {{ {ATTRS} }}
"""

@pytest.mark.parametrize("arch", ARCHS)
def test_vector_add_partial_grid(arch):
  n = 1000
  a, b = np.random.default_rng(0).standard_normal((2, n)).astype(np.float32)
  c = np.full(1024, -7, np.float32)
  launch(VADD, "vadd", (16, 1, 1), (64, 1, 1), [a, b, c, np.int32(n)], arch=arch)
  np.testing.assert_array_equal(c[:n], a + b)
  assert (c[n:] == -7).all()  # lanes past n never store

FDIV = HEAD + WI + f"""
define amdgpu_kernel void @fdiv(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c) #0 {{
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr float, ptr addrspace(1) %a, i32 %i
  %pb = getelementptr float, ptr addrspace(1) %b, i32 %i
  %pc = getelementptr float, ptr addrspace(1) %c, i32 %i
  %x = load float, ptr addrspace(1) %pa
  %y = load float, ptr addrspace(1) %pb
  %z = fdiv float %x, %y
  store float %z, ptr addrspace(1) %pc
  ret void
}}
attributes #0 = {{ {ATTRS} }}
"""

@pytest.mark.parametrize("arch", ARCHS)
def test_fdiv_expansion_is_correctly_rounded(arch):
  rng = np.random.default_rng(1)
  a = np.concatenate([rng.standard_normal(48) * 1e3, [0, 1, -1, np.inf, 3e38, 1e-40, 0, 5, np.nan, 7, 1e-30, 2e30, 6, 1, -2, 4]]).astype(np.float32)
  b = np.concatenate([rng.standard_normal(48), [0, 0, 3, np.inf, 1e-3, 3, 5, np.inf, 1, -0.0, 1e30, 1e-5, 7, 3, 3, 1e-40]]).astype(np.float32)
  c = np.zeros(64, np.float32)
  launch(FDIV, "fdiv", (1, 1, 1), (64, 1, 1), [a, b, c], arch=arch)
  with np.errstate(all="ignore"): want = a / b
  np.testing.assert_array_equal(c.view(np.uint32)[~np.isnan(want)], want.view(np.uint32)[~np.isnan(want)])
  assert np.isnan(c[np.isnan(want)]).all()

REDUCE = HEAD + WI + f"""
@lds = internal addrspace(3) global [256 x float] undef, align 4
declare void @llvm.amdgcn.s.barrier()
define amdgpu_kernel void @reduce(ptr addrspace(1) %in, ptr addrspace(1) %out) #0 {{
entry:
  %tid = call i32 @llvm.amdgcn.workitem.id.x()
  %gid = call i32 @llvm.amdgcn.workgroup.id.x()
  %base = mul i32 %gid, 256
  %i = add i32 %base, %tid
  %p = getelementptr float, ptr addrspace(1) %in, i32 %i
  %v = load float, ptr addrspace(1) %p
  %slot = getelementptr [256 x float], ptr addrspace(3) @lds, i32 0, i32 %tid
  store float %v, ptr addrspace(3) %slot
  br label %loop
loop:
  %s = phi i32 [ 128, %entry ], [ %s2, %next ]
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  %act = icmp ult i32 %tid, %s
  br i1 %act, label %add, label %next
add:
  %j = add i32 %tid, %s
  %o = getelementptr [256 x float], ptr addrspace(3) @lds, i32 0, i32 %j
  %x = load float, ptr addrspace(3) %slot
  %y = load float, ptr addrspace(3) %o
  %z = fadd float %x, %y
  store float %z, ptr addrspace(3) %slot
  br label %next
next:
  %s2 = lshr i32 %s, 1
  %more = icmp ne i32 %s2, 0
  br i1 %more, label %loop, label %done
done:
  fence syncscope("workgroup") release
  call void @llvm.amdgcn.s.barrier()
  fence syncscope("workgroup") acquire
  %first = icmp eq i32 %tid, 0
  br i1 %first, label %write, label %exit
write:
  %r = load float, ptr addrspace(3) @lds
  %q = getelementptr float, ptr addrspace(1) %out, i32 %gid
  store float %r, ptr addrspace(1) %q
  br label %exit
exit:
  ret void
}}
attributes #0 = {{ {ATTRS} "amdgpu-flat-work-group-size"="256,256" }}
"""

@pytest.mark.parametrize("arch", ARCHS)
def test_lds_tree_reduction_with_barriers(arch):
  x = np.random.default_rng(2).integers(-50, 50, 8 * 256).astype(np.float32)  # small integers: any order sums exactly
  out = np.zeros(8, np.float32)
  launch(REDUCE, "reduce", (8, 1, 1), (256, 1, 1), [x, out], arch=arch)
  np.testing.assert_array_equal(out, x.reshape(8, 256).sum(1))

F64_LOOP = HEAD + WI + f"""
define amdgpu_kernel void @poly(ptr addrspace(1) %x, ptr addrspace(1) %y, i32 %n) #0 {{
entry:
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %p = getelementptr double, ptr addrspace(1) %x, i32 %i
  %v = load double, ptr addrspace(1) %p
  br label %loop
loop:
  %k = phi i32 [ 0, %entry ], [ %k2, %loop ]
  %acc = phi double [ 1.0, %entry ], [ %acc2, %loop ]
  %m = fmul double %acc, %v
  %d = fdiv double %m, 3.0
  %acc2 = fadd double %d, 0.25
  %k2 = add i32 %k, 1
  %c = icmp slt i32 %k2, %n
  br i1 %c, label %loop, label %out
out:
  %q = getelementptr double, ptr addrspace(1) %y, i32 %i
  store double %acc2, ptr addrspace(1) %q
  ret void
}}
attributes #0 = {{ {ATTRS} }}
"""

@pytest.mark.parametrize("arch", ARCHS)
def test_f64_loop_with_fdiv(arch):
  x = np.random.default_rng(3).standard_normal(32)
  y = np.zeros(32)
  launch(F64_LOOP, "poly", (1, 1, 1), (32, 1, 1), [x, y, np.int32(5)], arch=arch)
  want = np.ones(32)
  for _ in range(5): want = want * x / 3.0 + 0.25
  np.testing.assert_array_equal(y, want)

HALF = HEAD + WI + f"""
declare half @llvm.maxnum.f16(half, half)
declare half @llvm.fma.f16(half, half, half)
define amdgpu_kernel void @half(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c, ptr addrspace(1) %d) #0 {{
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr half, ptr addrspace(1) %a, i32 %i
  %pb = getelementptr half, ptr addrspace(1) %b, i32 %i
  %pc = getelementptr half, ptr addrspace(1) %c, i32 %i
  %pd = getelementptr float, ptr addrspace(1) %d, i32 %i
  %x = load half, ptr addrspace(1) %pa
  %y = load half, ptr addrspace(1) %pb
  %m = fmul half %x, %y
  %s = fadd half %m, %x
  %f = call half @llvm.fma.f16(half %s, half %y, half 0xH3C00)
  %mx = call half @llvm.maxnum.f16(half %f, half %y)
  store half %mx, ptr addrspace(1) %pc
  %w = fpext half %mx to float
  %w2 = fmul float %w, 3.0
  store float %w2, ptr addrspace(1) %pd
  ret void
}}
attributes #0 = {{ {ATTRS} }}
"""

def _fma16(a, b, c): return (a.astype(np.float64) * b + c).astype(np.float16)

@pytest.mark.parametrize("arch", ARCHS)
def test_half_precision_true16_halves(arch):
  rng = np.random.default_rng(4)
  a, b = (rng.standard_normal(64) * 4).astype(np.float16), (rng.standard_normal(64) * 4).astype(np.float16)
  c, d = np.zeros(64, np.float16), np.zeros(64, np.float32)
  launch(HALF, "half", (1, 1, 1), (64, 1, 1), [a, b, c, d], arch=arch)
  s = (a * b).astype(np.float16) + a
  want = np.maximum(_fma16(s, b, np.float16(1)), b)
  np.testing.assert_array_equal(c, want)
  np.testing.assert_array_equal(d, want.astype(np.float32) * 3)

def test_hang_is_a_fault():
  ir = HEAD + f"""
define amdgpu_kernel void @spin(ptr addrspace(1) %a) #0 {{
entry:
  br label %loop
loop:
  %v = load volatile i32, ptr addrspace(1) %a
  %z = icmp eq i32 %v, 12345
  br i1 %z, label %out, label %loop
out:
  ret void
}}
attributes #0 = {{ {ATTRS} }}
"""
  with pytest.raises(ShaderFault, match="more than 2000 instructions"):
    launch(ir, "spin", (1, 1, 1), (32, 1, 1), [np.zeros(4, np.int32)], step_limit=2000)

def test_unmapped_address_faults_with_the_address():
  ir = HEAD + WI + f"""
define amdgpu_kernel void @wild(ptr addrspace(1) %a) #0 {{
  %p = getelementptr i8, ptr addrspace(1) %a, i64 1099511627776
  store i32 7, ptr addrspace(1) %p
  ret void
}}
attributes #0 = {{ {ATTRS} }}
"""
  with pytest.raises(ShaderFault) as e:
    launch(ir, "wild", (1, 1, 1), (32, 1, 1), [np.zeros(4, np.int32)])
  assert e.value.address == 0x1000000 + (1 << 40)

INTS = HEAD + """declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.ctpop.i32(i32)
declare i32 @llvm.ctlz.i32(i32, i1)
declare i32 @llvm.cttz.i32(i32, i1)
declare i32 @llvm.bitreverse.i32(i32)
declare i32 @llvm.smax.i32(i32, i32)
declare i32 @llvm.umin.i32(i32, i32)
define amdgpu_kernel void @ints(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %o, ptr addrspace(1) %o64, ptr addrspace(1) %cnt) #0 {{
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr i32, ptr addrspace(1) %a, i32 %i
  %pb = getelementptr i32, ptr addrspace(1) %b, i32 %i
  %x = load i32, ptr addrspace(1) %pa
  %y = load i32, ptr addrspace(1) %pb
  %q = udiv i32 %x, %y
  %r = srem i32 %x, %y
  %pc = call i32 @llvm.ctpop.i32(i32 %x)
  %lz = call i32 @llvm.ctlz.i32(i32 %x, i1 false)
  %tz = call i32 @llvm.cttz.i32(i32 %y, i1 false)
  %br = call i32 @llvm.bitreverse.i32(i32 %x)
  %mx = call i32 @llvm.smax.i32(i32 %x, i32 %y)
  %mn = call i32 @llvm.umin.i32(i32 %x, i32 %y)
  %sh = ashr i32 %x, 3
  %x64 = sext i32 %x to i64
  %y64 = zext i32 %y to i64
  %m64 = mul i64 %x64, %y64
  %d64 = sdiv i64 %m64, 7
  %base = mul i32 %i, 10
  %v0 = getelementptr i32, ptr addrspace(1) %o, i32 %base
  store i32 %q, ptr addrspace(1) %v0
  %i1 = add i32 %base, 1
  %v1 = getelementptr i32, ptr addrspace(1) %o, i32 %i1
  store i32 %r, ptr addrspace(1) %v1
  %i2 = add i32 %base, 2
  %v2 = getelementptr i32, ptr addrspace(1) %o, i32 %i2
  store i32 %pc, ptr addrspace(1) %v2
  %i3 = add i32 %base, 3
  %v3 = getelementptr i32, ptr addrspace(1) %o, i32 %i3
  store i32 %lz, ptr addrspace(1) %v3
  %i4 = add i32 %base, 4
  %v4 = getelementptr i32, ptr addrspace(1) %o, i32 %i4
  store i32 %tz, ptr addrspace(1) %v4
  %i5 = add i32 %base, 5
  %v5 = getelementptr i32, ptr addrspace(1) %o, i32 %i5
  store i32 %br, ptr addrspace(1) %v5
  %i6 = add i32 %base, 6
  %v6 = getelementptr i32, ptr addrspace(1) %o, i32 %i6
  store i32 %mx, ptr addrspace(1) %v6
  %i7 = add i32 %base, 7
  %v7 = getelementptr i32, ptr addrspace(1) %o, i32 %i7
  store i32 %mn, ptr addrspace(1) %v7
  %i8 = add i32 %base, 8
  %v8 = getelementptr i32, ptr addrspace(1) %o, i32 %i8
  store i32 %sh, ptr addrspace(1) %v8
  %w0 = getelementptr i64, ptr addrspace(1) %o64, i32 %i
  store i64 %d64, ptr addrspace(1) %w0
  %old = atomicrmw add ptr addrspace(1) %cnt, i32 %x monotonic
  %odd = and i32 %i, 1
  %isodd = icmp eq i32 %odd, 1
  br i1 %isodd, label %cas, label %end
cas:
  %c1 = getelementptr i32, ptr addrspace(1) %cnt, i32 1
  %prev = atomicrmw max ptr addrspace(1) %c1, i32 %y monotonic
  br label %end
end:
  ret void
}}
attributes #0 = {{ {attrs} }}
"""

def ints_kernel(wave64: bool) -> str:
  return INTS.format(attrs=ATTRS + (' "target-features"="+wavefrontsize64"' if wave64 else ""))

@pytest.mark.parametrize("arch,wave64", [("gfx1100", False), ("gfx1100", True), ("gfx942", True)])
def test_integer_ops_and_atomics(arch, wave64):
  n = 96
  rng = np.random.default_rng(5)
  a = rng.integers(-2**31, 2**31, n).astype(np.int32)
  b = rng.integers(1, 2**31, n).astype(np.int32)
  b[:4] = [1, 3, 0x10000, 7]
  o, o64, cnt = np.zeros(10 * n, np.int32), np.zeros(n, np.int64), np.array([5, -3], np.int32)
  launch(ints_kernel(wave64), "ints", (1, 1, 1), (n, 1, 1), [a, b, o, o64, cnt], arch=arch)
  o = o.reshape(n, 10)
  au, bu = a.view(np.uint32), b.view(np.uint32)
  np.testing.assert_array_equal(o[:, 0].view(np.uint32), au // bu)
  np.testing.assert_array_equal(o[:, 1], np.fmod(a.astype(np.int64), b).astype(np.int32))
  np.testing.assert_array_equal(o[:, 2], [bin(int(x)).count("1") for x in au])
  np.testing.assert_array_equal(o[:, 3], [32 - int(x).bit_length() for x in au])
  np.testing.assert_array_equal(o[:, 4], [(int(x) & -int(x)).bit_length() - 1 for x in bu])
  np.testing.assert_array_equal(o[:, 5].view(np.uint32), [int(f"{int(x):032b}"[::-1], 2) for x in au])
  np.testing.assert_array_equal(o[:, 6], np.maximum(a, b))
  np.testing.assert_array_equal(o[:, 7].view(np.uint32), np.minimum(au, bu))
  np.testing.assert_array_equal(o[:, 8], a >> 3)
  prod = [int(x) * int(y) for x, y in zip(a, bu)]
  np.testing.assert_array_equal(o64, [abs(p) // 7 * (1 if p >= 0 else -1) for p in prod])
  assert int(cnt[0]) == (5 + int(a.astype(np.int64).sum())) % 2**32 - (2**32 if (5 + int(a.astype(np.int64).sum())) % 2**32 >= 2**31 else 0)
  assert cnt[1] == max(-3, int(b[1::2].max()))

PRIVATE = HEAD + WI + """define amdgpu_kernel void @priv(ptr addrspace(1) %a, ptr addrspace(1) %o) #0 {
entry:
  %arr = alloca [16 x i32], align 4, addrspace(5)
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  br label %fill
fill:
  %k = phi i32 [ 0, %entry ], [ %k2, %fill ]
  %v = mul i32 %k, %i
  %p = getelementptr [16 x i32], ptr addrspace(5) %arr, i32 0, i32 %k
  store volatile i32 %v, ptr addrspace(5) %p
  %k2 = add i32 %k, 1
  %c = icmp slt i32 %k2, 16
  br i1 %c, label %fill, label %read
read:
  %pa = getelementptr i32, ptr addrspace(1) %a, i32 %i
  %j = load i32, ptr addrspace(1) %pa
  %q = getelementptr [16 x i32], ptr addrspace(5) %arr, i32 0, i32 %j
  %r = load volatile i32, ptr addrspace(5) %q
  %po = getelementptr i32, ptr addrspace(1) %o, i32 %i
  store i32 %r, ptr addrspace(1) %po
  ret void
}
attributes #0 = { {ATTRS} }
""".replace("{ATTRS}", ATTRS)

@pytest.mark.parametrize("arch", ARCHS)
def test_private_array_in_scratch(arch):
  j = np.random.default_rng(6).integers(0, 16, 64).astype(np.int32)
  out = np.zeros(64, np.int32)
  launch(PRIVATE, "priv", (1, 1, 1), (64, 1, 1), [j, out], arch=arch)
  np.testing.assert_array_equal(out, j * np.arange(64))  # lane i filled arr[k] = k * i, then read arr[j[i]]

PACKED = HEAD + WI + """declare <2 x half> @llvm.fma.v2f16(<2 x half>, <2 x half>, <2 x half>)
declare <2 x half> @llvm.maxnum.v2f16(<2 x half>, <2 x half>)
define amdgpu_kernel void @pk(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c) #0 {
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr <2 x half>, ptr addrspace(1) %a, i32 %i
  %pb = getelementptr <2 x half>, ptr addrspace(1) %b, i32 %i
  %pc = getelementptr <2 x half>, ptr addrspace(1) %c, i32 %i
  %x = load <2 x half>, ptr addrspace(1) %pa
  %y = load <2 x half>, ptr addrspace(1) %pb
  %m = fmul <2 x half> %x, %y
  %s = fadd <2 x half> %m, <half 0xH3C00, half 0xH4000>
  %sw = shufflevector <2 x half> %s, <2 x half> %y, <2 x i32> <i32 1, i32 2>
  %f = call <2 x half> @llvm.fma.v2f16(<2 x half> %sw, <2 x half> %x, <2 x half> %y)
  %n = fneg <2 x half> %f
  %mx = call <2 x half> @llvm.maxnum.v2f16(<2 x half> %n, <2 x half> %x)
  store <2 x half> %mx, ptr addrspace(1) %pc
  ret void
}
attributes #0 = { {ATTRS} }
""".replace("{ATTRS}", ATTRS)

def test_packed_half_math():
  rng = np.random.default_rng(8)
  a, b = (rng.standard_normal((2, 64, 2)) * 3).astype(np.float16)
  c = np.zeros((64, 2), np.float16)
  launch(PACKED, "pk", (1, 1, 1), (64, 1, 1), [a, b, c])
  s = (a * b).astype(np.float16) + np.array([1, 2], np.float16)
  sw = np.stack([s[:, 1], b[:, 0]], axis=1)
  f = (sw.astype(np.float64) * a + b).astype(np.float16)
  np.testing.assert_array_equal(c, np.maximum(-f, a))

WMMA = HEAD + "declare i32 @llvm.amdgcn.workitem.id.x()\n" + """declare <8 x float> @llvm.amdgcn.wmma.f32.16x16x16.f16.v8f32.v16f16(<16 x half>, <16 x half>, <8 x float>)
declare <16 x half> @llvm.amdgcn.wmma.f16.16x16x16.f16.v16f16.v16f16(<16 x half>, <16 x half>, <16 x half>, i1)
declare <8 x i32> @llvm.amdgcn.wmma.i32.16x16x16.iu8.v8i32.v4i32(i1, <4 x i32>, i1, <4 x i32>, <8 x i32>, i1)
define amdgpu_kernel void @mm(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c, ptr addrspace(1) %d, ptr addrspace(1) %e, ptr addrspace(1) %ia, ptr addrspace(1) %ib, ptr addrspace(1) %io) #0 {
  %l = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr <16 x half>, ptr addrspace(1) %a, i32 %l
  %pb = getelementptr <16 x half>, ptr addrspace(1) %b, i32 %l
  %pc = getelementptr <8 x float>, ptr addrspace(1) %c, i32 %l
  %pd = getelementptr <8 x float>, ptr addrspace(1) %d, i32 %l
  %pe = getelementptr <16 x half>, ptr addrspace(1) %e, i32 %l
  %va = load <16 x half>, ptr addrspace(1) %pa
  %vb = load <16 x half>, ptr addrspace(1) %pb
  %vc = load <8 x float>, ptr addrspace(1) %pc
  %r = call <8 x float> @llvm.amdgcn.wmma.f32.16x16x16.f16.v8f32.v16f16(<16 x half> %va, <16 x half> %vb, <8 x float> %vc)
  store <8 x float> %r, ptr addrspace(1) %pd
  %h = call <16 x half> @llvm.amdgcn.wmma.f16.16x16x16.f16.v16f16.v16f16(<16 x half> %va, <16 x half> %vb, <16 x half> zeroinitializer, i1 0)
  store <16 x half> %h, ptr addrspace(1) %pe
  %pia = getelementptr <4 x i32>, ptr addrspace(1) %ia, i32 %l
  %pib = getelementptr <4 x i32>, ptr addrspace(1) %ib, i32 %l
  %pio = getelementptr <8 x i32>, ptr addrspace(1) %io, i32 %l
  %xa = load <4 x i32>, ptr addrspace(1) %pia
  %xb = load <4 x i32>, ptr addrspace(1) %pib
  %xi = call <8 x i32> @llvm.amdgcn.wmma.i32.16x16x16.iu8.v8i32.v4i32(i1 1, <4 x i32> %xa, i1 0, <4 x i32> %xb, <8 x i32> zeroinitializer, i1 0)
  store <8 x i32> %xi, ptr addrspace(1) %pio
  ret void
}
attributes #0 = { {ATTRS} }
""".replace("{ATTRS}", ATTRS)

def test_wmma_tiles():
  """Fragments laid out as AMD's WMMA guide gives them (lane l: row l%16 of A, column l%16 of B; D[2r + l//16][l%16]
  in register r), with each 16-lane half of the wave holding the same A and B."""
  rng = np.random.default_rng(10)
  A, B = (rng.standard_normal((2, 16, 16)) * 2).astype(np.float16)
  C = rng.standard_normal((16, 16)).astype(np.float32)
  lanes = np.arange(32)
  a, b = A[lanes % 16], B.T[lanes % 16]                       # (32, 16) halves per lane
  r = np.arange(8)
  rows, cols = 2 * r[None, :] + lanes[:, None] // 16, lanes[:, None] % 16
  c, d, e = C[rows, cols], np.zeros((32, 8), np.float32), np.zeros((32, 16), np.float16)
  IA, IB = rng.integers(-128, 128, (16, 16)).astype(np.int8), rng.integers(0, 256, (16, 16)).astype(np.uint8)
  ia, ib, io = IA[lanes % 16], IB.T[lanes % 16], np.zeros((32, 8), np.int32)
  launch(WMMA, "mm", (1, 1, 1), (32, 1, 1), [a, b, c, d, e, ia, ib, io])
  want = (A.astype(np.float64) @ B.astype(np.float64) + C)[rows, cols].astype(np.float32)
  np.testing.assert_allclose(d, want, rtol=1e-6, atol=1e-5)
  want16 = (A.astype(np.float64) @ B.astype(np.float64))[rows, cols].astype(np.float16)
  np.testing.assert_allclose(e[:, 0::2].astype(np.float32), want16, rtol=2e-3, atol=2e-3)  # lo halves of 8 registers
  np.testing.assert_array_equal(io, (IA.astype(np.int64) @ IB.astype(np.int64))[rows, cols])

CROSS_LANE = HEAD + "declare i32 @llvm.amdgcn.workitem.id.x()\n" + """declare i32 @llvm.amdgcn.ds.bpermute(i32, i32)
declare i32 @llvm.amdgcn.readfirstlane.i32(i32)
declare i32 @llvm.amdgcn.ballot.i32(i1)
declare i32 @llvm.amdgcn.mbcnt.lo(i32, i32)
declare void @llvm.amdgcn.s.barrier()
@lds = internal addrspace(3) global [64 x i32] undef, align 8
define amdgpu_kernel void @misc(ptr addrspace(1) %a, ptr addrspace(1) %o) #0 {
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr i32, ptr addrspace(1) %a, i32 %i
  %x = load i32, ptr addrspace(1) %pa
  %src = xor i32 %i, 5
  %addr = shl i32 %src, 2
  %perm = call i32 @llvm.amdgcn.ds.bpermute(i32 %addr, i32 %x)
  %first = call i32 @llvm.amdgcn.readfirstlane.i32(i32 %x)
  %odd = trunc i32 %x to i1
  %bal = call i32 @llvm.amdgcn.ballot.i32(i1 %odd)
  %mb = call i32 @llvm.amdgcn.mbcnt.lo(i32 %bal, i32 0)
  %s1 = getelementptr [64 x i32], ptr addrspace(3) @lds, i32 0, i32 %i
  store i32 %x, ptr addrspace(3) %s1
  call void @llvm.amdgcn.s.barrier()
  %j = and i32 %i, 30
  %l0 = getelementptr [64 x i32], ptr addrspace(3) @lds, i32 0, i32 %j
  %j1 = add i32 %j, 1
  %l1 = getelementptr [64 x i32], ptr addrspace(3) @lds, i32 0, i32 %j1
  %v0 = load i32, ptr addrspace(3) %l0
  %v1 = load i32, ptr addrspace(3) %l1
  %sum = add i32 %v0, %v1
  %r0 = add i32 %perm, %first
  %r1 = add i32 %r0, %mb
  %r2 = mul i32 %r1, %sum
  %po = getelementptr i32, ptr addrspace(1) %o, i32 %i
  store i32 %r2, ptr addrspace(1) %po
  ret void
}
attributes #0 = { {ATTRS} "amdgpu-flat-work-group-size"="32,32" }
""".replace("{ATTRS}", ATTRS)

def test_cross_lane_intrinsics_and_lds_pairs():
  x = np.random.default_rng(12).integers(0, 1000, 32).astype(np.uint32)
  out = np.zeros(32, np.uint32)
  launch(CROSS_LANE, "misc", (1, 1, 1), (32, 1, 1), [x, out])
  i = np.arange(32)
  ballot = sum(1 << k for k in range(32) if x[k] & 1)
  below = np.array([bin(ballot & ((1 << k) - 1)).count("1") for k in range(32)])
  j = i & 30
  want = ((x[i ^ 5].astype(np.int64) + x[0] + below) * (x[j].astype(np.int64) + x[j + 1])) & 0xFFFFFFFF
  np.testing.assert_array_equal(out, want)

SATURATE = HEAD + "declare i32 @llvm.amdgcn.workitem.id.x()\n" + """declare i32 @llvm.uadd.sat.i32(i32, i32)
declare i32 @llvm.ssub.sat.i32(i32, i32)
declare i16 @llvm.sadd.sat.i16(i16, i16)
define amdgpu_kernel void @sat(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %o) #0 {
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr i32, ptr addrspace(1) %a, i32 %i
  %pb = getelementptr i32, ptr addrspace(1) %b, i32 %i
  %x = load i32, ptr addrspace(1) %pa
  %y = load i32, ptr addrspace(1) %pb
  %u = call i32 @llvm.uadd.sat.i32(i32 %x, i32 %y)
  %s = call i32 @llvm.ssub.sat.i32(i32 %x, i32 %y)
  %x16 = trunc i32 %x to i16
  %y16 = trunc i32 %y to i16
  %h = call i16 @llvm.sadd.sat.i16(i16 %x16, i16 %y16)
  %hz = sext i16 %h to i32
  %base = mul i32 %i, 3
  %p0 = getelementptr i32, ptr addrspace(1) %o, i32 %base
  store i32 %u, ptr addrspace(1) %p0
  %b1 = add i32 %base, 1
  %p1 = getelementptr i32, ptr addrspace(1) %o, i32 %b1
  store i32 %s, ptr addrspace(1) %p1
  %b2 = add i32 %base, 2
  %p2 = getelementptr i32, ptr addrspace(1) %o, i32 %b2
  store i32 %hz, ptr addrspace(1) %p2
  ret void
}
attributes #0 = { {ATTRS} }
""".replace("{ATTRS}", ATTRS)

def test_saturating_integer_add_sub_use_clamp():
  rng = np.random.default_rng(13)
  a = rng.integers(-2**31, 2**31, 32).astype(np.int32)
  b = rng.integers(-2**31, 2**31, 32).astype(np.int32)
  a[:3], b[:3] = [2**31 - 1, -2**31, 30000], [5, 7, 10000]
  out = np.zeros((32, 3), np.int32)
  launch(SATURATE, "sat", (1, 1, 1), (32, 1, 1), [a, b, out])
  au, bu = a.view(np.uint32).astype(np.int64), b.view(np.uint32).astype(np.int64)
  np.testing.assert_array_equal(out[:, 0].view(np.uint32), np.minimum(au + bu, 2**32 - 1))
  np.testing.assert_array_equal(out[:, 1], np.clip(a.astype(np.int64) - b, -2**31, 2**31 - 1))
  np.testing.assert_array_equal(out[:, 2], np.clip(a.astype(np.int16).astype(np.int64) + b.astype(np.int16), -2**15, 2**15 - 1))
