"""PYTHON device: runs linear programs with numpy, every thread of a launch in lockstep: each UOp is one numpy
operation over all threads, and each workgroup has its own copy of local memory. It needs no compiler, so codegen
can be checked anywhere, and it executes the kernels that the hardware models launch."""
from __future__ import annotations
import pickle
import numpy as np
from ir.dtype import DType, dtypes
from ir.helpers import prod
from ir.ops import Ops
from ir.uop import UOp
from codegen.python_renderer import PythonCompiler, PythonRenderer
from codegen.renderer import ProgramSpec
from drivers.hcq import HCQCompiled, HCQProgram, SoftwareCopyQueue, SoftwareEngine, SoftwareQueue
from drivers.host_memory import HostAllocator

_NP = {dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16, dtypes.uint16: np.uint16,
       dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64, dtypes.uint64: np.uint64, dtypes.float16: np.float16,
       dtypes.float32: np.float32, dtypes.float64: np.float64, dtypes.bfloat16: np.float32, dtypes.fp8e4m3: np.uint8, dtypes.fp8e5m2: np.uint8}
_STORAGE = {**_NP, dtypes.bool: np.uint8, dtypes.bfloat16: np.uint16}

def np_type(dt: DType): return _NP[dt.scalar]

def round_bf16(x: np.ndarray) -> np.ndarray:
  """float32 values rounded to the nearest bfloat16 (ties to even), still float32."""
  bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
  return (((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)).view(np.float32)

def _cast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
  if dst.scalar == dtypes.bool: return x != 0
  if dtypes.is_int(dst) and dtypes.is_float(src):  # saturating, NaN -> 0 (like LLVM's fptosi.sat)
    info = np.iinfo(np_type(dst))
    # compared with the range's ends as powers of two: a clip to info.max rounds up to 2**31 in float32 and wraps
    high, low = x >= float(info.max) + 1, x < float(info.min)
    inside = np.where(high | low | np.isnan(x), 0, x).astype(np_type(dst))
    return np.where(high, info.max, np.where(low, info.min, inside)).astype(np_type(dst))
  out = x.astype(np_type(dst))
  return round_bf16(out) if dst.scalar == dtypes.bfloat16 else out

def _bitcast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
  if src.scalar == dtypes.bfloat16: x = (x.view(np.uint32) >> 16).astype(np.uint16)
  if dst.scalar == dtypes.bfloat16: return (x.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
  return x.view(_STORAGE[dst.scalar])

def _idiv(a, b, unsigned: bool):
  safe = np.where(b == 0, 1, b)
  if unsigned: return a // safe
  q = np.abs(a) // np.abs(safe)
  return np.where((a < 0) != (safe < 0), -q, q).astype(a.dtype)

def _alu(op: Ops, dt: DType, src_dt: DType, args: list):
  a = args[0]
  unsigned = dtypes.is_unsigned(src_dt)
  if op is Ops.ADD: return np.logical_or(*args) if src_dt.scalar == dtypes.bool else a + args[1]
  if op is Ops.SUB: return a - args[1]
  if op is Ops.MUL: return np.logical_and(*args) if src_dt.scalar == dtypes.bool else a * args[1]
  if op is Ops.FDIV: return a / args[1]
  if op is Ops.IDIV: return _idiv(a, args[1], unsigned)
  if op is Ops.MOD:
    if dtypes.is_float(src_dt): return np.fmod(a, args[1])
    return (a - _idiv(a, args[1], unsigned) * np.where(args[1] == 0, 1, args[1])).astype(a.dtype)
  if op is Ops.MAX: return np.maximum(a, args[1])
  if op is Ops.CMPLT: return a < args[1]
  if op is Ops.CMPNE: return a != args[1]
  if op is Ops.CMPEQ: return a == args[1]
  if op is Ops.AND: return a & args[1]
  if op is Ops.OR: return a | args[1]
  if op is Ops.XOR: return a ^ args[1]
  if op in (Ops.SHL, Ops.SHR):
    amount = (args[1] & (8 * src_dt.scalar.itemsize - 1)).astype(a.dtype)
    return (a << amount) if op is Ops.SHL else (a >> amount)
  if op is Ops.NEG: return np.logical_not(a) if src_dt.scalar == dtypes.bool else -a
  if op is Ops.RECIP: return 1 / a
  if op is Ops.SQRT: return np.sqrt(a)
  if op is Ops.EXP2: return np.exp2(a)
  if op is Ops.LOG2: return np.log2(a)
  if op is Ops.SIN: return np.sin(a)
  if op is Ops.TRUNC: return np.trunc(a) if dtypes.is_float(src_dt) else a
  if op is Ops.WHERE: return np.where(a, args[1], args[2])
  if op is Ops.MULACC: return a * args[1] + args[2]
  raise NotImplementedError(f"PYTHON can't run {op}")

class PythonProgram(HCQProgram):
  def __init__(self, dev: PythonDevice, name: str, lib: bytes, spec: ProgramSpec):
    super().__init__(dev, name)
    self.uops, self.nbufs = pickle.loads(lib), len(spec.globals)
    self.end_of: dict[int, int] = {}
    stack: list[int] = []
    for i, u in enumerate(self.uops):
      if u.op is Ops.RANGE: stack.append(i)
      elif u.op is Ops.ENDRANGE: self.end_of[stack.pop()] = i

  def execute(self, args: list, global_size, local_size) -> None:
    bufs, vals = args[:self.nbufs], tuple(args[self.nbufs:])
    local_size = tuple(local_size or (1, 1, 1))
    groups, per_group = prod(global_size), prod(local_size)
    t = np.arange(groups * per_group)
    with np.errstate(all="ignore"): self._run(bufs, vals, t // per_group, t % per_group, global_size, local_size)

  def _run(self, bufs, vals, group: np.ndarray, lane: np.ndarray, global_size, local_size) -> None:
    n = len(group)
    v: dict[UOp, object] = {}
    user_vars = iter(vals)
    def ids(flat: np.ndarray, sizes) -> list[np.ndarray]:
      out = []
      for s in sizes:
        out.append(flat % s)
        flat = flat // s
      return out
    gid, lid = ids(group, global_size), ids(lane, local_size)
    loop_stack: list[list] = []
    active = [np.ones(n, dtype=bool)]  # lanes running the current IF branch
    pc = 0
    uops = self.uops
    while pc < len(uops):
      u = uops[pc]
      op = u.op
      if op is Ops.CONST: v[u] = np.array(u.arg, dtype=np_type(u.dtype))
      elif op is Ops.DEFINE_GLOBAL: v[u] = bufs[u.arg]
      elif op is Ops.DEFINE_VAR: v[u] = np.array(next(user_vars), dtype=np_type(u.dtype))
      elif op is Ops.SPECIAL: v[u] = (gid if u.arg[0].startswith("g") else lid)[int(u.arg[0][-1])].astype(np_type(u.dtype))
      elif op is Ops.DEFINE_LOCAL: v[u] = np.zeros(int(group.max(initial=0) + 1) * u.dtype.size * u.dtype.base.itemsize, dtype=np.uint8)
      elif op is Ops.BARRIER: pass  # the workgroup runs in lockstep: every thread is already here
      elif op is Ops.IF: active.append(active[-1] & np.broadcast_to(v[u.src[0]], (n,)))
      elif op is Ops.ENDIF: active.pop()
      elif op is Ops.RANGE:
        start, end = int(v[u.src[0]]), int(v[u.src[1]])
        if start >= end:
          pc = self.end_of[pc] + 1
          continue
        loop_stack.append([pc, start, end])
        v[u] = np.array(start, dtype=np_type(u.dtype))
      elif op is Ops.ENDRANGE:
        frame = loop_stack[-1]
        frame[1] += 1
        if frame[1] < frame[2]:
          v[uops[frame[0]]] = np.array(frame[1], dtype=np_type(uops[frame[0]].dtype))
          pc = frame[0] + 1
          continue
        loop_stack.pop()
      elif op is Ops.DEFINE_ACC: v[u] = np.broadcast_to(v[u.src[0]], (n, u.dtype.count) if u.dtype.count > 1 else (n,)).copy()
      elif op is Ops.LOAD: v[u] = self._load(u, v, group)
      elif op is Ops.STORE: self._store(u, v, n, active[-1], group)
      elif op is Ops.VECTORIZE: v[u] = np.stack([np.broadcast_to(v[s], (n,)) for s in u.src], axis=-1)
      elif op is Ops.GEP: v[u] = v[u.src[0]][..., u.arg]
      elif op is Ops.CAST: v[u] = _cast(np.asarray(v[u.src[0]]), u.src[0].dtype, u.dtype)
      elif op is Ops.BITCAST: v[u] = _bitcast(np.asarray(v[u.src[0]]), u.src[0].dtype, u.dtype)
      else:
        out = np.asarray(_alu(op, u.dtype, u.src[0].dtype, [v[s] for s in u.src]))
        out = out.astype(np_type(u.dtype), copy=False)
        v[u] = round_bf16(out) if u.dtype.scalar == dtypes.bfloat16 else out
      pc += 1

  def _memory(self, buf: UOp, mem: np.ndarray) -> np.ndarray: return mem.view(_STORAGE[buf.dtype.base.scalar])
  @staticmethod
  def _element(buf: UOp, idx, group: np.ndarray) -> np.ndarray:
    """Element index into a buffer; local memory holds one copy per workgroup."""
    idx = np.asarray(idx).astype(np.int64)
    return idx + group * buf.dtype.size if buf.op is Ops.DEFINE_LOCAL else idx
  def _load(self, u: UOp, v: dict, group: np.ndarray) -> np.ndarray:
    if len(u.src) == 1: return v[u.src[0]].copy()
    mem = self._memory(u.src[0], v[u.src[0]])
    idx = self._element(u.src[0], v[u.src[1]], group)
    if u.dtype.count > 1: idx = idx[..., None] + np.arange(u.dtype.count)
    raw = mem[idx]
    sc = u.dtype.scalar
    if sc == dtypes.bool: return raw != 0
    if sc == dtypes.bfloat16: return (raw.astype(np.uint32) << 16).view(np.float32)
    return raw
  def _store(self, u: UOp, v: dict, n: int, active: np.ndarray, group: np.ndarray) -> None:
    if len(u.src) == 2:
      v[u.src[0]][...] = np.where(active.reshape(-1, *[1] * (v[u.src[0]].ndim - 1)), v[u.src[1]], v[u.src[0]])
      return
    buf, idx, val = u.src[:3]
    mem = self._memory(buf, v[buf])
    sc = val.dtype.scalar
    data = np.asarray(v[val])
    if sc == dtypes.bfloat16: data = (round_bf16(data).view(np.uint32) >> 16).astype(np.uint16)
    index = np.broadcast_to(self._element(buf, v[idx], group), (n,))
    if val.dtype.count > 1: index = index[..., None] + np.arange(val.dtype.count)
    per_thread = lambda x: x.reshape(-1, *[1] * (index.ndim - 1)) if x.ndim == 1 else x  # one gate for all of a thread's lanes
    keep = np.broadcast_to(per_thread(active) & (per_thread(np.asarray(v[u.src[3]])) if len(u.src) == 4 else True), index.shape)
    mem[index[keep]] = np.broadcast_to(data, index.shape).astype(mem.dtype)[keep]

class PythonDevice(HCQCompiled):
  """Programs are interpreted on the compute engine's worker thread."""
  engines_notify = True
  def __init__(self, device: str):
    super().__init__(device, HostAllocator(), PythonRenderer(), PythonCompiler(), lambda name, lib, spec: PythonProgram(self, name, lib, spec),
                     SoftwareQueue, SoftwareCopyQueue)
    self.engines = {"compute": SoftwareEngine(self, "compute"), "copy": SoftwareEngine(self, "copy")}
