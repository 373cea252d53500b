"""Integer arithmetic the LLVM renderer marks nsw/nuw (LLVM may then assume it never wraps) is exactly what tg's bounds
prove stays in range: index math over loop and launch indices, never arithmetic on loaded data, which must wrap."""
import re
import numpy as np
from tg import Tensor, dtypes
from ir.ops import Ops
from ir.uop import UOp
from codegen.llvmir import never_wraps
from codegen.program import get_program
from drivers.device import Device

def loop(size: int) -> UOp: return UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, 0), UOp.const(dtypes.int32, size)), 0)

def test_index_math_over_bounded_loops_never_wraps():
  i, j = loop(3000), loop(64)
  assert never_wraps(i * 64 + j) and never_wraps(i * 3000 - j)
  assert never_wraps((i * 64 + j).cast(dtypes.int64) * 2**40)

def test_arithmetic_that_can_leave_the_range_may_wrap():
  i = loop(3000)
  assert not never_wraps(i * 2**20)                     # up to 2999 * 2**20 > 2**31 - 1
  x = UOp(Ops.LOAD, dtypes.int32, (UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(), arg=0), i))
  assert not never_wraps(x + 1)                          # loaded data has no bounds
  assert not never_wraps(UOp.const(dtypes.uint32, 0) - i.cast(dtypes.uint32))  # below zero

def test_rendered_kernel_flags_its_index_math_and_leaves_data_arithmetic_wrapping():
  data = np.array([2**31 - 1, -2**31, 5, 7] * 16, np.int32).reshape(8, 8)
  y = Tensor(data).permute(1, 0) * 3 + 1
  (item,) = [i for i in y.schedule() if i.ast.op is Ops.SINK]
  src = get_program(item.ast, Device["CPU"].renderer).src
  assert re.search(r"= (add|mul) nsw i32 %ridx", src), src          # the transposed read's addresses
  data_math = [l for l in src.splitlines() if re.search(r"= (add|mul)\b.*<8 x i32>", l)]  # * 3 + 1 on the loaded lanes
  assert data_math and not any("nsw" in l for l in data_math), data_math
  np.testing.assert_array_equal(y.numpy(), (data.T.astype(np.int64) * 3 + 1).astype(np.int32))  # wraps as int32 does
