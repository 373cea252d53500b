"""The GPU behind the NV model: its identity per architecture (classes, SM version, PCI id), its memory as the GPU
sees it (a page table from GPU virtual ranges to host pages), and its front end: channels whose GPFIFO rings a poll
thread consumes (USERD GPGet +0x88 / GPPut +0x8C), decoding push buffers into method writes for the host (semaphores),
compute (QMD launches: the PTX a mock cubin carries, run on the PTX interpreter) and copy (LAUNCH_DMA) classes (docs/nv.md §2-§4).
Every format is read with the model's own tables of NVIDIA's class headers (class_headers.py), never the driver's.

Faults stop the channel where they happen (GPGet stays on the faulting entry), append a message to `faults` and fill
the channel's error notifier (NvNotification: u64 ns timestamp, u32 info32 = the Xid-like code below, u16 info16 = 0,
u16 status = 0xFFFF):
  13 XID_ENGINE      a compute or copy class rejected a method, a QMD or a launch (the program raised, bad sizes)
  31 XID_MMU         an access to a GPU virtual address that no mapping covers
  32 XID_PUSHBUFFER  a malformed push buffer or GPFIFO state, an unknown host method, a method on an unbound subchannel
"""
from __future__ import annotations
import bisect, ctypes, errno, hashlib, os, struct, threading, time
from dataclasses import dataclass, field
import cffi
import numpy as np
from ir.helpers import prod
from ir.switches import getenv
from drivers import system
from drivers.nv import rm_abi as rm
from drivers.mock.nv import class_headers as hw
from drivers.mock.nv.ptx_interpreter import ArrayMemory, PTXError, PTXFault, PTXModule
from drivers.mock.nv.toolchain import PROGRAM_MAGIC, param_offset

XID_ENGINE, XID_MMU, XID_PUSHBUFFER = 13, 31, 32
HOT_POLL_S, IDLE_SLEEP_S, IDLE_LONG_S, DOZE_S = 0.005, 0.0002, 0.1, 0.002  # spin after work, then nap, then doze when long idle
USERMODE_BYTES = 0x10000
NOTIFY_CHANNEL_PENDING = 0x90             # in the usermode window (open-gpu-doc classes/host/clc361.h NVC361_NOTIFY_CHANNEL_PENDING)
MAX_CHAIN = 1 << 16                       # dependent-QMD launches followed from one launch (a cycle faults, not hangs)

@dataclass(frozen=True)
class Arch:
  name: str
  sm_version: int                # GR_GET_INFO SM_VERSION: major << 8 | minor
  pci_device: int
  max_warps_per_sm: int
  gpfifo: tuple[int, ...]
  compute: int
  dma: int
  usermode: tuple[int, ...]
  gpcs: int = 1
  tpc_per_gpc: int = 2
  sm_per_tpc: int = 2
  @property
  def sm(self) -> int: return (self.sm_version >> 8) * 10 + (self.sm_version & 0xff)
  @property
  def param_offset(self) -> int: return param_offset(self.sm)
  @property
  def classes(self) -> tuple[int, ...]:
    """The device's class list (GET_CLASSLIST), which is also what RM_ALLOC accepts."""
    return (rm.NV01_DEVICE_0, rm.NV20_SUBDEVICE_0, rm.NV01_MEMORY_SYSTEM, rm.NV01_MEMORY_LOCAL_USER, rm.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
            rm.FERMI_CONTEXT_SHARE_A, rm.FERMI_VASPACE_A, rm.KEPLER_CHANNEL_GROUP_A, *self.gpfifo, self.compute, self.dma, *self.usermode)

ARCHS = {
  "ampere": Arch("ampere", 0x806, 0x2204, 48, (rm.AMPERE_CHANNEL_GPFIFO_A,), rm.AMPERE_COMPUTE_B, rm.AMPERE_DMA_COPY_B,
                 (rm.TURING_USERMODE_A, rm.AMPERE_USERMODE_A)),
  "ada": Arch("ada", 0x809, 0x2684, 48, (rm.AMPERE_CHANNEL_GPFIFO_A,), rm.ADA_COMPUTE_A, rm.AMPERE_DMA_COPY_B,
              (rm.TURING_USERMODE_A, rm.AMPERE_USERMODE_A)),
  "hopper": Arch("hopper", 0x900, 0x2335, 64, (rm.HOPPER_CHANNEL_GPFIFO_A, rm.AMPERE_CHANNEL_GPFIFO_A), rm.HOPPER_COMPUTE_A,
                 rm.HOPPER_DMA_COPY_A, (rm.HOPPER_USERMODE_A, rm.TURING_USERMODE_A)),
  "blackwell": Arch("blackwell", 0xa00, 0x2901, 64, (rm.BLACKWELL_CHANNEL_GPFIFO_A,), rm.BLACKWELL_COMPUTE_A, rm.BLACKWELL_DMA_COPY_A,
                    (rm.HOPPER_USERMODE_A,)),
}

class GPUFault(Exception):
  def __init__(self, xid: int, message: str):
    super().__init__(message)
    self.xid = xid

# ---------------- host pages

_ffi = cffi.FFI()
_ffi.cdef("void *mremap(void *old_address, size_t old_size, size_t new_size, int flags, ...);")
_libc = _ffi.dlopen(None)
MREMAP_MAYMOVE, MREMAP_FIXED = 1, 2

def _shared_pages(size: int) -> int:
  """Fresh zeroed MAP_SHARED pages: unlike private ones they can be mapped a second time (a CPU mapping)."""
  addr = int(system.ffi.cast("uintptr_t", system.libc.mmap(system.ffi.NULL, size, system.PROT_READ | system.PROT_WRITE,
                                                             system.MAP_SHARED | system.MAP_ANONYMOUS, -1, 0)))
  if addr == 2**64 - 1: raise OSError(errno.ENOMEM, f"can't allocate {size} bytes of model memory")
  return addr

def page_span(addr: int, length: int) -> tuple[int, int]:
  """(start, size) of the whole pages that hold [addr, addr+length)."""
  start = addr & ~(system.PAGE_SIZE - 1)
  return start, -(-(addr - start + length) // system.PAGE_SIZE) * system.PAGE_SIZE

class Memory:
  """The pages behind an RM memory object: the model's own (vidmem, sysmem, usermode) or the user's (OS descriptor).
  Pins (GPU mappings, channels using it as USERD or notifier) keep the model's pages alive after RM_FREE."""
  def __init__(self, size: int, host: int | None = None):
    self.size, self.owned = size, host is None
    self.host = _shared_pages(size) if host is None else host
    self.pins, self.freed = 0, False
  def alias(self, offset: int, length: int, at: int | None = None) -> int:
    """A second host mapping of [offset, offset+length) (at `at` if given): the CPU mapping RM_MAP_MEMORY + mmap make."""
    start, size = page_span(self.host + offset, length)
    args = (MREMAP_MAYMOVE | MREMAP_FIXED, _ffi.cast("void *", at)) if at is not None else (MREMAP_MAYMOVE,)
    addr = int(_ffi.cast("uintptr_t", _libc.mremap(_ffi.cast("void *", start), 0, size, *args)))
    if addr == 2**64 - 1: raise OSError(_ffi.errno, f"can't map {length} bytes of model memory a second time")
    return addr + (self.host + offset - start)
  def pin(self) -> None: self.pins += 1
  def unpin(self) -> None:
    self.pins -= 1
    self.release()
  def free(self) -> None:
    self.freed = True
    self.release()
  def release(self) -> None:
    if self.owned and self.freed and not self.pins and self.host:
      system.munmap(self.host, self.size)
      self.host = 0

@dataclass(frozen=True)
class Mapping:
  va: int
  size: int
  mem: Memory
  offset: int
  @property
  def host(self) -> int: return self.mem.host + self.offset

# ---------------- channels

@dataclass(eq=False)
class Tsg:
  scheduled: bool = False

@dataclass(eq=False)
class Channel:
  name: str
  cls: int                 # the GPFIFO class
  token: int               # work-submit token
  ring: int                # GPU VA of the GPFIFO ring
  entries: int
  userd: Memory
  userd_offset: int
  notifier: Memory
  tsg: Tsg
  objects: set[int] = field(default_factory=set)           # engine classes allocated on the channel
  bound: dict[int, int] = field(default_factory=dict)      # subchannel -> class (SET_OBJECT)
  regs: dict[int, dict[int, int]] = field(default_factory=dict)  # subchannel -> method -> last value; host methods under -1
  inline: bytearray = field(default_factory=bytearray)     # LOAD_INLINE_QMD_DATA so far
  running: list[tuple] = field(default_factory=list)       # launched grids nothing has waited for yet: (class format, registers, QMD VA)
  work: list[tuple[int, int, int]] | None = None           # the method writes of the entry being executed
  at: int = 0                                              # next method write of `work`
  faulted: bool = False
  started: bool = False    # a doorbell write with the channel's token was seen
  @property
  def runnable(self) -> bool: return self.tsg.scheduled and self.started and not self.faulted
  def userd_word(self, offset: int) -> memoryview: return system.memoryview_at(self.userd.host + self.userd_offset + offset, 4).cast("I")

# SEND_SIGNALING_PCAS2_B actions that schedule the QMD SEND_PCAS_A names (the others only prefetch, invalidate or count)
LAUNCH_ACTIONS = {hw.PCAS_ACTION[a] for a in ("SCHEDULE", "INVALIDATE_COPY_SCHEDULE", "PREFETCH_SCHEDULE", "INVALIDATE_PREFETCH_COPY_SCHEDULE",
                                              "INVALIDATE_PREFETCH_COPY_FORCE_REQUIRE_SCHEDULING")}
HOST_NOPS = {"NON_STALL_INTERRUPT", "MEM_OP_A", "MEM_OP_B", "MEM_OP_C", "MEM_OP_D"}  # accepted; nothing to do in the model
HOST_REGS = {"SEM_ADDR_LO", "SEM_ADDR_HI", "SEM_PAYLOAD_LO", "SEM_PAYLOAD_HI"}
ACQUIRES = {hw.SEM_ACQUIRE: lambda cur, want, bits: cur == want,
            hw.SEM_ACQ_STRICT_GEQ: lambda cur, want, bits: cur >= want,
            hw.SEM_ACQ_CIRC_GEQ: lambda cur, want, bits: (cur - want) % (1 << bits) < 1 << (bits - 1),
            hw.SEM_ACQ_AND: lambda cur, want, bits: cur & want != 0,
            hw.SEM_ACQ_NOR: lambda cur, want, bits: ~(cur | want) % (1 << bits) != 0}

def _field(fmt: hw.ClassFormat, regs: dict[int, int], method: str, name: str) -> int:
  """Field `name` of the last value written to `method` (0 if it never was): the class's own width, higher bits dropped."""
  return fmt.get(method, name, regs.get(fmt.offset(method), 0))

def _reg64(fmt: hw.ClassFormat, regs: dict[int, int], upper: tuple[str, str], lower: tuple[str, str]) -> int | None:
  """An address split over an upper and a lower (method, field); None when neither was written."""
  if fmt.offset(upper[0]) not in regs and fmt.offset(lower[0]) not in regs: return None
  return _field(fmt, regs, *upper) << 32 | _field(fmt, regs, *lower)

class GPU:
  """Memory translation and the front end. Everything runs under `lock` (the model's ioctls take it too)."""
  def __init__(self, arch: Arch, lock: threading.RLock | None = None):
    self.arch = arch
    self.lock = lock or threading.RLock()  # GPUs of one model share it with the model's ioctls
    self.maps: list[Mapping] = []   # sorted by va, disjoint
    self.channels: list[Channel] = []
    self.faults: list[str] = []
    self.memory = ArrayMemory()  # every mapping, as the PTX interpreter addresses global memory
    self.usermode = Memory(USERMODE_BYTES)  # the one usermode register window every usermode object maps
    self.usermode.pin()
    self._thread: threading.Thread | None = None
    self._stop = threading.Event()
    self._puts: dict[int, int] = {}  # work-submit token -> the channel's GP_PUT when the doorbell was last read

  # ---- memory
  def map(self, va: int, size: int, mem: Memory, offset: int) -> None:
    """GPU VAs [va, va+size) now reach `mem` from `offset`, replacing whatever was mapped there."""
    with self.lock:
      self.unmap(va, size)
      bisect.insort(self.maps, Mapping(va, size, mem, offset), key=lambda m: m.va)
      mem.pin()
      self.memory.add(va, np.frombuffer(system.memoryview_at(mem.host + offset, size), np.uint8))

  def unmap(self, va: int, size: int) -> None:
    """Drops the mappings that start inside [va, va+size) (UVM maps and frees whole ranges)."""
    with self.lock:
      for m in [m for m in self.maps if va <= m.va < va + size]:
        self.maps.remove(m)
        self.memory.remove(m.va)
        m.mem.unpin()

  def mapping(self, va: int, nbytes: int, what: str) -> Mapping:
    i = bisect.bisect_right(self.maps, va, key=lambda m: m.va) - 1
    m = self.maps[i] if i >= 0 else None
    if m is None or va + nbytes > m.va + m.size: raise GPUFault(XID_MMU, f"MMU fault: {what} at GPU VA {va:#x} ({nbytes:#x} bytes) is not mapped")
    return m

  def host(self, va: int, nbytes: int, what: str = "access") -> int:
    """The host address behind GPU VAs [va, va+nbytes) (one mapping must cover them all)."""
    m = self.mapping(va, nbytes, what)
    return m.host + va - m.va

  def view(self, va: int, nbytes: int, what: str = "access") -> memoryview: return system.memoryview_at(self.host(va, nbytes, what), nbytes)

  def array(self, va: int, what: str = "access") -> np.ndarray:
    """Bytes from `va` to the end of its mapping, as a numpy uint8 array."""
    m = self.mapping(va, 1, what)
    return np.frombuffer(system.memoryview_at(m.host + va - m.va, m.va + m.size - va), np.uint8)

  def read(self, va: int, bits: int, what: str = "read") -> int: return int.from_bytes(self.view(va, bits // 8, what), "little")
  def write(self, va: int, value: int, bits: int, what: str = "write") -> None:
    if va % (bits // 8): raise GPUFault(XID_ENGINE, f"{bits}-bit {what} at unaligned GPU VA {va:#x}")
    self.view(va, bits // 8, what).cast("Q" if bits == 64 else "I")[0] = value % (1 << bits)

  def release(self, va: int, payload: int, bits: int, timestamp: bool, what: str) -> None:
    """A semaphore release: the timestamp (ns) at va+8 first, so that a reader who sees the payload sees it too."""
    if timestamp: self.write(va + 8, time.perf_counter_ns(), 64, f"{what} timestamp")
    self.write(va, payload, bits, what)

  # ---- channels and the poll thread
  def add_channel(self, ch: Channel) -> None:
    with self.lock:
      self.channels.append(ch)
      ch.userd.pin()
      ch.notifier.pin()

  def remove_channel(self, ch: Channel) -> None:
    with self.lock:
      self.channels.remove(ch)
      ch.userd.unpin()
      ch.notifier.unpin()

  def start(self) -> None:
    if self._thread is None:
      self._thread = threading.Thread(target=self._poll, name=f"nv-model-{self.arch.name}", daemon=True)
      self._thread.start()

  def stop(self) -> None:
    self._stop.set()
    if self._thread is not None: self._thread.join()

  def _poll(self) -> None:
    last_work = time.perf_counter()
    while not self._stop.is_set():
      with self.lock:
        self.doorbell()
        worked = [self.step(ch) for ch in list(self.channels) if ch.runnable]
      now = time.perf_counter()
      if any(worked): last_work = now
      idle = now - last_work
      time.sleep(0 if idle < HOT_POLL_S else IDLE_SLEEP_S if idle < IDLE_LONG_S else DOZE_S)

  def doorbell(self) -> None:
    """A work-submit token in NOTIFY_CHANNEL_PENDING starts its channel. The hardware sees every write; the model reads
    the word between writes, so it clears the word after reading it, and a valid token also starts each channel whose
    GP_PUT moved since the last look (its own ring may be the write the latest one overwrote)."""
    word = system.memoryview_at(self.usermode.host + NOTIFY_CHANNEL_PENDING, 4).cast("I")
    token, word[0] = int(word[0]), 0
    puts = {ch.token: int(ch.userd_word(hw.USERD[ch.cls]["GP_PUT"])[0]) for ch in self.channels}
    moved, self._puts = [ch for ch in self.channels if puts[ch.token] != self._puts.get(ch.token, 0)], puts
    if not token: return
    if (rung := next((c for c in self.channels if c.token == token), None)) is None:
      if (msg := f"doorbell rung with work-submit token {token:#x}, which no channel has") not in self.faults: self.faults.append(msg)
      return
    for ch in (rung, *moved): ch.started = True

  def step(self, ch: Channel) -> bool:
    """Executes the channel's pending entries until it runs dry, waits on an acquire or faults; True if it did anything."""
    worked, where = False, "GPFIFO"
    try:
      while True:
        get, put = ch.userd_word(hw.USERD[ch.cls]["GP_GET"])[0], ch.userd_word(hw.USERD[ch.cls]["GP_PUT"])[0]
        if ch.work is None:
          if get == put:
            self.finish_grids(ch)  # the GPU finishes them in its own time: before anything later is seen
            return worked
          where = f"GPFIFO entry {get}"
          if put >= ch.entries: raise GPUFault(XID_PUSHBUFFER, f"GPPut {put} is past the ring's {ch.entries} entries")
          entry = hw.gp_entry(self.read(ch.ring + 8 * get, 64, "GPFIFO entry"))
          if not entry.length and entry.opcode != hw.GP_OPCODE["NOP"]:  # LENGTH 0 is a control entry (dev_pbdma.ref)
            raise GPUFault(XID_PUSHBUFFER, f"GPFIFO control entry with opcode {entry.opcode} (the model runs only NOP)")
          words = np.frombuffer(self.view(entry.address, 4 * entry.length, "push buffer"), np.uint32).tolist() if entry.length else []
          try: ch.work, ch.at = list(hw.method_writes(words)), 0
          except hw.PushBufferError as e: raise GPUFault(XID_PUSHBUFFER, f"malformed push buffer at {entry.address:#x}: {e}") from None
        while ch.at < len(ch.work):
          subc, method, value = ch.work[ch.at]
          where = f"GPFIFO entry {get}, method {method:#x} = {value:#x} on subchannel {subc}"
          if not self.method(ch, subc, method, value):
            self.finish_grids(ch)
            return worked
          ch.at, worked = ch.at + 1, True
        ch.work, worked = None, True
        ch.userd_word(hw.USERD[ch.cls]["GP_GET"])[0] = (get + 1) % ch.entries
    except GPUFault as e: self.fault(ch, e.xid, f"{e} [{where}]")
    except Exception as e: self.fault(ch, XID_ENGINE, f"{type(e).__name__}: {e} [{where}]")  # a model bug must not kill the thread
    return True

  def fault(self, ch: Channel, xid: int, message: str) -> None:
    ch.faulted = True
    self.faults.append(f"channel {ch.name}: {message}")
    if ch.notifier.host: struct.pack_into("<QIHH", system.memoryview_at(ch.notifier.host, 16), 0, time.perf_counter_ns(), xid, 0, 0xFFFF)

  def method(self, ch: Channel, subc: int, method: int, value: int) -> bool:
    """One method write; False when the channel must wait here (an unsatisfied acquire)."""
    if method < 0x100: return self.host_method(ch, subc, method, value)
    if (cls := ch.bound.get(subc)) is None: raise GPUFault(XID_PUSHBUFFER, f"method {method:#x} on subchannel {subc}, which has no class bound")
    if (fmt := hw.CLASSES.get(cls)) is None or fmt.engine == "host": raise GPUFault(XID_ENGINE, f"class {cls:#x} is no engine class the model runs")
    if (name := fmt.at.get(method)) is None: raise GPUFault(XID_ENGINE, f"class {cls:#x} has no method {method:#x} (or the model lacks it)")
    regs = ch.regs.setdefault(subc, {})
    regs[method] = value
    if fmt.engine == "copy":
      if name == "LAUNCH_DMA": self.launch_dma(fmt, regs, value)
    elif name == "SEND_SIGNALING_PCAS2_B" and fmt.get(name, "PCAS_ACTION", value) in LAUNCH_ACTIONS:
      if fmt.offset("SEND_PCAS_A") not in regs: raise GPUFault(XID_ENGINE, "SEND_SIGNALING_PCAS2_B without SEND_PCAS_A")
      self.start_grid(ch, fmt, regs, _field(fmt, regs, "SEND_PCAS_A", "QMD_ADDRESS_SHIFTED8") << 8)
    elif name.startswith("LOAD_INLINE_QMD_DATA("): self.inline_qmd(ch, fmt, regs, int(name[21:-1]), value)
    elif name == "SET_REPORT_SEMAPHORE_D": self.report_semaphore(fmt, regs, value)
    return True

  def host_method(self, ch: Channel, subc: int, method: int, value: int) -> bool:
    fmt, regs = hw.HOST_CLASSES[ch.cls], ch.regs.setdefault(-1, {})
    name = fmt.at.get(method)
    if name == "SET_OBJECT":
      if (cls := fmt.get(name, "NVCLASS", value)) not in ch.objects: raise GPUFault(XID_PUSHBUFFER, f"SET_OBJECT {cls:#x}: no such object on this channel")
      ch.bound[subc] = cls
    elif name in HOST_REGS: regs[method] = value
    elif name == "WFI": self.finish_grids(ch)
    elif name == "SEM_EXECUTE":
      if fmt.get(name, "RELEASE_WFI", value): self.finish_grids(ch)
      return self.sem_execute(fmt, regs, value)
    elif name not in HOST_NOPS: raise GPUFault(XID_PUSHBUFFER, f"unknown host method {method:#x}")
    return True

  def sem_execute(self, fmt: hw.ClassFormat, regs: dict[int, int], value: int) -> bool:
    f = {name: bits.get(value) for name, bits in fmt.methods["SEM_EXECUTE"].fields.items()}
    bits = 64 if f["PAYLOAD_SIZE"] else 32
    va = _field(fmt, regs, "SEM_ADDR_HI", "OFFSET") << 32 | _field(fmt, regs, "SEM_ADDR_LO", "OFFSET") << 2  # LO holds address bits 31:2
    payload = _field(fmt, regs, "SEM_PAYLOAD_LO", "PAYLOAD") | (_field(fmt, regs, "SEM_PAYLOAD_HI", "PAYLOAD") << 32 if bits == 64 else 0)
    if f["OPERATION"] == hw.SEM_RELEASE: self.release(va, payload, bits, bool(f["RELEASE_TIMESTAMP"]), "semaphore release")
    elif (check := ACQUIRES.get(f["OPERATION"])) is not None:
      if va % (bits // 8): raise GPUFault(XID_ENGINE, f"{bits}-bit semaphore acquire at unaligned GPU VA {va:#x}")
      return check(self.read(va, bits, "semaphore acquire"), payload, bits)
    else: raise GPUFault(XID_PUSHBUFFER, f"SEM_EXECUTE operation {f['OPERATION']} is not modelled")
    return True

  # ---- copy engine
  def launch_dma(self, fmt: hw.ClassFormat, regs: dict[int, int], value: int) -> None:
    f = {name: bits.get(value) for name, bits in fmt.methods["LAUNCH_DMA"].fields.items()}
    def address(upper: str, lower: str) -> int: return _field(fmt, regs, upper, "UPPER") << 32 | regs.get(fmt.offset(lower), 0)
    def count(method: str, default: int = 0) -> int: return regs.get(fmt.offset(method), default)
    if f["DATA_TRANSFER_TYPE"] != hw.DMA_TRANSFER_NONE:
      if f["DATA_TRANSFER_TYPE"] not in (hw.DMA_TRANSFER_PIPELINED, hw.DMA_TRANSFER_NON_PIPELINED):
        raise GPUFault(XID_ENGINE, f"LAUNCH_DMA transfer type {f['DATA_TRANSFER_TYPE']} is not modelled")
      if hw.DMA_TYPE_PHYSICAL in (f["SRC_TYPE"], f["DST_TYPE"]): raise GPUFault(XID_ENGINE, "LAUNCH_DMA with physical addresses is not modelled")
      if not f["SRC_MEMORY_LAYOUT"] == f["DST_MEMORY_LAYOUT"] == hw.DMA_LAYOUT_PITCH:
        raise GPUFault(XID_ENGINE, "LAUNCH_DMA with a block-linear layout is not modelled")
      if f["REMAP_ENABLE"] or f.get("MEMORY_SCRUB_ENABLE"): raise GPUFault(XID_ENGINE, "LAUNCH_DMA remapping or scrubbing is not modelled")
      src, dst = address("OFFSET_IN_UPPER", "OFFSET_IN_LOWER"), address("OFFSET_OUT_UPPER", "OFFSET_OUT_LOWER")
      length, lines = count("LINE_LENGTH_IN"), count("LINE_COUNT", 1) if f["MULTI_LINE_ENABLE"] else 1
      for i in range(lines):
        s, d = src + i * count("PITCH_IN"), dst + i * count("PITCH_OUT")
        ctypes.memmove(self.host(d, length, "copy destination"), self.host(s, length, "copy source"), length)
    if f["SEMAPHORE_TYPE"] in (hw.DMA_SEMAPHORE_ONE_WORD, hw.DMA_SEMAPHORE_FOUR_WORD):
      if f["SEMAPHORE_REDUCTION_ENABLE"]: raise GPUFault(XID_ENGINE, "LAUNCH_DMA semaphore reduction is not modelled")
      bits = 64 if f.get("SEMAPHORE_PAYLOAD_SIZE") == hw.DMA_PAYLOAD_TWO_WORD else 32  # no such field on c6b5: one word
      payload = count("SET_SEMAPHORE_PAYLOAD") | (count("SET_SEMAPHORE_PAYLOAD_UPPER") << 32 if "SET_SEMAPHORE_PAYLOAD_UPPER" in fmt.methods else 0)
      self.release(address("SET_SEMAPHORE_A", "SET_SEMAPHORE_B"), payload, bits, f["SEMAPHORE_TYPE"] == hw.DMA_SEMAPHORE_FOUR_WORD, "copy semaphore")
    elif f["SEMAPHORE_TYPE"]: raise GPUFault(XID_ENGINE, f"LAUNCH_DMA semaphore type {f['SEMAPHORE_TYPE']} is not modelled")

  # ---- compute engine
  def report_semaphore(self, fmt: hw.ClassFormat, regs: dict[int, int], value: int) -> None:
    if (op := fmt.get("SET_REPORT_SEMAPHORE_D", "OPERATION", value)) != hw.REPORT_RELEASE:
      raise GPUFault(XID_ENGINE, f"SET_REPORT_SEMAPHORE_D operation {op} is not modelled (only release)")
    if fmt.get("SET_REPORT_SEMAPHORE_D", "REDUCTION_ENABLE", value): raise GPUFault(XID_ENGINE, "SET_REPORT_SEMAPHORE_D reduction is not modelled")
    va = _reg64(fmt, regs, ("SET_REPORT_SEMAPHORE_A", "OFFSET_UPPER"), ("SET_REPORT_SEMAPHORE_B", "OFFSET_LOWER")) or 0
    four_words = fmt.get("SET_REPORT_SEMAPHORE_D", "STRUCTURE_SIZE", value) == hw.REPORT_FOUR_WORDS
    self.release(va, _field(fmt, regs, "SET_REPORT_SEMAPHORE_C", "PAYLOAD"), 32, four_words, "report semaphore")

  def inline_qmd(self, ch: Channel, fmt: hw.ClassFormat, regs: dict[int, int], index: int, value: int) -> None:
    """LOAD_INLINE_QMD_DATA(index): the QMD arrives dword by dword; the last one stores it at SET_INLINE_QMD_ADDRESS and launches it."""
    qf = hw.QMDS[hw.QMD_OF_CLASS[fmt.cls]]
    if index != len(ch.inline) // 4: raise GPUFault(XID_ENGINE, f"LOAD_INLINE_QMD_DATA dword {index} after {len(ch.inline) // 4} dwords")
    size = 384 if fmt.has("SET_INLINE_QMD_ADDRESS_A", "INLINE_SIZE") and _field(fmt, regs, "SET_INLINE_QMD_ADDRESS_A", "INLINE_SIZE") == hw.INLINE_384 else 256
    if size != qf.size: raise GPUFault(XID_ENGINE, f"an inline QMD of {size} bytes on class {fmt.cls:#x}, which launches {qf.version} ({qf.size} bytes)")
    ch.inline += struct.pack("<I", value)
    if len(ch.inline) < size: return
    va = (_reg64(fmt, regs, ("SET_INLINE_QMD_ADDRESS_A", "QMD_ADDRESS_SHIFTED8_UPPER"), ("SET_INLINE_QMD_ADDRESS_B", "QMD_ADDRESS_SHIFTED8_LOWER")) or 0) << 8
    self.view(va, size, "inline QMD")[:] = ch.inline
    ch.inline = bytearray()
    self.start_grid(ch, fmt, regs, va)

  # Grids launched one after another on a channel run at the same time: only the host's WFI method and a semaphore
  # release with RELEASE_WFI (classes/host/clc56f.h) wait for the engine to go idle. An H200 overlapped a JIT graph's
  # dependent kernels launched without either, so the model holds each grid until something waits for it and then
  # runs the held grids last-launched first, one order overlapping grids may take.
  def start_grid(self, ch: Channel, fmt: hw.ClassFormat, regs: dict[int, int], qmd_va: int) -> None:
    ch.running.append((fmt, dict(regs), qmd_va))

  def finish_grids(self, ch: Channel) -> None:
    while ch.running:
      fmt, regs, qmd_va = ch.running.pop()
      self.launch(ch, fmt, regs, qmd_va)

  def launch(self, ch: Channel, fmt: hw.ClassFormat, regs: dict[int, int], qmd_va: int) -> None:
    """Runs the QMD at qmd_va, its releases, then the QMDs it chains to through DEPENDENT_QMD0."""
    qf = hw.QMDS[hw.QMD_OF_CLASS[fmt.cls]]
    for _ in range(MAX_CHAIN):
      if qmd_va % 256: raise GPUFault(XID_ENGINE, f"QMD address {qmd_va:#x} is not 256-byte aligned")
      q = qf.decode(self.view(qmd_va, qf.size, "QMD"))
      try: self.run_qmd(fmt, qf, regs, q)
      except GPUFault as e: raise GPUFault(e.xid, f"QMD at {qmd_va:#x}: {e}") from None
      for i in range(3):
        if not q[f"release{i}_enable"]: continue
        if q[f"release{i}_reduction_enable"]: raise GPUFault(XID_ENGINE, f"QMD at {qmd_va:#x}: release {i} reduction is not modelled")
        size, bits = q[f"release{i}_structure_size"], 64 if q[f"release{i}_payload64b"] else 32
        if size == hw.RELEASE_TWO_WORDS: bits = 64
        self.release(q[f"release{i}_address"], q[f"release{i}_payload"], bits, size == hw.RELEASE_FOUR_WORDS, f"QMD release {i}")
      if not q["dependent_qmd0_enable"]: return
      if q["dependent_qmd0_action"] != hw.DEPENDENT_QMD_ACTION_SCHEDULE:
        raise GPUFault(XID_ENGINE, f"QMD at {qmd_va:#x}: dependent QMD action {q['dependent_qmd0_action']} is not modelled")
      qmd_va = q["dependent_qmd0_pointer"]
    raise GPUFault(XID_ENGINE, f"a dependent-QMD chain longer than {MAX_CHAIN} launches (a cycle?) ending at {qmd_va:#x}")

  def run_qmd(self, fmt: hw.ClassFormat, qf: hw.QmdFormat, regs: dict[int, int], q: dict[str, int]) -> None:
    if q["qmd_major_version"] != qf.major:
      raise GPUFault(XID_ENGINE, f"QMD version {q['qmd_major_version']} on class {fmt.cls:#x}, which takes version {qf.major} ({qf.version})")
    if "qmd_type" in q and qf.major >= 5 and q["qmd_type"] != hw.QMD_TYPE_GRID_CTA:
      raise GPUFault(XID_ENGINE, f"QMD type {q['qmd_type']}, version {qf.version} needs GRID_CTA ({hw.QMD_TYPE_GRID_CTA})")
    block, grid = (q["block_dim_x"], q["block_dim_y"], q["block_dim_z"]), (q["grid_width"], q["grid_height"], q["grid_depth"])
    if 0 in block or prod(block) > 1024: raise GPUFault(XID_ENGINE, f"block {block}: needs 1..1024 threads")
    if 0 in grid: raise GPUFault(XID_ENGINE, f"empty grid {grid}")
    if not q["cb0_valid"]: raise GPUFault(XID_ENGINE, "constant buffer 0 is not valid")
    module, entry = self.program(q["program_address"])
    offset, nbytes = self.arch.param_offset, module.param_size(entry)
    if q["cb0_size"] < offset + nbytes: raise GPUFault(XID_ENGINE, f"constant buffer 0 holds {q['cb0_size']:#x} bytes, the parameters end at {offset + nbytes:#x}")
    params = bytes(self.view(q["cb0_address"] + offset, nbytes, "kernel parameters in constant buffer 0"))
    pointers = [struct.unpack_from("<Q", params, at)[0] for _, kind, at, size in module.param_layout(entry) if kind in ("u64", "b64", "s64")]
    self.check_windows(fmt, regs, q, tuple(pointers))
    if q["shared_memory_size"] < module.shared_size(entry):
      raise GPUFault(XID_ENGINE, f"the QMD gives {q['shared_memory_size']:#x} bytes of shared memory, the kernel declares {module.shared_size(entry):#x}")
    try: module.run(entry, grid, block, params, self.memory)
    except PTXFault as e: raise GPUFault(XID_MMU, f"MMU fault: {e}") from None
    except PTXError as e: raise GPUFault(XID_ENGINE, f"the program failed: {e}") from None

  def check_windows(self, fmt: hw.ClassFormat, regs: dict[int, int], q: dict[str, int], vas: tuple[int, ...]) -> None:
    """What the SMs need besides the QMD: an aligned shared window, no buffer inside a window, mapped local memory."""
    shared = _reg64(fmt, regs, ("SET_SHADER_SHARED_MEMORY_WINDOW_A", "BASE_ADDRESS_UPPER"), ("SET_SHADER_SHARED_MEMORY_WINDOW_B", "BASE_ADDRESS"))
    local = _reg64(fmt, regs, ("SET_SHADER_LOCAL_MEMORY_WINDOW_A", "BASE_ADDRESS_UPPER"), ("SET_SHADER_LOCAL_MEMORY_WINDOW_B", "BASE_ADDRESS"))
    hopper = self.arch.sm >= 90
    if shared is not None and hopper and shared % (1 << 32): raise GPUFault(XID_ENGINE, f"shared memory window {shared:#x} is not 4 GiB aligned")
    for name, base, size in (("shared", shared, 1 << 32 if hopper else 1 << 24), ("local", local, 1 << 24)):
      if base is not None and (inside := [va for va in vas if base <= va < base + size]):
        raise GPUFault(XID_ENGINE, f"buffer parameter at {inside[0]:#x} lies in the {name} memory window at {base:#x}")
    per_thread = q["shader_local_memory_low_size"] + q["shader_local_memory_high_size"]
    if per_thread:
      base = _reg64(fmt, regs, ("SET_SHADER_LOCAL_MEMORY_A", "ADDRESS_UPPER"), ("SET_SHADER_LOCAL_MEMORY_B", "ADDRESS_LOWER"))
      per_tpc = _reg64(fmt, regs, ("SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A", "SIZE_UPPER"), ("SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B", "SIZE_LOWER")) or 0
      need = per_thread * 32 * self.arch.max_warps_per_sm * self.arch.sm_per_tpc
      if base is None or per_tpc < need:
        raise GPUFault(XID_ENGINE, f"{per_thread} bytes of local memory per thread need SET_SHADER_LOCAL_MEMORY_A/B and "
                                   f"NON_THROTTLED of at least {need:#x} bytes per TPC (have {per_tpc:#x})")
      self.host(base, per_tpc * self.arch.gpcs * self.arch.tpc_per_gpc, "shader local memory")

  def program(self, va: int) -> tuple[PTXModule, str]:
    """The PTX module and entry at a QMD's program address (a mock cubin's .text)."""
    head = bytes(self.view(va, 8, "program"))
    if head[:4] != PROGRAM_MAGIC: raise GPUFault(XID_ENGINE, f"no PTX payload at program address {va:#x} (SASS from a real compiler?)")
    text = bytes(self.view(va + 8, struct.unpack_from("<I", head, 4)[0], "program")).decode()
    if (keep := getenv("MOCKGPU_PTX_DIR", "")) and not os.path.exists(path := os.path.join(keep, hashlib.sha256(text.encode()).hexdigest()[:24] + ".ptx")):
      with open(path + ".tmp", "w") as f: f.write(text)  # tests assemble what the model ran with the real ptxas afterwards
      os.replace(path + ".tmp", path)  # whole files only, even if the process dies mid-write
    module = PTXModule(text)  # parses are cached by text
    return module, module.entries[0]
