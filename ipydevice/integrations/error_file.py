"""torchelastic's error file (``TORCHELASTIC_ERROR_FILE``): the device report added
to the JSON that torchrun's root-cause summary reads.

The file is the JSON that ``torch.distributed.elastic``'s ``ErrorHandler`` writes;
torchrun shows its ``py_callstack``. Where ``@record`` wrote the file already, the
report is appended to its traceback; where there is no file yet, it is created, the
traceback followed by the report. The payload the exception carries
(:mod:`ipydevice.diagnosis.carried`) goes beside it, as data (``extraInfo.ipydevice``):
the notebook that launched the ranks reads the rank's fix from there, never from the
traceback's text.

Only under a launcher (``RANK`` and ``WORLD_SIZE`` set, as torchrun sets them): the
variable alone, left in a shell's environment, writes nothing. A file that is not
torchelastic's JSON (not JSON, another shape, nested past what a reader follows,
bigger than :data:`MAX_BYTES`) is the user's and is never touched, and a symbolic
link is never followed. Two writers at once both get their report in: a new file
appears whole (written aside, then linked in place), and an update is read and
rewritten under a lock where the system has one.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import time
import traceback
from typing import Any

__all__ = ["MAX_BYTES", "write_error_file"]

#: A bigger file is not read (nor changed): torchelastic's own are a traceback long.
MAX_BYTES = 16 * 1024 * 1024
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_ATTEMPTS = 4

try:
    import fcntl as _fcntl
except ImportError:  # Windows: no advisory locks; the update is read and written at once
    _fcntl = None  # type: ignore[assignment]


def under_launcher() -> bool:
    return os.environ.get("RANK") is not None and os.environ.get("WORLD_SIZE") is not None


def write_error_file(exc: BaseException, report: str) -> None:
    """Adds ``report`` to torchelastic's error file (see the module docstring)."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path or not report or not under_launcher():
        return
    sent = _payload(exc)
    for _ in range(_ATTEMPTS):
        if os.path.lexists(path):
            done = _update(path, report, sent)
        else:
            done = _create(path, _new_file(exc, report, sent))
        if done:
            return
        # another writer created the file meanwhile: read what it wrote and add to it


def _payload(exc: BaseException) -> Any:
    from ipydevice.diagnosis.carried import payload

    data = payload(exc)
    return {k: v for k, v in data.items() if k != "cut"} if data is not None else None


def _added(data: Any, report: str, sent: Any) -> str | None:
    """The file's new text with ``report`` in its traceback; None where it is not
    torchelastic's shape (not ours to change) or holds the report already."""
    message = data.get("message") if isinstance(data, dict) else None
    if not isinstance(message, dict) or not isinstance(message.get("extraInfo"), dict):
        return None
    extra = message["extraInfo"]
    stack = str(extra.get("py_callstack", ""))
    if report in stack:
        return None
    extra["py_callstack"] = stack.rstrip("\n") + "\n\n" + report + "\n"
    if sent is not None and "ipydevice" not in extra:
        extra["ipydevice"] = sent
    return json.dumps(data)


def _new_file(exc: BaseException, report: str, sent: Any) -> str:
    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    extra: dict[str, Any] = {
        "py_callstack": stack + "\n" + report + "\n",
        "timestamp": str(int(time.time())),
    }
    if sent is not None:
        extra["ipydevice"] = sent
    return json.dumps({"message": {"message": f"{type(exc).__name__}: {exc}", "extraInfo": extra}})


def _parsed(text: str) -> Any:
    """JSON, or None: not JSON, or nested deeper than the parser follows."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _update(path: str, report: str, sent: Any) -> bool:
    """Adds the report to the file at ``path``, read and rewritten under a lock.

    True when done with it (added, or not ours to change); False when it is gone."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):  # a link, a folder, a pipe...
            return True
        fd = os.open(path, os.O_RDWR | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return False
    except OSError:
        return True
    with os.fdopen(fd, "r+", encoding="utf-8") as fp:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            return True
        if _fcntl is not None:
            with contextlib.suppress(OSError):
                _fcntl.flock(fd, _fcntl.LOCK_EX)
        try:
            text = fp.read(MAX_BYTES + 1)
        except (OSError, ValueError):  # not text
            return True
        if len(text) > MAX_BYTES:
            return True
        new = _added(_parsed(text), report, sent)
        if new is not None:
            fp.seek(0)
            fp.truncate()
            fp.write(new)
    return True


def _create(path: str, text: str) -> bool:
    """A new file at ``path`` holding ``text``, appearing whole: written aside, then
    linked in place, never over a file that appeared meanwhile (False then)."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, aside = tempfile.mkstemp(prefix=".ipydevice-", dir=folder)
    except OSError:
        return _create_in_place(path, text)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fp:
            fp.write(text)
        os.chmod(aside, 0o644)
        try:
            os.link(aside, path)
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links
            return _create_in_place(path, text)
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(aside)


def _create_in_place(path: str, text: str) -> bool:
    flags = os.O_WRONLY | _NOFOLLOW | os.O_CREAT | os.O_EXCL
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError:
        return False
    except OSError:
        return True
    with os.fdopen(fd, "w", encoding="utf-8") as fp:
        fp.write(text)
    return True
