"""The ir3 decoder against Mesa's own test vectors: words and their disassembly transcribed from Mesa
src/freedreno/ir3/tests/disasm.c (the `tests[]` table: INSTR_6XX = gpu 630, INSTR_7XX = chip 0x07030001), restricted
to what the model decodes; the decoded text must equal Mesa's (Mesa's "(last)" register hint is not modelled and is
removed from the expectation), and the fields behind the text are checked on a sample."""
from __future__ import annotations
import pytest
from drivers.mock.qcom.ir3_decode import decode, decode_checked, decode_program
from drivers.mock.qcom.ir3_faults import ShaderHazard

# Mesa src/freedreno/ir3/tests/disasm.c tests[] (gen 6 = INSTR_6XX, gen 7 = INSTR_7XX)
VECTORS = [
  (6, "00000000_00000000", "nop"), (6, "00000200_00000000", "(rpt2)nop"), (6, "00010000_00000000", "(eq)nop"),
  (6, "03000000_00000000", "end"), (6, "00800000_00000004", "br p0.x, #4"), (6, "00800000_fffffffc", "br p0.x, #-4"),
  (6, "00900000_00000003", "br !p0.x, #3"), (6, "02800000_00000000", "kill p0.x"),
  (6, "03820000_00000015", "shps #21"), (6, "04021000_00000000", "(ss)shpe"), (6, "02820000_00000014", "getone #20"),
  (6, "20244000_00000020", "mov.f32f32 r0.x, c8.x"), (6, "20200000_00000020", "mov.f16f16 hr0.x, hc8.x"),
  (6, "20150000_00000000", "cov.s32s16 hr0.x, r0.x"), (6, "20244905_00000410", "(rpt1)mov.f32f32 r1.y, (r)c260.x"),
  (6, "20510005_0000ffff", "mov.s16s16 hr1.y, -1"), (6, "20400005_00003900", "mov.f16f16 hr1.y, h(0.625000)"),
  (6, "20400006_00003800", "mov.f16f16 hr1.z, h(0.500000)"),
  (6, "20444000_00000000", "mov.f32f32 r0.x, (0.000000)"), (6, "20444000_3f000000", "mov.f32f32 r0.x, (0.500000)"),
  (6, "20444000_3f800000", "mov.f32f32 r0.x, (1.000000)"), (6, "20444000_40400000", "mov.f32f32 r0.x, (3.000000)"),
  (7, "2004c005_00000405", "cov.f32u32 r1.y, (last)r1.y"),
  (6, "40b80804_10408004", "(nop3) cmps.f.lt r1.x, (abs)r1.x, c16.x"),
  (6, "43480801_00008001", "(nop3) absneg.s hr0.y, (abs)hr0.y"), (6, "42280807_27ff0000", "(nop3) add.s hr1.w, hr0.x, h(-1)"),
  (6, "40a500f8_2c000004", "cmps.f.ne p0.x, hr1.x, h(0.0)"), (6, "438000f8_20010009", "and.b p0.x, hr2.y, h(1)"),
  (6, "438000f9_00020001", "and.b p0.y, hr0.y, hr0.z"), (6, "40080902_50200006", "(rpt1)add.f hr0.z, (r)hr1.z, (neg)(r)hc8.x"),
  (6, "42380c01_00040001", "(sat)(nop3) add.s r0.y, r0.y, r1.x"), (6, "46b00001_00001020", "clz.b r0.y, c8.x"),
  (6, "46700009_00000009", "bfrev.b r2.y, r2.y"), (6, "42b400f8_20010004", "cmps.s.eq p0.x, r1.x, 1"),
  (7, "42380800_04010400", "(nop3) add.s r0.x, (last)r0.x, (last)r0.y"),
  (7, "42930000_04000406", "cmps.u.ge r0.x, (last)r1.z, (last)r0.x"),
  (6, "40100007_68000008", "add.f r1.w, r2.x, (neg)(0.0)"), (6, "40100007_68040008", "add.f r1.w, r2.x, (neg)(e)"),
  (6, "40100007_680a0008", "add.f r1.w, r2.x, (neg)(log2(10))"), (6, "40100007_680b0008", "add.f r1.w, r2.x, (neg)(4.0)"),
  (6, "50600004_2c010004", "(sy)mul.f hr1.x, hr1.x, h(0.5)"), (6, "50600004_2c070004", "(sy)mul.f hr1.x, hr1.x, h(1/log2(e))"),
  (6, "66000000_10421041", "sel.f16 hr0.x, hc16.y, hr0.x, hc16.z"),
  (6, "64848109_109a9099", "(rpt1)sel.b32 r2.y, c38.y, (r)r2.y, c38.z"),
  (6, "64810904_30521036", "(rpt1)sel.b32 r1.x, (r)c13.z, r0.z, (r)c20.z"),
  (6, "64818902_20041032", "(rpt1)sel.b32 r0.z, (r)c12.z, r0.w, (r)r1.x"),
  (6, "63820005_10315030", "mad.f32 r1.y, (neg)c12.x, r1.x, c12.y"), (6, "62050009_00091000", "mad.u24 r2.y, c0.x, r2.z, r2.y"),
  (6, "61828008_00081033", "madsh.m16 r2.x, c12.w, r1.y, r2.x"),
  (7, "61808000_04020400", "madsh.m16 r0.x, (last)r0.x, r0.y, (last)r0.z"),
  (7, "64838806_04088406", "(nop3) sel.b32 r1.z, (last)r1.z, r1.w, (last)r2.x"),
  (6, "8010000a_00000003", "rcp r2.z, r0.w"),
  (6, "c0d20906_02800004", "stg.a.f32 g[r1.x+(r1.z<<2)], r0.z, 2"), (6, "c0da052e_01800042", "stg.a.s32 g[r0.z+(r11.z<<2)], r8.y, 1"),
  (6, "c0dc052e_01800042", "stg.a.u8 g[r0.z+r11.z], hr8.y, 1"), (6, "c0ca0505_03800042", "stg.s32 g[r0.z+5], r8.y, 3"),
  (6, "c0ca0500_03800042", "stg.s32 g[r0.z], r8.y, 3"), (6, "c0ca0531_03800242", "stg.s32 g[r0.z+305], r8.y, 3"),
  (6, "c0d61104_01800228", "stg.a.u32 g[r2.x+((r1.x+1)<<2)], r5.x, 1"),
  (6, "c0d61104_01802628", "stg.a.u32 g[r2.x+(((r1.x<<2)+3)<<2)], r5.x, 1"),
  (7, "c0d20505_07bfc006", "stg.a.f32 g[r0.z+r1.y+255], r0.w, 7"), (7, "c0d20507_04812006", "stg.a.f32 g[c0.z+r1.w+4], r0.w, 4"),
  (6, "c0020011_04c08023", "ldg.a.f32 r4.y, g[r0.z+(r4.y<<2)], 4"), (6, "c0060006_01c18017", "ldg.a.u32 r1.z, g[r1.z+(r2.w<<2)], 1"),
  (6, "c0060006_0181800f", "ldg.u32 r1.z, g[r1.z+7], 1"), (6, "c0060006_01818001", "ldg.u32 r1.z, g[r1.z], 1"),
  (6, "c0060003_0180c269", "ldg.u32 r0.w, g[r0.w+308], 1"), (6, "c0040003_0180c269", "ldg.u16 hr0.w, g[r0.w+308], 1"),
  (6, "c0020007_03c1420f", "ldg.a.f32 r1.w, g[r1.y+((r1.w+1)<<2)], 3"),
  (6, "c0020007_03c1740f", "ldg.a.f32 r1.w, g[r1.y+(((r1.w<<3)+2)<<2)], 3"),
  (6, "c0000006_01c18017", "ldg.a.f16 hr1.z, g[r1.z+(r2.w<<1)], 1"), (6, "c0060006_01c1b017", "ldg.a.u32 r1.z, g[r1.z+(r2.w<<5)], 1"),
  (7, "c0020411_04c08023", "ldg.a.f32 r4.y, g[r0.z+r4.y+2], 4"), (7, "c0004006_01c1a017", "ldg.a.f16 hr1.z, g[c1.z+r2.w+32], 1"),
  (6, "c1060500_01800008", "stl.u32 l[r0.z], r1.x, 1"), (6, "c0460001_01804001", "ldl.u32 r0.y, l[r0.y], 1"),
  (6, "c0420002_01808019", "ldl.f32 r0.z, l[r0.z+12], 1"), (6, "c1021710_04800000", "stl.f32 l[r2.w+16], r0.x, 4"),
  (6, "e0fa0000_00000000", "fence.g.l.r.w"), (6, "e09a0000_00000000", "fence.r.w"), (6, "f0420000_00000000", "(sy)bar.g"),
]

@pytest.mark.parametrize("gen,word,text", VECTORS)
def test_text_matches_mesa_disasm(gen, word, text):
  ins = decode(int(word.replace("_", ""), 16), 0, gen)
  assert ins.error is None, ins.error
  assert ins.text == text.replace("(last)", "")

def d(word: str, gen: int = 6): return decode_checked(int(word.replace("_", ""), 16), 3, gen)

def test_fields_behind_the_text():
  i = d("40b80804_10408004")                                   # (nop3) cmps.f.lt r1.x, (abs)r1.x, c16.x
  assert (i.cat, i.name, i.cond, i.nop, i.repeat, i.dst.kind, i.dst.num) == (2, "cmps.f", "lt", 3, 0, "reg", 4)
  assert (i.srcs[0].kind, i.srcs[0].abs, i.srcs[1].kind, i.srcs[1].num) == ("reg", True, "const", 64)
  i = d("40a500f8_2c000004")                                   # cmps.f.ne p0.x, hr1.x, h(0.0)
  assert (i.dst.kind, i.srcs[0].kind, i.srcs[1].flut, i.srcs[1].half) == ("pred", "half", True, True)
  i = d("00900000_00000003")                                   # br !p0.x, #3
  assert (i.name, i.branch, i.inv, i.srcs[0].kind) == ("br", 3, True, "pred")
  i = d("c0060003_0180c269")                                   # ldg.u32 r0.w, g[r0.w+308], 1
  assert (i.cat, i.name, i.type, i.offset, i.count, i.dst.num, i.srcs[0].num) == (6, "ldg", "u32", 308, 1, 3, 3)
  i = d("c0ca0531_03800242")                                   # stg.s32 g[r0.z+305], r8.y, 3
  assert (i.name, i.type, i.offset, i.count, i.srcs[0].num, i.srcs[1].num, i.dst) == ("stg", "s32", 305, 3, 2, 33, None)
  i = d("c1021710_04800000")                                   # stl.f32 l[r2.w+16], r0.x, 4
  assert (i.name, i.offset, i.count, i.srcs[0].num, i.srcs[1].num) == ("stl", 16, 4, 11, 0)
  i = d("20150000_00000000")                                   # cov.s32s16 hr0.x, r0.x
  assert (i.name, i.src_type, i.type, i.dst.kind, i.srcs[0].kind) == ("cov", "s32", "s16", "half", "reg")
  i = d("f0420000_00000000")                                   # (sy)bar.g
  assert (i.cat, i.name, i.sy, i.ss, i.jp, i.pc) == (7, "bar", True, False, False, 3)
  assert d("04021000_00000000").ss and d("00000200_00000000").repeat == 2
  i = d("64818902_20041032")                                   # sel.b32: src2 is a register, (r) on src1 and src3
  assert [s.kind for s in i.srcs] == ["const", "reg", "reg"] and [s.rpt for s in i.srcs] == [True, False, True]

def test_same_word_differs_between_a6xx_and_a7xx():
  """ldg.a's register-offset form has a shift on a6xx and a plain byte offset on a7xx (ir3-cat6.xml gen ranges)."""
  w = "c0020411_04c08023"
  assert d(w, 6).text == "ldg.a.f32 r4.y, g[r0.z+(r4.y<<2)], 4" and (d(w, 6).shift, d(w, 6).offset) == (0, 0)
  assert d(w, 7).offset == 2

@pytest.mark.parametrize("word,why", [
  ("a7c03102_00100003", "cat5 opcode 31"),                      # brcst.active.w8 (u32)(x)r0.z, r0.y
  ("20156004_00000c11", "relative"),                            # (ul)mov.s32s32 r1.x, c<a0.x + 17>
  ("40104002_0c210001", "relative"),                            # add.f hr0.z, r0.y, c<a0.x + 33>
  ("240cc004_00030201", "swz/gat/sct"),                         # swz.u32u32 r1.x, r0.w, r0.y, r0.z
  ("00906020_00000007", "brao"),                                # brao !p0.x, !p0.y, #7
  ("65900820_100cb008", "alternative encodings")])              # (nop3) shlg hr8.x, 8, hr8.x, 12
def test_undecodable_words_raise_shader_hazard_naming_the_word(word, why):
  w = int(word.replace("_", ""), 16)
  assert decode(w, 9).error and why in decode(w, 9).error
  with pytest.raises(ShaderHazard, match=rf"ir3 pc 9: word {w:#018x} cannot run: .*{why}"): decode_checked(w, 9)

# Mesa disasm.c cat5 and a6xx IBO (stib.b/ldib.b) entries: decoded to Mesa's text; only the forms the executor runs
# (non-bindless isam, stib.b.typed.2d.f32.4.imm) have no error -- none of Mesa's words is one of those.
TEXTURE_VECTORS = [
  (6, "a3801102_00000001", "dsx (f32)(x)r0.z, r0.x"), (6, "a3c01102_00000001", "dsy (f32)(x)r0.z, r0.x"),
  (6, "a2802f00_00000001", "getsize (u16)(xyzw)hr0.x, r0.x, t#0"),
  (6, "a0c89f04_c4600005", "sam.base1 (f32)(xyzw)r1.x, r0.z, s#3, t#2"),
  (6, "a1c85f00_c0200005", "getlod.base0 (s32)(xyzw)r0.x, r0.z, s#1, t#0"),
  (6, "a1000f00_00000004", "samb (f16)(xyzw)hr0.x, hr0.z, hr0.x, s#0, t#0"),
  (6, "a1000f00_00000003", "samb (f16)(xyzw)hr0.x, r0.y, r0.x, s#0, t#0"),
  (6, "a0c00f00_04400002", "sam (f16)(xyzw)hr0.x, hr0.y, s#2, t#2"), (6, "a3482f08_c0000000", "getinfo.base0 (u16)(xyzw)hr2.x, t#0"),
  (6, "a0c81f00_e0200005", "sam.base0 (f32)(xyzw)r0.x, r0.z, s#1, a1.x"), (6, "a0c81108_e2000001", "sam.base0 (f32)(x)r2.x, r0.x, s#16, a1.x"),
  (6, "a048d107_cc080a07", "isaml.base3 (s32)(x)r1.w, r0.w, r1.y, s#0, t#6"),
  (6, "a048d107_e0080a07", "isaml.base3 (s32)(x)r1.w, r0.w, r1.y, s#0, a1.x"),
  (6, "a1481606_e4803035", "saml.base0 (f32)(yz)r1.z, r6.z, r6.x, s#36, a1.x"),
  (6, "a0c89707_20a00005", "sam.s2en.uniform.base1 (f32)(xyz)r1.w, r0.z, r1.y, a1.x"),
  (6, "a1489f34_25e06e07", "saml.s2en.uniform.base1 (f32)(xyzw)r13.x, r0.w, r13.w, r11.w, a1.x"),
  (7, "a0081f02_e2040001", "isam.base0 (f32)(xyzw)r0.z, r0.x, t#16, a1.x"),
  (7, "a0081f02_e2000001", "isam.base0.1d (f32)(xyzw)r0.z, r0.x, t#16, a1.x"),
  (7, "a148310d_e028302c", "saml.base2 (u32)(x)r3.y, hr5.z, hr6.x, t#1, a1.x"),
  (7, "a00c3101_c2040001", "isam.v.base0 (u32)(x)r0.y, r0.x, s#0, t#1"), (7, "a00c3101_c2000001", "isam.v.base0.1d (u32)(x)r0.y, r0.x, s#0, t#1"),
  (7, "a02c3f06_c2041003", "isam.v.base0 (u32)(xyzw)r1.z, r0.y+8, s#0, t#1"),
  (7, "a02c3f05_a1240601", "isam.v.s2en.uniform.base0 (u32)(xyzw)r1.y, r0.x+3, r2.y"),
  (6, "a0c01f04_0cc00005", "sam (f32)(xyzw)r1.x, r0.z, s#6, t#6"),
  (6, "a0c81f07_0100000b", "sam.s2en.uniform (f32)(xyzw)r1.w, r1.y, hr2.x"),
  (6, "a0c81f07_8100000b", "sam.s2en.nonuniform (f32)(xyzw)r1.w, r1.y, hr2.x"),
  (6, "a0481f00_40000405", "isaml.s2en.nonuniform.base0 (f32)(xyzw)r0.x, r0.z, r0.z, r0.x"),
  (6, "a0c81f00_40000005", "sam.s2en.nonuniform.base0 (f32)(xyzw)r0.x, r0.z, r0.x"),
  (6, "c0260200_03676100", "stib.b.untyped.1d.u32.3.imm.base0 r0.x, r0.w, 1"),
  (6, "c0240402_00674100", "stib.b.untyped.1d.u16.1.imm.base0 hr0.z, r0.x, 2"),
  (6, "c0220200_0361b800", "ldib.b.typed.1d.f32.4.imm r0.x, r0.w, 1"),
  (7, "d1260406_00e77100", "(sy)stib.b.untyped.1d.u32.4.imm.base0 r1.z, r0.x+4, 2"),
  (7, "c3260002_01e1b100", "ldib.b.untyped.1d.u32.4.imm.base0 r0.z, r0.y+12, 0"),
  (7, "c7661840_4de74144", "stib.b.untyped.1d.u32.1.uniform.base2 r16.x, r19.y+29, r3.x"),
  (6, "c0260c0a_0a61b180", "ldib.b.untyped.1d.u32.4.nonuniform.base0 r2.z, r2.z, r1.z"),
  (6, "d0260e0a_09677180", "(sy)stib.b.untyped.1d.u32.4.nonuniform.base0 r2.z, r2.y, r1.w"),
]

@pytest.mark.parametrize("gen,word,text", TEXTURE_VECTORS)
def test_texture_and_ibo_text_matches_mesa_disasm(gen, word, text):
  ins = decode(int(word.replace("_", ""), 16), 0, gen)
  assert ins.text == text
  assert ins.error == f"{text}: not modelled (" + ("only non-bindless 2-D isam (f32|f16)(xyzw) with full coordinates runs)"
                                                   if ins.cat == 5 else "only stib.b.typed.2d.f32.4.imm without offset runs)")

def test_texture_and_ibo_fields_behind_the_text():
  d = lambda word, gen=6: decode(int(word.replace("_", ""), 16), 3, gen)   # these forms decode but do not run
  i = d("a0c01f04_0cc00005")                                   # sam (f32)(xyzw)r1.x, r0.z, s#6, t#6
  assert (i.cat, i.name, i.type, i.wrmask, i.dst.num, i.srcs[0].num, i.samp, i.tex) == (5, "sam", "f32", 15, 4, 2, 6, 6)
  i = d("a0c00f00_04400002")                                   # sam (f16)(xyzw)hr0.x, hr0.y, s#2, t#2: FULL = 0
  assert (i.dst.kind, i.srcs[0].kind, i.samp, i.tex) == ("half", "half", 2, 2)
  i = d("d0260e0a_09677180")                                   # (sy)stib.b...nonuniform.base0 r2.z, r2.y, r1.w
  assert (i.cat, i.name, i.sy, i.ss, i.uav, i.count, i.dims) == (6, "stib.b", True, False, None, 4, 1)
  assert [s.num for s in i.srcs] == [9, 10]                    # coordinate (SRC2) first, then the value (SRC1)
  i = d("c0260200_03676100")                                   # stib.b.untyped.1d.u32.3.imm.base0 r0.x, r0.w, 1
  assert (i.uav, i.count, i.type) == (1, 3, "u32")
  i = d("d1260406_00e77100", 7)                                # (sy)stib.b...imm.base0 r1.z, r0.x+4, 2: OFFSET_LO 54-58
  assert (i.offset, i.uav) == (4, 2)
  # DESC_MODE 7 (CAT5_BINDLESS_A1_IMM): SRC3 is the sampler on a6xx, the texture on a7xx (#cat5-s2enb-uses_a1-gen6/7)
  assert d("a0c81f00_e0200005", 7).text == "sam.base0 (f32)(xyzw)r0.x, r0.z, t#1, a1.x"

@pytest.mark.parametrize("gen", [6, 7])
@pytest.mark.parametrize("text,samp,tex,uav", [("isam (f32)(xyzw)r2.x, r0.x, s#0, t#1", 0, 1, None),
                                               ("(sy)(jp)isam (f16)(xyzw)hr1.z, r3.y, s#15, t#127", 15, 127, None),
                                               ("stib.b.typed.2d.f32.4.imm r4.x, r1.x, 3", None, None, 3),
                                               ("(sy)stib.b.typed.2d.f32.4.imm r0.y, r47.z, 255", None, None, 255)])
def test_assembled_isam_and_stib_decode_to_their_text_and_run(gen, text, samp, tex, uav):
  from codegen.ir3_assembler import assemble
  ins = decode(int.from_bytes(assemble(text, gen), "little"), 0, gen)
  assert ins.text == text and ins.error is None and (ins.samp, ins.tex, ins.uav) == (samp, tex, uav)

def test_program_is_decoded_once_per_blob():
  blob = bytes.fromhex("0000000000000000" + "0000000000000003")     # nop; end (little-endian words)
  prog = decode_program(blob, 6)
  assert [i.name for i in prog] == ["nop", "end"] and [i.pc for i in prog] == [0, 1]
  assert decode_program(bytes(blob), 6) is prog
  with pytest.raises(ShaderHazard, match="not a whole number of 64-bit words"): decode_program(blob[:12], 6)
