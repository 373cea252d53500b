"""SCACHE: a graph that differs from an earlier one only in which input buffers it reads, or in the values bound to
its Variables, gets that graph's schedule again (same kernel ASTs, fresh intermediate buffers) without running the
scheduler."""
from __future__ import annotations
import time
from collections import OrderedDict
from dataclasses import dataclass
from ir.dtype import DType, dtypes
from ir.ops import Ops
from ir.pattern import substitute
from ir.switches import DEBUG, SCACHE
from ir.uop import UOp
from drivers.device import Buffer, Image
from tg.schedule import ScheduleItem, Scheduler, rebind, unbind
from tg.viz import capture as viz

MAX_ENTRIES = 512

@dataclass(frozen=True)
class BufferSlot:
  """Stands for the index-th input buffer of a cached graph (it has what the scheduler reads of a Buffer)."""
  index: int
  device: str
  size: int
  dtype: DType
  image: Image | None = None  # the input's layout is part of the kernels that read it
  offset: int = 0
  @property
  def base(self) -> BufferSlot: return self
  def view(self, size: int, dtype: DType, offset: int) -> SlotView: return SlotView(self, size, dtype, offset)

@dataclass(frozen=True)
class SlotView:
  """A byte range of an input slot (what Buffer.view is for a real buffer)."""
  slot: BufferSlot
  size: int
  dtype: DType
  offset: int
  image = None  # a view is plain memory
  @property
  def device(self) -> str: return self.slot.device

@dataclass
class _Template:
  items: list[ScheduleItem]          # bufs hold BufferSlots (inputs) and the template's own Buffers (intermediates)
  becomes: list[tuple[int, UOp]]     # (position of the node in the graph's toposort, its BUFFER view)
  fresh: list[Buffer]                # the template's intermediates, replaced by new Buffers on every use

_cache: OrderedDict[UOp, _Template] = OrderedDict()
stats = {"hits": 0, "misses": 0}

def create_schedule(targets: list[UOp]) -> tuple[list[ScheduleItem], dict[UOp, UOp], dict[str, int]]:
  """(kernels and copies in run order, {realized node: its BUFFER view}, Variable values), through the cache. Every
  item carries the Variable values; a symbolically shaped result's view is bound to them again."""
  sink = UOp(Ops.SINK, dtypes.void, tuple(targets))
  order = sink.toposort()
  unbound, var_vals = unbind(sink, order)
  if unbound: order = unbound[sink].toposort()
  with viz.scheduling(): items, becomes = _schedule(order[-1], order)  # VIZ watches the scheduler's stages
  if unbound: becomes = {node: rebind(becomes[new], var_vals) for node, new in unbound.items() if new in becomes}
  for it in items: it.var_vals = dict(var_vals)
  return items, becomes, var_vals

def _schedule(sink: UOp, order: list[UOp]) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
  """The schedule of the graph under `sink` (its toposort is `order`), from the cache when SCACHE allows."""
  st = time.perf_counter()
  if not SCACHE: return Scheduler(list(sink.src)).schedule()
  inputs = [u for u in order if u.op is Ops.BUFFER]
  slot_uops = {u: UOp(Ops.BUFFER, u.dtype, (), (BufferSlot(i, u.arg[0].device, u.arg[0].size, u.arg[0].dtype, u.arg[0].image),)) for i, u in enumerate(inputs)}
  key = substitute(sink, slot_uops)
  if (template := _cache.get(key)) is None:
    stats["misses"] += 1
    template = _make_template(key)
    _cache[key] = template
    if len(_cache) > MAX_ENTRIES: _cache.popitem(last=False)
    hit = False
  else:
    stats["hits"] += 1
    _cache.move_to_end(key)
    hit = True
  out = _instantiate(template, inputs, order, slot_uops)
  if DEBUG >= 1 and (len(out[0]) > 1 or DEBUG >= 3):
    print(f"scheduled {len(out[0]):5d} kernels in {(time.perf_counter() - st) * 1e3:8.2f} ms | {'cache hit' if hit else 'CACHE MISS'}")
  return out

def _make_template(key: UOp) -> _Template:
  items, becomes = Scheduler(list(key.src)).schedule()
  position = {u: i for i, u in enumerate(key.toposort())}
  fresh = list(dict.fromkeys(b for it in items for b in it.bufs if isinstance(b, Buffer)))
  fresh += [v.base.arg[0] for v in becomes.values() if v.base.op is Ops.BUFFER and isinstance(v.base.arg[0], Buffer) and v.base.arg[0] not in fresh]
  return _Template(items, [(position[k], v) for k, v in becomes.items() if k in position], fresh)

def _instantiate(t: _Template, inputs: list[UOp], order: list[UOp], slot_uops: dict[UOp, UOp]) -> tuple[list[ScheduleItem], dict[UOp, UOp]]:
  new_bufs = {b: Buffer(b.device, b.size, b.dtype, options=b.options) for b in t.fresh}
  real: dict = {slot.arg[0]: u.arg[0] for u, slot in slot_uops.items()}
  real.update(new_bufs)
  for v in {b for it in t.items for b in it.bufs if isinstance(b, SlotView)}:
    src = real[v.slot]
    real[v] = src.base.view(v.size, v.dtype, src.offset + v.offset)
  items = [ScheduleItem(it.ast, [real[b] for b in it.bufs], {}, it.writes_version, {real[b]: v for b, v in it.reads.items()})
           for it in t.items]
  buffer_uops = {UOp(Ops.BUFFER, b.dtype, (), (b,)): UOp(Ops.BUFFER, nb.dtype, (), (nb,)) for b, nb in new_bufs.items()}
  buffer_uops.update({slot: u for u, slot in slot_uops.items()})
  becomes = {order[pos]: substitute(v, buffer_uops) for pos, v in t.becomes}
  return items, becomes
