#!/usr/bin/env python3
"""Decode NVIDIA push buffers: every method write as class.METHOD = value with its fields by name, read with the NV
model's own class tables (drivers/mock/nv/class_headers.py, transcribed from NVIDIA's headers).

Input: what `DEBUG=7` prints for NV (one "HWQueue NV NVComputeQueue N words: ..." line per submission; other lines
are skipped), or a hex file of 32-bit words (whitespace or comma separated, 0x optional, # comments).
  DEBUG=7 DEV=MOCK+NV python3 -c "from tg import Tensor; (Tensor([1.0, 2.0]) + 1).realize()" > dump.txt
  python3 scripts/decode_pushbuf.py dump.txt"""
from __future__ import annotations
import argparse, os, re, signal, sys
from typing import Callable, Iterator
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from drivers.mock.nv import class_headers as hw
from drivers.mock.nv.gpu import ARCHS
from drivers.nv.pushbuf import SUBC_COMPUTE, SUBC_COPY, SUBC_HOST

DUMP_LINE = re.compile(r"^HWQueue (\S+) (\S+) (\d+) words:((?: [0-9a-f]+)*)$")
HOST_METHODS_END = 0x100  # methods below this offset are the channel's (host class) on every subchannel
# field values worth a name: (method, field) -> {value: name}
ENUMS = {("SEM_EXECUTE", "OPERATION"): {v: k for k, v in {"ACQUIRE": hw.SEM_ACQUIRE, "RELEASE": hw.SEM_RELEASE, "ACQ_STRICT_GEQ": hw.SEM_ACQ_STRICT_GEQ,
                                        "ACQ_CIRC_GEQ": hw.SEM_ACQ_CIRC_GEQ, "ACQ_AND": hw.SEM_ACQ_AND, "ACQ_NOR": hw.SEM_ACQ_NOR, "REDUCTION": hw.SEM_REDUCTION}.items()},
         ("SEND_SIGNALING_PCAS2_B", "PCAS_ACTION"): {v: k for k, v in hw.PCAS_ACTION.items()},
         ("LAUNCH_DMA", "DATA_TRANSFER_TYPE"): {hw.DMA_TRANSFER_NONE: "NONE", hw.DMA_TRANSFER_PIPELINED: "PIPELINED", hw.DMA_TRANSFER_NON_PIPELINED: "NON_PIPELINED"},
         ("LAUNCH_DMA", "SEMAPHORE_TYPE"): {hw.DMA_SEMAPHORE_NONE: "NONE", hw.DMA_SEMAPHORE_ONE_WORD: "ONE_WORD", hw.DMA_SEMAPHORE_FOUR_WORD: "FOUR_WORD"}}

class InputError(ValueError): pass

def submissions(text: str, source: str) -> Iterator[tuple[str, list[int]]]:
  """(label, words) of each submission in a DEBUG=7 dump, or one ("hex", words) for a hex file."""
  dumped = [(n, m) for n, line in enumerate(text.splitlines(), 1) if (m := DUMP_LINE.match(line))]
  if dumped:
    for n, m in dumped:
      words = [int(w, 16) for w in m[4].split()]
      if len(words) != int(m[3]): raise InputError(f"{source}:{n}: says {m[3]} words, holds {len(words)}")
      yield f"{m[1]} {m[2]}", words
    return
  words = []
  for n, line in enumerate(text.splitlines(), 1):
    for token in line.split("#", 1)[0].replace(",", " ").split():
      try: value = int(token, 16)
      except ValueError: raise InputError(f"{source}:{n}: {token!r} is not a hex word") from None
      if not 0 <= value <= 0xFFFFFFFF: raise InputError(f"{source}:{n}: {token} does not fit 32 bits")
      words.append(value)
  if not words: raise InputError(f"{source}: no push-buffer words (neither DEBUG=7 'HWQueue ... words:' lines nor hex words)")
  yield "hex", words

def fields(method: str, fmt: hw.Method, value: int) -> str:
  """The method's nonzero fields as NAME=value (named where the headers name the value)."""
  shown = []
  for name, bits in fmt.fields.items():
    v = bits.get(value)
    if v or (method, name) in ENUMS: shown.append(f"{name}={ENUMS.get((method, name), {}).get(v, hex(v))}")
  return " ".join(shown)

class Channel:
  """The classes bound to each subchannel of one channel: the architecture's defaults until SET_OBJECT binds another."""
  def __init__(self, arch: str):
    a = ARCHS[arch]
    self.host = hw.HOST_CLASSES[a.gpfifo[0]]
    self.bound = {SUBC_HOST: self.host, SUBC_COMPUTE: hw.COMPUTE_CLASSES[a.compute], SUBC_COPY: hw.COPY_CLASSES[a.dma]}
  def decode(self, subc: int, offset: int, value: int) -> str:
    cls = self.host if offset < HOST_METHODS_END else self.bound.get(subc)
    if cls is None: return f"subc {subc} {offset:#06x} = {value:#010x}  (no class bound to subchannel {subc})"
    name = cls.at.get(offset)
    if name is None: return f"subc {subc} {cls.name}.{offset:#06x} = {value:#010x}  (not in {cls.header})"
    if name == "SET_OBJECT" and (bound := hw.CLASSES.get(value & 0xFFFF)) is not None: self.bound[subc] = bound
    return f"subc {subc} {cls.name}.{name} = {value:#010x}  {fields(name, cls.methods[name], value)}".rstrip()

def decode(text: str, source: str, arch: str) -> Iterator[str]:
  channels: dict[str, Channel] = {}
  for i, (label, words) in enumerate(submissions(text, source)):
    yield f"-- submission {i}: {label}, {len(words)} words"
    channel = channels.setdefault(label, Channel(arch))
    try:
      for subc, offset, value in hw.method_writes(words): yield "  " + channel.decode(subc, offset, value)
    except hw.PushBufferError as e: raise InputError(f"{source}, submission {i} ({label}): {e}") from None

def decoder_parser(doc: str) -> argparse.ArgumentParser:
  """The command line every decoder script shares: its docstring as the help, and the input file."""
  ap = argparse.ArgumentParser(description=doc.split("\n\n")[0], epilog=doc.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("file", help="a DEBUG=7 dump or a hex file of words; - for stdin")
  return ap

def print_decoded(path: str, lines_of: Callable[[str], Iterator[str]]) -> int:
  """Print what `lines_of` makes of the file at `path` (- for stdin): 0, or 1 with the error on stderr."""
  signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # piped into head: stop quietly
  try:
    text = sys.stdin.read() if path == "-" else open(path).read()
    for line in lines_of(text): print(line)
  except (OSError, InputError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  return 0

def main(argv: list[str] | None = None) -> int:
  ap = decoder_parser(__doc__)
  ap.add_argument("--arch", choices=sorted(ARCHS), default="hopper",
                  help="the GPU whose channel, compute and copy classes subchannels 0, 1 and 4 hold until a SET_OBJECT says otherwise (default hopper)")
  args = ap.parse_args(argv)
  return print_decoded(args.file, lambda text: decode(text, args.file, args.arch))

if __name__ == "__main__": sys.exit(main())
