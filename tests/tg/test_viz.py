"""VIZ: what is recorded (kernels, codegen steps, rewrites, the timeline), the saved file, the web server's answers,
and the process-level behaviour (off by default, VIZ=-1 saves only, `python3 -m tg.viz FILE` serves until Ctrl-C)."""
import json, os, signal, subprocess, sys, urllib.error, urllib.request
import numpy as np
import pytest
from ir import tracing
from ir.ops import Ops
from ir.pattern import PatternMatcher, UPat, graph_rewrite
from ir.uop import UOp
from ir.dtype import dtypes
from codegen.program import get_program
from drivers.device import Device
from tg import Tensor, Context, realize, schedule_cache
from tg.viz import capture as viz, document, trace_file
from tg.viz.server import make_server
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

@pytest.fixture
def recorded():
  """A small computation (a padded convolution, then a sum) run under VIZ on the CPU; yields its document."""
  viz.capture.clear()
  realize._runners.clear()  # kernels compiled before VIZ was on have no recorded steps
  schedule_cache._cache.clear()  # nor do schedules the scheduler made before
  with Context(VIZ=1, PROFILE=1, DEV="CPU"):
    x = Tensor(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4), device="CPU")
    y = x.conv2d(Tensor.ones(1, 1, 3, 3, device="CPU"), padding=1).relu().sum()
    value = y.item()
  yield document(), value
  viz.capture.clear()

def test_kernels_and_buffers_are_recorded(recorded):
  doc, value = recorded
  assert value == pytest.approx(float(np.sum(np.maximum(_conv_reference(), 0))))
  tg = doc["tg"]
  kernels = [r for r in tg["runs"] if r["kind"] == "kernel"]
  assert kernels and all(r["program"] is not None for r in kernels)
  for r in kernels:
    p = tg["programs"][r["program"]]
    assert p["name"] == r["name"] and p["device"] == "CPU" and r["time_s"] > 0
    assert p["ops"].get("STORE", 0) >= 1 and p["mem"] > 0
    out = tg["buffers"][r["bufs"][0]]
    assert out["nbytes"] == out["size"] * {"float": 4, "int": 4}[out["dtype"]]
  # the last kernel is the sum: a reduction to one float that reads what an earlier kernel wrote
  last = kernels[-1]
  assert "REDUCE_AXIS" in tg["programs"][last["program"]]["ops"] and tg["buffers"][last["bufs"][0]]["size"] == 1
  assert set(last["bufs"][1:]) & {b for r in kernels[:-1] for b in r["bufs"][:r["outs"]]}

def _conv_reference() -> np.ndarray:
  x = np.pad(np.arange(16, dtype=np.float64).reshape(4, 4), 1)
  return np.array([[x[i:i + 3, j:j + 3].sum() for j in range(4)] for i in range(4)])

def test_codegen_steps_match_what_codegen_produces(recorded):
  doc, _ = recorded
  tg = doc["tg"]
  prog = viz.capture.programs[-1]
  steps = {s["name"]: s for s in tg["steps"][-1]}
  assert list(steps) == ["AST", "optimize", "lower", "render", "compile"]
  nodes = prog.ast.toposort()
  assert len(steps["AST"]["graph"]["nodes"]) == len(nodes)
  assert len(steps["AST"]["graph"]["edges"]) == sum(len(u.src) for u in nodes)
  spec = get_program(prog.ast, Device["CPU"].renderer)  # codegen run again, outside VIZ, is the reference
  assert steps["render"]["text"] == spec.src
  assert steps["lower"]["info"]["uops"] == len(spec.uops)
  assert steps["optimize"]["info"]["applied opts"] == (", ".join(map(str, spec.applied_opts)) or "none")
  assert f"{spec.name}:" in steps["compile"]["text"]  # the assembly defines the kernel's symbol

def test_scheduler_steps_are_recorded_per_schedule(recorded):
  """Each schedule run keeps the scheduler's steps: the tensor graph, the graph after its reductions were rewritten,
  and one line per kernel or copy it made (as many as ran)."""
  doc, _ = recorded
  tg = doc["tg"]
  assert len(tg["schedule_steps"]) == tg["schedules"]
  for n, steps in enumerate(tg["schedule_steps"]):
    if not steps: continue  # a schedule-cache hit: the scheduler didn't run
    assert [s["name"] for s in steps] == ["scheduler graph", "scheduler reductions", "scheduler kernels"]
    assert steps[0]["graph"]["nodes"] and steps[1]["graph"]["nodes"]
    ran = [r for r in tg["runs"] if r["schedule"] == n]
    assert len(steps[2]["text"].splitlines()) == steps[2]["info"]["items"] == len(ran)
    assert [line.split()[1] for line in steps[2]["text"].splitlines()] == [r["kind"] for r in ran]
  assert any(tg["schedule_steps"])

def test_scheduler_rewrites_name_the_rule():
  """A constant factor pulled out of a float sum is a rewrite of the scheduler's, shown with its rule."""
  viz.capture.clear()
  schedule_cache._cache.clear()
  with Context(VIZ=1, DEV="CPU"): assert (Tensor(np.arange(8, dtype=np.float32), device="CPU") * 3).sum().item() == 84
  steps = {s["name"]: s for s in document()["tg"]["schedule_steps"][-1]}
  viz.capture.clear()
  fired = steps["scheduler reductions"]["fired"]
  assert any("factor_sum" in rule for rule in fired) and steps["scheduler reductions"]["rewrite_count"] >= 1, fired

def test_rewrites_name_the_rules_that_fired(recorded):
  doc, _ = recorded
  lowered = [s for steps in doc["tg"]["steps"] for s in steps if s["name"] == "lower"]
  assert sum(s["rewrite_count"] for s in lowered) > 0
  step = next(s for s in lowered if s["rewrites"])
  assert sum(step["fired"].values()) >= step["rewrite_count"]
  assert all(rule.startswith("symbolic.py:") for rule in step["fired"])
  rw = step["rewrites"][0]
  assert rw["rules"] and rw["before"]["nodes"] and rw["after"]["nodes"] and "->" in rw["text"]

def test_tracer_sees_each_rule_and_is_absent_when_off():
  x = UOp.variable("x", 0, 10)
  times_one = lambda x: x
  plus_zero = lambda x: x
  pm = PatternMatcher([(UPat.var("x") * 1, times_one), (UPat.var("x") + 0, plus_zero)])
  seen = []
  class Recorder:
    def rewrite(self, before, after, fired): seen.append((before, after, fired))
    def stage(self, name, result): pass
  assert tracing.tracer is None  # nothing installed outside a VIZ compile
  expr = UOp(Ops.ADD, dtypes.int32, (UOp(Ops.MUL, dtypes.int32, (x, UOp.const(dtypes.int32, 1))), UOp.const(dtypes.int32, 0)))
  tracing.tracer = Recorder()
  try: out = graph_rewrite(expr, pm)
  finally: tracing.tracer = None
  assert out is x and seen == [(expr, x, [times_one, plus_zero])]
  assert graph_rewrite(expr, pm) is x and len(seen) == 1

def test_timeline_has_a_track_per_device_and_queue(recorded):
  doc, _ = recorded
  events = doc["traceEvents"]
  names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
  procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
  spans = [e for e in events if e["ph"] == "X"]
  kernels = [r["name"] for r in doc["tg"]["runs"] if r["kind"] == "kernel"]
  assert [e["name"] for e in spans] == kernels  # this recording's events only, one per kernel run
  assert all(procs[e["pid"]] == "CPU" and names[(e["pid"], e["tid"])] == "compute" and e["dur"] >= 0 for e in spans)
  runs = doc["tg"]["runs"]
  for i, run in enumerate(runs):  # each run's own event, and the counters at its start
    span = next(e for e in spans if e.get("args", {}).get("run") == i)
    assert span["name"] == run["name"]
    at = {e["name"]: e["args"] for e in events if e["ph"] == "C" and e["ts"] == span["ts"] and e["pid"] == span["pid"]}
    assert at["memory in use (MB)"] == {"MB": round(run["mem_used"] / 1e6, 3)}
    flops = doc["tg"]["programs"][run["program"]]["flops"]
    assert at["GFLOPS"] == {"GFLOPS": round(flops / span["dur"] / 1e3, 3)}

def test_copies_land_on_the_copy_queue():
  viz.capture.clear()
  with Context(VIZ=1, PROFILE=1):
    Tensor([1.0, 2.0, 3.0], device="CPU").to("CPU:1").realize()
  doc = document()
  viz.capture.clear()
  copy = next(r for r in doc["tg"]["runs"] if r["kind"] == "copy")
  assert copy["name"] == "copy 12 B CPU -> CPU:1"
  threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
  span = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"].startswith("copy ")][-1]
  assert threads[(span["pid"], span["tid"])] == "copy"

def test_nothing_is_recorded_when_off():
  viz.capture.clear()
  with Context(VIZ=0):
    (Tensor([5.0, 6.0]) * 3 + 1).realize()
  assert viz.capture.runs == [] and viz.capture.programs == []

def test_saved_file_is_a_chrome_trace(recorded, tmp_path):
  doc, _ = recorded
  path = trace_file.save(doc, str(tmp_path / "t.json"))
  with open(path) as f: raw = json.load(f)
  for e in raw["traceEvents"]:  # the fields the Trace Event Format requires of each phase used
    assert e["ph"] in ("X", "M", "C") and isinstance(e["pid"], int) and isinstance(e["tid"], int) and isinstance(e["name"], str)
    if e["ph"] == "X": assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0
    if e["ph"] == "C": assert isinstance(e["ts"], (int, float)) and all(isinstance(v, (int, float)) for v in e["args"].values())
  assert trace_file.load(path) == raw
  assert sorted(os.listdir(tmp_path)) == ["t.json"]

def test_loading_bad_files_names_them(tmp_path):
  bad = tmp_path / "bad.json"
  bad.write_text("{not json")
  with pytest.raises(ValueError, match="bad.json.*invalid JSON"): trace_file.load(str(bad))
  bad.write_text('{"events": []}')
  with pytest.raises(ValueError, match="bad.json.*no traceEvents"): trace_file.load(str(bad))
  plain = tmp_path / "plain.json"  # PROFILE's own trace, the array form
  plain.write_text(json.dumps([{"name": "k", "ph": "X", "ts": 1, "dur": 2, "pid": "CPU", "tid": 0}]))
  assert trace_file.load(str(plain))["tg"]["runs"] == []

def _get(port: int, path: str) -> tuple[int, str, bytes]:
  try:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r: return r.status, r.headers["Content-Type"], r.read()
  except urllib.error.HTTPError as e: return e.code, e.headers["Content-Type"], e.read()

@pytest.fixture
def server(recorded):
  doc, _ = recorded
  srv = make_server(doc, "test run", 0)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  yield srv.server_address[1], doc
  srv.shutdown()
  srv.server_close()

def test_http_endpoints(server):
  port, doc = server
  status, ctype, body = _get(port, "/")
  assert status == 200 and ctype.startswith("text/html") and b'src="/static/main.js"' in body
  for name in ("main.js", "graph.js", "timeline.js", "vlist.js", "viz.css"):
    status, _, body = _get(port, f"/static/{name}")
    assert status == 200 and body == open(os.path.join(ROOT, "tg", "viz", "static", name), "rb").read()
  status, ctype, body = _get(port, "/api/kernels")
  kernels = json.loads(body)
  assert status == 200 and ctype == "application/json" and kernels["runs"] == doc["tg"]["runs"] and kernels["source"] == "test run"
  assert json.loads(_get(port, "/api/program/0")[2]) == doc["tg"]["steps"][0]
  assert json.loads(_get(port, "/api/timeline")[2]) == doc["traceEvents"]
  assert _get(port, f"/api/program/{len(doc['tg']['steps'])}")[0] == 404
  assert _get(port, "/static/../capture.py")[0] == 404 and _get(port, "/static/%2e%2e/capture.py")[0] == 404

def test_port_in_use_is_named(server):
  port, doc = server
  with pytest.raises(OSError, match=f"127.0.0.1:{port}.*VIZ_PORT"): make_server(doc, "again", port)

def _run(code: str, env: dict, timeout: int = 120) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout)

def test_viz_off_exits_at_once_and_viz_minus_one_saves(tmp_path):
  code = "from tg import Tensor; print((Tensor([1.0, 2.0]) + 1).tolist())"
  off = _run(code, {"VIZ": "0", "TMPDIR": str(tmp_path)})
  assert off.returncode == 0 and "VIZ" not in off.stderr and not (tmp_path / "tg_viz.json").exists()
  saved = _run(code, {"VIZ": "-1", "TMPDIR": str(tmp_path)})
  assert saved.returncode == 0 and f"VIZ: saved {tmp_path / 'tg_viz.json'}" in saved.stderr
  runs = trace_file.load(str(tmp_path / "tg_viz.json"))["tg"]["runs"]
  assert [r["kind"] for r in runs] == ["kernel"]

def test_module_serves_a_saved_file_until_interrupted(recorded, tmp_path):
  doc, _ = recorded
  path = trace_file.save(doc, str(tmp_path / "saved.json"))
  proc = subprocess.Popen([sys.executable, "-m", "tg.viz", path, "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=_ctrl_c_as_in_a_terminal)
  try:
    port = _serving(proc)
    assert json.loads(_get(port, "/api/kernels")[2])["runs"] == doc["tg"]["runs"]
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0 and "VIZ: stopped" in out
  finally: proc.kill() if proc.poll() is None else None

def _ctrl_c_as_in_a_terminal() -> None:
  """In the child: SIGINT's default action, as a shell gives a program. A process started while SIGINT is ignored
  inherits that, and Python then never raises KeyboardInterrupt, so the child would serve on: the whole suite's process
  was seen with SIGINT ignored by the time these tests ran (what ignores it there is not known yet)."""
  signal.signal(signal.SIGINT, signal.SIG_DFL)

def _serving(proc: subprocess.Popen) -> int:
  """The port a VIZ server says it serves on (its first line of output)."""
  line = proc.stdout.readline()
  assert "VIZ: open http://127.0.0.1:" in line, line
  return int(line.split("127.0.0.1:")[1].split()[0])

def test_viz_one_serves_at_exit_until_interrupted(tmp_path):
  code = "from tg import Tensor; (Tensor([1.0, 2.0]) * 2).realize()"
  proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "VIZ": "1", "VIZ_PORT": "0", "TMPDIR": str(tmp_path)},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_as_in_a_terminal)
  try:
    port = _serving(proc)
    assert [r["kind"] for r in json.loads(_get(port, "/api/kernels")[2])["runs"]] == ["kernel"]
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0 and "VIZ: stopped" in out and f"VIZ: saved {tmp_path / 'tg_viz.json'}" in err
  finally: proc.kill() if proc.poll() is None else None

def test_module_refuses_a_bad_file(tmp_path):
  bad = tmp_path / "nope.json"
  bad.write_text("[1, 2")
  run = subprocess.run([sys.executable, "-m", "tg.viz", str(bad)], cwd=ROOT, capture_output=True, text=True, timeout=60)
  assert run.returncode == 1 and "nope.json is not a VIZ file" in run.stderr
