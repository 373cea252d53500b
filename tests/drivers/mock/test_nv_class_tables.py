"""The NV model's tables of NVIDIA's class headers (drivers/mock/nv/class_headers.py) against the driver's
(drivers/nv/qmd.py, drivers/nv/pushbuf.py), bit for bit: field positions and shifts, method offsets, packed method
fields, and values the driver encodes decoded by the model. Both were transcribed from the headers separately, so a
disagreement is a transcription error on one side (the header decides which)."""
import ast, inspect, random
from types import SimpleNamespace
import pytest
from drivers.mock.nv import class_headers as hw, gpu
from drivers.nv import pushbuf as pb, qmd, rm_abi as rm
from drivers.nv.device import NVDevice

VERSIONS = list(hw.QMDS)

@pytest.mark.parametrize("version", VERSIONS)
def test_model_qmd_fields_are_disjoint_and_inside_the_descriptor(version):
  f = hw.QMDS[version]
  owner: dict[int, str] = {}
  for name, bits in f.fields.items():
    assert 0 <= bits.lo <= bits.hi < f.size * 8, name
    for b in range(bits.lo, bits.hi + 1):
      assert b not in owner, f"{name} overlaps {owner[b]} at bit {b}"
      owner[b] = name

@pytest.mark.parametrize("version", VERSIONS)
def test_every_driver_qmd_field_has_the_headers_bits_and_shift(version):
  model, driver = hw.QMDS[version], qmd.QMD_LAYOUTS[version]
  assert (driver.size, driver.major, driver.minor) == (model.size, model.major, model.minor)
  assert set(driver.fields) == set(model.values)  # the same values named on both sides, none missing
  for name, field in driver.fields.items():
    parts, shift = model.values[name]
    assert field.parts == tuple((model.fields[p].hi, model.fields[p].lo) for p in parts), (name, parts)
    assert field.shift == shift, name

@pytest.mark.parametrize("version", VERSIONS)
def test_encode_with_the_driver_decode_with_the_model(version):
  driver, model = qmd.QMD_LAYOUTS[version], hw.QMDS[version]
  rng = random.Random(version)
  for _ in range(20):
    values = {name: rng.getrandbits(f.width) << f.shift for name, f in driver.fields.items()}
    assert model.decode(qmd.encode(driver, **values)) == values
  for name, f in driver.fields.items():  # one field at a time: no other value may see its bits
    one = model.decode(qmd.encode(driver, **{name: ((1 << f.width) - 1) << f.shift}))
    assert {k for k, v in one.items() if v} == {name}, name

def test_qmd_versions_and_enumerations():
  for cls, version in hw.QMD_OF_CLASS.items(): assert qmd.qmd_version_for_class(cls) == version
  assert (qmd.QMD_TYPE_GRID_CTA, qmd.DEPENDENT_QMD_SCHEDULE) == (hw.QMD_TYPE_GRID_CTA, hw.DEPENDENT_QMD_ACTION_SCHEDULE)
  assert (qmd.RELEASE_FOUR_WORDS, qmd.RELEASE_ONE_WORD, qmd.RELEASE_TWO_WORDS) == (hw.RELEASE_FOUR_WORDS, hw.RELEASE_ONE_WORD, hw.RELEASE_TWO_WORDS)

def test_shared_allocation_enable_bits():
  # clc6c0qmd.h MW(663:663), clcbc0qmd.h MW(626:626), clcdc0qmd.h MW(351:351): right after TARGET_SM_CONFIG on V03/V04
  assert [hw.QMDS[v].fields["SHARED_ALLOCATION_ENABLE"] for v in VERSIONS] == [(663, 663), (626, 626), (351, 351)]
  assert [qmd.QMD_LAYOUTS[v].fields["shared_allocation_enable"].parts for v in VERSIONS] == [((663, 663),), ((626, 626),), ((351, 351),)]

def test_class_ids_match_the_rm_abi():
  for cls, fmt in hw.CLASSES.items(): assert getattr(rm, fmt.name) == cls, fmt.name
  for arch in gpu.ARCHS.values():  # every class the model's GPUs list has tables
    assert {*arch.gpfifo, arch.compute, arch.dma} <= hw.CLASSES.keys()

def _driver_methods(ns) -> dict[str, int]: return {k: v for k, v in vars(ns).items() if k.isupper()}
# methods the driver names that a class's header lacks (clc6b5.h has no SET_SEMAPHORE_PAYLOAD_UPPER)
ABSENT = {(0xc6b5, "SET_SEMAPHORE_PAYLOAD_UPPER")}

@pytest.mark.parametrize("engine, names", [("host", pb.Host), ("compute", pb.Compute), ("copy", pb.Copy)])
def test_method_offsets(engine, names):
  for fmt in (c for c in hw.CLASSES.values() if c.engine == engine):
    for name, offset in _driver_methods(names).items():
      key = "LOAD_INLINE_QMD_DATA(0)" if name == "LOAD_INLINE_QMD_DATA" else name
      if (fmt.cls, name) in ABSENT: assert key not in fmt.methods
      else: assert fmt.offset(key) == offset, (hex(fmt.cls), name)

def test_driver_subchannels_and_method_header():
  assert (pb.INCREMENTING, pb.NON_INCREMENTING, pb.IMMEDIATE, pb.INCREMENT_ONCE) == (hw.SEC_INC_METHOD, hw.SEC_NON_INC_METHOD, hw.SEC_IMMD_DATA_METHOD, hw.SEC_ONE_INC)
  rng = random.Random(1)
  words, want = [], []
  for _ in range(300):
    subc, offset, op = rng.randrange(8), rng.randrange(0x1000) * 4, rng.choice([pb.INCREMENTING, pb.NON_INCREMENTING, pb.INCREMENT_ONCE, pb.IMMEDIATE])
    if op == pb.IMMEDIATE:
      value = rng.randrange(0x2000)
      words += pb.immediate(subc, offset, value)
      want.append((subc, offset, value))
      continue
    data = [rng.getrandbits(32) for _ in range(rng.randrange(1, 6))]
    words += pb.method(subc, offset, *data, opcode=op)
    step = {pb.INCREMENTING: lambda k: k, pb.NON_INCREMENTING: lambda k: 0, pb.INCREMENT_ONCE: lambda k: min(k, 1)}[op]
    want += [(subc, offset + 4 * step(k), d) for k, d in enumerate(data)]
  assert list(hw.method_writes(words)) == want

def test_model_push_buffer_control_entries():
  inc = pb.method(1, 0x400, 7, 8)
  assert list(hw.method_writes([hw.DMA_NOP, 0x0001_0010, *inc])) == [(1, 0x400, 7), (1, 0x404, 8)]  # NOP and SET_SUBDEVICE_MASK: nothing
  assert list(hw.method_writes([*inc, 7 << 29, *inc])) == [(1, 0x400, 7), (1, 0x404, 8)]  # END_PB_SEGMENT: the rest is not decoded
  for bad in (2 << 29 | 1 << 16, 6 << 29, 0x0000_0100):  # old-style non-incrementing, RESERVED6, SEC_OP 0 TERT_OP 0 other than NOP
    with pytest.raises(hw.PushBufferError, match="no method header"): list(hw.method_writes([bad, 0]))
  with pytest.raises(hw.PushBufferError, match="wants 2 dwords, 1 left"): list(hw.method_writes(inc[:2]))

def test_gpfifo_entries():
  rng = random.Random(2)
  for _ in range(500):
    address, length = rng.randrange(1 << 38) * 4, rng.randrange(1, 1 << 21)
    level, sync, fetch = rng.randrange(2), rng.randrange(2), rng.randrange(2)
    e = hw.gp_entry(pb.gpfifo_entry(address, length, subroutine=bool(level), sync=bool(sync), conditional=bool(fetch)))
    assert (e.address, e.length, e.level, e.sync, e.fetch) == (address, length, level, sync, fetch)

def test_an_empty_push_buffer_is_a_nop_control_entry():
  # LENGTH 0 makes a control entry whose OPCODE is GET_HI (VA bits 39:32): a buffer at 0x2_0000_1000 was GP_CRC (2)
  for address in (0x2_0000_1000, 0x1_0000_0000, 0xff_ffff_fffc, 0x1000):
    e = hw.gp_entry(pb.gpfifo_entry(address, 0))
    assert (e.length, e.opcode) == (0, hw.GP_OPCODE["NOP"]), hex(address)
  assert hw.gp_entry(pb.gpfifo_entry(0x2_0000_1000, 0, sync=True)).sync == 1

def test_userd_words():
  assert pb.USERD_SIZE == hw.USERD_BYTES
  for cls, words in hw.USERD.items(): assert (words["GP_GET"], words["GP_PUT"]) == (pb.USERD_GP_GET, pb.USERD_GP_PUT), hex(cls)

SEM_EXECUTE = {"operation": "OPERATION", "switch_tsg": "ACQUIRE_SWITCH_TSG", "wfi": "RELEASE_WFI", "payload64": "PAYLOAD_SIZE", "timestamp": "RELEASE_TIMESTAMP"}
LAUNCH_DMA = {"transfer": "DATA_TRANSFER_TYPE", "flush": "FLUSH_ENABLE", "semaphore": "SEMAPHORE_TYPE", "src_pitch": "SRC_MEMORY_LAYOUT",
              "dst_pitch": "DST_MEMORY_LAYOUT", "multi_line": "MULTI_LINE_ENABLE", "src_physical": "SRC_TYPE", "dst_physical": "DST_TYPE",
              "payload64": "SEMAPHORE_PAYLOAD_SIZE"}

def test_sem_execute_fields_and_values():
  assert [pb.SEM_ACQUIRE, pb.SEM_RELEASE, pb.SEM_ACQ_STRICT_GEQ, pb.SEM_ACQ_CIRC_GEQ, pb.SEM_ACQ_AND, pb.SEM_ACQ_NOR, pb.SEM_REDUCTION] == \
         [hw.SEM_ACQUIRE, hw.SEM_RELEASE, hw.SEM_ACQ_STRICT_GEQ, hw.SEM_ACQ_CIRC_GEQ, hw.SEM_ACQ_AND, hw.SEM_ACQ_NOR, hw.SEM_REDUCTION]
  rng = random.Random(3)
  for fmt in hw.HOST_CLASSES.values():
    fields = fmt.methods["SEM_EXECUTE"].fields
    for name, (hi, lo) in pb.SEM_EXECUTE_FIELDS.items(): assert fields[SEM_EXECUTE[name]] == (hi, lo), (hex(fmt.cls), name)
    for _ in range(50):
      kw = dict(operation=rng.randrange(7), payload64=rng.random() < .5, timestamp=rng.random() < .5, wfi=rng.random() < .5, switch_tsg=rng.random() < .5)
      value = pb.sem_execute(**kw)
      assert {k: fmt.get("SEM_EXECUTE", SEM_EXECUTE[k], value) for k in kw} == {k: int(v) for k, v in kw.items()}

def test_launch_dma_fields_and_values():
  assert (pb.DMA_TRANSFER_NONE, pb.DMA_PIPELINED, pb.DMA_NON_PIPELINED) == (hw.DMA_TRANSFER_NONE, hw.DMA_TRANSFER_PIPELINED, hw.DMA_TRANSFER_NON_PIPELINED)
  assert (pb.DMA_SEM_NONE, pb.DMA_SEM_ONE_WORD, pb.DMA_SEM_FOUR_WORD) == (hw.DMA_SEMAPHORE_NONE, hw.DMA_SEMAPHORE_ONE_WORD, hw.DMA_SEMAPHORE_FOUR_WORD)
  rng = random.Random(4)
  for fmt in hw.COPY_CLASSES.values():
    fields = fmt.methods["LAUNCH_DMA"].fields
    for name, (hi, lo) in pb.LAUNCH_DMA_FIELDS.items():
      if name == "payload64" and fmt.cls == rm.AMPERE_DMA_COPY_A: assert "SEMAPHORE_PAYLOAD_SIZE" not in fields  # reserved bit on c6b5
      else: assert fields[LAUNCH_DMA[name]] == (hi, lo), (hex(fmt.cls), name)
    for _ in range(50):
      kw = {k: rng.random() < .5 for k in LAUNCH_DMA if k not in ("transfer", "semaphore")} | dict(transfer=rng.randrange(3), semaphore=rng.randrange(4))
      value = pb.launch_dma(**kw)
      assert {k: fmt.get("LAUNCH_DMA", LAUNCH_DMA[k], value) for k in kw if LAUNCH_DMA[k] in fields} == {k: int(v) for k, v in kw.items() if LAUNCH_DMA[k] in fields}
  # the copy the driver launches: non-pipelined, flushed, pitch to pitch, virtual, no semaphore
  c8b5 = hw.COPY_CLASSES[rm.HOPPER_DMA_COPY_A]
  value = pb.launch_dma(transfer=pb.DMA_NON_PIPELINED, flush=True, src_pitch=True, dst_pitch=True)
  assert {k: v for k, v in ((n, c8b5.get("LAUNCH_DMA", n, value)) for n in c8b5.methods["LAUNCH_DMA"].fields) if v} == \
         {"DATA_TRANSFER_TYPE": hw.DMA_TRANSFER_NON_PIPELINED, "FLUSH_ENABLE": 1, "SRC_MEMORY_LAYOUT": hw.DMA_LAYOUT_PITCH, "DST_MEMORY_LAYOUT": hw.DMA_LAYOUT_PITCH}

def test_compute_method_values():
  named = {"NOP": pb.PCAS_NOP, "INVALIDATE": pb.PCAS_INVALIDATE, "SCHEDULE": pb.PCAS_SCHEDULE, "INVALIDATE_COPY_SCHEDULE": pb.PCAS_INVALIDATE_COPY_SCHEDULE,
           "INCREMENT_PUT": pb.PCAS_INCREMENT_PUT, "DECREMENT_DEPENDENCE": pb.PCAS_DECREMENT_DEPENDENCE, "PREFETCH": pb.PCAS_PREFETCH,
           "PREFETCH_SCHEDULE": pb.PCAS_PREFETCH_SCHEDULE, "INVALIDATE_PREFETCH_COPY_SCHEDULE": pb.PCAS_INVALIDATE_PREFETCH_COPY_SCHEDULE,
           "INVALIDATE_PREFETCH_COPY_FORCE_REQUIRE_SCHEDULING": pb.PCAS_INVALIDATE_PREFETCH_COPY_FORCE_REQUIRE_SCHEDULING}
  assert all(hw.PCAS_ACTION[k] == v for k, v in named.items())
  assert pb.PCAS_PREFETCH_SCHEDULE in gpu.LAUNCH_ACTIONS  # what the driver's launches send
  for fmt in hw.COMPUTE_CLASSES.values():
    inv = fmt.methods["INVALIDATE_SHADER_CACHES_NO_WFI"].fields
    assert (pb.INVALIDATE_INSTRUCTION, pb.INVALIDATE_GLOBAL_DATA, pb.INVALIDATE_CONSTANT) == tuple(inv[n].put(1) for n in ("INSTRUCTION", "GLOBAL_DATA", "CONSTANT"))
    if fmt.has("SET_INLINE_QMD_ADDRESS_A", "INLINE_SIZE"): assert pb.INLINE_QMD_384 == fmt.methods["SET_INLINE_QMD_ADDRESS_A"].fields["INLINE_SIZE"].put(hw.INLINE_384)
    assert fmt.has("SEND_SIGNALING_PCAS2_B", "SELECT") == (fmt.cls != rm.AMPERE_COMPUTE_A)  # SELECT/OFFSET_MINUS_ONE from c7c0 on

def test_hopper_local_memory_fields():
  # NON_THROTTLED_A SIZE_UPPER 7:0, B SIZE_LOWER 31:0, C MAX_SM_COUNT 8:0 on every class; from cbc0 on C also has
  # MAX_PLURAL_TPC_GPC_COUNT 23:16 and MAX_SINGLETON_TPC_GPC_COUNT 31:24, which the driver's C = 0xFF leaves 0 (as NVK does)
  for fmt in hw.COMPUTE_CLASSES.values():
    m = fmt.methods
    assert (m["SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A"].fields["SIZE_UPPER"], m["SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B"].fields["SIZE_LOWER"]) == ((7, 0), (31, 0))
    c = {k: fmt.get("SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C", k, 0xFF) for k in m["SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C"].fields}
    hopper = fmt.cls >= rm.HOPPER_COMPUTE_A
    assert c == ({"MAX_SM_COUNT": 0xFF} | ({"MAX_PLURAL_TPC_GPC_COUNT": 0, "MAX_SINGLETON_TPC_GPC_COUNT": 0} if hopper else {}))
    assert m["SET_SHADER_LOCAL_MEMORY_A"].fields["ADDRESS_UPPER"] == ((24, 0) if hopper else (16, 0))

@pytest.mark.parametrize("sm", [80, 86, 89, 90, 100])
def test_shared_memory_carveout_codes_fit_the_qmd(sm):
  # MIN/MAX/TARGET_SM_CONFIG_SHARED_MEM_SIZE are 6-bit codes (KiB / 4 + 1, as NVK's gv100_sm_config_smem_size): the target's
  # carve-out must hold the kernel's shared memory, within min..max
  dev = SimpleNamespace(sm=sm, gr={"max_warps_per_sm": 64})
  max_kb = None
  for shared in (0, 1, 0x400, 0x2000, 0x8001, 48 << 10, 99 << 10, 100 << 10, 160 << 10, 227 << 10):
    codes = NVDevice.shared_memory_config(dev, shared)
    lo, target, hi = (codes[f"{k}_sm_config_shared_mem_size"] for k in ("min", "target", "max"))
    for version in VERSIONS:
      for k in ("MIN", "TARGET", "MAX"): assert hw.QMDS[version].fields[f"{k}_SM_CONFIG_SHARED_MEM_SIZE"].width == 6
    assert 0 < lo <= target <= hi < 64
    max_kb = (hi - 1) * 4
    if shared <= max_kb << 10: assert (target - 1) * 4 << 10 >= shared, (sm, shared, codes)
  assert max_kb == {80: 164, 86: 100, 89: 100, 90: 228, 100: 228}[sm]  # the largest carve-out of each SM (CUDA guide, compute capabilities)

def test_the_carveout_holds_as_many_blocks_as_warps_and_registers_allow():
  dev = SimpleNamespace(sm=90, gr={"max_warps_per_sm": 64})
  target = lambda *kernel: (NVDevice.shared_memory_config(dev, *kernel)["target_sm_config_shared_mem_size"] - 1) * 4
  # the H200's tensor-core matmul: 5 KiB, 128 threads, 168 registers: 65536 // (168 * 128) = 3 blocks need 15 KiB
  assert target(5120, 128, 168) == 16
  assert target(0, 256, 32) == 8  # no shared memory: the smallest carve-out, the most L1
  assert target(5120, 64, 16) == 164  # 32 blocks (the most an SM runs) of 5 KiB
  assert target(100 << 10, 1024, 32) == 228  # two 1024-thread blocks (the SM's 64 warps): 200 KiB
  assert target(150 << 10, 1024, 32) == 228  # two would need 300 KiB: the largest carve-out, one block

def test_the_gpu_model_reads_no_driver_table():
  tree = ast.parse(inspect.getsource(gpu))
  imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
  imported |= {f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
  assert not {m for m in imported if m.startswith(("drivers.nv.qmd", "drivers.nv.pushbuf"))}, imported

def test_the_model_runs_what_the_driver_encodes():
  """A Hopper channel in the GPU model, fed push buffers and GPFIFO entries built by drivers/nv/pushbuf.py."""
  g = gpu.GPU(gpu.ARCHS["hopper"])
  mem, va = gpu.Memory(0x10000), 0x2_0000_0000
  g.map(va, mem.size, mem, 0)
  ring, userd, pushes, sem = va, 0x1000, va + 0x2000, va + 0x8000
  ch = gpu.Channel("test", rm.HOPPER_CHANNEL_GPFIFO_A, 1, ring, 16, mem, userd, gpu.Memory(0x1000), gpu.Tsg(True))
  g.add_channel(ch)
  put, at = 0, pushes
  def submit(entry: int | None = None, *words: int) -> None:
    nonlocal put, at
    g.view(at, 4 * len(words))[:] = b"".join(w.to_bytes(4, "little") for w in words)
    g.write(ring + 8 * put, pb.gpfifo_entry(at, len(words)) if entry is None else entry, 64)
    put, at = put + 1, at + 4 * len(words)
    ch.userd_word(pb.USERD_GP_PUT)[0] = put
    g.step(ch)
  def release(value: int) -> list[int]:
    return pb.method(pb.SUBC_HOST, pb.Host.SEM_ADDR_LO, sem & 0xffffffff, sem >> 32, value, 0, pb.sem_execute(pb.SEM_RELEASE, payload64=True))
  submit(None, *release(5))
  assert (g.read(sem, 64), ch.userd_word(pb.USERD_GP_GET)[0], g.faults) == (5, 1, [])
  submit(pb.gpfifo_entry(0x2_0000_1000, 0))  # an empty push buffer: a NOP control entry
  submit(None, *release(6), 7 << 29, *release(7))  # END_PB_SEGMENT: what follows it is not run
  assert (g.read(sem, 64), ch.userd_word(pb.USERD_GP_GET)[0], g.faults) == (6, 3, [])
  submit(2 << 32)  # LENGTH 0 with OPCODE GP_CRC: not a push buffer, and not modelled
  assert ch.faulted and "control entry with opcode 2" in g.faults[-1] and ch.userd_word(pb.USERD_GP_GET)[0] == 3
  g.remove_channel(ch)
  g.unmap(va, mem.size)
  mem.free()
