"""The QCOM command queue: HCQ commands as CP packets in an indirect buffer that GPU_COMMAND submits. The GPU has one
engine for both: a launch programs the compute registers and loads the kernel arguments (into the constant file)
and the shader with CP_LOAD_STATE6_FRAG before CP_EXEC_CS; a copy is CP_MEMCPY. A signal is a cache-flush event
that writes the value once the work before it is done; a wait polls memory in the CP (CP_WAIT_REG_MEM)."""
from __future__ import annotations
import functools
from typing import Any
import numpy as np
from ir.helpers import prod, round_up
from drivers.hcq import HCQSignal, PatchSlot, hi32, lo32
from drivers.gpu_memory import ArgumentQueue, GPUBuffer
from drivers.qcom import cp
from drivers.qcom import descriptors as desc

MAX_THREADS = 1024  # invocations per workgroup (ir3_compiler.c max_variable_workgroup_size)

def dispatch_words(regs: cp.Registers, prg, groups: tuple[int, int, int], local: tuple[int, int, int], kernargs: int,
                   descriptors: int = 0) -> list[int]:
  """The packets of one launch of `prg` (a QCOMProgram) with its constants at GPU address `kernargs`, in the order
  Mesa's computerator (src/freedreno/computerator/a6xx.cc a6xx_emit_grid) programs a compute dispatch; an image kernel's
  texture descriptors, sampler and IBO descriptors follow one another from GPU address `descriptors`."""
  lib = prg.lib
  words = cp.pkt7(cp.CP_SET_MARKER, cp.RM6_COMPUTE) + cp.pkt7(cp.CP_WAIT_FOR_IDLE)  # earlier launches finish before their state changes
  words += cp.pkt4(regs.sp_update_cntl, cp.SP_UPDATE_CNTL_CS_STATE | cp.SP_UPDATE_CNTL_CS_UAV)  # drop loads queued for the last kernel
  words += cp.pkt4(regs.sp_mode_cntl, cp.sp_mode_cntl())
  ndrange = [cp.sp_cs_ndrange_0(local), groups[0] * local[0], 0, groups[1] * local[1], 0, groups[2] * local[2], 0]  # sizes, offsets 0
  ids = cp.work_ids(prg.wgid_regid, prg.localid_regid)
  if regs.gen == 6:  # NDRANGE_0..6, CONST_CONFIG_0, WGE_CNTL, KERNEL_GROUP_X..Z are consecutive (0xb990..0xb99b)
    words += cp.pkt4(regs.sp_cs_ndrange_0, *ndrange, ids, cp.sp_cs_wge_cntl(), 1, 1, 1)
  else:  # NDRANGE_0..6, WGE_CNTL, KERNEL_GROUP_X..Z, NDRANGE_7 (0xa9d4..0xa9df); the ids in SP_CS_WIE_CNTL_0/1
    words += cp.pkt4(regs.sp_cs_ndrange_0, *ndrange, cp.sp_cs_wge_cntl(), 1, 1, 1, cp.sp_cs_ndrange_7(local))
    words += cp.pkt4(regs.sp_cs_wie_cntl_0, ids, cp.sp_cs_wie_cntl_1())
    words += cp.pkt4(regs.sp_ps_wave_cntl, cp.THREAD64)
    words += cp.pkt4(regs.sp_reg_prog_id_0, 0xFCFCFCFC, 0xFCFCFCFC, 0xFCFCFCFC, 0x0000FC00)  # no fragment inputs (computerator)
  words += cp.pkt4(regs.sp_cs_cntl_0, cp.sp_cs_cntl_0(lib.half_regs, lib.full_regs, prg.branchstack),
                   cp.sp_cs_cntl_1(lib.shared_bytes, prg.constlen), 0, 0, lo32(prg.image.va), hi32(prg.image.va))  # CF mask, entry 0
  ntex, nibo = len(prg.textures), len(prg.ibos)
  words += cp.pkt4(regs.sp_cs_config, cp.sp_cs_config(ntex, min(ntex, 1), nibo), prg.instrlen)  # then SP_CS_INSTR_SIZE
  words += cp.pkt4(regs.sp_cs_const_config, cp.sp_cs_const_config(prg.constlen))
  words += cp.load_state6(cp.ST6_SHADER, cp.shader_preload_units(regs.gen, prg.instrlen), prg.image.va)
  words += cp.load_state6(cp.ST6_CONSTANTS, prg.constlen, kernargs)
  if ntex:  # as freedreno's fd6_emit_textures: samplers and descriptors loaded, their tables' addresses and the count set
    sampler = descriptors + ntex * desc.DESCRIPTOR_BYTES
    words += cp.load_state6(cp.ST6_SHADER, 1, sampler, cp.SB6_CS_TEX) + cp.pkt4(regs.sp_cs_sampler_base, lo32(sampler), hi32(sampler))
    words += cp.load_state6(cp.ST6_CONSTANTS, ntex, descriptors, cp.SB6_CS_TEX) + cp.pkt4(regs.sp_cs_texmemobj_base, lo32(descriptors), hi32(descriptors))
    words += cp.pkt4(regs.sp_cs_tsize, ntex)
  if nibo:  # as computerator's cs_ibo_emit
    ibos = descriptors + ntex * desc.DESCRIPTOR_BYTES + (desc.DESCRIPTOR_BYTES if ntex else 0)
    words += cp.load_state6(cp.ST6_UAV, nibo, ibos) + cp.pkt4(regs.sp_cs_uav_base, lo32(ibos), hi32(ibos)) + cp.pkt4(regs.sp_cs_usize, nibo)
  return words + cp.exec_cs(groups)

def _address(buf: Any, offset: int = 0) -> Any:
  """A buffer's GPU address (plus offset): an int, or a PatchSlot filled in at submit for a JIT input."""
  if isinstance(buf, PatchSlot): return PatchSlot(buf.name, lambda b: b.va + offset)
  if not isinstance(buf, GPUBuffer): raise TypeError(f"QCOM queues work on QCOM buffers, not {type(buf).__name__}")
  return buf.va + offset

def _split(address: Any) -> tuple[Any, Any]:
  if isinstance(address, PatchSlot): return PatchSlot(address.name, lambda b: lo32(address.part(b))), PatchSlot(address.name, lambda b: hi32(address.part(b)))
  return lo32(address), hi32(address)

class QCOMComputeQueue(ArgumentQueue):
  """A bound queue (a JIT graph's) keeps its packets in GPU memory: the first submit writes them, later ones rewrite
  only the patched words, and each submits that buffer as the IB."""
  gen, scratch, copies = 6, 0, True  # gen picks registers and event forms; scratch: an address CACHE_FLUSH_TS may write
  @property
  def regs(self) -> cp.Registers: return cp.REGISTERS[self.gen]

  def wait(self, signal: HCQSignal, value): return self.q(*cp.wait_reg_mem(signal.va, value))
  def signal(self, signal: HCQSignal, value):
    return self.q(*cp.pkt7(cp.CP_WAIT_FOR_IDLE), *cp.event_write(self.gen, cp.CACHE_FLUSH_TS, signal.va, value))
  def timestamp(self, signal: HCQSignal):
    return self.q(*cp.pkt7(cp.CP_WAIT_FOR_IDLE), *cp.reg_to_mem(self.regs.cp_always_on_counter, signal.va + 8))
  def memory_barrier(self):
    """Write back and invalidate the GPU's caches, then wait for memory writes and for idle (tinygrad's QCOM barrier)."""
    if self.gen == 6: self.q(*cp.event_write(6, cp.CACHE_FLUSH_TS, self.scratch, 0), *cp.event_write(6, cp.CACHE_INVALIDATE))
    else: self.q(*cp.event_write(7, cp.CACHE_FLUSH7), *cp.event_write(7, cp.CACHE_INVALIDATE7))
    return self.q(*cp.pkt7(cp.CP_WAIT_MEM_WRITES), *cp.pkt7(cp.CP_WAIT_FOR_IDLE))

  def exec(self, prg, args: list, global_size, local_size):
    local, groups = tuple(local_size or (1, 1, 1)), tuple(global_size)
    if prod(local) > MAX_THREADS: raise RuntimeError(f"{prg.name}: {prod(local)} invocations per workgroup; the GPU runs at most {MAX_THREADS}")
    images = [*prg.textures, *([(None, desc.sampler())] if prg.textures else []), *prg.ibos]  # in dispatch_words' order
    consts = round_up(prg.constlen * 16, desc.DESCRIPTOR_BYTES)
    mem, at = self.memory(prg.dev, consts + len(images) * desc.DESCRIPTOR_BYTES, align=desc.DESCRIPTOR_BYTES)
    view = mem.view()[at:at + consts + len(images) * desc.DESCRIPTOR_BYTES]
    view[:] = 0
    self.write_arguments(view, args, prg.param_layout)
    for n, (position, words) in enumerate(images):
      self.write_descriptor(view[consts + n * desc.DESCRIPTOR_BYTES:][:desc.DESCRIPTOR_BYTES].view(np.uint32), words, args[position] if position is not None else None)
    return self.q(*dispatch_words(self.regs, prg, groups, local, mem.va + at, mem.va + at + consts))

  def write_descriptor(self, view: np.ndarray, words: list[int], image: Any) -> None:
    """A descriptor's dwords into `view`, with the base address of `image` (a buffer, or a JIT input's PatchSlot
    written at each submit; None: a sampler, which has none)."""
    if not isinstance(image, PatchSlot):
      view[:len(words)] = words if image is None else desc.with_base(words, image.va)
      return
    view[:len(words)] = words
    self._mem_patches.append((view[4:5], 0, PatchSlot(image.name, lambda b: desc.with_base(words, b.va)[4])))
    self._mem_patches.append((view[5:6], 0, PatchSlot(image.name, lambda b: desc.with_base(words, b.va)[5])))

  def copy(self, dest, src, nbytes: int):
    """CP_MEMCPY moves whole dwords, after a barrier so that it reads what earlier launches wrote."""
    if nbytes % 4: raise ValueError(f"QCOM copies whole dwords; {nbytes} bytes is not a multiple of 4")
    self.memory_barrier()
    dst_lo, dst_hi = _split(_address(dest))
    src_lo, src_hi = _split(_address(src))
    # adreno_pm4.xml <domain name="CP_MEMCPY">: DWORDS, SRC (64), DST (64)
    return self.q(*cp.pkt7(cp.CP_MEMCPY, nbytes // 4, src_lo, src_hi, dst_lo, dst_hi), *cp.pkt7(cp.CP_WAIT_MEM_WRITES))

  def _submit(self, dev, words: list[int]) -> None:
    if self._bound is not dev: return dev.submit(words)
    dev.submit_ib(self.bound_commands(dev, words, dev.alloc_memory).va, len(words))

@functools.cache
def queue_for(gen: int, scratch: int) -> type[QCOMComputeQueue]:
  """The queue class of a device of generation `gen` whose CACHE_FLUSH_TS events write to `scratch`."""
  return type("QCOMComputeQueue", (QCOMComputeQueue,), {"gen": gen, "scratch": scratch})
