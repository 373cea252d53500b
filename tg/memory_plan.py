"""Memory for one schedule's intermediate buffers: those no tensor holds once the schedule has run share one block of
host memory, each at an offset where no other one is live at the same time (live: from the first item that uses it
to the last). The first run of a training step then touches about its peak live memory instead of the sum of all
its intermediates, and on a VM every first touch of fresh memory can cost a host page fault."""
from __future__ import annotations
from collections import defaultdict
from ir.dtype import dtypes
from ir.ops import Ops
from ir.switches import DEBUG
from ir.uop import UOp
from drivers.device import Buffer, Device
from drivers.host_memory import HostAllocator
from tg.schedule import ScheduleItem

MIN_SHARED_BYTES = 1 << 18  # smaller buffers cost little memory and would only add views
PLACEMENT = 4096  # offsets are page-aligned: a buffer's first touch faults in only pages of its own

def _shareable(b: Buffer) -> bool:
  return (not b.is_allocated() and b.options is None and b.nbytes >= MIN_SHARED_BYTES
          and isinstance(Device[b.device].allocator, HostAllocator))

def _lifetimes(items: list[ScheduleItem]) -> dict[Buffer, tuple[int, int]]:
  """(first, last) item index of each buffer not yet in memory that only kernels use, whole, and that is big enough
  to be worth sharing."""
  span: dict[Buffer, tuple[int, int]] = {}
  refused: set[Buffer] = set()
  for i, item in enumerate(items):
    for b in item.bufs:
      # a copy may run on another device's queue, and a view would need its base moved with it
      if item.ast.op is Ops.COPY or b.base is not b: refused.add(b.base)
      else: span[b] = (span.get(b, (i, i))[0], i)
  return {b: s for b, s in span.items() if b not in refused and _shareable(b)}

def buffers_in(graphs: list[UOp]) -> set[Buffer]:
  """The (base) buffers the graphs read."""
  nodes = UOp(Ops.SINK, dtypes.void, tuple(graphs)).toposort() if graphs else []
  return {u.arg[0].base for u in nodes if u.op is Ops.BUFFER and isinstance(u.arg[0], Buffer)}

def _offsets(spans: dict[Buffer, tuple[int, int]]) -> tuple[dict[Buffer, int], int]:
  """A page-aligned offset per buffer, first fit from the largest down, so that buffers live at the same time never
  overlap; and the bytes the block needs."""
  placed: list[tuple[int, int, int, int]] = []  # (offset, end, first, last)
  at: dict[Buffer, int] = {}
  for b in sorted(spans, key=lambda b: (-b.nbytes, spans[b])):
    first, last = spans[b]
    offset = 0
    for start, end, f, l in sorted(p for p in placed if p[2] <= last and first <= p[3]):
      if offset + b.nbytes <= start: break
      offset = max(offset, -(-end // PLACEMENT) * PLACEMENT)
    placed.append((offset, offset + b.nbytes, first, last))
    at[b] = offset
  return at, max((p[1] for p in placed), default=0)

def share_memory(items: list[ScheduleItem], results: list[UOp], held: list[UOp]) -> list[ScheduleItem]:
  """`items` with their intermediates replaced by views of one block per device, where that saves memory: the buffers
  of `results` (what the scheduler computed) that no graph in `held` (the live tensors' graphs afterwards) reads."""
  if len(spans := _lifetimes(items)) < 2: return items
  made, kept = buffers_in(results), buffers_in(held)
  by_device: dict[str, dict[Buffer, tuple[int, int]]] = defaultdict(dict)
  for b, span in spans.items():
    if b in made and b not in kept: by_device[b.device][b] = span
  replace: dict[Buffer, Buffer] = {}
  for device, spans in by_device.items():
    at, size = _offsets(spans)
    if size >= (separate := sum(b.nbytes for b in spans)): continue  # nothing shares: separate buffers are as good
    block = Buffer(device, size, dtypes.uint8)
    replace.update({b: block.view(b.size, b.dtype, offset) for b, offset in at.items()})
    if DEBUG >= 2: print(f"memory plan: {len(spans)} intermediates on {device} share {size / 2**20:.1f} MiB instead of {separate / 2**20:.1f}")
  if not replace: return items
  return [ScheduleItem(it.ast, [replace.get(b, b) for b in it.bufs], it.var_vals, it.writes_version,
                       {replace.get(b, b): v for b, v in it.reads.items()}) for it in items]
