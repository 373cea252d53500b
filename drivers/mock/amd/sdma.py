"""The SDMA engine behind a copy queue: packets read from the ring (rptr..wptr in bytes) and from indirect buffers,
decoded with the model's tables (packets.py, from amdgpu's sdma_v6_0_0_pkt_open.h and vega10_sdma_pkt_open.h):
linear copies, writes, fences, traps (an interrupt amdkfd turns into an event), memory polls and timestamps."""
from __future__ import annotations
import ctypes
from drivers.mock.amd import packets as pk
from drivers.mock.amd.gpu import GPU, Frame, GPUFault, Queue

TRAP_CONTEXT_BITS = 28   # kfd_int_process_v9.c / v10 / v11: SDMA_TRAP -> context_id0 & 0xfffffff, 28 valid bits

class SDMAEngine:
  def __init__(self, gpu: GPU, queue: Queue):
    self.gpu, self.queue, self.family = gpu, queue, gpu.arch.family
    ring = gpu.dwords(queue.ring, queue.ring_size // 4, "ring")
    self.frames = [Frame(ring, 0, 0, queue.ring, True)]
    self.count_bits = pk.SDMA_COPY_COUNT_BITS[self.family]

  def run(self, wptr: int) -> bool:
    """Executes packets until the ring is drained up to `wptr` (bytes) or a poll is unmet; True if it did anything."""
    ring, worked = self.frames[0], False
    if wptr % 4: raise GPUFault(f"write pointer {wptr:#x} is not a whole number of dwords (SDMA pointers count bytes)")
    if wptr // 4 < ring.pos: raise GPUFault(f"write pointer {wptr:#x} went back behind the read pointer {4 * ring.pos:#x}")
    ring.end = wptr // 4
    while True:
      f = self.frames[-1]
      if f.pos >= f.end:
        if f.is_ring: break
        self.frames.pop()
        continue
      if not self.packet(f): break
      worked = True
      if self.queue.rptr_bits: self.gpu.write(self.queue.rptr_va, 4 * ring.pos, self.queue.rptr_bits, "read pointer write-back")
    return worked

  def length(self, f: Frame, header: int, op: int) -> int:
    """Dwords of the packet at f.pos (reads its count word where the length depends on it)."""
    if op == pk.SDMA_OP["NOP"]: return 1 + pk.field(header, 16, 14)      # NOP count[29:16] dwords follow
    if op == pk.SDMA_OP["WRITE"]:
      if f.pos + 3 >= f.end and f.is_ring: return 4
      return 5 + pk.field(f.word(f.pos + 3), 0, 20)                       # WRITE_UNTILED count = dwords - 1
    fixed = {pk.SDMA_OP["COPY"]: 7, pk.SDMA_OP["INDIRECT"]: 6, pk.SDMA_OP["FENCE"]: 4, pk.SDMA_OP["TRAP"]: 2,
             pk.SDMA_OP["POLL_REGMEM"]: 6, pk.SDMA_OP["TIMESTAMP"]: 3, pk.SDMA_OP["GCR_REQ"]: pk.SDMA_GCR_REQ_DWORDS}
    if op not in fixed or (op == pk.SDMA_OP["GCR_REQ"] and self.family == "gfx9"):
      raise GPUFault(f"unknown SDMA opcode {op} (header {header:#010x}) at {f.where(f.pos)}")
    return fixed[op]

  def packet(self, f: Frame) -> bool:
    header = f.word(f.pos)
    op, sub = pk.field(header, 0, 8), pk.field(header, 8, 8)
    n = self.length(f, header, op)
    if f.pos + n > f.end:
      if f.is_ring: return False
      raise GPUFault(f"SDMA packet {header:#010x} at {f.where(f.pos)} runs past the end of its IB")
    words, at = [f.word(f.pos + i) for i in range(n)], f.where(f.pos)
    if op == pk.SDMA_OP["INDIRECT"]:
      f.pos += n
      self.indirect(words, at)
      return True
    try: done = self.execute(op, sub, words)
    except GPUFault as e: raise GPUFault(f"SDMA {pk.SDMA_OP_NAME[op]} at {at}: {e.args[0]}", e.address) from None
    if done: f.pos += n
    return done

  def execute(self, op: int, sub: int, w: list[int]) -> bool:
    name = pk.SDMA_OP_NAME[op]
    if op == pk.SDMA_OP["COPY"]:
      if sub != pk.SDMA_SUBOP_COPY_LINEAR: raise GPUFault(f"COPY sub-op {sub} is not modelled (only linear)")
      if w[0] >> 25 & 1 or w[0] >> 27 & 1: raise GPUFault(f"COPY_LINEAR backwards/broadcast (header {w[0]:#x}) is not modelled")
      if w[1] >> self.count_bits: raise GPUFault(f"COPY_LINEAR count {w[1]:#x} overflows its {self.count_bits}-bit field on {self.gpu.arch.name}")
      nbytes, src, dst = w[1] + 1, w[4] << 32 | w[3], w[6] << 32 | w[5]
      self.gpu.check_hdp(src, nbytes, "COPY_LINEAR source")
      ctypes.memmove(self.gpu.host(dst, nbytes, "copy destination"), self.gpu.host(src, nbytes, "copy source"), nbytes)
    elif op == pk.SDMA_OP["WRITE"]:
      if sub != pk.SDMA_SUBOP_WRITE_LINEAR: raise GPUFault(f"WRITE sub-op {sub} is not modelled (only linear)")
      dst = w[2] << 32 | w[1]
      for i, v in enumerate(w[4:]): self.gpu.write(dst + 4 * i, v, 32, "WRITE")
    elif op == pk.SDMA_OP["FENCE"]: self.gpu.write(w[2] << 32 | w[1], w[3], 32, "FENCE")
    elif op == pk.SDMA_OP["TRAP"]: self.gpu.on_interrupt(pk.field(w[1], *pk.SDMA_TRAP_CONTEXT), TRAP_CONTEXT_BITS)
    elif op == pk.SDMA_OP["POLL_REGMEM"]: return self.poll(w)
    elif op == pk.SDMA_OP["TIMESTAMP"]:
      if sub != pk.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL: raise GPUFault(f"TIMESTAMP sub-op {sub} is not modelled (only GET_GLOBAL)")
      self.gpu.write(w[2] << 32 | w[1], self.gpu.clock(), 64, "TIMESTAMP")
    elif op not in (pk.SDMA_OP["NOP"], pk.SDMA_OP["GCR_REQ"]): raise GPUFault(f"{name} is not modelled")
    return True

  def poll(self, w: list[int]) -> bool:
    func, mem = pk.field(w[0], *pk.SDMA_POLL_FUNC), w[0] >> pk.SDMA_POLL_MEM & 1
    if w[0] >> 26 & 1: return True    # HDP_FLUSH: the model's host data path has nothing to flush
    if not mem: raise GPUFault(f"a register poll ({w[1]:#x}) is not modelled")
    if func == 7: raise GPUFault("compare function 7 does not exist")
    return pk.COMPARE[func](self.gpu.read(w[2] << 32 | w[1], 32, "POLL_REGMEM") & w[4], w[3])

  def indirect(self, w: list[int], at: str) -> None:
    base, size = w[2] << 32 | w[1], pk.field(w[3], 0, 20)
    if base % 32: raise GPUFault(f"SDMA INDIRECT at {at}: base {base:#x} is not 32-byte aligned")
    if not self.frames[-1].is_ring: raise GPUFault(f"SDMA INDIRECT at {at}: inside an indirect buffer")
    if size == 0: raise GPUFault(f"SDMA INDIRECT at {at}: size 0")
    try: words = self.gpu.dwords(base, size, "SDMA indirect buffer")
    except GPUFault as e: raise GPUFault(f"SDMA INDIRECT at {at}: {e.args[0]}", e.address) from None
    self.frames.append(Frame(words, 0, size, base, False))
