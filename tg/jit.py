"""TinyJit: the first call runs normally, the second records every kernel and copy it runs, and from the third on
those are replayed with the new inputs' buffers, without running the Python function or the scheduler again.
Python values (ints, branches, shapes of intermediate results) are frozen at capture; returned tensors are the same
objects on every replay, refilled in place (call .clone().realize() to keep a result). Variables bound in the inputs'
views (`x[:v.bind(n)]`) or passed as arguments may take other values on replay: the captured kernels run with the new
values, and returned tensors of symbolic shape take them too."""
from __future__ import annotations
import functools, time
from dataclasses import dataclass
from typing import Any, Callable
from ir.ops import Ops
from ir.shapetracker import ShapeTracker
from ir.uop import UOp
from ir.switches import DEBUG, JIT, JIT_BATCH_SIZE, PROFILE
from drivers.device import Buffer, Device, GlobalCounters
from tg.realize import ExecItem, capture_stack, engine_copies
from tg.memory_plan import buffers_in
from tg.schedule import buffer_of, rebind, unbind
from tg.tensor import Tensor

class JitError(RuntimeError): pass

def _input_tensors(args: tuple, kwargs: dict) -> list[tuple[Any, Tensor]]:
  """(name, tensor) for tensor arguments, tensors inside list/tuple/dict arguments, and keyword tensors by name."""
  found: list[tuple[Any, Tensor]] = []
  def add(name, x):
    if isinstance(x, Tensor): found.append((name, x))
    elif isinstance(x, (list, tuple)):
      for i, v in enumerate(x):
        if isinstance(v, Tensor): found.append(((name, i), v))
    elif isinstance(x, dict):
      for k, v in x.items():
        if isinstance(v, Tensor): found.append(((name, k), v))
  for i, a in enumerate(args): add(i, a)
  for k in sorted(kwargs): add(k, kwargs[k])
  return found

def _output_tensors(ret: Any) -> list[Tensor]:
  if ret is None: return []
  if isinstance(ret, Tensor): return [ret]
  if isinstance(ret, (list, tuple)): return [t for r in ret for t in _output_tensors(r)]
  if isinstance(ret, dict): return [t for r in ret.values() for t in _output_tensors(r)]
  raise JitError(f"JIT return contains a non-Tensor value of type {type(ret).__name__}")

@dataclass(frozen=True)
class InputInfo:
  """What a replay's input must match: the view of its buffer (with its Variables unbound), dtype and device."""
  view: ShapeTracker
  buffer_size: int
  dtype: Any
  device: str

def _describe(t: Tensor) -> list[tuple[Buffer, InputInfo, dict[str, int]]]:
  """For each buffer of the input (one per device for a multi-device tensor): the buffer, what a replay must match,
  and the values its view binds."""
  out = []
  for part in (t.uop.src if t.uop.op is Ops.MULTI else (t.uop,)):
    unbound, var_vals = unbind(part, part.toposort())
    found = buffer_of(unbound.get(part, part))
    if found is None: raise JitError("JIT inputs must be realized buffers")
    buf, st = found
    out.append((buf, InputInfo(st, buf.size, t.dtype, buf.device), var_vals))
  return out

def _bound_values(described: list, args: tuple, kwargs: dict) -> dict[str, int]:
  """The Variable values of one call: bound in the inputs' views, or bound Variables passed as arguments."""
  out: dict[str, int] = {}
  found = [vv for _, _, vv in described if vv] + [{a.src[0].arg[0]: a.src[1].arg} for a in (*args, *kwargs.values()) if isinstance(a, UOp) and a.op is Ops.BIND]
  for name, value in ((k, v) for vv in found for k, v in vv.items()):
    if out.setdefault(name, value) != value: raise JitError(f"Variable {name!r} is bound to both {out[name]} and {value} in one call")
  return out

def _call_key(named: list[tuple[Any, Tensor]], args: tuple, kwargs: dict) -> list:
  """What a replay's checks depend on: the inputs' names and nodes (a realized input keeps its node until it is
  assigned to) and the bound Variables passed as arguments. A call with the key of one that passed them passes them."""
  return [(n, t.uop) for n, t in named] + [a for a in args if isinstance(a, UOp)] + [a for a in kwargs.values() if isinstance(a, UOp)]

def _rebound(u: UOp, var_vals: dict[str, int]) -> UOp:
  """A returned tensor's view with its Variables bound to this call's values."""
  unbound, _ = unbind(u, u.toposort())
  return rebind(unbound[u], var_vals) if unbound else u

class GraphBatch:
  """Consecutive captured calls run through their devices' graph executor (one command buffer per device); the
  Variables named in `variables` are patched with each replay's values."""
  def __init__(self, items: list[ExecItem], slots: dict[int, int], graph: type, variables: frozenset[str]):
    self.items, self.graph = items, graph(items, slots, variables)
    self.kernels = [ei for ei in items if ei.runner is not None]
    self.flops, self.mem_bytes = sum(ei.runner.spec.flops for ei in self.kernels), sum(ei.runner.spec.mem_bytes for ei in self.kernels)
  def run(self, inputs: list[Buffer], var_vals: dict[str, int]) -> None:
    """Submits the batch; at DEBUG>=2 or with PROFILE it is timed to completion (as an eager kernel is), else not timed."""
    if not (DEBUG >= 2 or PROFILE):  # the counters, as each kernel's record() would count them, in one step
      self.graph(inputs, var_vals)
      GlobalCounters.kernel_count += len(self.kernels)
      GlobalCounters.global_ops += self.flops
      GlobalCounters.global_mem += self.mem_bytes
      return
    devs = [Device[d] for d in dict.fromkeys(map(_device_of, self.items))]
    for d in devs: d.synchronize()  # the time is this batch's alone, not that of work queued before it
    st = time.perf_counter()
    self.graph(inputs, var_vals)
    for d in devs: d.synchronize()
    et = time.perf_counter() - st
    for ei in self.kernels: ei.runner.record(et / len(self.kernels), len(ei.bufs), jit=True, quiet=True)
    if DEBUG >= 2: print(f"*** {_device_of(self.items[0])[:7]:7s} {GlobalCounters.kernel_count:4d} {'batched ' + str(len(self.items)):46s} "
                         f"tm {et * 1e6:9.2f}us/{GlobalCounters.time_sum_s * 1e3:9.2f}ms")

def _device_of(ei: ExecItem) -> str: return ei.runner.device if ei.runner is not None else ei.bufs[0].device

def _graph_of(ei: ExecItem, variables: frozenset[str]) -> type | None:
  """The graph executor that can run this call: its device's, and for a copy one that its copy engine can do. A
  graph patches a Variable's argument word with its value as is, which only a value >= 0 has in every argument
  encoding: a kernel taking a replayed Variable that may be negative runs outside graphs."""
  graph = Device[_device_of(ei)].graph
  if ei.runner is None and not (engine_copies(ei.bufs[0].device, ei.bufs[1].device) and Device[ei.bufs[0].device].compute_queue_t.copies):
    return None  # a graph copies on the compute queue
  if ei.runner is not None and any(v.arg[0] in variables and v.vmin < 0 for v in ei.runner.spec.vars): return None
  return graph

def batch_into_graphs(items: list[ExecItem], slots: dict[int, int], variables: frozenset[str] = frozenset()) -> list[ExecItem | GraphBatch]:
  """JIT=1: runs of consecutive calls that one graph executor can run become batches, the first at most
  JIT_BATCH_SIZE calls and each next one twice as many; a run of one call too (its replay skips building a command
  queue: a one-kernel CPU replay took 19 us as a call, 15.5 us as a graph). JIT=2: no batches. `variables`: the
  names replays bind."""
  if JIT.value >= 2: return list(items)
  steps: list[ExecItem | GraphBatch] = []
  batch: list[ExecItem] = []
  limit = max(JIT_BATCH_SIZE.value, 1)
  def flush():
    nonlocal limit
    if batch: steps.append(GraphBatch(list(batch), slots, _graph_of(batch[0], variables), variables)); limit *= 2
    batch.clear()
  for ei in items:
    graph = _graph_of(ei, variables)
    if graph is None or (batch and _graph_of(batch[0], variables) is not graph): flush()
    if graph is None: steps.append(ei)
    else:
      batch.append(ei)
      if len(batch) >= limit: flush()
  flush()
  return steps

class CapturedJit:
  def __init__(self, items: list[ExecItem], names: list, inputs: list[tuple[Buffer, InputInfo, dict[str, int]]], ret: Any, variables: frozenset[str]):
    self.items, self.names, self.ret, self.variables = items, names, ret, variables
    self.input_buffers = [b for b, _, _ in inputs]
    self.input_info = [i for _, i, _ in inputs]
    self.slots = {id(b): k for k, b in enumerate(self.input_buffers)}
    self.kernel_count = sum(1 for ei in items if ei.runner is not None)
    self.steps = batch_into_graphs(items, self.slots, variables)

  def __call__(self, inputs: list[Buffer], var_vals: dict[str, int]) -> Any:
    for step in self.steps:
      if isinstance(step, GraphBatch): step.run(inputs, var_vals)
      else: ExecItem(step.runner, [inputs[self.slots[id(b)]] if id(b) in self.slots else b for b in step.bufs], {**step.var_vals, **var_vals} if var_vals else step.var_vals).run(jit=True)
    if var_vals:
      for t in _output_tensors(self.ret): t._point_at(_rebound(t.uop, var_vals))
    return self.ret

class TinyJit:
  """Decorator: `@TinyJit def step(x): ...`. JIT=0 turns it off; shapes, dtypes and views of inputs are checked."""
  def __init__(self, fxn: Callable | None = None, prune: bool = False):
    if prune: raise JitError("TinyJit(prune=True) is not supported yet")
    self.fxn, self.cnt, self.captured = fxn, 0, None
    self._last_inputs: dict[int, tuple[UOp, list]] = {}  # input position -> (its node in the last call, _describe of it)
    self._checked: tuple = (None,)  # the last replay that passed the checks: (_call_key, input buffers, var_vals)
    if fxn is not None: functools.update_wrapper(self, fxn)

  def reset(self) -> None: self.cnt, self.captured, self._last_inputs, self._checked = 0, None, {}, (None,)
  def __get__(self, obj, objtype=None):  # on a method: one JIT shared by every instance of the class
    return functools.partial(self.__call__, obj) if obj is not None else self

  def __call__(self, *args, **kwargs) -> Any:
    if self.fxn is None:  # @TinyJit() with arguments
      self.fxn = args[0]
      functools.update_wrapper(self, self.fxn)
      return self
    if not JIT: return self.fxn(*args, **kwargs)
    if capture_stack and self.cnt >= 1: raise RuntimeError("having TinyJit inside another TinyJit is not supported")
    named = _input_tensors(args, kwargs)
    if self.cnt >= 2 and _call_key(named, args, kwargs) == self._checked[0]: return self._replay(*self._checked[1:])
    if len({id(t) for _, t in named}) != len(named): raise JitError("duplicate inputs to JIT")
    Tensor.realize_all(*(t for _, t in named))
    described = [d for i, (_, t) in enumerate(named) for d in self._described(i, t)]
    if len({id(b) for b, _, _ in described}) != len(described): raise JitError("duplicate inputs to JIT (two inputs share a buffer)")
    var_vals = _bound_values(described, args, kwargs)
    if self.cnt == 0:
      self.cnt = 1
      return self.fxn(*args, **kwargs)
    if self.cnt == 1: return self._capture(args, kwargs, [n for n, _ in named], described, frozenset(var_vals))
    names = [n for n, _ in named]
    if names != self.captured.names: raise JitError(f"args mismatch in JIT: expected inputs {self.captured.names}, got {names}")
    infos = [i for _, i, _ in described]
    if infos != self.captured.input_info:
      bad = next(k for k, (a, b) in enumerate(zip(infos, self.captured.input_info)) if a != b)
      part_names = [n for n, t in named for _ in range(len(t.uop.src) if t.uop.op is Ops.MULTI else 1)]
      raise JitError(f"args mismatch in JIT: input {part_names[bad]!r} expected {_show(self.captured.input_info[bad])}, got {_show(infos[bad])}")
    if set(var_vals) != self.captured.variables:
      raise JitError(f"args mismatch in JIT: the inputs bind Variables {sorted(var_vals)}, the capture bound {sorted(self.captured.variables)}")
    self._checked = (_call_key(named, args, kwargs), [b for b, _, _ in described], var_vals)
    return self._replay(*self._checked[1:])

  def _replay(self, buffers: list[Buffer], var_vals: dict[str, int]) -> Any:
    self.cnt += 1
    if DEBUG >= 1 and self.cnt % 10 == 0: print(f"jit execs {self.cnt - 2} calls")
    return self.captured(buffers, var_vals)

  def _described(self, position: int, t: Tensor) -> list:
    """_describe(t), reused while the input at `position` is the node it was in the last call (nodes are immutable)."""
    last = self._last_inputs.get(position)
    if last is None or last[0] is not t.uop: self._last_inputs[position] = last = (t.uop, _describe(t))
    return last[1]

  def _capture(self, args, kwargs, names, described, variables: frozenset[str]) -> Any:
    if capture_stack: raise RuntimeError("having TinyJit inside another TinyJit is not supported")
    items: list[ExecItem] = []
    capture_stack.append(items)
    try:
      ret = self.fxn(*args, **kwargs)
      outs = _output_tensors(ret)
      Tensor.realize_all(*outs)
    finally: capture_stack.pop()
    if not items: raise JitError("didn't JIT anything!")
    self.captured = CapturedJit(plan_memory(items, {id(b) for b, _, _ in described}), names, described, ret, variables)
    self.cnt = 2
    if DEBUG >= 1: print(f"JIT captured {self.captured.kernel_count} kernels with {len(described)} inputs")
    return ret

def plan_memory(items: list[ExecItem], inputs: set[int]) -> list[ExecItem]:
  """Let buffers that only live inside the captured calls share memory when their lifetimes don't overlap."""
  reachable = {id(b) for b in buffers_in([t.uop for t in list(Tensor._live)])}
  first: dict[int, int] = {}
  last: dict[int, int] = {}
  by_id: dict[int, Buffer] = {}
  for i, ei in enumerate(items):
    for b in ei.bufs:
      if b.base is not b or id(b) in inputs or id(b) in reachable: continue
      by_id[id(b)] = b
      first.setdefault(id(b), i)
      last[id(b)] = i
  pool: dict[tuple, list[tuple[int, Buffer]]] = {}  # (device, size, dtype) -> [(free from index, buffer)]
  replace: dict[int, Buffer] = {}
  for bid in sorted(first, key=first.get):
    b = by_id[bid]
    slots = pool.setdefault((b.device, b.size, b.dtype), [])
    free = next((k for k, (until, _) in enumerate(slots) if until < first[bid]), None)
    if free is None: slots.append((last[bid], b))
    else:
      replace[bid] = slots[free][1]
      slots[free] = (last[bid], slots[free][1])
  if DEBUG >= 1 and replace: print(f"JIT memory planner: {len(replace)} of {len(first)} internal buffers share memory")
  return [ExecItem(ei.runner, [replace.get(id(b), b) for b in ei.bufs], ei.var_vals) for ei in items]

def _show(i: InputInfo) -> str: return f"shape {i.view.shape} {i.dtype} on {i.device} (view {i.view.views})"

def is_capturing() -> bool: return bool(capture_stack)
