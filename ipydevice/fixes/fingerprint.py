"""What a fix was made for, and whether its paths still hold it.

The fix's code also says which layers of other models its module moves take
with them (:mod:`ipydevice.fixes.touches`).

A panel outlives the objects it describes: the user may rebind ``x`` or ``model``
before clicking Apply. Each fix with steps is stamped, when the diagnosis is made,
with a :class:`~ipydevice.model.Mark` per path it reads (the object's identity
through a weak reference where it takes one, its class, shape, dtype, device or
length); Apply refuses, saying why, when a path now holds something else.

The diagnosis keeps only the mark's numbers and text: the weak references live in
this module's table, keyed by a counter, and drop out when their objects die.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import types
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from ipydevice._debug import contain
from ipydevice.collect import probe
from ipydevice.collect.paths import format_path
from ipydevice.model import Fix, Mark, Path

__all__ = ["changed", "peek", "stamp"]

_MAX_ITEMS = 64
_lock = threading.RLock()  # a weak reference's callback may run in _token
_counter = itertools.count(1)
#: token -> weak reference; id(object) -> token (one token per live object)
_refs: dict[int, weakref.ref] = {}
_tokens: dict[int, int] = {}


def stamp(fixes: Iterable[Fix], namespace: Mapping[str, Any]) -> tuple[Fix, ...]:
    """``fixes`` with ``made_for`` filled from the objects their steps' paths hold now."""
    out = []
    for fix in fixes:
        if fix.steps and not fix.made_for:
            marks = _marks(fix, namespace)
            if marks:
                fix = dataclasses.replace(fix, made_for=marks)
        out.append(fix)
    return tuple(out)


def _marks(fix: Fix, namespace: Mapping[str, Any]) -> tuple[Mark, ...]:
    paths: dict[Path, None] = {}
    for step in fix.steps:
        for path in (step.path, step.source):
            if path and path[0][0] == "name":
                paths.setdefault(path)
    holders = {s.path for s in fix.steps if s.action in ("mapping", "sequence")}
    marks = []
    for path in paths:
        try:
            obj = peek(path, namespace)
            marks.append(mark(path, obj))
            if path in holders:  # the tensors it moves, each as it is now
                marks.extend(mark((*path, ("item", k)), v) for k, v in _items(obj))
        except LookupError:
            continue
        except Exception as exc:
            contain(exc)
    return tuple(marks)


def peek(path: Path, namespace: Mapping[str, Any]) -> Any:
    """The object at ``path``, as :func:`~ipydevice.collect.paths.resolve` finds it,
    read from instance dicts, module tables, slots and the items of dicts, lists
    and tuples (in C): no property, ``__getattr__`` or ``__getitem__`` of the
    user's runs while a diagnosis is made.

    Raises:
        LookupError: a step leads nowhere, or only through the user's code.
    """
    if not path or path[0][0] != "name":
        raise LookupError("no namespace path")
    try:
        obj = namespace[path[0][1]]
    except KeyError:
        raise LookupError(path[0][1]) from None
    for kind, key in path[1:]:
        obj = _attr(obj, key) if kind == "attr" else _item(obj, key)
    return obj


def _attr(obj: Any, key: Any) -> Any:
    state = probe.module_dict(obj)
    if key in state:
        return state[key]
    for table in ("_parameters", "_buffers", "_modules"):
        found: Any = state.get(table)
        if probe.is_a(found, dict) and dict.__contains__(found, key):
            return dict.__getitem__(found, key)
    slot = probe.class_attribute(type(obj), key)
    if type(slot) is types.MemberDescriptorType:
        try:
            return slot.__get__(obj, type(obj))
        except AttributeError:
            pass
    raise LookupError(key)


def _item(obj: Any, key: Any) -> Any:
    if probe.is_a(obj, dict):
        if dict.__contains__(obj, key):
            return dict.__getitem__(obj, key)
    elif probe.is_a(obj, (list, tuple)) and type(key) is int:
        try:
            return (list if probe.is_a(obj, list) else tuple).__getitem__(obj, key)
        except IndexError:
            pass
    elif probe.is_module(obj):  # ModuleList, Sequential, ModuleDict, ParameterList
        return _attr(obj, str(key))
    raise LookupError(key)


def _items(holder: Any) -> list[tuple[Any, Any]]:
    """The first tensors of a dict, list or tuple, with their str or int keys."""
    if probe.is_a(holder, dict):
        pairs = list(itertools.islice(dict.items(holder), _MAX_ITEMS))
    elif probe.is_a(holder, list):
        pairs = list(itertools.islice(enumerate(list.__iter__(holder)), _MAX_ITEMS))
    elif probe.is_a(holder, tuple):
        pairs = list(itertools.islice(enumerate(tuple.__iter__(holder)), _MAX_ITEMS))
    else:
        return []
    # plain str and int keys only: a path holds plain data (no user's str subclass)
    return [(k, v) for k, v in pairs if type(k) in (str, int) and probe.is_tensor(v)]


def mark(path: Path, obj: Any) -> Mark:
    """The fingerprint of ``obj``, found at ``path``."""
    shape = dtype = device = ""
    size = -1
    if probe.is_tensor(obj):
        facts = probe.tensor_facts(obj)
        shape, dtype, device = facts.shape, facts.dtype, facts.device
    elif probe.is_a(obj, (dict, list, tuple)):
        size = _size(obj)
    return Mark(path, _token(obj), id(obj), _kind(obj), shape, dtype, device, size)


def changed(marks: Iterable[Mark], namespace: Mapping[str, Any]) -> str:
    """Why the fix is refused: the first path that no longer holds what it held
    when the fix was made, in words; '' when every path holds the same."""
    for then in marks:
        name = format_path(then.path)
        try:
            obj = peek(then.path, namespace)
        except LookupError:
            return f"not applied: {name} no longer exists; nothing was moved. {_AGAIN}"
        reason = _differs(name, then, obj)
        if reason:
            return f"not applied: {reason}; nothing was moved. {_AGAIN}"
    return ""


_AGAIN = "Run the cell again for a fix of what it holds now"


def _differs(name: str, then: Mark, obj: Any) -> str:
    now = _kind(obj)
    if then.token:
        ref = _refs.get(then.token)
        other = (ref() if ref is not None else None) is not obj
    else:
        other = id(obj) != then.ident or now != then.kind
    if other:
        return f"{name} now holds another {_short(now)} than the one this fix was made for" + _said(
            then, obj
        )
    if probe.is_tensor(obj):
        facts = probe.tensor_facts(obj)
        for old, new in (
            (then.device, facts.device),
            (then.shape, facts.shape),
            (then.dtype, facts.dtype),
        ):
            if old != new:
                return f"{name} has changed since this fix was made (now {new}, then {old})"
    elif then.size >= 0 and _size(obj) != then.size:
        return (
            f"{name} has changed since this fix was made (now {_size(obj)} items, then {then.size})"
        )
    return ""


def _said(then: Mark, obj: Any) -> str:
    """What tells the two apart, for tensors: their shape and device."""
    if not probe.is_tensor(obj) or not then.shape:
        return ""
    facts = probe.tensor_facts(obj)
    return f" (now {facts.shape} on {facts.device}, then {then.shape} on {then.device})"


def _short(kind: str) -> str:
    return kind.rsplit(".", 1)[-1] or "object"


def _kind(obj: Any) -> str:
    kind = type(obj)
    return f"{probe.class_module(kind)}.{probe.class_name(obj)}"


def _size(obj: Any) -> int:
    try:
        if probe.is_a(obj, dict):
            return dict.__len__(obj)
        if probe.is_a(obj, list):
            return list.__len__(obj)
        return tuple.__len__(obj)
    except Exception:
        return -1


def _token(obj: Any) -> int:
    """A key for a weak reference to ``obj`` (0 when it takes none)."""
    key = id(obj)
    with _lock:
        token = _tokens.get(key)
        if token is not None:
            ref = _refs.get(token)
            if ref is not None and ref() is obj:
                return token
        try:
            token = next(_counter)
            ref = weakref.ref(obj, _forget(token, key))
        except TypeError:  # a dict, list, tuple, int: no weak references
            return 0
        _refs[token] = ref
        _tokens[key] = token
        return token


def _forget(token: int, key: int) -> Any:
    def forget(_: Any) -> None:
        with _lock:
            _refs.pop(token, None)
            if _tokens.get(key) == token:
                del _tokens[key]

    return forget
