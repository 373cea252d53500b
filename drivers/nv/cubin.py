"""Cubins (the ELF executables ptxas and nvJitLink make for NVIDIA GPUs, e_machine EM_CUDA) read into what a driver
needs to load and launch a kernel: one image to upload, each kernel's launch facts, and the relocations that bind the
image to the GPU address it is uploaded at.

The image holds every allocated section except the per-CTA and per-thread windows (.nv.shared*, .nv.local*): the code
(.text.<kernel>, and .text.<function> for calls that were not inlined), the constant banks (.nv.constantN;
.nv.constant0.<kernel> too, a template of the parameter bank that launches rebuild), initialized globals
(.nv.global.init) and zero-initialized globals (.nv.global, NOBITS: zeros in the image). Each section starts on a
128-byte boundary (QMD constant-bank addresses need 64). .nv.info, .debug_* and notes are not loaded, and relocations
that patch them are ignored.

Facts read off ptxas 12.9 and 13.0 cubins for sm_80..sm_120 (see tests/drivers/nv/test_cubin.py):
- e_flags: ELF ABI version 7 (EI_OSABI 0x33; ptxas 12.x below sm_100) keeps the SM in bits 7:0 and the virtual arch in
  23:16 (sm_90: 0x5a055a); ABI version 8 (EI_OSABI 0x41; ptxas 13, and 12.x for sm_100+) keeps it in bits 15:8
  (sm_90: 0x6005a04, sm_100: 0x6006402, sm_120: 0x6007802).
- .nv.info records: u8 format, u8 attribute, then 2 bytes: nothing (format 1), a u8 (2) or a u16 (3) value, or (4) a
  u16 length and that many bytes after them; records start 4-aligned. The global .nv.info holds per-function records
  keyed by symbol index (REGCOUNT 0x2F, FRAME_SIZE 0x11, MIN_STACK_SIZE 0x12: u32 symbol, u32 value); .nv.info.<k>
  holds PARAM_CBANK 0x0A (u32 symbol of .nv.constant0.<k>, u16 offset, u16 size; absent without parameters),
  CBANK_PARAM_SIZE 0x19, MAX_THREADS 0x05 (.maxntid) and REQNTID 0x10 (.reqntid) as 3 x u32, NUM_BARRIERS 0x4C (u8;
  written by ptxas 13, not 12.x).
- Relocations (REL up to sm_89, RELA from sm_90; ptxas leaves the patched fields zero, so REL entries carry no addend):
  R_CUDA_64 (2) and R_CUDA_G64 (4, a generic address: for global memory the same as its address) write 64 bits at the
  offset; R_CUDA_ABS32_LO_32 / _HI_32 (0x38/0x39) point at the start of a 16-byte instruction and write the low / high
  32 bits of the address into its bits 63:32, the 32-bit immediate of (U)MOV. ptxas reaches globals through a pointer
  table in bank 4 (R_CUDA_64) and uses LO/HI pairs only for -g return addresses; nvJitLink puts globals' addresses
  into the code with LO/HI pairs (and adds a .nv.rel.action section, not loaded)."""
from __future__ import annotations
import re, struct
from dataclasses import dataclass
from drivers.elf import SHF_ALLOC, SHT_NOBITS, SHT_RELA, SHT_SYMTAB, ElfError, Section, parse_sections

EM_CUDA = 190
SHT_PROGBITS, SHT_REL = 1, 9
STT_FUNC, STO_CUDA_ENTRY = 2, 0x10
SECTION_ALIGN = 128
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
EIATTR_MAX_THREADS, EIATTR_PARAM_CBANK, EIATTR_REQNTID, EIATTR_MIN_STACK_SIZE = 0x05, 0x0A, 0x10, 0x12
EIATTR_CBANK_PARAM_SIZE, EIATTR_REGCOUNT, EIATTR_NUM_BARRIERS = 0x19, 0x2F, 0x4C
R_CUDA_NONE = 0
# supported relocation type -> (name, first bit, width, right shift): the field gets (address >> shift) in `width` bits
RELOCATIONS = {0x02: ("R_CUDA_64", 0, 64, 0), 0x04: ("R_CUDA_G64", 0, 64, 0),
               0x38: ("R_CUDA_ABS32_LO_32", 32, 32, 0), 0x39: ("R_CUDA_ABS32_HI_32", 32, 32, 32)}
# other types' names (ptxas -g emits 0x3A below sm_90 and 0x4B from sm_90 for calls), for the error message
_UNSUPPORTED = {0x01: "R_CUDA_32", 0x03: "R_CUDA_G32", 0x06: "R_CUDA_TEX_HEADER_INDEX", 0x23: "R_CUDA_FUNC_DESC_64",
                0x34: "R_CUDA_SURF_HEADER_INDEX", 0x37: "R_CUDA_ABS32_32", 0x3A: "R_CUDA_ABS47_34",
                0x3E: "R_CUDA_FUNC_DESC32_LO_32", 0x3F: "R_CUDA_FUNC_DESC32_HI_32", 0x4B: "R_CUDA_ABS55_16_34"}

class CubinError(ElfError): pass

@dataclass(frozen=True)
class KernelInfo:
  """One kernel's launch facts. Offsets are into Cubin.image; sizes are bytes."""
  name: str
  entry: int                     # image offset of the first instruction (the QMD program address is base + entry)
  code_size: int                 # size of .text.<name> (for instruction prefetch)
  registers: int                 # registers per thread (REGCOUNT)
  stack_size: int                # per-thread local memory the code uses (MIN_STACK_SIZE), local arrays included
  local_size: int                # .nv.local.<name>, per thread (ptxas executables have none: it is in stack_size)
  param_offset: int              # where the parameters start in constant bank 0 (0x160 sm_8x, 0x210 sm_90, 0x380 sm_100+)
  param_size: int                # parameter bytes
  cbank0_size: int               # size of constant bank 0: param_offset + param_size
  shared_size: int               # .nv.shared.<name>: on sm_90+ it already includes the 1 KiB reserved at offset 0
  max_threads: tuple[int, int, int] | None   # .maxntid
  req_threads: tuple[int, int, int] | None   # .reqntid
  barriers: int | None           # NUM_BARRIERS; None where the compiler doesn't record it
  const_banks: dict[int, tuple[int, int]]    # bank N >= 1 -> (image offset, size)

@dataclass(frozen=True)
class Relocation:
  at: int      # image offset of the patched field
  type: int
  target: int  # image offset the address points at (symbol + addend)

def _records(blob: bytes, sec: Section) -> list[tuple[int, int | bytes]]:
  """(attribute, value) for each record of a .nv.info section."""
  out: list[tuple[int, int | bytes]] = []
  pos = 0
  while pos + 4 <= sec.size:
    fmt, attr, half = struct.unpack_from("<BBH", blob, sec.offset + pos)
    if fmt == EIFMT_SVAL:
      out.append((attr, blob[sec.offset + pos + 4:sec.offset + pos + 4 + half]))
      pos += 4 + -(-half // 4) * 4
    elif fmt in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
      out.append((attr, {EIFMT_NVAL: 0, EIFMT_BVAL: half & 0xff, EIFMT_HVAL: half}[fmt]))
      pos += 4
    else: raise CubinError(f"{sec.name}: unknown record format {fmt} at offset {pos:#x}")
  return out

def _dims(recs: dict[int, int | bytes], attr: int) -> tuple[int, int, int] | None:
  return struct.unpack_from("<III", recs[attr]) if attr in recs else None

def _reloc_name(kind: int) -> str:
  return RELOCATIONS[kind][0] if kind in RELOCATIONS else f"{_UNSUPPORTED.get(kind, 'type')} ({kind:#x})"

class Cubin:
  """A parsed cubin: `.kernels`, `.kernel(name)`, `.image` (unrelocated), `.link(base)`, `.sections`, `.sm`."""
  def __init__(self, blob: bytes):
    blob = bytes(blob)
    if blob[:4] != b"\x7fELF": raise CubinError(f"not a cubin: it starts with {blob[:4]!r}, not the ELF magic b'\\x7fELF'")
    try: machine, secs = parse_sections(blob)
    except (ElfError, struct.error, ValueError, IndexError) as e: raise CubinError(f"not a cubin: malformed ELF ({e})") from None
    if machine != EM_CUDA: raise CubinError(f"not a cubin: ELF machine {machine}, not EM_CUDA ({EM_CUDA})")
    abi, flags = blob[8], struct.unpack_from("<I", blob, 48)[0]
    self.sm = (flags >> 8 & 0xff) if abi >= 8 else flags & 0xff
    self.e_flags = flags

    placed: dict[int, int] = {}  # section index -> image offset
    size = 0
    for i, s in enumerate(secs):
      if s.flags & SHF_ALLOC and (s.type == SHT_PROGBITS or s.type == SHT_NOBITS and not s.name.startswith((".nv.shared", ".nv.local"))):
        size = -(-size // max(SECTION_ALIGN, s.align)) * max(SECTION_ALIGN, s.align)
        placed[i], size = size, size + s.size
    image = bytearray(size)
    for i, off in placed.items():
      if secs[i].type == SHT_PROGBITS: image[off:off + secs[i].size] = blob[secs[i].offset:secs[i].offset + secs[i].size]
    self.image = bytes(image)
    self.sections = {secs[i].name: off for i, off in placed.items()}

    symtab = next((s for s in secs if s.type == SHT_SYMTAB), None)
    syms = [] if symtab is None else [struct.unpack_from("<IBBHQQ", blob, symtab.offset + k * 24) for k in range(symtab.size // 24)]
    def sym_name(k: int) -> str:
      at = secs[symtab.link].offset + syms[k][0]
      return blob[at:blob.index(b"\0", at)].decode()
    def sym_offset(k: int, where: str) -> int:
      shndx, value = syms[k][3], syms[k][4]
      if shndx == 0: raise CubinError(f"relocation in {where} refers to the undefined symbol {sym_name(k)!r}")
      if shndx not in placed:
        raise CubinError(f"relocation in {where} refers to {sym_name(k)!r} in {secs[shndx].name}, which is not loaded")
      return placed[shndx] + value

    self.relocations: list[Relocation] = []
    for rs in secs:
      if rs.type not in (SHT_REL, SHT_RELA) or rs.info not in placed: continue
      target, entsize = secs[rs.info], 24 if rs.type == SHT_RELA else 16
      for k in range(rs.size // entsize):
        r_offset, info = struct.unpack_from("<QQ", blob, rs.offset + k * entsize)
        addend = struct.unpack_from("<q", blob, rs.offset + k * entsize + 16)[0] if rs.type == SHT_RELA else 0
        kind, sym = info & 0xffffffff, info >> 32
        if kind == R_CUDA_NONE: continue
        if kind not in RELOCATIONS:
          raise CubinError(f"unsupported relocation {_reloc_name(kind)} in {target.name} at offset {r_offset:#x} (symbol {sym_name(sym)!r})")
        if r_offset + 8 > target.size:  # every supported field lies in the 8 bytes at the offset
          raise CubinError(f"relocation {_reloc_name(kind)} at offset {r_offset:#x} runs past the end of {target.name}")
        self.relocations.append(Relocation(placed[rs.info] + r_offset, kind, sym_offset(sym, target.name) + addend))

    # per-function records of the global .nv.info (and any .nv.info.<k>) are keyed by symbol index
    by_sym: dict[tuple[int, int], int] = {}
    for sec in secs:
      if sec.name == ".nv.info" or sec.name.startswith(".nv.info."):
        for attr, value in _records(blob, sec):
          if attr in (EIATTR_REGCOUNT, EIATTR_MIN_STACK_SIZE) and isinstance(value, bytes) and len(value) >= 8:
            by_sym[(attr, struct.unpack_from("<I", value)[0])] = struct.unpack_from("<I", value, 4)[0]
    named = {sec.name: sec for sec in secs}
    def size_of(name: str) -> int: return named[name].size if name in named else 0
    # constant banks N >= 1: .nv.constantN is every kernel's, .nv.constantN.<k> one kernel's (listed last, so it wins)
    banks = sorted((int(m[1]), m[2] or "", off, secs[i].size) for i, off in placed.items()
                   if (m := re.fullmatch(r"\.nv\.constant(\d+)(?:\.(.+))?", secs[i].name)) and int(m[1]) >= 1)
    self._kernels: dict[str, KernelInfo] = {}
    for k, (_, info, other, shndx, value, _) in enumerate(syms):
      if info & 0xf != STT_FUNC or not other & STO_CUDA_ENTRY: continue
      name = sym_name(k)
      if shndx not in placed or secs[shndx].name != f".text.{name}": raise CubinError(f"kernel {name!r} has no .text.{name} section")
      recs = dict(_records(blob, named[f".nv.info.{name}"])) if f".nv.info.{name}" in named else {}
      cbank0 = size_of(f".nv.constant0.{name}")
      param_offset, param_size = struct.unpack_from("<HH", recs[EIATTR_PARAM_CBANK], 4) if EIATTR_PARAM_CBANK in recs else (cbank0, 0)
      self._kernels[name] = KernelInfo(
        name=name, entry=placed[shndx] + value, code_size=secs[shndx].size,
        registers=by_sym.get((EIATTR_REGCOUNT, k), 0), stack_size=by_sym.get((EIATTR_MIN_STACK_SIZE, k), 0),
        local_size=size_of(f".nv.local.{name}"), param_offset=param_offset,
        param_size=recs.get(EIATTR_CBANK_PARAM_SIZE, param_size), cbank0_size=cbank0, shared_size=size_of(f".nv.shared.{name}"),
        max_threads=_dims(recs, EIATTR_MAX_THREADS), req_threads=_dims(recs, EIATTR_REQNTID), barriers=recs.get(EIATTR_NUM_BARRIERS),
        const_banks={bank: (off, size) for bank, owner, off, size in banks if owner in ("", name)})

  @property
  def kernels(self) -> list[str]: return list(self._kernels)

  def kernel(self, name: str) -> KernelInfo:
    if name not in self._kernels: raise CubinError(f"no kernel {name!r} in this cubin; it has: {', '.join(self.kernels) or 'none'}")
    return self._kernels[name]

  def link(self, base: int) -> bytes:
    """The image with every relocation applied, for upload at GPU address `base` (128-byte aligned)."""
    if base < 0 or base % SECTION_ALIGN or base + len(self.image) > 2**64:
      raise CubinError(f"can't place the image at {base:#x}: it needs a {SECTION_ALIGN}-byte aligned 64-bit address")
    out = bytearray(self.image)
    for r in self.relocations:
      _, lo, width, shift = RELOCATIONS[r.type]
      mask = (2**width - 1) << lo
      word = int.from_bytes(out[r.at:r.at + 8], "little")
      out[r.at:r.at + 8] = (word & ~mask | ((base + r.target) >> shift << lo) & mask).to_bytes(8, "little")
    return bytes(out)
