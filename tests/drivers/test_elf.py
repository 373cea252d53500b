import math
import pytest
from codegen.llvm_compiler import LLVMCompiler
from drivers.elf import ElfError, LoadedImage, parse_sections
from drivers.system import ffi

IR = """
@table = private unnamed_addr constant [4 x double] [double 1.5, double 2.5, double 3.5, double 4.5]
declare double @llvm.exp2.f64(double)
define double @pick(i32 %i) nounwind {
  %p = getelementptr inbounds [4 x double], ptr @table, i32 0, i32 %i
  %v = load double, ptr %p
  ret double %v
}
define double @via_libm(double %x) nounwind {
  %r = call double @llvm.exp2.f64(double %x)
  ret double %r
}
"""

def test_load_object_with_rodata_and_libm_call():
  lib = LLVMCompiler().compile(IR)
  machine, sections = parse_sections(lib)
  assert machine == 62 and any(s.name == ".text" for s in sections)
  image = LoadedImage(lib)
  pick = ffi.cast("double(*)(int32_t)", image.symbols["pick"])
  assert [pick(i) for i in range(4)] == [1.5, 2.5, 3.5, 4.5]
  exp2 = ffi.cast("double(*)(double)", image.symbols["via_libm"])
  assert exp2(10.0) == 1024.0 and math.isclose(exp2(0.5), math.sqrt(2))

def test_bad_objects():
  with pytest.raises(ElfError): LoadedImage(b"not an elf file at all" * 4)
  ir = "declare double @no_such_function_anywhere(double)\ndefine double @f(double %x) nounwind {\n %r = call double @no_such_function_anywhere(double %x)\n ret double %r\n}"
  with pytest.raises(ElfError, match="no_such_function_anywhere"): LoadedImage(LLVMCompiler().compile(ir))
