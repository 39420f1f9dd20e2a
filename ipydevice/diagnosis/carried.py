"""The diagnosis an exception carries: a PEP 678 note and a plain payload.

Where ipydevice diagnoses an error in a process that shows no panel (a script, a
rank, a DataLoader worker, a test), it attaches the diagnosis to the exception
itself, so that whatever shows the exception later (the notebook that launched the
process, torchrun's root-cause summary, Ray, pytest, a log, an assistant reading
the traceback) shows it too:

* a **note** (``exc.add_note``; before Python 3.11 the ``__notes__`` list that
  ``traceback`` and the ``exceptiongroup`` backport print): the headline, the first
  culprit and the best fix, as text that :func:`parse_notes` reads back from any
  traceback text that carries it (a worker's re-raised message, an error file);
* a **payload**, ``exc.__ipydevice__``: a plain ``dict`` of strings, numbers and
  lists (never a tensor, frame or ipydevice class), so the exception pickles and
  unpickles where ipydevice is not even installed.

Both live in the exception's ``__dict__``, which ``BaseException`` pickles.
"""

from __future__ import annotations

import os
import re
import textwrap
from dataclasses import asdict
from typing import Any

from ipydevice.model import Diagnosis, Finding, Fix, Scope, Step

__all__ = [
    "ATTRIBUTE",
    "attach",
    "findings_of",
    "fix_of",
    "note_text",
    "parse_notes",
    "payload",
    "payload_of",
]

#: The attribute that holds the payload on an exception.
ATTRIBUTE = "__ipydevice__"
_VERSION = 1
_MAX_CULPRITS = 3
_MAX_TEXT = 2000
_MAX_CODE_LINES = 8

# A launcher may put its own prefix before every line (torchrun's indent, "[rank1]:").
_HEAD = re.compile(
    r"^(?P<prefix>\s*(?:\[[\w ./()-]+\]:? ?)?\s*)ipydevice(?: \((?P<where>[^\n]*?)\))?: (?P<headline>.+)$"
)
_CULPRIT = re.compile(
    r"^  culprit: `(?P<name>.+)` on (?P<device>\S+)(?:, should be on (?P<target>\S+))?$"
)
_FIX = re.compile(r"^  fix: (?P<title>.+?)(?: \[at (?P<location>[^\[\]]+:\d+)\])?$")


def _cut(text: str, limit: int = _MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def payload_of(diagnosis: Diagnosis, where: str = "") -> dict[str, Any]:
    """The compact payload of a device error's diagnosis: strings, numbers, lists."""
    fix = diagnosis.fixes[0] if diagnosis.fixes else None
    return {
        "version": _VERSION,
        "where": where,
        "pid": os.getpid(),
        "family": diagnosis.family or "",
        "exc_type": diagnosis.exc_type,
        "message": _cut(diagnosis.message),
        "summary": diagnosis.summary,
        "devices": list(diagnosis.devices),
        "target": diagnosis.target,
        "target_reason": diagnosis.target_reason,
        "headline": _cut(diagnosis.headline, 500),
        "culprits": [asdict(f) for f in diagnosis.culprits[:_MAX_CULPRITS]],
        "fix": _plain_fix(fix) if fix is not None else None,
    }


def _plain_fix(fix: Fix) -> dict[str, Any]:
    data = asdict(fix)
    data["code"] = _cut(fix.code)
    data["original"] = ""  # the whole failed cell: not needed elsewhere
    data["steps"] = [
        {"action": s.action, "path": [list(step) for step in s.path], "target": s.target}
        for s in fix.steps
    ]
    return data


def note_text(data: dict[str, Any]) -> str:
    """The note: ``ipydevice (where): headline``, the first culprit, the best fix."""
    where = f" ({data['where']})" if data.get("where") else ""
    lines = [f"ipydevice{where}: {data.get('headline', '')}"]
    culprits = data.get("culprits") or []
    if culprits:
        first = culprits[0]
        target = first.get("target") or data.get("target")
        should = f", should be on {target}" if target else ""
        lines.append(f"  culprit: `{first.get('name', '')}` on {first.get('device', '')}{should}")
    fix = data.get("fix")
    if fix:
        at = (
            f" [at {fix['location']}]"
            if fix.get("scope") == "source" and fix.get("location")
            else ""
        )
        lines.append(f"  fix: {fix.get('title', '')}{at}")
        code = textwrap.dedent(str(fix.get("code", ""))).strip("\n").splitlines()
        if len(code) > _MAX_CODE_LINES:
            code = [*code[: _MAX_CODE_LINES - 1], "…"]
        lines += [f"    {line}" for line in code]
    return "\n".join(lines)


def payload(exc: BaseException) -> dict[str, Any] | None:
    """The payload ``exc`` carries, or None."""
    try:
        data = vars(exc).get(ATTRIBUTE)
    except TypeError:  # no __dict__
        return None
    if isinstance(data, dict) and data.get("version") == _VERSION:
        return data
    return None


def attach(exc: BaseException, diagnosis: Diagnosis, where: str = "") -> bool:
    """Attaches ``diagnosis`` to ``exc`` as a note and a payload, once.

    Returns True when it attached them (a device error that carried none yet)."""
    if not diagnosis.is_device_error or payload(exc) is not None:
        return False
    data = payload_of(diagnosis, where)
    try:
        setattr(exc, ATTRIBUTE, data)
    except (AttributeError, TypeError):  # an exception class that takes no attribute
        return False
    add_note(exc, note_text(data))
    return True


def add_note(exc: BaseException, note: str) -> None:
    """PEP 678's ``add_note``, or the ``__notes__`` list it keeps before Python 3.11."""
    adder = getattr(exc, "add_note", None)
    if callable(adder):
        adder(note)
        return
    notes = getattr(exc, "__notes__", None)
    if not isinstance(notes, list):
        notes = []
        exc.__notes__ = notes  # type: ignore[attr-defined]
    notes.append(note)


def parse_notes(text: str) -> list[dict[str, Any]]:
    """The payloads (as far as the text tells) of the notes in a traceback's text."""
    found: list[dict[str, Any]] = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        head = _HEAD.match(line)
        if head is None:
            continue
        data: dict[str, Any] = {
            "version": _VERSION,
            "where": head["where"] or "",
            "headline": head["headline"],
            "culprits": [],
            "fix": None,
        }
        code: list[str] = []
        prefix = head["prefix"]
        for raw in lines[index + 1 :]:
            if not raw.startswith(prefix):
                break
            line_after = raw[len(prefix) :]
            culprit, fix = _CULPRIT.match(line_after), _FIX.match(line_after)
            if culprit is not None:
                data["culprits"] = [{k: v or "" for k, v in culprit.groupdict().items()}]
                data["target"] = culprit["target"] or ""
            elif fix is not None:
                location = fix["location"] or ""
                scope = "source" if location else "namespace"
                data["fix"] = {
                    "title": fix["title"],
                    "code": "",
                    "scope": scope,
                    "location": location,
                }
            elif line_after.startswith("    ") and data["fix"] is not None:
                code.append(line_after[4:])
            else:
                break
        if data["fix"] is not None:
            data["fix"]["code"] = "\n".join(code)
        if data not in found:
            found.append(data)
    return found


def findings_of(data: dict[str, Any]) -> tuple[Finding, ...]:
    """The payload's culprits as findings, said to be where the payload comes from."""
    where = str(data.get("where") or "another process")
    out = []
    for item in data.get("culprits") or []:
        out.append(
            Finding(
                name=str(item.get("name", "")),
                device=str(item.get("device", "")),
                kind=str(item.get("kind", "tensor")),
                where=where,
                why=f"in {where}: {item.get('why') or data.get('headline', '')}",
                rule="remote",
                target=str(item.get("target") or data.get("target") or ""),
                location=str(item.get("location", "")),
            )
        )
    return tuple(out)


def fix_of(data: dict[str, Any], keep_steps: bool) -> Fix | None:
    """The payload's best fix; its steps only where ``keep_steps`` (the names it
    moves are the notebook's own, as in a forked worker)."""
    fix = data.get("fix")
    if not isinstance(fix, dict) or not fix.get("code"):
        return None
    where = str(data.get("where") or "another process")
    steps: tuple[Step, ...] = ()
    if keep_steps:
        steps = tuple(
            Step(s["action"], tuple(tuple(p) for p in s["path"]), s["target"])
            for s in fix.get("steps") or []
        )
    scope: Scope = "namespace"
    if fix.get("scope") in ("cell", "source"):
        scope = fix["scope"]
    return Fix(
        title=f"{fix.get('title', '')} (from {where})",
        code=str(fix["code"]),
        scope=scope,
        location=str(fix.get("location", "")),
        steps=steps,
        filename=str(fix.get("filename", "")),
        lineno=int(fix.get("lineno", 0) or 0),
        end_lineno=int(fix.get("end_lineno", 0) or 0),
    )
