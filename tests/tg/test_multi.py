"""Multi-device tensors on four devices of the default kind (CPU:0..3, separate devices with their own engines; with
DEV=MOCK+NV MOCKGPU_COUNT=4, tests/tg/test_on_other_devices.py runs this file on four NV-model GPUs): Tensor.shard, ops
on sharded and replicated tensors against numpy, allreduce (ring and direct) against single-device sums, autograd,
optimizers, TinyJit and BatchNorm against the same computation on one device."""
import numpy as np
import pytest
from tg import Tensor, TinyJit, Context, Device, GlobalCounters, dtypes, nn
from tg.nn.optim import Adam, SGD
from tg import multi

KIND = Device.DEFAULT.split(":")[0]
D2, D4 = (KIND, f"{KIND}:1"), tuple(f"{KIND}:{i}" if i else KIND for i in range(4))
rng = np.random.default_rng(0)

def test_indexed_devices_are_separate_devices():
  assert Device[D2[1]] is not Device[D2[0]] and Device[f"{KIND.lower()}:0"] is Device[KIND]
  if KIND == "CPU": assert Device["CPU:1"].engines["compute"] is not Device["CPU"].engines["compute"]

@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_shard_keeps_the_logical_tensor(axis):
  a = rng.standard_normal((4, 8)).astype(np.float32)
  t = Tensor(a).shard(D4, axis)
  assert t.device == D4 and t.shape == (4, 8)
  np.testing.assert_array_equal(t.numpy(), a)
  np.testing.assert_array_equal(t.to("CPU:2").numpy(), a)
  parts = t.realize().uop.src
  assert [p.device for p in parts] == list(D4)
  if axis is not None: assert all(p.shape[axis % 2] == a.shape[axis % 2] // 4 for p in parts)

def test_shard_in_place_to_and_errors():
  a = rng.standard_normal((4, 2)).astype(np.float32)
  t = Tensor(a)
  assert t.shard_(D2, 0) is t and t.device == D2
  np.testing.assert_array_equal(t.numpy(), a)
  u = Tensor(a).to_(D4)
  assert u.device == D4 and u.uop.arg is None
  np.testing.assert_array_equal(u.numpy(), a)
  with pytest.raises(RuntimeError, match="evenly"): Tensor(np.zeros((3, 2), np.float32)).shard(D2, 0)  # uneven splits refused, as tinygrad
  with pytest.raises(RuntimeError, match="already on"): t.shard(D2)
  with pytest.raises(ValueError, match="different devices"): t + Tensor(a).shard(D4, 0)
  np.testing.assert_array_equal(Tensor.ones(2, 3, device=D2).numpy(), np.ones((2, 3)))

@pytest.mark.parametrize("ax, bx", [(0, 0), (0, None), (None, 1), (1, 0)])
def test_elementwise_between_layouts(ax, bx):
  a, b = rng.standard_normal((2, 4, 8)).astype(np.float32), rng.standard_normal((2, 4, 8)).astype(np.float32)
  x, y = Tensor(a).shard(D2, ax), Tensor(b).shard(D2, bx)
  np.testing.assert_allclose(((x * y + 1).exp2() - y / 3).numpy(), np.exp2(a * b + 1) - b / 3, rtol=1e-5)
  np.testing.assert_array_equal((x > y).where(x, 2.5).numpy(), np.where(a > b, a, 2.5))

def test_movement_ops_keep_or_move_the_split_axis():
  a = np.arange(4 * 6 * 4, dtype=np.float32).reshape(4, 6, 4)
  t = Tensor(a).shard(D2, 0)
  cases = [(lambda x: x.reshape(4, 24), lambda x: x.reshape(4, 24)), (lambda x: x.reshape(2, 2, 6, 4), lambda x: x.reshape(2, 2, 6, 4)),
           (lambda x: x.reshape(96), lambda x: x.reshape(96)), (lambda x: x.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1)),
           (lambda x: x[:, 1:5, ::2], lambda x: x[:, 1:5, ::2]), (lambda x: x.pad(((0, 0), (1, 2), (0, 1))), lambda x: np.pad(x, ((0, 0), (1, 2), (0, 1)))),
           (lambda x: x.reshape(4, 6, 4, 1).expand(4, 6, 4, 3), lambda x: np.broadcast_to(x[..., None], (4, 6, 4, 3))),
           (lambda x: x.flip(2), lambda x: np.flip(x, 2)),
           # along the split axis: the data moves between devices
           (lambda x: x[1:3], lambda x: x[1:3]), (lambda x: x.flip(0), lambda x: np.flip(x, 0)), (lambda x: x.pad(((1, 0), (0, 0), (0, 0))), lambda x: np.pad(x, ((1, 0), (0, 0), (0, 0)))),
           (lambda x: x.reshape(6, 16), lambda x: x.reshape(6, 16)), (lambda x: x.roll(1, 0), lambda x: np.roll(x, 1, 0))]
  for fn, ref in cases: np.testing.assert_array_equal(fn(t).numpy(), ref(a))
  assert t.reshape(4, 24).uop.op is not None and multi._reshaped_axis((4, 6, 4), (2, 2, 6, 4), 0, 2) == 0

@pytest.mark.parametrize("devices", [D2, D4])
def test_reductions_along_and_across_the_split_axis(devices):
  a = rng.standard_normal((8, 12)).astype(np.float32)
  t = Tensor(a).shard(devices, 0)
  np.testing.assert_allclose(t.sum(0).numpy(), a.sum(0), rtol=1e-5, atol=1e-5)  # an allreduce
  np.testing.assert_allclose(t.sum(1).numpy(), a.sum(1), rtol=1e-5, atol=1e-5)  # local
  np.testing.assert_allclose(t.sum().numpy(), a.sum(), rtol=1e-5, atol=1e-4)
  np.testing.assert_array_equal(t.max(0).numpy(), a.max(0))
  np.testing.assert_array_equal(t.min().numpy(), a.min())
  np.testing.assert_allclose(t.mean(0).numpy(), a.mean(0), rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(t.argmax(0).numpy(), a.argmax(0))

@pytest.mark.parametrize("n", [1 << 10, (1 << 16) + 3])
def test_integer_allreduce_equals_the_single_device_sum(n):
  a = rng.integers(-2**20, 2**20, (4, n)).astype(np.int32)
  t = Tensor(a).shard(D4, 0)
  np.testing.assert_array_equal(t.sum(0).numpy(), Tensor(a).sum(0).numpy())
  np.testing.assert_array_equal(t.sum(0).numpy(), a.sum(0, dtype=np.int32))

def copied_bytes(t: Tensor) -> int: return sum(it.bufs[0].nbytes for it in t.schedule() if it.ast.op.name == "COPY")

def test_ring_allreduce_moves_less_than_the_direct_one(monkeypatch):
  a = rng.standard_normal((4, 1 << 16)).astype(np.float32)
  t = Tensor(a).shard(D4, 0).realize()
  assert multi.use_ring(D4, a[0].nbytes) == (KIND != "CPU") and not multi.use_ring(D4, 1 << 10) and not multi.use_ring(D2, 1 << 30)
  monkeypatch.setattr(multi, "use_ring", lambda devices, nbytes: True)
  ring = copied_bytes(t.sum(0))
  monkeypatch.setattr(multi, "use_ring", lambda devices, nbytes: False)
  direct = copied_bytes(t.sum(0))
  assert ring == 2 * 3 * (1 << 16) * 4  # reduce-scatter and all-gather: each device sends 3 chunks of a quarter, twice
  assert direct == 4 * 3 * (1 << 16) * 4 and ring < direct
  monkeypatch.setattr(multi, "use_ring", lambda devices, nbytes: True)
  np.testing.assert_allclose(t.sum(0).numpy(), a.sum(0), rtol=1e-5, atol=1e-5)
  parts = [p.numpy() for p in (Tensor(u) for u in t.sum(0).realize().uop.src)]
  assert all(np.array_equal(parts[0], p) for p in parts)  # every device holds the same bits

def test_matmul_data_and_model_parallel():
  x, w = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((16, 4)).astype(np.float32)
  ref = x.astype(np.float64) @ w
  np.testing.assert_allclose((Tensor(x).shard(D4, 0) @ Tensor(w).shard(D4)).numpy(), ref, rtol=1e-4, atol=1e-5)  # shard-x
  np.testing.assert_allclose((Tensor(x).shard(D4) @ Tensor(w).shard(D4, 1)).numpy(), ref, rtol=1e-4, atol=1e-5)  # shard-w, output split
  out = Tensor(x).shard(D4, 1) @ Tensor(w).shard(D4, 0)  # the inner axis split: an allreduce of partial products
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-5)

def test_indexing_and_embedding_on_shards():
  a = rng.standard_normal((8, 6)).astype(np.float32)
  t = Tensor(a).shard(D2, 0)
  np.testing.assert_array_equal(t[3].numpy(), a[3])
  np.testing.assert_array_equal(t[:, [4, 0]].numpy(), a[:, [4, 0]])
  idx = np.array([[1, 2], [0, 5], [3, 3], [5, 1]], np.int32)
  emb = nn.Embedding(6, 3)
  ref = emb(Tensor(idx)).numpy()
  emb.weight.shard_(D2)
  np.testing.assert_allclose(emb(Tensor(idx).shard(D2, 0)).numpy(), ref)

def test_autograd_and_optimizers_match_one_device():
  x, y = rng.standard_normal((8, 5)).astype(np.float32), rng.integers(0, 3, 8).astype(np.int32)
  w0, b0 = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
  def train(devices):
    w, b = Tensor(w0.copy(), requires_grad=True), Tensor(b0.copy(), requires_grad=True)
    X, Y = Tensor(x), Tensor(y)
    if devices:
      w.shard_(devices), b.shard_(devices)
      X, Y = X.shard(devices, 0), Y.shard(devices, 0)
    opt = Adam([w, b], lr=0.05)
    with Context(TRAINING=1):
      for _ in range(3):
        loss = (X @ w + b).sparse_categorical_crossentropy(Y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return w.numpy(), b.numpy(), w.grad.numpy()
  for got, want in zip(train(D4), train(None)): np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

def test_tinyjit_replays_a_multi_device_step():
  w0 = rng.standard_normal((5, 3)).astype(np.float32)
  w, wr = Tensor(w0.copy(), requires_grad=True).shard_(D2), Tensor(w0.copy(), requires_grad=True)
  opt, opt_ref = SGD([w], lr=0.1), SGD([wr], lr=0.1)
  @TinyJit
  def step(X, Y):
    with Context(TRAINING=1):
      loss = (X @ w).sparse_categorical_crossentropy(Y)
      opt.zero_grad(); loss.backward(); loss.realize(); opt.step()  # the loss of the weights before this step
    return loss
  for _ in range(5):
    x, y = rng.standard_normal((8, 5)).astype(np.float32), rng.integers(0, 3, 8).astype(np.int32)
    got = step(Tensor(x).shard(D2, 0).realize(), Tensor(y).shard(D2, 0).realize()).item()
    with Context(TRAINING=1):
      want = (Tensor(x) @ wr).sparse_categorical_crossentropy(Tensor(y))
      opt_ref.zero_grad(); want.backward(); want.realize(); opt_ref.step()
    assert abs(got - want.item()) < 1e-6
  assert step.captured is not None and {p.device for p in (w.uop.src)} == set(D2)
  np.testing.assert_allclose(w.numpy(), wr.numpy(), rtol=1e-6, atol=1e-7)

def test_batchnorm_statistics_over_a_sharded_batch():
  x = rng.standard_normal((8, 3, 4, 4)).astype(np.float32)
  bn, bn_ref = nn.BatchNorm(3), nn.BatchNorm(3)
  for p in (bn.weight, bn.bias, bn.running_mean, bn.running_var): p.shard_(D4)
  with Context(TRAINING=1):
    out, ref = bn(Tensor(x).shard(D4, 0)), bn_ref(Tensor(x))
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(bn.running_mean.numpy(), bn_ref.running_mean.numpy(), rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(bn.running_var.numpy(), bn_ref.running_var.numpy(), rtol=1e-5, atol=1e-7)

def test_copies_between_devices_run_on_their_copy_engines(capsys, tmp_path):
  """Between devices of one kind, a copy is the destination's copy engine reading the source (host memory on CPU,
  peer video memory on NV); DEBUG=2 shows every copy and marks the ones that bounce through the host."""
  a = np.ones((4, 4), np.float32)
  with Context(DEBUG=2): Tensor(a).shard(D2, 0).sum(0).realize()
  copies = [line for line in capsys.readouterr().out.splitlines() if " copy " in line]
  between = [line for line in copies if f"{D2[0]:7s}" in line and D2[1] in line]
  assert between and not any("through the host" in line for line in between)
  (tmp_path / "a").write_bytes(a.tobytes())
  with Context(DEBUG=2): Tensor.empty(16, device=f"disk:{tmp_path / 'a'}").to(D2[1]).realize()  # a file: through the host
  assert "(through the host)" in capsys.readouterr().out

def test_memory_freed_under_a_pending_copy_is_not_reused_too_early():
  """A temporary copied to another device is freed (back to its device's allocator cache) as soon as the copy is
  queued; the next allocation of that size must not overwrite it before the other device has read it."""
  rep = Tensor(np.zeros((4, 6), np.float32)).shard(D2).realize()
  for i in range(40):
    rep.assign(Tensor(np.full((4, 6), float(i), np.float32)).shard(D2)).realize()
    Tensor(np.full((4, 6), -1.0, np.float32)).realize()  # same size, same device: takes the freed temporary's memory
    for part in rep.uop.src: np.testing.assert_array_equal(Tensor(part).numpy(), np.full((4, 6), i, np.float32))
