"""Renders a linear program as LLVM IR text (one function taking buffer pointers, then integer Variables)."""
from __future__ import annotations
import math, struct
from ir.dtype import DType, PtrDType, dtypes
from ir.ops import Ops
from ir.uop import UOp
from codegen.renderer import Renderer

# register types; bfloat16 values live in float registers (rounded to bfloat16 after each op), fp8 only as raw bytes
LLVM_TYPES = {dtypes.bool: "i1", dtypes.int8: "i8", dtypes.uint8: "i8", dtypes.int16: "i16", dtypes.uint16: "i16", dtypes.int32: "i32",
              dtypes.uint32: "i32", dtypes.int64: "i64", dtypes.uint64: "i64", dtypes.float16: "half", dtypes.float32: "float",
              dtypes.float64: "double", dtypes.bfloat16: "float", dtypes.fp8e4m3: "i8", dtypes.fp8e5m2: "i8"}
_INTRINSIC_SUFFIX = {"half": "f16", "float": "f32", "double": "f64"}

def ltype(dt: DType) -> str:
  if isinstance(dt, PtrDType): return "ptr"
  if (t := LLVM_TYPES.get(dt)) is None: raise TypeError(f"the LLVM renderer can't compute with {dt}")
  return t
def mem_type(dt: DType) -> str: return {dtypes.bool: "i8", dtypes.bfloat16: "i16"}.get(dt) or ltype(dt)

def _bits(dt: DType) -> int: return 1 if dt == dtypes.bool else 8 * dt.itemsize

def const_text(value, dt: DType) -> str:
  if dt == dtypes.bool: return "true" if value else "false"
  if dtypes.is_int(dt):
    bits = 8 * dt.itemsize
    return str(value - 2**bits if value >= 2**(bits - 1) else value)
  if dt == dtypes.float16: return f"0xH{struct.unpack('H', struct.pack('e', value))[0]:04X}"
  if dt in (dtypes.fp8e4m3, dtypes.fp8e5m2): raise TypeError(f"the LLVM renderer has no {dt} constants; cast through float32")
  if math.isnan(value): return "0x7FF8000000000000"
  return f"0x{struct.unpack('Q', struct.pack('d', value))[0]:016X}"

class LLVMRenderer(Renderer):
  device = "CPU"
  splits_across_cores = True

  def render(self, name: str, uops: list[UOp]) -> str:
    return _Function(name).render(uops)

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
  def intrinsic(self, base: str, dt: DType, args: list[str], ret: DType | None = None) -> str:
    t = ltype(dt)
    rt = ltype(ret) if ret is not None else t
    suffix = _INTRINSIC_SUFFIX.get(t, t) if ret is None else f"{_INTRINSIC_SUFFIX.get(rt, rt)}.{_INTRINSIC_SUFFIX.get(t, t)}"
    fname = f"llvm.{base}.{suffix}"
    self.decls.add(f"declare {rt} @{fname}({', '.join([t] * len(args))})")
    out = self.fresh()
    self.emit(f"{out} = call {rt} @{fname}({', '.join(f'{t} {a}' for a in args)})")
    return out

  def render(self, uops: list[UOp]) -> str:
    for u in uops: self.names[u] = self.render_one(u)
    head = f"define void @{self.name}({', '.join(self.params)}) #0 {{\nentry:"
    body = "\n".join(["  " + e for e in self.entry] + self.lines + ["  ret void", "}"])
    return "\n".join(sorted(self.decls) + [head, body, 'attributes #0 = { nounwind "no-trapping-math"="true" }', ""])

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
    if op is Ops.DEFINE_ACC:
      slot = self.fresh("acc")
      self.entry.append(f"{slot} = alloca {ltype(dt)}")
      self.emit(f"store {ltype(dt)} {self.ref(u.src[0])}, ptr {slot}")
      return slot
    if op is Ops.LOAD:
      out = self.fresh()
      if len(u.src) == 1:
        self.emit(f"{out} = load {ltype(dt)}, ptr {self.ref(u.src[0])}")
        return out
      ptr = self.gep(u.src[0], u.src[1])
      self.emit(f"{out} = load {mem_type(dt)}, ptr {ptr}, align {dt.itemsize}")
      if dt == dtypes.bool:
        b = self.fresh()
        self.emit(f"{b} = icmp ne i8 {out}, 0")
        return b
      return self.bf16_bits_to_float(out) if dt == dtypes.bfloat16 else out
    if op is Ops.STORE:
      if len(u.src) == 2:
        self.emit(f"store {ltype(u.src[1].dtype)} {self.ref(u.src[1])}, ptr {self.ref(u.src[0])}")
        return None
      val, vdt = self.ref(u.src[2]), u.src[2].dtype
      if vdt == dtypes.bool:
        wide = self.fresh()
        self.emit(f"{wide} = zext i1 {val} to i8")
        val = wide
      if vdt == dtypes.bfloat16: val = self.float_to_bf16_bits(val)
      self.emit(f"store {mem_type(vdt)} {val}, ptr {self.gep(u.src[0], u.src[1])}, align {vdt.itemsize}")
      return None
    if op is Ops.CAST:
      if dtypes.is_float(dt) and dt.itemsize == 1 or dtypes.is_float(u.src[0].dtype) and u.src[0].dtype.itemsize == 1:
        raise TypeError(f"the LLVM renderer can't cast {u.src[0].dtype} to {dt} directly; the frontend converts fp8 through float32")
      as_float = lambda t: dtypes.float32 if t == dtypes.bfloat16 else t
      out = self.cast(self.ref(u.src[0]), as_float(u.src[0].dtype), as_float(dt))
      return self.round_bf16(out) if dt == dtypes.bfloat16 and u.src[0].dtype != dtypes.bfloat16 else out
    if op is Ops.BITCAST: return self.bitcast(self.ref(u.src[0]), u.src[0].dtype, dt)
    out = self.alu(u)
    return self.round_bf16(out) if dt == dtypes.bfloat16 else out

  def bf16_bits_to_float(self, bits: str) -> str:
    wide, shifted, out = self.fresh(), self.fresh(), self.fresh()
    self.emit(f"{wide} = zext i16 {bits} to i32")
    self.emit(f"{shifted} = shl i32 {wide}, 16")
    self.emit(f"{out} = bitcast i32 {shifted} to float")
    return out
  def float_to_bf16_bits(self, value: str) -> str:
    """The (already bfloat16-exact) float's upper half."""
    bits, top, out = self.fresh(), self.fresh(), self.fresh()
    self.emit(f"{bits} = bitcast float {value} to i32")
    self.emit(f"{top} = lshr i32 {bits}, 16")
    self.emit(f"{out} = trunc i32 {top} to i16")
    return out
  def round_bf16(self, value: str) -> str:
    """Round a float to the nearest bfloat16 (ties to even), keeping it in a float register."""
    bits, lsb, bias, added, cleared, out = (self.fresh() for _ in range(6))
    self.emit(f"{bits} = bitcast float {value} to i32")
    self.emit(f"{lsb} = lshr i32 {bits}, 16")
    self.emit(f"{bias} = and i32 {lsb}, 1")
    self.emit(f"{added} = add i32 {bits}, 32767")
    self.emit(f"{cleared} = add i32 {added}, {bias}")
    masked = self.fresh()
    self.emit(f"{masked} = and i32 {cleared}, -65536")
    self.emit(f"{out} = bitcast i32 {masked} to float")
    return out
  def bitcast(self, x: str, src: DType, dst: DType) -> str:
    if src == dtypes.bfloat16: x, src = self.float_to_bf16_bits(x), dtypes.uint16
    if dst == dtypes.bfloat16:
      return self.bf16_bits_to_float(x if ltype(src) == "i16" else self.bitcast(x, src, dtypes.uint16))
    if ltype(src) == ltype(dst): return x
    out = self.fresh()
    self.emit(f"{out} = bitcast {ltype(src)} {x} to {ltype(dst)}")
    return out

  def gep(self, buf: UOp, idx: UOp) -> str:
    out = self.fresh("p")
    self.emit(f"{out} = getelementptr inbounds {mem_type(buf.dtype.base)}, ptr {self.ref(buf)}, {ltype(idx.dtype)} {self.ref(idx)}")
    return out

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

  def cast(self, x: str, src: DType, dst: DType) -> str:
    if src == dst: return x
    out, st, dt = self.fresh(), ltype(src), ltype(dst)
    if dst == dtypes.bool:
      if dtypes.is_float(src): self.emit(f"{out} = fcmp une {st} {x}, 0.0")
      else: self.emit(f"{out} = icmp ne {st} {x}, 0")
      return out
    if dtypes.is_float(dst):
      if dtypes.is_float(src): instr = "fpext" if dst.itemsize > src.itemsize else "fptrunc"
      else: instr = "uitofp" if dtypes.is_unsigned(src) or src == dtypes.bool else "sitofp"
      self.emit(f"{out} = {instr} {st} {x} to {dt}")
      return out
    if dtypes.is_float(src):  # saturating: out-of-range and NaN inputs give defined results
      return self.intrinsic("fptoui.sat" if dtypes.is_unsigned(dst) else "fptosi.sat", src, [x], ret=dst)
    if st == dt: return x
    instr = "trunc" if _bits(dst) < _bits(src) else ("zext" if dtypes.is_unsigned(src) or src == dtypes.bool else "sext")
    self.emit(f"{out} = {instr} {st} {x} to {dt}")
    return out

  def alu(self, u: UOp) -> str:
    op, src_dt = u.op, (u.src[0].dtype if u.src[0].dtype != dtypes.bfloat16 else dtypes.float32)
    if src_dt in (dtypes.fp8e4m3, dtypes.fp8e5m2): raise TypeError(f"the LLVM renderer has no {src_dt} arithmetic; compute in float32")
    t, a = ltype(src_dt), [self.ref(s) for s in u.src]
    is_float, unsigned = dtypes.is_float(src_dt), dtypes.is_unsigned(src_dt) or src_dt == dtypes.bool
    if op is Ops.SQRT: return self.intrinsic("sqrt", src_dt, a)
    if op is Ops.EXP2: return self.intrinsic("exp2", src_dt, a)
    if op is Ops.LOG2: return self.intrinsic("log2", src_dt, a)
    if op is Ops.SIN: return self.intrinsic("sin", src_dt, a)
    if op is Ops.TRUNC: return self.intrinsic("trunc", src_dt, a) if is_float else a[0]
    if op is Ops.MULACC and is_float: return self.intrinsic("fmuladd", src_dt, a)
    if op is Ops.MAX:
      if is_float: return self.intrinsic("maximum", src_dt, a)
      cmp, out = self.fresh(), self.fresh()
      self.emit(f"{cmp} = icmp {'ugt' if unsigned else 'sgt'} {t} {a[0]}, {a[1]}")
      self.emit(f"{out} = select i1 {cmp}, {t} {a[0]}, {t} {a[1]}")
      return out
    if op in (Ops.IDIV, Ops.MOD) and not is_float: a[1] = self.safe_divisor(u, t, a, unsigned)
    out = self.fresh()
    if op is Ops.NEG:
      self.emit(f"{out} = fneg {t} {a[0]}" if is_float else (f"{out} = xor i1 {a[0]}, true" if src_dt == dtypes.bool else f"{out} = sub {t} 0, {a[0]}"))
    elif op is Ops.RECIP: self.emit(f"{out} = fdiv {t} {const_text(1.0, src_dt)}, {a[0]}")
    elif op is Ops.WHERE: self.emit(f"{out} = select i1 {a[0]}, {ltype(u.dtype)} {a[1]}, {ltype(u.dtype)} {a[2]}")  # (bf16 is float here)
    elif op is Ops.MULACC:
      tmp = self.fresh()
      self.emit(f"{tmp} = mul {t} {a[0]}, {a[1]}")
      self.emit(f"{out} = add {t} {tmp}, {a[2]}")
    elif op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ):
      pred = {Ops.CMPLT: "olt" if is_float else ("ult" if unsigned else "slt"), Ops.CMPNE: "une" if is_float else "ne", Ops.CMPEQ: "oeq" if is_float else "eq"}[op]
      self.emit(f"{out} = {'fcmp' if is_float else 'icmp'} {pred} {t} {a[0]}, {a[1]}")
    elif op in (Ops.SHL, Ops.SHR):
      amt = self.fresh()
      self.emit(f"{amt} = and {t} {a[1]}, {8 * src_dt.itemsize - 1}")
      self.emit(f"{out} = {'shl' if op is Ops.SHL else ('lshr' if unsigned else 'ashr')} {t} {a[0]}, {amt}")
    else:
      instr = {Ops.ADD: ("fadd", "add"), Ops.SUB: ("fsub", "sub"), Ops.MUL: ("fmul", "mul"), Ops.FDIV: ("fdiv", None),
               Ops.IDIV: (None, "udiv" if unsigned else "sdiv"), Ops.MOD: ("frem", "urem" if unsigned else "srem"),
               Ops.AND: (None, "and"), Ops.OR: (None, "or"), Ops.XOR: (None, "xor")}[op][0 if is_float else 1]
      if instr is None: raise TypeError(f"{op} is not defined on {src_dt}")
      self.emit(f"{out} = {instr} {t} {a[0]}, {a[1]}")
    return out

  def safe_divisor(self, u: UOp, t: str, a: list[str], unsigned: bool) -> str:
    """Integer division by zero (and INT_MIN / -1) traps on x86; such divisions give garbage instead, like on a GPU."""
    d = u.src[1]
    if d.op is Ops.CONST and d.arg not in (0, -1): return a[1]
    zero, safe = self.fresh(), self.fresh()
    self.emit(f"{zero} = icmp eq {t} {a[1]}, 0")
    self.emit(f"{safe} = select i1 {zero}, {t} 1, {t} {a[1]}")
    if unsigned: return safe
    minus1, is_min, both, safer = self.fresh(), self.fresh(), self.fresh(), self.fresh()
    self.emit(f"{minus1} = icmp eq {t} {safe}, -1")
    self.emit(f"{is_min} = icmp eq {t} {a[0]}, {const_text(dtypes.min(u.src[0].dtype), u.src[0].dtype)}")
    self.emit(f"{both} = and i1 {minus1}, {is_min}")
    self.emit(f"{safer} = select i1 {both}, {t} 1, {t} {safe}")
    return safer
