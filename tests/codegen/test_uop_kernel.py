"""Kernels written directly as UOp ASTs, compiled and run on the CPU, checked against numpy."""
import numpy as np
import pytest
from ir.dtype import dtypes
from ir.ops import Ops
from ir.shapetracker import ShapeTracker
from ir.switches import Context
from ir.uop import UOp
from codegen.kernel import Kernel, Opt, OptOps, KernelOptError
from codegen.program import get_program
from drivers.device import Buffer, Device

def view(st): return UOp(Ops.VIEW, arg=st)
def glob(i, n, dt=dtypes.float): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), arg=i)

def run(ast, inputs, out_size, out_dtype=np.float32, opts=None, threads=None):
  dev = Device["CPU"]
  spec = get_program(ast, dev.renderer, opts)
  prg = dev.runtime(spec.name, dev.compiler.compile_cached(spec.src), spec)
  bufs = [Buffer("CPU", out_size, dtypes.float32 if out_dtype == np.float32 else dtypes.int32).ensure_allocated()]
  for x in inputs: bufs.append(Buffer("CPU", x.size, dtypes.float32 if x.dtype == np.float32 else dtypes.int32).copyin(memoryview(np.ascontiguousarray(x))))
  with Context(NUM_CPU_THREADS=threads or 1): prg(*[b._buf for b in bufs], global_size=spec.global_size)
  out = np.empty(out_size, out_dtype)
  bufs[0].copyout(memoryview(out))
  return out

@pytest.mark.parametrize("threads", [1, 2])
def test_a_times_b_plus_one_over_1m(threads):
  n = 1 << 20
  st = view(ShapeTracker.from_shape((n,)))
  a, b = UOp(Ops.LOAD, dtypes.float, (glob(1, n), st)), UOp(Ops.LOAD, dtypes.float, (glob(2, n), st))
  ast = UOp(Ops.STORE, src=(glob(0, n), st, a * b + UOp.const(dtypes.float, 1.0))).sink()
  x, y = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
  # float32 result within one rounding of the exact value (a fused multiply-add may round once instead of twice)
  np.testing.assert_allclose(run(ast, [x, y], n, threads=threads), x.astype(np.float64) * y + 1, rtol=2**-23, atol=0)

def sum_rows_ast(r, c):
  inp = view(ShapeTracker.from_shape((r, c)))
  out = view(ShapeTracker.from_shape((r, 1)))
  red = UOp(Ops.REDUCE_AXIS, dtypes.float, (UOp(Ops.LOAD, dtypes.float, (glob(1, r * c), inp)),), (Ops.ADD, (1,)))
  return UOp(Ops.STORE, src=(glob(0, r), out, red * 2.0)).sink()

@pytest.mark.parametrize("opts", [[], [Opt(OptOps.UPCAST, 0, 3)], [Opt(OptOps.UNROLL, 1, 5)], [Opt(OptOps.UPCAST, 0, 3), Opt(OptOps.UNROLL, 2, 5)]])
@pytest.mark.parametrize("threads", [1, 2])
def test_row_sum_with_opts(opts, threads):
  x = np.random.rand(9, 35).astype(np.float32)
  np.testing.assert_allclose(run(sum_rows_ast(9, 35), [x], 9, opts=opts, threads=threads), x.sum(1) * 2, rtol=1e-5)

def test_opt_errors():
  k = Kernel(sum_rows_ast(9, 35))
  with pytest.raises(KernelOptError): k.apply_opt(Opt(OptOps.UPCAST, 0, 4))   # 9 is not a multiple of 4
  with pytest.raises(KernelOptError): k.apply_opt(Opt(OptOps.UNROLL, 0, 3))   # axis 0 is not a reduction
  with pytest.raises(KernelOptError): k.apply_opt(Opt(OptOps.UPCAST, 7, 3))

def test_padded_view_and_int_math():
  # out[i] = (i < 3 ? 0 : x[i-3]) // 3 over int32, through a masked (padded) view
  n = 10
  padded = view(ShapeTracker.from_shape((n - 3,)).pad(((3, 0),)))
  x = UOp(Ops.LOAD, dtypes.int32, (glob(1, n - 3, dtypes.int32), padded))
  ast = UOp(Ops.STORE, src=(glob(0, n, dtypes.int32), view(ShapeTracker.from_shape((n,))), x // 3 + x % 3)).sink()
  inp = np.arange(-3, 4, dtype=np.int32)
  ref = np.concatenate([np.zeros(3, np.int32), np.trunc(inp / 3).astype(np.int32) + np.fmod(inp, 3)])
  np.testing.assert_array_equal(run(ast, [inp], n, np.int32), ref)

def test_debug6_prints_linear_uops(capsys):
  with Context(DEBUG=6): get_program(sum_rows_ast(4, 4), Device["CPU"].renderer, [])  # unoptimized: a reduction loop
  out = capsys.readouterr().out
  assert "RANGE" in out and "ENDRANGE" in out and "DEFINE_ACC" in out

def test_constant_false_lanes_of_a_bool_vector_stay_false():
  """The max_pool1d gradient's last kernel under UPCAST 2 + a whole UNROLL builds the bool vector <row < 4, false>.
  LLVM 22 made that AVX-512 mask (row < 4) ? 0xff : 0, so the second lane divided 0 by 0 and the gradient came out
  NaN; the renderer now builds bool vectors from bytes. Checked against the same kernel unoptimized."""
  from tg import Tensor
  from tg.realize import run_schedule
  x = Tensor(np.random.default_rng(0).uniform(-2, 2, (2, 3, 8)).astype(np.float32), requires_grad=True)
  x.max_pool1d(3, stride=2, padding=1).sum().backward()
  *before, last = x.grad.schedule()
  run_schedule(before)
  dev = Device["CPU"]
  outs = []
  for opts in ([], [Opt(OptOps.UPCAST, 2, 2), Opt(OptOps.UNROLL, 1, 0)]):
    spec = get_program(last.ast, dev.renderer, opts)
    out = Buffer("CPU", last.bufs[0].size, last.bufs[0].dtype).ensure_allocated()
    dev.runtime(spec.name, dev.compiler.compile_cached(spec.src), spec)(out._buf, *[b.ensure_allocated()._buf for b in last.bufs[1:]], global_size=spec.global_size, wait=True)
    outs.append(np.frombuffer(out.as_bytes(), np.float32))
  assert not np.isnan(outs[1]).any()
  np.testing.assert_array_equal(outs[1], outs[0])
