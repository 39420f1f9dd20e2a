"""What a holder kind is (:class:`Holder`), and the safe readers the kinds share.

A holder kind says, from an object's class alone, whether it holds things a
scan should look into, and lists them as ``(step, child)`` pairs: the step is
how the user reaches the child (``('attr', 'table')`` for ``helper.table``,
``('item', 'a')`` for ``pair['a']``). Everything here reads class dicts, slot
descriptors and instance dicts at C level: no ``__getattr__``, property,
``__iter__`` or ``__len__`` of a user class runs.
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ipydevice._debug import contain
from ipydevice.collect import probe
from ipydevice.collect.paths import is_key
from ipydevice.collect.reading import dict_items, plain_key, plain_name

__all__ = [
    "Holder",
    "Items",
    "class_dicts",
    "instance_dict",
    "own_attribute",
    "slot_value",
    "user_holder",
]

#: ``(step, child)`` pairs: what a holder holds and how the user writes the step.
Items = list[tuple[tuple[str, Any], Any]]

_CLASS_DICT = type.__dict__["__dict__"]
_CLASS_MRO = type.__dict__["__mro__"]
_MISSING = object()


@dataclass(frozen=True, slots=True)
class Holder:
    """A registered kind of object that holds tensors.

    Attributes:
        name: how :func:`ipydevice.plugins.holders` lists it.
        matches: ``matches(cls)``: the kind applies to instances of ``cls``
            (decided once per class and scan, from the class alone).
        items: ``items(obj, limit)``: at most ``limit`` ``(step, child)`` pairs,
            a step being ``('attr', name)`` or ``('item', key)`` (``str`` or
            ``int`` key); None when the object turns out to hold nothing.
        order: kinds are tried in this order, the first that matches wins
            (a user's kind, 0 by default, comes before the built-in ones).
    """

    name: str
    matches: Callable[[type], bool]
    items: Callable[[Any, int], Items | None]
    order: int = 500


def class_dicts(kind: Any) -> list[Any]:
    """The class dicts along ``kind``'s MRO (``object``'s left out), read
    without a metaclass."""
    try:
        mro = _CLASS_MRO.__get__(kind)
        bases = tuple.__iter__(mro) if type(mro) is tuple else ()
        return [_CLASS_DICT.__get__(base) for base in bases if base is not object]
    except BaseException as caught:  # not a class
        contain(caught)
        return []


def own_attribute(kind: Any, name: str) -> Any:
    """``name`` as the class (not ``object``) stores it, or None: a class's own
    ``__getattr__`` or ``to``, never run."""
    for namespace in class_dicts(kind):
        if name in namespace:
            return namespace[name]
    return None


#: how a class keeps an instance dict: a Python class's ``__dict__`` getset, or a C
#: class's member (``types.SimpleNamespace``)
DICT_DESCRIPTORS = (types.GetSetDescriptorType, types.MemberDescriptorType)


def instance_dict(obj: Any) -> dict[str, Any] | None:
    """The instance ``__dict__`` when the class keeps one the plain way (the
    ``__dict__`` slot of the type, not a property of the user's), else None."""
    if type(own_attribute(type(obj), "__dict__")) not in DICT_DESCRIPTORS:
        return None
    return probe.module_dict(obj)


def slot_value(obj: Any, kind: type, name: str) -> Any:
    """The value of the slot ``name`` (its member descriptor, read in C), or
    ``_MISSING`` when unset or not a slot."""
    descriptor = own_attribute(kind, name)
    if type(descriptor) is not types.MemberDescriptorType:
        return _MISSING
    try:
        return descriptor.__get__(obj, kind)
    except BaseException as caught:  # unset: AttributeError
        contain(caught)
        return _MISSING


def slot_names(kind: Any) -> list[str]:
    """The member slots declared along the MRO, in declaration order."""
    names: list[str] = []
    for namespace in class_dicts(kind):
        declared = namespace.get("__slots__")
        if type(declared) is str:
            declared = (declared,)
        if not probe.is_a(declared, (tuple, list)):
            continue
        for name in declared:
            if (
                type(name) is str
                and name not in names
                and type(namespace.get(name)) is types.MemberDescriptorType
            ):
                names.append(name)
    return names


def attribute_items(obj: Any, names: list[str], limit: int) -> Items:
    """``('attr', name)`` pairs for ``names``, read from slots or the instance dict."""
    kind = type(obj)
    state = instance_dict(obj) or {}
    out: Items = []
    for name in names[:limit]:
        value = slot_value(obj, kind, name)
        if value is _MISSING:
            value = state.get(name, _MISSING)
        if value is not _MISSING:
            out.append((("attr", name), value))
    return out


def public_attributes(state: Any, limit: int) -> Items:
    """The instance dict's public attributes (names not starting with ``_``)."""
    out: Items = []
    for key, value in dict_items(state, limit):
        name = key if type(key) is str else plain_name(key)
        if name is not None and name.isidentifier() and not name.startswith("_"):
            out.append((("attr", name), value))
    return out


#: values of one candidate store looked at for a tensor
_STORE_PEEK = 16


def private_store(obj: Any, limit: int, depth: int = 1) -> tuple[str, Any, dict] | None:
    """``(name, value, dict)``: the dict an object keeps its contents in under
    a private name: a dict attribute (``self._store = {}``), or the dict one
    level down (``self._store = Storage()`` keeping ``_mapping = {}``), the
    first of them that holds a tensor among its first values (a few dozen
    values looked at in all, whatever the object holds)."""
    state = instance_dict(obj)
    if not state:
        return None
    private = [
        (key, value)
        for key, value in dict_items(state, 32)
        if type(key) is str and key[:1] == "_" and key[:2] != "__"
    ]
    # a dict of its own first (a config's ``_content``), then one level down (not
    # the ``_parent`` a config's section points back to, which holds it)
    for nested in (False, True):
        for key, value in private:
            candidates = [value] if not nested and probe.is_a(value, dict) else []
            if nested and not probe.is_a(value, dict) and not probe.is_tensor(value):
                inner = instance_dict(value) if not probe.is_a(value, type) else None
                candidates = [v for _, v in dict_items(inner, 8) if probe.is_a(v, dict)]
            for store in candidates:
                values = [v for _, v in dict_items(store, min(limit, _STORE_PEEK))]
                if nested and any(v is obj for v in values):
                    continue  # (its holder's store: a parent it points back to)
                if any(_stored(v, depth) for v in values):
                    return key, value, store
    return None


def _stored(value: Any, depth: int) -> bool:
    """A store's value that holds a tensor: a tensor, a box of one (OmegaConf's
    value node), or (``depth`` levels down) an object keeping a store of its own
    (a config's nested section)."""
    if probe.is_tensor(value) or unboxed(value) is not None:
        return True
    if depth <= 0 or probe.is_a(value, (type, dict, list, tuple, str)):
        return False
    return private_store(value, _STORE_PEEK, depth - 1) is not None


def unboxed(value: Any) -> Any:
    """The one tensor a box keeps (an object whose instance dict's first few values
    hold exactly one tensor, a config's value node: ``{'_val': tensor, '_parent':
    ..., '_metadata': ...}``), else None."""
    if probe.is_tensor(value) or probe.is_a(value, (type, dict, list, tuple, str)):
        return None
    if probe.is_module(value) or probe.is_optimizer(value):
        return None
    tensors = [v for _, v in dict_items(instance_dict(value), 8) if probe.is_tensor(v)]
    return tensors[0] if len(tensors) == 1 else None


def user_holder(name: str, kind: Any, items: Callable[[Any], Any], order: int = 0) -> Holder:
    """A :class:`Holder` from a user's class (or class predicate) and
    ``items(obj)`` function (see :func:`ipydevice.plugins.holder`): what it
    yields is taken up to the scan's limit, each step checked."""
    if probe.is_a(kind, type):
        cls = kind

        def matches(candidate: type) -> bool:
            return issubclass(candidate, cls)

    else:
        matches = kind

    def read(obj: Any, limit: int) -> Items:
        out: Items = []
        for pair in itertools.islice(items(obj), limit):
            step = _user_step(pair)
            if step is not None:
                out.append(step)
        return out

    return Holder(name, matches, read, order)


def _user_step(pair: Any) -> tuple[tuple[str, Any], Any] | None:
    """``(key, child)``: a str key that is an identifier reads an attribute, an
    int or any other str key an item; ``(('attr' | 'item', key), child)`` says
    which. Anything else is dropped."""
    if type(pair) is not tuple or len(pair) != 2:
        return None
    key, child = pair
    if type(key) is tuple and len(key) == 2 and key[0] in ("attr", "item"):
        kind, key = key
    else:
        kind = "attr" if type(key) is str and key.isidentifier() else "item"
    plain = plain_name(key) if kind == "attr" else plain_key(key)
    if plain is None or (kind == "item" and not is_key(plain)):
        return None
    return (kind, plain), child
