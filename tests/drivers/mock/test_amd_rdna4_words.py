"""The RDNA4 (gfx12) decoder and executor on hand-assembled words: each word is built here from the field layouts of
AMD's "RDNA4 Instruction Set Architecture" reference guide, chapter "Microcode Formats" (opcode numbers from its
opcode tables), must decode to the name, fields and LLVM text, and small programs run on the model against numpy
and exact math (SALU floats, IEEE minimum/maximum, pseudo-scalar transcendentals, 64-bit SALU, sub-dword SMEM, the
split barrier, workgroup ids in ttmp9/ttmp7, atomics returning through TH)."""
from __future__ import annotations
import struct
import numpy as np
import pytest
from drivers.mock.amd.shader.dispatch import Dispatch
from drivers.mock.amd.shader.execute import run
from drivers.mock.amd.shader.instruction import Operand, UnknownInstruction
from drivers.mock.amd.shader.memory_ops import ArrayMemory
from drivers.mock.amd.shader.rdna4 import decode, disassemble

def words(*ws: int) -> bytes: return struct.pack(f"<{len(ws)}I", *ws)
def V(n: int) -> int: return 256 + n                              # a VGPR as a 9-bit source
def I(n: int) -> int: return 128 + n if n >= 0 else 192 - n       # an inline integer constant
LIT, NULL, VCC, EXEC, M0 = 255, 124, 106, 126, 125
F1, F2 = 242, 244                                                 # inline 1.0 and 2.0

# ---- encoders, fields at the guide's bit positions
def sop1(op, sdst, s0): return [0x17D << 23 | sdst << 16 | op << 8 | s0]
def sop2(op, sdst, s0, s1): return [0b10 << 30 | op << 23 | sdst << 16 | s1 << 8 | s0]
def sopc(op, s0, s1): return [0x17E << 23 | op << 16 | s1 << 8 | s0]
def sopk(op, sdst, imm): return [0xB << 28 | op << 23 | sdst << 16 | imm & 0xFFFF]
def sopp(op, imm=0): return [0x17F << 23 | op << 16 | imm & 0xFFFF]
def smem(op, sdata, sbase, offset=0, soffset=NULL, th=0, scope=0):
  """SBASE[5:0] SDATA[12:6] OP[18:13] SCOPE[22:21] TH[24:23] ENCODING[31:26]=0x3D; IOFFSET[55:32] SOFFSET[63:57]."""
  return [0x3D << 26 | th << 23 | scope << 21 | op << 13 | sdata << 6 | sbase >> 1, soffset << 25 | offset & 0xFFFFFF]
def vop1(op, vdst, s0): return [0x3F << 25 | vdst << 17 | op << 9 | s0]
def vop2(op, vdst, s0, vsrc1): return [op << 25 | vdst << 17 | vsrc1 << 9 | s0]
def vopc(op, s0, vsrc1): return [0x3E << 25 | op << 17 | vsrc1 << 9 | s0]
def vop3(op, vdst, s0, s1=0, s2=0, neg=0, abs_=0, opsel=0, clamp=0, omod=0, sdst=None):
  mid = sdst << 8 if sdst is not None else opsel << 11 | abs_ << 8
  return [0x35 << 26 | op << 16 | clamp << 15 | mid | vdst, neg << 29 | omod << 27 | s2 << 18 | s1 << 9 | s0]
def vop3p(op, vdst, s0, s1, s2=0, opsel=0, opsel_hi=7, neg=0, neg_hi=0):
  return [0xCC << 24 | op << 16 | (opsel_hi >> 2) << 14 | opsel << 11 | neg_hi << 8 | vdst,
          neg << 29 | (opsel_hi & 3) << 27 | s2 << 18 | s1 << 9 | s0]
def vopd(opx, vdstx, srcx0, vsrcx1, opy, vdsty, srcy0, vsrcy1):
  return [0x32 << 26 | opx << 22 | opy << 17 | vsrcx1 << 9 | srcx0, vdstx << 24 | (vdsty >> 1) << 17 | vsrcy1 << 9 | srcy0]
def ds(op, vdst=0, addr=0, data0=0, data1=0, offset0=0, offset1=0):
  return [0x36 << 26 | op << 18 | offset1 << 8 | offset0, vdst << 24 | data1 << 16 | data0 << 8 | addr]
def vmem(seg, op, vdst=0, addr=0, data=0, saddr=NULL, offset=0, th=0, scope=0, sve=0):
  """ENCODING[31:24] 0xEC flat / 0xED scratch / 0xEE global, OP[21:14], SADDR[6:0]; VDST[39:32] SVE[49] SCOPE[51:50]
  TH[54:52] VSRC[62:55]; VADDR[71:64] IOFFSET[95:72]."""
  base = {"flat": 0xEC, "scratch": 0xED, "global": 0xEE}[seg]
  return [base << 24 | op << 14 | saddr, data << 23 | th << 20 | scope << 18 | sve << 17 | vdst, (offset & 0xFFFFFF) << 8 | addr]

# opcode numbers (RDNA4 ISA guide opcode tables)
S_MOV_B32, S_GETPC_B64, S_BARRIER_SIGNAL = 0, 71, 78
S_ADD_CO_I32, S_ADD_F32, S_SUB_F32, S_MIN_NUM_F32, S_MAX_NUM_F32, S_FMAAK_F32, S_FMAMK_F32, S_FMAC_F32 = 2, 64, 65, 66, 67, 69, 70, 71
S_MAXIMUM_F32, S_ADD_NC_U64, S_MUL_U64 = 80, 83, 85
S_CMP_LT_F32, S_CMP_U_F32, S_CMP_NGE_F32 = 65, 72, 73
S_MOVK_I32, S_ADDK_CO_I32 = 0, 15
S_WAIT_ALU, S_BARRIER_WAIT, S_BRANCH, S_ENDPGM, S_WAIT_LOADCNT, S_WAIT_DSCNT, S_WAIT_KMCNT = 8, 20, 32, 48, 64, 70, 71
S_LOAD_B32, S_LOAD_B64, S_LOAD_B128, S_LOAD_B96, S_LOAD_U8, S_LOAD_I16 = 0, 1, 2, 5, 9, 10
V_MOV_B32, V_CVT_F32_F16 = 1, 11
V_ADD_F64, V_ADD_F32, V_MIN_NUM_F32, V_MAX_NUM_F32, V_LSHLREV_B32, V_FMAC_F32 = 2, 3, 21, 22, 24, 43
V_CMP_GT_U32, V_CMPX_EQ_U32 = 76, 202
V3_ADD_CO_CI_U32, V3_MAX_NUM_F32, V3_MAX_NUM_F16, V3_FMA_F32, V3_MAXIMUM3_F32, V3_LSHL_ADD_U32 = 288, 278, 305, 531, 558, 582
V3_S_EXP_F32, V3_S_SQRT_F32, V3_MAD_CO_U64_U32, V3_ADD_CO_U32, V3_MINIMUM_F32, V3_MAXIMUM_F32 = 640, 648, 766, 768, 869, 870
VP_PK_ADD_F16, VP_PK_MAX_NUM_F16, VP_PK_MAXIMUM_F16 = 15, 28, 30
VD_MOV_B32, VD_MAX_NUM_F32 = 8, 10
DS_ADD_U32, DS_STORE_B32, DS_ADD_RTN_U32, DS_LOAD_B32 = 0, 13, 32, 54
G_LOAD_U16, G_LOAD_B32, G_STORE_B32, G_STORE_B64, G_INV, G_ATOMIC_ADD_U32 = 18, 20, 26, 27, 43, 53

@pytest.mark.parametrize("ws, name, text", [
  (sop1(S_MOV_B32, 0, I(0)), "s_mov_b32", "s_mov_b32 s0, 0"),
  (sop1(S_MOV_B32, 3, 108 + 9), "s_mov_b32", "s_mov_b32 s3, ttmp9"),
  (sop1(S_GETPC_B64, 4, 0), "s_getpc_b64", "s_getpc_b64 s[4:5]"),
  (sop1(S_BARRIER_SIGNAL, 0, I(-1)), "s_barrier_signal", "s_barrier_signal -1"),
  (sop2(S_ADD_CO_I32, 0, 0, I(4)), "s_add_i32", "s_add_co_i32 s0, s0, 4"),
  (sop2(S_ADD_NC_U64, 0, 0, 2), "s_add_nc_u64", "s_add_nc_u64 s[0:1], s[0:1], s[2:3]"),
  (sop2(S_ADD_F32, 0, 0, 8), "s_add_f32", "s_add_f32 s0, s0, s8"),
  (sop2(S_MAX_NUM_F32, 1, F1, 2), "s_max_f32", "s_max_num_f32 s1, 1.0, s2"),
  (sop2(S_FMAAK_F32, 0, 1, 2) + [0x40490FDB], "s_fmaak_f32", "s_fmaak_f32 s0, s1, s2, 0x40490fdb"),
  (sop2(S_FMAMK_F32, 0, 1, 2) + [0x40490FDB], "s_fmamk_f32", "s_fmamk_f32 s0, s1, 0x40490fdb, s2"),
  (sopc(S_CMP_LT_F32, 0, 1), "s_cmp_lt_f32", "s_cmp_lt_f32 s0, s1"),
  (sopk(S_MOVK_I32, 2, 0x80), "s_movk_i32", "s_movk_i32 s2, 0x80"),
  (sopk(S_ADDK_CO_I32, 2, 0x10), "s_addk_i32", "s_addk_co_i32 s2, 0x10"),
  (sopp(S_WAIT_LOADCNT, 0), "s_wait_loadcnt", "s_wait_loadcnt 0x0"),
  (sopp(S_WAIT_KMCNT, 0), "s_wait_kmcnt", "s_wait_kmcnt 0x0"),
  (sopp(S_WAIT_DSCNT, 1), "s_wait_dscnt", "s_wait_dscnt 0x1"),
  (sopp(S_WAIT_ALU, 0xFFFD), "s_wait_alu", "s_wait_alu depctr_va_vcc(0)"),   # VA_VCC is bit 1
  (sopp(S_WAIT_ALU, 0xFFFE), "s_wait_alu", "s_wait_alu depctr_sa_sdst(0)"),  # SA_SDST is bit 0
  (sopp(S_BARRIER_WAIT, 0xFFFF), "s_barrier_wait", "s_barrier_wait -1"),
  (sopp(S_BRANCH, 0xFFFE), "s_branch", "s_branch -2"),
  (sopp(S_ENDPGM), "s_endpgm", "s_endpgm"),
  (smem(S_LOAD_B128, 0, 4), "s_load_b128", "s_load_b128 s[0:3], s[4:5], 0x0"),
  (smem(S_LOAD_B96, 0, 4, 8), "s_load_b96", "s_load_b96 s[0:2], s[4:5], 0x8"),
  (smem(S_LOAD_B32, 7, 4, 0x10), "s_load_b32", "s_load_b32 s7, s[4:5], 0x10"),
  (smem(S_LOAD_B64, 8, 0, 0x10, soffset=2), "s_load_b64", "s_load_b64 s[8:9], s[0:1], s2 offset:0x10"),
  (smem(S_LOAD_U8, 1, 2, 3), "s_load_u8", "s_load_u8 s1, s[2:3], 0x3"),
  (smem(S_LOAD_B32, 7, 4, 0, scope=3), "s_load_b32", "s_load_b32 s7, s[4:5], 0x0 scope:SCOPE_SYS"),
  (vop1(V_MOV_B32, 2, 2), "v_mov_b32", "v_mov_b32_e32 v2, s2"),
  (vop1(V_CVT_F32_F16, 1, V(1)), "v_cvt_f32_f16", "v_cvt_f32_f16_e32 v1, v1"),   # gfx1201 prints fake16 operands
  (vop2(V_MAX_NUM_F32, 1, V(2), 1), "v_max_f32", "v_max_num_f32_e32 v1, v2, v1"),
  (vop2(V_ADD_F64, 0, V(2), 4), "v_add_f64", "v_add_f64_e32 v[0:1], v[2:3], v[4:5]"),
  (vop2(V_LSHLREV_B32, 1, I(2), 0), "v_lshlrev_b32", "v_lshlrev_b32_e32 v1, 2, v0"),
  (vop2(V_FMAC_F32, 5, V(6), 5), "v_fmac_f32", "v_fmac_f32_e32 v5, v6, v5"),
  (vopc(V_CMPX_EQ_U32, I(0), 0), "v_cmpx_eq_u32", "v_cmpx_eq_u32_e32 0, v0"),
  (vop3(V_CMP_GT_U32, 0, 2, V(0)), "v_cmp_gt_u32", "v_cmp_gt_u32_e64 s0, s2, v0"),
  (vop3(V3_ADD_CO_U32, 2, 0, V(0), sdst=VCC), "v_add_co_u32", "v_add_co_u32 v2, vcc_lo, s0, v0"),
  (vop3(V3_ADD_CO_CI_U32, 3, 1, V(1), VCC, sdst=NULL), "v_add_co_ci_u32", "v_add_co_ci_u32_e64 v3, null, s1, v1, vcc_lo"),
  (vop3(V3_MAD_CO_U64_U32, 0, V(0), 4, 0, sdst=NULL), "v_mad_u64_u32", "v_mad_co_u64_u32 v[0:1], null, v0, s4, s[0:1]"),
  (vop3(V3_LSHL_ADD_U32, 0, 108 + 9, I(8), V(0)), "v_lshl_add_u32", "v_lshl_add_u32 v0, ttmp9, 8, v0"),
  (vop3(V3_FMA_F32, 6, V(4), V(5), F1, neg=1), "v_fma_f32", "v_fma_f32 v6, -v4, v5, 1.0"),
  (vop3(V3_MAX_NUM_F32, 1, V(1), V(2), abs_=3), "v_max_f32", "v_max_num_f32_e64 v1, |v1|, |v2|"),
  (vop3(V3_MAX_NUM_F16, 1, V(1), V(2), opsel=0b1001), "v_max_f16", "v_max_num_f16_e64 v1, v1, v2 op_sel:[1,0,1]"),
  (vop3(V3_MINIMUM_F32, 1, V(1), V(2)), "v_minimum_f32", "v_minimum_f32 v1, v1, v2"),
  (vop3(V3_MAXIMUM3_F32, 1, V(1), V(2), V(3)), "v_maximum3_f32", "v_maximum3_f32 v1, v1, v2, v3"),
  (vop3(V3_S_EXP_F32, 0, 0), "v_s_exp_f32", "v_s_exp_f32 s0, s0"),
  (vop3(V3_S_SQRT_F32, 1, 2, abs_=1), "v_s_sqrt_f32", "v_s_sqrt_f32 s1, |s2|"),
  (vop3p(VP_PK_ADD_F16, 0, V(1), V(2)), "v_pk_add_f16", "v_pk_add_f16 v0, v1, v2"),
  (vop3p(VP_PK_MAX_NUM_F16, 0, V(1), V(2), opsel=1), "v_pk_max_f16", "v_pk_max_num_f16 v0, v1, v2 op_sel:[1,0]"),
  (vop3p(VP_PK_MAXIMUM_F16, 0, V(1), V(2)), "v_pk_maximum_f16", "v_pk_maximum_f16 v0, v1, v2"),
  (vopd(VD_MOV_B32, 4, I(0), 0, VD_MOV_B32, 1, 1, 0), "v_dual", "v_dual_mov_b32 v4, 0 :: v_dual_mov_b32 v1, s1"),
  (vopd(VD_MAX_NUM_F32, 2, V(3), 4, VD_MOV_B32, 5, 1, 0), "v_dual", "v_dual_max_num_f32 v2, v3, v4 :: v_dual_mov_b32 v5, s1"),
  (ds(DS_STORE_B32, addr=1, data0=2), "ds_store_b32", "ds_store_b32 v1, v2"),
  (ds(DS_LOAD_B32, vdst=3, addr=1, offset0=4), "ds_load_b32", "ds_load_b32 v3, v1 offset:4"),
  (ds(DS_ADD_RTN_U32, vdst=3, addr=1, data0=2), "ds_add_rtn_u32", "ds_add_rtn_u32 v3, v1, v2"),
  (vmem("global", G_LOAD_B32, vdst=2, addr=2), "global_load_b32", "global_load_b32 v2, v[2:3], off"),
  (vmem("global", G_LOAD_B32, vdst=1, addr=2, saddr=0), "global_load_b32", "global_load_b32 v1, v2, s[0:1]"),
  (vmem("global", G_LOAD_B32, vdst=3, addr=4, saddr=2, scope=3), "global_load_b32", "global_load_b32 v3, v4, s[2:3] scope:SCOPE_SYS"),
  (vmem("global", G_LOAD_U16, vdst=0, addr=0, offset=-8), "global_load_u16", "global_load_u16 v0, v[0:1], off offset:-8"),
  (vmem("global", G_STORE_B32, addr=0, data=1, saddr=0, offset=0x7FFFFF), "global_store_b32", "global_store_b32 v0, v1, s[0:1] offset:8388607"),
  (vmem("global", G_STORE_B64, addr=0, data=2, scope=2), "global_store_b64", "global_store_b64 v[0:1], v[2:3], off scope:SCOPE_DEV"),
  (vmem("global", G_ATOMIC_ADD_U32, vdst=4, addr=0, data=1, saddr=0, th=1, scope=2), "global_atomic_add_u32",
   "global_atomic_add_u32 v4, v0, v1, s[0:1] th:TH_ATOMIC_RETURN scope:SCOPE_DEV"),
  (vmem("global", G_ATOMIC_ADD_U32, addr=5, data=4, saddr=2, offset=16), "global_atomic_add_u32",
   "global_atomic_add_u32 v5, v4, s[2:3] offset:16"),
  (vmem("global", G_LOAD_B32, vdst=1, addr=2, saddr=0, th=1), "global_load_b32", "global_load_b32 v1, v2, s[0:1] th:TH_LOAD_NT"),
  (vmem("scratch", 20, vdst=1, saddr=2, scope=3), "scratch_load_b32", "scratch_load_b32 v1, off, s2 scope:SCOPE_SYS"),
  (vmem("scratch", 26, addr=3, data=1, saddr=NULL, sve=1, offset=4), "scratch_store_b32", "scratch_store_b32 v3, v1, off offset:4"),
  (vmem("flat", 20, vdst=1, addr=2), "flat_load_b32", "flat_load_b32 v1, v[2:3]"),
])
def test_word_decodes_to_name_and_llvm_text(ws, name, text):
  inst = decode(words(*ws), 0)
  assert (inst.name, inst.text, inst.size) == (name, text, 4 * len(ws))

def test_fields_follow_the_executor_conventions():
  f = decode(words(*smem(S_LOAD_B64, 8, 6, -4, soffset=3, th=2, scope=1)), 0).fields
  assert (f["sdata"], f["sbase"], f["offset"], f["soffset"], f["th"], f["scope"]) == (Operand("s", 8), Operand("s", 6), -4, Operand("s", 3), 2, 1)
  f = decode(words(*vmem("global", G_ATOMIC_ADD_U32, vdst=9, addr=7, data=8, saddr=4, offset=-3, th=1)), 0).fields
  assert (f["vdst"], f["addr"], f["data"], f["saddr"], f["offset"], f["glc"]) == (Operand("v", 9), Operand("v", 7), Operand("v", 8), Operand("s", 4), -3, 1)
  f = decode(words(*sop2(S_FMAAK_F32, 0, 1, 2), 0x3F800000), 0).fields
  assert f["literal"] == Operand("literal", value=0x3F800000)
  s_exp = decode(words(*vop3(V3_S_EXP_F32, 5, 6)), 0)
  assert (s_exp.fields["vdst"], s_exp.fields["src0"], "src1" in s_exp.fields) == (Operand("s", 5), Operand("s", 6), False)
  dual = decode(words(*vopd(VD_MAX_NUM_F32, 2, V(3), 4, VD_MOV_B32, 5, 1, 0)), 0)
  assert (dual.fields["x"].name, dual.fields["y"].name, dual.fields["y"].fields["vdst"]) == ("v_max_f32", "v_mov_b32", Operand("v", 5))

def test_wave64_prints_lane_mask_pairs():
  assert decode(words(*vop3(V3_ADD_CO_U32, 2, 0, V(0), sdst=VCC)), 0, wave64=True).text == "v_add_co_u32 v2, vcc, s0, v0"

@pytest.mark.parametrize("ws, message", [
  ([0xC4000000, 0, 0], "VBUFFER"), ([0xD3000000, 0, 0], "VIMAGE"), (sopp(0x7E), "SOPP opcode 126"),
  (smem(0x3F, 0, 0), "SMEM opcode 63"), (vmem("global", 0xFF), "GLOBAL opcode 255"), (sop2(90, 0, 0, 0), "SOP2 opcode 90"),
])
def test_unknown_encodings_name_the_problem(ws, message):
  with pytest.raises(UnknownInstruction, match=message): decode(words(*ws), 0)

def test_disassemble_walks_literals_and_three_dword_memory():
  code = words(*sop2(S_FMAAK_F32, 0, 1, 2), 0x3F800000, *vmem("global", G_LOAD_B32, vdst=1, addr=2, saddr=0), *sopp(S_ENDPGM),
               *sopp(31), 0)
  assert disassemble(code) == ["s_fmaak_f32 s0, s1, s2, 0x3f800000", "global_load_b32 v1, v2, s[0:1]", "s_endpgm"]

# ---- programs on the model: a frame loads v1, v2, v3 from three input blocks, stores the listed registers
def frame(block: int) -> list[int]:
  return (vop2(V_LSHLREV_B32, 0, I(2), 0) + vmem("global", G_LOAD_B32, 1, 0, saddr=2)
          + vmem("global", G_LOAD_B32, 2, 0, saddr=2, offset=block) + vmem("global", G_LOAD_B32, 3, 0, saddr=2, offset=2 * block))

def execute(body: list[int], stores: list[int], a=None, b=None, c=None, lanes=32, groups=(1, 1, 1), extra=b"", lds=0,
            rsrc1=0xF << 16 | 0xF) -> np.ndarray:
  """Run frame + body + one global_store_b32 per register of `stores` on gfx1201 (s[0:1] = output, s[2:3] = input:
  blocks a, b, c, then `extra` at +0x800); returns the stored blocks as uint32, lanes x stores."""
  block = 4 * lanes
  inp = np.zeros(0x1000, np.uint8)
  for k, x in enumerate((a, b, c)):
    if x is not None: inp[block * k:block * (k + 1)] = np.frombuffer(np.ascontiguousarray(x).tobytes().ljust(block, b"\0")[:block], np.uint8)
  inp[0x800:0x800 + len(extra)] = np.frombuffer(extra, np.uint8)
  prog = frame(block) + list(body)
  for k, r in enumerate(stores): prog += vmem("global", G_STORE_B32, addr=0, data=r, saddr=0, offset=block * k)
  code = np.array(prog + sopp(S_ENDPGM), np.uint32).view(np.uint8)
  mem = ArrayMemory(np.zeros(0x30000, np.uint8))
  mem.data[0x1000:0x1000 + code.size] = code
  mem.data[0x20000:0x20000 + inp.size] = inp
  run(Dispatch("gfx1201", 0x1000, rsrc1, 4 << 1 | 1 << 7, 0, (0x10000, 0, 0x20000, 0), groups, (lanes, 1, 1), True, lds), mem)
  return mem.data[0x10000:0x10000 + block * max(1, len(stores))].view(np.uint32).reshape(-1, lanes).T.copy()

def f32(x) -> np.ndarray: return np.asarray(x, np.float32)
def bits(x) -> np.ndarray: return f32(x).view(np.uint32)

def test_salu_float_arithmetic_is_per_wave_and_rounds_like_numpy():
  x, y = np.float32(1.1), np.float32(-3.3)
  extra = struct.pack("<2f", x, y)
  body = (smem(S_LOAD_B64, 8, 2, 0x800) + sopp(S_WAIT_KMCNT)
          + sop2(S_ADD_F32, 10, 8, 9) + sop2(S_SUB_F32, 11, 8, 9) + sop2(S_MIN_NUM_F32, 12, 8, 9)
          + sop2(S_MAX_NUM_F32, 13, 8, 9) + sop2(S_FMAAK_F32, 14, 8, 9) + [0x40490FDB]
          + sop1(S_MOV_B32, 15, F2) + sop2(S_FMAC_F32, 15, 8, 9)
          + sum((vop1(V_MOV_B32, 4 + k, 10 + k) for k in range(6)), []))
  out = execute(body, [4, 5, 6, 7, 8, 9], extra=extra)[0]
  pi = np.uint32(0x40490FDB).view(np.float32)
  want = [x + y, x - y, min(x, y), max(x, y), np.float32(np.float64(x) * np.float64(y) + np.float64(pi)), np.float32(np.float64(x) * np.float64(y) + 2.0)]
  np.testing.assert_array_equal(out, bits(want))

@pytest.mark.parametrize("op, x, y, taken", [(S_CMP_LT_F32, 1.0, 2.0, 1), (S_CMP_LT_F32, np.nan, 2.0, 0),
                                             (S_CMP_NGE_F32, np.nan, 2.0, 1), (S_CMP_NGE_F32, 3.0, 2.0, 0), (S_CMP_U_F32, 1.0, np.nan, 1)])
def test_salu_float_compares_set_scc_with_unordered_rules(op, x, y, taken):
  # SCC picks s4 = 7 or keeps 0: s_cmp; s_cselect-free form: s_mov 0, branch over a s_mov 7 when SCC is clear
  extra = struct.pack("<2f", x, y)
  body = (smem(S_LOAD_B64, 8, 2, 0x800) + sopp(S_WAIT_KMCNT) + sop1(S_MOV_B32, 4, I(0)) + sopc(op, 8, 9)
          + sopp(33, 1) + sop1(S_MOV_B32, 4, I(7)) + vop1(V_MOV_B32, 4, 4))  # s_cbranch_scc0 skips one dword
  assert execute(body, [4], extra=extra)[0, 0] == 7 * taken

def test_ieee_minimum_maximum_propagate_nan_and_order_signed_zeros():
  a = f32([1.0, np.nan, -0.0, 0.0, 3.0, -np.inf] + [0.0] * 26)
  b = f32([2.0, 1.0, 0.0, -0.0, np.nan, 5.0] + [0.0] * 26)
  out = execute(vop3(V3_MINIMUM_F32, 4, V(1), V(2)) + vop3(V3_MAXIMUM_F32, 5, V(1), V(2))
                + vop2(V_MAX_NUM_F32, 6, V(1), 2), [4, 5, 6], a, b)
  mn, mx, mxnum = (out[:6, k].view(np.float32) for k in range(3))
  np.testing.assert_array_equal(mn, f32([1.0, np.nan, -0.0, -0.0, np.nan, -np.inf]))
  np.testing.assert_array_equal(mx, f32([2.0, np.nan, 0.0, 0.0, np.nan, 5.0]))
  np.testing.assert_array_equal(mxnum, f32([2.0, 1.0, 0.0, 0.0, 3.0, 5.0]))   # max_num drops a quiet NaN operand
  assert list(np.signbit(mn[2:4])) == [True, True] and not np.signbit(mx[2:4]).any()

def test_pseudo_scalar_transcendentals_write_an_sgpr():
  extra = struct.pack("<f", 2.25)
  body = (smem(S_LOAD_B32, 8, 2, 0x800) + sopp(S_WAIT_KMCNT) + vop3(V3_S_SQRT_F32, 9, 8) + vop3(V3_S_EXP_F32, 10, 8)
          + vop3(V3_S_EXP_F32, 11, 8, neg=1) + vop1(V_MOV_B32, 4, 9) + vop1(V_MOV_B32, 5, 10) + vop1(V_MOV_B32, 6, 11))
  out = execute(body, [4, 5, 6], extra=extra)[0].view(np.float32)
  np.testing.assert_allclose(out, [1.5, 2 ** 2.25, 2 ** -2.25], rtol=1e-6)

def test_64bit_salu_and_sub_dword_scalar_loads():
  extra = struct.pack("<QQbxh", 0xFFFFFFFF_00000005, 0x00000001_00000003, -2, -300)
  body = (smem(S_LOAD_B128, 8, 2, 0x800) + smem(S_LOAD_U8, 12, 2, 0x810) + smem(S_LOAD_I16, 13, 2, 0x812) + sopp(S_WAIT_KMCNT)
          + sop2(S_ADD_NC_U64, 14, 8, 10) + sop2(S_MUL_U64, 16, 8, 10)
          + sum((vop1(V_MOV_B32, 4 + k, 12 + k) for k in range(6)), []))
  u8, i16, add_lo, add_hi, mul_lo, mul_hi = (int(v) for v in execute(body, [4, 5, 6, 7, 8, 9], extra=extra)[0])
  a, b = 0xFFFFFFFF_00000005, 0x00000001_00000003
  assert (u8, i16) == (0xFE, (-300) & 0xFFFFFFFF)
  assert add_lo | add_hi << 32 == (a + b) % 2 ** 64 and mul_lo | mul_hi << 32 == (a * b) % 2 ** 64

def test_workgroup_ids_arrive_in_ttmp9_and_ttmp7():
  """Each workgroup atomically adds X + 16*Y + 256*Z (from ttmp9 and ttmp7's halves) once per lane into word 0."""
  S_LSHR_B32, S_AND_B32, S_LSHL4_ADD_U32 = 10, 22, 17
  body = (sop2(S_LSHR_B32, 4, 108 + 7, I(16)) + sop2(S_AND_B32, 5, 108 + 7, LIT) + [0xFFFF]
          + sop2(S_LSHL4_ADD_U32, 6, 4, 5) + sop2(S_LSHL4_ADD_U32, 6, 6, 108 + 9)
          + vop1(V_MOV_B32, 5, 6) + vop1(V_MOV_B32, 6, I(0)) + vmem("global", G_ATOMIC_ADD_U32, addr=6, data=5, saddr=0, offset=0x400))
  groups = (3, 2, 2)
  prog = frame(128) + body
  code = np.array(prog + sopp(S_ENDPGM), np.uint32).view(np.uint8)
  mem = ArrayMemory(np.zeros(0x30000, np.uint8))
  mem.data[0x1000:0x1000 + code.size] = code
  run(Dispatch("gfx1201", 0x1000, 0xF << 16 | 0xF, 4 << 1 | 1 << 7, 0, (0x10000, 0, 0x20000, 0), groups, (32, 1, 1), True, 0), mem)
  total = int(mem.data[0x10400:0x10404].view(np.uint32)[0])
  assert total == 32 * sum(x + 16 * y + 256 * z for x in range(3) for y in range(2) for z in range(2))

def test_split_barrier_orders_lds_between_waves_and_atomics_return_by_th():
  """Two waves: each stores its lane id to LDS, signals and waits at the barrier, then reads the other wave's slot;
  a global atomic add with TH_ATOMIC_RETURN hands each lane the value before its add."""
  V_XOR_B32 = 29
  body = (vop2(V_LSHLREV_B32, 7, I(0), 0)                              # v7 = byte offset 4 * lane
          + ds(DS_STORE_B32, addr=0, data0=1) + sop1(S_BARRIER_SIGNAL, 0, I(-1)) + sopp(S_BARRIER_WAIT, 0xFFFF)
          + vop2(V_XOR_B32, 8, LIT, 0) + [128] + ds(DS_LOAD_B32, vdst=4, addr=8) + sopp(S_WAIT_DSCNT)
          + vop1(V_MOV_B32, 9, I(0)) + vop1(V_MOV_B32, 10, I(1))
          + vmem("global", G_ATOMIC_ADD_U32, vdst=5, addr=9, data=10, saddr=2, offset=0xC00, th=1) + sopp(S_WAIT_LOADCNT))
  lanes = 64
  a = np.arange(lanes, dtype=np.uint32) * 3 + 1
  out = execute(body, [4, 5], a, lanes=lanes, lds=256)
  np.testing.assert_array_equal(out[:, 0], np.concatenate([a[32:], a[:32]]))
  assert sorted(out[:, 1].tolist()) == list(range(lanes))          # every lane saw a distinct old value

def test_sixteen_bit_vop2_fields_are_true16_halves_printed_fake16():
  """Bit 7 of a 16-bit VOP1/VOP2 register field picks the high half (the hardware is true16); LLVM's gfx1201 printer
  is fake16 and shows the raw register number."""
  V_ADD_F16 = 50
  inst = decode(words(*vop2(V_ADD_F16, 128 + 4, V(128 + 1), 128 + 2)), 0)
  assert inst.text == "v_add_f16_e32 v132, v129, v130"
  assert (inst.fields["vdst"], inst.fields["src0"], inst.fields["src1"]) == (Operand("v", 4, hi=True), Operand("v", 1, hi=True), Operand("v", 2, hi=True))
  a = np.array([0x3C00_4000] * 32, np.uint32)                          # v1: lo 2.0, hi 1.0
  b = np.array([0x4400_3800] * 32, np.uint32)                          # v2: lo 0.5, hi 4.0
  out = execute(vop1(V_MOV_B32, 4, I(0)) + vop2(V_ADD_F16, 128 + 4, V(128 + 1), 128 + 2), [4], a, b)
  assert out[0, 0] == np.float16(5.0).view(np.uint16).astype(np.uint32) << 16
