"""Names the user holds, over the inner paths of a wrapper that stands for them.

``torch.compile`` wraps what the user made: ``cmodel = torch.compile(model)`` is a
new module whose ``_orig_mod`` is ``model``; ``f = torch.compile(fn)`` keeps ``fn`` as
``f._torchdynamo_orig_callable``. A scan that reaches a tensor through the wrapper
names it ``cmodel._orig_mod.scale``, though the user holds that very module as
``model`` and writes ``model.scale``.

:func:`prefer_held_roots` rewrites a named entry's path whose steps go through a
private attribute (``_orig_mod``, ``_torchdynamo_orig_callable``, ``__closure__``)
so that it starts at the namespace name that holds, by identity, the object
after the last such step: the same object, the same slot, so a fix that assigns
to the new path changes what the failing code reads. A tensor the user holds by
a name of its own (``mean``, closed over by ``normalize``) is named so, and the
slot the code reads (the cell) is kept in ``Entry.slots``: the move sets both. The objects along the path
are followed through instance dicts and plain containers only: no property,
no ``__getattr__`` runs.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

from ipydevice._debug import contain
from ipydevice.collect import probe
from ipydevice.collect.paths import Path
from ipydevice.collect.scan import Scan

__all__ = ["follow_path", "held_names", "prefer_held_roots", "shortest_held", "step_into"]

#: Namespace names read for the identity index.
_MAX_NAMES = 20_000
_MODULE_STORES = ("_modules", "_parameters", "_buffers")


def held_names(namespace: Mapping[str, Any]) -> dict[int, str]:
    """``id(value) -> name`` for the public names of ``namespace`` (the first name wins)."""
    out: dict[int, str] = {}
    if type(namespace) is not dict:
        return out
    try:
        for index, (name, value) in enumerate(dict.items(namespace)):
            if index >= _MAX_NAMES:
                break
            if type(name) is str and not name.startswith("_") and name.isidentifier():
                out.setdefault(id(value), name)
    except BaseException as caught:
        contain(caught)
    return out


def step_into(obj: Any, step: tuple[str, Any]) -> tuple[bool, Any]:
    """One step of a path, read from instance dicts and plain containers only."""
    kind, key = step
    if kind == "attr":
        state = probe.module_dict(obj)
        if type(state) is not dict:
            return False, None
        if key in state:
            return True, state[key]
        for store in _MODULE_STORES:
            inner = state.get(store)
            if type(inner) is dict and key in inner:
                return True, inner[key]
        if key == "__closure__" and type(obj) is types.FunctionType:
            return True, obj.__closure__
        if key == "cell_contents" and type(obj) is types.CellType:
            try:
                return True, obj.cell_contents
            except ValueError:
                return False, None
        return False, None
    if kind == "item" and type(obj) in (dict, list, tuple):
        try:
            return True, obj[key]
        except (LookupError, TypeError):
            return False, None
    return False, None


def follow_path(path: Path, namespace: Mapping[str, Any], children: int = 4096) -> Any:
    """The object at ``path`` from the namespace, each step read without user code: a
    submodule's step as the walk writes it (``heads['task1']``, ``trunk[2]``), else
    :func:`step_into`; None when a step does not resolve."""
    from ipydevice.collect.walk import module_children

    try:
        obj = namespace[path[0][1]]
    except BaseException:
        return None
    for step in path[1:]:
        if probe.is_module(obj):
            obj = next((c for s, c in module_children(obj, children) if s == step), None)
            if obj is None:
                return None
            continue
        ok, obj = step_into(obj, step)
        if not ok:
            return None
    return obj


def _private(step: tuple[str, Any]) -> bool:
    return step[0] == "attr" and type(step[1]) is str and step[1].startswith("_")


def _held_along(
    path: Path, namespace: Mapping[str, Any], held: dict[int, str], private_ok: bool = True
) -> Path | None:
    """``path`` from the last object along it (before its end) that a namespace name
    holds: the same slot, a shorter path; None when no name holds one. With
    ``private_ok`` False, the rest of the path must not step through a private name."""
    try:
        obj = namespace[path[0][1]]
    except BaseException:
        return None
    best: Path | None = None
    for index in range(1, len(path) - 1):
        ok, obj = step_into(obj, path[index])
        if not ok:
            break
        name, rest = held.get(id(obj)), path[index + 1 :]
        if name is not None and (private_ok or not any(map(_private, rest))):
            best = (("name", name), *rest)
    return best


def shorter_path(path: Path, namespace: Mapping[str, Any], held: dict[int, str]) -> Path | None:
    """``path`` rewritten from the namespace name that holds the object after its
    last private step (a strict prefix: the same slot is assigned), or None."""
    if len(path) < 3 or path[0][0] != "name" or not any(_private(s) for s in path[1:]):
        return None
    return _held_along(path, namespace, held, private_ok=False)


def shortest_held(scan: Scan, namespace: Mapping[str, Any], wanted: set[int]) -> bool:
    """Names each of ``wanted`` by its shortest path from the names the user holds.

    A walk names an object once, from the first root that reaches it; a module's view
    gives its parts' paths whole (``model.covar_module.center`` below ``mll``), so a
    root the walk entered first can name an object through another root the user
    holds as well (``mll.model`` is ``gp``). The path from the name holding the last
    such object is the shorter one, and the same slot. Returns True when a name changed.
    """
    changed = False
    try:
        entries = [
            e
            for key, e in scan.entries.items()
            if key in wanted and e.named and len(e.path) >= 3 and e.path[0][0] == "name"
        ]
        if not entries:
            return False
        roots = scan.namespace_roots(namespace)
        held = (
            {id(value): name for name, value, _ in reversed(roots)}
            if roots is not None
            else held_names(namespace)
        )
        for entry in entries:
            found = _held_along(entry.path, namespace, held)
            if found is not None and len(found) < len(entry.path):
                entry.path = found
                changed = True
    except BaseException as caught:
        contain(caught)
    return changed


def prefer_held_roots(scan: Scan, namespace: Mapping[str, Any]) -> None:
    """Rewrites the named entries' paths (see module docstring)."""
    try:
        candidates = [
            e
            for e in scan.entries.values()
            if e.named and e.path[:1] and e.path[0][0] == "name" and any(map(_private, e.path))
        ]
        if not candidates:
            return
        held = held_names(namespace)
        for entry in candidates:
            found = shorter_path(entry.path, namespace, held)
            if found is not None:
                entry.path = found
            name = held.get(id(entry.obj))
            if name is not None and any(map(_private, entry.path)) and probe.is_tensor(entry.obj):
                # (a closure's cell): the user's name, and the cell a move sets too
                entry.slots = (*entry.slots, entry.path)
                entry.path = (("name", name),)
    except BaseException as caught:
        contain(caught)
