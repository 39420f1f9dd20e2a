"""``attrs`` classes (``@attrs.define``, slotted by default; ``@attr.s``), by
their fields: ``config.weights``."""

from __future__ import annotations

from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.holders.base import Holder, Items, attribute_items, slot_value


def _fields(kind: type) -> Any:
    # attrs keeps its fields as a tuple of Attribute in the class dict
    return probe.class_attribute(kind, "__attrs_attrs__")


def matches(kind: type) -> bool:
    return probe.is_a(_fields(kind), tuple)


def items(obj: Any, limit: int) -> Items | None:
    names = []
    for field in tuple.__iter__(_fields(type(obj))):
        # Attribute is a slotted class of attrs' own: its ``name`` slot, read in C
        name = slot_value(field, type(field), "name")
        if type(name) is str:
            names.append(name)
    return attribute_items(obj, names, limit)


HOLDER = Holder("attrs", matches, items, order=40)
