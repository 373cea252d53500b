"""Tar archives as Tensors: `tar_extract` maps every regular member to a uint8 Tensor viewing its bytes (a lazy DISK
view when given a path). Headers are parsed here from the POSIX ustar layout, with the GNU long-name records and pax
extended headers that carry long names and big sizes. `ByteSource` (random access to a file or a uint8 Tensor, plus
lazy views of byte ranges) is shared with the other model-file loaders."""
from __future__ import annotations
import os, pathlib, weakref
from ir.dtype import DType, dtypes
from tg.tensor import Tensor

class ByteSource:
  """The bytes of a file path or of a 1-d uint8 Tensor: `read(offset, n)` gives bytes (a ValueError naming the offset
  when the range runs past the end), `view(offset, n)` a lazy uint8 Tensor of the range (on DISK for a path). A file is
  read through its descriptor, not mapped: one that another process truncates gives a ValueError, not a SIGBUS."""
  CHUNK = 1 << 16

  def __init__(self, src: str | os.PathLike | Tensor):
    self._fd: int | None = None
    self._tensor: Tensor | None = None
    self._chunks: dict[int, bytes] = {}
    if isinstance(src, Tensor):
      if src.dtype != dtypes.uint8 or src.ndim != 1: raise TypeError(f"expected a 1-d uint8 Tensor of file bytes, got {src.dtype} {src.shape}")
      self.name, self.size, self._tensor, self.path = f"<tensor on {src.device}>", src.shape[0], src, None
      return
    self.path = pathlib.Path(src).resolve()
    self.name = str(src)
    if not self.path.is_file(): raise FileNotFoundError(f"{self.name}: no such file")
    self._fd = os.open(self.path, os.O_RDONLY)
    weakref.finalize(self, os.close, self._fd)
    self.size = os.fstat(self._fd).st_size

  @property
  def tensor(self) -> Tensor:
    """The whole source as a uint8 Tensor (a DISK tensor for a path, made on first use)."""
    if self._tensor is None:
      if self.size == 0: raise ValueError(f"{self.name}: the file is empty")
      self._tensor = Tensor(self.path)
    return self._tensor

  def read(self, offset: int, n: int, what: str = "data") -> bytes:
    if offset < 0 or n < 0 or offset + n > self.size:
      raise ValueError(f"{self.name}: {what} at offset {offset} ({n} bytes) runs past the end of the file ({self.size} bytes)")
    if self._fd is not None:
      parts, got = [], 0
      while got < n and (part := os.pread(self._fd, n - got, offset + got)):  # a read stops short at 2 GiB, or at a new end of file
        parts.append(part)
        got += len(part)
      if got < n:
        raise ValueError(f"{self.name}: {what} at offset {offset} ({n} bytes) can't be read: the file is now {os.fstat(self._fd).st_size} "
                         f"bytes, it had {self.size} when it was opened (truncated by another process?)")
      return b"".join(parts)
    out, pos = bytearray(), offset
    while pos < offset + n:  # a tensor is read in cached chunks: each read of it realizes a copy
      start = pos - pos % self.CHUNK
      if (chunk := self._chunks.get(start)) is None:
        chunk = self._chunks[start] = self._tensor[start:min(start + self.CHUNK, self.size)].numpy().tobytes()
      take = chunk[pos - start:offset + n - start]
      out += take
      pos += len(take)
    return bytes(out)

  def view(self, offset: int, n: int, what: str = "data", dtype: DType = dtypes.uint8) -> Tensor:
    """Bytes [offset, offset + n) as a 1-d `dtype` Tensor (n must be a multiple of its size): a view of the same memory
    when the source is realized (a DISK file always is), else a lazy slice."""
    if offset < 0 or n < 0 or offset + n > self.size:
      raise ValueError(f"{self.name}: {what} at offset {offset} ({n} bytes) runs past the end of the file ({self.size} bytes)")
    if n % dtype.itemsize: raise ValueError(f"{self.name}: {what} at offset {offset} has {n} bytes, not a whole number of {dtype}")
    if n == 0: return Tensor.empty(0, dtype=dtype)
    part = self.tensor[offset:offset + n]
    # bitcast makes a buffer view; a uint8 slice goes through int8 so it is a view too (a plain shrink of a DISK buffer
    # can't be copied off DISK while the schedule cache is on: see the report on contiguous_region and BufferSlot)
    return part.bitcast(dtypes.int8).bitcast(dtypes.uint8) if dtype == dtypes.uint8 else part.bitcast(dtype)

BLOCK = 512

def _number(field: bytes, what: str, offset: int, name: str) -> int:
  """A numeric header field: octal text (NUL/space padded), or GNU base-256 when the top bit of the first byte is set."""
  if field and field[0] & 0x80:
    value = int.from_bytes(bytes([field[0] & 0x7F]) + field[1:], "big")
    return value - (1 << (8 * len(field) - 1)) if field[0] & 0x40 else value
  text = field.split(b"\0", 1)[0].strip(b" ")
  if not text: return 0
  try: return int(text, 8)
  except ValueError: raise ValueError(f"{name}: tar header at offset {offset} has a bad {what} field {field!r}") from None

def _text(field: bytes) -> str: return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")

def _pax_records(data: bytes, offset: int, name: str) -> dict[str, str]:
  """Pax extended header records: '<len> <key>=<value>\\n', where len counts the whole record."""
  out, pos = {}, 0
  while pos < len(data) and data[pos:pos + 1] != b"\0":
    sp = data.find(b" ", pos)
    try: length = int(data[pos:sp])
    except ValueError: raise ValueError(f"{name}: bad pax record in the header at offset {offset}") from None
    if sp < 0 or length <= 0 or pos + length > len(data): raise ValueError(f"{name}: bad pax record in the header at offset {offset}")
    key, _, value = data[sp + 1:pos + length - 1].partition(b"=")
    out[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
    pos += length
  return out

def tar_members(src: ByteSource) -> dict[str, tuple[int, int]]:
  """member name -> (data offset, size) for the regular files (hard links point at their target's data)."""
  members: dict[str, tuple[int, int]] = {}
  pos, long_name, pax, global_pax = 0, None, {}, {}
  while pos + BLOCK <= src.size:
    hdr = src.read(pos, BLOCK, "tar header")
    if hdr == b"\0" * BLOCK: break  # end of archive (two zero blocks; one is enough to stop)
    stored = _number(hdr[148:156], "checksum", pos, src.name)
    unsigned = sum(hdr[:148]) + 8 * 32 + sum(hdr[156:])
    signed = sum(b - 256 if b > 127 else b for b in hdr[:148]) + 8 * 32 + sum(b - 256 if b > 127 else b for b in hdr[156:])
    if stored not in (unsigned, signed): raise ValueError(f"{src.name}: tar header at offset {pos} has a bad checksum (corrupt or not a tar file)")
    kind = hdr[156:157]
    size = _number(hdr[124:136], "size", pos, src.name)
    name = _text(hdr[0:100])
    if hdr[257:263] == b"ustar\0" and (prefix := _text(hdr[345:500])): name = f"{prefix}/{name}"
    if long_name is not None: name, long_name = long_name, None
    info = {**global_pax, **pax}
    if kind not in (b"x", b"g"): pax = {}
    if "path" in info: name = info["path"]
    if "size" in info and kind not in (b"x", b"g"):
      if not (info["size"].isascii() and info["size"].isdigit() and len(info["size"]) <= 20):
        raise ValueError(f"{src.name}: pax header before offset {pos} gives the size {info['size'][:40]!r}, not a decimal byte count")
      size = int(info["size"])
    data = pos + BLOCK
    if size < 0 or data + size > src.size:
      raise ValueError(f"{src.name}: tar member {name!r} (header at offset {pos}) has {size} bytes of data at offset {data}, past the end of the file ({src.size} bytes)")
    if kind == b"L": long_name = _text(src.read(data, size, "GNU long name"))
    elif kind == b"x": pax = _pax_records(src.read(data, size, "pax header"), pos, src.name)
    elif kind == b"g": global_pax.update(_pax_records(src.read(data, size, "pax header"), pos, src.name))
    elif kind in (b"0", b"\0", b"7"): members[name] = (data, size)
    elif kind == b"1" and (target := _text(hdr[157:257])) in members: members[name] = members[target]
    pos = data + (size + BLOCK - 1) // BLOCK * BLOCK
  else:
    if pos != src.size: raise ValueError(f"{src.name}: truncated tar archive: a partial header at offset {pos}")
  return members

def tar_extract(fn_or_tensor: str | os.PathLike | Tensor) -> dict[str, Tensor]:
  """member name -> uint8 Tensor viewing that member's bytes (lazy; on DISK when given a path). Directories, links
  to nowhere and special files are left out."""
  src = ByteSource(fn_or_tensor)
  return {name: src.view(off, size, f"tar member {name!r}") for name, (off, size) in tar_members(src).items()}
