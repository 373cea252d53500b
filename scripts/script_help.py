"""What the scripts share: --help for the ones that take only switches (environment variables), which prints the
script's docstring, and running one side of a benchmark in a fresh process of the same script (`--worker LABEL`)."""
import json, os, subprocess, sys

def exit_on_help(doc: str | None) -> None:
  if "-h" in sys.argv[1:] or "--help" in sys.argv[1:]:
    print(doc)
    sys.exit(0)

def worker_label() -> str | None:
  """LABEL when this process was started as `script --worker LABEL`, else None."""
  return sys.argv[2] if len(sys.argv) == 3 and sys.argv[1] == "--worker" else None

def run_worker(script: str, label: str, env: dict[str, str] | None = None):
  """Runs `script --worker LABEL` in a fresh interpreter and returns the JSON value on the last line it printed; a
  failed worker raises with the end of its stderr."""
  done = subprocess.run([sys.executable, script, "--worker", label], env={**os.environ, **(env or {})}, capture_output=True, text=True)
  if done.returncode != 0: raise RuntimeError(f"{label} worker failed:\n{done.stderr[-3000:]}")
  return json.loads(done.stdout.strip().splitlines()[-1])
