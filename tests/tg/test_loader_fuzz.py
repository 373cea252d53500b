"""Hostile and mutated model files: every loader either returns tensors whose data matches their shape, or raises a
ValueError naming the file; never a crash, a hang or an allocation out of proportion to the file.

Each load runs in a child process (see _run_child) under an address-space limit of what the interpreter already
holds plus CHILD_HEADROOM, with a timeout: a crash (SIGBUS, SIGSEGV), a hang or a runaway allocation fails the test
with the case that caused it instead of taking pytest down. The hostile files are built here opcode by opcode; the
fuzz mutates small valid files of each format (written with the writers in test_state_formats) with a seeded RNG, so
every case is reproducible from its format, seed and index (`python -m tests.tg.test_loader_fuzz FORMAT SEED N`
reruns one format and prints every case)."""
import io, json, pathlib, pickle, random, re, struct, subprocess, sys, tarfile, zipfile, zlib
import numpy as np
import pytest
from tg import Tensor
from tg.nn.state import safe_save
from tests.tg.test_state_formats import (FIXTURES, FloatStorage, HalfStorage, METADATA, _Pid, _tensor_call, _write_tar_checkpoint,
                                         _write_zip, quant_q4_k, quant_q8_0, write_gguf)

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHILD_HEADROOM = 768 << 20  # bytes of address space a child may add to what it holds after importing tg
P = b"\x80\x02"             # pickle protocol 2, what torch.save writes

# ---------------- running a load in a child process ----------------
CHILD = r"""
import json, resource, sys
sys.path.insert(0, {root!r})
from tg.nn.state import safe_load
from tg.nn.torch_format import torch_load
from tg.nn.gguf import gguf_load
from tg.nn.tar import tar_extract
vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + {headroom}, vm + {headroom}))
LOADERS = {{"torch": torch_load, "safetensors": safe_load, "gguf": lambda p: gguf_load(p)[1], "tar": tar_extract}}
def outcome(fmt, path):
  try: return {{"ok": {{k: [list(v.shape), list((a := v.numpy()).shape), v.dtype.itemsize, a.dtype.itemsize] for k, v in LOADERS[fmt](path).items()}}}}
  except Exception as e: return {{"error": type(e).__name__, "msg": str(e)[:2000], "value_error": isinstance(e, ValueError)}}
"""

def _run_child(body: str, timeout: float = 60) -> tuple[int, str, str]:
  code = CHILD.format(root=str(ROOT), headroom=CHILD_HEADROOM) + body
  try: p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
  except subprocess.TimeoutExpired as e: pytest.fail(f"the load hung (killed after {timeout} s); output so far: {(e.stdout or b'')[-2000:]!r}")
  return p.returncode, p.stdout, p.stderr

def load_in_child(fmt: str, path, timeout: float = 60) -> dict:
  """The outcome of loading `path` with the `fmt` loader in a child: {"ok": {name: [shape, shape of its data, itemsize,
  itemsize of its data]}} or {"error": type name, "msg": message, "value_error": bool}."""
  rc, out, err = _run_child(f"print(json.dumps(outcome({fmt!r}, {str(path)!r})))", timeout)
  assert rc == 0, f"the child died (exit {rc}): {err[-3000:]}"
  return json.loads(out.strip().splitlines()[-1])

def assert_refused(result: dict, path, *words: str) -> str:
  assert "error" in result, f"expected a ValueError, the file loaded: {result}"
  msg = result["msg"]
  assert result["value_error"], f"expected a ValueError, got {result['error']}: {msg}"
  assert pathlib.Path(path).name in msg, f"the message doesn't name the file: {msg}"
  assert "MemoryError" not in msg and "RecursionError" not in msg, f"the loader ran out of memory or stack: {msg}"
  for w in words: assert w in msg, f"the message doesn't mention {w!r}: {msg}"
  return msg

# ---------------- hostile pickles, built by hand ----------------
def _zip_pickle(path, pkl: bytes, storages: dict[str, bytes] | None = None):
  with zipfile.ZipFile(path, "w") as z:
    z.writestr("archive/data.pkl", pkl)
    for k, v in (storages or {}).items(): z.writestr(f"archive/data/{k}", v)

def _put(i: int) -> bytes: return pickle.LONG_BINPUT + struct.pack("<I", i)
def _get(i: int) -> bytes: return pickle.LONG_BINGET + struct.pack("<I", i)

def _tensor_pickle(key="0", numel=1) -> bytes:
  """torch._utils._rebuild_tensor_v2(storage `key` of numel floats, 0, (numel,), (1,)) on the stack."""
  pid = pickle.MARK + pickle.BINUNICODE + struct.pack("<I", 7) + b"storage" + b"ctorch\nFloatStorage\n" + \
        pickle.BINUNICODE + struct.pack("<I", len(key)) + key.encode() + pickle.BINUNICODE + struct.pack("<I", 3) + b"cpu" + \
        pickle.BININT + struct.pack("<i", numel) + pickle.TUPLE + pickle.BINPERSID
  return b"ctorch._utils\n_rebuild_tensor_v2\n" + pickle.MARK + pid + pickle.BININT1 + b"\0" + pickle.BININT + struct.pack("<i", numel) + \
         pickle.TUPLE1 + pickle.BININT1 + b"\1" + pickle.TUPLE1 + pickle.NEWFALSE + pickle.EMPTY_DICT + pickle.TUPLE + pickle.REDUCE

def _shared_tuples(depth: int) -> bytes:
  """t0 = (); t_i = (t_{i-1}, t_{i-1}) for i <= depth, with t_depth on the stack: 2**depth leaves in ~20 bytes a level."""
  out = pickle.EMPTY_TUPLE + _put(0)
  for i in range(1, depth + 1): out += pickle.POP + _get(i - 1) + _get(i - 1) + pickle.TUPLE2 + _put(i)
  return out

def test_bytearray_of_a_huge_size(tmp_path):
  """builtins.bytearray is allowed (protocol 2 writes bytes through it), but bytearray(2**30) would allocate 1 GiB."""
  path = tmp_path / "ba.pt"
  pkl = P + b"c__builtin__\nbytearray\n" + pickle.BININT + struct.pack("<i", 2**30) + pickle.TUPLE1 + pickle.REDUCE + pickle.STOP
  _zip_pickle(path, pkl)
  assert_refused(load_in_child("torch", path), path, "bytearray(1073741824", f"opcode at offset {len(pkl) - 2} of the entry")

@pytest.mark.parametrize("op", [pickle.BINBYTES8, pickle.BYTEARRAY8, pickle.BINUNICODE8])
def test_argument_longer_than_the_pickle(tmp_path, op):
  """A counted argument is read only when the pickle holds that many bytes (the C unpickler allocates first)."""
  path = tmp_path / "long.pt"
  _zip_pickle(path, P + op + struct.pack("<Q", 2**30) + b"x" * 16 + pickle.STOP)
  assert_refused(load_in_child("torch", path), path, "1073741824 bytes runs past the end of the pickle", "offset 2 of the entry")

def test_huge_memo_index(tmp_path):
  """A memo index is a dict key: LONG_BINPUT 0x04000000 costs one entry (the C unpickler grows a list to 1 GiB)."""
  path = tmp_path / "memo.pt"
  _zip_pickle(path, P + _tensor_pickle() + _put(0x04000000) + pickle.POP + pickle.EMPTY_DICT + pickle.BINUNICODE + struct.pack("<I", 1) + b"w" +
              _get(0x04000000) + pickle.SETITEM + pickle.STOP, {"0": np.float32([2.5]).tobytes()})
  assert load_in_child("torch", path) == {"ok": {"w": [[1], [1], 4, 4]}}

def _zip_raw(path, entries: list[tuple[str, int, bytes, int, int]]) -> None:
  """A zip of (name, method, stored bytes, crc32, uncompressed size) entries whose data is given already compressed."""
  local, central = b"", b""
  for name, method, data, crc, size in entries:
    fields = struct.pack("<HHHHHIIIHH", 20, 0, method, 0, 0x21, crc, len(data), size, len(name), 0)
    central += b"PK\1\2" + struct.pack("<H", 20) + fields + struct.pack("<HHHII", 0, 0, 0, 0, len(local)) + name.encode()
    local += b"PK\3\4" + fields + name.encode() + data
  pathlib.Path(path).write_bytes(local + central + b"PK\5\6" + struct.pack("<HHHHIIH", 0, 0, len(entries), len(entries), len(central), len(local), 0))

def _deflate_bomb(block: bytes, times: int) -> tuple[bytes, int, int]:
  """(raw deflate stream, crc32, size) of `block` repeated: compressed once, ended with a full flush (which resets the
  compressor's history, so the bytes can be repeated as they are)."""
  c = zlib.compressobj(9, zlib.DEFLATED, -15)
  one = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
  crc = 0
  for _ in range(times): crc = zlib.crc32(block, crc)
  return one * times + c.flush(), crc, len(block) * times

def test_deflated_storage_inflating_to_2gib(tmp_path):
  """A 2 MB deflated storage entry inflates to 2 GiB; the pickle's storage holds 4 bytes, so only those are inflated."""
  data, crc, size = _deflate_bomb(bytes(1 << 20), 2048)
  pkl = P + pickle.EMPTY_DICT + pickle.BINUNICODE + struct.pack("<I", 1) + b"w" + _tensor_pickle() + pickle.SETITEM + pickle.STOP
  path = tmp_path / "bomb.pt"
  _zip_raw(path, [("archive/data.pkl", 0, pkl, zlib.crc32(pkl), len(pkl)), ("archive/data/0", 8, data, crc, size)])
  assert path.stat().st_size < 3 << 20 and size == 2 << 30
  assert load_in_child("torch", path) == {"ok": {"w": [[1], [1], 4, 4]}}

def test_deflated_pickle_inflating_to_2gib(tmp_path):
  """data.pkl itself deflated from 2 GiB (NONE, POP repeated): refused from its declared size, before inflating."""
  data, crc, size = _deflate_bomb(b"N0" * (1 << 19), 2048)
  path = tmp_path / "pklbomb.pt"
  _zip_raw(path, [("archive/data.pkl", 8, data, crc, size)])
  assert_refused(load_in_child("torch", path), path, "'archive/data.pkl' claims 2147483648 bytes")

def _tensor_in_shared_lists(depth: int) -> bytes:
  """l0 = [tensor]; l_i = [l_{i-1}, l_{i-1}]: the tensor is reachable by 2**depth paths."""
  out = pickle.EMPTY_LIST + _put(0) + _tensor_pickle() + pickle.APPEND
  for i in range(1, depth + 1): out += pickle.POP + pickle.EMPTY_LIST + _put(i) + pickle.MARK + _get(i - 1) + _get(i - 1) + pickle.APPENDS
  return out

def test_shared_references_nested_40_deep(tmp_path):
  """Containers are walked once: the tensor gets the name of its first path, not 2**40 of them."""
  path = tmp_path / "deep.pt"
  pkl = P + _tensor_in_shared_lists(40) + pickle.STOP
  _zip_pickle(path, pkl, {"0": np.float32([1.5]).tobytes()})
  assert len(pkl) < 1000
  assert load_in_child("torch", path, timeout=30) == {"ok": {".".join(["0"] * 41): [[1], [1], 4, 4]}}

@pytest.mark.parametrize("use", ["dict key", "set member", "persistent id", "torch.device"])
def test_shared_tuples_in_hashes_and_messages(tmp_path, use):
  """Hashing, repr() and str() walk a tuple whole: a 40-deep tuple of shared halves must be refused, and error
  messages show it bounded."""
  tup = _shared_tuples(40)
  body = {"dict key": pickle.EMPTY_DICT + tup + pickle.NONE + pickle.SETITEM,
          "set member": b"c__builtin__\nset\n" + pickle.MARK + tup + pickle.LIST + pickle.TUPLE1 + pickle.REDUCE,
          "persistent id": tup + pickle.BINPERSID,
          "torch.device": b"ctorch\ndevice\n" + tup + pickle.TUPLE1 + pickle.REDUCE}[use]
  path = tmp_path / "hash.pt"
  _zip_pickle(path, P + body + pickle.STOP)
  msg = assert_refused(load_in_child("torch", path, timeout=30), path)
  assert len(msg) < 1000
  assert re.search(r"more than 1024 items|persistent id \(\(\(|torch\.device\(\(\(", msg), msg

def test_cycles_and_deep_nesting(tmp_path):
  """A list inside itself is walked once; 200000 nested lists are no RecursionError (the names they would need are
  refused)."""
  path = tmp_path / "cycle.pt"
  _zip_pickle(path, P + pickle.EMPTY_LIST + _put(0) + _get(0) + pickle.APPEND + _tensor_pickle() + pickle.APPEND + pickle.STOP,
              {"0": np.float32([1]).tobytes()})
  assert load_in_child("torch", path) == {"ok": {"1": [[1], [1], 4, 4]}}
  path = tmp_path / "nested.pt"
  _zip_pickle(path, P + pickle.EMPTY_LIST * 200_000 + pickle.APPEND * 199_999 + pickle.STOP)
  assert_refused(load_in_child("torch", path), path, "tensor names add up to more than")

def test_legacy_and_tar_pickles_are_bounded_too(tmp_path):
  """The legacy layouts run the same machine: a 1 GiB BINBYTES8 inside the legacy object pickle, or as a tar
  checkpoint's key, is refused with the file offset of its opcode."""
  magic = P + pickle.LONG1 + b"\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little") + pickle.STOP
  head = magic + P + pickle.BININT2 + struct.pack("<H", 1001) + pickle.STOP + P + pickle.EMPTY_DICT + pickle.STOP
  path = tmp_path / "legacy.pt"
  path.write_bytes(head + P + pickle.BINBYTES8 + struct.pack("<Q", 2**30) + pickle.STOP)
  assert_refused(load_in_child("torch", path), path, f"file offset {len(head) + 2}", "runs past the end")
  path = tmp_path / "old.tar"
  _write_tar_checkpoint(path, {"s0": np.zeros(2, np.float32)}, {1: ("s0", 0, (2,), (1,))}, {"w": _Pid("1")})
  raw = path.read_bytes()
  key = pickle.BINUNICODE + struct.pack("<I", 2) + b"s0"  # the storage key, first written in member 'tensors'
  path.write_bytes(raw.replace(key, pickle.BINBYTES + struct.pack("<I", 0xFFFFFF00) + b"s0", 1))  # same length: the tar stays valid
  assert_refused(load_in_child("torch", path), path, "4294967040 bytes runs past the end of the pickle", "file offset")

# ---------------- mutation fuzz ----------------
def _tensors_tar(path) -> None:
  with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
    for name, data in (("a.bin", bytes(range(40))), ("dir/" + "n" * 120 + ".bin", b"\x01\x02" * 300), ("empty", b""), ("z", b"zz")):
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tf.addfile(info, io.BytesIO(data))
    link = tarfile.TarInfo("link")
    link.type, link.linkname = tarfile.LNKTYPE, "a.bin"
    tf.addfile(link)

def _deflated_copy(src, dst) -> None:
  with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as out:
    for info in z.infolist(): out.writestr(info.filename, z.read(info))

def base_files(d: pathlib.Path) -> dict[str, tuple[str, pathlib.Path]]:
  """format name -> (loader, a small valid file of that format)."""
  rng = np.random.default_rng(0)
  safe_save({"w": Tensor(rng.standard_normal((2, 3)).astype(np.float32)), "i": Tensor(np.arange(4, dtype=np.int16)),
             "h": Tensor(np.float16([1.5, -2])), "e": Tensor.empty(0, 3)}, d / "m.safetensors", metadata={"note": "fuzz"})
  write_gguf(d / "m.gguf", METADATA[:6] + METADATA[13:16], [("f", (2, 3), 0, rng.standard_normal((2, 3)).astype(np.float32).tobytes()),
             ("q8", (2, 32), 8, quant_q8_0(rng.standard_normal((2, 32)).astype(np.float32)).tobytes()),
             ("q4k", (1, 256), 12, quant_q4_k(rng.standard_normal((1, 256)).astype(np.float32)).tobytes())])
  _tensors_tar(d / "files.tar")
  a = np.arange(12, dtype=np.float32)
  _write_tar_checkpoint(d / "old.tar", {"s0": a}, {1: ("s0", 0, (3, 4), (4, 1)), 2: ("s0", 2, (2, 3), (1, 4))}, {"w": _Pid("1"), "o": {"v": _Pid("2")}})
  _write_zip(d / "hand.pt", {"a": _tensor_call("0", FloatStorage, 12, 1, (2, 3), (4, 1)), "h": [_tensor_call("1", HalfStorage, 2, 0, (2,), (1,))]},
             {"0": a.tobytes(), "1": np.float16([1, 2]).tobytes()})
  _deflated_copy(FIXTURES / "torch_zip.pt", d / "deflated.pt")
  return {"torch_zip": ("torch", FIXTURES / "torch_zip.pt"), "torch_pickle": ("torch", FIXTURES / "torch_zip.pt"),
          "torch_legacy": ("torch", FIXTURES / "torch_legacy.pt"), "torch_tar": ("torch", d / "old.tar"), "torch_tar_sums": ("torch", d / "old.tar"),
          "torch_hand_zip": ("torch", d / "hand.pt"), "torch_deflated": ("torch", d / "deflated.pt"), "safetensors": ("safetensors", d / "m.safetensors"),
          "gguf": ("gguf", d / "m.gguf"), "tar": ("tar", d / "files.tar"), "tar_sums": ("tar", d / "files.tar")}

NUMBERS = [b"0", b"-1", b"1", b"7", b"255", b"4294967296", b"18446744073709551616", b"1" * 30, b"1.5", b"1e309", b'"3"', b"[]",
           b"true", b"null", b"777777777777", b"-0"]

def _int_field(out: bytearray, rng: random.Random) -> str:
  """Overwrite a little-endian integer that looks like a length or count (1..file size) with an extreme value."""
  for _ in range(64):
    width, at = rng.choice((2, 4, 8)), rng.randrange(max(1, len(out) - 8))
    value = int.from_bytes(out[at:at + width], "little")
    if 1 <= value <= len(out): break
  new = rng.choice([0, 1, value - 1, value + 1, value * 2, len(out), len(out) + 1, 2 ** (8 * width - 1) - 1, 2 ** (8 * width - 1), 2 ** (8 * width) - 1])
  out[at:at + width] = (new % 2 ** (8 * width)).to_bytes(width, "little")
  return f"int{width}@{at}:{value}->{new % 2 ** (8 * width)}"

def _text_number(out: bytearray, rng: random.Random) -> str:
  """Replace a run of ASCII digits (a JSON number, a tar octal field, a protocol-0 argument) with another token."""
  runs = [m.span() for m in re.finditer(rb"[0-9]+", bytes(out))]
  if not runs: return "no-digits"
  a, b = rng.choice(runs)
  new = rng.choice(NUMBERS)
  out[a:b] = new
  return f"text@{a}:{new.decode()}"

def mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
  """1 to 3 mutations of `data`: byte flips, truncation, insertion, deletion, duplication of a span, and corruption of
  binary or textual length fields."""
  out, how = bytearray(data), []
  for _ in range(rng.choice((1, 1, 1, 2, 3))):
    kind, at = rng.choice(("flip", "flip", "truncate", "insert", "delete", "repeat", "int", "int", "int", "text", "text")), rng.randrange(max(1, len(out)))
    if kind == "flip":
      out[at:at + 1] = bytes([out[at] ^ rng.randrange(1, 256)]) if out else b""
      how.append(f"flip@{at}")
    elif kind == "truncate":
      del out[at:]
      how.append(f"truncate@{at}")
    elif kind == "insert":
      out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
      how.append(f"insert@{at}")
    elif kind == "delete":
      n = rng.randint(1, 16)
      del out[at:at + n]
      how.append(f"delete@{at}+{n}")
    elif kind == "repeat":
      n = rng.randint(1, 64)
      out[at:at] = out[at:at + n]
      how.append(f"repeat@{at}+{n}")
    else: how.append(_int_field(out, rng) if kind == "int" else _text_number(out, rng))
  return bytes(out), ", ".join(how)

def _zip_with_pickle(pkl: bytes) -> bytes:
  """The fixture checkpoint with its data.pkl replaced (the zip's CRCs would refuse nearly every mutated pickle)."""
  buf = io.BytesIO()
  with zipfile.ZipFile(FIXTURES / "torch_zip.pt") as z, zipfile.ZipFile(buf, "w") as out:
    for info in z.infolist(): out.writestr(info.filename, pkl if info.filename.endswith("/data.pkl") else z.read(info))
  return buf.getvalue()

def _fix_tar_checksums(data: bytes) -> bytes:
  """Every block that looks like a ustar header gets a correct checksum (else the checksum refuses nearly every
  mutated header before its fields are read)."""
  out = bytearray(data)
  for at in range(0, len(out) - 511, 512):
    if out[at + 257:at + 262] == b"ustar": out[at + 148:at + 156] = b"%06o\0 " % (sum(out[at:at + 148]) + 256 + sum(out[at + 156:at + 512]))
  return bytes(out)

# formats whose mutated bytes are repackaged before loading: name -> (the bytes mutated, from the base file; repackaging)
REPACK = {"torch_pickle": (lambda raw: zipfile.ZipFile(io.BytesIO(raw)).read("torch_zip/data.pkl"), _zip_with_pickle),
          "torch_tar_sums": (lambda raw: raw, _fix_tar_checksums), "tar_sums": (lambda raw: raw, _fix_tar_checksums)}

FUZZ_BODY = r"""
import random, signal
from tests.tg.test_loader_fuzz import REPACK, mutate
fmt, loader, base, case, seed, n = {args!r}
unpack, repack = REPACK.get(fmt, (lambda raw: raw, lambda raw: raw))
data = unpack(open(base, "rb").read())
print(json.dumps({{"base": outcome(loader, base)}}), flush=True)
for i in range(n):
  mutated, how = mutate(data, random.Random(f"{{fmt}}/{{seed}}/{{i}}"))
  open(case, "wb").write(repack(mutated))
  print(json.dumps({{"start": i, "how": how}}), flush=True)
  signal.alarm({per_case})  # a hang inside C code can't be interrupted: SIGALRM's default action ends the process
  result = outcome(loader, case)
  signal.alarm(0)
  print(json.dumps({{"case": i, "how": how, "result": result}}), flush=True)
"""
FUZZ_CASES, FUZZ_SEED, PER_CASE_S = 400, 22, 10

def fuzz(fmt: str, loader: str, base: pathlib.Path, case: pathlib.Path, seed: int, n: int) -> tuple[list[dict], list[str]]:
  """(results of n mutated loads, problems found) for one format, run in a child process."""
  rc, out, err = _run_child(FUZZ_BODY.format(args=(fmt, loader, str(base), str(case), seed, n), per_case=PER_CASE_S), timeout=n * PER_CASE_S)
  lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
  if rc != 0:
    last = [x for x in lines if "start" in x][-1:]
    return [], [f"the child died (exit {rc}) during case {last}: {err[-2000:]}"]
  results, problems = [x for x in lines if "case" in x], []
  if "ok" not in lines[0]["base"]: problems.append(f"the unmutated {fmt} file doesn't load: {lines[0]['base']}")
  for x in results:
    r, tag = x["result"], f"{fmt} case {x['case']} ({x['how']})"
    if "ok" in r: problems += [f"{tag}: tensor {k!r} has shape {s} but its data {d}" for k, (s, d, *_) in r["ok"].items() if s != d]
    elif not r["value_error"]: problems.append(f"{tag}: {r['error']} instead of ValueError: {r['msg'][:300]}")
    elif case.name not in r["msg"]: problems.append(f"{tag}: the message doesn't name the file: {r['msg'][:300]}")
    elif "MemoryError" in r["msg"] or "RecursionError" in r["msg"]: problems.append(f"{tag}: ran out of memory or stack: {r['msg'][:300]}")
  return results, problems

@pytest.fixture(scope="module")
def bases(tmp_path_factory):
  return base_files(tmp_path_factory.mktemp("fuzz_bases"))

@pytest.mark.parametrize("fmt", ["torch_zip", "torch_pickle", "torch_legacy", "torch_tar", "torch_tar_sums", "torch_hand_zip", "torch_deflated",
                                 "safetensors", "gguf", "tar", "tar_sums"])
def test_mutation_fuzz(fmt, bases, tmp_path):
  loader, base = bases[fmt]
  results, problems = fuzz(fmt, loader, base, tmp_path / f"case{base.suffix}", FUZZ_SEED, FUZZ_CASES)
  assert not problems, "\n".join(problems[:20])
  assert len(results) == FUZZ_CASES
  loaded = sum("ok" in x["result"] for x in results)
  assert 0 < loaded < FUZZ_CASES, f"the mutations should both break and keep {fmt} files ({loaded} of {FUZZ_CASES} loaded)"

if __name__ == "__main__":
  import tempfile
  fmt, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
  with tempfile.TemporaryDirectory() as d:
    loader, base = base_files(pathlib.Path(d))[fmt]
    results, problems = fuzz(fmt, loader, base, pathlib.Path(d) / f"case{base.suffix}", seed, n)
    for x in results: print(x["case"], x["how"], "->", "loaded" if "ok" in x["result"] else x["result"]["msg"][:200])
    print(*problems, sep="\n")
