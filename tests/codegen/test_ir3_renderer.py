"""The IR3 renderer (codegen/ir3.py): tg kernels rendered as ir3 assembly, assembled by IR3Compiler and run by the ISA
model (drivers/mock/qcom/ir3_execute.run_dispatch, which also checks the sync flags and delay slots) over numpy-backed
memory at GPU addresses whose buffers straddle 4 GiB boundaries; results checked against numpy and Python's integers."""
import re
import numpy as np
import pytest
from ir.dtype import dtypes
from ir.ops import Ops
from ir.uop import UOp
from codegen.kernel import Opt, OptOps
from codegen.program import get_program
from codegen.ir3 import IR3Renderer, NUM_REGS
from codegen.ir3_compiler import IR3Compiler, read_lib
from drivers.mock.qcom.ir3_execute import GPUFault, ShaderHazard, run_dispatch
from tg import Tensor, Variable
from tg.numpy_bridge import decode, storage_dtype

class Memory:
  """GPU memory for run_dispatch: numpy byte arrays at fake 64-bit addresses."""
  def __init__(self): self.regions: list[tuple[int, np.ndarray]] = []
  def add(self, data: bytes) -> int:
    base = ((len(self.regions) + 1) << 33) - 64  # 64 bytes below a 4 GiB line: addresses carry into the high word
    self.regions.append((base, np.frombuffer(data, np.uint8).copy()))
    return base
  def find(self, addresses: np.ndarray, nbytes: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    addresses, hits, covered = addresses.astype(np.uint64), [], np.zeros(len(addresses), bool)
    for base, buf in self.regions:
      inside = (addresses >= base) & (addresses + nbytes <= base + len(buf))
      hits.append((inside, (addresses[inside] - np.uint64(base)).astype(np.int64)[:, None] + np.arange(nbytes), buf))
      covered |= inside
    if not covered.all(): raise GPUFault(int(addresses[~covered][0]), "outside every test buffer")
    return hits
  def load(self, addresses: np.ndarray, nbytes: int) -> np.ndarray:
    out = np.zeros((len(addresses), nbytes), np.uint8)
    for inside, at, buf in self.find(addresses, nbytes): out[inside] = buf[at]
    return out
  def store(self, addresses: np.ndarray, data: np.ndarray) -> None:
    for inside, at, buf in self.find(addresses, data.shape[1]): buf[at] = data[inside]

def dispatch(src: str, datas: list[bytes], vals: list[int] = (), groups=(1, 1, 1), local=(1, 1, 1), arch: str = "a630") -> list[np.ndarray]:
  """Assemble src and run it on buffers holding datas (consts: their address pairs, then vals); the buffers' bytes after."""
  lib = read_lib(IR3Compiler(arch).compile(src))
  mem = Memory()
  words = [w for d in datas for a in [mem.add(d)] for w in (a & 0xFFFFFFFF, a >> 32)] + [v & 0xFFFFFFFF for v in vals]
  consts = np.zeros(max(4 * lib.const_vec4, len(words)), np.uint32)
  consts[:len(words)] = words
  run_dispatch(lib.code, int(arch[1]), groups, local, consts, mem, lib.full_regs, lib.half_regs, lib.shared_bytes, 0, 4)
  return [buf for _, buf in mem.regions]

def execute(src: str, arrays: list[np.ndarray], groups=(1, 1, 1), local=(1, 1, 1)) -> list[np.ndarray]:
  """src run with arrays as its buffers (in order): the arrays' contents afterwards."""
  return [b.view(a.dtype).reshape(a.shape) for a, b in zip(arrays, dispatch(src, [a.tobytes() for a in arrays], groups=groups, local=local))]

def run(out: Tensor, opts=None, vals: dict | None = None, arch: str = "a630") -> tuple[str, np.ndarray]:
  """out's one kernel rendered for QCOM and executed by the ISA model: (its assembly, the output as numpy)."""
  (item,) = [it for it in out.schedule() if it.ast.op is Ops.SINK]
  spec = get_program(item.ast, IR3Renderer(arch), opts)
  bufs = [b.ensure_allocated() for b in item.bufs]
  after = dispatch(spec.src, [bufs[i].as_bytes() for i in spec.globals], [(vals or {})[v.arg[0]] for v in spec.vars], spec.global_size, spec.local_size, arch)
  return spec.src, decode(after[spec.globals.index(0)].view(storage_dtype(bufs[0].dtype)), bufs[0].dtype).reshape(out.shape)

RNG = np.random.default_rng(0)
I32 = np.iinfo(np.int32)

# ---- text: what the renderer promises without running anything ----
def test_renderer_attributes_and_arch():
  r = IR3Renderer("a630")
  assert (r.device, r.has_local, r.launch_dims, r.tensor_cores) == ("QCOM", True, 3, ())
  IR3Renderer("a740")
  with pytest.raises(ValueError, match="a6xx/a7xx"): IR3Renderer("sm_90")

@pytest.mark.parametrize("dt", [dtypes.int64, dtypes.uint64, dtypes.float64])
def test_refuses_64_bit_types(dt):
  (item,) = Tensor(np.arange(4)).cast(dt).add(1).schedule()[-1:]
  with pytest.raises(TypeError, match=f"no {dt!r}: QCOM runs no 64-bit"): get_program(item.ast, IR3Renderer())

def test_registers_stay_in_the_files_and_ids_come_from_r0_r1():
  a = RNG.standard_normal((8, 32)).astype(np.float32)
  src, got = run(Tensor(a).sum(1), opts=[Opt(OptOps.LOCAL, 0, 4)])  # 2 workgroups of 4 threads
  assert all(int(n) < NUM_REGS for n in re.findall(r"h?r(\d+)\.[xyzw]", src))
  np.testing.assert_allclose(got, a.sum(1), rtol=1e-5, atol=1e-5)
  datas = [np.zeros(8, np.float32).tobytes(), a.tobytes()]
  by_hand = dispatch(src, datas, groups=(2, 1, 1), local=(4, 1, 1))[0].view(np.float32)
  np.testing.assert_array_equal(by_hand, got)  # the same launch by hand gives the same answer ...
  lib = read_lib(IR3Compiler("a630").compile(src))
  mem = Memory()
  consts = np.array([w for d in datas for x in [mem.add(d)] for w in (x & 0xFFFFFFFF, x >> 32)] + [0] * 4, np.uint32)
  with pytest.raises(GPUFault):  # ... and with the ids in each other's registers it reads past the input
    run_dispatch(lib.code, 6, (2, 1, 1), (4, 1, 1), consts, mem, lib.full_regs, lib.half_regs, 0, 4, 0)

def test_out_of_registers_is_a_clear_error():
  g = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(400), arg=0)
  idxs = [UOp.const(dtypes.int32, i) for i in range(200)]
  loads = [UOp(Ops.LOAD, dtypes.float32, (g, i)) for i in idxs]
  sums = [loads[0] + loads[1]]
  for x in loads[2:]: sums.append(sums[-1] + x)  # every load is issued before the first add: 200 live values
  store = UOp(Ops.STORE, dtypes.void, (g, idxs[0], sums[-1]))
  with pytest.raises(RuntimeError, match="more than the 48 full registers"): IR3Renderer().render("big", [g, *idxs, *loads, *sums, store])

def test_no_tensor_cores():
  a = UOp(Ops.DEFINE_GLOBAL, dtypes.float16.ptr(16), arg=0)
  with pytest.raises(TypeError, match="tensor cores"): IR3Renderer().render("k", [a, UOp(Ops.WMMA, dtypes.float32.vec(4), (), None)])

# ---- executed by the ISA model ----
def test_elementwise_float32():
  a, b = RNG.standard_normal(300).astype(np.float32), RNG.uniform(0.5, 4, 300).astype(np.float32)
  x, y = Tensor(a), Tensor(b)
  _, got = run((x * y + x) / y - x.maximum(y) + y.sqrt() * y.log2() - (-x).exp2())
  np.testing.assert_allclose(got, (a * b + a) / b - np.maximum(a, b) + np.sqrt(b) * np.log2(b) - np.exp2(-a), rtol=1e-5, atol=1e-5)

def test_sin_reduces_big_arguments_and_max_propagates_nan():
  a = np.array([0.5, -3, 100, 1e4, -2.5e4, np.nan, 3, np.inf], np.float32)
  _, got = run(Tensor(a).sin())
  with np.errstate(invalid="ignore"): np.testing.assert_allclose(got, np.sin(a.astype(np.float64)), atol=2e-5)
  _, got = run(Tensor(a).maximum(Tensor(np.float32([1, np.nan, 0, 2, 0, 1, 5, 0]))))
  np.testing.assert_array_equal(got, np.maximum(a, [1, np.nan, 0, 2, 0, 1, 5, 0]))

def test_elementwise_float16_in_half_registers():
  a = RNG.uniform(-8, 8, 130).astype(np.float16)
  b = RNG.uniform(0.5, 8, 130).astype(np.float16)
  src, got = run(Tensor(a) * Tensor(b) + Tensor(a) - Tensor(b))
  assert re.search(r"mul\.f hr\d", src) and "ldg.f16 hr" in src
  np.testing.assert_array_equal(got, (a * b + a) - b)
  _, got = run(Tensor(a) / Tensor(b))
  np.testing.assert_allclose(got, a / b, rtol=1e-3)
  _, got = run(Tensor(a).cast("float32") * 2)
  np.testing.assert_array_equal(got, a.astype(np.float32) * 2)
  src, got = run((Tensor(a) > Tensor(b)).where(Tensor(a), Tensor(b).maximum(1.5).sqrt()))
  assert "sel.b16 hr" in src
  np.testing.assert_allclose(got, np.where(a > b, a, np.sqrt(np.maximum(b, np.float16(1.5)))), rtol=1e-3)

def test_int32_arithmetic_wraps():
  a = RNG.integers(I32.min, I32.max, 200, dtype=np.int32)
  b = RNG.integers(-1000, 1000, 200, dtype=np.int32)
  _, got = run(Tensor(a) * Tensor(b) + Tensor(a) - 7)
  np.testing.assert_array_equal(got, (a.astype(np.int64) * b + a - 7).astype(np.int32))
  _, got = run((Tensor(a) >> 3) ^ (Tensor(b) << 2) | 5)
  np.testing.assert_array_equal(got, (a >> 3) ^ (b << 2) | 5)

def test_narrow_ints_wrap_like_numpy():
  a = np.array([1, -2, 3, 127, -128, 50, 0, -1], np.int8)
  _, got = run(Tensor(a) * 100)
  np.testing.assert_array_equal(got, a * np.int8(100))
  u = np.array([250, 7, 0, 255], np.uint8)
  _, got = run(Tensor(u) + 10)
  np.testing.assert_array_equal(got, u + np.uint8(10))
  s = np.array([1, 2, -3, 30000], np.int16)
  _, got = run(Tensor(s) * 3)
  np.testing.assert_array_equal(got, s * np.int16(3))

EDGE = [0, 1, -1, 2, -2, 3, 7, -7, 10, 255, 256, 65535, 65536, 2**24 - 1, 2**24 + 1, 2**30, I32.max, I32.max - 1, I32.min, I32.min + 1, 123456789, -987654321]

def _trunc_div(a: int, b: int) -> int: return abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)

def _check_divmod(a: np.ndarray, b: np.ndarray, q: np.ndarray, r: np.ndarray) -> None:
  """`//` and `%` floor like Python's (the frontend builds them on the renderer's truncating IDIV/MOD): exact where
  b != 0; where b == 0 whatever the CPU device answers (the frontend's choice)."""
  cpu_q, cpu_r = (Tensor(a) // Tensor(b)).numpy(), (Tensor(a) % Tensor(b)).numpy()
  want = [(int(x) // int(y), int(x) % int(y)) if y else (int(cq), int(cr)) for x, y, cq, cr in zip(a, b, cpu_q, cpu_r)]
  np.testing.assert_array_equal(q, np.array([w[0] for w in want], np.int64).astype(a.dtype))
  np.testing.assert_array_equal(r, np.array([w[1] for w in want], np.int64).astype(a.dtype))

def test_signed_division_and_modulo_are_exact_on_edge_cases():
  a, b = (np.array(x, np.int32) for x in zip(*[(x, y) for x in EDGE for y in EDGE]))
  src, q = run(Tensor(a) // Tensor(b))
  assert "rcp" in src and "mulh" not in src  # a float estimate: ir3 has no integer divide and no high multiply
  _check_divmod(a, b, q, run(Tensor(a) % Tensor(b))[1])
  nz = b != 0
  _, q = run(Tensor(a[nz]).div(Tensor(b[nz]), rounding_mode="trunc"))
  np.testing.assert_array_equal(q, np.array([_trunc_div(int(x), int(y)) for x, y in zip(a[nz], b[nz])], np.int64).astype(np.int32))

def test_unsigned_division_is_exact():
  edge = np.array([0, 1, 2, 3, 255, 65535, 2**24 - 1, 2**24 + 1, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 2, 2**32 - 1, 3000000000], np.uint64)
  a = np.concatenate([np.repeat(edge, len(edge)), RNG.integers(0, 2**32, 1000, dtype=np.uint64)]).astype(np.uint32)
  b = np.concatenate([np.tile(edge, len(edge)), RNG.integers(1, 2**32, 500, dtype=np.uint64), RNG.integers(1, 300, 500, dtype=np.uint64)]).astype(np.uint32)
  _check_divmod(a, b, run(Tensor(a) // Tensor(b))[1], run(Tensor(a) % Tensor(b))[1])

def test_division_by_constants():
  a = np.array(EDGE, np.int32)
  for k in (1, 4, 3, 7, 1000, -4, -3):
    _, q = run(Tensor(a) // k)
    _, r = run(Tensor(a) % k)
    np.testing.assert_array_equal(q, np.array([int(x) // k for x in a], np.int64).astype(np.int32), err_msg=str(k))
    np.testing.assert_array_equal(r, np.array([int(x) % k for x in a], np.int64).astype(np.int32), err_msg=str(k))
    _, q = run(Tensor(a).div(k, rounding_mode="trunc"))
    np.testing.assert_array_equal(q, np.array([_trunc_div(int(x), k) for x in a], np.int64).astype(np.int32), err_msg=str(k))

def test_casts_truncate_and_saturate():
  f = np.array([1.9, -1.9, 3e9, -3e9, np.nan, np.inf, 300.5, -200.5, 0.5, -0.5], np.float32)
  want = {dtypes.int32: [1, -1, I32.max, I32.min, 0, I32.max, 300, -200, 0, 0], dtypes.int8: [1, -1, 127, -128, 0, 127, 127, -128, 0, 0],
          dtypes.uint8: [1, 0, 255, 0, 0, 255, 255, 0, 0, 0], dtypes.uint32: [1, 0, 3000000000, 0, 0, 2**32 - 1, 300, 0, 0, 0]}
  for dt, w in want.items():
    _, got = run(Tensor(f).cast(dt))
    np.testing.assert_array_equal(got, w, err_msg=str(dt))
  i = np.array([-5, 0, 1, 2**24 + 1, I32.min], np.int32)
  _, got = run(Tensor(i).cast("float32"))
  np.testing.assert_array_equal(got, i.astype(np.float32))
  _, got = run(Tensor(i).cast(dtypes.bool))
  np.testing.assert_array_equal(got, i != 0)
  _, got = run(Tensor(f).cast(dtypes.bool).cast(dtypes.int32))
  np.testing.assert_array_equal(got, (f != 0).astype(np.int32))  # NaN is true
  _, got = run(Tensor(np.float16([1.5, -2, 65504])).cast(dtypes.int16))
  np.testing.assert_array_equal(got, [1, -2, 32767])
  _, got = run((Tensor(np.float32([1.0, -2.5])) + 1).bitcast(dtypes.int32))
  np.testing.assert_array_equal(got, np.float32([2.0, -1.5]).view(np.int32))

def test_where_and_comparisons():
  a, b = RNG.standard_normal(100).astype(np.float32), RNG.standard_normal(100).astype(np.float32)
  x, y = Tensor(a), Tensor(b)
  _, got = run((x < y).where(x, -y) + (x != y).where(1.0, 2.0))
  np.testing.assert_array_equal(got, np.where(a < b, a, -b) + np.where(a != b, 1.0, 2.0).astype(np.float32))
  _, got = run((x > 0) & (y < 0.5))
  np.testing.assert_array_equal(got, (a > 0) & (b < 0.5))

def test_reduction_loops():
  a = RNG.standard_normal((16, 100)).astype(np.float32)
  _, got = run(Tensor(a).sum(1), opts=[])
  np.testing.assert_allclose(got, a.sum(1), rtol=1e-5, atol=1e-5)
  _, got = run(Tensor(a).max(1))
  np.testing.assert_array_equal(got, a.max(1))
  m = RNG.standard_normal((12, 20)).astype(np.float32)
  _, got = run(Tensor(m) @ Tensor(m.T))
  np.testing.assert_allclose(got, m @ m.T, rtol=1e-5, atol=1e-4)

def test_local_memory_and_barrier_reduction():
  a = RNG.standard_normal((4, 256)).astype(np.float32)
  src, got = run(Tensor(a).sum(1), opts=[Opt(OptOps.GROUP, 1, 16)])
  assert "fence.r.w\n(ss)nop\n(sy)bar.g" in src and "stl.f32" in src and "ldl.f32" in src and "@shared" in src
  np.testing.assert_allclose(got, a.sum(1), rtol=1e-5, atol=1e-4)

def test_variable_bounds_a_loop():
  a = RNG.standard_normal(20).astype(np.float32)
  src, got = run(Tensor(a)[:Variable("n", 1, 20).bind(13)].sum(), vals={"n": 13})
  assert "c1.x" in src  # the Variable follows the buffers' address pairs
  np.testing.assert_allclose(got, a[:13].sum(), rtol=1e-5)

def test_gated_stores_and_padding():
  a = RNG.standard_normal(30).astype(np.float32)
  _, got = run(Tensor(a).pad((3, 5)) * 2)
  np.testing.assert_array_equal(got, np.pad(a, (3, 5)) * 2)

def _lidx_program(body) -> list[UOp]:
  """out[lidx] = body(out, lidx) over 8 threads of one workgroup, as a linear program."""
  g = UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(8), arg=0)
  lidx = UOp(Ops.SPECIAL, dtypes.int32, (), ("lidx0", 8))
  return [g, lidx, *body(g, lidx)]

def test_gated_store_and_divergent_if():
  def gated(g, i):
    gate, val = i < 5, i * 3 + 1
    return [gate, val.src[0], val, UOp(Ops.STORE, dtypes.void, (g, i, val, gate))]
  src = IR3Renderer().render("gated", _lidx_program(gated))
  assert "(jp)" in src
  (got,) = execute(src, [np.full(8, -1, np.int32)], local=(8, 1, 1))
  np.testing.assert_array_equal(got, [1, 4, 7, 10, 13, -1, -1, -1])
  def branch(g, i):
    cond, val = (i % 3).ne(0), i + 100
    br = UOp(Ops.IF, dtypes.void, (cond,), 0)
    return [cond.src[0], cond, br, val, UOp(Ops.STORE, dtypes.void, (g, i, val)), UOp(Ops.ENDIF, dtypes.void, (br,)),
            UOp(Ops.STORE, dtypes.void, (g, UOp.const(dtypes.int32, 0), UOp.const(dtypes.int32, 7)))]
  (got,) = execute(IR3Renderer().render("branch", _lidx_program(branch)), [np.full(8, -1, np.int32)], local=(8, 1, 1))
  np.testing.assert_array_equal(got, [7, 101, 102, -1, 104, 105, -1, 107])

def test_bool_and_uint16_buffers_round_trip():
  m = np.array([True, False, True, True, False], bool)
  _, got = run(Tensor(m).where(Tensor(np.arange(5, dtype=np.uint16)), 9))
  np.testing.assert_array_equal(got, np.where(m, np.arange(5), 9).astype(np.uint16))
  _, got = run(~Tensor(m))
  np.testing.assert_array_equal(got, ~m)

@pytest.mark.parametrize("strip", [r"\(sy\)", r"\(ss\)", r"\(nop\d\) ", r"\(jp\)"])
def test_the_model_catches_a_renderer_that_drops_sync_flags_or_delays(strip):
  """The checks above mean something: without its (sy), (ss), (nopN) or (jp) the same program is refused."""
  a = RNG.standard_normal((4, 64)).astype(np.float32)
  (item,) = [it for it in Tensor(a).sum(1).exp2().schedule() if it.ast.op is Ops.SINK]
  src = get_program(item.ast, IR3Renderer(), [Opt(OptOps.GROUP, 1, 16)]).src
  assert re.search(strip, src)
  with pytest.raises(ShaderHazard): execute(re.sub(strip, "", src), [np.zeros(4, np.float32), a], groups=(4, 1, 1), local=(16, 1, 1))

def test_a_value_live_into_a_loop_keeps_its_register_for_the_whole_loop():
  g = UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(4), arg=0)
  zero, four = UOp.const(dtypes.int32, 0), UOp.const(dtypes.int32, 4)
  x = UOp(Ops.LOAD, dtypes.int32, (g, UOp.const(dtypes.int32, 1)))
  acc = UOp(Ops.DEFINE_ACC, dtypes.int32, (zero,), 0)
  rng = UOp(Ops.RANGE, dtypes.int32, (zero, four), 0)
  t = rng * 2
  total = UOp(Ops.LOAD, dtypes.int32, (acc,)) + (x + t)  # x's last use in the program text is here, inside the loop
  later = total * 3  # temporaries after it would take x's register if its interval ended there
  uops = [g, zero, four, x.src[1], x, acc, rng, t.src[1], t, x + t, total.src[0], total, later.src[1], later, UOp(Ops.STORE, dtypes.void, (acc, later)),
          UOp(Ops.ENDRANGE, dtypes.void, (rng,)), UOp(Ops.STORE, dtypes.void, (g, zero, UOp(Ops.LOAD, dtypes.int32, (acc,))))]
  uops.insert(-1, uops[-1].src[2])
  src = IR3Renderer().render("live", uops)
  xreg = re.search(r"ldg\.s32 (r\d+\.[xyzw])", src).group(1)
  body = src[src.index("loop"):src.index("br p0.x")]
  assert not re.search(rf"^\S*\s*[\w.]+ {re.escape(xreg)},", body, re.M), f"{xreg} is rewritten inside the loop"
  (got,) = execute(src, [np.array([0, 5, 0, 0], np.int32)])
  acc_value = 0
  for i in range(4): acc_value = (acc_value + 5 + 2 * i) * 3
  assert got[0] == acc_value

def test_a7xx_and_half_reductions():
  h = RNG.uniform(-2, 2, (8, 32)).astype(np.float16)
  _, got = run(Tensor(h).sum(1), arch="a740")
  np.testing.assert_allclose(got, h.astype(np.float32).sum(1), rtol=2e-2, atol=2e-2)
  _, got = run((Tensor(h) + 1).bitcast(dtypes.int16))
  np.testing.assert_array_equal(got, (h + np.float16(1)).view(np.int16))
  i = np.array([-3, 0, 7, 2049, -70000], np.int32)
  _, got = run(Tensor(i).cast(dtypes.float16) * 0.5)
  with np.errstate(over="ignore"): np.testing.assert_array_equal(got, i.astype(np.float16) * np.float16(0.5))  # -70000: -inf

def test_float_division_is_refined_and_keeps_the_special_cases():
  a = np.concatenate([RNG.uniform(-1e3, 1e3, 200), [1, 0, 5, np.inf, -np.inf, 3, 0, 7e30, np.nan]]).astype(np.float32)
  b = np.concatenate([RNG.uniform(-1e3, 1e3, 200), [1, 0, 0, 2, np.inf, np.inf, -0.0, 1e-8, 2]]).astype(np.float32)
  _, got = run(Tensor(a) / Tensor(b))
  with np.errstate(all="ignore"): want = a / b
  np.testing.assert_array_equal(got[200:], want[200:])
  assert np.abs(got[:200].view(np.int32) - want[:200].view(np.int32)).max() <= 1  # within an ulp of the rounded quotient
  _, got = run(Tensor(a[:200]) / Tensor(a[:200]))
  np.testing.assert_array_equal(got, np.ones(200, np.float32))

def test_bfloat16_rounds_like_the_cpu_and_fp8_goes_through_the_frontend():
  f = np.concatenate([RNG.uniform(-100, 100, 60), [np.nan, np.inf, 3.0e38, 1e-40]]).astype(np.float32)
  for expr in (lambda t: t.cast(dtypes.bfloat16), lambda t: (t.cast(dtypes.bfloat16) * 1.5 - 2).cast(dtypes.float32),
               lambda t: t.cast(dtypes.bfloat16).bitcast(dtypes.uint16), lambda t: t.cast(dtypes.fp8e4m3), lambda t: t.cast(dtypes.fp8e5m2).cast(dtypes.float32)):
    np.testing.assert_array_equal(run(expr(Tensor(f)))[1], expr(Tensor(f)).numpy())

def test_products_hold_with_mesas_16_bit_mull():
  """Mesa's mull.u multiplies the low 16 bits (nir_opcodes.py umul_low; 32-bit imul is lowered, ir3_nir_imul.py), as
  the model computes it: the renderer's products and divisions stay exact."""
  a = np.array(EDGE * 3, np.int32)
  b = np.roll(a, 5)
  _, got = run(Tensor(a) * Tensor(b) + Tensor(a) * 100003)
  np.testing.assert_array_equal(got, (a.astype(np.int64) * b + a.astype(np.int64) * 100003).astype(np.int32))
  nz = b != 0
  _, got = run(Tensor(a[nz]).div(Tensor(b[nz]), rounding_mode="trunc"))
  np.testing.assert_array_equal(got, np.array([_trunc_div(int(x), int(y)) for x, y in zip(a[nz], b[nz])], np.int64).astype(np.int32))
