"""Tensor cores: warp-wide matrix instructions D = A @ B + C on small tiles held in registers. Each lane of the warp
holds fixed elements of each tile; a layout lists, per register element, its (row, column) as a function of the
lane's group g = lane // 4 and thread t = lane % 4, written (g coefficient, t coefficient, constant)."""
from __future__ import annotations
from dataclasses import dataclass
from ir.dtype import DType, dtypes

Coord = tuple[int, int, int]  # g * [0] + t * [1] + [2]

@dataclass(frozen=True)
class TensorCore:
  name: str                          # the instruction's shape, as PTX spells it
  dims: tuple[int, int, int]         # (M, N, K): D and C are M x N, A is M x K, B is K x N
  dtype_in: DType
  dtype_acc: DType
  a: tuple[tuple[Coord, Coord], ...]  # element i of A's fragment: (row m, column k)
  b: tuple[tuple[Coord, Coord], ...]  # element i of B's fragment: (row k, column n)
  c: tuple[tuple[Coord, Coord], ...]  # element i of C's and D's fragment: (row m, column n)
  threads: int = 32
  @property
  def flops_per_thread(self) -> int: return 2 * self.dims[0] * self.dims[1] * self.dims[2] // self.threads

# mma.sync m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type")
_M16N8K16_A = tuple(((1, 0, 8 * (i // 2 % 2)), (0, 2, i % 2 + 8 * (i // 4))) for i in range(8))
_M16N8K16_B = tuple(((0, 2, i % 2 + 8 * (i // 2)), (1, 0, 0)) for i in range(4))
_M16N8K16_C = tuple(((1, 0, 8 * (i // 2)), (0, 2, i % 2)) for i in range(4))

def mma_m16n8k16(dtype_in: DType) -> TensorCore:
  return TensorCore("m16n8k16", (16, 8, 16), dtype_in, dtypes.float32, _M16N8K16_A, _M16N8K16_B, _M16N8K16_C)
