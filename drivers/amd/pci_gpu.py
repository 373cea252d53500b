"""An AMD GPU reached as a bare PCI function (behind a USB bridge, or with no kernel driver bound): memory decoding
on, its BARs placed, registers read and written through BAR5, video memory read through the MM_INDEX/MM_DATA window,
and the IP discovery binary read from where the boot firmware left it. What tg's AM driver builds on (issue 17)."""
from __future__ import annotations
import struct, time
from drivers.amd import discovery
from drivers.pci import PCIAccess, bar_size

REGISTER_BAR = 5  # amdgpu_device.c amdgpu_device_init: SOC15 GPUs' registers are BAR 5
VRAM_BAR = 0      # gmc_v11_0.c gmc_v11_0_mc_init: BAR 0 is the aperture onto the start of video memory (aper_base)
# register dword offsets (amdgpu_discovery.c)
MM_INDEX, MM_DATA, MM_INDEX_HI, RCC_CONFIG_MEMSIZE, MP0_SMN_C2PMSG_33 = 0x0, 0x1, 0x6, 0xDE3, 0x16061
BOOT_DONE, BOOT_WAIT_S = 1 << 31, 1.0  # amdgpu_discovery_read_binary_from_mem waits up to a second for it

def wait_for(read, done, wait_s: float) -> tuple[bool, int]:
  """Call read() until done(value) holds or wait_s has passed: (whether it held, the last value read)."""
  deadline = time.perf_counter() + wait_s
  while not done(value := read()):
    if time.perf_counter() > deadline: return False, value
  return True, value

class PCIGPU:
  """An AMD GPU through `pci`: its registers are BAR 5."""
  def __init__(self, pci: PCIAccess):
    self.pci, self.regs = pci, pci.bar(REGISTER_BAR)
    self.visible_vram: int | None = None  # BAR 0's size, sized on first use

  def reg_read(self, reg: int) -> int: return self.regs.read32(4 * reg)
  def reg_write(self, reg: int, value: int) -> None: self.regs.write32(4 * reg, value)

  def vram_read(self, pos: int, n: int) -> bytes:
    """`n` bytes of video memory at `pos` (4-byte aligned) through the MM_INDEX window (amdgpu_device_mm_access)."""
    out = bytearray()
    for at in range(pos, pos + n, 4):
      self._window(at)
      out += struct.pack("<I", self.reg_read(MM_DATA))
    return bytes(out[:n])

  def vram_write(self, pos: int, data: bytes) -> None:
    """`data` into video memory at `pos` (4-byte aligned), the last dword padded with zeros: through the BAR 0
    aperture where it reaches (the CPU-visible start of video memory), else through the MM_INDEX window a dword at a
    time."""
    padded = data + bytes(-len(data) % 4)
    if self.visible_vram is None: self.visible_vram = bar_size(self.pci, VRAM_BAR)[0]
    if pos + len(padded) <= self.visible_vram: return self.pci.bar(VRAM_BAR).write(pos, padded)
    for i in range(0, len(padded), 4):
      self._window(pos + i)
      self.reg_write(MM_DATA, struct.unpack_from("<I", padded, i)[0])
  def _window(self, at: int) -> None:
    """Point MM_DATA at video memory byte `at` (amdgpu_device_mm_access: bit 31 of MM_INDEX selects memory)."""
    self.reg_write(MM_INDEX, at & 0x7FFFFFFF | 0x80000000)
    self.reg_write(MM_INDEX_HI, at >> 31)

  @property
  def vram_bytes(self) -> int: return self.reg_read(RCC_CONFIG_MEMSIZE) << 20

  def discovery(self) -> list[discovery.IP]:
    """The GPU's IP blocks, once its boot firmware is done (TimeoutError naming the register after BOOT_WAIT_S)."""
    if not wait_for(lambda: self.reg_read(MP0_SMN_C2PMSG_33), lambda v: v & BOOT_DONE, BOOT_WAIT_S)[0]:
      raise TimeoutError(f"the GPU's boot firmware didn't finish: MP0_SMN_C2PMSG_33 bit 31 unset after {BOOT_WAIT_S} s")
    if not (vram := self.vram_bytes): raise discovery.DiscoveryError("RCC_CONFIG_MEMSIZE reads 0: no video memory size to find the table by")
    at = vram - discovery.DISCOVERY_TMR_OFFSET
    head = self.vram_read(at, 12)
    size = struct.unpack_from("<H", head, 10)[0]
    if size > discovery.DISCOVERY_TMR_SIZE: raise discovery.DiscoveryError(f"the binary says it is {size} bytes, more than the {discovery.DISCOVERY_TMR_SIZE} reserved")
    return discovery.parse(self.vram_read(at, max(size, 12)))
