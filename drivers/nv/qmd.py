"""The compute launch descriptor (QMD, "queue meta data") of NVIDIA compute classes: field tables per QMD version and
an encoder/decoder over them.

A QMD is a little-endian bit string (dword i holds bits 32i..32i+31); a field is named by absolute bit positions,
as in NVIDIA's open-gpu-doc headers classes/compute/cl{c6c0,c7c0,c9c0,cbc0,cdc0,cec0}qmd.h, from which the
positions below were read.

Versions: V03_00 (AMPERE_COMPUTE_A/B 0xc6c0/0xc7c0, ADA_COMPUTE_A 0xc9c0; 256 bytes), V04_00 (HOPPER_COMPUTE_A
0xcbc0; 384 bytes), V05_00 (BLACKWELL_COMPUTE_A/B 0xcdc0/0xcec0; 384 bytes).

Naming: lower-case hardware names, the same on every version, with these renamings:
  group_id = QMD_GROUP_ID; qmd_minor_version = QMD_VERSION on V03;
  grid_width/height/depth = CTA_RASTER_WIDTH/HEIGHT/DEPTH on V03, GRID_* on V04+;
  block_dim_x/y/z = CTA_THREAD_DIMENSION0/1/2; register_count = REGISTER_COUNT_V on V03;
  cb{i}_* = CONSTANT_BUFFER_*(i) for banks 0..7;
  release{i}_* = RELEASE{i}_* on V03, RELEASE_*(i) and RELEASE_SEMAPHORE{i}_ADDR/PAYLOAD_* on V04+;
  dependent_qmd{i}_* = DEPENDENT_QMD{i}_* / DEPENDENT_QMD_*(i);
  program_prefetch_address = PROGRAM_PREFETCH_ADDR_*_SHIFTED.
A field is absent where the version lacks it (qmd_type before V04, sm_global_caching_enable after V03,
dependent_qmd1_pointer on V03).

Values are whole and in bytes. Where the hardware splits a value into LOWER/UPPER fields, it is one field here
whose bit ranges are listed low part first (program_address=va sets both). Where the hardware stores a value
shifted (names ending SHIFTEDn, and the QMD pointers), the table holds the shift: callers pass and decode returns
the byte value, and a value with any of the shifted-out bits set raises (round addresses down, sizes up yourself):
  program_address           >>4 on V05, unshifted before
  program_prefetch_address  >>8
  shared_memory_size        >>7 on V05, unshifted before
  shader_local_memory_low/high_size  >>4 on V05, unshifted before (bytes per thread)
  cb{i}_address             >>6 on V04/V05, unshifted on V03
  cb{i}_size                >>4
  dependent_qmd{i}_pointer  >>8 (a QMD's address, so QMDs are 256-byte aligned)
program_prefetch_size counts 256-byte units and the *_sm_config_shared_mem_size fields hold the SM's shared-memory
configuration code, not bytes; both are stored as given. shared_allocation_enable (SHARED_ALLOCATION_ENABLE, V03 bit 663,
V04 626, V05 351) is named for completeness: the headers give it no meaning beyond TRUE/FALSE and NVK's Hopper and
Blackwell QMDs leave it 0, as tg does.
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import NamedTuple

class Field(NamedTuple):
  parts: tuple[tuple[int, int], ...]  # (high bit, low bit) ranges, least significant part first
  shift: int = 0                      # the hardware stores value >> shift

  @property
  def width(self) -> int: return sum(hi - lo + 1 for hi, lo in self.parts)

@dataclass(frozen=True)
class QmdLayout:
  version: str
  size: int     # bytes
  major: int    # the values for qmd_major_version / qmd_minor_version
  minor: int
  fields: dict[str, Field]

# values of a few enumerated fields
QMD_TYPE_GRID_CTA = 2
CWD_MEMBAR_L1_SYSMEMBAR = 1
API_VISIBLE_CALL_LIMIT_NO_CHECK = 1
DEPENDENT_QMD_SCHEDULE = 1
RELEASE_FOUR_WORDS, RELEASE_ONE_WORD, RELEASE_TWO_WORDS = 0, 1, 2

def _f(hi: int, lo: int | None = None, shift: int = 0) -> Field:
  """One bit range; a single bit when lo is omitted."""
  return Field(((hi, hi if lo is None else lo),), shift)

def _split(lower: tuple[int, int], upper: tuple[int, int], shift: int = 0) -> Field: return Field((lower, upper), shift)

def _invalidates(bit: int) -> dict[str, Field]:
  """The six INVALIDATE_*_CACHE bits, consecutive from `bit` on every version."""
  names = ("texture_header", "texture_sampler", "texture_data", "shader_data", "instruction", "shader_constant")
  return {f"invalidate_{n}_cache": _f(bit + k) for k, n in enumerate(names)}

def _release_flags(i: int, bit: int) -> dict[str, Field]:
  """V04+ keep release i's flags in a 16-bit group starting at `bit`."""
  return {f"release{i}_enable": _f(bit), f"release{i}_structure_size": _f(bit + 2, bit + 1),
          f"release{i}_membar_type": _f(bit + 3), f"release{i}_reduction_enable": _f(bit + 4),
          f"release{i}_reduction_op": _f(bit + 7, bit + 5), f"release{i}_reduction_format": _f(bit + 9, bit + 8),
          f"release{i}_payload64b": _f(bit + 12)}

def _release_semaphore(i: int, bit: int) -> dict[str, Field]:
  """V04+ keep release i's address (57 bits) and payload (64 bits) in a 128-bit group starting at `bit`."""
  return {f"release{i}_address": _split((bit + 31, bit), (bit + 56, bit + 32)),
          f"release{i}_payload": _split((bit + 95, bit + 64), (bit + 127, bit + 96))}

def _dependent_qmds(flags_at: int, stride: int, pointer_at: int) -> dict[str, Field]:
  """V04+ chaining: dependent QMD i's 5 flag bits every `stride` bits from `flags_at`, its pointer 32 bits apart from `pointer_at`."""
  t = {}
  for i in range(2):
    b = flags_at + stride * i
    t |= {f"dependent_qmd{i}_enable": _f(b), f"dependent_qmd{i}_action": _f(b + 3, b + 1),
          f"dependent_qmd{i}_prefetch": _f(b + 4), f"dependent_qmd{i}_pointer": _f(pointer_at + 31 + 32 * i, pointer_at + 32 * i, 8)}
  return t

def _constant_banks(flags_at: int, address_at: int) -> dict[str, Field]:
  """V04+ constant buffers 0-7: valid/invalidate bits 4 apart from `flags_at`, a 64-bit address+size group each from `address_at`."""
  t = {}
  for i in range(8):
    b = address_at + 64 * i
    t |= {f"cb{i}_valid": _f(flags_at + 4 * i), f"cb{i}_invalidate": _f(flags_at + 3 + 4 * i),
          f"cb{i}_address": _split((b + 31, b), (b + 50, b + 32), 6), f"cb{i}_size": _f(b + 63, b + 51, 4)}
  return t

def _v03() -> dict[str, Field]:
  t = {"group_id": _f(133, 128), "sm_global_caching_enable": _f(134), **_invalidates(186),
       "cwd_membar_type": _f(369, 368), "api_visible_call_limit": _f(378), "sampler_index": _f(382),
       "grid_width": _f(415, 384), "grid_height": _f(431, 416), "grid_depth": _f(463, 448),
       "dependent_qmd0_pointer": _f(511, 480, 8),
       "shared_memory_size": _f(561, 544), "min_sm_config_shared_mem_size": _f(567, 562),
       "max_sm_config_shared_mem_size": _f(574, 569), "target_sm_config_shared_mem_size": _f(662, 657),
       "qmd_minor_version": _f(579, 576), "qmd_major_version": _f(583, 580), "shared_allocation_enable": _f(663),
       "block_dim_x": _f(607, 592), "block_dim_y": _f(623, 608), "block_dim_z": _f(639, 624),
       "register_count": _f(656, 648), "barrier_count": _f(767, 763),
       "shader_local_memory_low_size": _f(759, 736), "shader_local_memory_high_size": _f(1623, 1600),
       "program_address": _split((1567, 1536), (1584, 1568)),
       # the prefetch address's parts are far apart on V03
       "program_prefetch_address": _split((287, 256), (1640, 1632), 8), "program_prefetch_size": _f(1649, 1641),
       "sass_version": _f(1663, 1656)}
  for i in range(2):  # chaining flags, 5 bits per dependent QMD
    b = 512 + 5 * i
    t |= {f"dependent_qmd{i}_enable": _f(b), f"dependent_qmd{i}_action": _f(b + 3, b + 1), f"dependent_qmd{i}_prefetch": _f(b + 4)}
  for i, b in enumerate((768, 896, 1664)):  # each release is one 128-bit group: address, flags, payload
    t |= {f"release{i}_address": _split((b + 31, b), (b + 39, b + 32)), f"release{i}_membar_type": _f(b + 51),
          f"release{i}_reduction_op": _f(b + 54, b + 52), f"release{i}_enable": _f(b + 55),
          f"release{i}_reduction_format": _f(b + 57, b + 56), f"release{i}_reduction_enable": _f(b + 58),
          f"release{i}_payload64b": _f(b + 61), f"release{i}_structure_size": _f(b + 63, b + 62),
          f"release{i}_payload": _split((b + 95, b + 64), (b + 127, b + 96))}
  for i in range(8):
    b = 1024 + 64 * i
    t |= {f"cb{i}_valid": _f(640 + i), f"cb{i}_address": _split((b + 31, b), (b + 48, b + 32)),
          f"cb{i}_invalidate": _f(b + 50), f"cb{i}_size": _f(b + 63, b + 51, 4)}
  return t

def _v04() -> dict[str, Field]:
  t = {"group_id": _f(21, 16), "qmd_type": _f(25, 23),
       "shader_local_memory_low_size": _f(535, 512), "sass_version": _f(543, 536),
       "shader_local_memory_high_size": _f(567, 544), "api_visible_call_limit": _f(568), "sampler_index": _f(569),
       "qmd_minor_version": _f(579, 576), "qmd_major_version": _f(583, 580),
       "shared_memory_size": _f(601, 584), **_invalidates(602), "min_sm_config_shared_mem_size": _f(613, 608),
       "max_sm_config_shared_mem_size": _f(619, 614), "target_sm_config_shared_mem_size": _f(625, 620),
       "shared_allocation_enable": _f(626), "grid_width": _f(1055, 1024), "grid_height": _f(1071, 1056), "grid_depth": _f(1103, 1088),
       "cwd_membar_type": _f(1137, 1136),
       "block_dim_x": _f(1167, 1152), "block_dim_y": _f(1183, 1168), "block_dim_z": _f(1199, 1184),
       "register_count": _f(1208, 1200), "barrier_count": _f(1215, 1211),
       "program_address": _split((1247, 1216), (1272, 1248)),
       "program_prefetch_address": _split((1375, 1344), (1392, 1376), 8), "program_prefetch_size": _f(1401, 1393)}
  for i in range(3): t |= _release_flags(i, 320 + 16 * i) | _release_semaphore(i, 640 + 128 * i)
  return t | _dependent_qmds(368, 5, 448) | _constant_banks(416, 1536)

def _v05() -> dict[str, Field]:
  t = {"group_id": _f(149, 144), "qmd_type": _f(153, 151),
       "sass_version": _f(455, 448), "api_visible_call_limit": _f(456), "sampler_index": _f(457),
       "qmd_minor_version": _f(467, 464), "qmd_major_version": _f(471, 468), **_invalidates(472), "shared_allocation_enable": _f(351),
       "cwd_membar_type": _f(625, 624),
       "program_address": _split((1055, 1024), (1076, 1056), 4), "program_prefetch_size": _f(1085, 1077),
       "block_dim_x": _f(1103, 1088), "block_dim_y": _f(1119, 1104), "block_dim_z": _f(1127, 1120),
       "register_count": _f(1136, 1128), "barrier_count": _f(1141, 1137),
       "shared_memory_size": _f(1162, 1152, 7), "min_sm_config_shared_mem_size": _f(1168, 1163),
       "max_sm_config_shared_mem_size": _f(1174, 1169), "target_sm_config_shared_mem_size": _f(1180, 1175),
       "shader_local_memory_low_size": _f(1199, 1184, 4), "shader_local_memory_high_size": _f(1215, 1200, 4),
       "grid_width": _f(1279, 1248), "grid_height": _f(1295, 1280), "grid_depth": _f(1327, 1312),
       "program_prefetch_address": _split((1919, 1888), (1936, 1920), 8)}
  for i, b in enumerate((480, 768, 896)): t |= _release_flags(i, 288 + 16 * i) | _release_semaphore(i, b)
  return t | _dependent_qmds(336, 8, 384) | _constant_banks(1856, 1344)

QMD_LAYOUTS: dict[str, QmdLayout] = {
  "V03_00": QmdLayout("V03_00", 256, 3, 0, _v03()),
  "V04_00": QmdLayout("V04_00", 384, 4, 0, _v04()),
  "V05_00": QmdLayout("V05_00", 384, 5, 0, _v05()),
}

_VERSION_OF_CLASS = {0xc6c0: "V03_00", 0xc7c0: "V03_00", 0xc9c0: "V03_00", 0xcbc0: "V04_00", 0xcdc0: "V05_00", 0xcec0: "V05_00"}

def qmd_version_for_class(compute_class: int) -> str:
  """The QMD version a compute class launches with (a key of QMD_LAYOUTS)."""
  if (version := _VERSION_OF_CLASS.get(compute_class)) is None:
    raise ValueError(f"no QMD layout for compute class {compute_class:#x} (known: {', '.join(hex(c) for c in _VERSION_OF_CLASS)})")
  return version

def _stored(layout: QmdLayout, name: str, value: int) -> tuple[Field, int]:
  """The field `name` and the value its bits hold, or a ValueError saying why `value` can't go there."""
  if (field := layout.fields.get(name)) is None: raise ValueError(f"QMD {layout.version} has no field {name!r}")
  if value < 0: raise ValueError(f"QMD {layout.version} field {name!r}: {value} is negative")
  if value & ((1 << field.shift) - 1):
    raise ValueError(f"QMD {layout.version} field {name!r} stores value >> {field.shift}: {value:#x} is not a multiple of {1 << field.shift:#x}")
  if (stored := value >> field.shift) >> field.width:
    shifted = f" after >> {field.shift}" if field.shift else ""
    raise ValueError(f"QMD {layout.version} field {name!r} is {field.width} bits wide{shifted}: {value:#x} does not fit")
  return field, stored

def set_fields(layout: QmdLayout, buf, **fields: int) -> None:
  """Sets fields of the descriptor in `buf` (a writable bytes-like object, e.g. a bytearray or a byte memoryview of
  mapped memory), leaving every other bit alone; all values are checked before any is written."""
  if len(buf) < layout.size: raise ValueError(f"QMD {layout.version} needs {layout.size} bytes, the buffer has {len(buf)}")
  for field, stored in [_stored(layout, name, value) for name, value in fields.items()]:
    for hi, lo in field.parts:
      start, end = lo // 8, hi // 8 + 1
      mask = ((1 << (hi - lo + 1)) - 1) << (lo - 8 * start)
      word = int.from_bytes(buf[start:end], "little") & ~mask
      buf[start:end] = (word | ((stored << (lo - 8 * start)) & mask)).to_bytes(end - start, "little")
      stored >>= hi - lo + 1

def encode(layout: QmdLayout, **fields: int) -> bytearray:
  """A zeroed descriptor of layout.size bytes with `fields` set."""
  buf = bytearray(layout.size)
  set_fields(layout, buf, **fields)
  return buf

def decode(layout: QmdLayout, data) -> dict[str, int]:
  """Every field's value (in bytes where the hardware stores it shifted) from a descriptor."""
  if len(data) < layout.size: raise ValueError(f"QMD {layout.version} needs {layout.size} bytes, got {len(data)}")
  bits = int.from_bytes(bytes(data[:layout.size]), "little")
  out = {}
  for name, field in layout.fields.items():
    value, at = 0, 0
    for hi, lo in field.parts:
      value |= ((bits >> lo) & ((1 << (hi - lo + 1)) - 1)) << at
      at += hi - lo + 1
    out[name] = value << field.shift
  return out
