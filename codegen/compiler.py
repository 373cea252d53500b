"""Compilers turn rendered source into a loadable binary. Results are cached in memory and, with CCACHE, on disk
(keyed by the compiler's identity and the source)."""
from __future__ import annotations
from ir.switches import CCACHE
from codegen import diskcache

class CompileError(RuntimeError): pass

class Compiler:
  def __init__(self, cachekey: str | None = None):
    self.cachekey = cachekey
    self._memory: dict[str, bytes] = {}
  def compile(self, src: str) -> bytes: raise NotImplementedError
  def compile_cached(self, src: str) -> bytes:
    if (lib := self._memory.get(src)) is not None: return lib
    key = diskcache.key_of(self.cachekey, src) if CCACHE and self.cachekey is not None else None
    if key is None or (lib := diskcache.get("compile", key)) is None:
      lib = self.compile(src)
      if key is not None: diskcache.put("compile", key, lib)
    self._memory[src] = lib
    return lib
  def forget(self, src: str) -> None:
    """Drop a cached binary (e.g. one that failed to load), so the next compile_cached compiles again."""
    self._memory.pop(src, None)
    if self.cachekey is not None: diskcache.delete("compile", diskcache.key_of(self.cachekey, src))
