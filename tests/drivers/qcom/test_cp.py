"""drivers/qcom/cp.py and the packets of the QCOM queue: headers against hand-computed words (with their parity bits),
the a6xx/a7xx register tables against Mesa's a6xx.xml, and a launch, signal, wait, timestamp, barrier and copy decoded
field by field by this test's own reading of adreno_pm4.xml."""
from types import SimpleNamespace
import numpy as np
import pytest
from ir.dtype import Image, dtypes
from codegen.ir3_compiler import Lib
from drivers.hcq import HCQSignal, PatchSlot, fill
from drivers.gpu_memory import GPUBuffer
from drivers.qcom import cp, descriptors
from drivers.qcom.queues import dispatch_words, queue_for

def test_parity_is_odd_parity():
  # the bit that makes the field plus itself have an odd number of ones
  assert [cp.parity(x) for x in (0, 1, 2, 3, 0x7F, 0xA9B0, 0xA9D4)] == [1, 0, 0, 1, 0, 0, 1]

@pytest.mark.parametrize("words, header", [
  (cp.pkt7(0x26), 0x7026_8000),              # CP_WAIT_FOR_IDLE: count 0 (parity 1 at b15), opcode 0x26 (3 ones: 0 at b23)
  (cp.pkt7(0x33, 0, 1, 2, 3), 0x70B3_0004),  # CP_EXEC_CS: count 4 (one 1: 0), opcode 0x33 (4 ones: 1 at b23)
  (cp.pkt7(0x34, 1, 2, 3), 0x7034_8003),     # CP_LOAD_STATE6_FRAG: count 3 (two 1s: 1 at b15), 0x34 (3 ones: 0)
  (cp.pkt7(0x3C, *range(6)), 0x70BC_8006),   # CP_WAIT_REG_MEM: count 6 -> 1, 0x3c -> 1
  (cp.pkt4(0xA9B0, *range(6)), 0x40A9_B086), # SP_CS_CNTL_0: count 6 (two 1s: 1 at b7), reg 0xa9b0 (7 ones: 0 at b27)
  (cp.pkt4(0xB990, *range(12)), 0x40B9_908C),
  (cp.pkt4(0xA9D4, *range(12)), 0x48A9_D48C),  # reg 0xa9d4 has 8 ones: parity 1 at b27
])
def test_headers_against_hand_computed_words(words, header):
  assert words[0] == header

def test_header_limits():
  with pytest.raises(ValueError, match="1..127"): cp.pkt4(0xA9B0, *range(128))
  with pytest.raises(ValueError, match="18 bits"): cp.pkt4(1 << 18, 0)
  with pytest.raises(ValueError, match="16383"): cp.pkt7(0x10, *range(1 << 14))

# a6xx.xml offsets, by name: (a6xx, a7xx)
A6XX_XML = {"sp_update_cntl": (0xBB08, 0xAB1F), "sp_cs_const_config": (0xB987, 0xA9CD), "sp_cs_ndrange_0": (0xB990, 0xA9D4),
            "sp_cs_wge_cntl": (0xB998, 0xA9DB), "sp_cs_kernel_group_x": (0xB999, 0xA9DC), "sp_cs_uav_base": (0xA9F2, 0xA9F8),
            "sp_cs_const_config_0": (0xB997, None), "sp_cs_wie_cntl_0": (None, 0xA9C2), "sp_cs_wie_cntl_1": (None, 0xA9C3),
            "sp_cs_ndrange_7": (None, 0xA9DF), "sp_ps_wave_cntl": (None, 0xA9C6), "sp_reg_prog_id_0": (None, 0xA9C8),
            "sp_cs_cntl_0": (0xA9B0, 0xA9B0), "sp_cs_config": (0xA9BB, 0xA9BB), "sp_mode_cntl": (0xAB00, 0xAB00),
            "cp_always_on_counter": (0x0980, 0x0980)}

def test_register_tables_match_a6xx_xml():
  for name, (a6, a7) in A6XX_XML.items(): assert (getattr(cp.A6XX, name), getattr(cp.A7XX, name)) == (a6, a7), name

def test_register_fields():
  assert cp.sp_cs_cntl_0(half_regs=1, full_regs=3, branchstack=32) == 1 << 1 | 3 << 7 | 32 << 14
  with pytest.raises(ValueError, match="full register footprint 64"): cp.sp_cs_cntl_0(0, 64, 0)
  assert cp.sp_cs_cntl_1(0, 4) == 1 and cp.sp_cs_cntl_1(4096, 200) == 3 | cp.CONSTLEN_256 << 5  # (4096-1)//1024 = 3
  assert cp.sp_cs_const_config(5) == 2 | 1 << 8  # 5 vec4 round up to 8 = 2 units of 4 (shr="2"), ENABLED
  assert cp.sp_cs_ndrange_0((32, 2, 1)) == 3 | 31 << 2 | 1 << 12 and cp.sp_cs_ndrange_7((32, 2, 1)) == 31 << 2 | 1 << 12
  with pytest.raises(ValueError, match="1..1024"): cp.sp_cs_ndrange_0((1025, 1, 1))
  assert cp.work_ids(0, 4) == 0x04FCFC00 and cp.sp_cs_wge_cntl(cp.THREAD128) == 0x2FC and cp.sp_cs_wie_cntl_1(cp.THREAD128) == 0x1FC
  assert cp.load_state6_0(cp.ST6_CONSTANTS, cp.SS6_INDIRECT, cp.SB6_CS_SHADER, 3) == 1 << 14 | 2 << 16 | 13 << 18 | 3 << 22

# ---------------- decoding what the queue emits ----------------

def parse(words: list[int]) -> list[tuple]:
  """("reg", offset, values) for type-4 and ("op", opcode, payload) for type-7 packets, checking each parity bit."""
  out, i = [], 0
  odd = lambda x: bin(x).count("1") % 2 == 1
  while i < len(words):
    h = words[i]
    if h >> 28 == 4:
      n, reg = h & 0x7F, h >> 8 & 0x3FFFF
      assert odd(n | (h >> 7 & 1) << 7) and odd(reg | (h >> 27 & 1) << 18), f"bad parity in {h:#x}"
      out.append(("reg", reg, list(words[i + 1:i + 1 + n])))
    else:
      assert h >> 28 == 7, f"word {i} ({h:#x}) is no type-4/7 header"
      n, op = h & 0x3FFF, h >> 16 & 0x7F
      assert odd(n | (h >> 15 & 1) << 14) and odd(op | (h >> 23 & 1) << 7), f"bad parity in {h:#x}"
      out.append(("op", op, list(words[i + 1:i + 1 + n])))
    i += 1 + n
  return out

def registers(packets) -> dict[int, int]:
  """Every register write of type-4 packets, by offset (consecutive registers from the first)."""
  return {reg + k: v for kind, reg, vals in packets if kind == "reg" for k, v in enumerate(vals)}

def fake_program(gen: int):
  lib = Lib(full_regs=3, half_regs=1, const_vec4=2, shared_bytes=2048, code=bytes(256 + 8))
  return SimpleNamespace(lib=lib, image=SimpleNamespace(va=0x1_0000_0000), instrlen=3, constlen=2, branchstack=32,
                         wgid_regid=0, localid_regid=4, name="k", textures=[], ibos=[])

@pytest.mark.parametrize("gen", [6, 7])
def test_a_launch_decoded_field_by_field(gen):
  regs = cp.REGISTERS[gen]
  packets = parse(dispatch_words(regs, fake_program(gen), (4, 2, 1), (32, 2, 1), 0x2_3456_7840))
  ops = [p[1] for p in packets if p[0] == "op"]
  assert ops[:2] == [0x65, 0x26] and ops[-3:] == [0x34, 0x34, 0x33]  # SET_MARKER, WAIT_FOR_IDLE ... 2x LOAD_STATE6_FRAG, EXEC_CS
  assert packets[0][2] == [8]                                           # RM6_COMPUTE
  r = registers(packets)
  nd = r[0xB990 if gen == 6 else 0xA9D4]
  assert (nd & 3, nd >> 2 & 0x3FF, nd >> 12 & 0x3FF, nd >> 22) == (3, 31, 1, 0)       # KERNELDIM 3, local size - 1
  base = 0xB990 if gen == 6 else 0xA9D4
  assert [r[base + k] for k in range(1, 7)] == [128, 0, 4, 0, 1, 0]                   # global sizes in invocations, offsets 0
  ids = r[0xB997] if gen == 6 else r[0xA9C2]
  assert (ids & 0xFF, ids >> 8 & 0xFF, ids >> 16 & 0xFF, ids >> 24) == (0, 0xFC, 0xFC, 4)  # wg id in r0.x, local id in r1.x (regid 4)
  if gen == 6: assert 0xA9C2 not in r and r[0xB998] & 0xFF == 0xFC and [r[0xB999 + k] for k in range(3)] == [1, 1, 1]
  else:
    assert 0xB997 not in r and r[0xA9DB] & 0xFF == 0xFC and [r[0xA9DC + k] for k in range(3)] == [1, 1, 1]
    assert r[0xA9DF] == 31 << 2 | 1 << 12 and r[0xA9C3] & 0xFF == 0xFC and r[0xA9C6] == 0
  cntl0 = r[0xA9B0]
  assert (cntl0 >> 1 & 0x3F, cntl0 >> 7 & 0x3F, cntl0 >> 14 & 0x3F, cntl0 >> 20 & 1, cntl0 >> 31) == (1, 3, 32, 0, 0)  # footprints, no merged regs
  assert r[0xA9B1] & 0x1F == 1 and r[0xA9B1] >> 5 & 3 == 0                          # SHARED_SIZE max((2048-1)//1024, 1), CONSTLEN_128
  assert (r[0xA9B3], r[0xA9B4], r[0xA9B5]) == (0, 0, 1)                              # entry 0, SP_CS_BASE 0x1_0000_0000
  assert r[0xA9BB] == 1 << 8 and r[0xA9BC] == 3                                      # SP_CS_CONFIG ENABLED, SP_CS_INSTR_SIZE
  assert r[0xB987 if gen == 6 else 0xA9CD] == 1 | 1 << 8                             # CONSTLEN 2 vec4 -> 4 -> 1 unit of 4, ENABLED
  assert r[0xBB08 if gen == 6 else 0xAB1F] == 1 << 5 | 1 << 6 and r[0xAB00] == 1 | 2 << 1  # CS_STATE|CS_UAV; demotion, ISAMMODE_GL
  shader, consts, launch = packets[-3][2], packets[-2][2], packets[-1][2]
  for load, (typ, units, addr) in ((shader, (0, 3, 0x1_0000_0000)), (consts, (1, 2, 0x2_3456_7840))):
    d0 = load[0]
    assert (d0 & 0x3FFF, d0 >> 14 & 3, d0 >> 16 & 3, d0 >> 18 & 0xF, d0 >> 22) == (0, typ, 2, 13, units)  # SS6_INDIRECT, SB6_CS_SHADER
    assert load[1] | load[2] << 32 == addr
  assert launch == [0, 4, 2, 1]                                                     # NGROUPS_X/Y/Z

@pytest.mark.parametrize("gen", [6, 7])
def test_an_image_launch_loads_textures_a_sampler_and_ibos(gen):
  regs, prg = cp.REGISTERS[gen], fake_program(gen)
  prg.textures, prg.ibos = [(0, [0] * 16), (2, [0] * 16)], [(1, [0] * 16)]
  packets = parse(dispatch_words(regs, prg, (1, 1, 1), (4, 1, 1), 0x2_0000_0000, 0x3_0000_1000))
  r = registers(packets)
  assert r[0xA9BB] == 1 << 8 | 2 << 9 | 1 << 17 | 1 << 22                           # ENABLED, NTEX 2, NSAMP 1, NUAV 1
  assert (r[0xA9BA], r[0xAA00]) == (2, 1)                                            # SP_CS_TSIZE, SP_CS_USIZE
  # descriptors from 0x3_0000_1000: 2 textures (64 bytes each), the sampler, then the IBO 64 bytes after the sampler
  assert r[0xA9E6] | r[0xA9E7] << 32 == 0x3_0000_1000 and r[0xA9E2] | r[0xA9E3] << 32 == 0x3_0000_1080
  uav = 0xA9F2 if gen == 6 else 0xA9F8
  assert r[uav] | r[uav + 1] << 32 == 0x3_0000_10C0
  loads = [p[2] for p in packets if p[:2] == ("op", 0x34)][2:]                       # after the shader and the constants
  fields = [(d[0] >> 14 & 3, d[0] >> 16 & 3, d[0] >> 18 & 0xF, d[0] >> 22, d[1] | d[2] << 32) for d in loads]
  # (STATE_TYPE, STATE_SRC, STATE_BLOCK, NUM_UNIT, address): samplers ST6_SHADER and textures ST6_CONSTANTS in SB6_CS_TEX,
  # IBOs ST6_UAV in SB6_CS_SHADER, all SS6_INDIRECT
  assert fields == [(0, 2, 5, 1, 0x3_0000_1080), (1, 2, 5, 2, 0x3_0000_1000), (3, 2, 13, 1, 0x3_0000_10C0)]
  assert packets[-1][1] == 0x33                                                      # then CP_EXEC_CS

def test_an_image_descriptor_of_a_jit_input_gets_its_base_at_each_submit():
  q = queue_for(6, 0x1000)()
  words = descriptors.image(Image(2, 4), dtypes.float32, swizzle=True)
  view = np.zeros(16, np.uint32)
  q.write_descriptor(view, words, PatchSlot("img"))
  assert list(view) == words                                                         # the base is not known yet
  for v, i, patch in q._mem_patches: v[i] = fill(patch, {"img": GPUBuffer(0x5_0000_2040, 4096)})
  assert list(view) == descriptors.with_base(words, 0x5_0000_2040)

def test_a_local_size_over_1024_is_refused():
  q = queue_for(6, 0x1000)()
  with pytest.raises(RuntimeError, match="2048 invocations"): q.exec(fake_program(6), [], (1, 1, 1), (32, 32, 2))

def signal_at(va: int) -> HCQSignal: return HCQSignal(np.zeros(2, np.uint64), "QCOM", va=va)

@pytest.mark.parametrize("gen", [6, 7])
def test_signal_wait_timestamp_barrier(gen):
  q = queue_for(gen, 0x5000)()
  sig = signal_at(0x7_0000_1230)
  q.wait(sig, 0x1_0000_0005).signal(sig, 9).timestamp(sig).memory_barrier()
  packets = parse(q.resolved())
  assert packets[0] == ("op", 0x3C, [5 | 1 << 4, 0x1230, 7, 5, 0xFFFFFFFF, 32])     # WRITE_GE, POLL_MEMORY; addr; low 32 bits of 9..; mask
  assert packets[1] == ("op", 0x26, [])
  ev = packets[2]
  assert ev[1] == 0x46 and ev[2][1:] == [0x1230, 7, 9] and ev[2][0] & 0xFF == 4      # CACHE_FLUSH_TS writing 9
  assert ev[2][0] >> 27 & 1 == (gen == 7) and ev[2][0] >> 20 & 7 == 0 and ev[2][0] >> 24 & 1 == 0  # a7xx: WRITE_ENABLED, USER_32B, RAM
  assert packets[3] == ("op", 0x26, []) and packets[4] == ("op", 0x3E, [0x0980 | 2 << 18 | 1 << 30, 0x1238, 7])  # 64-bit counter to +8
  barrier = packets[5:]
  if gen == 6: assert barrier[:2] == [("op", 0x46, [4, 0x5000, 0, 0]), ("op", 0x46, [0x31])]  # CACHE_FLUSH_TS to scratch, CACHE_INVALIDATE
  else: assert barrier[:2] == [("op", 0x46, [0x32]), ("op", 0x46, [0x33])]                    # CACHE_FLUSH7, CACHE_INVALIDATE7
  assert barrier[2:] == [("op", 0x12, []), ("op", 0x26, [])]                                 # WAIT_MEM_WRITES, WAIT_FOR_IDLE

def test_copy_is_cp_memcpy_with_patched_addresses():
  q = queue_for(7, 0)()
  dest = GPUBuffer(0x3_0000_0000, 4096)
  q.copy(dest, PatchSlot("input0"), 64)
  packets = parse(q.resolved({"input0": GPUBuffer(0x4_0000_0100, 64)}))
  assert packets[-2] == ("op", 0x75, [16, 0x100, 4, 0, 3]) and packets[-1] == ("op", 0x12, [])  # DWORDS, SRC lo/hi, DST lo/hi
  with pytest.raises(ValueError, match="multiple of 4"): q.copy(dest, dest, 6)
