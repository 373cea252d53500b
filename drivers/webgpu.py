"""WEBGPU: compute through wgpu-native's C API (webgpu.h and its wgpu.h extensions) via cffi. The library comes from
the `wgpu` pip package, whose wheel ships it; only the shared library is used, none of wgpu-py's Python. Kernels are
rendered as WGSL (codegen/wgsl.py); "compiling" is the runtime's validation of the WGSL (its message is the
CompileError), and a program is a compute pipeline with an explicit bind-group layout: the buffers, then a uniform
struct of the Variables. Copies in go through the queue's writeBuffer, copies out through a mapped staging buffer.
`WEBGPU_BACKEND=WGPUBackendType_Vulkan` (Metal, D3D12, OpenGL, OpenGLES) picks the backend. WGSL has no 64-bit types:
int64, uint64 and float64 buffers are refused. Tested on Mesa's lavapipe (Vulkan on the CPU)."""
from __future__ import annotations
import importlib.util, pathlib, re, struct, time
from dataclasses import dataclass
import cffi
from ir.dtype import dtypes
from ir.helpers import prod
from ir.switches import DEV, WEBGPU_BACKEND, SwitchError
from ir.target import parse_targets, target_for
from codegen.compiler import Compiler, CompileError
from codegen.renderer import ProgramSpec
from codegen.wgsl import WGSLRenderer, flattened
from drivers.device import Compiled, DeviceUnavailable, LRUAllocator

ffi = cffi.FFI()
ffi.cdef("""
typedef uint64_t WGPUFlags; typedef uint32_t WGPUBool;
typedef struct WGPUInstanceImpl *WGPUInstance; typedef struct WGPUAdapterImpl *WGPUAdapter; typedef struct WGPUDeviceImpl *WGPUDevice;
typedef struct WGPUQueueImpl *WGPUQueue; typedef struct WGPUBufferImpl *WGPUBuffer; typedef struct WGPUShaderModuleImpl *WGPUShaderModule;
typedef struct WGPUBindGroupLayoutImpl *WGPUBindGroupLayout; typedef struct WGPUPipelineLayoutImpl *WGPUPipelineLayout;
typedef struct WGPUComputePipelineImpl *WGPUComputePipeline; typedef struct WGPUBindGroupImpl *WGPUBindGroup;
typedef struct WGPUCommandEncoderImpl *WGPUCommandEncoder; typedef struct WGPUComputePassEncoderImpl *WGPUComputePassEncoder;
typedef struct WGPUCommandBufferImpl *WGPUCommandBuffer; typedef struct WGPUQuerySetImpl *WGPUQuerySet;
typedef struct { const char *data; size_t length; } WGPUStringView;
typedef struct WGPUChainedStruct { struct WGPUChainedStruct *next; uint32_t sType; } WGPUChainedStruct;
typedef struct { uint64_t id; } WGPUFuture;
typedef struct { WGPUChainedStruct chain; WGPUFlags backends; WGPUFlags flags; uint32_t dx12ShaderCompiler; uint32_t gles3MinorVersion;
  uint32_t glFenceBehaviour; WGPUStringView dxcPath; uint32_t dxcMaxShaderModel; uint32_t dx12PresentationSystem;
  const uint8_t *budgetForDeviceCreation; const uint8_t *budgetForDeviceLoss;
  struct { uint32_t type; union { struct { void *display; int screen; } xlib; struct { void *connection; int screen; } xcb; struct { void *display; } wayland; } data; } displayHandle;
} WGPUInstanceExtras;
typedef struct { WGPUChainedStruct *nextInChain; size_t requiredFeatureCount; const uint32_t *requiredFeatures; const void *requiredLimits; } WGPUInstanceDescriptor;
typedef struct { WGPUChainedStruct *nextInChain; uint32_t featureLevel; uint32_t powerPreference; WGPUBool forceFallbackAdapter; uint32_t backendType;
  void *compatibleSurface; } WGPURequestAdapterOptions;
typedef void (*WGPURequestAdapterCallback)(uint32_t status, WGPUAdapter adapter, WGPUStringView message, void *userdata1, void *userdata2);
typedef void (*WGPURequestDeviceCallback)(uint32_t status, WGPUDevice device, WGPUStringView message, void *userdata1, void *userdata2);
typedef void (*WGPUBufferMapCallback)(uint32_t status, WGPUStringView message, void *userdata1, void *userdata2);
typedef void (*WGPUPopErrorScopeCallback)(uint32_t status, uint32_t type, WGPUStringView message, void *userdata1, void *userdata2);
typedef void (*WGPUUncapturedErrorCallback)(const WGPUDevice *device, uint32_t type, WGPUStringView message, void *userdata1, void *userdata2);
typedef void (*WGPUDeviceLostCallback)(const WGPUDevice *device, uint32_t reason, WGPUStringView message, void *userdata1, void *userdata2);
typedef struct { WGPUChainedStruct *nextInChain; uint32_t mode; WGPURequestAdapterCallback callback; void *userdata1; void *userdata2; } WGPURequestAdapterCallbackInfo;
typedef struct { WGPUChainedStruct *nextInChain; uint32_t mode; WGPURequestDeviceCallback callback; void *userdata1; void *userdata2; } WGPURequestDeviceCallbackInfo;
typedef struct { WGPUChainedStruct *nextInChain; uint32_t mode; WGPUBufferMapCallback callback; void *userdata1; void *userdata2; } WGPUBufferMapCallbackInfo;
typedef struct { WGPUChainedStruct *nextInChain; uint32_t mode; WGPUPopErrorScopeCallback callback; void *userdata1; void *userdata2; } WGPUPopErrorScopeCallbackInfo;
typedef struct { WGPUChainedStruct *nextInChain; WGPUUncapturedErrorCallback callback; void *userdata1; void *userdata2; } WGPUUncapturedErrorCallbackInfo;
typedef struct { WGPUChainedStruct *nextInChain; uint32_t mode; WGPUDeviceLostCallback callback; void *userdata1; void *userdata2; } WGPUDeviceLostCallbackInfo;
typedef struct { WGPUChainedStruct *nextInChain; WGPUStringView vendor, architecture, device, description; uint32_t backendType, adapterType,
  vendorID, deviceID, subgroupMinSize, subgroupMaxSize; } WGPUAdapterInfo;
typedef struct { WGPUChainedStruct *nextInChain; uint32_t maxTextureDimension1D, maxTextureDimension2D, maxTextureDimension3D, maxTextureArrayLayers,
  maxBindGroups, maxBindGroupsPlusVertexBuffers, maxBindingsPerBindGroup, maxDynamicUniformBuffersPerPipelineLayout,
  maxDynamicStorageBuffersPerPipelineLayout, maxSampledTexturesPerShaderStage, maxSamplersPerShaderStage, maxStorageBuffersPerShaderStage,
  maxStorageTexturesPerShaderStage, maxUniformBuffersPerShaderStage; uint64_t maxUniformBufferBindingSize, maxStorageBufferBindingSize;
  uint32_t minUniformBufferOffsetAlignment, minStorageBufferOffsetAlignment, maxVertexBuffers; uint64_t maxBufferSize;
  uint32_t maxVertexAttributes, maxVertexBufferArrayStride, maxInterStageShaderVariables, maxColorAttachments, maxColorAttachmentBytesPerSample,
  maxComputeWorkgroupStorageSize, maxComputeInvocationsPerWorkgroup, maxComputeWorkgroupSizeX, maxComputeWorkgroupSizeY, maxComputeWorkgroupSizeZ,
  maxComputeWorkgroupsPerDimension, maxImmediateSize; } WGPULimits;
typedef struct { WGPUChainedStruct *nextInChain; WGPUStringView label; } WGPULabelled;
typedef struct { WGPUChainedStruct *nextInChain; WGPUStringView label; size_t requiredFeatureCount; const uint32_t *requiredFeatures;
  const WGPULimits *requiredLimits; WGPULabelled defaultQueue; WGPUDeviceLostCallbackInfo deviceLostCallbackInfo;
  WGPUUncapturedErrorCallbackInfo uncapturedErrorCallbackInfo; } WGPUDeviceDescriptor;
typedef struct { WGPUChainedStruct *nextInChain; WGPUStringView label; WGPUFlags usage; uint64_t size; WGPUBool mappedAtCreation; } WGPUBufferDescriptor;
typedef struct { WGPUChainedStruct chain; WGPUStringView code; } WGPUShaderSourceWGSL;
typedef struct { WGPUChainedStruct *nextInChain; uint32_t type; WGPUBool hasDynamicOffset; uint64_t minBindingSize; } WGPUBufferBindingLayout;
typedef struct { WGPUChainedStruct *nextInChain; uint32_t binding; WGPUFlags visibility; uint32_t bindingArraySize; WGPUBufferBindingLayout buffer;
  struct { WGPUChainedStruct *nextInChain; uint32_t type; } sampler;
  struct { WGPUChainedStruct *nextInChain; uint32_t sampleType; uint32_t viewDimension; WGPUBool multisampled; } texture;
  struct { WGPUChainedStruct *nextInChain; uint32_t access; uint32_t format; uint32_t viewDimension; } storageTexture; } WGPUBindGroupLayoutEntry;
typedef struct { WGPUChainedStruct *nextInChain; WGPUStringView label; size_t entryCount; const WGPUBindGroupLayoutEntry *entries; } WGPUBindGroupLayoutDescriptor;
typedef struct { WGPUChainedStruct *nextInChain; WGPUStringView label; size_t bindGroupLayoutCount; const WGPUBindGroupLayout *bindGroupLayouts;
  uint32_t immediateSize; } WGPUPipelineLayoutDescriptor;
typedef struct { WGPUChainedStruct *nextInChain; WGPUStringView label; WGPUPipelineLayout layout;
  struct { WGPUChainedStruct *nextInChain; WGPUShaderModule module; WGPUStringView entryPoint; size_t constantCount; const void *constants; } compute;
} WGPUComputePipelineDescriptor;
typedef struct { WGPUChainedStruct *nextInChain; uint32_t binding; WGPUBuffer buffer; uint64_t offset; uint64_t size; void *sampler; void *textureView; } WGPUBindGroupEntry;
typedef struct { WGPUChainedStruct *nextInChain; WGPUStringView label; WGPUBindGroupLayout layout; size_t entryCount; const WGPUBindGroupEntry *entries; } WGPUBindGroupDescriptor;
typedef struct { WGPUChainedStruct *nextInChain; WGPUQuerySet querySet; uint32_t beginningOfPassWriteIndex; uint32_t endOfPassWriteIndex; } WGPUPassTimestampWrites;
typedef struct { WGPUChainedStruct *nextInChain; WGPUStringView label; const WGPUPassTimestampWrites *timestampWrites; } WGPUComputePassDescriptor;
typedef struct { WGPUChainedStruct *nextInChain; WGPUStringView label; uint32_t type; uint32_t count; } WGPUQuerySetDescriptor;
WGPUInstance wgpuCreateInstance(const WGPUInstanceDescriptor *descriptor);
WGPUFuture wgpuInstanceRequestAdapter(WGPUInstance instance, const WGPURequestAdapterOptions *options, WGPURequestAdapterCallbackInfo callbackInfo);
void wgpuInstanceProcessEvents(WGPUInstance instance);
uint32_t wgpuAdapterGetInfo(WGPUAdapter adapter, WGPUAdapterInfo *info);
void wgpuAdapterInfoFreeMembers(WGPUAdapterInfo info);
uint32_t wgpuAdapterGetLimits(WGPUAdapter adapter, WGPULimits *limits);
WGPUBool wgpuAdapterHasFeature(WGPUAdapter adapter, uint32_t feature);
WGPUFuture wgpuAdapterRequestDevice(WGPUAdapter adapter, const WGPUDeviceDescriptor *descriptor, WGPURequestDeviceCallbackInfo callbackInfo);
WGPUQueue wgpuDeviceGetQueue(WGPUDevice device);
WGPUBool wgpuDevicePoll(WGPUDevice device, WGPUBool wait, const uint64_t *submissionIndex);
void wgpuDevicePushErrorScope(WGPUDevice device, uint32_t filter);
WGPUFuture wgpuDevicePopErrorScope(WGPUDevice device, WGPUPopErrorScopeCallbackInfo callbackInfo);
WGPUBuffer wgpuDeviceCreateBuffer(WGPUDevice device, const WGPUBufferDescriptor *descriptor);
void wgpuBufferRelease(WGPUBuffer buffer);
WGPUFuture wgpuBufferMapAsync(WGPUBuffer buffer, WGPUFlags mode, size_t offset, size_t size, WGPUBufferMapCallbackInfo callbackInfo);
const void *wgpuBufferGetConstMappedRange(WGPUBuffer buffer, size_t offset, size_t size);
void wgpuBufferUnmap(WGPUBuffer buffer);
void wgpuQueueWriteBuffer(WGPUQueue queue, WGPUBuffer buffer, uint64_t bufferOffset, const void *data, size_t size);
void wgpuQueueSubmit(WGPUQueue queue, size_t commandCount, const WGPUCommandBuffer *commands);
float wgpuQueueGetTimestampPeriod(WGPUQueue queue);
WGPUShaderModule wgpuDeviceCreateShaderModule(WGPUDevice device, const WGPULabelled *descriptor);
void wgpuShaderModuleRelease(WGPUShaderModule module);
WGPUBindGroupLayout wgpuDeviceCreateBindGroupLayout(WGPUDevice device, const WGPUBindGroupLayoutDescriptor *descriptor);
void wgpuBindGroupLayoutRelease(WGPUBindGroupLayout layout);
WGPUPipelineLayout wgpuDeviceCreatePipelineLayout(WGPUDevice device, const WGPUPipelineLayoutDescriptor *descriptor);
void wgpuPipelineLayoutRelease(WGPUPipelineLayout layout);
WGPUComputePipeline wgpuDeviceCreateComputePipeline(WGPUDevice device, const WGPUComputePipelineDescriptor *descriptor);
void wgpuComputePipelineRelease(WGPUComputePipeline pipeline);
WGPUBindGroup wgpuDeviceCreateBindGroup(WGPUDevice device, const WGPUBindGroupDescriptor *descriptor);
void wgpuBindGroupRelease(WGPUBindGroup group);
WGPUQuerySet wgpuDeviceCreateQuerySet(WGPUDevice device, const WGPUQuerySetDescriptor *descriptor);
WGPUCommandEncoder wgpuDeviceCreateCommandEncoder(WGPUDevice device, const WGPULabelled *descriptor);
void wgpuCommandEncoderCopyBufferToBuffer(WGPUCommandEncoder encoder, WGPUBuffer source, uint64_t sourceOffset, WGPUBuffer destination,
                                          uint64_t destinationOffset, uint64_t size);
void wgpuCommandEncoderResolveQuerySet(WGPUCommandEncoder encoder, WGPUQuerySet querySet, uint32_t firstQuery, uint32_t queryCount,
                                       WGPUBuffer destination, uint64_t destinationOffset);
WGPUComputePassEncoder wgpuCommandEncoderBeginComputePass(WGPUCommandEncoder encoder, const WGPUComputePassDescriptor *descriptor);
WGPUCommandBuffer wgpuCommandEncoderFinish(WGPUCommandEncoder encoder, const WGPULabelled *descriptor);
void wgpuCommandEncoderRelease(WGPUCommandEncoder encoder);
void wgpuCommandBufferRelease(WGPUCommandBuffer commandBuffer);
void wgpuComputePassEncoderSetPipeline(WGPUComputePassEncoder pass, WGPUComputePipeline pipeline);
void wgpuComputePassEncoderSetBindGroup(WGPUComputePassEncoder pass, uint32_t groupIndex, WGPUBindGroup group, size_t dynamicOffsetCount,
                                        const uint32_t *dynamicOffsets);
void wgpuComputePassEncoderDispatchWorkgroups(WGPUComputePassEncoder pass, uint32_t x, uint32_t y, uint32_t z);
void wgpuComputePassEncoderEnd(WGPUComputePassEncoder pass);
void wgpuComputePassEncoderRelease(WGPUComputePassEncoder pass);
""")
# from webgpu.h and wgpu.h
STYPE_SHADER_SOURCE_WGSL, STYPE_INSTANCE_EXTRAS = 0x2, 0x30004
CALLBACK_ALLOW_SPONTANEOUS, STATUS_SUCCESS, FEATURE_LEVEL_CORE, POWER_HIGH_PERFORMANCE, ADAPTER_TYPE_CPU = 3, 1, 2, 2, 3
FEATURE_TIMESTAMP_QUERY, FEATURE_SHADER_F16, QUERY_TYPE_TIMESTAMP = 0x9, 0xB, 2
ERROR_FILTER_VALIDATION, ERROR_TYPE_NO_ERROR = 1, 1
USAGE_MAP_READ, USAGE_COPY_SRC, USAGE_COPY_DST, USAGE_UNIFORM, USAGE_STORAGE, USAGE_QUERY_RESOLVE = 0x1, 0x4, 0x8, 0x40, 0x80, 0x200
MAP_MODE_READ, SHADER_STAGE_COMPUTE, BINDING_UNIFORM, BINDING_STORAGE = 1, 4, 2, 3
# WEBGPU_BACKEND's values -> (WGPUBackendType, the WGPUInstanceBackend bit that enables it)
BACKENDS = {"WGPUBackendType_D3D12": (4, 1 << 3), "WGPUBackendType_Metal": (5, 1 << 2), "WGPUBackendType_Vulkan": (6, 1 << 0),
            "WGPUBackendType_OpenGL": (7, 1 << 1), "WGPUBackendType_OpenGLES": (8, 1 << 1)}
PRIMARY_BACKENDS = (1 << 0) | (1 << 2) | (1 << 3)  # Vulkan, Metal, D3D12: probing GL (EGL, Wayland) by default only prints noise
BACKEND_NAMES = {4: "D3D12", 5: "Metal", 6: "Vulkan", 7: "OpenGL", 8: "OpenGLES"}
COPY_ALIGN = 4  # buffer copies and writeBuffer move whole 4-byte words

class WebGPUError(RuntimeError): pass

def round_up(x: int, to: int) -> int: return (x + to - 1) // to * to
def text(view) -> str:
  if view.data == ffi.NULL: return ""
  return (ffi.string(view.data) if view.length == ffi.cast("size_t", -1) else ffi.unpack(view.data, view.length)).decode(errors="replace")

# callbacks: each reports into the dict its userdata1 handle points at
@ffi.callback("void(uint32_t, WGPUAdapter, WGPUStringView, void *, void *)")
def _on_adapter(status, adapter, message, box, _): ffi.from_handle(box).update(status=status, value=adapter, message=text(message))
@ffi.callback("void(uint32_t, WGPUDevice, WGPUStringView, void *, void *)")
def _on_device(status, device, message, box, _): ffi.from_handle(box).update(status=status, value=device, message=text(message))
@ffi.callback("void(uint32_t, WGPUStringView, void *, void *)")
def _on_mapped(status, message, box, _): ffi.from_handle(box).update(status=status, message=text(message))
@ffi.callback("void(uint32_t, uint32_t, WGPUStringView, void *, void *)")
def _on_popped(status, kind, message, box, _): ffi.from_handle(box).update(status=status, kind=kind, message=text(message))
@ffi.callback("void(const WGPUDevice *, uint32_t, WGPUStringView, void *, void *)")
def _on_error(device, kind, message, errors, _): ffi.from_handle(errors).append(text(message))  # raised by the call that caused it

def library_path() -> pathlib.Path | None:
  """wgpu-native as the `wgpu` wheel ships it (found without importing wgpu)."""
  spec = importlib.util.find_spec("wgpu")
  if spec is None or spec.origin is None: return None
  found = [p for p in sorted((pathlib.Path(spec.origin).parent / "resources").glob("*wgpu_native*")) if p.suffix in (".so", ".dylib", ".dll")]
  return found[0] if found else None

def load_library():
  if (path := library_path()) is None: raise DeviceUnavailable("WEBGPU unavailable: wgpu-native not found (pip install wgpu: its wheel ships the library)")
  try: return ffi.dlopen(str(path))
  except OSError as e: raise DeviceUnavailable(f"WEBGPU unavailable: can't load {path}: {e}") from None

def string_view(data: bytes, keep: list):
  """A WGPUStringView of data (kept alive in `keep` while the view is in use)."""
  keep.append(buf := ffi.new("char[]", data))
  return {"data": buf, "length": len(data)}

@dataclass(eq=False)
class WebGPUBuffer:
  """`size` bytes at byte `offset` of `buf` (a view when offset > 0)."""
  buf: object
  size: int
  offset: int = 0

class WebGPUAllocator(LRUAllocator):
  def __init__(self, dev: WebGPUDevice):
    super().__init__()
    self.dev = dev
  def _alloc(self, size: int, options=None) -> WebGPUBuffer:
    return WebGPUBuffer(self.dev.create_buffer(max(round_up(size, COPY_ALIGN), COPY_ALIGN), USAGE_STORAGE | USAGE_COPY_SRC | USAGE_COPY_DST), size)
  def _free(self, opaque: WebGPUBuffer, size: int, options=None) -> None: self.dev.lib.wgpuBufferRelease(opaque.buf)
  def offset(self, opaque: WebGPUBuffer, size: int, offset: int) -> WebGPUBuffer: return WebGPUBuffer(opaque.buf, size, opaque.offset + offset)
  def copyin(self, dest: WebGPUBuffer, src: memoryview) -> None:
    if not src.nbytes: return
    start, end = dest.offset - dest.offset % COPY_ALIGN, round_up(dest.offset + src.nbytes, COPY_ALIGN)
    if (start, end) != (dest.offset, dest.offset + src.nbytes):  # partial words at the edges: keep their other bytes
      data = bytearray(self.dev.read(dest.buf, start, end - start))
      data[dest.offset - start:dest.offset - start + src.nbytes] = src
      src = memoryview(data)
    self.dev.lib.wgpuQueueWriteBuffer(self.dev.queue, dest.buf, start, ffi.from_buffer(src), end - start)
    self.dev.raise_errors("wgpuQueueWriteBuffer")
  def copyout(self, dest: memoryview, src: WebGPUBuffer) -> None:
    if not dest.nbytes: return
    start = src.offset - src.offset % COPY_ALIGN
    data = self.dev.read(src.buf, start, round_up(src.offset + dest.nbytes, COPY_ALIGN) - start)
    dest[:] = data[src.offset - start:src.offset - start + dest.nbytes]

class WGSLCompiler(Compiler):
  """WGSL has no binary the runtime takes back: compiling validates the module (the runtime's message is the error)
  and the WGSL is the program."""
  def __init__(self, dev: WebGPUDevice):
    super().__init__(None)
    self.dev = dev
  def compile(self, src: str) -> bytes:
    self.dev.lib.wgpuShaderModuleRelease(self.dev.shader_module(src))
    return src.encode()

class WebGPUProgram:
  def __init__(self, dev: WebGPUDevice, name: str, lib: bytes, spec: ProgramSpec):
    self.dev, self.name = dev, name
    self.layout, self.pipeline = dev.pipeline(name, lib.decode())
    self.vars_format = "<" + "".join("i" if v.dtype == dtypes.int32 else "f" for v in spec.vars)
    self.vars_size = round_up(struct.calcsize(self.vars_format), 16)
    self.uniform = dev.create_buffer(self.vars_size, USAGE_UNIFORM | USAGE_COPY_DST) if spec.vars else None
  def __del__(self):
    try:
      self.dev.lib.wgpuComputePipelineRelease(self.pipeline)
      self.dev.lib.wgpuBindGroupLayoutRelease(self.layout)
      if self.uniform is not None: self.dev.lib.wgpuBufferRelease(self.uniform)
    except Exception: pass  # at exit the library (or cffi, or this module's globals) may already be gone
  def bind_group(self, bufs, vals: tuple):
    lib, limits = self.dev.lib, self.dev.limits
    entries = ffi.new(f"WGPUBindGroupEntry[{len(bufs) + (self.uniform is not None)}]")
    for i, b in enumerate(bufs):
      if b.offset % limits.minStorageBufferOffsetAlignment:
        raise ValueError(f"{self.dev.device} can't pass a buffer view at byte offset {b.offset} to a kernel (bindings start at multiples of "
                         f"{limits.minStorageBufferOffsetAlignment})")
      if (size := max(round_up(b.size, COPY_ALIGN), COPY_ALIGN)) > limits.maxStorageBufferBindingSize:
        raise ValueError(f"{self.dev.device} can't pass a {b.size}-byte buffer to a kernel (the adapter binds at most {limits.maxStorageBufferBindingSize} bytes)")
      entries[i].binding, entries[i].buffer, entries[i].offset, entries[i].size = i, b.buf, b.offset, size
    if self.uniform is not None:
      lib.wgpuQueueWriteBuffer(self.dev.queue, self.uniform, 0, ffi.from_buffer(struct.pack(self.vars_format, *vals).ljust(self.vars_size, b"\0")), self.vars_size)
      entries[len(bufs)].binding, entries[len(bufs)].buffer, entries[len(bufs)].size = len(bufs), self.uniform, self.vars_size
    return lib.wgpuDeviceCreateBindGroup(self.dev.gpu, ffi.new("WGPUBindGroupDescriptor *", {"layout": self.layout, "entryCount": len(entries), "entries": entries}))
  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=None, vals: tuple = (), wait: bool = False) -> float | None:
    dev, lib = self.dev, self.dev.lib
    grid = tuple(global_size)
    if flattened(grid, (most := dev.limits.maxComputeWorkgroupsPerDimension)):  # the kernel renumbers a 2D grid (codegen/wgsl.py)
      total = prod(grid)
      grid = (min(total, most), (total + most - 1) // most, 1)
      if grid[1] > most: raise ValueError(f"{dev.device} can't launch {total} workgroups (at most {most}**2)")
    group = self.bind_group(bufs, vals)
    timed = wait and dev.timestamps is not None
    encoder = lib.wgpuDeviceCreateCommandEncoder(dev.gpu, ffi.NULL)
    writes = ffi.new("WGPUPassTimestampWrites *", {"querySet": dev.timestamps[0], "endOfPassWriteIndex": 1}) if timed else ffi.NULL
    compute = lib.wgpuCommandEncoderBeginComputePass(encoder, ffi.new("WGPUComputePassDescriptor *", {"timestampWrites": writes}))
    lib.wgpuComputePassEncoderSetPipeline(compute, self.pipeline)
    lib.wgpuComputePassEncoderSetBindGroup(compute, 0, group, 0, ffi.NULL)
    lib.wgpuComputePassEncoderDispatchWorkgroups(compute, *grid)
    lib.wgpuComputePassEncoderEnd(compute)
    if timed: lib.wgpuCommandEncoderResolveQuerySet(encoder, dev.timestamps[0], 0, 2, dev.timestamps[1], 0)
    st = time.perf_counter()
    dev.submit(encoder)
    lib.wgpuComputePassEncoderRelease(compute)
    lib.wgpuBindGroupRelease(group)
    dev.raise_errors(f"running {self.name}")
    if not wait: return None
    dev.synchronize()
    if not timed: return time.perf_counter() - st
    begin, end = struct.unpack("<QQ", dev.read(dev.timestamps[1], 0, 16))
    return (end - begin) * dev.timestamp_period * 1e-9

class WebGPUDevice(Compiled):
  unsupported_dtypes = frozenset((dtypes.int64, dtypes.uint64, dtypes.float64))  # WGSL has no 64-bit types
  def __init__(self, device: str):
    target = target_for(parse_targets(DEV.value), "WEBGPU")
    if target.renderer not in ("", "WGSL"): raise ValueError(f"WEBGPU has no renderer {target.renderer!r} (known: WGSL)")
    if target.interface: raise DeviceUnavailable(f"WEBGPU unavailable: the {target.interface} interface has no wgpu-native")
    if ":" in device: raise DeviceUnavailable(f"WEBGPU unavailable: {device} asked for; tg opens the one adapter wgpu-native picks, as WEBGPU")
    if WEBGPU_BACKEND.value and WEBGPU_BACKEND.value not in BACKENDS:
      raise SwitchError(f"switch WEBGPU_BACKEND={WEBGPU_BACKEND.value!r} is not a backend; choose one of {', '.join(BACKENDS)}")
    backend, backend_bits = BACKENDS.get(WEBGPU_BACKEND.value, (0, PRIMARY_BACKENDS))
    self.lib = lib = load_library()
    self.errors: list[str] = []
    self._errors_handle, keep = ffi.new_handle(self.errors), []
    extras = ffi.new("WGPUInstanceExtras *", {"chain": {"sType": STYPE_INSTANCE_EXTRAS}, "backends": backend_bits})
    self.instance = lib.wgpuCreateInstance(ffi.new("WGPUInstanceDescriptor *", {"nextInChain": ffi.cast("WGPUChainedStruct *", extras)}))
    if self.instance == ffi.NULL: raise DeviceUnavailable("WEBGPU unavailable: wgpuCreateInstance failed")
    self.gpu = None
    options = ffi.new("WGPURequestAdapterOptions *", {"featureLevel": FEATURE_LEVEL_CORE, "powerPreference": POWER_HIGH_PERFORMANCE, "backendType": backend})
    found = self.answer(lib.wgpuInstanceRequestAdapter, self.instance, options, _on_adapter, "requesting an adapter")
    if found["status"] != STATUS_SUCCESS or found["value"] == ffi.NULL:
      raise DeviceUnavailable(f"WEBGPU unavailable: no adapter{' on ' + WEBGPU_BACKEND.value if backend else ''} ({found['message'] or 'none found'})")
    self.adapter = found["value"]
    info = ffi.new("WGPUAdapterInfo *")
    lib.wgpuAdapterGetInfo(self.adapter, info)
    self.name, self.backend = text(info.description) or text(info.device), BACKEND_NAMES.get(info.backendType, str(info.backendType))
    self.host_cpu = info.adapterType == ADAPTER_TYPE_CPU  # lavapipe: not a default over tg's CPU device
    lib.wgpuAdapterInfoFreeMembers(info[0])
    self.limits = ffi.new("WGPULimits *")
    lib.wgpuAdapterGetLimits(self.adapter, self.limits)
    features = [f for f in (FEATURE_SHADER_F16, FEATURE_TIMESTAMP_QUERY) if lib.wgpuAdapterHasFeature(self.adapter, f)]
    desc = ffi.new("WGPUDeviceDescriptor *", {"requiredFeatureCount": len(features), "requiredFeatures": ffi.new("uint32_t[]", features) if features else ffi.NULL,
                                              "requiredLimits": self.limits, "label": string_view(b"tg", keep),
                                              "uncapturedErrorCallbackInfo": {"callback": _on_error, "userdata1": self._errors_handle}})
    made = self.answer(lib.wgpuAdapterRequestDevice, self.adapter, desc, _on_device, "requesting a device")
    if made["status"] != STATUS_SUCCESS: raise DeviceUnavailable(f"WEBGPU unavailable: {self.name} refused a device: {made['message']}")
    self.gpu, self.queue = made["value"], lib.wgpuDeviceGetQueue(made["value"])
    self.timestamps = None  # (query set of 2, its 16-byte resolve buffer) where the adapter has timestamp queries
    if FEATURE_TIMESTAMP_QUERY in features:
      queries = lib.wgpuDeviceCreateQuerySet(self.gpu, ffi.new("WGPUQuerySetDescriptor *", {"type": QUERY_TYPE_TIMESTAMP, "count": 2}))
      self.timestamps = (queries, self.create_buffer(16, USAGE_QUERY_RESOLVE | USAGE_COPY_SRC))
      self.timestamp_period = lib.wgpuQueueGetTimestampPeriod(self.queue)  # nanoseconds per tick
    renderer = WGSLRenderer(fp16=FEATURE_SHADER_F16 in features, max_workgroups=self.limits.maxComputeWorkgroupsPerDimension)
    super().__init__(device, WebGPUAllocator(self), renderer, WGSLCompiler(self), lambda name, lib, spec: WebGPUProgram(self, name, lib, spec))

  def answer(self, fn, obj, arg, callback, what: str) -> dict:
    """Calls fn(obj, arg, callback info) and waits for the callback's report."""
    box = {}
    handle = ffi.new_handle(box)
    fn(obj, arg, {"mode": CALLBACK_ALLOW_SPONTANEOUS, "callback": callback, "userdata1": handle})
    if "status" not in box:
      if self.gpu is not None: self.lib.wgpuDevicePoll(self.gpu, 1, ffi.NULL)
      self.lib.wgpuInstanceProcessEvents(self.instance)
    if "status" not in box: raise WebGPUError(f"{what}: wgpu-native never called back")
    return box
  def raise_errors(self, what: str, kind: type[Exception] = WebGPUError) -> None:
    if self.errors:
      message = "\n".join(self.errors)
      self.errors.clear()
      raise kind(f"{what} failed on {self.device_name}: {message}")
  @property
  def device_name(self) -> str: return f"WEBGPU ({self.name}, {self.backend})"
  def synchronize(self) -> None: self.lib.wgpuDevicePoll(self.gpu, 1, ffi.NULL)

  def create_buffer(self, size: int, usage: int):
    if size > self.limits.maxBufferSize: raise MemoryError(f"the adapter's largest buffer is {self.limits.maxBufferSize} bytes")
    buf = self.lib.wgpuDeviceCreateBuffer(self.gpu, ffi.new("WGPUBufferDescriptor *", {"usage": usage, "size": size}))
    self.raise_errors(f"allocating {size} bytes", MemoryError)
    return buf
  def submit(self, encoder) -> None:
    command = self.lib.wgpuCommandEncoderFinish(encoder, ffi.NULL)
    self.lib.wgpuQueueSubmit(self.queue, 1, ffi.new("WGPUCommandBuffer[1]", [command]))
    self.lib.wgpuCommandBufferRelease(command)
    self.lib.wgpuCommandEncoderRelease(encoder)
    self.lib.wgpuDevicePoll(self.gpu, 0, ffi.NULL)  # lets the runtime free what finished work held
  def read(self, buf, offset: int, size: int) -> bytes:
    """`size` bytes at `offset` of buf (both multiples of 4), through a mapped staging buffer, once queued work is done."""
    staging = self.create_buffer(size, USAGE_MAP_READ | USAGE_COPY_DST)
    try:
      encoder = self.lib.wgpuDeviceCreateCommandEncoder(self.gpu, ffi.NULL)
      self.lib.wgpuCommandEncoderCopyBufferToBuffer(encoder, buf, offset, staging, 0, size)
      self.submit(encoder)
      self.raise_errors("copying out")
      mapped = self.answer(lambda b, _, info: self.lib.wgpuBufferMapAsync(b, MAP_MODE_READ, 0, size, info), staging, None, _on_mapped, "mapping a buffer")
      if mapped["status"] != STATUS_SUCCESS: raise WebGPUError(f"mapping a buffer failed on {self.device_name}: {mapped['message']}")
      data = ffi.unpack(ffi.cast("const char *", self.lib.wgpuBufferGetConstMappedRange(staging, 0, size)), size)
      self.lib.wgpuBufferUnmap(staging)
      return data
    finally: self.lib.wgpuBufferRelease(staging)

  def shader_module(self, src: str):
    """The validated module for WGSL `src`; CompileError with the runtime's message when it isn't valid."""
    keep: list = []
    code = ffi.new("WGPUShaderSourceWGSL *", {"chain": {"sType": STYPE_SHADER_SOURCE_WGSL}, "code": string_view(src.encode(), keep)})
    self.lib.wgpuDevicePushErrorScope(self.gpu, ERROR_FILTER_VALIDATION)
    module = self.lib.wgpuDeviceCreateShaderModule(self.gpu, ffi.new("WGPULabelled *", {"nextInChain": ffi.cast("WGPUChainedStruct *", code)}))
    if (message := self.pop_error_scope()) is not None:
      self.lib.wgpuShaderModuleRelease(module)
      raise CompileError(f"WGSL compile failed on {self.device_name}:\n{message}\n--- source ---\n{src}")
    return module
  def pipeline(self, name: str, src: str) -> tuple:
    """(bind group layout, compute pipeline) of entry point `name` in WGSL `src`, whose bindings are the storage
    buffers and then, where it has Variables, one uniform struct."""
    keep: list = []
    kinds = re.findall(r"@binding\(\d+\) var<(storage|uniform)", src)
    entries = ffi.new(f"WGPUBindGroupLayoutEntry[{max(len(kinds), 1)}]")
    for i, kind in enumerate(kinds):
      entries[i].binding, entries[i].visibility, entries[i].buffer.type = i, SHADER_STAGE_COMPUTE, BINDING_STORAGE if kind == "storage" else BINDING_UNIFORM
    module = self.shader_module(src)
    self.lib.wgpuDevicePushErrorScope(self.gpu, ERROR_FILTER_VALIDATION)
    layout = self.lib.wgpuDeviceCreateBindGroupLayout(self.gpu, ffi.new("WGPUBindGroupLayoutDescriptor *", {"entryCount": len(kinds), "entries": entries}))
    pipeline_layout = self.lib.wgpuDeviceCreatePipelineLayout(self.gpu, ffi.new("WGPUPipelineLayoutDescriptor *", {
      "bindGroupLayoutCount": 1, "bindGroupLayouts": ffi.new("WGPUBindGroupLayout[1]", [layout])}))
    pipeline = self.lib.wgpuDeviceCreateComputePipeline(self.gpu, ffi.new("WGPUComputePipelineDescriptor *", {
      "layout": pipeline_layout, "compute": {"module": module, "entryPoint": string_view(name.encode(), keep)}}))
    message = self.pop_error_scope()
    self.lib.wgpuPipelineLayoutRelease(pipeline_layout)
    self.lib.wgpuShaderModuleRelease(module)
    if message is not None:
      self.lib.wgpuComputePipelineRelease(pipeline)
      self.lib.wgpuBindGroupLayoutRelease(layout)
      raise CompileError(f"WGSL pipeline {name} failed on {self.device_name}:\n{message}\n--- source ---\n{src}")
    return layout, pipeline
  def pop_error_scope(self) -> str | None:
    """The message of the first validation error since the matching push (None: there was none)."""
    popped = self.answer(lambda d, _, info: self.lib.wgpuDevicePopErrorScope(d, info), self.gpu, None, _on_popped, "reading an error scope")
    if popped["status"] != STATUS_SUCCESS: raise WebGPUError(f"reading an error scope failed on {self.device_name}: {popped['message']}")
    return None if popped["kind"] == ERROR_TYPE_NO_ERROR else popped["message"]
