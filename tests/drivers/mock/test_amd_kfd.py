"""The amdkfd model driven through the MOCK System seam with raw ioctls (the cffi structs of drivers/amd/kfd.py): the
topology in sysfs, the VM, memory (ALLOC / MAP / UNMAP / FREE and the render-node CPU view), queue creation with the
sizes kfd_queue.c validates, and events. Each rule has a call a wrong driver would make. Expected sizes are worked
out by hand from kfd_queue.c's formulas in the comments, not by the model's code."""
import errno, time
import numpy as np
import pytest
from ir.switches import Context, getenv
from drivers import system as sysmod
from drivers.amd import kfd
from drivers.mock import mock_system
from drivers.mock.amd.gpu import GPUFault
from drivers.mock.amd.kfd import KFDModel, arch_name

TOPO = "/sys/devices/virtual/kfd/kfd/topology/nodes"
VRAM, GTT, USERPTR, DOORBELL = 1, 2, 4, 8
MMIO_REMAP = 16
WRITABLE, EXECUTABLE, PUBLIC, NO_SUBSTITUTE, COHERENT, UNCACHED = 1 << 31, 1 << 30, 1 << 29, 1 << 28, 1 << 26, 1 << 25
BASE = WRITABLE | EXECUTABLE | NO_SUBSTITUTE
EVENT_ID_IOCTLS = {"AMDKFD_IOC_DESTROY_EVENT": 0x09, "AMDKFD_IOC_SET_EVENT": 0x0A, "AMDKFD_IOC_RESET_EVENT": 0x0B}   # kfd_ioctl.h

class Client:
  """A minimal KFD user: what a driver does, step by step, with no checks of its own."""
  def __init__(self, model: KFDModel):
    self.model, self.sys = model, mock_system
    self.kfd = self.sys.open("/dev/kfd")
    self.gpu_id = int(self.sys.read_text(f"{TOPO}/1/gpu_id"))
    props = dict(line.split() for line in self.sys.read_text(f"{TOPO}/1/properties").splitlines())
    self.props = {k: int(v) for k, v in props.items()}
    self.render = self.sys.open(f"/dev/dri/renderD{self.props['drm_render_minor']}")
    self.gpu = model.gpus[0]

  def ioctl(self, name: str, **fields):
    if name in EVENT_ID_IOCTLS:   # destroy/set/reset_event_args: {u32 event_id, u32 pad}, _IOW('K', nr, 8)
      arg = kfd.ffi.new("uint32_t[2]", [fields["event_id"], 0])
      self.sys.ioctl(self.kfd, name, sysmod.IOW("K", EVENT_ID_IOCTLS[name], 8), arg)
      return arg
    arg = kfd.ffi.new(f"struct {name.lower().replace('amdkfd_ioc_', 'kfd_ioctl_')}_args *", fields)
    self.sys.ioctl(self.kfd, name, kfd.IOCTLS[name], arg)
    return arg

  def acquire(self):
    return self.ioctl("AMDKFD_IOC_ACQUIRE_VM", drm_fd=self.render, gpu_id=self.gpu_id)

  def reserve(self, size: int) -> int:
    return self.sys.mmap(0, size, 0, sysmod.MAP_PRIVATE | sysmod.MAP_ANONYMOUS, -1, 0)

  def alloc(self, size: int, flags: int, va: int | None = None, user: int = 0):
    va = self.reserve(size) if va is None else va
    return self.ioctl("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU", va_addr=va, size=size, gpu_id=self.gpu_id, flags=flags, mmap_offset=user)

  def map(self, handle: int, ids: list[int] | None = None):
    arr = kfd.ffi.new("uint32_t[]", ids or [self.gpu_id])
    return self.ioctl("AMDKFD_IOC_MAP_MEMORY_TO_GPU", handle=handle, device_ids_array_ptr=int(kfd.ffi.cast("uintptr_t", arr)), n_devices=len(arr))

  def unmap(self, handle: int):
    arr = kfd.ffi.new("uint32_t[]", [self.gpu_id])
    return self.ioctl("AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU", handle=handle, device_ids_array_ptr=int(kfd.ffi.cast("uintptr_t", arr)), n_devices=1)

  def buffer(self, size: int, flags: int = GTT | BASE | COHERENT | UNCACHED):
    """Allocated, CPU-mapped through the render node at its VA (video memory PUBLIC so that it may be), mapped to the
    GPU: (va, handle, uint8 view)."""
    a = self.alloc(size, flags | (PUBLIC if flags & VRAM else 0))
    va = self.sys.mmap(a.va_addr, size, sysmod.PROT_READ | sysmod.PROT_WRITE, sysmod.MAP_SHARED | 0x10, self.render, a.mmap_offset)
    self.map(a.handle)
    return va, a.handle, np.frombuffer(sysmod.memoryview_at(va, size), np.uint8)

  def flush_hdp(self) -> None:
    """What hdp_v5_0.c hdp_v5_0_flush_hdp does from the CPU: write 0 to HDP_MEM_FLUSH_CNTL, offset 0 of the MMIO remap page."""
    a = self.alloc(0x1000, MMIO_REMAP | WRITABLE | NO_SUBSTITUTE)
    page = self.sys.mmap(0, 0x1000, sysmod.PROT_READ | sysmod.PROT_WRITE, sysmod.MAP_SHARED, self.kfd, a.mmap_offset)
    np.frombuffer(sysmod.memoryview_at(page, 4), np.uint32)[0] = 0

  def event(self, event_type: int, page_handle: int = 0):
    return self.ioctl("AMDKFD_IOC_CREATE_EVENT", event_type=event_type, auto_reset=1, event_page_offset=page_handle)

  def wait(self, ids: list[int], timeout_ms: int, wait_for_all: int = 0):
    datas = kfd.ffi.new("uint8_t[]", 48 * len(ids))
    for i, eid in enumerate(ids): kfd.ffi.cast("uint32_t *", datas)[i * 12 + 10] = eid   # kfd_event_data.event_id @40
    w = self.ioctl("AMDKFD_IOC_WAIT_EVENTS", events_ptr=int(kfd.ffi.cast("uintptr_t", datas)), num_events=len(ids),
                   wait_for_all=wait_for_all, timeout=timeout_ms)
    return w.wait_result, bytes(kfd.ffi.buffer(datas))

  def queue(self, queue_type: int, ring_bytes: int = 0x1000, **over):
    """Ring, pointer page, EOP and CWSR buffers sized as the node says; CREATE_QUEUE with `over` replacing fields."""
    ring, _, ring_mem = self.buffer(ring_bytes)
    ptrs, _, ptr_mem = self.buffer(0x1000)
    fields = dict(ring_base_address=ring, write_pointer_address=ptrs + 56, read_pointer_address=ptrs + 128, ring_size=ring_bytes,
                  gpu_id=self.gpu_id, queue_type=queue_type, queue_percentage=100, queue_priority=7)
    if queue_type == 0:
      eop, _, _ = self.buffer(0x1000, VRAM | BASE)
      cwsr_total = self.model.gpus[0].arch.cwsr_buffer_size
      cwsr, _, _ = self.buffer(cwsr_total, VRAM | BASE)
      fields.update(eop_buffer_address=eop, eop_buffer_size=0x1000, ctx_save_restore_address=cwsr,
                    ctx_save_restore_size=self.model.gpus[0].arch.cwsr_size, ctl_stack_size=self.model.gpus[0].arch.ctl_stack_size)
    fields.update(over)
    q = self.ioctl("AMDKFD_IOC_CREATE_QUEUE", **fields)
    return q, ring_mem, ptr_mem

@pytest.fixture
def amd(request):
  model = KFDModel(getattr(request, "param", "gfx1100"), count=2)
  for prefix in KFDModel.prefixes: mock_system.register(prefix, model)
  yield Client(model)
  model.stop()

def errno_of(call) -> int:
  with pytest.raises(OSError) as e: call()
  return e.value.errno

# ---------------- topology ----------------
def test_topology_names_a_cpu_node_and_the_gpus(amd):
  assert mock_system.listdir(TOPO) == ["0", "1", "2"]
  assert int(mock_system.read_text(f"{TOPO}/0/gpu_id")) == 0
  ids = {int(mock_system.read_text(f"{TOPO}/{n}/gpu_id")) for n in (1, 2)}
  assert len(ids) == 2 and 0 not in ids and all(i < 1 << 16 for i in ids)   # gpu_ids fit the 16-bit mmap field
  p = amd.props
  # RX 7900 XTX: 96 CUs of 2 SIMDs, 6 engines x 2 arrays of 8 CUs, wave32, 64 KiB LDS
  assert (p["gfx_target_version"], p["vendor_id"], p["device_id"], p["simd_count"], p["simd_per_cu"]) == (110000, 4098, 0x744C, 192, 2)
  assert (p["array_count"], p["simd_arrays_per_engine"], p["cu_per_simd_array"], p["lds_size_in_kb"], p["num_xcc"]) == (12, 2, 8, 64, 1)
  assert p["drm_render_minor"] == 128
  ip = "/sys/class/drm/renderD128/device/ip_discovery/die/0/11/0"
  assert [int(mock_system.read_text(f"{ip}/{f}")) for f in ("major", "minor", "revision")] == [11, 0, 0]
  assert errno_of(lambda: mock_system.read_text(f"{TOPO}/9/gpu_id")) == errno.ENOENT

@pytest.mark.parametrize("amd", ["gfx942"], indirect=True)
def test_mi300x_topology(amd):
  p = amd.props
  assert (p["gfx_target_version"], p["num_xcc"], p["simd_count"], p["simd_per_cu"], p["wave_front_size"]) == (90402, 8, 1216, 4, 64)

def test_arch_choice_follows_env_then_dev(monkeypatch):
  monkeypatch.delenv("MOCKGPU_AMD_ARCH", raising=False)
  getenv.cache_clear()
  with Context(DEV="MOCK+AMD::gfx942"): assert arch_name() == "gfx942"
  with Context(DEV="MOCK+AMD::gfx9999"): assert arch_name() == "gfx1100"
  monkeypatch.setenv("MOCKGPU_AMD_ARCH", "gfx950")
  getenv.cache_clear()   # getenv reads the environment once per key
  with Context(DEV="MOCK+AMD::gfx942"): assert arch_name() == "gfx950"
  monkeypatch.delenv("MOCKGPU_AMD_ARCH")
  getenv.cache_clear()

# ---------------- VM and version ----------------
def test_version_and_vm_rules(amd):
  v = amd.ioctl("AMDKFD_IOC_GET_VERSION")
  assert (v.major_version, v.minor_version) >= (1, 14)
  runtime = kfd.ffi.new("uint64_t[2]")   # kfd_ioctl_runtime_enable_args: r_debug, mode_mask, capabilities_mask (1.14+)
  mock_system.ioctl(amd.kfd, "AMDKFD_IOC_RUNTIME_ENABLE", sysmod.IOWR("K", 0x25, 16), runtime)
  assert errno_of(lambda: mock_system.ioctl(amd.kfd, "AMDKFD_IOC_RUNTIME_ENABLE", sysmod.IOWR("K", 0x25, 12), runtime)) == errno.EINVAL
  # kfd_bind_process_to_device: memory before ACQUIRE_VM fails
  assert errno_of(lambda: amd.alloc(0x1000, GTT | BASE)) == errno.ENODEV
  assert errno_of(lambda: amd.ioctl("AMDKFD_IOC_ACQUIRE_VM", drm_fd=amd.kfd, gpu_id=amd.gpu_id)) == errno.EINVAL   # not a render node
  other = mock_system.open("/dev/dri/renderD129")   # the second GPU's node
  assert errno_of(lambda: amd.ioctl("AMDKFD_IOC_ACQUIRE_VM", drm_fd=other, gpu_id=amd.gpu_id)) == errno.EINVAL
  amd.acquire()
  amd.acquire()   # the same file again is fine
  again = mock_system.open("/dev/dri/renderD128")
  assert errno_of(lambda: amd.ioctl("AMDKFD_IOC_ACQUIRE_VM", drm_fd=again, gpu_id=amd.gpu_id)) == errno.EBUSY

# ---------------- memory ----------------
def test_bad_allocations_are_refused(amd):
  amd.acquire()
  va = amd.reserve(0x4000)
  assert errno_of(lambda: amd.alloc(0x1000, GTT | BASE, va + 0x10)) == errno.EINVAL          # VA not page aligned
  assert errno_of(lambda: amd.alloc(0, GTT | BASE, va)) == errno.EINVAL                       # size 0
  assert errno_of(lambda: amd.alloc(0x1000, BASE, va)) == errno.EINVAL                        # no memory domain
  assert errno_of(lambda: amd.alloc(0x1000, VRAM | GTT | BASE, va)) == errno.EINVAL           # two domains
  assert errno_of(lambda: amd.alloc(0x1000, GTT | BASE | 1 << 5, va)) == errno.EINVAL         # a bit the header doesn't define
  amd.alloc(0x2000, VRAM | BASE, va)
  assert errno_of(lambda: amd.alloc(0x1000, VRAM | BASE, va + 0x1000)) == errno.EINVAL        # overlaps the first
  assert errno_of(lambda: amd.alloc(0x1000, DOORBELL | BASE, va + 0x2000)) == errno.EINVAL    # a doorbell slice is 8 KiB
  assert errno_of(lambda: amd.alloc(1 << 40, VRAM | BASE, 1 << 45)) == errno.ENOMEM           # more than 24 GiB of VRAM
  assert errno_of(lambda: amd.ioctl("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU", va_addr=va + 0x3000, size=0x1000, gpu_id=0x7, flags=GTT)) == errno.EINVAL

def test_cpu_view_is_the_gpu_memory_and_only_mapped_memory_is_visible(amd):
  amd.acquire()
  a = amd.alloc(0x2000, VRAM | BASE | 1 << 29)
  cpu = mock_system.mmap(a.va_addr, 0x2000, 3, sysmod.MAP_SHARED | 0x10, amd.render, a.mmap_offset)
  assert cpu == a.va_addr
  view = np.frombuffer(sysmod.memoryview_at(cpu, 0x2000), np.uint32)
  view[:] = np.arange(0x800, dtype=np.uint32)
  with pytest.raises(GPUFault, match=f"{a.va_addr + 8:#x}"): amd.gpu.read(a.va_addr + 8, 32, "test read")
  amd.map(a.handle)
  assert amd.gpu.read(a.va_addr + 8, 32, "test read") == 2
  amd.gpu.write(a.va_addr + 0x1FFC, 0xDEADBEEF, 32, "test write")
  assert view[0x7FF] == 0xDEADBEEF

def test_only_public_video_memory_can_be_cpu_mapped(amd):
  amd.acquire()
  a = amd.alloc(0x1000, VRAM | BASE)
  assert errno_of(lambda: mock_system.mmap(a.va_addr, 0x1000, 3, sysmod.MAP_SHARED | 0x10, amd.render, a.mmap_offset)) == errno.EPERM

def test_map_unmap_free_rules(amd):
  amd.acquire()
  a = amd.alloc(0x1000, GTT | BASE)
  assert errno_of(lambda: amd.map(a.handle, [amd.gpu_id + 1])) == errno.EINVAL      # no such GPU
  arr1 = kfd.ffi.new("uint32_t[]", [amd.gpu_id])
  assert errno_of(lambda: amd.ioctl("AMDKFD_IOC_MAP_MEMORY_TO_GPU", handle=a.handle, device_ids_array_ptr=int(kfd.ffi.cast("uintptr_t", arr1)),
                                    n_devices=1, n_success=2)) == errno.EINVAL         # n_success > n_devices
  second = amd.model.gpus[1].gpu_id
  arr = kfd.ffi.new("uint32_t[]", [amd.gpu_id, second])
  arg = kfd.ffi.new("struct kfd_ioctl_map_memory_to_gpu_args *", dict(handle=a.handle, device_ids_array_ptr=int(kfd.ffi.cast("uintptr_t", arr)), n_devices=2))
  with pytest.raises(OSError) as e: mock_system.ioctl(amd.kfd, "AMDKFD_IOC_MAP_MEMORY_TO_GPU", kfd.IOCTLS["AMDKFD_IOC_MAP_MEMORY_TO_GPU"], arg)
  assert e.value.errno == errno.EINVAL and arg.n_success == 1   # the second GPU has no VM
  assert errno_of(lambda: amd.ioctl("AMDKFD_IOC_FREE_MEMORY_OF_GPU", handle=a.handle)) == errno.EBUSY   # still mapped
  amd.unmap(a.handle)
  assert errno_of(lambda: amd.unmap(a.handle)) == errno.EINVAL    # not mapped any more
  amd.ioctl("AMDKFD_IOC_FREE_MEMORY_OF_GPU", handle=a.handle)
  assert errno_of(lambda: amd.ioctl("AMDKFD_IOC_FREE_MEMORY_OF_GPU", handle=a.handle)) == errno.EINVAL   # double free
  assert errno_of(lambda: amd.map(a.handle)) == errno.EINVAL

def test_userptr_maps_the_users_pages(amd):
  amd.acquire()
  user = mock_system.mmap(0, 0x1000, 3, sysmod.MAP_PRIVATE | sysmod.MAP_ANONYMOUS, -1, 0)
  a = amd.alloc(0x1000, USERPTR | BASE, va=user, user=user)
  amd.map(a.handle)
  amd.gpu.write(user + 4, 77, 32, "test")
  assert np.frombuffer(sysmod.memoryview_at(user, 8), np.uint32)[1] == 77
  assert errno_of(lambda: mock_system.mmap(0, 0x1000, 3, sysmod.MAP_SHARED, amd.render, a.mmap_offset)) == errno.EPERM
  hole = amd.reserve(0x2000)
  sysmod.munmap(hole, 0x2000)
  assert errno_of(lambda: amd.alloc(0x2000, USERPTR | BASE, va=hole, user=hole)) == errno.EFAULT

# ---------------- queues ----------------
def test_cwsr_sizes_are_kfd_queue_c_formulas():
  # gfx1100: 96 CUs -> 3072 waves; ctl = align(40 + 12*3072 + 8) = 0xA000; per CU 0x60000+0x4000+0x10000+0x1000 = 0x75000
  a = KFDModel("gfx1100", count=1).gpus[0].arch
  assert (a.ctl_stack_size, a.cwsr_size, a.debug_memory_size, a.cwsr_buffer_size) == (0xA000, 0xA000 + 96 * 0x75000, 3072 * 32, 0x2C02000)
  # gfx942: 38 CUs per XCC -> min(38*40, 32*512) = 1520 waves; ctl = align(40 + 8*1520 + 8) = 0x3000; per CU 0x95000
  b = KFDModel("gfx942", count=1).gpus[0].arch
  assert (b.ctl_stack_size, b.cwsr_size, b.debug_memory_size) == (0x3000, 0x3000 + 38 * 0x95000, 1520 * 32)
  assert b.cwsr_buffer_size == (0x3000 + 38 * 0x95000 + 1520 * 32) * 8

def test_queue_rules(amd):
  amd.acquire()
  arch = amd.gpu.arch
  assert errno_of(lambda: amd.queue(0, ring_size=0x1800)) == errno.EINVAL                           # not a power of 2
  assert errno_of(lambda: amd.queue(0, queue_percentage=101)) == errno.EINVAL
  assert errno_of(lambda: amd.queue(0, queue_priority=16)) == errno.EINVAL
  assert errno_of(lambda: amd.queue(9)) == 524                                                      # ENOTSUPP
  assert errno_of(lambda: amd.queue(0, eop_buffer_size=0x800)) == errno.EINVAL                      # short EOP
  assert errno_of(lambda: amd.queue(0, ctl_stack_size=arch.ctl_stack_size - 0x1000)) == errno.EINVAL
  assert errno_of(lambda: amd.queue(0, ctx_save_restore_size=arch.cwsr_size - 0x1000)) == errno.EINVAL
  short, _, _ = amd.buffer(arch.cwsr_buffer_size - 0x1000, VRAM | BASE)
  assert errno_of(lambda: amd.queue(0, ctx_save_restore_address=short)) == errno.EINVAL             # CWSR buffer too small
  unmapped = amd.alloc(0x1000, GTT | BASE)
  assert errno_of(lambda: amd.queue(1, ring_base_address=unmapped.va_addr)) == errno.EINVAL          # ring not mapped to the GPU
  q0, _, _ = amd.queue(0, queue_percentage=100 | 3 << 8)                                            # bits 15:8 name an XCC
  q1, _, _ = amd.queue(1)
  for q in (q0, q1):
    assert q.doorbell_offset >> 62 == 3 and (q.doorbell_offset >> 46) & 0xFFFF == amd.gpu_id
    assert (q.doorbell_offset & ((1 << 46) - 1)) % 8 == 0 and (q.doorbell_offset & ((1 << 46) - 1)) < 0x2000
  assert q0.doorbell_offset != q1.doorbell_offset and q0.queue_id != q1.queue_id
  page = mock_system.mmap(0, 0x2000, 3, sysmod.MAP_SHARED, amd.kfd, q0.doorbell_offset & ~0x1FFF)
  np.frombuffer(sysmod.memoryview_at(page + (q1.doorbell_offset & 0x1FFF), 8), np.uint64)[0] = 8   # two zero dwords: SDMA NOPs
  rptr = np.frombuffer(sysmod.memoryview_at(q1.read_pointer_address, 8), np.uint64)
  end = time.monotonic() + 10
  while rptr[0] != 8: assert time.monotonic() < end, "the SDMA engine never consumed the doorbell's 8 bytes"
  assert errno_of(lambda: mock_system.mmap(0, 0x1000, 3, sysmod.MAP_SHARED, amd.kfd, q0.doorbell_offset & ~0x1FFF)) == errno.EINVAL
  ring_buf = next(b for b in amd.model.buffers.values() if b.va == q0.ring_base_address)
  assert errno_of(lambda: amd.unmap(ring_buf.handle)) == errno.EBUSY                                # a live queue's ring
  amd.ioctl("AMDKFD_IOC_DESTROY_QUEUE", queue_id=q0.queue_id)
  assert errno_of(lambda: amd.ioctl("AMDKFD_IOC_DESTROY_QUEUE", queue_id=q0.queue_id)) == errno.EINVAL
  amd.unmap(ring_buf.handle)

# ---------------- events ----------------
def test_events(amd):
  amd.acquire()
  page, handle, page_mem = amd.buffer(0x8000)
  assert errno_of(lambda: amd.event(0)) == errno.ENOMEM          # a dGPU's first signal event brings the page
  ev = amd.event(0, handle)
  assert ev.event_slot_index == ev.event_id and (ev.event_page_offset >> 62) == 2
  assert np.frombuffer(page_mem, np.uint64)[ev.event_id] == 2**64 - 1        # the slot starts UNSIGNALED
  assert errno_of(lambda: amd.event(0, handle)) == errno.EBUSY   # the page is set once
  mem = amd.event(8)
  assert mem.event_id >= 1 << 30                                 # non-signal events live in the upper id range
  assert amd.wait([ev.event_id], 0)[0] == 1                      # not signalled: immediate timeout
  amd.ioctl("AMDKFD_IOC_SET_EVENT", event_id=ev.event_id)
  assert amd.wait([ev.event_id], 1000)[0] == 0
  assert amd.wait([ev.event_id], 0)[0] == 1                      # auto-reset: the wait consumed it
  assert errno_of(lambda: amd.ioctl("AMDKFD_IOC_SET_EVENT", event_id=mem.event_id)) == errno.EINVAL   # the CPU signals only signal events
  assert errno_of(lambda: amd.wait([12345], 0)) == errno.EINVAL
  amd.ioctl("AMDKFD_IOC_DESTROY_EVENT", event_id=ev.event_id)
  assert errno_of(lambda: amd.ioctl("AMDKFD_IOC_DESTROY_EVENT", event_id=ev.event_id)) == errno.EINVAL
