"""The helpers tinygrad's docs and examples import from `tinygrad.helpers`, under the same names: runtime switches
(getenv, Context, ContextVar, DEBUG, DEV, ...), GlobalCounters, Timing, the tqdm/trange progress bar, colored and small list helpers."""
from __future__ import annotations
import contextlib, time
from typing import Callable, Iterable, TypeVar
from ir.helpers import all_same, colored, dedup, flatten, prod
from ir.switches import BEAM, CAPTURING, DEBUG, DEV, JIT, NOOPT, PROFILE, TRAINING, Context, ContextVar, getenv
from drivers.device import GlobalCounters
from tg.progress import tqdm, trange
T = TypeVar("T")

class Timing(contextlib.ContextDecorator):
  """`with Timing("step: "):` prints `step:  12.34 ms` when the block ends; on_exit(ns) adds text after it."""
  def __init__(self, prefix: str = "", on_exit: Callable[[int], str] | None = None, enabled: bool = True):
    self.prefix, self.on_exit, self.enabled = prefix, on_exit, enabled
  def __enter__(self) -> Timing:
    self.st = time.perf_counter_ns()
    return self
  def __exit__(self, *exc) -> None:
    self.et = time.perf_counter_ns() - self.st
    if self.enabled: print(f"{self.prefix}{self.et * 1e-6:6.2f} ms" + (self.on_exit(self.et) if self.on_exit else ""))

def partition(items: Iterable[T], keep: Callable[[T], bool]) -> tuple[list[T], list[T]]:
  """(the items `keep` accepts, the others), each in order."""
  yes: list[T] = []
  no: list[T] = []
  for x in items: (yes if keep(x) else no).append(x)
  return yes, no

__all__ = ["BEAM", "CAPTURING", "DEBUG", "DEV", "JIT", "NOOPT", "PROFILE", "TRAINING", "Context", "ContextVar", "getenv", "GlobalCounters",
           "Timing", "tqdm", "trange", "colored", "prod", "partition", "all_same", "dedup", "flatten"]
