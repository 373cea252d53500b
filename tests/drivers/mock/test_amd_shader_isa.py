"""The RDNA3 shader core per instruction family: machine words assembled here from the field layouts of AMD's "RDNA3
Instruction Set Architecture" guide (chapter 15, with each opcode number from its tables), run as a small kernel on
a memory of numpy arrays, results compared with numpy or hand-computed values.

Every program has the same frame: s[0:1] = output buffer, s[2:3] = input buffer; v0 = 4 * lane; v1, v2, v3 = the
lane's words of input blocks A, B, C (input + 0, 128, 256); then the words under test; then the listed registers are
stored to output blocks 0, 1, 2, ... (128 bytes each) and the program ends."""
from __future__ import annotations
from fractions import Fraction
import numpy as np
import pytest
from drivers.mock.amd.shader.dispatch import Dispatch, ShaderFault
from drivers.mock.amd.shader.execute import run
from drivers.mock.amd.shader.instruction import UnknownInstruction
from drivers.mock.amd.shader.memory_ops import ArrayMemory

LIT, VCC, EXEC, NULL, M0 = 255, 106, 126, 124, 125
def V(n: int) -> int: return 256 + n       # a VGPR as a 9-bit source
def I(n: int) -> int: return 128 + n if n >= 0 else 192 - n  # an inline integer constant
F1, FM1, F2, F05 = 242, 243, 244, 240      # inline 1.0, -1.0, 2.0, 0.5

# encodings (RDNA3 ISA guide 15.x): each returns its dwords
def sop1(op, sdst, s0): return [0x17D << 23 | sdst << 16 | op << 8 | s0]
def sop2(op, sdst, s0, s1): return [0b10 << 30 | op << 23 | sdst << 16 | s1 << 8 | s0]
def sopc(op, s0, s1): return [0x17E << 23 | op << 16 | s1 << 8 | s0]
def sopk(op, sdst, imm): return [0xB << 28 | op << 23 | sdst << 16 | imm & 0xFFFF]
def sopp(op, imm=0): return [0x17F << 23 | op << 16 | imm & 0xFFFF]
def smem(op, sdata, sbase, offset, soffset=NULL): return [0x3D << 26 | op << 18 | sdata << 6 | sbase >> 1, soffset << 25 | offset & 0x1FFFFF]
def vop1(op, vdst, s0): return [0x3F << 25 | vdst << 17 | op << 9 | s0]
def vop2(op, vdst, s0, vsrc1): return [op << 25 | vdst << 17 | vsrc1 << 9 | s0]
def vopc(op, s0, vsrc1): return [0x3E << 25 | op << 17 | vsrc1 << 9 | s0]
def vop3(op, vdst, s0, s1=0, s2=0, neg=0, abs_=0, opsel=0, clamp=0, omod=0):
  return [0x35 << 26 | op << 16 | clamp << 15 | opsel << 11 | abs_ << 8 | vdst, neg << 29 | omod << 27 | s2 << 18 | s1 << 9 | s0]
def vop3sd(op, vdst, sdst, s0, s1=0, s2=0): return [0x35 << 26 | op << 16 | sdst << 8 | vdst, s2 << 18 | s1 << 9 | s0]
def vop3p(op, vdst, s0, s1, s2=0, opsel=0, opsel_hi=3, neg=0, neg_hi=0):
  return [0xCC << 24 | op << 16 | (opsel_hi >> 2) << 14 | opsel << 11 | neg_hi << 8 | vdst, neg << 29 | (opsel_hi & 3) << 27 | s2 << 18 | s1 << 9 | s0]
def vopd(opx, vdstx, srcx0, vsrcx1, opy, vdsty, srcy0, vsrcy1):
  return [0x32 << 26 | opx << 22 | opy << 17 | vsrcx1 << 9 | srcx0, vdstx << 24 | (vdsty >> 1) << 17 | vsrcy1 << 9 | srcy0]
def ds(op, vdst, addr, data0=0, data1=0, offset0=0, offset1=0):
  return [0x36 << 26 | op << 18 | offset1 << 8 | offset0, vdst << 24 | data1 << 16 | data0 << 8 | addr]
def glob(op, vdst, addr, data=0, saddr=NULL, offset=0, glc=0, seg=2):
  return [0x37 << 26 | op << 18 | seg << 16 | glc << 14 | offset & 0x1FFF, vdst << 24 | saddr << 16 | data << 8 | addr]

GLOBAL_LOAD_B32, GLOBAL_STORE_B32, S_ENDPGM = 20, 26, 48
def frame(block: int) -> list[int]:
  """v_lshlrev_b32 v0, 2, v0, then global_load_b32 of v1, v2, v3 from the three input blocks."""
  return (vop2(24, 0, I(2), 0) + glob(GLOBAL_LOAD_B32, 1, 0, saddr=2) + glob(GLOBAL_LOAD_B32, 2, 0, saddr=2, offset=block)
          + glob(GLOBAL_LOAD_B32, 3, 0, saddr=2, offset=2 * block))

def execute(words: list[int], stores: list[int], a=None, b=None, c=None, dtype=np.uint32, lanes=32, rsrc1=0xF << 16 | 1 << 23 | 0xF,
            lds=0, groups=1, extra=None, wave32=True):
  """Run frame + words + one global_store_b32 per register in `stores`; returns the stored blocks as `dtype`
  (lanes x len(stores)). Blocks are 4 * lanes bytes; `extra` (bytes) lands at input + 0x800 for scalar loads."""
  block = 4 * lanes
  inp = np.zeros(0x1000, np.uint8)
  for k, x in enumerate((a, b, c)):
    if x is not None: inp[block * k:block * (k + 1)] = np.frombuffer(np.ascontiguousarray(x).tobytes()[:block].ljust(block, b"\0"), np.uint8)
  if extra is not None: inp[0x800:0x800 + len(extra)] = np.frombuffer(extra, np.uint8)
  body = frame(block) + list(words)
  for k, r in enumerate(stores): body += glob(GLOBAL_STORE_B32, 0, 0, data=r, saddr=0, offset=block * k)
  body += sopp(S_ENDPGM)
  code = np.array(body, np.uint32).view(np.uint8)
  mem = ArrayMemory(np.zeros(0x30000, np.uint8))
  mem.data[0x1000:0x1000 + code.size] = code
  mem.data[0x20000:0x20000 + inp.size] = inp
  out_va, in_va = 0x10000, 0x20000
  d = Dispatch("gfx1100", 0x1000, rsrc1, 4 << 1 | 1 << 7, 0, (out_va, 0, in_va, 0), (groups, 1, 1), (lanes, 1, 1), wave32, lds)
  run(d, mem)
  out = mem.data[out_va:out_va + block * len(stores)].view(np.uint32).reshape(len(stores), lanes).T
  return out.view(dtype) if dtype != np.uint32 else out

f32 = lambda x: np.asarray(x, np.float32)
def u32(x) -> np.ndarray: return np.asarray(x).view(np.uint32) if np.asarray(x).dtype.itemsize == 4 else np.asarray(x, np.uint32)

# ---- SOP1/SOP2/SOPC/SOPK/SOPP
def test_scalar_alu_carry_compare_select_and_branch():
  prog = (sopk(0, 10, 0xFFFF)               # s_movk_i32 s10, -1
        + sop2(0, 11, 10, I(3))              # s_add_u32 s11, s10, 3  -> 2, SCC = carry
        + sop2(4, 12, I(5), I(6))            # s_addc_u32 s12, 5, 6 + SCC -> 12
        + sopc(4, I(7), I(9))                # s_cmp_lt_i32 7, 9 -> SCC 1
        + sop2(48, 13, I(40), I(50))         # s_cselect_b32 s13, 40, 50 -> 40
        + sop2(8, 14, 10, I(4))              # s_lshl_b32 s14, -1, 4
        + sop1(0, 15, I(1))                  # s_mov_b32 s15, 1
        + sopc(6, 15, I(1))                  # s_cmp_eq_u32 s15, 1 -> SCC 1
        + sopp(34, 1)                        # s_cbranch_scc1 +1: skips the next word
        + sop1(0, 15, I(9))                  # s_mov_b32 s15, 9 (skipped)
        + sopk(15, 15, 100)                  # s_addk_i32 s15, 100 -> 101
        + vop1(1, 5, 11) + vop1(1, 6, 12) + vop1(1, 7, 13) + vop1(1, 8, 14) + vop1(1, 9, 15))
  out = execute(prog, [5, 6, 7, 8, 9])
  assert out[0].tolist() == [2, 12, 40, 0xFFFFFFF0, 101]

def test_saveexec_masks_lanes_and_restores():
  prog = (vopc(0x4C, I(16), 0)               # v_cmp_gt_u32_e32 vcc, 16, v0 -> lanes 0..3 (v0 = 4*lane)
        + sop1(32, 20, VCC)                  # s_and_saveexec_b32 s20, vcc
        + vop1(1, 1, I(-1))                  # v_mov_b32 v1, -1 in lanes 0..3 only
        + sop1(0, EXEC, 20))                 # s_mov_b32 exec_lo, s20
  out = execute(prog, [1], a=np.arange(32, dtype=np.uint32))
  np.testing.assert_array_equal(out[:, 0], np.where(np.arange(32) < 4, 0xFFFFFFFF, np.arange(32)))

def test_scalar_load_from_memory():
  prog = smem(1, 20, 2, 0x800) + vop1(1, 5, 20) + vop1(1, 6, 21)  # s_load_b64 s[20:21], s[2:3], 0x200
  out = execute(prog, [5, 6], extra=(0x12345678).to_bytes(4, "little") + (0x9ABCDEF0).to_bytes(4, "little"))
  assert out[7].tolist() == [0x12345678, 0x9ABCDEF0]

# ---- VOP2 / VOP1 float rules
def test_max_min_nan_and_signed_zero_rules():
  qnan, snan = np.uint32(0x7FC00000), np.uint32(0x7F800001)
  a = u32(f32([1, 0.0, -0.0, 3, 2, 5] + [0] * 26)); a[4], a[5] = qnan, snan
  b = u32(f32([2, -0.0, 0.0, 0, 7, 1] + [0] * 26)); b[3] = qnan
  out = execute(vop2(16, 5, V(1), 2) + vop2(15, 6, V(1), 2), [5, 6], a=a, b=b)  # v_max_f32, v_min_f32
  mx, mn = out[:6, 0], out[:6, 1]
  assert mx.view(np.float32)[:5].tolist() == [2.0, 0.0, 0.0, 3.0, 7.0] and not np.signbit(mx.view(np.float32)[1:3]).any()
  assert mn.view(np.float32)[:5].tolist() == [1.0, -0.0, -0.0, 3.0, 7.0] and np.signbit(mn.view(np.float32)[1:3]).all()
  assert mx[5] == 0x7FC00001 and mn[5] == 0x7FC00001  # IEEE mode: a signaling NaN comes back quieted

def test_conversions_round_and_saturate():
  x = f32([1.5, -1.5, 2.5, 3e9, -3e9, np.nan, 65520, 1e-8] + [0.75] * 24)
  out = execute(vop1(8, 5, V(1)) + vop1(7, 6, V(1)) + vop1(10, 7, V(1)), [5, 6, 7], a=x)  # cvt_i32_f32, cvt_u32_f32, cvt_f16_f32
  assert out[:8, 0].view(np.int32).tolist() == [1, -1, 2, 2**31 - 1, -2**31, 0, 65520, 0]
  assert out[:8, 1].tolist() == [1, 0, 2, 3000000000, 0, 0, 65520, 0]
  with np.errstate(over="ignore"): want = x.astype(np.float16)
  np.testing.assert_array_equal((out[:, 2] & 0xFFFF).astype(np.uint16).view(np.float16), want)

def test_transcendentals_are_within_an_ulp_of_float64():
  x = np.linspace(0.01, 8, 32).astype(np.float32)
  prog = vop1(37, 5, V(1)) + vop1(39, 6, V(1)) + vop1(42, 7, V(1)) + vop1(51, 8, V(1)) + vop1(53, 9, V(1)) + vop1(46, 10, V(1))
  out = execute(prog, [5, 6, 7, 8, 9, 10], a=x, dtype=np.float32)  # exp, log, rcp, sqrt, sin, rsq
  xd = x.astype(np.float64)
  for k, want in enumerate([np.exp2(xd), np.log2(xd), 1 / xd, np.sqrt(xd), np.sin(xd * 2 * np.pi), 1 / np.sqrt(xd)]):
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert (np.abs(out[:, k] - want) <= np.maximum(ulp, 2e-7 * (k == 4))).all(), k

def test_denormals_flush_when_the_mode_says_so():
  x = f32([1e-20] * 32)
  keep = execute(vop2(8, 5, V(1), 1), [5], a=x, dtype=np.float32)  # v_mul_f32 v5, v1, v1 -> 1e-40 (denormal)
  flush = execute(vop2(8, 5, V(1), 1), [5], a=x, dtype=np.float32, rsrc1=1 << 23 | 0xF)  # FLOAT_DENORM_MODE_32 = 0
  assert keep[0, 0] == np.float32(1e-20) * np.float32(1e-20) != 0
  assert flush[0, 0] == 0

# ---- VOP3 modifiers, VOP3SD carries, 64-bit
def test_vop3_neg_abs_clamp_omod():
  a, b, c = f32(np.linspace(-2, 2, 32)), f32(np.linspace(3, -1, 32)), f32(np.linspace(0.5, -0.5, 32))
  prog = (vop3(0x213, 5, V(1), V(2), V(3), neg=0b001, abs_=0b010)   # v_fma_f32 v5, -v1, |v2|, v3
        + vop3(0x213, 6, V(1), V(2), V(3), clamp=1)                  # ... clamp
        + vop3(0x103, 7, V(1), V(2), omod=1))                        # v_add_f32_e64 v7, v1, v2 mul:2
  out = execute(prog, [5, 6, 7], a=a, b=b, c=c, dtype=np.float32)
  np.testing.assert_array_equal(out[:, 0], (-a.astype(np.float64) * np.abs(b) + c).astype(np.float32))
  np.testing.assert_array_equal(out[:, 1], np.clip((a.astype(np.float64) * b + c).astype(np.float32), 0, 1))
  np.testing.assert_array_equal(out[:, 2], (a + b) * 2)

def test_64bit_add_with_carry_and_mad_u64():
  a = np.arange(32, dtype=np.uint32) * 0x9E3779B9
  b = np.full(32, 0xFFFFFFF0, np.uint32)
  prog = (vop3sd(0x300, 5, VCC, V(1), V(2))          # v_add_co_u32 v5, vcc, v1, v2
        + vop2(32, 6, I(0), 3)                        # v_add_co_ci_u32_e32 v6, vcc, 0, v3, vcc (v3 = 0)
        + vop3sd(0x2FE, 7, NULL, V(1), V(2), V(3)))   # v_mad_u64_u32 v[7:8], null, v1, v2, v[3:4]
  out = execute(prog, [5, 6, 7, 8], a=a, b=b)
  s = a.astype(np.uint64) + b
  np.testing.assert_array_equal(out[:, 0], (s & 0xFFFFFFFF).astype(np.uint32))
  np.testing.assert_array_equal(out[:, 1], (s >> np.uint64(32)).astype(np.uint32))
  p = a.astype(np.uint64) * b
  np.testing.assert_array_equal(out[:, 2] | out[:, 3].astype(np.uint64) << np.uint64(32), p)

def test_f64_arithmetic_and_conversions():
  x = np.linspace(-3.3, 5.7, 32)
  words = (vop3(0x327, 5, V(1), V(1))           # v_add_f64 v[5:6], v[1:2], v[1:2]
         + vop3(0x328, 7, V(1), V(1))           # v_mul_f64 v[7:8], v[1:2], v[1:2]
         + vop3(0x214, 9, V(1), V(1), F1)       # v_fma_f64 v[9:10], v[1:2], v[1:2], 1.0
         + vop1(4, 11, V(3))                    # v_cvt_f64_i32 v[11:12], v3
         + vop1(3, 13, V(1)))                   # v_cvt_i32_f64 v13, v[1:2]
  ints = np.arange(32, dtype=np.int32) * -7
  pairs = x.view(np.uint32).reshape(32, 2)
  out = execute(words, [5, 6, 7, 8, 9, 10, 11, 12, 13], a=pairs[:, 0], b=pairs[:, 1], c=ints)
  f64 = lambda k: (out[:, k].astype(np.uint64) | out[:, k + 1].astype(np.uint64) << np.uint64(32)).view(np.float64)
  np.testing.assert_array_equal(f64(0), x + x)
  np.testing.assert_array_equal(f64(2), x * x)
  np.testing.assert_array_equal(f64(4), [float(Fraction(v) * Fraction(v) + 1) for v in x])  # fused: one rounding
  np.testing.assert_array_equal(f64(6), ints.astype(np.float64))
  np.testing.assert_array_equal(out[:, 8].view(np.int32), np.trunc(x).astype(np.int32))

def test_vopc_cmpx_and_cndmask():
  a = f32(np.arange(32) - 10)
  prog = (vopc(0x14, I(0), 1)                  # v_cmp_gt_f32_e32 vcc, 0, v1 -> a < 0
        + vop2(1, 5, I(7), 1)                  # v_cndmask_b32_e32 v5, 7, v1, vcc
        + sop1(0, 20, EXEC)                    # s_mov_b32 s20, exec_lo
        + vopc(0x94, I(0), 1)                  # v_cmpx_gt_f32_e32 0, v1: exec = a < 0
        + vop1(1, 6, F1)                       # v_mov_b32 v6, 1.0 only where a < 0
        + sop1(0, EXEC, 20))                   # s_mov_b32 exec_lo, s20
  out = execute(prog, [5, 6], a=a)
  neg = a < 0
  np.testing.assert_array_equal(out[:, 0], np.where(neg, u32(a), 7))
  np.testing.assert_array_equal(out[:, 1], np.where(neg, 0x3F800000, 0))

# ---- VOP3P packed halves, VOPD dual issue
def test_packed_f16_with_op_sel():
  a = np.arange(64, dtype=np.float16).reshape(32, 2) / 4
  b = (np.arange(64, dtype=np.float16).reshape(32, 2) - 20) / 8
  prog = (vop3p(15, 5, V(1), V(2))                         # v_pk_add_f16 v5, v1, v2
        + vop3p(15, 6, V(1), V(2), opsel=0b01, opsel_hi=0b01)  # lo = a.hi + b.lo, hi = a.hi + b.lo
        + vop3p(14, 7, V(1), V(2), F1, neg=0b001))         # v_pk_fma_f16 v7, -v1, v2, 1.0 (lo negated only)
  out = execute(prog, [5, 6, 7], a=a.view(np.uint32), b=b.view(np.uint32))
  h = lambda k: out[:, k].view(np.float16).reshape(32, 2)
  np.testing.assert_array_equal(h(0), a + b)
  np.testing.assert_array_equal(h(1)[:, 0], a[:, 1] + b[:, 0])
  np.testing.assert_array_equal(h(1)[:, 1], a[:, 1] + b[:, 0])
  fma16 = lambda x, y: (x.astype(np.float64) * y + 1).astype(np.float16)
  np.testing.assert_array_equal(h(2)[:, 0], fma16(-a[:, 0], b[:, 0]))
  np.testing.assert_array_equal(h(2)[:, 1], fma16(a[:, 1], b[:, 1]))

def test_vopd_halves_read_before_either_writes():
  a, b = f32(np.arange(32) + 1), f32(np.arange(32) * 3)
  # v_dual_mul_f32 v1, v1, v2 :: v_dual_mov_b32 v4, v1  (Y reads the v1 that X overwrites)
  out = execute(vopd(3, 1, V(1), 2, 8, 4, V(1), 0), [1, 4], a=a, b=b, dtype=np.float32)
  np.testing.assert_array_equal(out[:, 0], a * b)
  np.testing.assert_array_equal(out[:, 1], a)

# ---- DS: LDS stores, loads, two-address forms, returning atomics; barriers between waves
def test_lds_store_load_2addr_and_atomics():
  x = np.arange(32, dtype=np.uint32) * 11
  prog = (ds(13, 0, 0, data0=1)                            # ds_store_b32 v0, v1
        + ds(55, 5, 0, offset0=1, offset1=2)               # ds_load_2addr_b32 v[5:6], v0 offset0:1 offset1:2
        + vop1(1, 8, I(0))                                 # v_mov_b32 v8, 0 (every lane's address 0)
        + vop1(1, 9, I(1))                                 # v_mov_b32 v9, 1
        + ds(32, 7, 8, data0=9))                           # ds_add_rtn_u32 v7, v8, v9: 32 lanes add 1 to lds[0]
  out = execute(prog, [5, 6, 7], a=x, lds=256)
  want = np.concatenate([x, [0, 0]])
  np.testing.assert_array_equal(out[:, 0], want[1:33])
  np.testing.assert_array_equal(out[:, 1], want[2:34])
  assert sorted(out[:, 2].tolist()) == list(range(0, 32))  # each lane saw the count before its own add (lds[0] = 0 first)

def test_barrier_orders_lds_between_waves():
  """Wave 1 takes the path at lower addresses, so it runs first and would load before wave 0 stores if s_barrier
  did not hold it."""
  x = np.arange(64, dtype=np.uint32) * 5 + 1
  exchange = ds(13, 0, 0, data0=1) + sopp(61) + vop2(29, 6, LIT, 0) + [128] + ds(54, 5, 6)  # store, barrier, xor, load
  prog = (vop1(2, 20, V(0))                                # v_readfirstlane_b32 s20, v0: 0 in wave 0
        + sopc(6, 20, I(0))                                # s_cmp_eq_u32 s20, 0
        + sopp(34, 8)                                      # s_cbranch_scc1 -> wave 0's copy
        + exchange + sopp(32, 7)                           # wave 1's copy; s_branch -> end
        + exchange)                                        # wave 0's copy
  out = execute(prog, [5], a=x, lanes=64, lds=256)
  np.testing.assert_array_equal(out[:, 0], np.concatenate([x[32:], x[:32]]))

def test_wave64_barrier_and_exec():
  x = np.arange(128, dtype=np.uint32)
  prog = ds(13, 0, 0, data0=1) + sopp(61) + vop2(29, 6, LIT, 0) + [256] + ds(54, 5, 6)
  out = execute(prog, [5], a=x, lanes=128, lds=512, wave32=False)
  np.testing.assert_array_equal(out[:, 0], np.concatenate([x[64:], x[:64]]))

def test_lds_address_plus_offset_wraps_at_32_bits():
  # v6 = -8; ds_load_b32 v5, v6 offset:8 reads LDS byte 0, as code LLVM folds an offset into over a negative base does
  x = np.arange(32, dtype=np.uint32) + 7
  prog = ds(13, 0, 0, data0=1) + vop1(1, 6, LIT) + [0xFFFFFFF8] + ds(54, 5, 6, offset0=8)
  np.testing.assert_array_equal(execute(prog, [5], a=x, lds=256)[:, 0], np.full(32, 7))

def test_lds_access_past_the_allocation_faults():
  with pytest.raises(ShaderFault, match="LDS") as e:
    execute(vop2(29, 6, LIT, 0) + [0x100] + ds(54, 5, 6), [5], lds=256)
  assert e.value.address == 0x100

def test_instruction_without_semantics_names_itself_and_its_address():
  with pytest.raises(UnknownInstruction, match=r"image|MIMG|address 0x10"):
    execute([0xF0000000, 0], [1])

def test_getpc_setpc_jump():
  # s_getpc_b64 s[20:21] (address of the next word); s_add_u32 s20, s20, 16; s_addc_u32 s21, s21, 0; s_setpc_b64 s[20:21]
  # lands on the second of two v_mov_b32 v5 (the first is jumped over)
  prog = (sop1(71, 20, 0) + sop2(0, 20, 20, I(16)) + sop2(4, 21, 21, I(0)) + sop1(72, 0, 20)
        + vop1(1, 5, I(1)) + vop1(1, 5, I(2)))
  out = execute(prog, [5])
  assert (out[:, 0] == 2).all()

def test_memory_widths_sub_dword_and_d16():
  x = np.arange(32, dtype=np.uint32) * 0x01030507 + 0x80F0A0C1
  prog = (glob(16, 5, 0, saddr=2)                          # global_load_u8 v5, v0, s[2:3]
        + glob(17, 6, 0, saddr=2)                          # global_load_i8 v6
        + glob(19, 7, 0, saddr=2)                          # global_load_i16 v7
        + vop1(1, 8, LIT) + [0xDEADBEEF]                   # v8 = 0xdeadbeef
        + glob(35, 8, 0, saddr=2)                          # global_load_d16_hi_b16 v8: upper half only
        + glob(23, 9, 0, saddr=2, offset=0)                # global_load_b128 v[9:12] (lane's 16 bytes at 4*lane)
        + ds(31, 0, 0, data0=1)                            # ds_store_b16 v0, v1
        + vop1(1, 13, LIT) + [0x12345678]
        + ds(0xA7, 13, 0))                                 # ds_load_u16_d16_hi v13, v0
  out = execute(prog, [5, 6, 7, 8, 9, 12, 13], a=x, b=x + 1, c=x + 2, lds=256)
  raw = np.concatenate([x, x + 1, x + 2, np.zeros(32, np.uint32)]).view(np.uint8)
  lane = np.arange(32) * 4
  np.testing.assert_array_equal(out[:, 0], raw[lane])
  np.testing.assert_array_equal(out[:, 1], raw[lane].view(np.int8).astype(np.int32).view(np.uint32))
  np.testing.assert_array_equal(out[:, 2], (x & 0xFFFF).astype(np.uint16).view(np.int16).astype(np.int32).view(np.uint32))
  np.testing.assert_array_equal(out[:, 3], (x & 0xFFFF) << 16 | 0xBEEF)
  words = raw.view(np.uint32)
  np.testing.assert_array_equal(out[:, 4], words[np.arange(32)])
  np.testing.assert_array_equal(out[:, 5], words[np.arange(32) + 3])
  np.testing.assert_array_equal(out[:, 6], (x & 0xFFFF) << 16 | 0x5678)

def test_bit_field_and_cross_lane_ops():
  rng = np.random.default_rng(9)
  a, b = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32), rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
  c = (np.arange(32) * 7 % 29).astype(np.uint32)
  prog = (vop3(0x210, 5, V(1), V(3), I(9))                 # v_bfe_u32 v5, v1, v3, 9
        + vop3(0x211, 6, V(1), V(3), I(9))                 # v_bfe_i32 v6, v1, v3, 9
        + vop3(0x216, 7, V(1), V(2), V(3))                 # v_alignbit_b32 v7, v1, v2, v3
        + vop3(0x31F, 8, V(1), V(3))                       # v_mbcnt_lo_u32_b32 v8, v1, v3
        + vop1(57, 9, V(1))                                # v_clz_i32_u32 v9, v1
        + vop3(0x360, 20, V(1), I(5))                      # v_readlane_b32 s20, v1, 5
        + vop1(1, 10, 20)                                  # v_mov_b32 v10, s20
        + sop2(2, 21, LIT, 0) + [0x5A5A5A5A]               # s_add_i32 s21, 0x5a5a5a5a, s0 (s0 = 0x10000)
        + vop3(0x361, 2, 21, I(3)))                        # v_writelane_b32 v2, s21, 3
  out = execute(prog, [5, 6, 7, 8, 9, 10, 2], a=a, b=b, c=c)
  ai, ci = a.astype(np.int64), c.astype(np.int64) & 31
  np.testing.assert_array_equal(out[:, 0], (ai >> ci) & 0x1FF)
  field = (a.view(np.int32).astype(np.int64) >> ci) & 0x1FF  # S0.i32 shifts arithmetically (V_BFE_I32 pseudocode)
  np.testing.assert_array_equal(out[:, 1].view(np.int32), np.where(field >= 256, field - 512, field))
  np.testing.assert_array_equal(out[:, 2], ((ai << 32 | b.astype(np.int64)) >> ci) & 0xFFFFFFFF)
  lane = np.arange(32)
  np.testing.assert_array_equal(out[:, 3], [bin(int(x) & ((1 << l) - 1)).count("1") + int(y) for x, y, l in zip(a, c, lane)])
  np.testing.assert_array_equal(out[:, 4], [32 - int(x).bit_length() if x else 0xFFFFFFFF for x in a])
  assert (out[:, 5] == a[5]).all()
  np.testing.assert_array_equal(out[:, 6], np.where(lane == 3, 0x5A5A5A5A + 0x10000, b))

def test_decoded_instruction_without_semantics_and_s_trap_fault():
  with pytest.raises(UnknownInstruction, match=r"VOP1 v_cvt_off_f32_i4 at address 0x101c "):  # code at 0x1000, 28 bytes of frame
    execute(vop1(14, 5, V(1)), [5])
  with pytest.raises(ShaderFault, match="s_trap"):
    execute(sopp(16, 2), [1])

def test_bitset_and_xad():
  """s_bitset0/1_b32 (SOP1 16/18) set or clear bit S0[4:0] of D, keeping the rest; v_xad_u32 (VOP3 581) is
  (S0 ^ S1) + S2 modulo 2**32 (RDNA3 ISA guide, SOP1 and VOP3 opcode tables)."""
  prog = (sop1(0, 20, LIT) + [0xF0F0F0F0]      # s_mov_b32 s20, 0xF0F0F0F0
        + sop1(16, 20, I(4))                   # s_bitset0_b32 s20, 4 -> clears bit 4
        + sop1(18, 20, I(35))                  # s_bitset1_b32 s20, 35 -> sets bit 35 & 31 = 3
        + vop1(1, 5, 20)
        + vop3(581, 6, V(1), V(2), V(3)))      # v_xad_u32 v6, v1, v2, v3
  rng = np.random.default_rng(3)
  a, b, c = (rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32) for _ in range(3))
  out = execute(prog, [5, 6], a=a, b=b, c=c)
  assert out[0, 0] == (0xF0F0F0F0 & ~(1 << 4)) | (1 << 3)
  np.testing.assert_array_equal(out[:, 1], ((a ^ b).astype(np.uint64) + c) % 2**32)
