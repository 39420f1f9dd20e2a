"""Holders that cannot be changed in place: a fix rebuilds them.

``batch.x = batch.x.to(device)`` raises ``FrozenInstanceError`` on a frozen
dataclass and ``AttributeError`` on a namedtuple; an item of a tuple cannot be
assigned at all. Such a holder is rebuilt (``dataclasses.replace``,
``namedtuple._replace``, a new tuple) and the new one stored where the old one was,
one level up, as far up as needed. The fix's code says the same, so what a user
copies runs too. Read through the class dicts (no metaclass or property runs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, cast

from ipydevice.collect import probe
from ipydevice.collect.paths import Path, assign, resolve

__all__ = ["assign_rebuilding", "frozen_fields", "rebuilt"]


def frozen_fields(obj: Any) -> tuple[str, ...] | None:
    """The init fields of a frozen dataclass instance, else None."""
    kind = type(obj)
    params = probe.class_attribute(kind, "__dataclass_params__")
    fields = probe.class_attribute(kind, "__dataclass_fields__")
    if params is None or type(fields) is not dict or not getattr(params, "frozen", False):
        return None
    return tuple(
        name
        for name, field in fields.items()
        if getattr(field, "init", False)
        and getattr(field, "_field_type", None) is dataclasses._FIELD  # type: ignore[attr-defined]
    )


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
        if frozen_fields(holder) and key in cast(tuple, frozen_fields(holder)):
            return dataclasses.replace(holder, **{key: value})
        fields = _namedtuple_fields(holder)
        if fields is not None and key in fields:
            return cast(Any, holder)._replace(**{key: value})
        return None
    if probe.is_a(holder, tuple) and type(key) is int:
        items = list(tuple.__iter__(holder))
        items[key] = value
        if _namedtuple_fields(holder) is not None:
            return cast(Any, type(holder))._make(items)
        return tuple(items) if type(holder) is tuple else type(holder)(items)
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
