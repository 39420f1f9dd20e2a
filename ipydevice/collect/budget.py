"""The time budget of a diagnosis, an inventory or a checkup (``settings.time_budget``):
one per run, active in its thread while :func:`ipydevice.collect.probe.metadata_reads`
is entered, asked by every read that may run user code (a tensor subclass's
``device`` property)."""

from __future__ import annotations

import threading
import time
from typing import Any

from ipydevice._debug import contain

__all__ = ["Budget", "active_budget"]

_ACTIVE = threading.local()


def active_budget() -> Budget | None:
    """The budget of the diagnosis, inventory or checkup running in this thread."""
    return getattr(_ACTIVE, "budget", None)


class Budget:
    """The wall-clock time a scan may take (``settings.time_budget``), from its start.

    What user code remains (a subclass's Python ``device`` property, a sizes
    policy of ``__torch_dispatch__``) is asked through the guarded reads; the clock
    is read after each, so once the time is spent they read nothing more and the
    scan stops, with one note saying so (:attr:`note`). A Python call cannot be
    cut short: the total is the budget and the one read that outran it. A slow
    read (a tenth of the budget, at least 50 ms) is kept: the same object is never
    read again under this budget; and a class with two slow reads is slow: no other
    object of that class is read (:meth:`stops`).
    """

    __slots__ = ("deadline", "kept", "note", "said", "seconds", "slow", "slow_read")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.note = ""
        #: what the budget has to say: the stop, the classes found slow
        self.said: list[str] = []
        #: classes by their count of slow reads (two: slow)
        self.slow: dict[type, int] = {}
        self.slow_read = max(0.05, seconds / 10)
        #: what slow reads gave, by (id, what was read): (the object, the result)
        self.kept: dict[tuple[int, str], tuple[Any, Any]] = {}

    def spent(self) -> bool:
        """True once the time is up (and from then on)."""
        if self.note:
            return True
        if time.monotonic() < self.deadline:
            return False
        self.note = (
            f"stopped after {self.seconds:g} s: what was not read by then is left out or "
            "shown as ? (the time_budget setting)"
        )
        self.said.append(self.note)
        return True

    def left(self) -> float:
        """Seconds left (0 once spent)."""
        return 0.0 if self.spent() else max(0.0, self.deadline - time.monotonic())

    def stops(self, kind: type) -> bool:
        """True when an object of class ``kind`` is not to be read: the time is up,
        or its class is slow."""
        return self.slow.get(kind, 0) >= 2 or self.spent()

    def read(self, obj: Any, what: str, reader: Any, unread: Any) -> Any:
        """``reader(obj)``, timed: what a slow one gave is kept for ``obj``; nothing
        is read (``unread``) once the time is up or the class is slow."""
        key = (id(obj), what)
        kept = self.kept.get(key)
        if kept is not None and kept[0] is obj:
            return kept[1]
        kind = type(obj)
        if self.stops(kind):
            return unread
        start = time.monotonic()
        result = reader(obj)
        took = time.monotonic() - start
        if took >= self.slow_read:
            if len(self.kept) < 4096:
                self.kept[key] = (obj, result)
            count = self.slow[kind] = self.slow.get(kind, 0) + 1
            if count == 2 and len(self.said) < 16:
                name = class_name_of(kind)
                self.said.append(
                    f"reading a {name}'s metadata took {took:.2g} s: no other {name} "
                    "was read (shown as ?)"
                )
        self.spent()
        return result


def class_name_of(kind: type) -> str:
    """``kind.__name__`` from the type slot (no metaclass asked)."""
    try:
        return str(_CLASS_NAME.__get__(kind))
    except BaseException as caught:
        contain(caught)
        return "?"


_CLASS_NAME = type.__dict__["__name__"]
