"""Renders a linear program as WGSL: one `@compute` entry point whose buffers are `var<storage, read_write>` bindings
0..n-1 of group 0, and whose Variables are the members of one uniform struct at binding n. Launch indices are
workgroup_id (workgroup) and local_invocation_id (thread); local memory is a `var<workgroup>` array. Every UOp becomes
one function variable per vector lane, declared at the top of the entry point (so a value made inside a loop or a
branch is still in scope after it).

WGSL has no 64-bit integers or floats: int64, uint64 and float64 are refused (TypeError naming the dtype). 8- and
16-bit integers are held in i32/u32 (wrapped after each op), bool is `bool`, bfloat16 an f32 rounded after each op,
fp8 a u32 the frontend converts through float32. half is `f16` where the adapter has shader-f16 (`enable f16;`);
elsewhere it is computed in f32 and rounded after each op, its bits made by exact integer code (WGSL's
pack2x16float leaves rounding and overflow to the implementation).

Storage buffers hold 32-bit words, so 8- and 16-bit elements (bool, int8/16, uint8/16, fp8, bfloat16, half without
shader-f16) are packed four or two to a u32: a load extracts its bits from the word; a store must not clobber the
neighbours, which another invocation may be writing at the same time, so a buffer that gets such stores is an
`array<atomic<u32>>` and each store is atomicAnd (clear its bits) then atomicOr (set them). The two atomics touch only
the element's own bits, so any interleaving with the neighbours' stores leaves every element right. Workgroup memory
is never read by the host and is not packed: it holds the register type.

Semantics match the other renderers where WGSL leaves them open: integer division and remainder by zero (and INT_MIN /
-1) don't trap, shifts take the amount modulo the width, float -> int conversions saturate with NaN -> 0, and max
propagates NaN. NaN tests read the bits (WGSL has no isnan, and `x != x` may be folded away). A launch wider than
the adapter's workgroups per dimension is dispatched as a 2D grid of workgroups and renumbered in the kernel."""
from __future__ import annotations
import math, re, struct
from ir.dtype import DType, dtypes
from ir.ops import Ops
from ir.uop import UOp
from codegen.renderer import Renderer
from codegen.lane_kernel import LaneKernel

# dtype -> type in registers (half: with shader-f16)
TYPES: dict[DType, str] = {
  dtypes.bool: "bool", dtypes.int8: "i32", dtypes.uint8: "u32", dtypes.int16: "i32", dtypes.uint16: "u32", dtypes.int32: "i32",
  dtypes.uint32: "u32", dtypes.float16: "f16", dtypes.float32: "f32", dtypes.bfloat16: "f32", dtypes.fp8e4m3: "u32", dtypes.fp8e5m2: "u32"}
WIDE = (dtypes.int64, dtypes.uint64, dtypes.float64)
FP8 = (dtypes.fp8e4m3, dtypes.fp8e5m2)
# helper functions a kernel defines when it uses them
HELPERS = {
  "tg_isnan": "fn tg_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }",
  "tg_bf16": "fn tg_bf16(x: f32) -> f32 { let b = bitcast<u32>(x); return select(bitcast<f32>((b + 0x7fffu + ((b >> 16u) & 1u)) & 0xffff0000u), x, tg_isnan(x)); }",
  # f32 -> binary16 bits, rounded to nearest even: NaN stays a (quiet) NaN, 65520 and up is inf, tiny values become subnormals
  "tg_f16_bits": """fn tg_f16_bits(x: f32) -> u32 {
  let b = bitcast<u32>(x); let s = (b >> 16u) & 0x8000u; let a = b & 0x7fffffffu;
  if (a > 0x7f800000u) { return s | 0x7e00u | ((a >> 13u) & 0x3ffu); }
  if (a >= 0x477ff000u) { return s | 0x7c00u; }
  if (a < 0x38800000u) { return s | u32(round(bitcast<f32>(a) * 16777216.0)); }
  let r = a - 0x38000000u;
  return s | ((r + 0xfffu + ((r >> 13u) & 1u)) >> 13u);
}""",
  # binary16 bits -> f32, exactly (subnormals scaled by 2^-24, which f32 holds exactly)
  "tg_bits_f16": """fn tg_bits_f16(h: u32) -> f32 {
  let s = (h & 0x8000u) << 16u; let e = (h >> 10u) & 0x1fu; let m = h & 0x3ffu;
  if (e == 0u) { return bitcast<f32>(s | bitcast<u32>(f32(m) * 5.9604644775390625e-8)); }
  if (e == 31u) { return bitcast<f32>(s | 0x7f800000u | (m << 13u)); }
  return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}""",
  "tg_f16": "fn tg_f16(x: f32) -> f32 { return tg_bits_f16(tg_f16_bits(x)); }",
}
DEPENDS = {"tg_bf16": ("tg_isnan",), "tg_f16": ("tg_f16_bits", "tg_bits_f16")}

def check_dtype(dt: DType) -> None:
  if dt.scalar in WIDE: raise TypeError(f"WGSL has no {dt.scalar}: the WEBGPU device can't run kernels with 64-bit values")

def wtype(dt: DType, fp16: bool = True) -> str:
  """The type a value of dt is held in (half without shader-f16: f32)."""
  check_dtype(dt)
  if dt.scalar == dtypes.float16 and not fp16: return "f32"
  if (t := TYPES.get(dt.scalar)) is None: raise TypeError(f"the WGSL renderer has no {dt}")
  return t

def literal(value, dt: DType, fp16: bool = True) -> str:
  """A constant of scalar type dt as a WGSL expression."""
  dt = dt.scalar
  t = wtype(dt, fp16)
  if t == "bool": return "true" if value else "false"
  if t == "u32": return f"{int(value)}u"
  if t == "i32": return "i32(-2147483648)" if value == -2**31 else f"{int(value)}i"
  fmt = "<e" if t == "f16" else "<f"
  try: value = struct.unpack(fmt, struct.pack(fmt, value))[0] if math.isfinite(value) else value  # rounded: WGSL needs exact literals
  except OverflowError: value = math.copysign(math.inf, value)
  if not math.isfinite(value):  # WGSL has no literal for them (a constant expression may not overflow)
    bits = 0x7fc00000 if math.isnan(value) else 0x7f800000 | 0x80000000 * (value < 0)
    return f"f16(bitcast<f32>({bits:#x}u))" if t == "f16" else f"bitcast<f32>({bits:#x}u)"
  return f"({value!r}h)" if t == "f16" else f"({value.hex()}f)"  # naga reads no long hex f16 literals

class WGSLRenderer(Renderer):
  device = "WEBGPU"
  has_local = True
  launch_dims = 3
  vector_width = 4
  finite_math = True  # Mesa folds 0 * x, x - x and (1 + x) - 1 in WGSL it compiles, NaN and inf operands or not
  def __init__(self, fp16: bool = True, max_workgroups: int = 65535): self.fp16, self.max_workgroups = fp16, max_workgroups
  def render(self, name: str, uops: list[UOp]) -> str: return _Kernel(name, self).render(uops)

def flattened(global_size, max_workgroups: int) -> bool:
  """Whether a launch this wide goes out as a 2D grid of workgroups the kernel renumbers (the runtime agrees)."""
  return any(g > max_workgroups for g in global_size)

class _Kernel(LaneKernel):
  language, barrier = "WGSL", "workgroupBarrier();"
  def __init__(self, name: str, renderer: WGSLRenderer):
    super().__init__(name, renderer)
    self.bindings: list[str] = []
    self.members: list[str] = []
    self.prologue: list[str] = []
    self.global_dims = [1, 1, 1]
    self.atomic: set[UOp] = set()
    self.f16 = False

  def declaration(self, name: str, dt: DType) -> str: return f"  var {name}: {self.wtype(dt)};"
  def wtype(self, dt: DType) -> str:
    t = wtype(dt, self.renderer.fp16)
    self.f16 |= t == "f16"
    return t
  def literal(self, value, dt: DType) -> str:
    self.wtype(dt)  # notes an f16 constant
    return literal(value, dt, self.renderer.fp16)
  def helper(self, name: str) -> str:
    self.helpers.update((name, *DEPENDS.get(name, ())))
    return name
  def half_storage(self, dt: DType) -> bool: return dt.scalar == dtypes.float16 and not self.renderer.fp16
  def packed(self, dt: DType) -> bool: return dt.scalar.itemsize < 4 and not (dt.scalar == dtypes.float16 and self.renderer.fp16)
  def isnan(self, x: str, dt: DType) -> str: return f"{self.helper('tg_isnan')}({x if self.wtype(dt) == 'f32' else f'f32({x})'})"
  def round_to(self, dt: DType, expr: str) -> str:
    """expr wrapped to dt where dt is held in a wider register: narrow ints wrap, bfloat16 and storage half round."""
    dt = dt.scalar
    if dt == dtypes.bfloat16: return f"{self.helper('tg_bf16')}({expr})"
    if self.half_storage(dt): return f"{self.helper('tg_f16')}({expr})"
    if dt in (dtypes.int8, dtypes.int16): return f"extractBits({expr}, 0u, {8 * dt.itemsize}u)"  # sign-extends
    if dt in (dtypes.uint8, dtypes.uint16): return f"({expr} & {(1 << 8 * dt.itemsize) - 1:#x}u)"
    return expr
  def render(self, uops: list[UOp]) -> str:
    for u in uops:
      if u.op is Ops.SPECIAL and u.arg[0][0] == "g": self.global_dims[int(u.arg[0][-1])] = u.arg[1]
      if u.op is Ops.STORE and len(u.src) >= 3 and u.src[0].op is Ops.DEFINE_GLOBAL and self.packed(u.src[0].dtype.base): self.atomic.add(u.src[0])
    if flattened(self.global_dims, self.renderer.max_workgroups):
      self.prologue += ["  let wg = gid.x + gid.y * nwg.x;", f"  if (wg >= {self.global_dims[0] * self.global_dims[1] * self.global_dims[2]}u) {{ return; }}"]
    self.render_all(uops)
    if self.members: self.bindings.append(f"struct Vars {{ {', '.join(self.members)} }}\n@group(0) @binding({len(self.bindings)}) var<uniform> vars: Vars;")
    head = (f"@compute @workgroup_size({', '.join(str(d) for d in self.local_dims)})\nfn {self.name}(@builtin(workgroup_id) gid: vec3<u32>, "
            "@builtin(local_invocation_id) lid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {")
    return "\n".join((["enable f16;"] if self.f16 else []) + self.bindings + [HELPERS[h] for h in sorted(self.helpers)] + self.locals + [head] + self.decls + self.prologue +
                     self.lines + ["}", ""])

  def render_one(self, u: UOp) -> list[str]:
    op, dt = u.op, u.dtype
    if op is Ops.DEFINE_GLOBAL:
      elem = "atomic<u32>" if u in self.atomic else "u32" if self.packed(dt.base) else self.wtype(dt.base)
      self.bindings.append(f"@group(0) @binding({len(self.bindings)}) var<storage, read_write> data{u.arg}: array<{elem}>;")
      return [f"data{u.arg}"]
    if op is Ops.DEFINE_VAR:
      name = "var_" + re.sub(r"\W", "_", u.arg[0])
      if dt.itemsize != 4: raise TypeError(f"the WGSL renderer passes only 32-bit Variables, not {dt}")
      self.members.append(f"{name}: {self.wtype(dt)}")
      return [f"vars.{name}"]
    if op is Ops.SPECIAL:
      kind, dim = u.arg[0][0], int(u.arg[0][-1])
      if kind == "l":
        self.local_dims[dim] = u.arg[1]
        return [self.assign(dt, f"{self.wtype(dt)}(lid.{'xyz'[dim]})", kind)]
      if not flattened(self.global_dims, self.renderer.max_workgroups): return [self.assign(dt, f"{self.wtype(dt)}(gid.{'xyz'[dim]})", kind)]
      inner = math.prod(self.global_dims[:dim])
      return [self.assign(dt, f"{self.wtype(dt)}((wg / {inner}u) % {self.global_dims[dim]}u)", kind)]
    if op is Ops.DEFINE_LOCAL:
      name = f"local{len(self.locals)}"
      self.locals.append(f"var<workgroup> {name}: array<{self.wtype(dt.base)}, {max(dt.size, 1)}>;")
      return [name]
    return super().render_one(u)

  # ---- memory ----
  def word(self, idx: str, dt: DType) -> tuple[str, str]:
    """(the u32 word index, the bit offset in it) of element idx of a packed 8- or 16-bit array."""
    per = 4 // dt.itemsize
    return f"(u32({idx}) >> {per.bit_length() - 1}u)", f"((u32({idx}) & {per - 1}u) * {8 * dt.itemsize}u)"
  def from_memory(self, buf: UOp, idx: str, dt: DType) -> str:
    name = self.ref(buf)
    if buf.op is Ops.DEFINE_LOCAL or not self.packed(dt): return f"{name}[{idx}]"
    w, shift = self.word(idx, dt)
    word = f"atomicLoad(&{name}[{w}])" if buf in self.atomic else f"{name}[{w}]"
    return self.from_bits(f"extractBits({word}, {shift}, {8 * dt.itemsize}u)", dt)
  def to_memory(self, buf: UOp, idx: str, value: str, dt: DType) -> str:
    """The statement(s) storing value at element idx of buf."""
    name = self.ref(buf)
    if buf.op is Ops.DEFINE_LOCAL or not self.packed(dt): return f"{name}[{idx}] = {value};"
    w, shift = self.word(idx, dt)
    mask = f"{(1 << 8 * dt.itemsize) - 1:#x}u"
    return f"atomicAnd(&{name}[{w}], ~({mask} << {shift})); atomicOr(&{name}[{w}], ({self.to_bits(value, dt)} & {mask}) << {shift});"

  # ---- bits ----
  def to_bits(self, x: str, dt: DType) -> str:
    """x's bits as a u32 (zero above its width for sub-word types other than sign-extended ints, which the caller masks)."""
    t = self.wtype(dt)
    if t == "bool": return f"select(0u, 1u, {x})"
    if dt == dtypes.bfloat16: return f"(bitcast<u32>({x}) >> 16u)"
    if self.half_storage(dt): return f"{self.helper('tg_f16_bits')}({x})"
    if t == "f16": return f"bitcast<u32>(vec2<f16>({x}, 0.0h))"
    return x if t == "u32" else f"bitcast<u32>({x})"
  def from_bits(self, bits: str, dt: DType) -> str:
    """The value of dt whose bits are the low bits of the u32 `bits` (zero above its width)."""
    t = self.wtype(dt)
    if t == "bool": return f"({bits} != 0u)"
    if dt == dtypes.bfloat16: return f"bitcast<f32>({bits} << 16u)"
    if self.half_storage(dt): return f"{self.helper('tg_bits_f16')}({bits})"
    if t == "f16": return f"f16({self.helper('tg_bits_f16')}({bits}))"  # naga types bitcast<vec2<f16>>(u32) wrongly
    if dt in (dtypes.int8, dtypes.int16): return f"extractBits(bitcast<i32>({bits}), 0u, {8 * dt.itemsize}u)"
    return bits if t == "u32" else f"bitcast<{t}>({bits})"

  # ---- arithmetic ----
  def lane(self, u: UOp, i: int) -> str:
    a = [self.ref(s, i) for s in u.src]
    dt = u.dtype.scalar
    for s in u.src: self.wtype(s.dtype)  # refuses 64-bit operands
    if u.op is Ops.CAST: return self.assign(dt, self.convert(a[0], u.src[0].dtype.scalar, dt))
    if u.op is Ops.BITCAST:
      src = u.src[0].dtype.scalar
      bits = self.to_bits(a[0], src)
      if src.itemsize < 4 and src in (dtypes.int8, dtypes.int16): bits = f"({bits} & {(1 << 8 * src.itemsize) - 1:#x}u)"
      return self.assign(dt, self.from_bits(bits, dt))
    expr = self.alu(u.op, dt, u.src[0].dtype.scalar if u.op is not Ops.WHERE else dt, a)
    return self.assign(dt, expr if u.op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else self.round_to(dt, expr))

  def convert(self, x: str, src: DType, dst: DType) -> str:
    if src in FP8 or dst in FP8: raise TypeError(f"the WGSL renderer can't cast {src} to {dst}; the frontend converts fp8 through float32")
    st, dt_ = self.wtype(src), self.wtype(dst)
    if dst == dtypes.bool: return f"!({x} == {self.literal(0, src if src != dtypes.bool else dtypes.int32)})"  # NaN is true
    if src == dtypes.bool: return f"select({self.literal(0, dst)}, {self.literal(1, dst)}, {x})"
    if dtypes.is_float(dst):
      if dtypes.is_float(src) and st == dt_: return self.round_to(dst, x)  # f32 <-> bfloat16 / storage half: a rounding
      if dt_ == "f16" and st != "f32": x = f"f32({x})"  # ints and bfloat16 reach f16 through f32 (exact up to f16's range)
      return self.round_to(dst, f"{dt_}({x})")
    if dtypes.is_float(src):  # saturating, truncating toward zero, NaN -> 0
      f = x if st == "f32" else f"f32({x})"
      lo, hi = dtypes.min(dst), dtypes.max(dst)
      below = f"{f} < 1.0f" if lo == 0 else f"{f} <= {literal(float(lo - 1), dtypes.float32)}"
      sat = f"select(select({dt_}({f}), {self.literal(hi, dst)}, {f} >= {literal(float(hi + 1), dtypes.float32)}), {self.literal(lo, dst)}, {below})"
      return f"select({sat}, {self.literal(0, dst)}, {self.isnan(f, dtypes.float32)})"
    # int -> int: reinterpret between i32 and u32, then wrap to the narrower width
    return self.round_to(dst, x if st == dt_ else f"bitcast<{dt_}>({x})")

  def alu(self, op: Ops, dt: DType, src: DType, a: list[str]) -> str:
    t, is_float = self.wtype(dt), dtypes.is_float(src)
    if src == dtypes.bool:
      logic = {Ops.ADD: "||", Ops.OR: "||", Ops.MAX: "||", Ops.MUL: "&&", Ops.AND: "&&", Ops.XOR: "!=", Ops.CMPNE: "!=", Ops.CMPEQ: "=="}
      if op in logic: return f"({a[0]} {logic[op]} {a[1]})"
      if op is Ops.NEG: return f"(!{a[0]})"
      if op is Ops.CMPLT: return f"(!{a[0]} && {a[1]})"
      if op is Ops.WHERE: return f"select({a[2]}, {a[1]}, {a[0]})"
      raise TypeError(f"the WGSL renderer has no {op} on bool")
    if op is Ops.CMPNE and is_float: return f"!({a[0]} == {a[1]})"  # naga's != is ordered: false when either side is NaN
    if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ): return f"({a[0]} {({Ops.CMPLT: '<', Ops.CMPNE: '!=', Ops.CMPEQ: '=='})[op]} {a[1]})"
    if op is Ops.WHERE: return f"select({a[2]}, {a[1]}, {a[0]})"
    if op is Ops.MAX:
      if is_float:  # the NaN itself: the optimizer may fold an a + b that would carry it (NaN + -NaN is 0 to Mesa)
        return f"select(select(max({a[0]}, {a[1]}), {a[1]}, {self.isnan(a[1], src)}), {a[0]}, {self.isnan(a[0], src)})"
      return f"max({a[0]}, {a[1]})"
    if is_float:
      unary = {Ops.SQRT: "sqrt", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.TRUNC: "trunc"}
      if op in unary: return f"{unary[op]}({a[0]})"
      if op is Ops.RECIP: return f"({self.literal(1.0, dt)} / {a[0]})"
      if op is Ops.NEG: return f"(-{a[0]})"
      if op is Ops.MULACC: return f"fma({a[0]}, {a[1]}, {a[2]})"
      if op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.MOD):
        return f"({a[0]} {({Ops.ADD: '+', Ops.SUB: '-', Ops.MUL: '*', Ops.FDIV: '/', Ops.MOD: '%'})[op]} {a[1]})"
      raise TypeError(f"the WGSL renderer has no {op} on {src}")
    # integers in i32/u32 registers: the caller wraps narrow results
    if op is Ops.TRUNC: return a[0]
    if op is Ops.NEG: return f"({self.literal(0, dt)} - {a[0]})"  # u32 has no unary minus
    if op is Ops.MULACC: return f"({a[0]} * {a[1]} + {a[2]})"
    if op in (Ops.IDIV, Ops.MOD):
      trap = f"{a[1]} == {self.literal(0, src)}" if dtypes.is_unsigned(src) else \
             f"{a[1]} == {self.literal(0, src)} || ({a[0]} == {self.literal(dtypes.min(src), src)} && {a[1]} == {self.literal(-1, src)})"
      return f"({a[0]} {'/' if op is Ops.IDIV else '%'} select({a[1]}, {self.literal(1, src)}, {trap}))"  # no trap: garbage, like a GPU
    if op in (Ops.SHL, Ops.SHR): return f"({a[0]} {'<<' if op is Ops.SHL else '>>'} (u32({a[1]}) & {8 * src.itemsize - 1}u))"
    sym = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^"}.get(op)
    if sym is None: raise TypeError(f"the WGSL renderer has no {op} on {src}")
    return f"({a[0]} {sym} {a[1]})"
