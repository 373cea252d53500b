"""The ir3 executor against numpy: small programs hand-encoded here from the field positions of Mesa's ISA XML
(src/freedreno/isa/ir3-cat*.xml; every encoder is checked against a word from Mesa's src/freedreno/ir3/tests/disasm.c
first), run over whole dispatches; and one program per sync rule that a wrong program breaks."""
from __future__ import annotations
import numpy as np
import pytest
from drivers.mock.qcom.ir3_decode import decode
from drivers.mock.qcom.ir3_execute import GPUFault, ShaderHazard, run_dispatch

# ---- hand encoders: word = sum of fields at the XML's bit positions -------------------------------------------
SY, JP, SS = 1 << 60, 1 << 59, 1 << 44
F16, F32, U16, U32, S16, S32, U8 = 0, 1, 2, 3, 4, 5, 6              # ir3-common.xml <enum name="#type">
def r(n: int, c: str = "x") -> int: return n * 4 + "xyzw".index(c)  # regid
def c_(k: int) -> int: return k | 0b010 << 11                                          # #multisrc-const, k = const*4+comp
def imm(v: int) -> int: return (v & 0x7FF) | 0b100 << 11                               # #mulitsrc-immed
def flut(i: int) -> int: return i | 0b101 << 11                                        # #mulitsrc-immed-flut
NEG, ABS = 1 << 14, 1 << 15
P0 = 0xF8                                                                                # p0.x as a cat2 dst (GPR 62)

def nop(rpt=0, flags=0): return rpt << 40 | flags                                        # cat0 OPC 0000
def end(): return 0b0110 << 55                                                           # cat0 OPC 0110
def br(off, inv=False, flags=0): return 0b0001 << 55 | inv << 52 | (off & 0xFFFFFFFF) | flags   # BRTYPE 000
def jump(off, flags=0): return 0b0010 << 55 | (off & 0xFFFFFFFF) | flags
def mov(dst, src, st=U32, dt=U32, kind=0, rnd=0, flags=0):                               # kind: 0 gpr 1 const 2 immed
  return 1 << 61 | rnd << 55 | kind << 53 | st << 50 | dt << 46 | dst << 32 | src | flags
def cat2(opc, dst, s1, s2=0, full=True, nop=0, cond=0, conv=False, flags=0):
  return 2 << 61 | opc << 53 | full << 52 | (nop >> 1) << 51 | cond << 48 | conv << 46 | (nop & 1) << 43 | dst << 32 | s2 << 16 | s1 | flags
def cat3(opc, dst, s1, s2, s3, nop=0, flags=0):                                          # s1/s3: gpr or const (bits 12:11 = 10)
  return 3 << 61 | opc << 55 | s2 << 47 | (nop & 1) << 43 | dst << 32 | (nop >> 1) << 15 | s3 << 16 | s1 | flags
def cst3(n, c="x"): return (n * 4 + "xyzw".index(c)) | 1 << 12
def cat4(opc, dst, src, full=True, flags=0): return 4 << 61 | opc << 53 | full << 52 | dst << 32 | src | flags
def ldg(dst, addr, off=0, n=1, t=U32, flags=0):
  return 6 << 61 | t << 49 | dst << 32 | n << 24 | 1 << 23 | addr << 14 | (off & 0x1FFF) << 1 | 1 | flags
def stg(addr, val, off=0, n=1, t=U32, flags=0):
  return 6 << 61 | 0b00011 << 54 | t << 49 | addr << 41 | 1 << 40 | (off & 0xFF) << 32 | n << 24 | 1 << 23 | (off >> 8 & 0x1F) << 9 | val << 1 | flags
def ldl(dst, addr, off=0, n=1, t=U32, flags=0):
  return 6 << 61 | 0b00001 << 54 | t << 49 | dst << 32 | n << 24 | 1 << 23 | addr << 14 | (off & 0x1FFF) << 1 | 1 | flags
def stl(addr, val, off=0, n=1, t=U32, flags=0):
  return 6 << 61 | 0b00100 << 54 | t << 49 | addr << 41 | 1 << 40 | (off & 0xFF) << 32 | n << 24 | 1 << 23 | (off >> 8 & 0x1F) << 9 | val << 1 | flags
def bar(flags=0): return 7 << 61 | 1 << 54 | 1 << 49 | flags                              # bar.g
ADD_F, MUL_F, MIN_F, CMPS_F, FLOOR_F, ADD_U, SUB_U, CMPS_S, SHL_B, AND_B, MUL_U24, ABSNEG_F = 0, 3, 1, 5, 9, 16, 18, 21, 54, 28, 48, 6
MAD_F32, SEL_B32, MAD_U24 = 7, 9, 4
LT, LE, GT, GE, EQ, NE = range(6)

def test_encoders_match_mesa_words():
  """Each encoder reproduces a word of Mesa's disasm.c before it is trusted below."""
  assert ldg(r(1, "z"), r(1, "z"), 7) == 0xC00600060181800F                  # ldg.u32 r1.z, g[r1.z+7], 1
  assert stg(r(0, "z"), r(8, "y"), 5, 3, S32) == 0xC0CA050503800042          # stg.s32 g[r0.z+5], r8.y, 3
  assert stg(r(0, "z"), r(8, "y"), 305, 3, S32) == 0xC0CA053103800242        # stg.s32 g[r0.z+305], r8.y, 3
  assert ldl(r(0, "y"), r(0, "y")) == 0xC046000101804001                     # ldl.u32 r0.y, l[r0.y], 1
  assert stl(r(0, "z"), r(1, "x")) == 0xC106050001800008                     # stl.u32 l[r0.z], r1.x, 1
  assert cat2(CMPS_S, P0, r(1), imm(1), cond=EQ) == 0x42B400F820010004       # cmps.s.eq p0.x, r1.x, 1
  assert cat2(ADD_F, r(1, "w"), r(2), flut(1) | NEG) == 0x4010000768010008   # add.f r1.w, r2.x, (neg)(0.5)
  assert cat3(MAD_F32, r(1, "y"), cst3(12) , r(1), cst3(12, "y")) | 1 << 14 == 0x6382000510315030  # mad.f32 r1.y, (neg)c12.x, r1.x, c12.y
  assert cat4(0, r(2, "z"), r(0, "w")) == 0x8010000A00000003                 # rcp r2.z, r0.w
  assert mov(r(0), 8 * 4, F32, F32, kind=1) == 0x2024400000000020            # mov.f32f32 r0.x, c8.x
  assert br(4) == 0x0080000000000004 and br(3, inv=True) == 0x0090000000000003 and end() == 0x0300000000000000
  assert bar(SY) == 0xF042000000000000                                       # (sy)bar.g

class Memory:
  """One allocation of GPU memory at `base`; GPUFault outside it (as the KGSL model's memory does)."""
  def __init__(self, base: int, data: np.ndarray):
    self.base, self.buf = base, np.frombuffer(bytearray(data.tobytes()), np.uint8)
  def _idx(self, addrs: np.ndarray, nbytes: int) -> np.ndarray:
    off = addrs.astype(np.int64) - self.base
    bad = (off < 0) | (off + nbytes > len(self.buf))
    if bad.any(): raise GPUFault(int(addrs[np.argmax(bad)]), "outside the test allocation")
    return off[:, None] + np.arange(nbytes)
  def load(self, addrs, nbytes): return self.buf[self._idx(addrs, nbytes)]
  def store(self, addrs, data): self.buf[self._idx(addrs, data.shape[1])] = data
  def view(self, dtype, off=0, n=None): return self.buf[off:].view(dtype)[:n]

def code(*words) -> bytes: return np.array(words, np.uint64).astype("<u8").tobytes()
BASE = 0x1_0000_0000

def consts_for(*addrs_and_ints) -> np.ndarray:
  """Kernel arguments as the ABI lays them out: 64-bit addresses as (lo, hi) const pairs, then int32s."""
  out = []
  for v in addrs_and_ints: out += [v & 0xFFFFFFFF, v >> 32] if v > 0xFFFFFFFF else [v]
  return np.array(out + [0] * (-len(out) % 4), np.uint32)

def run(prog, memory=None, groups=(1, 1, 1), local=(64, 1, 1), consts=None, full=8, half=2, shared=0, gen=6):
  run_dispatch(code(*prog), gen, groups, local, consts if consts is not None else np.zeros(4, np.uint32),
               memory or Memory(BASE, np.zeros(64, np.uint8)), full, half, shared, 0, 4)

def index_address(out_reg: int, elem_bytes_shift: int, base_const: int) -> list:
  """r2.x = (wg.x * 64 + lid.x) << shift; out_reg:out_reg+1 = the address in consts base, base+1 plus r2.x (carry
  ignored: the test buffers do not cross 4 GiB). Delay slots filled with (nopN) as ir3_delay.c asks: 3 between dependent ALU ops."""
  return [cat2(SHL_B, r(2), r(0), imm(6), nop=3),                         # r2.x = wg.x << 6
          cat2(ADD_U, r(2), r(2), r(1), nop=3),                           # + lid.x
          cat2(SHL_B, r(2), r(2), imm(elem_bytes_shift), nop=3),
          cat2(ADD_U, out_reg, r(2), c_(base_const)), mov(out_reg + 1, base_const + 1, kind=1),
          nop(rpt=5)]

@pytest.mark.parametrize("gen", [6, 7])
def test_elementwise_add_two_workgroups_through_ldg_stg(gen):
  n = 128
  a, b = np.random.default_rng(0).standard_normal((2, n)).astype(np.float32)
  mem = Memory(BASE, np.concatenate([a, b, np.zeros(n, np.float32)]))
  consts = consts_for(BASE, BASE + 4 * n, BASE + 8 * n)
  prog = index_address(r(3), 2, 0) + [                                       # r3.x:y = &a[i]
    cat2(ADD_U, r(4), r(2), c_(2)), mov(r(4, "y"), 3, kind=1),  # r4.x:y = &b[i]
    cat2(ADD_U, r(5), r(2), c_(4)), mov(r(5, "y"), 5, kind=1),  # r5.x:y = &out[i]
    nop(rpt=5),
    ldg(r(6), r(3), t=F32), ldg(r(6, "y"), r(4), t=F32),
    cat2(ADD_F, r(6, "z"), r(6), r(6, "y"), flags=SY), nop(rpt=5),
    stg(r(5), r(6, "z"), t=F32), end()]
  run(prog, mem, groups=(2, 1, 1), consts=consts, gen=gen)
  np.testing.assert_array_equal(mem.view(np.float32, 8 * n, n), a + b)

def test_loop_with_backward_branch_sums_one_to_n():
  """r6.x counts down from 10, r6.y accumulates: a loop closed by `br p0.x, #-k` onto a (jp) instruction."""
  mem = Memory(BASE, np.zeros(64 * 4, np.uint8))
  prog = index_address(r(3), 2, 0) + [
    mov(r(6), 10, kind=2), mov(r(6, "y"), 0, kind=2), nop(rpt=2),
    cat2(ADD_U, r(6, "y"), r(6, "y"), r(6), flags=JP, nop=3),              # loop: acc += i
    cat2(SUB_U, r(6), r(6), imm(1), nop=3),                                # i -= 1
    cat2(CMPS_S, P0, r(6), imm(0), cond=GT, nop=3), nop(rpt=2),            # p0.x = i > 0; 6 slots before br
    br(-4),
    stg(r(3), r(6, "y")), end()]
  run(prog, mem, consts=consts_for(BASE))
  assert (mem.view(np.uint32, 0, 64) == 55).all()

def divergent(lid_reg=r(1)):
  """Fibers with odd local id add 100, even ones add 7, then all add 1000 after the paths join."""
  return [
    mov(r(6), 0, kind=2),
    cat2(AND_B, r(6, "y"), lid_reg, imm(1), nop=3),
    cat2(CMPS_S, P0, r(6, "y"), imm(0), cond=EQ, nop=3), nop(rpt=2),
    br(3),                                                                 # even -> else
    cat2(ADD_U, r(6), r(6), imm(100), flags=JP, nop=3), jump(2),
    cat2(ADD_U, r(6), r(6), imm(7), flags=JP, nop=3),
    cat2(ADD_U, r(6), r(6), imm(1000), flags=JP, nop=3), nop(rpt=5)]

def test_divergent_branch_reconverges():
  mem = Memory(BASE, np.zeros(64 * 4, np.uint8))
  run(index_address(r(3), 2, 0) + divergent() + [stg(r(3), r(6)), end()], mem, consts=consts_for(BASE))
  lid = np.arange(64)
  np.testing.assert_array_equal(mem.view(np.uint32, 0, 64), np.where(lid & 1, 1100, 1007))

def test_bar_and_local_memory_exchange_between_fibers():
  """Each fiber stores its id to l[4*lid], waits at bar, then reads its neighbour's l[4*((lid+1)%64)]."""
  mem = Memory(BASE, np.zeros(2 * 64 * 4, np.uint8))
  prog = index_address(r(3), 2, 0) + [
    cat2(SHL_B, r(7), r(1), imm(2), nop=3),
    cat2(ADD_U, r(7, "y"), r(1), imm(1), nop=3),
    cat2(AND_B, r(7, "y"), r(7, "y"), imm(63), nop=3),
    cat2(SHL_B, r(7, "y"), r(7, "y"), imm(2)), cat2(ADD_U, r(7, "z"), r(2), imm(0), nop=3), nop(rpt=5),
    stl(r(7), r(1)), bar(), nop(flags=SS | SY),
    ldl(r(8), r(7, "y")),
    mov(r(8, "y"), r(8), flags=SS), nop(rpt=5),
    stg(r(3), r(8, "y")), end()]
  run(prog, mem, groups=(2, 1, 1), consts=consts_for(BASE), shared=256, full=9)
  lid = np.arange(128) % 64
  np.testing.assert_array_equal(mem.view(np.uint32, 0, 128), (lid + 1) % 64)

SFU = {0: ("rcp", lambda x: np.float32(1) / x), 1: ("rsq", lambda x: np.float32(1) / np.sqrt(x)), 2: ("log2", np.log2),
       3: ("exp2", np.exp2), 4: ("sin", np.sin), 5: ("cos", np.cos), 6: ("sqrt", np.sqrt)}

def float_kernel(body: list, a: np.ndarray, out_dtype=np.float32) -> np.ndarray:
  """out[i] = body(a[i]) with a at c0, out at c2: body reads r6.x and leaves its result in r7.x."""
  n = len(a)
  mem = Memory(BASE, np.concatenate([a.view(np.uint8), np.zeros(4 * n, np.uint8)]))
  prog = index_address(r(3), 2, 0) + [cat2(ADD_U, r(5), r(2), c_(2)), mov(r(5, "y"), 3, kind=1), nop(rpt=5),
                                    ldg(r(6), r(3), t=U32), nop(flags=SY)] + body + [nop(rpt=5), stg(r(5), r(7), t=U32), end()]
  run(prog, mem, groups=(n // 64, 1, 1), consts=consts_for(BASE, BASE + 4 * n), half=4)
  return mem.view(np.uint32, 4 * n, n).view(out_dtype) if out_dtype != np.uint32 else mem.view(np.uint32, 4 * n, n)

@pytest.mark.parametrize("opc", sorted(SFU))
def test_each_cat4_op_is_exact_float32(opc):
  name, ref = SFU[opc]
  a = np.random.default_rng(opc).uniform(0.1, 8, 128).astype(np.float32)
  got = float_kernel([cat4(opc, r(7), r(6)), mov(r(7, "y"), 0, kind=2, flags=SS)], a)
  np.testing.assert_array_equal(got, ref(a).astype(np.float32), err_msg=name)

def test_cat4_half_precision_rounds_to_f16():
  a = np.linspace(0.5, 4, 128, dtype=np.float32)
  body = [mov(r(0, "z"), r(6), F32, F16), nop(rpt=5),                         # hr0.z = f16(a)   (cov.f32f16)
          cat4(6, r(0, "w"), r(0, "z"), full=False),                          # hr0.w = sqrt(hr0.z)
          mov(r(7), r(0, "w"), F16, F32, flags=SS)]
  np.testing.assert_array_equal(float_kernel(body, a), np.sqrt(a.astype(np.float16).astype(np.float32)).astype(np.float16).astype(np.float32))

@pytest.mark.parametrize("st,dt,rnd,ref", [
  (F32, S32, 0, lambda a: np.trunc(a).astype(np.int32).view(np.uint32)),
  (F32, S32, 1, lambda a: np.rint(a).astype(np.int32).view(np.uint32)),
  (F32, S32, 3, lambda a: np.floor(a).astype(np.int32).view(np.uint32)),
  (F32, U32, 0, lambda a: np.clip(np.trunc(a), 0, None).astype(np.uint32)),
  (S32, F32, 0, lambda a: a.view(np.int32).astype(np.float32).view(np.uint32))])
def test_cov_conversions(st, dt, rnd, ref):
  a = np.random.default_rng(1).uniform(-1000, 1000, 128).astype(np.float32)
  if st == S32: a = np.random.default_rng(2).integers(-2**31, 2**31, 128).astype(np.int32).view(np.float32)
  got = float_kernel([mov(r(7), r(6), st, dt, rnd=rnd)], a, np.uint32)
  np.testing.assert_array_equal(got, ref(a))

def test_cov_f32_to_f16_to_s16_to_s32():
  a = np.random.default_rng(3).uniform(-3000, 3000, 128).astype(np.float32)
  body = [mov(r(0, "z"), r(6), F32, F16), nop(rpt=2), mov(r(0, "w"), r(0, "z"), F16, S16), nop(rpt=2),
          mov(r(7), r(0, "w"), S16, S32)]
  np.testing.assert_array_equal(float_kernel(body, a, np.uint32).view(np.int32), np.trunc(a.astype(np.float16)).astype(np.int32))

def test_sel_picks_first_source_when_condition_nonzero():
  a = np.random.default_rng(4).uniform(-5, 5, 128).astype(np.float32)
  body = [cat2(CMPS_F, r(6, "y"), r(6), flut(0), cond=GT, nop=3),           # r6.y = a > 0.0
          cat2(ABSNEG_F, r(6, "z"), r(6) | NEG, nop=3),                       # r6.z = -a
          cat3(SEL_B32, r(7), r(6), r(6, "y"), r(6, "z"))]                   # r7.x = r6.y ? a : -a
  np.testing.assert_array_equal(float_kernel(body, a), np.abs(a))

def test_mad_f32_and_mul_f_min_f_floor():
  a = np.random.default_rng(5).uniform(-5, 5, 128).astype(np.float32)
  body = [cat2(MUL_F, r(6, "y"), r(6), flut(3), nop=3),                     # 2a
          cat2(FLOOR_F, r(6, "z"), r(6, "y"), nop=3),                        # floor(2a)
          cat2(MIN_F, r(6, "z"), r(6, "z"), flut(11), nop=3),                # min(., 4.0)
          cat3(MAD_F32, r(7), r(6), r(6, "z"), r(6))]                        # a * . + a
  z = np.minimum(np.floor(a * 2), 4).astype(np.float32)
  np.testing.assert_array_equal(float_kernel(body, a), (a.astype(np.float64) * z + a).astype(np.float32))

def test_integer_wraparound_and_mul_u24():
  a = np.random.default_rng(6).integers(0, 2**32, 128, dtype=np.uint64).astype(np.uint32)
  body = [cat2(ADD_U, r(6, "y"), r(6), c_(1), nop=3),                       # a + 1 (const 1: the high word of BASE)
          cat2(MUL_U24, r(7), r(6, "y"), r(6))]
  got = float_kernel(body, a.view(np.float32), np.uint32)
  y = (a.astype(np.uint64) + 1) & 0xFFFFFFFF
  np.testing.assert_array_equal(got, ((y & 0xFFFFFF) * (a.astype(np.uint64) & 0xFFFFFF) & 0xFFFFFFFF).astype(np.uint32))

def test_cmps_to_predicate_drives_branch():
  mem = Memory(BASE, np.zeros(64 * 4, np.uint8))
  prog = index_address(r(3), 2, 0) + [mov(r(6), 5, kind=2),
          cat2(CMPS_S, P0, r(1), imm(32), cond=LT, nop=3), nop(rpt=2),      # p0.x = lid < 32
          br(3, inv=True), mov(r(6), 9, kind=2), nop(rpt=2), mov(r(6, "y"), r(6), flags=JP), nop(rpt=5), stg(r(3), r(6, "y")), end()]
  run(prog, mem, consts=consts_for(BASE))
  np.testing.assert_array_equal(mem.view(np.uint32, 0, 64), np.where(np.arange(64) < 32, 9, 5))

# ---- one wrong program per rule ---------------------------------------------------------------------------------
def load_then(consumer_flags: int) -> list:
  return index_address(r(3), 2, 0) + [ldg(r(6), r(3)), mov(r(7), r(6), flags=consumer_flags), nop(rpt=5), stg(r(3), r(7)), end()]

def test_missing_sy_after_ldg_raises():
  with pytest.raises(ShaderHazard, match=r"reads r6\.x, written by a global load \(ldg\) needs \(sy\)"):
    run(load_then(0), Memory(BASE, np.zeros(256, np.uint8)), consts=consts_for(BASE))
  run(load_then(SY), Memory(BASE, np.zeros(256, np.uint8)), consts=consts_for(BASE))

def test_missing_ss_after_cat4_raises():
  with pytest.raises(ShaderHazard, match=r"cat4 \(SFU\) result needs \(ss\)"):
    float_kernel([cat4(0, r(7), r(6)), mov(r(7, "y"), r(7))], np.ones(64, np.float32))

def test_missing_ss_after_ldl_raises():
  prog = [mov(r(6), 0, kind=2), nop(rpt=5), ldl(r(7), r(6)), mov(r(7, "y"), r(7)), end()]
  with pytest.raises(ShaderHazard, match=r"local load \(ldl\) needs \(ss\)"): run(prog, shared=16)

def test_rewriting_a_cat6_source_before_ss_raises():
  prog = [mov(r(6), 0, kind=2), nop(rpt=5), stl(r(6), r(6)), mov(r(6), 4, kind=2), end()]
  with pytest.raises(ShaderHazard, match=r"overwrites r6\.x still read by an earlier cat4/cat5/cat6"): run(prog, shared=16)

@pytest.mark.parametrize("flags,ok", [(0, False), (SY, True), (SS, True)])
def test_ldg_address_may_be_rewritten_after_sy_or_ss(flags, ok):
  """ir3_legalize.c: the sources of a (sy) producer (ldg, is_sy_producer) wait in needs_ss_or_sy_war, ended by either."""
  prog = index_address(r(3), 2, 0) + [ldg(r(6), r(3)), mov(r(3), 0, kind=2, flags=flags), end()]
  if ok: run(prog, Memory(BASE, np.zeros(256, np.uint8)), consts=consts_for(BASE))
  else:
    with pytest.raises(ShaderHazard, match=r"overwrites r3\.x still read .* without \(ss\) or \(sy\)"):
      run(prog, Memory(BASE, np.zeros(256, np.uint8)), consts=consts_for(BASE))

def test_missing_ss_sy_after_bar_raises():
  prog = [bar(), mov(r(6), 0, kind=2), end()]
  with pytest.raises(ShaderHazard, match=r"after a barrier lacks \(ss\) and \(sy\)"): run(prog)
  run([bar(), nop(flags=SS | SY), mov(r(6), 0, kind=2), end()])

@pytest.mark.parametrize("slots,ok", [(2, False), (3, True)])
def test_alu_delay_slots(slots, ok):
  prog = [cat2(ADD_U, r(6), r(1), imm(1), nop=slots), cat2(ADD_U, r(6, "y"), r(6), imm(1)), end()]
  if ok: run(prog)
  else:
    with pytest.raises(ShaderHazard, match=r"reads r6\.x 2 slot\(s\) after its ALU producer, needs 3"): run(prog)

def test_mad_third_source_needs_one_slot_first_needs_three():
  """ir3_src_read_delay: cat3 reads its third source 2 cycles late, so 1 slot suffices there and 3 for the first."""
  run([cat2(ADD_U, r(6), r(1), imm(1), nop=1), cat3(MAD_U24, r(6, "y"), r(1), r(1), r(6)), end()])
  with pytest.raises(ShaderHazard, match=r"reads r6\.x 1 slot\(s\) after its ALU producer, needs 3"):
    run([cat2(ADD_U, r(6), r(1), imm(1), nop=1), cat3(MAD_U24, r(6, "y"), r(6), r(1), r(1)), end()])

def test_branch_needs_six_slots_after_cmps():
  prog = [cat2(CMPS_S, P0, r(1), imm(0), cond=EQ, nop=3), nop(rpt=1), br(1, flags=0), nop(flags=JP), end()]
  with pytest.raises(ShaderHazard, match=r"reads p0\.x 5 slot\(s\) after its ALU producer, needs 6"): run(prog)

def test_branch_target_without_jp_raises():
  prog = [cat2(CMPS_S, P0, r(1), imm(0), cond=EQ, nop=3), nop(rpt=2), br(2), nop(), nop(), end()]
  with pytest.raises(ShaderHazard, match=r"branch target pc 4 .* lacks \(jp\)"): run(prog)

def test_register_beyond_footprint_raises():
  with pytest.raises(ShaderHazard, match=r"r2\.x is beyond the footprint of 2 full vec4 registers"):
    run([mov(r(2), 0, kind=2), end()], full=2)

def test_fault_address_raises_gpufault():
  mem = Memory(BASE, np.zeros(64, np.uint8))
  with pytest.raises(GPUFault) as e: run(load_then(SY), mem, consts=consts_for(BASE + 4096))
  assert e.value.address == BASE + 4096

def test_local_memory_out_of_range_is_a_fault():
  prog = [mov(r(6), 16, kind=2), nop(rpt=5), ldl(r(7), r(6)), end()]
  with pytest.raises(GPUFault, match=r"outside the 16 bytes of @shared"): run(prog, shared=16)

def test_const_beyond_upload_and_undecodable_word_raise():
  with pytest.raises(ShaderHazard, match=r"c1\.x is beyond the 4 uploaded constants"): run([mov(r(6), 4, kind=1), end()])
  with pytest.raises(ShaderHazard, match=r"word 0xa7c0000000000000 cannot run: cat5 opcode 31"): run([0xA7C0000000000000, end()])

def test_decoded_once_per_blob():
  from drivers.mock.qcom.ir3_decode import decode_program
  blob = code(nop(), end())
  assert decode_program(blob, 6) is decode_program(bytes(blob), 6)
  assert decode(end()).name == "end"
