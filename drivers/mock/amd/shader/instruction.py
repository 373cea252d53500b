"""One decoded instruction, the same form for every architecture: a decoder (rdna3.py, cdna3.py) reads the
machine words with its architecture's tables and the executor runs the result, so only decoders know encodings."""
from __future__ import annotations
from dataclasses import dataclass, field
from drivers.mock.amd.shader.dispatch import ShaderFault

@dataclass(frozen=True)
class Operand:
  """A source or destination. kind:
  "s" / "v" / "ttmp" / "acc": scalar, vector, trap-temporary or accumulation register `index` (the first of
      consecutive registers for 64-bit and wider values);
  "vcc_lo", "vcc_hi", "exec_lo", "exec_hi", "m0", "scc", "null", "vccz", "execz", "flat_scratch_lo", ...: the named
      special register (index 0);
  "int": an inline integer constant `value` (-16..64);
  "float": an inline float constant `value` (0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0, 0.15915494...): its bits
      depend on the operand's type (f16/f32/f64), which only the instruction knows;
  "literal": the 32-bit literal word that followed the instruction, `value` (its bits).
  `hi`: a 16-bit operand held in the upper half of its VGPR (RDNA3 true16 operands, printed v0.h)."""
  kind: str
  index: int = 0
  value: int | float = 0
  hi: bool = False
  def __repr__(self) -> str:
    if self.kind in ("s", "v", "ttmp", "acc"): return f"{self.kind}{self.index}" + (".h" if self.hi else "")
    if self.kind in ("int", "float"): return str(self.value)
    if self.kind == "literal": return f"{self.value:#x}"
    return self.kind

@dataclass(frozen=True)
class Instruction:
  """`name`: LLVM's mnemonic in lower case without an encoding suffix ("v_add_f32", "s_load_b64", "global_load_b32");
  a CDNA3 decoder names an instruction by its RDNA3 mnemonic where the two do the same thing (the executor knows one
  name per behaviour) and keeps its own name otherwise. `encoding`: the ISA guide's name (SOP1, SOP2, SOPC, SOPK,
  SOPP, SMEM, VOP1, VOP2, VOP3, VOP3P, VOPC, VOPD, DS, FLAT, GLOBAL, SCRATCH, MUBUF, ...). `size`: bytes, literal
  included. `fields`: the encoding's fields by the ISA guide's names (vdst, sdst, src0, src1, src2, ssrc0, ssrc1,
  simm16, offset, neg, abs, opsel, clamp, omod, glc, slc, dlc, ...), register fields already as Operands.
  `text`: the disassembly as LLVM prints it (the tests compare it with LLVM's own listing)."""
  name: str
  encoding: str
  size: int
  fields: dict = field(default_factory=dict, compare=False)
  text: str = ""

class UnknownInstruction(ShaderFault):
  """Machine words a decoder has no entry for; the message names the encoding, the opcode and the address."""
