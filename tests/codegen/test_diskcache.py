"""The disk cache holds only data, only ever resets a file tg made, and never makes a compile fail: a place it can't
or shouldn't use is named once on stderr and the program runs uncached."""
import hashlib, os, pathlib, pickle, sqlite3, stat, subprocess, sys
import pytest
from codegen import diskcache
from codegen.kernel import Opt, OptOps
from codegen.search import decode_opts, encode_opts

ROOT = pathlib.Path(__file__).parents[2]
WARNING = "tg: running without the compile cache: "

@pytest.fixture
def cachedb(tmp_path, monkeypatch):
  monkeypatch.setenv("CACHEDB", str(tmp_path / "cache.db"))
  return tmp_path / "cache.db"

def set_entry(path, table: str, key: str, value: bytes) -> None:
  db = sqlite3.connect(path)
  db.execute(f"UPDATE {table}_{diskcache.VERSION} SET value = ?, digest = ? WHERE key = ?", (value, hashlib.sha256(value).hexdigest(), key))
  db.commit()
  db.close()

def test_entries_are_bytes_and_never_unpickled(cachedb, tmp_path):
  marker = tmp_path / "pwned"
  class Payload:
    def __reduce__(self): return (os.mkdir, (str(marker),))
  diskcache.put("compile", "k", b"\x7fELF program")
  assert diskcache.get("compile", "k") == b"\x7fELF program"
  evil = pickle.dumps(Payload())
  set_entry(cachedb, "compile", "k", evil)  # someone who can write the file plants a pickle with a valid checksum
  assert diskcache.get("compile", "k") == evil and not marker.exists(), "cache content is returned as bytes, never run"
  with pytest.raises(TypeError, match="bytes"): diskcache.put("compile", "k2", ["not", "bytes"])

def test_writes_are_seen_by_other_processes_without_a_sync_each(cachedb):
  """WAL with synchronous=NORMAL: a write commits without an fsync (a cold first step writes a few hundred entries),
  and another process reads it at once."""
  diskcache.put("compile", "k", b"binary")
  assert diskcache._db().execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
  code = "from codegen import diskcache; print(diskcache.get('compile', 'k'))"
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
  assert done.stdout.strip() == "b'binary'", done.stderr

def test_beam_results_are_a_checked_encoding():
  opts = [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UNROLL, 1, 0), Opt(OptOps.TC, 0, 0)]
  assert encode_opts(opts) == b'[["UPCAST", 0, 4], ["UNROLL", 1, 0], ["TC", 0, 0]]' and decode_opts(encode_opts(opts)) == opts
  assert decode_opts(b"[]") == []
  for bad in (pickle.dumps(opts), b"not json", b"\xff\xfe", b"{}", b'[["UPCAST", 0]]', b'[["NOPE", 0, 4]]', b'[["UPCAST", "0", 4]]',
              b'[["UPCAST", 0, true]]', b'[["UPCAST", 0, 4.0]]', b'[[["UPCAST"], 0, 4]]', b'"UPCAST"', b"[" * 100000):
    assert decode_opts(bad) is None, bad

def test_a_planted_beam_entry_is_searched_again(cachedb):
  from tg import Tensor, Device
  from codegen.search import beam_key, beam_search
  (item,) = [i for i in (Tensor.rand(8, 8).realize() @ Tensor.rand(8, 8).realize()).schedule()]
  renderer = Device["CPU"].renderer
  first = beam_search(item.ast, renderer, lambda opts: 1.0 / (1 + len(opts)), 2, "planted")
  key = beam_key("planted", 2, item.ast)
  assert decode_opts(diskcache.get("beam", key)) == first
  set_entry(cachedb, "beam", key, pickle.dumps(first))
  timed = []
  assert beam_search(item.ast, renderer, lambda opts: timed.append(opts) or 1.0 / (1 + len(opts)), 2, "planted") == first and timed

def test_a_beam_result_of_another_code_generator_is_searched_again(cachedb, monkeypatch):
  """A search's result is only as good as the kernels the code generator made of it: another version searches again."""
  from tg import Tensor, Device
  from codegen import search
  (item,) = [i for i in (Tensor.rand(8, 8).realize() @ Tensor.rand(8, 8).realize()).schedule()]
  renderer, timed = Device["CPU"].renderer, []
  def time_opts(opts): return timed.append(opts) or 1.0 / (1 + len(opts))
  search.beam_search(item.ast, renderer, time_opts, 2, "versioned")
  timed.clear()
  search.beam_search(item.ast, renderer, time_opts, 2, "versioned")
  assert not timed, "same code generator: from the cache"
  monkeypatch.setattr(search, "code_digest", lambda: "another version")
  search.beam_search(item.ast, renderer, time_opts, 2, "versioned")
  assert timed

def test_made_private(tmp_path, monkeypatch):
  monkeypatch.delenv("CACHEDB", raising=False)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
  diskcache.put("compile", "k", b"v")
  folder, db = tmp_path / "xdg" / "tg", tmp_path / "xdg" / "tg" / "cache.db"
  assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE(db.stat().st_mode) == 0o600
  assert db.read_bytes()[68:72] == diskcache.APP_ID.to_bytes(4, "big"), "the sqlite header marks the file as a tg cache"
  assert all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in folder.iterdir()), "nor are its -wal and -shm readable by others"

def refused(capfd, path, why: str) -> None:
  """Nothing is cached, and one line on stderr names the path and why."""
  diskcache.put("compile", "k", b"v")
  assert diskcache.get("compile", "k") is None and diskcache.get("compile", "k") is None
  err = capfd.readouterr().err
  assert err.count(WARNING) == 1 and str(path) in err and why in err, err

@pytest.mark.parametrize("mode", [0o666, 0o620, 0o602], ids=oct)
def test_a_file_others_can_write_is_refused(cachedb, capfd, mode):
  diskcache.put("compile", "warm", b"v")
  diskcache._local.conns.pop(str(cachedb)).close()
  cachedb.chmod(mode)
  before = cachedb.read_bytes()
  refused(capfd, cachedb, f"others can write the file {cachedb} (mode {mode:o})")
  assert cachedb.read_bytes() == before

def test_a_folder_others_can_write_is_refused_unless_sticky(tmp_path, monkeypatch, capfd):
  shared = tmp_path / "shared"
  shared.mkdir()
  shared.chmod(0o777)
  monkeypatch.setenv("CACHEDB", str(shared / "cache.db"))
  refused(capfd, shared, f"others can write the folder {shared} (mode 777)")
  sticky = tmp_path / "sticky"  # like /tmp: others can add files but not replace this one
  sticky.mkdir()
  sticky.chmod(0o1777)
  monkeypatch.setenv("CACHEDB", str(sticky / "cache.db"))
  diskcache.put("compile", "k", b"v")
  assert diskcache.get("compile", "k") == b"v"

@pytest.mark.skipif(os.getuid() != 0, reason="making a file another user's takes root")
def test_a_file_of_another_user_is_refused(cachedb, capfd):
  diskcache.put("compile", "warm", b"v")
  diskcache._local.conns.pop(str(cachedb)).close()
  os.chown(cachedb, 65534, 65534)
  refused(capfd, cachedb, f"the file {cachedb} belongs to another user (uid 65534)")

def test_a_file_that_is_not_a_tg_cache_is_left_untouched(tmp_path, monkeypatch, capfd):
  text = tmp_path / "notes.txt"
  text.write_text("my notes\n" * 100)
  other = tmp_path / "other.db"
  db = sqlite3.connect(other)
  db.execute("CREATE TABLE users (name TEXT)")
  db.execute("INSERT INTO users VALUES ('ada')")
  db.commit()
  db.close()
  for path in (text, other):
    before = path.read_bytes()
    monkeypatch.setenv("CACHEDB", str(path))
    refused(capfd, path, "is not a tg cache; it is left untouched")
    assert path.read_bytes() == before
  assert sqlite3.connect(other).execute("SELECT name FROM users").fetchall() == [("ada",)]

def test_a_damaged_tg_cache_is_rebuilt(cachedb):
  env = {**os.environ, "CACHEDB": str(cachedb)}
  subprocess.run([sys.executable, "-c", "from codegen import diskcache; diskcache.put('compile', 'k', b'v' * 10000)"], env=env, cwd=ROOT, check=True)
  data = cachedb.read_bytes()
  assert len(data) > 4096 and data[68:72] == diskcache.APP_ID.to_bytes(4, "big")
  cachedb.write_bytes(data[:100] + b"\xa5" * (len(data) - 100))  # its header says tg's, the rest is garbage
  assert diskcache.get("compile", "k") is None
  diskcache.put("compile", "k", b"again")
  assert diskcache.get("compile", "k") == b"again"

def test_a_cache_from_an_older_tg_is_replaced(cachedb, capfd):
  db = sqlite3.connect(cachedb)
  db.execute("CREATE TABLE compile_1 (key TEXT PRIMARY KEY, digest TEXT, value BLOB)")
  db.execute("INSERT INTO compile_1 VALUES ('k', 'x', ?)", (pickle.dumps(b"old"),))
  db.commit()
  db.close()
  assert diskcache.get("compile", "k") is None
  diskcache.put("compile", "k", b"new")
  assert diskcache.get("compile", "k") == b"new" and cachedb.read_bytes()[68:72] == diskcache.APP_ID.to_bytes(4, "big")
  assert stat.S_IMODE(cachedb.stat().st_mode) == 0o600 and WARNING not in capfd.readouterr().err

def run_compiling(tmp_path, **env) -> subprocess.CompletedProcess:
  full = {k: v for k, v in os.environ.items() if k not in ("CACHEDB", "XDG_CACHE_HOME", "DEV")}
  code = "from tg import Tensor\nfor k in (2.0, 3.0): print((Tensor([1.0, 2.0]) * k + 1).tolist())"
  return subprocess.run([sys.executable, "-c", code], env={**full, "PYTHONPATH": str(ROOT), **env}, capture_output=True, text=True, cwd=tmp_path, timeout=300)

def unusable(out: subprocess.CompletedProcess, path, why: str) -> None:
  assert out.returncode == 0 and out.stdout.split("\n")[:2] == ["[3.0, 5.0]", "[4.0, 7.0]"], out.stderr[-2000:]
  assert out.stderr.count(WARNING) == 1 and str(path) in out.stderr and why in out.stderr, out.stderr

def test_cachedb_that_is_a_folder(tmp_path):
  unusable(run_compiling(tmp_path, CACHEDB=str(tmp_path)), tmp_path, "Is a directory")

def test_a_file_where_the_cache_folder_should_be(tmp_path):
  (tmp_path / "file").write_text("x")
  unusable(run_compiling(tmp_path, XDG_CACHE_HOME=str(tmp_path / "file")), tmp_path / "file" / "tg", "Not a directory")
  assert (tmp_path / "file").read_text() == "x"

def test_a_home_that_cannot_be_written(tmp_path):
  unusable(run_compiling(tmp_path, HOME="/sys"), "/sys/.cache/tg", "can't make the folder")

@pytest.mark.skipif(os.getuid() == 0, reason="root writes read-only files")
def test_a_read_only_cache_file(cachedb, tmp_path):
  diskcache.put("compile", "warm", b"v")
  cachedb.chmod(0o400)
  unusable(run_compiling(tmp_path, CACHEDB=str(cachedb)), cachedb, "isn't writable")
  assert cachedb.exists()
