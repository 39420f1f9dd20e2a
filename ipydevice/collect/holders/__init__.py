"""Holder kinds: how a scan reaches the tensors an object holds.

One file per kind, each a :class:`~ipydevice.collect.holders.base.Holder`
registered here, like error families and audits: lists and tuples, mappings,
dataclasses, attrs classes, pydantic models, closures (cells, defaults,
partials, bound methods), slotted classes, torch's distributions (and those they
are made of), and any other object with an
instance dict (public attributes and a private store it serves through
``__getattr__``). A user adds a kind for a class of their own with
:func:`ipydevice.plugins.holder`. Modules and optimizers are not holder kinds:
the scan reads them the way ``.to()`` and ``state_dict`` do
(:mod:`ipydevice.collect.walk`).

Which kind applies is decided once per class, from the class alone (its class
dicts, never its metaclass); every kind reads without running user code, and
the scan bounds it (items per object, depth, objects, time:
:mod:`ipydevice.settings`).
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

from ipydevice._debug import contain
from ipydevice.collect.holders import (
    attrs_classes,
    closures,
    dataclass_fields,
    distributions,
    mappings,
    objects,
    pydantic_models,
    sequences,
    slotted,
)
from ipydevice.collect.holders.base import Holder, Items, user_holder

__all__ = [
    "Holder",
    "Items",
    "add",
    "holder_of",
    "holders",
    "items_of",
    "remove",
    "user_holder",
]

_HOLDERS: dict[str, Holder] = {}
_ORDERED: list[Holder] = []
#: id(class) -> (a weak reference to the class, its kind or None): a class
#: redefined in a notebook is not kept alive, and an id reused by another class
#: is told apart. Cleared when the registry changes.
_BY_CLASS: dict[int, tuple[Any, Holder | None]] = {}
_CACHE_SIZE = 4096


def add(holder: Holder) -> None:
    """Registers ``holder`` (replacing one of the same name)."""
    _HOLDERS[holder.name] = holder
    _changed()


def remove(name: str) -> bool:
    """Takes a kind out; True when there was one."""
    found = _HOLDERS.pop(name, None) is not None
    _changed()
    return found


def holders() -> tuple[Holder, ...]:
    """The registered kinds, in the order they are tried."""
    return tuple(_ORDERED)


def _changed() -> None:
    _ORDERED[:] = sorted(_HOLDERS.values(), key=lambda h: h.order)
    _BY_CLASS.clear()


def holder_of(kind: type) -> Holder | None:
    """The first registered kind that matches the class ``kind``, or None."""
    cached = _BY_CLASS.get(id(kind))
    if cached is not None and cached[0]() is kind:
        return cached[1]
    found = None
    for holder in _ORDERED:
        try:
            if holder.matches(kind):
                found = holder
                break
        except BaseException as caught:  # a user's rule, or a hostile class
            contain(caught)
    if len(_BY_CLASS) >= _CACHE_SIZE:
        _BY_CLASS.clear()
    # (every class takes weak references; nothing is cached otherwise)
    with contextlib.suppress(TypeError):
        _BY_CLASS[id(kind)] = (weakref.ref(kind), found)
    return found


def items_of(obj: Any, limit: int) -> Items | None:
    """Up to ``limit`` ``(step, child)`` pairs of ``obj``, or None when no kind
    applies (or the kind's reading failed: contained, one note at most)."""
    holder = holder_of(type(obj))
    if holder is None:
        return None
    try:
        found = holder.items(obj, limit)
    except BaseException as caught:
        contain(caught)
        return None
    if found is None:
        return None
    if type(found) is not list:
        found = list(found)
    return found[:limit]


for _module in (
    sequences,
    mappings,
    dataclass_fields,
    attrs_classes,
    pydantic_models,
    closures,
    slotted,
    distributions,
    objects,
):
    add(_module.HOLDER)
