"""Every kernel structure tg declares has the size and field offsets of the system header, and every ioctl number
equals the header's macro (checked by compiling a C program; skipped where no compiler or header is present)."""
import os, shutil, subprocess, tempfile
import pytest
from drivers.amd import kfd
from drivers import vfio

def header_layout(header: str, ffi, structs: list[str], macros: list[str]) -> dict[str, int]:
  """{"struct.field": offset, "struct": size, "MACRO": value} as the C compiler sees the header."""
  if shutil.which("cc") is None: pytest.skip("no C compiler")
  if not os.path.exists(f"/usr/include/{header}"): pytest.skip(f"no /usr/include/{header}")
  lines = [f"#include <{header}>", "#include <stdio.h>", "#include <stddef.h>", "int main(void) {"]
  for s in structs:
    lines.append(f'printf("{s} %zu\\n", sizeof(struct {s}));')
    for field in ffi.typeof(f"struct {s}").fields:
      lines.append(f'printf("{s}.{field[0]} %zu\\n", offsetof(struct {s}, {field[0]}));')
  for m in macros: lines.append(f'printf("{m} %lu\\n", (unsigned long){m});')
  lines.append("return 0; }")
  with tempfile.TemporaryDirectory() as d:
    src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
    with open(src, "w") as f: f.write("\n".join(lines))
    # kfd_ioctl.h includes drm/drm.h only for the kernel's integer types and ioctl macros; provide them when the
    # drm headers (libdrm-dev) are not installed
    os.makedirs(os.path.join(d, "drm"))
    with open(os.path.join(d, "drm", "drm.h"), "w") as f: f.write("#include <linux/types.h>\n#include <linux/ioctl.h>\n")
    subprocess.run(["cc", "-idirafter", d, src, "-o", exe], check=True, capture_output=True)
    out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
  return {k: int(v) for k, v in (line.split() for line in out.splitlines())}

def check(header, ffi, ioctls):
  structs = ffi.list_types()[1]  # the declared struct names
  layout = header_layout(header, ffi, structs, list(ioctls))
  for s in structs:
    assert ffi.sizeof(f"struct {s}") == layout[s], s
    for field in ffi.typeof(f"struct {s}").fields:
      assert ffi.offsetof(f"struct {s}", field[0]) == layout[f"{s}.{field[0]}"], f"{s}.{field[0]}"
  for name, value in ioctls.items(): assert value == layout[name], name
  return structs

def test_kfd_structs_match_header():
  assert len(check("linux/kfd_ioctl.h", kfd.ffi, kfd.IOCTLS)) >= 10

def test_vfio_structs_match_header():
  assert len(check("linux/vfio.h", vfio.ffi, vfio.IOCTLS)) >= 4
