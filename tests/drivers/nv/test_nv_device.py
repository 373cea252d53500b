"""The NV driver against the MOCK NV model, in this process: bring-up on every modelled architecture and both driver
branches, kernels (PTX rendered by tg, run by the model's PTX interpreter) checked against numpy, copies through the
staging buffers, and the errors a user or a driver bug can cause (the model checks what nvidia.ko does).
Queue ordering, patching and JIT graphs on NV are tests/drivers/test_hcq.py, run with DEV=MOCK+NV by tests/tg/test_on_other_devices.py."""
import time
import numpy as np
import pytest
from ir.switches import Context
from codegen.program import get_program
from codegen.compiler import CompileError
from drivers.device import DeviceUnavailable
from drivers.hcq import HCQTimeoutError
from drivers.mock import mock_system
from drivers.mock.nv.gpu import ARCHS
from drivers.mock.nv.model import NVModel
from drivers.nv import qmd, rm_abi as nv
from drivers.nv.device import NVDevice
from drivers.gpu_memory import GPUBuffer
from drivers.nv.rm import RMError
from tg import Tensor

def open_nv(arch: str = "hopper", driver: str = "580.159.03") -> tuple[NVDevice, NVModel]:
  model = NVModel(arch, driver)
  mock_system.register("/dev/nvidia", model)
  with Context(DEV="MOCK+NV"): return NVDevice("NV"), model

def open_gpus(count: int = 2, link: str = "pcie") -> tuple[list[NVDevice], NVModel]:
  """`count` NV devices on a fresh model whose GPUs are joined by `link` (pcie, nvlink, none)."""
  model = NVModel("hopper", count=count, link=link)
  mock_system.register("/dev/nvidia", model)
  with Context(DEV="MOCK+NV"): return [NVDevice(f"NV:{i}") for i in range(count)], model

@pytest.fixture
def nvdev(request):
  dev, model = open_nv(*getattr(request, "param", ("hopper",)))
  yield dev, model
  model.gpu.stop()

def upload(dev: NVDevice, a: np.ndarray) -> GPUBuffer:
  buf = dev.allocator.alloc(max(a.nbytes, 1))
  dev.allocator.copyin(buf, memoryview(np.ascontiguousarray(a)).cast("B"))
  return buf

def download(dev: NVDevice, buf: GPUBuffer, like: np.ndarray) -> np.ndarray:
  out = np.empty_like(like)
  dev.allocator.copyout(memoryview(out).cast("B"), buf)
  return out

def load(dev: NVDevice, out: Tensor):
  """The one kernel of `out`'s schedule (built from realized CPU tensors), compiled and loaded on dev: (program, spec, item)."""
  (item,) = out.schedule()
  spec = get_program(item.ast, dev.renderer)
  return dev.runtime(spec.name, dev.compiler.compile(spec.src), spec), spec, item

def run_on(dev: NVDevice, out: Tensor) -> np.ndarray:
  """Runs `out`'s one kernel on dev."""
  prg, spec, item = load(dev, out)
  bufs = [dev.allocator.alloc(item.bufs[0].nbytes)] + [upload(dev, np.frombuffer(b.as_bytes(), np.uint8)) for b in item.bufs[1:]]
  prg(*bufs, global_size=spec.global_size, local_size=spec.local_size)
  dev.synchronize()
  return download(dev, bufs[0], np.zeros(out.shape, np.float32))

SM = {"ampere": "86", "ada": "89", "hopper": "90a", "blackwell": "100"}  # Hopper code is sm_90a, the target with wgmma
QMD = {"ampere": "V03_00", "ada": "V03_00", "hopper": "V04_00", "blackwell": "V05_00"}

@pytest.mark.parametrize("nvdev", [(arch,) for arch in ARCHS], indirect=True, ids=list(ARCHS))
def test_bring_up_and_kernels_on_every_architecture(nvdev):
  dev, model = nvdev
  arch = model.gpu.arch
  assert dev.arch == f"sm_{SM[arch.name]}" and dev.compute_class == arch.compute and dev.dma_class == arch.dma
  assert dev.qmd_layout.version == QMD[arch.name] == qmd.qmd_version_for_class(arch.compute)
  rng = np.random.default_rng(0)
  x, y = rng.standard_normal((48, 40)).astype(np.float32), rng.standard_normal((40, 24)).astype(np.float32)
  np.testing.assert_allclose(run_on(dev, (Tensor(x) @ Tensor(y)).relu()), np.maximum(x @ y, 0), rtol=1e-5, atol=1e-5)
  big = rng.standard_normal(5000).astype(np.float32)
  np.testing.assert_allclose(run_on(dev, Tensor(big).sum()), big.sum(dtype=np.float64), rtol=1e-5, atol=1e-4)  # a shared-memory reduction
  assert model.faults == []

def test_a_queue_runs_its_kernels_in_order_although_the_gpu_overlaps_grids(nvdev, monkeypatch):
  """b = a + 1, then c = b * 2, queued back to back: the second launch must wait for the first, since the GPU (and
  the model, after an H200 showed it) runs grids launched without a wait for idle at the same time."""
  dev, model = nvdev
  a = np.arange(256, dtype=np.float32)
  (add, add_spec, _), (double, double_spec, _) = load(dev, Tensor(a) + 1), load(dev, Tensor(a) * 2)
  def run() -> np.ndarray:
    src, mid, out = upload(dev, a), upload(dev, np.zeros_like(a)), upload(dev, np.zeros_like(a))
    q = dev.compute_queue().wait(dev.timeline_signal, dev.timeline_value - 1).memory_barrier()
    q.exec(add, add.kernel_args((mid, src), ()), add_spec.global_size, add_spec.local_size)
    q.exec(double, double.kernel_args((out, mid), ()), double_spec.global_size, double_spec.local_size)
    q.signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
    dev.synchronize()
    return download(dev, out, a)
  np.testing.assert_array_equal(run(), (a + 1) * 2)
  launch = type(dev.compute_queue()).exec
  def without_waiting(q, *args):  # a driver that lets a launch follow another without waiting for idle
    q._grid_unordered = False
    return launch(q, *args)
  monkeypatch.setattr(type(dev.compute_queue()), "exec", without_waiting)
  np.testing.assert_array_equal(run(), a * 0)  # the second grid read `mid` before the first wrote it
  assert model.faults == []

def test_570_driver_branch_brings_up():
  dev, model = open_nv("ampere", "570.211.01")
  try:
    assert dev.rm.abi.branch == "570" and dev.rm.version == "570.211.01"
    a = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(run_on(dev, Tensor(a) * 2 + 1), a * 2 + 1)
  finally: model.gpu.stop()

def test_unsupported_driver_version_is_named():
  mock_system.register("/dev/nvidia", NVModel("hopper", "535.183.01"))
  with Context(DEV="MOCK+NV"), pytest.raises(RMError, match=r"unsupported NVIDIA driver version '535\.183\.01'"): NVDevice("NV")

def test_missing_uvm_module_is_a_clear_device_unavailable():
  mock_system.register("/dev/nvidia", NVModel("hopper", uvm=False))
  with Context(DEV="MOCK+NV"), pytest.raises(DeviceUnavailable, match=r"can't open /dev/nvidia-uvm .*modprobe nvidia-uvm"): NVDevice("NV")

def test_missing_ptx_compiler_is_a_compile_error_naming_both_tools(monkeypatch):
  import codegen.ptx_compiler as pc
  monkeypatch.setattr(pc, "find_ptxas", lambda: None)
  monkeypatch.setattr(pc, "find_nvjitlink", lambda: None)
  model = NVModel("hopper")
  monkeypatch.setattr(model, "toolchain", lambda arch: None)  # the machine's own compilers, of which there are none
  mock_system.register("/dev/nvidia", model)
  try:
    with Context(DEV="MOCK+NV"): dev = NVDevice("NV")
    (item,) = (Tensor(np.ones(4, np.float32)) * 3).schedule()
    with pytest.raises(CompileError, match="neither ptxas nor nvJitLink"): dev.compiler.compile(get_program(item.ast, dev.renderer).src)
  finally: model.gpu.stop()

@pytest.mark.parametrize("size", [1, 4096 + 3, (5 << 20) + 7])
def test_copies_round_trip_through_staging(nvdev, size):
  dev, _ = nvdev
  data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
  a = upload(dev, data)
  b = dev.allocator.alloc(size)
  dev.allocator.engine_copy(b, a, size)
  dev.synchronize()
  np.testing.assert_array_equal(download(dev, b, data), data)

def test_a_hang_times_out_naming_the_signal_and_the_stuck_channel(nvdev):
  dev, model = nvdev
  never = dev.new_signal("never")
  dev.compute_queue().wait(never, 1).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  with pytest.raises(HCQTimeoutError, match=r"NV: timeline is \d+, waited 200 ms for \d+; stuck: compute channel 0x[0-9a-f]+ at GPFIFO entry"):
    dev.synchronize(timeout_ms=200)
  never.value = 1  # the wait is satisfied: the channel goes on
  dev.compute_queue().signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  dev.synchronize()
  assert model.faults == []

@pytest.mark.parametrize("register, token", [(0x94, None), (None, 0x7777)])
def test_a_channel_starts_only_when_its_doorbell_rings(monkeypatch, register, token):
  """The GPU runs a channel once its work-submit token is written to NOTIFY_CHANNEL_PENDING: a driver ringing the
  wrong register, or with a wrong token, never gets its work run."""
  import drivers.nv.device as nvd
  if register is not None: monkeypatch.setattr(nvd, "DOORBELL", register)
  if token is not None: monkeypatch.setattr(nvd.Channel, "token", property(lambda self: token, lambda self, v: None), raising=False)
  dev, model = open_nv()
  try:
    dev.compute_queue().signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
    with pytest.raises(HCQTimeoutError, match="stuck: compute channel"): dev.synchronize(timeout_ms=300)
    assert not any(ch.started for ch in model.gpu.channels)
    assert (token is None) == (model.faults == []), model.faults
  finally: model.gpu.stop()

def test_a_ring_overwritten_before_the_gpu_looked_still_runs_its_channel():
  """Two doorbell writes land before the model reads the register (a busy machine): the hardware saw both, so both
  channels run; the compute channel's ring is the one overwritten here."""
  dev, model = open_nv()
  try:
    with model.gpu.lock:  # the model's poll thread can't look until both rings are written
      dev.compute_queue().signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
      dev.copy_queue().signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
    dev.synchronize(timeout_ms=5000)
    assert model.faults == [] and all(ch.started for ch in model.gpu.channels)
  finally: model.gpu.stop()

def test_freed_memory_leaves_the_gpu_page_table(nvdev):
  dev, model = nvdev
  maps, used = len(model.gpu.maps), model.vram_used[0]
  buf = dev.alloc_memory(3 << 20)
  assert len(model.gpu.maps) == maps + 1 and model.vram_used[0] == used + (4 << 20)  # rounded up to 2 MiB pages
  dev.free_memory(buf)
  assert len(model.gpu.maps) == maps and model.vram_used[0] == used
  with pytest.raises(MemoryError, match=r"out of video memory for 17179869184 bytes"): dev.alloc_memory(16 << 30)

def test_unmapped_pointer_faults_the_channel_and_is_reported(nvdev):
  dev, model = nvdev
  t = Tensor.empty(16)
  (item,) = (t + 1).schedule()
  spec = get_program(item.ast, dev.renderer)
  prg = dev.runtime(spec.name, dev.compiler.compile(spec.src), spec)
  good = dev.allocator.alloc(64)
  prg(good, GPUBuffer(0x7000_0000_0000, 64), global_size=spec.global_size, local_size=spec.local_size)
  start = time.perf_counter()
  with pytest.raises((RuntimeError, HCQTimeoutError), match="error notifier status 0xffff, info 31"): dev.synchronize(timeout_ms=120000)
  assert time.perf_counter() - start < 60, "a channel error is reported without waiting for the timeout"
  assert len(model.faults) == 1 and "MMU fault" in model.faults[0] and "0x700000000000" in model.faults[0]

def test_model_checks_what_the_kernel_module_checks(nvdev):
  dev, model = nvdev
  rm = dev.rm
  with pytest.raises(RMError, match="NV_ERR_INVALID_PARAM_STRUCT"):  # a params struct of the wrong size (another branch's layout)
    rm.alloc(dev.device_handle, nv.FERMI_VASPACE_A, rm.abi.new("NV_CTXSHARE_ALLOCATION_PARAMETERS"), "NV_CTXSHARE_ALLOCATION_PARAMETERS")
  with pytest.raises(RMError, match="NV_ERR_INVALID_OBJECT_PARENT"): rm.alloc_with(dev.subdevice, nv.KEPLER_CHANNEL_GROUP_A, "NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS")
  with pytest.raises(RMError, match="NV_ERR_INVALID_CLASS"): rm.alloc(dev.device_handle, nv.BLACKWELL_COMPUTE_B)
  with pytest.raises(RMError, match="NV_ERR_INVALID_OBJECT_HANDLE"): rm.control(dev.device_handle, nv.NV2080_CTRL_CMD_GR_GET_INFO, "NV2080_CTRL_GR_GET_INFO_PARAMS")
  with pytest.raises(RMError, match="NV_ERR_UVM_ADDRESS_IN_USE"): dev.uvm.map(dev.uuid, dev.signal_memory.va, 0x1000, dev.signal_memory.handle)
  with pytest.raises(OSError, match=r"encodes 4 bytes"):  # an escape whose request number carries the wrong size
    dev.system.ioctl(rm.ctl, "NV_ESC_RM_ALLOC", nv.escape_request(nv.NV_ESC_RM_ALLOC, 4), rm.abi.new("NVOS21_PARAMETERS"))
  assert model.faults == []

@pytest.mark.parametrize("link", ["pcie", "nvlink", "none"])
def test_gpus_of_a_process_share_one_address_space_and_copy_as_peers(link):
  (a, b), model = open_gpus(link=link)
  try:
    assert a.uvm is b.uvm and a.rm is b.rm and len(model.spaces) == 1  # one UVM address space, so one address for each buffer
    assert b.can_transfer_from(a) == a.can_transfer_from(b) == (link != "none")  # peers over PCIe P2P or NVLink, else none
    data = np.arange(1 << 12, dtype=np.uint32)
    src, dest = a.allocator.alloc(data.nbytes), b.allocator.alloc(data.nbytes)
    assert src.va + src.size <= dest.va or dest.va + dest.size <= src.va
    a.allocator.copyin(src, memoryview(data))
    if link != "none":
      b.transfer(dest, src, data.nbytes, a)  # B's copy engine reads A's video memory, after A's earlier work
      out = np.empty_like(data)
      b.allocator.copyout(memoryview(out), dest)
      np.testing.assert_array_equal(out, data)
    # each GPU waits on the other's signals: B's compute queue holds until A's timeline passes a value
    a.synchronize()
    later, done = a.timeline_value + 5, b.next_timeline()
    b.compute_queue().wait(a.timeline_signal, later).signal(b.timeline_signal, done).submit(b)
    time.sleep(0.2)
    assert b.timeline_signal.value < done  # still waiting for A
    a.timeline_signal.value = later
    b.synchronize(timeout_ms=10_000)  # an unmapped signal would be an MMU fault here
    assert b.timeline_signal.value >= done and model.faults == []
  finally: model.stop()
