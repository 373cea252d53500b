"""NVIDIA push-buffer formats: method headers, GPFIFO entries, and the method offsets and field encodings of the host
(GPFIFO channel), compute and copy classes that a driver writes and the GPU model executes.

Facts from NVIDIA's headers: open-gpu-doc classes/host/clc56f.h, classes/compute/clc6c0.h, clcbc0.h, clcdc0.h,
classes/dma-copy/clc6b5.h, clc7b5.h, clc8b5.h; open-gpu-kernel-modules src/common/sdk/nvidia/inc/class/clc86f.h.
Method offsets are byte offsets within the class, as in the headers.

A push buffer is a list of dwords: a method header, then its data. Each data dword is one method write
(subchannel, method offset, value); decode_pushbuffer expands a buffer into those writes.
"""
from __future__ import annotations
from typing import Iterable, Iterator, NamedTuple

# method header opcodes (bits 31:29)
INCREMENTING, NON_INCREMENTING, IMMEDIATE, INCREMENT_ONCE = 1, 3, 4, 5

# subchannel a class is bound to by SET_OBJECT (the convention of NVK, tinygrad and libcuda);
# host methods (offset < 0x100) act on any subchannel
SUBC_HOST, SUBC_COMPUTE, SUBC_COPY = 0, 1, 4

def header(opcode: int, subchannel: int, offset: int, count: int) -> int:
  """A method header: `count` data dwords follow (for IMMEDIATE, `count` is the 13-bit data itself)."""
  if opcode not in (INCREMENTING, NON_INCREMENTING, IMMEDIATE, INCREMENT_ONCE): raise ValueError(f"unknown method opcode {opcode}")
  if not 0 <= subchannel < 8: raise ValueError(f"subchannel {subchannel} is not 0..7")
  if offset & 3 or not 0 <= offset < 0x4000: raise ValueError(f"method offset {offset:#x} is not a dword offset below 0x4000")
  if not 0 <= count < 0x2000: raise ValueError(f"method count/immediate {count:#x} does not fit 13 bits")
  return opcode << 29 | count << 16 | subchannel << 13 | offset >> 2

def decode_header(word: int) -> tuple[int, int, int, int]:
  """(opcode, subchannel, method byte offset, count or immediate data) of a header dword."""
  return word >> 29, (word >> 13) & 7, (word & 0xfff) << 2, (word >> 16) & 0x1fff

def method(subchannel: int, offset: int, *data: int, opcode: int = INCREMENTING) -> list[int]:
  """The dwords of one method: header then data (INCREMENTING writes offset, offset+4, ... one per data dword)."""
  if not data: raise ValueError(f"method {offset:#x} has no data")
  if opcode == IMMEDIATE: raise ValueError("immediate methods carry their data in the header: use immediate()")
  if bad := [d for d in data if not 0 <= d <= 0xffffffff]: raise ValueError(f"method {offset:#x} data {bad[0]:#x} is not a dword")
  return [header(opcode, subchannel, offset, len(data)), *data]

def immediate(subchannel: int, offset: int, value: int) -> list[int]:
  """One method write whose 13-bit value rides in the header."""
  return [header(IMMEDIATE, subchannel, offset, value)]

def decode_pushbuffer(words: Iterable[int]) -> Iterator[tuple[int, int, int]]:
  """Every method write of a push buffer, in order, as (subchannel, method byte offset, value)."""
  words = list(words)
  i = 0
  while i < len(words):
    word, at = words[i], i
    opcode, subc, offset, count = decode_header(word)
    i += 1
    if opcode == IMMEDIATE:
      yield subc, offset, count
      continue
    if opcode == 0 and (word == 0 or (word >> 16) & 3):
      continue  # a NOP, or a sub-device mask operation (only meaningful for SLI): no data follows
    if opcode not in (INCREMENTING, NON_INCREMENTING, INCREMENT_ONCE):
      raise ValueError(f"push buffer dword {at}: unsupported method header {word:#010x} (opcode {opcode})")
    if i + count > len(words): raise ValueError(f"push buffer dword {at}: method {offset:#x} wants {count} dwords, {len(words) - i} left")
    for k, value in enumerate(words[i:i + count]):
      step = k if opcode == INCREMENTING else min(k, 1) if opcode == INCREMENT_ONCE else 0
      yield subc, offset + 4 * step, value
    i += count

class GpEntry(NamedTuple):
  address: int        # push buffer GPU VA, dword aligned, below 2**40
  length: int         # dwords
  subroutine: bool = False   # LEVEL: MAIN 0, SUBROUTINE 1
  sync: bool = False         # SYNC: PROCEED 0, WAIT 1
  conditional: bool = False  # FETCH: UNCONDITIONAL 0, CONDITIONAL 1

# USERD (the channel's user-visible state, 512 bytes): GPGet (entries the GPU has fetched) and GPPut (entries written);
# the published c96f/ca6f structs list only GPPut (0x8C), GPGet is taken to stay at c56f/c86f's 0x88
USERD_GP_GET, USERD_GP_PUT, USERD_SIZE = 0x88, 0x8C, 512

def gpfifo_entry(address: int, length: int, *, subroutine: bool = False, sync: bool = False, conditional: bool = False) -> int:
  """The 64-bit GPFIFO ring entry for a push buffer: VA in bits 39:2, LEVEL 41, length (dwords) 62:42, SYNC 63,
  FETCH 0. (c86f can reach VAs above 2**40 with a SET_PB_SEGMENT_EXTENDED_BASE control entry, not modelled here.)
  An empty push buffer becomes a NOP control entry: with LENGTH 0 the hardware reads VA bits 39:32 as the control
  OPCODE (open-gpu-doc manuals/ampere/ga100/dev_pbdma.ref.txt NV_PPBDMA_GP_ENTRY1_LENGTH_CONTROL), so a buffer
  at 0x2_0000_0000 would run GP_CRC."""
  if address & 3 or not 0 <= address < 1 << 40: raise ValueError(f"push buffer address {address:#x} is not a dword-aligned VA below 2**40")
  if not 0 <= length < 1 << 21: raise ValueError(f"push buffer length {length} dwords does not fit 21 bits")
  if not length: return int(sync) << 63  # OPCODE NOP, operand 0
  return int(sync) << 63 | length << 42 | int(subroutine) << 41 | address | int(conditional)

def decode_gpfifo_entry(entry: int) -> GpEntry:
  return GpEntry(entry & 0xfffffffffc, (entry >> 42) & 0x1fffff, bool(entry >> 41 & 1), bool(entry >> 63), bool(entry & 1))

def _pack(table: dict[str, tuple[int, int]], what: str, **values: int) -> int:
  out = 0
  for name, value in values.items():
    hi, lo = table[name]
    if not 0 <= value < 1 << (hi - lo + 1): raise ValueError(f"{what} field {name!r} is {hi - lo + 1} bits wide: {value} does not fit")
    out |= int(value) << lo
  return out

def _unpack(table: dict[str, tuple[int, int]], word: int) -> dict[str, int]:
  return {name: (word >> lo) & ((1 << (hi - lo + 1)) - 1) for name, (hi, lo) in table.items()}

class Host:
  """Host (GPFIFO channel class) methods, AMPERE_CHANNEL_GPFIFO_A c56f and HOPPER_CHANNEL_GPFIFO_A c86f."""
  SET_OBJECT = 0x000            # class id in 15:0: binds that class to the subchannel the method is sent on
  NON_STALL_INTERRUPT = 0x020   # listed in c56f; the published c86f headers omit it
  MEM_OP_A, MEM_OP_B, MEM_OP_C, MEM_OP_D = 0x028, 0x02C, 0x030, 0x034  # D carries the operation (31:27) and must come last
  SEM_ADDR_LO = 0x05C           # address bits 31:2
  SEM_ADDR_HI = 0x060           # address bits 39:32 on c56f (field 7:0), 56:32 on c86f (field 24:0)
  SEM_PAYLOAD_LO = 0x064
  SEM_PAYLOAD_HI = 0x068
  SEM_EXECUTE = 0x06C           # see sem_execute()
  WFI = 0x078

# SEM_EXECUTE operations (bits 2:0)
SEM_ACQUIRE, SEM_RELEASE, SEM_ACQ_STRICT_GEQ, SEM_ACQ_CIRC_GEQ, SEM_ACQ_AND, SEM_ACQ_NOR, SEM_REDUCTION = range(7)

SEM_EXECUTE_FIELDS = {"operation": (2, 0), "switch_tsg": (12, 12), "wfi": (20, 20), "payload64": (24, 24), "timestamp": (25, 25)}

def sem_execute(operation: int, *, payload64: bool = False, timestamp: bool = False, wfi: bool = False, switch_tsg: bool = False) -> int:
  """The SEM_EXECUTE value: operation, 64-bit payload, release writes a timestamp at addr+8, release waits for idle,
  acquire lets the TSG yield while waiting."""
  return _pack(SEM_EXECUTE_FIELDS, "SEM_EXECUTE", operation=operation, payload64=payload64, timestamp=timestamp, wfi=wfi, switch_tsg=switch_tsg)

def decode_sem_execute(value: int) -> dict[str, int]: return _unpack(SEM_EXECUTE_FIELDS, value)

class Compute:
  """Compute class methods, at the same offsets in AMPERE_COMPUTE_A c6c0, HOPPER_COMPUTE_A cbc0, BLACKWELL_COMPUTE_A/B."""
  SET_QMD_VERSION = 0x288                   # CURRENT 15:0, OLDEST_SUPPORTED 31:16
  INVALIDATE_SKED_CACHES = 0x298
  SET_SHADER_SHARED_MEMORY_WINDOW_A = 0x2A0  # base address upper 16:0
  SET_SHADER_SHARED_MEMORY_WINDOW_B = 0x2A4  # base address lower
  SEND_PCAS_A = 0x2B4                       # QMD address >> 8
  SEND_SIGNALING_PCAS2_B = 0x2C0            # PCAS_ACTION 3:0; c7c0+ add SELECT 13:8, OFFSET_MINUS_ONE 23:14
  SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A = 0x2E4  # size per TPC, upper 7:0
  SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B = 0x2E8  # size per TPC, lower
  SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C = 0x2EC  # MAX_SM_COUNT 8:0; cbc0+ add TPC-per-GPC counts 23:16, 31:24
  SET_INLINE_QMD_ADDRESS_A = 0x318          # QMD address >> 8, upper: 31:0 on c6c0; 8:0 plus INLINE_QMD_384 on cbc0+
  SET_INLINE_QMD_ADDRESS_B = 0x31C          # QMD address >> 8, lower
  LOAD_INLINE_QMD_DATA = 0x320              # QMD dword i at 0x320 + 4i
  SET_SHADER_LOCAL_MEMORY_A = 0x790         # SLM base upper: 16:0 on c6c0, 24:0 on cbc0+
  SET_SHADER_LOCAL_MEMORY_B = 0x794         # SLM base lower
  SET_SHADER_LOCAL_MEMORY_WINDOW_A = 0x7B0  # base address upper 16:0
  SET_SHADER_LOCAL_MEMORY_WINDOW_B = 0x7B4  # base address lower
  INVALIDATE_SHADER_CACHES_NO_WFI = 0x1698  # INVALIDATE_INSTRUCTION | INVALIDATE_GLOBAL_DATA | INVALIDATE_CONSTANT
  SET_REPORT_SEMAPHORE_A = 0x1B00           # address upper: 7:0 on c6c0, 24:0 on cbc0+
  SET_REPORT_SEMAPHORE_B = 0x1B04           # address lower
  SET_REPORT_SEMAPHORE_C = 0x1B08           # payload
  SET_REPORT_SEMAPHORE_D = 0x1B0C           # operation 1:0 (0 release), structure size 28 (1 one word)

# SEND_SIGNALING_PCAS2_B PCAS_ACTION values (INCREMENT_DEPENDENCE 0xC, INCREMENT_CWD_REF_COUNTER 0xD are c7c0+)
PCAS_NOP, PCAS_INVALIDATE, PCAS_SCHEDULE, PCAS_INVALIDATE_COPY_SCHEDULE = 0, 1, 2, 3
PCAS_INCREMENT_PUT, PCAS_DECREMENT_DEPENDENCE, PCAS_PREFETCH, PCAS_PREFETCH_SCHEDULE = 6, 7, 8, 9
PCAS_INVALIDATE_PREFETCH_COPY_SCHEDULE, PCAS_INVALIDATE_PREFETCH_COPY_FORCE_REQUIRE_SCHEDULING = 0xA, 0xB

# SET_INLINE_QMD_ADDRESS_A INLINE_SIZE (bit 30, cbc0+): the inline QMD is 384 bytes rather than 256
INLINE_QMD_384 = 1 << 30

# INVALIDATE_SHADER_CACHES_NO_WFI bits
INVALIDATE_INSTRUCTION, INVALIDATE_GLOBAL_DATA, INVALIDATE_CONSTANT = 1 << 0, 1 << 4, 1 << 12

class Copy:
  """Copy engine methods, AMPERE_DMA_COPY_A/B c6b5/c7b5 and HOPPER_DMA_COPY_A c8b5."""
  SET_SEMAPHORE_A = 0x240              # address upper: 16:0 on c6b5/c7b5, 24:0 on c8b5
  SET_SEMAPHORE_B = 0x244              # address lower
  SET_SEMAPHORE_PAYLOAD = 0x248
  SET_SEMAPHORE_PAYLOAD_UPPER = 0x24C  # c7b5+
  LAUNCH_DMA = 0x300                   # see launch_dma()
  OFFSET_IN_UPPER = 0x400              # source address upper: 16:0 on c6b5/c7b5, 24:0 on c8b5
  OFFSET_IN_LOWER = 0x404
  OFFSET_OUT_UPPER = 0x408             # destination address upper, as OFFSET_IN_UPPER
  OFFSET_OUT_LOWER = 0x40C
  PITCH_IN = 0x410
  PITCH_OUT = 0x414
  LINE_LENGTH_IN = 0x418               # bytes per line
  LINE_COUNT = 0x41C

# LAUNCH_DMA DATA_TRANSFER_TYPE and SEMAPHORE_TYPE values
DMA_TRANSFER_NONE, DMA_PIPELINED, DMA_NON_PIPELINED = 0, 1, 2
DMA_SEM_NONE, DMA_SEM_ONE_WORD, DMA_SEM_FOUR_WORD, DMA_SEM_CONDITIONAL_INTR = 0, 1, 2, 3  # c7b5+ call 2 "with timestamp"

LAUNCH_DMA_FIELDS = {"transfer": (1, 0), "flush": (2, 2), "semaphore": (4, 3), "src_pitch": (7, 7), "dst_pitch": (8, 8),
                     "multi_line": (9, 9), "src_physical": (12, 12), "dst_physical": (13, 13),
                     "payload64": (27, 27)}  # SEMAPHORE_PAYLOAD_SIZE: c7b5+, reserved on c6b5

def launch_dma(*, transfer: int = DMA_TRANSFER_NONE, flush: bool = False, semaphore: int = DMA_SEM_NONE, src_pitch: bool = False,
               dst_pitch: bool = False, multi_line: bool = False, src_physical: bool = False, dst_physical: bool = False,
               payload64: bool = False) -> int:
  """The LAUNCH_DMA value: transfer type, flush before the semaphore, semaphore release type, pitch (not block-linear)
  layouts, several lines, physical (not virtual) addresses, 64-bit semaphore payload."""
  return _pack(LAUNCH_DMA_FIELDS, "LAUNCH_DMA", transfer=transfer, flush=flush, semaphore=semaphore, src_pitch=src_pitch,
               dst_pitch=dst_pitch, multi_line=multi_line, src_physical=src_physical, dst_physical=dst_physical, payload64=payload64)

def decode_launch_dma(value: int) -> dict[str, int]: return _unpack(LAUNCH_DMA_FIELDS, value)
