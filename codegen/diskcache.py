"""A small persistent cache in sqlite (the user's cache folder, or CACHEDB): compiled programs (CCACHE) and BEAM
results. Safe with several processes at once (WAL journal, busy timeout); an entry whose checksum doesn't match is
deleted and reported as missing, so it gets rebuilt."""
from __future__ import annotations
import hashlib, os, pathlib, pickle, sqlite3, threading
from typing import Any
from ir.switches import DEBUG

VERSION = 1
_local = threading.local()

def cache_path() -> str:
  if path := os.environ.get("CACHEDB"): return path
  base = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
  return os.path.join(base, "tg", "cache.db")

def _db() -> sqlite3.Connection:
  path = cache_path()
  conn = getattr(_local, "conns", {}).get(path)
  if conn is None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    _local.conns = {**getattr(_local, "conns", {}), path: conn}
  return conn

def _table(name: str) -> str:
  table = f"{name}_{VERSION}"
  _db().execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, digest TEXT, value BLOB)")
  return table

def key_of(*parts: Any) -> str:
  """A stable key for (pickleable) parts."""
  return hashlib.sha256(pickle.dumps(parts)).hexdigest()

def get(name: str, key: str) -> Any | None:
  try: row = _db().execute(f"SELECT digest, value FROM {_table(name)} WHERE key=?", (key,)).fetchone()
  except sqlite3.DatabaseError as e:
    if DEBUG >= 1: print(f"diskcache: {cache_path()} unreadable ({e}); starting over")
    _reset()
    return None
  if row is None: return None
  digest, value = row
  if hashlib.sha256(value).hexdigest() != digest:
    if DEBUG >= 1: print(f"diskcache: corrupt entry in {name}, discarding it")
    delete(name, key)
    return None
  try: return pickle.loads(value)
  except Exception:
    delete(name, key)
    return None

def put(name: str, key: str, value: Any) -> Any:
  blob = pickle.dumps(value)
  try: _db().execute(f"INSERT OR REPLACE INTO {_table(name)} (key, digest, value) VALUES (?, ?, ?)", (key, hashlib.sha256(blob).hexdigest(), blob))
  except sqlite3.DatabaseError as e:
    if DEBUG >= 1: print(f"diskcache: can't write {cache_path()} ({e})")
  return value

def delete(name: str, key: str) -> None:
  try: _db().execute(f"DELETE FROM {_table(name)} WHERE key=?", (key,))
  except sqlite3.DatabaseError: pass

def _reset() -> None:
  """Drop a database sqlite can't read (it is only a cache)."""
  path = cache_path()
  conn = getattr(_local, "conns", {}).pop(path, None)
  if conn is not None: conn.close()
  for suffix in ("", "-wal", "-shm"):
    try: os.unlink(path + suffix)
    except FileNotFoundError: pass

