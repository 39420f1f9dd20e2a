"""What a device error's message says, from its text alone: no frame or object is read.

The part of a diagnosis the kernel's header needs before the traceback
(:func:`from_message`), and the first step of :func:`ipydevice.pipeline.engine.diagnose`
(:func:`recognise_exception`). It imports the error families and the records, not the
collectors, the fixes or the audits, so that the header costs the first error of a
session little when the failing path has not been imported yet
(:mod:`ipydevice.integrations.ipython_warm`).
"""

from __future__ import annotations

from typing import Any

from ipydevice import registry
from ipydevice._debug import contain
from ipydevice.diagnosis.recognise import recognise
from ipydevice.diagnosis.unwrap import last_line, unwrap
from ipydevice.family import MessageFacts
from ipydevice.model import Diagnosis

__all__ = ["MAX_DEPTH", "base_fields", "from_message", "message_of", "recognise_exception"]

MAX_MESSAGE = 2000
MAX_DEPTH = 3  # wrappers inside wrappers (a group of Ray task errors)


def message_of(exc: BaseException) -> str:
    """``str(exc)`` that survives a broken ``__str__``."""
    try:
        text = str(exc)
    except BaseException as caught:  # the user's exception class: its __str__ may exit
        contain(caught)
        try:
            text = str(exc.args[0]) if exc.args else ""
        except BaseException as again:
            contain(again)
            text = ""
    return text


def recognise_exception(exc: BaseException, depth: int = 0) -> tuple[BaseException, MessageFacts]:
    """Recognises ``exc`` or, failing that, the first device error in its chain.

    torch.compile and some libraries wrap the real error; the chain
    (``__cause__``/``__context__``) is followed up to 8 links, cycles ignored. Then
    the errors ``exc`` wraps (an exception group's members, a worker's text: see
    :mod:`ipydevice.diagnosis.unwrap`); ``exc`` is returned with their facts.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    first = None
    while current is not None and id(current) not in seen and len(seen) < 8:
        seen.add(id(current))
        facts = recognise(message_of(current), type(current).__name__)
        if first is None:
            first = facts
        if facts.is_device_error:
            return current, facts
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    assert first is not None
    for inner in unwrap(exc) if depth < MAX_DEPTH else ():
        if inner.exc is not None and inner.exc is not exc:
            facts = recognise_exception(inner.exc, depth + 1)[1]
        else:
            facts = recognise(*reversed(last_line(inner.text)))
        if facts.is_device_error:
            return exc, facts
    return exc, first


def from_message(exc: BaseException) -> Diagnosis:
    """What the message alone says (family, devices, op): no frame or object is read.
    The header a kernel shows before the traceback, until the diagnosis replaces it."""
    exc, facts = recognise_exception(exc)
    return Diagnosis(is_device_error=facts.is_device_error, **base_fields(exc, facts))


def base_fields(exc: BaseException, facts: MessageFacts) -> dict[str, Any]:
    """The fields of a :class:`~ipydevice.model.Diagnosis` the message gives."""
    family = registry.family_of(facts.family) if facts.family else None
    return {
        "family": facts.family,
        "family_title": (family.title or family.summary) if family is not None else "",
        "exc_type": type(exc).__name__,
        "message": message_of(exc)[:MAX_MESSAGE],
        "summary": facts.summary,
        "devices": facts.devices,
        "argument": facts.argument,
        "op": facts.op,
    }
