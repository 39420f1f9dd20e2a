"""Words shared by every stage that writes for people: counts with their nouns, and
text made safe to show.

Standard library only, imports nothing of the package (the collectors, the
diagnosis and the renderers all use it).
"""

from __future__ import annotations

import dataclasses
import threading
import unicodedata
from typing import Any, TypeVar

__all__ = ["format_bytes", "plural", "visible", "visible_fields"]

T = TypeVar("T")

#: Characters that show nothing or change how the text around them reads: controls,
#: bidi overrides and isolates, zero-width joiners and spaces, unassigned and private.
_HIDDEN = frozenset(["Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"])
_KEPT = frozenset("\n\t")


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 tensor``, ``2 tensors``; ``plural_form`` for irregular nouns."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {plural_form or noun + 's'}"


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str) -> str:
    """``text`` with every invisible or reordering character written as its escape
    (``\\u202e`` for a right-to-left override, ``\\u200b`` for a zero-width space,
    ``\\x1b`` for an escape), so that a name reads as what it is. Newlines and tabs
    stay; applying it twice changes nothing more."""
    if text.isascii() and text.isprintable():
        return text
    shown = "".join(
        _escape(char) if char not in _KEPT and unicodedata.category(char) in _HIDDEN else char
        for char in text
    )
    return text if shown == text else shown


def visible_fields(record: T) -> T:
    """A copy of a record (a dataclass of strings, numbers and tuples of them) with
    :func:`visible` applied to every string in it: what every renderer shows.

    A frozen record (a diagnosis) is read once for all its renderers: the header,
    the text and the HTML panel each ask for the same one (a diagnosis of a big
    model is hundreds of strings). The last few are kept: text only, no user object."""
    kind = type(record)
    params = getattr(kind, "__dataclass_params__", None)
    if params is None or not params.frozen:
        return _visible_value(record)
    kept = _SEEN.get(id(record))
    if kept is not None and kept[0] is record:
        return kept[1]
    shown = _visible_value(record)
    with _SEEN_LOCK:  # (threads' excepthooks render too)
        while len(_SEEN) >= _MAX_SEEN:
            _SEEN.pop(next(iter(_SEEN)))
        _SEEN[id(record)] = (record, shown)
    return shown


def visible_record(record: T) -> T:
    """:func:`visible_fields` of one row of a long table (an object record), kept
    nowhere: renderers call it for the rows they show."""
    return _visible_value(record)


def visible_except(record: T, *fields: str) -> T:
    """:func:`visible_fields` of ``record`` but its ``fields`` (an inventory's
    thousands of rows and problems), which renderers make visible a row at a time for
    the rows they show (:func:`visible_record`): the cost grows with what is shown."""
    kept = {field: getattr(record, field) for field in fields}
    emptied = dataclasses.replace(record, **dict.fromkeys(fields, ()))  # type: ignore[type-var]
    return dataclasses.replace(_visible_value(emptied), **kept)


#: The last frozen records :func:`visible_fields` read, by id: (the record, what it gave).
_SEEN: dict[int, tuple[Any, Any]] = {}
_MAX_SEEN = 4
_SEEN_LOCK = threading.Lock()


def _visible_value(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        return visible(value)
    if kind is tuple:
        for item in value:  # the common case: nothing to change, no copy
            if not _plain(item):
                break
        else:
            return value
        items = tuple(_visible_value(v) for v in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    names = _FIELDS.get(kind)
    if names is None:
        if not dataclasses.is_dataclass(kind):
            return value
        names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(kind) if f.init)
    old = [getattr(value, name) for name in names]
    for item in old:  # loops, not generators: every renderer of every diagnosis runs this
        if not _plain(item):
            break
    else:
        return value
    new = [_visible_value(v) for v in old]
    if all(a is b for a, b in zip(new, old, strict=True)):
        return value
    try:
        return dataclasses.replace(value, **dict(zip(names, new, strict=True)))
    except (TypeError, ValueError):
        return value


def _plain(value: Any) -> bool:
    """Nothing to show differently: a number, or a printable ASCII string or path."""
    kind = type(value)
    if kind is str:
        return value.isascii() and value.isprintable()
    if kind is tuple:
        for item in value:  # noqa: SIM110 (a loop: no generator made per tuple)
            if not _plain(item):
                return False
        return True
    return kind is int or kind is bool or kind is float or value is None


#: The init fields of each record class met, by class.
_FIELDS: dict[type, tuple[str, ...]] = {}


def format_bytes(nbytes: int) -> str:
    """``1.5 GB`` style, decimal units as PyTorch users read memory."""
    value = float(nbytes)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{nbytes} B"  # pragma: no cover
