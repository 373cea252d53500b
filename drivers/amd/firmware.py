"""AMD's firmware files as linux-firmware ships them (amdgpu/*.bin, or .bin.xz): the common header every file starts
with, and the PSP's table of components in psp_<ip>_sos.bin (amdgpu_ucode.h: common_firmware_header,
psp_firmware_header_v2_0, psp_fw_bin_desc; amdgpu_psp.c parse_sos_bin_descriptor finds each component at
ucode_array_offset_bytes + offset_bytes). Version 2.1 tables (an auxiliary set of components, MI300's) are refused."""
from __future__ import annotations
import lzma, pathlib, struct
from ir.switches import AMD_FIRMWARE_DIR
from drivers.system import real_system

# common_firmware_header: size_bytes, header_size_bytes, header_version_major, _minor, ip_version_major, _minor,
# ucode_version, ucode_size_bytes, ucode_array_offset_bytes, crc32
COMMON_HEADER = "<IIHHHHIIII"
BIN_DESC = "<IIII"  # psp_fw_bin_desc: fw_type, fw_version, offset_bytes, size_bytes
# amdgpu_ucode.h enum psp_fw_type
SOS, SYS_DRV, KDB, TOC, SPL, RL, SOC_DRV, INTF_DRV, DBG_DRV, RAS_DRV = range(1, 11)
COMPONENT_NAMES = {SOS: "SOS", SYS_DRV: "SYS_DRV", KDB: "KDB", TOC: "TOC", SPL: "SPL", RL: "RL", SOC_DRV: "SOC_DRV",
                   INTF_DRV: "INTF_DRV", DBG_DRV: "DBG_DRV", RAS_DRV: "RAS_DRV"}

SDMA_V2_FIELDS = "<IIIIIIII"  # sdma_firmware_header_v2_0 after the common header: ucode_feature_version, ctx_ucode_size_bytes,
# ctx_jt_offset, ctx_jt_size, ctl_ucode_offset, ctl_ucode_size_bytes, ctl_jt_offset, ctl_jt_size

class FirmwareError(ValueError):
  """A firmware file that doesn't hold what its header says: the file and the offset of what is wrong."""

def file_name(prefix: str, version: tuple[int, int, int], suffix: str = "") -> str:
  """psp_13_0_0_sos.bin for ("psp", MP0 13.0.0, "_sos"), smu_13_0_0.bin, sdma_6_0_0.bin (amdgpu_ucode.c
  amdgpu_ucode_ip_version_decode names files by IP version)."""
  return f"{prefix}_{'_'.join(map(str, version))}{suffix}.bin"
def sos_file_name(mp0_version: tuple[int, int, int]) -> str: return file_name("psp", mp0_version, "_sos")

def _common_header(data: bytes, name: str, what: str, after: int = 0) -> tuple:
  """The common_firmware_header's fields, once `data` holds them and `after` more bytes (else FirmwareError)."""
  if len(data) < struct.calcsize(COMMON_HEADER) + after: raise FirmwareError(f"{name}: {len(data)} bytes, shorter than {what}")
  return struct.unpack_from(COMMON_HEADER, data)

def _checked_slice(data: bytes, start: int, length: int, what: str, name: str) -> bytes:
  if start + length > len(data): raise FirmwareError(f"{name}: {what} ({length} bytes at offset {start}) runs past the end ({len(data)} bytes)")
  return data[start:start + length]

def ucode(data: bytes, name: str) -> bytes:
  """The image of a single-image file (the SMU's smc_firmware_header_v1_0, ...): ucode_size_bytes at
  ucode_array_offset_bytes (amdgpu_ucode.c amdgpu_ucode_init_single_fw's default)."""
  *_, size, array_at, _ = _common_header(data, name, "the common header")
  return _checked_slice(data, array_at, size, "the image", name)

def sdma_threads(data: bytes, name: str) -> tuple[bytes, bytes]:
  """The context and control threads' images of an sdma_firmware_header_v2_0 file (amdgpu_ucode_init_single_fw:
  SDMA_UCODE_TH0 at ucode_array_offset_bytes, TH1 at ctl_ucode_offset)."""
  _, _, major, minor, _, _, _, _, array_at, _ = _common_header(data, name, "an SDMA v2 header", struct.calcsize(SDMA_V2_FIELDS))
  if (major, minor) != (2, 0): raise FirmwareError(f"{name}: header version {major}.{minor} at offset 8, an SDMA 6 file is 2.0")
  _, ctx_size, _, _, ctl_at, ctl_size, _, _ = struct.unpack_from(SDMA_V2_FIELDS, data, struct.calcsize(COMMON_HEADER))
  return _checked_slice(data, array_at, ctx_size, "the context thread", name), _checked_slice(data, ctl_at, ctl_size, "the control thread", name)

def read(name: str, system=real_system) -> bytes:
  """The firmware file `name` (e.g. psp_13_0_0_sos.bin) from AMD_FIRMWARE_DIR, decompressing a .xz copy."""
  folder = pathlib.Path(AMD_FIRMWARE_DIR.value)
  if system.is_file(path := str(folder / name)): return system.read_bytes(path)
  if system.is_file(packed := f"{path}.xz"): return lzma.decompress(system.read_bytes(packed))
  if system.is_file(f"{path}.zst"): raise FileNotFoundError(f"{path}.zst is zstd-compressed: unpack it (zstd -d) next to it")
  raise FileNotFoundError(f"AMD firmware {name} not found in {folder} (install linux-firmware, or point AMD_FIRMWARE_DIR at its amdgpu folder)")

def psp_components(data: bytes, name: str = "the SOS file") -> dict[int, bytes]:
  """{fw_type: bytes} of a psp_firmware_header_v2_0 file; FirmwareError names the file offset that is wrong."""
  size, _, major, minor, _, _, _, _, array_at, _ = _common_header(data, name, "a PSP v2 header", 4)
  if (major, minor) != (2, 0): raise FirmwareError(f"{name}: header version {major}.{minor} at offset 8, tg reads PSP component tables of version 2.0")
  if size > len(data): raise FirmwareError(f"{name}: the header says {size} bytes at offset 0, the file has {len(data)}")
  table_at = struct.calcsize(COMMON_HEADER)
  (count,) = struct.unpack_from("<I", data, table_at)
  first = table_at + 4
  if first + count * struct.calcsize(BIN_DESC) > len(data): raise FirmwareError(f"{name}: {count} components at offset {first} run past the end")
  out = {}
  for i in range(count):
    at = first + i * struct.calcsize(BIN_DESC)
    fw_type, _, offset, length = struct.unpack_from(BIN_DESC, data, at)
    start = array_at + offset
    if start + length > len(data): raise FirmwareError(f"{name}: component {COMPONENT_NAMES.get(fw_type, fw_type)} (descriptor at offset {at}) runs past the end")
    out[fw_type] = data[start:start + length]
  return out

GFX_V2_FIELDS = "<IIIIIII"  # gfx_firmware_header_v2_0 after the common header: ucode_feature_version, ucode_size_bytes,
# ucode_offset_bytes, data_size_bytes, data_offset_bytes, ucode_start_addr_lo, ucode_start_addr_hi

def rs64_images(data: bytes, name: str) -> tuple[bytes, bytes, int]:
  """(the ucode, its stack, the ucode's start address) of a gfx_firmware_header_v2_0 file, an RS64 engine's
  (amdgpu_ucode_init_single_fw: the ucode at ucode_array_offset_bytes, the stack at data_offset_bytes)."""
  _, _, major, minor, _, _, _, _, array_at, _ = _common_header(data, name, "a gfx v2 header", struct.calcsize(GFX_V2_FIELDS))
  if (major, minor) != (2, 0): raise FirmwareError(f"{name}: header version {major}.{minor} at offset 8, an RS64 engine's file is 2.0")
  _, ucode_size, _, data_size, data_at, start_lo, start_hi = struct.unpack_from(GFX_V2_FIELDS, data, struct.calcsize(COMMON_HEADER))
  return _checked_slice(data, array_at, ucode_size, "the ucode", name), _checked_slice(data, data_at, data_size, "the stack", name), start_hi << 32 | start_lo

# psp_gfx_if.h enum psp_gfx_fw_type of the RLC's pieces
RLC_V, RLC_G, RLC_RESTORE_LIST_GPM_MEM, RLC_RESTORE_LIST_SRM_MEM, RLC_RESTORE_LIST_SRM_CNTL = 0x07, 0x08, 0x14, 0x15, 0x16
RLC_P, RLC_IRAM, RLC_DRAM_BOOT = 0x19, 0x1A, 0x30
GLOBAL_TAP_DELAYS, SE0_TAP_DELAYS, SE1_TAP_DELAYS, SE2_TAP_DELAYS, SE3_TAP_DELAYS = 0x1B, 0x1C, 0x1D, 0x41, 0x42
IMU_I, IMU_D = 0x44, 0x45
# rlc_firmware_header_v2_1..v2_4 (amdgpu_ucode.h): (the minor versions that have it, fw type, byte offsets of its size and
# offset fields), in AMDGPU_UCODE_ID order, which psp_load_non_psp_fw loads in; amdgpu_gfx_rlc_init_microcode takes
# v2_1 and v2_2's pieces from every later minor version, v2_3's and v2_4's only from that exact one
RLC_PIECES = (((4,), GLOBAL_TAP_DELAYS, 0xCC, 0xD0), ((4,), SE0_TAP_DELAYS, 0xD4, 0xD8), ((4,), SE1_TAP_DELAYS, 0xDC, 0xE0),
              ((4,), SE2_TAP_DELAYS, 0xE4, 0xE8), ((4,), SE3_TAP_DELAYS, 0xEC, 0xF0),
              ((1, 2, 3, 4), RLC_RESTORE_LIST_SRM_CNTL, 0x74, 0x78), ((1, 2, 3, 4), RLC_RESTORE_LIST_GPM_MEM, 0x84, 0x88),
              ((1, 2, 3, 4), RLC_RESTORE_LIST_SRM_MEM, 0x94, 0x98), ((2, 3, 4), RLC_IRAM, 0x9C, 0xA0), ((2, 3, 4), RLC_DRAM_BOOT, 0xA4, 0xA8),
              ((3,), RLC_P, 0xB4, 0xB8), ((3,), RLC_V, 0xC4, 0xC8))
RLC_HEADER_END = {0: 0x68, 1: 0x9C, 2: 0xAC, 3: 0xCC, 4: 0xF4}

def rlc_images(data: bytes, name: str) -> list[tuple[int, bytes]]:
  """(psp_gfx_fw_type, image) of an rlc_firmware_header_v2_x file as a PSP load takes them (amdgpu_rlc.c
  amdgpu_gfx_rlc_init_microcode and its v2_x helpers: offsets from the file's start, pieces of size 0 left out),
  RLC_G last: the ucode at ucode_array_offset_bytes."""
  _, _, major, minor, _, _, _, size, array_at, _ = _common_header(data, name, "an RLC header")
  if major != 2 or minor not in RLC_HEADER_END: raise FirmwareError(f"{name}: header version {major}.{minor} at offset 8, tg reads RLC headers 2.0 to 2.4")
  if len(data) < RLC_HEADER_END[minor]: raise FirmwareError(f"{name}: {len(data)} bytes, shorter than its version 2.{minor} header")
  pieces = []
  for minors, fw_type, size_at, offset_at in RLC_PIECES:
    if minor not in minors: continue
    piece_size, piece_at = struct.unpack_from("<I", data, size_at)[0], struct.unpack_from("<I", data, offset_at)[0]
    if piece_size: pieces.append((fw_type, _checked_slice(data, piece_at, piece_size, f"firmware type {fw_type:#x}", name)))
  return [*pieces, (RLC_G, _checked_slice(data, array_at, size, "the RLC_G ucode", name))]

IMU_FIELDS = "<IIII"  # imu_firmware_header_v1_0 after the common header: iram size, iram offset, dram size, dram offset

def imu_images(data: bytes, name: str) -> tuple[bytes, bytes]:
  """IMU_I and IMU_D of an imu_firmware_header_v1_0 file: the IRAM image at ucode_array_offset_bytes, the DRAM one
  right after it (amdgpu_ucode_init_single_fw; the header's own offset fields are not used)."""
  _, _, major, minor, _, _, _, _, array_at, _ = _common_header(data, name, "an IMU header", struct.calcsize(IMU_FIELDS))
  if major != 1: raise FirmwareError(f"{name}: header version {major}.{minor} at offset 8, an IMU file is 1.x")
  iram, _, dram, _ = struct.unpack_from(IMU_FIELDS, data, struct.calcsize(COMMON_HEADER))
  return _checked_slice(data, array_at, iram, "the IRAM image", name), _checked_slice(data, array_at + iram, dram, "the DRAM image", name)
