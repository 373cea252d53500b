"""The ASM24xx bridge driver through real pyusb against the bridge model (drivers/mock/usb): bulk-only transport,
XDATA, configuration and memory TLPs to a modelled PCI function (checked against its own config space and memory),
BAR sizing, and the faults a user meets (a stalled endpoint, a transfer error, a missing function, a link that is
down) as errors naming the step, with the bridge usable again afterwards."""
import errno, struct
import numpy as np
import pytest
import usb.core
from drivers.mock.pci_function import BAR0, COMMAND, COMMAND_MEMORY, Bar, PCIFunction
from drivers.mock.usb.asm24 import ASM24Model
from drivers.mock.usb.backend import ModelBackend
from drivers.usb import asm24
from drivers.usb.asm24 import ASM24Bridge, PCIeError, find_bridges
from drivers.usb.bulk_only import USBError

BAR0_BYTES, BAR2_BYTES = 16 << 20, 2 << 20

@pytest.fixture
def bridge():
  gpu = PCIFunction(0x1002, 0x744C, 0x038000, 0xC8, bars={0: Bar(BAR0_BYTES), 2: Bar(BAR2_BYTES), 5: Bar(1 << 20, wide=False)})
  model = ASM24Model({(1, 0, 0): gpu})
  (dev,) = find_bridges(ModelBackend([model]))
  return ASM24Bridge(dev), model, gpu

def test_the_bridge_is_found_by_its_usb_ids_and_describes_itself(bridge):
  b, model, _ = bridge
  assert (b.dev.idVendor, b.dev.idProduct) == (0x174C, 0x2464) and b.product == model.strings[1] and b.firmware == "1.01"
  assert find_bridges(ModelBackend([])) == []

def test_xdata_round_trips_across_command_boundaries(bridge):
  b, model, _ = bridge
  data = bytes(np.random.default_rng(0).integers(0, 256, 600, dtype=np.uint8))
  b.write(0x3000, data)
  assert b.read(0x3000, 600) == data == bytes(model.xdata[0x3000:0x3000 + 600])  # 600 bytes: three 0xE4 commands

def test_config_reads_match_the_functions_config_space(bridge):
  b, _, gpu = bridge
  for offset, size in ((0, 4), (0, 2), (2, 2), (8, 4), (0xB, 1), (0x10, 4)):
    assert b.config_read(1, 0, 0, offset, size) == gpu.config_read(offset, size), (offset, size)

def test_bars_size_themselves_and_memory_round_trips(bridge):
  b, _, gpu = bridge
  b.config_write(1, 0, 0, BAR0, 0xFFFFFFFF)
  b.config_write(1, 0, 0, BAR0 + 4, 0xFFFFFFFF)
  size_mask = b.config_read(1, 0, 0, BAR0 + 4) << 32 | b.config_read(1, 0, 0, BAR0)
  assert ~(size_mask & ~0xF) + 1 & (1 << 64) - 1 == BAR0_BYTES and size_mask & 0xF == 0xC  # 64-bit prefetchable
  base = 0x2_0000_0000
  b.config_write(1, 0, 0, BAR0, base & 0xFFFFFFFF)
  b.config_write(1, 0, 0, BAR0 + 4, base >> 32)
  with pytest.raises(PCIeError, match="Unsupported Request"): b.mem_read(base)  # memory decoding is still off
  b.config_write(1, 0, 0, COMMAND, COMMAND_MEMORY, 2)
  ref = bytearray(64)
  for at, size, value in ((0, 4, 0xDEADBEEF), (5, 1, 0x7A), (6, 2, 0x1234), (12, 4, 0x01020304), (40, 2, 0xFFFF)):
    b.mem_write(base + at, value, size)
    ref[at:at + size] = value.to_bytes(size, "little")
  assert bytes(gpu.read(0, 0, 64)) == bytes(ref)
  assert [b.mem_read(base + at, 4) for at in range(0, 64, 4)] == list(struct.unpack("<16I", ref))
  assert b.mem_read(base + 5, 2) == int.from_bytes(ref[5:7], "little")
  b.config_write(1, 0, 0, BAR0 + 4 * 5, 0xFFFFFFFF)  # a 32-bit, non-prefetchable BAR sizes itself in one register
  assert b.config_read(1, 0, 0, BAR0 + 4 * 5) == (~((1 << 20) - 1)) & 0xFFFFFFFF
  with pytest.raises(ValueError, match="within one dword"): b.mem_read(base + 3, 2)

def test_a_missing_function_is_an_unsupported_request(bridge):
  b, _, _ = bridge
  with pytest.raises(PCIeError, match=r"TLP 0x05 at 0x1080000: Unsupported Request"): b.config_read(1, 1, 0, 0)
  assert b.config_read(1, 0, 0, 0) == 0x744C1002  # and the bridge goes on

def test_a_link_that_is_down_times_out_instead_of_hanging(bridge, monkeypatch):
  b, model, _ = bridge
  monkeypatch.setattr(asm24, "TLP_TIMEOUT_S", 0.05)
  model.link_up = False
  with pytest.raises(PCIeError, match="no completion in 0.05 s"): b.config_read(1, 0, 0, 0)
  model.link_up = True
  assert b.config_read(1, 0, 0, 0) == 0x744C1002

@pytest.mark.parametrize("fault, message", [("stall", "CBW failed: .*stalled"), ("error", "CBW failed")])
def test_usb_faults_name_the_command_and_stage_and_the_bridge_recovers(bridge, fault, message):
  b, model, _ = bridge
  model.fail_next = fault
  with pytest.raises(USBError, match=f"XDATA read of 4 bytes at 0xb220: {message}") as e: b.read(0xB220, 4)
  assert ("Bulk-Only reset recovery" in str(e.value)) == (fault == "stall")  # a stall gets the spec's reset recovery
  assert not model.stalled and b.config_read(1, 0, 0, 0) == 0x744C1002

def test_an_invalid_cbw_stalls_the_pipe(bridge):
  """The model's BOT rule (Bulk-Only Transport 6.6.1): a CBW that isn't 31 bytes with the USBC signature stalls."""
  b, model, _ = bridge
  with pytest.raises(usb.core.USBError) as e: b.dev.write(0x02, b"not a CBW", 1000)
  assert e.value.errno == errno.EPIPE
  model.mass_storage_reset()
  assert model.stalled == {0x02}  # a Bulk-Only reset leaves the halt (BOT 3.1): only clearing it ends the stall
  with pytest.raises(USBError, match="stalled.*reset recovery"): b.read(0, 1)
  assert b.read(0, 1) == b"\x33"  # the value the bridge's set-up wrote at XDATA 0
