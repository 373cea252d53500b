"""The architectural state of a batch of waves run in lockstep: SGPRs (one column per wave), VGPRs (one column per
lane of every wave), SCC, EXEC as a lane mask, and the reads and writes of operands under EXEC. A Group is the set
of waves at one PC that executes the next instruction together."""
from __future__ import annotations
from contextlib import contextmanager
import numpy as np
from drivers.mock.amd.shader.dispatch import ShaderFault
from drivers.mock.amd.shader.instruction import Operand

# SGPR file codes (RDNA3 ISA guide 15.1 operand table): s0-s105, vcc 106/107, ttmp 108-123, null 124, m0 125, exec 126/127
_CODE = {"vcc_lo": 106, "vcc_hi": 107, "null": 124, "m0": 125, "exec_lo": 126, "exec_hi": 127}
VCC, NULL, EXEC = 106, 124, 126
STAGING_ROWS = 3
# bits of the inline float constants per operand width (RDNA3 ISA guide 15.1: 240-248)
_F32 = {0.5: 0x3F000000, -0.5: 0xBF000000, 1.0: 0x3F800000, -1.0: 0xBF800000, 2.0: 0x40000000, -2.0: 0xC0000000,
        4.0: 0x40800000, -4.0: 0xC0800000, 0.15915494: 0x3E22F983}
_F16 = {0.5: 0x3800, -0.5: 0xB800, 1.0: 0x3C00, -1.0: 0xBC00, 2.0: 0x4000, -2.0: 0xC000, 4.0: 0x4400, -4.0: 0xC400,
        0.15915494: 0x3118}
_F64 = {0.5: 0x3FE0000000000000, -0.5: 0xBFE0000000000000, 1.0: 0x3FF0000000000000, -1.0: 0xBFF0000000000000,
        2.0: 0x4000000000000000, -2.0: 0xC000000000000000, 4.0: 0x4010000000000000, -4.0: 0xC010000000000000,
        0.15915494: 0x3FC45F306DC9C882}
# 1/(2*pi) as rdna3.py (0.15915494) and cdna3.py (the double nearest 1/(2*pi)) name it: the same constant
for _table in (_F32, _F16, _F64): _table[0.15915494309189535] = _table[0.15915494]

def sgpr_code(op: Operand) -> int:
  """The SGPR file index an operand names; ShaderFault for operands that are not scalar registers."""
  if op.kind == "s": return op.index
  if op.kind == "ttmp": return 108 + op.index
  if op.kind in _CODE: return _CODE[op.kind]
  raise ShaderFault(f"operand {op!r} is not a scalar register")

class Group:
  """Waves `wv` (a slice for all of them, else an index array) and their lanes `ln`; `em` is EXEC over those lanes."""
  __slots__ = ("wv", "ln", "nw", "em")
  def __init__(self, wv, ln, nw: int, em: np.ndarray):
    self.wv, self.ln, self.nw, self.em = wv, ln, nw, em

class WaveState:
  def __init__(self, nwaves: int, wave_size: int, nvgpr: int = 256):
    self.nw, self.L = nwaves, wave_size
    self.S = np.zeros((128, nwaves), np.uint32)
    # STAGING_ROWS hidden rows past the wave's VGPRs hold SDWA/DPP operands (lane_modifiers.py); only staged() writes them
    self.nvgpr, self.staging, self._vgpr_limit = nvgpr, nvgpr, nvgpr
    self.V = np.zeros((nvgpr + STAGING_ROWS, nwaves * wave_size), np.uint32)
    self.scc = np.zeros(nwaves, bool)
    self.exec = np.zeros(nwaves * wave_size, bool)
    self._shift = np.arange(wave_size, dtype=np.uint64)
    self.ieee, self.denorm32, self.denorm16_64 = True, True, True
    self.memory = self.scratch = None
    self.lds, self.lds_bytes, self.lane_group = np.zeros(0, np.uint8), 0, np.zeros(nwaves * wave_size, np.int64)
    self.scratch_lane_bytes = 0
    self.acc_base: int | None = None  # gfx90a/gfx94x: the unified register of AGPR a0 (agpr_ops.py)
    self.gfx9_halves = False  # gfx9 clears a 16-bit result's upper half where gfx10+ keeps it (vector_ops.dst)

  def flush(self, t: str) -> bool:
    """Whether denormals of float type t flush to zero (MODE.FP_DENORM: only 'allow both' keeps them)."""
    return not (self.denorm32 if t == "f32" else self.denorm16_64)

  # ---- lane masks <-> per-wave bits
  def pack(self, g: Group, lanes: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(low word, high word or None) per wave of a per-lane bool array."""
    bits = np.packbits(lanes.reshape(g.nw, self.L), axis=1, bitorder="little")
    if self.L == 32: return bits.view("<u4").ravel(), None
    both = bits.view("<u8").ravel()
    return (both & 0xFFFFFFFF).astype(np.uint32), (both >> np.uint64(32)).astype(np.uint32)

  def unpack(self, lo: np.ndarray, hi: np.ndarray | None) -> np.ndarray:
    word = lo.astype(np.uint64) if hi is None else lo.astype(np.uint64) | hi.astype(np.uint64) << np.uint64(32)
    return ((np.broadcast_to(word, (len(np.atleast_1d(word)),))[:, None] >> self._shift) & np.uint64(1)).astype(bool).ravel()

  def mask_read(self, g: Group, op: Operand) -> np.ndarray:
    """A lane-mask operand (VCC, an SGPR or pair) as a bool per lane of the group."""
    if op.kind in ("int", "literal"):
      v = np.full(g.nw, op.value & 0xFFFFFFFF, np.uint32)
      return self.unpack(v, np.full(g.nw, 0xFFFFFFFF if op.kind == "int" and op.value < 0 else 0, np.uint32) if self.L == 64 else None)
    code = sgpr_code(op)
    return self.unpack(self.S[code, g.wv], self.S[code + 1, g.wv] if self.L == 64 else None)

  def mask_write(self, g: Group, op: Operand, lanes: np.ndarray) -> None:
    """Write a per-lane result as a lane mask; inactive lanes write 0 (RDNA3 ISA guide 7.7 "VALU compare")."""
    lo, hi = self.pack(g, lanes & g.em)
    code = sgpr_code(op)
    self.swrite(g, code, lo)
    if hi is not None: self.swrite(g, code + 1, hi)

  def mask_is_zero(self, wv, code: int) -> np.ndarray:
    """Per wave: whether the lane mask at SGPR `code` (a pair in wave64) has no bit set."""
    zero = self.S[code, wv] == 0
    return zero & (self.S[code + 1, wv] == 0) if self.L == 64 else zero

  def refresh_exec(self, wv) -> None:
    lo = self.S[EXEC, wv]
    hi = self.S[EXEC + 1, wv] if self.L == 64 else None
    n = len(np.atleast_1d(lo))
    lanes = ((lo.astype(np.uint64) if hi is None else lo.astype(np.uint64) | hi.astype(np.uint64) << np.uint64(32))[:, None] >> self._shift) & np.uint64(1)
    if isinstance(wv, slice): self.exec[:] = lanes.astype(bool).ravel()
    else: self.exec.reshape(self.nw, self.L)[wv] = lanes.astype(bool).reshape(n, self.L)

  # ---- scalar registers
  def swrite(self, g: Group, code: int, value) -> None:
    if code == NULL: return
    self.S[code, g.wv] = value
    if code in (EXEC, EXEC + 1):
      self.refresh_exec(g.wv)
      g.em = self.exec[g.ln]

  def sread(self, g: Group, op: Operand, regs: int = 1, f64: bool = False):
    """A scalar source per wave: uint32 (regs 1) or uint64 (regs 2)."""
    k = op.kind
    if k == "int":
      return np.uint64(op.value & 0xFFFFFFFFFFFFFFFF) if regs == 2 else np.uint32(op.value & 0xFFFFFFFF)
    if k == "float": return np.uint64(_F64[op.value]) if regs == 2 else np.uint32(_F32[op.value])
    if k == "literal": return np.uint64(op.value << 32 if f64 else op.value) if regs == 2 else np.uint32(op.value)
    if k == "scc": return self.scc[g.wv].astype(np.uint32)
    if k in ("vccz", "execz"): return self.mask_is_zero(g.wv, VCC if k == "vccz" else EXEC).astype(np.uint32)
    code = sgpr_code(op)
    if code == NULL: return np.uint64(0) if regs == 2 else np.uint32(0)
    if regs == 2: return self.S[code, g.wv].astype(np.uint64) | self.S[code + 1, g.wv].astype(np.uint64) << np.uint64(32)
    return self.S[code, g.wv]

  def swrite_op(self, g: Group, op: Operand, value, regs: int = 1) -> None:
    code = sgpr_code(op)
    if regs == 2:
      value = np.asarray(value, np.uint64)
      self.swrite(g, code, (value & np.uint64(0xFFFFFFFF)).astype(np.uint32))
      self.swrite(g, code + 1, (value >> np.uint64(32)).astype(np.uint32))
    else: self.swrite(g, code, np.asarray(value).astype(np.uint32))

  # ---- vector registers
  @contextmanager
  def staged(self):
    """Let an instruction write the hidden staging rows (its destination was redirected there)."""
    self._vgpr_limit = self.V.shape[0]
    try: yield
    finally: self._vgpr_limit = self.nvgpr

  def vread(self, g: Group, op: Operand, regs: int = 1, width: int = 32):
    """A vector source per lane: uint32 (regs 1) or uint64 (regs 2); `width` picks inline float bits (16/32/64)."""
    if op.kind == "v":
      if regs == 2: return self.V[op.index, g.ln].astype(np.uint64) | self.V[op.index + 1, g.ln].astype(np.uint64) << np.uint64(32)
      return self.V[op.index, g.ln]
    if op.kind == "float" and width == 16: return np.uint32(_F16[op.value])
    if op.kind in ("int", "float", "literal"): return self.sread(g, op, regs, f64=width == 64)
    return np.repeat(self.sread(g, op, regs), self.L)

  def vwrite(self, g: Group, index: int, value, regs: int = 1) -> None:
    if index + regs > self._vgpr_limit: raise ShaderFault(f"VGPR v{index + regs - 1} is beyond the {self.nvgpr} VGPRs of the wave")
    if regs == 2:
      value = np.asarray(value, np.uint64)
      self.vwrite(g, index, (value & np.uint64(0xFFFFFFFF)).astype(np.uint32))
      self.vwrite(g, index + 1, (value >> np.uint64(32)).astype(np.uint32))
      return
    value = np.asarray(value).astype(np.uint32, copy=False)
    if isinstance(g.ln, slice): np.copyto(self.V[index], value, where=g.em)
    else: self.V[index, g.ln] = np.where(g.em, value, self.V[index, g.ln])
