#!/usr/bin/env python3
"""Every device tg knows, whether it opens here, and what it is (or why not): NV GPUs with their ids, the kernel
module's version and the architecture; AMD GPUs in KFD's topology; OpenCL devices; the WebGPU adapter; the host CPU;
AMD GPUs on the PCI buses with the driver bound to each (scripts/amd_pci_scan.py); the ASM24xx USB-to-PCIe bridges and
the PCIe function behind each (scripts/usb_scan.py). Runs on the software models
too: `DEV=MOCK+NV MOCKGPU_COUNT=2 python3 scripts/list_devices.py`, `DEV=MOCK+AMD python3 scripts/list_devices.py amd`."""
from __future__ import annotations
import argparse, os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ir.switches import DEV
from ir.target import parse_targets, target_for
from drivers.device import ALL_DEVICES, DRIVERS, Device, DeviceUnavailable
from drivers.system import system_for

# the devices Device.DEFAULT never probes, listed after those it does
OTHERS = [name for name in DRIVERS if name not in ALL_DEVICES]
NEEDS_A_PATH = {"DISK": "a file as device memory: name one as DISK:/path/to/file"}

def opened(name: str) -> tuple[object | None, str]:
  """(the device, "") when it opens, else (None, why not)."""
  if name in NEEDS_A_PATH: return None, NEEDS_A_PATH[name]
  try: return Device[name], ""
  except DeviceUnavailable as e: return None, str(e)
  except Exception as e: return None, f"{type(e).__name__}: {e}"  # a device that fails to open is reported, not fatal

def nv_details(dev) -> list[str]:
  """One line per GPU the NVIDIA module reports, each opened as NV:i for its architecture."""
  rm = dev.session.rm
  lines = [f"kernel module {rm.version} ({'MOCK model' if target_for(parse_targets(DEV.value), 'NV').interface == 'MOCK' else 'nvidia.ko'})"]
  cards = rm.card_info()
  gpus = [opened(f"NV:{i}") for i in range(len(cards))]  # all opened before any is described: each joins the others as a peer
  for i, (card, (gpu, why)) in enumerate(zip(cards, gpus)):
    pci = card.pci_info
    where = f"gpu id {card.gpu_id:#x}, /dev/nvidia{card.minor_number}, PCI {pci.domain:04x}:{pci.bus:02x}:{pci.slot:02x}.{pci.function} ({pci.vendor_id:04x}:{pci.device_id:04x})"
    if gpu is None:
      lines.append(f"NV:{i}: {where}; doesn't open: {why}")
      continue
    sms = gpu.gr["gpcs"] * gpu.gr["tpc_per_gpc"] * gpu.gr["sm_per_tpc"]
    lines.append(f"NV:{i}: {where}; {gpu.arch}, {sms} SMs, compute class {gpu.compute_class:#x}, copy class {gpu.dma_class:#x}, peers {len(gpu.peers)}")
  return lines

def amd_details(dev) -> list[str]:
  """One line per GPU in KFD's topology, each opened as AMD:i; for a GPU the AM driver runs, what it brought up."""
  from drivers.amd.device import gpu_nodes
  iface = target_for(parse_targets(DEV.value), "AMD").interface
  if (am := getattr(dev, "am", None)) is not None:
    where = {"MOCKPCI": "MOCKPCI model", "USB": "behind a USB bridge", "MOCKUSB": "MOCKUSB model, behind a USB bridge"}.get(iface, "bare PCI")
    return [f"AM driver, no kernel driver ({where}): {dev.arch}, {am.vram_bytes >> 20} MiB video memory, "
            f"{am.visible >> 20} MiB of it CPU-visible, SMU firmware {'.'.join(map(str, am.smu_version))}"]
  lines = [f"amdkfd {dev.kfd_version[0]}.{dev.kfd_version[1]} ({'MOCK model' if iface == 'MOCK' else 'amdgpu.ko'})"]
  for i, node in enumerate(gpu_nodes(dev.system)):
    gpu, why = opened(f"AMD:{i}")
    where = f"node {node.number}, gpu id {node.gpu_id:#x}, /dev/dri/renderD{node.props['drm_render_minor']} ({node.props.get('vendor_id', 0):04x}:{node.props.get('device_id', 0):04x})"
    lines.append(f"AMD:{i}: {where}; " + (f"{node.arch}, {node.cus_per_xcc * node.xccs} CUs, {node.props.get('lds_size_in_kb', 0)} KiB LDS" if gpu else f"doesn't open: {why}"))
  return lines

def cl_details(dev) -> list[str]:
  from drivers import cl
  return [f"CL:{i}: {cl.device_text(dev.cl, d, cl.DEVICE_NAME)} (driver {cl.device_text(dev.cl, d, cl.DRIVER_VERSION)})"
          for i, d in enumerate(cl.all_devices(dev.cl))]

def details(name: str, dev) -> list[str]:
  """What can be said about an open device beyond its name."""
  if name == "NV": return nv_details(dev)
  if name == "AMD": return amd_details(dev)
  if name == "CL": return cl_details(dev)
  if name == "QCOM":
    iface = target_for(parse_targets(DEV.value), "QCOM").interface
    return [f"kgsl chip id {dev.chip_id:#010x}: {dev.arch} (a{dev.gen}xx){' (MOCK model)' if iface == 'MOCK' else ''}"]
  if name == "WEBGPU": return [f"adapter {dev.name} on {dev.backend}"]
  if name == "PYTHON": return ["the linear program interpreted with numpy"]
  if name in ("CPU", "NULL"):
    c = dev.compiler
    return [f"LLVM for {getattr(c, 'isa', '?')}, CPU {getattr(c, 'cpu', '?')}"]
  return []

def report(names: list[str]) -> list[tuple[str, str, list[str]]]:
  """(device, "yes"/"no", lines) for each name."""
  out = []
  for name in names:
    if DRIVERS[name] is None:
      out.append((name, "no", [f"tg has no {name} driver yet"]))
      continue
    dev, why = opened(name)
    out.append((name, "yes", details(name, dev)) if dev is not None else (name, "no", [why]))
  return out

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description="List every device tg knows: which open here and what they are, and why the others don't. "
                                           "DEV selects interfaces as usual (DEV=MOCK+NV lists the NV model's GPUs; MOCKGPU_COUNT sets how many).")
  ap.add_argument("devices", nargs="*", metavar="DEVICE", help=f"only these (default: all of {', '.join(ALL_DEVICES + OTHERS)})")
  args = ap.parse_args(argv)
  names = [n.upper() for n in args.devices] or ALL_DEVICES + OTHERS
  if unknown := [n for n in names if n not in DRIVERS]: ap.error(f"unknown device(s) {', '.join(unknown)}; known: {', '.join(DRIVERS)}")
  rows = report(names)
  width = max(len("device"), *(len(n) for n, _, _ in rows))
  print(f"{'device':{width}s}  opens  details")
  for name, ok, lines in rows:
    print(f"{name:{width}s}  {ok:5s}  {lines[0] if lines else ''}")
    for line in lines[1:]: print(f"{'':{width}s}         {line}")
  if not args.devices:  # GPUs no kernel driver serves: AMD functions on the PCI buses, and what sits behind USB bridges
    from amd_pci_scan import pci_lines
    from usb_scan import bridge_lines
    interface = next((t.interface for t in parse_targets(DEV.value) if t.interface in ("MOCK", "MOCKUSB", "MOCKPCI")), "") if DEV.value else ""
    print("AMD PCI functions:" + "".join(f"\n  {line}" for line in pci_lines(system_for(interface))))
    print("USB-to-PCIe bridges:" + "".join(f"\n  {line}" for line in bridge_lines(interface)))
  try: default = Device.DEFAULT
  except DeviceUnavailable as e: default = f"none ({e})"
  print(f"Device.DEFAULT: {default}")
  return 0

if __name__ == "__main__": sys.exit(main())
