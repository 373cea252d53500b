"""Tensor cores on AMD CDNA3 (gfx942): the TC action maps half/bf16 matmul-shaped reductions onto
v_mfma_f32_16x16x16_f16/_bf16 (wave64). The fragment layout is checked lane by lane against the MI300 ISA guide's
register layout; the kernels are compiled by LLVM (whose listing must hold v_mfma) and run on the gfx942 model's
shader core, checked against numpy products rounded to the output dtype."""
import numpy as np
import pytest
import llvmlite.binding as llvm
from codegen.amdgpu import AMDGPURenderer
from codegen.kernel import Kernel, Opt, OptOps
from codegen.program import get_program
from codegen.tensor_core import mfma_16x16x16
from ir.ops import Ops
from ir.switches import Context
from tg import dtypes
from tests.codegen.test_amdgpu_tc import TILED, assert_rounded_close, f32, operands, places, run
from tests.drivers.amd.test_amd_device import open_amd

@pytest.mark.parametrize("dtype", [dtypes.half, dtypes.bfloat16], ids=["f16", "bf16"])
def test_mfma_layout_is_the_cdna3_guides(dtype):
  """MI300 ISA guide, V_MFMA_F32_16X16X16_F16 register layout: lane l holds A[l%16][4(l//16) + i] and
  B[4(l//16) + i][l%16] for i = 0..3; register r of D holds D[4(l//16) + r][l%16]."""
  tc = mfma_16x16x16(dtype)
  assert (tc.instruction, tc.dims, tc.threads, tc.dtype_acc, tc.dtype_in) == ("mfma", (16, 16, 16), 64, dtypes.float32, dtype)
  for lane in range(64):
    for i in range(4):
      assert (tc.a[i][0].at(lane), tc.a[i][1].at(lane)) == (lane % 16, 4 * (lane // 16) + i)
      assert (tc.b[i][0].at(lane), tc.b[i][1].at(lane)) == (4 * (lane // 16) + i, lane % 16)
      assert (tc.c[i][0].at(lane), tc.c[i][1].at(lane)) == (4 * (lane // 16) + i, lane % 16)
  for layout in (tc.a, tc.b, tc.c):  # each operand's 256 elements are held by exactly one (lane, element)
    covered = np.zeros((16, 16), int)
    p = places(layout, 64)
    np.add.at(covered, (p[..., 0], p[..., 1]), 1)
    assert (covered == 1).all()

def test_tensor_cores_per_cdna_arch():
  for arch in ("gfx942", "gfx950"):
    assert [(tc.instruction, tc.dtype_in) for tc in AMDGPURenderer(arch).tensor_cores] == [("mfma", dtypes.half), ("mfma", dtypes.bfloat16)]
  for arch in ("gfx90a", "gfx908", "gfx900"): assert AMDGPURenderer(arch).tensor_cores == ()

@pytest.fixture(scope="module")
def amd():
  dev, model = open_amd("gfx942")
  yield dev
  model.stop()

def mfma_count(listing: str, dtype) -> int:
  return listing.count(f"v_mfma_f32_16x16x16_{'f16' if dtype == dtypes.half else 'bf16'} ")

@pytest.mark.parametrize("dtype", [dtypes.half, dtypes.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("opts", TILED, ids=lambda o: "heuristics" if o is None else "+".join(f"{x.op.name}{x.axis}:{x.amt}" for x in o))
def test_matmul_on_mfma_matches_numpy(amd, dtype, opts):
  a, b = operands(dtype, (64, 48), (48, 32))
  got, spec, listing = run(amd, a @ b, opts)
  assert spec.applied_opts[0] == Opt(OptOps.TC, opts[0].axis if opts else 0, 0) and "llvm.amdgcn.mfma.f32.16x16x16" in spec.src
  assert mfma_count(listing, dtype) >= 1 and spec.local_size[0] == 64
  A, B = f32(a, b)
  assert_rounded_close(got, A @ B, dtype)

def test_one_mfma_per_tile_and_k_step(amd):
  """TC with 2x2 upcast tiles and the 3 K steps unrolled: 12 v_mfma, none dropped or duplicated by LLVM."""
  a, b = operands(dtypes.half, (64, 48), (48, 32), seed=4)
  opts = [Opt(OptOps.TC, 0, 0), Opt(OptOps.UPCAST, 2, 2), Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UNROLL, 5, 3)]
  got, spec, listing = run(amd, a @ b, opts)
  assert mfma_count(listing, dtypes.half) == 12
  A, B = f32(a, b)
  assert_rounded_close(got, A @ B, dtypes.half)

def test_batched_transposed_operand_and_epilogue(amd):
  a, b = operands(dtypes.bfloat16, (2, 32, 48), (2, 32, 16), seed=1)  # a is read transposed: its k axis is the outer one
  got, spec, listing = run(amd, (a.transpose(1, 2) @ b).relu() * 2, None)
  assert spec.applied_opts[0].op is OptOps.TC and mfma_count(listing, dtypes.bfloat16) >= 1
  A, B = f32(a, b)
  assert_rounded_close(got, np.maximum(A.transpose(0, 2, 1) @ B, 0) * 2, dtypes.bfloat16)

def test_tc_switch_keeps_plain_code(amd):
  a, b = operands(dtypes.half, (32, 32), (32, 32))
  with Context(TC=0): got, spec, listing = run(amd, a @ b, None)
  assert all(o.op is not OptOps.TC for o in spec.applied_opts) and "mfma" not in listing
  A, B = f32(a, b)
  np.testing.assert_allclose(got, A @ B, rtol=1e-2, atol=1e-2)

@pytest.mark.parametrize("dtype", [dtypes.half, dtypes.bfloat16], ids=["f16", "bf16"])
def test_gfx950_compiles_the_same_instruction(dtype):
  """gfx950 keeps the 16x16x16 forms and their layout: LLVM's gfx950 listing holds the same v_mfma."""
  a, b = operands(dtype, (32, 32), (32, 32))
  (item,) = [i for i in (a @ b).schedule() if i.ast.op is Ops.SINK]
  renderer = AMDGPURenderer("gfx950")
  assert Kernel(item.ast, renderer).tensor_core_matches()
  spec = get_program(item.ast, renderer, [Opt(OptOps.TC, 0, 0), Opt(OptOps.UNROLL, 4, 2)])
  tm = llvm.Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(cpu="gfx950", opt=2)
  assert mfma_count(tm.emit_assembly(llvm.parse_assembly(spec.src)), dtype) == 2  # the two K steps of 16, unrolled
