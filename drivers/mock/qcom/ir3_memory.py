"""cat6 loads and stores of the ir3 model: global memory through the memory object the KGSL model hands in
(`load(addresses, nbytes)` / `store(addresses, data)`), workgroup-local memory in one numpy byte array per workgroup.
Address forms from ir3-cat6.xml: ldg/stg g[rA.x+OFF] (rA.x:rA.y a 64-bit address, OFF signed bytes: ir3_compiler_nir.c
emits create_immed(off + i * 4) for consecutive dwords); a6xx ldg.a/stg.a g[rA + (((rB << SHIFT) + OFF) << TYPE_SHIFT)]
(<bitset name="ldg.a"> doc, zero-extended to 64 bits); ldl/stl l[rA.x+OFF] (32-bit byte offsets)."""
from __future__ import annotations
import numpy as np
from drivers.mock.qcom.ir3_decode import TYPES, Instr, is_half_type
from drivers.mock.qcom.ir3_faults import GPUFault, ShaderHazard

SIZE = {"f16": 2, "f32": 4, "u16": 2, "u32": 4, "s16": 2, "s32": 4, "u8": 1, "u8_32": 1}

def _type_shift(ty: str) -> int:
  """<expr name="#cat6-type-shift">: 0 for u8/u8_32, 1 for 16-bit types, 2 for 32-bit."""
  t = TYPES.index(ty)
  return 0 if t >= 6 else 1 if is_half_type(t) else 2

def global_address(b, ins: Instr, sel) -> np.ndarray:
  """The 64-bit byte address of each selected fiber's first component."""
  a = ins.srcs[0]
  if a.kind == "const": raise ShaderHazard(ins.pc, f"{ins.text}: a const base address is not modelled")
  lo = b.read(ins, a, sel, 0, count=2)
  b.consume(ins, a, sel, 2)
  base = lo[0].astype(np.uint64) | lo[1].astype(np.uint64) << np.uint64(32)
  if ins.name in ("ldg", "stg"): return base + np.uint64(ins.offset & 0xFFFFFFFFFFFFFFFF)
  if b.gen >= 7: raise ShaderHazard(ins.pc, f"{ins.text}: a7xx {ins.name} (register offset form) is not modelled")
  idx = b.read(ins, ins.srcs[-1], sel, 0)[0].astype(np.uint64)
  b.consume(ins, ins.srcs[-1], sel, 1)
  return base + (((idx << np.uint64(ins.shift)) + np.uint64(ins.offset)) << np.uint64(_type_shift(ins.type)))

def _to_regs(raw: np.ndarray, ty: str, count: int) -> np.ndarray:
  """(n, count*size) bytes -> (count, n) register bits: 32-bit values, 16-bit values, or bytes zero-extended."""
  size = SIZE[ty]
  vals = raw.reshape(len(raw), count, size)
  if size == 4: out = vals.copy().view("<u4")[..., 0]
  elif size == 2: out = vals.copy().view("<u2")[..., 0]
  else: out = vals[..., 0].astype(np.uint16 if ty == "u8" else np.uint32)
  return out.T.astype(np.uint32 if ty == "u8_32" or size == 4 else np.uint16)

def _from_regs(vals: list, ty: str) -> np.ndarray:
  """count arrays of register bits -> (n, count*size) little-endian bytes."""
  size = SIZE[ty]
  dt = {4: "<u4", 2: "<u2", 1: "u1"}[size]
  return np.stack([np.asarray(v).astype(dt) for v in vals], axis=1).view(np.uint8).reshape(len(vals[0]), -1)

def ldg(b, ins: Instr, sel) -> None:
  addr = global_address(b, ins, sel)
  raw = b.memory.load(addr, SIZE[ins.type] * ins.count)
  b.write(ins, ins.dst, sel, _to_regs(np.asarray(raw, np.uint8), ins.type, ins.count))

def stg(b, ins: Instr, sel) -> None:
  addr = global_address(b, ins, sel)
  vals = b.read(ins, ins.srcs[1], sel, 1, count=ins.count)
  b.consume(ins, ins.srcs[1], sel, ins.count)
  b.memory.store(addr, _from_regs(vals, ins.type))

def _local(b, ins: Instr, sel, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
  """(workgroup row, byte columns) of each selected fiber's local-memory bytes; GPUFault outside shared_bytes."""
  base = b.read(ins, ins.srcs[0], sel, 0)[0].astype(np.int64) + ins.offset
  b.consume(ins, ins.srcs[0], sel, 1)
  bad = (base < 0) | (base + nbytes > b.shared.shape[1])
  if bad.any():
    at = int(base[np.argmax(bad)])
    raise GPUFault(at & 0xFFFFFFFF, f"{ins.text}: local memory bytes [{at}, {at + nbytes}) outside the {b.shared.shape[1]} bytes of @shared")
  return b.group[sel][:, None], base[:, None] + np.arange(nbytes)

def ldl(b, ins: Instr, sel) -> None:
  nbytes = SIZE[ins.type] * ins.count
  rows, cols = _local(b, ins, sel, nbytes)
  b.write(ins, ins.dst, sel, _to_regs(b.shared[rows, cols], ins.type, ins.count))

def stl(b, ins: Instr, sel) -> None:
  nbytes = SIZE[ins.type] * ins.count
  rows, cols = _local(b, ins, sel, nbytes)
  vals = b.read(ins, ins.srcs[1], sel, 1, count=ins.count)
  b.consume(ins, ins.srcs[1], sel, ins.count)
  b.shared[rows, cols] = _from_regs(vals, ins.type)

OPS = {"ldg": ldg, "ldg.a": ldg, "stg": stg, "stg.a": stg, "ldl": ldl, "stl": stl}
