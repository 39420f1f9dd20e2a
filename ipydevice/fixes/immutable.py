"""Holders that cannot be changed in place: a fix rebuilds them.

``batch.x = batch.x.to(device)`` raises ``FrozenInstanceError`` on a frozen
dataclass and ``AttributeError`` on a namedtuple; an item of a tuple cannot be
assigned at all. Such a holder is rebuilt and the new one stored where the old one
was, one level up, as far up as needed. A rebuild keeps everything else: a frozen
dataclass is copied (``copy.copy``) and the field set on the copy, so neither
``__init__`` nor ``__post_init__`` runs again (a derived field, an ``init=False``
field set later keep their values); a tuple subclass is made with
``tuple.__new__`` and given the old one's attributes. A dict or list subclass
(``OrderedDict``, ``defaultdict``, a user's class with attributes) is not rebuilt
at all: it is updated in place. The fix's code says the same, so what a user
copies runs too. Read through the class dicts (no metaclass or property runs).
"""

from __future__ import annotations

import copy
import dataclasses
import types
from collections.abc import Mapping
from typing import Any, cast

from ipydevice.collect import probe
from ipydevice.collect.paths import Path, assign, resolve

__all__ = [
    "assign_rebuilding",
    "dataclass_tensors",
    "field_value",
    "frozen_fields",
    "in_place",
    "rebuilt",
    "replace_is_safe",
    "same_kind",
]


def frozen_fields(obj: Any) -> tuple[str, ...] | None:
    """The fields of a frozen dataclass instance (``init=False`` ones too), else None."""
    fields = _frozen(obj)
    if fields is None:
        return None
    return tuple(
        name
        for name, field in fields.items()
        if getattr(field, "_field_type", None) is dataclasses._FIELD  # type: ignore[attr-defined]
    )


def dataclass_tensors(obj: Any) -> list[tuple[str, Any]]:
    """``(field, tensor)`` for a dataclass instance's tensor fields (none for anything
    else, or a class), read without running a property."""
    kind = type(obj)
    fields = probe.class_attribute(kind, "__dataclass_fields__")
    if type(fields) is not dict or probe.is_a(obj, type):
        return []
    values = ((name, field_value(obj, name)) for name in list(fields)[:256] if type(name) is str)
    return [(name, value) for name, value in values if probe.is_tensor(value)]


def field_value(obj: Any, name: str) -> Any:
    """A dataclass field's value from the instance dict or its slot (a member
    descriptor, read in C: no property or ``__getattr__`` runs); None if unset."""
    state = probe.module_dict(obj)
    if name in state:
        return state[name]
    slot = probe.class_attribute(type(obj), name)
    if type(slot) is not types.MemberDescriptorType:
        return None
    try:
        return slot.__get__(obj, type(obj))
    except AttributeError:  # an unset slot
        return None


def _frozen(obj: Any) -> dict[str, Any] | None:
    kind = type(obj)
    params = probe.class_attribute(kind, "__dataclass_params__")
    fields = probe.class_attribute(kind, "__dataclass_fields__")
    if params is None or type(fields) is not dict or not getattr(params, "frozen", False):
        return None
    return fields


def replace_is_safe(obj: Any) -> bool:
    """Whether ``dataclasses.replace`` rebuilds ``obj`` unchanged but for the
    fields given: no ``__post_init__`` to run again, and every field an init
    field (``replace`` resets the others; an ``InitVar`` it cannot give)."""
    fields = _frozen(obj)
    if fields is None or probe.class_attribute(type(obj), "__post_init__") is not None:
        return False
    return all(
        getattr(field, "init", False) and getattr(field, "_field_type", None) is dataclasses._FIELD  # type: ignore[attr-defined]
        for field in fields.values()
    )


def in_place(holder: Any) -> bool:
    """A dict or list of a subclass (``OrderedDict``, ``defaultdict``, a user's
    class): its tensors are replaced in place, so its type, instance attributes,
    order and default factory stay. A plain dict or list is rebuilt."""
    return (probe.is_a(holder, dict) and type(holder) is not dict) or (
        probe.is_a(holder, list) and type(holder) is not list
    )


def same_kind(holder: Any, items: list[Any]) -> Any:
    """A new tuple or list like ``holder`` (same class, same instance attributes)
    holding ``items``, made without running the class's ``__new__`` or ``__init__``."""
    kind = type(holder)
    if kind is tuple or kind is list:
        return kind(items)
    if probe.is_a(holder, tuple):
        new = tuple.__new__(kind, items)
    else:
        new = list.__new__(kind)
        list.extend(new, items)
    own = probe.module_dict(holder)
    if own:
        object.__getattribute__(new, "__dict__").update(own)
    return new


def _namedtuple_fields(obj: Any) -> tuple[str, ...] | None:
    if not probe.is_a(obj, tuple):
        return None
    fields = probe.class_attribute(type(obj), "_fields")
    return fields if type(fields) is tuple else None


def rebuilt(holder: Any, step: tuple[str, Any], value: Any) -> Any | None:
    """``holder`` rebuilt with ``step`` (``('attr', name)`` or ``('item', index)``)
    set to ``value``, when ``holder`` cannot take it in place; else None."""
    kind, key = step
    if kind == "attr":
        fields = frozen_fields(holder)
        if fields and key in fields:
            new = copy.copy(holder)  # no __init__, no __post_init__: every field stays
            object.__setattr__(new, key, value)
            return new
        fields = _namedtuple_fields(holder)
        if fields is not None and key in fields:
            items = list(tuple.__iter__(holder))
            items[fields.index(key)] = value
            return same_kind(holder, items)
        return None
    if probe.is_a(holder, tuple) and type(key) is int:
        items = list(tuple.__iter__(holder))
        items[key] = value
        return same_kind(holder, items)
    return None


def assign_rebuilding(path: Path, namespace: Mapping[str, Any], value: Any) -> None:
    """Stores ``value`` at ``path``, rebuilding frozen dataclasses and tuples on the
    way up (each rebuilt holder is stored where the old one was)."""
    if len(path) > 1:
        holder = resolve(path[:-1], namespace)
        new = rebuilt(holder, path[-1], value)
        if new is not None:
            assign_rebuilding(path[:-1], namespace, new)
            return
    assign(path, cast(dict, namespace), value)
