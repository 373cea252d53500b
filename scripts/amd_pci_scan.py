"""AMD GPUs as PCI functions: those on this machine's PCI buses (address, device id, BARs, the kernel driver bound)
and those behind ASM24xx USB bridges (BAR sizes); for each that no driver is using, its video memory and IP blocks
with their versions from the IP discovery table the boot firmware left in video memory. Works on the models too:

  python3 scripts/amd_pci_scan.py
  DEV=MOCKUSB+AMD python3 scripts/amd_pci_scan.py     # the modelled bridge with an RDNA3 GPU behind it
  DEV=MOCKPCI+AMD python3 scripts/amd_pci_scan.py     # a modelled machine with an RDNA3 GPU no driver is bound to
Switches: DEV (its interface picks the system: MOCKUSB or MOCKPCI for the models).
A function no kernel driver is bound to has its registers read through its sysfs `resource5` (root needed)."""
from __future__ import annotations
import os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import usb.core
from ir.switches import DEV
from ir.target import parse_targets
from drivers.amd import firmware, psp
from drivers.amd.discovery import DiscoveryError
from drivers.amd.pci_gpu import PCIGPU
from drivers.pci import PCIAccess, SysfsFunction, bar_size
from drivers.system import system_for
from drivers.usb.asm24 import ASM24Bridge, BridgedFunction, PCIeError, find_bridges
from drivers.usb.bulk_only import USBError
from script_help import exit_on_help

AMD = 0x1002

def size_text(n: int) -> str: return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} B"

def pci_lines(system) -> list[str]:
  """The AMD display functions in sysfs, with their memory BARs (from the `resource` file) and bound driver."""
  lines = []
  for d in system.pci_devices(AMD):
    if d.pci_class >> 16 != 0x03: continue  # display controllers only
    bars = []
    try:
      for i, row in enumerate(system.read_text(f"/sys/bus/pci/devices/{d.address}/resource").splitlines()[:6]):
        start, end, _ = (int(x, 16) for x in row.split())
        if end: bars.append(f"BAR{i} {start:#x} ({size_text(end - start + 1)})")
    except OSError: bars.append("BARs unreadable")
    driver = system.pci_driver(d.address)
    lines.append(f"pci {d.address} {AMD:04x}:{d.device:04x} driver {driver or 'none'}: {', '.join(bars)}")
    if not driver: lines += gpu_lines(SysfsFunction(system, d.address))  # nothing else is using it: read its registers
  return lines or ["no AMD display function on the PCI buses"]

def gpu_lines(fn: PCIAccess) -> list[str]:
  """A bare GPU's video memory and IP blocks, read through its registers."""
  try:
    gpu = PCIGPU(fn)
    ips = gpu.discovery()
    return [f"  {gpu.vram_bytes >> 20} MiB video memory"] + \
           [f"  {ip.name:7s} {'.'.join(map(str, ip.version)):9s} instance {ip.instance}, registers at {', '.join(hex(b) for b in ip.bases)}" for ip in ips] + \
           psp_lines(gpu, ips)
  except (OSError, PCIeError, DiscoveryError, TimeoutError) as e: return [f"  {type(e).__name__}: {e}"]

def psp_lines(gpu: PCIGPU, ips) -> list[str]:
  """Whether the PSP's secure OS runs, and whether the firmware file to start it is where the AM driver looks."""
  if (mp0 := next((ip for ip in ips if ip.name == "MP0"), None)) is None: return ["  no MP0 (PSP) in the IP table"]
  name = firmware.sos_file_name(mp0.version)
  try: found = f"{name} found ({len(firmware.read(name))} bytes)"
  except FileNotFoundError as e: found = str(e)
  return [f"  PSP secure OS {'running' if psp.secure_os_running(gpu, mp0.bases[0]) else 'not started'}; {found}"]

def bars_text(fn: BridgedFunction) -> str:
  """The sizes of a GPU's BARs 0 (video memory), 2 (doorbells) and 5 (registers), read by sizing them."""
  parts = []
  for i in (0, 2, 5):
    size, wide = bar_size(fn, i)
    if size: parts.append(f"BAR{i} {size_text(size)}{' 64-bit' if wide and size >= 1 << 20 else ''}")
  return ", ".join(parts)

def usb_lines(system) -> list[str]:
  """Each bridge's GPU: BAR sizes, video memory and IP versions."""
  try: bridges = find_bridges(system.usb_backend())
  except usb.core.NoBackendError: return ["USB: pyusb finds no libusb"]
  lines = []
  for d in bridges:
    where = f"usb {d.bus}-{d.address} bridge {d.idVendor:04x}:{d.idProduct:04x}"
    try:
      fn = BridgedFunction(ASM24Bridge(d))
      ids = fn.config_read(0)
      if ids & 0xFFFF != AMD:
        lines.append(f"{where}: behind it {ids & 0xFFFF:04x}:{ids >> 16:04x}, not an AMD GPU")
        continue
      lines += [f"{where}: GPU {AMD:04x}:{ids >> 16:04x}, {bars_text(fn)}", *gpu_lines(fn)]
    except (USBError, usb.core.USBError, PCIeError) as e: lines.append(f"{where}: {type(e).__name__}: {e}")
  return lines or ["no ASM24xx USB bridge"]

def main() -> int:
  system = system_for(parse_targets(DEV.value)[0].interface if DEV.value else "")
  print("\n".join(pci_lines(system) + usb_lines(system)))
  return 0

if __name__ == "__main__":
  exit_on_help(__doc__)
  sys.exit(main())
