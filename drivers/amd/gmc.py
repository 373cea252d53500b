"""The GPU's view of video memory without amdgpu.ko: one VMID's four-level page tables (512 entries of 8 bytes per
level, 4 KiB pages; amdgpu_vm_adjust_size's 48-bit default: three directory levels above the page tables), written
by the CPU into video memory, and the GFX hub's registers that point the VMID at them and flush its TLB (gfxhub_v3_0.c
gfxhub_v3_0_setup_vmid_config, gmc_v11_0.c gmc_v11_0_flush_gpu_tlb). Entries hold physical addresses: offsets into
video memory (amdgpu_gmc.c amdgpu_gmc_vram_mc2pa with MC_VM_FB_OFFSET 0)."""
from __future__ import annotations
from typing import Callable
import numpy as np
from drivers.amd.pci_gpu import wait_for

# gc_11_0_0_offset.h, GC segment 0 (contexts 1 apart for CNTL, 2 apart for the address pairs; engines 1 apart)
CONTEXT0_CNTL, CONTEXT0_PT_BASE_LO32, CONTEXT0_START_LO32, CONTEXT0_END_LO32 = 0x1688, 0x16F3, 0x1713, 0x1733
ENG0_REQ, ENG0_ACK, GART_ENGINE = 0x16AB, 0x16BD, 17  # "Use register 17 for GART"
FAULT_STATUS, FAULT_ADDR_LO32, FAULT_ADDR_HI32 = 0x15C8, 0x15C9, 0x15CA
MX_L1_TLB_CNTL, L2_CNTL = 0x167F, 0x15BC
# gc_11_0_0_sh_mask.h: GCVM_CONTEXT1_CNTL as setup_vmid_config leaves it (depth 3, block size 9 - 9, the fault defaults)
ENABLE_CONTEXT, DEPTH, FAULT_DEFAULTS = 1 << 0, 3 << 1, sum(1 << b for b in range(10, 23, 2))
INVALIDATE_ALL_LEVELS, CLEAR_FAULT = 0x00F80000, 1 << 24
# gfxhub_v3_0_init_tlb_regs: ENABLE_L1_TLB, SYSTEM_ACCESS_MODE 3, ENABLE_ADVANCED_DRIVER_MODEL, MTYPE UC (3); init_cache_regs:
# ENABLE_L2_CACHE, ENABLE_DEFAULT_PAGE_OUT_TO_SYSTEM_MEMORY (bit 11), CONTEXT1_IDENTITY_ACCESS_MODE 1 (bits 20:19)
L1_TLB_ON, L2_CACHE_ON = 1 << 0 | 3 << 3 | 1 << 6 | 3 << 11, 1 << 0 | 1 << 11 | 1 << 19  # INVALIDATE_L2_PTES, L2_PDE0..2, L1_PTES (gfxhub_v3_0_get_invalidate_req)
LAST_PAGE = (1 << 36) - 1           # max_pfn - 1: the whole 48-bit range
# amdgpu_vm.h
VALID, SYSTEM, EXECUTABLE, READABLE, WRITEABLE = 1 << 0, 1 << 1, 1 << 4, 1 << 5, 1 << 6
PTE_FLAGS = VALID | EXECUTABLE | READABLE | WRITEABLE
MTYPE_UC = 3 << 48  # AMDGPU_PTE_MTYPE_NV10(MTYPE_UC): system memory the CPU and the GPU both touch, never cached (navi10_enum.h)
PAGE, ENTRIES = 4096, 512
FLUSH_WAIT_S = 1.0

class PageTables:
  """A VMID's page tables. `alloc_table()` gives the video memory offset of a new zeroed 4 KiB table and
  `table_view(offset)` its 512 entries as the CPU sees them."""
  def __init__(self, alloc_table: Callable[[], int], table_view: Callable[[int], np.ndarray]):
    self.alloc_table, self.table_view = alloc_table, table_view
    self.root = alloc_table()
    self.children: dict[int, int] = {}  # table offset * 512 + index -> the child table's offset

  def map(self, va: int, physical: int, size: int, system: bool = False) -> None:
    """GPU VA [va, va + size) -> video memory [physical, ...), in 4 KiB pages; with `system`, system memory at bus
    address `physical` instead, uncached."""
    flags = PTE_FLAGS | (SYSTEM | MTYPE_UC if system else 0)
    for entries, done in self._entries(va, size):
      entries[:] = physical + (done + np.arange(len(entries), dtype=np.uint64)) * PAGE | flags

  def unmap(self, va: int, size: int) -> None:
    for entries, _ in self._entries(va, size): entries[:] = 0

  def _entries(self, va: int, size: int):
    """The page-table entries of [va, va + size), one last-level table's run at a time, each with the pages before it."""
    first, pages = va // PAGE, -(-size // PAGE)
    page = first
    while page < first + pages:
      n = min(ENTRIES - page % ENTRIES, first + pages - page)
      yield self.table_view(self._leaf_table(page))[page % ENTRIES:page % ENTRIES + n], page - first
      page += n

  def _leaf_table(self, page: int) -> int:
    """The page table holding `page`'s entry, making the directories on the way."""
    table = self.root
    for shift in (27, 18, 9):  # PDB2, PDB1, PDB0: 9 bits of page number each
      index = page >> shift & (ENTRIES - 1)
      if (child := self.children.get(table * ENTRIES + index)) is None:
        child = self.children[table * ENTRIES + index] = self.alloc_table()
        self.table_view(table)[index] = child | VALID
      table = child
    return table

def enable_vmid(write: Callable[[int, int], None], vmid: int, root: int) -> None:
  """Turn the hub's L1 TLB and L2 cache on and point `vmid` at page tables rooted at video memory offset `root`, over
  the whole 48-bit range."""
  write(MX_L1_TLB_CNTL, L1_TLB_ON)
  write(L2_CNTL, L2_CACHE_ON)
  write(CONTEXT0_PT_BASE_LO32 + 2 * vmid, root & 0xFFFFFFFF | VALID)
  write(CONTEXT0_PT_BASE_LO32 + 2 * vmid + 1, root >> 32)
  write(CONTEXT0_START_LO32 + 2 * vmid, 0)
  write(CONTEXT0_START_LO32 + 2 * vmid + 1, 0)
  write(CONTEXT0_END_LO32 + 2 * vmid, LAST_PAGE & 0xFFFFFFFF)
  write(CONTEXT0_END_LO32 + 2 * vmid + 1, LAST_PAGE >> 32)
  write(CONTEXT0_CNTL + vmid, ENABLE_CONTEXT | DEPTH | FAULT_DEFAULTS)

def flush_tlb(read: Callable[[int], int], write: Callable[[int, int], None], vmid: int) -> None:
  """Make page-table changes visible to `vmid` (the caller has flushed the HDP first); TimeoutError after FLUSH_WAIT_S."""
  write(ENG0_REQ + GART_ENGINE, INVALIDATE_ALL_LEVELS | 1 << vmid)
  if not wait_for(lambda: read(ENG0_ACK + GART_ENGINE), lambda v: v >> vmid & 1, FLUSH_WAIT_S)[0]:
    raise TimeoutError(f"the GFX hub didn't acknowledge the TLB flush of VMID {vmid} (GCVM_INVALIDATE_ENG17_ACK) within {FLUSH_WAIT_S} s")

def fault(read: Callable[[int], int]) -> tuple[int, int] | None:
  """(VMID, GPU VA of the page) of the last translation fault, or None."""
  if not (status := read(FAULT_STATUS)): return None
  return status >> 20 & 0xF, (read(FAULT_ADDR_LO32) | (read(FAULT_ADDR_HI32) & 0xF) << 32) << 12

def clear_fault(write: Callable[[int, int], None]) -> None:
  """Clear the recorded fault (GCVM_INVALIDATE_ENG0_REQ.CLEAR_PROTECTION_FAULT_STATUS_ADDR)."""
  write(ENG0_REQ + GART_ENGINE, CLEAR_FAULT)
