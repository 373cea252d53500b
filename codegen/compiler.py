"""Compilers turn rendered source into a loadable binary. Results are cached in memory and, with CCACHE, on disk
(keyed by the compiler's identity and the source)."""
from __future__ import annotations
from collections import OrderedDict
from ir.switches import CCACHE
from codegen import diskcache

class CompileError(RuntimeError): pass

MAX_IN_MEMORY = 1024  # binaries kept in memory per compiler, least recently used dropped first (the disk keeps them all)

class Compiler:
  def __init__(self, cachekey: str | None = None):
    self.cachekey = cachekey
    self._memory: OrderedDict[str, bytes] = OrderedDict()
  def compile(self, src: str) -> bytes: raise NotImplementedError
  def disassemble(self, src: str, lib: bytes) -> str | None:
    """The machine code of `lib` (compiled from `src`) as text, where this compiler can show it; else None."""
    return None
  def compile_cached(self, src: str) -> bytes:
    if (lib := self._memory.get(src)) is not None:
      self._memory.move_to_end(src)
      return lib
    key = diskcache.key_of(self.cachekey, src) if CCACHE and self.cachekey is not None else None
    if key is None or (lib := diskcache.get("compile", key)) is None:
      lib = self.compile(src)
      if key is not None: diskcache.put("compile", key, lib)
    self._memory[src] = lib
    while len(self._memory) > MAX_IN_MEMORY: self._memory.popitem(last=False)
    return lib
  def forget(self, src: str) -> None:
    """Drop a cached binary (e.g. one that failed to load), so the next compile_cached compiles again."""
    self._memory.pop(src, None)
    if self.cachekey is not None: diskcache.delete("compile", diskcache.key_of(self.cachekey, src))
