"""The AM driver's first bring-up steps: psp_<ip>_sos.bin's components (a file assembled here by hand from
amdgpu_ucode.h's layouts) loaded through the PSP bootloader's C2PMSG handshake, the secure OS's kernel-mode ring,
and commands through it (trusted memory, IP firmware), against the PSP model, over the bare-PCI machine and over the
USB bridge; and a driver that gets a handshake wrong meets the model's rules."""
import lzma, struct
import pytest
from ir.switches import Context
from drivers.amd import firmware, psp
from drivers.amd.firmware import FirmwareError, psp_components
from drivers.amd.pci_gpu import PCIGPU
from drivers.pci import SysfsFunction
from drivers.mock.amd import psp as model_psp
from drivers.mock import bare_pci_machine
from drivers.mock.amd.pci_gpu import AMDPCIGPU, FB_BASE, NAVI31_IPS, enumerated_gpu
from drivers.mock.usb.asm24 import ASM24Model
from drivers.mock.usb.backend import ModelBackend
from drivers.usb.asm24 import ASM24Bridge, BridgedFunction, find_bridges

# fw_type (amdgpu_ucode.h enum psp_fw_type): KDB 3, SYS_DRV 2, SOC_DRV 7, SOS 1
COMPONENTS = {3: b"key database" * 5, 2: b"system driver " * 20, 7: b"soc driver", 1: b"secure os image " * 30}
MP0 = next(bases[0] for name, _, bases in NAVI31_IPS.values() if name == "MP0")
MMHUB = next(bases[0] for name, _, bases in NAVI31_IPS.values() if name == "MMHUB")
STAGING = 256 << 20

def sos_file(components: dict[int, bytes], version=(2, 0)) -> bytes:
  """A psp_firmware_header_v2_0 file: the 32-byte common header, the descriptor count and descriptors, then the
  components one after another from ucode_array_offset_bytes."""
  array_at = 32 + 4 + 16 * len(components)
  descs, body = b"", b""
  for fw_type, blob in components.items():
    descs += struct.pack("<IIII", fw_type, 0x100 + fw_type, len(body), len(blob))
    body += blob
  size = array_at + len(body)
  header = struct.pack("<IIHHHHIIII", size, array_at, *version, 13, 0, 0x3A, len(body), array_at, 0)
  return header + struct.pack("<I", len(components)) + descs + body

def test_the_sos_file_splits_into_its_components():
  assert psp_components(sos_file(COMPONENTS)) == COMPONENTS

@pytest.mark.parametrize("damage, message", [
  (lambda b: b[:8] + struct.pack("<HH", 1, 0) + b[12:], "header version 1.0 at offset 8"),
  (lambda b: b[:-10], "the header says .* bytes at offset 0"),
  (lambda b: b[:36] + struct.pack("<IIII", 2, 0, 10_000, 5) + b[52:], "component SYS_DRV \\(descriptor at offset 36\\) runs past the end")])
def test_a_damaged_sos_file_names_the_offset(damage, message):
  with pytest.raises(FirmwareError, match=message): psp_components(damage(sos_file({2: b"x" * 64, 1: b"y" * 64})))

def test_firmware_files_are_found_plain_or_xz_and_a_missing_one_says_where_it_looked(tmp_path):
  (tmp_path / "psp_13_0_0_sos.bin").write_bytes(b"plain")
  (tmp_path / "psp_13_0_0_ta.bin.xz").write_bytes(lzma.compress(b"packed"))
  with Context(AMD_FIRMWARE_DIR=str(tmp_path)):
    assert firmware.read("psp_13_0_0_sos.bin") == b"plain" and firmware.read("psp_13_0_0_ta.bin") == b"packed"
    with pytest.raises(FileNotFoundError, match=f"smu_13_0_0.bin not found in {tmp_path}.*AMD_FIRMWARE_DIR"): firmware.read("smu_13_0_0.bin")

def bare_pci_gpu(**kw) -> tuple[PCIGPU, AMDPCIGPU]:
  """The driver's view of DEV=MOCKPCI's machine with a GPU whose PSP accepts COMPONENTS."""
  model = AMDPCIGPU(psp_firmware=COMPONENTS, **kw)
  system = bare_pci_machine()
  system.pci_functions["0000:03:00.0"] = enumerated_gpu(model)
  return PCIGPU(SysfsFunction(system, "0000:03:00.0")), model

def test_the_driver_starts_the_secure_os_in_psp_hw_starts_order():
  gpu, model = bare_pci_gpu()
  assert psp.fb_base(gpu, MMHUB) == FB_BASE
  loaded = psp.start_secure_os(gpu, MP0, psp.fb_base(gpu, MMHUB), psp_components(sos_file(COMPONENTS)), STAGING)
  assert loaded == ["KDB", "SYS_DRV", "SOC_DRV", "SOS"] and model.psp.fault is None
  assert model.psp.loaded == [3, 2, 7, 1] and psp.secure_os_running(gpu, MP0)
  assert psp.start_secure_os(gpu, MP0, FB_BASE, COMPONENTS, STAGING) == []  # a warm GPU is left alone

def test_over_the_usb_bridge_too():
  model = AMDPCIGPU(psp_firmware=COMPONENTS)
  (dev,) = find_bridges(ModelBackend([ASM24Model({(1, 0, 0): model.function})]))
  gpu = PCIGPU(BridgedFunction(ASM24Bridge(dev)))
  assert psp.start_secure_os(gpu, MP0, psp.fb_base(gpu, MMHUB), COMPONENTS, STAGING) == ["KDB", "SYS_DRV", "SOC_DRV", "SOS"]
  assert model.psp.loaded == [3, 2, 7, 1]

def test_a_psp_that_never_answers_times_out_naming_the_step():
  gpu, model = bare_pci_gpu(psp_answers=False)
  with pytest.raises(psp.PSPError, match="ready for KDB: MP0_SMN_C2PMSG_35 reads 0x00000000"):
    psp.start_secure_os(gpu, MP0, FB_BASE, COMPONENTS, STAGING, wait_s=0.05)

def test_a_driver_that_ignores_where_video_memory_starts_is_refused():
  gpu, model = bare_pci_gpu()
  with pytest.raises(psp.PSPError, match="the PSP bootloader to take KDB"):
    psp.start_secure_os(gpu, MP0, 0, COMPONENTS, STAGING, wait_s=0.05)  # staging address without the FB base
  assert "outside video memory" in model.psp.fault

def test_a_driver_that_sends_the_secure_os_first_gets_no_sign_of_life():
  """A wrong driver: the SOS command before the system driver (the handshake otherwise right)."""
  gpu, model = bare_pci_gpu()
  gpu.vram_write(STAGING, COMPONENTS[1])
  gpu.reg_write(MP0 + psp.C2PMSG_36, (FB_BASE + STAGING) >> 20)
  gpu.reg_write(MP0 + psp.C2PMSG_35, 0x20000)
  assert not psp.secure_os_running(gpu, MP0) and model.psp.fault == "the secure OS was sent before the system driver"

@pytest.mark.parametrize("command, fault", [(0x30000, "unknown bootloader command 0x30000"), (0x10000, "aren't component 2")])
def test_a_wrong_command_or_wrong_bytes_leave_the_bootloader_busy(command, fault):
  gpu, model = bare_pci_gpu()
  gpu.vram_write(STAGING, COMPONENTS[3])  # KDB's bytes, whatever the command says
  gpu.reg_write(MP0 + psp.C2PMSG_36, (FB_BASE + STAGING) >> 20)
  gpu.reg_write(MP0 + psp.C2PMSG_35, command)
  assert not gpu.reg_read(MP0 + psp.C2PMSG_35) & psp.BOOTLOADER_READY and fault in model.psp.fault

def test_the_model_decodes_commands_with_its_own_table():
  assert {model_psp.COMMANDS[c]: c for c in model_psp.COMMANDS} == {t: c for t, c in psp.LOAD_ORDER}
  assert [model_psp.COMMANDS[c] for c in model_psp.COMMANDS] == [t for t, _ in psp.LOAD_ORDER]

RING = STAGING + (1 << 20)

def started_gpu() -> tuple[PCIGPU, AMDPCIGPU]:
  gpu, model = bare_pci_gpu()
  psp.start_secure_os(gpu, MP0, FB_BASE, COMPONENTS, STAGING)
  return gpu, model

def test_the_secure_os_takes_its_kernel_mode_ring():
  gpu, model = started_gpu()
  psp.create_ring(gpu, MP0, psp.fb_base(gpu, MMHUB), RING)
  assert model.psp.ring == (RING, 0x1000) and model.psp.fault is None

def test_a_ring_before_the_secure_os_runs_times_out():
  gpu, model = bare_pci_gpu()
  with pytest.raises(psp.PSPError, match="ready for ring creation: MP0_SMN_C2PMSG_64 reads 0x00000000"): psp.create_ring(gpu, MP0, FB_BASE, RING, wait_s=0.05)

@pytest.mark.parametrize("write, fault", [
  ({psp.C2PMSG_64: 1 << 16}, "only the kernel-mode ring"),                           # the user-mode ring's type
  ({psp.C2PMSG_71: 100, psp.C2PMSG_64: 2 << 16}, "ring size 100 isn't whole 64-byte frames"),
  ({psp.C2PMSG_70: 0, psp.C2PMSG_71: 0x1000, psp.C2PMSG_64: 2 << 16}, "outside video memory")])  # the address without its high half
def test_a_wrong_ring_is_refused_with_a_status(write, fault):
  gpu, model = started_gpu()
  address = FB_BASE + RING
  regs = {psp.C2PMSG_69: address & 0xFFFFFFFF, psp.C2PMSG_70: address >> 32, psp.C2PMSG_71: 0x1000, **write}
  for reg in (psp.C2PMSG_69, psp.C2PMSG_70, psp.C2PMSG_71, psp.C2PMSG_64):
    if reg in regs: gpu.reg_write(MP0 + reg, regs[reg])
  answer = gpu.reg_read(MP0 + psp.C2PMSG_64)
  assert answer & psp.RESPONSE and answer & psp.STATUS_MASK and fault in model.psp.fault and model.psp.ring is None

def test_the_driver_reports_the_status_of_a_refused_ring():
  gpu, model = started_gpu()
  with pytest.raises(psp.PSPError, match="refused the ring at 0x8600000000: status 0x0001"):
    psp.create_ring(gpu, MP0, FB_BASE, model.vram_mib << 20)  # past the end of video memory

CMD, FENCE, TMR = RING + 0x1000, RING + 0x2000, 512 << 20
RING_FRAMES = psp.RING_BYTES // psp.FRAME_BYTES

def ring_of(gpu) -> psp.CommandRing:
  psp.create_ring(gpu, MP0, FB_BASE, RING)
  return psp.CommandRing(gpu, MP0, FB_BASE, RING, CMD, FENCE, wait_s=0.2)

def test_commands_through_the_ring_load_the_smu_set_up_trusted_memory_then_load_firmware():
  gpu, model = started_gpu()
  ring = ring_of(gpu)
  ring.load_ip_firmware(psp.GFX_FW_TYPE_SMU, STAGING, b"smu firmware " * 8)
  ring.setup_tmr(TMR, 4 << 20)
  ring.load_ip_firmware(0x14, STAGING, b"sdma firmware " * 8)  # a psp_gfx_fw_type; the model takes any
  assert model.psp.tmr == (TMR, 4 << 20) and model.psp.ip_firmware == [(0x12, b"smu firmware " * 8), (0x14, b"sdma firmware " * 8)] and model.psp.fault is None
  for i in range(RING_FRAMES + 2): ring.load_ip_firmware(i, STAGING, bytes([i]) * 4)  # more commands than frames: the ring wraps
  assert [t for t, _ in model.psp.ip_firmware[2:]] == list(range(RING_FRAMES + 2)) and ring.fence_value == RING_FRAMES + 5

def test_firmware_other_than_the_smus_before_trusted_memory_is_refused_with_a_status():
  gpu, model = started_gpu()
  with pytest.raises(psp.PSPError, match="refused to load firmware of type 20: status 0xffff0001"): ring_of(gpu).load_ip_firmware(20, STAGING, b"x" * 16)
  assert "no trusted memory region yet" in model.psp.fault

def test_trusted_memory_before_the_smus_firmware_is_refused():
  """A wrong driver: the TMR first, as on GPUs before Navi12 (amdgpu_psp.c psp_hw_start loads the PMFW first on a
  Navi31, whose DF C-state management is centralized in it)."""
  gpu, model = started_gpu()
  with pytest.raises(psp.PSPError, match="refused to set up its trusted memory"): ring_of(gpu).setup_tmr(TMR, 4 << 20)
  assert model.psp.tmr is None and "SETUP_TMR before the SMU's firmware" in model.psp.fault

def test_trusted_memory_not_aligned_to_1_mib_is_refused():
  gpu, model = started_gpu()
  ring = ring_of(gpu)
  ring.load_ip_firmware(psp.GFX_FW_TYPE_SMU, STAGING, b"smu")
  with pytest.raises(psp.PSPError, match="refused to set up its trusted memory"): ring.setup_tmr(TMR + 4096, 4 << 20)
  assert model.psp.tmr is None

def test_a_frame_pointing_at_an_unaligned_command_buffer_never_completes():
  gpu, model = started_gpu()
  psp.create_ring(gpu, MP0, FB_BASE, RING)
  ring = psp.CommandRing(gpu, MP0, FB_BASE, RING, CMD, FENCE, wait_s=0.05)
  ring.cmd += 256  # a wrong driver: the buffer moved off its 4 KiB boundary after the check
  with pytest.raises(psp.PSPError, match="timed out after 0.05 s waiting for the secure OS to set up its trusted memory: fence 0, want 1"):
    ring.setup_tmr(TMR, 4 << 20)
  assert "4 KiB-aligned 1024-byte buffer" in model.psp.fault

def common_header(size: int, array_at: int, image_bytes: int, version=(1, 0)) -> bytes:
  """amdgpu_ucode.h common_firmware_header: size, header size, header version, IP version, ucode version, ucode size,
  ucode_array_offset_bytes, crc32."""
  return struct.pack("<IIHHHHIIII", size, array_at, *version, 13, 0, 0x77, image_bytes, array_at, 0)

def test_the_smu_and_both_sdma_threads_load_from_their_files(tmp_path):
  smu_image, context, control = b"smu image " * 7, b"sdma context thread " * 3, b"sdma control " * 5
  (tmp_path / "smu_13_0_0.bin").write_bytes(common_header(0x100 + len(smu_image), 0x100, len(smu_image)).ljust(0x100, b"\0") + smu_image)
  ctl_at = 0x100 + len(context)
  sdma_fields = struct.pack("<IIIIIIII", 1, len(context), 0, 0, ctl_at, len(control), 0, 0)  # sdma_firmware_header_v2_0
  (tmp_path / "sdma_6_0_0.bin").write_bytes((common_header(ctl_at + len(control), 0x100, len(context), (2, 0)) + sdma_fields).ljust(0x100, b"\0") + context + control)
  with Context(AMD_FIRMWARE_DIR=str(tmp_path)): images = psp.smu_and_sdma_firmware((13, 0, 0), (6, 0, 0))
  assert images == [(18, smu_image), (71, context), (72, control)]
  gpu, model = started_gpu()
  ring = ring_of(gpu)
  ring.load_ip_firmware(images[0][0], STAGING, images[0][1])
  ring.setup_tmr(TMR, 4 << 20)
  for fw_type, image in images[1:]: ring.load_ip_firmware(fw_type, STAGING, image)
  assert model.psp.ip_firmware == images

def test_an_sdma_file_of_another_version_or_cut_short_is_refused():
  with pytest.raises(FirmwareError, match="sdma_6_0_0.bin: header version 1.0 at offset 8"): firmware.sdma_threads(common_header(100, 64, 4) + bytes(68), "sdma_6_0_0.bin")
  fields = struct.pack("<IIIIIIII", 1, 16, 0, 0, 80, 4000, 0, 0)
  with pytest.raises(FirmwareError, match="the control thread \\(4000 bytes at offset 80\\) runs past the end"):
    firmware.sdma_threads(common_header(96, 64, 16, (2, 0)) + fields + bytes(32), "sdma_6_0_0.bin")

def test_components_out_of_order_or_while_busy_are_refused():
  gpu, model = bare_pci_gpu()
  for fw_type, command in ((2, 0x10000), (3, 0x80000)):  # SYS_DRV, then KDB: psp_hw_start loads KDB first
    gpu.vram_write(STAGING, COMPONENTS[fw_type])
    gpu.reg_write(MP0 + psp.C2PMSG_36, (FB_BASE + STAGING) >> 20)
    gpu.reg_write(MP0 + psp.C2PMSG_35, command)
  assert "out of order" in model.psp.fault and model.psp.loaded == [2]
  gpu, model = bare_pci_gpu(psp_answers=False)
  gpu.reg_write(MP0 + psp.C2PMSG_35, 0x80000)  # a driver that doesn't wait for bit 31
  assert "while the bootloader was busy" in model.psp.fault and model.psp.loaded == []

@pytest.mark.parametrize("phys, flags", [(0, psp.TMR_VIRT_PHY_ADDR), (TMR, 0)])
def test_trusted_memory_named_inconsistently_is_refused(phys, flags):
  """psp_prep_tmr_cmd_buf gives the TMR by MC address and, with virt_phy_addr set, by its offset in video memory."""
  gpu, model = started_gpu()
  mc = FB_BASE + TMR
  with pytest.raises(psp.PSPError, match="refused to set up"):
    ring_of(gpu).submit(psp.GFX_CMD_ID_SETUP_TMR, struct.pack("<6I", mc & 0xFFFFFFFF, mc >> 32, 4 << 20, flags, phys, 0), "set up")
  assert model.psp.tmr is None

@pytest.mark.parametrize("cmd_size, fence, fault", [(512, FENCE, "of 512 bytes"), (1024, 24 << 30, "fence outside video memory")])
def test_a_frame_with_a_short_command_or_a_fence_outside_video_memory_never_completes(cmd_size, fence, fault):
  gpu, model = started_gpu()
  psp.create_ring(gpu, MP0, FB_BASE, RING)
  cmd_mc, fence_mc = FB_BASE + CMD, FB_BASE + fence
  gpu.vram_write(RING, struct.pack("<6I", cmd_mc & 0xFFFFFFFF, cmd_mc >> 32, cmd_size, fence_mc & 0xFFFFFFFF, fence_mc >> 32, 1))
  gpu.reg_write(MP0 + psp.C2PMSG_67, psp.FRAME_BYTES // 4)
  assert fault in model.psp.fault and gpu.vram_read(FENCE, 4) == bytes(4)  # nothing written back
