"""The RDNA3 decoder against LLVM's own assembly listing: every instruction of the .text of kernels compiled by
llvmlite for gfx1100 decodes to the text LLVM printed for it, and branches land on the label LLVM named."""
from __future__ import annotations
import re
import pytest
from drivers.mock.amd.shader.instruction import UnknownInstruction
from drivers.mock.amd.shader.rdna3 import decode, disassemble
from tests.drivers.mock.test_amd_shader_kernels import (CROSS_LANE, F64_LOOP, FDIV, HALF, PACKED, PRIVATE, REDUCE, SATURATE,
                                                        VADD, WMMA, compile_kernel, ints_kernel, section)

def listing(asm: str) -> tuple[list[str], dict[str, int]]:
  """(instructions, label -> index of the instruction after it) of the first function in an LLVM listing."""
  out, labels = [], {}
  for line in asm.splitlines():
    if ".section" in line and ".rodata" in line: break
    t = re.sub(r"\s*;.*", "", line).strip()
    if re.fullmatch(r"\.?[\w.]+:", t): labels[t[:-1]] = len(out)
    elif t and not t.startswith("."): out.append(" ".join(t.split()))
  return out, labels

KERNELS = {"vadd": (VADD, False), "fdiv": (FDIV, False), "reduce": (REDUCE, False), "f64_loop": (F64_LOOP, False),
           "half": (HALF, False), "private": (PRIVATE, False), "packed": (PACKED, False), "wmma": (WMMA, False),
           "cross_lane": (CROSS_LANE, False), "saturate": (SATURATE, False), "ints": (ints_kernel(False), False), "ints_wave64": (ints_kernel(True), True)}

@pytest.mark.parametrize("name", KERNELS)
def test_text_matches_llvm_listing(name):
  ir, wave64 = KERNELS[name]
  asm, obj = compile_kernel(ir)
  want, labels = listing(asm)
  code = section(obj, ".text")
  offsets, got, at = [], [], 0
  while len(got) < len(want):
    ins = decode(code, at, wave64)
    if not (ins.text == "s_nop 0" and want[len(got)] != "s_nop 0"):  # .p2align pads loop heads with s_nop
      offsets.append(at)
      got.append(ins)
    at += ins.size
  for k, (ins, text) in enumerate(zip(got, want)):
    mnemonic, _, target = text.partition(" ")
    if mnemonic.startswith(("s_branch", "s_cbranch")):  # LLVM prints a label, we print the dword offset
      assert ins.text.split()[0] == mnemonic
      assert offsets[k] + 4 + 4 * int(ins.text.split()[1]) == offsets[labels[target]], text
    else: assert ins.text == text, f"instruction {k} at {offsets[k]:#x}"
  assert decode(code, at).name == "s_code_end"  # the rest is LLVM's padding
  assert len([t for t in disassemble(code, wave64) if t != "s_nop 0"]) == len([t for t in want if t != "s_nop 0"])

def _word(x: int) -> bytes: return x.to_bytes(4, "little")

def test_unknown_opcode_names_encoding_opcode_and_offset():
  sop1_unused = 0xBE800000 | 0x7F << 8  # SOP1 opcode 127 has no instruction
  with pytest.raises(UnknownInstruction, match=r"SOP1 opcode 127 at offset 0x4"):
    decode(_word(0xBF800000) + _word(sop1_unused), 4)

def test_unmodelled_encoding_is_named():
  with pytest.raises(UnknownInstruction, match="MIMG"):
    decode(_word(0xF0000000) + _word(0), 0)

def test_literal_past_the_end_is_reported():
  v_mov_literal = 0x7E0002FF  # v_mov_b32_e32 v0, <literal>
  with pytest.raises(UnknownInstruction, match="past the end"):
    decode(_word(v_mov_literal), 0)
