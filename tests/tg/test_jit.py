"""TinyJit: capture on the second call, replay from the third with only the inputs swapped."""
import numpy as np
import pytest
from tg import Tensor, TinyJit, GlobalCounters, Context, Device, nn
from tg.jit import JitError

def rnd(*shape, seed=0): return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))

def test_replay_matches_eager_results_and_counters():
  def f(a, b): return ((a @ b).relu() + 1).sum(1)
  jf = TinyJit(f)
  for i in range(5):
    a, b = rnd(8, 16, seed=i), rnd(16, 4, seed=i + 100)
    expected = f(a, b).numpy()
    GlobalCounters.reset()
    with Context(JIT=0):
      f(a, b).realize()
      eager = (GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem)
    GlobalCounters.reset()
    out = jf(a, b)
    replay = (GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)
    if i >= 2: assert replay == eager and replay[0] == jf.captured.kernel_count and replay[1] > 0
  assert jf.cnt == 5

def test_replay_does_not_run_python():
  calls = []
  @TinyJit
  def f(x):
    calls.append(1)
    return x * 2
  for i in range(4): f(rnd(3, seed=i))
  assert len(calls) == 2, "the body runs on the first two calls only"

def test_shape_dtype_and_name_changes_raise():
  @TinyJit
  def f(x): return x + 1
  for _ in range(3): f(rnd(4, 4))
  with pytest.raises(JitError, match=r"\(3, 4\)"): f(rnd(3, 4))
  with pytest.raises(JitError, match="int"): f(Tensor(np.ones((4, 4), np.int32)))
  with pytest.raises(JitError, match="args mismatch"): f(x=rnd(4, 4))
  with pytest.raises(JitError, match="view"): f(rnd(4, 4).T)

def test_the_same_input_tensor_changed_between_replays_is_read_again():
  """A replay reuses what it learned about an input only while the input is the same node: after an assign (new
  contents) or a reshape (new view) of the same Tensor object, the replay reads the new contents or refuses the view."""
  f = TinyJit(lambda x: (x * 2).realize())
  x = Tensor(np.array([1.0, 2.0, 3.0, 4.0], np.float32)).realize()
  for _ in range(3): np.testing.assert_equal(f(x).numpy(), [2, 4, 6, 8])
  x.assign(Tensor(np.array([5.0, 7.0, 9.0, 11.0], np.float32))).realize()
  np.testing.assert_equal(f(x).numpy(), [10, 14, 18, 22])
  x = x.reshape(2, 2)
  with pytest.raises(JitError, match="args mismatch"): f(x)

def test_a_call_with_the_last_inputs_in_other_places_is_checked_again():
  """A replay with the very inputs of the last checked call skips the checks; the same tensors at other positions,
  under other names or twice are another call, checked and replayed with their own buffers."""
  f = TinyJit(lambda x, y: (x * 2 + y).realize())
  x, y = Tensor(np.array([1.0, 2.0], np.float32)).realize(), Tensor(np.array([3.0, 4.0], np.float32)).realize()
  for _ in range(4): np.testing.assert_equal(f(x, y).numpy(), [5, 8])
  np.testing.assert_equal(f(y, x).numpy(), [7, 10])
  with pytest.raises(JitError, match="args mismatch"): f(x, y=y)
  with pytest.raises(JitError, match="duplicate"): f(x, x)
  np.testing.assert_equal(f(x, y).numpy(), [5, 8])
  assert f.cnt == 6

def test_misuse_errors():
  @TinyJit
  def reads_data(x):
    return Tensor(x.numpy()) + 1
  reads_data(rnd(2))
  with pytest.raises(RuntimeError, match="JIT capture"): reads_data(rnd(2))
  @TinyJit
  def dup(a, b): return a + b
  x = rnd(2)
  with pytest.raises(JitError, match="duplicate"): dup(x, x)
  @TinyJit
  def returns_int(x): return 3
  returns_int(rnd(2))
  with pytest.raises(JitError, match="int"): returns_int(rnd(2))
  @TinyJit
  def nothing(x): return None
  nothing(rnd(2))
  with pytest.raises(JitError, match="didn't JIT"): nothing(rnd(2))

def test_nested_jit_is_refused():
  inner = TinyJit(lambda x: x * 2)
  @TinyJit
  def outer(x): return inner(x) + 1
  for _ in range(2): inner(rnd(2))
  outer(rnd(2))
  with pytest.raises(RuntimeError, match="inside another TinyJit"): outer(rnd(2))

def test_python_values_are_frozen_at_capture():
  scale = {"v": 2.0}
  @TinyJit
  def f(x): return x * scale["v"]
  for i in range(3):
    out = f(Tensor([1.0]))
    scale["v"] = 10.0 + i
  assert out.item() == 10.0, "the constant captured on the second call is replayed"

def test_random_numbers_change_on_replay():
  @TinyJit
  def f(x): return x + Tensor.rand(4)
  outs = [f(Tensor.zeros(4).contiguous()).numpy().copy() for _ in range(4)]
  assert all(not np.allclose(outs[i], outs[i + 1]) for i in range(3))

def test_jit0_runs_eagerly():
  calls = []
  def g(x):
    calls.append(1)
    return x + 1
  jg = TinyJit(g)
  with Context(JIT=0):
    for _ in range(3): jg(rnd(2))
  assert len(calls) == 3 and jg.captured is None

def test_outputs_alias_between_replays():
  @TinyJit
  def f(x): return x * 1
  outs = [f(Tensor([float(i)]).contiguous()) for i in range(4)]
  assert outs[2] is outs[3] and outs[3].item() == 3.0

def test_training_step_with_optimizer_and_memory_planning():
  np.random.seed(0)
  X = Tensor(np.random.randn(32, 4).astype(np.float32))
  Y = X @ Tensor(np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32))
  model = nn.Linear(4, 1)
  opt = nn.optim.SGD(nn.state.get_parameters(model), lr=0.1)
  @TinyJit
  @Context(TRAINING=1)
  def step(x, y):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean().backward()
    opt.step()
    return loss
  losses = [step(X, Y).item() for _ in range(30)]
  assert losses[-1] < losses[0] / 50
  planned = {id(b) for ei in step.captured.items for b in ei.bufs}
  used = sum(len(ei.bufs) for ei in step.captured.items)
  assert len(planned) < used

def _five_kernel_step(x):
  a = (x + 1).contiguous()
  b = (a * 2).contiguous()
  c = (b - 3).contiguous()
  d = (c * c).contiguous()
  return d.sum()

@pytest.mark.skipif(Device[Device.DEFAULT].graph is None, reason=f"{Device.DEFAULT} has no graph executor")
@pytest.mark.parametrize("jit,batch,expected", [(1, 2, [2, 3]), (1, 32, [5]), (2, 32, [])])
def test_graph_batching_follows_jit_and_batch_size(jit, batch, expected):
  from tg.jit import GraphBatch
  with Context(JIT=jit, JIT_BATCH_SIZE=batch):
    f = TinyJit(_five_kernel_step)
    for i in range(4):
      out = f(Tensor(np.full(8, float(i), np.float32)).contiguous())
      assert out.item() == 8 * ((i + 1) * 2 - 3) ** 2
    sizes = [len(s.items) for s in f.captured.steps if isinstance(s, GraphBatch)]
    assert sizes == expected

@pytest.mark.skipif(Device[Device.DEFAULT].graph is None, reason=f"{Device.DEFAULT} has no graph executor")
def test_a_one_kernel_step_replays_as_a_graph():
  """A graph replay skips building a command queue, which is most of a small kernel's launch."""
  from tg.jit import GraphBatch
  f = TinyJit(lambda x: (x * 2 + 1).realize())
  for i in range(4): np.testing.assert_allclose(f(Tensor(np.full(8, float(i), np.float32))).numpy(), np.full(8, 2.0 * i + 1))
  assert [type(s) for s in f.captured.steps] == [GraphBatch]

def test_float_constants_passed_as_arguments_replay_with_their_values():
  base = np.arange(8, dtype=np.float32)
  for c in (0.3, 0.7): (Tensor(base) * c - 2.5).numpy()  # the second call makes the kernel take its constants as arguments
  step = TinyJit(lambda x: (x * 0.9 - 2.5).realize())
  for i in range(4):
    np.testing.assert_allclose(step(Tensor(base + i)).numpy(), (base + i) * np.float32(0.9) - np.float32(2.5), rtol=1e-6)

# ---- Variables: one capture serves every value bound in the inputs' views or passed as an argument ----
SYM = np.random.default_rng(7).standard_normal((3, 10)).astype(np.float32)

@pytest.fixture
def compiled(monkeypatch):
  """The kernel ASTs compiled while a test runs."""
  from tg import realize
  asts = []
  init = realize.CompiledRunner.__init__
  def counting(self, device, ast):
    asts.append(ast)
    init(self, device, ast)
  monkeypatch.setattr(realize.CompiledRunner, "__init__", counting)
  return asts

def test_one_capture_serves_several_sizes(compiled):
  from tg import Variable
  a = Tensor(SYM).realize()
  jf = TinyJit(lambda x: ((x * 2 + 1).sum(0).realize(), (x - 1).realize()))
  captured = None
  for k, n in enumerate((2, 3, 5, 10, 1, 7)):
    sums, shifted = jf(a[:, :Variable("i", 1, 10).bind(n)])
    np.testing.assert_allclose(sums.numpy(), (SYM[:, :n] * 2 + 1).sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(shifted.numpy(), SYM[:, :n] - 1, rtol=1e-6)
    assert sums.shape[0].src[1].arg == n, "a returned tensor of symbolic shape takes the call's value"
    if k == 1: captured, compiled[:] = jf.captured, []
    if k >= 2: assert jf.captured is captured
  assert compiled == [], "replays with other values compile nothing"
  assert jf.cnt == 6

@pytest.mark.skipif(Device[Device.DEFAULT].graph is None, reason=f"{Device.DEFAULT} has no graph executor")
def test_graph_replay_patches_the_variable():
  from tg import Variable
  from tg.jit import GraphBatch
  a, b = Tensor(SYM).realize(), Tensor(SYM.T.copy()).realize()
  def f(x, y):
    s = (x @ y).realize()
    return (s + s).realize()
  jf = TinyJit(f)
  for n in (4, 2, 9, 1, 10):
    v = Variable("i", 1, 10).bind(n)
    np.testing.assert_allclose(jf(a[:, :v], b[:v]).numpy(), 2 * SYM[:, :n] @ SYM[:, :n].T, rtol=1e-5, atol=1e-5)
  assert [type(s) for s in jf.captured.steps] == [GraphBatch]

def test_variable_arguments_replay_with_their_values():
  from tg import Variable
  from tg.jit import GraphBatch
  def f(x, s): return ((x + s).realize() * 2).realize()
  jf = TinyJit(f)
  x = Tensor(SYM).realize()
  for s in (-3, 2, -5, 5, 0):
    np.testing.assert_allclose(jf(x, Variable("s", -5, 5).bind(s)).numpy(), (SYM + s) * 2, rtol=1e-6)
  # a graph patches argument words with the value as is: kernels taking a Variable that may be negative run on their own
  assert not any(isinstance(step, GraphBatch) and any(ei.runner.spec.vars for ei in step.items) for step in jf.captured.steps)

def test_symbolic_inputs_must_match_the_capture():
  from tg import Variable
  a = Tensor(SYM).realize()
  jf = TinyJit(lambda x: (x + 1).realize())
  for n in (2, 3): jf(a[:, :Variable("i", 1, 10).bind(n)])
  with pytest.raises(JitError, match="args mismatch"): jf(a[:, :Variable("j", 1, 10).bind(3)])
  with pytest.raises(JitError, match="args mismatch"): jf(a[:, :3])
  b = Tensor(SYM * 2).realize()
  two = TinyJit(lambda x, y: (x.sum() + y.sum()).realize())
  for n in (2, 3): two(a[:, :Variable("i", 1, 10).bind(n)], b[:, :Variable("i", 1, 10).bind(n)])
  with pytest.raises(JitError, match="bound to both 3 and 4"): two(a[:, :Variable("i", 1, 10).bind(3)], b[:, :Variable("i", 1, 10).bind(4)])

def test_cache_written_at_a_bound_position_replays_per_position():
  from tg import Variable
  cache = Tensor.zeros(8, 4).contiguous().realize()
  @TinyJit
  def step(x, pos):
    cache[pos:pos + 1].assign(x).realize()
    return cache[:pos + 1].sum(0).realize()
  for i in range(6):
    out = step(Tensor.full((1, 4), float(i + 1)).contiguous(), Variable("pos", 0, 7).bind(i))
    np.testing.assert_equal(out.numpy(), np.full(4, (i + 1) * (i + 2) / 2))
  np.testing.assert_equal(cache.numpy()[:, 0], [1, 2, 3, 4, 5, 6, 0, 0])

def test_two_variables_cat_and_pad_replay():
  from tg import Variable
  a, b = Tensor(SYM).realize(), Tensor(SYM * 2).realize()
  cat = TinyJit(lambda x, y: x.cat(y, dim=1).realize())
  pad = TinyJit(lambda x: (x + 1).pad((None, (0, 10 - x.shape[1]))).realize())
  for i, j in ((2, 3), (4, 2), (3, 5), (1, 1), (6, 4)):
    vi, vj = Variable("i", 1, 10).bind(i), Variable("j", 1, 10).bind(j)
    np.testing.assert_allclose(cat(a[:, :vi], b[:, :vj]).numpy(), np.concatenate([SYM[:, :i], 2 * SYM[:, :j]], 1), rtol=1e-6)
    np.testing.assert_allclose(pad(a[:, :vi]).numpy(), np.pad(SYM[:, :i] + 1, ((0, 0), (0, 10 - i))), rtol=1e-6)
  assert cat.captured.kernel_count == pad.captured.kernel_count == 1
