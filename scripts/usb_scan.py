"""The ASM24xx USB-to-PCIe bridges on this machine's USB buses: each bridge's bus address, USB ids, product and
firmware release, and the PCIe function behind it (vendor:device, class, revision, read through the bridge's TLP
engine), or why nothing answered. Works on the model too:

  python3 scripts/usb_scan.py                      # real bridges, through pyusb and libusb
  DEV=MOCKUSB+AMD python3 scripts/usb_scan.py      # the modelled bridge with a GPU behind it
Switches: DEV (its interface picks the system: MOCKUSB for the models)."""
from __future__ import annotations
import os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import usb.core
from ir.switches import DEV
from ir.target import parse_targets
from drivers.system import system_for
from drivers.usb.asm24 import ASM24Bridge, PCIeError, find_bridges
from drivers.usb.bulk_only import USBError
from script_help import exit_on_help

VENDORS = {0x1002: "AMD", 0x10DE: "NVIDIA", 0x8086: "Intel"}

def describe_function(bridge: ASM24Bridge, bus: int = 1, dev: int = 0, fn: int = 0) -> str:
  try:
    ids = bridge.config_read(bus, dev, fn, 0)
    rev_class = bridge.config_read(bus, dev, fn, 8)
  except PCIeError as e: return f"PCIe {bus}:{dev:02x}.{fn}: nothing answered ({e})"
  vendor, device = ids & 0xFFFF, ids >> 16
  return f"PCIe {bus}:{dev:02x}.{fn}: {vendor:04x}:{device:04x} {VENDORS.get(vendor, '')} class {rev_class >> 8:06x} rev {rev_class & 0xFF:02x}"

def bridge_lines(interface: str) -> list[str]:
  """What the scan prints: one line per bridge and one for the function behind it, or why there is nothing."""
  try: devices = find_bridges(system_for(interface).usb_backend())
  except usb.core.NoBackendError: return ["USB unavailable: pyusb finds no libusb (install libusb-1.0, or pip install libusb-package)"]
  if not devices: return ["no ASM24xx bridge found"]
  lines = []
  for d in devices:
    where = f"usb {d.bus}-{d.address} {d.idVendor:04x}:{d.idProduct:04x}"
    try: bridge = ASM24Bridge(d)
    except (USBError, usb.core.USBError) as e:
      lines.append(f"{where}: can't open the bridge ({e})")
      continue
    lines += [f"{where} {bridge.product} firmware {bridge.firmware}", f"  {describe_function(bridge)}"]
  return lines

def main() -> int:
  print("\n".join(bridge_lines(parse_targets(DEV.value)[0].interface if DEV.value else "")))
  return 0

if __name__ == "__main__":
  exit_on_help(__doc__)
  sys.exit(main())
