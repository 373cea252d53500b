"""An AMD GPU as a PCI function with no kernel driver bound, as tg's AM driver first meets it: BAR0 the video memory
aperture, BAR2 the doorbells, BAR5 the registers (amdgpu_device.c amdgpu_device_init: rmmio is BAR 5 on SOC15
parts). Before any firmware is loaded a driver can read the video memory size (RCC_CONFIG_MEMSIZE, in MiB), see that
the boot firmware finished (MP0_SMN_C2PMSG_33 bit 31) and read video memory through MM_INDEX/MM_INDEX_HI/MM_DATA,
where the IP discovery binary lies 64 KiB below the top (amdgpu_discovery.c amdgpu_discovery_read_binary_from_mem;
the layouts are include/discovery.h's)."""
from __future__ import annotations
import struct, threading
from drivers.mock.pci_function import BAR0, COMMAND, COMMAND_MEMORY, Bar, PCIFunction, reserve
from drivers.mock.amd import firmware_files
from drivers.mock.amd.gfxhub import GFXHub
from drivers.mock.amd.gpu import ARCHS, GPU, GPUFault, Queue, Region
from drivers.mock.amd.ih import IHModel
from drivers.mock.amd.mec import MEC
from drivers.mock.amd.psp import PSPModel
from drivers.mock.amd.rlc import RLCModel
from drivers.mock.amd.sdma_queues import SDMAQueues
from drivers.mock.amd.smu import SMUModel

# register dword offsets in BAR5 (amdgpu_discovery.c)
MM_INDEX, MM_DATA, MM_INDEX_HI, RCC_CONFIG_MEMSIZE, MP0_SMN_C2PMSG_33 = 0x0, 0x1, 0x6, 0xDE3, 0x16061
FB_LOCATION_BASE = 0x8EC  # mmhub_3_0_0_offset.h regMMMC_VM_FB_LOCATION_BASE (from MMHUB's base): FB_BASE, 16 MiB units
FB_BASE = 0x80_0000_0000  # where the model's video memory starts in memory-controller space (a driver must read it)
GFX_FW_TYPE_SMU = 18  # psp_gfx_if.h enum psp_gfx_fw_type: the SMU runs once the PSP has loaded this image
BOOT_DONE = 1 << 31
# nbio_4_3_0_offset.h (BASE_IDX 2): where amdgpu moves the HDP flush register in BAR5 (nbio_v4_3_remap_hdp_registers);
# a write there flushes CPU writes to video memory (amdgpu_hdp.c amdgpu_hdp_generic_flush)
REMAP_HDP_MEM_FLUSH_CNTL = 0x12D
DISCOVERY_TMR_OFFSET = 64 << 10
# soc15_ih_clientid.h enum soc21_ih_clientid; irqsrcs_gfx_11_0_0.h (and gmc_v11_0_sw_init, gfx_v11_0_sw_init: who registers them)
CLIENT_GFX, CLIENT_GRBM_CP = 0x0A, 0x14
UTCL2_FAULT, CP_BAD_OPCODE_ERROR, SQ_INTERRUPT_ID = 0x00, 0xB7, 0xEF
# discovery.h
BINARY_SIGNATURE, DISCOVERY_TABLE_SIGNATURE, TOTAL_TABLES = 0x28211407, 0x53445049, 6
# soc15_hw_ip.h hardware ids -> (name, the (major, minor, revision) a Navi31 (gfx1100) reports, as the versions
# amdgpu_discovery.c amdgpu_discovery_set_*_ip_blocks switch on for it, register segment bases). Linux has no static
# table of Navi31's bases (amdgpu reads them from this binary), so the model uses the nearest one it has, Navi21's
# sienna_cichlid_ip_offset.h; the 11.0.0 headers' "base address" comments agree with it for GC, OSSSYS and HDP, and
# amdgpu's pre-discovery mmMP0_SMN_C2PMSG_33 (0x16061) is MP0's first base plus regMP0_SMN_C2PMSG_33 (0x61).
_GC_BASES = (0x1260, 0xA000, 0x1C000, 0x2402C00)
_MP_BASES = (0x16000, 0xDC0000, 0xE00000, 0xE40000, 0x243FC00)
NAVI31_IPS = {11: ("GC", (11, 0, 0), _GC_BASES), 42: ("SDMA0", (6, 0, 0), _GC_BASES), 43: ("SDMA1", (6, 0, 0), _GC_BASES),
              255: ("MP0", (13, 0, 0), _MP_BASES), 1: ("MP1", (13, 0, 0), _MP_BASES), 108: ("NBIF", (4, 3, 0), (0x0, 0x14, 0xD20, 0x10400, 0x241B000)),
              41: ("HDP", (6, 0, 0), (0xF20, 0x240A400)), 34: ("MMHUB", (3, 0, 0), (0x1A000, 0x2408800)), 35: ("ATHUB", (3, 0, 0), (0xC00, 0x2408C00)),
              40: ("OSSSYS", (6, 0, 0), (0x10A0, 0x240A000)), 4: ("SMUIO", (13, 0, 6), (0x16800, 0x16A00, 0x440000, 0x2401000)),
              150: ("UMC", (8, 10, 0), (0x14000, 0x2425800)), 12: ("VCN", (4, 0, 0), (0x7800, 0x7E00, 0x2403000))}

def discovery_binary(ips: dict[int, tuple[str, tuple[int, int, int], tuple[int, ...]]]) -> bytes:
  """The IP discovery binary of one die with `ips` (hw_id -> (name, version, bases)): a v1 binary header, a v3 IP discovery
  table (ip_v3 entries with 32-bit base addresses), byte-sum checksums as amdgpu_discovery_verify_checksum takes them."""
  entries = b"".join(struct.pack(f"<HBBBBBB{len(bases)}I", hw_id, 0, len(bases), *version, 0, *bases) for hw_id, (_, version, bases) in ips.items())
  die = struct.pack("<HH", 0, len(ips)) + entries
  header_size = struct.calcsize("<IHHIH") + 16 * 4 + 2
  table_at = 0x40
  die_at = table_at + header_size
  table = struct.pack("<IHHIH", DISCOVERY_TABLE_SIGNATURE, 3, header_size + len(die), DISCOVERY_TABLE_SIGNATURE, 1)
  table += struct.pack("<HH", 0, die_at) + bytes(4 * 15) + bytes(2) + die
  size = table_at + len(table)
  tables = [(table_at, sum(table) & 0xFFFF, len(table))] + [(0, 0, 0)] * (TOTAL_TABLES - 1)
  head = struct.pack("<IHH", BINARY_SIGNATURE, 1, 0)
  rest = struct.pack("<H", size) + b"".join(struct.pack("<HHHH", o, c, n, 0) for o, c, n in tables)
  body = rest + bytes(table_at - len(head) - 2 - len(rest)) + table
  return head + struct.pack("<H", sum(body) & 0xFFFF) + body

class AMDPCIGPU:
  """The registers behind BAR5 and the video memory they reach (backed only where touched). `psp_firmware`
  ({fw_type: bytes}) is what the PSP bootloader model accepts (the model's own SOS file's components by default);
  `psp_answers=False` makes a PSP that never gets ready. Behind GC's registers: the GFX hub (gfxhub.py), the MEC
  (mec.py) and the SDMA queues (sdma_queues.py), whose engines run the KFD model's PM4 and SDMA front ends and shader
  core, each VMID with its own memory view."""
  def __init__(self, vram_mib: int = 24 << 10, ips=NAVI31_IPS, psp_firmware: dict[int, bytes] | None = None, psp_answers: bool = True):
    self.vram_mib, self.vram, self.regs = vram_mib, reserve(vram_mib << 20), {RCC_CONFIG_MEMSIZE: vram_mib, MP0_SMN_C2PMSG_33: BOOT_DONE}
    self.write_vram((vram_mib << 20) - DISCOVERY_TMR_OFFSET, discovery_binary(ips))
    base = {name: bases for name, _, bases in ips.values()}
    self.regs[base["MMHUB"][0] + FB_LOCATION_BASE] = FB_BASE >> 24
    self.psp = PSPModel(firmware_files.SOS_COMPONENTS if psp_firmware is None else psp_firmware, self.read_vram, self.write_vram, vram_mib << 20, FB_BASE, psp_answers)
    self.smu = SMUModel(lambda: any(fw_type == GFX_FW_TYPE_SMU for fw_type, _ in self.psp.ip_firmware))
    doorbells = Bar(2 << 20)
    self.lock, self.gpus, self.hdp_flushes, self.doorbell_moves, self.flush_base = threading.RLock(), {}, 0, 0, None
    self.hub = GFXHub(self.vram, self.install)
    self.ih = IHModel(self.write_vram, FB_BASE, vram_mib << 20)
    self.rlc = RLCModel(lambda: self.psp.ip_firmware, lambda: self.psp.autoloads, firmware_files.gfx_images())
    self.mec = MEC(self.gpu_of, doorbells.memory, self.loaded, (firmware_files.MEC_IMAGE, firmware_files.MEC_STACK), firmware_files.MEC_START >> 2, self.watch,
                   lambda: self.rlc.booted)
    self.sdma = SDMAQueues(self.gpu_of, doorbells.memory, self.loaded, firmware_files.SDMA_THREADS, self.watch)
    gc = base["GC"]
    # register -> (the model answering it, its name there)
    self.hooks = {**{base["MP0"][0] + offset: (self.psp, offset) for offset in self.psp.regs}, **{base["MP1"][0] + offset: (self.smu, offset) for offset in self.smu.regs},
                  **{gc[0] + offset: (self.hub, offset) for offset in self.hub.regs},
                  **{base["OSSSYS"][0] + offset: (self.ih, offset) for offset in self.ih.regs},
                  **{gc[seg] + offset: (model, (seg, offset)) for model in (self.mec, self.sdma, self.rlc) for seg, offset in model.registers()}}
    self.hdp_remap = base["NBIF"][2] + REMAP_HDP_MEM_FLUSH_CNTL
    self.function = PCIFunction(0x1002, 0x744C, 0x030000, 0xC8, bars={0: Bar(256 << 20, memory=self.vram[:256 << 20]), 2: doorbells,
                                                                     5: Bar(1 << 20, wide=False, registers=self)})

  # ---- the engines' side
  def gpu_of(self, vmid: int) -> GPU:
    """The memory view (and queues) of one VMID."""
    if vmid not in self.gpus: self.gpus[vmid] = GPU(ARCHS["gfx1100"], vmid, self.lock, lambda ctxid, bits: None, self.fault)
    return self.gpus[vmid]
  def install(self, vmid: int, regions: list[Region]) -> None:
    gpu = self.gpu_of(vmid)
    with self.lock: gpu.maps = regions
  def fault(self, gpu: GPU, e: GPUFault) -> None:
    """A queue's fault, in the hub's fault registers (a memory fault) and as an interrupt vector: a memory fault as the
    GFX hub's UTCL2 fault (the page in source data 0 and 1, as gmc_v11_0_process_interrupt reads it back); on a compute
    queue, a shader's error as an SQ interrupt and any other as CP_BAD_OPCODE_ERROR, its ring id the queue's ME, pipe
    and queue (gfx_v11_0_handle_priv_fault). Which of the CP's errors a fault is, and the SQ interrupt's client, are the
    model's choice; SDMA's errors other than memory faults raise none (amdgpu registers no source for them)."""
    if e.address is not None:
      self.hub.fault(gpu.gpu_id, e.address)
      self.ih.interrupt(CLIENT_GFX, UTCL2_FAULT, vmid=gpu.gpu_id, data=(e.address >> 12 & 0xFFFFFFFF, e.address >> 44 & 0xF))
    elif (where := next((w for w, (_, q) in self.mec.queues.items() if q is e.queue), None)) is not None:
      me, pipe, queue = where
      source = SQ_INTERRUPT_ID if "shader fault" in e.args[0] else CP_BAD_OPCODE_ERROR
      self.ih.interrupt(CLIENT_GRBM_CP, source, ring=me << 2 | pipe | queue << 4, vmid=gpu.gpu_id)
  def loaded(self, fw_type: int) -> bytes | None: return next((blob for t, blob in reversed(self.psp.ip_firmware) if t == fw_type), None)
  def watch(self, q: Queue) -> None:
    """A queue whose doorbell moves are counted against HDP flushes (the first queue starts the count)."""
    if self.flush_base is None: self.flush_base = self.hdp_flushes
    q.rung = self.rung
  def rung(self, q: Queue) -> None:
    """amdgpu flushes the HDP before each submission (amdgpu_ib.c amdgpu_ib_schedule): commands and data the CPU wrote
    into video memory through BAR 0 may not have reached it until then. The model sees a doorbell move after the fact
    and may see two submissions as one, so it asks that there were never more moves than flushes."""
    self.doorbell_moves += 1
    if self.doorbell_moves > self.hdp_flushes - self.flush_base:
      raise GPUFault(f"its doorbell moved with no HDP flush since it last did ({self.doorbell_moves} moves, {self.hdp_flushes - self.flush_base} flushes): "
                     "the commands the CPU wrote to video memory may not have reached it")
  @property
  def faults(self) -> list[str]: return [f for g in self.gpus.values() for f in g.faults]
  @property
  def problems(self) -> list[str]: return [*self.hub.problems, *self.mec.problems, *self.sdma.problems, *self.ih.problems]
  def stop(self) -> None:
    for g in self.gpus.values(): g.stop()

  def write_vram(self, pos: int, data: bytes) -> None: self.vram[pos:pos + len(data)] = data
  def read_vram(self, pos: int, n: int) -> bytes: return bytes(self.vram[pos:pos + n])
  def _indexed(self) -> int: return (self.regs.get(MM_INDEX_HI, 0) << 31 | self.regs.get(MM_INDEX, 0) & 0x7FFFFFFF)

  # ---- BAR5 (Registers)
  def read(self, offset: int, size: int) -> bytes:
    reg = offset // 4
    if reg == MM_DATA: value = int.from_bytes(self.read_vram(self._indexed(), 4), "little")
    elif (hook := self.hooks.get(reg)) is not None:
      with self.lock: value = hook[0].read(hook[1])
    else: value = self.regs.get(reg, 0)
    return value.to_bytes(4, "little")[offset % 4:offset % 4 + size]
  def write(self, offset: int, data: bytes) -> None:
    reg = offset // 4
    old = bytearray(self.read(reg * 4, 4))
    old[offset % 4:offset % 4 + len(data)] = data
    if reg == MM_DATA: self.write_vram(self._indexed(), bytes(old))
    elif (hook := self.hooks.get(reg)) is not None:
      with self.lock: hook[0].write(hook[1], int.from_bytes(old, "little"))
    else:
      if (remap := self.regs.get(self.hdp_remap)) and reg == remap // 4: self.hdp_flushes += 1
      self.regs[reg] = int.from_bytes(old, "little")

def enumerated_gpu(gpu: AMDPCIGPU | None = None) -> PCIFunction:
  """A Navi31 (`gpu`, else a new one) as the platform firmware leaves it on a PCI bus: BARs placed, memory decoding
  on, no driver bound."""
  fn = (gpu or AMDPCIGPU()).function
  for i, base in ((0, 0x7C_0000_0000), (2, 0x7C_1000_0000)):
    fn.config_write(BAR0 + 4 * i, base & 0xFFFFFFFF)
    fn.config_write(BAR0 + 4 * i + 4, base >> 32)
  fn.config_write(BAR0 + 4 * 5, 0xFCC0_0000)
  fn.config_write(COMMAND, COMMAND_MEMORY, 2)
  return fn
