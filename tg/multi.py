"""Multi-device tensors. A MULTI node is one logical tensor held as one part per device: split evenly along an axis,
or (axis None) a whole copy on each. Tensor ops build the logical graph over MULTI nodes as usual (shapes are the
logical ones, autograd runs on it unchanged); before scheduling, `distribute` turns each op over MULTI nodes into one
op per device, moving data with device copies where the operands' layouts differ. A reduction along the split axis
becomes an allreduce; copying to one device concatenates the parts there."""
from __future__ import annotations
import functools
from ir.helpers import prod
from ir.ops import Ops, ELEMENTWISE, MOVEMENT
from ir.pattern import substitute
from ir.uop import UOp
from drivers.device import Device
from drivers.host_memory import HostAllocator

# allreduces of at least this many bytes over more than two devices with memories of their own go around the ring,
# others directly (devices sharing host memory gain nothing from the ring: scripts/bench_multi.py measured it slower)
RING_MIN_BYTES = 1 << 16
# ops that keep their operands' shape, applied part by part
PARTWISE = ELEMENTWISE | {Ops.CONTIGUOUS, Ops.CONTIGUOUS_BACKWARD, Ops.DETACH, Ops.GRAD_OVERRIDE}
# what a reduction op combines with
COMBINE = {Ops.ADD: Ops.ADD, Ops.MUL: Ops.MUL, Ops.MAX: Ops.MAX}

def part_range(size: int, count: int, i: int) -> tuple[int, int]: return (size // count * i, size // count * (i + 1))

def _part(u: UOp, axis: int, count: int, i: int) -> UOp:
  """The i-th of `count` equal parts of u along axis."""
  return u.shrink(tuple(part_range(s, count, i) if a == axis else (0, s) for a, s in enumerate(u.shape)))

def shard(u: UOp, devices: tuple[str, ...], axis: int | None) -> UOp:
  """u split along `axis` over `devices` (a whole copy on each for axis None); the size must divide evenly, as in tinygrad."""
  if axis is not None and u.shape[axis] % len(devices):
    raise RuntimeError(f"can't shard axis {axis} of shape {u.shape} evenly over {len(devices)} devices")
  parts = [u if axis is None else _part(u, axis, len(devices), i) for i in range(len(devices))]
  return UOp(Ops.MULTI, u.dtype, tuple(on_device(p, d) for p, d in zip(parts, devices)), axis)

def on_device(u: UOp, device: str) -> UOp:
  """u's value on `device`: the same graph built there when it reads no memory (constants, aranges), else a copy."""
  if u.device == device: return u
  nodes = u.toposort()
  if not any(n.op in (Ops.BUFFER, Ops.COPY, Ops.ASSIGN, Ops.MULTI) for n in nodes):
    return substitute(u, {n: UOp(Ops.DEVICE, arg=device) for n in nodes if n.op is Ops.DEVICE})
  return UOp(Ops.COPY, u.dtype, (u,), device)

def concat(parts: list[UOp], axis: int) -> UOp:
  """The parts (on one device) joined along axis: each padded to the whole with zeros, then added."""
  if len(parts) == 1: return parts[0]
  total, at, out = sum(p.shape[axis] for p in parts), 0, None
  for p in parts:
    padded = p.pad(tuple((at, total - at - p.shape[axis]) if a == axis else (0, 0) for a in range(len(p.shape))))
    out, at = padded if out is None else out.alu(Ops.ADD, padded), at + p.shape[axis]
  return out

def gather(m: UOp, device: str) -> UOp:
  """The whole logical tensor of MULTI m on `device`."""
  if m.arg is None: return next((p for p in m.src if p.device == device), None) or on_device(m.src[0], device)
  return concat([on_device(p, device) for p in m.src], m.arg)

def layout(u: UOp, devices: tuple[str, ...], axis: int | None) -> list[UOp]:
  """u (already distributed) as one part per device, split along axis (whole copies for None)."""
  if u.op is Ops.MULTI:
    if u.device != devices: raise RuntimeError(f"tensors on different devices: {u.device} and {devices}")
    if u.arg == axis: return list(u.src)
    whole = list(u.src) if u.arg is None else [gather(u, d) for d in devices]
  else: whole = [on_device(u, d) for d in devices]
  return whole if axis is None else [_part(w, axis, len(devices), i) for i, w in enumerate(whole)]

def use_ring(devices: tuple[str, ...], nbytes: int) -> bool:
  """Whether an allreduce of `nbytes` per device goes around the ring rather than directly."""
  return len(devices) > 2 and nbytes >= RING_MIN_BYTES and not all(isinstance(Device[d].allocator, HostAllocator) for d in devices)

def allreduce(parts: list[UOp], op: Ops, devices: tuple[str, ...]) -> list[UOp]:
  """Every device gets the reduction (op) of all parts, the same bits on each. Two devices or few bytes: each device
  combines copies of every part, in device order. Else a ring: each part split in as many chunks as devices, each
  chunk reduced along the ring (reduce-scatter), then passed around it (all-gather)."""
  count = len(parts)
  shape, size = parts[0].shape, prod(parts[0].shape)
  if size < count or not use_ring(devices, size * parts[0].dtype.itemsize):
    return [functools.reduce(lambda a, b: a.alu(COMBINE[op], b), [on_device(p, d) for p in parts]) for d in devices]
  flat = [p.reshape((size,)) for p in parts]
  bounds = [(size * c // count, size * (c + 1) // count) for c in range(count)]
  here: list[dict[int, UOp]] = [{} for _ in range(count)]  # device -> reduced chunk c there
  for c in range(count):
    acc = flat[c].shrink((bounds[c],))
    for step in range(1, count):  # reduce-scatter: the running sum hops to the next device and takes its chunk in
      j = (c + step) % count
      acc = on_device(acc, devices[j]).alu(COMBINE[op], flat[j].shrink((bounds[c],)))
    owner = (c + count - 1) % count
    here[c][owner] = acc
    for step in range(1, count):  # all-gather: the reduced chunk hops on around the ring
      j, prev = (owner + step) % count, (owner + step - 1) % count
      here[c][j] = on_device(here[c][prev], devices[j])
  return [concat([here[c][d] for c in range(count)], 0).reshape(shape) for d in range(count)]

def _reshaped_axis(old: tuple, new: tuple, axis: int, count: int) -> int | None:
  """The axis of `new` that holds the parts of `old` split along `axis`, when a reshape keeps each part whole and in
  place (same elements before it, a size the parts divide); None when it moves data between parts."""
  before = prod(old[:axis])
  for b in range(len(new)):
    if prod(new[:b]) == before and new[b] % count == 0: return b
  return None

def _movement(n: UOp, m: UOp) -> UOp:
  """Movement op n applied to MULTI m, part by part when the split axis survives it, else on whole copies."""
  a, count = m.arg, len(m.src)
  if a is None: return UOp(Ops.MULTI, n.dtype, tuple(UOp(n.op, n.dtype, (p,), n.arg) for p in m.src), None)
  part = m.src[0].shape[a]
  if n.op is Ops.PERMUTE: return UOp(Ops.MULTI, n.dtype, tuple(p.permute(n.arg) for p in m.src), n.arg.index(a))
  if n.op is Ops.EXPAND: return UOp(Ops.MULTI, n.dtype, tuple(p.expand(tuple(part if i == a else s for i, s in enumerate(n.arg))) for p in m.src), a)
  if n.op is Ops.RESHAPE and (b := _reshaped_axis(m.shape, n.arg, a, count)) is not None:
    return UOp(Ops.MULTI, n.dtype, tuple(p.reshape(tuple(s // count if i == b else s for i, s in enumerate(n.arg))) for p in m.src), b)
  if n.op is Ops.SHRINK and n.arg[a] == (0, m.shape[a]):
    return UOp(Ops.MULTI, n.dtype, tuple(p.shrink(tuple((0, part) if i == a else r for i, r in enumerate(n.arg))) for p in m.src), a)
  if (n.op is Ops.PAD and n.arg[a] == (0, 0)) or (n.op is Ops.FLIP and not n.arg[a]):
    return UOp(Ops.MULTI, n.dtype, tuple(UOp(n.op, n.dtype, (p,), n.arg) for p in m.src), a)
  whole = [gather(m, d) for d in m.device]  # the op moves data between parts: apply it to whole copies
  return UOp(Ops.MULTI, n.dtype, tuple(UOp(n.op, n.dtype, (w,), n.arg) for w in whole), None)

def _distribute_one(n: UOp, src: tuple[UOp, ...]) -> UOp:
  """Node n with its sources already distributed, at least one of them a MULTI."""
  multis = [s for s in src if s.op is Ops.MULTI]
  devices = multis[0].device
  if n.op in MOVEMENT: return _movement(n, src[0])
  if n.op is Ops.REDUCE_AXIS:
    m, (op, axes) = src[0], n.arg
    partial = tuple(p.r(op, axes) for p in m.src)  # r drops axes a part has only one element along
    if m.arg is None or m.arg not in axes: return UOp(Ops.MULTI, n.dtype, partial, m.arg)
    return UOp(Ops.MULTI, n.dtype, tuple(allreduce(list(partial), op, devices)), None)
  if n.op is Ops.COPY:
    if isinstance(n.arg, tuple): raise RuntimeError("a multi-device tensor is moved to other devices with shard, not to")
    return gather(src[0], n.arg)
  if n.op is Ops.ASSIGN:
    target = src[0]
    if target.op is not Ops.MULTI: raise RuntimeError(f"can't assign a multi-device value to a tensor on {target.device}")
    values = layout(src[1], devices, target.arg)
    return UOp(Ops.MULTI, n.dtype, tuple(UOp(Ops.ASSIGN, n.dtype, (t, v)) for t, v in zip(target.src, values)), target.arg)
  if n.op is Ops.TAKE:
    x, idx = src
    axis = idx.arg if idx.op is Ops.MULTI else x.arg
    xs = layout(x, devices, None if axis == n.arg else axis)  # the gathered axis stays whole on every device
    return UOp(Ops.MULTI, n.dtype, tuple(UOp(Ops.TAKE, n.dtype, (a, b), n.arg) for a, b in zip(xs, layout(idx, devices, axis))), axis)
  if n.op in PARTWISE:
    if any(m.device != devices for m in multis): raise RuntimeError(f"tensors on different devices: {' and '.join(str(m.device) for m in multis)}")
    axis = next((m.arg for m in multis if m.arg is not None), None) if n.shape else None
    parts = [layout(s, devices, axis) for s in src]
    return UOp(Ops.MULTI, n.dtype, tuple(UOp(n.op, n.dtype, tuple(p[i] for p in parts), n.arg) for i in range(len(devices))), axis)
  raise RuntimeError(f"{n.op} is not supported on multi-device tensors")

def distribute(targets: list[UOp]) -> dict[UOp, UOp]:
  """{logical node: the same value as per-device nodes} for every node of the targets' graphs that reads a
  multi-device tensor (a MULTI whose parts hold no MULTI); nodes that read none are left out."""
  out: dict[UOp, UOp] = {}
  for n in UOp(Ops.SINK, src=tuple(targets)).toposort()[:-1]:
    src = tuple(out.get(s, s) for s in n.src)
    if n.op in (Ops.CONST, Ops.ARANGE) and n.src and isinstance(n.src[0].arg, tuple):  # made on several devices: one copy on each
      out[n] = UOp(Ops.MULTI, n.dtype, tuple(n.replace(src=(UOp(Ops.DEVICE, arg=d),)) for d in n.src[0].arg), None)
    elif n.op is Ops.MULTI:
      if any(s.op is Ops.MULTI for s in src): raise RuntimeError("a multi-device tensor can't be a part of another one")
      if src != n.src: out[n] = UOp(Ops.MULTI, n.dtype, src, n.arg)
    elif any(s.op is Ops.MULTI for s in src): out[n] = _distribute_one(n, src)
  return out
