"""Decoder of RDNA4 (gfx12) machine code into Instructions (instruction.py), with the text LLVM prints for each.
Field layouts: AMD "RDNA4 Instruction Set Architecture" reference guide, chapter "Microcode Formats" (also LLVM
llvm/lib/Target/AMDGPU/*Instructions.td, the gfx12 encoding classes). SOP*, VOP*, VOPD and DS keep gfx11's layouts
(the operand printing is shared with rdna3.py); SMEM moved its opcode and cache bits, and the vector memory
formats VFLAT/VGLOBAL/VSCRATCH/VBUFFER are three dwords with a 24-bit offset and TH/SCOPE cache policy.
Opcode numbers: rdna4_opcodes.py. An Instruction's name is its RDNA3 twin's where the two behave alike (the executor
knows one name per behaviour, e.g. v_max_num_f32 runs as v_max_f32); its text keeps LLVM's gfx12 mnemonic."""
from __future__ import annotations
from drivers.mock.amd.shader import rdna4_opcodes as ops
from drivers.mock.amd.shader.instruction import Instruction, Operand, UnknownInstruction
from drivers.mock.amd.shader.operand_widths import MASK, data_regs
from drivers.mock.amd.shader.operand_widths import halves as _rdna3_halves, widths as _rdna3_widths
from drivers.mock.amd.shader.rdna3 import (_ACCUMULATE, _CARRY_IN, _DEPCTR, _SDST_VOP1, _SDST_VOP3, _VOP3_TWO_SOURCES,
  _Words, _ds_text, _vopd, _field, _half, _no_dpp, _sext, _sopk_text, _sopp_operand, _src_mod, _u32, _vop3_modifiers, operand_text,
  source)

# gfx12 mnemonics whose behaviour is an RDNA3 instruction's (RDNA4 ISA guide, "New and changed instructions": renames)
RDNA3_NAME = {
  "s_add_co_u32": "s_add_u32", "s_sub_co_u32": "s_sub_u32", "s_add_co_i32": "s_add_i32", "s_sub_co_i32": "s_sub_i32",
  "s_add_co_ci_u32": "s_addc_u32", "s_sub_co_ci_u32": "s_subb_u32", "s_addk_co_i32": "s_addk_i32",
  "s_min_num_f32": "s_min_f32", "s_max_num_f32": "s_max_f32", "s_min_num_f16": "s_min_f16", "s_max_num_f16": "s_max_f16",
  "v_min_num_f32": "v_min_f32", "v_max_num_f32": "v_max_f32", "v_min_num_f16": "v_min_f16", "v_max_num_f16": "v_max_f16",
  "v_min_num_f64": "v_min_f64", "v_max_num_f64": "v_max_f64", "v_min3_num_f32": "v_min3_f32",
  "v_max3_num_f32": "v_max3_f32", "v_min3_num_f16": "v_min3_f16", "v_max3_num_f16": "v_max3_f16",
  "v_med3_num_f32": "v_med3_f32", "v_med3_num_f16": "v_med3_f16", "v_minmax_num_f32": "v_minmax_f32",
  "v_maxmin_num_f32": "v_maxmin_f32", "v_minmax_num_f16": "v_minmax_f16", "v_maxmin_num_f16": "v_maxmin_f16",
  "v_mad_co_u64_u32": "v_mad_u64_u32", "v_mad_co_i64_i32": "v_mad_i64_i32", "v_pk_min_num_f16": "v_pk_min_f16",
  "v_pk_max_num_f16": "v_pk_max_f16", "ds_min_num_f32": "ds_min_f32", "ds_max_num_f32": "ds_max_f32",
  "ds_min_num_rtn_f32": "ds_min_rtn_f32", "ds_max_num_rtn_f32": "ds_max_rtn_f32",
  "global_atomic_min_num_f32": "global_atomic_min_f32", "global_atomic_max_num_f32": "global_atomic_max_f32",
  "flat_atomic_min_num_f32": "flat_atomic_min_f32", "flat_atomic_max_num_f32": "flat_atomic_max_f32",
}
_VOP3_TWO = _VOP3_TWO_SOURCES | frozenset("""v_minimum_f32 v_maximum_f32 v_minimum_f16 v_maximum_f16 v_minimum_f64
  v_maximum_f64 v_permlane16_var_b32 v_permlanex16_var_b32 v_cvt_pk_fp8_f32 v_cvt_pk_bf8_f32 v_cvt_sr_fp8_f32
  v_cvt_sr_bf8_f32 v_pk_min_num_f16 v_pk_max_num_f16 v_pk_minimum_f16 v_pk_maximum_f16""".split())
# SOP1 ops with no destination field (LLVM SOPInstructions.td: SOP1_0_32 / SOP1_1_64 forms)
_SOP1_NO_SDST = frozenset({"s_setpc_b64", "s_rfe_b64", "s_barrier_signal", "s_barrier_signal_isfirst", "s_barrier_init",
                           "s_barrier_join", "s_alloc_vgpr", "s_sleep_var"})
# cache policy names (LLVM AMDGPUInstPrinter::printTH and SIDefines.h CPol::TH_*, CPol::SCOPE_*)
_TH_LOAD = ["", "TH_LOAD_NT", "TH_LOAD_HT", "TH_LOAD_BYPASS", "TH_LOAD_LU", "TH_LOAD_NT_RT", "TH_LOAD_RT_NT", "TH_LOAD_NT_HT"]
_TH_STORE = ["", "TH_STORE_NT", "TH_STORE_HT", "TH_STORE_BYPASS", "TH_STORE_LU", "TH_STORE_NT_RT", "TH_STORE_RT_NT",
             "TH_STORE_NT_HT"]
_SCOPE = ["", "SCOPE_SE", "SCOPE_DEV", "SCOPE_SYS"]

# VOP3 pseudo-scalar transcendentals: an SGPR destination and one source (RDNA4 ISA guide "V_S_EXP_F32" ...)
_SCALAR_TRANS = frozenset(f"v_s_{op}_{t}" for op in ("exp", "log", "rcp", "rsq", "sqrt") for t in ("f32", "f16"))

def _named(name: str) -> str: return RDNA3_NAME.get(name, name)
def widths(name: str) -> tuple: return _rdna3_widths(_named(name))
def halves(name: str) -> tuple: return _rdna3_halves(_named(name))

def _fake16(op: Operand) -> Operand:
  """The register number LLVM's fake16 printer shows for a high-half operand of a VOP1/VOP2/VOPC field: v(128 + n)."""
  return Operand("v", op.index + 128) if op.kind == "v" and op.hi else op

def _vop_text(name: str, suffix: str, dsts: list[str], srcs: list[Operand], wd: tuple, f: dict, wave64: bool) -> str:
  """gfx1201 is a fake16 target in LLVM: 16-bit operands print as whole VGPRs and VOP3 shows op_sel bits."""
  texts = [_src_mod(operand_text(_fake16(s), wd[1 + i] if i < 3 else 1, wave64), f.get("neg", 0), f.get("abs", 0), i)
           for i, s in enumerate(srcs)]
  opsel = ""
  if f.get("opsel") and "opsel_hi" not in f:
    opsel = " op_sel:[" + ",".join(str(f["opsel"] >> i & 1) for i in (*range(len(srcs)), 3)) + "]"
  return f"{name}{suffix} {', '.join(dsts + texts)}" + opsel + _vop3_modifiers(name, dict(f, opsel=0), len(srcs))

def _lookup(table: dict, opcode: int, encoding: str, offset: int) -> str:
  if opcode not in table: raise UnknownInstruction(f"unknown gfx12 {encoding} opcode {opcode} at offset {offset:#x}")
  return table[opcode]

def _ins(name: str, enc: str, size: int, f: dict, text: str) -> Instruction:
  return Instruction(_named(name), enc, size, f, text)

# ---- scalar ALU: gfx11 layouts (RDNA4 ISA guide "SOP1", "SOP2", "SOPC", "SOPK", "SOPP")
def _scalar(enc: str, w: _Words, offset: int) -> Instruction:
  d = w.words[0]
  if enc == "SOP1":
    name = _lookup(ops.SOP1, _field(d, 15, 8), enc, offset)
    f = {"sdst": source(_field(d, 22, 16)), "ssrc0": w.src(_field(d, 7, 0))}
    wd = widths(name)
    parts = ([] if name in _SOP1_NO_SDST else [operand_text(f["sdst"], wd[0])]) + \
            ([] if name == "s_getpc_b64" else [operand_text(f["ssrc0"], wd[1])])
  elif enc == "SOP2":
    name = _lookup(ops.SOP2, _field(d, 29, 23), enc, offset)
    f = {"sdst": source(_field(d, 22, 16)), "ssrc0": w.src(_field(d, 7, 0)), "ssrc1": w.src(_field(d, 15, 8))}
    wd = widths(name)
    parts = [operand_text(f["sdst"], wd[0]), operand_text(f["ssrc0"], wd[1]), operand_text(f["ssrc1"], wd[2])]
    if name in ("s_fmaak_f32", "s_fmamk_f32"):  # K follows the word (RDNA4 ISA guide S_FMAAK_F32: D = S0 * S1 + K)
      f["literal"] = Operand("literal", value=w.lit())
      parts.insert(3 if name == "s_fmaak_f32" else 2, operand_text(f["literal"]))
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
  return _ins(name, enc, w.size, f, f"{name} {', '.join(parts)}".rstrip())

def _sopp(w: _Words, offset: int) -> Instruction:
  d = w.words[0]
  name, simm = _lookup(ops.SOPP, _field(d, 22, 16), "SOPP", offset), _field(d, 15, 0)
  return _ins(name, "SOPP", 4, {"simm16": simm}, f"{name} {_sopp_text(name, simm)}".rstrip())

def _sopp_text(name: str, simm: int) -> str:
  if name == "s_barrier_wait": return str(_sext(simm, 16))  # a barrier id; -1 is the workgroup's barrier
  if name == "s_barrier_leave": return ""
  if name == "s_wait_alu":  # the gfx11 s_waitcnt_depctr fields (LLVM AMDGPUAsmUtils.cpp DepCtrInfo)
    shown = [f"{n}({simm >> lo & ((1 << b) - 1)})" for n, lo, b in _DEPCTR if simm >> lo & ((1 << b) - 1) != (1 << b) - 1]
    return " ".join(shown) if shown else f"{simm:#x}"
  if name.startswith("s_wait_") and name != "s_wait_idle": return f"{simm:#x}"
  return _sopp_operand(name, simm)

# ---- scalar memory: SBASE[5:0] SDATA[12:6] OP[18:13] SCOPE[22:21] TH[24:23] IOFFSET[55:32] SOFFSET[63:57]
def _smem(w: _Words, offset: int) -> Instruction:
  d0, d1 = w.words
  name = _lookup(ops.SMEM, _field(d0, 18, 13), "SMEM", offset)
  f = {"sdata": source(_field(d0, 12, 6)), "sbase": Operand("s", _field(d0, 5, 0) * 2), "scope": _field(d0, 22, 21),
       "th": _field(d0, 24, 23), "offset": _sext(_field(d1, 23, 0), 24), "soffset": source(_field(d1, 31, 25))}
  if name == "s_dcache_inv": return _ins(name, "SMEM", 8, f, name)
  base = operand_text(f["sbase"], 4 if name.startswith("s_buffer") else 2)
  if f["soffset"].kind == "null": off = f"{f['offset']:#x}"
  else: off = operand_text(f["soffset"]) + (f" offset:{f['offset']:#x}" if f["offset"] else "")
  text = f"{name} {operand_text(f['sdata'], data_regs(name))}, {base}, {off}{_cache_policy(name, f['th'], f['scope'])}"
  return _ins(name, "SMEM", 8, f, text)

def _cache_policy(name: str, th: int, scope: int) -> str:
  """The th:/scope: modifiers LLVM prints after a gfx12 memory instruction (nothing for the defaults)."""
  if "_atomic_" in name:
    bits = [n for b, n in ((1, "TH_ATOMIC_RETURN"), (2, "TH_ATOMIC_NT"), (4, "TH_ATOMIC_CASCADE")) if th & b]
    text = f" th:{'|'.join(bits)}" if bits else ""
  else: text = f" th:{(_TH_STORE if '_store' in name else _TH_LOAD)[th]}" if th else ""
  return text + (f" scope:{_SCOPE[scope]}" if scope else "")

# ---- vector ALU: gfx11 layouts (RDNA4 ISA guide "VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P", "VOPD")
def _vop1(w: _Words, offset: int, wave64: bool) -> Instruction:
  d = w.words[0]
  name = _lookup(ops.VOP1, _field(d, 16, 9), "VOP1", offset)
  _no_dpp(_field(d, 8, 0), "VOP1", offset)
  h = halves(name)  # the hardware is true16: bit 7 of a 16-bit operand's field picks the high half (printed fake16)
  vdst = Operand("s", _field(d, 24, 17)) if name in _SDST_VOP1 else _half(Operand("v", _field(d, 24, 17)), h[0])
  f = {"vdst": vdst, "src0": _half(w.src(_field(d, 8, 0)), h[1])}
  if name in ("v_nop", "v_pipeflush"): return _ins(name, "VOP1", w.size, f, f"{name}_e32")
  wd = widths(name)
  suffix = "" if name in _SDST_VOP1 else "_e32"
  return _ins(name, "VOP1", w.size, f, _vop_text(name, suffix, [operand_text(_fake16(vdst), wd[0])], [f["src0"]], wd, f, wave64))

def _vop2(w: _Words, offset: int, wave64: bool) -> Instruction:
  d = w.words[0]
  name = _lookup(ops.VOP2, _field(d, 30, 25), "VOP2", offset)
  _no_dpp(_field(d, 8, 0), "VOP2", offset)
  wd, h = widths(name), halves(name)
  vdst, src0 = _half(Operand("v", _field(d, 24, 17)), h[0]), _half(w.src(_field(d, 8, 0)), h[1])
  vsrc1, vcc = _half(Operand("v", _field(d, 16, 9)), h[2]), Operand("vcc_lo")
  dsts = [operand_text(_fake16(vdst), wd[0])]
  if name in ("v_fmamk_f32", "v_fmamk_f16", "v_fmaak_f32", "v_fmaak_f16"):
    k = Operand("literal", value=w.lit())
    f = {"vdst": vdst, "src0": src0, "src1": k, "src2": vsrc1} if "mk" in name else {"vdst": vdst, "src0": src0, "src1": vsrc1, "src2": k}
    return _ins(name, "VOP2", w.size, f, _vop_text(name, "", dsts, [f["src0"], f["src1"], f["src2"]], wd, f, wave64))
  f, shown = {"vdst": vdst, "src0": src0, "src1": vsrc1}, [src0, vsrc1]
  if name in _CARRY_IN:
    f["src2"] = vcc
    shown.append(vcc)
    if name != "v_cndmask_b32": f["sdst"], dsts = vcc, dsts + [operand_text(vcc, MASK, wave64)]
  elif name in _ACCUMULATE: f["src2"] = vdst
  return _ins(name, "VOP2", w.size, f, _vop_text(name, "_e32", dsts, shown, wd[:3] + (MASK,), f, wave64))

def _vopc(w: _Words, offset: int, wave64: bool) -> Instruction:
  d = w.words[0]
  name = _lookup(ops.VOPC, _field(d, 24, 17), "VOPC", offset)
  _no_dpp(_field(d, 8, 0), "VOPC", offset)
  h = halves(name)
  f = {"src0": _half(w.src(_field(d, 8, 0)), h[1]), "src1": _half(Operand("v", _field(d, 16, 9)), h[2])}
  f["sdst"] = Operand("exec_lo") if name.startswith("v_cmpx") else Operand("vcc_lo")
  dsts = [] if name.startswith("v_cmpx") else [operand_text(f["sdst"], MASK, wave64)]
  return _ins(name, "VOPC", w.size, f, _vop_text(name, "_e32", dsts, [f["src0"], f["src1"]], widths(name), f, wave64))

def _vop3(w: _Words, offset: int, wave64: bool) -> Instruction:
  d0, d1 = w.words
  opcode = _field(d0, 25, 16)
  name = _lookup(ops.VOP3, opcode, "VOP3", offset)
  _no_dpp(_field(d1, 8, 0), "VOP3", offset)
  srcs = [w.src(_field(d1, 8, 0)), w.src(_field(d1, 17, 9)), w.src(_field(d1, 26, 18))]
  sd = opcode in (288, 289, 290) or 764 <= opcode <= 770  # VOP3SD: bits [14:8] are a scalar destination
  f = {"vdst": Operand("v", _field(d0, 7, 0)), "neg": _field(d1, 31, 29), "clamp": _field(d0, 15, 15),
       "omod": _field(d1, 28, 27), "abs": 0 if sd else _field(d0, 10, 8), "opsel": 0 if sd else _field(d0, 14, 11)}
  wd = widths(name)
  if opcode < 256:  # compares write a lane mask to an SGPR (or EXEC for v_cmpx)
    f["sdst"] = Operand("exec_lo") if name.startswith("v_cmpx") else source(_field(d0, 7, 0))
    dsts = [] if name.startswith("v_cmpx") else [operand_text(f["sdst"], MASK, wave64)]
  elif sd:
    f["sdst"] = source(_field(d0, 14, 8))
    dsts = [operand_text(f["vdst"], wd[0]), operand_text(f["sdst"], MASK, wave64)]
  elif name in _SDST_VOP3 or name in _SCALAR_TRANS:
    f["vdst"] = source(_field(d0, 7, 0))
    dsts = [operand_text(f["vdst"])]
  else: dsts = [operand_text(f["vdst"], wd[0])]
  shown = srcs[:_vop3_sources(name, opcode)]
  f.update({f"src{i}": s for i, s in enumerate(shown)})
  if name in _CARRY_IN and not sd: f["sdst"] = None
  if name in _ACCUMULATE: f["src2"] = f["vdst"]
  if name in ("v_nop", "v_pipeflush"): return _ins(name, "VOP3", w.size, f, f"{name}_e64")
  wdm = wd[:3] + (MASK,) if name in _CARRY_IN else wd
  return _ins(name, "VOP3SD" if sd else "VOP3", w.size, f, _vop_text(name, "_e64" if opcode < 512 else "", dsts, shown, wdm, f, wave64))

def _vop3_sources(name: str, opcode: int) -> int:
  if opcode < 256: return 2
  if opcode < 384: return 3 if name in _CARRY_IN else 2
  if opcode < 512 or name in _SCALAR_TRANS: return 1
  return 2 if name in _VOP3_TWO else 3

def _vop3p(w: _Words, offset: int, wave64: bool) -> Instruction:
  d0, d1 = w.words
  name = _lookup(ops.VOP3P, _field(d0, 22, 16), "VOP3P", offset)
  if name.startswith(("v_wmma", "v_swmmac")):
    raise UnknownInstruction(f"VOP3P {name} at offset {offset:#x} is not modelled (gfx12 matrix layouts)")
  nsrc = 2 if name in _VOP3_TWO else 3
  srcs = [w.src(_field(d1, 8, 0)), w.src(_field(d1, 17, 9)), w.src(_field(d1, 26, 18))][:nsrc]
  f = {"vdst": Operand("v", _field(d0, 7, 0)), "neg_hi": _field(d0, 10, 8), "opsel": _field(d0, 13, 11),
       "opsel_hi": _field(d1, 28, 27) | _field(d0, 14, 14) << 2, "clamp": _field(d0, 15, 15), "neg": _field(d1, 31, 29)}
  f.update({f"src{i}": s for i, s in enumerate(srcs)})
  mix = name.startswith("v_fma_mix")
  texts = [_src_mod(operand_text(s, 1, wave64), f["neg"], f["neg_hi"], i) if mix else operand_text(s, 1, wave64)
           for i, s in enumerate(srcs)]
  text = f"{name} {', '.join([operand_text(f['vdst'])] + texts)}" + _vop3_modifiers(name, dict(f, neg_hi=0 if mix else f["neg_hi"]), nsrc)
  return _ins(name, "VOP3P", w.size, f, text)

# ---- LDS: the gfx11 DS layout
def _ds(w: _Words, offset: int) -> Instruction:
  d0, d1 = w.words
  name = _lookup(ops.DS, _field(d0, 25, 18), "DS", offset)
  f = {"offset0": _field(d0, 7, 0), "offset1": _field(d0, 15, 8), "gds": 0,
       "addr": Operand("v", _field(d1, 7, 0)), "data0": Operand("v", _field(d1, 15, 8)),
       "data1": Operand("v", _field(d1, 23, 16)), "vdst": Operand("v", _field(d1, 31, 24))}
  return _ins(name, "DS", 8, f, _ds_text(name, f))

# ---- vector memory: SADDR/SOFFSET[6:0] OP[21:14] VDST/VDATA[39:32] SVE[49] (RSRC[49:41] in VBUFFER) SCOPE[51:50]
# TH[54:52] VSRC[62:55] VADDR[71:64] IOFFSET[95:72] (RDNA4 ISA guide "VFLAT", "VGLOBAL", "VSCRATCH", "VBUFFER")
_VMEM = {0xEC: ("FLAT", ops.FLAT), 0xED: ("SCRATCH", ops.SCRATCH), 0xEE: ("GLOBAL", ops.GLOBAL)}

def _vmem(w: _Words, offset: int) -> Instruction:
  d0, d1, d2 = w.words
  enc, table = _VMEM[d0 >> 24]
  name = _lookup(table, _field(d0, 21, 14), enc, offset)
  th = _field(d1, 22, 20)
  f = {"saddr": source(_field(d0, 6, 0)), "vdst": Operand("v", _field(d1, 7, 0)), "sve": _field(d1, 17, 17),
       "scope": _field(d1, 19, 18), "th": th, "data": Operand("v", _field(d1, 30, 23)),
       "addr": Operand("v", _field(d2, 7, 0)), "offset": _sext(_field(d2, 31, 8), 24),
       "glc": th & 1 if "_atomic_" in name else 0, "slc": 0, "dlc": 0}  # glc: an atomic returns the old value
  return _ins(name, enc, 12, f, _vmem_text(name, enc, f))

def _vmem_text(name: str, enc: str, f: dict) -> str:
  if name in ("global_inv", "global_wb", "global_wbinv"): return f"{name}{_cache_policy(name, f['th'], f['scope'])}"
  regs = data_regs(name)
  load = "_load_" in name or ("_atomic_" in name and f["th"] & 1)
  saddr_on = f["saddr"].kind != "null"
  if enc == "SCRATCH": addr = operand_text(f["addr"]) if f["sve"] else "off"
  else: addr = operand_text(f["addr"], 1 if saddr_on else 2)
  parts = ([operand_text(f["vdst"], regs)] if load else []) + [addr]
  if "_load_" not in name: parts.append(operand_text(f["data"], 2 * regs if "cmpswap" in name else regs))
  if enc != "FLAT": parts.append(operand_text(f["saddr"], 1 if enc == "SCRATCH" else 2) if saddr_on else "off")
  mods = f" offset:{f['offset']}" if f["offset"] else ""
  return f"{name} {', '.join(parts)}{mods}{_cache_policy(name, f['th'], f['scope'])}"

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
  if top6 == 0x32: return _vopd(_Words(code, offset, 2), offset, wave64, ops.VOPD, _named)  # the gfx11 layout (RDNA4 ISA guide "VOPD")
  if top6 == 0x36: return _ds(_Words(code, offset, 2), offset)
  if top8 in _VMEM: return _vmem(_Words(code, offset, 3), offset)
  names = {0x31: "VBUFFER", 0x34: "VIMAGE", 0x39: "VSAMPLE", 0x3E: "VEXPORT"}
  enc = names.get(top6, {0xCD: "VINTERP", 0xCE: "VDSDIR"}.get(top8, "unknown encoding"))
  raise UnknownInstruction(f"gfx12 {enc} word {d:#010x} at offset {offset:#x} is not modelled")

def disassemble(code: bytes | memoryview, wave64: bool = False) -> list[str]:
  """Every instruction of `code` as LLVM prints it, one per line (for DEBUG=7); stops at the padding of s_code_end."""
  out, at = [], 0
  while at + 4 <= len(code):
    ins = decode(code, at, wave64)
    if ins.name == "s_code_end": break
    out.append(ins.text)
    at += ins.size
  return out
