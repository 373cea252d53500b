"""Semantics of CDNA3's dense matrix fused multiply-add on 16-bit floats (V_MFMA_F32_{16X16X16,32X32X8}_{F16,BF16},
VOP3P-MAI, wave64): D = A x B + C on one M x M x K block. Operand layout (MI300 ISA guide, "Matrix Arithmetic
Instructions" register layouts; AMD matrix instruction calculator, CDNA3 --matrix-layout): with G = 64 / M lane
groups and E = K / G values per lane, lane l holds A[l % M][E * (l // M) + e] and B[E * (l // M) + e][l % M] as E
packed halves (element e in bits 16e..16e+15 of its dword pair); register r of C and D holds element
(4G * (r // 4) + 4 * (l // M) + r % 4, l % M). Every operand may be VGPRs or AGPRs, as the decoder reports."""
from __future__ import annotations
import numpy as np
from drivers.mock.amd.shader.agpr_ops import register_row
from drivers.mock.amd.shader.dispatch import ShaderFault
from drivers.mock.amd.shader.instruction import Instruction, Operand
from drivers.mock.amd.shader.matrix_ops import bf16_values
from drivers.mock.amd.shader.wave_state import Group, WaveState

OPS: dict = {}
WAVE = 64

def _row(st: WaveState, op: Operand) -> int:
  """The register-file row of a VGPR or AGPR operand."""
  if op.kind not in ("v", "acc"): raise ShaderFault(f"MFMA matrix operand {op!r} is not a register")
  return register_row(st, op)

def _words(st: WaveState, g: Group, op: Operand, regs: int) -> np.ndarray:
  """(waves, 64 lanes, regs) uint32 words from consecutive registers; an inline constant or literal fills them all."""
  if op.kind in ("int", "float", "literal"):
    return np.broadcast_to(np.asarray(st.vread(g, op), np.uint32), (g.nw, WAVE, regs)).copy()
  row = _row(st, op)
  if row + regs > st.nvgpr: raise ShaderFault(f"MFMA operand {op!r} needs registers up to {row + regs - 1}, beyond the {st.nvgpr} of the wave")
  return np.stack([st.V[row + k, g.ln] for k in range(regs)], axis=-1).reshape(g.nw, WAVE, regs)

def tile_index(m: int) -> tuple[np.ndarray, np.ndarray]:
  """(row, column) of C/D per (lane, register) for an m x m block."""
  groups = WAVE // m
  lane, r = np.arange(WAVE)[:, None], np.arange(m * m // WAVE)[None, :]
  return 4 * groups * (r // 4) + 4 * (lane // m) + r % 4, np.broadcast_to(lane % m, (WAVE, m * m // WAVE))

def _operand_matrix(words: np.ndarray, m: int, k: int, kind: str) -> np.ndarray:
  """A (m x k) from the lanes' packed halves, as float64 per wave; B is the same gather, transposed."""
  halves = np.ascontiguousarray(words).view(np.uint16)  # (waves, 64, E): element e of each lane
  vals = halves.view(np.float16).astype(np.float64) if kind == "f16" else bf16_values(halves).astype(np.float64)
  per_lane = k // (WAVE // m)
  return vals.reshape(vals.shape[0], WAVE // m, m, per_lane).transpose(0, 2, 1, 3).reshape(vals.shape[0], m, k)

def _mfma(m: int, k: int, kind: str):
  ab_regs, cd_regs = k * m // WAVE // 2, m * m // WAVE
  def run(st: WaveState, g: Group, ins: Instruction) -> None:
    for field in ("cbsz", "abid", "blgp"):  # the broadcast and lane-group swizzles: only their default is modelled
      if ins.fields[field]: raise ShaderFault(f"{ins.name} with {field}:{ins.fields[field]} is not modelled")
    a = _operand_matrix(_words(st, g, ins.fields["src0"], ab_regs), m, k, kind)
    b = np.swapaxes(_operand_matrix(_words(st, g, ins.fields["src1"], ab_regs), m, k, kind), 1, 2)
    c = _words(st, g, ins.fields["src2"], cd_regs).view(np.float32).astype(np.float64)
    rows, cols = tile_index(m)
    d = ((a @ b)[:, rows, cols] + c).astype(np.float32).view(np.uint32)
    vdst = _row(st, ins.fields["vdst"])
    if vdst + cd_regs > st.nvgpr: raise ShaderFault(f"{ins.name} writes registers up to {vdst + cd_regs - 1}, beyond the {st.nvgpr} of the wave")
    for r in range(cd_regs): st.vwrite(g, vdst + r, d[:, :, r].reshape(-1))
  return run

# gfx940+ names: the bf16 forms are the "_1k" instructions of gfx90a (4 bf16 per lane)
OPS["v_mfma_f32_16x16x16_f16"] = _mfma(16, 16, "f16")
OPS["v_mfma_f32_16x16x16_bf16"] = _mfma(16, 16, "bf16")
OPS["v_mfma_f32_32x32x8_f16"] = _mfma(32, 8, "f16")
OPS["v_mfma_f32_32x32x8_bf16"] = _mfma(32, 8, "bf16")
