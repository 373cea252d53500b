"""Decoder of the gfx9 instruction encodings as gfx942 (MI300, CDNA3) and gfx950 (CDNA4) run them: machine words ->
Instruction (instruction.py) named by its RDNA3 mnemonic where the behaviour is the same, with LLVM's disassembly
text. Formats and fields: AMD "AMD Instinct MI300 (CDNA3) ISA" reference guide, chapter "Microcode Formats"; text
rules: llvm/lib/Target/AMDGPU/MCTargetDesc/AMDGPUInstPrinter.cpp.

Fields, named as rdna3.py names them: SOP*: sdst, ssrc0, ssrc1, simm16 (raw), target (branches: byte offset in the
code); s_waitcnt: vmcnt, expcnt, lgkmcnt; SMEM: sdata, sbase, offset (signed bytes), soffset (null if none), glc;
VOP1/2/C/3: vdst, sdst, src0..src2 in the order the operation reads them (fmamk/fmaak: K in src1/src2; mac/fmac/dot*c:
src2 = vdst; carry ops and cndmask: VCC in src2, carry-out in sdst; compares: sdst, VCC for the 32-bit form, which
gfx9 v_cmpx_* write as well as EXEC), neg, abs, opsel, clamp, omod; SDWA/DPP forms add modifier ("SDWA"/"DPP") and
their selects; VOP3P: neg, neg_hi, opsel, opsel_hi; MFMA: acc_cd, acc, cbsz, abid, blgp (AGPRs are "acc" operands);
DS: vdst, addr, data0, data1, offset0, offset1, gds; FLAT/GLOBAL/SCRATCH: vdst, addr, data, saddr (null for off),
offset (signed), sve, sc0, sc1, nt (glc/slc repeat sc0/nt); MUBUF: vdata, vaddr, srsrc, soffset, offset, offen,
idxen, sc0, sc1, nt."""
from __future__ import annotations
import re, struct
from drivers.mock.amd.shader.instruction import Instruction, Operand, UnknownInstruction

# opcode -> gfx9 mnemonic per encoding (hex opcode:name); MI300 ISA guide opcode tables of each microcode format,
# cross-checked with LLVM's *_vi / *_gfx940 real instruction defs (SOPInstructions.td, VOP1/2/3/3P/CInstructions.td,
# SMInstructions.td, DSInstructions.td, FLATInstructions.td, BUFInstructions.td). VOP3 lists only the VOP3-only
# opcodes: VOPC, VOP2 and VOP1 opcodes appear in VOP3 at op, 0x100 + op and 0x140 + op.
_TABLES = {
  "SOP1": """
    0:s_mov_b32 1:s_mov_b64 2:s_cmov_b32 3:s_cmov_b64 4:s_not_b32 5:s_not_b64 6:s_wqm_b32 7:s_wqm_b64 8:s_brev_b32
    9:s_brev_b64 a:s_bcnt0_i32_b32 b:s_bcnt0_i32_b64 c:s_bcnt1_i32_b32 d:s_bcnt1_i32_b64 e:s_ff0_i32_b32
    f:s_ff0_i32_b64 10:s_ff1_i32_b32 11:s_ff1_i32_b64 12:s_flbit_i32_b32 13:s_flbit_i32_b64 14:s_flbit_i32
    15:s_flbit_i32_i64 16:s_sext_i32_i8 17:s_sext_i32_i16 18:s_bitset0_b32 19:s_bitset0_b64 1a:s_bitset1_b32
    1b:s_bitset1_b64 1c:s_getpc_b64 1d:s_setpc_b64 1e:s_swappc_b64 1f:s_rfe_b64 20:s_and_saveexec_b64
    21:s_or_saveexec_b64 22:s_xor_saveexec_b64 23:s_andn2_saveexec_b64 24:s_orn2_saveexec_b64 25:s_nand_saveexec_b64
    26:s_nor_saveexec_b64 27:s_xnor_saveexec_b64 28:s_quadmask_b32 29:s_quadmask_b64 2a:s_movrels_b32
    2b:s_movrels_b64 2c:s_movreld_b32 2d:s_movreld_b64 2e:s_cbranch_join 30:s_abs_i32 32:s_set_gpr_idx_idx
    33:s_andn1_saveexec_b64 34:s_orn1_saveexec_b64 35:s_andn1_wrexec_b64 36:s_andn2_wrexec_b64
    37:s_bitreplicate_b64_b32""",
  "SOP2": """
    0:s_add_u32 1:s_sub_u32 2:s_add_i32 3:s_sub_i32 4:s_addc_u32 5:s_subb_u32 6:s_min_i32 7:s_min_u32 8:s_max_i32
    9:s_max_u32 a:s_cselect_b32 b:s_cselect_b64 c:s_and_b32 d:s_and_b64 e:s_or_b32 f:s_or_b64 10:s_xor_b32
    11:s_xor_b64 12:s_andn2_b32 13:s_andn2_b64 14:s_orn2_b32 15:s_orn2_b64 16:s_nand_b32 17:s_nand_b64 18:s_nor_b32
    19:s_nor_b64 1a:s_xnor_b32 1b:s_xnor_b64 1c:s_lshl_b32 1d:s_lshl_b64 1e:s_lshr_b32 1f:s_lshr_b64 20:s_ashr_i32
    21:s_ashr_i64 22:s_bfm_b32 23:s_bfm_b64 24:s_mul_i32 25:s_bfe_u32 26:s_bfe_i32 27:s_bfe_u64 28:s_bfe_i64
    29:s_cbranch_g_fork 2a:s_absdiff_i32 2b:s_rfe_restore_b64 2c:s_mul_hi_u32 2d:s_mul_hi_i32 2e:s_lshl1_add_u32
    2f:s_lshl2_add_u32 30:s_lshl3_add_u32 31:s_lshl4_add_u32 32:s_pack_ll_b32_b16 33:s_pack_lh_b32_b16
    34:s_pack_hh_b32_b16""",
  "SOPC": """
    0:s_cmp_eq_i32 1:s_cmp_lg_i32 2:s_cmp_gt_i32 3:s_cmp_ge_i32 4:s_cmp_lt_i32 5:s_cmp_le_i32 6:s_cmp_eq_u32
    7:s_cmp_lg_u32 8:s_cmp_gt_u32 9:s_cmp_ge_u32 a:s_cmp_lt_u32 b:s_cmp_le_u32 c:s_bitcmp0_b32 d:s_bitcmp1_b32
    e:s_bitcmp0_b64 f:s_bitcmp1_b64 10:s_setvskip 11:s_set_gpr_idx_on 12:s_cmp_eq_u64 13:s_cmp_lg_u64""",
  "SOPK": """
    0:s_movk_i32 1:s_cmovk_i32 2:s_cmpk_eq_i32 3:s_cmpk_lg_i32 4:s_cmpk_gt_i32 5:s_cmpk_ge_i32 6:s_cmpk_lt_i32
    7:s_cmpk_le_i32 8:s_cmpk_eq_u32 9:s_cmpk_lg_u32 a:s_cmpk_gt_u32 b:s_cmpk_ge_u32 c:s_cmpk_lt_u32 d:s_cmpk_le_u32
    e:s_addk_i32 f:s_mulk_i32 10:s_cbranch_i_fork 11:s_getreg_b32 12:s_setreg_b32 14:s_setreg_imm32_b32
    15:s_call_b64""",
  "SOPP": """
    0:s_nop 1:s_endpgm 2:s_branch 3:s_wakeup 4:s_cbranch_scc0 5:s_cbranch_scc1 6:s_cbranch_vccz 7:s_cbranch_vccnz
    8:s_cbranch_execz 9:s_cbranch_execnz a:s_barrier b:s_setkill c:s_waitcnt d:s_sethalt e:s_sleep f:s_setprio
    10:s_sendmsg 11:s_sendmsghalt 12:s_trap 13:s_icache_inv 14:s_incperflevel 15:s_decperflevel 16:s_ttracedata
    17:s_cbranch_cdbgsys 18:s_cbranch_cdbguser 19:s_cbranch_cdbgsys_or_user 1a:s_cbranch_cdbgsys_and_user
    1b:s_endpgm_saved 1c:s_set_gpr_idx_off 1d:s_set_gpr_idx_mode 1e:s_endpgm_ordered_ps_done
    1f:s_set_valu_coexec_mode""",
  "SMEM": """
    0:s_load_dword 1:s_load_dwordx2 2:s_load_dwordx4 3:s_load_dwordx8 4:s_load_dwordx16 5:s_scratch_load_dword
    6:s_scratch_load_dwordx2 7:s_scratch_load_dwordx4 8:s_buffer_load_dword 9:s_buffer_load_dwordx2
    a:s_buffer_load_dwordx4 b:s_buffer_load_dwordx8 c:s_buffer_load_dwordx16 10:s_store_dword 11:s_store_dwordx2
    12:s_store_dwordx4 15:s_scratch_store_dword 16:s_scratch_store_dwordx2 17:s_scratch_store_dwordx4
    18:s_buffer_store_dword 19:s_buffer_store_dwordx2 1a:s_buffer_store_dwordx4 20:s_dcache_inv 21:s_dcache_wb
    22:s_dcache_inv_vol 23:s_dcache_wb_vol 24:s_memtime 25:s_memrealtime 26:s_atc_probe 27:s_atc_probe_buffer
    28:s_dcache_discard 29:s_dcache_discard_x2 40:s_buffer_atomic_swap 41:s_buffer_atomic_cmpswap
    42:s_buffer_atomic_add 43:s_buffer_atomic_sub 44:s_buffer_atomic_smin 45:s_buffer_atomic_umin
    46:s_buffer_atomic_smax 47:s_buffer_atomic_umax 48:s_buffer_atomic_and 49:s_buffer_atomic_or
    4a:s_buffer_atomic_xor 4b:s_buffer_atomic_inc 4c:s_buffer_atomic_dec 60:s_buffer_atomic_swap_x2
    61:s_buffer_atomic_cmpswap_x2 62:s_buffer_atomic_add_x2 63:s_buffer_atomic_sub_x2 64:s_buffer_atomic_smin_x2
    65:s_buffer_atomic_umin_x2 66:s_buffer_atomic_smax_x2 67:s_buffer_atomic_umax_x2 68:s_buffer_atomic_and_x2
    69:s_buffer_atomic_or_x2 6a:s_buffer_atomic_xor_x2 6b:s_buffer_atomic_inc_x2 6c:s_buffer_atomic_dec_x2
    80:s_atomic_swap 81:s_atomic_cmpswap 82:s_atomic_add 83:s_atomic_sub 84:s_atomic_smin 85:s_atomic_umin
    86:s_atomic_smax 87:s_atomic_umax 88:s_atomic_and 89:s_atomic_or 8a:s_atomic_xor 8b:s_atomic_inc 8c:s_atomic_dec
    a0:s_atomic_swap_x2 a1:s_atomic_cmpswap_x2 a2:s_atomic_add_x2 a3:s_atomic_sub_x2 a4:s_atomic_smin_x2
    a5:s_atomic_umin_x2 a6:s_atomic_smax_x2 a7:s_atomic_umax_x2 a8:s_atomic_and_x2 a9:s_atomic_or_x2
    aa:s_atomic_xor_x2 ab:s_atomic_inc_x2 ac:s_atomic_dec_x2""",
  "VOP1": """
    0:v_nop 1:v_mov_b32 2:v_readfirstlane_b32 3:v_cvt_i32_f64 4:v_cvt_f64_i32 5:v_cvt_f32_i32 6:v_cvt_f32_u32
    7:v_cvt_u32_f32 8:v_cvt_i32_f32 a:v_cvt_f16_f32 b:v_cvt_f32_f16 c:v_cvt_rpi_i32_f32 d:v_cvt_flr_i32_f32
    e:v_cvt_off_f32_i4 f:v_cvt_f32_f64 10:v_cvt_f64_f32 11:v_cvt_f32_ubyte0 12:v_cvt_f32_ubyte1 13:v_cvt_f32_ubyte2
    14:v_cvt_f32_ubyte3 15:v_cvt_u32_f64 16:v_cvt_f64_u32 17:v_trunc_f64 18:v_ceil_f64 19:v_rndne_f64 1a:v_floor_f64
    1b:v_fract_f32 1c:v_trunc_f32 1d:v_ceil_f32 1e:v_rndne_f32 1f:v_floor_f32 20:v_exp_f32 21:v_log_f32 22:v_rcp_f32
    23:v_rcp_iflag_f32 24:v_rsq_f32 25:v_rcp_f64 26:v_rsq_f64 27:v_sqrt_f32 28:v_sqrt_f64 29:v_sin_f32 2a:v_cos_f32
    2b:v_not_b32 2c:v_bfrev_b32 2d:v_ffbh_u32 2e:v_ffbl_b32 2f:v_ffbh_i32 30:v_frexp_exp_i32_f64 31:v_frexp_mant_f64
    32:v_fract_f64 33:v_frexp_exp_i32_f32 34:v_frexp_mant_f32 35:v_clrexcp 37:v_screen_partition_4se_b32
    38:v_mov_b64 39:v_cvt_f16_u16 3a:v_cvt_f16_i16 3b:v_cvt_u16_f16 3c:v_cvt_i16_f16 3d:v_rcp_f16 3e:v_sqrt_f16
    3f:v_rsq_f16 40:v_log_f16 41:v_exp_f16 42:v_frexp_mant_f16 43:v_frexp_exp_i16_f16 44:v_floor_f16 45:v_ceil_f16
    46:v_trunc_f16 47:v_rndne_f16 48:v_fract_f16 49:v_sin_f16 4a:v_cos_f16 4b:v_exp_legacy_f32 4c:v_log_legacy_f32
    4d:v_cvt_norm_i16_f16 4e:v_cvt_norm_u16_f16 4f:v_sat_pk_u8_i16 51:v_swap_b32 52:v_accvgpr_mov_b32
    54:v_cvt_f32_fp8 55:v_cvt_f32_bf8 56:v_cvt_pk_f32_fp8 57:v_cvt_pk_f32_bf8 58:v_prng_b32 59:v_permlane16_swap_b32
    5a:v_permlane32_swap_b32 5b:v_cvt_f32_bf16""",
  "VOP2": """
    0:v_cndmask_b32 1:v_add_f32 2:v_sub_f32 3:v_subrev_f32 4:v_fmac_f64 5:v_mul_f32 6:v_mul_i32_i24
    7:v_mul_hi_i32_i24 8:v_mul_u32_u24 9:v_mul_hi_u32_u24 a:v_min_f32 b:v_max_f32 c:v_min_i32 d:v_max_i32
    e:v_min_u32 f:v_max_u32 10:v_lshrrev_b32 11:v_ashrrev_i32 12:v_lshlrev_b32 13:v_and_b32 14:v_or_b32 15:v_xor_b32
    16:v_dot2c_f32_bf16 17:v_fmamk_f32 18:v_fmaak_f32 19:v_add_co_u32 1a:v_sub_co_u32 1b:v_subrev_co_u32
    1c:v_addc_co_u32 1d:v_subb_co_u32 1e:v_subbrev_co_u32 1f:v_add_f16 20:v_sub_f16 21:v_subrev_f16 22:v_mul_f16
    23:v_mac_f16 24:v_madmk_f16 25:v_madak_f16 26:v_add_u16 27:v_sub_u16 28:v_subrev_u16 29:v_mul_lo_u16
    2a:v_lshlrev_b16 2b:v_lshrrev_b16 2c:v_ashrrev_i16 2d:v_max_f16 2e:v_min_f16 2f:v_max_u16 30:v_max_i16
    31:v_min_u16 32:v_min_i16 33:v_ldexp_f16 34:v_add_u32 35:v_sub_u32 36:v_subrev_u32 37:v_dot2c_f32_f16
    38:v_dot2c_i32_i16 39:v_dot4c_i32_i8 3a:v_dot8c_i32_i4 3b:v_fmac_f32 3c:v_pk_fmac_f16 3d:v_xnor_b32""",
  "VOPC": """
    10:v_cmp_class_f32 11:v_cmpx_class_f32 12:v_cmp_class_f64 13:v_cmpx_class_f64 14:v_cmp_class_f16
    15:v_cmpx_class_f16 20:v_cmp_f_f16 21:v_cmp_lt_f16 22:v_cmp_eq_f16 23:v_cmp_le_f16 24:v_cmp_gt_f16
    25:v_cmp_lg_f16 26:v_cmp_ge_f16 27:v_cmp_o_f16 28:v_cmp_u_f16 29:v_cmp_nge_f16 2a:v_cmp_nlg_f16 2b:v_cmp_ngt_f16
    2c:v_cmp_nle_f16 2d:v_cmp_neq_f16 2e:v_cmp_nlt_f16 2f:v_cmp_tru_f16 30:v_cmpx_f_f16 31:v_cmpx_lt_f16
    32:v_cmpx_eq_f16 33:v_cmpx_le_f16 34:v_cmpx_gt_f16 35:v_cmpx_lg_f16 36:v_cmpx_ge_f16 37:v_cmpx_o_f16
    38:v_cmpx_u_f16 39:v_cmpx_nge_f16 3a:v_cmpx_nlg_f16 3b:v_cmpx_ngt_f16 3c:v_cmpx_nle_f16 3d:v_cmpx_neq_f16
    3e:v_cmpx_nlt_f16 3f:v_cmpx_tru_f16 40:v_cmp_f_f32 41:v_cmp_lt_f32 42:v_cmp_eq_f32 43:v_cmp_le_f32
    44:v_cmp_gt_f32 45:v_cmp_lg_f32 46:v_cmp_ge_f32 47:v_cmp_o_f32 48:v_cmp_u_f32 49:v_cmp_nge_f32 4a:v_cmp_nlg_f32
    4b:v_cmp_ngt_f32 4c:v_cmp_nle_f32 4d:v_cmp_neq_f32 4e:v_cmp_nlt_f32 4f:v_cmp_tru_f32 50:v_cmpx_f_f32
    51:v_cmpx_lt_f32 52:v_cmpx_eq_f32 53:v_cmpx_le_f32 54:v_cmpx_gt_f32 55:v_cmpx_lg_f32 56:v_cmpx_ge_f32
    57:v_cmpx_o_f32 58:v_cmpx_u_f32 59:v_cmpx_nge_f32 5a:v_cmpx_nlg_f32 5b:v_cmpx_ngt_f32 5c:v_cmpx_nle_f32
    5d:v_cmpx_neq_f32 5e:v_cmpx_nlt_f32 5f:v_cmpx_tru_f32 60:v_cmp_f_f64 61:v_cmp_lt_f64 62:v_cmp_eq_f64
    63:v_cmp_le_f64 64:v_cmp_gt_f64 65:v_cmp_lg_f64 66:v_cmp_ge_f64 67:v_cmp_o_f64 68:v_cmp_u_f64 69:v_cmp_nge_f64
    6a:v_cmp_nlg_f64 6b:v_cmp_ngt_f64 6c:v_cmp_nle_f64 6d:v_cmp_neq_f64 6e:v_cmp_nlt_f64 6f:v_cmp_tru_f64
    70:v_cmpx_f_f64 71:v_cmpx_lt_f64 72:v_cmpx_eq_f64 73:v_cmpx_le_f64 74:v_cmpx_gt_f64 75:v_cmpx_lg_f64
    76:v_cmpx_ge_f64 77:v_cmpx_o_f64 78:v_cmpx_u_f64 79:v_cmpx_nge_f64 7a:v_cmpx_nlg_f64 7b:v_cmpx_ngt_f64
    7c:v_cmpx_nle_f64 7d:v_cmpx_neq_f64 7e:v_cmpx_nlt_f64 7f:v_cmpx_tru_f64 a0:v_cmp_f_i16 a1:v_cmp_lt_i16
    a2:v_cmp_eq_i16 a3:v_cmp_le_i16 a4:v_cmp_gt_i16 a5:v_cmp_ne_i16 a6:v_cmp_ge_i16 a7:v_cmp_t_i16 a8:v_cmp_f_u16
    a9:v_cmp_lt_u16 aa:v_cmp_eq_u16 ab:v_cmp_le_u16 ac:v_cmp_gt_u16 ad:v_cmp_ne_u16 ae:v_cmp_ge_u16 af:v_cmp_t_u16
    b0:v_cmpx_f_i16 b1:v_cmpx_lt_i16 b2:v_cmpx_eq_i16 b3:v_cmpx_le_i16 b4:v_cmpx_gt_i16 b5:v_cmpx_ne_i16
    b6:v_cmpx_ge_i16 b7:v_cmpx_t_i16 b8:v_cmpx_f_u16 b9:v_cmpx_lt_u16 ba:v_cmpx_eq_u16 bb:v_cmpx_le_u16
    bc:v_cmpx_gt_u16 bd:v_cmpx_ne_u16 be:v_cmpx_ge_u16 bf:v_cmpx_t_u16 c0:v_cmp_f_i32 c1:v_cmp_lt_i32
    c2:v_cmp_eq_i32 c3:v_cmp_le_i32 c4:v_cmp_gt_i32 c5:v_cmp_ne_i32 c6:v_cmp_ge_i32 c7:v_cmp_t_i32 c8:v_cmp_f_u32
    c9:v_cmp_lt_u32 ca:v_cmp_eq_u32 cb:v_cmp_le_u32 cc:v_cmp_gt_u32 cd:v_cmp_ne_u32 ce:v_cmp_ge_u32 cf:v_cmp_t_u32
    d0:v_cmpx_f_i32 d1:v_cmpx_lt_i32 d2:v_cmpx_eq_i32 d3:v_cmpx_le_i32 d4:v_cmpx_gt_i32 d5:v_cmpx_ne_i32
    d6:v_cmpx_ge_i32 d7:v_cmpx_t_i32 d8:v_cmpx_f_u32 d9:v_cmpx_lt_u32 da:v_cmpx_eq_u32 db:v_cmpx_le_u32
    dc:v_cmpx_gt_u32 dd:v_cmpx_ne_u32 de:v_cmpx_ge_u32 df:v_cmpx_t_u32 e0:v_cmp_f_i64 e1:v_cmp_lt_i64
    e2:v_cmp_eq_i64 e3:v_cmp_le_i64 e4:v_cmp_gt_i64 e5:v_cmp_ne_i64 e6:v_cmp_ge_i64 e7:v_cmp_t_i64 e8:v_cmp_f_u64
    e9:v_cmp_lt_u64 ea:v_cmp_eq_u64 eb:v_cmp_le_u64 ec:v_cmp_gt_u64 ed:v_cmp_ne_u64 ee:v_cmp_ge_u64 ef:v_cmp_t_u64
    f0:v_cmpx_f_i64 f1:v_cmpx_lt_i64 f2:v_cmpx_eq_i64 f3:v_cmpx_le_i64 f4:v_cmpx_gt_i64 f5:v_cmpx_ne_i64
    f6:v_cmpx_ge_i64 f7:v_cmpx_t_i64 f8:v_cmpx_f_u64 f9:v_cmpx_lt_u64 fa:v_cmpx_eq_u64 fb:v_cmpx_le_u64
    fc:v_cmpx_gt_u64 fd:v_cmpx_ne_u64 fe:v_cmpx_ge_u64 ff:v_cmpx_t_u64""",
  "VOP3": """
    1c2:v_mad_i32_i24 1c3:v_mad_u32_u24 1c4:v_cubeid_f32 1c5:v_cubesc_f32 1c6:v_cubetc_f32 1c7:v_cubema_f32
    1c8:v_bfe_u32 1c9:v_bfe_i32 1ca:v_bfi_b32 1cb:v_fma_f32 1cc:v_fma_f64 1cd:v_lerp_u8 1ce:v_alignbit_b32
    1cf:v_alignbyte_b32 1d0:v_min3_f32 1d1:v_min3_i32 1d2:v_min3_u32 1d3:v_max3_f32 1d4:v_max3_i32 1d5:v_max3_u32
    1d6:v_med3_f32 1d7:v_med3_i32 1d8:v_med3_u32 1d9:v_sad_u8 1da:v_sad_hi_u8 1db:v_sad_u16 1dc:v_sad_u32
    1dd:v_cvt_pk_u8_f32 1de:v_div_fixup_f32 1df:v_div_fixup_f64 1e0:v_div_scale_f32 1e1:v_div_scale_f64
    1e2:v_div_fmas_f32 1e3:v_div_fmas_f64 1e4:v_msad_u8 1e5:v_qsad_pk_u16_u8 1e6:v_mqsad_pk_u16_u8
    1e7:v_mqsad_u32_u8 1e8:v_mad_u64_u32 1e9:v_mad_i64_i32 1ea:v_mad_legacy_f16 1eb:v_mad_legacy_u16
    1ec:v_mad_legacy_i16 1ed:v_perm_b32 1ee:v_fma_legacy_f16 1ef:v_div_fixup_legacy_f16 1f0:v_cvt_pkaccum_u8_f32
    1f1:v_mad_u32_u16 1f2:v_mad_i32_i16 1f3:v_xad_u32 1f4:v_min3_f16 1f5:v_min3_i16 1f6:v_min3_u16 1f7:v_max3_f16
    1f8:v_max3_i16 1f9:v_max3_u16 1fa:v_med3_f16 1fb:v_med3_i16 1fc:v_med3_u16 1fd:v_lshl_add_u32 1fe:v_add_lshl_u32
    1ff:v_add3_u32 200:v_lshl_or_b32 201:v_and_or_b32 202:v_or3_b32 203:v_mad_f16 204:v_mad_u16 205:v_mad_i16
    206:v_fma_f16 207:v_div_fixup_f16 208:v_lshl_add_u64 233:v_bitop3_b16 234:v_bitop3_b32
    235:v_cvt_scalef32_pk_fp8_f32 236:v_cvt_scalef32_pk_bf8_f32 237:v_cvt_scalef32_sr_fp8_f32
    238:v_cvt_scalef32_sr_bf8_f32 239:v_cvt_scalef32_pk_f32_fp8 23a:v_cvt_scalef32_pk_f32_bf8
    23b:v_cvt_scalef32_f32_fp8 23c:v_cvt_scalef32_f32_bf8 23d:v_cvt_scalef32_pk_fp4_f32
    23e:v_cvt_scalef32_sr_pk_fp4_f32 23f:v_cvt_scalef32_pk_f32_fp4 240:v_cvt_scalef32_pk_fp8_f16
    241:v_cvt_scalef32_pk_bf8_f16 242:v_cvt_scalef32_sr_fp8_f16 243:v_cvt_scalef32_sr_bf8_f16
    244:v_cvt_scalef32_pk_fp8_bf16 245:v_cvt_scalef32_pk_bf8_bf16 246:v_cvt_scalef32_sr_fp8_bf16
    247:v_cvt_scalef32_sr_bf8_bf16 248:v_cvt_scalef32_pk_f16_fp8 249:v_cvt_scalef32_pk_f16_bf8
    24a:v_cvt_scalef32_f16_fp8 24b:v_cvt_scalef32_f16_bf8 24c:v_cvt_scalef32_pk_fp4_f16
    24d:v_cvt_scalef32_pk_fp4_bf16 24e:v_cvt_scalef32_sr_pk_fp4_f16 24f:v_cvt_scalef32_sr_pk_fp4_bf16
    250:v_cvt_scalef32_pk_f16_fp4 251:v_cvt_scalef32_pk_bf16_fp4 252:v_cvt_scalef32_2xpk16_fp6_f32
    253:v_cvt_scalef32_2xpk16_bf6_f32 254:v_cvt_scalef32_sr_pk32_fp6_f32 255:v_cvt_scalef32_sr_pk32_bf6_f32
    256:v_cvt_scalef32_pk32_f32_fp6 257:v_cvt_scalef32_pk32_f32_bf6 258:v_cvt_scalef32_pk32_fp6_f16
    259:v_cvt_scalef32_pk32_fp6_bf16 25a:v_cvt_scalef32_pk32_bf6_f16 25b:v_cvt_scalef32_pk32_bf6_bf16
    25c:v_cvt_scalef32_sr_pk32_fp6_f16 25d:v_cvt_scalef32_sr_pk32_fp6_bf16 25e:v_cvt_scalef32_sr_pk32_bf6_f16
    25f:v_cvt_scalef32_sr_pk32_bf6_bf16 260:v_cvt_scalef32_pk32_f16_fp6 261:v_cvt_scalef32_pk32_bf16_fp6
    262:v_cvt_scalef32_pk32_f16_bf6 263:v_cvt_scalef32_pk32_bf16_bf6 265:v_ashr_pk_i8_i32 266:v_ashr_pk_u8_i32
    267:v_cvt_pk_f16_f32 268:v_cvt_pk_bf16_f32 269:v_cvt_scalef32_pk_bf16_fp8 26a:v_cvt_scalef32_pk_bf16_bf8
    280:v_add_f64 281:v_mul_f64 282:v_min_f64 283:v_max_f64 284:v_ldexp_f64 285:v_mul_lo_u32 286:v_mul_hi_u32
    287:v_mul_hi_i32 288:v_ldexp_f32 289:v_readlane_b32 28a:v_writelane_b32 28b:v_bcnt_u32_b32
    28c:v_mbcnt_lo_u32_b32 28d:v_mbcnt_hi_u32_b32 28f:v_lshlrev_b64 290:v_lshrrev_b64 291:v_ashrrev_i64
    292:v_trig_preop_f64 293:v_bfm_b32 294:v_cvt_pknorm_i16_f32 295:v_cvt_pknorm_u16_f32 296:v_cvt_pkrtz_f16_f32
    297:v_cvt_pk_u16_u32 298:v_cvt_pk_i16_i32 299:v_cvt_pknorm_i16_f16 29a:v_cvt_pknorm_u16_f16 29c:v_add_i32
    29d:v_sub_i32 29e:v_add_i16 29f:v_sub_i16 2a0:v_pack_b32_f16 2a1:v_mul_legacy_f32 2a2:v_cvt_pk_fp8_f32
    2a3:v_cvt_pk_bf8_f32 2a4:v_cvt_sr_fp8_f32 2a5:v_cvt_sr_bf8_f32 2a6:v_cvt_sr_f16_f32 2a7:v_cvt_sr_bf16_f32
    2a8:v_minimum3_f32 2a9:v_maximum3_f32""",
  "VOP3P": """
    0:v_pk_mad_i16 1:v_pk_mul_lo_u16 2:v_pk_add_i16 3:v_pk_sub_i16 4:v_pk_lshlrev_b16 5:v_pk_lshrrev_b16
    6:v_pk_ashrrev_i16 7:v_pk_max_i16 8:v_pk_min_i16 9:v_pk_mad_u16 a:v_pk_add_u16 b:v_pk_sub_u16 c:v_pk_max_u16
    d:v_pk_min_u16 e:v_pk_fma_f16 f:v_pk_add_f16 10:v_pk_mul_f16 11:v_pk_min_f16 12:v_pk_max_f16 1a:v_dot2_f32_bf16
    1b:v_pk_minimum3_f16 1c:v_pk_maximum3_f16 20:v_fma_mix_f32 21:v_fma_mixlo_f16 22:v_fma_mixhi_f16
    23:v_dot2_f32_f16 26:v_dot2_i32_i16 27:v_dot2_u32_u16 28:v_dot4_i32_i8 29:v_dot4_u32_u8 2a:v_dot8_i32_i4
    2b:v_dot8_u32_u4 2c:v_mfma_ld_scale_b32 2d:v_mfma_f32_16x16x128_f8f6f4 2e:v_mfma_f32_32x32x64_f8f6f4
    30:v_pk_fma_f32 31:v_pk_mul_f32 32:v_pk_add_f32 33:v_pk_mov_b32 35:v_mfma_f32_16x16x32_bf16
    36:v_mfma_i32_16x16x64_i8 37:v_mfma_f32_32x32x16_bf16 38:v_mfma_i32_32x32x32_i8 39:v_smfmac_f32_16x16x64_bf16
    3a:v_smfmac_i32_16x16x128_i8 3b:v_smfmac_f32_16x16x128_bf8_bf8 3c:v_smfmac_f32_16x16x128_bf8_fp8
    3d:v_smfmac_f32_16x16x128_fp8_bf8 3e:v_mfma_f32_16x16x8_xf32 3f:v_mfma_f32_32x32x4_xf32
    40:v_mfma_f32_32x32x1_2b_f32 41:v_mfma_f32_16x16x1_4b_f32 42:v_mfma_f32_4x4x1_16b_f32
    43:v_smfmac_f32_16x16x128_fp8_fp8 44:v_mfma_f32_32x32x2_f32 45:v_mfma_f32_16x16x4_f32
    46:v_smfmac_f32_32x32x32_bf16 47:v_smfmac_i32_32x32x64_i8 48:v_mfma_f32_32x32x4_2b_f16
    49:v_mfma_f32_16x16x4_4b_f16 4a:v_mfma_f32_4x4x4_16b_f16 4b:v_smfmac_f32_32x32x64_bf8_bf8
    4c:v_mfma_f32_32x32x8_f16 4d:v_mfma_f32_16x16x16_f16 4e:v_smfmac_f32_32x32x64_bf8_fp8
    4f:v_smfmac_f32_32x32x64_fp8_bf8 50:v_mfma_i32_32x32x4_2b_i8 51:v_mfma_i32_16x16x4_4b_i8
    52:v_mfma_i32_4x4x4_16b_i8 53:v_smfmac_f32_32x32x64_fp8_fp8 54:v_mfma_f32_16x16x32_f16
    55:v_mfma_f32_32x32x16_f16 56:v_mfma_i32_32x32x16_i8 57:v_mfma_i32_16x16x32_i8 58:v_accvgpr_read
    59:v_accvgpr_write 5a:v_smfmac_f32_16x16x64_f16 5b:v_smfmac_f32_32x32x32_f16 5d:v_mfma_f32_32x32x4_2b_bf16
    5e:v_mfma_f32_16x16x4_4b_bf16 5f:v_mfma_f32_4x4x4_16b_bf16 60:v_mfma_f32_32x32x8_bf16
    61:v_mfma_f32_16x16x16_bf16 62:v_smfmac_f32_16x16x32_f16 64:v_smfmac_f32_32x32x16_f16
    66:v_smfmac_f32_16x16x32_bf16 68:v_smfmac_f32_32x32x16_bf16 6a:v_smfmac_i32_16x16x64_i8
    6c:v_smfmac_i32_32x32x32_i8 6e:v_mfma_f64_16x16x4_f64 6f:v_mfma_f64_4x4x4_4b_f64 70:v_mfma_f32_16x16x32_bf8_bf8
    71:v_mfma_f32_16x16x32_bf8_fp8 72:v_mfma_f32_16x16x32_fp8_bf8 73:v_mfma_f32_16x16x32_fp8_fp8
    74:v_mfma_f32_32x32x16_bf8_bf8 75:v_mfma_f32_32x32x16_bf8_fp8 76:v_mfma_f32_32x32x16_fp8_bf8
    77:v_mfma_f32_32x32x16_fp8_fp8 78:v_smfmac_f32_16x16x64_bf8_bf8 79:v_smfmac_f32_16x16x64_bf8_fp8
    7a:v_smfmac_f32_16x16x64_fp8_bf8 7b:v_smfmac_f32_16x16x64_fp8_fp8 7c:v_smfmac_f32_32x32x32_bf8_bf8
    7d:v_smfmac_f32_32x32x32_bf8_fp8 7e:v_smfmac_f32_32x32x32_fp8_bf8 7f:v_smfmac_f32_32x32x32_fp8_fp8""",
  "DS": """
    0:ds_add_u32 1:ds_sub_u32 2:ds_rsub_u32 3:ds_inc_u32 4:ds_dec_u32 5:ds_min_i32 6:ds_max_i32 7:ds_min_u32
    8:ds_max_u32 9:ds_and_b32 a:ds_or_b32 b:ds_xor_b32 c:ds_mskor_b32 d:ds_write_b32 e:ds_write2_b32
    f:ds_write2st64_b32 10:ds_cmpst_b32 11:ds_cmpst_f32 12:ds_min_f32 13:ds_max_f32 14:ds_nop 15:ds_add_f32
    17:ds_pk_add_f16 18:ds_pk_add_bf16 1d:ds_write_addtid_b32 1e:ds_write_b8 1f:ds_write_b16 20:ds_add_rtn_u32
    21:ds_sub_rtn_u32 22:ds_rsub_rtn_u32 23:ds_inc_rtn_u32 24:ds_dec_rtn_u32 25:ds_min_rtn_i32 26:ds_max_rtn_i32
    27:ds_min_rtn_u32 28:ds_max_rtn_u32 29:ds_and_rtn_b32 2a:ds_or_rtn_b32 2b:ds_xor_rtn_b32 2c:ds_mskor_rtn_b32
    2d:ds_wrxchg_rtn_b32 2e:ds_wrxchg2_rtn_b32 2f:ds_wrxchg2st64_rtn_b32 30:ds_cmpst_rtn_b32 31:ds_cmpst_rtn_f32
    32:ds_min_rtn_f32 33:ds_max_rtn_f32 34:ds_wrap_rtn_b32 35:ds_add_rtn_f32 36:ds_read_b32 37:ds_read2_b32
    38:ds_read2st64_b32 39:ds_read_i8 3a:ds_read_u8 3b:ds_read_i16 3c:ds_read_u16 3d:ds_swizzle_b32
    3e:ds_permute_b32 3f:ds_bpermute_b32 40:ds_add_u64 41:ds_sub_u64 42:ds_rsub_u64 43:ds_inc_u64 44:ds_dec_u64
    45:ds_min_i64 46:ds_max_i64 47:ds_min_u64 48:ds_max_u64 49:ds_and_b64 4a:ds_or_b64 4b:ds_xor_b64 4c:ds_mskor_b64
    4d:ds_write_b64 4e:ds_write2_b64 4f:ds_write2st64_b64 50:ds_cmpst_b64 51:ds_cmpst_f64 52:ds_min_f64
    53:ds_max_f64 54:ds_write_b8_d16_hi 55:ds_write_b16_d16_hi 56:ds_read_u8_d16 57:ds_read_u8_d16_hi
    58:ds_read_i8_d16 59:ds_read_i8_d16_hi 5a:ds_read_u16_d16 5b:ds_read_u16_d16_hi 5c:ds_add_f64 60:ds_add_rtn_u64
    61:ds_sub_rtn_u64 62:ds_rsub_rtn_u64 63:ds_inc_rtn_u64 64:ds_dec_rtn_u64 65:ds_min_rtn_i64 66:ds_max_rtn_i64
    67:ds_min_rtn_u64 68:ds_max_rtn_u64 69:ds_and_rtn_b64 6a:ds_or_rtn_b64 6b:ds_xor_rtn_b64 6c:ds_mskor_rtn_b64
    6d:ds_wrxchg_rtn_b64 6e:ds_wrxchg2_rtn_b64 6f:ds_wrxchg2st64_rtn_b64 70:ds_cmpst_rtn_b64 71:ds_cmpst_rtn_f64
    72:ds_min_rtn_f64 73:ds_max_rtn_f64 76:ds_read_b64 77:ds_read2_b64 78:ds_read2st64_b64 7c:ds_add_rtn_f64
    7e:ds_condxchg32_rtn_b64 98:ds_gws_sema_release_all 9a:ds_gws_sema_v 9c:ds_gws_sema_p b6:ds_read_addtid_b32
    b7:ds_pk_add_rtn_f16 b8:ds_pk_add_rtn_bf16 bd:ds_consume be:ds_append de:ds_write_b96 df:ds_write_b128
    e0:ds_read_b64_tr_b4 e1:ds_read_b96_tr_b6 e2:ds_read_b64_tr_b8 e3:ds_read_b64_tr_b16 fe:ds_read_b96
    ff:ds_read_b128""",
  "FLAT": """
    10:flat_load_ubyte 11:flat_load_sbyte 12:flat_load_ushort 13:flat_load_sshort 14:flat_load_dword
    15:flat_load_dwordx2 16:flat_load_dwordx3 17:flat_load_dwordx4 18:flat_store_byte 19:flat_store_byte_d16_hi
    1a:flat_store_short 1b:flat_store_short_d16_hi 1c:flat_store_dword 1d:flat_store_dwordx2 1e:flat_store_dwordx3
    1f:flat_store_dwordx4 20:flat_load_ubyte_d16 21:flat_load_ubyte_d16_hi 22:flat_load_sbyte_d16
    23:flat_load_sbyte_d16_hi 24:flat_load_short_d16 25:flat_load_short_d16_hi 40:flat_atomic_swap
    41:flat_atomic_cmpswap 42:flat_atomic_add 43:flat_atomic_sub 44:flat_atomic_smin 45:flat_atomic_umin
    46:flat_atomic_smax 47:flat_atomic_umax 48:flat_atomic_and 49:flat_atomic_or 4a:flat_atomic_xor
    4b:flat_atomic_inc 4c:flat_atomic_dec 4d:flat_atomic_add_f32 4e:flat_atomic_pk_add_f16 4f:flat_atomic_add_f64
    50:flat_atomic_min_f64 51:flat_atomic_max_f64 52:flat_atomic_pk_add_bf16 60:flat_atomic_swap_x2
    61:flat_atomic_cmpswap_x2 62:flat_atomic_add_x2 63:flat_atomic_sub_x2 64:flat_atomic_smin_x2
    65:flat_atomic_umin_x2 66:flat_atomic_smax_x2 67:flat_atomic_umax_x2 68:flat_atomic_and_x2 69:flat_atomic_or_x2
    6a:flat_atomic_xor_x2 6b:flat_atomic_inc_x2 6c:flat_atomic_dec_x2""",
  "GLOBAL": """
    10:global_load_ubyte 11:global_load_sbyte 12:global_load_ushort 13:global_load_sshort 14:global_load_dword
    15:global_load_dwordx2 16:global_load_dwordx3 17:global_load_dwordx4 18:global_store_byte
    19:global_store_byte_d16_hi 1a:global_store_short 1b:global_store_short_d16_hi 1c:global_store_dword
    1d:global_store_dwordx2 1e:global_store_dwordx3 1f:global_store_dwordx4 20:global_load_ubyte_d16
    21:global_load_ubyte_d16_hi 22:global_load_sbyte_d16 23:global_load_sbyte_d16_hi 24:global_load_short_d16
    25:global_load_short_d16_hi 26:global_load_lds_ubyte 27:global_load_lds_sbyte 28:global_load_lds_ushort
    29:global_load_lds_sshort 2a:global_load_lds_dword 40:global_atomic_swap 41:global_atomic_cmpswap
    42:global_atomic_add 43:global_atomic_sub 44:global_atomic_smin 45:global_atomic_umin 46:global_atomic_smax
    47:global_atomic_umax 48:global_atomic_and 49:global_atomic_or 4a:global_atomic_xor 4b:global_atomic_inc
    4c:global_atomic_dec 4d:global_atomic_add_f32 4e:global_atomic_pk_add_f16 4f:global_atomic_add_f64
    50:global_atomic_min_f64 51:global_atomic_max_f64 52:global_atomic_pk_add_bf16 60:global_atomic_swap_x2
    61:global_atomic_cmpswap_x2 62:global_atomic_add_x2 63:global_atomic_sub_x2 64:global_atomic_smin_x2
    65:global_atomic_umin_x2 66:global_atomic_smax_x2 67:global_atomic_umax_x2 68:global_atomic_and_x2
    69:global_atomic_or_x2 6a:global_atomic_xor_x2 6b:global_atomic_inc_x2 6c:global_atomic_dec_x2
    7d:global_load_lds_dwordx4 7e:global_load_lds_dwordx3""",
  "SCRATCH": """
    10:scratch_load_ubyte 11:scratch_load_sbyte 12:scratch_load_ushort 13:scratch_load_sshort 14:scratch_load_dword
    15:scratch_load_dwordx2 16:scratch_load_dwordx3 17:scratch_load_dwordx4 18:scratch_store_byte
    19:scratch_store_byte_d16_hi 1a:scratch_store_short 1b:scratch_store_short_d16_hi 1c:scratch_store_dword
    1d:scratch_store_dwordx2 1e:scratch_store_dwordx3 1f:scratch_store_dwordx4 20:scratch_load_ubyte_d16
    21:scratch_load_ubyte_d16_hi 22:scratch_load_sbyte_d16 23:scratch_load_sbyte_d16_hi 24:scratch_load_short_d16
    25:scratch_load_short_d16_hi 26:scratch_load_lds_ubyte 27:scratch_load_lds_sbyte 28:scratch_load_lds_ushort
    29:scratch_load_lds_sshort 2a:scratch_load_lds_dword""",
  "MUBUF": """
    0:buffer_load_format_x 1:buffer_load_format_xy 2:buffer_load_format_xyz 3:buffer_load_format_xyzw
    4:buffer_store_format_x 5:buffer_store_format_xy 6:buffer_store_format_xyz 7:buffer_store_format_xyzw
    8:buffer_load_format_d16_x 9:buffer_load_format_d16_xy a:buffer_load_format_d16_xyz
    b:buffer_load_format_d16_xyzw c:buffer_store_format_d16_x d:buffer_store_format_d16_xy
    e:buffer_store_format_d16_xyz f:buffer_store_format_d16_xyzw 10:buffer_load_ubyte 11:buffer_load_sbyte
    12:buffer_load_ushort 13:buffer_load_sshort 14:buffer_load_dword 15:buffer_load_dwordx2 16:buffer_load_dwordx3
    17:buffer_load_dwordx4 18:buffer_store_byte 19:buffer_store_byte_d16_hi 1a:buffer_store_short
    1b:buffer_store_short_d16_hi 1c:buffer_store_dword 1d:buffer_store_dwordx2 1e:buffer_store_dwordx3
    1f:buffer_store_dwordx4 20:buffer_load_ubyte_d16 21:buffer_load_ubyte_d16_hi 22:buffer_load_sbyte_d16
    23:buffer_load_sbyte_d16_hi 24:buffer_load_short_d16 25:buffer_load_short_d16_hi 26:buffer_load_format_d16_hi_x
    27:buffer_store_format_d16_hi_x 28:buffer_wbl2 29:buffer_inv 40:buffer_atomic_swap 41:buffer_atomic_cmpswap
    42:buffer_atomic_add 43:buffer_atomic_sub 44:buffer_atomic_smin 45:buffer_atomic_umin 46:buffer_atomic_smax
    47:buffer_atomic_umax 48:buffer_atomic_and 49:buffer_atomic_or 4a:buffer_atomic_xor 4b:buffer_atomic_inc
    4c:buffer_atomic_dec 4d:buffer_atomic_add_f32 4e:buffer_atomic_pk_add_f16 4f:buffer_atomic_add_f64
    50:buffer_atomic_min_f64 51:buffer_atomic_max_f64 52:buffer_atomic_pk_add_bf16 60:buffer_atomic_swap_x2
    61:buffer_atomic_cmpswap_x2 62:buffer_atomic_add_x2 63:buffer_atomic_sub_x2 64:buffer_atomic_smin_x2
    65:buffer_atomic_umin_x2 66:buffer_atomic_smax_x2 67:buffer_atomic_umax_x2 68:buffer_atomic_and_x2
    69:buffer_atomic_or_x2 6a:buffer_atomic_xor_x2 6b:buffer_atomic_inc_x2 6c:buffer_atomic_dec_x2""",
}

def _table(text: str) -> dict[int, str]:
  return {int(op, 16): name for op, name in (tok.split(":") for tok in text.split())}

_OPS = {enc: _table(text) for enc, text in _TABLES.items()}
# LLVM spells the accumulation-register moves with a type suffix (VOP3PInstructions.td V_ACCVGPR_READ_B32)
_OPS["VOP3P"].update({0x58: "v_accvgpr_read_b32", 0x59: "v_accvgpr_write_b32"})
_OPS["VOP3"].update({op: n for op, n in _OPS["VOPC"].items()})
_OPS["VOP3"].update({0x100 + op: n for op, n in _OPS["VOP2"].items() if op not in (0x17, 0x18, 0x24, 0x25)})
_OPS["VOP3"].update({0x140 + op: n for op, n in _OPS["VOP1"].items()})
_VOP3B = {"v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32", "v_addc_co_u32", "v_subb_co_u32", "v_subbrev_co_u32",
          "v_div_scale_f32", "v_div_scale_f64", "v_mad_u64_u32", "v_mad_i64_i32"}

# gfx9 mnemonic -> the RDNA3 mnemonic of the same behaviour (RDNA3 ISA guide names; memory ops renamed by width)
_RDNA3_NAME = {
  "v_add_u32": "v_add_nc_u32", "v_sub_u32": "v_sub_nc_u32", "v_subrev_u32": "v_subrev_nc_u32",
  "v_add_u16": "v_add_nc_u16", "v_sub_u16": "v_sub_nc_u16", "v_add_i32": "v_add_nc_i32", "v_sub_i32": "v_sub_nc_i32",
  "v_add_i16": "v_add_nc_i16", "v_sub_i16": "v_sub_nc_i16", "v_ffbh_u32": "v_clz_i32_u32", "v_ffbl_b32": "v_ctz_i32_b32",
  "v_ffbh_i32": "v_cls_i32", "v_cvt_pkrtz_f16_f32": "v_cvt_pk_rtz_f16_f32",
  "s_andn2_b32": "s_and_not1_b32", "s_andn2_b64": "s_and_not1_b64", "s_orn2_b32": "s_or_not1_b32",
  "s_orn2_b64": "s_or_not1_b64", "s_andn2_saveexec_b64": "s_and_not1_saveexec_b64",
  "s_orn2_saveexec_b64": "s_or_not1_saveexec_b64", "s_andn1_saveexec_b64": "s_and_not0_saveexec_b64",
  "s_orn1_saveexec_b64": "s_or_not0_saveexec_b64", "s_andn1_wrexec_b64": "s_and_not0_wrexec_b64",
  "s_andn2_wrexec_b64": "s_and_not1_wrexec_b64", "s_ff1_i32_b32": "s_ctz_i32_b32", "s_ff1_i32_b64": "s_ctz_i32_b64",
  "s_flbit_i32_b32": "s_clz_i32_u32", "s_flbit_i32_b64": "s_clz_i32_u64", "s_flbit_i32": "s_cls_i32",
  "s_flbit_i32_i64": "s_cls_i32_i64",
  "ds_write_b8": "ds_store_b8", "ds_write_b16": "ds_store_b16", "ds_write_b32": "ds_store_b32",
  "ds_write_b64": "ds_store_b64", "ds_write_b96": "ds_store_b96", "ds_write_b128": "ds_store_b128",
  "ds_write2_b32": "ds_store_2addr_b32", "ds_write2_b64": "ds_store_2addr_b64",
  "ds_write2st64_b32": "ds_store_2addr_stride64_b32", "ds_write2st64_b64": "ds_store_2addr_stride64_b64",
  "ds_write_b8_d16_hi": "ds_store_b8_d16_hi", "ds_write_b16_d16_hi": "ds_store_b16_d16_hi",
  "ds_read_b32": "ds_load_b32", "ds_read_b64": "ds_load_b64", "ds_read_b96": "ds_load_b96", "ds_read_b128": "ds_load_b128",
  "ds_read2_b32": "ds_load_2addr_b32", "ds_read2_b64": "ds_load_2addr_b64",
  "ds_read2st64_b32": "ds_load_2addr_stride64_b32", "ds_read2st64_b64": "ds_load_2addr_stride64_b64",
  "ds_read_u8": "ds_load_u8", "ds_read_i8": "ds_load_i8", "ds_read_u16": "ds_load_u16", "ds_read_i16": "ds_load_i16",
  "ds_read_u8_d16": "ds_load_u8_d16", "ds_read_u8_d16_hi": "ds_load_u8_d16_hi", "ds_read_i8_d16": "ds_load_i8_d16",
  "ds_read_i8_d16_hi": "ds_load_i8_d16_hi", "ds_read_u16_d16": "ds_load_u16_d16",
  "ds_read_u16_d16_hi": "ds_load_u16_d16_hi", "ds_read_addtid_b32": "ds_load_addtid_b32",
  "ds_write_addtid_b32": "ds_store_addtid_b32", "ds_wrxchg_rtn_b32": "ds_storexchg_rtn_b32",
  "ds_wrxchg_rtn_b64": "ds_storexchg_rtn_b64", "ds_wrxchg2_rtn_b32": "ds_storexchg_2addr_rtn_b32",
  "ds_wrxchg2_rtn_b64": "ds_storexchg_2addr_rtn_b64", "ds_wrxchg2st64_rtn_b32": "ds_storexchg_2addr_stride64_rtn_b32",
  "ds_wrxchg2st64_rtn_b64": "ds_storexchg_2addr_stride64_rtn_b64",
  "v_cvt_flr_i32_f32": "v_cvt_floor_i32_f32", "v_cvt_rpi_i32_f32": "v_cvt_nearest_i32_f32",
  "v_cvt_pknorm_i16_f32": "v_cvt_pk_norm_i16_f32", "v_cvt_pknorm_u16_f32": "v_cvt_pk_norm_u16_f32",
  "v_cvt_pknorm_i16_f16": "v_cvt_pk_norm_i16_f16", "v_cvt_pknorm_u16_f16": "v_cvt_pk_norm_u16_f16",
  "v_dot2c_f32_f16": "v_dot2acc_f32_f16", "v_addc_co_u32": "v_add_co_ci_u32", "v_subb_co_u32": "v_sub_co_ci_u32",
  "v_subbrev_co_u32": "v_subrev_co_ci_u32",
}
_WIDTH_NAME = {"dword": "b32", "dwordx2": "b64", "dwordx3": "b96", "dwordx4": "b128", "dwordx8": "b256",
               "dwordx16": "b512", "ubyte": "u8", "sbyte": "i8", "ushort": "u16", "sshort": "i16", "byte": "b8",
               "short": "b16", "ubyte_d16": "d16_u8", "ubyte_d16_hi": "d16_hi_u8", "sbyte_d16": "d16_i8",
               "sbyte_d16_hi": "d16_hi_i8", "short_d16": "d16_b16", "short_d16_hi": "d16_hi_b16",
               "byte_d16_hi": "d16_hi_b8"}
_ATOMIC_NAME = {"swap": "swap_b32", "cmpswap": "cmpswap_b32", "add": "add_u32", "sub": "sub_u32", "smin": "min_i32",
                "umin": "min_u32", "smax": "max_i32", "umax": "max_u32", "and": "and_b32", "or": "or_b32",
                "xor": "xor_b32", "inc": "inc_u32", "dec": "dec_u32"}

def _rdna3_name(name: str) -> str:
  if name in _RDNA3_NAME: return _RDNA3_NAME[name]
  if re.fullmatch(r"v_cmpx?_tru_\w+", name): return name.replace("_tru_", "_t_")
  m = re.fullmatch(r"(global|flat|scratch|buffer|s|s_buffer)_(load|store)_(\w+)", name)
  if m and m.group(3) in _WIDTH_NAME: return f"{m.group(1)}_{m.group(2)}_{_WIDTH_NAME[m.group(3)]}"
  m = re.fullmatch(r"(global|flat|buffer)_atomic_(\w+?)(_x2)?", name)
  if m and m.group(2) in _ATOMIC_NAME:
    base = _ATOMIC_NAME[m.group(2)]
    return f"{m.group(1)}_atomic_{base.replace('32', '64') if m.group(3) else base}"
  return name

# ---- operands: the 9-bit source / 8-bit scalar operand numbering of gfx9 (MI300 ISA guide, "SSRC0" table)
_SPECIAL = {102: "flat_scratch_lo", 103: "flat_scratch_hi", 104: "xnack_mask_lo", 105: "xnack_mask_hi",
            106: "vcc_lo", 107: "vcc_hi", 124: "m0", 126: "exec_lo", 127: "exec_hi", 235: "shared_base",
            236: "shared_limit", 237: "private_base", 238: "private_limit", 239: "pops_exiting_wave_id",
            251: "vccz", 252: "execz", 253: "scc", 254: "lds_direct"}
_PAIR_NAME = {102: "flat_scratch", 104: "xnack_mask", 106: "vcc", 126: "exec"}
_INV_2PI = 0.15915494309189535
_FLOATS = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0, 248: _INV_2PI}
_LITERAL = 255

def _operand(code: int, literal: int | None = None) -> Operand:
  if code < 102: return Operand("s", code)
  if 108 <= code < 124: return Operand("ttmp", code - 108)
  if code in _SPECIAL: return Operand(_SPECIAL[code])
  if 128 <= code <= 192: return Operand("int", value=code - 128)
  if 193 <= code <= 208: return Operand("int", value=192 - code)
  if code in _FLOATS: return Operand("float", value=_FLOATS[code])
  if code == _LITERAL: return Operand("literal", value=literal)
  if code >= 256: return Operand("v", code - 256)
  raise _BadOperand(code)

class _BadOperand(Exception):
  """An operand field holding a code gfx9 assigns to no register or constant; decode() names the instruction."""

def _reg_text(prefix: str, index: int, count: int) -> str:
  return f"{prefix}{index}" if count == 1 else f"{prefix}[{index}:{index + count - 1}]"

def _float_text(value: float, bits: int) -> str:
  if value == _INV_2PI: return "0.15915494309189532" if bits == 64 else "0.15915494"
  return repr(value)

# the bit patterns of the inline float constants per operand width: a literal with one of them prints as the float
_FLOAT_BITS = {16: {struct.unpack("<H", struct.pack("<e", v))[0]: v for v in _FLOATS.values()},
               32: {struct.unpack("<I", struct.pack("<f", v))[0]: v for v in _FLOATS.values()},
               64: {struct.unpack("<Q", struct.pack("<d", v))[0]: v for v in _FLOATS.values()}}

def _literal_text(value: int, bits: int, fp: bool) -> str:
  """A literal as LLVM prints it (AMDGPUInstPrinter::printImmediate16/32/64): small integers and the inline float
  patterns by value, anything else in hex; a 64-bit float operand's literal is the high half of the double."""
  width = 16 if bits == 16 and (value < 0x10000 or value >= 0xFFFF8000) else 32 if bits != 64 else 64
  imm = value & 0xFFFF if width == 16 else (value << 32 if fp else value) if width == 64 else value
  signed = imm - (1 << width) if imm >> (width - 1) & 1 else imm
  if -16 <= signed <= 64: return str(signed)
  if (fp or width != 16) and imm in _FLOAT_BITS[width]: return _float_text(_FLOAT_BITS[width][imm], width)
  return hex(imm if width == 16 else value)

def _op_text(op: Operand, count: int = 1, bits: int = 32, fp: bool = True) -> str:
  """LLVM's spelling of an operand spanning `count` registers; `bits` and `fp` (a float operand) pick the float and
  literal forms."""
  if op.kind in ("s", "v", "acc", "ttmp"): return _reg_text({"acc": "a"}.get(op.kind, op.kind), op.index, count)
  if op.kind == "int": return str(op.value)
  if op.kind == "float": return _float_text(op.value, bits)
  if op.kind == "literal": return _literal_text(op.value, bits, fp)
  code = next(c for c, n in _SPECIAL.items() if n == op.kind)
  if count == 2 and code in _PAIR_NAME: return _PAIR_NAME[code]
  return f"src_{op.kind}" if code >= 235 else op.kind

# ---- operand widths (in dwords) by mnemonic: the type suffixes say them; exceptions listed where a source differs
_DWORDS = {"b16": 1, "f16": 1, "i16": 1, "u16": 1, "bf16": 1, "b32": 1, "f32": 1, "i32": 1, "u32": 1, "b64": 2,
           "f64": 2, "i64": 2, "u64": 2}
_SRC_WIDTH_EXCEPTIONS = {  # name -> dwords of (dst, src0, src1, src2); LLVM VOP3Instructions.td / SOPInstructions.td
  "v_lshlrev_b64": (2, 1, 2), "v_lshrrev_b64": (2, 1, 2), "v_ashrrev_i64": (2, 1, 2), "v_ldexp_f64": (2, 2, 1),
  "v_trig_preop_f64": (2, 2, 1), "v_cmp_class_f64": (2, 2, 1), "v_cmpx_class_f64": (2, 2, 1),
  "v_mad_u64_u32": (2, 1, 1, 2), "v_mad_i64_i32": (2, 1, 1, 2), "v_lshl_add_u64": (2, 2, 1, 2),
  "v_cndmask_b32": (1, 1, 1, 2), "v_addc_co_u32": (1, 1, 1, 2), "v_subb_co_u32": (1, 1, 1, 2),
  "v_subbrev_co_u32": (1, 1, 1, 2),
  "s_lshl_b64": (2, 2, 1), "s_lshr_b64": (2, 2, 1), "s_ashr_i64": (2, 2, 1), "s_bfe_u64": (2, 2, 1),
  "s_bfe_i64": (2, 2, 1), "s_bfm_b64": (2, 1, 1),
  "s_bitset0_b64": (2, 1), "s_bitset1_b64": (2, 1), "s_bitcmp0_b64": (0, 2, 1), "s_bitcmp1_b64": (0, 2, 1),
  "s_bitreplicate_b64_b32": (2, 1), "s_quadmask_b64": (2, 2), "s_movrels_b64": (2, 2),
}

def _widths(name: str, nsrc: int) -> tuple[int, ...]:
  """dwords of (dst, src0, src1, ...) for a scalar or vector ALU instruction."""
  if name in _SRC_WIDTH_EXCEPTIONS:
    w = _SRC_WIDTH_EXCEPTIONS[name]
    return w + (w[-1],) * (nsrc + 1 - len(w))
  parts = name.split("_")
  types = [p for p in parts if p in _DWORDS]
  if name.startswith("v_cvt_") and len(types) >= 2: return (_DWORDS[types[0]],) + (_DWORDS[types[1]],) * nsrc
  if name.startswith(("v_cmp", "s_cmp")): return (2,) + (_DWORDS[types[-1]] if types else 1,) * nsrc
  if "saveexec" in name or "wrexec" in name: return (2,) * (nsrc + 1)
  w = _DWORDS[types[-1]] if types else 1
  if re.search(r"_(i32|u32|b32)_(b64|i64|u64|f64)$", name): return (1,) + (w,) * nsrc  # a count of a 64-bit value
  return (w,) * (nsrc + 1)

def _bits(name: str) -> int:
  types = [p for p in name.split("_") if p in _DWORDS]
  return int(re.sub(r"\D", "", types[-1])) if types else 32

# ---- one decoder per microcode format; each returns (gfx9 name, encoding, size, fields, text)
def _u32(code, at: int) -> int:
  if at + 4 > len(code): raise UnknownInstruction(f"instruction at offset {at:#x} runs past the end of the code")
  return struct.unpack_from("<I", code, at)[0]

class _Words:
  """The instruction's dwords and, once a source says 255, the literal dword that follows them."""
  def __init__(self, code, offset: int, count: int):
    self.code, self.offset, self.count = code, offset, count
    self.w = [_u32(code, offset + 4 * i) for i in range(count)]
    self.literal: int | None = None
  def src(self, code: int) -> Operand:
    if code == _LITERAL and self.count == 2: raise _BadOperand(code)  # gfx9 has no literal after a 64-bit encoding
    if code == _LITERAL and self.literal is None: self.literal = _u32(self.code, self.offset + 4 * self.count)
    return _operand(code, self.literal)
  @property
  def size(self) -> int: return 4 * self.count + (4 if self.literal is not None else 0)

def _opname(enc: str, op: int, at: int) -> str:
  name = _OPS[enc].get(op)
  if name is None: raise UnknownInstruction(f"{enc} opcode {op:#x} at offset {at:#x} is not a gfx942/gfx950 instruction")
  return name

def _join(name: str, *ops: str) -> str:
  return name + (" " + ", ".join(ops) if ops else "")

_NO_SDST = {"s_setpc_b64", "s_rfe_b64", "s_cbranch_join", "s_set_gpr_idx_idx"}
_NO_SSRC = {"s_getpc_b64"}

def _sop1(ws: _Words, at: int):
  w = ws.w[0]
  name = _opname("SOP1", (w >> 8) & 0xFF, at)
  sdst, ssrc0 = _operand((w >> 16) & 0x7F), ws.src(w & 0xFF)
  dw = _widths(name, 1)
  ops = ([] if name in _NO_SDST else [_op_text(sdst, dw[0])]) + ([] if name in _NO_SSRC else [_op_text(ssrc0, dw[1])])
  return name, "SOP1", {"sdst": sdst, "ssrc0": ssrc0}, _join(name, *ops)

def _sop2(ws: _Words, at: int):
  w = ws.w[0]
  name = _opname("SOP2", (w >> 23) & 0x7F, at)
  sdst, ssrc0, ssrc1 = _operand((w >> 16) & 0x7F), ws.src(w & 0xFF), ws.src((w >> 8) & 0xFF)
  dw = _widths(name, 2)
  return name, "SOP2", {"sdst": sdst, "ssrc0": ssrc0, "ssrc1": ssrc1}, \
    _join(name, _op_text(sdst, dw[0]), _op_text(ssrc0, dw[1]), _op_text(ssrc1, dw[2]))

def _sopc(ws: _Words, at: int):
  w = ws.w[0]
  name = _opname("SOPC", (w >> 16) & 0x7F, at)
  ssrc0, ssrc1 = ws.src(w & 0xFF), ws.src((w >> 8) & 0xFF)
  dw = _widths(name, 2)
  return name, "SOPC", {"ssrc0": ssrc0, "ssrc1": ssrc1}, _join(name, _op_text(ssrc0, dw[1]), _op_text(ssrc1, dw[2]))

# hwreg ids of gfx9 (llvm/lib/Target/AMDGPU/Utils/AMDGPUAsmUtils.cpp Hwreg::Opr)
_HWREG = {1: "HW_REG_MODE", 2: "HW_REG_STATUS", 3: "HW_REG_TRAPSTS", 4: "HW_REG_HW_ID", 5: "HW_REG_GPR_ALLOC",
          6: "HW_REG_LDS_ALLOC", 7: "HW_REG_IB_STS", 15: "HW_REG_SH_MEM_BASES", 20: "HW_REG_XCC_ID"}

def _hwreg_text(imm: int) -> str:
  reg, offset, width = imm & 0x3F, (imm >> 6) & 0x1F, ((imm >> 11) & 0x1F) + 1
  tail = "" if (offset, width) == (0, 32) else f", {offset}, {width}"
  return f"hwreg({_HWREG.get(reg, reg)}{tail})"

def _sopk(ws: _Words, at: int):
  w = ws.w[0]
  name = _opname("SOPK", (w >> 23) & 0x1F, at)
  sdst, simm16 = _operand((w >> 16) & 0x7F), w & 0xFFFF
  fields = {"sdst": sdst, "simm16": simm16}
  if name == "s_getreg_b32": return name, "SOPK", fields, _join(name, _op_text(sdst), _hwreg_text(simm16))
  if name == "s_setreg_b32": return name, "SOPK", fields, _join(name, _hwreg_text(simm16), _op_text(sdst))
  if name == "s_setreg_imm32_b32":
    fields["literal"] = ws.src(_LITERAL).value
    return name, "SOPK", fields, _join(name, _hwreg_text(simm16), hex(fields["literal"]))
  if name in ("s_call_b64", "s_cbranch_i_fork"):
    fields["target"] = at + 4 + 4 * (simm16 - (simm16 >> 15 << 16))
    return name, "SOPK", fields, _join(name, _op_text(sdst, 2), str(simm16))
  return name, "SOPK", fields, _join(name, _op_text(sdst), hex(simm16))

_SOPP_NO_OPERAND = {"s_barrier", "s_wakeup", "s_icache_inv", "s_ttracedata", "s_set_gpr_idx_off",
                    "s_endpgm_saved", "s_endpgm_ordered_ps_done"}

def _waitcnt(imm: int) -> dict[str, int]:
  """gfx9 s_waitcnt counters: vmcnt[3:0] | [15:14] << 4, expcnt[6:4], lgkmcnt[11:8] (MI300 ISA guide, S_WAITCNT)."""
  return {"vmcnt": (imm & 0xF) | ((imm >> 10) & 0x30), "expcnt": (imm >> 4) & 0x7, "lgkmcnt": (imm >> 8) & 0xF}

def _waitcnt_text(counts: dict[str, int]) -> str:
  full = {"vmcnt": 63, "expcnt": 7, "lgkmcnt": 15}
  shown = [k for k in full if counts[k] != full[k]] or list(full)
  return " ".join(f"{k}({counts[k]})" for k in shown)

# s_sendmsg messages and operations of gfx9 (llvm/lib/Target/AMDGPU/Utils/AMDGPUAsmUtils.cpp Msg/OpGsSymbolic/
# OpSysSymbolic; validity: AMDGPUBaseInfo.cpp SendMsg::isValidMsgOp/isValidMsgStream)
_MSG = {1: "MSG_INTERRUPT", 2: "MSG_GS", 3: "MSG_GS_DONE", 4: "MSG_SAVEWAVE", 5: "MSG_STALL_WAVE_GEN",
        6: "MSG_HALT_WAVES", 7: "MSG_ORDERED_PS_DONE", 8: "MSG_EARLY_PRIM_DEALLOC", 9: "MSG_GS_ALLOC_REQ",
        15: "MSG_SYSMSG"}
_GS_OPS = ("GS_OP_NOP", "GS_OP_CUT", "GS_OP_EMIT", "GS_OP_EMIT_CUT")
_SYS_OPS = {1: "SYSMSG_OP_ECC_ERR_INTERRUPT", 2: "SYSMSG_OP_REG_RD", 3: "SYSMSG_OP_HOST_TRAP_ACK",
            4: "SYSMSG_OP_TTRACE_PC"}

def _sendmsg_text(imm: int) -> str:
  """gfx9 message: id[3:0], operation[6:4], stream[9:8] (AMDGPUInstPrinter::printSendMsg)."""
  msg, op, stream = imm & 0xF, (imm >> 4) & 7, (imm >> 8) & 3
  gs = msg in (2, 3)
  if gs and op < 4 and (op or msg == 3) and (stream == 0 or op):
    return f"sendmsg({_MSG[msg]}, {_GS_OPS[op]}" + (f", {stream})" if op else ")")
  if msg == 15 and op in _SYS_OPS and stream == 0: return f"sendmsg(MSG_SYSMSG, {_SYS_OPS[op]})"
  if msg in _MSG and not gs and msg != 15 and op == 0 and stream == 0: return f"sendmsg({_MSG[msg]})"
  return f"sendmsg({msg}, {op}, {stream})" if imm == msg | op << 4 | stream << 8 else str(imm)

def _sopp(ws: _Words, at: int):
  w = ws.w[0]
  name = _opname("SOPP", (w >> 16) & 0x7F, at)
  simm16 = w & 0xFFFF
  fields = {"simm16": simm16}
  if name == "s_waitcnt":
    fields.update(_waitcnt(simm16))
    return name, "SOPP", fields, _join(name, _waitcnt_text(fields))
  if "branch" in name: fields["target"] = at + 4 + 4 * (simm16 - (simm16 >> 15 << 16))
  if name in _SOPP_NO_OPERAND or (name == "s_endpgm" and simm16 == 0): return name, "SOPP", fields, name
  if name in ("s_sendmsg", "s_sendmsghalt"): return name, "SOPP", fields, _join(name, _sendmsg_text(simm16))
  return name, "SOPP", fields, _join(name, str(simm16))

_SMEM_DWORDS = {"dword": 1, "dwordx2": 2, "dwordx4": 4, "dwordx8": 8, "dwordx16": 16}

def _smem(ws: _Words, at: int):
  w0, w1 = ws.w
  name = _opname("SMEM", (w0 >> 18) & 0xFF, at)
  imm, soe = (w0 >> 17) & 1, (w0 >> 14) & 1
  sdata, sbase = _operand((w0 >> 6) & 0x7F), _operand((w0 & 0x3F) << 1)
  offset = w1 & 0x1FFFFF
  offset = offset - (1 << 21) if imm and offset >> 20 else offset
  soffset = _operand(w1 >> 25) if soe else (_operand(offset & 0x7F) if not imm else Operand("null"))
  fields = {"sdata": sdata, "sbase": sbase, "offset": offset if imm else 0, "soffset": soffset,
            "glc": (w0 >> 16) & 1, "nv": (w0 >> 15) & 1, "imm": imm, "soe": soe}
  cpol = " glc" if fields["glc"] else ""
  if name in ("s_dcache_inv", "s_dcache_wb", "s_dcache_inv_vol", "s_dcache_wb_vol"): return name, "SMEM", fields, name
  if name in ("s_memtime", "s_memrealtime"): return name, "SMEM", fields, _join(name, _op_text(sdata, 2))
  m = re.search(r"_(dword\w*)$", name)
  count = _SMEM_DWORDS.get(m.group(1), 1) if m else (2 if name.endswith("_x2") else 1)
  if "cmpswap" in name: count *= 2
  base = _op_text(sbase, 4 if "buffer" in name else 2)
  if soe: off = _op_text(soffset) + (f" offset:{hex(offset)}" if imm else "")
  else: off = hex(offset & 0xFFFFFFFF) if imm else _op_text(soffset)
  return name, "SMEM", fields, _join(name, _op_text(sdata, count), base, off) + cpol

# ---- vector ALU
_VOP1_PLAIN = {"v_nop", "v_readfirstlane_b32", "v_swap_b32", "v_accvgpr_mov_b32", "v_clrexcp"}  # no _e32 form suffix
_VOP2_PLAIN = {"v_fmamk_f32", "v_fmaak_f32", "v_madmk_f16", "v_madak_f16", "v_pk_fmac_f16"}
_CARRY_OUT = {"v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32"}
_CARRY_IN = {"v_addc_co_u32", "v_subb_co_u32", "v_subbrev_co_u32"}
_ACCUMULATE = {"v_fmac_f32", "v_fmac_f64", "v_mac_f16", "v_pk_fmac_f16", "v_dot2c_f32_f16", "v_dot2c_f32_bf16",
               "v_dot2c_i32_i16", "v_dot4c_i32_i8", "v_dot8c_i32_i4"}

def _is_float_op(name: str) -> bool:
  """Whether LLVM gives the sources float input modifiers (neg/abs): the instruction's last type is a float."""
  types = [p for p in name.split("_") if p in _DWORDS]
  return bool(types) and types[-1].startswith(("f", "bf"))

def _vdst(code: int, acc: bool = False) -> Operand:
  return Operand("acc" if acc else "v", code)

def _vop1(ws: _Words, at: int):
  w = ws.w[0]
  if w & 0x1FF in (249, 250): return _sdwa_dpp(ws, at, "VOP1")
  name = _opname("VOP1", (w >> 9) & 0xFF, at)
  dw = _widths(name, 1)
  src0 = ws.src(w & 0x1FF)
  fields = {"vdst": _vdst((w >> 17) & 0xFF), "src0": src0}
  if name in ("v_nop", "v_clrexcp"): return name, "VOP1", fields, name
  if name == "v_readfirstlane_b32":
    fields["vdst"] = _operand((w >> 17) & 0xFF)
    return name, "VOP1", fields, _join(name, _op_text(fields["vdst"]), _op_text(src0))
  if name == "v_accvgpr_mov_b32":
    fields.update(vdst=Operand("acc", (w >> 17) & 0xFF), src0=Operand("acc", (w & 0x1FF) - 256))
  text = name if name in _VOP1_PLAIN else name + "_e32"
  return name, "VOP1", fields, _join(text, _op_text(fields["vdst"], dw[0]), _op_text(fields["src0"], dw[1], _bits(name), _is_float_op(name)))

def _vop2(ws: _Words, at: int):
  w = ws.w[0]
  if w & 0x1FF in (249, 250): return _sdwa_dpp(ws, at, "VOP2")
  name = _opname("VOP2", (w >> 25) & 0x3F, at)
  dw, bits = _widths(name, 2), _bits(name)
  vdst, src0, vsrc1 = _vdst((w >> 17) & 0xFF), ws.src(w & 0x1FF), Operand("v", (w >> 9) & 0xFF)
  fields = {"vdst": vdst, "src0": src0, "src1": vsrc1}
  d, s0, s1 = _op_text(vdst, dw[0]), _op_text(src0, dw[1], bits, _is_float_op(name)), _op_text(vsrc1, dw[2])
  if name in ("v_fmamk_f32", "v_madmk_f16", "v_fmaak_f32", "v_madak_f16"):
    k = ws.src(_LITERAL)
    kt = hex(k.value & 0xFFFF if bits == 16 else k.value)  # the K constant always prints in hex (printU32ImmOperand)
    if "mk" in name:
      fields.update(src1=k, src2=vsrc1)
      return name, "VOP2", fields, _join(name, d, s0, kt, s1)
    fields["src2"] = k
    return name, "VOP2", fields, _join(name, d, s0, s1, kt)
  _executor_operands(name, fields)
  text = name if name in _VOP2_PLAIN else name + "_e32"
  if name in _CARRY_OUT: return name, "VOP2", fields, _join(text, d, "vcc", s0, s1)
  if name in _CARRY_IN: return name, "VOP2", fields, _join(text, d, "vcc", s0, s1, "vcc")
  if name == "v_cndmask_b32": return name, "VOP2", fields, _join(text, d, s0, s1, "vcc")
  return name, "VOP2", fields, _join(text, d, s0, s1)

def _vopc(ws: _Words, at: int):
  w = ws.w[0]
  if w & 0x1FF in (249, 250): return _sdwa_dpp(ws, at, "VOPC")
  name = _opname("VOPC", (w >> 17) & 0xFF, at)
  dw = _widths(name, 2)
  src0, vsrc1 = ws.src(w & 0x1FF), Operand("v", (w >> 9) & 0xFF)
  return name, "VOPC", {"src0": src0, "src1": vsrc1, "sdst": Operand("vcc_lo")}, \
    _join(name + "_e32", "vcc", _op_text(src0, dw[1], _bits(name), _is_float_op(name)), _op_text(vsrc1, dw[2]))

def _mod_text(op: Operand, count: int, bits: int, neg: int, abs_: int, fp: bool = True) -> str:
  """A source with LLVM's float input modifiers: -x, |x|, and neg(...) around a constant."""
  text = _op_text(op, count, bits, fp)
  if abs_: text = f"|{text}|"
  if neg: text = f"neg({text})" if not abs_ and op.kind in ("int", "float", "literal") else f"-{text}"
  return text

def _executor_operands(name: str, fields: dict) -> None:
  """The operands a VOP2 form reads or writes implicitly, as rdna3.py lists them: VCC as carry-in (src2) and
  carry-out (sdst), the accumulator of mac/fmac/dot*c (src2 = vdst)."""
  if name in _CARRY_IN or name == "v_cndmask_b32": fields["src2"] = Operand("vcc_lo")
  if name in _CARRY_IN or name in _CARRY_OUT: fields["sdst"] = Operand("vcc_lo")
  if name in _ACCUMULATE: fields["src2"] = fields["vdst"]

def _vop3_sources(name: str, op: int) -> int:
  if op < 0x100: return 2
  if op < 0x140: return 3 if name == "v_cndmask_b32" or name in _CARRY_IN else 2
  if op < 0x1C0: return 1
  if op >= 0x280 and name not in ("v_minimum3_f32", "v_maximum3_f32"): return 2
  return 2 if name in ("v_cvt_pk_f16_f32", "v_cvt_pk_bf16_f32") else 3

_OMOD = {1: " mul:2", 2: " mul:4", 3: " div:2"}

def _vop3(ws: _Words, at: int):
  w0, w1 = ws.w
  op = (w0 >> 16) & 0x3FF
  name = _opname("VOP3", op, at)
  nsrc = _vop3_sources(name, op)
  srcs = [ws.src((w1 >> (9 * i)) & 0x1FF) for i in range(nsrc)]
  vop3b = name in _VOP3B
  fields = {"vdst": _vdst(w0 & 0xFF), "clamp": (w0 >> 15) & 1, "omod": (w1 >> 27) & 3, "neg": (w1 >> 29) & 7}
  fields.update({f"src{i}": s for i, s in enumerate(srcs)})
  if vop3b: fields["sdst"] = _operand((w0 >> 8) & 0x7F)
  else: fields.update(abs=(w0 >> 8) & 7, opsel=(w0 >> 11) & 0xF)
  dw, bits = _widths(name, nsrc), _bits(name)
  fmod = _is_float_op(name) and name not in _VOP3B | {"v_cndmask_b32"}
  # v_cndmask_b32's VOP3 form takes neg/abs on its two sources like a float op (LLVM selects -x into it), not omod
  neg, abs_ = (fields["neg"], fields.get("abs", 0)) if fmod or name == "v_cndmask_b32" else (0, 0)
  src_text = [_mod_text(s, dw[1 + i], bits, neg >> i & 1, abs_ >> i & 1, _is_float_op(name)) for i, s in enumerate(srcs)]
  text = name + "_e64" if op < 0x1C0 else name
  if name in _ACCUMULATE: fields["src2"] = fields["vdst"]
  if op < 0x100:  # a VOPC compare: the destination is a scalar register pair
    fields["sdst"] = _operand(w0 & 0xFF)
    dst = [_op_text(fields["sdst"], 2)]
  elif vop3b: dst = [_op_text(fields["vdst"], dw[0]), _op_text(fields["sdst"], 2)]
  elif name == "v_readlane_b32":
    fields["vdst"] = _operand(w0 & 0xFF)
    dst = [_op_text(fields["vdst"])]
  else: dst = [_op_text(fields["vdst"], dw[0])]
  if name == "v_cndmask_b32" or name in _CARRY_IN: src_text[2] = _op_text(srcs[2], 2)
  tail = (" clamp" if fields["clamp"] else "") + (_OMOD.get(fields["omod"], "") if fmod else "")
  if name.startswith("v_bitop3"):  # gfx950: the 8-bit truth table sits in omod:abs:neg (MI355X ISA guide, V_BITOP3_B32)
    fields["bitop3"] = fields["omod"] << 6 | fields["abs"] << 3 | fields["neg"]
    tail += f" bitop3:{fields['bitop3']:#x}" if fields["bitop3"] else ""
  opsel = fields.get("opsel", 0)
  if opsel: tail = " op_sel:[" + ",".join(str(opsel >> i & 1) for i in range(nsrc)) + f",{opsel >> 3 & 1}]" + tail
  return name, "VOP3SD" if vop3b else "VOP3", fields, _join(text, *dst, *src_text) + tail

# MFMA shapes: v_mfma_<out>_<M>x<N>x<K>[_<B>b]_<in> (MI300 ISA guide, "Dependent Matrix Operations" table)
_MFMA = re.compile(r"v_mfma_(f32|i32|f64)_(\d+)x(\d+)x(\d+)(?:_(\d+)b)?_(\w+)")
_IN_BYTES = {"f32": 4, "xf32": 4, "f16": 2, "bf16": 2, "i8": 1, "f64": 8, "fp8_fp8": 1, "fp8_bf8": 1, "bf8_fp8": 1,
             "bf8_bf8": 1}

def _mfma_regs(name: str) -> tuple[int, int]:
  """(dwords of the A/B sources, dwords of the C/D accumulators) per lane of a wave64."""
  out, m, n, k, blocks, kind = _MFMA.fullmatch(name).groups()
  blocks = int(blocks or 1)
  ab = max(1, int(m) * int(k) * blocks * _IN_BYTES.get(kind, 2) // 64 // 4)
  cd = int(m) * int(n) * blocks // 64 * (2 if out == "f64" else 1)
  return ab, cd

def _vop3p(ws: _Words, at: int):
  w0, w1 = ws.w
  name = _opname("VOP3P", (w0 >> 16) & 0x7F, at)
  if _MFMA.fullmatch(name): return _mfma(ws, name)
  if name in ("v_accvgpr_read_b32", "v_accvgpr_write_b32"):
    src = w1 & 0x1FF
    read = name == "v_accvgpr_read_b32"
    fields = {"vdst": Operand("v" if read else "acc", w0 & 0xFF), "src0": Operand("acc", src - 256) if read else ws.src(src)}
    return name, "VOP3P", fields, _join(name, _op_text(fields["vdst"]), _op_text(fields["src0"]))
  nsrc = 3 if re.search(r"fma|mad|dot|_mix|imum3", name) else 2  # v_pk_maximum3/minimum3 (gfx950) read three
  srcs = [ws.src((w1 >> (9 * i)) & 0x1FF) for i in range(nsrc)]
  opsel, opsel_hi = (w0 >> 11) & 7, ((w1 >> 27) & 3) | (((w0 >> 14) & 1) << 2)
  neg, neg_hi = (w1 >> 29) & 7, (w0 >> 8) & 7
  fields = {"vdst": _vdst(w0 & 0xFF), "clamp": (w0 >> 15) & 1, "opsel": opsel, "opsel_hi": opsel_hi, "neg": neg,
            "neg_hi": neg_hi, **{f"src{i}": s for i, s in enumerate(srcs)}}
  width = 2 if (name.startswith("v_pk") and name.endswith("_f32")) or name == "v_pk_mov_b32" else 1
  dst_width = 1 if name.startswith(("v_dot", "v_fma_mix")) else width
  text = _join(name, _op_text(fields["vdst"], dst_width), *(_op_text(s, width, 16 if width == 1 else 32) for s in srcs))
  for label, value, default in (("op_sel", opsel, 0), ("op_sel_hi", opsel_hi, (1 << nsrc) - 1),
                                ("neg_lo", neg, 0), ("neg_hi", neg_hi, 0)):
    mask = (1 << nsrc) - 1
    if (value & mask) != (default & mask):
      text += f" {label}:[" + ",".join(str(value >> i & 1) for i in range(nsrc)) + "]"
  return name, "VOP3P", fields, text + (" clamp" if fields["clamp"] else "")

def _mfma(ws: _Words, name: str):
  w0, w1 = ws.w
  ab, cd = _mfma_regs(name)
  acc_cd, acc = (w0 >> 15) & 1, (w1 >> 27) & 3
  def src(i: int) -> Operand:
    code = (w1 >> (9 * i)) & 0x1FF
    return Operand("acc", code - 256) if code >= 256 and acc >> i & 1 else ws.src(code)
  vdst = Operand("acc" if acc_cd else "v", w0 & 0xFF)
  c = (w1 >> 18) & 0x1FF
  src2 = Operand("acc" if acc_cd else "v", c - 256) if c >= 256 else ws.src(c)
  fields = {"vdst": vdst, "src0": src(0), "src1": src(1), "src2": src2, "cbsz": (w0 >> 8) & 7,
            "abid": (w0 >> 11) & 0xF, "acc_cd": acc_cd, "acc": acc, "blgp": (w1 >> 29) & 7}
  text = _join(name, _op_text(vdst, cd), _op_text(fields["src0"], ab), _op_text(fields["src1"], ab), _op_text(src2, cd))
  for key in ("cbsz", "abid", "blgp"):
    if fields[key]: text += f" {key}:{fields[key]}"
  return name, "VOP3P", fields, text

# ---- SDWA and DPP: src0 = 249 / 250 in a VOP1/VOP2/VOPC word; a second dword holds the real src0 and the selects
# (MI300 ISA guide, "VOP_SDWA" and "VOP_DPP" formats; printing: AMDGPUInstPrinter printSDWA* / printDPPCtrl)
_SEL = ("BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD")
_UNUSED = ("UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE")

def _base_fields(ws: _Words, at: int, enc: str) -> tuple[str, dict]:
  w = ws.w[0]
  if enc == "VOP1": return _opname("VOP1", (w >> 9) & 0xFF, at), {"vdst": _vdst((w >> 17) & 0xFF)}
  if enc == "VOP2": return _opname("VOP2", (w >> 25) & 0x3F, at), {"vdst": _vdst((w >> 17) & 0xFF), "src1": Operand("v", (w >> 9) & 0xFF)}
  return _opname("VOPC", (w >> 17) & 0xFF, at), {"src1": Operand("v", (w >> 9) & 0xFF)}

def _sel_text(value: int, what: str, at: int) -> str:
  if value >= len(_SEL): raise UnknownInstruction(f"SDWA {what} {value} at offset {at:#x}")
  return _SEL[value]

def _sdwa(ws: _Words, at: int, enc: str):
  ws.count = 2
  ws.w.append(_u32(ws.code, at + 4))
  name, fields = _base_fields(ws, at, enc)
  s = ws.w[1]
  fields.update(src0=_operand(s & 0xFF) if s >> 23 & 1 else Operand("v", s & 0xFF), modifier="SDWA",
                src0_sel=(s >> 16) & 7, src0_sext=(s >> 19) & 1, src0_neg=(s >> 20) & 1, src0_abs=(s >> 21) & 1,
                src1_sel=(s >> 24) & 7, src1_sext=(s >> 27) & 1, src1_neg=(s >> 28) & 1, src1_abs=(s >> 29) & 1)
  if enc == "VOPC":
    fields["sdst"] = _operand((s >> 8) & 0x7F) if s >> 15 & 1 else Operand("vcc_lo")
  else: fields.update(dst_sel=(s >> 8) & 7, dst_unused=(s >> 11) & 3, clamp=(s >> 13) & 1, omod=(s >> 14) & 3)
  if enc != "VOP1" and s >> 31 & 1: fields["src1"] = _operand((ws.w[0] >> 9) & 0xFF)  # S1: src1 is an SGPR
  fmod = _is_float_op(name)
  def src(i: int, op: Operand) -> str:
    text = _mod_text(op, 1, 32, fields[f"src{i}_neg"] if fmod else 0, fields[f"src{i}_abs"] if fmod else 0)
    return f"sext({text})" if fields[f"src{i}_sext"] else text
  srcs = [src(0, fields["src0"])] + ([src(1, fields["src1"])] if enc != "VOP1" else [])
  if enc == "VOP2": _executor_operands(name, fields)
  if enc == "VOPC":
    dst = "vcc" if not s >> 15 & 1 else _op_text(fields["sdst"], 2)
    tail = f" src0_sel:{_sel_text(fields['src0_sel'], 'src0_sel', at)} src1_sel:{_sel_text(fields['src1_sel'], 'src1_sel', at)}"
    return name, enc, fields, _join(name + "_sdwa", dst, *srcs) + tail
  ops = [_op_text(fields["vdst"])]
  if name in _CARRY_OUT or name in _CARRY_IN: ops.append("vcc")
  ops += srcs + (["vcc"] if name == "v_cndmask_b32" or name in _CARRY_IN else [])
  if fields["dst_unused"] >= len(_UNUSED): raise UnknownInstruction(f"SDWA dst_unused 3 at offset {at:#x}")
  tail = (" clamp" if fields["clamp"] else "") + (_OMOD.get(fields["omod"], "") if fmod else "") + \
    f" dst_sel:{_sel_text(fields['dst_sel'], 'dst_sel', at)} dst_unused:{_UNUSED[fields['dst_unused']]}" + \
    f" src0_sel:{_sel_text(fields['src0_sel'], 'src0_sel', at)}" + \
    (f" src1_sel:{_sel_text(fields['src1_sel'], 'src1_sel', at)}" if enc == "VOP2" else "")
  return name, enc, fields, _join(name + "_sdwa", *ops) + tail

_DPP_NAMED = {0x130: "wave_shl:1", 0x134: "wave_rol:1", 0x138: "wave_shr:1", 0x13C: "wave_ror:1", 0x140: "row_mirror",
              0x141: "row_half_mirror", 0x142: "row_bcast:15", 0x143: "row_bcast:31"}

def _dpp_ctrl_text(ctrl: int, at: int) -> str:
  if ctrl <= 0xFF: return "quad_perm:[" + ",".join(str(ctrl >> (2 * i) & 3) for i in range(4)) + "]"
  for base, label in ((0x100, "row_shl"), (0x110, "row_shr"), (0x120, "row_ror"), (0x150, "row_newbcast")):
    if base < ctrl <= base + 0xF or (label == "row_newbcast" and ctrl == base): return f"{label}:{ctrl & 0xF}"
  if ctrl in _DPP_NAMED: return _DPP_NAMED[ctrl]
  raise UnknownInstruction(f"DPP dpp_ctrl {ctrl:#x} at offset {at:#x}")

def _dpp(ws: _Words, at: int, enc: str):
  ws.count = 2
  ws.w.append(_u32(ws.code, at + 4))
  name, fields = _base_fields(ws, at, enc)
  d = ws.w[1]
  fields.update(src0=Operand("v", d & 0xFF), modifier="DPP", dpp_ctrl=(d >> 8) & 0x1FF, bound_ctrl=(d >> 19) & 1,
                src0_neg=(d >> 20) & 1, src0_abs=(d >> 21) & 1, src1_neg=(d >> 22) & 1, src1_abs=(d >> 23) & 1,
                bank_mask=(d >> 24) & 0xF, row_mask=(d >> 28) & 0xF)
  fmod = _is_float_op(name)
  srcs = [_mod_text(fields["src0"], 1, 32, fields["src0_neg"] * fmod, fields["src0_abs"] * fmod)]
  if enc != "VOP1": srcs.append(_mod_text(fields["src1"], 1, 32, fields["src1_neg"] * fmod, fields["src1_abs"] * fmod))
  if enc == "VOP2": _executor_operands(name, fields)
  if enc == "VOPC": fields["sdst"] = Operand("vcc_lo")
  if enc == "VOPC": ops = ["vcc"] + srcs
  else:
    ops = [_op_text(fields["vdst"])] + (["vcc"] if name in _CARRY_OUT or name in _CARRY_IN else []) + srcs
    ops += ["vcc"] if name == "v_cndmask_b32" or name in _CARRY_IN else []
  tail = f" {_dpp_ctrl_text(fields['dpp_ctrl'], at)} row_mask:{fields['row_mask']:#x} bank_mask:{fields['bank_mask']:#x}" + \
    (" bound_ctrl:1" if fields["bound_ctrl"] else "")
  return name, enc, fields, _join(name + "_dpp", *ops) + tail

def _sdwa_dpp(ws: _Words, at: int, enc: str):
  return (_sdwa if ws.w[0] & 0x1FF == 249 else _dpp)(ws, at, enc)

# ---- memory
_DATA_DWORDS = {"b32": 1, "b64": 2, "b96": 3, "b128": 4, "dword": 1, "dwordx2": 2, "dwordx3": 3, "dwordx4": 4}

def _data_dwords(name: str) -> int:
  """Dwords a memory instruction moves per lane: from its width suffix; 64-bit atomics (_x2, _u64, _f64) move 2."""
  for suffix, count in sorted(_DATA_DWORDS.items(), key=lambda kv: -len(kv[0])):
    if re.search(rf"_{suffix}(_|$)", name): return count
  return 2 if re.search(r"_(x2|u64|i64|b64|f64)$", name) else 1

def _ds(ws: _Words, at: int):
  w0, w1 = ws.w
  name = _opname("DS", (w0 >> 17) & 0xFF, at)
  acc = (w0 >> 25) & 1
  fields = {"offset0": w0 & 0xFF, "offset1": (w0 >> 8) & 0xFF, "gds": (w0 >> 16) & 1, "acc": acc,
            "addr": Operand("v", w1 & 0xFF), "data0": _vdst((w1 >> 8) & 0xFF, bool(acc)),
            "data1": _vdst((w1 >> 16) & 0xFF, bool(acc)), "vdst": _vdst(w1 >> 24, bool(acc))}
  n = _data_dwords(name)
  two = re.search(r"(read|write|xchg)2", name) is not None
  loads = name.startswith(("ds_read", "ds_permute", "ds_bpermute", "ds_swizzle", "ds_consume", "ds_append")) or "_rtn_" in name
  ops = []
  if loads: ops.append(_op_text(fields["vdst"], 2 * n if two else n))
  if name not in ("ds_consume", "ds_append", "ds_gws_sema_release_all", "ds_nop") and not name.startswith("ds_read_addtid"):
    ops.append(_op_text(fields["addr"]))
  if not name.startswith(("ds_read", "ds_swizzle")) and name not in ("ds_consume", "ds_append", "ds_nop"):
    ops.append(_op_text(fields["data0"], n))
    if two or "cmpst" in name or "mskor" in name:
      ops.append(_op_text(fields["data1"], n))
  if name == "ds_swizzle_b32": offs = _swizzle_text(fields["offset0"] | fields["offset1"] << 8)
  elif two:
    offs = (f" offset0:{fields['offset0']}" if fields["offset0"] else "") + (f" offset1:{fields['offset1']}" if fields["offset1"] else "")
  else:
    off = fields["offset0"] | fields["offset1"] << 8
    offs = f" offset:{off}" if off else ""
  return name, "DS", fields, _join(name, *ops) + offs + (" gds" if fields["gds"] else "")

def _swizzle_text(imm: int) -> str:
  """ds_swizzle_b32's pattern as LLVM names it (AMDGPUInstPrinter::printSwizzle; SIDefines.h Swizzle): bit 15 with
  bits 14:8 clear is a quad permute of four 2-bit lanes; bit 15 clear is and/or/xor masks of 5 bits each."""
  if imm == 0: return ""
  if imm & 0xFF00 == 0x8000: return " offset:swizzle(QUAD_PERM," + ",".join(str(imm >> (2 * i) & 3) for i in range(4)) + ")"
  if imm & 0x8000: return f" offset:{imm}"
  and_mask, or_mask, xor_mask = imm & 0x1F, (imm >> 5) & 0x1F, (imm >> 10) & 0x1F
  if and_mask == 0x1F and or_mask == 0 and bin(xor_mask).count("1") == 1: return f" offset:swizzle(SWAP,{xor_mask})"
  if and_mask == 0x1F and or_mask == 0 and xor_mask and (xor_mask + 1) & xor_mask == 0:
    return f" offset:swizzle(REVERSE,{xor_mask + 1})"
  group = 0x1F - and_mask + 1
  if group > 1 and group & (group - 1) == 0 and or_mask < group and xor_mask == 0:
    return f" offset:swizzle(BROADCAST,{group},{or_mask})"
  p0, p1 = or_mask ^ xor_mask, ((0x1F & and_mask) | or_mask) ^ xor_mask
  bits = "".join(("01"[p0 >> b & 1]) if (p0 >> b & 1) == (p1 >> b & 1) else "pi"[p0 >> b & 1] for b in range(4, -1, -1))
  return f' offset:swizzle(BITMASK_PERM,"{bits}")'

_SEGMENTS = {0: "FLAT", 1: "SCRATCH", 2: "GLOBAL"}

def _cpol_text(sc0: int, nt: int, sc1: int) -> str:
  """gfx940 cache policy bits in LLVM's order (AMDGPUInstPrinter::printCPol): sc0, nt, sc1."""
  return (" sc0" if sc0 else "") + (" nt" if nt else "") + (" sc1" if sc1 else "")

def _flat(ws: _Words, at: int):
  w0, w1 = ws.w
  seg = (w0 >> 14) & 3
  if seg not in _SEGMENTS: raise UnknownInstruction(f"FLAT segment 3 at offset {at:#x} (opcode {(w0 >> 18) & 0x7F:#x})")
  enc = _SEGMENTS[seg]
  name = _opname(enc, (w0 >> 18) & 0x7F, at)
  acc = (w1 >> 23) & 1
  raw_offset = w0 & 0x1FFF if seg else w0 & 0xFFF
  offset = raw_offset - (raw_offset >> 12 << 13) if seg else raw_offset
  saddr_code = (w1 >> 16) & 0x7F
  fields = {"offset": offset, "sc0": (w0 >> 16) & 1, "nt": (w0 >> 17) & 1, "sc1": (w0 >> 25) & 1, "sve": (w0 >> 13) & 1,
            "acc": acc, "addr": Operand("v", w1 & 0xFF), "data": _vdst((w1 >> 8) & 0xFF, bool(acc)),
            "vdst": _vdst(w1 >> 24, bool(acc)),
            "saddr": Operand("null") if saddr_code == 0x7F or seg == 0 else _operand(saddr_code)}
  fields.update(glc=fields["sc0"], slc=fields["nt"])  # the same bits under the names rdna3.py gives them
  n = _data_dwords(name)
  has_saddr = fields["saddr"].kind != "null"
  if seg == 1:
    addr = _op_text(fields["addr"]) if fields["sve"] else "off"
    addr_ops = [addr, _op_text(fields["saddr"]) if has_saddr else "off"]
  elif seg == 2:
    addr_ops = [_op_text(fields["addr"], 1 if has_saddr else 2), _op_text(fields["saddr"], 2) if has_saddr else "off"]
  else: addr_ops = [_op_text(fields["addr"], 2)]
  atomic, is_load = "_atomic_" in name, "_load_" in name
  ops = []
  if is_load and "_lds_" not in name or atomic and fields["sc0"]: ops.append(_op_text(fields["vdst"], n))
  ops.append(addr_ops[0])
  if not is_load: ops.append(_op_text(fields["data"], n * 2 if "cmpswap" in name else n))
  ops.extend(addr_ops[1:])
  tail = (f" offset:{offset}" if offset else "") + _cpol_text(fields["sc0"], fields["nt"], fields["sc1"])
  return name, enc, fields, _join(name, *ops) + tail

def _mubuf(ws: _Words, at: int):
  w0, w1 = ws.w
  name = _opname("MUBUF", (w0 >> 18) & 0x7F, at)
  acc = (w1 >> 23) & 1
  fields = {"offset": w0 & 0xFFF, "offen": (w0 >> 12) & 1, "idxen": (w0 >> 13) & 1, "sc0": (w0 >> 14) & 1,
            "sc1": (w0 >> 15) & 1, "lds": (w0 >> 16) & 1, "nt": (w0 >> 17) & 1, "acc": acc,
            "vaddr": Operand("v", w1 & 0xFF), "vdata": _vdst((w1 >> 8) & 0xFF, bool(acc)),
            "srsrc": _operand(((w1 >> 16) & 0x1F) << 2), "soffset": ws.src(w1 >> 24)}
  if name in ("buffer_wbl2", "buffer_inv"):
    return name, "MUBUF", fields, name + _cpol_text(fields["sc0"], fields["nt"], fields["sc1"])
  n = _data_dwords(name) * (2 if "cmpswap" in name else 1)
  naddr = fields["offen"] + fields["idxen"]
  vaddr = _op_text(fields["vaddr"], naddr) if naddr else "off"
  tail = (" idxen" if fields["idxen"] else "") + (" offen" if fields["offen"] else "") + \
    (f" offset:{fields['offset']}" if fields["offset"] else "") + _cpol_text(fields["sc0"], fields["nt"], fields["sc1"]) + \
    (" lds" if fields["lds"] else "")
  return name, "MUBUF", fields, _join(name, _op_text(fields["vdata"], n), vaddr, _op_text(fields["srsrc"], 4),
                                     _op_text(fields["soffset"])) + tail

# ---- format selection by the leading bits (MI300 ISA guide, "Microcode Formats": ENCODING fields)
def _format(w: int):
  """(decoder, dwords before any literal) of the word's microcode format, or None."""
  if w >> 23 == 0x17D: return _sop1, 1
  if w >> 23 == 0x17E: return _sopc, 1
  if w >> 23 == 0x17F: return _sopp, 1
  if w >> 28 == 0xB: return _sopk, 1
  if w >> 30 == 0b10: return _sop2, 1
  if w >> 23 == 0x1A7: return _vop3p, 2
  top6 = w >> 26
  if top6 == 0x30: return _smem, 2
  if top6 == 0x34: return _vop3, 2
  if top6 == 0x36: return _ds, 2
  if top6 == 0x37: return _flat, 2
  if top6 == 0x38: return _mubuf, 2
  if w >> 25 == 0x3F: return _vop1, 1
  if w >> 25 == 0x3E: return _vopc, 1
  if w >> 31 == 0: return _vop2, 1
  return None

def decode(code: bytes | memoryview, offset: int) -> Instruction:
  """The instruction at byte `offset` of `code`."""
  w = _u32(code, offset)
  fmt = _format(w)
  if fmt is None: raise UnknownInstruction(f"no gfx9 encoding matches word {w:#010x} at offset {offset:#x}")
  ws = _Words(code, offset, fmt[1])
  try: name, enc, fields, text = fmt[0](ws, offset)
  except _BadOperand as e:
    raise UnknownInstruction(f"operand code {e.args[0]} is no gfx9 source in {fmt[0].__name__[1:].upper()} word "
                             f"{w:#010x} at offset {offset:#x}") from None
  if ws.literal is not None: fields["literal"] = ws.literal
  return Instruction(_rdna3_name(name), enc, ws.size, fields, text)

def disassemble(code: bytes | memoryview) -> list[str]:
  """LLVM's text of every instruction in `code`, in order."""
  out, at = [], 0
  while at < len(code):
    inst = decode(code, at)
    out.append(inst.text)
    at += inst.size
  return out
