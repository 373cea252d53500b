"""isam (cat5) and stib.b (cat6) in the ir3 model: one texel of a 2-D image per fiber, found through the descriptors the
CP loaded (descriptors.Bindings checks the state and the descriptor; Image addresses and converts the texel).

- isam (f32|f16)(xyzw)rD, rC, s#S, t#T: rC, rC+1 hold the signed 32-bit texel coordinate (x, y) (ir3_compiler_nir.c
  emit_intrinsic_load_image collects the image's coordinates, two for a 2-D image, no LOD); rD..rD+3 get the four
  components the descriptor's swizzle picks, as f32 (or rounded to f16 for the (f16) type into half registers).
- stib.b.typed.2d.f32.4.imm rV, rC, N: rC, rC+1 the coordinate, rV..rV+3 four f32 values written in UAV N's format
  (ir3_a6xx.c emit_intrinsic_store_image: ncoords coordinates, the image format's components, typed)."""
from __future__ import annotations
import numpy as np
from drivers.mock.qcom import ir3_alu as alu
from drivers.mock.qcom.descriptors import Image
from drivers.mock.qcom.ir3_decode import Instr, Operand

def _texels(b, ins: Instr, coords: Operand, sel, n: int, img: Image) -> np.ndarray:
  """The texel address of each selected fiber from the coordinate pair at `coords` (source n)."""
  x, y = (alu.as_int(v, True) for v in b.read(ins, coords, sel, n, count=2))
  b.consume(ins, coords, sel, 2)
  return img.addresses(x, y, ins.text)

def isam(b, ins: Instr, sel) -> None:
  img = b.bindings.texture(ins.tex, ins.samp, ins.text)
  raw = b.memory.load(_texels(b, ins, ins.srcs[0], sel, 0, img), img.fmt.texel_bytes)
  b.write(ins, ins.dst, sel, [alu.float_bits(v, ins.type == "f16") for v in img.read(np.asarray(raw, np.uint8))])

def stib(b, ins: Instr, sel) -> None:
  img = b.bindings.uav(ins.uav, ins.text)
  addresses = _texels(b, ins, ins.srcs[0], sel, 0, img)
  values = b.read(ins, ins.srcs[1], sel, 1, count=4)
  b.consume(ins, ins.srcs[1], sel, 4)
  b.memory.store(addresses, img.pack([alu.as_float(v) for v in values]))

OPS = {"isam": isam, "stib.b": stib}
