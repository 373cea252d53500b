"""Texture and UAV (IBO) descriptors in the QCOM model, decoded with the model's own tables from Mesa's
src/freedreno/registers/adreno/a6xx_descriptors.xml (<domain name="A6XX_TEX_MEMOBJ">, the older A6XX_TEX_CONST) and the
enums of a6xx_enums.xml / adreno_common.xml, and the per-dispatch view of what the CP loaded (Bindings) that the ir3
core's isam and stib.b use.

How the state reaches a dispatch (each rule from what Mesa's drivers program):
- CP_LOAD_STATE6_FRAG copies descriptors from memory (SS6_INDIRECT) into numbered slots: SB6_CS_TEX + ST6_CONSTANTS
  texture descriptors (16 dwords), SB6_CS_TEX + ST6_SHADER samplers (4 dwords) (gallium fd6_texture.cc
  build_texture_state), SB6_CS_SHADER + ST6_UAV IBO descriptors (16 dwords) (computerator a6xx.cc cs_ibo_emit). A
  write of SP_UPDATE_CNTL with CS_STATE drops the loaded textures and samplers, with CS_UAV the UAVs (a6xx.xml
  SP_UPDATE_CNTL: "clears pending loads queued up by CP_LOAD_STATE6").
- An index must be below SP_CS_CONFIG's count (NTEX/NSAMP/NUAV, with ENABLED set: fd6_compute.cc cs_program_emit)
  and below SP_CS_TSIZE (textures, fd6_texture.cc) or SP_CS_USIZE (UAVs, cs_ibo_emit); SP_MODE_CNTL.ISAMMODE must be an
  a6xx_isam_mode for isam (computerator cs_program_emit sets ISAMMODE_GL).
- The table register (SP_CS_TEXMEMOBJ_BASE / SP_CS_SAMPLER_BASE / SP_CS_UAV_BASE) is aligned as a6xx.xml's align=
  says and points at the memory the slot was loaded from: Mesa writes the load's source address to it (fd6_texture.cc,
  cs_ibo_emit); the model's rule is that both agree for every slot an instruction uses.
- The sampler isam names must be loaded; its contents do not change an in-range integer texel fetch, so the model
  reads nothing from it (its own choice).

What the model runs: 2-D (A6XX_TEX_2D), linear (TILE6_LINEAR), single-sample, non-UBWC images of FMT6_32_32_32_32_FLOAT
or FMT6_16_16_16_16_FLOAT with SWAP WZYX; texel (x, y) is at BASE + y * PITCH + x * texel bytes. A texture's SWIZ_X..W
(X Y Z W ZERO ONE) choose each returned component; stores ignore the swizzle (Mesa's storage descriptor carries the
identity, fd6_view.cc fdl6_view_init; tinygrad's IBO descriptors leave it 0 and store all four components,
docs/qcom.md section 2). Anything else is a GPUFault naming the field and its value."""
from __future__ import annotations
from dataclasses import dataclass, field
import numpy as np
from drivers.mock.qcom import registers as hw
from drivers.mock.qcom.ir3_faults import GPUFault

# <domain name="A6XX_TEX_MEMOBJ">: name -> (dword, low bit, width); BASE_LO holds address bits 31:5 (shr=5)
TEX_FIELDS = {"TILE_MODE": (0, 0, 2), "SRGB": (0, 2, 1), "SWIZ_X": (0, 4, 3), "SWIZ_Y": (0, 7, 3), "SWIZ_Z": (0, 10, 3),
              "SWIZ_W": (0, 13, 3), "MIPLVLS": (0, 16, 4), "SAMPLES": (0, 20, 2), "FMT": (0, 22, 8), "SWAP": (0, 30, 2),
              "WIDTH": (1, 0, 15), "HEIGHT": (1, 15, 15), "PITCHALIGN": (2, 0, 4), "PITCH": (2, 7, 22), "TYPE": (2, 29, 3),
              "ARRAY_PITCH": (3, 0, 23), "TILE_ALL": (3, 27, 1), "FLAG": (3, 28, 1), "BASE_LO": (4, 5, 27),
              "BASE_HI": (5, 0, 17), "DEPTH": (5, 17, 13)}
TILE_MODES = {0: "TILE6_LINEAR", 2: "TILE6_2", 3: "TILE6_3"}                      # <enum name="a6xx_tile_mode">
TEX_TYPES = {0: "A6XX_TEX_1D", 1: "A6XX_TEX_2D", 2: "A6XX_TEX_CUBE", 3: "A6XX_TEX_3D", 4: "A6XX_TEX_BUFFER",
             5: "A6XX_TEX_IMG_BUFFER"}                                             # <enum name="a6xx_tex_type">
SWAPS = {0: "WZYX", 1: "WXYZ", 2: "ZYXW", 3: "XYZW"}                               # <enum name="a3xx_color_swap">
SWIZZLES = ("X", "Y", "Z", "W", "ZERO", "ONE")                                     # <enum name="a6xx_tex_swiz"> 0..5
TILE6_LINEAR, A6XX_TEX_2D, WZYX = 0, 1, 0
LINEAR_BASE_ALIGN = 64  # fd6_layout.c fdl6_layout_image: a linear layout has base_align 64

@dataclass(frozen=True)
class Format:
  name: str
  dtype: type                     # one component in memory
  @property
  def texel_bytes(self) -> int: return 4 * np.dtype(self.dtype).itemsize
  @property
  def pitch_align(self) -> int:
    """fd6_layout.c fdl6_layout_image, linear explicit layout: pitch aligned to 1 << (6 + max(cpp_shift - 2, 0)) bytes
    (cpp_shift - 2 only when cpp > 4): 64 bytes, or 16 texels for texels wider than 4 bytes."""
    shift = self.texel_bytes.bit_length() - 1
    return 1 << (6 + (shift - 2 if self.texel_bytes > 4 else 0))

# <enum name="a6xx_format">: the formats the model reads and writes (four components each)
FORMATS = {0x82: Format("FMT6_32_32_32_32_FLOAT", np.float32), 0x62: Format("FMT6_16_16_16_16_FLOAT", np.float16)}

def fields(dwords, table: dict[str, tuple[int, int, int]]) -> dict[str, int]:
  return {name: (int(dwords[d]) >> low) & ((1 << width) - 1) for name, (d, low, width) in table.items()}

@dataclass(frozen=True)
class Image:
  """A validated 2-D linear image: what names it in messages (t#N / u#N), where it lives and how a texel is stored."""
  what: str
  fmt: Format
  width: int
  height: int
  pitch: int
  base: int
  swizzle: tuple[int, int, int, int]

  def addresses(self, x: np.ndarray, y: np.ndarray, who: str) -> np.ndarray:
    """The texel address of each (x, y); a coordinate outside width x height is a GPUFault (the model's own choice:
    what the hardware returns there depends on sampler and ISAMMODE state tg never relies on)."""
    bad = (x < 0) | (x >= self.width) | (y < 0) | (y >= self.height)
    if bad.any():
      i = int(np.argmax(bad))
      raise GPUFault(self.base, f"{who}: {self.what} texel ({int(x[i])}, {int(y[i])}) is outside the {self.width}x{self.height} image")
    return np.uint64(self.base) + y.astype(np.uint64) * np.uint64(self.pitch) + x.astype(np.uint64) * np.uint64(self.fmt.texel_bytes)

  def read(self, raw: np.ndarray) -> list[np.ndarray]:
    """(n, texel bytes) -> the four returned components as float32 arrays, after the swizzle."""
    comps = np.ascontiguousarray(raw).view(np.dtype(self.fmt.dtype).newbyteorder("<")).astype(np.float32)
    pick = {0: comps[:, 0], 1: comps[:, 1], 2: comps[:, 2], 3: comps[:, 3], 4: np.zeros(len(raw), np.float32),
            5: np.ones(len(raw), np.float32)}
    return [pick[s] for s in self.swizzle]

  def pack(self, values: list[np.ndarray]) -> np.ndarray:
    """Four float32 arrays -> (n, texel bytes) in the image's format (float16: numpy's round-to-nearest-even)."""
    comps = np.stack([np.asarray(v, np.float32) for v in values], axis=1).astype(np.dtype(self.fmt.dtype).newbyteorder("<"))
    return comps.view(np.uint8).reshape(len(comps), self.fmt.texel_bytes)

def image(dwords, what: str, address: int, storage: bool) -> Image:
  """Validate a texture (storage=False) or UAV (storage=True) descriptor loaded from `address`; GPUFault on any field
  outside what the model runs."""
  f = fields(dwords, TEX_FIELDS)
  def refuse(name: str, value: str, why: str):
    dword = TEX_FIELDS[name][0]
    raise GPUFault(address, f"{what} descriptor at {address:#x}: dword {dword} {name} = {value}: {why}")
  if f["TILE_MODE"] != TILE6_LINEAR:
    refuse("TILE_MODE", f"{f['TILE_MODE']} ({TILE_MODES.get(f['TILE_MODE'], 'no a6xx_tile_mode')})", "only TILE6_LINEAR is modelled")
  if f["FMT"] not in FORMATS:
    refuse("FMT", f"{f['FMT']:#x}", "not modelled (FMT6_32_32_32_32_FLOAT 0x82 and FMT6_16_16_16_16_FLOAT 0x62 are)")
  if f["SWAP"] != WZYX: refuse("SWAP", f"{f['SWAP']} ({SWAPS[f['SWAP']]})", "only WZYX (components in memory order) is modelled")
  if f["TYPE"] != A6XX_TEX_2D:
    refuse("TYPE", f"{f['TYPE']} ({TEX_TYPES.get(f['TYPE'], 'no a6xx_tex_type')})", "only A6XX_TEX_2D is modelled")
  if f["SRGB"]: refuse("SRGB", "1", "sRGB decoding of a float format is not modelled")
  if f["SAMPLES"]: refuse("SAMPLES", str(f["SAMPLES"]), "only MSAA_ONE is modelled")
  if f["FLAG"]: refuse("FLAG", "1", "UBWC (flag buffer) images are not modelled")
  swizzle = tuple(f[f"SWIZ_{c}"] for c in "XYZW")
  if not storage and (bad := [c for c, s in zip("XYZW", swizzle) if s >= len(SWIZZLES)]):
    refuse(f"SWIZ_{bad[0]}", str(f[f"SWIZ_{bad[0]}"]), "not an a6xx_tex_swiz value (X Y Z W ZERO ONE)")
  fmt, base = FORMATS[f["FMT"]], f["BASE_LO"] << 5 | f["BASE_HI"] << 32
  if base % LINEAR_BASE_ALIGN:
    refuse("BASE_LO", f"{base:#x} (BASE)", f"a linear image's base is {LINEAR_BASE_ALIGN}-byte aligned (fd6_layout.c fdl6_layout_image base_align)")
  if f["PITCH"] % fmt.pitch_align:
    refuse("PITCH", str(f["PITCH"]), f"a linear {fmt.name} pitch is a multiple of {fmt.pitch_align} bytes (fd6_layout.c fdl6_layout_image)")
  if f["PITCH"] < f["WIDTH"] * fmt.texel_bytes:  # the model's own check: rows of a 2-D image do not overlap
    refuse("PITCH", str(f["PITCH"]), f"less than WIDTH {f['WIDTH']} x {fmt.texel_bytes} bytes")
  return Image(what, fmt, f["WIDTH"], f["HEIGHT"], f["PITCH"], base, (0, 1, 2, 3) if storage else swizzle)

@dataclass(frozen=True)
class Loaded:
  """One descriptor as a CP_LOAD_STATE6_FRAG copied it: its dwords and the GPU address they came from."""
  dwords: tuple[int, ...]
  address: int

@dataclass
class Bindings:
  """The texture, sampler and UAV state one dispatch sees: register values at CP_EXEC_CS and the loaded slots
  (table name -> slot -> Loaded). texture()/uav() check the rules above once per index and return the Image."""
  config: dict[str, int] = field(default_factory=lambda: hw.fields_of("SP_CS_CONFIG", 0))
  tsize: int = 0
  usize: int = 0
  isammode: int = 0
  bases: dict[str, int] = field(default_factory=lambda: {t: 0 for t in hw.TABLE_BASE})
  loaded: dict[str, dict[int, Loaded]] = field(default_factory=lambda: {t: {} for t in hw.TABLE_BASE})
  images: dict[tuple, Image] = field(default_factory=dict)

  def texture(self, t: int, s: int, who: str) -> Image:
    if (key := ("texture", t, s)) not in self.images:
      self._enabled("texture", t, who)
      if self.isammode not in hw.ISAM_MODES:
        raise GPUFault(self._entry("texture", t), f"{who}: SP_MODE_CNTL.ISAMMODE = {self.isammode} is no a6xx_isam_mode (1 CL, 2 GL)")
      self._index("texture", t, "t", "NTEX", "SP_CS_TSIZE", self.tsize, who)
      self._index("sampler", s, "s", "NSAMP", None, 0, who)
      slot = self._slot("texture", t, "t", who)
      self._slot("sampler", s, "s", who)
      self.images[key] = image(slot.dwords, f"t#{t}", slot.address, storage=False)
    return self.images[key]

  def uav(self, u: int, who: str) -> Image:
    if (key := ("uav", u)) not in self.images:
      self._enabled("uav", u, who)
      self._index("uav", u, "u", "NUAV", "SP_CS_USIZE", self.usize, who)
      slot = self._slot("uav", u, "u", who)
      self.images[key] = image(slot.dwords, f"u#{u}", slot.address, storage=True)
    return self.images[key]

  def _entry(self, table: str, i: int) -> int:
    return self.bases[table] + i * 4 * hw.DESCRIPTOR_DWORDS[table]

  def _enabled(self, table: str, i: int, who: str) -> None:
    if not self.config["ENABLED"]:
      raise GPUFault(self._entry(table, i), f"{who}: SP_CS_CONFIG.ENABLED is 0 (fd6_compute.cc cs_program_emit sets it with the counts)")

  def _index(self, table: str, i: int, letter: str, count: str, size_reg: str | None, size: int, who: str) -> None:
    if i >= self.config[count]:
      raise GPUFault(self._entry(table, i), f"{who}: {letter}#{i} is not below SP_CS_CONFIG.{count} = {self.config[count]}")
    if size_reg is not None and i >= size:
      raise GPUFault(self._entry(table, i), f"{who}: {letter}#{i} is not below {size_reg} = {size} (the number of descriptors the driver loaded)")

  def _slot(self, table: str, i: int, letter: str, who: str) -> Loaded:
    reg, align = hw.TABLE_BASE[table]
    base = self.bases[table]
    if base % align: raise GPUFault(base, f"{who}: {reg} {base:#x} is not {align}-byte aligned (a6xx.xml align={align})")
    if (slot := self.loaded[table].get(i)) is None:
      raise GPUFault(self._entry(table, i), f"{who}: {letter}#{i} was never loaded by a CP_LOAD_STATE6_FRAG of the CS {table} "
                                            f"table (or an SP_UPDATE_CNTL write dropped it)")
    if slot.address != self._entry(table, i):
      raise GPUFault(slot.address, f"{who}: {letter}#{i} was loaded from {slot.address:#x} but {reg} {base:#x} puts it at "
                                   f"{self._entry(table, i):#x} (Mesa points the register at the table it loads)")
    return slot
