"""The ir3 shader core of the QCOM model: run_dispatch executes every fiber of a CP_EXEC_CS launch as the machine code
the driver loaded (decoded once per code blob by ir3_decode), vectorised with numpy: each register component is one
array over the fibers of a batch of workgroups, each fiber has its own PC, and every step runs the fibers whose PC is
lowest, so fibers that diverged at a `br` meet again where their paths join. `bar` holds a fiber until no fiber of its
workgroup is still running; `end` retires it. Semantics: ir3_alu (ALU), ir3_memory (cat6 global/local memory),
ir3_image (isam, stib.b against descriptors.Bindings); sync rules: ir3_hazards.

Sync rules worth knowing, each following Mesa (ir3_legalize.c legalize_block, ir3.h is_local_mem_load/is_sy_producer):
ldl results need (ss), not (sy) (ldg and isam results need (sy)); registers read by cat4/cat5/cat6 instructions need
(ss) before they are rewritten, or (sy) where the reader was ldg or isam; the first instruction after `bar`/`fence`
other than nop needs (ss) and (sy) (cat5 and cat6 have no (ss) bit: put `(ss)(sy)nop` after the barrier). No rule
orders a fiber's own stl before its ldl. (rptN) runs on nop only. A half-precision read of a const (hcN.c) takes the
low 16 bits of that 32-bit const, as does a half immediate."""
from __future__ import annotations
import numpy as np
from drivers.mock.qcom import ir3_alu as alu
from drivers.mock.qcom.ir3_decode import CAT3, FLUT, Instr, Operand, decode_program
from drivers.mock.qcom.ir3_faults import GPUFault, ShaderHazard
from drivers.mock.qcom.descriptors import Bindings
from drivers.mock.qcom.ir3_hazards import Hazards, need, war_kind
from drivers.mock.qcom.ir3_image import OPS as IMAGE_OPS
from drivers.mock.qcom.ir3_memory import OPS as MEMORY_OPS

__all__ = ["run_dispatch", "ShaderHazard", "GPUFault"]
BATCH_FIBERS = 16384
STEP_LIMIT = 1_000_000
_NO_PC = np.iinfo(np.int64).max  # the PC a fiber that is not ready sorts at
UNUSED_REGID = 0xFC                                                  # a6xx.xml: regid 0xfc = not written
CAT3_FULL = dict(CAT3.values())                                      # ir3-cat3.xml: each opcode's FULL
OPS = {**MEMORY_OPS, **IMAGE_OPS}                                    # cat5/cat6 instructions by decoded name

def run_dispatch(code: bytes, gen: int, groups: tuple[int, int, int], local: tuple[int, int, int], consts: np.ndarray,
                 memory, full_regs: int, half_regs: int, shared_bytes: int, wgid_regid: int, localid_regid: int,
                 bindings: Bindings | None = None) -> None:
  """Execute every fiber of the dispatch; ShaderHazard or GPUFault on the first violation. `bindings`: the texture,
  sampler and UAV state (none loaded and SP_CS_CONFIG 0 when omitted)."""
  program = decode_program(bytes(code), gen)
  lx, ly, lz = local
  per_group = lx * ly * lz
  ids = [(x, y, z) for z in range(groups[2]) for y in range(groups[1]) for x in range(groups[0])]
  step = max(1, BATCH_FIBERS // max(1, per_group))
  consts = np.asarray(consts, np.uint32).ravel()
  bindings = bindings if bindings is not None else Bindings()
  with np.errstate(all="ignore"):
    for start in range(0, len(ids), step):
      b = _Batch(program, gen, ids[start:start + step], local, consts, memory, full_regs, half_regs, shared_bytes, bindings)
      b.initial(wgid_regid, localid_regid)
      b.run()

class _Batch:
  """The fibers of a few workgroups: register files, per-fiber PC and state, local memory, sync bookkeeping."""
  def __init__(self, program: tuple[Instr, ...], gen: int, ids: list, local: tuple, consts: np.ndarray, memory,
               full_regs: int, half_regs: int, shared_bytes: int, bindings: Bindings):
    per = local[0] * local[1] * local[2]
    self.program, self.gen, self.ids, self.local, self.consts, self.memory = program, gen, ids, local, consts, memory
    self.bindings = bindings
    self.n = n = len(ids) * per
    self.full = np.zeros((full_regs * 4, n), np.uint32)
    self.half = np.zeros((half_regs * 4, n), np.uint16)
    self.pred = np.zeros((4, n), np.uint32)
    self.footprint = {"reg": (full_regs, "full"), "half": (half_regs, "half")}
    self.hz = Hazards(full_regs * 4, half_regs * 4, n)
    self.pc = np.zeros(n, np.int64)
    self.alive = np.ones(n, bool)
    self.waiting = np.zeros(n, bool)
    self.group = np.repeat(np.arange(len(ids)), per)
    self.shared = np.zeros((len(ids), shared_bytes), np.uint8)
    self.pending: list = []

  def initial(self, wgid_regid: int, localid_regid: int) -> None:
    """Work group id and local id into 3 consecutive full registers each (regid = reg*4+comp)."""
    t = np.tile(np.arange(self.local[0] * self.local[1] * self.local[2]), len(self.ids))
    lid = (t % self.local[0], t // self.local[0] % self.local[1], t // (self.local[0] * self.local[1]))
    wg = np.asarray(self.ids, np.uint32)[self.group].T
    for regid, vals in ((wgid_regid, wg), (localid_regid, lid)):
      if regid >= UNUSED_REGID: continue
      if regid + 3 > self.full.shape[0]:
        raise ShaderHazard(0, f"id registers from r{regid >> 2}.{'xyzw'[regid & 3]} pass the footprint of {self.full.shape[0] // 4} full registers")
      for k in range(3): self.full[regid + k] = vals[k]

  def run(self) -> None:
    """Steps the fibers at the lowest PC until all have ended. While every fiber runs at one PC, an instruction that
    neither branches, ends nor waits (categories 1-6) leaves them all at the next one, so the search is skipped."""
    steps, lockstep = 0, False
    while lockstep or self.alive.any():
      if lockstep: pc, sel = pc + 1, slice(None)
      else:
        pcs = np.where(self.alive & ~self.waiting, self.pc, _NO_PC)
        pc = int(pcs.min())
        mask = pcs == pc
        sel = slice(None) if mask.all() else np.flatnonzero(mask)
      if pc >= len(self.program): raise ShaderHazard(pc, "execution ran past the end of the code without `end`")
      ins = self.program[pc]
      self.step(ins, sel)
      lockstep = isinstance(sel, slice) and 1 <= ins.cat <= 6
      if not lockstep: self._release()
      steps += 1
      if steps > STEP_LIMIT: raise ShaderHazard(pc, f"no `end` after {STEP_LIMIT} steps (hang)")

  def _release(self) -> None:
    """Let a workgroup's fibers past bar once none of its fibers is still running (retired fibers do not hold it)."""
    if not self.waiting.any(): return
    running = np.bincount(self.group[self.alive & ~self.waiting], minlength=len(self.ids))
    self.waiting &= running[self.group] > 0

  # operands
  def _rows(self, ins: Instr, op: Operand, count: int) -> range:
    if op.kind == "pred": return range(op.num, op.num + count)
    regs, what = self.footprint[op.kind]
    if op.num + count > regs * 4:
      last = op.num + count - 1
      reg = f"{'h' if op.kind == 'half' else ''}r{last >> 2}.{'xyzw'[last & 3]}"
      raise ShaderHazard(ins.pc, f"{ins.text}: {reg} is beyond the footprint of {regs} {what} vec4 registers")
    return range(op.num, op.num + count)

  def _file(self, kind: str) -> np.ndarray: return {"reg": self.full, "half": self.half, "pred": self.pred}[kind]

  def _nsel(self, sel) -> int: return self.n if isinstance(sel, slice) else len(sel)

  def read(self, ins: Instr, op: Operand, sel, n: int, count: int = 1, half: bool = False) -> list:
    """Raw bits of `count` consecutive components of a source (uint32, or uint16 for half registers / half=True)."""
    if op.kind in ("reg", "half", "pred"):
      rows = self._rows(ins, op, count)
      self.hz.read(ins, op, rows, sel, need(ins, n))
      f = self._file(op.kind)
      return [f[r, sel].astype(np.uint16) if half and op.kind == "pred" else f[r, sel] for r in rows]
    k = self._nsel(sel)
    if op.kind == "const":
      if op.num + count > len(self.consts):
        last = op.num + count - 1
        raise ShaderHazard(ins.pc, f"{ins.text}: c{last >> 2}.{'xyzw'[last & 3]} is beyond the {len(self.consts)} uploaded constants")
      vals = self.consts[op.num:op.num + count]
      return [np.full(k, v & 0xFFFF, np.uint16) if half else np.full(k, v, np.uint32) for v in vals]
    if op.flut: return [alu.float_bits(np.full(k, FLUT[op.value]), half)]
    return [np.full(k, op.value & 0xFFFF, np.uint16) if half else np.full(k, op.value & 0xFFFFFFFF, np.uint32)]

  def write(self, ins: Instr, op: Operand, sel, vals) -> None:
    """Store component arrays to `op` and onward, recording the producer for the sync rules."""
    rows = self._rows(ins, op, len(vals))
    self.hz.write(ins, op.kind, rows, sel)
    f = self._file(op.kind)
    for r, v in zip(rows, vals): f[r, sel] = (np.asarray(v) != 0) if op.kind == "pred" else v
    self.hz.produced(ins, op.kind, rows, sel)

  def consume(self, ins: Instr, op: Operand, sel, count: int) -> None:
    """A cat4/cat5/cat6 source register: marked after the instruction (it may overwrite its own source)."""
    if op.kind in ("reg", "half"): self.pending.append((op.kind, range(op.num, op.num + count), sel, war_kind(ins)))

  # execution
  def step(self, ins: Instr, sel) -> None:
    if ins.error: raise ShaderHazard(ins.pc, ins.error)
    if ins.repeat and ins.name != "nop": raise ShaderHazard(ins.pc, f"{ins.text}: (rptN) is modelled on nop only")
    self.hz.begin(ins, sel)
    nxt = ins.pc + 1
    if ins.cat == 0: nxt = self._flow(ins, sel)
    elif ins.cat == 1: self._cat1(ins, sel)
    elif ins.cat == 2: self._cat2(ins, sel)
    elif ins.cat == 3: self._cat3(ins, sel)
    elif ins.cat == 4: self._cat4(ins, sel)
    elif ins.cat in (5, 6): OPS[ins.name](self, ins, sel)
    elif ins.cat == 7:
      if ins.name == "bar": self.waiting[sel] = True
      self.hz.barrier(sel)
    for kind, rows, s, war in self.pending: self.hz.consumed(kind, rows, s, war)
    self.pending.clear()
    self.hz.advance(ins, sel)
    if nxt is not None: self.pc[sel] = nxt

  def _target(self, ins: Instr) -> int:
    t = ins.pc + ins.branch
    if not 0 <= t < len(self.program): raise ShaderHazard(ins.pc, f"{ins.text}: branch target {t} is outside the code")
    if not self.program[t].jp:
      raise ShaderHazard(ins.pc, f"{ins.text}: branch target pc {t} ({self.program[t].text}) lacks (jp) (ir3_legalize.c mark_jp)")
    return t

  def _flow(self, ins: Instr, sel):
    if ins.name == "nop": return ins.pc + 1
    if ins.name == "end":
      self.alive[sel] = False
      return None
    if ins.name == "jump": return self._target(ins)
    if ins.name == "br":
      p = self.read(ins, ins.srcs[0], sel, 0)[0] != 0
      taken = p ^ ins.inv
      if taken.any(): t = self._target(ins)
      else: t = 0
      self.pc[sel] = np.where(taken, t, ins.pc + 1)
      return None
    raise ShaderHazard(ins.pc, f"{ins.text}: cat0 {ins.name} is not modelled")

  def _cat1(self, ins: Instr, sel) -> None:
    s = ins.srcs[0]
    shalf = alu.TYPE_INFO[ins.src_type][2] <= 16
    raw = self.read(ins, s, sel, 0, half=shalf)[0]
    self.write(ins, ins.dst, sel, [alu.cov(raw, ins.src_type, ins.type, ins.round, ins.sat)])

  def _cat2(self, ins: Instr, sel) -> None:
    name, half = ins.name, ins.srcs[0].kind == "half" or ins.srcs[0].half
    raws = [self.read(ins, s, sel, i, half=half)[0] for i, s in enumerate(ins.srcs)]
    dst_half = ins.dst.kind == "half"
    if name.endswith(".f") or name == "cmps.f":
      for s in ins.srcs:
        if s.kind == "immed" and not s.flut:
          raise ShaderHazard(ins.pc, f"{ins.text}: an integer immediate on a float op is not modelled (Mesa uses #flut or a const)")
      vals = [alu.fmods(alu.as_float(r), s.neg, s.abs) for r, s in zip(raws, ins.srcs)]
    elif name in alu.INT1 or name in alu.INT2 or name.startswith("cmps."):
      vals = [alu.imods(alu.as_int(r, name in alu.SIGNED), s.neg, s.abs, name.endswith(".b")) for r, s in zip(raws, ins.srcs)]
    else: raise ShaderHazard(ins.pc, f"{ins.text}: cat2 {name} is not modelled")
    if name.startswith("cmps."): out = alu.CMP[ins.cond](vals[0], vals[1]).astype(np.uint32)
    elif name.endswith(".f"): out = alu.cat2_float(name, vals, dst_half, ins.sat)
    else: out = alu.cat2_int(name, vals, 16 if half else 32, dst_half)
    if ins.dst.kind != "pred" and name.startswith("cmps."): out = alu.int_bits(out, dst_half)
    self.write(ins, ins.dst, sel, [out])

  def _cat3(self, ins: Instr, sel) -> None:
    name = ins.name
    half = not CAT3_FULL[name]
    raws = [self.read(ins, s, sel, i, half=half)[0] for i, s in enumerate(ins.srcs)]
    dst_half = ins.dst.kind == "half"
    if name.startswith("sel."):
      a, c, b = raws
      cond = alu.as_float(c) != 0 if name.startswith("sel.f") else c != 0
      if any(s.neg for s in ins.srcs): raise ShaderHazard(ins.pc, f"{ins.text}: (neg) on sel is not modelled")
      out = np.where(cond, a, b)
      if name.startswith("sel.f"): out = alu.float_bits(alu.as_float(out), dst_half)
      else: out = alu.int_bits(alu.as_int(out, name.startswith("sel.s")), dst_half)
    elif name.startswith("mad.f"):
      a, b, c = [alu.fmods(alu.as_float(r).astype(np.float32), s.neg, False) for r, s in zip(raws, ins.srcs)]
      out = alu.cat3(name, a, b, c, dst_half)
    elif name in ("mad.u24", "mad.s24", "mad.u16", "mad.s16", "madsh.m16"):
      sgn = name in ("mad.s24", "mad.s16")
      a, b, c = [alu.imods(alu.as_int(r, sgn), s.neg, False, False) for r, s in zip(raws, ins.srcs)]
      out = alu.cat3(name, a, b, c, dst_half)
    else: raise ShaderHazard(ins.pc, f"{ins.text}: cat3 {name} is not modelled")
    self.write(ins, ins.dst, sel, [out])

  def _cat4(self, ins: Instr, sel) -> None:
    s = ins.srcs[0]
    half = s.kind == "half" or s.half
    if s.kind == "immed" and not s.flut: raise ShaderHazard(ins.pc, f"{ins.text}: an integer immediate on a float op is not modelled")
    x = alu.fmods(alu.as_float(self.read(ins, s, sel, 0, half=half)[0]), s.neg, s.abs)
    self.write(ins, ins.dst, sel, [alu.sfu(ins.name, x, ins.dst.kind == "half")])
    self.consume(ins, s, sel, 1)
