"""scripts/approx_errors.py measures what it says: on the NV model, whose ex2.approx keeps 22 significant bits, exp2 is
up to 2 ulp off and the sine tg renders stays within 2 ulp at every magnitude below pi, tiny arguments included."""
import os, pathlib, subprocess, sys

ROOT = pathlib.Path(__file__).parents[2]

def test_the_table_shows_the_models_errors():
  run = subprocess.run([sys.executable, "scripts/approx_errors.py"], cwd=ROOT, env={**os.environ, "DEV": "MOCK+NV", "N": "2000"},
                       capture_output=True, text=True, timeout=600)
  assert run.returncode == 0, run.stderr[-3000:]
  rows = {line[:30].strip(): float(line[30:].split()[0]) for line in run.stdout.splitlines()[2:]}
  assert 0.5 < rows["exp2, x in [-125, 127] (rel)"] <= 2
  assert all(u <= 2 for what, u in rows.items() if what.startswith("sin") and "1000" not in what), rows
