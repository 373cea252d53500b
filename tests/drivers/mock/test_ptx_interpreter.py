"""The PTX reference interpreter against numpy (or exact arithmetic) on hand-written kernels. Every kernel the tests run
also goes through ptxas -arch=sm_90 when ptxas is installed, so the PTX here is known to be valid."""
import math, re, struct, subprocess
from fractions import Fraction
import numpy as np
import pytest
from codegen.ptx_compiler import find_ptxas
from drivers.mock.nv.ptx_interpreter import ArrayMemory, PTXError, PTXFault, PTXModule

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"
KERNELS: dict[str, str] = {}  # every valid kernel below, for the ptxas check

def kernel(name: str, body: str, target: str = "sm_90") -> str:
  KERNELS[name] = HEAD.replace("sm_90", target) + body
  return KERNELS[name]

def launch(src: str, entry: str, grid, block, arrays: list[np.ndarray], scalars=(), **kw) -> list[int]:
  """Places the arrays 16 MiB apart in an ArrayMemory and runs entry with their addresses, then the scalars."""
  mem, va = ArrayMemory(), [(i + 1) << 24 for i in range(len(arrays))]
  for a, v in zip(arrays, va): mem.add(v, a)
  PTXModule(src).run(entry, grid, block, va + list(scalars), mem, **kw)
  return va

def bits(x: np.ndarray) -> np.ndarray: return x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.itemsize])
f32 = lambda *v: np.array(v, np.float32)

VADD = kernel("vadd", """
.visible .entry vadd(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<9>;
  ld.param.u64 %rd1, [a];
  ld.param.u64 %rd2, [b];
  ld.param.u64 %rd3, [c];
  ld.param.u32 %r1, [n];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.lt.s32 %p1, %r5, %r1;
  mul.wide.s32 %rd4, %r5, 4;
  add.s64 %rd5, %rd1, %rd4;
  add.s64 %rd6, %rd2, %rd4;
  add.s64 %rd7, %rd3, %rd4;
  @%p1 ld.global.f32 %f1, [%rd5];
  @%p1 ld.global.nc.f32 %f2, [%rd6];
  add.f32 %f3, %f1, %f2;
  @%p1 st.global.f32 [%rd7], %f3;
  ret;
}
""")

def test_vector_add_with_bounds_check():
  rng = np.random.default_rng(0)
  a, b, c = rng.standard_normal(1000, np.float32), rng.standard_normal(1000, np.float32), np.zeros(1000, np.float32)
  launch(VADD, "vadd", (8, 1, 1), (128, 1, 1), [a, b, c], [1000])
  np.testing.assert_array_equal(c, a + b)

def test_params_as_bytes_and_batched_blocks():
  m = PTXModule(VADD)
  assert m.entries == ["vadd"]
  assert m.param_layout("vadd") == [("a", "u64", 0, 8), ("b", "u64", 8, 8), ("c", "u64", 16, 8), ("n", "u32", 24, 4)]
  a, b, c = np.arange(500, dtype=np.float32), np.full(500, 2, np.float32), np.zeros(500, np.float32)
  mem = ArrayMemory()
  for va, x in ((0x1000, a), (0x2000, b), (0x3000, c)): mem.add(va, x)
  m.run("vadd", (4, 1, 1), (128, 1, 1), struct.pack("<QQQI", 0x1000, 0x2000, 0x3000, 500), mem, max_lanes=256)
  np.testing.assert_array_equal(c, a + 2)
  assert PTXModule(VADD)._kernels is m._kernels  # parsed once per source

def test_out_of_bounds_load_names_the_address_and_thread():
  a, b, c = (np.zeros(1000, np.float32) for _ in range(3))
  with pytest.raises(PTXFault) as e: launch(VADD, "vadd", (8, 1, 1), (128, 1, 1), [a, b, c], [1001])
  f = e.value
  assert (f.address, f.size, f.kernel, f.block, f.thread) == ((1 << 24) + 4000, 4, "vadd", (7, 0, 0), (104, 0, 0))
  assert "0x1000fa0" in str(f) and "vadd" in str(f)

REDUCE = kernel("reduce", """
.visible .entry reduce(.param .u64 src, .param .u64 dst)
{
  .reg .pred %p<3>;
  .reg .b32 %r<12>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<6>;
  .shared .align 4 .b8 buf[1024];
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  mul.wide.u32 %rd3, %r4, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  mov.u32 %r5, buf;
  shl.b32 %r6, %r1, 2;
  add.s32 %r7, %r5, %r6;
  st.shared.f32 [%r7], %f1;
  bar.sync 0;
  shr.u32 %r8, %r3, 1;
$L_loop:
  setp.ge.u32 %p1, %r1, %r8;
  @%p1 bra $L_skip;
  shl.b32 %r9, %r8, 2;
  add.s32 %r10, %r7, %r9;
  ld.shared.f32 %f2, [%r10];
  ld.shared.f32 %f3, [%r7];
  add.f32 %f3, %f3, %f2;
  st.shared.f32 [%r7], %f3;
$L_skip:
  bar.sync 0;
  shr.u32 %r8, %r8, 1;
  setp.ne.s32 %p2, %r8, 0;
  @%p2 bra $L_loop;
  setp.ne.s32 %p1, %r1, 0;
  @%p1 bra $L_done;
  ld.shared.f32 %f1, [buf];
  mul.wide.u32 %rd3, %r2, 4;
  add.s64 %rd5, %rd2, %rd3;
  st.global.f32 [%rd5], %f1;
$L_done:
  ret;
}
""")

@pytest.mark.parametrize("block", [256, 64])
def test_block_reduction_through_shared_memory(block):
  src = np.random.default_rng(1).integers(-100, 100, 6 * block).astype(np.float32)  # small integers: any order sums exactly
  dst = np.zeros(6, np.float32)
  launch(REDUCE, "reduce", (6, 1, 1), (block, 1, 1), [src, dst])
  np.testing.assert_array_equal(dst, src.reshape(6, block).sum(axis=1))

DIVERGE = kernel("diverge", """
.visible .entry diverge(.param .u64 dst)
{
  .reg .pred %p<4>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [dst];
  mov.u32 %r1, %tid.x;
  setp.ge.u32 %p3, %r1, 250;
  @%p3 exit;
  and.b32 %r2, %r1, 1;
  setp.eq.b32 %p1, %r2, 0;
  @%p1 bra $L_even;
  mul.lo.s32 %r3, %r1, 3;
  bra.uni $L_join;
$L_even:
  add.s32 %r3, %r1, 100;
$L_join:
  rem.u32 %r4, %r1, 7;
  mov.u32 %r5, 0;
  setp.eq.s32 %p2, %r4, 0;
  @%p2 bra $L_done;
$L_loop:
  add.s32 %r3, %r3, %r5;
  add.s32 %r5, %r5, 1;
  setp.lt.u32 %p2, %r5, %r4;
  @%p2 bra $L_loop;
$L_done:
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3;
  ret;
}
""")

def test_divergent_if_else_and_per_thread_loops():
  out = np.full(256, 0xDEAD, np.uint32)
  launch(DIVERGE, "diverge", (1, 1, 1), (256, 1, 1), [out])
  i = np.arange(256)
  want = np.where(i % 2 == 1, 3 * i, i + 100) + (i % 7) * (i % 7 - 1) // 2  # plus 0 + 1 + ... + (i % 7 - 1)
  np.testing.assert_array_equal(out[:250], want[:250])
  assert (out[250:] == 0xDEAD).all()  # those threads exited first

def cvt_kernel(cvt: str, ld: str, st: str) -> str:
  dtype, stype = cvt.split(".")[-2:]
  width = lambda t: max(16, int(t.lstrip("bfsu")))
  return kernel(f"cvt {cvt} {ld} {st}", f"""
.visible .entry k(.param .u64 src, .param .u64 dst)
{{
  .reg .b{max(width(ld), width(stype))} %a;
  .reg .b{max(width(dtype), width(st))} %d;
  .reg .b32 %r1;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, {int(ld.lstrip("bfsu")) // 8};
  add.s64 %rd4, %rd1, %rd3;
  mul.wide.u32 %rd3, %r1, {int(st.lstrip("bfsu")) // 8};
  add.s64 %rd5, %rd2, %rd3;
  ld.global.{ld} %a, [%rd4];
  {cvt} %d, %a;
  st.global.{st} [%rd5], %d;
  ret;
}}
""")

def bf16_rn(x: np.ndarray) -> np.ndarray:  # round-to-nearest-even on the float32 bits
  b = x.view(np.uint32).astype(np.uint64)
  return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)

def f16_rz(x: np.ndarray) -> np.ndarray:
  with np.errstate(over="ignore"): r = x.astype(np.float16)
  return np.where(np.abs(r.astype(np.float32)) > np.abs(x), np.nextafter(r, np.float16(0)), r)

_ties16 = f32(1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-11), 65520, 65519, 1e-8, 3e-5, 2**-25, 2**-25 * 3)
_wide = np.random.default_rng(2).standard_normal(64).astype(np.float32) * np.float32(2.0) ** np.arange(-32, 32).astype(np.float32)
_bf_ties = np.array([0x3F808000, 0x3F818000, 0x3F808001, 0xBF808000, 0x7F7FFFFF, 0x00018000], np.uint32).view(np.float32)
I32_MIN, I32_MAX, I64_MIN, I64_MAX = -2**31, 2**31 - 1, -2**63, 2**63 - 1
_quiet = np.errstate(over="ignore")  # expected values overflow to infinity on purpose
_quiet.__enter__()
CVT_CASES = [  # (instruction, load type, store type, source values, expected stored values)
  ("cvt.rzi.s32.f32", "f32", "s32", f32(1.5, -1.5, 2.9, -2.9, 3e9, -3e9, np.nan, np.inf, -np.inf, -0.0),
   np.array([1, -1, 2, -2, I32_MAX, I32_MIN, 0, I32_MAX, I32_MIN, 0], np.int32)),
  ("cvt.rni.s32.f32", "f32", "s32", f32(0.5, 1.5, 2.5, -0.5, -1.5, -2.5), np.array([0, 2, 2, 0, -2, -2], np.int32)),
  ("cvt.rmi.s32.f32", "f32", "s32", f32(1.5, -1.5), np.array([1, -2], np.int32)),
  ("cvt.rpi.s32.f32", "f32", "s32", f32(1.5, -1.5), np.array([2, -1], np.int32)),
  ("cvt.rzi.u32.f32", "f32", "u32", f32(-1.5, 5e9, 3.7, np.nan), np.array([0, 2**32 - 1, 3, 0], np.uint32)),
  ("cvt.rzi.u8.f32", "f32", "u8", f32(300, -5, 7.9, 255.5), np.array([255, 0, 7, 255], np.uint8)),
  ("cvt.rzi.s64.f64", "f64", "s64", np.array([1e19, -1e19, np.nan, -5.5, 2.0**63], np.float64),
   np.array([I64_MAX, I64_MIN, 0, -5, I64_MAX], np.int64)),
  ("cvt.rzi.u64.f64", "f64", "u64", np.array([1e20, -3.0, 2.0**63 + 2048], np.float64), np.array([2**64 - 1, 0, 2**63 + 2048], np.uint64)),
  ("cvt.rn.f16.f32", "f32", "b16", np.concatenate([_ties16, _wide]), bits(np.concatenate([_ties16, _wide]).astype(np.float16))),
  ("cvt.rz.f16.f32", "f32", "b16", np.concatenate([_ties16, _wide]), bits(f16_rz(np.concatenate([_ties16, _wide])))),
  ("cvt.rn.bf16.f32", "f32", "b16", np.concatenate([_bf_ties, _wide]), bf16_rn(np.concatenate([_bf_ties, _wide]))),
  ("cvt.rz.bf16.f32", "f32", "b16", np.concatenate([_bf_ties, _wide]), (bits(np.concatenate([_bf_ties, _wide])) >> 16).astype(np.uint16)),
  ("cvt.rn.bf16.f64", "f64", "b16", np.array([1 + 2**-8 + 2**-40, 1 + 2**-8, 1 + 3 * 2**-8], np.float64), np.array([0x3F81, 0x3F80, 0x3F82], np.uint16)),
  ("cvt.s8.s32", "s32", "b16", np.array([0x17F, 0x180, -1, 200], np.int32), np.array([127, -128, -1, -56], np.int16)),
  ("cvt.s16.s8", "b16", "b16", np.array([0x1280, 0x007F, 0xFFFF], np.uint16), np.array([-128, 127, -1], np.int16)),
  ("cvt.sat.u8.s32", "s32", "b16", np.array([300, -1, 77], np.int32), np.array([255, 0, 77], np.uint16)),
  ("cvt.s64.s32", "s32", "s64", np.array([-1, I32_MIN], np.int32), np.array([-1, I32_MIN], np.int64)),
  ("cvt.u64.u32", "u32", "u64", np.array([2**32 - 1], np.uint32), np.array([2**32 - 1], np.uint64)),
  ("cvt.rn.f32.s32", "s32", "f32", np.array([16777217, -16777217, 16777219], np.int32), f32(16777216, -16777216, 16777220)),
  ("cvt.rz.f32.s32", "s32", "f32", np.array([16777219, -16777219], np.int32), f32(16777218, -16777218)),
  ("cvt.rp.f32.s32", "s32", "f32", np.array([16777217, -16777217], np.int32), f32(16777218, -16777216)),
  ("cvt.rm.f32.s32", "s32", "f32", np.array([16777217, -16777217], np.int32), f32(16777216, -16777218)),
  ("cvt.rn.f32.u64", "u64", "f32", np.array([2**64 - 1, 2**24 + 1], np.uint64), f32(2.0**64, 2**24)),
  ("cvt.rz.f32.u64", "u64", "f32", np.array([2**64 - 1], np.uint64), f32(2.0**64 - 2.0**40)),
  ("cvt.rn.f64.s64", "s64", "f64", np.array([2**53 + 1, -(2**53 + 3), I64_MIN], np.int64), np.array([2.0**53, -(2.0**53 + 4), -2.0**63])),
  ("cvt.rn.f16.s32", "s32", "b16", np.array([2049, 2051, 70000], np.int32), bits(np.array([2048, 2052, np.inf], np.float16))),
  ("cvt.rn.f32.f64", "f64", "f32", np.array([1 / 3, 1e40, 1e-50, -0.0]), np.array([1 / 3, 1e40, 1e-50, -0.0]).astype(np.float32)),
  ("cvt.f64.f32", "f32", "f64", f32(0.1, -np.inf, 1e-45), f32(0.1, -np.inf, 1e-45).astype(np.float64)),
  ("cvt.rni.f32.f32", "f32", "f32", f32(2.5, -0.5, 3.5, 1e30), f32(2, -0.0, 4, 1e30)),
  ("cvt.rzi.f64.f64", "f64", "f64", np.array([-2.75, 1e300]), np.array([-2.0, 1e300])),
  ("cvt.f32.f16", "b16", "f32", np.array([0x3C00, 0x7C00, 0x0001, 0xFE00], np.uint16), np.array([0x3C00, 0x7C00, 0x0001, 0xFE00], np.uint16).view(np.float16).astype(np.float32)),
  ("cvt.f32.bf16", "b16", "f32", np.array([0x3F80, 0xC000, 0x0001], np.uint16), (np.array([0x3F80, 0xC000, 0x0001], np.uint32) << 16).view(np.float32)),
  ("cvt.sat.f32.f32", "f32", "f32", f32(-2, 0.5, 7, np.nan), f32(0, 0.5, 1, 0)),
]
_quiet.__exit__(None, None, None)
for _case in CVT_CASES: cvt_kernel(*_case[:3])

@pytest.mark.parametrize("cvt, ld, st, x, want", CVT_CASES, ids=[c[0] for c in CVT_CASES])
def test_cvt(cvt, ld, st, x, want):
  out = np.zeros(len(x), want.dtype)
  launch(cvt_kernel(cvt, ld, st), "k", (1, 1, 1), (len(x), 1, 1), [x, out])
  np.testing.assert_array_equal(bits(out) if out.dtype.kind == "f" else out, bits(want) if want.dtype.kind == "f" else want)

LOADS = kernel("loads", """
.visible .entry loads(.param .u64 src, .param .u64 dst)
{
  .reg .b16 %h<3>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  mov.u32 %r1, %tid.x;
  cvt.u64.u32 %rd3, %r1;
  add.s64 %rd1, %rd1, %rd3;
  mul.wide.u32 %rd3, %r1, 12;
  add.s64 %rd2, %rd2, %rd3;
  ld.global.u8 %r2, [%rd1];
  ld.global.s8 %r3, [%rd1];
  ld.global.u8 %h1, [%rd1];
  ld.global.s8 %h2, [%rd1];
  st.global.u32 [%rd2], %r2;
  st.global.u32 [%rd2+4], %r3;
  st.global.b16 [%rd2+8], %h1;
  st.global.b16 [%rd2+10], %h2;
  ret;
}
""")

def test_byte_loads_extend_by_type():
  src, out = np.array([0x00, 0x7F, 0x80, 0xFF], np.uint8), np.zeros((4, 3), np.uint32)
  launch(LOADS, "loads", 1, 4, [src, out])
  np.testing.assert_array_equal(out[:, 0], [0, 0x7F, 0x80, 0xFF])
  np.testing.assert_array_equal(out[:, 1], [0, 0x7F, 0xFFFFFF80, 0xFFFFFFFF])
  np.testing.assert_array_equal(out[:, 2], [0, 0x7F << 16 | 0x7F, 0xFF80 << 16 | 0x80, 0xFFFF << 16 | 0xFF])  # s8 high, u8 low

CMPS = ["eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"]
SETP = kernel("setp", """
.visible .entry setp(.param .u64 src, .param .u64 dst)
{
  .reg .pred %p<2>;
  .reg .f32 %f<3>;
  .reg .b32 %r<3>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 8;
  add.s64 %rd3, %rd1, %rd3;
  ld.global.v2.f32 {%f1, %f2}, [%rd3];
  mul.wide.u32 %rd4, %r1, 56;
  add.s64 %rd4, %rd2, %rd4;
""" + "".join(f"  setp.{c}.f32 %p1, %f1, %f2;\n  selp.u32 %r2, 1, 0, %p1;\n  st.global.u32 [%rd4+{4 * j}], %r2;\n" for j, c in enumerate(CMPS)) + """  ret;
}
""")

def test_setp_ordered_and_unordered_with_nan():
  pairs = f32(1, 2, 2, 2, 3, 1, np.nan, 1, 1, np.nan, np.nan, np.nan, np.inf, np.inf, -0.0, 0.0)
  out = np.zeros((8, len(CMPS)), np.uint32)
  launch(SETP, "setp", 1, 8, [pairs, out])
  a, b = pairs[0::2], pairs[1::2]
  un = np.isnan(a) | np.isnan(b)
  base = {"eq": a == b, "ne": (a != b) & ~un, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}
  want = {**base, **{c + "u": base[c] | un for c in base}, "num": ~un, "nan": un}
  np.testing.assert_array_equal(out, np.stack([want[c] for c in CMPS], axis=1).astype(np.uint32))

MINMAX = kernel("minmax", """
.visible .entry minmax(.param .u64 src, .param .u64 dst)
{
  .reg .f32 %f<4>;
  .reg .b32 %r1;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 8;
  add.s64 %rd3, %rd1, %rd3;
  ld.global.f32 %f1, [%rd3];
  ld.global.f32 %f2, [%rd3+4];
  mul.wide.u32 %rd4, %r1, 16;
  add.s64 %rd4, %rd2, %rd4;
  max.f32 %f3, %f1, %f2;
  st.global.f32 [%rd4], %f3;
  max.NaN.f32 %f3, %f1, %f2;
  st.global.f32 [%rd4+4], %f3;
  min.f32 %f3, %f1, %f2;
  st.global.f32 [%rd4+8], %f3;
  min.NaN.f32 %f3, %f1, %f2;
  st.global.f32 [%rd4+12], %f3;
  ret;
}
""")

def test_min_max_nan_handling():
  nan = np.uint32(0x7FC00001).view(np.float32)  # a NaN with a payload: results are the canonical NaN
  pairs = f32(nan, 1, 1, nan, nan, nan, 0.0, -0.0, -0.0, 0.0, 2, 3, -np.inf, 1)
  out = np.zeros((7, 4), np.float32)
  launch(MINMAX, "minmax", 1, 7, [pairs, out])
  C = np.uint32(0x7FFFFFFF).view(np.float32)
  want = np.array([[1, C, 1, C], [1, C, 1, C], [C, C, C, C], [0.0, 0.0, -0.0, -0.0], [0.0, 0.0, -0.0, -0.0], [3, 3, 2, 2],
                   [1, 1, -np.inf, -np.inf]], np.float32)
  np.testing.assert_array_equal(bits(out), bits(want))

SHIFT = kernel("shift", """
.visible .entry shift(.param .u64 src, .param .u64 dst)
{
  .reg .b16 %h<3>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 16;
  add.s64 %rd3, %rd1, %rd3;
  ld.global.u64 %rd4, [%rd3];
  ld.global.u32 %r2, [%rd3+8];
  mul.wide.u32 %rd5, %r1, 48;
  add.s64 %rd5, %rd2, %rd5;
  cvt.u32.u64 %r3, %rd4;
  shl.b32 %r4, %r3, %r2;
  st.global.u32 [%rd5], %r4;
  shr.u32 %r4, %r3, %r2;
  st.global.u32 [%rd5+4], %r4;
  shr.s32 %r4, %r3, %r2;
  st.global.u32 [%rd5+8], %r4;
  shl.b64 %rd6, %rd4, %r2;
  st.global.u64 [%rd5+16], %rd6;
  shr.s64 %rd6, %rd4, %r2;
  st.global.u64 [%rd5+24], %rd6;
  cvt.u16.u64 %h1, %rd4;
  shr.s16 %h2, %h1, %r2;
  st.global.b16 [%rd5+32], %h2;
  shl.b16 %h2, %h1, %r2;
  st.global.b16 [%rd5+34], %h2;
  shl.b32 %r4, %r3, 40;
  st.global.u32 [%rd5+36], %r4;
  shr.s32 %r4, %r3, 40;
  st.global.u32 [%rd5+40], %r4;
  ret;
}
""")

def test_shifts_clamp_amounts_past_the_width():
  xs = [0x8000000080008001, 0x8000000080008001, 0x8000000080008001, 0x8000000080008001, 0x0000000070007001, 0x8000000080008001, 0x1]
  amounts = [0, 1, 15, 16, 31, 32, 64]
  src = np.zeros(len(xs), [("x", np.uint64), ("n", np.uint32), ("pad", np.uint32)])
  src["x"], src["n"] = xs, amounts
  out = np.zeros(len(xs), [("shl", np.uint32), ("shr_u", np.uint32), ("shr_s", np.int32), ("pad", np.uint32), ("shl64", np.uint64),
                          ("shr_s64", np.int64), ("shr_s16", np.int16), ("shl16", np.uint16), ("shl40", np.uint32), ("shr_s40", np.int32), ("pad2", np.uint32)])
  launch(SHIFT, "shift", 1, len(xs), [src, out])
  sx = lambda v, w: v - (1 << w) if v >> (w - 1) & 1 else v  # two's complement value of a w-bit pattern
  for i, (x, n) in enumerate(zip(xs, amounts)):
    x32, x16 = x & 0xFFFFFFFF, x & 0xFFFF
    assert out["shl"][i] == (x32 << n) & 0xFFFFFFFF and out["shr_u"][i] == x32 >> n
    assert out["shr_s"][i] == sx(x32, 32) >> min(n, 31) and out["shl64"][i] == (x << n) & (2**64 - 1)
    assert out["shr_s64"][i] == sx(x, 64) >> min(n, 63) and out["shr_s16"][i] == sx(x16, 16) >> min(n, 15)
    assert out["shl16"][i] == (x16 << n) & 0xFFFF
    assert out["shl40"][i] == 0 and out["shr_s40"][i] == (-1 if x32 >> 31 else 0)

MUL = kernel("mul", """
.visible .entry mul(.param .u64 src, .param .u64 dst)
{
  .reg .b32 %r<5>;
  .reg .b64 %rd<9>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 16;
  add.s64 %rd3, %rd1, %rd3;
  ld.global.v2.u64 {%rd4, %rd5}, [%rd3];
  cvt.u32.u64 %r2, %rd4;
  cvt.u32.u64 %r3, %rd5;
  mul.wide.u32 %rd6, %r1, 48;
  add.s64 %rd6, %rd2, %rd6;
  mul.wide.s32 %rd7, %r2, %r3;
  st.global.u64 [%rd6], %rd7;
  mul.wide.u32 %rd7, %r2, %r3;
  st.global.u64 [%rd6+8], %rd7;
  mul.hi.s32 %r4, %r2, %r3;
  st.global.u32 [%rd6+16], %r4;
  mul.lo.s32 %r4, %r2, %r3;
  st.global.u32 [%rd6+20], %r4;
  mul.hi.s64 %rd8, %rd4, %rd5;
  st.global.u64 [%rd6+24], %rd8;
  mul.hi.u64 %rd8, %rd4, %rd5;
  st.global.u64 [%rd6+32], %rd8;
  mad.wide.s32 %rd8, %r2, %r3, %rd4;
  st.global.u64 [%rd6+40], %rd8;
  ret;
}
""")

def test_multiplication_widths_and_signs():
  pairs = [(-3, 5), (I32_MIN, I32_MIN), (-1, -1), (0x7FFFFFFF, -2), (I64_MIN, -1), (-(2**40) + 7, 2**35 + 3), (2**64 - 1, 2**64 - 1)]
  src = np.array([[a % 2**64, b % 2**64] for a, b in pairs], np.uint64)
  out = np.zeros(len(pairs), [("ws", np.int64), ("wu", np.uint64), ("hi", np.int32), ("lo", np.int32), ("hs64", np.int64),
                             ("hu64", np.uint64), ("mad", np.int64)])
  launch(MUL, "mul", 1, len(pairs), [src, out])
  s = lambda v, w: (v % 2**w) - 2**w if (v % 2**w) >> (w - 1) else v % 2**w
  for i, (a, b) in enumerate(pairs):
    a32, b32, a64, b64 = s(a, 32), s(b, 32), s(a, 64), s(b, 64)
    assert out["ws"][i] == a32 * b32 and out["wu"][i] == (a % 2**32) * (b % 2**32)
    assert out["hi"][i] == (a32 * b32) >> 32 and out["lo"][i] == s(a32 * b32, 32)
    assert out["hs64"][i] == (a64 * b64) >> 64 and out["hu64"][i] == ((a % 2**64) * (b % 2**64)) >> 64
    assert out["mad"][i] == s(a32 * b32 + a64, 64)

INTOPS = kernel("intops", """
.visible .entry intops(.param .u64 src, .param .u64 dst)
{
  .reg .b32 %r<6>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 8;
  add.s64 %rd3, %rd1, %rd3;
  ld.global.v2.u32 {%r2, %r3}, [%rd3];
  mul.wide.u32 %rd4, %r1, 40;
  add.s64 %rd4, %rd2, %rd4;
  div.s32 %r4, %r2, %r3;
  rem.s32 %r5, %r2, %r3;
  st.global.v2.u32 [%rd4], {%r4, %r5};
  div.u32 %r4, %r2, %r3;
  rem.u32 %r5, %r2, %r3;
  st.global.v2.u32 [%rd4+8], {%r4, %r5};
  add.sat.s32 %r4, %r2, %r3;
  max.u32 %r5, %r2, %r3;
  st.global.v2.u32 [%rd4+16], {%r4, %r5};
  max.s32 %r4, %r2, %r3;
  abs.s32 %r5, %r2;
  st.global.v2.u32 [%rd4+24], {%r4, %r5};
  popc.b32 %r4, %r2;
  clz.b32 %r5, %r2;
  st.global.v2.u32 [%rd4+32], {%r4, %r5};
  ret;
}
""")

def test_integer_division_min_max_and_bit_counts():
  pairs = [(7, -2), (-7, 2), (I32_MIN, -1), (I32_MAX, 1), (5, 0), (-5, 0), (0, 3)]
  src = np.array(pairs, np.int64).astype(np.int32)
  out = np.zeros((len(pairs), 10), np.uint32)
  launch(INTOPS, "intops", 1, len(pairs), [src, out])
  o = out.view(np.int32)
  trunc = lambda a, b: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
  for i, (a, b) in enumerate(pairs):
    if b == 0:  # unspecified by PTX; the interpreter gives all ones and the dividend as the remainder
      assert o[i, 0] == -1 and o[i, 1] == a and out[i, 2] == 2**32 - 1 and out[i, 3] == a % 2**32
    else:
      q = trunc(a, b) if (a, b) != (I32_MIN, -1) else I32_MIN
      assert o[i, 0] == q and o[i, 1] == a - trunc(a, b) * b
      assert out[i, 2] == (a % 2**32) // (b % 2**32) and out[i, 3] == (a % 2**32) % (b % 2**32)
    assert o[i, 4] == min(max(a + b, I32_MIN), I32_MAX) and out[i, 5] == max(a % 2**32, b % 2**32)
    assert o[i, 6] == max(a, b) and o[i, 7] == (abs(a) if a != I32_MIN else I32_MIN)
    assert out[i, 8] == bin(a % 2**32).count("1") and out[i, 9] == 32 - (a % 2**32).bit_length()

MODES = ["rn", "rz", "rm", "rp"]
ROUNDING = kernel("rounding", """
.visible .entry rounding(.param .u64 src, .param .u64 dst)
{
  .reg .f32 %f<5>;
  .reg .b32 %r1;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 12;
  add.s64 %rd3, %rd1, %rd3;
  ld.global.f32 %f1, [%rd3];
  ld.global.f32 %f2, [%rd3+4];
  ld.global.f32 %f3, [%rd3+8];
  mul.wide.u32 %rd4, %r1, 80;
  add.s64 %rd4, %rd2, %rd4;
""" + "".join(f"""  add.{m}.f32 %f4, %f1, %f2;
  st.global.f32 [%rd4+{20 * j}], %f4;
  sub.{m}.f32 %f4, %f1, %f2;
  st.global.f32 [%rd4+{20 * j + 4}], %f4;
  mul.{m}.f32 %f4, %f1, %f2;
  st.global.f32 [%rd4+{20 * j + 8}], %f4;
  fma.{m}.f32 %f4, %f1, %f2, %f3;
  st.global.f32 [%rd4+{20 * j + 12}], %f4;
  div.{m}.f32 %f4, %f1, %f2;
  st.global.f32 [%rd4+{20 * j + 16}], %f4;
""" for j, m in enumerate(MODES)) + """  ret;
}
""")

def round_f32(q: Fraction, mode: str) -> np.float32:
  """The exact value q rounded to float32 with a PTX rounding mode (the reference the interpreter is held to)."""
  c = np.float32(float(q))
  if Fraction(float(c)) == q: return c
  lo, hi = (np.nextafter(c, np.float32(-np.inf)), c) if Fraction(float(c)) > q else (c, np.nextafter(c, np.float32(np.inf)))
  if mode != "rn": return {"rz": lo if q > 0 else hi, "rm": lo, "rp": hi}[mode]
  dl, dh = q - Fraction(float(lo)), Fraction(float(hi)) - q
  return lo if dl < dh else hi if dh < dl else (lo if int(lo.view(np.uint32)) % 2 == 0 else hi)

def test_rounding_modes_against_exact_arithmetic():
  rng = np.random.default_rng(3)
  src = (rng.uniform(-2, 2, (64, 3)) * 2.0 ** rng.integers(-30, 30, (64, 3))).astype(np.float32)
  src[0] = [1 + 2**-12, 1 + 2**-12, 2**-60]  # the exact fma is just past a tie that float64 arithmetic would land on
  src[1] = [1 + 2**-12, 1 + 2**-12, -(2**-60)]
  out = np.zeros((64, 4, 5), np.float32)
  launch(ROUNDING, "rounding", 1, 64, [src, out])
  for i, (a, b, c) in enumerate(src):
    A, B, C = Fraction(float(a)), Fraction(float(b)), Fraction(float(c))
    for j, m in enumerate(MODES):
      want = [round_f32(q, m) for q in (A + B, A - B, A * B, A * B + C, A / B)]
      assert bits(out[i, j]).tolist() == bits(np.array(want, np.float32)).tolist(), (i, m, a, b, c)

FMA64 = kernel("fma64", """
.visible .entry fma64(.param .u64 src, .param .u64 dst)
{
  .reg .f64 %fd<5>;
  .reg .b32 %r1;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 24;
  add.s64 %rd3, %rd1, %rd3;
  ld.global.f64 %fd1, [%rd3];
  ld.global.f64 %fd2, [%rd3+8];
  ld.global.f64 %fd3, [%rd3+16];
  mul.wide.u32 %rd4, %r1, 16;
  add.s64 %rd4, %rd2, %rd4;
  fma.rn.f64 %fd4, %fd1, %fd2, %fd3;
  st.global.f64 [%rd4], %fd4;
  fma.rz.f64 %fd4, %fd1, %fd2, %fd3;
  st.global.f64 [%rd4+8], %fd4;
  ret;
}
""")

def test_fma_f64_rounds_once():
  a, b = 1 + 2**-26, 1 + 2**-27  # a * b = 1 + 2**-26 + 2**-27 + 2**-53: a tie in float64, broken by c
  src = np.array([[a, b, 2**-80], [a, b, -(2**-80)], [a, b, 0.0], [np.inf, 2.0, 1.0], [1e308, 10.0, -1e308], [3.0, 1 / 3, -1.0]])
  out = np.zeros((len(src), 2))
  launch(FMA64, "fma64", 1, len(src), [src, out])
  low = 1 + 2**-26 + 2**-27
  np.testing.assert_array_equal(out[:3], [[low + 2**-52, low], [low, low], [low, low]])
  assert out[3, 0] == np.inf and out[4, 0] == np.inf and out[5, 0] == -(2**-54) and out[5, 1] == -(2**-54)  # 3 * fl(1/3) = 1 - 2**-54 exactly

HALF = kernel("half", """
.visible .entry half(.param .u64 src, .param .u64 dst)
{
  .reg .b16 %h<6>;
  .reg .b32 %r<3>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 6;
  add.s64 %rd3, %rd1, %rd3;
  ld.global.b16 %h1, [%rd3];
  ld.global.b16 %h2, [%rd3+2];
  ld.global.b16 %h3, [%rd3+4];
  mul.wide.u32 %rd4, %r1, 12;
  add.s64 %rd4, %rd2, %rd4;
  add.f16 %h4, %h1, %h2;
  mul.f16 %h5, %h1, %h2;
  mov.b32 %r2, {%h4, %h5};
  st.global.u32 [%rd4], %r2;
  fma.rn.f16 %h4, %h1, %h2, %h3;
  max.f16 %h5, %h1, %h3;
  st.global.v2.b16 [%rd4+4], {%h4, %h5};
  neg.f16 %h4, %h1;
  ex2.approx.f16 %h5, %h2;
  st.global.v2.b16 [%rd4+8], {%h4, %h5};
  ret;
}
""")

def test_half_precision_arithmetic():
  x = np.random.default_rng(4).uniform(-4, 4, (256, 3)).astype(np.float16)
  out = np.zeros((256, 6), np.float16)
  launch(HALF, "half", 1, 256, [x, out])
  a, b, c = x[:, 0], x[:, 1], x[:, 2]
  fma = (a.astype(np.float64) * b + c).astype(np.float16)  # exact in float64 for these magnitudes
  np.testing.assert_array_equal(bits(out[:, :5]), bits(np.stack([a + b, a * b, fma, np.maximum(a, c), -a], axis=1)))
  np.testing.assert_allclose(out[:, 5].astype(np.float32), np.exp2(b.astype(np.float32)), rtol=1e-3)

APPROX = kernel("approx", """
.visible .entry approx(.param .u64 src, .param .u64 dst)
{
  .reg .f32 %f<3>;
  .reg .b32 %r1;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd3, %rd1, %rd3;
  ld.global.f32 %f1, [%rd3];
  mul.wide.u32 %rd4, %r1, 32;
  add.s64 %rd4, %rd2, %rd4;
  ex2.approx.ftz.f32 %f2, %f1;
  st.global.f32 [%rd4], %f2;
  lg2.approx.f32 %f2, %f1;
  st.global.f32 [%rd4+4], %f2;
  sin.approx.f32 %f2, %f1;
  st.global.f32 [%rd4+8], %f2;
  cos.approx.f32 %f2, %f1;
  st.global.f32 [%rd4+12], %f2;
  rsqrt.approx.f32 %f2, %f1;
  st.global.f32 [%rd4+16], %f2;
  sqrt.approx.f32 %f2, %f1;
  st.global.f32 [%rd4+20], %f2;
  rcp.approx.f32 %f2, %f1;
  st.global.f32 [%rd4+24], %f2;
  div.full.f32 %f2, 0f3F800000, %f1;
  st.global.f32 [%rd4+28], %f2;
  ret;
}
""")

def test_approximate_functions():
  x = np.random.default_rng(5).uniform(0.01, 10, 128).astype(np.float32)
  out = np.zeros((128, 8), np.float32)
  launch(APPROX, "approx", 1, 128, [x, out])
  want = np.stack([np.exp2(x), np.log2(x), np.sin(x), np.cos(x), 1 / np.sqrt(x), np.sqrt(x), 1 / x, 1 / x], axis=1)
  np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-7)

VECTOR = kernel("vector", """
.visible .entry vector(.param .u64 src, .param .u64 dst)
{
  .reg .b16 %h<3>;
  .reg .b32 %r<5>;
  .reg .f32 %f<5>;
  .reg .b64 %rd<8>;
  .shared .align 16 .b8 tile[1024];
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 16;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd4];
  mov.u64 %rd5, tile;
  add.s64 %rd6, %rd5, %rd3;
  st.shared.v4.f32 [%rd6], {%f4, %f3, %f2, %f1};
  bar.sync 0;
  ld.shared.v2.u32 {%r2, %r3}, [%rd6+8];
  mov.b64 %rd7, {%r2, %r3};
  mov.b32 {%h1, %h2}, %r2;
  mov.b32 %r4, {%h2, %h1};
  add.s64 %rd4, %rd2, %rd3;
  st.global.u64 [%rd4], %rd7;
  st.global.u32 [%rd4+8], %r4;
  st.global.u32 [%rd4+12], 7;
  ret;
}
""")

def test_vector_loads_stores_and_packing():
  src = np.random.default_rng(6).standard_normal((64, 4)).astype(np.float32)
  out = np.zeros((64, 4), np.uint32)
  launch(VECTOR, "vector", 1, 64, [src, out])
  s = bits(src)
  np.testing.assert_array_equal(out, np.stack([s[:, 1], s[:, 0], (s[:, 1] << 16) | (s[:, 1] >> 16), np.full(64, 7, np.uint32)], axis=1))

SAME = kernel("same", """
.visible .entry same(.param .u64 dst)
{
  .reg .b32 %r1;
  .reg .b64 %rd1;
  ld.param.u64 %rd1, [dst];
  mov.u32 %r1, %tid.x;
  st.global.u32 [%rd1], %r1;
  ret;
}
""")

def test_stores_to_one_address_keep_the_last_lane():
  out = np.zeros(1, np.uint32)
  launch(SAME, "same", 1, 256, [out])
  assert out[0] == 255

DEADLOCK = kernel("deadlock", """
.visible .entry deadlock()
{
  .reg .pred %p1;
  .reg .b32 %r1;
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 16;
  @%p1 bra $L_a;
  bar.sync 0;
  bra.uni $L_end;
$L_a:
  bar.sync 0;
$L_end:
  ret;
}
""")

def test_barrier_deadlock_raises():
  with pytest.raises(PTXError, match=r"kernel deadlock: block \(0, 0, 0\) deadlocks.*lines \[12, 15\]"):
    PTXModule(DEADLOCK).run("deadlock", (2, 1, 1), (64, 1, 1), [], None)

SPIN = kernel("spin", """
.visible .entry spin()
{
$L_top:
  bra.uni $L_top;
}
""")

def test_endless_loop_hits_the_step_limit():
  with pytest.raises(PTXError, match=r"kernel spin: gave up after 1000 steps at line 8"):
    PTXModule(SPIN).run("spin", 1, 32, [], None, max_steps=1000)

def test_unknown_instruction_names_the_line():
  src = HEAD + ".visible .entry bad()\n{\n  .reg .b32 %r<3>;\n  frobnicate.b32 %r1, %r2;\n  ret;\n}\n"
  with pytest.raises(PTXError, match=r"line 7: unknown instruction frobnicate.*frobnicate.b32 %r1, %r2"):
    PTXModule(src)

def test_wrong_register_width_and_missing_rounding_are_errors():
  with pytest.raises(PTXError, match=r"line 7: register %rd1 \(64 bits\) does not fit .f32"):
    PTXModule(HEAD + ".visible .entry bad()\n{\n  .reg .b64 %rd1;\n  add.f32 %rd1, %rd1, %rd1;\n}\n")
  with pytest.raises(PTXError, match=r"line 8: cvt.f16.f32 needs .rn"):
    PTXModule(HEAD + ".visible .entry bad()\n{\n  .reg .b16 %h1;\n  .reg .f32 %f1;\n  cvt.f16.f32 %h1, %f1;\n}\n")

@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed: the test kernels are not assembled")
def mma_kernel(half: str) -> str:
  return kernel(f"mma_{half}", f"""
.visible .entry mma_{half}(.param .u64 a, .param .u64 b, .param .u64 c, .param .u64 d)
{{
  .reg .b32 %r<8>;
  .reg .f32 %f<9>;
  .reg .b64 %rd<10>;
  ld.param.u64 %rd1, [a];
  ld.param.u64 %rd2, [b];
  ld.param.u64 %rd3, [c];
  ld.param.u64 %rd4, [d];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r1, %r1, %r2, %r3;
  mul.wide.u32 %rd5, %r1, 16;
  add.s64 %rd6, %rd1, %rd5;
  ld.global.v4.b32 {{%r4, %r5, %r6, %r7}}, [%rd6];
  mul.wide.u32 %rd7, %r1, 8;
  add.s64 %rd7, %rd2, %rd7;
  ld.global.v2.b32 {{%r2, %r3}}, [%rd7];
  add.s64 %rd8, %rd3, %rd5;
  ld.global.v4.f32 {{%f1, %f2, %f3, %f4}}, [%rd8];
  mma.sync.aligned.m16n8k16.row.col.f32.{half}.{half}.f32 {{%f5, %f6, %f7, %f8}}, {{%r4, %r5, %r6, %r7}}, {{%r2, %r3}}, {{%f1, %f2, %f3, %f4}};
  add.s64 %rd9, %rd4, %rd5;
  st.global.v4.f32 [%rd9], {{%f5, %f6, %f7, %f8}};
  ret;
}}
""")
MMA = {"f16": mma_kernel("f16"), "bf16": mma_kernel("bf16")}

def fragments(m: np.ndarray, places) -> np.ndarray:
  """m (warps x rows x cols) as each lane's fragment elements: lane l = 4*g + t holds element i at places(g, t, i)."""
  out = np.zeros((m.shape[0], 32, len(places(0, 0, None))), m.dtype)
  for l in range(32):
    for i, (row, col) in enumerate(places(l // 4, l % 4, None)): out[:, l, i] = m[:, row, col]
  return out

# the PTX ISA's m16n8k16 layouts, written out per element: A row-major 16x16, B 16x8 (k x n), C/D 16x8
A_AT = lambda g, t, _: [(g, 2*t), (g, 2*t+1), (g+8, 2*t), (g+8, 2*t+1), (g, 2*t+8), (g, 2*t+9), (g+8, 2*t+8), (g+8, 2*t+9)]
B_AT = lambda g, t, _: [(2*t, g), (2*t+1, g), (2*t+8, g), (2*t+9, g)]
C_AT = lambda g, t, _: [(g, 2*t), (g, 2*t+1), (g+8, 2*t), (g+8, 2*t+1)]

@pytest.mark.parametrize("half", ["f16", "bf16"])
def test_mma_m16n8k16_is_a_warp_matrix_product(half):
  rng, warps = np.random.default_rng(7), 4  # two blocks of two warps: each warp its own matrices
  A, B, C = rng.standard_normal((warps, 16, 16)), rng.standard_normal((warps, 16, 8)), rng.standard_normal((warps, 16, 8)).astype(np.float32)
  if half == "f16": A, B = A.astype(np.float16), B.astype(np.float16)
  else: A, B = [(x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16) for x in (A, B)]  # bf16 bits, truncated
  value = (lambda x: x.astype(np.float64)) if half == "f16" else (lambda x: (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64))
  a, b = fragments(A.view(np.uint16), A_AT), fragments(B.view(np.uint16), B_AT)  # two halves per .b32 register, low first
  d = np.zeros((warps, 32, 4), np.float32)
  launch(MMA[half], f"mma_{half}", 2, 64, [a, b, fragments(C, C_AT), d])
  want = fragments((value(A) @ value(B) + C).astype(np.float32), C_AT)
  np.testing.assert_allclose(d, want, rtol=1e-6, atol=1e-6)

def test_mma_refuses_a_partial_warp():
  z = lambda *shape: np.zeros(shape, np.uint32)
  with pytest.raises(PTXError, match="whole warps"): launch(MMA["f16"], "mma_f16", 1, 48, [z(48, 4), z(48, 2), z(48, 4), z(48, 4)])

def wgmma_kernel(half: str) -> str:
  """One warpgroup per block: lanes load their A fragments, the first 32 lanes copy the block's 512-byte B blob into
  shared memory, then D = A @ B (scale-d 0: D's old value, NaN, is ignored) with the descriptor's LBO/SBO from `layout`."""
  return kernel(f"wgmma_{half}", f"""
.visible .entry wgmma_{half}(.param .u64 a, .param .u64 b, .param .u64 d, .param .u64 layout)
{{
  .reg .pred %p<2>;
  .reg .b32 %r<12>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<12>;
  .shared .align 16 .b8 tile[512];
  ld.param.u64 %rd1, [a];
  ld.param.u64 %rd2, [b];
  ld.param.u64 %rd3, [d];
  ld.param.u64 %rd4, [layout];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %tid.x;
  mad.lo.s32 %r3, %r1, 128, %r2;
  mul.wide.u32 %rd5, %r3, 16;
  add.s64 %rd5, %rd1, %rd5;
  ld.global.v4.b32 {{%r4, %r5, %r6, %r7}}, [%rd5];
  setp.lt.u32 %p1, %r2, 32;
  @!%p1 bra $copied;
  mad.lo.s32 %r8, %r1, 32, %r2;
  mul.wide.u32 %rd6, %r8, 16;
  add.s64 %rd6, %rd2, %rd6;
  ld.global.v4.b32 {{%r8, %r9, %r10, %r11}}, [%rd6];
  mul.wide.u32 %rd7, %r2, 16;
  mov.u64 %rd8, tile;
  add.s64 %rd7, %rd8, %rd7;
  st.shared.v4.b32 [%rd7], {{%r8, %r9, %r10, %r11}};
$copied:
  fence.proxy.async.shared::cta;
  bar.sync 0;
  mov.u64 %rd9, tile;
  shr.u64 %rd9, %rd9, 4;
  and.b64 %rd9, %rd9, 16383;
  or.b64 %rd9, %rd9, %rd4;
  mov.f32 %f0, 0f7FC00000;
  mov.f32 %f1, %f0;
  mov.f32 %f2, %f0;
  mov.f32 %f3, %f0;
  mov.f32 %f4, %f0;
  mov.f32 %f5, %f0;
  mov.f32 %f6, %f0;
  mov.f32 %f7, %f0;
  wgmma.fence.sync.aligned;
  wgmma.mma_async.sync.aligned.m64n16k16.f32.{half}.{half} {{%f0, %f1, %f2, %f3, %f4, %f5, %f6, %f7}}, {{%r4, %r5, %r6, %r7}}, %rd9, 0, 1, 1, 0;
  wgmma.commit_group.sync.aligned;
  wgmma.wait_group.sync.aligned 0;
  mul.wide.u32 %rd10, %r3, 32;
  add.s64 %rd10, %rd3, %rd10;
  st.global.v4.f32 [%rd10], {{%f0, %f1, %f2, %f3}};
  st.global.v4.f32 [%rd10+16], {{%f4, %f5, %f6, %f7}};
  ret;
}}
""", target="sm_90a")
WGMMA = {"f16": wgmma_kernel("f16"), "bf16": wgmma_kernel("bf16")}

@pytest.mark.parametrize("half", ["f16", "bf16"])
@pytest.mark.parametrize("lbo,sbo", [(128, 256), (256, 128)], ids=["k-cores-adjacent", "n-cores-adjacent"])
def test_wgmma_m64n16k16_reads_b_through_its_descriptor(half, lbo, sbo):
  rng, blocks = np.random.default_rng(8), 2
  A, B = rng.standard_normal((blocks, 64, 16)), rng.standard_normal((blocks, 16, 16))
  if half == "f16": A, B = A.astype(np.float16).view(np.uint16), B.astype(np.float16).view(np.uint16)
  else: A, B = [(x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16) for x in (A, B)]
  value = (lambda x: x.view(np.float16).astype(np.float64)) if half == "f16" else (lambda x: (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64))
  a = np.zeros((blocks, 128, 8), np.uint16)  # warp w holds rows 16w.. of A in the m16n8k16 layout
  for lane in range(128):
    w, g, t = lane // 32, lane % 32 // 4, lane % 4
    a[:, lane] = np.stack([A[:, 16 * w + r, c] for r, c in A_AT(g, t, None)], 1)
  blob = np.zeros((blocks, 512), np.uint8)  # B (k x n) as 8x16-byte core matrices: LBO apart along k, SBO along n
  for k in range(16):
    for n in range(16):
      at = n // 8 * sbo + k // 8 * lbo + n % 8 * 16 + k % 8 * 2
      blob[:, at:at + 2] = B[:, k, n:n + 1].view(np.uint8)
  d = np.zeros((blocks, 128, 8), np.float32)
  launch(WGMMA[half], f"wgmma_{half}", blocks, 128, [a, blob, d], [(lbo >> 4) << 16 | (sbo >> 4) << 32])
  D = (value(A) @ value(B)).astype(np.float32)
  for lane in range(128):  # warp w holds rows 16w.. of D, each 8 columns in the m16n8 accumulator layout
    w, g, t = lane // 32, lane % 32 // 4, lane % 4
    want = [D[:, 16 * w + r, 8 * j + c] for j in range(2) for r, c in C_AT(g, t, None)]
    np.testing.assert_allclose(d[:, lane], np.stack(want, 1), rtol=1e-6, atol=1e-6)

def test_wgmma_refuses_a_partial_warpgroup_and_swizzled_descriptors():
  z = lambda *shape, dt=np.uint16: np.zeros(shape, dt)
  with pytest.raises(PTXError, match="whole warpgroups"): launch(WGMMA["f16"], "wgmma_f16", 1, 96, [z(96, 8), z(512, dt=np.uint8), z(96, 8, dt=np.float32)], [0])
  with pytest.raises(PTXError, match="swizzle"): launch(WGMMA["f16"], "wgmma_f16", 1, 128, [z(128, 8), z(512, dt=np.uint8), z(128, 8, dt=np.float32)], [1 << 62])

@pytest.mark.parametrize("name", list(KERNELS))
def test_ptxas_accepts_the_test_kernels(name, tmp_path):
  (tmp_path / "k.ptx").write_text(KERNELS[name])
  arch = re.search(r"\.target (\w+)", KERNELS[name])[1]
  r = subprocess.run([find_ptxas(), f"-arch={arch}", "-o", str(tmp_path / "k.cubin"), str(tmp_path / "k.ptx")], capture_output=True, text=True)
  assert r.returncode == 0, r.stderr
