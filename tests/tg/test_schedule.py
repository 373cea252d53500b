"""The scheduler's fusion promises, pinned by counting kernels, and the schedule cache."""
import math
import numpy as np
import pytest
from tg import Tensor, GlobalCounters, Context, Device
from codegen.kernel import Kernel
from codegen.program import get_program
from tg.schedule_cache import stats
from tg.reduce import CUM_BLOCK
from tg.processing import COPY_MIN_ROWS, ROW_COPY_MAX_K
from tg.schedule import MAX_KERNEL_NODES, STORED_OPERAND_SIZE

def kernels(*ts: Tensor) -> int:
  return sum(1 for item in ts[0].schedule(*ts[1:]) if item.ast.op.name == "SINK")

def sums(*ts: Tensor) -> int:
  return sum(1 for item in ts[0].schedule(*ts[1:]) if any(u.op.name == "REDUCE_AXIS" for u in item.ast.toposort()))

def uops_in_loops(uops) -> list:
  """The uops a program runs inside a loop (between a RANGE and its ENDRANGE)."""
  depth, inside = 0, []
  for u in uops:
    depth += (u.op.name == "RANGE") - (u.op.name == "ENDRANGE")
    if depth and u.op.name != "RANGE": inside.append(u)
  return inside

def rnd(*shape): return Tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32))

def test_elementwise_chain_is_one_kernel():
  a, b, c = rnd(16, 16), rnd(16, 16), rnd(16)
  assert kernels(((a + b) * c).exp().sqrt() - a / 3) == 1

def test_elementwise_before_reduce_fuses_into_it():
  a, b = rnd(32, 32), rnd(32, 32)
  assert kernels((a * b + 1).sum(1)) == 1

def test_matmul_bias_relu_is_one_kernel():
  x, w, bias = rnd(8, 16), rnd(16, 4), rnd(4)
  out = (x @ w + bias).relu()
  assert kernels(out) == 1
  np.testing.assert_allclose(out.numpy(), np.maximum(x.numpy() @ w.numpy() + bias.numpy(), 0), rtol=1e-5, atol=1e-5)

def test_a_cpu_matmul_packs_its_right_operand_only_when_it_outgrows_the_cache():
  """On the CPU, packing w into column panels (a copy kernel) pays once w is larger than PANEL_MIN_BYTES (2.25 MiB)
  and x has COPY_MIN_ROWS rows: a 768x768 w (2.25 MiB) is read in place, a 1024x768 one (3 MiB) through panels, unless
  x has fewer rows; so are smaller ones whose rows share cache sets: rows 4 KiB apart (256x1024, 1 MiB), or 2 KiB apart
  over 1 MiB (1024x512), but not 512x512 (1 MiB). All equal numpy."""
  rng = np.random.default_rng(0)
  cases = ((COPY_MIN_ROWS, 768, 768, 1), (COPY_MIN_ROWS, 1024, 768, 2), (COPY_MIN_ROWS - 4, 1024, 768, 1),
           (COPY_MIN_ROWS, 256, 1024, 2), (COPY_MIN_ROWS, 1024, 512, 2), (COPY_MIN_ROWS, 512, 512, 1))
  for rows, k, m, expected in cases:
    x, w = (Tensor(rng.standard_normal(shape).astype(np.float32), device="CPU").realize() for shape in ((rows, k), (k, m)))
    assert kernels(x @ w) == expected, (rows, k, m)
    np.testing.assert_allclose((x @ w).numpy(), x.numpy() @ w.numpy(), rtol=1e-4, atol=1e-3)

def test_a_cpu_matmul_through_panels_copies_a_transposed_left_operand():
  """x.T @ w (a weight gradient's form) on the CPU, where w goes through panels: x.T, which steps along the reduce axis
  a row of memory at a time, is first copied with that axis innermost (a third kernel); a contiguous x is read as it
  is, and so is x.T where w is read in place. All equal numpy."""
  rng = np.random.default_rng(0)
  a, b = (rng.standard_normal(shape).astype(np.float32) for shape in ((1024, COPY_MIN_ROWS + 8), (1024, 768)))
  ta, tb = Tensor(a, device="CPU").realize(), Tensor(b, device="CPU").realize()
  for x, w, expected in ((ta.T, tb, 3), (ta.T.contiguous().realize(), tb, 2), (ta[:768].T, tb[:768], 1)):
    assert kernels(x @ w) == expected, (x.shape, w.shape)
    np.testing.assert_allclose((x @ w).numpy(), x.numpy() @ w.numpy(), rtol=1e-4, atol=1e-3)

def check_cpu_product(n: int, k: int, m: int, computed_rows: int, computed_columns: int) -> None:
  """x (n x k) @ w (k x m) on the CPU: its product kernel writes computed_rows x computed_columns outputs, and the
  result, and both gradients of a weighted sum of it, equal numpy's."""
  rng = np.random.default_rng(0)
  xn, wn = rng.standard_normal((n, k)).astype(np.float32), rng.standard_normal((k, m)).astype(np.float32)
  x, w = Tensor(xn, device="CPU", requires_grad=True), Tensor(wn, device="CPU", requires_grad=True)
  out = x @ w
  (product,) = [i for i in out.schedule() if any(u.op.name == "REDUCE_AXIS" for u in i.ast.toposort())]
  assert product.bufs[0].size == computed_rows * computed_columns
  np.testing.assert_allclose(out.numpy(), xn @ wn, rtol=1e-4, atol=1e-4)
  (out * Tensor(np.arange(m, dtype=np.float32))).sum().backward()
  g = np.broadcast_to(np.arange(m, dtype=np.float32), (n, m))
  for got, expected in ((x.grad, g @ wn.T), (w.grad, xn.T @ g)):
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-4, atol=1e-6 * np.abs(expected).max())

@pytest.mark.parametrize("rows, k, computed", [(197, 512, 200), (31, 512, 32), (196, 512, 196), (77, 512, 77), (31, 64, 31)])
def test_a_cpu_matmul_pads_a_row_count_that_no_register_tile_divides(rows, k, computed):
  """x with a row count that nothing from 4 to 8 divides (197 and 31 are prime) gets zero rows up to a multiple of 8 on
  the CPU: the product kernel computes those rows too, and the result, and both gradients, have x's own rows. 196
  (4 x 49) and 77 (7 x 11) are read as they are, and so is a product of fewer than PAD_MIN_MACS multiply-adds."""
  check_cpu_product(rows, k, 256, computed, 256)

@pytest.mark.parametrize("rows, k, columns, computed", [(16, 512, 1021, 1024), (16, 512, 333, 336), (16, 512, 1000, 1000),
                                                       (16, 512, 1500, 1504), (640, 100, 300, 304), (8, 64, 100, 100),
                                                       (127, 1024, 1, 1)])
def test_a_cpu_matmul_pads_columns_to_whole_vectors(rows, k, columns, computed):
  """Outside the panel-packed products, w's columns are padded with zeros to whole vectors on the CPU (the product
  computes them too; the result and both gradients have w's own columns): for x of fewer than COPY_MIN_ROWS rows and a
  large w only where half-vectors don't divide them (1000 = 8 x 125 is read as it is, 1500 = 4 x 375 isn't), not for a
  product of fewer than PAD_MIN_MACS multiply-adds, and not for one column (a matrix-vector product)."""
  check_cpu_product(rows, k, columns, rows, computed)

@pytest.mark.parametrize("vectors", [63.5, 63])
def test_a_cpu_matmul_computes_whole_pairs_of_vectors_and_drops_the_extra_columns(vectors):
  """w with 63.5 or 63 vector registers' worth of columns is padded with zeros to 64 for an x of COPY_MIN_ROWS rows: the
  product kernel writes 64 vectors a row (its output buffer holds the padded columns), and the result, and both
  gradients, have w's own columns. An x of fewer rows reads w as it is."""
  lanes = Device["CPU"].renderer.vector_width
  few = [i for i in (Tensor.empty(COPY_MIN_ROWS - 4, 300) @ Tensor.empty(300, int(vectors * lanes))).schedule() if i.ast.op.name == "SINK"]
  assert [i.bufs[0].size for i in few] == [(COPY_MIN_ROWS - 4) * int(vectors * lanes)]
  check_cpu_product(COPY_MIN_ROWS, 300, int(vectors * lanes), COPY_MIN_ROWS, 64 * lanes)

def test_a_cpu_matmul_copies_a_transposed_right_operand_with_a_short_reduce_axis():
  """q @ k.T reads k along the reduce axis contiguously; on the CPU k is first copied with the output axis innermost
  (a second kernel) while the reduce axis is at most ROW_COPY_MAX_K, so the product's vectors run along its outputs
  instead of each output ending in a horizontal sum: the product kernel then reads its right operand with stride 1
  along the output axis. A longer reduce axis, or a k already stored that way, is read in place."""
  rng = np.random.default_rng(0)
  for b, n, k, copies in ((4, 64, 64, True), (4, 64, ROW_COPY_MAX_K, True), (2, 32, 2 * ROW_COPY_MAX_K, False)):
    q, key = (Tensor(rng.standard_normal((b, n, k)).astype(np.float32), device="CPU").realize() for _ in range(2))
    out = q @ key.transpose(-1, -2)
    items = [i for i in out.schedule() if i.ast.op.name == "SINK"]
    assert len(items) == (2 if copies else 1), (n, k)
    if copies:
      loads = [u for u in items[-1].ast.toposort() if u.op.name == "LOAD" and u.src[0].arg == 2]
      assert loads[0].src[1].arg.views[-1].strides[-2] == 1, loads[0].src[1].arg  # the kernel's (..., m, k): m innermost
    np.testing.assert_allclose(out.numpy(), q.numpy() @ key.numpy().transpose(0, 2, 1), rtol=1e-4, atol=1e-3)
  assert kernels(Tensor.empty(4, 64, 64, device="CPU") @ Tensor.empty(4, 64, 64, device="CPU")) == 1  # k @ v: read in place

def test_softmax_is_at_most_three_kernels():
  x = rnd(4, 10)
  assert kernels(x.softmax(-1)) <= 3
  assert kernels(x.log_softmax(-1)) <= 3

def test_sparse_crossentropy_reads_each_label_where_it_is():
  """The label's log-probability is gathered from the logits (one element a row), so the loss makes two passes over
  the classes (max, sum of exps) and never stores log-probabilities; with label smoothing a third pass takes their mean."""
  x = rnd(64, 100)
  y = Tensor(np.random.default_rng(1).integers(0, 100, 64).astype(np.int32))
  for smoothing, passes in ((0.0, 2), (0.1, 3)):
    loss = x.sparse_categorical_crossentropy(y, label_smoothing=smoothing)
    items = [i for i in loss.schedule() if i.ast.op.name == "SINK"]
    assert sum(i.bufs[0].size == 64 for i in items) == passes and max(i.bufs[0].size for i in items) == 64, smoothing
    lp = x.numpy() - x.numpy().max(1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(1, keepdims=True))
    want = -((1 - smoothing) * lp[np.arange(64), y.numpy()] + smoothing * lp.mean(1)).mean()
    np.testing.assert_allclose(loss.numpy(), want, rtol=1e-5)

def test_cheap_shared_work_is_recomputed_expensive_broadcast_work_is_stored():
  x, w = rnd(8, 16), rnd(4, 16)
  cheap = x + 1
  assert kernels((cheap.reshape(8, 1, 16) * w.reshape(1, 4, 16)).sum(-1)) == 1
  costly = x.exp().sin().sqrt().log()
  out = (costly.reshape(8, 1, 16) * w.reshape(1, 4, 16)).sum(-1)
  assert kernels(out) == 2
  with np.errstate(invalid="ignore"): ref = np.log(np.sqrt(np.sin(np.exp(x.numpy()))))  # NaN where sin < 0, as in tg
  np.testing.assert_allclose(out.numpy(), (ref[:, None, :] * w.numpy()[None]).sum(-1), rtol=1e-4, atol=1e-5)

def test_big_activation_a_convolution_reads_through_its_window_is_stored_once():
  """relu(x + b) feeding a convolution: each element is read by every output channel at every window position, so
  once it has STORED_OPERAND_SIZE elements it is computed in a kernel of its own instead of in the convolution's
  inner loop; a smaller one stays fused."""
  for shape, stored in (((8, 16, 24, 24), True), ((1, 16, 8, 8), False)):
    x, b, w = rnd(*shape), rnd(16, 1, 1), rnd(8, 16, 3, 3)
    out = (x + b).relu().conv2d(w)
    conv = [i.ast for i in out.schedule() if any(u.op.name == "REDUCE_AXIS" for u in i.ast.toposort())]
    assert len(conv) == 1 and any(u.op.name == "WHERE" for u in conv[0].toposort()) is not stored, shape
    assert (math.prod(shape) >= STORED_OPERAND_SIZE) == stored
    win = np.lib.stride_tricks.sliding_window_view(np.maximum(x.numpy() + b.numpy(), 0), (3, 3), axis=(2, 3))
    np.testing.assert_allclose(out.numpy(), np.einsum("bcyxij,ocij->boyx", win, w.numpy()), rtol=1e-4, atol=1e-4)

def test_a_big_mask_of_indices_alone_stays_in_the_reduction_that_reads_it():
  """A triangular mask from two aranges, read by a reduction through a broadcast, costs a compare to compute again,
  no less than a load of it would: at STORED_OPERAND_SIZE elements it is still not a kernel of its own."""
  n = 256
  assert n * n >= STORED_OPERAND_SIZE
  x = rnd(4, n)
  rows, cols = Tensor.arange(n).reshape(n, 1), Tensor.arange(n).reshape(1, n)
  out = (cols <= rows).where(x.unsqueeze(-2), 0).sum(-1)
  assert kernels(out) == 1
  np.testing.assert_allclose(out.numpy(), np.cumsum(x.numpy(), 1), rtol=1e-5, atol=1e-4)

@pytest.mark.parametrize("n", [CUM_BLOCK, CUM_BLOCK ** 2])
def test_a_cumsum_gradient_is_masked_sums_without_index_division(n):
  """cumsum within a block is a sum under a triangular mask, so its gradient is the same kind of sum, reading the
  incoming gradient at plain indices (as a sliding window's gradient it was a gather with a division and a modulo
  per element: 50x slower on a CPU); one block is one kernel."""
  x, w = rnd(3, n), rnd(3, n)
  (gx,) = (x.cumsum(1) * w).sum().gradient(x)
  items = [i for i in gx.schedule() if i.ast.op.name == "SINK"]
  assert (len(items) == 1) == (n == CUM_BLOCK)
  in_loops = {u.op.name for item in items for u in uops_in_loops(get_program(item.ast, Device["CPU"].renderer).uops)}
  assert not in_loops & {"IDIV", "MOD"}, in_loops
  np.testing.assert_allclose(gx.numpy(), np.cumsum(w.numpy()[:, ::-1], 1)[:, ::-1], rtol=1e-5, atol=1e-4)

def test_a_relu_layer_in_training_stores_only_its_output():
  """ReLU's gradient reads its output, so the pre-activation x @ w1 + b1 is needed by nothing but the ReLU: bias and
  ReLU run in the matmul's kernel, and only the activation is stored for the next layer and the backward pass. (Were
  the gradient read from x @ w1 + b1, that would be stored too and the ReLU would be a kernel of its own.)"""
  x, w1, b1, w2 = rnd(512, 64), rnd(64, 256), rnd(256), rnd(256, 10)
  for t in (w1, b1, w2): t.requires_grad = True
  (((x @ w1 + b1).relu()) @ w2).sum().backward()
  items = w1.grad.schedule(b1.grad, w2.grad)
  sizes = lambda i: [b.size for b in i.bufs]  # the forward matmul writes 512x256 from x (512x64) and w1 (64x256)
  (forward,) = [i for i in items if sizes(i)[0] == 512 * 256 and {512 * 64, 64 * 256} <= set(sizes(i)[1:])]
  assert any(u.op.name == "WHERE" for u in forward.ast.toposort())
  elementwise = [i for i in items if "REDUCE_AXIS" not in {u.op.name for u in i.ast.toposort()}]
  assert not [i for i in elementwise if 512 * 256 in sizes(i)]  # no kernel for the ReLU alone (the rest pad w2's 10 columns)
  h = x.numpy() @ w1.numpy() + b1.numpy()
  g_h = (h > 0) * w2.numpy().sum(1)
  np.testing.assert_allclose(w1.grad.numpy(), x.numpy().T @ g_h, rtol=1e-3, atol=1e-2)
  np.testing.assert_allclose(b1.grad.numpy(), g_h.sum(0), rtol=1e-3, atol=1e-2)
  np.testing.assert_allclose(w2.grad.numpy(), np.maximum(h, 0).sum(0)[:, None].repeat(10, 1), rtol=1e-3, atol=1e-2)

def test_shared_work_with_a_permuted_copy_is_stored_once_in_the_copy_layout():
  """g = (x @ w) * m read by a transposed copy and by a sum (a ReLU gradient read by a convolution's weight gradient
  with channels innermost and by its bias gradient): g is stored once, laid out as the copy, so the matmul runs in
  g's kernel and the sum reads g. (Else the matmul is stored, and the copy and the sum each compute g from it.)"""
  x, w, m = rnd(64, 32), rnd(32, 48), rnd(64, 48)
  g = (x @ w) * m
  copy, total = g.permute(1, 0).contiguous(), g.sum(0)
  items = copy.schedule(total)
  assert len(items) == 2
  assert items[0].bufs[0] in items[1].bufs and "REDUCE_AXIS" in {u.op.name for u in items[0].ast.toposort()}
  ref = (x.numpy() @ w.numpy()) * m.numpy()
  np.testing.assert_allclose(copy.numpy(), ref.T, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(total.numpy(), ref.sum(0), rtol=1e-4, atol=1e-4)
  g2 = (x @ w) * m  # requested itself, g keeps a row-major buffer of its own
  copy2 = g2.permute(1, 0).contiguous()
  Tensor.realize(g2, copy2)
  np.testing.assert_allclose(g2.numpy(), ref, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(copy2.numpy(), ref.T, rtol=1e-4, atol=1e-4)

def test_a_cpu_transposed_convolution_stores_its_padded_input_channels_last():
  """On the CPU conv_transpose2d (a convolution's input gradient) stores its zero-padded input channels-last and sums
  the channels in its innermost loop, inside the taps: a tile of batch rows then reads contiguous channels, and the
  loops over the taps skip the stored padding (a tile along x would multiply the zeros at its borders)."""
  rng = np.random.default_rng(0)
  g, w = (rng.standard_normal(s).astype(np.float32) for s in ((8, 32, 10, 10), (32, 16, 3, 3)))
  out = Tensor(g, device="CPU").conv_transpose2d(Tensor(w, device="CPU"))
  items = out.schedule()
  (pad,) = [i for i in items if i.bufs[0].size == 8 * 32 * 14 * 14]
  store = pad.ast.src[0].src[1].arg
  assert store.shape == (8, 14, 14, 32) and store.contiguous
  (conv,) = [i for i in items if any(u.op.name == "REDUCE_AXIS" for u in i.ast.toposort())]
  k = Kernel(conv.ast, Device["CPU"].renderer)
  assert k.full_shape[-3:] == (3, 3, 32) and [t.name for t in k.axis_types[-3:]] == ["REDUCE"] * 3
  ref = np.zeros((8, 16, 12, 12), np.float32)
  for ky, kx in np.ndindex(3, 3): ref[:, :, ky:ky + 10, kx:kx + 10] += np.einsum("ncyx,co->noyx", g, w[:, :, ky, kx])
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)

def test_realize_several_in_one_schedule():
  a = rnd(8)
  x, y = a * 2, a.sum()
  assert kernels(x, y) == 2
  Tensor.realize_all(x, y)
  np.testing.assert_allclose(x.numpy(), a.numpy() * 2)
  np.testing.assert_allclose(y.numpy(), a.numpy().sum(), rtol=1e-6)

def test_lazy_until_realized():
  GlobalCounters.reset()
  t = rnd(4, 4) * 3 + 1
  assert GlobalCounters.kernel_count == 0
  t.realize()
  assert GlobalCounters.kernel_count == 1
  t.numpy()
  assert GlobalCounters.kernel_count == 1, "a realized tensor reads its buffer"

def test_counters_add_up_ops_and_bytes(capsys):
  a, b = rnd(64, 64), rnd(64, 64)
  GlobalCounters.reset()
  (a + b).realize()
  assert GlobalCounters.kernel_count == 1 and GlobalCounters.global_ops == 64 * 64
  assert GlobalCounters.global_mem == 3 * 64 * 64 * 4 and GlobalCounters.time_sum_s == 0, "kernels are timed only when asked"
  with Context(DEBUG=2): (a * b).realize()
  assert GlobalCounters.time_sum_s > 0

def test_schedule_cache_hits_for_identical_graphs():
  def step(v):
    return ((Tensor(np.full((4, 4), v, np.float32)) + 1) * 2).sum(0)
  step(1).realize()
  hits = stats["hits"]
  out = step(5).realize()
  assert stats["hits"] == hits + 1
  np.testing.assert_allclose(out.numpy(), np.full(4, 48.0))
  with Context(SCACHE=0):
    before = stats["hits"]
    step(2).realize()
    assert stats["hits"] == before

def test_assign_orders_readers_before_writers():
  w = Tensor(np.arange(4, dtype=np.float32)).contiguous().realize()
  old = w * 1.0          # reads w before the assign
  w.assign(w + 10)
  Tensor.realize_all(old, w)
  np.testing.assert_allclose(old.numpy(), np.arange(4))
  np.testing.assert_allclose(w.numpy(), np.arange(4) + 10)

def test_assign_reading_shifted_view_of_itself():
  w = Tensor(np.arange(6, dtype=np.float32)).contiguous().realize()
  w.assign(w.flip(0)).realize()
  np.testing.assert_allclose(w.numpy(), np.arange(6)[::-1])

def test_zero_size_tensors():
  z = Tensor.zeros(0, 3) + 1
  assert z.numpy().shape == (0, 3) and kernels(z) == 0
  assert Tensor.ones(0).sum().item() == 0

def test_constant_factors_leave_sums_so_equal_sums_are_computed_once():
  x, g, w, v = rnd(4, 8, 5), rnd(4, 8, 5), rnd(1, 8, 1), rnd(1, 8, 1)
  by_w, by_v = (g * w * x).sum((0, 2)), -((g * x) * (v * 2)).sum((0, 2))
  assert sums(by_w, by_v) == 1  # both are sum(g * x) times a per-channel factor
  ref = (g.numpy() * x.numpy()).sum((0, 2))
  np.testing.assert_allclose(by_w.numpy(), ref * w.numpy().ravel(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(by_v.numpy(), -ref * 2 * v.numpy().ravel(), rtol=1e-5, atol=1e-5)

def test_batchnorm_backward_sums_each_statistic_once():
  from tg import nn
  x, g = rnd(8, 4, 6, 6).requires_grad_(True), rnd(8, 4, 6, 6)
  bn = nn.BatchNorm(4)
  with Context(TRAINING=1): (bn(x) * g).sum().backward()
  # forward: sum(x), then sum((x - mean)^2); backward: sum(g) and sum(g * (x - mean)) in one kernel; dx is elementwise
  assert sums(x.grad, bn.weight.grad, bn.bias.grad) == 3
  xs, gs = x.numpy(), g.numpy()
  mean, var = xs.mean((0, 2, 3), keepdims=True), xs.var((0, 2, 3), keepdims=True)
  xhat = (xs - mean) / np.sqrt(var + 1e-5)
  dx = (gs - gs.mean((0, 2, 3), keepdims=True) - xhat * (gs * xhat).mean((0, 2, 3), keepdims=True)) / np.sqrt(var + 1e-5)
  np.testing.assert_allclose(x.grad.numpy(), dx, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(bn.weight.grad.numpy(), (gs * xhat).sum((0, 2, 3)), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(bn.bias.grad.numpy(), gs.sum((0, 2, 3)), rtol=1e-4, atol=1e-4)

def test_sibling_reductions_share_one_kernel_unless_one_needs_the_other():
  x, y = rnd(16, 32), rnd(16, 32)
  a, b = (x * y).sum(1), (x + y).max(1)
  (item,) = [i for i in Tensor.schedule(a, b) if i.ast.op.name == "SINK"]
  assert len(item.ast.src) == 2  # one kernel, two stores
  np.testing.assert_allclose(a.numpy(), (x.numpy() * y.numpy()).sum(1), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(b.numpy(), (x.numpy() + y.numpy()).max(1), rtol=1e-6)
  mean = x.mean(1, keepdim=True)
  assert sums(mean, ((x - mean) ** 2).sum(1)) == 2  # the second sum reads the first
  other = rnd(16, 32)
  assert sums(x.sum(1), other.sum(1)) == 2  # nothing read in common: nothing to share

def test_pulling_factors_out_of_a_sum_of_repeated_squares_stays_fast():
  """x*x shared 40 levels deep has 2^40 factors as a tree; factoring stops after a few and the schedule stays small."""
  x = Tensor(np.linspace(0.999, 1.001, 8, dtype=np.float32).reshape(2, 4))
  y = x
  for _ in range(40): y = y * y
  out = (y * x[:, :1]).sum(1)  # x[:, :1] is constant along the summed axis
  assert sums(out) == 1
  xs = x.numpy().astype(np.float64)
  with np.errstate(over="ignore"): ref = (xs ** (2 ** 40) * xs[:, :1]).sum(1)  # row 0 underflows to 0, row 1 overflows
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-3)

@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_chains_schedule_in_linear_time(mode):
  """Each pad is a cat of three views, so a fused chain reads its input through 3**(pads*dims) views: the scheduler
  stores intermediates instead of building (and lowering) that kernel."""
  a = np.arange(64, dtype=np.float32).reshape(4, 4, 4)
  ref, t = a, Tensor(a)
  for _ in range(4): ref, t = np.pad(ref, 1, mode={"replicate": "edge", "circular": "wrap"}.get(mode, mode)), t.pad(((1, 1),) * 3, mode=mode)
  items = t.schedule()
  assert all(len(it.ast.toposort()) <= MAX_KERNEL_NODES for it in items)
  np.testing.assert_array_equal(t.numpy(), ref)
