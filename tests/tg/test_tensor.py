"""Tensor construction, data access, dtypes, and autograd semantics."""
import math
import numpy as np
import pytest
from tg import Tensor, dtypes, Context, Device

def test_construct_from_python_and_numpy():
  assert Tensor(3.0).dtype == dtypes.float32 and Tensor(3.0).shape == () and Tensor(3.0).item() == 3.0
  assert Tensor(3).dtype == dtypes.int32 and Tensor(True).dtype == dtypes.bool
  assert Tensor([1, 2]).dtype == dtypes.int32 and Tensor([1, 2.5]).dtype == dtypes.float32 and Tensor([True, False]).dtype == dtypes.bool
  assert Tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
  assert Tensor(b"\x01\x02\xff").dtype == dtypes.uint8 and Tensor(b"\x01\x02\xff").tolist() == [1, 2, 255]
  a = np.arange(6, dtype=np.int16).reshape(2, 3)
  t = Tensor(a)
  assert t.dtype == dtypes.int16 and t.shape == (2, 3) and (t.numpy() == a).all()
  a[0, 0] = 99
  assert t.numpy()[0, 0] == 0, "construction copies"
  assert Tensor(np.float64(2.5) * np.ones(())).item() == 2.5
  assert Tensor([1, 2], dtype="float16").dtype == dtypes.float16
  with Context(DEFAULT_FLOAT="float64"): assert Tensor([1.5]).dtype == dtypes.float64

def test_from_blob_uses_the_callers_memory_in_place():
  a = np.arange(12, dtype=np.float32)
  t = Tensor.from_blob(a.ctypes.data, (3, 4), device="CPU")
  assert t.shape == (3, 4) and t.dtype == dtypes.float32 and (t.numpy() == a.reshape(3, 4)).all()
  a[0] = 100  # nothing was copied: the next kernel reads the new value
  assert (t * 2).numpy()[0, 0] == 200
  t.assign(t + 1).realize()
  Device["CPU"].synchronize()  # the kernel wrote the caller's array; read it once the device is done
  assert a[0] == 101 and (a[1:] == np.arange(1, 12) + 1).all()
  ints = np.arange(6, dtype=np.int16)
  assert Tensor.from_blob(ints.ctypes.data, (2, 3), device="CPU", dtype="int16").sum().item() == 15
  del t
  assert a[0] == 101, "the memory stays the caller's"

def test_from_blob_errors(tmp_path):
  a = np.zeros(8, dtype=np.float32)
  with pytest.raises(ValueError, match="needs a host address"): Tensor.from_blob(0, (4,), device="CPU")
  with pytest.raises(ValueError, match="not aligned to dtypes.float's 4 bytes"): Tensor.from_blob(a.ctypes.data + 2, (2,), device="CPU")
  with pytest.raises(ValueError, match="DISK.* can't use host memory in place"): Tensor.from_blob(a.ctypes.data, (4,), device=f"DISK:{tmp_path / 'x'}")
  with pytest.raises(ValueError, match="on one device"): Tensor.from_blob(a.ctypes.data, (4,), device=("CPU:0", "CPU:1"))

def test_construction_errors():
  with pytest.raises(ValueError, match="ragged"): Tensor([[1, 2], [3]])
  with pytest.raises(TypeError): Tensor({"a": 1})
  with pytest.raises(KeyError, match="TPU"): Tensor([1], device="TPU")
  with pytest.raises(ValueError, match="floaty"): Tensor([1], dtype="floaty")

def test_low_precision_roundtrip():
  x = np.array([1.0, 1 / 3, -2.5, 65504.0, 1e-3], dtype=np.float32)
  np.testing.assert_array_equal(Tensor(x, dtype="half").numpy(), x.astype(np.float16))
  bf = Tensor(x, dtype="bfloat16").numpy()
  assert bf.dtype == np.float32 and bf[0] == 1.0 and abs(bf[1] - 1 / 3) < 2**-8 and bf[2] == -2.5
  assert (Tensor(x, dtype="bfloat16") * 2).numpy()[2] == -5.0
  f8 = Tensor([1.0, 0.5, -448.0, 1000.0], dtype="fp8e4m3").numpy()
  assert f8.tolist() == [1.0, 0.5, -448.0, 448.0]

def test_data_access():
  t = Tensor([[1.5, 2.5]])
  with pytest.raises(ValueError, match=r"\(1, 2\)"): t.item()
  assert Tensor([[7]]).item() == 7 and isinstance(Tensor([[7]]).item(), int)
  assert t.data().tolist() == [[1.5, 2.5]] and t.data().format == "f"
  with pytest.raises(TypeError): bool(t)
  with pytest.raises(TypeError): len(Tensor(1.0))
  assert len(t) == 1 and t.ndim == 2 and t.numel() == 2 and t.nbytes == 8 and t.element_size() == 4

def test_properties_and_plumbing():
  t = Tensor.ones(2, 3)
  assert t.device == "CPU" and t.to("cpu") is t and t.shape == (2, 3) and t.size() == (2, 3) and t.size(1) == 3
  c = t.clone()
  c.assign(c * 5).realize()
  assert t.sum().item() == 6 and c.sum().item() == 30
  r = Tensor([1.0, 2.0]).contiguous().realize()
  r.replace(Tensor([3.0, 4.0]))
  assert r.tolist() == [3.0, 4.0]
  with pytest.raises(ValueError): r.replace(Tensor([1.0]))

def test_requires_grad_pytorch_semantics():
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  w = Tensor([0.5, 0.5, 0.5])
  y = x * w
  assert x.requires_grad and x.is_leaf and not w.requires_grad and y.requires_grad and not y.is_leaf
  y.sum().backward()
  assert x.grad.tolist() == [0.5, 0.5, 0.5] and w.grad is None and y.grad is None
  (x * x).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [2.5, 4.5, 6.5]), "grads accumulate"
  with pytest.raises(RuntimeError, match="floating point"): Tensor([1, 2], requires_grad=True)
  with pytest.raises(RuntimeError, match="does not require grad"): (w * 2).sum().backward()
  with pytest.raises(RuntimeError, match="non-scalar"): (x * 2).backward()

def test_gradient_on_any_tensor_and_detach():
  x = Tensor([1.0, 2.0])
  y = x * x * 3
  gx, = y.sum().gradient(x)
  assert gx.tolist() == [6.0, 12.0]
  z = (x.detach() * x).sum()
  assert z.gradient(x)[0].tolist() == [1.0, 2.0]
  g = (x * 2).gradient(x, gradient=Tensor([1.0, 10.0]))[0]
  assert g.tolist() == [2.0, 20.0]
  with pytest.raises(RuntimeError, match="only float"): Tensor([1, 2]).sum().gradient(x)

def test_backward_after_realize_and_through_realized_intermediates():
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  h = (x * x).realize()
  loss = (h * 2).sum()
  assert loss.item() == 28.0
  loss.backward()
  assert x.grad.tolist() == [4.0, 8.0, 12.0]

def test_lazy_parameter_then_realized():
  w = Tensor.ones(3, requires_grad=True) * 1  # not a leaf
  p = Tensor.rand(3, requires_grad=True)
  loss = (p * 2).sum()
  p.realize()
  loss.backward()
  assert p.grad.tolist() == [2.0, 2.0, 2.0] and w.grad is None

def test_inplace_operators_assign():
  t = Tensor([1.0, 2.0]).contiguous().realize()
  t += 1
  t *= 2
  assert t.tolist() == [4.0, 6.0]

def test_nan_and_inf_behaviour():
  assert math.isnan(Tensor(-1.0).sqrt().item()) and Tensor(1.0).div(0).item() == math.inf
  assert math.isnan(Tensor(-8.0).pow(1 / 3).item()) and Tensor(-2.0).pow(3).item() == -8.0
  assert Tensor([-3, 3]).floordiv(2).tolist() == [-2, 1] and Tensor([-3]).mod(2).tolist() == [1]
  assert Tensor([0.5, 1.5, 2.5, -0.5]).round().tolist() == [0.0, 2.0, 2.0, -0.0]

def test_int_division_by_zero_does_not_crash():
  out = (Tensor([7, -7, 3]) // Tensor([0, 0, 0])).numpy()
  assert out.shape == (3,)
  assert (Tensor([-2**31], dtype="int32") // Tensor([-1])).numpy().shape == (1,)

def test_backward_after_assign_reaches_the_leaf():
  w = Tensor([1., 2.], requires_grad=True).realize()
  loss = (w * w).sum()
  w.assign(Tensor([5., 5.]))  # the loss was built from the old value, which it still names
  loss.backward()
  np.testing.assert_array_equal(w.grad.numpy(), [2., 4.])

def test_assigning_a_value_that_requires_grad_carries_its_graph():
  for realized in (True, False):
    a, b = Tensor([1., 2.]), Tensor([3., 4.], requires_grad=True)
    if realized: a.realize()
    a.assign(b * 3)
    (a * 2).sum().backward()
    np.testing.assert_array_equal(b.grad.numpy(), [6., 6.])

def test_numpy_scalars_combine_like_python_scalars():
  t = Tensor([1.0, 2.0])
  np.testing.assert_array_equal((t * np.float32(2)).numpy(), [2.0, 4.0])
  np.testing.assert_array_equal((np.int64(3) + Tensor([1, 2])).numpy(), [4, 5])
  assert (Tensor([1, 2]) + np.int64(3)).dtype == Tensor([1]).dtype  # a scalar doesn't promote the tensor's dtype

def test_tensors_made_alike_stay_independent_through_realize_and_assign():
  """Two Tensor.zeros(3) are one lazy value; realizing them (together, one after the other, or only one) must not make
  them share memory, or an assign to one (a BatchNorm bias and its running mean) would change the other."""
  for realize in (lambda a, b: Tensor.realize_all(a, b), lambda a, b: (a.realize(), b.realize()), lambda a, b: a.realize()):
    a, b = Tensor.zeros(3), Tensor.zeros(3)
    realize(a, b)
    a.assign(Tensor([1.0, 2.0, 3.0])).realize()
    np.testing.assert_array_equal(a.numpy(), [1, 2, 3])
    np.testing.assert_array_equal(b.numpy(), [0, 0, 0])
  a = Tensor.ones(2, 2)
  c = a * 2
  a.realize()
  np.testing.assert_array_equal(c.numpy(), np.full((2, 2), 2))  # a graph using the value still reads the realized buffer

def test_clone_is_a_copy_of_its_own_with_gradients():
  a = Tensor([1.0, 2.0, 3.0]).realize()
  b = a.clone().realize()
  a.assign(Tensor([7.0, 8.0, 9.0])).realize()
  np.testing.assert_array_equal(b.numpy(), [1, 2, 3])
  x = Tensor([1.0, 2.0], requires_grad=True)
  (x.clone() * 3).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [3, 3])
