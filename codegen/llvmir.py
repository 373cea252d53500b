"""Renders a linear program as LLVM IR text: one function taking buffer pointers, then int32 Variables. Vector
UOps (from upcast lanes) become LLVM vector types; bfloat16 lives in float registers, rounded after each op."""
from __future__ import annotations
import math, struct
from ir.dtype import DType, PtrDType, dtypes, fits
from ir.ops import Ops
from ir.uop import UOp
from codegen.exp2_log2 import EXP2_MAX, EXP2_MIN, EXP2_POLY, LOG2_E, LOG2_POLY, ROUNDING_SHIFTER, ROUNDING_SHIFTER_BITS
from codegen.renderer import Renderer
from codegen.sine import COS_POLY, HALF_PI, SIN_POLY, SIN_POLY_MAX, round_f32

SCALAR_TYPES = {dtypes.bool: "i1", dtypes.int8: "i8", dtypes.uint8: "i8", dtypes.int16: "i16", dtypes.uint16: "i16", dtypes.int32: "i32",
                dtypes.uint32: "i32", dtypes.int64: "i64", dtypes.uint64: "i64", dtypes.float16: "half", dtypes.float32: "float",
                dtypes.float64: "double", dtypes.bfloat16: "float", dtypes.fp8e4m3: "i8", dtypes.fp8e5m2: "i8"}
_SUFFIX = {"half": "f16", "float": "f32", "double": "f64", "i1": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64"}
FP8 = (dtypes.fp8e4m3, dtypes.fp8e5m2)

def ltype(dt: DType) -> str:
  """The register type of a dtype (vectors as <n x t>)."""
  if isinstance(dt, PtrDType): return "ptr"
  if (t := SCALAR_TYPES.get(dt.scalar)) is None: raise TypeError(f"the LLVM renderer can't compute with {dt}")
  return t if dt.count == 1 else f"<{dt.count} x {t}>"
def mem_type(dt: DType) -> str:
  """The in-memory type (bool is a byte, bfloat16 is 16 bits)."""
  t = {dtypes.bool: "i8", dtypes.bfloat16: "i16"}.get(dt.scalar) or ltype(dt.scalar)
  return t if dt.count == 1 else f"<{dt.count} x {t}>"
def _bits(dt: DType) -> int: return 1 if dt.scalar == dtypes.bool else 8 * dt.scalar.itemsize
def _suffix(t: str) -> str:
  if t.startswith("<"):
    n, scalar = t[1:-1].split(" x ")
    return f"v{n}{_SUFFIX[scalar]}"
  return _SUFFIX[t]
def _ptr_suffix(pt: str) -> str:
  """An intrinsic's name part for a pointer type: ptr -> p0, ptr addrspace(1) -> p1."""
  return f"p{pt.partition('addrspace(')[2].rstrip(')') or 0}"
def imm(t: str, value: str) -> str:
  """An immediate operand of type t (splatted for vector types)."""
  return f"splat ({t[1:-1].split(' x ')[1]} {value})" if t.startswith("<") else value
def with_scalar(t: str, scalar: str) -> str:
  """Type t with its element type replaced (keeping the vector width)."""
  return f"<{t[1:-1].split(' x ')[0]} x {scalar}>" if t.startswith("<") else scalar

def const_text(value, dt: DType) -> str:
  if dt == dtypes.bool: return "true" if value else "false"
  if dtypes.is_int(dt):
    bits = 8 * dt.itemsize
    return str(value - 2**bits if value >= 2**(bits - 1) else value)
  if dt == dtypes.float16: return f"0xH{struct.unpack('H', struct.pack('e', value))[0]:04X}"
  if dt in FP8: raise TypeError(f"the LLVM renderer has no {dt} constants; cast through float32")
  if math.isnan(value): return "0x7FF8000000000000"
  return f"0x{struct.unpack('Q', struct.pack('d', value))[0]:016X}"
def f32_text(x: float) -> str:
  """x rounded to float32, as an LLVM float constant."""
  return const_text(round_f32(x), dtypes.float32)

class LLVMRenderer(Renderer):
  device = "CPU"
  splits_across_cores = True
  masked_loads = True
  def __init__(self, features: str = "", cores: int = 1, core_cache_bytes: int = Renderer.core_cache_bytes):
    self.cores, self.core_cache_bytes = cores, core_cache_bytes
    flags = set(features.split(","))
    # floats per vector register: what upcast lanes should fill
    self.vector_width = 16 if "+avx512f" in flags else 8 if "+avx" in flags or "+avx2" in flags else 4
    self.vector_registers = 32 if "+avx512f" in flags else 16  # zmm0-31; ymm/xmm0-15

  def render(self, name: str, uops: list[UOp]) -> str:
    fn = _Function(name)
    return fn.render(uops) + argv_entry(name, fn.params)

def argv_entry(name: str, params: list[str]) -> str:
  """`void name_argv(ptr argv, i32 core_start, i32 core_end)`: calls kernel `name` with its arguments from the 64-bit
  slots of argv (a buffer's address, an integer, a float's bit pattern), so one caller reaches every kernel."""
  lines, args = [], []
  for i, param in enumerate(params):
    t, reg = param.split(" ")
    if reg in ("%core_start", "%core_end"):
      args.append(param)
      continue
    w, a = f"%w{i}", f"%a{i}"
    lines += [f"  %p{i} = getelementptr i64, ptr %argv, i64 {i}", f"  {w} = load i64, ptr %p{i}"]
    if t == "ptr": lines.append(f"  {a} = inttoptr i64 {w} to ptr")
    elif t == "double": lines.append(f"  {a} = bitcast i64 {w} to double")
    elif t in ("float", "half"):
      bits = {"float": "i32", "half": "i16"}[t]
      lines += [f"  {a}.bits = trunc i64 {w} to {bits}", f"  {a} = bitcast {bits} {a}.bits to {t}"]
    elif t == "i64": a = w
    else: lines.append(f"  {a} = trunc i64 {w} to {t}")
    args.append(f"{t} {a}")
  return "\n".join([f"define void @{name}_argv(ptr %argv, i32 %core_start, i32 %core_end) {{", "entry:", *lines,
                    f"  call void @{name}({', '.join(args)})", "  ret void", "}", ""])

def never_wraps(u: UOp) -> bool:
  """Whether integer arithmetic u stays in its dtype's range whatever its inputs, by tg's bounds of its operands (loop and
  launch indices, bounded Variables, constants): true of index math, which LLVM may then take as free of wrapping
  (nsw/nuw), sparing its loop passes most of their work (the first MNIST step compiles in 3.7 s of CPU instead of 10)."""
  return fits(u.vmin, u.dtype.scalar) and fits(u.vmax, u.dtype.scalar)

class _Function:
  def __init__(self, name: str):
    self.name, self.names, self.lines, self.entry, self.decls, self.params = name, {}, [], [], set(), []
    self.counter = 0
  def fresh(self, prefix: str = "v") -> str:
    self.counter += 1
    return f"%{prefix}{self.counter}"
  def ref(self, u: UOp) -> str:
    if u.op is Ops.CONST: return const_text(u.arg, u.dtype)
    return self.names[u]
  def emit(self, text: str) -> None: self.lines.append("  " + text)
  def op(self, text: str) -> str:
    """Emit `%new = text` and return %new."""
    out = self.fresh()
    self.emit(f"{out} = {text}")
    return out
  def intrinsic(self, base: str, arg_type: str, args: list[str], ret_type: str | None = None) -> str:
    rt = ret_type or arg_type
    fname = f"llvm.{base}.{_suffix(arg_type)}" if ret_type is None else f"llvm.{base}.{_suffix(rt)}.{_suffix(arg_type)}"
    self.decls.add(f"declare {rt} @{fname}({', '.join([arg_type] * len(args))})")
    return self.op(f"call {rt} @{fname}({', '.join(f'{arg_type} {a}' for a in args)})")

  def render(self, uops: list[UOp]) -> str:
    for u in uops: self.names[u] = self.render_one(u)
    body = "\n".join(["  " + e for e in self.entry] + self.lines + ["  ret void", "}"])
    return "\n".join(self.preamble() + sorted(self.decls) + [self.head(), body, self.attributes(), ""])
  def preamble(self) -> list[str]:
    """Module-level lines before the declarations (a target's globals)."""
    return []
  def head(self) -> str: return f"define void @{self.name}({', '.join(self.params)}) #0 {{\nentry:"
  def attributes(self) -> str: return 'attributes #0 = { nounwind "no-trapping-math"="true" }'
  def ptr_of(self, u: UOp) -> str:
    """The pointer type of a buffer, local array or accumulator slot (targets with address spaces override it)."""
    return "ptr"
  def alloca(self, t: str) -> str: return f"alloca {t}"

  def render_one(self, u: UOp) -> str | None:
    op, dt = u.op, u.dtype
    if op is Ops.CONST: return None
    if op is Ops.DEFINE_GLOBAL:
      self.params.append(f"ptr %data{u.arg}")
      return f"%data{u.arg}"
    if op is Ops.DEFINE_VAR:
      self.params.append(f"{ltype(dt)} %{u.arg[0]}")
      return f"%{u.arg[0]}"
    if op is Ops.RANGE: return self.open_loop(u)
    if op is Ops.ENDRANGE: return self.close_loop(u)
    if op is Ops.IF:
      n = self.fresh("if")[3:]
      self.emit(f"br i1 {self.ref(u.src[0])}, label %then{n}, label %endif{n}")
      self.lines.append(f"then{n}:")
      return n
    if op is Ops.ENDIF:
      n = self.names[u.src[0]]
      self.emit(f"br label %endif{n}")
      self.lines.append(f"endif{n}:")
      return None
    if op in (Ops.BARRIER, Ops.DEFINE_LOCAL): raise TypeError(f"the LLVM renderer has no workgroups ({op.name})")
    if op is Ops.DEFINE_ACC:
      slot = self.fresh("acc")
      self.entry.append(f"{slot} = {self.alloca(ltype(dt))}")
      self.emit(f"store {ltype(dt)} {self.ref(u.src[0])}, {self.ptr_of(u)} {slot}")
      return slot
    if op is Ops.LOAD: return self.load(u)
    if op is Ops.STORE: return self.store(u)
    if op is Ops.VECTORIZE:
      out, t = "poison", ltype(dt)
      if all(s is u.src[0] for s in u.src):  # a broadcast: one insert and a shuffle with an all-zero mask, not n inserts
        one = self.op(f"insertelement {t} poison, {ltype(u.src[0].dtype)} {self.ref(u.src[0])}, i32 0")
        return self.op(f"shufflevector {t} {one}, {t} poison, <{len(u.src)} x i32> zeroinitializer")
      if dt.scalar == dtypes.bool:  # lanes as bytes, then one compare: LLVM 22 built <cond, false> for AVX-512 as cond ? 0xff : 0
        wide = with_scalar(t, "i8")
        for i, s in enumerate(u.src): out = self.op(f"insertelement {wide} {out}, i8 {self.op(f'zext i1 {self.ref(s)} to i8')}, i32 {i}")
        return self.op(f"icmp ne {wide} {out}, zeroinitializer")
      for i, s in enumerate(u.src): out = self.op(f"insertelement {t} {out}, {ltype(s.dtype)} {self.ref(s)}, i32 {i}")
      return out
    if op is Ops.GEP: return self.op(f"extractelement {ltype(u.src[0].dtype)} {self.ref(u.src[0])}, i32 {u.arg}")
    if op is Ops.CAST:
      src = u.src[0].dtype
      if dt.scalar in FP8 or src.scalar in FP8: raise TypeError(f"the LLVM renderer can't cast {src} to {dt}; the frontend converts fp8 through float32")
      out = self.cast(self.ref(u.src[0]), _as_float(src), _as_float(dt))
      return self.round_bf16(out, ltype(dt)) if dt.scalar == dtypes.bfloat16 and src.scalar != dtypes.bfloat16 else out
    if op is Ops.BITCAST: return self.bitcast(self.ref(u.src[0]), u.src[0].dtype, dt)
    out = self.alu(u)
    return self.round_bf16(out, ltype(dt)) if dt.scalar == dtypes.bfloat16 else out

  # ---- memory ----
  def load(self, u: UOp) -> str:
    dt = u.dtype
    if len(u.src) == 1: return self.op(f"load {ltype(dt)}, {self.ptr_of(u.src[0])} {self.ref(u.src[0])}")
    if len(u.src) == 3:  # lanes with their own gates: a masked vector load (zero elsewhere; the lanes off may point out of bounds)
      mt, pt = mem_type(dt), self.ptr_of(u.src[0])
      fname = f"llvm.masked.load.{_suffix(mt)}.{_ptr_suffix(pt)}"
      self.decls.add(f"declare {mt} @{fname}({pt}, i32, {ltype(u.src[2].dtype)}, {mt})")
      raw = self.op(f"call {mt} @{fname}({pt} {self.gep(u.src[0], u.src[1], inbounds=False)}, i32 {dt.scalar.itemsize}, {ltype(u.src[2].dtype)} {self.ref(u.src[2])}, {mt} zeroinitializer)")
    else: raw = self.op(f"load {mem_type(dt)}, {self.ptr_of(u.src[0])} {self.gep(u.src[0], u.src[1])}, align {dt.scalar.itemsize}")
    if dt.scalar == dtypes.bool: return self.op(f"icmp ne {mem_type(dt)} {raw}, {imm(mem_type(dt), '0')}")
    return self.bf16_bits_to_float(raw, mem_type(dt)) if dt.scalar == dtypes.bfloat16 else raw
  def store(self, u: UOp) -> None:
    if len(u.src) == 2:
      self.emit(f"store {ltype(u.src[1].dtype)} {self.ref(u.src[1])}, {self.ptr_of(u.src[0])} {self.ref(u.src[0])}")
      return None
    val, vdt = self.ref(u.src[2]), u.src[2].dtype
    if vdt.scalar == dtypes.bool: val = self.op(f"zext {ltype(vdt)} {val} to {mem_type(vdt)}")
    if vdt.scalar == dtypes.bfloat16: val = self.float_to_bf16_bits(val, ltype(vdt))
    ptr, pt = self.gep(u.src[0], u.src[1]), self.ptr_of(u.src[0])
    if len(u.src) == 4 and u.src[3].dtype.count > 1:  # lanes with their own gates: a masked vector store
      mt = mem_type(vdt)
      fname = f"llvm.masked.store.{_suffix(mt)}.{_ptr_suffix(pt)}"
      self.decls.add(f"declare void @{fname}({mt}, {pt}, i32, {ltype(u.src[3].dtype)})")
      self.emit(f"call void @{fname}({mt} {val}, {pt} {ptr}, i32 {vdt.scalar.itemsize}, {ltype(u.src[3].dtype)} {self.ref(u.src[3])})")
      return None
    if len(u.src) == 4:  # one gate: branch around the store
      n = self.fresh("st")[3:]
      self.emit(f"br i1 {self.ref(u.src[3])}, label %store{n}, label %stored{n}")
      self.lines.append(f"store{n}:")
      self.emit(f"store {mem_type(vdt)} {val}, {pt} {ptr}, align {vdt.scalar.itemsize}")
      self.emit(f"br label %stored{n}")
      self.lines.append(f"stored{n}:")
      return None
    self.emit(f"store {mem_type(vdt)} {val}, {pt} {ptr}, align {vdt.scalar.itemsize}")
    return None
  def gep(self, buf: UOp, idx: UOp, inbounds: bool = True) -> str:
    out = self.fresh("p")
    self.emit(f"{out} = getelementptr {'inbounds ' if inbounds else ''}{mem_type(buf.dtype.base)}, {self.ptr_of(buf)} {self.ref(buf)}, {ltype(idx.dtype)} {self.ref(idx)}")
    return out

  # ---- loops ----
  def open_loop(self, r: UOp) -> str:
    n, t = self.fresh("r")[2:], ltype(r.dtype)
    start, end = self.ref(r.src[0]), self.ref(r.src[1])
    self.emit(f"br label %loop_entry{n}")
    self.lines.append(f"loop_entry{n}:")
    self.emit(f"%loop_go{n} = icmp slt {t} {start}, {end}")
    self.emit(f"br i1 %loop_go{n}, label %loop_body{n}, label %loop_exit{n}")
    self.lines.append(f"loop_body{n}:")
    self.emit(f"%ridx{n} = phi {t} [{start}, %loop_entry{n}], [%ridx_next{n}, %loop_latch{n}]")
    return f"%ridx{n}"
  def close_loop(self, end: UOp) -> None:
    r = end.src[0]
    n, t = self.names[r][len("%ridx"):], ltype(r.dtype)
    self.emit(f"br label %loop_latch{n}")
    self.lines.append(f"loop_latch{n}:")
    self.emit(f"%ridx_next{n} = add {t} %ridx{n}, 1")
    self.emit(f"%loop_again{n} = icmp slt {t} %ridx_next{n}, {self.ref(r.src[1])}")
    self.emit(f"br i1 %loop_again{n}, label %loop_body{n}, label %loop_exit{n}")
    self.lines.append(f"loop_exit{n}:")
    return None

  # ---- bfloat16 (bits <-> float registers) ----
  def bf16_bits_to_float(self, bits: str, t16: str) -> str:
    wide = self.op(f"zext {t16} {bits} to {with_scalar(t16, 'i32')}")
    shifted = self.op(f"shl {with_scalar(t16, 'i32')} {wide}, {imm(with_scalar(t16, 'i32'), '16')}")
    return self.op(f"bitcast {with_scalar(t16, 'i32')} {shifted} to {with_scalar(t16, 'float')}")
  def float_to_bf16_bits(self, value: str, tf: str) -> str:
    """The upper half of a float that is already a bfloat16 value."""
    ti = with_scalar(tf, "i32")
    bits = self.op(f"bitcast {tf} {value} to {ti}")
    top = self.op(f"lshr {ti} {bits}, {imm(ti, '16')}")
    return self.op(f"trunc {ti} {top} to {with_scalar(tf, 'i16')}")
  def round_bf16(self, value: str, tf: str) -> str:
    """Round a float to the nearest bfloat16 (ties to even), keeping it in a float register."""
    ti = with_scalar(tf, "i32")
    bits = self.op(f"bitcast {tf} {value} to {ti}")
    high = self.op(f"lshr {ti} {bits}, {imm(ti, '16')}")
    lsb = self.op(f"and {ti} {high}, {imm(ti, '1')}")
    biased = self.op(f"add {ti} {bits}, {imm(ti, '32767')}")
    rounded = self.op(f"add {ti} {biased}, {lsb}")
    masked = self.op(f"and {ti} {rounded}, {imm(ti, '-65536')}")
    return self.op(f"bitcast {ti} {masked} to {tf}")
  def bitcast(self, x: str, src: DType, dst: DType) -> str:
    if src.scalar == dtypes.bfloat16: x, src = self.float_to_bf16_bits(x, ltype(src)), dtypes.uint16.vec(src.count)
    if dst.scalar == dtypes.bfloat16:
      bits = x if ltype(src).endswith("i16") or ltype(src).endswith("i16>") else self.bitcast(x, src, dtypes.uint16.vec(dst.count))
      return self.bf16_bits_to_float(bits, with_scalar(ltype(dst), "i16"))
    if ltype(src) == ltype(dst): return x
    return self.op(f"bitcast {ltype(src)} {x} to {ltype(dst)}")

  # ---- conversions and arithmetic ----
  def cast(self, x: str, src: DType, dst: DType) -> str:
    st, dt = ltype(src), ltype(dst)
    if st == dt: return x
    if dst.scalar == dtypes.bool:
      return self.op(f"fcmp une {st} {x}, {imm(st, '0.0')}" if dtypes.is_float(src) else f"icmp ne {st} {x}, {imm(st, '0')}")
    if dtypes.is_float(dst):
      if dtypes.is_float(src): instr = "fpext" if dst.scalar.itemsize > src.scalar.itemsize else "fptrunc"
      else: instr = "uitofp" if dtypes.is_unsigned(src) or src.scalar == dtypes.bool else "sitofp"
      return self.op(f"{instr} {st} {x} to {dt}")
    if dtypes.is_float(src):  # saturating: out-of-range and NaN inputs give defined results
      if src.scalar in (dtypes.float32, dtypes.float64): return self.saturating_to_int(x, src, dst)
      return self.intrinsic("fptoui.sat" if dtypes.is_unsigned(dst) else "fptosi.sat", st, [x], ret_type=dt)
    instr = "trunc" if _bits(dst) < _bits(src) else ("zext" if dtypes.is_unsigned(src) or src.scalar == dtypes.bool else "sext")
    return self.op(f"{instr} {st} {x} to {dt}")

  def saturating_to_int(self, x: str, src: DType, dst: DType) -> str:
    """LLVM's fptosi.sat / fptoui.sat results (below the range: its lowest value, above: its highest, NaN: 0) from
    compares and selects around the plain conversion, whose poison lanes the selects replace: the intrinsic lowered to
    4.3x a plain elementwise kernel's time on AVX-512 (4M float32 to int32: 3.71 ms against 0.86). The range's ends,
    powers of two, are exact in float32 and float64."""
    st, dt, bt = ltype(src), ltype(dst), with_scalar(ltype(src), "i1")
    lowest, highest = dtypes.min(dst.scalar), dtypes.max(dst.scalar)
    raw = self.op(f"{'fptoui' if dtypes.is_unsigned(dst) else 'fptosi'} {st} {x} to {dt}")
    below = self.op(f"fcmp olt {st} {x}, {imm(st, const_text(float(lowest), src.scalar))}")
    above = self.op(f"fcmp oge {st} {x}, {imm(st, const_text(float(highest + 1), src.scalar))}")
    out = self.op(f"select {bt} {below}, {dt} {imm(dt, str(lowest))}, {dt} {raw}")
    out = self.op(f"select {bt} {above}, {dt} {imm(dt, str(highest))}, {dt} {out}")
    return self.op(f"select {bt} {self.op(f'fcmp uno {st} {x}, {x}')}, {dt} {imm(dt, '0')}, {dt} {out}")

  def alu(self, u: UOp) -> str:
    op, src_dt = u.op, _as_float(u.src[0].dtype)
    if src_dt.scalar in FP8: raise TypeError(f"the LLVM renderer has no {src_dt} arithmetic; compute in float32")
    t, a = ltype(src_dt), [self.ref(s) for s in u.src]
    is_float, unsigned = dtypes.is_float(src_dt), dtypes.is_unsigned(src_dt) or src_dt.scalar == dtypes.bool
    if op is Ops.EXP2: return self.exp2(a[0], src_dt)
    if op is Ops.LOG2: return self.log2(a[0], src_dt)
    if op is Ops.SIN: return self.sin(a[0], src_dt)
    if op is Ops.SQRT: return self.intrinsic("sqrt", t, a)
    if op is Ops.TRUNC: return self.intrinsic("trunc", t, a) if is_float else a[0]
    if op is Ops.MULACC and is_float: return self.intrinsic("fmuladd", t, a)
    if op is Ops.MAX:
      if is_float: return self.fmax(a[0], a[1], t)
      cmp = self.op(f"icmp {'ugt' if unsigned else 'sgt'} {t} {a[0]}, {a[1]}")
      return self.op(f"select {with_scalar(t, 'i1')} {cmp}, {t} {a[0]}, {t} {a[1]}")
    if op in (Ops.IDIV, Ops.MOD) and not is_float: a[1] = self.safe_divisor(u, t, a, unsigned)
    if op is Ops.NEG:
      if is_float: return self.op(f"fneg {t} {a[0]}")
      return self.op(f"xor {t} {a[0]}, {imm(t, 'true')}" if src_dt.scalar == dtypes.bool else f"sub {t} {imm(t, '0')}, {a[0]}")
    if op is Ops.RECIP: return self.op(f"fdiv {t} {imm(t, const_text(1.0, src_dt.scalar))}, {a[0]}")
    if op is Ops.WHERE:
      vt = ltype(_as_float(u.dtype))
      return self.op(f"select {ltype(u.src[0].dtype)} {a[0]}, {vt} {a[1]}, {vt} {a[2]}")
    if op is Ops.MULACC:
      product = self.op(f"mul {t} {a[0]}, {a[1]}")
      return self.op(f"add {t} {product}, {a[2]}")
    if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ):
      pred = {Ops.CMPLT: "olt" if is_float else ("ult" if unsigned else "slt"), Ops.CMPNE: "une" if is_float else "ne", Ops.CMPEQ: "oeq" if is_float else "eq"}[op]
      return self.op(f"{'fcmp' if is_float else 'icmp'} {pred} {t} {a[0]}, {a[1]}")
    if op in (Ops.SHL, Ops.SHR):
      amt = self.op(f"and {t} {a[1]}, {imm(t, str(_bits(src_dt) - 1))}")
      return self.op(f"{'shl' if op is Ops.SHL else ('lshr' if unsigned else 'ashr')} {t} {a[0]}, {amt}")
    instr = {Ops.ADD: ("fadd contract", "add"), Ops.SUB: ("fsub contract", "sub"), Ops.MUL: ("fmul contract", "mul"), Ops.FDIV: ("fdiv", None),
             Ops.IDIV: (None, "udiv" if unsigned else "sdiv"), Ops.MOD: ("frem", "urem" if unsigned else "srem"),
             Ops.AND: (None, "and"), Ops.OR: (None, "or"), Ops.XOR: (None, "xor")}[op][0 if is_float else 1]
    if instr is None: raise TypeError(f"{op} is not defined on {src_dt}")
    if op in (Ops.ADD, Ops.SUB, Ops.MUL) and not is_float and src_dt.scalar != dtypes.bool and never_wraps(u): instr += " nuw" if unsigned else " nsw"
    return self.op(f"{instr} {t} {a[0]}, {a[1]}")

  def safe_divisor(self, u: UOp, t: str, a: list[str], unsigned: bool) -> str:
    """Integer division by zero (and INT_MIN / -1) traps on x86; such divisions give garbage instead, like on a GPU."""
    d = u.src[1]
    if d.op is Ops.CONST and d.arg not in (0, -1): return a[1]
    bt = with_scalar(t, "i1")
    zero = self.op(f"icmp eq {t} {a[1]}, {imm(t, '0')}")
    safe = self.op(f"select {bt} {zero}, {t} {imm(t, '1')}, {t} {a[1]}")
    if unsigned: return safe
    minus1 = self.op(f"icmp eq {t} {safe}, {imm(t, '-1')}")
    is_min = self.op(f"icmp eq {t} {a[0]}, {imm(t, const_text(dtypes.min(u.src[0].dtype.scalar), u.src[0].dtype.scalar))}")
    both = self.op(f"and {bt} {minus1}, {is_min}")
    return self.op(f"select {bt} {both}, {t} {imm(t, '1')}, {t} {safe}")

  def fmax(self, a: str, b: str, t: str) -> str:
    """The greater of a and b, NaN where either is (PyTorch's order of equal zeros, not IEEE's: max(+0, -0) may be
    -0): a NaN test, a compare and two selects, which x86 does in 3 instructions where llvm.maximum takes 6 (half a
    row max's time)."""
    greater = self.select(self.op(f"fcmp ogt {t} {a}, {b}"), t, a, b)  # b where either is NaN
    return self.select(self.op(f"fcmp uno {t} {a}, {a}"), t, a, greater)

  # ---- exp2, log2 and sin from multiply-adds (codegen/exp2_log2.py, codegen/sine.py): LLVM makes its intrinsics libm calls lane by lane on CPUs ----
  FUSED = "fmuladd"  # fused where the target has the instruction: a CPU without FMA gets a multiply and an add, not libm's fmaf
  def select(self, cond: str, t: str, a: str, b: str) -> str: return self.op(f"select {with_scalar(t, 'i1')} {cond}, {t} {a}, {t} {b}")
  def horner(self, z: str, t: str, coefficients) -> str:
    """c0 + z * (c1 + z * (c2 + ...)), by multiply-adds from the highest term (coefficients exact in t)."""
    acc = imm(t, const_text(coefficients[-1], dtypes.float64))
    for c in reversed(coefficients[:-1]): acc = self.intrinsic(self.FUSED, t, [acc, z, imm(t, const_text(c, dtypes.float64))])
    return acc
  def in_float32(self, x: str, dt: DType, fn) -> str:
    """fn(x, float type) computed in float32 for a half, float or double x, and converted back."""
    t, tf = ltype(dt), with_scalar(ltype(dt), "float")
    if dt.scalar == dtypes.float32: return fn(x, tf)
    out = fn(self.op(f"{'fpext' if dt.scalar.itemsize < 4 else 'fptrunc'} {t} {x} to {tf}"), tf)
    return self.op(f"{'fptrunc' if dt.scalar.itemsize < 4 else 'fpext'} {tf} {out} to {t}")

  def exp2(self, x: str, dt: DType) -> str:
    """float64 by LLVM's (libm's exp2); half, float and bfloat16 by exp2_f32."""
    return self.intrinsic("exp2", ltype(dt), [x]) if dt.scalar == dtypes.float64 else self.in_float32(x, dt, self.exp2_f32)
  def log2(self, x: str, dt: DType) -> str:
    return self.intrinsic("log2", ltype(dt), [x]) if dt.scalar == dtypes.float64 else self.in_float32(x, dt, self.log2_f32)

  def exp2_f32(self, x: str, t: str) -> str:
    """2**n * 2**f, n = round(x): 2**f by its polynomial, 2**n as two powers of two built from their bits (each a normal
    float for x clamped to [EXP2_MIN, EXP2_MAX], so that the second product rounds a denormal result once)."""
    ti, lo, hi, shifter = with_scalar(t, "i32"), imm(t, f32_text(EXP2_MIN)), imm(t, f32_text(EXP2_MAX)), imm(t, f32_text(ROUNDING_SHIFTER))
    xc = self.select(self.op(f"fcmp ugt {t} {x}, {hi}"), t, hi, x)  # NaN too: put back at the end
    xc = self.select(self.op(f"fcmp olt {t} {xc}, {lo}"), t, lo, xc)
    shifted = self.op(f"fadd {t} {xc}, {shifter}")
    f = self.op(f"fsub {t} {xc}, {self.op(f'fsub {t} {shifted}, {shifter}')}")
    out = self.intrinsic(self.FUSED, t, [f, self.horner(f, t, EXP2_POLY), imm(t, f32_text(1.0))])
    n = self.op(f"sub {ti} {self.op(f'bitcast {t} {shifted} to {ti}')}, {imm(ti, str(ROUNDING_SHIFTER_BITS))}")
    half = self.op(f"ashr {ti} {n}, {imm(ti, '1')}")
    for k in (half, self.op(f"sub {ti} {n}, {half}")):
      biased = self.op(f"add {ti} {k}, {imm(ti, '127')}")
      scale = self.op(f"bitcast {ti} {self.op(f'shl {ti} {biased}, {imm(ti, str(23))}')} to {t}")
      out = self.op(f"fmul {t} {out}, {scale}")
    return self.select(self.op(f"fcmp uno {t} {x}, {x}"), t, x, out)

  def log2_f32(self, x: str, t: str) -> str:
    """e + log2 m, x = m * 2**e with m in [sqrt(1/2), sqrt(2)), read from x's bits (a denormal x scaled by 2**23 first):
    log2 m = f log2(e) + f**2 T(f) with f = m - 1, log2(e) in two parts; zero, negatives, inf and NaN as C's log2."""
    ti, tb = with_scalar(t, "i32"), with_scalar(t, "i1")
    tiny = self.op(f"fcmp olt {t} {x}, {imm(t, f32_text(2.0 ** -126))}")
    normal = self.select(tiny, t, self.op(f"fmul {t} {x}, {imm(t, f32_text(2.0 ** 23))}"), x)
    bits = self.op(f"bitcast {t} {normal} to {ti}")
    mantissa = self.op(f"or {ti} {self.op(f'and {ti} {bits}, {imm(ti, str(0x007FFFFF))}')}, {imm(ti, str(0x3F800000))}")
    m = self.op(f"bitcast {ti} {mantissa} to {t}")  # in [1, 2)
    big = self.op(f"fcmp ogt {t} {m}, {imm(t, f32_text(math.sqrt(2)))}")
    m = self.select(big, t, self.op(f"fmul {t} {m}, {imm(t, f32_text(0.5))}"), m)
    bias = self.select(tiny, ti, imm(ti, "150"), imm(ti, "127"))
    e = self.op(f"sub {ti} {self.op(f'lshr {ti} {bits}, {imm(ti, str(23))}')}, {bias}")
    e = self.op(f"add {ti} {e}, {self.op(f'zext {tb} {big} to {ti}')}")
    f = self.op(f"fsub {t} {m}, {imm(t, f32_text(1.0))}")
    tail = self.op(f"fmul {t} {self.op(f'fmul {t} {f}, {f}')}, {self.horner(f, t, LOG2_POLY)}")
    low = self.intrinsic(self.FUSED, t, [f, imm(t, f32_text(LOG2_E[1])), tail])
    log_m = self.intrinsic(self.FUSED, t, [f, imm(t, f32_text(LOG2_E[0])), low])
    return self.log2_special_cases(x, t, self.op(f"fadd {t} {log_m}, {self.op(f'sitofp {ti} {e} to {t}')}"))

  def sin(self, x: str, dt: DType) -> str:
    """float64 by LLVM's (libm's sin); half, float and bfloat16 by sin_f32 where every lane's argument is within
    SIN_POLY_MAX, else by libm lane by lane (which reduces huge arguments exactly)."""
    return self.intrinsic("sin", ltype(dt), [x]) if dt.scalar == dtypes.float64 else self.in_float32(x, dt, self.sin_f32_or_libm)

  def sin_f32_or_libm(self, x: str, t: str) -> str:
    """sin_f32, and where some lane's |x| is over SIN_POLY_MAX (or NaN), a branch to libm's sinf for those lanes."""
    n = self.fresh("sin")[4:]
    self.emit(f"br label %sin_poly{n}")
    self.lines.append(f"sin_poly{n}:")
    poly = self.sin_f32(x, t)
    far = self.op(f"fcmp ugt {t} {self.intrinsic('fabs', t, [x])}, {imm(t, f32_text(SIN_POLY_MAX))}")
    tb = with_scalar(t, "i1")
    any_far = self.intrinsic("vector.reduce.or", tb, [far], ret_type="i1") if tb != "i1" else far
    self.emit(f"br i1 {any_far}, label %sin_libm{n}, label %sin_done{n}")
    self.lines.append(f"sin_libm{n}:")
    mixed = self.select(far, t, self.intrinsic("sin", t, [x]), poly)
    self.emit(f"br label %sin_done{n}")
    self.lines.append(f"sin_done{n}:")
    return self.op(f"phi {t} [{poly}, %sin_poly{n}], [{mixed}, %sin_libm{n}]")

  def sin_f32(self, xf: str, tf: str) -> str:
    """sin within 2 ulp (codegen/sine.py) for |x| up to SIN_POLY_MAX: x = n pi/2 + r, then +-sin r or +-cos r by n mod 4;
    -0 keeps its sign."""
    ti = with_scalar(tf, "i32")
    n = self.intrinsic("rint", tf, [self.op(f"fmul {tf} {xf}, {imm(tf, f32_text(2 / math.pi))}")])
    neg_n, r = self.op(f"fneg {tf} {n}"), xf
    for part in HALF_PI: r = self.intrinsic(self.FUSED, tf, [neg_n, imm(tf, f32_text(part)), r])
    z = self.op(f"fmul {tf} {r}, {r}")
    sin_r = self.intrinsic(self.FUSED, tf, [self.op(f"fmul {tf} {r}, {z}"), self.horner(z, tf, list(SIN_POLY)), r])
    one_minus_half_z = self.intrinsic(self.FUSED, tf, [z, imm(tf, f32_text(-0.5)), imm(tf, f32_text(1.0))])
    cos_r = self.intrinsic(self.FUSED, tf, [self.op(f"fmul {tf} {z}, {z}"), self.horner(z, tf, list(COS_POLY)), one_minus_half_z])
    return self.by_quadrant(xf, n, sin_r, cos_r, tf, ti)

  def quadrant_bits(self, k: str, t: str, ti: str) -> str:
    """An integer whose low two bits are those of k, a float32 integer: the bits of k plus the rounding shifter, exact
    for |k| < 2**22 (sin_f32_or_libm gives larger lanes to libm), with no float-to-int conversion (fptosi.sat took 4/5
    of a 16M-element sin on AVX-512)."""
    return self.op(f"bitcast {t} {self.op(f'fadd {t} {k}, {imm(t, f32_text(ROUNDING_SHIFTER))}')} to {ti}")

  def by_quadrant(self, x: str, k: str, sin_r: str, cos_r: str, t: str, ti: str) -> str:
    """sin x from sin r and cos r, x = k pi/2 + r: cos r for odd k, negated for k mod 4 in {2, 3}; sin(-0.) is -0."""
    q = self.op(f"and {ti} {self.quadrant_bits(k, t, ti)}, {imm(ti, '3')}")
    odd = self.op(f"trunc {ti} {q} to {with_scalar(t, 'i1')}")
    out = self.select(odd, t, cos_r, sin_r)
    upper = self.op(f"icmp uge {ti} {q}, {imm(ti, '2')}")
    out = self.select(upper, t, self.op(f"fneg {t} {out}"), out)
    return self.select(self.op(f"fcmp oeq {t} {x}, {imm(t, '0.0')}"), t, x, out)

  def log2_special_cases(self, x: str, t: str, out: str) -> str:
    """`out` (log2 x for positive finite x), with C's log2 of inf, negatives, NaN and zeros."""
    out = self.select(self.op(f"fcmp oeq {t} {x}, {imm(t, '0x7FF0000000000000')}"), t, x, out)
    out = self.select(self.op(f"fcmp ult {t} {x}, {imm(t, '0.0')}"), t, imm(t, "0x7FF8000000000000"), out)
    return self.select(self.op(f"fcmp oeq {t} {x}, {imm(t, '0.0')}"), t, imm(t, "0xFFF0000000000000"), out)

def _as_float(dt: DType) -> DType:
  """bfloat16 values are computed as float32."""
  return dtypes.float32.vec(dt.count) if dt.scalar == dtypes.bfloat16 else dt
