"""The AM driver (an RDNA3 GPU with no kernel driver) against the bare-PCI machine's model: bring-up, page tables
checked entry by entry against amdgpu's layout computed here, queues that run, and for each rule the model takes from
amdgpu (gfxhub.py, mec.py, sdma_queues.py, the HDP flush) a driver that breaks it and what it meets."""
import os, struct, subprocess, sys, threading, time
import numpy as np
import pytest
from drivers.amd import am_queues, firmware, gmc, ih, pm4, sdma
from drivers.amd import am as am_module
from drivers.amd.am import AM, VA_BASE, VMID
from drivers.amd.pci_gpu import PCIGPU
from drivers.pci import SysfsFunction
from drivers.mock import new_bare_pci_machine
from drivers.mock.amd import firmware_files
from drivers.mock.amd.gpu import ARCHS, GPU, GPUFault, Queue
from drivers.mock.amd.mec import MEC
from drivers.mock.amd.sdma_queues import SDMAQueues

ADDRESS = "0000:03:00.0"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

@pytest.fixture
def machine():
  system = new_bare_pci_machine()
  model = system.pci_functions[ADDRESS].bars[5].registers
  yield system, model
  model.stop()

def brought_up(machine) -> tuple[AM, object]:
  system, model = machine
  return AM(PCIGPU(SysfsFunction(system, ADDRESS)), system), model

def until(condition, seconds: float = 5.0) -> bool:
  deadline = time.monotonic() + seconds
  while not condition():
    if time.monotonic() > deadline: return False
    time.sleep(0.001)
  return True

def test_bring_up_loads_each_firmware_through_the_psp_in_amdgpus_order(machine):
  am, model = brought_up(machine)
  # psp_gfx_if.h types in amdgpu's order (SMU before the TMR, then AMDGPU_UCODE_ID order): SMU; SDMA TH0, TH1; RS64 PFP,
  # ME, MEC ucodes; PFP's 2, ME's 2, MEC's 4 pipe stacks; IMU_I, IMU_D; the RLC's restore lists (SRM_CNTL, GPM, SRM),
  # IRAM, DRAM_BOOT; RLC_G; then AUTOLOAD_RLC once, after all of them
  assert [t for t, _ in model.psp.ip_firmware] == [0x12, 0x47, 0x48, 0x57, 0x58, 0x59, 0x5A, 0x5B, 0x5C, 0x5D, 0x5E, 0x5F, 0x60, 0x61,
                                                   0x44, 0x45, 0x16, 0x14, 0x15, 0x1A, 0x30, 0x08]
  assert model.psp.autoloads == [len(model.psp.ip_firmware)] and model.rlc.booted
  assert dict(model.psp.ip_firmware)[0x59] == firmware_files.MEC_IMAGE and model.problems == []
  assert am.smu_version == (0x4E, 0x41, 0x00)

def rlc_file(minor: int, pieces: dict[int, tuple[int, bytes]]) -> bytes:
  """An rlc_firmware_header_v2_<minor> file built by hand: RLC_G's ucode at 0x100, then each piece at its own offset;
  `pieces` maps the byte offset of a piece's size field to (its fw type, its bytes)."""
  end = {0: 0x68, 1: 0x9C, 2: 0xAC, 3: 0xCC, 4: 0xF4}[minor]
  head, body = bytearray(0x100), b"RLC_G ucode " * 3
  for size_at, (_, piece) in pieces.items():
    struct.pack_into("<II", head, size_at, len(piece), 0x100 + len(body))  # each size field is followed by its offset field
    body += piece
  struct.pack_into("<IIHHHHIIII", head, 0, 0x100 + len(body), end, 2, minor, 11, 0, 1, 36, 0x100, 0)
  return bytes(head) + body

@pytest.mark.parametrize("minor", [0, 1, 2, 3, 4])
def test_rlc_files_give_the_pieces_their_header_version_has_rlc_g_last(minor):
  """amdgpu_gfx_rlc_init_microcode: v2.1's restore lists and v2.2's IRAM/DRAM from every later version, v2.3's RLC_P
  and RLC_V and v2.4's tap delays only from exactly that version (a v2.4 file's RLC_P is never loaded)."""
  every = {0x74: (0x16, b"cntl" * 3), 0x84: (0x14, b"gpm " * 2), 0x94: (0x15, b"srm " * 5), 0x9C: (0x1A, b"iram" * 4), 0xA4: (0x30, b"dram" * 2),
           0xB4: (0x19, b"rlcp" * 2), 0xC4: (0x07, b"rlcv" * 2), 0xCC: (0x1B, b"gtap"), 0xD4: (0x1C, b"tap0"), 0xDC: (0x1D, b"tap1"),
           0xE4: (0x41, b"tap2"), 0xEC: (0x42, b"tap3")}
  blob = rlc_file(minor, {at: p for at, p in every.items() if at < {0: 0x68, 1: 0x9C, 2: 0xAC, 3: 0xCC, 4: 0xF4}[minor]})
  want = {0: [], 1: [0x16, 0x14, 0x15], 2: [0x16, 0x14, 0x15, 0x1A, 0x30], 3: [0x16, 0x14, 0x15, 0x1A, 0x30, 0x19, 0x07],
          4: [0x1B, 0x1C, 0x1D, 0x41, 0x42, 0x16, 0x14, 0x15, 0x1A, 0x30]}[minor]
  images = firmware.rlc_images(blob, "gc_11_0_0_rlc.bin")
  assert [t for t, _ in images] == want + [0x08] and images[-1][1] == b"RLC_G ucode " * 3
  assert all(image == dict(every.values())[t] for t, image in images[:-1])

def test_an_rlc_file_of_another_version_or_cut_short_is_refused():
  with pytest.raises(firmware.FirmwareError, match="header version 2.5 at offset 8"): firmware.rlc_images(rlc_file(2, {})[:8] + struct.pack("<HH", 2, 5) + rlc_file(2, {})[12:], "rlc")
  with pytest.raises(firmware.FirmwareError, match=r"firmware type 0x1a \(4000 bytes at offset 400\) runs past the end"):
    blob = bytearray(rlc_file(2, {}))
    struct.pack_into("<II", blob, 0x9C, 4000, 400)
    firmware.rlc_images(bytes(blob), "rlc")

def test_the_imu_file_splits_at_its_iram_size():
  blob = firmware_files.files()["gc_11_0_0_imu.bin"]
  assert firmware.imu_images(blob, "imu") == (firmware_files.IMU_IRAM, firmware_files.IMU_DRAM)

@pytest.mark.parametrize("breakage", ["autoload before RLC_G", "no IMU", "no autoload"])
def test_without_a_full_autoload_the_rlc_never_boots_and_no_queue_starts(machine, monkeypatch, breakage):
  """Wrong drivers: AUTOLOAD_RLC sent before the RLC's last piece, the IMU's images left out, or no AUTOLOAD_RLC at all.
  Bring-up waits for RLC_RLCS_BOOTLOAD_STATUS and fails naming it; a queue mapped anyway doesn't start."""
  real_load, real_autoload = am_module.psp.CommandRing.load_ip_firmware, am_module.psp.CommandRing.autoload_rlc
  def load(ring, fw_type, staging, blob):
    if breakage == "no IMU" and fw_type in (firmware.IMU_I, firmware.IMU_D): return
    if breakage == "autoload before RLC_G" and fw_type == firmware.RLC_G: real_autoload(ring)
    real_load(ring, fw_type, staging, blob)
  monkeypatch.setattr(am_module.psp.CommandRing, "load_ip_firmware", load)
  monkeypatch.setattr(am_module.psp.CommandRing, "autoload_rlc", lambda ring: None if breakage != "no IMU" else real_autoload(ring))
  monkeypatch.setattr(am_module, "RLC_WAIT_S", 0.05)
  system, model = machine
  with pytest.raises(am_module.AMError, match="the RLC didn't boot within 0.05 s of AUTOLOAD_RLC: RLC_RLCS_BOOTLOAD_STATUS 0x00000000"): brought_up(machine)
  assert not model.rlc.booted
  model.mec.write(am_queues.GRBM_GFX_CNTL, 1 << 2)  # a queue on ME 1 mapped anyway
  model.mec.write((0, 0x1FAB), 1)
  assert "the RLC hasn't booted" in model.mec.problems[-1]

def test_rs64_files_split_as_their_header_says():
  blob = firmware_files.files()["gc_11_0_0_mec.bin"]
  ucode_size, ucode_at, data_size, data_at, lo, hi = struct.unpack_from("<IIIIII", blob, 36)  # after the common header and feature version
  assert firmware.rs64_images(blob, "mec") == (blob[ucode_at:ucode_at + ucode_size], blob[data_at:data_at + data_size], hi << 32 | lo)
  with pytest.raises(firmware.FirmwareError, match="header version 1.0 at offset 8"): firmware.rs64_images(firmware_files.files()["smu_13_0_0.bin"], "smu")

def test_page_table_entries_are_amdgpus_four_levels(machine):
  am, model = brought_up(machine)
  at, cpu = am.alloc(3 * 4096, cpu_access=True)
  va, vram = VA_BASE + at, model.vram
  entry = lambda table, index: struct.unpack_from("<Q", vram, table + 8 * index)[0]
  table = am.page_tables.root
  for shift in (39, 30, 21):  # PDB2, PDB1, PDB0: VA bits 47:39, 38:30, 29:21
    pde = entry(table, va >> shift & 511)
    assert pde & 1 and not pde & (1 << 54)  # VALID, not a PTE
    table = pde & 0x0000_FFFF_FFFF_F000
  ptes = [entry(table, (va >> 12 & 511) + i) for i in range(3)]
  assert ptes == [(at + 4096 * i) | 0x71 for i in range(3)]  # physical page | VALID | EXECUTABLE | READABLE | WRITEABLE
  region = next(r for r in model.gpu_of(VMID).maps if r.va <= va < r.va + r.size)
  assert region.host + va - region.va == model.hub.vram_address + at and cpu == am.vram_cpu + at

def test_the_hubs_walk_reads_tables_built_by_hand_with_a_2_mib_pde0_page():
  """Tables written here from amdgpu_vm.h's bits, not by tg's PageTables: a PDB0 entry with PDE_PTE maps 2 MiB, PTEs map
  pages one by one, runs that are consecutive in video memory too become one region, invalid entries map nothing."""
  from drivers.mock.amd import gfxhub
  vram = memoryview(bytearray(64 << 20))
  installed = {}
  hub = gfxhub.GFXHub(vram, lambda vmid, regions: installed.__setitem__(vmid, regions))
  entries = lambda table: np.frombuffer(vram, np.uint64, 512, table)
  root, pdb1, pdb0, ptb = 0x1000, 0x2000, 0x3000, 0x4000
  va = (5 << 39) | (7 << 30) | (9 << 21)  # PDB2 index 5, PDB1 index 7, PDB0 index 9
  entries(root)[5], entries(pdb1)[7] = pdb1 | 1, pdb0 | 1
  entries(pdb0)[9] = (16 << 20) | 1 | 1 << 54                            # 2 MiB at 16 MiB
  entries(pdb0)[10] = ptb | 1
  entries(ptb)[0:3] = [(32 << 20) | 0x71, (32 << 20) + 4096 | 0x71, (40 << 20) | 0x71]
  entries(ptb)[3] = (44 << 20) | 0x70                                    # no VALID
  for reg, value in ((gfxhub.MX_L1_TLB_CNTL, 0x19), (gfxhub.L2_CNTL, 1), (gfxhub.CONTEXT0_PT_BASE_LO32 + 2, root | 1),
                     (gfxhub.CONTEXT0_END_LO32 + 2, 0xFFFFFFFF), (gfxhub.CONTEXT0_END_LO32 + 3, 0xF), (gfxhub.CONTEXT0_CNTL + 1, 1 | 3 << 1)):
    hub.write(reg, value)
  hub.write(gfxhub.ENG0_REQ + 17, 0xF80000 | 1 << 1)
  assert hub.read(gfxhub.ENG0_ACK + 17) == 1 << 1
  base = hub.vram_address
  assert [(r.va, r.size, r.host - base) for r in installed[1]] == [(va, 2 << 20, 16 << 20), (va + (2 << 20), 8192, 32 << 20), (va + (2 << 20) + 8192, 4096, 40 << 20)]

def test_the_gpu_sees_new_pages_only_after_a_tlb_flush(machine):
  am, model = brought_up(machine)
  at = am.visible_space.alloc(4096, 4096)
  am.page_tables.map(VA_BASE + at, at, 4096)
  am.flush_hdp()
  covered = lambda: any(r.va <= VA_BASE + at < r.va + r.size for r in model.gpu_of(VMID).maps)
  assert not covered()
  gmc.flush_tlb(am.gc_read0, am.gc_write0, VMID)
  assert covered()

def test_a_page_table_base_without_valid_maps_nothing(machine):
  am, model = brought_up(machine)
  am.gc_write0(gmc.CONTEXT0_PT_BASE_LO32 + 2 * VMID, am.page_tables.root)  # no VALID bit
  gmc.flush_tlb(am.gc_read0, am.gc_write0, VMID)
  assert model.gpu_of(VMID).maps == [] and "has no VALID bit" in model.problems[-1]

def test_with_the_l1_tlb_off_nothing_translates(machine):
  am, model = brought_up(machine)
  am.gc_write0(gmc.MX_L1_TLB_CNTL, 0)  # a driver that skipped gfxhub_v3_0_init_tlb_regs
  gmc.flush_tlb(am.gc_read0, am.gc_write0, VMID)
  assert model.gpu_of(VMID).maps == [] and "the L1 TLB" in model.problems[-1]

def mapped_compute(am):
  ring, pointers, eop, mqd = (VA_BASE + am.alloc(n, True)[0] for n in (1 << 16, 4096, 4096, 4096))
  doorbell = am_queues.map_compute_queue(am.gc_read, am.gc_write, VMID, ring, 1 << 16, pointers + 0x80, pointers, eop, mqd)
  return ring, pointers, doorbell

def submit(am, ring: int, doorbell: int, words: list[int], flush: bool = True) -> None:
  at = ring - VA_BASE
  am.vram_bar.view[at:at + 4 * len(words)] = np.array(words, np.uint32).tobytes()
  if flush: am.flush_hdp()
  np.frombuffer(am.doorbell_bar.view, np.uint64, 1, doorbell)[0] = len(words)

def test_a_compute_queue_runs_its_packets_and_reports_a_32_bit_read_pointer(machine):
  am, model = brought_up(machine)
  ring, pointers, doorbell = mapped_compute(am)
  signal_at, _ = am.alloc(4096, True)
  words = pm4.release_mem(11, VA_BASE + signal_at, pm4.DATA_SEL_64, 0x1234, 0x5678)
  submit(am, ring, doorbell, words)
  signal = np.frombuffer(am.vram_bar.view, np.uint64, 1, signal_at)
  assert until(lambda: signal[0] == 0x5678_0000_1234), model.faults
  rptr = np.frombuffer(am.vram_bar.view, np.uint32, 2, pointers - VA_BASE + 0x80)
  assert until(lambda: rptr[0] == len(words)) and rptr[1] == 0  # 32 bits, in dwords
  assert doorbell == 0x18  # AMDGPU_NAVI10_DOORBELL_MEC_RING0 (3) in 64-bit slots

def test_a_second_bring_up_takes_over_the_queue_the_first_left_running(machine):
  first, model = brought_up(machine)
  mapped_compute(first)
  am, _ = brought_up(machine)  # a new process: the secure OS runs, the old queue is still on the pipe
  am.alloc(1 << 20, True)      # its ring lands elsewhere
  ring, pointers, doorbell = mapped_compute(am)
  signal_at, _ = am.alloc(4096, True)
  submit(am, ring, doorbell, pm4.release_mem(11, VA_BASE + signal_at, pm4.DATA_SEL_64, 7, 0))
  assert until(lambda: np.frombuffer(am.vram_bar.view, np.uint64, 1, signal_at)[0] == 7), (model.faults, model.problems)
  assert len(model.mec.queues) == 1

def test_closing_leaves_no_queue_and_no_psp_ring_for_the_next_driver(machine):
  first, model = brought_up(machine)
  mapped_compute(first)
  am_queues.start_sdma_queue(first.gc_write, VMID, VA_BASE + first.alloc(1 << 16, True)[0], 1 << 16, VA_BASE, VA_BASE + 8)
  assert model.mec.queues and model.sdma.queues and model.psp.ring is not None
  first.close()
  assert not model.mec.queues and not model.sdma.queues and model.psp.ring is None
  am, _ = brought_up(machine)
  assert model.psp.ring is not None and model.problems == []

def test_a_doorbell_with_no_hdp_flush_since_the_last_one_faults_the_queue(machine):
  am, model = brought_up(machine)
  ring, pointers, doorbell = mapped_compute(am)
  submit(am, ring, doorbell, pm4.nop(4), flush=True)
  rptr = np.frombuffer(am.vram_bar.view, np.uint32, 1, pointers - VA_BASE + 0x80)
  assert until(lambda: rptr[0] == 4) and not model.faults  # the model saw the first doorbell
  at = ring - VA_BASE + 16
  am.vram_bar.view[at:at + 16] = np.array(pm4.nop(4), np.uint32).tobytes()
  np.frombuffer(am.doorbell_bar.view, np.uint64, 1, doorbell)[0] = 8  # rung again, no flush
  assert until(lambda: model.faults) and "no HDP flush" in model.faults[0]

def test_the_hdp_rule_counts_flushes_so_a_doorbell_seen_late_is_no_fault(machine):
  """The model notices doorbell moves after the fact: a driver that flushed before each of two doorbells passes even
  when the model first looks between the second flush and the second doorbell; a third move with no flush faults."""
  am, model = brought_up(machine)
  q = Queue(0, "pm4", 0, 4096, 0, 0, memoryview(bytearray(8)).cast("Q"))
  model.watch(q)
  am.flush_hdp()
  am.flush_hdp()
  model.rung(q)
  model.rung(q)
  with pytest.raises(GPUFault, match="no HDP flush"): model.rung(q)

def test_flushes_reach_the_hdp_only_where_the_nbio_remap_put_its_register(machine):
  am, model = brought_up(machine)
  am.gpu.reg_write(am.base("NBIF", 2) + am_module.HDP_REMAP, 0)  # a driver that never moved the register (nbio_v4_3_remap_hdp_registers)
  ring, _, doorbell = mapped_compute(am)
  submit(am, ring, doorbell, pm4.nop(4), flush=True)
  assert until(lambda: model.faults) and "no HDP flush" in model.faults[0]

def test_a_packet_writing_outside_the_page_tables_leaves_the_fault_in_the_hub(machine):
  am, model = brought_up(machine)
  ring, _, doorbell = mapped_compute(am)
  submit(am, ring, doorbell, pm4.release_mem(11, 0x5000_0040, pm4.DATA_SEL_64, 1, 0))
  assert until(lambda: gmc.fault(am.gc_read0) is not None)
  assert gmc.fault(am.gc_read0) == (VMID, 0x5000_0000)
  gmc.clear_fault(am.gc_write0)
  assert gmc.fault(am.gc_read0) is None

# ---- the interrupt ring
def test_a_memory_fault_arrives_on_the_interrupt_ring_as_amdgpu_decodes_it(machine):
  am, model = brought_up(machine)
  ring, _, doorbell = mapped_compute(am)
  submit(am, ring, doorbell, pm4.release_mem(11, 0x5000_0040, pm4.DATA_SEL_64, 1, 0))
  assert until(lambda: model.ih.regs[0x84])  # IH_RB_WPTR moved: one vector
  head = struct.unpack_from("<8I", model.vram, am.ih.ring.ctypes.data - am.vram_cpu)
  assert head[0] == 0x0A | 1 << 24 and head[4:6] == (0x5000_0040 >> 12, 0)  # client GFX, source UTCL2 fault, VMID 1; the page
  (vector,) = am.ih.vectors()
  assert ih.fault(vector) == "GPU memory fault at 0x50000000 (VMID 1, GFX hub)" and am.ih.vectors() == []
  assert model.ih.regs[0x83] == 32  # the read pointer handed back through IH_RB_RPTR

def test_a_bad_packet_is_a_named_command_processor_error(machine):
  am, model = brought_up(machine)
  ring, _, doorbell = mapped_compute(am)
  submit(am, ring, doorbell, [pm4.header(0x7E, 1), 0])  # an opcode PM4 doesn't have
  assert until(lambda: model.faults)
  (vector,) = am.ih.vectors()
  assert (vector.client, vector.source, vector.ring) == (0x14, 0xB7, 1 << 2)  # GRBM_CP, CP_BAD_OPCODE_ERROR, ME 1 pipe 0 queue 0
  assert ih.fault(vector) == "the command processor met a bad packet opcode (CP_BAD_OPCODE_ERROR) on ME 1 pipe 0 queue 0"

@pytest.mark.parametrize("dev", ["MOCKPCI+AMD", "MOCKUSB+AMD"])
def test_the_device_reports_a_bad_packet_by_name_then_goes_on(dev):
  """Through the interrupt ring, over bare PCI and behind the USB bridge: a CP error is an error that names it, not a
  timeout, and the next computation is right (in its own process: one AMD device per process)."""
  script = ("import numpy as np; from tg import Tensor; from drivers.device import Device; from drivers.hcq import DeviceFault\n"
            "from drivers.amd import pm4\n"
            "x = np.arange(64, dtype=np.float32)\n"
            "assert np.array_equal((Tensor(x) + 1).numpy(), x + 1)\n"
            "amd = Device['AMD']\n"
            "amd.compute_queue().q(pm4.header(0x7E, 1), 0).signal(amd.timeline_signal, amd.next_timeline()).submit(amd)\n"
            "try: amd.synchronize()\n"
            "except DeviceFault as e: print(e)\n"
            "assert np.array_equal((Tensor(x) * 2).numpy(), x * 2)\n")
  out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "DEV": dev, "HCQDEV_WAIT_TIMEOUT_MS": "20000"},
                       capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  assert out.stdout.strip() == "AMD: the command processor met a bad packet opcode (CP_BAD_OPCODE_ERROR) on ME 1 pipe 0 queue 0"

def small_ring(am, entries: int = 4) -> ih.IHRing:
  ring_at, _ = am.alloc(4096, True)
  wptr_at, _ = am.alloc(4096, True)
  view = lambda at, n: np.frombuffer(am.vram_bar.view, np.uint32, n, at)
  return ih.IHRing(am.ih_read, am.ih_write, am.fb_base + ring_at, view(ring_at, 8 * entries), am.fb_base + wptr_at, view(wptr_at, 1), am.vram_bar.fetch)

def test_after_an_overflow_the_driver_reads_on_from_the_oldest_vector_left(machine):
  """Five vectors into a ring of four that no one reads: the IH overwrites the oldest and flags RB_OVERFLOW; the driver
  skips past the vector the GPU writes next (ih_v6_0_get_wptr) and clears the flag. A driver that ignored it would
  read one vector."""
  am, model = brought_up(machine)
  ring = small_ring(am)
  for source in range(1, 6): model.ih.interrupt(0x14, source)
  assert model.ih.regs[0x84] & 1  # IH_RB_WPTR.RB_OVERFLOW
  assert [v.source for v in ring.vectors()] == [3, 4, 5] and not model.ih.regs[0x84] & 1

@pytest.mark.parametrize("breakage, problem", [("not enabled", None), ("offset, not MC address", "outside the frame buffer aperture"),
                                               ("bus address space", "only as an MC address")])
def test_an_interrupt_ring_the_ih_cant_use_gets_no_vector(machine, breakage, problem):
  am, model = brought_up(machine)
  ring = small_ring(am)
  at = ring.ring.ctypes.data - am.vram_cpu
  if breakage == "not enabled": am.ih_write(ih.RB_CNTL, ring.cntl & ~ih.RB_ENABLE)
  if breakage == "offset, not MC address": am.ih_write(ih.RB_BASE, at >> 8)  # a driver that forgot the frame buffer's base
  if breakage == "bus address space": am.ih_write(ih.RB_CNTL, ring.cntl & ~(7 << 28) | 2 << 28)
  model.ih.interrupt(0x14, 0xB7)
  assert ring.vectors() == [] and model.ih.regs[0x84] == 0
  assert (problem is None and model.ih.dropped == 1) or problem in model.ih.problems[-1]

def test_an_sdma_queue_copies(machine):
  am, model = brought_up(machine)
  ring, pointers = (VA_BASE + am.alloc(n, True)[0] for n in (1 << 16, 4096))
  doorbell = am_queues.start_sdma_queue(am.gc_write, VMID, ring, 1 << 16, pointers + 0x80, pointers)
  src, _ = am.alloc(4096, True)
  dst, _ = am.alloc(4096, False)
  back, _ = am.alloc(4096, True)
  am.vram_bar.view[src:src + 8] = b"abcdefgh"
  words = sdma.copy_linear(((VA_BASE + dst) & 0xFFFFFFFF, (VA_BASE + dst) >> 32), ((VA_BASE + src) & 0xFFFFFFFF, (VA_BASE + src) >> 32), 8)
  words += sdma.copy_linear(((VA_BASE + back) & 0xFFFFFFFF, (VA_BASE + back) >> 32), ((VA_BASE + dst) & 0xFFFFFFFF, (VA_BASE + dst) >> 32), 8)
  at = ring - VA_BASE
  am.vram_bar.view[at:at + 4 * len(words)] = np.array(words, np.uint32).tobytes()
  am.flush_hdp()
  np.frombuffer(am.doorbell_bar.view, np.uint64, 1, doorbell)[0] = 4 * len(words)  # SDMA counts bytes
  assert until(lambda: bytes(am.vram_bar.view[back:back + 8]) == b"abcdefgh"), (model.faults, model.problems)
  assert doorbell == 0x800  # AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0 (0x100) in 64-bit slots

# ---- the MEC's and SDMA's rules, each broken by a driver
def mec_model(loaded=None):
  gpu = GPU(ARCHS["gfx1100"], 1, threading.RLock(), lambda *a: None, lambda *a: None)
  images = {89: firmware_files.MEC_IMAGE, **{94 + p: firmware_files.MEC_STACK for p in range(4)}}
  return MEC(lambda vmid: gpu, memoryview(bytearray(4096)), (images if loaded is None else loaded).get, (firmware_files.MEC_IMAGE, firmware_files.MEC_STACK),
             firmware_files.MEC_START >> 2, lambda q: None, lambda: True)

def write_to(model): return lambda reg, value: model.write(reg, value)

@pytest.mark.parametrize("breakage, problem", [
  ("halted", "has the MEC halted"), ("wrong start", "PRGRM_CNTR_START is"), ("ME 0", "ME 0 is not the compute micro engine"),
  ("doorbell range", "outside the MEC's doorbell range"), ("no firmware", "has not loaded the RS64 MEC firmware")])
def test_a_queue_the_mec_cant_run_is_not_started(breakage, problem):
  mec = mec_model({} if breakage == "no firmware" else None)
  write = write_to(mec)
  am_queues.start_mec(write, firmware_files.MEC_START + (0x100 if breakage == "wrong start" else 0))
  if breakage == "halted": write(am_queues.MEC_RS64_CNTL, am_queues.MEC_HALT)  # halted again before the queue is mapped
  if breakage == "ME 0": write = lambda reg, value, w=write: w(reg, value & ~0xC if reg == am_queues.GRBM_GFX_CNTL else value)
  if breakage == "doorbell range": write = lambda reg, value, w=write: w(reg, 0x10 if reg == am_queues.MEC_DOORBELL_RANGE_UPPER else value)
  am_queues.map_compute_queue(mec.read, write, VMID, 0x1000_0000, 1 << 16, 0x2000, 0x2080, 0x3000, 0x4000)
  assert not mec.queues and problem in mec.problems[-1]

def sdma_model(loaded):
  gpu = GPU(ARCHS["gfx1100"], 1, threading.RLock(), lambda *a: None, lambda *a: None)
  return SDMAQueues(lambda vmid: gpu, memoryview(bytearray(4096)), loaded.get, firmware_files.SDMA_THREADS, lambda q: None)

@pytest.mark.parametrize("loaded, halted, problem", [({}, False, "has not loaded both SDMA firmware threads"),
                                                     (dict(zip((71, 72), firmware_files.SDMA_THREADS)), True, "still has HALT or TH1_RESET set")])
def test_an_sdma_ring_the_engine_cant_run_is_not_started(loaded, halted, problem):
  model = sdma_model(loaded)
  write = write_to(model)
  if halted: write = lambda reg, value, w=write: w(reg, 1 if reg == am_queues.SDMA0_F32_CNTL else value)  # a driver that never unhalts
  am_queues.start_sdma_queue(write, VMID, 0x1000_0000, 1 << 16, 0x2080, 0x2000)
  assert not model.queues and problem in model.problems[-1]
