"""The shader core running gfx942 (CDNA3, wave64) words assembled here from the field layouts of AMD's "AMD Instinct
MI300 (CDNA3) ISA" reference guide ("Microcode Formats"; encoders shared with test_amd_cdna3_words.py), per family
the model had to learn for gfx9: packed f32, v_cmpx writing EXEC and its destination, VCC carry chains, 64-bit
shifts and v_mad_u64_u32, SDWA and DPP operand forms, 16-bit results clearing their VGPR's upper half, v_fma_mix,
the 1/(2*pi) constant, the denormal mode and MODE through s_setreg/s_getreg.
Results are compared with numpy or exact integer math.

Every program: s[0:1] = output buffer, s[2:3] = input buffer; v0 = 4 * lane; v1, v2, v3 = the lane's words of input
blocks A, B, C (input + 0, 256, 512); then the words under test; then the listed registers are stored to output
blocks 0, 1, 2, ... (256 bytes each)."""
from __future__ import annotations
import numpy as np
import pytest
from drivers.mock.amd.shader.dispatch import Dispatch, ShaderFault
from drivers.mock.amd.shader.execute import run
from drivers.mock.amd.shader.memory_ops import ArrayMemory
from tests.drivers.mock.test_amd_shader_kernels import ATTRS, HEAD, compile_kernel, launch
from tests.drivers.mock.test_amd_cdna3_words import EXEC, INT0, LIT, V, VCC, flat, sop1, sopk, sopp, vop1, vop2, vop3, vop3p, vopc

L, BLOCK = 64, 256
GLOBAL_LOAD_DWORD, GLOBAL_STORE_DWORD, S_ENDPGM, SEG_GLOBAL = 0x14, 0x1C, 0x01, 2
F1, INV_2PI = 242, 248                                      # inline 1.0 and 1/(2*pi)
MINUS1 = 193                                                # inline -1
RSRC1 = 0xF | 3 << 16 | 3 << 18 | 1 << 23                   # 128 VGPRs, denormals kept, IEEE mode (COMPUTE_PGM_RSRC1)

def frame() -> list[int]:
  return ([vop2(0x12, 0, INT0 + 2, 0)]                        # v_lshlrev_b32 v0, 2, v0
          + flat(SEG_GLOBAL, GLOBAL_LOAD_DWORD, vdst=1, addr=0, saddr=2)
          + flat(SEG_GLOBAL, GLOBAL_LOAD_DWORD, vdst=2, addr=0, saddr=2, offset=BLOCK)
          + flat(SEG_GLOBAL, GLOBAL_LOAD_DWORD, vdst=3, addr=0, saddr=2, offset=2 * BLOCK))

def execute(words: list[int], stores: list[int], a=None, b=None, c=None, rsrc1: int = RSRC1, rsrc3: int = 0) -> np.ndarray:
  """Run frame + words + one global_store_dword per register in `stores` as one wave64 on gfx942; returns the
  stored words (lanes x len(stores))."""
  inp = np.zeros(3 * BLOCK, np.uint8)
  for k, x in enumerate((a, b, c)):
    if x is not None: inp[BLOCK * k:BLOCK * (k + 1)] = np.frombuffer(np.ascontiguousarray(x).tobytes(), np.uint8)
  body = frame() + list(words)
  for k, r in enumerate(stores): body += flat(SEG_GLOBAL, GLOBAL_STORE_DWORD, addr=0, data=r, saddr=0, offset=BLOCK * k)
  body += [sopp(S_ENDPGM)]
  code = np.array(body, np.uint32).view(np.uint8)
  mem = ArrayMemory(np.zeros(0x30000, np.uint8))
  mem.data[0x1000:0x1000 + code.size] = code
  mem.data[0x20000:0x20000 + inp.size] = inp
  d = Dispatch("gfx942", 0x1000, rsrc1, 4 << 1, rsrc3, (0x10000, 0, 0x20000, 0), (1, 1, 1), (L, 1, 1), False, 0)
  run(d, mem)
  return mem.data[0x10000:0x10000 + BLOCK * len(stores)].view(np.uint32).reshape(len(stores), L).T.copy()

rng = np.random.default_rng(7)
def floats(lo=-4, hi=4) -> np.ndarray: return rng.uniform(lo, hi, L).astype(np.float32)
def words(n: int = L) -> np.ndarray: return rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
def pair(lo, hi) -> np.ndarray: return np.asarray(lo, np.uint64) | np.asarray(hi, np.uint64) << np.uint64(32)
def mask_bits(lanes: np.ndarray) -> tuple[int, int]:
  bits = int(sum(1 << i for i, x in enumerate(lanes) if x))
  return bits & 0xFFFFFFFF, bits >> 32

def sdwa(vop_word: int, src0: int, dst_sel=6, dst_unused=0, src0_sel=6, src0_sext=0, src0_neg=0, src1_sel=6,
         src1_sext=0, src1_neg=0, s1=0, sdst=None) -> list[int]:
  """A VOP1/VOP2/VOPC word with src0 = 249 and its SDWA dword (guide "VOP_SDWA": SRC0 [7:0], DST_SEL [10:8],
  DST_UNUSED [12:11] or SDST [14:8] + SD [15] for VOPC, SRC0_SEL [18:16], SRC0_SEXT [19], SRC0_NEG [20],
  SRC1_SEL [26:24], SRC1_SEXT [27], SRC1_NEG [28], S1 [31])."""
  d = src0 | src0_sel << 16 | src0_sext << 19 | src0_neg << 20 | src1_sel << 24 | src1_sext << 27 | src1_neg << 28 | s1 << 31
  d |= (sdst | 0x80) << 8 if sdst is not None else dst_sel << 8 | dst_unused << 11
  return [vop_word | 249, d]

def dpp(vop_word: int, src0: int, ctrl: int, row_mask=0xF, bank_mask=0xF, bound_ctrl=0, src0_neg=0) -> list[int]:
  """A VOP1/VOP2 word with src0 = 250 and its DPP dword (guide "VOP_DPP": SRC0 [7:0], DPP_CTRL [16:8],
  BOUND_CTRL [19], SRC0_NEG [20], BANK_MASK [27:24], ROW_MASK [31:28])."""
  return [vop_word | 250, src0 | ctrl << 8 | bound_ctrl << 19 | src0_neg << 20 | bank_mask << 24 | row_mask << 28]

def f32(x) -> np.ndarray: return np.asarray(x, np.uint32).view(np.float32)

# ---- VOP3P packed f32: register pairs, op_sel / op_sel_hi pick dwords, neg_lo / neg_hi
def test_packed_f32_fma_mul_add_mov():
  a, b, c = floats(), floats(), floats()
  prog = (vop3p(0x30, 4, V + 1, V + 2, V + 2)                              # v_pk_fma_f32 v[4:5], v[1:2], v[2:3], v[2:3]
          + vop3p(0x31, 6, V + 1, V + 2, opsel=1, opsel_hi=2, neg=2)      # v_pk_mul_f32 v[6:7], v[1:2], -v[2:3] op_sel:[1,0] op_sel_hi:[0,1]
          + vop3p(0x32, 8, V + 1, F1, opsel_hi=1, neg_hi=1)               # v_pk_add_f32 v[8:9], v[1:2], 1.0 op_sel_hi:[1,0] neg_hi:[1,0]
          + vop3p(0x33, 10, V + 2, V + 1, opsel=1))                       # v_pk_mov_b32 v[10:11], v[2:3], v[1:2] op_sel:[1,0]
  out = f32(execute(prog, [4, 5, 6, 7, 8, 9, 10, 11], a, b, c))
  wide = lambda x: np.asarray(x, np.float64)
  np.testing.assert_array_equal(out[:, 0], (wide(a) * b + b).astype(np.float32))
  np.testing.assert_array_equal(out[:, 1], (wide(b) * c + c).astype(np.float32))
  np.testing.assert_array_equal(out[:, 2], b * -b)                       # low: src0.hi * -src1.lo
  np.testing.assert_array_equal(out[:, 3], a * c)                        # high: src0.lo * src1.hi
  np.testing.assert_array_equal(out[:, 4], a + 1)
  np.testing.assert_array_equal(out[:, 5], -b + 1)
  np.testing.assert_array_equal(out[:, 6], c)                            # D.lo = S0's high dword
  np.testing.assert_array_equal(out[:, 7], a)                            # D.hi = S1's low dword

def test_packed_f32_reads_an_sgpr_pair():
  a, b = floats(), floats()
  prog = ([sop1(0x00, 20, LIT), 0x40400000]                              # s_mov_b32 s20, 3.0
          + [sop1(0x00, 21, 245)]                                        # s_mov_b32 s21, -2.0
          + vop3p(0x31, 4, V + 1, 20))                                   # v_pk_mul_f32 v[4:5], v[1:2], s[20:21]
  out = f32(execute(prog, [4, 5], a, b))
  np.testing.assert_array_equal(out[:, 0], a * np.float32(3))
  np.testing.assert_array_equal(out[:, 1], b * np.float32(-2))

# ---- VOPC: a gfx9 v_cmpx writes EXEC and its destination, zero in the lanes EXEC had off
def test_cmpx_writes_exec_and_vcc_or_its_sgpr_pair():
  a, b = words(), words()
  b[::5] = a[::5]
  prog = ([sop1(0x01, 30, EXEC)]                                          # s_mov_b64 s[30:31], exec
          + [sop1(0x00, EXEC + 1, LIT), 0x0FFFFFFF]                     # s_mov_b32 exec_hi: lanes 60-63 off
          + [vopc(0xDC, V + 1, 2)]                                       # v_cmpx_gt_u32_e32 vcc, v1, v2
          + [vop1(0x01, 4, INT0 + 7)]                                    # v_mov_b32 v4, 7 in the lanes left on
          + [sop1(0x01, 10, EXEC), sop1(0x01, 12, VCC), sop1(0x01, EXEC, 30)]
          + vop3(0xDA, 20, V + 1, V + 2)                                 # v_cmpx_eq_u32_e64 s[20:21], v1, v2 (all lanes)
          + [sop1(0x01, 14, EXEC), sop1(0x01, EXEC, 30)]
          + [vop1(0x01, 5, 10), vop1(0x01, 6, 11), vop1(0x01, 7, 12), vop1(0x01, 8, 13), vop1(0x01, 9, 20),
             vop1(0x01, 10, 21), vop1(0x01, 11, 14), vop1(0x01, 12, 15)])
  out = execute(prog, [4, 5, 6, 7, 8, 9, 10, 11, 12], a, b)
  on = np.arange(L) < 60
  gt = (a > b) & on
  assert out[0, 1:5].tolist() == [*mask_bits(gt), *mask_bits(gt)]       # EXEC == VCC == the compare under EXEC
  np.testing.assert_array_equal(out[:, 0], np.where(gt, 7, 0))
  eq = a == b
  assert out[0, 5:9].tolist() == [*mask_bits(eq), *mask_bits(eq)]       # s[20:21] == EXEC

# ---- VOP2/VOP3b carries: VCC or an SGPR pair carries between the halves of 64-bit math
def test_64_bit_add_and_sub_through_carry_chains():
  a, b, c = words(), words(), words()
  b[:4] = 0xFFFFFFFF
  prog = ([vop2(0x19, 4, V + 1, 2)]                                       # v_add_co_u32 v4, vcc, v1, v2
          + [vop2(0x1C, 5, V + 3, 2)]                                    # v_addc_co_u32 v5, vcc, v3, v2, vcc
          + [sop1(0x01, 22, VCC)]
          + vop3(0x11A, 6, V + 1, V + 2, sdst=20)                        # v_sub_co_u32 v6, s[20:21], v1, v2
          + vop3(0x11D, 7, V + 3, V + 2, 20, sdst=20)                    # v_subb_co_u32 v7, s[20:21], v3, v2, s[20:21]
          + vop3(0x11B, 8, V + 1, V + 3, sdst=24)                        # v_subrev_co_u32 v8, s[24:25], v1, v3
          + vop3(0x11E, 9, V + 2, V + 3, 24, sdst=24)                    # v_subbrev_co_u32 v9, s[24:25], v2, v3, s[24:25]
          + [vop1(0x01, 10, 22), vop1(0x01, 11, 23), vop1(0x01, 12, 20), vop1(0x01, 13, 21)])
  out = execute(prog, [4, 5, 6, 7, 8, 9, 10, 11, 12, 13], a, b, c)
  x, y = (np.asarray(v, object) for v in (pair(a, c), pair(b, b)))
  total = x + y
  assert [int(v) for v in pair(out[:, 0], out[:, 1])] == [int(t) % 2**64 for t in total]
  assert out[0, 6:8].tolist() == list(mask_bits(total >= 2**64))        # the final carry in VCC
  diff = x - y
  assert [int(v) for v in pair(out[:, 2], out[:, 3])] == [int(t) % 2**64 for t in diff]
  assert out[0, 8:10].tolist() == list(mask_bits(diff < 0))              # the final borrow in s[20:21]
  rev = pair(c, c).astype(object) - pair(a, b).astype(object)            # subrev: S1 - S0 over (v1,v2) and (v3,v3)
  assert [int(v) for v in pair(out[:, 4], out[:, 5])] == [int(t) % 2**64 for t in rev]

def test_lshlrev_b64_and_mad_u64_u32():
  a, b, c = words(), words(), words()
  prog = (vop3(0x28F, 4, V + 3, V + 1)                                    # v_lshlrev_b64 v[4:5], v3, v[1:2]
          + vop3(0x1E8, 6, V + 1, V + 2, V + 2, sdst=20)                 # v_mad_u64_u32 v[6:7], s[20:21], v1, v2, v[2:3]
          + [vop1(0x01, 8, 20), vop1(0x01, 9, 21)])
  out = execute(prog, [4, 5, 6, 7, 8, 9], a, b, c)
  x = [int(v) for v in pair(a, b)]
  assert [int(v) for v in pair(out[:, 0], out[:, 1])] == [(v << (int(s) & 63)) % 2**64 for v, s in zip(x, c)]
  mad = [int(p) * int(q) + int(r) for p, q, r in zip(a, b, pair(b, c))]
  assert [int(v) for v in pair(out[:, 2], out[:, 3])] == [m % 2**64 for m in mad]
  assert out[0, 4:6].tolist() == list(mask_bits(np.array([m >= 2**64 for m in mad])))

# ---- SDWA: sub-dword source selects with sign extension, destination fields with PAD / SEXT / PRESERVE
def test_sdwa_selects_and_destination_fields():
  a, b, c = words(), words(), words()
  prog = ([vop1(0x01, 4, V + 3), vop1(0x01, 7, V + 3)]                    # v4 = v7 = C
          + sdwa(vop2(0x34, 4, 0, 2), 1, dst_sel=5, dst_unused=2, src0_sel=1, src0_sext=1, src1_sel=4)
          # v_add_u32_sdwa v4, sext(v1), v2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_1 src1_sel:WORD_0
          + sdwa(vop2(0x14, 5, 0, 2), 1, dst_sel=2, dst_unused=1, src0_sel=3)
          # v_or_b32_sdwa v5, v1, v2 dst_sel:BYTE_2 dst_unused:UNUSED_SEXT src0_sel:BYTE_3 src1_sel:DWORD
          + sdwa(vop1(0x01, 6, 0), 2, dst_sel=4, src0_sel=5)             # v_mov_b32_sdwa v6, v2 dst_sel:WORD_0 (PAD) src0_sel:WORD_1
          + sdwa(vop2(0x10, 7, 0, 1), 2, dst_sel=1, dst_unused=2, src0_sel=0, src1_sel=5))
          # v_lshrrev_b32_sdwa v7, v2, v1 dst_sel:BYTE_1 PRESERVE src0_sel:BYTE_0 src1_sel:WORD_1
  out = execute(prog, [4, 5, 6, 7], a, b, c).astype(np.int64)
  a, b, c = a.astype(np.int64), b.astype(np.int64), c.astype(np.int64)
  byte1 = (a >> 8 & 0xFF) - ((a >> 8 & 0x80) << 1)
  s = (byte1 + (b & 0xFFFF)) & 0xFFFF
  np.testing.assert_array_equal(out[:, 0], (c & 0xFFFF) | s << 16)
  r = ((a >> 24) | b) & 0xFF
  np.testing.assert_array_equal(out[:, 1], (r << 16) | np.where(r & 0x80, 0xFF000000, 0))
  np.testing.assert_array_equal(out[:, 2], b >> 16)
  sh = ((a >> 16) >> (b & 0xFF & 31)) & 0xFF
  np.testing.assert_array_equal(out[:, 3], (c & ~0xFF00) | sh << 8)

def test_sdwa_half_float_ops_compare_with_an_sgpr_and_negate():
  h = rng.uniform(-8, 8, (L, 2)).astype(np.float16)
  h[::7, 1] = np.inf
  h[3::9, 1] = np.nan
  a = h.view(np.uint32).ravel()
  b = rng.uniform(-8, 8, (L, 2)).astype(np.float16).view(np.uint32).ravel()
  prog = ([sop1(0x00, 6, LIT), 0x204]                                     # s6 = class mask: -inf (bit 2) and +inf (bit 9)
          + sdwa(vopc(0x14, 0, 6), 1, src0_sel=5, s1=1, sdst=20)         # v_cmp_class_f16_sdwa s[20:21], v1, s6 src0_sel:WORD_1
          + [vop1(0x01, 4, 20), vop1(0x01, 5, 21)]
          + sdwa(vop2(0x22, 6, 0, 2), 1, dst_sel=4, src0_sel=5, src0_neg=1, src1_sel=4))
          # v_mul_f16_sdwa v6, -v1, v2 dst_sel:WORD_0 dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:WORD_0
  out = execute(prog, [4, 5, 6], a, b)
  assert out[0, :2].tolist() == list(mask_bits(np.isinf(h[:, 1])))
  prod = (-h[:, 1] * b.view(np.float16).reshape(L, 2)[:, 0]).astype(np.float16)
  np.testing.assert_array_equal(out[:, 2], prod.view(np.uint16).astype(np.uint32))

# ---- DPP: src0 from another lane of the row/wave; masks and bound_ctrl decide what is written
def test_dpp_lane_patterns_masks_and_bound_ctrl():
  a, b, c = floats(), floats(), floats()
  lane = np.arange(L)
  prog = ([vop1(0x01, 5, V + 3), vop1(0x01, 6, V + 3), vop1(0x01, 7, V + 3)]
          + dpp(vop1(0x01, 4, 0), 1, 0x1B)                               # v_mov_b32_dpp v4, v1 quad_perm:[3,2,1,0]
          + dpp(vop2(0x01, 5, 0, 2), 1, 0x111, bound_ctrl=1, src0_neg=1)  # v_add_f32_dpp v5, -v1, v2 row_shr:1 bound_ctrl
          + dpp(vop1(0x01, 6, 0), 1, 0x101)                              # v_mov_b32_dpp v6, v1 row_shl:1 (no bound_ctrl)
          + dpp(vop1(0x01, 7, 0), 1, 0x142, row_mask=0xA, bank_mask=0xD)  # row_bcast:15 row_mask:0xa bank_mask:0xd
          + dpp(vop1(0x01, 8, 0), 1, 0x138, bound_ctrl=1))               # v_mov_b32_dpp v8, v1 wave_shr:1 bound_ctrl
  out = f32(execute(prog, [4, 5, 6, 7, 8], a, b, c))
  np.testing.assert_array_equal(out[:, 0], a[(lane & ~3) + 3 - (lane & 3)])
  shr = np.where(lane % 16 == 0, np.float32(0), -a[lane - 1])
  np.testing.assert_array_equal(out[:, 1], shr + b)
  np.testing.assert_array_equal(out[:, 2], np.where(lane % 16 == 15, c, a[np.minimum(lane + 1, L - 1)]))
  written = (np.isin(lane // 16, [1, 3])) & ((lane >> 2 & 3) != 1)
  np.testing.assert_array_equal(out[:, 3], np.where(written, a[np.maximum(lane // 16 * 16 - 1, 0)], c))
  np.testing.assert_array_equal(out[:, 4], np.where(lane == 0, np.float32(0), a[lane - 1]))

# ---- VOP3P mixed precision, the gfx9 inline 1/(2*pi), and COMPUTE_PGM_RSRC1's denormal mode on gfx942
def test_fma_mix_inverse_two_pi_and_denormal_mode():
  h = rng.uniform(-4, 4, (L, 2)).astype(np.float16)
  b, c = floats(), floats()
  prog = (vop3p(0x20, 4, V + 1, V + 2, V + 3, opsel=1, opsel_hi=1)        # v_fma_mix_f32 v4, v1 (f16 hi), v2, v3
          + vop3(0x105, 5, INV_2PI, V + 2))                              # v_mul_f32_e64 v5, 0.15915494, v2
  out = f32(execute(prog, [4, 5], h.view(np.uint32).ravel(), b, c))
  expect = (h[:, 1].astype(np.float64) * b + c).astype(np.float32)
  np.testing.assert_array_equal(out[:, 0], expect)
  np.testing.assert_array_equal(out[:, 1], np.float32(1 / (2 * np.pi)) * b)
  tiny = np.full(L, np.float32(1e-39))                                    # a denormal f32
  keep = f32(execute([vop2(0x05, 4, F1, 1)], [4], tiny))                  # v_mul_f32 v4, 1.0, v1
  flush = f32(execute([vop2(0x05, 4, F1, 1)], [4], tiny, rsrc1=RSRC1 & ~(3 << 16)))
  np.testing.assert_array_equal(keep[:, 0], tiny)
  np.testing.assert_array_equal(flush[:, 0], np.zeros(L, np.float32))

# ---- 16-bit results: gfx9 clears the upper half of vdst where RDNA keeps it (GCNSubtarget::zeroesHigh16BitsOfDest);
# LLVM relies on it, e.g. feeding v_add_u16's result to v_mul_u32_u24, which reads 24 bits
def test_16_bit_results_clear_the_upper_half_except_fma_mixlo():
  a, b, c = words(), floats(), words()
  prog = ([vop1(0x01, 4, V + 1)]                                        # v_mov_b32 v4, v1
          + vop3p(0x21, 4, V + 2, V + 2, V + 2, opsel_hi=0)             # v_fma_mixlo_f16 v4, v2, v2, v2 (f32 sources)
          + [vop1(0x01, 5, V + 1)]                                      # v_mov_b32 v5, v1
          + vop3(0x1EB, 5, V + 1, V + 3, V + 1)                         # v_mad_legacy_u16 v5, v1, v3, v1
          + [vop2(0x26, 1, V + 2, 3)])                                  # v_add_u16 v1, v2, v3
  out = execute(prog, [1, 4, 5], a, b, c)
  lo = lambda x: np.asarray(x).view(np.uint32).astype(np.uint64) & np.uint64(0xFFFF)
  np.testing.assert_array_equal(out[:, 0], (lo(b) + lo(c)) & np.uint64(0xFFFF))
  np.testing.assert_array_equal(out[:, 2], (lo(a) * lo(c) + lo(a)) & np.uint64(0xFFFF))
  np.testing.assert_array_equal(out[:, 1] >> 16, a >> 16)                # v_fma_mixlo_f16 keeps the upper half
  np.testing.assert_allclose((out[:, 1] & 0xFFFF).astype(np.uint16).view(np.float16), b.astype(np.float64) ** 2 + b, rtol=1e-3)

# ---- MODE through s_setreg / s_getreg (mode_register.py): LLVM's flushed-denormal fdiv turns denormals on around it
def hwreg(reg: int, offset: int, width: int) -> int: return reg | offset << 6 | (width - 1) << 11

def test_setreg_and_getreg_of_the_mode_register():
  tiny = np.full(L, np.float32(1e-39))
  prog = ([sopk(0x14, 0, hwreg(1, 4, 2)), 0]                              # s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 0
          + [vop2(0x05, 4, F1, 1)]                                       # v_mul_f32 v4, 1.0, v1: flushed
          + [sopk(0x11, 20, hwreg(1, 4, 4))]                             # s_getreg_b32 s20, hwreg(HW_REG_MODE, 4, 4)
          + [sop1(0x00, 21, INT0 + 3), sopk(0x12, 21, hwreg(1, 4, 2))]   # s_setreg_b32 hwreg(HW_REG_MODE, 4, 2), s21 = 3
          + [vop2(0x05, 5, F1, 1), vop1(0x01, 6, 20)]
          + [sopk(0x11, 22, hwreg(1, 9, 1)), vop1(0x01, 7, 22)])         # IEEE bit
  out = execute(prog, [4, 5, 6, 7], tiny)
  assert f32(out[:, 0]).tolist() == [0.0] * L and f32(out[:, 1]).tolist() == tiny.tolist()
  assert out[0, 2:].tolist() == [0b1100, 1]                               # f32 flushed (0), f16/f64 kept (3)

def test_a_rounding_mode_or_another_hwreg_faults():
  with pytest.raises(ShaderFault, match="FP_ROUND"): execute([sopk(0x14, 0, hwreg(1, 0, 4)), 1], [])
  with pytest.raises(ShaderFault, match="hardware register 2"): execute([sopk(0x11, 20, hwreg(2, 0, 32))], [])

FDIV_FLUSHED = HEAD + """
define amdgpu_kernel void @fdiv(ptr addrspace(1) %a, ptr addrspace(1) %b) #0 {
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr float, ptr addrspace(1) %a, i32 %i
  %pb = getelementptr float, ptr addrspace(1) %b, i32 %i
  %x = load float, ptr addrspace(1) %pa
  %y = load float, ptr addrspace(1) %pb
  %z = fdiv float %x, %y
  store float %z, ptr addrspace(1) %pa
  ret void
}
declare i32 @llvm.amdgcn.workitem.id.x()
""" + f'attributes #0 = {{ {ATTRS} "denormal-fp-math-f32"="preserve-sign,preserve-sign" }}\n'

def test_llvm_fdiv_with_flushed_denormals_sets_mode_and_rounds_correctly():
  asm, _ = compile_kernel(FDIV_FLUSHED, "gfx942")
  assert "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 3" in asm and ".amdhsa_float_denorm_mode_32 0" in asm
  a, b = (rng.standard_normal(L) * 1e3).astype(np.float32), rng.standard_normal(L).astype(np.float32)
  want = a / b
  launch(FDIV_FLUSHED, "fdiv", (1, 1, 1), (L, 1, 1), [a, b], arch="gfx942")
  np.testing.assert_array_equal(a, want)

# ---- LLVM-compiled gfx942 kernels that use the gfx9 forms: packed f32 math, SDWA byte math, DPP lane moves
PACKED_BYTES = HEAD + """
define amdgpu_kernel void @k(ptr addrspace(1) %f, ptr addrspace(1) %u) #0 {
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %pf = getelementptr <2 x float>, ptr addrspace(1) %f, i32 %i
  %x = load <2 x float>, ptr addrspace(1) %pf
  %m = fmul <2 x float> %x, <float 3.0, float -0.5>
  %s = call <2 x float> @llvm.fma.v2f32(<2 x float> %m, <2 x float> %x, <2 x float> <float 1.5, float 1.5>)
  store <2 x float> %s, ptr addrspace(1) %pf
  %pu = getelementptr <4 x i8>, ptr addrspace(1) %u, i32 %i
  %b = load <4 x i8>, ptr addrspace(1) %pu
  %r = shufflevector <4 x i8> %b, <4 x i8> poison, <4 x i32> <i32 3, i32 2, i32 1, i32 0>
  %t = add <4 x i8> %b, %r
  %q = lshr <4 x i8> %t, <i8 1, i8 2, i8 3, i8 1>
  store <4 x i8> %q, ptr addrspace(1) %pu
  ret void
}
declare i32 @llvm.amdgcn.workitem.id.x()
declare <2 x float> @llvm.fma.v2f32(<2 x float>, <2 x float>, <2 x float>)
""" + f"attributes #0 = {{ {ATTRS} }}\n"

def test_llvm_packed_f32_and_sdwa_byte_math():
  asm, _ = compile_kernel(PACKED_BYTES, "gfx942")
  assert "v_pk_fma_f32" in asm and "v_pk_mul_f32" in asm and "_sdwa" in asm
  f = floats().reshape(-1, 2).repeat(2, axis=0).ravel()[:2 * L].copy()
  u = rng.integers(0, 256, 4 * L, dtype=np.uint8)
  fw, uw = f.reshape(L, 2).astype(np.float64), u.reshape(L, 4).astype(np.uint16)
  want_f = (((fw * [3.0, -0.5]).astype(np.float32).astype(np.float64) * fw) + 1.5).astype(np.float32).ravel()
  want_u = (((uw + uw[:, ::-1]) & 0xFF) >> np.array([1, 2, 3, 1], np.uint16)).astype(np.uint8).ravel()
  launch(PACKED_BYTES, "k", (1, 1, 1), (L, 1, 1), [f, u], arch="gfx942")
  np.testing.assert_array_equal(f, want_f)
  np.testing.assert_array_equal(u, want_u)

# (dpp_ctrl, row_mask, bank_mask, bound_ctrl) -> per lane the source lane or -1 (computed here by hand from the
# guide's "DPP_CTRL" enumeration, not by the model)
_LANE = np.arange(L)
DPP_CASES = {
  (0xB1, 0xF, 0xF, 0): _LANE ^ 1,                                                   # quad_perm:[1,0,3,2]
  (0x113, 0xF, 0xF, 0): np.where(_LANE % 16 >= 3, _LANE - 3, -1),                   # row_shr:3
  (0x125, 0xF, 0xF, 0): _LANE // 16 * 16 + (_LANE % 16 - 5) % 16,                   # row_ror:5
  (0x140, 0xF, 0xF, 0): _LANE // 16 * 16 + 15 - _LANE % 16,                         # row_mirror
  (0x138, 0xF, 0xF, 1): _LANE - 1,                                                  # wave_shr:1 bound_ctrl
  (0x142, 0xA, 0xF, 0): _LANE // 16 * 16 - 1,                                       # row_bcast:15, rows 1 and 3
}

def test_llvm_update_dpp_lane_moves():
  calls = "".join(f"""
  %v{k} = call i32 @llvm.amdgcn.update.dpp.i32(i32 %old, i32 %src, i32 {ctrl}, i32 {rm}, i32 {bm}, i1 {'true' if bc else 'false'})
  %p{k} = getelementptr i32, ptr addrspace(1) %out, i32 %o{k}
  store i32 %v{k}, ptr addrspace(1) %p{k}""" + f"\n  %o{k + 1} = add i32 %o{k}, 64" for k, (ctrl, rm, bm, bc) in enumerate(DPP_CASES))
  ir = HEAD + f"""
define amdgpu_kernel void @k(ptr addrspace(1) %in, ptr addrspace(1) %out) #0 {{
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr i32, ptr addrspace(1) %in, i32 %i
  %src = load i32, ptr addrspace(1) %pa
  %old = xor i32 %src, -1
  %o0 = add i32 %i, 0{calls}
  ret void
}}
declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.update.dpp.i32(i32, i32, i32, i32, i32, i1)
attributes #0 = {{ {ATTRS} }}
"""
  asm, _ = compile_kernel(ir, "gfx942")
  assert asm.count("_dpp") >= len(DPP_CASES)
  a = words()
  out = np.zeros(L * len(DPP_CASES), np.uint32)
  launch(ir, "k", (1, 1, 1), (L, 1, 1), [a, out], arch="gfx942")
  for k, ((ctrl, rm, bm, bc), src) in enumerate(DPP_CASES.items()):
    on = (rm >> (_LANE // 16) & 1).astype(bool) & (bm >> (_LANE // 4 % 4) & 1).astype(bool)
    moved = np.where(src >= 0, a[np.maximum(src, 0)], 0 if bc else ~a)
    np.testing.assert_array_equal(out[k * L:(k + 1) * L], np.where(on, moved, ~a), err_msg=f"dpp_ctrl {ctrl:#x}")

def test_llvm_saturating_add_sub_and_packed_half_on_gfx942():
  from tests.drivers.mock.test_amd_shader_kernels import PACKED, SATURATE
  a, b = (rng.integers(-2**31, 2**31, L).astype(np.int32) for _ in range(2))
  a[:3], b[:3] = [2**31 - 1, -2**31, 30000], [5, 7, 10000]
  out = np.zeros((L, 3), np.int32)
  launch(SATURATE, "sat", (1, 1, 1), (L, 1, 1), [a, b, out], arch="gfx942")
  au, bu = a.view(np.uint32).astype(np.int64), b.view(np.uint32).astype(np.int64)
  np.testing.assert_array_equal(out[:, 0].view(np.uint32), np.minimum(au + bu, 2**32 - 1))
  np.testing.assert_array_equal(out[:, 1], np.clip(a.astype(np.int64) - b, -2**31, 2**31 - 1))
  np.testing.assert_array_equal(out[:, 2], np.clip(a.astype(np.int16).astype(np.int64) + b.astype(np.int16), -2**15, 2**15 - 1))
  h, k = (rng.standard_normal((2, L, 2)) * 3).astype(np.float16)
  c = np.zeros((L, 2), np.float16)
  launch(PACKED, "pk", (1, 1, 1), (L, 1, 1), [h, k, c], arch="gfx942")
  s = (h * k).astype(np.float16) + np.array([1, 2], np.float16)
  f = (np.stack([s[:, 1], k[:, 0]], axis=1).astype(np.float64) * h + k).astype(np.float16)
  np.testing.assert_array_equal(c, np.maximum(-f, h))

# ---- AGPRs: the upper part of the unified register file from ACCUM_OFFSET = (RSRC3[5:0] + 1) * 4 (agpr_ops.py)
def test_accvgpr_moves_live_in_the_unified_file_past_accum_offset():
  a = words()
  prog = (vop3p(0x59, 0, V + 1, 0)                                        # v_accvgpr_write_b32 a0, v1
          + vop3p(0x59, 1, INT0 + 7, 0)                                  # v_accvgpr_write_b32 a1, 7
          + [vop1(0x52, 2, V + 0)]                                       # v_accvgpr_mov_b32 a2, a0
          + vop3p(0x58, 4, V + 2, 0) + vop3p(0x58, 5, V + 1, 0)          # v_accvgpr_read_b32 v4, a2; v5, a1
          + [vop1(0x01, 6, V + 16)])                                     # v_mov_b32 v6, v16: a0 when ACCUM_OFFSET is 16
  out = execute(prog, [4, 5, 6], a, rsrc3=3)                              # ACCUM_OFFSET field 3 -> unified register 16
  np.testing.assert_array_equal(out[:, 0], a)
  np.testing.assert_array_equal(out[:, 1], np.full(L, 7, np.uint32))
  np.testing.assert_array_equal(out[:, 2], a)

def test_an_agpr_past_the_allocation_faults():
  with pytest.raises(ShaderFault, match="AGPR a127 is unified register 131, beyond the 128"):
    execute(vop3p(0x59, 127, V + 1, 0), [], rsrc3=0)

def bf16_nearest_even(x: float) -> int:
  """The bfloat16 bits nearest to float32 x (ties to the even one), by comparing the two neighbours in float64."""
  if np.isnan(x): return None
  down = int(np.float32(x).view(np.uint32)) >> 16
  value = lambda bits: float(np.uint32(bits << 16).view(np.float32))
  lo, hi = value(down), value(down + 1)
  d_lo, d_hi = abs(float(x) - lo), abs(float(x) - hi)
  return down if d_lo < d_hi or (d_lo == d_hi and down % 2 == 0) else down + 1

def test_gfx950_packed_conversions_and_three_way_minimum_maximum():
  """gfx950 (CDNA4 ISA guide): v_cvt_pk_f16_f32 / v_cvt_pk_bf16_f32 (VOP3 0x267/0x268) pack two floats rounded to
  nearest even, S0 low; v_pk_maximum3_f16 / v_pk_minimum3_f16 (VOP3P 0x1c/0x1b) take the IEEE 754-2019
  maximum/minimum of three per half (a NaN operand gives NaN)."""
  a, b = floats(), floats()
  a[3], b[5], b[6] = np.nan, np.float32(1.00390625), np.float32(1.01171875)  # ties: round to even, down and up
  h = lambda x: x.astype(np.float16).view(np.uint16).astype(np.uint32)
  out = execute(vop3(0x267, 4, V + 1, V + 2) + vop3(0x268, 5, V + 1, V + 2), [4, 5], a=a, b=b)
  np.testing.assert_array_equal(out[:, 0], h(a) | h(b) << np.uint32(16))
  assert [int(w) >> 16 for w in out[:, 1]] == [bf16_nearest_even(x) for x in b]
  lows = [int(w) & 0xFFFF for w in out[:, 1]]
  assert lows[3] & 0x7F80 == 0x7F80 and lows[3] & 0x7F and [l for i, l in enumerate(lows) if i != 3] == [bf16_nearest_even(x) for i, x in enumerate(a) if i != 3]
  halves = [floats().astype(np.float16) for _ in range(6)]
  halves[1][7] = np.float16(np.nan)
  pack = lambda lo, hi: lo.view(np.uint16).astype(np.uint32) | hi.view(np.uint16).astype(np.uint32) << np.uint32(16)
  out = execute(vop3p(0x1c, 4, V + 1, V + 2, V + 3) + vop3p(0x1b, 5, V + 1, V + 2, V + 3), [4, 5],
                a=pack(halves[0], halves[1]), b=pack(halves[2], halves[3]), c=pack(halves[4], halves[5]))
  for col, fn in ((0, np.maximum), (1, np.minimum)):  # numpy's maximum/minimum propagate NaN as IEEE 754-2019 does
    got = out[:, col]
    np.testing.assert_array_equal((got & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16), fn(fn(halves[0], halves[2]), halves[4]))
    np.testing.assert_array_equal((got >> np.uint32(16)).astype(np.uint16).view(np.float16), fn(fn(halves[1], halves[3]), halves[5]))

@pytest.mark.parametrize("table", [0xEC, 0x96, 0x01, 0xF0])
def test_gfx950_bitop3_applies_the_truth_table_bit_by_bit(table):
  """v_bitop3_b32 (VOP3 0x234, gfx950): bit i of D is bit (S0[i]*4 + S1[i]*2 + S2[i]) of the table in omod:abs:neg."""
  a, b, c = words(), words(), words()
  out = execute(vop3(0x234, 4, V + 1, V + 2, V + 3, omod=table >> 6, abs_=table >> 3 & 7, neg=table & 7), [4], a=a, b=b, c=c)
  def reference(x: int, y: int, z: int) -> int:
    return sum((table >> ((x >> i & 1) * 4 + (y >> i & 1) * 2 + (z >> i & 1)) & 1) << i for i in range(32))
  assert [int(v) for v in out[:, 0]] == [reference(int(x), int(y), int(z)) for x, y, z in zip(a, b, c)]
