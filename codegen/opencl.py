"""Renders a linear program as OpenCL C: one `__kernel` taking `__global` buffer pointers, then Variables. Launch
indices are get_group_id (workgroup) and get_local_id (thread); local memory is a `__local` array. Every UOp becomes
one private variable per vector lane, declared at the top of the kernel (so a value made inside a loop or a branch is
still in scope after it). bool is a byte in memory, bfloat16 16 bits in memory and a float in registers (rounded
after each op), fp8 a byte the frontend converts through float32. half is computed natively where the device has
cl_khr_fp16; elsewhere it is a storage type (vload_half/vstore_half) held in floats and rounded after each op, which
gives the same results for the basic arithmetic (a float holds the exact result well enough to round it once).

An image buffer (IMAGE=1: a PtrDType with `image`) is a `read_only` or `write_only image2d_t` of RGBA pixels: a read
takes the pixel holding its element (one read_imagef per pixel for a 4-lane load at a multiple of 4), a write stores
whole pixels (the kernel pins its vector lanes to the 4 channels, codegen/kernel.py).

Semantics match the other renderers where C leaves them open: integer division and remainder by zero (and INT_MIN /
-1) don't trap, shifts take the amount modulo the width, float -> int conversions saturate with NaN -> 0, and max
propagates NaN."""
from __future__ import annotations
import math, re
from ir.dtype import DType, dtypes
from ir.ops import Ops
from ir.uop import UOp
from ir.symbolic import is_multiple_of
from codegen.renderer import Renderer, buffers_written
from codegen.lane_kernel import LaneKernel

# dtype -> (type in registers, type in memory)
TYPES: dict[DType, tuple[str, str]] = {
  dtypes.bool: ("bool", "uchar"), dtypes.int8: ("char", "char"), dtypes.uint8: ("uchar", "uchar"), dtypes.int16: ("short", "short"),
  dtypes.uint16: ("ushort", "ushort"), dtypes.int32: ("int", "int"), dtypes.uint32: ("uint", "uint"), dtypes.int64: ("long", "long"),
  dtypes.uint64: ("ulong", "ulong"), dtypes.float16: ("half", "half"), dtypes.float32: ("float", "float"), dtypes.float64: ("double", "double"),
  dtypes.bfloat16: ("float", "ushort"), dtypes.fp8e4m3: ("uchar", "uchar"), dtypes.fp8e5m2: ("uchar", "uchar")}
FP8 = (dtypes.fp8e4m3, dtypes.fp8e5m2)
# helper functions a kernel defines when it uses them
HELPERS = {
  "tg_bf16": "static inline float tg_bf16(float x) { uint b = as_uint(x); return isnan(x) ? x : as_float((b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u); }",
  "tg_f16": "static inline float tg_f16(float x) { ushort b; vstore_half_rte(x, 0, (half *)&b); return vload_half(0, (half *)&b); }",
  "tg_f16_bits": "static inline ushort tg_f16_bits(float x) { ushort b; vstore_half_rte(x, 0, (half *)&b); return b; }",
  "tg_bits_f16": "static inline float tg_bits_f16(ushort b) { return vload_half(0, (half *)&b); }",
  "tg_read_image": "__constant sampler_t tg_sampler = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;\n"
                   "static inline float tg_read_image(read_only image2d_t img, int i, int w) {\n"
                   "  float4 p = read_imagef(img, tg_sampler, (int2)((i >> 2) % w, (i >> 2) / w));\n"
                   "  int c = i & 3; return c == 0 ? p.x : c == 1 ? p.y : c == 2 ? p.z : p.w; }",
}

def ctype(dt: DType, fp16: bool = True) -> str:
  """The type a value of dt is held in (half without cl_khr_fp16: a float)."""
  if dt.scalar == dtypes.float16 and not fp16: return "float"
  if (t := TYPES.get(dt.scalar)) is None: raise TypeError(f"the OpenCL renderer has no {dt}")
  return t[0]
def mem_type(dt: DType) -> str: return TYPES[dt.scalar][1] if dt.scalar in TYPES else ctype(dt)

def literal(value, dt: DType, fp16: bool = True) -> str:
  """A constant of scalar type dt as an OpenCL C expression."""
  dt = dt.scalar
  if dt == dtypes.bool: return "true" if value else "false"
  if dtypes.is_int(dt) or dt in FP8:
    suffix = {8: "l", 4: ""}.get(dt.itemsize, "") + ("u" if dtypes.is_unsigned(dt) else "")
    if not dtypes.is_unsigned(dt) and value == dtypes.min(dt): return f"(({ctype(dt)})({value + 1}{suffix} - 1))"  # -2**63 has no literal
    return f"(({ctype(dt)}){value}{suffix})"
  if math.isnan(value): text = "NAN"
  elif math.isinf(value): text = "INFINITY" if value > 0 else "(-INFINITY)"
  else: text = f"({float(value).hex()}{'' if dt == dtypes.float64 else 'f'})"
  return text if ctype(dt, fp16) == "float" else f"(({ctype(dt)}){text})"

class OpenCLRenderer(Renderer):
  device = "CL"
  has_local = True
  launch_dims = 3
  vector_width = 4
  def __init__(self, fp16: bool = True, fp64: bool = True): self.fp16, self.fp64 = fp16, fp64
  def render(self, name: str, uops: list[UOp]) -> str: return _Kernel(name, self).render(uops)

class _Kernel(LaneKernel):
  language, barrier = "OpenCL", "barrier(CLK_LOCAL_MEM_FENCE);"
  def __init__(self, name: str, renderer: OpenCLRenderer):
    super().__init__(name, renderer)
    self.params: list[str] = []
    self.used: set[DType] = set()

  def declaration(self, name: str, dt: DType) -> str:
    self.used.add(dt.scalar)
    return f"  {self.ctype(dt)} {name};"
  def ctype(self, dt: DType) -> str: return ctype(dt, self.renderer.fp16)
  def literal(self, value, dt: DType) -> str: return literal(value, dt, self.renderer.fp16)
  def half_storage(self, dt: DType) -> bool: return dt.scalar == dtypes.float16 and not self.renderer.fp16
  def round_to(self, dt: DType, expr: str) -> str:
    """expr (a float) rounded to dt where dt is held in floats wider than it (bfloat16; half without cl_khr_fp16)."""
    helper = "tg_bf16" if dt.scalar == dtypes.bfloat16 else "tg_f16" if self.half_storage(dt) else None
    if helper is None: return expr
    self.helpers.add(helper)
    return f"{helper}({expr})"

  def render(self, uops: list[UOp]) -> str:
    self.written = buffers_written(uops)
    self.render_all(uops)
    if dtypes.float64 in self.used and not self.renderer.fp64: raise TypeError("this OpenCL device has no cl_khr_fp64: double kernels can't run on it")
    pragmas = [f"#pragma OPENCL EXTENSION cl_khr_fp{bits} : enable" for bits, dt in ((16, dtypes.float16), (64, dtypes.float64))
               if dt in self.used and (bits == 64 or self.renderer.fp16)]
    size = ", ".join(str(d) for d in self.local_dims)
    head = f"__kernel __attribute__((reqd_work_group_size({size}))) void {self.name}({', '.join(self.params)}) {{"
    return "\n".join(pragmas + [HELPERS[h] for h in sorted(self.helpers)] + [head] + self.locals + self.decls + self.lines + ["}", ""])

  def render_one(self, u: UOp) -> list[str]:
    op, dt = u.op, u.dtype
    if op is Ops.DEFINE_GLOBAL:
      self.used.add(dt.base.scalar)
      if dt.image: self.params.append(f"{'write_only' if u in self.written else 'read_only'} image2d_t data{u.arg}")
      else: self.params.append(f"__global {mem_type(dt.base)} *data{u.arg}")
      return [f"data{u.arg}"]
    if op is Ops.DEFINE_VAR:
      name = "var_" + re.sub(r"\W", "_", u.arg[0])
      self.params.append(f"{self.ctype(dt)} {name}")
      return [name]
    if op is Ops.SPECIAL:
      kind, dim = u.arg[0][0], int(u.arg[0][-1])
      if kind == "l": self.local_dims[dim] = u.arg[1]
      return [self.assign(dt, f"({self.ctype(dt)})get_{'group' if kind == 'g' else 'local'}_id({dim})", kind)]
    if op is Ops.DEFINE_LOCAL:
      name = f"local{len(self.locals)}"
      self.locals.append(f"  __local {mem_type(dt.base)} {name}[{max(dt.size, 1)}];")
      return [name]
    return super().render_one(u)

  # ---- memory ----
  def pixel(self, buf: UOp, at: str) -> str:
    """The (x, y) of the pixel holding element `at` (a multiple of 4) of image buf."""
    return f"(int2)((((int)({at})) >> 2) % {buf.dtype.image.width}, (((int)({at})) >> 2) / {buf.dtype.image.width})"
  def load(self, u: UOp) -> list[str]:
    if len(u.src) != 2 or not u.src[0].dtype.image: return super().load(u)
    buf, idx = u.src
    if u.dtype.count == 4 and is_multiple_of(idx, 4):  # a whole pixel: one read
      self.count += 1
      pixel = f"px{self.count}"
      self.decls.append(f"  float4 {pixel};")
      self.emit(f"{pixel} = read_imagef({self.ref(buf)}, tg_sampler, {self.pixel(buf, self.ref(idx))});")
      self.helpers.add("tg_read_image")  # declares the sampler
      return [self.assign(u.dtype.scalar, f"{pixel}.{c}") for c in "xyzw"]
    return super().load(u)
  def store(self, u: UOp) -> None:
    if len(u.src) < 3 or not u.src[0].dtype.image: return super().store(u)
    buf, idx, val = u.src[:3]
    gate = u.src[3] if len(u.src) > 3 else None
    if val.dtype.count % 4 or not is_multiple_of(idx, 4) or (gate is not None and gate.dtype.count != 1):
      raise TypeError(f"buffer {buf.arg} is an image: a kernel writes it whole pixels at a time (4 lanes at a multiple of 4, one gate for all), got {val.dtype}")
    for first in range(0, val.dtype.count, 4):
      at = self.ref(idx) if not first else f"{self.ref(idx)} + {first}"
      lanes = ", ".join(f"(float){self.ref(val, first + c)}" for c in range(4))
      text = f"write_imagef({self.ref(buf)}, {self.pixel(buf, at)}, (float4)({lanes}));"
      self.emit(f"if ({self.ref(gate)}) {{ {text} }}" if gate is not None else text)

  def from_memory(self, buf: UOp, idx: str, dt: DType) -> str:
    if buf.dtype.image:
      self.helpers.add("tg_read_image")
      return f"tg_read_image({self.ref(buf)}, (int)({idx}), {buf.dtype.image.width})"
    buf = self.ref(buf)
    if dt == dtypes.bool: return f"({buf}[{idx}] != 0)"
    if dt == dtypes.bfloat16: return f"as_float(((uint){buf}[{idx}]) << 16)"
    if self.half_storage(dt): return f"vload_half({idx}, {buf})"
    return f"{buf}[{idx}]"
  def to_memory(self, buf: UOp, idx: str, value: str, dt: DType) -> str:
    """The statement storing value at buf[idx]."""
    buf = self.ref(buf)
    if self.half_storage(dt): return f"vstore_half_rte({value}, {idx}, {buf});"
    if dt == dtypes.bool: value = f"(uchar)({value})"
    if dt == dtypes.bfloat16: value = f"(ushort)(as_uint({value}) >> 16)"
    return f"{buf}[{idx}] = {value};"

  # ---- arithmetic ----
  def lane(self, u: UOp, i: int) -> str:
    a = [self.ref(s, i) for s in u.src]
    dt = u.dtype.scalar
    if u.op is Ops.CAST: return self.assign(dt, self.convert(a[0], u.src[0].dtype.scalar, dt))
    if u.op is Ops.BITCAST: return self.assign(dt, self.bitcast(a[0], u.src[0].dtype.scalar, dt))
    expr = self.alu(u.op, dt, u.src[0].dtype.scalar if u.op is not Ops.WHERE else dt, a)
    return self.assign(dt, expr if u.op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else self.round_to(dt, expr))

  def convert(self, x: str, src: DType, dst: DType) -> str:
    if src in FP8 or dst in FP8: raise TypeError(f"the OpenCL renderer can't cast {src} to {dst}; the frontend converts fp8 through float32")
    st, dt_ = self.ctype(src), self.ctype(dst)
    if dst == dtypes.bool: return f"({x} != {self.literal(0, src if src != dtypes.bool else dtypes.int32)})"
    if src == dtypes.bool: return f"(({dt_})({x} ? 1 : 0))"
    if dt_ == "float" and dst != dtypes.float32: return self.round_to(dst, f"convert_float({x})")
    if st == dt_: return x
    if dtypes.is_float(src) and not dtypes.is_float(dst):  # out of range saturates; NaN -> 0 as the spec says, which Intel's
      return f"(isnan({x}) ? ({dt_})0 : convert_{dt_}_sat_rtz({x}))"  # CPU runtime doesn't do for unsigned (NaN -> UINT_MAX)
    return f"convert_{dt_}({x})"

  def bitcast(self, x: str, src: DType, dst: DType) -> str:
    if src == dtypes.bfloat16: x, src = f"(ushort)(as_uint({x}) >> 16)", dtypes.uint16
    if self.half_storage(src):
      self.helpers.add("tg_f16_bits")
      x, src = f"tg_f16_bits({x})", dtypes.uint16
    if dst == dtypes.bfloat16: return f"as_float(((uint)as_ushort({x})) << 16)"
    if self.half_storage(dst):
      self.helpers.add("tg_bits_f16")
      return f"tg_bits_f16(as_ushort({x}))"
    return f"as_{self.ctype(dst)}({x})"

  def alu(self, op: Ops, dt: DType, src: DType, a: list[str]) -> str:
    t, is_float = self.ctype(dt), dtypes.is_float(src)
    if src == dtypes.bool:
      logic = {Ops.ADD: "||", Ops.OR: "||", Ops.MAX: "||", Ops.MUL: "&&", Ops.AND: "&&", Ops.XOR: "!=", Ops.CMPNE: "!=", Ops.CMPEQ: "=="}
      if op in logic: return f"({a[0]} {logic[op]} {a[1]})"
      if op is Ops.NEG: return f"(!{a[0]})"
      if op is Ops.CMPLT: return f"(!{a[0]} && {a[1]})"
      if op is Ops.WHERE: return f"({a[0]} ? {a[1]} : {a[2]})"
      raise TypeError(f"the OpenCL renderer has no {op} on bool")
    if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ): return f"({a[0]} {({Ops.CMPLT: '<', Ops.CMPNE: '!=', Ops.CMPEQ: '=='})[op]} {a[1]})"
    if op is Ops.WHERE: return f"({a[0]} ? {a[1]} : {a[2]})"
    if op is Ops.MAX: return f"((isnan({a[0]}) || isnan({a[1]})) ? {a[0]} + {a[1]} : fmax({a[0]}, {a[1]}))" if is_float else f"({a[0]} > {a[1]} ? {a[0]} : {a[1]})"
    if is_float:
      unary = {Ops.SQRT: "sqrt", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.TRUNC: "trunc"}
      if op in unary: return f"{unary[op]}({a[0]})"
      if op is Ops.RECIP: return f"({self.literal(1.0, dt)} / {a[0]})"
      if op is Ops.NEG: return f"(-{a[0]})"
      if op is Ops.MOD: return f"fmod({a[0]}, {a[1]})"
      if op is Ops.MULACC: return f"fma({a[0]}, {a[1]}, {a[2]})"
      if op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV): return f"({a[0]} {({Ops.ADD: '+', Ops.SUB: '-', Ops.MUL: '*', Ops.FDIV: '/'})[op]} {a[1]})"
      raise TypeError(f"the OpenCL renderer has no {op} on {src}")
    # integers: every result is cast back, since C computes narrow types in int
    if op is Ops.TRUNC: return a[0]
    if op is Ops.NEG: return f"(({t})(-{a[0]}))"
    if op is Ops.MULACC: return f"(({t})({a[0]} * {a[1]} + {a[2]}))"
    if op in (Ops.IDIV, Ops.MOD):
      trap = f"{a[1]} == 0" if dtypes.is_unsigned(src) else f"{a[1]} == 0 || ({a[0]} == {self.literal(dtypes.min(src), src)} && {a[1]} == -1)"
      return f"(({t})({a[0]} {'/' if op is Ops.IDIV else '%'} (({trap}) ? ({t})1 : {a[1]})))"  # no trap: garbage, like a GPU
    if op in (Ops.SHL, Ops.SHR): return f"(({t})({a[0]} {'<<' if op is Ops.SHL else '>>'} ({a[1]} & {8 * src.itemsize - 1})))"
    sym = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^"}.get(op)
    if sym is None: raise TypeError(f"the OpenCL renderer has no {op} on {src}")
    return f"(({t})({a[0]} {sym} {a[1]}))"
