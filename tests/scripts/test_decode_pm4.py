"""scripts/decode_pm4.py on what the AMD driver emits on the AMD model (its DEBUG=7 dump): waits, signals, copies
and launches decode to the packets and fields the queues were asked for; hex files and malformed input."""
import os, re, subprocess, sys
import numpy as np
import pytest
from ir.switches import Context
from tests.drivers.amd.test_amd_device import open_amd, program_for
from tg import Tensor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import decode_pm4  # noqa: E402

@pytest.fixture(params=["gfx1100", "gfx942"])
def amd(request):
  dev, model = open_amd(request.param)
  yield dev
  model.stop()

def decoded(text: str, tmp_path, arch: str, engine=None) -> list[str]:
  path = tmp_path / "dump.txt"
  path.write_text(text)
  return list(decode_pm4.decode(path.read_text(), str(path), arch, engine))

def test_wait_signal_and_launch(amd, capsys, tmp_path):
  wait_on, done = amd.new_signal("a", value=7), amd.new_signal("b")
  prg, spec, bufs = program_for(amd, Tensor(np.arange(40, dtype=np.float32)) * 2)
  with Context(DEBUG=7):
    amd.compute_queue().wait(wait_on, 7).exec(prg, prg.kernel_args(tuple(bufs), ()), spec.global_size, spec.local_size) \
                            .signal(done, 0x1_0000_0005).submit(amd)
  amd.synchronize()
  lines = decoded(capsys.readouterr().out, tmp_path, amd.arch)
  assert re.fullmatch(r"-- submission 0: AMD AMDComputeQueue, \d+ words \(PM4\)", lines[0])
  assert re.search(rf"WAIT_REG_MEM until \[{wait_on.va:#x}\] & 0xffffffff >= 0x7 \(memory\)", lines[1])
  code = re.search(r"COMPUTE_PGM_LO=(0x[0-9a-f]+) COMPUTE_PGM_HI=(0x[0-9a-f]+)", "\n".join(lines))
  assert int(code[1], 16) << 8 | int(code[2], 16) << 40 == prg.code_va
  gx, gy, gz = spec.global_size
  assert any(re.search(rf"DISPATCH_DIRECT groups {gx}x{gy}x{gz} initiator 0x[0-9a-f]+{' wave32' if prg.wave32 else ''}$", l) for l in lines)
  assert re.search(rf"RELEASE_MEM event 0x14 index 5 data GPU clock int_sel 0 at {done.va + 8:#x}", lines[-2])
  assert re.search(rf"RELEASE_MEM .* data 64-bit int_sel 0 at {done.va:#x} value 0x100000005$", lines[-1])

def test_copy_queue(amd, capsys, tmp_path):
  src, dst, sig = amd.allocator.alloc(4096), amd.allocator.alloc(4096), amd.new_signal()
  with Context(DEBUG=7): amd.copy_queue().copy(dst, src, 3000).signal(sig, 9).submit(amd)
  amd.synchronize()
  lines = decoded(capsys.readouterr().out, tmp_path, amd.arch)
  assert lines[1:] == [f"      0: COPY_LINEAR 3000 bytes from {src.va:#x} to {dst.va:#x}", f"      7: TIMESTAMP to {sig.va + 8:#x}",
                       f"     10: FENCE [{sig.va + 4:#x}] = 0x0", f"     14: FENCE [{sig.va:#x}] = 0x9"]

def test_hex_files_and_bad_input(tmp_path):
  assert decoded("0xc0017600 0x212 0x5  # SET_SH_REG", tmp_path, "gfx1100", "pm4")[1] == "      0: SET_SH_REG COMPUTE_PGM_RSRC1=0x5"
  assert decoded("c0017600 22d 5", tmp_path, "gfx942", "pm4")[1] == "      0: SET_SH_REG COMPUTE_PGM_RSRC3=0x5"  # gfx9's RSRC3
  with pytest.raises(decode_pm4.InputError, match="--engine"): decoded("c0017600 212 5", tmp_path, "gfx1100")
  with pytest.raises(decode_pm4.InputError, match="type-0 header"): decoded("00000000", tmp_path, "gfx1100", "pm4")
  with pytest.raises(decode_pm4.InputError, match="says 2 payload words, 1 follow"): decoded("c0017600 212", tmp_path, "gfx1100", "pm4")
  with pytest.raises(decode_pm4.InputError, match="SDMA op 99"): decoded("63", tmp_path, "gfx1100", "sdma")

def test_help():
  run = subprocess.run([sys.executable, "scripts/decode_pm4.py", "--help"], cwd=ROOT, capture_output=True, text=True)
  assert run.returncode == 0 and "DEBUG=7" in run.stdout
