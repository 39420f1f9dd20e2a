"""A device *warning* diagnosed like an error, from the live stack.

A warning has no traceback: :func:`live_traceback` builds one from the stack at the
moment of the warning (the cell's frame down to the library's), and
:func:`diagnose_warning` gives it to :func:`ipydevice.pipeline.engine.diagnose`
inside a :class:`DeviceWarningStandIn`, as it would an exception's: the failing line
of the cell (``model.generate(**inputs)``), the module whose method warned, the names
in the namespace. What it returns is text only; the frames are let go before it does.

Used by :mod:`ipydevice.integrations.warnings_hook` when a warning or a log record
reads as a device error: imported then, not when the hooks are installed.
"""

from __future__ import annotations

import ast
import dataclasses
import types
from collections.abc import Mapping
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ipydevice.collect.frames import FrameView
    from ipydevice.model import Diagnosis, Fix

__all__ = ["DeviceWarningStandIn", "diagnose_warning", "live_traceback"]


class DeviceWarningStandIn(Exception):
    """Stands in for a warning or a log record in :func:`ipydevice.diagnose`.

    Carries the message and, while one diagnosis runs, a traceback built from the
    live stack. Never raised.
    """


def _own_file(filename: str) -> bool:
    """Frames of the machinery between the warning and us: warnings, logging, ipydevice."""
    path = filename.replace("\\", "/")
    return (
        path.endswith(("/warnings.py", "/logging/__init__.py"))
        or "/ipydevice/" in path
        or path.startswith("<frozen")
    )


def live_traceback(
    frame: FrameType | None, namespace: Mapping[str, Any] | None = None
) -> TracebackType | None:
    """The stack from ``frame`` outwards as a traceback, outermost first.

    Innermost frames of ``warnings``, ``logging`` and ipydevice are dropped, so
    the innermost frame is the code that warned. With ``namespace``, frames
    outside the outermost one that runs in it (IPython's own machinery around a
    cell) are dropped too. The frames are live: drop the traceback after use.
    """
    frames: list[FrameType] = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    while frames and _own_file(frames[0].f_code.co_filename):
        frames.pop(0)
    if namespace is not None:
        outermost = max((i for i, f in enumerate(frames) if f.f_globals is namespace), default=None)
        if outermost is not None:
            del frames[outermost + 1 :]
    tb: TracebackType | None = None
    for each in frames:
        tb = types.TracebackType(tb, each, each.f_lasti, each.f_lineno)
    return tb


def diagnose_warning(
    message: str,
    origin: str,
    namespace: Mapping[str, Any] | None = None,
    frame: FrameType | None = None,
) -> Diagnosis:
    """The diagnosis of a device warning, with the live objects where possible.

    Args:
        message: the warning's or log record's text.
        origin: what the panel names it by (``UserWarning``, ``accelerate.big_modeling
            WARNING``).
        namespace: the user's names (IPython's ``user_ns``).
        frame: where the stack is read from (the caller's by default); None-like
            stacks give a message-only diagnosis.
    """
    from ipydevice.pipeline import engine

    stand_in = DeviceWarningStandIn(message)
    stand_in.__traceback__ = live_traceback(frame, namespace)
    try:
        diagnosis = engine.diagnose(stand_in, namespace=namespace)
        extra = _assign_fix(diagnosis, stand_in.__traceback__)
    finally:
        stand_in.__traceback__ = None
        del stand_in
    fixes = ((extra,) if extra is not None else ()) + tuple(
        f for f in diagnosis.fixes if f != extra
    )
    return dataclasses.replace(diagnosis, exc_type=origin, fixes=fixes)


def _assign_fix(diagnosis: Diagnosis, tb: TracebackType | None) -> Fix | None:
    """For the meta no-op: ``load_state_dict(sd, assign=True)`` on the line that loaded.

    The checkpoint's tensors then replace the meta parameters (torch >= 2.1), as
    the warning itself suggests.
    """
    from ipydevice.diagnosis.families import meta_device

    if diagnosis.family != meta_device.ID or "no-op" not in diagnosis.message:
        return None
    from ipydevice.code.rewrite import add_keyword
    from ipydevice.collect.compiled import rewritten_fix
    from ipydevice.collect.frames import failing_statement, walk_frames

    views = [v for v in walk_frames(tb, 10_000) if v.is_user]
    try:
        for view in reversed(views):
            found = failing_statement(view)
            lines = _lines(view)
            if found is None or not lines or found[1]:
                continue  # only whole-file parses (cells, scripts) keep real line numbers
            stmt = found[0]
            for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)):
                func = call.func
                if (
                    isinstance(func, ast.Attribute)
                    and func.attr == "load_state_dict"
                    and not any(k.arg == "assign" for k in call.keywords)
                ):
                    rewritten = add_keyword(lines, call, "assign=True")
                    return rewritten_fix(
                        view,
                        lines,
                        rewritten,
                        "Load with assign=True: the checkpoint's tensors replace the meta parameters",
                    )
        return None
    finally:
        del views


def _lines(view: FrameView) -> list[str]:
    import linecache

    lines = linecache.getlines(view.frame.f_code.co_filename, view.frame.f_globals)
    return [line if line.endswith("\n") else line + "\n" for line in lines]
