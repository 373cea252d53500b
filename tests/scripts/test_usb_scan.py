"""scripts/usb_scan.py, amd_pci_scan.py and list_devices' bridge section on the bridge model: the bridge's USB ids, product and
firmware, and the function behind it as its own config space says, read through the bridge; --help works."""
import os, re, subprocess, sys
from drivers.mock.usb.asm24 import ASM24Model, default_bridge

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def run(script: str, *args: str, **env: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, f"scripts/{script}", *args], cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)

def test_the_modelled_bridge_and_its_gpu_are_listed():
  out = run("usb_scan.py", DEV="MOCKUSB+AMD")
  assert out.returncode == 0, out.stderr
  gpu = default_bridge().functions[(1, 0, 0)]
  ids, rev_class = gpu.config_read(0, 4), gpu.config_read(8, 4)
  assert re.search(rf"^usb 1-1 {ASM24Model.vendor:04x}:{ASM24Model.product:04x} {re.escape(ASM24Model.strings[1])} firmware 1\.01$", out.stdout, re.M), out.stdout
  assert f"PCIe 1:00.0: {ids & 0xFFFF:04x}:{ids >> 16:04x} AMD class {rev_class >> 8:06x} rev {rev_class & 0xFF:02x}" in out.stdout

def test_list_devices_shows_amd_behind_the_bridge_and_the_bridge_in_use():
  out = run("list_devices.py", DEV="MOCKUSB+AMD")
  assert out.returncode == 0, out.stderr
  assert re.search(r"^AMD\s+yes\s+AM driver, no kernel driver \(MOCKUSB model, behind a USB bridge\): gfx1100, 24576 MiB video memory", out.stdout, re.M), out.stdout
  # the AMD device holds the bridge's interface, so the scan can't claim it as well (libusb: LIBUSB_ERROR_BUSY)
  assert re.search(r"^USB-to-PCIe bridges:\n  usb 1-1 174c:2464: can't open the bridge \(.*claimed by another handle\)", out.stdout, re.M), out.stdout
  assert re.search(r"^USB-to-PCIe bridges:\n  usb 1-1 174c:2464 .*\n    PCIe 1:00.0: 1002:744c", run("list_devices.py", DEV="MOCKUSB+CPU").stdout, re.M)
  bare = run("list_devices.py", DEV="MOCKPCI+AMD")
  assert re.search(r"^AMD PCI functions:\n  pci 0000:03:00.0 1002:744c driver none: .*\n    24576 MiB video memory\n    GC      11\.0\.0 ", bare.stdout, re.M), bare.stdout

def test_help():
  out = run("usb_scan.py", "--help")
  assert out.returncode == 0 and "DEV=MOCKUSB+AMD" in out.stdout

def test_amd_pci_scan_lists_the_gpu_behind_the_bridge_with_its_ip_versions():
  from drivers.mock.amd.pci_gpu import NAVI31_IPS
  out = run("amd_pci_scan.py", DEV="MOCKUSB+AMD")
  assert out.returncode == 0, out.stderr
  assert "usb 1-1 bridge 174c:2464: GPU 1002:744c, BAR0 256 MiB 64-bit, BAR2 2 MiB 64-bit, BAR5 1 MiB\n  24576 MiB video memory" in out.stdout, out.stdout
  listed = dict(re.findall(r"^  (\w+)\s+(\d+\.\d+\.\d+) ", out.stdout, re.M))
  assert listed == {name: ".".join(map(str, v)) for name, v, _ in NAVI31_IPS.values()}
  assert run("amd_pci_scan.py", "--help").returncode == 0
  bare = run("amd_pci_scan.py", DEV="MOCKPCI+AMD")
  assert bare.returncode == 0 and re.search(r"^pci 0000:03:00.0 1002:744c driver none: BAR0 0x[0-9a-f]+ \(256 MiB\), BAR2 .*BAR5 0x[0-9a-f]+ \(1 MiB\)$", bare.stdout, re.M), bare.stdout
  assert dict(re.findall(r"^  (\w+)\s+(\d+\.\d+\.\d+) ", bare.stdout, re.M)) == listed and "no ASM24xx USB bridge" in bare.stdout
  # MP0 13.0.0's secure OS isn't running on a GPU fresh from boot, and the file that starts it is looked for
  assert "  PSP secure OS not started; AMD firmware psp_13_0_0_sos.bin not found in /nonexistent" in run("amd_pci_scan.py", DEV="MOCKPCI+AMD", AMD_FIRMWARE_DIR="/nonexistent").stdout
