"""From an exception to a :class:`~ipydevice.model.Diagnosis`.

The pipeline, one call each in :func:`diagnose`:

1. recognise the message (:mod:`ipydevice.diagnosis.recognise`, the error families);
2. collect what the failing frames hold (:mod:`ipydevice.collect.failing`; torch.compile's
   frames are cut by :mod:`ipydevice.collect.compiled`);
3. analyse: the target device and the culprits (:mod:`ipydevice.diagnosis.culprits`),
   named from the user's namespace;
4. fix (:mod:`ipydevice.fixes.propose`);
5. audit: the audits that explain the error (:mod:`ipydevice.audits.explain`);
6. snapshot: keep only text (:class:`~ipydevice.model.Diagnosis`).

The live objects (frames, tensors, modules) are held by local variables of
:func:`diagnose` only and are dropped before it returns.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any

from ipydevice import (
    render,  # noqa: F401  (registers the views a Diagnosis delegates to)
)
from ipydevice import settings as _settings
from ipydevice._debug import contain, failure_line
from ipydevice.audits.explain import explaining_audits
from ipydevice.collect import compiled
from ipydevice.collect.failing import collect
from ipydevice.collect.frames import FrameView
from ipydevice.collect.namespace import user_namespace
from ipydevice.collect.probe import class_name, metadata_reads
from ipydevice.collect.scan import Scan
from ipydevice.diagnosis.advice import advice
from ipydevice.diagnosis.culprits import Analysis, analyse, device_variable
from ipydevice.diagnosis.family import MessageFacts
from ipydevice.diagnosis.recognise import recognise
from ipydevice.fixes.propose import propose_fixes
from ipydevice.model import Diagnosis, Finding, Snapshot

__all__ = ["collect", "diagnose", "last_exception", "message_of", "recognise_exception"]

_MAX_MESSAGE = 2000


def last_exception() -> BaseException | None:
    """The exception IPython or ``sys`` recorded last, if any."""
    for name in ("last_exc", "last_value"):
        exc = getattr(sys, name, None)
        if isinstance(exc, BaseException):
            return exc
    return sys.exc_info()[1]


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


def recognise_exception(exc: BaseException) -> tuple[BaseException, MessageFacts]:
    """Recognises ``exc`` or, failing that, the first device error in its chain.

    torch.compile and some libraries wrap the real error; the chain
    (``__cause__``/``__context__``) is followed up to 8 links, cycles ignored.
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
    return exc, first


def diagnose(
    exc: BaseException | None = None,
    *,
    namespace: Mapping[str, Any] | None = None,
) -> Diagnosis:
    """Explains a device error: who is on which device, where it should go, and how to fix it.

    Args:
        exc: the exception; by default the last one IPython or ``sys`` recorded.
            One without a traceback is diagnosed from its message alone.
        namespace: where the user's names live, for naming objects and applying
            fixes; by default IPython's ``user_ns`` in IPython, else the ``__main__``
            module's globals reached from the traceback.

    Returns:
        A :class:`~ipydevice.model.Diagnosis`; ``is_device_error`` is False for
        other errors (and then it has no culprits and no fixes).
    """
    if exc is None:
        exc = last_exception()
    if exc is None:
        return Diagnosis(is_device_error=False, notes=("no exception to diagnose",))
    try:
        return _diagnosed(exc, namespace)
    except BaseException as failure:
        # What the user's objects raise while read (SystemExit included) is
        # contained; a Ctrl-C stops the diagnosis and reaches the caller.
        contain(failure)
        return Diagnosis(
            is_device_error=False,
            exc_type=class_name(exc),
            notes=(failure_line("diagnosis", failure),),
        )


def _diagnosed(exc: BaseException, namespace: Mapping[str, Any] | None) -> Diagnosis:
    original = exc
    exc, facts = recognise_exception(exc)
    base = _base_fields(exc, facts)
    if not facts.is_device_error:
        return Diagnosis(is_device_error=False, **base)
    settings = _settings.current()
    views = compiled.failing_frames(original, exc, settings.max_frames)
    try:
        with _collector_paused(), metadata_reads():
            names = namespace if namespace is not None else default_namespace(views)
            scan = collect(views, names, settings)
            analysis = analyse_named(facts, scan, views, names)
            fixes = propose_fixes(facts, analysis, scan, views)
            causes, fixes, failed = explaining_audits(analysis, fixes, facts, names)
            traced = compiled.traced(
                original, message_of(original), names, fixes, settings.max_fixes
            )
            return _snapshot(facts, base, scan, views, analysis, causes, traced, failed)
    except BaseException as failure:
        contain(failure)
        return Diagnosis(
            is_device_error=True,
            advice=advice(facts, ""),
            frames=tuple(v.summary for v in views),
            notes=(failure_line("diagnosis", failure),),
            **base,
        )
    finally:
        del views


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The scan allocates many small objects next to a heap full of tensors: a
    full collection in the middle would cost more than the whole diagnosis."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def analyse_named(
    facts: MessageFacts, scan: Scan, views: list[FrameView], namespace: Mapping[str, Any]
) -> Analysis:
    """Analyses, then searches the namespace in depth for the objects the report is
    about; a second analysis runs only when that named one of them."""
    analysis = analyse(facts, scan, views)
    if name_in_depth(scan, analysis, namespace):
        analysis = analyse(facts, scan, views)
    analysis.device_name = device_variable(namespace, analysis.target)
    return analysis


def _snapshot(
    facts: MessageFacts,
    base: dict[str, Any],
    scan: Scan,
    views: list[FrameView],
    analysis: Analysis,
    causes: tuple[Finding, ...],
    traced: compiled.Traced,
    failed: tuple[str, ...],
) -> Diagnosis:
    """The diagnosis as text only: what it keeps once the live objects are dropped."""
    return Diagnosis(
        is_device_error=True,
        target=analysis.target,
        target_reason=analysis.target_reason,
        advice=advice(facts, analysis.target),
        reference=_reference(analysis),
        failing_module=_module_label(analysis.failing_module),
        culprits=analysis.culprits,
        causes=causes,
        fixes=traced.fixes[: scan.settings.max_fixes],
        snapshot=Snapshot(scan.records(compact=True), tuple(scan.notes)),
        frames=tuple(v.summary for v in views) + traced.frames,
        notes=tuple(scan.notes) + analysis.notes + failed + traced.notes,
        **base,
    )


def _reference(analysis: Analysis) -> str:
    top = analysis.top_module
    if top is not None and top.module is not None and top.module.majority() == analysis.target:
        return top.name
    return ""


def _module_label(entry: Any) -> str:
    if entry is None:
        return ""
    return f"{entry.name} ({class_name(entry.obj)})"


def _base_fields(exc: BaseException, facts: MessageFacts) -> dict[str, Any]:
    return {
        "family": facts.family,
        "exc_type": type(exc).__name__,
        "message": message_of(exc)[:_MAX_MESSAGE],
        "summary": facts.summary,
        "devices": facts.devices,
        "argument": facts.argument,
        "op": facts.op,
    }


def default_namespace(views: list[FrameView]) -> Mapping[str, Any]:
    """IPython's ``user_ns`` in IPython, else the ``__main__`` globals the traceback
    went through (a script run by ``runpy`` has its own), else ``__main__``'s."""
    if sys.modules.get("IPython") is None or not _in_ipython():
        for view in views:
            if view.frame.f_globals.get("__name__") == "__main__":
                return view.frame.f_globals
    return user_namespace()


def _in_ipython() -> bool:
    try:
        return sys.modules["IPython"].get_ipython() is not None
    except Exception:
        return False


def name_in_depth(scan: Scan, analysis: Analysis, namespace: Mapping[str, Any]) -> bool:
    """Searches the namespace in depth for the objects the report is about.

    Returns True when a name changed (the findings must then be rebuilt).
    """
    wanted = {id(e.obj) for c in analysis.found for e in c.entries}
    wanted |= {id(c.owner.obj) for c in analysis.found if c.owner is not None}
    for entry in (analysis.top_module, analysis.failing_module):
        if entry is not None:
            wanted.add(id(entry.obj))
    before = {key for key, entry in scan.entries.items() if entry.named}
    scan.name_from(namespace, only=wanted)
    return any(entry.named and key not in before for key, entry in scan.entries.items())


def diagnose_traceback(exc_type: type, value: BaseException, tb: TracebackType | None) -> Diagnosis:
    """:func:`diagnose` for ``sys.excepthook``-style arguments."""
    if value.__traceback__ is None and tb is not None:
        value = value.with_traceback(tb)
    return diagnose(value)
