"""The PSP of an RDNA3 GPU (MP0 13.0.0), from its bootloader to its secure OS's command ring, as a state machine on
MP0's C2PMSG registers and the video memory they point at. Its rules, from amdgpu's side of the handshake:
- C2PMSG_35 bit 31 reads 1 while the bootloader waits for a command (psp_v13_0.c psp_v13_0_wait_for_bootloader);
- a command written to C2PMSG_35 loads one component from memory-controller address C2PMSG_36 << 20
  (psp_v13_0_bootloader_load_*; amdgpu_psp.h enum psp_bootloader_cmd names the commands);
- components come in amdgpu_psp.c psp_hw_start's order, the system driver before the secure OS, which then signs
  life in C2PMSG_81 (psp_v13_0_is_sos_alive);
- the running secure OS sets C2PMSG_64 bit 31 when it is ready for its ring, takes the ring's address (C2PMSG_69/70)
  and size (C2PMSG_71) with the command KM ring << 16 in C2PMSG_64, and answers with bit 31 and a status
  (psp_v13_0_ring_create): the model refuses, with a nonzero status, any other ring type, a size that isn't whole
  64-byte frames, or a ring outside video memory; GFX_CTRL_CMD_ID_DESTROY_RINGS takes the ring down again
  (psp_v13_0_ring_destroy), its write pointer back to 0;
- commands come through that ring (amdgpu_psp.c psp_ring_cmd_submit): C2PMSG_67, the write pointer in dwords, moves
  past 64-byte frames that point at a 4 KiB-aligned 1024-byte command buffer and at a fence; the secure OS runs the
  command, writes its status into the buffer's response and the frame's value to the fence. The model takes
  LOAD_IP_FW of the SMU's firmware first, then SETUP_TMR (a PSP_TMR_ALIGNMENT-aligned region inside video memory,
  given by MC address and, with virt_phy_addr set, by its offset: amdgpu_psp.c psp_prep_tmr_cmd_buf,
  amdgpu_gmc_vram_pa on a GPU without XGMI), then LOAD_IP_FW of the rest (psp_hw_start: "For ASICs with DF Cstate
  management centralized to PMFW, TMR setup should be performed after PMFW loaded and before other non-psp firmware
  loaded", which psp_check_pmfw_centralized_cstate_management says of every dGPU from Navi12 on), and AUTOLOAD_RLC
  (psp_rlc_autoload_start, which psp_load_non_psp_fw sends right after RLC_G, "after psp received all the gfx
  firmware"); anything else is refused with a status.
A real PSP checks AMD's signature on each component; the model instead compares the bytes at that address with the
component of the firmware it was built with. A command it rejects (unknown, out of order, bytes that don't match, an
address outside video memory) leaves it busy, never ready again, which amdgpu sees as a timeout; `fault` says why."""
from __future__ import annotations
import struct

# MP0 register offsets, mp_13_0_0_offset.h
REG_C2PMSG_35, REG_C2PMSG_36, REG_C2PMSG_81 = 0x63, 0x64, 0x91
REG_C2PMSG_64, REG_C2PMSG_69, REG_C2PMSG_70, REG_C2PMSG_71 = 0x80, 0x85, 0x86, 0x87
READY = 1 << 31
# psp_v13_0_ring_create: the command in C2PMSG_64 is the ring type << 16 (amdgpu_psp.h PSP_RING_TYPE__KM = 2); the
# answer sets bit 31 with a status in bits 15:0, which amdgpu requires to be 0
KM_RING_TYPE, FRAME_BYTES = 2, 64  # psp_gfx_if.h: a struct psp_gfx_rb_frame is 64 bytes; rings hold whole frames
DESTROY_RINGS = 0x30000  # psp_gfx_if.h GFX_CTRL_CMD_ID_DESTROY_RINGS
BAD_RING = 0x1  # the model's status for a ring it refuses (amdgpu only tests for nonzero)
REG_C2PMSG_67 = 0x83  # the ring's write pointer in dwords (psp_v13_0_ring_set_wptr)
# psp_gfx_if.h: struct psp_gfx_cmd_resp (1024 bytes: cmd_id at 8, fields at 28, response status at 864), frames as
# cmd_buf_addr_lo/hi, cmd_buf_size, fence_addr_lo/hi, fence_value; command buffers "must be 4 KB aligned"
CMD_RESP_BYTES, AT_CMD_ID, AT_FIELDS, AT_STATUS = 1024, 8, 28, 864
SETUP_TMR, LOAD_IP_FW, AUTOLOAD_RLC = 0x5, 0x6, 0x21  # enum psp_gfx_cmd_id
GFX_FW_TYPE_SMU = 0x12  # enum psp_gfx_fw_type
TMR_ALIGNMENT = 0x100000  # amdgpu_psp.h PSP_TMR_ALIGNMENT
REFUSED = 0xFFFF0001  # the model's response status for a command it refuses (amdgpu treats any nonzero as failure)
# amdgpu_ucode.h enum psp_fw_type -> amdgpu_psp.h enum psp_bootloader_cmd, in psp_hw_start's order
KDB, SPL, SYS_DRV, SOC_DRV, INTF_DRV, DBG_DRV, RAS_DRV, SOS = 3, 5, 2, 7, 8, 9, 10, 1
COMMANDS = {0x80000: KDB, 0x10000000: SPL, 0x10000: SYS_DRV, 0xB0000: SOC_DRV, 0xD0000: INTF_DRV, 0xC0000: DBG_DRV, 0xE0000: RAS_DRV, 0x20000: SOS}
ORDER = list(COMMANDS.values())
SIGN_OF_LIFE = 0x1  # any nonzero value: amdgpu only tests C2PMSG_81 != 0

class PSPModel:
  """`firmware`: {fw_type: bytes} the model accepts; `vram_read(offset, n)`, `vram_write(offset, data)` and
  `fb_base` (video memory's MC address) reach the buffers the driver points it at."""
  def __init__(self, firmware: dict[int, bytes], vram_read, vram_write, vram_bytes: int, fb_base: int, answers: bool = True):
    self.firmware, self.vram_read, self.vram_write, self.vram_bytes, self.fb_base = firmware, vram_read, vram_write, vram_bytes, fb_base
    self.regs = {REG_C2PMSG_35: READY if answers else 0, REG_C2PMSG_36: 0, REG_C2PMSG_81: 0,
                 REG_C2PMSG_64: 0, REG_C2PMSG_67: 0, REG_C2PMSG_69: 0, REG_C2PMSG_70: 0, REG_C2PMSG_71: 0}
    self.ring: tuple[int, int] | None = None  # (video memory offset, bytes) of the ring the secure OS took
    self.rptr = 0                               # dwords of the ring the secure OS has read
    self.tmr: tuple[int, int] | None = None    # (video memory offset, bytes) of its trusted memory region
    self.ip_firmware: list[tuple[int, bytes]] = []  # (psp_gfx_fw_type, bytes) of each firmware load taken
    self.autoloads: list[int] = []  # how many firmware loads each AUTOLOAD_RLC came after
    self.loaded: list[int] = []
    self.fault: str | None = None

  def read(self, reg: int) -> int: return self.regs[reg]
  def write(self, reg: int, value: int) -> None:
    if reg == REG_C2PMSG_64: return self._ring_command(value)
    if reg == REG_C2PMSG_67 and self.ring is not None:
      self.regs[reg] = value
      while self.rptr != value:
        self._run_frame(self.ring[0] + self.rptr * 4)
        self.rptr = (self.rptr + FRAME_BYTES // 4) % (self.ring[1] // 4)
      return
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

  def _run_frame(self, at: int) -> None:
    cmd_lo, cmd_hi, cmd_size, fence_lo, fence_hi, fence_value = struct.unpack("<6I", self.vram_read(at, 24))
    cmd_mc = cmd_hi << 32 | cmd_lo
    if (fence := self._in_vram(fence_hi << 32 | fence_lo, 4)) is None: return self._refuse(f"frame at {at:#x}: fence outside video memory")
    if (cmd := self._in_vram(cmd_mc, CMD_RESP_BYTES)) is None or cmd % 4096 or cmd_size != CMD_RESP_BYTES:
      return self._refuse(f"frame at {at:#x}: command buffer at offset {cmd_mc - self.fb_base:#x} of {cmd_size} bytes (a 4 KiB-aligned {CMD_RESP_BYTES}-byte buffer in video memory)")
    status = self._command(self.vram_read(cmd, CMD_RESP_BYTES))
    self.vram_write(cmd + AT_STATUS, struct.pack("<I", status))
    self.vram_write(fence, struct.pack("<I", fence_value))

  def _in_vram(self, mc: int, size: int) -> int | None:
    """The video memory offset of `size` bytes at memory-controller address `mc`; None where they aren't all in it."""
    offset = mc - self.fb_base
    return offset if 0 <= offset <= self.vram_bytes - size else None

  def _refuse(self, problem: str) -> None: self.fault = self.fault or problem  # nothing is written back: the fence never comes

  def _command(self, buf: bytes) -> int:
    """Run one psp_gfx_cmd_resp; its response status (0: done)."""
    (cmd_id,) = struct.unpack_from("<I", buf, AT_CMD_ID)
    if cmd_id == SETUP_TMR:
      lo, hi, size, flags, phys_lo, phys_hi = struct.unpack_from("<6I", buf, AT_FIELDS)
      offset = self._in_vram(hi << 32 | lo, size)
      if all(t != GFX_FW_TYPE_SMU for t, _ in self.ip_firmware):
        self.fault = "SETUP_TMR before the SMU's firmware: DF C-state management is the PMFW's, so the TMR comes after it"
        return REFUSED
      if offset is None or offset % TMR_ALIGNMENT or not size or (phys_hi << 32 | phys_lo) != offset or not flags & 2:
        self.fault = f"SETUP_TMR at MC {hi << 32 | lo:#x} ({size} bytes, offset {phys_hi << 32 | phys_lo:#x}, flags {flags:#x}) refused"
        return REFUSED
      self.tmr = (offset, size)
      return 0
    if cmd_id == LOAD_IP_FW:
      lo, hi, size, fw_type = struct.unpack_from("<4I", buf, AT_FIELDS)
      offset = self._in_vram(hi << 32 | lo, size)
      if (self.tmr is None and fw_type != GFX_FW_TYPE_SMU) or offset is None:
        self.fault = f"LOAD_IP_FW of type {fw_type} refused: {'no trusted memory region yet' if self.tmr is None else 'firmware outside video memory'}"
        return REFUSED
      self.ip_firmware.append((fw_type, self.vram_read(offset, size)))
      return 0
    if cmd_id == AUTOLOAD_RLC:
      self.autoloads.append(len(self.ip_firmware))
      return 0
    self.fault = f"unknown PSP command {cmd_id:#x}"
    return REFUSED

  def _ring_command(self, value: int) -> None:
    if value == DESTROY_RINGS and self.ring is not None:  # psp_v13_0_ring_destroy: the rings go, the answer is bit 31
      self.ring, self.rptr, self.regs[REG_C2PMSG_67], self.regs[REG_C2PMSG_64] = None, 0, 0, READY
      return
    if not self.regs[REG_C2PMSG_81] or not self.regs[REG_C2PMSG_64] & READY:
      self.fault = self.fault or f"ring command {value:#x} before the secure OS was ready for it"
      self.regs[REG_C2PMSG_64] = value
      return
    mc, size = self.regs[REG_C2PMSG_70] << 32 | self.regs[REG_C2PMSG_69], self.regs[REG_C2PMSG_71]
    offset = self._in_vram(mc, size)
    if value != KM_RING_TYPE << 16: problem = f"ring command {value:#x}: only the kernel-mode ring ({KM_RING_TYPE << 16:#x}) is created here"
    elif size == 0 or size % FRAME_BYTES: problem = f"ring size {size} isn't whole {FRAME_BYTES}-byte frames"
    elif offset is None: problem = f"ring at {mc:#x} is outside video memory (which starts at {self.fb_base:#x})"
    else: problem = None
    self.fault = problem or self.fault
    if problem is None: self.ring = (offset, size)
    self.regs[REG_C2PMSG_64] = READY | (BAD_RING if problem else 0)

  def _rejects(self, command: int) -> str | None:
    """Why the bootloader refuses `command` with the address in C2PMSG_36 (None: it takes it)."""
    if (kind := COMMANDS.get(command)) is None: return f"unknown bootloader command {command:#x}"
    if self.loaded and ORDER.index(kind) <= ORDER.index(self.loaded[-1]): return f"component {kind} loaded after component {self.loaded[-1]}: out of order"
    if kind == SOS and SYS_DRV not in self.loaded: return "the secure OS was sent before the system driver"
    mc = self.regs[REG_C2PMSG_36] << 20
    if (want := self.firmware.get(kind)) is None: return f"no firmware component {kind} to check against"
    if (offset := self._in_vram(mc, len(want))) is None: return f"staging address {mc:#x} is outside video memory (which starts at {self.fb_base:#x})"
    if self.vram_read(offset, len(want)) != want: return f"the bytes at {mc:#x} aren't component {kind}"
    return None
