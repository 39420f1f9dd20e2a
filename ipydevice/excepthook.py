"""Device-error reports for plain Python: ``sys.excepthook``, scripts, torchrun.

:func:`install` chains a hook in front of whatever ``sys.excepthook`` was: the
previous hook prints the traceback as before, then, for device errors only, the
text report follows. :func:`uninstall` puts the previous hook back exactly.

Under ``torchrun`` (or any launcher that sets ``RANK``/``WORLD_SIZE``), each report
says which rank it comes from and is written with a single ``write`` call to
stderr and flushed at once, so reports of several ranks stay whole blocks.
"""

from __future__ import annotations

import os
import shutil
import sys
from types import TracebackType
from typing import Any

from ipydevice._debug import debug_enabled, describe_failure

__all__ = ["install", "installed", "rank_label", "report_text", "terminal_style", "uninstall"]

_previous: list[Any] = []


def rank_label() -> str:
    """``rank 1/2 (local 1)`` under a distributed launcher, else ''."""
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is None or world is None:
        return ""
    local = os.environ.get("LOCAL_RANK")
    return f"rank {rank}/{world}" + (f" (local {local})" if local is not None else "")


def report_text(exc: BaseException, namespace: Any = None) -> str:
    """The text report for ``exc``, or '' when it is not a device error.

    The diagnosis goes to the :func:`ipydevice.on_diagnosis` listeners too (the
    scripts' hook, ``python -m ipydevice run`` and ``pytest -p ipydevice`` report
    through here)."""
    from ipydevice.engine import diagnose

    diagnosis = diagnose(exc, namespace=namespace)
    if not diagnosis.is_device_error:
        return ""
    _notify(diagnosis)
    from ipydevice.render.text import render_diagnosis

    width, color = terminal_style(sys.stderr)
    text = render_diagnosis(diagnosis, width=width, color=color)
    label = rank_label()
    if label:
        text = "\n".join(f"[{label}] {line}" for line in text.splitlines())
    return text


def _notify(diagnosis: Any) -> None:
    plugins = sys.modules.get("ipydevice.plugins")
    if plugins is not None:
        plugins.notify(diagnosis)


def terminal_style(stream: Any) -> tuple[int, bool]:
    """Width from the terminal (60 to 160 columns) and colour on a TTY or with
    ``FORCE_COLOR``, never with ``NO_COLOR``."""
    width = max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))
    return width, _use_color(stream)


def _use_color(stream: Any) -> bool:
    from ipydevice.render.text import use_color

    return use_color(None, stream)


def _hook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    previous = _previous[-1] if _previous else sys.__excepthook__
    previous(exc_type, exc, tb)
    try:
        if exc.__traceback__ is None and tb is not None:
            exc = exc.with_traceback(tb)
        text = report_text(exc)
        if text:
            sys.stderr.write("\n" + text + "\n")
            sys.stderr.flush()
    except Exception as failure:
        if debug_enabled():
            raise
        sys.stderr.write(describe_failure("report", failure) + "\n")


def install() -> None:
    """Adds the device report after the traceback of uncaught exceptions.

    Calling it twice is harmless.
    """
    if sys.excepthook is _hook:
        return
    _previous.append(sys.excepthook)
    sys.excepthook = _hook


def uninstall() -> None:
    """Puts back the hook that was there before :func:`install`."""
    if sys.excepthook is _hook and _previous:
        sys.excepthook = _previous.pop()


def installed() -> bool:
    """True while ipydevice's hook is ``sys.excepthook``."""
    return sys.excepthook is _hook
