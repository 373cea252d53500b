"""QCOM: Qualcomm Adreno a6xx and a7xx GPUs driven from userspace over kgsl (/dev/kgsl-3d0). One file is one GPU
address space; memory is allocated with GPUOBJ_ALLOC and USE_CPU_MAP, so a buffer's CPU mapping is also its GPU
address; tg writes CP packets into an indirect buffer and submits it with GPU_COMMAND on one kgsl context. Kernels
are ir3 machine code (codegen/ir3.py renders the assembly, codegen/ir3_compiler.py assembles it); the GPU has no
separate copy engine, so copies run on the compute queue. With DEV=MOCK+QCOM the same code runs against
drivers/mock/qcom.

SP_CS_CNTL_0.BRANCHSTACK is set to the largest value Mesa programs
(ir3_shader.h ir3_shader_branchstack_hw: branchstack_size / 2 = 32), since the lib carries no branch depth."""
from __future__ import annotations
import errno, functools
from dataclasses import replace
import numpy as np
from ir.dtype import DType, Image, bits_of, dtypes
from ir.helpers import round_up
from ir.switches import DEV
from ir.target import parse_targets, target_for
from codegen.renderer import ProgramSpec
from drivers.device import DeviceUnavailable
from drivers.gpu_memory import ArgumentPool, GPUAllocator, GPUBuffer
from drivers.hcq import DeviceFault, HCQCompiled, HCQProgram, HCQTimeoutError
from drivers.system import MAP_SHARED, PAGE_SIZE, PROT_READ, PROT_WRITE, memoryview_at, system_for
from drivers.qcom import cp, descriptors, kgsl
from drivers.qcom.queues import queue_for

COMMAND_RING = 4 << 20  # bytes of indirect-buffer space submissions are copied into
WAKE_POLL_MS = 10       # a sleeping wait wakes at least this often (to check for faults)
MAX_SHARED = 32 * 1024  # workgroup-local memory (ir3_compiler.c: all known GPUs have 32 KiB)
# kgsl context flags: PREAMBLE and NO_GMEM_ALLOC are required (adreno_drawctxt.c adreno_drawctxt_create refuses "legacy
# context switch" without them); NO_FAULT_TOLERANCE: a fault invalidates the context instead of replaying its commands
# (adreno_dispatch.c _set_ft_policy); TYPE_CL; fine-grained preemption as tinygrad asks for
CONTEXT_FLAGS = (kgsl.CONTEXT_PREAMBLE | kgsl.CONTEXT_NO_GMEM_ALLOC | kgsl.CONTEXT_NO_FAULT_TOLERANCE | kgsl.CONTEXT_TYPE_CL << kgsl.CONTEXT_TYPE_SHIFT
                 | kgsl.CONTEXT_PREEMPT_STYLE_FINEGRAIN << kgsl.CONTEXT_PREEMPT_STYLE_SHIFT)
# a7xx chips whose kgsl chip id doesn't spell the name: family byte 0x43 (Mesa freedreno_devices.py GPUId entries)
NAMED_CHIPS = {0x43050A01: "a740", 0x43050B00: "a740", 0x43051401: "a750"}

def chip_arch(chip_id: int) -> tuple[int, str]:
  """(generation, arch name) of a kgsl chip id (core.major.minor.patch bytes, msm_kgsl.h struct kgsl_devinfo):
  0x06030001 -> (6, "a630"), 0x07030001 -> (7, "a730"); a702 (0x0700..) is an a6xx (kgsl adreno-gpulist.h uses its
  a6xx gpudev); DeviceUnavailable names any other chip."""
  core, major, minor = chip_id >> 24, chip_id >> 16 & 0xFF, chip_id >> 8 & 0xFF
  if chip_id in NAMED_CHIPS: return 7, NAMED_CHIPS[chip_id]
  if core in (6, 7) and major < 10 and minor < 10: return (6 if core == 6 or major == 0 else 7), f"a{core}{major}{minor}"
  raise DeviceUnavailable(f"QCOM unavailable: chip id {chip_id:#010x} is not an Adreno a6xx or a7xx tg knows")

def is_missing(e: OSError) -> bool: return e.errno in (errno.ENOENT, errno.ENODEV, errno.ENXIO, errno.EACCES, errno.EPERM)

class QCOMProgram(HCQProgram):
  """A kernel of an ir3 lib: its machine code in GPU memory and what the launch registers need from the lib header."""
  def __init__(self, dev: QCOMDevice, name: str, lib: bytes, spec: ProgramSpec):
    super().__init__(dev, name)
    from codegen.ir3_compiler import read_lib
    self.lib = read_lib(lib)
    code = self.lib.code
    self.instrlen = -(-len(code) // 128)  # SP_CS_INSTR_SIZE and the shader load count 128-byte groups (ir3_shader.h instrlen)
    self.image = dev.alloc_memory(max(self.instrlen, 1) * 128)
    self.image.view()[:len(code)] = np.frombuffer(code, np.uint8)
    self.branchstack = 32
    self.wgid_regid, self.localid_regid = 0, 4  # the kernel ABI (codegen/ir3.py): work group id in r0.xyz, local id in r1.xyz
    # kernel arguments from c0.x: each buffer's address as two consts, then one const per int32 Variable
    self.param_layout = [(8 * i, 8) for i in range(len(spec.globals))] + [(8 * len(spec.globals) + 4 * j, 4) for j in range(len(spec.vars))]
    self.var_dtypes = [v.dtype for v in spec.vars]
    # (argument position, descriptor without its base) of each image the kernel reads as a texture / writes as an IBO
    position = {g: i for i, g in enumerate(spec.globals)}
    def bound(ibo: bool) -> list[tuple[int, list[int]]]:
      images = sorted((b for b in self.lib.images if b.ibo == ibo), key=lambda b: b.slot)
      if [b.slot for b in images] != list(range(len(images))): raise RuntimeError(f"{name}: the lib's {'IBO' if ibo else 'texture'} slots aren't 0..{len(images) - 1}")
      return [(position[b.buffer], descriptors.image(Image(b.height, b.width), descriptors.CHANNELS[b.itemsize], swizzle=not ibo)) for b in images]
    self.textures, self.ibos = bound(False), bound(True)
    self.constlen = max(-(-(2 * len(spec.globals) + len(spec.vars)) // 4), self.lib.const_vec4, 1)
    limit = 512 if dev.gen >= 7 else 256  # a6xx.xml <enum name="a6xx_const_ram_mode">: CONSTLEN_512 is a7xx only
    if self.constlen > limit: raise RuntimeError(f"{name}: {self.constlen} constant vec4s; the {dev.arch} has {limit}")
    if self.lib.shared_bytes > MAX_SHARED: raise RuntimeError(f"{name}: {self.lib.shared_bytes} bytes of shared memory; the GPU has {MAX_SHARED}")
  def execute(self, args, global_size, local_size) -> None: raise RuntimeError("QCOM kernels run through the compute queue")
  def kernel_args(self, bufs: tuple, vals: tuple) -> list: return [*bufs, *(bits_of(v, dt) for v, dt in zip(vals, self.var_dtypes))]

class QCOMAllocator(GPUAllocator):
  """GPU memory is mapped for the CPU too, so copies in and out are CPU copies (after the device is idle). An image
  (IMAGE=1) is rows of pixels `descriptors.pitch` bytes apart; copies pack and unpack the rows."""
  def _alloc(self, size: int, options=None) -> GPUBuffer:
    if not isinstance(options, Image): return super()._alloc(size, options)
    buf = self.dev.alloc_memory(options.height * descriptors.pitch(options, _image_dtype(size, options)))
    return replace(buf, image=options)
  def offset(self, opaque: GPUBuffer, size: int, offset: int) -> GPUBuffer:
    if opaque.image is not None: raise ValueError(f"{self.dev.device} can't view part of an image ({opaque.image})")
    return super().offset(opaque, size, offset)
  def copyin(self, dest: GPUBuffer, src: memoryview) -> None:
    if dest.image is None: return super().copyin(dest, src)
    self._rows(dest, len(src))[:] = np.frombuffer(src, np.uint8).reshape(dest.image.height, -1)
  def copyout(self, dest: memoryview, src: GPUBuffer) -> None:
    if src.image is None: return super().copyout(dest, src)
    np.frombuffer(dest, np.uint8).reshape(src.image.height, -1)[:] = self._rows(src, len(dest))
  @staticmethod
  def _rows(buf: GPUBuffer, nbytes: int) -> np.ndarray:
    """The pixels of an image buffer of `nbytes` packed bytes, row by row (the padding at each row's end left out)."""
    image = buf.image
    row = nbytes // image.height
    return buf.view()[:image.height * descriptors.pitch(image, _image_dtype(nbytes, image))].reshape(image.height, -1)[:, :row]

def _image_dtype(nbytes: int, image: Image) -> DType:
  """The channel type of an image of `nbytes` packed bytes: float32 or float16 (FLOAT16=1)."""
  return descriptors.CHANNELS[nbytes // (image.height * image.width * 4)]

class QCOMDevice(HCQCompiled):
  """One kgsl context on the GPU. Completion is the signal memory the GPU writes; a wait that outlasts its spin sleeps
  in DEVICE_WAITTIMESTAMP_CTXTID, which also reports a context that faulted."""
  timestamp_ticks_per_us = cp.ALWAYS_ON_HZ / 1e6
  unsupported_dtypes = frozenset((dtypes.int64, dtypes.uint64, dtypes.float64))  # ir3 has no 64-bit types
  image_size = descriptors.MAX_SIZE
  def __init__(self, device: str):
    target = target_for(parse_targets(DEV.value), "QCOM")
    if target.renderer not in ("", "IR3"): raise ValueError(f"QCOM has no renderer {target.renderer!r} (known: IR3)")
    if ":" in device: raise DeviceUnavailable(f"QCOM unavailable: {device} asked for; kgsl has one GPU, QCOM")
    self.system = system_for(target.interface)
    try: self.fd = self.system.open("/dev/kgsl-3d0")
    except OSError as e:
      if is_missing(e): raise DeviceUnavailable(f"QCOM unavailable: no kgsl ({e.strerror})") from None
      raise
    info = kgsl.get_property(self.system, self.fd, kgsl.PROP_DEVICE_INFO, "struct kgsl_devinfo")
    self.chip_id = info.chip_id
    self.gen, self.arch = chip_arch(self.chip_id)
    if target.arch and target.arch != self.arch: raise ValueError(f"DEV asks for {target.arch}, but the GPU is an {self.arch} (chip id {self.chip_id:#010x})")
    self.ctx = self.kgsl("DRAWCTXT_CREATE", flags=CONTEXT_FLAGS).drawctxt_id
    self.last_timestamp = 0  # of the last GPU_COMMAND on the context
    self.retired: list[tuple[GPUBuffer, list[int]]] = []
    self.scratch = self.alloc_memory(PAGE_SIZE)  # what a6xx's CACHE_FLUSH_TS in a barrier writes
    self.commands = self.alloc_memory(COMMAND_RING)
    self.command_words = np.frombuffer(memoryview_at(self.commands.cpu, COMMAND_RING), dtype=np.uint32)
    self.command_at = 0
    self.signal_memory = self.alloc_memory(0x10000, uncached=True)
    self.arguments = ArgumentPool(self)
    toolchain = self.system.toolchain("/dev/kgsl-3d0", self.arch)
    if toolchain is None:
      from codegen.ir3 import IR3Renderer
      from codegen.ir3_compiler import IR3Compiler
      toolchain = IR3Renderer(self.arch), IR3Compiler(self.arch)
    super().__init__(device, QCOMAllocator(self), *toolchain, functools.partial(QCOMProgram, self), queue_for(self.gen, self.scratch.va),
                     signal_memory=(self.signal_memory.view().view(np.uint64), self.signal_memory.va))
    self.timeline_signal.idle = self.sleep_until_retired

  def kgsl(self, name: str, **fields): return kgsl.call(self.system, self.fd, name, **fields)

  # ---- memory ----
  def alloc_memory(self, size: int, host: bool = True, uncached: bool = False) -> GPUBuffer:
    """`size` bytes the GPU and the CPU both see at one address (GPUOBJ_ALLOC with USE_CPU_MAP, then mmap at offset
    id << PAGE_SHIFT, kgsl.c kgsl_mmap); all of it is system memory, whatever `host` asks; `uncached` for what the CPU
    and the GPU both poll (signals)."""
    if self.retired: self.free_retired()
    pages = round_up(max(size, 1), PAGE_SIZE)
    flags = kgsl.MEMFLAGS_USE_CPU_MAP | 12 << kgsl.MEMALIGN_SHIFT | (kgsl.CACHEMODE_UNCACHED << kgsl.CACHEMODE_SHIFT if uncached else 0)
    try: obj = self.kgsl("GPUOBJ_ALLOC", size=pages, flags=flags)
    except OSError as e:
      if e.errno == errno.ENOMEM: raise MemoryError(f"QCOM: out of memory for {pages} bytes") from None
      raise
    cpu = None
    try:
      cpu = self.system.mmap(0, obj.mmapsize or pages, PROT_READ | PROT_WRITE, MAP_SHARED, self.fd, obj.id * PAGE_SIZE)
      gpu = self.kgsl("GPUOBJ_INFO", id=obj.id).gpuaddr
      if gpu != cpu: raise RuntimeError(f"QCOM: GPU object {obj.id} is at GPU address {gpu:#x} but mapped at {cpu:#x} (USE_CPU_MAP)")
    except Exception:
      if cpu is not None: self.system.munmap(cpu, pages)
      self.kgsl("GPUOBJ_FREE", id=obj.id)
      raise
    return GPUBuffer(cpu, size, cpu=cpu, handle=obj.id, host=True)  # the bytes asked for: CPU copies fill exactly those

  def free_memory(self, buf: GPUBuffer) -> None:
    self.system.munmap(buf.cpu, round_up(max(buf.size, 1), PAGE_SIZE))
    self.kgsl("GPUOBJ_FREE", id=buf.handle)

  def retire(self, buf: GPUBuffer, release: list[int]) -> None:
    """Free `buf` once the timeline passed release[0] (a dropped queue's packets the GPU may still read)."""
    self.retired.append((buf, release))

  def free_retired(self) -> None:
    done, retired = self.timeline_signal.value, self.retired
    self.retired = [(b, r) for b, r in retired if r[0] > done]
    for buf, release in retired:
      if release[0] <= done: self.free_memory(buf)

  # ---- submission ----
  def submit(self, words: list[int]) -> None:
    """Copy `words` into the command ring and submit them; the ring starts over once the GPU retired all of it."""
    n = len(words)
    if 4 * n > COMMAND_RING: raise ValueError(f"{n} command dwords don't fit the {COMMAND_RING}-byte command ring")
    if self.command_at + n > len(self.command_words):
      self.wait_timestamp(self.last_timestamp, timeout_ms=0)
      self.command_at = 0
    self.command_words[self.command_at:self.command_at + n] = np.array(words, dtype=np.uint32)
    self.submit_ib(self.commands.va + 4 * self.command_at, n)
    self.command_at += n

  def submit_ib(self, va: int, dwords: int) -> None:
    """GPU_COMMAND with one indirect buffer of `dwords` at `va` on the context; its timestamp is the last one."""
    ib = kgsl.ffi.new("struct kgsl_command_object *", {"gpuaddr": va, "size": 4 * dwords, "flags": kgsl.CMDLIST_IB})
    try: cmd = self.kgsl("GPU_COMMAND", cmdlist=int(kgsl.ffi.cast("uintptr_t", ib)), cmdsize=kgsl.ffi.sizeof(ib[0]), numcmds=1, context_id=self.ctx)
    except OSError as e:
      if e.errno in kgsl.FAULT_ERRNOS: raise DeviceFault(self.fault(f"{kgsl.FAULT_ERRNOS[e.errno]} ({e.strerror})", self.reset_status())) from None
      raise
    self.last_timestamp = cmd.timestamp

  def wait_timestamp(self, timestamp: int, timeout_ms: int) -> bool:
    """Block in DEVICE_WAITTIMESTAMP_CTXTID until the context retired `timestamp` (timeout 0: kgsl waits for good); False
    on timeout. A faulted context (EDEADLK, EPROTO: adreno.c adreno_waittimestamp) becomes the device's error."""
    try: self.kgsl("DEVICE_WAITTIMESTAMP_CTXTID", context_id=self.ctx, timestamp=timestamp, timeout=timeout_ms)
    except OSError as e:
      if e.errno == errno.ETIMEDOUT: return False
      if e.errno in kgsl.FAULT_ERRNOS:
        self.fault(f"{kgsl.FAULT_ERRNOS[e.errno]} ({e.strerror})", self.reset_status())
        return True
      raise
    return True

  def sleep_until_retired(self) -> None: self.wait_timestamp(self.last_timestamp, WAKE_POLL_MS)

  # ---- faults ----
  def reset_status(self) -> int:
    """kgsl's reset status of the context, cleared as it is read (GETPROPERTY GPU_RESET_STAT, kgsl.c kgsl_prop_gpu_reset_stat)."""
    return kgsl.get_property(self.system, self.fd, kgsl.PROP_GPU_RESET_STAT, "unsigned int", self.ctx)

  def fault(self, what: str, stat: int) -> str:
    """Record a GPU fault on the context and go on with a new context: kgsl refuses work on an invalidated one."""
    self.error = f"{self.device}: GPU fault on kgsl context {self.ctx}: {what}" + (f"; {kgsl.RESET_STATS.get(stat, f'reset status {stat}')}" if stat else "")
    self.renew_context()
    return self.error

  def renew_context(self) -> None:
    """A fresh kgsl context; destroying the old one drops what it still had queued (adreno_drawctxt.c adreno_drawctxt_detach)."""
    self.kgsl("DRAWCTXT_DESTROY", drawctxt_id=self.ctx)
    self.ctx, self.last_timestamp, self.command_at = self.kgsl("DRAWCTXT_CREATE", flags=CONTEXT_FLAGS).drawctxt_id, 0, 0

  def synchronize(self, timeout_ms: int | None = None) -> None:
    """HCQ's synchronize; after a timeout the context (stuck in a wait that will never be met) is replaced, so the
    device stays usable."""
    try: super().synchronize(timeout_ms)
    except HCQTimeoutError:
      self.renew_context()
      raise

  def check_faults(self) -> str | None:
    if self.error is not None: return self.error
    if (stat := self.reset_status()) == kgsl.CTX_STAT_NO_ERROR: return None
    return self.fault("kgsl reset it", stat)

  def busy_queues(self) -> str | None:
    retired = self.kgsl("CMDSTREAM_READTIMESTAMP_CTXTID", context_id=self.ctx, type=kgsl.TIMESTAMP_RETIRED).timestamp
    return f"kgsl context {self.ctx} retired timestamp {retired} of {self.last_timestamp} submitted" if retired != self.last_timestamp else None
