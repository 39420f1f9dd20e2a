"""Paths from the user's namespace to an object, as data and as Python text.

A path is a tuple of steps: ``('name', 'batch')`` starts at a namespace name,
``('local', 'pos')`` at a frame's local, ``('attr', 'encoder')`` reads an attribute
and ``('item', key)`` subscripts with a ``str`` or ``int`` key. Keys are rendered
with :func:`repr`, so ``format_path`` always yields a valid Python expression and
never evaluates anything; ``resolve``/``assign`` walk the same steps on live objects
(used by ``Fix.apply``), again without running generated code.

Imports nothing beyond the standard library.
"""

from __future__ import annotations

import keyword
import unicodedata
from collections.abc import Mapping
from typing import Any, cast

from ipydevice._debug import contain

__all__ = ["assign", "format_path", "is_name", "resolve", "root_name"]

Path = tuple[tuple[str, Any], ...]


def is_name(text: Any) -> bool:
    """True for a string that, written as a plain identifier, names exactly itself.

    The one rule for spelling names in generated code. Python reads identifiers in
    NFKC form, so ``ｘ`` (fullwidth x) written in code is ``x``, another object: such
    a name is not a plain name (``format_path`` writes ``globals()['ｘ']`` or
    ``getattr(obj, 'ｘ')``, which reach the object itself)."""
    return (
        isinstance(text, str)
        and text.isidentifier()
        and not keyword.iskeyword(text)
        and unicodedata.normalize("NFKC", text) == text
    )


def is_key(key: Any) -> bool:
    """Keys that can be written as literals: str and int (bool excluded)."""
    return isinstance(key, str) or (isinstance(key, int) and not isinstance(key, bool))


def format_path(path: Path) -> str:
    """The path as the user would write it: ``model.encoder.layers[3].cache``."""
    text = ""
    for kind, key in path:
        if kind == "local":
            text = str(key)  # a local's name or an expression as written in the source
        elif kind == "name":
            text = str(key) if is_name(key) else f"globals()[{key!r}]"
        elif kind == "attr":
            text = f"{text}.{key}" if is_name(key) else f"getattr({text}, {key!r})"
        else:
            text = f"{text}[{key!r}]"
    return text


def root_name(path: Path) -> str:
    """The namespace or local name a path starts from ('' for an empty path)."""
    return str(path[0][1]) if path else ""


def resolve(path: Path, namespace: Mapping[str, Any]) -> Any:
    """Follows ``path`` from ``namespace`` to the live object.

    Raises:
        LookupError: a step no longer leads anywhere (the object is gone).
    """
    if not path or path[0][0] != "name":
        raise LookupError("no namespace path")
    obj: Any = None
    for index, (kind, key) in enumerate(path):
        try:
            if index == 0:
                obj = namespace[key]
            elif kind == "attr":
                obj = getattr(obj, key)
            else:
                obj = obj[key]
        except BaseException as exc:
            contain(exc)
            raise LookupError(f"{format_path(path[: index + 1])} no longer exists") from exc
    return obj


def assign(path: Path, namespace: dict[str, Any], value: Any) -> None:
    """Stores ``value`` where ``path`` points, rebuilding tuples on the way.

    A tuple (or namedtuple) cannot be changed in place, so an item of one is set
    by building a new tuple and assigning that one level up.
    """
    if len(path) == 1:
        namespace[path[0][1]] = value
        return
    parent_path, (kind, key) = path[:-1], path[-1]
    parent = resolve(parent_path, namespace)
    if kind == "attr":
        setattr(parent, key, value)
    elif isinstance(parent, tuple):
        items = list(parent)
        items[key] = value
        rebuilt = (
            cast(Any, parent)._make(items)
            if hasattr(type(parent), "_make")
            else type(parent)(items)
        )
        assign(parent_path, namespace, rebuilt)
    else:
        parent[key] = value
