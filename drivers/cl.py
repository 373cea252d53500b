"""CL: any OpenCL device through the ICD loader (libOpenCL, via cffi). Kernels are rendered as OpenCL C
(codegen/opencl.py), built by the device's own compiler (its build log is the error when that fails) and cached as
the device's binaries. `CL:n` is the n-th device over all platforms. Tested on PoCL (OpenCL on the CPU) and, with
`CL_RUNTIME=intel`, on Intel's OpenCL runtime for x86-64 CPUs from the pip package intel-opencl-rt (the `cl` extra),
whose library exports the OpenCL API itself and is opened directly, without a loader: it builds a kernel in about
40 ms where PoCL 3.1 takes about 250 (clang parsing its 900 KB opencl-c.h, linking its kernel library, then a
second generic work-group function when asked for the binary, and a specialised one at the first launch)."""
from __future__ import annotations
import functools, importlib.metadata, pathlib
from dataclasses import dataclass, field
import cffi
from ir.dtype import C_TYPES, dtypes
from ir.switches import CL_RUNTIME, DEV
from ir.target import parse_targets, target_for
from codegen.compiler import Compiler, CompileError
from codegen.opencl import OpenCLRenderer
from codegen.renderer import ProgramSpec
from drivers.device import Compiled, DeviceUnavailable, Image, LRUAllocator
from drivers.system import system_for

ffi = cffi.FFI()
ffi.cdef("""
typedef int32_t cl_int; typedef uint32_t cl_uint; typedef uint64_t cl_ulong; typedef uint64_t cl_bitfield;
typedef struct _cl_platform_id *cl_platform_id; typedef struct _cl_device_id *cl_device_id; typedef struct _cl_context *cl_context;
typedef struct _cl_command_queue *cl_command_queue; typedef struct _cl_mem *cl_mem; typedef struct _cl_program *cl_program;
typedef struct _cl_kernel *cl_kernel; typedef struct _cl_event *cl_event;
typedef struct { size_t origin, size; } cl_buffer_region;
typedef struct { cl_uint image_channel_order, image_channel_data_type; } cl_image_format;
typedef struct { cl_uint image_type; size_t image_width, image_height, image_depth, image_array_size, image_row_pitch, image_slice_pitch;
                 cl_uint num_mip_levels, num_samples; cl_mem buffer; } cl_image_desc;
cl_int clGetPlatformIDs(cl_uint num_entries, cl_platform_id *platforms, cl_uint *num_platforms);
cl_int clGetDeviceIDs(cl_platform_id platform, cl_bitfield device_type, cl_uint num_entries, cl_device_id *devices, cl_uint *num_devices);
cl_int clGetDeviceInfo(cl_device_id device, cl_uint param_name, size_t size, void *value, size_t *size_ret);
cl_context clCreateContext(const void *properties, cl_uint num_devices, const cl_device_id *devices, void *notify, void *user_data, cl_int *err);
cl_command_queue clCreateCommandQueue(cl_context context, cl_device_id device, cl_bitfield properties, cl_int *err);
cl_mem clCreateBuffer(cl_context context, cl_bitfield flags, size_t size, void *host_ptr, cl_int *err);
cl_mem clCreateSubBuffer(cl_mem buffer, cl_bitfield flags, cl_uint create_type, const void *info, cl_int *err);
cl_mem clCreateImage(cl_context context, cl_bitfield flags, const cl_image_format *format, const cl_image_desc *desc, void *host_ptr, cl_int *err);
cl_int clReleaseMemObject(cl_mem mem);
cl_int clEnqueueWriteImage(cl_command_queue q, cl_mem image, cl_uint blocking, const size_t *origin, const size_t *region, size_t row_pitch,
                           size_t slice_pitch, const void *ptr, cl_uint num_events, const cl_event *wait_list, cl_event *event);
cl_int clEnqueueReadImage(cl_command_queue q, cl_mem image, cl_uint blocking, const size_t *origin, const size_t *region, size_t row_pitch,
                          size_t slice_pitch, void *ptr, cl_uint num_events, const cl_event *wait_list, cl_event *event);
cl_int clEnqueueWriteBuffer(cl_command_queue q, cl_mem buffer, cl_uint blocking, size_t offset, size_t size, const void *ptr,
                            cl_uint num_events, const cl_event *wait_list, cl_event *event);
cl_int clEnqueueReadBuffer(cl_command_queue q, cl_mem buffer, cl_uint blocking, size_t offset, size_t size, void *ptr,
                           cl_uint num_events, const cl_event *wait_list, cl_event *event);
cl_program clCreateProgramWithSource(cl_context context, cl_uint count, const char **strings, const size_t *lengths, cl_int *err);
cl_program clCreateProgramWithBinary(cl_context context, cl_uint num_devices, const cl_device_id *devices, const size_t *lengths,
                                     const unsigned char **binaries, cl_int *status, cl_int *err);
cl_int clBuildProgram(cl_program program, cl_uint num_devices, const cl_device_id *devices, const char *options, void *notify, void *user_data);
cl_int clGetProgramBuildInfo(cl_program program, cl_device_id device, cl_uint param_name, size_t size, void *value, size_t *size_ret);
cl_int clGetProgramInfo(cl_program program, cl_uint param_name, size_t size, void *value, size_t *size_ret);
cl_int clReleaseProgram(cl_program program);
cl_kernel clCreateKernel(cl_program program, const char *name, cl_int *err);
cl_int clSetKernelArg(cl_kernel kernel, cl_uint index, size_t size, const void *value);
cl_int clReleaseKernel(cl_kernel kernel);
cl_int clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel kernel, cl_uint dims, const size_t *offset, const size_t *global_size,
                              const size_t *local_size, cl_uint num_events, const cl_event *wait_list, cl_event *event);
cl_int clWaitForEvents(cl_uint num_events, const cl_event *events);
cl_int clGetEventProfilingInfo(cl_event event, cl_uint param_name, size_t size, void *value, size_t *size_ret);
cl_int clReleaseEvent(cl_event event);
cl_int clFinish(cl_command_queue q);
""")
# from the Khronos OpenCL headers (CL/cl.h)
DEVICE_TYPE_ALL, MEM_READ_WRITE, QUEUE_PROFILING_ENABLE, BUFFER_CREATE_TYPE_REGION = 0xFFFFFFFF, 1, 1 << 1, 0x1220
DEVICE_TYPE, DEVICE_TYPE_CPU = 0x1000, 1 << 1
DEVICE_NAME, DEVICE_VERSION, DRIVER_VERSION, DEVICE_EXTENSIONS = 0x102B, 0x102F, 0x102D, 0x1030
DEVICE_MEM_BASE_ADDR_ALIGN, DEVICE_GLOBAL_MEM_SIZE = 0x1019, 0x101F
DEVICE_IMAGE_SUPPORT, DEVICE_IMAGE2D_MAX_WIDTH, DEVICE_IMAGE2D_MAX_HEIGHT = 0x1016, 0x1011, 0x1012
RGBA, HALF_FLOAT, FLOAT, MEM_OBJECT_IMAGE2D = 0x10B5, 0x10DD, 0x10DE, 0x10F1
PROGRAM_BUILD_LOG, PROGRAM_BINARY_SIZES, PROGRAM_BINARIES = 0x1183, 0x1165, 0x1166
PROFILING_COMMAND_START, PROFILING_COMMAND_END = 0x1282, 0x1283
BUILD_PROGRAM_FAILURE, DEVICE_NOT_FOUND, PLATFORM_NOT_FOUND_KHR = -11, -1, -1001

BUILD_OPTIONS = b"-w"  # warnings (unused variables of unrolled lanes) would be printed by some runtimes on every build

class CLError(RuntimeError): pass

def check(status: int, call: str) -> None:
  if status != 0: raise CLError(f"{call} failed with OpenCL error {status}")

def checked(call: str, fn, *args):
  """fn(*args, &err) for the calls that return an object and report through their last argument."""
  err = ffi.new("cl_int *")
  out = fn(*args, err)
  check(err[0], call)
  return out

@functools.cache
def load_library(system):
  """libOpenCL's functions through `system` (the real one, or MOCK's, which has none)."""
  try: return system.library(ffi, "OpenCL")
  except OSError: raise DeviceUnavailable("CL unavailable: libOpenCL.so (an OpenCL ICD loader) not found") from None

INTEL_PACKAGE = "intel-opencl-rt"

def intel_runtime_path() -> pathlib.Path | None:
  """libintelocl.so where the pip package intel-opencl-rt installed it (its wheel puts it in the prefix's lib/)."""
  try: dist = importlib.metadata.distribution(INTEL_PACKAGE)
  except importlib.metadata.PackageNotFoundError: return None
  found = [pathlib.Path(str(dist.locate_file(f))).resolve() for f in dist.files or () if f.name == "libintelocl.so"]
  return next((p for p in found if p.exists()), None)

@functools.cache
def load_intel_runtime():
  """Intel's CPU runtime, opened directly: libintelocl.so exports clGetPlatformIDs and the rest (its own platform only)."""
  if (path := intel_runtime_path()) is None:
    raise DeviceUnavailable(f"CL unavailable: CL_RUNTIME=intel, but Intel's OpenCL CPU runtime is not installed (pip install -e '.[cl]', "
                            f"which brings the {INTEL_PACKAGE} wheel on x86-64 Linux)")
  try: return ffi.dlopen(str(path))
  except OSError as e: raise DeviceUnavailable(f"CL unavailable: can't load {path}: {e}") from None

def all_devices(cl) -> list:
  """Every OpenCL device of every platform, in platform order."""
  count = ffi.new("cl_uint *")
  if (status := cl.clGetPlatformIDs(0, ffi.NULL, count)) in (PLATFORM_NOT_FOUND_KHR,) or count[0] == 0: return []
  check(status, "clGetPlatformIDs")
  platforms = ffi.new(f"cl_platform_id[{count[0]}]")
  check(cl.clGetPlatformIDs(count[0], platforms, ffi.NULL), "clGetPlatformIDs")
  out = []
  for p in platforms:
    n = ffi.new("cl_uint *")
    if cl.clGetDeviceIDs(p, DEVICE_TYPE_ALL, 0, ffi.NULL, n) == DEVICE_NOT_FOUND: continue
    ids = ffi.new(f"cl_device_id[{n[0]}]")
    check(cl.clGetDeviceIDs(p, DEVICE_TYPE_ALL, n[0], ids, ffi.NULL), "clGetDeviceIDs")
    out.extend(ids)
  return out

def device_info(cl, device, param: int) -> bytes:
  size = ffi.new("size_t *")
  check(cl.clGetDeviceInfo(device, param, 0, ffi.NULL, size), "clGetDeviceInfo")
  buf = ffi.new(f"char[{size[0]}]")
  check(cl.clGetDeviceInfo(device, param, size[0], buf, ffi.NULL), "clGetDeviceInfo")
  return ffi.buffer(buf)[:]
def device_text(cl, device, param: int) -> str: return device_info(cl, device, param).rstrip(b"\0").decode(errors="replace")
def device_int(cl, device, param: int, ctype: str) -> int: return ffi.cast(f"{ctype} *", ffi.from_buffer(device_info(cl, device, param)))[0]

@dataclass(eq=False)
class CLBuffer:
  """`size` bytes at byte `offset` of `mem` (a view when offset > 0); kernels get the view as a sub-buffer."""
  mem: object
  size: int
  offset: int = 0
  image: Image | None = None  # a 2-D image of RGBA pixels (IMAGE=1) rather than a buffer
  _sub: object = field(default=None, repr=False)

class CLAllocator(LRUAllocator):
  def __init__(self, dev: CLDevice):
    super().__init__()
    self.dev = dev
    self.capacity = device_int(dev.cl, dev.device_id, DEVICE_GLOBAL_MEM_SIZE, "cl_ulong")
  def _alloc(self, size: int, options=None) -> CLBuffer:
    try:
      if isinstance(options, Image): return CLBuffer(self._image(size, options), size, image=options)
      return CLBuffer(checked("clCreateBuffer", self.dev.cl.clCreateBuffer, self.dev.context, MEM_READ_WRITE, max(size, 1), ffi.NULL), size)
    except CLError as e: raise MemoryError(str(e)) from None
  def _image(self, size: int, image: Image):
    """A 2-D RGBA image of `size` bytes: float channels, or half ones for 2-byte elements (FLOAT16=1)."""
    channel = {4: FLOAT, 2: HALF_FLOAT}[size // (image.height * image.width * 4)]
    desc = ffi.new("cl_image_desc *", {"image_type": MEM_OBJECT_IMAGE2D, "image_width": image.width, "image_height": image.height})
    return checked("clCreateImage", self.dev.cl.clCreateImage, self.dev.context, MEM_READ_WRITE, ffi.new("cl_image_format *", (RGBA, channel)), desc, ffi.NULL)
  def _free(self, opaque: CLBuffer, size: int, options=None) -> None: self.dev.cl.clReleaseMemObject(opaque.mem)
  def offset(self, opaque: CLBuffer, size: int, offset: int) -> CLBuffer:
    if opaque.image is not None: raise ValueError(f"{self.dev.device} can't view part of an image ({opaque.image})")
    return CLBuffer(opaque.mem, size, opaque.offset + offset)
  def copyin(self, dest: CLBuffer, src: memoryview) -> None:
    if dest.image is not None:
      check(self.dev.cl.clEnqueueWriteImage(self.dev.queue, dest.mem, 1, ffi.new("size_t[3]"), self._region(dest.image), 0, 0, ffi.from_buffer(src),
                                            0, ffi.NULL, ffi.NULL), "clEnqueueWriteImage")
      return
    check(self.dev.cl.clEnqueueWriteBuffer(self.dev.queue, dest.mem, 1, dest.offset, src.nbytes, ffi.from_buffer(src), 0, ffi.NULL, ffi.NULL), "clEnqueueWriteBuffer")
  def copyout(self, dest: memoryview, src: CLBuffer) -> None:
    out = ffi.from_buffer(dest, require_writable=True)
    if src.image is not None:
      check(self.dev.cl.clEnqueueReadImage(self.dev.queue, src.mem, 1, ffi.new("size_t[3]"), self._region(src.image), 0, 0, out, 0, ffi.NULL, ffi.NULL), "clEnqueueReadImage")
      return
    check(self.dev.cl.clEnqueueReadBuffer(self.dev.queue, src.mem, 1, src.offset, dest.nbytes, out, 0, ffi.NULL, ffi.NULL), "clEnqueueReadBuffer")
  @staticmethod
  def _region(image: Image): return ffi.new("size_t[3]", [image.width, image.height, 1])  # rows packed: the pitch is the width

  def kernel_arg(self, buf: CLBuffer):
    """The cl_mem a kernel takes for `buf`: the buffer itself, or a sub-buffer for a view (at an offset the device accepts)."""
    if not buf.offset: return buf.mem
    if buf._sub is None:
      if buf.offset % self.dev.base_align:
        raise ValueError(f"{self.dev.device} can't pass a buffer view at byte offset {buf.offset} to a kernel (sub-buffers start at multiples of {self.dev.base_align})")
      region = ffi.new("cl_buffer_region *", (buf.offset, max(buf.size, 1)))
      buf._sub = checked("clCreateSubBuffer", self.dev.cl.clCreateSubBuffer, buf.mem, MEM_READ_WRITE, BUFFER_CREATE_TYPE_REGION, region)
    return buf._sub

class CLCompiler(Compiler):
  """OpenCL C -> the device's binary (what clGetProgramInfo returns), through the device's own compiler."""
  def __init__(self, dev: CLDevice):
    self.dev = dev
    super().__init__(f"cl_{dev.name}_{dev.driver}".replace(" ", "_"))
  def compile(self, src: str) -> bytes:
    cl = self.dev.cl
    source = ffi.new("char[]", src.encode())
    program = checked("clCreateProgramWithSource", cl.clCreateProgramWithSource, self.dev.context, 1, ffi.new("const char **", source), ffi.NULL)
    try:
      if (status := cl.clBuildProgram(program, 1, self.dev.ids, BUILD_OPTIONS, ffi.NULL, ffi.NULL)) != 0:
        raise CompileError(f"OpenCL build failed (error {status}) on {self.dev.name}:\n{self.build_log(program)}\n--- source ---\n{src}")
      size = ffi.new("size_t *")
      check(cl.clGetProgramInfo(program, PROGRAM_BINARY_SIZES, ffi.sizeof("size_t"), size, ffi.NULL), "clGetProgramInfo")
      binary = ffi.new(f"unsigned char[{size[0]}]")
      check(cl.clGetProgramInfo(program, PROGRAM_BINARIES, ffi.sizeof("void *"), ffi.new("unsigned char **", binary), ffi.NULL), "clGetProgramInfo")
      return ffi.buffer(binary)[:]
    finally: cl.clReleaseProgram(program)
  def build_log(self, program) -> str:
    size = ffi.new("size_t *")
    self.dev.cl.clGetProgramBuildInfo(program, self.dev.device_id, PROGRAM_BUILD_LOG, 0, ffi.NULL, size)
    log = ffi.new(f"char[{max(size[0], 1)}]")
    self.dev.cl.clGetProgramBuildInfo(program, self.dev.device_id, PROGRAM_BUILD_LOG, size[0], log, ffi.NULL)
    return ffi.string(log).decode(errors="replace").strip()

class CLProgram:
  def __init__(self, dev: CLDevice, name: str, lib: bytes, spec: ProgramSpec):
    self.dev, self.name, cl = dev, name, dev.cl
    binary = ffi.new("unsigned char[]", lib)
    status = ffi.new("cl_int *")
    self.program = checked("clCreateProgramWithBinary", cl.clCreateProgramWithBinary, dev.context, 1, dev.ids, ffi.new("size_t *", len(lib)),
                           ffi.new("const unsigned char **", binary), status)
    check(status[0], "clCreateProgramWithBinary (binary status)")
    check(cl.clBuildProgram(self.program, 1, dev.ids, ffi.NULL, ffi.NULL, ffi.NULL), "clBuildProgram (from binary)")
    self.kernel = checked("clCreateKernel", cl.clCreateKernel, self.program, name.encode())
    self.var_types = [C_TYPES[v.dtype] for v in spec.vars]
  def __del__(self):
    try:
      self.dev.cl.clReleaseKernel(self.kernel)
      self.dev.cl.clReleaseProgram(self.program)
    except Exception: pass  # noqa: BLE001 - at exit the library, cffi, or even contextlib may already be gone
  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=None, vals: tuple = (), wait: bool = False) -> float | None:
    cl = self.dev.cl
    for i, b in enumerate(bufs): check(cl.clSetKernelArg(self.kernel, i, ffi.sizeof("cl_mem"), ffi.new("cl_mem *", self.dev.allocator.kernel_arg(b))), "clSetKernelArg")
    for i, (t, v) in enumerate(zip(self.var_types, vals), len(bufs)): check(cl.clSetKernelArg(self.kernel, i, ffi.sizeof(t), ffi.new(f"{t} *", v)), "clSetKernelArg")
    local = tuple(local_size or (1, 1, 1))
    total = ffi.new("size_t[3]", [g * l for g, l in zip(global_size, local)])
    event = ffi.new("cl_event *")
    check(cl.clEnqueueNDRangeKernel(self.dev.queue, self.kernel, 3, ffi.NULL, total, ffi.new("size_t[3]", local), 0, ffi.NULL, event), "clEnqueueNDRangeKernel")
    try:
      if not wait: return None
      check(cl.clWaitForEvents(1, event), "clWaitForEvents")
      start, end = ffi.new("cl_ulong *"), ffi.new("cl_ulong *")
      check(cl.clGetEventProfilingInfo(event[0], PROFILING_COMMAND_START, 8, start, ffi.NULL), "clGetEventProfilingInfo")
      check(cl.clGetEventProfilingInfo(event[0], PROFILING_COMMAND_END, 8, end, ffi.NULL), "clGetEventProfilingInfo")
      return (end[0] - start[0]) * 1e-9
    finally: cl.clReleaseEvent(event[0])

class CLDevice(Compiled):
  def __init__(self, device: str):
    target = target_for(parse_targets(DEV.value), "CL")
    if target.renderer not in ("", "CL"): raise ValueError(f"CL has no renderer {target.renderer!r} (known: CL)")
    if CL_RUNTIME.value == "intel" and target.interface:
      raise DeviceUnavailable(f"CL unavailable: CL_RUNTIME=intel opens Intel's library on this machine; the {target.interface} interface has none")
    self.cl = load_intel_runtime() if CL_RUNTIME.value == "intel" else load_library(system_for(target.interface))
    index = int(device.split(":")[1]) if ":" in device else 0
    devices = all_devices(self.cl)
    if index >= len(devices): raise DeviceUnavailable(f"CL unavailable: {device} asked for, OpenCL reports {len(devices)} device(s)")
    self.device_id = devices[index]
    self.ids = ffi.new("cl_device_id[1]", [self.device_id])
    self.name, self.driver = device_text(self.cl, self.device_id, DEVICE_NAME), device_text(self.cl, self.device_id, DRIVER_VERSION)
    extensions = device_text(self.cl, self.device_id, DEVICE_EXTENSIONS).split()
    self.host_cpu = bool(device_int(self.cl, self.device_id, DEVICE_TYPE, "cl_ulong") & DEVICE_TYPE_CPU)  # PoCL: not a default over CPU
    self.base_align = device_int(self.cl, self.device_id, DEVICE_MEM_BASE_ADDR_ALIGN, "cl_uint") // 8
    if device_int(self.cl, self.device_id, DEVICE_IMAGE_SUPPORT, "cl_uint"):
      self.image_size = tuple(device_int(self.cl, self.device_id, p, "size_t") for p in (DEVICE_IMAGE2D_MAX_WIDTH, DEVICE_IMAGE2D_MAX_HEIGHT))
    self.context = checked("clCreateContext", self.cl.clCreateContext, ffi.NULL, 1, self.ids, ffi.NULL, ffi.NULL)
    self.queue = checked("clCreateCommandQueue", self.cl.clCreateCommandQueue, self.context, self.device_id, QUEUE_PROFILING_ENABLE)
    if "cl_khr_fp64" not in extensions: self.unsupported_dtypes = frozenset((dtypes.float64,))
    renderer = OpenCLRenderer(fp16="cl_khr_fp16" in extensions, fp64="cl_khr_fp64" in extensions)
    super().__init__(device, CLAllocator(self), renderer, CLCompiler(self), lambda name, lib, spec: CLProgram(self, name, lib, spec))
  def synchronize(self) -> None: check(self.cl.clFinish(self.queue), "clFinish")
