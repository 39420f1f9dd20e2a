"""Any other object of the user's or a library's that keeps an instance dict:
its public attributes (``helper.table``), and the tensors of a private store
(``self._store = {...}``) it serves through its own ``__getattr__``, named as
the user reads them (``graph.x`` of a torch_geometric ``Data``, ``cfg.loss.weights``
of an OmegaConf config, whose store keeps each value in a node of its own)."""

from __future__ import annotations

import types
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.holders.base import (
    DICT_DESCRIPTORS,
    Holder,
    Items,
    instance_dict,
    own_attribute,
    private_store,
    public_attributes,
    unboxed,
)
from ipydevice.collect.reading import keyed_items

#: kinds whose instance dict is not the user's state
_NOT_HOLDERS = (type, types.ModuleType, BaseException)


def matches(kind: type) -> bool:
    return (
        type(own_attribute(kind, "__dict__")) in DICT_DESCRIPTORS
        and not issubclass(kind, _NOT_HOLDERS)
        and probe.class_module(kind) not in ("builtins", "abc")
    )


def items(obj: Any, limit: int) -> Items | None:
    state = instance_dict(obj)
    if state is None:
        return None
    found = public_attributes(state, limit)
    store = private_store(obj, limit) if len(found) < limit else None
    if store is None:
        return found
    name, value, contents = store
    if not callable(own_attribute(type(obj), "__getattr__")):
        # read where it is kept: ``g._store['x']``
        return [*found, (("attr", name), value)]
    known = {step[1] for step, _ in found}
    for key, item in keyed_items(contents, limit - len(found)):
        if type(key) is str and key.isidentifier() and key not in known:
            # (a config's value node is read as its value: ``cfg.loss.class_weights``)
            boxed = None if probe.is_tensor(item) else unboxed(item)
            found.append((("attr", key), item if boxed is None else boxed))
    return found


HOLDER = Holder("object", matches, items, order=90)
