import json, os, pathlib, subprocess, sys
import pytest
ROOT = pathlib.Path(__file__).parents[2]
from ir.switches import Context, ContextVar, SwitchError, getenv, DEBUG, BEAM, DEFAULT_FLOAT, DEFAULT_INT, JIT, PROFILE, VIZ

def test_getenv_is_typed_by_default_and_cached(monkeypatch):
  monkeypatch.setenv("TG_TEST_INT", "7")
  monkeypatch.setenv("TG_TEST_STR", "abc")
  monkeypatch.setenv("TG_TEST_FLOAT", "2.5")
  assert getenv("TG_TEST_INT", 0) == 7 and isinstance(getenv("TG_TEST_INT", 0), int)
  assert getenv("TG_TEST_STR", "") == "abc"
  assert getenv("TG_TEST_FLOAT", 1.0) == 2.5
  assert getenv("TG_TEST_UNSET_XYZ", 3) == 3
  monkeypatch.setenv("TG_TEST_INT", "8")
  assert getenv("TG_TEST_INT", 0) == 7, "getenv is cached"

def test_getenv_bad_value_names_the_variable(monkeypatch):
  monkeypatch.setenv("TG_TEST_BAD", "notanint")
  with pytest.raises(ValueError, match="TG_TEST_BAD"): getenv("TG_TEST_BAD", 0)

DOCUMENTED_DEFAULTS = {"DEBUG": 0, "DEV": "", "BEAM": 0, "BEAM_ESTIMATE": 1, "NOOPT": 0, "DEFAULT_FLOAT": "float32", "DEFAULT_INT": "int32",
  "IMAGE": 0, "FLOAT16": 0, "JIT": 1, "JIT_BATCH_SIZE": 32, "VIZ": 0, "PROFILE": 0, "ALLOW_TF32": 0, "WEBGPU_BACKEND": "",
  "CUDA_PATH": "", "CCACHE": 1, "SCACHE": 1, "TRAINING": 0, "HCQDEV_WAIT_TIMEOUT_MS": 30000}

def test_every_documented_switch_has_its_default():
  env = {k: v for k, v in os.environ.items() if k not in DOCUMENTED_DEFAULTS}
  code = "from ir.switches import ContextVar; import json; print(json.dumps({k: v.value for k, v in ContextVar._cache.items()}, default=repr))"
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
  values = json.loads(out.stdout)
  for k, v in DOCUMENTED_DEFAULTS.items(): assert values[k] == v or (k == "DEV" and values[k] == [""]), k

def test_profile_defaults_to_viz():
  env = {**os.environ, "VIZ": "-2"}
  env.pop("PROFILE", None)
  out = subprocess.run([sys.executable, "-c", "from ir.switches import PROFILE; print(PROFILE.value)"], env=env, capture_output=True, text=True,
                       check=True, cwd=ROOT)
  assert out.stdout.strip() == "2"

def test_contextvar_compares_by_value():
  with Context(DEBUG=2):
    assert DEBUG >= 2 and DEBUG > 1 and DEBUG < 3 and DEBUG <= 2 and DEBUG == 2 and bool(DEBUG)
  assert ContextVar._cache["DEBUG"] is DEBUG

def test_context_nested_and_restored():
  old = BEAM.value
  with Context(BEAM=2):
    assert BEAM.value == 2
    with Context(BEAM=4, JIT=0):
      assert BEAM.value == 4 and JIT.value == 0
    assert BEAM.value == 2 and JIT.value == 1
  assert BEAM.value == old

def test_context_restores_when_an_exception_escapes():
  old = DEBUG.value
  with pytest.raises(ZeroDivisionError):
    with Context(DEBUG=5): 1 / 0
  assert DEBUG.value == old

def test_context_as_decorator_and_reentrant():
  seen = []
  @Context(BEAM=3)
  def f(depth):
    seen.append(BEAM.value)
    if depth: f(depth - 1)
  f(2)
  assert seen == [3, 3, 3] and BEAM.value == 0

def test_unknown_switch_is_an_error():
  with pytest.raises(KeyError, match="NOT_A_SWITCH"): Context(NOT_A_SWITCH=1)

def test_contextvar_defined_twice_is_an_error():
  with pytest.raises(ValueError): ContextVar("DEBUG", 0)

def test_context_coerces_to_switch_type():
  with Context(DEBUG="3"): assert DEBUG.value == 3
  _ = (PROFILE, VIZ)

def test_context_bad_value_names_the_switch_and_sets_nothing():
  with pytest.raises(SwitchError, match=r"DEBUG='x' is not a valid int"): Context(DEBUG="x").__enter__()
  with pytest.raises(SwitchError, match="DEFAULT_FLOAT='int32'"):
    with Context(BEAM=5, DEFAULT_FLOAT="int32"): pass
  assert BEAM.value == 0 and DEFAULT_FLOAT.value == "float32", "a rejected Context changes no switch"

def test_default_dtypes_must_be_of_their_kind():
  from ir.dtype import dtypes
  with pytest.raises(SwitchError, match=r"DEFAULT_FLOAT='int32' is not allowed; choose one of .*float16"): Context(DEFAULT_FLOAT="int32").__enter__()
  with pytest.raises(SwitchError, match=r"DEFAULT_INT='float32' is not allowed; choose one of .*int64"): Context(DEFAULT_INT="float32").__enter__()
  with pytest.raises(SwitchError, match="DEFAULT_FLOAT='float128'"): Context(DEFAULT_FLOAT="float128").__enter__()
  with Context(DEFAULT_FLOAT="half", DEFAULT_INT="int64"): assert (dtypes.default_float, dtypes.default_int) == (dtypes.float16, dtypes.int64)
  for key, value in (("DEFAULT_FLOAT", "int32"), ("DEFAULT_INT", "float32")):
    out = subprocess.run([sys.executable, "-c", "import tg"], env={**os.environ, key: value}, capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 1 and f"SwitchError: switch {key}={value!r} is not allowed" in out.stderr, out.stderr[-2000:]

@pytest.mark.parametrize("flt,flt_dtype", [("HALF", "half"), ("BFLOAT16", "bfloat16"), ("FLOAT64", "double"), ("FLOAT16", "half"), ("Float32", "float")])
def test_default_dtypes_in_any_case(flt, flt_dtype):
  from ir.dtype import dtypes
  with Context(DEFAULT_FLOAT=flt, DEFAULT_INT="INT64"):
    assert (dtypes.default_float.name, dtypes.default_int) == (flt_dtype, dtypes.int64) and DEFAULT_FLOAT.value == flt.lower()
  code = "from tg import Tensor; print(Tensor([1.5]).dtype.name, Tensor([1]).dtype.name)"
  out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "DEFAULT_FLOAT": flt, "DEFAULT_INT": "INT64"}, capture_output=True, text=True, cwd=ROOT)
  assert out.stdout.split() == [flt_dtype, "long"], out.stderr[-2000:]

def test_default_dtype_choices_are_the_dtypes_of_that_kind():
  from ir.dtype import DTYPES_BY_NAME, dtypes
  assert set(DEFAULT_FLOAT.choices) == {n for n, d in DTYPES_BY_NAME.items() if dtypes.is_float(d)}
  assert set(DEFAULT_INT.choices) == {n for n, d in DTYPES_BY_NAME.items() if dtypes.is_int(d)}
