"""A ``torch.distributions`` object: its public attributes (a ``Normal``'s ``loc``),
and the distributions it is made of that it keeps under private names (a ``Beta``'s
``_dirichlet``, a ``MixtureSameFamily``'s ``_mixture_distribution``), named as the
user reads them where a property of the public name serves them
(``prior.mixture_distribution``). Instance-dict reads only: torch is never imported
(a class is one only when ``torch.distributions`` is loaded already)."""

from __future__ import annotations

import sys
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.holders.base import Holder, Items, instance_dict, public_attributes
from ipydevice.collect.reading import dict_items


def _distribution() -> Any:
    module = sys.modules.get("torch.distributions.distribution")
    return getattr(module, "Distribution", None)


def matches(kind: type) -> bool:
    base = _distribution()
    return isinstance(base, type) and issubclass(kind, base)


def items(obj: Any, limit: int) -> Items | None:
    state = instance_dict(obj)
    if state is None:
        return None
    found = public_attributes(state, limit)
    base = _distribution()
    for key, value in dict_items(state, 32):
        if len(found) >= limit:
            break
        if type(key) is not str or key[:1] != "_" or key[:2] == "__":
            continue
        if not (isinstance(base, type) and probe.is_a(value, base)):
            continue
        public = key.lstrip("_")
        served = type(probe.class_attribute(type(obj), public)) is property
        found.append((("attr", public if served else key), value))
    return found


HOLDER = Holder("distribution", matches, items, order=85)
