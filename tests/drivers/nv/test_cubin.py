import struct, subprocess
import pytest
from codegen.ptx_compiler import PTXCompiler, find_nvjitlink, find_ptxas
from drivers.elf import parse_sections
from drivers.nv.cubin import Cubin, CubinError

pytestmark = pytest.mark.skipif(find_ptxas() is None and find_nvjitlink() is None, reason="needs ptxas or nvJitLink to build cubins")

ARCHS = ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100"]
# the first kernel parameter in constant bank 0 (docs/nv.md §4, verified with nvdisasm)
PARAM_OFFSET = {"sm_80": 0x160, "sm_86": 0x160, "sm_89": 0x160, "sm_90": 0x210, "sm_100": 0x380}
# .nv.shared.<k> for a 1 KiB array: sm_90+ add the 1 KiB the hardware reserves at offset 0 (docs/nv.md §4)
SHARED_1K = {"sm_80": 0x400, "sm_86": 0x400, "sm_89": 0x400, "sm_90": 0x800, "sm_100": 0x800}

def compile_ptx(arch: str, body: str) -> bytes:
  version = "8.6" if int(arch[3:]) >= 100 else "7.8"  # sm_100 needs PTX ISA 8.6
  return PTXCompiler(arch).compile(f".version {version}\n.target {arch}\n.address_size 64\n{body}")

def build(arch: str, body: str) -> Cubin: return Cubin(compile_ptx(arch, body))

ADD = """
.visible .entry add(.param .u64 out, .param .u64 inp, .param .u32 n)
{
  .reg .u32 %r<3>; .reg .u64 %rd<6>; .reg .f32 %f<3>; .reg .pred %p;
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [inp]; ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x;
  setp.ge.u32 %p, %r2, %r1;
  @%p bra DONE;
  cvta.to.global.u64 %rd1, %rd1; cvta.to.global.u64 %rd2, %rd2;
  mul.wide.u32 %rd3, %r2, 4;
  add.u64 %rd4, %rd2, %rd3; ld.global.f32 %f1, [%rd4];
  add.f32 %f2, %f1, %f1;
  add.u64 %rd5, %rd1, %rd3; st.global.f32 [%rd5], %f2;
DONE:
  ret;
}"""

SHARED = """
.visible .entry sh(.param .u64 out)
{
  .reg .u32 %r<4>; .reg .u64 %rd<3>;
  .shared .align 4 .b8 buf[1024];
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x; shl.b32 %r2, %r1, 2;
  mov.u32 %r3, buf; add.u32 %r3, %r3, %r2; st.shared.u32 [%r3], %r1;
  bar.sync 0;
  xor.b32 %r2, %r2, 4; mov.u32 %r3, buf; add.u32 %r3, %r3, %r2; ld.shared.u32 %r1, [%r3];
  cvta.to.global.u64 %rd1, %rd1; cvt.u64.u32 %rd2, %r2; add.u64 %rd1, %rd1, %rd2; st.global.u32 [%rd1], %r1;
  ret;
}"""

GLOBALS = """
.global .align 4 .u32 gtab[4] = {11, 22, 33, 44};
.global .align 8 .u64 gptr = generic(gtab);
.const .align 4 .u32 ctab[4] = {5, 6, 7, 8};
.global .align 4 .u32 counter;
.visible .entry gv(.param .u64 out, .param .u32 i)
{
  .reg .u32 %r<6>; .reg .u64 %rd<6>;
  ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [i];
  mul.wide.u32 %rd2, %r1, 4;
  mov.u64 %rd3, gtab; add.u64 %rd3, %rd3, %rd2; ld.global.u32 %r2, [%rd3];
  mov.u64 %rd4, ctab; add.u64 %rd4, %rd4, %rd2; ld.const.u32 %r3, [%rd4];
  ld.global.u64 %rd5, [gptr]; ld.u32 %r4, [%rd5];
  add.u32 %r5, %r2, %r3; add.u32 %r5, %r5, %r4;
  atom.global.add.u32 %r4, [counter], %r5;
  cvta.to.global.u64 %rd1, %rd1; st.global.u32 [%rd1], %r4;
  ret;
}"""

@pytest.mark.parametrize("arch", ARCHS)
def test_parameters_registers_and_code(arch):
  blob = compile_ptx(arch, ADD)
  cubin = Cubin(blob)
  assert cubin.sm == int(arch[3:]) and cubin.kernels == ["add"]
  k = cubin.kernel("add")
  assert (k.param_offset, k.param_size) == (PARAM_OFFSET[arch], 20)  # two u64 pointers and a u32
  assert k.cbank0_size == k.param_offset + k.param_size
  if arch == "sm_90": assert k.cbank0_size == 0x224
  assert 0 < k.registers <= 255
  assert k.shared_size == 0 and k.stack_size == 0 and k.local_size == 0 and k.max_threads is None and k.const_banks == {}
  # the entry is .text.add as ptxas wrote it, on a 128-byte boundary
  text = next(s for s in parse_sections(blob)[1] if s.name == ".text.add")
  assert k.entry % 128 == 0 and k.code_size == text.size
  assert cubin.image[k.entry:k.entry + k.code_size] == blob[text.offset:text.offset + text.size]

@pytest.mark.parametrize("arch", ARCHS)
def test_shared_memory_and_barriers(arch):
  k = build(arch, SHARED).kernel("sh")
  assert k.shared_size == SHARED_1K[arch]
  assert k.barriers in (None, 1)  # ptxas 12.x doesn't record NUM_BARRIERS, 13 does

@pytest.mark.parametrize("arch", ["sm_86", "sm_90", "sm_100"])
def test_globals_are_loaded_and_relocated(arch):
  cubin = build(arch, GLOBALS)
  k = cubin.kernel("gv")
  image = cubin.image
  # found independently of the section map: the initializers' bytes
  gtab = image.index(struct.pack("<4I", 11, 22, 33, 44))
  ctab = image.index(struct.pack("<4I", 5, 6, 7, 8))
  assert 3 in k.const_banks and k.const_banks[3][0] <= ctab < sum(k.const_banks[3])  # user __constant__ data: bank 3
  assert ".nv.global" in cubin.sections  # the uninitialized `counter` gets zeroed space in the image
  assert image[cubin.sections[".nv.global"]:][:4] == bytes(4)
  base = 0x7f12_3456_0000
  linked = cubin.link(base)
  assert len(linked) == len(image)
  for r in cubin.relocations:
    address = base + r.target
    if r.type in (0x02, 0x04): assert struct.unpack_from("<Q", linked, r.at)[0] == address  # R_CUDA_64, R_CUDA_G64
    else: assert struct.unpack_from("<I", linked, r.at + 4)[0] == (address & 0xffffffff if r.type == 0x38 else address >> 32)
  # ptxas reaches globals through a pointer table in bank 4 (R_CUDA_64); nvJitLink through MOV immediates in the code
  # (R_CUDA_ABS32_LO_32/HI_32); both point gptr, in .nv.global.init, at gtab with a generic address (R_CUDA_G64)
  types = {r.type for r in cubin.relocations}
  assert 0x04 in types and (0x02 in types or {0x38, 0x39} <= types) and types <= {0x02, 0x04, 0x38, 0x39}
  assert any(r.type == 0x04 and r.target == gtab for r in cubin.relocations)
  assert any(r.type != 0x04 and r.target == gtab for r in cubin.relocations)
  assert any(r.target == cubin.sections[".nv.global"] for r in cubin.relocations)
  if 4 in k.const_banks:
    bank4 = range(k.const_banks[4][0], sum(k.const_banks[4]), 8)
    assert base + gtab in [struct.unpack_from("<Q", linked, at)[0] for at in bank4]
  # nothing but the relocated fields changes
  patched = {r.at for r in cubin.relocations}
  assert all(linked[i] == image[i] for i in range(len(image)) if not any(at <= i < at + 8 for at in patched))
  with pytest.raises(CubinError, match="aligned"): cubin.link(base + 4)

def _ptxas_g(tmp_path, src: str) -> bytes:
  """ptxas -g: device-debug code calls functions through absolute addresses, so its .text carries relocations."""
  (tmp_path / "k.ptx").write_text(src)
  subprocess.run([find_ptxas(), "-g", "-arch=sm_90", "-o", str(tmp_path / "k.cubin"), str(tmp_path / "k.ptx")], check=True, capture_output=True)
  return (tmp_path / "k.cubin").read_bytes()

CALL = """.version 7.8
.target sm_90
.address_size 64
.func (.param .b32 r) twice(.param .b32 x)
{
  .reg .b32 %a;
  ld.param.b32 %a, [x]; add.u32 %a, %a, %a; st.param.b32 [r], %a;
  ret;
}
.visible .entry callk(.param .u64 out, .param .u32 i)
{
  .reg .u32 %r<4>; .reg .u64 %rd<2>;
  ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [i];
  { .param .b32 p0; .param .b32 rv; st.param.b32 [p0], %r1; call.uni (rv), twice, (p0); ld.param.b32 %r3, [rv]; }
  cvta.to.global.u64 %rd1, %rd1; st.global.u32 [%rd1], %r3;
  ret;
}"""

@pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas")
def test_abs32_lo_hi_patch_the_mov_immediate(tmp_path):
  blob = bytearray(_ptxas_g(tmp_path, CALL))
  # the call itself uses R_CUDA_ABS55_16_34, which this loader doesn't apply: a clear error names it and its section
  with pytest.raises(CubinError, match=r"R_CUDA_ABS55_16_34.*\.text\.callk"): Cubin(bytes(blob))
  # turn that one into R_CUDA_NONE to check the return-address pair (R_CUDA_ABS32_LO_32 / HI_32) on real output
  _, secs = parse_sections(bytes(blob))
  rela = next(s for s in secs if s.name == ".rela.text.callk")
  entries = [(rela.offset + k * 24, *struct.unpack_from("<QQq", blob, rela.offset + k * 24)) for k in range(rela.size // 24)]
  for at, _, info, _ in entries:
    if info & 0xffffffff == 0x4b: struct.pack_into("<Q", blob, at + 8, info & ~0xffffffff)
  pairs = [(off, info & 0xffffffff, addend) for _, off, info, addend in entries if info & 0xffffffff in (0x38, 0x39)]
  assert sorted(t for _, t, _ in pairs) == [0x38, 0x39]
  cubin = Cubin(bytes(blob))
  text = cubin.sections[".text.callk"]
  assert cubin.kernel("callk").entry == text
  base = 0x1234_5678_9a00
  image, linked = cubin.image, cubin.link(base)
  for off, kind, addend in pairs:
    at = text + off  # the relocation points at the instruction; bits 63:32 are MOV's 32-bit immediate
    assert struct.unpack_from("<I", image, at)[0] & 0xfff == 0x802  # MOV Rd, imm32
    address = base + text + addend  # the symbol is the kernel itself: its return address inside .text.callk
    assert struct.unpack_from("<I", linked, at + 4)[0] == (address & 0xffffffff if kind == 0x38 else address >> 32)
    assert linked[at:at + 4] == image[at:at + 4] and linked[at + 8:at + 16] == image[at + 8:at + 16]

LAUNCH_BOUNDS = """
.visible .entry loc(.param .u64 out, .param .u32 i) .maxntid 128, 1, 1
{
  .reg .u32 %r<4>; .reg .u64 %rd<5>;
  .local .align 4 .b8 arr[256];
  ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [i];
  mov.u64 %rd2, arr; mul.wide.u32 %rd3, %r1, 4; add.u64 %rd4, %rd2, %rd3; st.local.u32 [%rd4], %r1;
  and.b32 %r2, %r1, 7; mul.wide.u32 %rd3, %r2, 4; add.u64 %rd4, %rd2, %rd3; ld.local.u32 %r3, [%rd4];
  cvta.to.global.u64 %rd1, %rd1; st.global.u32 [%rd1], %r3;
  ret;
}
.visible .entry req(.param .u64 out) .reqntid 64, 2, 1
{
  .reg .u32 %r<2>; .reg .u64 %rd<2>;
  ld.param.u64 %rd1, [out]; mov.u32 %r1, %tid.x; cvta.to.global.u64 %rd1, %rd1; st.global.u32 [%rd1], %r1;
  ret;
}
.visible .entry noparams()
{
  ret;
}"""

def test_several_kernels_launch_bounds_and_stack():
  cubin = build("sm_90", LAUNCH_BOUNDS)
  assert sorted(cubin.kernels) == ["loc", "noparams", "req"]
  loc, req, none = cubin.kernel("loc"), cubin.kernel("req"), cubin.kernel("noparams")
  assert loc.max_threads == (128, 1, 1) and loc.req_threads is None and loc.stack_size >= 256  # the local array
  assert req.req_threads == (64, 2, 1) and req.max_threads is None and req.stack_size == 0
  assert (req.param_offset, req.param_size) == (0x210, 8)
  assert (none.param_offset, none.param_size, none.cbank0_size) == (0x210, 0, 0x210)
  assert len({loc.entry, req.entry, none.entry}) == 3
  with pytest.raises(CubinError, match="'nope'") as e: cubin.kernel("nope")
  assert all(name in str(e.value) for name in cubin.kernels)

def test_not_a_cubin():
  blob = compile_ptx("sm_90", ADD)
  with pytest.raises(CubinError, match="magic"): Cubin(b"MZ\x90\x00" + bytes(60))
  with pytest.raises(CubinError, match="machine 62"): Cubin(blob[:18] + struct.pack("<H", 62) + blob[20:])
  with pytest.raises(CubinError, match="malformed"): Cubin(blob[:70])

def test_sm_in_both_e_flags_layouts():
  blob = bytearray(compile_ptx("sm_90", ADD))
  assert Cubin(bytes(blob)).sm == 90
  # ELF ABI version 7 (ptxas 12.x below sm_100): SM in bits 7:0, virtual arch in 23:16
  blob[8] = 7
  struct.pack_into("<I", blob, 48, 0x5a055a)
  assert Cubin(bytes(blob)).sm == 90
  # ABI version 8 (ptxas 13; 12.x for sm_100+): SM in bits 15:8
  blob[8] = 8
  struct.pack_into("<I", blob, 48, 0x6006402)
  assert Cubin(bytes(blob)).sm == 100
