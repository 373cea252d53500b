"""GGUF (v2 and v3, little-endian) model files: `gguf_load` returns the metadata key/values and the tensors.

Layout (all little-endian): magic "GGUF", uint32 version, uint64 tensor count, uint64 metadata count; the metadata
(key string, uint32 value type, value); one info per tensor (name string, uint32 n_dims, uint64 dims with the
fastest-varying first, uint32 ggml type, uint64 offset into the data section); padding up to `general.alignment`
(default 32); the data section. Strings are a uint64 byte length and UTF-8 bytes.

Unquantized tensors come back as lazy views of the file (on DISK for a path). Quantized ones are copied to the
compute device as raw blocks and dequantized there with Tensor ops (bitcasts, shifts, masks, multiplies) into
float32; nothing is decoded on the host."""
from __future__ import annotations
import os, struct, warnings
from typing import Any, Callable
from ir.dtype import DType, dtypes
from drivers.device import Device
from tg.tensor import Tensor
from tg.nn.tar import ByteSource

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

# metadata value types: id -> (name, struct code or None for the variable-size ones)
VALUE_TYPES: dict[int, tuple[str, str | None]] = {
  0: ("uint8", "B"), 1: ("int8", "b"), 2: ("uint16", "H"), 3: ("int16", "h"), 4: ("uint32", "I"), 5: ("int32", "i"),
  6: ("float32", "f"), 7: ("bool", "?"), 8: ("string", None), 9: ("array", None), 10: ("uint64", "Q"), 11: ("int64", "q"),
  12: ("float64", "d")}

# ggml tensor types: id -> (name, elements per block, bytes per block); only some of them can be loaded
GGML_TYPES: dict[int, tuple[str, int, int]] = {
  0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24),
  8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
  13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292), 16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74),
  18: ("IQ3_XXS", 256, 98), 19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110), 22: ("IQ2_S", 256, 82),
  23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8),
  29: ("IQ1_M", 256, 56), 30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66), 39: ("MXFP4", 32, 17),
  40: ("NVFP4", 64, 36)}

PLAIN_TYPES: dict[int, DType] = {0: dtypes.float32, 1: dtypes.float16, 24: dtypes.int8, 25: dtypes.int16, 26: dtypes.int32,
                                 27: dtypes.int64, 28: dtypes.float64, 30: dtypes.bfloat16}

class _Cursor:
  """Sequential little-endian reads from a ByteSource; every error names the offset it happened at."""
  def __init__(self, src: ByteSource): self.src, self.pos = src, 0
  def take(self, n: int, what: str) -> bytes:
    out = self.src.read(self.pos, n, what)
    self.pos += n
    return out
  def scalar(self, code: str, what: str) -> Any: return struct.unpack("<" + code, self.take(struct.calcsize(code), what))[0]
  def string(self, what: str) -> str | bytes:
    at = self.pos
    n = self.scalar("Q", f"length of {what}")
    if n > self.src.size - self.pos:
      raise ValueError(f"{self.src.name}: {what} at offset {at} claims {n} bytes, past the end of the file ({self.src.size} bytes)")
    raw = self.take(n, what)
    try: return raw.decode("utf-8")
    except UnicodeDecodeError: return raw  # not valid UTF-8: keep the bytes rather than guess

  def value(self, vtype: int, what: str, depth: int = 0) -> Any:
    if vtype not in VALUE_TYPES: raise ValueError(f"{self.src.name}: {what} has unknown value type {vtype} at offset {self.pos - 4}")
    name, code = VALUE_TYPES[vtype]
    if code is not None: return self.scalar(code, what)
    if name == "string": return self.string(what)
    if depth > 8: raise ValueError(f"{self.src.name}: {what} nests arrays more than 8 deep at offset {self.pos}")
    at = self.pos
    etype, count = self.scalar("I", f"element type of {what}"), self.scalar("Q", f"length of {what}")
    if etype not in VALUE_TYPES: raise ValueError(f"{self.src.name}: array {what} at offset {at} has unknown element type {etype}")
    ecode = VALUE_TYPES[etype][1]
    if ecode is not None:  # fixed-size elements: one read
      size = struct.calcsize(ecode)
      if count > (self.src.size - self.pos) // size:
        raise ValueError(f"{self.src.name}: array {what} at offset {at} claims {count} elements, past the end of the file ({self.src.size} bytes)")
      return list(struct.unpack(f"<{count}{ecode}", self.take(count * size, what)))
    if count > self.src.size - self.pos:  # every string or array element takes at least 8 bytes
      raise ValueError(f"{self.src.name}: array {what} at offset {at} claims {count} elements, past the end of the file ({self.src.size} bytes)")
    return [self.value(etype, f"{what}[{i}]", depth + 1) for i in range(count)]

# ---------------- dequantization (Tensor ops on raw blocks: uint8 (blocks, bytes per block)) ----------------
def _half(raw: Tensor, at: int) -> Tensor:
  """The float16 at byte `at` of every block, as a float32 (blocks, 1) column."""
  return raw[:, at:at + 2].bitcast(dtypes.float16).cast(dtypes.float32)

def _nibbles(q: Tensor) -> tuple[Tensor, Tensor]: return q & 0xF, q >> 4

def _split_nibbles(q: Tensor) -> Tensor:
  """(blocks, 16) bytes as 32 values: element j < 16 is the low nibble of byte j, element j + 16 the high one."""
  lo, hi = _nibbles(q)
  return lo.stack(hi, dim=1).reshape(q.shape[0], 32)

def _fields(x: Tensor, width: int, dim: int) -> Tensor:
  """The `width`-bit fields of each byte, lowest first, stacked along a new axis `dim`."""
  mask = (1 << width) - 1
  return Tensor.stack(*[(x >> s) & mask for s in range(0, 8, width)], dim=dim)

def _lookup(table: tuple[int, ...], q: Tensor) -> Tensor:
  """table[q] for 4-bit codes q, as float32."""
  return Tensor(list(table), dtype=dtypes.float32, device=q.device)[q.cast(dtypes.int32)]

def _q8_0(raw: Tensor) -> Tensor:
  # d (f16), 32 x int8: x = d * q
  return _half(raw, 0) * raw[:, 2:34].bitcast(dtypes.int8).cast(dtypes.float32)

def _q4_0(raw: Tensor) -> Tensor:
  # d (f16), 16 bytes of nibbles: x = d * (q - 8)
  return _half(raw, 0) * (_split_nibbles(raw[:, 2:18]).cast(dtypes.float32) - 8)

def _q4_1(raw: Tensor) -> Tensor:
  # d (f16), m (f16), 16 bytes of nibbles laid out as in Q4_0; x = d * q + m
  return _half(raw, 0) * _split_nibbles(raw[:, 4:20]).cast(dtypes.float32) + _half(raw, 2)

def _q5(raw: Tensor, at: int) -> Tensor:
  """Q5_0/Q5_1 5-bit codes: bit j of the little-endian uint32 at `at` is element j's fifth bit; nibbles follow as in Q4_0."""
  high = _fields(raw[:, at:at + 4], 1, 2).reshape(raw.shape[0], 32)
  return (_split_nibbles(raw[:, at + 4:at + 20]) | (high << 4)).cast(dtypes.float32)

def _q5_0(raw: Tensor) -> Tensor: return _half(raw, 0) * (_q5(raw, 2) - 16)  # d (f16), high bits, nibbles: x = d * (q - 16)
def _q5_1(raw: Tensor) -> Tensor: return _half(raw, 0) * _q5(raw, 4) + _half(raw, 2)  # d, m (f16), high bits, nibbles: x = d * q + m

def _k_scales_mins(raw: Tensor, at: int) -> tuple[Tensor, Tensor]:
  """Q4_K/Q5_K's 12 bytes s of 6-bit scales and mins for 8 sub-blocks, as float32 (blocks, 8, 1) each: sub-block j < 4 has
  scale s[j] & 63, min s[j+4] & 63; j >= 4 has scale (s[j+4] & 15) | (s[j-4] >> 6) << 4 and min (s[j+4] >> 4) | (s[j] >> 6) << 4."""
  n = raw.shape[0]
  a, b, c = raw[:, at:at + 4], raw[:, at + 4:at + 8], raw[:, at + 8:at + 12]
  scale = (a & 63).cat((c & 15) | ((a >> 6) << 4), dim=1).cast(dtypes.float32).reshape(n, 8, 1)
  mins = (b & 63).cat((c >> 4) | ((b >> 6) << 4), dim=1).cast(dtypes.float32).reshape(n, 8, 1)
  return scale, mins

def _q2_k(raw: Tensor) -> Tensor:
  # super-block of 256 = 16 sub-blocks of 16: 16 bytes of (scale | min << 4), 64 bytes of 2-bit codes, d, dmin (f16).
  # Each 32-byte half of the codes holds 128 elements: bits 2k..2k+1 of byte l are element 32*k + l. x = d * scale * q - dmin * min
  n = raw.shape[0]
  q = _fields(raw[:, 16:80].reshape(n, 2, 32), 2, 2).reshape(n, 16, 16).cast(dtypes.float32)
  sc = raw[:, 0:16].reshape(n, 16, 1)
  d, dmin = _half(raw, 80).reshape(n, 1, 1), _half(raw, 82).reshape(n, 1, 1)
  return (d * (sc & 15).cast(dtypes.float32) * q - dmin * (sc >> 4).cast(dtypes.float32)).reshape(n, 256)

def _q3_k(raw: Tensor) -> Tensor:
  # super-block of 256 = 16 sub-blocks of 16: 32 bytes hmask, 64 bytes of 2-bit codes (laid out as in Q2_K), 12 bytes of
  # 6-bit scales, d (f16). Element 32*k + l has its hmask bit in bit k of byte l; q = low 2 bits - 4 when that bit is 0.
  # Scale i: low 4 bits are nibble i // 8 of byte i % 8, high 2 bits are bits 2*(i // 4) of byte 8 + i % 4; x = d * (scale - 32) * q
  n = raw.shape[0]
  low = _fields(raw[:, 32:96].reshape(n, 2, 32), 2, 2).reshape(n, 256).cast(dtypes.float32)
  hbit = _fields(raw[:, 0:32], 1, 1).reshape(n, 256).cast(dtypes.float32)
  q = (low - 4 + 4 * hbit).reshape(n, 16, 16)
  sl, sh = _fields(raw[:, 96:104], 4, 1).reshape(n, 16), _fields(raw[:, 104:108], 2, 1).reshape(n, 16)
  scale = (sl | (sh << 4)).cast(dtypes.float32).reshape(n, 16, 1) - 32
  return (_half(raw, 108).reshape(n, 1, 1) * scale * q).reshape(n, 256)

def _q4_k(raw: Tensor) -> Tensor:
  # super-block of 256 = 8 sub-blocks of 32: d, dmin (f16), 12 bytes of scales and mins, 128 bytes of nibbles. Each 32-byte
  # run of nibbles holds two sub-blocks: low nibbles, then high. x = d * scale * q - dmin * min
  n = raw.shape[0]
  scale, mins = _k_scales_mins(raw, 4)
  lo, hi = _nibbles(raw[:, 16:144].reshape(n, 4, 32))
  q = lo.stack(hi, dim=2).reshape(n, 8, 32).cast(dtypes.float32)
  d, dmin = _half(raw, 0).reshape(n, 1, 1), _half(raw, 2).reshape(n, 1, 1)
  return ((d * scale) * q - dmin * mins).reshape(n, 256)

def _q5_k(raw: Tensor) -> Tensor:
  # as Q4_K with 32 bytes of fifth bits before the nibbles: element l of sub-block j has its fifth bit in bit j of byte l
  n = raw.shape[0]
  scale, mins = _k_scales_mins(raw, 4)
  lo, hi = _nibbles(raw[:, 48:176].reshape(n, 4, 32))
  q = (lo.stack(hi, dim=2).reshape(n, 8, 32) | (_fields(raw[:, 16:48], 1, 1) << 4)).cast(dtypes.float32)
  d, dmin = _half(raw, 0).reshape(n, 1, 1), _half(raw, 2).reshape(n, 1, 1)
  return ((d * scale) * q - dmin * mins).reshape(n, 256)

def _q6_k(raw: Tensor) -> Tensor:
  # super-block of 256 as two halves of 128: 128 bytes of low 4 bits (64 per half, as two runs of 32), 64 bytes of high
  # 2 bits (32 per half), 16 int8 scales (one per 16 elements), d (f16). In a half, element 32*k + l (k < 4, l < 32)
  # with k = 2*nibble + run takes that nibble of low byte 32*run + l and bits 2k..2k+1 of high byte l.
  # x = d * scale[element // 16] * (q - 32)
  n = raw.shape[0]
  lo, hi = _nibbles(raw[:, 0:128].reshape(n, 2, 2, 32))  # (half, run, l)
  low = lo.stack(hi, dim=2).reshape(n, 2, 4, 32)  # (half, 2*nibble + run, l)
  high = _fields(raw[:, 128:192].reshape(n, 2, 32), 2, 2)  # (half, k, l)
  q = (low | (high << 4)).cast(dtypes.float32).reshape(n, 16, 16) - 32
  scale = raw[:, 192:208].bitcast(dtypes.int8).cast(dtypes.float32).reshape(n, 16, 1)
  return ((_half(raw, 208).reshape(n, 1, 1) * scale) * q).reshape(n, 256)

# the 16 non-linear levels of IQ4_NL/IQ4_XS codes, and MXFP4's e2m1 values doubled (ggml's tables)
IQ4_LEVELS = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)
E2M1_DOUBLED = (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)

def _iq4_nl(raw: Tensor) -> Tensor:
  # d (f16), 16 bytes of nibbles laid out as in Q4_0: x = d * IQ4_LEVELS[q]
  return _half(raw, 0) * _lookup(IQ4_LEVELS, _split_nibbles(raw[:, 2:18]))

def _iq4_xs(raw: Tensor) -> Tensor:
  # super-block of 256 = 8 sub-blocks of 32: d (f16), uint16 of high scale bits (2 per sub-block), 4 bytes of low scale
  # nibbles (sub-block j: nibble j % 2 of byte j // 2), 128 bytes: 16 per sub-block laid out as in Q4_0.
  # x = d * (scale - 32) * IQ4_LEVELS[q]
  n = raw.shape[0]
  scale = (_fields(raw[:, 4:8], 4, 2).reshape(n, 8) | (_fields(raw[:, 2:4], 2, 2).reshape(n, 8) << 4)).cast(dtypes.float32) - 32
  lo, hi = _nibbles(raw[:, 8:136].reshape(n, 8, 16))
  q = _lookup(IQ4_LEVELS, lo.stack(hi, dim=2).reshape(n, 8, 32))
  return (_half(raw, 0).reshape(n, 1, 1) * scale.reshape(n, 8, 1) * q).reshape(n, 256)

def _mxfp4(raw: Tensor) -> Tensor:
  # e8m0 exponent byte e, 16 bytes of e2m1 codes laid out as in Q4_0: x = 2**(e - 128) * E2M1_DOUBLED[q]. 2**(e - 128) is
  # built from its float32 bits: a subnormal 0x200000 << e for e < 2, else exponent field e - 1
  e = raw[:, 0:1].cast(dtypes.uint32)
  scale = (e < 2).where(0x200000 * (e + 1), (e - 1) * (1 << 23)).cast(dtypes.uint32).bitcast(dtypes.float32)
  return scale * _lookup(E2M1_DOUBLED, _split_nibbles(raw[:, 1:17]))

DEQUANTIZERS: dict[int, Callable[[Tensor], Tensor]] = {2: _q4_0, 3: _q4_1, 6: _q5_0, 7: _q5_1, 8: _q8_0, 10: _q2_k, 11: _q3_k, 12: _q4_k,
                                                       13: _q5_k, 14: _q6_k, 20: _iq4_nl, 23: _iq4_xs, 39: _mxfp4}

def gguf_load(fn_or_tensor: str | os.PathLike | Tensor, skip_unsupported: bool = False) -> tuple[dict[str, Any], dict[str, Tensor]]:
  """(metadata, tensors) of a GGUF v2/v3 file given as a path or a 1-d uint8 Tensor of its bytes. Tensor shapes are
  the file's dims reversed (GGUF lists the fastest-varying dim first). F32/F16/BF16/F64/I8..I64 tensors are lazy views
  of the file; Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS and MXFP4 are dequantized on the compute device
  into float32. A tensor of another type is a ValueError naming it; with skip_unsupported=True it is left out instead
  (a warning names each one) and the other tensors load."""
  src = ByteSource(fn_or_tensor)
  cur = _Cursor(src)
  magic = cur.take(4, "magic")
  if magic != GGUF_MAGIC: raise ValueError(f"{src.name}: bad magic {magic!r} at offset 0, expected {GGUF_MAGIC!r} (not a GGUF file)")
  version = cur.scalar("I", "version")
  if version not in (2, 3):
    hint = " (a big-endian file?)" if int.from_bytes(version.to_bytes(4, "little"), "big") in (2, 3) else ""
    raise ValueError(f"{src.name}: unsupported GGUF version {version} at offset 4{hint}; only versions 2 and 3 can be read")
  n_tensors, n_kv = cur.scalar("Q", "tensor count"), cur.scalar("Q", "metadata count")
  for what, n, least in (("tensor", n_tensors, 24), ("metadata", n_kv, 12)):
    if n > src.size // least: raise ValueError(f"{src.name}: {what} count {n} in the header (offset {8 if what == 'tensor' else 16}) can't fit in {src.size} bytes")

  metadata: dict[str, Any] = {}
  for _ in range(n_kv):
    at = cur.pos
    key = cur.string("metadata key")
    if isinstance(key, bytes): raise ValueError(f"{src.name}: metadata key at offset {at} is not UTF-8")
    metadata[key] = cur.value(cur.scalar("I", f"type of {key!r}"), repr(key))

  infos, names = [], set()
  for _ in range(n_tensors):
    at = cur.pos
    name = cur.string("tensor name")
    if isinstance(name, bytes): raise ValueError(f"{src.name}: tensor name at offset {at} is not UTF-8")
    n_dims = cur.scalar("I", f"dim count of {name!r}")
    if n_dims > 8: raise ValueError(f"{src.name}: tensor {name!r} (info at offset {at}) has {n_dims} dims")
    dims = [cur.scalar("Q", f"dims of {name!r}") for _ in range(n_dims)]
    ggml_type, offset = cur.scalar("I", f"type of {name!r}"), cur.scalar("Q", f"offset of {name!r}")
    if name in names: raise ValueError(f"{src.name}: tensor {name!r} appears twice (second info at offset {at})")
    infos.append((name, tuple(reversed(dims)), ggml_type, offset, at))
    names.add(name)

  alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
  if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0:
    raise ValueError(f"{src.name}: general.alignment must be a positive integer, got {alignment!r}")
  data_start = -(-cur.pos // alignment) * alignment

  tensors: dict[str, Tensor] = {}
  skipped: list[str] = []
  for name, shape, ggml_type, offset, info_at in infos:
    if ggml_type not in PLAIN_TYPES and ggml_type not in DEQUANTIZERS:
      what = (f"tensor {name!r} has ggml type {GGML_TYPES[ggml_type][0]} (id {ggml_type}), which can't be loaded yet" if ggml_type in GGML_TYPES
              else f"tensor {name!r} has unknown ggml type id {ggml_type}")
      if not skip_unsupported: raise ValueError(f"{src.name}: {what} (gguf_load(..., skip_unsupported=True) loads the others)")
      skipped.append(what)
      continue
    tname, block, block_bytes = GGML_TYPES[ggml_type]
    numel, extent = 1, (PLAIN_TYPES[ggml_type].itemsize if ggml_type in PLAIN_TYPES else 4)
    for s in shape: numel, extent = numel * s, extent * max(s, 1)
    if extent >= 2**63: raise ValueError(f"{src.name}: tensor {name!r} (info at offset {info_at}) has shape {shape}, too big to index even if empty")
    if numel % block: raise ValueError(f"{src.name}: tensor {name!r} of shape {shape} is not a whole number of {tname} blocks of {block}")
    nbytes = numel // block * block_bytes
    start = data_start + offset
    if offset % alignment: raise ValueError(f"{src.name}: tensor {name!r} has data offset {offset}, not a multiple of the alignment {alignment}")
    if start + nbytes > src.size:
      raise ValueError(f"{src.name}: tensor {name!r} data at offset {start} ({nbytes} bytes) runs past the end of the file ({src.size} bytes)")
    if ggml_type in PLAIN_TYPES:
      tensors[name] = src.view(start, nbytes, f"tensor {name!r}", PLAIN_TYPES[ggml_type]).reshape(shape)
      continue
    raw = src.view(start, nbytes, f"tensor {name!r}")
    if raw.device.startswith("DISK"): raw = raw.to(Device.DEFAULT)
    tensors[name] = DEQUANTIZERS[ggml_type](raw.reshape(numel // block, block_bytes)).reshape(shape)
  if skipped: warnings.warn(f"{src.name}: {len(skipped)} tensors not loaded: " + "; ".join(skipped), stacklevel=2)
  return metadata, tensors
