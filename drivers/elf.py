"""A loader for relocatable ELF objects (what LLVM emits): places the sections in executable memory, applies the
relocations, and reaches external functions (libm) through trampolines placed next to the code."""
from __future__ import annotations
import struct, weakref
from dataclasses import dataclass
from typing import Callable
from drivers import system

SHT_NOBITS, SHT_RELA, SHT_SYMTAB = 8, 4, 2
SHF_ALLOC = 0x2
EM_X86_64 = 62
# x86-64 relocation types (System V ABI, AMD64 supplement)
R_X86_64_64, R_X86_64_PC32, R_X86_64_PLT32, R_X86_64_GOTPCREL, R_X86_64_PC64 = 1, 2, 4, 9, 24
R_X86_64_GOTPCRELX, R_X86_64_REX_GOTPCRELX = 41, 42
_GOT_RELOCS = (R_X86_64_GOTPCREL, R_X86_64_GOTPCRELX, R_X86_64_REX_GOTPCRELX)
_TRAMPOLINE = bytes([0xFF, 0x25, 0, 0, 0, 0])  # jmp *0(%rip): jumps to the 8-byte address that follows
_SLOT = 16

class ElfError(RuntimeError): pass

@dataclass
class Section:
  name: str
  type: int
  flags: int
  offset: int
  size: int
  link: int
  info: int
  align: int
  entsize: int

def parse_sections(blob: bytes) -> tuple[int, list[Section]]:
  """(machine, sections) of an ELF64 little-endian object."""
  if blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1: raise ElfError("not a 64-bit little-endian ELF object")
  machine = struct.unpack_from("<H", blob, 18)[0]
  shoff, = struct.unpack_from("<Q", blob, 40)
  shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 58)
  raw = [struct.unpack_from("<IIQQQQIIQQ", blob, shoff + i * shentsize) for i in range(shnum)]
  strtab = raw[shstrndx][4]
  def name(off: int) -> str: return blob[strtab + off:blob.index(b"\0", strtab + off)].decode()
  return machine, [Section(name(r[0]), r[1], r[2], r[4], r[5], r[6], r[7], max(r[8], 1), r[9]) for r in raw]

class LoadedImage:
  """Code and data of one object file in executable memory; `symbols` maps defined names to addresses."""
  def __init__(self, blob: bytes, resolve: Callable[[str], int | None] = system.find_symbol):
    machine, sections = parse_sections(blob)
    if machine != EM_X86_64: raise ElfError(f"can't load code for ELF machine {machine} on this host (x86-64 only)")
    symtab = next((s for s in sections if s.type == SHT_SYMTAB), None)
    syms = [] if symtab is None else [struct.unpack_from("<IBBHQQ", blob, symtab.offset + i * 24) for i in range(symtab.size // 24)]
    strtab = sections[symtab.link] if symtab else None
    def sym_name(off: int) -> str: return blob[strtab.offset + off:blob.index(b"\0", strtab.offset + off)].decode()
    # place the allocated sections, then one slot per symbol that needs a trampoline or a GOT entry
    placed: dict[int, int] = {}
    size = 0
    for i, s in enumerate(sections):
      if s.flags & SHF_ALLOC and s.size:
        size = -(-size // s.align) * s.align
        placed[i], size = size, size + s.size
    relocs = [(sections[s.info], s) for s in sections if s.type == SHT_RELA and s.info in placed]
    entries = [struct.unpack_from("<QQq", blob, r.offset + k * 24) for _, r in relocs for k in range(r.size // 24)]
    slot_syms = sorted({info >> 32 for _, info, _ in entries if syms[info >> 32][3] == 0 or (info & 0xffffffff) in _GOT_RELOCS})
    slots_at = -(-size // _SLOT) * _SLOT
    self.size = -(-(slots_at + _SLOT * len(slot_syms)) // system.PAGE_SIZE) * system.PAGE_SIZE or system.PAGE_SIZE
    self.base = system.mmap_anonymous(self.size)
    mem = system.memoryview_at(self.base, self.size)
    for i, off in placed.items():
      if sections[i].type != SHT_NOBITS: mem[off:off + sections[i].size] = blob[sections[i].offset:sections[i].offset + sections[i].size]

    def sym_addr(k: int) -> int:
      _, info, _, shndx, value, _ = syms[k]
      if shndx != 0:
        if shndx not in placed: raise ElfError(f"symbol {sym_name(syms[k][0])!r} lives in an unloaded section")
        return self.base + placed[shndx] + value
      name = sym_name(syms[k][0])
      if (addr := resolve(name)) is None: raise ElfError(f"undefined symbol {name!r}")
      return addr
    slot_of = {k: self.base + slots_at + n * _SLOT for n, k in enumerate(slot_syms)}
    for k, slot in slot_of.items():
      struct.pack_into("<6sQ", mem, slot - self.base, _TRAMPOLINE, sym_addr(k))
    for target, rela in relocs:
      for k in range(rela.size // 24):
        r_off, info, addend = struct.unpack_from("<QQq", blob, rela.offset + k * 24)
        sym, kind = info >> 32, info & 0xffffffff
        where = placed[sections.index(target)] + r_off
        P = self.base + where
        if kind == R_X86_64_64: struct.pack_into("<Q", mem, where, (sym_addr(sym) + addend) % 2**64)
        elif kind == R_X86_64_PC64: struct.pack_into("<q", mem, where, sym_addr(sym) + addend - P)
        elif kind in (R_X86_64_PC32, R_X86_64_PLT32):
          S = slot_of[sym] if sym in slot_of else sym_addr(sym)
          struct.pack_into("<i", mem, where, _fits32(S + addend - P))
        elif kind in _GOT_RELOCS: struct.pack_into("<i", mem, where, _fits32(slot_of[sym] + 6 + addend - P))
        else: raise ElfError(f"unsupported x86-64 relocation type {kind} in section {target.name}")
    del mem
    system.mprotect(self.base, self.size, system.PROT_READ | system.PROT_EXEC)
    # not at exit: a kernel may still be running on the compute engine's thread then (the OS unmaps it anyway)
    weakref.finalize(self, system.munmap, self.base, self.size).atexit = False
    self.symbols = {sym_name(s[0]): self.base + placed[s[3]] + s[4] for s in syms if s[3] in placed and s[0]}

def _fits32(x: int) -> int:
  if not -2**31 <= x < 2**31: raise ElfError(f"relocation target {x:#x} is out of 32-bit range")
  return x
