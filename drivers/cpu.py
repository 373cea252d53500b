"""The CPU device: kernels rendered as LLVM IR, compiled in-process by llvmlite, loaded from the object file, and
called through cffi by their argv entry, with the outer loop (Kernel.core_axes) split across the worker threads of
drivers/cpu_pool.py. A JIT graph runs each stretch of its single-threaded kernels as one call of a batch function tg
compiles: it calls each kernel's entry with its part of one argument array, so a replay doesn't pay a Python dispatch
per kernel."""
from __future__ import annotations
import struct
import numpy as np
from ir.dtype import C_TYPES, dtypes
from ir.switches import DEV, NUM_CPU_THREADS, SwitchError
from ir.target import parse_targets, split_cpu_arch, target_for
from codegen.llvmir import LLVMRenderer
from codegen.llvm_compiler import LLVMCompiler, host_isa
from codegen.renderer import ProgramSpec
from drivers.hcq import HCQCompiled, HCQProgram, SoftwareCopyQueue, SoftwareEngine, SoftwareQueue
from drivers.host_memory import HostAllocator, HostBuffer
from drivers.cpu_pool import CorePool
from drivers.elf import LoadedImage
from drivers.system import core_cache_bytes, ffi

MIN_WORK_PER_THREAD = 1 << 14  # loop iterations x inner work below which another thread costs more than it saves
CHUNKS_PER_THREAD = 4
WAKE_WORK = 1 << 22  # loop iterations x inner work above which waking a sleeping worker (tens of microseconds) pays

class CPUProgram(HCQProgram):
  """A compiled kernel, called through its entry `void name_argv(int64_t *argv, int32 core_start, int32 core_end)`:
  argv holds the buffers' addresses, then the Variables' values (floats as their bit patterns)."""
  def __init__(self, dev: CPUDevice, name: str, lib: bytes, spec: ProgramSpec):
    super().__init__(dev, name)
    self.image = LoadedImage(lib)
    if f"{name}_argv" not in self.image.symbols: raise RuntimeError(f"kernel entry {name}_argv not found in its object file")
    self.entry_address = self.image.symbols[f"{name}_argv"]
    self.entry = ffi.cast("void(*)(int64_t *, int32_t, int32_t)", self.entry_address)
    self.work_per_iteration = (spec.flops + spec.mem_bytes) // max(spec.global_size[0], 1) + 1
    self.argv = ArgumentArray([None] * len(spec.globals) + [SLOT.get(C_TYPES[v.dtype]) for v in spec.vars])

  def execute(self, args: list, global_size, local_size) -> None:
    self.argv.fill(args)
    self.launch(global_size[0])

  def threads(self, n: int) -> int: return max(1, min(NUM_CPU_THREADS.value, n, n * self.work_per_iteration // MIN_WORK_PER_THREAD))

  def launch(self, n: int) -> None:
    """Run iterations [0, n) of the outer loop with the arguments in argv, split across threads when there is enough work."""
    threads = self.threads(n)
    if threads == 1: self.entry(self.argv.pointer, 0, n)
    else:
      pool, work = self.dev.pool(threads), n * self.work_per_iteration
      pool.run(self.entry_address, self.argv.address, n, chunk_count(n, threads), wake=work >= WAKE_WORK)

def chunk_count(n: int, threads: int) -> int:
  """How many chunks `threads` share n outer iterations in: the most, up to CHUNKS_PER_THREAD a thread, that are all
  alike and come out even over the threads, else that many (a thread whose chunks hold one iteration more runs that
  much longer: a 1536 matmul's 12 blocks of B panels in 8 chunks ran at 411 GFLOPS, in 6 at 470)."""
  most = min(n, threads * CHUNKS_PER_THREAD)
  return next((c for c in range(most, 0, -1) if n % c == 0 and c % threads == 0), most)

def _word(a) -> int:
  """A kernel argument as the integer the call passes: a buffer's address, or the value itself."""
  return a.addr if isinstance(a, HostBuffer) else a.ctypes.data if isinstance(a, np.ndarray) else a

# how a Variable's value of each C type is kept in a 64-bit argv slot (integers as themselves)
SLOT = {"float": lambda v: struct.unpack("<I", struct.pack("<f", v))[0], "double": lambda v: struct.unpack("<q", struct.pack("<d", v))[0]}

class ArgumentArray:
  """The int64 argv a compiled entry reads: per argument, its slot packer (None: a buffer's address or an integer)."""
  def __init__(self, slots: list):
    self.slots = slots
    self.words = np.zeros(max(len(slots), 1), dtype=np.int64)
    self.address = self.words.ctypes.data
    self.pointer = ffi.cast("int64_t *", self.address)
    self.view = memoryview(self.words).cast("B").cast("q")  # written word by word: faster than through cffi's pointer or a numpy slice
  def fill(self, args: list) -> None:
    words = self.view
    for i, (a, slot) in enumerate(zip(args, self.slots)): words[i] = _word(a) if slot is None else slot(a)

class BatchProgram:
  """Kernels that each run on one thread, called in order by one compiled function `void(int64_t *argv)`: argv
  holds every kernel's argv slots in turn, and each kernel's entry gets a pointer to its own."""
  def __init__(self, dev: CPUDevice, calls: list[tuple[CPUProgram, int]]):
    """calls: (program, its outer loop's iteration count)."""
    self.programs = [p for p, _ in calls]  # held: their code must stay loaded while the batch may call it
    lines, slots = [], []
    for k, (prg, n) in enumerate(calls):
      lines += [f"  %argv{k} = getelementptr i64, ptr %argv, i64 {len(slots)}",
                f"  call void inttoptr (i64 {prg.entry_address} to ptr)(ptr %argv{k}, i32 0, i32 {n})"]
      slots += prg.argv.slots
    src = "\n".join(["define void @tg_batch(ptr %argv) {", "entry:", *lines, "  ret void", "}", ""])
    self.image = LoadedImage(dev.compiler.compile(src))
    self.fn = ffi.cast("void(*)(int64_t *)", self.image.symbols["tg_batch"])
    self.argv = ArgumentArray(slots)

  def execute(self, args: list, global_size, local_size) -> None:
    self.argv.fill(args)
    self.fn(self.argv.pointer)

class CPUQueue(SoftwareQueue):
  """When bound to the device (a JIT graph's queue), stretches of two or more consecutive kernels that each run on one
  thread become one call of a BatchProgram, made at the first submit."""
  def __init__(self):
    super().__init__()
    self._execs: list[tuple[int, CPUProgram, int, int]] = []  # (word index, program, argument count, iterations)
    self._plan: list[tuple[int, int, list[int], BatchProgram]] | None = None  # per stretch: first word, end word, argument words, batch

  def exec(self, prg, args, global_size, local_size):
    self._execs.append((len(self._q), prg, len(args), global_size[0]))
    return super().exec(prg, args, global_size, local_size)

  def _submit(self, dev, words):
    if self._bound is not dev: return super()._submit(dev, words)
    if self._plan is None: self._plan = self._batches(dev)
    out, at = [], 0
    for start, end, arg_words, batch in self._plan:
      out += words[at:start] + ["exec", batch, len(arg_words), *[words[j] for j in arg_words], (1, 1, 1), (1, 1, 1)]
      at = end
    dev.engines[self.engine].submit(out + words[at:] if out else list(words))

  def _batches(self, dev) -> list[tuple[int, int, list[int], BatchProgram]]:
    def batchable(prg, n) -> bool: return isinstance(prg, CPUProgram) and prg.threads(n) == 1
    stretches: list[list[tuple[int, CPUProgram, int, int]]] = []
    for e in self._execs:
      i, prg, nargs, n = e
      if not batchable(prg, n): continue
      last = stretches[-1][-1] if stretches else None
      # an exec is 5 + nargs words ("exec", program, nargs, args..., global, local): is the one before it adjacent?
      if last is not None and last[0] + 5 + last[2] == i: stretches[-1].append(e)
      else: stretches.append([e])
    return [(run[0][0], run[-1][0] + 5 + run[-1][2], [i + 3 + j for i, _, nargs, _ in run for j in range(nargs)],
             BatchProgram(dev, [(p, n) for _, p, _, n in run])) for run in stretches if len(run) > 1]

class CPUDevice(HCQCompiled):
  """Kernels run on the compute engine (its worker thread, or the submitting thread when the engine is idle) and the
  thread pool it splits them over."""
  engines_notify = True
  def __init__(self, device: str):
    target = target_for(parse_targets(DEV.value), "CPU")
    if target.renderer not in ("", "LLVM"): raise ValueError(f"CPU has no renderer {target.renderer!r} (known: LLVM)")
    isa, cpu, features = split_cpu_arch(target.arch)
    if isa and isa != host_isa(): raise ValueError(f"CPU target {target.arch!r} is for {isa}; this machine runs {host_isa()}")
    self._pool: CorePool | None = None
    try: compiler = LLVMCompiler(isa, cpu, features, runs_here=True)
    except ValueError as e: raise SwitchError(f"DEV='{DEV!r}': {e}") from None
    super().__init__(device, HostAllocator(), LLVMRenderer(compiler.features, NUM_CPU_THREADS.value, core_cache_bytes()), compiler, self._program, CPUQueue, SoftwareCopyQueue)
    self.engines = {"compute": SoftwareEngine(self, "compute"), "copy": SoftwareEngine(self, "copy")}

  def _program(self, name: str, lib: bytes, spec: ProgramSpec) -> CPUProgram: return CPUProgram(self, name, lib, spec)

  def pool(self, threads: int) -> CorePool:
    """The worker threads, at least threads - 1 of them besides the one that launches."""
    if self._pool is None: self._pool = CorePool(self.compiler.compile)
    self._pool.add_workers(threads - 1 - self._pool.workers)
    return self._pool
