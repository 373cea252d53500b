"""The CPU device: kernels rendered as LLVM IR, compiled in-process by llvmlite, loaded from the object file, and
called through cffi with the first global loop split across a thread pool."""
from __future__ import annotations
import threading
from concurrent.futures import ThreadPoolExecutor
import numpy as np
from ir.dtype import C_TYPES
from ir.switches import DEV, NUM_CPU_THREADS, SwitchError
from ir.target import parse_targets, split_cpu_arch, target_for
from codegen.llvmir import LLVMRenderer
from codegen.llvm_compiler import LLVMCompiler, host_isa
from codegen.renderer import ProgramSpec
from drivers.hcq import HCQCompiled, HCQProgram, SoftwareCopyQueue, SoftwareEngine, SoftwareQueue
from drivers.host_memory import HostAllocator, HostBuffer
from drivers.elf import LoadedImage
from drivers.system import ffi

MIN_WORK_PER_THREAD = 1 << 14  # loop iterations x inner work below which another thread costs more than it saves
CHUNKS_PER_THREAD = 4

class CPUProgram(HCQProgram):
  """A compiled kernel `void name(bufs..., vars..., int32 core_start, int32 core_end)`."""
  def __init__(self, dev: CPUDevice, name: str, lib: bytes, spec: ProgramSpec):
    super().__init__(dev, name)
    self.image = LoadedImage(lib)
    if name not in self.image.symbols: raise RuntimeError(f"kernel {name!r} not found in its object file")
    params = ["uintptr_t"] * len(spec.globals) + [C_TYPES[v.dtype] for v in spec.vars] + ["int32_t"] * 2
    self.fn = ffi.cast(f"void(*)({', '.join(params)})", self.image.symbols[name])
    self.work_per_iteration = (spec.flops + spec.mem_bytes) // max(spec.global_size[0], 1) + 1

  def execute(self, args: list, global_size, local_size) -> None:
    self.launch([a.addr if isinstance(a, HostBuffer) else a.ctypes.data if isinstance(a, np.ndarray) else a for a in args], global_size[0])

  def launch(self, args: list[int], n: int) -> None:
    """Run iterations [0, n) of the outer loop, split across threads when there is enough work."""
    threads = max(1, min(NUM_CPU_THREADS.value, n, n * self.work_per_iteration // MIN_WORK_PER_THREAD))
    if threads == 1: return self.fn(*args, 0, n)
    chunks = min(n, threads * CHUNKS_PER_THREAD)  # taken in turn, so a thread that gets interrupted takes fewer
    bounds = [n * i // chunks for i in range(chunks + 1)]
    todo, lock = iter(zip(bounds, bounds[1:])), threading.Lock()
    def work() -> None:
      while True:
        with lock: chunk = next(todo, None)
        if chunk is None: return
        self.fn(*args, *chunk)
    pool, futures = self.dev.pool(threads), []
    try:
      for _ in range(threads - 1): futures.append(pool.submit(work))
    except RuntimeError: pass  # the interpreter is exiting and the pool takes no more work: this thread does the rest
    work()
    for f in futures: f.result()

class CPUDevice(HCQCompiled):
  """Kernels run on the compute engine's worker thread (and the thread pool it splits them over)."""
  def __init__(self, device: str):
    target = target_for(parse_targets(DEV.value), "CPU")
    if target.renderer not in ("", "LLVM"): raise ValueError(f"CPU has no renderer {target.renderer!r} (known: LLVM)")
    isa, cpu, features = split_cpu_arch(target.arch)
    if isa and isa != host_isa(): raise ValueError(f"CPU target {target.arch!r} is for {isa}; this machine runs {host_isa()}")
    self._pool: ThreadPoolExecutor | None = None
    try: compiler = LLVMCompiler(isa, cpu, features, runs_here=True)
    except ValueError as e: raise SwitchError(f"DEV='{DEV!r}': {e}") from None
    super().__init__(device, HostAllocator(), LLVMRenderer(compiler.features), compiler, self._program, SoftwareQueue, SoftwareCopyQueue)
    self.engines = {"compute": SoftwareEngine(self, "compute"), "copy": SoftwareEngine(self, "copy")}

  def _program(self, name: str, lib: bytes, spec: ProgramSpec) -> CPUProgram: return CPUProgram(self, name, lib, spec)

  def pool(self, threads: int) -> ThreadPoolExecutor:
    if self._pool is None or self._pool._max_workers < threads - 1:
      self._pool = ThreadPoolExecutor(max_workers=max(threads - 1, 1), thread_name_prefix="tg-cpu")
    return self._pool
