"""Roots the namespace walk does not enter: objects the user reaches through a
class or a module of their own, named by identity.

The naming walk (:meth:`Scan.name_from`) follows the namespace's containers,
modules and holders. Some objects the failing code reads live elsewhere:

* in a class dict: ``self.MEAN`` where ``MEAN`` is a class attribute of the
  instance's class or of a base class (``Stats.MEAN``, named by the class that stores
  it when the user holds that class, else by the class they hold);
* in the globals of a module of the user's own files (``import prep`` then
  ``prep.TABLE``, or ``prep.Scaler.MEAN``);
* in the cache of a ``functools.lru_cache``/``cache`` function: the result of
  ``get_table(4)``, read through the garbage collector's referents of the cache
  (no call, no ``repr``). No path assigns to a cached result: it is shown as
  ``get_table(4)`` in ``get_table``'s cache (the arguments written when they are
  plain literals), and the fix is to move what the failing line uses.

:func:`name_from_roots` gives such an object the path from the namespace name that
reaches it, once :func:`checked.follow` confirms that the path's text evaluates to
that very object; a fix then assigns to that path (``Stats.MEAN =
Stats.MEAN.to(...)``).

:func:`name_frame_chains` names what a user's function read through an object no
walk enters (``self.prior.loc``, a distribution kept as a module's attribute; a
config object's field) from the root the user holds: the chain's first name is a
local of that frame, and the object it names has a namespace path (``self`` is
``vae``), so the chain is ``vae.prior.loc``, once that path evaluates to it. Class dicts and module globals are read as stored (no
metaclass, no property, no module ``__getattr__`` runs), bounded by
``settings.max_items`` per dict.
"""

from __future__ import annotations

import ast
import contextlib
import itertools
import types
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from ipydevice._debug import contain
from ipydevice.collect import probe
from ipydevice.collect.caches import CACHED, cached_results
from ipydevice.collect.checked import follow
from ipydevice.collect.frames import FrameView, is_user_file
from ipydevice.collect.holders.base import class_dicts
from ipydevice.collect.paths import Path
from ipydevice.collect.scan import Scan
from ipydevice.collect.walk import is_root_kind

__all__ = ["name_frame_chains", "name_from_roots"]

_CONTAINERS = (dict, list, tuple)


def name_from_roots(scan: Scan, namespace: Mapping[str, Any], wanted: set[int]) -> set[int]:
    """Names the unnamed entries of ``wanted`` (ids) found in a class dict or a user
    module's globals (see module docstring); returns the ids named."""
    left = {k for k in wanted if k in scan.entries and not scan.entries[k].named}
    named: set[int] = set()
    if not left or type(namespace) is not dict:
        return named
    try:
        roots = _roots(scan, namespace)
        # the classes the user holds by name (a base class stores ``MEAN``: ``Base.MEAN``)
        held = {
            id(v): n
            for n, v in reversed(roots)
            if isinstance(v, type) and type(n) is str and not n.startswith("_") and n.isidentifier()
        }
        limit = scan.settings.max_items
        for name, value in roots:
            if type(name) is not str or name.startswith("_") or not name.isidentifier():
                continue
            if type(value) is CACHED:
                for text, obj in cached_results(value, limit):
                    key = id(obj)
                    entry = scan.entries[key] if key in left else None
                    if entry is None:
                        continue
                    left.discard(key)
                    if entry.user and entry.path and entry.path[0][0] == "local":
                        continue  # the name the user's code gives it stays (``mask``)
                    entry.path, entry.where = (("local", f"{name}({text})"),), f"{name}'s cache"
                    named.add(key)
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


def _roots(scan: Scan, namespace: dict) -> list[tuple[Any, Any]]:
    """The names of ``namespace`` whose value is a class, a module or a ``functools``
    cache, picked at C speed by type from the names the scan reads: a namespace of
    10,000 tensors costs a pass over their types, not 10,000 steps of Python."""
    keys, values, kinds = scan.namespace_slice(namespace)
    found = scan.root_indexes(values)  # the top-level naming pass's, read again only without
    if found is not None:
        return [(keys[i], values[i]) for i in found]
    wanted = {k for k in set(kinds) if is_root_kind(k)}
    picked = itertools.compress(range(len(kinds)), map(wanted.__contains__, kinds))
    return [(keys[i], values[i]) for i in picked] if wanted else []


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
        for key in _candidates(base, namespace, limit):
            item = namespace.get(key)
            yield (*start, ("attr", key)), item
            yield from _container_items((*start, ("attr", key)), item, limit)


#: class id -> (a weak reference to the class, its dict's size, the keys that may hold
#: a tensor): a class dict is read once, not on every error (``nn.Module``'s holds 150
#: methods); a class given a new attribute is read again (its size changed).
_CANDIDATE_KEYS: dict[int, tuple[Any, int, tuple[str, ...]]] = {}


def _candidates(cls: Any, namespace: Any, limit: int) -> tuple[str, ...]:
    size = len(namespace)
    found = _CANDIDATE_KEYS.get(id(cls))
    if found is not None and found[0]() is cls and found[1] == size:
        return found[2]
    keys = tuple(
        key
        for key, item in itertools.islice(namespace.items(), limit)
        if type(key) is str and not key.startswith("__") and id(type(item)) not in _SKIPPED
    )
    if len(_CANDIDATE_KEYS) > 4096:
        _CANDIDATE_KEYS.clear()
    with contextlib.suppress(TypeError):  # (a class without weak references: read each time)
        _CANDIDATE_KEYS[id(cls)] = (weakref.ref(cls), size, keys)
    return keys


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


def name_frame_chains(
    scan: Scan, views: list[FrameView], namespace: Mapping[str, Any], wanted: set[int]
) -> set[int]:
    """Names the unnamed entries of ``wanted`` (ids) recorded as a chain a user's
    frame read (``self.prior.loc in VAE.forward``) from the namespace path of the
    chain's root (see module docstring); returns the ids named."""
    named: set[int] = set()
    try:
        frames = {v.label: v for v in views if v.is_user}
        # what the report is about, and the holders it is read through
        holders = {id(e.owner.obj) for k, e in scan.entries.items() if k in wanted and e.owner}
        chained = [
            entry
            for key, entry in scan.entries.items()
            if (key in wanted or key in holders)
            and not entry.named
            and entry.path[:1]
            and entry.path[0][0] == "local"
            and entry.where in frames
        ]
        # the holder before what it holds: naming ``self.prior`` renames ``self.prior.loc``
        for entry in sorted(chained, key=lambda e: len(e.path)):
            if entry.named:
                continue
            parsed = _chain_steps(str(entry.path[0][1]))
            if parsed is None:
                continue
            root, steps = parsed
            try:
                local = frames[entry.where].frame.f_locals.get(root, _ABSENT)
            except BaseException as caught:
                contain(caught)
                continue
            held = scan.entries.get(id(local))
            if held is None or not held.named or held.obj is not local:
                continue
            path: Path = (*held.path, *steps, *entry.path[1:])
            if follow(path, namespace) is entry.obj:
                named |= scan._rename(entry, path)
    except BaseException as caught:
        contain(caught)
    return named


_ABSENT: Any = object()


def _chain_steps(text: str) -> tuple[str, Path] | None:
    """``('self', (('attr', 'prior'), ('attr', 'loc')))`` for ``self.prior.loc``; None
    for anything but a name followed by attributes and constant subscripts."""
    try:
        node: ast.AST = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    steps: list[tuple[str, Any]] = []
    while not isinstance(node, ast.Name):
        if isinstance(node, ast.Attribute):
            steps.append(("attr", node.attr))
            node = node.value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
            if type(key) not in (str, int):
                return None
            steps.append(("item", key))
            node = node.value
        else:
            return None
    return node.id, tuple(reversed(steps))
