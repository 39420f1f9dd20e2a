"""A holder passed whole, wholly off the target, named as one thing: ``fast_weights``,
not ``fast_weights['0.weight']``.

The user's innermost failing line hands a dict, list or tuple of tensors, or an object
with a ``.to()`` of its own, to code they did not write, whole: an argument
(``functional_call(net, fast_weights, (x,))``, ``torch._foreach_lerp_(shadow, params,
w)``) or the receiver of a method (``pca.transform(z)``). That code reads the items;
the user knows the holder. When every tensor it holds is off the target, the culprits
that are its items become one culprit named as the holder, where the first of them was;
the fix moves the holder (it already does: its items are all it holds).

A holder spread into a call (``model(**inputs)``) is not passed whole: the callee
receives the items, one parameter each, and the first culprit stays the item
(``inputs['input_ids']``). Nothing runs: the failing statements are read from their
source, their chains resolved without user code.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.frames import FrameView, failing_statement, safe_value
from ipydevice.collect.holders.base import instance_dict
from ipydevice.collect.paths import Path, format_path
from ipydevice.collect.roots import follow_path
from ipydevice.collect.walk import is_to_batch
from ipydevice.diagnosis.culprits import Culprit, regrouped
from ipydevice.diagnosis.devices import same_device

__all__ = ["group_wholes"]

#: Tensors a holder may hold to be read whole (a wider one is reported item by item).
_MAX_TENSORS = 256


def group_wholes(
    found: list[Culprit], namespace: Any, views: Sequence[FrameView], target: str
) -> list[Culprit]:
    """``found`` with the item culprits of a holder passed whole merged (see module
    docstring)."""
    by_holder: dict[Path, list[Culprit]] = {}
    for culprit in found:
        entry = culprit.entries[0] if len(culprit.entries) == 1 else None
        if (
            entry is not None
            and culprit.owner is None
            and entry.named
            and len(entry.path) >= 2
            and entry.path[0][0] == "name"
            and probe.is_tensor(entry.obj)
        ):
            by_holder.setdefault(entry.path[:-1], []).append(culprit)
    merged: dict[int, Culprit] = {}
    for path, culprits in by_holder.items():
        holder = follow_path(path, namespace)
        tensors = _tensors(holder) if holder is not None else None
        if not tensors or len(tensors) < 2 or not target:
            continue
        devices = {probe.placement(t)[0] for t in tensors}
        if any(same_device(d, target) for d in devices):
            continue  # partly on the target: the items that are not are the culprits
        ids = {id(c.entries[0].obj) for c in culprits}
        if not ids <= {id(t) for t in tensors} or not _passed_whole(holder, views):
            continue
        first = culprits[0].finding
        where = sorted(devices)
        kind = "container" if probe.is_a(holder, (dict, list, tuple)) else probe.class_name(holder)
        finding = dataclasses.replace(
            first,
            name=format_path(path),
            kind=kind,
            device=where[0] if len(where) == 1 else "mixed",
            why=(
                f"all {len(tensors)} of its tensors are on {', '.join(where)}, and it is "
                f"passed whole to code that reads them on {target}"
            ),
        )
        group = Culprit(finding, [e for c in culprits for e in c.entries])
        for culprit in culprits:
            merged[id(culprit)] = group
    return regrouped(found, merged)


def _tensors(holder: Any) -> list[Any] | None:
    """The tensors a plain container or an object with its own ``.to()`` holds
    directly, read without user code; None for anything else or a wide one."""
    if probe.is_a(holder, dict):
        values: Iterable[Any] = dict.values(holder)
    elif probe.is_a(holder, list):
        values = list.__iter__(holder)
    elif probe.is_a(holder, tuple):
        values = tuple.__iter__(holder)
    elif is_to_batch(holder):
        state = instance_dict(holder)
        values = dict.values(state) if state is not None else ()
    else:
        return None
    # the first items only: a holder of a million is read no further than this
    tensors = [v for v in itertools.islice(values, _MAX_TENSORS + 1) if probe.is_tensor(v)]
    return tensors if len(tensors) <= _MAX_TENSORS else None


def _passed_whole(holder: Any, views: Sequence[FrameView]) -> bool:
    """The innermost user frame's failing statement passes ``holder`` itself to a call
    (what runs below it is not the user's code): an argument not spread with
    ``*``/``**``, a keyword's value, or a method's receiver."""
    view = next((v for v in reversed(views) if v.is_user), None)
    found = failing_statement(view) if view is not None else None
    if view is not None and found is not None:
        for node in ast.walk(found[0]):
            if not isinstance(node, ast.Call):
                continue
            given = [a for a in node.args if not isinstance(a, ast.Starred)]
            given += [k.value for k in node.keywords if k.arg is not None]
            if isinstance(node.func, ast.Attribute):
                given.append(node.func.value)
            for expr in given:
                if isinstance(expr, (ast.Name, ast.Attribute, ast.Subscript)):
                    ok, value = safe_value(expr, view.frame)
                    if ok and value is holder:
                        return True
    return False
