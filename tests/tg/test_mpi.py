"""tg.mpi: collectives across MPI ranks. Two ranks on this machine (`mpirun -n 2`, tests/tg/mpi_worker.py) against
numpy sums of what each rank contributed, and data-parallel training on two ranks (optionally each on two local
devices) against one process training on the doubled batch. One process (no launcher): a world of one rank."""
import os, pathlib, shutil, subprocess, sys
import importlib.util
import numpy as np
import pytest
from tg import Tensor, TinyJit, dtypes, mpi
from tests.tg import mpi_worker

REPO = pathlib.Path(__file__).resolve().parents[2]
INSTALL = "needs Open MPI's mpirun and mpi4py: apt-get install openmpi-bin libopenmpi-dev; pip install -e '.[mpi]'"

@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict[str, np.ndarray]]:
  """What each of two ranks saved, run once for the module."""
  if shutil.which("mpirun") is None or importlib.util.find_spec("mpi4py") is None:
    if os.environ.get("CI"): pytest.fail(f"CI must run the MPI tests; {INSTALL}")
    pytest.skip(INSTALL)
  out = tmp_path_factory.mktemp("mpi")
  env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])), "NUM_CPU_THREADS": "1",
         "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",  # CI runs as root
         "OMPI_MCA_btl_vader_single_copy_mechanism": "none"}  # containers often forbid the cross-process reads it would use
  cmd = ["mpirun", "-n", "2", "--oversubscribe", sys.executable, str(REPO / "tests/tg/mpi_worker.py"), str(out)]
  done = subprocess.run(cmd, env=env, cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}"
  return [dict(np.load(out / f"rank{r}.npz")) for r in range(2)]

def test_two_ranks_see_each_other(ranks):
  assert [int(r["world_size"]) for r in ranks] == [2, 2]

def test_allreduce_against_numpy(ranks):
  a = [mpi_worker.rank_array(r) for r in range(2)]
  i32, i64 = zip(*(mpi_worker.rank_ints(r) for r in range(2)))
  for got in ranks:
    np.testing.assert_allclose(got["sum"], a[0] + a[1], rtol=1e-6)
    np.testing.assert_array_equal(got["max"], np.maximum(a[0], a[1]))
    np.testing.assert_array_equal(got["min"], np.minimum(a[0], a[1]))
    np.testing.assert_allclose(got["half_mean"], (a[0].astype(np.float16).astype(np.float32) + a[1].astype(np.float16)) / 2, rtol=1e-3)
    assert got["half_mean"].dtype == np.float16
    np.testing.assert_array_equal(got["int32"], i32[0] + i32[1])  # integers exact
    np.testing.assert_array_equal(got["int64"], i64[0] + i64[1])

def test_allreduce_keeps_multi_device_layout(ranks):
  a = [mpi_worker.rank_array(r) for r in range(2)]
  total = a[0] + a[1]
  for got in ranks:
    assert int(got["sharded_axis"]) == 1 and tuple(got["sharded_devices"]) == mpi_worker.LOCAL_DEVICES
    np.testing.assert_allclose(got["sharded_part0"], total[:, :3], rtol=1e-6)  # each device keeps its half of axis 1
    np.testing.assert_allclose(got["sharded_part1"], total[:, 3:], rtol=1e-6)
    for k in range(2): np.testing.assert_allclose(got[f"replicated_part{k}"], total / 2, rtol=1e-6)  # every local copy

def test_mismatched_calls_raise_on_every_rank(ranks):
  for r, got in enumerate(ranks): assert "different tensors" in str(got["mismatch_error"]) and f"({2 + r},)" in str(got["mismatch_error"])

@pytest.fixture(scope="module")
def reference() -> list[np.ndarray]: return mpi_worker.train()  # this process: one rank, every step on the whole global batch

@pytest.mark.parametrize("run", ["plain", "local_devices"])
def test_two_rank_training_equals_one_process_with_the_doubled_batch(ranks, reference, run):
  start = np.random.default_rng(1).standard_normal((mpi_worker.FEATURES, 16)).astype(np.float32) * 0.5
  assert np.abs(reference[0] - start).max() > 0.01  # the steps moved the weights
  for got in ranks:
    for k, want in enumerate(reference): np.testing.assert_allclose(got[f"{run}{k}"], want, atol=1e-5, rtol=1e-5)

@pytest.fixture
def one_process(monkeypatch):
  """No launcher in the environment, whatever started pytest."""
  for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"): monkeypatch.delenv(v, raising=False)
  mpi._mpi.cache_clear()
  yield
  mpi._mpi.cache_clear()

def test_one_process_is_a_world_of_one(one_process):
  assert (mpi.world_size(), mpi.rank()) == (1, 0)
  t = Tensor([1.5, -2.0, 3.0])
  assert mpi.allreduce(t) is t and mpi.allreduce(t, "mean") is t
  mpi.allreduce_(t, op="max")
  np.testing.assert_array_equal(t.numpy(), [1.5, -2.0, 3.0])
  np.testing.assert_array_equal(mpi.rank_slice(Tensor(np.arange(6).reshape(3, 2))).numpy(), np.arange(6).reshape(3, 2))

def test_errors_name_the_problem(one_process):
  with pytest.raises(ValueError, match="one of sum, max, min, mean"): mpi.allreduce(Tensor([1.0]), "prod")
  with pytest.raises(TypeError, match="bool"): mpi.allreduce(Tensor([True]))
  with pytest.raises(TypeError, match="'mean' needs a float"): mpi.allreduce(Tensor([1], dtype=dtypes.int32), "mean")
  @TinyJit
  def step(x: Tensor) -> Tensor: return mpi.allreduce(x * 2)
  x = Tensor([1.0]).realize()
  step(x)
  with pytest.raises(RuntimeError, match="inside a TinyJit"): step(x)

def test_launched_without_mpi4py_says_what_to_install(one_process, monkeypatch):
  monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
  monkeypatch.setitem(sys.modules, "mpi4py", None)  # import fails
  with pytest.raises(RuntimeError, match=r"one of 2 MPI ranks.*pip install 'tg\[mpi\]'"): mpi.world_size()

def test_importing_tg_never_imports_mpi4py():
  code = "import sys, tg, tg.mpi; tg.mpi.allreduce(tg.Tensor([1.0])); print('mpi4py' in sys.modules)"
  env = {k: v for k, v in os.environ.items() if k not in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")}
  done = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
  assert done.stdout.strip() == "False", done.stderr
