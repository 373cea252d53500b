"""Opcode coverage of the AMD shader core (issue 16): every instruction of every program the model dispatched (dumped
by execute.run into MOCKGPU_AMD_CODE_DIR) is one the executor has semantics for. check_code_dir is called by
tests/tg/test_on_other_devices.py after the MOCK+AMD op suites; the tests here check the checker on real programs."""
from __future__ import annotations
import collections, os
import numpy as np
import pytest
from drivers.mock.amd.shader import execute
from drivers.mock.amd.shader.instruction import UnknownInstruction
from tests.drivers.mock.test_amd_shader_kernels import launch

# words that pad a kernel's code after its last s_endpgm: s_code_end (gfx10+: 0xBF9F0000) and s_nop 0 (gfx9
# 0xBF800000; gfx11 s_nop 0 is 0xBF800000 too) (LLVM AMDGPUAsmPrinter / SIInstrInfo::getNop padding)
S_CODE_END = 0xBF9F0000
_PADDING = frozenset({S_CODE_END, 0xBF800000})

def program_names(code: bytes, arch: str) -> list[str]:
  """Mnemonics of a program in order: a linear sweep from the first byte, ending at the s_code_end padding LLVM puts
  at the end of .text (gfx10+), or after an s_endpgm and its padding at the end of the bytes or at a zero word."""
  decode, wave64 = execute.decoder_for(arch), arch.startswith("gfx9")
  buf = np.frombuffer(code, np.uint8)
  words = buf[:len(code) // 4 * 4].view("<u4")
  names, at = [], 0
  while at + 4 <= len(code):
    try: ins = decode(buf, at, wave64)
    except UnknownInstruction as e: raise UnknownInstruction(f"{e} (offset {at:#x})", at) from None
    at += ins.size
    if ins.name != "s_code_end": names.append(ins.name)  # s_code_end is only ever padding (after code LLVM placed past s_endpgm)
    if ins.name == "s_code_end": break  # LLVM pads only the end of .text with it: what follows is another segment
    if ins.name == "s_endpgm":
      start = at
      while at // 4 < len(words) and int(words[at // 4]) in _PADDING: at += 4
      if at // 4 >= len(words) or words[at // 4] == 0 or S_CODE_END in words[start // 4:at // 4]: break
  return names

def check_code_dir(path: str, arch: str) -> collections.Counter:
  """Decode every program `<arch>-*.bin` under `path` and assert each instruction has semantics in the executor;
  the failure lists the missing mnemonics with how often they occur. Returns the count of every mnemonic seen."""
  files = sorted(f for f in os.listdir(path) if f.startswith(f"{arch}-") and f.endswith(".bin"))
  assert files, f"no {arch} programs were dumped into {path} (was {execute.CODE_DIR_ENV} set for the run?)"
  seen: collections.Counter = collections.Counter()
  for f in files:
    with open(os.path.join(path, f), "rb") as fh: seen.update(program_names(fh.read(), arch))
  missing = {n: c for n, c in seen.most_common() if not execute.has_semantics(n)}
  assert not missing, f"{arch}: {len(missing)} mnemonics in {len(files)} programs have no semantics: " + \
    ", ".join(f"{n} x{c}" for n, c in missing.items())
  return seen

ADD = """
define amdgpu_kernel void @add(ptr addrspace(1) %a, ptr addrspace(1) %b) #0 {
  %i = call i32 @llvm.amdgcn.workitem.id.x()
  %pa = getelementptr float, ptr addrspace(1) %a, i32 %i
  %pb = getelementptr float, ptr addrspace(1) %b, i32 %i
  %x = load float, ptr addrspace(1) %pa
  %y = load float, ptr addrspace(1) %pb
  %s = fadd float %x, %y
  store float %s, ptr addrspace(1) %pa
  ret void
}
declare i32 @llvm.amdgcn.workitem.id.x()
"""

@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_dispatched_programs_are_dumped_and_covered(arch, tmp_path, monkeypatch):
  from tests.drivers.mock.test_amd_shader_kernels import ATTRS, HEAD
  monkeypatch.setenv(execute.CODE_DIR_ENV, str(tmp_path))
  a, b = np.arange(64, dtype=np.float32), np.full(64, 0.5, np.float32)
  ir = HEAD + ADD + f"attributes #0 = {{ {ATTRS} }}\n"
  for _ in range(2): launch(ir, "add", (1, 1, 1), (64, 1, 1), [a, b], arch=arch)
  np.testing.assert_array_equal(a, np.arange(64, dtype=np.float32) + 1.0)
  assert len(os.listdir(tmp_path)) == 1  # one file per distinct program, however often it runs
  seen = check_code_dir(str(tmp_path), arch)
  assert seen["s_endpgm"] == 1 and any(n.startswith("global_load") for n in seen)

def test_a_missing_mnemonic_is_named_with_its_count(tmp_path):
  # gfx9 VOP3 v_cubeid_f32 v0, v1, v2, v3 (opcode 0x1C4) twice, then s_endpgm and s_nop padding
  cube = [0xD1C40000, 0x040E0501]
  words = cube + cube + [0xBF810000, 0xBF800000, 0xBF800000, 0]
  (tmp_path / "gfx942-test.bin").write_bytes(np.array(words, "<u4").tobytes())
  assert "v_cubeid_f32" not in execute.OPS
  with pytest.raises(AssertionError, match=r"v_cubeid_f32 x2"): check_code_dir(str(tmp_path), "gfx942")

def test_the_sweep_continues_past_an_s_endpgm_that_code_follows(tmp_path):
  # s_endpgm; s_mov_b32 s0, 0 (SOP1 0xBE800080); s_endpgm; zero fill; then bytes that are not code
  words = [0xBF810000, 0xBE800080, 0xBF810000, 0, 0, 0xFFFFFFFF]
  names = program_names(np.array(words, "<u4").tobytes(), "gfx942")
  assert names == ["s_endpgm", "s_mov_b32", "s_endpgm"]

def test_an_empty_dump_directory_fails(tmp_path):
  with pytest.raises(AssertionError, match="no gfx942 programs"): check_code_dir(str(tmp_path), "gfx942")
