"""What the NV model's GPU executes. It can't run SASS, so its compiler packs the PTX itself into a cubin-shaped ELF
that drivers/nv/cubin.py reads like one from ptxas: the kernel's .text is PROGRAM_MAGIC, a u32 length and the PTX
text, and .nv.info holds the launch facts ptxas would record for the same kernel (parameter bank offset and size,
registers, threads, barriers; docs/nv.md §4, §5). The GPU model (drivers/mock/nv/gpu.py) runs that PTX on the
reference interpreter (drivers/mock/nv/ptx_interpreter.py), so tests on DEV=MOCK+NV check the PTX renderer's output."""
from __future__ import annotations
import re, struct
from codegen.compiler import CompileError, Compiler
from drivers.nv.cubin import EIATTR_CBANK_PARAM_SIZE, EIATTR_MAX_THREADS, EIATTR_MIN_STACK_SIZE, EIATTR_NUM_BARRIERS, EIATTR_PARAM_CBANK
from drivers.nv.cubin import EIATTR_REGCOUNT, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL, EM_CUDA, STO_CUDA_ENTRY, STT_FUNC
from drivers.mock.nv.ptx_interpreter import PTXError, PTXModule

PROGRAM_MAGIC = b"TGPX"
REGISTERS = 32  # what the cubin reports; the interpreter has no register limit

def param_offset(sm: int) -> int:
  """Where kernel parameters start in constant bank 0 for SM number `sm` (86, 90, 100, ...)."""
  return 0x160 if sm < 90 else 0x210 if sm < 100 else 0x380

def pack_program(ptx: str) -> bytes:
  text = ptx.encode()
  return PROGRAM_MAGIC + struct.pack("<I", len(text)) + text

class MockCubinCompiler(Compiler):
  def __init__(self, arch: str):
    if not (m := re.fullmatch(r"sm_(\d+)[af]?", arch)): raise ValueError(f"bad NVIDIA arch {arch!r}: expected e.g. 'sm_90'")
    self.arch, self.sm = arch, int(m[1])
    super().__init__(f"nv-mock-cubin-{arch}")
  def compile(self, src: str) -> bytes:
    try: module = PTXModule(src)
    except PTXError as e: raise CompileError(f"PTX the NV model can't run: {e}") from None
    if len(module.entries) != 1: raise CompileError(f"the NV model compiles one kernel per module, this one has {len(module.entries)}")
    return build_cubin(self.sm, module.entries[0], module, src)

def _record(fmt: int, attr: int, *values: int, layout: str = "") -> bytes:
  """One .nv.info record: an 8- or 16-bit value (EIFMT_BVAL, EIFMT_HVAL) or `values` packed as `layout` (EIFMT_SVAL)."""
  if fmt in (EIFMT_BVAL, EIFMT_HVAL): return struct.pack("<BBH", fmt, attr, values[0])
  data = struct.pack("<" + layout, *values)
  return struct.pack("<BBH", fmt, attr, len(data)) + data

def build_cubin(sm: int, name: str, module: PTXModule, ptx: str) -> bytes:
  """An ELF64 cubin (ABI version 8, as ptxas 13 writes) with one kernel `name` whose .text is the PTX payload."""
  params, offset, text = module.param_size(name), param_offset(sm), pack_program(ptx)
  shared = module.shared_size(name) + (0x400 if module.shared_size(name) and sm >= 90 else 0)  # ptxas adds the reserved 1 KiB on sm_90+
  SYM_CBANK, SYM_KERNEL, SEC_SYMTAB, SEC_TEXT = 2, 3, 3, 6  # symbol and section indices, fixed by the tables below
  info = _record(EIFMT_SVAL, EIATTR_REGCOUNT, SYM_KERNEL, REGISTERS, layout="II") + _record(EIFMT_SVAL, EIATTR_MIN_STACK_SIZE, SYM_KERNEL, 0, layout="II")
  kinfo = _record(EIFMT_SVAL, EIATTR_MAX_THREADS, *(module.max_threads(name) or (1024, 1, 1)), layout="III")
  if params: kinfo += _record(EIFMT_SVAL, EIATTR_PARAM_CBANK, SYM_CBANK, offset, params, layout="IHH") + _record(EIFMT_HVAL, EIATTR_CBANK_PARAM_SIZE, params)
  if re.search(r"\bbar(\.sync|\.cta\.sync)?\b", ptx): kinfo += _record(EIFMT_BVAL, EIATTR_NUM_BARRIERS, 1)
  # symbols: null, the .text and .nv.constant0 section symbols, the kernel
  symtab = b"".join(struct.pack("<IBBHQQ", *sym) for sym in [(0, 0, 0, 0, 0, 0), (0, 3, 0, SEC_TEXT, 0, 0), (0, 3, 0, SEC_TEXT + 1, 0, 0),
                                                             (1, 0x10 | STT_FUNC, STO_CUDA_ENTRY, SEC_TEXT, 0, len(text))])
  # sections 2..: (name, type, flags, contents or NOBITS size, link, info, align, entsize); 1 is .shstrtab
  sections = [(".strtab", 3, 0, b"\0" + name.encode() + b"\0", 0, 0, 1, 0), (".symtab", 2, 0, symtab, 2, SYM_KERNEL, 8, 24),
              (".nv.info", 0x70000000, 0, info, SEC_SYMTAB, 0, 4, 0), (f".nv.info.{name}", 0x70000000, 0x40, kinfo, SEC_SYMTAB, SEC_TEXT, 4, 0),
              (f".text.{name}", 1, 0x6, text, SEC_SYMTAB, SYM_KERNEL, 128, 0),
              (f".nv.constant0.{name}", 1, 0x42, bytes(offset + params), 0, SEC_TEXT, 4, 0)]
  if shared: sections.append((f".nv.shared.{name}", 8, 0x43, shared, 0, SEC_TEXT, 16, 0))
  names = [".shstrtab"] + [sec[0] for sec in sections]
  shstrtab = b"\0" + b"".join(n.encode() + b"\0" for n in names)
  body, headers = bytearray(64), [bytes(64)]
  for (sname, kind, flags, data, link, sinfo, align, entsize) in [(".shstrtab", 3, 0, shstrtab, 0, 0, 1, 0)] + sections:
    body += bytes(-len(body) % align)
    at = shstrtab.index(b"\0" + sname.encode() + b"\0") + 1
    headers.append(struct.pack("<IIQQQQIIQQ", at, kind, flags, 0, len(body), data if isinstance(data, int) else len(data), link, sinfo, align, entsize))
    if not isinstance(data, int): body += data
  body += bytes(-len(body) % 8)
  flags = 0x6000000 | sm << 8 | (0x02 if sm >= 100 else 0x04)  # ptxas 13's e_flags: the SM in bits 15:8
  ident = b"\x7fELF" + bytes([2, 1, 1, 0x41, 8]) + bytes(7)  # ELF64, little endian, OSABI 0x41, ABI version 8
  body[:64] = ident + struct.pack("<HHIQQQIHHHHHH", 2, EM_CUDA, 1, 0, 0, len(body), flags, 64, 0, 0, 64, len(headers), 1)
  return bytes(body) + b"".join(headers)
