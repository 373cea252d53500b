"""The image descriptors the QCOM driver builds (IMAGE=1), against the A6XX_TEX_CONST / A6XX_TEX_SAMP field layouts of
Mesa's a6xx_descriptors.xml computed by hand here, and images' row pitch in memory through the allocator (on the
kgsl model)."""
import numpy as np
import pytest
from ir.dtype import Image, dtypes
from drivers.qcom import descriptors
from tests.drivers.qcom.test_qcom_device import open_qcom

def test_a_texture_descriptor_is_a_linear_2d_rgba_float_image():
  words = descriptors.image(Image(3, 5), dtypes.float32, swizzle=True)
  assert len(words) == 16
  assert words[0] == 0x82 << 22 | 0 << 4 | 1 << 7 | 2 << 10 | 3 << 13    # FMT6_32_32_32_32_FLOAT, swizzle X Y Z W, linear, WZYX
  assert words[1] == 5 | 3 << 15                                           # WIDTH 5, HEIGHT 3
  assert words[2] == 256 << 7 | 1 << 29                                    # 5 pixels padded to 16 of 16 bytes, A6XX_TEX_2D
  assert words[5] == 1 << 17 and not any(words[6:]) and words[3] == words[4] == 0  # DEPTH 1, no base yet

def test_an_ibo_descriptor_has_no_swizzle_and_halves_have_their_format():
  words = descriptors.image(Image(2, 8), dtypes.float16, swizzle=False)
  assert words[0] == 0x62 << 22                                            # FMT6_16_16_16_16_FLOAT
  assert words[2] == 128 << 7 | 1 << 29                                    # 8 pixels padded to 16 of 8 bytes

def test_the_base_address_goes_into_base_lo_and_base_hi():
  words = descriptors.with_base(descriptors.image(Image(1, 4), dtypes.float32, swizzle=True), 0x1_2345_6780)
  assert words[4] == 0x2345_6780 and words[5] == 0x1 | 1 << 17
  with pytest.raises(ValueError, match="64-byte aligned"): descriptors.with_base(words, 0x1000_0020)

def test_images_larger_than_the_gpu_or_of_other_types_are_refused():
  with pytest.raises(ValueError, match="16384x16384"): descriptors.image(Image(1, 16385), dtypes.float32, swizzle=True)
  with pytest.raises(TypeError, match="not dtypes.int"): descriptors.image(Image(1, 4), dtypes.int32, swizzle=True)

def test_the_sampler_is_nearest_and_clamps_to_the_edge():
  assert descriptors.sampler() == [1 << 5 | 1 << 8 | 1 << 11, 0, 0, 0]

def test_image_rows_lie_a_pitch_apart_in_memory():
  dev, model = open_qcom("a630")
  try:
    image = Image(3, 5)  # 80-byte rows, 256 bytes apart
    pixels = np.arange(3 * 5 * 4, dtype=np.float32)
    buf = dev.allocator.alloc(pixels.nbytes, image)
    dev.allocator.copyin(buf, memoryview(pixels).cast("B"))
    memory = buf.view()[:3 * 256].view(np.float32).reshape(3, 64)
    np.testing.assert_array_equal(memory[:, :20], pixels.reshape(3, 20))
    back = np.empty_like(pixels)
    dev.allocator.copyout(memoryview(back).cast("B"), buf)
    np.testing.assert_array_equal(back, pixels)
    with pytest.raises(ValueError, match="part of an image"): dev.allocator.offset(buf, 16, 16)
  finally: model.stop()
