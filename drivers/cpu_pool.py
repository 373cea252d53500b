"""The CPU device's worker threads: a kernel's outer loop is cut into chunks that the launching thread and the workers
claim with one compare-and-swap each, in native code tg compiles, so a launch takes neither the interpreter lock nor
a system call while the workers are awake. A worker spins for new work a short while after its last chunk, then
sleeps on a futex (an idle process keeps no core busy); the launcher waits for the last chunk the same way."""
from __future__ import annotations
import threading, time
import numpy as np
from drivers.elf import LoadedImage
from drivers.system import ffi

# how long a thread spins before it sleeps in the kernel: a wake-up costs 50-200 us in a VM, so a worker that slept
# between two launches a JIT replay or a loop makes with Python in between came too late to help (256 and 512
# matmul replays: 0.44-0.54x and 0.72x numpy with 50 us, 0.66-0.69x and 0.86x with 250 us; with 250 us, 4 of 20
# processes still replayed a 256 matmul at one thread's speed, with 1 ms none of 20)
SPIN_S = 1e-3
# the pool's int64 words, as the IR below indexes them: 0 COUNTER = generation << 40 | chunks << 20 | next chunk to
# claim; 1 DONE = chunks finished; 2-4 the entry, argv and iteration count; 5 SLEEPERS = workers asleep on COUNTER's
# upper half; 6 WAITING = the launcher asleep on DONE
COUNTER, SLEEPERS = 0, 5
MAX_CHUNKS = (1 << 20) - 1

# x86-64 Linux: syscall 202 is futex; FUTEX_WAIT_PRIVATE = 128, FUTEX_WAKE_PRIVATE = 129 (linux/futex.h)
POOL_IR = """
declare void @llvm.x86.sse2.pause()
declare i64 @syscall(i64, ...)

define internal void @futex_wait(ptr %word, i32 %expected, i64 %timeout_ns) {
entry:
  %ts = alloca [2 x i64]
  %sec = udiv i64 %timeout_ns, 1000000000
  %nsec = urem i64 %timeout_ns, 1000000000
  store i64 %sec, ptr %ts
  %nsec.p = getelementptr i64, ptr %ts, i64 1
  store i64 %nsec, ptr %nsec.p
  %r = call i64 (i64, ...) @syscall(i64 202, ptr %word, i32 128, i32 %expected, ptr %ts, ptr null, i32 0)
  ret void
}

define internal void @futex_wake(ptr %word) {
entry:
  %r = call i64 (i64, ...) @syscall(i64 202, ptr %word, i32 129, i32 2147483647, ptr null, ptr null, i32 0)
  ret void
}

define void @tg_pool_spin(i64 %n) {
entry:
  br label %loop
loop:
  %k = phi i64 [0, %entry], [%k1, %loop]
  call void @llvm.x86.sse2.pause()
  %k1 = add i64 %k, 1
  %more = icmp ult i64 %k1, %n
  br i1 %more, label %loop, label %out
out:
  ret void
}

; the next chunk of generation %gen, or -1 when none is left: a compare-and-swap, so a thread that read an older
; generation can't take a chunk of a newer one
define internal i64 @claim(ptr %job, i64 %gen) {
entry:
  %first = load atomic i64, ptr %job seq_cst, align 8
  br label %loop
loop:
  %cur = phi i64 [%first, %entry], [%seen, %lost]
  %g = lshr i64 %cur, 40
  %chunks.w = lshr i64 %cur, 20
  %chunks = and i64 %chunks.w, 1048575
  %next = and i64 %cur, 1048575
  %same = icmp eq i64 %g, %gen
  %left = icmp ult i64 %next, %chunks
  %ok = and i1 %same, %left
  br i1 %ok, label %try, label %none
try:
  %new = add i64 %cur, 1
  %pair = cmpxchg ptr %job, i64 %cur, i64 %new seq_cst seq_cst, align 8
  %seen = extractvalue {i64, i1} %pair, 0
  %won = extractvalue {i64, i1} %pair, 1
  br i1 %won, label %got, label %lost
lost:
  br label %loop
got:
  ret i64 %next
none:
  ret i64 -1
}

; runs chunks of generation %gen until none is left; whoever finishes the last one wakes a launcher asleep on DONE
define internal void @run_claimed(ptr %job, i64 %gen) {
entry:
  %done.p = getelementptr i64, ptr %job, i64 1
  %entry.p = getelementptr i64, ptr %job, i64 2
  %argv.p = getelementptr i64, ptr %job, i64 3
  %n.p = getelementptr i64, ptr %job, i64 4
  %waiting.p = getelementptr i64, ptr %job, i64 6
  br label %loop
loop:
  %c = call i64 @claim(ptr %job, i64 %gen)
  %none = icmp slt i64 %c, 0
  br i1 %none, label %out, label %run
run:
  %cnt = load atomic i64, ptr %job monotonic, align 8
  %chunks.w = lshr i64 %cnt, 20
  %chunks = and i64 %chunks.w, 1048575
  %fn.i = load i64, ptr %entry.p
  %fn = inttoptr i64 %fn.i to ptr
  %argv.i = load i64, ptr %argv.p
  %argv = inttoptr i64 %argv.i to ptr
  %n = load i64, ptr %n.p
  %lo.m = mul i64 %n, %c
  %lo = udiv i64 %lo.m, %chunks
  %c1 = add i64 %c, 1
  %hi.m = mul i64 %n, %c1
  %hi = udiv i64 %hi.m, %chunks
  %lo32 = trunc i64 %lo to i32
  %hi32 = trunc i64 %hi to i32
  call void %fn(ptr %argv, i32 %lo32, i32 %hi32)
  %old = atomicrmw add ptr %done.p, i64 1 seq_cst
  %now = add i64 %old, 1
  %last = icmp eq i64 %now, %chunks
  br i1 %last, label %tell, label %loop
tell:
  %waiting = load atomic i64, ptr %waiting.p seq_cst, align 8
  %asleep = icmp ne i64 %waiting, 0
  br i1 %asleep, label %wake, label %loop
wake:
  call void @futex_wake(ptr %done.p)
  br label %loop
out:
  ret void
}

define void @tg_pool_publish(ptr %job, i64 %fn, i64 %argv, i64 %n, i64 %chunks, i1 %wake) {
entry:
  %done.p = getelementptr i64, ptr %job, i64 1
  store atomic i64 0, ptr %done.p seq_cst, align 8
  %entry.p = getelementptr i64, ptr %job, i64 2
  store i64 %fn, ptr %entry.p
  %argv.p = getelementptr i64, ptr %job, i64 3
  store i64 %argv, ptr %argv.p
  %n.p = getelementptr i64, ptr %job, i64 4
  store i64 %n, ptr %n.p
  %cur = load atomic i64, ptr %job monotonic, align 8
  %g = lshr i64 %cur, 40
  %g1 = add i64 %g, 1
  %gen = and i64 %g1, 16777215
  %gen.w = shl i64 %gen, 40
  %chunks.w = shl i64 %chunks, 20
  %new = or i64 %gen.w, %chunks.w
  store atomic i64 %new, ptr %job seq_cst, align 8
  br i1 %wake, label %check, label %out
check:
  %sleepers.p = getelementptr i64, ptr %job, i64 5
  %sleepers = load atomic i64, ptr %sleepers.p seq_cst, align 8
  %any = icmp ne i64 %sleepers, 0
  br i1 %any, label %wakeup, label %out
wakeup:
  %hi.p = getelementptr i32, ptr %job, i64 1
  call void @futex_wake(ptr %hi.p)
  br label %out
out:
  ret void
}

; the launcher's part: run chunks, then wait for the others' (spinning %spins pauses, then asleep on DONE)
define void @tg_pool_finish(ptr %job, i64 %spins) {
entry:
  %cur = load atomic i64, ptr %job monotonic, align 8
  %gen = lshr i64 %cur, 40
  %chunks.w = lshr i64 %cur, 20
  %chunks = and i64 %chunks.w, 1048575
  call void @run_claimed(ptr %job, i64 %gen)
  %done.p = getelementptr i64, ptr %job, i64 1
  %waiting.p = getelementptr i64, ptr %job, i64 6
  br label %spin
spin:
  %k = phi i64 [0, %entry], [%k1, %pause]
  %done = load atomic i64, ptr %done.p seq_cst, align 8
  %all = icmp eq i64 %done, %chunks
  br i1 %all, label %out, label %more
more:
  %k1 = add i64 %k, 1
  %long = icmp ugt i64 %k1, %spins
  br i1 %long, label %sleep, label %pause
pause:
  call void @llvm.x86.sse2.pause()
  br label %spin
sleep:
  store atomic i64 1, ptr %waiting.p seq_cst, align 8
  %d = load atomic i64, ptr %done.p seq_cst, align 8
  %fin = icmp eq i64 %d, %chunks
  br i1 %fin, label %woke, label %block
block:
  %d32 = trunc i64 %d to i32
  call void @futex_wait(ptr %done.p, i32 %d32, i64 1000000)
  br label %sleep
woke:
  store atomic i64 0, ptr %waiting.p seq_cst, align 8
  br label %out
out:
  ret void
}

; a worker thread's whole life: take chunks of each new generation, spin %spins pauses for the next, then sleep on
; COUNTER's upper half (which holds the generation) until a launch wakes it (or 100 ms pass)
define void @tg_pool_worker(ptr %job, i64 %seen, i64 %spins) {
entry:
  %sleepers.p = getelementptr i64, ptr %job, i64 5
  %hi.p = getelementptr i32, ptr %job, i64 1
  br label %spin
spin:
  %last = phi i64 [%seen, %entry], [%last, %pause], [%g, %work], [%last, %awake]
  %left = phi i64 [%spins, %entry], [%left1, %pause], [%spins, %work], [%spins, %awake]
  %cur = load atomic i64, ptr %job seq_cst, align 8
  %g = lshr i64 %cur, 40
  %new = icmp ne i64 %g, %last
  br i1 %new, label %work, label %idle
work:
  call void @run_claimed(ptr %job, i64 %g)
  br label %spin
idle:
  %left1 = sub i64 %left, 1
  %over = icmp eq i64 %left1, 0
  br i1 %over, label %sleep, label %pause
pause:
  call void @llvm.x86.sse2.pause()
  br label %spin
sleep:
  %s0 = atomicrmw add ptr %sleepers.p, i64 1 seq_cst
  %now = load atomic i64, ptr %job seq_cst, align 8
  %gnow = lshr i64 %now, 40
  %same = icmp eq i64 %gnow, %last
  br i1 %same, label %block, label %awake
block:
  %hi.w = lshr i64 %now, 32
  %hi = trunc i64 %hi.w to i32
  call void @futex_wait(ptr %hi.p, i32 %hi, i64 100000000)
  br label %awake
awake:
  %s1 = atomicrmw sub ptr %sleepers.p, i64 1 seq_cst
  br label %spin
}
"""

class CorePool:
  """Runs `void entry(int64_t *argv, int32 start, int32 end)` over [0, n) on the calling thread and the workers."""
  def __init__(self, compile_ir):
    self.image = LoadedImage(compile_ir(POOL_IR))
    symbols = self.image.symbols
    self._publish = ffi.cast("void(*)(int64_t *, int64_t, int64_t, int64_t, int64_t, _Bool)", symbols["tg_pool_publish"])
    self._finish = ffi.cast("void(*)(int64_t *, int64_t)", symbols["tg_pool_finish"])
    self._worker = ffi.cast("void(*)(int64_t *, int64_t, int64_t)", symbols["tg_pool_worker"])
    self.job = np.zeros(8, dtype=np.int64)
    self._job = ffi.cast("int64_t *", self.job.ctypes.data)
    self.workers = 0
    self._lock = threading.Lock()  # one launch at a time: the job words describe a single kernel
    self.spins = self._calibrate(ffi.cast("void(*)(int64_t)", symbols["tg_pool_spin"]))

  @staticmethod
  def _calibrate(spin) -> int:
    """Pause instructions that take about SPIN_S on this CPU (a pause costs tens to hundreds of cycles)."""
    st = time.perf_counter()
    spin(10000)
    return max(1, int(SPIN_S * 10000 / max(time.perf_counter() - st, 1e-9)))

  @property
  def sleeping(self) -> int: return int(self.job[SLEEPERS])

  def add_workers(self, count: int) -> None:
    """Start `count` more worker threads (they live as long as the process, in native code)."""
    for _ in range(count):
      generation = int(self.job[COUNTER]) >> 40
      threading.Thread(target=self._serve, args=(generation,), name=f"tg-cpu-{self.workers}", daemon=True).start()
      self.workers += 1

  def _serve(self, generation: int) -> None:
    self._worker(self._job, generation, self.spins)  # never returns; this frame keeps the pool's memory alive

  def run(self, entry: int, argv: int, n: int, chunks: int, wake: bool) -> None:
    """entry(argv, start, end) over [0, n) cut into `chunks` pieces, returning when all have run. Sleeping workers
    are woken only when `wake` (waking one costs tens of microseconds); spinning ones always join."""
    if not 0 < chunks <= MAX_CHUNKS: raise ValueError(f"{chunks} chunks: the pool takes 1 to {MAX_CHUNKS}")
    with self._lock:
      self._publish(self._job, entry, argv, n, chunks, wake)
      self._finish(self._job, self.spins)
