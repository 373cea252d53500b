"""gfx9 SDWA and DPP forms of VOP1/VOP2/VOPC instructions (cdna3.py marks them with fields["modifier"]): the sources
are rewritten per lane - a byte or word picked and extended (SDWA), or src0 read from another lane (DPP) - into
staging VGPRs of the wave, the plain operation runs on them, and SDWA's result lands in the selected part of vdst.
MI300 ISA guide, "VOP_SDWA" (SRC0_SEL, SRC0_SEXT, DST_SEL, DST_UNUSED) and "VOP_DPP" (DPP_CTRL, BOUND_CTRL,
ROW_MASK, BANK_MASK) microcode formats and the "Data Parallel Processing" section."""
from __future__ import annotations
import numpy as np
from dataclasses import replace
from drivers.mock.amd.shader.instruction import Instruction, Operand
from drivers.mock.amd.shader.operand_widths import halves
from drivers.mock.amd.shader.wave_state import Group, WaveState

BYTE_0, WORD_0, DWORD = 0, 4, 6
UNUSED_PAD, UNUSED_SEXT, UNUSED_PRESERVE = 0, 1, 2
_MODIFIER_FIELDS = ("src0_sel", "src0_sext", "src0_neg", "src0_abs", "src1_sel", "src1_sext", "src1_neg", "src1_abs",
                    "dst_sel", "dst_unused", "modifier", "dpp_ctrl", "bound_ctrl", "bank_mask", "row_mask")

def run(op, st: WaveState, g: Group, ins: Instruction) -> None:
  """Execute `op` (the plain semantics) on an SDWA or DPP instruction."""
  (_sdwa if ins.fields["modifier"] == "SDWA" else _dpp)(op, st, g, ins)

def _field(sel: int) -> tuple[int, int]:
  """(bit offset, bit width) an SDWA select names: BYTE_0..3, WORD_0..1, DWORD."""
  if sel < WORD_0: return 8 * sel, 8
  if sel < DWORD: return 16 * (sel - WORD_0), 16
  return 0, 32

def _extract(x: np.ndarray, sel: int, sext: int) -> np.ndarray:
  off, width = _field(sel)
  if width == 32: return x
  v = (x >> np.uint32(off)) & np.uint32((1 << width) - 1)
  if sext: v = np.where(v >> np.uint32(width - 1) & np.uint32(1), v | np.uint32((0xFFFFFFFF << width) & 0xFFFFFFFF), v)
  return v.astype(np.uint32)

def _float_mods(x: np.ndarray, neg: int, abs_: int, half: bool) -> np.ndarray:
  """The float input modifiers on the operand's sign bit (bit 15 for a 16-bit operand)."""
  sign = np.uint32(0x8000 if half else 0x80000000)
  if abs_: x = x & ~sign
  if neg: x = x ^ sign
  return x

def _stage(st: WaveState, g: Group, row: int, value: np.ndarray) -> Operand:
  st.V[row, g.ln] = np.broadcast_to(value, st.V[row, g.ln].shape)
  return Operand("v", row)

def _plain(ins: Instruction, fields: dict) -> Instruction:
  return replace(ins, fields={k: v for k, v in fields.items() if k not in _MODIFIER_FIELDS})

def _sources(st: WaveState, g: Group, ins: Instruction, values) -> dict:
  """The instruction's fields with src0/src1 replaced by staged per-lane values (after the float modifiers)."""
  f, fields = ins.fields, dict(ins.fields)
  for i in (0, 1):
    if f"src{i}" not in f or (i == 1 and ins.encoding == "VOP1"): continue
    x = values(i, np.asarray(st.vread(g, f[f"src{i}"]), np.uint32))
    x = _float_mods(x, f.get(f"src{i}_neg", 0), f.get(f"src{i}_abs", 0), halves(ins.name)[1 + i])
    fields[f"src{i}"] = _stage(st, g, st.staging + i, x)
  return fields

def _sdwa(op, st: WaveState, g: Group, ins: Instruction) -> None:
  f = ins.fields
  fields = _sources(st, g, ins, lambda i, x: _extract(x, f[f"src{i}_sel"], f[f"src{i}_sext"]))
  if ins.encoding == "VOPC":
    op(st, g, _plain(ins, fields))
    return
  result_row = st.staging + 2
  st.V[result_row, g.ln] = 0
  fields["vdst"] = Operand("v", result_row)
  with st.staged(): op(st, g, _plain(ins, fields))
  st.vwrite(g, f["vdst"].index, _place(st.V[result_row, g.ln], st.V[f["vdst"].index, g.ln], f["dst_sel"], f["dst_unused"]))

def _place(result: np.ndarray, old: np.ndarray, sel: int, unused: int) -> np.ndarray:
  """DST_SEL / DST_UNUSED: the result's low bits go to the selected field; the other bits are zero (PAD), copies of
  the field's sign above it (SEXT), or vdst's old bits (PRESERVE)."""
  off, width = _field(sel)
  if width == 32: return result
  mask = np.uint32(((1 << width) - 1) << off)
  placed = (result << np.uint32(off)) & mask
  if unused == UNUSED_PRESERVE: return placed | (old & ~mask)
  if unused == UNUSED_SEXT:
    above = np.uint32((0xFFFFFFFF << (off + width)) & 0xFFFFFFFF)
    return np.where(result >> np.uint32(width - 1) & np.uint32(1), placed | above, placed).astype(np.uint32)
  return placed

# ---- DPP: each lane's src0 comes from another lane of its wave (rows of 16 lanes, banks of 4 within a row)
def dpp_source_lanes(ctrl: int, L: int) -> np.ndarray:
  """Per lane of a wave, the lane whose src0 it reads, -1 where there is none (out of the row or the wave)."""
  lane = np.arange(L)
  row, pos = lane & ~15, lane & 15
  if ctrl <= 0xFF: return (lane & ~3) + ((ctrl >> (2 * (lane & 3))) & 3)
  n = ctrl & 0xF
  if 0x101 <= ctrl <= 0x10F: return np.where(pos + n <= 15, lane + n, -1)             # row_shl
  if 0x111 <= ctrl <= 0x11F: return np.where(pos - n >= 0, lane - n, -1)              # row_shr
  if 0x121 <= ctrl <= 0x12F: return row + ((pos - n) & 15)                            # row_ror
  if 0x150 <= ctrl <= 0x15F: return row + n                                           # row_newbcast (gfx90a+)
  fixed = {0x130: np.where(lane + 1 < L, lane + 1, -1), 0x134: (lane + 1) % L,        # wave_shl, wave_rol
           0x138: lane - 1, 0x13C: (lane - 1) % L,                                    # wave_shr, wave_ror
           0x140: row + 15 - pos, 0x141: (lane & ~7) + 7 - (lane & 7),                # row_mirror, row_half_mirror
           0x142: np.where(row > 0, row - 1, -1),                                     # row_bcast:15 -> the next row
           0x143: np.where(lane >= 32, 31, -1)}                                       # row_bcast:31 -> rows 2 and 3
  if ctrl not in fixed: raise ValueError(f"DPP dpp_ctrl {ctrl:#x} names no lane pattern")
  return fixed[ctrl]

def _dpp(op, st: WaveState, g: Group, ins: Instruction) -> None:
  """Lanes outside row_mask/bank_mask are not written; a lane whose source lane is missing or inactive reads 0 with
  bound_ctrl and is not written without it."""
  f, L = ins.fields, st.L
  src_lane = dpp_source_lanes(f["dpp_ctrl"], L)
  lane = np.arange(L)
  enabled = ((f["row_mask"] >> (lane >> 4)) & 1 & (f["bank_mask"] >> ((lane >> 2) & 3))).astype(bool)
  em = g.em.reshape(g.nw, L)
  valid = (src_lane >= 0) & em[:, np.maximum(src_lane, 0)]
  def permuted(i: int, x: np.ndarray) -> np.ndarray:
    if i: return x
    x = np.broadcast_to(x, g.em.shape).reshape(g.nw, L)[:, np.maximum(src_lane, 0)]
    return np.where(valid, x, np.uint32(0)).ravel()
  fields = _sources(st, g, ins, permuted)
  write = em & enabled & (valid | bool(f["bound_ctrl"]))
  op(st, Group(g.wv, g.ln, g.nw, write.ravel()), _plain(ins, fields))
