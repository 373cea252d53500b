import struct
import pytest
from drivers.nv.pushbuf import (DMA_NON_PIPELINED, DMA_SEM_FOUR_WORD, IMMEDIATE, INCREMENT_ONCE, INCREMENTING, NON_INCREMENTING,
                                SEM_ACQ_CIRC_GEQ, SEM_RELEASE, SUBC_COMPUTE, SUBC_COPY, SUBC_HOST, Compute, Copy, GpEntry, Host,
                                decode_gpfifo_entry, decode_header, decode_launch_dma, decode_pushbuffer, decode_sem_execute,
                                gpfifo_entry, header, immediate, launch_dma, method, sem_execute)

def test_header_layout():
  # opcode 31:29, count 28:16, subchannel 15:13, offset >> 2 in 11:0 (written out by hand)
  assert method(SUBC_COMPUTE, Compute.SEND_PCAS_A, 0x1234) == [0x2001_20AD, 0x1234]
  assert immediate(SUBC_COPY, Copy.LAUNCH_DMA, 0x182) == [0x8182_80C0]
  assert method(SUBC_COPY, 0x400, 1, 2, opcode=NON_INCREMENTING) == [3 << 29 | 2 << 16 | 4 << 13 | 0x100, 1, 2]
  for op, sub, off, count in [(INCREMENTING, 0, 0x6C, 5), (NON_INCREMENTING, 7, 0x3FFC, 0x1FFF), (INCREMENT_ONCE, 1, 0x320, 96), (IMMEDIATE, 4, 0x300, 0x14)]:
    assert decode_header(header(op, sub, off, count)) == (op, sub, off, count)

def test_header_errors():
  with pytest.raises(ValueError, match="subchannel 8"): method(8, 0x0, 1)
  with pytest.raises(ValueError, match="0x6d"): method(0, 0x6D, 1)
  with pytest.raises(ValueError, match="0x4000"): method(0, 0x4000, 1)
  with pytest.raises(ValueError, match="13 bits"): immediate(0, 0x300, 0x2000)
  with pytest.raises(ValueError, match="13 bits"): method(0, 0x320, *([0] * 0x2000))
  with pytest.raises(ValueError, match="no data"): method(0, 0x320)
  with pytest.raises(ValueError, match="dword"): method(0, 0x320, 1 << 32)
  with pytest.raises(ValueError, match="opcode 2"): header(2, 0, 0, 1)

def test_decode_pushbuffer_expands_every_header_kind():
  words = [1 << 29 | 3 << 16 | 1 << 13 | 0x400 >> 2, 10, 11, 12,   # incrementing: 0x400, 0x404, 0x408
           0,                                                       # NOP
           3 << 29 | 2 << 16 | 4 << 13 | 0x320 >> 2, 20, 21,        # non-incrementing: 0x320 twice
           0x0001_0000 | 0x10,                                      # set sub-device mask: no data
           5 << 29 | 3 << 16 | 1 << 13 | 0x320 >> 2, 30, 31, 32,    # increment-once: 0x320, then 0x324, 0x324
           4 << 29 | 0x14 << 16 | 4 << 13 | 0x300 >> 2]             # immediate 0x14 to 0x300
  assert list(decode_pushbuffer(words)) == [(1, 0x400, 10), (1, 0x404, 11), (1, 0x408, 12), (4, 0x320, 20), (4, 0x320, 21),
                                            (1, 0x320, 30), (1, 0x324, 31), (1, 0x324, 32), (4, 0x300, 0x14)]
  built = method(1, 0x400, 10, 11, 12) + method(4, 0x320, 20, 21, opcode=NON_INCREMENTING) + immediate(4, 0x300, 0x14)
  assert list(decode_pushbuffer(built)) == [(1, 0x400, 10), (1, 0x404, 11), (1, 0x408, 12), (4, 0x320, 20), (4, 0x320, 21), (4, 0x300, 0x14)]

def test_decode_pushbuffer_errors():
  with pytest.raises(ValueError, match="wants 3 dwords, 1 left"): list(decode_pushbuffer([1 << 29 | 3 << 16, 1]))
  for opcode in (2, 6, 7):
    with pytest.raises(ValueError, match=f"opcode {opcode}"): list(decode_pushbuffer([opcode << 29 | 1 << 16, 0]))
  with pytest.raises(ValueError, match="opcode 0"): list(decode_pushbuffer([1 << 18 | 0x40, 0]))  # the legacy method format

def test_host_semaphore_release_sequence():
  va, value = 0x7f12_3456_7890, 0x1_0000_0002
  cmd = method(SUBC_HOST, Host.SEM_ADDR_LO, va & 0xffffffff, va >> 32, value & 0xffffffff, value >> 32,
               sem_execute(SEM_RELEASE, payload64=True, timestamp=True, wfi=True))
  writes = list(decode_pushbuffer(cmd))
  assert [off for _, off, _ in writes] == [0x5C, 0x60, 0x64, 0x68, 0x6C]
  assert writes[-1][2] == 0x0310_0001

def test_sem_execute():
  assert sem_execute(SEM_RELEASE, payload64=True, timestamp=True, wfi=True) == 0x0310_0001  # tinygrad's release (nv.md section 3)
  assert sem_execute(SEM_ACQ_CIRC_GEQ, payload64=True) == 0x0100_0003                      # tinygrad's wait
  assert sem_execute(SEM_ACQ_CIRC_GEQ, switch_tsg=True) == 0x1003
  assert decode_sem_execute(0x0310_0001) == {"operation": 1, "switch_tsg": 0, "wfi": 1, "payload64": 1, "timestamp": 1}
  with pytest.raises(ValueError, match="'operation' is 3 bits wide: 8"): sem_execute(8)

def test_launch_dma():
  assert launch_dma(transfer=DMA_NON_PIPELINED, src_pitch=True, dst_pitch=True) == 0x182  # linear copy
  assert launch_dma(flush=True, semaphore=DMA_SEM_FOUR_WORD) == 0x14                     # semaphore release
  assert launch_dma(multi_line=True, src_physical=True, dst_physical=True, payload64=True) == 1 << 9 | 1 << 12 | 1 << 13 | 1 << 27
  assert decode_launch_dma(0x182) == {"transfer": 2, "flush": 0, "semaphore": 0, "src_pitch": 1, "dst_pitch": 1, "multi_line": 0,
                                      "src_physical": 0, "dst_physical": 0, "payload64": 0}
  assert launch_dma(**decode_launch_dma(0x0800_0214 | 1 << 9)) == 0x0800_0214 | 1 << 9
  with pytest.raises(ValueError, match="'transfer'"): launch_dma(transfer=4)

def test_gpfifo_entry():
  # VA 0x12_3456_7890 in 39:2, length 0x40 in 62:42, LEVEL=subroutine (41), SYNC (63): worked out by hand
  entry = gpfifo_entry(0x12_3456_7890, 0x40, subroutine=True, sync=True)
  assert entry == 0x8001_0212_3456_7890
  lo, hi = struct.unpack("<II", struct.pack("<Q", entry))  # GP_ENTRY0 / GP_ENTRY1 as the host header splits them
  assert (lo >> 2 << 2, hi & 0xff, hi >> 9 & 1, hi >> 10 & 0x1fffff, hi >> 31) == (0x3456_7890, 0x12, 1, 0x40, 1)
  assert decode_gpfifo_entry(entry) == GpEntry(0x12_3456_7890, 0x40, True, True, False)
  assert gpfifo_entry(0x1000, 3, conditional=True) == 3 << 42 | 0x1000 | 1
  assert decode_gpfifo_entry(gpfifo_entry(0xff_ffff_fffc, 0x1f_ffff)) == GpEntry(0xff_ffff_fffc, 0x1f_ffff)
  with pytest.raises(ValueError, match="0x1002"): gpfifo_entry(0x1002, 1)
  with pytest.raises(ValueError, match="2\\*\\*40"): gpfifo_entry(1 << 40, 1)
  with pytest.raises(ValueError, match="21 bits"): gpfifo_entry(0x1000, 1 << 21)

def test_method_offsets_match_the_fact_sheet():
  host = (Host.SET_OBJECT, Host.NON_STALL_INTERRUPT, Host.MEM_OP_A, Host.MEM_OP_D, Host.SEM_ADDR_LO, Host.SEM_EXECUTE, Host.WFI)
  assert host == (0, 0x20, 0x28, 0x34, 0x5C, 0x6C, 0x78)
  assert (Compute.SET_QMD_VERSION, Compute.SEND_PCAS_A, Compute.SEND_SIGNALING_PCAS2_B, Compute.SET_SHADER_LOCAL_MEMORY_A,
          Compute.INVALIDATE_SHADER_CACHES_NO_WFI, Compute.SET_REPORT_SEMAPHORE_D) == (0x288, 0x2B4, 0x2C0, 0x790, 0x1698, 0x1B0C)
  copy = (Copy.SET_SEMAPHORE_A, Copy.SET_SEMAPHORE_PAYLOAD_UPPER, Copy.LAUNCH_DMA, Copy.OFFSET_OUT_LOWER, Copy.LINE_COUNT)
  assert copy == (0x240, 0x24C, 0x300, 0x40C, 0x41C)
