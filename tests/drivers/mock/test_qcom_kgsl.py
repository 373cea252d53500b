"""The kgsl model driven through the MOCK System seam with raw ioctls whose arguments are packed here from
msm_kgsl.h's struct layouts (64-bit offsets written out in the formats below, not taken from the model): ioctl numbers
and sizes, properties, contexts, GPU objects and their id-based mmap, user memory, submissions and timestamps, and a
GPU fault reaching the driver the way kgsl reports it (EDEADLK, GPU_RESET_STAT). Each rule has a call a wrong driver
would make."""
import contextlib, errno, struct, threading
import numpy as np
import pytest
from ir.switches import getenv
from drivers import system
from drivers.mock import MockSystem
from drivers.mock.qcom.kgsl import KGSLModel, request_of

def ioc(direction: int, nr: int, size: int) -> int: return direction << 30 | size << 16 | 0x09 << 8 | nr   # _IOC(dir, 0x09, nr, size)
# (request, struct format) from msm_kgsl.h, little-endian with the padding the 64-bit ABI inserts
GETPROPERTY = (ioc(3, 0x02, 24), "<I4xQQ")          # type, value ptr @8, sizebytes @16
WAITTIMESTAMP = (ioc(1, 0x07, 12), "<III")          # context_id, timestamp, timeout
CTX_CREATE = (ioc(3, 0x13, 8), "<II")               # flags, drawctxt_id
CTX_DESTROY = (ioc(1, 0x14, 4), "<I")
MAP_USER_MEM = (ioc(3, 0x15, 48), "<i4xQQQQiI")     # fd, gpuaddr @8, len @16, offset @24, hostptr @32, memtype @40, flags @44
READTIMESTAMP = (ioc(3, 0x16, 12), "<III")          # context_id, type, timestamp
SHAREDMEM_FREE = (ioc(1, 0x21, 8), "<Q")
SETPROPERTY = (ioc(1, 0x32, 24), "<I4xQQ")
GPUOBJ_ALLOC = (ioc(3, 0x45, 48), "<QQQQIIQ")       # size, flags, va_len, mmapsize @24, id @32, metadata_len, metadata @40
GPUOBJ_FREE = (ioc(1, 0x46, 32), "<QQIII4x")        # flags, priv @8, id @16, type @20, len @24
GPUOBJ_INFO = (ioc(3, 0x47, 48), "<QQQQQI4x")       # gpuaddr, flags, size, va_len, va_addr @32, id @40
GPU_COMMAND = (ioc(3, 0x4A, 64), "<QQIIQIIQIIII")   # flags, cmdlist @8, cmdsize @16, numcmds, objlist @24, objsize @32, numobjs,
                                                    # synclist @40, syncsize @48, numsyncs, context_id @56, timestamp @60
CMD_OBJECT = "<QQQII"                               # kgsl_command_object: offset, gpuaddr @8, size @16, flags @24, id @28
PREAMBLE, NO_GMEM_ALLOC, USER_TS, SECURE = 0x10, 0x2, 0x80, 0x20000
USE_CPU_MAP, MEMALIGN_12 = 1 << 28, 12 << 16
IB, CTXTSWITCH_PREAMBLE = 1, 2

def parity(x: int) -> int: return int(bin(x).count("1") % 2 == 0)
def pkt7(op: int, *payload: int) -> list[int]:   # adreno_pm4types.h cp_type7_packet
  return [7 << 28 | len(payload) | parity(len(payload)) << 15 | op << 16 | parity(op) << 23, *payload]
MEM_WRITE, WAIT_REG_MEM = 0x3D, 0x3C
def split(addr: int) -> tuple[int, int]: return addr & 0xFFFFFFFF, addr >> 32   # a 64-bit address as two payload dwords

class Kgsl:
  """A minimal kgsl user: each call packs the struct, makes the ioctl and unpacks what came back."""
  def __init__(self, arch: str | None = None, model: KGSLModel | None = None):
    self.model = model or KGSLModel(arch)
    self.sys = MockSystem(usb_bridge=False)
    self.sys.register("/dev/kgsl", self.model)
    self.fd = self.sys.open("/dev/kgsl-3d0")
    self.keep: list = []
  def call(self, which, *values, request=None, fd=None):
    req, fmt = which
    buf = bytearray(struct.pack(fmt, *values))
    self.sys.ioctl(self.fd if fd is None else fd, "test", request or req, system.address_of(buf))
    return struct.unpack(fmt, buf)
  def buffer(self, data: bytes) -> int:
    self.keep.append(arr := np.frombuffer(bytearray(data), np.uint8))
    return system.address_of(arr)
  def context(self, flags: int = PREAMBLE | NO_GMEM_ALLOC) -> int: return self.call(CTX_CREATE, flags, 0)[1]
  def alloc(self, size: int, flags: int = USE_CPU_MAP | MEMALIGN_12) -> tuple[int, int, int]:
    """(id, CPU = GPU address, size) of a mapped object."""
    r = self.call(GPUOBJ_ALLOC, size, flags, 0, 0, 0, 0, 0)
    addr = self.sys.mmap(0, r[3], 3, system.MAP_SHARED, self.fd, r[4] << 12)
    return r[4], addr, r[0]
  def submit(self, ctx: int, words: list[int], at: int, flags: int = IB) -> int:
    system.memoryview_at(at, 4 * len(words))[:] = np.array(words, np.uint32).tobytes()
    cmd = self.buffer(struct.pack(CMD_OBJECT, 0, at, 4 * len(words), flags, 0))
    return self.call(GPU_COMMAND, 0, cmd, 32, 1, 0, 0, 0, 0, 0, 0, ctx, 0)[11]
  def readts(self, ctx: int, kind: int = 2) -> int: return self.call(READTIMESTAMP, ctx, kind, 0)[2]
  def prop(self, kind: int, size: int, value: bytes = b"") -> bytes:
    out = self.buffer(value.ljust(size, b"\xAA"))
    self.call(GETPROPERTY, kind, out, size)
    return bytes(system.memoryview_at(out, size))

@pytest.fixture
def k():
  dev = Kgsl()
  yield dev
  dev.model.stop()

@contextlib.contextmanager
def err(code: int, match: str | None = None):
  """The call fails with errno `code` and a message matching `match`."""
  with pytest.raises(OSError, match=match) as e: yield
  assert e.value.errno == code, f"errno {e.value.errno}, expected {code}: {e.value}"

def test_ioctl_numbers_and_sizes(k):
  # the values the fact sheet lists (docs/qcom.md section 1), from the struct sizes in the formats above
  assert {nr: request_of(nr) for nr in (0x02, 0x07, 0x13, 0x45, 0x46, 0x47, 0x4A)} == \
    {0x02: 0xC0180902, 0x07: 0x400C0907, 0x13: 0xC0080913, 0x45: 0xC0300945, 0x46: 0x40200946, 0x47: 0xC0300947, 0x4A: 0xC040094A}
  for which in (GETPROPERTY, WAITTIMESTAMP, CTX_CREATE, CTX_DESTROY, MAP_USER_MEM, READTIMESTAMP, GPUOBJ_ALLOC, GPUOBJ_FREE, GPUOBJ_INFO, GPU_COMMAND):
    assert struct.calcsize(which[1]) == which[0] >> 16 & 0x3FFF
  with err(errno.EINVAL, "encodes 56 bytes"): k.call(GPU_COMMAND, *[0] * 12, request=ioc(3, 0x4A, 56))   # a struct from another header
  with err(errno.EINVAL, "direction 1"): k.call(CTX_CREATE, PREAMBLE | NO_GMEM_ALLOC, 0, request=ioc(1, 0x13, 8))
  with err(errno.ENOTTY): k.call(CTX_DESTROY, 1, request=ioc(1, 0x7E, 4))

def test_device_info(k, monkeypatch):
  # kgsl_devinfo: device_id @0, chip_id @4, mmu_enabled @8, gmem_gpubaseaddr @16, gpu_id @24, gmem_sizebytes @32
  info = struct.unpack("<IIIIQI4xQ", k.prop(1, 40))
  assert info[1] == 0x06030001 and info[2] == 1 and info[6] == 1 << 20
  assert k.prop(1, 8) == struct.pack("<II", 1, 0x06030001)                    # a short buffer gets the start only
  with err(errno.ENODEV): k.prop(0x7777, 4)
  with err(errno.EFAULT): k.call(GETPROPERTY, 1, 0, 40)                   # copy_to_user of a NULL value
  for arch, chip in (("a740", 0x43050A01), ("a999", None)):   # MOCKGPU_QCOM_ARCH picks the GPU (getenv caches: cleared here)
    monkeypatch.setenv("MOCKGPU_QCOM_ARCH", arch)
    getenv.cache_clear()
    if chip is None:
      with pytest.raises(ValueError, match="a630, a740"): KGSLModel()
    else: assert struct.unpack("<IIIIQI4xQ", Kgsl().prop(1, 40))[1] == chip
  monkeypatch.delenv("MOCKGPU_QCOM_ARCH")
  getenv.cache_clear()

def test_contexts(k):
  with err(errno.EINVAL, "PREAMBLE and NO_GMEM_ALLOC"): k.context(PREAMBLE)
  with err(errno.EOPNOTSUPP): k.context(PREAMBLE | NO_GMEM_ALLOC | SECURE)
  flags, cid = k.call(CTX_CREATE, PREAMBLE | NO_GMEM_ALLOC | 0x1, 0)   # SAVE_GMEM (0x1) is not a flag kgsl keeps
  assert cid == 1 and flags == PREAMBLE | NO_GMEM_ALLOC | 0x40 | 8 << 12   # + PER_CONTEXT_TS, default priority 8
  assert k.context() == 2
  k.call(CTX_DESTROY, 1)
  assert k.context() == 1                                                  # idr_alloc: the lowest free id
  with err(errno.EINVAL, "no context 9"): k.call(CTX_DESTROY, 9)
  other = k.sys.open("/dev/kgsl-3d0")
  with err(errno.EINVAL): k.call(CTX_DESTROY, 2, fd=other)                 # kgsl_context_get_owner: another file's context

def test_pwr_constraint(k):
  cid = k.context()
  level = lambda n: k.buffer(struct.pack("<I", n))
  constraint = lambda ctx, lvl, size=4: k.buffer(struct.pack("<IIQQ", 1, ctx, level(lvl), size))   # type PWRLEVEL, context, data, size
  k.call(SETPROPERTY, 0x12, constraint(cid, 1), 24)
  with err(errno.EINVAL, "level 2"): k.call(SETPROPERTY, 0x12, constraint(cid, 2), 24)
  with err(errno.EINVAL, "size 8"): k.call(SETPROPERTY, 0x12, constraint(cid, 1, 8), 24)
  with err(errno.EINVAL, "sizebytes 16"): k.call(SETPROPERTY, 0x12, constraint(cid, 1), 16)
  with err(errno.EINVAL, "no context 5"): k.call(SETPROPERTY, 0x12, constraint(5, 1), 24)

def test_gpu_objects_and_mmap(k):
  size, flags, _, mmapsize, oid, _, _ = k.call(GPUOBJ_ALLOC, 5000, USE_CPU_MAP | MEMALIGN_12, 0, 0, 0, 0, 0)
  assert (size, mmapsize, oid, flags) == (8192, 8192, 1, USE_CPU_MAP | MEMALIGN_12)   # rounded to pages
  assert k.call(GPUOBJ_INFO, 0, 0, 0, 0, 0, oid)[0] == 0               # no GPU address before the mmap
  with err(errno.ERANGE): k.sys.mmap(0, 4096, 3, system.MAP_SHARED, k.fd, oid << 12)
  with err(errno.EINVAL, "id 7"): k.sys.mmap(0, 8192, 3, system.MAP_SHARED, k.fd, 7 << 12)
  addr = k.sys.mmap(0, 8192, 3, system.MAP_SHARED, k.fd, oid << 12)
  gpuaddr, _, isize, va_len, va_addr, _ = k.call(GPUOBJ_INFO, 0, 0, 0, 0, 0, oid)
  assert (gpuaddr, isize, va_len, va_addr) == (addr, 8192, 8192, 0)    # USE_CPU_MAP: GPU address = CPU address
  with err(errno.EBUSY): k.sys.mmap(0, 8192, 3, system.MAP_SHARED, k.fd, oid << 12)
  system.memoryview_at(addr, 4).cast("I")[0] = 0x1234
  assert k.model.memory.read(addr, 4, "test") == 0x1234                # the GPU sees the CPU's write
  plain = k.call(GPUOBJ_ALLOC, 4096, MEMALIGN_12, 0, 0, 0, 0, 0)[4]
  assert k.call(GPUOBJ_INFO, 0, 0, 0, 0, 0, plain)[0] >= 1 << 47       # without USE_CPU_MAP the GPU address comes at once
  with err(errno.EINVAL, "size 0x0"): k.call(GPUOBJ_ALLOC, 0, 0, 0, 0, 0, 0, 0)
  with err(errno.EINVAL, "id 0"): k.call(GPUOBJ_INFO, 0, 0, 0, 0, 0, 0)
  k.call(GPUOBJ_FREE, 0, 0, oid, 0, 0)
  with err(errno.EINVAL): k.call(GPUOBJ_INFO, 0, 0, 0, 0, 0, oid)
  with err(errno.EINVAL): k.call(GPUOBJ_FREE, 0, 0, oid, 0, 0)
  k.sys.munmap(addr, 8192)

def test_user_memory(k):
  host = system.mmap_anonymous(3 * 4096)
  r = k.call(MAP_USER_MEM, -1, 0, 8192, 0, host, 2, USE_CPU_MAP)        # memtype KGSL_USER_MEM_TYPE_ADDR
  assert r[1] == host and r[6] & 0xE0 == 3 << 5                         # GPU address = hostptr; USERMEM_ADDR flags
  with err(errno.EINVAL, "not page aligned"): k.call(MAP_USER_MEM, -1, 0, 4096, 0, host + 8, 2, 0)
  with err(errno.EOPNOTSUPP): k.call(MAP_USER_MEM, -1, 0, 4096, 0, host, 0, 0)
  system.munmap(host + 8192, 4096)
  with err(errno.EFAULT): k.call(MAP_USER_MEM, -1, 0, 8192, 0, host + 4096, 2, 0)
  k.call(SHAREDMEM_FREE, host)
  with err(errno.EINVAL): k.call(SHAREDMEM_FREE, host)
  system.munmap(host, 8192)

def test_submission_validation(k):
  cid = k.context()
  _, ib, _ = k.alloc(4096)
  cmd = lambda gpuaddr=ib, size=8, flags=IB: k.buffer(struct.pack(CMD_OBJECT, 0, gpuaddr, size, flags, 0))
  command = lambda c, cmdsize=32, n=1, ctx=cid: k.call(GPU_COMMAND, 0, c, cmdsize, n, 0, 0, 0, 0, 0, 0, ctx, 0)
  with err(errno.EINVAL, "item size 24"): command(cmd(), cmdsize=24)
  with err(errno.EINVAL, "no IB kind"): command(cmd(flags=0))
  with err(errno.EINVAL, "no context 4"): command(cmd(), ctx=4)
  with err(errno.EINVAL, "size 0x0"): command(cmd(size=0))
  with err(errno.EINVAL, "not dword aligned"): command(cmd(gpuaddr=ib + 2))
  with err(errno.EINVAL, "2001 cmds"): command(cmd(), n=2001)
  with err(errno.EINVAL, "all or none"): command(0)
  with err(errno.EFAULT): command(0x1000)                                 # a cmdlist pointer nothing maps
  obj = lambda flags: k.buffer(struct.pack(CMD_OBJECT, 0, ib, 4096, flags, 1))
  objects = lambda o, objsize=32: k.call(GPU_COMMAND, 0, cmd(), 32, 1, o, objsize, 1, 0, 0, 0, cid, 0)
  with err(errno.EINVAL, "item size 16"): objects(obj(8), objsize=16)
  with err(errno.EINVAL, "OBJLIST_MEMOBJ"): objects(obj(IB))
  system.memoryview_at(ib, 8)[:] = np.array(pkt7(0x10, 0), np.uint32).tobytes()   # the 8-byte IB: CP_NOP
  assert objects(obj(8))[11] == 1 and not k.model.faults                  # KGSL_OBJLIST_MEMOBJ (8)

def test_timestamps(k):
  cid = k.context()
  _, buf, _ = k.alloc(4096)
  assert k.submit(cid, pkt7(MEM_WRITE, *split(buf + 0x800), 5), buf) == 1
  assert k.submit(cid, pkt7(MEM_WRITE, *split(buf + 0x800), 6), buf + 0x100) == 2
  assert (k.readts(cid, 2), k.readts(cid, 3), system.memoryview_at(buf + 0x800, 4).cast("I")[0]) == (2, 2, 6)
  with err(errno.EINVAL, "type 7"): k.readts(cid, 7)
  with err(errno.EINVAL, "past the last queued"): k.call(WAITTIMESTAMP, cid, 3, 100)
  k.call(WAITTIMESTAMP, cid, 2, 100)
  user = k.context(PREAMBLE | NO_GMEM_ALLOC | USER_TS)                  # USER_GENERATED_TS: the caller's timestamps must grow
  cmd = k.buffer(struct.pack(CMD_OBJECT, 0, buf, 16, IB, 0))   # the first MEM_WRITE again
  assert k.call(GPU_COMMAND, 0, cmd, 32, 1, 0, 0, 0, 0, 0, 0, user, 10)[11] == 10
  with err(errno.ERANGE): k.call(GPU_COMMAND, 0, cmd, 32, 1, 0, 0, 0, 0, 0, 0, user, 10)

def test_preamble_ibs_run_only_after_a_context_switch(k):
  a, b = k.context(), k.context()
  _, buf, _ = k.alloc(4096)
  system.memoryview_at(buf, 16)[:] = np.array(pkt7(MEM_WRITE, *split(buf + 0x800), 7), np.uint32).tobytes()
  preamble = k.buffer(struct.pack(CMD_OBJECT, 0, buf, 16, CTXTSWITCH_PREAMBLE, 0))
  k.call(GPU_COMMAND, 0, preamble, 32, 1, 0, 0, 0, 0, 0, 0, a, 0)       # context a takes the GPU: its preamble runs
  counter = system.memoryview_at(buf + 0x800, 4).cast("I")
  assert counter[0] == 7
  counter[0] = 0
  k.call(GPU_COMMAND, 0, preamble, 32, 1, 0, 0, 0, 0, 0, 0, a, 0)       # still a: skipped
  assert counter[0] == 0
  k.call(GPU_COMMAND, 0, preamble, 32, 1, 0, 0, 0, 0, 0, 0, b, 0)
  assert counter[0] == 7

def test_fault_invalidates_the_context(k):
  cid, healthy = k.context(), k.context()
  _, buf, _ = k.alloc(4096)
  ts = k.submit(cid, pkt7(MEM_WRITE, *split(0x5000), 1), buf)                # a write to an address nothing maps
  assert ts == 1 and "0x5000" in k.model.faults[0] and "not mapped" in k.model.faults[0]
  stat = lambda ctx: struct.unpack("<I", k.prop(9, 4, struct.pack("<I", ctx)))[0]
  assert stat(cid) == 1 and stat(cid) == 0                              # GUILTY once, then NO_ERROR
  assert stat(healthy) == 0
  with err(errno.EDEADLK, "0x5000"): k.submit(cid, pkt7(0x10), buf)     # kgsl_check_context_state
  with err(errno.EDEADLK): k.call(WAITTIMESTAMP, cid, 1, 10)
  assert k.readts(cid) == 1                                             # retired jumps to the last queued
  assert k.submit(healthy, pkt7(MEM_WRITE, *split(buf + 0x800), 3), buf + 0x100) == 1

def test_unknown_packet_is_a_fault_naming_it(k):
  cid = k.context()
  _, buf, _ = k.alloc(4096)
  k.submit(cid, pkt7(0x10) + pkt7(0x7E, 0), buf)
  assert f"IB {buf:#x} dword 1" in k.model.faults[0] and "opcode 0x7e" in k.model.faults[0]

def test_wait_blocks_only_its_own_context(k):
  waiter, writer = k.context(), k.context()
  _, buf, _ = k.alloc(4096)
  signal = buf + 0x800
  # CP_WAIT_REG_MEM: WRITE_GE (5) | POLL_MEMORY (1 << 4), address, reference 1, mask, delay
  assert k.submit(waiter, pkt7(WAIT_REG_MEM, 5 | 1 << 4, *split(signal), 1, 0xFFFFFFFF, 32) + pkt7(MEM_WRITE, *split(signal + 4), 9), buf) == 1
  assert k.readts(waiter) == 0
  with err(errno.ETIMEDOUT): k.call(WAITTIMESTAMP, waiter, 1, 20)
  k.submit(writer, pkt7(MEM_WRITE, *split(signal), 1), buf + 0x100)          # a later submission of another context
  k.call(WAITTIMESTAMP, waiter, 1, 2000)
  assert system.memoryview_at(signal + 4, 4).cast("I")[0] == 9
  k.submit(waiter, pkt7(WAIT_REG_MEM, 5 | 1 << 4, *split(signal), 2, 0xFFFFFFFF, 32), buf + 0x200)
  threading.Timer(0.05, lambda: system.memoryview_at(signal, 4).cast("I").__setitem__(0, 2)).start()   # the CPU signals
  k.call(WAITTIMESTAMP, waiter, 2, 2000)

def test_free_on_timestamp(k):
  cid = k.context()
  _, buf, _ = k.alloc(4096)
  oid = k.call(GPUOBJ_ALLOC, 4096, 0, 0, 0, 0, 0, 0)[4]
  signal = buf + 0x800
  k.submit(cid, pkt7(WAIT_REG_MEM, 3 | 1 << 4, *split(signal), 1, 0xFFFFFFFF, 32), buf)
  event = k.buffer(struct.pack("<II", cid, 1))                          # kgsl_gpu_event_timestamp: context, timestamp
  k.call(GPUOBJ_FREE, 1, event, oid, 1, 8)                              # FREE_ON_EVENT, TIMESTAMP
  with err(errno.EINVAL): k.call(GPUOBJ_INFO, 0, 0, 0, 0, 0, oid)
  assert any(e.id == oid for _, e in k.model.contexts[cid].frees)       # held until timestamp 1 retires
  system.memoryview_at(signal, 4).cast("I")[0] = 1
  k.call(WAITTIMESTAMP, cid, 1, 2000)
  assert not k.model.contexts[cid].frees
