"""CDNA's accumulation registers (AGPRs, "acc" operands): on gfx90a/gfx94x they are the upper part of one unified
register file per lane, AGPR i being unified register ACCUM_OFFSET + i, ACCUM_OFFSET = (COMPUTE_PGM_RSRC3[5:0] + 1) * 4
(AMDGPUUsage.rst "compute_pgm_rsrc3 for GFX90A, GFX942": ACCUM_OFFSET). The moves between VGPRs and AGPRs: MI300 ISA
guide V_ACCVGPR_WRITE_B32 (VOP3P), V_ACCVGPR_READ_B32 (VOP3P), V_ACCVGPR_MOV_B32 (VOP1)."""
from __future__ import annotations
import numpy as np
from drivers.mock.amd.shader.dispatch import ShaderFault
from drivers.mock.amd.shader.instruction import Instruction, Operand
from drivers.mock.amd.shader.wave_state import Group, WaveState

OPS: dict = {}

def accum_offset(rsrc3: int) -> int:
  """The unified register that holds a0."""
  return ((rsrc3 & 0x3F) + 1) * 4

def agpr_row(st: WaveState, op: Operand) -> int:
  """The unified register row of an AGPR operand; ShaderFault past the wave's allocation."""
  if st.acc_base is None: raise ShaderFault(f"AGPR a{op.index} used by an architecture without accumulation registers")
  row = st.acc_base + op.index
  if row >= st.nvgpr: raise ShaderFault(f"AGPR a{op.index} is unified register {row}, beyond the {st.nvgpr} of the wave")
  return row

def register_row(st: WaveState, op: Operand) -> int:
  """The unified register row of a VGPR or AGPR operand (memory instructions and MFMA take either)."""
  return agpr_row(st, op) if op.kind == "acc" else op.index

def _write(st: WaveState, g: Group, ins: Instruction) -> None:
  st.vwrite(g, agpr_row(st, ins.fields["vdst"]), np.asarray(st.vread(g, ins.fields["src0"]), np.uint32))

def _read(st: WaveState, g: Group, ins: Instruction) -> None:
  st.vwrite(g, ins.fields["vdst"].index, st.V[agpr_row(st, ins.fields["src0"]), g.ln])

def _mov(st: WaveState, g: Group, ins: Instruction) -> None:
  st.vwrite(g, agpr_row(st, ins.fields["vdst"]), st.V[agpr_row(st, ins.fields["src0"]), g.ln])

OPS.update({"v_accvgpr_write_b32": _write, "v_accvgpr_read_b32": _read, "v_accvgpr_mov_b32": _mov})
