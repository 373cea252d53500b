"""The HCQ machinery on the software engines of CPU and PYTHON (and on the default device when it is another HCQ
device, e.g. NV under DEV=MOCK+NV): queue ordering, copies, patching, timeouts,
timestamps, bounded submission, PROFILE, and a TinyJit replay as one command buffer."""
import os, subprocess, sys, threading, time
import numpy as np
import pytest
from ir.dtype import dtypes
from ir.uop import UOp
from ir.switches import Context
from drivers.device import Buffer, Device
from drivers import hcq
from drivers.hcq import DeviceFault, HCQTimeoutError, PatchSlot, SoftwareEngine, SoftwareQueue, profile_events

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOFTWARE = ["CPU", "PYTHON"]
DEVICES = SOFTWARE + [d for d in [Device.DEFAULT] if d not in SOFTWARE]  # with DEV=MOCK+NV the NV driver runs them too
# a test of the CPU device in a process of its own: the main run has it, a DEV=... run would only repeat it
cpu_process = pytest.mark.skipif(Device.DEFAULT != "CPU", reason="runs the CPU device in a subprocess, as the DEV=CPU run does")

@pytest.mark.parametrize("name", DEVICES)
def test_wait_on_another_queue_orders_execution(name):
  dev = Device[name]
  if dev.copy_queue_t is None: pytest.skip(f"{name} has no copy engine: its copy queue runs on the compute ring, behind the wait")
  gate, done = dev.new_signal("gate"), dev.new_signal("done")
  dev.compute_queue().wait(gate, 1).signal(done, 7).submit(dev)
  time.sleep(0.05)
  assert done.value == 0, "the compute queue must wait for the gate"
  dev.copy_queue().signal(gate, 1).submit(dev)
  done.wait(7, timeout_ms=2000)
  assert done.value == 7 and done.timestamp >= gate.timestamp

@pytest.mark.parametrize("name", DEVICES)
def test_copy_queue_round_trip(name):
  dev = Device[name]
  src, mid, dst = (Buffer(name, 64, dtypes.int32).ensure_allocated() for _ in range(3))
  src.copyin(memoryview(np.arange(64, dtype=np.int32)))
  sig = dev.new_signal()
  dev.copy_queue().copy(mid._buf, src._buf, 256).signal(sig, 1).submit(dev)
  dev.copy_queue().wait(sig, 1).copy(dst._buf, mid._buf, 256).signal(sig, 2).submit(dev)
  sig.wait(2, timeout_ms=2000)
  assert np.frombuffer(dst.as_bytes(), np.int32).tolist() == list(range(64))

@pytest.mark.parametrize("name", DEVICES)
def test_patching_between_submits(name):
  dev = Device[name]
  sig = dev.new_signal()
  v = UOp.variable("v", 0, 1000)
  q = dev.compute_queue().signal(sig, v * 2 + 1).bind(dev)
  for value in (3, 10, 250):
    q.submit(dev, {"v": value})
    dev.compute_queue().signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
    dev.synchronize()
    assert sig.value == value * 2 + 1

@pytest.mark.parametrize("name", DEVICES)
def test_kernel_arguments_patched_between_submits(name):
  from tg import Tensor
  dev = Device[name]
  from tg.realize import get_runner
  a = Tensor(np.arange(8, dtype=np.float32), device=name).realize()
  (item,) = (a * 3).schedule()
  runner, scalars = get_runner(name, item.ast)  # out[i] = in[i] * 3 (3 may be an argument, if `* c` was compiled before)
  out = Buffer(name, 8, dtypes.float32).ensure_allocated()
  ins = [Buffer(name, 8, dtypes.float32).copyin(memoryview(np.full(8, k, np.float32))) for k in (1.0, 5.0)]
  q = dev.compute_queue().exec(runner.prg, runner.prg.kernel_args((out._buf, PatchSlot("src")), tuple(scalars[v.arg[0]] for v in runner.spec.vars)), runner.spec.global_size, runner.spec.local_size)
  for k, buf in zip((1.0, 5.0), ins):
    q.submit(dev, {"src": buf._buf})
    dev.compute_queue().signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
    assert np.frombuffer(out.as_bytes(), np.float32).tolist() == [k * 3] * 8

@pytest.mark.parametrize("name", DEVICES)
def test_timeout_names_signal_and_device_stays_usable(name):
  dev = Device[name]
  never = dev.new_signal("never")
  with pytest.raises(HCQTimeoutError, match=rf"{name}: never is 0, waited 50 ms for 1"): never.wait(1, timeout_ms=50)
  dev.compute_queue().wait(never, 1).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  with pytest.raises(HCQTimeoutError): dev.synchronize(timeout_ms=100)
  never.value = 1  # let the stuck engine finish its queue
  from tg import Tensor
  assert (Tensor([1.0, 2.0], device=name) * 2).tolist() == [2.0, 4.0]

@pytest.mark.parametrize("name", SOFTWARE)  # tests/drivers/nv has the NV form: a faulting kernel
def test_failing_command_is_reported_without_waiting_for_the_timeout(name):
  class Broken:
    def execute(self, args, global_size, local_size): raise ValueError("kernel exploded")
  dev = Device[name]
  dev.compute_queue().exec(Broken(), [], (1, 1, 1), (1, 1, 1)).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  start = time.perf_counter()
  with pytest.raises(RuntimeError, match=f"{name} compute engine: ValueError: kernel exploded"): dev.synchronize(timeout_ms=120000)
  assert time.perf_counter() - start < 60  # well before the timeout, with room for a machine busy with other test runs
  dev.synchronize()  # the failure is reported once and the device goes on

@pytest.mark.parametrize("name", DEVICES)
def test_timestamps_increase(name):
  dev = Device[name]
  sigs = [dev.new_signal() for _ in range(3)]
  q = dev.compute_queue()
  for s in sigs: q.timestamp(s)
  q.signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  dev.synchronize()
  ts = [s.timestamp for s in sigs]
  assert ts[0] > 0 and ts == sorted(ts)

def test_bounded_submission_waits_for_space():
  dev = Device["CPU"]
  engine = SoftwareEngine(dev, "test", depth=2)
  gate, seen = dev.new_signal("gate"), dev.new_signal("seen")
  engine.submit(["wait", gate, 1])
  engine.submit(["signal", seen, 1])
  engine.submit(["signal", seen, 2])  # the engine holds one, two wait in the queue: full
  submitted = threading.Event()
  t = threading.Thread(target=lambda: (engine.submit(["signal", seen, 3]), submitted.set()))
  t.start()
  assert not submitted.wait(0.1), "a full queue makes the submitter wait"
  gate.value = 1
  assert submitted.wait(2)
  seen.wait(3, timeout_ms=2000)

class Recorder:
  """A program that notes its tag and the thread it runs on in a shared log."""
  def __init__(self, log: list, tag: int): self.log, self.tag = log, tag
  def execute(self, args, global_size, local_size): self.log.append((self.tag, threading.current_thread().name))

@pytest.mark.parametrize("name", SOFTWARE)
def test_an_idle_engine_runs_a_list_on_the_submitters_thread(name):
  dev, log = Device[name], []
  dev.synchronize()
  dev.compute_queue().exec(Recorder(log, 0), [], (1, 1, 1), (1, 1, 1)).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  assert log == [(0, threading.current_thread().name)], "it has run, here, when submit returns"
  assert dev.timeline_signal.value == dev.timeline_value - 1

@pytest.mark.parametrize("name", SOFTWARE)
def test_lists_that_wait_or_queue_behind_others_run_in_order_on_the_engines_thread(name):
  dev, log = Device[name], []
  gate = hold(dev)  # unmet: the submitter doesn't wait for it
  for k in range(3): dev.compute_queue().exec(Recorder(log, k), [], (1, 1, 1), (1, 1, 1)).submit(dev)
  assert log == [], "nothing may pass the gate"
  gate.value = 1
  dev.compute_queue().signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  dev.synchronize()
  assert log == [(k, f"tg-{name}-compute") for k in range(3)]

@pytest.mark.parametrize("name", SOFTWARE)
def test_a_list_runs_here_up_to_its_first_unmet_wait_and_on_the_engines_thread_from_there(name):
  """An idle engine runs a list on the submitter's thread until a wait that isn't met; the rest, and lists submitted
  after it, run in order on the engine's thread once the wait is met."""
  dev, log = Device[name], []
  dev.synchronize()
  gate, here = dev.new_signal("gate"), threading.current_thread().name
  q = dev.compute_queue().exec(Recorder(log, 0), [], (1, 1, 1), (1, 1, 1)).wait(gate, 1)
  q.exec(Recorder(log, 1), [], (1, 1, 1), (1, 1, 1)).submit(dev)
  dev.compute_queue().exec(Recorder(log, 2), [], (1, 1, 1), (1, 1, 1)).submit(dev)
  try: assert log == [(0, here)], "the submitter ran the command before the wait, and nothing after it"
  finally: gate.value = 1  # (a failure leaves the engine free for the tests after it)
  dev.compute_queue().signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  dev.synchronize()
  assert log == [(0, here), (1, f"tg-{name}-compute"), (2, f"tg-{name}-compute")]

@pytest.mark.parametrize("name", SOFTWARE)
def test_an_interrupt_during_a_list_on_the_submitters_thread_reaches_it_and_the_device_goes_on(name):
  class Interrupted:
    def execute(self, args, global_size, local_size): raise KeyboardInterrupt
  dev = Device[name]
  dev.synchronize()
  with pytest.raises(KeyboardInterrupt):
    dev.compute_queue().exec(Interrupted(), [], (1, 1, 1), (1, 1, 1)).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  start = time.perf_counter()
  with pytest.raises(DeviceFault, match=f"{name} compute engine: KeyboardInterrupt"): dev.synchronize(timeout_ms=120000)
  assert time.perf_counter() - start < 60, "the interrupted list's timeline value is given up, not waited for"
  from tg import Tensor
  assert (Tensor([1.0, 2.0], device=name) * 2).tolist() == [2.0, 4.0]

@pytest.mark.parametrize("name", SOFTWARE)
def test_a_wait_for_a_software_engine_sleeps_until_the_engine_signals(name, monkeypatch):
  """A waiter past its spinning sleeps on the condition the engines notify: it wakes once, when the engine writes (a
  poller would wake every few tens of microseconds; a waiter the engine didn't wake would sleep NOTIFIED_SLEEP_S)."""
  monkeypatch.setattr(hcq, "NOTIFIED_SLEEP_S", 60.0)
  dev = Device[name]
  gate, done = dev.new_signal("gate"), dev.new_signal("done")
  dev.compute_queue().wait(gate, 1).signal(done, 1).submit(dev)
  sleeps = []
  sleep = done.idle
  done.idle = lambda: (sleeps.append(1), sleep())
  waiter = threading.Thread(target=done.wait, args=(1,))
  waiter.start()
  deadline = time.monotonic() + 30
  while not sleeps and time.monotonic() < deadline: time.sleep(0.01)  # it spins first (1000 yields: long on a loaded machine)
  assert sleeps, "the waiter never went to sleep"
  dev.copy_queue().signal(gate, 1).submit(dev)  # the copy engine's write wakes the compute engine, whose write wakes the waiter
  waiter.join(timeout=30)
  assert not waiter.is_alive(), "the engine's write didn't wake the waiter"
  # once before the gate, once between the two writes, maybe once for another engine's write: not hundreds of polls
  assert done.value == 1 and len(sleeps) <= 5, f"the waiter slept {len(sleeps)} times"

def test_profile_records_kernels(tmp_path):
  from tg import Tensor
  before = len(profile_events)
  with Context(PROFILE=1): (Tensor.ones(16, device="CPU").contiguous() + 1).realize()
  new = profile_events[before:]
  assert new and all(e.end_us >= e.start_us and e.device == "CPU" for e in new)

def three_kernels(x):
  """(x + 1)**2 - x as three kernels (each step made contiguous)."""
  y = (x + 1).contiguous()
  z = (y * y).contiguous()
  return z - x

@pytest.mark.parametrize("name", DEVICES)
def test_profile_records_each_kernel_of_a_jit_replay(name):
  """A graph captured under PROFILE stamps each of its kernels: every replay adds one event per kernel, in order,
  each ending before the next starts (one queue)."""
  from tg import Tensor, TinyJit
  with Context(PROFILE=1):
    step = TinyJit(lambda x: three_kernels(x).realize())
    for i in range(4):
      before = len(profile_events)
      out = step(Tensor(np.full(32, float(i), np.float32), device=name).realize())
      new = [e for e in profile_events[before:] if e.device == Device[name].device]
  assert out.tolist() == [(3 + 1) ** 2 - 3] * 32
  assert len(new) == 3 and all(e.start_us <= e.end_us for e in new), new
  assert all(a.end_us <= b.start_us for a, b in zip(new, new[1:])), new

@pytest.mark.parametrize("name", DEVICES)
def test_jit_replay_is_one_command_buffer(name):
  from tg import Tensor, TinyJit
  dev = Device[name]
  step = TinyJit(lambda x: three_kernels(x).sum())
  for i in range(5):
    x = Tensor(np.full(32, float(i), np.float32), device=name).realize()
    before = dev.submissions
    out = step(x)
    submitted = dev.submissions - before
    assert out.item() == 32 * ((i + 1) ** 2 - i)
    if i >= 2: assert submitted == 1, "a replay submits one prebuilt queue"

def test_multi_device_jit_waits_across_devices():
  from tg import Tensor, TinyJit
  cpu, py = Device["CPU"], Device["PYTHON"]
  @TinyJit
  def f(x):
    y = (x * 2).contiguous()
    w = (y.to("PYTHON") + 1).contiguous()
    return w.to("CPU").sum()
  for i in range(5):
    before = (cpu.submissions, py.submissions)
    assert f(Tensor(np.full(8, float(i), np.float32))).item() == 8 * (2 * i + 1)
    if i >= 2: assert (cpu.submissions - before[0], py.submissions - before[1]) == (1, 1)

def test_transfer_between_devices_on_copy_engine():
  from tg import Tensor
  x = Tensor(np.arange(6, dtype=np.float32), device="CPU")
  before = Device["PYTHON"].submissions
  y = x.to("PYTHON").realize()
  assert Device["PYTHON"].submissions > before and y.tolist() == list(range(6))

def test_failed_graph_submit_gives_back_the_timeline_value(monkeypatch):
  from tg import Tensor, TinyJit
  import drivers.hcq as hcq
  dev = Device["CPU"]
  @TinyJit
  def step(x): return (x + 1).contiguous() * 2
  for i in range(3): step(Tensor(np.full(8, float(i), np.float32), device="CPU").realize()).realize()  # captured, then replayed as a graph
  x = Tensor(np.ones(8, np.float32), device="CPU").realize()
  def broken(self, dev, var_vals=None): raise RuntimeError("patching failed")
  monkeypatch.setattr(hcq.SoftwareQueue, "submit", broken)
  with pytest.raises(RuntimeError, match="patching failed"): step(x)
  monkeypatch.undo()
  start = time.perf_counter()
  dev.synchronize(timeout_ms=120000)
  assert time.perf_counter() - start < 60, "no timeline value is left waiting for a submit that never happened"
  assert step(x).tolist() == [4.0] * 8

@cpu_process
def test_exiting_while_a_kernel_runs_waits_for_it(tmp_path):
  """The interpreter exits right after queueing a long single-threaded kernel: exit waits for the compute engine
  instead of unmapping the kernel's code (or freeing its buffers) under it."""
  script = tmp_path / "exit_during_kernel.py"
  script.write_text("from tg import Device, Tensor\nx = Tensor.ones(3072, 3072).contiguous().realize()\n"
                    "dev = Device['CPU']\ngate = dev.new_signal('gate')\ndev.compute_queue().wait(gate, 1).submit(dev)\n"
                    "y = (x @ x).realize()  # queued behind the gate; not waited for\ngate.value = 1\n")
  env = {**os.environ, "NUM_CPU_THREADS": "1", "PYTHONPATH": ROOT, "DEV": "CPU"}
  for _ in range(2):
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]

def hold(dev):
  """A gate the compute engine waits for: what is submitted after it queues for the engine's own thread (an idle
  engine runs a list on the submitter's thread) until the gate's value is 1."""
  gate = dev.new_signal("gate")
  dev.compute_queue().wait(gate, 1).submit(dev)
  return gate

class Sleeper:
  """A program whose execution takes `seconds` (a kernel longer than the wait timeout); `started` is set when it runs,
  on the thread `log` names."""
  def __init__(self, seconds: float): self.seconds, self.started, self.log = seconds, threading.Event(), []
  def execute(self, args, global_size, local_size):
    self.log.append(threading.current_thread().name)
    self.started.set()
    time.sleep(self.seconds)

@pytest.mark.parametrize("name", SOFTWARE)
def test_a_kernel_longer_than_the_timeout_is_no_timeout(name):
  dev = Device[name]
  with Context(HCQDEV_WAIT_TIMEOUT_MS=30):
    start = time.perf_counter()
    gate = hold(dev)
    for _ in range(2): dev.compute_queue().exec(Sleeper(0.3), [], (1, 1, 1), (1, 1, 1)).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
    gate.value = 1
    dev.synchronize()
    assert time.perf_counter() - start >= 0.6

@pytest.mark.parametrize("name", SOFTWARE)
def test_a_list_running_on_its_submitters_thread_is_no_timeout_for_others(name):
  dev, done = Device[name], Device[name].new_signal("done")
  dev.synchronize()
  kernel = Sleeper(0.4)
  submitter = threading.Thread(target=lambda: dev.compute_queue().exec(kernel, [], (1, 1, 1), (1, 1, 1)).signal(done, 1).submit(dev))
  submitter.start()
  assert kernel.started.wait(60)
  done.wait(1, timeout_ms=30)  # the engine runs a list (on the submitter's thread): working, not stuck
  submitter.join()
  assert kernel.log == [submitter.name]

def test_waiting_on_another_device_that_is_working_is_no_timeout():
  cpu, py = Device["CPU"], Device["PYTHON"]
  done = py.new_signal("done")
  with Context(HCQDEV_WAIT_TIMEOUT_MS=30):
    gate = hold(py)
    py.compute_queue().exec(kernel := Sleeper(0.4), [], (1, 1, 1), (1, 1, 1)).signal(done, 1).submit(py)
    gate.value = 1
    cpu.compute_queue().wait(done, 1).signal(cpu.timeline_signal, cpu.next_timeline()).submit(cpu)
    assert kernel.started.wait(60)  # PYTHON is working (on a busy machine its engine may take longer than 30 ms to start)
    cpu.synchronize()  # CPU's engine waits for PYTHON's, which is running a kernel
    assert done.value == 1

@pytest.mark.parametrize("name", SOFTWARE)
def test_timeout_names_the_stuck_queue_and_what_it_waits_for(name):
  dev = Device[name]
  never = dev.new_signal("never")
  dev.compute_queue().wait(never, 1).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  with Context(HCQDEV_WAIT_TIMEOUT_MS=80):
    start = time.perf_counter()
    with pytest.raises(HCQTimeoutError, match=rf"{name}: timeline is \d+, waited 80 ms for \d+; {name} compute engine waits for never of {name} \(at 0\) to reach 1"):
      dev.synchronize()
    assert time.perf_counter() - start < 60  # the 80 ms timeout, not a hang (room for a busy machine)
  never.value = 1
  dev.synchronize()

@cpu_process
def test_long_cpu_kernel_with_a_short_timeout_from_the_environment():
  """A reduction of 2**32 ones takes far longer than 10 ms: it completes, and the process exits when it is done."""
  code = "import time; from tg import Tensor\nx = Tensor.ones(2**32).sum()\nstart = time.perf_counter()\nprint(x.item(), time.perf_counter() - start)\n"
  env = {**os.environ, "HCQDEV_WAIT_TIMEOUT_MS": "10", "PYTHONPATH": ROOT, "DEV": "CPU"}
  start = time.perf_counter()
  done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
  total = time.perf_counter() - start
  assert done.returncode == 0, done.stderr[-2000:]
  value, seconds = done.stdout.split()
  assert float(value) == 2**32 and float(seconds) > 0.05, done.stdout
  assert total < float(seconds) + 30, "the process exits promptly once the kernel is done"
