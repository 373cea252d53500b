"""The AMD command queues: HCQ commands as PM4 packets on a compute queue and SDMA packets on a copy queue. A signal
is written at the end of the pipe (RELEASE_MEM / FENCE) with the GPU clock next to it; a wait polls the signal's low
32 bits (WAIT_REG_MEM / POLL_REGMEM); a launch sets the compute registers from the kernel descriptor, points the
user SGPRs at kernel arguments in host-visible memory the queue owns, and dispatches."""
from __future__ import annotations
import functools
from drivers.hcq import HCQSignal, HWQueue, PatchSlot, hi32, lo32
from drivers.gpu_memory import ArgumentQueue, GPUBuffer
from drivers.amd import pm4, sdma

class AMDSignal(HCQSignal):
  """A signal whose writes can also wake the CPU: `wake` = (the KFD signal event's slot address, the event id); the
  engine writes the id into the slot and raises an interrupt naming it, which amdkfd turns into that event
  (kfd_events.c kfd_signal_event_interrupt looks for a written slot)."""
  wake: tuple[int, int] | None = None

def _address(buf, offset: int = 0) -> tuple:
  """A buffer's GPU address (plus offset) as (lo, hi) words: ints, or PatchSlots filled in at submit for a JIT input."""
  if isinstance(buf, PatchSlot): return PatchSlot(buf.name, lambda b: lo32(b.va + offset)), PatchSlot(buf.name, lambda b: hi32(b.va + offset))
  if not isinstance(buf, GPUBuffer): raise TypeError(f"AMD queues work on AMD buffers, not {type(buf).__name__}")
  return lo32(buf.va + offset), hi32(buf.va + offset)

class AMDComputeQueue(ArgumentQueue):
  """A bound queue (a JIT graph's) keeps its commands in GPU-visible memory: the first submit writes them, later ones
  rewrite only the patched words, and each runs them with one INDIRECT_BUFFER packet on the ring."""
  engine, gfx = "compute", 11  # gfx: the GPU's major version, which picks packet forms and register offsets
  def wait(self, signal: HCQSignal, value): return self.q(*pm4.wait_reg_mem(signal.va, lo32(value)))
  def signal(self, signal: HCQSignal, value):
    self.timestamp(signal).q(*pm4.release_mem(self.gfx, signal.va, pm4.DATA_SEL_64, lo32(value), hi32(value)))
    if isinstance(signal, AMDSignal) and signal.wake is not None:
      slot, event_id = signal.wake
      self.q(*pm4.release_mem(self.gfx, slot, pm4.DATA_SEL_64, event_id, 0, interrupt=event_id))
    return self
  def timestamp(self, signal: HCQSignal): return self.q(*pm4.release_mem(self.gfx, signal.va + 8, pm4.DATA_SEL_GPU_CLOCK))
  def memory_barrier(self): return self.q(*pm4.acquire_mem(self.gfx))

  def exec(self, prg, args: list, global_size, local_size):
    kernel = prg.kernel
    mem, at = self.memory(prg.dev, max(kernel.kernarg_size, 8), align=16)
    self.write_arguments(mem.view()[at:], args, kernel.args)
    kernargs = mem.va + at
    local_size = tuple(local_size or (1, 1, 1))
    self.q(*pm4.set_sh_reg(pm4.PGM_LO, lo32(prg.code_va >> 8), prg.code_va >> 40),
           *pm4.set_sh_reg(pm4.PGM_RSRC1, prg.rsrc1, prg.rsrc2), *pm4.set_sh_reg(pm4.pgm_rsrc3(self.gfx), prg.rsrc3),
           *pm4.set_sh_reg(pm4.TMPRING_SIZE, prg.dev.tmpring_size), *pm4.set_sh_reg(pm4.SCRATCH_BASE_LO, *prg.dev.scratch_base),
           *pm4.set_sh_reg(pm4.RESTART_X, 0, 0, 0), *pm4.set_sh_reg(pm4.USER_DATA_0, lo32(kernargs), hi32(kernargs)),
           *pm4.set_sh_reg(pm4.RESOURCE_LIMITS, 0), *pm4.set_sh_reg(pm4.START_X, 0, 0, 0, *local_size),
           *pm4.dispatch_direct(tuple(global_size), prg.wave32), *pm4.cs_partial_flush())
    return self

  def _submit(self, dev, words: list[int]) -> None:
    if self._bound is not dev: return dev.rings["compute"].submit(words)
    commands = self.bound_commands(dev, words, lambda n: dev.alloc_memory(n, host=True, uncached=True))
    dev.rings["compute"].submit(pm4.indirect_buffer(commands.va, len(words)))

class AMDCopyQueue(HWQueue):
  engine, copies, gfx = "copy", True, 11
  def wait(self, signal: HCQSignal, value): return self.q(*sdma.poll_regmem(signal.va, lo32(value)))
  def signal(self, signal: HCQSignal, value):  # the low word last: waits compare it
    self.timestamp(signal).q(*sdma.fence(self.gfx, signal.va + 4, hi32(value)), *sdma.fence(self.gfx, signal.va, lo32(value)))
    if isinstance(signal, AMDSignal) and signal.wake is not None:
      slot, event_id = signal.wake
      self.q(*sdma.fence(self.gfx, slot, event_id), *sdma.fence(self.gfx, slot + 4, 0), *sdma.trap(event_id))
    return self
  def timestamp(self, signal: HCQSignal): return self.q(*sdma.timestamp(signal.va + 8))
  def memory_barrier(self): return self
  def copy(self, dest, src, nbytes: int):
    step = sdma.max_copy(self.gfx)
    for at in range(0, nbytes, step):
      self.q(*sdma.copy_linear(_address(dest, at), _address(src, at), min(step, nbytes - at)))
    return self
  def _submit(self, dev, words: list[int]) -> None: dev.rings["copy"].submit(words)

@functools.cache
def queues_for(gfx: int) -> tuple[type[AMDComputeQueue], type[AMDCopyQueue]]:
  """The compute and copy queue classes of GPUs with major version `gfx`."""
  return (type("AMDComputeQueue", (AMDComputeQueue,), {"gfx": gfx}), type("AMDCopyQueue", (AMDCopyQueue,), {"gfx": gfx}))
