"""TRACE_IOCTL=1: the system seam logs every open/ioctl/mmap/munmap with its decoded argument and result, for the real
System and for the MOCK one alike; on the NV model the log holds exactly the calls the model received, and on the AMD
model the KFD structs are decoded by field."""
import os, re
import cffi
import pytest
from ir.switches import Context
from drivers.system import PROT_READ, MAP_PRIVATE, System
from drivers.trace_ioctl import decode
from drivers.mock import mock_system
from drivers.mock.nv.model import NVModel
from drivers.nv.device import NVDevice

ffi = cffi.FFI()
ffi.cdef("typedef struct { uint32_t a; int32_t b; } inner_t;"
         "typedef struct { uint64_t handle; inner_t in; char name[8]; uint8_t uuid[4]; uint32_t list[20]; inner_t many[3]; } outer_t;")

def test_decode_names_every_field():
  x = ffi.new("outer_t *", {"handle": 0xC1D00001, "in": {"a": 7, "b": -2}, "name": b"nv", "uuid": [0xA0, 0xA1, 0, 0xFF],
                            "list": [1, 2] + [0] * 18, "many": [{"a": 1}, {"b": 3}]})
  assert decode(x) == ("outer_t {handle=0xc1d00001, in={a=0x7, b=-2}, name=b'nv', uuid=0xa0a100ff, list=[0x1, 0x2, ... 18 more (18 zero)], "
                       "many=[{a=0x1, b=0x0}, {a=0x0, b=0x3}, ... 1 more (1 zero)]}")
  assert decode(0x1000) == "0x1000" and decode(ffi.cast("void *", 0x20)) == "(void *)0x20"

def test_real_system_logs_calls_and_errors(capfd, tmp_path):
  sys_ = System()
  path = tmp_path / "f"
  path.write_bytes(bytes(4096))
  with Context(TRACE_IOCTL=1):
    fd = sys_.open(str(path))
    with pytest.raises(OSError): sys_.ioctl(fd, "FIONREAD_ON_A_FILE", 0x1234, ffi.new("inner_t *", {"a": 5}))
    at = sys_.mmap(0, 4096, PROT_READ, MAP_PRIVATE, fd, 0)
    sys_.munmap(at, 4096)
    sys_.close(fd)
    with pytest.raises(OSError): sys_.open(str(tmp_path / "missing"))
  lines = capfd.readouterr().err.splitlines()
  assert lines == [f"TRACE_IOCTL open {path} -> fd {fd}",
                   f"TRACE_IOCTL ioctl fd {fd} ({path}) FIONREAD_ON_A_FILE 0x1234 inner_t {{a=0x5, b=0x0}} -> error ENOTTY: "
                   f"ioctl FIONREAD_ON_A_FILE (0x1234) failed: {os.strerror(25)} (errno 25)",
                   f"TRACE_IOCTL mmap fd {fd} ({path}) addr 0x0 size 0x1000 prot R flags PRIVATE offset 0x0 -> {at:#x}",
                   f"TRACE_IOCTL munmap {at:#x} size 0x1000", f"TRACE_IOCTL close fd {fd} ({path})",
                   f"TRACE_IOCTL open {tmp_path / 'missing'} -> error ENOENT: can't open {tmp_path / 'missing'}: No such file or directory"]

def test_nv_model_trace_is_what_the_model_saw(capfd):
  model = NVModel("hopper", "570.172.08")
  seen: list[tuple[str, int]] = []
  model_ioctl = model.ioctl
  def recorded(handle, name, request, arg):
    seen.append((name, request))
    return model_ioctl(handle, name, request, arg)
  model.ioctl = recorded
  mock_system.register("/dev/nvidia", model)
  capfd.readouterr()
  try:
    with Context(TRACE_IOCTL=1, DEV="MOCK+NV"): NVDevice("NV")
    err = capfd.readouterr().err
  finally: model.gpu.stop()
  traced = [(m[1], int(m[2], 16)) for m in re.finditer(r"^TRACE_IOCTL ioctl fd \d+ \(/dev/nvidia[\w-]*\) (\w+) (0x[0-9a-f]+) ", err, re.M)]
  assert traced == seen and len(seen) > 20
  assert "NV_ESC_CHECK_VERSION_STR 0xc04846d2 nv_ioctl_rm_api_version_t {cmd=0x32, reply=0x1, versionString=b'570.172.08'} -> 0" in err
  assert re.search(r"NV_ESC_RM_ALLOC 0x[0-9a-f]+ NVOS21_PARAMETERS \{hRoot=0x0, hObjectParent=0x0, hObjectNew=0x[0-9a-f]+, hClass=0x41, .*status=0x0\} -> 0", err)
  # the parameter structs RM's pointers lead to, as the call left them
  assert re.search(r"NV_ESC_RM_ALLOC 0x[0-9a-f]+ NVOS21_PARAMETERS \{[^}]*hClass=0x2080, [^}]*\} params NV2080_ALLOC_PARAMETERS \{subDeviceId=0x0\} -> 0", err)
  assert re.search(r"NV_ESC_RM_CONTROL 0x[0-9a-f]+ NVOS54_PARAMETERS \{[^}]*cmd=0x800201, [^}]*\} params NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS \{numClasses=0x[1-9a-f][0-9a-f]*, ", err)
  assert re.search(r"^TRACE_IOCTL mmap fd \d+ \(/dev/nvidia0\) addr 0x0 size 0x10000 prot R\|W flags SHARED offset 0x0 -> 0x[0-9a-f]+$", err, re.M)

def test_amd_model_trace_decodes_kfd_structs(capfd):
  from drivers.amd.device import AMDDevice
  from drivers.mock.amd.kfd import KFDModel
  model = KFDModel("gfx1100", count=1)
  for prefix in KFDModel.prefixes: mock_system.register(prefix, model)
  capfd.readouterr()
  try:
    with Context(TRACE_IOCTL=1, DEV="MOCK+AMD"): dev = AMDDevice("AMD")
    err = capfd.readouterr().err
  finally: model.stop()
  gpu = model.gpus[0].gpu_id
  assert f"AMDKFD_IOC_ACQUIRE_VM 0x40084b15 struct kfd_ioctl_acquire_vm_args {{drm_fd={dev.render:#x}, gpu_id={gpu:#x}}} -> 0" in err
  queues = re.findall(r"AMDKFD_IOC_CREATE_QUEUE 0xc0584b02 struct kfd_ioctl_create_queue_args \{ring_base_address=(0x[0-9a-f]+), .*queue_type=(0x[01]),", err)
  assert [(int(va, 16), int(t, 16)) for va, t in queues] == [(dev.rings["compute"].ring.va, 0), (dev.rings["copy"].ring.va, 1)]
  assert re.search(r"mmap fd -1 \(anonymous\) addr 0x0 size 0x8000 prot 0 flags PRIVATE\|ANONYMOUS\|NORESERVE", err)  # the event page's address, reserved

def test_silent_when_off(capfd):
  sys_ = System()
  with Context(TRACE_IOCTL=0): sys_.close(sys_.open(os.devnull))
  assert capfd.readouterr().err == ""
