"""Tensor cores on AMD RDNA3: the TC action maps half/bf16 matmul-shaped reductions onto v_wmma_f32_16x16x16_f16/_bf16
(wave32). The fragment layouts are checked lane by lane against the RDNA3 ISA guide's description (and NV's against the
PTX ISA's, in the generalized lane-bit form); the kernels are compiled by LLVM (whose listing must hold v_wmma) and run
on the AMD model's shader core, checked against numpy products rounded to the output dtype."""
import numpy as np
import pytest
from codegen.amdgpu import AMDGPURenderer
from codegen.kernel import Kernel, Opt, OptOps
from codegen.program import get_program
from codegen.tensor_core import Place, lane_bits, mma_m16n8k16, wgmma_m64nNk16, wmma_16x16x16
from ir.ops import Ops
from ir.switches import Context
from tg import Tensor, dtypes
from tests.drivers.amd.test_amd_device import download, open_amd, upload

# ---------------- layouts ----------------
def places(layout, lanes: int) -> np.ndarray:
  """(lanes, elements, 2) array of each fragment element's (row, column) per lane."""
  return np.array([[(r.at(l), c.at(l)) for r, c in layout] for l in range(lanes)])

def test_place_runs_and_values():
  p = Place((2, 4, 0, 1, 2, 4, 16), 3)  # 2*(l%4) + (l>>3)%8 ... split where the coefficients stop doubling
  assert p.runs() == ((0, 2, 2), (3, 3, 1), (6, 1, 16))
  for lane in range(128):
    assert p.at(lane) == 3 + sum((lane >> s) % 2**w * k for s, w, k in p.runs()) == 3 + 2 * (lane % 4) + (lane >> 3) % 8 + 16 * (lane >> 6 & 1)
  assert lane_bits(4, 1) == (0, 0, 0, 0, 1) and Place().runs() == ()

def test_nv_layouts_are_the_ptx_isa_fragments():
  """mma.m16n8k16 (PTX ISA "Matrix Fragments for mma.m16n8k16"): g = lane/4, t = lane%4; A a_i at (g + 8*(i/2 % 2),
  2t + i%2 + 8*(i/4)), B b_i at (2t + i%2 + 8*(i/2), g), C c_i at (g + 8*(i/2), 2t + i%2); wgmma adds 16 * warp to rows."""
  lane = np.arange(128)[:, None]
  g, t, w, i = lane % 32 // 4, lane % 4, lane // 32, np.arange(8)[None, :]
  mma, wg = mma_m16n8k16(dtypes.half), wgmma_m64nNk16(16, dtypes.half)
  a = places(mma.a, 32)
  np.testing.assert_array_equal(a[..., 0], (g + 8 * (i // 2 % 2))[:32])
  np.testing.assert_array_equal(a[..., 1], np.broadcast_to(2 * t + i % 2 + 8 * (i // 4), (128, 8))[:32])
  b, i4 = places(mma.b, 32), i[:, :4]
  np.testing.assert_array_equal(b[..., 0], np.broadcast_to(2 * t + i4 % 2 + 8 * (i4 // 2), (128, 4))[:32])
  np.testing.assert_array_equal(b[..., 1], np.broadcast_to(g, (128, 4))[:32])
  c = places(mma.c, 32)
  np.testing.assert_array_equal(c[..., 0], np.broadcast_to(g + 8 * (i4 // 2), (128, 4))[:32])
  np.testing.assert_array_equal(c[..., 1], np.broadcast_to(2 * t + i4 % 2, (128, 4))[:32])
  wa, i8 = places(wg.a, 128), np.arange(8)[None, :]
  np.testing.assert_array_equal(wa[..., 0], 16 * w + g + 8 * (i8 // 2 % 2))
  wc = places(wg.c, 128)
  j = np.arange(8)[None, :]
  np.testing.assert_array_equal(wc[..., 0], 16 * w + g + 8 * (j % 4 // 2))
  np.testing.assert_array_equal(wc[..., 1], np.broadcast_to(2 * t + j % 2 + 8 * (j // 4), (128, 8)))

@pytest.mark.parametrize("dtype", [dtypes.half, dtypes.bfloat16], ids=["f16", "bf16"])
def test_wmma_layout_is_the_rdna3_guides(dtype):
  """RDNA3 ISA guide 7.9: lane l holds row l%16 of A and column l%16 of B (all 16 K values, lanes 16-31 repeating
  lanes 0-15); register r of D holds (2r + l//16, l%16)."""
  tc = wmma_16x16x16(dtype)
  assert (tc.instruction, tc.dims, tc.threads, tc.dtype_acc, tc.dtype_in) == ("wmma", (16, 16, 16), 32, dtypes.float32, dtype)
  lane, i, r = np.arange(32)[:, None], np.arange(16)[None, :], np.arange(8)[None, :]
  a, b, c = places(tc.a, 32), places(tc.b, 32), places(tc.c, 32)
  np.testing.assert_array_equal(a[..., 0], np.broadcast_to(lane % 16, (32, 16)))
  np.testing.assert_array_equal(a[..., 1], np.broadcast_to(i, (32, 16)))
  np.testing.assert_array_equal(b[..., 0], np.broadcast_to(i, (32, 16)))
  np.testing.assert_array_equal(b[..., 1], np.broadcast_to(lane % 16, (32, 16)))
  np.testing.assert_array_equal(c[..., 0], 2 * r + lane // 16)
  np.testing.assert_array_equal(c[..., 1], np.broadcast_to(lane % 16, (32, 8)))
  covered = np.zeros((16, 16), int)
  np.add.at(covered, (c[..., 0], c[..., 1]), 1)
  assert (covered == 1).all()  # every output element is held by exactly one (lane, register)

def test_tensor_cores_per_arch():
  for arch in ("gfx1100", "gfx1101"):
    assert [tc.dtype_in for tc in AMDGPURenderer(arch).tensor_cores] == [dtypes.half, dtypes.bfloat16]
  for arch in ("gfx1201", "gfx90a"): assert AMDGPURenderer(arch).tensor_cores == ()

# ---------------- kernels on the RDNA3 model ----------------
@pytest.fixture(scope="module")
def amd():
  dev, model = open_amd("gfx1100")
  yield dev
  model.stop()

def operands(dtype, *shapes, seed=0) -> list[Tensor]:
  rng = np.random.default_rng(seed)
  return [Tensor(rng.standard_normal(s).astype(np.float32)).cast(dtype).realize() for s in shapes]

def run(dev, out: Tensor, opts) -> tuple[np.ndarray, object, str]:
  """Runs `out`'s one kernel on dev with `opts` (None: the heuristics): (result as float64, ProgramSpec, LLVM's listing)."""
  (item,) = [i for i in out.schedule() if i.ast.op is Ops.SINK]
  spec = get_program(item.ast, dev.renderer, opts)
  lib = dev.compiler.compile(spec.src)
  prg = dev.runtime(spec.name, lib, spec)
  bufs = [dev.allocator.alloc(item.bufs[0].nbytes)] + [upload(dev, np.frombuffer(b.as_bytes(), np.uint8)) for b in item.bufs[1:]]
  prg(*bufs, global_size=spec.global_size, local_size=spec.local_size)
  dev.synchronize()
  raw = download(dev, bufs[0], np.zeros(out.shape, np.uint16))
  got = raw.view(np.float16).astype(np.float64) if out.dtype == dtypes.half else (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
  return got, spec, dev.compiler.disassemble(spec.src, lib)

def bf16_round(x: np.ndarray) -> np.ndarray:
  bits = x.astype(np.float32).view(np.uint32)
  return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)

def assert_rounded_close(got: np.ndarray, want32: np.ndarray, dtype) -> None:
  """Within one unit in the last place of the output dtype of numpy's float32 product."""
  want = want32.astype(np.float16).astype(np.float64) if dtype == dtypes.half else bf16_round(want32).astype(np.float64)
  ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(want), 2.0**-14))) - (10 if dtype == dtypes.half else 7))
  bad = np.abs(got - want) > ulp
  assert not bad.any(), f"{bad.sum()} of {bad.size} elements off by more than one ulp, first at {np.argwhere(bad)[0]}: {got[bad][0]} vs {want[bad][0]}"

def f32(*ts: Tensor) -> list[np.ndarray]: return [t.float().numpy() for t in ts]

def wmma_count(listing: str, dtype) -> int:
  return listing.count(f"v_wmma_f32_16x16x16_{'f16' if dtype == dtypes.half else 'bf16'} ")

# (64 x 48) @ (48 x 32) after TC: axes (4 g, 16 m, 2 g, 16 n, 3 r, 16 k)
TILED = [[Opt(OptOps.TC, 0, 0)],
         [Opt(OptOps.TC, 0, 0), Opt(OptOps.UPCAST, 2, 2), Opt(OptOps.UPCAST, 0, 2)],
         [Opt(OptOps.TC, 0, 0), Opt(OptOps.LOCAL, 2, 2), Opt(OptOps.LOCAL, 0, 2)],
         [Opt(OptOps.TC, 0, 0), Opt(OptOps.UNROLL, 4, 3)],
         [Opt(OptOps.TC, 1, 0)],  # the other mapping: the output's columns as the tile's rows
         None]

@pytest.mark.parametrize("dtype", [dtypes.half, dtypes.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("opts", TILED, ids=lambda o: "heuristics" if o is None else "+".join(f"{x.op.name}{x.axis}:{x.amt}" for x in o))
def test_matmul_on_wmma_matches_numpy(amd, dtype, opts):
  a, b = operands(dtype, (64, 48), (48, 32))
  got, spec, listing = run(amd, a @ b, opts)
  assert spec.applied_opts[0] == Opt(OptOps.TC, opts[0].axis if opts else 0, 0) and "llvm.amdgcn.wmma.f32.16x16x16" in spec.src
  assert wmma_count(listing, dtype) >= 1 and spec.local_size[0] == 32
  A, B = f32(a, b)
  assert_rounded_close(got, A @ B, dtype)

def test_one_wmma_per_tile_and_k_step(amd):
  """TC with 2x2 upcast tiles and the 3 K steps unrolled: 12 v_wmma, none dropped or duplicated by LLVM."""
  a, b = operands(dtypes.half, (64, 48), (48, 32), seed=4)
  opts = [Opt(OptOps.TC, 0, 0), Opt(OptOps.UPCAST, 2, 2), Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UNROLL, 5, 3)]
  got, spec, listing = run(amd, a @ b, opts)
  assert wmma_count(listing, dtypes.half) == 12
  A, B = f32(a, b)
  assert_rounded_close(got, A @ B, dtypes.half)

def test_batched_transposed_operand_and_epilogue(amd):
  a, b = operands(dtypes.bfloat16, (2, 32, 48), (2, 32, 16), seed=1)  # a is read transposed: its k axis is the outer one
  got, spec, listing = run(amd, (a.transpose(1, 2) @ b).relu() * 2, None)
  assert spec.applied_opts[0].op is OptOps.TC and wmma_count(listing, dtypes.bfloat16) >= 1
  A, B = f32(a, b)
  assert_rounded_close(got, np.maximum(A.transpose(0, 2, 1) @ B, 0) * 2, dtypes.bfloat16)

def test_tc_switch_and_gfx12_keep_plain_code(amd):
  a, b = operands(dtypes.half, (32, 32), (32, 32))
  with Context(TC=0): got, spec, listing = run(amd, a @ b, None)
  assert all(o.op is not OptOps.TC for o in spec.applied_opts) and "wmma" not in listing
  A, B = f32(a, b)
  np.testing.assert_allclose(got, A @ B, rtol=1e-2, atol=1e-2)
  (item,) = [i for i in (a @ b).schedule() if i.ast.op is Ops.SINK]
  assert Kernel(item.ast, AMDGPURenderer("gfx1201")).tensor_core_matches() == []
