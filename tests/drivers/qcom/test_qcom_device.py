"""The QCOM driver against the MOCK kgsl model (kgsl's ioctls, the CP running the IBs tg submits, the ir3 core running
the kernels), in this process, on an a630 and an a740: bring-up, memory, what the queue's packets do, faults reported
with the model's reason, and kernels checked against numpy."""
import os, pathlib, subprocess, sys
import numpy as np
import pytest
from ir.dtype import dtypes
from ir.switches import Context
from ir.uop import UOp
from codegen.program import get_program
from drivers.gpu_memory import GPUBuffer
from drivers.device import DeviceUnavailable
from drivers.hcq import DeviceFault
from drivers.mock import mock_system
from drivers.mock.qcom.kgsl import KGSLModel
from drivers.qcom import cp, kgsl
from drivers.qcom.device import CONTEXT_FLAGS, QCOMDevice
from tg import Tensor

def open_qcom(arch: str) -> tuple[QCOMDevice, KGSLModel]:
  model = KGSLModel(arch)
  mock_system.register("/dev/kgsl", model)
  with Context(DEV="MOCK+QCOM"): return QCOMDevice("QCOM"), model

@pytest.fixture(params=["a630", "a740"])
def qcom(request):
  dev, model = open_qcom(request.param)
  yield dev, model
  model.stop()

def program_for(dev: QCOMDevice, out: Tensor):
  """(program, spec, output buffer, the inputs uploaded) for `out`'s one kernel, built from realized CPU tensors."""
  (item,) = out.schedule()
  spec = get_program(item.ast, dev.renderer)
  prg = dev.runtime(spec.name, dev.compiler.compile(spec.src), spec)
  ins = []
  for b in item.bufs[1:]:
    ins.append(dev.allocator.alloc(b.nbytes))
    dev.allocator.copyin(ins[-1], memoryview(b.as_bytes()))
  return prg, spec, dev.allocator.alloc(item.bufs[0].nbytes), ins

def download(dev: QCOMDevice, buf: GPUBuffer, like: np.ndarray) -> np.ndarray:
  out = np.empty_like(like)
  dev.allocator.copyout(memoryview(out).cast("B"), buf)
  return out

def run(dev: QCOMDevice, q) -> None:
  q.signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  dev.synchronize()

# ---------------- bring-up ----------------
def test_the_chip_id_picks_generation_arch_and_toolchain(qcom):
  dev, model = qcom
  assert (dev.chip_id, dev.arch, dev.gen) == (model.arch.chip_id, model.arch.name, model.arch.gen)
  assert dev.renderer.arch == dev.compiler.arch == dev.arch and dev.compute_queue_t.gen == dev.gen
  ctx = model.contexts[dev.ctx]
  assert ctx.flags & CONTEXT_FLAGS == CONTEXT_FLAGS, "the model kept every flag the driver asked for"

def test_a_dev_arch_that_isnt_the_gpus_is_an_error():
  model = KGSLModel("a630")
  mock_system.register("/dev/kgsl", model)
  with Context(DEV="MOCK+QCOM::a740"), pytest.raises(ValueError, match="a740.*a630.*0x06030001"): QCOMDevice("QCOM")
  with Context(DEV="MOCK+QCOM"), pytest.raises(DeviceUnavailable, match="one GPU"): QCOMDevice("QCOM:1")

def test_64_bit_dtypes_are_refused(qcom):
  dev, _ = qcom
  for dt in (dtypes.int64, dtypes.uint64, dtypes.float64):
    with pytest.raises(TypeError, match="QCOM can't hold"): dev.check_dtype(dt)

# ---------------- memory ----------------
def test_buffers_are_mapped_at_their_gpu_address_and_freed(qcom):
  dev, model = qcom
  buf = dev.alloc_memory(10000)
  entry = model.allocations[buf.handle]
  assert buf.va == buf.cpu == entry.gpuaddr and model.memory.find(buf.va, 10000) is not None and buf.size == 10000
  buf.view()[:4] = [1, 2, 3, 4]
  assert bytes(model.memory.view(buf.va, 4, "test")) == bytes([1, 2, 3, 4]), "the GPU sees what the CPU wrote"
  dev.free_memory(buf)
  assert buf.handle not in model.allocations and model.memory.find(buf.va, 1) is None

# ---------------- what the queue's packets do on the model's CP ----------------
def test_signal_wait_and_timestamp_run_on_the_cp(qcom):
  dev, model = qcom
  sig, gate, stamp = dev.new_signal("s"), dev.new_signal("gate"), dev.new_signal("t")
  q = dev.compute_queue().wait(gate, 3).timestamp(stamp).signal(sig, 0x1234)
  q.submit(dev)
  assert sig.value == 0 and model.contexts[dev.ctx].jobs, "the CP waits in CP_WAIT_REG_MEM for the gate"
  gate.value = 3
  sig.wait(0x1234, timeout_ms=5000)
  assert int(stamp.mem[1]) > 0 and sig.timestamp == 0  # the always-on counter went to +8 of the timestamp signal only
  dev.synchronize()

def test_a_barrier_runs_on_the_cp(qcom):
  dev, _ = qcom
  run(dev, dev.compute_queue().memory_barrier())

def test_a_bad_packet_is_a_device_fault_naming_it_and_the_device_goes_on(qcom):
  dev, model = qcom
  ctx = dev.ctx
  q = dev.compute_queue().q(*cp.pkt7(0x7E, 0))   # an opcode the CP doesn't run
  q.signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  with pytest.raises(DeviceFault, match=rf"kgsl context {ctx}.*0x7e.*guilty"): dev.synchronize()
  assert not model.contexts[dev.ctx].invalid and len(model.faults) == 1, "a new context replaced the invalidated one"
  run(dev, dev.compute_queue().signal(sig := dev.new_signal(), 7))
  assert sig.value == 7

def test_the_command_ring_wraps(qcom, monkeypatch):
  dev, _ = qcom
  monkeypatch.setattr(dev, "command_words", dev.command_words[:64])
  sig = dev.new_signal()
  for i in range(1, 20): dev.compute_queue().signal(sig, i).submit(dev)
  sig.wait(19, timeout_ms=5000)
  assert dev.command_at < 64

def test_busy_queues_names_the_retired_timestamp(qcom):
  dev, _ = qcom
  gate = dev.new_signal("gate")
  dev.compute_queue().wait(gate, 1).submit(dev)
  assert dev.busy_queues() == f"kgsl context {dev.ctx} retired timestamp {dev.last_timestamp - 1} of {dev.last_timestamp} submitted"
  gate.value = 1
  dev.wait_timestamp(dev.last_timestamp, 5000)
  assert dev.busy_queues() is None

def test_reset_status_is_kgsls(qcom):
  dev, _ = qcom
  assert kgsl.get_property(dev.system, dev.fd, kgsl.PROP_GPU_RESET_STAT, "unsigned int", dev.ctx) == kgsl.CTX_STAT_NO_ERROR

# ---------------- kernels ----------------
def test_a_kernel_matches_numpy_and_is_timed_by_the_gpu_clock(qcom):
  dev, _ = qcom
  x, y = np.arange(300, dtype=np.float32), np.linspace(-1, 1, 300, dtype=np.float32)
  prg, spec, out, ins = program_for(dev, Tensor(x) * Tensor(y) + 2)
  assert prg.lib.full_regs >= 2 and prg.instrlen == -(-len(prg.lib.code) // 128)
  took = prg(out, *ins, global_size=spec.global_size, local_size=spec.local_size, wait=True)
  assert np.allclose(download(dev, out, x), x * y + 2) and 0 < took < 5

def test_a_kernel_longer_than_the_instruction_cache_runs(qcom):
  # the CP preloads at most what the SP's instruction cache holds (Mesa instr_cache_size); a larger load hangs the GPU
  dev, model = qcom
  x = np.linspace(0.1, 1, 64, dtype=np.float32)
  y, ref = Tensor(x), x.astype(np.float64)
  for i in range(1, 120): y, ref = (y * 1.0001 + i).sqrt(), np.sqrt(ref * 1.0001 + i)
  prg, spec, out, ins = program_for(dev, y)
  assert prg.instrlen > 127
  prg(out, *ins, global_size=spec.global_size, local_size=spec.local_size, wait=True)
  np.testing.assert_allclose(download(dev, out, x), ref, rtol=1e-5)

def test_variables_follow_the_buffer_addresses_in_the_constant_file(qcom):
  dev, _ = qcom
  x = np.arange(64, dtype=np.float32)
  prg, spec, out, ins = program_for(dev, Tensor(x) + UOp.variable("n", 0, 100).bind(3))
  assert len(spec.vars) == 1 and prg.param_layout == [(0, 8), (8, 8), (16, 4)]  # c0.xy, c0.zw: the addresses; c1.x: n
  prg(out, *ins, global_size=spec.global_size, local_size=spec.local_size, vals=(7,), wait=True)
  assert np.array_equal(download(dev, out, x), x + 7)

def test_a_shader_page_fault_names_the_address(qcom):
  dev, model = qcom
  prg, spec, out, ins = program_for(dev, Tensor(np.ones(64, np.float32)) + 1)
  prg(GPUBuffer(0xDEAD0000, 256), *ins, global_size=spec.global_size, local_size=spec.local_size)
  with pytest.raises(DeviceFault, match=r"0xdead0000.*guilty"): dev.synchronize()
  prg(out, *ins, global_size=spec.global_size, local_size=spec.local_size, wait=True)  # a new context runs it
  assert np.array_equal(download(dev, out, np.ones(64, np.float32)), np.full(64, 2, np.float32))

JIT_REPLAYS = """
import numpy as np
from ir.uop import UOp
from tg import Device, Tensor, TinyJit
v = UOp.variable("k", 0, 100)
@TinyJit
def f(t, k): return ((t + k) * 2).realize()
dev = Device["QCOM"]
for i in range(4):
  x = Tensor(np.full(16, i, np.float32), device="QCOM").realize()
  before = dev.submissions
  y = f(x, v.bind(i + 1))
  assert np.array_equal(y.numpy(), np.full(16, (2 * i + 1) * 2, np.float32)), (i, y.numpy())
  print(dev.submissions - before)
"""

def test_a_jit_replay_is_one_submission_with_patched_inputs_and_variables():
  """In a process of its own (Device["QCOM"] stays open in the registry of the process that opened it)."""
  root = pathlib.Path(__file__).parents[3]
  run = subprocess.run([sys.executable, "-c", JIT_REPLAYS], cwd=root, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "DEV": "MOCK+QCOM", "PYTHONPATH": str(root)})
  assert run.returncode == 0, run.stderr[-3000:]
  assert run.stdout.split()[2:] == ["1", "1"], "a replay submits its graph's one bound IB"
