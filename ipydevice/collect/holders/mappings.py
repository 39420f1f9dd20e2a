"""Dicts, and other mappings by the dict they keep: ``UserDict``'s ``data`` (a
tokenizer's ``BatchEncoding``), else a private store (``_mapping``; a config's
``_content``, read by attribute when its class serves keys as attributes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.holders.base import Holder, Items, own_attribute, private_store, unboxed
from ipydevice.collect.reading import keyed_items


def matches(kind: type) -> bool:
    return issubclass(kind, (dict, Mapping))


def items(obj: Any, limit: int) -> Items | None:
    if probe.is_a(obj, dict):
        return [(("item", k), v) for k, v in keyed_items(obj, limit)]
    data = probe.module_dict(obj).get("data")
    if probe.is_a(data, dict):
        return [(("item", k), v) for k, v in keyed_items(data, limit)]
    store = private_store(obj, limit)
    if store is None:
        return None
    # a config served by attribute (OmegaConf's ``cfg.loss.weights``), each value in
    # a node of its own: named as read, the node read as its value
    by_attribute = callable(own_attribute(type(obj), "__getattr__"))
    out: Items = []
    for key, value in keyed_items(store[2], limit):
        boxed = None if probe.is_tensor(value) else unboxed(value)
        step = "attr" if by_attribute and type(key) is str and key.isidentifier() else "item"
        out.append(((step, key), value if boxed is None else boxed))
    return out


HOLDER = Holder("mapping", matches, items, order=20)
