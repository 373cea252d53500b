"""The AMD device behind an ASM24xx USB-to-PCIe bridge (DEV=USB+AMD; DEV=MOCKUSB+AMD against the bridge model): the
AM driver over the bridge's TLPs (drivers/usb/asm24.py). Nothing of the GPU is mapped into this process, so
- what the CPU writes in video memory (rings, kernel arguments, page tables) is a mirror whose changed dwords go out
  as memory-write TLPs at each HDP flush (drivers/usb/mirrored_bar.py); doorbells are TLPs too;
- signals live in the bridge's SRAM (SIGNAL_WINDOW), which the GPU writes as uncached system memory and the CPU
  reads through XDATA;
- copies to and from video memory, kernel code included, go through the SRAM that SCSI WRITE fills (COPY_WINDOW),
  64 KiB at a time, on the GPU's copy engine."""
from __future__ import annotations
import functools
from typing import Callable
import numpy as np
from drivers.device import DeviceUnavailable
from drivers.gpu_memory import GPUAllocator, GPUBuffer
from drivers.pci import bar_size
from drivers.usb.asm24 import COPY_WINDOW, SIGNAL_WINDOW, ASM24Bridge, BridgedBar, BridgedFunction, find_bridges
from drivers.usb.mirrored_bar import MirroredBar
from drivers.amd.am import AM
from drivers.amd.am_device import AMPCIDevice
from drivers.amd.pci_gpu import PCIGPU, VRAM_BAR
from drivers.amd.queues import AMDSignal

class SRAMSignal(AMDSignal):
  """A signal in the bridge's SRAM: its value and timestamp read and written through XDATA at `xdata_of(mem)`."""
  def __init__(self, bridge: ASM24Bridge, xdata_of: Callable[[np.ndarray], int], mem: np.ndarray, *args, **kwargs):
    self.bridge, self.at = bridge, xdata_of(mem)
    super().__init__(mem, *args, **kwargs)
  @property
  def value(self) -> int: return int.from_bytes(self.bridge.read(self.at, 8), "little")
  @value.setter
  def value(self, v: int) -> None: self.bridge.write(self.at, int(v).to_bytes(8, "little"))
  @property
  def timestamp(self) -> float: return int.from_bytes(self.bridge.read(self.at + 8, 8), "little") / self.ticks_per_us

class BridgedDoorbell:
  """A 64-bit doorbell behind the bridge, written as memory TLPs of a dword each (the high one only when it changes:
  the bridge's TLPs carry at most 4 bytes, so a write pointer past 2^32 isn't one atomic write)."""
  def __init__(self, bar: BridgedBar, offset: int): self.bar, self.offset, self.high = bar, offset, 0
  def __setitem__(self, index: int, value: int) -> None:
    if value >> 32 != self.high:
      self.high = value >> 32
      self.bar.write32(self.offset + 4, self.high)
    self.bar.write32(self.offset, value & 0xFFFFFFFF)

class BridgeAllocator(GPUAllocator):
  """Copies to and from video memory through the bridge's SRAM (COPY_WINDOW) on the copy engine: SCSI WRITE fills it
  for the engine to read; what the engine writes there is read back through XDATA."""
  def copyin(self, dest: GPUBuffer, src: memoryview) -> None:
    dev, data = self.dev, np.frombuffer(src, dtype=np.uint8)
    for at in range(0, len(data), COPY_WINDOW.size):
      n = min(COPY_WINDOW.size, len(data) - at)
      dev.synchronize()  # the engine has read the window's last chunk
      dev.bridge.sram_write(data[at:at + n].tobytes())
      self.engine_copy(dest.offset(n, at), dev.copy_window, n)
    dev.synchronize()

  def copyout(self, dest: memoryview, src: GPUBuffer) -> None:
    dev, out = self.dev, np.frombuffer(dest, dtype=np.uint8)
    for at in range(0, len(out), COPY_WINDOW.size):
      n = min(COPY_WINDOW.size, len(out) - at)
      self.engine_copy(dev.copy_window, src.offset(n, at), n)
      dev.synchronize()
      out[at:at + n] = np.frombuffer(dev.bridge.read(COPY_WINDOW.xdata, n), dtype=np.uint8)

class AMUSBDevice(AMPCIDevice):
  """AMDDevice over the GPU behind the first ASM24xx bridge pyusb finds."""
  allocator_t = BridgeAllocator

  def bring_up(self) -> AM:
    if not (bridges := find_bridges(self.system.usb_backend())):
      raise DeviceUnavailable("AMD unavailable: no ASM24xx USB-to-PCIe bridge on the USB buses (scripts/usb_scan.py lists them)")
    self.bridge = ASM24Bridge(bridges[0])
    function = BridgedFunction(self.bridge)
    am = AM(PCIGPU(function), self.system, MirroredBar(function.bar(VRAM_BAR), bar_size(function, VRAM_BAR)[0]))
    self.copy_window = GPUBuffer(am.map_system(COPY_WINDOW.bus, COPY_WINDOW.size), COPY_WINDOW.size)
    return am

  def new_signal_memory(self) -> tuple[np.ndarray, int]:
    pool = np.zeros(SIGNAL_WINDOW.size // 8, np.uint64)  # the signals' places; their values are in the SRAM
    self.signal_t = functools.partial(SRAMSignal, self.bridge, lambda mem: SIGNAL_WINDOW.xdata + mem.ctypes.data - pool.ctypes.data)
    return pool, self.am.map_system(SIGNAL_WINDOW.bus, SIGNAL_WINDOW.size)

  def alloc_memory(self, size: int, host: bool = False, uncached: bool = False, cpu_access: bool = False) -> GPUBuffer:
    """Host memory (rings, arguments) in the mirrored part of video memory; the rest the CPU doesn't see."""
    buf = super().alloc_memory(size, host, uncached, cpu_access)
    if not host: buf.cpu = None
    return buf

  def upload(self, data: bytes) -> GPUBuffer:
    buf = self.alloc_memory(len(data))
    self.allocator.copyin(buf, memoryview(data))
    return buf

  def doorbell(self, offset: int) -> BridgedDoorbell: return BridgedDoorbell(self.am.doorbell_bar, offset)

  def synchronize(self, timeout_ms: int | None = None) -> None:
    """A submission whose doorbell a failed USB transfer lost runs now, so waiting for it is no timeout."""
    for ring in self.rings.values(): ring.ring_doorbell()
    super().synchronize(timeout_ms)
