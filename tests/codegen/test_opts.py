"""Every optimization action computes what the unoptimized kernel computes, on shapes that are not multiples of the
tile sizes; BEAM search and the disk caches behave."""
import os, pathlib, sqlite3, subprocess, sys
import numpy as np
import pytest
from tg import Tensor, Device, Context
from ir.ops import Ops, STORED_ZEROS
from codegen import diskcache
from codegen.kernel import Kernel, KernelOptError, Opt, OptOps
from codegen.program import get_program
from drivers.device import Buffer

ROOT = pathlib.Path(__file__).parents[2]

def run_with(device: str, t: Tensor, opts) -> np.ndarray:
  (item,) = [i for i in t.schedule() if i.ast.op is Ops.SINK]
  dev = Device[device]
  spec = get_program(item.ast, dev.renderer, opts)
  prg = dev.runtime(spec.name, dev.compiler.compile(spec.src), spec)
  out = Buffer(device, item.bufs[0].size, item.bufs[0].dtype).ensure_allocated()
  bufs = [out] + [b.ensure_allocated() for b in item.bufs[1:]]
  prg(*[b._buf for b in bufs], global_size=spec.global_size, local_size=spec.local_size, wait=True)
  return np.frombuffer(out.as_bytes(), np.float32)

def matmul(device):  # 7x13 @ 13x10: no dimension is a multiple of 4 or 8
  rng = np.random.default_rng(0)
  a, b = (Tensor(rng.random(s, dtype=np.float32), device=device).realize() for s in ((7, 13), (13, 10)))
  return a @ b

CASES = {
  "CPU": [[Opt(OptOps.PADTO, 0, 4), Opt(OptOps.UPCAST, 0, 4)],
          [Opt(OptOps.PADTO, 1, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.VECTORIZE, 2, 0)],
          [Opt(OptOps.PADTO, 2, 8), Opt(OptOps.UNROLL, 2, 8), Opt(OptOps.VECTORIZE, 3, 0)],
          [Opt(OptOps.UNROLL, 2, 0)], [Opt(OptOps.THREAD, 1, 0)], [Opt(OptOps.PADTO, 1, 4), Opt(OptOps.THREAD, 1, 4)],
          [Opt(OptOps.UPCAST, 1, 2), Opt(OptOps.UPCAST, 0, 7), Opt(OptOps.UNROLL, 3, 13)]],
  "PYTHON": [[Opt(OptOps.LOCAL, 1, 2)], [Opt(OptOps.LOCAL, 0, 7)], [Opt(OptOps.GROUP, 2, 0)], [Opt(OptOps.PADTO, 2, 4), Opt(OptOps.GROUP, 2, 4)],
             [Opt(OptOps.LOCAL, 0, 7), Opt(OptOps.GROUP, 2, 0)], [Opt(OptOps.PADTO, 1, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.VECTORIZE, 2, 0)]],
}

@pytest.mark.parametrize("device,opts", [(d, o) for d, cases in CASES.items() for o in cases], ids=lambda x: str(x))
def test_action_matches_unoptimized(device, opts):
  t = matmul(device)
  np.testing.assert_allclose(run_with(device, t, opts), run_with(device, t, []), rtol=1e-6, atol=1e-6)

@pytest.mark.parametrize("size,opts", [(13, [Opt(OptOps.GROUP, 1, 0)]), (64, [Opt(OptOps.GROUP, 1, 16)]),
                                       (48, [Opt(OptOps.LOCAL, 0, 3), Opt(OptOps.GROUP, 2, 0)])], ids=str)
@pytest.mark.parametrize("op", ["sum", "max"])
def test_a_grouped_reduction_combines_its_partials_as_a_tree(size, opts, op):
  """A workgroup sharing a reduction folds its G partials in ceil(log2 G) levels, each after a barrier, with no loop
  (one thread summing them one by one took G steps); odd counts fold too."""
  x = np.random.default_rng(3).standard_normal((6, size)).astype(np.float32)
  t = getattr(Tensor(x, device="PYTHON").realize(), op)(1)
  (item,) = [i for i in t.schedule() if i.ast.op is Ops.SINK]
  spec = get_program(item.ast, Device["PYTHON"].renderer, opts)
  group = opts[-1].amt or size
  assert sum(u.op is Ops.BARRIER for u in spec.uops) == int(np.ceil(np.log2(group)))
  assert (Ops.RANGE in {u.op for u in spec.uops}) == (group != size)  # only the threads' own steps loop
  np.testing.assert_allclose(run_with("PYTHON", t, opts), getattr(x, op)(1), rtol=1e-5)

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_heuristics_match_unoptimized(device):
  rng = np.random.default_rng(1)
  x = Tensor(rng.random((3, 5, 11, 9), dtype=np.float32), device=device).realize()
  w = Tensor(rng.random((6, 5, 3, 3), dtype=np.float32), device=device).realize()
  for t in (x.conv2d(w), x.sum((0, 2)), (x * 2 + 1).exp(), x.max(-1), matmul(device)):
    np.testing.assert_allclose(run_with(device, t, None), run_with(device, t, []), rtol=1e-5, atol=1e-6)

def test_invalid_actions_raise_and_change_nothing():
  (item,) = matmul("CPU").schedule()
  k = Kernel(item.ast, Device["CPU"].renderer)
  shape = k.full_shape
  for opt in (Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UNROLL, 0, 2), Opt(OptOps.VECTORIZE, 0, 0), Opt(OptOps.LOCAL, 0, 7),
              Opt(OptOps.GROUP, 2, 13), Opt(OptOps.PADTO, 0, 7), Opt(OptOps.UPCAST, 9, 2)):
    with pytest.raises(KernelOptError): k.apply_opt(opt)
  assert k.full_shape == shape and k.applied_opts == []

def test_padding_a_max_reduction_is_refused():
  (item,) = Tensor(np.random.rand(5, 13).astype(np.float32)).realize().max(1).schedule()
  k = Kernel(item.ast, Device["CPU"].renderer)
  with pytest.raises(KernelOptError, match="sum"): k.apply_opt(Opt(OptOps.PADTO, 1, 4))

@pytest.fixture
def cachedb(tmp_path, monkeypatch):
  monkeypatch.setenv("CACHEDB", str(tmp_path / "cache.db"))
  return tmp_path / "cache.db"

def test_beam_result_is_correct_and_cached(cachedb, monkeypatch):
  from codegen import search
  calls = []
  real = search.beam_search
  def counting(*args, **kw):
    calls.append(1)
    return real(*args, **kw)
  t = matmul("CPU")
  ref = t.numpy()
  with Context(BEAM=2):
    np.testing.assert_allclose(matmul("CPU").numpy(), ref, rtol=1e-6)
  timed = []
  monkeypatch.setattr(search, "estimate", lambda uops: 0.0)
  (item,) = matmul("CPU").schedule()
  def time_opts(opts):
    timed.append(opts)
    return 1.0 + len(opts)
  first = real(item.ast, Device["CPU"].renderer, time_opts, 2, "test")
  assert first == [] and timed
  timed.clear()
  assert real(item.ast, Device["CPU"].renderer, time_opts, 2, "test") == [] and not timed, "second search comes from the disk cache"

def test_beam_times_candidates_on_memory_it_has_written(monkeypatch):
  """Untouched host pages all read as one shared zero page, which stays in cache and flatters memory-bound
  candidates: BEAM writes each of its timing buffers in full before it times anything."""
  from codegen import search
  from tg import realize
  (item,) = matmul("CPU").schedule()
  events: list = []
  copyin = Buffer.copyin
  def recording_copyin(self, src):
    events.append(("write", self.nbytes, memoryview(src).nbytes))
    return copyin(self, src)
  monkeypatch.setattr(Buffer, "copyin", recording_copyin)
  def one_candidate(ast, renderer, time_opts, width, key, prepare, preview):
    time_opts([])
    events.append(("timed",))
    return []
  monkeypatch.setattr(search, "beam_search", one_candidate)
  realize.beam_opts(Device["CPU"], item.ast)
  # out 7x10, a 7x13, b 13x10 float32, each written whole, all before the candidate is timed
  assert sorted(events[:-1]) == sorted(("write", 4 * n, 4 * n) for n in (70, 91, 130)) and events[-1] == ("timed",), events

def test_beam_hands_each_round_to_prepare_before_timing_it(cachedb, monkeypatch):
  from codegen import search
  monkeypatch.setattr(search, "estimate", lambda uops: 0.0)
  (item,) = matmul("CPU").schedule()
  events: list = []
  def time_opts(opts):
    events.append(("timed", tuple(opts)))
    return 1.0 / (1 + len(opts))  # longer sequences are faster: the search goes several rounds
  search.beam_search(item.ast, Device["CPU"].renderer, time_opts, 2, "prepared", prepare=lambda cands: events.append(("prepare", [tuple(opts) for opts, _, _ in cands])))
  rounds = [i for i, e in enumerate(events) if e[0] == "prepare"]
  assert len(rounds) >= 3
  for at, end in zip(rounds, rounds[1:]):  # each round: prepare, then exactly its candidates timed
    assert [e[1] for e in events[at + 1:end]] == events[at][1]
  last = rounds[-1]  # the rematch of the winner and the heuristics' kernel, prepared too, alternately
  assert [e[1] for e in events[last + 1:]] == events[last][1] * search.REMATCH_ROUNDS

def test_beam_times_a_far_slower_candidate_once(monkeypatch):
  from codegen import search
  from tg import realize
  (item,) = matmul("CPU").schedule()
  dev, runs, made = Device["CPU"], [], []
  class Timed:  # a program whose every run takes the time given to the n-th one made
    def __init__(self, seconds): self.seconds = seconds
    def __call__(self, *args, **kwargs):
      runs.append(self.seconds)
      return self.seconds
  seconds = [1e-4, 5e-4, 1.5e-4, 2e-3, 5e-3, 3e-3]
  monkeypatch.setattr(dev.compiler, "compile_taken_back", lambda src: b"")
  monkeypatch.setattr(dev, "runtime", lambda name, lib, spec: made.append(1) or Timed(seconds[len(made) - 1]))
  def three_candidates(ast, renderer, time_opts, width, key, prepare, preview):
    return [time_opts([]) for _ in range(3)]
  monkeypatch.setattr(search, "beam_search", three_candidates)
  assert realize.beam_opts(dev, item.ast) == seconds[:3]
  assert runs == [1e-4] * 3 + [5e-4] + [1.5e-4] * 3  # 5e-4 is more than twice the fastest so far: one run is enough
  runs.clear()
  assert realize.beam_opts(dev, item.ast) == seconds[3:]
  assert runs == [2e-3] * 2 + [5e-3] + [3e-3] * 2  # runs over LONG_RUN_S (1 ms) vary little: two of them

def test_beam_never_returns_worse_than_the_heuristics(cachedb):
  from codegen.heuristic import hand_coded_optimizations
  from codegen.search import beam_search
  (item,) = matmul("CPU").schedule()
  renderer = Device["CPU"].renderer
  heuristic = hand_coded_optimizations(Kernel(item.ast, renderer), renderer.vector_width, renderer.vector_registers)
  assert heuristic, "a matmul gets optimized by the heuristics"
  def time_opts(opts): return 1.0 if opts == heuristic else 2.0  # every search step is slower than the heuristics
  assert beam_search(item.ast, renderer, time_opts, 2, "seeded") == heuristic

def test_beam_keeps_the_heuristics_kernel_over_a_winner_that_was_lucky_once(cachedb):
  """A candidate timed fast once but no faster than the heuristics' kernel when timed again loses the rematch; one that
  is faster every time keeps its win."""
  from codegen.heuristic import hand_coded_optimizations
  from codegen.search import REMATCH_ROUNDS, beam_search
  (item,) = matmul("CPU").schedule()
  renderer = Device["CPU"].renderer
  heuristic = hand_coded_optimizations(Kernel(item.ast, renderer), renderer.vector_width, renderer.vector_registers)
  seen: dict[tuple, int] = {}
  def lucky_once(opts):
    seen[tuple(opts)] = seen.get(tuple(opts), 0) + 1
    if opts == heuristic: return 1e-3
    return 0.5e-3 if seen[tuple(opts)] == 1 and len(opts) == len(heuristic) + 1 else 1.01e-3
  assert beam_search(item.ast, renderer, lucky_once, 2, "lucky") == heuristic
  assert seen[tuple(heuristic)] == 1 + REMATCH_ROUNDS
  def always_faster(opts): return 1e-3 if opts == heuristic else 0.5e-3 if len(opts) > len(heuristic) else 2e-3
  found = beam_search(item.ast, renderer, always_faster, 2, "faster")
  assert found != heuristic and found[:len(heuristic)] == heuristic

def test_beam_grows_the_heuristics_tile_beyond_max_upcast(cachedb):
  """Candidates may have as many upcast positions as the heuristics' tile, where that is over MAX_UPCAST (64): the
  AVX-512 matmul tile of 16 lanes x 8 rows x 2 columns (256 positions) is searched on from, not refused."""
  from codegen.heuristic import hand_coded_optimizations
  from codegen.llvmir import LLVMRenderer
  from codegen.search import beam_search
  renderer = LLVMRenderer("+avx512f")
  (item,) = (Tensor.empty(256, 256) @ Tensor.empty(256, 256)).schedule()
  heuristic = hand_coded_optimizations(Kernel(item.ast, renderer), renderer.vector_width, renderer.vector_registers)
  timed = []
  def time_opts(opts):
    timed.append(opts)
    return 1e-3 / (1 + len(opts))  # every action makes it faster
  with Context(BEAM_ESTIMATE=0): beam_search(item.ast, renderer, time_opts, 1, "avx-512 matmul")
  grown = [opts for opts in timed if len(opts) > len(heuristic) and opts[:len(heuristic)] == heuristic]
  assert timed[0] == heuristic and grown, timed

def test_beam_candidates_stay_within_max_positions(cachedb):
  """A candidate's upcast x unrolled positions are at most MAX_POSITIONS (or the heuristics' own): lowering time grows
  with them. An AVX2 matmul's heuristic kernel has 64 x 2; unrolling its reduction by 16 more would make 2048."""
  from codegen.llvmir import LLVMRenderer
  from codegen.kernel import AxisType
  from codegen.search import MAX_POSITIONS, beam_search
  renderer = LLVMRenderer("+avx2")
  (item,) = (Tensor.empty(256, 256) @ Tensor.empty(256, 256)).schedule()
  positions = []
  def time_opts(opts):
    k = Kernel(item.ast, renderer)
    for o in opts: k.apply_opt(o)
    positions.append(np.prod([s for s, t in zip(k.full_shape, k.axis_types) if t in (AxisType.UPCAST, AxisType.UNROLL)]))
    return 1e-3 / (1 + len(opts))  # every action makes it faster: the search goes all its rounds
  with Context(BEAM_ESTIMATE=0): beam_search(item.ast, renderer, time_opts, 2, "avx2 matmul")
  assert positions[0] <= MAX_POSITIONS and max(positions) <= MAX_POSITIONS and len(positions) > 10, positions

def test_beam_compiles_a_round_before_timing_it_and_drops_what_the_estimate_passes_over(monkeypatch):
  """Candidates compile as they are lowered; those the estimate doesn't choose are withdrawn, and every chosen one is
  compiled, and any withdrawn one a worker had started has finished, before the first run (a run beside a compile on
  another core is timed slow)."""
  from codegen import search
  from codegen.program import lowered
  from tg import realize
  (item,) = matmul("CPU").schedule()
  dev, events = Device["CPU"], []
  monkeypatch.setattr(dev.compiler, "compile_ahead", lambda src: events.append(("ahead", src)))
  monkeypatch.setattr(dev.compiler, "compile_dropped", lambda src: events.append(("dropped", src)))
  monkeypatch.setattr(dev.compiler, "compile_taken_back", lambda src: events.append(("compiled", src)) or b"")
  monkeypatch.setattr(dev.compiler, "settle", lambda: events.append(("settled", None)))
  monkeypatch.setattr(dev, "runtime", lambda name, lib, spec: lambda *args, **kwargs: events.append(("run", spec.src)) or 1e-3)
  def one_round(ast, renderer, time_opts, width, key, prepare, preview):
    opts = [[], [Opt(OptOps.UPCAST, 0, 7)], [Opt(OptOps.UPCAST, 1, 2)]]
    candidates = [(o, search._kernel(ast, renderer, o, (64, 512)), None) for o in opts]
    candidates = [(o, k, lowered(k, renderer)) for o, k, _ in candidates]
    for c in candidates: preview(c)
    prepare(candidates[:2])  # the estimate passed over the third
    return [time_opts(o) for o in opts[:2]]
  monkeypatch.setattr(search, "beam_search", one_round)
  realize.beam_opts(dev, item.ast)
  kinds = [kind for kind, _ in events]
  assert kinds[:3] == ["ahead"] * 3 and kinds[3] == "dropped" and events[3][1] == events[2][1], kinds
  assert kinds[4:7] == ["compiled", "compiled", "settled"] and set(kinds[7:]) == {"run"}, kinds

def test_a_withdrawn_compile_is_skipped_or_waited_for():
  """compile_dropped: a queued compile no worker has started never runs; settle() returns only after one that a worker
  had started has finished."""
  import threading
  from codegen.compiler import Compiler
  from codegen.compile_workers import Job
  compiler, started, finish = Compiler(), Job("task", [], "a"), threading.Event()
  compiler._pending = {"a": started, "b": Job("task", [], "b")}
  assert started.claim()  # a worker has it
  compiler.compile_dropped("a")
  compiler.compile_dropped("b")
  assert not compiler._pending
  threading.Thread(target=lambda: (finish.wait(), started.result.set_result(b"")), daemon=True).start()
  settled = threading.Thread(target=compiler.settle, daemon=True)
  settled.start()
  settled.join(0.2)
  assert settled.is_alive()  # still compiling
  finish.set()
  settled.join(5)
  assert not settled.is_alive()

def test_beam_does_not_time_an_unoptimized_kernel_estimated_far_slower(cachedb):
  """The unoptimized kernel seeds the search only when the estimate puts it within SEED_MARGIN of the heuristics'
  choice: an unoptimized convolution runs for seconds, and timing it would cost more than the rest of the search."""
  from codegen.heuristic import hand_coded_optimizations
  from codegen.program import lowered
  from codegen.search import SEED_MARGIN, beam_search, estimate
  (item,) = matmul("CPU").schedule()
  renderer = Device["CPU"].renderer
  tuned = Kernel(item.ast, renderer)
  heuristic = hand_coded_optimizations(tuned, renderer.vector_width, renderer.vector_registers)
  assert estimate(lowered(Kernel(item.ast, renderer), renderer)[0]) > SEED_MARGIN * estimate(lowered(tuned, renderer)[0])
  timed = []
  def time_opts(opts):
    timed.append(opts)
    return 1.0
  beam_search(item.ast, renderer, time_opts, 2, "no unoptimized seed")
  assert timed[0] == heuristic and [] not in timed

def test_beam_stops_when_a_round_gains_less_than_min_progress(cachedb):
  """A round must beat the best so far by MIN_PROGRESS_S (10 us) and by MIN_PROGRESS (2%) of it; a kernel already faster
  than MIN_PROGRESS_S isn't searched."""
  from codegen.search import MIN_PROGRESS, MIN_PROGRESS_S, beam_search
  (item,) = matmul("CPU").schedule()
  renderer = Device["CPU"].renderer
  rounds = []
  def prepare(candidates): rounds.append(len(candidates))
  def slightly_faster(opts): return 1e-3 - (MIN_PROGRESS_S / 2) * len(opts)  # each action gains 5 us
  found = beam_search(item.ast, renderer, slightly_faster, 2, "small gains", prepare=prepare)
  assert len(rounds) == 2 and found is not None  # the seeds, then one round of grown candidates
  rounds.clear()
  beam_search(item.ast, renderer, lambda opts: MIN_PROGRESS_S / 2, 2, "fast already", prepare=prepare)
  assert len(rounds) == 1  # the seeds only
  rounds.clear()
  def one_percent_faster(opts): return 10e-3 * (1 - MIN_PROGRESS / 2 * len(opts))  # 100 us a step: more than MIN_PROGRESS_S
  beam_search(item.ast, renderer, one_percent_faster, 2, "small relative gains", prepare=prepare)
  assert len(rounds) == 2

def test_beam_falls_back_when_nothing_compiles(cachedb, capsys, monkeypatch):
  from codegen.search import beam_search
  from tg import realize
  (item,) = matmul("CPU").schedule()
  def broken(opts): raise RuntimeError("compiler crashed")
  assert beam_search(item.ast, Device["CPU"].renderer, broken, 2, "broken") is None
  real = realize.get_program
  def heuristics_only(ast, renderer, opts):  # every candidate BEAM tries fails to build
    if opts is not None: raise RuntimeError("candidate fails to compile")
    return real(ast, renderer, None)
  monkeypatch.setattr(realize, "get_program", heuristics_only)
  monkeypatch.setattr(realize, "program_of", lambda k, renderer, lowered_k=None: heuristics_only(k.ast, renderer, k.applied_opts))
  with Context(BEAM=2, DEBUG=1):
    out = Tensor(np.arange(7, dtype=np.float32)).realize() * 3 + 1
    assert out.tolist() == [1.0, 4.0, 7.0, 10.0, 13.0, 16.0, 19.0]
  assert "using the heuristics" in capsys.readouterr().out

def test_compile_cache_hit_and_corrupt_entry(cachedb):
  from codegen.llvm_compiler import LLVMCompiler
  src = "define i32 @f() nounwind {\n  ret i32 42\n}\n"
  c = LLVMCompiler()
  lib = c.compile_cached(src)
  fresh = LLVMCompiler()
  fresh.compile = lambda s: (_ for _ in ()).throw(AssertionError("should come from the disk cache"))
  assert fresh.compile_cached(src) == lib
  db = sqlite3.connect(cachedb)
  db.execute(f"UPDATE compile_{diskcache.VERSION} SET value = X'00010203'")
  db.commit()
  db.close()
  again = LLVMCompiler()
  assert again.compile_cached(src) == lib, "a corrupt entry is dropped and the program compiled again"

def test_two_processes_share_the_cache(cachedb):
  code = ("import sys; from tg import Tensor; import numpy as np; "
          "print((Tensor(np.arange(64, dtype=np.float32)) * float(sys.argv[1]) + 1).sum().item())")
  env = {**os.environ, "CACHEDB": str(cachedb)}
  procs = [subprocess.Popen([sys.executable, "-c", code, str(k)], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True) for k in (2, 3, 4)]
  outs = [p.communicate(timeout=120)[0].strip() for p in procs]
  assert all(p.returncode == 0 for p in procs) and outs == [str(float(sum(range(64)) * k + 64)) for k in (2, 3, 4)]
  db = sqlite3.connect(cachedb)
  assert db.execute(f"SELECT COUNT(*) FROM compile_{diskcache.VERSION}").fetchone()[0] >= 2

def test_cpu_convolution_computes_output_channels_as_vector_lanes():
  """The weight is read with output channels contiguous (a copy made per call), so the heuristics vectorize them."""
  lanes = Device["CPU"].renderer.vector_width
  x, w = Tensor.rand(2, 3, 10, 10).realize(), Tensor.rand(2 * lanes, 3, 3, 3).realize()
  (conv,) = [i for i in x.conv2d(w).schedule() if i.ast.op is Ops.SINK and any(u.op is Ops.REDUCE_AXIS for u in i.ast.toposort())]
  k = Kernel(conv.ast, Device["CPU"].renderer)
  weight = next(st for v, st in zip(k.views, k.sts) if v not in k.store_views and st.views[-1].strides[0] == 0 and st.views[-1].strides[1])
  assert weight.views[-1].strides[1] == 1  # axes (batch, cout, cin, y, x, ky, kx)
  spec = get_program(conv.ast, Device["CPU"].renderer)
  assert spec.applied_opts[:2] == [Opt(OptOps.UPCAST, 1, lanes), Opt(OptOps.VECTORIZE, 2, 0)]
  np.testing.assert_allclose(x.conv2d(w).numpy(), torch_free_conv(x.numpy(), w.numpy()), rtol=1e-5, atol=1e-5)

def torch_free_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
  win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))  # (b, cin, oy, ox, ky, kx)
  return np.einsum("bcyxij,ocij->boyx", win, w)

def test_stacked_views_are_unstacked_into_a_finer_iteration_space():
  """A max-pool's backward reads the pooled values through a reshaped, permuted window: the kernel iterates over
  (.., y/2, 2, x/2, 2) so that every load is one strided view."""
  x = Tensor.rand(2, 3, 8, 8).realize()
  pooled = x.max_pool2d(2).realize()
  up = pooled.reshape(2, 3, 4, 1, 4, 1).expand(2, 3, 4, 2, 4, 2).reshape(2, 3, 8, 8)
  (item,) = [i for i in (x.eq(up) * x).schedule() if i.ast.op is Ops.SINK]
  assert any(len(u.arg.views) > 1 for u in item.ast.toposort() if u.op is Ops.VIEW)  # as scheduled: stacked
  k = Kernel(item.ast, Device["CPU"].renderer)
  assert all(len(st.views) == 1 for st in k.sts) and k.full_shape == (24, 2, 4, 2)
  xn, pn = x.numpy(), pooled.numpy()
  np.testing.assert_array_equal((x.eq(up) * x).numpy(), (xn == pn.repeat(2, 2).repeat(2, 3)) * xn)

def test_weight_gradient_tile_slides_along_the_kernel_window():
  """A convolution's weight gradient sums over output positions (16 along x, too long to unroll whole): the register
  tile spans the 5 kernel columns, and x is unrolled by 4, so each step loads only the input values entering the tile."""
  lanes = Device["CPU"].renderer.vector_width
  x, w = Tensor.rand(4, 8, 20, 20).realize(), Tensor.rand(2 * lanes, 8, 5, 5, requires_grad=True).realize()
  x.conv2d(w).sum().backward()
  (item,) = [i for i in w.grad.schedule() if i.ast.op is Ops.SINK and any(u.op is Ops.REDUCE_AXIS for u in i.ast.toposort())]
  opts = get_program(item.ast, Device["CPU"].renderer).applied_opts
  assert Opt(OptOps.UPCAST, 7, 5) in opts  # axes (b, o/lanes, lanes, c, y, x, ky, kx) before other tile axes split
  assert [o.amt for o in opts if o.op is OptOps.UNROLL] == [4]  # step 4 unrolls only the innermost reduction, x
  windows = np.lib.stride_tricks.sliding_window_view(x.numpy(), (16, 16), axis=(2, 3))  # (b, c, ky, kx, y, x)
  np.testing.assert_allclose(w.grad.numpy(), np.broadcast_to(windows.sum((0, 4, 5)), w.shape), rtol=1e-5)

def test_pool_window_views_are_unstacked_when_the_pool_size_splits_the_width_unevenly():
  """6x6 pooled by 2: the window view's axes (3, 3, 2, 2) cut the iteration space at offsets that don't divide each
  other (4 and 6); cutting where each axis's stride crosses the view beneath gives (.., 3, 2, 3, 2) and single views."""
  x, g = Tensor.rand(2, 3, 6, 6, requires_grad=True).realize(), Tensor.rand(2, 3, 3, 3).realize()
  (x.relu().max_pool2d(2) * g).sum().backward()
  items = [i for i in x.grad.schedule() if i.ast.op is Ops.SINK]
  stacked = [i for i in items if any(len(u.arg.views) > 1 for u in i.ast.toposort() if u.op is Ops.VIEW)]
  assert stacked and all(len(st.views) == 1 for i in stacked for st in Kernel(i.ast, Device["CPU"].renderer).sts)
  xn = x.numpy()
  win = np.maximum(xn, 0).reshape(2, 3, 3, 2, 3, 2)
  hit = win == win.max((3, 5), keepdims=True)
  ref = (hit / hit.sum((3, 5), keepdims=True) * g.numpy()[:, :, :, None, :, None]).reshape(2, 3, 6, 6) * (xn > 0)
  np.testing.assert_allclose(x.grad.numpy(), ref, rtol=1e-6)

def test_reduction_loops_skip_steps_that_only_read_stored_padding():
  """A padded convolution stores its padded input; the loop over kernel rows then starts and ends where the window
  meets real rows (bounds that depend on the output row) instead of multiplying stored zeros, and the register tile
  doesn't span output rows (its loop could only skip what all its rows skip)."""
  x, w = Tensor.rand(1, 4, 20, 20).realize(), Tensor.rand(16, 4, 5, 5).realize()
  out = x.conv2d(w, padding=4)
  (item,) = [i for i in out.schedule() if i.ast.op is Ops.SINK and any(u.op is Ops.REDUCE_AXIS for u in i.ast.toposort())]
  assert any(u.op is Ops.VALID and u.arg == STORED_ZEROS for u in item.ast.toposort())
  spec = get_program(item.ast, Device["CPU"].renderer)
  assert Kernel(item.ast, Device["CPU"].renderer).full_shape == (16, 4, 24, 24, 5, 5)
  assert not any(o.op is OptOps.UPCAST and o.axis == 2 for o in spec.applied_opts)  # axis 2: output rows
  clamped = [u for u in spec.uops if u.op is Ops.RANGE and any(s.op is Ops.MAX for b in u.src for s in b.toposort())]
  assert clamped, "no loop got bounds from the stored padding"  # max(0, 4 - y) .. min(5, 24 - y)
  xp = np.pad(x.numpy(), ((0, 0), (0, 0), (4, 4), (4, 4)))
  np.testing.assert_allclose(out.numpy(), torch_free_conv(xp, w.numpy()), rtol=1e-5, atol=1e-5)

def test_an_operand_read_once_per_output_does_not_choose_the_vector_axis():
  """(a @ b) * c.T: c.T is read once per output, after the sum, so its layout (contiguous along rows) weighs 1/128 of
  a per-step load; the output columns, along which b and the store are contiguous, become the vector lanes (not the
  summed axis, along which b would be gathered lane by lane every step)."""
  lanes = Device["CPU"].renderer.vector_width
  a, b, c = Tensor.rand(64, 128).realize(), Tensor.rand(128, 64).realize(), Tensor.rand(64, 64).realize()
  out = (a @ b) * c.T
  (item,) = [i for i in out.schedule() if i.ast.op is Ops.SINK]
  assert Kernel(item.ast, Device["CPU"].renderer).full_shape == (64, 64, 128)  # axes (row, column, summed)
  assert get_program(item.ast, Device["CPU"].renderer).applied_opts[:2] == [Opt(OptOps.UPCAST, 1, lanes), Opt(OptOps.VECTORIZE, 2, 0)]
  np.testing.assert_allclose(out.numpy(), (a.numpy() @ b.numpy()) * c.numpy().T, rtol=1e-5)

def test_lanes_scattered_in_memory_are_stored_as_vectors_along_a_contiguous_tile_axis():
  """A convolution with lanes along its output channels stores NCHW, 64 floats apart per channel. With the tile 4 wide
  along x (contiguous in the output), each channel's 4 values are regrouped into one vector store: 16 per 4x16
  outputs instead of 64 scalar stores. A tile along the batch (outputs 2048 floats apart) can't be: lane by lane."""
  x, w = Tensor.rand(2, 3, 10, 10).realize(), Tensor.rand(32, 3, 3, 3).realize()
  w_lanes = w.permute(1, 2, 3, 0).contiguous().permute(3, 0, 1, 2).realize()  # as conv2d's CPU copy has it: one kernel left
  (conv,) = [i for i in x.conv2d(w_lanes).schedule() if i.ast.op is Ops.SINK]
  want = torch_free_conv(x.numpy(), w.numpy()).reshape(-1)
  lanes = [Opt(OptOps.UPCAST, 1, 16), Opt(OptOps.VECTORIZE, 2, 0)]
  for opts, widths in ((lanes + [Opt(OptOps.UPCAST, 5, 4)], {4}), (lanes + [Opt(OptOps.UPCAST, 0, 2)], {1})):
    spec = get_program(conv.ast, Device["CPU"].renderer, opts)
    assert {u.src[2].dtype.count for u in spec.uops if u.op is Ops.STORE and u.src[0].op is Ops.DEFINE_GLOBAL} == widths
    np.testing.assert_allclose(run_with("CPU", x.conv2d(w_lanes), opts), want, rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_a_flipped_read_along_the_vector_is_one_load_with_its_lanes_reversed(device):
  """x.flip(-1) * y vectorized along the flipped axis: the flipped operand is one vector load (from the lane that
  reads lowest) whose lanes are put in reverse, not a load per lane; values as numpy's."""
  rng = np.random.default_rng(0)
  x, y = (Tensor(rng.random((4, 64), dtype=np.float32), device=device).realize() for _ in range(2))
  out = x.flip(-1) * y
  (item,) = [i for i in out.schedule() if i.ast.op is Ops.SINK]
  opts = [Opt(OptOps.UPCAST, 1, 8), Opt(OptOps.VECTORIZE, 2, 0)]
  spec = get_program(item.ast, Device[device].renderer, opts)
  loads = [u for u in spec.uops if u.op is Ops.LOAD]
  assert [u.dtype.count for u in loads] == [8, 8], [u.dtype for u in loads]
  np.testing.assert_array_equal(run_with(device, out, opts).reshape(4, 64), x.numpy()[:, ::-1] * y.numpy())

@pytest.mark.parametrize("case", ["pad", "reflect", "cat"])
def test_a_padded_read_along_the_vector_is_one_masked_load(case):
  """A padded view (zeros past the edges), a reflect pad (flipped pieces) and a concatenation along the vector axis:
  on the CPU each piece is one masked vector load per vector (the lanes outside it off), not a load per lane; the
  values are numpy's, the edges included. The PYTHON renderer keeps lane-by-lane loads."""
  rng = np.random.default_rng(1)
  x, y = (Tensor(rng.random((4, 29), dtype=np.float32)).realize() for _ in range(2))
  out = {"pad": lambda: x.pad(((0, 0), (3, 0))) * 2, "reflect": lambda: x.pad((2, 1), mode="reflect") * 2,
         "cat": lambda: x.cat(y, dim=1)[:, 26:58] * 2}[case]()
  want = {"pad": lambda: np.pad(x.numpy(), ((0, 0), (3, 0))) * 2, "reflect": lambda: np.pad(x.numpy(), ((0, 0), (2, 1)), mode="reflect") * 2,
          "cat": lambda: np.concatenate([x.numpy(), y.numpy()], 1)[:, 26:58] * 2}[case]()
  (item,) = [i for i in out.schedule() if i.ast.op is Ops.SINK]
  opts = [Opt(OptOps.UPCAST, 1, 8), Opt(OptOps.VECTORIZE, 2, 0)]
  spec = get_program(item.ast, Device["CPU"].renderer, opts)
  loads = [u for u in spec.uops if u.op is Ops.LOAD]
  assert loads and all(u.dtype.count == 8 and len(u.src) == 3 for u in loads), [(u.dtype, len(u.src)) for u in loads]
  assert "llvm.masked.load" in spec.src
  np.testing.assert_array_equal(run_with("CPU", out, opts).reshape(want.shape), want)
  python = get_program(item.ast, Device["PYTHON"].renderer, opts)
  assert not any(u.op is Ops.LOAD and len(u.src) == 3 for u in python.uops)
