"""LLVM IR -> native object file, through llvmlite (no external toolchain)."""
from __future__ import annotations
import platform, threading
import llvmlite.binding as llvm
from ir.switches import DEBUG
from codegen.compiler import Compiler, CompileError

_lock = threading.Lock()  # LLVM contexts are not safe to share between threads
_initialized = False

def _init() -> None:
  global _initialized
  if not _initialized:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    _initialized = True

def host_isa() -> str: return {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())

class LLVMCompiler(Compiler):
  """Compiles for `isa` (default: this machine), CPU `cpu` and extra `features` ("+avx2", "-avx512f")."""
  def __init__(self, isa: str = "", cpu: str = "", features: tuple[str, ...] = ()):
    _init()
    isa = isa or host_isa()
    triple = f"{isa}-unknown-linux-gnu" if isa != host_isa() else llvm.get_process_triple()
    if not cpu and isa == host_isa():
      cpu = llvm.get_host_cpu_name()
      host = llvm.get_host_cpu_features().flatten()
      features = tuple(f for f in host.split(",") if f) + tuple(features)
    try: target = llvm.Target.from_triple(triple)
    except RuntimeError as e: raise CompileError(f"LLVM has no target for {triple!r}: {e}") from None
    self.isa, self.cpu, self.features = isa, cpu or "generic", ",".join(features)
    self.machine = target.create_target_machine(cpu=self.cpu, features=self.features, opt=3, reloc="pic", codemodel="default")
    super().__init__(f"llvm_{triple}_{self.cpu}_{self.features}")

  def compile(self, src: str) -> bytes:
    with _lock:
      try:
        mod = llvm.parse_assembly(src)
        mod.verify()
      except RuntimeError as e: raise CompileError(f"invalid LLVM IR: {e}\n{src}") from None
      mod.triple, mod.data_layout = self.machine.triple, str(self.machine.target_data)
      builder = llvm.create_pass_builder(self.machine, llvm.create_pipeline_tuning_options(speed_level=3))
      builder.getModulePassManager().run(mod, builder)
      if DEBUG >= 7: print(self.machine.emit_assembly(mod))
      return self.machine.emit_object(mod)
