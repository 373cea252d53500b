"""The index width a kernel is lowered with: 32 bits unless some index it computes can pass 2**31 - 1. Devices without
64-bit integers (WGSL, ir3) refuse int64 kernels, so a needless int64 is a refused kernel there."""
from tg import Tensor, dtypes
from ir.ops import Ops
from codegen.kernel import Kernel
from codegen.lowerer import index_dtype
from drivers.device import Device

def kernel_index_dtypes(t: Tensor) -> list:
  return [index_dtype(Kernel(item.ast, Device["CPU"].renderer)) for item in t.schedule() if item.ast.op is Ops.SINK]

def test_a_3072_cubed_matmul_indexes_in_32_bits():
  # 3072**3 iterations, but every buffer, axis and output position is below 2**31
  assert kernel_index_dtypes(Tensor.empty(3072, 3072) @ Tensor.empty(3072, 3072)) == [dtypes.int32] * 2

def test_a_buffer_past_2_31_elements_needs_64_bits():
  assert kernel_index_dtypes(Tensor.empty(2**31 + 8, dtype=dtypes.int8) + 1) == [dtypes.int64]

def test_a_loop_past_2_31_needs_64_bits_though_every_buffer_is_small():
  # one input element broadcast over a reduce axis of 2**31 + 8: the loop's bound itself needs 64 bits
  assert kernel_index_dtypes(Tensor.empty(1, dtype=dtypes.int8).expand(2**31 + 8).sum(dtype=dtypes.int32)) == [dtypes.int64]

def test_a_far_slice_of_a_huge_arange_needs_64_bits():
  assert kernel_index_dtypes(Tensor.arange(2**31 + 8, dtype=dtypes.int64)[-3:]) == [dtypes.int64]

def test_small_kernels_index_in_32_bits():
  assert kernel_index_dtypes((Tensor.empty(64, 64) @ Tensor.empty(64, 64)).relu()) == [dtypes.int32]
