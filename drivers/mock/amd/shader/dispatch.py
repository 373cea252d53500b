"""What the command processor hands the shader core for one DISPATCH_DIRECT: the launch as the compute registers
describe it (gc_11_0_0_offset.h / gc_9_4_3_offset.h COMPUTE_* registers), and the GPU's memory as the shader
core reaches it. The executor (execute.py) runs every wave of every workgroup and raises ShaderFault on a fault."""
from __future__ import annotations
from dataclasses import dataclass
from typing import Protocol
import numpy as np

class ShaderFault(Exception):
  """A wave stopped: a memory access outside every mapping (the message names the address), an unknown
  instruction, s_trap, or a hang (a wave that never reaches s_endpgm within the step limit)."""
  def __init__(self, message: str, address: int | None = None):
    super().__init__(message)
    self.address = address

class GPUMemory(Protocol):
  def span(self, lo: int, hi: int) -> tuple[np.ndarray, int]:
    """(the uint8 bytes of the one mapping that holds [lo, hi), the GPU address of its first byte); ShaderFault
    naming the address when no mapping holds all of it."""
    ...

@dataclass(frozen=True)
class Dispatch:
  arch: str                                # the GPU's: "gfx1100", "gfx1101", "gfx1201", "gfx942", "gfx950"
  code_va: int                             # COMPUTE_PGM_LO/HI << 8: the first instruction
  rsrc1: int                               # COMPUTE_PGM_RSRC1 as written (float modes, VGPR granules, ...)
  rsrc2: int                               # COMPUTE_PGM_RSRC2 (USER_SGPR_COUNT, TGID_X/Y/Z_EN, TIDIG_COMP_CNT, LDS_SIZE)
  rsrc3: int                               # COMPUTE_PGM_RSRC3 (gfx9: ACCUM_OFFSET)
  user_data: tuple[int, ...]               # COMPUTE_USER_DATA_0..15: the first USER_SGPR_COUNT become s0, s1, ...
  groups: tuple[int, int, int]             # DISPATCH_DIRECT's workgroup counts
  group_size: tuple[int, int, int]         # COMPUTE_NUM_THREAD_X/Y/Z
  wave32: bool                             # DISPATCH_INITIATOR CS_W32_EN (gfx10+); gfx9 waves are 64 lanes
  lds_bytes: int                           # LDS per workgroup: RSRC2 LDS_SIZE granules times the granule
  scratch_va: int = 0                      # COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI << 8 (architected flat scratch)
  scratch_wave_bytes: int = 0              # COMPUTE_TMPRING_SIZE WAVESIZE in bytes per wave
