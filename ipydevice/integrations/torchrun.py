"""``python -m ipydevice torchrun [torchrun options] train.py [args]``.

torchrun with every rank run by ``python -m ipydevice run``: each failing rank
prints its report and adds it to its torchelastic error file, so the root-cause
summary shows the diagnosis. torchrun titles that summary with the first word of
the command it launched (``ipydevice FAILED`` for ``torchrun -m ipydevice run
train.py``); here the title is the script's (``train.py FAILED``), as for a
plain ``torchrun train.py``.
"""

from __future__ import annotations

import sys

__all__ = ["torchrun"]


def torchrun(argv: list[str]) -> int:
    """Launches the script as torchrun would, with the device report in each rank.

    Raises torchrun's ``ChildFailedError`` (retitled with the script's name) when
    a rank fails, as ``torchrun`` itself does; returns 0 otherwise."""
    from torch.distributed import run as launcher
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, record

    args = launcher.parse_args(argv)
    if args.no_python or args.run_path:
        print(
            "python -m ipydevice torchrun: runs Python scripts and modules; "
            "--no-python and --run-path are not supported",
            file=sys.stderr,
        )
        return 2
    script = args.training_script
    args.training_script_args = [
        "run",
        *(["-m"] if args.module else []),
        script,
        *args.training_script_args,
    ]
    args.training_script, args.module = "ipydevice", True
    try:
        record(launcher.run)(args)
    except ChildFailedError as failed:
        raise ChildFailedError(name=script, failures=failed.failures) from None
    return 0
