"""A small terminal progress bar: `for i in (t := trange(n)): t.set_description(...)`."""
from __future__ import annotations
import sys, time
from typing import Iterable, Iterator, TypeVar
T = TypeVar("T")

class ProgressBar:
  def __init__(self, iterable: Iterable[T] | None = None, total: int | None = None, desc: str = "", unit: str = "it", unit_scale: bool = False,
               disable: bool = False, file=None):
    self.iterable, self.desc, self.unit, self.unit_scale, self.disable = iterable, desc, unit, unit_scale, disable
    self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)  # type: ignore[arg-type]
    self.n, self.start, self.last_print, self.file = 0, time.perf_counter(), 0.0, file or sys.stderr
  def __iter__(self) -> Iterator[T]:
    for x in self.iterable:  # type: ignore[union-attr]
      yield x
      self.update(1)
    self.close()
  def set_description(self, desc: str) -> None:
    self.desc = desc
    self._print(force=True)
  def update(self, n: int = 1) -> None:
    self.n += n
    self._print()
  def close(self) -> None:
    self._print(force=True)
    if not self.disable: self.file.write("\n")
  def _fmt(self, x: float) -> str:
    if not self.unit_scale: return str(int(x))
    for prefix in ("", "k", "M", "G", "T"):
      if abs(x) < 1000: return f"{x:.2f}{prefix}"
      x /= 1000
    return f"{x:.2f}P"
  def _print(self, force: bool = False) -> None:
    now = time.perf_counter()
    if self.disable or (not force and now - self.last_print < 0.1 and self.n != self.total): return
    self.last_print = now
    elapsed = now - self.start
    rate = self.n / elapsed if elapsed > 0 else 0.0
    if self.total:
      frac = min(self.n / self.total, 1.0)
      bar = "#" * int(frac * 20) + "." * (20 - int(frac * 20))
      counts = f"{100 * frac:3.0f}%|{bar}| {self._fmt(self.n)}/{self._fmt(self.total)}"
    else: counts = f"{self._fmt(self.n)}"
    self.file.write(f"\r{self.desc}{': ' if self.desc else ''}{counts} [{elapsed:.1f}s, {self._fmt(rate)}{self.unit}/s]\033[K")
    self.file.flush()

def trange(n: int, **kw) -> ProgressBar: return ProgressBar(range(n), total=n, **kw)
