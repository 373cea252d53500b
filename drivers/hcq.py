"""Hardware command queues (HCQ): what every queue-based device shares. A device has engines (compute, copy) that run
queues of commands in order; signals are 64-bit values (plus the time they were written) in memory the engines can
see; a device's timeline signal orders everything submitted to it. Vendor drivers encode the same commands as their
packet formats; the software engine here runs them on worker threads (CPU and PYTHON devices).

A queue is built once and can be submitted many times: any word may be a UOp (an integer expression of Variables,
such as a signal value) or a PatchSlot (an object such as an input buffer), filled in from `var_vals` at submit."""
from __future__ import annotations
import atexit, json, math, os, queue, tempfile, threading, time
from dataclasses import dataclass
from typing import Any, Callable
import numpy as np
from ir.switches import DEBUG, HCQDEV_WAIT_TIMEOUT_MS, PROFILE
from ir.dtype import dtypes
from ir.uop import UOp, sym_infer
from drivers.device import Compiled, Device
from drivers.host_memory import HostAllocator

class DeviceFault(RuntimeError):
  """Work submitted to a device failed (a fault, an engine error, a timeout): raised where the device is next waited
  for, which may be while loading another program."""
class HCQTimeoutError(DeviceFault): pass

# software engines notify this after they write a signal, so a wait for one sleeps until then instead of polling (a
# poll every 50 us took an eighth of a 2-core MNIST step's time from its kernels)
_engine_signalled = threading.Condition()
_sleepers = 0  # waiters asleep on it: an engine notifies only when there are some (notifying costs half a microsecond)
NOTIFIED_SLEEP_S = 1e-3  # a write between a waiter's last look and its sleep is seen this late at most

def sleep_until_an_engine_signals() -> None:
  """HCQSignal.idle for signals that software engines write."""
  global _sleepers
  with _engine_signalled:
    _sleepers += 1
    try: _engine_signalled.wait(NOTIFIED_SLEEP_S)
    finally: _sleepers -= 1

class HCQSignal:
  """value (u64) and timestamp (u64, in ticks of `ticks_per_us`) at `mem` (16 bytes the device can write); `va` is
  where the device's engines see them (None for software engines). `busy(seen)`: whether the engines that write it
  are working now (`seen`: engines already asked, for waits that wait on each other). `idle()` passes the time between
  polls once a wait has spun a while: a short sleep, or a driver's blocking wait for the interrupt its engines raise."""
  def __init__(self, mem: np.ndarray, owner: str, name: str = "signal", va: int | None = None, ticks_per_us: int = 1,
               busy: Callable[[frozenset], bool] = lambda seen: False):
    assert mem.dtype == np.uint64 and mem.size >= 2
    self.mem, self.owner, self.name, self.va, self.ticks_per_us, self.busy = mem, owner, name, va, ticks_per_us, busy
    self.words = memoryview(mem).cast("B").cast("Q")  # mem's two words: a memoryview reads one in a third of numpy's time
    self.idle: Callable[[], None] = lambda: time.sleep(50e-6)
  def __repr__(self) -> str: return f"<{self.name} of {self.owner} = {self.value}>"
  @property
  def value(self) -> int: return self.words[0]
  @value.setter
  def value(self, v: int) -> None: self.words[0] = v
  @property
  def timestamp(self) -> float: return self.words[1] / self.ticks_per_us
  def stamp(self) -> None: self.words[1] = int(time.perf_counter() * 1e6)
  def wait(self, value: int, timeout_ms: int | None = None, failed: Callable[[], bool] = lambda: False) -> None:
    """Block until value >= `value`, or until `failed()` (the writer has stopped). The timeout (HCQDEV_WAIT_TIMEOUT_MS
    by default) is time without progress: it starts again when the value moves or the writer is busy, so a long
    kernel is no timeout. HCQTimeoutError names the device, the signal, the value seen and the value waited for."""
    if (seen := self.value) >= value: return
    timeout_ms = HCQDEV_WAIT_TIMEOUT_MS.value if timeout_ms is None else timeout_ms
    deadline, spins = time.perf_counter() + timeout_ms / 1000, 0
    while self.value < value:
      spins += 1
      if spins > 1000:
        self.idle()
        if failed(): return
      else: os.sched_yield()  # lets the writer run if it is a thread of this process (it needs the interpreter lock)
      if time.perf_counter() > deadline:
        if self.value == seen and not self.busy(frozenset()):
          raise HCQTimeoutError(f"{self.owner}: {self.name} is {self.value}, waited {timeout_ms} ms for {value}")
        seen, deadline = self.value, time.perf_counter() + timeout_ms / 1000

@dataclass(frozen=True)
class PatchSlot:
  """A queue word filled in at submit from var_vals[name] (used for objects, e.g. an input buffer), or from
  `part(var_vals[name])` (e.g. the low 32 bits of that buffer's device address)."""
  name: str
  part: Callable[[Any], Any] | None = None
  def resolve(self, var_vals: dict[str, Any]) -> Any:
    obj = var_vals[self.name]
    return obj if self.part is None else self.part(obj)

def fill(patch: UOp | PatchSlot, var_vals: dict[str, Any] | None) -> Any:
  """The value of a patched word for one submit."""
  return patch.resolve(var_vals) if isinstance(patch, PatchSlot) else sym_infer(patch, var_vals or {})

def _wide(v): return v.cast(dtypes.uint64) if isinstance(v, UOp) else v  # a symbolic value may be a narrower int
def lo32(v):
  """The low 32 bits of a 64-bit queue word (an int or a UOp)."""
  return _wide(v) & 0xFFFFFFFF
def hi32(v): return _wide(v) >> 32

def print_words(device: str, queue: str, words: list[Any]) -> None:
  """DEBUG>=7: the command words a hardware queue submits, one line per submission in the form scripts/decode_pushbuf.py
  reads ("HWQueue NV NVComputeQueue 3 words: 2004c017 ..."); software queues, whose words are Python objects, print nothing."""
  if all(isinstance(w, (int, np.integer)) for w in words):
    print(f"HWQueue {device} {queue} {len(words)} words:" + "".join(f" {int(w):08x}" for w in words))

class HWQueue:
  """A list of commands: `wait`, `signal`, `timestamp`, `exec`, `copy`, `memory_barrier`; `submit` runs it."""
  def __init__(self):
    self._q: list[Any] = []
    self._patches: list[tuple[int, UOp | PatchSlot]] = []
    self._bound: Any = None
  def q(self, *words: Any) -> HWQueue:
    for w in words:
      if isinstance(w, (UOp, PatchSlot)): self._patches.append((len(self._q), w))
      self._q.append(w)
    return self
  def resolved(self, var_vals: dict[str, Any] | None = None) -> list[Any]:
    """The words with every patch filled in."""
    if not self._patches: return self._q
    words = list(self._q)
    for at, p in self._patches: words[at] = fill(p, var_vals)
    return words
  def bind(self, dev: HCQCompiled) -> HWQueue:
    """Keep this queue's commands on the device so that submitting it again only patches words."""
    self._bound = dev
    return self
  def submit(self, dev: HCQCompiled, var_vals: dict[str, Any] | None = None) -> HWQueue:
    dev.submissions += 1
    words = self.resolved(var_vals)
    if DEBUG >= 7: print_words(dev.device, type(self).__name__, words)
    self._submit(dev, words)
    return self
  def _submit(self, dev: HCQCompiled, words: list[Any]) -> None: raise NotImplementedError
  copies = False  # whether the engine behind this queue runs copy()
  # the commands, encoded by each engine's format
  def wait(self, signal: HCQSignal, value: int | UOp) -> HWQueue: raise NotImplementedError
  def signal(self, signal: HCQSignal, value: int | UOp) -> HWQueue: raise NotImplementedError
  def timestamp(self, signal: HCQSignal) -> HWQueue: raise NotImplementedError
  def memory_barrier(self) -> HWQueue: raise NotImplementedError
  def exec(self, prg: Any, args: list, global_size, local_size) -> HWQueue: raise NotImplementedError
  def copy(self, dest: Any, src: Any, nbytes: int) -> HWQueue: raise NotImplementedError

# ---------------- the software engine (CPU, PYTHON) ----------------

class SoftwareEngine:
  """One engine: runs submitted command lists in order, on a worker thread of its own, or at once on the submitter's
  thread when the engine is idle, up to the list's first wait not met yet (handing a list to another thread and back
  costs about 10 us, as much as a small kernel); its own thread goes on from that wait. The queue of pending
  submissions is bounded, so a submitter waits for space instead of overwriting."""
  def __init__(self, dev: HCQCompiled, name: str, depth: int = 256):
    self.dev, self.name = dev, name
    self.pending: queue.Queue = queue.Queue(maxsize=depth)
    self.blocked: tuple[HCQSignal, int] | None = None  # what its current wait command waits for
    self.running = threading.Lock()  # held while a command list runs, on whichever thread
    threading.Thread(target=self._loop, name=f"tg-{dev.device}-{name}", daemon=True).start()
    atexit.register(self.drain)  # a kernel still running while the interpreter frees its buffers would crash it
  def submit(self, words: list[Any]) -> None:
    if self.running.acquire(blocking=False):
      try:
        if not self.pending.unfinished_tasks:
          # the rest, from a wait not met yet, is queued before the engine is let go, so no later list can run before it
          if (at := self._run_reporting(words, inline=True)) < len(words): self.pending.put(words[at:])
          return
      finally: self.running.release()
    self.pending.put(words)
  def busy(self, seen: frozenset) -> bool:
    """Working now: it holds unfinished command lists or runs one, and isn't waiting for a signal whose writers are
    idle (a wait already met counts as working: the engine's thread just hasn't run since)."""
    blocked = self.blocked
    working = self.pending.unfinished_tasks > 0 or self.running.locked()
    return self not in seen and working and (blocked is None or blocked[0].value >= blocked[1] or blocked[0].busy(seen | {self}))
  def describe(self) -> str:
    blocked, n = self.blocked, self.pending.unfinished_tasks
    doing = f"waits for {blocked[0].name} of {blocked[0].owner} (at {blocked[0].value}) to reach {blocked[1]}" if blocked else "runs commands"
    return f"{self.dev.device} {self.name} engine {doing} ({n} command list{'s' if n != 1 else ''} unfinished)"
  def drain(self, timeout: float = 30.0) -> None:
    """Wait, at most `timeout` seconds, until every submitted command list has run."""
    with self.pending.all_tasks_done:
      self.pending.all_tasks_done.wait_for(lambda: not self.pending.unfinished_tasks, timeout)
  def _loop(self) -> None:
    while True:
      words = self.pending.get()
      try:
        with self.running: self._run_reporting(words)
      finally: self.pending.task_done()
  def _run_reporting(self, words: list[Any], inline: bool = False) -> int:
    try: return self._run(words, inline)
    except BaseException as e:  # a failed (or interrupted) command list stops here; the device reports it at its next synchronize
      self.dev.error = f"{self.dev.device} {self.name} engine: {type(e).__name__}: {e}"
      if not isinstance(e, Exception): raise  # Ctrl-C during a list run on the submitter's thread still stops it
      return len(words)
  def _run(self, words: list[Any], inline: bool = False) -> int:
    """Run the commands; returns len(words), or, `inline` (on a submitter's thread, which must not block), the index
    of the first wait not met yet, where the engine's own thread is to go on."""
    i = 0
    while i < len(words):
      cmd = words[i]
      if cmd == "exec":
        prg, nargs = words[i + 1], words[i + 2]
        prg.execute(words[i + 3:i + 3 + nargs], words[i + 3 + nargs], words[i + 4 + nargs])
        i += 5 + nargs
      elif cmd == "wait":
        if words[i + 1].value < words[i + 2]:
          if inline: return i
          self.blocked = (words[i + 1], words[i + 2])
          try: words[i + 1].wait(words[i + 2], timeout_ms=math.inf)  # as a GPU's engine, it waits for good: synchronize is what times out
          finally: self.blocked = None
        i += 3
      elif cmd == "signal":
        sig, value = words[i + 1], words[i + 2]
        sig.stamp()
        sig.value = value
        if _sleepers:
          with _engine_signalled: _engine_signalled.notify_all()
        i += 3
      elif cmd == "timestamp":
        words[i + 1].stamp()
        i += 2
      elif cmd == "copy":
        dest, src = words[i + 1], words[i + 2]
        dest[:words[i + 3]] = src[:words[i + 3]]
        i += 4
      elif cmd == "barrier": i += 1
      else: raise RuntimeError(f"unknown command {cmd!r} at word {i}")
    return i

class SoftwareQueue(HWQueue):
  """Commands as Python words for a SoftwareEngine: ("exec", program, n, *args, global, local), ("copy", dst, src, n)..."""
  engine, copies = "compute", True
  def wait(self, signal, value): return self.q("wait", signal, value)
  def signal(self, signal, value): return self.q("signal", signal, value)
  def timestamp(self, signal): return self.q("timestamp", signal)
  def memory_barrier(self): return self.q("barrier")
  def exec(self, prg, args, global_size, local_size): return self.q("exec", prg, len(args), *args, tuple(global_size), tuple(local_size or (1, 1, 1)))
  def copy(self, dest, src, nbytes): return self.q("copy", dest, src, nbytes)
  def _submit(self, dev, words): dev.engines[self.engine].submit(list(words))

class SoftwareCopyQueue(SoftwareQueue): engine = "copy"

# ---------------- devices, programs, profiling ----------------

@dataclass(frozen=True)
class ProfileEvent:
  device: str
  name: str
  start_us: float
  end_us: float

profile_events: list[ProfileEvent] = []

def _write_profile() -> None:
  """At exit (PROFILE>=1): every recorded kernel and copy as a Chrome trace (chrome://tracing, Perfetto)."""
  if not profile_events: return
  path = os.path.join(tempfile.gettempdir(), "tg_profile.json")
  trace = [{"name": e.name, "ph": "X", "ts": e.start_us, "dur": e.end_us - e.start_us, "pid": e.device, "tid": 0} for e in profile_events]
  with open(path, "w") as f: json.dump({"traceEvents": trace}, f)
  if DEBUG >= 1: print(f"profile of {len(profile_events)} events written to {path}")
atexit.register(_write_profile)

class HCQCompiled(Compiled):
  """A device driven by command queues: a timeline signal orders submissions; synchronize waits for the last one."""
  timestamp_ticks_per_us = 1  # the unit of the timestamps the device's engines write
  signal_t: type[HCQSignal] = HCQSignal
  engines_notify = False  # its engines are software engines, which wake a waiter when they write a signal
  def __init__(self, device: str, allocator, renderer, compiler, runtime: Callable, compute_queue: type[HWQueue],
               copy_queue: type[HWQueue] | None = None, signal_memory: tuple[np.ndarray, int | None] | None = None):
    """signal_memory: (uint64 array the engines can write, its device address); host memory by default."""
    super().__init__(device, allocator, renderer, compiler, runtime, graph=HCQGraph)
    self.compute_queue_t, self.copy_queue_t = compute_queue, copy_queue
    self.signal_pool, self.signal_va = signal_memory if signal_memory is not None else (np.zeros(2 * 4096, dtype=np.uint64), None)
    self._next_signal = 0
    self.engines: dict[str, SoftwareEngine] = {}  # software engines (CPU, PYTHON); hardware queues are the driver's
    self.timeline_signal, self.timeline_value = self.new_signal("timeline"), 1
    self.submissions, self.error = 0, None
    self._timing = [self.new_signal(f"timing{i}") for i in range(64)]  # a ring: read right after their kernel
    self._timing_at = 0
  def new_signal(self, name: str = "signal", value: int = 0) -> HCQSignal:
    if self._next_signal >= len(self.signal_pool) // 2: raise RuntimeError(f"{self.device}: out of signals")
    at = 2 * self._next_signal
    sig = self.signal_t(self.signal_pool[at:at + 2], self.device, name, None if self.signal_va is None else self.signal_va + 8 * at,
                    self.timestamp_ticks_per_us, self.busy)
    self._next_signal += 1
    sig.value = value
    if self.engines_notify: sig.idle = sleep_until_an_engine_signals
    return sig
  def new_timing_signal(self) -> HCQSignal:
    self._timing_at = (self._timing_at + 1) % len(self._timing)
    return self._timing[self._timing_at]
  def compute_queue(self) -> HWQueue: return self.compute_queue_t()
  def copy_queue(self) -> HWQueue: return (self.copy_queue_t or self.compute_queue_t)()
  def check_faults(self) -> str | None:
    """What the device reports about a failure of its engines (a channel error), or None."""
    return None
  def busy_queues(self) -> str | None:
    """Which queues still hold unfinished work and what they wait for (for timeout messages), or None."""
    return "; ".join(e.describe() for e in self.engines.values() if e.pending.unfinished_tasks) or None
  def busy(self, seen: frozenset) -> bool:
    """Whether an engine of this device is working now (a wait's timeout starts again while one is)."""
    return any(e.busy(seen) for e in self.engines.values())
  def next_timeline(self) -> int:
    self.timeline_value += 1
    return self.timeline_value - 1
  def can_transfer_from(self, src_dev: Compiled) -> bool:
    """Whether this device's copy engine reaches src_dev's memory: both in host memory here; GPU drivers add peers."""
    return isinstance(src_dev, HCQCompiled) and isinstance(self.allocator, HostAllocator) and isinstance(src_dev.allocator, HostAllocator)
  def transfer(self, dest: Any, src: Any, nbytes: int, src_dev: HCQCompiled) -> None:
    """Copy from src_dev's memory on this (the destination) device's copy engine, after both devices' earlier work."""
    q = self.copy_queue().wait(src_dev.timeline_signal, src_dev.timeline_value - 1).wait(self.timeline_signal, self.timeline_value - 1)
    if PROFILE:
      start, end = self.new_timing_signal(), self.new_timing_signal()
      q.timestamp(start).copy(dest, src, nbytes).timestamp(end)
    else: q.copy(dest, src, nbytes)
    q.signal(self.timeline_signal, copied := self.next_timeline()).submit(self)
    # the source's later work waits for the copy: its memory may be freed and reused as soon as this returns
    src_dev.compute_queue().wait(self.timeline_signal, copied).signal(src_dev.timeline_signal, src_dev.next_timeline()).submit(src_dev)
    if PROFILE:
      self.synchronize()
      profile_events.append(ProfileEvent(self.device, f"copy {nbytes} B {src_dev.device} -> {self.device}", start.timestamp, end.timestamp))
  def synchronize(self, timeout_ms: int | None = None) -> None:
    """Wait for everything submitted; an engine error or a timeout raises (and the device stays usable)."""
    failure = lambda: self.error or self.check_faults()
    try: self.timeline_signal.wait(self.timeline_value - 1, timeout_ms, failed=lambda: failure() is not None)
    except HCQTimeoutError as e:
      err, self.error = failure(), None
      self.timeline_signal.value = self.timeline_value - 1  # give up on the lost work so the device can go on
      raise HCQTimeoutError(f"{err}" if err else f"{e}; {self.busy_queues() or 'no queue reports pending work'}") from None
    if (err := failure()) is not None:
      self.error = None
      self.timeline_signal.value = self.timeline_value - 1  # the failed work won't signal: give up on it
      raise DeviceFault(err)

class HCQProgram:
  """A compiled kernel on an HCQ device: each call is wait(timeline) -> exec -> signal(timeline) on the compute queue."""
  def __init__(self, dev: HCQCompiled, name: str):
    self.dev, self.name = dev, name
  def execute(self, args: list, global_size, local_size) -> None: raise NotImplementedError
  def kernel_args(self, bufs: tuple, vals: tuple) -> list: return [*bufs, *vals]
  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=None, vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
    dev = self.dev
    timed = wait or PROFILE
    q = dev.compute_queue().wait(dev.timeline_signal, dev.timeline_value - 1).memory_barrier()
    if timed:
      start, end = dev.new_timing_signal(), dev.new_timing_signal()
      q.timestamp(start)
    q.exec(self, self.kernel_args(bufs, vals), global_size, local_size)
    if timed: q.timestamp(end)
    q.signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
    if not timed: return None
    dev.synchronize()
    if PROFILE: profile_events.append(ProfileEvent(dev.device, self.name, start.timestamp, end.timestamp))
    return max(end.timestamp - start.timestamp, 0.0) / 1e6

class HCQGraph:
  """A TinyJit batch as one prebuilt command buffer per device: each device's compute queue waits for its timeline,
  runs its kernels (and the copies into its memory), waits for other devices' graph signals where it reads what they
  wrote, and signals its timeline. Inputs are patch slots, signal values are offsets from a per-replay base, and
  the kernel arguments of the Variables named in `variables` are patched with each replay's values, so a replay
  patches and submits one queue per device."""
  def __init__(self, items: list, input_slots: dict[int, int], variables: frozenset[str] = frozenset()):
    dev_of = lambda ei: Device[ei.runner.device] if ei.runner is not None else Device[ei.bufs[0].device]
    self.devices: list[HCQCompiled] = list(dict.fromkeys(dev_of(ei) for ei in items))
    self.base = UOp.variable("graph_base", 0, 2**62, dtypes.int64)
    self.signals = {d: d.new_signal("graph") for d in self.devices} if len(self.devices) > 1 else {}  # what devices wait for of each other
    self.input_names = [f"input{k}" for k in range(len(input_slots))]
    self.timeline_names = [(f"start_{i}", f"end_{i}") for i in range(len(self.devices))]  # per device: the values its queue waits for and signals
    starts = [UOp.variable(start, 0, 2**62, dtypes.int64) for start, _ in self.timeline_names]
    self.queues = {}
    self.timings: list[tuple[HCQCompiled, str, HCQSignal, HCQSignal]] = []  # with PROFILE: each call's timestamps
    for d in self.devices:  # every device waits for what was submitted to all of them before: earlier batches write what this one reads
      q = d.compute_queue()
      for other, start in zip(self.devices, starts): q.wait(other.timeline_signal, start)
      self.queues[d] = q.memory_barrier()
    count = {d: 0 for d in self.devices}
    writer: dict[int, tuple[HCQCompiled, int]] = {}  # buffer -> (device, signal offset after its last write)
    readers: dict[int, dict[HCQCompiled, int]] = {}  # buffer -> {device: signal offset after its last read}
    def arg(b): return PatchSlot(self.input_names[input_slots[id(b)]]) if id(b) in input_slots else b.ensure_allocated()._buf
    for ei in items:
      dev = dev_of(ei)
      q = self.queues[dev]
      for b in ei.bufs:  # read after another device's write, and (the output) write after its write or reads
        if (w := writer.get(id(b.base))) is not None and w[0] is not dev: q.wait(self.signals[w[0]], self.base + w[1])
      for other, read in readers.get(id(ei.bufs[0].base), {}).items():
        if other is not dev: q.wait(self.signals[other], self.base + read)
      if ei.runner is not None:
        spec = ei.runner.spec
        args = ei.runner.prg.kernel_args(tuple(arg(b) for b in ei.bufs), tuple(ei.var_vals[v.arg[0]] for v in spec.vars))
        for j, v in enumerate(spec.vars):  # renamed so that no name of the graph's own (input0, graph_base, ...) can clash
          if v.arg[0] in variables: args[len(ei.bufs) + j] = v.replace(arg=(f"var:{v.arg[0]}", *v.arg[1:]))
        self._timed(dev, q, ei.runner.prg.name, lambda: q.exec(ei.runner.prg, args, spec.global_size, spec.local_size))
      else:
        what = f"copy {ei.bufs[0].nbytes} B {ei.bufs[1].device} -> {ei.bufs[0].device}"
        self._timed(dev, q, what, lambda: q.copy(arg(ei.bufs[0]), arg(ei.bufs[1]), ei.bufs[0].nbytes))
      count[dev] += 1
      if len(self.devices) > 1: q.signal(self.signals[dev], self.base + count[dev])  # what other devices wait for
      writer[id(ei.bufs[0].base)] = (dev, count[dev])
      for b in ei.bufs[1:]: readers.setdefault(id(b.base), {})[dev] = count[dev]
    self.span = max(count.values()) + 1
    for i, d in enumerate(self.devices):  # each device's timeline passes the graph only once all of it ran: later work may reuse what it read
      for other in self.devices:
        if other is not d and count[other]: self.queues[d].wait(self.signals[other], self.base + count[other])
      self.queues[d].signal(d.timeline_signal, UOp.variable(self.timeline_names[i][1], 0, 2**62, dtypes.int64)).bind(d)
    self.replays = 0
  def _timed(self, dev: HCQCompiled, q: HWQueue, name: str, command: Callable[[], Any]) -> None:
    """Queue `command`, between timestamps of signals of its own when PROFILE was on at capture."""
    if not PROFILE: return command()
    start, end = dev.new_signal("graph timing"), dev.new_signal("graph timing")
    q.timestamp(start)
    command()
    q.timestamp(end)
    self.timings.append((dev, name, start, end))
  def __call__(self, inputs: list, user_vals: dict[str, int] | None = None) -> None:
    var_vals: dict[str, Any] = {f"var:{k}": v for k, v in user_vals.items()} if user_vals else {}
    var_vals.update(zip(self.input_names, [b._buf for b in inputs]))
    var_vals["graph_base"] = self.replays * self.span
    self.replays += 1
    for d, (start, end) in zip(self.devices, self.timeline_names): var_vals[start], var_vals[end] = d.timeline_value - 1, d.next_timeline()
    for i, d in enumerate(self.devices):
      try: self.queues[d].submit(d, var_vals)
      except Exception:  # nothing of this replay reached the rest: give back their timeline values, or synchronize would wait for them
        for rest in self.devices[i:]: rest.timeline_value -= 1
        raise
    if self.timings:  # the replay's events, once its timestamps are written
      for d in self.devices: d.synchronize()
      profile_events.extend(ProfileEvent(d.device, name, start.timestamp, end.timestamp) for d, name, start, end in self.timings)
