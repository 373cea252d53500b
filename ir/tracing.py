"""A seam for watching the compiler. A viewer (tg.viz, with VIZ on) installs a `Tracer` here for the time it compiles
a kernel; otherwise `tracer` is None and every hook costs one global read."""
from __future__ import annotations
from typing import Any, Callable, Protocol
from ir.uop import UOp

class Tracer(Protocol):
  def rewrite(self, before: UOp, after: UOp, fired: list[Callable]) -> None:
    """graph_rewrite turned `before` into `after`; `fired`: the functions of the rules that applied, in order."""
  def stage(self, name: str, result: Any) -> None:
    """A compiler stage ended with `result`; the rewrites seen since the previous stage belong to it."""

tracer: Tracer | None = None

def stage(name: str, result: Any) -> None:
  """Tell the installed tracer (if any) that stage `name` produced `result`."""
  if tracer is not None: tracer.stage(name, result)
