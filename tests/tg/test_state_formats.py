"""Model-file loaders: PyTorch checkpoints (zip, legacy, legacy tar), GGUF and tar.

The torch checkpoints under fixtures/ were written by torch.save (regenerate with
`python tests/tg/test_state_formats.py`, which needs torch); the expected values are beside them in an .npz. Tests that
need torch itself skip when it isn't installed. Everything else builds its files here: pickles that name torch globals
are made by pickling stand-in classes and renaming their GLOBAL opcodes (protocol 2 spells them as text lines), GGUF
files by a small writer below with numpy reference quantizers for the documented block layouts."""
import io, pathlib, pickle, struct, subprocess, sys, tarfile, zipfile
from collections import OrderedDict
import numpy as np
import pytest
from tg import Tensor, dtypes
from tg.nn.torch_format import torch_load, UnsafeGlobalError
from tg.nn.gguf import gguf_load
from tg.nn.tar import tar_extract

FIXTURES = pathlib.Path(__file__).parent / "fixtures"

# ================================ torch checkpoints ================================
EXPECTED_DTYPES = {"f32": dtypes.float32, "t": dtypes.float32, "perm": dtypes.float32, "slice": dtypes.float32, "expand": dtypes.float32,
                   "row": dtypes.float32, "scalar": dtypes.float32, "f16": dtypes.float16, "bf16": dtypes.bfloat16, "f64": dtypes.float64,
                   "i8": dtypes.int8, "i16": dtypes.int16, "i32": dtypes.int32, "i64": dtypes.int64, "u8": dtypes.uint8, "b": dtypes.bool,
                   "empty": dtypes.float32, "param": dtypes.float32, "layer.0.weight": dtypes.float32, "layer.0.bias": dtypes.float32}
CONTIGUOUS = ["f32", "row", "scalar", "f16", "bf16", "f64", "i8", "i16", "i32", "i64", "u8", "b", "param", "layer.0.weight", "layer.0.bias"]

def _fixture_tensors(torch):
  g = torch.Generator().manual_seed(0)
  base = torch.randn(4, 5, 6, generator=g)
  return OrderedDict([
    ("f32", torch.randn(3, 4, generator=g)), ("t", torch.randn(3, 4, generator=g).t()), ("perm", base.permute(2, 0, 1)),
    ("slice", base[1:3, ::2, 1:5]), ("expand", torch.randn(3, 1, generator=g).expand(3, 4)), ("row", base[2, 1]),
    ("scalar", torch.tensor(3.5)), ("f16", torch.randn(5, generator=g).half()), ("bf16", torch.randn(2, 3, generator=g).bfloat16()),
    ("f64", torch.randn(4, generator=g).double()), ("i8", torch.arange(-5, 5, dtype=torch.int8)),
    ("i16", torch.arange(6, dtype=torch.int16).reshape(2, 3) - 3), ("i32", torch.arange(7, dtype=torch.int32) * 1000),
    ("i64", torch.arange(4, dtype=torch.int64) * 10**12), ("u8", torch.arange(200, 210, dtype=torch.uint8)),
    ("b", torch.tensor([True, False, True])), ("empty", torch.zeros(0, 3)), ("param", torch.nn.Parameter(torch.ones(2, 2) * 0.5)),
    ("layer.0.weight", torch.randn(2, 3, generator=g)), ("layer.0.bias", torch.randn(2, generator=g))])

def _np(t): return t.detach().float().numpy() if str(t.dtype) in ("torch.bfloat16", "torch.float8_e4m3fn") else t.detach().numpy()

def make_fixtures(torch, out: pathlib.Path = FIXTURES) -> None:
  out.mkdir(parents=True, exist_ok=True)
  sd = _fixture_tensors(torch)
  torch.save({"state_dict": sd, "epoch": 7, "note": "fixture"}, out / "torch_zip.pt")
  torch.save(sd, out / "torch_legacy.pt", _use_new_zipfile_serialization=False)
  np.savez(out / "torch_expected.npz", **{k: _np(v) for k, v in sd.items()})

def _check_fixture(out, expected) -> None:
  assert list(out) == list(EXPECTED_DTYPES)
  for k, ref in expected.items():
    got = out[k]
    assert got.dtype == EXPECTED_DTYPES[k], k
    assert got.shape == ref.shape, k
    np.testing.assert_array_equal(got.numpy(), ref, err_msg=k)

@pytest.fixture(scope="module")
def expected():
  with np.load(FIXTURES / "torch_expected.npz") as f: return {k: f[k] for k in f.files}

@pytest.mark.parametrize("name", ["torch_zip.pt", "torch_legacy.pt"])
def test_torch_fixture(name, expected):
  out = torch_load(FIXTURES / name)
  _check_fixture(out, expected)
  for k in CONTIGUOUS: assert out[k].device.startswith("DISK:"), f"{k} should be a lazy view of the file"

def test_torch_fixture_from_tensor_and_compressed(tmp_path, expected):
  _check_fixture(torch_load(Tensor((FIXTURES / "torch_zip.pt").read_bytes())), expected)
  # the same archive with every entry deflated: storages are inflated into memory instead of viewed
  with zipfile.ZipFile(FIXTURES / "torch_zip.pt") as src, zipfile.ZipFile(tmp_path / "deflated.pt", "w", zipfile.ZIP_DEFLATED) as dst:
    for info in src.infolist(): dst.writestr(info.filename, src.read(info))
  _check_fixture(torch_load(tmp_path / "deflated.pt"), expected)

# ---- building checkpoints by hand: stand-ins pickled under torch's names ----
class _Stub:
  """A class pickled as a global whose name is then rewritten (see _dumps)."""
class FloatStorage(_Stub): pass
class HalfStorage(_Stub): pass
class FloatTensor(_Stub): pass
class device(_Stub):
  """Pickles as torch.device(type, index)."""
  def __init__(self, kind, index): self.kind, self.index = kind, index
  def __reduce__(self): return device, (self.kind, self.index)
def _rebuild_tensor_v2(*args): pass
def _system(*args): pass
RENAMES = {FloatStorage: "torch\nFloatStorage", HalfStorage: "torch\nHalfStorage", FloatTensor: "torch\nFloatTensor", device: "torch\ndevice",
           _rebuild_tensor_v2: "torch._utils\n_rebuild_tensor_v2", _system: "os\nsystem"}

class _Call:
  """Pickles as fn(*args)."""
  def __init__(self, fn, *args): self.fn, self.args = fn, args
  def __reduce__(self): return self.fn, self.args

class _Pid:
  """Pickles as a persistent id."""
  def __init__(self, pid): self.pid = pid

def _dumps(obj) -> bytes:
  buf = io.BytesIO()
  p = pickle.Pickler(buf, protocol=2)
  p.persistent_id = lambda o: o.pid if isinstance(o, _Pid) else None
  p.dump(obj)
  data = buf.getvalue()
  for stub, target in RENAMES.items():
    data = data.replace(f"c{stub.__module__}\n{stub.__qualname__}\n".encode(), f"c{target}\n".encode())
  return data

def _tensor_call(key, stype, numel, offset, size, stride):
  return _Call(_rebuild_tensor_v2, _Pid(("storage", stype, key, "cpu", numel)), offset, size, stride, False, OrderedDict())

def _write_zip(path, obj, storages: dict[str, bytes], byteorder="little", skip=()):
  with zipfile.ZipFile(path, "w") as z:
    z.writestr("archive/data.pkl", _dumps(obj))
    z.writestr("archive/byteorder", byteorder)
    for k, v in storages.items():
      if k not in skip: z.writestr(f"archive/data/{k}", v)
    z.writestr("archive/version", "3\n")

def test_hand_built_zip_strides(tmp_path):
  data = np.arange(60, dtype=np.float32)
  obj = {"a": _tensor_call("0", FloatStorage, 60, 3, (3, 4), (8, 2)), "b": _tensor_call("0", FloatStorage, 60, 0, (2, 3, 2), (1, 20, 4)),
         "c": _tensor_call("0", FloatStorage, 60, 5, (4, 3), (0, 7)), "d": _tensor_call("1", HalfStorage, 3, 0, (3,), (1,)),
         "ovl": _tensor_call("0", FloatStorage, 60, 1, (4, 5), (3, 1)), "nested": [_tensor_call("0", FloatStorage, 60, 10, (2,), (1,))]}
  _write_zip(tmp_path / "s.pt", obj, {"0": data.tobytes(), "1": np.array([1.5, -2, 4], np.float16).tobytes()})
  out = torch_load(tmp_path / "s.pt")
  st = lambda off, shape, strides: np.lib.stride_tricks.as_strided(data[off:], shape, [s * 4 for s in strides])
  np.testing.assert_array_equal(out["a"].numpy(), st(3, (3, 4), (8, 2)))
  np.testing.assert_array_equal(out["b"].numpy(), st(0, (2, 3, 2), (1, 20, 4)))
  np.testing.assert_array_equal(out["c"].numpy(), st(5, (4, 3), (0, 7)))
  np.testing.assert_array_equal(out["ovl"].numpy(), st(1, (4, 5), (3, 1)))
  np.testing.assert_array_equal(out["nested.0"].numpy(), data[10:12])
  assert out["d"].dtype == dtypes.float16 and out["d"].numpy().tolist() == [1.5, -2, 4]

def test_big_endian_zip(tmp_path):
  data = np.array([[1.25, -3.5], [7.0, 0.1]], dtype=np.float32)
  obj = {"x": _tensor_call("0", FloatStorage, 4, 0, (2, 2), (2, 1)), "xt": _tensor_call("0", FloatStorage, 4, 0, (2, 2), (1, 2))}
  _write_zip(tmp_path / "be.pt", obj, {"0": data.astype(">f4").tobytes()}, byteorder="big")
  out = torch_load(tmp_path / "be.pt")
  np.testing.assert_array_equal(out["x"].numpy(), data)
  np.testing.assert_array_equal(out["xt"].numpy(), data.T)

def _write_tar_checkpoint(path, storages: dict[str, np.ndarray], tensors: dict[str, tuple], obj, corrupt_storage_size=False):
  """The pre-0.4 layout: members 'storages', 'tensors' and 'pickle' (tensor keys are ints, the pickle names them by
  persistent id)."""
  st = _dumps(len(storages))
  for key, arr in storages.items():
    n = arr.size + (1000 if corrupt_storage_size else 0)
    st += _dumps((key, "cpu", FloatStorage)) + struct.pack("<q", n) + arr.astype(np.float32).tobytes()
  st += _dumps([])
  te = _dumps(len(tensors))
  for key, (skey, offset, size, stride) in tensors.items():
    te += _dumps((key, skey, FloatTensor)) + struct.pack("<i", len(size)) + b"\0" * 4
    te += struct.pack(f"<{2 * len(size) + 1}q", *size, *stride, offset)
  with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
    for name, data in (("sys_info", _dumps({"little_endian": True})), ("pickle", _dumps(obj)), ("tensors", te), ("storages", st)):
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tf.addfile(info, io.BytesIO(data))

def test_legacy_tar_checkpoint(tmp_path):
  a = np.arange(12, dtype=np.float32)
  _write_tar_checkpoint(tmp_path / "old.tar", {"s0": a}, {1: ("s0", 0, (3, 4), (4, 1)), 2: ("s0", 2, (2, 3), (1, 4))},
                        {"weight": _Pid("1"), "other": {"w": _Pid("2")}, "epoch": 3})
  out = torch_load(tmp_path / "old.tar")
  assert list(out) == ["weight", "other.w"]
  np.testing.assert_array_equal(out["weight"].numpy(), a.reshape(3, 4))
  np.testing.assert_array_equal(out["other.w"].numpy(), np.lib.stride_tricks.as_strided(a[2:], (2, 3), (4, 16)))
  assert out["weight"].device.startswith("DISK:")
  _write_tar_checkpoint(tmp_path / "bad.tar", {"s0": a}, {1: ("s0", 0, (3, 4), (4, 1))}, {"weight": _Pid("1")}, corrupt_storage_size=True)
  with pytest.raises(ValueError, match=r"bad\.tar.*storage s0 at offset \d+"): torch_load(tmp_path / "bad.tar")

# ---- security ----
@pytest.mark.parametrize("layout", ["zip", "legacy", "tar"])
@pytest.mark.parametrize("target", ["os.system", "builtins.eval"])
def test_refuses_code_execution(tmp_path, layout, target):
  marker = tmp_path / "pwned"
  cmd = f"touch {marker}" if target == "os.system" else f"open({str(marker)!r}, 'w')"
  payload = _Call(_system, cmd) if target == "os.system" else _Call(eval, cmd)
  obj = {"w": _tensor_call("0", FloatStorage, 1, 0, (1,), (1,)), "x": payload}
  path = tmp_path / "evil.pt"
  if layout == "zip": _write_zip(path, obj, {"0": b"\0" * 4})
  elif layout == "legacy":
    path.write_bytes(_dumps(0x1950A86A20F9469CFC6C) + _dumps(1001) + _dumps({"little_endian": True}) + _dumps(obj) + _dumps(["0"]) +
                     struct.pack("<q", 1) + b"\0" * 4)
  else: _write_tar_checkpoint(path, {"s0": np.zeros(1)}, {1: ("s0", 0, (1,), (1,))}, {"w": _Pid("1"), "x": payload})
  with pytest.raises(pickle.UnpicklingError, match=target.replace(".", r"\.")) as e: torch_load(path)
  assert isinstance(e.value, UnsafeGlobalError) and isinstance(e.value, ValueError)  # what a user can cause is a ValueError
  assert str(e.value).startswith(f"{path}: ") and "opcode at" in str(e.value)
  assert not marker.exists()

def test_refuses_other_globals(tmp_path):
  for mod, name in [("torch.nn.modules.linear", "Linear"), ("numpy.core.multiarray", "_reconstruct"), ("subprocess", "Popen"), ("torch", "load")]:
    data = b"\x80\x02c" + f"{mod}\n{name}\n".encode() + b")R."
    with zipfile.ZipFile(tmp_path / "g.pt", "w") as z: z.writestr("archive/data.pkl", data)
    with pytest.raises(UnsafeGlobalError, match=f"{mod}.{name}"): torch_load(tmp_path / "g.pt")

def test_pickle_cannot_alter_allowed_globals(tmp_path, expected):
  """BUILD writes attributes into the object on the stack: aimed at a shared stand-in it must fail, leaving later loads
  (and tg's own dtypes) intact."""
  for glob in ("torch\nfloat32", "torch\nFloatStorage", "torch._utils\n_rebuild_tensor_v2", "collections\nOrderedDict"):
    for state in (b"}X\x08\x00\x00\x00itemsizeK\x01s", b"N}X\x05\x00\x00\x00dtypeK\x01s\x86"):  # dict state, slot state
      with zipfile.ZipFile(tmp_path / "b.pt", "w") as z: z.writestr("archive/data.pkl", b"\x80\x02c" + glob.encode() + b"\n" + state + b"b.")
      with pytest.raises(ValueError, match=r"b\.pt: corrupt"): torch_load(tmp_path / "b.pt")
  assert dtypes.float32.itemsize == 4
  _check_fixture(torch_load(FIXTURES / "torch_zip.pt"), expected)

def test_non_tensor_values(tmp_path):
  """The other values a checkpoint holds go through the allowed globals (checked stand-ins now) and are skipped; a
  state_dict's `_metadata` attribute (a BUILD on the OrderedDict) is dropped."""
  sd = OrderedDict(w=_tensor_call("0", FloatStorage, 2, 0, (2,), (1,)))
  sd._metadata = OrderedDict([("", {"version": 1})])
  obj = {"state_dict": sd, "device": device("cuda", 0), "tags": {"a", ("b", 1)}, "frozen": frozenset([1.5]), "raw": bytearray(b"\x00\xff"),
         "z": 1 + 2j, "ids": {(1, 2): "pair"}}
  _write_zip(tmp_path / "values.pt", obj, {"0": np.float32([1, 2]).tobytes()})
  assert b"ctorch\ndevice\n" in (data := _dumps(obj)) and pickle.BUILD in data
  out = torch_load(tmp_path / "values.pt")
  assert list(out) == ["w"] and out["w"].numpy().tolist() == [1, 2]

# ---- corrupt and truncated files ----
def test_corrupt_zip(tmp_path):
  raw = (FIXTURES / "torch_zip.pt").read_bytes()
  (tmp_path / "half.pt").write_bytes(raw[:len(raw) // 2])
  with pytest.raises(ValueError, match=r"half\.pt.*zip"): torch_load(tmp_path / "half.pt")
  # a storage entry missing from the archive
  with zipfile.ZipFile(FIXTURES / "torch_zip.pt") as src, zipfile.ZipFile(tmp_path / "missing.pt", "w") as dst:
    for info in src.infolist():
      if not info.filename.endswith("/data/0"): dst.writestr(info.filename, src.read(info))
  with pytest.raises(ValueError, match=r"missing\.pt.*missing zip entry 'torch_zip/data/0'"): torch_load(tmp_path / "missing.pt")
  # a broken local file header
  with zipfile.ZipFile(FIXTURES / "torch_zip.pt") as z: at = z.getinfo("torch_zip/data/1").header_offset
  (tmp_path / "hdr.pt").write_bytes(raw[:at] + b"XXXX" + raw[at + 4:])
  with pytest.raises(ValueError, match=rf"hdr\.pt.*'torch_zip/data/1'.*offset {at}"): torch_load(tmp_path / "hdr.pt")
  # a storage smaller than its tensor
  _write_zip(tmp_path / "short.pt", {"x": _tensor_call("0", FloatStorage, 6, 2, (2, 3), (3, 1))}, {"0": b"\0" * 24})
  with pytest.raises(ValueError, match=r"short\.pt.*tensor 'x'.*reaches element 7.*6 .*elements"): torch_load(tmp_path / "short.pt")
  _write_zip(tmp_path / "huge.pt", {"x": _tensor_call("0", FloatStorage, 0, 0, (0, 2**63), (1, 1))}, {"0": b""})
  with pytest.raises(ValueError, match=r"huge\.pt: .*tensor size \(0, 9223372036854775808\) is too big to index"): torch_load(tmp_path / "huge.pt")
  # no data.pkl
  with zipfile.ZipFile(tmp_path / "nopkl.pt", "w") as z: z.writestr("archive/other", b"x")
  with pytest.raises(ValueError, match="no data.pkl"): torch_load(tmp_path / "nopkl.pt")

def test_corrupt_legacy_and_other(tmp_path):
  raw = (FIXTURES / "torch_legacy.pt").read_bytes()
  (tmp_path / "cut.pt").write_bytes(raw[:-10])
  with pytest.raises(ValueError, match=r"cut\.pt: storage \S+ at offset \d+ claims \d+ elements"): torch_load(tmp_path / "cut.pt")
  (tmp_path / "cut2.pt").write_bytes(raw[:200])
  with pytest.raises(ValueError, match=r"cut2\.pt: corrupt or truncated pickle"): torch_load(tmp_path / "cut2.pt")
  (tmp_path / "magic.pt").write_bytes(_dumps(1234) + raw[60:])
  with pytest.raises(ValueError, match="legacy magic number"): torch_load(tmp_path / "magic.pt")
  (tmp_path / "junk.pt").write_bytes(b"hello world, not a checkpoint" * 30)
  with pytest.raises(ValueError, match=r"junk\.pt: not a PyTorch checkpoint"): torch_load(tmp_path / "junk.pt")
  (tmp_path / "empty.pt").write_bytes(b"")
  with pytest.raises(ValueError, match="empty"): torch_load(tmp_path / "empty.pt")

# ---- against torch itself ----
def test_against_torch(tmp_path):
  torch = pytest.importorskip("torch")
  sd = _fixture_tensors(torch)
  g = torch.Generator().manual_seed(1)
  sd["big_t"] = torch.randn(33, 17, generator=g).t()
  model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Flatten(), torch.nn.Linear(4, 2))
  sd_zip = OrderedDict(sd, u16=torch.tensor([1, 60000, 7], dtype=torch.uint16), fp8=torch.tensor([0.5, -448.0, 3.0]).to(torch.float8_e4m3fn))
  for legacy in (False, True):
    for obj, ref in ((sd, sd) if legacy else (sd_zip, sd_zip), ({"model": model.state_dict(), "step": 10}, model.state_dict())):
      fn = tmp_path / f"ckpt_{legacy}.pt"
      torch.save(obj, fn, _use_new_zipfile_serialization=not legacy)
      out = torch_load(fn)
      assert list(out) == list(ref)
      for k, v in ref.items(): np.testing.assert_array_equal(out[k].numpy(), _np(v), err_msg=f"{k} legacy={legacy}")

def test_fixtures_match_torch(expected):
  torch = pytest.importorskip("torch")
  for name in ("torch_zip.pt", "torch_legacy.pt"):
    obj = torch.load(FIXTURES / name, weights_only=True)
    sd = obj["state_dict"] if "state_dict" in obj else obj
    for k, v in sd.items(): np.testing.assert_array_equal(_np(v), expected[k])

# ================================ GGUF ================================
def _f16_bytes(x) -> np.ndarray: return np.asarray(x, dtype=np.float16).reshape(-1, 1).view(np.uint8)
def _f16(b: np.ndarray) -> np.float32: return np.float32(b[:2].copy().view(np.float16)[0])

# ---- numpy reference quantizers (produce blocks in the documented layouts) ----
def quant_q8_0(x):
  x = x.reshape(-1, 32)
  d = (np.abs(x).max(1) / 127).astype(np.float16)
  q = np.clip(np.round(x / np.where(d == 0, 1, d.astype(np.float32))[:, None]), -127, 127).astype(np.int8)
  return np.concatenate([_f16_bytes(d), q.view(np.uint8)], 1)

def _pack_nibbles(q):  # element j < 16 low nibble of byte j, element j + 16 its high nibble
  return (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)

def quant_q4_0(x):
  x = x.reshape(-1, 32)
  amax = x[np.arange(len(x)), np.abs(x).argmax(1)]
  d = (amax / -8).astype(np.float16)
  q = np.clip(np.round(x / np.where(d == 0, 1, d.astype(np.float32))[:, None]) + 8, 0, 15).astype(np.uint8)
  return np.concatenate([_f16_bytes(d), _pack_nibbles(q)], 1)

def quant_q4_1(x):
  x = x.reshape(-1, 32)
  mn, mx = x.min(1), x.max(1)
  d, m = ((mx - mn) / 15).astype(np.float16), mn.astype(np.float16)
  q = np.clip(np.round((x - m.astype(np.float32)[:, None]) / np.where(d == 0, 1, d.astype(np.float32))[:, None]), 0, 15).astype(np.uint8)
  return np.concatenate([_f16_bytes(d), _f16_bytes(m), _pack_nibbles(q)], 1)

def quant_q4_k(x):
  blocks = []
  for sb in x.reshape(-1, 8, 32):
    mins = np.minimum(sb.min(1), 0)
    scales = (sb.max(1) - mins) / 15
    d, dmin = np.float16(scales.max() / 63), np.float16(-mins.min() / 63)
    sc = np.clip(np.round(scales / max(float(d), 1e-12)), 0, 63).astype(np.int64)
    m = np.clip(np.round(-mins / max(float(dmin), 1e-12)), 0, 63).astype(np.int64)
    s = np.zeros(12, np.int64)
    for j in range(4):
      s[j] = sc[j] | ((sc[j + 4] >> 4) << 6)
      s[j + 4] = m[j] | ((m[j + 4] >> 4) << 6)
      s[j + 8] = (sc[j + 4] & 15) | ((m[j + 4] & 15) << 4)
    step = np.float32(d) * sc.astype(np.float32)
    q = np.clip(np.round((sb + (np.float32(dmin) * m)[:, None]) / np.where(step == 0, 1, step)[:, None]), 0, 15).astype(np.int64)
    qs = np.zeros(128, np.int64)
    for c in range(4): qs[32 * c:32 * c + 32] = q[2 * c] | (q[2 * c + 1] << 4)
    blocks.append(np.concatenate([_f16_bytes([d, dmin]).reshape(-1), s, qs]).astype(np.uint8))
  return np.stack(blocks)

def quant_q6_k(x):
  blocks = []
  for sb in x.reshape(-1, 256):
    groups = sb.reshape(16, 16)
    gscale = np.abs(groups).max(1) / 31
    d = np.float16(gscale.max() / 127)
    sc = np.clip(np.round(gscale / max(float(d), 1e-12)), 0, 127).astype(np.int8)
    step = np.float32(d) * sc.astype(np.float32)
    q = (np.clip(np.round(groups / np.where(step == 0, 1, step)[:, None]), -32, 31) + 32).astype(np.int64).reshape(256)
    ql, qh = np.zeros(128, np.int64), np.zeros(64, np.int64)
    for e in range(256):
      half, r = divmod(e, 128)
      k, l = divmod(r, 32)
      nibble, run = divmod(k, 2)
      ql[64 * half + 32 * run + l] |= (q[e] & 15) << (4 * nibble)
      qh[32 * half + l] |= (q[e] >> 4) << (2 * k)
    blocks.append(np.concatenate([ql, qh, sc.view(np.uint8), _f16_bytes(d).reshape(-1)]).astype(np.uint8))
  return np.stack(blocks)

# ---- numpy reference dequantizers, element by element from the block layouts ----
def deq_q8_0(b): return np.concatenate([_f16(r) * r[2:34].view(np.int8).astype(np.float32) for r in b])
def deq_q4_0(b):
  return np.concatenate([_f16(r) * (np.concatenate([r[2:18] & 15, r[2:18] >> 4]).astype(np.float32) - 8) for r in b])
def deq_q4_1(b):
  return np.concatenate([_f16(r) * np.concatenate([r[4:20] & 15, r[4:20] >> 4]).astype(np.float32) + _f16(r[2:]) for r in b])
def deq_q4_k(b):
  out = np.zeros((len(b), 256), np.float32)
  for i, r in enumerate(b):
    d, dmin, s, qs = _f16(r), _f16(r[2:]), r[4:16].astype(np.int64), r[16:144].astype(np.int64)
    for j in range(8):
      if j < 4: sc, m = s[j] & 63, s[j + 4] & 63
      else: sc, m = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)
      q = qs[32 * (j // 2):32 * (j // 2) + 32] >> (4 * (j % 2)) & 15
      out[i, 32 * j:32 * j + 32] = np.float32(d * np.float32(sc)) * q.astype(np.float32) - np.float32(dmin * np.float32(m))
  return out.reshape(-1)
def deq_q6_k(b):
  out = np.zeros((len(b), 256), np.float32)
  for i, r in enumerate(b):
    ql, qh, sc, d = r[0:128].astype(np.int64), r[128:192].astype(np.int64), r[192:208].view(np.int8).astype(np.float32), _f16(r[208:])
    for e in range(256):
      half, rem = divmod(e, 128)
      k, l = divmod(rem, 32)
      nibble, run = divmod(k, 2)
      q = ((ql[64 * half + 32 * run + l] >> (4 * nibble)) & 15) | (((qh[32 * half + l] >> (2 * k)) & 3) << 4)
      out[i, e] = np.float32(d * sc[e // 16]) * np.float32(q - 32)
  return out.reshape(-1)

QUANTS = {"Q8_0": (8, quant_q8_0, deq_q8_0, 0.01), "Q4_0": (2, quant_q4_0, deq_q4_0, 0.1), "Q4_1": (3, quant_q4_1, deq_q4_1, 0.1),
          "Q4_K": (12, quant_q4_k, deq_q4_k, 0.15), "Q6_K": (14, quant_q6_k, deq_q6_k, 0.04)}

# ---- a GGUF writer ----
VT = {"u8": (0, "B"), "i8": (1, "b"), "u16": (2, "H"), "i16": (3, "h"), "u32": (4, "I"), "i32": (5, "i"), "f32": (6, "f"),
      "bool": (7, "?"), "str": (8, None), "arr": (9, None), "u64": (10, "Q"), "i64": (11, "q"), "f64": (12, "d")}

def _gstr(s: str) -> bytes: return struct.pack("<Q", len(s.encode())) + s.encode()
def _gvalue(kind: str, v) -> bytes:
  tid, code = VT[kind]
  if code: return struct.pack("<" + code, v)
  if kind == "str": return _gstr(v)
  ekind, items = v
  return struct.pack("<IQ", VT[ekind][0], len(items)) + b"".join(_gvalue(ekind, i) for i in items)

def write_gguf(path, metadata: list, tensors: list, version: int = 3, alignment: int | None = None) -> None:
  """metadata: (key, kind, value); tensors: (name, numpy shape, ggml type id, raw bytes)."""
  align = alignment or 32
  if alignment is not None: metadata = [*metadata, ("general.alignment", "u32", alignment)]
  out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata))
  for key, kind, value in metadata: out += _gstr(key) + struct.pack("<I", VT[kind][0]) + _gvalue(kind, value)
  data = b""
  for name, shape, tid, raw in tensors:
    data += b"\0" * (-len(data) % align)
    out += _gstr(name) + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *reversed(shape)) + struct.pack("<IQ", tid, len(data))
    data += raw
  pathlib.Path(path).write_bytes(out + b"\0" * (-len(out) % align) + data)

METADATA = [("general.architecture", "str", "llama"), ("general.name", "str", "tiny ✓"), ("u8", "u8", 200), ("i8", "i8", -100),
            ("u16", "u16", 60000), ("i16", "i16", -30000), ("u32", "u32", 4_000_000_000), ("i32", "i32", -2_000_000_000),
            ("f32", "f32", 0.5), ("bool", "bool", True), ("u64", "u64", 2**63 + 5), ("i64", "i64", -2**40), ("f64", "f64", 1 / 3),
            ("tokens", "arr", ("str", ["<s>", "</s>", "héllo", ""])), ("scores", "arr", ("f32", [0.0, -1.5, 2.25])),
            ("nested", "arr", ("arr", [("i32", [1, 2]), ("i32", [])])), ("flags", "arr", ("bool", [True, False]))]

def _metadata_values(): return {k: (list(v[1]) if kind == "arr" and v[0] != "arr" else [list(i[1]) for i in v[1]] if kind == "arr" else v)
                                for k, kind, v in METADATA}

@pytest.mark.parametrize("version,alignment", [(3, None), (2, 64)])
def test_gguf_types(tmp_path, version, alignment):
  rng = np.random.default_rng(version)
  plain = {"f32": (0, np.float32, rng.standard_normal((3, 5)).astype(np.float32)), "f16": (1, np.float16, rng.standard_normal(7).astype(np.float16)),
           "i32": (26, np.int32, np.arange(-3, 3, dtype=np.int32).reshape(2, 3)), "f64": (28, np.float64, rng.standard_normal(2))}
  bf16_vals = rng.standard_normal((2, 4)).astype(np.float32)
  bf16_bits = (bf16_vals.view(np.uint32) >> 16).astype(np.uint16)
  tensors = [(k, v.shape, tid, v.astype(dt).tobytes()) for k, (tid, dt, v) in plain.items()]
  tensors.append(("bf16", (2, 4), 30, bf16_bits.tobytes()))
  originals, blocks = {}, {}
  for name, (tid, quant, _, _) in QUANTS.items():
    shape = (2, 256) if name.endswith("_K") else (3, 64)
    originals[name] = rng.standard_normal(shape).astype(np.float32)
    blocks[name] = quant(originals[name])
    tensors.append((name, shape, tid, blocks[name].tobytes()))
  write_gguf(tmp_path / "m.gguf", METADATA, tensors, version, alignment)

  meta, out = gguf_load(tmp_path / "m.gguf")
  expect_meta = _metadata_values()
  if alignment: expect_meta["general.alignment"] = alignment
  assert meta.keys() == expect_meta.keys()
  for k, v in expect_meta.items():
    assert meta[k] == (pytest.approx(v) if k in ("f32", "scores") else v), k
  assert list(out) == [t[0] for t in tensors]
  for k, (tid, dt, v) in plain.items():
    assert out[k].shape == v.shape and out[k].device.startswith("DISK:")
    np.testing.assert_array_equal(out[k].numpy(), v.astype(dt))
  assert out["bf16"].dtype == dtypes.bfloat16
  np.testing.assert_array_equal(out["bf16"].numpy(), (bf16_bits.astype(np.uint32) << 16).view(np.float32))
  Tensor.realize_all(*(out[n] for n in QUANTS))
  for name, (_, _, deq, tol) in QUANTS.items():
    got = out[name]
    assert got.shape == originals[name].shape and got.dtype == dtypes.float32 and not got.device.startswith("DISK")
    np.testing.assert_array_equal(got.numpy().reshape(-1), deq(blocks[name]), err_msg=name)
    assert np.abs(got.numpy() - originals[name]).max() < tol * np.abs(originals[name]).max(), name

def test_gguf_random_k_blocks_and_tensor_input(tmp_path):
  """Arbitrary bytes in the scale and quant fields of K-quant blocks (every bit pattern), read from a Tensor."""
  rng = np.random.default_rng(7)
  q4k, q6k = rng.integers(0, 256, (3, 144), dtype=np.uint8), rng.integers(0, 256, (2, 210), dtype=np.uint8)
  q4k[:, 0:4] = _f16_bytes(rng.uniform(-0.1, 0.1, (3, 2))).reshape(3, 4)
  q6k[:, 208:210] = _f16_bytes(rng.uniform(-0.1, 0.1, 2)).reshape(2, 2)
  write_gguf(tmp_path / "k.gguf", [], [("a", (3, 256), 12, q4k.tobytes()), ("b", (512,), 14, q6k.tobytes())])
  meta, out = gguf_load(Tensor((tmp_path / "k.gguf").read_bytes()))
  assert meta == {}
  np.testing.assert_array_equal(out["a"].numpy().reshape(-1), deq_q4_k(q4k))
  np.testing.assert_array_equal(out["b"].numpy(), deq_q6_k(q6k))

def test_gguf_errors(tmp_path):
  good = [("w", (2, 32), 8, quant_q8_0(np.ones((2, 32), np.float32)).tobytes())]
  write_gguf(tmp_path / "ok.gguf", METADATA, good)
  raw = (tmp_path / "ok.gguf").read_bytes()
  def check(data: bytes, pattern: str):
    (tmp_path / "bad.gguf").write_bytes(data)
    with pytest.raises(ValueError, match=pattern): gguf_load(tmp_path / "bad.gguf")
  check(b"GGUX" + raw[4:], r"bad\.gguf: bad magic .* at offset 0")
  check(raw[:4] + struct.pack("<I", 1) + raw[8:], r"unsupported GGUF version 1 at offset 4")
  check(raw[:4] + struct.pack(">I", 3) + raw[8:], r"version .* at offset 4 \(a big-endian file\?\)")
  check(raw[:300], r"bad\.gguf: .* at offset \d+ .*runs past the end")
  check(raw[:-10], r"tensor 'w' data at offset \d+ \(68 bytes\) runs past the end")
  check(raw[:16] + struct.pack("<Q", 10**12) + raw[24:], r"metadata count 10+ in the header \(offset 16\)")
  # a tensor offset past the end of the file
  write_gguf(tmp_path / "off.gguf", [], good)
  data = bytearray((tmp_path / "off.gguf").read_bytes())
  at = 24 + 8 + 1 + 4 + 16 + 4
  data[at:at + 8] = struct.pack("<Q", 1 << 20)
  check(bytes(data), r"tensor 'w' data at offset 1048\d+ .*runs past the end")
  # unknown and unsupported tensor types
  write_gguf(tmp_path / "t.gguf", [], [("odd", (32,), 99, b"\0" * 64)])
  with pytest.raises(ValueError, match=r"tensor 'odd' has unknown ggml type id 99"): gguf_load(tmp_path / "t.gguf")
  write_gguf(tmp_path / "t.gguf", [], [("tq", (256,), 34, b"\0" * 54)])
  with pytest.raises(ValueError, match=r"tensor 'tq' has ggml type TQ1_0 \(id 34\), which can't be loaded yet"): gguf_load(tmp_path / "t.gguf")
  # an empty tensor whose other dim can't be indexed (numpy, and tg's .numpy(), would fail on it later)
  write_gguf(tmp_path / "t.gguf", [], [("huge", (2**62, 0), 0, b"")])
  with pytest.raises(ValueError, match=r"t\.gguf: tensor 'huge' .* has shape \(4611686018427387904, 0\), too big to index"): gguf_load(tmp_path / "t.gguf")
  write_gguf(tmp_path / "t.gguf", [("x", "arr", ("u8", [1]))], [])
  data = (tmp_path / "t.gguf").read_bytes().replace(struct.pack("<II", 9, 0), struct.pack("<II", 9, 77))
  check(data, r"array 'x' at offset \d+ has unknown element type 77")

# ================================ tar ================================
@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_tar_extract(tmp_path, fmt):
  long = "dir/" + "n" * (90 if fmt == tarfile.USTAR_FORMAT else 150) + ".bin"
  files = {"a.txt": b"hello", long: bytes(range(256)) * 3, "empty": b"", "sub/b": b"\x00\xff" * 300}
  with tarfile.open(tmp_path / "x.tar", "w", format=fmt) as tf:
    tf.addfile(_dir_info("sub"))
    for name, data in files.items():
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tf.addfile(info, io.BytesIO(data))
  for src in (tmp_path / "x.tar", Tensor((tmp_path / "x.tar").read_bytes())):
    out = tar_extract(src)
    assert list(out) == list(files)
    for name, data in files.items():
      assert out[name].dtype == dtypes.uint8 and out[name].shape == (len(data),)
      assert out[name].numpy().tobytes() == data
  assert tar_extract(tmp_path / "x.tar")["a.txt"].device.startswith("DISK:")

def _dir_info(name):
  info = tarfile.TarInfo(name)
  info.type = tarfile.DIRTYPE
  return info

def test_tar_errors(tmp_path):
  with tarfile.open(tmp_path / "x.tar", "w", format=tarfile.USTAR_FORMAT) as tf:
    for name in ("a", "b"):
      info = tarfile.TarInfo(name)
      info.size = 1000
      tf.addfile(info, io.BytesIO(b"z" * 1000))
  raw = (tmp_path / "x.tar").read_bytes()
  (tmp_path / "sum.tar").write_bytes(raw[:1536] + b"c" + raw[1537:])  # the second header's name
  with pytest.raises(ValueError, match=r"sum\.tar: tar header at offset 1536 has a bad checksum"): tar_extract(tmp_path / "sum.tar")
  (tmp_path / "cut.tar").write_bytes(raw[:1536 + 512 + 100])
  with pytest.raises(ValueError, match=r"tar member 'b' .* at offset 2048, past the end"): tar_extract(tmp_path / "cut.tar")
  # a pax size record that isn't a number
  with tarfile.open(tmp_path / "pax.tar", "w", format=tarfile.PAX_FORMAT) as tf:
    info = tarfile.TarInfo("a")
    info.size, info.pax_headers = 3, {"size": "3"}
    tf.addfile(info, io.BytesIO(b"abc"))
  raw = bytearray((tmp_path / "pax.tar").read_bytes().replace(b"size=3", b"size=x"))
  raw[148:156] = b"%06o\0 " % (sum(raw[:148]) + 256 + sum(raw[156:512]))
  (tmp_path / "pax.tar").write_bytes(bytes(raw))
  with pytest.raises(ValueError, match=r"pax\.tar: pax header before offset 1024 gives the size 'x'"): tar_extract(tmp_path / "pax.tar")

def test_file_truncated_while_loading(tmp_path):
  """The loaders read a file through its descriptor: one cut short by another process after it was opened gives a
  ValueError naming the file and the range (a mapping would raise SIGBUS: the reads run in a child process)."""
  path = tmp_path / "f.bin"
  path.write_bytes(bytes(range(256)) * 64)
  code = f"""import os, sys
sys.path.insert(0, {str(pathlib.Path(__file__).resolve().parents[2])!r})
from tg.nn.tar import ByteSource
src = ByteSource({str(path)!r})
print(list(src.read(1, 3)), flush=True)
os.truncate({str(path)!r}, 100)
try: src.read(8000, 100, "a tensor")
except ValueError as e: print("ValueError", e)"""
  p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert p.returncode == 0, f"the reader died (exit {p.returncode}; -7 is SIGBUS): {p.stderr[-2000:]}"
  assert p.stdout.splitlines() == ["[1, 2, 3]", f"ValueError {path}: a tensor at offset 8000 (100 bytes) can't be read: the file is now 100 bytes, "
                                                "it had 16384 when it was opened (truncated by another process?)"]

if __name__ == "__main__":
  import torch
  make_fixtures(torch)
  print("wrote", *sorted(p.name for p in FIXTURES.iterdir()), *(p.stat().st_size for p in sorted(FIXTURES.iterdir())))
