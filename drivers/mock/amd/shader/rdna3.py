"""Decoder of RDNA3 (gfx11) machine code into Instructions (instruction.py), with the text LLVM prints for each.
Field layouts: AMD "RDNA3 Instruction Set Architecture" reference guide, chapter 15 "Microcode Formats" (also LLVM
llvm/lib/Target/AMDGPU/*Instructions.td, the gfx11 encoding classes). Opcode numbers: rdna3_opcodes.py.

Fields the executor reads: SOP*: sdst, ssrc0, ssrc1, simm16; SMEM: sdata, sbase, offset, soffset; VOP*: vdst, sdst,
src0..src2 (already in the order the operation uses them: fmamk/fmaak hold K in src1/src2, fmac holds vdst in src2,
VOP2 carry ops and cndmask hold vcc in src2), neg, abs, opsel, neg_hi, opsel_hi, clamp, omod; VOPD: x, y (two
Instructions named like their VOP2/VOP1 twins); DS: vdst, addr, data0, data1, offset0, offset1; FLAT/GLOBAL/SCRATCH:
vdst, addr, data, saddr, offset, glc, slc, dlc, sve."""
from __future__ import annotations
from drivers.mock.amd.shader import rdna3_opcodes as ops
from drivers.mock.amd.shader.instruction import Instruction, Operand, UnknownInstruction
from drivers.mock.amd.shader.operand_widths import MASK, data_regs, halves, widths

# 9-bit source operand codes 124..255 (RDNA3 ISA guide 15.1 "Scalar ALU and Vector ALU source operands")
_SPECIAL = {106: "vcc_lo", 107: "vcc_hi", 124: "null", 125: "m0", 126: "exec_lo", 127: "exec_hi",
            235: "src_shared_base", 236: "src_shared_limit", 237: "src_private_base", 238: "src_private_limit",
            251: "vccz", 252: "execz", 253: "scc", 254: "src_lds_direct"}
_FLOATS = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0, 248: 0.15915494}
LITERAL, DPP16, DPP8 = 255, 250, 233

# VOP3 ops with two sources (the rest of the VOP3-only ops take three): RDNA3 ISA guide 16.10 pseudocode per opcode
_VOP3_TWO_SOURCES = frozenset("""v_add_co_u32 v_add_f64 v_add_nc_i16 v_add_nc_i32 v_add_nc_u16 v_and_b16 v_ashrrev_i16
  v_ashrrev_i64 v_bcnt_u32_b32 v_bfm_b32 v_cvt_pk_i16_f32 v_cvt_pk_i16_i32 v_cvt_pk_norm_i16_f16 v_cvt_pk_norm_i16_f32
  v_cvt_pk_norm_u16_f16 v_cvt_pk_norm_u16_f32 v_cvt_pk_u16_f32 v_cvt_pk_u16_u32 v_ldexp_f32 v_ldexp_f64 v_lshlrev_b16
  v_lshlrev_b64 v_lshrrev_b16 v_lshrrev_b64 v_max_f64 v_max_i16 v_max_u16 v_mbcnt_hi_u32_b32 v_mbcnt_lo_u32_b32
  v_min_f64 v_min_i16 v_min_u16 v_mul_f64 v_mul_hi_i32 v_mul_hi_u32 v_mul_lo_u16 v_mul_lo_u32 v_or_b16 v_pack_b32_f16
  v_readlane_b32 v_sub_co_u32 v_sub_nc_i16 v_sub_nc_i32 v_sub_nc_u16 v_subrev_co_u32 v_trig_preop_f64 v_writelane_b32
  v_xor_b16 v_pk_add_f16 v_pk_add_i16 v_pk_add_u16 v_pk_ashrrev_i16 v_pk_lshlrev_b16 v_pk_lshrrev_b16 v_pk_max_f16
  v_pk_max_i16 v_pk_max_u16 v_pk_min_f16 v_pk_min_i16 v_pk_min_u16 v_pk_mul_f16 v_pk_mul_lo_u16 v_pk_sub_i16
  v_pk_sub_u16""".split())
_CARRY_IN = frozenset({"v_add_co_ci_u32", "v_sub_co_ci_u32", "v_subrev_co_ci_u32", "v_cndmask_b32", "v_cndmask_b16"})
_ACCUMULATE = frozenset({"v_fmac_f32", "v_fmac_f16", "v_fmac_dx9_zero_f32", "v_dot2acc_f32_f16", "v_pk_fmac_f16",
                         "v_dot2acc_f32_bf16"})
_SDST_VOP1 = frozenset({"v_readfirstlane_b32"})
_SDST_VOP3 = frozenset({"v_readfirstlane_b32", "v_readlane_b32"})
# s_delay_alu fields (RDNA3 ISA guide 4.5 "Instruction dependency"; LLVM AMDGPUAsmUtils.cpp DepCtr/DelayAlu names)
_DELAY_ID = ["NO_DEP", "VALU_DEP_1", "VALU_DEP_2", "VALU_DEP_3", "VALU_DEP_4", "TRANS32_DEP_1", "TRANS32_DEP_2",
             "TRANS32_DEP_3", "FMA_ACCUM_CYCLE_1", "SALU_CYCLE_1", "SALU_CYCLE_2", "SALU_CYCLE_3"]
_DELAY_SKIP = ["SAME", "NEXT", "SKIP_1", "SKIP_2", "SKIP_3", "SKIP_4"]
# s_waitcnt_depctr fields: (name, low bit, width) (LLVM AMDGPUAsmUtils.cpp DepCtrInfo, gfx11)
_DEPCTR = [("depctr_hold_cnt", 7, 1), ("depctr_sa_sdst", 0, 1), ("depctr_va_vdst", 12, 4), ("depctr_va_sdst", 9, 3),
           ("depctr_va_ssrc", 8, 1), ("depctr_va_vcc", 1, 1), ("depctr_vm_vsrc", 2, 3)]
_MSG = {1: "MSG_INTERRUPT", 2: "MSG_GS", 3: "MSG_GS_DONE", 4: "MSG_SAVEWAVE", 5: "MSG_STALL_WAVE_GEN",
        6: "MSG_HALT_WAVES", 7: "MSG_ORDERED_PS_DONE", 9: "MSG_GS_ALLOC_REQ", 10: "MSG_GET_DOORBELL", 11: "MSG_GET_DDID",
        128: "MSG_RTN_GET_DOORBELL", 129: "MSG_RTN_GET_DDID", 130: "MSG_RTN_GET_TMA", 131: "MSG_RTN_GET_REALTIME",
        132: "MSG_RTN_SAVE_WAVE", 133: "MSG_RTN_GET_TBA"}
_MSG_DEALLOC_VGPRS = 3  # gfx11 s_sendmsg message 3 releases the wave's VGPRs (LLVM SIDefines.h ID_DEALLOC_VGPRS_GFX11Plus)

def _field(word: int, hi: int, lo: int) -> int: return (word >> lo) & ((1 << (hi - lo + 1)) - 1)
def _sext(value: int, bits: int) -> int: return value - (1 << bits) if value & (1 << (bits - 1)) else value

def source(code: int, literal: int | None = None) -> Operand:
  """The Operand a 9-bit (or 8-bit scalar) source code names."""
  if code <= 105: return Operand("s", code)
  if 108 <= code <= 123: return Operand("ttmp", code - 108)
  if code in _SPECIAL: return Operand(_SPECIAL[code])
  if code == 128: return Operand("int", value=0)
  if 129 <= code <= 192: return Operand("int", value=code - 128)
  if 193 <= code <= 208: return Operand("int", value=192 - code)
  if code in _FLOATS: return Operand("float", value=_FLOATS[code])
  if code == LITERAL: return Operand("literal", value=literal or 0)
  if code >= 256: return Operand("v", code - 256)
  return Operand(f"src{code}")

def operand_text(op: Operand, regs: int = 1, wave64: bool = False, half: bool = False) -> str:
  """An operand as LLVM prints it; regs is the register count (MASK for a lane mask); half: a true16 operand."""
  if regs == MASK: regs = 2 if wave64 else 1
  if half and op.kind == "v": return f"v{op.index}.{'h' if op.hi else 'l'}"
  if half and op.kind == "literal": return f"{op.value & 0xFFFF:#x}"  # a 16-bit operand uses the literal's low half
  if op.kind in ("s", "v", "ttmp"): return f"{op.kind}{op.index}" if regs == 1 else f"{op.kind}[{op.index}:{op.index + regs - 1}]"
  if op.kind in ("vcc_lo", "exec_lo") and regs == 2: return op.kind[:-3]
  if op.kind == "literal": return f"{op.value:#x}"
  if op.kind in ("int", "float"): return str(op.value)
  return op.kind

def _src_mod(text: str, neg: int, abs_: int, bit: int) -> str:
  if abs_ >> bit & 1: text = f"|{text}|"
  return f"-{text}" if neg >> bit & 1 else text

def _u32(code: bytes | memoryview, at: int) -> int:
  if at + 4 > len(code): raise UnknownInstruction(f"instruction at offset {at:#x} runs past the end of the code")
  return int.from_bytes(code[at:at + 4], "little")

class _Words:
  """The instruction's dwords and its literal, read on demand (the literal follows the fixed part)."""
  def __init__(self, code, offset: int, count: int):
    self.code, self.offset, self.count = code, offset, count
    self.words = [_u32(code, offset + 4 * i) for i in range(count)]
    self.literal: int | None = None
  def lit(self) -> int:
    if self.literal is None: self.literal = _u32(self.code, self.offset + 4 * self.count)
    return self.literal
  def src(self, code: int) -> Operand: return source(code, self.lit() if code == LITERAL else None)
  @property
  def size(self) -> int: return 4 * (self.count + (self.literal is not None))

def _lookup(table: dict, opcode: int, encoding: str, offset: int) -> str:
  if opcode not in table: raise UnknownInstruction(f"unknown {encoding} opcode {opcode} at offset {offset:#x}")
  return table[opcode]

def _scalar(enc: str, w: _Words, offset: int) -> Instruction:
  d = w.words[0]
  if enc == "SOP1":
    name = _lookup(ops.SOP1, _field(d, 15, 8), enc, offset)
    f = {"sdst": source(_field(d, 22, 16)), "ssrc0": w.src(_field(d, 7, 0))}
    wd = widths(name)
    parts = ([] if name in ("s_setpc_b64", "s_rfe_b64") else [operand_text(f["sdst"], wd[0])]) + \
            ([] if name in ("s_getpc_b64",) else [operand_text(f["ssrc0"], wd[1])])
  elif enc == "SOP2":
    name = _lookup(ops.SOP2, _field(d, 29, 23), enc, offset)
    f = {"sdst": source(_field(d, 22, 16)), "ssrc0": w.src(_field(d, 7, 0)), "ssrc1": w.src(_field(d, 15, 8))}
    wd = widths(name)
    parts = [operand_text(f["sdst"], wd[0]), operand_text(f["ssrc0"], wd[1]), operand_text(f["ssrc1"], wd[2])]
  elif enc == "SOPC":
    name = _lookup(ops.SOPC, _field(d, 22, 16), enc, offset)
    f = {"ssrc0": w.src(_field(d, 7, 0)), "ssrc1": w.src(_field(d, 15, 8))}
    wd = widths(name)
    parts = [operand_text(f["ssrc0"], wd[1]), operand_text(f["ssrc1"], wd[2])]
  else:
    name = _lookup(ops.SOPK, _field(d, 27, 23), enc, offset)
    f = {"sdst": source(_field(d, 22, 16)), "simm16": _field(d, 15, 0)}
    if name == "s_setreg_imm32_b32": f["literal"] = w.lit()
    parts = _sopk_text(name, f)
  return Instruction(name, enc, w.size, f, f"{name} {', '.join(parts)}".rstrip())

def _hwreg(simm: int) -> str:
  reg, off, size = simm & 0x3F, (simm >> 6) & 0x1F, ((simm >> 11) & 0x1F) + 1
  names = {1: "HW_REG_MODE", 2: "HW_REG_STATUS", 3: "HW_REG_TRAPSTS", 4: "HW_REG_HW_ID", 5: "HW_REG_GPR_ALLOC",
           6: "HW_REG_LDS_ALLOC", 7: "HW_REG_IB_STS", 23: "HW_REG_HW_ID1", 24: "HW_REG_HW_ID2", 29: "HW_REG_SHADER_CYCLES"}
  name = names.get(reg, str(reg))
  return f"hwreg({name})" if (off, size) == (0, 32) else f"hwreg({name}, {off}, {size})"

def _sopk_text(name: str, f: dict) -> list[str]:
  simm = f["simm16"]
  if name in ("s_getreg_b32",): return [operand_text(f["sdst"]), _hwreg(simm)]
  if name == "s_setreg_b32": return [_hwreg(simm), operand_text(f["sdst"])]
  if name == "s_setreg_imm32_b32": return [_hwreg(simm), f"{f['literal']:#x}"]
  if name.startswith("s_waitcnt_"): return [operand_text(f["sdst"]), f"{simm:#x}"]
  if name == "s_version": return [f"{simm:#x}"]
  return [operand_text(f["sdst"]), f"{simm:#x}"]

def _sopp(w: _Words, offset: int) -> Instruction:
  d = w.words[0]
  name, simm = _lookup(ops.SOPP, _field(d, 22, 16), "SOPP", offset), _field(d, 15, 0)
  return Instruction(name, "SOPP", 4, {"simm16": simm}, f"{name} {_sopp_operand(name, simm)}".rstrip())

def _sopp_operand(name: str, simm: int) -> str:
  if name in ("s_endpgm", "s_barrier", "s_code_end", "s_wakeup", "s_icache_inv", "s_endpgm_saved",
              "s_endpgm_ordered_ps_done", "s_ttracedata", "s_wait_idle") and simm == 0: return ""
  if name == "s_waitcnt":  # gfx11 layout: vmcnt[15:10], lgkmcnt[9:4], expcnt[2:0] (RDNA3 ISA guide, S_WAITCNT)
    counts = [("vmcnt", simm >> 10 & 0x3F, 0x3F), ("expcnt", simm & 7, 7), ("lgkmcnt", simm >> 4 & 0x3F, 0x3F)]
    shown = [f"{n}({v})" for n, v, full in counts if v != full]
    return " ".join(shown) if shown else "vmcnt(63) expcnt(7) lgkmcnt(63)"
  if name == "s_delay_alu":
    parts = [f"instid0({_DELAY_ID[simm & 0xF]})"] if simm & 0xF else []
    if simm >> 4 & 7: parts.append(f"instskip({_DELAY_SKIP[simm >> 4 & 7]})")
    if simm >> 7 & 0xF: parts.append(f"instid1({_DELAY_ID[simm >> 7 & 0xF]})")
    return " | ".join(parts) if parts else "0"
  if name == "s_waitcnt_depctr":
    shown = [f"{n}({simm >> lo & ((1 << bits) - 1)})" for n, lo, bits in _DEPCTR if simm >> lo & ((1 << bits) - 1) != (1 << bits) - 1]
    return " ".join(shown) if shown else f"{simm:#x}"
  if name in ("s_sendmsg", "s_sendmsghalt"):
    return "sendmsg(MSG_DEALLOC_VGPRS)" if simm == _MSG_DEALLOC_VGPRS else f"sendmsg({_MSG.get(simm & 0xFF, simm)})"
  if name.startswith(("s_branch", "s_cbranch")): return str(_sext(simm, 16))  # in dwords from the next instruction
  if name in ("s_nop", "s_sleep", "s_setprio"): return str(simm)
  return f"{simm:#x}"

def _smem(w: _Words, offset: int) -> Instruction:
  d0, d1 = w.words
  name = _lookup(ops.SMEM, _field(d0, 25, 18), "SMEM", offset)
  f = {"sdata": source(_field(d0, 12, 6)), "sbase": Operand("s", _field(d0, 5, 0) * 2), "glc": _field(d0, 14, 14),
       "dlc": _field(d0, 13, 13), "offset": _sext(_field(d1, 20, 0), 21), "soffset": source(_field(d1, 31, 25))}
  if name in ("s_gl1_inv", "s_dcache_inv"): return Instruction(name, "SMEM", 8, f, name)
  base = operand_text(f["sbase"], 4 if name.startswith("s_buffer") else 2)
  off = f"{f['offset']:#x}" if f["soffset"].kind == "null" else operand_text(f["soffset"]) + (f" offset:{f['offset']:#x}" if f["offset"] else "")
  mods = "".join(m for m, on in ((" glc", f["glc"]), (" dlc", f["dlc"])) if on)
  return Instruction(name, "SMEM", 8, f, f"{name} {operand_text(f['sdata'], data_regs(name))}, {base}, {off}{mods}")

def _half(op: Operand, half: bool) -> Operand:
  """A VOP1/VOP2/VOPC register field of a true16 operand: bit 7 picks the upper half of v[6:0]."""
  return Operand("v", op.index & 127, hi=bool(op.index & 128)) if half and op.kind == "v" else op

def _vop_text(name: str, suffix: str, dsts: list[str], srcs: list[Operand], wd: tuple, f: dict, wave64: bool) -> str:
  neg, abs_, h = f.get("neg", 0), f.get("abs", 0), halves(name)
  texts = [_src_mod(operand_text(s, wd[1 + i] if i < 3 else 1, wave64, h[1 + i] if i < 3 else False), neg, abs_, i)
           for i, s in enumerate(srcs)]
  text = f"{name}{suffix} {', '.join(dsts + texts)}"
  return text + _vop3_modifiers(name, f, len(srcs))

def _vop3_modifiers(name: str, f: dict, nsrc: int) -> str:
  out = ""
  if f.get("opsel") and "opsel_hi" not in f and not any(halves(name)):
    out += " op_sel:[" + ",".join(str(f["opsel"] >> i & 1) for i in (*range(nsrc), 3)) + "]"
  if "opsel_hi" in f:
    mix = name.startswith("v_fma_mix")
    if f["opsel"]: out += " op_sel:[" + ",".join(str(f["opsel"] >> i & 1) for i in range(nsrc)) + "]"
    if f["opsel_hi"] & ((1 << nsrc) - 1) != (0 if mix else (1 << nsrc) - 1):
      out += " op_sel_hi:[" + ",".join(str(f["opsel_hi"] >> i & 1) for i in range(nsrc)) + "]"
    if f["neg"] and not mix: out += " neg_lo:[" + ",".join(str(f["neg"] >> i & 1) for i in range(nsrc)) + "]"
    if f["neg_hi"]: out += " neg_hi:[" + ",".join(str(f["neg_hi"] >> i & 1) for i in range(nsrc)) + "]"
  if f.get("clamp"): out += " clamp"
  if f.get("omod"): out += {1: " mul:2", 2: " mul:4", 3: " div:2"}[f["omod"]]
  return out

def _vop1(w: _Words, offset: int, wave64: bool) -> Instruction:
  d = w.words[0]
  name = _lookup(ops.VOP1, _field(d, 16, 9), "VOP1", offset)
  _no_dpp(_field(d, 8, 0), "VOP1", offset)
  h = halves(name)
  vdst = Operand("s", _field(d, 24, 17)) if name in _SDST_VOP1 else _half(Operand("v", _field(d, 24, 17)), h[0])
  f = {"vdst": vdst, "src0": _half(w.src(_field(d, 8, 0)), h[1])}
  if name == "v_nop" or name == "v_pipeflush": return Instruction(name, "VOP1", w.size, f, f"{name}_e32")
  wd = widths(name)
  suffix = "" if name in _SDST_VOP1 else "_e32"  # v_readfirstlane_b32 has no VOP3 twin to tell apart
  text = _vop_text(name, suffix, [operand_text(vdst, wd[0], half=h[0])], [f["src0"]], wd, f, wave64)
  return Instruction(name, "VOP1", w.size, f, text)

def _no_dpp(code: int, enc: str, offset: int) -> None:
  if code in (DPP16, DPP8): raise UnknownInstruction(f"{enc} with a {'DPP16' if code == DPP16 else 'DPP8'} source at offset {offset:#x} is not modelled")

def _vop2(w: _Words, offset: int, wave64: bool) -> Instruction:
  d = w.words[0]
  name = _lookup(ops.VOP2, _field(d, 30, 25), "VOP2", offset)
  _no_dpp(_field(d, 8, 0), "VOP2", offset)
  h = halves(name)
  vdst, src0 = _half(Operand("v", _field(d, 24, 17)), h[0]), _half(w.src(_field(d, 8, 0)), h[1])
  vsrc1, vcc = _half(Operand("v", _field(d, 16, 9)), h[2]), Operand("vcc_lo")
  wd = widths(name)
  if name in ("v_fmamk_f32", "v_fmamk_f16"):
    f = {"vdst": vdst, "src0": src0, "src1": Operand("literal", value=w.lit()), "src2": vsrc1}
    return Instruction(name, "VOP2", w.size, f, _vop_text(name, "", [operand_text(vdst, half=h[0])], [src0, f["src1"], vsrc1], wd, f, wave64))
  if name in ("v_fmaak_f32", "v_fmaak_f16"):
    f = {"vdst": vdst, "src0": src0, "src1": vsrc1, "src2": Operand("literal", value=w.lit())}
    return Instruction(name, "VOP2", w.size, f, _vop_text(name, "", [operand_text(vdst, half=h[0])], [src0, vsrc1, f["src2"]], wd, f, wave64))
  f = {"vdst": vdst, "src0": src0, "src1": vsrc1}
  shown = [src0, vsrc1]
  dsts = [operand_text(vdst, wd[0], half=h[0])]
  if name in _CARRY_IN:
    f["src2"] = vcc
    shown.append(vcc)
    if name != "v_cndmask_b32": f["sdst"], dsts = vcc, dsts + [operand_text(vcc, MASK, wave64)]
  elif name in _ACCUMULATE: f["src2"] = vdst
  text = _vop_text(name, "_e32", dsts, shown, wd[:3] + (MASK,), f, wave64)
  return Instruction(name, "VOP2", w.size, f, text)

def _vopc(w: _Words, offset: int, wave64: bool) -> Instruction:
  d = w.words[0]
  name = _lookup(ops.VOPC, _field(d, 24, 17), "VOPC", offset)
  _no_dpp(_field(d, 8, 0), "VOPC", offset)
  h = halves(name)
  f = {"src0": _half(w.src(_field(d, 8, 0)), h[1]), "src1": _half(Operand("v", _field(d, 16, 9)), h[2])}
  f["sdst"] = Operand("exec_lo") if name.startswith("v_cmpx") else Operand("vcc_lo")
  dsts = [] if name.startswith("v_cmpx") else [operand_text(f["sdst"], MASK, wave64)]
  return Instruction(name, "VOPC", w.size, f, _vop_text(name, "_e32", dsts, [f["src0"], f["src1"]], widths(name), f, wave64))

def _vop3(w: _Words, offset: int, wave64: bool) -> Instruction:
  d0, d1 = w.words
  opcode = _field(d0, 25, 16)
  name = _lookup(ops.VOP3, opcode, "VOP3", offset)
  srcs = [w.src(_field(d1, 8, 0)), w.src(_field(d1, 17, 9)), w.src(_field(d1, 26, 18))]
  _no_dpp(_field(d1, 8, 0), "VOP3", offset)
  sd = opcode in (288, 289, 290) or 764 <= opcode <= 770  # VOP3SD: bits [14:8] are a scalar destination
  f = {"vdst": Operand("v", _field(d0, 7, 0)), "neg": _field(d1, 31, 29), "clamp": _field(d0, 15, 15),
       "omod": _field(d1, 28, 27), "abs": 0 if sd else _field(d0, 10, 8), "opsel": 0 if sd else _field(d0, 14, 11)}
  wd, h = widths(name), halves(name)
  nsrc = _vop3_sources(name, opcode)
  srcs = [Operand("v", s.index, hi=bool(f["opsel"] >> i & 1)) if h[1 + i] and s.kind == "v" else s for i, s in enumerate(srcs)]
  if h[0]: f["vdst"] = Operand("v", f["vdst"].index, hi=bool(f["opsel"] >> 3 & 1))
  suffix = "_e64" if opcode < 512 else ""
  if opcode < 256:  # compares write a lane mask to an SGPR (or EXEC for v_cmpx)
    f["sdst"] = Operand("exec_lo") if name.startswith("v_cmpx") else source(_field(d0, 7, 0))
    dsts = [] if name.startswith("v_cmpx") else [operand_text(f["sdst"], MASK, wave64)]
  elif sd:
    f["sdst"] = source(_field(d0, 14, 8))
    dsts = [operand_text(f["vdst"], wd[0]), operand_text(f["sdst"], MASK, wave64)]
  elif name in _SDST_VOP3:
    f["vdst"] = source(_field(d0, 7, 0))
    dsts = [operand_text(f["vdst"])]
  else: dsts = [operand_text(f["vdst"], wd[0], half=h[0])]
  shown = srcs[:nsrc]
  f.update({f"src{i}": s for i, s in enumerate(shown)})
  if name in _CARRY_IN and not sd: f["sdst"] = None
  if name in _ACCUMULATE: f["src2"] = f["vdst"]
  if name in ("v_nop", "v_pipeflush"): return Instruction(name, "VOP3", w.size, f, f"{name}_e64")
  wdm = wd[:3] + (MASK,) if name in _CARRY_IN else wd
  return Instruction(name, "VOP3SD" if sd else "VOP3", w.size, f, _vop_text(name, suffix, dsts, shown, wdm, f, wave64))

def _vop3_sources(name: str, opcode: int) -> int:
  if opcode < 256: return 2
  if opcode < 384: return 3 if name in _CARRY_IN else 2
  if opcode < 512: return 1
  return 2 if name in _VOP3_TWO_SOURCES else 3

def _vop3p(w: _Words, offset: int, wave64: bool) -> Instruction:
  d0, d1 = w.words
  name = _lookup(ops.VOP3P, _field(d0, 22, 16), "VOP3P", offset)
  nsrc = 2 if name in _VOP3_TWO_SOURCES else 3
  srcs = [w.src(_field(d1, 8, 0)), w.src(_field(d1, 17, 9)), w.src(_field(d1, 26, 18))][:nsrc]
  f = {"vdst": Operand("v", _field(d0, 7, 0)), "neg_hi": _field(d0, 10, 8), "opsel": _field(d0, 13, 11),
       "opsel_hi": _field(d1, 28, 27) | _field(d0, 14, 14) << 2, "clamp": _field(d0, 15, 15), "neg": _field(d1, 31, 29)}
  f.update({f"src{i}": s for i, s in enumerate(srcs)})
  if name.startswith("v_wmma"):  # A/B: 16 values of the input type per lane; C/D: 8 rows per lane in wave32, 4 in wave64
    ab, cd = {"f16": 8, "bf16": 8, "iu8": 4, "iu4": 2}[name.split("_")[-1]], 4 if wave64 else 8
    wd = (cd, ab, ab, cd)
  else: wd = (1, 1, 1, 1)
  mix = name.startswith("v_fma_mix")
  texts = []
  for i, s in enumerate(srcs):
    t = operand_text(s, wd[1 + i] if i < 3 else 1, wave64)
    if mix: t = _src_mod(t, f["neg"], f["neg_hi"], i)
    texts.append(t)
  fm = dict(f, neg_hi=0 if mix else f["neg_hi"])
  text = f"{name} {', '.join([operand_text(f['vdst'], wd[0])] + texts)}" + _vop3_modifiers(name, fm, nsrc)
  return Instruction(name, "VOP3P", w.size, f, text)

# VOPD: the Y opcode field indexes the same table with extra entries 16-18 (RDNA3 ISA guide 15.3.9 "VOPD")
def _vopd(w: _Words, offset: int, wave64: bool, table: dict = ops.VOPD, executed_name=lambda name: name) -> Instruction:
  """Both halves of a VOPD word pair; `table` and `executed_name` (the name the executor knows) let gfx12 reuse it."""
  d0, d1 = w.words
  opx, opy = _field(d0, 25, 22), _field(d0, 21, 17)
  namex, namey = _lookup(table, opx, "VOPD X", offset), _lookup(table, opy, "VOPD Y", offset)
  if opx >= 16: raise UnknownInstruction(f"VOPD X opcode {opx} ({namex}) is only valid in the Y slot, at offset {offset:#x}")
  vdstx = _field(d1, 31, 24)
  vdsty = (_field(d1, 23, 17) << 1) | ((vdstx & 1) ^ 1)
  x = _vopd_half(namex, vdstx, w.src(_field(d0, 8, 0)), _field(d0, 16, 9), w, wave64, executed_name)
  y = _vopd_half(namey, vdsty, w.src(_field(d1, 8, 0)), _field(d1, 16, 9), w, wave64, executed_name)
  return Instruction("v_dual", "VOPD", w.size, {"x": x, "y": y}, f"{x.text} :: {y.text}")

def _vopd_half(dual: str, vdst: int, src0: Operand, vsrc1: int, w: _Words, wave64: bool, executed_name) -> Instruction:
  name = dual.replace("v_dual_", "v_")
  f = {"vdst": Operand("v", vdst), "src0": src0, "src1": Operand("v", vsrc1)}
  shown = [src0, f["src1"]]
  if name == "v_mov_b32": del f["src1"]; shown = [src0]
  elif name == "v_fmamk_f32": f["src1"], f["src2"] = Operand("literal", value=w.lit()), Operand("v", vsrc1); shown = [src0, f["src1"], f["src2"]]
  elif name == "v_fmaak_f32": f["src2"] = Operand("literal", value=w.lit()); shown = [src0, f["src1"], f["src2"]]
  elif name == "v_cndmask_b32": f["src2"] = Operand("vcc_lo")  # VCC is implicit in VOPD and not printed
  elif name in _ACCUMULATE: f["src2"] = f["vdst"]
  text = f"{dual} {', '.join([operand_text(f['vdst'])] + [operand_text(s, 1, wave64) for s in shown])}"
  return Instruction(executed_name(name), "VOPD", 8, f, text)

def _ds(w: _Words, offset: int) -> Instruction:
  d0, d1 = w.words
  name = _lookup(ops.DS, _field(d0, 25, 18), "DS", offset)
  f = {"offset0": _field(d0, 7, 0), "offset1": _field(d0, 15, 8), "gds": _field(d0, 17, 17),
       "addr": Operand("v", _field(d1, 7, 0)), "data0": Operand("v", _field(d1, 15, 8)),
       "data1": Operand("v", _field(d1, 23, 16)), "vdst": Operand("v", _field(d1, 31, 24))}
  return Instruction(name, "DS", 8, f, _ds_text(name, f))

def _ds_text(name: str, f: dict) -> str:
  regs = data_regs(name)
  two = "2addr" in name
  loads = name.startswith("ds_load") or "_rtn" in name or name in ("ds_swizzle_b32", "ds_permute_b32", "ds_bpermute_b32")
  stores = name.startswith("ds_store") or not loads
  parts = []
  if loads: parts.append(operand_text(f["vdst"], regs * (2 if two else 1)))
  parts.append(operand_text(f["addr"]))
  ndata = 0 if name.startswith("ds_load") or name in ("ds_swizzle_b32", "ds_nop") else 2 if (two or "cmpstore" in name or "mskor" in name) else 1
  if stores or "_rtn" in name or name in ("ds_permute_b32", "ds_bpermute_b32"):
    parts += [operand_text(f[k], regs) for k in ("data0", "data1")[:ndata]]
  if two:
    mods = (f" offset0:{f['offset0']}" if f["offset0"] else "") + (f" offset1:{f['offset1']}" if f["offset1"] else "")
  else:
    off = f["offset0"] | f["offset1"] << 8
    mods = f" offset:{off}" if off else ""
  return f"{name} {', '.join(parts)}{mods}{' gds' if f['gds'] else ''}"

def _flat(w: _Words, offset: int) -> Instruction:
  d0, d1 = w.words
  seg = _field(d0, 17, 16)
  enc, table = {0: ("FLAT", ops.FLAT), 1: ("SCRATCH", ops.SCRATCH), 2: ("GLOBAL", ops.GLOBAL)}.get(seg, ("FLAT", {}))
  name = _lookup(table, _field(d0, 24, 18), f"{enc} (seg {seg})", offset)
  f = {"offset": _sext(_field(d0, 12, 0), 13), "dlc": _field(d0, 13, 13), "glc": _field(d0, 14, 14),
       "slc": _field(d0, 15, 15), "addr": Operand("v", _field(d1, 7, 0)), "data": Operand("v", _field(d1, 15, 8)),
       "saddr": source(_field(d1, 22, 16)), "sve": _field(d1, 23, 23), "vdst": Operand("v", _field(d1, 31, 24))}
  return Instruction(name, enc, 8, f, _flat_text(name, enc, f))

def _flat_text(name: str, enc: str, f: dict) -> str:
  regs = data_regs(name)
  atomic = "_atomic_" in name
  load = "_load_" in name or (atomic and f["glc"])
  saddr_on = f["saddr"].kind != "null"
  if enc == "SCRATCH": addr = operand_text(f["addr"]) if f["sve"] else "off"
  else: addr = operand_text(f["addr"], 1 if saddr_on else 2)
  parts = [operand_text(f["vdst"], regs)] if load else []
  parts.append(addr)
  if not name.startswith(("global_load", "flat_load", "scratch_load")):
    parts.append(operand_text(f["data"], 2 * regs if "cmpswap" in name else regs))
  if enc != "FLAT": parts.append(operand_text(f["saddr"], 1 if enc == "SCRATCH" else 2) if saddr_on else "off")
  mods = f" offset:{f['offset']}" if f["offset"] else ""
  mods += "".join(m for m, on in ((" glc", f["glc"]), (" slc", f["slc"]), (" dlc", f["dlc"])) if on)
  return f"{name} {', '.join(parts)}{mods}"

def _mubuf(w: _Words, offset: int) -> Instruction:
  name = _lookup(ops.MUBUF, _field(w.words[0], 25, 18), "MUBUF", offset)
  return Instruction(name, "MUBUF", 8, {}, name)

def decode(code: bytes | memoryview, offset: int, wave64: bool = False) -> Instruction:
  """The instruction at byte `offset` of `code`; UnknownInstruction names the encoding, opcode and offset of words
  this decoder has no entry for. `wave64` only changes how lane masks print (vcc vs vcc_lo)."""
  d = _u32(code, offset)
  if d >> 23 == 0x17D: return _scalar("SOP1", _Words(code, offset, 1), offset)
  if d >> 23 == 0x17E: return _scalar("SOPC", _Words(code, offset, 1), offset)
  if d >> 23 == 0x17F: return _sopp(_Words(code, offset, 1), offset)
  if d >> 28 == 0xB: return _scalar("SOPK", _Words(code, offset, 1), offset)
  if d >> 30 == 0x2: return _scalar("SOP2", _Words(code, offset, 1), offset)
  if d >> 25 == 0x3F: return _vop1(_Words(code, offset, 1), offset, wave64)
  if d >> 25 == 0x3E: return _vopc(_Words(code, offset, 1), offset, wave64)
  if d >> 31 == 0: return _vop2(_Words(code, offset, 1), offset, wave64)
  top6, top8 = d >> 26, d >> 24
  if top6 == 0x3D: return _smem(_Words(code, offset, 2), offset)
  if top6 == 0x35: return _vop3(_Words(code, offset, 2), offset, wave64)
  if top8 == 0xCC: return _vop3p(_Words(code, offset, 2), offset, wave64)
  if top6 == 0x32: return _vopd(_Words(code, offset, 2), offset, wave64)
  if top6 == 0x36: return _ds(_Words(code, offset, 2), offset)
  if top6 == 0x37: return _flat(_Words(code, offset, 2), offset)
  if top6 == 0x38: return _mubuf(_Words(code, offset, 2), offset)
  names = {0x3A: "MTBUF", 0x3C: "MIMG", 0x3E: "EXP"}
  enc = names.get(top6, {0xCD: "VINTERP", 0xCE: "LDSDIR"}.get(top8, "unknown encoding"))
  raise UnknownInstruction(f"{enc} word {d:#010x} at offset {offset:#x} is not modelled")

def disassemble(code: bytes | memoryview, wave64: bool = False) -> list[str]:
  """Every instruction of `code` as LLVM prints it, one per line (for DEBUG=7); stops at the padding of s_code_end."""
  out, at = [], 0
  while at + 4 <= len(code):
    ins = decode(code, at, wave64)
    if ins.name == "s_code_end": break
    out.append(ins.text)
    at += ins.size
  return out
