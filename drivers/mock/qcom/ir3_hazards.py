"""The sync rules a program must obey, tracked per fiber (so divergent paths each keep their own history) and checked
as each instruction runs. Written from Mesa's ir3 legalize/delay passes, which decide where a correct program needs
them:
- ir3_legalize.c legalize_block: a register written by a global load (ldg, is_load && !is_local_mem_load) or a texture
  fetch (isam, is_tex_or_prefetch) needs (sy) on the first instruction that reads or rewrites it; one written by an SFU
  op (cat4, is_sfu) or a local-memory load (ldl, ir3.h is_local_mem_load) needs (ss).
- A register read by a cat4/cat5/cat6 instruction ("tex/sfu/mem ... not always immediately consume their src
  register(s)", ir3.h is_war_hazard_producer) must not be written again before the read is done: after a store (stg,
  stl, stib: is_store) or an (ss) producer (cat4, ldl) only (ss) says so (needs_ss_war); after a (sy) producer (ldg,
  isam: ir3.h is_sy_producer) (ss) or (sy) does (needs_ss_or_sy_war).
- After a barrier (is_barrier: bar, fence) the next instruction gets both (ss) and (sy): here, the fiber must meet an
  (ss) and a (sy) (on nops or on the instruction) before any instruction other than nop. (ss)/(sy) wait for everything
  pending of their kind.
- ir3_delay.c ir3_delayslots + ir3_src_read_delay: a cat1-cat3 result read by cat0 flow, cat4, cat5 or cat6 needs 6
  delay slots, by the third source of mad*/madsh* 1, by any other ALU op 3. Slots are counted as legalize counts them
  (ir3_delay.c count_instruction): each cat1-3 instruction and each cat0 other than jump/br fills 1 + repeat + (nopN).
- ir3_legalize.c resolve_jumps/mark_jp: an instruction a branch or jump lands on carries (jp) (checked when a fiber takes
  the branch; Mesa also marks the fall-through after a conditional branch, which is not required here)."""
from __future__ import annotations
import numpy as np
from drivers.mock.qcom.ir3_decode import Instr, Operand
from drivers.mock.qcom.ir3_faults import ShaderHazard

NEVER = -(1 << 40)
LDG, LDL, SFU, TEX = 1, 2, 3, 4                                # what a register waits for
WAITS = {LDG: "a global load (ldg) needs (sy)", LDL: "a local load (ldl) needs (ss)", SFU: "a cat4 (SFU) result needs (ss)",
         TEX: "a texture fetch (isam) needs (sy)"}
SY_WAITS = (LDG, TEX)                                          # the producers (sy) waits for; (ss) waits for the others
WAR_SS, WAR_SS_OR_SY = 1, 2                                    # bits: a pending read that (ss) / (ss) or (sy) ends
BAR_SS, BAR_SY = 1, 2

class _File:
  """Per register row and fiber: when its ALU producer finished (clock), what sync it waits for, which kinds of
  pending cat4-6 reads (WAR_* bits) it has. `waiting`/`read_late`: whether any row may have either (False only when
  none has), so most instructions skip those checks."""
  def __init__(self, rows: int, fibers: int):
    self.done = np.full((rows, fibers), NEVER, np.int64)
    self.wait = np.zeros((rows, fibers), np.uint8)
    self.war = np.zeros((rows, fibers), np.uint8)
    self.waiting = self.read_late = False

class Hazards:
  def __init__(self, full_rows: int, half_rows: int, fibers: int):
    self.files = {"reg": _File(full_rows, fibers), "half": _File(half_rows, fibers), "pred": _File(4, fibers)}
    self.clock = np.zeros(fibers, np.int64)
    self.bar = np.zeros(fibers, np.uint8)

  def begin(self, ins: Instr, sel) -> None:
    """Apply the instruction's (sy)/(ss), then the after-barrier rule."""
    if ins.sy or ins.ss:
      for f in self.files.values():
        if f.waiting:
          w = f.wait[:, sel]
          sy_wait = (w == SY_WAITS[0]) | (w == SY_WAITS[1])
          if ins.sy: w = np.where(sy_wait, 0, w)
          if ins.ss: w = np.where(sy_wait, w, 0)
          f.wait[:, sel] = w
          f.waiting = bool(f.wait.any())
        if f.read_late:
          if ins.ss: f.war[:, sel] = 0
          else: f.war[:, sel] &= np.uint8(~WAR_SS_OR_SY & 0xFF)
          f.read_late = bool(f.war.any())
      self.bar[sel] &= ~np.uint8((BAR_SY if ins.sy else 0) | (BAR_SS if ins.ss else 0))
    if ins.name != "nop" and self.bar[sel].any():
      miss = int(np.bitwise_or.reduce(self.bar[sel]))
      need = " and ".join(n for n, b in (("(ss)", BAR_SS), ("(sy)", BAR_SY)) if miss & b)
      raise ShaderHazard(ins.pc, f"{ins.text}: first instruction after a barrier lacks {need} (ir3_legalize.c legalize_block is_barrier)")

  def read(self, ins: Instr, op: Operand, rows: range, sel, need: int) -> None:
    """A source register read: pending sync, then delay slots."""
    f = self.files[op.kind]
    for row in rows:
      if f.waiting and (w := f.wait[row, sel]).any():
        raise ShaderHazard(ins.pc, f"{ins.text}: reads {_name(op.kind, row)}, written by {WAITS[int(w.max())]} (ir3_legalize.c legalize_block)")
      short = self.clock[sel] - f.done[row, sel]
      if (short < need).any():
        have = int(short.min())
        raise ShaderHazard(ins.pc, f"{ins.text}: reads {_name(op.kind, row)} {have} slot(s) after its ALU producer, needs {need} "
                                   "(ir3_delay.c ir3_delayslots)")

  def write(self, ins: Instr, kind: str, rows: range, sel) -> None:
    """A destination write: the register must not still wait for a load/SFU nor be read by a pending cat4-6 op."""
    f = self.files[kind]
    for row in rows:
      if f.waiting and (w := f.wait[row, sel]).any():
        raise ShaderHazard(ins.pc, f"{ins.text}: overwrites {_name(kind, row)} while {WAITS[int(w.max())]} (ir3_legalize.c legalize_block)")
      if f.read_late and (war := int(np.bitwise_or.reduce(f.war[row, sel], axis=None))):
        need = "(ss) (ir3_legalize.c needs_ss_war)" if war & WAR_SS else "(ss) or (sy) (ir3_legalize.c needs_ss_or_sy_war)"
        raise ShaderHazard(ins.pc, f"{ins.text}: overwrites {_name(kind, row)} still read by an earlier cat4/cat5/cat6 instruction "
                                   f"without {need}")

  def produced(self, ins: Instr, kind: str, rows: range, sel) -> None:
    """Record the producer of a written register: ALU (delay slots), ldg/isam (sy), ldl/cat4 (ss)."""
    f = self.files[kind]
    for row in rows:
      if 1 <= ins.cat <= 3: f.done[row, sel] = self.clock[sel] + 1 + ins.repeat
      else:
        f.done[row, sel] = NEVER
        f.wait[row, sel] = SFU if ins.cat == 4 else TEX if ins.cat == 5 else LDL if ins.name == "ldl" else LDG
        f.waiting = True

  def consumed(self, kind: str, rows: range, sel, war: int) -> None:
    """A cat4/cat5/cat6 source: it must not be rewritten before the sync `war` names."""
    f = self.files[kind]
    for row in rows: f.war[row, sel] |= np.uint8(war)
    f.read_late = True

  def barrier(self, sel) -> None: self.bar[sel] = BAR_SS | BAR_SY

  def advance(self, ins: Instr, sel) -> None:
    """ir3_delay.c count_instruction: cat1-3 and cat0 except jump/br fill delay slots."""
    if 1 <= ins.cat <= 3 or (ins.cat == 0 and ins.name not in ("jump", "br")): self.clock[sel] += 1 + ins.repeat + ins.nop

def war_kind(reader: Instr) -> int:
  """Which sync ends a cat4-6 instruction's pending source reads (ir3_legalize.c legalize_block is_war_hazard_producer):
  (ss) or (sy) after a (sy) producer (ldg, isam), else (ss)."""
  return WAR_SS_OR_SY if reader.cat == 5 or reader.name in ("ldg", "ldg.a") else WAR_SS

def need(consumer: Instr, n: int) -> int:
  """Delay slots an ALU result needs before `consumer` reads it as source n (ir3_delay.c ir3_delayslots)."""
  if consumer.cat in (0, 4, 5, 6): return 6
  if n == 2 and consumer.name.startswith(("mad", "madsh")): return 1
  return 3

def _name(kind: str, row: int) -> str:
  return f"p0.{'xyzw'[row]}" if kind == "pred" else f"{'h' if kind == 'half' else ''}r{row >> 2}.{'xyzw'[row & 3]}"
