"""Running a schedule: each kernel AST is compiled once per device (cached) and called with its buffers; copies move
bytes between devices. DEBUG>=2 prints one line per call; GlobalCounters add up kernels, ops, bytes and time."""
from __future__ import annotations
import math, time
from collections import OrderedDict
from dataclasses import dataclass
from ir.ops import Ops
from ir.switches import BEAM, CAPTURING, DEBUG, NOOPT, PROFILE, VIZ
from ir.helpers import colored
from ir.uop import UOp
from codegen.program import get_program, program_of
from codegen.program_cache import cached_program
from codegen.renderer import ProgramSpec
from codegen.scalar_args import is_scalar_arg, lift_scalars
from drivers.device import Buffer, Device, GlobalCounters
from drivers.hcq import DeviceFault, HCQCompiled, ProfileEvent, profile_events
from tg.schedule import ScheduleItem
from tg.viz import capture as viz

def print_ast(ast: UOp) -> None:
  """The kernel AST as one line per node (DEBUG=5)."""
  order = ast.toposort()
  name = {u: f"c{i}" for i, u in enumerate(order)}
  for u in order:
    srcs = ", ".join(name[s] for s in u.src)
    arg = f", {u.arg!r}" if u.arg is not None else ""
    print(f"{name[u]} = UOp({u.op!r}, {u.dtype!r}, ({srcs}{',' if len(u.src) == 1 else ''}){arg})")

LONG_RUN_S = 1e-3  # a BEAM candidate's runs longer than this vary little: the fastest of two is its time (of three below)

def beam_opts(dev, ast: UOp) -> list | None:
  """BEAM's choice of actions for this kernel on `dev` (None: fall back to the heuristics)."""
  from codegen.search import beam_search
  bufs: list[Buffer] = []
  started: dict[tuple, ProgramSpec] = {}  # rendered candidates whose compiles are queued
  programs: dict[tuple, tuple[ProgramSpec, bytes]] = {}  # compiled candidates, to be timed
  fastest = math.inf  # the best time of any candidate so far
  def start(candidate) -> None:  # render a lowered candidate and queue its compile, which runs while others are lowered
    opts, k, lowered_k = candidate
    try: started[tuple(opts)] = spec = program_of(k, dev.renderer, lowered_k)
    except Exception: return  # time_opts meets the error again and the candidate is skipped
    dev.compiler.compile_ahead(spec.src)
  def prepare(candidates: list) -> None:  # compile the candidates to be timed, on the workers and here; drop the others
    chosen = {tuple(c[0]) for c in candidates}
    for c in candidates:
      if tuple(c[0]) not in started: start(c)
    for opts in [o for o in started if o not in chosen]: dev.compiler.compile_dropped(started.pop(opts).src)
    # every compile ends before the first run: a run beside a compile on another core would be timed slow
    for opts, spec in started.items():
      try: programs[opts] = (spec, dev.compiler.compile_taken_back(spec.src))
      except Exception: continue  # likewise
    dev.compiler.settle()
    started.clear()
  def time_opts(opts) -> float:
    nonlocal fastest
    if (ready := programs.pop(tuple(opts), None)) is None:
      spec = get_program(ast, dev.renderer, opts)
      ready = (spec, dev.compiler.compile_taken_back(spec.src))
    spec, lib = ready
    prg = dev.runtime(spec.name, lib, spec)
    if not bufs:
      bufs.extend(Buffer(dev.device, max(g.dtype.size, 1), g.dtype.base, options=g.dtype.image).ensure_allocated() for g in sorted(
        {u for u in spec.uops if u.op is Ops.DEFINE_GLOBAL}, key=lambda g: g.arg))
      # written once, so every page is real memory: untouched host pages all read as one shared zero page, which
      # stays in cache and makes memory-bound candidates look fast
      for b in bufs: b.copyin(memoryview(bytearray(b.nbytes)))
    vals = tuple(1.0 if is_scalar_arg(v) else v.arg[1] for v in spec.vars)
    run = lambda: prg(*[b._buf for b in bufs], global_size=spec.global_size, local_size=spec.local_size, vals=vals, wait=True)
    first = run()
    if first > 2 * fastest: return first  # far behind already: more runs would not make it the fastest
    best = min(first, run()) if first > LONG_RUN_S else min(first, run(), run())
    fastest = min(fastest, best)
    return best
  opts = beam_search(ast, dev.renderer, time_opts, BEAM.value, f"{dev.device}:{dev.compiler.cachekey}", prepare=prepare, preview=start)
  if opts is None and DEBUG >= 1: print("BEAM: no candidate could be compiled and timed; using the heuristics")
  return opts

class CompiledRunner:
  def __init__(self, device: str, ast: UOp):
    self.device, self.dev = device, Device[device]
    with viz.compiling(device, ast) as trace: self._build(ast)
    if trace is not None: viz.add_program(trace, self)
    self.first_run = True

  def _build(self, ast: UOp) -> None:
    """Optimize, lower and render the kernel, and start compiling it (on a worker thread where the compiler allows);
    it is loaded on the device when first needed."""
    if DEBUG >= 5: print_ast(ast)
    st = time.perf_counter()
    opts = [] if NOOPT else beam_opts(self.dev, ast) if BEAM >= 1 else None
    lowered = get_program if VIZ or DEBUG >= 6 else cached_program  # VIZ records, and DEBUG=6 prints, the lowering itself
    self.spec: ProgramSpec = lowered(ast, self.dev.renderer, opts)
    self.search_s = time.perf_counter() - st  # optimize, lower and render (BEAM search included)
    if DEBUG >= 3: print(f"{self.spec.name:<46s} opts: {tuple(self.spec.applied_opts)}")
    if DEBUG >= 4: print(self.spec.src)
    self._lib: bytes | None = None
    self._prg = None
    # the assembly is printed while compiling: at DEBUG>=7 compile even when a cached binary exists, so it is always shown
    if DEBUG >= 7: self._lib = self.dev.compiler.compile(self.spec.src)
    else: self.dev.compiler.compile_ahead(self.spec.src)

  @property
  def lib(self) -> bytes:
    if self._lib is None: self._load()
    return self._lib
  @property
  def prg(self):
    if self._prg is None: self._load()
    return self._prg
  @property
  def build_s(self) -> float: return self.search_s + self.wait_s  # lowering, and then waiting for the binary

  def _load(self) -> None:
    st = time.perf_counter()
    if self._lib is None: self._lib = self.dev.compiler.compile_cached(self.spec.src)
    self.wait_s = time.perf_counter() - st  # for the compile, where it didn't finish while other kernels were lowered
    try: self._prg = self.dev.runtime(self.spec.name, self._lib, self.spec)
    except DeviceFault: raise  # earlier work failed while this program was uploaded: not this binary's fault
    except Exception as e:  # a cached binary that doesn't load: compile again
      if DEBUG >= 1: print(f"cached program {self.spec.name} didn't load ({e}); recompiling")
      self.dev.compiler.forget(self.spec.src)
      self._lib = self.dev.compiler.compile_cached(self.spec.src)
      self._prg = self.dev.runtime(self.spec.name, self._lib, self.spec)

  def __call__(self, bufs: list[Buffer], var_vals: dict[str, int], jit: bool = False) -> float:
    """Run once; timed (waiting for the device) only at DEBUG>=2 or with PROFILE."""
    vals = tuple(var_vals[v.arg[0]] for v in self.spec.vars)
    et = self.prg(*[b._buf for b in bufs], global_size=self.spec.global_size, local_size=self.spec.local_size, vals=vals,
                  wait=DEBUG >= 2 or bool(PROFILE)) or 0.0
    if PROFILE and not isinstance(self.dev, HCQCompiled):  # (queue-driven devices stamp their own events)
      end_us = time.perf_counter() * 1e6  # the runtime times the kernel on a clock of its own: placed on the host's, ending now
      profile_events.append(ProfileEvent(self.device, self.spec.name, end_us - et * 1e6, end_us))
    self.record(et, len(bufs), jit)
    return et

  def record(self, et: float, nbufs: int, jit: bool, quiet: bool = False) -> None:
    GlobalCounters.kernel_count += 1
    GlobalCounters.global_ops += self.spec.flops
    GlobalCounters.global_mem += self.spec.mem_bytes
    GlobalCounters.time_sum_s += et
    if DEBUG >= 2 and not quiet:
      color = "magenta" if jit else ("green" if self.first_run else None)
      print(f"{colored(f'*** {self.device[:7]:7s} {GlobalCounters.kernel_count:4d}', color)} {self.spec.name:46s} arg {nbufs:2d} "
            f"mem {GlobalCounters.mem_used / 1e9:6.2f} GB tm {et * 1e6:9.2f}us/{GlobalCounters.time_sum_s * 1e3:9.2f}ms "
            f"({self.spec.flops / max(et, 1e-9) / 1e9:7.0f} GFLOPS {self.spec.mem_bytes / max(et, 1e-9) / 1e9:5.0f}|0      GB/s)")
    self.first_run = False

# compiled kernels, least recently used first; a runner that falls out is freed once no TinyJit holds it
MAX_RUNNERS = 2048
_runners: OrderedDict[tuple, CompiledRunner] = OrderedDict()
# for each kernel with its float constants as arguments: the constants it was first compiled with
_first_scalars: OrderedDict[tuple, dict[str, float]] = OrderedDict()
# each kernel served by one taking its constants as arguments: that one's key and the constants (lifting them again
# took a quarter of an eager op's time)
_lifted: OrderedDict[tuple, tuple[tuple, dict[str, float]]] = OrderedDict()

def _remember(cache: OrderedDict, key: tuple, value):
  cache[key] = value
  while len(cache) > MAX_RUNNERS: cache.popitem(last=False)
  return value

def get_runner(device: str, ast: UOp) -> tuple[CompiledRunner, dict[str, float]]:
  """The compiled kernel for `ast` and the values of the arguments it takes beyond the AST's own Variables. A kernel
  is compiled with its constants in the code; once it comes back with other float constants, one program taking them
  as arguments serves every value from then on."""
  key = (device, ast, BEAM.value, NOOPT.value)
  if (runner := _runners.get(key)) is not None:
    _runners.move_to_end(key)
    return runner, {}
  if (lifted := _lifted.get(key)) is not None and (runner := _runners.get(lifted[0])) is not None:
    _runners.move_to_end(lifted[0])
    return runner, lifted[1]
  template, scalars = lift_scalars(ast)
  if scalars:
    general = (device, template, BEAM.value, NOOPT.value)
    if (runner := _runners.get(general)) is None and general in _first_scalars: runner = _remember(_runners, general, CompiledRunner(device, template))
    if runner is not None:
      _runners.move_to_end(general)
      _remember(_lifted, key, (general, scalars))
      return runner, scalars
    _remember(_first_scalars, general, scalars)
  return _remember(_runners, key, CompiledRunner(device, ast)), {}

def engine_copies(dest: str, src: str) -> bool:
  """Whether a copy between these devices runs on the destination's copy engine (host memory on both sides, or GPUs
  that are peers) instead of bouncing through the host."""
  ddev = Device[dest]
  return hasattr(ddev, "can_transfer_from") and ddev.can_transfer_from(Device[src])

def run_copy(dest: Buffer, src: Buffer) -> float:
  st = time.perf_counter()
  src.ensure_allocated()
  ddev, sdev = Device[dest.device], Device[src.device]
  if (engine := engine_copies(dest.device, src.device)): ddev.transfer(dest.ensure_allocated()._buf, src._buf, dest.nbytes, sdev)
  else: dest.copyin(memoryview(src.as_bytes()))
  et = time.perf_counter() - st
  if DEBUG >= 2: print(f"*** {dest.device[:7]:7s} {'':4s} copy {dest.nbytes:8d} B, {dest.device:>7s} <- {src.device:7s} {'' if engine else '(through the host)'}")
  return et

@dataclass
class ExecItem:
  """One call a TinyJit replays: a compiled kernel (or a copy when runner is None) with its buffers."""
  runner: CompiledRunner | None
  bufs: list[Buffer]
  var_vals: dict[str, int | float]
  def run(self, jit: bool = False) -> float:
    """Seconds it took (0 when it wasn't timed)."""
    for b in self.bufs: b.ensure_allocated()
    if self.runner is None: return run_copy(self.bufs[0], self.bufs[1])
    return self.runner(self.bufs, self.var_vals, jit)

# TinyJit captures push a list here; every call executed while one is open is appended to it
capture_stack: list[list[ExecItem]] = []

def run_schedule(schedule: list[ScheduleItem]) -> None:
  if VIZ: viz.schedule_started()
  # every kernel is lowered before any runs, so each one compiles on a worker thread while the next ones are lowered
  runners = [(None, {}) if item.ast.op is Ops.COPY else get_runner(item.bufs[0].device, item.ast) for item in schedule]
  for item, (runner, scalars) in zip(schedule, runners):
    ei = ExecItem(runner, item.bufs, {**item.var_vals, **scalars})
    seconds = ei.run()
    if VIZ: viz.ran(ei, seconds)
    if capture_stack and CAPTURING: capture_stack[-1].append(ei)
