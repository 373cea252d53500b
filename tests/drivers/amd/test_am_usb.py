"""The AM driver behind the ASM24xx bridge, against the bridge model with the bare-PCI GPU model behind it: bring-up
over TLPs, the video-memory mirror sending only what changed, signals the GPU writes into the bridge's SRAM, SCSI
WRITE's data reaching video memory through SDMA, and for each rule the bridge and hub models keep a driver that
breaks it. The whole device (DEV=MOCKUSB+AMD) runs the op and JIT suites in tests/tg/test_on_other_devices.py."""
import errno, os, re, struct, subprocess, sys
import numpy as np
import pytest
import usb.core
from drivers.amd import am_queues, pm4, sdma
from drivers.amd.am import AM, VA_BASE, VMID
from drivers.amd.am_usb_device import BridgedDoorbell
from drivers.amd.pci_gpu import PCIGPU, VRAM_BAR
from drivers.mock import new_usb_machine
from drivers.mock.usb.backend import ModelBackend
from drivers.pci import bar_size
from drivers.usb import asm24
from drivers.usb.asm24 import COPY_WINDOW, SIGNAL_WINDOW, ASM24Bridge, BridgedFunction, find_bridges
from drivers.usb.bulk_only import USBError
from drivers.usb.mirrored_bar import MirroredBar
from tests.drivers.amd.test_am import ROOT, until

@pytest.fixture
def bridged():
  """(the AM driver brought up over a fresh bridge model, the driver's bridge, the bridge model)."""
  system = new_usb_machine()
  (dev,) = find_bridges(system.usb_backend())
  model = system.usb_devices[0]
  bridge = ASM24Bridge(dev)
  function = BridgedFunction(bridge)
  am = AM(PCIGPU(function), system, MirroredBar(function.bar(VRAM_BAR), bar_size(function, VRAM_BAR)[0]))
  yield am, bridge, model
  model.gpu.stop()

def run_compute(am, words: list[int]) -> None:
  ring, pointers, eop, mqd = (VA_BASE + am.alloc(n, True)[0] for n in (1 << 16, 4096, 4096, 4096))
  doorbell = am_queues.map_compute_queue(am.gc_read, am.gc_write, VMID, ring, 1 << 16, pointers + 0x80, pointers, eop, mqd)
  at = ring - VA_BASE
  am.vram_bar.view[at:at + 4 * len(words)] = np.array(words, np.uint32).tobytes()
  am.flush_hdp()
  BridgedDoorbell(am.doorbell_bar, doorbell)[0] = len(words)

def test_bring_up_over_the_bridge_then_the_gpu_signals_into_the_bridges_sram(bridged):
  am, bridge, model = bridged
  assert len(model.gpu.psp.ip_firmware) == 22 and model.gpu.rlc.booted and model.gpu.problems == []  # every firmware, through TLPs
  signals = am.map_system(SIGNAL_WINDOW.bus, SIGNAL_WINDOW.size)
  run_compute(am, pm4.release_mem(11, signals + 0x18, pm4.DATA_SEL_64, 0x1234, 0x5678))
  assert until(lambda: bytes(model.xdata[0xA018:0xA020]) == struct.pack("<Q", 0x5678_0000_1234)), (model.gpu.faults, model.gpu.problems)
  assert bridge.read(SIGNAL_WINDOW.xdata + 0x18, 8) == struct.pack("<Q", 0x5678_0000_1234)

def test_the_mirror_sends_only_the_dwords_that_changed(bridged):
  am, bridge, model = bridged
  at, cpu = am.alloc(4096, True)
  am.flush_hdp()
  sent = []
  write32 = am.vram_bar.bar.write32
  am.vram_bar.bar.write32 = lambda offset, value: (sent.append((offset, value)), write32(offset, value))
  words = np.frombuffer(am.vram_bar.view, np.uint32, 1024, at)
  words[[3, 4, 700]] = [0xAAAA, 0xBBBB, 0xCCCC]
  am.vram_bar.sync(am.cpu_written)
  assert sent == [(at + 12, 0xAAAA), (at + 16, 0xBBBB), (at + 2800, 0xCCCC)]
  assert list(np.frombuffer(model.gpu.vram, np.uint32, 1024, at)[[3, 4, 700]]) == [0xAAAA, 0xBBBB, 0xCCCC]
  am.vram_bar.sync(am.cpu_written)
  assert len(sent) == 3  # nothing changed since
  struct.pack_into("<I", model.gpu.vram, at + 40, 0xD00D)  # the GPU writes; the CPU fetches what it asks for
  am.vram_bar.fetch(words[10:11])
  assert words[10] == 0xD00D and len(sent) == 3

def test_scsi_write_fills_the_copy_window_and_sdma_takes_it_to_video_memory(bridged):
  am, bridge, model = bridged
  data = bytes(np.random.default_rng(1).integers(0, 256, 5000, dtype=np.uint8))
  bridge.sram_write(data)
  assert bytes(model.xdata[0xF000:0xF000 + 5000]) == data
  window = am.map_system(COPY_WINDOW.bus, COPY_WINDOW.size)
  ring, pointers = (VA_BASE + am.alloc(n, True)[0] for n in (1 << 16, 4096))
  doorbell = am_queues.start_sdma_queue(am.gc_write, VMID, ring, 1 << 16, pointers + 0x80, pointers)
  dst, _ = am.alloc(8192, False)
  words = sdma.copy_linear(((VA_BASE + dst) & 0xFFFFFFFF, (VA_BASE + dst) >> 32), (window & 0xFFFFFFFF, window >> 32), 5000)
  am.vram_bar.view[ring - VA_BASE:ring - VA_BASE + 4 * len(words)] = np.array(words, np.uint32).tobytes()
  am.flush_hdp()
  BridgedDoorbell(am.doorbell_bar, doorbell)[0] = 4 * len(words)
  assert until(lambda: bytes(model.gpu.vram[dst:dst + 5000]) == data), (model.gpu.faults, model.gpu.problems)

def test_the_device_computes_and_copies_across_many_windows_as_numpy_does():
  """DEV=MOCKUSB+AMD end to end, in its own process (one AMD device per process): 300 KB each way is five 64 KiB
  trips through the bridge's SRAM."""
  script = ("import numpy as np; from tg import Tensor\n"
            "x = np.arange(75_000, dtype=np.float32) / 7\n"
            "y = (Tensor(x) * 2 + 1).numpy()\n"
            "assert np.array_equal(y, x * np.float32(2) + np.float32(1)), y\n"
            "print('ok', Tensor(x).sum().item(), float(x.sum(dtype=np.float64)))")
  out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "DEV": "MOCKUSB+AMD"}, capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  ours, ref = map(float, out.stdout.split()[1:])
  assert abs(ours - ref) <= 1e-5 * ref

def test_a_failed_usb_transfer_is_an_error_naming_it_and_the_device_goes_on():
  """Transfers that stall or fail at a command's every stage (CBW, data, CSW), in the middle of kernels and copies: each
  raises USBError naming the command and stage, the stalled pipe gets the Bulk-Only reset recovery, and the next
  computation is right (a lost doorbell is rung again before the device is waited for)."""
  script = ("import numpy as np; from tg import Tensor; from drivers.mock import usb_machine\n"
            "from drivers.usb.bulk_only import USBError\n"
            "x, errors = np.arange(1000, dtype=np.float32), []\n"
            "(Tensor(x) + 1).numpy()\n"
            "bridge = usb_machine().usb_devices[0]  # the one the device opened\n"
            "for fault in ('stall', 'error'):\n"
            "  for side in ('bulk_out', 'bulk_in'):\n"
            "    for k in (40, 150, 260):\n"
            "      calls, real = [0], getattr(bridge, side)\n"
            "      def counted(*a, k=k, fault=fault, real=real):\n"
            "        calls[0] += 1\n"
            "        if calls[0] == k: bridge.fail_next = fault\n"
            "        return real(*a)\n"
            "      setattr(bridge, side, counted)\n"
            "      try: (Tensor(x) * 2 + k).numpy()\n"
            "      except USBError as e: errors.append(str(e))\n"
            "      setattr(bridge, side, real)\n"
            "      assert np.array_equal((Tensor(x) * 3 + k).numpy(), x * 3 + k), (fault, side, k)\n"
            "print('\\n'.join(errors))")
  out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "DEV": "MOCKUSB+AMD", "HCQDEV_WAIT_TIMEOUT_MS": "5000"},
                       capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  errors = out.stdout.splitlines()
  assert len(errors) == 12 and all(re.match(r"XDATA (read of \d+ bytes|write) at 0x[0-9a-f]+: (CBW|data IN|CSW) failed: ", e) for e in errors), errors
  assert sum("Bulk-Only reset recovery" in e for e in errors) == 6  # the stalls

# ---- what the bridge's TLP registers hold
def test_a_reads_completion_data_is_not_taken_for_the_next_writes(bridged):
  """The bridge writes a read's completion into TLP_DATA: a driver that still thought it held the value it last wrote
  would skip writing it again, and the next memory write would carry the read's data."""
  am, bridge, model = bridged
  at, _ = am.alloc(4096, True)
  base = am.vram_bar.bar.base + at
  struct.pack_into("<I", model.gpu.vram, at + 8, 0x1111)
  bridge.mem_write(base, 0x2222)
  assert bridge.mem_read(base + 8) == 0x1111
  bridge.mem_write(base + 4, 0x2222)
  assert struct.unpack_from("<II", model.gpu.vram, at) == (0x2222, 0x2222)

def test_a_doorbell_sends_its_high_dword_only_when_it_changes():
  writes = []
  bar = type("Bar", (), {"write32": lambda self, offset, value: writes.append((offset, value))})()
  doorbell = BridgedDoorbell(bar, 0x18)
  for value in (5, 7, (1 << 32) + 3, (1 << 32) + 9): doorbell[0] = value
  assert writes == [(0x18, 5), (0x18, 7), (0x1C, 1), (0x18, 3), (0x18, 9)]

# ---- the models' rules, each broken by a driver
def test_system_pages_where_nothing_answers_are_missing(bridged):
  am, bridge, model = bridged
  wrong = am.map_system(0x300000, 4096)  # not one of the bridge's SRAM windows
  assert "bus address 0x300000, where nothing answers" in model.gpu.problems[-1]
  run_compute(am, pm4.release_mem(11, wrong, pm4.DATA_SEL_64, 1, 0))
  assert until(lambda: model.gpu.faults), model.gpu.problems

def test_a_scsi_write_the_bridge_cant_take_fails_naming_it(bridged):
  am, bridge, model = bridged
  with pytest.raises(ValueError, match="at most 65536 bytes"): bridge.sram_write(bytes(0x10001))
  cdb = struct.pack(">BBQIBB", asm24.SCSI_WRITE16, 0, 0, 0x81, 0, 0)  # 129 sectors: more than the SRAM takes
  with pytest.raises(USBError, match="SCSI WRITE.*failure"): bridge.bot.command(cdb, data_out=bytes(0x81 * 512), what="SCSI WRITE of 129 sectors")
  cdb = struct.pack(">BBQIBB", asm24.SCSI_WRITE16, 0, 0, 2, 0, 0)     # the CDB says 2 sectors, the data stage is 1
  with pytest.raises(USBError, match="failure"): bridge.bot.command(cdb, data_out=bytes(512))
  bridge.sram_write(b"still works")
  assert bytes(model.xdata[0xF000:0xF00B]) == b"still works"

def test_a_second_handle_cant_claim_the_bridge_while_the_first_holds_it(bridged):
  am, bridge, model = bridged
  (again,) = find_bridges(ModelBackend([model]))
  with pytest.raises(usb.core.USBError) as e: ASM24Bridge(again)
  assert e.value.errno == errno.EBUSY
