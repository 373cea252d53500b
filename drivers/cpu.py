"""The CPU device: kernels rendered as LLVM IR, compiled in-process by llvmlite, loaded from the object file, and
called through cffi with the first global loop split across a thread pool."""
from __future__ import annotations
import time
from concurrent.futures import ThreadPoolExecutor
import numpy as np
from ir.switches import DEV, NUM_CPU_THREADS
from ir.target import parse_targets, split_cpu_arch, target_for
from codegen.llvmir import LLVMRenderer
from codegen.llvm_compiler import LLVMCompiler, host_isa
from codegen.renderer import ProgramSpec
from drivers.device import Compiled, LRUAllocator
from drivers.elf import LoadedImage
from drivers.system import ffi

ALIGN = 64  # bytes: the widest vector register (AVX-512)
MIN_WORK_PER_THREAD = 1 << 14  # loop iterations x inner work below which another thread costs more than it saves

class CPUAllocator(LRUAllocator):
  """Host memory as 64-byte aligned numpy byte arrays; a sub-buffer is a slice of its base."""
  def _alloc(self, size: int, options=None) -> np.ndarray:
    raw = np.empty(size + ALIGN, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start:start + size]
  def offset(self, opaque: np.ndarray, size: int, offset: int) -> np.ndarray: return opaque[offset:offset + size]
  def copyin(self, dest: np.ndarray, src: memoryview) -> None: dest[:] = np.frombuffer(src, dtype=np.uint8)
  def copyout(self, dest: memoryview, src: np.ndarray) -> None: np.frombuffer(dest, dtype=np.uint8)[:] = src

class CPUProgram:
  """A compiled kernel `void name(bufs..., int32 vars..., int32 core_start, int32 core_end)`."""
  def __init__(self, dev: CPUDevice, name: str, lib: bytes, spec: ProgramSpec):
    self.dev, self.name, self.image = dev, name, LoadedImage(lib)
    if name not in self.image.symbols: raise RuntimeError(f"kernel {name!r} not found in its object file")
    params = ["uintptr_t"] * len(spec.globals) + ["int32_t"] * (len(spec.vars) + 2)
    self.fn = ffi.cast(f"void(*)({', '.join(params)})", self.image.symbols[name])
    self.work_per_iteration = (spec.flops + spec.mem_bytes) // max(spec.global_size[0], 1) + 1

  def __call__(self, *bufs: np.ndarray, global_size=(1, 1, 1), local_size=None, vals: tuple[int, ...] = (), wait: bool = False):
    st = time.perf_counter()
    self.launch([b.ctypes.data for b in bufs] + list(vals), global_size[0])
    return time.perf_counter() - st if wait else None

  def launch(self, args: list[int], n: int) -> None:
    """Run iterations [0, n) of the outer loop, split across threads when there is enough work."""
    threads = max(1, min(NUM_CPU_THREADS.value, n, n * self.work_per_iteration // MIN_WORK_PER_THREAD))
    if threads == 1: return self.fn(*args, 0, n)
    bounds = [n * i // threads for i in range(threads + 1)]
    pool = self.dev.pool(threads)
    futures = [pool.submit(self.fn, *args, lo, hi) for lo, hi in zip(bounds[1:-1], bounds[2:])]
    self.fn(*args, bounds[0], bounds[1])
    for f in futures: f.result()

class CPUGraph:
  """A batch of captured kernels run back to back with their arguments bound once; only the addresses of the
  JIT's input buffers are patched before each replay."""
  def __init__(self, calls: list[tuple[CPUProgram, list, tuple[int, ...], int]], input_slots: dict[int, int]):
    self.calls = []
    for prg, bufs, vals, n in calls:
      args = [b.ensure_allocated()._buf.ctypes.data for b in bufs] + list(vals)
      patches = [(i, input_slots[id(b)]) for i, b in enumerate(bufs) if id(b) in input_slots]
      self.calls.append((prg, args, patches, n))
  def __call__(self, inputs: list) -> None:
    for prg, args, patches, n in self.calls:
      for pos, slot in patches: args[pos] = inputs[slot]._buf.ctypes.data
      prg.launch(args, n)

class CPUDevice(Compiled):
  def __init__(self, device: str):
    target = target_for(parse_targets(DEV.value), "CPU")
    if target.renderer not in ("", "LLVM"): raise ValueError(f"CPU has no renderer {target.renderer!r} (known: LLVM)")
    isa, cpu, features = split_cpu_arch(target.arch)
    if isa and isa != host_isa(): raise ValueError(f"CPU target {target.arch!r} is for {isa}; this machine runs {host_isa()}")
    self._pool: ThreadPoolExecutor | None = None
    super().__init__(device, CPUAllocator(), LLVMRenderer(), LLVMCompiler(isa, cpu, features), self._program, graph=CPUGraph)

  def _program(self, name: str, lib: bytes, spec: ProgramSpec) -> CPUProgram: return CPUProgram(self, name, lib, spec)

  def pool(self, threads: int) -> ThreadPoolExecutor:
    if self._pool is None or self._pool._max_workers < threads - 1:
      self._pool = ThreadPoolExecutor(max_workers=max(threads - 1, 1), thread_name_prefix="tg-cpu")
    return self._pool
