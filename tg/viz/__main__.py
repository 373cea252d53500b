"""python3 -m tg.viz FILE [--port N]: serve the viewer for a saved VIZ file or Chrome trace until Ctrl-C."""
import argparse, sys
from tg.viz import serve

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python3 -m tg.viz", description="Open a file saved by VIZ (or any Chrome trace JSON) in tg's viewer.")
  ap.add_argument("file", help="tg_viz.json written at exit by a VIZ run, or a Chrome trace such as PROFILE's tg_profile.json")
  ap.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: VIZ_PORT, 8000)")
  args = ap.parse_args(argv)
  try: serve(args.port, args.file)
  except (OSError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  return 0

if __name__ == "__main__": sys.exit(main())
