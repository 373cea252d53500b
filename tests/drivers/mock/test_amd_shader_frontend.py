"""tg's own kernels on the RDNA3 shader core: frontend tensors scheduled, rendered by AMDGPURenderer, compiled and
linked by AMDGPUCompiler for gfx1100, loaded from the code object and run by execute.run; results against numpy.
Every instruction of every code object decodes, disassembles as LLVM listed it, and has semantics in the executor."""
from __future__ import annotations
import struct
import numpy as np
import pytest
from tg import Tensor, dtypes
from ir.ops import Ops
from codegen.amdgpu import AMDGPURenderer
from codegen.amdgpu_compiler import AMDGPUCompiler
from codegen.amdgpu_elf import read
from codegen.kernel import Opt, OptOps
from codegen.program import get_program
from drivers.mock.amd.shader.dispatch import Dispatch
from drivers.mock.amd.shader.execute import has_semantics, run
from drivers.mock.amd.shader.rdna3 import disassemble, decode
from tests.drivers.mock.test_amd_shader_kernels import Memory

ARCH = "gfx1100"

def build(t: Tensor, opts=None):
  """(item, spec, code object) of t's one kernel."""
  (item,) = [i for i in t.schedule() if i.ast.op is Ops.SINK]
  spec = get_program(item.ast, AMDGPURenderer(ARCH), opts)
  return item, spec, read(AMDGPUCompiler(ARCH).compile(spec.src))

def run_tensor(t: Tensor, opts=None) -> np.ndarray:
  """Run t's kernel on the model with its input buffers as they are on the PYTHON device; returns the output."""
  item, spec, co = build(t, opts)
  (k,) = co.kernels.values()
  mem, base = Memory(), 0x400000
  mem.add(base, np.frombuffer(co.image, np.uint8).copy())
  arrays = [np.frombuffer(item.bufs[g].ensure_allocated().as_bytes(), np.uint8).copy() for g in spec.globals]
  kernarg = bytearray(k.kernarg_size)
  for j, ((offset, _), arr) in enumerate(zip(k.args, arrays)):
    struct.pack_into("<Q", kernarg, offset, mem.add(0x10000000 * (j + 1), arr))
  kva = mem.add(0x1000000, np.frombuffer(bytes(kernarg) + bytes(64), np.uint8).copy())
  kd = k.descriptor
  user = (kva & 0xFFFFFFFF, kva >> 32) + (0,) * 14
  run(Dispatch(ARCH, base + k.code_offset, kd.rsrc1, kd.rsrc2, kd.rsrc3, user, tuple(spec.global_size),
               tuple(spec.local_size or (1, 1, 1)), kd.wave32, kd.group_segment_fixed_size), mem)
  return arrays[0].view(np.dtype(item.bufs[0].dtype.fmt))

def host(x: np.ndarray) -> Tensor: return Tensor(x, device="PYTHON").realize()
RNG = np.random.default_rng(11)
X = RNG.standard_normal((33, 17)).astype(np.float32)
A, B = RNG.random((16, 24), dtype=np.float32), RNG.random((24, 8), dtype=np.float32)
I = np.arange(-50, 50, dtype=np.int32)

CASES = {
  "elementwise": (lambda: host(X).exp2() * 2 - host(X).abs().sqrt() + host(X).maximum(0.25), None,
                  lambda: np.exp2(X) * 2 - np.sqrt(np.abs(X)) + np.maximum(X, 0.25), 2e-6),
  "sum_rows": (lambda: host(X).sum(1), None, lambda: X.sum(1), 1e-5),
  "max_cols": (lambda: host(X).max(0), None, lambda: X.max(0), 0),
  "matmul_local_group": (lambda: host(A) @ host(B), [Opt(OptOps.LOCAL, 0, 8), Opt(OptOps.GROUP, 3, 4)], lambda: A @ B, 1e-5),
  "matmul_upcast": (lambda: host(A) @ host(B), [Opt(OptOps.UPCAST, 1, 4)], lambda: A @ B, 1e-5),
  "int_div_mod_where": (lambda: (host(I) // 7 + host(I) % 5) * (host(I) > 3).where(2, -1), None,
                        lambda: (I // 7 + I % 5) * np.where(I > 3, 2, -1), 0),
  "casts": (lambda: (host(X) * 30).cast(dtypes.int8).cast(dtypes.float32) + host(X).cast(dtypes.float16).cast(dtypes.float32), None,
            lambda: (X * 30).astype(np.int8).astype(np.float32) + X.astype(np.float16).astype(np.float32), 0),
  "half_math": (lambda: host(X.astype(np.float16)).exp2() + 1, None, lambda: (np.exp2(X.astype(np.float16).astype(np.float32)) + 1), 2e-3),
  "f64_div": (lambda: host(X.astype(np.float64)) / (host(X.astype(np.float64)).abs() + 3), None,
              lambda: X.astype(np.float64) / (np.abs(X.astype(np.float64)) + 3), 0),
}

@pytest.mark.parametrize("label", CASES)
def test_frontend_kernel_matches_numpy(label):
  make, opts, want, tol = CASES[label]
  got = run_tensor(make(), opts)
  ref = np.asarray(want()).reshape(-1)
  if tol: np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=tol, atol=tol)
  else: np.testing.assert_array_equal(got, ref.astype(got.dtype))

@pytest.mark.parametrize("label", CASES)
def test_every_instruction_decodes_and_has_semantics(label):
  make, opts, _, _ = CASES[label]
  _, spec, co = build(make(), opts)
  (k,) = co.kernels.values()
  code = co.image[k.code_offset:]
  listing = [line.strip().split(";")[0].strip() for line in AMDGPUCompiler(ARCH).disassemble(spec.src, b"").splitlines()]
  listed = [" ".join(t.split()) for t in listing if t and not t.startswith(".") and not t.endswith(":")]
  listed = listed[:listed.index("s_endpgm") + 1] if "s_endpgm" in listed else listed
  at, names = 0, []
  while len(names) < len(listed):
    ins = decode(code, at)
    names.append(ins.name)
    at += ins.size
  missing = sorted({n for n in names if not has_semantics(n)})
  assert not missing, f"decoded but not executable: {missing}"
  ours = [t for t in disassemble(code) if t != "s_nop 0"][:len([t for t in listed if t != "s_nop 0"])]
  for mine, theirs in zip(ours, [t for t in listed if t != "s_nop 0"]):
    if theirs.split()[0].startswith(("s_branch", "s_cbranch")): assert mine.split()[0] == theirs.split()[0]
    else: assert mine == theirs
