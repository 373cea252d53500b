"""A small persistent cache in sqlite (the user's cache folder, or CACHEDB): compiled programs (CCACHE) and BEAM
results, stored as bytes that are only data (callers encode and check them; nothing is unpickled). Safe with several
processes at once (WAL journal, busy timeout); an entry whose checksum doesn't match is deleted and reported as
missing, so it gets rebuilt.

Only a file tg made (its sqlite header carries APP_ID) is ever reset. A file that isn't a tg cache, a file or folder
others can write or another user owns, or a place that can't be written is left alone: tg says why once, on stderr,
and runs without the cache."""
from __future__ import annotations
import hashlib, os, pathlib, pickle, sqlite3, stat, sys, threading
from ir.switches import DEBUG

VERSION = 2  # 2: values are raw bytes (1 pickled them)
APP_ID = 0x74674343  # "tgCC", the sqlite header's application_id: this file is a tg cache
SQLITE_MAGIC = b"SQLite format 3\0"
_local = threading.local()
_refused: dict[str, str] = {}  # path -> why the cache there isn't used (said once)
_refused_lock = threading.Lock()

class Refused(Exception): pass

def cache_path() -> str:
  if path := os.environ.get("CACHEDB"): return path
  base = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
  return os.path.join(base, "tg", "cache.db")

def _check_owner(path: str, st: os.stat_result, what: str) -> None:
  if st.st_uid not in (os.getuid(), 0): raise Refused(f"the {what} {path} belongs to another user (uid {st.st_uid})")
  # a sticky folder (/tmp) lets others add files but not replace ours
  if st.st_mode & 0o022 and not (stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX):
    raise Refused(f"others can write the {what} {path} (mode {stat.S_IMODE(st.st_mode):o})")

def _kind(path: str) -> str:
  """'new' (empty), 'ours', 'old' (a tg cache of VERSION 1, made before the application_id) or 'foreign'."""
  with open(path, "rb") as f: head = f.read(100)
  if not head: return "new"
  if not head.startswith(SQLITE_MAGIC) or len(head) < 72: return "foreign"
  if (app := int.from_bytes(head[68:72], "big")) == APP_ID: return "ours"
  if app: return "foreign"
  conn = sqlite3.connect(pathlib.Path(path).absolute().as_uri() + "?mode=ro", uri=True)
  try: tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
  except sqlite3.DatabaseError: return "foreign"
  finally: conn.close()
  return "old" if tables <= {"compile_1", "beam_1"} else "foreign"

def _open(path: str) -> sqlite3.Connection:
  """A connection to the cache at `path`, made (0600, in a 0700 folder) if missing; Refused saying why it can't be used."""
  folder = os.path.dirname(os.path.abspath(path))
  try: os.makedirs(folder, mode=0o700, exist_ok=True)
  except OSError as e: raise Refused(f"can't make the folder {folder}: {e.strerror or e}") from None
  try:
    _check_owner(folder, os.stat(folder), "folder")
    if not os.access(folder, os.W_OK | os.X_OK): raise Refused(f"the folder {folder} isn't writable")
    os.close(os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NONBLOCK, 0o600))  # sqlite would make it 0644
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode): raise Refused(f"{path} is not a regular file")
    _check_owner(path, st, "file")
    if not os.access(path, os.R_OK | os.W_OK): raise Refused(f"{path} isn't writable")
    kind = _kind(path)
  except OSError as e: raise Refused(f"{path}: {e.strerror or e}") from None
  except sqlite3.DatabaseError as e: raise Refused(f"{path} is not a tg cache ({e}); it is left untouched") from None
  if kind == "foreign": raise Refused(f"{path} is not a tg cache; it is left untouched")
  if kind == "old":  # made by an older tg: nothing in it is read any more
    _delete_files(path)
    return _open(path)
  conn = sqlite3.connect(path, timeout=30, isolation_level=None)
  try:
    if kind != "ours": conn.execute(f"PRAGMA application_id={APP_ID}")  # written before WAL, so it lands in the file itself
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")  # no fsync per write (a power cut may lose the newest entries, never the file): a cold step writes hundreds
    return conn
  except sqlite3.DatabaseError as e:
    conn.close()
    if isinstance(e, sqlite3.OperationalError) or kind == "new": raise Refused(f"{path}: {e}") from None
  if DEBUG >= 1: print(f"diskcache: {path} is damaged; starting over")
  _delete_files(path)  # ours (its header says so) but damaged
  return _open(path)

def _refuse(path: str, why: str) -> None:
  with _refused_lock:
    if path in _refused: return
    _refused[path] = why
  print(f"tg: running without the compile cache: {why}", file=sys.stderr)

def _db() -> sqlite3.Connection | None:
  """This thread's connection to the cache, or None when the cache can't be used."""
  path = cache_path()
  if path in _refused: return None
  conns = _local.__dict__.setdefault("conns", {})
  if (conn := conns.get(path)) is None:
    try: conn = conns[path] = _open(path)
    except Refused as e: return _refuse(path, str(e))
  return conn

def _table(db: sqlite3.Connection, name: str) -> str:
  table = f"{name}_{VERSION}"
  db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, digest TEXT, value BLOB)")
  return table

def _failed(e: sqlite3.DatabaseError) -> None:
  """A query failed: a damaged tg cache (it was checked to be ours when opened) starts over; a locked, read-only or
  failing one is left as it is and not used again by this process."""
  path = cache_path()
  if isinstance(e, sqlite3.OperationalError): return _refuse(path, f"{path}: {e}")
  if DEBUG >= 1: print(f"diskcache: {path} is damaged ({e}); starting over")
  _local.__dict__.get("conns", {}).pop(path).close()
  _delete_files(path)

def key_of(*parts) -> str:
  """A stable key for (pickleable) parts; only their hash is stored."""
  return hashlib.sha256(pickle.dumps(parts)).hexdigest()

def get(name: str, key: str) -> bytes | None:
  if (db := _db()) is None: return None
  try: row = db.execute(f"SELECT digest, value FROM {_table(db, name)} WHERE key=?", (key,)).fetchone()
  except sqlite3.DatabaseError as e: return _failed(e)
  if row is None: return None
  digest, value = row
  if not isinstance(value, bytes) or hashlib.sha256(value).hexdigest() != digest:
    if DEBUG >= 1: print(f"diskcache: corrupt entry in {name}, discarding it")
    delete(name, key)
    return None
  return value

def put(name: str, key: str, value: bytes) -> None:
  if not isinstance(value, bytes): raise TypeError(f"diskcache stores bytes, not {type(value).__name__}")
  if (db := _db()) is None: return
  try: db.execute(f"INSERT OR REPLACE INTO {_table(db, name)} (key, digest, value) VALUES (?, ?, ?)", (key, hashlib.sha256(value).hexdigest(), value))
  except sqlite3.DatabaseError as e: _failed(e)

def delete(name: str, key: str) -> None:
  if (db := _db()) is None: return
  try: db.execute(f"DELETE FROM {_table(db, name)} WHERE key=?", (key,))
  except sqlite3.DatabaseError as e: _failed(e)

def _delete_files(path: str) -> None:
  for suffix in ("", "-wal", "-shm"):
    try: os.unlink(path + suffix)
    except FileNotFoundError: pass
