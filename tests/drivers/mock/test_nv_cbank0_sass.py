"""Constant bank 0 as NVIDIA's compiler lays it out: small kernels assembled by ptxas for each SM the NV model runs
(sm_80, 86, 89, 90 and 100), disassembled by nvdisasm, and the c[0x0][...] offsets their SASS reads compared with
  - where the model reads kernel parameters (toolchain.param_offset, gpu.ARCHS[...].param_offset),
  - the parameter bank the driver takes from the cubin's .nv.info (drivers/nv/cubin.py) and the one the model's own
    compiler records in its mock cubins,
  - where the driver writes launch dimensions, the stack pointer and the local/shared windows (device.launch_abi).
Where a read is a parameter is found from the SASS alone: the same kernel with four more u32 parameters in front
moves exactly its parameter reads by 16 bytes."""
import glob, os, re, shutil, subprocess
import pytest
from codegen.ptx_compiler import find_ptxas
from ir.switches import CUDA_PATH
from drivers.mock.nv import gpu
from drivers.mock.nv.toolchain import MockCubinCompiler, param_offset
from drivers.nv.cubin import Cubin
from drivers.nv.device import launch_abi

def find_nvdisasm() -> str | None:
  """nvdisasm from $CUDA_PATH/bin, PATH, a CUDA toolkit, or NVIDIA's pip wheels (nvidia-cuda-nvdisasm: nvidia/cu13/bin,
  the CUDA 12 one nvidia/cuda_nvdisasm/bin)."""
  import importlib.util
  spec = importlib.util.find_spec("nvidia")
  wheels = [os.path.join(root, sub, "bin", "nvdisasm") for root in (spec.submodule_search_locations or []) for sub in ("cu13", "cuda_nvdisasm")] if spec else []
  places = ([os.path.join(CUDA_PATH.value, "bin", "nvdisasm")] if CUDA_PATH.value else []) + [shutil.which("nvdisasm") or ""] + \
           ["/usr/local/cuda/bin/nvdisasm", "/opt/cuda/bin/nvdisasm", *sorted(glob.glob("/usr/local/cuda-*/bin/nvdisasm"))] + wheels
  return next((p for p in places if p and os.path.isfile(p) and os.access(p, os.X_OK)), None)

PTXAS, NVDISASM = find_ptxas(), find_nvdisasm()
pytestmark = [pytest.mark.skipif(PTXAS is None, reason="needs ptxas (pip install nvidia-cuda-nvcc-cu12, or a CUDA toolkit)"),
              pytest.mark.skipif(NVDISASM is None, reason="needs nvdisasm (pip install nvidia-cuda-nvdisasm, or a CUDA toolkit)")]

SMS = [80, 86, 89, 90, 100]
SREGS = ["ntid.x", "ntid.y", "ntid.z", "nctaid.x", "nctaid.y", "nctaid.z"]
STORE = "ld.param.u64 %rd1, [out]; cvta.to.global.u64 %rd2, %rd1;"
KERNELS = {
  "base": f"(.param .u64 out) {{ .reg .u64 %rd<3>; {STORE} st.global.u32 [%rd2], 7; ret; }}",
  **{s.replace(".", "_"): f"(.param .u64 out) {{ .reg .u32 %r1; .reg .u64 %rd<3>; {STORE} mov.u32 %r1, %{s}; st.global.u32 [%rd2], %r1; ret; }}" for s in SREGS},
  "lwin": f"(.param .u64 out) {{ .reg .u64 %rd<5>; .local .align 8 .b8 buf[16]; {STORE} mov.u64 %rd3, buf; cvta.local.u64 %rd4, %rd3; st.global.u64 [%rd2], %rd4; ret; }}",
  "swin": f"(.param .u64 out) {{ .reg .u64 %rd<5>; .shared .align 8 .b8 sbuf[16]; {STORE} mov.u64 %rd3, sbuf; cvta.shared.u64 %rd4, %rd3; st.global.u64 [%rd2], %rd4; ret; }}",
  "par0": f"(.param .u32 a, .param .u64 out) {{ .reg .u32 %r1; .reg .u64 %rd<3>; ld.param.u32 %r1, [a]; {STORE} st.global.u32 [%rd2], %r1; ret; }}",
  "par1": "(.param .u32 d0, .param .u32 d1, .param .u32 d2, .param .u32 d3, .param .u32 a, .param .u64 out) "
          f"{{ .reg .u32 %r1; .reg .u64 %rd<3>; ld.param.u32 %r1, [a]; {STORE} st.global.u32 [%rd2], %r1; ret; }}"}

def ptx(sm: int, names=KERNELS) -> str:
  head = f".version {'8.6' if sm >= 100 else '7.8'}\n.target sm_{sm}\n.address_size 64\n"  # sm_100 needs PTX ISA 8.6
  return head + "".join(f".visible .entry {n}{KERNELS[n]}\n" for n in names)

def reads(sass: list[str]) -> set[tuple[int, int]]:
  """(offset, bytes) of every constant-bank-0 read (c[0x0][RZ] is offset 0; .64 loads read 8 bytes)."""
  out = set()
  for line in sass:
    for at in re.findall(r"c\[0x0\]\[(0x[0-9a-f]+|RZ)\]", line): out.add((0 if at == "RZ" else int(at, 16), 8 if ".64 " in line else 4))
  return out

def covered(rs: set[tuple[int, int]]) -> set[int]: return {b for at, n in rs for b in range(at, at + n)}

@pytest.fixture(scope="module", params=SMS, ids=lambda sm: f"sm_{sm}")
def built(request, tmp_path_factory):
  """(sm, cubin bytes, kernel name -> its SASS instructions)."""
  sm, d = request.param, tmp_path_factory.mktemp(f"sm_{request.param}")
  (d / "k.ptx").write_text(ptx(sm))
  r = subprocess.run([PTXAS, f"-arch=sm_{sm}", str(d / "k.ptx"), "-o", str(d / "k.cubin")], capture_output=True, text=True)
  if r.returncode and sm >= 100 and "sm_100" in r.stderr: pytest.skip(f"this ptxas has no sm_100: {r.stderr.strip()}")
  assert r.returncode == 0, r.stderr
  out = subprocess.run([NVDISASM, "-c", str(d / "k.cubin")], capture_output=True, text=True, check=True).stdout
  sass: dict[str, list[str]] = {}
  for line in out.splitlines():
    if m := re.match(r"\s*\.text\.(\w+):", line): name = m[1]
    elif m := re.search(r"/\*[0-9a-f]{4}\*/\s+(.*?)\s*;", line): sass.setdefault(name, []).append(m[1])
  assert set(sass) == set(KERNELS), sorted(sass)
  return sm, (d / "k.cubin").read_bytes(), sass

def test_parameters_start_where_the_model_and_the_driver_read_them(built):
  sm, cubin, sass = built
  fixed = reads(sass["par0"]) & reads(sass["par1"])  # stack pointer, global memory descriptor: not parameters
  params0, params1 = reads(sass["par0"]) - fixed, reads(sass["par1"]) - fixed
  assert {(at + 16, n) for at, n in params0} == params1, (params0, params1)  # four u32 in front move every parameter read by 16
  first = min(at for at, _ in params0)
  assert covered(params0) == set(range(first, first + 4)) | set(range(first + 8, first + 16))  # a: u32 at +0, out: u64 at +8
  info = Cubin(cubin).kernel("par0")
  assert first == param_offset(sm) == info.param_offset, (hex(first), hex(param_offset(sm)), hex(info.param_offset))
  assert (info.param_size, info.cbank0_size) == (16, first + 16)
  for arch in (a for a in gpu.ARCHS.values() if a.sm == sm): assert arch.param_offset == first, arch.name
  mock = Cubin(MockCubinCompiler(f"sm_{sm}").compile(ptx(sm, ["par0"]))).kernel("par0")  # the model's compiler records the same bank
  assert (mock.param_offset, mock.param_size, mock.cbank0_size) == (info.param_offset, info.param_size, info.cbank0_size)

def test_launch_dimensions_are_where_the_driver_writes_them(built):
  sm, _, sass = built
  abi = launch_abi(sm)
  base = reads(sass["base"])
  for i, s in enumerate(SREGS):
    want = (abi.ntid if s.startswith("ntid") else abi.nctaid) + 4 * (i % 3)
    assert reads(sass[s.replace(".", "_")]) - base == {(want, 4)}, (s, hex(want))

def test_stack_pointer_and_windows(built):
  sm, _, sass = built
  abi = launch_abi(sm)
  for name, code in sass.items():  # every kernel starts by loading its stack pointer R1
    m = re.fullmatch(r"\S+ R1, (RZ, RZ, )?c\[0x0\]\[(0x[0-9a-f]+)\]", code[0])
    assert m and int(m[2], 16) == abi.stack_pointer, (name, code[0])
  base = reads(sass["base"])
  assert covered(reads(sass["lwin"]) - base) == set(range(abi.local_window, abi.local_window + 8))
  if abi.shared_window is None:  # sm_90+: the window's high word comes from a special register, not the bank
    assert reads(sass["swin"]) - base == set() and any("SR_SWINHI" in line for line in sass["swin"])
  else: assert covered(reads(sass["swin"]) - base) == set(range(abi.shared_window, abi.shared_window + 8))
