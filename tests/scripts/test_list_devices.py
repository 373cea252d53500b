"""scripts/list_devices.py on the NV and AMD models (two GPUs each): what it says about each GPU matches the model's own tables, the
devices without a driver say so, and --help works."""
import os, re, subprocess, sys
from drivers.mock.nv.gpu import ARCHS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def list_devices(*args: str, **env: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "scripts/list_devices.py", *args], cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)

def test_nv_model_gpus_are_listed():
  run = list_devices("nv", "amd", "qcom", "cuda", DEV="MOCK+NV", MOCKGPU_COUNT="2", MOCKGPU_ARCH="ampere", MOCKGPU_DRIVER="570.172.08")
  assert run.returncode == 0, run.stderr
  out = run.stdout
  assert re.search(r"^NV\s+yes\s+kernel module 570\.172\.08 \(MOCK model\)$", out, re.M), out
  arch = ARCHS["ampere"]
  gpus = re.findall(r"NV:(\d): gpu id (0x[0-9a-f]+), /dev/nvidia(\d), PCI [0-9a-f:.]+ \(10de:([0-9a-f]{4})\); sm_(\d+), (\d+) SMs, "
                    r"compute class (0x[0-9a-f]+), copy class 0x[0-9a-f]+, peers (\d)", out)
  assert [g[0] for g in gpus] == ["0", "1"] and len({g[1] for g in gpus}) == 2, out
  for _, _, minor, device_id, sm, sms, compute, peers in gpus:
    assert int(device_id, 16) == arch.pci_device and int(sm) == arch.sm and int(sms) == arch.gpcs * arch.tpc_per_gpc * arch.sm_per_tpc
    assert int(compute, 16) == arch.compute and peers == "1"
  assert re.search(r"^QCOM\s+no\s+QCOM unavailable: no kgsl", out, re.M), out
  assert re.search(r"^AMD\s+no\s+AMD unavailable: no amdkfd", out, re.M), out
  assert re.search(r"^CUDA\s+no\s+CUDA unavailable: ", out, re.M)

def test_amd_model_gpus_are_listed():
  from drivers.mock.amd.gpu import ARCHS as AMD_ARCHS
  run = list_devices("amd", DEV="MOCK+AMD", MOCKGPU_COUNT="2", MOCKGPU_AMD_ARCH="gfx942")
  assert run.returncode == 0, run.stderr
  arch = AMD_ARCHS["gfx942"]
  assert re.search(r"^AMD\s+yes\s+amdkfd \d+\.\d+ \(MOCK model\)$", run.stdout, re.M), run.stdout
  gpus = re.findall(r"AMD:(\d): node (\d+), gpu id 0x[0-9a-f]+, /dev/dri/renderD\d+ \(1002:([0-9a-f]{4})\); (gfx\w+), (\d+) CUs", run.stdout)
  assert [(g[0], g[1]) for g in gpus] == [("0", "1"), ("1", "2")], run.stdout  # node 0 is the CPU
  assert all(int(g[2], 16) == arch.device_id and g[3] == "gfx942" and int(g[4]) == arch.cu_count for g in gpus)

def test_without_a_module_nv_says_why():
  run = list_devices("nv", DEV="CPU")
  assert run.returncode == 0 and re.search(r"^NV\s+no\s+NV unavailable: no NVIDIA kernel module", run.stdout, re.M), run.stdout

def test_help_and_unknown_names():
  assert list_devices("--help").returncode == 0
  bad = list_devices("tpu")
  assert bad.returncode == 2 and "unknown device(s) TPU" in bad.stderr

def test_qcom_model_gpu_is_listed():
  from drivers.mock.qcom.kgsl import ARCHS as QCOM_ARCHS
  run = list_devices("qcom", DEV="MOCK+QCOM", MOCKGPU_QCOM_ARCH="a740")
  assert run.returncode == 0, run.stderr
  chip = re.search(r"^QCOM\s+yes\s+kgsl chip id (0x[0-9a-f]{8}): a740 \(a7xx\) \(MOCK model\)$", run.stdout, re.M)
  assert chip and int(chip[1], 16) == QCOM_ARCHS["a740"].chip_id, run.stdout
