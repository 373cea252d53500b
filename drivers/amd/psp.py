"""Starting the PSP's secure OS through its bootloader: the first step of bringing an AMD GPU up without amdgpu.ko
(psp_v13_0.c psp_v13_0_bootloader_load_*, amdgpu_psp.c psp_hw_start). Each component of psp_<ip>_sos.bin, in
psp_hw_start's order, is copied into a 1 MiB-aligned staging buffer in video memory, and its address (in the GPU's
memory-controller space, shifted right by 20) and the bootloader command are written to MP0's C2PMSG registers; the
secure OS, loaded last, signs life in C2PMSG_81. A GPU whose secure OS already runs is left as it is. Then the
kernel-mode ring the secure OS takes commands on is created through C2PMSG_64..71 (psp_v13_0_ring_create), and
commands go through it: trusted memory (SETUP_TMR) and other IPs' firmware (LOAD_IP_FW)."""
from __future__ import annotations
import struct, time
from drivers.amd import firmware
from drivers.amd.pci_gpu import wait_for
from drivers.system import real_system
from drivers.amd.firmware import COMPONENT_NAMES, DBG_DRV, INTF_DRV, KDB, RAS_DRV, SOC_DRV, SOS, SPL, SYS_DRV, FirmwareError

# mp_13_0_0_offset.h: from MP0's register base
C2PMSG_35, C2PMSG_36, C2PMSG_81 = 0x63, 0x64, 0x91
C2PMSG_64, C2PMSG_69, C2PMSG_70, C2PMSG_71 = 0x80, 0x85, 0x86, 0x87  # the secure OS's mailbox: command, ring address lo/hi, ring size
C2PMSG_67 = 0x83  # the kernel-mode ring's write pointer, in dwords (psp_v13_0_ring_set_wptr)
FB_LOCATION_BASE = 0x8EC  # mmhub_3_0_0_offset.h regMMMC_VM_FB_LOCATION_BASE, from MMHUB's base: FB_BASE (bits 23:0) in 16 MiB units
BOOTLOADER_READY = 1 << 31  # psp_v13_0_wait_for_bootloader: C2PMSG_35 bit 31
# amdgpu_psp.c psp_hw_start's order, with amdgpu_psp.h's enum psp_bootloader_cmd for each
LOAD_ORDER = ((KDB, 0x80000), (SPL, 0x10000000), (SYS_DRV, 0x10000), (SOC_DRV, 0xB0000), (INTF_DRV, 0xD0000),
              (DBG_DRV, 0xC0000), (RAS_DRV, 0xE0000), (SOS, 0x20000))
STAGING_BYTES = 1 << 20      # PSP_1_MEG: the staging buffer's size and alignment
RESPONSE, STATUS_MASK = 1 << 31, 0xFFFF  # psp_v13_0_ring_create: the secure OS answers in C2PMSG_64 bit 31, status in bits 15:0
DESTROY_RINGS = 0x30000  # psp_gfx_if.h GFX_CTRL_CMD_ID_DESTROY_RINGS
KM_RING, RING_BYTES, FRAME_BYTES = 2, 0x1000, 64  # amdgpu_psp.h PSP_RING_TYPE__KM; psp_v13_0_ring_init's 4 KiB; psp_gfx_rb_frame
# psp_gfx_if.h: struct psp_gfx_cmd_resp is 1024 bytes (cmd_id at 8, the command's fields at 28, struct psp_gfx_resp
# with its status at 864); struct psp_gfx_rb_frame: cmd_buf_addr_lo/hi, cmd_buf_size, fence_addr_lo/hi, fence_value
CMD_BYTES, CMD_ID_AT, CMD_ARGS_AT, RESP_STATUS_AT = 1024, 8, 28, 864
FRAME = "<IIIIII"
GFX_CMD_ID_SETUP_TMR, GFX_CMD_ID_LOAD_IP_FW, GFX_CMD_ID_AUTOLOAD_RLC = 0x5, 0x6, 0x21  # psp_gfx_if.h enum psp_gfx_cmd_id
GFX_FW_TYPE_SMU, GFX_FW_TYPE_SDMA_UCODE_TH0, GFX_FW_TYPE_SDMA_UCODE_TH1 = 18, 71, 72  # psp_gfx_if.h enum psp_gfx_fw_type
TMR_VIRT_PHY_ADDR = 1 << 1  # psp_gfx_cmd_setup_tmr.bitfield.virt_phy_addr: the buffer address is a GPU (MC) address
WAIT_S = 1.0                 # psp_v13_0_wait_for_bootloader: 10 tries of psp_wait_for's 100 ms
HANDSHAKE_DELAY_S = 0.02     # psp_v13_0.c: "there might be handshake issue with hardware which needs delay"

class PSPError(RuntimeError):
  """The PSP didn't answer (the step, and the register or fence it was left at) or refused (its status)."""

def fb_base(gpu, mmhub: int) -> int:
  """Where video memory starts in the GPU's memory-controller address space (mmhub_v3_0_get_fb_location)."""
  return (gpu.reg_read(mmhub + FB_LOCATION_BASE) & 0xFFFFFF) << 24

def secure_os_running(gpu, mp0: int) -> bool: return gpu.reg_read(mp0 + C2PMSG_81) != 0  # psp_v13_0_is_sos_alive

def start_secure_os(gpu, mp0: int, vram_start: int, components: dict[int, bytes], staging: int, wait_s: float = WAIT_S) -> list[str]:
  """Load the bootloader's components (psp_components of the SOS file) through the staging buffer at video memory
  offset `staging`; returns their names in load order ([] when the secure OS was already running)."""
  if secure_os_running(gpu, mp0): return []
  if staging % STAGING_BYTES: raise ValueError(f"the PSP staging buffer must start at a multiple of 1 MiB, not at {staging:#x}")
  if missing := [COMPONENT_NAMES[t] for t in (SYS_DRV, SOS) if t not in components]: raise FirmwareError(f"the SOS file has no {' or '.join(missing)} component")
  loaded = []
  for fw_type, command in LOAD_ORDER:
    if (blob := components.get(fw_type)) is None: continue
    name = COMPONENT_NAMES[fw_type]
    if len(blob) > STAGING_BYTES: raise FirmwareError(f"the {name} component is {len(blob)} bytes, more than the 1 MiB the bootloader reads")
    _wait(gpu, mp0 + C2PMSG_35, "C2PMSG_35", lambda v: v & BOOTLOADER_READY, f"the PSP bootloader to be ready for {name}", wait_s)
    gpu.vram_write(staging, blob)
    gpu.reg_write(mp0 + C2PMSG_36, (vram_start + staging) >> 20)
    gpu.reg_write(mp0 + C2PMSG_35, command)
    time.sleep(HANDSHAKE_DELAY_S)
    if fw_type == SOS: _wait(gpu, mp0 + C2PMSG_81, "C2PMSG_81", lambda v: v != 0, "the secure OS's sign of life after loading SOS", wait_s)
    else: _wait(gpu, mp0 + C2PMSG_35, "C2PMSG_35", lambda v: v & BOOTLOADER_READY, f"the PSP bootloader to take {name}", wait_s)
    loaded.append(name)
  return loaded

def create_ring(gpu, mp0: int, vram_start: int, ring: int, wait_s: float = WAIT_S) -> None:
  """Hand the secure OS its kernel-mode ring (RING_BYTES of video memory at offset `ring`); PSPError names a status
  the secure OS refused it with."""
  _wait(gpu, mp0 + C2PMSG_64, "C2PMSG_64", lambda v: v & RESPONSE, "the secure OS to be ready for ring creation", wait_s)
  address = vram_start + ring
  gpu.reg_write(mp0 + C2PMSG_69, address & 0xFFFFFFFF)
  gpu.reg_write(mp0 + C2PMSG_70, address >> 32)
  gpu.reg_write(mp0 + C2PMSG_71, RING_BYTES)
  gpu.reg_write(mp0 + C2PMSG_64, KM_RING << 16)
  time.sleep(HANDSHAKE_DELAY_S)
  _wait(gpu, mp0 + C2PMSG_64, "C2PMSG_64", lambda v: v & RESPONSE, "the secure OS to create its ring", wait_s)
  if status := gpu.reg_read(mp0 + C2PMSG_64) & STATUS_MASK: raise PSPError(f"the secure OS refused the ring at {address:#x}: status {status:#06x} in MP0_SMN_C2PMSG_64")

def destroy_ring(gpu, mp0: int, wait_s: float = WAIT_S) -> None:
  """Take the secure OS's rings down (psp_v13_0_ring_destroy), so the next driver creates its own."""
  gpu.reg_write(mp0 + C2PMSG_64, DESTROY_RINGS)
  time.sleep(HANDSHAKE_DELAY_S)
  _wait(gpu, mp0 + C2PMSG_64, "C2PMSG_64", lambda v: v & RESPONSE, "the secure OS to destroy its rings", wait_s)

class CommandRing:
  """Commands to the running secure OS through its kernel-mode ring (amdgpu_psp.c psp_cmd_submit_buf and
  psp_ring_cmd_submit): each command is written to a 4 KiB-aligned command buffer in video memory, a ring frame
  points at it and at a fence, C2PMSG_67 moves past the frame, and the secure OS writes the frame's fence value when
  done, the command's status in its response. Offsets are into video memory; `vram_start` is its MC address."""
  def __init__(self, gpu, mp0: int, vram_start: int, ring: int, cmd: int, fence: int, wait_s: float = WAIT_S):
    if cmd % 4096: raise ValueError(f"a PSP command buffer must start at a multiple of 4 KiB, not at {cmd:#x}")
    self.gpu, self.mp0, self.vram_start, self.ring, self.cmd, self.fence, self.wait_s = gpu, mp0, vram_start, ring, cmd, fence, wait_s
    self.fence_value = 0

  def submit(self, cmd_id: int, args: bytes, what: str) -> None:
    """Run one command; PSPError names `what` when the secure OS doesn't finish it or answers with a status."""
    # as amdgpu's psp_cmd_submit_buf: a zeroed buffer with cmd_id and the command's fields (buf_size, buf_version stay 0)
    self.gpu.vram_write(self.cmd, bytes(CMD_ID_AT) + struct.pack("<I", cmd_id).ljust(CMD_ARGS_AT - CMD_ID_AT, b"\0") + args.ljust(CMD_BYTES - CMD_ARGS_AT, b"\0"))
    self.fence_value += 1
    wptr = self.gpu.reg_read(self.mp0 + C2PMSG_67)
    frame_at = self.ring + (wptr * 4) % RING_BYTES
    cmd_mc, fence_mc = self.vram_start + self.cmd, self.vram_start + self.fence
    self.gpu.vram_write(frame_at, struct.pack(FRAME, cmd_mc & 0xFFFFFFFF, cmd_mc >> 32, CMD_BYTES, fence_mc & 0xFFFFFFFF, fence_mc >> 32, self.fence_value).ljust(FRAME_BYTES, b"\0"))
    self.gpu.reg_write(self.mp0 + C2PMSG_67, (wptr + FRAME_BYTES // 4) % (RING_BYTES // 4))
    finished, fence = wait_for(lambda: struct.unpack("<I", self.gpu.vram_read(self.fence, 4))[0], lambda v: v == self.fence_value, self.wait_s)
    if not finished: raise PSPError(f"timed out after {self.wait_s} s waiting for the secure OS to {what}: fence {fence}, want {self.fence_value}")
    if status := struct.unpack("<I", self.gpu.vram_read(self.cmd + RESP_STATUS_AT, 4))[0]: raise PSPError(f"the secure OS refused to {what}: status {status:#x}")

  def setup_tmr(self, tmr: int, size: int) -> None:
    """Give the secure OS its trusted memory region (amdgpu_psp.c psp_prep_tmr_cmd_buf): `size` bytes of video memory
    at offset `tmr`, by MC address and by offset into video memory."""
    mc = self.vram_start + tmr
    self.submit(GFX_CMD_ID_SETUP_TMR, struct.pack("<IIIIII", mc & 0xFFFFFFFF, mc >> 32, size, TMR_VIRT_PHY_ADDR, tmr & 0xFFFFFFFF, tmr >> 32), "set up its trusted memory")

  def load_ip_firmware(self, fw_type: int, staging: int, blob: bytes) -> None:
    """Load one IP's firmware (psp_gfx_if.h psp_gfx_fw_type `fw_type`) from the staging buffer at offset `staging`."""
    self.gpu.vram_write(staging, blob)
    mc = self.vram_start + staging
    self.submit(GFX_CMD_ID_LOAD_IP_FW, struct.pack("<IIII", mc & 0xFFFFFFFF, mc >> 32, len(blob), fw_type), f"load firmware of type {fw_type}")

  def autoload_rlc(self) -> None:
    """Start the RLC once GC's firmware is loaded (amdgpu_psp.c psp_rlc_autoload_start: a command with no fields)."""
    self.submit(GFX_CMD_ID_AUTOLOAD_RLC, b"", "start the RLC's autoload")

def smu_and_sdma_firmware(mp1_version: tuple[int, int, int], sdma_version: tuple[int, int, int], system=real_system) -> list[tuple[int, bytes]]:
  """(psp_gfx_fw_type, image) of the SMU's and SDMA's firmware from AMD_FIRMWARE_DIR, in the order amdgpu loads them
  (psp_load_smu_fw first, then psp_load_non_psp_fw by AMDGPU_UCODE_ID: SDMA's context thread, then its control one)."""
  smu_name, sdma_name = firmware.file_name("smu", mp1_version), firmware.file_name("sdma", sdma_version)
  context, control = firmware.sdma_threads(firmware.read(sdma_name, system), sdma_name)
  return [(GFX_FW_TYPE_SMU, firmware.ucode(firmware.read(smu_name, system), smu_name)), (GFX_FW_TYPE_SDMA_UCODE_TH0, context), (GFX_FW_TYPE_SDMA_UCODE_TH1, control)]

def _wait(gpu, reg: int, reg_name: str, done, what: str, wait_s: float) -> None:
  finished, value = wait_for(lambda: gpu.reg_read(reg), done, wait_s)
  if not finished: raise PSPError(f"timed out after {wait_s} s waiting for {what}: MP0_SMN_{reg_name} reads {value:#010x}")
