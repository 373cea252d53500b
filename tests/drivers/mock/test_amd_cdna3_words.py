"""The CDNA3 (gfx942/gfx950) decoder on hand-assembled words: each word is built here from the field layout of AMD's
"AMD Instinct MI300 (CDNA3) ISA" reference guide, chapter "Microcode Formats" (opcode numbers from its opcode tables),
and must decode to the instruction, operands and LLVM text the guide and LLVM's printer give."""
import struct
import pytest
from drivers.mock.amd.shader.cdna3 import decode, disassemble
from drivers.mock.amd.shader.instruction import Operand, UnknownInstruction

def words(*ws: int) -> bytes: return struct.pack(f"<{len(ws)}I", *ws)

# ---- encoders: one per microcode format, fields at the guide's bit positions
def sop1(op, sdst, ssrc0): return 0b101111101 << 23 | sdst << 16 | op << 8 | ssrc0
def sop2(op, sdst, ssrc0, ssrc1): return 0b10 << 30 | op << 23 | sdst << 16 | ssrc1 << 8 | ssrc0
def sopc(op, ssrc0, ssrc1): return 0b101111110 << 23 | op << 16 | ssrc1 << 8 | ssrc0
def sopk(op, sdst, simm16): return 0b1011 << 28 | op << 23 | sdst << 16 | simm16
def sopp(op, simm16=0): return 0b101111111 << 23 | op << 16 | simm16
def smem(op, sdata, sbase, offset, imm=1, glc=0):
  return [0b110000 << 26 | op << 18 | imm << 17 | glc << 16 | sdata << 6 | sbase >> 1, offset]
def vop1(op, vdst, src0): return 0b0111111 << 25 | vdst << 17 | op << 9 | src0
def vop2(op, vdst, src0, vsrc1): return op << 25 | vdst << 17 | vsrc1 << 9 | src0
def vopc(op, src0, vsrc1): return 0b0111110 << 25 | op << 17 | vsrc1 << 9 | src0
def vop3(op, vdst, src0, src1, src2=0, abs_=0, neg=0, clamp=0, omod=0, sdst=None):
  mid = sdst << 8 if sdst is not None else abs_ << 8
  return [0b110100 << 26 | op << 16 | clamp << 15 | mid | vdst, neg << 29 | omod << 27 | src2 << 18 | src1 << 9 | src0]
def vop3p(op, vdst, src0, src1, src2=0, opsel=0, opsel_hi=7, neg=0, neg_hi=0, acc_cd=0):
  w0 = 0b110100111 << 23 | op << 16 | acc_cd << 15 | (opsel_hi >> 2 & 1) << 14 | opsel << 11 | neg_hi << 8 | vdst
  return [w0, neg << 29 | (opsel_hi & 3) << 27 | src2 << 18 | src1 << 9 | src0]
def ds(op, vdst=0, addr=0, data0=0, data1=0, offset0=0, offset1=0, gds=0):
  return [0b110110 << 26 | op << 17 | gds << 16 | offset1 << 8 | offset0, vdst << 24 | data1 << 16 | data0 << 8 | addr]
def flat(seg, op, vdst=0, addr=0, data=0, saddr=0x7F, offset=0, sc0=0, nt=0, sc1=0, acc=0, sve=0):
  w0 = 0b110111 << 26 | sc1 << 25 | op << 18 | nt << 17 | sc0 << 16 | seg << 14 | sve << 13 | (offset & 0x1FFF)
  return [w0, vdst << 24 | acc << 23 | saddr << 16 | data << 8 | addr]
def mubuf(op, vdata, vaddr, srsrc, soffset, offset=0, offen=0, idxen=0, sc0=0, sc1=0, nt=0):
  w0 = 0b111000 << 26 | op << 18 | nt << 17 | sc1 << 15 | sc0 << 14 | idxen << 13 | offen << 12 | offset
  return [w0, soffset << 24 | (srsrc >> 2) << 16 | vdata << 8 | vaddr]

V = 256       # a VGPR in a 9-bit source field is 256 + its number
INT0 = 128    # inline integer 0; 129..192 are 1..64, 193..208 are -1..-16
LIT = 255
VCC, M0, EXEC = 106, 124, 126

def one(*ws: int, at: int = 0):
  inst = decode(words(*ws), at) if at == 0 else decode(words(*([sopp(0)] * (at // 4)), *ws), at)
  return inst

@pytest.mark.parametrize("ws, name, text", [
  ([sop1(0x01, EXEC, 2)], "s_mov_b64", "s_mov_b64 exec, s[2:3]"),
  ([sop1(0x00, 1, LIT), 0x40080000], "s_mov_b32", "s_mov_b32 s1, 0x40080000"),
  ([sop1(0x00, 0, LIT), 0x3F800000], "s_mov_b32", "s_mov_b32 s0, 1.0"),          # a literal with an inline pattern
  ([sop1(0x00, 0, LIT), 0xFFFFFFF8], "s_mov_b32", "s_mov_b32 s0, -8"),
  ([sop1(0x00, M0, 1)], "s_mov_b32", "s_mov_b32 m0, s1"),
  ([sop1(0x01, 0, 102)], "s_mov_b64", "s_mov_b64 s[0:1], flat_scratch"),
  ([sop1(0x01, 110, 104)], "s_mov_b64", "s_mov_b64 ttmp[2:3], xnack_mask"),
  ([sop1(0x00, 0, 235)], "s_mov_b32", "s_mov_b32 s0, src_shared_base"),
  ([sop1(0x00, 3, 208)], "s_mov_b32", "s_mov_b32 s3, -16"),
  ([sop1(0x1C, 0, 0)], "s_getpc_b64", "s_getpc_b64 s[0:1]"),
  ([sop1(0x1D, 0, 4)], "s_setpc_b64", "s_setpc_b64 s[4:5]"),
  ([sop1(0x20, 2, VCC)], "s_and_saveexec_b64", "s_and_saveexec_b64 s[2:3], vcc"),
  ([sop1(0x23, 2, VCC)], "s_and_not1_saveexec_b64", "s_andn2_saveexec_b64 s[2:3], vcc"),
  ([sop1(0x10, 5, 6)], "s_ctz_i32_b32", "s_ff1_i32_b32 s5, s6"),
  ([sop1(0x0D, 5, 6)], "s_bcnt1_i32_b64", "s_bcnt1_i32_b64 s5, s[6:7]"),
  ([sop2(0x1D, 2, 8, INT0 + 2)], "s_lshl_b64", "s_lshl_b64 s[2:3], s[8:9], 2"),
  ([sop2(0x04, 1, 1, 3)], "s_addc_u32", "s_addc_u32 s1, s1, s3"),
  ([sop2(0x00, 0, LIT, 2), 0x12345], "s_add_u32", "s_add_u32 s0, 0x12345, s2"),
  ([sop2(0x13, EXEC, EXEC, 2)], "s_and_not1_b64", "s_andn2_b64 exec, exec, s[2:3]"),
  ([sopc(0x04, 1, 0)], "s_cmp_lt_i32", "s_cmp_lt_i32 s1, s0"),
  ([sopc(0x12, 0, 2)], "s_cmp_eq_u64", "s_cmp_eq_u64 s[0:1], s[2:3]"),
  ([sopk(0x00, 4, 0x80)], "s_movk_i32", "s_movk_i32 s4, 0x80"),
  ([sopk(0x09, 0, 0x100)], "s_cmpk_lg_u32", "s_cmpk_lg_u32 s0, 0x100"),
  ([sopk(0x11, 0, 1 | 4 << 6 | 3 << 11)], "s_getreg_b32", "s_getreg_b32 s0, hwreg(HW_REG_MODE, 4, 4)"),
  ([sopk(0x12, 3, 2 | 31 << 11)], "s_setreg_b32", "s_setreg_b32 hwreg(HW_REG_STATUS), s3"),
  ([sopp(0x01)], "s_endpgm", "s_endpgm"),
  ([sopp(0x00, 6)], "s_nop", "s_nop 6"),
  ([sopp(0x0A)], "s_barrier", "s_barrier"),
  ([sopp(0x0C, 0x0070)], "s_waitcnt", "s_waitcnt vmcnt(0) lgkmcnt(0)"),
  ([sopp(0x0C, 0xC07F)], "s_waitcnt", "s_waitcnt lgkmcnt(0)"),
  ([sopp(0x0C, 0x0F7F | 0x1 << 14)], "s_waitcnt", "s_waitcnt vmcnt(31)"),
  ([sopp(0x0C, 0xCF7F)], "s_waitcnt", "s_waitcnt vmcnt(63) expcnt(7) lgkmcnt(15)"),
  (smem(0x02, 0, 4, 0x10), "s_load_b128", "s_load_dwordx4 s[0:3], s[4:5], 0x10"),
  (smem(0x01, 6, 4, 0x10, glc=1), "s_load_b64", "s_load_dwordx2 s[6:7], s[4:5], 0x10 glc"),
  (smem(0x08, 8, 8, 0x4), "s_buffer_load_b32", "s_buffer_load_dword s8, s[8:11], 0x4"),
  (smem(0x24, 2, 0, 0), "s_memtime", "s_memtime s[2:3]"),
  ([vop1(0x01, 1, 2)], "v_mov_b32", "v_mov_b32_e32 v1, s2"),
  ([vop1(0x01, 0, 248)], "v_mov_b32", "v_mov_b32_e32 v0, 0.15915494"),
  ([vop1(0x01, 0, LIT), 0x3FF], "v_mov_b32", "v_mov_b32_e32 v0, 0x3ff"),
  ([vop1(0x04, 2, V + 2)], "v_cvt_f64_i32", "v_cvt_f64_i32_e32 v[2:3], v2"),
  ([vop1(0x03, 2, V + 4)], "v_cvt_i32_f64", "v_cvt_i32_f64_e32 v2, v[4:5]"),
  ([vop1(0x02, 4, V + 4)], "v_readfirstlane_b32", "v_readfirstlane_b32 s4, v4"),
  ([vop1(0x2D, 0, V + 1)], "v_clz_i32_u32", "v_ffbh_u32_e32 v0, v1"),
  ([vop1(0x38, 2, V + 4)], "v_mov_b64", "v_mov_b64_e32 v[2:3], v[4:5]"),
  ([vop2(0x34, 2, V + 3, 4)], "v_add_nc_u32", "v_add_u32_e32 v2, v3, v4"),
  ([vop2(0x00, 1, INT0, 2)], "v_cndmask_b32", "v_cndmask_b32_e32 v1, 0, v2, vcc"),
  ([vop2(0x19, 1, V + 4, 8)], "v_add_co_u32", "v_add_co_u32_e32 v1, vcc, v4, v8"),
  ([vop2(0x1C, 4, V + 5, 9)], "v_add_co_ci_u32", "v_addc_co_u32_e32 v4, vcc, v5, v9, vcc"),
  ([vop2(0x17, 1, V + 4, 1), 0x4F800000], "v_fmamk_f32", "v_fmamk_f32 v1, v4, 0x4f800000, v1"),
  ([vop2(0x18, 1, V + 4, 1), 0x3F800000], "v_fmaak_f32", "v_fmaak_f32 v1, v4, v1, 0x3f800000"),
  ([vop2(0x26, 3, V + 1, 2)], "v_add_nc_u16", "v_add_u16_e32 v3, v1, v2"),
  ([vop2(0x1F, 2, INT0 + 1, 3)], "v_add_f16", "v_add_f16_e32 v2, 1, v3"),
  ([vop2(0x1F, 2, 242, 3)], "v_add_f16", "v_add_f16_e32 v2, 1.0, v3"),
  ([vop2(0x1F, 2, LIT, 3), 0x4248], "v_add_f16", "v_add_f16_e32 v2, 0x4248, v3"),
  ([vop2(0x04, 4, V + 4, 8)], "v_fmac_f64", "v_fmac_f64_e32 v[4:5], v[4:5], v[8:9]"),
  ([vopc(0xCC, 4, 0)], "v_cmp_gt_u32", "v_cmp_gt_u32_e32 vcc, s4, v0"),
  ([vopc(0x64, 4, 0)], "v_cmp_gt_f64", "v_cmp_gt_f64_e32 vcc, s[4:5], v[0:1]"),
  ([vopc(0x12, V + 0, 8)], "v_cmp_class_f64", "v_cmp_class_f64_e32 vcc, v[0:1], v8"),
  (vop3(0x1CB, 6, V + 3, V + 4, 242, neg=1), "v_fma_f32", "v_fma_f32 v6, -v3, v4, 1.0"),
  (vop3(0x1CB, 6, V + 3, 242, V + 4, neg=2), "v_fma_f32", "v_fma_f32 v6, v3, neg(1.0), v4"),
  (vop3(0xCB, 0, 7, V + 6), "v_cmp_le_u32", "v_cmp_le_u32_e64 s[0:1], s7, v6"),
  (vop3(0x101, 0, V + 1, V + 2, abs_=1, neg=2, clamp=1, omod=1), "v_add_f32", "v_add_f32_e64 v0, |v1|, -v2 clamp mul:2"),
  (vop3(0x100, 8, INT0, 193, 0), "v_cndmask_b32", "v_cndmask_b32_e64 v8, 0, -1, s[0:1]"),
  (vop3(0x11D, 6, V + 7, V + 8, VCC, sdst=0), "v_sub_co_ci_u32", "v_subb_co_u32_e64 v6, s[0:1], v7, v8, vcc"),
  (vop3(0x1E8, 2, V + 2, 6, V + 4, sdst=4), "v_mad_u64_u32", "v_mad_u64_u32 v[2:3], s[4:5], v2, s6, v[4:5]"),
  (vop3(0x1E0, 3, V + 7, V + 7, V + 2, sdst=0), "v_div_scale_f32", "v_div_scale_f32 v3, s[0:1], v7, v7, v2"),
  (vop3(0x208, 2, 0, INT0, V + 0), "v_lshl_add_u64", "v_lshl_add_u64 v[2:3], s[0:1], 0, v[0:1]"),
  (vop3(0x28F, 0, INT0 + 2, V + 0), "v_lshlrev_b64", "v_lshlrev_b64 v[0:1], 2, v[0:1]"),
  (vop3(0x281, 8, V + 6, V + 4), "v_mul_f64", "v_mul_f64 v[8:9], v[6:7], v[4:5]"),
  (vop3(0x284, 0, V + 0, V + 2), "v_ldexp_f64", "v_ldexp_f64 v[0:1], v[0:1], v2"),
  (vop3(0x285, 1, V + 2, 7), "v_mul_lo_u32", "v_mul_lo_u32 v1, v2, s7"),
  (vop3(0x289, 1, V + 4, INT0 + 5), "v_readlane_b32", "v_readlane_b32 s1, v4, 5"),
  (vop3(0x29C, 2, V + 1, V + 2), "v_add_nc_i32", "v_add_i32 v2, v1, v2"),
  (vop3p(0x10, 5, V + 4, V + 4, opsel_hi=3), "v_pk_mul_f16", "v_pk_mul_f16 v5, v4, v4"),
  (vop3p(0x0E, 4, V + 5, V + 4, 4, opsel=1), "v_pk_fma_f16", "v_pk_fma_f16 v4, v5, v4, s4 op_sel:[1,0,0]"),
  (vop3p(0x0E, 4, V + 5, V + 4, 4, opsel_hi=0, neg=2), "v_pk_fma_f16", "v_pk_fma_f16 v4, v5, v4, s4 op_sel_hi:[0,0,0] neg_lo:[0,1,0]"),
  (vop3p(0x31, 6, V + 2, V + 2, opsel_hi=3), "v_pk_mul_f32", "v_pk_mul_f32 v[6:7], v[2:3], v[2:3]"),
  (vop3p(0x4D, 0, V + 2, V + 2, V + 0, acc_cd=1, opsel_hi=0), "v_mfma_f32_16x16x16_f16",
   "v_mfma_f32_16x16x16_f16 a[0:3], v[2:3], v[2:3], a[0:3]"),
  (vop3p(0x44, 0, V + 1, V + 2, V + 0, acc_cd=1, opsel_hi=0), "v_mfma_f32_32x32x2_f32",
   "v_mfma_f32_32x32x2_f32 a[0:15], v1, v2, a[0:15]"),
  (vop3p(0x58, 0, V + 1, 0, opsel_hi=0), "v_accvgpr_read_b32", "v_accvgpr_read_b32 v0, a1"),
  (vop3p(0x59, 2, V + 3, 0, opsel_hi=0), "v_accvgpr_write_b32", "v_accvgpr_write_b32 a2, v3"),
  (ds(0x0D, addr=1, data0=2), "ds_store_b32", "ds_write_b32 v1, v2"),
  (ds(0x36, vdst=3, addr=1, offset0=16), "ds_load_b32", "ds_read_b32 v3, v1 offset:16"),
  (ds(0x36, vdst=3, addr=1, offset0=4, offset1=1), "ds_load_b32", "ds_read_b32 v3, v1 offset:260"),
  (ds(0x38, vdst=0, addr=4, offset1=1), "ds_load_2addr_stride64_b32", "ds_read2st64_b32 v[0:1], v4 offset1:1"),
  (ds(0x0E, addr=1, data0=2, data1=3, offset0=1, offset1=2), "ds_store_2addr_b32", "ds_write2_b32 v1, v2, v3 offset0:1 offset1:2"),
  (ds(0x20, vdst=5, addr=1, data0=2), "ds_add_rtn_u32", "ds_add_rtn_u32 v5, v1, v2"),
  (ds(0x3F, vdst=0, addr=1, data0=2), "ds_bpermute_b32", "ds_bpermute_b32 v0, v1, v2"),
  (ds(0x76, vdst=2, addr=0), "ds_load_b64", "ds_read_b64 v[2:3], v0"),
  (flat(2, 0x14, vdst=6, addr=2), "global_load_b32", "global_load_dword v6, v[2:3], off"),
  (flat(2, 0x12, vdst=1, addr=0, saddr=0), "global_load_u16", "global_load_ushort v1, v0, s[0:1]"),
  (flat(2, 0x1C, addr=0, data=1, saddr=0, offset=-16, sc0=1, sc1=1), "global_store_b32",
   "global_store_dword v0, v1, s[0:1] offset:-16 sc0 sc1"),
  (flat(2, 0x1C, addr=0, data=2, offset=0xFFF, nt=1), "global_store_b32", "global_store_dword v[0:1], v2, off offset:4095 nt"),
  (flat(2, 0x17, vdst=0, addr=0, saddr=2, acc=1), "global_load_b128", "global_load_dwordx4 a[0:3], v0, s[2:3]"),
  (flat(2, 0x42, vdst=4, addr=2, data=1, saddr=0, sc0=1), "global_atomic_add_u32", "global_atomic_add v4, v2, v1, s[0:1] sc0"),
  (flat(2, 0x4D, addr=5, data=4, saddr=2, offset=16), "global_atomic_add_f32", "global_atomic_add_f32 v5, v4, s[2:3] offset:16"),
  (flat(2, 0x41, vdst=0, addr=4, data=0, saddr=2, sc0=1), "global_atomic_cmpswap_b32",
   "global_atomic_cmpswap v0, v4, v[0:1], s[2:3] sc0"),
  (flat(0, 0x14, vdst=0, addr=0, offset=8), "flat_load_b32", "flat_load_dword v0, v[0:1] offset:8"),
  (flat(1, 0x14, vdst=1, saddr=0, offset=4, sc0=1, sc1=1), "scratch_load_b32", "scratch_load_dword v1, off, s0 offset:4 sc0 sc1"),
  (flat(1, 0x1C, addr=2, data=1, sve=1), "scratch_store_b32", "scratch_store_dword v2, v1, off"),
  (ds(0x3D, vdst=2, addr=4, offset0=0xE4, offset1=0x80), "ds_swizzle_b32", "ds_swizzle_b32 v2, v4 offset:swizzle(QUAD_PERM,0,1,2,3)"),
  (ds(0x3D, vdst=2, addr=4, offset0=0x1F, offset1=0x40), "ds_swizzle_b32", "ds_swizzle_b32 v2, v4 offset:swizzle(SWAP,16)"),
  (ds(0x3D, vdst=2, addr=4, offset0=0x1F, offset1=0x7C), "ds_swizzle_b32", "ds_swizzle_b32 v2, v4 offset:swizzle(REVERSE,32)"),
  (ds(0x3D, vdst=2, addr=4, offset0=0x5C), "ds_swizzle_b32", "ds_swizzle_b32 v2, v4 offset:swizzle(BROADCAST,4,2)"),
  ([sopp(0x10, 1)], "s_sendmsg", "s_sendmsg sendmsg(MSG_INTERRUPT)"),
  ([sopp(0x10, 0x122)], "s_sendmsg", "s_sendmsg sendmsg(MSG_GS, GS_OP_EMIT, 1)"),
  ([sopp(0x10, 0x03)], "s_sendmsg", "s_sendmsg sendmsg(MSG_GS_DONE, GS_OP_NOP)"),
  ([sopp(0x10, 0x1F)], "s_sendmsg", "s_sendmsg sendmsg(MSG_SYSMSG, SYSMSG_OP_ECC_ERR_INTERRUPT)"),
  ([sopp(0x10, 0x11)], "s_sendmsg", "s_sendmsg sendmsg(1, 1, 0)"),
  (mubuf(0x14, 1, 2, 4, INT0, offset=4, offen=1), "buffer_load_b32", "buffer_load_dword v1, v2, s[4:7], 0 offen offset:4"),
  (mubuf(0x28, 0, 0, 0, INT0, sc1=1), "buffer_wbl2", "buffer_wbl2 sc1"),
])
def test_word_decodes_to_name_and_llvm_text(ws, name, text):
  inst = one(*ws)
  assert (inst.name, inst.text) == (name, text)
  assert inst.size == 4 * len(ws)

def test_encoding_families():
  assert one(sop1(0, 1, 2)).encoding == "SOP1" and one(sopk(0, 1, 2)).encoding == "SOPK"
  assert one(*smem(2, 0, 4, 0)).encoding == "SMEM" and one(*vop3(0x1CB, 0, 0, 0, 0)).encoding == "VOP3"
  assert one(*flat(2, 0x14)).encoding == "GLOBAL" and one(*flat(1, 0x14)).encoding == "SCRATCH"
  assert one(*flat(0, 0x14)).encoding == "FLAT" and one(*ds(0x36)).encoding == "DS"
  assert one(*vop3p(0x10, 0, 0, 0)).encoding == "VOP3P" and one(vopc(0xCC, 0, 0)).encoding == "VOPC"

def test_fields_follow_the_executor_conventions():
  """VOP2 sources are src0/src1; implicit VCC and the fmac accumulator are spelled out as src2/sdst (as rdna3.py)."""
  f = one(vop2(0x1C, 4, V + 5, 9)).fields
  assert (f["vdst"], f["src0"], f["src1"], f["src2"], f["sdst"]) == (Operand("v", 4), Operand("v", 5), Operand("v", 9),
                                                                   Operand("vcc_lo"), Operand("vcc_lo"))
  f = one(vop2(0x3B, 3, V + 1, 2)).fields
  assert f["src2"] == Operand("v", 3)
  f = one(vop2(0x17, 1, V + 4, 7), 0x4F800000).fields
  assert (f["src1"], f["src2"]) == (Operand("literal", value=0x4F800000), Operand("v", 7))
  f = one(*vop3(0x1E8, 2, V + 2, 6, V + 4, sdst=4)).fields
  assert (f["sdst"], f["src1"], f["src2"]) == (Operand("s", 4), Operand("s", 6), Operand("v", 4))
  f = one(*vop3(0xCB, 0, 7, V + 6)).fields
  assert (f["sdst"], f["src0"], f["src1"]) == (Operand("s", 0), Operand("s", 7), Operand("v", 6))
  f = one(*smem(0x02, 0, 4, 0x1FFFF0)).fields  # 21-bit signed byte offset
  assert (f["sbase"], f["sdata"], f["offset"]) == (Operand("s", 4), Operand("s", 0), -16)
  f = one(*flat(2, 0x1C, addr=0, data=1, offset=-16, sc0=1)).fields
  assert (f["offset"], f["saddr"], f["glc"], f["slc"]) == (-16, Operand("null"), 1, 0)
  f = one(*ds(0x0E, addr=1, data0=2, data1=3, offset0=1, offset1=2)).fields
  assert (f["addr"], f["data0"], f["data1"], f["offset0"], f["offset1"]) == (Operand("v", 1), Operand("v", 2), Operand("v", 3), 1, 2)

def test_inline_constants_and_literal():
  f = one(vop2(0x01, 0, 193, 1)).fields   # v_add_f32 with -1
  assert f["src0"] == Operand("int", value=-1)
  f = one(vop2(0x01, 0, 246, 1)).fields
  assert f["src0"] == Operand("float", value=4.0)
  inst = one(vop2(0x01, 0, LIT, 1), 0xC0490FDB)
  assert inst.fields["src0"] == Operand("literal", value=0xC0490FDB) and inst.size == 8
  assert inst.text == "v_add_f32_e32 v0, 0xc0490fdb, v1"

def test_waitcnt_counters_and_branch_target():
  f = one(sopp(0x0C, 3 | 2 << 4 | 5 << 8 | 1 << 14)).fields
  assert (f["vmcnt"], f["expcnt"], f["lgkmcnt"]) == (16 + 3, 2, 5)
  inst = one(sopp(0x02, 0xFFFD), at=0x20)  # s_branch -3 dwords: target = pc + 4 + 4 * simm16
  assert inst.fields["target"] == 0x20 + 4 - 12 and inst.text == "s_branch 65533"
  assert one(sopp(0x05, 2)).fields["target"] == 12

def test_sdwa_and_dpp():
  sdwa = 0x06 | 6 << 8 | 1 << 16 | 6 << 24  # src0 v6, dst_sel DWORD, src0_sel BYTE_1, src1_sel DWORD
  inst = one(vop2(0x26, 7, 249, 7), sdwa)
  assert inst.name == "v_add_nc_u16" and inst.size == 8 and inst.fields["src0_sel"] == 1
  assert inst.text == "v_add_u16_sdwa v7, v6, v7 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_1 src1_sel:DWORD"
  inst = one(vop1(0x01, 3, 250), 0x02 | 0x111 << 8 | 0xF << 24 | 0xF << 28)
  assert inst.text == "v_mov_b32_dpp v3, v2 row_shr:1 row_mask:0xf bank_mask:0xf" and inst.fields["dpp_ctrl"] == 0x111
  inst = one(vop2(0x01, 1, 250, 2), 0x05 | 0b11100100 << 8 | 1 << 19 | 1 << 20 | 0x3 << 24 | 0xC << 28)
  assert inst.text == "v_add_f32_dpp v1, -v5, v2 quad_perm:[0,1,2,3] row_mask:0xc bank_mask:0x3 bound_ctrl:1"

def test_bitop3_truth_table_gfx950():
  # V_BITOP3_B32 keeps its 8-bit table in omod[1:0]:abs[2:0]:neg[2:0] (0xEC = 0b11_101_100)
  inst = one(*vop3(0x234, 7, V + 9, V + 8, 6, abs_=0b101, neg=0b100, omod=0b11))
  assert inst.fields["bitop3"] == 0xEC and inst.text == "v_bitop3_b32 v7, v9, v8, s6 bitop3:0xec"

@pytest.mark.parametrize("ws, message", [
  ([vop1(0x09, 0, 0)], "VOP1 opcode 0x9 at offset 0x0"),
  ([vop3(0x2FF, 0, 0, 0)[0], 0], "VOP3 opcode 0x2ff"),
  ([0b111010 << 26, 0], "word 0xe8000000"),
  ([sop2(0x00, 0, LIT, 2)], "runs past the end"),
  (flat(3, 0x14), "FLAT segment 3"),
  ([sop1(0x00, 0, 125)], "operand code 125 is no gfx9 source in SOP1"),
  (vop3(0x1CB, 0, LIT, 0, 0), "operand code 255 is no gfx9 source in VOP3"),  # gfx9 VOP3 takes no literal
])
def test_unknown_encodings_name_the_problem(ws, message):
  with pytest.raises(UnknownInstruction, match=message): decode(words(*ws), 0)

def test_disassemble_walks_literals():
  code = words(sop1(0x00, 1, LIT), 0x40080000, vop1(0x01, 1, 2), sopp(0x01))
  assert disassemble(code) == ["s_mov_b32 s1, 0x40080000", "v_mov_b32_e32 v1, s2", "s_endpgm"]
