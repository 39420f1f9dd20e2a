"""Fail safe for users, fail loud in tests; and what user code may raise.

``IPYDEVICE_DEBUG=1`` makes every guarded stage re-raise instead of degrading to a
one-line notice (the test suite sets it). Standard library only.

The containment rule lives here, and only here. While ipydevice works it runs
code it does not own: a property, a metaclass's ``__getattribute__``, a tensor
subclass's ``__torch_function__``, an audit, a message pattern, a listener. What
that code raises, whatever its class (``SystemExit`` from ``sys.exit()`` in a
plugin, a ``BaseException`` subclass of its own), is *contained*:

* at a per-object guard (reading one object's metadata), the object is
  unreadable (``?``) and the scan goes on: ``except BaseException as exc:``
  then :func:`contain` (``exc``), then degrade;
* at an entry point (the IPython hook, the excepthooks, the pytest plugin, the
  script runner, ``check()``, ``inventory()``, ``diagnose()``), ipydevice's work
  is dropped and one line says why (:func:`describe_failure`): :func:`contained`.

``KeyboardInterrupt`` keeps its meaning: it is never contained where the object
was read. ipydevice stops its work, the entry point says so in one line, and a
hook then lets the host carry on as it would have (the user's traceback is out
already); ``check()``, ``inventory()`` and ``diagnose()``, called by the user's
own code, raise it on.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator

__all__ = [
    "contain",
    "contained",
    "debug_enabled",
    "describe_failure",
    "env_flag",
    "failure_line",
    "is_interrupt",
]


_OFF = frozenset({"", "0", "false", "no", "off", "n", "f"})


def env_flag(name: str) -> bool:
    """An on/off environment variable, read the same way for every flag ipydevice
    reads: unset, empty, ``0``, ``false``, ``no``, ``off`` (any case, spaces
    around ignored) mean off; anything else means on."""
    return os.environ.get(name, "").strip().lower() not in _OFF


def debug_enabled() -> bool:
    """True when ``IPYDEVICE_DEBUG`` is on (:func:`env_flag`: ``1``, ``true``, ``yes``...;
    ``0``, ``false``, ``no``, ``off`` or empty are off)."""
    return env_flag("IPYDEVICE_DEBUG")


def is_interrupt(exc: BaseException) -> bool:
    """True for what stops ipydevice's work instead of being contained: the user's
    Ctrl-C (``KeyboardInterrupt``, subclasses included)."""
    return isinstance(exc, KeyboardInterrupt)


def contain(exc: BaseException) -> None:
    """The per-object half of the rule, first thing in ``except BaseException``:
    returns when ``exc`` is contained (the caller degrades, the scan goes on),
    re-raises an interrupt (the scan stops; the entry point says so)."""
    if is_interrupt(exc):
        raise exc


def describe_failure(stage: str, exc: BaseException) -> str:
    """The one line a user sees when ipydevice itself fails, or is interrupted."""
    if is_interrupt(exc):
        return f"ipydevice: {stage} interrupted (KeyboardInterrupt); nothing more is shown"
    try:
        detail = " ".join(str(exc).split())[:160]  # one line, whatever the message
    except BaseException as failure:  # a message whose __str__ raises (or exits)
        contain(failure)
        detail = "?"
    try:
        name = str(type.__dict__["__name__"].__get__(type(exc)))
    except BaseException as failure:  # pragma: no cover - type names are strings
        contain(failure)
        name = "?"
    return f"ipydevice: {stage} failed ({name}: {detail}); set IPYDEVICE_DEBUG=1 for details"


def failure_line(stage: str, exc: BaseException) -> str:
    """The entry-point half of the rule, in ``except BaseException``: the one line
    to show for ``exc``; re-raised instead when debugging (an interrupt is not a
    failure: its line is returned even then)."""
    if debug_enabled() and not is_interrupt(exc):
        raise exc
    return describe_failure(stage, exc)


def _to_stderr(line: str) -> None:
    # stderr closed or replaced by something broken: nothing to say it on
    with contextlib.suppress(Exception):
        print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def contained(
    stage: str, say: Callable[[str], None] = _to_stderr, *, interrupt: bool = False
) -> Iterator[None]:
    """An entry point's outer guard: whatever the block raises is dropped and
    ``say`` gets one line (:func:`describe_failure`); raised when debugging.

    ``interrupt=True`` raises a ``KeyboardInterrupt`` on after its line, where
    the user's own code called ipydevice and Ctrl-C must stop that code too.
    """
    try:
        yield
    except BaseException as exc:
        say(failure_line(stage, exc))
        if interrupt and is_interrupt(exc):
            raise
