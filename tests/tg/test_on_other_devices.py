"""The Tensor op tests again on other devices, as concurrent subprocesses:
- DEV=PYTHON: every kernel runs on the UOp interpreter instead of LLVM, so the codegen is checked independently of
  the CPU backend;
- DEV=MOCK+NV: the NV driver (RM, UVM, channels, QMDs, copies, HCQ graphs) runs against the software model, which
  executes the PTX tg renders on a reference PTX interpreter, so the PTX renderer is checked op by op; afterwards
  every kernel the model ran is assembled by the real ptxas for each supported architecture;
- DEV=MOCK+AMD and DEV=MOCK+AMD::gfx942: the AMD driver (KFD, PM4 and SDMA queues, code objects tg links) against
  the AMD model, whose shader core decodes and executes the RDNA3 (wave32) or CDNA3 (wave64) machine code LLVM made
  from tg's kernels, so the AMDGPU renderer is checked op by op; afterwards every instruction of every program they
  dispatched must be one the shader core executes; RDNA4 (gfx1201) and CDNA4 (gfx950) run the elementwise and JIT
  suites;
- DEV=MOCKPCI+AMD: the AM driver over bare PCI with video memory mapped (no amdgpu.ko: PSP firmware loads, page
  tables, HQD and SDMA registers) on the op suites, the JIT and HCQ tests (the MOCK+AMD run leaves gfx1100's op suites
  other than the elementwise one to this run: same kernels, same shader core); DEV=MOCKUSB+AMD, the same driver behind
  the ASM24xx USB bridge (every register and ring word a PCIe TLP through the bridge model, signals in its SRAM, copies
  through its SCSI WRITE window), on the elementwise, JIT and HCQ tests: every launch and copy crosses the bridge alike,
  and the other op suites would only run the PCI run's kernels again, at 6-7 bridge commands a dword.
- DEV=MOCK+CUDA: the CUDA device (driver-API calls through cffi) against the libcuda model, on matmuls, convolutions
  and the JIT;
- DEV=MOCK+QCOM and DEV=MOCK+QCOM::a740: the QCOM driver (kgsl, CP packets) against the kgsl/CP model, whose shader
  core executes the ir3 machine code tg renders and assembles, checking its sync flags and delay slots, so the ir3
  renderer and assembler are checked op by op; a6xx runs every op suite, a7xx (the same machine code: the two encode
  alike in the subset tg emits) the elementwise one; both run the JIT and IMAGE=1's textures and IBOs
  (tests/tg/test_images.py), where a7xx's descriptors differ;
- DEV=CL: the OpenCL C renderer on a real OpenCL runtime, Intel's CPU runtime (CL_RUNTIME=intel, the `cl` extra):
  the op, nn, optim and JIT suites and IMAGE=1's images (about 4500 distinct kernels, 5 minutes of CPU cold at about
  45 ms per new kernel); where only PoCL is installed, the JIT and images alone, since PoCL 3.1 takes about 250 ms
  per kernel (clang parsing its 900 KB opencl-c.h and linking its kernel library, a generic work-group function
  compiled for the binary tg caches, a specialised one at the first launch): the slow run (`python3 -m pytest -q -m
  slow`) runs the whole set on PoCL through the ICD loader (25 minutes cold), and tests/drivers/test_cl.py covers the
  renderer's paths there in the default run;
- DEV=WEBGPU: the WGSL renderer on a real WebGPU runtime (wgpu-native on Mesa's lavapipe), the op, nn, optim and JIT
  suites, with the tests that need 64-bit dtypes or IEEE special values skipped there (skipped as a whole where no
  WebGPU adapter is installed);
(The suites run in full; their shapes are small.)"""
import concurrent.futures, functools, os, pathlib, re, subprocess, sys, tempfile
import pytest
from codegen.ptx import ptx_version
from codegen.ptx_compiler import PTXCompiler, find_nvjitlink, find_ptxas

ROOT = pathlib.Path(__file__).parents[2]
OP_SUITES = ["tests/tg/test_ops_elementwise.py", "tests/tg/test_ops_reduce.py", "tests/tg/test_ops_movement.py",
             "tests/tg/test_ops_processing.py", "tests/tg/test_losses.py"]
RUNS = {"PYTHON": OP_SUITES, "MOCK+NV": OP_SUITES + ["tests/tg/test_jit.py", "tests/drivers/test_hcq.py", "tests/tg/test_nn.py", "tests/tg/test_optim.py"],
        "MOCK+CUDA": ["tests/tg/test_ops_processing.py", "tests/tg/test_jit.py"],  # the same PTX: here the libcuda glue is under test
        "MOCK+NV:x4": ["tests/tg/test_multi.py"],  # four NV-model GPUs
        "MOCK+AMD:x4": ["tests/tg/test_multi.py"],  # four AMD-model GPUs
        # gfx1100's kernels run on the same shader core over amdkfd and over the AM driver: the op suites run once, over
        # the AM driver; the KFD run keeps the tests that lean on its driver (copies, graphs, timelines, training)
        "MOCK+AMD": ["tests/tg/test_ops_elementwise.py", "tests/tg/test_jit.py", "tests/drivers/test_hcq.py", "tests/tg/test_nn.py", "tests/tg/test_optim.py"],
        "MOCK+AMD::gfx942": OP_SUITES + ["tests/tg/test_jit.py", "tests/drivers/test_hcq.py", "tests/tg/test_nn.py", "tests/tg/test_optim.py"],
        # RDNA4 and CDNA4 pass the whole set too (1675 passed each, about 3 minutes apiece); CI keeps a sample of them,
        # and of gfx1101 (RDNA3's ISA for LLVM's gfx1101 target, on a smaller GPU's topology)
        "MOCK+AMD::gfx1101": ["tests/tg/test_ops_elementwise.py", "tests/tg/test_jit.py"],
        "MOCKPCI+AMD": OP_SUITES + ["tests/tg/test_jit.py", "tests/drivers/test_hcq.py"],  # the AM driver over bare PCI
        "MOCKUSB+AMD": ["tests/tg/test_ops_elementwise.py", "tests/tg/test_jit.py", "tests/drivers/test_hcq.py"],  # the same behind the USB bridge
        "MOCK+AMD::gfx1201": ["tests/tg/test_ops_elementwise.py", "tests/tg/test_jit.py"],
        "MOCK+AMD::gfx950": ["tests/tg/test_ops_elementwise.py", "tests/tg/test_jit.py"],
        # QCOM: every op suite on the a6xx model; the a7xx one (its registers, CP_EVENT_WRITE7, descriptors) runs the same
        # machine code, so the elementwise suite there; the JIT and IMAGE=1 on both
        "MOCK+QCOM": OP_SUITES + ["tests/tg/test_jit.py", "tests/tg/test_images.py"],
        "MOCK+QCOM::a740": ["tests/tg/test_ops_elementwise.py", "tests/tg/test_jit.py", "tests/tg/test_images.py"],
        "WEBGPU": OP_SUITES + ["tests/tg/test_nn.py", "tests/tg/test_optim.py", "tests/tg/test_jit.py"],
        "CL": OP_SUITES + ["tests/tg/test_nn.py", "tests/tg/test_optim.py", "tests/tg/test_jit.py", "tests/tg/test_images.py"]}
CL_ON_POCL = ["tests/tg/test_jit.py", "tests/tg/test_images.py"]  # what the CL run keeps where only PoCL is installed
def suites(run: str) -> list[str]:
  """The test files of a run: CL runs its whole set on Intel's runtime, a part of it on PoCL (5 times slower to build)."""
  from drivers.cl import intel_runtime_path
  return CL_ON_POCL if run == "CL" and intel_runtime_path() is None else RUNS[run]
def cl_env() -> dict[str, str]:
  """The DEV=CL runs' runtime: Intel's CPU runtime where the `cl` extra installed it (about 45 ms per new kernel,
  against PoCL's 250), else what the ICD loader finds."""
  from drivers.cl import intel_runtime_path
  return {"DEV": "CL", **({"CL_RUNTIME": "intel"} if intel_runtime_path() is not None else {})}
def available(run: str) -> bool:
  from drivers.cl import intel_runtime_path
  from tests.drivers.test_cl import cl_available
  from tests.drivers.test_webgpu import webgpu_available
  return {"WEBGPU": webgpu_available, "CL": lambda: intel_runtime_path() is not None or cl_available()}.get(run, lambda: True)()
def run_env(run: str) -> dict[str, str]:
  """The environment of a run: DEV, for a label ending in :xN, N GPUs in the NV or AMD model, and CL's runtime."""
  dev, _, count = run.partition(":x")
  return cl_env() if dev == "CL" else {"DEV": dev, **({"MOCKGPU_COUNT": count} if count else {})}

class DeviceRuns:
  """Every run started at once, each a pytest subprocess whose output goes to a file (which, unlike a pipe, never fills
  up and stalls it), niced so that the suite's own process keeps its pace beside them; the PTX and AMD programs the
  models ran collect in two temporary folders."""
  def __init__(self):
    self.folders = [tempfile.TemporaryDirectory(prefix=f"tg-{kind}-") for kind in ("ptx", "amd")]
    self.kernels, self.amd_programs = (pathlib.Path(f.name) for f in self.folders)
    started = [dev for dev in RUNS if available(dev)]
    self.logs = {dev: tempfile.TemporaryFile("w+") for dev in started}
    self.procs = {dev: subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *suites(dev)], cwd=ROOT,
                                        env={**os.environ, **run_env(dev), "MOCKGPU_PTX_DIR": str(self.kernels), "MOCKGPU_AMD_CODE_DIR": str(self.amd_programs)},
                                        stdout=self.logs[dev], stderr=subprocess.STDOUT, text=True, preexec_fn=lambda: os.nice(10))
                  for dev in started}
  @functools.cached_property
  def results(self) -> dict[str, tuple[int, str]]:
    """{DEV: (exit code, output)}, once every run has ended."""
    codes = {dev: p.wait() for dev, p in self.procs.items()}
    for log in self.logs.values(): log.seek(0)
    return {dev: (codes[dev], self.logs[dev].read()) for dev in self.procs}

@functools.cache
def device_runs() -> DeviceRuns:
  """The runs, started by the first call: tests/conftest.py calls it as soon as the suite selects a test that needs
  them, so they use the core the rest of the suite (one process) leaves idle."""
  return DeviceRuns()

@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[int, str]]: return device_runs().results

@pytest.fixture(scope="module")
def kernels() -> pathlib.Path: return device_runs().kernels

@pytest.fixture(scope="module")
def amd_programs() -> pathlib.Path: return device_runs().amd_programs

@pytest.mark.parametrize("dev", list(RUNS))
def test_suites_pass_on(dev, runs):
  if dev not in runs: pytest.skip(f"{dev} is not installed here (WEBGPU: pip install wgpu; apt-get install mesa-vulkan-drivers; CL: pip install -e '.[cl]' or apt-get install pocl-opencl-icd)")
  code, out = runs[dev]
  assert code == 0, out[-6000:]
  assert " passed" in out.splitlines()[-1]

@pytest.mark.parametrize("run, arch", [("MOCK+AMD", "gfx1100"), ("MOCK+AMD::gfx942", "gfx942"), ("MOCK+AMD::gfx1101", "gfx1101"),
                                       ("MOCK+AMD::gfx1201", "gfx1201"), ("MOCK+AMD::gfx950", "gfx950")])
def test_every_instruction_of_every_amd_program_has_semantics(run, arch, runs, amd_programs):
  """Every instruction of every program the AMD runs dispatched (not only those that ran) is one the model's shader
  core executes: a kernel branch no test reached can't hide an instruction the model doesn't know."""
  from tests.drivers.mock.test_amd_coverage import check_code_dir
  assert runs[run][0] == 0, f"the {run} run failed"
  names = check_code_dir(str(amd_programs), arch)
  assert sum(names.values()) > 10000 and len(names) > 100, names

@pytest.mark.slow
def test_suites_pass_on_cl_through_the_icd_loader():
  """The CL run's whole set on what the ICD loader finds (PoCL, with .ci/run's packages), a second OpenCL judge."""
  from tests.drivers.test_cl import cl_available
  if not cl_available(): pytest.skip("no OpenCL ICD loader or platform (apt-get install pocl-opencl-icd ocl-icd-libopencl1)")
  run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *RUNS["CL"]], cwd=ROOT,
                       env={**os.environ, "DEV": "CL", "CL_RUNTIME": ""}, capture_output=True, text=True)
  assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]

def one_module(kernels: pathlib.Path, arch: str) -> str:
  """Every kernel the model ran, renamed k0, k1, ... (names repeat across kernels), in one PTX module for `arch`
  (Hopper's wgmma kernels only for sm_90a, the one target that has wgmma)."""
  bodies = []
  for i, f in enumerate(sorted(kernels.glob("*.ptx"))):
    text = f.read_text()
    body = text[text.index(".address_size 64") + len(".address_size 64"):]
    if "wgmma" in body and arch != "sm_90a": continue
    bodies.append(re.sub(r"\.entry\s+[\w$]+\s*\(", f".entry k{i}(", body, count=1))
  return f".version {ptx_version(arch)}\n.target {arch}\n.address_size 64\n" + "\n".join(bodies)

ARCHS = ["sm_80", "sm_89", "sm_90", "sm_90a"]

@pytest.fixture(scope="module")
def assembled(runs, kernels) -> dict[str, bytes | Exception]:
  """Every kernel the model ran, assembled for each architecture (concurrently: each assembly is its own process)."""
  assert runs["MOCK+NV"][0] == 0, "the MOCK+NV run failed"
  def assemble(arch: str) -> bytes | Exception:
    try: return PTXCompiler(arch).compile(one_module(kernels, arch))
    except Exception as e: return e
  with concurrent.futures.ThreadPoolExecutor(len(ARCHS)) as pool: return dict(zip(ARCHS, pool.map(assemble, ARCHS)))

@pytest.mark.skipif(find_ptxas() is None and find_nvjitlink() is None, reason="no ptxas or nvJitLink (pip install -e '.[test]' brings ptxas)")
@pytest.mark.parametrize("arch", ARCHS)
def test_every_kernel_the_model_ran_assembles(arch, assembled, kernels):
  assert len(list(kernels.glob("*.ptx"))) > 500, "the suites launch hundreds of distinct kernels"
  if isinstance(assembled[arch], Exception): raise assembled[arch]
  assert assembled[arch][:4] == b"\x7fELF"
