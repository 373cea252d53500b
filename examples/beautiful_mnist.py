"""Train a small convolutional network on MNIST with TinyJit (a tg port of the tinygrad docs' example).
Switches: BS (batch size, default 512), STEPS (default 70), MNIST_DIR (where the IDX files are; without it and without
network, tg's shipped 9,000-image MNIST subset is used), GPUS (train data-parallel on that many devices of the default
kind, e.g. GPUS=2 on a CPU: CPU:0 and CPU:1; the weights are copied to each, every batch is split between them).
Under MPI (`mpirun -n N --host a,b,... python3 examples/beautiful_mnist.py`, needs tg[mpi]) each rank trains on its share
of every batch (with GPUS, split again over its devices) and the gradients are averaged across ranks; every rank starts
from the same seed, so all hold the same weights. BatchNorm's batch statistics are each rank's own (as in PyTorch's
DistributedDataParallel); its running statistics are averaged across ranks every step."""
from typing import Callable
from tg import Tensor, TinyJit, nn, GlobalCounters, Context, Device, mpi
from tg.helpers import getenv, trange
from tg.nn.datasets import mnist

class Model:
  def __init__(self):
    self.layers: list[Callable[[Tensor], Tensor]] = [
      nn.Conv2d(1, 32, 5), Tensor.relu,
      nn.Conv2d(32, 32, 5), Tensor.relu,
      nn.BatchNorm(32), Tensor.max_pool2d,
      nn.Conv2d(32, 64, 3), Tensor.relu,
      nn.Conv2d(64, 64, 3), Tensor.relu,
      nn.BatchNorm(64), Tensor.max_pool2d,
      lambda x: x.flatten(1), nn.Linear(576, 10)]

  def __call__(self, x: Tensor) -> Tensor: return x.sequential(self.layers)

def make_train_step(model: Model, X: Tensor, Y: Tensor, bs: int, devices: tuple[str, ...] | None = None) -> Callable[[], Tensor]:
  """One jitted Adam step on a random batch of bs samples of (X, Y), split over `devices` when given (the model's
  weights must be on all of them) and, under MPI, over the ranks; returns the loss (scripts/bench_mnist.py times it)."""
  opt = nn.optim.Adam(nn.state.get_parameters(model))
  @Context(TRAINING=1)
  def forward_backward() -> Tensor:
    opt.zero_grad()
    samples = mpi.rank_slice(Tensor.randint(bs, high=X.shape[0]))  # the same draw on every rank: each takes its share
    x, y = X[samples], Y[samples]
    if devices: x, y = x.shard(devices, axis=0), y.shard(devices, axis=0)
    return model(x).sparse_categorical_crossentropy(y).backward()

  @TinyJit
  @Context(TRAINING=1)
  def train_step() -> Tensor:
    loss = forward_backward()
    opt.step()
    return loss
  return train_step if mpi.world_size() == 1 else make_mpi_train_step(opt, forward_backward)

def make_mpi_train_step(opt: nn.optim.Optimizer, forward_backward: Callable[[], Tensor]) -> Callable[[], Tensor]:
  """The step in two jitted halves with the gradients averaged across ranks between them (on the host, so outside a
  JIT); the averages are written into the gradients' own buffers, which the second half reads."""
  running_stats = [b for b in opt.buffers if b.is_floating_point()]
  @TinyJit  # returns the buffers too, so the running statistics the forward pass updated are written in this half
  def grads_step() -> list[Tensor]: return [forward_backward(), *(p.grad for p in opt.params), *opt.buffers]
  @TinyJit
  @Context(TRAINING=1)
  def update_step() -> None: opt.step()
  def train_step() -> Tensor:
    loss = grads_step()[0]
    mpi.allreduce_grads(opt.params)
    mpi.allreduce_(*running_stats, op="mean")  # so every rank keeps the same model
    update_step()
    return loss
  return train_step

if __name__ == "__main__":
  X_train, Y_train, X_test, Y_test = mnist()
  model = Model()
  gpus = getenv("GPUS", 1)
  devices = tuple(f"{Device.DEFAULT}:{i}" for i in range(gpus)) if gpus > 1 else None
  if devices:
    for p in nn.state.get_parameters(model): p.shard_(devices)  # a copy of every weight on every device
    if X_test.shape[0] % gpus == 0: X_test, Y_test = X_test.shard(devices, axis=0), Y_test.shard(devices, axis=0)
  train_step = make_train_step(model, X_train, Y_train, getenv("BS", 512), devices)

  @TinyJit
  def get_test_acc() -> Tensor: return (model(X_test).argmax(axis=1) == Y_test).mean() * 100

  test_acc = float("nan")
  for i in (t := trange(getenv("STEPS", 70), disable=mpi.rank() != 0)):  # rank 0 reports
    GlobalCounters.reset()  # so DEBUG=2 shows the time of this step alone
    loss = train_step()
    if i % 10 == 9: test_acc = get_test_acc().item()
    t.set_description(f"loss: {loss.item():6.2f} test_accuracy: {test_acc:5.2f}%")
