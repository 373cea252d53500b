"""Starting the PSP's secure OS through its bootloader: the first step of bringing an AMD GPU up without amdgpu.ko
(psp_v13_0.c psp_v13_0_bootloader_load_*, amdgpu_psp.c psp_hw_start). Each component of psp_<ip>_sos.bin, in
psp_hw_start's order, is copied into a 1 MiB-aligned staging buffer in video memory, and its address (in the GPU's
memory-controller space, shifted right by 20) and the bootloader command are written to MP0's C2PMSG registers; the
secure OS, loaded last, signs life in C2PMSG_81. A GPU whose secure OS already runs is left as it is. Then the
kernel-mode ring the secure OS takes commands on is created through C2PMSG_64..71 (psp_v13_0_ring_create)."""
from __future__ import annotations
import time
from drivers.amd.firmware import COMPONENT_NAMES, DBG_DRV, INTF_DRV, KDB, RAS_DRV, SOC_DRV, SOS, SPL, SYS_DRV, FirmwareError

# mp_13_0_0_offset.h: from MP0's register base
C2PMSG_35, C2PMSG_36, C2PMSG_81 = 0x63, 0x64, 0x91
C2PMSG_64, C2PMSG_69, C2PMSG_70, C2PMSG_71 = 0x80, 0x85, 0x86, 0x87  # the secure OS's mailbox: command, ring address lo/hi, ring size
FB_LOCATION_BASE = 0x8EC  # mmhub_3_0_0_offset.h regMMMC_VM_FB_LOCATION_BASE, from MMHUB's base: FB_BASE (bits 23:0) in 16 MiB units
BOOTLOADER_READY = 1 << 31  # psp_v13_0_wait_for_bootloader: C2PMSG_35 bit 31
# amdgpu_psp.c psp_hw_start's order, with amdgpu_psp.h's enum psp_bootloader_cmd for each
LOAD_ORDER = ((KDB, 0x80000), (SPL, 0x10000000), (SYS_DRV, 0x10000), (SOC_DRV, 0xB0000), (INTF_DRV, 0xD0000),
              (DBG_DRV, 0xC0000), (RAS_DRV, 0xE0000), (SOS, 0x20000))
STAGING_BYTES = 1 << 20      # PSP_1_MEG: the staging buffer's size and alignment
RESPONSE, STATUS_MASK = 1 << 31, 0xFFFF  # psp_v13_0_ring_create: the secure OS answers in C2PMSG_64 bit 31, status in bits 15:0
KM_RING, RING_BYTES, FRAME_BYTES = 2, 0x1000, 64  # amdgpu_psp.h PSP_RING_TYPE__KM; psp_v13_0_ring_init's 4 KiB; psp_gfx_rb_frame
WAIT_S = 1.0                 # psp_v13_0_wait_for_bootloader: 10 tries of psp_wait_for's 100 ms
HANDSHAKE_DELAY_S = 0.02     # psp_v13_0.c: "there might be handshake issue with hardware which needs delay"

class PSPError(TimeoutError):
  """The PSP didn't answer: the step, the register and the value it was left at."""

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

def _wait(gpu, reg: int, reg_name: str, done, what: str, wait_s: float) -> None:
  deadline = time.perf_counter() + wait_s
  while not done(value := gpu.reg_read(reg)):
    if time.perf_counter() > deadline: raise PSPError(f"timed out after {wait_s} s waiting for {what}: MP0_SMN_{reg_name} reads {value:#010x}")
