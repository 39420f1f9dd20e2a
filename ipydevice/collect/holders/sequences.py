"""Lists, tuples (named tuples by field name: ``out.logits``) and deques."""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.holders.base import Holder, Items
from ipydevice.collect.reading import plain_name


def matches(kind: type) -> bool:
    return issubclass(kind, (list, tuple, deque))


def items(obj: Any, limit: int) -> Items | None:
    kind = type(obj)
    fields = probe.class_attribute(kind, "_fields") if issubclass(kind, tuple) else None
    if fields is not None:
        # range() bounds the walk: _fields may be endless, the tuple huge.
        triples = zip(range(limit), fields, tuple.__iter__(obj), strict=False)
        named = ((plain_name(name), value) for _, name, value in triples)
        return [(("attr", n), value) for n, value in named if n is not None]
    if issubclass(kind, deque):
        try:  # deque's own iterator (a subclass's __iter__ is not run), cut at the limit
            queued = list(itertools.islice(deque.__iter__(obj), limit))
        except RuntimeError:  # changed while read (another thread)
            return []
        return [(("item", index), value) for index, value in enumerate(queued)]
    values = list.__iter__(obj) if issubclass(kind, list) else tuple.__iter__(obj)
    # zip stops at range's end without pulling an item past the limit.
    return [(("item", index), value) for index, value in zip(range(limit), values, strict=False)]


HOLDER = Holder("sequence", matches, items, order=10)
