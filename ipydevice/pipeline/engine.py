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
import dataclasses
import gc
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ipydevice import (
    registry,
    render,  # noqa: F401  (registers the views a Diagnosis delegates to)
)
from ipydevice import settings as _settings
from ipydevice._debug import contain, failure_line
from ipydevice.audits.common import unwrapped
from ipydevice.audits.explain import explaining_audits
from ipydevice.collect import compiled
from ipydevice.collect.checked import verify_paths
from ipydevice.collect.derived import name_sources
from ipydevice.collect.failing import collect, failing_views
from ipydevice.collect.frames import FrameView
from ipydevice.collect.namespace import default_namespace, user_namespace
from ipydevice.collect.owners import name_owners
from ipydevice.collect.probe import class_name, metadata_reads
from ipydevice.collect.reach import name_frame_chains, name_from_roots
from ipydevice.collect.roots import shortest_held
from ipydevice.collect.scan import Scan
from ipydevice.collect.siblings import add_siblings, name_loop_items
from ipydevice.collect.together import add_together
from ipydevice.diagnosis.advice import advice
from ipydevice.diagnosis.carried import attach
from ipydevice.diagnosis.culprits import Analysis, analyse, device_variable, off_target
from ipydevice.diagnosis.discarded import explain_discarded
from ipydevice.diagnosis.families import op_mismatch
from ipydevice.diagnosis.grouped import group_library_objects
from ipydevice.diagnosis.layers import group_layers
from ipydevice.diagnosis.message import MAX_DEPTH as _MAX_DEPTH
from ipydevice.diagnosis.message import base_fields as _base_fields
from ipydevice.diagnosis.message import from_message, message_of, recognise_exception
from ipydevice.diagnosis.unwrap import Inner, unwrap
from ipydevice.diagnosis.warned import heed_warnings
from ipydevice.diagnosis.wholes import group_wholes
from ipydevice.family import MessageFacts
from ipydevice.fixes.fingerprint import stamp
from ipydevice.fixes.propose import propose_fixes
from ipydevice.model import Diagnosis, Finding, ObjectRecord, Snapshot
from ipydevice.pipeline.remote import combined

__all__ = [
    "collect",
    "diagnose",
    "from_message",
    "last_exception",
    "message_of",
    "recognise_exception",
]


def last_exception() -> BaseException | None:
    """The exception IPython or ``sys`` recorded last, if any."""
    for name in ("last_exc", "last_value"):
        exc = getattr(sys, name, None)
        if isinstance(exc, BaseException):
            return exc
    return sys.exc_info()[1]


def diagnose(
    exc: BaseException | None = None,
    *,
    namespace: Mapping[str, Any] | None = None,
    warned: Sequence[str] = (),
) -> Diagnosis:
    """Explains a device error: who is on which device, where it should go, and how to fix it.

    Args:
        exc: the exception; by default the last one IPython or ``sys`` recorded.
            One without a traceback is diagnosed from its message alone.
        namespace: where the user's names live, for naming objects and applying
            fixes; by default IPython's ``user_ns`` in IPython, else the ``__main__``
            module's globals reached from the traceback.
        warned: the texts of the device warnings that came before the error (in
            the same cell): one that demands a device for an argument decides the
            target when the error's wording demands none (:mod:`ipydevice.diagnosis.warned`).

    With the ``note`` setting on, the diagnosis is attached to ``exc`` too (see
    :mod:`ipydevice.diagnosis.carried`).

    Returns:
        A :class:`~ipydevice.model.Diagnosis`; ``is_device_error`` is False for
        other errors (and then it has no culprits and no fixes).
    """
    if exc is None:
        exc = last_exception()
    if exc is None:
        return Diagnosis(is_device_error=False, notes=("no exception to diagnose",))
    try:
        diagnosis = _diagnosed(exc, namespace, warned=warned)
        if namespace is not None and any(f.steps and not f.made_for for f in diagnosis.fixes):
            # a worker's or a group's fixes, made in blocks: what they were made for
            diagnosis = dataclasses.replace(diagnosis, fixes=stamp(diagnosis.fixes, namespace))
        if _settings.current().note:
            attach(exc, diagnosis)
        return diagnosis
    except BaseException as failure:
        # What the user's objects raise while read (SystemExit included) is
        # contained; a Ctrl-C stops the diagnosis and reaches the caller.
        contain(failure)
        return Diagnosis(
            is_device_error=False,
            exc_type=class_name(exc),
            notes=(failure_line("diagnosis", failure),),
        )


def _diagnosed(
    exc: BaseException,
    namespace: Mapping[str, Any] | None,
    depth: int = 0,
    outer: BaseException | None = None,
    warned: Sequence[str] = (),
) -> Diagnosis:
    inners = unwrap(exc) if depth < _MAX_DEPTH else []
    if inners:  # a group's members, a worker's or a rank's errors: one block each
        wrapper = exc

        def here(inner: Inner) -> Diagnosis:
            assert inner.exc is not None
            return _diagnosed(inner.exc, namespace, depth + 1, wrapper)

        found = combined(inners, namespace if namespace is not None else user_namespace(), here)
        if found is not None:
            return found
    original = exc
    exc, facts = recognise_exception(exc)
    facts = heed_warnings(facts, warned)
    base = _base_fields(exc, facts)
    if not facts.is_device_error:
        return Diagnosis(is_device_error=False, **base)
    settings = _settings.current()
    # a group's member that was never raised: the frames the group was raised from
    framed = exc if exc.__traceback__ is not None or outer is None else outer
    views, around = failing_views(original, framed, exc, settings.max_frames)
    try:
        with _collector_paused(), metadata_reads(settings.time_budget):
            names = namespace if namespace is not None else default_namespace(views)
            scan = collect(views, names, settings, original, message_of(original))
            analysis = analyse_named(facts, scan, views, names, around)
            fixes = propose_fixes(facts, analysis, scan, views)
            causes, fixes, failed = explaining_audits(analysis, fixes, facts, names)
            traced = compiled.traced(
                original, message_of(original), names, fixes, settings.max_fixes
            )
            # what each fix was made for: Apply refuses when a path holds another object
            traced = traced._replace(fixes=stamp(traced.fixes[: settings.max_fixes], names))
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
    facts: MessageFacts,
    scan: Scan,
    views: list[FrameView],
    namespace: Mapping[str, Any],
    around: list[FrameView] | None = None,
) -> Analysis:
    """Analyses, then searches the namespace in depth for the objects the report is
    about; a second analysis runs only when that named one of them."""
    analysis = analyse(facts, scan, views, namespace)
    if name_in_depth(scan, analysis, namespace, views, around):
        analysis = analyse(facts, scan, views, namespace)
    analysis.device_name = device_variable(namespace, analysis.target)
    explain_discarded(analysis.found, views)  # ``x.to(device)`` on its own line
    analysis.found = group_library_objects(analysis.found, namespace)  # ``vae.prior``, ``ema``
    analysis.found = group_layers(analysis.found, scan, namespace)  # ``model.heads['task1']``
    analysis.found = group_wholes(
        analysis.found, namespace, views, analysis.target
    )  # ``fast_weights``
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
    internal = _internal_names(scan) - {f.name for f in analysis.culprits}
    records = tuple(r for r in scan.records(compact=True) if r.name not in internal)
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
        snapshot=Snapshot(
            _with_culprit_rows(records, analysis.culprits), tuple(scan.settled_notes())
        ),
        frames=tuple(v.summary for v in views) + traced.frames,
        notes=tuple(scan.notes) + analysis.notes + failed + traced.notes,
        **_relabelled(base, analysis.culprits),
    )


def _internal_names(scan: Scan) -> set[str]:
    """Library frames' ``self`` that only wraps a model already listed
    (``self in DataParallel.forward``, ``self in
    DistributedDataParallel._log_and_throw`` beside ``model``): torch's
    internals, not an object of the user's, so not a row of its own."""
    names = set()
    for entry in scan.entries.values():
        if entry.named or entry.user or entry.module is None:
            continue
        if entry.path != (("local", "self"),):
            continue
        inner = unwrapped(entry.obj)
        listed = scan.entries.get(id(inner)) if inner is not entry.obj else None
        if listed is not None and listed.named:
            names.add(entry.name)
    return names


def _with_culprit_rows(
    records: tuple[ObjectRecord, ...], culprits: tuple[Finding, ...]
) -> tuple[ObjectRecord, ...]:
    """Every culprit has its row in the table: one the scan keeps no record of
    (``opt.state``, the state of an optimizer listed as ``opt``) gets a row from
    its finding."""
    named = {r.name for r in records}
    extra = tuple(
        ObjectRecord(f.name, f.kind, "", f.device, where=f.where)
        for f in culprits
        if f.name not in named
    )
    return records + extra


def _relabelled(base: dict[str, Any], culprits: tuple[Finding, ...]) -> dict[str, Any]:
    """The generic wording (``Expected all tensors ...``, ``Tensor on device ...``)
    of an error that a family knows by its culprits (optimizer state on another
    device: ``foreach=False`` raises the generic wording, ``foreach=True`` the
    optimizer's own) gets that family's label, whichever way it was raised."""
    rules = {f.rule for f in culprits}
    if base.get("family") != op_mismatch.ID or len(rules) != 1:
        return base
    family = registry.family_of(next(iter(rules)))
    if family is None:
        return base
    return {
        **base,
        "family": family.id,
        "family_title": family.title or family.summary,
        "summary": family.summary,
    }


def _reference(analysis: Analysis) -> str:
    top = analysis.top_module
    if top is not None and top.module is not None and top.module.majority() == analysis.target:
        return top.name
    return ""


def _module_label(entry: Any) -> str:
    if entry is None:
        return ""
    return f"{entry.name} ({class_name(entry.obj)})"


def name_in_depth(
    scan: Scan,
    analysis: Analysis,
    namespace: Mapping[str, Any],
    views: list[FrameView] | None = None,
    around: list[FrameView] | None = None,
) -> bool:
    """Searches the namespace in depth for the objects the report is about.

    Returns True when a name changed (the findings must then be rebuilt).
    """
    wanted = {id(e.obj) for c in analysis.found for e in c.entries}
    wanted |= {id(c.owner.obj) for c in analysis.found if c.owner is not None}
    for entry in (analysis.top_module, analysis.failing_module):
        if entry is not None:
            wanted.add(id(entry.obj))
    before = {key for key, entry in scan.entries.items() if entry.named}
    # Owners over aliases: ``p2`` of ``zip(m1.parameters(), m2.parameters())`` is ``m2.weight``.
    owned = name_owners(scan, namespace, wanted)
    scan.name_from(namespace, only=wanted)
    # Class dicts and the user's own modules: ``self.MEAN`` is ``Stats.MEAN``.
    owned |= bool(name_from_roots(scan, namespace, wanted))
    # What a user's frame read through an object no walk enters: ``vae.prior.loc``.
    owned |= bool(name_frame_chains(scan, views or [], namespace, wanted))
    # A cell's loop variable is the element of what the loop runs over: ``grad_accum[0]``.
    owned |= name_loop_items(scan, views or [], wanted)
    # Loops over a holder: ``for head in heads`` reaches ``heads``' other elements too.
    target, loops = analysis.target, [*(around or []), *(views or [])]
    if target:
        owned |= add_siblings(scan, loops, wanted, lambda e: off_target(e, target))
        # Tensors that go together: a distribution's ``scale`` beside its ``loc``.
        owned |= add_together(scan, wanted, lambda e: off_target(e, target))
    # Sources over derived locals: ``a = self.table[t]`` is ``helper.table``.
    owned |= name_sources(scan, views or [], namespace, wanted)
    # The shortest path from a name the user holds: ``mll.model.x`` is ``gp.x``.
    owned |= shortest_held(scan, namespace, wanted)
    # Every path shown evaluates back to its object: one that does not loses its name.
    owned |= verify_paths(scan, namespace, wanted)
    return owned or any(entry.named and key not in before for key, entry in scan.entries.items())
