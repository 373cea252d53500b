"""Movement, indexing and assignment ops: forward values against numpy (float64) and gradients against finite
differences of the same numpy expression (see opcheck.check_op)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from ir.helpers import prod
from tg import Tensor, dtypes
from tg.reduce import RANK_BLOCK
from tg.sorted_scatter import segment_reduce
from tests.tg.opcheck import check_op, needs, skip_refused

NUMPY_INDICES = needs(dtypes.int64, why="the indices are numpy's int64 arrays")

def idx(a) -> Tensor: return Tensor(np.asarray(a, dtype=np.int32))

# ---------------- primitives ----------------
def test_reshape_minus_one():
  check_op(lambda a: a.reshape(2, -1, 3), lambda a: a.reshape(2, -1, 3), [(4, 3, 2)])
  check_op(lambda a: a.reshape(-1), lambda a: a.reshape(-1), [(2, 3)])
  check_op(lambda a: a.reshape((6, -1)), lambda a: a.reshape(6, -1), [(3, 4)])

def test_view():
  check_op(lambda a: a.view(4, 3) * 2, lambda a: a.reshape(4, 3) * 2, [(2, 6)])

def test_permute_negative_dims():
  check_op(lambda a: a.permute(-1, 0, -2), lambda a: np.transpose(a, (2, 0, 1)), [(2, 3, 4)])
  check_op(lambda a: a.permute((1, 2, 0)), lambda a: np.transpose(a, (1, 2, 0)), [(2, 3, 4)])

def test_expand():
  check_op(lambda a: a.expand(2, -1, 4), lambda a: np.broadcast_to(a, (2, 3, 4)), [(3, 1)])
  check_op(lambda a: a.expand(3, 2, 5), lambda a: np.broadcast_to(a, (3, 2, 5)), [(5,)])
  check_op(lambda a: a.expand((-1, 4)), lambda a: np.broadcast_to(a, (3, 4)), [(3, 1)])

# ---------------- pad ----------------
def test_pad_flat_torch_order():
  # (left, right) of the last dim, then (top, bottom) of the one before
  check_op(lambda a: a.pad((1, 2, 0, 1)), lambda a: np.pad(a, ((0, 1), (1, 2))), [(3, 4)])
  check_op(lambda a: a.pad((2, 1)), lambda a: np.pad(a, ((0, 0), (0, 0), (2, 1))), [(2, 3, 2)])

def test_pad_per_dim_pairs():
  check_op(lambda a: a.pad(((1, 0), None, (2, 1))), lambda a: np.pad(a, ((1, 0), (0, 0), (2, 1))), [(2, 3, 2)])
  check_op(lambda a: a.pad([(0, 2), (3, 0)]), lambda a: np.pad(a, ((0, 2), (3, 0))), [(2, 2)])

def test_pad_negative_crops():
  check_op(lambda a: a.pad((-1, 2, 1, -2)), lambda a: np.pad(a[:-2, 1:], ((1, 0), (0, 2))), [(4, 5)])
  check_op(lambda a: a.pad(((-1, -1), (0, -2))), lambda a: a[1:-1, :-2], [(4, 5)])

def test_pad_value():
  check_op(lambda a: a.pad((1, 1, 2, 0), value=2.5), lambda a: np.pad(a, ((2, 0), (1, 1)), constant_values=2.5), [(2, 3)])
  check_op(lambda a: a.pad(((1, 2),), value=-7.0), lambda a: np.pad(a, ((1, 2),), constant_values=-7.0), [(4,)])

NP_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}

@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes_1d(mode):
  check_op(lambda a: a.pad((2, 3), mode=mode), lambda a: np.pad(a, ((2, 3),), mode=NP_MODE[mode]), [(5,)])

@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes_2d(mode):
  check_op(lambda a: a.pad((1, 2, 2, 1), mode=mode), lambda a: np.pad(a, ((2, 1), (1, 2)), mode=NP_MODE[mode]), [(4, 3)])

@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes_3d(mode):
  check_op(lambda a: a.pad((1, 0, 0, 2, 1, 1), mode=mode), lambda a: np.pad(a, ((1, 1), (0, 2), (1, 0)), mode=NP_MODE[mode]), [(3, 3, 4)])

def test_pad_errors_are_pytorchs_types():
  x = Tensor(np.zeros(3, np.float32))
  with pytest.raises(RuntimeError, match="reflect"): x.pad((3, 0), mode="reflect")
  with pytest.raises(RuntimeError, match="circular"): x.pad((0, 4), mode="circular")
  with pytest.raises(NotImplementedError, match="'wrap'"): x.pad((1, 1), mode="wrap")
  with pytest.raises(RuntimeError): x.pad((1, 1, 1))
  with pytest.raises(RuntimeError): x.pad(((1, 1), (0, 0)))

# ---------------- shrink / flip / transpose ----------------
def test_shrink():
  check_op(lambda a: a.shrink(((1, 3), None, (0, 2))), lambda a: a[1:3, :, 0:2], [(4, 2, 3)])

def test_flip():
  check_op(lambda a: a.flip(0, 2), lambda a: a[::-1, :, ::-1], [(2, 3, 4)])
  check_op(lambda a: a.flip(-1), lambda a: a[..., ::-1], [(2, 3)])
  check_op(lambda a: a.flip((0, 1, 2)), lambda a: a[::-1, ::-1, ::-1], [(2, 3, 2)])

def test_transpose():
  check_op(lambda a: a.transpose(0, 2), lambda a: np.swapaxes(a, 0, 2), [(2, 3, 4)])
  check_op(lambda a: a.transpose(-1, -2), lambda a: np.swapaxes(a, -1, -2), [(2, 3, 4)])

def test_T():
  check_op(lambda a: a.T, lambda a: a.T, [(3, 5)])

# ---------------- squeeze / unsqueeze / flatten ----------------
def test_squeeze_all():
  check_op(lambda a: a.squeeze(), lambda a: np.squeeze(a), [(1, 3, 1, 2)])

def test_squeeze_one_dim():
  check_op(lambda a: a.squeeze(2), lambda a: np.squeeze(a, 2), [(1, 3, 1, 2)])
  check_op(lambda a: a.squeeze(-4), lambda a: np.squeeze(a, 0), [(1, 3, 1, 2)])
  # a dim that isn't 1 is left alone
  check_op(lambda a: a.squeeze(1), lambda a: a, [(1, 3, 1, 2)])

def test_squeeze_tuple_of_dims():
  # PyTorch 2: a tuple of dims; those of size 1 go, the others stay
  check_op(lambda a: a.squeeze((0, 2)), lambda a: a.reshape(3, 2), [(1, 3, 1, 2)])
  check_op(lambda a: a.squeeze([0, 1, -1]), lambda a: a.reshape(3, 1, 2), [(1, 3, 1, 2)])
  check_op(lambda a: a.squeeze(()), lambda a: a, [(1, 3)])
  with pytest.raises(IndexError): Tensor.zeros(1, 3).squeeze((0, 2))

def test_unsqueeze_negative():
  check_op(lambda a: a.unsqueeze(-1), lambda a: a[..., None], [(2, 3)])
  check_op(lambda a: a.unsqueeze(-3), lambda a: a[None], [(2, 3)])
  check_op(lambda a: a.unsqueeze(1), lambda a: a[:, None], [(2, 3)])

def test_flatten():
  check_op(lambda a: a.flatten(), lambda a: a.reshape(-1), [(2, 3, 4)])
  check_op(lambda a: a.flatten(1, 2), lambda a: a.reshape(2, 12, 1), [(2, 3, 4, 1)])
  check_op(lambda a: a.flatten(-3, -2), lambda a: a.reshape(6, 4), [(2, 3, 4)])

def test_unflatten():
  check_op(lambda a: a.unflatten(1, (2, 3)), lambda a: a.reshape(2, 2, 3, 2), [(2, 6, 2)])
  check_op(lambda a: a.unflatten(-1, (3, -1)), lambda a: a.reshape(2, 3, 2), [(2, 6)])

# ---------------- repeat / roll ----------------
def test_repeat():
  check_op(lambda a: a.repeat(2, 3), lambda a: np.tile(a, (2, 3)), [(2, 3)])
  check_op(lambda a: a.repeat(2, 1, 3), lambda a: np.tile(a, (2, 1, 3)), [(2, 3)])
  check_op(lambda a: a.repeat((2, 1, 3)), lambda a: np.tile(a, (2, 1, 3)), [(2, 3)])
  check_op(lambda a: a.repeat([1, 2]), lambda a: np.tile(a, (1, 2)), [(2, 3)])

@pytest.mark.parametrize("op,args", [("reshape", (2, -1)), ("permute", (0, 2, 1)), ("flip", (0, 1)), ("repeat", (1, 2, 1)),
                                     ("expand", (2, 2, 3, 4)), ("view", (4, 6)), ("squeeze", (0, 1))])
def test_shape_and_axes_as_tuple_list_or_varargs(op, args):
  x = np.random.default_rng(20).uniform(-2, 2, (2, 3, 4)).astype(np.float32)
  if op == "squeeze": x = x.reshape(1, 2, 3, 4)[:, :1]   # (1, 1, 3, 4): squeeze takes a tuple, not varargs (PyTorch)
  ref = getattr(Tensor(x), op)(tuple(args)).numpy()
  np.testing.assert_array_equal(getattr(Tensor(x), op)(list(args)).numpy(), ref)
  if op != "squeeze": np.testing.assert_array_equal(getattr(Tensor(x), op)(*args).numpy(), ref)
  expected = {"reshape": lambda: x.reshape(2, -1), "permute": lambda: x.transpose(0, 2, 1), "flip": lambda: x[::-1, ::-1],
              "repeat": lambda: np.tile(x, (1, 2, 1)), "expand": lambda: np.broadcast_to(x, (2, 2, 3, 4)), "view": lambda: x.reshape(4, 6),
              "squeeze": lambda: x.reshape(3, 4)}[op]
  np.testing.assert_array_equal(ref, expected())

def test_repeat_interleave():
  check_op(lambda a: a.repeat_interleave(2), lambda a: np.repeat(a.reshape(-1), 2), [(2, 3)])
  check_op(lambda a: a.repeat_interleave(3, dim=1), lambda a: np.repeat(a, 3, axis=1), [(2, 3)])
  check_op(lambda a: a.repeat_interleave(2, dim=-3), lambda a: np.repeat(a, 2, axis=0), [(2, 3, 2)])

def test_roll():
  check_op(lambda a: a.roll(2, 1), lambda a: np.roll(a, 2, 1), [(3, 5)])
  check_op(lambda a: a.roll(-1, 0), lambda a: np.roll(a, -1, 0), [(3, 5)])
  check_op(lambda a: a.roll((1, -7), (0, -1)), lambda a: np.roll(a, (1, -7), (0, -1)), [(3, 5)])
  check_op(lambda a: a.roll(4), lambda a: np.roll(a, 4), [(3, 5)])
  check_op(lambda a: a.roll(-3, dims=None), lambda a: np.roll(a, -3), [(2, 2, 2)])

# ---------------- cat / stack / split / chunk / meshgrid ----------------
def test_cat_three_dim1():
  check_op(lambda a, b, c: a.cat(b, c, dim=1), lambda a, b, c: np.concatenate([a, b, c], 1), [(2, 1, 3), (2, 2, 3), (2, 3, 3)])
  check_op(lambda a, b: a.cat(b, dim=-1), lambda a, b: np.concatenate([a, b], -1), [(2, 1), (2, 3)])
  check_op(lambda a, b: a.cat(b), lambda a, b: np.concatenate([a, b], 0), [(1, 3), (2, 3)])

def test_cat_mismatch_raises():
  with pytest.raises(ValueError): Tensor.zeros(2, 3).cat(Tensor.zeros(3, 3), dim=1)

def test_stack():
  check_op(lambda a, b, c: a.stack(b, c, dim=0), lambda a, b, c: np.stack([a, b, c], 0), [(2, 3)] * 3)
  check_op(lambda a, b: a.stack(b, dim=-1), lambda a, b: np.stack([a, b], -1), [(2, 3)] * 2)
  check_op(lambda a, b: a.stack(b, dim=1), lambda a, b: np.stack([a, b], 1), [(2, 3)] * 2)

def test_stack_and_cat_take_a_list():
  # tinygrad's Tensor.stack([a, b], dim=1) and PyTorch's torch.cat([a, b]) forms, next to the varargs ones
  check_op(lambda a, b: Tensor.stack([a, b], dim=1), lambda a, b: np.stack([a, b], 1), [(2, 3)] * 2)
  check_op(lambda a, b, c: Tensor.stack((a, b, c)), lambda a, b, c: np.stack([a, b, c]), [(2, 3)] * 3)
  check_op(lambda a, b, c: Tensor.stack(a, b, c, dim=-1), lambda a, b, c: np.stack([a, b, c], -1), [(3,)] * 3)
  check_op(lambda a, b, c: a.stack([b, c], dim=2), lambda a, b, c: np.stack([a, b, c], 2), [(2, 3)] * 3)
  check_op(lambda a, b: Tensor.cat([a, b], dim=1), lambda a, b: np.concatenate([a, b], 1), [(2, 1), (2, 3)])
  check_op(lambda a: Tensor.stack([a]), lambda a: a[None], [(2, 2)])
  with pytest.raises(RuntimeError): Tensor.stack([])

def test_split_int():
  x = Tensor(np.zeros((2, 7), np.float32))
  assert [p.shape for p in x.split(3, dim=1)] == [(2, 3), (2, 3), (2, 1)]
  for k, (lo, hi) in enumerate([(0, 3), (3, 6), (6, 7)]):
    check_op(lambda a: a.split(3, dim=1)[k] * 2, lambda a: a[:, lo:hi] * 2, [(2, 7)])

def test_split_list():
  x = Tensor(np.zeros((6, 2), np.float32))
  assert [p.shape for p in x.split([1, 4, 1])] == [(1, 2), (4, 2), (1, 2)]
  for k, (lo, hi) in enumerate([(0, 1), (1, 5), (5, 6)]):
    check_op(lambda a: a.split([1, 4, 1])[k], lambda a: a[lo:hi], [(6, 2)])
  with pytest.raises(ValueError): x.split([2, 2])

def test_chunk_uneven():
  # like torch.chunk: pieces of ceil(n / chunks), the last one smaller
  x = Tensor(np.zeros((3, 7), np.float32))
  assert [p.shape for p in x.chunk(3, dim=-1)] == [(3, 3), (3, 3), (3, 1)]
  assert [p.shape for p in Tensor.zeros(6).chunk(4)] == [(2,), (2,), (2,)]
  for k, (lo, hi) in enumerate([(0, 3), (3, 6), (6, 7)]):
    check_op(lambda a: a.chunk(3, dim=-1)[k], lambda a: a[:, lo:hi], [(3, 7)])

def np_unfold(a, dim, size, step):
  """PyTorch's Tensor.unfold: dim becomes the window starts 0, step, ...; each window's elements go on a new last axis."""
  dim %= a.ndim
  windows = np.lib.stride_tricks.sliding_window_view(a, size, axis=dim)
  return np.take(windows, range(0, windows.shape[dim], step), axis=dim)

@pytest.mark.parametrize("shape,dim,size,step", [((10,), 0, 3, 2), ((8,), 0, 2, 2), ((3, 7, 2), 1, 3, 1), ((3, 3, 5), -1, 2, 3),
                                                 ((2, 5), 0, 2, 1), ((4, 6), 1, 6, 1), ((5, 2), 0, 1, 4), ((4, 3), 1, 0, 2)])
def test_unfold(shape, dim, size, step):
  out = check_op(lambda a: a.unfold(dim, size, step), lambda a: np_unfold(a, dim, size, step), [shape])
  n = shape[dim]
  assert out.shape == tuple((n - size) // step + 1 if i == dim % len(shape) else s for i, s in enumerate(shape)) + (size,)

def test_unfold_hand_computed_and_errors():
  # the example of PyTorch's documentation: torch.arange(1., 8).unfold(0, 2, 2)
  np.testing.assert_array_equal(Tensor(np.arange(1, 8, dtype=np.float32)).unfold(0, 2, 2).numpy(), [[1, 2], [3, 4], [5, 6]])
  assert Tensor(2.5).unfold(0, 1, 1).numpy().tolist() == [2.5]
  x = Tensor.zeros(3, 4)
  with pytest.raises(RuntimeError): x.unfold(1, 5, 1)
  with pytest.raises(RuntimeError): x.unfold(1, -1, 1)
  with pytest.raises(RuntimeError): x.unfold(0, 2, 0)
  with pytest.raises(IndexError): x.unfold(2, 1, 1)

@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing):
  # all outputs stacked, so that every input reaches the result
  check_op(lambda a, b, c: Tensor.stack(*a.meshgrid(b, c, indexing=indexing)),
           lambda a, b, c: np.stack(np.meshgrid(a, b, c, indexing=indexing)), [(2,), (3,), (4,)])
  check_op(lambda a, b: Tensor.stack(*a.meshgrid(b, indexing=indexing)), lambda a, b: np.stack(np.meshgrid(a, b, indexing=indexing)), [(3,), (5,)])

@needs(dtypes.float64, why="numpy's float64 inputs")
@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_shapes(indexing):
  a, b, c = np.arange(2.0), np.arange(3.0), np.arange(4.0)
  got = Tensor(a).meshgrid(Tensor(b), Tensor(c), indexing=indexing)
  assert [g.shape for g in got] == [r.shape for r in np.meshgrid(a, b, c, indexing=indexing)]
  got = Tensor(a).meshgrid(Tensor(b), indexing=indexing)
  assert [g.shape for g in got] == [r.shape for r in np.meshgrid(a, b, indexing=indexing)]

# ---------------- gather / scatter ----------------
@NUMPY_INDICES
def test_gather():
  index = np.array([[0, 2, 2, 1], [3, 0, 0, 0], [1, 1, 3, 2]])
  check_op(lambda a, i: a.gather(1, i), lambda a, i: np.take_along_axis(a, i, 1), inputs=[np.random.default_rng(0).uniform(-2, 2, (3, 4)), index])
  index0 = np.array([[2, 0, 1, 2], [0, 0, 2, 1]])  # smaller than the input in dim 0
  check_op(lambda a, i: a.gather(0, i), lambda a, i: np.take_along_axis(a, i, 0), inputs=[np.random.default_rng(1).uniform(-2, 2, (3, 4)), index0])
  # index smaller than the input in a non-gather dim
  index2 = np.array([[[1, 0], [0, 1]]])
  check_op(lambda a, i: a.gather(-1, i), lambda a, i: np.take_along_axis(a[:1, :2], i, -1), inputs=[np.random.default_rng(2).uniform(-2, 2, (2, 3, 2)), index2])

def np_scatter_reduce(x, dim, index, src, reduce, include_self=True):
  """Reference following torch.Tensor.scatter_reduce_: every position hit by the index collects its sources (negative
  indices count from the end; tg's rule for the others outside the axis: they write nothing)."""
  out = x.copy()
  groups: dict = {}
  for pos in np.ndindex(index.shape):
    target = list(pos)
    target[dim] = index[pos] + x.shape[dim] if index[pos] < 0 else index[pos]
    if target[dim] < x.shape[dim]: groups.setdefault(tuple(target), []).append(src[pos])
  for target, vals in groups.items():
    vals = list(vals) + ([x[target]] if include_self else [])
    if reduce == "sum": out[target] = np.sum(vals)
    elif reduce == "prod": out[target] = np.prod(vals)
    elif reduce == "mean": out[target] = np.mean(vals)
    elif reduce == "amax": out[target] = np.max(vals)
    elif reduce == "amin": out[target] = np.min(vals)
    elif reduce == "replace": out[target] = vals[-1] if not include_self else vals[-2]
  return out

@pytest.fixture
def sorted_scatters(monkeypatch):
  """Every scatter (and gather gradient) goes through sorted indices, however small."""
  import tg.sorted_scatter
  monkeypatch.setattr(tg.sorted_scatter, "SORTED_SCATTER_MIN", 1)
  monkeypatch.setattr(tg.sorted_scatter, "SORTED_STEP_TERMS", 0)

@pytest.fixture(params=["one-hot", "sorted"])
def scatter_form(request):
  """Each scatter test runs through one-hot masks (these sizes' own choice) and through sorted indices (forced)."""
  if request.param == "sorted": request.getfixturevalue("sorted_scatters")
  return request.param

@NUMPY_INDICES
def test_scatter_plain(scatter_form):
  # no two sources hit the same position (which torch leaves undefined)
  index = np.array([[1, 0, 2], [2, 1, 0]])
  ref = lambda x, i, s: np_scatter_reduce(x, 0, i, s, "replace", include_self=False)
  check_op(lambda x, i, s: x.scatter(0, i, s), ref, inputs=[*[np.random.default_rng(3).uniform(-2, 2, (3, 3))], index, np.random.default_rng(4).uniform(-2, 2, (2, 3))])
  index1 = np.array([[3, 0], [1, 2], [0, 3]])
  ref1 = lambda x, i, s: np_scatter_reduce(x, 1, i, s, "replace", include_self=False)
  check_op(lambda x, i, s: x.scatter(1, i, s), ref1, inputs=[np.random.default_rng(5).uniform(-2, 2, (3, 4)), index1, np.random.default_rng(6).uniform(-2, 2, (3, 3))])

@NUMPY_INDICES
def test_scatter_scalar_src():
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  index = np.array([[0, 3], [1, 1], [2, 0]])
  out = Tensor(x).scatter(1, Tensor(index), 9.5).numpy()
  ref = x.copy()
  for r in range(3):
    for c in range(2): ref[r, index[r, c]] = 9.5
  np.testing.assert_array_equal(out, ref)

@NUMPY_INDICES
def test_scatter_add(scatter_form):
  index = np.array([[0, 1, 0, 3], [3, 3, 3, 1]])
  ref = lambda x, i, s: np_scatter_reduce(x, 1, i, s, "sum")
  check_op(lambda x, i, s: x.scatter(1, i, s, reduce="add"), ref,
           inputs=[np.random.default_rng(7).uniform(-2, 2, (2, 4)), index, np.random.default_rng(8).uniform(-2, 2, (2, 5))])

SCATTER_INDEX = np.array([[0, 2, 0], [2, 2, 1], [0, 1, 1], [2, 0, 2]])  # (4, 3) into dim 0 of a (3, 3) tensor: repeats

@NUMPY_INDICES
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce(reduce, include_self, scatter_form):
  rng = np.random.default_rng(9)
  x = rng.uniform(-2, 2, (3, 4))
  src = rng.uniform(-2, 2, (4, 3))
  index = SCATTER_INDEX
  ref = lambda x, i, s: np_scatter_reduce(x, 0, i, s, reduce, include_self)
  check_op(lambda x, i, s: x.scatter_reduce(0, i, s, reduce, include_self=include_self), ref, inputs=[x, index, src])

@NUMPY_INDICES
def test_scatter_reduce_dim1_mean(scatter_form):
  rng = np.random.default_rng(10)
  x, src = rng.uniform(-2, 2, (2, 3)), rng.uniform(-2, 2, (2, 4))
  index = np.array([[2, 2, 0, 2], [1, 1, 1, 1]])
  check_op(lambda x, i, s: x.scatter_reduce(1, i, s, "mean", include_self=False),
           lambda x, i, s: np_scatter_reduce(x, 1, i, s, "mean", False), inputs=[x, index, src])

@NUMPY_INDICES
@pytest.mark.parametrize("reduce", ["replace", "sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_by_one_index_line(reduce, scatter_form):
  """An index line broadcast over the other axis (as a graph's edges scatter into its nodes), sorted once for every
  column: repeats in long runs, negative indices and indices past the axis (they write nothing)."""
  rng = np.random.default_rng(11)
  line = np.concatenate([rng.integers(-6, 8, 13), np.full(9, 2)])
  x, src = rng.uniform(-2, 2, (6, 3)), rng.uniform(-2, 2, (22, 4))
  index = np.repeat(line[:, None], 3, 1)
  check_op(lambda x, i, s: x.scatter_reduce(0, i.reshape(22, 1).expand(22, 3), s, reduce, include_self=reduce != "replace"),
           lambda x, i, s: np_scatter_reduce(x, 0, index, s, reduce, reduce != "replace"), inputs=[x, line, src])

@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_sorted_scatter_sums_runs_exactly(sorted_scatters, dtype):
  """Sums through the sorted indices, some runs thousands long: int32 exactly as numpy's add.at (wrapping alike),
  float32 within a few ulp of the float64 sum."""
  rng = np.random.default_rng(15)
  index = np.concatenate([rng.integers(0, 50, 3000), np.full(5000, 7), np.full(2000, 49)]).astype(np.int32)
  src = (rng.integers(-2**30, 2**30, (10000, 3)) if dtype == np.int32 else rng.standard_normal((10000, 3))).astype(dtype)
  got = Tensor(np.zeros((50, 3), dtype)).scatter_reduce(0, Tensor(index).reshape(-1, 1).expand(-1, 3), Tensor(src), "sum").numpy()
  want = np.zeros((50, 3), np.int32 if dtype == np.int32 else np.float64)
  np.add.at(want, index, src)
  if dtype == np.int32: np.testing.assert_array_equal(got, want)
  else: np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-4)

def widest_reduction(t: Tensor) -> int:
  """The most elements any of the kernels that compute t reduces into one output (1 where none reduces)."""
  widest = 1
  for item in t.schedule():
    nodes = item.ast.toposort()
    full = max((u.arg.shape for u in nodes if u.op.name == "VIEW"), key=prod)
    widest = max([widest] + [prod(full[a] for a in u.arg[1]) for u in nodes if u.op.name == "REDUCE_AXIS"])
  return widest

def test_a_big_scatter_add_sums_no_one_hot_product():
  """Messages of 40000 edges scattered into 30000 nodes of 16 features would be 2 * 10**10 one-hot terms: the sum goes
  through the sorted indices (the forward and the messages' gradient, a gather), where no kernel reduces more than
  the sort's rank blocks (the one-hot form: 40000 terms an output)."""
  m = Tensor.empty(40000, 16, requires_grad=True)
  out = Tensor.empty(30000, 16).scatter_reduce(0, Tensor.empty(40000, dtype=dtypes.int32).reshape(-1, 1).expand(-1, 16), m, "sum")
  (out * Tensor.empty(30000, 16)).sum().backward()
  assert widest_reduction(out) <= RANK_BLOCK and widest_reduction(m.grad) <= RANK_BLOCK

def test_a_big_setitem_writes_through_sorted_positions(monkeypatch):
  """x[idx] = v into 40000 elements with 500 picks (repeats among them: the last one wins) is not a 2 * 10**7-term
  one-hot sum but a scatter through the sorted positions (sorted on the host, which read the indices to check them
  already); it matches a Python loop's assignments."""
  import tg.movement
  calls = []
  monkeypatch.setattr(tg.movement, "segment_reduce", lambda *a: calls.append(a[4]) or segment_reduce(*a))
  rng = np.random.default_rng(13)
  x = rng.standard_normal((200, 200)).astype(np.float32)
  rows, cols = rng.integers(-200, 200, 500), rng.integers(0, 20, 500)
  vals = rng.standard_normal(500).astype(np.float32)
  t = Tensor(x)
  t[Tensor(rows.astype(np.int32)), Tensor(cols.astype(np.int32))] = Tensor(vals)
  want = x.copy()
  for r, c, v in zip(rows, cols, vals): want[r, c] = v
  np.testing.assert_array_equal(t.numpy(), want)
  assert calls == ["replace"]

# ---------------- masks ----------------
MASK = np.array([[True, False, False, True], [False, False, True, False], [True, True, False, False]])

def test_masked_fill():
  check_op(lambda a, m: a.masked_fill(m, 3.0), lambda a, m: np.where(m, 3.0, a), inputs=[np.random.default_rng(0).uniform(-2, 2, (3, 4)), MASK])
  # a broadcast mask
  row = np.array([False, True, True, False])
  check_op(lambda a, m: a.masked_fill(m, -1.5), lambda a, m: np.where(m, -1.5, a), inputs=[np.random.default_rng(1).uniform(-2, 2, (3, 4)), row])

def test_masked_select():
  check_op(lambda a, m: a.masked_select(m), lambda a, m: a[m], inputs=[np.random.default_rng(0).uniform(-2, 2, (3, 4)), MASK])
  row = np.array([True, False, True, True])
  check_op(lambda a, m: a.masked_select(m), lambda a, m: a[np.broadcast_to(m, a.shape)], inputs=[np.random.default_rng(1).uniform(-2, 2, (3, 4)), row])

def np_first_n(values, n, fill):
  """values[:n], padded with rows of `fill` to n rows: the size= forms of masked_select and nonzero."""
  out = np.full((n, *values.shape[1:]), fill, dtype=np.float64 if values.dtype.kind == "f" else values.dtype)
  out[:min(n, len(values))] = values[:n]
  return out

@pytest.mark.parametrize("size,fill", [(5, 0), (9, -1.5), (3, 0), (0, 7)])
def test_masked_select_static_size(size, fill):
  # 5 elements are selected: size 9 pads with fill_value, size 3 keeps the first 3
  check_op(lambda a, m: a.masked_select(m, size=size, fill_value=fill), lambda a, m: np_first_n(a[m], size, fill),
           inputs=[np.random.default_rng(2).uniform(-2, 2, (3, 4)), MASK])
  # a mask broadcast against the input, and an input broadcast against the mask
  row = np.array([True, False, True, True])
  check_op(lambda a, m: a.masked_select(m, size=size, fill_value=fill), lambda a, m: np_first_n(a[np.broadcast_to(m, a.shape)], size, fill),
           inputs=[np.random.default_rng(3).uniform(-2, 2, (3, 4)), row])
  check_op(lambda a, m: a.masked_select(m, size=size, fill_value=fill), lambda a, m: np_first_n(np.broadcast_to(a, m.shape)[m], size, fill),
           inputs=[np.random.default_rng(4).uniform(-2, 2, (4,)), MASK])

def test_masked_select_keeps_dtype_and_needs_a_bool_mask():
  x = Tensor(np.array([[3, -1], [7, 2]], np.int32))
  out = x.masked_select(x > 0, size=4, fill_value=-9)
  assert out.dtype == x.dtype
  np.testing.assert_array_equal(out.numpy(), [3, 7, 2, -9])
  with pytest.raises(RuntimeError, match="bool"): x.masked_select(x)

def test_static_size_forms_read_no_data():
  # under TinyJit a data read while capturing is an error, and replays with new masks must still select right
  from tg import TinyJit
  @TinyJit
  def pick(x, m): return x.masked_select(m, size=4, fill_value=-1).realize(), x.nonzero(size=3, fill_value=-1).realize()
  rng = np.random.default_rng(5)
  for _ in range(4):
    x = np.where(rng.uniform(size=(3, 3)) < 0.4, 0, rng.integers(1, 9, (3, 3))).astype(np.float32)
    m = rng.uniform(size=(3, 3)) < 0.5
    sel, nz = pick(Tensor(x), Tensor(m))
    np.testing.assert_array_equal(sel.numpy(), np_first_n(x[m], 4, -1))
    np.testing.assert_array_equal(nz.numpy(), np_first_n(np.argwhere(x), 3, -1))

@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 2)])
def test_nonzero(shape):
  x = np.where(np.random.default_rng(6).uniform(size=shape) < 0.5, 0, np.arange(1, np.prod(shape) + 1).reshape(shape)).astype(np.float32)
  count = int((x != 0).sum())
  out = Tensor(x).nonzero()
  assert out.dtype == Tensor(np.zeros(1, np.int32)).dtype  # int32 as tinygrad (PyTorch: int64)
  np.testing.assert_array_equal(out.numpy(), np.argwhere(x))
  for size, fill in ((count + 3, 0), (count + 1, -1), (max(count - 2, 0), 5)):
    out = Tensor(x).nonzero(size=size, fill_value=fill)
    assert out.shape == (size, len(shape))
    np.testing.assert_array_equal(out.numpy(), np_first_n(np.argwhere(x), size, fill))

def test_nonzero_0d():
  assert Tensor(3.0).nonzero().shape == (1, 0) and Tensor(0.0).nonzero().shape == (0, 0)
  assert Tensor(3.0).nonzero(size=2).shape == (2, 0)

@pytest.mark.parametrize("diagonal", [-1, 0, 2])
def test_tril_triu(diagonal):
  check_op(lambda a: a.tril(diagonal), lambda a: np.tril(a, diagonal), [(4, 5)])
  check_op(lambda a: a.triu(diagonal), lambda a: np.triu(a, diagonal), [(4, 5)])
  check_op(lambda a: a.tril(diagonal), lambda a: np.tril(a, diagonal), [(2, 3, 3)])
  check_op(lambda a: a.triu(diagonal), lambda a: np.triu(a, diagonal), [(2, 3, 4)])

def test_tril_triu_keep_dtype():
  m = np.ones((3, 4), dtype=bool)
  for f, ref in ((lambda t: t.tril(), np.tril(m)), (lambda t: t.triu(1), np.triu(m, 1))):
    out = f(Tensor(m))
    assert out.dtype == Tensor(m).dtype
    np.testing.assert_array_equal(out.numpy(), ref)
  out = Tensor(np.arange(9, dtype=np.int32).reshape(3, 3)).triu(-1)
  assert out.dtype == Tensor(np.zeros(1, np.int32)).dtype
  np.testing.assert_array_equal(out.numpy(), np.triu(np.arange(9).reshape(3, 3), -1))

def test_one_hot():
  labels = np.array([[0, 3, 1], [2, 2, 4]])
  out = Tensor(labels.astype(np.int32)).one_hot(6)
  assert out.shape == (2, 3, 6)
  np.testing.assert_array_equal(out.numpy(), np.eye(6, dtype=np.int64)[labels])
  out = Tensor(labels.astype(np.int32)).one_hot()  # classes from the largest label
  np.testing.assert_array_equal(out.numpy(), np.eye(5, dtype=np.int64)[labels])
  with pytest.raises(TypeError): Tensor(np.zeros(3, np.float32)).one_hot(3)

def test_diagonal():
  check_op(lambda a: a.diagonal(), lambda a: np.diagonal(a), [(4, 4)])
  check_op(lambda a: a.diagonal(1), lambda a: np.diagonal(a, 1), [(3, 5)])
  check_op(lambda a: a.diagonal(-2), lambda a: np.diagonal(a, -2), [(4, 3)])
  check_op(lambda a: a.diagonal(0, 1, 2), lambda a: np.diagonal(a, 0, 1, 2), [(2, 3, 4)])
  check_op(lambda a: a.diagonal(1, -1, 0), lambda a: np.diagonal(a, 1, -1, 0), [(3, 2, 4)])
  check_op(lambda a: a.diagonal(-1, 2, 0), lambda a: np.diagonal(a, -1, 2, 0), [(3, 2, 4)])
  check_op(lambda a: a.diagonal(-3, 0, 2), lambda a: np.diagonal(a, -3, 0, 2), [(4, 2, 3)])
  check_op(lambda a: a.diagonal(2, 1, -1), lambda a: np.diagonal(a, 2, 1, -1), [(2, 3, 4, 2)])

@pytest.mark.parametrize("offset", [-5, -4, 4, 7])
def test_diagonal_past_the_edge_is_empty(offset):
  a = np.zeros((4, 4, 2), np.float32)
  assert Tensor(a).diagonal(offset).shape == np.diagonal(a, offset).shape == (2, 0)

def test_diagonal_same_dims_raises():
  with pytest.raises(RuntimeError): Tensor.zeros(3, 3).diagonal(0, 1, -1)

def test_diag():
  check_op(lambda a: a.diag(), lambda a: np.diag(a), [(4,)])
  check_op(lambda a: a.diag(), lambda a: np.diag(a), [(3, 4)])

# ---------------- [] ----------------
def test_index_ints():
  check_op(lambda a: a[1], lambda a: a[1], [(3, 4)])
  check_op(lambda a: a[-1, 2], lambda a: a[-1, 2], [(3, 4)])
  check_op(lambda a: a[0, -2, -1], lambda a: a[0, -2, -1], [(2, 3, 4)])
  check_op(lambda a: a[:, -3], lambda a: a[:, -3], [(2, 3, 4)])

@pytest.mark.parametrize("key", [
  (slice(None, None, -1), slice(3, 0, -2)), (slice(1, 5, 2),), (slice(None, None, 3),), (slice(-2, None), slice(None, -1)),
  (slice(None, None, -2), slice(None, None, 2)), (slice(4, None, -3), slice(1, 2)), (slice(3, 1),), (slice(-100, 100, 4),)])
def test_index_slices(key):
  check_op(lambda a: a[key], lambda a: a[key], [(5, 6)])

def test_index_none_ellipsis():
  check_op(lambda a: a[None], lambda a: a[None], [(2, 3)])
  check_op(lambda a: a[..., 1], lambda a: a[..., 1], [(2, 3, 4)])
  check_op(lambda a: a[None, ..., 1], lambda a: a[None, ..., 1], [(2, 3, 4)])
  check_op(lambda a: a[1, ..., None, 1:], lambda a: a[1, ..., None, 1:], [(2, 3, 4)])
  check_op(lambda a: a[:, None, ::2, None], lambda a: a[:, None, ::2, None], [(2, 3, 4)])
  check_op(lambda a: a[...], lambda a: a[...], [(2, 3)])

def test_index_list_of_ints():
  check_op(lambda a: a[[0, 2, -1]], lambda a: a[[0, 2, -1]], [(4, 3)])
  check_op(lambda a: a[:, [1, 1, 0]], lambda a: a[:, [1, 1, 0]], [(2, 3, 2)])

@NUMPY_INDICES
def test_index_one_tensor():
  i = np.array([[2, 0], [-1, 1]])
  check_op(lambda a, i: a[i], lambda a, i: a[i], inputs=[np.random.default_rng(0).uniform(-2, 2, (4, 3)), i])
  check_op(lambda a, i: a[:, i], lambda a, i: a[:, i], inputs=[np.random.default_rng(1).uniform(-2, 2, (2, 3, 2)), np.array([2, -3, 0, 2])])
  check_op(lambda a, i: a[..., i], lambda a, i: a[..., i], inputs=[np.random.default_rng(2).uniform(-2, 2, (2, 3, 4)), np.array([[3], [-1]])])

@NUMPY_INDICES
def test_index_two_tensors_adjacent():
  a = np.random.default_rng(3).uniform(-2, 2, (2, 3, 4, 5))
  i, j = np.array([[0, 2], [1, -1]]), np.array([3, -4])  # broadcast to (2, 2)
  out = check_op(lambda a, i, j: a[:, i, j], lambda a, i, j: a[:, i, j], inputs=[a, i, j])
  assert out.shape == a[:, i, j].shape == (2, 2, 2, 5)
  out = check_op(lambda a, i, j: a[i, j], lambda a, i, j: a[i, j], inputs=[a, np.array([1, 0, -1]), np.array([0, 2, 1])])
  assert out.shape == (3, 4, 5)

@NUMPY_INDICES
def test_index_two_tensors_non_adjacent():
  # advanced indices separated by a slice: numpy puts the broadcast index dims first
  a = np.random.default_rng(4).uniform(-2, 2, (3, 2, 4, 5))
  i, j = np.array([[2], [0]]), np.array([1, -1, 3])
  out = check_op(lambda a, i, j: a[i, :, j], lambda a, i, j: a[i, :, j], inputs=[a, i, j])
  assert out.shape == a[i, :, j].shape == (2, 3, 2, 5)
  out = check_op(lambda a, i, j: a[:, i, :, j], lambda a, i, j: a[:, i, :, j], inputs=[a, np.array([1, 0]), np.array([4, -2])])
  assert out.shape == (2, 3, 4)

@NUMPY_INDICES
def test_index_int_with_tensor():
  # ints select first, as in PyTorch and tinygrad: a[1, :, i] is a[1][:, i] (numpy would put i's dim first, giving (3, 4))
  a = np.random.default_rng(5).uniform(-2, 2, (3, 4, 5))
  i = np.array([4, 0, 2])
  out = check_op(lambda a, i: a[1, :, i], lambda a, i: a[1][:, i], inputs=[a, i])
  assert out.shape == (4, 3)
  out = check_op(lambda a, i: a[:, 2, i], lambda a, i: a[:, 2][:, i], inputs=[a, i])
  assert out.shape == (3, 3)
  out = check_op(lambda a, i: a[i, :, -1], lambda a, i: a[:, :, -1][i], inputs=[a, np.array([2, 0])])
  assert out.shape == (2, 4)

@NUMPY_INDICES
def test_index_tensor_with_slices_and_none():
  a = np.random.default_rng(6).uniform(-2, 2, (4, 5, 3))
  i = np.array([0, -1, 2])
  check_op(lambda a, i: a[1:, i, ::2], lambda a, i: a[1:, i, ::2], inputs=[a, i])
  check_op(lambda a, i: a[None, ::-1, i], lambda a, i: a[None, ::-1, i], inputs=[a, i])

def test_index_bool_mask():
  a = np.random.default_rng(7).uniform(-2, 2, (3, 4))
  check_op(lambda a, m: a[m], lambda a, m: a[m], inputs=[a, MASK])
  m1 = np.array([True, False, True])
  check_op(lambda a, m: a[m], lambda a, m: a[m], inputs=[a, m1])
  check_op(lambda a, m: a[:, m], lambda a, m: a[:, m], inputs=[a, np.array([False, True, True, False])])

@NUMPY_INDICES
def test_index_gradient_repeated_indices():
  # the same row picked twice: its gradient is the sum of both uses
  a = np.random.default_rng(8).uniform(-2, 2, (4, 3))
  check_op(lambda a, i: a[i] * 3, lambda a, i: a[i] * 3, inputs=[a, np.array([1, 3, 1, -3, 0])])
  check_op(lambda a: a[[2, 2, 0], 1:], lambda a: a[[2, 2, 0], 1:], [(3, 3)])

def test_index_errors():
  x = Tensor(np.zeros((3, 7), np.float32))
  with pytest.raises(IndexError, match="7"): x[0, 7]
  with pytest.raises(IndexError, match="3"): x[-4]
  with pytest.raises(IndexError, match="3"): x[3, idx([0])]
  with pytest.raises(IndexError): x[0, 0, 0]
  with pytest.raises(IndexError): x[..., 1, None, 2, 3]
  with pytest.raises(IndexError): x[..., ...]

def test_reshape_error():
  x = Tensor(np.zeros((3, 4), np.float32))
  with pytest.raises(ValueError) as e: x.reshape(5, 2)
  assert "(3, 4)" in str(e.value) and "(5, 2)" in str(e.value)
  with pytest.raises(ValueError): x.reshape(5, -1)
  with pytest.raises(ValueError): x.reshape(-1, -1)

# ---------------- []= ----------------
def _setitem_case(shape, key, value):
  rng = np.random.default_rng(11)
  base = rng.uniform(-2, 2, shape).astype(np.float32)
  t = Tensor(base.copy())
  ref = base.copy()
  ref[key] = value.numpy() if isinstance(value, Tensor) else value
  t_key = tuple(Tensor(k) if isinstance(k, np.ndarray) else k for k in key) if isinstance(key, tuple) else (Tensor(key) if isinstance(key, np.ndarray) else key)
  t[t_key] = value
  np.testing.assert_array_equal(t.numpy(), ref)

def test_setitem_int():
  _setitem_case((3, 4), 1, Tensor(np.array([1.0, 2.0, 3.0, 4.0], np.float32)))
  _setitem_case((3, 4), (-1, 2), 5.0)

def test_setitem_slice_tensor():
  _setitem_case((3, 4), (slice(None), slice(1, 3)), Tensor(np.arange(6, dtype=np.float32).reshape(3, 2)))
  _setitem_case((3, 4), (slice(None), slice(1, 3)), Tensor(np.array([7.0, 8.0], np.float32)))  # broadcast

def test_setitem_step_scalar():
  _setitem_case((5, 3), slice(None, None, 2), 0.5)
  _setitem_case((5, 3), (slice(None), slice(None, None, -2)), -2.0)

def test_setitem_index_tensor_last_write_wins():
  index = np.array([0, 2, 0, 3], dtype=np.int32)
  value = Tensor(np.array([10.0, 20.0, 30.0, 40.0], np.float32))
  base = np.arange(5, dtype=np.float32)
  t = Tensor(base.copy())
  t[Tensor(index)] = value
  np.testing.assert_array_equal(t.numpy(), [30.0, 1.0, 20.0, 40.0, 4.0])
  # rows of a 2-d tensor
  _setitem_case((4, 3), np.array([3, -4], dtype=np.int32), Tensor(np.array([1.0, 2.0, 3.0], np.float32)))

def test_setitem_mask():
  _setitem_case((3, 4), MASK, 0.0)
  base = np.random.default_rng(12).uniform(-2, 2, (3, 4)).astype(np.float32)
  t = Tensor(base.copy())
  t[t < 0] = 0
  np.testing.assert_array_equal(t.numpy(), np.maximum(base, 0))

def test_setitem_then_use():
  t = Tensor(np.zeros((2, 3), np.float32))
  t[0] = 1.0
  t[:, 2] = Tensor(np.array([5.0, 6.0], np.float32))
  np.testing.assert_array_equal((t * 2).numpy(), np.array([[2, 2, 10], [0, 0, 12]], np.float32))

# ---------------- optional comparisons against torch ----------------
def test_torch_advanced_indexing_and_chunk():
  torch = pytest.importorskip("torch")
  a = np.random.default_rng(13).uniform(-2, 2, (3, 4, 5)).astype(np.float32)
  i, j = np.array([[1], [-1]], np.int32), np.array([0, 4, -2], np.int32)  # int32: every device holds it
  np.testing.assert_allclose(Tensor(a)[Tensor(i), :, Tensor(j)].numpy(), torch.tensor(a)[torch.tensor(i), :, torch.tensor(j)].numpy())
  for n in (5, 6, 7):
    assert [p.shape for p in Tensor.zeros(n).chunk(4)] == [tuple(p.shape) for p in torch.zeros(n).chunk(4)]
  ta = torch.tensor(a)
  for mode in ("reflect", "replicate", "circular"):
    np.testing.assert_allclose(Tensor(a).pad((1, 2, 2, 1), mode=mode).numpy(), torch.nn.functional.pad(ta, (1, 2, 2, 1), mode=mode).numpy())

def test_torch_scatter_reduce():
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(14)
  x, src = rng.uniform(-2, 2, (3, 4)).astype(np.float32), rng.uniform(-2, 2, (4, 3)).astype(np.float32)
  for reduce in ("sum", "prod", "mean", "amax", "amin"):
    for include_self in (True, False):
      got = Tensor(x).scatter_reduce(0, Tensor(SCATTER_INDEX.astype(np.int32)), Tensor(src), reduce, include_self=include_self).numpy()
      ref = torch.tensor(x).scatter_reduce(0, torch.tensor(SCATTER_INDEX), torch.tensor(src), reduce, include_self=include_self).numpy()
      np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6, err_msg=f"{reduce} include_self={include_self}")

def test_scatter_gather_errors_are_pytorchs_types():
  x, i = Tensor.zeros(3, 4), idx([[0, 1], [2, 0]])
  with pytest.raises(RuntimeError, match="'max'"): x.scatter(1, i, 1.0, reduce="max")
  with pytest.raises(RuntimeError, match="'add'"): x.scatter_reduce(1, i, Tensor.ones(2, 2), "add")
  with pytest.raises(RuntimeError): x.scatter(1, idx([0, 1]), 1.0)
  with pytest.raises(RuntimeError): x.scatter(1, Tensor.zeros(2, 2), 1.0)
  with pytest.raises(RuntimeError): x.gather(1, idx([[0, 1, 2, 3, 0]] * 4))
  with pytest.raises(RuntimeError): x.gather(1, Tensor.zeros(2, 2))

# ---------------- single elements of padded regions (a 0-d view must keep 'nothing valid') ----------------
def test_single_element_of_padding_reads_the_pad_value():
  assert (Tensor([1., 2.]).cat(Tensor([3.]))[-1] * 1).item() == 3.0
  np.testing.assert_array_equal(Tensor([5., 6.]).pad(((0, 2),))[2:3].contiguous().numpy(), [0.])
  np.testing.assert_array_equal(Tensor([1., 2., 3., 4.]).roll(-1, 0)[3:4].numpy(), [1.])
  assert (Tensor([5., 6.]).pad(((0, 2),))[3] + 1).item() == 1.0
  assert Tensor([[1., 2.]]).pad(((1, 0), (0, 1)), value=7.0)[0, 2].item() == 7.0

def test_padding_an_empty_buffer_reads_no_memory():
  np.testing.assert_array_equal(Tensor.zeros(0).contiguous().pad(((0, 2),))[:1].numpy(), [0.])
  assert Tensor.zeros(0).contiguous().pad(((1, 1),), value=4.0)[1].item() == 4.0

def test_expand_rejects_negative_and_mismatched_sizes():
  with pytest.raises(ValueError, match="expand"): Tensor([1.]).expand(-2, 3)
  with pytest.raises(ValueError, match="expand"): Tensor([[1., 2.]]).expand(2, 3)
  with pytest.raises(ValueError, match="expand"): Tensor([1.]).expand(-1, 3)  # -1 can't size a new leading dim
  assert Tensor([[1., 2.]]).expand(3, -1).shape == (3, 2) and Tensor([1.]).expand(0).shape == (0,)

def test_index_assignment_out_of_range_raises_and_changes_nothing():
  t = Tensor([1., 2., 3., 4.])
  with pytest.raises(IndexError, match="index 10 is out of bounds for dimension 0 with size 4"): t[Tensor([10])] = 5.0
  with pytest.raises(IndexError, match="index -5"): t[[1, -5]] = 5.0
  np.testing.assert_array_equal(t.numpy(), [1., 2., 3., 4.])
  m = Tensor.zeros(2, 3).contiguous()
  with pytest.raises(IndexError, match="dimension 1 with size 3"): m[:, Tensor([3])] = 1.0
  m[[0, 1], [-1, 0]] = 2.0
  np.testing.assert_array_equal(m.numpy(), [[0, 0, 2], [2, 0, 0]])

# ---------------- [] with every kind of index mixed, against a numpy reference of PyTorch's rule ----------------
# ints and slices apply first, then the advanced indices (lists, tuples, arrays, integer tensors, bool masks) broadcast
# together and their dims stay in place when adjacent in what is left, else move to the front

def is_mask(k) -> bool: return isinstance(k, np.ndarray) and k.dtype == np.bool_

def torch_order_reference(a: np.ndarray, key: tuple) -> np.ndarray:
  """a[key] as PyTorch reads it, in two numpy steps: the basic indices alone, then the advanced ones on what is left
  (numpy alone differs when an int sits apart from the arrays: it counts the int as an advanced index)."""
  key = [np.asarray(k) if isinstance(k, (list, tuple)) else k for k in key]
  used = sum(k.ndim if is_mask(k) else 1 for k in key if k is not None and k is not Ellipsis)
  at = next((n for n, k in enumerate(key) if k is Ellipsis), len(key))
  key = key[:at] + [slice(None)] * (a.ndim - used) + key[at + 1:]
  if not any(isinstance(k, np.ndarray) for k in key): return a[tuple(key)]
  basic = [s for k in key for s in ([slice(None)] * (k.ndim if is_mask(k) else 1) if isinstance(k, np.ndarray) else [k])]
  rest = [k if isinstance(k, np.ndarray) else slice(None) for k in key if not isinstance(k, int)]
  return a[tuple(basic)][tuple(rest)]

@st.composite
def index_case(draw):
  """(shape, key, the key with numpy arrays for the tensors): every dim gets one index kind, advanced indices share a
  broadcast shape, Nones go anywhere, a run of full slices may become an Ellipsis, trailing entries may be left out."""
  shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
  bshape = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
  entries, dim, masked = [], 0, False
  while dim < len(shape):
    kind = draw(st.sampled_from(["int", "slice", "full", "list", "tuple", "array", "tensor", "mask"]))
    n = shape[dim]
    if kind == "int": entries.append(draw(st.integers(-n, n - 1)))
    elif kind == "full": entries.append(slice(None))
    elif kind == "slice":
      entries.append(slice(draw(st.one_of(st.none(), st.integers(-n - 1, n + 1))), draw(st.one_of(st.none(), st.integers(-n - 1, n + 1))),
                           draw(st.sampled_from([None, 1, 2, 3, -1, -2]))))
    elif kind == "mask":
      if masked: continue
      part = shape[dim:dim + draw(st.integers(1, min(2, len(shape) - dim)))]
      entries.append(np.array(draw(st.lists(st.booleans(), min_size=int(np.prod(part)), max_size=int(np.prod(part))))).reshape(part))
      masked, dim = True, dim + len(part)
      continue
    else:
      sub = tuple(1 if draw(st.booleans()) else s for s in bshape[len(bshape) - draw(st.integers(0, len(bshape))):])
      values = np.array(draw(st.lists(st.integers(-n, n - 1), min_size=int(np.prod(sub)), max_size=int(np.prod(sub))))).reshape(sub)
      if kind == "tuple" and values.ndim != 1: kind = "list"
      entries.append(values.tolist() if kind == "list" else tuple(values.tolist()) if kind == "tuple" else values if kind == "array" else ("tensor", values))
    dim += 1
  for _ in range(draw(st.integers(0, 2))): entries.insert(draw(st.integers(0, len(entries))), None)
  if draw(st.booleans()):
    full = [n for n, e in enumerate(entries) if isinstance(e, slice) and e == slice(None)]
    lo = draw(st.sampled_from(full)) if full else draw(st.integers(0, len(entries)))
    hi = lo
    while hi < len(entries) and isinstance(entries[hi], slice) and entries[hi] == slice(None) and draw(st.booleans()): hi += 1
    entries[lo:hi] = [Ellipsis]
  elif entries and draw(st.booleans()):
    while entries and isinstance(entries[-1], slice) and entries[-1] == slice(None): entries.pop()
  np_key = tuple(e[1] if isinstance(e, tuple) and e and isinstance(e[0], str) else e for e in entries)
  tg_key = tuple(Tensor(e[1].astype(np.int32)) if isinstance(e, tuple) and e and isinstance(e[0], str) else e for e in entries)
  return shape, tg_key, np_key

def broadcasts(a: np.ndarray, key: tuple) -> bool:
  try: torch_order_reference(a, key)
  except IndexError: return False
  return True

@settings(max_examples=300, deadline=None)
@given(index_case())
def test_getitem_matches_pytorch_order(case):
  shape, tg_key, np_key = case
  a = np.arange(1, int(np.prod(shape)) + 1, dtype=np.float32).reshape(shape)   # distinct nonzero values: a wrong read shows
  if not broadcasts(a, np_key):  # advanced indices that don't broadcast (a mask's count against other arrays)
    with pytest.raises(IndexError): Tensor(a)[tg_key]
    return
  ref = torch_order_reference(a, np_key)
  got = Tensor(a)[tg_key]
  assert got.shape == ref.shape, f"{np_key}: shape {got.shape} != {ref.shape}"
  np.testing.assert_array_equal(got.numpy(), ref, err_msg=str(np_key))

def test_reference_is_numpy_without_ints_among_arrays():
  # the reference agrees with numpy whenever numpy and PyTorch agree, and differs where they are known to differ
  a = np.arange(120.0).reshape(2, 3, 4, 5)
  i, j = np.array([1, 0]), np.array([[2], [0]])
  for key in [(i, slice(None), j), (slice(None), i, j), (i, None, i), (Ellipsis, i, slice(1, 3), j), (0, i, j), (i, 0, j), (slice(None), i, 0)]:
    np.testing.assert_array_equal(torch_order_reference(a, key), a[key])
  assert torch_order_reference(a, (0, slice(None), i)).shape == (3, 2, 5) and a[0, :, i].shape == (2, 3, 5)
  assert torch_order_reference(a, (slice(None), i, slice(None), 0)).shape == (2, 2, 4) and a[:, i, :, 0].shape == (2, 2, 4)
  np.testing.assert_array_equal(torch_order_reference(a, (slice(None), i, slice(None), 0)), a[:, i, :, 0].transpose(1, 0, 2))

def test_getitem_hand_computed():
  a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
  t = Tensor(a)
  np.testing.assert_array_equal(t[(1, 0), ].numpy(), a[[1, 0]])                  # a tuple inside the index is a list of indices
  np.testing.assert_array_equal(t[(1, 0)].numpy(), a[1, 0])                      # the index tuple itself is one index per dim
  np.testing.assert_array_equal(t[[[0], [1]], :, [3, 0]].numpy(), [[[3, 7, 11], [0, 4, 8]], [[15, 19, 23], [12, 16, 20]]])
  np.testing.assert_array_equal(t[0, :, [3, 0]].numpy(), [[3, 0], [7, 4], [11, 8]])  # PyTorch: the int goes first (numpy: transposed)
  np.testing.assert_array_equal(t[[1], 2, 1:].numpy(), [[21, 22, 23]])
  np.testing.assert_array_equal(t[[True, False], ..., [1, 2]].numpy(), [[1, 5, 9], [2, 6, 10]])   # separated: to the front
  assert t[[]].shape == (0, 3, 4) and t[:, []].shape == (2, 0, 4)

@NUMPY_INDICES
def test_getitem_gradient_mixed():
  # repeated picks across a list, a tensor and an int: each element's gradient is the sum of its uses
  rng = np.random.default_rng(0)
  check_op(lambda a, i: a[[1, 1, 0], :, i], lambda a, i: torch_order_reference(a, ([1, 1, 0], slice(None), i)),
           inputs=[rng.uniform(-2, 2, (2, 3, 4)), np.array([[3], [0], [3]])])
  check_op(lambda a, i: a[1, i, None, ::-1], lambda a, i: torch_order_reference(a, (1, i, None, slice(None, None, -1))),
           inputs=[rng.uniform(-2, 2, (2, 3, 4)), np.array([2, 2, -1])])
  check_op(lambda a: a[..., (0, 3, 0)], lambda a: a[..., [0, 3, 0]], [(2, 4)])

@pytest.mark.parametrize("n,k,dim", [(50, 37, 0), (7, 100, 0), (1000, 1, 0), (40, 64, 1), (5, 3, 1)], ids=str)
def test_gather_gradient_through_sorted_indices(sorted_scatters, n, k, dim):
  """The gradient of x[idx] (an index along one axis only) summed through the sorted indices equals numpy's add.at,
  with indices repeated, negative and in runs longer than the scan's steps; the one-hot form is forced off."""
  rng = np.random.default_rng(n + k)
  shape = (n, 3) if dim == 0 else (2, n, 3)
  x = Tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
  idx = np.concatenate([rng.integers(-n, n, k - k // 3), np.full(k // 3, 1)]).astype(np.int32)  # a long run of 1s too
  picked = x[Tensor(idx)] if dim == 0 else x[:, Tensor(idx)]
  g = rng.standard_normal(picked.shape).astype(np.float32)
  (picked * Tensor(g)).sum().backward()
  want = np.zeros(shape)
  if dim == 0: np.add.at(want, idx % n, g)
  else: np.add.at(want.transpose(1, 0, 2), idx % n, g.transpose(1, 0, 2))
  np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_gather_gradient_of_an_index_per_column_through_sorted_indices(sorted_scatters, dtype):
  """torch.gather's gradient with each row's own indices (sorted row by row), the one-hot form forced off; int64 and
  uint8 indices become 32-bit keys."""
  skip_refused(dtype)
  rng = np.random.default_rng(14)
  x = Tensor(rng.standard_normal((5, 7)).astype(np.float32), requires_grad=True)
  idx = rng.integers(0 if dtype == np.uint8 else -7, 7, (5, 9)).astype(dtype)
  g = rng.standard_normal((5, 9)).astype(np.float32)
  (x.gather(1, Tensor(idx)) * Tensor(g)).sum().backward()
  want = np.zeros((5, 7))
  for r in range(5): np.add.at(want[r], idx[r].astype(np.int64) % 7, g[r])
  np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-5)

def test_a_big_gather_gradient_sums_no_one_hot_product():
  """An embedding's gradient (50000 rows, 8192 picks of 256) by its one-hot form is a reduction of 10**11 terms (8192
  an output); the sorted form is a sort (whose rank blocks reduce 32 an output), a scan, a binary search and gathers."""
  w = Tensor.empty(50000, 256, requires_grad=True)
  (w[Tensor.empty(8192, dtype=dtypes.int32)] * Tensor.empty(8192, 256)).sum().backward()
  assert widest_reduction(w.grad) <= RANK_BLOCK

def test_getitem_errors_are_index_errors():
  t = Tensor(np.zeros((3, 4), np.float32))
  with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"): t[[0, 3]]
  with pytest.raises(IndexError, match="index -5"): t[:, (1, -5)]
  with pytest.raises(IndexError, match="index 4"): t[np.array([[4]])]
  with pytest.raises(IndexError, match="index 9"): t[0, [9]]
  with pytest.raises(IndexError): t[[0, 1], [0, 1, 2]]                          # don't broadcast
  with pytest.raises(IndexError): t[np.ones(4, bool)]                           # mask of the wrong size
  with pytest.raises(IndexError): t[Tensor(np.ones((3, 2), bool))]
  with pytest.raises(IndexError): t[[0.5]]
  with pytest.raises(IndexError): t[[0], [1], [2]]

def test_out_of_range_index_tensor_reads_zero():
  # index tensors are not read back to check them (tinygrad): their out-of-range values select 0
  a = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
  np.testing.assert_array_equal(Tensor(a)[Tensor(np.array([2, 3, -1], np.int32))].numpy(), [a[2], np.zeros(4), a[2]])
