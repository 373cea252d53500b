"""The heuristics' register-tile model (codegen.heuristic._tile_model): its estimates for a matmul's tiles, worked out
by hand from the loads one reduction step makes, and the tile the heuristics pick from them; and the rules around the
tile: accumulator lanes in flight, cache blocks of B panels, and the row blocks of transposing copies."""
import numpy as np
import pytest
from tg import Tensor
from ir.ops import Ops
from codegen.heuristic import CACHE_SHARE, GPU_MIN_THREADS, LANES_IN_FLIGHT, LONG_CHAIN, LONG_UNROLLED, PAGE_BYTES, TILE_SLACK, TRANSPOSE_BLOCK, _tile_model, hand_coded_optimizations
from codegen.kernel import AxisType, Kernel, Opt, OptOps
from codegen.llvmir import LLVMRenderer
from codegen.ptx import PTXRenderer

AVX512 = LLVMRenderer("+avx512f")  # 16 float lanes, 32 vector registers

def packed_matmul_kernel(n: int, lanes: int) -> Kernel:
  """a @ b as tg.dot computes it on a CPU: b copied into panels (n/lanes, k, lanes); kernel axes (rows, panels,
  lanes, k)."""
  a, b = Tensor.empty(n, n), Tensor.empty(n, n)
  panels = b.reshape(n, n // lanes, lanes).permute(1, 0, 2).contiguous()
  out = (a.reshape(n, 1, 1, n) * panels.permute(0, 2, 1).reshape(1, n // lanes, lanes, n)).sum(-1)
  item = [i for i in out.schedule() if i.ast.op is Ops.SINK][-1]
  k = Kernel(item.ast, AVX512)
  assert k.full_shape == (n, n // lanes, lanes, n)
  return k

def test_matmul_tile_estimates_match_the_loads_counted_by_hand():
  """Per reduction step of a rows x panels tile (16 lanes, 4-byte floats, 64-byte lines): `rows` broadcasts of a,
  each moving 4 bytes a step (a sixteenth of a line); `panels` vector loads of b, each a fresh line a step. A line
  costs two loads. Registers: the accumulators, the smaller of the two operand sets (which stays live) and one for
  the larger (which streams through it)."""
  k = packed_matmul_kernel(1024, 16)
  k.apply_opt(Opt(OptOps.UPCAST, 2, 16))
  k.apply_opt(Opt(OptOps.VECTORIZE, 2, 0))
  model = _tile_model(k, 16)
  for rows, panels in ((8, 2), (4, 4), (16, 1), (2, 8)):
    fmas = rows * panels
    loads = rows + panels
    lines = rows * 4 / 64 + panels
    cost, registers = model({0: rows, 1: panels})
    assert np.isclose(cost, (loads + 2 * lines) / fmas), (rows, panels)
    assert registers == fmas + min(rows, panels) + 1, (rows, panels)

def test_avx512_matmul_gets_an_8_row_2_panel_tile():
  """Of the tiles that fit 32 registers, 8 x 2 costs least: (10 loads + 2 x 2.5 lines) / 16 FMAs = 0.94, against
  1.03 for 4 x 4 and 1.31 for 16 x 1 (the test above). The register tile spans rows 8 and panels 2."""
  k = packed_matmul_kernel(1024, 16)
  opts = hand_coded_optimizations(k, AVX512.vector_width, AVX512.vector_registers)
  assert opts[:2] == [Opt(OptOps.UPCAST, 2, 16), Opt(OptOps.VECTORIZE, 2, 0)]
  tile = {o.axis: o.amt for o in opts[2:] if o.op is OptOps.UPCAST}
  assert tile == {0: 8, 1: 2}

def test_a_tile_never_needs_more_registers_than_the_target_has():
  """With 16 registers (AVX2: 8 lanes) an 8 x 2 tile's 16 accumulators leave none for operands; the tile picked
  fits, with its operands, in 16."""
  avx2 = LLVMRenderer("+avx2")
  k = packed_matmul_kernel(1024, 8)
  opts = hand_coded_optimizations(Kernel(k.ast, avx2), avx2.vector_width, avx2.vector_registers)
  assert opts[:2] == [Opt(OptOps.UPCAST, 2, 8), Opt(OptOps.VECTORIZE, 2, 0)]
  k.apply_opt(opts[0]); k.apply_opt(opts[1])
  tile = {o.axis: o.amt for o in opts[2:] if o.op is OptOps.UPCAST}
  assert set(tile) <= {0, 1} and np.prod(list(tile.values())) > 1
  assert _tile_model(k, 8)(tile)[1] <= 16

def test_the_smallest_tile_within_the_slack_of_the_cheapest_is_made():
  """Rows of 10 summed, 16 rows as vector lanes gathered (row stride 10): per step and n-row tile, 16n gathered loads
  touching 10n lines that advance 4 bytes a step (1.25n in load units), plus one broadcast of w (1 + 0.125): a cost
  of 17.25 + 1.125/n per FMA. 16 rows cost least (17.32), but 2 rows (17.81) are within TILE_SLACK of it and the
  smallest such tile: more rows would save under 3% and lengthen lowering and compiling."""
  x, w = Tensor.empty(512, 10), Tensor.empty(10)
  item = [i for i in (x * w).sum(1).schedule() if i.ast.op is Ops.SINK][-1]
  opts = hand_coded_optimizations(Kernel(item.ast, AVX512), AVX512.vector_width, AVX512.vector_registers)
  assert opts[:3] == [Opt(OptOps.UPCAST, 0, 16), Opt(OptOps.VECTORIZE, 1, 0), Opt(OptOps.UPCAST, 0, 2)]
  k = Kernel(item.ast, AVX512)
  assert k.full_shape == (512, 10)
  k.apply_opt(opts[0]); k.apply_opt(opts[1])
  model = _tile_model(k, 16)
  for n in (1, 2, 4, 8, 16): assert np.isclose(model({0: n})[0], 17.25 + 1.125 / n), n
  assert model({0: 2})[0] <= TILE_SLACK * model({0: 16})[0] < model({0: 1})[0]

def test_a_panel_filling_the_cache_budget_puts_the_panel_loop_outside():
  """8192 x 8192: one 2-panel block of b is 4 bytes x 8192 steps x 32 columns = 1 MiB, the whole share of a 2 MiB
  core cache a block may hold, so blocks of one panel pair each stay in cache while every row reads them: the panel
  axis (axis 2 once the 8-row tile is split off) becomes the outermost loop, whole. 4096: two panel pairs fit, in
  blocks of 2."""
  assert AVX512.core_cache_bytes // CACHE_SHARE == 4 * 8192 * 32
  for n, thread in ((8192, Opt(OptOps.THREAD, 2, 0)), (4096, Opt(OptOps.THREAD, 2, 2))):
    k = packed_matmul_kernel(n, 16)
    opts = hand_coded_optimizations(k, AVX512.vector_width, AVX512.vector_registers)
    assert [o for o in opts if o.op is OptOps.THREAD] == [thread], n
    assert k.full_shape[0] == n // 32 // max(thread.amt, 1), (n, k.full_shape)

@pytest.mark.parametrize("cache, pairs", [(1 << 20, 0), (2 << 20, 2), (8 << 20, 8)])
def test_cache_blocks_hold_a_share_of_the_core_cache_the_renderer_names(cache, pairs):
  """A 4096 matmul's panel pair is 4 bytes x 4096 steps x 32 columns = 512 KiB: a core cache of 1 MiB takes blocks of
  one pair (the panel axis outside, whole), 2 MiB of two, 8 MiB of eight (16 blocks)."""
  k = Kernel(packed_matmul_kernel(4096, 16).ast, LLVMRenderer("+avx512f", 2, cache))
  opts = hand_coded_optimizations(k, AVX512.vector_width, AVX512.vector_registers)
  assert [o for o in opts if o.op is OptOps.THREAD] == [Opt(OptOps.THREAD, 2, pairs)], cache

def test_cache_blocks_come_in_a_count_that_the_cores_share_evenly():
  """A 896 matmul's b panels (28 pairs under its 14x2 tile, 114 KiB each) fit the cache budget in blocks of up to 8
  pairs. Blocks of 7 make 4 blocks, which 1, 2 or 4 cores share evenly, each core working whole blocks; blocks of 4
  would make 7, which 2 cores share only with the rows (Kernel.core_axes). With 7 cores, blocks of 4 it is; on one
  core, the largest block, 7."""
  for cores, pairs in ((1, 7), (2, 7), (4, 7), (7, 4)):
    k = Kernel(packed_matmul_kernel(896, 16).ast, LLVMRenderer("+avx512f", cores))
    opts = hand_coded_optimizations(k, AVX512.vector_width, AVX512.vector_registers)
    assert [o for o in opts if o.op is OptOps.THREAD] == [Opt(OptOps.THREAD, 2, pairs)], cores
    assert k.full_shape[0] == 28 // pairs, (cores, k.full_shape)

def test_a_long_reduction_keeps_sixteen_accumulator_lanes_in_flight():
  """Each add into an accumulator waits for the one before, so where an accumulator sums a chain of LONG_CHAIN or
  more, the tile holds at least LANES_IN_FLIGHT accumulator lanes: sums of 1024 or 100 pairs (2-lane vectors, chains
  of 1024 and 100) take 8 outputs at once, rows of 1000 (8-lane vectors, chains of 125) 2. Sums of 64 pairs, and rows
  of 200 (chains of 25), are left alone. (Rows of 1000 under a NaN-propagating max ran 1.0 -> 0.5-0.6 ms for 4096.)"""
  assert (LANES_IN_FLIGHT, LONG_CHAIN) == (16, 100)
  for shape, axes, lanes, outputs in (((1024, 64, 2), (0, 2), 2, 8), ((100, 64, 2), (0, 2), 2, 8), ((4096, 1000), (1,), 8, 2),
                                      ((64, 64, 2), (0, 2), 2, 1), ((64, 200), (1,), 8, 1)):
    (item,) = [i for i in Tensor.empty(*shape).sum(axes).schedule() if i.ast.op is Ops.SINK]
    k = Kernel(item.ast, AVX512)
    hand_coded_optimizations(k, AVX512.vector_width, AVX512.vector_registers)
    assert k.full_shape[k.vector_axis] == lanes, shape
    assert np.prod([k.full_shape[a] for a in k.axes_of(AxisType.UPCAST) if a != k.vector_axis]) == outputs, shape

def test_lanes_along_a_short_reduction_pay_for_folding_them():
  """A 2x2 max-pool over NCHW: with the vector along the 2-wide window, every output folds its lanes (a shuffle and a
  max) after a reduction of only 4 steps. 16 lanes along the batch fold nothing (their loads are strided): the MNIST
  model's first pool ran in 1.72 instead of 2.88 ms alone, 3.3 instead of 4.5 ms in the training step."""
  (item,) = [i for i in Tensor.empty(512, 32, 20, 20).max_pool2d(2).schedule() if i.ast.op is Ops.SINK]
  k = Kernel(item.ast, AVX512)
  hand_coded_optimizations(k, AVX512.vector_width, AVX512.vector_registers)
  assert k.axis_types[k.vector_axis] is AxisType.UPCAST and k.full_shape[k.vector_axis] == 16

def test_at_equal_cost_the_lanes_run_along_the_reduction():
  """Summing 2**32 ones (no loads, so every vector axis costs the same): lanes along the reduction split each output's
  sum 16 ways, and float32 stays exact (2**32); 16 outputs as lanes each summed 2**27 ones and stopped at 2**24."""
  items = [i for i in Tensor.ones(2**32).sum().schedule() if i.ast.op is Ops.SINK]
  k = Kernel(items[0].ast, AVX512)
  hand_coded_optimizations(k, AVX512.vector_width, AVX512.vector_registers)
  assert k.axis_types[k.vector_axis] is AxisType.UNROLL and k.full_shape[k.vector_axis] == 16

def copy_kernel(t: Tensor) -> Kernel:
  (item,) = [i for i in t.contiguous().schedule() if i.ast.op is Ops.SINK]
  return Kernel(item.ast, AVX512)

def test_a_copy_reading_a_page_further_each_step_reads_rows_side_by_side():
  """Packing a 1024 x 1024 b into 16-lane panels reads 16 floats of one row per step and the next row (4 KiB on) at
  the next: the row axis is cut into blocks of TRANSPOSE_BLOCK, outermost, so each step along the panels reads on
  in 8 rows. A 512 x 512 b's rows are 2 KiB apart, and a kernel that keeps the layout reads on in one row: left alone."""
  assert (TRANSPOSE_BLOCK, PAGE_BYTES) == (8, 4096)
  def panels(n: int) -> Tensor: return Tensor.empty(n, n).reshape(n, n // 16, 16).permute(1, 0, 2)
  k = copy_kernel(panels(1024))
  opts = hand_coded_optimizations(k, AVX512.vector_width, AVX512.vector_registers)
  assert [o for o in opts if o.op is OptOps.THREAD] == [Opt(OptOps.THREAD, 1, 8)]
  assert k.full_shape == (1024 // 8, 64, 8, 16)
  for t in (panels(512), Tensor.empty(64, 1024, 16) * 2):
    k = copy_kernel(t)
    assert not [o for o in hand_coded_optimizations(k, AVX512.vector_width, AVX512.vector_registers) if o.op is OptOps.THREAD], t.shape

def test_blocked_transposing_copies_move_every_value():
  rng = np.random.default_rng(0)
  b = rng.random((1024, 1024), dtype=np.float32)
  tb = Tensor(b)
  assert np.array_equal(tb.reshape(1024, 64, 16).permute(1, 0, 2).contiguous().numpy(), b.reshape(1024, 64, 16).transpose(1, 0, 2))
  assert np.array_equal(tb.T.contiguous().numpy(), b.T)

def test_a_copy_takes_lanes_on_the_innermost_axis_where_they_beat_scalar_code():
  """An NCHW -> NHWC copy of 3 channels: the channel axis holds no vector, and along the pixels the load is contiguous
  and only the store is scattered (1 + 1/16 instructions per value against 2): lanes along the pixels. A ReLU's
  gradient stored channels-last (two loads through one transposing view) keeps its lanes on the store's axis: lanes
  along the pixels, with the store scattered, ran slower in the MNIST step."""
  k = copy_kernel(Tensor.empty(2, 3, 32, 32).permute(0, 2, 3, 1) * 2)
  assert k.full_shape == (2, 1024, 3)
  hand_coded_optimizations(k, AVX512.vector_width, AVX512.vector_registers)
  assert k.full_shape == (2, 64, 16, 3) and k.vector_axis == 2
  x, g = Tensor.empty(8, 32, 64), Tensor.empty(8, 32, 64)
  k = copy_kernel((x > 0).where(g, 0).permute(0, 2, 1))
  hand_coded_optimizations(k, AVX512.vector_width, AVX512.vector_registers)
  assert k.full_shape == (8, 64, 2, 16) and k.vector_axis == 3

def test_a_copy_vectorized_along_its_loads_moves_every_value():
  rng = np.random.default_rng(1)
  x, g = rng.standard_normal((8, 32, 64), dtype=np.float32), rng.standard_normal((8, 32, 64), dtype=np.float32)
  got = (Tensor(x) > 0).where(Tensor(g), 0).permute(0, 2, 1).contiguous().numpy()
  assert np.array_equal(got, np.where(x > 0, g, 0).transpose(0, 2, 1))
  image = rng.standard_normal((2, 3, 48, 48), dtype=np.float32)
  assert np.array_equal((Tensor(image).permute(0, 2, 3, 1) * 2).contiguous().numpy(), image.transpose(0, 2, 3, 1) * 2)

def pooled_terms(x: Tensor, p: Tensor) -> Tensor:
  """Per-channel sums of a many-operation expression of x and p (a pooled value repeated over pairs, as a max-pool's
  gradient is): the pairs can't merge with the rows, so the innermost contiguous axis is only 2 long."""
  return ((x * p + 1).relu() * (x - p) + x * x).sum(axis=(0, 2, 3))

def test_a_reduction_with_many_operations_per_step_takes_its_lanes_along_the_outputs():
  """Each step's operations (here 6) cost one instruction per vector: two lanes along the pairs would pay each of them
  once per two values, so 16 lanes along the channels (gathered loads) cost less. A step of one multiply keeps two
  lanes along the pairs (contiguous loads)."""
  x, p = Tensor.empty(64, 32, 20, 2), Tensor.empty(64, 32, 20, 1).expand(64, 32, 20, 2)
  for y, lanes_along in ((pooled_terms(x, p), AxisType.UPCAST), ((x * p).sum(axis=(0, 2, 3)), AxisType.UNROLL)):
    (item,) = [i for i in y.schedule() if i.ast.op is Ops.SINK]
    k = Kernel(item.ast, AVX512)
    hand_coded_optimizations(k, AVX512.vector_width, AVX512.vector_registers)
    assert k.axis_types[k.vector_axis] is lanes_along
    assert k.full_shape[k.vector_axis] == (16 if lanes_along is AxisType.UPCAST else 2)

def test_a_reduction_with_lanes_along_its_outputs_sums_every_value():
  rng = np.random.default_rng(2)
  x, p = rng.standard_normal((16, 32, 20, 2), dtype=np.float32), rng.standard_normal((16, 32, 20, 1), dtype=np.float32)
  want = (np.maximum(x * p + 1, 0) * (x - p) + x * x).sum(axis=(0, 2, 3))
  got = pooled_terms(Tensor(x), Tensor(p).expand(16, 32, 20, 2)).numpy()
  np.testing.assert_allclose(got, want, rtol=1e-5)

def test_a_register_tile_on_a_gpu_leaves_a_thousand_threads():
  """On a GPU each tile is a thread: a 64 x 64 matmul (1024 outputs besides its 4 vector lanes) keeps one output per
  thread, where a CPU would take a register tile (8 of them gave 128 threads); a 256 x 256 one takes a tile and keeps
  at least GPU_MIN_THREADS threads."""
  for n, tiled in ((64, False), (256, True)):
    item = [i for i in (Tensor.empty(n, n) @ Tensor.empty(n, n)).schedule() if i.ast.op is Ops.SINK][-1]
    k = Kernel(item.ast, PTXRenderer())
    hand_coded_optimizations(k, PTXRenderer.vector_width)
    assert k.full_shape[k.vector_axis] == 4 and bool(set(k.axes_of(AxisType.UPCAST)) - {k.vector_axis}) == tiled, k.applied_opts
    assert np.prod([k.full_shape[a] for a in k.axes_of(AxisType.GLOBAL, AxisType.LOCAL)]) >= GPU_MIN_THREADS, k.applied_opts

def test_a_long_matmul_reduction_is_unrolled_by_four_on_a_cpu_and_by_two_on_a_gpu():
  """Step 4 unrolls a reduction that no tile slides along by 4 on a CPU when it is LONG_UNROLLED steps or more (a
  matmul's 8x32 tile ran 4% faster than by 2), else by 2, and by 2 where the kernel has workgroups (unmeasured there)."""
  for n, steps in ((LONG_UNROLLED, 4), (LONG_UNROLLED // 2, 2)):
    k = packed_matmul_kernel(n, 16)
    opts = hand_coded_optimizations(k, AVX512.vector_width, AVX512.vector_registers)
    assert [o.amt for o in opts if o.op is OptOps.UNROLL] == [steps] and k.full_shape[-1] == steps, n
  item = [i for i in (Tensor.empty(256, 256) @ Tensor.empty(256, 256)).schedule() if i.ast.op is Ops.SINK][-1]
  gpu = Kernel(item.ast, PTXRenderer())
  assert [o.amt for o in hand_coded_optimizations(gpu, PTXRenderer.vector_width) if o.op is OptOps.UNROLL] == [2]
