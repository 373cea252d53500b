"""ir3 assembly -> a tg QCOM lib: a 32-byte header giving the kernel's register/const/shared-memory footprint, then the
machine code of codegen/ir3_assembler.py, then the images it reads and writes. The driver reads it back with read_lib.

Header (little endian): struct.pack("<4sHHHHIII", b"tgI3", 2, full_regs, half_regs, const_vec4, shared_bytes, code_bytes,
image_count) (24 bytes) followed by 8 zero bytes, so the code starts at byte 32. After the code, image_count records of
struct.pack("<BBHIHH", ibo, slot, itemsize, buffer, height, width) (12 bytes; ir3_assembler.ImageBinding's fields).
full_regs/half_regs/const_vec4 are vec4 counts (highest index referenced // 4 + 1, 0 if none); full_regs is at least 2
because the ABI delivers the workgroup id in r0 and the local id in r1."""
from __future__ import annotations
import hashlib, pathlib, re, struct
from dataclasses import dataclass
from codegen.compiler import Compiler
from codegen.ir3_assembler import ImageBinding, assemble_program

MAGIC, VERSION = b"tgI3", 2
HEADER = struct.Struct("<4sHHHHIII")
IMAGE = struct.Struct("<BBHIHH")
HEADER_SIZE = 32  # HEADER.size (24) padded with zeros
ABI_FULL_REGS = 2  # r0 = workgroup id, r1 = local invocation id
# libs made by other versions of the assembler must not come back from the disk cache
_SOURCE = hashlib.sha256(b"".join(pathlib.Path(__file__).with_name(n).read_bytes() for n in ("ir3_assembler.py", "ir3_compiler.py")))

@dataclass(frozen=True)
class Lib:
  full_regs: int
  half_regs: int
  const_vec4: int
  shared_bytes: int
  code: bytes
  images: tuple[ImageBinding, ...] = ()

def pack_lib(lib: Lib) -> bytes:
  head = HEADER.pack(MAGIC, VERSION, lib.full_regs, lib.half_regs, lib.const_vec4, lib.shared_bytes, len(lib.code), len(lib.images))
  records = b"".join(IMAGE.pack(b.ibo, b.slot, b.itemsize, b.buffer, b.height, b.width) for b in lib.images)
  return head.ljust(HEADER_SIZE, b"\0") + lib.code + records

def read_lib(lib: bytes) -> Lib:
  """The header fields and code of a lib made by IR3Compiler; ValueError naming the problem if it is malformed."""
  if len(lib) < HEADER_SIZE: raise ValueError(f"ir3 lib truncated: {len(lib)} bytes, the header alone is {HEADER_SIZE}")
  magic, version, full, half, consts, shared, code_bytes, image_count = HEADER.unpack_from(lib)
  if magic != MAGIC: raise ValueError(f"not an ir3 lib: magic {magic!r}, expected {MAGIC!r}")
  if version != VERSION: raise ValueError(f"unsupported ir3 lib version {version} (this tg reads version {VERSION})")
  if any(lib[HEADER.size:HEADER_SIZE]): raise ValueError("ir3 lib header: reserved bytes are not zero")
  if code_bytes % 8: raise ValueError(f"ir3 lib code size {code_bytes} is not a whole number of 64-bit instructions")
  size = HEADER_SIZE + code_bytes + image_count * IMAGE.size
  if len(lib) != size:
    raise ValueError(f"ir3 lib {'truncated' if len(lib) < size else 'has trailing bytes'}: header says {code_bytes} code bytes "
                     f"and {image_count} images ({size} bytes in all), {len(lib)} present")
  end = HEADER_SIZE + code_bytes
  images = tuple(ImageBinding(bool(r[0]), r[1], r[3], r[4], r[5], r[2]) for r in IMAGE.iter_unpack(lib[end:]))
  return Lib(full, half, consts, shared, bytes(lib[HEADER_SIZE:end]), images)

class IR3Compiler(Compiler):
  """Assembles ir3 text for an Adreno `arch` ("a630", "a660", "a730", "a740", ...; generation = the hundreds digit)."""
  def __init__(self, arch: str):
    if not re.fullmatch(r"a[67]\d\d", arch): raise ValueError(f"bad Adreno arch {arch!r}: expected a6xx or a7xx, e.g. 'a630'")
    self.arch, self.gen = arch, int(arch[1])
    super().__init__(f"ir3_v{VERSION}_gen{self.gen}_{_SOURCE.hexdigest()[:16]}")

  def compile(self, src: str) -> bytes:
    prog = assemble_program(src, self.gen)
    return pack_lib(Lib(max(ABI_FULL_REGS, prog.full_regs), prog.half_regs, prog.const_vec4, prog.shared_bytes, prog.code, prog.images))
