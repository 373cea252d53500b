"""NULL device: kernels are rendered and compiled (for the renderer chosen by DEV, e.g. NULL:LLVM or NULL:PYTHON)
but never run, and reading data back is refused unless NULL_ALLOW_COPYOUT=1 (then it reads zeros). For schedule and
codegen tests, and for compiling for a target this machine can't run."""
from __future__ import annotations
from ir.switches import DEV, getenv
from ir.target import parse_targets, split_cpu_arch, target_for
from drivers.device import Compiled
from drivers.host_memory import HostAllocator

class NullAllocator(HostAllocator):
  def copyout(self, dest: memoryview, src) -> None:
    if not getenv("NULL_ALLOW_COPYOUT", 0): raise RuntimeError("NULL runs no kernels, so it has no data to read (NULL_ALLOW_COPYOUT=1 reads zeros)")
    dest[:] = bytes(len(dest))

class NullProgram:
  def __init__(self, name: str, lib: bytes, spec=None): self.name = name
  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=None, vals=(), wait: bool = False): return 0.0 if wait else None

class NullDevice(Compiled):
  def __init__(self, device: str):
    target = target_for(parse_targets(DEV.value), "NULL")
    if target.renderer in ("", "LLVM"):
      from codegen.llvm_compiler import LLVMCompiler
      from codegen.llvmir import LLVMRenderer
      isa, cpu, features = split_cpu_arch(target.arch)
      compiler = LLVMCompiler(isa, cpu, features)
      renderer = LLVMRenderer(compiler.features)
    elif target.renderer == "PYTHON":
      from codegen.python_renderer import PythonCompiler, PythonRenderer
      renderer, compiler = PythonRenderer(), PythonCompiler()
    else: raise ValueError(f"NULL has no renderer {target.renderer!r} (known: LLVM, PYTHON)")
    super().__init__(device, NullAllocator(), renderer, compiler, NullProgram)
