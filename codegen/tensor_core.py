"""Tensor cores: warp-wide matrix instructions D = A @ B + C on small tiles. Each lane holds fixed elements of the A
and C/D tiles in registers; a layout lists, per register element, its (row, column) as a function of the lane's warp
w = lane // 32, group g = lane % 32 // 4 and thread t = lane % 4, written (w, g, t coefficients, constant). B is
either in registers too (mma.sync) or staged by the whole warpgroup in shared memory (Hopper's wgmma), in the
canonical no-swizzle K-major layout: 8 x 16-byte core matrices, LBO bytes apart along K and SBO bytes apart along N."""
from __future__ import annotations
from dataclasses import dataclass
from ir.dtype import DType, dtypes

Coord = tuple[int, int, int, int]  # w * [0] + g * [1] + t * [2] + [3]
CORE_ROWS, CORE_ROW_BYTES = 8, 16  # a shared-memory core matrix

@dataclass(frozen=True)
class TensorCore:
  instruction: str                    # "mma" (mma.sync) or "wgmma" (wgmma.mma_async)
  dims: tuple[int, int, int]          # (M, N, K): D and C are M x N, A is M x K, B is K x N
  dtype_in: DType
  dtype_acc: DType
  a: tuple[tuple[Coord, Coord], ...]  # element i of A's fragment: (row m, column k)
  b: tuple[tuple[Coord, Coord], ...]  # element i of B's fragment: (row k, column n); () when B is in shared memory
  c: tuple[tuple[Coord, Coord], ...]  # element i of C's and D's fragment: (row m, column n)
  threads: int                        # lanes that execute the instruction together
  @property
  def shape(self) -> str: return "m{}n{}k{}".format(*self.dims)
  @property
  def flops_per_thread(self) -> int: return 2 * self.dims[0] * self.dims[1] * self.dims[2] // self.threads
  @property
  def b_in_shared(self) -> bool: return not self.b
  @property
  def b_tile_bytes(self) -> int: return self.dims[1] * self.dims[2] * self.dtype_in.itemsize
  @property
  def b_strides(self) -> tuple[int, int]:
    """(LBO, SBO): bytes between B's core matrices along K and along N."""
    lbo = CORE_ROWS * CORE_ROW_BYTES
    return lbo, lbo * (self.dims[2] * self.dtype_in.itemsize // CORE_ROW_BYTES)

def _accumulator(i: int) -> tuple[Coord, Coord]:
  """Element i of a warp's m16n8 accumulator layout: rows g and g+8, two neighbouring columns per 8-column chunk."""
  return (0, 1, 0, 8 * (i % 4 // 2)), (0, 0, 2, i % 2 + 8 * (i // 4))

# mma.sync m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type")
_M16N8K16_A = tuple(((0, 1, 0, 8 * (i // 2 % 2)), (0, 0, 2, i % 2 + 8 * (i // 4))) for i in range(8))
_M16N8K16_B = tuple(((0, 0, 2, i % 2 + 8 * (i // 2)), (0, 1, 0, 0)) for i in range(4))
_M16N8K16_C = tuple(_accumulator(i) for i in range(4))

def mma_m16n8k16(dtype_in: DType) -> TensorCore:
  return TensorCore("mma", (16, 8, 16), dtype_in, dtypes.float32, _M16N8K16_A, _M16N8K16_B, _M16N8K16_C, 32)

def wgmma_m64nNk16(n: int, dtype_in: DType) -> TensorCore:
  """wgmma.mma_async m64nNk16 (PTX ISA, "Register Fragments and Shared Memory Matrix Layouts" for wgmma): warp w of
  the warpgroup holds rows 16w..16w+15 of A and D, each in the m16n8k16 layouts (D repeated per 8 columns)."""
  a = tuple(((16, *row[1:]), col) for row, col in _M16N8K16_A)
  c = tuple(((16, *row[1:]), col) for row, col in (_accumulator(i) for i in range(n // 2)))
  return TensorCore("wgmma", (64, n, 16), dtype_in, dtypes.float32, a, (), c, 128)
