"""tg.nn.optim: three steps of every optimizer against a numpy implementation of its update rule (torch.optim's documented
algorithms for SGD/Adam/AdamW, the LAMB paper's trust ratio, LARS's layer-wise trust ratio), plus optimizer mechanics."""
import numpy as np
import pytest
from tg import Tensor, Context, dtypes, nn
from tg.nn.optim import SGD, Adam, AdamW, LAMB, LARS, OptimizerGroup
from tg.nn.state import get_parameters
from tests.tg.opcheck import needs, skip_refused

# ---------------- a fixed problem: three parameters, a gradient sequence that also depends on the weights ----------------
# loss_k = sum_i (w_i * C[k][i]).sum() + 0.5 * Q[i] * ((w_i - T[i])**2).sum()  =>  grad_i = C[k][i] + Q[i] * (w_i - T[i])
# the third parameter gets an exactly-zero gradient (Q = 0, C = 0); the second starts at zero (trust-ratio edge cases).

W0 = [np.array([[0.5, -1.0, 2.0], [0.25, 0.3, -0.7]]), np.zeros(3), np.array([1.5, -2.0])]
T = [np.array([[0.1, 0.2, 0.3], [-0.4, 0.5, -0.6]]), np.array([1.0, -1.0, 0.5]), np.zeros(2)]
Q = [1.0, 0.5, 0.0]
C = [[np.array([[0.3, -0.2, 0.1], [0.0, 0.4, -0.5]]), np.array([0.2, 0.1, -0.3]), np.zeros(2)],
     [np.array([[-0.1, 0.6, 0.2], [0.3, -0.3, 0.1]]), np.array([-0.5, 0.2, 0.0]), np.zeros(2)],
     [np.array([[0.2, 0.2, -0.4], [-0.2, 0.1, 0.3]]), np.array([0.1, -0.4, 0.6]), np.zeros(2)]]

def f32(a): return np.asarray(a, dtype=np.float32)

def np_grads(ws, k): return [C[k][i] + Q[i] * (w - T[i]) for i, w in enumerate(ws)]

def tg_loss(ws, k):
  return sum((w * Tensor(f32(C[k][i]))).sum() + 0.5 * Q[i] * ((w - Tensor(f32(T[i]))) ** 2).sum() for i, w in enumerate(ws))

def run_tg(make_opt, steps=3):
  ws = [Tensor(f32(w), requires_grad=True) for w in W0]
  opt = make_opt(ws)
  hist = []
  with Context(TRAINING=1):
    for k in range(steps):
      opt.zero_grad()
      tg_loss(ws, k).backward()
      opt.step()
      hist.append([w.numpy() for w in ws])
  return hist

def run_np(update, steps=3):
  """update(ws, gs, state, t) -> new ws (t counts from 1); `state` is a dict it keeps per optimizer."""
  ws, state, hist = [f32(w).astype(np.float64) for w in W0], {}, []
  for k in range(steps):
    ws = update(ws, np_grads(ws, k), state, k + 1)
    hist.append(ws)
  return hist

def compare(got, want, rtol=1e-5, atol=1e-6):
  for step, (g, w) in enumerate(zip(got, want)):
    for i, (a, b) in enumerate(zip(g, w)):
      np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"step {step + 1}, parameter {i}")

def norm(a): return float(np.sqrt((a * a).sum()))

# ---------------- numpy update rules ----------------

def np_sgd(lr, momentum=0.0, weight_decay=0.0, nesterov=False):
  """torch.optim.SGD (dampening 0): g += wd*w; b = g on the first step, else momentum*b + g; w -= lr*(nesterov ? g + momentum*b : b)."""
  def update(ws, gs, st, t):
    out = []
    for i, (w, g) in enumerate(zip(ws, gs)):
      g = g + weight_decay * w
      if momentum:
        st[i] = g if t == 1 else momentum * st[i] + g
        g = g + momentum * st[i] if nesterov else st[i]
      out.append(w - lr * g)
    return out
  return update

def np_adam(lr, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0, decoupled=False, trust=False):
  """Adam (torch.optim.Adam), AdamW (decoupled decay: w *= 1 - lr*wd first), LAMB (update u = m_hat/(sqrt(v_hat)+eps) + wd*w,
  scaled by |w|/|u|, or 1 when either norm is 0)."""
  def update(ws, gs, st, t):
    out = []
    for i, (w, g) in enumerate(zip(ws, gs)):
      m, v = st.get(("m", i), np.zeros_like(w)), st.get(("v", i), np.zeros_like(w))
      m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
      st[("m", i)], st[("v", i)] = m, v
      u = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
      if trust:
        u = u + weight_decay * w
        wn, un = norm(w), norm(u)
        out.append(w - lr * (wn / un if wn > 0 and un > 0 else 1.0) * u)
      elif decoupled: out.append(w * (1 - lr * weight_decay) - lr * u)
      else: out.append(w - lr * u)
    return out
  return update

def np_lars(lr, momentum=0.9, weight_decay=1e-4, tcoef=0.001, nesterov=False, classic=True, pre_wd=True):
  """LARS as tinygrad orders it: r = tcoef*|w|/(|g| + wd*|w|) (1 when either norm is 0); pre_wd: g += wd*w; classic: g *= r*lr;
  b = momentum*b + g; g = nesterov ? g + momentum*b : b; not classic: g *= r*lr; not pre_wd: w *= 1 - wd*lr; w -= g."""
  def update(ws, gs, st, t):
    out = []
    for i, (w, g) in enumerate(zip(ws, gs)):
      wn, gn = norm(w), norm(g)
      r = tcoef * wn / (gn + weight_decay * wn) if tcoef and wn > 0 and gn > 0 else 1.0
      if pre_wd: g = g + weight_decay * w
      if classic: g = g * r * lr
      if momentum:
        st[i] = momentum * st.get(i, 0.0) + g
        g = g + momentum * st[i] if nesterov else st[i]
      if not classic: g = g * r * lr
      if not pre_wd: w = w * (1 - weight_decay * lr)
      out.append(w - g)
    return out
  return update

# ---------------- the optimizers against the rules ----------------

def test_np_problem_is_nontrivial():
  gs = np_grads(W0, 0)
  assert norm(gs[0]) > 0 and norm(gs[1]) > 0 and norm(gs[2]) == 0 and norm(W0[1]) == 0

def test_sgd_plain():
  compare(run_tg(lambda ps: SGD(ps, lr=0.1)), run_np(np_sgd(0.1)))

def test_sgd_momentum():
  compare(run_tg(lambda ps: SGD(ps, lr=0.1, momentum=0.9)), run_np(np_sgd(0.1, momentum=0.9)))

def test_sgd_nesterov():
  compare(run_tg(lambda ps: SGD(ps, lr=0.05, momentum=0.8, nesterov=True)), run_np(np_sgd(0.05, momentum=0.8, nesterov=True)))

def test_sgd_weight_decay():
  compare(run_tg(lambda ps: SGD(ps, lr=0.1, weight_decay=0.2)), run_np(np_sgd(0.1, weight_decay=0.2)))
  compare(run_tg(lambda ps: SGD(ps, lr=0.1, momentum=0.5, weight_decay=0.1, nesterov=True)),
          run_np(np_sgd(0.1, momentum=0.5, weight_decay=0.1, nesterov=True)))

# tg keeps b1**t and b2**t as float32 tensors, so 1 - 0.999**t carries a relative error of ~1.3e-5 per step (float32 cancellation)
# and an Adam step is off by up to ~1.4e-5 of its size over the first three steps (torch computes the corrections in float64).
# ADAM_ATOL allows 5e-5 * lr: far below any error in the rule itself (e.g. a missing bias correction moves a step by ~lr).
def ADAM_ATOL(lr): return 5e-5 * lr

@needs(dtypes.float64, why="Adam and LAMB keep b^t in float64")
def test_adam():
  compare(run_tg(lambda ps: Adam(ps, lr=0.1)), run_np(np_adam(0.1)), atol=ADAM_ATOL(0.1))
  compare(run_tg(lambda ps: Adam(ps, lr=0.02, b1=0.5, b2=0.9, eps=1e-3)), run_np(np_adam(0.02, b1=0.5, b2=0.9, eps=1e-3)), atol=ADAM_ATOL(0.02))

@needs(dtypes.float64, why="Adam and LAMB keep b^t in float64")
def test_adamw():
  compare(run_tg(lambda ps: AdamW(ps, lr=0.1)), run_np(np_adam(0.1, weight_decay=0.01, decoupled=True)), atol=ADAM_ATOL(0.1))
  compare(run_tg(lambda ps: AdamW(ps, lr=0.05, b1=0.8, weight_decay=0.5)), run_np(np_adam(0.05, b1=0.8, weight_decay=0.5, decoupled=True)),
          atol=ADAM_ATOL(0.05))

@needs(dtypes.float64, why="Adam and LAMB keep b^t in float64")
def test_lamb():
  compare(run_tg(lambda ps: LAMB(ps, lr=0.1)), run_np(np_adam(0.1, eps=1e-6, trust=True)))
  compare(run_tg(lambda ps: LAMB(ps, lr=0.05, b1=0.8, b2=0.99, weight_decay=0.1)),
          run_np(np_adam(0.05, b1=0.8, b2=0.99, eps=1e-6, weight_decay=0.1, trust=True)))

def test_lars():
  compare(run_tg(lambda ps: LARS(ps, lr=0.1)), run_np(np_lars(0.1)))
  compare(run_tg(lambda ps: LARS(ps, lr=0.5, momentum=0.5, weight_decay=0.1, tcoef=0.02)),
          run_np(np_lars(0.5, momentum=0.5, weight_decay=0.1, tcoef=0.02)))

def test_lars_nesterov():
  compare(run_tg(lambda ps: LARS(ps, lr=0.2, momentum=0.9, weight_decay=0.05, tcoef=0.1, nesterov=True)),
          run_np(np_lars(0.2, momentum=0.9, weight_decay=0.05, tcoef=0.1, nesterov=True)))

@pytest.mark.parametrize("classic,pre_wd,nesterov", [(c, p, n) for c in (True, False) for p in (True, False) for n in (False, True)])
def test_lars_every_variant(classic, pre_wd, nesterov):
  kw = dict(lr=0.3, momentum=0.8, weight_decay=0.2, tcoef=0.05, nesterov=nesterov, classic=classic, pre_wd=pre_wd)
  compare(run_tg(lambda ps: LARS(ps, **kw)), run_np(np_lars(**kw)))

def test_lars_decoupled_decay_is_scaled_by_lr():
  """classic=True, pre_wd=False, no momentum, zero gradient (parameter 2): w *= 1 - wd*lr each step, hand-computed."""
  hist = run_tg(lambda ps: LARS(ps, lr=0.1, momentum=0.0, weight_decay=0.5, classic=True, pre_wd=False), steps=2)
  np.testing.assert_allclose(hist[0][2], W0[2] * 0.95, rtol=1e-6)
  np.testing.assert_allclose(hist[1][2], W0[2] * 0.95 ** 2, rtol=1e-6)

@needs(dtypes.float64, why="Adam and LAMB keep b^t in float64")
def test_trust_ratio_is_one_for_zero_norms():
  # first step: parameter 1 is zero (|w| = 0) and parameter 2 has a zero gradient; both must move as if the ratio were 1
  (w,) = run_tg(lambda ps: LARS(ps, lr=0.1, momentum=0.0, weight_decay=0.5, tcoef=1e-3), steps=1)
  np.testing.assert_allclose(w[1], -0.1 * np_grads(W0, 0)[1], rtol=1e-6)
  np.testing.assert_allclose(w[2], W0[2] * (1 - 0.1 * 0.5), rtol=1e-6)
  (w,) = run_tg(lambda ps: LAMB(ps, lr=0.1), steps=1)
  np.testing.assert_allclose(w[1], -0.1 * np.sign(np_grads(W0, 0)[1]), rtol=1e-4)  # m_hat/sqrt(v_hat) = sign(g) on step 1
  np.testing.assert_allclose(w[2], W0[2], rtol=1e-6)  # zero update, zero norm: unchanged, no NaN

# ---------------- mechanics ----------------

def test_zero_grad_sets_none():
  w = Tensor([1.0, 2.0], requires_grad=True)
  opt = SGD([w], lr=0.1)
  (w * w).sum().backward()
  assert w.grad is not None
  opt.zero_grad()
  assert w.grad is None

@needs(dtypes.float64, why="Adam and LAMB keep b^t in float64")
def test_step_outside_training_raises():
  w = Tensor([1.0, 2.0], requires_grad=True)
  opt = Adam([w])
  (w * 3).sum().backward()
  with pytest.raises(RuntimeError): opt.step()
  np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])

def test_step_without_gradients_raises():
  w = Tensor([1.0, 2.0], requires_grad=True)
  opt = SGD([w], lr=0.1)
  with Context(TRAINING=1), pytest.raises(RuntimeError): opt.step()

def test_step_updates_only_params_with_gradients():
  a, b = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0], requires_grad=True)
  opt = SGD([a, b], lr=0.5)
  with Context(TRAINING=1):
    (a * Tensor([1.0, -1.0])).sum().backward()
    opt.step()
  assert b.grad is None
  np.testing.assert_allclose(a.numpy(), [0.5, 2.5])
  np.testing.assert_allclose(b.numpy(), [3.0])

def test_optimizer_without_trainable_params_raises():
  with pytest.raises(ValueError): SGD([Tensor([1.0], requires_grad=False)])
  with pytest.raises(ValueError): SGD([Tensor([1, 2])])

def test_lr_is_a_tensor_and_assignable():
  w = Tensor([1.0, -1.0], requires_grad=True)
  opt = SGD([w], lr=0.1)
  assert isinstance(opt.lr, Tensor) and opt.lr.shape == (1,)
  np.testing.assert_allclose(opt.lr.numpy(), [0.1])
  c = np.array([2.0, 4.0])
  with Context(TRAINING=1):
    (w * Tensor(f32(c))).sum().backward()
    opt.step()
    np.testing.assert_allclose(w.numpy(), [1.0 - 0.2, -1.0 - 0.4], rtol=1e-6)
    opt.lr.assign(Tensor([0.01]))
    opt.zero_grad()
    (w * Tensor(f32(c))).sum().backward()
    opt.step()
    np.testing.assert_allclose(w.numpy(), [0.8 - 0.02, -1.4 - 0.04], rtol=1e-6)
    np.testing.assert_allclose(opt.lr.numpy(), [0.01])
    opt.zero_grad()
    (w * Tensor(f32(c))).sum().backward()
    opt.step()
    np.testing.assert_allclose(w.numpy(), [0.78 - 0.02, -1.44 - 0.04], rtol=1e-6)

def test_lr_assign_with_momentum_scales_the_step_not_the_buffer():
  w = Tensor([0.0, 1.0], requires_grad=True)
  opt = SGD([w], lr=0.1, momentum=0.5)
  c, want, b = np.array([1.0, -2.0]), np.array([0.0, 1.0]), 0.0
  with Context(TRAINING=1):
    for lr in (0.1, 0.3, 0.05):
      opt.lr.assign(Tensor([lr]))
      opt.zero_grad()
      (w * Tensor(f32(c))).sum().backward()
      opt.step()
      b = 0.5 * b + c       # torch.optim.SGD: the buffer holds raw gradients, lr multiplies at the step
      want = want - lr * b
      np.testing.assert_allclose(w.numpy(), want, rtol=1e-6, atol=1e-7)

@needs(dtypes.float64, why="Adam and LAMB keep b^t in float64")
def test_lr_assign_changes_adam_steps():
  w = Tensor([1.0], requires_grad=True)
  opt = Adam([w], lr=0.1)
  with Context(TRAINING=1):
    for lr in (0.1, 0.0, 0.5):
      opt.lr.assign(Tensor([lr]))
      before = w.numpy()
      opt.zero_grad()
      (w * 3).sum().backward()
      opt.step()
      # constant gradient: |m_hat/sqrt(v_hat)| = 1 (up to the float32 bias correction, see ADAM_ATOL)
      np.testing.assert_allclose(w.numpy() - before, [-lr], rtol=3e-5, atol=1e-7)

@needs(dtypes.int64, why="BatchNorm counts batches in int64")
def test_non_grad_tensors_are_buffers():
  bn = nn.BatchNorm(3)
  opt = SGD(get_parameters(bn), lr=0.1)
  assert {id(p) for p in opt.params} == {id(bn.weight), id(bn.bias)}
  assert {id(bn.running_mean), id(bn.running_var), id(bn.num_batches_tracked)} <= {id(b) for b in opt.buffers}
  x = np.random.default_rng(0).uniform(-1, 2, (4, 3)).astype(np.float32)
  c = np.array([1.0, -2.0, 0.5])
  with Context(TRAINING=1):
    opt.zero_grad()
    (bn(Tensor(x)) * Tensor(f32(c))).sum().backward()
    opt.step()
  assert bn.running_mean.grad is None and bn.running_var.grad is None
  xd = x.astype(np.float64)
  xhat = (xd - xd.mean(0)) / np.sqrt(xd.var(0) + 1e-5)
  # running statistics follow the momentum rule only (a gradient step would have moved them elsewhere)
  np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * xd.mean(0), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * xd.var(0, ddof=1), rtol=1e-5, atol=1e-6)
  assert bn.num_batches_tracked.item() == 1
  np.testing.assert_allclose(bn.weight.numpy(), 1 - 0.1 * (c * xhat).sum(0), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(bn.bias.numpy(), -0.1 * c * 4, rtol=1e-5, atol=1e-6)

def test_unset_requires_grad_is_trained():
  w = Tensor([1.0, 2.0, 3.0])
  assert w.requires_grad is None
  opt = SGD([w], lr=0.5)
  assert w.requires_grad is True and any(p is w for p in opt.params)
  with Context(TRAINING=1):
    (w * Tensor([1.0, 0.0, -2.0])).sum().backward()
    opt.step()
  np.testing.assert_allclose(w.numpy(), [0.5, 2.0, 4.0])

def test_duplicate_params_step_once():
  w = Tensor([1.0], requires_grad=True)
  opt = SGD([w, w], lr=0.1)
  with Context(TRAINING=1):
    (w * 2).sum().backward()
    opt.step()
  np.testing.assert_allclose(w.numpy(), [0.8])

def test_optimizer_group():
  a, b = Tensor([1.0, 2.0], requires_grad=True), Tensor([[3.0], [-1.0]], requires_grad=True)
  o1, o2 = SGD([a], lr=0.1), SGD([b], lr=0.01, momentum=0.9)
  opt = OptimizerGroup(o1, o2)
  assert opt[0] is o1 and opt[1] is o2
  ca, cb = np.array([1.0, -3.0]), np.array([[2.0], [5.0]])
  wa, wb, mb = np.array([1.0, 2.0]), np.array([[3.0], [-1.0]]), 0.0
  with Context(TRAINING=1):
    for _ in range(2):
      opt.zero_grad()
      assert a.grad is None and b.grad is None
      ((a * Tensor(f32(ca))).sum() + (b * Tensor(f32(cb))).sum()).backward()
      opt.step()
      wa, mb = wa - 0.1 * ca, 0.9 * mb + cb
      wb = wb - 0.01 * mb
      np.testing.assert_allclose(a.numpy(), wa, rtol=1e-6)
      np.testing.assert_allclose(b.numpy(), wb, rtol=1e-6)

@needs(dtypes.float64, why="Adam and LAMB keep b^t in float64")
def test_mlp_training_loss_drops():
  Tensor.manual_seed(0)
  rng = np.random.default_rng(0)
  n = 32
  y = np.arange(n) % 2
  X = rng.normal(0, 0.5, (n, 2)) + np.where(y[:, None] == 1, [1.5, 1.5], [-1.5, -1.5])
  l1, l2 = nn.Linear(2, 8), nn.Linear(8, 2)
  opt = Adam(get_parameters([l1, l2]), lr=0.05)
  Xt, yt = Tensor(f32(X)), Tensor(y.astype(np.int32))
  losses = []
  with Context(TRAINING=1):
    for _ in range(50):
      opt.zero_grad()
      loss = l2(l1(Xt).relu()).sparse_categorical_crossentropy(yt)
      loss.backward()
      opt.step()
      losses.append(loss.item())
  assert np.isfinite(losses).all()
  assert losses[-1] < losses[0] / 5, f"loss {losses[0]:.4f} -> {losses[-1]:.4f}"
  pred = l2(l1(Xt).relu()).numpy().argmax(1)
  assert (pred == y).mean() == 1.0

# ---------------- cross-checks against torch.optim (only where torch is installed) ----------------

@pytest.mark.parametrize("name,ours,kw", [
  ("SGD", SGD, {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.1, "nesterov": True}),
  ("Adam", Adam, {"lr": 0.1}),
  ("AdamW", AdamW, {"lr": 0.1, "weight_decay": 0.3}),
])
def test_torch_crosscheck(name, ours, kw):
  torch = pytest.importorskip("torch")
  if name != "SGD": skip_refused(dtypes.float64)  # Adam and AdamW keep b^t in float64
  tw = [torch.tensor(f32(w), requires_grad=True) for w in W0]
  topt = getattr(torch.optim, name)(tw, **({**kw, "betas": (0.9, 0.999), "eps": 1e-8} if name != "SGD" else kw))
  want = []
  for k in range(3):
    topt.zero_grad()
    sum((w * torch.tensor(f32(C[k][i]))).sum() + 0.5 * Q[i] * ((w - torch.tensor(f32(T[i]))) ** 2).sum() for i, w in enumerate(tw)).backward()
    topt.step()
    want.append([w.detach().numpy().copy() for w in tw])
  compare(run_tg(lambda ps: ours(ps, **kw)), want, atol=ADAM_ATOL(kw["lr"]))

def test_step_leaves_each_gradient_in_a_buffer_of_its_own():
  """After step() every .grad is stored (its value as computed before the update), reading no other buffer: a lazy
  gradient kept the big intermediates of the backward pass alive until zero_grad (in the MNIST model, BatchNorm
  gradients held activations of 25-36 MiB)."""
  from tg.memory_plan import buffers_in
  rng = np.random.default_rng(0)
  x, b0 = f32(rng.standard_normal((64, 32, 8, 8))), f32(rng.standard_normal(32))
  b = Tensor(b0, requires_grad=True)
  with Context(TRAINING=1):
    opt = SGD([b], lr=0.5, momentum=0.9)  # (without momentum the gradient's reduction happened to be stored anyway)
    (Tensor(x) + b.reshape(1, 32, 1, 1)).relu().sum().backward()
    opt.step()
  assert [buf.nbytes for buf in buffers_in([b.grad.uop])] == [32 * 4]
  np.testing.assert_array_equal(b.grad.numpy(), (x + b0.reshape(1, 32, 1, 1) > 0).sum((0, 2, 3)))
