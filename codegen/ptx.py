"""Renders a linear program as PTX text for NVIDIA GPUs (sm_80 and newer): one `.entry` taking buffer pointers, then
int32 Variables. Launch indices are %ctaid (workgroup) and %tid (thread); local memory is `.shared`; vector UOps
become one register per lane. int8/uint8 live in 16-bit registers (re-extended after arithmetic that can overflow
8 bits), bfloat16 in float registers (rounded after each op), bool in predicates."""
from __future__ import annotations
import math, re, struct
from ir.dtype import DType, PtrDType, dtypes
from ir.ops import Ops
from ir.uop import UOp
from codegen.renderer import Renderer
from codegen.tensor_core import mma_m16n8k16, wgmma_m64nNk16
from codegen.sine import COS_POLY, HALF_PI, SIN_POLY

def ptx_version(arch: str) -> str:
  """The PTX ISA version to declare for `arch` (sm_NN, optionally with an a/f suffix): the oldest that knows it."""
  if not (m := re.fullmatch(r"sm_(\d+)([af]?)", arch)) or int(m.group(1)) < 80:
    raise ValueError(f"the PTX renderer targets sm_80 and newer, not {arch!r}")
  sm = int(m.group(1))
  return "8.7" if sm >= 120 else "8.6" if sm >= 100 else "8.0" if m.group(2) else "7.8"
# register prefix and declaration type of each register class
REG_CLASSES = {"pred": ("%p", ".pred"), "b16": ("%rs", ".b16"), "b32": ("%r", ".b32"), "b64": ("%rd", ".b64"), "f32": ("%f", ".f32"), "f64": ("%fd", ".f64")}
# dtype -> (register class, instruction type, memory type)
TYPES: dict[DType, tuple[str, str, str]] = {
  dtypes.bool: ("pred", "pred", "u8"), dtypes.int8: ("b16", "s16", "s8"), dtypes.uint8: ("b16", "u16", "u8"),
  dtypes.int16: ("b16", "s16", "s16"), dtypes.uint16: ("b16", "u16", "u16"), dtypes.int32: ("b32", "s32", "s32"),
  dtypes.uint32: ("b32", "u32", "u32"), dtypes.int64: ("b64", "s64", "s64"), dtypes.uint64: ("b64", "u64", "u64"),
  dtypes.float16: ("b16", "f16", "b16"), dtypes.float32: ("f32", "f32", "f32"), dtypes.float64: ("f64", "f64", "f64"),
  dtypes.bfloat16: ("f32", "f32", "u16"), dtypes.fp8e4m3: ("b16", "u16", "u8"), dtypes.fp8e5m2: ("b16", "u16", "u8")}
FP8 = (dtypes.fp8e4m3, dtypes.fp8e5m2)  # bytes to load, store and bitcast; the frontend converts them through float32
SPECIAL_REGS = {"g": "%ctaid", "l": "%tid"}

def ptx_type(dt: DType) -> tuple[str, str, str]:
  if (t := TYPES.get(dt.scalar)) is None: raise TypeError(f"the PTX renderer has no {dt}")
  return t
def bits_of(dt: DType) -> int: return 1 if dt.scalar == dtypes.bool else 8 * max(dt.scalar.itemsize, 2) if dt.scalar != dtypes.bfloat16 else 32
def _f32_bits(x: float) -> int: return struct.unpack('<I', struct.pack('<f', x))[0]
def _f32(x: float) -> str: return f"0f{_f32_bits(x):08X}"
def _f64(x: float) -> str: return f"0d{struct.unpack('<Q', struct.pack('<d', x))[0]:016X}"

def immediate(value, dt: DType) -> str:
  """A constant as a PTX operand of dt's instruction type."""
  _, t, _ = ptx_type(dt)
  if t == "pred": return "1" if value else "0"
  if t == "f16": return f"0x{struct.unpack('<H', struct.pack('<e', value))[0]:04X}"
  if t == "f32": return _f32(value) if not math.isnan(value) else "0f7FC00000"
  if t == "f64": return _f64(value) if not math.isnan(value) else "0d7FF8000000000000"
  if dt.scalar in (dtypes.int8, dtypes.uint8): value = (value + 128) % 256 - 128 if dt.scalar == dtypes.int8 else value % 256
  return str(int(value))

class PTXRenderer(Renderer):
  device = "NV"
  has_local = True
  launch_dims = 3
  vector_width = 4
  def __init__(self, arch: str = "sm_90"):
    ptx_version(arch)
    self.arch = arch
    # mma.sync on sm_80 and newer; Hopper's wgmma (sm_90a only) first, widest tiles first
    halves = (dtypes.float16, dtypes.bfloat16)
    wgmma = [wgmma_m64nNk16(n, dt) for n in (64, 32, 16, 8) for dt in halves] if arch == "sm_90a" else []
    self.tensor_cores = tuple(wgmma + [mma_m16n8k16(dt) for dt in halves])
  def render(self, name: str, uops: list[UOp]) -> str: return _Kernel(name, self.arch).render(uops)

class _Kernel:
  def __init__(self, name: str, arch: str):
    self.name, self.arch = name, arch
    self.counts = {c: 0 for c in REG_CLASSES}
    self.params: list[str] = []
    self.shared: list[str] = []
    self.prologue: list[str] = []
    self.lines: list[str] = []
    self.val: dict[UOp, str | list[str]] = {}
    self.labels = 0
    self.local_dims = [1, 1, 1]
    self.loops: dict[UOp, tuple[str, str]] = {}

  def reg(self, cls: str) -> str:
    self.counts[cls] += 1
    return f"{REG_CLASSES[cls][0]}{self.counts[cls] - 1}"
  def new(self, dt: DType) -> str: return self.reg(ptx_type(dt)[0])
  def emit(self, text: str, prologue: bool = False) -> None: (self.prologue if prologue else self.lines).append(f"  {text};")
  def label(self, kind: str) -> str:
    self.labels += 1
    return f"${kind}_{self.labels}"
  def ref(self, u: UOp, lane: int | None = None) -> str:
    v = self.val[u]
    if isinstance(v, list): return v[lane or 0]
    return v

  def render(self, uops: list[UOp]) -> str:
    for u in uops: self.val[u] = self.render_one(u)
    decls = [f"  .reg {REG_CLASSES[c][1]} {REG_CLASSES[c][0]}<{n}>;" for c, n in self.counts.items() if n]
    threads = ", ".join(str(d) for d in self.local_dims)
    head = [f".version {ptx_version(self.arch)}", f".target {self.arch}", ".address_size 64", "",
            f".visible .entry {self.name}(", ",\n".join(f"  {p}" for p in self.params), f")\n.maxntid {threads}", "{"]
    return "\n".join(head + decls + self.shared + self.prologue + self.lines + ["  ret;", "}", ""])

  def render_one(self, u: UOp):
    op, dt = u.op, u.dtype
    if op is Ops.CONST:  # materialized once, before any branch, so every use sees it
      out = self.new(dt)
      self.emit(f"mov.{_mov_type(dt)} {out}, {immediate(u.arg, dt)}", prologue=True)
      return out
    if op is Ops.DEFINE_GLOBAL:
      self.params.append(f".param .u64 data{u.arg}")
      raw, out = self.reg("b64"), self.reg("b64")
      self.emit(f"ld.param.u64 {raw}, [data{u.arg}]", prologue=True)
      self.emit(f"cvta.to.global.u64 {out}, {raw}", prologue=True)
      return out
    if op is Ops.DEFINE_VAR:
      name = "var_" + re.sub(r"\W", "_", u.arg[0])
      _, t, _ = ptx_type(dt)
      self.params.append(f".param .{t} {name}")
      out = self.new(dt)
      self.emit(f"ld.param.{t} {out}, [{name}]", prologue=True)
      return out
    if op is Ops.SPECIAL:
      kind, dim = u.arg[0][0], int(u.arg[0][-1])
      if kind == "l": self.local_dims[dim] = u.arg[1]
      out = self.reg("b32")
      self.emit(f"mov.u32 {out}, {SPECIAL_REGS[kind]}.{'xyz'[dim]}", prologue=True)
      return self.convert(out, dtypes.uint32, dt, prologue=True) if dt != dtypes.int32 else out
    if op is Ops.DEFINE_LOCAL:
      name = f"local{len(self.shared)}"
      self.shared.append(f"  .shared .align 16 .b8 {name}[{max(dt.size, 1) * dt.base.itemsize}];")
      out = self.reg("b64")
      self.emit(f"mov.u64 {out}, {name}", prologue=True)
      return out
    if op is Ops.DEFINE_ACC: return self.copy_lanes(u.src[0], dt)
    if op is Ops.RANGE: return self.open_loop(u)
    if op is Ops.ENDRANGE: return self.close_loop(u)
    if op is Ops.IF:
      end = self.label("endif")
      self.emit(f"@!{self.ref(u.src[0])} bra {end}")
      return end
    if op is Ops.ENDIF:
      self.lines.append(f"{self.val[u.src[0]]}:")
      return None
    if op is Ops.BARRIER:
      if u.arg == "async": self.emit("fence.proxy.async.shared::cta")  # this thread's shared writes, visible to wgmma
      self.emit("bar.sync 0")
      return None
    if op is Ops.LOAD: return self.load(u)
    if op is Ops.STORE: return self.store(u)
    if op is Ops.VECTORIZE: return [self.ref(s) for s in u.src]
    if op is Ops.GEP: return self.ref(u.src[0], u.arg)
    if op is Ops.WMMA: return self.mma(u)
    lanes = [self.scalar_op(u, i) for i in range(dt.count)]
    return lanes if dt.count > 1 else lanes[0]

  def copy_lanes(self, src: UOp, dt: DType):
    """Fresh registers holding src's lanes, so that later updates of src don't change them."""
    regs = [self.new(dt.scalar) for _ in range(dt.count)]
    for i, r in enumerate(regs): self.emit(f"mov.{_mov_type(dt)} {r}, {self.ref(src, i)}")
    return regs if dt.count > 1 else regs[0]

  def mma(self, u: UOp) -> list[str]:
    """A tensor-core step. A's (and mma.sync's B's) elements are packed two per 32-bit register (the lower-numbered
    element in the low half); wgmma reads B from shared memory through a descriptor and accumulates in place."""
    tc, a, acc = u.arg, u.src[0], u.src[2]
    half = {dtypes.float16: "f16", dtypes.bfloat16: "bf16"}[a.dtype.scalar]
    def packed(x: UOp) -> str:
      bits = [self.ref(x, i) if half == "f16" else self.f32_to_bf16_bits(self.ref(x, i)) for i in range(x.dtype.count)]
      regs = [self.reg("b32") for _ in range(len(bits) // 2)]
      for i, r in enumerate(regs): self.emit(f"mov.b32 {r}, {{{bits[2 * i]}, {bits[2 * i + 1]}}}")
      return "{" + ", ".join(regs) + "}"
    if tc.instruction == "mma":
      out = [self.reg("f32") for _ in range(u.dtype.count)]
      c = ", ".join(self.ref(acc, i) for i in range(acc.dtype.count))
      self.emit(f"mma.sync.aligned.{tc.shape}.row.col.f32.{half}.{half}.f32 {{{', '.join(out)}}}, {packed(a)}, {packed(u.src[1])}, {{{c}}}")
      return out
    out = self.copy_lanes(acc, u.dtype)  # wgmma accumulates in place
    desc = self.reg("b64")
    lbo, sbo = tc.b_strides
    self.emit(f"add.s64 {desc}, {self.ref(u.src[1])}, {u.src[3].arg}")
    self.emit(f"shr.u64 {desc}, {desc}, 4")
    self.emit(f"and.b64 {desc}, {desc}, 16383")  # start address (>> 4) in bits 0-13; no swizzle, base offset 0
    self.emit(f"or.b64 {desc}, {desc}, {(lbo >> 4) << 16 | (sbo >> 4) << 32}")
    self.emit("wgmma.fence.sync.aligned")
    self.emit(f"wgmma.mma_async.sync.aligned.{tc.shape}.f32.{half}.{half} {{{', '.join(out)}}}, {packed(a)}, {desc}, 1, 1, 1, 0")
    self.emit("wgmma.commit_group.sync.aligned")
    self.emit("wgmma.wait_group.sync.aligned 0")
    return out

  def scalar_op(self, u: UOp, lane: int) -> str:
    args = [self.ref(s, lane) for s in u.src]
    if u.op is Ops.CAST: return self.convert(args[0], u.src[0].dtype.scalar, u.dtype.scalar)
    if u.op is Ops.BITCAST: return self.bitcast(args[0], u.src[0].dtype.scalar, u.dtype.scalar)
    out = self.alu(u.op, u.dtype.scalar, u.src[0].dtype.scalar if u.op is not Ops.WHERE else u.dtype.scalar, args)
    if u.dtype.scalar == dtypes.bfloat16 and u.op not in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ): return self.round_bf16(out)
    return out

  # ---- memory ----
  def address(self, buf: UOp, idx: UOp, lane: int | None) -> str:
    size = buf.dtype.base.itemsize
    offset = self.reg("b64")
    index = self.ref(idx, lane)
    if idx.dtype.scalar == dtypes.int64: self.emit(f"mul.lo.s64 {offset}, {index}, {size}")
    else: self.emit(f"mul.wide.s32 {offset}, {index}, {size}")
    addr = self.reg("b64")
    self.emit(f"add.s64 {addr}, {self.ref(buf)}, {offset}")
    return addr
  def space(self, buf: UOp) -> str: return "shared" if buf.op is Ops.DEFINE_LOCAL else "global"

  def load(self, u: UOp):
    dt = u.dtype
    if len(u.src) == 1: return self.copy_lanes(u.src[0], dt)  # an accumulator's value
    buf, idx = u.src
    addr = self.address(buf, idx, None)
    space = self.space(buf)
    if (aligned := self.vector_aligned(addr, dt, space)) is not None:
      lanes = [self.new(dt.scalar) for _ in range(dt.count)]
      mem = ptx_type(dt.scalar)[2]
      self.emit(f"@{aligned} ld.global.v{dt.count}.{mem} {{{', '.join(lanes)}}}, [{addr}]")
      for i, lane in enumerate(lanes): self.emit(f"@!{aligned} ld.global.{mem} {lane}, [{addr}+{i * dt.scalar.itemsize}]")
      return lanes
    lanes = [self.load_scalar(space, f"[{addr}+{i * dt.scalar.itemsize}]" if i else f"[{addr}]", dt.scalar) for i in range(dt.count)]
    return lanes if dt.count > 1 else lanes[0]
  def vector_aligned(self, addr: str, dt: DType, space: str) -> str | None:
    """For a vector access that PTX can do in one instruction: a predicate, true when addr is aligned to the vector's
    size (a buffer view may start anywhere, so this is checked at run time); None for accesses done lane by lane."""
    if space != "global" or dt.count not in (2, 4) or dt.count * dt.scalar.itemsize > 16: return None
    if dt.scalar in (dtypes.bool, dtypes.bfloat16, dtypes.int8, dtypes.uint8, *FP8): return None  # held widened in registers
    low, aligned = self.reg("b64"), self.reg("pred")
    self.emit(f"and.b64 {low}, {addr}, {dt.count * dt.scalar.itemsize - 1}")
    self.emit(f"setp.eq.u64 {aligned}, {low}, 0")
    return aligned
  def load_scalar(self, space: str, at: str, dt: DType) -> str:
    cls, t, mem = ptx_type(dt)
    if dt == dtypes.bool:
      byte, out = self.reg("b16"), self.reg("pred")
      self.emit(f"ld.{space}.u8 {byte}, {at}")
      self.emit(f"setp.ne.u16 {out}, {byte}, 0")
      return out
    if dt == dtypes.bfloat16:
      bits = self.reg("b16")
      self.emit(f"ld.{space}.u16 {bits}, {at}")
      return self.bf16_to_f32(bits)
    out = self.reg(cls)
    self.emit(f"ld.{space}.{mem} {out}, {at}")
    return out

  def store(self, u: UOp) -> None:
    if len(u.src) == 2:
      for i in range(u.src[1].dtype.count):
        self.emit(f"mov.{_mov_type(u.src[1].dtype)} {self.ref(u.src[0], i)}, {self.ref(u.src[1], i)}")
      return None
    buf, idx, val = u.src[:3]
    gate = u.src[3] if len(u.src) == 4 else None
    addr = self.address(buf, idx, None)
    space, dt = self.space(buf), val.dtype
    if gate is None and (aligned := self.vector_aligned(addr, dt, space)) is not None:
      mem = ptx_type(dt.scalar)[2]
      self.emit(f"@{aligned} st.global.v{dt.count}.{mem} [{addr}], {{{', '.join(self.ref(val, i) for i in range(dt.count))}}}")
      for i in range(dt.count): self.emit(f"@!{aligned} st.global.{mem} [{addr}+{i * dt.scalar.itemsize}], {self.ref(val, i)}")
      return None
    for i in range(dt.count):
      guard = f"@{self.ref(gate, i)} " if gate is not None else ""
      self.store_scalar(space, f"[{addr}+{i * dt.scalar.itemsize}]" if i else f"[{addr}]", self.ref(val, i), dt.scalar, guard)
    return None
  def store_scalar(self, space: str, at: str, value: str, dt: DType, guard: str) -> None:
    _, _, mem = ptx_type(dt)
    if dt == dtypes.bool:
      byte = self.reg("b16")
      self.emit(f"selp.u16 {byte}, 1, 0, {value}")
      value = byte
    elif dt == dtypes.bfloat16: value = self.f32_to_bf16_bits(value)
    self.emit(f"{guard}st.{space}.{mem} {at}, {value}")

  # ---- loops ----
  def open_loop(self, r: UOp) -> str:
    loop, end = self.label("loop"), self.label("end")
    _, t, _ = ptx_type(r.dtype)
    i, skip = self.new(r.dtype), self.reg("pred")
    self.emit(f"mov.{_mov_type(r.dtype)} {i}, {self.ref(r.src[0])}")
    self.emit(f"setp.ge.{t} {skip}, {i}, {self.ref(r.src[1])}")
    self.emit(f"@{skip} bra {end}")
    self.lines.append(f"{loop}:")
    self.loops[r] = (loop, end)
    return i
  def close_loop(self, e: UOp) -> None:
    r = e.src[0]
    loop, end = self.loops[r]
    _, t, _ = ptx_type(r.dtype)
    i, again = self.ref(r), self.reg("pred")
    self.emit(f"add.{t} {i}, {i}, 1")
    self.emit(f"setp.lt.{t} {again}, {i}, {self.ref(r.src[1])}")
    self.emit(f"@{again} bra {loop}")
    self.lines.append(f"{end}:")
    return None

  # ---- bfloat16 (bits in 16-bit registers <-> values in float registers) ----
  def bf16_to_f32(self, bits: str) -> str:
    wide, out = self.reg("b32"), self.reg("f32")
    self.emit(f"cvt.u32.u16 {wide}, {bits}")
    self.emit(f"shl.b32 {wide}, {wide}, 16")
    self.emit(f"mov.b32 {out}, {wide}")
    return out
  def f32_to_bf16_bits(self, value: str) -> str:
    """The upper half of a float that already holds a bfloat16 value."""
    wide, out = self.reg("b32"), self.reg("b16")
    self.emit(f"mov.b32 {wide}, {value}")
    self.emit(f"shr.u32 {wide}, {wide}, 16")
    self.emit(f"cvt.u16.u32 {out}, {wide}")
    return out
  def round_bf16(self, value: str) -> str:
    """A float rounded to the nearest bfloat16 (ties to even), still in a float register."""
    bits = self.reg("b16")
    self.emit(f"cvt.rn.bf16.f32 {bits}, {value}")
    return self.bf16_to_f32(bits)

  # ---- conversions ----
  def convert(self, x: str, src: DType, dst: DType, prologue: bool = False) -> str:
    if src in FP8 or dst in FP8: raise TypeError(f"the PTX renderer can't cast {src} to {dst}; the frontend converts fp8 through float32")
    scls, st, _ = ptx_type(src)
    dcls, dt_, _ = ptx_type(dst)
    emit = lambda text: self.emit(text, prologue)
    if src == dst or (scls == dcls and st == dt_ and dst != dtypes.bfloat16): return x
    out = self.reg(dcls)
    if dst == dtypes.bool:
      emit(f"setp.{'neu' if dtypes.is_float(src) else 'ne'}.{st} {out}, {x}, {immediate(0, src)}")
      return out
    if src == dtypes.bool:
      emit(f"selp.{_mov_type(dst)} {out}, {immediate(1, dst)}, {immediate(0, dst)}, {x}")
      return self.round_bf16(out) if dst == dtypes.bfloat16 else out
    if dtypes.is_float(dst):
      if dtypes.is_float(src):
        if dst == dtypes.bfloat16:  # through float32, then rounded to bfloat16
          if src != dtypes.float32 and src != dtypes.bfloat16: x = self.convert(x, src, dtypes.float32)
          return self.round_bf16(x)
        narrowing = bits_of(dst) < bits_of(src)
        emit(f"cvt{'.rn' if narrowing else ''}.{dt_}.{st} {out}, {x}")
        return out
      emit(f"cvt.rn.{dt_}.{st} {out}, {x}")
      return self.round_bf16(out) if dst == dtypes.bfloat16 else out
    if dtypes.is_float(src):  # float -> int: truncate toward zero, saturate, NaN -> 0 (PTX's cvt does all three)
      emit(f"cvt.rzi.{_int_mem(dst)}.{st} {out}, {x}")
      return out
    # int -> int: 8-bit values are sign/zero-extended in 16-bit registers
    if dst.itemsize == 1:
      narrow = x
      if scls != "b16":
        narrow = self.reg("b16")
        emit(f"cvt.u16.{st} {narrow}, {x}")
      emit(f"cvt.{dt_}.{'s8' if dst == dtypes.int8 else 'u8'} {out}, {narrow}")
      return out
    if scls == dcls:
      emit(f"mov.b{bits_of(dst)} {out}, {x}")
      return out
    emit(f"cvt.{dt_}.{st} {out}, {x}")
    return out

  def bitcast(self, x: str, src: DType, dst: DType) -> str:
    if src == dtypes.bfloat16: x, src = self.f32_to_bf16_bits(x), dtypes.uint16
    if dst == dtypes.bfloat16:
      if ptx_type(src)[0] != "b16": x = self.bitcast(x, src, dtypes.uint16)
      return self.bf16_to_f32(x)
    out = self.new(dst)
    self.emit(f"mov.b{bits_of(dst)} {out}, {x}")
    return out

  # ---- arithmetic ----
  def alu(self, op: Ops, dt: DType, src: DType, a: list[str]) -> str:
    _, t, _ = ptx_type(src)
    out_cls = ptx_type(dt)[0]
    is_float = dtypes.is_float(src)
    if src == dtypes.bool: return self.bool_alu(op, a)
    if t == "f16" and op in (Ops.FDIV, Ops.RECIP, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.MOD):  # through float32
      wide = [self.convert(x, dtypes.float16, dtypes.float32) for x in a]
      return self.convert(self.alu(op, dtypes.float32, dtypes.float32, wide), dtypes.float32, dtypes.float16)
    if t == "f64" and op in (Ops.EXP2, Ops.LOG2, Ops.SIN):  # PTX has these in single precision only
      return self.convert(self.alu(op, dtypes.float32, dtypes.float32, [self.convert(a[0], dtypes.float64, dtypes.float32)]), dtypes.float32, dtypes.float64)
    out = self.reg(out_cls)
    if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ):
      cmp = {Ops.CMPLT: "lt", Ops.CMPNE: "neu" if is_float else "ne", Ops.CMPEQ: "eq"}[op]
      self.emit(f"setp.{cmp}.{t} {out}, {a[0]}, {a[1]}")
      return out
    if op is Ops.WHERE:
      self.emit(f"selp.{_mov_type(dt)} {out}, {a[1]}, {a[2]}, {a[0]}")
      return out
    if op is Ops.MAX and t == "f64":  # max.f64 drops NaN operands; numpy (and the other renderers) propagate them
      either_nan, total = self.reg("pred"), self.reg("f64")
      self.emit(f"max.f64 {out}, {a[0]}, {a[1]}")
      self.emit(f"setp.nan.f64 {either_nan}, {a[0]}, {a[1]}")
      self.emit(f"add.f64 {total}, {a[0]}, {a[1]}")
      self.emit(f"selp.f64 {out}, {total}, {out}, {either_nan}")
      return out
    if op is Ops.SIN: return self.sin(a[0])
    if op is Ops.LOG2: return self.log2(a[0])
    if op is Ops.MOD and is_float:  # a - trunc(a / b) * b
      q = self.reg(out_cls)
      self.emit(f"div.rn.{t} {q}, {a[0]}, {a[1]}")
      self.emit(f"cvt.rzi.{t}.{t} {q}, {q}")
      self.emit(f"neg.{t} {q}, {q}")
      self.emit(f"fma.rn.{t} {out}, {q}, {a[1]}, {a[0]}")
      return out
    if op in (Ops.SHL, Ops.SHR):
      amount = self.reg("b32")
      if bits_of(src) == 32: self.emit(f"and.b32 {amount}, {a[1]}, {8 * src.itemsize - 1}")
      else:
        masked = self.reg(ptx_type(src)[0])
        self.emit(f"and.b{bits_of(src)} {masked}, {a[1]}, {8 * src.itemsize - 1}")
        self.emit(f"cvt.u32.u{bits_of(src)} {amount}, {masked}")
      kind = "shl.b" if op is Ops.SHL else ("shr.u" if dtypes.is_unsigned(src) else "shr.s")
      self.emit(f"{kind}{bits_of(src)} {out}, {a[0]}, {amount}")
      return self.wrap8(out, dt)
    text = {
      Ops.ADD: f"add.{t}", Ops.SUB: f"sub.{t}", Ops.MUL: f"mul.{t}" if is_float else f"mul.lo.{t}",
      Ops.FDIV: f"div.rn.{t}", Ops.IDIV: f"div.{t}", Ops.MOD: f"rem.{t}",
      Ops.MAX: f"max.NaN.{t}" if is_float else f"max.{t}", Ops.AND: f"and.b{bits_of(src)}", Ops.OR: f"or.b{bits_of(src)}",
      Ops.XOR: f"xor.b{bits_of(src)}", Ops.NEG: f"neg.{t}" if is_float else f"neg.s{bits_of(src)}",
      Ops.RECIP: f"rcp.rn.{t}", Ops.SQRT: f"sqrt.rn.{t}", Ops.EXP2: "ex2.approx.f32",
      Ops.TRUNC: f"cvt.rzi.{t}.{t}" if is_float else f"mov.b{bits_of(src)}", Ops.MULACC: f"fma.rn.{t}" if is_float else f"mad.lo.{t}",
    }.get(op)
    if text is None or (is_float and op in (Ops.IDIV, Ops.AND, Ops.OR, Ops.XOR)) or (not is_float and op in (Ops.FDIV, Ops.RECIP, Ops.SQRT, Ops.EXP2, Ops.LOG2)):
      raise TypeError(f"the PTX renderer has no {op} on {src}")
    self.emit(f"{text} {out}, {', '.join(a)}")
    return self.wrap8(out, dt) if op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.IDIV, Ops.MULACC) else out

  def wrap8(self, x: str, dt: DType) -> str:
    """Arithmetic on 8-bit values runs in 16-bit registers: keep the low byte, extended by the type's sign."""
    if dt.itemsize != 1 or dt == dtypes.bool: return x
    self.emit(f"cvt.{ptx_type(dt)[1]}.{'s8' if dt == dtypes.int8 else 'u8'} {x}, {x}")
    return x

  def bool_alu(self, op: Ops, a: list[str]) -> str:
    out = self.reg("pred")
    if op in (Ops.ADD, Ops.OR, Ops.MAX): self.emit(f"or.pred {out}, {a[0]}, {a[1]}")
    elif op in (Ops.MUL, Ops.AND): self.emit(f"and.pred {out}, {a[0]}, {a[1]}")
    elif op in (Ops.XOR, Ops.CMPNE): self.emit(f"xor.pred {out}, {a[0]}, {a[1]}")
    elif op is Ops.CMPEQ:
      self.emit(f"xor.pred {out}, {a[0]}, {a[1]}")
      self.emit(f"not.pred {out}, {out}")
    elif op is Ops.NEG: self.emit(f"not.pred {out}, {a[0]}")
    elif op is Ops.CMPLT:  # false < true only
      self.emit(f"not.pred {out}, {a[0]}")
      self.emit(f"and.pred {out}, {out}, {a[1]}")
    elif op is Ops.WHERE:
      other = self.reg("pred")
      self.emit(f"and.pred {out}, {a[0]}, {a[1]}")
      self.emit(f"not.pred {other}, {a[0]}")
      self.emit(f"and.pred {other}, {other}, {a[2]}")
      self.emit(f"or.pred {out}, {out}, {other}")
    else: raise TypeError(f"the PTX renderer has no {op} on bool")
    return out

  def sin(self, x: str) -> str:
    """sin with an error of about an ulp: sin.approx's error is absolute (about 2^-21.5 on an H200, even for tiny
    arguments, where the result is all error). x = n pi/2 + r with |r| <= pi/4, then sin r or cos r by polynomial,
    chosen and signed by n mod 4. An exact zero keeps its sign; infinities and NaN give NaN."""
    n, m, r, z, s, c, out, q, bit, zero, odd, neg = (self.reg(t) for t in ("f32",) * 7 + ("b32", "b32", "pred", "pred", "pred"))
    self.emit(f"mul.f32 {n}, {x}, {_f32(2 / math.pi)}")
    self.emit(f"cvt.rni.f32.f32 {n}, {n}")
    self.emit(f"neg.f32 {m}, {n}")
    self.emit(f"fma.rn.f32 {r}, {m}, {_f32(HALF_PI[0])}, {x}")
    for part in HALF_PI[1:]: self.emit(f"fma.rn.f32 {r}, {m}, {_f32(part)}, {r}")
    self.emit(f"mul.f32 {z}, {r}, {r}")
    self.emit(f"mov.f32 {s}, {_f32(SIN_POLY[2])}")
    for coef in SIN_POLY[1::-1]: self.emit(f"fma.rn.f32 {s}, {s}, {z}, {_f32(coef)}")
    self.emit(f"mul.f32 {out}, {r}, {z}")
    self.emit(f"fma.rn.f32 {s}, {out}, {s}, {r}")
    self.emit(f"mov.f32 {c}, {_f32(COS_POLY[2])}")
    for coef in COS_POLY[1::-1]: self.emit(f"fma.rn.f32 {c}, {c}, {z}, {_f32(coef)}")
    self.emit(f"mul.f32 {out}, {z}, {z}")
    self.emit(f"fma.rn.f32 {z}, {z}, 0fBF000000, 0f3F800000")  # 1 - r^2/2
    self.emit(f"fma.rn.f32 {c}, {out}, {c}, {z}")
    self.emit(f"cvt.rni.s32.f32 {q}, {n}")  # n mod 4 from its two's complement bits
    self.emit(f"and.b32 {bit}, {q}, 1")
    self.emit(f"setp.ne.s32 {odd}, {bit}, 0")
    self.emit(f"and.b32 {bit}, {q}, 2")
    self.emit(f"setp.ne.s32 {neg}, {bit}, 0")
    self.emit(f"selp.f32 {out}, {c}, {s}, {odd}")
    self.emit(f"neg.f32 {s}, {out}")
    self.emit(f"selp.f32 {out}, {s}, {out}, {neg}")
    self.emit(f"setp.eq.f32 {zero}, {x}, 0f00000000")
    self.emit(f"selp.f32 {out}, {x}, {out}, {zero}")  # -0 stays -0
    return out

  def log2(self, x: str) -> str:
    """log2 with a relative error of a few ulp everywhere: lg2.approx's error is absolute (about 2^-22.6), which near 1 is
    most of the result (log1p and expm1 of small arguments lost 8 % on an H200). x = m * 2^e with m in [sqrt(1/2),
    sqrt(2)), log2(m) = 2 atanh(s) / ln 2 with s = (m - 1) / (m + 1), |s| <= 0.172, from its series to s^9. Zero,
    subnormal, negative, infinite and NaN inputs take lg2.approx, which has them right."""
    bits, exp, scale, m, s, s2, poly, out, approx, normal, finite = (self.reg(c) for c in ("b32", "b32", "b32", "f32", "f32", "f32", "f32", "f32", "f32", "pred", "pred"))
    self.emit(f"mov.b32 {bits}, {x}")
    self.emit(f"sub.s32 {exp}, {bits}, {_f32_bits(math.sqrt(0.5))}")
    self.emit(f"shr.s32 {exp}, {exp}, 23")
    self.emit(f"shl.b32 {scale}, {exp}, 23")
    self.emit(f"sub.s32 {bits}, {bits}, {scale}")  # x's bits with the exponent moved to 0 or -1
    self.emit(f"mov.b32 {m}, {bits}")
    self.emit(f"add.f32 {s}, {m}, 0f3F800000")
    self.emit(f"sub.f32 {m}, {m}, 0f3F800000")  # exact: m is within a factor of 2 of 1
    self.emit(f"div.rn.f32 {s}, {m}, {s}")
    self.emit(f"mul.f32 {s2}, {s}, {s}")
    self.emit(f"mov.f32 {poly}, {_f32(2 / (9 * math.log(2)))}")
    for k in (7, 5, 3, 1): self.emit(f"fma.rn.f32 {poly}, {poly}, {s2}, {_f32(2 / (k * math.log(2)))}")
    self.emit(f"mul.f32 {poly}, {poly}, {s}")
    self.emit(f"cvt.rn.f32.s32 {out}, {exp}")
    self.emit(f"add.f32 {out}, {out}, {poly}")
    self.emit(f"lg2.approx.f32 {approx}, {x}")
    self.emit(f"setp.ge.f32 {normal}, {x}, 0f00800000")
    self.emit(f"setp.lt.f32 {finite}, {x}, 0f7F800000")
    self.emit(f"and.pred {normal}, {normal}, {finite}")
    self.emit(f"selp.f32 {out}, {out}, {approx}, {normal}")
    return out

def _mov_type(dt: DType) -> str:
  """The type for moves and selects of dt's registers."""
  cls, t, _ = ptx_type(dt)
  return {"pred": "pred", "b16": "b16", "b32": "b32", "b64": "b64", "f32": "f32", "f64": "f64"}[cls]
def _int_mem(dt: DType) -> str:
  """The integer type a float converts to (8-bit results land extended in 16-bit registers)."""
  return {dtypes.int8: "s8", dtypes.uint8: "u8"}.get(dt, ptx_type(dt)[1])
