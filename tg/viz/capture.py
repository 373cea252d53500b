"""What VIZ records while a program runs: every schedule's kernels and copies with their buffers and times, and for
each compiled kernel how codegen got from its AST to machine code (its stages, the rewrites in each and the rules
that fired). Nothing is recorded, and no hook is installed, while VIZ is 0."""
from __future__ import annotations
import contextlib, linecache, os, weakref
from collections import Counter
from typing import Any, Callable, Iterator
from ir import tracing
from ir.dtype import dtypes
from ir.ops import Ops, ALU
from ir.switches import VIZ
from ir.uop import UOp
from drivers.device import GlobalCounters
from drivers.hcq import profile_events

MAX_GRAPH_NODES = 2000  # the page lays graphs out itself: a bigger one is shown as its listing only
MAX_REWRITES_KEPT = 40  # per stage, the rewrites whose before/after graphs are kept (every one is counted)
MAX_LABEL_CHARS = 48    # of an argument in a node's label; the tooltip has up to MAX_TITLE_CHARS
MAX_TITLE_CHARS = 400

def rule_name(fn: Callable) -> str:
  """A rewrite rule named by where it is written: file:line and its source line for a lambda, else its name."""
  code = fn.__code__
  where = f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"
  if fn.__name__ != "<lambda>": return f"{where} {fn.__qualname__}"
  return f"{where} {linecache.getline(code.co_filename, code.co_firstlineno).strip()[:160]}"

def _node(u: UOp) -> list[str]:
  """[label, op name, tooltip] of one node."""
  arg = "" if u.arg is None else repr(u.arg)
  dtype = "" if u.dtype.name == "void" else f" {u.dtype.name}"
  short = arg if len(arg) <= MAX_LABEL_CHARS else arg[:MAX_LABEL_CHARS - 1] + "…"
  return [f"{u.op.name}{dtype}" + (f"\n{short}" if short else ""), u.op.name, f"{u.op.name}{dtype} {arg[:MAX_TITLE_CHARS]}"]

def graph_of(nodes: list[UOp]) -> dict | None:
  """{"nodes": [[label, op, tooltip]], "edges": [[source, user]]} of nodes given sources first; None past MAX_GRAPH_NODES."""
  if len(nodes) > MAX_GRAPH_NODES: return None
  at = {u: i for i, u in enumerate(nodes)}
  return {"nodes": [_node(u) for u in nodes], "edges": [[at[s], i] for i, u in enumerate(nodes) for s in u.src if s in at]}

def listing(uops: list[UOp]) -> str:
  """One line per linear UOp (as DEBUG=6 prints them): position, op, dtype, sources' positions, argument."""
  at = {u: i for i, u in enumerate(uops)}
  return "\n".join(f"{i:4d} {u.op.name:14s} {u.dtype.name:10s} {[at[s] for s in u.src if s in at]} {u.arg!r}"[:300] for i, u in enumerate(uops))

def op_counts(ast: UOp) -> dict[str, int]:
  """How often each ALU, load, store and reduction op appears in a kernel's AST."""
  return dict(Counter(u.op.name for u in ast.toposort() if u.op in ALU or u.op in (Ops.LOAD, Ops.STORE, Ops.REDUCE_AXIS)))

def _step(name: str, graph: dict | None = None, text: str | None = None, info: dict | None = None) -> dict:
  return {"name": name, "graph": graph, "text": text, "info": info or {}, "fired": {}, "rewrites": [], "rewrite_count": 0}

def _with_rewrites(step: dict, pending: list[tuple[UOp, UOp, list[Callable]]]) -> dict:
  """`step` with the rewrites made during it: how often each rule fired, and the first few before/after graphs."""
  fired: Counter = Counter()
  for before, after, fns in pending:
    names = [rule_name(f) for f in fns]
    fired.update(names)
    if len(step["rewrites"]) < MAX_REWRITES_KEPT:
      step["rewrites"].append({"rules": names, "before": graph_of(before.toposort()), "after": graph_of(after.toposort()),
                               "text": f"{before!r}  ->  {after!r}"[:MAX_TITLE_CHARS]})
  step["fired"], step["rewrite_count"] = dict(fired.most_common()), len(pending)
  return step

class ScheduleTrace:
  """One call of the scheduler (tg/schedule.py reports to it as the ir.tracing Tracer): the tensor graph, the graph
  after its reductions were rewritten (factored sums, split reductions), and the kernels and copies it became."""
  def __init__(self):
    self.steps: list[dict] = []
    self.pending: list[tuple[UOp, UOp, list[Callable]]] = []
  def rewrite(self, before: UOp, after: UOp, fired: list[Callable]) -> None: self.pending.append((before, after, list(fired)))
  def stage(self, name: str, result: Any) -> None:
    if name in ("graph", "reductions"):
      nodes = UOp(Ops.SINK, dtypes.void, tuple(result)).toposort()
      step = _step(f"scheduler {name}", graph_of(nodes), info={"nodes": len(nodes)})
    else: step = _step(f"scheduler {name}", text="\n".join(_item_line(i, it) for i, it in enumerate(result)), info={"items": len(result)})
    self.steps.append(_with_rewrites(step, self.pending))
    self.pending = []

def _item_line(i: int, item) -> str:
  """One schedule item: a copy, or a kernel's outputs, inputs and op counts."""
  shapes = [f"{b.dtype.name}[{b.size}]" for b in item.bufs]
  if item.ast.op is Ops.COPY: return f"{i:4d} copy {shapes[0]} <- {item.bufs[1].device}"
  outs = len(item.ast.src) if item.ast.op is Ops.SINK else 1
  ops = " ".join(f"{k}x{v}" for k, v in op_counts(item.ast).items())
  return f"{i:4d} kernel {', '.join(shapes[:outs])} <- {', '.join(shapes[outs:]) or 'nothing'}: {ops}"

class ProgramTrace:
  """One compiled kernel. Codegen reports to it (it is the ir.tracing Tracer while the kernel compiles): the stages
  and, between them, the graph rewrites with the rules that fired."""
  def __init__(self, device: str, ast: UOp):
    self.device, self.ast = device, ast
    self.steps: list[dict] = [_step("AST", graph_of(ast.toposort()), info={"device": device})]
    self.pending: list[tuple[UOp, UOp, list[Callable]]] = []
    self.candidates = 0  # get_program calls: more than one when BEAM timed candidates
    self.shape: tuple = ()
  def rewrite(self, before: UOp, after: UOp, fired: list[Callable]) -> None: self.pending.append((before, after, list(fired)))
  def stage(self, name: str, result: Any) -> None:
    if name == "optimize":  # each candidate starts over: the last get_program is the kernel that runs
      self.candidates += 1
      del self.steps[1:]
    self.steps.append(_with_rewrites(getattr(self, f"_{name}")(result), self.pending))
    self.pending = []
  def _optimize(self, k) -> dict:
    self.shape = tuple(k.full_shape)
    axes = "\n".join(f"axis {i}: {s} {t.name}" for i, (s, t) in enumerate(zip(k.full_shape, k.axis_types)))
    return _step("optimize", text=axes, info={"applied opts": ", ".join(map(str, k.applied_opts)) or "none", "shape": str(self.shape)})
  def _lower(self, uops: list[UOp]) -> dict: return _step("lower", graph_of(uops), listing(uops), {"uops": len(uops)})
  def _render(self, src: str) -> dict: return _step("render", text=src, info={"lines": src.count("\n") + 1})
  def compiled(self, spec, lib: bytes, compiler) -> None:
    """The last stage: the binary, shown as machine code where the compiler can disassemble it."""
    asm = compiler.disassemble(spec.src, lib)
    text = asm if asm is not None else f"{len(lib)} bytes from {type(compiler).__name__}, which has no disassembler"
    self.steps.append(_step("compile", text=text, info={"binary bytes": len(lib), "compiler": type(compiler).__name__}))
    self.summary = {"name": spec.name, "device": self.device, "shape": list(self.shape), "ops": op_counts(self.ast),
                    "flops": spec.flops, "mem": spec.mem_bytes, "global": list(spec.global_size),
                    "local": list(spec.local_size) if spec.local_size else None, "opts": [str(o) for o in spec.applied_opts],
                    "candidates": self.candidates}

class Capture:
  """Everything recorded since the start (or the last `clear`)."""
  def __init__(self): self.clear()
  def clear(self) -> None:
    self.programs: list[ProgramTrace] = []
    self.program_of: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # CompiledRunner -> index in programs
    self.runs: list[dict] = []
    self.buffers: list[dict] = []
    self.buffer_ids: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Buffer (base) -> index in buffers
    self.schedules = 0
    self.schedule_steps: list[list[dict]] = []  # per schedule run: the scheduler's steps (none for a schedule-cache hit)
    self.scheduled: ScheduleTrace | None = None   # the last scheduler call, until its schedule runs
    self.first_event = self.events_seen = len(profile_events)  # the timeline starts here: earlier PROFILE events aren't this recording's
  def buffer_id(self, buf) -> int:
    base = buf.base
    if (i := self.buffer_ids.get(base)) is None:
      i = self.buffer_ids[base] = len(self.buffers)
      self.buffers.append({"device": base.device, "size": base.size, "dtype": base.dtype.name, "nbytes": base.nbytes})
    return i

capture = Capture()

@contextlib.contextmanager
def compiling(device: str, ast: UOp) -> Iterator[ProgramTrace | None]:
  """While VIZ is on, the kernel compiled in this block reports its stages and rewrites to the ProgramTrace yielded."""
  if not VIZ:
    yield None
    return
  trace, previous = ProgramTrace(device, ast), tracing.tracer
  tracing.tracer = trace
  try: yield trace
  finally: tracing.tracer = previous

@contextlib.contextmanager
def scheduling() -> Iterator[None]:
  """While VIZ is on, the scheduler called in this block reports its stages to a ScheduleTrace, kept for the next
  schedule to run."""
  if not VIZ:
    yield
    return
  trace, previous = ScheduleTrace(), tracing.tracer
  tracing.tracer = trace
  try: yield
  finally: tracing.tracer = previous
  capture.scheduled = trace

def add_program(trace: ProgramTrace, runner) -> None:
  trace.compiled(runner.spec, runner.lib, runner.dev.compiler)
  capture.program_of[runner] = len(capture.programs)
  capture.programs.append(trace)

def schedule_started() -> None:
  capture.schedules += 1
  capture.schedule_steps.append(capture.scheduled.steps if capture.scheduled is not None else [])
  capture.scheduled = None

def ran(ei, seconds: float) -> None:
  """One kernel or copy of the current schedule ran (in `seconds`: 0 when it wasn't timed)."""
  row = {"schedule": capture.schedules - 1, "time_s": seconds, "bufs": [capture.buffer_id(b) for b in ei.bufs], "mem_used": GlobalCounters.mem_used,
         "event": None}
  if ei.runner is None:
    dest, src = ei.bufs
    row.update(kind="copy", name=f"copy {dest.nbytes} B {src.device} -> {dest.device}", device=dest.device, program=None, outs=1)
  else:
    row.update(kind="kernel", name=ei.runner.spec.name, device=ei.runner.device, program=capture.program_of.get(ei.runner),
               outs=len(ei.runner.spec.outs))
  # PROFILE times a run to completion, so its event is the newest (events of JIT replays in between belong to no run)
  if len(profile_events) > capture.events_seen and profile_events[-1].name == row["name"]: row["event"] = len(profile_events) - 1 - capture.first_event
  capture.events_seen = len(profile_events)
  capture.runs.append(row)
