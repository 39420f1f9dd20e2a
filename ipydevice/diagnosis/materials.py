"""A meta model's weights at hand: a state dict in the namespace that fits it.

A model built on ``meta`` (``with torch.device('meta')``, ``init_empty_weights``)
holds shapes, not data. ``to_empty()`` gives it memory but leaves the weights
uninitialised; when the user has its state dict at hand (a dict of real tensors
whose keys are the model's), ``model.load_state_dict(sd, assign=True)`` makes it
real with those weights, on their device. Read without running user code: the
module tree through its registries, the dict through ``dict``'s own methods.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping
from typing import Any

from ipydevice._debug import contain
from ipydevice.collect import probe

__all__ = ["StateDict", "state_dict_for"]

#: at most this many public names of the namespace and state-dict keys are looked at
_MAX_NAMES = 2_000
_MAX_KEYS = 20_000

_VALUE = operator.itemgetter(1)


class StateDict:
    """A state dict found for a model: its namespace name and its tensors' device."""

    __slots__ = ("device", "name")

    def __init__(self, name: str, device: str) -> None:
        self.name = name
        self.device = device


def _keys(module: Any, most: int = _MAX_KEYS) -> tuple[set[str], set[str]] | None:
    """(parameter keys, buffer keys) of ``module``'s state dict, by its registries;
    None past ``most`` keys (no dict at hand holds them all: the walk stops there)."""
    params: set[str] = set()
    buffers: set[str] = set()
    stack: list[tuple[str, Any]] = [("", module)]
    seen: set[int] = set()
    while stack:
        prefix, current = stack.pop()
        if id(current) in seen or len(params) + len(buffers) > most:
            return None if len(params) + len(buffers) > most else (params, buffers)
        seen.add(id(current))
        state = probe.module_dict(current)
        for slot, into in (("_parameters", params), ("_buffers", buffers)):
            table = state.get(slot)
            if type(table) is dict:
                into.update(f"{prefix}{k}" for k, v in dict.items(table) if v is not None)
        children = state.get("_modules")
        if type(children) is dict:
            stack.extend(
                (f"{prefix}{k}.", v) for k, v in dict.items(children) if probe.is_module(v)
            )
    return params, buffers


def state_dict_for(
    module: Any,
    namespace: Mapping[str, Any],
    roots: list[tuple[str, Any, int]] | None = None,
) -> StateDict | None:
    """The namespace's state dict for ``module``: a dict of real (not meta) tensors
    holding every parameter key of the module and no key the module lacks.

    ``roots``: the namespace's public names whose values have something inside, as
    the scan already read them (:meth:`~ipydevice.collect.scan.Scan.namespace_roots`):
    the dicts are picked among those, and the namespace is not read again."""
    if roots is not None:
        try:
            dicts = [(name, value) for name, value, _ in roots if issubclass(type(value), dict)]
        except BaseException as caught:
            contain(caught)
            return None
        return _matching(module, dicts)
    try:
        # the bound is on public names: IPython adds _i<N> for every cell run
        public = ((n, v) for n, v in namespace.items() if type(n) is str and n[:1] != "_")
        items = list(itertools.islice(public, _MAX_NAMES))
    except BaseException as caught:
        contain(caught)
        return None
    # the dicts, picked at C speed (a namespace of tensors costs no bytecode per name)
    try:
        kinds = {kind for kind in set(map(type, map(_VALUE, items))) if issubclass(kind, dict)}
        dicts = list(
            itertools.compress(items, map(kinds.__contains__, map(type, map(_VALUE, items))))
        )
    except BaseException as caught:  # a metaclass whose __hash__ raises: one name at a time
        contain(caught)
        dicts = [(name, value) for name, value in items if probe.is_a(value, dict)]
    return _matching(module, dicts)


def _matching(module: Any, dicts: list[tuple[str, Any]]) -> StateDict | None:
    """The first of the namespace's ``dicts`` that is a state dict for ``module``."""
    # the dicts that could be state dicts: string keys to tensors, at most _MAX_KEYS
    dicts = [
        (name, value)
        for name, value in dicts
        if type(name) is str
        and not name.startswith("_")
        and 0 < dict.__len__(value) <= _MAX_KEYS
        and probe.is_tensor(next(iter(dict.values(value))))
    ]
    if not dicts:
        return None
    # the model's keys, as many as the biggest dict holds (a model's size otherwise)
    keys = _keys(module, max(dict.__len__(value) for _, value in dicts))
    if keys is None or not keys[0]:
        return None
    params, buffers = keys
    for name, value in dicts:
        if dict.__len__(value) > _MAX_KEYS or dict.__len__(value) < len(params):
            continue
        found = set(dict.keys(value))
        if not params <= found or not found <= params | buffers:
            continue
        devices = {probe.placement(v)[0] for v in dict.values(value) if probe.is_tensor(v)}
        if len(devices) == 1 and "meta" not in devices and "?" not in devices:
            return StateDict(name, devices.pop())
    return None
