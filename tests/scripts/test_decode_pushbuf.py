"""scripts/decode_pushbuf.py on what the NV driver emits on the NV model (its DEBUG=7 dump): waits, signals, copies and
launches decode to the methods and field values the queue was asked for; hex files, SET_OBJECT rebinding, and
malformed input."""
import os, re, subprocess, sys
import pytest
from ir.switches import Context
from drivers.nv import pushbuf as pb
from drivers.nv.queues import NVComputeQueue, NVCopyQueue
from tests.drivers.nv.test_nv_device import open_nv

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import decode_pushbuf  # noqa: E402

@pytest.fixture
def nvdev():
  dev, model = open_nv("hopper")
  yield dev
  model.gpu.stop()

def decoded(text: str, tmp_path, *args: str) -> list[str]:
  path = tmp_path / "dump.txt"
  path.write_text(text)
  return list(decode_pushbuf.decode(path.read_text(), str(path), *(args or ("hopper",))))

def method(lines: list[str], name: str, start: int = 0) -> tuple[int, str]:
  """(value, fields) of the first write of class method `name` (e.g. "SEM_EXECUTE") at or after line `start`."""
  for line in lines[start:]:
    if m := re.match(rf"  subc \d \w+\.{re.escape(name)} = (0x[0-9a-f]+)\s*(.*)$", line): return int(m[1], 16), m[2]
  raise AssertionError(f"no {name} in {lines}")

def test_waits_and_signals(nvdev, capsys, tmp_path):
  wait_on, signal = nvdev.new_signal("a", value=7), nvdev.new_signal("b")
  with Context(DEBUG=7): NVComputeQueue().wait(wait_on, 7).signal(signal, 0x1_0000_0005).submit(nvdev)
  nvdev.synchronize()
  lines = decoded(capsys.readouterr().out, tmp_path)
  assert lines[0] == "-- submission 0: NV NVComputeQueue, 12 words"
  assert method(lines, "SEM_ADDR_LO")[0] == wait_on.va & 0xFFFFFFFF and method(lines, "SEM_ADDR_HI")[0] == wait_on.va >> 32
  assert method(lines, "SEM_PAYLOAD_LO")[0] == 7 and method(lines, "SEM_EXECUTE")[1].startswith("OPERATION=ACQ_CIRC_GEQ ACQUIRE_SWITCH_TSG=0x1 PAYLOAD_SIZE=0x1")
  second = 6  # the signal's five methods follow the wait's five (line 0 names the submission)
  assert method(lines, "SEM_ADDR_LO", second)[0] == signal.va & 0xFFFFFFFF
  assert method(lines, "SEM_PAYLOAD_LO", second)[0] == 5 and method(lines, "SEM_PAYLOAD_HI", second)[0] == 1
  assert method(lines, "SEM_EXECUTE", second)[1] == "OPERATION=RELEASE RELEASE_WFI=0x1 PAYLOAD_SIZE=0x1 RELEASE_TIMESTAMP=0x1"
  signal.wait(0x1_0000_0005, timeout_ms=10000)  # and the model ran it as decoded

def test_copy(nvdev, capsys, tmp_path):
  src, dst = nvdev.alloc_memory(0x3000), nvdev.alloc_memory(0x3000)
  with Context(DEBUG=7): NVCopyQueue().copy(dst, src, 0x2345).submit(nvdev)
  nvdev.synchronize()
  lines = decoded(capsys.readouterr().out, tmp_path)
  assert lines[0].startswith("-- submission 0: NV NVCopyQueue")
  assert (method(lines, "OFFSET_IN_UPPER")[0] << 32 | method(lines, "OFFSET_IN_LOWER")[0]) == src.va
  assert (method(lines, "OFFSET_OUT_UPPER")[0] << 32 | method(lines, "OFFSET_OUT_LOWER")[0]) == dst.va
  assert method(lines, "LINE_LENGTH_IN")[0] == 0x2345 and all(line.startswith("  subc 4 HOPPER_DMA_COPY_A.") for line in lines[1:])
  assert method(lines, "LAUNCH_DMA")[1] == "DATA_TRANSFER_TYPE=NON_PIPELINED FLUSH_ENABLE=0x1 SEMAPHORE_TYPE=NONE SRC_MEMORY_LAYOUT=0x1 DST_MEMORY_LAYOUT=0x1"

def test_a_whole_program_on_the_model(tmp_path):
  code = "from tg import Tensor; print((Tensor([1.0, 2.0]) * 3).tolist())"
  run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "DEV": "MOCK+NV", "DEBUG": "7"}, capture_output=True, text=True, timeout=300)
  assert run.returncode == 0 and "[3.0, 6.0]" in run.stdout, run.stderr
  (tmp_path / "dump.txt").write_text(run.stdout)
  out = subprocess.run([sys.executable, "scripts/decode_pushbuf.py", str(tmp_path / "dump.txt")], cwd=ROOT, capture_output=True, text=True, timeout=60)
  assert out.returncode == 0, out.stderr
  assert out.stdout.count("-- submission") == run.stdout.count("HWQueue NV ") > 0
  assert "HOPPER_COMPUTE_A.SEND_PCAS_A" in out.stdout and "PCAS_ACTION=PREFETCH_SCHEDULE" in out.stdout and "not in" not in out.stdout

def test_hex_file_with_set_object_and_immediates(tmp_path):
  words = (pb.method(pb.SUBC_COMPUTE, pb.Host.SET_OBJECT, 0xC7C0) + pb.method(pb.SUBC_COMPUTE, pb.Compute.SEND_SIGNALING_PCAS2_B, 2)
           + pb.immediate(pb.SUBC_HOST, pb.Host.WFI, 1) + pb.method(pb.SUBC_COMPUTE, 0x1234, 5))
  text = "# a hand-made buffer\n" + "\n".join(f"0x{w:08x}," for w in words)
  assert decoded(text, tmp_path) == [
    f"-- submission 0: hex, {len(words)} words",
    "  subc 1 HOPPER_CHANNEL_GPFIFO_A.SET_OBJECT = 0x0000c7c0  NVCLASS=0xc7c0",
    "  subc 1 AMPERE_COMPUTE_B.SEND_SIGNALING_PCAS2_B = 0x00000002  PCAS_ACTION=SCHEDULE",
    "  subc 0 HOPPER_CHANNEL_GPFIFO_A.WFI = 0x00000001  SCOPE=0x1",
    "  subc 1 AMPERE_COMPUTE_B.0x1234 = 0x00000005  (not in clc7c0.h)"]

def test_errors_name_the_place(tmp_path):
  bad = tmp_path / "bad.hex"
  bad.write_text("20018000\n00000001 zz\n")
  run = subprocess.run([sys.executable, "scripts/decode_pushbuf.py", str(bad)], cwd=ROOT, capture_output=True, text=True, timeout=60)
  assert run.returncode == 1 and f"{bad}:2: 'zz' is not a hex word" in run.stderr
  short = tmp_path / "short.hex"
  short.write_text(f"{pb.header(pb.INCREMENTING, 0, pb.Host.SEM_ADDR_LO, 5):08x} 1 2\n")
  run = subprocess.run([sys.executable, "scripts/decode_pushbuf.py", str(short)], cwd=ROOT, capture_output=True, text=True, timeout=60)
  assert run.returncode == 1 and "push buffer dword 0: method 0x5c wants 5 dwords, 2 left" in run.stderr
  assert subprocess.run([sys.executable, "scripts/decode_pushbuf.py", "--help"], cwd=ROOT, capture_output=True, timeout=60).returncode == 0
