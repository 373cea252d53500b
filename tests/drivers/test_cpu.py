"""The CPU device's JIT graphs: stretches of single-threaded kernels run as one call of a compiled batch function
(checked by what the compute engine is given and by the results against numpy); kernels with enough work for the
thread pool, and replays with new inputs and Variable values, stay right."""
import copy
import numpy as np
import pytest
from ir.switches import Context
from drivers.cpu import CHUNKS_PER_THREAD, BatchProgram, CPUProgram, chunk_count
from drivers.device import Device
from drivers.hcq import SoftwareEngine
from tg import Tensor, TinyJit, Variable

def executed(monkeypatch) -> list[list]:
  """The programs of each command list the CPU's compute engine is given from now on."""
  seen: list[list] = []
  submit = SoftwareEngine.submit
  def record(self, words):
    if self.dev is Device["CPU"] and self.name == "compute":
      seen.append([type(words[i + 1]) for i, w in enumerate(words) if isinstance(w, str) and w == "exec"])
    submit(self, words)
  monkeypatch.setattr(SoftwareEngine, "submit", record)
  return seen

def test_a_replay_runs_its_small_kernels_as_one_batch(monkeypatch):
  @TinyJit
  def step(x):
    for i in range(10): x = (x * 2 + i).contiguous()
    return x.realize()
  ref = lambda v: [v := v * 2 + i for i in range(10)][-1]
  for k in range(3): step(Tensor(np.full(4, k, np.float32), device="CPU"))
  seen = executed(monkeypatch)
  for k in range(3, 6):
    np.testing.assert_allclose(step(Tensor(np.full(4, k, np.float32), device="CPU")).numpy(), np.full(4, ref(float(k)), np.float32))
  assert seen[0] == [BatchProgram], seen  # ten kernels, one call, with each replay's new input
  assert seen[1:] and all(s == seen[0] for s in seen)

def test_kernels_that_use_the_thread_pool_run_on_their_own(monkeypatch):
  big = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)
  with Context(NUM_CPU_THREADS=2):
    @TinyJit
    def step(x, y):
      s = (x + 1).contiguous()
      s = (s * 3).contiguous()
      return ((y * 2).contiguous() + s.sum()).realize()  # the 1M-element kernel is split over threads
    for k in range(3): step(Tensor(np.full(4, k, np.float32), device="CPU"), Tensor(big, device="CPU"))
    seen = executed(monkeypatch)
    out = step(Tensor(np.full(4, 5.0, np.float32), device="CPU"), Tensor(big, device="CPU")).numpy()
  np.testing.assert_allclose(out, big * 2 + 4 * 18, rtol=1e-5)
  assert CPUProgram in seen[0] and BatchProgram in seen[0], seen

@pytest.mark.parametrize("n", [2, 7, 3])
def test_variable_values_reach_batched_kernels(n):
  a = np.arange(10, dtype=np.float32)
  @TinyJit
  def step(x, v):
    y = (x[:v] + 1).contiguous()
    return (y * v).contiguous().realize()
  x = Tensor(a, device="CPU").realize()
  for m in (4, 5): step(x, Variable("i", 1, 10).bind(m))  # captured with other values
  np.testing.assert_allclose(step(x, Variable("i", 1, 10).bind(n)).numpy(), (a[:n] + 1) * n)

def test_the_argv_entry_passes_every_parameter_type():
  """A kernel's argv entry (codegen/llvmir.py argv_entry) unpacks each 64-bit slot as its parameter's type: the
  kernel here stores what it received, compared with what was packed (drivers/cpu.py SLOT for floats)."""
  from codegen.llvmir import argv_entry
  from drivers.cpu import SLOT
  from drivers.elf import LoadedImage
  from drivers.system import ffi
  params = ["ptr %data0", "i32 %a", "float %b", "double %c", "i64 %d", "i32 %core_start", "i32 %core_end"]
  stores = [("i32", "%a", 0), ("float", "%b", 4), ("double", "%c", 8), ("i64", "%d", 16), ("i32", "%core_start", 24), ("i32", "%core_end", 28)]
  body = [line for i, (t, v, at) in enumerate(stores) for line in
          (f"  %p{i} = getelementptr i8, ptr %data0, i64 {at}", f"  store {t} {v}, ptr %p{i}")]
  src = "\n".join([f"define void @k({', '.join(params)}) {{", "entry:", *body, "  ret void", "}", ""]) + argv_entry("k", params)
  image = LoadedImage(Device["CPU"].compiler.compile(src))
  out = np.zeros(32, np.uint8)
  argv = np.array([out.ctypes.data, -7, SLOT["float"](1.5), SLOT["double"](-2.25), 2**40 + 3], np.int64)
  ffi.cast("void(*)(int64_t *, int32_t, int32_t)", image.symbols["k_argv"])(ffi.cast("int64_t *", argv.ctypes.data), 5, 9)
  assert out[0:4].view(np.int32)[0] == -7 and out[4:8].view(np.float32)[0] == 1.5 and out[8:16].view(np.float64)[0] == -2.25
  assert out[16:24].view(np.int64)[0] == 2**40 + 3 and out[24:32].view(np.int32).tolist() == [5, 9]

@pytest.mark.parametrize("threads", [2, 3, 4, 8])
def test_the_outer_loop_is_cut_into_alike_chunks_that_the_threads_share_evenly_where_it_can_be(threads):
  """For every iteration count up to 200: at most CHUNKS_PER_THREAD chunks a thread; where some count of chunks would
  hold the same number of iterations each and split evenly over the threads, the largest such count (12 iterations
  on 2 threads: 6 chunks of 2, not 8 of 1 or 2, which leave one thread two iterations more); else as many as allowed."""
  for n in range(1, 201):
    most = min(n, threads * CHUNKS_PER_THREAD)
    even = [c for c in range(1, most + 1) if n % c == 0 and c % threads == 0]
    assert chunk_count(n, threads) == (max(even) if even else most), (n, threads)
  assert chunk_count(12, 2) == 6 and chunk_count(64, 2) == 8 and chunk_count(7, 2) == 7

@pytest.mark.parametrize("cores", [1, 2, 3])
def test_a_first_axis_that_does_not_split_evenly_over_the_cores_is_shared_with_the_next(cores):
  """A 3x37 output on 2 cores: 3 rows would leave one thread two of them, so the threads share the 111 iterations of
  both axes as one flat range; any piece [start, end) of it, beginning and ending within rows, runs exactly those
  iterations. On 1 or 3 cores the rows split evenly and are the range alone."""
  from ir.ops import Ops
  from codegen.program import get_program
  x = np.arange(37 * 3, dtype=np.float32).reshape(37, 3)
  ast = [si.ast for si in (Tensor(x, device="CPU").T + 1).schedule() if si.ast.op is Ops.SINK][-1]
  renderer = copy.copy(Device["CPU"].renderer)
  renderer.cores = cores
  spec = get_program(ast, renderer, opts=[])
  flat = 3 % cores != 0
  assert spec.global_size[0] == (111 if flat else 3)
  prg = CPUProgram(Device["CPU"], spec.name, Device["CPU"].compiler.compile(spec.src), spec)
  iteration = np.arange(111).reshape(3, 37) if flat else np.repeat(np.arange(3), 37).reshape(3, 37)
  for start, end in [(0, spec.global_size[0]), (5, 40), (36, 38), (74, 111), (50, 50), (1, 2), (0, 1)]:
    if end > spec.global_size[0]: continue
    out = np.full((3, 37), -1, np.float32)
    prg.argv.fill([out, x])
    prg.entry(prg.argv.pointer, start, end)
    ran = (iteration >= start) & (iteration < end)
    np.testing.assert_array_equal(out, np.where(ran, x.T + 1, -1), err_msg=f"piece [{start}, {end})")
