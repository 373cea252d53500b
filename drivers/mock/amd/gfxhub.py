"""The GFX hub of an RDNA3 GPU (GC 11.0.0's GCVM registers): how the command processor, the shader core and SDMA
reach video memory through a VMID's page tables, as a driver without amdgpu.ko must set them up. Its rules:
- nothing translates until the L1 TLB and the L2 cache are on, as gfxhub_v3_0.c init_tlb_regs and init_cache_regs
  leave them (GCMC_VM_MX_L1_TLB_CNTL.ENABLE_L1_TLB with SYSTEM_ACCESS_MODE 3, GCVM_L2_CNTL.ENABLE_L2_CACHE);
- a VMID translates only while its context is enabled (GCVM_CONTEXTn_CNTL.ENABLE_CONTEXT), between its START and
  END page numbers (inclusive, 4 KiB pages: gfxhub_v3_0.c gfxhub_v3_0_setup_vmid_config);
- the walk starts at CONTEXTn_PAGE_TABLE_BASE_ADDR, a physical address with VALID in bit 0, and goes down
  PAGE_TABLE_DEPTH directory levels of 512 entries each to a table of 2^(9 + PAGE_TABLE_BLOCK_SIZE) PTEs
  (amdgpu_vm_pt.c amdgpu_vm_pt_level_shift; depth 0 is one flat table, context 0's GART);
- entries hold physical addresses in bits 47:12 and VALID in bit 0; a PDB0 entry with PDE_PTE (bit 54) maps its
  whole 2 MiB (the comment above gmc_v11_0.c gmc_v11_0_get_vm_pde, amdgpu_vm.h's bits); a SYSTEM (bit 1) page is
  system memory at a bus address: it reaches memory only where something on the bus answers there (`system_memory`:
  behind a USB bridge, the bridge's SRAM), else the page is missing; directories are always in video memory;
- translations are cached: page-table writes reach the engines only after a TLB invalidation for that VMID through
  GCVM_INVALIDATE_ENGx_REQ, which answers in ENGx_ACK's PER_VMID bits (gmc_v11_0.c gmc_v11_0_flush_gpu_tlb);
- a faulting access leaves its page and VMID in GCVM_L2_PROTECTION_FAULT_ADDR_LO32/HI32 and _STATUS (field layout
  gc_11_0_0_sh_mask.h; that the address is the page number, address >> 12, is the model's reading of the IV the
  fault interrupt carries: gmc_v11_0.c gmc_v11_0_process_interrupt). Permission bits (R/W/X) are not checked.
Physical addresses are offsets into video memory (MC_VM_FB_OFFSET reads 0: amdgpu_gmc.c amdgpu_gmc_vram_mc2pa)."""
from __future__ import annotations
from typing import Callable
import numpy as np
from drivers import system
from drivers.mock.amd.gpu import Region

# gc_11_0_0_offset.h, BASE_IDX 0 (contexts 1 apart for CNTL, 2 apart for the 64-bit address pairs)
CONTEXT0_CNTL, CONTEXT0_PT_BASE_LO32, CONTEXT0_START_LO32, CONTEXT0_END_LO32 = 0x1688, 0x16F3, 0x1713, 0x1733
ENG0_REQ, ENG0_ACK, ENGINES = 0x16AB, 0x16BD, 18
FAULT_STATUS, FAULT_ADDR_LO32, FAULT_ADDR_HI32 = 0x15C8, 0x15C9, 0x15CA
MX_L1_TLB_CNTL, L2_CNTL = 0x167F, 0x15BC
VMIDS = 16
# field layouts (gc_11_0_0_sh_mask.h)
ENABLE_CONTEXT, DEPTH_SHIFT, BLOCK_SHIFT = 1 << 0, 1, 3
ENABLE_L1_TLB, SYSTEM_ACCESS_MODE, ENABLE_L2_CACHE = 1 << 0, 3 << 3, 1 << 0
FAULT_MAPPING_ERROR, FAULT_VMID_SHIFT, CLEAR_FAULT = 1 << 8, 20, 1 << 24  # CLEAR_FAULT: ENGx_REQ.CLEAR_PROTECTION_FAULT_STATUS_ADDR
# amdgpu_vm.h
VALID, SYSTEM, PDE_PTE, ADDRESS = 1 << 0, 1 << 1, 1 << 54, 0x0000_FFFF_FFFF_F000
PAGE = 4096

def registers() -> list[int]:
  """The offsets (from GC's segment 0) the hub answers."""
  pairs = [base + 2 * v + half for base in (CONTEXT0_PT_BASE_LO32, CONTEXT0_START_LO32, CONTEXT0_END_LO32) for v in range(VMIDS) for half in (0, 1)]
  return [*range(CONTEXT0_CNTL, CONTEXT0_CNTL + VMIDS), *pairs, *range(ENG0_REQ, ENG0_REQ + ENGINES), *range(ENG0_ACK, ENG0_ACK + ENGINES),
          FAULT_STATUS, FAULT_ADDR_LO32, FAULT_ADDR_HI32, MX_L1_TLB_CNTL, L2_CNTL]

class GFXHub:
  """`vram`: video memory; `installed(vmid, regions)` gets each VMID's translations (GPU VA -> host memory) when an
  invalidation makes them current; `system_memory(bus address, size)`: the host memory a system page reaches, or None."""
  def __init__(self, vram: memoryview, installed: Callable[[int, list[Region]], None]):
    self.vram, self.installed = vram, installed
    self.system_memory: Callable[[int, int], int | None] = lambda bus, size: None
    self.vram_address = system.address_of(vram)
    self.regs = dict.fromkeys(registers(), 0)
    self.problems: list[str] = []  # entries a walk skipped: why each VMID's pages are missing

  def read(self, reg: int) -> int: return self.regs[reg]
  def write(self, reg: int, value: int) -> None:
    if ENG0_ACK <= reg < ENG0_ACK + ENGINES or reg in (FAULT_STATUS, FAULT_ADDR_LO32, FAULT_ADDR_HI32): return  # read-only
    self.regs[reg] = value
    if ENG0_REQ <= reg < ENG0_REQ + ENGINES:
      if value & CLEAR_FAULT: self.regs[FAULT_STATUS] = self.regs[FAULT_ADDR_LO32] = self.regs[FAULT_ADDR_HI32] = 0
      vmids = [v for v in range(VMIDS) if value >> v & 1]
      for v in vmids: self.installed(v, self.walk(v))
      self.regs[ENG0_ACK + reg - ENG0_REQ] = value & 0xFFFF

  def pair(self, base: int, vmid: int) -> int: return self.regs[base + 2 * vmid] | self.regs[base + 2 * vmid + 1] << 32

  def fault(self, vmid: int, address: int) -> None:
    """A translation fault at GPU VA `address` in `vmid`."""
    self.regs[FAULT_STATUS] = FAULT_MAPPING_ERROR | vmid << FAULT_VMID_SHIFT
    self.regs[FAULT_ADDR_LO32], self.regs[FAULT_ADDR_HI32] = address >> 12 & 0xFFFFFFFF, address >> 44 & 0xF

  # ---- the walk
  def walk(self, vmid: int) -> list[Region]:
    """Every page `vmid` maps now, as runs of consecutive pages that are consecutive in video memory too."""
    tlb = self.regs[MX_L1_TLB_CNTL]
    if not tlb & ENABLE_L1_TLB or tlb & SYSTEM_ACCESS_MODE != SYSTEM_ACCESS_MODE or not self.regs[L2_CNTL] & ENABLE_L2_CACHE:
      self.problems.append(f"VMID {vmid}: the L1 TLB (GCMC_VM_MX_L1_TLB_CNTL {tlb:#x}) or the L2 cache (GCVM_L2_CNTL {self.regs[L2_CNTL]:#x}) is off")
      return []
    cntl = self.regs[CONTEXT0_CNTL + vmid]
    if not cntl & ENABLE_CONTEXT: return []
    depth, block = cntl >> DEPTH_SHIFT & 0x3, 9 + (cntl >> BLOCK_SHIFT & 0xF)
    root = self.pair(CONTEXT0_PT_BASE_LO32, vmid)
    first, last = self.pair(CONTEXT0_START_LO32, vmid), self.pair(CONTEXT0_END_LO32, vmid)
    if not root & VALID:
      self.problems.append(f"VMID {vmid}: the page table base {root:#x} has no VALID bit")
      return []
    runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (first pages, physical addresses, page counts)
    system_pages: list[tuple[int, int]] = []                   # (page, bus address) of SYSTEM pages
    self._table(vmid, root & ADDRESS, depth, 0, block, first if depth == 0 else 0, first, last, runs, system_pages)
    return sorted(self._coalesce(runs) + self._system_regions(vmid, system_pages), key=lambda r: r.va)

  def _entries(self, vmid: int, address: int, count: int) -> np.ndarray | None:
    if address + 8 * count > len(self.vram):
      self.problems.append(f"VMID {vmid}: a page table at {address:#x} lies outside video memory")
      return None
    return np.frombuffer(self.vram, np.uint64, count, address)

  def _table(self, vmid: int, address: int, depth: int, level: int, block: int, base: int, first: int, last: int, out: list, system_pages: list) -> None:
    """The entries of the table at `address`, whose first entry maps page `base`, that fall in pages [first, last]."""
    shift = 0 if level == depth else 9 * (depth - 1 - level) + block  # pages one entry spans, as a power of two
    if depth == 0: count = last - first + 1                            # context 0's flat table starts at START
    else: count = (1 << block) if level == depth else 512 if level else max(1, -(-(last + 1) >> shift))
    lo, hi = max(first - base, 0) >> shift, min(count - 1, (last - base) >> shift)
    if hi < lo or (entries := self._entries(vmid, address, count)) is None: return
    index = np.nonzero(entries[lo:hi + 1] & VALID)[0] + lo
    valid = entries[index]
    in_system = (valid & SYSTEM) != 0
    if level == depth: system_pages += [(base + i, e & ADDRESS) for i, e in zip(index[in_system].tolist(), valid[in_system].tolist())]
    else:
      for i in index[in_system]: self.problems.append(f"VMID {vmid}: the directory entry for page {base + (int(i) << shift):#x} points into system memory")
    index, valid = index[~in_system], valid[~in_system]
    if level == depth:  # page table entries, all at once
      out.append((base + index.astype(np.int64), (valid & ADDRESS).astype(np.int64), np.ones(len(index), np.int64)))
      return
    for i, entry in zip(index.tolist(), valid.tolist()):
      start = base + (i << shift)
      if not entry & PDE_PTE: self._table(vmid, entry & ADDRESS, depth, level + 1, block, start, first, last, out, system_pages)
      elif level == depth - 1: out.append((np.array([start]), np.array([entry & ADDRESS]), np.array([1 << shift])))  # PDE0 as PTE: its whole span
      else: self.problems.append(f"VMID {vmid}: PDE_PTE above PDB0 at page {start:#x}")

  def _system_regions(self, vmid: int, pages: list[tuple[int, int]]) -> list[Region]:
    """System pages as regions of host memory, consecutive ones merged; a page nothing on the bus answers is missing."""
    regions: list[Region] = []
    for page, bus in pages:
      if (host := self.system_memory(bus, PAGE)) is None:
        self.problems.append(f"VMID {vmid}: page {page:#x} is system memory at bus address {bus:#x}, where nothing answers")
      elif regions and regions[-1].va + regions[-1].size == page * PAGE and regions[-1].host + regions[-1].size == host:
        regions[-1] = Region(regions[-1].va, regions[-1].size + PAGE, regions[-1].host)
      else: regions.append(Region(page * PAGE, PAGE, host))
    return regions

  def _coalesce(self, runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> list[Region]:
    """Consecutive pages that are consecutive in video memory too, as one region each."""
    if not runs: return []
    page, physical, n = (np.concatenate(parts) for parts in zip(*runs))
    order = np.argsort(page, kind="stable")
    page, physical, n = page[order], physical[order], n[order]
    inside = physical + n * PAGE <= len(self.vram)
    for p, a in zip(page[~inside].tolist(), physical[~inside].tolist()): self.problems.append(f"page {p:#x} points at {a:#x}, outside video memory")
    page, physical, n = page[inside], physical[inside], n[inside]
    if not len(page): return []
    starts = np.concatenate([[True], (page[1:] != page[:-1] + n[:-1]) | (physical[1:] != physical[:-1] + n[:-1] * PAGE)])
    first = np.nonzero(starts)[0]
    sizes = np.add.reduceat(n, first)
    return [Region(int(page[i]) * PAGE, int(size) * PAGE, self.vram_address + int(physical[i])) for i, size in zip(first.tolist(), sizes.tolist())]
