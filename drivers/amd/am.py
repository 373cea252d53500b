"""AM: an RDNA3 GPU brought up from userspace with no kernel driver (a PCI function with nothing bound, reached through
sysfs; DEV=PCI+AMD, or DEV=MOCKPCI+AMD against drivers/mock/amd/pci_gpu.py). In amdgpu's order: the IP discovery table;
the PSP's secure OS and its ring, the SMU's firmware, the trusted memory, then SDMA's and GC's firmware (the RS64 PFP,
ME and MEC, the IMU, the RLC) through it and the RLC's autoload (amdgpu_psp.c psp_hw_start, psp_load_non_psp_fw); the
HDP flush register moved into BAR 5 (nbio_v4_3.c nbio_v4_3_remap_hdp_registers); one VMID's page tables (gmc.py); the
interrupt ring, which tg polls for the GPU's faults (ih.py); the MEC started; a compute queue and an SDMA queue mapped
(am_queues.py). Everything lives in video memory: what the CPU touches (rings, signals, kernel arguments, staging
buffers, page tables) in the part BAR 0 shows it, after which an HDP flush makes its writes visible to the GPU; `close`
leaves the GPU for the next process. Behind the USB bridge the CPU's part of video memory is a mirror
(drivers/usb/mirrored_bar.py) that the HDP flush first brings up to date, and system pages map the bridge's SRAM. Not
done yet (issue 17): MES, VMID 0's GART, a GPU reset."""
from __future__ import annotations
import numpy as np
from drivers import system as sysmod
from drivers.amd import am_queues, discovery, firmware, gmc, ih, psp, smu
from drivers.amd.discovery import IP
from drivers.amd.pci_gpu import PCIGPU, VRAM_BAR, wait_for
from drivers.gpu_memory import AddressSpace
from drivers.pci import Window, bar_size

MIB = 1 << 20
VMID = 1                  # amdgpu gives graphics and compute VMIDs 1..7 (gmc_v11_0_sw_init)
VA_BASE = 1 << 44         # GPU virtual address of video memory offset 0 in that VMID
SYSTEM_VA = 1 << 45       # where system memory (bus addresses) is mapped in it, one range after another
PSP_STAGING, PSP_RING, PSP_CMD, PSP_FENCE = 0, MIB, MIB + 0x1000, MIB + 0x2000  # the PSP's buffers, at the start of video memory
FIRST_FREE = 2 * MIB
TMR_BYTES = 4 * MIB       # the secure OS's trusted memory, below the discovery table at the top
HDP_REMAP, HDP_REMAP_BYTE = 0x12D, 0x7F000  # nbio_4_3_0 BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL (BASE_IDX 2); MMIO_REG_HOLE_OFFSET
# psp_gfx_if.h enum psp_gfx_fw_type: each RS64 engine's ucode, and its first pipe's stack (the others' follow)
RS64_ENGINES = (("pfp", 0x57, 0x5A, 2), ("me", 0x58, 0x5C, 2), ("mec", 0x59, 0x5E, 4))  # (file suffix, ucode, stack, pipes)
RLC_BOOTLOAD_STATUS, BOOTLOAD_COMPLETE, CP_STAT = (1, 0x4E82), 1 << 31, (0, 0xF40)  # gc_11_0_0_offset.h, _sh_mask.h
RLC_WAIT_S = 1.0  # gfx_v11_0_wait_for_rlc_autoload_complete gives it adev->usec_timeout (100 ms) on a local bus
# What kfd_topology.c would publish for each GC version (the AM driver has no amdkfd to ask)
GC_PROPERTIES = {(11, 0, 0): dict(gfx_target_version=110000, simd_count=192, simd_per_cu=2, array_count=12, simd_arrays_per_engine=2,
                                  max_waves_per_simd=16, lds_size_in_kb=64, num_xcc=1)}

class AMError(RuntimeError):
  """A bring-up step failed: which one, and what the GPU said."""

class AM:
  """One GPU brought up: its registers, video memory (the CPU-visible part mapped, or `window` where it can't be:
  behind the USB bridge), the VMID's page tables."""
  def __init__(self, gpu: PCIGPU, system, window: Window | None = None):
    self.gpu, self.system = gpu, system
    self.ips: dict[str, IP] = {ip.name: ip for ip in gpu.discovery()}
    if (version := self.ips["GC"].version) not in GC_PROPERTIES: raise AMError(f"GC {'.'.join(map(str, version))}: the AM driver knows {', '.join('.'.join(map(str, v)) for v in GC_PROPERTIES)}")
    self.properties = GC_PROPERTIES[version]
    self.vram_bytes, self.visible = gpu.vram_bytes, bar_size(gpu.pci, VRAM_BAR)[0]
    self.vram_bar = window or gpu.pci.bar(VRAM_BAR)
    self.vram_cpu = sysmod.address_of(self.vram_bar.view)
    self.doorbell_bar = gpu.pci.bar(2)
    self.cpu_written: dict[int, int] = {}  # offset -> size of what the CPU writes in video memory (for the window's sync)
    tmr = (self.vram_bytes - discovery.DISCOVERY_TMR_OFFSET - TMR_BYTES) & ~(MIB - 1)
    self.visible_space, self.hidden_space = AddressSpace(FIRST_FREE, self.visible), AddressSpace(self.visible, tmr)
    self.system_va = SYSTEM_VA
    self.fb_base = psp.fb_base(gpu, self.base("MMHUB"))
    self.load_firmware(tmr)
    gpu.reg_write(self.base("NBIF", 2) + HDP_REMAP, HDP_REMAP_BYTE)
    self.page_tables = gmc.PageTables(self.alloc_table, self.table_view)
    gmc.enable_vmid(self.gc_write0, VMID, self.page_tables.root)
    self.page_tables_changed()
    self.ih = self.start_ih()
    am_queues.start_mec(self.gc_write, self.mec_start)

  # ---- registers
  def base(self, ip: str, segment: int = 0) -> int: return self.ips[ip].bases[segment]
  def gc_write(self, reg: tuple[int, int], value: int) -> None: self.gpu.reg_write(self.base("GC", reg[0]) + reg[1], value)
  def gc_read(self, reg: tuple[int, int]) -> int: return self.gpu.reg_read(self.base("GC", reg[0]) + reg[1])
  def gc_write0(self, offset: int, value: int) -> None: self.gpu.reg_write(self.base("GC") + offset, value)
  def gc_read0(self, offset: int) -> int: return self.gpu.reg_read(self.base("GC") + offset)
  def ih_write(self, offset: int, value: int) -> None: self.gpu.reg_write(self.base("OSSSYS") + offset, value)
  def ih_read(self, offset: int) -> int: return self.gpu.reg_read(self.base("OSSSYS") + offset)
  def flush_hdp(self) -> None:
    """CPU writes to video memory reach it (amdgpu_hdp.c amdgpu_hdp_generic_flush: write 0, read back)."""
    self.vram_bar.sync(self.cpu_written)
    self.gpu.reg_write(HDP_REMAP_BYTE // 4, 0)
    self.gpu.reg_read(HDP_REMAP_BYTE // 4)

  def page_tables_changed(self) -> None:
    """The CPU's page-table writes reach video memory (HDP flush), then the VMID's TLB drops what it cached."""
    self.flush_hdp()
    gmc.flush_tlb(self.gc_read0, self.gc_write0, VMID)

  # ---- bring-up
  def start_ih(self) -> ih.IHRing:
    """The interrupt ring and its write pointer's copy in CPU-visible video memory, which the IH reaches through the
    frame buffer aperture (MC address fb_base + offset)."""
    ring_at, _ = self.alloc(ih.RING_BYTES, True)
    wptr_at, _ = self.alloc(gmc.PAGE, True)
    view = lambda at, n: np.frombuffer(self.vram_bar.view, np.uint32, n, at)
    return ih.IHRing(self.ih_read, self.ih_write, self.fb_base + ring_at, view(ring_at, ih.RING_BYTES // 4), self.fb_base + wptr_at, view(wptr_at, 1),
                     self.vram_bar.fetch)

  def load_firmware(self, tmr: int) -> None:
    mp0, mp1 = self.base("MP0"), self.base("MP1")
    sos = firmware.sos_file_name(self.ips["MP0"].version)
    psp.start_secure_os(self.gpu, mp0, self.fb_base, firmware.psp_components(firmware.read(sos, self.system), sos), PSP_STAGING)
    psp.create_ring(self.gpu, mp0, self.fb_base, PSP_RING)
    ring = psp.CommandRing(self.gpu, mp0, self.fb_base, PSP_RING, PSP_CMD, PSP_FENCE)
    (smu_type, smu_image), *images = psp.smu_and_sdma_firmware(self.ips["MP1"].version, self.ips["SDMA0"].version, self.system)
    ring.load_ip_firmware(smu_type, PSP_STAGING, smu_image)  # the SMU's first, the TMR after it (psp_hw_start: pmfw_centralized_cstate_management)
    ring.setup_tmr(tmr, TMR_BYTES)
    for fw_type, image in images + self.gfx_firmware(): ring.load_ip_firmware(fw_type, PSP_STAGING, image)
    ring.autoload_rlc()  # right after RLC_G, as psp_load_non_psp_fw does
    status = lambda: (self.gc_read(RLC_BOOTLOAD_STATUS), self.gc_read(CP_STAT))
    booted, (bootload, cp_stat) = wait_for(status, lambda v: v[0] & BOOTLOAD_COMPLETE and not v[1], RLC_WAIT_S)
    if not booted: raise AMError(f"the RLC didn't boot within {RLC_WAIT_S} s of AUTOLOAD_RLC: RLC_RLCS_BOOTLOAD_STATUS {bootload:#010x}, CP_STAT {cp_stat:#x}")
    self.smu_version = smu.version(self.gpu, mp1)

  def gfx_firmware(self) -> list[tuple[int, bytes]]:
    """GC's firmware in the order psp_load_non_psp_fw loads it (AMDGPU_UCODE_ID's): the RS64 PFP's, ME's and MEC's
    ucodes, their pipes' stacks, the IMU's two images, the RLC's pieces with RLC_G last (gfx_v11_0_init_microcode,
    imu_v11_0_init_microcode; the MEC's program counter start is kept for start_mec)."""
    gc = self.ips["GC"].version
    def read(suffix: str) -> tuple[bytes, str]:
      name = firmware.file_name("gc", gc, suffix)
      return firmware.read(name, self.system), name
    rs64 = {suffix: firmware.rs64_images(*read(f"_{suffix}")) for suffix, *_ in RS64_ENGINES}
    self.mec_start = rs64["mec"][2]
    images = [(ucode_type, rs64[suffix][0]) for suffix, ucode_type, _, _ in RS64_ENGINES]
    images += [(stack_type + pipe, rs64[suffix][1]) for suffix, _, stack_type, pipes in RS64_ENGINES for pipe in range(pipes)]
    images += zip((firmware.IMU_I, firmware.IMU_D), firmware.imu_images(*read("_imu")))
    revision = self.gpu.pci.config_read(8, 1)  # gfx_v11_0_init_microcode: a revision 0xCE Navi31 takes gc_11_0_0_rlc_1.bin
    return images + firmware.rlc_images(*read("_rlc_1" if gc == (11, 0, 0) and revision == 0xCE else "_rlc"))

  def close(self) -> None:
    """Leave the GPU for the next driver, in amdgpu's hw_fini order: the queues off their engines, the PSP's ring gone
    (the secure OS and the firmware it loaded stay)."""
    am_queues.unmap_compute_queue(self.gc_write)
    am_queues.stop_sdma_queue(self.gc_write)
    psp.destroy_ring(self.gpu, self.base("MP0"))

  # ---- video memory
  def alloc(self, size: int, cpu_access: bool) -> tuple[int, int | None]:
    """(video memory offset, CPU address or None) of `size` bytes (a multiple of 4 KiB), mapped at VA_BASE + offset."""
    try: at = (self.visible_space if cpu_access else self.hidden_space).alloc(size, gmc.PAGE)
    except MemoryError:
      if cpu_access: raise MemoryError(f"AM: the {self.visible >> 20} MiB of video memory the CPU sees are used up ({size} bytes wanted)") from None
      return self.alloc(size, True)
    self.page_tables.map(VA_BASE + at, at, size)
    if at < self.visible: self.cpu_written[at] = size
    self.page_tables_changed()
    return at, self.vram_cpu + at if at < self.visible else None

  def free(self, at: int, size: int) -> None:
    self.page_tables.unmap(VA_BASE + at, size)
    self.page_tables_changed()
    self.cpu_written.pop(at, None)
    (self.visible_space if at < self.visible else self.hidden_space).free(at, size)

  def map_system(self, bus: int, size: int) -> int:
    """System memory at bus address `bus` (`size` bytes, whole pages) mapped uncached: its GPU virtual address."""
    va, self.system_va = self.system_va, self.system_va + size
    self.page_tables.map(va, bus, size, system=True)
    self.page_tables_changed()
    return va

  def alloc_table(self) -> int:
    at = self.visible_space.alloc(gmc.PAGE, gmc.PAGE)
    self.table_view(at)[:] = 0
    self.cpu_written[at] = gmc.PAGE
    return at
  def table_view(self, at: int) -> np.ndarray: return np.frombuffer(self.vram_bar.view, np.uint64, gmc.ENTRIES, at)
