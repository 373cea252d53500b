"""AMDGPU code generation: kernels from the frontend render to LLVM IR, compile for every supported arch, and link into
code objects whose kernel descriptors, arguments and code agree with LLVM's own object, metadata and listing."""
import os, re, shutil, struct, subprocess
import numpy as np
import pytest
from tg import Tensor, Variable, dtypes
from ir.ops import Ops
from codegen.amdgpu import AMDGPURenderer, _Kernel, wave_size
from codegen.amdgpu_compiler import AMDGPUCompiler, TRIPLE, features
from codegen.amdgpu_elf import ET_REL, read, sections, symbols
from codegen.compiler import CompileError
from codegen.kernel import Opt, OptOps
from codegen import llvm_compiler
from codegen.program import get_program

ARCHS = ["gfx1100", "gfx1101", "gfx1201", "gfx942", "gfx950"]

def asts(t: Tensor) -> list:
  return [i.ast for i in t.schedule() if i.ast.op is Ops.SINK]

def data(shape, dt=np.float32, seed=0) -> Tensor:
  return Tensor(np.random.default_rng(seed).random(shape).astype(dt), device="PYTHON").realize()

def programs():
  """(label, AST, opts) of kernels covering float math in every width, integer division, casts, reductions (with and
  without workgroup-shared memory), upcast vectors and a Variable."""
  x, a, b = data((33, 17)), data((7, 13)), data((13, 10), seed=1)
  i32, i64 = Tensor(np.arange(-9, 11, dtype=np.int32), device="PYTHON").realize(), Tensor(np.arange(-9, 11, dtype=np.int64), device="PYTHON").realize()
  out = [("sin_exp_log_sqrt_f32", (x.sin() + x.exp() + x.log() + x.sqrt() / (x + 1)), None),
         ("sum_rows", x.sum(1), None), ("max_cols", x.max(0), None),
         ("int32_div_mod", i32 // 3 + i32 % 7, None), ("int64_div_mod", i64 // 3 + i64 % 7, None),
         ("casts_where", ((x > 0.5).where(x, -x).cast(dtypes.int32) + x.cast(dtypes.uint8)).cast(dtypes.float32), None),
         ("matmul_local_group", a @ b, [Opt(OptOps.LOCAL, 0, 7), Opt(OptOps.GROUP, 2, 0)]),
         ("matmul_upcast", a @ b, [Opt(OptOps.PADTO, 1, 4), Opt(OptOps.UPCAST, 1, 4), Opt(OptOps.VECTORIZE, 2, 0)]),
         ("variable", Tensor.ones(8, device="PYTHON").contiguous()[:Variable("n", 1, 8).bind(5)] * 3, None)]
  for dt in (dtypes.float16, dtypes.bfloat16, dtypes.float64):
    y = x.cast(dt)
    out.append((f"math_{dt.name}", (y.sin() + y.exp2() + y.log2() + y.sqrt() + y.reciprocal()), None))
  return [(label, ast, opts) for label, t, opts in out for ast in asts(t)]

PROGRAMS = programs()

@pytest.fixture(scope="module", params=ARCHS)
def built(request):
  """Every program compiled for one arch: (spec, code object bytes, LLVM's relocatable object) per label."""
  arch = request.param
  renderer, compiler = AMDGPURenderer(arch), AMDGPUCompiler(arch)
  machine = llvm_compiler._machine(TRIPLE, arch, features(arch))
  out = {}
  for label, ast, opts in PROGRAMS:
    spec = get_program(ast, renderer, opts)
    with llvm_compiler._lock: obj = machine.emit_object(llvm_compiler._optimized(machine, spec.src, full_pipeline=True))
    out[label] = (spec, compiler.compile(spec.src), obj)
  return arch, compiler, out

def llvm_metadata(compiler: AMDGPUCompiler, src: str) -> dict[str, int]:
  """The scalar fields of LLVM's own YAML metadata (from its assembly listing), e.g. .sgpr_count."""
  listing = compiler.disassemble(src, b"")
  yaml = listing[listing.index(".amdgpu_metadata"):]
  return {k: int(v) for k, v in re.findall(r"^\s+(\.[a-z_]+):\s+(\d+)$", yaml, re.M)}

def text_of(obj: bytes) -> bytes:
  (text,) = [s for s in sections(obj, ET_REL) if s.name == ".text"]
  return obj[text.offset:text.offset + text.size]

def vgpr_granule(arch: str) -> int:
  """Registers per VGPR block in RSRC1 (AMDGPUUsage.rst "compute_pgm_rsrc1" GRANULATED_WORKITEM_VGPR_COUNT)."""
  if arch.startswith("gfx9"): return 8  # gfx90a/gfx94x/gfx95x: unified VGPR/AGPR file
  return 8 if wave_size(arch) == 32 else 4

def test_every_kernel_parses_back_with_its_own_arguments_and_code(built):
  arch, compiler, out = built
  for label, (spec, lib, obj) in out.items():
    co = read(lib)
    (k,) = co.kernels.values()
    assert k.name == spec.name, label
    # buffers (8-byte pointers), then int32 Variables at 4-byte alignment, as the renderer declared them
    want, at = [], 0
    for _ in spec.globals: want.append((at, 8)); at += 8
    for _ in spec.vars: want.append((at, 4)); at += 4
    assert k.args == want and k.kernarg_size == k.descriptor.kernarg_size == at, label
    # the code at the descriptor's entry is LLVM's .text, placed 256-byte aligned
    assert k.code_offset % 256 == 0 and k.kd_offset % 64 == 0, label
    code = text_of(obj)
    assert co.image[k.code_offset:k.code_offset + len(code)] == code, label

def test_descriptor_agrees_with_llvm_metadata(built):
  arch, compiler, out = built
  for label, (spec, lib, _) in out.items():
    (k,) = read(lib).kernels.values()
    meta, kd = llvm_metadata(compiler, spec.src), k.descriptor
    assert (k.sgpr_count, k.vgpr_count, k.wavefront_size) == (meta[".sgpr_count"], meta[".vgpr_count"], meta[".wavefront_size"]), label
    assert k.wavefront_size == wave_size(arch) and kd.wave32 == (wave_size(arch) == 32), label
    assert kd.group_segment_fixed_size == meta[".group_segment_fixed_size"] and kd.private_segment_fixed_size == meta[".private_segment_fixed_size"]
    g = vgpr_granule(arch)
    assert kd.vgpr_blocks * g < max(k.vgpr_count, 1) <= (kd.vgpr_blocks + 1) * g, label
    assert kd.uses_kernarg_segment_ptr and kd.kernel_code_properties & ~(1 << 10) == 1 << 3, label  # the kernarg pointer, nothing else
    # user SGPRs: the kernarg pointer (2); gfx1100 in wave32 pads user + system SGPRs to 16 (GCNSubtarget.h
    # hasUserSGPRInit16BugInWave32), so the driver must honour USER_SGPR_COUNT, not assume 2
    if arch == "gfx1100": assert kd.user_sgpr_count + sum(kd.workgroup_ids) == 16, label
    else: assert kd.user_sgpr_count == 2, label
    # a workgroup id SGPR per launch dimension the kernel reads (LLVM always enables x)
    used = {int(u.arg[0][-1]) for u in spec.uops if u.op is Ops.SPECIAL and u.arg[0].startswith("g")}
    assert {d for d in range(3) if kd.workgroup_ids[d]} == used | {0}, label

def test_local_memory_and_barriers(built):
  arch, compiler, out = built
  spec, lib, _ = out["matmul_local_group"]
  shared = sum(u.dtype.size * u.dtype.base.itemsize for u in spec.uops if u.op is Ops.DEFINE_LOCAL)
  assert shared > 0 and any(u.op is Ops.BARRIER for u in spec.uops)
  (k,) = read(lib).kernels.values()
  assert k.descriptor.group_segment_fixed_size >= shared
  listing = compiler.disassemble(spec.src, lib)
  assert "s_barrier" in listing and re.search(r"\bds_(write|store)", listing) and re.search(r"\bds_(read|load)", listing)
  assert f"max_flat_workgroup_size: {spec.local_size[0] * spec.local_size[1] * spec.local_size[2]}" in listing.replace("  ", " ").replace("  ", " ")

def test_no_hidden_arguments_or_dispatch_pointers(built):
  arch, compiler, out = built
  for label, (spec, lib, _) in out.items():
    listing = compiler.disassemble(spec.src, lib)
    assert "hidden_" not in listing and ".amdhsa_user_sgpr_dispatch_ptr 0" in listing and ".amdhsa_user_sgpr_queue_ptr 0" in listing, label

@pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils readelf not installed")
def test_readelf_accepts_the_code_object(built, tmp_path):
  arch, _, out = built
  spec, lib, _ = out["variable"]
  path = tmp_path / "k.co"
  path.write_bytes(lib)
  done = subprocess.run(["readelf", "-a", "-W", str(path)], capture_output=True, text=True)
  assert done.returncode == 0 and "Warning" not in done.stderr and "Error" not in done.stderr, done.stderr
  assert "DYN (Shared object file)" in done.stdout and "AMD GPU" in done.stdout and "NT_AMDGPU_METADATA" in done.stdout
  # readelf's view of the dynamic symbols: the descriptor's entry offset reaches the kernel's code
  syms = {name: int(v, 16) for v, name in re.findall(r"^\s+\d+: ([0-9a-f]+)\s+\d+ (?:FUNC|OBJECT)\s+GLOBAL\s+\w+\s+\d+ (\S+)$", done.stdout, re.M)}
  (k,) = read(lib).kernels.values()
  assert syms[f"{spec.name}.kd"] == k.kd_offset and syms[spec.name] == k.code_offset
  assert len(re.findall(r"^\s+LOAD\s", done.stdout, re.M)) == 3
  if (llvm_readelf := shutil.which("llvm-readelf-14") or shutil.which("llvm-readelf")) is not None:  # LLVM's reader agrees
    llvm_done = subprocess.run([llvm_readelf, "--dyn-symbols", "--program-headers", "--notes", str(path)], capture_output=True, text=True)
    assert llvm_done.returncode == 0 and "warning" not in llvm_done.stderr.lower(), llvm_done.stderr
    assert f"{spec.name}.kd" in llvm_done.stdout and "NT_AMDGPU_METADATA" in llvm_done.stdout

@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="compile workers run only beside a second core")
def test_compile_workers_give_the_same_code_objects():
  from codegen.compile_workers import workers
  from ir.switches import Context
  with Context(CCACHE=0):
    c = AMDGPUCompiler("gfx942")
    srcs = [get_program(ast, AMDGPURenderer("gfx942"), opts).src for _, ast, opts in PROGRAMS[:4]]
    jobs = [workers().submit(*c.worker_task, src) for src in srcs]
    assert [j.result.result(timeout=120) for j in jobs] == [c.compile(src) for src in srcs]
    with pytest.raises(CompileError, match="invalid LLVM IR"): workers().submit(*c.worker_task, "define broken(").result.result(timeout=120)
  assert "gfx942" in c.cachekey and AMDGPUCompiler("gfx1100").cachekey != c.cachekey

def test_bad_ir_and_unknown_archs():
  with pytest.raises(CompileError, match="invalid LLVM IR"): AMDGPUCompiler("gfx1100").compile("define amdgpu_kernel void @k() { nonsense }")
  with pytest.raises(ValueError, match="gfx9 and newer"): AMDGPURenderer("sm_90")
  with pytest.raises(ValueError, match="gfx8"): AMDGPUCompiler("gfx803")
  with pytest.raises(ValueError, match="not a CPU LLVM knows"): AMDGPUCompiler("gfx1999")

def test_render_shape_of_a_kernel():
  spec = get_program(asts(data((7, 13)) @ data((13, 10), seed=1))[0], AMDGPURenderer("gfx1100"), [Opt(OptOps.LOCAL, 0, 7), Opt(OptOps.GROUP, 2, 0)])
  src = spec.src
  assert re.search(r"define amdgpu_kernel void @\w+\(ptr addrspace\(1\) noalias %data0, ptr addrspace\(1\) noalias %data1, ptr addrspace\(1\) noalias %data2\)", src)
  lx, ly, lz = spec.local_size
  assert f'"amdgpu-flat-work-group-size"="1,{lx * ly * lz}"' in src and f"!{{i32 {lx}, i32 {ly}, i32 {lz}}}" in src
  assert "addrspace(3) global" in src and 'fence syncscope("workgroup") release' in src and "@llvm.amdgcn.s.barrier()" in src
  assert "llvm.amdgcn.workgroup.id.x" in src and "llvm.amdgcn.workitem.id.x" in src

def test_msgpack_reader_on_hand_encoded_values():
  from codegen.amdgpu_elf import unpack_msgpack
  # {"a": [1, -1, 300, "xy", true, nil, 1.5, -200000]} encoded by hand from the msgpack spec's type table
  raw = bytes([0x81, 0xA1, 0x61, 0x98, 0x01, 0xFF, 0xCD, 0x01, 0x2C, 0xA2, 0x78, 0x79, 0xC3, 0xC0, 0xCB]) + struct.pack(">d", 1.5) \
        + bytes([0xD2]) + struct.pack(">i", -200000)
  assert unpack_msgpack(raw) == {"a": [1, -1, 300, "xy", True, None, 1.5, -200000]}
  assert unpack_msgpack(bytes([0xD9, 3]) + b"abc") == "abc" and unpack_msgpack(bytes([0xDC, 0, 2, 0x05, 0x06])) == [5, 6]
  with pytest.raises(ValueError, match="0xc1"): unpack_msgpack(bytes([0xC1]))
  with pytest.raises(ValueError, match="runs past the end"): unpack_msgpack(bytes([0xA5]) + b"ab")
  with pytest.raises(ValueError, match="after the value"): unpack_msgpack(bytes([0x01, 0x02]))

KERNEL = """define amdgpu_kernel void @k(ptr addrspace(1) %out) #0 {
  %v = load i32, ptr addrspace(4) %p
  store i32 %v, ptr addrspace(1) %out
  ret void
}
declare ptr addrspace(4) @llvm.amdgcn.INPUT()
"""

def kernel_reading(intrinsic: str, attrs: str) -> str:
  src = KERNEL.replace("  %v = load", f"  %p = call ptr addrspace(4) @llvm.amdgcn.{intrinsic}()\n  %v = load").replace("INPUT", intrinsic)
  return src + f"attributes #0 = {{ {attrs} }}\n"

def test_kernels_needing_inputs_the_driver_lacks_are_refused():
  c = AMDGPUCompiler("gfx1100")
  with pytest.raises(ValueError, match="dispatch_ptr .*bit 1"): read(c.compile(kernel_reading("dispatch.ptr", '"amdgpu-implicitarg-num-bytes"="0"')))
  with pytest.raises(ValueError, match="queue_ptr .*bit 2"): read(c.compile(kernel_reading("queue.ptr", '"amdgpu-implicitarg-num-bytes"="0"')))
  with pytest.raises(ValueError, match="hidden kernel arguments hidden_block_count_x"): read(c.compile(kernel_reading("implicitarg.ptr", "nounwind")))

def relocatable(arch: str = "gfx1100") -> bytes:
  spec = get_program(PROGRAMS[0][1], AMDGPURenderer(arch))
  return llvm_compiler.compile_for(TRIPLE, arch, features(arch), spec.src, full_pipeline=True)

def with_relocation_type(obj: bytes, kind: int) -> bytes:
  """obj with the type of its one kernel-descriptor relocation (.rela.rodata, R_AMDGPU_REL64) replaced."""
  (rela,) = [s for s in sections(obj, ET_REL) if s.name == ".rela.rodata"]
  assert rela.size == 24
  out = bytearray(obj)
  struct.pack_into("<I", out, rela.offset + 8, kind)  # r_info: symbol index in the high half, type in the low half
  return bytes(out)

def test_relocations_resolved_or_refused_by_name():
  from codegen.amdgpu_elf import link
  obj = relocatable()
  (k,) = read(link(obj)).kernels.values()
  entry = k.descriptor.kernel_code_entry_byte_offset
  lo = read(link(with_relocation_type(obj, 10))).kernels[k.name]  # R_AMDGPU_REL32_LO: the low half only
  assert lo.descriptor.kernel_code_entry_byte_offset == entry & 0xFFFFFFFF
  with pytest.raises(ValueError, match="R_AMDGPU_ABS64 against .* needs the load address"): link(with_relocation_type(obj, 3))
  with pytest.raises(ValueError, match="relocation 99 "): link(with_relocation_type(obj, 99))
  with pytest.raises(ValueError, match="ET_REL"): link(link(obj))
  with pytest.raises(ValueError, match="ELFOSABI_AMDGPU_HSA"): link(obj[:7] + b"\0" + obj[8:])
  with pytest.raises(ValueError, match="EM_AMDGPU"): read(obj[:18] + struct.pack("<H", 62) + obj[20:])

def test_debug7_prints_llvms_listing(capsys):
  from ir.switches import Context
  spec = get_program(PROGRAMS[0][1], AMDGPURenderer("gfx1201"))
  with Context(DEBUG=7): AMDGPUCompiler("gfx1201").compile(spec.src)
  out = capsys.readouterr().out
  assert f"{spec.name}:" in out and "s_endpgm" in out and '.amdgcn_target "amdgcn-amd-amdhsa--gfx1201"' in out

def double_function(method: str, t: str = "double", replace: tuple[tuple[str, str], ...] = ()):
  """The renderer's routine `method` as a host function t(t) (t: double or float), JIT-compiled for this CPU: the same
  LLVM IR the GPU kernel gets (llvm.sin.f32 here is the host's libm sin, not the GPU's v_sin), run against numpy."""
  import ctypes
  import llvmlite.binding as llvm
  from codegen.amdgpu import _Kernel
  k = _Kernel("f")
  out = getattr(k, method)("%x", t)
  src = "\n".join(sorted(k.decls) + [f"define {t} @f({t} %x) {{", "entry:", *k.lines, f"  ret {t} {out}", "}"])
  for old, new in replace: src = src.replace(old, new)
  llvm_compiler._init()
  mod = llvm.parse_assembly(src)
  engine = llvm.create_mcjit_compiler(mod, llvm.Target.from_default_triple().create_target_machine())
  engine.finalize_object()
  ct = ctypes.c_double if t == "double" else ctypes.c_float
  fn = ctypes.CFUNCTYPE(ct, ct)(engine.get_function_address("f"))
  return lambda xs: np.array([fn(float(x)) for x in xs]), engine

SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -1.0, 1.0, 2.0])

@pytest.mark.parametrize("method,ref,xs,max_ulp", [
  ("exp2_f64", np.exp2, np.random.default_rng(2).uniform(-1080, 1030, 2000), 2),
  ("exp2_f64", np.exp2, np.random.default_rng(3).uniform(-2, 2, 2000), 2),
  ("log2_f64", np.log2, np.exp(np.random.default_rng(4).uniform(-700, 700, 2000)), 4),
  ("log2_f64", np.log2, 1 + np.random.default_rng(5).uniform(-1e-3, 1e-3, 2000), 4)])
def test_double_exp2_and_log2_within_a_few_ulps_of_numpy(method, ref, xs, max_ulp):
  f, _engine = double_function(method)
  with np.errstate(all="ignore"):
    got, want = f(np.concatenate([xs, SPECIALS])), ref(np.concatenate([xs, SPECIALS]))
  finite = np.isfinite(want) & (want != 0)
  assert (np.abs(got[finite] - want[finite]) / np.spacing(np.abs(want[finite]))).max() <= max_ulp
  np.testing.assert_array_equal(got[~finite], want[~finite])  # inf, 0 and NaN exactly as C's (numpy's) exp2/log2

def test_double_sin_with_its_argument_reduction():
  f, _engine = double_function("sin_f64")
  rng = np.random.default_rng(6)
  xs = np.concatenate([rng.uniform(-10, 10, 2000), rng.uniform(-1e6, 1e6, 2000)])
  assert np.abs(f(xs) - np.sin(xs)).max() <= 2e-16
  tiny = rng.uniform(-1e-3, 1e-3, 200)
  assert (np.abs(f(tiny) - np.sin(tiny)) / np.abs(np.sin(tiny))).max() <= 4e-16
  got = f(SPECIALS[:5])
  assert got[0] == 0 and np.signbit(got[1]) and np.isnan(got[2:]).all()

def test_float_sin_is_within_two_ulps_relative_to_its_value_without_a_hardware_sine():
  """The float32 sine is fused multiply-adds alone (no llvm.sin, which becomes v_sin, whose error is absolute): within
  2 ulp of float64 numpy over [-1e4, 1e4] and for tiny arguments; -0 keeps its sign; inf and NaN give NaN."""
  f, _engine = double_function("sin_f32", "float")
  rng = np.random.default_rng(7)
  xs = np.concatenate([rng.uniform(-1e4, 1e4, 2000), rng.uniform(-4, 4, 2000), 10.0 ** rng.uniform(-30, -1, 500)]).astype(np.float32)
  want = np.sin(xs.astype(np.float64)).astype(np.float32)
  assert (np.abs(f(xs).astype(np.float32) - want) / np.spacing(np.abs(want))).max() <= 2
  got = f(np.array([0.0, -0.0, np.inf, np.nan], np.float32))
  assert got[0] == 0 and np.signbit(got[1]) and np.isnan(got[2:]).all()
  k = _Kernel("f")
  k.sin("%x", dtypes.float32)
  assert not any("llvm.sin" in d for d in k.decls)

# ---- running the code objects on the RDNA3 shader-core model (drivers/mock/amd/shader), as the driver would load them ----
class _Memory:
  """GPU memory: numpy byte arrays at chosen addresses."""
  def __init__(self): self.maps: list[tuple[int, np.ndarray]] = []
  def add(self, va: int, data: np.ndarray) -> int:
    self.maps.append((va, data.view(np.uint8).reshape(-1)))
    return va
  def span(self, lo: int, hi: int):
    from drivers.mock.amd.shader.dispatch import ShaderFault
    for va, buf in self.maps:
      if va <= lo and hi <= va + buf.size: return buf, va
    raise ShaderFault(f"address {lo:#x} is not mapped", lo)

def run_on_rdna3(t: Tensor, opts=None, arch: str = "gfx1100") -> np.ndarray:
  """t's one kernel rendered, compiled and linked by tg, its image placed at a 4096-aligned base, run by the model."""
  from drivers.mock.amd.shader.dispatch import Dispatch
  from drivers.mock.amd.shader.execute import run
  (item,) = [i for i in t.schedule() if i.ast.op is Ops.SINK]
  spec = get_program(item.ast, AMDGPURenderer(arch), opts)
  co = read(AMDGPUCompiler(arch).compile(spec.src))
  (k,) = co.kernels.values()
  mem, base = _Memory(), 0x200000
  mem.add(base, np.frombuffer(co.image, np.uint8).copy())
  arrays = [np.frombuffer(item.bufs[g].ensure_allocated().as_bytes(), np.uint8).copy() for g in spec.globals]
  kernarg = bytearray(k.kernarg_size)
  for j, ((offset, _), arr) in enumerate(zip(k.args, arrays)):
    struct.pack_into("<Q", kernarg, offset, mem.add(0x10000000 * (j + 1), arr))
  kva = mem.add(0x1000000, np.frombuffer(bytes(kernarg) + bytes(64), np.uint8).copy())
  kd = k.descriptor
  user = (kva & 0xFFFFFFFF, kva >> 32) + (0,) * 14  # the kernarg pointer, then what gfx1100's padding SGPRs read
  run(Dispatch(arch, base + k.code_offset, kd.rsrc1, kd.rsrc2, kd.rsrc3, user, spec.global_size, spec.local_size or (1, 1, 1),
               kd.wave32, kd.group_segment_fixed_size), mem)
  return arrays[0].view(np.dtype(item.bufs[0].dtype.fmt))

@pytest.mark.parametrize("label", ["sin_f32", "exp2_log2_sin_f64", "local_group_matmul", "int_div_mod", "half_math"])
def test_kernels_run_on_the_rdna3_model_match_numpy(label):
  rng = np.random.default_rng(8)
  if label == "sin_f32":
    x = rng.uniform(-1e4, 1e4, 500).astype(np.float32)
    np.testing.assert_allclose(run_on_rdna3(Tensor(x, device="PYTHON").realize().sin()), np.sin(x.astype(np.float64)), atol=3e-6)
  elif label == "exp2_log2_sin_f64":
    x = rng.uniform(-50, 50, 300)
    t = Tensor(x, device="PYTHON").realize()
    got = run_on_rdna3(t.exp2() + t.abs().log2() + t.sin())
    np.testing.assert_allclose(got, np.exp2(x) + np.log2(np.abs(x)) + np.sin(x), rtol=1e-14, atol=1e-14)
  elif label == "local_group_matmul":
    a, b = rng.random((7, 13), dtype=np.float32), rng.random((13, 10), dtype=np.float32)
    got = run_on_rdna3(Tensor(a, device="PYTHON").realize() @ Tensor(b, device="PYTHON").realize(), [Opt(OptOps.LOCAL, 0, 7), Opt(OptOps.GROUP, 2, 0)])
    np.testing.assert_allclose(got.reshape(7, 10), a.astype(np.float64) @ b, rtol=1e-5)
  elif label == "int_div_mod":
    x = np.arange(-40, 40, dtype=np.int32)
    t = Tensor(x, device="PYTHON").realize()
    np.testing.assert_array_equal(run_on_rdna3(t // 7 + t % 5), x // 7 + x % 5)  # floor division, as Python
  else:
    x = rng.uniform(0.1, 4, 200).astype(np.float16)
    got = run_on_rdna3(Tensor(x, device="PYTHON").realize().sqrt() * 3 + 1)
    np.testing.assert_allclose(got.astype(np.float64), np.sqrt(x.astype(np.float64)) * 3 + 1, rtol=2e-3)
