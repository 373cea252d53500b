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

def files() -> dict[str, bytes]:
  """File name -> bytes, as in linux-firmware's amdgpu folder for a Navi31."""
  context, control = SDMA_THREADS
  sdma_fields = struct.pack("<IIIIIIII", 1, len(context), 0, 0, HEADER_BYTES + len(context), len(control), 0, 0)
  mec_fields = struct.pack("<IIIIIII", 1, len(MEC_IMAGE), HEADER_BYTES, len(MEC_STACK), HEADER_BYTES + len(MEC_IMAGE), MEC_START & 0xFFFFFFFF, MEC_START >> 32)
  return {"psp_13_0_0_sos.bin": sos_file(), "smu_13_0_0.bin": _file((1, 0), (13, 0), b"", SMU_IMAGE, len(SMU_IMAGE)),
          "sdma_6_0_0.bin": _file((2, 0), (6, 0), sdma_fields, context + control, len(context)),
          "gc_11_0_0_mec.bin": _file((2, 0), (11, 0), mec_fields, MEC_IMAGE + MEC_STACK, len(MEC_IMAGE))}

class FirmwareFolder(DeviceModel):
  """The files above as the folder `path`."""
  def __init__(self, path: str):
    self.path, self.files = pathlib.PurePath(path), files()
  def read_bytes(self, path: str) -> bytes:
    p = pathlib.PurePath(path)
    if p.parent != self.path or p.name not in self.files: raise OSError(errno.ENOENT, f"{path}: no such file in the model's firmware folder")
    return self.files[p.name]
