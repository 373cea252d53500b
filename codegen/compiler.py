"""Compilers turn rendered source into a loadable binary. Results are cached in memory and, with CCACHE, on disk
(keyed by the compiler's identity and the source)."""
from __future__ import annotations
import concurrent.futures
from collections import OrderedDict
from ir.switches import CCACHE
from codegen import diskcache
from codegen.compile_workers import Job, workers

class CompileError(RuntimeError): pass

MAX_IN_MEMORY = 1024  # binaries kept in memory per compiler, least recently used dropped first (the disk keeps them all)

class Compiler:
  # ("module:function", args) that compiles like compile() in a worker process when called with (*args, src); None: never
  worker_task: tuple[str, list] | None = None
  def __init__(self, cachekey: str | None = None):
    self.cachekey = cachekey
    self._memory: OrderedDict[str, bytes] = OrderedDict()
    self._pending: dict[str, Job] = {}
    self._dropped: list[Job] = []  # withdrawn compiles that a worker had already started
  def compile(self, src: str) -> bytes: raise NotImplementedError
  def disassemble(self, src: str, lib: bytes) -> str | None:
    """The machine code of `lib` (compiled from `src`) as text, where this compiler can show it; else None."""
    return None
  def _disk_key(self, src: str) -> str | None: return diskcache.key_of(self.cachekey, src) if CCACHE and self.cachekey is not None else None
  def compile_ahead(self, src: str) -> None:
    """Queue `src` for a compile worker process (where this compiler has a worker task and no binary is cached), so
    that a later compile_cached finds it done; the caller goes on meanwhile (lowering the next kernel)."""
    if self.worker_task is None or src in self._memory or src in self._pending: return
    if (key := self._disk_key(src)) is not None and (lib := diskcache.get("compile", key)) is not None: self._remember(src, lib)
    elif (pool := workers()) is not None: self._pending[src] = pool.submit(*self.worker_task, src)
  def compile_taken_back(self, src: str) -> bytes:
    """`src` compiled now, by a worker if compile_ahead queued it and one started (no worker started it yet: here
    rather than wait), kept in no cache: what compile_cached does on a miss, and all BEAM's candidates need."""
    if (ahead := self._pending.pop(src, None)) is None or ahead.claim(): return self.compile(src)
    return self._wait(ahead)
  def compile_dropped(self, src: str) -> None:
    """Withdraw what compile_ahead queued for `src`, whose binary is no longer wanted: no worker that hasn't started it will."""
    if (ahead := self._pending.pop(src, None)) is not None and not ahead.claim(): self._dropped.append(ahead)
  def settle(self) -> None:
    """Return once no withdrawn compile is still running on a worker (so that nothing competes with a timed run)."""
    concurrent.futures.wait([job.result for job in self._dropped])
    self._dropped.clear()
  def compile_cached(self, src: str) -> bytes:
    if (lib := self._memory.get(src)) is not None:
      self._memory.move_to_end(src)
      return lib
    key = self._disk_key(src)
    if src in self._pending or key is None or (lib := diskcache.get("compile", key)) is None: lib = self.compile_taken_back(src)
    else: key = None  # from the disk: nothing to write back
    if key is not None: diskcache.put("compile", key, lib)
    return self._remember(src, lib)
  def _wait(self, job: Job) -> bytes:
    """A worker's result, compiling queued jobs (those needed last first) meanwhile; a CompileError raises here."""
    while not job.result.done() and (spare := next((j for j in reversed(self._pending.values()) if j.claim()), None)) is not None:
      try: spare.result.set_result(self.compile(spare.src))
      except Exception as e: spare.result.set_exception(e)  # noqa: BLE001 - raised where that kernel is needed
    return job.result.result()
  def _remember(self, src: str, lib: bytes) -> bytes:
    self._memory[src] = lib
    while len(self._memory) > MAX_IN_MEMORY: self._memory.popitem(last=False)
    return lib
  def forget(self, src: str) -> None:
    """Drop a cached binary (e.g. one that failed to load), so the next compile_cached compiles again."""
    self._memory.pop(src, None)
    if self.cachekey is not None: diskcache.delete("compile", diskcache.key_of(self.cachekey, src))
