"""The AMD device over the AM driver (am.py): the same programs, PM4/SDMA queues and signals as over amdkfd
(device.py), with memory, rings and faults the driver owns itself. The GPU is the first AMD display-class PCI
function with no kernel driver bound."""
from __future__ import annotations
import atexit, functools
import numpy as np
from ir.helpers import round_up
from ir.switches import DEV
from ir.target import parse_targets, target_for
from codegen.amdgpu import AMDGPURenderer
from codegen.amdgpu_compiler import AMDGPUCompiler
from drivers.device import DeviceUnavailable
from drivers.gpu_memory import ArgumentPool, GPUAllocator, GPUBuffer
from drivers.hcq import HCQCompiled
from drivers.pci import SysfsFunction
from drivers.system import system_for
from drivers.amd import am_queues, gmc, ih, pm4
from drivers.amd.am import AM, VA_BASE, VMID
from drivers.amd.device import EOP_BYTES, PAGE, RING_BYTES, AMDDevice, AMDProgram, Node, Ring, sdma_nop
from drivers.amd.pci_gpu import PCIGPU
from drivers.amd.queues import queues_for

AMD_VENDOR, DISPLAY_CLASS = 0x1002, 0x03

def unbound_gpu(system) -> str:
  """The PCI address of the first AMD display controller no kernel driver is bound to."""
  found = [d for d in system.pci_devices(AMD_VENDOR) if d.pci_class >> 16 == DISPLAY_CLASS]
  if free := [d.address for d in found if not system.pci_driver(d.address)]: return free[0]
  bound = ", ".join(f"{d.address} ({system.pci_driver(d.address)})" for d in found)
  raise DeviceUnavailable(f"AMD unavailable: no AMD GPU without a kernel driver on the PCI bus{f' (bound: {bound}; unbind one first)' if bound else ''}")

class AMPCIDevice(AMDDevice):
  """AMDDevice over a GPU the AM driver brought up; one per process, sharing no memory with other GPUs yet."""
  allocator_t = GPUAllocator
  def __init__(self, device: str):
    target = target_for(parse_targets(DEV.value), "AMD")
    self.system = system_for(target.interface)
    self.am = self.bring_up()
    self.node = Node(0, 0, dict(self.am.properties))
    self.arch, self.gfx = self.node.arch, self.node.gfx_version // 10000
    if target.arch and target.arch != self.arch: raise ValueError(f"DEV asks for {target.arch}, but {device} is a {self.arch}")
    self.retired: list[tuple[GPUBuffer, list[int]]] = []
    self.scratch: GPUBuffer | None = None
    self.tmpring_size, self.scratch_base, self.scratch_per_lane = 0, (0, 0), 0
    self.arguments = ArgumentPool(self)
    self.rings = self.new_rings()
    HCQCompiled.__init__(self, device, self.allocator_t(self), AMDGPURenderer(self.arch), AMDGPUCompiler(self.arch), functools.partial(AMDProgram, self),
                         *queues_for(self.gfx), signal_memory=self.new_signal_memory())
    atexit.register(self.close)

  def bring_up(self) -> AM: return AM(PCIGPU(SysfsFunction(self.system, unbound_gpu(self.system))), self.system)

  def new_signal_memory(self) -> tuple[np.ndarray, int]:
    """(the signals' memory as the CPU sees it, its GPU address)."""
    self.signal_memory = self.alloc_memory(0x10000, host=True)
    return self.signal_memory.view().view(np.uint64), self.signal_memory.va

  def close(self) -> None:
    """At exit, the GPU is left for the next process (AM.close), unless it is still running queued work: then it is
    left as it is, and the next bring-up takes the queue off the pipe itself."""
    if self.error is None and self.timeline_signal.value >= self.timeline_value - 1: self.am.close()

  # ---- memory: all of it video memory, the CPU-visible part for what the CPU writes or polls
  def alloc_memory(self, size: int, host: bool = False, uncached: bool = False, cpu_access: bool = False) -> GPUBuffer:
    if self.retired: self.free_retired()
    size = round_up(max(size, 1), PAGE)
    at, cpu = self.am.alloc(size, host or cpu_access)
    buf = GPUBuffer(VA_BASE + at, size, cpu, handle=at)
    if cpu is not None: buf.view()[:] = 0
    return buf

  def free_memory(self, buf: GPUBuffer) -> None: self.am.free(buf.handle, buf.size)

  def upload(self, data: bytes) -> GPUBuffer:
    buf = self.alloc_memory(len(data), cpu_access=True)
    buf.view()[:len(data)] = np.frombuffer(data, np.uint8)
    self.am.flush_hdp()
    return buf

  def map_here(self, buf: GPUBuffer) -> None: raise RuntimeError(f"{self.device}: the AM driver shares no memory with other GPUs yet")
  def can_transfer_from(self, src_dev) -> bool: return False

  # ---- queues
  def new_rings(self) -> dict[str, Ring]:
    compute = [self.alloc_memory(n, host=True) for n in (RING_BYTES, PAGE, EOP_BYTES, PAGE)]  # ring, pointers, EOP, MQD
    ring, pointers, eop, mqd = compute
    at = am_queues.map_compute_queue(self.am.gc_read, self.am.gc_write, VMID, ring.va, RING_BYTES, pointers.va + 0x80, pointers.va, eop.va, mqd.va)
    copy_ring, copy_pointers = self.alloc_memory(RING_BYTES, host=True), self.alloc_memory(PAGE, host=True)
    copy_at = am_queues.start_sdma_queue(self.am.gc_write, VMID, copy_ring.va, RING_BYTES, copy_pointers.va + 0x80, copy_pointers.va)
    return {"compute": Ring(self, "the compute queue", 4, pm4.nop, ring, pointers, self.doorbell(at), functools.partial(self.unmap_compute, compute),
                            self.am.flush_hdp, self.am.vram_bar.fetch),
            "copy": Ring(self, "the copy queue", 1, sdma_nop, copy_ring, copy_pointers, self.doorbell(copy_at),
                         functools.partial(self.stop_copy, [copy_ring, copy_pointers]), self.am.flush_hdp, self.am.vram_bar.fetch)}

  def doorbell(self, offset: int):
    """The 64-bit doorbell at byte `offset` of the doorbell BAR, as a one-element array to write."""
    return np.frombuffer(self.am.doorbell_bar.view, np.uint64, 1, offset)

  def unmap_compute(self, bufs: list[GPUBuffer]) -> None:
    am_queues.unmap_compute_queue(self.am.gc_write)
    for buf in bufs: self.free_memory(buf)

  def stop_copy(self, bufs: list[GPUBuffer]) -> None:
    am_queues.stop_sdma_queue(self.am.gc_write)
    for buf in bufs: self.free_memory(buf)

  # ---- faults
  def check_faults(self) -> str | None:
    """A fault the GPU reported on the interrupt ring (a GPU memory fault, a bad packet, a shader's error): the faulting
    queue stops for good, so both are mapped anew and the device goes on; the error stays in `self.error` until
    synchronize reports it."""
    if self.error is not None: return self.error
    if not (faults := [f for v in self.am.ih.vectors() if (f := ih.fault(v)) is not None]): return None
    gmc.clear_fault(self.am.gc_write0)
    for ring in self.rings.values(): ring.destroy()
    self.rings = self.new_rings()
    self.error = f"{self.device}: {faults[0]}" + (f" (and {len(faults) - 1} more faults)" if len(faults) > 1 else "")
    return self.error
