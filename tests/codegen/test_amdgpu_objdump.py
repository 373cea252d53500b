"""The code objects tg links, read by LLVM's own tool: llvm-objdump finds each kernel's symbol and disassembles its
code, and tg's decoder of AMD machine code (drivers/mock/amd/shader, what DEBUG=7 and the model use) sees the same
instructions at the same offsets. Runs where an llvm-objdump that knows the architecture is installed."""
import glob, re, shutil, subprocess
import numpy as np
import pytest
from tg import Tensor
from codegen.amdgpu import AMDGPURenderer
from codegen.amdgpu_compiler import AMDGPUCompiler
from codegen.amdgpu_elf import read
from codegen.program import get_program
from drivers.mock.amd.shader import execute

OBJDUMPS = sorted({*filter(None, [shutil.which("llvm-objdump")]), *glob.glob("/usr/bin/llvm-objdump-*")})
LINE = re.compile(r"^\s+(\S.*?)\s*//\s*([0-9A-Fa-f]{12}):")

def kernels():
  rng = np.random.default_rng(0)
  a, b = (Tensor(rng.standard_normal((16, 16)).astype(np.float32)) for _ in range(2))
  yield "elementwise", (a * b + 1).exp2()
  yield "reduction", a.sum(1).sqrt()
  yield "matmul", a @ b
  yield "half", (a.half() * 2).float()

def objdump_listing(tool: str, arch: str, path: str) -> list[tuple[int, list[str]]] | None:
  """(address, mnemonics) per instruction line (a VOPD line has two), or None when the tool doesn't know `arch`."""
  run = subprocess.run([tool, "-d", f"--mcpu={arch}", path], capture_output=True, text=True, timeout=60)
  if run.returncode or "not a recognized processor" in run.stderr or "<unknown>" in run.stdout: return None
  return [(int(m.group(2), 16), [half.split()[0] for half in m.group(1).split("::")])
          for line in run.stdout.splitlines() if (m := LINE.match(line))]

def our_listing(code: bytes, start: int, end: int, arch: str) -> list[tuple[int, list[str]]]:
  decode, buf, out, at = execute.decoder_for(arch), np.frombuffer(code, np.uint8), [], start
  while at < end:
    ins = decode(buf, at, arch.startswith("gfx9"))
    out.append((at, [half.split()[0] for half in ins.text.split("::")]))
    at += ins.size
  return out

@pytest.mark.skipif(not OBJDUMPS, reason="no llvm-objdump here")
@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_llvm_objdump_reads_what_tg_linked_and_tgs_decoder_agrees(arch, tmp_path):
  compared = 0
  for what, out in kernels():
    (item,) = out.schedule()
    spec = get_program(item.ast, AMDGPURenderer(arch))
    lib = AMDGPUCompiler(arch).compile(spec.src)
    (tmp_path / "k.co").write_bytes(lib)
    listing = next((got for tool in reversed(OBJDUMPS) if (got := objdump_listing(tool, arch, str(tmp_path / "k.co")))), None)
    if listing is None: pytest.skip(f"no llvm-objdump here knows {arch}")
    kernel = read(lib).kernels[spec.name]
    text_start = listing[0][0]  # the kernel's symbol: the first instruction LLVM lists
    assert text_start == kernel.code_offset, f"{what}: llvm-objdump finds the code at {text_start:#x}, the descriptor says {kernel.code_offset:#x}"
    theirs = [(a, names) for a, names in listing if names != ["s_code_end"]]
    ours = our_listing(read(lib).image, text_start, theirs[-1][0] + 1, arch)
    assert ours == theirs, what
    compared += len(ours)
  assert compared > 100
