"""The NV model's own reading of NVIDIA's published class formats: the compute launch descriptor (QMD) of each
version, the methods and method fields of the host (GPFIFO channel), compute and copy classes the model runs, the
push-buffer method header, the GPFIFO entry and the USERD words. The GPU model (gpu.py) decodes what the driver
writes with these tables only; tests/drivers/mock/test_nv_class_tables.py checks the driver's own tables
(drivers/nv/qmd.py, drivers/nv/pushbuf.py) against them bit for bit.

Facts transcribed by hand from NVIDIA's headers, cited per table: open-gpu-doc classes/compute/cl{c6c0,c7c0,c9c0,cbc0,
cdc0,cec0}qmd.h and cl{c6c0,c7c0,c9c0,cbc0,cdc0,cec0}.h, classes/host/clc56f.h, classes/dma-copy/cl{c6b5,c7b5,c8b5,
c9b5,cab5}.h, manuals/ampere/ga100/dev_pbdma.ref.txt and dev_ram.ref.txt; open-gpu-kernel-modules
src/common/sdk/nvidia/inc/class/cl{c86f,c96f,ca6f}.h for the Hopper and Blackwell host classes, which open-gpu-doc lacks.

A bit range is Bits(high, low), as the headers write MW(high:low) and method fields high:low. The QMD tables keep the
headers' field names (less the NVxxxx_QMDVxx_xx_ prefix; an indexed field as NAME(i)); QmdFormat.decode joins them into
whole values under the names drivers/nv/qmd.py uses, so that the cross-check can compare the two name by name."""
from __future__ import annotations
import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator, NamedTuple

class Bits(NamedTuple):
  hi: int
  lo: int
  @property
  def width(self) -> int: return self.hi - self.lo + 1
  def get(self, word: int) -> int: return word >> self.lo & ((1 << self.width) - 1)
  def put(self, value: int) -> int:
    if not 0 <= value < 1 << self.width: raise ValueError(f"{value:#x} does not fit bits {self.hi}:{self.lo}")
    return value << self.lo

def _table(*rows: tuple) -> dict[str, Bits]:
  """Rows (NAME, high, low) or (NAME, high, low, count, stride) for NAME(0)..NAME(count-1), `stride` bits apart."""
  out: dict[str, Bits] = {}
  for name, hi, lo, *rep in rows:
    if rep: out |= {f"{name}({i})": Bits(hi + rep[1] * i, lo + rep[1] * i) for i in range(rep[0])}
    else: out[name] = Bits(hi, lo)
  return out

# ---------------- QMD

def _invalidates(first: int) -> list[tuple]:
  """The six INVALIDATE_*_CACHE bits, in this order from bit `first` on every version."""
  kinds = ("TEXTURE_HEADER", "TEXTURE_SAMPLER", "TEXTURE_DATA", "SHADER_DATA", "INSTRUCTION", "SHADER_CONSTANT")
  return [(f"INVALIDATE_{k}_CACHE", first + n, first + n) for n, k in enumerate(kinds)]

def _v03_release(i: int, base: int) -> list[tuple]:
  """RELEASE{i}_*: clc6c0qmd.h lists RELEASE0 at bits 768..895; RELEASE1 (896) and RELEASE2 (1664) repeat its layout."""
  d = base - 768
  rows = [("ADDRESS_LOWER", 799, 768), ("ADDRESS_UPPER", 807, 800), ("MEMBAR_TYPE", 819, 819), ("REDUCTION_OP", 822, 820),
          ("ENABLE", 823, 823), ("REDUCTION_FORMAT", 825, 824), ("REDUCTION_ENABLE", 826, 826), ("NON_BLOCKING_INTR_TYPE", 828, 827),
          ("PAYLOAD64B", 829, 829), ("STRUCTURE_SIZE", 831, 830), ("PAYLOAD_LOWER", 863, 832), ("PAYLOAD_UPPER", 895, 864)]
  return [(f"RELEASE{i}_{name}", hi + d, lo + d) for name, hi, lo in rows]

def _semaphores(*bases: int) -> list[tuple]:
  """RELEASE_SEMAPHORE{i}_ADDR_LOWER/UPPER (32 + 25 bits) and PAYLOAD_LOWER/UPPER, a 128-bit group from each base (V04+)."""
  return [row for i, b in enumerate(bases) for row in ((f"RELEASE_SEMAPHORE{i}_ADDR_LOWER", b + 31, b), (f"RELEASE_SEMAPHORE{i}_ADDR_UPPER", b + 56, b + 32),
                                                        (f"RELEASE_SEMAPHORE{i}_PAYLOAD_LOWER", b + 95, b + 64), (f"RELEASE_SEMAPHORE{i}_PAYLOAD_UPPER", b + 127, b + 96))]

# open-gpu-doc classes/compute/clc6c0qmd.h NVC6C0_QMDV03_00_* (clc7c0qmd.h and clc9c0qmd.h have every field below at the
# same bits; c7c0 renames RELEASE*_NON_BLOCKING_INTR_TYPE to RELEASE*_TRAP_TYPE)
QMD_V03_00 = _table(
  ("QMD_GROUP_ID", 133, 128), ("SM_GLOBAL_CACHING_ENABLE", 134, 134), *_invalidates(186),
  ("PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED", 287, 256), ("CWD_MEMBAR_TYPE", 369, 368), ("API_VISIBLE_CALL_LIMIT", 378, 378),
  ("SAMPLER_INDEX", 382, 382), ("CTA_RASTER_WIDTH", 415, 384), ("CTA_RASTER_HEIGHT", 431, 416), ("CTA_RASTER_DEPTH", 463, 448),
  ("DEPENDENT_QMD0_POINTER", 511, 480), ("DEPENDENT_QMD0_ENABLE", 512, 512), ("DEPENDENT_QMD0_ACTION", 515, 513),
  ("DEPENDENT_QMD0_PREFETCH", 516, 516), ("DEPENDENT_QMD1_ENABLE", 517, 517), ("DEPENDENT_QMD1_ACTION", 520, 518),
  ("DEPENDENT_QMD1_PREFETCH", 521, 521), ("SHARED_MEMORY_SIZE", 561, 544), ("MIN_SM_CONFIG_SHARED_MEM_SIZE", 567, 562),
  ("MAX_SM_CONFIG_SHARED_MEM_SIZE", 574, 569), ("QMD_VERSION", 579, 576), ("QMD_MAJOR_VERSION", 583, 580),
  ("CTA_THREAD_DIMENSION0", 607, 592), ("CTA_THREAD_DIMENSION1", 623, 608), ("CTA_THREAD_DIMENSION2", 639, 624),
  ("CONSTANT_BUFFER_VALID", 640, 640, 8, 1), ("REGISTER_COUNT_V", 656, 648), ("TARGET_SM_CONFIG_SHARED_MEM_SIZE", 662, 657),
  ("SHARED_ALLOCATION_ENABLE", 663, 663), ("SHADER_LOCAL_MEMORY_LOW_SIZE", 759, 736), ("BARRIER_COUNT", 767, 763),
  *_v03_release(0, 768), *_v03_release(1, 896),
  ("CONSTANT_BUFFER_ADDR_LOWER", 1055, 1024, 8, 64), ("CONSTANT_BUFFER_ADDR_UPPER", 1072, 1056, 8, 64),
  ("CONSTANT_BUFFER_PREFETCH_POST", 1073, 1073, 8, 64), ("CONSTANT_BUFFER_INVALIDATE", 1074, 1074, 8, 64),
  ("CONSTANT_BUFFER_SIZE_SHIFTED4", 1087, 1075, 8, 64),
  ("PROGRAM_ADDRESS_LOWER", 1567, 1536), ("PROGRAM_ADDRESS_UPPER", 1584, 1568), ("SHADER_LOCAL_MEMORY_HIGH_SIZE", 1623, 1600),
  ("PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED", 1640, 1632), ("PROGRAM_PREFETCH_SIZE", 1649, 1641), ("PROGRAM_PREFETCH_TYPE", 1651, 1650),
  ("SASS_VERSION", 1663, 1656), *_v03_release(2, 1664))

# open-gpu-doc classes/compute/clcbc0qmd.h NVCBC0_QMDV04_00_* (the same header also defines a V03_00, not modelled)
QMD_V04_00 = _table(
  ("QMD_GROUP_ID", 21, 16), ("QMD_TYPE", 25, 23),
  ("RELEASE_ENABLE", 320, 320, 3, 16), ("RELEASE_STRUCTURE_SIZE", 322, 321, 3, 16), ("RELEASE_MEMBAR_TYPE", 323, 323, 3, 16),
  ("RELEASE_REDUCTION_ENABLE", 324, 324, 3, 16), ("RELEASE_REDUCTION_OP", 327, 325, 3, 16), ("RELEASE_REDUCTION_FORMAT", 329, 328, 3, 16),
  ("RELEASE_TRAP_TYPE", 331, 330, 3, 16), ("RELEASE_PAYLOAD64B", 332, 332, 3, 16),
  ("DEPENDENT_QMD_ENABLE", 368, 368, 2, 5), ("DEPENDENT_QMD_ACTION", 371, 369, 2, 5), ("DEPENDENT_QMD_PREFETCH", 372, 372, 2, 5),
  ("CONSTANT_BUFFER_VALID", 416, 416, 8, 4), ("CONSTANT_BUFFER_PREFETCH", 418, 417, 8, 4), ("CONSTANT_BUFFER_INVALIDATE", 419, 419, 8, 4),
  ("DEPENDENT_QMD0_POINTER", 479, 448), ("DEPENDENT_QMD1_POINTER", 511, 480),
  ("SHADER_LOCAL_MEMORY_LOW_SIZE", 535, 512), ("SASS_VERSION", 543, 536), ("SHADER_LOCAL_MEMORY_HIGH_SIZE", 567, 544),
  ("API_VISIBLE_CALL_LIMIT", 568, 568), ("SAMPLER_INDEX", 569, 569), ("QMD_MINOR_VERSION", 579, 576), ("QMD_MAJOR_VERSION", 583, 580),
  ("SHARED_MEMORY_SIZE", 601, 584), *_invalidates(602), ("MIN_SM_CONFIG_SHARED_MEM_SIZE", 613, 608),
  ("MAX_SM_CONFIG_SHARED_MEM_SIZE", 619, 614), ("TARGET_SM_CONFIG_SHARED_MEM_SIZE", 625, 620), ("SHARED_ALLOCATION_ENABLE", 626, 626),
  *_semaphores(640, 768, 896),
  ("GRID_WIDTH", 1055, 1024), ("GRID_HEIGHT", 1071, 1056), ("GRID_DEPTH", 1103, 1088), ("CWD_MEMBAR_TYPE", 1137, 1136),
  ("CTA_THREAD_DIMENSION0", 1167, 1152), ("CTA_THREAD_DIMENSION1", 1183, 1168), ("CTA_THREAD_DIMENSION2", 1199, 1184),
  ("REGISTER_COUNT", 1208, 1200), ("BARRIER_COUNT", 1215, 1211), ("PROGRAM_ADDRESS_LOWER", 1247, 1216), ("PROGRAM_ADDRESS_UPPER", 1272, 1248),
  ("PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED", 1375, 1344), ("PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED", 1392, 1376),
  ("PROGRAM_PREFETCH_SIZE", 1401, 1393), ("PROGRAM_PREFETCH_TYPE", 1403, 1402),
  ("CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6", 1567, 1536, 8, 64), ("CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6", 1586, 1568, 8, 64),
  ("CONSTANT_BUFFER_SIZE_SHIFTED4", 1599, 1587, 8, 64))

# open-gpu-doc classes/compute/clcdc0qmd.h NVCDC0_QMDV05_00_* (clcec0qmd.h: identical); the header also names the dependent-QMD
# fields DEPENDENT_QMD0_ENABLE etc., aliases of the indexed ones kept here
QMD_V05_00 = _table(
  ("QMD_GROUP_ID", 149, 144), ("QMD_TYPE", 153, 151),
  ("RELEASE_ENABLE", 288, 288, 3, 16), ("RELEASE_STRUCTURE_SIZE", 290, 289, 3, 16), ("RELEASE_MEMBAR_TYPE", 291, 291, 3, 16),
  ("RELEASE_REDUCTION_ENABLE", 292, 292, 3, 16), ("RELEASE_REDUCTION_OP", 295, 293, 3, 16), ("RELEASE_REDUCTION_FORMAT", 297, 296, 3, 16),
  ("RELEASE_TRAP_TYPE", 299, 298, 3, 16), ("RELEASE_PAYLOAD64B", 300, 300, 3, 16),
  ("DEPENDENT_QMD_ENABLE", 336, 336, 2, 8), ("DEPENDENT_QMD_ACTION", 339, 337, 2, 8), ("DEPENDENT_QMD_PREFETCH", 340, 340, 2, 8),
  ("SHARED_ALLOCATION_ENABLE", 351, 351), ("DEPENDENT_QMD_POINTER", 415, 384, 2, 32),
  ("SASS_VERSION", 455, 448), ("API_VISIBLE_CALL_LIMIT", 456, 456), ("SAMPLER_INDEX", 457, 457),
  ("QMD_MINOR_VERSION", 467, 464), ("QMD_MAJOR_VERSION", 471, 468), *_invalidates(472), *_semaphores(480, 768, 896),
  ("CWD_MEMBAR_TYPE", 625, 624), ("PROGRAM_ADDRESS_LOWER_SHIFTED4", 1055, 1024), ("PROGRAM_ADDRESS_UPPER_SHIFTED4", 1076, 1056),
  ("PROGRAM_PREFETCH_SIZE", 1085, 1077), ("PROGRAM_PREFETCH_TYPE", 1087, 1086),
  ("CTA_THREAD_DIMENSION0", 1103, 1088), ("CTA_THREAD_DIMENSION1", 1119, 1104), ("CTA_THREAD_DIMENSION2", 1127, 1120),
  ("REGISTER_COUNT", 1136, 1128), ("BARRIER_COUNT", 1141, 1137), ("SHARED_MEMORY_SIZE_SHIFTED7", 1162, 1152),
  ("MIN_SM_CONFIG_SHARED_MEM_SIZE", 1168, 1163), ("MAX_SM_CONFIG_SHARED_MEM_SIZE", 1174, 1169), ("TARGET_SM_CONFIG_SHARED_MEM_SIZE", 1180, 1175),
  ("SHADER_LOCAL_MEMORY_LOW_SIZE_SHIFTED4", 1199, 1184), ("SHADER_LOCAL_MEMORY_HIGH_SIZE_SHIFTED4", 1215, 1200),
  ("GRID_WIDTH", 1279, 1248), ("GRID_HEIGHT", 1295, 1280), ("GRID_DEPTH", 1327, 1312),
  ("CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6", 1375, 1344, 8, 64), ("CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6", 1394, 1376, 8, 64),
  ("CONSTANT_BUFFER_SIZE_SHIFTED4", 1407, 1395, 8, 64),
  ("CONSTANT_BUFFER_VALID", 1856, 1856, 8, 4), ("CONSTANT_BUFFER_PREFETCH", 1858, 1857, 8, 4), ("CONSTANT_BUFFER_INVALIDATE", 1859, 1859, 8, 4),
  ("PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED", 1919, 1888), ("PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED", 1936, 1920))

def _either(*choices) -> tuple[tuple[str, ...], ...]: return tuple((c,) if isinstance(c, str) else c for c in choices)

def _meanings() -> dict[str, tuple[tuple[str, ...], ...]]:
  """Whole values and the header fields that hold them: per value the choices (one per version's naming), each the
  field names low part first. The first choice whose fields a version has is the one it uses."""
  m = {"group_id": _either("QMD_GROUP_ID"), "qmd_type": _either("QMD_TYPE"), "sm_global_caching_enable": _either("SM_GLOBAL_CACHING_ENABLE"),
       "qmd_major_version": _either("QMD_MAJOR_VERSION"), "qmd_minor_version": _either("QMD_VERSION", "QMD_MINOR_VERSION"),
       "grid_width": _either("CTA_RASTER_WIDTH", "GRID_WIDTH"), "grid_height": _either("CTA_RASTER_HEIGHT", "GRID_HEIGHT"),
       "grid_depth": _either("CTA_RASTER_DEPTH", "GRID_DEPTH"), "register_count": _either("REGISTER_COUNT_V", "REGISTER_COUNT"),
       "block_dim_x": _either("CTA_THREAD_DIMENSION0"), "block_dim_y": _either("CTA_THREAD_DIMENSION1"), "block_dim_z": _either("CTA_THREAD_DIMENSION2"),
       "program_address": _either(("PROGRAM_ADDRESS_LOWER", "PROGRAM_ADDRESS_UPPER"), ("PROGRAM_ADDRESS_LOWER_SHIFTED4", "PROGRAM_ADDRESS_UPPER_SHIFTED4")),
       "program_prefetch_address": _either(("PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED", "PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED")),
       "shared_memory_size": _either("SHARED_MEMORY_SIZE", "SHARED_MEMORY_SIZE_SHIFTED7"),
       "shader_local_memory_low_size": _either("SHADER_LOCAL_MEMORY_LOW_SIZE", "SHADER_LOCAL_MEMORY_LOW_SIZE_SHIFTED4"),
       "shader_local_memory_high_size": _either("SHADER_LOCAL_MEMORY_HIGH_SIZE", "SHADER_LOCAL_MEMORY_HIGH_SIZE_SHIFTED4")}
  for same in ("SASS_VERSION", "API_VISIBLE_CALL_LIMIT", "SAMPLER_INDEX", "CWD_MEMBAR_TYPE", "BARRIER_COUNT", "PROGRAM_PREFETCH_SIZE",
               "MIN_SM_CONFIG_SHARED_MEM_SIZE", "MAX_SM_CONFIG_SHARED_MEM_SIZE", "TARGET_SM_CONFIG_SHARED_MEM_SIZE", "SHARED_ALLOCATION_ENABLE",
               *(row[0] for row in _invalidates(0))):
    m[same.lower()] = _either(same)
  for i in range(3):
    for flag in ("ENABLE", "STRUCTURE_SIZE", "MEMBAR_TYPE", "REDUCTION_ENABLE", "REDUCTION_OP", "REDUCTION_FORMAT", "PAYLOAD64B"):
      m[f"release{i}_{flag.lower()}"] = _either(f"RELEASE{i}_{flag}", f"RELEASE_{flag}({i})")
    m[f"release{i}_address"] = _either((f"RELEASE{i}_ADDRESS_LOWER", f"RELEASE{i}_ADDRESS_UPPER"),
                                       (f"RELEASE_SEMAPHORE{i}_ADDR_LOWER", f"RELEASE_SEMAPHORE{i}_ADDR_UPPER"))
    m[f"release{i}_payload"] = _either((f"RELEASE{i}_PAYLOAD_LOWER", f"RELEASE{i}_PAYLOAD_UPPER"),
                                       (f"RELEASE_SEMAPHORE{i}_PAYLOAD_LOWER", f"RELEASE_SEMAPHORE{i}_PAYLOAD_UPPER"))
  for i in range(2):
    for flag in ("ENABLE", "ACTION", "PREFETCH"): m[f"dependent_qmd{i}_{flag.lower()}"] = _either(f"DEPENDENT_QMD{i}_{flag}", f"DEPENDENT_QMD_{flag}({i})")
    m[f"dependent_qmd{i}_pointer"] = _either(f"DEPENDENT_QMD{i}_POINTER", f"DEPENDENT_QMD_POINTER({i})")
  for i in range(8):
    m |= {f"cb{i}_valid": _either(f"CONSTANT_BUFFER_VALID({i})"), f"cb{i}_invalidate": _either(f"CONSTANT_BUFFER_INVALIDATE({i})"),
          f"cb{i}_address": _either((f"CONSTANT_BUFFER_ADDR_LOWER({i})", f"CONSTANT_BUFFER_ADDR_UPPER({i})"),
                                    (f"CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6({i})", f"CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6({i})")),
          f"cb{i}_size": _either(f"CONSTANT_BUFFER_SIZE_SHIFTED4({i})")}
  return m

def stored_shift(name: str) -> int:
  """How far right the hardware shifts a value into the field `name`: the n of a SHIFTEDn name. A bare SHIFTED
  (the program prefetch address) and the dependent-QMD pointers hold address >> 8: the headers give no count there,
  8 is what SEND_PCAS_A's QMD_ADDRESS_SHIFTED8 states for a QMD address and matches PREFETCH_SIZE's 256-byte units."""
  if m := re.search(r"_SHIFTED(\d*)", name): return int(m[1] or 8)
  return 8 if "_POINTER" in name else 0

@dataclass(frozen=True)
class QmdFormat:
  version: str
  size: int      # bytes
  major: int     # QMD_MAJOR_VERSION / QMD_(MINOR_)VERSION of this version
  minor: int
  fields: dict[str, Bits]
  values: dict[str, tuple[tuple[str, ...], int]] = field(init=False)  # value name -> (its fields low part first, shift)
  def __post_init__(self):
    values = {}
    for name, choices in _meanings().items():
      if (parts := next((c for c in choices if all(p in self.fields for p in c)), None)) is not None: values[name] = (parts, stored_shift(parts[0]))
    object.__setattr__(self, "values", values)
  def decode(self, data) -> dict[str, int]:
    """Every value of the descriptor in `data` (bytes, addresses and sizes unshifted)."""
    if len(data) < self.size: raise ValueError(f"QMD {self.version} is {self.size} bytes, got {len(data)}")
    word = int.from_bytes(bytes(data[:self.size]), "little")
    out = {}
    for name, (parts, shift) in self.values.items():
      value, at = 0, 0
      for p in parts: value, at = value | self.fields[p].get(word) << at, at + self.fields[p].width
      out[name] = value << shift
    return out

# sizes: the highest field bit of each version (2047, 3071) rounded to whole dwords
QMDS = {"V03_00": QmdFormat("V03_00", 256, 3, 0, QMD_V03_00), "V04_00": QmdFormat("V04_00", 384, 4, 0, QMD_V04_00),
        "V05_00": QmdFormat("V05_00", 384, 5, 0, QMD_V05_00)}
# the QMD version each compute class launches: the newest its cl*c0qmd.h defines (c9c0: V03_00, cbc0: V04_00, cdc0/cec0: V05_00)
QMD_OF_CLASS = {0xc6c0: "V03_00", 0xc7c0: "V03_00", 0xc9c0: "V03_00", 0xcbc0: "V04_00", 0xcdc0: "V05_00", 0xcec0: "V05_00"}
# enumerated QMD values (clc6c0qmd.h, clcbc0qmd.h, clcdc0qmd.h: the same on every version)
QMD_TYPE_GRID_CTA = 2                                      # QMD_TYPE_GRID_CTA
DEPENDENT_QMD_ACTION_SCHEDULE = 1                          # DEPENDENT_QMD*_ACTION_QMD_SCHEDULE
RELEASE_FOUR_WORDS, RELEASE_ONE_WORD, RELEASE_TWO_WORDS = 0, 1, 2  # RELEASE*_STRUCTURE_SIZE_SEMAPHORE_*

# ---------------- methods

class Method(NamedTuple):
  offset: int              # byte offset in the class
  fields: dict[str, Bits]

def _m(offset: int, **fields: tuple[int, int]) -> Method: return Method(offset, {k: Bits(*v) for k, v in fields.items()})

@dataclass(frozen=True)
class ClassFormat:
  cls: int
  name: str
  engine: str                  # "host", "compute" or "copy"
  methods: dict[str, Method]
  header: str
  at: dict[int, str] = field(init=False)  # method byte offset -> name
  def __post_init__(self): object.__setattr__(self, "at", {m.offset: name for name, m in self.methods.items()})
  def offset(self, name: str) -> int: return self.methods[name].offset
  def get(self, method: str, fld: str, value: int) -> int: return self.methods[method].fields[fld].get(value)
  def has(self, method: str, fld: str) -> bool: return fld in self.methods[method].fields

def _host(cls: int, name: str, sem_addr_hi: int, header: str) -> ClassFormat:
  return ClassFormat(cls, name, "host", {
    "SET_OBJECT": _m(0x000, NVCLASS=(15, 0), ENGINE=(20, 16)), "NON_STALL_INTERRUPT": _m(0x020, HANDLE=(31, 0)),
    "MEM_OP_A": _m(0x028), "MEM_OP_B": _m(0x02c), "MEM_OP_C": _m(0x030), "MEM_OP_D": _m(0x034, OPERATION=(31, 27)),
    "SEM_ADDR_LO": _m(0x05c, OFFSET=(31, 2)), "SEM_ADDR_HI": _m(0x060, OFFSET=(sem_addr_hi, 0)),
    "SEM_PAYLOAD_LO": _m(0x064, PAYLOAD=(31, 0)), "SEM_PAYLOAD_HI": _m(0x068, PAYLOAD=(31, 0)),
    "SEM_EXECUTE": _m(0x06c, OPERATION=(2, 0), ACQUIRE_SWITCH_TSG=(12, 12), RELEASE_WFI=(20, 20), PAYLOAD_SIZE=(24, 24),
                      RELEASE_TIMESTAMP=(25, 25), REDUCTION=(30, 27), REDUCTION_FORMAT=(31, 31)),
    "WFI": _m(0x078, SCOPE=(0, 0))}, header)

# open-gpu-doc classes/host/clc56f.h NVC56F_* (AMPERE_CHANNEL_GPFIFO_A). open-gpu-kernel-modules clc86f.h, clc96f.h and clca6f.h
# publish a subset of the same methods at the same offsets (c96f/ca6f: SET_OBJECT, MEM_OP_*, SEM_*; SEM_EXECUTE only OPERATION
# ACQUIRE/RELEASE, RELEASE_WFI and PAYLOAD_SIZE), with SEM_ADDR_HI_OFFSET widened to 24:0; the rest is taken as c56f's
HOST_CLASSES = {c.cls: c for c in (_host(0xc56f, "AMPERE_CHANNEL_GPFIFO_A", 7, "clc56f.h"), _host(0xc86f, "HOPPER_CHANNEL_GPFIFO_A", 24, "clc86f.h"),
                                   _host(0xc96f, "BLACKWELL_CHANNEL_GPFIFO_A", 24, "clc96f.h"), _host(0xca6f, "BLACKWELL_CHANNEL_GPFIFO_B", 24, "clca6f.h"))}
# NVC56F_SEM_EXECUTE_OPERATION_* values
SEM_ACQUIRE, SEM_RELEASE, SEM_ACQ_STRICT_GEQ, SEM_ACQ_CIRC_GEQ, SEM_ACQ_AND, SEM_ACQ_NOR, SEM_REDUCTION = range(7)
# USERD words (clc56f.h / clc86f.h Nvc56fControl/Nvc86fControl: GPGet at 0x88, GPPut at 0x8C, 512 bytes; clc96f.h and clca6f.h
# publish GPPut at 0x8C only, GPGet there is taken as c86f's)
USERD = {cls: {"GP_GET": 0x88, "GP_PUT": 0x8C} for cls in HOST_CLASSES}
USERD_BYTES = 0x80 * 4

def _compute(cls: int, name: str, header: str, *, pcas2_select: bool = True, hopper: bool = True) -> ClassFormat:
  """clc6c0.h's compute methods; c7c0 onwards add SEND_SIGNALING_PCAS2_B SELECT/OFFSET_MINUS_ONE, cbc0 onwards widen the
  SLM and report-semaphore upper addresses to 24:0, narrow SET_INLINE_QMD_ADDRESS_A's upper to 8:0 (INLINE_SIZE at 30)
  and add the TPC-per-GPC counts to SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C."""
  upper = (24, 0) if hopper else (16, 0)
  pcas2 = dict(PCAS_ACTION=(3, 0), **(dict(SELECT=(13, 8), OFFSET_MINUS_ONE=(23, 14)) if pcas2_select else {}))
  non_throttled_c = dict(MAX_SM_COUNT=(8, 0), **(dict(MAX_PLURAL_TPC_GPC_COUNT=(23, 16), MAX_SINGLETON_TPC_GPC_COUNT=(31, 24)) if hopper else {}))
  inline_a = dict(QMD_ADDRESS_SHIFTED8_UPPER=(8, 0), INLINE_SIZE=(30, 30)) if hopper else dict(QMD_ADDRESS_SHIFTED8_UPPER=(31, 0))
  qmd_dwords = QMDS[QMD_OF_CLASS[cls]].size // 4
  return ClassFormat(cls, name, "compute", {
    "SET_QMD_VERSION": _m(0x288, CURRENT=(15, 0), OLDEST_SUPPORTED=(31, 16)), "INVALIDATE_SKED_CACHES": _m(0x298, V=(0, 0)),
    "SET_SHADER_SHARED_MEMORY_WINDOW_A": _m(0x2a0, BASE_ADDRESS_UPPER=(16, 0)), "SET_SHADER_SHARED_MEMORY_WINDOW_B": _m(0x2a4, BASE_ADDRESS=(31, 0)),
    "SEND_PCAS_A": _m(0x2b4, QMD_ADDRESS_SHIFTED8=(31, 0)), "SEND_SIGNALING_PCAS2_B": _m(0x2c0, **pcas2),
    "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A": _m(0x2e4, SIZE_UPPER=(7, 0)), "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B": _m(0x2e8, SIZE_LOWER=(31, 0)),
    "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C": _m(0x2ec, **non_throttled_c),
    "SET_INLINE_QMD_ADDRESS_A": _m(0x318, **inline_a), "SET_INLINE_QMD_ADDRESS_B": _m(0x31c, QMD_ADDRESS_SHIFTED8_LOWER=(31, 0)),
    **{f"LOAD_INLINE_QMD_DATA({i})": _m(0x320 + 4 * i, V=(31, 0)) for i in range(qmd_dwords)},  # one per QMD dword
    "SET_SHADER_LOCAL_MEMORY_A": _m(0x790, ADDRESS_UPPER=upper), "SET_SHADER_LOCAL_MEMORY_B": _m(0x794, ADDRESS_LOWER=(31, 0)),
    "SET_SHADER_LOCAL_MEMORY_WINDOW_A": _m(0x7b0, BASE_ADDRESS_UPPER=(16, 0)), "SET_SHADER_LOCAL_MEMORY_WINDOW_B": _m(0x7b4, BASE_ADDRESS=(31, 0)),
    "INVALIDATE_SHADER_CACHES_NO_WFI": _m(0x1698, INSTRUCTION=(0, 0), GLOBAL_DATA=(4, 4), CONSTANT=(12, 12)),
    "SET_REPORT_SEMAPHORE_A": _m(0x1b00, OFFSET_UPPER=(24, 0) if hopper else (7, 0)), "SET_REPORT_SEMAPHORE_B": _m(0x1b04, OFFSET_LOWER=(31, 0)),
    "SET_REPORT_SEMAPHORE_C": _m(0x1b08, PAYLOAD=(31, 0)),
    "SET_REPORT_SEMAPHORE_D": _m(0x1b0c, OPERATION=(1, 0), FLUSH_DISABLE=(2, 2), REDUCTION_ENABLE=(3, 3), REDUCTION_OP=(11, 9),
                                 REDUCTION_FORMAT=(18, 17), CONDITIONAL_TRAP=(19, 19), AWAKEN_ENABLE=(20, 20), STRUCTURE_SIZE=(28, 28))}, header)

# open-gpu-doc classes/compute/clc6c0.h, clc7c0.h, clc9c0.h, clcbc0.h, clcdc0.h, clcec0.h NVxxC0_* (the methods above only;
# cdc0/cec0 call INVALIDATE_SKED_CACHES's bit 0 FORCE_IGNORE_VEID)
COMPUTE_CLASSES = {c.cls: c for c in (
  _compute(0xc6c0, "AMPERE_COMPUTE_A", "clc6c0.h", pcas2_select=False, hopper=False), _compute(0xc7c0, "AMPERE_COMPUTE_B", "clc7c0.h", hopper=False),
  _compute(0xc9c0, "ADA_COMPUTE_A", "clc9c0.h", hopper=False), _compute(0xcbc0, "HOPPER_COMPUTE_A", "clcbc0.h"),
  _compute(0xcdc0, "BLACKWELL_COMPUTE_A", "clcdc0.h"), _compute(0xcec0, "BLACKWELL_COMPUTE_B", "clcec0.h"))}
# NVC6C0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_* (INCREMENT_DEPENDENCE 0xC, INCREMENT_CWD_REF_COUNTER 0xD from c7c0 on)
PCAS_ACTION = {"NOP": 0, "INVALIDATE": 1, "SCHEDULE": 2, "INVALIDATE_COPY_SCHEDULE": 3, "INCREMENT_PUT": 6, "DECREMENT_DEPENDENCE": 7,
               "PREFETCH": 8, "PREFETCH_SCHEDULE": 9, "INVALIDATE_PREFETCH_COPY_SCHEDULE": 0xA,
               "INVALIDATE_PREFETCH_COPY_FORCE_REQUIRE_SCHEDULING": 0xB, "INCREMENT_DEPENDENCE": 0xC, "INCREMENT_CWD_REF_COUNTER": 0xD}
REPORT_RELEASE = 0                                  # SET_REPORT_SEMAPHORE_D_OPERATION_RELEASE
REPORT_FOUR_WORDS, REPORT_ONE_WORD = 0, 1           # SET_REPORT_SEMAPHORE_D_STRUCTURE_SIZE_*
INLINE_384 = 1                                      # SET_INLINE_QMD_ADDRESS_A_INLINE_SIZE_INLINE_384 (cbc0+)

def _copy(cls: int, name: str, header: str, *, payload_upper: bool = True, hopper: bool = True, rmw: bool = True) -> ClassFormat:
  """clc6b5.h's copy methods; c7b5 onwards add SET_SEMAPHORE_PAYLOAD_UPPER and LAUNCH_DMA SEMAPHORE_PAYLOAD_SIZE, c8b5 onwards
  widen the upper address fields to 24:0, add COPY_TYPE and MEMORY_SCRUB_ENABLE and narrow VPRMODE to bit 22, c9b5 drops
  FORCE_RMWDISABLE."""
  upper = (24, 0) if hopper else (16, 0)
  launch = dict(DATA_TRANSFER_TYPE=(1, 0), FLUSH_ENABLE=(2, 2), SEMAPHORE_TYPE=(4, 3), INTERRUPT_TYPE=(6, 5), SRC_MEMORY_LAYOUT=(7, 7),
                DST_MEMORY_LAYOUT=(8, 8), MULTI_LINE_ENABLE=(9, 9), REMAP_ENABLE=(10, 10), SRC_TYPE=(12, 12), DST_TYPE=(13, 13),
                SEMAPHORE_REDUCTION=(17, 14), SEMAPHORE_REDUCTION_SIGN=(18, 18), SEMAPHORE_REDUCTION_ENABLE=(19, 19), FLUSH_TYPE=(25, 25),
                DISABLE_PLC=(26, 26), **(dict(FORCE_RMWDISABLE=(11, 11)) if rmw else {}),
                **(dict(COPY_TYPE=(21, 20), VPRMODE=(22, 22), MEMORY_SCRUB_ENABLE=(23, 23)) if hopper else dict(VPRMODE=(23, 22))),
                **(dict(SEMAPHORE_PAYLOAD_SIZE=(27, 27)) if payload_upper else {}))
  return ClassFormat(cls, name, "copy", {
    "SET_SEMAPHORE_A": _m(0x240, UPPER=upper), "SET_SEMAPHORE_B": _m(0x244, LOWER=(31, 0)), "SET_SEMAPHORE_PAYLOAD": _m(0x248, PAYLOAD=(31, 0)),
    **({"SET_SEMAPHORE_PAYLOAD_UPPER": _m(0x24c, PAYLOAD=(31, 0))} if payload_upper else {}), "LAUNCH_DMA": _m(0x300, **launch),
    "OFFSET_IN_UPPER": _m(0x400, UPPER=upper), "OFFSET_IN_LOWER": _m(0x404, VALUE=(31, 0)),
    "OFFSET_OUT_UPPER": _m(0x408, UPPER=upper), "OFFSET_OUT_LOWER": _m(0x40c, VALUE=(31, 0)),
    "PITCH_IN": _m(0x410, VALUE=(31, 0)), "PITCH_OUT": _m(0x414, VALUE=(31, 0)), "LINE_LENGTH_IN": _m(0x418, VALUE=(31, 0)),
    "LINE_COUNT": _m(0x41c, VALUE=(31, 0))}, header)

# open-gpu-doc classes/dma-copy/clc6b5.h, clc7b5.h, clc8b5.h, clc9b5.h, clcab5.h NVxxB5_* (the methods above only)
COPY_CLASSES = {c.cls: c for c in (
  _copy(0xc6b5, "AMPERE_DMA_COPY_A", "clc6b5.h", payload_upper=False, hopper=False), _copy(0xc7b5, "AMPERE_DMA_COPY_B", "clc7b5.h", hopper=False),
  _copy(0xc8b5, "HOPPER_DMA_COPY_A", "clc8b5.h"), _copy(0xc9b5, "BLACKWELL_DMA_COPY_A", "clc9b5.h", rmw=False),
  _copy(0xcab5, "BLACKWELL_DMA_COPY_B", "clcab5.h", rmw=False))}
# LAUNCH_DMA_* values (clc6b5.h; c7b5+ call SEMAPHORE_TYPE 1/2 RELEASE_SEMAPHORE_NO/WITH_TIMESTAMP, cab5 adds transfer type 3 PREFETCH)
DMA_TRANSFER_NONE, DMA_TRANSFER_PIPELINED, DMA_TRANSFER_NON_PIPELINED = 0, 1, 2
DMA_SEMAPHORE_NONE, DMA_SEMAPHORE_ONE_WORD, DMA_SEMAPHORE_FOUR_WORD = 0, 1, 2
DMA_LAYOUT_PITCH, DMA_TYPE_PHYSICAL, DMA_PAYLOAD_TWO_WORD = 1, 1, 1

CLASSES: dict[int, ClassFormat] = {**HOST_CLASSES, **COMPUTE_CLASSES, **COPY_CLASSES}

# ---------------- push buffers and GPFIFO entries

# a push-buffer method header (clc56f.h NVC56F_DMA_*; manuals/ampere/ga100/dev_ram.ref.txt NV_FIFO_DMA_*)
DMA_ADDRESS, DMA_SUBCHANNEL, DMA_TERT_OP = Bits(11, 0), Bits(15, 13), Bits(17, 16)  # ADDRESS: method byte offset >> 2
DMA_COUNT, DMA_SEC_OP = Bits(28, 16), Bits(31, 29)                                   # COUNT doubles as IMMD_DATA
SEC_GRP0_USE_TERT, SEC_INC_METHOD, SEC_NON_INC_METHOD, SEC_IMMD_DATA_METHOD, SEC_ONE_INC, SEC_END_PB_SEGMENT = 0, 1, 3, 4, 5, 7
DMA_NOP = 0                                                                          # NV_FIFO_DMA_NOP, the universal no-op
# TERT_OP 1..3 under SEC_OP 0: SET/STORE/USE_SUBDEVICE_MASK control entries (a mask for SLI; one GPU here, so no effect)

class PushBufferError(ValueError): pass

def method_writes(words: Iterable[int]) -> Iterator[tuple[int, int, int]]:
  """The method writes of a push-buffer segment, in order, as (subchannel, method byte offset, value). Incrementing
  headers write offset, offset+4, ...; non-incrementing ones write one method; increment-once ones the first dword to
  the method and the rest to method+4; immediate ones carry their 13-bit value in the header. An END_PB_SEGMENT
  entry ends the segment (dev_ram.ref: nothing after it is decoded)."""
  words = list(words)
  i = 0
  while i < len(words):
    word, at = words[i], i
    sec, subc, offset, count = DMA_SEC_OP.get(word), DMA_SUBCHANNEL.get(word), DMA_ADDRESS.get(word) << 2, DMA_COUNT.get(word)
    i += 1
    if sec == SEC_END_PB_SEGMENT: return
    if sec == SEC_IMMD_DATA_METHOD:
      yield subc, offset, count
      continue
    if sec == SEC_GRP0_USE_TERT and (word == DMA_NOP or DMA_TERT_OP.get(word)): continue
    if sec not in (SEC_INC_METHOD, SEC_NON_INC_METHOD, SEC_ONE_INC):
      raise PushBufferError(f"push buffer dword {at}: {word:#010x} is no method header the model knows (SEC_OP {sec})")
    if i + count > len(words): raise PushBufferError(f"push buffer dword {at}: method {offset:#x} wants {count} dwords, {len(words) - i} left")
    for k in range(count):
      step = k if sec == SEC_INC_METHOD else min(k, 1) if sec == SEC_ONE_INC else 0
      yield subc, offset + 4 * step, words[i + k]
    i += count

# a GPFIFO entry, two dwords (clc56f.h NVC56F_GP_ENTRY0_*/ENTRY1_*, the same in clc86f.h and clc96f.h); a LENGTH of 0 makes it
# a control entry whose OPCODE shares GET_HI's bits (manuals/ampere/ga100/dev_pbdma.ref.txt NV_PPBDMA_GP_ENTRY1_LENGTH_CONTROL)
GP_ENTRY0_FETCH, GP_ENTRY0_GET = Bits(0, 0), Bits(31, 2)          # GET: push-buffer address bits 31:2
GP_ENTRY1_GET_HI, GP_ENTRY1_LEVEL, GP_ENTRY1_LENGTH, GP_ENTRY1_SYNC = Bits(7, 0), Bits(9, 9), Bits(30, 10), Bits(31, 31)
GP_ENTRY1_OPCODE = Bits(7, 0)
GP_OPCODE = {"NOP": 0, "ILLEGAL": 1, "GP_CRC": 2, "PB_CRC": 3, "SET_PB_SEGMENT_EXTENDED_BASE": 4}  # the last from c86f on

class GpEntry(NamedTuple):
  address: int   # push-buffer GPU VA (GET_HI << 32 | GET << 2)
  length: int    # dwords; 0: a control entry
  level: int     # 0 MAIN, 1 SUBROUTINE
  sync: int      # 0 PROCEED, 1 WAIT
  fetch: int     # 0 UNCONDITIONAL, 1 CONDITIONAL
  opcode: int    # a control entry's operation (GP_OPCODE)

def gp_entry(entry: int) -> GpEntry:
  e0, e1 = entry & 0xffffffff, entry >> 32
  return GpEntry(GP_ENTRY1_GET_HI.get(e1) << 32 | GP_ENTRY0_GET.get(e0) << 2, GP_ENTRY1_LENGTH.get(e1), GP_ENTRY1_LEVEL.get(e1),
                 GP_ENTRY1_SYNC.get(e1), GP_ENTRY0_FETCH.get(e0), GP_ENTRY1_OPCODE.get(e1))
