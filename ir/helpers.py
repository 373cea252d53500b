"""Small generic helpers shared by every layer."""
from __future__ import annotations
from typing import Iterable, Sequence, TypeVar
T = TypeVar("T")

def prod(xs: Iterable[int]) -> int:
  out = 1
  for x in xs: out *= x
  return out
def all_same(xs: Sequence) -> bool: return all(x == xs[0] for x in xs[1:])
def flatten(xss: Iterable[Iterable[T]]) -> list[T]: return [x for xs in xss for x in xs]
def argsort(xs: Sequence) -> list[int]: return sorted(range(len(xs)), key=xs.__getitem__)
def dedup(xs: Iterable[T]) -> list[T]: return list(dict.fromkeys(xs))
def ceildiv(a: int, b: int) -> int: return -(-a // b)
def round_up(a: int, b: int) -> int: return ceildiv(a, b) * b
def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
  """numpy's broadcasting of shapes; ValueError naming them when they don't fit."""
  if all(s == shapes[0] for s in shapes[1:]): return tuple(shapes[0]) if shapes else ()
  ndim = max((len(s) for s in shapes), default=0)
  padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
  out = []
  for dims in zip(*padded):
    sizes = {d for d in dims if d != 1}
    if len(sizes) > 1: raise ValueError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} can't be broadcast together")
    out.append(sizes.pop() if sizes else 1)
  return tuple(out)

def colored(text: str, color: str | None) -> str:
  codes = {"red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36, "white": 37}
  return text if color is None else f"\033[{codes[color]}m{text}\033[0m"
