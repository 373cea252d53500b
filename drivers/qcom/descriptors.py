"""The memory descriptors an Adreno a6xx/a7xx compute shader reads images through (IMAGE=1): a texture descriptor per
image a kernel reads with isam, one sampler, and a UAV (IBO) descriptor per image it writes with stib. Layouts are
Mesa's src/freedreno/registers/adreno/a6xx_descriptors.xml (<domain name="A6XX_TEX_CONST">, <domain
name="A6XX_TEX_SAMP">); an IBO descriptor has the texture descriptor's layout (computerator a6xx.cc cs_ibo_emit
builds one with A6XX_TEX_CONST_* fields). Images are linear (TILE6_LINEAR) rows of RGBA pixels."""
from __future__ import annotations
from ir.dtype import DType, Image, dtypes
from ir.helpers import round_up

DESCRIPTOR_BYTES, SAMPLER_BYTES = 64, 16  # 16 and 4 dwords
PITCH_TEXELS = 16  # a linear image's row pitch is a whole number of 16-texel groups (Mesa fd6_layout.c, linear layouts)
MAX_SIZE = (16384, 16384)  # the largest 2-D image, width and height (Mesa freedreno_screen.c / turnip: 16384 on a6xx and a7xx)
# <enum name="a6xx_format">: RGBA of float32 or float16 channels
FORMATS = {dtypes.float32: 0x82, dtypes.float16: 0x62}  # FMT6_32_32_32_32_FLOAT, FMT6_16_16_16_16_FLOAT
CHANNELS = {dt.itemsize: dt for dt in FORMATS}           # a channel's bytes -> its dtype
TEX_2D = 1               # <enum name="a6xx_tex_type"> A6XX_TEX_2D
SWIZ_XYZW = 0 << 4 | 1 << 7 | 2 << 10 | 3 << 13  # <enum name="a6xx_tex_swiz"> X, Y, Z, W into SWIZ_X/Y/Z/W [6:4] .. [15:13]
CLAMP_TO_EDGE = 1        # <enum name="a6xx_tex_clamp"> A6XX_TEX_CLAMP_TO_EDGE

def pitch(image: Image, dtype: DType) -> int:
  """Bytes from one image row to the next: its pixels, rounded up to PITCH_TEXELS."""
  return round_up(image.width, PITCH_TEXELS) * 4 * dtype.itemsize

def image(image: Image, dtype: DType, swizzle: bool) -> list[int]:
  """The 16 dwords of a texture (swizzle: identity SWIZ_X..W) or IBO descriptor of `image`, its BASE left 0 (dwords 4
  and 5 hold BASE_LO [31:5] and BASE_HI [16:0]; `with_base` fills them): dword 0 TILE_MODE [1:0] = TILE6_LINEAR,
  FMT [29:22], SWAP [31:30] = WZYX (0); dword 1 WIDTH [14:0], HEIGHT [29:15]; dword 2 PITCHALIGN [3:0] left 0,
  PITCH [28:7] in bytes, TYPE [31:29]; dword 5 DEPTH [29:17] = 1."""
  if dtype not in FORMATS: raise TypeError(f"QCOM images hold float32 or float16, not {dtype}")
  if not (0 < image.width <= MAX_SIZE[0] and 0 < image.height <= MAX_SIZE[1]): raise ValueError(f"a {image.width}x{image.height} image is larger than the GPU's {MAX_SIZE[0]}x{MAX_SIZE[1]}")
  words = [0] * 16
  words[0] = FORMATS[dtype] << 22 | (SWIZ_XYZW if swizzle else 0)
  words[1] = image.width | image.height << 15
  words[2] = pitch(image, dtype) << 7 | TEX_2D << 29
  words[5] = 1 << 17
  return words

def with_base(words: list[int], va: int) -> list[int]:
  """`words` (a descriptor from `image`) addressing the image at GPU address va (64-byte aligned)."""
  if va % 64: raise ValueError(f"an image's base {va:#x} must be 64-byte aligned")
  return words[:4] + [va & 0xFFFFFFFF, words[5] | va >> 32] + words[6:]

def sampler() -> list[int]:
  """The 4 dwords of the one sampler isam is given: <domain name="A6XX_TEX_SAMP"> dword 0 XY_MAG [2:1] and XY_MIN [4:3]
  nearest (0), WRAP_S/T/R [7:5] [10:8] [13:11] clamp to edge; the rest 0 (isam reads whole texels by integer coordinate)."""
  return [CLAMP_TO_EDGE << 5 | CLAMP_TO_EDGE << 8 | CLAMP_TO_EDGE << 11, 0, 0, 0]
