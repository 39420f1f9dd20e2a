"""Dataclasses, by their fields (slotted ones too): ``batch.inputs``."""

from __future__ import annotations

from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.holders.base import Holder, Items, attribute_items


def matches(kind: type) -> bool:
    return probe.is_dataclass_type(kind)


def items(obj: Any, limit: int) -> Items | None:
    return attribute_items(obj, probe.dataclass_field_names(type(obj)), limit)


HOLDER = Holder("dataclass", matches, items, order=30)
