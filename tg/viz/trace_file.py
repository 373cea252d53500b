"""The file VIZ saves and `python3 -m tg.viz FILE` opens: a Chrome trace (the JSON object form, so chrome://tracing
and Perfetto open it: they show `traceEvents`, one process per device and one thread per queue) whose extra key "tg"
holds the kernels, buffers and rewrite steps, which trace viewers keep as metadata and ignore. A plain Chrome trace
(PROFILE's tg_profile.json) opens too, as a timeline alone."""
from __future__ import annotations
import json, os, tempfile
from tg.viz.capture import Capture

FORMAT_VERSION = 1
DEFAULT_NAME = "tg_viz.json"

def queue_of(event_name: str) -> str:
  """The engine an HCQ profile event ran on: copies on the copy queue, kernels on the compute queue."""
  return "copy" if event_name.startswith("copy ") else "compute"

def timeline_events(events, runs: list[dict] = (), programs: list[dict] = ()) -> list[dict]:
  """Chrome trace events for drivers.hcq's ProfileEvents: a process per device and a thread per queue, named by
  metadata events, and one complete ("X") event per kernel or copy (times in microseconds; args.run: the recorded run
  it was); counters ("C") of the memory in use and each kernel's GFLOPS at the runs' starts."""
  pids: dict[str, int] = {}
  tids: dict[tuple[str, str], int] = {}
  run_of = {r["event"]: i for i, r in enumerate(runs) if r.get("event") is not None}
  out: list[dict] = []
  for n, e in enumerate(events):
    if e.device not in pids:
      pids[e.device] = len(pids) + 1
      out.append({"name": "process_name", "ph": "M", "pid": pids[e.device], "tid": 0, "args": {"name": e.device}})
    key = (e.device, queue_of(e.name))
    if key not in tids:
      tids[key] = len(tids) + 1
      out.append({"name": "thread_name", "ph": "M", "pid": pids[e.device], "tid": tids[key], "args": {"name": key[1]}})
    span = {"name": e.name, "ph": "X", "ts": e.start_us, "dur": max(e.end_us - e.start_us, 0.0), "pid": pids[e.device], "tid": tids[key], "cat": key[1]}
    if (i := run_of.get(n)) is not None:
      span["args"] = {"run": i}
      out.extend(_counters(runs[i], programs, span))
    out.append(span)
  return out

def _counters(run: dict, programs: list[dict], span: dict) -> list[dict]:
  at = {"ph": "C", "ts": span["ts"], "pid": span["pid"], "tid": 0}
  out = [{"name": "memory in use (MB)", **at, "args": {"MB": round(run["mem_used"] / 1e6, 3)}}]
  if run["program"] is not None and span["dur"] > 0:
    out.append({"name": "GFLOPS", **at, "args": {"GFLOPS": round(programs[run["program"]]["flops"] / span["dur"] / 1e3, 3)}})
  return out

def document(capture: Capture, events) -> dict:
  """The whole recording as one JSON-able object."""
  programs = [p.summary for p in capture.programs]
  return {"traceEvents": timeline_events(events, capture.runs, programs), "displayTimeUnit": "ns",
          "tg": {"version": FORMAT_VERSION, "programs": programs, "steps": [p.steps for p in capture.programs],
                 "schedule_steps": capture.schedule_steps, "runs": capture.runs, "buffers": capture.buffers, "schedules": capture.schedules}}

def default_path() -> str: return os.path.join(tempfile.gettempdir(), DEFAULT_NAME)

def save(doc: dict, path: str | None = None) -> str:
  """Write `doc` to `path` (the temp folder's tg_viz.json by default) through a temporary file, so no half-written
  file is left behind; returns the path."""
  path = path or default_path()
  tmp = f"{path}.{os.getpid()}.tmp"
  try:
    with open(tmp, "w") as f: json.dump(doc, f, separators=(",", ":"))
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp): os.unlink(tmp)
  return path

def load(path: str) -> dict:
  """A saved VIZ file or any Chrome trace (object or array form); ValueError naming the file when it is neither."""
  try:
    with open(path) as f: doc = json.load(f)
  except json.JSONDecodeError as e: raise ValueError(f"{path} is not a VIZ file or Chrome trace: invalid JSON at offset {e.pos}: {e.msg}") from None
  if isinstance(doc, list): doc = {"traceEvents": doc}
  if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
    raise ValueError(f"{path} is not a VIZ file or Chrome trace: it has no traceEvents list")
  tg = doc.get("tg")
  if tg is None: doc["tg"] = {"version": FORMAT_VERSION, "programs": [], "steps": [], "schedule_steps": [], "runs": [], "buffers": [], "schedules": 0}
  elif not isinstance(tg, dict) or tg.get("version") != FORMAT_VERSION:
    raise ValueError(f"{path}: its tg data is not VIZ format version {FORMAT_VERSION}")
  return doc
