"""LLVM IR -> loadable HSA code object for an AMD GPU: LLVM's AMDGPU target through llvmlite emits a relocatable
object (in a compile worker process where there is one), tg's linker (codegen/amdgpu_elf.py) makes it loadable."""
from __future__ import annotations
from codegen import llvm_compiler
from codegen.amdgpu import parse_arch, wave_size
from codegen.amdgpu_elf import link
from codegen.compiler import Compiler, CompileError
from ir.switches import DEBUG

TRIPLE = "amdgcn-amd-amdhsa"

def features(arch: str) -> str:
  """The wave size is a subtarget feature; RDNA would default to wave32 too, but tg says so rather than rely on it."""
  return f"+wavefrontsize{wave_size(arch)}"

def compile_for(arch: str, src: str) -> bytes:
  """The code object of LLVM IR `src` for `arch` (what a compile worker process runs, codegen/compile_workers.py)."""
  obj = llvm_compiler.compile_for(TRIPLE, arch, features(arch), src, full_pipeline=True)  # GPU code keeps O3: untimed on real AMD GPUs
  try: return link(obj)
  except ValueError as e: raise CompileError(f"linking the {arch} code object: {e}") from None

class AMDGPUCompiler(Compiler):
  def __init__(self, arch: str = "gfx1100"):
    parse_arch(arch)
    llvm_compiler.check_target(TRIPLE, arch, (features(arch),), False)  # an arch LLVM doesn't know is a ValueError here
    self.arch = arch
    self.machine = llvm_compiler._machine(TRIPLE, arch, features(arch))
    self.worker_task = ("codegen.amdgpu_compiler:compile_for", [arch])
    super().__init__(f"amdgpu_{TRIPLE}_{arch}")

  def compile(self, src: str) -> bytes:
    if DEBUG >= 7: print(self.disassemble(src, b""))
    return compile_for(self.arch, src)

  def disassemble(self, src: str, lib: bytes) -> str:
    """LLVM's assembly listing of the same module (the code object holds exactly this code)."""
    with llvm_compiler._lock: return self.machine.emit_assembly(llvm_compiler._optimized(self.machine, src, full_pipeline=True))
