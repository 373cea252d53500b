import pytest
from ir.target import Target, parse_targets, split_cpu_arch, target_for
from ir.switches import DEV, Context, SwitchError

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
def test_doc_examples(text):
  assert Target.parse(text) == DOC_EXAMPLES[text]
  assert Target.parse(repr(Target.parse(text))) == DOC_EXAMPLES[text], "repr spells the target as DEV does"

def test_several_targets_and_lookup():
  ts = parse_targets("NV:PTX; CPU:LLVM;;")
  assert ts == (Target("NV", "PTX"), Target("CPU", "LLVM"))
  assert target_for(ts, "CPU") == Target("CPU", "LLVM")
  assert target_for(ts, "nv:1") == Target("NV", "PTX")
  assert target_for(ts, "AMD") == Target("AMD")
  assert target_for(parse_targets(":LLVM"), "CPU") == Target("CPU", "LLVM"), "a device-less target applies, named for the device"
  assert parse_targets(list(ts)) == ts, "parsed targets (DEV.value) pass through"

def test_target_repr_is_the_dev_spelling():
  assert [repr(Target.parse(s)) for s in ("cpu:llvm", "PCI:0-2+AMD::gfx950", "MOCK+NV", ":LLVM", "CPU:LLVM:+avx2")] == \
    ["CPU:LLVM", "PCI:0,1,2+AMD::gfx950", "MOCK+NV", ":LLVM", "CPU:LLVM:+avx2"]

def test_dev_holds_parsed_targets():
  with Context(DEV="mock+nv:ptx:sm_90; cpu:llvm"):
    assert DEV.value == [Target("NV", "PTX", "sm_90", "MOCK"), Target("CPU", "LLVM")]
    assert (DEV.device, DEV.renderer, DEV.arch, DEV.interface, DEV.indices) == ("NV", "PTX", "sm_90", "MOCK", ())
    assert DEV.target("CPU") == Target("CPU", "LLVM") and DEV.target("AMD") == Target("AMD")
    assert DEV.target("CPU", renderer="X86", arch="znver2") == Target("CPU", "LLVM", "znver2"), "defaults fill only empty fields"
    assert repr(DEV) == "MOCK+NV:PTX:sm_90;CPU:LLVM" and DEV == "MOCK+NV:PTX:sm_90;CPU:LLVM"
  with Context(DEV=""): assert DEV.value == [Target()] and DEV.device == "" and DEV.target("cpu") == Target("CPU")

def test_dev_value_assignment_and_restore():
  old = DEV.value
  with Context(DEV="CPU"):
    DEV.value = "NULL:PYTHON;CPU"
    assert DEV.device == "NULL" and DEV.target("NULL").renderer == "PYTHON"
    DEV.value = Target("CPU", "LLVM")
    assert DEV.value == [Target("CPU", "LLVM")]
  assert DEV.value == old, "Context restores what was assigned inside it"

def test_malformed_dev_is_a_switch_error_naming_it():
  with pytest.raises(SwitchError, match=r"DEV='USB\+PCI\+AMD'"): Context(DEV="USB+PCI+AMD").__enter__()
  with pytest.raises(SwitchError, match="DEV=3"): DEV.value = 3
  with pytest.raises(AttributeError, match="colour"): DEV.colour

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
  assert split_cpu_arch(Target.parse("CPU:LLVM:x86_64,+avx2").arch) == ("x86_64", "", ("+avx2",))
  assert split_cpu_arch("") == ("", "", ())
