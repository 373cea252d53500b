"""What each DEBUG level prints while realizing a small program (each test uses its own shape so it compiles fresh)."""
import re
from tg import Tensor, Context

def run(level: int, n: int, capsys) -> str:
  with Context(DEBUG=level): ((Tensor.ones(n, n).contiguous() * 2).sum(1)).realize()
  return capsys.readouterr().out

def test_debug1_schedule_line(capsys):
  assert re.search(r"scheduled\s+2 kernels in .* ms", run(1, 3, capsys))

def test_debug2_one_line_per_kernel(capsys):
  out = run(2, 5, capsys)
  lines = [l for l in out.splitlines() if "*** CPU" in l]
  assert len(lines) == 2
  assert all(re.search(r"arg\s+\d+ mem\s+[\d.]+ GB tm\s+[\d.]+us/\s*[\d.]+ms \(\s*\d+ GFLOPS", l) for l in lines)
  assert "E_25" in lines[0] and "r_5_5" in lines[1]

def test_debug3_applied_opts(capsys): assert "opts:" in run(3, 6, capsys)
def test_debug4_generated_code(capsys): assert "define void @" in run(4, 7, capsys)
def test_debug5_kernel_uops(capsys): assert re.search(r"c\d+ = UOp\(Ops.REDUCE_AXIS", run(5, 8, capsys))
def test_debug6_linearized_uops(capsys):
  out = run(6, 9, capsys)
  assert re.search(r"RANGE", out) and re.search(r"ENDRANGE", out) and "DEFINE_ACC" in out
def test_debug7_assembly(capsys):
  out = run(7, 10, capsys)
  assert re.search(r"^\s+ret", out, re.M) and "buffer: allocate" in out
