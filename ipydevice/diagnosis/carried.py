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

from ipydevice.model import Diagnosis, Finding, Fix, Scope

__all__ = [
    "ATTRIBUTE",
    "attach",
    "carries",
    "cut_note",
    "findings_of",
    "fix_of",
    "note_text",
    "parse_notes",
    "payload",
    "payload_of",
    "received",
    "told_fix_note",
]

#: The attribute that holds the payload on an exception.
ATTRIBUTE = "__ipydevice__"
_VERSION = 1
_MAX_CULPRITS = 3
_MAX_TEXT = 2000
_MAX_CODE_LINES = 8
_MAX_NOTES = 16

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


def payload(carrier: Any) -> dict[str, Any] | None:
    """The payload ``carrier`` (an exception, or the object a transport sent with
    it) carries, as :func:`received` keeps it, or None."""
    try:
        data = vars(carrier).get(ATTRIBUTE)
    except TypeError:  # no __dict__
        return None
    return received(data)


def carries(exc: BaseException) -> bool:
    """True when ``exc`` carries a payload already."""
    try:
        data = vars(exc).get(ATTRIBUTE)
    except TypeError:
        return False
    return type(data) is dict and dict.get(data, "version") == _VERSION


# -- a payload where it arrives ------------------------------------------------------------
#
# A payload comes from another process: it is read as plain data of the shape
# ``payload_of`` gives, each field of its own type, every count and text bounded
# before anything renders it, and what was cut said (``cut``, shown as a note).

_RECEIVED_CULPRITS = 16
_RECEIVED_DEVICES = 16
_RECEIVED_CODE = 8000
_RECEIVED_CODE_LINES = 120
_SHORT = 200
_DEVICE = re.compile(r"[a-z][a-z0-9_]{0,30}(?::\d{1,6})?", re.I)
_TEXTS = {
    "where": _SHORT,
    "family": _SHORT,
    "exc_type": _SHORT,
    "message": _MAX_TEXT,
    "summary": 500,
    "target_reason": 500,
    "headline": 500,
}
_CULPRIT_TEXTS = {
    "name": 500,
    "device": _SHORT,
    "kind": _SHORT,
    "where": _SHORT,
    "why": _MAX_TEXT,
    "rule": _SHORT,
    "location": 500,
}
_FIX_TEXTS = {"title": 500, "scope": _SHORT, "location": 500, "filename": 1000}


def received(raw: Any) -> dict[str, Any] | None:
    """A payload as it is kept where it arrives (None when ``raw`` is not one): a new
    plain ``dict`` of the fields :func:`payload_of` writes, each of its own type (a
    field of another type is empty), texts and lists cut to a bound, a target that
    is not a device's name dropped, and ``cut``: what was cut, in words.

    Bounded before anything reads it: 20,000 culprits or 10 MB strings cost what
    the bounds do."""
    if type(raw) is not dict or dict.get(raw, "version") != _VERSION:
        return None
    cuts: list[str] = []
    get = dict.get
    data: dict[str, Any] = {"version": _VERSION}
    for key, limit in _TEXTS.items():
        data[key] = _text(get(raw, key), limit, key, cuts)
    pid = get(raw, "pid")
    data["pid"] = pid if type(pid) is int else None
    data["target"] = _device(get(raw, "target"))
    data["devices"] = [
        _text(d, _SHORT, "devices", cuts)
        for d in _items(get(raw, "devices"), _RECEIVED_DEVICES, "devices", cuts)
    ]
    data["culprits"] = [
        _culprit(item, cuts)
        for item in _items(get(raw, "culprits"), _RECEIVED_CULPRITS, "culprits", cuts)
        if type(item) is dict
    ]
    fix = get(raw, "fix")
    data["fix"] = _fix(fix, cuts) if type(fix) is dict else None
    data["cut"] = cuts
    return data


def _culprit(item: dict[str, Any], cuts: list[str]) -> dict[str, Any]:
    out = {
        key: _text(dict.get(item, key), limit, "culprits", cuts)
        for key, limit in _CULPRIT_TEXTS.items()
    }
    out["target"] = _device(dict.get(item, "target"))
    return out


def _fix(fix: dict[str, Any], cuts: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        key: _text(dict.get(fix, key), limit, "the fix", cuts) for key, limit in _FIX_TEXTS.items()
    }
    code = _text(dict.get(fix, "code"), _RECEIVED_CODE, "the fix's code", cuts)
    lines = code.splitlines()
    if len(lines) > _RECEIVED_CODE_LINES:
        _say(cuts, "the fix's code")
        code = "\n".join(lines[:_RECEIVED_CODE_LINES])
    out["code"] = code
    for key in ("lineno", "end_lineno"):
        value = dict.get(fix, key)
        out[key] = value if type(value) is int and 0 <= value < 10**9 else 0
    out["original"] = ""
    out["steps"] = []  # a move names this process's objects: never taken from another's
    return out


def _text(value: Any, limit: int, what: str, cuts: list[str]) -> str:
    if type(value) is not str:
        return ""
    if len(value) <= limit:
        return value
    _say(cuts, what)
    return value[: limit - 1] + "…"


def _items(value: Any, limit: int, what: str, cuts: list[str]) -> list[Any]:
    if type(value) is not list:
        return []
    if len(value) > limit:
        _say(cuts, f"{len(value):,} {what}, the first {limit} kept")
    return value[:limit]


def _device(value: Any) -> str:
    return value if type(value) is str and _DEVICE.fullmatch(value) else ""


def _say(cuts: list[str], what: str) -> None:
    if what not in cuts and len(cuts) < 8:
        cuts.append(what)


def cut_note(data: dict[str, Any], where: str) -> str:
    """The note that says what of ``where``'s payload was cut where it arrived, or ''."""
    cuts = data.get("cut") or []
    if not cuts:
        return ""
    return f"what {where} sent was cut to ipydevice's bounds: {', '.join(cuts)}"


def attach(exc: BaseException, diagnosis: Diagnosis, where: str = "") -> bool:
    """Attaches ``diagnosis`` to ``exc`` as a note and a payload, once.

    Returns True when it attached them (a device error that carried none yet)."""
    if not diagnosis.is_device_error or carries(exc):
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
    """What the notes in a traceback's text say, as payloads marked ``told``.

    Text is data, never code: whoever wrote the text (a Dataset's error message, a
    log line) can write lines shaped like a note. What it says is shown as that
    process's words; :func:`fix_of` never makes a fix of it."""
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
        kept = received(data)
        if kept is not None and kept not in found and len(found) < _MAX_NOTES:
            found.append(kept | {"told": True})
    return found


def findings_of(data: dict[str, Any]) -> tuple[Finding, ...]:
    """The payload's culprits as findings, said to be where the payload comes from
    (and, for a note read from text, that its text says so)."""
    where = str(data.get("where") or "another process")
    said = f"in {where}" + (" (as its traceback's text says)" if data.get("told") else "")
    out = []
    for item in data.get("culprits") or []:
        out.append(
            Finding(
                name=str(item.get("name", "")),
                device=str(item.get("device", "")),
                kind=str(item.get("kind") or "tensor"),
                where=where,
                why=f"{said}: {item.get('why') or data.get('headline', '')}",
                rule="remote",
                target=str(item.get("target") or data.get("target") or ""),
                location=str(item.get("location", "")),
            )
        )
    return tuple(out)


def fix_of(data: dict[str, Any]) -> Fix | None:
    """The best fix of a payload carried with the exception (never of a note read
    from text: :func:`parse_notes`), as code to read, copy or insert. It has no
    steps: the objects it names are that process's, not this one's."""
    fix = data.get("fix")
    if data.get("told") or not isinstance(fix, dict) or not fix.get("code"):
        return None
    where = str(data.get("where") or "another process")
    scope: Scope = "namespace"
    if fix.get("scope") in ("cell", "source"):
        scope = fix["scope"]
    return Fix(
        title=f"{fix.get('title', '')} (from {where})",
        code=str(fix["code"]),
        scope=scope,
        location=str(fix.get("location", "")),
        filename=str(fix.get("filename", "")),
        lineno=int(fix.get("lineno", 0) or 0),
        end_lineno=int(fix.get("end_lineno", 0) or 0),
    )


def told_fix_note(data: dict[str, Any], where: str) -> str:
    """What a note read from ``where``'s traceback text says its fix is, as its words
    (its title only), or ''."""
    fix = data.get("fix")
    if not data.get("told") or not isinstance(fix, dict) or not fix.get("title"):
        return ""
    return (
        f"{where}'s traceback text suggests: {fix['title']} (its words, not offered as "
        "code: a fix comes only with the exception itself)"
    )
