"""The RLC's start on an RDNA3 GPU whose firmware the PSP loads (amdgpu's AMDGPU_FW_LOAD_PSP): the driver never starts
the RLC or the IMU itself. Its rules, from amdgpu's side:
- the PSP boots them on GFX_CMD_ID_AUTOLOAD_RLC, which amdgpu_psp.c psp_load_non_psp_fw sends right after RLC_G,
  "after psp received all the gfx firmware": the RS64 PFP, ME and MEC ucodes and their pipes' stacks, IMU_I and IMU_D
  and the RLC's pieces (gfx_v11_0_init_microcode, imu_v11_0_init_microcode). The model boots at an AUTOLOAD_RLC that
  came after all of them, with the bytes of its own firmware files (a real PSP checks AMD's signatures instead);
- once booted, RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE (bit 31) reads 1 and CP_STAT 0, which
  gfx_v11_0_wait_for_rlc_autoload_complete waits for before the CP is set up (register offsets gc_11_0_0_offset.h;
  the bit from gc_11_0_0_sh_mask.h as ports of it quote it: the model's reading)."""
from __future__ import annotations
from typing import Callable

BOOTLOAD_STATUS, CP_STAT = (1, 0x4E82), (0, 0xF40)  # (GC segment, offset)
BOOTLOAD_COMPLETE = 1 << 31

class RLCModel:
  """`loads()`: the PSP's firmware loads so far, (fw_type, bytes) in order; `autoloads()`: how many loads each
  AUTOLOAD_RLC came after; `firmware`: {fw_type: bytes} that must be loaded before one boots the RLC."""
  def __init__(self, loads: Callable[[], list[tuple[int, bytes]]], autoloads: Callable[[], list[int]], firmware: dict[int, bytes]):
    self.loads, self.autoloads, self.firmware = loads, autoloads, firmware

  def registers(self) -> list[tuple[int, int]]: return [BOOTLOAD_STATUS, CP_STAT]

  def missing(self, count: int) -> list[int]:
    """The firmware types the first `count` loads lack (or hold other bytes of)."""
    loaded = dict(self.loads()[:count])
    return [t for t, image in self.firmware.items() if loaded.get(t) != image]

  @property
  def booted(self) -> bool: return any(not self.missing(count) for count in self.autoloads())

  def read(self, reg: tuple[int, int]) -> int: return BOOTLOAD_COMPLETE if reg == BOOTLOAD_STATUS and self.booted else 0
  def write(self, reg: tuple[int, int], value: int) -> None: pass
