"""A small terminal progress bar with tinygrad's (and tqdm's) interface: `for i in (t := trange(n)): t.set_description(...)`."""
from __future__ import annotations
import sys, time
from typing import Generic, Iterable, Iterator, TypeVar
T = TypeVar("T")

class tqdm(Generic[T]):
  """Iterate `iterable` (or call `update(n)` with a `total`), drawing `desc: 40%|########............| 4/10 [1.2s, 3.33it/s]`
  on stderr at most every 0.1 s; below one item a second the rate reads `2.50s/it`. disable=None: only on a terminal."""
  def __init__(self, iterable: Iterable[T] | None = None, desc: str = "", disable: bool | None = False, unit: str = "it", unit_scale: bool = False,
               total: int | None = None, file=None):
    self.iterable, self.desc, self.unit, self.unit_scale, self.file = iterable, desc, unit, unit_scale, file or sys.stderr
    self.disable = not self.file.isatty() if disable is None else disable
    self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)  # type: ignore[arg-type]
    self.n, self.start, self.last_print, self.shown, self.closed = 0, time.perf_counter(), 0.0, "", False
  def __iter__(self) -> Iterator[T]:
    if self.iterable is None: raise TypeError("this progress bar has no iterable; call update() instead")
    for x in self.iterable:
      yield x
      self.update(1)
    self.close()
  def __enter__(self) -> tqdm[T]: return self
  def __exit__(self, *exc) -> None: self.close()
  def set_description(self, desc: str) -> None:
    self.desc = desc
    self._print(force=True)
  def update(self, n: int = 1) -> None:
    self.n += n
    self._print()
  def close(self) -> None:
    if self.closed: return
    self.closed = True
    self._print(force=True, fresh=True)
    if not self.disable: self.file.write("\n")
  @classmethod
  def write(cls, s: str, file=None) -> None:
    """Print a line over the bar (the bar is drawn again on its next update)."""
    print(f"\r\033[K{s}", file=file or sys.stderr, flush=True)
  def _fmt(self, x: float) -> str:
    if not self.unit_scale: return str(int(x))
    for prefix in ("", "k", "M", "G", "T"):
      if abs(x) < 1000: return f"{x:.2f}{prefix}"
      x /= 1000
    return f"{x:.2f}P"
  def rate_text(self, elapsed: float) -> str:
    """`3.33it/s`, or `2.50s/it` when an item takes more than a second; `?it/s` before the first one."""
    if self.n <= 0 or elapsed <= 0: return f"?{self.unit}/s"
    rate = self.n / elapsed
    if rate < 1: return f"{1 / rate:.2f}s/{self.unit}"
    return f"{self._fmt(rate) if self.unit_scale else f'{rate:.2f}'}{self.unit}/s"
  def _print(self, force: bool = False, fresh: bool = False) -> None:
    """Draw the bar (at most every 0.1 s unless forced); `fresh`: only if the counts or description changed since last drawn."""
    now = time.perf_counter()
    if self.disable or (not force and now - self.last_print < 0.1 and self.n != self.total): return
    self.last_print = now
    elapsed = now - self.start
    if self.total:
      frac = min(self.n / self.total, 1.0)
      bar = "#" * int(frac * 20) + "." * (20 - int(frac * 20))
      counts = f"{100 * frac:3.0f}%|{bar}| {self._fmt(self.n)}/{self._fmt(self.total)}"
    else: counts = f"{self._fmt(self.n)}"
    if fresh and self.shown == f"{self.desc}{counts}": return
    self.shown = f"{self.desc}{counts}"
    self.file.write(f"\r{self.desc}{': ' if self.desc else ''}{counts} [{elapsed:.1f}s, {self.rate_text(elapsed)}]\033[K")
    self.file.flush()

def trange(n: int, **kw) -> tqdm[int]: return tqdm(range(n), total=n, **kw)
