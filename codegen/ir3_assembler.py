"""Adreno ir3 assembler: assembly text -> 64-bit little-endian instruction words for a6xx (gen 6) and a7xx (gen 7).

This docstring is the authoritative description of the accepted syntax: codegen/ir3.py writes it, the ISA model in
drivers/mock/qcom/ decodes what comes out. The syntax is Mesa's disassembly (src/freedreno/ir3/tests/disasm.c, the
`display` templates of src/freedreno/isa/ir3-*.xml) restricted to the subset below. Bit layouts come from Mesa's ISA
XML, cited at each table. Within this subset gen 6 and gen 7 encode identically (the forms that differ, ldg.a/stg.a,
are not accepted; isam and stib.b below have no gen bound in ir3-cat5.xml / ir3-cat6.xml below 800).

Vendor facts a user of this syntax must know
- There is no s8 type: the type field holds f16 f32 u16 u32 s16 s32 u8 u8_32 (src/freedreno/ir3/instr-a3xx.h type_t,
  ir3-common.xml <enum name="#type">). `s8` is rejected; sign-extend a u8 with shl.b/ashr.b.
- There is no mulh.u/mulh.s (ir3-cat2.xml has no such bitset; instr-a3xx.h has no OPC_MULH); they are rejected.
- cat5 (isam) and cat6 (ldg/stg/ldl/stl/stib.b) have no (ss) bit (ir3-cat5.xml <bitset name="#instruction-cat5">,
  ir3-cat6.xml <bitset name="#instruction-cat6">): put (ss) on an instruction before them (e.g. a `(ss)nop`).
- A 2-D isam reads exactly two coordinate registers (x, y) and no LOD: Mesa's compiler collects the image's two
  coordinates for a 2-D image load (ir3_compiler_nir.c emit_intrinsic_load_image) and leaves .3d (bit 48) and .a
  (bit 49) clear. isam's bit 18 is ir3-cat5.xml's inverted "1D" flag: `isam` here is Mesa's text for the word with it
  set; Mesa's own compiler leaves it clear for image loads (printed `isam.1d`), a spelling not accepted here.

Program text
- One statement per line; `;` starts a comment; blank lines are ignored; case matters (all lower case).
- `name:` defines a label (name = [A-Za-z_.$][A-Za-z0-9_.$]*) at the next instruction; an instruction may follow on the
  same line. A label is defined once.
- `@shared N`: N bytes of workgroup-local memory (decimal or 0x hex), at most once; assemble() ignores it,
  assemble_program() reports it.
- `@texture T B HxW F` and `@ibo U B HxW F` (decimal): the kernel's texture t#T / IBO slot U is the H-row, W-pixel RGBA
  image of channel type F (f32 or f16) in its buffer parameter B (the kernel's DEFINE_GLOBAL number); each slot at
  most once. assemble_program() reports them for the driver, which builds the descriptors. Any other `@` directive is
  an error.
- Instruction: PREFIXES MNEMONIC OPERANDS. Prefixes are parenthesised words before the mnemonic, in any order, each at
  most once, with or without spaces between them (Mesa prints `(sy)mul.f ...`, `(nop3) cmps.f.lt ...`):
  (sy) (ss) (jp) on every instruction except (ss) on cat5 and cat6; (rptN), N = 1..5, on nop only; (nopN), N = 1..3, on
  cat2 and cat3 only (delay slots after the instruction).
- Operands are separated by commas. Spaces inside an operand are not allowed.

Operands
- rN.c: full GPR, N = 0..47, c = x y z w (regid N*4+c). hrN.c: half GPR, same numbering, a separate file (the driver
  sets MERGEDREGS = 0). r48 and above are special registers and are rejected.
- cN.c: const, N = 0..511 (9-bit field, ir3-common.xml <bitset name="#reg-const">). When the instruction's sources are
  half precision the const is written hcN.c (same slot). Consts are sources only.
- p0.c: predicate, only as a cat2 destination and the br condition.
- Immediates (decimal `12`, `-3` or hex `0x1f`; "raw" below means the bit pattern):
  * cat1 (mov/cov), by source type: integer types take a bare integer in [-2^(b-1), 2^b) for b = 8/16/32 bits, stored
    modulo 2^b (`mov.s16s16 hr1.y, -1`); f32 takes `(1.000000)` (any Python float literal in parentheses, rounded to
    the nearest f32) or a bare integer as raw bits (`0x3f800000`, same range rule as u32); f16 takes `h(0.500000)` or a
    bare integer as raw bits (range rule of u16). Mesa prints u32 values above 0x1000 in hex; both spellings assemble.
  * cat2 non-float ops: a signed 11-bit integer -1024..1023 (ir3-common.xml <bitset name="#mulitsrc-immed">), written
    `N` in full-precision instructions and `h(N)` in half-precision ones (`and.b p0.x, hr2.y, h(1)`).
  * cat2 float ops (*.f) and cat4: only the 12 lookup-table constants (<bitset name="#mulitsrc-immed-flut">), spelled
    exactly (0.0) (0.5) (1.0) (2.0) (e) (pi) (1/pi) (1/log2(e)) (log2(e)) (1/log2(10)) (log2(10)) (4.0), with an h
    prefix in half-precision instructions: `h(0.5)`.
  * cat3 has no immediates on gen 6/7 (the immediate forms of ir3-cat3.xml are gen >= 800). cat6 offsets and
    component counts are plain integers (below).
- Source modifiers, written before the operand: (neg) (abs) (absneg) on cat2 float ops (*.f), absneg.s and cat4;
  (neg) alone on mad.f16/mad.f32 sources. Nowhere else.
- Precision: in cat2/cat3/cat4 all sources must have the same precision (h on every register, const and immediate, or
  on none); the destination may differ (the DST_CONV bit widens/narrows). A p0.c destination has no precision.

Instructions (and which operand positions may be a const (c) or an immediate (i); r = register)
- cat0: `nop`, `end`, `jump #T`, `br p0.c, #T`, `br !p0.c, #T` (`!` branches when p0.c is false). #T is `#label` or
  `#N`, N = target index - this instruction's index (in instructions, as Mesa prints: target = pc + N).
- cat1: `mov.<s><d> dst, src` (s == d) and `cov.<s><d> dst, src` (s != d) for s, d in f32 f16 u32 s32 u16 s16 u8;
  dst is a GPR, half (hr) iff d is f16/u16/s16/u8; src is r/c/i, a register or const is half iff s is half.
- cat2, `op dst, src1[, src2]`, dst rN.c/hrN.c/p0.c, each src r/c/i:
  two sources: add.f mul.f min.f max.f add.u add.s sub.u sub.s min.u max.u min.s max.s and.b or.b xor.b shl.b shr.b
  ashr.b mul.u24 mul.s24 mull.u, cmps.f.<cond> cmps.u.<cond> cmps.s.<cond> with cond in lt le gt ge eq ne;
  one source: absneg.f floor.f ceil.f rndne.f trunc.f sign.f absneg.s not.b bfrev.b cbits.b clz.b.
- cat3, `op dst, src1, src2, src3`: mad.f32 mad.f16 mad.u24 mad.s24 (dst = src1 * src2 + src3), sel.b32 sel.b16 sel.f32
  sel.f16. src1 and src3 may be r or c, src2 must be a register. Sources are half for mad.f16, sel.b16, sel.f16.
  `sel.b32 dst, a, cond, b` writes `cond != 0 ? a : b`: the condition is the MIDDLE operand (Mesa's compiler emits
  nir bcsel(c, a, b) as ir3_SEL_B32(a, c, b), src/freedreno/ir3/ir3_compiler_nir.c); the .f forms take the same order.
- cat4, `op dst, src`: rcp rsq log2 exp2 sin cos sqrt; src r/c/i (full or half).
- cat6, t in f32 u32 s32 f16 u16 s16 u8; the value register is half (hr) iff t is f16/u16/s16/u8; N = 1..4 components
  (consecutive registers from the one named); OFF is an optional signed 13-bit byte offset -4096..4095 written `+OFF` or
  `-OFF`; A is a full register (global: the 64-bit address is the pair A, A+1 by regid, low word first; local: a
  32-bit byte address). No const or immediate operands.
  `ldg.t dst, g[A+OFF], N`   `stg.t g[A+OFF], src, N`   `ldl.t dst, l[A+OFF], N`   `stl.t l[A+OFF], src, N`
  (Mesa prints ldl/stl registers without the h of half types; here the h is required, as for ldg/stg.)
- cat5, texture fetch (ir3-cat5.xml "isam", normal non-bindless form):
  `isam (f32)(xyzw)rD.c, rC.c, s#S, t#T` or `isam (f16)(xyzw)hrD.c, rC.c, s#S, t#T`: writes the four components of
  the texel at integer coordinate (rC.c, the register after it) of texture T (0..127) with sampler S (0..15) to four
  consecutive registers from rD.c, as f32 or (f16) half values. rC.c is a full register; (xyzw) is the only writemask.
- cat6, image store (ir3-cat6.xml "stib.b", a6xx IBO encoding, non-bindless with an immediate IBO slot):
  `stib.b.typed.2d.f32.4.imm rV.c, rC.c, N`: stores the four f32 values in rV.c and the three registers after it to
  the texel at integer coordinate (rC.c, the register after it) of IBO N (0..255), converted to the IBO's format. Both
  registers are full; no other stib.b form is accepted.
- cat7: `bar` and `fence`, each optionally followed by the scope suffixes .g .l .r .w, each at most once, in any order
  (Mesa prints them in the order g l r w: `(sy)bar.g`, `fence.g.l.r.w`).

Cross-checks for the decoder: in cat6 stores bit 44 is part of the address register field (stg SRC1 / stl DST,
bits 41-48), not (ss): Mesa's `stl.f32 l[r2.w+16], r0.x, 4` is c1021710_04800000, bit 44 set.
"""
from __future__ import annotations
import re, struct
from dataclasses import dataclass
from codegen.compiler import CompileError

MAX_GPR, MAX_CONST = 47, 511  # r0..r47 are the general registers; the const field holds c0..c511
P0_GPR = 62  # ir3-common.xml <expr name="#reg-gpr-p0">: p0.c is encoded as GPR 62

class _Err(Exception): """An error in one line; the caller adds the line number and text."""

# ---- bit layouts: name -> (low, high) -------------------------------------------------------------------------------
def _layout(**fields) -> dict[str, tuple[int, int]]: return {k: (v, v) if isinstance(v, int) else v for k, v in fields.items()}
_SYNC = dict(jp=59, sy=60, cat=(61, 63))
# src/freedreno/isa/ir3-cat0.xml <bitset name="#instruction-cat0"> and "#instruction-cat0-branch-1src" (INV1, COMP1)
CAT0 = _layout(immed=(0, 31), brtype=(37, 39), repeat=(40, 42), ss=44, inv1=52, comp1=(53, 54), opc=(55, 58), **_SYNC)
# src/freedreno/isa/ir3-cat1.xml <bitset name="#instruction-cat1-mov">; src_kind = bits 53-54 of mov-gpr/-const/-immed
CAT1 = _layout(src=(0, 31), dst=(32, 39), ss=44, dst_type=(46, 48), src_type=(50, 52), src_kind=(53, 54), opc=(57, 58), **_SYNC)
# src/freedreno/isa/ir3-cat2.xml <bitset name="#instruction-cat2">
CAT2 = _layout(src1=(0, 15), src2=(16, 31), dst=(32, 39), src1_r=43, ss=44, dst_conv=46, cond=(48, 50), src2_r=51, full=52,
               opc=(53, 58), **_SYNC)
# src/freedreno/isa/ir3-cat3.xml <bitset name="#instruction-cat3-base"> and "#instruction-cat3" (bit 13 = 0)
CAT3 = _layout(src1=(0, 12), src1_neg=14, src2_r=15, src3=(16, 28), src2_neg=30, src3_neg=31, dst=(32, 39), src1_r=43, ss=44,
               dst_conv=46, src2=(47, 54), opc=(55, 58), **_SYNC)
# src/freedreno/isa/ir3-cat4.xml <bitset name="#instruction-cat4">
CAT4 = _layout(src=(0, 15), dst=(32, 39), ss=44, dst_conv=46, full=52, opc=(53, 58), **_SYNC)
# src/freedreno/isa/ir3-cat6.xml <bitset name="#instruction-cat6-ldg"> + "ldg" (bit 0 = 1, bit 22 = 0: immediate offset)
LDG = _layout(one=0, off=(1, 13), addr=(14, 21), size_imm=23, size=(24, 26), dst=(32, 39), type=(49, 51), opc=(54, 58), **_SYNC)
# src/freedreno/isa/ir3-cat6.xml <bitset name="#instruction-cat6-stg"> + "stg" (DST_OFF bit 40 forced 1, bit 52 = 0)
STG = _layout(src=(1, 8), off_hi=(9, 13), b23=23, size=(24, 26), off_lo=(32, 39), dst_off=40, addr=(41, 48), type=(49, 51),
              opc=(54, 58), **_SYNC)
# src/freedreno/isa/ir3-cat6.xml <bitset name="#instruction-cat6-a3xx-ld"> (ldl: OPC 00001)
LDL = _layout(one=0, off=(1, 13), addr=(14, 21), b23=23, size=(24, 31), dst=(32, 39), type=(49, 51), opc=(54, 58), **_SYNC)
# src/freedreno/isa/ir3-cat6.xml <bitset name="#instruction-cat6-a3xx-st"> (stl: OPC 00100)
STL = _layout(src=(1, 8), off_hi=(9, 13), b23=23, size=(24, 31), off_lo=(32, 39), b40=40, addr=(41, 48), type=(49, 51),
              opc=(54, 58), **_SYNC)
# src/freedreno/isa/ir3-cat5.xml <bitset name="#instruction-cat5"> + "isam" (OPC 00000 at 54-58; "1D" bit 18, bool_inv)
CAT5 = _layout(full=0, src1=(1, 8), inv_1d=18, samp=(21, 24), tex=(25, 31), dst=(32, 39), wrmask=(40, 43), type=(44, 46),
               opc=(54, 58), **_SYNC)
# src/freedreno/isa/ir3-cat6.xml "#instruction-cat6-a6xx-base" / "-ibo-base" / "-ibo-load-store" + "stib.b"
# (bit 0 = 0, OPC 011101 at 14-19, 110 at 20-22, 10 at 52-53; BINDLESS 8, MODE 6-7 and HAS_OFFSET 23 left 0)
STIB = _layout(d_minus_one=(9, 10), typed=11, size_minus_one=(12, 13), opc=(14, 19), b20=(20, 22), coord=(24, 31),
               value=(32, 39), ssbo=(41, 48), type=(49, 51), b52=(52, 53), **_SYNC)
STIB_FORM = "stib.b.typed.2d.f32.4.imm"
# src/freedreno/isa/ir3-cat7.xml <bitset name="#instruction-cat7-barrier"> (bit 49 = 1)
CAT7 = _layout(ss=44, b49=49, w=51, r=52, l=53, g=54, opc=(55, 58), **_SYNC)

# ---- opcode tables ---------------------------------------------------------------------------------------------------
# src/freedreno/isa/ir3-cat0.xml <bitset name="nop|end|jump|br"> OPC bits 55-58
CAT0_OPC = {"nop": 0, "br": 1, "jump": 2, "end": 6}
# src/freedreno/isa/ir3-common.xml <enum name="#type"> (7 = u8_32, not accepted)
TYPES = {"f16": 0, "f32": 1, "u16": 2, "u32": 3, "s16": 4, "s32": 5, "u8": 6}
HALF_TYPES = {"f16", "u16", "s16", "u8"}  # ir3-common.xml <expr name="#type-half">
TYPE_BITS = {"f16": 16, "f32": 32, "u16": 16, "u32": 32, "s16": 16, "s32": 32, "u8": 8}
# src/freedreno/isa/ir3-cat2.xml <bitset name=...> OPC bits 53-58
CAT2_OPC = {"add.f": 0, "min.f": 1, "max.f": 2, "mul.f": 3, "sign.f": 4, "cmps.f": 5, "absneg.f": 6, "floor.f": 9, "ceil.f": 10,
            "rndne.f": 11, "trunc.f": 13, "add.u": 16, "add.s": 17, "sub.u": 18, "sub.s": 19, "cmps.u": 20, "cmps.s": 21,
            "min.u": 22, "min.s": 23, "max.u": 24, "max.s": 25, "absneg.s": 26, "and.b": 28, "or.b": 29, "not.b": 30,
            "xor.b": 31, "mul.u24": 48, "mul.s24": 49, "mull.u": 50, "bfrev.b": 51, "clz.b": 53, "shl.b": 54, "shr.b": 55,
            "ashr.b": 56, "cbits.b": 61}
# ir3-cat2.xml: these extend "#instruction-cat2-1src"
CAT2_ONE_SRC = {"sign.f", "absneg.f", "floor.f", "ceil.f", "rndne.f", "trunc.f", "absneg.s", "not.b", "bfrev.b", "clz.b", "cbits.b"}
CAT2_COND = {"cmps.f", "cmps.u", "cmps.s"}
COND = {"lt": 0, "le": 1, "gt": 2, "ge": 3, "eq": 4, "ne": 5}  # ir3-common.xml <enum name="#cond">
# ir3-common.xml <enum name="#flut"> (int -> float lookup table of cat2/cat4 immediates)
FLUT = {"0.0": 0, "0.5": 1, "1.0": 2, "2.0": 3, "e": 4, "pi": 5, "1/pi": 6, "1/log2(e)": 7, "log2(e)": 8, "1/log2(10)": 9,
        "log2(10)": 10, "4.0": 11}
ABSNEG = {"neg": 1, "abs": 2, "absneg": 3}  # ir3-common.xml <enum name="#absneg">
# src/freedreno/isa/ir3-cat3.xml OPC bits 55-58; value: are the sources half (the bitset's derived FULL is false)
CAT3_OPC = {"mad.u24": (4, False), "mad.s24": (5, False), "mad.f16": (6, True), "mad.f32": (7, False), "sel.b16": (8, True),
            "sel.b32": (9, False), "sel.f16": (12, True), "sel.f32": (13, False)}
# src/freedreno/isa/ir3-cat4.xml OPC bits 53-58
CAT4_OPC = {"rcp": 0, "rsq": 1, "log2": 2, "exp2": 3, "sin": 4, "cos": 5, "sqrt": 6}
# src/freedreno/isa/ir3-cat6.xml <bitset name="ldg|ldl|stg|stl"> OPC bits 54-58
CAT6_OPC = {"ldg": 0, "ldl": 1, "stg": 3, "stl": 4}
CAT7_OPC = {"bar": 0, "fence": 1}  # src/freedreno/isa/ir3-cat7.xml <bitset name="bar|fence"> OPC bits 55-58

def _pack(layout: dict[str, tuple[int, int]], **fields: int) -> int:
  word = 0
  for name, value in fields.items():
    low, high = layout[name]
    if not 0 <= value < 1 << (high - low + 1): raise _Err(f"{name} = {value} does not fit bits {low}..{high}")
    word |= value << low
  return word

# ---- operands --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Operand:
  kind: str        # "r" register, "c" const, "p" predicate, "int" bare integer, "paren" parenthesised immediate
  half: bool = False
  num: int = 0     # regid (N*4 + component) for r/c/p; the value for int
  text: str = ""   # the inside of the parentheses for paren
  mod: int = 0     # ir3-common.xml #absneg: 1 (neg), 2 (abs), 3 (absneg)
  neg_pred: bool = False  # `!p0.c`

_REG = re.compile(r"(h?)([rcp])(\d+)\.([xyzw])")
_INT = re.compile(r"[+-]?(0x[0-9a-fA-F]+|\d+)")
_MOD = re.compile(r"\((neg|abs|absneg)\)")

def _int(text: str) -> int: return int(text, 16 if "x" in text else 10)  # base 10 keeps `08` legal

def parse_operand(text: str) -> Operand:
  mod, inv = 0, False
  if m := _MOD.match(text): mod, text = ABSNEG[m[1]], text[m.end():]
  if text.startswith("!"): inv, text = True, text[1:]
  if m := _REG.fullmatch(text):
    half, kind, n, comp = m[1] == "h", m[2], int(m[3]), "xyzw".index(m[4])
    if kind == "r" and n > MAX_GPR: raise _Err(f"register {text} out of range ({'h' if half else ''}r0..r{MAX_GPR})")
    if kind == "c" and n > MAX_CONST: raise _Err(f"const {text} out of range (c0..c{MAX_CONST})")
    if kind == "p" and (n != 0 or half): raise _Err(f"no predicate register {text} (only p0.x..p0.w)")
    op = Operand(kind, half, (P0_GPR if kind == "p" else n) * 4 + comp, mod=mod, neg_pred=inv)
  elif _INT.fullmatch(text): op = Operand("int", num=_int(text), mod=mod)
  elif m := re.fullmatch(r"(h?)\((.+)\)", text): op = Operand("paren", m[1] == "h", text=m[2], mod=mod)
  else: raise _Err(f"can't parse operand {text!r}")
  if inv and op.kind != "p": raise _Err(f"`!` only negates a predicate, not {text!r}")
  return op

@dataclass(frozen=True)
class ImageBinding:
  """An image a kernel reads as texture t#slot (`ibo` False) or writes as IBO slot (True): buffer parameter `buffer`,
  `height` rows of `width` RGBA pixels of `itemsize`-byte float channels (4: f32, 2: f16)."""
  ibo: bool
  slot: int
  buffer: int
  height: int
  width: int
  itemsize: int

@dataclass(frozen=True)
class Program:
  """Machine code and the footprint it references: *_regs/const_vec4 = highest index used // 4 + 1 (0 if none)."""
  code: bytes
  full_regs: int
  half_regs: int
  const_vec4: int
  shared_bytes: int
  images: tuple[ImageBinding, ...] = ()

class _Footprint:
  def __init__(self): self.top = {"r": -1, "hr": -1, "c": -1}
  def use(self, op: Operand, count: int = 1) -> None:
    if op.kind in ("r", "c"): self.see(("h" if op.half and op.kind == "r" else "") + op.kind, op.num + count - 1)
  def see(self, file: str, regid: int) -> None:
    if file != "c" and regid > MAX_GPR * 4 + 3: raise _Err(f"the registers used run past {file}{MAX_GPR}.w")
    self.top[file] = max(self.top[file], regid)
  def vec4s(self, file: str) -> int: return self.top[file] // 4 + 1

# ---- one instruction ---------------------------------------------------------------------------------------------------
_PREFIX = re.compile(r"\s*\((sy|ss|jp|rpt\d+|nop\d+)\)")

@dataclass
class _Instr:
  index: int
  mnemonic: str
  operands: list[str]
  sy: bool = False
  ss: bool = False
  jp: bool = False
  rpt: int = 0
  nop: int = 0

def _parse_instruction(index: int, text: str) -> _Instr:
  flags, pos = set(), 0
  while m := _PREFIX.match(text, pos):
    if m[1] in flags: raise _Err(f"prefix ({m[1]}) given twice")
    flags.add(m[1]); pos = m.end()
  if (rest := text[pos:].strip()).startswith("("): raise _Err(f"unknown prefix {rest.split(')')[0]})")
  if not (parts := rest.split(None, 1)): raise _Err("prefixes without an instruction")
  ops = [o.strip() for o in parts[1].split(",")] if len(parts) > 1 else []
  if any(not o or " " in o for o in ops): raise _Err("empty operand or space inside an operand")
  ins = _Instr(index, parts[0], ops, "sy" in flags, "ss" in flags, "jp" in flags)
  for f in flags:
    if f.startswith("rpt"):
      if not 1 <= (n := int(f[3:])) <= 5: raise _Err(f"(rpt{n}): N must be 1..5")
      ins.rpt = n
    if f.startswith("nop"):
      if not 1 <= (n := int(f[3:])) <= 3: raise _Err(f"(nop{n}): N must be 1..3")
      ins.nop = n
  return ins

def _count(ins: _Instr, n: int) -> list[str]:
  if len(ins.operands) != n: raise _Err(f"{ins.mnemonic} takes {n} operand{'s' if n != 1 else ''}, got {len(ins.operands)}")
  return ins.operands

def _reg(text: str, what: str, half: bool | None = None, kinds: str = "r") -> Operand:
  op = parse_operand(text)
  if op.kind not in kinds:
    allowed = {"r": "a register", "c": "a const", "p": "p0.c"}
    raise _Err(f"{what} must be {' or '.join(allowed[k] for k in kinds)}, not {text!r}")
  if op.mod: raise _Err(f"no source modifier allowed on {what} {text!r}")
  if half is not None and op.kind != "p" and op.half != half:
    raise _Err(f"{what} {text!r} must be a {'half (h...)' if half else 'full'} {'register' if op.kind == 'r' else 'const'}")
  return op

def _sync(ins: _Instr, ss_ok: bool = True, nop_ok: bool = False, cat: int = 6) -> dict[str, int]:
  """The (sy)/(ss)/(jp) fields, after checking that the instruction takes the prefixes it was given."""
  if ins.ss and not ss_ok: raise _Err(f"cat{cat} instructions have no (ss) bit; put (ss) on an earlier instruction")
  if ins.rpt and ins.mnemonic != "nop": raise _Err("(rptN) is only accepted on nop")
  if ins.nop and not nop_ok: raise _Err("(nopN) is only accepted on cat2/cat3 instructions")
  return dict(sy=int(ins.sy), jp=int(ins.jp)) | (dict(ss=int(ins.ss)) if ss_ok else {})

def _target(text: str, ins: _Instr, labels: dict[str, int]) -> int:
  if not text.startswith("#"): raise _Err(f"branch target must be #label or #N, not {text!r}")
  if _INT.fullmatch(text[1:]): rel = _int(text[1:])
  elif text[1:] in labels: rel = labels[text[1:]] - ins.index
  else: raise _Err(f"undefined label {text[1:]!r}")
  if not -(1 << 31) <= rel < 1 << 31: raise _Err(f"branch offset {rel} does not fit 32 bits")
  return rel & 0xffffffff

def _cat0(ins: _Instr, labels: dict[str, int]) -> int:
  base = dict(opc=CAT0_OPC[ins.mnemonic], **_sync(ins))
  if ins.mnemonic in ("nop", "end"):
    _count(ins, 0)
    return _pack(CAT0, repeat=ins.rpt, **base)
  if ins.mnemonic == "jump": return _pack(CAT0, immed=_target(_count(ins, 1)[0], ins, labels), **base)
  cond, tgt = _count(ins, 2)
  p = _reg(cond, "branch condition", kinds="p")
  return _pack(CAT0, immed=_target(tgt, ins, labels), inv1=int(p.neg_pred), comp1=p.num & 3, **base)

def _cat1_immediate(op: Operand, stype: str) -> int:
  bits = TYPE_BITS[stype]
  if op.kind == "paren":
    if not stype.startswith("f") or op.half != (stype == "f16"):
      raise _Err(f"a parenthesised float is written ({'h' if stype == 'f16' else ''}(x)) and only for f16/f32 sources")
    try: return struct.unpack("<H" if bits == 16 else "<I", struct.pack("<e" if bits == 16 else "<f", float(op.text)))[0]
    except (ValueError, OverflowError): raise _Err(f"({op.text}) is not a float that fits {stype}") from None
  if not -(1 << (bits - 1)) <= op.num < 1 << bits: raise _Err(f"immediate {op.num} does not fit {stype}")
  return op.num & ((1 << bits) - 1)

def _cat1(ins: _Instr, fp: _Footprint) -> int:
  m = re.fullmatch(r"(mov|cov)\.(f16|f32|u16|u32|s16|s32|u8|s8)(f16|f32|u16|u32|s16|s32|u8|s8)", ins.mnemonic)
  if m is None: raise _Err(f"unknown opcode {ins.mnemonic!r}")
  if "s8" in (m[2], m[3]): raise _Err("there is no s8 type in ir3 (types: f16 f32 u16 u32 s16 s32 u8)")
  stype, dtype = m[2], m[3]
  if (m[1] == "mov") != (stype == dtype): raise _Err("mov takes equal source and destination types, cov different ones")
  dtext, stext = _count(ins, 2)
  dst = _reg(dtext, "destination", dtype in HALF_TYPES)
  src = parse_operand(stext)
  if src.mod: raise _Err("cat1 sources take no modifiers")
  if src.kind in "rc":
    src = _reg(stext, "source", stype in HALF_TYPES, "rc")
    value, kind = src.num, 0 if src.kind == "r" else 1  # ir3-cat1.xml mov-gpr (00) / mov-const (01)
  elif src.kind in ("int", "paren"): value, kind = _cat1_immediate(src, stype), 2  # mov-immed (10)
  else: raise _Err(f"cat1 source can't be {stext!r}")
  fp.use(dst); fp.use(src)
  return _pack(CAT1, src=value, dst=dst.num, dst_type=TYPES[dtype], src_type=TYPES[stype], src_kind=kind, opc=0, cat=1,
               **_sync(ins))

def _multisrc(op: Operand, half: bool, float_op: bool, mods_ok: bool, text: str) -> int:
  """The 16-bit cat2/cat4 source (ir3-common.xml <bitset name="#multisrc"> and its gpr/const/immed/flut forms)."""
  if op.mod and not mods_ok: raise _Err(f"source modifiers are only accepted on float ops and absneg.s, not on {text!r}")
  if op.kind in "rc" and op.half != half: raise _Err(f"source {text!r} differs in precision from the first source")
  if op.kind == "r": return op.num | op.mod << 14                                        # #multisrc-gpr
  if op.kind == "c": return op.num | 0b010 << 11 | op.mod << 14                          # #multisrc-const
  if op.kind == "paren" and float_op:
    if op.half != half: raise _Err(f"immediate {text!r} differs in precision from the instruction (h(...) for half)")
    if op.text not in FLUT: raise _Err(f"float immediate ({op.text}) is not one of the lookup-table values {list(FLUT)}")
    return FLUT[op.text] | int(half) << 10 | 0b101 << 11 | op.mod << 14                  # #mulitsrc-immed-flut
  if float_op: raise _Err(f"float ops take only lookup-table immediates like (1.0), not {text!r}")
  if op.kind == "paren":
    if not op.half or not _INT.fullmatch(op.text): raise _Err(f"can't use {text!r} as an integer immediate (N or h(N))")
    op = Operand("int", True, _int(op.text), mod=op.mod)
  elif op.kind == "int" and half: raise _Err(f"half-precision integer immediates are written h({op.num})")
  if op.kind != "int": raise _Err(f"source can't be {text!r}")
  if not -1024 <= op.num <= 1023: raise _Err(f"immediate {op.num} does not fit the signed 11-bit field (-1024..1023)")
  return (op.num & 0x7ff) | 0b100 << 11 | op.mod << 14                                   # #mulitsrc-immed

def _src_half(op: Operand) -> bool: return op.half if op.kind in ("r", "c", "paren") else False

def _dst_conv(dst: Operand, src_half: bool) -> int: return 0 if dst.kind == "p" else int(dst.half != src_half)

def _cat2(ins: _Instr, fp: _Footprint) -> int:
  name, cond = ins.mnemonic, None
  if name.rsplit(".", 1)[0] in CAT2_COND: name, cond = name.rsplit(".", 1)
  if name not in CAT2_OPC or (name in CAT2_COND) != (cond is not None):
    raise _Err(f"unknown opcode {ins.mnemonic!r}" if name not in CAT2_COND else f"{name} needs a condition .lt .le .gt .ge .eq .ne")
  if cond not in COND and cond is not None: raise _Err(f"unknown condition .{cond}")
  ops = _count(ins, 2 if name in CAT2_ONE_SRC else 3)
  float_op = name.endswith(".f")
  mods_ok = float_op or name == "absneg.s"  # (neg)/(abs) mean float or integer negate/abs only there
  dst = _reg(ops[0], "destination", kinds="rp")
  srcs = [parse_operand(t) for t in ops[1:]]
  half = _src_half(srcs[0])
  enc = [_multisrc(s, half, float_op, mods_ok, t) for s, t in zip(srcs, ops[1:])]
  fp.use(dst); [fp.use(s) for s in srcs]
  nop = dict(src1_r=ins.nop & 1, src2_r=ins.nop >> 1)  # ir3-common.xml <expr name="#cat2-cat3-nop-value">
  return _pack(CAT2, src1=enc[0], src2=enc[1] if len(enc) > 1 else 0, dst=dst.num, dst_conv=_dst_conv(dst, half),
               cond=COND[cond] if cond else 0, full=int(not half), opc=CAT2_OPC[name], cat=2, **nop, **_sync(ins, nop_ok=True))

def _cat3(ins: _Instr, fp: _Footprint) -> int:
  opc, half = CAT3_OPC[ins.mnemonic]
  dtext, *stexts = _count(ins, 4)
  dst = _reg(dtext, "destination")
  srcs = [parse_operand(t) for t in stexts]
  for i, (s, t) in enumerate(zip(srcs, stexts)):
    if s.kind not in ("rc" if i != 1 else "r"):  # ir3-cat3.xml: SRC2 is a plain "#reg-gpr"
      raise _Err(f"cat3 source {i + 1} must be a register{' or const' if i != 1 else ''}, not {t!r}")
    if s.half != half: raise _Err(f"{ins.mnemonic} sources are {'half' if half else 'full'} precision: {t!r}")
    if s.mod & 2 or s.mod and not ins.mnemonic.startswith("mad.f"): raise _Err(f"cat3 takes only (neg), and only on mad.f16/mad.f32: {t!r}")
  fp.use(dst); [fp.use(s) for s in srcs]
  enc = [s.num | (0b10 << 11 if s.kind == "c" else 0) for s in srcs]  # ir3-cat3.xml #cat3-src-gpr / -const-or-immed
  return _pack(CAT3, src1=enc[0], src1_neg=srcs[0].mod & 1, src3=enc[2], src2_neg=srcs[1].mod & 1, src3_neg=srcs[2].mod & 1,
               dst=dst.num, dst_conv=int(dst.half != half), src2=enc[1], opc=opc, cat=3, src1_r=ins.nop & 1,
               src2_r=ins.nop >> 1, **_sync(ins, nop_ok=True))

def _cat4(ins: _Instr, fp: _Footprint) -> int:
  dtext, stext = _count(ins, 2)
  dst, src = _reg(dtext, "destination"), parse_operand(stext)
  half = _src_half(src)
  enc = _multisrc(src, half, True, True, stext)
  fp.use(dst); fp.use(src)
  return _pack(CAT4, src=enc, dst=dst.num, dst_conv=int(dst.half != half), full=int(not half), opc=CAT4_OPC[ins.mnemonic], cat=4,
               **_sync(ins))

_ADDR = re.compile(r"([gl])\[(r\d+\.[xyzw])(?:([+-])(\d+|0x[0-9a-fA-F]+))?\]")

def _address(text: str, space: str, fp: _Footprint) -> tuple[Operand, int]:
  if not (m := _ADDR.fullmatch(text)) or m[1] != space: raise _Err(f"expected {space}[rN.c+OFF], not {text!r}")
  reg, off = _reg(m[2], "address"), (_int(m[4]) if m[4] else 0) * (-1 if m[3] == "-" else 1)
  if not -4096 <= off <= 4095: raise _Err(f"offset {off} does not fit the signed 13-bit field (-4096..4095)")
  fp.use(reg, 2 if space == "g" else 1)  # a global address is the 64-bit pair reg, reg+1
  return reg, off & 0x1fff

def _components(text: str) -> int:
  if not _INT.fullmatch(text) or not 1 <= (n := _int(text)) <= 4: raise _Err(f"component count must be 1..4, not {text!r}")
  return n

def _cat6(ins: _Instr, fp: _Footprint) -> int:
  op, _, t = ins.mnemonic.partition(".")
  if t == "s8" or t == "u8_32": raise _Err(f"type {t} is not accepted (types: {' '.join(TYPES)})")
  if t not in TYPES: raise _Err(f"unknown opcode {ins.mnemonic!r}")
  a, b, n = _count(ins, 3)
  size, half, common = _components(n), t in HALF_TYPES, dict(type=TYPES[t], opc=CAT6_OPC[op], cat=6, **_sync(ins, False))
  if op.startswith("ld"):
    dst = _reg(a, "destination", half)
    addr, off = _address(b, "g" if op == "ldg" else "l", fp)
    fp.use(dst, size)
    layout = LDG if op == "ldg" else LDL
    return _pack(layout, one=1, off=off, addr=addr.num, dst=dst.num, size=size, **{"size_imm" if op == "ldg" else "b23": 1}, **common)
  addr, off = _address(a, "g" if op == "stg" else "l", fp)
  src = _reg(b, "source", half)
  fp.use(src, size)
  extra = dict(dst_off=1) if op == "stg" else dict(b40=1)
  return _pack(STG if op == "stg" else STL, src=src.num, off_hi=off >> 8, b23=1, size=size, off_lo=off & 0xff, addr=addr.num,
               **extra, **common)

def _slot(text: str, prefix: str, top: int, what: str) -> int:
  """`s#N` / `t#N` / a bare IBO slot N, checked against its field."""
  if not (m := re.fullmatch(re.escape(prefix) + r"(\d+)", text)) or int(m[1]) > top:
    raise _Err(f"{what} must be {prefix}0..{prefix}{top}, not {text!r}")
  return int(m[1])

def _isam(ins: _Instr, fp: _Footprint) -> int:
  if ins.mnemonic != "isam": raise _Err(f"only plain `isam` is accepted (no .1d .v .3d .a .o or bindless forms), not {ins.mnemonic!r}")
  dtext, ctext, stext, ttext = _count(ins, 4)
  if not (m := re.fullmatch(r"\((\w+)\)\((\w+)\)(\S+)", dtext)) or m[1] not in ("f32", "f16") or m[2] != "xyzw":
    raise _Err(f"isam's destination is written (f32)(xyzw)rN.c or (f16)(xyzw)hrN.c, not {dtext!r}")
  dst, coord = _reg(m[3], "isam destination", m[1] == "f16"), _reg(ctext, "isam coordinate", False)
  fp.use(dst, 4); fp.use(coord, 2)
  samp, tex = _slot(stext, "s#", 15, "the sampler"), _slot(ttext, "t#", 127, "the texture")
  return _pack(CAT5, full=1, src1=coord.num, inv_1d=1, samp=samp, tex=tex, dst=dst.num, wrmask=0xF, type=TYPES[m[1]], opc=0, cat=5,
               **_sync(ins, False, cat=5))

def _stib(ins: _Instr, fp: _Footprint) -> int:
  if ins.mnemonic != STIB_FORM: raise _Err(f"the only stib form accepted is `{STIB_FORM} rV.c, rC.c, N`, not {ins.mnemonic!r}")
  vtext, ctext, ntext = _count(ins, 3)
  value, coord = _reg(vtext, "stib value", False), _reg(ctext, "stib coordinate", False)
  fp.use(value, 4); fp.use(coord, 2)
  return _pack(STIB, d_minus_one=1, typed=1, size_minus_one=3, opc=0b011101, b20=0b110, coord=coord.num, value=value.num,
               ssbo=_slot(ntext, "", 255, "the IBO slot"), type=TYPES["f32"], b52=0b10, cat=6, **_sync(ins, False))

def _cat7(ins: _Instr) -> int:
  op, *scopes = ins.mnemonic.split(".")
  if len(set(scopes)) != len(scopes) or not set(scopes) <= {"g", "l", "r", "w"}:
    raise _Err(f"{op} takes the scope suffixes .g .l .r .w, not {ins.mnemonic!r}")
  _count(ins, 0)
  return _pack(CAT7, b49=1, opc=CAT7_OPC[op], cat=7, **{s: 1 for s in scopes}, **_sync(ins))

def _encode(ins: _Instr, labels: dict[str, int], fp: _Footprint) -> int:
  m = ins.mnemonic
  if m in CAT0_OPC: return _cat0(ins, labels)
  if m.startswith(("mov.", "cov.")): return _cat1(ins, fp)
  if m in CAT3_OPC: return _cat3(ins, fp)
  if m in CAT4_OPC: return _cat4(ins, fp)
  if m.split(".")[0] == "isam": return _isam(ins, fp)
  if m.split(".")[0] == "stib": return _stib(ins, fp)
  if m.split(".")[0] in CAT6_OPC: return _cat6(ins, fp)
  if m.split(".")[0] in CAT7_OPC: return _cat7(ins)
  if m in CAT2_OPC or m.rsplit(".", 1)[0] in CAT2_COND: return _cat2(ins, fp)
  raise _Err(f"unknown opcode {m!r}")

# ---- the program -----------------------------------------------------------------------------------------------------
_LABEL = re.compile(r"\s*([A-Za-z_.$][A-Za-z0-9_.$]*):")

def assemble_program(text: str, gen: int) -> Program:
  """Assemble `text` for generation `gen` (6 = a6xx, 7 = a7xx); raises CompileError naming the line and its text."""
  if gen not in (6, 7): raise ValueError(f"ir3 generation must be 6 (a6xx) or 7 (a7xx), not {gen!r}")
  labels: dict[str, int] = {}
  instrs: list[tuple[int, str, _Instr]] = []
  shared, images = None, {}
  for lineno, line in enumerate(text.splitlines(), 1):
    body = line.split(";", 1)[0]
    try:
      if body.strip().startswith("@"):
        words = body.split()
        if words[0] in ("@texture", "@ibo"):
          binding = _image_binding(words)
          if (binding.ibo, binding.slot) in images: raise _Err(f"{words[0]} {binding.slot} given twice")
          images[(binding.ibo, binding.slot)] = binding
          continue
        if words[0] != "@shared" or len(words) != 2 or not _INT.fullmatch(words[1]) or not 0 <= _int(words[1]) < 1 << 32:
          raise _Err("the directives are `@shared N` (N bytes, 0 <= N < 2**32), `@texture T B HxW F` and `@ibo U B HxW F`")
        if shared is not None: raise _Err("@shared given twice")
        shared = _int(words[1])
        continue
      while m := _LABEL.match(body):
        if m[1] in labels: raise _Err(f"label {m[1]!r} defined twice")
        labels[m[1]], body = len(instrs), body[m.end():]
      if body.strip(): instrs.append((lineno, line, _parse_instruction(len(instrs), body.strip())))
    except _Err as e: raise CompileError(f"line {lineno}: {line.strip()!r}: {e}") from None
  fp, words = _Footprint(), []
  for lineno, line, ins in instrs:
    try: words.append(_encode(ins, labels, fp))
    except _Err as e: raise CompileError(f"line {lineno}: {line.strip()!r}: {e}") from None
  return Program(b"".join(struct.pack("<Q", w) for w in words), fp.vec4s("r"), fp.vec4s("hr"), fp.vec4s("c"), shared or 0, tuple(images.values()))

def _image_binding(words: list[str]) -> ImageBinding:
  """`@texture T B HxW F` / `@ibo U B HxW F` as a binding (the limits: 128 textures and IBOs, 16384 x 16384 pixels)."""
  m = re.fullmatch(r"(\d+) (\d+) (\d+)x(\d+) (f32|f16)", " ".join(words[1:]))
  if m is None: raise _Err(f"{words[0]} takes `SLOT BUFFER HEIGHTxWIDTH f32|f16`, got {' '.join(words[1:])!r}")
  slot, buffer, height, width = (int(m[i]) for i in range(1, 5))
  if slot >= 128 or not (0 < height <= 16384 and 0 < width <= 16384): raise _Err(f"{words[0]} slot {slot} of {height}x{width} pixels is out of range")
  return ImageBinding(words[0] == "@ibo", slot, buffer, height, width, 4 if m[5] == "f32" else 2)

def assemble(text: str, gen: int) -> bytes:
  """The machine code of `text` (64-bit little-endian words); `@shared` is checked but not reported here."""
  return assemble_program(text, gen).code
