"""TRACE_IOCTL=1: every open, ioctl, mmap and munmap a driver makes through the system seam (drivers/system.py's
System, which MockSystem's models sit behind too), written to stderr with its argument decoded from its cffi type:
struct and union fields by name (after the call, so what the kernel or model filled in shows), arrays by their first
entries, and the return value or the error."""
from __future__ import annotations
import errno, sys
import cffi

_ffi = cffi.FFI()  # typeof works on cdata from any FFI: they share cffi's backend
MAX_ITEMS, MAX_DEPTH = 8, 4
PROT_NAMES = ((1, "R"), (2, "W"), (4, "X"))
MAP_NAMES = ((0x01, "SHARED"), (0x02, "PRIVATE"), (0x10, "FIXED"), (0x20, "ANONYMOUS"), (0x4000, "NORESERVE"))

def decode(value, depth: int = MAX_DEPTH) -> str:
  """`value` (an int, or cffi cdata of any type) as text: "name=value" for struct fields, ints in hex."""
  if isinstance(value, bool) or not isinstance(value, (int, _ffi.CData)): return repr(value)
  if isinstance(value, int): return f"{value:#x}" if value >= 0 else str(value)
  t = _ffi.typeof(value)
  if t.kind == "pointer":
    if t.item.kind in ("struct", "union", "array") and value != _ffi.NULL: return f"{t.item.cname} " + decode(value[0], depth)
    return f"({t.cname}){int(_ffi.cast('uintptr_t', value)):#x}"
  if t.kind == "array": return _array(value, t, depth)
  if t.kind in ("struct", "union"):
    if depth <= 0: return "{...}"
    return "{" + ", ".join(f"{name}={decode(getattr(value, name), depth - 1)}" for name, _ in t.fields) + "}"
  return repr(value)

def decode_call(arg, params=None) -> str:
  """An ioctl's argument, and after it the parameters one of its pointers leads to (RM's), as the call left them."""
  return decode(arg) + ("" if params is None else f" params {decode(params)}")

def _array(value, t, depth: int) -> str:
  """chars as a string, bytes as hex, other entries decoded up to the last that isn't all zero (at most MAX_ITEMS)."""
  if t.item.cname == "char": return repr(_ffi.string(value))
  raw, size = bytes(_ffi.buffer(value)), _ffi.sizeof(t.item)
  if t.item.cname in ("uint8_t", "unsigned char", "int8_t"): return f"0x{raw.hex()}" if len(raw) <= 64 else f"0x{raw[:64].hex()}... ({len(raw)} bytes)"
  used = next((i + 1 for i in reversed(range(len(value))) if any(raw[i * size:(i + 1) * size])), 0)
  items = [decode(value[i], depth - 1) for i in range(min(used, MAX_ITEMS))]
  rest = len(value) - len(items)
  return "[" + ", ".join(items) + (f"{', ' if items else ''}... {rest} more ({len(value) - used} zero)" if rest else "") + "]"

def flags(value: int, names: tuple[tuple[int, str], ...]) -> str:
  return "|".join(name for bit, name in names if value & bit) or "0"

def log(line: str) -> None: print(f"TRACE_IOCTL {line}", file=sys.stderr, flush=True)

def failure(e: OSError) -> str: return f"error {errno.errorcode.get(e.errno, e.errno)}: {e.strerror}"
