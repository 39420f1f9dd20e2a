"""Dicts, and other mappings by the dict they keep: ``UserDict``'s ``data`` (a
tokenizer's ``BatchEncoding``), else a private store (``_mapping``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.holders.base import Holder, Items, private_store
from ipydevice.collect.reading import keyed_items


def matches(kind: type) -> bool:
    return issubclass(kind, (dict, Mapping))


def items(obj: Any, limit: int) -> Items | None:
    if probe.is_a(obj, dict):
        return [(("item", k), v) for k, v in keyed_items(obj, limit)]
    data = probe.module_dict(obj).get("data")
    if not probe.is_a(data, dict):
        store = private_store(obj, limit)
        data = store[2] if store is not None else None
    if probe.is_a(data, dict):
        return [(("item", k), v) for k, v in keyed_items(data, limit)]
    return None


HOLDER = Holder("mapping", matches, items, order=20)
