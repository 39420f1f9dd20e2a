"""Reading keys and dict items of live objects without running their code:
dict's own C-level views, keys made plain ``str``/``int`` (what paths can spell).
Shared by the walk (:mod:`ipydevice.collect.walk`) and the holder kinds
(:mod:`ipydevice.collect.holders`).
"""

from __future__ import annotations

import itertools
from typing import Any

from ipydevice._debug import contain
from ipydevice.collect import probe
from ipydevice.collect.paths import is_key

__all__ = ["dict_items", "keyed_items", "named_items", "plain_key", "plain_name"]

_STR_ONLY = {str}


def plain_key(key: Any) -> str | int | None:
    """``key`` as an exact ``str`` or ``int`` (bool excluded), else None.

    Paths are rendered with ``repr``/``format`` and kept in snapshots: a key of a
    ``str`` or ``int`` subclass (an enum member, a class with its own ``__repr__``)
    becomes the plain value, which dicts look up alike. Other keys are not named.
    """
    kind = type(key)
    if kind is str or kind is int:
        return key
    if issubclass(kind, str):
        return str.__str__(key)  # the plain characters: no user __str__ runs
    if issubclass(kind, int) and not issubclass(kind, bool):
        return int.__index__(key)
    return None


def plain_name(key: Any) -> str | None:
    """An attribute or namespace name as an exact ``str``, else None."""
    name = plain_key(key)
    return name if type(name) is str else None


def keyed_items(mapping: Any, limit: int) -> list[tuple[str | int, Any]]:
    """Dict items whose keys can be written as literals, keys made plain."""
    out = []
    for key, value in dict_items(mapping, limit):
        plain = plain_key(key)
        if plain is not None and is_key(plain):
            out.append((plain, value))
    return out


def named_items(mapping: Any, limit: int) -> list[tuple[str, Any]]:
    """Dict items with plain ``str`` keys (module registries, ``__dict__``)."""
    if type(mapping) is dict:
        # The common case (a module's registries): dict's own C-level items, and
        # the keys' types checked in C; a registry wider than ``limit`` (a list
        # of 1,000 experts) is cut in C too, so it costs what a narrow one does.
        if not mapping:
            return []
        try:
            if len(mapping) <= limit:
                items = list(mapping.items())
                keys = set(map(type, mapping))
            else:
                items = list(itertools.islice(mapping.items(), limit))
                keys = set(map(type, itertools.islice(mapping, limit)))
            if keys == _STR_ONLY:
                return items
        except BaseException as caught:  # changed while read, or a key type with a hostile __hash__
            contain(caught)
            pass
    out = []
    for key, value in dict_items(mapping, limit):
        if type(key) is str:  # the common case, without a call
            out.append((key, value))
        else:
            name = plain_name(key)
            if name is not None:
                out.append((name, value))
    return out


def dict_items(mapping: Any, limit: int) -> list[tuple[Any, Any]]:
    if not probe.is_a(mapping, dict):
        return []
    try:
        # dict's own C-level view: a subclass's items() is never called.
        return list(itertools.islice(dict.items(mapping), limit))
    except BaseException as caught:
        contain(caught)
        pass
    out: list[tuple[Any, Any]] = []  # changed during iteration (another thread)
    try:
        for key, value in dict.items(mapping):
            if len(out) >= limit:
                break
            out.append((key, value))
    except BaseException as caught:
        contain(caught)
        return out
    return out
