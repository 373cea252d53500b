"""Renders a linear program as ir3 assembly for Adreno a6xx/a7xx: the text codegen/ir3_assembler.py reads (Mesa's
disassembly syntax, one instruction per line, `name:` labels, `#name` branch targets, `@shared N`).

ABI: the work group id arrives in r0.x/y/z and the local id in r1.x/y/z (free once dead); the constant file holds each
buffer's 64-bit address (lo, hi) in DEFINE_GLOBAL order, then the int32 Variables. Values live in virtual registers,
allocated by a linear scan over the program (a value live into a loop keeps its register for the whole loop) onto the
full file r0.x..r47.w and, for float16, the separate half file hr0.x..hr47.w (registers are not merged); a kernel that
needs more raises RuntimeError (no spilling). A global address is base + 32-bit byte offset with an explicit carry
into the high word (a small constant index is the instruction's offset). Local memory holds every element as a 32-bit
word (halves widened to float32, narrow ints as their 32-bit value); ldl/stl take byte addresses.

Types: float32, float16 (half registers; what has no half instruction is computed in float32 and rounded back),
int32/uint32, and bool/int8/uint8/int16/uint16 loaded with the u8/u16 ldg types (ir3 has no s8 type: sign extension
is shl/ashr), computed in 32-bit registers and wrapped to their width after each op, bool as 0/1. bfloat16 is a
float32 register rounded after each op (u16 in memory); fp8 is a byte to load, store and bitcast (the frontend
converts it through float32). int64, uint64 and float64 are refused (TypeError). Operations ir3 lacks are built from
ones it has: 32-bit products from 16-bit halves (mull.u and mul.u24 multiply only 16 and 24 bits; one mul.u24 where
both operands' bounds fit); integer division and modulo from two float reciprocal estimates kept below the quotient
plus one integer correction (ir3 has no high multiply; exact for all 32-bit inputs); float division as a * rcp(b)
refined by one fused residual step; sin after a reduction by whole turns. Semantics match the other renderers: max
propagates NaN, float -> int truncates and saturates with NaN -> 0, shifts take the amount modulo the width. Barriers
are Mesa's `fence.r.w` + `bar.g`.

An image buffer (IMAGE=1: a PtrDType with `image`) is RGBA pixels, 4 consecutive elements each, read as a texture with
isam (the pixel's (x, y) from the element index and the image's width) and written as an IBO with stib, whole pixels
(the kernel pins its vector lanes to the channels, codegen/kernel.py); `@texture`/`@ibo` lines name each image's slot
for the driver, which builds the descriptors.

A last pass, after Mesa's src/freedreno/ir3/ir3_legalize.c, adds the sync flags and delay slots: (sy) on the first
instruction touching a register a global load or an isam writes; (ss) for cat4 and ldl results, before rewriting a
register a cat4, cat5 or cat6 instruction may still read (Mesa also accepts (sy) there after an ldg or isam, not
after a store), and with (sy) after a barrier; cat5 and cat6 have no (ss) bit, so a `(ss)nop` carries it. ALU
latencies (ir3_delay.c: 3 cycles ALU -> ALU, 6 ALU -> anything else and for p0.x) are filled with (nopN) on the
previous cat2/cat3 or with nops, and branch targets get (jp). Loops and ifs branch on p0.x written by a cmps just before; forward branches carry their
state to their label and backward branches wait for everything outstanding, so a loop head sees only what falls in."""
from __future__ import annotations
import math, re, struct
from dataclasses import dataclass, field
from ir.dtype import DType, dtypes
from ir.ops import Ops
from ir.uop import UOp
from ir.symbolic import is_multiple_of
from codegen.renderer import Renderer, buffers_written
from codegen.sine import COS_POLY, HALF_PI, SIN_POLY

NUM_REGS = 48                      # r0..r47 and hr0..hr47 (the registers a kernel may use)
COMPONENTS = 4 * NUM_REGS
UNSUPPORTED = (dtypes.int64, dtypes.uint64, dtypes.float64)
NARROW = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16)
FP8 = (dtypes.fp8e4m3, dtypes.fp8e5m2)  # bytes to load, store and bitcast; the frontend converts them through float32
# ldg/stg type of each dtype in global memory (u8/u16 go through a half register: ir3 has no 8-bit full-register load)
MEM_TYPE = {dtypes.float32: "f32", dtypes.int32: "s32", dtypes.uint32: "u32", dtypes.float16: "f16", dtypes.int16: "u16",
            dtypes.uint16: "u16", dtypes.int8: "u8", dtypes.uint8: "u8", dtypes.bool: "u8", dtypes.bfloat16: "u16",
            dtypes.fp8e4m3: "u8", dtypes.fp8e5m2: "u8"}
IMM_RANGE = range(-1024, 1024)      # cat2 immediates: an 11-bit signed field (ir3-common.xml #mulitsrc-immed IMMED)
ALU_TO_ALU, ALU_TO_OTHER = 3, 6    # ir3_delay.c ir3_delayslots: alu -> alu 3 cycles, alu -> flow/sfu/mem 6
RCP_SCALE = 0x3F7FFFF0             # 1 - 2^-20 as float32: makes the reciprocal an underestimate

def f32_bits(x: float) -> int:
  try: return struct.unpack("<I", struct.pack("<f", x))[0]
  except OverflowError: return 0x7F800000 | (0x80000000 if x < 0 else 0)

def image_slots(uops: list[UOp]) -> tuple[list[UOp], list[UOp]]:
  """The image buffers (DEFINE_GLOBALs) a kernel reads as textures t#0, t#1, ... and writes as IBOs 0, 1, ...: the
  binding the renderer names in the lib for the driver. TypeError for an image both read and written."""
  written = buffers_written(uops)
  images = [u for u in uops if u.op is Ops.DEFINE_GLOBAL and u.dtype.image]
  return [g for g in images if g not in written], [g for g in images if g in written]

def check_dtype(dt: DType) -> None:
  if dt.scalar in UNSUPPORTED: raise TypeError(f"the IR3 renderer has no {dt.scalar}: QCOM runs no 64-bit kernels")

class Reg:
  """A virtual register: `size` consecutive components of the full or half file, placed by the allocator."""
  __slots__ = ("half", "size", "phys", "fixed")
  def __init__(self, half: bool = False, size: int = 1, fixed: int | None = None):
    self.half, self.size, self.phys, self.fixed = half, size, fixed, fixed
  def name(self, k: int = 0) -> str:
    n = self.phys + k
    return f"{'h' if self.half else ''}r{n // 4}.{'xyzw'[n % 4]}"
  def comps(self) -> list[tuple[bool, int]]: return [(self.half, self.phys + k) for k in range(self.size)]

@dataclass(frozen=True)
class Part:
  """Component k of a register, read with a source modifier such as (neg) or (abs)."""
  reg: Reg
  k: int = 0
  mod: str = ""

Operand = Reg | Part | str  # str: a const (c1.z), an immediate, p0.x

def _text(o: Operand) -> str:
  if isinstance(o, Reg): return o.name()
  if isinstance(o, Part): return o.mod + o.reg.name(o.k)
  return o
def _comps(o: Operand) -> list[tuple[bool, int]]:
  if isinstance(o, Reg): return o.comps()
  if isinstance(o, Part): return [(o.reg.half, o.reg.phys + o.k)]
  return []
def _regs(o: Operand) -> list[Reg]: return [o] if isinstance(o, Reg) else [o.reg] if isinstance(o, Part) else []

@dataclass(eq=False)
class Ins:
  """One instruction: `name dsts, srcs` (form alu), or a memory/branch form; flags and nops come from legalize."""
  name: str
  dsts: list = field(default_factory=list)
  srcs: list = field(default_factory=list)
  form: str = "alu"          # alu | ldg | stg | ldl | stl | isam | stib | br | bare | label
  off: int = 0               # ldg/stg/ldl/stl immediate byte offset; isam's texture t#, stib's IBO slot
  target: str = ""           # br: label; label: its name
  flags: str = ""
  nop: int = 0
  rpt: int = 0
  @property
  def cat(self) -> int:  # the instruction category: src/freedreno/isa/ir3-cat0.xml .. ir3-cat7.xml
    if self.form in ("br", "bare") and self.name in ("nop", "end", "br"): return 0
    if self.form == "isam": return 5
    if self.form in ("ldg", "stg", "ldl", "stl", "stib"): return 6
    if self.name.startswith(("bar", "fence")): return 7
    if self.name in ("rcp", "rsq", "log2", "exp2", "sin", "cos", "sqrt"): return 4
    if self.name.startswith(("mov.", "cov.")): return 1
    if self.name.startswith(("mad.", "sel.")): return 3
    return 2
  def text(self) -> str:
    pre = self.flags + (f"(rpt{self.rpt})" if self.rpt else "") + (f"(nop{self.nop}) " if self.nop else "")
    d, s = [_text(o) for o in self.dsts], [_text(o) for o in self.srcs]
    if self.form == "alu": return f"{pre}{self.name} {', '.join(d + s)}"
    at = f"{s[0]}{self.off:+d}" if self.off else s[0] if s else ""
    if self.form == "ldg": return f"{pre}{self.name} {d[0]}, g[{at}], 1"
    if self.form == "stg": return f"{pre}{self.name} g[{at}], {s[1]}, 1"
    if self.form == "ldl": return f"{pre}{self.name} {d[0]}, l[{at}], 1"
    if self.form == "stl": return f"{pre}{self.name} l[{at}], {s[1]}, 1"
    if self.form == "isam": return f"{pre}isam (f32)(xyzw){d[0]}, {s[0]}, s#0, t#{self.off}"
    if self.form == "stib": return f"{pre}stib.b.typed.2d.f32.4.imm {s[0]}, {s[1]}, {self.off}"
    if self.form == "br": return f"{pre}br {s[0]}, #{self.target}"
    return f"{pre}{self.name}"

class IR3Renderer(Renderer):
  device = "QCOM"
  has_local = True
  launch_dims = 3
  vector_width = 4
  def __init__(self, arch: str = "a630"):
    if not re.fullmatch(r"a[67]\d\d", arch): raise ValueError(f"the IR3 renderer targets Adreno a6xx/a7xx (a630, a660, a730, ...), not {arch!r}")
    self.arch = arch
  def render(self, name: str, uops: list[UOp]) -> str: return _Kernel(name).render(uops)

class _Kernel:
  def __init__(self, name: str):
    self.name = name
    self.ins: list[Ins] = []
    self.val: dict[UOp, list] = {}   # lanes: Reg, or a CONST UOp materialized where it is used
    self.consts: dict[UOp, int] = {}  # DEFINE_GLOBAL / DEFINE_VAR -> its first const index
    self.shared = 0
    self.locals: dict[UOp, int] = {}  # DEFINE_LOCAL -> byte offset
    self.labels = 0
    self.loops: dict[UOp, tuple[str, str]] = {}
    self.slots: dict[UOp, int] = {}   # an image DEFINE_GLOBAL -> its texture t# (read) or IBO slot (written)
    self.written: set[UOp] = set()    # the images written (IBOs)

  # ---- emission helpers ----
  def emit(self, name: str, dsts: list, srcs: list, **kw) -> Ins:
    self.ins.append(i := Ins(name, dsts, srcs, **kw))
    return i
  def op(self, name: str, *srcs: Operand, half: bool = False) -> Reg:
    out = Reg(half)
    self.emit(name, [out], list(srcs))
    return out
  def label(self, kind: str) -> str:
    self.labels += 1
    return f"{kind}{self.labels}"
  def imm32(self, bits: int) -> Reg: return self.op("mov.u32u32", f"0x{bits & 0xFFFFFFFF:x}")
  def fconst(self, x: float) -> Reg: return self.imm32(f32_bits(x) if not math.isnan(x) else 0x7FC00000)
  def const(self, value, dt: DType) -> Reg:
    """A constant of scalar dt in a fresh register (float16: made in a full register, then converted exactly)."""
    if dt == dtypes.float16: return self.op("cov.f32f16", self.fconst(float(value)), half=True)
    if dtypes.is_float(dt): return self.fconst(float(value))
    return self.imm32(int(value))
  def get(self, ref, dt: DType, imm: bool = False) -> Operand:
    """An operand holding ref (a Reg, or a CONST UOp; small integers become immediates where imm allows)."""
    if isinstance(ref, Reg): return ref
    value = ref.arg
    if imm and not dtypes.is_float(dt) and int(value) in IMM_RANGE: return str(int(value))
    return self.const(value, dt)
  def lanes(self, u: UOp) -> list:
    if u.op is Ops.CONST: return [u] * u.dtype.count
    return self.val[u]
  def src(self, u: UOp, lane: int = 0, imm: bool = False) -> Operand:
    lanes = self.lanes(u)
    return self.get(lanes[lane if len(lanes) > 1 else 0], u.dtype.scalar, imm)
  def copy(self, ref, dt: DType, out: Reg | None = None) -> Reg:
    """ref's value in a fresh register (or in `out`): a register copied, a constant moved in as an immediate."""
    out = out or Reg(dt == dtypes.float16)
    if isinstance(ref, Reg): self.emit("mov.u16u16" if out.half else "mov.u32u32", [out], [ref])
    elif dt == dtypes.float16: self.emit("cov.f32f16", [out], [self.fconst(float(ref.arg))])
    else: self.emit("mov.u32u32", [out], [f"0x{(f32_bits(float(ref.arg)) if dtypes.is_float(dt) else int(ref.arg)) & 0xFFFFFFFF:x}"])
    return out
  def each_lane(self, target: UOp, value: UOp) -> list[tuple]:
    """(lane of target, lane of value) pairs, a scalar value broadcast."""
    lanes = self.lanes(value)
    return list(zip(self.lanes(target), lanes * target.dtype.count if len(lanes) == 1 else lanes))

  # ---- the program ----
  def render(self, uops: list[UOp]) -> str:
    for u in uops:
      check_dtype(u.dtype)
      if u.op is Ops.DEFINE_GLOBAL: check_dtype(u.dtype.base)
    textures, ibos = image_slots(uops)
    self.slots, self.written = {g: n for images in (textures, ibos) for n, g in enumerate(images)}, set(ibos)
    globs = [u for u in uops if u.op is Ops.DEFINE_GLOBAL]
    self.consts = {g: 2 * i for i, g in enumerate(globs)}
    self.consts.update({v: 2 * len(globs) + i for i, v in enumerate(u for u in uops if u.op is Ops.DEFINE_VAR)})
    for u in uops:
      if u.op is not Ops.CONST: self.val[u] = self.render_one(u)
    self.emit("end", [], [], form="bare")
    allocate(self.ins)
    lines = legalize(self.ins)
    images = [f"@{'ibo' if g in self.written else 'texture'} {slot} {g.arg} {g.dtype.image.height}x{g.dtype.image.width} "
              f"{'f16' if g.dtype.base == dtypes.float16 else 'f32'}" for g, slot in self.slots.items()]
    return "\n".join([f"; {self.name}"] + ([f"@shared {self.shared}"] if self.shared else []) + images + lines) + "\n"

  def render_one(self, u: UOp) -> list:
    op, dt = u.op, u.dtype
    if op in (Ops.DEFINE_GLOBAL, Ops.SINK): return []
    if op is Ops.DEFINE_VAR:
      if dt.itemsize != 4: raise TypeError(f"the IR3 renderer passes only 32-bit Variables, not {dt}")
      return [self.op("mov.u32u32", const_name(self.consts[u]))]
    if op is Ops.SPECIAL:
      kind, dim = u.arg[0][0], int(u.arg[0][-1])
      return [Reg(fixed=(0 if kind == "g" else 4) + dim)]  # ABI: work group id in r0.xyz, local id in r1.xyz
    if op is Ops.DEFINE_LOCAL:
      self.locals[u] = self.shared
      self.shared += 4 * max(dt.size, 1)  # one 32-bit word per element
      return []
    if op is Ops.DEFINE_ACC: return [self.copy(ref, dt.scalar) for ref in self.lanes(u.src[0])]
    if op is Ops.RANGE: return [self.open_loop(u)]
    if op is Ops.ENDRANGE: return self.close_loop(u)
    if op is Ops.IF:
      end = self.label("endif")
      self.emit("cmps.u.eq", ["p0.x"], [self.src(u.src[0]), "0"])
      self.emit("br", [], ["p0.x"], form="br", target=end)
      return [end]
    if op is Ops.ENDIF:
      self.emit("", [], [], form="label", target=self.val[u.src[0]][0])
      return []
    if op is Ops.BARRIER:  # as Mesa emits a workgroup barrier over shared memory: a fence, then bar (ir3_compiler_nir.c
      self.emit("fence.r.w", [], [], form="bare")  # emit_intrinsic_barrier scoped_barrier, emit_control_barrier)
      self.emit("bar.g", [], [], form="bare")
      return []
    if op is Ops.LOAD: return self.load(u)
    if op is Ops.STORE:
      self.store(u)
      return []
    if op is Ops.VECTORIZE: return [self.lanes(s)[0] for s in u.src]
    if op is Ops.GEP: return [self.lanes(u.src[0])[u.arg]]
    if op is Ops.WMMA: raise TypeError("the IR3 renderer has no tensor cores (Adreno has no matrix instructions)")
    if op is Ops.INDEX: raise TypeError("the IR3 renderer takes LOADs and STOREs with (buffer, index) sources, not INDEX")
    return [self.scalar(u, i) for i in range(dt.count)]

  # ---- loops ----
  def open_loop(self, r: UOp) -> Reg:
    loop, end = self.label("loop"), self.label("end")
    i = self.copy(self.lanes(r.src[0])[0], dtypes.int32)
    lo, hi = r.src
    if not (lo.op is Ops.CONST and hi.op is Ops.CONST and lo.arg < hi.arg):  # may run no iteration
      self.emit("cmps.s.ge", ["p0.x"], [i, self.src(hi, imm=True)])
      self.emit("br", [], ["p0.x"], form="br", target=end)
    self.emit("", [], [], form="label", target=loop)
    self.loops[r] = (loop, end)
    return i
  def close_loop(self, e: UOp) -> list:
    r = e.src[0]
    loop, end = self.loops[r]
    i = self.val[r][0]
    self.emit("add.s", [i], [i, "1"])
    self.emit("cmps.s.lt", ["p0.x"], [i, self.src(r.src[1], imm=True)])
    self.emit("br", [], ["p0.x"], form="br", target=loop)
    self.emit("", [], [], form="label", target=end)
    return []

  # ---- memory ----
  def global_address(self, buf: UOp, idx: UOp, lanes: int) -> tuple[Reg, int]:
    """(a 64-bit (lo, hi) register pair, an immediate byte offset) addressing element idx of a buffer: base + idx *
    itemsize with the low add's carry going into the high word; a small constant index is the offset alone."""
    size, base, pair = buf.dtype.base.itemsize, self.consts[buf], Reg(size=2)
    if idx.op is Ops.CONST and 0 <= int(idx.arg) * size and (int(idx.arg) + lanes) * size <= 4096:  # 13-bit signed offset
      for k in range(2): self.emit("mov.u32u32", [Part(pair, k)], [const_name(base + k)])
      return pair, int(idx.arg) * size
    index = self.src(idx)
    off = index if size == 1 else self.op("shl.b", index, str(size.bit_length() - 1))
    self.emit("add.u", [Part(pair, 0)], [const_name(base), off])
    carry = self.op("cmps.u.lt", Part(pair, 0), off)
    self.emit("add.u", [Part(pair, 1)], [const_name(base + 1), carry])
    return pair, 0
  def local_address(self, buf: UOp, idx: UOp) -> tuple[Operand, int]:
    """(a register holding the byte address, an immediate offset) of element idx of a local buffer."""
    offset = self.locals[buf]
    if idx.op is Ops.CONST: return self.imm32(4 * int(idx.arg) + offset), 0
    at = self.op("shl.b", self.src(idx), "2")
    if offset < 4096: return at, offset  # cat6 offsets are 13-bit signed (ir3-cat6.xml ldl OFF)
    return self.op("add.u", at, self.imm32(offset)), 0

  def load(self, u: UOp) -> list:
    dt = u.dtype
    if len(u.src) == 1: return [self.copy(ref, dt.scalar) for ref in self.lanes(u.src[0])]  # an accumulator's value now
    buf, idx = u.src[:2]
    if len(u.src) > 2: raise TypeError("the IR3 renderer takes ungated loads (the lowerer guards them with WHERE)")
    if buf.dtype.image: return self.image_load(buf, idx, dt)
    s, lanes = dt.scalar, []
    if buf.op is Ops.DEFINE_LOCAL:
      at, off = self.local_address(buf, idx)
      for i in range(dt.count):
        word = Reg()
        self.emit("ldl.f32" if dtypes.is_float(s) else "ldl.u32", [word], [at], form="ldl", off=off + 4 * i)
        lanes.append(self.op("cov.f32f16", word, half=True) if s == dtypes.float16 else word)
      return lanes
    addr, base = self.global_address(buf, idx, dt.count)
    for i in range(dt.count):
      out = Reg(MEM_TYPE[s] in ("f16", "u16", "u8"))
      self.emit(f"ldg.{MEM_TYPE[s]}", [out], [addr], form="ldg", off=base + i * s.itemsize)
      if out.half and s != dtypes.float16:  # bits: zero-extend the half register, then place, normalize or sign-extend
        out = self.op("cov.u16u32", out)
        if s == dtypes.bfloat16: out = self.op("shl.b", out, "16")
        elif s == dtypes.bool: out = self.op("cmps.u.ne", out, "0")
        else: out = self.wrap(out, s)
      lanes.append(out)
    return lanes

  def store(self, u: UOp) -> None:
    if len(u.src) == 2:  # an accumulator's new value
      for acc, ref in self.each_lane(u.src[0], u.src[1]): self.copy(ref, u.src[1].dtype.scalar, acc)
      return
    buf, idx, val = u.src[:3]
    gate = u.src[3] if len(u.src) == 4 else None
    if buf.dtype.image: return self.image_store(buf, idx, val, gate)
    s = val.dtype.scalar
    local = buf.op is Ops.DEFINE_LOCAL
    at, base = self.local_address(buf, idx) if local else self.global_address(buf, idx, val.dtype.count)
    for i in range(val.dtype.count):
      skip = None
      if gate is not None and not (gate.op is Ops.CONST and gate.arg):
        skip = self.label("skip")
        self.emit("cmps.u.eq", ["p0.x"], [self.src(gate, i), "0"])
        self.emit("br", [], ["p0.x"], form="br", target=skip)
      value = self.src(val, i)
      if local:
        if s == dtypes.float16: value = self.op("cov.f16f32", value)
        self.emit("stl.f32" if dtypes.is_float(s) else "stl.u32", [], [at, value], form="stl", off=base + 4 * i)
      else:
        if s == dtypes.bfloat16: value = self.op("shr.b", value, "16")
        if MEM_TYPE[s] in ("u16", "u8"): value = self.op("cov.u32u16", value, half=True)
        self.emit(f"stg.{MEM_TYPE[s]}", [], [at, value], form="stg", off=base + i * s.itemsize)
      if skip is not None: self.emit("", [], [], form="label", target=skip)

  # ---- images (IMAGE=1): RGBA pixels, 4 consecutive elements each, read with isam and written with stib ----
  def pixel(self, buf: UOp, element: Operand) -> Reg:
    """The (x, y) register pair of the pixel holding `element` of image buf: pixel p = element / 4 at (p % width,
    p / width)."""
    width, coord = buf.dtype.image.width, Reg(size=2)
    p = self.op("shr.b", element, "2")
    if width & (width - 1) == 0:
      mask = str(width - 1) if width - 1 in IMM_RANGE else self.imm32(width - 1)
      x, y = self.op("and.b", p, mask), self.op("shr.b", p, str(width.bit_length() - 1))
    else: y, x = self.udivmod(p, self.imm32(width))
    for k, v in enumerate((x, y)): self.emit("mov.u32u32", [Part(coord, k)], [v])
    return coord
  def texel(self, buf: UOp, element: Operand) -> Reg:
    """The 4 channels (as float32) of the pixel holding `element`, by isam from the kernel's texture of buf."""
    out = Reg(size=4)
    self.emit("isam", [out], [self.pixel(buf, element)], form="isam", off=self.slots[buf])
    return out
  def image_load(self, buf: UOp, idx: UOp, dt: DType) -> list:
    """Lanes of an image read: an index known to be a multiple of 4 reads whole pixels, channel by lane; any other
    reads each element's pixel and picks the channel (element % 4)."""
    lanes, index = [], self.src(idx)
    for i in range(dt.count):
      if is_multiple_of(idx, 4):
        if i % 4 == 0: pixel = self.texel(buf, index if i == 0 else self.op("add.u", index, str(i)))
        value: Operand = Part(pixel, i % 4)
      else:
        element = index if i == 0 else self.op("add.u", index, str(i))
        pixel, channel = self.texel(buf, element), self.op("and.b", element, "3")
        value = Part(pixel, 0)
        for k in range(1, 4): value = self.op("sel.b32", Part(pixel, k), self.op("cmps.u.eq", channel, str(k)), value)
      lanes.append(self.op("cov.f32f16", value, half=True) if dt.scalar == dtypes.float16 else self.op("mov.u32u32", value))
    return lanes
  def image_store(self, buf: UOp, idx: UOp, val: UOp, gate: UOp | None) -> None:
    """Whole pixels by stib (the kernel pins its vector lanes to the channels, codegen/kernel.py), under one gate."""
    if val.dtype.count % 4 or not is_multiple_of(idx, 4) or (gate is not None and gate.dtype.count != 1):
      raise TypeError(f"buffer {buf.arg} is an image: a kernel writes it whole pixels at a time (4 lanes at a multiple of 4, one gate for all), got {val.dtype}")
    skip = None
    if gate is not None and not (gate.op is Ops.CONST and gate.arg):
      skip = self.label("skip")
      self.emit("cmps.u.eq", ["p0.x"], [self.src(gate), "0"])
      self.emit("br", [], ["p0.x"], form="br", target=skip)
    index = self.src(idx)
    for first in range(0, val.dtype.count, 4):
      channels = Reg(size=4)
      for k in range(4):
        v = self.src(val, first + k)
        self.emit("cov.f16f32" if val.dtype.scalar == dtypes.float16 else "mov.u32u32", [Part(channels, k)], [v])
      coord = self.pixel(buf, index if first == 0 else self.op("add.u", index, str(first)))
      self.emit("stib", [], [channels, coord], form="stib", off=self.slots[buf])
    if skip is not None: self.emit("", [], [], form="label", target=skip)

  # ---- arithmetic ----
  def wrap(self, x: Reg, dt: DType) -> Reg:
    """A narrow int's 32-bit register cut to its width and extended by its sign (nothing for 32-bit types)."""
    if dt not in NARROW: return x
    bits = 8 * dt.itemsize
    if dtypes.is_unsigned(dt): return self.op("and.b", x, str((1 << bits) - 1) if bits == 8 else self.imm32(0xFFFF))
    return self.op("ashr.b", self.op("shl.b", x, str(32 - bits)), str(32 - bits))

  def scalar(self, u: UOp, lane: int) -> Reg:
    op, dt = u.op, u.dtype.scalar
    src_dt = u.src[0].dtype.scalar if op is not Ops.WHERE else dt
    if (dt in FP8 or src_dt in FP8) and op is not Ops.BITCAST:
      raise TypeError(f"the IR3 renderer only loads, stores and bitcasts {dt if dt in FP8 else src_dt}; the frontend converts fp8 through float32")
    if op is Ops.CAST: return self.cast(self.src(u.src[0], lane), src_dt, dt)
    if op is Ops.BITCAST: return self.bitcast(self.src(u.src[0], lane), src_dt, dt)
    if src_dt == dtypes.bool: return self.bool_alu(op, [self.src(s, lane, imm=i > 0 and op is not Ops.WHERE) for i, s in enumerate(u.src)])
    if dtypes.is_float(src_dt): return self.float_alu(op, src_dt, u, lane)
    return self.int_alu(op, src_dt, u, lane)

  def bool_alu(self, op: Ops, a: list) -> Reg:
    if op in (Ops.AND, Ops.MUL): return self.op("and.b", *a)
    if op in (Ops.OR, Ops.ADD, Ops.MAX): return self.op("or.b", *a)
    if op in (Ops.XOR, Ops.CMPNE): return self.op("xor.b", *a)
    if op is Ops.CMPEQ: return self.op("xor.b", self.op("xor.b", *a), "1")
    if op is Ops.NEG: return self.op("xor.b", a[0], "1")
    if op is Ops.CMPLT: return self.op("and.b", self.op("xor.b", a[0], "1"), a[1])  # false < true only
    if op is Ops.WHERE: return self.op("sel.b32", a[1], a[0], a[2])
    raise TypeError(f"the IR3 renderer has no {op} on bool")

  def float_alu(self, op: Ops, dt: DType, u: UOp, lane: int) -> Reg:
    half = dt == dtypes.float16
    if op is Ops.WHERE:
      cond, a, b = (self.src(s, lane) for s in u.src)
      # sel.b32 dst, a, cond, b = cond ? a : b (ir3_compiler_nir.c emit_alu nir_op_bcsel); sel.b16 takes a half condition
      return self.op("sel.b16", a, self.op("cov.u32u16", cond, half=True), b, half=True) if half else self.op("sel.b32", a, cond, b)
    a = [self.src(s, lane) for s in u.src]
    if half and op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.MULACC, Ops.TRUNC):  # native on half registers
      return self.float_op(op, a, True)
    if half:  # through float32: exact conversions, one rounding back
      wide = [self.op("cov.f16f32", x) for x in a]
      out = self.float_op(op, wide, False)
      return out if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else self.op("cov.f32f16", out, half=True)
    out = self.float_op(op, a, False)
    return self.round_bf16(out) if dt == dtypes.bfloat16 and op not in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else out

  def round_bf16(self, x: Reg) -> Reg:
    """A float32 rounded to the nearest bfloat16 (ties to even), still in a float32 register; NaN stays as it is."""
    lsb = self.op("and.b", self.op("shr.b", x, "16"), "1")
    up = self.op("add.u", self.op("add.u", x, self.imm32(0x7FFF)), lsb)
    return self.op("sel.b32", x, self.op("cmps.f.ne", x, x), self.op("and.b", up, self.imm32(0xFFFF0000)))

  def float_op(self, op: Ops, a: list, half: bool) -> Reg:
    h = {"half": half}
    if op is Ops.ADD: return self.op("add.f", *a, **h)
    if op is Ops.SUB: return self.op("add.f", a[0], Part(a[1], 0, "(neg)"), **h)
    if op is Ops.MUL: return self.op("mul.f", *a, **h)
    if op is Ops.NEG: return self.op("absneg.f", Part(a[0], 0, "(neg)"), **h)
    if op is Ops.TRUNC: return self.op("trunc.f", a[0], **h)
    if op is Ops.MULACC: return self.op("mad.f16" if half else "mad.f32", *a, **h)
    if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ): return self.op(f"cmps.f.{({Ops.CMPLT: 'lt', Ops.CMPNE: 'ne', Ops.CMPEQ: 'eq'})[op]}", *a)
    if op is Ops.MAX:  # max.f may drop a NaN operand: pick the NaN itself
      out = self.op("max.f", *a)
      for x in reversed(a): out = self.op("sel.b32", x, self.op("cmps.f.ne", x, x), out)
      return out
    if op is Ops.RECIP: return self.op("rcp", a[0])
    if op is Ops.SQRT: return self.op("sqrt", a[0])
    if op is Ops.EXP2: return self.op("exp2", a[0])
    if op is Ops.LOG2: return self.op("log2", a[0])
    if op is Ops.FDIV: return self.fdiv(*a)
    if op is Ops.MOD: return self.op("mad.f32", Part(self.op("trunc.f", self.fdiv(*a)), 0, "(neg)"), a[1], a[0])  # a - trunc(a / b) * b
    if op is Ops.SIN: return self.sin(a[0])
    raise TypeError(f"the IR3 renderer has no {op} on floats")

  def sin(self, x: Reg) -> Reg:
    """sin within about an ulp from fused multiply-adds (codegen/sine.py) rather than cat4 sin, whose error, like every
    hardware sine's, is absolute: x = n pi/2 + r, then +-sin r or +-cos r by n mod 4; -0 keeps its sign."""
    n = self.op("rndne.f", self.op("mul.f", x, self.fconst(2 / math.pi)))
    r = x
    for part in HALF_PI: r = self.op("mad.f32", Part(n, 0, "(neg)"), self.fconst(part), r)
    z = self.op("mul.f", r, r)
    def horner(coefficients: tuple[float, ...]) -> Reg:
      acc = self.fconst(coefficients[-1])
      for c in coefficients[-2::-1]: acc = self.op("mad.f32", acc, z, self.fconst(c))
      return acc
    sin_r = self.op("mad.f32", self.op("mul.f", r, z), horner(SIN_POLY), r)
    cos_r = self.op("mad.f32", self.op("mul.f", z, z), horner(COS_POLY), self.op("mad.f32", z, self.fconst(-0.5), self.fconst(1.0)))
    quadrant = self.op("cov.f32s32", n)
    out = self.op("sel.b32", cos_r, self.op("and.b", quadrant, "1"), sin_r)
    out = self.op("sel.b32", self.op("absneg.f", Part(out, 0, "(neg)")), self.op("and.b", quadrant, "2"), out)
    return self.op("sel.b32", x, self.op("cmps.f.eq", x, self.fconst(0.0)), out)

  def fdiv(self, a: Reg, b: Reg) -> Reg:
    """a * rcp(b), refined by one step on the fused residual a - b * q (nearly always the rounded quotient); where the
    step gives NaN (b or the quotient infinite or 0) the plain product stands."""
    r = self.op("rcp", b)
    q = self.op("mul.f", a, r)
    better = self.op("mad.f32", self.op("mad.f32", Part(b, 0, "(neg)"), q, a), r, q)
    return self.op("sel.b32", q, self.op("cmps.f.ne", better, better), better)

  def int_alu(self, op: Ops, dt: DType, u: UOp, lane: int) -> Reg:
    unsigned = dtypes.is_unsigned(dt)
    a = [self.src(s, lane, imm=i > 0 and op not in (Ops.WHERE, Ops.MULACC, Ops.IDIV, Ops.MOD)) for i, s in enumerate(u.src)]
    if op is Ops.WHERE: return self.op("sel.b32", a[1], a[0], a[2])
    if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ):
      return self.op(f"cmps.{'u' if unsigned else 's'}.{({Ops.CMPLT: 'lt', Ops.CMPNE: 'ne', Ops.CMPEQ: 'eq'})[op]}", *a)
    if op is Ops.MAX: return self.op("max.u" if unsigned else "max.s", *a)
    if op is Ops.TRUNC: return a[0]
    if op in (Ops.AND, Ops.OR, Ops.XOR): return self.op({Ops.AND: "and.b", Ops.OR: "or.b", Ops.XOR: "xor.b"}[op], *a)
    if op in (Ops.SHL, Ops.SHR):
      amount = str(int(a[1]) & (8 * dt.itemsize - 1)) if isinstance(a[1], str) else self.op("and.b", a[1], str(8 * dt.itemsize - 1))
      return self.wrap(self.op("shl.b" if op is Ops.SHL else "shr.b" if unsigned else "ashr.b", a[0], amount), dt)
    if op is Ops.ADD: out = self.op("add.u", *a)
    elif op is Ops.SUB: out = self.op("sub.u", *a)
    elif op is Ops.NEG: out = self.op("sub.u", self.imm32(0), a[0])
    elif op is Ops.MUL: out = self.mul32(u.src[0], u.src[1], a[0], a[1])
    elif op is Ops.MULACC: out = self.op("add.u", self.mul32(u.src[0], u.src[1], a[0], a[1]), a[2])
    elif op in (Ops.IDIV, Ops.MOD): out = self.divmod(op, u.src[1], a[0], a[1], unsigned)
    else: raise TypeError(f"the IR3 renderer has no {op} on {dt}")
    return self.wrap(out, dt)

  def mul32(self, x: UOp, y: UOp, a: Operand, b: Operand) -> Reg:
    """a * b mod 2^32. ir3's mull.u multiplies only the low 16 bits (nir_opcodes.py umul_low, which ir3_compiler_nir.c
    emits as mull.u; ir3_nir_imul.py builds 32-bit imul from it) and mul.u24 the low 24 bits (nir umul24): operands
    known to fit 24 bits take one mul.u24, others go by 16-bit halves, lo*lo + ((hi*lo + lo*hi) << 16)."""
    if all(0 <= u.vmin and u.vmax < 1 << 24 for u in (x, y)): return self.op("mul.u24", a, b)
    def halves(v: Operand) -> tuple[Operand, Operand]:
      if isinstance(v, str):  # a small immediate
        return tuple(str(h) if h in IMM_RANGE else self.imm32(h) for h in (int(v) & 0xFFFF, (int(v) >> 16) & 0xFFFF))
      return self.op("and.b", v, self.imm32(0xFFFF)), self.op("shr.b", v, "16")
    (alo, ahi), (blo, bhi) = halves(a), halves(b)
    cross = self.op("add.u", self.op("mul.u24", ahi, blo), self.op("mul.u24", alo, bhi))
    return self.op("add.u", self.op("mul.u24", alo, blo), self.op("shl.b", cross, "16"))

  def divmod(self, op: Ops, divisor: UOp, n: Reg, d: Reg, unsigned: bool) -> Reg:
    """Truncating integer division or remainder; x / 0 is x and x % 0 is 0 (the other renderers divide by 1 there)."""
    if divisor.op is Ops.CONST and (k := int(divisor.arg)) > 0 and k & (k - 1) == 0:  # a power of two: shifts
      s = k.bit_length() - 1
      if unsigned: return self.op("shr.b", n, str(s)) if op is Ops.IDIV else self.op("and.b", n, self.imm32(k - 1))
      bias = self.op("shr.b", self.op("ashr.b", n, "31"), str(32 - s)) if s else self.imm32(0)  # rounds negatives toward 0
      q = self.op("ashr.b", self.op("add.u", n, bias), str(s))
      return q if op is Ops.IDIV else self.op("sub.u", n, self.op("shl.b", q, str(s)))
    zero = self.op("cmps.u.eq", d, "0")
    d = self.op("add.u", d, zero)  # 0 -> 1
    if unsigned:
      q, r = self.udivmod(n, d)
      return q if op is Ops.IDIV else r
    neg_n, neg_d = self.op("cmps.s.lt", n, "0"), self.op("cmps.s.lt", d, "0")
    signed = lambda x, negative: self.op("sel.b32", self.op("sub.u", self.imm32(0), x), negative, x)  # -x where negative
    q, r = self.udivmod(signed(n, neg_n), signed(d, neg_d))
    return signed(q, self.op("xor.b", neg_n, neg_d)) if op is Ops.IDIV else signed(r, neg_n)  # r has the dividend's sign

  def udivmod(self, n: Reg, d: Reg) -> tuple[Reg, Reg]:
    """Unsigned 32-bit n / d and n % d (d != 0) without a high multiply (ir3 has none): 1/d by rcp, scaled by 1 - 2^-20
    so that float(x) * rd never reaches x / d (float32 rounding and rcp errors of a few ulps stay below that margin).
    q0 = trunc(n * rd) is then at most ~2^13 short, the remainder n - q0 * d is exact and non-negative, a second
    estimate of it leaves the quotient at most 1 short, and one correction finishes."""
    rd = self.op("mul.f", self.op("rcp", self.op("cov.u32f32", d)), self.imm32(RCP_SCALE))
    def estimate(x: Reg) -> Reg: return self.op("cov.f32u32", self.op("trunc.f", self.op("mul.f", self.op("cov.u32f32", x), rd)))
    product = lambda q: self.mul32(_ANY_U32, _ANY_U32, q, d)
    q = estimate(n)
    r = self.op("sub.u", n, product(q))
    q = self.op("add.u", q, estimate(r))
    r = self.op("sub.u", n, product(q))
    more = self.op("cmps.u.ge", r, d)
    return self.op("add.u", q, more), self.op("sub.u", r, self.op("sel.b32", d, more, self.imm32(0)))

  # ---- conversions ----
  def cast(self, x: Operand, src: DType, dst: DType) -> Reg:
    if not isinstance(x, Reg): x = self.copy(x, src)
    if src == dst: return x
    if dst == dtypes.bfloat16: return self.round_bf16(self.cast(x, src, dtypes.float32))
    if src == dtypes.bfloat16: src = dtypes.float32  # its value, exactly, in a float32 register
    if dst == dtypes.bool:
      if src == dtypes.float16: x, src = self.op("cov.f16f32", x), dtypes.float32
      return self.op("cmps.f.ne", x, self.fconst(0.0)) if dtypes.is_float(src) else self.op("cmps.u.ne", x, "0")  # NaN is true
    if dtypes.is_float(dst):
      if src == dtypes.float16: return self.op("cov.f16f32", x)  # dst is float32
      f = x if src == dtypes.float32 else self.op("cov.u32f32" if dtypes.is_unsigned(src) or src == dtypes.bool else "cov.s32f32", x)
      return self.op("cov.f32f16", f, half=True) if dst == dtypes.float16 else f
    if dtypes.is_float(src): return self.float_to_int(x if src == dtypes.float32 else self.op("cov.f16f32", x), dst)
    return self.wrap(x, dst)  # int -> int: the 32-bit value, cut to dst's width

  def float_to_int(self, f: Reg, dst: DType) -> Reg:
    """Truncation toward zero, saturating at dst's range, NaN -> 0 (the semantics the other renderers give)."""
    lo, hi = dtypes.min(dst), dtypes.max(dst)
    t = self.op("trunc.f", f)
    v = self.op("cov.f32u32" if dst == dtypes.uint32 else "cov.f32s32", t)
    v = self.op("sel.b32", self.imm32(hi), self.op("cmps.f.ge", f, self.fconst(float(hi + 1))), v)
    below = self.op("cmps.f.lt", f, self.fconst(1.0)) if lo == 0 else self.op("cmps.f.le", f, self.fconst(float(lo - 1)))
    v = self.op("sel.b32", self.imm32(lo), below, v)
    return self.op("sel.b32", self.imm32(0), self.op("cmps.f.ne", f, f), v)

  def bitcast(self, x: Operand, src: DType, dst: DType) -> Reg:
    if not isinstance(x, Reg): x = self.copy(x, src)
    if src.itemsize != dst.itemsize or dtypes.bool in (src, dst): raise TypeError(f"the IR3 renderer can't bitcast {src} to {dst}")
    if src == dtypes.bfloat16: x, src = self.op("shr.b", x, "16"), dtypes.uint16  # its bits, as a uint16 value
    if dst == dtypes.bfloat16: return self.op("shl.b", self.bitcast(x, src, dtypes.uint16) if src != dtypes.uint16 else x, "16")
    if src in FP8: src = dtypes.uint8
    if dst in FP8: return self.wrap(x, dtypes.uint8)
    if not dtypes.is_float(src) and not dtypes.is_float(dst): return self.wrap(x, dst)
    if x.half == (dst == dtypes.float16): return x
    if dst == dtypes.float16: return self.op("cov.u32u16", x, half=True)  # the low 16 bits
    return self.wrap(self.op("cov.u16u32", x), dst)  # float16 bits -> int16/uint16

_ANY_U32 = UOp.variable("any_u32", 0, 2**32 - 1, dtypes.uint32)  # an operand mul32 may assume nothing about

def const_name(n: int) -> str: return f"c{n // 4}.{'xyzw'[n % 4]}"

# ---- register allocation ----
def allocate(ins: list[Ins]) -> None:
  """Linear scan over live intervals in program order; a value live into a loop (defined before its label, used in
  it) stays allocated to the loop's back branch. Fixed registers (the ABI's ids) are live from the entry."""
  span: dict[Reg, list[int]] = {}
  labels: dict[str, int] = {}
  loops: list[tuple[int, int]] = []
  for pos, i in enumerate(ins):
    if i.form == "label": labels[i.target] = pos
    if i.form == "br" and i.target in labels: loops.append((labels[i.target], pos))
    for o in i.dsts + i.srcs:
      for r in _regs(o):
        s = span.setdefault(r, [pos, pos] if r.fixed is None else [-1, pos])
        s[1] = max(s[1], pos)
  changed = True
  while changed:
    changed = False
    for start, end in loops:
      for s in span.values():
        if s[0] < start <= s[1] < end: s[1], changed = end, True
  free = {False: [True] * COMPONENTS, True: [True] * COMPONENTS}
  active: list[tuple[int, Reg]] = []
  for r, (start, end) in sorted(span.items(), key=lambda kv: (kv[1][0], kv[0].fixed is None)):
    for e, a in [x for x in active if x[0] < start]:
      active.remove((e, a))
      for _, c in a.comps(): free[a.half][c] = True
    if r.fixed is None:
      comps = free[r.half]
      r.phys = next((c for c in range(0, COMPONENTS - r.size + 1, r.size) if all(comps[c:c + r.size])), None)
      if r.phys is None: raise RuntimeError(f"the kernel needs more than the {NUM_REGS} {'half' if r.half else 'full'} registers the IR3 renderer allocates (it doesn't spill)")
    for _, c in r.comps(): free[r.half][c] = False
    active.append((end, r))

# ---- sync flags and delay slots (ir3_legalize.c) ----
class _State:
  def __init__(self):
    self.cycle = 0
    self.ss: set = set(); self.sy: set = set(); self.war: set = set()
    self.alu: dict = {}; self.other: dict = {}  # (half, comp) -> cycle its value is ready for ALU / other readers
    self.pred = 0
  def snapshot(self) -> tuple:  # ready cycles relative to now, for a branch target
    rel = lambda d: {k: v - self.cycle for k, v in d.items() if v > self.cycle}
    return (set(self.ss), set(self.sy), set(self.war), rel(self.alu), rel(self.other), max(self.pred - self.cycle, 0))
  def merge(self, snap: tuple) -> None:
    ss, sy, war, alu, other, pred = snap
    self.ss |= ss; self.sy |= sy; self.war |= war
    for mine, theirs in ((self.alu, alu), (self.other, other)):
      for k, v in theirs.items(): mine[k] = max(mine.get(k, 0), self.cycle + v)
    self.pred = max(self.pred, self.cycle + pred)

def _is_alu(i: Ins) -> bool: return 1 <= i.cat <= 3

def legalize(ins: list[Ins]) -> list[str]:
  """The instruction lines with (sy)/(ss)/(jp), (nopN) and nops; forward branches carry their state to the label,
  backward branches wait for everything outstanding, so a loop's head sees only the state falling into it."""
  st, out, pending = _State(), [], {}
  targets = {i.target for i in ins if i.form == "br"}
  seen: set[str] = set()
  last: Ins | None = None
  jp = False
  def add(i: Ins) -> None:
    nonlocal last, jp
    if jp: i.flags, jp = "(jp)" + i.flags, False
    out.append(i)
    last = i
  def sync(i: Ins, kind: str) -> None:
    if kind == "ss": st.ss.clear(); st.war.clear()
    else: st.sy.clear()
    if kind not in i.flags: i.flags += f"({kind})"
  def wait(cycles: int) -> None:
    nonlocal last
    if cycles <= 0: return
    if last is not None and last.cat in (2, 3) and last.rpt == 0:  # ir3_legalize.c: a cat2/cat3 encodes up to 3 nops
      n = min(cycles, 3 - last.nop)
      last.nop += n; st.cycle += n; cycles -= n
    if cycles > 0 and last is not None and last.name == "nop" and last.form == "bare":
      n = min(cycles, 5 - last.rpt)
      last.rpt += n; st.cycle += n; cycles -= n
    while cycles > 0:
      add(nop := Ins("nop", form="bare", rpt=min(cycles, 6) - 1))
      st.cycle += nop.rpt + 1; cycles -= nop.rpt + 1
  for i in ins:
    if i.form == "label":
      if i.target not in targets: continue  # a loop's exit that nothing skips to
      if i.target in pending: st.merge(pending.pop(i.target))
      seen.add(i.target)
      jp = True
      out.append(i)
      last = None  # a new block: nops go after the label, where every path into it passes
      continue
    i.flags = ""
    reads = [c for o in i.srcs for c in _comps(o)]
    writes = [c for o in i.dsts for c in _comps(o)]
    if last is not None and last.cat == 7: sync(i, "ss"); sync(i, "sy")  # ir3_legalize.c legalize_block: is_barrier(last_n)
    if any(c in st.ss for c in reads + writes) or any(c in st.war for c in writes): sync(i, "ss")
    if any(c in st.sy for c in reads + writes): sync(i, "sy")
    backward = i.form == "br" and i.target in seen
    if backward:  # nothing may be outstanding on the back edge
      if st.ss or st.war: sync(i, "ss")
      if st.sy: sync(i, "sy")
    if "(ss)" in i.flags and i.cat >= 5:  # ir3.h supports_ss: cat5+ has no (ss) bit, a nop carries it
      i.flags = i.flags.replace("(ss)", "")
      add(Ins("nop", form="bare", flags="(ss)"))
      st.cycle += 1
    ready = st.alu if _is_alu(i) else st.other
    delay = 0
    if i.name != "end":
      for n, o in enumerate(i.srcs):
        late = 2 if i.name.startswith("mad.") and n == 2 else 0  # ir3_delay.c ir3_src_read_delay: mad's third source
        for c in _comps(o): delay = max(delay, ready.get(c, 0) - (st.cycle + late))
      if "p0.x" in i.srcs: delay = max(delay, st.pred - st.cycle)
      if backward: delay = max([delay, st.pred - st.cycle] + [v - st.cycle for v in st.other.values()])
    wait(delay)
    add(i)
    if i.cat == 4: st.ss.update(writes)
    if i.form == "ldl": st.ss.update(writes)
    if i.form in ("ldg", "isam"): st.sy.update(writes)
    if i.cat in (4, 5, 6): st.war.update(reads)  # ir3.h is_war_hazard_producer: reads its sources late
    if _is_alu(i) or (i.cat == 0 and i.name != "br"): st.cycle += 1  # ir3_legalize.c count_instruction
    for half, c in writes:
      if not _is_alu(i):  # ir3_legalize.c delay_update: (ss)/(sy) producers need no nops
        for d in (st.alu, st.other): d.pop((half, c), None)
        continue
      st.alu[(half, c)] = max(st.alu.get((half, c), 0), st.cycle + ALU_TO_ALU)
      st.other[(half, c)] = max(st.other.get((half, c), 0), st.cycle + ALU_TO_OTHER)
      for alias in ([(True, 2 * c), (True, 2 * c + 1)] if not half else [(False, c // 2)]):  # delay_update: other size 6
        for d in (st.alu, st.other): d[alias] = max(d.get(alias, 0), st.cycle + ALU_TO_OTHER)
    if "p0.x" in i.dsts: st.pred = st.cycle + ALU_TO_OTHER
    if i.form == "br" and not backward: pending[i.target] = _merged(pending.get(i.target), st.snapshot())
    st.cycle += i.nop + i.rpt
  return [f"{i.target}:" if i.form == "label" else i.text() for i in out]

def _merged(a: tuple | None, b: tuple) -> tuple:
  if a is None: return b
  maxd = lambda x, y: {k: max(x.get(k, 0), y.get(k, 0)) for k in x.keys() | y.keys()}
  return (a[0] | b[0], a[1] | b[1], a[2] | b[2], maxd(a[3], b[3]), maxd(a[4], b[4]), max(a[5], b[5]))
