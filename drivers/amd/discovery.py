"""AMD's IP discovery binary, which the GPU's boot firmware leaves 64 KiB below the top of video memory: which IP
blocks the GPU has (GC, SDMA, MP0/PSP, MP1/SMU, NBIO, ...), their versions and register segment bases. Layouts and
checks as include/discovery.h and amdgpu_discovery.c (amdgpu_discovery_init, amdgpu_discovery_verify_checksum)."""
from __future__ import annotations
import struct
from dataclasses import dataclass

BINARY_SIGNATURE, DISCOVERY_TABLE_SIGNATURE = 0x28211407, 0x53445049
BINARY_HEADER = "<IHHHH"          # signature, version major, minor, checksum, size; then table_info[6] (offset, checksum, size, padding)
TABLE_INFO = "<HHHH"
IP_DISCOVERY_HEADER = "<IHHIH"    # signature, version, size, id, num_dies; then die_info[16] (die_id, die_offset)
IP_ENTRY = "<HBBBBBB"             # hw_id, instance, num_base_address, major, minor, revision, harvest / sub_revision:variant
DISCOVERY_TMR_OFFSET, DISCOVERY_TMR_SIZE = 64 << 10, 10 << 10  # amdgpu_discovery.h
# soc15_hw_ip.h: the hardware ids tg names
HW_NAMES = {1: "MP1", 4: "SMUIO", 11: "GC", 12: "VCN", 34: "MMHUB", 35: "ATHUB", 40: "OSSSYS", 41: "HDP", 42: "SDMA0", 43: "SDMA1",
            46: "DF", 108: "NBIF", 150: "UMC", 255: "MP0"}

class DiscoveryError(ValueError):
  """The binary isn't a valid IP discovery table: what check failed, with the values found."""

@dataclass(frozen=True)
class IP:
  hw_id: int
  instance: int
  version: tuple[int, int, int]
  bases: tuple[int, ...]   # register segment bases (dword addresses)
  die: int = 0
  @property
  def name(self) -> str: return HW_NAMES.get(self.hw_id, f"hw_id {self.hw_id}")

def _checked_sum(data: bytes, want: int, what: str) -> None:
  if (got := sum(data) & 0xFFFF) != want: raise DiscoveryError(f"{what} checksum is {got:#06x}, the header says {want:#06x}")

def parse(binary: bytes) -> list[IP]:
  """Every IP of every die; DiscoveryError names the first check that fails."""
  if len(binary) < struct.calcsize(BINARY_HEADER): raise DiscoveryError(f"{len(binary)} bytes: shorter than the binary header")
  sig, major, _, checksum, size = struct.unpack_from(BINARY_HEADER, binary)
  if sig != BINARY_SIGNATURE: raise DiscoveryError(f"binary signature {sig:#x} (want {BINARY_SIGNATURE:#x}): no discovery table here")
  if size > len(binary): raise DiscoveryError(f"the binary says it is {size} bytes, {len(binary)} were read")
  _checked_sum(binary[10:size], checksum, "binary")
  table_at, table_checksum, _, _ = struct.unpack_from(TABLE_INFO, binary, struct.calcsize(BINARY_HEADER) + (4 if major >= 2 else 0))
  tsig, version, tsize, _, num_dies = struct.unpack_from(IP_DISCOVERY_HEADER, binary, table_at)
  if tsig != DISCOVERY_TABLE_SIGNATURE: raise DiscoveryError(f"IP discovery table signature {tsig:#x} at {table_at:#x}")
  _checked_sum(binary[table_at:table_at + tsize], table_checksum, "IP discovery table")
  wide = version >= 4 and binary[table_at + struct.calcsize(IP_DISCOVERY_HEADER) + 64] & 1  # v4: 64-bit base addresses
  ips = []
  for d in range(num_dies):
    _, die_at = struct.unpack_from("<HH", binary, table_at + struct.calcsize(IP_DISCOVERY_HEADER) + 4 * d)
    die_id, num_ips = struct.unpack_from("<HH", binary, die_at)
    at = die_at + 4
    for _ in range(num_ips):
      hw_id, instance, nbases, vmajor, vminor, revision, _ = struct.unpack_from(IP_ENTRY, binary, at)
      at += struct.calcsize(IP_ENTRY)
      bases = struct.unpack_from(f"<{nbases}{'Q' if wide else 'I'}", binary, at)
      at += nbases * (8 if wide else 4)
      ips.append(IP(hw_id, instance, (vmajor, vminor, revision), bases, die_id))
  return ips
