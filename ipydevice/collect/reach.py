"""Roots the namespace walk does not enter: objects the user reaches through a
class or a module of their own, named by identity.

The naming walk (:meth:`Scan.name_from`) follows the namespace's containers,
modules and holders. Some objects the failing code reads live elsewhere:

* in a class dict: ``self.MEAN`` where ``MEAN`` is a class attribute of the
  instance's class or of a base class (``Stats.MEAN``, named by the class that stores
  it when the user holds that class, else by the class they hold);
* in the globals of a module of the user's own files (``import prep`` then
  ``prep.TABLE``, or ``prep.Scaler.MEAN``).

:func:`name_from_roots` gives such an object the path from the namespace name that
reaches it, once :func:`checked.follow` confirms that the path's text evaluates to
that very object; a fix then assigns to that path (``Stats.MEAN =
Stats.MEAN.to(...)``). Class dicts and module globals are read as stored (no
metaclass, no property, no module ``__getattr__`` runs), bounded by
``settings.max_items`` per dict.
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Iterator, Mapping
from typing import Any

from ipydevice._debug import contain
from ipydevice.collect import probe
from ipydevice.collect.checked import follow
from ipydevice.collect.frames import is_user_file
from ipydevice.collect.holders.base import class_dicts
from ipydevice.collect.paths import Path
from ipydevice.collect.roots import held_names
from ipydevice.collect.scan import Scan

__all__ = ["name_from_roots"]

#: Namespace names looked at for classes and modules.
_MAX_NAMES = 20_000
_CONTAINERS = (dict, list, tuple)


def name_from_roots(scan: Scan, namespace: Mapping[str, Any], wanted: set[int]) -> set[int]:
    """Names the unnamed entries of ``wanted`` (ids) found in a class dict or a user
    module's globals (see module docstring); returns the ids named."""
    left = {k for k in wanted if k in scan.entries and not scan.entries[k].named}
    named: set[int] = set()
    if not left or type(namespace) is not dict:
        return named
    try:
        held = held_names(namespace)
        limit = scan.settings.max_items
        for name, value in itertools.islice(dict.items(namespace), _MAX_NAMES):
            if type(name) is not str or name.startswith("_") or not name.isidentifier():
                continue
            for path, obj in _reached(name, value, held, limit):
                key = id(obj)
                if key in left and follow(path, namespace) is obj:
                    named |= scan._rename(scan.entries[key], path)
                    left.discard(key)
            if not left or scan.budget.spent():
                break
    except BaseException as caught:
        contain(caught)
    return named


def _reached(name: str, value: Any, held: dict[int, str], limit: int) -> Iterator[tuple[Path, Any]]:
    kind = type(value)
    if issubclass(kind, type):
        yield from _class_items(value, (("name", name),), held, limit)
    elif kind is types.ModuleType and _user_module(value):
        state = probe.module_dict(value)
        if type(state) is not dict:
            return
        for key, item in itertools.islice(dict.items(state), limit):
            if type(key) is not str or key.startswith("__"):
                continue
            path: Path = (("name", name), ("attr", key))
            yield path, item
            yield from _container_items(path, item, limit)
            if type(item) is type and probe.class_attribute(item, "__module__") == state.get(
                "__name__"
            ):
                yield from _class_items(item, path, {}, limit)


def _class_items(
    cls: Any, path: Path, held: dict[int, str], limit: int
) -> Iterator[tuple[Path, Any]]:
    """What the class dicts along ``cls``'s MRO store, each named by the class that
    stores it when the user holds that class by a name, else from ``path``."""
    try:
        bases = type.__dict__["__mro__"].__get__(cls)
    except BaseException as caught:
        contain(caught)
        return
    for base, namespace in zip(bases, class_dicts(cls), strict=False):
        owner = held.get(id(base))
        start: Path = (("name", owner),) if owner is not None else path
        for key, item in itertools.islice(namespace.items(), limit):
            if type(key) is not str or key.startswith("__") or id(type(item)) in _SKIPPED:
                continue
            yield (*start, ("attr", key)), item
            yield from _container_items((*start, ("attr", key)), item, limit)


#: what a class dict holds that cannot be (or hold) a tensor
_SKIPPED = frozenset(
    id(kind)
    for kind in (
        types.FunctionType,
        staticmethod,
        classmethod,
        property,
        str,
        int,
        float,
        bool,
        type(None),
    )
)


def _container_items(path: Path, value: Any, limit: int) -> Iterator[tuple[Path, Any]]:
    """One level into a builtin dict, list or tuple (a table of constants)."""
    kind = type(value)
    if kind is dict:
        for key, item in itertools.islice(dict.items(value), limit):
            if type(key) in (str, int):
                yield (*path, ("item", key)), item
    elif kind in (list, tuple):
        for index, item in enumerate(itertools.islice(iter(value), limit)):
            yield (*path, ("item", index)), item


def _user_module(module: Any) -> bool:
    """A module of the user's own files (not the standard library, not a package
    installed in site-packages)."""
    state = probe.module_dict(module)
    filename = state.get("__file__") if type(state) is dict else None
    return type(filename) is str and is_user_file(filename)
