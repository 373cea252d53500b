"""LLVM IR -> native object file, through llvmlite (no external toolchain). A CPU name or feature list from the user
is checked first, in a child process (LLVM ends the process on some bad targets): names LLVM doesn't know, and, for
code that runs here, features this machine's CPU lacks, are a ValueError."""
from __future__ import annotations
import difflib, functools, json, os, platform, subprocess, sys, tempfile, threading
import llvmlite.binding as llvm
from ir.switches import DEBUG
from codegen.compiler import Compiler, CompileError

_lock = threading.Lock()  # LLVM's global context is not safe to share between threads
_initialized = False

def _init() -> None:
  global _initialized
  if not _initialized:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    _initialized = True

def host_isa() -> str: return {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())

def _probe() -> None:
  """In the child process of check_target: print (JSON) the CPU and feature names LLVM knows for the triple, and which
  of the features this machine lacks (argv) the CPU implies, and which its own CPU model implies; then compile a small
  function for the target, so that a target LLVM can't compile for ends this process, not the caller."""
  triple, cpu, features, host_cpu, absent = json.loads(sys.argv[1])
  _init()
  target = llvm.Target.from_triple(triple)
  with tempfile.TemporaryFile() as listing:  # LLVM prints its tables for cpu="help" to stderr
    saved = os.dup(2)
    os.dup2(listing.fileno(), 2)
    try: target.create_target_machine(cpu="help")
    finally:
      os.dup2(saved, 2)
      os.close(saved)
    listing.seek(0)
    names: dict[str, list[str]] = {"CPUs": [], "features": []}
    section: list[str] = []
    for line in listing.read().decode().splitlines():
      if line.startswith("Available "): section = names.get(line.split()[1], [])
      elif line.startswith("  ") and " - " in line: section.append(line.split()[0])
  out = {"cpus": names["CPUs"], "features": names["features"], "needs": [], "host_needs": []}
  if cpu not in out["cpus"] or any(f[1:] not in out["features"] for f in features): return print(json.dumps(out))
  # which features a CPU implies, by LLVM's own tables: a callee built for it inlines into a caller with the same CPU
  # and one feature turned off only when it doesn't need that feature (inlining needs the callee's features to be a subset)
  fn = lambda name, body, n, c, fs: f'define {name}(i32 %a) #{n} {{\n{body}\n}}\nattributes #{n} = {{ "target-cpu"="{c}" "target-features"="{",".join(fs)}" }}'
  ir = []
  for k, c, fs in (("x", cpu, features), ("h", host_cpu, [])):
    ir.append(fn(f"internal i32 @{k}", "%b = add i32 %a, 1\nret i32 %b", len(ir), c, fs))
    ir += [fn(f"i32 @{k}{j}", f"%r = call i32 @{k}(i32 %a)\nret i32 %r", len(ir) + j, c, [*fs, f"-{f}"]) for j, f in enumerate(absent)]
  mod = llvm.parse_assembly("\n".join(ir))
  machine = target.create_target_machine(cpu=cpu, features=",".join(features), opt=2, reloc="pic", codemodel="default")
  mod.triple, mod.data_layout = triple, str(machine.target_data)
  builder = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(speed_level=2))
  builder.getModulePassManager().run(mod, builder)
  for k, key in (("x", "needs"), ("h", "host_needs")): out[key] = [f for j, f in enumerate(absent) if " call " in str(mod.get_function(f"{k}{j}"))]
  machine.emit_object(mod)
  print(json.dumps(out))

@functools.cache
def check_target(triple: str, cpu: str, features: tuple[str, ...], runs_here: bool) -> None:
  """ValueError naming a CPU or feature LLVM doesn't know for `triple`, a target LLVM can't compile for, or (when
  the code `runs_here`) the features `cpu` and `features` need that this machine's CPU lacks. Features its own CPU
  model implies but it lacks (hidden by a VM) are allowed: LLVMCompiler turns every missing feature off."""
  absent = sorted(f for f, on in llvm.get_host_cpu_features().items() if not on) if runs_here else []
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  args = json.dumps([triple, cpu, features, llvm.get_host_cpu_name(), absent])
  code = f"import sys; sys.path.insert(0, {root!r}); from codegen.llvm_compiler import _probe; _probe()"
  done = subprocess.run([sys.executable, "-c", code, args], capture_output=True, text=True, timeout=300)
  if done.returncode != 0:
    why = next((l for l in reversed(done.stderr.splitlines()) if l.strip()), f"exit status {done.returncode}")
    raise ValueError(f"LLVM can't compile for {triple} CPU {cpu!r} with features {','.join(features) or 'none'}: {why}")
  known = json.loads(done.stdout)
  if cpu not in known["cpus"]:
    close = difflib.get_close_matches(cpu, known["cpus"], 5)
    raise ValueError(f"{cpu!r} is not a CPU LLVM knows for {triple}{'; did you mean ' + ', '.join(close) if close else ''}")
  if unknown := [f for f in features if f[1:] not in known["features"]]:
    raise ValueError(f"LLVM knows no feature {', '.join(repr(f[1:]) for f in unknown)} for {triple}")
  lacking = sorted({f[1:] for f in features if f[0] == "+" and f[1:] in absent} | (set(known["needs"]) - set(known["host_needs"])))
  if lacking: raise ValueError(f"CPU {cpu!r}{' with ' + ','.join(features) if features else ''} needs {', '.join(lacking)}, which this machine's CPU lacks")

class LLVMCompiler(Compiler):
  """Compiles for `isa` (default: this machine), CPU `cpu` and extra `features` ("+avx2", "-avx512f"). With
  `runs_here` the code runs on this machine: the CPU and features must be ones it has."""
  def __init__(self, isa: str = "", cpu: str = "", features: tuple[str, ...] = (), runs_here: bool = False):
    _init()
    isa = isa or host_isa()
    triple = f"{isa}-unknown-linux-gnu" if isa != host_isa() else llvm.get_process_triple()
    try: llvm.Target.from_triple(triple)
    except RuntimeError as e: raise CompileError(f"LLVM has no target for {triple!r}: {e}") from None
    here = isa == host_isa()
    if cpu or features: check_target(triple, cpu or (llvm.get_host_cpu_name() if here else "generic"), tuple(features), runs_here and here)
    if here and (not cpu or runs_here):  # without a CPU: this machine's; with one, for code run here: minus what this CPU lacks
      have = llvm.get_host_cpu_features()
      features = tuple(f"{'+' if on else '-'}{f}" for f, on in have.items() if not (cpu and on)) + tuple(features)
      cpu = cpu or llvm.get_host_cpu_name()
    self.isa, self.cpu, self.features = isa, cpu or "generic", ",".join(features)
    self.machine = _machine(triple, self.cpu, self.features)
    self.worker_task = ("codegen.llvm_compiler:compile_for", [triple, self.cpu, self.features])
    super().__init__(f"llvm_{triple}_{self.cpu}_{self.features}")

  def compile(self, src: str) -> bytes:
    with _lock:
      mod = _optimized(self.machine, src, full_pipeline=False)
      if DEBUG >= 7: print(self.machine.emit_assembly(mod))
      return self.machine.emit_object(mod)

  def disassemble(self, src: str, lib: bytes) -> str:
    with _lock: return self.machine.emit_assembly(_optimized(self.machine, src, full_pipeline=False))

@functools.cache
def _machine(triple: str, cpu: str, features: str):
  _init()
  return llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features=features, opt=3, reloc="pic", codemodel="default")

# CPU kernels get only these passes: tg vectorizes and unrolls them and simplifies their index math itself, so what LLVM
# adds is accumulators in registers, folding, and common subexpressions across unrolled lanes (loop invariants are
# hoisted in code generation). The MNIST step's kernels and matmuls of 256 to 2048 ran as fast as after the O1 or O3
# pipeline, whose passes took 1.2 s of CPU for the first step's 106 kernels against 0.3 s for these.
CPU_PASSES = ("sroa", "instruction_combine", "simplify_cfg", "new_gvn", "dead_code_elimination")

def _optimized(machine, src: str, full_pipeline: bool):
  """The module of `src` after LLVM's O3 pipeline (`full_pipeline`: GPU code) or else CPU_PASSES."""
  try:
    mod = llvm.parse_assembly(src)
    mod.verify()
  except RuntimeError as e: raise CompileError(f"invalid LLVM IR: {e}\n{src}") from None
  mod.triple, mod.data_layout = machine.triple, str(machine.target_data)
  builder = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(speed_level=3))
  if full_pipeline: passes = builder.getModulePassManager()
  else:
    passes = llvm.create_new_module_pass_manager()
    for name in CPU_PASSES: getattr(passes, f"add_{name}_pass")()
  passes.run(mod, builder)
  return mod

def compile_for(triple: str, cpu: str, features: str, src: str, full_pipeline: bool = False) -> bytes:
  """The object file of LLVM IR `src` for a target (what a compile worker process runs, codegen/compile_workers.py)."""
  machine = _machine(triple, cpu, features)
  with _lock: return machine.emit_object(_optimized(machine, src, full_pipeline))
