"""Classes with ``__slots__``, by their public slots (and their instance dict's
public attributes, when they keep one too): ``point.coords``."""

from __future__ import annotations

from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.holders.base import (
    Holder,
    Items,
    attribute_items,
    instance_dict,
    public_attributes,
    slot_names,
)


def matches(kind: type) -> bool:
    return bool(slot_names(kind)) and not probe.class_module(kind).startswith("torch")


def items(obj: Any, limit: int) -> Items | None:
    names = [n for n in slot_names(type(obj)) if not n.startswith("_")]
    found = attribute_items(obj, names, limit)
    state = instance_dict(obj)
    if state and len(found) < limit:
        found.extend(public_attributes(state, limit - len(found)))
    return found


HOLDER = Holder("slots", matches, items, order=70)
