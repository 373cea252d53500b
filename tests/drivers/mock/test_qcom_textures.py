"""isam and stib.b through the whole QCOM model: the CP loads texture, sampler and IBO descriptors built here from the
field layout of Mesa's a6xx_descriptors.xml (written out below, not taken from the model), the registers are written at
their a6xx.xml offsets, and a shader assembled from text runs in the ir3 core. Expected texels come from numpy; every
rule the model enforces has a program or a stream here that breaks it."""
from __future__ import annotations
from dataclasses import dataclass, field, replace
import numpy as np
import pytest
from codegen.ir3_assembler import assemble_program
from drivers.mock.qcom.cp import CPFault
from tests.drivers.mock.test_qcom_cp import EXEC_CS, LOAD_STATE6_FRAG, Machine, hi, lo, pkt4, pkt7

# A6XX_TEX_MEMOBJ (a6xx_descriptors.xml): dword 0 TILE_MODE 1:0, SRGB 2, SWIZ_X/Y/Z/W 6:4 9:7 12:10 15:13, FMT 29:22,
# SWAP 31:30; dword 1 WIDTH 14:0, HEIGHT 29:15; dword 2 PITCHALIGN 3:0, PITCH 28:7 (bytes), TYPE 31:29; dword 4 BASE_LO
# 31:5 (the address's bits 31:5 in place); dword 5 BASE_HI 16:0, DEPTH 29:17.
FMT_32x4_FLOAT, FMT_16x4_FLOAT, FMT_8x4_UNORM = 0x82, 0x62, 0x30   # a6xx_enums.xml a6xx_format
X, Y, Z, W, ZERO, ONE = range(6)                                   # a6xx_tex_swiz
TEX_2D, TEX_3D = 1, 3                                              # a6xx_tex_type

def descriptor(fmt: int, width: int, height: int, pitch: int, base: int, swiz=(X, Y, Z, W), tile=0, srgb=0, swap=0,
               tex_type=TEX_2D, pitchalign=0) -> list[int]:
  d = [0] * 16
  d[0] = tile | srgb << 2 | swiz[0] << 4 | swiz[1] << 7 | swiz[2] << 10 | swiz[3] << 13 | fmt << 22 | swap << 30
  d[1] = width | height << 15
  d[2] = pitchalign | pitch << 7 | tex_type << 29
  d[4], d[5] = base & 0xFFFFFFE0, base >> 32 | 1 << 17   # DEPTH 1
  return d

def test_descriptor_fields_decode_from_the_dwords():
  from drivers.mock.qcom.descriptors import TEX_FIELDS, fields
  d = descriptor(FMT_16x4_FLOAT, 5, 7, 384, 0x12_3456_7840, swiz=(Z, ONE, X, W), pitchalign=1)
  d[0] |= 3 << 16                                   # MIPLVLS 19:16
  d[3] = 5 | 1 << 27                                # ARRAY_PITCH 22:0 (4 KiB units), TILE_ALL 27
  f = fields(d, TEX_FIELDS)
  assert (f["FMT"], f["WIDTH"], f["HEIGHT"], f["PITCH"], f["PITCHALIGN"], f["TYPE"], f["DEPTH"]) == (0x62, 5, 7, 384, 1, 1, 1)
  assert (f["SWIZ_X"], f["SWIZ_Y"], f["SWIZ_Z"], f["SWIZ_W"], f["MIPLVLS"], f["ARRAY_PITCH"], f["TILE_ALL"]) == (Z, ONE, X, W, 3, 5, 1)
  assert f["BASE_LO"] << 5 | f["BASE_HI"] << 32 == 0x12_3456_7840 and (f["TILE_MODE"], f["SWAP"], f["SRGB"], f["FLAG"]) == (0, 0, 0, 0)

# a6xx.xml register offsets; the ones that move between generations (variants A6XX / A7XX-) per gen
COMMON = dict(cntl_0=0xA9B0, base=0xA9B4, instr_size=0xA9BC, tsize=0xA9BA, config=0xA9BB, sampler_base=0xA9E2,
              texmemobj_base=0xA9E6, usize=0xAA00, mode_cntl=0xAB00)
GEN = {6: dict(const_config=0xB987, ndrange_0=0xB990, ids=0xB997, uav_base=0xA9F2, update_cntl=0xBB08),
       7: dict(const_config=0xA9CD, ndrange_0=0xA9D4, ids=0xA9C2, uav_base=0xA9F8, update_cntl=0xAB1F)}
# CP_LOAD_STATE6 dword 0: STATE_TYPE 15:14 (ST6_SHADER 0, ST6_CONSTANTS 1, ST6_UAV 3), STATE_SRC 17:16 (SS6_INDIRECT 2),
# STATE_BLOCK 21:18 (SB6_CS_TEX 5, SB6_CS_SHADER 13), NUM_UNIT 31:22
def load(state_type: int, block: int, n: int, address: int, src: int = 2, dst: int = 0) -> list[int]:
  return pkt7(LOAD_STATE6_FRAG, dst | state_type << 14 | src << 16 | block << 18 | n << 22, lo(address), hi(address))

COPY = """; each fiber copies texel (lid.x, lid.y) of t#0 into u#0
  isam (f32)(xyzw)r2.x, r1.x, s#0, t#0
  (sy)stib.b.typed.2d.f32.4.imm r2.x, r1.x, 0
  end"""

@dataclass
class Dispatch:
  """One CP_EXEC_CS of `program` over a local size of (width, height) fibers with one texture and one IBO; each field
  is one thing the driver programs, so a test breaks exactly one."""
  gen: int
  program: str
  width: int
  height: int
  textures: list = field(default_factory=list)     # descriptors (16 dwords each) loaded into t#0..
  uavs: list = field(default_factory=list)         # IBO descriptors loaded into u#0..
  ntex: int | None = None                          # SP_CS_CONFIG.NTEX (default: the number loaded), NSAMP, NUAV
  nsamp: int = 1
  nuav: int | None = None
  tsize: int | None = None                         # SP_CS_TSIZE / SP_CS_USIZE (default: the number loaded)
  usize: int | None = None
  enabled: int = 1                                 # SP_CS_CONFIG.ENABLED
  isammode: int = 2                                # SP_MODE_CNTL.ISAMMODE (ISAMMODE_GL)
  load_sampler: bool = True
  texmemobj_offset: int = 0                        # added to SP_CS_TEXMEMOBJ_BASE
  drop_after_load: int = 0                         # an SP_UPDATE_CNTL written after the loads

  def words(self, m: Machine, at: int) -> list[int]:
    """The stream; code and tables live from GPU address `at` (256-byte aligned)."""
    r = COMMON | GEN[self.gen]
    prog = assemble_program(self.program, self.gen)
    code, tex_table, samp_table, uav_table = at, at + 0x400, at + 0x800, at + 0xC00
    m.write(code, prog.code)
    m.write(tex_table, np.array(sum(self.textures, []), np.uint32).tobytes())
    m.write(samp_table, bytes(16))
    m.write(uav_table, np.array(sum(self.uavs, []), np.uint32).tobytes())
    nt, nu = len(self.textures), len(self.uavs)
    ntex, nuav = nt if self.ntex is None else self.ntex, nu if self.nuav is None else self.nuav
    words = pkt4(r["update_cntl"], 1 << 5 | 1 << 6)                        # SP_UPDATE_CNTL CS_STATE | CS_UAV
    words += pkt4(r["cntl_0"], prog.full_regs << 7 | prog.half_regs << 1)  # FULLREGFOOTPRINT 12:7, HALFREGFOOTPRINT 6:1
    words += pkt4(r["base"], lo(code), hi(code)) + pkt4(r["instr_size"], -(-len(prog.code) // 128))
    words += pkt4(r["ndrange_0"], (self.width - 1) << 2 | (self.height - 1) << 12)   # LOCALSIZEX 11:2, LOCALSIZEY 21:12
    words += pkt4(r["ids"], 4 << 24 | 0xFC << 16 | 0xFC << 8 | 0)           # local id from r1.x, workgroup id r0.x
    if nt: words += load(1, 5, nt, tex_table) + pkt4(r["texmemobj_base"], lo(tex_table + self.texmemobj_offset), hi(tex_table))
    if self.load_sampler: words += load(0, 5, 1, samp_table) + pkt4(r["sampler_base"], lo(samp_table), hi(samp_table))
    if nu: words += load(3, 13, nu, uav_table) + pkt4(r["uav_base"], lo(uav_table), hi(uav_table))
    if self.drop_after_load: words += pkt4(r["update_cntl"], self.drop_after_load)
    words += pkt4(r["tsize"], nt if self.tsize is None else self.tsize) + pkt4(r["usize"], nu if self.usize is None else self.usize)
    words += pkt4(r["config"], self.enabled << 8 | ntex << 9 | self.nsamp << 17 | nuav << 22)   # a6xx_sp_xs_config
    words += pkt4(r["mode_cntl"], self.isammode << 1)                      # SP_MODE_CNTL ISAMMODE 2:1
    return words + pkt7(EXEC_CS, 0, 1, 1, 1)

class Images(Machine):
  """A Machine with byte access and a 256-byte aligned data area below its IBs."""
  def __init__(self, gen: int):
    super().__init__(gen)
    self.at = self.va + (-self.va % 256)
  def write(self, address: int, data: bytes) -> None: self.buf.view(np.uint8)[address - self.va:address - self.va + len(data)] = np.frombuffer(data, np.uint8)
  def read(self, address: int, n: int) -> np.ndarray: return self.buf.view(np.uint8)[address - self.va:address - self.va + n].copy()
  def image(self, offset: int, texels: np.ndarray, pitch: int) -> int:
    """Store a (height, width, 4) array row by row, `pitch` bytes apart, at data offset `offset`; returns its address."""
    for y, row in enumerate(texels): self.write(self.at + offset + y * pitch, row.tobytes())
    return self.at + offset
  def rows(self, address: int, height: int, width: int, pitch: int, dtype) -> np.ndarray:
    return np.stack([self.read(address + y * pitch, width * 4 * np.dtype(dtype).itemsize).view(dtype).reshape(width, 4) for y in range(height)])
  def dispatch(self, d: Dispatch) -> bool:
    return self.run(d.words(self, self.at))

TEX, IBO = 0x1000, 0x6000   # data offsets of the texture and the IBO

def copy_setup(gen: int, tex_fmt=FMT_32x4_FLOAT, ibo_fmt=FMT_32x4_FLOAT, swiz=(X, Y, Z, W), w=4, h=3, seed=0):
  """A w x h texture of random values (pitch: 16 texels, fdl6's linear alignment) and an IBO of the same size."""
  m = Images(gen)
  tdt, idt = {FMT_32x4_FLOAT: np.float32, FMT_16x4_FLOAT: np.float16}[tex_fmt], {FMT_32x4_FLOAT: np.float32, FMT_16x4_FLOAT: np.float16}[ibo_fmt]
  texels = np.random.default_rng(seed).uniform(-100, 100, (h, w, 4)).astype(tdt)
  tpitch, ipitch = 16 * 4 * np.dtype(tdt).itemsize, 16 * 4 * np.dtype(idt).itemsize
  tex = m.image(TEX, texels, tpitch)
  d = Dispatch(gen, COPY, w, h, textures=[descriptor(tex_fmt, w, h, tpitch, tex, swiz)],
               uavs=[descriptor(ibo_fmt, w, h, ipitch, m.at + IBO)])
  return m, d, texels, (m.at + IBO, ipitch, idt)

@pytest.mark.parametrize("gen", [6, 7])
def test_isam_f32_texels_copied_by_stib(gen):
  m, d, texels, (ibo, pitch, dt) = copy_setup(gen)
  assert m.dispatch(d)
  np.testing.assert_array_equal(m.rows(ibo, 3, 4, pitch, dt), texels)
  assert not m.read(ibo + 4 * 16, pitch - 4 * 16).any()          # nothing written past each row's width

@pytest.mark.parametrize("gen", [6, 7])
def test_isam_of_f16_texture_returns_exact_f32(gen):
  m, d, texels, (ibo, pitch, dt) = copy_setup(gen, tex_fmt=FMT_16x4_FLOAT)
  assert m.dispatch(d)
  np.testing.assert_array_equal(m.rows(ibo, 3, 4, pitch, dt), texels.astype(np.float32))

def test_isam_swizzle_picks_components_zero_and_one():
  m, d, texels, (ibo, pitch, dt) = copy_setup(6, swiz=(W, ZERO, X, ONE))
  assert m.dispatch(d)
  got = m.rows(ibo, 3, 4, pitch, dt)
  np.testing.assert_array_equal(got[..., 0], texels[..., 3])
  np.testing.assert_array_equal(got[..., 2], texels[..., 0])
  assert (got[..., 1] == 0).all() and (got[..., 3] == 1).all()

# f32 -> f16 by hand (binary16: 10 fraction bits): 1 + 2^-11 is halfway between 0x3C00 and 0x3C01 -> the even 0x3C00;
# 1 + 3 * 2^-11 halfway between 0x3C01 and 0x3C02 -> 0x3C02; 65520 rounds up past 65504 (0x7BFF) to inf 0x7C00; -2.5 =
# -1.25 * 2^1 -> sign 1, exponent 16, fraction 0x100 -> 0xC100; 2^-24 is the smallest subnormal 0x0001; 2^-26 -> 0.
F16_CASES = [(1 + 2.0 ** -11, 0x3C00), (1 + 3 * 2.0 ** -11, 0x3C02), (65520.0, 0x7C00), (-2.5, 0xC100), (2.0 ** -24, 0x0001),
             (2.0 ** -26, 0x0000), (-1 - 2.0 ** -11, 0xBC00), (0.1, 0x2E66)]

@pytest.mark.parametrize("gen", [6, 7])
def test_stib_to_f16_ibo_rounds_to_nearest_even(gen):
  m, d, _, (ibo, pitch, dt) = copy_setup(gen, ibo_fmt=FMT_16x4_FLOAT, w=2, h=1)
  values = np.array([c[0] for c in F16_CASES], np.float32).reshape(1, 2, 4)
  m.image(TEX, values, 256)
  assert m.dispatch(d)
  assert list(m.read(ibo, 16).view(np.uint16)) == [c[1] for c in F16_CASES]

def test_isam_f16_destination_rounds_into_half_registers():
  """isam (f16): the texel rounded to f16 into hr2..; widened back with cov to store it through an f32 IBO."""
  m, d, _, (ibo, pitch, dt) = copy_setup(6, w=2, h=1)
  values = np.array([c[0] for c in F16_CASES], np.float32).reshape(1, 2, 4)
  m.image(TEX, values, 256)
  d.program = """
    isam (f16)(xyzw)hr2.x, r1.x, s#0, t#0
    (sy)cov.f16f32 r3.x, hr2.x
    cov.f16f32 r3.y, hr2.y
    cov.f16f32 r3.z, hr2.z
    cov.f16f32 r3.w, hr2.w
    (rpt5)nop
    stib.b.typed.2d.f32.4.imm r3.x, r1.x, 0
    end"""
  assert m.dispatch(d)
  expect = np.array([c[1] for c in F16_CASES], np.uint16).view(np.float16).astype(np.float32)
  np.testing.assert_array_equal(m.read(ibo, 32).view(np.float32), expect)

# ---- the hazards --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("program,message", [
  # the isam result is read before (sy): ir3_legalize.c is_tex_or_prefetch -> needs_sy
  ("isam (f32)(xyzw)r2.x, r1.x, s#0, t#0\nstib.b.typed.2d.f32.4.imm r2.x, r1.x, 0\nend",
   r"reads r2\.x, written by a texture fetch \(isam\) needs \(sy\)"),
  # ... or overwritten before (sy)
  ("isam (f32)(xyzw)r2.x, r1.x, s#0, t#0\n(ss)mov.u32u32 r2.w, 0\nend", r"overwrites r2\.w while a texture fetch \(isam\) needs \(sy\)"),
  # its coordinate rewritten before (ss) or (sy): is_war_hazard_producer, needs_ss_or_sy_war
  ("isam (f32)(xyzw)r2.x, r1.x, s#0, t#0\nmov.u32u32 r1.y, 0\nend", r"overwrites r1\.y still read .* without \(ss\) or \(sy\)"),
  # a stib source rewritten before (ss): is_store -> needs_ss_war, (sy) does not end it
  ("(sy)mov.u32u32 r2.x, 0\n(rpt5)nop\nstib.b.typed.2d.f32.4.imm r2.x, r1.x, 0\n(sy)mov.u32u32 r2.z, 0\nend",
   r"overwrites r2\.z still read .* without \(ss\) \(ir3_legalize.c needs_ss_war\)"),
  # a coordinate produced by ALU and read by isam 5 slots later: ir3_delayslots gives cat5 consumers 6
  ("add.u r3.x, r1.x, 0\n(rpt4)nop\nisam (f32)(xyzw)r2.x, r3.x, s#0, t#0\nend", r"reads r3\.x 5 slot\(s\) after its ALU producer, needs 6"),
])
def test_sync_rules_for_isam_and_stib(program, message):
  m, d, _, _ = copy_setup(6)
  with pytest.raises(CPFault, match="shader hazard: .*" + message): m.dispatch(replace(d, program=program))

@pytest.mark.parametrize("program", [
  "isam (f32)(xyzw)r2.x, r1.x, s#0, t#0\n(sy)mov.u32u32 r1.y, 0\nend",     # (sy) ends an isam's pending source read
  "isam (f32)(xyzw)r2.x, r1.x, s#0, t#0\n(ss)nop\nmov.u32u32 r1.y, 0\n(sy)nop\nend",   # as does (ss)
  "(sy)mov.u32u32 r2.x, 0\n(rpt5)nop\nstib.b.typed.2d.f32.4.imm r2.x, r1.x, 0\n(ss)mov.u32u32 r2.z, 0\nend",
  "add.u r3.x, r1.x, 0\n(rpt5)nop\nisam (f32)(xyzw)r2.x, r3.x, s#0, t#0\n(sy)end"])
def test_sync_rules_satisfied(program):
  m, d, _, _ = copy_setup(6)
  assert m.dispatch(replace(d, program=program))

# ---- faults: coordinates, state, descriptors ------------------------------------------------------------------------
def test_isam_outside_the_texture_faults_naming_coordinate_and_size():
  m, d, _, _ = copy_setup(6)
  with pytest.raises(CPFault, match=r"shader fault: .*isam .*t#0 texel \(0, 3\) is outside the 4x3 image"):
    m.dispatch(replace(d, height=4, uavs=[descriptor(FMT_32x4_FLOAT, 4, 4, 256, m.at + IBO)]))

def test_stib_outside_the_ibo_faults():
  m, d, _, _ = copy_setup(6)
  with pytest.raises(CPFault, match=r"stib\.b.*u#0 texel \(3, 0\) is outside the 3x3 image"):
    m.dispatch(replace(d, uavs=[descriptor(FMT_32x4_FLOAT, 3, 3, 256, m.at + IBO)]))

def test_negative_coordinate_faults():
  m, d, _, _ = copy_setup(6)
  program = "mov.s32s32 r3.x, -1\nmov.u32u32 r3.y, 0\n(rpt5)nop\nisam (f32)(xyzw)r2.x, r3.x, s#0, t#0\n(sy)end"
  with pytest.raises(CPFault, match=r"texel \(-1, 0\) is outside"): m.dispatch(replace(d, program=program))

@pytest.mark.parametrize("gen", [6, 7])
@pytest.mark.parametrize("change,message", [
  (dict(ntex=0), r"t#0 is not below SP_CS_CONFIG\.NTEX = 0"),
  (dict(tsize=0), r"t#0 is not below SP_CS_TSIZE = 0"),
  (dict(nsamp=0), r"s#0 is not below SP_CS_CONFIG\.NSAMP = 0"),
  (dict(enabled=0), r"SP_CS_CONFIG\.ENABLED is 0"),
  (dict(isammode=0), r"SP_MODE_CNTL\.ISAMMODE = 0 is no a6xx_isam_mode"),
  (dict(load_sampler=False), r"s#0 was never loaded"),
  (dict(texmemobj_offset=64), r"t#0 was loaded from 0x[0-9a-f]+ but SP_CS_TEXMEMOBJ_BASE"),
  (dict(texmemobj_offset=16), r"SP_CS_TEXMEMOBJ_BASE 0x[0-9a-f]+ is not 64-byte aligned"),
  (dict(drop_after_load=1 << 5), r"t#0 was never loaded"),                 # SP_UPDATE_CNTL.CS_STATE after the load
  (dict(drop_after_load=1 << 6), r"u#0 was never loaded"),                 # CS_UAV drops the IBOs
  (dict(nuav=0), r"u#0 is not below SP_CS_CONFIG\.NUAV = 0"),
  (dict(usize=0), r"u#0 is not below SP_CS_USIZE = 0"),
])
def test_state_a_dispatch_needs(gen, change, message):
  m, d, _, _ = copy_setup(gen)
  with pytest.raises(CPFault, match="shader fault: .*" + message): m.dispatch(replace(d, **change))

def test_texture_beyond_ntex_and_a_slot_never_loaded():
  m, d, _, _ = copy_setup(6)
  one_more = replace(d, program=COPY.replace("t#0", "t#1"))
  with pytest.raises(CPFault, match=r"t#1 is not below SP_CS_CONFIG\.NTEX = 1"): m.dispatch(one_more)
  with pytest.raises(CPFault, match=r"t#1 was never loaded"): m.dispatch(replace(one_more, ntex=2, tsize=2))

@pytest.mark.parametrize("kwargs,message", [
  (dict(tile=3), r"dword 0 TILE_MODE = 3 \(TILE6_3\): only TILE6_LINEAR"),
  (dict(fmt=FMT_8x4_UNORM), r"dword 0 FMT = 0x30: not modelled"),
  (dict(swap=1), r"dword 0 SWAP = 1 \(WXYZ\)"),
  (dict(srgb=1), r"dword 0 SRGB = 1"),
  (dict(tex_type=TEX_3D), r"dword 2 TYPE = 3 \(A6XX_TEX_3D\): only A6XX_TEX_2D"),
  (dict(swiz=(X, Y, Z, 6)), r"dword 0 SWIZ_W = 6: not an a6xx_tex_swiz"),
  (dict(pitch=4 * 16 + 64), r"dword 2 PITCH = 128: a linear FMT6_32_32_32_32_FLOAT pitch is a multiple of 256"),  # 16 texels
  (dict(pitch=0), r"dword 2 PITCH = 0: less than WIDTH 4 x 16 bytes"),
  (dict(base_offset=32), r"dword 4 BASE_LO = 0x[0-9a-f]+ \(BASE\): a linear image's base is 64-byte aligned"),
])
def test_texture_descriptor_fields_refused(kwargs, message):
  m, d, _, _ = copy_setup(6)
  args = dict(fmt=FMT_32x4_FLOAT, width=4, height=3, pitch=256, base=m.at + TEX) | kwargs
  args["base"] += args.pop("base_offset", 0)
  with pytest.raises(CPFault, match=r"shader fault: .*t#0 descriptor at 0x[0-9a-f]+: " + message):
    m.dispatch(replace(d, textures=[descriptor(**args)]))

def test_ibo_pitch_alignment_for_f16_is_128_bytes():
  """fdl6: 16 texels of 8 bytes; the IBO's swizzle is not looked at (tinygrad leaves it 0)."""
  m, d, texels, _ = copy_setup(6, w=2, h=2)
  ok = descriptor(FMT_16x4_FLOAT, 2, 2, 128, m.at + IBO, swiz=(X, X, X, X))
  assert m.dispatch(replace(d, width=2, height=2, uavs=[ok]))
  np.testing.assert_array_equal(m.rows(m.at + IBO, 2, 2, 128, np.float16), texels[:2, :2].astype(np.float16))
  with pytest.raises(CPFault, match=r"u#0 descriptor .* PITCH = 64: a linear FMT6_16_16_16_16_FLOAT pitch is a multiple of 128"):
    m.dispatch(replace(d, width=2, height=2, uavs=[descriptor(FMT_16x4_FLOAT, 2, 2, 64, m.at + IBO)]))

def test_descriptor_loads_the_cp_refuses():
  m = Images(6)
  with pytest.raises(CPFault, match=r"ST6_CONSTANTS SS6_DIRECT SB6_CS_TEX: texture descriptors are modelled from memory only"):
    m.run(load(1, 5, 1, 0, src=0))
  with pytest.raises(CPFault, match=r"ST6_UAV SS6_INDIRECT SB6_CS_UAV is not modelled"): m.run(load(3, 15, 1, m.at))
  with pytest.raises(CPFault, match=r"not mapped"): m.run(load(3, 13, 1, 0x1000))
  assert m.run(load(3, 13, 2, m.at, dst=3))                                   # DST_OFF: slots 3 and 4
  assert sorted(m.cp.tables["uav"]) == [3, 4] and m.cp.tables["uav"][4].address == m.at + 64

def test_isam_forms_the_executor_does_not_run():
  """Mesa's bindless isam.base0 word (disasm.c a0081f02_e2040001) in place of the copy's isam: decoded, refused."""
  m, d, _, _ = copy_setup(6)
  stream = d.words(m, m.at)
  m.write(m.at, (0xA0081F02_E2040001).to_bytes(8, "little"))
  with pytest.raises(CPFault, match=r"shader hazard: .*isam\.base0 .*: not modelled"): m.run(stream)
