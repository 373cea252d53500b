"""CDNA3 MFMA on the gfx942 shader core: v_mfma_f32_16x16x16_f16/_bf16 and v_mfma_f32_32x32x8_f16/_bf16 from words
assembled here ("VOP3P-MAI" in the MI300 ISA guide's "Microcode Formats") with operands in VGPRs and AGPRs, and LLVM
kernels calling llvm.amdgcn.mfma.*; results against numpy. The expected lane placement is written out here from the
ISA guide's register layouts (A[i][k] in lane i + M * (k // E), half k % E; D[i][j] in lane j + M * (i % (4G) // 4),
register 4 * (i // (4G)) + i % 4), independently of the model's gather."""
from __future__ import annotations
import numpy as np
import pytest
from drivers.mock.amd.shader.dispatch import Dispatch, ShaderFault
from drivers.mock.amd.shader.execute import run
from drivers.mock.amd.shader.memory_ops import ArrayMemory
from tests.drivers.mock.test_amd_cdna3_semantics import GLOBAL_LOAD_DWORD, GLOBAL_STORE_DWORD, RSRC1, S_ENDPGM, SEG_GLOBAL
from tests.drivers.mock.test_amd_cdna3_words import INT0, V, flat, sopp, vop2, vop3p
from tests.drivers.mock.test_amd_shader_kernels import launch

L, BLOCK = 64, 256
OPCODE = {("f16", 16): 0x4D, ("bf16", 16): 0x61, ("f16", 32): 0x4C, ("bf16", 32): 0x60}  # VOP3P opcodes (LLVM VOP3PInstructions.td, gfx940)
SHAPES = [("f16", 16), ("bf16", 16), ("f16", 32), ("bf16", 32)]
ACCVGPR_WRITE, ACCVGPR_READ = 0x59, 0x58

def mfma(op, vdst, src0, src1, src2, acc_cd=0, acc=0, cbsz=0, abid=0, blgp=0) -> list[int]:
  """VOP3P-MAI: vdst [7:0], CBSZ [10:8], ABID [14:11], ACC_CD [15], OP [22:16]; SRC0/1/2, ACC [28:27], BLGP [31:29]."""
  w0 = 0b110100111 << 23 | op << 16 | acc_cd << 15 | abid << 11 | cbsz << 8 | vdst
  return [w0, blgp << 29 | acc << 27 | src2 << 18 | src1 << 9 | src0]

def execute(body: list[int], inputs: list[np.ndarray], stores: list[int], rsrc3: int = 0) -> np.ndarray:
  """One gfx942 wave64: v0 = 4 * lane, v1.. = the lane's dword of each input block; then `body`; then registers
  `stores` written to output blocks 0, 1, ... (s[0:1] output, s[2:3] and s[4:5] input); returns (lanes, len(stores)) words."""
  prog = [vop2(0x12, 0, INT0 + 2, 0)]                          # v_lshlrev_b32 v0, 2, v0
  for k in range(len(inputs)):  # the 13-bit offset reaches 16 blocks: s[4:5] points 16 blocks further
    prog += flat(SEG_GLOBAL, GLOBAL_LOAD_DWORD, vdst=1 + k, addr=0, saddr=2 + 2 * (k // 16), offset=BLOCK * (k % 16))
  prog += body
  for k, r in enumerate(stores): prog += flat(SEG_GLOBAL, GLOBAL_STORE_DWORD, addr=0, data=r, saddr=0, offset=BLOCK * k)
  prog += [sopp(S_ENDPGM)]
  code = np.array(prog, np.uint32).view(np.uint8)
  mem = ArrayMemory(np.zeros(0x40000, np.uint8))
  mem.data[0x1000:0x1000 + code.size] = code
  data = np.concatenate([np.asarray(x, np.uint32) for x in inputs]).view(np.uint8)
  mem.data[0x30000:0x30000 + data.size] = data
  run(Dispatch("gfx942", 0x1000, RSRC1, 6 << 1, rsrc3, (0x10000, 0, 0x30000, 0, 0x30000 + 16 * BLOCK, 0), (1, 1, 1), (L, 1, 1), False, 0), mem)
  return mem.data[0x10000:0x10000 + BLOCK * len(stores)].view(np.uint32).reshape(len(stores), L).T.copy()

def halves(x: np.ndarray, kind: str) -> np.ndarray:
  """16-bit patterns of float32 values already representable in the input type."""
  return x.astype(np.float16).view(np.uint16) if kind == "f16" else (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)

def quantize(x: np.ndarray, kind: str) -> np.ndarray:
  """float32 values rounded to f16, or cut to bf16, and back."""
  return x.astype(np.float16).astype(np.float32) if kind == "f16" else (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)

def operands(kind: str, m: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """A (m x k), B (k x m), C (m x m) with A and B exactly representable in `kind` (small multiples of 1/8)."""
  rng, k = np.random.default_rng(seed), 256 // m
  a, b = (rng.integers(-16, 17, s).astype(np.float32) / 8 for s in ((m, k), (k, m)))
  return a, b, rng.standard_normal((m, m)).astype(np.float32)

def pack_ab(a: np.ndarray, b: np.ndarray, kind: str) -> list[np.ndarray]:
  """Two dwords per lane of A and of B: lane l holds A[l % M][E * (l // M) + e] and B[E * (l // M) + e][l % M]."""
  m, k = a.shape
  e_per_lane = k // (L // m)
  ha, hb = np.zeros((L, 4), np.uint16), np.zeros((L, 4), np.uint16)
  for lane in range(L):
    for e in range(e_per_lane):
      kk = e_per_lane * (lane // m) + e
      ha[lane, e], hb[lane, e] = halves(a[lane % m, kk:kk + 1], kind)[0], halves(b[kk:kk + 1, lane % m], kind)[0]
  wa, wb = ha.view(np.uint32), hb.view(np.uint32)
  return [wa[:, 0], wa[:, 1], wb[:, 0], wb[:, 1]]

def cd_place(m: int) -> tuple[np.ndarray, np.ndarray]:
  """(lane, register) of every D[i][j]."""
  groups = L // m
  i, j = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
  return j + m * (i % (4 * groups) // 4), 4 * (i // (4 * groups)) + i % 4

def pack_cd(c: np.ndarray) -> np.ndarray:
  lane, reg = cd_place(c.shape[0])
  out = np.zeros((L, c.size // L), np.float32)
  out[lane, reg] = c
  return out.view(np.uint32)

def unpack_d(words: np.ndarray, m: int) -> np.ndarray:
  lane, reg = cd_place(m)
  return words.view(np.float32)[lane, reg]

def test_cd_places_cover_the_block_once():
  for m in (16, 32):
    lane, reg = cd_place(m)
    assert sorted(zip(lane.ravel(), reg.ravel())) == [(l, r) for l in range(L) for r in range(m * m // L)]
  lane, reg = cd_place(32)
  assert (lane[9, 5], reg[9, 5]) == (5, 5) and (lane[13, 5], reg[13, 5]) == (37, 5) and (lane[31, 0], reg[31, 0]) == (32, 15)  # 32x32: rows 8-15 in v4..v7, rows 12-15 of them in lanes 32-63

@pytest.mark.parametrize("kind,m", SHAPES, ids=[f"{m}x{m}x{256 // m}_{k}" for k, m in SHAPES])
def test_mfma_in_vgprs_matches_numpy(kind, m):
  a, b, c = operands(kind, m, seed=m)
  cw = pack_cd(c)
  regs = cw.shape[1]
  words = execute(mfma(OPCODE[kind, m], 10, V + 1, V + 3, V + 5), pack_ab(a, b, kind) + list(cw.T), [10 + r for r in range(regs)])
  want = (a.astype(np.float64) @ b + c).astype(np.float32)  # products of 1/8 multiples sum exactly in float64
  np.testing.assert_array_equal(unpack_d(words, m), want)

@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_mfma_with_a_and_c_d_in_agprs(kind):
  """A from AGPRs (ACC[0]), C and D in AGPRs (ACC_CD); ACCUM_OFFSET 16 puts a0 at unified register 16."""
  a, b, c = operands(kind, 16, seed=5)
  inputs = pack_ab(a, b, kind) + list(pack_cd(c).T)               # v1 v2 = A, v3 v4 = B, v5..v8 = C
  body = vop3p(ACCVGPR_WRITE, 0, V + 1, 0) + vop3p(ACCVGPR_WRITE, 1, V + 2, 0)
  for r in range(4): body += vop3p(ACCVGPR_WRITE, 4 + r, V + 5 + r, 0)
  body += mfma(OPCODE[kind, 16], 8, V + 0, V + 3, V + 4, acc_cd=1, acc=1)  # a[8:11] = a[0:1] x v[3:4] + a[4:7]
  for r in range(4): body += vop3p(ACCVGPR_READ, 10 + r, V + 8 + r, 0)
  words = execute(body, inputs, [10, 11, 12, 13], rsrc3=3)
  np.testing.assert_array_equal(unpack_d(words, 16), (a.astype(np.float64) @ b + c).astype(np.float32))

def test_inline_zero_accumulator():
  a, b, _ = operands("f16", 16, seed=6)
  words = execute(mfma(OPCODE["f16", 16], 10, V + 1, V + 3, INT0), pack_ab(a, b, "f16"), [10, 11, 12, 13])
  np.testing.assert_array_equal(unpack_d(words, 16), (a.astype(np.float64) @ b).astype(np.float32))

@pytest.mark.parametrize("field", ["cbsz", "abid", "blgp"])
def test_broadcast_fields_fault_by_name(field):
  a, b, c = operands("f16", 16, seed=7)
  with pytest.raises(ShaderFault, match=f"v_mfma_f32_16x16x16_f16 with {field}:1 is not modelled"):
    execute(mfma(OPCODE["f16", 16], 10, V + 1, V + 3, V + 5, **{field: 1}), pack_ab(a, b, "f16") + list(pack_cd(c).T), [])

def test_accumulator_past_the_allocation_faults():
  a, b, _ = operands("f16", 16, seed=8)
  with pytest.raises(ShaderFault, match="beyond the 128"):
    execute(mfma(OPCODE["f16", 16], 126, V + 1, V + 3, INT0), pack_ab(a, b, "f16"), [])

# ---- LLVM's own code: the intrinsic on half and bf16 (as i16 bits), loads and stores per lane
def _ir(vec: str, intrinsic: str, regs: int) -> str:
  return f"""target triple = "amdgcn-amd-amdhsa"
declare i32 @llvm.amdgcn.workitem.id.x()
declare <{regs} x float> @{intrinsic}(<4 x {vec}>, <4 x {vec}>, <{regs} x float>, i32, i32, i32)
define amdgpu_kernel void @k(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c) #0 {{
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr <4 x {vec}>, ptr addrspace(1) %a, i32 %t
  %pb = getelementptr <4 x {vec}>, ptr addrspace(1) %b, i32 %t
  %pc = getelementptr <{regs} x float>, ptr addrspace(1) %c, i32 %t
  %x = load <4 x {vec}>, ptr addrspace(1) %pa
  %y = load <4 x {vec}>, ptr addrspace(1) %pb
  %acc = load <{regs} x float>, ptr addrspace(1) %pc
  %r = call <{regs} x float> @{intrinsic}(<4 x {vec}> %x, <4 x {vec}> %y, <{regs} x float> %acc, i32 0, i32 0, i32 0)
  store <{regs} x float> %r, ptr addrspace(1) %pc
  ret void
}}
attributes #0 = {{ "amdgpu-flat-work-group-size"="1,64" }}"""

INTRINSICS = {("f16", 16): ("half", "llvm.amdgcn.mfma.f32.16x16x16f16"), ("bf16", 16): ("i16", "llvm.amdgcn.mfma.f32.16x16x16bf16.1k"),
              ("f16", 32): ("half", "llvm.amdgcn.mfma.f32.32x32x8f16"), ("bf16", 32): ("i16", "llvm.amdgcn.mfma.f32.32x32x8bf16.1k")}

@pytest.mark.parametrize("kind,m", SHAPES, ids=[f"{m}x{m}x{256 // m}_{k}" for k, m in SHAPES])
def test_llvm_mfma_kernel_matches_numpy(kind, m):
  from tests.drivers.mock.test_amd_shader_kernels import compile_kernel
  vec, name = INTRINSICS[kind, m]
  ir = _ir(vec, name, m * m // L)
  listing = compile_kernel(ir, "gfx942")[0]
  assert f"v_mfma_f32_{m}x{m}x{256 // m}_{kind} a[" in listing and "global_load_dwordx4 a[" in listing  # C loaded into AGPRs
  rng = np.random.default_rng(m + len(kind))
  a, b = (quantize(rng.standard_normal(s).astype(np.float32), kind) for s in ((m, 256 // m), (256 // m, m)))
  wa, wb = (np.stack(w, axis=1) for w in np.split(np.array(pack_ab(a, b, kind)), 2))
  c = rng.standard_normal((m, m)).astype(np.float32)
  cw = pack_cd(c)
  launch(ir, "k", (1, 1, 1), (L, 1, 1), [wa, wb, cw], arch="gfx942")
  np.testing.assert_allclose(unpack_d(cw, m), a.astype(np.float64) @ b + c, rtol=1e-6, atol=1e-5)
