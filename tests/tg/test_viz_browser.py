"""The VIZ page in a real headless browser (Debian's chromium; .ci/run installs it): the kernel list, a codegen step's
graph and the timeline render, 10k kernels stay a virtualized list that loads quickly, and a screenshot is kept."""
import copy, json, re, shutil, subprocess, threading, time, urllib.parse
import pytest
from tests.tg.test_viz import recorded  # noqa: F401 (the fixture: a small computation recorded under VIZ)
from tg.viz import trace_file
from tg.viz.server import make_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium for the headless browser test (.ci/run installs it when run as root)")
BUDGET_MS = 10000  # virtual time the page gets to fetch and render (chromium ends early once nothing is pending)

def browse(doc: dict, fragment: str, profile_dir, *outputs: str) -> tuple[str, float]:
  """Serve `doc`, open the page in headless chromium at #fragment; returns the DOM it rendered and the wall time the
  browser took, start-up included."""
  srv = make_server(doc, "browser test", 0)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  try:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           f"--user-data-dir={profile_dir}", "--window-size=1400,900", f"--virtual-time-budget={BUDGET_MS}", *outputs,
           f"http://127.0.0.1:{srv.server_address[1]}/#{fragment}"]
    st = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout, time.perf_counter() - st
  finally:
    srv.shutdown()
    srv.server_close()

def marks(dom: str) -> dict[str, str]:
  """What the page says it rendered (main.js writes it into #rendered)."""
  found = re.search(r'<div id="rendered"[^>]*>([^<]*)</div>', dom)
  assert found, dom[:2000]
  return {k: urllib.parse.unquote(v) for k, v in (kv.split("=", 1) for kv in found[1].split())}

def test_page_renders_kernels_a_step_and_the_timeline(recorded, tmp_path):  # noqa: F811
  doc, _ = recorded
  last = len(doc["tg"]["runs"]) - 1
  dom, _ = browse(doc, f"kernel={last}&step=lower", tmp_path / "profile", "--dump-dom")
  seen = marks(dom)
  assert "error" not in seen, seen
  assert seen["kernels"] == str(len(doc["tg"]["runs"])) and seen["rows"] == seen["kernels"]
  assert seen["selected"] == str(last) and seen["step"] == "lower"
  lowered = next(s for s in doc["tg"]["steps"][doc["tg"]["runs"][last]["program"]] if s["name"] == "lower")
  assert seen["graphnodes"] == str(len(lowered["graph"]["nodes"]))
  assert seen["timeline"] == str(sum(e["ph"] == "X" for e in doc["traceEvents"]))
  assert seen["counters"] == "2" and seen["highlighted"] == str(last)  # memory and GFLOPS tracks; the kernel's event marked
  shot = tmp_path / "viz.png"
  browse(doc, f"kernel={last}&step=lower", tmp_path / "profile", f"--screenshot={shot}")
  assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  print(f"VIZ screenshot: {shot}")

def test_a_schedule_step_of_the_scheduler_renders(recorded, tmp_path):  # noqa: F811
  doc, _ = recorded
  last = len(doc["tg"]["runs"]) - 1
  steps = doc["tg"]["schedule_steps"][doc["tg"]["runs"][last]["schedule"]]
  assert steps, "the fixture's schedule was made by the scheduler (not taken from its cache)"
  dom, _ = browse(doc, f"kernel={last}&step=scheduler%20graph", tmp_path / "profile", "--dump-dom")
  seen = marks(dom)
  assert "error" not in seen, seen
  assert seen["step"] == "scheduler graph" and seen["graphnodes"] == str(len(steps[0]["graph"]["nodes"]))

def test_ten_thousand_kernels_stay_responsive(recorded, tmp_path):  # noqa: F811
  doc, _ = recorded
  big = copy.deepcopy(doc)
  runs, spans = doc["tg"]["runs"], [e for e in doc["traceEvents"] if e["ph"] == "X"]
  big["tg"]["runs"] = [dict(runs[i % len(runs)], schedule=i // 100) for i in range(10000)]
  meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
  big["traceEvents"] = meta + [dict(spans[i % len(spans)], ts=10.0 * i, dur=8.0, args={"run": i}) for i in range(10000)]
  _, small_s = browse(doc, "kernel=0&step=schedule", tmp_path / "profile", "--dump-dom")
  dom, big_s = browse(big, "kernel=9999&step=schedule", tmp_path / "profile", "--dump-dom")
  seen = marks(dom)
  assert "error" not in seen, seen
  assert seen["kernels"] == "10000" and seen["timeline"] == "10000" and seen["selected"] == seen["highlighted"] == "9999"
  assert int(seen["rows"]) < 100  # only the rows in view exist
  print(f"VIZ page in headless chromium, start-up included: {small_s:.2f} s for {len(runs)} kernels, {big_s:.2f} s for 10000 kernels and 10000 timeline events")
  assert big_s < small_s + 5

def test_a_plain_profile_trace_shows_its_timeline(tmp_path):
  plain = tmp_path / "tg_profile.json"  # the form PROFILE=1 writes by itself: string pids, no tg data
  plain.write_text(json.dumps({"traceEvents": [{"name": f"k{i}", "ph": "X", "ts": 5.0 * i, "dur": 4.0, "pid": "NV", "tid": 0} for i in range(7)]}))
  dom, _ = browse(trace_file.load(str(plain)), "", tmp_path / "profile", "--dump-dom")
  seen = marks(dom)
  assert "error" not in seen and seen["kernels"] == "0" and seen["timeline"] == "7"
