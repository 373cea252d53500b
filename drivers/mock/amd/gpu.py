"""The GPU behind the AMD model: its identity per architecture (what amdkfd's topology reports), its memory as the
GPU sees it (the ranges mapped to it with MAP_MEMORY_TO_GPU; GPU VA -> host address), and its front end: user
queues whose rings a poll thread consumes, PM4 on the compute rings (pm4.py) and SDMA packets on the copy rings
(sdma.py). A fault stops its queue where it happened and is reported to amdkfd (kfd.py), which signals the
process's MEMORY or HW_EXCEPTION events as kfd_events.c does."""
from __future__ import annotations
import bisect, sys, threading, time
from dataclasses import dataclass, field
from typing import Callable
import numpy as np
from drivers import system
from drivers.mock.amd.shader.dispatch import Dispatch, ShaderFault
from drivers.mock.amd.shader.instruction import UnknownInstruction

HOT_POLL_S, IDLE_SLEEP_S, IDLE_LONG_S, DOZE_S = 0.005, 0.0002, 0.1, 0.002  # spin after work, then nap, then doze

@dataclass(frozen=True)
class Arch:
  """One GPU model: the values kfd_topology.c publishes for it (per device, all XCCs together)."""
  name: str
  gfx_target_version: int       # M*10000 + m*100 + s (kfd_topology.c node_props.gfx_target_version)
  device_id: int
  marketing_name: str
  cu_count: int
  simd_per_cu: int
  array_count: int              # shader arrays, all engines and XCCs
  simd_arrays_per_engine: int
  max_waves_per_simd: int
  lds_size_in_kb: int
  vram_bytes: int
  num_xcc: int = 1
  num_sdma_engines: int = 2
  num_sdma_xgmi_engines: int = 0
  max_slots_scratch_cu: int = 32
  ip: tuple[tuple[int, tuple[int, int, int]], ...] = ()   # (hardware IP id, (major, minor, revision)) for ip_discovery
  @property
  def family(self) -> str: return "gfx9" if self.gfx_target_version < 100000 else "gfx10+"
  @property
  def simd_count(self) -> int: return self.cu_count * self.simd_per_cu
  @property
  def cu_per_simd_array(self) -> int: return self.cu_count // self.array_count
  @property
  def wave_front_size(self) -> int: return 64 if self.family == "gfx9" else 32

  # kfd_queue.c kfd_queue_ctx_save_restore_size: the sizes CREATE_QUEUE must match (per XCC)
  @property
  def _cwsr_waves(self) -> int:
    cus = self.simd_count // self.simd_per_cu // self.num_xcc
    return min(cus * 40, self.array_count // self.simd_arrays_per_engine * 512) if self.gfx_target_version < 100100 else cus * 32
  @property
  def ctl_stack_size(self) -> int:
    per_wave = 12 if self.gfx_target_version >= 100100 else 8
    return _page_align(40 + self._cwsr_waves * per_wave + 8)
  @property
  def cwsr_size(self) -> int:
    gfxv, cus = self.gfx_target_version, self.simd_count // self.simd_per_cu // self.num_xcc
    vgpr = 0x80000 if gfxv // 100 * 100 == 90400 or gfxv in (90010, 90008, 90500) else 0x60000 if gfxv in (110000, 110001, 120000, 120001) else 0x40000
    lds = self.lds_size_in_kb << 10 if gfxv == 90500 else 0x10000
    return self.ctl_stack_size + _page_align(cus * (vgpr + 0x4000 + lds + 0x1000))
  @property
  def debug_memory_size(self) -> int: return -(-self._cwsr_waves * 32 // 64) * 64
  @property
  def cwsr_buffer_size(self) -> int:
    """kfd_queue_acquire_buffers: the ctx-save area the queue's buffer must be: (cwsr + debug) per XCC, page aligned."""
    return _page_align((self.cwsr_size + self.debug_memory_size) * self.num_xcc)
  eop_buffer_size = 4096                                      # kfd_queue.c: gfx8 (not Tonga) and later

def _page_align(n: int) -> int: return -(-n // 4096) * 4096

GC_HWID, SDMA0_HWID = 11, 42     # soc15_hw_ip.h
GiB = 1 << 30
ARCHS = {
  "gfx1100": Arch("gfx1100", 110000, 0x744C, "AMD Radeon RX 7900 XTX", 96, 2, 12, 2, 16, 64, 24 * GiB,
                  ip=((GC_HWID, (11, 0, 0)), (SDMA0_HWID, (6, 0, 0)))),
  "gfx1101": Arch("gfx1101", 110001, 0x747E, "AMD Radeon RX 7800 XT", 60, 2, 6, 2, 16, 64, 16 * GiB,
                  ip=((GC_HWID, (11, 0, 3)), (SDMA0_HWID, (6, 0, 3)))),
  "gfx1201": Arch("gfx1201", 120001, 0x7550, "AMD Radeon RX 9070 XT", 64, 2, 8, 2, 16, 64, 16 * GiB,
                  ip=((GC_HWID, (12, 0, 1)), (SDMA0_HWID, (7, 0, 1)))),
  "gfx942": Arch("gfx942", 90402, 0x74A1, "AMD Instinct MI300X", 304, 4, 32, 1, 10, 64, 192 * GiB, num_xcc=8,
                 num_sdma_xgmi_engines=14, ip=((GC_HWID, (9, 4, 3)), (SDMA0_HWID, (4, 4, 2)))),
  "gfx950": Arch("gfx950", 90500, 0x75A3, "AMD Instinct MI355X", 256, 4, 32, 1, 10, 160, 288 * GiB, num_xcc=8,
                 num_sdma_xgmi_engines=14, ip=((GC_HWID, (9, 5, 0)), (SDMA0_HWID, (4, 4, 5)))),
}

class GPUFault(Exception):
  """A queue stops: `address` is the GPU VA of a memory fault (None for a malformed packet or an engine error);
  `queue`, the queue it stopped."""
  def __init__(self, message: str, address: int | None = None):
    super().__init__(message)
    self.address, self.queue = address, None

@dataclass(frozen=True)
class Region:
  va: int
  size: int
  host: int

# ---------------- queues

@dataclass(eq=False)
class Queue:
  """A user queue as CREATE_QUEUE described it. Pointers are in the engine's units (PM4 dwords, SDMA bytes)."""
  queue_id: int
  kind: str                     # "pm4" or "sdma"
  ring: int                     # GPU VA
  ring_size: int                # bytes
  rptr_va: int
  wptr_va: int
  doorbell: memoryview          # the queue's 64-bit doorbell in the process doorbell page
  doorbell_id: int = 0          # its 64-bit slot in the doorbell page
  engine: object = None         # its PM4Engine / SDMAEngine
  faulted: bool = False
  rptr_bits: int = 64           # the read pointer written back at rptr_va (0: none)
  rung: Callable[[Queue], None] | None = None   # checks a new doorbell value before the engine runs up to it
  last_doorbell: int = 0

@dataclass(eq=False)
class Frame:
  """Where a command processor reads: the ring (positions count up forever and wrap on the ring's dwords) or an
  indirect buffer (positions 0..end). Positions are in dwords."""
  words: np.ndarray             # uint32
  pos: int
  end: int
  base: int                     # GPU VA of words[0]
  is_ring: bool
  def word(self, i: int) -> int: return int(self.words[i % len(self.words)]) if self.is_ring else int(self.words[i])
  def where(self, i: int) -> str:
    return f"ring offset {(i % len(self.words)) * 4:#x}" if self.is_ring else f"IB at {self.base:#x} dword {i}"

HDP_UNWRITTEN = 0xFFFFFFFF  # what the model keeps in HDP_MEM_FLUSH_CNTL between writes (the kernel writes 0 to flush)

class GPU:
  """Memory translation, the queues and the poll thread. Everything runs under `lock` (amdkfd's ioctls take it too)."""
  def __init__(self, arch: Arch, gpu_id: int, lock: threading.RLock, on_interrupt: Callable[[int, int], None],
               on_fault: Callable[[GPU, GPUFault], None]):
    self.arch, self.gpu_id, self.lock = arch, gpu_id, lock
    self.on_interrupt, self.on_fault = on_interrupt, on_fault   # into amdkfd: (context id, valid id bits) / a queue fault
    self.maps: list[Region] = []          # sorted by va, disjoint
    self.queues: list[Queue] = []
    self.faults: list[str] = []
    self.shader: Callable[[Dispatch, GPU], None] | None = None   # None: the shader core (shader/execute.py run)
    self.hdp_flush_cntl: memoryview | None = None   # HDP_MEM_FLUSH_CNTL in the MMIO remap page (set by amdkfd's model)
    self.cpu_written: dict[int, int] = {}           # VRAM the CPU mapped through the BAR since the last HDP flush: va -> size
    self._thread: threading.Thread | None = None
    self._stop = threading.Event()

  # ---- memory (GPUMemory for the shader core)
  def map(self, va: int, size: int, host: int) -> None:
    with self.lock:
      bisect.insort(self.maps, Region(va, size, host), key=lambda r: r.va)

  def unmap(self, va: int) -> None:
    with self.lock:
      self.maps = [r for r in self.maps if r.va != va]

  def region(self, va: int, nbytes: int, what: str) -> Region:
    i = bisect.bisect_right(self.maps, va, key=lambda r: r.va) - 1
    r = self.maps[i] if i >= 0 else None
    if r is None or va + nbytes > r.va + r.size:
      raise GPUFault(f"GPU VM fault: {what} at VA {va:#x} ({nbytes:#x} bytes) is not mapped to GPU {self.gpu_id:#x}", va)
    return r

  def span(self, lo: int, hi: int) -> tuple[np.ndarray, int]:
    try: r = self.region(lo, max(hi - lo, 1), "shader access")
    except GPUFault as e: raise ShaderFault(str(e), lo) from None
    return np.frombuffer(system.memoryview_at(r.host, r.size), np.uint8), r.va

  def host(self, va: int, nbytes: int, what: str) -> int:
    r = self.region(va, nbytes, what)
    return r.host + va - r.va

  def view(self, va: int, nbytes: int, what: str) -> memoryview: return system.memoryview_at(self.host(va, nbytes, what), nbytes)
  def read(self, va: int, bits: int, what: str) -> int:
    self.aligned(va, bits, what)
    return int.from_bytes(self.view(va, bits // 8, what), "little")
  def write(self, va: int, value: int, bits: int, what: str) -> None:
    self.aligned(va, bits, what)
    self.view(va, bits // 8, what)[:] = (value % (1 << bits)).to_bytes(bits // 8, "little")
  def dwords(self, va: int, count: int, what: str) -> np.ndarray:
    self.aligned(va, 32, what)
    return np.frombuffer(self.view(va, 4 * count, what), np.uint32)
  @staticmethod
  def aligned(va: int, bits: int, what: str) -> None:
    if va % (bits // 8): raise GPUFault(f"{what}: VA {va:#x} is not {bits // 8}-byte aligned")

  @staticmethod
  def clock() -> int: return time.perf_counter_ns() // 10   # the 100 MHz GPU clock counter RELEASE_MEM/SDMA stamp

  # ---- queues and the poll thread
  def add_queue(self, q: Queue) -> None:
    with self.lock:
      self.queues.append(q)
      self.start()

  def remove_queue(self, q: Queue) -> None:
    with self.lock:
      self.queues.remove(q)

  def start(self) -> None:
    if self._thread is None:
      self._thread = threading.Thread(target=self._poll, name=f"amd-model-{self.arch.name}-{self.gpu_id:#x}", daemon=True)
      self._thread.start()

  def stop(self) -> None:
    self._stop.set()
    if self._thread is not None: self._thread.join()

  def _poll(self) -> None:
    last_work = time.perf_counter()
    while not self._stop.is_set():
      with self.lock: worked = [self.step(q) for q in list(self.queues) if not q.faulted]
      now = time.perf_counter()
      if any(worked): last_work = now
      idle = now - last_work
      time.sleep(0 if idle < HOT_POLL_S else IDLE_SLEEP_S if idle < IDLE_LONG_S else DOZE_S)

  def step(self, q: Queue) -> bool:
    """Runs the queue's packets up to its doorbell's write pointer; True if it did anything."""
    try:
      wptr = int(q.doorbell[0])
      if wptr != q.last_doorbell and q.rung is not None: q.rung(q)
      q.last_doorbell = wptr
      return q.engine.run(wptr)
    except GPUFault as e: self.fault(q, e)
    except ShaderFault as e:
      # an instruction the model can't run is a gap in the model, not the driver's fault: say so where a developer sees it
      if isinstance(e, UnknownInstruction): print(f"AMD model: {e}", file=sys.stderr)
      self.fault(q, GPUFault(f"shader fault: {e}", e.address))
    except Exception as e: self.fault(q, GPUFault(f"{type(e).__name__}: {e}"))   # a model bug must not kill the thread
    return True

  def fault(self, q: Queue, e: GPUFault) -> None:
    q.faulted = True
    e.args, e.queue = (f"{q.kind} queue {q.queue_id}: {e.args[0]}",), q
    self.faults.append(e.args[0])
    self.on_fault(self, e)

  # ---- the host data path (HDP): CPU writes to video memory through the BAR
  def cpu_maps_vram(self, va: int, size: int) -> None: self.cpu_written[va] = size

  def check_hdp(self, va: int, nbytes: int, what: str) -> None:
    """CPU writes through the BAR reach video memory at an HDP flush, a write to HDP_MEM_FLUSH_CNTL (hdp_v5_0.c
    hdp_v5_0_flush_hdp). The model can't see single CPU stores, so: VRAM the CPU mapped is stale to the GPU
    until a flush follows the mapping; the register holds HDP_UNWRITTEN until a write, so the model sees each one."""
    if self.hdp_flush_cntl is not None and self.hdp_flush_cntl[0] != HDP_UNWRITTEN:
      self.hdp_flush_cntl[0] = HDP_UNWRITTEN
      self.cpu_written.clear()
    if hit := next((v for v, n in self.cpu_written.items() if v < va + nbytes and va < v + n), None):
      raise GPUFault(f"{what} at {va:#x} reads video memory the CPU mapped at {hit:#x} with no HDP flush since "
                     f"(HDP_MEM_FLUSH_CNTL, offset 0 of the MMIO remap page, was never written)", va)

  def dispatch(self, d: Dispatch) -> None:
    """Hands a launch to the shader core (ShaderFault propagates to the queue)."""
    self.check_hdp(d.code_va, 4, "the kernel's code")
    if self.shader is not None: return self.shader(d, self)
    try: from drivers.mock.amd.shader.execute import run
    except ImportError as e: raise GPUFault(f"DISPATCH_DIRECT: the shader core is not available ({e})") from None
    run(d, self)
