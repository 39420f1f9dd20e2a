"""``python -m ipydevice demo`` and ``python -m ipydevice run script.py [args]``."""

from __future__ import annotations

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
    from ipydevice import __version__

    parser = argparse.ArgumentParser(prog="python -m ipydevice", description=__doc__)
    parser.add_argument("--version", action="version", version=f"ipydevice {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="{demo,run}")
    commands.add_parser(
        "demo", help="a terminal tour of the classic device errors and their diagnoses"
    )
    run = commands.add_parser(
        "run", help="run a script (or -m module) with the device report installed"
    )
    run.add_argument(
        "-m", dest="module", action="store_true", help="run a module, as python -m does"
    )
    run.add_argument("target", help="the script (or module) to run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments for it")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parses the command line and runs the chosen command (a bare command prints
    the help and succeeds, as ``git`` and ``pip`` do)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "run":
        from ipydevice.integrations.runner import run as run_script

        return run_script(args.target, args.args, module=args.module)
    from ipydevice.integrations.demo import main as demo

    return demo()


if __name__ == "__main__":
    sys.exit(main())
