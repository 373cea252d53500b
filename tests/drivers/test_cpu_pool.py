"""The CPU device's worker pool (drivers/cpu_pool.py), run on entries written here in LLVM IR: every iteration of
[0, n) runs exactly once whatever the chunking, woken workers take chunks, and sleeping ones stay asleep for work
that isn't worth waking them for."""
import threading, time
import numpy as np
import pytest
from drivers.cpu_pool import CorePool
from drivers.device import Device
from drivers.elf import LoadedImage

# entry(argv, start, end): argv[0] is an int64 array; each iteration adds one to its element, and the chunk's first
# element also gets the running thread's pthread_self() in argv[1]'s array, after spinning argv[2] pause instructions
ENTRY_IR = """
declare i64 @pthread_self()
declare void @llvm.x86.sse2.pause()
define void @count(ptr %argv, i32 %start, i32 %end) {
entry:
  %cells.i = load i64, ptr %argv
  %cells = inttoptr i64 %cells.i to ptr
  %who.p = getelementptr i64, ptr %argv, i64 1
  %who.i = load i64, ptr %who.p
  %who = inttoptr i64 %who.i to ptr
  %spin.p = getelementptr i64, ptr %argv, i64 2
  %spin = load i64, ptr %spin.p
  %me = call i64 @pthread_self()
  %first = getelementptr i64, ptr %who, i32 %start
  store i64 %me, ptr %first
  br label %wait
wait:
  %k = phi i64 [0, %entry], [%k1, %pause]
  %more = icmp slt i64 %k, %spin
  br i1 %more, label %pause, label %check
pause:
  call void @llvm.x86.sse2.pause()
  %k1 = add i64 %k, 1
  br label %wait
check:
  %any = icmp slt i32 %start, %end
  br i1 %any, label %loop, label %out
loop:
  %i = phi i32 [%start, %check], [%i1, %loop]
  %cell = getelementptr i64, ptr %cells, i32 %i
  %old = atomicrmw add ptr %cell, i64 1 monotonic
  %i1 = add i32 %i, 1
  %done = icmp eq i32 %i1, %end
  br i1 %done, label %out, label %loop
out:
  ret void
}
"""

@pytest.fixture(scope="module")
def pool_and_entry():
  compile_ir = Device["CPU"].compiler.compile
  pool, image = CorePool(compile_ir), LoadedImage(compile_ir(ENTRY_IR))
  pool.add_workers(1)
  yield pool, image.symbols["count"]  # image is held here: its code stays loaded until the tests are done

def run(pool, entry, n: int, chunks: int, spin: int = 0, wake: bool = True) -> tuple[np.ndarray, set[int]]:
  cells, who = np.zeros(n, np.int64), np.zeros(n, np.int64)
  argv = np.array([cells.ctypes.data, who.ctypes.data, spin], np.int64)
  pool.run(entry, argv.ctypes.data, n, chunks, wake)
  starts = {n * c // chunks for c in range(chunks)} - {n}
  return cells, {int(who[s]) for s in starts}

@pytest.mark.parametrize("n,chunks", [(1, 1), (7, 7), (1000, 3), (1000, 8), (4099, 64), (100_000, 1000)])
def test_every_iteration_runs_once(pool_and_entry, n, chunks):
  pool, entry = pool_and_entry
  for _ in range(20):
    cells, _ = run(pool, entry, n, chunks)
    np.testing.assert_array_equal(cells, np.ones(n, np.int64))

def test_chunk_counts_the_counter_cant_hold_are_refused(pool_and_entry):
  pool, entry = pool_and_entry
  for chunks in (0, 1 << 20):  # the counter word keeps the chunk count in 20 bits
    with pytest.raises(ValueError, match=f"{chunks} chunks: the pool takes 1 to 1048575"): run(pool, entry, 10, chunks)
  cells, _ = run(pool, entry, 3, 5)  # more chunks than iterations: some are empty
  np.testing.assert_array_equal(cells, np.ones(3, np.int64))

def test_a_woken_worker_takes_chunks(pool_and_entry):
  pool, entry = pool_and_entry
  # 128 chunks of about a millisecond each: the woken worker (tens of microseconds away, more on a loaded machine)
  # gets some of them
  _, threads = run(pool, entry, 128, 128, spin=30_000, wake=True)
  assert threading.get_ident() in threads and len(threads) == 2, threads

def wait_until_asleep(pool) -> None:
  deadline = time.monotonic() + 10
  while pool.sleeping < pool.workers and time.monotonic() < deadline: time.sleep(0.001)  # spinning ends after SPIN_S
  assert pool.sleeping == pool.workers

def test_sleeping_workers_stay_asleep_without_wake(pool_and_entry):
  pool, entry = pool_and_entry
  # a sleeping worker also wakes every 100 ms on its own and then helps with whatever runs: one of three runs of
  # about 2 ms is enough to show that a launch without `wake` leaves it asleep
  alone = []
  for _ in range(3):
    wait_until_asleep(pool)
    cells, threads = run(pool, entry, 16, 16, spin=3000, wake=False)
    np.testing.assert_array_equal(cells, np.ones(16, np.int64))
    alone.append(threads == {threading.get_ident()})  # pthread_self is the id threading reports on Linux
  assert any(alone), alone

def test_kernels_split_over_the_pool_match_numpy():
  x = np.random.default_rng(1).standard_normal((512, 1024)).astype(np.float32)
  from tg import Tensor
  from ir.switches import Context
  with Context(NUM_CPU_THREADS=2):
    t = Tensor(x, device="CPU")
    for _ in range(5):
      np.testing.assert_allclose((t * 2 + 1).numpy(), x * 2 + 1, rtol=1e-6)
      np.testing.assert_allclose(t.sum(1).numpy(), x.sum(1), rtol=1e-4, atol=1e-3)
