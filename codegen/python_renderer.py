"""The PYTHON device's 'source': the linear program itself, serialized (the interpreter in drivers/python.py runs it)."""
from __future__ import annotations
import base64, pickle
from ir.uop import UOp
from codegen.compiler import Compiler
from codegen.renderer import Renderer

class PythonRenderer(Renderer):
  device = "PYTHON"
  has_local = True
  launch_dims = 3
  def render(self, name: str, uops: list[UOp]) -> str:
    return f"# {name}: {len(uops)} uops\n" + base64.b64encode(pickle.dumps(uops)).decode()

class PythonCompiler(Compiler):
  def __init__(self): super().__init__("python")
  def compile(self, src: str) -> bytes: return base64.b64decode(src.split("\n", 1)[1])
