"""The NV command queues: HCQ commands encoded as push-buffer methods. Waits and signals are host semaphore methods
(any channel); a kernel launch writes its constant buffer 0 and launch descriptor (QMD) into host-visible memory
the queue owns and sends the QMD's address to the compute engine; a copy is one copy-engine transfer."""
from __future__ import annotations
import numpy as np
from ir.helpers import round_up
from drivers.hcq import HCQSignal, PatchSlot, hi32, lo32
from drivers.nv import pushbuf as pb
from drivers.gpu_memory import ArgumentQueue, GPUBuffer

MAX_COPY = 1 << 31  # bytes per copy-engine transfer (LINE_LENGTH_IN is 32 bits)

class NVQueue(ArgumentQueue):
  channel = "compute"
  def method(self, subchannel: int, offset: int, *data) -> NVQueue:
    return self.q(pb.header(pb.INCREMENTING, subchannel, offset, len(data)), *data)

  def wait(self, signal: HCQSignal, value):
    return self.method(pb.SUBC_HOST, pb.Host.SEM_ADDR_LO, lo32(signal.va), hi32(signal.va), lo32(value), hi32(value),
                       pb.sem_execute(pb.SEM_ACQ_CIRC_GEQ, payload64=True, switch_tsg=True))
  def signal(self, signal: HCQSignal, value):
    return self.method(pb.SUBC_HOST, pb.Host.SEM_ADDR_LO, lo32(signal.va), hi32(signal.va), lo32(value), hi32(value),
                       pb.sem_execute(pb.SEM_RELEASE, payload64=True, timestamp=True, wfi=True))
  def timestamp(self, signal: HCQSignal): return self.signal(signal, 0)  # timing signals are read for their time only
  def memory_barrier(self): return self.method(pb.SUBC_HOST, pb.Host.WFI, 0)

  def _submit(self, dev, words: list[int]) -> None: dev.submit(self.channel, words)

class NVComputeQueue(NVQueue):
  """Grids launched back to back on a channel may run at the same time on the GPU (only a wait for idle, such as the
  release of `signal`, orders them), so a launch that follows another in this queue first waits for it."""
  channel = "compute"
  def __init__(self):
    super().__init__()
    self._grid_unordered = False  # a grid was launched and nothing has waited for it since

  def signal(self, signal: HCQSignal, value):
    self._grid_unordered = False  # the release waits for idle
    return super().signal(signal, value)

  def memory_barrier(self):
    return self.method(pb.SUBC_COMPUTE, pb.Compute.INVALIDATE_SHADER_CACHES_NO_WFI, pb.INVALIDATE_GLOBAL_DATA | pb.INVALIDATE_CONSTANT)

  def exec(self, prg, args: list, global_size, local_size):
    dev = prg.dev
    if self._grid_unordered: self.method(pb.SUBC_HOST, pb.Host.WFI, 0).memory_barrier()  # the previous grid's writes, before this one reads
    self._grid_unordered = True
    local_size = tuple(local_size or (1, 1, 1))
    cb0, qmd_bytes = prg.launch_memory(tuple(global_size), local_size)
    mem, at = self.memory(dev, round_up(len(cb0), 256) + len(qmd_bytes))
    view = mem.view()
    view[at:at + len(cb0)] = np.frombuffer(cb0, dtype=np.uint8)
    self.write_arguments(view[at:], args, prg.param_layout)
    qmd_at = at + round_up(len(cb0), 256)
    qmd_va = mem.va + qmd_at
    view[qmd_at:qmd_at + len(qmd_bytes)] = np.frombuffer(prg.finish_qmd(qmd_bytes, mem.va + at), dtype=np.uint8)
    return self.method(pb.SUBC_COMPUTE, pb.Compute.SEND_PCAS_A, qmd_va >> 8) \
               .method(pb.SUBC_COMPUTE, pb.Compute.SEND_SIGNALING_PCAS2_B, pb.PCAS_PREFETCH_SCHEDULE)

class NVCopyQueue(NVQueue):
  channel, copies = "copy", True
  def copy(self, dest, src, nbytes: int):
    for at in range(0, nbytes, MAX_COPY):
      n = min(MAX_COPY, nbytes - at)
      self.method(pb.SUBC_COPY, pb.Copy.OFFSET_IN_UPPER, *self._address(src, at), *self._address(dest, at))
      self.method(pb.SUBC_COPY, pb.Copy.LINE_LENGTH_IN, n)
      self.method(pb.SUBC_COPY, pb.Copy.LAUNCH_DMA, pb.launch_dma(transfer=pb.DMA_NON_PIPELINED, flush=True, src_pitch=True, dst_pitch=True))
    return self
  @staticmethod
  def _address(buf, offset: int) -> tuple:
    if isinstance(buf, PatchSlot): return PatchSlot(buf.name, lambda b: hi32(b.va + offset)), PatchSlot(buf.name, lambda b: lo32(b.va + offset))
    if not isinstance(buf, GPUBuffer): raise TypeError(f"the NV copy engine copies between NV buffers, not {type(buf).__name__}")
    return hi32(buf.va + offset), lo32(buf.va + offset)
