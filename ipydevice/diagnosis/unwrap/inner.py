"""What an unwrapper returns: the wrapped errors (see :mod:`ipydevice.diagnosis.unwrap`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Inner", "last_line"]


@dataclass(frozen=True)
class Inner:
    """One wrapped error.

    Attributes:
        where: where it was raised (``DataLoader worker 0``, ``rank 1``, ``task 2 of
            the TaskGroup``).
        exc: the inner exception, when this process holds it (a group's member, a
            Ray task's unpickled cause).
        text: the inner error's traceback as text, when only that came back.
        remote: raised in another process (its objects are not the notebook's).
        hint: how to make that process diagnose its own errors next time.
        extra: what else the unwrapper knows (``dataset``: the Dataset's name).
    """

    where: str
    exc: BaseException | None = None
    text: str = ""
    remote: bool = True
    hint: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


_LAST = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Warning)?): (?P<message>.*)$")


def last_line(text: str) -> tuple[str, str]:
    """The exception type and message a traceback's text ends with (before its notes)."""
    lines = text.rstrip().splitlines()
    for index in range(len(lines) - 1, -1, -1):
        match = _LAST.match(lines[index])
        if match is not None and not lines[index].startswith("ipydevice"):
            message = "\n".join([match["message"], *_continued(lines[index + 1 :])])
            return match["type"].rpartition(".")[2], message
    return "", ""


def _continued(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if line.startswith("ipydevice") or not line.strip():
            break
        out.append(line)
    return out
