"""The WEBGPU device on a real WebGPU runtime (wgpu-native from the `wgpu` wheel, on Mesa's lavapipe here, which
.ci/run installs): every path of the WGSL renderer (codegen/wgsl.py) validated by naga and run by the adapter, checked
against numpy or the CPU device, and the runtime's errors. The whole op/nn/optim/JIT suites on DEV=WEBGPU are the slow
run in tests/tg/test_on_other_devices.py."""
import numpy as np
import pytest
from ir.switches import Context, SwitchError
from codegen.compiler import CompileError
from codegen.program import get_program
from codegen.wgsl import WGSLRenderer
from drivers.device import Buffer, Device, DeviceUnavailable, GlobalCounters
from tg import Tensor, TinyJit, Variable, dtypes

def webgpu_available() -> bool:
  try: Device["WEBGPU"]
  except DeviceUnavailable: return False
  return True

pytestmark = pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter (pip install wgpu; apt-get install mesa-vulkan-drivers for lavapipe)")

def on_gpu(*arrays: np.ndarray) -> list[Tensor]: return [Tensor(a, device="WEBGPU") for a in arrays]

def run_rendered(out: Tensor, renderer: WGSLRenderer, opts=None) -> tuple[str, Buffer]:
  """out's one kernel rendered by `renderer` and run on the device: (its WGSL, its output buffer)."""
  (item,) = out.schedule()
  spec = get_program(item.ast, renderer, opts)
  dev = Device["WEBGPU"]
  prg = dev.runtime(spec.name, dev.compiler.compile(spec.src), spec)
  bufs = [b.ensure_allocated() for b in item.bufs]
  prg(*[b._buf for b in bufs], global_size=spec.global_size, local_size=spec.local_size, wait=True)
  return spec.src, bufs[0]

def test_float_math_matches_numpy():
  a = np.random.default_rng(0).uniform(0.1, 4, 257).astype(np.float32)
  (x,) = on_gpu(a)
  np.testing.assert_allclose(((x.exp2() + x.log2()) * x.sin() / x.sqrt() - x.reciprocal()).numpy(),
                             (np.exp2(a) + np.log2(a)) * np.sin(a) / np.sqrt(a) - 1 / a, rtol=1e-5, atol=1e-6)

def test_integer_division_shifts_and_wrapping_do_not_trap():
  a = np.array([7, -7, np.iinfo(np.int32).min, 5, 0], np.int32)
  b = np.array([2, 2, -1, 0, 3], np.int32)
  x, y = on_gpu(a, b)
  np.testing.assert_array_equal((x // y).numpy(), (Tensor(a) // Tensor(b)).numpy())  # the CPU's answer, INT_MIN // -1 included
  np.testing.assert_array_equal((x % y).numpy(), (Tensor(a) % Tensor(b)).numpy())
  np.testing.assert_array_equal((x << 3).numpy(), a << 3)
  np.testing.assert_array_equal((x >> Tensor(np.array([1, 31, 0, 3, 2], np.int32), device="WEBGPU")).numpy(), a >> [1, 31, 0, 3, 2])
  np.testing.assert_array_equal((Tensor(np.array([250, 7], np.uint8), device="WEBGPU") + 10).numpy(), np.array([4, 17], np.uint8))
  np.testing.assert_array_equal((Tensor(np.array([1, -2, 3], np.int8), device="WEBGPU") * 100).numpy(), np.array([100, 56, 44], np.int8))
  np.testing.assert_array_equal((Tensor(np.array([1, 2, -3], np.int16), device="WEBGPU") * 30000).numpy(), np.array([30000, -5536, -24464], np.int16))
  np.testing.assert_array_equal((-Tensor(np.array([0, 1, 255], np.uint8), device="WEBGPU")).numpy(), np.array([0, 255, 1], np.uint8))

def test_float_to_int_saturates_and_nan_is_zero():
  a = np.array([1.9, -1.9, 3e9, -3e9, np.nan, np.inf, 300.5, -200.5], np.float32)
  for dt in (dtypes.int32, dtypes.uint32, dtypes.int8, dtypes.uint8, dtypes.int16):
    np.testing.assert_array_equal(Tensor(a, device="WEBGPU").cast(dt).numpy(), Tensor(a).cast(dt).numpy(), err_msg=str(dt))
  np.testing.assert_array_equal(Tensor(a, device="WEBGPU").cast(dtypes.int8).numpy(), [1, -1, 127, -128, 0, 127, 127, -128])

def test_max_propagates_nan_and_bools_round_trip():
  a = np.array([1.0, np.nan, -2.0, 3.0], np.float32)
  x = Tensor(a, device="WEBGPU")
  np.testing.assert_array_equal(x.maximum(0.5).numpy(), np.maximum(a, 0.5))
  assert np.isnan(x.max().item())
  m = x > 0.5
  np.testing.assert_array_equal(m.numpy(), a > 0.5)
  np.testing.assert_array_equal(m.where(x, -x).numpy(), np.where(a > 0.5, a, -a))
  np.testing.assert_array_equal((m & (x < 2)).numpy(), (a > 0.5) & (a < 2))
  np.testing.assert_array_equal(Tensor(np.array([-np.inf, np.inf, np.nan], np.float32), device="WEBGPU").numpy(), [-np.inf, np.inf, np.nan])

def test_half_and_bfloat16_round_like_the_other_devices():
  assert Device["WEBGPU"].renderer.fp16, "lavapipe has shader-f16: half is native"
  a = np.random.default_rng(1).uniform(-100, 100, 64).astype(np.float16)
  x = Tensor(a, device="WEBGPU")
  np.testing.assert_array_equal((x * 3 + 1).numpy(), a * np.float16(3) + np.float16(1))
  np.testing.assert_array_equal(x.cast(dtypes.float32).numpy(), a.astype(np.float32))
  np.testing.assert_array_equal(x.bitcast(dtypes.uint16).numpy(), a.view(np.uint16))
  f = np.array([1e-8, 65519, 65520, 1e5, -1e6, 2.0**-25, 3 * 2.0**-25, np.nan, -np.inf], np.float32)
  with np.errstate(over="ignore"): np.testing.assert_array_equal(Tensor(f, device="WEBGPU").cast(dtypes.float16).numpy().view(np.uint16), f.astype(np.float16).view(np.uint16))
  f = a.astype(np.float32)
  bf_gpu, bf_cpu = Tensor(f, device="WEBGPU").cast(dtypes.bfloat16), Tensor(f).cast(dtypes.bfloat16)
  np.testing.assert_array_equal((bf_gpu * 1.5 - 2).cast(dtypes.float32).numpy(), (bf_cpu * 1.5 - 2).cast(dtypes.float32).numpy())
  np.testing.assert_array_equal(bf_gpu.bitcast(dtypes.int16).numpy(), bf_cpu.bitcast(dtypes.int16).numpy())

def test_half_without_shader_f16_is_a_storage_type_rounded_exactly():
  renderer = WGSLRenderer(fp16=False, max_workgroups=Device["WEBGPU"].renderer.max_workgroups)
  h = np.array([1.5, -2.25, 65504, 1e-7, 6e-5, np.inf, np.nan, -0.0, 3.14159, 60000, 2.0**-24], np.float16)
  src, out = run_rendered(Tensor(h, device="WEBGPU") * 1.5 + 1, renderer)
  assert "enable f16" not in src and "tg_f16" in src
  with np.errstate(over="ignore"): np.testing.assert_array_equal(np.frombuffer(out.as_bytes(), np.float16), h * np.float16(1.5) + np.float16(1))
  f = np.array([1e-8, 1e-6, 65519, 65520, 1e5, -3.3333, 2.0**-24, 2.0**-25, 3 * 2.0**-25, np.nan, -np.inf, 1 + 2.0**-11], np.float32)
  _, out = run_rendered(Tensor(f, device="WEBGPU").cast(dtypes.float16), renderer)  # round to nearest even, overflow, subnormals
  with np.errstate(over="ignore"): np.testing.assert_array_equal(np.frombuffer(out.as_bytes(), np.uint16), f.astype(np.float16).view(np.uint16))
  _, out = run_rendered(Tensor(h, device="WEBGPU").cast(dtypes.float32), renderer)
  np.testing.assert_array_equal(np.frombuffer(out.as_bytes(), np.float32), h.astype(np.float32))
  _, out = run_rendered(Tensor(h, device="WEBGPU").bitcast(dtypes.int16) + 0, renderer)
  np.testing.assert_array_equal(np.frombuffer(out.as_bytes(), np.int16), h.view(np.int16))

def test_sub_word_stores_by_neighbouring_invocations_keep_every_byte():
  # NOOPT: one element per workgroup, so the four bytes of a word are written by four workgroups that run concurrently
  a = np.random.default_rng(4).standard_normal(1 << 16).astype(np.float32)
  (x,) = on_gpu(a)
  src, out = run_rendered(x > 0, Device["WEBGPU"].renderer, opts=[])
  assert "array<atomic<u32>>" in src and "atomicAnd" in src and "atomicOr" in src
  np.testing.assert_array_equal(np.frombuffer(out.as_bytes(), np.bool_), a > 0)
  with Context(NOOPT=1):
    np.testing.assert_array_equal((x * 100).cast(dtypes.int8).numpy(), Tensor(a * 100).cast(dtypes.int8).numpy())
    np.testing.assert_array_equal((x * 1000).cast(dtypes.uint16).numpy(), Tensor(a * 1000).cast(dtypes.uint16).numpy())

def test_partial_words_copy_in_and_out_through_views():
  base = Buffer("WEBGPU", 11, dtypes.uint8).copyin(memoryview(np.arange(11, dtype=np.uint8)))
  view = base.view(5, dtypes.uint8, 3)  # bytes 3..7: parts of two words
  view.ensure_allocated().copyin(memoryview(np.full(5, 200, np.uint8)))
  assert np.frombuffer(view.as_bytes(), np.uint8).tolist() == [200] * 5
  assert np.frombuffer(base.as_bytes(), np.uint8).tolist() == [0, 1, 2, 200, 200, 200, 200, 200, 8, 9, 10]

def test_reductions_with_workgroups_and_matmul():
  rng = np.random.default_rng(2)
  a, b = rng.standard_normal((128, 1000)).astype(np.float32), rng.standard_normal((64, 48)).astype(np.float32)
  x, w = on_gpu(a, b)
  np.testing.assert_allclose(x.sum(1).numpy(), a.astype(np.float64).sum(1), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(x.max(0).numpy(), a.max(0))
  np.testing.assert_allclose((x[:, :64] @ w).numpy(), a[:, :64].astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
  with Context(SPLIT_REDUCEOP=0): src, out = run_rendered(x.sum(), Device["WEBGPU"].renderer)  # one output: a workgroup shares the reduction
  assert "var<workgroup>" in src and "workgroupBarrier()" in src
  np.testing.assert_allclose(np.frombuffer(out.as_bytes(), np.float32), a.astype(np.float64).sum(), rtol=1e-4)

def test_a_launch_wider_than_the_adapter_allows_is_renumbered():
  most = Device["WEBGPU"].renderer.max_workgroups
  a = np.arange(4 * most + 3, dtype=np.float32)
  (x,) = on_gpu(a)
  src, out = run_rendered(x * 2 + 1, Device["WEBGPU"].renderer, opts=[])  # one workgroup per element
  assert "nwg.x" in src
  np.testing.assert_array_equal(np.frombuffer(out.as_bytes(), np.float32), a * 2 + 1)

def test_variables_and_float_arguments_are_a_uniform_struct():
  t = Tensor(np.arange(10, dtype=np.float32), device="WEBGPU")
  i = Variable("i", 1, 10)
  assert [t[:i.bind(n)].sum().item() for n in (3, 7, 10)] == [3, 21, 45]
  outs = [(t * lr).numpy() for lr in (0.5, 0.25, 0.125)]  # the third call runs the program taking lr as an argument
  np.testing.assert_array_equal(outs, [np.arange(10, dtype=np.float32) * lr for lr in (0.5, 0.25, 0.125)])

def test_training_step_under_tinyjit():
  rng = np.random.default_rng(3)
  w0 = rng.standard_normal((8, 4)).astype(np.float32)
  w = Tensor(w0, device="WEBGPU", requires_grad=True)
  @TinyJit
  def step(x: Tensor) -> Tensor:
    loss = (x @ w).relu().sum()
    w.grad = None
    loss.backward()
    w.assign(w - 0.1 * w.grad).realize()
    return loss.realize()
  xs = [rng.standard_normal((2, 8)).astype(np.float32) for _ in range(4)]
  ref = w0.astype(np.float64)
  for xa in xs:
    step(Tensor(xa, device="WEBGPU"))
    h = xa @ ref
    ref = ref - 0.1 * xa.T @ (h > 0).astype(np.float64)
  np.testing.assert_allclose(w.numpy(), ref, rtol=1e-5, atol=1e-5)

def test_64_bit_dtypes_are_refused():
  for dt in (dtypes.int64, dtypes.uint64, dtypes.float64):
    with pytest.raises(TypeError, match=f"WEBGPU can't hold {dt}"): Tensor([1, 2], dtype=dt, device="WEBGPU").realize()
  (item,) = (Tensor([1, 2], dtype=dtypes.int32).cast(dtypes.int64) * (2**40)).schedule()  # a CPU kernel, rendered as WGSL
  with pytest.raises(TypeError, match="WGSL has no dtypes.long"): get_program(item.ast, WGSLRenderer())

def test_a_buffer_view_is_a_kernel_argument_at_the_adapters_binding_alignment():
  dev = Device["WEBGPU"]
  align = dev.limits.minStorageBufferOffsetAlignment
  base = Buffer("WEBGPU", 1024, dtypes.float32).copyin(memoryview(np.arange(1024, dtype=np.float32)))
  (item,) = (Tensor(np.zeros(16, np.float32), device="WEBGPU") + 1).schedule()
  spec = get_program(item.ast, dev.renderer)
  prg = dev.runtime(spec.name, dev.compiler.compile(spec.src), spec)
  out = Buffer("WEBGPU", 16, dtypes.float32).ensure_allocated()
  prg(out._buf, base.view(16, dtypes.float32, align).ensure_allocated()._buf, global_size=spec.global_size, local_size=spec.local_size, wait=True)
  np.testing.assert_array_equal(np.frombuffer(out.as_bytes(), np.float32), np.arange(16) + align // 4 + 1)
  with pytest.raises(ValueError, match=f"byte offset 4 to a kernel .*multiples of {align}"):
    prg(out._buf, base.view(16, dtypes.float32, 4).ensure_allocated()._buf, global_size=spec.global_size, local_size=spec.local_size)

def test_compile_errors_carry_the_runtime_message_and_timing_uses_timestamps():
  with pytest.raises(CompileError, match=r"(?s)WGSL compile failed on WEBGPU.*nothere.*--- source ---"):
    Device["WEBGPU"].compiler.compile("@compute @workgroup_size(1) fn broken() { let a = nothere; }")
  assert Device["WEBGPU"].timestamps is not None  # lavapipe has timestamp queries
  with Context(DEBUG=2):
    before = GlobalCounters.time_sum_s
    (Tensor(np.ones(1 << 16, np.float32), device="WEBGPU") * 2).realize()
    assert GlobalCounters.time_sum_s > before

def test_missing_library_adapter_or_backend_says_why(monkeypatch):
  from drivers import webgpu
  with pytest.raises(DeviceUnavailable, match=r"WEBGPU unavailable: WEBGPU:1 asked for"): webgpu.WebGPUDevice("WEBGPU:1")
  with Context(WEBGPU_BACKEND="WGPUBackendType_Metal"), pytest.raises(DeviceUnavailable, match=r"WEBGPU unavailable: no adapter on WGPUBackendType_Metal"):
    webgpu.WebGPUDevice("WEBGPU")
  with Context(WEBGPU_BACKEND="Vulkan"), pytest.raises(SwitchError, match="WEBGPU_BACKEND='Vulkan' is not a backend; choose one of .*WGPUBackendType_Vulkan"):
    webgpu.WebGPUDevice("WEBGPU")
  with Context(WEBGPU_BACKEND="WGPUBackendType_Vulkan"): assert webgpu.WebGPUDevice("WEBGPU").backend == "Vulkan"
  monkeypatch.setattr(webgpu, "library_path", lambda: None)
  with pytest.raises(DeviceUnavailable, match=r"WEBGPU unavailable: wgpu-native not found \(pip install wgpu"): webgpu.WebGPUDevice("WEBGPU")

def test_a_cpu_adapter_is_never_the_default():
  assert Device["WEBGPU"].host_cpu  # lavapipe reports a CPU adapter
  import os, subprocess, sys
  env = {k: v for k, v in os.environ.items() if k != "DEV"}
  code = "from drivers import device; device.ALL_DEVICES[:] = ['WEBGPU', 'CPU']; print(device.Device.DEFAULT)"
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
  assert out.stdout.split() == ["CPU"]
