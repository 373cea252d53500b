"""--help for the scripts that take only switches (environment variables): prints the script's docstring."""
import sys

def exit_on_help(doc: str | None) -> None:
  if "-h" in sys.argv[1:] or "--help" in sys.argv[1:]:
    print(doc)
    sys.exit(0)
