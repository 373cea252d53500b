"""Tensor cores on NV: the TC action maps half/bf16 matmul-shaped reductions onto mma.sync m16n8k16 (Ampere and newer)
and onto wgmma m64nNk16 with B staged in shared memory (Hopper, sm_90a); the kernels run on the model's PTX
interpreter (whose mma and wgmma follow the PTX ISA's fragment and shared-memory layouts) and are checked against
float64 numpy products rounded to the output dtype; what can't use tensor cores is refused with a reason."""
import numpy as np
import pytest
from codegen.kernel import AxisType, Kernel, KernelOptError, Opt, OptOps
from codegen.program import get_program
from codegen.ptx import PTXRenderer
from codegen.ptx_compiler import PTXCompiler, find_ptxas
from ir.ops import Ops
from ir.switches import Context
from tg import Device, Tensor, dtypes
from tests.drivers.nv.test_nv_device import download, open_nv, upload

def device(arch: str):
  dev, model = open_nv(arch)
  yield dev
  model.gpu.stop()

@pytest.fixture(scope="module")
def nv(): yield from device("ampere")  # mma.sync only

@pytest.fixture(scope="module")
def hopper(): yield from device("hopper")  # wgmma first, mma.sync where M is no multiple of 64

def bf16_round(x: np.ndarray) -> np.ndarray:
  bits = x.astype(np.float32).view(np.uint32)
  return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)

def operands(dtype, *shapes, seed=0) -> list[Tensor]:
  rng = np.random.default_rng(seed)
  return [Tensor(rng.standard_normal(s).astype(np.float32)).cast(dtype).realize() for s in shapes]

def run(dev, out: Tensor, opts) -> tuple[np.ndarray, object]:
  """Runs `out`'s one kernel on dev with `opts` (None: the heuristics); (result as float64, ProgramSpec)."""
  (item,) = [i for i in out.schedule() if i.ast.op is Ops.SINK]
  spec = get_program(item.ast, dev.renderer, opts)
  prg = dev.runtime(spec.name, dev.compiler.compile(spec.src), spec)
  bufs = [dev.allocator.alloc(item.bufs[0].nbytes)] + [upload(dev, np.frombuffer(b.as_bytes(), np.uint8)) for b in item.bufs[1:]]
  prg(*bufs, global_size=spec.global_size, local_size=spec.local_size)
  dev.synchronize()
  raw = download(dev, bufs[0], np.zeros(out.shape, np.uint16))
  got = raw.view(np.float16).astype(np.float64) if out.dtype == dtypes.half else (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
  return got, spec

def assert_rounded_close(got: np.ndarray, exact: np.ndarray, dtype) -> None:
  """Within one unit in the last place of the output dtype of the exact result (the sum is rounded to f32 in steps)."""
  want = exact.astype(np.float16).astype(np.float64) if dtype == dtypes.half else bf16_round(exact).astype(np.float64)
  ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(want), 2.0**-14))) - (10 if dtype == dtypes.half else 7))
  bad = np.abs(got - want) > ulp
  assert not bad.any(), f"{bad.sum()} of {bad.size} elements off by more than one ulp, first at {np.argwhere(bad)[0]}: {got[bad][0]} vs {want[bad][0]}"

def exact(*ts: Tensor) -> list[np.ndarray]: return [t.float().numpy().astype(np.float64) for t in ts]

# (64 x 64) @ (64 x 32) after TC: axes (m/16 g, 16 m, n/8 g, 8 n, k/16 r, 16 k)
TILED = [[Opt(OptOps.TC, 0, 0)],
         [Opt(OptOps.TC, 0, 0), Opt(OptOps.UPCAST, 2, 2), Opt(OptOps.UPCAST, 0, 2)],
         [Opt(OptOps.TC, 0, 0), Opt(OptOps.LOCAL, 2, 2), Opt(OptOps.LOCAL, 0, 4)],
         [Opt(OptOps.TC, 0, 0), Opt(OptOps.UNROLL, 4, 2), Opt(OptOps.UPCAST, 2, 4)],
         [Opt(OptOps.TC, 1, 0)],  # the other mapping: the output's columns as the tile's rows
         None]

@pytest.mark.parametrize("dtype", [dtypes.half, dtypes.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("opts", TILED, ids=lambda o: "heuristics" if o is None else "+".join(f"{x.op.name}{x.axis}:{x.amt}" for x in o))
def test_matmul_on_tensor_cores_matches_numpy(nv, dtype, opts):
  a, b = operands(dtype, (64, 64), (64, 32))
  got, spec = run(nv, a @ b, opts)
  assert spec.applied_opts[0] == Opt(OptOps.TC, opts[0].axis if opts else 0, 0) and "mma.sync.aligned.m16n8k16" in spec.src
  assert spec.flops == 2 * 64 * 64 * 32
  A, B = exact(a, b)
  assert_rounded_close(got, A @ B, dtype)

def test_batched_transposed_operand_and_epilogue(nv):
  a, b = operands(dtypes.half, (3, 32, 48), (3, 32, 16), seed=1)  # a is read transposed: its k axis is the outer one
  got, spec = run(nv, (a.transpose(1, 2) @ b).relu() * 2, None)
  assert spec.applied_opts[0].op is OptOps.TC
  A, B = exact(a, b)
  assert_rounded_close(got, np.maximum(A.transpose(0, 2, 1) @ B, 0) * 2, dtypes.half)

def test_what_tensor_cores_cannot_compute_is_refused(nv):
  def kernel(out: Tensor, renderer=nv.renderer) -> Kernel:
    (item,) = [i for i in out.schedule() if i.ast.op is Ops.SINK]
    return Kernel(item.ast, renderer)
  f32 = operands(dtypes.float32, (32, 32), (32, 32))
  h = operands(dtypes.half, (32, 32), (32, 32), (30, 32))
  refused = {"float32 inputs": kernel(f32[0] @ f32[1]), "a max": kernel((h[0][:, :, None] * h[1]).max(1)),
             "rows not a multiple of 16": kernel(h[2] @ h[1]), "no tensor cores on CPU": kernel(h[0] @ h[1], Device["CPU"].renderer)}
  for why, k in refused.items():
    assert k.tensor_core_matches() == [], why
    with pytest.raises(KernelOptError, match="tensor-core mapping"): k.apply_opt(Opt(OptOps.TC, 0, 0))
  k = kernel(h[0] @ h[1])
  k.apply_opt(Opt(OptOps.UPCAST, 0, 2))
  with pytest.raises(KernelOptError, match="first action"): k.apply_opt(Opt(OptOps.TC, 0, 0))
  k = kernel(h[0] @ h[1])
  k.apply_opt(Opt(OptOps.TC, 0, 0))
  assert [t for t in k.axis_types] == [AxisType.GLOBAL, AxisType.TC_M, AxisType.GLOBAL, AxisType.TC_N, AxisType.REDUCE, AxisType.TC_K]
  for bad in (Opt(OptOps.GROUP, 4, 2), Opt(OptOps.PADTO, 1, 32), Opt(OptOps.UPCAST, 1, 2)):
    with pytest.raises(KernelOptError): k.apply_opt(bad)
  k.apply_opt(Opt(OptOps.UPCAST, 0, 2))
  with pytest.raises(KernelOptError, match="VECTORIZE"): k.apply_opt(Opt(OptOps.VECTORIZE, 1, 0))

# (128 x 32) @ (32 x 96) on wgmma m64n32k16: axes (2 g, 64 m, 3 g, 32 n, 2 r, 16 k)
WGMMA_CASES = [[Opt(OptOps.TC, 0, 0)],
               [Opt(OptOps.TC, 0, 0), Opt(OptOps.UPCAST, 2, 3)],  # three B tiles staged side by side
               [Opt(OptOps.TC, 0, 0), Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UNROLL, 4, 2)],  # two A tiles share each B tile
               None]

@pytest.mark.parametrize("dtype", [dtypes.half, dtypes.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("opts", WGMMA_CASES, ids=lambda o: "heuristics" if o is None else "+".join(f"{x.op.name}{x.axis}:{x.amt}" for x in o))
def test_matmul_on_hopper_wgmma_matches_numpy(hopper, dtype, opts):
  a, b = operands(dtype, (128, 32), (32, 96), seed=2)
  got, spec = run(hopper, a @ b, opts)
  assert "wgmma.mma_async.sync.aligned.m64n32k16" in spec.src and spec.local_size == (128, 1, 1)
  assert spec.flops == 2 * 128 * 32 * 96
  A, B = exact(a, b)
  assert_rounded_close(got, A @ B, dtype)

def test_hopper_falls_back_to_mma_and_wgmma_refuses_local(hopper):
  a, b = operands(dtypes.half, (32, 64), (64, 48), seed=3)  # 32 rows, 48 columns: no m64 tile either way
  got, spec = run(hopper, a @ b, None)
  assert "mma.sync.aligned.m16n8k16" in spec.src and "wgmma" not in spec.src
  A, B = exact(a, b)
  assert_rounded_close(got, A @ B, dtypes.half)
  a, b = operands(dtypes.half, (128, 32), (32, 64))
  (item,) = [i for i in (a @ b).schedule() if i.ast.op is Ops.SINK]
  k = Kernel(item.ast, hopper.renderer)
  k.apply_opt(Opt(OptOps.TC, 0, 0))
  with pytest.raises(KernelOptError, match="wgmma"): k.apply_opt(Opt(OptOps.LOCAL, 0, 2))

def test_tc_switch_turns_tensor_cores_off(nv):
  a, b = operands(dtypes.half, (32, 32), (32, 32))
  with Context(TC=0): got, spec = run(nv, a @ b, None)
  assert all(o.op is not OptOps.TC for o in spec.applied_opts) and "mma" not in spec.src
  A, B = exact(a, b)
  np.testing.assert_allclose(got, A @ B, rtol=1e-2, atol=1e-2)  # half products: not the tensor cores' exact ones

@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (pip install -e '.[test]' brings it)")
@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90", "sm_90a"])
def test_tensor_core_kernels_assemble(arch):
  a, b = operands(dtypes.bfloat16, (128, 32), (32, 96))
  (item,) = [i for i in (a @ b).schedule() if i.ast.op is Ops.SINK]
  spec = get_program(item.ast, PTXRenderer(arch), [Opt(OptOps.TC, 0, 0), Opt(OptOps.UPCAST, 2, 3 if arch == "sm_90a" else 2)])
  assert ("wgmma" in spec.src) == (arch == "sm_90a")
  assert PTXCompiler(arch).compile(spec.src)[:4] == b"\x7fELF"

def test_beam_offers_tensor_cores_as_a_first_action(hopper):
  from codegen.search import candidate_actions
  a, b = operands(dtypes.half, (128, 32), (32, 64))
  (item,) = [i for i in (a @ b).schedule() if i.ast.op is Ops.SINK]
  k = Kernel(item.ast, hopper.renderer)
  tc = [o for o in candidate_actions(k) if o.op is OptOps.TC]
  assert tc == [Opt(OptOps.TC, i, 0) for i in range(len(k.tensor_core_matches()))] and tc
  with Context(TC=0): assert not any(o.op is OptOps.TC for o in candidate_actions(k))
  k.apply_opt(Opt(OptOps.UPCAST, 0, 2))
  assert not any(o.op is OptOps.TC for o in candidate_actions(k))
