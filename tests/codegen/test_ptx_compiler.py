import ctypes.util, os, struct, tempfile
import pytest
import codegen.ptx_compiler as ptx_compiler
from codegen.compiler import CompileError
from codegen.ptx_compiler import PTXCompiler, find_nvjitlink, find_ptxas
from ir.switches import Context

KERNEL = """.version 7.8
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out)
{
  .reg .u64 %rd<2>;
  .reg .u32 %r<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  cvta.to.global.u64 %rd1, %rd1;
  st.global.u32 [%rd1], %r1;
  ret;
}
"""
BAD = KERNEL.replace("mov.u32 %r1, %tid.x;", "mov.u32 %r1, %nosuchreg;")
BAD_LINE = BAD.splitlines().index("  mov.u32 %r1, %nosuchreg;") + 1
needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (pip install nvidia-cuda-nvcc-cu12)")

def is_cubin(lib: bytes) -> bool: return lib[:4] == b"\x7fELF" and struct.unpack_from("<H", lib, 18)[0] == 190

def executable(path, text: str = "#!/bin/sh\n") -> str:
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text)
  path.chmod(0o755)
  return str(path)

@needs_ptxas
def test_ptxas_compiles_a_cubin():
  c = PTXCompiler("sm_90")
  assert c.ptxas == find_ptxas() and c.cachekey.startswith("ptxas-") and c.cachekey.endswith("_sm_90")
  assert is_cubin(c.compile(KERNEL))

@needs_ptxas
def test_ptxas_errors_name_the_ptx_line_and_leave_nothing_behind(tmp_path, monkeypatch):
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  with pytest.raises(CompileError) as e: PTXCompiler("sm_90").compile(BAD)
  msg = str(e.value)
  assert "ptxas" in msg and f"line {BAD_LINE}" in msg and f"{BAD_LINE} |   mov.u32 %r1, %nosuchreg;" in msg
  with pytest.raises(CompileError, match="sm_1000"): PTXCompiler("sm_1000").compile(KERNEL)
  assert list(tmp_path.iterdir()) == []

@needs_ptxas
def test_compile_cached_in_memory_and_on_disk(tmp_path, monkeypatch):
  monkeypatch.setenv("CACHEDB", str(tmp_path / "cache.db"))
  with Context(CCACHE=1):
    c = PTXCompiler("sm_90")
    calls = []
    compile_ = c.compile
    monkeypatch.setattr(c, "compile", lambda src: calls.append(src) or compile_(src))
    first = c.compile_cached(KERNEL)
    assert c.compile_cached(KERNEL) is first and len(calls) == 1 and is_cubin(first)
    again = PTXCompiler("sm_90")  # the same ptxas and arch: the cubin comes from the disk cache
    monkeypatch.setattr(again, "compile", lambda src: pytest.fail("compiled again"))
    assert again.compile_cached(KERNEL) == first
  assert PTXCompiler("sm_86").cachekey != c.cachekey

def test_no_compiler_says_where_it_looked_and_what_to_install(monkeypatch):
  monkeypatch.setattr(ptx_compiler, "find_ptxas", lambda: None)
  monkeypatch.setattr(ptx_compiler, "find_nvjitlink", lambda: None)
  c = PTXCompiler("sm_90")
  assert c.cachekey is None
  with pytest.raises(CompileError) as e: c.compile_cached(KERNEL)
  msg = str(e.value)
  assert "neither ptxas nor nvJitLink" in msg and "pip install nvidia-cuda-nvcc-cu12" in msg
  assert "/usr/local/cuda/bin/ptxas" in msg and "PATH" in msg and "libnvJitLink.so*" in msg

def test_bad_arch():
  with pytest.raises(ValueError, match="compute_90"): PTXCompiler("compute_90")

def test_find_ptxas_order(tmp_path, monkeypatch):
  on_path = executable(tmp_path / "path" / "ptxas")
  in_cuda = executable(tmp_path / "cuda" / "bin" / "ptxas")
  monkeypatch.setenv("PATH", str(tmp_path / "path"))
  with Context(CUDA_PATH=str(tmp_path / "cuda")): assert find_ptxas() == in_cuda
  with Context(CUDA_PATH=""): assert find_ptxas() == on_path
  os.chmod(in_cuda, 0o644)  # not executable: passed over
  with Context(CUDA_PATH=str(tmp_path / "cuda")): assert find_ptxas() == on_path

def test_pip_wheel_locations(tmp_path, monkeypatch):
  lib = tmp_path / "nvidia" / "nvjitlink" / "lib" / "libnvJitLink.so.12"
  lib.parent.mkdir(parents=True)
  lib.write_bytes(b"")
  monkeypatch.syspath_prepend(str(tmp_path))  # a first root of the `nvidia` namespace package
  places = ptx_compiler._ptxas_places()
  assert str(tmp_path / "nvidia" / "cuda_nvcc" / "bin" / "ptxas") in places and str(tmp_path / "nvidia" / "cu13" / "bin" / "ptxas") in places
  assert find_nvjitlink() == str(lib)

def test_find_nvjitlink_in_cuda_path_and_system(tmp_path, monkeypatch):
  monkeypatch.setattr(ptx_compiler, "_wheel_dirs", lambda *parts: [])
  for name in ("libnvJitLink.so.12", "libnvJitLink.so.12.9.86", "libnvJitLink.so.12.4.99"):
    (tmp_path / "lib64").mkdir(exist_ok=True)
    (tmp_path / "lib64" / name).write_bytes(b"")
  with Context(CUDA_PATH=str(tmp_path)): assert find_nvjitlink() == str(tmp_path / "lib64" / "libnvJitLink.so.12.9.86")
  monkeypatch.setattr(ptx_compiler, "_nvjitlink_dirs", lambda: [])
  monkeypatch.setattr(ctypes.util, "find_library", lambda name: "libnvJitLink.so.13" if name == "nvJitLink" else None)
  assert find_nvjitlink() == "libnvJitLink.so.13"

def test_unloadable_nvjitlink(tmp_path, monkeypatch):
  (tmp_path / "libnvJitLink.so.13").write_bytes(b"not a shared library")
  monkeypatch.setattr(ptx_compiler, "find_ptxas", lambda: None)
  monkeypatch.setattr(ptx_compiler, "find_nvjitlink", lambda: str(tmp_path / "libnvJitLink.so.13"))
  with pytest.raises(CompileError, match="can't load nvJitLink"): PTXCompiler("sm_90")

@pytest.mark.skipif(find_nvjitlink() is None, reason="nvJitLink not found (pip install nvidia-nvjitlink-cu12)")
def test_nvjitlink_compiles_when_ptxas_is_missing(monkeypatch):
  monkeypatch.setattr(ptx_compiler, "find_ptxas", lambda: None)
  c = PTXCompiler("sm_90")
  assert c.nvjitlink == find_nvjitlink() and c.cachekey.startswith("nvJitLink-")
  assert is_cubin(c.compile(KERNEL))
  with pytest.raises(CompileError) as e: c.compile(BAD)
  assert "nvJitLink" in str(e.value) and f"{BAD_LINE} |   mov.u32 %r1, %nosuchreg;" in str(e.value)

@needs_ptxas
@pytest.mark.skipif(ptx_compiler.find_nvdisasm() is None, reason="nvdisasm not found (pip install nvidia-cuda-nvdisasm)")
def test_disassemble_shows_the_cubins_sass():
  c = PTXCompiler("sm_90")
  sass = c.disassemble(KERNEL, c.compile(KERNEL))
  assert ".text.k:" in sass and "EXIT" in sass and "S2R" in sass  # %tid.x is read by S2R
