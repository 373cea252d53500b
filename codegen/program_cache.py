"""Lowered kernels on disk (with CCACHE): a warm start skips optimizing, lowering and rendering kernels it has seen. An
entry is keyed by the renderer, the AST, the optimization actions asked for and a digest of the code generator's own
source (ir/ and codegen/), so a changed tg never reads an older tg's programs. Values are JSON: the ProgramSpec without
its linear program (`uops` is empty in a cached spec; BEAM and VIZ lower for themselves)."""
from __future__ import annotations
import functools, hashlib, json, pathlib, pickle
from ir.dtype import DType, dtypes
from ir.ops import Ops
from ir.switches import CCACHE
from ir.uop import UOp
from codegen import diskcache
from codegen.kernel import Opt, OptOps
from codegen.program import get_program
from codegen.renderer import ProgramSpec, Renderer

@functools.cache
def code_digest() -> str:
  """A digest of every source file of the packages lowering depends on."""
  h = hashlib.sha256()
  for package in ("ir", "codegen"):
    for path in sorted((pathlib.Path(__file__).parents[1] / package).glob("*.py")): h.update(path.name.encode() + path.read_bytes())
  return h.hexdigest()

def encode(spec: ProgramSpec) -> bytes | None:
  """The spec as JSON; None for one with symbolic sizes or costs (those are lowered every time)."""
  plain = [spec.flops, spec.mem_bytes, *spec.global_size, *(spec.local_size or ())]
  if any(type(v) is not int for v in plain): return None
  return json.dumps({"name": spec.name, "src": spec.src, "device": spec.device, "global_size": spec.global_size, "local_size": spec.local_size,
                     "globals": spec.globals, "vars": [[*v.arg, v.dtype.name] for v in spec.vars], "outs": spec.outs, "ins": spec.ins,
                     "applied_opts": [[o.op.name, o.axis, o.amt] for o in spec.applied_opts], "flops": spec.flops, "mem_bytes": spec.mem_bytes}).encode()

def decode(blob: bytes) -> ProgramSpec | None:
  """What encode wrote; None for anything else (the kernel is then lowered again)."""
  try:
    d = json.loads(blob)
    variables = [UOp(Ops.DEFINE_VAR, _dtype(dt), (), (name, lo, hi)) for name, lo, hi, dt in d["vars"]]
    opts = [Opt(OptOps[op], axis, amt) for op, axis, amt in d["applied_opts"]]
    return ProgramSpec(d["name"], d["src"], d["device"], [], tuple(d["global_size"]), None if d["local_size"] is None else tuple(d["local_size"]),
                       d["globals"], variables, d["outs"], d["ins"], opts, d["flops"], d["mem_bytes"])
  except (ValueError, KeyError, TypeError, AttributeError): return None

def _dtype(name: str) -> DType:
  if not isinstance(dt := getattr(dtypes, name, None), DType): raise ValueError(f"no dtype {name!r}")
  return dt

def cached_program(ast: UOp, renderer: Renderer, opts: list[Opt] | None = None) -> ProgramSpec:
  """get_program, read from the disk cache where an earlier run lowered the same kernel."""
  if not CCACHE: return get_program(ast, renderer, opts)
  try: key = diskcache.key_of("program", code_digest(), f"{type(renderer).__module__}.{type(renderer).__qualname__}", vars(renderer), ast,
                              None if opts is None else [(o.op.name, o.axis, o.amt) for o in opts])
  except (pickle.PicklingError, TypeError, AttributeError): return get_program(ast, renderer, opts)  # a renderer holding live objects
  if (blob := diskcache.get("program", key)) is not None and (spec := decode(blob)) is not None: return spec
  spec = get_program(ast, renderer, opts)
  if (blob := encode(spec)) is not None: diskcache.put("program", key, blob)
  return spec
