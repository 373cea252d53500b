"""An AMD GPU as a PCI function with no kernel driver bound, as tg's AM driver first meets it: BAR0 the video memory
aperture, BAR2 the doorbells, BAR5 the registers (amdgpu_device.c amdgpu_device_init: rmmio is BAR 5 on SOC15
parts). Before any firmware is loaded a driver can read the video memory size (RCC_CONFIG_MEMSIZE, in MiB), see that
the boot firmware finished (MP0_SMN_C2PMSG_33 bit 31) and read video memory through MM_INDEX/MM_INDEX_HI/MM_DATA,
where the IP discovery binary lies 64 KiB below the top (amdgpu_discovery.c amdgpu_discovery_read_binary_from_mem;
the layouts are include/discovery.h's)."""
from __future__ import annotations
import struct
from drivers.mock.pci_function import BAR0, COMMAND, COMMAND_MEMORY, Bar, PCIFunction
from drivers.mock.amd.psp import PSPModel
from drivers.mock.amd.smu import SMUModel

# register dword offsets in BAR5 (amdgpu_discovery.c)
MM_INDEX, MM_DATA, MM_INDEX_HI, RCC_CONFIG_MEMSIZE, MP0_SMN_C2PMSG_33 = 0x0, 0x1, 0x6, 0xDE3, 0x16061
FB_LOCATION_BASE = 0x8EC  # mmhub_3_0_0_offset.h regMMMC_VM_FB_LOCATION_BASE (from MMHUB's base): FB_BASE, 16 MiB units
FB_BASE = 0x80_0000_0000  # where the model's video memory starts in memory-controller space (a driver must read it)
GFX_FW_TYPE_SMU = 18  # psp_gfx_if.h enum psp_gfx_fw_type: the SMU runs once the PSP has loaded this image
BOOT_DONE = 1 << 31
DISCOVERY_TMR_OFFSET = 64 << 10
# discovery.h
BINARY_SIGNATURE, DISCOVERY_TABLE_SIGNATURE, TOTAL_TABLES = 0x28211407, 0x53445049, 6
# soc15_hw_ip.h hardware ids -> (name, the (major, minor, revision) a Navi31 (gfx1100) reports, as the versions
# amdgpu_discovery.c amdgpu_discovery_set_*_ip_blocks switch on for it, register segment base). MP0's base is 0x16000:
# amdgpu's pre-discovery mmMP0_SMN_C2PMSG_33 (0x16061) is that base plus regMP0_SMN_C2PMSG_33 (0x61, mp_13_0_0_offset.h);
# the other bases are the model's own layout.
NAVI31_IPS = {11: ("GC", (11, 0, 0), 0x1000), 42: ("SDMA0", (6, 0, 0), 0x2000), 43: ("SDMA1", (6, 0, 0), 0x3000),
              255: ("MP0", (13, 0, 0), 0x16000), 1: ("MP1", (13, 0, 0), 0x5000), 108: ("NBIF", (4, 3, 0), 0x6000),
              41: ("HDP", (6, 0, 0), 0x7000), 34: ("MMHUB", (3, 0, 0), 0x8000), 35: ("ATHUB", (3, 0, 0), 0x9000),
              40: ("OSSSYS", (6, 0, 0), 0xA000), 4: ("SMUIO", (13, 0, 6), 0xB000), 150: ("UMC", (8, 10, 0), 0xC000),
              12: ("VCN", (4, 0, 0), 0xD000)}

def discovery_binary(ips: dict[int, tuple[str, tuple[int, int, int], int]]) -> bytes:
  """The IP discovery binary of one die with `ips` (hw_id -> (name, version, base)): a v1 binary header, a v3 IP discovery
  table (ip_v3 entries, one 32-bit base address each), byte-sum checksums as amdgpu_discovery_verify_checksum takes them."""
  entries = b"".join(struct.pack("<HBBBBBBI", hw_id, 0, 1, *version, 0, base) for hw_id, (_, version, base) in ips.items())
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
  """The registers behind BAR5 and the video memory they reach (sparse: only what was written exists). `psp_firmware`
  ({fw_type: bytes}) is what the PSP bootloader model accepts; `psp_answers=False` makes a PSP that never gets ready."""
  def __init__(self, vram_mib: int = 24 << 10, ips=NAVI31_IPS, psp_firmware: dict[int, bytes] | None = None, psp_answers: bool = True):
    self.vram_mib, self.vram, self.regs = vram_mib, {}, {RCC_CONFIG_MEMSIZE: vram_mib, MP0_SMN_C2PMSG_33: BOOT_DONE}
    self.write_vram((vram_mib << 20) - DISCOVERY_TMR_OFFSET, discovery_binary(ips))
    mp0, mp1, mmhub = (next(base for name, _, base in ips.values() if name == want) for want in ("MP0", "MP1", "MMHUB"))
    self.regs[mmhub + FB_LOCATION_BASE] = FB_BASE >> 24
    self.psp = PSPModel(psp_firmware or {}, self.read_vram, self.write_vram, vram_mib << 20, FB_BASE, psp_answers)
    self.smu = SMUModel(lambda: any(fw_type == GFX_FW_TYPE_SMU for fw_type, _ in self.psp.ip_firmware))
    # register -> (the model answering it, its offset there)
    self.hooks = {**{mp0 + offset: (self.psp, offset) for offset in self.psp.regs}, **{mp1 + offset: (self.smu, offset) for offset in self.smu.regs}}
    self.function = PCIFunction(0x1002, 0x744C, 0x030000, 0xC8, bars={0: Bar(256 << 20, registers=VRAMAperture(self)), 2: Bar(2 << 20),
                                                                     5: Bar(1 << 20, wide=False, registers=self)})

  def write_vram(self, pos: int, data: bytes) -> None:
    for i, byte in enumerate(data): self.vram[pos + i] = byte
  def read_vram(self, pos: int, n: int) -> bytes: return bytes(self.vram.get(pos + i, 0) for i in range(n))
  def _indexed(self) -> int: return (self.regs.get(MM_INDEX_HI, 0) << 31 | self.regs.get(MM_INDEX, 0) & 0x7FFFFFFF)

  # ---- BAR5 (Registers)
  def read(self, offset: int, size: int) -> bytes:
    reg = offset // 4
    if reg == MM_DATA: value = int.from_bytes(self.read_vram(self._indexed(), 4), "little")
    elif (hook := self.hooks.get(reg)) is not None: value = hook[0].read(hook[1])
    else: value = self.regs.get(reg, 0)
    return value.to_bytes(4, "little")[offset % 4:offset % 4 + size]
  def write(self, offset: int, data: bytes) -> None:
    reg = offset // 4
    old = bytearray(self.read(reg * 4, 4))
    old[offset % 4:offset % 4 + len(data)] = data
    if reg == MM_DATA: self.write_vram(self._indexed(), bytes(old))
    elif (hook := self.hooks.get(reg)) is not None: hook[0].write(hook[1], int.from_bytes(old, "little"))
    else: self.regs[reg] = int.from_bytes(old, "little")

class VRAMAperture:
  """BAR 0: the first 256 MiB of video memory, read and written by the CPU directly."""
  def __init__(self, gpu: AMDPCIGPU): self.gpu = gpu
  def read(self, offset: int, size: int) -> bytes: return self.gpu.read_vram(offset, size)
  def write(self, offset: int, data: bytes) -> None: self.gpu.write_vram(offset, data)

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
