"""Kernels over images (IMAGE=1), without a device: the image a tensor becomes, the four lanes a kernel writing an
image is pinned to, and the OpenCL C it renders (read_imagef / write_imagef); and IMAGE=1 on a device without images,
where the same operands are plain buffers."""
import numpy as np
import pytest
from ir.dtype import Image, dtypes
from ir.ops import Ops
from ir.pattern import substitute
from ir.uop import UOp
from codegen.kernel import AxisType, Kernel, KernelOptError, Opt, OptOps
from codegen.ir3 import IR3Renderer
from codegen.ir3_compiler import IR3Compiler, read_lib
from codegen.ir3_assembler import ImageBinding
from codegen.opencl import OpenCLRenderer
from codegen.program import get_program
from drivers.device import image_for
from tg import Context, Tensor

BIG = (16384, 16384)

def test_image_for_gives_a_row_per_picture_line_within_the_limits():
  assert image_for((2, 7, 6, 8), dtypes.float32, BIG) == image_for((2, 7, 6, 8), dtypes.float16, BIG)
  assert (image_for((2, 7, 6, 8), dtypes.float32, BIG).height, image_for((2, 7, 6, 8), dtypes.float32, BIG).width) == (14, 12)
  assert image_for((2, 7, 6, 8), dtypes.float32, (10, 16384)).width == 2         # rows of 12 pixels are too wide: the last axis alone
  assert image_for((2, 7, 6, 8), dtypes.float32, (16384, 10)).height == 2        # 14 rows are too many: wider rows
  assert image_for((2, 7, 6, 8), dtypes.float32, (1, 1)) is None
  assert image_for((3, 6), dtypes.float32, BIG) is None                         # a pixel is 4 elements of the last axis
  assert image_for((2, 8), dtypes.float64, BIG) is None and image_for((2, 8), dtypes.int32, BIG) is None
  assert image_for((2, 8), dtypes.float32, None) is None                       # the device has no images

def kernel_ast(t: Tensor) -> UOp:
  (item,) = [i for i in t.schedule() if i.ast.op is Ops.SINK]
  return item.ast

def as_images(ast: UOp, images: dict[int, Image]) -> UOp:
  """ast with the numbered globals turned into the given images."""
  return substitute(ast, {g: UOp(Ops.DEFINE_GLOBAL, g.dtype.base.ptr(g.dtype.size, image=images[g.arg]), (), g.arg)
                          for g in ast.toposort() if g.op is Ops.DEFINE_GLOBAL and g.arg in images})

def test_a_kernel_writing_an_image_computes_whole_pixels():
  ast = as_images(kernel_ast(Tensor(np.ones((3, 8), np.float32)) * 2), {0: Image(3, 2)})
  k = Kernel(ast, OpenCLRenderer())
  assert k.full_shape[k.vector_axis] == 4 and k.axis_types[k.vector_axis] is AxisType.UPCAST
  other = next(a for a, t in enumerate(k.axis_types) if t is AxisType.GLOBAL)
  k.apply_opt(Opt(OptOps.UPCAST, other, 2))
  with pytest.raises(KernelOptError, match="channels"): k.apply_opt(Opt(OptOps.VECTORIZE, other + 1, 0))
  with pytest.raises(KernelOptError, match="channels"): k.apply_opt(Opt(OptOps.PADTO, k.vector_axis, 8))
  src = get_program(ast, OpenCLRenderer()).src
  assert "write_only image2d_t data0" in src and "__global float *data1" in src
  assert src.count("write_imagef(") == 1 and "(float4)(" in src

def test_a_kernel_reading_an_image_reads_pixels():
  ast = as_images(kernel_ast(Tensor(np.ones((3, 8), np.float32)) * 2), {1: Image(3, 2)})
  src = get_program(ast, OpenCLRenderer()).src
  assert "read_only image2d_t data1" in src and "__global float *data0" in src and "CLK_NORMALIZED_COORDS_FALSE" in src
  assert "read_imagef(data1" in src

def test_ir3_kernels_read_images_with_isam_and_write_them_with_stib():
  ast = as_images(kernel_ast(Tensor(np.ones((3, 8), np.float32)) * 2), {0: Image(3, 2), 1: Image(3, 2)})
  src = get_program(ast, IR3Renderer()).src
  assert "@ibo 0 0 3x2 f32" in src and "@texture 0 1 3x2 f32" in src
  assert src.count("isam (f32)(xyzw)") == 1 and src.count("stib.b.typed.2d.f32.4.imm") == 1 and "ldg" not in src and "stg" not in src
  assert read_lib(IR3Compiler("a630").compile(src)).images == (ImageBinding(False, 0, 1, 3, 2, 4), ImageBinding(True, 0, 0, 3, 2, 4))
  # elements that aren't whole pixels: each one's pixel, then its channel picked
  ast = as_images(kernel_ast(Tensor(np.ones((3, 6), np.float32))[:, 1:5] * 2), {1: Image(3, 3)})
  src = get_program(ast, IR3Renderer()).src
  assert "@texture 0 1 3x3 f32" in src and src.count("isam") >= 2 and "stg.f32" in src

def test_images_a_kernel_cannot_write_are_refused():
  with pytest.raises(ValueError, match="multiple of 4"):  # 5 elements per row: no whole pixels
    Kernel(as_images(kernel_ast(Tensor(np.ones((3, 5), np.float32)) * 2), {0: Image(1, 4)}), OpenCLRenderer())
  t = Tensor(np.ones((2, 8), np.float32)).realize()
  ast = as_images(kernel_ast(t.assign(t + 1)), {0: Image(2, 2)})
  for renderer in (OpenCLRenderer(), IR3Renderer()):
    with pytest.raises(TypeError, match="read it or write it, not both"): get_program(ast, renderer)

def test_image_dot_and_conv_on_a_device_without_images_match_numpy():
  rng = np.random.default_rng(1)
  a, b = rng.standard_normal((2, 5, 6)).astype(np.float32), rng.standard_normal((6, 3)).astype(np.float32)
  x, w = rng.standard_normal((1, 3, 5, 5)).astype(np.float32), rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
  with Context(IMAGE=1):  # on CPU, which has no images, whatever the default device is
    prod = Tensor(a, device="CPU") @ Tensor(b, device="CPU")
    assert not [b for item in prod.schedule() for b in item.bufs if b.image is not None]
    np.testing.assert_allclose(prod.numpy(), a @ b, rtol=1e-5, atol=1e-5)
    conv = Tensor(x, device="CPU").conv2d(Tensor(w, device="CPU"), stride=2).numpy()
  np.testing.assert_allclose(conv, Tensor(x, device="CPU").conv2d(Tensor(w, device="CPU"), stride=2).numpy(), rtol=1e-5, atol=1e-5)
