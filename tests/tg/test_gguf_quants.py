"""gguf_load's quantized types against the reference: files written by the `gguf` package (llama.cpp's gguf-py), blocks made
by its quantizers where it has one and otherwise random bytes with finite scales (every bit pattern of the codes), and the
values compared with its dequantize."""
import numpy as np
import pytest
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize
from tg import dtypes
from tg.nn.gguf import gguf_load

# where each type keeps its float16 scales: (byte offset in the block, count)
F16_FIELDS = {Q.Q2_K: [(80, 2)], Q.Q3_K: [(108, 1)], Q.Q5_K: [(0, 2)], Q.IQ4_NL: [(0, 1)], Q.IQ4_XS: [(0, 1)]}

def write(path, tensors: dict) -> None:
  """tensors: name -> (ggml type, numpy array: float32 values for F32, raw uint8 blocks (rows, bytes per row) otherwise)."""
  w = gguf.GGUFWriter(str(path), "llama")
  for name, (qtype, data) in tensors.items(): w.add_tensor(name, data, raw_dtype=None if qtype == Q.F32 else qtype)
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()

def random_blocks(qtype, rows: int, blocks_per_row: int, rng) -> np.ndarray:
  """Random bytes for `rows` rows of blocks, with each float16 scale a finite value of either sign."""
  _, size = gguf.GGML_QUANT_SIZES[qtype]
  raw = rng.integers(0, 256, (rows * blocks_per_row, size), dtype=np.uint8)
  for at, count in F16_FIELDS[qtype]:
    raw[:, at:at + 2 * count] = rng.uniform(-0.05, 0.05, (len(raw), count)).astype(np.float16).view(np.uint8)
  return raw.reshape(rows, blocks_per_row * size)

@pytest.mark.parametrize("qtype", [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.MXFP4], ids=lambda q: q.name)
def test_quantized_by_the_reference(tmp_path, qtype):
  rng = np.random.default_rng(qtype.value)
  x = (rng.standard_normal((3, 96)) * np.array([[1e-3], [1.0], [300.0]])).astype(np.float32)  # small, unit and large scales
  x[1, :32] = 0  # an all-zero block (its scale is 0)
  blocks = quantize(x, qtype)
  write(tmp_path / "q.gguf", {"w": (qtype, blocks)})
  _, out = gguf_load(tmp_path / "q.gguf")
  assert out["w"].shape == (3, 96) and out["w"].dtype == dtypes.float32
  got, want = out["w"].numpy(), dequantize(blocks, qtype)
  np.testing.assert_array_equal(got, want)
  assert np.abs(got - x).max() <= 0.25 * np.abs(x).max(), "the values are near what was quantized"

@pytest.mark.parametrize("qtype", [Q.Q2_K, Q.Q3_K, Q.Q5_K, Q.IQ4_NL, Q.IQ4_XS], ids=lambda q: q.name)
def test_random_blocks(tmp_path, qtype):
  rng = np.random.default_rng(100 + qtype.value)
  block, _ = gguf.GGML_QUANT_SIZES[qtype]
  raw = random_blocks(qtype, 3, 512 // block, rng)
  write(tmp_path / "r.gguf", {"w": (qtype, raw)})
  _, out = gguf_load(tmp_path / "r.gguf")
  assert out["w"].shape == (3, 512)
  want = dequantize(raw, qtype)
  assert np.isfinite(want).all() and np.abs(want).max() > 0
  np.testing.assert_array_equal(out["w"].numpy(), want)

def test_mxfp4_every_exponent(tmp_path):
  """Every e8m0 exponent byte, subnormal scales (0, 1) and the largest included, with every 4-bit code."""
  raw = np.zeros((256, 17), np.uint8)
  raw[:, 0] = np.arange(256)
  raw[:, 1:] = (np.arange(16, dtype=np.uint8) * 17)[None]  # bytes 0x00, 0x11, ..., 0xff: each code in both nibbles
  write(tmp_path / "m.gguf", {"w": (Q.MXFP4, raw.reshape(8, 32 * 17))})
  _, out = gguf_load(tmp_path / "m.gguf")
  with np.errstate(over="ignore"): want = dequantize(raw.reshape(8, 32 * 17), Q.MXFP4)
  np.testing.assert_array_equal(out["w"].numpy(), want)
  per_block = want.reshape(256, 32)  # block e has scale 2**(e - 128); element j < 16 has code j
  assert per_block[0, 1] == 2.0 ** -128 and per_block[200, 7] == 12 * 2.0 ** 72 and per_block[255, 31] == -np.inf  # -12 * 2**127 overflows

def test_unsupported_type_names_itself_and_partial_load_skips_it(tmp_path):
  rng = np.random.default_rng(3)
  x = rng.standard_normal((2, 64)).astype(np.float32)
  iq2 = rng.integers(0, 256, (1, 66), dtype=np.uint8)
  write(tmp_path / "p.gguf", {"before": (Q.F32, x), "iq2": (Q.IQ2_XXS, iq2), "after": (Q.Q5_0, quantize(x, Q.Q5_0))})
  with pytest.raises(ValueError, match=r"p\.gguf: tensor 'iq2' has ggml type IQ2_XXS \(id 16\), which can't be loaded yet.*skip_unsupported=True"):
    gguf_load(tmp_path / "p.gguf")
  with pytest.warns(UserWarning, match=r"1 tensors not loaded: tensor 'iq2' has ggml type IQ2_XXS"):
    _, out = gguf_load(tmp_path / "p.gguf", skip_unsupported=True)
  assert list(out) == ["before", "after"]
  np.testing.assert_array_equal(out["before"].numpy(), x)
  np.testing.assert_array_equal(out["after"].numpy(), dequantize(quantize(x, Q.Q5_0), Q.Q5_0))
