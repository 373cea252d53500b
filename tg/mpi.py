"""Data parallel across processes and hosts through MPI (mpi4py). Each rank, one process started by `mpirun`, runs tg
on its own devices; the collectives here combine a tensor across ranks by way of host memory: realized, read into
numpy, combined with MPI's Allreduce, and copied back onto the tensor's device(s). A process that no MPI launcher
started is a world of one rank where every collective is the identity; mpi4py is imported only when a launcher
started several ranks (importing it initializes MPI)."""
from __future__ import annotations
import functools, os, zlib
from typing import Any
import numpy as np
from ir.dtype import dtypes
from ir.ops import Ops
from ir.uop import UOp
from tg.realize import capture_stack
from tg.tensor import Tensor

# what MPI launchers put in each rank's environment: Open MPI's mpirun, and the PMI of MPICH's and Intel MPI's Hydra
_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
OPS = ("sum", "max", "min", "mean")

def launched_size() -> int:
  """The number of ranks the MPI launcher started, from the environment (1 outside one)."""
  return next((int(os.environ[v]) for v in _SIZE_VARS if v in os.environ), 1)

@functools.cache
def _mpi() -> Any:
  """mpi4py's MPI module when a launcher started several ranks, else None."""
  if launched_size() == 1: return None
  try: from mpi4py import MPI
  except ImportError as e:
    raise RuntimeError(f"started as one of {launched_size()} MPI ranks, but mpi4py can't be imported ({e}); "
                       "install it with pip install 'tg[mpi]' (and Open MPI, e.g. apt-get install openmpi-bin libopenmpi-dev)") from None
  return MPI

def world_size() -> int: return 1 if (mpi := _mpi()) is None else mpi.COMM_WORLD.Get_size()
def rank() -> int: return 0 if (mpi := _mpi()) is None else mpi.COMM_WORLD.Get_rank()

def rank_slice(t: Tensor, axis: int = 0) -> Tensor:
  """This rank's share of t (e.g. of a global batch): the rank()-th of world_size() equal parts along axis."""
  n, size = t.shape[axis], world_size()
  if size == 1: return t
  if n % size: raise ValueError(f"can't split axis {axis} of shape {t.shape} evenly over {size} MPI ranks")
  return t.split(n // size, axis)[rank()]

def _check(t: Tensor, op: str) -> None:
  if op not in OPS: raise ValueError(f"allreduce op must be one of {', '.join(OPS)}, got {op!r}")
  if not (dtypes.is_float(t.dtype) or dtypes.is_int(t.dtype)) or t.dtype == dtypes.bool:
    raise TypeError(f"allreduce combines float and integer tensors, not {t.dtype}")
  if op == "mean" and not dtypes.is_float(t.dtype): raise TypeError(f"allreduce op 'mean' needs a float tensor, got {t.dtype}")
  if capture_stack: raise RuntimeError("mpi collectives can't run inside a TinyJit (they exchange data on the host); call them between jitted functions")

def _check_same_everywhere(t: Tensor, op: str) -> None:
  """Raise on every rank, rather than mix unrelated data or hang, when the ranks' calls don't match."""
  mpi, what = _mpi(), f"shape {t.shape} {t.dtype} op {op!r}"
  sig = zlib.crc32(what.encode())
  both = np.array([sig, -sig], dtype=np.int64)
  mpi.COMM_WORLD.Allreduce(mpi.IN_PLACE, both, op=mpi.MAX)
  if both[0] != -both[1]: raise RuntimeError(f"allreduce: the ranks passed different tensors or ops (this rank: {what})")

def _reduced_on_host(t: Tensor, op: str) -> np.ndarray:
  """t combined over every rank, as a numpy array (floats narrower than 32 bits combined in float32)."""
  _check_same_everywhere(t, op)
  mpi = _mpi()
  data = t.numpy()  # a multi-device tensor reads its first device's copy: local copies are identical
  if data.dtype.kind == "f" and data.itemsize < 4: data = data.astype(np.float32)
  out = np.empty_like(data)
  mpi.COMM_WORLD.Allreduce(data, out, op={"sum": mpi.SUM, "mean": mpi.SUM, "max": mpi.MAX, "min": mpi.MIN}[op])
  if op == "mean": out /= mpi.COMM_WORLD.Get_size()
  return out

def _placed_like(data: np.ndarray, t: Tensor) -> Tensor:
  """data as a tensor of t's dtype on t's device(s), a multi-device one split along t's axis. Each device's part is
  copied in from the host: no copy between devices reads a temporary that may be freed before that copy runs."""
  if isinstance(t.device, str): return Tensor(data, device=t.device, dtype=t.dtype)
  axis = t.uop.arg if t.uop.op is Ops.MULTI else None
  pieces = [data] * len(t.device) if axis is None else np.split(data, len(t.device), axis)
  return Tensor(UOp(Ops.MULTI, t.dtype, tuple(Tensor(p, device=d, dtype=t.dtype).uop for p, d in zip(pieces, t.device)), axis))

def allreduce(t: Tensor, op: str = "sum") -> Tensor:
  """t combined over every rank (op: sum, max, min, or mean for floats), a new realized tensor on t's device(s); a
  multi-device tensor keeps its devices and split axis, and each local copy of a replicated one gets the result.
  Every rank must call it with a tensor of the same shape and dtype. One rank: t itself."""
  _check(t, op)
  if _mpi() is None: return t
  t.realize()
  return _placed_like(_reduced_on_host(t, op), t).realize()

def allreduce_(*tensors: Tensor, op: str = "sum") -> None:
  """allreduce written into each tensor's own memory, so kernels that captured those buffers (a TinyJit) read the
  results."""
  for t in tensors: _check(t, op)
  if _mpi() is None: return
  Tensor.realize_all(*tensors)
  for t in tensors: t.assign(_placed_like(_reduced_on_host(t, op), t))
  Tensor.realize_all(*tensors)

def allreduce_grads(params: list[Tensor], average: bool = True) -> None:
  """Each parameter's .grad becomes the mean (average=False: the sum) of its gradients on all ranks, in place: call it
  between backward() and the optimizer's step(). With each rank's loss a mean over its equal share of a global batch,
  the averaged gradients are those of the whole batch."""
  allreduce_(*(p.grad for p in params if p.grad is not None), op="mean" if average else "sum")
