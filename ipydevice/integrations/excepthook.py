"""Device-error reports for plain Python: ``sys.excepthook``, scripts, torchrun.

:func:`install` chains a hook in front of whatever ``sys.excepthook`` was, and
one in front of ``threading.excepthook`` (errors raised in threads): the previous
hook prints the traceback as before, then, for device errors only, the text
report follows. :func:`uninstall` puts the previous hooks back exactly.

Under ``torchrun`` (or any launcher that sets ``RANK``/``WORLD_SIZE``), each report
says which rank it comes from and is written with a single ``write`` call to
stderr and flushed at once, so reports of several ranks stay whole blocks. Each
line carries one rank label: none of ipydevice's where torch labels the lines
itself (``init_process_group`` wraps ``sys.excepthook`` to prefix ``[rank1]:``;
``torchrun --tee``/``--redirects`` send stderr to a per-rank log file that
torchrun prefixes when it shows it). The report is added to torchelastic's error
file too (``TORCHELASTIC_ERROR_FILE``, in the JSON of
``torch.distributed.elastic.multiprocessing.errors``), so torchrun's root-cause
summary shows it.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import threading
import time
import traceback
from types import TracebackType
from typing import Any

from ipydevice._debug import contained

__all__ = [
    "install",
    "installed",
    "rank_label",
    "report_text",
    "terminal_style",
    "uninstall",
    "write_error_file",
]

_previous: list[Any] = []
_previous_thread: list[Any] = []


def rank_label(*, in_excepthook: bool = False) -> str:
    """``rank 1/2 (local 1)`` under a distributed launcher, else ''.

    Also '' where the launcher labels each line already (see the module
    docstring); ``in_excepthook`` says the text is printed from ``sys.excepthook``,
    which ``torch.distributed`` may have wrapped."""
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is None or world is None:
        return ""
    if _stderr_is_torchelastic_log() or (in_excepthook and _torch_labels_excepthook()):
        return ""
    local = os.environ.get("LOCAL_RANK")
    return f"rank {rank}/{world}" + (f" (local {local})" if local is not None else "")


def _torch_labels_excepthook() -> bool:
    """True while ``sys.excepthook`` is the wrapper ``init_process_group`` installs,
    which prefixes every line the hooks below it print with ``[rank<N>]:``."""
    return str(getattr(sys.excepthook, "__module__", "")).startswith("torch.distributed")


def _stderr_is_torchelastic_log() -> bool:
    """True when stderr is the per-rank ``stderr.log`` that torchrun writes beside the
    rank's error file (``--redirects``/``--tee``): torchrun prefixes its lines when
    it shows them, and the file is one rank's alone."""
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not error_file:
        return False
    try:
        log = os.stat(os.path.join(os.path.dirname(error_file), "stderr.log"))
        ours = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (log.st_dev, log.st_ino) == (ours.st_dev, ours.st_ino)


def report_text(exc: BaseException, namespace: Any = None, *, in_excepthook: bool = False) -> str:
    """The text report for ``exc``, or '' when it is not a device error.

    The diagnosis goes to the :func:`ipydevice.on_diagnosis` listeners too (the
    scripts' hook, ``python -m ipydevice run`` and ``pytest -p ipydevice`` report
    through here), and is attached to ``exc`` as a note and a payload
    (:mod:`ipydevice.diagnosis.carried`)."""
    return _report_texts(exc, namespace, in_excepthook=in_excepthook)[0]


def _report_texts(
    exc: BaseException, namespace: Any = None, *, in_excepthook: bool = False
) -> tuple[str, str]:
    """The report for the terminal (width, colour and rank label) and a plain one
    (for files), or ('', '') when ``exc`` is not a device error."""
    from ipydevice.pipeline.engine import diagnose

    diagnosis = diagnose(exc, namespace=namespace)
    if not diagnosis.is_device_error:
        return "", ""
    from ipydevice.diagnosis.carried import attach

    attach(exc, diagnosis, rank_label())
    _notify(diagnosis)
    from ipydevice.render.text import render_diagnosis

    width, color = terminal_style(sys.stderr)
    text = render_diagnosis(diagnosis, width=width, color=color)
    plain = text if not color else render_diagnosis(diagnosis, width=width, color=False)
    label = rank_label(in_excepthook=in_excepthook)
    if label:
        text = "\n".join(f"[{label}] {line}" for line in text.splitlines())
    return text, plain


def write_error_file(exc: BaseException, report: str) -> None:
    """Adds ``report`` to torchelastic's error file (``TORCHELASTIC_ERROR_FILE``).

    The file is the JSON that ``torch.distributed.elastic``'s ``ErrorHandler``
    writes; torchrun shows its ``py_callstack`` in the root-cause summary. Where
    ``@record`` wrote the file already, the report is appended to its traceback;
    where there is no file yet, it is created, the traceback followed by the report.

    Only under a launcher (``RANK`` and ``WORLD_SIZE`` set, as torchrun sets them):
    the variable alone, left in a shell's environment, writes nothing. A file that
    is not torchelastic's JSON is the user's and is never touched, and a symbolic
    link is never followed."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path or not report or not _under_launcher():
        return
    data: Any = None
    if os.path.lexists(path):
        data = _read_error_file(path)
        if data is None:  # a link, a folder, or a file that is not torchelastic's
            return
    message = data.get("message") if isinstance(data, dict) else None
    if isinstance(message, dict) and isinstance(message.get("extraInfo"), dict):
        stack = str(message["extraInfo"].get("py_callstack", ""))
        if report in stack:
            return
        message["extraInfo"]["py_callstack"] = stack.rstrip("\n") + "\n\n" + report + "\n"
    elif data is not None:  # JSON, but not the shape torchrun reads: not ours to change
        return
    else:
        stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        data = {
            "message": {
                "message": f"{type(exc).__name__}: {exc}",
                "extraInfo": {
                    "py_callstack": stack + "\n" + report + "\n",
                    "timestamp": str(int(time.time())),
                },
            }
        }
    _write_error_file(path, json.dumps(data), create=not os.path.lexists(path))


def _under_launcher() -> bool:
    return os.environ.get("RANK") is not None and os.environ.get("WORLD_SIZE") is not None


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _read_error_file(path: str) -> Any:
    """torchelastic's JSON in ``path``, or None: a symbolic link (never followed),
    something other than a regular file, a file that is not JSON."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):  # a link, a folder, a pipe...
            return None
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, encoding="utf-8") as fp:
        try:
            return json.load(fp) if stat.S_ISREG(os.fstat(fd).st_mode) else None
        except (OSError, ValueError):
            return None


def _write_error_file(path: str, text: str, *, create: bool) -> None:
    """Writes ``text``: a new file (never one that appeared meanwhile, never through
    a link), or torchelastic's file read just before (never through a link)."""
    if not create and os.path.islink(path):
        return
    flags = os.O_WRONLY | _NOFOLLOW | (os.O_CREAT | os.O_EXCL if create else os.O_TRUNC)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as fp:
        fp.write(text)


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
    _report(exc, tb, in_excepthook=True)


def _thread_hook(args: Any) -> None:
    previous = _previous_thread[-1] if _previous_thread else threading.__excepthook__
    previous(args)
    exc = args.exc_value
    if exc is not None and not isinstance(exc, SystemExit):  # threads exit quietly
        _report(exc, args.exc_traceback)


def _report(exc: BaseException, tb: TracebackType | None, *, in_excepthook: bool = False) -> None:
    # Contained, whatever it is (see ipydevice._debug): the traceback is out
    # already, and the process goes on ending as it would without ipydevice.
    with contained("report"):
        if exc.__traceback__ is None and tb is not None:
            exc = exc.with_traceback(tb)
        text, plain = _report_texts(exc, in_excepthook=in_excepthook)
        if text:
            sys.stderr.write("\n" + text + "\n")
            sys.stderr.flush()
        if plain and in_excepthook:  # the error that ends the process: torchrun's root cause
            write_error_file(exc, plain)


def install() -> None:
    """Adds the device report after the traceback of uncaught exceptions, in the
    main thread (``sys.excepthook``) and in other threads (``threading.excepthook``).

    Calling it twice is harmless.
    """
    if sys.excepthook is not _hook:
        _previous.append(sys.excepthook)
        sys.excepthook = _hook
    if threading.excepthook is not _thread_hook:
        _previous_thread.append(threading.excepthook)
        threading.excepthook = _thread_hook


def uninstall() -> None:
    """Puts back the hooks that were there before :func:`install`."""
    if sys.excepthook is _hook and _previous:
        sys.excepthook = _previous.pop()
    if threading.excepthook is _thread_hook and _previous_thread:
        threading.excepthook = _previous_thread.pop()


def installed() -> bool:
    """True while ipydevice's hook is ``sys.excepthook``."""
    return sys.excepthook is _hook
