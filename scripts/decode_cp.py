#!/usr/bin/env python3
"""Decode Adreno command streams: type-4 register writes by register name (with the compute registers' fields) and
type-7 packets with their payloads (CP_LOAD_STATE6 state type/source/block, CP_EXEC_CS groups, CP_EVENT_WRITE
events and addresses, CP_WAIT_REG_MEM conditions, ...), read with the QCOM model's own tables
(drivers/mock/qcom/registers.py, transcribed from kgsl's adreno_pm4types.h and Mesa's adreno_pm4.xml and a6xx.xml).

Input: what `DEBUG=7` prints for QCOM (one "HWQueue QCOM QCOMComputeQueue N words: ..." line per submission; other
lines are skipped), or a hex file of 32-bit words (whitespace or comma separated, 0x optional, # comments).
  DEBUG=7 DEV=MOCK+QCOM python3 -c "from tg import Tensor; (Tensor([1.0, 2.0]) + 1).realize()" > dump.txt
  python3 scripts/decode_cp.py dump.txt
  python3 scripts/decode_cp.py --arch a740 words.hex"""
from __future__ import annotations
import os, sys
from typing import Iterator
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from drivers.mock.qcom import registers as hw
from drivers.mock.qcom.kgsl import ARCHS
from decode_pushbuf import InputError, decoder_parser, print_decoded, submissions

def register(gen: int, reg: int, value: int) -> str:
  name = hw.REG_NAMES[gen].get(reg, f"{reg:#06x}")
  fields = " ".join(f"{k}={v:#x}" for k, v in hw.fields_of(name, value).items() if v)
  return f"{name}={value:#x}" + (f" ({fields})" if fields else "")

def packets(words: list[int], gen: int) -> Iterator[str]:
  i = 0
  while i < len(words):
    header, kind = words[i], words[i] >> 28
    if kind == hw.TYPE4:
      count, reg = hw.field(header, *hw.PKT4_COUNT), hw.field(header, *hw.PKT4_REG)
      good = header >> hw.PKT4_COUNT_PARITY & 1 == hw.odd_parity(count) and header >> hw.PKT4_REG_PARITY & 1 == hw.odd_parity(hw.field(header, *hw.PKT4_PARITY_SPAN))
      text = " ".join(register(gen, reg + k, v) for k, v in enumerate(need(words, i, count)))
    elif kind == hw.TYPE7:
      count, opcode = hw.field(header, *hw.PKT7_COUNT), hw.field(header, *hw.PKT7_OPCODE)
      good = (not hw.field(header, *hw.PKT7_RESERVED) and header >> hw.PKT7_COUNT_PARITY & 1 == hw.odd_parity(count)
              and header >> hw.PKT7_OPCODE_PARITY & 1 == hw.odd_parity(opcode))
      name = hw.op_name(opcode, gen)
      text = f"{name} {describe(name, need(words, i, count), gen)}".rstrip()
    else: raise InputError(f"word {i} ({header:#010x}) is a type-{kind} header; a6xx/a7xx streams are type 4 and type 7")
    yield f"  {i:5d}: {text}" + ("" if good else "  [BAD PARITY]")
    i += 1 + count

def need(words: list[int], i: int, count: int) -> list[int]:
  if i + 1 + count > len(words): raise InputError(f"the packet at word {i} says {count} payload words, {len(words) - i - 1} follow")
  return words[i + 1:i + 1 + count]

def describe(name: str, p: list[int], gen: int) -> str:
  address = lambda at: f"{p[at] | p[at + 1] << 32:#x}" if len(p) > at + 1 else "?"
  if name.startswith("CP_LOAD_STATE6") and p:
    kind, src, block = hw.field(p[0], *hw.LS6_STATE_TYPE), hw.field(p[0], *hw.LS6_STATE_SRC), hw.field(p[0], *hw.LS6_STATE_BLOCK)
    where = f"from {address(1)}" if src == hw.SS6_INDIRECT else f"{len(p) - 1} dwords inline"
    return (f"{hw.ST6[kind]} {hw.SS6[src]} {hw.SB6.get(block, block)} dst_off {hw.field(p[0], *hw.LS6_DST_OFF)} "
            f"num_unit {hw.field(p[0], *hw.LS6_NUM_UNIT)} {where}")
  if name == "CP_EXEC_CS" and len(p) == 4: return f"groups {p[1]}x{p[2]}x{p[3]}"
  if name == "CP_EVENT_WRITE" and p:
    event = hw.EVENTS[6].get(hw.field(p[0], *hw.EV_EVENT), f"event {hw.field(p[0], *hw.EV_EVENT):#x}")
    if len(p) == 1: return event
    return f"{event} at {address(1)} " + ("timestamp" if p[0] >> hw.EV_TIMESTAMP & 1 else f"value {p[3]:#x}" if len(p) > 3 else "")
  if name == "CP_EVENT_WRITE7" and p:
    event = hw.EVENTS[7].get(hw.field(p[0], *hw.EV_EVENT), f"event {hw.field(p[0], *hw.EV_EVENT):#x}")
    if not p[0] >> hw.EV7_WRITE_ENABLED & 1: return event
    src = hw.EV7_SRC.get(hw.field(p[0], *hw.EV7_WRITE_SRC), "?")
    return f"{event} {src} at {address(1)}" + (f" payload {' '.join(f'{w:#x}' for w in p[3:])}" if len(p) > 3 else "")
  if name == "CP_WAIT_REG_MEM" and len(p) == hw.WAIT_PAYLOAD:
    func, poll = hw.FUNCTIONS.get(hw.field(p[0], *hw.WAIT_FUNCTION), ("?",))[0], hw.field(p[0], *hw.WAIT_POLL)
    target = f"[{address(1)}]" if poll == hw.POLL_MEMORY else hw.REG_NAMES[gen].get(p[1], f"reg {p[1]:#x}")
    return f"until {target} & {p[4]:#x} {func} {p[3]:#x}{' signed' if p[0] >> hw.WAIT_SIGNED & 1 else ''}"
  if name == "CP_MEM_WRITE" and len(p) >= 2: return f"[{address(0)}] = " + " ".join(f"{w:#x}" for w in p[2:])
  if name == "CP_REG_TO_MEM" and len(p) == 3:
    reg = hw.field(p[0], *hw.R2M_REG)
    return f"{hw.REG_NAMES[gen].get(reg, hex(reg))} x{max(hw.field(p[0], *hw.R2M_CNT), 1)}{' 64B' if p[0] >> hw.R2M_64B & 1 else ''} to {address(1)}"
  if name == "CP_MEM_TO_MEM" and len(p) >= 5:
    srcs = [("-" if i < 3 and p[0] >> i & 1 else "") + address(at) for i, at in enumerate(range(3, len(p) - 1, 2))]
    return f"[{address(1)}] = " + " + ".join(srcs) + (" (64-bit)" if p[0] >> hw.M2M_DOUBLE & 1 else "")
  if name == "CP_INDIRECT_BUFFER" and len(p) == 3: return f"at {address(0)} {hw.field(p[2], *hw.IB_SIZE)} dwords"
  if name == "CP_SET_MARKER" and p:
    return "IFPC" if p[0] >> hw.MARKER_MODE_BIT & 1 else hw.MARKERS.get(hw.field(p[0], *hw.MARKER_MODE), f"mode {p[0]:#x}")
  if name == "CP_NOP": return f"({len(p)} dwords)"
  return " ".join(f"{w:#x}" for w in p)

def decode(text: str, source: str, arch: str) -> Iterator[str]:
  gen, found = ARCHS[arch].gen, False
  for k, (label, words) in enumerate(submissions(text, source)):
    if label != "hex" and not label.split()[0].upper().startswith("QCOM"): continue   # another device's queue in the same dump
    found = True
    yield f"-- submission {k}: {label}, {len(words)} words"
    try: yield from packets(words, gen)
    except InputError as e: raise InputError(f"{source}, submission {k} ({label}): {e}") from None
  if not found: raise InputError(f"{source}: no QCOM submissions (DEBUG=7 'HWQueue QCOM ...' lines)")

def main(argv: list[str] | None = None) -> int:
  ap = decoder_parser(__doc__)
  ap.add_argument("--arch", choices=sorted(ARCHS), default="a630", help="the GPU (its register offsets and packet variants; default a630)")
  args = ap.parse_args(argv)
  return print_decoded(args.file, lambda text: decode(text, args.file, args.arch))

if __name__ == "__main__": sys.exit(main())
