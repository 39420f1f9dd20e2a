"""Device-error reports for plain Python: ``sys.excepthook``, scripts, torchrun.

:func:`install` chains a hook in front of whatever ``sys.excepthook`` was, and
one in front of ``threading.excepthook`` (errors raised in threads): the previous
hook prints the traceback as before, then, for device errors only, the text
report follows. :func:`uninstall` puts the previous hooks back (or, where another
library chained its hook above ours since, leaves ours in its chain reporting
nothing), and no order of installs and other libraries' hooks makes a loop.

Under ``torchrun`` (or any launcher that sets ``RANK``/``WORLD_SIZE``), each report
says which rank it comes from and is written with a single ``write`` call to
stderr and flushed at once, so reports of several ranks stay whole blocks. Each
line carries one rank label: none of ipydevice's where torch labels the lines
itself (``init_process_group`` wraps ``sys.excepthook`` to prefix ``[rank1]:``;
``torchrun --tee``/``--redirects`` send stderr to a per-rank log file that
torchrun prefixes when it shows it); the rank's values are shown escaped
(:func:`environment_text`). The report is added to torchelastic's error file too
(:mod:`ipydevice.integrations.error_file`), so torchrun's root-cause summary shows
it. Where the stream cannot encode a glyph of the report (``PYTHONIOENCODING=ascii``),
it is written in ASCII.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from types import TracebackType
from typing import Any

from ipydevice._debug import contained
from ipydevice.integrations.error_file import write_error_file

__all__ = [
    "environment_text",
    "install",
    "install_threads",
    "installed",
    "rank_label",
    "report_text",
    "terminal_style",
    "uninstall",
    "uninstall_threads",
    "write_error_file",
]

_previous: list[Any] = []
_previous_thread: list[Any] = []


def rank_label(*, in_excepthook: bool = False) -> str:
    """``rank 1/2 (local 1)`` under a distributed launcher, else ''.

    Also '' where the launcher labels each line already (see the module
    docstring); ``in_excepthook`` says the text is printed from ``sys.excepthook``,
    which ``torch.distributed`` may have wrapped. The values are shown as
    :func:`environment_text` gives them."""
    rank, world = environment_text("RANK"), environment_text("WORLD_SIZE")
    if rank is None or world is None:
        return ""
    if _stderr_is_torchelastic_log() or (in_excepthook and _torch_labels_excepthook()):
        return ""
    local = environment_text("LOCAL_RANK")
    return f"rank {rank}/{world}" + (f" (local {local})" if local is not None else "")


_MAX_ENVIRONMENT_TEXT = 32


def environment_text(name: str) -> str | None:
    """The environment variable ``name`` as a report may show it (None when unset):
    its invisible characters escaped (``\\x1b`` for an escape, ``\\r``, a bell),
    cut to a few dozen characters. A launcher's ``RANK`` is a number; whatever else
    the environment holds never reaches a terminal raw."""
    value = os.environ.get(name)
    if value is None:
        return None
    from ipydevice.wording import visible

    shown = visible(value)
    if len(shown) > _MAX_ENVIRONMENT_TEXT:
        shown = shown[: _MAX_ENVIRONMENT_TEXT - 3] + "..."
    return shown


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
    with _Entered(_depth_sys) as depth:
        _below(_previous, depth, sys.__excepthook__)(exc_type, exc, tb)
    if depth == 0 and _state["on"]:
        _report(exc, tb, in_excepthook=True)


def _thread_hook(args: Any) -> None:
    with _Entered(_depth_thread) as depth:
        _below(_previous_thread, depth, threading.__excepthook__)(args)
    exc = args.exc_value
    on = _state["on"] or _state["threads"]
    if depth == 0 and on and exc is not None and not isinstance(exc, SystemExit):
        _report(exc, args.exc_traceback, namespace=_namespace())  # (threads exit quietly)


def _namespace() -> Any:
    """The namespace a thread's error is named from: the shell's, under IPython."""
    getter = _state["namespace"]
    if getter is None:
        return None
    with contained("namespace"):
        return getter()
    return None


def _report(
    exc: BaseException,
    tb: TracebackType | None,
    *,
    in_excepthook: bool = False,
    namespace: Any = None,
) -> None:
    # Contained, whatever it is (see ipydevice._debug): the traceback is out
    # already, and the process goes on ending as it would without ipydevice.
    with contained("report"):
        if exc.__traceback__ is None and tb is not None:
            exc = exc.with_traceback(tb)
        text, plain = _report_texts(exc, namespace, in_excepthook=in_excepthook)
        if text:
            from ipydevice.render.layout import for_stream

            sys.stderr.write(for_stream("\n" + text + "\n", sys.stderr))
            sys.stderr.flush()
        if plain and in_excepthook:  # the error that ends the process: torchrun's root cause
            write_error_file(exc, plain)


# -- the chain of hooks ----------------------------------------------------------------------
#
# ``install()`` puts ``_hook`` on top of ``sys.excepthook`` and keeps the hook it
# replaced (``_previous``, one per install that found another hook on top). Another
# library may chain its hook above ours afterwards (it calls ours as its previous
# one): ``uninstall()`` cannot take ours out of that library's chain, so ours stays
# there as a pass-through (``_state["on"]`` False: it only calls the hook below it),
# and a later ``install()`` puts ours on top again. The chain then passes through
# ours twice (ours, the library's, ours, the original): each time ours is entered
# again in the same call (``_depth_*``, per thread) it calls the hook it replaced at
# that depth, one further down, so the chain ends in the original hook, never in a
# loop, and the report is printed once, by the outermost.


def _below(stack: list[Any], depth: int, stock: Any) -> Any:
    index = len(stack) - 1 - depth
    return stack[index] if 0 <= index < len(stack) else stock


class _Entered:
    """How many times the hook is entered in this thread's current call, counted."""

    def __init__(self, local: threading.local) -> None:
        self.local = local

    def __enter__(self) -> int:
        depth = getattr(self.local, "depth", 0)
        self.local.depth = depth + 1
        return depth

    def __exit__(self, *exc: object) -> None:
        self.local.depth -= 1


_depth_sys = threading.local()
_depth_thread = threading.local()
#: ``on``: :func:`install` in force; ``threads``: :func:`install_threads` in force
#: (IPython's), with ``namespace``: how to get the names a thread's error is named from
_state: dict[str, Any] = {"on": False, "threads": False, "namespace": None}


def install() -> None:
    """Adds the device report after the traceback of uncaught exceptions, in the
    main thread (``sys.excepthook``) and in other threads (``threading.excepthook``).

    Calling it twice is harmless; so is calling it again after :func:`uninstall`
    while another library chained its own hook above ours.
    """
    if sys.excepthook is not _hook:
        _previous.append(sys.excepthook)
        sys.excepthook = _hook
    if threading.excepthook is not _thread_hook:
        _previous_thread.append(threading.excepthook)
        threading.excepthook = _thread_hook
    _state["on"] = True


def uninstall() -> None:
    """Puts back the hooks that were there before :func:`install`; where another
    library chained its hook above ours since, ours stays in its chain as a
    pass-through that reports nothing."""
    _state["on"] = False
    if sys.excepthook is _hook and _previous:
        sys.excepthook = _previous.pop()
    if not _state["threads"]:
        _take_out_thread_hook()


def install_threads(namespace: Any = None) -> None:
    """The report after the traceback of device errors raised in threads only
    (``threading.excepthook``): what IPython's extension installs, where the shell
    itself shows the errors of cells. ``namespace``: a function that gives the
    names to name culprits from (the shell's)."""
    _state["threads"], _state["namespace"] = True, namespace
    if threading.excepthook is not _thread_hook:
        _previous_thread.append(threading.excepthook)
        threading.excepthook = _thread_hook


def uninstall_threads() -> None:
    """Undoes :func:`install_threads` (what :func:`install` put stays)."""
    _state["threads"], _state["namespace"] = False, None
    if not _state["on"]:
        _take_out_thread_hook()


def _take_out_thread_hook() -> None:
    if threading.excepthook is _thread_hook and _previous_thread:
        threading.excepthook = _previous_thread.pop()


def installed() -> bool:
    """True while ipydevice's hook reports (installed and not uninstalled)."""
    return _state["on"] and (sys.excepthook is _hook or bool(_previous))
