"""The command processor's PM4 front end for a compute queue: type-3 packets read from the ring (rptr..wptr in
dwords) and from indirect buffers, decoded with the model's tables (packets.py, from amdgpu's nvd.h / soc15d.h).
Register writes accumulate; DISPATCH_DIRECT turns the compute registers into a Dispatch for the shader core;
RELEASE_MEM writes fences, timestamps and raises the end-of-pipe interrupt amdkfd turns into an event."""
from __future__ import annotations
from drivers.mock.amd import packets as pk
from drivers.mock.amd.gpu import GPU, Frame, GPUFault, Queue
from drivers.mock.amd.shader.dispatch import Dispatch

# kfd_int_process_v9.c / kfd_int_process_v11.c: valid context-id bits of a CP end-of-pipe interrupt
EOP_CONTEXT_BITS = {"gfx9": 28, "gfx10+": 32}

class PM4Engine:
  def __init__(self, gpu: GPU, queue: Queue):
    self.gpu, self.queue, self.family = gpu, queue, gpu.arch.family
    self.regs: dict[int, int] = {}
    ring = gpu.dwords(queue.ring, queue.ring_size // 4, "ring")
    self.frames = [Frame(ring, 0, 0, queue.ring, True)]
    self.handlers = {pk.OP["NOP"]: self.nop, pk.OP["SET_SH_REG"]: self.set_sh_reg, pk.OP["SET_UCONFIG_REG"]: self.set_uconfig_reg,
                     pk.OP["DISPATCH_DIRECT"]: self.dispatch_direct, pk.OP["ACQUIRE_MEM"]: self.acquire_mem,
                     pk.OP["RELEASE_MEM"]: self.release_mem, pk.OP["WAIT_REG_MEM"]: self.wait_reg_mem,
                     pk.OP["EVENT_WRITE"]: self.event_write, pk.OP["WRITE_DATA"]: self.write_data, pk.OP["COPY_DATA"]: self.copy_data}

  def run(self, wptr: int) -> bool:
    """Executes packets until the ring is drained up to `wptr` or a WAIT_REG_MEM is unmet; True if it did anything."""
    ring, worked = self.frames[0], False
    if wptr < ring.pos: raise GPUFault(f"write pointer {wptr:#x} went back behind the read pointer {ring.pos:#x} (dwords)")
    ring.end = wptr
    while True:
      f = self.frames[-1]
      if f.pos >= f.end:
        if f.is_ring: break
        self.frames.pop()
        continue
      if not self.packet(f): break
      worked = True
      if self.queue.rptr_bits: self.gpu.write(self.queue.rptr_va, ring.pos, self.queue.rptr_bits, "read pointer write-back")
    return worked

  def packet(self, f: Frame) -> bool:
    header = f.word(f.pos)
    if header == pk.PM4_TYPE2_FILLER:
      f.pos += 1
      return True
    kind, op, n = pk.pm4_header(header)
    if kind != pk.PM4_TYPE3: raise GPUFault(f"PM4 type-{kind} header {header:#010x} at {f.where(f.pos)} (only type 3 and type-2 filler run)")
    if f.pos + 1 + n > f.end:
      if f.is_ring: return False   # the rest of the packet is not submitted yet
      raise GPUFault(f"PM4 packet {header:#010x} at {f.where(f.pos)} runs past the end of its IB ({f.end} dwords)")
    payload, at = [f.word(f.pos + 1 + i) for i in range(n)], f.where(f.pos)
    if op == pk.OP["INDIRECT_BUFFER"]:
      f.pos += 1 + n
      self.indirect_buffer(payload, at)
      return True
    if (handler := self.handlers.get(op)) is None: raise GPUFault(f"unknown PM4 opcode {op:#x} (header {header:#010x}) at {at}")
    try: done = handler(payload)
    except GPUFault as e: raise GPUFault(f"{pk.OP_NAME[op]} at {at}: {e.args[0]}", e.address) from None
    if done: f.pos += 1 + n
    return done

  @staticmethod
  def need(payload: list[int], n: int, name: str) -> None:
    if len(payload) != n: raise GPUFault(f"{name} has {len(payload)} payload dwords, the format has {n}")

  # ---- packets
  def nop(self, p: list[int]) -> bool: return True

  def set_regs(self, p: list[int], start: int, end: int, name: str) -> bool:
    if len(p) < 2: raise GPUFault(f"{name} without a value")
    first = start + (p[0] & 0xFFFF)
    if first + len(p) - 1 > end: raise GPUFault(f"{name} writes registers {first:#x}..{first + len(p) - 2:#x}, past the range's end {end:#x}")
    for i, v in enumerate(p[1:]): self.regs[first + i] = v
    return True
  def set_sh_reg(self, p: list[int]) -> bool: return self.set_regs(p, pk.SH_REG_START, pk.SH_REG_END, "SET_SH_REG")
  def set_uconfig_reg(self, p: list[int]) -> bool: return self.set_regs(p, pk.UCONFIG_REG_START, pk.UCONFIG_REG_END, "SET_UCONFIG_REG")

  def acquire_mem(self, p: list[int]) -> bool:
    self.need(p, pk.ACQUIRE_MEM_PAYLOAD[self.family], f"ACQUIRE_MEM on {self.gpu.arch.name}")
    return True   # the model has no caches to invalidate

  def event_write(self, p: list[int]) -> bool:
    if len(p) not in (1, 3): raise GPUFault(f"EVENT_WRITE has {len(p)} payload dwords (1, or 3 with an address)")
    return True

  def reg(self, name: str) -> int: return self.regs.get(pk.REG[name], 0)

  def dispatch_direct(self, p: list[int]) -> bool:
    self.need(p, pk.DISPATCH_DIRECT_PAYLOAD, "DISPATCH_DIRECT")
    groups, initiator = (p[0], p[1], p[2]), p[3]
    if not initiator >> pk.INIT_COMPUTE_SHADER_EN & 1: raise GPUFault(f"DISPATCH_INITIATOR {initiator:#x} lacks COMPUTE_SHADER_EN")
    if pk.REG["COMPUTE_PGM_LO"] not in self.regs: raise GPUFault("COMPUTE_PGM_LO was never written (no program)")
    starts = [self.reg(f"COMPUTE_START_{a}") for a in "XYZ"]
    if any(starts) and not initiator >> pk.INIT_FORCE_START_AT_000 & 1: raise GPUFault(f"COMPUTE_START {starts} is not modelled (use FORCE_START_AT_000)")
    size = tuple(pk.field(self.reg(f"COMPUTE_NUM_THREAD_{a}"), *pk.NUM_THREAD_FULL) for a in "XYZ")
    if 0 in size: raise GPUFault(f"COMPUTE_NUM_THREAD_X/Y/Z = {size}: a workgroup needs at least one thread per dimension")
    if 0 in groups: return True
    rsrc2 = self.reg("COMPUTE_PGM_RSRC2")
    (shift, width), unit = pk.TMPRING_WAVESIZE[self.family]
    d = Dispatch(arch=self.gpu.arch.name, code_va=(self.reg("COMPUTE_PGM_HI") << 32 | self.reg("COMPUTE_PGM_LO")) << 8,
                 rsrc1=self.reg("COMPUTE_PGM_RSRC1"), rsrc2=rsrc2, rsrc3=self.regs.get(pk.RSRC3[self.family], 0),
                 user_data=tuple(self.regs.get(pk.REG["COMPUTE_USER_DATA_0"] + i, 0) for i in range(pk.USER_DATA_COUNT)),
                 groups=groups, group_size=size, wave32=self.family != "gfx9" and bool(initiator >> pk.INIT_CS_W32_EN & 1),
                 lds_bytes=pk.field(rsrc2, *pk.RSRC2_LDS_SIZE) * pk.LDS_GRANULE,
                 scratch_va=(self.reg("COMPUTE_DISPATCH_SCRATCH_BASE_HI") << 32 | self.reg("COMPUTE_DISPATCH_SCRATCH_BASE_LO")) << 8,
                 scratch_wave_bytes=pk.field(self.reg("COMPUTE_TMPRING_SIZE"), shift, width) * unit)
    self.gpu.dispatch(d)
    return True

  def release_mem(self, p: list[int]) -> bool:
    self.need(p, pk.RELEASE_MEM_PAYLOAD, "RELEASE_MEM")
    sel, addr, data, ctxid = p[1], p[3] << 32 | p[2], p[5] << 32 | p[4], p[6]
    data_sel, int_sel = pk.field(sel, *pk.RELEASE_DATA_SEL), pk.field(sel, *pk.RELEASE_INT_SEL)
    if data_sel == pk.DATA_SEL_LOW32: self.gpu.write(addr, data, 32, "RELEASE_MEM data")
    elif data_sel == pk.DATA_SEL_64: self.gpu.write(addr, data, 64, "RELEASE_MEM data")
    elif data_sel == pk.DATA_SEL_CLOCK: self.gpu.write(addr, self.gpu.clock(), 64, "RELEASE_MEM timestamp")
    elif data_sel != pk.DATA_SEL_NONE: raise GPUFault(f"DATA_SEL {data_sel} (CP perf counter / GDS) is not modelled")
    if int_sel in pk.INT_SEL_INTERRUPTS:
      bits = EOP_CONTEXT_BITS[self.family]
      self.gpu.on_interrupt(ctxid & ((1 << bits) - 1), bits)
    elif int_sel not in (pk.INT_SEL_NONE, 3): raise GPUFault(f"INT_SEL {int_sel} is not modelled")
    return True

  def wait_reg_mem(self, p: list[int]) -> bool:
    self.need(p, pk.WAIT_REG_MEM_PAYLOAD, "WAIT_REG_MEM")
    info, ref, mask = p[0], p[3], p[4]
    func, memory, operation = pk.field(info, *pk.WAIT_FUNCTION), pk.field(info, *pk.WAIT_MEM_SPACE) & 1, pk.field(info, *pk.WAIT_OPERATION)
    if func not in pk.COMPARE: raise GPUFault(f"compare function {func} does not exist")
    if not memory:
      # a register handshake (operation 1: write p[1] then poll p[2], the HDP flush REQ/DONE pair): the model's flush is done at once
      if operation != 1: raise GPUFault(f"a wait on register {p[1]:#x} (operation {operation}) is not modelled")
      return True
    if operation != 0: raise GPUFault(f"operation {operation} on memory (only 0, wait)")
    value = self.gpu.read(p[2] << 32 | p[1], 32, "WAIT_REG_MEM poll")
    return pk.COMPARE[func](value & mask, ref)

  def indirect_buffer(self, p: list[int], at: str) -> None:
    if len(p) != 3: raise GPUFault(f"INDIRECT_BUFFER at {at} has {len(p)} payload dwords, the format has 3")
    base, ctl = (p[1] & 0xFFFF) << 32 | p[0], p[2]
    size, chain = pk.field(ctl, *pk.IB_SIZE), bool(ctl >> pk.IB_CHAIN & 1)
    if p[0] & 3: raise GPUFault(f"INDIRECT_BUFFER at {at}: base {base:#x} is not 4-byte aligned")
    if not ctl >> pk.IB_VALID & 1: raise GPUFault(f"INDIRECT_BUFFER at {at}: control {ctl:#x} lacks the VALID bit 23")
    if size == 0: raise GPUFault(f"INDIRECT_BUFFER at {at}: size 0")
    if chain and self.frames[-1].is_ring: raise GPUFault(f"INDIRECT_BUFFER at {at}: CHAIN from the ring")
    depth = len(self.frames) - 1 + (0 if chain else 1)
    if depth > pk.MAX_IB_DEPTH: raise GPUFault(f"INDIRECT_BUFFER at {at}: nesting depth {depth} (the CP runs IB1 and IB2)")
    try: words = self.gpu.dwords(base, size, "indirect buffer")
    except GPUFault as e: raise GPUFault(f"INDIRECT_BUFFER at {at}: {e.args[0]}", e.address) from None
    if chain: self.frames.pop()
    self.frames.append(Frame(words, 0, size, base, False))

  def write_data(self, p: list[int]) -> bool:
    if len(p) < 4: raise GPUFault(f"WRITE_DATA has {len(p)} payload dwords (control, address lo/hi and data)")
    ctl, addr, data = p[0], p[2] << 32 | p[1], p[3:]
    dst, one_addr = pk.field(ctl, *pk.WRITE_DST_SEL), bool(ctl >> pk.WRITE_ONE_ADDR & 1)
    if dst == pk.DST_SEL_REGISTER:
      for i, v in enumerate(data): self.regs[p[1] + (0 if one_addr else i)] = v
    elif dst in pk.DST_SEL_MEMORY:
      for i, v in enumerate(data): self.gpu.write(addr + (0 if one_addr else 4 * i), v, 32, "WRITE_DATA")
    else: raise GPUFault(f"DST_SEL {dst} is not modelled")
    return True

  def copy_data(self, p: list[int]) -> bool:
    self.need(p, 5, "COPY_DATA")
    ctl, src, dst = p[0], p[2] << 32 | p[1], p[4] << 32 | p[3]
    src_sel, dst_sel, bits = pk.field(ctl, *pk.COPY_SRC_SEL), pk.field(ctl, *pk.COPY_DST_SEL), 64 if ctl >> pk.COPY_COUNT_SEL & 1 else 32
    if src_sel in pk.COPY_SRC_MEMORY: value = self.gpu.read(src, bits, "COPY_DATA source")
    elif src_sel == pk.COPY_SRC_IMMEDIATE: value = src
    elif src_sel == pk.COPY_SRC_CLOCK: value = self.gpu.clock()
    else: raise GPUFault(f"SRC_SEL {src_sel} is not modelled")
    if dst_sel not in pk.DST_SEL_MEMORY: raise GPUFault(f"DST_SEL {dst_sel} is not modelled")
    self.gpu.write(dst, value, bits, "COPY_DATA destination")
    return True
