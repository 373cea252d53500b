"""Compile worker processes (codegen/compile_workers.py): binaries equal to the ones compiled in-process, compile errors
raised where the kernel is needed, jobs nobody started taken back by the main thread."""
import os
import pytest
from ir.switches import Context
from codegen.compile_workers import Job, workers
from codegen.compiler import CompileError
from codegen.llvm_compiler import LLVMCompiler

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="compile workers run only beside a second core")

def kernel_ir(n: int) -> str:
  return (f"define void @k{n}(ptr %out) {{\n  %p = getelementptr float, ptr %out, i64 {n}\n"
          f"  store float {n}.0, ptr %p\n  ret void\n}}\n")

def test_worker_binaries_equal_in_process_ones():
  with Context(CCACHE=0):
    local, ahead = LLVMCompiler(), LLVMCompiler()
    srcs = [kernel_ir(n) for n in range(6)]
    for src in srcs: ahead.compile_ahead(src)
    assert all(isinstance(job, Job) for job in ahead._pending.values()) and len(ahead._pending) == 6
    assert [ahead.compile_cached(src) for src in srcs] == [local.compile(src) for src in srcs]
    assert not ahead._pending

def test_a_compile_error_in_a_worker_raises_where_the_kernel_is_needed():
  with Context(CCACHE=0):
    compiler = LLVMCompiler()
    bad = "define void @broken( {\n"
    job = workers().submit(*compiler.worker_task, bad)
    with pytest.raises(CompileError, match="invalid LLVM IR"): job.result.result(timeout=60)
    compiler.compile_ahead(bad)
    with pytest.raises(CompileError, match="invalid LLVM IR"): compiler.compile_cached(bad)
    assert compiler.compile_cached(kernel_ir(1)) == LLVMCompiler().compile(kernel_ir(1))  # the worker goes on serving

def test_a_job_is_done_by_whoever_claims_it_first():
  job = Job("codegen.llvm_compiler:compile_for", [], "")
  assert job.claim() and not job.claim()  # the main thread took it: a worker's feeder skips it
