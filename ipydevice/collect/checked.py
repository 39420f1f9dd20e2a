"""Paths checked by identity: a path shown or moved by a fix evaluates, as Python
would evaluate its text, back to the very object it names.

:func:`follow` walks a namespace path the way Python reads its text, without
running user code: an attribute from a data descriptor that is a slot, the instance
dict, a plain class attribute along the MRO, a module's registries (what
``Module.__getattr__`` reads); an item from a builtin dict, list or tuple, or from
torch's module containers as their ``[]`` reads (:func:`walk.indexing`). A step
that only user code could answer (a property, a ``__getattr__`` or ``[]`` of the
user's) leaves the path unchecked, not wrong.

:func:`verify_paths` takes the namespace name away from a scan's entry whose path
evaluates to another object (or to nothing): it is not shown as a path the user
can type, and no fix assigns to it.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

from ipydevice._debug import contain
from ipydevice.collect import probe
from ipydevice.collect.holders.base import class_dicts, own_attribute
from ipydevice.collect.paths import Path, format_path
from ipydevice.collect.scan import Scan
from ipydevice.collect.walk import indexing

__all__ = ["follow", "verify_paths"]

#: what a step gives when only user code could tell
UNKNOWN: Any = object()
#: what a step gives when Python would raise
MISSING: Any = object()

_REGISTRIES = ("_parameters", "_buffers", "_modules")
_PLAIN_GETATTRIBUTE = (
    object.__getattribute__,
    type.__getattribute__,
    types.ModuleType.__getattribute__,
)


def _described(value: Any, hooks: tuple[str, ...] = ("__get__",)) -> bool:
    """``value``'s class has one of ``hooks`` (a descriptor: reading it runs code)."""
    return any(probe.class_attribute(type(value), hook) is not None for hook in hooks)


def _attribute(obj: Any, name: str) -> Any:
    kind = type(obj)
    getattribute = own_attribute(kind, "__getattribute__")
    if getattribute is not None and getattribute not in _PLAIN_GETATTRIBUTE:
        return UNKNOWN
    if issubclass(kind, type):
        for namespace in class_dicts(obj):
            if name in namespace:
                value = namespace[name]
                return UNKNOWN if _described(value) else value
        return UNKNOWN if kind is not type else MISSING
    stored = own_attribute(kind, name)
    described = stored is not None and _described(stored)
    if described and type(stored) is types.MemberDescriptorType:
        try:
            return stored.__get__(obj, kind)
        except AttributeError:
            return MISSING
    if described and _described(stored, ("__set__", "__delete__")):
        return UNKNOWN  # a property, or another data descriptor: user code
    state = probe.module_dict(obj)
    if type(state) is dict and name in state:
        return state[name]
    if stored is not None:
        return UNKNOWN if described else stored
    if probe.is_module(obj) and type(state) is dict:
        for store in _REGISTRIES:
            inner = state.get(store)
            if type(inner) is dict and name in inner:
                return inner[name]
    if own_attribute(kind, "__getattr__") is not None:
        return UNKNOWN
    if kind is types.ModuleType and type(state) is dict and "__getattr__" in state:
        return UNKNOWN  # a module's own __getattr__ (PEP 562)
    return MISSING


def _item(obj: Any, key: Any) -> Any:
    kind = type(obj)
    for base in (dict, list, tuple):
        if issubclass(kind, base) and own_attribute(kind, "__getitem__") is base.__getitem__:
            try:
                return base.__getitem__(obj, key)
            except (LookupError, TypeError):
                return MISSING
    if not probe.is_module(obj):
        return UNKNOWN
    how = indexing(kind)
    children = probe.module_dict(obj).get("_modules")
    if not how or type(children) is not dict:
        return UNKNOWN
    if how == "key":
        return children.get(key, MISSING) if type(key) is str else MISSING
    if type(key) is not int:
        return MISSING
    size = len(children)
    index = key + size if key < 0 else key
    if how == "number":
        return children.get(str(index), MISSING)
    return list(children.values())[index] if 0 <= index < size else MISSING


def follow(path: Path, namespace: Mapping[str, Any]) -> Any:
    """The object ``path``'s text evaluates to in ``namespace``: :data:`MISSING` when
    it would raise, :data:`UNKNOWN` when only user code could tell (or the path
    does not start at a namespace name)."""
    if not path or path[0][0] != "name" or type(namespace) is not dict:
        return UNKNOWN
    obj = dict.get(namespace, path[0][1], MISSING)
    for kind, key in path[1:]:
        if obj is MISSING or obj is UNKNOWN:
            break
        if kind == "attr" and type(key) is str:
            obj = _attribute(obj, key)
        elif kind == "item":
            obj = _item(obj, key)
        else:
            return UNKNOWN
    return obj


def verify_paths(scan: Scan, namespace: Mapping[str, Any], only: set[int] | None = None) -> bool:
    """Takes the name away from the entries (of ``only``, by id) whose namespace path
    evaluates to another object or to nothing; True when one lost it."""
    changed = False
    try:
        for key, entry in scan.entries.items():
            if not entry.named or (only is not None and key not in only):
                continue
            found = follow(entry.path, namespace)
            if found is UNKNOWN or found is entry.obj:
                continue
            text = format_path(entry.path)
            entry.named, entry.path = False, (("local", text),)
            entry.where = "a path that does not evaluate to it"
            changed = True
    except BaseException as caught:
        contain(caught)
    return changed
