"""The diagnosis of an exception that wraps device errors (see :mod:`ipydevice.diagnosis.unwrap`).

Each wrapped error becomes one block: an error of this process (a group's member)
is diagnosed as if raised alone; an error of another process (a DataLoader worker,
a rank, a Ray task, a pool worker) is told from what it carries: its payload (the
only source of another process's fix), else the note in its traceback's text (its
words: culprits and the fix's title, never code; :mod:`ipydevice.diagnosis.carried`),
else its message alone. The notebook's namespace is never scanned for another process's
culprits: its objects are not the ones that failed; the audits of the classes the
family names (a DataLoader whose Dataset moves samples to the GPU) still explain
how that process came to fail, as causes. Blocks are merged into one
:class:`~ipydevice.model.Diagnosis`: the culprits of each process, said to be
there, and each distinct fix once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ipydevice.diagnosis.advice import advice
from ipydevice.diagnosis.carried import (
    cut_note,
    findings_of,
    fix_of,
    parse_notes,
    payload,
    received,
    told_fix_note,
)
from ipydevice.diagnosis.recognise import recognise
from ipydevice.diagnosis.unwrap.inner import Inner, last_line
from ipydevice.diagnosis.worker_reads import WorkerReads, dataset_path, worker_reads
from ipydevice.model import Diagnosis, Finding, Fix, FrameSummary

__all__ = ["combined"]

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
_GENERIC = re.compile(r"(process \d+)?")  # the label of a process that knew no rank
_MAX_BLOCKS = 16
_MAX_FRAMES = 40
_MAX_TEXT = 256 * 1024  # of another process's traceback text: its end is read


def combined(
    inners: list[Inner],
    namespace: Mapping[str, Any] | None,
    here: Callable[[Inner], Diagnosis],
) -> Diagnosis | None:
    """One diagnosis from the wrapped errors' blocks; None when none is a device error.

    ``here`` diagnoses an error of this process (the engine, with its frames)."""
    blocks: list[Diagnosis] = []
    for inner in inners[:_MAX_BLOCKS]:
        if not inner.remote and inner.exc is not None:
            block: Diagnosis | None = _labelled(here(inner), inner.where)
        else:
            block = _remote(inner, namespace)
        if block is not None and block.is_device_error:
            blocks.append(block)
    if not blocks:
        return None
    if len(blocks) == 1:
        return blocks[0]
    return _merged(blocks)


def _labelled(d: Diagnosis, where: str) -> Diagnosis:
    from dataclasses import replace

    if not d.is_device_error:
        return d
    return replace(d, notes=(f"raised as {where}", *d.notes))


def _remote(inner: Inner, namespace: Mapping[str, Any] | None) -> Diagnosis | None:
    text = inner.text if len(inner.text) <= _MAX_TEXT else inner.text[-_MAX_TEXT:]
    sent = _sent(inner)
    told = None
    if sent is None and text:
        parsed = parse_notes(text)
        told = parsed[0] if parsed else None
    data = sent if sent is not None else told
    if data is not None and _GENERIC.fullmatch(str(data.get("where") or "")):
        data = {**data, "where": inner.where}  # what the wrapper says is more precise
    if inner.exc is not None and inner.exc.args and isinstance(inner.exc.args[0], str):
        exc_type, message = type(inner.exc).__name__, inner.exc.args[0][:_MAX_TEXT]
    else:
        exc_type, message = last_line(text)
    facts = recognise(message, exc_type)
    if not facts.is_device_error and data is None:
        return None
    where = _where(inner, namespace)
    target = str((data or {}).get("target") or "")
    # a fix only from a payload sent with the exception: text is data, never code
    fix = fix_of(data) if data is not None and sent is not None else None
    frames = _frames(text)
    notes = [
        f"raised in {inner.where}: its objects live in that process, so none of this "
        "namespace's is blamed"
    ]
    reads = _dataset_reads(inner, namespace, frames, facts.devices) if sent is None else None
    if reads is not None:
        notes = [
            f"raised in {inner.where}: its Dataset is a copy of this one's, so what its "
            "failing line read is named here, and no other object of this namespace"
        ]
    if sent is None and inner.hint:
        notes.append(f"for {inner.where}'s own culprit and fix: {inner.hint}")
    if data is not None:
        notes += [n for n in (told_fix_note(data, inner.where), cut_note(data, inner.where)) if n]
    reason = str((data or {}).get("target_reason") or "")
    culprits = findings_of(data) if data else ()
    family = facts.family or str((data or {}).get("family") or "") or None
    causes, explained = _explained(family, namespace, target)
    fixes: tuple[Fix, ...] = ((fix,) if fix is not None else ()) + tuple(
        f for f in explained if fix is None or f.code != fix.code
    )
    if reads is not None:
        target, reason, culprits = reads.target, reads.target_reason, reads.culprits
        fixes = reads.fixes + tuple(f for f in explained if f not in reads.fixes)
    return Diagnosis(
        is_device_error=True,
        family=family,
        exc_type=exc_type,
        message=message[:2000],
        summary=facts.summary,
        devices=facts.devices,
        argument=facts.argument,
        op=facts.op,
        target=target,
        target_reason=reason,
        advice=advice(facts, target),
        failing_module=where,
        culprits=culprits,
        causes=causes,
        fixes=fixes,
        frames=frames,
        notes=tuple(notes),
    )


def _sent(inner: Inner) -> dict[str, Any] | None:
    """The payload sent with the wrapped error: on its exception, or given by the
    unwrapper (``extra["payload"]``: what the transport carried beside the text)."""
    if inner.exc is not None:
        data = payload(inner.exc)
        if data is not None:
            return data
    return received(inner.extra.get("payload"))


def _dataset_reads(
    inner: Inner,
    namespace: Mapping[str, Any] | None,
    frames: tuple[FrameSummary, ...],
    devices: tuple[str, ...],
) -> WorkerReads | None:
    """What a worker's failing line read from the Dataset this namespace holds."""
    dataset = inner.extra.get("dataset")
    if dataset is None:
        return None
    path = dataset_path(dataset, namespace)
    return worker_reads(dataset, path, frames, devices, inner.where, namespace)


def _explained(
    family: str | None, namespace: Mapping[str, Any] | None, target: str
) -> tuple[tuple[Finding, ...], tuple[Fix, ...]]:
    """What the notebook's objects of the classes the family names tell about how
    the other process came to fail (a Dataset that moves samples to the GPU), as
    causes: they are not that process's culprits."""
    from ipydevice.audits.explain import family_causes

    return family_causes(family, namespace, target)


def _where(inner: Inner, namespace: Mapping[str, Any] | None) -> str:
    """``DataLoader worker 0, Dataset `ds` (Pairs)``: the process, and the Dataset by
    the name the notebook gives it."""
    dataset = inner.extra.get("dataset")
    if dataset is None:
        return inner.where
    kind = type(dataset).__name__
    name = next(
        (
            key
            for key, value in (namespace or {}).items()
            if value is dataset and isinstance(key, str) and not key.startswith("_")
        ),
        "",
    )
    return f"{inner.where}, Dataset `{name}` ({kind})" if name else f"{inner.where}, a {kind}"


def _frames(text: str) -> tuple[FrameSummary, ...]:
    lines = text.splitlines()
    out = []
    for index, line in enumerate(lines):
        match = _FRAME.match(line)
        if match is None:
            continue
        source = lines[index + 1].strip() if index + 1 < len(lines) else ""
        if _FRAME.match(source) or source.startswith(("^", "~")):
            source = ""
        filename = match["file"]
        out.append(
            FrameSummary(
                filename=filename,
                lineno=int(match["line"]),
                function=match["func"],
                line=source,
                is_user="site-packages" not in filename and not filename.startswith("<frozen"),
            )
        )
    return tuple(out[-_MAX_FRAMES:])


def _merged(blocks: list[Diagnosis]) -> Diagnosis:
    from dataclasses import replace

    first = blocks[0]
    culprits: list[Finding] = []
    causes: list[Finding] = []
    fixes: list[Fix] = []
    codes: set[str] = set()
    wheres: list[str] = []
    notes: list[str] = []
    for block in blocks:
        culprits += [c for c in block.culprits if c not in culprits]
        causes += [c for c in block.causes if c not in causes]
        for fix in block.fixes[:1]:
            if fix.code not in codes:
                codes.add(fix.code)
                fixes.append(fix)
        if block.failing_module and block.failing_module not in wheres:
            wheres.append(block.failing_module)
        notes += [n for n in block.notes if n not in notes]
    return replace(
        first,
        culprits=tuple(culprits),
        causes=tuple(causes),
        fixes=tuple(fixes),
        failing_module=" and ".join(wheres),
        notes=tuple(notes),
    )
