"""Real kernels on the RDNA3 shader core: LLVM IR written here, compiled by llvmlite's AMDGPU target for gfx1100, run
by execute.run from the object's .text and kernel descriptor, and compared with numpy."""
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

def launch(ir: str, name: str, groups, group_size, args: list, lds: int = 0, **kw) -> Memory:
  """Run kernel `name` of module `ir` with kernel arguments `args` (numpy arrays become buffers, ints u32/u64 by
  their numpy type); returns the memory (the arrays are updated in place)."""
  _, obj = compile_kernel(ir)
  text, rodata = section(obj, ".text"), section(obj, ".rodata")
  syms = symbols(obj)
  kd = rodata[syms[f"{name}.kd"][1]:syms[f"{name}.kd"][1] + 64]
  group_fixed, = struct.unpack_from("<I", kd, 0)
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
  d = Dispatch("gfx1100", code_va, rsrc1, rsrc2, rsrc3, tuple(user), tuple(groups), tuple(group_size),
               bool(props >> 10 & 1), max(lds, group_fixed))
  run(d, mem, **kw)
  return mem

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

def test_vector_add_partial_grid():
  n = 1000
  a, b = np.random.default_rng(0).standard_normal((2, n)).astype(np.float32)
  c = np.full(1024, -7, np.float32)
  launch(VADD, "vadd", (16, 1, 1), (64, 1, 1), [a, b, c, np.int32(n)])
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

def test_fdiv_expansion_is_correctly_rounded():
  rng = np.random.default_rng(1)
  a = np.concatenate([rng.standard_normal(48) * 1e3, [0, 1, -1, np.inf, 3e38, 1e-40, 0, 5, np.nan, 7, 1e-30, 2e30, 6, 1, -2, 4]]).astype(np.float32)
  b = np.concatenate([rng.standard_normal(48), [0, 0, 3, np.inf, 1e-3, 3, 5, np.inf, 1, -0.0, 1e30, 1e-5, 7, 3, 3, 1e-40]]).astype(np.float32)
  c = np.zeros(64, np.float32)
  launch(FDIV, "fdiv", (1, 1, 1), (64, 1, 1), [a, b, c])
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

def test_lds_tree_reduction_with_barriers():
  x = np.random.default_rng(2).integers(-50, 50, 8 * 256).astype(np.float32)  # small integers: any order sums exactly
  out = np.zeros(8, np.float32)
  launch(REDUCE, "reduce", (8, 1, 1), (256, 1, 1), [x, out])
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

def test_f64_loop_with_fdiv():
  x = np.random.default_rng(3).standard_normal(32)
  y = np.zeros(32)
  launch(F64_LOOP, "poly", (1, 1, 1), (32, 1, 1), [x, y, np.int32(5)])
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

def test_half_precision_true16_halves():
  rng = np.random.default_rng(4)
  a, b = (rng.standard_normal(64) * 4).astype(np.float16), (rng.standard_normal(64) * 4).astype(np.float16)
  c, d = np.zeros(64, np.float16), np.zeros(64, np.float32)
  launch(HALF, "half", (1, 1, 1), (64, 1, 1), [a, b, c, d])
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
