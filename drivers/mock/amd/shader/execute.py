"""The shader core: runs every wave of a dispatch from its initial state to s_endpgm. Workgroups are taken in batches
whose waves run in lockstep: each step, the waves at the lowest PC execute that instruction together (vector state
is one numpy column per lane); s_barrier holds a wave until every live wave of its workgroup arrives. Instructions
are decoded once per dispatch (cached by address) and executed by mnemonic (scalar_ops, vector_ops, matrix_ops,
mfma_ops, memory_ops), so another architecture's decoder can reuse the executor."""
from __future__ import annotations
import hashlib, os
import numpy as np
from drivers.mock.amd.shader import cdna3, lane_modifiers, rdna3, rdna4
from drivers.mock.amd.shader.dispatch import Dispatch, GPUMemory, ShaderFault
from drivers.mock.amd.shader.instruction import Instruction, UnknownInstruction
from drivers.mock.amd.shader.agpr_ops import OPS as AGPR_OPS, accum_offset
from drivers.mock.amd.shader.matrix_ops import OPS as MATRIX_OPS
from drivers.mock.amd.shader.memory_ops import OPS as MEMORY_OPS, ArrayMemory
from drivers.mock.amd.shader.mfma_ops import OPS as MFMA_OPS
from drivers.mock.amd.shader.mode_register import OPS as MODE_OPS
from drivers.mock.amd.shader.scalar_ops import OPS as SCALAR_OPS
from drivers.mock.amd.shader.vector_ops import OPS as VECTOR_OPS
from drivers.mock.amd.shader.wave_state import EXEC, VCC, Group, WaveState

OPS = {**SCALAR_OPS, **VECTOR_OPS, **MATRIX_OPS, **MEMORY_OPS, **MODE_OPS, **AGPR_OPS, **MFMA_OPS}
RUNNING, AT_BARRIER, DONE = 0, 1, 2
_NO_PC = np.iinfo(np.int64).max  # the PC a wave that isn't running sorts at
# instructions with no architectural effect in this model: waits, scheduling hints, cache controls, messages
_NO_EFFECT = frozenset({"s_waitcnt", "s_waitcnt_vscnt", "s_waitcnt_vmcnt", "s_waitcnt_expcnt", "s_waitcnt_lgkmcnt",
  "s_waitcnt_depctr", "s_nop", "s_delay_alu", "s_clause", "s_sendmsg", "s_set_inst_prefetch_distance", "s_sleep",
  "s_setprio", "s_icache_inv", "s_dcache_inv", "s_gl1_inv", "buffer_gl0_inv", "buffer_gl1_inv", "s_wait_idle",
  "s_wakeup", "s_round_mode", "s_version", "v_nop", "v_pipeflush", "s_ttracedata", "s_ttracedata_imm",
  # gfx12's split counters and ALU wait (RDNA4 ISA guide "S_WAIT_*"); s_barrier_signal only arrives, s_barrier_wait holds
  "s_wait_alu", "s_wait_loadcnt", "s_wait_storecnt", "s_wait_samplecnt", "s_wait_bvhcnt", "s_wait_expcnt", "s_wait_dscnt",
  "s_wait_kmcnt", "s_wait_loadcnt_dscnt", "s_wait_storecnt_dscnt", "s_barrier_signal", "s_prefetch_data", "s_prefetch_inst",
  "global_inv", "global_wb", "global_wbinv"})
# per wave: whether the conditional branch is taken
_BRANCH = {"s_cbranch_scc0": lambda st, wv: ~st.scc[wv], "s_cbranch_scc1": lambda st, wv: st.scc[wv],
           "s_cbranch_vccz": lambda st, wv: st.mask_is_zero(wv, VCC), "s_cbranch_vccnz": lambda st, wv: ~st.mask_is_zero(wv, VCC),
           "s_cbranch_execz": lambda st, wv: st.mask_is_zero(wv, EXEC), "s_cbranch_execnz": lambda st, wv: ~st.mask_is_zero(wv, EXEC)}

_CONTROL = frozenset({"s_endpgm", "s_barrier", "s_barrier_wait", "s_branch", "s_getpc_b64", "s_swappc_b64", "s_setpc_b64", "s_denorm_mode"})

def _branch_target(pc: int, simm16: int) -> int:
  """SOPP branches jump by the signed dword count simm16 from the next instruction."""
  return pc + 4 + 4 * (simm16 - 0x10000 if simm16 & 0x8000 else simm16)

def has_semantics(name: str) -> bool:
  """Whether the executor runs instructions of this mnemonic (the rest raise UnknownInstruction when reached)."""
  return name in OPS or name in _NO_EFFECT or name in _BRANCH or name in _CONTROL

def decoder_for(arch: str):
  """decode(code, offset, wave64) for an architecture's encodings (CDNA3's waves are always 64 lanes wide)."""
  if arch.startswith("gfx11"): return rdna3.decode
  if arch.startswith(("gfx94", "gfx95")): return _cdna3_decode
  if arch.startswith("gfx12"): return rdna4.decode
  raise ShaderFault(f"no instruction decoder for {arch}")

def _cdna3_decode(code, offset: int, wave64: bool) -> Instruction: return cdna3.decode(code, offset)

def vgpr_granule(arch: str, wave_size: int) -> int:
  """Registers per COMPUTE_PGM_RSRC1.VGPRS step: gfx10+ 8 in wave32 and 4 in wave64; gfx90a/gfx94x 8 (unified VGPR+AGPR
  file) (AMDGPUUsage.rst "compute_pgm_rsrc1" GRANULATED_WORKITEM_VGPR_COUNT)."""
  return 8 if wave_size == 32 or arch.startswith("gfx9") else 4

# decoded instructions by (decoder, up to 12 bytes at the PC, wave64), shared by dispatches: an instruction is at most
# 12 bytes (8 + a literal), so these bytes determine it whatever address it sits at
_DECODED: dict = {}
_DECODED_LIMIT = 1 << 16

class _Program:
  """Instructions fetched through GPU memory, decoded once per address in a dispatch."""
  def __init__(self, memory: GPUMemory, decode, wave64: bool):
    self.memory, self.decode, self.wave64, self.cache = memory, decode, wave64, {}
  def at(self, pc: int) -> Instruction:
    ins = self.cache.get(pc)
    if ins is None:
      buf, base = self.memory.span(pc, pc + 4)
      key = (self.decode, bytes(buf[pc - base:pc - base + 12]), self.wave64)
      ins = _DECODED.get(key)
      if ins is None:
        try: ins = self.decode(buf, pc - base, self.wave64)
        except UnknownInstruction as e: raise UnknownInstruction(f"{e} (address {pc:#x})", pc) from None
        if len(_DECODED) >= _DECODED_LIMIT: _DECODED.clear()
        _DECODED[key] = ins
      self.cache[pc] = ins
    return ins

CODE_DIR_ENV = "MOCKGPU_AMD_CODE_DIR"
_DUMPED: set = set()

def dump_program(dispatch: Dispatch, memory: GPUMemory, directory: str) -> str:
  """Write the code bytes from code_va to the end of their mapping to directory/<arch>-<sha256 prefix>.bin (once per
  distinct program): the coverage test decodes these files. Returns the path."""
  buf, base = memory.span(dispatch.code_va, dispatch.code_va + 4)
  code = bytes(buf[dispatch.code_va - base:])
  path = os.path.join(directory, f"{dispatch.arch}-{hashlib.sha256(code).hexdigest()[:24]}.bin")
  if path not in _DUMPED or not os.path.exists(path):
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"  # per process: runs in parallel may dump the same program
    with open(tmp, "wb") as f: f.write(code)
    os.replace(tmp, path)  # a reader never sees half a program
    _DUMPED.add(path)
  return path

def run(dispatch: Dispatch, memory: GPUMemory, step_limit: int = 1_000_000, batch_lanes: int = 16384) -> None:
  """Run every workgroup of the dispatch; ShaderFault on a bad access, an unknown instruction or a hang (a wave
  executing more than step_limit instructions). With MOCKGPU_AMD_CODE_DIR set, the program is dumped there first."""
  if directory := os.environ.get(CODE_DIR_ENV): dump_program(dispatch, memory, directory)
  L = 32 if dispatch.wave32 else 64
  threads = dispatch.group_size[0] * dispatch.group_size[1] * dispatch.group_size[2]
  waves_per_group = -(-threads // L)
  gx, gy, gz = dispatch.groups
  ids = [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]
  per_batch = max(1, batch_lanes // (waves_per_group * L))
  program = _Program(memory, decoder_for(dispatch.arch), L == 64)
  with np.errstate(all="ignore"):
    for start in range(0, len(ids), per_batch):
      _Batch(dispatch, memory, program, ids[start:start + per_batch], L, waves_per_group, step_limit).run()

class _Batch:
  def __init__(self, d: Dispatch, memory: GPUMemory, program: _Program, groups: list, L: int, wpg: int, step_limit: int):
    self.d, self.program, self.L, self.wpg, self.step_limit = d, program, L, wpg, step_limit
    nw = len(groups) * wpg
    self.st = st = WaveState(nw, L, min(512, ((d.rsrc1 & 0x3F) + 1) * vgpr_granule(d.arch, L)))
    st.memory = memory
    st.acc_base = accum_offset(d.rsrc3) if d.arch.startswith("gfx9") else None
    st.gfx9_halves = d.arch.startswith("gfx9")
    self._modes(d.rsrc1)
    st.lds_bytes = d.lds_bytes
    st.lds = np.zeros(len(groups) * d.lds_bytes, np.uint8)
    st.lane_group = np.repeat(np.arange(len(groups)), wpg * L)
    st.scratch_lane_bytes = d.scratch_wave_bytes // L
    st.scratch = ArrayMemory(np.zeros(nw * L * st.scratch_lane_bytes, np.uint8))
    self.group_of_wave = np.repeat(np.arange(len(groups)), wpg)
    self._initial_state(groups)
    self.pc = np.full(nw, d.code_va, np.int64)
    self.state = np.full(nw, RUNNING, np.int8)
    self.steps = np.zeros(nw, np.int64)

  def _modes(self, rsrc1: int) -> None:
    """FLOAT_DENORM_MODE_32 [17:16], FLOAT_DENORM_MODE_16_64 [19:18], IEEE_MODE [23] (COMPUTE_PGM_RSRC1, gc_11_0_0_sh_mask.h)."""
    self.st.denorm32 = (rsrc1 >> 16 & 3) == 3
    self.st.denorm16_64 = (rsrc1 >> 18 & 3) == 3
    self.st.ieee = bool(rsrc1 >> 23 & 1)

  def _initial_state(self, groups: list) -> None:
    """AMDGPUUsage.rst "Initial Kernel Execution State": user SGPRs, then the enabled workgroup ids; v0 holds the
    packed work-item ids X[9:0] Y[19:10] Z[29:20]; EXEC covers the lanes that hold a work-item."""
    st, d, L = self.st, self.d, self.L
    n_user = d.rsrc2 >> 1 & 0x1F
    user = list(d.user_data[:n_user]) + [0] * (n_user - len(d.user_data[:n_user]))
    st.S[:n_user, :] = np.array(user, np.uint32)[:, None]
    ids = np.array(groups, np.uint32)[self.group_of_wave]
    nxt = n_user
    if d.arch.startswith("gfx12"):  # architected SGPRs: ttmp9 = X, ttmp7 = Y[15:0] | Z[31:16] (AMDGPUUsage.rst, gfx12)
      st.S[108 + 9], st.S[108 + 7] = ids[:, 0], ids[:, 1] | ids[:, 2] << np.uint32(16)
    else:
      for axis, bit in enumerate((7, 8, 9)):  # COMPUTE_PGM_RSRC2 TGID_X_EN/TGID_Y_EN/TGID_Z_EN
        if d.rsrc2 >> bit & 1:
          st.S[nxt] = ids[:, axis]
          nxt += 1
    X, Y, _ = d.group_size
    t = np.tile(np.arange(self.wpg * L), len(groups))
    st.V[0] = ((t % X) | ((t // X) % Y) << 10 | (t // (X * Y)) << 20).astype(np.uint32)
    live = (t < X * Y * self.d.group_size[2]).reshape(-1, L)
    bits = np.packbits(live, axis=1, bitorder="little")
    if L == 32: st.S[EXEC] = bits.view("<u4").ravel()
    else:
      both = bits.view("<u8").ravel()
      st.S[EXEC], st.S[EXEC + 1] = (both & 0xFFFFFFFF).astype(np.uint32), (both >> np.uint64(32)).astype(np.uint32)
    st.refresh_exec(slice(None))

  def run(self) -> None:
    """Steps until every wave has ended. While all waves run at one PC (straight-line code of a uniform kernel) the
    next PC is the one _execute returns, so the per-step search for the lowest PC is skipped."""
    st, L = self.st, self.L
    lanes = np.arange(L)
    count, lockstep_pc = 0, None
    while True:
      if lockstep_pc is None:
        live = self.state == RUNNING
        if not live.any():
          if (self.state == AT_BARRIER).any(): raise ShaderFault("waves wait at s_barrier that their workgroup can never reach")
          return
        pcs = np.where(live, self.pc, _NO_PC)
        pc = int(pcs.min())
        sel = pcs == pc
        everyone = bool(sel.all())
        if everyone: wv, ln, nw = slice(None), slice(None), st.nw
        else:
          wv = np.flatnonzero(sel)
          ln, nw = (wv[:, None] * L + lanes).ravel(), wv.size
      else: pc = lockstep_pc
      g = Group(wv, ln, nw, st.exec[ln])
      nxt = self._execute(g, self.program.at(pc), pc)
      lockstep_pc = nxt if everyone else None
      count += 1
      self.steps[wv] += 1
      if count % 256 == 0 and self.steps.max() > self.step_limit:
        w = int(np.argmax(self.steps))
        raise ShaderFault(f"wave {w} executed more than {self.step_limit} instructions without s_endpgm (hang at pc {int(self.pc[w]):#x})", int(self.pc[w]))

  def _execute(self, g: Group, ins: Instruction, pc: int) -> int | None:
    """Runs one instruction for the group's waves; returns the next PC when it is the same for all of them and they
    all keep running (None after an instruction that ends, parks or branches waves)."""
    name, st = ins.name, self.st
    nxt = pc + ins.size
    if name in _NO_EFFECT: pass
    elif name == "s_endpgm": self.state[g.wv] = DONE; self._release(); return None
    elif name in ("s_barrier", "s_barrier_wait"): self.state[g.wv] = AT_BARRIER; self.pc[g.wv] = nxt; self._release(); return None
    elif name == "s_branch": nxt = _branch_target(pc, ins.fields["simm16"])
    elif name in _BRANCH:
      self.pc[g.wv] = np.where(_BRANCH[name](st, g.wv), _branch_target(pc, ins.fields["simm16"]), nxt)
      return None
    elif name in ("s_getpc_b64", "s_swappc_b64", "s_setpc_b64"):
      self.pc[g.wv] = self._pc_ops(g, ins, nxt)
      return None
    elif name == "s_denorm_mode":
      st.denorm32, st.denorm16_64 = (ins.fields["simm16"] & 3) == 3, (ins.fields["simm16"] >> 2 & 3) == 3
    elif name in ("s_trap", "s_code_end", "s_sethalt"):
      raise ShaderFault(f"{name} executed at address {pc:#x}", pc)
    elif name in OPS:
      if "modifier" in ins.fields: lane_modifiers.run(OPS[name], st, g, ins)
      else: OPS[name](st, g, ins)
    else: raise UnknownInstruction(f"{ins.encoding} {name} at address {pc:#x} has no semantics in the model", pc)
    self.pc[g.wv] = nxt
    return nxt

  def _pc_ops(self, g: Group, ins: Instruction, nxt: int):
    """s_getpc_b64 / s_swappc_b64 write the next instruction's address; s_setpc_b64 / s_swappc_b64 jump per wave."""
    st = self.st
    target = nxt if ins.name == "s_getpc_b64" else np.broadcast_to(st.sread(g, ins.fields["ssrc0"], 2), (g.nw,)).astype(np.int64)
    if ins.name != "s_setpc_b64": st.swrite_op(g, ins.fields["sdst"], np.full(g.nw, nxt, np.uint64), 2)
    return target

  def _release(self) -> None:
    """Let a workgroup's waves past s_barrier once none of its waves is still running."""
    if not (self.state == AT_BARRIER).any(): return
    running = np.bincount(self.group_of_wave[self.state == RUNNING], minlength=self.group_of_wave.max() + 1)
    free = (self.state == AT_BARRIER) & (running[self.group_of_wave] == 0)
    self.state[free] = RUNNING
