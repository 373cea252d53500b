"""Compilers turn rendered source into a loadable binary; results are cached in memory per compiler."""
from __future__ import annotations

class CompileError(RuntimeError): pass

class Compiler:
  def __init__(self, cachekey: str | None = None):
    self.cachekey = cachekey
    self._memory: dict[str, bytes] = {}
  def compile(self, src: str) -> bytes: raise NotImplementedError
  def compile_cached(self, src: str) -> bytes:
    if (lib := self._memory.get(src)) is None: lib = self._memory[src] = self.compile(src)
    return lib
