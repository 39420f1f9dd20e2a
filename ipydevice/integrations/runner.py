"""``python -m ipydevice run script.py [args]``: a script with the device report.

The script runs as ``__main__`` (``runpy``), with :func:`ipydevice.install` in
place; its exit status is kept (0, its own ``sys.exit`` code, or 1 after an
uncaught exception, as with ``python script.py``).
"""

from __future__ import annotations

import runpy
import sys
from types import TracebackType

from ipydevice.integrations.excepthook import install, uninstall

__all__ = ["run"]


def run(target: str, args: list[str], module: bool = False) -> int:
    """Runs a script (or, with ``module``, a module) and returns its exit status."""
    saved_argv = sys.argv
    sys.argv = [target, *args]
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
        return 1
    finally:
        uninstall()
        sys.argv = saved_argv
    return 0


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
