"""s_setreg_b32 / s_setreg_imm32_b32 / s_getreg_b32 on the MODE hardware register, the way LLVM's fdiv turns f32
denormals on around its fma chain when the kernel flushes them (gfx9: "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 3").
The simm16 names the register [5:0], the first bit [10:6] and the width - 1 [15:11]; MODE holds FP_ROUND [3:0],
FP_DENORM [7:4] (f32 [5:4], f16/f64 [7:6]; 3 keeps denormals), DX10_CLAMP [8], IEEE [9] (MI300 ISA guide and RDNA3 ISA
guide, "S_SETREG_B32" and the MODE register table). The mode is one per batch of waves, as s_denorm_mode keeps it."""
from __future__ import annotations
import numpy as np
from drivers.mock.amd.shader.dispatch import ShaderFault
from drivers.mock.amd.shader.instruction import Instruction
from drivers.mock.amd.shader.wave_state import Group, WaveState

HW_REG_MODE = 1
_DX10_CLAMP = 1 << 8
OPS: dict = {}

def _fields(ins: Instruction) -> tuple[int, int]:
  """(bit offset, mask in place) of the hwreg field; ShaderFault for a register other than MODE."""
  imm = ins.fields["simm16"]
  reg, offset, width = imm & 0x3F, (imm >> 6) & 0x1F, ((imm >> 11) & 0x1F) + 1
  if reg != HW_REG_MODE: raise ShaderFault(f"{ins.name} of hardware register {reg} (simm16 {imm:#x}) is not modelled; only MODE is")
  return offset, ((1 << width) - 1) << offset & 0xFFFFFFFF

def mode_value(st: WaveState) -> int:
  """MODE as the model keeps it: round to nearest even, denormals kept (3) or flushed (0), IEEE as set."""
  return (3 if st.denorm32 else 0) << 4 | (3 if st.denorm16_64 else 0) << 6 | _DX10_CLAMP | int(st.ieee) << 9

def _set_mode(st: WaveState, mode: int, ins: Instruction) -> None:
  if mode & 0xF: raise ShaderFault(f"{ins.name}: FP_ROUND {mode & 0xF:#x} (a rounding mode other than nearest even) is not modelled")
  st.denorm32, st.denorm16_64, st.ieee = (mode >> 4 & 3) == 3, (mode >> 6 & 3) == 3, bool(mode >> 9 & 1)

def _setreg(st: WaveState, g: Group, ins: Instruction) -> None:
  offset, mask = _fields(ins)
  if ins.name == "s_setreg_imm32_b32": value = ins.fields["literal"]
  else:
    values = np.unique(np.broadcast_to(st.sread(g, ins.fields["sdst"]), (g.nw,)))
    if values.size != 1: raise ShaderFault(f"{ins.name}: waves of one batch set MODE to different values {values.tolist()}")
    value = int(values[0])
  _set_mode(st, (mode_value(st) & ~mask) | (value << offset & mask), ins)

def _getreg(st: WaveState, g: Group, ins: Instruction) -> None:
  offset, mask = _fields(ins)
  st.swrite_op(g, ins.fields["sdst"], np.full(g.nw, (mode_value(st) & mask) >> offset, np.uint32))

OPS.update({"s_setreg_b32": _setreg, "s_setreg_imm32_b32": _setreg, "s_getreg_b32": _getreg})
