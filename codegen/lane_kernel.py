"""What the C-like source renderers (OpenCL C, WGSL) share: one variable per vector lane, declared up front (so a value
made inside a loop or a branch is still in scope after it), structured loops and branches, accumulator loads and
stores, and the walk over the linear program. A language supplies its declarations, barrier, memory access and
arithmetic (see codegen/opencl.py and codegen/wgsl.py)."""
from __future__ import annotations
from ir.dtype import DType
from ir.ops import Ops
from ir.uop import UOp

class LaneKernel:
  language, barrier = "", ""  # its name; the statement that makes a workgroup's local memory writes visible to the group
  def __init__(self, name: str, renderer):
    self.name, self.renderer = name, renderer
    self.decls: list[str] = []
    self.locals: list[str] = []
    self.lines: list[str] = []
    self.helpers: set[str] = set()
    self.val: dict[UOp, list[str]] = {}
    self.count, self.depth = 0, 1
    self.local_dims = [1, 1, 1]

  def var(self, dt: DType, prefix: str = "v") -> str:
    """A fresh variable of scalar type dt, declared at the top of the kernel."""
    self.count += 1
    name = f"{prefix}{self.count}"
    self.decls.append(self.declaration(name, dt))
    return name
  def emit(self, text: str) -> None: self.lines.append("  " * self.depth + text)
  def assign(self, dt: DType, expr: str, prefix: str = "v") -> str:
    out = self.var(dt, prefix)
    self.emit(f"{out} = {expr};")
    return out
  def ref(self, u: UOp, lane: int = 0) -> str:
    if u.op is Ops.CONST: return self.literal(u.arg, u.dtype)
    v = self.val[u]
    return v[lane] if len(v) > 1 else v[0]
  def render_all(self, uops: list[UOp]) -> None:
    for u in uops:
      if u.op is not Ops.CONST: self.val[u] = self.render_one(u)

  def render_one(self, u: UOp) -> list[str]:
    """The control flow and data movement every language writes alike; a language renders its own ops first."""
    op, dt = u.op, u.dtype
    if op is Ops.DEFINE_ACC: return [self.assign(dt.scalar, self.ref(u.src[0], i), "acc") for i in range(dt.count)]
    if op is Ops.RANGE:
      i = self.var(dt, "ridx")
      self.emit(f"for ({i} = {self.ref(u.src[0])}; {i} < {self.ref(u.src[1])}; {i}++) {{")
      self.depth += 1
      return [i]
    if op in (Ops.ENDRANGE, Ops.ENDIF):
      self.depth -= 1
      self.emit("}")
      return []
    if op is Ops.IF:
      self.emit(f"if ({self.ref(u.src[0])}) {{")
      self.depth += 1
      return []
    if op is Ops.BARRIER:
      self.emit(self.barrier)
      return []
    if op is Ops.LOAD: return self.load(u)
    if op is Ops.STORE:
      self.store(u)
      return []
    if op is Ops.VECTORIZE: return [self.ref(s) for s in u.src]
    if op is Ops.GEP: return [self.ref(u.src[0], u.arg)]
    if op is Ops.WMMA: raise TypeError(f"the {self.language} renderer has no tensor cores")
    return [self.lane(u, i) for i in range(dt.count)]

  def load(self, u: UOp) -> list[str]:
    dt = u.dtype
    if len(u.src) == 1: return [self.assign(dt.scalar, self.ref(u.src[0], i)) for i in range(dt.count)]  # an accumulator's value now
    buf, idx = u.src
    return [self.assign(dt.scalar, self.from_memory(buf, f"{self.ref(idx)} + {i}" if i else self.ref(idx), dt.scalar)) for i in range(dt.count)]
  def store(self, u: UOp) -> None:
    if len(u.src) == 2:  # an accumulator's new value
      for i in range(u.src[1].dtype.count): self.emit(f"{self.ref(u.src[0], i)} = {self.ref(u.src[1], i)};")
      return
    buf, idx, val = u.src[:3]
    gate = u.src[3] if len(u.src) == 4 else None
    for i in range(val.dtype.count):
      text = self.to_memory(buf, f"{self.ref(idx)} + {i}" if i else self.ref(idx), self.ref(val, i), val.dtype.scalar)
      self.emit(f"if ({self.ref(gate, i)}) {{ {text} }}" if gate is not None else text)

  # ---- what each language supplies ----
  def declaration(self, name: str, dt: DType) -> str: raise NotImplementedError
  def literal(self, value, dt: DType) -> str: raise NotImplementedError
  def from_memory(self, buf: UOp, idx: str, dt: DType) -> str: raise NotImplementedError
  def to_memory(self, buf: UOp, idx: str, value: str, dt: DType) -> str: raise NotImplementedError
  def lane(self, u: UOp, i: int) -> str: raise NotImplementedError
