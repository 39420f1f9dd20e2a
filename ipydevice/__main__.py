"""``python -m ipydevice demo``: command-line entry points."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Parses the command line and runs the chosen command."""
    parser = argparse.ArgumentParser(prog="python -m ipydevice", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "demo", help="a terminal tour of the classic device errors and their diagnoses"
    )
    args = parser.parse_args(argv)
    if args.command == "demo":
        from ipydevice.demo import main as demo

        return demo()
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
