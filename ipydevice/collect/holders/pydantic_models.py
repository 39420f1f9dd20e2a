"""pydantic (v2) models, by their fields: ``settings.embedding``."""

from __future__ import annotations

from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.holders.base import Holder, Items, attribute_items
from ipydevice.collect.reading import dict_items


def _fields(kind: type) -> Any:
    # pydantic v2 keeps the fields as a dict {name: FieldInfo} in the class dict
    return probe.class_attribute(kind, "__pydantic_fields__")


def matches(kind: type) -> bool:
    return probe.is_a(_fields(kind), dict)


def items(obj: Any, limit: int) -> Items | None:
    names = [name for name, _ in dict_items(_fields(type(obj)), limit) if type(name) is str]
    return attribute_items(obj, names, limit)


HOLDER = Holder("pydantic", matches, items, order=50)
