"""Model state: safetensors files (safe_save / safe_load) and get_state_dict / load_state_dict.

Files written by safe_save are checked against the safetensors layout with a small reader written here (an 8-byte
little-endian header length, a JSON header of {name: {dtype, shape, data_offsets}} plus an optional __metadata__, then
the data section, tensors back to back). Every test writes into its own tmp_path: a DISK device stays open per path."""
import json, os, pathlib, struct, subprocess, sys
import numpy as np
import pytest
from tg import Tensor, dtypes, nn
from tg.nn import state
from tg.nn.state import get_state_dict, load_state_dict, safe_load, safe_save

# ---------------- an independent reader for the file layout ----------------

SPEC_NAMES = {"F64": ("<f8", 8), "F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": (None, 2), "F8_E4M3": (None, 1), "F8_E5M2": (None, 1),
              "I64": ("<i8", 8), "I32": ("<i4", 4), "I16": ("<i2", 2), "I8": ("i1", 1), "U64": ("<u8", 8), "U32": ("<u4", 4),
              "U16": ("<u2", 2), "U8": ("u1", 1), "BOOL": ("?", 1)}

def parse_file(path) -> tuple[dict, dict, bytes]:
  """(tensor entries, __metadata__ or {}, data section), asserting the layout rules on the way."""
  raw = pathlib.Path(path).read_bytes()
  assert len(raw) >= 8
  (n,) = struct.unpack("<Q", raw[:8])
  assert 8 + n <= len(raw), "header runs past the end of the file"
  head = raw[8:8 + n]
  assert head[:1] == b"{", "the header must start with '{'"
  header = json.loads(head.decode("utf-8"))
  assert head.decode("utf-8").rstrip(" ") == head.decode("utf-8").rstrip(), "only spaces may pad the header"
  meta = header.pop("__metadata__", {})
  assert isinstance(meta, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())
  data = raw[8 + n:]
  spans = []
  for name, info in header.items():
    assert set(info) == {"dtype", "shape", "data_offsets"}, name
    assert info["dtype"] in SPEC_NAMES, info["dtype"]
    assert all(isinstance(d, int) and d >= 0 for d in info["shape"]), name
    begin, end = info["data_offsets"]
    assert end - begin == int(np.prod(info["shape"], dtype=np.int64)) * SPEC_NAMES[info["dtype"]][1], name
    spans.append((begin, end))
  spans.sort()
  pos = 0
  for begin, end in spans:  # contiguous: no holes, no overlaps, nothing after the last tensor
    assert begin == pos, f"hole or overlap at {pos}: {spans}"
    pos = end
  assert pos == len(data), f"data section is {len(data)} bytes, tensors cover {pos}"
  return header, meta, data

def fp8e4m3_decode(b: np.ndarray) -> np.ndarray:
  """E4M3 "fn" bytes -> float32: sign, 4 exponent bits (bias 7), 3 mantissa bits; S.1111.111 is NaN, no infinities."""
  b = b.astype(np.int64)
  s, e, m = (b >> 7) & 1, (b >> 3) & 0xF, b & 7
  val = np.where(e == 0, m / 8 * 2.0**-6, (1 + m / 8) * 2.0 ** (e - 7))
  val = np.where((e == 15) & (m == 7), np.nan, val)
  return (np.where(s == 1, -val, val)).astype(np.float32)

def entry_values(info: dict, data: bytes) -> np.ndarray:
  """A tensor's values decoded from the data section by this file's reader."""
  begin, end = info["data_offsets"]
  chunk, shape = data[begin:end], tuple(info["shape"])
  npdt = SPEC_NAMES[info["dtype"]][0]
  if npdt is not None: return np.frombuffer(chunk, dtype=npdt).reshape(shape)
  u = np.frombuffer(chunk, dtype="<u2" if info["dtype"] == "BF16" else "u1")
  if info["dtype"] == "BF16": return (u.astype(np.uint32) << 16).view(np.float32).reshape(shape)
  assert info["dtype"] == "F8_E4M3"
  return fp8e4m3_decode(u).reshape(shape)

# ---------------- test data ----------------

def _values(np_dtype: str, n: int) -> np.ndarray:
  if np_dtype == "bool": return np.arange(n) % 3 == 1
  info = np.iinfo(np_dtype) if np.dtype(np_dtype).kind in "iu" else None
  if info is not None:
    base = np.array([info.min, info.max, 0, 1, info.max - 7, info.min + 3], dtype=np_dtype)
    return np.resize(base, n) if n else base[:0]
  return (np.linspace(-3.3, 7.7, n) * np.where(np.arange(n) % 2, -1.0, 1.0)).astype(np_dtype)

NUMPY_NATIVE = {"float32": dtypes.float32, "float16": dtypes.float16, "float64": dtypes.float64, "int8": dtypes.int8, "int16": dtypes.int16,
                "int32": dtypes.int32, "int64": dtypes.int64, "uint8": dtypes.uint8, "uint16": dtypes.uint16, "uint32": dtypes.uint32,
                "uint64": dtypes.uint64, "bool": dtypes.bool}
CAST_FROM_FLOAT = {"bfloat16": dtypes.bfloat16, "fp8e4m3": dtypes.fp8e4m3}
SPEC_FOR = {dtypes.float32: "F32", dtypes.float16: "F16", dtypes.float64: "F64", dtypes.int8: "I8", dtypes.int16: "I16", dtypes.int32: "I32",
            dtypes.int64: "I64", dtypes.uint8: "U8", dtypes.uint16: "U16", dtypes.uint32: "U32", dtypes.uint64: "U64", dtypes.bool: "BOOL",
            dtypes.bfloat16: "BF16", dtypes.fp8e4m3: "F8_E4M3"}
SHAPES = [(), (0,), (2, 0, 3), (7,), (3, 4), (2, 3, 4)]

def make(name: str, shape: tuple) -> tuple[Tensor, np.ndarray]:
  """(tensor, the values it holds as numpy)."""
  n = int(np.prod(shape, dtype=np.int64))
  if name in NUMPY_NATIVE:
    arr = _values(name, n).reshape(shape)
    t = Tensor(arr)
    assert t.dtype == NUMPY_NATIVE[name]
    return t, arr
  t = Tensor(_values("float32", n).reshape(shape)).cast(CAST_FROM_FLOAT[name])
  return t, t.numpy()  # bfloat16 / fp8: the tensor's own values

ALL_DTYPES = list(NUMPY_NATIVE) + list(CAST_FROM_FLOAT)

# ---------------- round trips ----------------

@pytest.mark.parametrize("name", ALL_DTYPES)
def test_roundtrip_each_dtype(tmp_path, name):
  tensors, expected = {}, {}
  for i, shape in enumerate(SHAPES):
    tensors[f"t{i}"], expected[f"t{i}"] = make(name, shape)
  fn = tmp_path / "m.safetensors"
  safe_save(tensors, fn)
  out = safe_load(fn)
  assert list(out) == list(tensors)
  for k, ref in expected.items():
    got = out[k]
    assert got.dtype == tensors[k].dtype and got.shape == ref.shape, k
    vals = got.numpy()
    assert vals.shape == ref.shape and vals.dtype == ref.dtype, k
    np.testing.assert_array_equal(vals, ref, err_msg=k)
  # the file itself, read by this test's own parser
  header, meta, data = parse_file(fn)
  assert meta == {} and list(header) == list(tensors)
  for k, ref in expected.items():
    info = header[k]
    assert info["dtype"] == SPEC_FOR[tensors[k].dtype] and tuple(info["shape"]) == ref.shape, k
    np.testing.assert_array_equal(entry_values(info, data), ref, err_msg=k)

def test_roundtrip_mixed_file_with_metadata(tmp_path):
  tensors, expected = {}, {}
  for name in ALL_DTYPES:
    for shape in [(), (5,), (2, 3)]:
      key = f"{name}.{'x'.join(map(str, shape)) or 'scalar'}"
      tensors[key], expected[key] = make(name, shape)
  tensors["empty"], expected["empty"] = Tensor.empty(0, 4), np.zeros((0, 4), np.float32)
  meta = {"format": "pt", "note": "unicode ✓ and \"quotes\"", "n": "3"}
  fn = tmp_path / "mixed.safetensors"
  safe_save(tensors, fn, metadata=meta)
  raw = fn.read_bytes()
  (n,) = struct.unpack("<Q", raw[:8])
  assert (8 + n) % 8 == 0, "tg aligns the data section to 8 bytes"
  header, got_meta, data = parse_file(fn)
  assert got_meta == meta
  assert header["empty"]["data_offsets"][0] == header["empty"]["data_offsets"][1]
  out = safe_load(fn)
  assert set(out) == set(tensors)
  for k, ref in expected.items():
    np.testing.assert_array_equal(out[k].numpy(), ref, err_msg=k)
    np.testing.assert_array_equal(entry_values(header[k], data), ref, err_msg=k)

def test_saves_views_and_computed_tensors(tmp_path):
  base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
  t = Tensor(base)
  tensors = {"perm": t.permute(2, 0, 1), "slice": t[1, :, 1:3], "sum": t.sum(axis=2) * 2, "expand": Tensor([1, 2, 3]).reshape(3, 1).expand(3, 4)}
  ref = {"perm": base.transpose(2, 0, 1), "slice": base[1, :, 1:3], "sum": base.sum(axis=2) * 2, "expand": np.broadcast_to(np.array([[1], [2], [3]], np.int32), (3, 4))}
  safe_save(tensors, tmp_path / "v.safetensors")
  header, _, data = parse_file(tmp_path / "v.safetensors")
  out = safe_load(tmp_path / "v.safetensors")
  for k, r in ref.items():
    np.testing.assert_array_equal(out[k].numpy(), r, err_msg=k)
    np.testing.assert_array_equal(entry_values(header[k], data), r, err_msg=k)

def test_file_read_by_hand_written_bytes(tmp_path):
  """A file built here byte by byte (unaligned header, padding spaces, tensors stored out of order) loads."""
  a = np.array([[1.5, -2.0], [3.25, 4.0]], dtype="<f4")
  b = np.array([7, -8, 9], dtype="<i2")
  data = b.tobytes() + a.tobytes()
  head = json.dumps({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [6, 22]},
                     "__metadata__": {"k": "v"}, "b": {"dtype": "I16", "shape": [3], "data_offsets": [0, 6]}}).encode() + b"   "
  fn = tmp_path / "hand.safetensors"
  fn.write_bytes(struct.pack("<Q", len(head)) + head + data)
  out = safe_load(fn)
  assert set(out) == {"a", "b"}
  assert out["a"].dtype == dtypes.float32 and out["b"].dtype == dtypes.int16
  np.testing.assert_array_equal(out["a"].numpy(), a)
  np.testing.assert_array_equal(out["b"].numpy(), b)

def test_overwrite_then_load_gives_new_values(tmp_path):
  fn = tmp_path / "w.safetensors"
  safe_save({"w": Tensor(np.arange(4, dtype=np.float32))}, fn)
  np.testing.assert_array_equal(safe_load(fn)["w"].numpy(), [0, 1, 2, 3])
  safe_save({"w": Tensor(np.arange(4, dtype=np.float32) + 100)}, fn)  # same size, new contents
  header, _, data = parse_file(fn)
  assert entry_values(header["w"], data).tolist() == [100, 101, 102, 103]
  np.testing.assert_array_equal(safe_load(fn)["w"].numpy(), [100, 101, 102, 103])

def test_safetensors_package_reads_and_writes(tmp_path):
  st = pytest.importorskip("safetensors.numpy")
  tensors = {name: make(name, (2, 3)) for name in NUMPY_NATIVE}
  safe_save({k: t for k, (t, _) in tensors.items()}, tmp_path / "tg.safetensors")
  theirs = st.load_file(str(tmp_path / "tg.safetensors"))
  for k, (_, ref) in tensors.items(): np.testing.assert_array_equal(theirs[k], ref, err_msg=k)
  st.save_file({k: ref for k, (_, ref) in tensors.items()}, str(tmp_path / "st.safetensors"), metadata={"a": "b"})
  ours = safe_load(tmp_path / "st.safetensors")
  for k, (_, ref) in tensors.items(): np.testing.assert_array_equal(ours[k].numpy(), ref, err_msg=k)

# ---------------- laziness ----------------

def _two_tensor_file(tmp_path):
  small = np.arange(1000, dtype=np.float32) * 0.5
  big = np.arange(1_000_000, dtype=np.int32)
  fn = tmp_path / "big.safetensors"
  safe_save({"small": Tensor(small), "big": Tensor(big)}, fn)
  return fn, small, big

def test_safe_load_is_lazy_on_disk(tmp_path):
  fn, small, big = _two_tensor_file(tmp_path)
  out = safe_load(fn)
  for k in out: assert out[k].device.startswith("DISK:"), (k, out[k].device)
  assert str(fn) in out["small"].device
  cpu = out["small"].to("CPU")
  assert cpu.device == "CPU"
  np.testing.assert_array_equal(cpu.numpy(), small)
  np.testing.assert_array_equal((cpu * 2 + 1).numpy(), small * 2 + 1)
  np.testing.assert_array_equal((out["big"].to("CPU")[10:20] - 5).numpy(), big[10:20] - 5)
  np.testing.assert_allclose(out["small"].to("CPU").sum().item(), small.sum())
  assert out["small"].reshape(10, 100)[3, 4].to("CPU").item() == small[304]

def test_arithmetic_directly_on_disk_tensor(tmp_path):
  """Arithmetic on a loaded (DISK) tensor either computes the right values or says clearly that DISK can't compute."""
  fn, small, _ = _two_tensor_file(tmp_path)
  out = safe_load(fn)
  try: got = (out["small"] * 2 + 1).numpy()
  except AttributeError as e: pytest.fail(f"internal error instead of a result or a clear message: AttributeError: {e}")
  except Exception as e: assert "DISK" in str(e), f"unclear error: {type(e).__name__}: {e}"
  else: np.testing.assert_array_equal(got, small * 2 + 1)

def test_loading_one_tensor_reads_only_its_bytes(tmp_path, monkeypatch):
  fn, small, big = _two_tensor_file(tmp_path)
  header, _, _ = parse_file(fn)
  start = 8 + struct.unpack("<Q", fn.read_bytes()[:8])[0]
  b0, b1 = header["big"]["data_offsets"]
  s0, s1 = header["small"]["data_offsets"]
  # corrupt the other tensor's region before loading: the one we use must be unaffected
  with open(fn, "r+b") as f:
    f.seek(start + b0)
    f.write(b"\xAB" * (b1 - b0))
  import drivers.disk
  reads: list[tuple[int, int]] = []
  real = drivers.disk.DiskAllocator.copyout
  def spy(self, dest, src):
    reads.append((src.offset, src.size))
    return real(self, dest, src)
  monkeypatch.setattr(drivers.disk.DiskAllocator, "copyout", spy)
  out = safe_load(fn)
  assert all(o + s <= start for o, s in reads), f"safe_load read past the header: {reads}"
  reads.clear()
  np.testing.assert_array_equal(out["small"].numpy(), small)
  assert reads, "the values must come from the file"
  assert all(start + s0 <= o and o + s <= start + s1 for o, s in reads), f"read outside 'small' ({start + s0}..{start + s1}): {reads}"
  assert sum(s for _, s in reads) <= (s1 - s0) * 2
  got = out["big"].numpy()
  assert (got.view(np.uint8) == 0xAB).all(), "the other tensor holds the corrupted bytes"

# ---------------- safe_save never leaves a partial file ----------------

def _listing(d: pathlib.Path) -> dict[str, bytes]: return {p.name: p.read_bytes() for p in d.iterdir()}

@pytest.fixture
def existing(tmp_path):
  fn = tmp_path / "model.safetensors"
  safe_save({"old": Tensor([1.0, 2.0])}, fn)
  return fn, _listing(tmp_path)

def test_failed_save_unstorable_dtype(tmp_path, existing, monkeypatch):
  fn, before = existing
  monkeypatch.setattr(state, "_SAFETENSORS_NAMES", {k: v for k, v in state._SAFETENSORS_NAMES.items() if k != dtypes.int8})
  tensors = {"ok": Tensor(np.ones(1000, np.float32)), "bad": Tensor(np.ones(3, np.int8))}
  with pytest.raises(TypeError, match="bad"): safe_save(tensors, fn)
  assert _listing(tmp_path) == before
  with pytest.raises(TypeError): safe_save(tensors, tmp_path / "new.safetensors")
  assert _listing(tmp_path) == before

class _FailingFile:
  """Wraps a real file; raises `exc` on the `fail_at`-th write."""
  def __init__(self, f, fail_at: int, exc: BaseException): self.f, self.fail_at, self.exc, self.n = f, fail_at, exc, 0
  def __enter__(self): return self
  def __exit__(self, *a): return self.f.__exit__(*a)
  def write(self, b):
    self.n += 1
    if self.n == self.fail_at:
      self.f.write(b[:len(b) // 2])
      self.f.flush()
      raise self.exc
    return self.f.write(b)
  def __getattr__(self, name): return getattr(self.f, name)

@pytest.mark.parametrize("exc", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_failed_save_mid_write(tmp_path, existing, monkeypatch, exc):
  fn, before = existing
  real_fdopen = os.fdopen
  monkeypatch.setattr(state.os, "fdopen", lambda fd, *a, **k: _FailingFile(real_fdopen(fd, *a, **k), 2, exc))
  tensors = {"a": Tensor(np.ones(1000, np.float32)), "b": Tensor(np.arange(500, dtype=np.int64))}
  with pytest.raises(type(exc)): safe_save(tensors, fn)
  assert _listing(tmp_path) == before
  with pytest.raises(type(exc)): safe_save(tensors, tmp_path / "fresh.safetensors")
  assert _listing(tmp_path) == before
  monkeypatch.undo()
  np.testing.assert_array_equal(safe_load(fn)["old"].numpy(), [1.0, 2.0])

def test_failed_save_at_rename(tmp_path, existing, monkeypatch):
  fn, before = existing
  def boom(*a, **k): raise OSError("rename failed")
  monkeypatch.setattr(state.os, "replace", boom)
  with pytest.raises(OSError, match="rename failed"): safe_save({"a": Tensor([3.0])}, fn)
  assert _listing(tmp_path) == before

def test_save_into_missing_directory_leaves_nothing(tmp_path):
  with pytest.raises(OSError): safe_save({"a": Tensor([1.0])}, tmp_path / "nope" / "x.safetensors")
  assert list(tmp_path.iterdir()) == []

# ---------------- malformed files ----------------

def _good_file(tmp_path) -> tuple[pathlib.Path, bytes, dict, int]:
  fn = tmp_path / "good.safetensors"
  safe_save({"alpha": Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)), "beta": Tensor(np.arange(4, dtype=np.int16))}, fn)
  raw = fn.read_bytes()
  (n,) = struct.unpack("<Q", raw[:8])
  return fn, raw, json.loads(raw[8:8 + n]), 8 + n

def _write(tmp_path, name: str, header, data: bytes, n: int | None = None) -> pathlib.Path:
  head = header if isinstance(header, bytes) else json.dumps(header).encode()
  fn = tmp_path / name
  fn.write_bytes(struct.pack("<Q", len(head) if n is None else n) + head + data)
  return fn

def _raises(fn, *words):
  with pytest.raises(ValueError) as e: safe_load(fn)
  msg = str(e.value)
  assert str(fn) in msg, f"message doesn't name the file: {msg}"
  for w in words: assert str(w) in msg, f"message doesn't mention {w!r}: {msg}"
  return msg

def test_too_short_file(tmp_path):
  fn = tmp_path / "short.safetensors"
  fn.write_bytes(b"\x10\x00\x00")
  _raises(fn)
  empty = tmp_path / "empty.safetensors"
  empty.write_bytes(b"")
  _raises(empty)

def test_truncated_file(tmp_path):
  fn, raw, header, start = _good_file(tmp_path)
  cut = tmp_path / "cut_data.safetensors"
  cut.write_bytes(raw[:-3])  # the last tensor ('beta', stored last) now runs past the end
  last = max(header, key=lambda k: header[k]["data_offsets"][1] if k != "__metadata__" else -1)
  _raises(cut, repr(last), header[last]["data_offsets"][1])
  cut_head = tmp_path / "cut_header.safetensors"
  cut_head.write_bytes(raw[:start - 5])
  _raises(cut_head, start - 8)  # the header length it claims

def test_header_length_larger_than_file(tmp_path):
  fn = _write(tmp_path, "long.safetensors", b'{"a": {}}', b"", n=4096)
  _raises(fn, 4096)
  huge = _write(tmp_path, "huge.safetensors", b"{}", b"", n=2**63 + 5)
  _raises(huge, 2**63 + 5)

def test_invalid_json_header(tmp_path):
  _raises(_write(tmp_path, "bad.safetensors", b'{"a": {"dtype": "F32", ', b""), "JSON")
  _raises(_write(tmp_path, "utf.safetensors", b'{"\xff\xfe": 1}', b""))
  _raises(_write(tmp_path, "list.safetensors", b"[1, 2, 3]", b""))

def test_offsets_outside_data_section(tmp_path):
  _, raw, header, start = _good_file(tmp_path)
  data = raw[start:]
  h = dict(header)
  h["beta"] = {**h["beta"], "data_offsets": [len(data), len(data) + 8]}
  _raises(_write(tmp_path, "past_end.safetensors", h, data), "'beta'", len(data) + 8)
  h["beta"] = {**header["beta"], "data_offsets": [-8, 0]}
  _raises(_write(tmp_path, "negative.safetensors", h, data), "'beta'", -8)
  h["beta"] = {**header["beta"], "data_offsets": [8, 0]}
  _raises(_write(tmp_path, "reversed.safetensors", h, data), "'beta'")

def test_byte_count_does_not_match_shape(tmp_path):
  _, raw, header, start = _good_file(tmp_path)
  data = raw[start:]
  b0, b1 = header["alpha"]["data_offsets"]
  h = {**header, "alpha": {**header["alpha"], "shape": [2, 2]}}
  _raises(_write(tmp_path, "shape.safetensors", h, data), "'alpha'", b1 - b0)
  h = {**header, "alpha": {**header["alpha"], "dtype": "F64"}}
  _raises(_write(tmp_path, "dtype.safetensors", h, data), "'alpha'")
  h = {**header, "alpha": {**header["alpha"], "data_offsets": [b0, b1 - 4]}}
  _raises(_write(tmp_path, "bytes.safetensors", h, data), "'alpha'")

def test_bad_header_entries(tmp_path):
  _, raw, header, start = _good_file(tmp_path)
  data = raw[start:]
  for i, entry in enumerate([{**header["alpha"], "dtype": "F128"}, {"dtype": "F32", "shape": [2, 3]}, "not a dict",
                             {**header["alpha"], "data_offsets": [0]}]):
    _raises(_write(tmp_path, f"entry{i}.safetensors", {**header, "alpha": entry}, data), "'alpha'")

def test_overlapping_offsets_gaps_and_trailing_bytes(tmp_path):
  """As the reference reader requires, the tensors sorted by offset tile the data section exactly."""
  _, raw, header, start = _good_file(tmp_path)
  data = raw[start:]
  (a0, a1), (b0, b1) = header["alpha"]["data_offsets"], header["beta"]["data_offsets"]
  assert (a0, a1, b0) == (0, 24, 24) and b1 == len(data)
  # beta also claims the last 8 bytes of alpha: two tensors over the same bytes
  h = {**header, "alpha": {**header["alpha"], "shape": [2, 2], "data_offsets": [0, 16]},
       "gamma": {"dtype": "I16", "shape": [8], "data_offsets": [8, 24]}}
  _raises(_write(tmp_path, "overlap.safetensors", h, data), "'gamma'", "overlaps", "'alpha'")
  _raises(_write(tmp_path, "same.safetensors", {**header, "beta": {**header["alpha"]}}, data), "overlaps")
  h = {**header, "alpha": {**header["alpha"], "shape": [2, 2], "data_offsets": [0, 16]}}
  _raises(_write(tmp_path, "gap.safetensors", h, data), "[16, 24)", "belong to no tensor")
  _raises(_write(tmp_path, "trailing.safetensors", header, data + b"\0" * 8), f"has {len(data) + 8} bytes", f"end at byte {len(data)}")

def test_duplicate_keys(tmp_path):
  _, raw, header, start = _good_file(tmp_path)
  alpha, beta = json.dumps(header["alpha"]), json.dumps(header["beta"])
  head = f'{{"alpha": {alpha}, "beta": {beta}, "alpha": {alpha}}}'.encode()  # json.loads would keep the second 'alpha'
  _raises(_write(tmp_path, "dup.safetensors", head, raw[start:]), "duplicate key 'alpha'")
  inner = json.dumps(header["beta"])[:-1] + ', "dtype": "U8"}'
  _raises(_write(tmp_path, "dup_field.safetensors", f'{{"alpha": {alpha}, "beta": {inner}}}'.encode(), raw[start:]), "duplicate key 'dtype'")

@pytest.mark.parametrize("field,value,words", [
  ("data_offsets", [0.0, 24.0], ["data_offsets [0.0, 24.0]"]), ("data_offsets", ["0", "24"], ["data_offsets"]),
  ("data_offsets", [0, 24, 48], ["data_offsets"]), ("shape", "23", ["shape 23"]), ("shape", [2, "3"], ["shape"]),
  ("shape", [True, 6], ["shape [True, 6]"]), ("shape", [-2, -3], ["shape [-2, -3]"]), ("shape", [1] * 65, ["at most 64"]),
  ("shape", [0, 2**62], ["too big to index"]), ("dtype", ["F32"], ["dtype"]), ("dtype", None, ["dtype"])])
def test_wrong_json_types(tmp_path, field, value, words):
  """Every malformed entry is a ValueError naming the file, the tensor and the field (not a TypeError from inside)."""
  _, raw, header, start = _good_file(tmp_path)
  h = {**header, "alpha": {**header["alpha"], field: value}}
  _raises(_write(tmp_path, "types.safetensors", h, raw[start:]), "'alpha'", *words)

def test_malformed_json_structure(tmp_path):
  _, raw, header, start = _good_file(tmp_path)
  _raises(_write(tmp_path, "deep.safetensors", b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", b""), "RecursionError")
  _raises(_write(tmp_path, "meta.safetensors", {**header, "__metadata__": {"k": 1}}, raw[start:]), "__metadata__")
  _raises(_write(tmp_path, "meta2.safetensors", {**header, "__metadata__": ["k"]}, raw[start:]), "__metadata__")
  _raises(_write(tmp_path, "bigint.safetensors", b'{"a": {"dtype": "U8", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 0]}}', b""), "JSON")

def test_file_truncated_after_loading(tmp_path):
  """safe_load's tensors read the file lazily; if another process truncates it meanwhile, reading is an OSError naming
  the file, offset and size (a mapped file would kill the process with SIGBUS; run in a child so that can't end pytest)."""
  fn = tmp_path / "t.safetensors"
  safe_save({"x": Tensor(np.arange(100_000, dtype=np.float32))}, fn)
  code = f"""import os, sys
sys.path.insert(0, {str(pathlib.Path(__file__).resolve().parents[2])!r})
from tg.nn.state import safe_load
out = safe_load({str(fn)!r})
print(out["x"][:4].numpy().tolist())
os.truncate({str(fn)!r}, 1000)
try: out["x"].numpy()
except OSError as e: print("OSError", e)"""
  p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert p.returncode == 0, f"the reader died (exit {p.returncode}; -7 is SIGBUS): {p.stderr[-2000:]}"
  lines = p.stdout.splitlines()
  assert lines[0] == "[0.0, 1.0, 2.0, 3.0]"
  start = 8 + struct.unpack("<Q", fn.read_bytes()[:8])[0]
  assert lines[1].startswith(f"OSError {fn}: can't read 400000 bytes at offset {start}: the file is now 1000 bytes"), lines

# ---------------- get_state_dict / load_state_dict ----------------

class Leaf:
  def __init__(self, n: int, scale: float = 1.0):
    self.w = Tensor(np.arange(n * 2, dtype=np.float32).reshape(n, 2) * scale)
    self.b = Tensor(np.zeros(n, np.float32))
    self.name, self.count, self.none = "leaf", 3, None

class Net:
  def __init__(self, scale: float = 1.0):
    self.head = Leaf(3, scale)
    self.layers = [Leaf(2, scale), Leaf(4, scale)]
    self.extra = {"gain": Tensor(np.full(2, 0.5, np.float32)), "inner": {"steps": Tensor(np.array([7], np.int32))}}
    self.pair = (Tensor(np.ones(1, np.float32)), "text")

NET_KEYS = ["head.w", "head.b", "layers.0.w", "layers.0.b", "layers.1.w", "layers.1.b", "extra.gain", "extra.inner.steps", "pair.0"]

def _sd(scale: float) -> dict[str, Tensor]:
  return {k: Tensor(v.numpy() * scale + 1 if v.dtype != dtypes.int32 else v.numpy() + 10) for k, v in get_state_dict(Net()).items()}

def test_get_state_dict_nested():
  net = Net()
  sd = get_state_dict(net)
  assert list(sd) == NET_KEYS
  assert sd["layers.1.w"] is net.layers[1].w and sd["extra.inner.steps"] is net.extra["inner"]["steps"] and sd["pair.0"] is net.pair[0]
  assert get_state_dict(net, prefix="model.")["model.head.w"] is net.head.w
  assert get_state_dict([Tensor([1.0]), {"a": Tensor([2.0])}]).keys() == {"0", "1.a"}
  assert state.get_parameters(net) == [sd[k] for k in NET_KEYS]

def test_load_state_dict_in_place():
  net = Net()
  before = get_state_dict(net)
  new = _sd(3.0)
  expect = {k: v.numpy() for k, v in new.items()}
  load_state_dict(net, new, verbose=False)
  after = get_state_dict(net)
  for k in NET_KEYS:
    assert after[k] is before[k], f"{k} was replaced by another Tensor object"
    assert after[k].dtype == new[k].dtype and after[k].device == "CPU"
    np.testing.assert_array_equal(after[k].numpy(), expect[k], err_msg=k)
  assert net.layers[0].w is before["layers.0.w"]

def test_load_state_dict_strict_names_missing_and_warns_on_unexpected():
  net = Net()
  sd = _sd(2.0)
  del sd["layers.1.b"]
  sd["layers.2.w"] = Tensor([1.0])
  old = net.head.w.numpy()
  with pytest.raises(KeyError) as e: load_state_dict(net, sd)
  assert "layers.1.b" in str(e.value) and "missing" in str(e.value)
  np.testing.assert_array_equal(net.head.w.numpy(), old)  # nothing loaded
  sd = {**_sd(2.0), "bogus": Tensor([0.0])}
  with pytest.warns(UserWarning, match="bogus"): loaded = load_state_dict(net, sd, verbose=False)
  np.testing.assert_array_equal(net.head.w.numpy(), sd["head.w"].numpy())
  assert [id(t) for t in loaded] == [id(t) for t in get_state_dict(net).values()], "the loaded model tensors come back, in model order"

def test_load_state_dict_takes_pytorch_scalar_num_batches_tracked():
  """PyTorch's BatchNorm keeps num_batches_tracked as a 0-d tensor; tg's (as tinygrad's) is (1,); either loads into either."""
  m = SmallModel()
  sd = {k: Tensor(v.numpy() + 1) for k, v in get_state_dict(m).items()}
  sd["bn.num_batches_tracked"] = Tensor(np.array(37, np.int64))
  assert sd["bn.num_batches_tracked"].shape == ()
  loaded = load_state_dict(m, sd)
  assert m.bn.num_batches_tracked.shape == (1,) and m.bn.num_batches_tracked.numpy().tolist() == [37]
  assert len(loaded) == 8 and any(t is m.bn.num_batches_tracked for t in loaded)
  holder = type("Holder", (), {})()
  holder.n = Tensor(np.array(0, np.int64))
  load_state_dict(holder, {"n": Tensor(np.array([5], np.int64))})
  assert holder.n.shape == () and holder.n.item() == 5
  with pytest.raises(ValueError, match=r"bn.num_batches_tracked.*\(1,\).*\(2,\)"): load_state_dict(m, {**sd, "bn.num_batches_tracked": Tensor(np.array([1, 2], np.int64))})

def test_load_state_dict_checks_everything_before_loading():
  net = Net()
  sd = _sd(2.0)
  sd["pair.0"] = Tensor(np.zeros(3, np.float32))  # the last model key is wrong: nothing before it may have been loaded
  old = net.head.w.numpy()
  with pytest.raises(ValueError, match="pair.0"): load_state_dict(net, sd, verbose=False)
  np.testing.assert_array_equal(net.head.w.numpy(), old)

def test_load_state_dict_shape_mismatch():
  net = Net()
  sd = _sd(1.0)
  sd["layers.0.w"] = Tensor(np.zeros((2, 3), np.float32))
  with pytest.raises(ValueError) as e: load_state_dict(net, sd, verbose=False)
  msg = str(e.value)
  assert "layers.0.w" in msg and "(2, 2)" in msg and "(2, 3)" in msg
  with pytest.raises(ValueError, match="layers.0.w"): load_state_dict(net, {"layers.0.w": sd["layers.0.w"]}, strict=False, verbose=False)

def test_load_state_dict_converts_float_dtypes():
  net = Net()
  vals = np.array([[0.1, 0.2], [0.3, 1 / 3], [65504.0, -2.5]], dtype=np.float16)
  load_state_dict(net, {"head.w": Tensor(vals)}, strict=False, verbose=False)
  assert net.head.w.dtype == dtypes.float32
  np.testing.assert_array_equal(net.head.w.numpy(), vals.astype(np.float32))
  load_state_dict(net, {"head.w": Tensor(vals.astype(np.float32)).cast(dtypes.bfloat16)}, strict=False, verbose=False)
  assert net.head.w.dtype == dtypes.float32

def test_load_state_dict_int_into_float_is_type_error():
  net = Net()
  with pytest.raises(TypeError) as e: load_state_dict(net, {"extra.gain": Tensor(np.array([1, 2], np.int32))}, strict=False, verbose=False)
  assert "extra.gain" in str(e.value)
  with pytest.raises(TypeError, match="extra.inner.steps"):
    load_state_dict(net, {"extra.inner.steps": Tensor(np.array([1.0], np.float32))}, strict=False, verbose=False)
  np.testing.assert_array_equal(net.extra["gain"].numpy(), [0.5, 0.5])

def test_load_state_dict_non_strict_and_consume(capsys):
  net = Net()
  full = _sd(5.0)
  partial = {"head.w": full["head.w"], "extra.gain": full["extra.gain"], "unused": Tensor([9.0])}
  expect_w, old_b = full["head.w"].numpy(), net.head.b.numpy()
  with pytest.warns(UserWarning, match="unused"): load_state_dict(net, partial, strict=False, consume=True)
  np.testing.assert_array_equal(net.head.w.numpy(), expect_w)
  np.testing.assert_array_equal(net.extra["gain"].numpy(), full["extra.gain"].numpy())
  np.testing.assert_array_equal(net.head.b.numpy(), old_b)
  assert list(partial) == ["unused"], "consume removes exactly the loaded keys"
  assert "head.b" in capsys.readouterr().out  # verbose lists (some of) the missing keys
  keep = dict(full)
  load_state_dict(net, keep, verbose=False)
  assert set(keep) == set(full), "without consume the dict is untouched"
  load_state_dict(net, keep, consume=True, verbose=False)
  assert keep == {}

def test_load_state_dict_from_safetensors_copies_out_of_the_file(tmp_path):
  net = Net()
  fn = tmp_path / "net.safetensors"
  ref = _sd(4.0)
  safe_save(ref, fn)
  load_state_dict(net, safe_load(fn), verbose=False)
  for k, v in get_state_dict(net).items(): assert v.device == "CPU", k
  fn.write_bytes(b"\0" * fn.stat().st_size)  # the model must not still read the file
  for k, v in get_state_dict(net).items(): np.testing.assert_array_equal(v.numpy(), ref[k].numpy(), err_msg=k)

class SmallModel:
  def __init__(self):
    self.fc1 = nn.Linear(5, 8)
    self.bn = nn.BatchNorm(8)
    self.fc2 = [nn.Linear(8, 3, bias=False)]
  def __call__(self, x: Tensor) -> Tensor: return self.fc2[0](self.bn(self.fc1(x)).relu())

def test_model_roundtrip_through_safetensors(tmp_path):
  Tensor.manual_seed(1)
  m = SmallModel()
  m.bn.running_mean.assign(Tensor(np.linspace(-1, 1, 8).astype(np.float32))).realize()
  m.bn.running_var.assign(Tensor(np.linspace(0.5, 2, 8).astype(np.float32))).realize()
  m.bn.weight.assign(Tensor(np.linspace(0.5, 1.5, 8).astype(np.float32))).realize()
  m.bn.num_batches_tracked.assign(Tensor(np.array([12], np.int64))).realize()
  x = Tensor(np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32))
  want = m(x).numpy()
  sd = get_state_dict(m)
  assert set(sd) == {"fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "bn.num_batches_tracked", "bn.running_mean", "bn.running_var", "fc2.0.weight"}
  safe_save(sd, tmp_path / "m.safetensors")
  header, _, _ = parse_file(tmp_path / "m.safetensors")
  assert header["bn.num_batches_tracked"]["dtype"] == "I64" and header["fc1.weight"]["shape"] == [8, 5]
  Tensor.manual_seed(2)
  fresh = SmallModel()
  assert not np.array_equal(fresh(x).numpy(), want)
  load_state_dict(fresh, safe_load(tmp_path / "m.safetensors"))
  np.testing.assert_array_equal(fresh(x).numpy(), want)
  assert fresh.bn.num_batches_tracked.numpy().tolist() == [12]
