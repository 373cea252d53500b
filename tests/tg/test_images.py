"""IMAGE=1 and FLOAT16=1 on the default device, where it has images (test_on_other_devices runs this file on DEV=CL,
a real OpenCL runtime, and on the QCOM model): dot and conv2d become image_dot/image_conv2d, whose packed operands and
result live in 2-D RGBA images (half ones with FLOAT16=1) that kernels read as images (CL read_imagef, QCOM isam)
and write as images (write_imagef, stib). Checked against numpy or the CPU device, with gradients and the JIT (and
BEAM, marked slow)."""
import numpy as np
import pytest
from ir.ops import Ops
from tg import Context, Device, Tensor, TinyJit
from drivers.device import Image

DEVICE = Device.DEFAULT
pytestmark = pytest.mark.skipif(Device[DEVICE].image_size is None, reason=f"{DEVICE} has no images (DEV=CL or DEV=MOCK+QCOM do)")
rng = np.random.default_rng(0)

def conv_reference(x: np.ndarray, w: np.ndarray, groups: int, stride: int, padding: int) -> np.ndarray:
  """Direct convolution in float64 (NCHW, weight (cout, cin/groups, H, W))."""
  bs, cin, iy, ix = x.shape
  cout, cin_g, H, W = w.shape
  xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
  oy, ox = (xp.shape[2] - H) // stride + 1, (xp.shape[3] - W) // stride + 1
  out = np.zeros((bs, cout, oy, ox))
  for o in range(cout):
    g = o // (cout // groups)
    for i in range(oy):
      for j in range(ox):
        window = xp[:, g * cin_g:(g + 1) * cin_g, i * stride:i * stride + H, j * stride:j * stride + W]
        out[:, o, i, j] = (window * w[o]).sum(axis=(1, 2, 3))
  return out

def images_written(t: Tensor) -> list[Image]:
  """The images the schedule realizing t writes."""
  return [b.image for item in t.schedule() if item.ast.op is Ops.SINK for b in item.bufs[:len(item.ast.src)] if b.image is not None]

@pytest.mark.parametrize("groups, stride, padding, cin, cout", [(1, 1, 1, 3, 5), (2, 2, 0, 6, 10), (4, 1, 2, 4, 4)])
def test_conv2d_through_images_matches_numpy(groups, stride, padding, cin, cout):
  x = rng.standard_normal((2, cin, 7, 6)).astype(np.float32)
  w = rng.standard_normal((cout, cin // groups, 3, 3)).astype(np.float32)
  b = rng.standard_normal(cout).astype(np.float32)
  with Context(IMAGE=1):
    out = Tensor(x, device=DEVICE).conv2d(Tensor(w, device=DEVICE), Tensor(b, device=DEVICE), groups=groups, stride=stride, padding=padding)
    images = images_written(out)
    got = out.numpy()
  # the input (NHWC, channels padded to 4 per group), the weight (cout, H, W, cin) and the output are images
  assert len(images) == 3 and Image(2 * 7, 6 * groups) in images, images
  np.testing.assert_allclose(got, conv_reference(x, w, groups, stride, padding) + b.reshape(1, -1, 1, 1), rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("a_shape, b_shape", [((5, 13), (13, 6)), ((13,), (13, 3)), ((3, 2, 7), (7, 5)), ((2, 3, 9), (2, 9, 4)), ((4, 9), (9,))])
def test_matmul_through_images_matches_numpy(a_shape, b_shape):
  a, b = rng.standard_normal(a_shape).astype(np.float32), rng.standard_normal(b_shape).astype(np.float32)
  with Context(IMAGE=1):
    out = Tensor(a, device=DEVICE) @ Tensor(b, device=DEVICE)
    assert images_written(out)
    got = out.numpy()
  np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)

def test_float16_images_hold_halves():
  """FLOAT16=1: the operands are rounded to half on their way into the images and the result on its way out; the sum
  in between is float32."""
  a, b = rng.standard_normal((6, 20)).astype(np.float32), rng.standard_normal((20, 8)).astype(np.float32)
  with Context(IMAGE=1, FLOAT16=1):
    out = Tensor(a, device=DEVICE) @ Tensor(b, device=DEVICE)
    buffers = [b for item in out.schedule() if item.ast.op is Ops.SINK for b in item.bufs[:1] if b.image is not None]
    got = out.numpy()
  assert buffers and all(b.dtype.itemsize == 2 for b in buffers)
  exact = a.astype(np.float16).astype(np.float64) @ b.astype(np.float16).astype(np.float64)
  np.testing.assert_allclose(got, exact.astype(np.float16), rtol=2e-3, atol=2e-3)
  assert not np.array_equal(got, (a @ b).astype(np.float16))  # really rounded on the way in, not computed from the originals

def test_image_tensors_read_back_slice_and_take_assigns():
  a = np.arange(96, dtype=np.float32).reshape(2, 3, 16)
  t = Tensor(a, device=DEVICE)._as_image().realize()
  assert t.uop.base.arg[0].image == Image(2, 12)
  np.testing.assert_array_equal(t.numpy(), a)
  np.testing.assert_array_equal(t[1:, :, 4:9].numpy(), a[1:, :, 4:9])  # a part of an image is read by a kernel, not viewed
  t.assign(t + 1).realize()  # a kernel can't read and write one image: the value is stored first
  np.testing.assert_array_equal(t.numpy(), a + 1)
  t.assign(t.flip(2)).realize()
  np.testing.assert_array_equal(t.numpy(), (a + 1)[:, :, ::-1])

def conv_and_gradients(device: str, x: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
  X, W = Tensor(x, device=device, requires_grad=True), Tensor(w, device=device, requires_grad=True)
  y = X.conv2d(W, padding=1)
  (y * y).sum().backward()
  return [y.numpy(), X.grad.numpy(), W.grad.numpy()]

def test_gradients_flow_through_images():
  x, w = rng.standard_normal((1, 4, 6, 6)).astype(np.float32), rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
  with Context(IMAGE=1): got = conv_and_gradients(DEVICE, x, w)
  for g, want in zip(got, conv_and_gradients("CPU", x, w)): np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4)

@pytest.mark.slow  # BEAM compiles every candidate (about a minute on PoCL)
def test_beam_searches_image_kernels():
  x, w = rng.standard_normal((1, 4, 6, 6)).astype(np.float32), rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
  with Context(IMAGE=1, BEAM=1): got = conv_and_gradients(DEVICE, x, w)
  for g, want in zip(got, conv_and_gradients("CPU", x, w)): np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4)

def test_jit_replays_image_kernels():
  w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
  with Context(IMAGE=1):
    weight = Tensor(w, device=DEVICE).realize()
    step = TinyJit(lambda x: x.conv2d(weight, padding=1).relu())
    for i in range(4):
      x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
      np.testing.assert_allclose(step(Tensor(x, device=DEVICE)).numpy(), np.maximum(conv_reference(x, w, 1, 1, 1), 0), rtol=1e-5, atol=1e-5)
  assert step.captured is not None and step.captured.kernel_count >= 3  # replayed, not rerun eagerly
