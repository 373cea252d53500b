"""Semantics of RDNA3's wave matrix multiply-accumulate (V_WMMA_*_16X16X16_*, VOP3P): D = A x B + C on one 16x16x16
tile per wave. Operand layout (RDNA3 ISA guide 7.9 "Wave Matrix Multiply Accumulate"; AMD GPUOpen "How to accelerate
AI applications on RDNA 3 using WMMA"): lane l holds row l%16 of A and column l%16 of B as 16 packed values (every
16-lane group holds the same copy); C and D hold element (r * G + l // 16, l % 16) in register r of lane l, G = the
wave's 16-lane groups (2 in wave32, 4 in wave64); 16-bit C/D values sit in the half OPSEL[2] picks."""
from __future__ import annotations
import numpy as np
from drivers.mock.amd.shader.instruction import Instruction
from drivers.mock.amd.shader.wave_state import Group, WaveState

OPS: dict = {}

def bf16_values(bits: np.ndarray) -> np.ndarray:
  return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)

def _to_bf16(x: np.ndarray) -> np.ndarray:
  """f32 -> bf16 bits rounding to nearest even (NaN stays NaN)."""
  b = np.asarray(x, np.float32).view(np.uint32)
  rounded = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
  return np.where(np.isnan(x), np.uint32(0x7FC0), rounded).astype(np.uint16)

def _lane_words(st: WaveState, g: Group, reg: int, regs: int) -> np.ndarray:
  """(waves, lanes, regs) uint32 words of `regs` registers from `reg`."""
  return np.stack([st.V[reg + k, g.ln] for k in range(regs)], axis=-1).reshape(g.nw, st.L, regs)

def _input(st: WaveState, g: Group, ins: Instruction, i: int, kind: str) -> np.ndarray:
  """A (i=0, rows x k) or B (i=1, k x columns) of each wave as float64 or int64, from lanes 0-15."""
  regs = {"f16": 8, "bf16": 8, "iu8": 4, "iu4": 2}[kind]
  words = np.ascontiguousarray(_lane_words(st, g, ins.fields[f"src{i}"].index, regs)[:, :16])
  if kind == "f16": vals = words.view(np.float16).astype(np.float64)
  elif kind == "bf16": vals = bf16_values(words.view(np.uint16)).astype(np.float64)
  else:
    signed = bool(ins.fields["neg"] >> i & 1)  # NEG[0]/NEG[1] mark A/B as signed integers
    raw = words.view(np.uint8)
    if kind == "iu4": raw = np.stack([raw & 0xF, raw >> 4], axis=-1).reshape(g.nw, 16, 16)
    bits = 8 if kind == "iu8" else 4
    vals = raw.astype(np.int64) - ((raw >= 1 << (bits - 1)) << bits if signed else 0)
  return vals if i == 0 else np.swapaxes(vals, 1, 2)

def _tile_index(st: WaveState) -> tuple[np.ndarray, np.ndarray]:
  """(row, column) of C/D per (lane, register)."""
  groups = st.L // 16
  lane, reg = np.arange(st.L)[:, None], np.arange(16 // groups)[None, :]
  return reg * groups + lane // 16, np.broadcast_to(lane % 16, (st.L, 16 // groups))

def _wmma(out: str, kind: str):
  def run(st: WaveState, g: Group, ins: Instruction) -> None:
    a, b = _input(st, g, ins, 0, kind), _input(st, g, ins, 1, kind)
    rows, cols = _tile_index(st)
    regs = rows.shape[1]
    c_words = _lane_words(st, g, ins.fields["src2"].index, regs)
    hi = bool(ins.fields["opsel"] >> 2 & 1)
    if out in ("f16", "bf16"):
      half = ((c_words >> np.uint32(16)) if hi else c_words) & np.uint32(0xFFFF)
      c_lane = half.astype(np.uint16).view(np.float16).astype(np.float64) if out == "f16" else bf16_values(half.astype(np.uint16)).astype(np.float64)
    else: c_lane = c_words.view(np.float32 if out == "f32" else np.int32).astype(np.float64 if out == "f32" else np.int64)
    d = a @ b  # (waves, 16, 16)
    d_lane = d[:, rows, cols] + c_lane
    if out == "f32": words = d_lane.astype(np.float32).view(np.uint32)
    elif out == "i32": words = (d_lane.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32)
    else:
      h = d_lane.astype(np.float16).view(np.uint16) if out == "f16" else _to_bf16(d_lane.astype(np.float32))
      h = h.astype(np.uint32)
      words = (c_words & np.uint32(0xFFFF)) | h << np.uint32(16) if hi else (c_words & np.uint32(0xFFFF0000)) | h
    vdst = ins.fields["vdst"].index
    for r in range(regs): st.vwrite(g, vdst + r, words[:, :, r].reshape(-1))
  return run

OPS["v_wmma_f32_16x16x16_f16"] = _wmma("f32", "f16")
OPS["v_wmma_f32_16x16x16_bf16"] = _wmma("f32", "bf16")
OPS["v_wmma_f16_16x16x16_f16"] = _wmma("f16", "f16")
OPS["v_wmma_bf16_16x16x16_bf16"] = _wmma("bf16", "bf16")
OPS["v_wmma_i32_16x16x16_iu8"] = _wmma("i32", "iu8")
OPS["v_wmma_i32_16x16x16_iu4"] = _wmma("i32", "iu4")
