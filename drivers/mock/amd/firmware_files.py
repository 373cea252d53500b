"""The model's own linux-firmware files for its Navi31 (DEV=MOCKPCI+AMD reads them where AMD_FIRMWARE_DIR points):
the layouts amdgpu reads (amdgpu_ucode.h common_firmware_header, psp_firmware_header_v2_0 with psp_fw_bin_desc,
sdma_firmware_header_v2_0, gfx_firmware_header_v2_0), holding the model's placeholder images. The PSP model accepts
exactly these bytes, as a real PSP accepts only AMD's signed images."""
from __future__ import annotations
import errno, pathlib, struct
from drivers.mock import DeviceModel

COMMON = "<IIHHHHIIII"  # size, header size, header version major/minor, IP version major/minor, ucode version, ucode size, array offset, crc
HEADER_BYTES = 0x100
# amdgpu_ucode.h enum psp_fw_type: the SOS file's components
SOS_COMPONENTS = {3: b"model key database " * 4, 2: b"model system driver " * 8, 7: b"model soc driver " * 2, 1: b"model secure os " * 16}
SMU_IMAGE = b"model smu firmware " * 8
SDMA_THREADS = (b"model sdma context thread " * 4, b"model sdma control thread " * 3)
MEC_IMAGE, MEC_STACK = b"model rs64 mec ucode " * 8, b"model rs64 mec stack " * 2
MEC_START = 0x4000_0000_0010  # the ucode's start address (ucode_start_addr_hi << 32 | _lo), as gfx_v11_0_config_gfx_rs64 reads it
PFP_IMAGE, PFP_STACK, ME_IMAGE, ME_STACK = b"model rs64 pfp ucode " * 6, b"model rs64 pfp stack " * 2, b"model rs64 me ucode " * 6, b"model rs64 me stack " * 2
IMU_IRAM, IMU_DRAM = b"model imu iram " * 5, b"model imu dram " * 3
# the RLC file's pieces as a version 2.2 header has them: psp_gfx_fw_type -> image (RLC_G is the file's ucode)
RLC_PIECES = {0x16: b"model rlc srm cntl " * 2, 0x14: b"model rlc gpm list " * 2, 0x15: b"model rlc srm list " * 2,
              0x1A: b"model rlc iram " * 3, 0x30: b"model rlc dram " * 3}
RLC_G = b"model rlc_g ucode " * 8

def _file(version: tuple[int, int], ip: tuple[int, int], fields: bytes, body: bytes, image_bytes: int) -> bytes:
  return (struct.pack(COMMON, HEADER_BYTES + len(body), HEADER_BYTES, *version, *ip, 1, image_bytes, HEADER_BYTES, 0) + fields).ljust(HEADER_BYTES, b"\0") + body

def sos_file() -> bytes:
  descriptors, body = b"", b""
  for fw_type, blob in SOS_COMPONENTS.items():
    descriptors += struct.pack("<IIII", fw_type, 1, len(body), len(blob))
    body += blob
  fields = struct.pack("<I", len(SOS_COMPONENTS)) + descriptors
  assert struct.calcsize(COMMON) + len(fields) <= HEADER_BYTES
  return _file((2, 0), (13, 0), fields, body, len(body))

def rs64_file(image: bytes, stack: bytes, start: int) -> bytes:
  """A gfx_firmware_header_v2_0 file: the ucode, then its stack."""
  fields = struct.pack("<IIIIIII", 1, len(image), HEADER_BYTES, len(stack), HEADER_BYTES + len(image), start & 0xFFFFFFFF, start >> 32)
  return _file((2, 0), (11, 0), fields, image + stack, len(image))

def rlc_file() -> bytes:
  """An rlc_firmware_header_v2_2 file: RLC_G's ucode, then the restore lists and the IRAM and DRAM images, each found by
  its size and offset fields (the v2_0 fields the driver doesn't use are 0)."""
  body, at = RLC_G, {}
  for fw_type, piece in RLC_PIECES.items():
    at[fw_type] = HEADER_BYTES + len(body)
    body += piece
  fields = bytearray(0xAC - struct.calcsize(COMMON))
  for fw_type, size_at in ((0x16, 0x74), (0x14, 0x84), (0x15, 0x94), (0x1A, 0x9C), (0x30, 0xA4)):
    struct.pack_into("<II", fields, size_at - struct.calcsize(COMMON), len(RLC_PIECES[fw_type]), at[fw_type])
  return _file((2, 2), (11, 0), bytes(fields), body, len(RLC_G))

def files() -> dict[str, bytes]:
  """File name -> bytes, as in linux-firmware's amdgpu folder for a Navi31."""
  context, control = SDMA_THREADS
  sdma_fields = struct.pack("<IIIIIIII", 1, len(context), 0, 0, HEADER_BYTES + len(context), len(control), 0, 0)
  imu_fields = struct.pack("<IIII", len(IMU_IRAM), 0, len(IMU_DRAM), 0)  # imu_firmware_header_v1_0; amdgpu doesn't use the offsets
  return {"psp_13_0_0_sos.bin": sos_file(), "smu_13_0_0.bin": _file((1, 0), (13, 0), b"", SMU_IMAGE, len(SMU_IMAGE)),
          "sdma_6_0_0.bin": _file((2, 0), (6, 0), sdma_fields, context + control, len(context)),
          "gc_11_0_0_pfp.bin": rs64_file(PFP_IMAGE, PFP_STACK, 0x4000_0000_0000), "gc_11_0_0_me.bin": rs64_file(ME_IMAGE, ME_STACK, 0x4000_0000_0000),
          "gc_11_0_0_mec.bin": rs64_file(MEC_IMAGE, MEC_STACK, MEC_START),
          "gc_11_0_0_imu.bin": _file((1, 0), (11, 0), imu_fields, IMU_IRAM + IMU_DRAM, len(IMU_IRAM)),
          "gc_11_0_0_rlc.bin": rlc_file()}

def gfx_images() -> dict[int, bytes]:
  """psp_gfx_fw_type -> image of everything of GC's the PSP must have loaded before AUTOLOAD_RLC boots the RLC."""
  return {0x57: PFP_IMAGE, 0x58: ME_IMAGE, 0x59: MEC_IMAGE, 0x5A: PFP_STACK, 0x5B: PFP_STACK, 0x5C: ME_STACK, 0x5D: ME_STACK,
          **{0x5E + pipe: MEC_STACK for pipe in range(4)}, 0x44: IMU_IRAM, 0x45: IMU_DRAM, **RLC_PIECES, 0x08: RLC_G}

class FirmwareFolder(DeviceModel):
  """The files above as the folder `path`."""
  def __init__(self, path: str):
    self.path, self.files = pathlib.PurePath(path), files()
  def read_bytes(self, path: str) -> bytes:
    p = pathlib.PurePath(path)
    if p.parent != self.path or p.name not in self.files: raise OSError(errno.ENOENT, f"{path}: no such file in the model's firmware folder")
    return self.files[p.name]
