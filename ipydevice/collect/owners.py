"""Owners over aliases: a tensor the user holds under a bare name, or a frame's
local, that a module of the namespace registers is named by that module; so is
a view made from such a tensor (``cls_tokens = vit.cls_token.expand(...)``); a
module held under a bare name that a holder of the namespace also holds (the
loop variable ``head`` of ``for head in heads``) is named by that holder
(``heads[1]``).

``for p1, p2 in zip(m1.parameters(), m2.parameters())``: ``p2`` is
``m2.weight``, and what a fix moves is ``m2`` (``m2.to(device)``); rebinding
``p2`` would leave the module unchanged under an in-place update. Part of the
naming stage (:func:`ipydevice.pipeline.engine.name_in_depth`).

A loop variable bound to a module that a holder of the namespace keeps
(``for name, m in models.items()``, ``for head in heads``) is named by that
holder's path (``models['large']``, ``heads[1]``): the loop variable names
whichever module the loop reached last, which after the loop (an exception group
raised once every model was tried) need not be the one that failed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.paths import Path, format_path
from ipydevice.collect.scan import Entry, Scan
from ipydevice.collect.walk import container_items

__all__ = ["name_owners", "take_over"]


def name_owners(scan: Scan, namespace: Mapping[str, Any], only: set[int]) -> bool:
    """Names a tensor the user holds under a bare name (a loop variable over
    ``m2.parameters()``, ``w = net.token``) by the module that owns it
    (``m2.weight``): the owner is what a fix must move, since rebinding the
    alias leaves the module unchanged. Looks at the namespace's top-level
    modules not scanned yet (each scanned once, bounded like any module).
    Returns True when one was named so."""
    found = _name_elements(scan, namespace, only)
    aliases = {
        key: entry
        for key, entry in scan.entries.items()
        if key in only
        and len(entry.path) == 1
        and entry.path[0][0] in ("name", "local")
        and entry.parent_kind != "module"
        and entry.kind in ("tensor", "parameter")
    }
    # a view of a module's tensor (``cls_tokens = repeat(vit.cls_token, ...)``,
    # ``w = net.weight.T``): the tensor it was made from is what moves
    views: dict[int, Entry] = {}
    for alias in list(aliases.values()):
        base = probe.tensor_base(alias.obj)
        if base is not None and id(base) not in aliases:
            views[id(base)] = alias
    if not aliases:
        return found
    # a view of a tensor a module scanned already registers (``self.prompts[task]
    # .expand(...)`` in its forward, the module on the failing line)
    scanned = [
        (e.path, e.module) for e in scan.entries.values() if e.module is not None and e.named
    ]
    for owned, view_of in scanned if views else ():
        for rel, tensor, _ in view_of.registered:
            view = views.get(id(tensor))
            if view is None or id(view.obj) not in aliases:
                continue
            source = scan.entries.get(id(tensor)) or scan.add(
                tensor, (*owned, *rel), "namespace", named=True, user=True
            )
            if source is not None:
                del views[id(tensor)], aliases[id(view.obj)]
                found |= take_over(scan, view, tensor)
    for path, module, _ in _modules(scan, namespace):
        if scan._spent() or not aliases:
            break
        if id(module) in scan.entries:
            continue
        before = set(scan.entries)
        owner = scan.add(module, path, "namespace", named=True, user=True)
        if owner is None or owner.module is None:
            continue
        owns = False
        for rel, tensor, _ in owner.module.registered:
            view = views.pop(id(tensor), None)
            if view is not None and aliases.pop(id(view.obj), None) is not None:
                owns |= take_over(scan, view, tensor)
            entry = aliases.pop(id(tensor), None)
            if entry is not None and entry.owner is owner:
                if entry.named:
                    entry.alias = entry.alias or format_path(entry.path)
                scan._rename(entry, (*owner.path, *rel))
                owns = True
        if not owns:  # not involved: a teacher or a baseline is no culprit
            for key in set(scan.entries) - before:
                del scan.entries[key]
        else:
            owner.owns_alias = True
        found |= owns
    return found


def take_over(scan: Scan, view: Entry, tensor: Any, alias: bool = True) -> bool:
    """``tensor`` takes the place of ``view``, made from it on the failing line
    or before: the view is dropped (it is remade from the moved tensor when the
    code runs again) and its name kept as an alias (``alias``: a view, which
    shares the tensor's data, not a copy made from it)."""
    source = scan.entries.get(id(tensor))
    if source is None:
        return False
    source.operand |= view.operand
    source.consumed |= view.consumed
    source.on_line |= view.on_line
    source.frame = min(source.frame, view.frame)
    if alias:
        source.alias = source.alias or format_path(view.path)
    del scan.entries[id(view.obj)]
    return True


def _name_elements(scan: Scan, namespace: Mapping[str, Any], only: set[int]) -> bool:
    """A module named by a bare name that a holder of the namespace also holds
    (``head`` of ``for head in heads``): the holder's path is the name the user
    writes for it (``heads[1]``), the bare name its alias. A module moves in
    place, so the fix is the same object's; only the name follows the owner."""
    bare = {
        key: entry
        for key, entry in scan.entries.items()
        if key in only
        and entry.kind == "module"
        and len(entry.path) == 1
        and entry.path[0][0] in ("name", "local")
        and entry.owner is None
    }
    found = False
    for path, module, holder in _modules(scan, namespace) if bare else ():
        entry = bare.get(id(module))
        if entry is None or len(path) < 2 or scan._spent():
            continue
        del bare[id(module)]
        entry.alias = entry.alias or format_path(entry.path)
        scan._rename(entry, path)
        entry.container = holder  # (a loop over it reaches its other elements too)
        found = True
        if not bare:
            break
    return found


def _modules(scan: Scan, namespace: Mapping[str, Any]) -> Iterator[tuple[Path, Any, Any]]:
    """The namespace's modules, each with the holder it is in (None at the top
    level): its top-level names first, then those one step inside its other
    holders (``models['ema']``, ``trainer.student``)."""
    # the top-level pass's modules and holders when it ran on this namespace
    # (a namespace of 10,000 tensors is read once)
    roots = scan._roots
    items = roots[1] if roots is not None and roots[0] is namespace else None
    if items is None:
        items = scan._namespace_items(namespace, set())
    holders = []
    for name, value, _ in items:
        if probe.is_module(value):
            yield (("name", name),), value, None
        elif not probe.is_optimizer(value):
            holders.append(((("name", name),), value))
    limit = scan.settings.max_items
    for path, value in holders:
        for step, child in container_items(value, limit) or []:
            if probe.is_module(child):
                yield (*path, step), child, value
