"""The PSP bootloader of an RDNA3 GPU (MP0 13.0.0) before its secure OS runs, as a register-level state machine on
MP0's C2PMSG registers. Its rules, from amdgpu's side of the handshake:
- C2PMSG_35 bit 31 reads 1 while the bootloader waits for a command (psp_v13_0.c psp_v13_0_wait_for_bootloader);
- a command written to C2PMSG_35 loads one component from memory-controller address C2PMSG_36 << 20
  (psp_v13_0_bootloader_load_*; amdgpu_psp.h enum psp_bootloader_cmd names the commands);
- components come in amdgpu_psp.c psp_hw_start's order, the system driver before the secure OS, which then signs
  life in C2PMSG_81 (psp_v13_0_is_sos_alive);
- the running secure OS sets C2PMSG_64 bit 31 when it is ready for its ring, takes the ring's address (C2PMSG_69/70)
  and size (C2PMSG_71) with the command KM ring << 16 in C2PMSG_64, and answers with bit 31 and a status
  (psp_v13_0_ring_create): the model refuses, with a nonzero status, any other ring type, a size that isn't whole
  64-byte frames, or a ring outside video memory.
A real PSP checks AMD's signature on each component; the model instead compares the bytes at that address with the
component of the firmware it was built with. A command it rejects (unknown, out of order, bytes that don't match, an
address outside video memory) leaves it busy, never ready again, which amdgpu sees as a timeout; `fault` says why."""
from __future__ import annotations

# MP0 register offsets, mp_13_0_0_offset.h
REG_C2PMSG_35, REG_C2PMSG_36, REG_C2PMSG_81 = 0x63, 0x64, 0x91
REG_C2PMSG_64, REG_C2PMSG_69, REG_C2PMSG_70, REG_C2PMSG_71 = 0x80, 0x85, 0x86, 0x87
READY = 1 << 31
# psp_v13_0_ring_create: the command in C2PMSG_64 is the ring type << 16 (amdgpu_psp.h PSP_RING_TYPE__KM = 2); the
# answer sets bit 31 with a status in bits 15:0, which amdgpu requires to be 0
KM_RING_TYPE, FRAME_BYTES = 2, 64  # psp_gfx_if.h: a struct psp_gfx_rb_frame is 64 bytes; rings hold whole frames
BAD_RING = 0x1  # the model's status for a ring it refuses (amdgpu only tests for nonzero)
# amdgpu_ucode.h enum psp_fw_type -> amdgpu_psp.h enum psp_bootloader_cmd, in psp_hw_start's order
KDB, SPL, SYS_DRV, SOC_DRV, INTF_DRV, DBG_DRV, RAS_DRV, SOS = 3, 5, 2, 7, 8, 9, 10, 1
COMMANDS = {0x80000: KDB, 0x10000000: SPL, 0x10000: SYS_DRV, 0xB0000: SOC_DRV, 0xD0000: INTF_DRV, 0xC0000: DBG_DRV, 0xE0000: RAS_DRV, 0x20000: SOS}
ORDER = list(COMMANDS.values())
SIGN_OF_LIFE = 0x1  # any nonzero value: amdgpu only tests C2PMSG_81 != 0

class PSPBootloader:
  """`firmware`: {fw_type: bytes} the model accepts; `vram_read(offset, n)` and `fb_base` place the staging buffer."""
  def __init__(self, firmware: dict[int, bytes], vram_read, vram_bytes: int, fb_base: int, answers: bool = True):
    self.firmware, self.vram_read, self.vram_bytes, self.fb_base, self.answers = firmware, vram_read, vram_bytes, fb_base, answers
    self.regs = {REG_C2PMSG_35: READY if answers else 0, REG_C2PMSG_36: 0, REG_C2PMSG_81: 0,
                 REG_C2PMSG_64: 0, REG_C2PMSG_69: 0, REG_C2PMSG_70: 0, REG_C2PMSG_71: 0}
    self.ring: tuple[int, int] | None = None  # (video memory offset, bytes) of the ring the secure OS took
    self.loaded: list[int] = []
    self.fault: str | None = None

  def read(self, reg: int) -> int: return self.regs[reg]
  def write(self, reg: int, value: int) -> None:
    if reg == REG_C2PMSG_64: return self._ring_command(value)
    if reg != REG_C2PMSG_35:
      self.regs[reg] = value
      return
    if not self.regs[REG_C2PMSG_35] & READY:
      self.fault = self.fault or f"command {value:#x} written while the bootloader was busy"
      return
    self.regs[REG_C2PMSG_35] = value  # bit 31 clear: busy, until the component is taken
    if (problem := self._rejects(value)) is not None:
      self.fault = problem
      return
    self.loaded.append(COMMANDS[value])
    if COMMANDS[value] == SOS: self.regs[REG_C2PMSG_81], self.regs[REG_C2PMSG_64] = SIGN_OF_LIFE, READY
    else: self.regs[REG_C2PMSG_35] = READY

  def _ring_command(self, value: int) -> None:
    if not self.regs[REG_C2PMSG_81] or not self.regs[REG_C2PMSG_64] & READY:
      self.fault = self.fault or f"ring command {value:#x} before the secure OS was ready for it"
      self.regs[REG_C2PMSG_64] = value
      return
    offset = (self.regs[REG_C2PMSG_70] << 32 | self.regs[REG_C2PMSG_69]) - self.fb_base
    size = self.regs[REG_C2PMSG_71]
    if value != KM_RING_TYPE << 16: problem = f"ring command {value:#x}: only the kernel-mode ring ({KM_RING_TYPE << 16:#x}) is created here"
    elif size == 0 or size % FRAME_BYTES: problem = f"ring size {size} isn't whole {FRAME_BYTES}-byte frames"
    elif not 0 <= offset <= self.vram_bytes - size: problem = f"ring at {offset + self.fb_base:#x} is outside video memory (which starts at {self.fb_base:#x})"
    else: problem = None
    self.fault = problem or self.fault
    if problem is None: self.ring = (offset, size)
    self.regs[REG_C2PMSG_64] = READY | (BAD_RING if problem else 0)

  def _rejects(self, command: int) -> str | None:
    """Why the bootloader refuses `command` with the address in C2PMSG_36 (None: it takes it)."""
    if (kind := COMMANDS.get(command)) is None: return f"unknown bootloader command {command:#x}"
    if self.loaded and ORDER.index(kind) <= ORDER.index(self.loaded[-1]): return f"component {kind} loaded after component {self.loaded[-1]}: out of order"
    if kind == SOS and SYS_DRV not in self.loaded: return "the secure OS was sent before the system driver"
    offset = (self.regs[REG_C2PMSG_36] << 20) - self.fb_base
    if (want := self.firmware.get(kind)) is None: return f"no firmware component {kind} to check against"
    if not 0 <= offset <= self.vram_bytes - len(want): return f"staging address {self.regs[REG_C2PMSG_36] << 20:#x} is outside video memory (which starts at {self.fb_base:#x})"
    if self.vram_read(offset, len(want)) != want: return f"the bytes at {self.regs[REG_C2PMSG_36] << 20:#x} aren't component {kind}"
    return None
