"""The disk cache of lowered kernels (codegen/program_cache.py): a warm lookup gives the spec the lowering gave (less its
linear program) without lowering, a changed code generator or renderer misses, damaged entries are lowered again,
symbolic specs are never stored."""
import dataclasses
import numpy as np
import pytest
from tg import Tensor, Device
from ir.uop import UOp
from codegen import diskcache, program_cache
from codegen.program import get_program
from codegen.program_cache import cached_program, decode, encode

@pytest.fixture
def cachedb(tmp_path, monkeypatch):
  monkeypatch.setenv("CACHEDB", str(tmp_path / "cache.db"))

def kernel_ast(t: Tensor) -> UOp: return [it for it in t.schedule() if it.ast.op.name != "COPY"][-1].ast

FIELDS = ("name", "src", "device", "global_size", "local_size", "globals", "vars", "outs", "ins", "applied_opts", "flops", "mem_bytes")

def test_a_warm_lookup_gives_the_lowered_spec_without_lowering(cachedb, monkeypatch):
  a = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)).realize()
  ast, renderer = kernel_ast((a * 2.5).sum(1)), Device["CPU"].renderer
  cold = cached_program(ast, renderer)
  monkeypatch.setattr(program_cache, "get_program", lambda *args: pytest.fail("lowered again"))
  warm = cached_program(ast, renderer)
  assert all(getattr(warm, f) == getattr(cold, f) for f in FIELDS) and warm.uops == []
  monkeypatch.setattr(program_cache, "code_digest", lambda: "another tg")
  with pytest.raises(pytest.fail.Exception, match="lowered again"): cached_program(ast, renderer)

def test_variables_and_actions_survive_the_round_trip():
  from tg import Variable
  n = Variable("n", 1, 8).bind(5)
  spec = get_program(kernel_ast(Tensor.ones(8).contiguous()[:n] * 3), Device["CPU"].renderer)
  back = decode(encode(spec))
  assert back is not None and back.vars == spec.vars and back.applied_opts == spec.applied_opts and back.src == spec.src
  assert encode(dataclasses.replace(spec, flops=n.unbind()[0] * 4)) is None  # a cost that depends on a Variable: not stored

def test_damaged_or_foreign_entries_are_lowered_again(cachedb, monkeypatch):
  assert decode(b"not json") is None and decode(b'{"name": 1}') is None and decode(b"[]") is None
  from tg import Variable
  spec = get_program(kernel_ast(Tensor.ones(8).contiguous()[:Variable("n", 1, 8).bind(3)] + 1), Device["CPU"].renderer)
  assert decode(encode(spec).replace(b'"int"', b'"no_such_dtype"')) is None
  assert decode(encode(spec).replace(b'"applied_opts": [', b'"applied_opts": [["NO_SUCH_OPT", 0, 0], ')) is None
  ast = kernel_ast(Tensor.ones(4).contiguous() * 7)
  lowered = cached_program(ast, Device["CPU"].renderer)
  monkeypatch.setattr(diskcache, "get", lambda table, key: b"[1]")  # what the disk holds is not a spec
  assert cached_program(ast, Device["CPU"].renderer).src == lowered.src
