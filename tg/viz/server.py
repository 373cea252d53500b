"""The viewer's web server (stdlib http.server, bound to 127.0.0.1 only): the page and its scripts from this package's
static/ folder, and the recording as JSON, a kernel's (and its schedule's) steps fetched only when the page opens it."""
from __future__ import annotations
import http.server, json, os, re
from ir.switches import VIZ_PORT

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
HOST = "127.0.0.1"

class Viewer:
  """The answers to the page's requests, for one recording."""
  def __init__(self, doc: dict, source: str):
    tg = doc["tg"]
    self.steps, self.schedule_steps = tg["steps"], tg.get("schedule_steps", [])  # files saved before the scheduler's steps have none
    self.kernels = _json({"source": source, "programs": tg["programs"], "runs": tg["runs"], "buffers": tg["buffers"], "schedules": tg["schedules"]})
    self.timeline = _json(doc["traceEvents"])
    self.trace = _json(doc)
    self.files = {name: os.path.join(STATIC, name) for name in os.listdir(STATIC)}  # only these are served
  def answer(self, path: str) -> tuple[int, str, bytes]:
    """(status, content type, body) for a GET of `path`."""
    path = path.split("?", 1)[0]
    if path in ("/", "/index.html"): path = "/static/index.html"
    if path == "/api/kernels": return 200, "application/json", self.kernels
    if path == "/api/timeline": return 200, "application/json", self.timeline
    if path == "/api/trace": return 200, "application/json", self.trace
    if (m := re.fullmatch(r"/api/program/(\d+)", path)) and int(m[1]) < len(self.steps): return 200, "application/json", _json(self.steps[int(m[1])])
    if (m := re.fullmatch(r"/api/schedule/(\d+)", path)):
      return 200, "application/json", _json(self.schedule_steps[int(m[1])] if int(m[1]) < len(self.schedule_steps) else [])
    if path.startswith("/static/") and (file := self.files.get(path[len("/static/"):])):
      with open(file, "rb") as f: return 200, CONTENT_TYPES.get(os.path.splitext(file)[1], "application/octet-stream"), f.read()
    return 404, "text/plain; charset=utf-8", f"not found: {path}".encode()

def _json(x) -> bytes: return json.dumps(x, separators=(",", ":")).encode()

def _handler(viewer: Viewer) -> type:
  class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
      status, ctype, body = viewer.answer(self.path)
      self.send_response(status)
      self.send_header("Content-Type", ctype)
      self.send_header("Content-Length", str(len(body)))
      self.send_header("Cache-Control", "no-store")
      self.end_headers()
      self.wfile.write(body)
    def log_message(self, *args): pass  # the page's requests would drown the program's own output
  return Handler

def make_server(doc: dict, source: str, port: int | None = None) -> http.server.ThreadingHTTPServer:
  """A server for `doc` on 127.0.0.1:`port` (VIZ_PORT by default; 0: any free port), not yet serving."""
  port = VIZ_PORT.value if port is None else port
  try: server = http.server.ThreadingHTTPServer((HOST, port), _handler(Viewer(doc, source)))
  except OSError as e: raise OSError(f"VIZ can't serve on {HOST}:{port} ({e.strerror}); set VIZ_PORT to a free port") from None
  server.daemon_threads = True
  return server

def serve(doc: dict, source: str, port: int | None = None) -> None:
  """Serve until Ctrl-C."""
  server = make_server(doc, source, port)
  print(f"VIZ: open http://{HOST}:{server.server_address[1]} (serving {source}; Ctrl-C to stop)", flush=True)
  try: server.serve_forever(poll_interval=0.2)
  except KeyboardInterrupt: print("VIZ: stopped")
  finally: server.server_close()
