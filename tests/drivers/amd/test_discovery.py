"""AMD's IP discovery table: a binary assembled here by hand from include/discovery.h's layouts parses to what it
holds, each check amdgpu_discovery_init makes fails with its name, and over the USB bridge model the driver finds
the table 64 KiB below the top of video memory through MM_INDEX/MM_DATA (the model's own builder and tables)."""
import struct
import pytest
from drivers.amd import discovery, pci_gpu
from drivers.amd.discovery import DiscoveryError, parse
from drivers.amd.pci_gpu import PCIGPU
from drivers.pci import bar_size
from drivers.mock.amd.pci_gpu import AMDPCIGPU, MP0_SMN_C2PMSG_33, NAVI31_IPS, discovery_binary
from drivers.mock.usb.asm24 import ASM24Model
from drivers.mock.usb.backend import ModelBackend
from drivers.usb.asm24 import ASM24Bridge, BridgedFunction, find_bridges

def by_hand() -> bytes:
  """One die with GC 11.0.3 (two register bases) and SDMA0 6.0.1 (one), laid out as discovery.h says."""
  ips = struct.pack("<HBBBBBB2I", 11, 0, 2, 11, 0, 3, 0, 0x1260, 0xA000) + struct.pack("<HBBBBBBI", 42, 0, 1, 6, 0, 1, 0, 0x12C0)
  die = struct.pack("<HH", 0, 2) + ips
  header = struct.pack("<IHHIH", 0x53445049, 3, 80 + len(die), 0, 1) + struct.pack("<HH", 0, 0x40 + 80) + bytes(60) + bytes(2)
  table = header + die
  size = 0x40 + len(table)
  after_checksum = struct.pack("<H", size) + struct.pack("<HHHH", 0x40, sum(table) & 0xFFFF, len(table), 0) + bytes(40) + bytes(0x40 - 60) + table
  return struct.pack("<IHH", 0x28211407, 1, 0) + struct.pack("<H", sum(after_checksum) & 0xFFFF) + after_checksum

def test_a_hand_assembled_table_parses_to_what_it_holds():
  ips = parse(by_hand())
  assert [(ip.name, ip.version, ip.bases) for ip in ips] == [("GC", (11, 0, 3), (0x1260, 0xA000)), ("SDMA0", (6, 0, 1), (0x12C0,))]

@pytest.mark.parametrize("at, value, message", [(0, 0, "binary signature 0x28211400"), (70, 0x5A, "binary checksum"),
                                                (0x40, 0x48, "IP discovery table signature"), ])
def test_each_check_names_what_failed(at, value, message):
  blob = bytearray(by_hand())
  blob[at] = value
  if at == 0x40:  # a changed table byte changes the binary's checksum too: keep that one right to reach the table check
    struct.pack_into("<H", blob, 8, sum(blob[10:]) & 0xFFFF)
  with pytest.raises(DiscoveryError, match=message): parse(bytes(blob))

def test_the_models_builder_agrees_with_the_parser():
  ips = parse(discovery_binary(NAVI31_IPS))
  assert [(ip.hw_id, ip.version, ip.bases) for ip in ips] == [(h, v, bases) for h, (_, v, bases) in NAVI31_IPS.items()]
  mp0 = next(ip for ip in ips if ip.name == "MP0")
  assert mp0.bases[0] + 0x61 == pci_gpu.MP0_SMN_C2PMSG_33  # where amdgpu reads C2PMSG_33 before it has the table

@pytest.fixture
def gpu_behind_bridge():
  model = AMDPCIGPU()
  (dev,) = find_bridges(ModelBackend([ASM24Model({(1, 0, 0): model.function})]))
  return BridgedFunction(ASM24Bridge(dev)), model

def test_the_driver_reads_the_table_through_the_bridge(gpu_behind_bridge):
  fn, model = gpu_behind_bridge
  assert [bar_size(fn, i) for i in (0, 2, 5)] == [(256 << 20, True), (2 << 20, True), (1 << 20, False)]
  gpu = PCIGPU(fn)
  assert gpu.vram_bytes == model.vram_mib << 20
  model.write_vram(0x1234_5678, b"tg reads video memory")
  assert gpu.vram_read(0x1234_5678, 21) == b"tg reads video memory"
  assert {ip.name: ip.version for ip in gpu.discovery()} == {name: v for name, v, _ in NAVI31_IPS.values()}

def test_a_gpu_whose_boot_firmware_never_finishes_times_out(gpu_behind_bridge, monkeypatch):
  fn, model = gpu_behind_bridge
  model.regs[MP0_SMN_C2PMSG_33] = 0
  monkeypatch.setattr(pci_gpu, "BOOT_WAIT_S", 0.05)
  with pytest.raises(TimeoutError, match="MP0_SMN_C2PMSG_33 bit 31 unset"): PCIGPU(fn).discovery()

def test_a_table_larger_than_its_reservation_is_refused(gpu_behind_bridge):
  fn, model = gpu_behind_bridge
  model.write_vram((model.vram_mib << 20) - discovery.DISCOVERY_TMR_OFFSET + 10, struct.pack("<H", 0xFFFF))
  with pytest.raises(DiscoveryError, match="65535 bytes, more than the 10240 reserved"): PCIGPU(fn).discovery()

def test_a_gpu_with_no_driver_bound_is_read_through_sysfs():
  """DEV=MOCKPCI's machine: the function's config space and its BAR5 registers through the system seam's sysfs calls."""
  from drivers.mock import bare_pci_machine
  from drivers.pci import SysfsFunction
  system = bare_pci_machine()
  (dev,) = system.pci_devices(0x1002)
  assert (dev.address, dev.device, dev.pci_class >> 16) == ("0000:03:00.0", 0x744C, 0x03) and system.pci_driver(dev.address) == ""
  rows = [tuple(int(x, 16) for x in row.split()) for row in system.read_text(f"/sys/bus/pci/devices/{dev.address}/resource").splitlines()]
  assert rows[5][1] - rows[5][0] + 1 == 1 << 20 and rows[0][1] - rows[0][0] + 1 == 256 << 20
  fn = SysfsFunction(system, dev.address)
  assert bar_size(fn, 5) == (1 << 20, False)
  assert {ip.name: ip.version for ip in PCIGPU(fn).discovery()} == {name: v for name, v, _ in NAVI31_IPS.values()}

def test_video_memory_is_written_through_bar0_where_it_reaches(gpu_behind_bridge):
  fn, model = gpu_behind_bridge
  gpu = PCIGPU(fn)
  gpu.vram_write(0x10_0000, b"through the aperture")  # in the first 256 MiB: BAR 0
  assert model.read_vram(0x10_0000, 20) == b"through the aperture" and pci_gpu.MM_INDEX not in model.regs
  gpu.vram_write((256 << 20) - 4, b"across the end")  # past BAR 0's end: the MM_INDEX window, every byte in place
  assert model.read_vram((256 << 20) - 4, 14) == b"across the end" and gpu.vram_read((256 << 20) - 4, 14) == b"across the end"
