"""HSA code objects: tg's own linker from LLVM's relocatable AMDGPU object to the shared object (ET_DYN) ROCm's loader
expects, and the reader the AMD driver uses (kernel descriptors, kernel arguments from the metadata note).
Layout facts: llvm/docs/AMDGPUUsage.rst "ELF Code Object", "Kernel Descriptor", "Code Object V3+ Metadata";
ELF structures: the System V gABI (elf.h Elf64_Ehdr, Elf64_Phdr, Elf64_Shdr, Elf64_Sym, Elf64_Rela, Elf64_Dyn)."""
from __future__ import annotations
import struct
from dataclasses import dataclass, field

EM_AMDGPU, ELFOSABI_AMDGPU_HSA, ET_REL, ET_DYN = 0xE0, 64, 1, 3  # AMDGPUUsage.rst "Header"
NT_AMDGPU_METADATA = 32                                           # AMDGPUUsage.rst "Note Records"
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_HASH, SHT_DYNAMIC, SHT_NOTE, SHT_NOBITS, SHT_REL, SHT_DYNSYM = 1, 2, 3, 4, 5, 6, 7, 8, 9, 11
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
PT_LOAD, PT_DYNAMIC, PT_NOTE = 1, 2, 4
PF_X, PF_W, PF_R = 1, 2, 4
SHN_ABS = 0xFFF1
STB_GLOBAL, STB_WEAK = 1, 2
DT_NULL, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT = 0, 4, 5, 6, 10, 11
# llvm/include/llvm/BinaryFormat/ELFRelocs/AMDGPU.def; AMDGPUUsage.rst "Relocation Records": PC-relative ones resolve at link time
R_AMDGPU = {0: "R_AMDGPU_NONE", 1: "R_AMDGPU_ABS32_LO", 2: "R_AMDGPU_ABS32_HI", 3: "R_AMDGPU_ABS64", 4: "R_AMDGPU_REL32", 5: "R_AMDGPU_REL64",
            6: "R_AMDGPU_ABS32", 7: "R_AMDGPU_GOTPCREL", 8: "R_AMDGPU_GOTPCREL32_LO", 9: "R_AMDGPU_GOTPCREL32_HI",
            10: "R_AMDGPU_REL32_LO", 11: "R_AMDGPU_REL32_HI", 13: "R_AMDGPU_RELATIVE64", 14: "R_AMDGPU_REL16"}
REL_WRITERS = {4: ("<i", lambda v: v), 5: ("<q", lambda v: v), 10: ("<I", lambda v: v & 0xFFFFFFFF), 11: ("<I", lambda v: (v >> 32) & 0xFFFFFFFF)}
ABS_WRITERS = {1: ("<I", lambda v: v & 0xFFFFFFFF), 2: ("<I", lambda v: (v >> 32) & 0xFFFFFFFF), 3: ("<Q", lambda v: v), 6: ("<I", lambda v: v)}
PAGE, CODE_ALIGN, KD_SIZE = 0x1000, 256, 64
# kernel_code_properties bits (AMDHSAKernelDescriptor.h KERNEL_CODE_PROPERTY_*) whose inputs tg's driver never sets up
UNSUPPORTED_PROPERTIES = {1: "dispatch_ptr", 2: "queue_ptr", 4: "dispatch_id"}

# ---- reading ELF64 ----
@dataclass
class Section:
  name: str
  type: int
  flags: int
  addr: int
  offset: int
  size: int
  link: int
  info: int
  align: int
  entsize: int

@dataclass
class Symbol:
  name: str
  value: int
  size: int
  info: int
  other: int
  shndx: int
  @property
  def bind(self) -> int: return self.info >> 4

def _header(data: bytes, want_type: int) -> tuple:
  """(e_type, e_flags, e_phoff, e_shoff, e_phnum, e_shnum, e_shstrndx) of an AMDGPU ELF64 of type want_type."""
  if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1: raise ValueError("not a little-endian ELF64 file")
  e_type, machine = struct.unpack_from("<HH", data, 16)
  if machine != EM_AMDGPU: raise ValueError(f"ELF machine {machine:#x} is not EM_AMDGPU ({EM_AMDGPU:#x})")
  if data[7] != ELFOSABI_AMDGPU_HSA: raise ValueError(f"ELF OS ABI {data[7]} is not ELFOSABI_AMDGPU_HSA ({ELFOSABI_AMDGPU_HSA})")
  if e_type != want_type: raise ValueError(f"ELF type {e_type} where {want_type} ({'ET_REL' if want_type == ET_REL else 'ET_DYN'}) was expected")
  phoff, shoff, flags = struct.unpack_from("<QQI", data, 32)
  phnum, _, shnum, shstrndx = struct.unpack_from("<HHHH", data, 56)
  return e_type, flags, phoff, shoff, phnum, shnum, shstrndx

def _cstr(data: bytes, at: int) -> str: return data[at:data.index(b"\0", at)].decode()

def sections(data: bytes, want_type: int) -> list[Section]:
  _, _, _, shoff, _, shnum, shstrndx = _header(data, want_type)
  raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + 64 * i) for i in range(shnum)]
  names = raw[shstrndx][4]
  return [Section(_cstr(data, names + r[0]), *r[1:]) for r in raw]

def symbols(data: bytes, secs: list[Section], table: Section) -> list[Symbol]:
  strtab = secs[table.link].offset
  out = []
  for at in range(table.offset, table.offset + table.size, 24):
    name, info, other, shndx, value, size = struct.unpack_from("<IBBHQQ", data, at)
    out.append(Symbol(_cstr(data, strtab + name), value, size, info, other, shndx))
  return out

# ---- linking ----
def _align(x: int, a: int) -> int: return (x + max(a, 1) - 1) // max(a, 1) * max(a, 1)

def sysv_hash(name: bytes) -> int:
  """The ELF hash of a symbol name (System V gABI, "Hash Table")."""
  h = 0
  for c in name:
    h = (h << 4) + c
    g = h & 0xF0000000
    if g: h ^= g >> 24
    h &= ~g & 0xFFFFFFFF
  return h

class _Strings:
  def __init__(self): self.data, self.at = bytearray(b"\0"), {"": 0}
  def add(self, s: str) -> int:
    if s not in self.at:
      self.at[s] = len(self.data)
      self.data += s.encode() + b"\0"
    return self.at[s]

@dataclass
class _Out:
  """One output section: its bytes, where it goes, and its section header fields."""
  name: str
  type: int
  flags: int
  align: int
  data: bytearray = field(default_factory=bytearray)
  addr: int = 0
  link: int = 0
  info: int = 0
  entsize: int = 0

def _classify(s: Section) -> str:
  """Which output section an allocated input section joins; refuses what a tg code object can't carry."""
  if s.type == SHT_NOTE: return ".note"
  if s.flags & SHF_WRITE or s.type == SHT_NOBITS: raise ValueError(f"section {s.name} holds writable data, which a tg code object can't load")
  if s.type != SHT_PROGBITS: raise ValueError(f"allocated section {s.name} of type {s.type} is not one tg's linker places")
  return ".text" if s.flags & SHF_EXECINSTR else ".rodata"

def link(relocatable: bytes) -> bytes:
  """LLVM's relocatable AMDGPU object -> an ET_DYN HSA code object: three page-aligned PT_LOAD segments (read-only:
  headers, note, dynamic symbols, kernel descriptors; code; the dynamic table), PC-relative relocations applied."""
  secs = sections(relocatable, ET_REL)
  _, e_flags, *_ = _header(relocatable, ET_REL)
  outs = {n: _Out(n, t, f, a) for n, t, f, a in ((".note", SHT_NOTE, SHF_ALLOC, 4), (".dynsym", SHT_DYNSYM, SHF_ALLOC, 8),
                                                 (".hash", SHT_HASH, SHF_ALLOC, 4), (".dynstr", SHT_STRTAB, SHF_ALLOC, 1),
                                                 (".rodata", SHT_PROGBITS, SHF_ALLOC, KD_SIZE), (".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, CODE_ALIGN),
                                                 (".dynamic", SHT_DYNAMIC, SHF_ALLOC | SHF_WRITE, 8))}
  placed: dict[int, tuple[str, int]] = {}  # input section index -> (output section, offset in it)
  for i, s in enumerate(secs):
    if not s.flags & SHF_ALLOC or s.size == 0: continue
    out = outs[_classify(s)]
    start = _align(len(out.data), s.align)
    out.data += bytes(start - len(out.data)) + relocatable[s.offset:s.offset + s.size]
    out.align, placed[i] = max(out.align, s.align), (out.name, start)
  symtab = next((s for s in secs if s.type == SHT_SYMTAB), None)
  if symtab is None: raise ValueError("the relocatable object has no symbol table")
  syms = symbols(relocatable, secs, symtab)
  exported = [s for s in syms if s.bind in (STB_GLOBAL, STB_WEAK) and s.shndx in placed]
  name_at = _dynamic_symbols(outs, exported)
  _layout(outs)
  def address(sym: Symbol) -> int:
    if sym.shndx == SHN_ABS: return sym.value
    if sym.shndx not in placed: raise ValueError(f"symbol {sym.name or '(section)'} is undefined or in a section tg's linker drops")
    name, start = placed[sym.shndx]
    return outs[name].addr + start + sym.value
  for s in secs:
    if s.type == SHT_REL: raise ValueError(f"section {s.name}: SHT_REL relocations (without addends) are not produced by LLVM for AMDGPU")
    if s.type == SHT_RELA and s.info in placed: _relocate(relocatable, s, syms, outs[placed[s.info][0]], placed[s.info][1], address)
  homes = [placed[s.shndx][0] for s in exported]
  _finish_dynsym(outs, exported, name_at, homes, address)
  return _write(outs, e_flags, relocatable[7:9])

def _dynamic_symbols(outs: dict[str, _Out], exported: list[Symbol]) -> list[int]:
  """.dynstr and .hash now (their sizes fix the layout; returns each name's offset in .dynstr); .dynsym's values once
  addresses are known."""
  strs = _Strings()
  name_at = [strs.add(s.name) for s in exported]
  outs[".dynstr"].data += strs.data
  n = len(exported) + 1
  buckets, chains = [0] * max(n - 1, 1), [0] * n
  for i, s in enumerate(exported, start=1):  # chain each symbol in front of its bucket's list
    b = sysv_hash(s.name.encode()) % len(buckets)
    chains[i], buckets[b] = buckets[b], i
  outs[".hash"].data += struct.pack(f"<II{len(buckets)}I{n}I", len(buckets), n, *buckets, *chains)
  outs[".dynsym"].data += bytes(24 * n)
  outs[".dynamic"].data += bytes(16 * 6)
  return name_at

def _layout(outs: dict[str, _Out]) -> None:
  """Addresses equal file offsets; each segment starts on its own page, after the headers in the first."""
  at = 64 + 56 * 5
  for name in (".note", ".dynsym", ".hash", ".dynstr", ".rodata", ".text", ".dynamic"):
    o = outs[name]
    if name in (".text", ".dynamic"): at = _align(at, PAGE)
    o.addr = at = _align(at, o.align)
    at += len(o.data)

def _relocate(obj: bytes, rela: Section, syms: list[Symbol], out: _Out, start: int, address) -> None:
  for at in range(rela.offset, rela.offset + rela.size, 24):
    r_offset, r_info, addend = struct.unpack_from("<QQq", obj, at)
    kind, sym = r_info & 0xFFFFFFFF, syms[r_info >> 32]
    if kind == 0: continue
    where = start + r_offset
    if kind in REL_WRITERS: fmt, value = REL_WRITERS[kind][0], REL_WRITERS[kind][1](address(sym) + addend - (out.addr + where))
    elif kind in ABS_WRITERS and sym.shndx == SHN_ABS: fmt, value = ABS_WRITERS[kind][0], ABS_WRITERS[kind][1](sym.value + addend)
    else: raise ValueError(f"relocation {R_AMDGPU.get(kind, kind)} against {sym.name or '(section)'} at {rela.name}+{r_offset:#x} "
                           "needs the load address; tg's code objects have no dynamic relocations")
    struct.pack_into(fmt, out.data, where, value)

def _finish_dynsym(outs: dict[str, _Out], exported: list[Symbol], name_at: list[int], homes: list[str], address) -> None:
  strs, index = outs[".dynstr"], {n: i for i, n in enumerate(_section_order())}
  for i, (s, at, home) in enumerate(zip(exported, name_at, homes), start=1):
    struct.pack_into("<IBBHQQ", outs[".dynsym"].data, 24 * i, at, s.info, s.other, index[home], address(s), s.size)
  entries = [(DT_HASH, outs[".hash"].addr), (DT_STRTAB, strs.addr), (DT_SYMTAB, outs[".dynsym"].addr), (DT_STRSZ, len(strs.data)),
             (DT_SYMENT, 24), (DT_NULL, 0)]
  outs[".dynamic"].data[:] = b"".join(struct.pack("<qQ", *e) for e in entries)
  outs[".dynsym"].link, outs[".hash"].link = index[".dynstr"], index[".dynsym"]
  outs[".dynsym"].info, outs[".dynsym"].entsize, outs[".hash"].entsize = 1, 24, 4
  outs[".dynamic"].link, outs[".dynamic"].entsize = index[".dynstr"], 16

def _section_order() -> list[str]: return ["", ".note", ".dynsym", ".hash", ".dynstr", ".rodata", ".text", ".dynamic", ".shstrtab"]

def _write(outs: dict[str, _Out], e_flags: int, abi: bytes) -> bytes:
  order = [outs[n] for n in _section_order()[1:-1]]
  end = outs[".dynamic"].addr + len(outs[".dynamic"].data)
  image = bytearray(end)
  for o in order: image[o.addr:o.addr + len(o.data)] = o.data
  shstr = _Strings()
  for n in _section_order(): shstr.add(n)
  shstr_at = len(image)
  image += shstr.data
  shoff = _align(len(image), 8)
  image += bytes(shoff - len(image))
  headers = [bytes(64)] + [struct.pack("<IIQQQQIIQQ", shstr.add(o.name), o.type, o.flags, o.addr, o.addr, len(o.data), o.link, o.info, o.align, o.entsize)
                           for o in order]
  headers.append(struct.pack("<IIQQQQIIQQ", shstr.add(".shstrtab"), SHT_STRTAB, 0, 0, shstr_at, len(shstr.data), 0, 0, 1, 0))
  image += b"".join(headers)
  note, text, dyn = outs[".note"], outs[".text"], outs[".dynamic"]
  ro_end = outs[".rodata"].addr + len(outs[".rodata"].data)
  phdrs = [(PT_LOAD, PF_R, 0, ro_end, PAGE), (PT_LOAD, PF_R | PF_X, text.addr, len(text.data), PAGE),
           (PT_LOAD, PF_R | PF_W, dyn.addr, len(dyn.data), PAGE), (PT_DYNAMIC, PF_R | PF_W, dyn.addr, len(dyn.data), 8),
           (PT_NOTE, PF_R, note.addr, len(note.data), 4)]
  for i, (kind, flags, at, size, align) in enumerate(phdrs):
    struct.pack_into("<IIQQQQQQ", image, 64 + 56 * i, kind, flags, at, at, at, size, size, align)
  ident = b"\x7fELF\x02\x01\x01" + abi + bytes(7)  # OSABI and ABI version as LLVM wrote them (code object version)
  struct.pack_into("<16sHHIQQQIHHHHHH", image, 0, ident, ET_DYN, EM_AMDGPU, 1, 0, 64, shoff, e_flags, 64, 56, len(phdrs), 64,
                   len(headers), len(headers) - 1)
  return bytes(image)

# ---- the metadata note: MessagePack (msgpack spec: github.com/msgpack/msgpack/blob/master/spec.md) ----
def unpack_msgpack(data: bytes):
  """The one MessagePack value in `data` (maps, arrays, strings, binary, integers, floats, booleans, nil)."""
  value, end = _unpack(data, 0)
  if end != len(data): raise ValueError(f"msgpack: {len(data) - end} bytes after the value at offset {end}")
  return value

_FIXED = {0xCC: "<B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}
_SIZED = {0xD9: (">B", "str"), 0xDA: (">H", "str"), 0xDB: (">I", "str"), 0xC4: (">B", "bin"), 0xC5: (">H", "bin"), 0xC6: (">I", "bin"),
          0xDC: (">H", "array"), 0xDD: (">I", "array"), 0xDE: (">H", "map"), 0xDF: (">I", "map")}

def _unpack(data: bytes, at: int):
  if at >= len(data): raise ValueError(f"msgpack: value cut off at offset {at}")
  b = data[at]
  if b <= 0x7F or b >= 0xE0: return b - (256 if b >= 0xE0 else 0), at + 1
  if b in (0xC0, 0xC2, 0xC3): return {0xC0: None, 0xC2: False, 0xC3: True}[b], at + 1
  if b in _FIXED: return struct.unpack_from(_FIXED[b], data, at + 1)[0], at + 1 + struct.calcsize(_FIXED[b])
  if 0xA0 <= b <= 0xBF: kind, n, at = "str", b & 0x1F, at + 1
  elif 0x90 <= b <= 0x9F: kind, n, at = "array", b & 0x0F, at + 1
  elif 0x80 <= b <= 0x8F: kind, n, at = "map", b & 0x0F, at + 1
  elif b in _SIZED:
    fmt, kind = _SIZED[b]
    n, at = struct.unpack_from(fmt, data, at + 1)[0], at + 1 + struct.calcsize(fmt)
  else: raise ValueError(f"msgpack: type byte {b:#04x} at offset {at} is not one the AMDGPU metadata uses")
  if kind in ("str", "bin"):
    if at + n > len(data): raise ValueError(f"msgpack: {kind} of {n} bytes at offset {at} runs past the end")
    return (data[at:at + n].decode() if kind == "str" else data[at:at + n]), at + n
  items = []
  for _ in range(n * (2 if kind == "map" else 1)):
    item, at = _unpack(data, at)
    items.append(item)
  return (dict(zip(items[::2], items[1::2])) if kind == "map" else items), at

# ---- reading a linked code object ----
@dataclass(frozen=True)
class KernelDescriptor:
  """The 64-byte kernel descriptor (AMDHSAKernelDescriptor.h kernel_descriptor_t)."""
  group_segment_fixed_size: int
  private_segment_fixed_size: int
  kernarg_size: int
  kernel_code_entry_byte_offset: int
  rsrc3: int
  rsrc1: int
  rsrc2: int
  kernel_code_properties: int
  kernarg_preload: int
  FORMAT = "<III4xq20xIIIHH4x"  # offsets 0, 4, 8, 16, 44, 48, 52, 56, 58
  @staticmethod
  def unpack(raw: bytes) -> KernelDescriptor: return KernelDescriptor(*struct.unpack(KernelDescriptor.FORMAT, raw))
  @property
  def wave32(self) -> bool: return bool(self.kernel_code_properties >> 10 & 1)  # KERNEL_CODE_PROPERTY_ENABLE_WAVEFRONT_SIZE32
  @property
  def uses_kernarg_segment_ptr(self) -> bool: return bool(self.kernel_code_properties >> 3 & 1)
  @property
  def uses_private_segment_buffer(self) -> bool: return bool(self.kernel_code_properties & 1)
  @property
  def user_sgpr_count(self) -> int: return self.rsrc2 >> 1 & 0x1F                    # COMPUTE_PGM_RSRC2_USER_SGPR_COUNT
  @property
  def workgroup_ids(self) -> tuple[bool, bool, bool]: return tuple(bool(self.rsrc2 >> b & 1) for b in (7, 8, 9))  # ENABLE_SGPR_WORKGROUP_ID_X/Y/Z
  @property
  def workitem_id_dims(self) -> int: return (self.rsrc2 >> 11 & 3) + 1             # ENABLE_VGPR_WORKITEM_ID: 0 -> x only
  @property
  def private_segment(self) -> bool: return bool(self.rsrc2 & 1)                   # ENABLE_PRIVATE_SEGMENT (scratch)
  @property
  def vgpr_blocks(self) -> int: return self.rsrc1 & 0x3F                           # GRANULATED_WORKITEM_VGPR_COUNT
  @property
  def sgpr_blocks(self) -> int: return self.rsrc1 >> 6 & 0xF                       # GRANULATED_WAVEFRONT_SGPR_COUNT

@dataclass(frozen=True)
class Kernel:
  name: str
  kd_offset: int                    # the descriptor's offset in the image
  descriptor: KernelDescriptor
  args: list[tuple[int, int]]       # explicit kernel arguments: (offset, size) in the kernarg segment, in order
  kernarg_size: int
  wavefront_size: int
  sgpr_count: int
  vgpr_count: int
  @property
  def code_offset(self) -> int: return self.kd_offset + self.descriptor.kernel_code_entry_byte_offset

@dataclass(frozen=True)
class CodeObject:
  image: bytes                      # copy to GPU memory at a 4096-aligned base; code of k at base + kernels[k].code_offset
  kernels: dict[str, Kernel]

def _notes(data: bytes) -> list[tuple[str, int, bytes]]:
  """(owner, type, description) of each note record in a note segment's bytes (gABI "Note Section")."""
  out, at = [], 0
  while at + 12 <= len(data):
    namesz, descsz, kind = struct.unpack_from("<III", data, at)
    name = data[at + 12:at + 12 + namesz].rstrip(b"\0").decode()
    desc_at = at + 12 + _align(namesz, 4)
    out.append((name, kind, data[desc_at:desc_at + descsz]))
    at = desc_at + _align(descsz, 4)
  return out

def _image(lib: bytes, phoff: int, phnum: int) -> tuple[bytearray, list[tuple[int, int, int]]]:
  """The loaded image (PT_LOAD segments at their addresses) and the (offset, address, size) of each PT_NOTE."""
  heads = [struct.unpack_from("<IIQQQQQQ", lib, phoff + 56 * i) for i in range(phnum)]
  loads = [h for h in heads if h[0] == PT_LOAD]
  if not loads: raise ValueError("the code object has no PT_LOAD segment")
  image = bytearray(max(h[3] + h[6] for h in loads))
  for _, _, off, vaddr, _, filesz, _, _ in loads: image[vaddr:vaddr + filesz] = lib[off:off + filesz]
  return image, [(h[2], h[3], h[5]) for h in heads if h[0] == PT_NOTE]

def read(lib: bytes) -> CodeObject:
  """The kernels of a linked code object; ValueError if a kernel needs inputs tg's driver doesn't provide (dispatch or
  queue pointer, dispatch id, hidden kernel arguments)."""
  _, _, phoff, _, phnum, _, _ = _header(lib, ET_DYN)
  image, notes = _image(lib, phoff, phnum)
  metadata = [unpack_msgpack(desc) for off, _, size in notes for owner, kind, desc in _notes(lib[off:off + size])
              if owner == "AMDGPU" and kind == NT_AMDGPU_METADATA]
  if len(metadata) != 1: raise ValueError(f"the code object has {len(metadata)} NT_AMDGPU_METADATA notes, not 1")
  secs = sections(lib, ET_DYN)
  dynsym = next((s for s in secs if s.type == SHT_DYNSYM), None)
  if dynsym is None: raise ValueError("the code object has no .dynsym")
  kd_at = {s.name: s.value for s in symbols(lib, secs, dynsym) if s.name.endswith(".kd")}
  kernels = {}
  for meta in metadata[0].get("amdhsa.kernels", []):
    if meta[".symbol"] not in kd_at: raise ValueError(f"kernel {meta['.name']}: no dynamic symbol {meta['.symbol']}")
    kernels[meta[".name"]] = _kernel(meta, kd_at[meta[".symbol"]], bytes(image[kd_at[meta[".symbol"]]:][:KD_SIZE]))
  return CodeObject(bytes(image), kernels)

def _kernel(meta: dict, kd_offset: int, raw: bytes) -> Kernel:
  name, kd = meta[".name"], KernelDescriptor.unpack(raw)
  for bit, what in UNSUPPORTED_PROPERTIES.items():
    if kd.kernel_code_properties >> bit & 1: raise ValueError(f"kernel {name} asks for the {what} (kernel_code_properties bit {bit}), which tg's driver doesn't provide")
  if hidden := [a[".value_kind"] for a in meta.get(".args", []) if a[".value_kind"].startswith("hidden_")]:
    raise ValueError(f"kernel {name} has hidden kernel arguments {', '.join(hidden)}, which tg's driver doesn't fill")
  args = [(a[".offset"], a[".size"]) for a in meta.get(".args", [])]
  return Kernel(name, kd_offset, kd, args, meta[".kernarg_segment_size"], meta[".wavefront_size"], meta[".sgpr_count"], meta[".vgpr_count"])
