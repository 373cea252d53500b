"""The index width a kernel is lowered with: 32 bits unless some index it computes can pass 2**31 - 1. Devices without
64-bit integers (WGSL, ir3) refuse int64 kernels, so a needless int64 is a refused kernel there."""
from tg import Tensor, dtypes
from ir.ops import Ops
from ir.shapetracker import ShapeTracker
from ir.uop import UOp, sym_infer
from codegen.kernel import Kernel, Opt, OptOps
from codegen.lowerer import index_dtype
from drivers.device import Device

def kernel_index_dtypes(t: Tensor) -> list:
  return [index_dtype(Kernel(item.ast, Device["CPU"].renderer)) for item in t.schedule() if item.ast.op is Ops.SINK]

def test_a_3072_cubed_matmul_indexes_in_32_bits():
  # 3072**3 iterations, but every buffer, axis and output position is below 2**31
  assert kernel_index_dtypes(Tensor.empty(3072, 3072) @ Tensor.empty(3072, 3072)) == [dtypes.int32] * 2

def test_a_padded_1300_cubed_matmul_indexes_in_32_bits():
  # padding 1300 columns to 1312 and splitting them in 8s stacks a second view whose flat index would span 1300 * 1312 *
  # 1300 > 2**31 positions; that index is never computed (the split only regroups axes), so it sets no width
  a, b = Tensor.empty(1300, 1300), Tensor.empty(1300, 1300)  # a @ b written out (on a CPU, @ pads b's columns itself)
  (item,) = [i for i in (a.reshape(1300, 1, 1300) * b.T.reshape(1, 1300, 1300)).sum(-1).schedule() if i.ast.op is Ops.SINK]
  k = Kernel(item.ast, Device["CPU"].renderer)
  for opt in (Opt(OptOps.PADTO, 1, 32), Opt(OptOps.UPCAST, 1, 8)): k.apply_opt(opt)
  assert any(len(st.views) == 2 for st in k.sts) and index_dtype(k) == dtypes.int32

def test_a_split_of_padded_axes_is_indexed_without_the_outer_flat_index():
  st = ShapeTracker.from_shape((5, 13)).pad(((0, 0), (0, 3))).reshape((5, 2, 8))  # 13 valid of 16, in two rows of 8
  assert len(st.views) == 2 and st.flattened_views() == [st.views[0]]
  idxs = [UOp.variable(f"i{d}", 0, s - 1) for d, s in enumerate(st.shape)]
  idx, valid = st.to_uops(idxs)
  assert not any(u.op in (Ops.IDIV, Ops.MOD) for u in idx.toposort())  # regrouped, not unravelled
  for i in range(5):
    for j in range(2):
      for l in range(8):
        point = {"i0": i, "i1": j, "i2": l}
        assert sym_infer(valid, point) == (j * 8 + l < 13)
        if j * 8 + l < 13: assert sym_infer(idx, point) == i * 13 + j * 8 + l

def test_a_buffer_past_2_31_elements_needs_64_bits():
  assert kernel_index_dtypes(Tensor.empty(2**31 + 8, dtype=dtypes.int8) + 1) == [dtypes.int64]

def test_a_loop_past_2_31_needs_64_bits_though_every_buffer_is_small():
  # one input element broadcast over a reduce axis of 2**31 + 8: the loop's bound itself needs 64 bits
  assert kernel_index_dtypes(Tensor.empty(1, dtype=dtypes.int8).expand(2**31 + 8).sum(dtype=dtypes.int32)) == [dtypes.int64]

def test_a_far_slice_of_a_huge_arange_needs_64_bits():
  assert kernel_index_dtypes(Tensor.arange(2**31 + 8, dtype=dtypes.int64)[-3:]) == [dtypes.int64]

def test_small_kernels_index_in_32_bits():
  assert kernel_index_dtypes((Tensor.empty(64, 64) @ Tensor.empty(64, 64)).relu()) == [dtypes.int32]
