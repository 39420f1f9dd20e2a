"""``python -m ipydevice run script.py [args]``: a script with the device report.

The script runs as ``__main__`` (``runpy``) with :func:`ipydevice.install` in
place, and as ``python script.py`` would run it:

* ``sys.path[0]`` is the script's folder (symlinks resolved), so sibling modules
  import; with ``-m`` it is the current folder, as for ``python -m``;
* the exit status is python's: 0, the script's own ``sys.exit`` code (a
  non-integer code is printed and gives 1), 1 after an uncaught exception, 2 for a
  script that does not exist, and an
  uncaught ``KeyboardInterrupt`` ends the process by ``SIGINT`` once it has shut
  down (a shell shows 130), as python does;
* device errors raised in threads are reported too (``threading.excepthook``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import runpy
import signal
import sys
from types import TracebackType

from ipydevice.integrations.excepthook import install, uninstall

__all__ = ["INTERRUPTED", "run"]

INTERRUPTED = 130  # what a shell shows for a process ended by SIGINT (128 + 2)

_interrupted: list[bool] = []
_registered: list[bool] = []


def run(target: str, args: list[str], module: bool = False) -> int:
    """Runs a script (or, with ``module``, a module) and returns its exit status.

    After an uncaught ``KeyboardInterrupt`` it returns :data:`INTERRUPTED` and,
    on POSIX, the process ends by ``SIGINT`` at the very end of its shutdown
    (after the script's own ``atexit`` functions), as ``python script.py`` does.
    """
    if not module and not os.path.exists(target):
        # python's own words and status for a missing script
        print(
            f"python -m ipydevice run: can't open file {os.path.abspath(target)!r}: "
            "[Errno 2] No such file or directory",
            file=sys.stderr,
        )
        return 2
    saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
    sys.argv = [target, *args]
    first = os.getcwd() if module else os.path.dirname(os.path.realpath(target))
    if sys.path:
        sys.path[0] = first
    else:
        sys.path.append(first)
    _watch_for_interrupt()
    install()
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exit_:
        return _exit_status(exit_.code)
    except BaseException:
        exc_type, exc, tb = sys.exc_info()
        trimmed = _from_user_code(tb)
        if exc is not None:
            exc = exc.with_traceback(trimmed)  # the printer reads the exception's own
        sys.excepthook(exc_type, exc, trimmed)  # type: ignore[arg-type]
        if isinstance(exc, KeyboardInterrupt):
            _interrupted.append(True)
            return INTERRUPTED
        return 1
    finally:
        uninstall()
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path and sys.path[0] == first:
            sys.path[0] = saved_path0
    return 0


def _watch_for_interrupt() -> None:
    """Registers, once and before the script runs, the exit function that ends
    the process by SIGINT after an uncaught ``KeyboardInterrupt``: ``atexit``
    runs its functions last-in, first-out, so the script's own run before it."""
    if os.name == "posix" and not _registered:
        _registered.append(True)
        atexit.register(_die_of_sigint)


def _die_of_sigint() -> None:
    if not _interrupted:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)


def _from_user_code(tb: TracebackType | None) -> TracebackType | None:
    """Drops the runner's and runpy's frames, as ``python script.py`` would show."""
    current = tb
    while current is not None:
        filename = current.tb_frame.f_code.co_filename
        if filename != __file__ and not filename.startswith("<frozen"):
            return current
        current = current.tb_next
    return tb


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
