"""Functions and what they close over: a lambda's or inner function's cells
(``fn.__closure__[0].cell_contents``, which a fix can set), default arguments,
a ``functools.partial``'s arguments, a bound method's object."""

from __future__ import annotations

import functools
import types
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.holders.base import Holder, Items

_FUNCTION_PARTS = ("__closure__", "__defaults__", "__kwdefaults__")


def matches(kind: type) -> bool:
    return issubclass(
        kind, (types.FunctionType, types.CellType, types.MethodType, functools.partial)
    )


def items(obj: Any, limit: int) -> Items | None:
    if probe.is_a(obj, types.CellType):
        try:
            return [(("attr", "cell_contents"), obj.cell_contents)]
        except ValueError:  # an empty cell (a name not assigned yet)
            return []
    if probe.is_a(obj, types.MethodType):
        return [(("attr", "__self__"), types.MethodType.__self__.__get__(obj))]
    if probe.is_a(obj, functools.partial):
        parts = (("args", functools.partial.args), ("keywords", functools.partial.keywords))
        return [(("attr", name), getter.__get__(obj)) for name, getter in parts]
    out: Items = []
    for name in _FUNCTION_PARTS:
        value = getattr(types.FunctionType, name).__get__(obj)
        if value is not None:
            out.append((("attr", name), value))
    return out[:limit]


HOLDER = Holder("closure", matches, items, order=60)
