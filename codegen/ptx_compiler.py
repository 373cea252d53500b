"""PTX -> cubin for NVIDIA GPUs: with NVIDIA's `ptxas` when one is installed (CUDA toolkit, or the
nvidia-cuda-nvcc pip wheel), else with the nvJitLink library through cffi. No GPU and no libcuda are needed."""
from __future__ import annotations
import ctypes.util, functools, glob, importlib.util, os, re, shutil, subprocess, tempfile
from ir.switches import CUDA_PATH
from codegen.compiler import Compiler, CompileError

NVJITLINK_INPUT_PTX = 2
_NVJITLINK_ERRORS = ("SUCCESS", "UNRECOGNIZED_OPTION", "MISSING_ARCH", "INVALID_INPUT", "PTX_COMPILE", "NVVM_COMPILE",
                     "INTERNAL", "THREADPOOL", "UNRECOGNIZED_INPUT", "FINALIZE", "NULL_INPUT", "INCOMPATIBLE_OPTIONS",
                     "INCORRECT_INPUT_TYPE", "ARCH_MISMATCH", "OUTDATED_LIBRARY", "MISSING_FATBIN",
                     "UNRECOGNIZED_ARCH", "UNSUPPORTED_ARCH", "LTO_NOT_ENABLED")
_HOW_TO_GET = ("install one: `pip install nvidia-cuda-nvcc-cu12` (ptxas), `pip install nvidia-nvjitlink-cu12`, or a CUDA "
               "toolkit (set CUDA_PATH if it is not in /usr/local/cuda)")

def _wheel_dirs(*parts: str) -> list[str]:
  """`parts` inside each folder of the `nvidia` namespace package that NVIDIA's pip wheels install into (found without
  importing anything from them)."""
  try: spec = importlib.util.find_spec("nvidia")
  except (ImportError, ValueError): return []
  return [os.path.join(root, *parts) for root in (spec.submodule_search_locations or [])] if spec else []

def _ptxas_places() -> list[str]:
  """Where find_ptxas looks, in order; "PATH" stands for a search of $PATH."""
  cuda = [os.path.join(CUDA_PATH.value, "bin", "ptxas")] if CUDA_PATH.value else []
  # the CUDA 12 wheel installs nvidia/cuda_nvcc/bin, the CUDA 13 one nvidia/cu13/bin
  wheels = _wheel_dirs("cuda_nvcc", "bin", "ptxas") + _wheel_dirs("cu13", "bin", "ptxas")
  return cuda + ["PATH", "/usr/local/cuda/bin/ptxas", "/opt/cuda/bin/ptxas"] + wheels

def _nvjitlink_dirs() -> list[str]:
  cuda = [os.path.join(CUDA_PATH.value, "lib64")] if CUDA_PATH.value else []
  return _wheel_dirs("nvjitlink", "lib") + _wheel_dirs("cu13", "lib") + cuda + ["/usr/local/cuda/lib64", "/opt/cuda/lib64"]

def find_ptxas() -> str | None:
  """The path of the first ptxas found: $CUDA_PATH/bin, PATH, /usr/local/cuda/bin, /opt/cuda/bin, the pip wheels."""
  for place in _ptxas_places():
    path = shutil.which("ptxas") if place == "PATH" else place
    if path and os.path.isfile(path) and os.access(path, os.X_OK): return path
  return None

def find_nvdisasm() -> str | None:
  """nvdisasm (SASS from a cubin): $CUDA_PATH/bin, PATH, a CUDA toolkit, or NVIDIA's pip wheel nvidia-cuda-nvdisasm."""
  cuda = [os.path.join(CUDA_PATH.value, "bin", "nvdisasm")] if CUDA_PATH.value else []
  places = cuda + [shutil.which("nvdisasm") or "", "/usr/local/cuda/bin/nvdisasm", "/opt/cuda/bin/nvdisasm"] + \
           _wheel_dirs("cu13", "bin", "nvdisasm") + _wheel_dirs("cuda_nvdisasm", "bin", "nvdisasm")
  return next((p for p in places if p and os.path.isfile(p) and os.access(p, os.X_OK)), None)

def _version_key(path: str) -> tuple[int, ...]:
  return tuple(int(x) for x in re.findall(r"\d+", path.rsplit(".so", 1)[-1]))

def find_nvjitlink() -> str | None:
  """The nvJitLink shared library: a path from the pip wheels, $CUDA_PATH/lib64 or a CUDA toolkit (the newest version
  in the first folder that has one), else a name the system loader resolves; None when there is none."""
  for d in _nvjitlink_dirs():
    if found := sorted(glob.glob(os.path.join(d, "libnvJitLink.so*")), key=_version_key): return found[-1]
  return ctypes.util.find_library("nvJitLink")

def _with_source(log: str, src: str) -> str:
  """The tool's log followed by the PTX lines it names ("line N")."""
  lines = src.splitlines()
  named = sorted({int(n) for n in re.findall(r"\bline (\d+)", log) if 0 < int(n) <= len(lines)})
  return log.rstrip() + "".join(f"\n  {n:5d} | {lines[n - 1]}" for n in named)

class PTXCompiler(Compiler):
  """Compiles PTX text for `arch` ("sm_90", "sm_90a", ...) into a cubin. The tool is chosen when the compiler is made."""
  def __init__(self, arch: str):
    if not re.fullmatch(r"sm_\d+[af]?", arch): raise ValueError(f"bad NVIDIA arch {arch!r}: expected e.g. 'sm_90'")
    self.arch, self.ptxas = arch, find_ptxas()
    self.nvjitlink = None if self.ptxas else find_nvjitlink()
    if self.ptxas: key = f"ptxas-{_ptxas_version(self.ptxas)}_{arch}"
    elif self.nvjitlink: key = f"nvJitLink-{_NvJitLink.load(self.nvjitlink).version}_{arch}"
    else: key = None  # nothing can compile, so nothing may come from the disk cache either
    super().__init__(key)

  def compile(self, src: str) -> bytes:
    if self.ptxas: return self._ptxas(src)
    if self.nvjitlink: return _NvJitLink.load(self.nvjitlink).compile(src, self.arch)
    places = "\n".join(f"  {p}" for p in _ptxas_places())
    dirs = "\n".join(f"  {d}/libnvJitLink.so*" for d in _nvjitlink_dirs())
    raise CompileError(f"can't compile PTX for {self.arch}: neither ptxas nor nvJitLink was found.\nptxas: looked in\n{places}\n"
                       f"nvJitLink: looked in\n{dirs}\n  the system library path\n{_HOW_TO_GET}")

  def disassemble(self, src: str, lib: bytes) -> str | None:
    """The cubin's SASS, when nvdisasm is installed."""
    if (tool := find_nvdisasm()) is None: return None
    with tempfile.TemporaryDirectory(prefix="tg-nvdisasm-") as tmp:
      with open(os.path.join(tmp, "kernel.cubin"), "wb") as f: f.write(lib)
      try: run = subprocess.run([tool, "-c", "kernel.cubin"], cwd=tmp, capture_output=True, text=True)
      except OSError as e: return f"can't run {tool}: {e}"
    return run.stdout if run.returncode == 0 else f"{tool} failed: {run.stderr.strip()}"

  def _ptxas(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tg-ptxas-") as tmp:
      with open(os.path.join(tmp, "kernel.ptx"), "w") as f: f.write(src)
      try: run = subprocess.run([self.ptxas, f"-arch={self.arch}", "-o", "kernel.cubin", "kernel.ptx"], cwd=tmp, capture_output=True, text=True)
      except OSError as e: raise CompileError(f"can't run {self.ptxas}: {e}") from None
      if run.returncode != 0:
        raise CompileError(f"ptxas ({self.ptxas}) failed for {self.arch}:\n" + _with_source(run.stderr + run.stdout, src))
      with open(os.path.join(tmp, "kernel.cubin"), "rb") as f: return f.read()

@functools.cache
def _ptxas_version(path: str) -> str:
  """The release ptxas reports ("V12.9.86"), which names its output: cubins from another ptxas must not be reused."""
  try: out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
  except OSError as e: raise CompileError(f"can't run {path}: {e}") from None
  m = re.search(r"V\d+(\.\d+)+", out)
  return m[0] if m else " ".join(out.split()) or "unknown"

class _NvJitLink:
  """The nvJitLink entry points of one loaded library. Releases export plain names (nvJitLinkCreate) and/or versioned
  ones (__nvJitLinkCreate_12_0 .. _12_9, _13_0 ..), numbered from minor 0 up to the library's own version."""
  FUNCS = {"Create": "nvJitLinkHandle *, uint32_t, const char **", "Destroy": "nvJitLinkHandle *",
           "AddData": "nvJitLinkHandle, int, const void *, size_t, const char *", "Complete": "nvJitLinkHandle",
           "GetLinkedCubinSize": "nvJitLinkHandle, size_t *", "GetLinkedCubin": "nvJitLinkHandle, void *",
           "GetErrorLogSize": "nvJitLinkHandle, size_t *", "GetErrorLog": "nvJitLinkHandle, char *"}

  @staticmethod
  @functools.cache
  def load(path: str) -> _NvJitLink: return _NvJitLink(path)

  def __init__(self, path: str):
    import cffi  # only this path needs a C interface
    self.ffi = ffi = cffi.FFI()
    ffi.cdef("typedef struct nvJitLink *nvJitLinkHandle;\nvoid *dlopen(const char *, int);\nvoid *dlsym(void *, const char *);\n"
             "char *dlerror(void);\n" + "".join(f"typedef int (*{fn}_t)({args});\n" for fn, args in self.FUNCS.items()))
    libc = ffi.dlopen(None)
    handle = libc.dlopen(path.encode(), 2)  # RTLD_NOW
    if handle == ffi.NULL:
      err = libc.dlerror()
      raise CompileError(f"can't load nvJitLink from {path}: {ffi.string(err).decode() if err != ffi.NULL else 'dlopen failed'}")
    def has(name: str) -> bool: return libc.dlsym(handle, name.encode()) != ffi.NULL
    # the newest versioned export: the highest major with a _0, then its minors counted up from 0
    major = next((m for m in range(99, 10, -1) if has(f"__nvJitLinkCreate_{m}_0")), None)
    minor = 0
    while major is not None and has(f"__nvJitLinkCreate_{major}_{minor + 1}"): minor += 1
    self.version = f"{major}.{minor}" if major is not None else os.path.basename(path)
    self.fns = {}
    for fn in self.FUNCS:
      names = [f"nvJitLink{fn}"] + ([f"__nvJitLink{fn}_{major}_{minor}"] if major is not None else [])
      if (name := next((n for n in names if has(n)), None)) is None:
        raise CompileError(f"{path} is not a usable nvJitLink library: it exports none of {names}")
      self.fns[fn] = ffi.cast(f"{fn}_t", libc.dlsym(handle, name.encode()))

  def compile(self, src: str, arch: str) -> bytes:
    ffi, fns = self.ffi, self.fns
    handle = ffi.new("nvJitLinkHandle *")
    option = ffi.new("char[]", f"-arch={arch}".encode())
    if (r := fns["Create"](handle, 1, ffi.new("const char *[]", [option]))) != 0:
      raise CompileError(f"nvJitLinkCreate(-arch={arch}) failed: {self._error(r)}")
    try:
      data = src.encode()
      if (r := fns["AddData"](handle[0], NVJITLINK_INPUT_PTX, ffi.from_buffer(data), len(data), b"kernel.ptx")) == 0: r = fns["Complete"](handle[0])
      if r != 0:
        size = ffi.new("size_t *")
        fns["GetErrorLogSize"](handle[0], size)
        log = ffi.new("char[]", size[0] + 1)
        fns["GetErrorLog"](handle[0], log)
        raise CompileError(f"nvJitLink failed for {arch} ({self._error(r)}):\n" + _with_source(ffi.string(log).decode(errors="replace"), src))
      size = ffi.new("size_t *")
      if (r := fns["GetLinkedCubinSize"](handle[0], size)) != 0: raise CompileError(f"nvJitLinkGetLinkedCubinSize failed: {self._error(r)}")
      cubin = ffi.new("char[]", size[0])
      if (r := fns["GetLinkedCubin"](handle[0], cubin)) != 0: raise CompileError(f"nvJitLinkGetLinkedCubin failed: {self._error(r)}")
      return ffi.buffer(cubin)[:]
    finally: fns["Destroy"](handle)

  @staticmethod
  def _error(r: int) -> str: return f"NVJITLINK_{_NVJITLINK_ERRORS[r]}" if 0 <= r < len(_NVJITLINK_ERRORS) else f"error {r}"
