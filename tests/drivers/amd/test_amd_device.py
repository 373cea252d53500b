"""The AMD driver against the MOCK AMD model (amdkfd, the PM4 front end, SDMA and the shader core executing the code
objects tg links), in this process: bring-up on RDNA3 and CDNA3, what the driver emits decoded with the model's own
tables, kernels checked against numpy, copies through the staging buffers, and faults reported with their address.
Queue ordering, patching and JIT graphs on AMD are tests/drivers/test_hcq.py, run with DEV=MOCK+AMD by
tests/tg/test_on_other_devices.py."""
import time
import numpy as np
import pytest
from ir.dtype import dtypes
from ir.switches import Context
from ir.uop import UOp
from codegen.program import get_program
from drivers.gpu_memory import GPUBuffer
from drivers.system import memoryview_at
from drivers.mock import mock_system
from drivers.mock.amd import packets as hw
from drivers.mock.amd.gpu import ARCHS
from drivers.mock.amd.kfd import UNSIGNALED, KFDModel
from drivers.amd import kfd, pm4, sdma
from drivers.amd.device import RING_BYTES, AMDDevice, cwsr_sizes, gpu_nodes
from tg import Tensor

def open_amd(arch: str = "gfx1100") -> tuple[AMDDevice, KFDModel]:
  model = KFDModel(arch, count=1)
  for prefix in KFDModel.prefixes: mock_system.register(prefix, model)
  with Context(DEV="MOCK+AMD"): return AMDDevice("AMD"), model

@pytest.fixture(params=["gfx1100", "gfx942"])
def amd(request):
  dev, model = open_amd(request.param)
  yield dev, model
  model.stop()

def upload(dev: AMDDevice, a: np.ndarray) -> GPUBuffer:
  buf = dev.allocator.alloc(max(a.nbytes, 1))
  dev.allocator.copyin(buf, memoryview(np.ascontiguousarray(a)).cast("B"))
  return buf

def download(dev: AMDDevice, buf: GPUBuffer, like: np.ndarray) -> np.ndarray:
  out = np.empty_like(like)
  dev.allocator.copyout(memoryview(out).cast("B"), buf)
  return out

def program_for(dev: AMDDevice, out: Tensor):
  """(program, spec, the buffers of its one kernel, the inputs uploaded) for `out` built from realized CPU tensors."""
  (item,) = out.schedule()
  spec = get_program(item.ast, dev.renderer)
  prg = dev.runtime(spec.name, dev.compiler.compile(spec.src), spec)
  bufs = [dev.allocator.alloc(item.bufs[0].nbytes)] + [upload(dev, np.frombuffer(b.as_bytes(), np.uint8)) for b in item.bufs[1:]]
  return prg, spec, bufs

# ---------------- bring-up ----------------
def test_the_gpu_is_found_in_the_models_topology(amd):
  dev, model = amd
  arch = model.gpus[0].arch
  (node,) = gpu_nodes(mock_system)
  assert dev.arch == arch.name and node.gpu_id == model.gpus[0].gpu_id and node.cus_per_xcc * node.xccs == arch.cu_count
  assert dev.renderer.arch == dev.compiler.arch == arch.name
  # the model reports UAPI 1.17, so the driver enabled the runtime; AMDKFD_IOWR(0x25, 16 bytes) as kfd_ioctl.h 1.14+ has it
  assert dev.kfd_version >= (1, 14) and model.runtime_enabled and kfd.RUNTIME_ENABLE == 0xC0104B25

@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_cwsr_sizes_agree_with_the_models(arch):
  """The driver sizes its queue's context-save area from the topology; the model computes what CREATE_QUEUE must get
  from kfd_queue.c on its own."""
  model = KFDModel(arch, count=1)
  for prefix in KFDModel.prefixes: mock_system.register(prefix, model)
  try:
    (node,) = gpu_nodes(mock_system)
    ctl_stack, save_restore, total = cwsr_sizes(node)
    a = model.gpus[0].arch
    assert (ctl_stack, save_restore, total) == (a.ctl_stack_size, a.cwsr_size, a.cwsr_buffer_size)
  finally: model.stop()

def test_a_dev_arch_that_isnt_the_gpus_is_an_error():
  model = KFDModel("gfx1100", count=1)
  for prefix in KFDModel.prefixes: mock_system.register(prefix, model)
  try:
    with Context(DEV="MOCK+AMD::gfx950"), pytest.raises(ValueError, match="DEV asks for gfx950, but AMD is a gfx1100"): AMDDevice("AMD")
  finally: model.stop()

# ---------------- what the driver emits, read with the model's tables ----------------
def packets(words: list[int]) -> list[tuple[str, list[int]]]:
  """The PM4 packets in `words` by the model's header layout and opcode names."""
  out, i = [], 0
  while i < len(words):
    kind, opcode, n = hw.pm4_header(words[i])
    assert kind == hw.PM4_TYPE3, f"word {i} ({words[i]:#x}) is no type-3 header"
    out.append((hw.OP_NAME[opcode], words[i + 1:i + 1 + n]))
    i += 1 + n
  return out

def test_compute_packets_have_the_models_lengths_and_registers(amd):
  dev, model = amd
  family = model.gpus[0].arch.family
  prg, spec, bufs = program_for(dev, Tensor(np.arange(16, dtype=np.float32)) + 1)
  sig = dev.new_signal()
  q = dev.compute_queue().wait(sig, 3).memory_barrier().exec(prg, prg.kernel_args(tuple(bufs), ()), spec.global_size, spec.local_size).signal(sig, 5)
  decoded = packets(q.resolved())
  names = [n for n, _ in decoded]
  assert names[:2] == ["WAIT_REG_MEM", "ACQUIRE_MEM"] and names[-3:] == ["EVENT_WRITE", "RELEASE_MEM", "RELEASE_MEM"]
  lengths = {"WAIT_REG_MEM": hw.WAIT_REG_MEM_PAYLOAD, "RELEASE_MEM": hw.RELEASE_MEM_PAYLOAD, "DISPATCH_DIRECT": hw.DISPATCH_DIRECT_PAYLOAD,
             "ACQUIRE_MEM": hw.ACQUIRE_MEM_PAYLOAD[family]}
  for name, payload in decoded:
    if name in lengths: assert len(payload) == lengths[name], name
  regs = {}
  for name, payload in decoded:
    if name == "SET_SH_REG":
      for k, v in enumerate(payload[1:]): regs[hw.SH_REG_START + payload[0] + k] = v
  code = regs[hw.REG["COMPUTE_PGM_LO"]] << 8 | regs[hw.REG["COMPUTE_PGM_HI"]] << 40
  assert code == prg.code_va and regs[hw.RSRC3[family]] == prg.rsrc3
  assert [regs[hw.REG[f"COMPUTE_NUM_THREAD_{a}"]] for a in "XYZ"] == list(spec.local_size)
  (dispatch,) = [p for n, p in decoded if n == "DISPATCH_DIRECT"]
  assert dispatch[:3] == list(spec.global_size) and bool(dispatch[3] >> hw.INIT_CS_W32_EN & 1) == (dev.arch != "gfx942")
  wait = decoded[0][1]
  assert hw.field(wait[0], *hw.WAIT_FUNCTION) == 5 and wait[1] | wait[2] << 32 == sig.va and wait[3] == 3  # >= 3 at the signal
  value, stamp = decoded[-1][1], decoded[-2][1]
  assert hw.field(value[1], *hw.RELEASE_DATA_SEL) == hw.DATA_SEL_64 and value[2] | value[3] << 32 == sig.va and value[4] == 5
  assert hw.field(stamp[1], *hw.RELEASE_DATA_SEL) == hw.DATA_SEL_CLOCK and stamp[2] | stamp[3] << 32 == sig.va + 8

def test_copy_packets_have_the_models_layout(amd):
  dev, model = amd
  family = model.gpus[0].arch.family
  src, dst = dev.allocator.alloc(64), dev.allocator.alloc(64)
  words = dev.copy_queue().copy(dst, src, 3 << 22).resolved()
  step = 1 << hw.SDMA_COPY_COUNT_BITS[family]
  assert sdma.max_copy(dev.gfx) == step
  chunks = [words[i:i + 7] for i in range(0, len(words), 7)]
  assert all(hw.SDMA_OP_NAME[c[0] & 0xFF] == "COPY" and (c[0] >> 8 & 0xFF) == hw.SDMA_SUBOP_COPY_LINEAR for c in chunks)
  assert sum(c[1] + 1 for c in chunks) == 3 << 22 and all(c[1] + 1 <= step for c in chunks)
  starts = np.cumsum([0] + [c[1] + 1 for c in chunks[:-1]])
  assert [c[5] | c[6] << 32 for c in chunks] == [dst.va + int(s) for s in starts] and [c[3] | c[4] << 32 for c in chunks] == [src.va + int(s) for s in starts]

def test_a_bound_queue_runs_from_an_indirect_buffer_and_patches_only_its_variables(amd):
  dev, _ = amd
  sig, x = dev.new_signal(), UOp.variable("x", 0, 1 << 30, dtypes.int64)
  q = dev.compute_queue().wait(dev.timeline_signal, 0).signal(sig, x).bind(dev)
  for value in (5, 9):
    q.submit(dev, {"x": value})
    ring = dev.rings["compute"]
    at = (ring.wptr - 4) % (RING_BYTES // 4)
    (name, payload), = packets([int(w) for w in ring.words[at:at + 4]])
    assert name == "INDIRECT_BUFFER" and payload[0] | payload[1] << 32 == q._commands.va
    assert hw.field(payload[2], *hw.IB_SIZE) == len(q._q) and payload[2] >> hw.IB_VALID & 1
    sig.wait(value)
    assert sig.value == value

def test_nop_fillers_are_what_the_model_skips():
  assert [hw.pm4_header(w)[1:] for w in pm4.nop(5)[:1]] == [(hw.OP["NOP"], 4)] and pm4.nop(1) == [hw.PM4_TYPE2_FILLER]

# ---------------- running ----------------
def test_copies_round_trip_through_the_staging_buffers(amd):
  dev, _ = amd
  a = np.random.default_rng(0).integers(0, 255, (5 << 20) + 3, dtype=np.uint8)  # more than two 2 MiB staging chunks
  assert np.array_equal(download(dev, upload(dev, a), a), a)

def test_a_kernel_runs_after_the_ring_wrapped(amd):
  dev, _ = amd
  ring = dev.rings["compute"]
  sig = dev.new_signal()
  n = 0
  while ring.wptr < RING_BYTES // 4 + 100:  # past the end of the ring: the tail is filled and the ring starts again
    n += 1
    dev.compute_queue().signal(sig, n).submit(dev)
  sig.wait(n)
  x = np.arange(300, dtype=np.float32)
  prg, spec, bufs = program_for(dev, Tensor(x) * 3 - 1)
  prg(*bufs, global_size=spec.global_size, local_size=spec.local_size)
  dev.synchronize()
  assert np.array_equal(download(dev, bufs[0], x), x * 3 - 1)

def test_kernel_times_come_from_the_gpu_clock(amd):
  dev, _ = amd
  prg, spec, bufs = program_for(dev, Tensor(np.ones(64, np.float32)).exp2())
  seconds = prg(*bufs, global_size=spec.global_size, local_size=spec.local_size, wait=True)
  assert 0 < seconds < 60

def test_kernels_use_the_callers_host_memory_in_place(amd):
  """Tensor.from_blob's memory: USERPTR at the caller's own address, whole pages, shared by buffers in the same
  pages, and left to the caller when the last of them goes."""
  dev, model = amd
  pages = np.zeros(3 * 4096 // 4, dtype=np.float32)
  base = pages.ctypes.data + (-pages.ctypes.data % 4096)  # page aligned, with a page to spare after it
  x, out = np.frombuffer(memoryview_at(base, 256), np.float32), np.frombuffer(memoryview_at(base + 512, 256), np.float32)
  x[:] = np.arange(64)
  prg, spec, _ = program_for(dev, Tensor(np.ones(64, np.float32)) + 1)
  inp, res = dev.allocator.wrap(base, 256), dev.allocator.wrap(base + 512, 256)
  (registered,) = [b for b in model.buffers.values() if b.flags & kfd.ALLOC_USERPTR]
  assert registered.va == registered.host == base and registered.size == 4096 and inp.va == base and res.va == base + 512
  prg(res, inp, global_size=spec.global_size, local_size=spec.local_size)
  dev.synchronize()
  assert np.array_equal(out, np.arange(64) + 1)
  with pytest.raises(ValueError, match="shares pages with memory already used in place"): dev.allocator.wrap(base + 4000, 200)
  dev.allocator.unwrap(inp)
  assert registered.handle in model.buffers, "another buffer still uses the page"
  dev.allocator.unwrap(res)
  assert registered.handle not in model.buffers and np.array_equal(out, np.arange(64) + 1)

def test_programs_are_written_through_the_bar_and_flushed_from_the_hdp(amd):
  """Code goes into CPU-visible video memory (PUBLIC) written by the CPU; the GPU runs it only after the driver's
  HDP flush: without one the model faults naming the code's address."""
  dev, model = amd
  prg, spec, bufs = program_for(dev, Tensor(np.ones(64, np.float32)) + 1)
  (image,) = [b for b in model.buffers.values() if b.va == prg.image.va]
  assert image.flags & kfd.ALLOC_VRAM and image.flags & kfd.ALLOC_PUBLIC
  x = np.arange(64, dtype=np.float32)
  prg(bufs[0], upload(dev, x), global_size=spec.global_size, local_size=spec.local_size)
  dev.synchronize()
  assert np.array_equal(download(dev, bufs[0], x), x + 1)
  dev.hdp_flush_cntl = np.zeros(1, np.uint32)  # a driver that writes its flushes nowhere
  prg2, spec2, bufs2 = program_for(dev, Tensor(np.ones(64, np.float32)) * 3)
  prg2(*bufs2, global_size=spec2.global_size, local_size=spec2.local_size)
  with pytest.raises(RuntimeError, match=f"GPU memory fault at {prg2.code_va & ~0xFFF:#x}"): dev.synchronize()
  assert "no HDP flush" in model.faults[-1]

def test_programs_go_through_the_copy_engine_when_the_bar_is_full(amd, monkeypatch):
  dev, model = amd
  alloc = dev.alloc_memory
  def no_visible_vram(size, host=False, uncached=False, cpu_access=False):
    if cpu_access: raise MemoryError("no CPU-visible video memory left")
    return alloc(size, host, uncached)
  monkeypatch.setattr(dev, "alloc_memory", no_visible_vram)
  prg, spec, bufs = program_for(dev, Tensor(np.ones(64, np.float32)) + 1)
  assert not [b for b in model.buffers.values() if b.va == prg.image.va][0].flags & kfd.ALLOC_PUBLIC
  x = np.arange(64, dtype=np.float32)
  prg(bufs[0], upload(dev, x), global_size=spec.global_size, local_size=spec.local_size)
  dev.synchronize()
  assert np.array_equal(download(dev, bufs[0], x), x + 1)

@pytest.mark.parametrize("engine", ["compute", "copy"])
def test_a_timeline_signal_raises_the_interrupt_of_the_wake_event(amd, engine):
  """amdkfd signals an event from an engine's interrupt only if the event's slot was written first; the model clears
  the slot again as it does."""
  dev, model = amd
  event = model.events[dev.wake_event]
  event.signaled = False
  dev.timeline_signal.idle = lambda: time.sleep(1e-4)  # this wait polls: it mustn't take the event itself
  queue = dev.compute_queue() if engine == "compute" else dev.copy_queue()
  queue.signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  dev.synchronize()
  slot, event_id = dev.timeline_signal.wake
  for _ in range(1000):  # the interrupt follows the timeline's value
    if event.signaled: break
    time.sleep(1e-3)
  assert event_id == dev.wake_event and event.signaled and model.slots()[event_id] == UNSIGNALED

def test_a_long_wait_sleeps_until_the_engines_interrupt(amd):
  """A wait that outlasts its spin blocks in WAIT_EVENTS, and the interrupt (not the WAIT_EVENTS timeout) ends it."""
  dev, _ = amd
  gate, results, sleep = dev.new_signal(), [], dev.sleep_until_woken
  def sleep_and_open_the_gate():
    results.append(sleep())
    gate.value = 1
  dev.sleep_until_woken = sleep_and_open_the_gate
  dev.timeline_signal.idle = dev.sleep_until_woken
  dev.compute_queue().wait(gate, 1).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  dev.synchronize()
  assert kfd.WAIT_RESULT_COMPLETE in results, results

def test_a_fault_names_the_address(amd):
  dev, model = amd
  prg, spec, bufs = program_for(dev, Tensor(np.ones(64, np.float32)) + 1)
  prg(bufs[0], GPUBuffer(0x7000_0000_0000, 256), global_size=spec.global_size, local_size=spec.local_size)
  with pytest.raises(RuntimeError, match="GPU memory fault at 0x7000000000"): dev.synchronize()
  x = np.arange(64, dtype=np.float32)  # the faulted queues were replaced: the device goes on
  prg(bufs[0], upload(dev, x), global_size=spec.global_size, local_size=spec.local_size)
  dev.synchronize()
  assert np.array_equal(download(dev, bufs[0], x), x + 1)

def test_an_instruction_the_model_cannot_run_is_named_on_stderr(amd, capfd):
  # a gap in the model, not a driver bug: the driver sees a fault as amdkfd reports it, the developer the reason
  dev, model = amd
  prg, spec, bufs = program_for(dev, Tensor(np.ones(64, np.float32)) + 1)
  at = prg.code_va - prg.image.va
  prg.image.view()[at:at + 4] = np.array([0x3F << 25 | 5 << 17 | 14 << 9 | 257], np.uint32).view(np.uint8)  # v_cvt_off_f32_i4 v5, v1
  prg(bufs[0], bufs[1], global_size=spec.global_size, local_size=spec.local_size)
  with pytest.raises(RuntimeError): dev.synchronize()
  assert "AMD model: VOP1 v_cvt_off_f32_i4 at address" in capfd.readouterr().err

def test_gpus_copy_from_each_other_on_the_destinations_sdma():
  model = KFDModel("gfx1100", count=2)
  for prefix in KFDModel.prefixes: mock_system.register(prefix, model)
  try:
    with Context(DEV="MOCK+AMD"): a, b = AMDDevice("AMD"), AMDDevice("AMD:1")
    assert b.can_transfer_from(a) and a.can_transfer_from(b)
    x = np.random.default_rng(1).standard_normal(3000).astype(np.float32)
    src, dst = upload(a, x), b.allocator.alloc(x.nbytes)
    b.transfer(dst, src, x.nbytes, a)
    b.synchronize()
    assert np.array_equal(download(b, dst, x), x)
    assert b.node.gpu_id in src.mapped_on  # mapped on the destination for its SDMA engine to read
  finally: model.stop()
