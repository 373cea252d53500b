"""scripts/decode_cp.py on hand-built Adreno streams (headers from adreno_pm4types.h's layout, payloads from
adreno_pm4.xml / a6xx.xml, computed here): register names and fields per generation, the packets' payloads, DEBUG=7
dumps with other devices' queues in them, bad parity, malformed input and --help."""
import os, subprocess, sys
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import decode_cp  # noqa: E402

def parity(x: int) -> int: return int(bin(x).count("1") % 2 == 0)   # pm4_calc_odd_parity_bit
def pkt4(reg: int, *values: int) -> list[int]: return [4 << 28 | len(values) | parity(len(values)) << 7 | reg << 8 | parity(reg) << 27, *values]
def pkt7(op: int, *payload: int) -> list[int]: return [7 << 28 | len(payload) | parity(len(payload)) << 15 | op << 16 | parity(op) << 23, *payload]

def decoded(words: list[int], tmp_path, arch: str = "a630", dump: bool = True) -> list[str]:
  text = f"HWQueue QCOM QCOMComputeQueue {len(words)} words:" + "".join(f" {w:08x}" for w in words) if dump else " ".join(f"{w:#x}" for w in words)
  path = tmp_path / "dump.txt"
  path.write_text(("HWQueue NV NVComputeQueue 1 words: 2004c017\n" if dump else "") + text + "\n")   # another device's queue too
  return list(decode_cp.decode(path.read_text(), str(path), arch))

def test_compute_dispatch_stream(tmp_path):
  words = (pkt7(0x65, 8) +                                                       # CP_SET_MARKER RM6_COMPUTE
           pkt4(0xB990, 63 << 2 | 1 << 12) +                                     # SP_CS_NDRANGE_0: LOCALSIZEX 11:2 = 63, Y 21:12 = 1
           pkt4(0xA9B0, 3 << 7 | 1 << 1) +                                       # SP_CS_CNTL_0: FULLREGFOOTPRINT 3, HALFREGFOOTPRINT 1
           pkt7(0x34, 1 << 14 | 2 << 16 | 13 << 18 | 256 << 22, 0x1000, 0x2) +   # CP_LOAD_STATE6_FRAG constants indirect, 256 vec4
           pkt7(0x33, 0, 4, 1, 1) +                                              # CP_EXEC_CS
           pkt7(0x46, 4, 0x3000, 0, 7) +                                         # CP_EVENT_WRITE CACHE_FLUSH_TS, ADDR, value
           pkt7(0x3C, 5 | 1 << 4, 0x3000, 0, 7, 0xFFFFFFFF, 32) +                # CP_WAIT_REG_MEM WRITE_GE, POLL_MEMORY
           pkt7(0x3E, 0x0980 | 2 << 18 | 1 << 30, 0x3010, 0))                    # CP_REG_TO_MEM CP_ALWAYS_ON_COUNTER x2 64B
  lines = decoded(words, tmp_path)
  assert lines[0] == f"-- submission 1: QCOM QCOMComputeQueue, {len(words)} words"   # the NV queue's submission 0 is skipped
  assert lines[1:] == ["      0: CP_SET_MARKER RM6_COMPUTE",
                       "      2: SP_CS_NDRANGE_0=0x10fc (LOCALSIZEX=0x3f LOCALSIZEY=0x1)",
                       "      4: SP_CS_CNTL_0=0x182 (HALFREGFOOTPRINT=0x1 FULLREGFOOTPRINT=0x3)",
                       "      6: CP_LOAD_STATE6_FRAG ST6_CONSTANTS SS6_INDIRECT SB6_CS_SHADER dst_off 0 num_unit 256 from 0x200001000",
                       "     10: CP_EXEC_CS groups 4x1x1",
                       "     15: CP_EVENT_WRITE CACHE_FLUSH_TS at 0x3000 value 0x7",
                       "     20: CP_WAIT_REG_MEM until [0x3000] & 0xffffffff WRITE_GE 0x7",
                       "     27: CP_REG_TO_MEM CP_ALWAYS_ON_COUNTER x2 64B to 0x3010"]

def test_a7xx_offsets_and_event_write7(tmp_path):
  words = pkt4(0xA9CD, 64 | 1 << 8) + pkt7(0x46, 4 | 1 << 27, 0x3000, 0, 9)    # SP_CS_CONST_CONFIG (a7xx offset); CP_EVENT_WRITE7
  assert decoded(words, tmp_path, "a740", dump=False)[1:] == ["      0: SP_CS_CONST_CONFIG=0x140 (CONSTLEN=0x40 ENABLED=0x1)",
                                                             "      2: CP_EVENT_WRITE7 CACHE_FLUSH_TS EV_WRITE_USER_32B at 0x3000 payload 0x9"]
  assert decoded(words[:2], tmp_path, "a630", dump=False)[1] == "      0: 0xa9cd=0x140"   # no such register on a6xx

def test_bad_input(tmp_path):
  bad = pkt7(0x10)
  bad[0] ^= 1 << 23
  assert decoded(bad, tmp_path)[1].endswith("[BAD PARITY]")
  with pytest.raises(decode_cp.InputError, match="type-0 header"): decoded([0], tmp_path)
  with pytest.raises(decode_cp.InputError, match="says 3 payload words, 1 follow"): decoded(pkt7(0x3D, 1, 2, 3)[:2], tmp_path)
  path = tmp_path / "nv.txt"
  path.write_text("HWQueue NV NVComputeQueue 1 words: 2004c017\n")
  with pytest.raises(decode_cp.InputError, match="no QCOM submissions"): list(decode_cp.decode(path.read_text(), str(path), "a630"))

def test_help():
  run = subprocess.run([sys.executable, "scripts/decode_cp.py", "--help"], cwd=ROOT, capture_output=True, text=True)
  assert run.returncode == 0 and "DEBUG=7" in run.stdout and "--arch" in run.stdout

@pytest.mark.parametrize("arch", ["a630", "a740"])
def test_what_the_driver_submits_on_the_model(arch, tmp_path):
  """A DEBUG=7 dump of a real realize on DEV=MOCK+QCOM decodes: one launch of one work group with its shader and
  constants loaded, and the timeline signal written after it."""
  code = "from tg import Tensor; (Tensor([1.0]) + 1).realize()"
  run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "DEBUG": "7", "DEV": f"MOCK+QCOM::{arch}", "MOCKGPU_QCOM_ARCH": arch})
  assert run.returncode == 0, run.stderr[-2000:]
  (tmp_path / "dump.txt").write_text(run.stdout)
  out = subprocess.run([sys.executable, "scripts/decode_cp.py", "--arch", arch, str(tmp_path / "dump.txt")], cwd=ROOT, capture_output=True, text=True, timeout=60)
  assert out.returncode == 0, out.stderr
  lines = out.stdout.splitlines()
  assert sum("CP_EXEC_CS groups 1x1x1" in l for l in lines) == 1, out.stdout
  assert any("ST6_SHADER SS6_INDIRECT SB6_CS_SHADER" in l for l in lines) and any("ST6_CONSTANTS SS6_INDIRECT SB6_CS_SHADER" in l for l in lines)
  signal = "value 0x1" if arch == "a630" else "payload 0x1"  # a7xx writes it with CP_EVENT_WRITE7
  assert any("CACHE_FLUSH_TS" in l and signal in l for l in lines), out.stdout
