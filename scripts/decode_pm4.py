#!/usr/bin/env python3
"""Decode AMD command streams: PM4 packets of compute queues (registers by name, RELEASE_MEM/WAIT_REG_MEM/DISPATCH
fields) and SDMA packets of copy queues, read with the AMD model's own tables (drivers/mock/amd/packets.py,
transcribed from amdgpu's nvd.h, soc15d.h, sdma_v6_0_0_pkt_open.h and the gc register headers).

Input: what `DEBUG=7` prints for AMD (one "HWQueue AMD AMDComputeQueue N words: ..." line per submission; other lines
are skipped), or a hex file of 32-bit words (then --engine says which kind).
  DEBUG=7 DEV=MOCK+AMD python3 -c "from tg import Tensor; (Tensor([1.0, 2.0]) + 1).realize()" > dump.txt
  python3 scripts/decode_pm4.py dump.txt"""
from __future__ import annotations
import os, sys
from typing import Iterator
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from drivers.mock.amd import packets as hw
from drivers.mock.amd.gpu import ARCHS
from decode_pushbuf import InputError, decoder_parser, print_decoded, submissions

DATA_SEL = {hw.DATA_SEL_NONE: "none", hw.DATA_SEL_LOW32: "low32", hw.DATA_SEL_64: "64-bit", hw.DATA_SEL_CLOCK: "GPU clock"}
FUNCTION = {0: "always", 1: "<", 2: "<=", 3: "==", 4: "!=", 5: ">=", 6: ">"}

def register_names(family: str) -> dict[int, str]:
  names = {addr: name for name, addr in hw.REG.items()}
  names[hw.RSRC3[family]] = "COMPUTE_PGM_RSRC3"
  names.update({hw.REG["COMPUTE_USER_DATA_0"] + i: f"COMPUTE_USER_DATA_{i}" for i in range(hw.USER_DATA_COUNT)})
  return names

def pm4(words: list[int], family: str) -> Iterator[str]:
  regs, i = register_names(family), 0
  while i < len(words):
    if words[i] == hw.PM4_TYPE2_FILLER:
      yield f"  {i:5d}: type-2 filler"
      i += 1
      continue
    kind, opcode, n = hw.pm4_header(words[i])
    if kind != hw.PM4_TYPE3: raise InputError(f"word {i} ({words[i]:#010x}) is a type-{kind} header; compute queues take type 3")
    if i + 1 + n > len(words): raise InputError(f"the packet at word {i} says {n} payload words, {len(words) - i - 1} follow")
    body, name = words[i + 1:i + 1 + n], hw.OP_NAME.get(opcode, f"opcode {opcode:#x}")
    yield f"  {i:5d}: {name} " + describe(name, body, regs)
    i += 1 + n

def describe(name: str, p: list[int], regs: dict[int, str]) -> str:
  address = lambda at: f"{p[at] | p[at + 1] << 32:#x}"
  if name in ("SET_SH_REG", "SET_UCONFIG_REG"):
    start = (hw.SH_REG_START if name == "SET_SH_REG" else hw.UCONFIG_REG_START) + p[0]
    return " ".join(f"{regs.get(start + k, hex(start + k))}={v:#x}" for k, v in enumerate(p[1:]))
  if name == "RELEASE_MEM":
    return (f"event {hw.field(p[0], 0, 6):#x} index {hw.field(p[0], 8, 4)} data {DATA_SEL.get(hw.field(p[1], *hw.RELEASE_DATA_SEL), '?')} "
            f"int_sel {hw.field(p[1], *hw.RELEASE_INT_SEL)} at {address(2)} value {p[4] | p[5] << 32:#x}" +
            (f" interrupt context {p[6]:#x}" if hw.field(p[1], *hw.RELEASE_INT_SEL) else ""))
  if name == "WAIT_REG_MEM":
    return f"until [{address(1)}] & {p[4]:#x} {FUNCTION[hw.field(p[0], *hw.WAIT_FUNCTION)]} {p[3]:#x} ({'memory' if hw.field(p[0], *hw.WAIT_MEM_SPACE) else 'register'})"
  if name == "DISPATCH_DIRECT":
    return f"groups {p[0]}x{p[1]}x{p[2]} initiator {p[3]:#x}{' wave32' if p[3] >> hw.INIT_CS_W32_EN & 1 else ''}"
  if name == "INDIRECT_BUFFER": return f"at {address(0)} {hw.field(p[2], *hw.IB_SIZE)} dwords{' chain' if p[2] >> hw.IB_CHAIN & 1 else ''}"
  return " ".join(f"{w:#x}" for w in p)

SDMA_LENGTH = {"NOP": 1, "COPY": 7, "FENCE": 4, "TRAP": 2, "POLL_REGMEM": 6, "TIMESTAMP": 3}

def sdma(words: list[int]) -> Iterator[str]:
  i = 0
  while i < len(words):
    head = words[i]
    name = hw.SDMA_OP_NAME.get(head & 0xFF)
    if name == "WRITE" and i + 3 < len(words): n = 4 + words[i + 3] + 1
    elif name in SDMA_LENGTH: n = SDMA_LENGTH[name]
    else: raise InputError(f"word {i} ({head:#010x}): SDMA op {head & 0xFF} is not one the model's tables know")
    if i + n > len(words): raise InputError(f"the {name} packet at word {i} needs {n} words, {len(words) - i} follow")
    p = words[i + 1:i + n]
    if name == "COPY": text = f"COPY_LINEAR {p[0] + 1} bytes from {p[2] | p[3] << 32:#x} to {p[4] | p[5] << 32:#x}"
    elif name == "FENCE": text = f"FENCE [{p[0] | p[1] << 32:#x}] = {p[2]:#x}"
    elif name == "POLL_REGMEM": text = f"POLL_REGMEM until [{p[0] | p[1] << 32:#x}] & {p[3]:#x} {FUNCTION[hw.field(head, *hw.SDMA_POLL_FUNC)]} {p[2]:#x}"
    elif name == "TIMESTAMP": text = f"TIMESTAMP to {p[0] | p[1] << 32:#x}"
    elif name == "TRAP": text = f"TRAP context {hw.field(p[0], *hw.SDMA_TRAP_CONTEXT)}"
    elif name == "WRITE": text = f"WRITE [{p[0] | p[1] << 32:#x}] = " + " ".join(f"{w:#x}" for w in p[3:])
    else: text = name
    yield f"  {i:5d}: {text}"
    i += n

def decode(text: str, source: str, arch: str, engine: str | None = None) -> Iterator[str]:
  family = ARCHS[arch].family
  for k, (label, words) in enumerate(submissions(text, source)):
    kind = engine or ("sdma" if label.endswith("CopyQueue") else "pm4" if label.endswith("ComputeQueue") else None)
    if kind is None: raise InputError(f"{source}: submission {k} ({label}) is no AMD queue's; for a hex file say --engine pm4 or sdma")
    yield f"-- submission {k}: {label}, {len(words)} words ({kind.upper()})"
    try: yield from (pm4(words, family) if kind == "pm4" else sdma(words))
    except InputError as e: raise InputError(f"{source}, submission {k} ({label}): {e}") from None

def main(argv: list[str] | None = None) -> int:
  ap = decoder_parser(__doc__)
  ap.add_argument("--arch", choices=sorted(ARCHS), default="gfx1100", help="the GPU (its register offsets and packet lengths; default gfx1100)")
  ap.add_argument("--engine", choices=("pm4", "sdma"), help="what a hex file holds (a DEBUG=7 dump names its queues)")
  args = ap.parse_args(argv)
  return print_decoded(args.file, lambda text: decode(text, args.file, args.arch, args.engine))

if __name__ == "__main__": sys.exit(main())
