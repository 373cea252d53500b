"""GGUF (v2 and v3, little-endian) model files: `gguf_load` returns the metadata key/values and the tensors.

Layout (all little-endian): magic "GGUF", uint32 version, uint64 tensor count, uint64 metadata count; the metadata
(key string, uint32 value type, value); one info per tensor (name string, uint32 n_dims, uint64 dims with the
fastest-varying first, uint32 ggml type, uint64 offset into the data section); padding up to `general.alignment`
(default 32); the data section. Strings are a uint64 byte length and UTF-8 bytes.

Unquantized tensors come back as lazy views of the file (on DISK for a path). Quantized ones are copied to the
compute device as raw blocks and dequantized there with Tensor ops (bitcasts, shifts, masks, multiplies) into
float32; nothing is decoded on the host."""
from __future__ import annotations
import os, struct
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
  8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
  13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
  26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 30: ("BF16", 1, 2)}

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

def _q8_0(raw: Tensor) -> Tensor:
  # d (f16), 32 x int8: x = d * q
  return _half(raw, 0) * raw[:, 2:34].bitcast(dtypes.int8).cast(dtypes.float32)

def _q4_0(raw: Tensor) -> Tensor:
  # d (f16), 16 bytes: element j < 16 is the low nibble of byte j, element j + 16 the high one; x = d * (q - 8)
  lo, hi = _nibbles(raw[:, 2:18])
  q = lo.stack(hi, dim=1).reshape(raw.shape[0], 32).cast(dtypes.float32) - 8
  return _half(raw, 0) * q

def _q4_1(raw: Tensor) -> Tensor:
  # d (f16), m (f16), 16 bytes of nibbles laid out as in Q4_0; x = d * q + m
  lo, hi = _nibbles(raw[:, 4:20])
  q = lo.stack(hi, dim=1).reshape(raw.shape[0], 32).cast(dtypes.float32)
  return _half(raw, 0) * q + _half(raw, 2)

def _q4_k(raw: Tensor) -> Tensor:
  # super-block of 256 = 8 sub-blocks of 32: d, dmin (f16), 12 bytes of 6-bit scales and mins, 128 bytes of nibbles.
  # scales bytes s: sub-block j < 4 has scale s[j] & 63, min s[j+4] & 63; j >= 4 has scale (s[j+4] & 15) | (s[j-4] >> 6) << 4
  # and min (s[j+4] >> 4) | (s[j] >> 6) << 4. Each 32-byte run of nibbles holds two sub-blocks: low nibbles, then high.
  # x = d * scale * q - dmin * min
  n = raw.shape[0]
  a, b, c = raw[:, 4:8], raw[:, 8:12], raw[:, 12:16]
  scale = (a & 63).cat((c & 15) | ((a >> 6) << 4), dim=1).cast(dtypes.float32).reshape(n, 8, 1)
  mins = (b & 63).cat((c >> 4) | ((b >> 6) << 4), dim=1).cast(dtypes.float32).reshape(n, 8, 1)
  lo, hi = _nibbles(raw[:, 16:144].reshape(n, 4, 32))
  q = lo.stack(hi, dim=2).reshape(n, 8, 32).cast(dtypes.float32)
  d, dmin = _half(raw, 0).reshape(n, 1, 1), _half(raw, 2).reshape(n, 1, 1)
  return ((d * scale) * q - dmin * mins).reshape(n, 256)

def _q6_k(raw: Tensor) -> Tensor:
  # super-block of 256 as two halves of 128: 128 bytes of low 4 bits (64 per half, as two runs of 32), 64 bytes of high
  # 2 bits (32 per half), 16 int8 scales (one per 16 elements), d (f16). In a half, element 32*k + l (k < 4, l < 32)
  # with k = 2*nibble + run takes that nibble of low byte 32*run + l and bits 2k..2k+1 of high byte l.
  # x = d * scale[element // 16] * (q - 32)
  n = raw.shape[0]
  ql = raw[:, 0:128].reshape(n, 2, 2, 32)          # (half, run, l)
  qh = raw[:, 128:192].reshape(n, 2, 1, 32)        # (half, -, l)
  lo, hi = _nibbles(ql)
  low = lo.stack(hi, dim=2).reshape(n, 2, 4, 32)  # (half, 2*nibble + run, l)
  high = ((qh >> 0) & 3).cat((qh >> 2) & 3, (qh >> 4) & 3, (qh >> 6) & 3, dim=2)  # (half, k, l)
  q = (low | (high << 4)).cast(dtypes.float32).reshape(n, 16, 16) - 32
  scale = raw[:, 192:208].bitcast(dtypes.int8).cast(dtypes.float32).reshape(n, 16, 1)
  return ((_half(raw, 208).reshape(n, 1, 1) * scale) * q).reshape(n, 256)

DEQUANTIZERS: dict[int, Callable[[Tensor], Tensor]] = {2: _q4_0, 3: _q4_1, 8: _q8_0, 12: _q4_k, 14: _q6_k}

def gguf_load(fn_or_tensor: str | os.PathLike | Tensor) -> tuple[dict[str, Any], dict[str, Tensor]]:
  """(metadata, tensors) of a GGUF v2/v3 file given as a path or a 1-d uint8 Tensor of its bytes. Tensor shapes are
  the file's dims reversed (GGUF lists the fastest-varying dim first). F32/F16/BF16/F64/I8..I64 tensors are lazy views
  of the file; Q4_0, Q4_1, Q8_0, Q4_K and Q6_K are dequantized on the compute device into float32."""
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

  infos = []
  for _ in range(n_tensors):
    at = cur.pos
    name = cur.string("tensor name")
    if isinstance(name, bytes): raise ValueError(f"{src.name}: tensor name at offset {at} is not UTF-8")
    n_dims = cur.scalar("I", f"dim count of {name!r}")
    if n_dims > 8: raise ValueError(f"{src.name}: tensor {name!r} (info at offset {at}) has {n_dims} dims")
    dims = [cur.scalar("Q", f"dims of {name!r}") for _ in range(n_dims)]
    ggml_type, offset = cur.scalar("I", f"type of {name!r}"), cur.scalar("Q", f"offset of {name!r}")
    infos.append((name, tuple(reversed(dims)), ggml_type, offset, at))

  alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
  if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0:
    raise ValueError(f"{src.name}: general.alignment must be a positive integer, got {alignment!r}")
  data_start = -(-cur.pos // alignment) * alignment

  tensors: dict[str, Tensor] = {}
  for name, shape, ggml_type, offset, info_at in infos:
    if ggml_type not in GGML_TYPES: raise ValueError(f"{src.name}: tensor {name!r} has unknown ggml type id {ggml_type}")
    tname, block, block_bytes = GGML_TYPES[ggml_type]
    if ggml_type not in PLAIN_TYPES and ggml_type not in DEQUANTIZERS:
      raise ValueError(f"{src.name}: tensor {name!r} has ggml type {tname} (id {ggml_type}), which can't be loaded yet")
    numel, extent = 1, (PLAIN_TYPES[ggml_type].itemsize if ggml_type in PLAIN_TYPES else 4)
    for s in shape: numel, extent = numel * s, extent * max(s, 1)
    if extent >= 2**63: raise ValueError(f"{src.name}: tensor {name!r} (info at offset {info_at}) has shape {shape}, too big to index even if empty")
    if numel % block: raise ValueError(f"{src.name}: tensor {name!r} of shape {shape} is not a whole number of {tname} blocks of {block}")
    nbytes = numel // block * block_bytes
    start = data_start + offset
    if offset % alignment: raise ValueError(f"{src.name}: tensor {name!r} has data offset {offset}, not a multiple of the alignment {alignment}")
    if start + nbytes > src.size:
      raise ValueError(f"{src.name}: tensor {name!r} data at offset {start} ({nbytes} bytes) runs past the end of the file ({src.size} bytes)")
    if name in tensors: raise ValueError(f"{src.name}: tensor {name!r} appears twice (second info at offset {info_at})")
    if ggml_type in PLAIN_TYPES:
      tensors[name] = src.view(start, nbytes, f"tensor {name!r}", PLAIN_TYPES[ggml_type]).reshape(shape)
      continue
    raw = src.view(start, nbytes, f"tensor {name!r}")
    if raw.device.startswith("DISK"): raw = raw.to(Device.DEFAULT)
    tensors[name] = DEQUANTIZERS[ggml_type](raw.reshape(numel // block, block_bytes)).reshape(shape)
  return metadata, tensors
