"""A memory BAR of a function behind the USB bridge as the CPU uses it (a drivers/pci.py Window): a copy in this
process that the driver reads and writes as if the BAR were mapped. Over the stock firmware every dword is one
memory TLP, so `sync` sends only the dwords of the ranges the CPU writes that changed since they were last sent, and
`fetch` reads back only what it is asked for. Video memory the CPU hasn't written is taken to read 0 (the model's
does; a real GPU's visible video memory would need clearing once)."""
from __future__ import annotations
import numpy as np
from drivers.system import address_of, memoryview_at, mmap_anonymous

class MirroredBar:
  """`bar` (a BridgedBar) of `size` bytes."""
  def __init__(self, bar, size: int):
    self.bar, self.size = bar, size
    self.view = memoryview_at(mmap_anonymous(size), size)
    self.address = address_of(self.view)
    self.sent = np.frombuffer(memoryview_at(mmap_anonymous(size), size), np.uint32)  # what the BAR holds, as far as we know
    self.words = np.frombuffer(self.view, np.uint32)

  def sync(self, ranges: dict[int, int]) -> None:
    """Send the dwords of the [offset, offset + size) ranges that differ from what was last sent."""
    for offset, size in ranges.items():
      now, sent = self.words[offset // 4:(offset + size) // 4], self.sent[offset // 4:(offset + size) // 4]
      changed = np.nonzero(now != sent)[0]
      for i, value in zip(changed.tolist(), now[changed].tolist()): self.bar.write32(offset + 4 * i, value)
      sent[changed] = now[changed]

  def fetch(self, part: np.ndarray) -> None:
    """Read the dwords under `part` (a view into `view`) from the BAR."""
    lo = part.ctypes.data - self.address
    if not 0 <= lo < self.size: raise ValueError(f"{part.ctypes.data:#x} is not in the mirror of the BAR")
    for word in range(lo // 4, -(-(lo + part.nbytes) // 4)): self.words[word] = self.sent[word] = self.bar.read32(4 * word)
