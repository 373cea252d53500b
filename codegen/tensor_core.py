"""Tensor cores: warp- or wave-wide matrix instructions D = A @ B + C on small tiles. Each lane holds fixed elements of
the A and C/D tiles in registers; a layout lists, per register element, its (row, column) as a linear function of the
bits of the lane number (a Place). NV's lane groupings (warp lane // 32, group lane % 32 // 4, thread lane % 4) and
AMD's (lane % 16, lane // 16) are all runs of lane bits. B is either in registers too (mma.sync, wmma) or staged by
the whole warpgroup in shared memory (Hopper's wgmma), in the canonical no-swizzle K-major layout: 8 x 16-byte core
matrices, LBO bytes apart along K and SBO bytes apart along N."""
from __future__ import annotations
from dataclasses import dataclass
from ir.dtype import DType, dtypes

CORE_ROWS, CORE_ROW_BYTES = 8, 16  # a shared-memory core matrix

@dataclass(frozen=True)
class Place:
  """A fragment coordinate: const + the sum of bits[j] over the set bits j of the lane number."""
  bits: tuple[int, ...] = ()
  const: int = 0
  def at(self, lane: int) -> int: return self.const + sum(c for j, c in enumerate(self.bits) if lane >> j & 1)
  def runs(self) -> tuple[tuple[int, int, int], ...]:
    """(shift, width, scale) of each run of lane bits whose coefficients double from bit to bit: the place is const
    plus the sum of (lane >> shift) % 2**width * scale over the runs."""
    out: list[list[int]] = []
    for j, c in enumerate(self.bits):
      if c == 0: continue
      if out and out[-1][0] + out[-1][1] == j and out[-1][2] << out[-1][1] == c: out[-1][1] += 1
      else: out.append([j, 1, c])
    return tuple(tuple(r) for r in out)

def lane_bits(shift: int, width: int, scale: int = 1) -> tuple[int, ...]:
  """The coefficients of (lane >> shift) % 2**width * scale, per lane bit."""
  return (0,) * shift + tuple(scale << i for i in range(width))

def _nv(w: int, g: int, t: int, c: int) -> Place:
  """w * (lane // 32) + g * (lane % 32 // 4) + t * (lane % 4) + c."""
  bits = [0] * 7
  for shift, width, scale in ((0, 2, t), (2, 3, g), (5, 2, w)):
    for j, coefficient in enumerate(lane_bits(shift, width, scale)): bits[j] += coefficient
  while bits and bits[-1] == 0: bits.pop()
  return Place(tuple(bits), c)

@dataclass(frozen=True)
class TensorCore:
  instruction: str                    # "mma" (mma.sync), "wgmma" (wgmma.mma_async), "wmma" (RDNA3 v_wmma) or "mfma" (CDNA v_mfma)
  dims: tuple[int, int, int]          # (M, N, K): D and C are M x N, A is M x K, B is K x N
  dtype_in: DType
  dtype_acc: DType
  a: tuple[tuple[Place, Place], ...]  # element i of A's fragment: (row m, column k)
  b: tuple[tuple[Place, Place], ...]  # element i of B's fragment: (row k, column n); () when B is in shared memory
  c: tuple[tuple[Place, Place], ...]  # element i of C's and D's fragment: (row m, column n)
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

def _accumulator(i: int, w: int = 0) -> tuple[Place, Place]:
  """Element i of a warp's m16n8 accumulator layout: rows g and g+8, two neighbouring columns per 8-column chunk."""
  return _nv(w, 1, 0, 8 * (i % 4 // 2)), _nv(0, 0, 2, i % 2 + 8 * (i // 4))

# mma.sync m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type")
def _m16n8k16_a(i: int, w: int = 0) -> tuple[Place, Place]: return _nv(w, 1, 0, 8 * (i // 2 % 2)), _nv(0, 0, 2, i % 2 + 8 * (i // 4))
_M16N8K16_B = tuple((_nv(0, 0, 2, i % 2 + 8 * (i // 2)), _nv(0, 1, 0, 0)) for i in range(4))

def mma_m16n8k16(dtype_in: DType) -> TensorCore:
  a, c = tuple(_m16n8k16_a(i) for i in range(8)), tuple(_accumulator(i) for i in range(4))
  return TensorCore("mma", (16, 8, 16), dtype_in, dtypes.float32, a, _M16N8K16_B, c, 32)

def wgmma_m64nNk16(n: int, dtype_in: DType) -> TensorCore:
  """wgmma.mma_async m64nNk16 (PTX ISA, "Register Fragments and Shared Memory Matrix Layouts" for wgmma): warp w of
  the warpgroup holds rows 16w..16w+15 of A and D, each in the m16n8k16 layouts (D repeated per 8 columns)."""
  a, c = tuple(_m16n8k16_a(i, 16) for i in range(8)), tuple(_accumulator(i, 16) for i in range(n // 2))
  return TensorCore("wgmma", (64, n, 16), dtype_in, dtypes.float32, a, (), c, 128)

# RDNA3 wave32 v_wmma_f32_16x16x16_{f16,bf16} (RDNA3 ISA guide 7.9 "Wave Matrix Multiply Accumulate"; GPUOpen "How to
# accelerate AI applications on RDNA 3 using WMMA"): lane l holds row l%16 of A and column l%16 of B, all 16 K values
# (lanes 16..31 repeat lanes 0..15); D's register r of lane l is element (2r + l//16, l%16).
_LOW16 = Place(lane_bits(0, 4))
_WMMA_A = tuple((_LOW16, Place((), i)) for i in range(16))
_WMMA_B = tuple((Place((), i), _LOW16) for i in range(16))
_WMMA_C = tuple((Place(lane_bits(4, 1), 2 * r), _LOW16) for r in range(8))

def wmma_16x16x16(dtype_in: DType) -> TensorCore:
  return TensorCore("wmma", (16, 16, 16), dtype_in, dtypes.float32, _WMMA_A, _WMMA_B, _WMMA_C, 32)

# CDNA3 wave64 v_mfma_f32_16x16x16_{f16,bf16} (MI300 ISA guide "Matrix Arithmetic Instructions" register layouts; AMD
# matrix instruction calculator, CDNA3 --matrix-layout): lane l holds A[l%16][4(l//16) + i] and B[4(l//16) + i][l%16],
# i = 0..3; register r of D holds (4(l//16) + r, l%16).
_QUAD = lane_bits(4, 2, 4)  # 4 * (lane // 16)
_MFMA_A = tuple((_LOW16, Place(_QUAD, i)) for i in range(4))
_MFMA_B = tuple((Place(_QUAD, i), _LOW16) for i in range(4))
_MFMA_C = tuple((Place(_QUAD, r), _LOW16) for r in range(4))

def mfma_16x16x16(dtype_in: DType) -> TensorCore:
  return TensorCore("mfma", (16, 16, 16), dtype_in, dtypes.float32, _MFMA_A, _MFMA_B, _MFMA_C, 64)
