"""``python -m ipydevice demo``, ``python -m ipydevice run script.py [args]`` and
``python -m ipydevice torchrun [torchrun options] script.py [args]``."""

from __future__ import annotations

import argparse
import os
import shlex
import sys

#: What ``--help`` says around the commands: plain text, as written (the docstring
#: above is reST, for the docs).
DESCRIPTION = """\
ipydevice names the tensor on the wrong device when PyTorch stops with a device
error: a tour of the classic errors (demo), a script run with the device report
after its traceback (run), torchrun with the report in every rank (torchrun)."""
EPILOG = """\
examples:
  python -m ipydevice demo
  python -m ipydevice run train.py --epochs 3
  python -m ipydevice run -m mypackage.train
  python -m ipydevice torchrun --nproc-per-node 2 train.py"""


def _parser() -> argparse.ArgumentParser:
    from ipydevice import __version__

    parser = argparse.ArgumentParser(
        prog="python -m ipydevice",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ipydevice {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="{demo,run,torchrun}")
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
    launch = commands.add_parser(
        "torchrun",
        help="torchrun's options, then the script and its arguments: every rank with the "
        "device report, torchrun's summary titled with the script's name",
        add_help=False,
    )
    launch.add_argument("args", nargs=argparse.REMAINDER, help="torchrun's arguments")
    return parser


COMMANDS = ("demo", "run", "torchrun")


def _not_a_command(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """``python -m ipydevice train.py``: the script was meant for ``run``; says so
    (instead of argparse's "invalid choice") and exits with argparse's status 2."""
    first = argv[0] if argv else ""
    if first == "-m" and len(argv) > 1:  # python -m ipydevice -m package.train
        parser.print_usage(sys.stderr)
        print(
            f"python -m ipydevice: to run a module with the device report: "
            f"python -m ipydevice run {shlex.join(argv)}",
            file=sys.stderr,
        )
        sys.exit(2)
    if not first or first.startswith("-") or first in COMMANDS:
        return
    rest = shlex.join(argv)
    parser.print_usage(sys.stderr)
    looks_like_a_script = first.endswith(".py") or os.path.exists(first)
    hint = (
        f"to run it with the device report: python -m ipydevice run {rest}"
        if looks_like_a_script
        else f"commands: {', '.join(COMMANDS)}; to run a script: python -m ipydevice run {rest}"
    )
    print(f"python -m ipydevice: {first!r} is not a command; {hint}", file=sys.stderr)
    sys.exit(2)


def main(argv: list[str] | None = None) -> int:
    """Parses the command line and runs the chosen command (a bare command prints
    the help and succeeds, as ``git`` and ``pip`` do)."""
    parser = _parser()
    argv = sys.argv[1:] if argv is None else argv
    _not_a_command(parser, argv)
    if argv and argv[0] == "torchrun":  # the rest is torchrun's, options included
        from ipydevice.integrations.torchrun import torchrun

        return torchrun(argv[1:])
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
