"""The Adreno command processor of the QCOM model, fed packet streams built here from the field layouts of kgsl's
adreno_pm4types.h (headers) and Mesa's adreno_pm4.xml / a6xx.xml (payloads); the encoders below write those numbers,
not the model's tables. Register writes, memory writes, event timestamps, memory waits, register copies, nested IBs,
state loads and faults that name the packet and the dword; a CP_EXEC_CS of a shader made of Mesa disasm.c words."""
import time
import numpy as np
import pytest
from drivers import system
from drivers.mock.qcom.cp import CP, CPFault, Memory

def parity(x: int) -> int: return int(bin(x).count("1") % 2 == 0)   # pm4_calc_odd_parity_bit: 1 for an even popcount

def pkt4(reg: int, *values: int) -> list[int]:
  # cp_type4_packet: type 4 in 31:28, count 6:0, parity(count) at 7, register 25:8, parity(register) at 27
  return [4 << 28 | len(values) | parity(len(values)) << 7 | reg << 8 | parity(reg) << 27, *values]

def pkt7(op: int, *payload: int) -> list[int]:
  # cp_type7_packet: type 7 in 31:28, count 13:0, parity(count) at 15, opcode 22:16, parity(opcode) at 23
  return [7 << 28 | len(payload) | parity(len(payload)) << 15 | op << 16 | parity(op) << 23, *payload]

NOP, WAIT_FOR_IDLE, EXEC_CS, LOAD_STATE6_FRAG, WAIT_REG_MEM, MEM_WRITE, REG_TO_MEM, INDIRECT_BUFFER, EVENT_WRITE, SET_MARKER, MEM_TO_MEM, MEMCPY = \
  0x10, 0x26, 0x33, 0x34, 0x3C, 0x3D, 0x3E, 0x3F, 0x46, 0x65, 0x73, 0x75   # adreno_pm4.xml adreno_pm4_type3_packets
CACHE_FLUSH_TS = 4                                                    # vgt_event_type
lo, hi = (lambda a: a & 0xFFFFFFFF), (lambda a: a >> 32)

class Machine:
  """A CP over one 256 KiB buffer mapped at its own host address (GPU VA == host address)."""
  def __init__(self, gen: int = 6):
    self.buf = np.zeros(1 << 16, np.uint32)
    self.va = system.address_of(self.buf)
    self.mem = Memory()
    self.mem.map(self.va, self.buf.nbytes, self.va)
    self.cp = CP(gen, self.mem)
    self.ib_at = 0x8000   # dword index where IBs are placed
  def ib(self, words: list[int]) -> tuple[int, int]:
    at = self.ib_at
    self.buf[at:at + len(words)] = words
    self.ib_at += len(words) + 16
    return self.va + 4 * at, len(words)
  def run(self, words: list[int]) -> bool:
    self.cp.start(*self.ib(words))
    return self.cp.run()
  def addr(self, dword: int) -> int: return self.va + 4 * dword

def test_register_writes_and_parity():
  m = Machine()
  assert m.run(pkt4(0xA9B0, 0x11, 0x22) + pkt7(NOP, 0xDEAD) + pkt7(WAIT_FOR_IDLE))   # SP_CS_CNTL_0, SP_CS_CNTL_1
  assert m.cp.regs[0xA9B0] == 0x11 and m.cp.regs[0xA9B1] == 0x22
  bad_count = pkt4(0xA9B0, 1)
  bad_count[0] ^= 1 << 7
  with pytest.raises(CPFault, match="dword 0 has a bad parity"): m.run(bad_count)
  bad_reg = pkt4(0xA9B0, 1)
  bad_reg[0] ^= 1 << 27
  with pytest.raises(CPFault, match="parity"): m.run(bad_reg)
  bad_op = pkt7(NOP)
  bad_op[0] ^= 1 << 23
  with pytest.raises(CPFault, match="parity"): m.run(pkt7(NOP) + bad_op)
  with pytest.raises(CPFault, match="dword 2"): m.run(pkt7(NOP, 0) + pkt7(0x7E))   # 0x7E: no packet the model runs
  with pytest.raises(CPFault, match="type 0"): m.run([0])
  with pytest.raises(CPFault, match="past the IB's end"): m.run(pkt7(MEM_WRITE, 1, 2, 3)[:3])

def test_mem_write_and_event_write_timestamps():
  m = Machine()
  assert m.run(pkt7(MEM_WRITE, lo(m.addr(10)), hi(m.addr(10)), 7, 8))
  assert list(m.buf[10:12]) == [7, 8]
  # CP_EVENT_WRITE: EVENT 7:0 then ADDR (64-bit) and the value written after the flush
  assert m.run(pkt7(EVENT_WRITE, CACHE_FLUSH_TS, lo(m.addr(20)), hi(m.addr(20)), 0x1234))
  assert m.buf[20] == 0x1234
  # TIMESTAMP (b30): the 64-bit always-on counter instead of the value
  assert m.run(pkt7(EVENT_WRITE, CACHE_FLUSH_TS | 1 << 30, lo(m.addr(22)), hi(m.addr(22))))
  first = int(m.buf[22]) | int(m.buf[23]) << 32
  time.sleep(0.01)
  assert m.run(pkt7(EVENT_WRITE, CACHE_FLUSH_TS | 1 << 30, lo(m.addr(22)), hi(m.addr(22))))
  assert 0.5 * 192_000 < (int(m.buf[22]) | int(m.buf[23]) << 32) - first < 5 * 192_000   # 10 ms at 19.2 MHz
  with pytest.raises(CPFault, match="CP_EVENT_WRITE at .*dword 0: event 99"): m.run(pkt7(EVENT_WRITE, 99))
  with pytest.raises(CPFault, match="not mapped"): m.run(pkt7(EVENT_WRITE, CACHE_FLUSH_TS, 0x1000, 0, 1))

def test_event_write7_on_a7xx():
  m = Machine(gen=7)
  # CP_EVENT_WRITE7: WRITE_SRC 22:20 (0 user 32-bit, 3 always-on), WRITE_ENABLED b27, then ADDR and PAYLOAD_0
  assert m.run(pkt7(EVENT_WRITE, CACHE_FLUSH_TS | 1 << 27, lo(m.addr(30)), hi(m.addr(30)), 0xBEEF))
  assert m.buf[30] == 0xBEEF
  assert m.run(pkt7(EVENT_WRITE, CACHE_FLUSH_TS | 3 << 20 | 1 << 27, lo(m.addr(32)), hi(m.addr(32))))
  assert m.buf[32] or m.buf[33]
  with pytest.raises(CPFault, match="CP_EVENT_WRITE7.*ONCHIP"): m.run(pkt7(EVENT_WRITE, CACHE_FLUSH_TS | 1 << 24 | 1 << 27, 0, 0, 1))

def test_wait_reg_mem_blocks_until_memory_changes():
  m = Machine()
  signal = m.addr(40)
  # FUNCTION 2:0 WRITE_GE (5), POLL 5:4 = POLL_MEMORY (1); POLL_ADDR, REF, MASK, DELAY_LOOP_CYCLES
  stream = pkt7(WAIT_REG_MEM, 5 | 1 << 4, lo(signal), hi(signal), 3, 0xFFFFFFFF, 16) + pkt7(MEM_WRITE, lo(m.addr(41)), hi(m.addr(41)), 1)
  assert not m.run(stream)
  assert not m.cp.run() and m.buf[41] == 0
  m.buf[40] = 3
  assert m.cp.run() and m.buf[41] == 1
  # signed compare (b3): 0xFFFFFFFF is -1 < 1; the mask applies before the compare
  m.buf[42] = 0xFFFFFFFF
  assert m.run(pkt7(WAIT_REG_MEM, 1 | 1 << 3 | 1 << 4, lo(m.addr(42)), hi(m.addr(42)), 1, 0xFFFFFFFF, 0))
  assert not m.run(pkt7(WAIT_REG_MEM, 1 | 1 << 4, lo(m.addr(42)), hi(m.addr(42)), 1, 0xFFFFFFFF, 0))   # unsigned: not < 1
  m.buf[43] = 0x1200
  assert m.run(pkt7(WAIT_REG_MEM, 3 | 1 << 4, lo(m.addr(43)), hi(m.addr(43)), 0x200, 0x0F00, 0))   # 0x1200 & 0xF00 == 0x200
  with pytest.raises(CPFault, match="FUNCTION 7"): m.run(pkt7(WAIT_REG_MEM, 7 | 1 << 4, 0, 0, 0, 0, 0))

def test_reg_to_mem_and_mem_to_mem():
  m = Machine()
  # CP_REG_TO_MEM: REG 17:0, CNT 29:18, 64B b30; DEST: here SP_CS_CNTL_1 written by a type-4 packet, then the counter
  assert m.run(pkt4(0xA9B1, 0x55) + pkt7(REG_TO_MEM, 0xA9B1 | 1 << 18, lo(m.addr(50)), hi(m.addr(50))))
  assert m.buf[50] == 0x55
  before = time.perf_counter_ns()
  assert m.run(pkt7(REG_TO_MEM, 0x0980 | 2 << 18 | 1 << 30, lo(m.addr(52)), hi(m.addr(52))))   # CP_ALWAYS_ON_COUNTER
  ticks = int(m.buf[52]) | int(m.buf[53]) << 32
  assert abs(ticks - before * 19.2 / 1000) < 19.2e6   # 19.2 MHz ticks, within a second
  # CP_MEM_TO_MEM: NEG_B (b1); DST, SRC_A, SRC_B: DST = A - B
  m.buf[60], m.buf[61] = 100, 30
  assert m.run(pkt7(MEM_TO_MEM, 1 << 1, lo(m.addr(62)), hi(m.addr(62)), lo(m.addr(60)), hi(m.addr(60)), lo(m.addr(61)), hi(m.addr(61))))
  assert m.buf[62] == 70

def test_memcpy_copies_dwords_from_src_to_dst():
  m = Machine()
  m.buf[100:110] = np.arange(1, 11)
  # adreno_pm4.xml CP_MEMCPY: DWORDS, SRC_LO, SRC_HI, DST_LO, DST_HI
  assert m.run(pkt7(MEMCPY, 10, lo(m.addr(100)), hi(m.addr(100)), lo(m.addr(200)), hi(m.addr(200))))
  np.testing.assert_array_equal(m.buf[200:210], np.arange(1, 11))
  assert m.buf[210] == 0 and m.buf[199] == 0   # exactly DWORDS dwords
  assert m.run(pkt7(MEMCPY, 8, lo(m.addr(100)), hi(m.addr(100)), lo(m.addr(102)), hi(m.addr(102))))   # overlapping: as if read first
  np.testing.assert_array_equal(m.buf[102:110], np.arange(1, 9))
  with pytest.raises(CPFault, match="payload dwords; CP_MEMCPY"): m.run(pkt7(MEMCPY, 1, lo(m.addr(100)), hi(m.addr(100)), lo(m.addr(200))))
  with pytest.raises(CPFault, match="page fault: SRC"): m.run(pkt7(MEMCPY, 1, 0, 0x10, lo(m.addr(200)), hi(m.addr(200))))

def test_indirect_buffers_nest_two_levels():
  m = Machine()
  inner = m.ib(pkt7(MEM_WRITE, lo(m.addr(70)), hi(m.addr(70)), 9))
  ib = lambda at, n: pkt7(INDIRECT_BUFFER, lo(at), hi(at), n)   # IB_BASE, IB_SIZE 19:0 in dwords
  assert m.run(ib(*inner)) and m.buf[70] == 9
  middle = m.ib(ib(*inner))
  with pytest.raises(CPFault, match="IB3"): m.run(ib(*middle))
  with pytest.raises(CPFault, match="not mapped"): m.run(ib(0x10000, 4))

def test_load_state_constants():
  m = Machine()
  # CP_LOAD_STATE6 dword 0: DST_OFF 13:0, STATE_TYPE 15:14 (1 constants), STATE_SRC 17:16 (0 direct, 2 indirect),
  # STATE_BLOCK 21:18 (13 SB6_CS_SHADER), NUM_UNIT 31:22 (vec4s)
  direct = 2 | 1 << 14 | 0 << 16 | 13 << 18 | 1 << 22
  assert m.run(pkt7(LOAD_STATE6_FRAG, direct, 1, 2, 3, 4))
  assert list(m.cp.consts[8:12]) == [1, 2, 3, 4]
  m.buf[80:88] = np.arange(10, 18)
  indirect = 0 | 1 << 14 | 2 << 16 | 13 << 18 | 2 << 22
  assert m.run(pkt7(LOAD_STATE6_FRAG, indirect, lo(m.addr(80)), hi(m.addr(80))))
  assert list(m.cp.consts[0:8]) == list(range(10, 18))
  with pytest.raises(CPFault, match="ST6_UAV"): m.run(pkt7(LOAD_STATE6_FRAG, 3 << 14 | 2 << 16 | 15 << 18 | 1 << 22, 0, 0))
  with pytest.raises(CPFault, match="past the 256-vec4"): m.run(pkt7(LOAD_STATE6_FRAG, 255 | 1 << 14 | 13 << 18 | 2 << 22, *range(8)))

@pytest.mark.parametrize("gen, cache_units", [(6, 64), (7, 127)])
def test_a_shader_preload_fits_the_instruction_cache(gen, cache_units):
  # Mesa freedreno_devices.py instr_cache_size (a630 64, a7xx 127: "we hang with 128"); STATE_TYPE 0 ST6_SHADER,
  # STATE_SRC 2 SS6_INDIRECT, STATE_BLOCK 13 SB6_CS_SHADER, NUM_UNIT 31:22 in 128-byte units
  m = Machine(gen)
  preload = lambda units: pkt7(LOAD_STATE6_FRAG, 2 << 16 | 13 << 18 | units << 22, lo(m.addr(0)), hi(m.addr(0)))
  assert m.run(preload(cache_units))
  with pytest.raises(CPFault, match=f"preload of {cache_units + 1} units; the instruction cache holds {cache_units}"):
    m.run(preload(cache_units + 1))

def test_exec_cs_checks_the_compute_state():
  m = Machine()
  with pytest.raises(CPFault, match="MERGEDREGS"): m.run(pkt4(0xA9B0, 1 << 31) + pkt7(EXEC_CS, 0, 1, 1, 1))
  code = m.addr(512) + -m.addr(512) % 32
  shader = pkt4(0xA9B4, lo(code), hi(code)) + pkt4(0xA9BC, 1)   # SP_CS_BASE (32-byte aligned), SP_CS_INSTR_SIZE
  # SP_CS_CNTL_0.THREADSIZE (b20) THREAD128 without SP_CS_WGE_CNTL.THREADSIZE (b9): "Must match"
  with pytest.raises(CPFault, match="THREADSIZE"): m.run(shader + pkt4(0xA9B0, 1 << 20) + pkt7(EXEC_CS, 0, 1, 1, 1))
  # SP_CS_CONST_CONFIG.CONSTLEN 40 (x4 = 160 vec4) past SP_CS_CNTL_1.CONSTANTRAMMODE 6:5 = 0 (CONSTLEN_128)
  with pytest.raises(CPFault, match="CONSTANTRAMMODE"): m.run(shader + pkt4(0xA9B0, 0) + pkt4(0xB987, 40) + pkt7(EXEC_CS, 0, 1, 1, 1))

def mov_f32(dst: int, const: int) -> int:
  # disasm.c: 20244000_00000020 "mov.f32f32 r0.x, c8.x" and 20244905_00000410 "(rpt1)mov.f32f32 r1.y, (r)c260.x": the
  # destination regid (4 * register + component) is in bits 39:32, the source const (4 * index + component) in 10:0
  return 0x20244000_00000000 | dst << 32 | const

# the registers that move between generations (a6xx.xml): SP_CS_CONST_CONFIG, SP_CS_NDRANGE_0 and where the
# workgroup / local id regids come from (SP_CS_CONST_CONFIG_0, variants A6XX; SP_CS_WIE_CNTL_0 on a7xx)
GEN_REGS = {6: (0xB987, 0xB990, 0xB997), 7: (0xA9CD, 0xA9D4, 0xA9C2)}

def compute_stream(m: Machine, gen: int, out: int, footprint: int = 9, constlen: int = 1) -> list[int]:
  """A dispatch of one fiber running: r0.z:r0.w = c0.xy, r8.yzw = c1.xyz; stg.s32 g[r0.z], r8.y, 3; end."""
  const_config, ndrange_0, ids = GEN_REGS[gen]
  code = [mov_f32(2, 0), mov_f32(3, 1), mov_f32(33, 4), mov_f32(34, 5), mov_f32(35, 6),
          *[0] * 6,                            # disasm.c 00000000_00000000 "nop": the 6 slots before a memory instruction
          0xC0CA0500_03800042,                 # disasm.c "stg.s32 g[r0.z], r8.y, 3"
          0x03000000_00000000]                 # disasm.c "end"
  at = 200 + (-m.addr(200) % 32) // 4          # SP_CS_BASE is 32-byte aligned (a6xx.xml align="32")
  m.buf[at:at + 2 * len(code)] = np.array(code, np.uint64).view(np.uint32)
  base = m.addr(at)
  consts = [lo(out), hi(out), 0, 0, 11, 22, 33, 0]
  return (pkt7(SET_MARKER, 8) +                                              # RM6_COMPUTE
          pkt4(0xA9B0, footprint << 7) +                                    # SP_CS_CNTL_0: FULLREGFOOTPRINT 12:7 (vec4 registers)
          pkt4(0xA9B3, 0, lo(base), hi(base)) +                             # PROGRAM_COUNTER_OFFSET, SP_CS_BASE
          pkt4(0xA9BC, 1) +                                                 # SP_CS_INSTR_SIZE: one 128-byte unit
          pkt4(const_config, constlen | 1 << 8) +                           # SP_CS_CONST_CONFIG: CONSTLEN (shr 2: 4 vec4 each), ENABLED
          pkt4(ndrange_0, 0) +                                              # SP_CS_NDRANGE_0: local size 1x1x1
          pkt4(ids, 4 << 24 | 0xFC << 16 | 0xFC << 8 | 0) +                 # wgid r0.x, local id r1.x
          pkt7(LOAD_STATE6_FRAG, 1 << 14 | 13 << 18 | 2 << 22, *consts) +   # 2 vec4 of constants, direct
          pkt7(EXEC_CS, 0, 1, 1, 1))

@pytest.mark.parametrize("gen", [6, 7])
def test_exec_cs_runs_a_shader_that_stores_constants(gen):
  pytest.importorskip("drivers.mock.qcom.ir3_execute")
  m = Machine(gen)
  assert m.run(compute_stream(m, gen, m.addr(100)))
  assert list(m.buf[100:103]) == [11, 22, 33]

def test_exec_cs_faults_reach_the_cp():
  pytest.importorskip("drivers.mock.qcom.ir3_execute")
  m = Machine()
  with pytest.raises(CPFault, match="CP_EXEC_CS at .*shader hazard"): m.run(compute_stream(m, 6, m.addr(100), footprint=8))   # r8 outside
  with pytest.raises(CPFault, match="CP_EXEC_CS at .*shader fault.*0x1000"): m.run(compute_stream(m, 6, 0x1000))            # unmapped store
