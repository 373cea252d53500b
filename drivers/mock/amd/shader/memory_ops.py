"""Semantics of the memory instructions (RDNA3 ISA guide chapters 16.5 SMEM, 16.13 FLAT/GLOBAL/SCRATCH, 16.12 DS):
scalar loads per wave, vector loads/stores/atomics per active lane through GPUMemory, LDS per workgroup and scratch
per lane held by the state. Keyed by mnemonic; `OPS[name](state, group, instruction)`."""
from __future__ import annotations
import numpy as np
from drivers.mock.amd.shader.agpr_ops import register_row
from drivers.mock.amd.shader.dispatch import GPUMemory, ShaderFault
from drivers.mock.amd.shader.instruction import Instruction
from drivers.mock.amd.shader.operand_widths import data_regs
from drivers.mock.amd.shader.wave_state import Group, WaveState, sgpr_code

OPS: dict = {}

class ArrayMemory:
  """GPUMemory over one numpy byte array at GPU address 0 (the lanes' private memory, test memories)."""
  def __init__(self, data: np.ndarray):
    self.data = data
  def span(self, lo: int, hi: int) -> tuple[np.ndarray, int]:
    if lo < 0 or hi > self.data.size: raise ShaderFault(f"address {lo:#x} is outside the {self.data.size} bytes mapped", lo)
    return self.data, 0

# ---- byte movement between lanes and a flat byte array
def _gather(buf: np.ndarray, offs: np.ndarray, nbytes: int) -> np.ndarray:
  return buf[offs[:, None] + np.arange(nbytes)]

def read_memory(memory: GPUMemory, addrs: np.ndarray, nbytes: int) -> np.ndarray:
  """(lanes, nbytes) uint8 read at each address; ShaderFault names the first address no mapping holds."""
  if addrs.size == 0: return np.zeros((0, nbytes), np.uint8)
  lo, hi = int(addrs.min()), int(addrs.max()) + nbytes
  try:
    buf, base = memory.span(lo, hi)
    return _gather(buf, (addrs - np.uint64(base)).astype(np.int64), nbytes)
  except ShaderFault:
    out = np.empty((addrs.size, nbytes), np.uint8)
    for k, a in enumerate(addrs.tolist()):
      buf, base = memory.span(a, a + nbytes)
      out[k] = buf[a - base:a - base + nbytes]
    return out

def write_memory(memory: GPUMemory, addrs: np.ndarray, data: np.ndarray) -> None:
  if addrs.size == 0: return
  nbytes = data.shape[1]
  lo, hi = int(addrs.min()), int(addrs.max()) + nbytes
  try:
    buf, base = memory.span(lo, hi)
    buf[(addrs - np.uint64(base)).astype(np.int64)[:, None] + np.arange(nbytes)] = data
  except ShaderFault:
    for k, a in enumerate(addrs.tolist()):
      buf, base = memory.span(a, a + nbytes)
      buf[a - base:a - base + nbytes] = data[k]

def _to_bytes(words: list[np.ndarray]) -> np.ndarray:
  return np.ascontiguousarray(np.stack([w.astype(np.uint32) for w in words], axis=1)).view(np.uint8).reshape(len(words[0]), -1)

def _to_words(data: np.ndarray) -> list[np.ndarray]:
  padded = np.zeros((data.shape[0], -(-data.shape[1] // 4) * 4), np.uint8)
  padded[:, :data.shape[1]] = data
  w = padded.view("<u4")
  return [w[:, k] for k in range(w.shape[1])]

# ---- scalar memory
def _smem_load(st: WaveState, g: Group, ins: Instruction) -> None:
  f = ins.fields
  n = data_regs(ins.name)
  base = st.sread(g, f["sbase"], 2)
  if ins.name.startswith("s_buffer"): base = base & np.uint64(0xFFFFFFFFFFFF)  # V# base is bits [47:0]
  addr = (np.broadcast_to(base, (g.nw,)) + np.uint64(f["offset"] & 0xFFFFFFFFFFFFFFFF)) & np.uint64(0xFFFFFFFFFFFFFFFF)
  if f["soffset"].kind != "null": addr = addr + np.broadcast_to(st.sread(g, f["soffset"]), (g.nw,)).astype(np.uint64)
  addr = addr & ~np.uint64(3)  # SMEM ignores the two low address bits (RDNA3 ISA guide 5.1)
  uniq, inverse = np.unique(addr, return_inverse=True)
  words = _to_words(read_memory(st.memory, uniq, 4 * n))
  for k, w in enumerate(words): st.swrite(g, sgpr_code(f["sdata"]) + k, w[inverse])
for n in ("b32", "b64", "b96", "b128", "b256", "b512"):
  OPS[f"s_load_{n}"] = _smem_load
  OPS[f"s_buffer_load_{n}"] = _smem_load

# gfx12 sub-dword scalar loads: the byte address is kept and the value extended (RDNA4 ISA guide S_LOAD_U8 ... I16)
_SMEM_SMALL = {"u8": (1, False), "i8": (1, True), "u16": (2, False), "i16": (2, True)}
def _smem_load_small(st: WaveState, g: Group, ins: Instruction) -> None:
  f, (nbytes, signed) = ins.fields, _SMEM_SMALL[ins.name.rsplit("_", 1)[1]]
  base = np.broadcast_to(st.sread(g, f["sbase"], 2), (g.nw,)).astype(np.uint64)
  if ins.name.startswith("s_buffer"): base = base & np.uint64(0xFFFFFFFFFFFF)
  addr = base + np.uint64(f["offset"] & 0xFFFFFFFFFFFFFFFF)
  if f["soffset"].kind != "null": addr = addr + np.broadcast_to(st.sread(g, f["soffset"]), (g.nw,)).astype(np.uint64)
  raw = read_memory(st.memory, addr, nbytes)
  value = raw[:, 0].astype(np.uint32) if nbytes == 1 else raw.view("<u2")[:, 0].astype(np.uint32)
  if signed: value = (value.astype(np.int32) << (32 - 8 * nbytes) >> (32 - 8 * nbytes)).astype(np.uint32)
  st.swrite(g, sgpr_code(f["sdata"]), value)
for n in _SMEM_SMALL: OPS[f"s_load_{n}"] = OPS[f"s_buffer_load_{n}"] = _smem_load_small

# ---- vector memory (global, flat, scratch)
def _active(g: Group) -> np.ndarray: return np.flatnonzero(g.em)

def _global_addresses(st: WaveState, g: Group, ins: Instruction, act: np.ndarray) -> np.ndarray:
  f = ins.fields
  if f["saddr"].kind != "null":
    base = np.repeat(np.broadcast_to(st.sread(g, f["saddr"], 2), (g.nw,)), st.L)[act]
    addr = base + st.V[f["addr"].index, g.ln][act].astype(np.uint64)
  else:
    addr = st.V[f["addr"].index, g.ln][act].astype(np.uint64) | st.V[f["addr"].index + 1, g.ln][act].astype(np.uint64) << np.uint64(32)
  return addr + np.uint64(f["offset"] & 0xFFFFFFFFFFFFFFFF)

def _scratch_addresses(st: WaveState, g: Group, ins: Instruction, act: np.ndarray) -> np.ndarray:
  """Offsets into each lane's private memory: SADDR (if any) + VADDR (if SVE) + the instruction offset."""
  f = ins.fields
  off = np.full(act.size, f["offset"], np.int64)
  if f["saddr"].kind != "null": off += np.repeat(np.broadcast_to(st.sread(g, f["saddr"]), (g.nw,)), st.L)[act].astype(np.int64)
  if f["sve"]: off += st.V[f["addr"].index, g.ln][act].astype(np.int64)
  return off

class _Scratch:
  """GPUMemory over the private memory of the group's lanes: lane k's byte i sits at k * size + i."""
  def __init__(self, st: WaveState, lanes: np.ndarray):
    self.st, self.lanes = st, lanes
  def locate(self, off: np.ndarray, nbytes: int) -> np.ndarray:
    size = self.st.scratch_lane_bytes
    bad = (off < 0) | (off + nbytes > size)
    if bad.any(): raise ShaderFault(f"scratch access at offset {int(off[bad][0]):#x} outside the {size} bytes of private memory per lane", int(off[bad][0]))
    return (self.lanes * size + off).astype(np.uint64)

def _lane_index(st: WaveState, g: Group, act: np.ndarray) -> np.ndarray:
  return np.arange(st.nw * st.L)[g.ln][act]

# DS spells the d16 forms after the type (ds_load_u8_d16_hi); FLAT before it (global_load_d16_hi_u8)
_DS_D16 = {"u8_d16": "d16_u8", "u8_d16_hi": "d16_hi_u8", "i8_d16": "d16_i8", "i8_d16_hi": "d16_hi_i8",
           "u16_d16": "d16_b16", "u16_d16_hi": "d16_hi_b16", "b8_d16_hi": "d16_hi_b8", "b16_d16_hi": "d16_hi_b16"}

def _load_shape(name: str) -> tuple[int, str]:
  """(bytes read, how they land: 'u'/'i' extend to 32 bits, 'lo'/'hi' d16 halves, 'w' whole dwords)."""
  tail = name.split("_load_")[1]
  tail = _DS_D16.get(tail, tail)
  if tail.startswith("d16_hi_"): return {"u8": 1, "i8": 1, "b16": 2}[tail[7:]], "hi" + tail[7]
  if tail.startswith("d16_"): return {"u8": 1, "i8": 1, "b16": 2}[tail[4:]], "lo" + tail[4]
  if tail in ("u8", "i8", "u16", "i16"): return int(tail[1:]) // 8, tail[0]
  return 4 * data_regs(name), "w"

def _land(st: WaveState, g: Group, ins: Instruction, act: np.ndarray, data: np.ndarray, how: str) -> None:
  vdst = register_row(st, ins.fields["vdst"])
  full = np.zeros((g.em.size, data.shape[1]), np.uint8)
  full[act] = data
  if how == "w":
    for k, w in enumerate(_to_words(full)): st.vwrite(g, vdst + k, w)
    return
  nbytes = data.shape[1]
  raw = full[:, 0].astype(np.uint32) if nbytes == 1 else full.view("<u2")[:, 0].astype(np.uint32)
  signed = how.endswith("i")
  if signed: raw = (raw.astype(np.int32) << (32 - 8 * nbytes) >> (32 - 8 * nbytes)).astype(np.uint32)
  if how in ("u", "i"): st.vwrite(g, vdst, raw); return
  old = st.V[vdst, g.ln]
  half = raw & np.uint32(0xFFFF)
  st.vwrite(g, vdst, (old & np.uint32(0xFFFF)) | half << np.uint32(16) if how.startswith("hi") else (old & np.uint32(0xFFFF0000)) | half)

def _vmem_load(st: WaveState, g: Group, ins: Instruction) -> None:
  act = _active(g)
  nbytes, how = _load_shape(ins.name)
  if ins.encoding == "SCRATCH":
    data = read_memory(st.scratch, _Scratch(st, _lane_index(st, g, act)).locate(_scratch_addresses(st, g, ins, act), nbytes), nbytes)
  else: data = read_memory(st.memory, _global_addresses(st, g, ins, act), nbytes)
  _land(st, g, ins, act, data, how)

def _store_bytes(st: WaveState, g: Group, ins: Instruction, act: np.ndarray) -> np.ndarray:
  name, data = ins.name, register_row(st, ins.fields["data"])
  tail = name.split("_store_")[1]
  tail = _DS_D16.get(tail, tail)
  if tail in ("b8", "b16", "d16_hi_b8", "d16_hi_b16"):
    v = st.V[data, g.ln][act]
    if "hi" in tail: v = v >> np.uint32(16)
    return np.ascontiguousarray(v.astype(np.uint32)).view(np.uint8).reshape(-1, 4)[:, :1 if tail.endswith("b8") else 2]
  return _to_bytes([st.V[data + k, g.ln][act] for k in range(data_regs(name))])

def _vmem_store(st: WaveState, g: Group, ins: Instruction) -> None:
  act = _active(g)
  data = _store_bytes(st, g, ins, act)
  if ins.encoding == "SCRATCH":
    write_memory(st.scratch, _Scratch(st, _lane_index(st, g, act)).locate(_scratch_addresses(st, g, ins, act), data.shape[1]), data)
  else: write_memory(st.memory, _global_addresses(st, g, ins, act), data)

for seg in ("global", "flat", "scratch"):
  for t in ("u8", "i8", "u16", "i16", "b32", "b64", "b96", "b128", "d16_u8", "d16_i8", "d16_b16", "d16_hi_u8", "d16_hi_i8", "d16_hi_b16"):
    OPS[f"{seg}_load_{t}"] = _vmem_load
  for t in ("b8", "b16", "b32", "b64", "b96", "b128", "d16_hi_b8", "d16_hi_b16"):
    OPS[f"{seg}_store_{t}"] = _vmem_store

# ---- atomics: read-modify-write one lane after another, so lanes hitting one address all take effect
_U32 = {"add": lambda m, d: m + d, "sub": lambda m, d: m - d, "swap": lambda m, d: d, "and": lambda m, d: m & d,
        "or": lambda m, d: m | d, "xor": lambda m, d: m ^ d, "min": min, "max": max,
        "inc": lambda m, d: 0 if m >= d else m + 1, "dec": lambda m, d: d if m == 0 or m > d else m - 1,
        "rsub": lambda m, d: d - m, "storexchg": lambda m, d: d}

def _atomic_update(name: str):
  """(bytes per value, update(old, data, data2) -> new) for an atomic mnemonic."""
  parts = name.split("_")
  kind, t = parts[2] if parts[0] != "ds" else parts[1], parts[-1]
  size = 8 if t.endswith("64") else 4
  if kind in ("cmpswap", "cmpstore"):
    return size, lambda m, d, d2: d if m == d2 else m, t
  if t == "f32":
    fl = {"add": lambda m, d: np.float32(m) + np.float32(d), "min": lambda m, d: min(np.float32(m), np.float32(d)),
          "max": lambda m, d: max(np.float32(m), np.float32(d))}[kind]
    return size, lambda m, d, d2: fl(m, d), t
  fn = _U32[kind]
  if t[0] == "i":
    bits = 8 * size
    sx = lambda x: x - (1 << bits) if x >> (bits - 1) else x
    return size, lambda m, d, d2: fn(sx(m), sx(d)) & ((1 << bits) - 1), t
  return size, lambda m, d, d2: fn(m, d) & ((1 << (8 * size)) - 1), t

def _rmw(read, write, addrs: np.ndarray, data: np.ndarray, data2: np.ndarray | None, name: str) -> np.ndarray:
  """Apply the atomic lane by lane; returns the old values (uint64) per lane."""
  size, update, t = _atomic_update(name)
  dt = "<u8" if size == 8 else "<u4"
  old = np.zeros(addrs.size, np.uint64)
  for k, a in enumerate(addrs.tolist()):
    raw = read(a, size)
    m = int(np.frombuffer(raw.tobytes(), dt)[0])
    d, d2 = int(data[k]), int(data2[k]) if data2 is not None else 0
    if t == "f32":
      fm, fd = np.uint32(m).view(np.float32), np.uint32(d).view(np.float32)
      new = int(np.float32(update(fm, fd, None)).view(np.uint32))
    else: new = update(m, d, d2)
    write(a, np.frombuffer(np.array([new], dt).tobytes(), np.uint8))
    old[k] = m
  return old

def _vmem_atomic(st: WaveState, g: Group, ins: Instruction) -> None:
  act = _active(g)
  f = ins.fields
  wide = data_regs(ins.name) == 2 or ins.name.endswith("64")
  regs = 2 if wide else 1
  data = _lane_value(st, g, register_row(st, f["data"]), regs, act)
  data2 = _lane_value(st, g, register_row(st, f["data"]) + regs, regs, act) if "cmpswap" in ins.name else None
  def read(a, n):
    buf, base = st.memory.span(a, a + n)
    return buf[a - base:a - base + n]
  def write(a, raw):
    buf, base = st.memory.span(a, a + raw.size)
    buf[a - base:a - base + raw.size] = raw
  old = _rmw(read, write, _global_addresses(st, g, ins, act), data, data2, ins.name)
  if f["glc"]: _return(st, g, register_row(st, f["vdst"]), regs, act, old)

def _lane_value(st: WaveState, g: Group, reg: int, regs: int, act: np.ndarray) -> np.ndarray:
  v = st.V[reg, g.ln][act].astype(np.uint64)
  return v | st.V[reg + 1, g.ln][act].astype(np.uint64) << np.uint64(32) if regs == 2 else v

def _return(st: WaveState, g: Group, vdst: int, regs: int, act: np.ndarray, old: np.ndarray) -> None:
  full = np.zeros(g.em.size, np.uint64)
  full[act] = old
  st.vwrite(g, vdst, full, regs) if regs == 2 else st.vwrite(g, vdst, full.astype(np.uint32))

for seg in ("global", "flat"):
  for k in ("swap", "cmpswap", "add", "sub", "min", "max", "and", "or", "xor", "inc", "dec"):
    for t in ("b32", "u32", "i32", "b64", "u64", "i64"):
      OPS[f"{seg}_atomic_{k}_{t}"] = _vmem_atomic
  for k in ("add", "min", "max", "cmpswap"): OPS[f"{seg}_atomic_{k}_f32"] = _vmem_atomic

# ---- LDS
def _lds_addresses(st: WaveState, g: Group, ins: Instruction, act: np.ndarray, extra: int, nbytes: int) -> np.ndarray:
  """Byte offsets into the batch's LDS array: the lane's workgroup base + (VGPR address + offset, wrapping at 32 bits);
  ShaderFault past the workgroup's allocation (dispatch.lds_bytes)."""
  # the add wraps: LLVM folds a constant into the offset field over a base that may be negative on every chip since Sea
  # Islands (AMDGPUISelDAGToDAG.cpp isDSOffsetLegal, hasUsableDSOffset)
  addr = (st.V[ins.fields["addr"].index, g.ln][act].astype(np.int64) + extra) & 0xFFFFFFFF
  bad = addr + nbytes > st.lds_bytes
  if bad.any(): raise ShaderFault(f"LDS access at {int(addr[bad][0]):#x} past the workgroup's {st.lds_bytes} bytes of LDS ({ins.name})", int(addr[bad][0]))
  return (st.lane_group[g.ln][act] * st.lds_bytes + addr).astype(np.int64)

def _ds_offset(ins: Instruction) -> int: return ins.fields["offset0"] | ins.fields["offset1"] << 8

def _ds_two(ins: Instruction) -> tuple[int, int, int]:
  """(bytes per element, byte offset 0, byte offset 1) of a ds_*2addr* instruction."""
  size = 8 if ins.name.endswith("b64") else 4
  stride = size * (64 if "stride64" in ins.name else 1)
  return size, ins.fields["offset0"] * stride, ins.fields["offset1"] * stride

def _ds_load(st: WaveState, g: Group, ins: Instruction) -> None:
  act = _active(g)
  if "2addr" in ins.name:
    size, o0, o1 = _ds_two(ins)
    a0, a1 = _lds_addresses(st, g, ins, act, o0, size), _lds_addresses(st, g, ins, act, o1, size)
    data = np.concatenate([_gather(st.lds, a0, size), _gather(st.lds, a1, size)], axis=1)
    _land(st, g, ins, act, data, "w")
    return
  nbytes, how = _load_shape(ins.name)
  a = _lds_addresses(st, g, ins, act, _ds_offset(ins), nbytes)
  _land(st, g, ins, act, _gather(st.lds, a, nbytes), how)

def _ds_store(st: WaveState, g: Group, ins: Instruction) -> None:
  act = _active(g)
  f = ins.fields
  if "2addr" in ins.name:
    size, o0, o1 = _ds_two(ins)
    regs = size // 4
    for reg, off in ((register_row(st, f["data0"]), o0), (register_row(st, f["data1"]), o1)):
      a = _lds_addresses(st, g, ins, act, off, size)
      st.lds[a[:, None] + np.arange(size)] = _to_bytes([st.V[reg + k, g.ln][act] for k in range(regs)])
    return
  shim = Instruction(ins.name, ins.encoding, ins.size, {"data": f["data0"]})
  data = _store_bytes(st, g, shim, act)
  a = _lds_addresses(st, g, ins, act, _ds_offset(ins), data.shape[1])
  st.lds[a[:, None] + np.arange(data.shape[1])] = data

def _ds_atomic(st: WaveState, g: Group, ins: Instruction) -> None:
  act = _active(g)
  f = ins.fields
  regs = 2 if ins.name.endswith("64") else 1
  a = _lds_addresses(st, g, ins, act, _ds_offset(ins), 4 * regs)
  data = _lane_value(st, g, register_row(st, f["data0"]), regs, act)
  data2 = _lane_value(st, g, register_row(st, f["data1"]), regs, act) if "cmpstore" in ins.name else None
  def read(x, n): return st.lds[x:x + n]
  def write(x, raw): st.lds[x:x + raw.size] = raw
  old = _rmw(read, write, a, data, data2, ins.name.replace("_rtn", ""))
  if "_rtn" in ins.name: _return(st, g, register_row(st, f["vdst"]), regs, act, old)

def _ds_bpermute(st: WaveState, g: Group, ins: Instruction) -> None:
  """DS_BPERMUTE_B32: each lane reads DATA0 of lane (ADDR + offset) / 4 of its wave (RDNA3 ISA guide 16.12)."""
  f = ins.fields
  n = g.em.size
  src_lane = ((st.V[f["addr"].index, g.ln].astype(np.int64) + _ds_offset(ins)) // 4) % st.L
  wave_base = (np.arange(n) // st.L) * st.L
  data = np.where(g.em, st.V[register_row(st, f["data0"]), g.ln], 0)
  st.vwrite(g, register_row(st, f["vdst"]), data[wave_base + src_lane])

for t in ("b32", "b64", "b96", "b128", "u8", "i8", "u16", "i16", "u8_d16", "u8_d16_hi", "i8_d16", "i8_d16_hi", "u16_d16", "u16_d16_hi"):
  OPS[f"ds_load_{t}"] = _ds_load
for t in ("b32", "b64"):
  OPS[f"ds_load_2addr_{t}"] = OPS[f"ds_load_2addr_stride64_{t}"] = _ds_load
  OPS[f"ds_store_2addr_{t}"] = OPS[f"ds_store_2addr_stride64_{t}"] = _ds_store
for t in ("b8", "b16", "b32", "b64", "b96", "b128", "b8_d16_hi", "b16_d16_hi"):
  OPS[f"ds_store_{t}"] = _ds_store
for k in ("add", "sub", "rsub", "inc", "dec", "min", "max", "and", "or", "xor"):
  for t in ("u32", "i32", "b32", "u64", "i64", "b64"):
    OPS[f"ds_{k}_{t}"] = OPS[f"ds_{k}_rtn_{t}"] = _ds_atomic
for k in ("add", "min", "max"): OPS[f"ds_{k}_f32"] = OPS[f"ds_{k}_rtn_f32"] = _ds_atomic
OPS["ds_storexchg_rtn_b32"] = OPS["ds_storexchg_rtn_b64"] = _ds_atomic
OPS["ds_cmpstore_b32"] = OPS["ds_cmpstore_rtn_b32"] = OPS["ds_cmpstore_b64"] = OPS["ds_cmpstore_rtn_b64"] = _ds_atomic
OPS["ds_bpermute_b32"] = _ds_bpermute
