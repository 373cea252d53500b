"""What each rank runs for tests/tg/test_mpi.py: `mpirun -n 2 python3 tests/tg/mpi_worker.py OUT_DIR` saves this rank's
collective results and trained weights to OUT_DIR/rank<r>.npz. The test imports `train` to make the one-process
reference."""
import sys
import numpy as np
from tg import Tensor, TinyJit, Context, Device, dtypes, mpi
from tg.nn.optim import Adam, SGD, OptimizerGroup

KIND = Device.DEFAULT.split(":")[0]
LOCAL_DEVICES = (KIND, f"{KIND}:1")
STEPS, BATCH, FEATURES, CLASSES = 4, 16, 12, 4

def rank_array(r: int) -> np.ndarray:
  """The float32 array rank r contributes (the test rebuilds it for the reference sum)."""
  return np.random.default_rng(10 + r).standard_normal((4, 6)).astype(np.float32)

def rank_ints(r: int) -> tuple[np.ndarray, np.ndarray]:
  """int32 near the type's limits (the sum still fits) and int64 above float64's exact range."""
  return np.array([2**30 - 7 * r, -(2**30) + r, 3 * r], dtype=np.int32), np.array([2**60 + r, -(2**59) - 5 * r], dtype=np.int64)

def training_data() -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(0)
  return rng.standard_normal((STEPS, BATCH, FEATURES)).astype(np.float32), rng.integers(0, CLASSES, (STEPS, BATCH)).astype(np.int32)

def train(devices: tuple[str, ...] | None = None) -> list[np.ndarray]:
  """A two-layer net trained for STEPS steps (SGD with momentum on the first layer, Adam on the second), each global
  batch split between the ranks and, given devices, this rank's share split between them; the weights after."""
  rng = np.random.default_rng(1)
  w1, b1, w2, b2 = (Tensor(rng.standard_normal(s).astype(np.float32) * 0.5, requires_grad=True) for s in ((FEATURES, 16), (16,), (16, CLASSES), (CLASSES,)))
  params = [w1, b1, w2, b2]
  if devices:
    for p in params: p.shard_(devices)  # a copy on every local device
  opt = OptimizerGroup(SGD([w1, b1], lr=0.1, momentum=0.9), Adam([w2, b2], lr=0.02))

  @TinyJit
  @Context(TRAINING=1)
  def grads_step(x: Tensor, y: Tensor) -> list[Tensor]:
    opt.zero_grad()
    loss = (x @ w1 + b1).relu().matmul(w2).add(b2).sparse_categorical_crossentropy(y).backward()
    return [loss, *(p.grad for p in params)]

  @TinyJit
  @Context(TRAINING=1)
  def update_step() -> None: opt.step()

  xs, ys = training_data()
  for x, y in zip(xs, ys):
    x, y = mpi.rank_slice(Tensor(x)), mpi.rank_slice(Tensor(y))
    if devices: x, y = x.shard(devices, axis=0), y.shard(devices, axis=0)
    grads_step(x, y)
    mpi.allreduce_grads(params)
    update_step()
  return [p.numpy() for p in params]

def collectives(r: int) -> dict[str, np.ndarray]:
  i32, i64 = rank_ints(r)
  a = Tensor(rank_array(r))
  sharded = mpi.allreduce(a.shard(LOCAL_DEVICES, axis=1))
  replicated = Tensor(rank_array(r)).to(LOCAL_DEVICES)
  mpi.allreduce_(replicated, op="mean")
  out = {"sum": mpi.allreduce(a).numpy(), "max": mpi.allreduce(a, "max").numpy(), "min": mpi.allreduce(a, "min").numpy(),
         "half_mean": mpi.allreduce(Tensor(rank_array(r), dtype=dtypes.half), "mean").numpy(),
         "int32": mpi.allreduce(Tensor(i32, dtype=dtypes.int32)).numpy(), "int64": mpi.allreduce(Tensor(i64, dtype=dtypes.int64)).numpy(),
         "sharded_axis": np.array(sharded.uop.arg), "sharded_devices": np.array(sharded.device),
         **{f"sharded_part{k}": Tensor(p).numpy() for k, p in enumerate(sharded.uop.src)},
         **{f"replicated_part{k}": Tensor(p).numpy() for k, p in enumerate(replicated.uop.src)}}
  try: mpi.allreduce(Tensor.ones(2 + r))
  except RuntimeError as e: out["mismatch_error"] = np.array(str(e))
  return out

if __name__ == "__main__":
  r = mpi.rank()
  np.savez(f"{sys.argv[1]}/rank{r}.npz", world_size=np.array(mpi.world_size()), **collectives(r),
           **{f"plain{k}": w for k, w in enumerate(train())}, **{f"local_devices{k}": w for k, w in enumerate(train(LOCAL_DEVICES))})
