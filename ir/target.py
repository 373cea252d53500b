"""DEV targets: `[interface[:indices]+]device[:renderer[:arch]]`, several joined by `;`."""
from __future__ import annotations
from dataclasses import dataclass, replace

@dataclass(frozen=True)
class Target:
  device: str = ""            # upper-cased; "" applies to every device
  renderer: str = ""          # upper-cased; "" means "choose for me"
  arch: str = ""              # verbatim: a CPU or GPU name and/or features: "znver2,+avx2,-avx512f", "+avx2"
  interface: str = ""         # how the device is reached: "" (the OS driver), MOCK, USB, PCI, ...
  indices: tuple[int, ...] = ()  # visible-device filter from the interface part
  @staticmethod
  def parse(text: str) -> Target:
    """One target. Raises ValueError quoting `text` when it is malformed."""
    head, plus, rest = text.partition("+")
    has_iface = bool(plus) and head.count(":") <= 1  # a '+' after the second ':' is in the arch: "CPU:LLVM:+avx2"
    iface_part, dev_part = (head, rest) if has_iface else ("", text)
    if has_iface and not dev_part: raise ValueError(f"malformed DEV target {text!r}: no device after '+'")
    parts = dev_part.split(":")
    if len(parts) > 3: raise ValueError(f"malformed DEV target {text!r}: more than three ':'-separated parts")
    if any(not p.replace("_", "").isalnum() for p in parts[:2] if p):
      raise ValueError(f"malformed DEV target {text!r}: device and renderer must be names")
    device, renderer, arch = (parts + ["", ""])[:3]
    iface, colon, idx = iface_part.partition(":")
    if has_iface and not iface: raise ValueError(f"malformed DEV target {text!r}: empty interface before '+'")
    return Target(device.upper(), renderer.upper(), arch, iface.upper(), _parse_indices(idx, text) if colon else ())
  def __repr__(self) -> str:
    """The target as DEV spells it ("PCI:0,1+AMD::gfx950"); Target.parse(repr(t)) == t."""
    head = self.interface + (":" + ",".join(map(str, self.indices)) if self.indices else "")
    return (head + "+" if head else "") + ":".join((self.device, self.renderer, self.arch)).rstrip(":")

ISAS = ("x86_64", "aarch64", "arm64", "riscv64")

def split_cpu_arch(arch: str) -> tuple[str, str, tuple[str, ...]]:
  """A CPU arch string `[isa,][cpu,]feature,-feature` as (isa, cpu name, ("+feature", "-feature"))."""
  isa, cpu, feats = "", "", []
  for item in (a.strip() for a in arch.split(",") if a.strip()):
    if item in ISAS and not isa: isa = "aarch64" if item == "arm64" else item
    elif item[0] in "+-": feats.append(item)
    elif not cpu: cpu = item
    else: feats.append("+" + item)
  return isa, cpu, tuple(feats)

def _parse_indices(text: str, whole: str) -> tuple[int, ...]:
  out: list[int] = []
  for part in text.split(","):
    try:
      lo, _, hi = part.partition("-")
      out.extend(range(int(lo), int(hi) + 1) if hi else [int(lo)])
    except ValueError: raise ValueError(f"malformed DEV target {whole!r}: device indices {text!r} are not N, N-M or N,M") from None
  return tuple(out)

def parse_targets(text: str | list[Target] | tuple[Target, ...]) -> tuple[Target, ...]:
  """All targets of a DEV string (empty entries between `;` are ignored); targets already parsed (DEV.value) pass through."""
  if not isinstance(text, str): return tuple(text)
  return tuple(Target.parse(t.strip()) for t in text.split(";") if t.strip())

def target_for(targets: tuple[Target, ...], device: str) -> Target:
  """The first target that names `device` (or no device at all), named `device`; a bare Target otherwise."""
  name = device.split(":")[0].upper()
  return replace(next((t for t in targets if t.device in ("", name)), Target(name)), device=name)
