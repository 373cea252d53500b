"""Compile worker processes: kernels compile on other cores while the main thread lowers the next ones. LLVM through
llvmlite runs one call at a time per process (llvmlite holds a lock around every call), so the parallelism has to be
processes. Each worker is `python -m codegen.compile_workers`, fed over a pipe: a request names a compile function
("module:function", e.g. codegen.llvm_compiler:compile_for), its target arguments and the source; the answer is the
binary or the error message. Nothing is pickled either way.

A job nobody has started yet can be taken back: the main thread, needing a binary whose compile is still queued,
compiles it itself instead of waiting (on two cores: one worker and the main thread both compile)."""
from __future__ import annotations
import atexit, concurrent.futures, importlib, json, os, queue, struct, subprocess, sys, threading

class Job:
  """One queued compile; whoever claims it first (a worker's feeder thread, or the main thread) does it."""
  def __init__(self, task: str, args: list, src: str):
    self.task, self.args, self.src = task, args, src
    self.result: concurrent.futures.Future[bytes] = concurrent.futures.Future()
    self._claimed, self._lock = False, threading.Lock()
  def claim(self) -> bool:
    with self._lock:
      taken, self._claimed = self._claimed, True
      return not taken

def _send(stream, data: bytes) -> None:
  stream.write(struct.pack("<I", len(data)) + data)
  stream.flush()

def _receive(stream) -> bytes:
  head = stream.read(4)
  if len(head) < 4: raise EOFError("the other side closed the pipe")
  (n,) = struct.unpack("<I", head)
  data = stream.read(n)
  if len(data) < n: raise EOFError("the other side closed the pipe mid-message")
  return data

class Workers:
  """`count` worker processes, each fed by a daemon thread from one queue of jobs."""
  def __init__(self, count: int):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
    self.jobs: queue.Queue[Job] = queue.Queue()
    self.procs = [subprocess.Popen([sys.executable, "-m", "codegen.compile_workers"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
                  for _ in range(count)]
    for proc in self.procs: threading.Thread(target=self._feed, args=(proc,), daemon=True, name="compile-feeder").start()
    atexit.register(self.close)

  def submit(self, task: str, args: list, src: str) -> Job:
    self.jobs.put(job := Job(task, args, src))
    return job

  def _feed(self, proc: subprocess.Popen) -> None:
    while True:
      job = self.jobs.get()
      if not job.claim(): continue  # the main thread took it back
      try:
        _send(proc.stdin, json.dumps({"task": job.task, "args": job.args}).encode() + b"\n" + job.src.encode())
        answer = _receive(proc.stdout)
      except (OSError, EOFError) as e:
        job.result.set_exception(RuntimeError(f"compile worker {proc.pid} died ({e}); exit status {proc.poll()}"))
        return
      if answer[:1] == b"\x00": job.result.set_result(answer[1:])
      else: job.result.set_exception(_error(answer[1:].decode()))

  def close(self) -> None:
    for proc in self.procs:
      if proc.poll() is None:
        proc.stdin.close()  # a worker exits at the end of its input
        proc.wait()

def _error(message: str) -> Exception:
  from codegen.compiler import CompileError
  return CompileError(message)

_pool: tuple[int, Workers] | None = None  # (pid, workers): a forked child starts its own

def workers() -> Workers | None:
  """This process's compile workers (started on first use), one per core beyond the first; None on one core."""
  global _pool
  if (os.cpu_count() or 1) < 2: return None
  if _pool is None or _pool[0] != os.getpid(): _pool = (os.getpid(), Workers((os.cpu_count() or 2) - 1))
  return _pool[1]

def _serve() -> None:
  """The worker's loop: compile each request with the function it names, until the input ends."""
  from codegen.compiler import CompileError
  functions: dict[str, object] = {}
  while True:
    try: request = _receive(sys.stdin.buffer)
    except EOFError: return
    head, src = request.split(b"\n", 1)
    job = json.loads(head)
    if (fn := functions.get(job["task"])) is None:
      module, name = job["task"].split(":")
      fn = functions[job["task"]] = getattr(importlib.import_module(module), name)
    try: _send(sys.stdout.buffer, b"\x00" + fn(*job["args"], src.decode()))
    except CompileError as e: _send(sys.stdout.buffer, b"\x01" + str(e).encode())
    except Exception as e: _send(sys.stdout.buffer, b"\x01" + f"{type(e).__name__} in compile worker: {e}".encode())  # noqa: BLE001 - the parent raises it

if __name__ == "__main__": _serve()
