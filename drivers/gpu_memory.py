"""GPU memory of the HCQ GPU drivers (NV, AMD): a range allocator for GPU virtual addresses, the buffers the allocator
hands out, copies between them and host memory through a staging buffer on the copy engine, and the host-visible
memory queues keep their launch arguments in. A device provides alloc_memory(size, host) and free_memory(buf)."""
from __future__ import annotations
from dataclasses import dataclass, field
import weakref
from typing import TYPE_CHECKING, Any, Callable
import numpy as np
from ir.dtype import Image
from ir.helpers import round_up
from drivers.device import LRUAllocator
from ir.uop import UOp
from drivers.hcq import HCQSignal, HWQueue, PatchSlot, fill
from drivers.system import memoryview_at
if TYPE_CHECKING: from drivers.hcq import HCQCompiled


class AddressSpace:
  """First-fit allocation of [lo, hi) with freed ranges merged back."""
  def __init__(self, lo: int, hi: int): self.free_ranges: list[tuple[int, int]] = [(lo, hi)]
  def alloc(self, size: int, align: int) -> int:
    for i, (lo, hi) in enumerate(self.free_ranges):
      start = round_up(lo, align)
      if start + size <= hi:
        self.free_ranges[i:i + 1] = [r for r in ((lo, start), (start + size, hi)) if r[0] < r[1]]
        return start
    raise MemoryError(f"GPU virtual address space exhausted ({size} bytes wanted)")
  def free(self, start: int, size: int) -> None:
    ranges = sorted(self.free_ranges + [(start, start + size)])
    merged = [ranges[0]]
    for lo, hi in ranges[1:]:
      if lo <= merged[-1][1]: merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
      else: merged.append((lo, hi))
    self.free_ranges = merged

@dataclass(eq=False)
class GPUBuffer:
  """Memory the GPU sees at `va`; `cpu` is its CPU mapping (None for video memory the CPU can't see)."""
  va: int
  size: int
  cpu: int | None = None
  handle: int = 0                      # the RM memory object (0 for a view)
  host: bool = False                   # system memory (else video memory)
  user: bool = False                   # the caller's memory, registered with the GPU: freeing it only unregisters it
  fd: int | None = None                # a file opened for the CPU mapping alone (NV's /dev/nvidiaN)
  base: GPUBuffer | None = field(default=None, repr=False)
  mapped_on: set[bytes] = field(default_factory=set, repr=False)  # other GPUs (UUIDs) it is mapped on as well
  image: Image | None = None           # rows of RGBA pixels (IMAGE=1) on a GPU that lays images out itself (QCOM)
  def view(self) -> np.ndarray:
    if self.cpu is None: raise RuntimeError(f"GPU memory at {self.va:#x} has no CPU mapping")
    return np.frombuffer(memoryview_at(self.cpu, self.size), dtype=np.uint8)
  def offset(self, size: int, offset: int) -> GPUBuffer:
    return GPUBuffer(self.va + offset, size, None if self.cpu is None else self.cpu + offset, host=self.host, base=self.base or self)

class GPUAllocator(LRUAllocator):
  """Video memory for Buffers; copies to and from the host go through a pinned staging buffer on the copy engine,
  in chunks, so the host's next chunk is written while the previous one is copied."""
  STAGING = 2 << 20
  def __init__(self, dev: HCQCompiled):
    super().__init__()
    self.dev = dev
    self._staging: list[GPUBuffer] = []
  def _alloc(self, size: int, options=None) -> GPUBuffer: return self.dev.alloc_memory(size, host=bool(getattr(options, "host", False)))
  def _free(self, opaque: GPUBuffer, size: int, options=None) -> None: self.dev.free_memory(opaque)
  def offset(self, opaque: GPUBuffer, size: int, offset: int) -> GPUBuffer: return opaque.offset(size, offset)

  def staging(self) -> list[GPUBuffer]:
    if not self._staging: self._staging = [self.dev.alloc_memory(self.STAGING, host=True) for _ in range(2)]
    return self._staging

  def engine_copy(self, dest: GPUBuffer, src: GPUBuffer, nbytes: int) -> None:
    """dest <- src on the copy engine, after everything submitted to the device so far."""
    dev = self.dev
    dev.copy_queue().wait(dev.timeline_signal, dev.timeline_value - 1).copy(dest, src, nbytes).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)

  def copyin(self, dest: GPUBuffer, src: memoryview) -> None:
    if dest.cpu is not None:
      dest.view()[:] = np.frombuffer(src, dtype=np.uint8)
      return
    data = np.frombuffer(src, dtype=np.uint8)
    dev, bufs = self.dev, self.staging()
    done = [0, 0]  # the timeline value after which each staging buffer is free again
    for k, at in enumerate(range(0, len(data), self.STAGING)):
      n = min(self.STAGING, len(data) - at)
      stage = bufs[k % 2]
      dev.timeline_signal.wait(done[k % 2])
      stage.view()[:n] = data[at:at + n]
      done[k % 2] = dev.timeline_value
      self.engine_copy(dest.offset(n, at), stage, n)
    dev.synchronize()

  def copyout(self, dest: memoryview, src: GPUBuffer) -> None:
    out = np.frombuffer(dest, dtype=np.uint8)
    if src.cpu is not None:
      out[:] = src.view()
      return
    dev, stage = self.dev, self.staging()[0]
    for at in range(0, len(out), self.STAGING):
      n = min(self.STAGING, len(out) - at)
      self.engine_copy(stage, src.offset(n, at), n)
      dev.synchronize()
      out[at:at + n] = stage.view()[:n]

class ArgumentPool:
  """Host-visible chunks for kernel arguments and launch descriptors. A queue keeps its chunks while it lives (a
  JIT graph resubmits the same queue); they return here tagged with the timeline value after which the GPU no
  longer reads them."""
  CHUNK = 64 << 10
  def __init__(self, dev: HCQCompiled):
    self.dev = dev
    self.idle: list[tuple[GPUBuffer, int]] = []
  def take(self) -> GPUBuffer:
    done = self.dev.timeline_signal.value
    for i, (chunk, release) in enumerate(self.idle):
      if release <= done: return self.idle.pop(i)[0]
    return self.dev.alloc_memory(self.CHUNK, host=True)
  def give_back(self, chunks: list[GPUBuffer], release: list[int]) -> None: self.idle.extend((c, release[0]) for c in chunks)

class ArgumentQueue(HWQueue):
  """A queue that keeps launch arguments in host-visible chunks from its device's ArgumentPool (`dev.arguments`);
  words of that memory that depend on a submit's values (a JIT input's address) are written at each submit."""
  def __init__(self):
    super().__init__()
    self._chunks: list[GPUBuffer] = []
    self._chunk_used = 0
    self._mem_patches: list[tuple[np.ndarray, int, Any]] = []  # (u64 view, index, UOp or PatchSlot) written at submit
    self._last_submit: tuple[HCQSignal, int] | None = None
    self._release = [0]  # the timeline value after which the GPU no longer reads this queue's memory
    self._commands: GPUBuffer | None = None  # a bound queue's words, kept on the device

  def memory(self, dev, size: int, align: int = 256) -> tuple[GPUBuffer, int]:
    """`size` bytes of host-visible memory owned by this queue: (chunk, offset)."""
    if size > ArgumentPool.CHUNK: raise ValueError(f"{size} bytes of launch arguments don't fit a {ArgumentPool.CHUNK}-byte chunk")
    at = round_up(self._chunk_used, align)
    if not self._chunks or at + size > ArgumentPool.CHUNK:
      if not self._chunks: weakref.finalize(self, dev.arguments.give_back, self._chunks, self._release)
      self._chunks.append(dev.arguments.take())
      at = 0
    self._chunk_used = at + size
    return self._chunks[-1], at

  def write_arguments(self, view: np.ndarray, args: list, layout: list[tuple[int, int]]) -> None:
    """Kernel arguments into `view` at their (offset, size): a buffer's address or an integer (two's complement); a
    JIT input (PatchSlot) or a Variable (UOp) is written at each submit."""
    for a, (offset, size) in zip(args, layout):
      words = view[offset:offset + size].view(np.uint64 if size == 8 else np.uint32)
      if isinstance(a, (PatchSlot, UOp)): self._mem_patches.append((words, 0, PatchSlot(a.name, lambda b: b.va) if isinstance(a, PatchSlot) else a))
      else: words[0] = a.va if isinstance(a, GPUBuffer) else int(a) & (0xFFFFFFFFFFFFFFFF if size == 8 else 0xFFFFFFFF)

  def bound_commands(self, dev, words: list[int], alloc: Callable[[int], GPUBuffer]) -> GPUBuffer:
    """A bound queue's words in device memory from `alloc(nbytes)`, written at the first submit (freed once the GPU is
    done with them); later submits rewrite only the patched words, after the GPU read the previous ones."""
    if self._commands is None:
      self._commands = alloc(4 * len(words))
      weakref.finalize(self, dev.retire, self._commands, self._release)
      self._commands.view()[:4 * len(words)].view(np.uint32)[:] = words
    else:
      if self._last_submit is not None: self._last_submit[0].wait(self._last_submit[1])  # the GPU may still read the old words
      view = self._commands.view().view(np.uint32)
      for at, _ in self._patches: view[at] = words[at]
    return self._commands

  def submit(self, dev, var_vals: dict[str, Any] | None = None) -> HWQueue:
    if self._mem_patches:
      if self._last_submit is not None: self._last_submit[0].wait(self._last_submit[1])  # the GPU may still read the old values
      for view, i, p in self._mem_patches: view[i] = fill(p, var_vals)
    super().submit(dev, var_vals)
    self._last_submit = (dev.timeline_signal, dev.timeline_value - 1)
    self._release[0] = dev.timeline_value - 1
    return self

