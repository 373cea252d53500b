import pytest
from ir.target import Target, parse_target, parse_targets, split_cpu_arch, target_for

# every DEV example in the reference docs, and the issue's
DOC_EXAMPLES = {
  "CPU:LLVM:x86_64,znver2,-avx512f": Target("CPU", "LLVM", "x86_64,znver2,-avx512f"),
  "CPU:LLVM:x86_64,znver2,avx2,-avx512f": Target("CPU", "LLVM", "x86_64,znver2,avx2,-avx512f"),
  "AMD::gfx950": Target("AMD", "", "gfx950"),
  "NV:CUDA:sm_70": Target("NV", "CUDA", "sm_70"),
  "USB+AMD": Target("AMD", interface="USB"),
  "PCI:0-3+AMD": Target("AMD", interface="PCI", indices=(0, 1, 2, 3)),
  "PCI:1,2+AMD": Target("AMD", interface="PCI", indices=(1, 2)),
  "MOCKKFD+AMD": Target("AMD", interface="MOCKKFD"),
  "MOCK+NV": Target("NV", interface="MOCK"),
  "NULL:HIP:gfx1100": Target("NULL", "HIP", "gfx1100"),
  "PYTHON::gfx1100": Target("PYTHON", "", "gfx1100"),
  "cpu": Target("CPU"),
  "nv:ptx": Target("NV", "PTX"),
  "CPU": Target("CPU"),
  # features in the arch: a '+' after the second ':' is part of it, not an interface
  "CPU:LLVM:+avx2": Target("CPU", "LLVM", "+avx2"),
  "CPU:LLVM:x86_64,+avx2": Target("CPU", "LLVM", "x86_64,+avx2"),
  "CPU::znver2,+avx2,-fma": Target("CPU", "", "znver2,+avx2,-fma"),
  "MOCK+CPU:LLVM:+avx2,+fma": Target("CPU", "LLVM", "+avx2,+fma", "MOCK"),
  "PCI:0-1+NULL:LLVM:+avx2": Target("NULL", "LLVM", "+avx2", "PCI", (0, 1)),
}

@pytest.mark.parametrize("text", list(DOC_EXAMPLES))
def test_doc_examples(text): assert parse_target(text) == DOC_EXAMPLES[text]

def test_several_targets_and_lookup():
  ts = parse_targets("NV:PTX; CPU:LLVM;;")
  assert ts == (Target("NV", "PTX"), Target("CPU", "LLVM"))
  assert target_for(ts, "CPU") == Target("CPU", "LLVM")
  assert target_for(ts, "nv:1") == Target("NV", "PTX")
  assert target_for(ts, "AMD") == Target("AMD")
  assert target_for(parse_targets(":LLVM"), "CPU") == Target("", "LLVM")

@pytest.mark.parametrize("bad", ["USB+PCI+AMD", "CPU:LLVM:x86:extra", "+AMD", "PCI:x+AMD", "USB+", "C-PU", "CPU:LL VM", "PCI:+AMD", "CPU:+avx2"])
def test_malformed_quotes_the_string(bad):
  with pytest.raises(ValueError) as e: parse_targets(bad)
  assert repr(bad) in str(e.value)

def test_target_is_frozen():
  with pytest.raises(Exception): Target("CPU").device = "NV"  # type: ignore[misc]

def test_split_cpu_arch():
  assert split_cpu_arch("x86_64,znver2,avx2,-avx512f") == ("x86_64", "znver2", ("+avx2", "-avx512f"))
  assert split_cpu_arch("znver2") == ("", "znver2", ())
  assert split_cpu_arch("+avx2,-fma") == ("", "", ("+avx2", "-fma"))
  assert split_cpu_arch(parse_target("CPU:LLVM:x86_64,+avx2").arch) == ("x86_64", "", ("+avx2",))
  assert split_cpu_arch("") == ("", "", ())
