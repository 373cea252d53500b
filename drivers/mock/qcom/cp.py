"""The Adreno command processor behind the KGSL model: it runs a context's indirect buffers packet by packet,
decoded with the model's own tables (registers.py, from kgsl's adreno_pm4types.h and Mesa's adreno_pm4.xml and
a6xx.xml): type-4 register writes, and the type-7 packets a compute driver needs (state loads into the CS constant
file, texture / sampler / UAV descriptors into the CS tables (descriptors.py says what a dispatch requires of them),
CP_EXEC_CS into the ir3 shader core, event writes, memory waits, writes and copies, nested IBs). Anything else, a bad
parity bit or a packet running past its IB is a fault naming the packet and where it is (IB address, dword).

The GPU sees memory through `Memory`: the ranges kgsl mapped (GPU VA -> host pages); an access outside them faults.
A CP_WAIT_REG_MEM that is not yet met leaves the CP where it is (run() returns False) so the caller can retry."""
from __future__ import annotations
import bisect, time
from dataclasses import dataclass
import numpy as np
from drivers import system
from drivers.mock.qcom import registers as hw
from drivers.mock.qcom.descriptors import Bindings, Loaded

class CPFault(Exception):
  """The CP stopped: a malformed or refused packet, or a memory access outside the GPU's mappings (`address`)."""
  def __init__(self, message: str, address: int | None = None):
    super().__init__(message)
    self.address = address

def clock() -> int:
  """CP_ALWAYS_ON_COUNTER: ticks of the 19.2 MHz always-on clock."""
  return time.perf_counter_ns() * hw.ALWAYS_ON_HZ // 10**9

@dataclass(frozen=True)
class Region:
  va: int
  size: int
  host: int

class Memory:
  """The GPU's view of memory: disjoint GPU VA ranges backed by host pages. load/store are the ir3 core's accessors
  (ir3_execute.GPUFault outside the ranges); read/write/dwords are the CP's (CPFault)."""
  def __init__(self):
    self.regions: list[Region] = []   # sorted by va
  def map(self, va: int, size: int, host: int) -> None:
    if any(r.va < va + size and va < r.va + r.size for r in self.regions): raise ValueError(f"GPU VA {va:#x}+{size:#x} overlaps a mapping")
    bisect.insort(self.regions, Region(va, size, host), key=lambda r: r.va)
  def unmap(self, va: int) -> None: self.regions = [r for r in self.regions if r.va != va]
  def find(self, va: int, nbytes: int) -> Region | None:
    i = bisect.bisect_right(self.regions, va, key=lambda r: r.va) - 1
    return self.regions[i] if i >= 0 and va + nbytes <= self.regions[i].va + self.regions[i].size else None
  def view(self, va: int, nbytes: int, what: str) -> memoryview:
    if (r := self.find(va, nbytes)) is None: raise CPFault(f"GPU page fault: {what} at {va:#x} ({nbytes:#x} bytes) is not mapped", va)
    return system.memoryview_at(r.host + va - r.va, nbytes)
  def read(self, va: int, nbytes: int, what: str) -> int:
    if va % 4: raise CPFault(f"{what} at {va:#x} is not dword aligned", va)
    return int.from_bytes(self.view(va, nbytes, what), "little")
  def write(self, va: int, value: int, nbytes: int, what: str) -> None:
    if va % 4: raise CPFault(f"{what} at {va:#x} is not dword aligned", va)
    self.view(va, nbytes, what)[:] = (value % (1 << 8 * nbytes)).to_bytes(nbytes, "little")
  def dwords(self, va: int, count: int, what: str) -> np.ndarray:
    if va % 4: raise CPFault(f"{what} at {va:#x} is not dword aligned", va)
    return np.frombuffer(self.view(va, 4 * count, what), np.uint32)

  # ---- the shader core's accessors (ir3_execute.run_dispatch)
  def _spans(self, addresses: np.ndarray, nbytes: int):
    """(region, offsets, positions) per region the accesses fall in; GPUFault for the first access outside all."""
    from drivers.mock.qcom.ir3_execute import GPUFault
    addresses = np.asarray(addresses, np.uint64)
    starts = np.array([r.va for r in self.regions], np.uint64)
    idx = np.searchsorted(starts, addresses, side="right").astype(np.int64) - 1
    ends = np.array([r.va + r.size for r in self.regions] + [0], np.uint64)[idx]
    bad = (idx < 0) | (addresses + np.uint64(nbytes) > ends)
    if bad.any():
      a = int(addresses[np.argmax(bad)])
      raise GPUFault(a, f"GPU page fault: shader access of {nbytes} bytes at {a:#x} is not mapped")
    for i in np.unique(idx):
      at = np.nonzero(idx == i)[0]
      r = self.regions[int(i)]
      yield np.frombuffer(system.memoryview_at(r.host, r.size), np.uint8), (addresses[at] - np.uint64(r.va)).astype(np.int64), at
  def load(self, addresses: np.ndarray, nbytes: int) -> np.ndarray:
    out = np.zeros((len(addresses), nbytes), np.uint8)
    for arr, off, at in self._spans(addresses, nbytes): out[at] = arr[off[:, None] + np.arange(nbytes)]
    return out
  def store(self, addresses: np.ndarray, data: np.ndarray) -> None:
    data = np.asarray(data, np.uint8)
    for arr, off, at in self._spans(addresses, data.shape[1]): arr[off[:, None] + np.arange(data.shape[1])] = data[at]

@dataclass
class Frame:
  """An indirect buffer being executed: its dwords, the next one to read, its GPU address."""
  words: np.ndarray
  pos: int
  base: int
  def where(self, i: int) -> str: return f"IB {self.base:#x} dword {i}"

class CP:
  """One context's command processor: its registers, CS constant file and loaded descriptor tables persist across IBs
  (kgsl saves and restores a context's state around context switches)."""
  def __init__(self, gen: int, memory: Memory, max_ib_depth: int = 2):
    self.gen, self.mem = gen, memory
    self.regs: dict[int, int] = {}
    self.reg = hw.REGS[gen]
    self.consts = np.zeros(hw.CONST_FILE_VEC4[gen] * 4, np.uint32)
    self.tables: dict[str, dict[int, Loaded]] = {t: {} for t in hw.TABLE_BASE}
    self.frames: list[Frame] = []
    self.max_ib_depth = max_ib_depth   # IB1 (submitted through kgsl's ringbuffer) and IB2 (CP_INDIRECT_BUFFER from an IB1)
    self.marker: int | None = None
    self.handlers = {"CP_NOP": self.nop, "CP_WAIT_MEM_WRITES": self.no_payload, "CP_WAIT_FOR_ME": self.no_payload,
                     "CP_WAIT_FOR_IDLE": self.no_payload, "CP_SET_MARKER": self.set_marker, "CP_LOAD_STATE6_FRAG": self.load_state,
                     "CP_EXEC_CS": self.exec_cs, "CP_EVENT_WRITE": self.event_write, "CP_EVENT_WRITE7": self.event_write7,
                     "CP_WAIT_REG_MEM": self.wait_reg_mem, "CP_MEM_WRITE": self.mem_write, "CP_REG_TO_MEM": self.reg_to_mem,
                     "CP_MEM_TO_MEM": self.mem_to_mem, "CP_MEMCPY": self.memcpy}

  def start(self, va: int, dwords: int) -> None:
    """Queues an IB1 (what kgsl's ringbuffer calls with CP_INDIRECT_BUFFER_PFE)."""
    self.frames = [Frame(self.mem.dwords(va, dwords, "IB1"), 0, va)]

  def run(self) -> bool:
    """Executes packets until every IB is done (True) or a CP_WAIT_REG_MEM is unmet (False)."""
    while self.frames:
      f = self.frames[-1]
      if f.pos >= len(f.words):
        self.frames.pop()
        continue
      if not self.packet(f): return False
    return True

  def packet(self, f: Frame) -> bool:
    header, at = int(f.words[f.pos]), f.where(f.pos)
    kind = header >> 28
    if kind == hw.TYPE4:
      count, reg = hw.field(header, *hw.PKT4_COUNT), hw.field(header, *hw.PKT4_REG)
      if header >> hw.PKT4_COUNT_PARITY & 1 != hw.odd_parity(count) or header >> hw.PKT4_REG_PARITY & 1 != hw.odd_parity(hw.field(header, *hw.PKT4_PARITY_SPAN)):
        raise CPFault(f"type-4 header {header:#010x} at {at} has a bad parity bit (adreno_pm4types.h pkt_is_type4)")
      payload = self.payload(f, count, f"type-4 write of {count} registers at {reg:#x}")
      for i, v in enumerate(payload):
        self.regs[reg + i] = v
        if reg + i == self.reg["SP_UPDATE_CNTL"]: self.update_cntl(v)
      f.pos += 1 + count
      return True
    if kind != hw.TYPE7: raise CPFault(f"header {header:#010x} at {at} is type {kind}, not a type-4 or type-7 packet")
    count, opcode = hw.field(header, *hw.PKT7_COUNT), hw.field(header, *hw.PKT7_OPCODE)
    if (hw.field(header, *hw.PKT7_RESERVED) or header >> hw.PKT7_COUNT_PARITY & 1 != hw.odd_parity(count)
        or header >> hw.PKT7_OPCODE_PARITY & 1 != hw.odd_parity(opcode)):
      raise CPFault(f"type-7 header {header:#010x} at {at} has a bad parity bit or reserved bits set (adreno_pm4types.h pkt_is_type7)")
    name = hw.op_name(opcode, self.gen)
    payload = self.payload(f, count, name)
    if name == "CP_INDIRECT_BUFFER":
      f.pos += 1 + count
      return self.indirect_buffer(payload, at)
    if (handler := self.handlers.get(name)) is None: raise CPFault(f"{name} (header {header:#010x}) at {at} is not a packet the model runs")
    try: done = handler(payload)
    except CPFault as e: raise CPFault(f"{name} at {at}: {e}", e.address) from None
    if done: f.pos += 1 + count
    return done

  @staticmethod
  def payload(f: Frame, count: int, what: str) -> list[int]:
    if f.pos + 1 + count > len(f.words): raise CPFault(f"{what} at {f.where(f.pos)} has {count} payload dwords, past the IB's end ({len(f.words)} dwords)")
    return [int(w) for w in f.words[f.pos + 1:f.pos + 1 + count]]

  def value(self, name: str) -> int: return self.regs.get(self.reg[name], 0)
  def value64(self, name: str) -> int: return self.value(name) | self.value(name + "_HI") << 32
  def fields(self, name: str) -> dict[str, int]: return hw.fields_of(name, self.value(name))
  @staticmethod
  def need(p: list[int], n: int, what: str) -> None:
    if len(p) != n: raise CPFault(f"{len(p)} payload dwords; {what} has {n}")

  # ---- packets
  def nop(self, p: list[int]) -> bool: return True
  def no_payload(self, p: list[int]) -> bool:
    self.need(p, 0, "this packet")
    return True

  def set_marker(self, p: list[int]) -> bool:
    self.need(p, 1, "CP_SET_MARKER")
    if not p[0] >> hw.MARKER_MODE_BIT & 1:
      if (mode := hw.field(p[0], *hw.MARKER_MODE)) not in hw.MARKERS: raise CPFault(f"render mode {mode} is no a6xx_marker value")
      self.marker = mode
    return True

  def indirect_buffer(self, p: list[int], at: str) -> bool:
    if len(p) != 3: raise CPFault(f"CP_INDIRECT_BUFFER at {at} has {len(p)} payload dwords; the packet has 3 (IB_BASE, IB_SIZE)")
    base, size = p[0] | p[1] << 32, hw.field(p[2], *hw.IB_SIZE)
    if len(self.frames) >= self.max_ib_depth: raise CPFault(f"CP_INDIRECT_BUFFER at {at}: IB{len(self.frames) + 1} (the CP runs IB1 and IB2)")
    try: words = self.mem.dwords(base, size, "indirect buffer")
    except CPFault as e: raise CPFault(f"CP_INDIRECT_BUFFER at {at}: {e}", e.address) from None
    self.frames.append(Frame(words, 0, base))
    return True

  def update_cntl(self, value: int) -> None:
    """a6xx.xml SP_UPDATE_CNTL "clears pending loads queued up by CP_LOAD_STATE6": CS_STATE the CS textures and
    samplers, CS_UAV the CS UAVs."""
    f = hw.fields_of("SP_UPDATE_CNTL", value)
    if f["CS_STATE"]:
      self.tables["texture"].clear()
      self.tables["sampler"].clear()
    if f["CS_UAV"]: self.tables["uav"].clear()

  def load_state(self, p: list[int]) -> bool:
    if not p: raise CPFault("no payload")
    dst, kind, src, block, units = (hw.field(p[0], *f) for f in (hw.LS6_DST_OFF, hw.LS6_STATE_TYPE, hw.LS6_STATE_SRC, hw.LS6_STATE_BLOCK, hw.LS6_NUM_UNIT))
    what = f"{hw.ST6[kind]} {hw.SS6[src]} {hw.SB6.get(block, block)}"
    if (table := hw.DESCRIPTOR_TABLES.get((block, kind))) is not None: return self.load_descriptors(p, table, dst, units, src, what)
    if block != hw.SB6_CS_SHADER or kind not in (hw.ST6_SHADER, hw.ST6_CONSTANTS):
      raise CPFault(f"{what} is not modelled (CS constants, shaders, textures, samplers and UAVs are)")
    if kind == hw.ST6_SHADER and units > hw.INSTR_CACHE_UNITS[self.gen]:
      raise CPFault(f"{what}: a preload of {units} units; the instruction cache holds {hw.INSTR_CACHE_UNITS[self.gen]} (a larger load hangs the GPU)")
    unit = hw.CONST_UNIT_BYTES if kind == hw.ST6_CONSTANTS else hw.SHADER_UNIT_BYTES
    if src == hw.SS6_INDIRECT: data = self.mem.dwords(self.source_address(p, what), units * unit // 4, what)
    elif src == hw.SS6_DIRECT and kind == hw.ST6_CONSTANTS:
      self.need(p, 1 + units * unit // 4, f"{what} of {units} vec4")
      data = np.array(p[1:], np.uint32)
    else: raise CPFault(f"{what} is not modelled (constants direct or indirect, shaders indirect)")
    if kind == hw.ST6_CONSTANTS:
      if (dst + units) * 4 > len(self.consts): raise CPFault(f"{what}: vec4 {dst}..{dst + units - 1} is past the {len(self.consts) // 4}-vec4 constant file")
      self.consts[dst * 4:(dst + units) * 4] = data
    return True

  def source_address(self, p: list[int], what: str) -> int:
    """The memory address an SS6_INDIRECT load reads from: EXT_SRC_ADDR (bits 31:2) and EXT_SRC_ADDR_HI."""
    self.need(p, 3, f"{what} (dword 0 and EXT_SRC_ADDR)")
    if p[1] & 3: raise CPFault(f"EXT_SRC_ADDR {p[1]:#x}: bits 1:0 are not part of the address (EXT_SRC_ADDR 31:2)")
    return p[1] | p[2] << 32

  def load_descriptors(self, p: list[int], table: str, dst: int, units: int, src: int, what: str) -> bool:
    """Copy `units` descriptors from memory into slots dst.. of a CS table, remembering where each came from."""
    if src != hw.SS6_INDIRECT: raise CPFault(f"{what}: {table} descriptors are modelled from memory only (SS6_INDIRECT, as Mesa loads them)")
    n, addr = hw.DESCRIPTOR_DWORDS[table], self.source_address(p, what)
    data = [int(v) for v in self.mem.dwords(addr, units * n, what)]
    for i in range(units): self.tables[table][dst + i] = Loaded(tuple(data[i * n:(i + 1) * n]), addr + 4 * n * i)
    return True

  def bindings(self) -> Bindings:
    """The descriptor state a dispatch starting now sees."""
    return Bindings(self.fields("SP_CS_CONFIG"), self.fields("SP_CS_TSIZE")["COUNT"], self.fields("SP_CS_USIZE")["COUNT"],
                    self.fields("SP_MODE_CNTL")["ISAMMODE"], {t: self.value64(reg) for t, (reg, _) in hw.TABLE_BASE.items()},
                    {t: dict(slots) for t, slots in self.tables.items()})

  def exec_cs(self, p: list[int]) -> bool:
    self.need(p, 4, "CP_EXEC_CS (0, NGROUPS_X/Y/Z)")
    groups = (p[1], p[2], p[3])
    cntl0, nd, ids = self.fields("SP_CS_CNTL_0"), self.fields("SP_CS_NDRANGE_0"), self.fields(hw.IDS_REG[self.gen])
    if cntl0["MERGEDREGS"]: raise CPFault("SP_CS_CNTL_0.MERGEDREGS=1 (merged full/half register files) is not modelled")
    if self.value("SP_CS_PROGRAM_COUNTER_OFFSET"): raise CPFault(f"SP_CS_PROGRAM_COUNTER_OFFSET {self.value('SP_CS_PROGRAM_COUNTER_OFFSET'):#x} is not modelled (0 is)")
    base, size = self.value64("SP_CS_BASE"), self.value("SP_CS_INSTR_SIZE") * hw.SHADER_UNIT_BYTES
    if not size: raise CPFault("SP_CS_INSTR_SIZE is 0: no shader")
    if base % 32: raise CPFault(f"SP_CS_BASE {base:#x} is not 32-byte aligned (a6xx.xml SP_CS_BASE align 32)")
    code = bytes(self.mem.view(base, size, "the shader (SP_CS_BASE, SP_CS_INSTR_SIZE)"))
    local = (nd["LOCALSIZEX"] + 1, nd["LOCALSIZEY"] + 1, nd["LOCALSIZEZ"] + 1)
    cntl1, constlen = self.fields("SP_CS_CNTL_1"), self.fields("SP_CS_CONST_CONFIG")["CONSTLEN"] << hw.CONSTLEN_SHR
    shared, ram = cntl1["SHARED_SIZE"], hw.CONSTANT_RAM_VEC4[cntl1["CONSTANTRAMMODE"]]
    # a6xx.xml SP_CS_CNTL_1.CONSTANTRAMMODE: "must be at least the actual CONSTLEN"; SP_CS_WGE_CNTL.THREADSIZE "Must match"
    if ram < constlen: raise CPFault(f"SP_CS_CNTL_1.CONSTANTRAMMODE ({ram} vec4) is below SP_CS_CONST_CONFIG.CONSTLEN ({constlen} vec4)")
    if self.fields("SP_CS_WGE_CNTL")["THREADSIZE"] != cntl0["THREADSIZE"]:
      raise CPFault(f"SP_CS_WGE_CNTL.THREADSIZE {self.fields('SP_CS_WGE_CNTL')['THREADSIZE']} does not match SP_CS_CNTL_0.THREADSIZE {cntl0['THREADSIZE']}")
    if 0 in groups: return True
    try: from drivers.mock.qcom import ir3_execute
    except ImportError as e: raise CPFault(f"the ir3 shader core is not available ({e})") from None
    try:
      ir3_execute.run_dispatch(code, self.gen, groups, local, self.consts[:constlen * 4].copy(), self.mem, cntl0["FULLREGFOOTPRINT"],
                               cntl0["HALFREGFOOTPRINT"], shared and (shared + 1) * hw.SHARED_SIZE_UNIT or hw.SHARED_SIZE_ALL,
                               ids["WGIDCONSTID"], ids["LOCALIDREGID"], self.bindings())
    except ir3_execute.GPUFault as e: raise CPFault(f"shader fault: {e}", getattr(e, "address", None)) from None
    except ir3_execute.ShaderHazard as e: raise CPFault(f"shader hazard: {e}") from None
    return True

  def event_write(self, p: list[int]) -> bool:
    event = hw.field(p[0], *hw.EV_EVENT) if p else None
    if event not in hw.EVENTS[6]: raise CPFault(f"event {event} is not one the model knows")
    name = hw.EVENTS[6][event]
    if len(p) == 1 or not name.endswith("_TS"): return True
    if p[0] >> hw.EV_TIMESTAMP & 1:
      self.need(p, 3, f"{name} with TIMESTAMP (event, ADDR)")
      self.mem.write(p[1] | p[2] << 32, clock(), 8, f"{name} timestamp")
    else:
      self.need(p, 4, f"{name} (event, ADDR, value)")
      self.mem.write(p[1] | p[2] << 32, p[3], 4, f"{name} value")
    return True

  def event_write7(self, p: list[int]) -> bool:
    event = hw.field(p[0], *hw.EV_EVENT) if p else None
    if event not in hw.EVENTS[7]: raise CPFault(f"event {event} is not one the model knows")
    if not p[0] >> hw.EV7_WRITE_ENABLED & 1: return True
    name, src = hw.EVENTS[7][event], hw.field(p[0], *hw.EV7_WRITE_SRC)
    if p[0] >> hw.EV7_WRITE_DST & 1: raise CPFault(f"{name}: WRITE_DST EV_DST_ONCHIP is not modelled")
    words = {0: 4, 1: 5, 3: 3}
    if src not in words: raise CPFault(f"{name}: WRITE_SRC {hw.EV7_SRC.get(src, src)} is not modelled")
    self.need(p, words[src], f"{name} with {hw.EV7_SRC[src]}")
    addr = p[1] | p[2] << 32
    if src == 3: self.mem.write(addr, clock(), 8, f"{name} always-on counter")
    else: self.mem.write(addr, p[3] if src == 0 else p[3] | p[4] << 32, 4 << src, f"{name} payload")
    return True

  def wait_reg_mem(self, p: list[int]) -> bool:
    self.need(p, hw.WAIT_PAYLOAD, "CP_WAIT_REG_MEM")
    func, poll = hw.field(p[0], *hw.WAIT_FUNCTION), hw.field(p[0], *hw.WAIT_POLL)
    if func not in hw.FUNCTIONS: raise CPFault(f"FUNCTION {func} is no cp_cond_function")
    if p[0] >> hw.WAIT_WRITE_MEMORY & 1: raise CPFault("WRITE_MEMORY is not modelled")
    if poll == hw.POLL_MEMORY: value = self.mem.read(p[1] | p[2] << 32, 4, "poll")
    elif poll == hw.POLL_REGISTER: value = self.read_reg(p[1])
    else: raise CPFault(f"POLL {poll} (scratch / on-chip) is not modelled")
    value, ref = value & p[4], p[3]
    if p[0] >> hw.WAIT_SIGNED & 1: value, ref = (value ^ 1 << 31) - (1 << 31), (ref ^ 1 << 31) - (1 << 31)
    return hw.FUNCTIONS[func][1](value, ref)

  def read_reg(self, reg: int, now: int | None = None) -> int:
    counter = self.reg["CP_ALWAYS_ON_COUNTER"]
    if reg in (counter, counter + 1): return ((now if now is not None else clock()) >> (32 * (reg - counter))) & 0xFFFFFFFF
    return self.regs.get(reg, 0)

  def mem_write(self, p: list[int]) -> bool:
    if len(p) < 3: raise CPFault(f"{len(p)} payload dwords; CP_MEM_WRITE needs ADDR (2) and data")
    for i, v in enumerate(p[2:]): self.mem.write((p[0] | p[1] << 32) + 4 * i, v, 4, "data")
    return True

  def reg_to_mem(self, p: list[int]) -> bool:
    self.need(p, 3, "CP_REG_TO_MEM (dword 0, DEST)")
    if p[0] >> hw.R2M_ACCUMULATE & 1: raise CPFault("ACCUMULATE is not modelled")
    reg, n = hw.field(p[0], *hw.R2M_REG), max(hw.field(p[0], *hw.R2M_CNT), 1)
    if p[0] >> hw.R2M_64B & 1: n += n % 2    # 64B: whole 64-bit values (adreno_pm4.xml CP_REG_TO_MEM 64B)
    now = clock()   # one read of the counter, so a 64-bit copy is consistent
    for i in range(n): self.mem.write((p[1] | p[2] << 32) + 4 * i, self.read_reg(reg + i, now), 4, "DEST")
    return True

  def mem_to_mem(self, p: list[int]) -> bool:
    if len(p) < 5 or (len(p) - 3) % 2: raise CPFault(f"{len(p)} payload dwords; CP_MEM_TO_MEM has dword 0, DST and one or more SRC addresses")
    nbytes = 8 if p[0] >> hw.M2M_DOUBLE & 1 else 4
    total = 0
    for i, at in enumerate(range(3, len(p), 2)):
      v = self.mem.read(p[at] | p[at + 1] << 32, nbytes, f"SRC_{'ABCDEFGH'[i]}")
      total += -v if i < 3 and p[0] >> i & 1 else v   # NEG_A/B/C negate the first three sources
    self.mem.write(p[1] | p[2] << 32, total, nbytes, "DST")
    return True

  def memcpy(self, p: list[int]) -> bool:
    # adreno_pm4.xml domain CP_MEMCPY: DWORDS, SRC_LO, SRC_HI, DST_LO, DST_HI (variants A6XX-)
    self.need(p, 5, "CP_MEMCPY (DWORDS, SRC, DST)")
    n, src, dst = p[0], p[1] | p[2] << 32, p[3] | p[4] << 32
    data = self.mem.dwords(src, n, "SRC").copy()   # the model's own choice: overlapping ranges copy as if read first (Mesa is silent)
    self.mem.dwords(dst, n, "DST")[:] = data
    return True
