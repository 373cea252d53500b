import random, struct
import pytest
from drivers.nv.qmd import QMD_LAYOUTS, decode, encode, qmd_version_for_class, set_fields

V03, V04, V05 = QMD_LAYOUTS["V03_00"], QMD_LAYOUTS["V04_00"], QMD_LAYOUTS["V05_00"]

def dword(buf, byte_offset): return struct.unpack_from("<I", buf, byte_offset)[0]

def only_nonzero_bytes(buf): return {i: b for i, b in enumerate(buf) if b}

def test_versions_and_classes():
  assert [(l.size, l.major, l.minor) for l in (V03, V04, V05)] == [(256, 3, 0), (384, 4, 0), (384, 5, 0)]
  assert [qmd_version_for_class(c) for c in (0xc6c0, 0xc7c0, 0xc9c0, 0xcbc0, 0xcdc0, 0xcec0)] == ["V03_00"] * 3 + ["V04_00"] + ["V05_00"] * 2
  with pytest.raises(ValueError, match="0xc5c0"): qmd_version_for_class(0xc5c0)

@pytest.mark.parametrize("layout", [V03, V04, V05], ids=lambda l: l.version)
def test_fields_are_disjoint_and_inside_the_descriptor(layout):
  owner: dict[int, str] = {}
  for name, field in layout.fields.items():
    for hi, lo in field.parts:
      assert lo <= hi < layout.size * 8, name
      for bit in range(lo, hi + 1):
        assert bit not in owner, f"{name} overlaps {owner.get(bit)} at bit {bit}"
        owner[bit] = name

@pytest.mark.parametrize("layout", [V03, V04, V05], ids=lambda l: l.version)
def test_every_field_round_trips(layout):
  rng = random.Random(layout.version)
  values = {name: rng.getrandbits(f.width) << f.shift for name, f in layout.fields.items()}
  assert decode(layout, encode(layout, **values)) == values
  maxed = {name: ((1 << f.width) - 1) << f.shift for name, f in layout.fields.items()}
  assert decode(layout, encode(layout, **maxed)) == maxed
  assert set(decode(layout, encode(layout)).values()) == {0}

def test_launch_field_names_are_shared():
  common = {"group_id", "grid_width", "grid_height", "grid_depth", "block_dim_x", "block_dim_y", "block_dim_z",
            "register_count", "barrier_count", "shared_memory_size", "program_address", "program_prefetch_address",
            "sass_version", "qmd_major_version", "qmd_minor_version", "cb0_address", "cb7_size", "release2_payload",
            "dependent_qmd0_pointer", "dependent_qmd1_enable", "invalidate_shader_constant_cache", "cwd_membar_type"}
  for layout in (V03, V04, V05): assert common <= layout.fields.keys(), layout.version
  assert "qmd_type" not in V03.fields and "qmd_type" in V04.fields and "qmd_type" in V05.fields
  assert "sm_global_caching_enable" in V03.fields and "sm_global_caching_enable" not in V04.fields
  assert "dependent_qmd1_pointer" not in V03.fields and "dependent_qmd1_pointer" in V04.fields

# Positions below are written from docs/nv.md section 2 (an independent reading of the headers).

def test_hopper_v04_positions():
  assert only_nonzero_bytes(encode(V04, grid_width=0x12345678)) == {0x80: 0x78, 0x81: 0x56, 0x82: 0x34, 0x83: 0x12}
  q = encode(V04, program_address=0x7fff_1234_5600)  # unshifted, byte 0x98
  assert (dword(q, 0x98), dword(q, 0x9C)) == (0x1234_5600, 0x7fff)
  q = encode(V04, cb0_address=0x7fff_1234_5640, cb0_size=0x230)  # CB0 at byte 0xC0, address >> 6, size >> 4 at 1599:1587
  assert dword(q, 0xC0) == (0x7fff_1234_5640 >> 6) & 0xffffffff
  assert dword(q, 0xC4) == 0x7fff_1234_5640 >> 38 | 0x23 << 19
  assert only_nonzero_bytes(encode(V04, release0_enable=1)) == {320 // 8: 1}
  assert only_nonzero_bytes(encode(V04, release1_enable=1, release2_payload64b=1)) == {336 // 8: 1, (352 + 12) // 8: 1 << 4}
  q = encode(V04, release0_address=0x1_0000_0010, release0_payload=0xdead_beef_0000_0001)
  assert [dword(q, o) for o in (80, 84, 88, 92)] == [0x10, 1, 1, 0xdead_beef]
  assert dword(encode(V04, dependent_qmd0_pointer=0xff_1234_5600), 448 // 8) == 0xff_1234_5600 >> 8
  with pytest.raises(ValueError, match="'dependent_qmd0_pointer' is 32 bits wide after >> 8"):  # a QMD must sit below 2**40
    encode(V04, dependent_qmd0_pointer=1 << 40)
  assert dword(encode(V04, block_dim_x=0x100, block_dim_y=2), 0x90) == 0x2_0100
  assert dword(encode(V04, qmd_major_version=4, qmd_minor_version=0, shared_memory_size=0x400), 576 // 8) == 0x4 << 4 | 0x400 << 8
  assert only_nonzero_bytes(encode(V04, qmd_type=2, group_id=0x3f)) == {2: 0x3f, 3: 1}  # 21:16 and 25:23

def test_ampere_v03_positions():
  assert only_nonzero_bytes(encode(V03, block_dim_x=0xabcd)) == {592 // 8: 0xcd, 592 // 8 + 1: 0xab}
  assert dword(encode(V03, grid_width=0x1234_5678), 384 // 8) == 0x1234_5678
  q = encode(V03, cb0_address=0x1_2345_6789)  # unshifted on V03
  assert (dword(q, 1024 // 8), dword(q, 1056 // 8)) == (0x2345_6789, 1)
  assert dword(encode(V03, program_address=0x7fff_0000_1000), 1536 // 8) == 0x1000
  assert dword(encode(V03, release0_address=0xabc0), 768 // 8) == 0xabc0
  assert only_nonzero_bytes(encode(V03, sass_version=0x86, sm_global_caching_enable=1)) == {1656 // 8: 0x86, 134 // 8: 1 << (134 % 8)}

def test_blackwell_v05_shifts():
  q = encode(V05, program_address=0x7fff_1234_5670)  # stored >> 4 at bit 1024
  assert dword(q, 0x80) == (0x7fff_1234_5670 >> 4) & 0xffffffff and dword(q, 0x84) & 0x1fffff == 0x7fff_1234_5670 >> 36
  assert (dword(encode(V05, shared_memory_size=0x8000), 1152 // 8) & 0x7ff) == 0x8000 >> 7
  assert dword(encode(V05, shader_local_memory_high_size=0x240), 1200 // 8 - 2) >> 16 == 0x240 >> 4
  with pytest.raises(ValueError, match=r"program_address.*>> 4.*0x1238"): encode(V05, program_address=0x1238)
  with pytest.raises(ValueError, match="shared_memory_size"): encode(V05, shared_memory_size=0x410)

def test_bad_values_raise_naming_the_field():
  with pytest.raises(ValueError, match=r"'block_dim_x' is 16 bits wide: 0x10000"): encode(V04, block_dim_x=0x10000)
  with pytest.raises(ValueError, match=r"'block_dim_z' is 8 bits wide: 0x100"): encode(V05, block_dim_z=0x100)
  with pytest.raises(ValueError, match=r"'program_address' is 57 bits wide"): encode(V04, program_address=1 << 57)
  with pytest.raises(ValueError, match=r"'cb0_address' is 51 bits wide after >> 6"): encode(V04, cb0_address=1 << 57)
  with pytest.raises(ValueError, match="negative"): encode(V04, grid_width=-1)
  with pytest.raises(ValueError, match="'grid_widht'"): encode(V04, grid_widht=1)
  with pytest.raises(ValueError, match="'qmd_type'"): encode(V03, qmd_type=2)
  with pytest.raises(ValueError, match="multiple of 0x10"): encode(V03, cb0_size=0x224)

def test_set_fields_patches_in_place():
  q = encode(V04, grid_width=7, release0_enable=1, release0_payload=5, dependent_qmd0_pointer=0x1000)
  view = memoryview(q)
  set_fields(V04, view, release0_payload=0x1_0000_0006, dependent_qmd0_pointer=0x2000, dependent_qmd0_enable=1)
  got = decode(V04, q)
  assert (got["grid_width"], got["release0_enable"], got["release0_payload"]) == (7, 1, 0x1_0000_0006)
  assert (got["dependent_qmd0_pointer"], got["dependent_qmd0_enable"]) == (0x2000, 1)
  before = bytes(q)
  with pytest.raises(ValueError, match="block_dim_x"): set_fields(V04, q, grid_width=9, block_dim_x=1 << 16)
  assert bytes(q) == before  # nothing half-written
  with pytest.raises(ValueError, match="384 bytes"): set_fields(V04, bytearray(256), grid_width=1)
  with pytest.raises(ValueError, match="384 bytes"): decode(V04, bytes(256))
