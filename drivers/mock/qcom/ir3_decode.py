"""ir3 (Adreno a6xx/a7xx) machine words -> Instr, with this model's own tables written from Mesa's ISA description
src/freedreno/isa/ir3-common.xml and ir3-cat0.xml .. ir3-cat7.xml (the element each table comes from is named beside
it). Every instruction is one 64-bit little-endian word; pattern strings in the XML are written MSB first.

Decoded: cat0 (nop end jump br and the other branch/flow names), cat1 mov/cov (register, const or immediate source),
every cat2 and cat3 (standard, bit 13 = 0) opcode, cat4 rcp..hexp2, cat5 isam..samgp3 (opcodes 0-23, normal and
s2en/bindless forms), cat6 ldg/ldg.a/stg/stg.a/ldl/stl and the a6xx stib.b/ldib.b, cat7 bar/fence. Anything else
(relative a0.x addressing, the cat1 multi-movs, other cat5/cat6 forms) decodes to an Instr whose `error` says why; so
do the decoded forms the executor does not run (every cat5 but non-bindless 2-D isam, every IBO form but
stib.b.typed.2d.f32.4.imm). The executor raises ShaderHazard(pc, error) only if a fiber reaches it.

For the RENDERER (facts the text syntax hides):
- `sel.b32 dst, a, cond, b` writes cond != 0 ? a : b: src2 (the middle operand) is the condition (Mesa
  ir3_compiler_nir.c emit_alu nir_op_b32csel: ir3_SEL_B32(src[1], cond, src[2])).
- cat6 type 7 prints as `u8_32` (ir3-common.xml <enum name="#type">); 16-bit and u8 loads/stores use half registers
  (<expr name="#type-half">), u8_32 a full one. ldg/stg immediate offsets are signed 13-bit byte offsets.
- cat3 src2 is always a register; src1/src3 may be a register or a const; cat3 has no immediates (a6xx/a7xx).
- isam bit 18 (ir3-cat5.xml "1D", shown inverted as `.1d`, "isam.v does not work without it set"): Mesa's compiler
  leaves it clear for every image load (ir3_compiler_nir.c sets IR3_INSTR_INV_1D only with isam.v), so a 2-D isam
  runs either way; the model runs both as the same 2-D fetch."""
from __future__ import annotations
from dataclasses import dataclass
from functools import lru_cache
import math, struct
from drivers.mock.qcom.ir3_faults import ShaderHazard

SWIZ = "xyzw"
# <enum name="#type">; value 7 is "u8_32" in current Mesa (an 8-bit value in a full register for cat6)
TYPES = ("f16", "f32", "u16", "u32", "s16", "s32", "u8", "u8_32")
CONDS = ("lt", "le", "gt", "ge", "eq", "ne")                       # <enum name="#cond">
ROUNDS = ("", "(even)", "(pos_infinity)", "(neg_infinity)")         # ir3-cat1.xml <enum name="#round">
FLUT = (0.0, 0.5, 1.0, 2.0, math.e, math.pi, 1 / math.pi, 1 / math.log2(math.e), math.log2(math.e),  # <enum name="#flut">
        1 / math.log2(10), math.log2(10), 4.0)
FLUT_TEXT = ("0.0", "0.5", "1.0", "2.0", "e", "pi", "1/pi", "1/log2(e)", "log2(e)", "1/log2(10)", "log2(10)", "4.0")

# ir3-cat0.xml: (OPC_HI bit 49, OPC bits 55-58) -> name of the 0-source / immediate forms
CAT0 = {(0, 0): "nop", (0, 6): "end", (0, 4): "ret", (0, 7): "emit", (0, 8): "cut", (0, 9): "chmask", (0, 10): "chsh",
        (0, 11): "flow_rev", (1, 8): "shpe", (1, 13): "predt", (1, 14): "predf", (1, 15): "prede", (0, 5): "kill",
        (0, 2): "jump", (0, 3): "call", (1, 0): "bkt", (1, 5): "getone", (1, 7): "shps", (1, 4): "getlast"}
# <bitset name="#instruction-cat0-branch">: BRTYPE bits 37-39
BRTYPES = {0: "br", 4: "bany", 5: "ball", 1: "brao", 2: "braa", 3: "brac", 6: "brax"}
# ir3-cat2.xml: opcode bits 53-58; 1 = one source
CAT2 = {0: ("add.f", 2), 1: ("min.f", 2), 2: ("max.f", 2), 3: ("mul.f", 2), 4: ("sign.f", 1), 5: ("cmps.f", 2),
        6: ("absneg.f", 1), 7: ("cmpv.f", 2), 9: ("floor.f", 1), 10: ("ceil.f", 1), 11: ("rndne.f", 1),
        12: ("rndaz.f", 1), 13: ("trunc.f", 1), 16: ("add.u", 2), 17: ("add.s", 2), 18: ("sub.u", 2),
        19: ("sub.s", 2), 20: ("cmps.u", 2), 21: ("cmps.s", 2), 22: ("min.u", 2), 23: ("min.s", 2), 24: ("max.u", 2),
        25: ("max.s", 2), 26: ("absneg.s", 1), 28: ("and.b", 2), 29: ("or.b", 2), 30: ("not.b", 1), 31: ("xor.b", 2),
        33: ("cmpv.u", 2), 34: ("cmpv.s", 2), 48: ("mul.u24", 2), 49: ("mul.s24", 2), 50: ("mull.u", 2),
        51: ("bfrev.b", 1), 52: ("clz.s", 1), 53: ("clz.b", 1), 54: ("shl.b", 2), 55: ("shr.b", 2), 56: ("ashr.b", 2),
        57: ("bary.f", 2), 58: ("mgen.b", 2), 59: ("getbit.b", 2), 60: ("setrm", 1), 61: ("cbits.b", 1),
        62: ("shb", 2), 63: ("msad", 2)}
# ir3-cat3.xml <bitset name="#instruction-cat3">: opcode bits 55-58 -> (name, FULL)
CAT3 = {0: ("mad.u16", False), 1: ("madsh.u16", True), 2: ("mad.s16", False), 3: ("madsh.m16", True),
        4: ("mad.u24", True), 5: ("mad.s24", True), 6: ("mad.f16", False), 7: ("mad.f32", True), 8: ("sel.b16", False),
        9: ("sel.b32", True), 10: ("sel.s16", False), 11: ("sel.s32", True), 12: ("sel.f16", False),
        13: ("sel.f32", True), 14: ("sad.s16", False), 15: ("sad.s32", True)}
# ir3-cat4.xml: opcode bits 53-58
CAT4 = {0: "rcp", 1: "rsq", 2: "log2", 3: "exp2", 4: "sin", 5: "cos", 6: "sqrt", 9: "hrsq", 10: "hlog2", 11: "hexp2"}
CAT7 = {0: "bar", 1: "fence"}                                        # ir3-cat7.xml OPC bits 55-58

@dataclass(frozen=True)
class Operand:
  """kind: "reg" (full register, num = regid = reg*4+component), "half" (half register, same numbering), "pred"
  (p0.<component>, num = component), "const" (num = const index*4+component; half: read as 16 bits), "immed"
  (value: the integer bits; flut: value indexes the #flut float table). neg/abs: source modifiers; rpt: (r)."""
  kind: str
  num: int = 0
  value: int = 0
  half: bool = False
  neg: bool = False
  abs: bool = False
  rpt: bool = False
  flut: bool = False
  def __str__(self) -> str:
    mods = ("(neg)" if self.neg else "") + ("(abs)" if self.abs else "") + ("(r)" if self.rpt else "")
    if self.kind in ("reg", "half"): return f"{mods}{'h' if self.kind == 'half' else ''}r{self.num >> 2}.{SWIZ[self.num & 3]}"
    if self.kind == "pred": return f"{mods}p0.{SWIZ[self.num]}"
    if self.kind == "const": return f"{mods}{'h' if self.half else ''}c{self.num >> 2}.{SWIZ[self.num & 3]}"
    if self.flut: return f"{mods}{'h' if self.half else ''}({FLUT_TEXT[self.value]})"
    return f"{mods}h({self.value})" if self.half else f"{mods}{self.value}"

@dataclass(frozen=True)
class Instr:
  """One decoded word. cat: 0..7; name: Mesa's mnemonic ("add.f", "cmps.s", "mov", "cov", "ldg", "stg.a", "bar");
  type: the cat6 access type or the cat1 destination type, src_type: the cat1 source type; cond: cmps condition;
  dst: None, an Operand, or for stores None; srcs: sources in Mesa's order (cat6: address first, then the stored
  value for stores); sy/ss/jp/ul/sat/ei: flags; repeat: (rptN); nop: (nopN) delay slots encoded on cat2/cat3;
  branch: relative target (instructions) of cat0 branches; inv: br !p0; offset: cat6 byte offset (a6xx ldg.a/stg.a:
  the immediate added before shifting), shift: ldg.a/stg.a SRC2_SHIFT; count: cat6 components; round: cat1 rounding
  (0 = default); samp/tex: cat5 s#/t# (normal form); uav: the stib.b/ldib.b IBO slot (immediate form); wrmask: cat5
  destination components; dims: stib.b/ldib.b coordinate count; text: the disassembly as Mesa prints it; error: why
  this word cannot run (None when it can)."""
  pc: int
  word: int
  cat: int
  name: str
  text: str = ""
  type: str | None = None
  src_type: str | None = None
  cond: str | None = None
  dst: Operand | None = None
  srcs: tuple = ()
  sy: bool = False
  ss: bool = False
  jp: bool = False
  ul: bool = False
  sat: bool = False
  ei: bool = False
  repeat: int = 0
  nop: int = 0
  branch: int | None = None
  inv: bool = False
  offset: int = 0
  shift: int = 0
  count: int = 0
  round: int = 0
  samp: int | None = None
  tex: int | None = None
  uav: int | None = None
  wrmask: int = 0
  dims: int = 0
  error: str | None = None

def bits(w: int, lo: int, hi: int) -> int: return (w >> lo) & ((1 << (hi - lo + 1)) - 1)
def bit(w: int, pos: int) -> bool: return bool(w >> pos & 1)
def sext(v: int, width: int) -> int: return v - (1 << width) if v >> (width - 1) & 1 else v
def is_half_type(t: int) -> bool: return t in (0, 2, 4, 6)       # ir3-common.xml <expr name="#type-half">
def gpr(v: int, half: bool) -> Operand:
  """<bitset name="#reg-gpr">: GPR 62 is p0.*; full/half chosen by the instruction."""
  return Operand("pred", v & 3) if v >> 2 == 62 else Operand("half" if half else "reg", v)

class Undecodable(Exception):
  """Raised inside the decoder; becomes Instr.error."""

def _flags(w: int, ss: bool = True) -> str:
  """The (sy)(ss)(jp) prefix as Mesa prints it; cat6 has no (ss) bit (bit 44 is an operand bit there)."""
  return "".join(s for s, b in (("(sy)", 60), ("(ss)", 44), ("(jp)", 59)) if bit(w, b) and (ss or b != 44))

def _multisrc(v: int, full: bool) -> Operand:
  """<bitset name="#multisrc"> (16 bits, cat2/cat4 sources): gpr 8-13 = 0, const 12:11 = 10, immed 13:11 = 100,
  flut 13:11 = 101, relative 13:11 = 001; ABSNEG 14-15 (bit 14 neg, bit 15 abs)."""
  neg, ab = bit(v, 14), bit(v, 15)
  sel = bits(v, 11, 13)
  if bits(v, 8, 9) == 0 and sel == 0:
    g = gpr(bits(v, 0, 7), not full)
    return Operand(g.kind, g.num, neg=neg, abs=ab)
  if sel & 3 == 2: return Operand("const", bits(v, 0, 10), half=not full, neg=neg, abs=ab)
  if sel == 4: return Operand("immed", value=sext(bits(v, 0, 10), 11), half=not full, neg=neg, abs=ab)
  if sel == 5:
    if bits(v, 0, 9) >= len(FLUT): raise Undecodable(f"float lookup immediate {bits(v, 0, 9)} is not in the #flut table")
    return Operand("immed", value=bits(v, 0, 9), half=bit(v, 10), neg=neg, abs=ab, flut=True)
  raise Undecodable("relative (a0.x) source addressing is not modelled")

def _dst_half(w: int, full: bool) -> bool:
  """<expr name="#dest-half">: half when FULL == DST_CONV (bit 46), never for p0.x."""
  return full == bit(w, 46) and bits(w, 32, 39) <= 0xF7

def _nop_form(w: int, r1: int, r2: int, repeat: int) -> int:
  """<expr name="#cat2-cat3-nop-encoding"> / #cat2-cat3-nop-value: SRC1_R | SRC2_R << 1 when REPEAT == 0."""
  n = (bit(w, r1) | bit(w, r2) << 1)
  return n if repeat == 0 else 0

def _cat0(w: int, pc: int, gen: int) -> dict:
  """ir3-cat0.xml <bitset name="#instruction-cat0">: IMMED 0-31, BRTYPE 37-39, REPEAT 40-42, SS 44, INV1 52,
  COMP1 53-54, OPC_HI 49, OPC 55-58, JP 59, SY 60."""
  opc, hi, rpt = bits(w, 55, 58), bit(w, 49), bits(w, 40, 42)
  pre = _flags(w) + ("(eq)" if bit(w, 48) else "")
  if (hi, opc) == (0, 1):
    name = BRTYPES.get(bits(w, 37, 39))
    if name != "br": raise Undecodable(f"cat0 branch type {bits(w, 37, 39)} ({name}) is not modelled")
    imm, inv, comp = sext(bits(w, 0, 31), 32), bit(w, 52), bits(w, 53, 54)
    return dict(name="br", branch=imm, inv=inv, srcs=(Operand("pred", comp),),
                text=f"{pre}br {'!' if inv else ''}p0.{SWIZ[comp]}, #{imm}")
  name = CAT0.get((int(hi), opc))
  if name is None or (name == "getlast" and gen < 6): raise Undecodable(f"cat0 opcode {int(hi)}:{opc} is not in ir3-cat0.xml")
  if name in ("jump", "call", "bkt", "getone", "shps"):
    imm = sext(bits(w, 0, 31), 32)
    return dict(name=name, branch=imm, text=f"{_flags(w)}{name} #{imm}")
  if name == "kill": return dict(name=name, text=f"{pre}kill {'!' if bit(w, 52) else ''}p0.{SWIZ[bits(w, 53, 54)]}")
  return dict(name=name, repeat=rpt, text=f"{pre}{f'(rpt{rpt})' if rpt else ''}{name}")

def _cat1_immed(v: int, t: int) -> str:
  """<bitset name="#cat1-immed-src">: how each source type prints its 32-bit immediate."""
  if t == 0: return f"h({float(struct.unpack('<e', struct.pack('<H', v & 0xFFFF))[0]):f})"
  if t == 1: return f"({struct.unpack('<f', struct.pack('<I', v))[0]:f})"
  if t == 3 and v > 0x1000: return f"0x{v:x}"
  if t == 4: return str(sext(v & 0xFFFF, 16))
  if t == 5: return str(sext(v, 32))
  return str(v)

def _cat1(w: int, pc: int, gen: int) -> dict:
  """ir3-cat1.xml <bitset name="#instruction-cat1-mov">: DST 32-39, REPEAT 40-41, DM(sat) 42, SRC_R 43, UL 45,
  DST_TYPE 46-48, DST_REL 49, SRC_TYPE 50-52, source kind 53-54 (00 gpr, 01 const, 10 immed), ROUND 55-56, OPC 57-58."""
  if bits(w, 57, 58) != 0: raise Undecodable(f"cat1 opcode {bits(w, 57, 58)} (swz/gat/sct/movmsk) is not modelled")
  st, dt, kind, rpt = bits(w, 50, 52), bits(w, 46, 48), bits(w, 53, 54), bits(w, 40, 41)
  if bit(w, 49): raise Undecodable("relative (a0.x) destination is not modelled")
  d = bits(w, 32, 39)
  if d >> 2 == 61: raise Undecodable("mova/mova1 (a0/a1 destination) is not modelled")
  src_half, dst_half = is_half_type(st) or st == 7, is_half_type(dt) or dt == 7   # #instruction-cat1-typed HALF
  r = bit(w, 43)
  if kind == 0:
    if bit(w, 11) or bits(w, 12, 31): raise Undecodable("relative (a0.x) source or movs is not modelled")
    src, stext = gpr(bits(w, 0, 7), src_half), None
  elif kind == 1:
    if bits(w, 11, 31): raise Undecodable("cat1 const source with bits 11-31 set")
    src, stext = Operand("const", bits(w, 0, 10), half=src_half), None
  elif kind == 2: src, stext = Operand("immed", value=bits(w, 0, 31)), _cat1_immed(bits(w, 0, 31), st)
  else: raise Undecodable("cat1 source kind 3 is not in ir3-cat1.xml")
  src = Operand(src.kind, src.num, src.value, src.half, rpt=r and kind != 2)
  dst = gpr(d, dst_half)
  name = "mov" if st == dt else "cov"
  rnd = bits(w, 55, 56)
  pre = _flags(w) + (f"(rpt{rpt})" if rpt else "") + ("(ul)" if bit(w, 45) else "")
  text = f"{pre}{name}.{TYPES[st]}{TYPES[dt]} {ROUNDS[rnd]}{'(sat)' if bit(w, 42) else ''}{dst}, {stext or src}"
  return dict(name=name, src_type=TYPES[st], type=TYPES[dt], dst=dst, srcs=(src,), repeat=rpt, round=rnd,
              sat=bit(w, 42), ul=bit(w, 45), text=text)

def _cat2(w: int, pc: int, gen: int) -> dict:
  """ir3-cat2.xml <bitset name="#instruction-cat2">: SRC1 0-15, SRC2 16-31, DST 32-39, REPEAT 40-41, SAT 42,
  SRC1_R 43, SS 44, UL 45, DST_CONV 46, EI 47, COND 48-50, SRC2_R 51, FULL 52, OPC 53-58."""
  name, nsrc = CAT2[bits(w, 53, 58)] if bits(w, 53, 58) in CAT2 else (None, 0)
  if name is None: raise Undecodable(f"cat2 opcode {bits(w, 53, 58)} is not in ir3-cat2.xml")
  full, rpt = bit(w, 52), bits(w, 40, 41)
  nop = _nop_form(w, 43, 51, rpt)
  srcs = tuple(_multisrc(bits(w, 16 * i, 16 * i + 15), full) for i in range(nsrc))
  if not nop: srcs = tuple(Operand(s.kind, s.num, s.value, s.half, s.neg, s.abs, bit(w, (43, 51)[i]), s.flut) for i, s in enumerate(srcs))
  dst = gpr(bits(w, 32, 39), _dst_half(w, full))
  if bits(w, 34, 39) == 61: raise Undecodable("scalar-ALU up0 destination is not modelled")
  cond = CONDS[bits(w, 48, 50)] if name.startswith(("cmps", "cmpv")) else None
  if cond is None and name.startswith(("cmps", "cmpv")): raise Undecodable("cmps condition 6/7 is not in <enum name=\"#cond\">")
  pre = _flags(w) + ("(sat)" if bit(w, 42) else "") + (f"(nop{nop}) " if nop else f"(rpt{rpt})" if rpt else "") + ("(ul)" if bit(w, 45) else "")
  text = f"{pre}{name}{'.' + cond if cond else ''} {'(ei)' if bit(w, 47) else ''}{dst}, " + ", ".join(map(str, srcs))
  return dict(name=name, cond=cond, dst=dst, srcs=srcs, repeat=rpt, nop=nop, sat=bit(w, 42), ul=bit(w, 45),
              ei=bit(w, 47), text=text)

def _cat3_src(v: int, half: bool) -> Operand:
  """<bitset name="#cat3-src"> (13 bits): gpr 8-12 = 0 (bit 10 (last) ignored), const 12:11 = 10, relative 01."""
  if bits(v, 11, 12) == 0 and bits(v, 8, 9) == 0: return gpr(bits(v, 0, 7), half)
  if bits(v, 11, 12) == 2: return Operand("const", bits(v, 0, 10), half=half)
  raise Undecodable("relative (a0.x) cat3 source is not modelled")

def _cat3(w: int, pc: int, gen: int) -> dict:
  """ir3-cat3.xml <bitset name="#instruction-cat3">: SRC1 0-12, bit 13 = 0, SRC1_NEG 14, SRC2_R 15, SRC3 16-28,
  SRC3_R 29, SRC2_NEG 30, SRC3_NEG 31, DST 32-39, REPEAT 40-41, SAT 42, SRC1_R 43, SS 44, UL 45, DST_CONV 46,
  SRC2 47-54 (gpr), OPC 55-58."""
  if bit(w, 13): raise Undecodable("cat3 alternative encodings (shrm/shlm/shrg/shlg/andg/dp2acc/dp4acc/wmm) are not modelled")
  name, full = CAT3[bits(w, 55, 58)]
  rpt = bits(w, 40, 41)
  nop = _nop_form(w, 43, 15, rpt)
  raw = (_cat3_src(bits(w, 0, 12), not full), gpr(bits(w, 47, 54), not full), _cat3_src(bits(w, 16, 28), not full))
  negs, rs = (bit(w, 14), bit(w, 30), bit(w, 31)), (bit(w, 43) and not nop, bit(w, 15) and not nop, bit(w, 29))
  srcs = tuple(Operand(s.kind, s.num, s.value, s.half, neg=n, rpt=r) for s, n, r in zip(raw, negs, rs))
  dst = gpr(bits(w, 32, 39), _dst_half(w, full))
  pre = _flags(w) + ("(sat)" if bit(w, 42) else "") + (f"(nop{nop}) " if nop else f"(rpt{rpt})" if rpt else "") + ("(ul)" if bit(w, 45) else "")
  shown = srcs if not nop else (srcs[0], srcs[1], Operand(srcs[2].kind, srcs[2].num, srcs[2].value, srcs[2].half, srcs[2].neg))
  return dict(name=name, dst=dst, srcs=srcs, repeat=rpt, nop=nop, sat=bit(w, 42), ul=bit(w, 45),
              text=f"{pre}{name} {dst}, " + ", ".join(map(str, shown)))

def _cat4(w: int, pc: int, gen: int) -> dict:
  """ir3-cat4.xml <bitset name="#instruction-cat4">: SRC 0-15 (#multisrc), DST 32-39, REPEAT 40-41, SAT 42, SRC_R 43,
  SS 44, UL 45, DST_CONV 46, FULL 52, OPC 53-58."""
  name = CAT4.get(bits(w, 53, 58))
  if name is None: raise Undecodable(f"cat4 opcode {bits(w, 53, 58)} is not in ir3-cat4.xml")
  full, rpt = bit(w, 52), bits(w, 40, 41)
  s = _multisrc(bits(w, 0, 15), full)
  src = Operand(s.kind, s.num, s.value, s.half, s.neg, s.abs, bit(w, 43), s.flut)
  dst = gpr(bits(w, 32, 39), _dst_half(w, full))
  pre = _flags(w) + ("(sat)" if bit(w, 42) else "") + (f"(rpt{rpt})" if rpt else "") + ("(ul)" if bit(w, 45) else "")
  return dict(name=name, dst=dst, srcs=(src,), repeat=rpt, sat=bit(w, 42), text=f"{pre}{name} {dst}, {src}")

# ir3-cat5.xml: OPC bits 54-58 -> (name, NUM_SRC, HAS_SAMP, HAS_TEX); every one of these has HAS_TYPE
CAT5 = {0: ("isam", 1, True, True), 1: ("isaml", 2, True, True), 2: ("isamm", 1, True, True), 3: ("sam", 1, True, True),
        4: ("samb", 2, True, True), 5: ("saml", 2, True, True), 6: ("samgq", 1, True, True), 7: ("getlod", 1, True, True),
        8: ("conv", 2, True, True), 9: ("convm", 2, True, True), 10: ("getsize", 1, False, True), 11: ("getbuf", 0, False, True),
        12: ("getpos", 1, False, True), 13: ("getinfo", 0, False, True), 14: ("dsx", 1, False, False), 15: ("dsy", 1, False, False),
        16: ("gather4r", 1, True, True), 17: ("gather4g", 1, True, True), 18: ("gather4b", 1, True, True),
        19: ("gather4a", 1, True, True), 20: ("samgp0", 1, True, True), 21: ("samgp1", 1, True, True),
        22: ("samgp2", 1, True, True), 23: ("samgp3", 1, True, True)}
BINDLESS_MODES = (1, 2, 3, 5, 6, 7)                                 # <expr name="#cat5-s2enb-is-bindless">

def _cat5(w: int, pc: int, gen: int) -> dict:
  """ir3-cat5.xml <bitset name="#instruction-cat5">: FULL 0, SRC1 1-8, SRC2 9-16, SAMP 21-24, TEX 25-31, DST 32-39,
  WRMASK 40-43, TYPE 44-46, 3D 48, A 49, SV 50 (.s; .v on isam), S2EN_BINDLESS 51, O 52, P 53 (isam: SRC2_IMM_OFFSET),
  OPC 54-58; isam's 1D is bit 18 (bool_inv). The s2en/bindless override (#instruction-cat5-tex-base): BASE_HI 19-20,
  SRC3 21-28, DESC_MODE 29-31, BASE_LO 47."""
  opc = bits(w, 54, 58)
  if opc not in CAT5: raise Undecodable(f"cat5 opcode {opc} is not modelled (isam..samgp3 are)")
  name, nsrc, has_samp, has_tex = CAT5[opc]
  isam, t, full, s2en = opc == 0, bits(w, 44, 46), bit(w, 0), bit(w, 51)
  if not isam and bit(w, 18): raise Undecodable("cat5 bit 18 is set outside isam (ir3-cat5.xml pattern 0)")
  sfx = "".join(s for s, b in ((".3d", 48), (".a", 49), (".o", 52)) if bit(w, b))
  sfx += (".p" if not isam and bit(w, 53) else "") + ((".v" if isam else ".s") if bit(w, 50) else "")
  tail = (".1d" if isam and not bit(w, 18) else "") + (".rck" if t == 7 else "")
  mask = bits(w, 40, 43)
  dst = gpr(bits(w, 32, 39), is_half_type(t))
  srcs = (gpr(bits(w, 1, 8), not full),) if nsrc else ()
  shown = "".join(f", {o}" for o in srcs)
  if bit(w, 52) or nsrc > 1:
    srcs += (gpr(bits(w, 9, 16), not full),)
    shown += f", {srcs[-1]}"
  elif isam and bit(w, 53): shown += _off(bits(w, 9, 16))                       # #cat5-src2 SRC2_IMM_OFFSET: uoffset
  samp = tex = None
  if not s2en:
    samp, tex = bits(w, 21, 24) if has_samp else None, bits(w, 25, 31) if has_tex else None
    shown += (f", s#{samp}" if has_samp else "") + (f", t#{tex}" if has_tex else "")
  else:
    mode, base, src3 = bits(w, 29, 31), bits(w, 19, 20) * 2 | bit(w, 47), bits(w, 21, 28)
    bindless = mode in BINDLESS_MODES
    sfx += (".s2en" if mode < 6 else "") + (".uniform" if mode in (0, 1, 5) else ".nonuniform" if mode in (2, 3, 4) else "")
    sfx += f".base{base}" if bindless else ""
    if mode < 6: shown += f", {gpr(src3, not bindless)}"                          # #cat5-src3: the index register
    elif mode == 7 and gen < 7: shown += f", s#{src3}" if has_samp else ""        # a1.x holds the texture on a6xx
    elif mode == 7: shown += f", t#{src3}" if has_tex else ""                     # and the sampler on a7xx
    else: shown += (f", s#{src3 & 15}" if has_samp else "") + (f", t#{src3 >> 4}" if has_tex else "")
    shown += ", a1.x" if mode in (1, 3, 7) else ""
  typ = f"({TYPES[t]})" if t != 7 else ""
  text = f"{_flags(w, ss=False)}{name}{sfx}{tail} {typ}({''.join(c for i, c in enumerate(SWIZ) if mask >> i & 1)}){dst}{shown}"
  runs = isam and not (s2en or sfx) and t in (0, 1) and mask == 0xF and full
  error = None if runs else f"{text}: not modelled (only non-bindless 2-D isam (f32|f16)(xyzw) with full coordinates runs)"
  return dict(name=name, type=TYPES[t], dst=dst, srcs=srcs, samp=samp, tex=tex, wrmask=mask, text=text, error=error)

# ir3-cat6.xml "#instruction-cat6-a6xx-ibo-load-store": OPC bits 14-19 -> name; #cat6-src-mode
IBO_OPC = {0b011101: "stib.b", 0b000110: "ldib.b"}
IBO_MODES = ("imm", "uniform", "nonuniform")

def _ibo(w: int, name: str) -> dict:
  """ir3-cat6.xml "#instruction-cat6-a6xx-base" + "-ibo-base" + "-ibo-load-store": BASE 1-3, OFFSET_HI 4-5, MODE 6-7,
  BINDLESS 8, D_MINUS_ONE 9-10, TYPED 11, TYPE_SIZE_MINUS_ONE 12-13, OPC 14-19, 20-22 = 110, HAS_OFFSET 23, SRC2 24-31
  (coordinates), SRC1 32-39 (stored value / loaded destination), RCK 40, SSBO 41-48 (immediate when MODE is imm),
  TYPE 49-51, 52-53 = 10, OFFSET_LO 54-58."""
  mode, t = bits(w, 6, 7), bits(w, 49, 51)
  if mode == 3: raise Undecodable("IBO MODE 3 is not in <enum name=\"#cat6-src-mode\">")
  dims, size, typed, bindless = bits(w, 9, 10) + 1, bits(w, 12, 13) + 1, bit(w, 11), bit(w, 8)
  off = (bits(w, 4, 5) << 5 | bits(w, 54, 58)) if bit(w, 23) else 0
  value, coords = gpr(bits(w, 32, 39), is_half_type(t)), Operand("reg", bits(w, 24, 31))
  slot = bits(w, 41, 48)
  sfx = f".{'typed' if typed else 'untyped'}.{dims}d.{TYPES[t]}{'.rck' if bit(w, 40) else ''}.{size}.{IBO_MODES[mode]}"
  sfx += f".base{bits(w, 1, 3)}" if bindless else ""
  text = f"{_flags(w, ss=False)}{name}{sfx} {value}, {coords}{_off(off)}, {slot if mode == 0 else Operand('reg', slot)}"
  runs = name == "stib.b" and sfx == ".typed.2d.f32.4.imm" and not off
  error = None if runs else f"{text}: not modelled (only stib.b.typed.2d.f32.4.imm without offset runs)"
  common = dict(name=name, type=TYPES[t], uav=slot if mode == 0 else None, count=size, dims=dims, offset=off, text=text, error=error)
  return common | (dict(srcs=(coords, value)) if name == "stib.b" else dict(dst=value, srcs=(coords,)))

def _off(v: int) -> str: return f"+{v}" if v > 0 else f"-{-v}" if v < 0 else ""   # the "offset" field type

def _cat6(w: int, pc: int, gen: int) -> dict:
  """ir3-cat6.xml <bitset name="#instruction-cat6-a3xx">: TYPE 49-51, OPC 54-58, JP 59, SY 60 (cat6 has no (ss))."""
  if bit(w, 53) and not bit(w, 52) and bits(w, 20, 22) == 0b110 and bits(w, 14, 19) in IBO_OPC:
    if bits(w, 14, 19) == 0b011101 and bit(w, 0): raise Undecodable("stib.b with bit 0 set (ir3-cat6.xml pattern 0)")
    return _ibo(w, IBO_OPC[bits(w, 14, 19)])
  opc, t = bits(w, 54, 58), bits(w, 49, 51)
  ty, th = TYPES[t], is_half_type(t)
  pre = _flags(w, ss=False)
  if opc == 0 and bit(w, 0) and not bit(w, 52):                    # <bitset name="ldg"> / "ldg.a" (#instruction-cat6-ldg)
    if bit(w, 53) or bits(w, 30, 31): raise Undecodable("cat6 ldg with bits 53/30-31 set is not in ir3-cat6.xml")
    dst, addr, size = gpr(bits(w, 32, 39), th), Operand("reg", bits(w, 14, 21)), bits(w, 24, 26)
    if not bit(w, 22):                                             # immediate-offset form: OFF 1-13 signed bytes
      off = sext(bits(w, 1, 13), 13)
      return dict(name="ldg", type=ty, dst=dst, srcs=(addr,), offset=off, count=size,
                  text=f"{pre}ldg.{ty} {dst}, g[{addr}{_off(off)}], {size}")
    src2 = Operand("reg", bits(w, 1, 8))
    if gen >= 7:                                                   # a7xx ldg.a: SRC1_CONST 13, OFF 41-48
      if bit(w, 13): addr = Operand("const", bits(w, 14, 21))
      off = bits(w, 41, 48)
      return dict(name="ldg.a", type=ty, dst=dst, srcs=(addr, src2), offset=off, count=size,
                  text=f"{pre}ldg.a.{ty} {dst}, g[{addr}+{src2}+{off}], {size}")
    if bit(w, 11): raise Undecodable("ldg.a bit 11 must be 0 (ir3-cat6.xml assert)")
    off, sh = bits(w, 9, 10), bits(w, 12, 13)
    return dict(name="ldg.a", type=ty, dst=dst, srcs=(addr, src2), offset=off, shift=sh, count=size,
                text=f"{pre}ldg.a.{ty} {dst}, g[{_a6xx_addr(addr, src2, off, sh, t)}], {size}")
  if opc == 3 and not bit(w, 53):                                  # <bitset name="stg"> / "stg.a" (#instruction-cat6-stg)
    if not bit(w, 23) or bits(w, 30, 31): raise Undecodable("cat6 stg with bit 23 clear / bits 30-31 set")
    val, addr, size = gpr(bits(w, 1, 8), th), Operand("reg", bits(w, 41, 48)), bits(w, 24, 26)
    if not bit(w, 52):
      off = sext(bits(w, 9, 13) << 8 | bits(w, 32, 39), 13)
      return dict(name="stg", type=ty, srcs=(addr, val), offset=off, count=size,
                  text=f"{pre}stg.{ty} g[{addr}{_off(off)}], {val}, {size}")
    src2 = Operand("reg", bits(w, 32, 39))
    if gen >= 7:                                                   # a7xx stg.a: SRC1_CONST 13, OFF 14-21
      if bit(w, 13): addr = Operand("const", bits(w, 41, 48))
      off = bits(w, 14, 21)
      return dict(name="stg.a", type=ty, srcs=(addr, val, src2), offset=off, count=size,
                  text=f"{pre}stg.a.{ty} g[{addr}+{src2}+{off}], {val}, {size}")
    off, sh = bits(w, 9, 10), bits(w, 12, 13)
    return dict(name="stg.a", type=ty, srcs=(addr, val, src2), offset=off, shift=sh, count=size,
                text=f"{pre}stg.a.{ty} g[{_a6xx_addr(addr, src2, off, sh, t)}], {val}, {size}")
  if opc == 1 and bit(w, 0) and bit(w, 23):                        # <bitset name="ldl"> (#instruction-cat6-a3xx-ld)
    dst, addr, off, size = gpr(bits(w, 32, 39), th), Operand("reg", bits(w, 14, 21)), sext(bits(w, 1, 13), 13), bits(w, 24, 31)
    return dict(name="ldl", type=ty, dst=dst, srcs=(addr,), offset=off, count=size,
                text=f"{pre}ldl.{ty} {Operand('reg', dst.num)}, l[{addr}{_off(off)}], {size}")
  if opc == 4 and bit(w, 23) and bit(w, 40):                       # <bitset name="stl"> (#instruction-cat6-a3xx-st)
    val, addr, size = gpr(bits(w, 1, 8), th), Operand("reg", bits(w, 41, 48)), bits(w, 24, 31)
    off = sext(bits(w, 9, 13) << 8 | bits(w, 32, 39), 13)
    return dict(name="stl", type=ty, srcs=(addr, val), offset=off, count=size,
                text=f"{pre}stl.{ty} l[{addr}{_off(off)}], {Operand('reg', val.num)}, {size}")
  raise Undecodable(f"cat6 opcode {opc} in this form is not modelled (only ldg/stg/ldl/stl)")

def _a6xx_addr(addr: Operand, src2: Operand, off: int, sh: int, t: int) -> str:
  """The address text of a6xx ldg.a/stg.a (ir3-cat6.xml gen 600-699 display and overrides, in their order)."""
  tsh = 0 if t >= 6 else 1 if is_half_type(t) else 2               # <expr name="#cat6-type-shift">
  if tsh == 0: return f"{addr}+{src2}{'+' + str(off) if off else ''}"
  if off == 0: return f"{addr}+({src2}<<{sh + tsh})"
  if sh == 0: return f"{addr}+(({src2}+{off})<<{tsh})"
  return f"{addr}+((({src2}<<{sh})+{off})<<{tsh})"

def _cat7(w: int, pc: int, gen: int) -> dict:
  """ir3-cat7.xml <bitset name="#instruction-cat7-barrier">: bit 49 = 1, W 51, R 52, L 53, G 54, OPC 55-58, SS 44."""
  name = CAT7.get(bits(w, 55, 58))
  if name is None or not bit(w, 49): raise Undecodable(f"cat7 opcode {bits(w, 55, 58)} is not modelled (only bar/fence)")
  sfx = "".join(s for s, b in ((".g", 54), (".l", 53), (".r", 52), (".w", 51)) if bit(w, b))
  return dict(name=name, text=f"{_flags(w)}{name}{sfx}")

DECODERS = {0: _cat0, 1: _cat1, 2: _cat2, 3: _cat3, 4: _cat4, 5: _cat5, 6: _cat6, 7: _cat7}

def decode(word: int, pc: int = 0, gen: int = 6) -> Instr:
  """Decode one 64-bit word (the instruction at index pc) for Adreno generation gen (6 = a6xx, 7 = a7xx); a word
  the model does not know decodes to an Instr with `error` set."""
  cat = word >> 61
  common = dict(pc=pc, word=word, cat=cat, sy=bit(word, 60), jp=bit(word, 59), ss=bit(word, 44) and cat not in (5, 6))
  try:
    return Instr(**common, **DECODERS[cat](word, pc, gen))
  except Undecodable as e:
    return Instr(**common, name="?", text=f"{word:016x}", error=f"word {word:#018x} cannot run: {e}")

def decode_checked(word: int, pc: int = 0, gen: int = 6) -> Instr:
  """decode, raising ShaderHazard(pc, ...) naming the word when it is undecodable."""
  ins = decode(word, pc, gen)
  if ins.error: raise ShaderHazard(pc, ins.error)
  return ins

@lru_cache(maxsize=4096)
def decode_program(code: bytes, gen: int) -> tuple[Instr, ...]:
  """Every word of a code blob, decoded once per (bytes, gen); trailing bytes short of a word are an error."""
  if len(code) % 8: raise ShaderHazard(len(code) // 8, f"code is {len(code)} bytes, not a whole number of 64-bit words")
  words = struct.unpack(f"<{len(code) // 8}Q", code)
  return tuple(decode(w, pc, gen) for pc, w in enumerate(words))
