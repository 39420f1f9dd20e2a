"""A layer wholly off the target named as one thing: ``model.heads['task1']``, not its
``weight`` and ``bias``.

A layer added to a model after ``model.to()`` (a new task's head in a ``ModuleDict``, a
layer swapped into a ``Sequential``) sits inside a module that is otherwise on the
target, so the module rule of :mod:`ipydevice.diagnosis.culprits` (a submodule the scan
holds as its own entry, wholly off the target) does not see it: the walk gave its
tensors their paths through the model. The culprits that are all the parameters and
buffers of one layer (with at most a few submodules of its own) become one culprit named
as the layer, where the first of them was; the fix moves the layer (``Module.to``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.paths import format_path
from ipydevice.collect.roots import follow_path
from ipydevice.collect.scan import Scan
from ipydevice.diagnosis.culprits import Culprit, regrouped
from ipydevice.model import Finding

__all__ = ["group_layers"]


def group_layers(found: list[Culprit], scan: Scan, namespace: Mapping[str, Any]) -> list[Culprit]:
    """``found`` with the tensor culprits that make up a whole leaf layer merged."""
    by_layer: dict[tuple, list[Culprit]] = {}
    for culprit in found:
        entry = culprit.entries[0] if len(culprit.entries) == 1 else None
        if (
            entry is None
            or culprit.owner is not None
            or entry.parent_kind != "module"
            or not entry.named
            or len(entry.path) < 2
            or entry.path[0][0] != "name"
        ):
            continue
        by_layer.setdefault(entry.path[:-1], []).append(culprit)
    merged: dict[int, Culprit] = {}
    for path, culprits in by_layer.items():
        # a layer of a model (``model.heads['task1']``); a loss module held by its own
        # name keeps its tensors' names (``criterion.weight``: what the user passed it)
        # (a model's plain list holds it: ``reader.criterions[0]`` is a layer of ``reader``)
        if len(path) < 2 or not any(
            probe.is_module(follow_path(path[:size], namespace)) for size in range(1, len(path))
        ):
            continue
        layer = follow_path(path, namespace)
        tensors = _leaf_tensors(layer)
        ids = {id(c.entries[0].obj) for c in culprits}
        if not tensors or {id(t) for t in tensors} != ids:
            continue
        # a layer that only wraps another (julius' ``LowPassFilter`` around its private
        # ``_lowpasses``) is the layer the user made: the outermost with the same tensors
        while len(path) > 2:
            above = follow_path(path[:-1], namespace)
            if not probe.is_module(above) or {id(t) for t in _leaf_tensors(above)} != ids:
                break
            path, layer = path[:-1], above
        entry = scan.add(layer, path, "namespace")
        if entry is None:
            continue
        entry.named = True
        first = culprits[0].finding
        devices = sorted({c.finding.device for c in culprits})
        why = (
            f"all its parameters and buffers are on {', '.join(devices)}, the rest of the model "
            f"on {first.target} (added or replaced after model.to()?)"
        )
        finding = Finding(
            format_path(path),
            devices[0] if len(devices) == 1 else "mixed",
            "module",
            "namespace",
            why,
            target=first.target,
        )
        group = Culprit(finding, [c.entries[0] for c in culprits], owner=entry)
        for culprit in culprits:
            merged[id(culprit)] = group
    return regrouped(found, merged)


def _leaf_tensors(layer: Any) -> list[Any]:
    """A layer's parameters and buffers, its submodules' included (e3nn's ``Linear``
    runs a traced ``_compiled_main`` of its own); none for a module of more than a
    few submodules: a block of layers is reported layer by layer."""
    if not probe.is_module(layer):
        return []
    tensors: list[Any] = []
    queue = [layer]
    for count in range(_SUBMODULES + 1):
        if not queue:
            return tensors
        if count == _SUBMODULES:
            return []
        attributes = probe.module_dict(queue.pop())
        for store in (attributes.get("_parameters"), attributes.get("_buffers")):
            if type(store) is dict:
                tensors += [t for t in dict.values(store) if t is not None]
        children = attributes.get("_modules")
        if type(children) is dict:
            queue += [m for m in dict.values(children) if m is not None]
    return tensors


#: Submodules a layer may have (a block of more is not one layer).
_SUBMODULES = 4
