"""The CPU device: kernels rendered as LLVM IR, compiled in-process by llvmlite, loaded from the object file, and
called through cffi with the first global loop split across a thread pool. A JIT graph runs each stretch of its
single-threaded kernels as one call of a batch function tg compiles: it calls each kernel with its arguments from an
array, so a replay doesn't pay a Python dispatch per kernel."""
from __future__ import annotations
import struct, threading
from concurrent.futures import ThreadPoolExecutor
import numpy as np
from ir.dtype import C_TYPES, dtypes
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

    self.var_types = [C_TYPES[v.dtype] for v in spec.vars]

  def execute(self, args: list, global_size, local_size) -> None: self.launch([_word(a) for a in args], global_size[0])

  def threads(self, n: int) -> int: return max(1, min(NUM_CPU_THREADS.value, n, n * self.work_per_iteration // MIN_WORK_PER_THREAD))

  def launch(self, args: list[int], n: int) -> None:
    """Run iterations [0, n) of the outer loop, split across threads when there is enough work."""
    threads = self.threads(n)
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

def _word(a) -> int:
  """A kernel argument as the integer the call passes: a buffer's address, or the value itself."""
  return a.addr if isinstance(a, HostBuffer) else a.ctypes.data if isinstance(a, np.ndarray) else a

# the LLVM type each C parameter type of a kernel travels as (x86-64 passes a pointer as a 64-bit integer), and how
# its value is kept in a 64-bit slot of the batch's argument array
LLVM_PARAM = {"uintptr_t": "i64", "int32_t": "i32", "uint32_t": "i32", "int64_t": "i64", "float": "float", "double": "double"}
SLOT = {"float": lambda v: struct.unpack("<I", struct.pack("<f", v))[0], "double": lambda v: struct.unpack("<q", struct.pack("<d", v))[0]}

def _from_slot(t: str, w: str, a: str) -> list[str]:
  """IR lines that make the parameter value `a` of LLVM type `t` from the 64-bit slot value `w` (i64: `w` itself)."""
  if t == "i32": return [f"  {a} = trunc i64 {w} to i32"]
  if t == "double": return [f"  {a} = bitcast i64 {w} to double"]
  if t == "float": return [f"  {a}.bits = trunc i64 {w} to i32", f"  {a} = bitcast i32 {a}.bits to float"]
  return []

class BatchProgram:
  """Kernels that each run on one thread, called in order by one compiled function `void(int64_t *argv)`: argv
  holds every kernel's arguments in turn (buffer addresses, integers, floats as their bit patterns)."""
  def __init__(self, dev: CPUDevice, calls: list[tuple[CPUProgram, int, int]]):
    """calls: (program, its argument count, its outer loop's iteration count)."""
    self.programs = [p for p, _, _ in calls]  # held: their code must stay loaded while the batch may call it
    lines, at, self.slots = [], 0, []
    for k, (prg, nargs, n) in enumerate(calls):
      param_types = ["uintptr_t"] * (nargs - len(prg.var_types)) + prg.var_types
      args = []
      for i, t in enumerate(LLVM_PARAM[c] for c in param_types):
        w, a = f"%w{k}_{i}", f"%a{k}_{i}"
        lines += [f"  %p{k}_{i} = getelementptr i64, ptr %argv, i64 {at + i}", f"  {w} = load i64, ptr %p{k}_{i}", *_from_slot(t, w, a)]
        args.append(f"{t} {w if t == 'i64' else a}")
      self.slots += [SLOT.get(c) for c in param_types]
      lines.append(f"  call void inttoptr (i64 {int(ffi.cast('uintptr_t', prg.fn))} to ptr)({', '.join(args + ['i32 0', f'i32 {n}'])})")
      at += nargs
    src = "\n".join(["define void @tg_batch(ptr %argv) {", "entry:", *lines, "  ret void", "}", ""])
    self.image = LoadedImage(dev.compiler.compile(src))
    self.fn = ffi.cast("void(*)(int64_t *)", self.image.symbols["tg_batch"])
    self.argv = np.zeros(max(at, 1), dtype=np.int64)
    self.argv_address = ffi.cast("int64_t *", self.argv.ctypes.data)

  def execute(self, args: list, global_size, local_size) -> None:
    self.argv[:len(args)] = [_word(a) if slot is None else slot(a) for a, slot in zip(args, self.slots)]
    self.fn(self.argv_address)

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
    super()._submit(dev, out + words[at:])

  def _batches(self, dev) -> list[tuple[int, int, list[int], BatchProgram]]:
    def batchable(prg, n) -> bool: return isinstance(prg, CPUProgram) and prg.threads(n) == 1 and all(t in LLVM_PARAM for t in prg.var_types)
    stretches: list[list[tuple[int, CPUProgram, int, int]]] = []
    for e in self._execs:
      i, prg, nargs, n = e
      if not batchable(prg, n): continue
      last = stretches[-1][-1] if stretches else None
      # an exec is 5 + nargs words ("exec", program, nargs, args..., global, local): is the one before it adjacent?
      if last is not None and last[0] + 5 + last[2] == i: stretches[-1].append(e)
      else: stretches.append([e])
    return [(run[0][0], run[-1][0] + 5 + run[-1][2], [i + 3 + j for i, _, nargs, _ in run for j in range(nargs)],
             BatchProgram(dev, [(p, nargs, n) for _, p, nargs, n in run])) for run in stretches if len(run) > 1]

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
    super().__init__(device, HostAllocator(), LLVMRenderer(compiler.features), compiler, self._program, CPUQueue, SoftwareCopyQueue)
    self.engines = {"compute": SoftwareEngine(self, "compute"), "copy": SoftwareEngine(self, "copy")}

  def _program(self, name: str, lib: bytes, spec: ProgramSpec) -> CPUProgram: return CPUProgram(self, name, lib, spec)

  def pool(self, threads: int) -> ThreadPoolExecutor:
    if self._pool is None or self._pool._max_workers < threads - 1:
      self._pool = ThreadPoolExecutor(max_workers=max(threads - 1, 1), thread_name_prefix="tg-cpu")
    return self._pool
