"""The rules the NV model takes from NVIDIA's kernel modules (cited in drivers/mock/nv/model.py), each checked with the
call a wrong driver would make: the escape on the wrong file, a mapping through the wrong kind of file, the channel's
context buffers without a UVM window, the GPU id asked for before the GPU is attached. The driver's own bring-up
passing against these rules is tests/drivers/nv/test_nv_device.py."""
import errno
import pytest
from ir.switches import Context
from drivers.mock import mock_system
from drivers.mock.nv.model import CTX_BUFFER_ALIGN, CTX_BUFFER_BYTES, NVModel
from drivers.nv import rm_abi as nv
from drivers.nv.device import NVDevice
from drivers.nv.rm import UVM, RMClient, RMError
from drivers.system import MAP_SHARED, PROT_READ, PROT_WRITE
from tests.drivers.nv.test_nv_device import open_gpus, open_nv

@pytest.fixture
def nvdev():
  dev, model = open_nv()
  yield dev, model
  model.gpu.stop()

def map_escape(dev: NVDevice, on_fd: int, target_fd: int, memory: int, size: int):
  """NV_ESC_RM_MAP_MEMORY of `memory` issued on `on_fd`, naming `target_fd` in params.fd; the params."""
  rm = dev.rm
  arg = rm.abi.new("nv_ioctl_nvos33_parameters_with_fd", params={"hClient": rm.client, "hDevice": dev.device_handle, "hMemory": memory,
                                                                 "length": size}, fd=target_fd)
  rm.escape(on_fd, nv.NV_ESC_RM_MAP_MEMORY, "nv_ioctl_nvos33_parameters_with_fd", arg, "NV_ESC_RM_MAP_MEMORY")
  return arg.params

def test_rm_escapes_are_refused_on_the_gpu_file(nvdev):
  dev, _ = nvdev
  host = dev.alloc_memory(0x1000, host=True)
  ctl = dev.system.open("/dev/nvidiactl")
  with pytest.raises(OSError) as e: map_escape(dev, dev.gpu_file, ctl, host.handle, 0x1000)  # where tg used to send it
  assert e.value.errno == errno.EINVAL
  with pytest.raises(OSError, match="only valid on /dev/nvidiactl"):
    dev.rm.escape(dev.gpu_file, nv.NV_ESC_RM_CONTROL, "NVOS54_PARAMETERS", dev.rm.abi.new("NVOS54_PARAMETERS"), "NV_ESC_RM_CONTROL")
  assert map_escape(dev, dev.rm.ctl, ctl, host.handle, 0x1000).status == nv.NV_OK

def test_mappings_go_through_the_file_kind_their_memory_needs(nvdev):
  dev, _ = nvdev
  host = dev.alloc_memory(0x1000, host=True)
  gpu_file, ctl = dev.system.open("/dev/nvidia0"), dev.system.open("/dev/nvidiactl")
  assert nv.status_name(map_escape(dev, dev.rm.ctl, gpu_file, host.handle, 0x1000).status) == "NV_ERR_INVALID_ARGUMENT"  # system memory: a control file
  assert map_escape(dev, dev.rm.ctl, ctl, host.handle, 0x1000).status == nv.NV_OK
  assert nv.status_name(map_escape(dev, dev.rm.ctl, ctl, host.handle, 0x1000).status) == "NV_ERR_STATE_IN_USE"  # one mapping per open file
  with pytest.raises(OSError) as e: dev.system.mmap(0, 0x1000, PROT_READ | PROT_WRITE, MAP_SHARED, ctl, 0x1000)
  assert e.value.errno == errno.EINVAL  # RM mappings are mmapped at offset 0
  with pytest.raises(OSError) as e: dev.system.mmap(0, 0x2000, PROT_READ | PROT_WRITE, MAP_SHARED, ctl, 0)
  assert e.value.errno == errno.ERANGE
  dev.system.mmap(0, 0x1000, PROT_READ | PROT_WRITE, MAP_SHARED, ctl, 0)
  dev.system.mmap(0, 0x1000, PROT_READ | PROT_WRITE, MAP_SHARED, ctl, 0)  # the context outlives an mmap
  # the usermode window is behind a BAR: a GPU file, mapped whole
  assert nv.status_name(map_escape(dev, dev.rm.ctl, dev.system.open("/dev/nvidiactl"), dev.usermode, 0x10000).status) == "NV_ERR_INVALID_ARGUMENT"
  assert map_escape(dev, dev.rm.ctl, gpu_file, dev.usermode, 0x10000).status == nv.NV_OK
  with pytest.raises(OSError) as e: dev.system.mmap(0, 0x1000, PROT_READ | PROT_WRITE, MAP_SHARED, gpu_file, 0)
  assert e.value.errno == errno.ENXIO

def test_register_fd_takes_a_fresh_control_file(nvdev):
  dev, _ = nvdev
  rm, gpu_file = dev.rm, dev.system.open("/dev/nvidia0")
  for ctl_fd in (gpu_file, 12345):
    with pytest.raises(OSError, match="not a fresh control file"):
      rm.escape(gpu_file, nv.NV_ESC_REGISTER_FD, "nv_ioctl_register_fd_t", rm.abi.new("nv_ioctl_register_fd_t", ctl_fd=ctl_fd), "NV_ESC_REGISTER_FD")
  rm.escape(gpu_file, nv.NV_ESC_REGISTER_FD, "nv_ioctl_register_fd_t", rm.abi.new("nv_ioctl_register_fd_t", ctl_fd=rm.ctl), "NV_ESC_REGISTER_FD")
  with pytest.raises(OSError, match="not a fresh control file"):  # once per file
    rm.escape(gpu_file, nv.NV_ESC_REGISTER_FD, "nv_ioctl_register_fd_t", rm.abi.new("nv_ioctl_register_fd_t", ctl_fd=rm.ctl), "NV_ESC_REGISTER_FD")

def test_gpu_id_info_needs_the_gpu_attached():
  model = NVModel("hopper")
  mock_system.register("/dev/nvidia", model)
  with Context(DEV="MOCK+NV"):
    rm = RMClient(mock_system)
    card = rm.card_info()[0]
    ask = lambda: rm.control(rm.client, nv.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, "NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS", gpuId=card.gpu_id)
    with pytest.raises(RMError, match="NV_ERR_INVALID_ARGUMENT"): ask()  # where tg used to ask: before opening /dev/nvidia0
    gpu_file = rm.open_gpu_file(card.minor_number)
    assert ask().deviceInstance == 0
    mock_system.close(gpu_file)  # the last close detaches it again
    with pytest.raises(RMError, match="NV_ERR_INVALID_ARGUMENT"): ask()

def test_a_channel_needs_a_uvm_window_for_its_context_buffers(nvdev):
  dev, model = nvdev
  rm = dev.rm
  tsg = rm.alloc_with(dev.device_handle, nv.KEPLER_CHANNEL_GROUP_A, "NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS", engineType=nv.NV2080_ENGINE_TYPE_GRAPHICS)
  ctxshare = rm.alloc_with(tsg, nv.FERMI_CONTEXT_SHARE_A, "NV_CTXSHARE_ALLOCATION_PARAMETERS", hVASpace=dev.vaspace,
                           flags=nv.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC)
  ring, notifier = dev.alloc_memory(0x3000, host=True), dev.alloc_memory(0x1000, host=True)
  channel = rm.alloc_with(tsg, model.gpu.arch.gpfifo[0], "NV_CHANNEL_ALLOC_PARAMS", gpFifoOffset=ring.va, gpFifoEntries=0x400, hContextShare=ctxshare,
                          hObjectError=notifier.handle, hUserdMemory=[ring.handle], userdOffset=[0x2000])
  with pytest.raises(RMError, match="NV_ERR_INVALID_STATE"):  # the token needs the channel's engine object first
    rm.control(channel, nv.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS")
  rm.alloc(channel, dev.compute_class)
  schedule = lambda: rm.control(tsg, nv.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, "NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS", bEnable=1)
  with pytest.raises(RMError, match="NV_ERR_INVALID_STATE"): schedule()  # context buffers not bound yet
  with pytest.raises(RMError, match="NV_ERR_INVALID_ADDRESS"): dev.uvm.register_channel(dev.uuid, channel, ring.va, ring.size)  # where tg used to put them
  with pytest.raises(RMError, match="NV_ERR_INVALID_ADDRESS"): dev.uvm.register_channel(dev.uuid, channel, 0, 64 << 20)
  with pytest.raises(RMError, match="NV_ERR_OUT_OF_RANGE"): dev.uvm.register_channel(dev.uuid, channel, (1 << 57) - (64 << 20), 64 << 20)
  ctx_size = lambda h: rm.control(dev.subdevice, nv.NV2080_CTRL_CMD_GR_GET_CTX_BUFFER_SIZE, "NV2080_CTRL_GR_GET_CTX_BUFFER_SIZE_PARAMS", hChannel=h).totalBufferSize
  with pytest.raises(RMError, match="NV_ERR_INVALID_CHANNEL"): ctx_size(tsg)  # what a real H200 (580.159.04) answered tg's first bring-up
  need = ctx_size(channel)
  assert need == CTX_BUFFER_BYTES + CTX_BUFFER_ALIGN
  window = dev.addresses.alloc(need, 0x1000)
  dev.uvm.register_channel(dev.uuid, channel, window, need)
  with pytest.raises(RMError, match="NV_ERR_INVALID_CHANNEL"): dev.uvm.register_channel(dev.uuid, channel, window, need)
  schedule()
  placed = model.spaces[-1].channel_ranges[tsg][0]
  with pytest.raises(RMError, match="NV_ERR_UVM_ADDRESS_IN_USE"):  # UVM owns where it put the buffers
    dev.uvm.call(nv.UVM_CREATE_EXTERNAL_RANGE, "UVM_CREATE_EXTERNAL_RANGE_PARAMS", base=placed, length=0x1000)
  with pytest.raises(RMError, match="NV_ERR_INVALID_ADDRESS"): dev.uvm.call(nv.UVM_CREATE_EXTERNAL_RANGE, "UVM_CREATE_EXTERNAL_RANGE_PARAMS", base=0, length=0x1000)
  assert model.faults == []

def test_the_gpu_is_boosted_to_its_top_clocks_for_as_long_as_tg_runs(nvdev):
  # a real H200 left unboosted ran tg's kernels at its idle clocks, 5-7x slower than CUDA ran the same PTX
  dev, model = nvdev
  flags = model.perf_boost[0]
  assert flags & 3 == nv.NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_TO_MAX and flags & nv.NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_YES
  boost = lambda h, **kw: dev.rm.control(h, nv.NV2080_CTRL_CMD_PERF_BOOST, "NV2080_CTRL_PERF_BOOST_PARAMS", **kw)
  with pytest.raises(RMError, match="NV_ERR_INVALID_ARGUMENT"): boost(dev.subdevice, flags=2, duration=3601)  # over DURATION_MAX, not INFINITE
  with pytest.raises(RMError, match="NV_ERR_INVALID_OBJECT_HANDLE"): boost(dev.device_handle, flags=2, duration=10)  # a subdevice control
  boost(dev.subdevice, flags=0, duration=0)  # CLEAR
  assert model.perf_boost[0] == 0

def test_a_context_share_on_an_external_va_space_needs_uvm_to_know_it(nvdev):
  dev, _ = nvdev
  rm = dev.rm
  vaspace = rm.alloc_with(dev.device_handle, nv.FERMI_VASPACE_A, "NV_VASPACE_ALLOCATION_PARAMETERS", vaBase=0x1000, vaSize=1 << 40,
                          flags=nv.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED)
  tsg = rm.alloc_with(dev.device_handle, nv.KEPLER_CHANNEL_GROUP_A, "NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS", engineType=nv.NV2080_ENGINE_TYPE_GRAPHICS)
  with pytest.raises(RMError, match="NV_ERR_INVALID_STATE"):
    rm.alloc_with(tsg, nv.FERMI_CONTEXT_SHARE_A, "NV_CTXSHARE_ALLOCATION_PARAMETERS", hVASpace=vaspace, flags=nv.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC)

def second_space(devs: list[NVDevice], register=(0, 1)) -> UVM:
  """A second UVM address space of the same process, with the GPUs `register` registered in it (and their VA spaces)."""
  uvm = UVM(devs[0].rm)
  for i in register: uvm.register_gpu(devs[i].uuid, devs[i].vaspace)
  return uvm

def test_a_gpu_maps_another_gpus_video_memory_only_as_its_peer():
  devs, model = open_gpus()
  try:
    vram, host = devs[0].alloc_memory(0x1000), devs[0].alloc_memory(0x1000, host=True)
    uvm = second_space(devs)
    for buf in (vram, host): uvm.call(nv.UVM_CREATE_EXTERNAL_RANGE, "UVM_CREATE_EXTERNAL_RANGE_PARAMS", base=buf.va, length=buf.size)
    with pytest.raises(RMError, match="NV_ERR_INVALID_DEVICE"): uvm.map_on(devs[1].uuid, vram.va, vram.size, vram.handle)  # no peer access yet
    uvm.map_on(devs[1].uuid, host.va, host.size, host.handle)  # system memory needs none
    uvm.map_on(devs[0].uuid, vram.va, vram.size, vram.handle)  # its own GPU needs none
    with pytest.raises(RMError, match="NV_ERR_INVALID_ARGUMENT"):  # at least one GPU to map on
      uvm.call(nv.UVM_MAP_EXTERNAL_ALLOCATION, "UVM_MAP_EXTERNAL_ALLOCATION_PARAMS", base=host.va, length=host.size, gpuAttributesCount=0,
               rmCtrlFd=devs[0].rm.ctl, hClient=devs[0].rm.client, hMemory=host.handle)
    with pytest.raises(RMError, match="NV_ERR_INVALID_DEVICE"): uvm.enable_peer_access(devs[0].uuid, devs[0].uuid)
    uvm.enable_peer_access(devs[0].uuid, devs[1].uuid)
    with pytest.raises(RMError, match="NV_ERR_INVALID_DEVICE"): uvm.enable_peer_access(devs[1].uuid, devs[0].uuid)  # once a pair
    uvm.map_on(devs[1].uuid, vram.va, vram.size, vram.handle)
    assert model.gpus[1].mapping(vram.va, 0x1000, "read").mem is model.gpus[0].mapping(vram.va, 0x1000, "read").mem
    with pytest.raises(RMError, match="NV_ERR_INVALID_DEVICE"): uvm.register_gpu(devs[1].uuid, devs[1].vaspace)  # once an address space
  finally: model.stop()

def test_peer_access_needs_both_gpus_registered_and_a_pcie_link():
  devs, model = open_gpus()
  try:
    with pytest.raises(RMError, match="NV_ERR_INVALID_DEVICE"): second_space(devs, register=(0,)).enable_peer_access(devs[0].uuid, devs[1].uuid)
  finally: model.stop()
  devs, model = open_gpus(link="nvlink")
  try:  # NVLink peers are peers from registration on, and the PCIe call refuses them
    uvm = second_space(devs)
    with pytest.raises(RMError, match="NV_ERR_INVALID_DEVICE"): uvm.enable_peer_access(devs[0].uuid, devs[1].uuid)
    vram = devs[1].alloc_memory(0x1000)
    uvm.call(nv.UVM_CREATE_EXTERNAL_RANGE, "UVM_CREATE_EXTERNAL_RANGE_PARAMS", base=vram.va, length=vram.size)
    uvm.map_on(devs[0].uuid, vram.va, vram.size, vram.handle)
  finally: model.stop()
  devs, model = open_gpus(link="none")
  try:
    with pytest.raises(RMError, match="NV_ERR_NOT_SUPPORTED"): second_space(devs).enable_peer_access(devs[0].uuid, devs[1].uuid)
  finally: model.stop()

def test_a_gpu_maps_memory_only_in_an_address_space_it_has_registered():
  devs, model = open_gpus()
  try:
    host = devs[0].alloc_memory(0x1000, host=True)
    uvm = second_space(devs, register=(0,))
    uvm.call(nv.UVM_CREATE_EXTERNAL_RANGE, "UVM_CREATE_EXTERNAL_RANGE_PARAMS", base=host.va, length=host.size)
    with pytest.raises(RMError, match="NV_ERR_INVALID_DEVICE"): uvm.map_on(devs[1].uuid, host.va, host.size, host.handle)
    with pytest.raises(RMError, match="NV_ERR_INVALID_ADDRESS"): uvm.map_on(devs[0].uuid, host.va + 0x10000000, host.size, host.handle)  # no range there
    vram = devs[1].alloc_memory(0x1000)  # owned by a GPU this space doesn't know, so no peer of the mapping GPU
    uvm.call(nv.UVM_CREATE_EXTERNAL_RANGE, "UVM_CREATE_EXTERNAL_RANGE_PARAMS", base=vram.va, length=vram.size)
    with pytest.raises(RMError, match="NV_ERR_INVALID_DEVICE"): uvm.map_on(devs[0].uuid, vram.va, vram.size, vram.handle)
  finally: model.stop()
