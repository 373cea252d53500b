"""Compilers turn rendered source into a loadable binary. Results are cached in memory and, with CCACHE, on disk
(keyed by the compiler's identity and the source)."""
from __future__ import annotations
import concurrent.futures, functools, os
from collections import OrderedDict
from ir.switches import CCACHE
from codegen import diskcache

class CompileError(RuntimeError): pass

MAX_IN_MEMORY = 1024  # binaries kept in memory per compiler, least recently used dropped first (the disk keeps them all)

@functools.cache
def _workers() -> concurrent.futures.ThreadPoolExecutor:
  """The threads compiles run on ahead of use, one per core (a compiler's work runs outside the GIL)."""
  return concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="compile")

class Compiler:
  thread_safe = False  # compile() may run on several threads at once
  def __init__(self, cachekey: str | None = None):
    self.cachekey = cachekey
    self._memory: OrderedDict[str, bytes] = OrderedDict()
    self._pending: dict[str, concurrent.futures.Future[bytes]] = {}
  def compile(self, src: str) -> bytes: raise NotImplementedError
  def disassemble(self, src: str, lib: bytes) -> str | None:
    """The machine code of `lib` (compiled from `src`) as text, where this compiler can show it; else None."""
    return None
  def _disk_key(self, src: str) -> str | None: return diskcache.key_of(self.cachekey, src) if CCACHE and self.cachekey is not None else None
  def compile_ahead(self, src: str) -> None:
    """Start compiling `src` on a worker thread (where this compiler allows it and no binary is cached), so that a
    later compile_cached finds it done or waits for it; the caller goes on meanwhile (lowering the next kernel)."""
    if not self.thread_safe or src in self._memory or src in self._pending: return
    if (key := self._disk_key(src)) is not None and (lib := diskcache.get("compile", key)) is not None: self._remember(src, lib)
    else: self._pending[src] = _workers().submit(self.compile, src)
  def compile_cached(self, src: str) -> bytes:
    if (lib := self._memory.get(src)) is not None:
      self._memory.move_to_end(src)
      return lib
    key = self._disk_key(src)
    if (ahead := self._pending.pop(src, None)) is not None: lib = ahead.result()  # a CompileError raises here
    elif key is None or (lib := diskcache.get("compile", key)) is None: lib = self.compile(src)
    else: key = None  # from the disk: nothing to write back
    if key is not None: diskcache.put("compile", key, lib)
    return self._remember(src, lib)
  def _remember(self, src: str, lib: bytes) -> bytes:
    self._memory[src] = lib
    while len(self._memory) > MAX_IN_MEMORY: self._memory.popitem(last=False)
    return lib
  def forget(self, src: str) -> None:
    """Drop a cached binary (e.g. one that failed to load), so the next compile_cached compiles again."""
    self._memory.pop(src, None)
    if self.cachekey is not None: diskcache.delete("compile", diskcache.key_of(self.cachekey, src))
