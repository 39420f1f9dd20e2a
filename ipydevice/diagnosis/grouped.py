"""A library object's tensors named as the object: ``vae.prior``, not ``vae.prior.loc``.

An object of a library (a ``torch.distributions.Normal``, a library's helper) that
computes with the tensors it keeps, and has no ``.to()`` of its own, is one thing to
its user: they made it (``Normal(mu, sigma)``) and hold it, they never wrote its
attributes. The culprits that are its tensors (the together mechanism,
:mod:`ipydevice.collect.together`, adds its other tensors off the target) become one
culprit named as the object, its tensors its parts; the fix still moves each of them
where it is kept. A class of the user's own code keeps its attributes' names
(``diffusion.sqrt_alphas_cumprod``): the user wrote them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ipydevice.collect import probe
from ipydevice.collect.paths import Path, format_path
from ipydevice.collect.roots import step_into
from ipydevice.collect.scan import Entry
from ipydevice.collect.together import has_behaviour, users_class
from ipydevice.diagnosis.culprits import Culprit

__all__ = ["group_library_objects"]


def group_library_objects(
    found: list[Culprit], namespace: Mapping[str, Any] | None = None
) -> list[Culprit]:
    """``found`` with the culprits that are tensors of one library object merged into
    a culprit named as that object, where the first of them was."""
    groups: dict[int, tuple[Culprit, int, object]] = {}
    out: list[Culprit] = []
    for culprit in found:
        holder, size = _library_holder(culprit)
        if holder is not None:
            holder, size = _outermost(culprit.entries[0], holder, size)
        if holder is None and namespace is not None:
            holder, size = _moves_itself(culprit, namespace)
        if holder is None:
            out.append(culprit)
            continue
        group = groups.get(id(holder))
        if group is None:
            entry = culprit.entries[0]
            finding = dataclasses.replace(
                culprit.finding, name=format_path(entry.path[:size]), kind=probe.class_name(holder)
            )
            group = groups[id(holder)] = (Culprit(finding, []), size, holder)
            out.append(group[0])
        group[0].entries.extend(culprit.entries)
    for merged, size, holder in groups.values():
        parts = [f"`{_rest(e.path[size:])}`" for e in merged.entries]
        listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
        finding = merged.finding
        own = callable(probe.class_attribute(type(holder), "to"))
        does = (
            f"its own .to() moves {'it' if len(parts) == 1 else 'them'}"
            if own
            else ("it computes with what it keeps")
        )
        merged.finding = dataclasses.replace(
            finding,
            why=(
                f"{'an' if finding.kind[:1].lower() in 'aeiou' else 'a'} {finding.kind} whose {listed} {'is' if len(parts) == 1 else 'are'} on "
                f"{finding.device}: {does}, and the computation runs on {finding.target}"
            ),
        )
    return out


def _rest(steps: Path) -> str:
    """The steps below a holder as written after it: ``shadow_params[0]``, ``loc``."""
    text = format_path((("local", "_"), *steps))[1:]
    return text[1:] if text.startswith(".") else text


def _moves_itself(culprit: Culprit, namespace: Mapping[str, Any]) -> tuple[object | None, int]:
    """The outermost object along a tensor culprit's path, two steps or more above it,
    that has a ``.to()`` of its own (``ema`` of ``ema.shadow_params[0]``: an EMA
    helper's list of shadow tensors is its own business), and the path's length to it."""
    if len(culprit.entries) != 1 or culprit.owner is not None:
        return None, 0
    entry = culprit.entries[0]
    path = entry.path
    if not entry.named or len(path) < 3 or path[0][0] != "name" or not probe.is_tensor(entry.obj):
        return None, 0
    try:
        obj = namespace[path[0][1]]
    except BaseException:
        return None, 0
    for size in range(1, len(path) - 1):
        if size > 1:
            ok, obj = step_into(obj, path[size - 1])
            if not ok:
                return None, 0
        if (
            not probe.is_tensor(obj)
            and not probe.is_module(obj)
            and not probe.is_optimizer(obj)
            and not probe.is_a(obj, (dict, list, tuple, type))
            and callable(probe.class_attribute(type(obj), "to"))
        ):
            return obj, size
    return None, 0


def _mapping(obj: object) -> bool:
    try:
        return issubclass(type(obj), Mapping)
    except Exception:  # (a hostile metaclass)
        return False


def _library_holder(culprit: Culprit) -> tuple[object | None, int]:
    if len(culprit.entries) != 1 or culprit.owner is not None:
        return None, 0
    entry = culprit.entries[0]
    holder = entry.container
    if (
        holder is None
        or not entry.named
        or len(entry.path) < 2
        or entry.path[-1][0] != "attr"
        or not probe.is_tensor(entry.obj)
        or not _computes(holder)
    ):
        return None, 0
    return holder, len(entry.path) - 1


def _computes(holder: object) -> bool:
    """A library's object that computes with what it keeps, with no ``.to()``."""
    return not (
        probe.is_module(holder)
        or probe.is_optimizer(holder)
        or probe.is_a(holder, (tuple, list, dict))  # (a record's fields: a namedtuple's)
        or _mapping(holder)  # (a config's section keeps values, it does not compute)
        or probe.class_attribute(type(holder), "to") is not None
        or not has_behaviour(type(holder))
        or users_class(type(holder))  # (its attributes are the user's: they wrote them)
    )


def _outermost(entry: Entry, holder: object, size: int) -> tuple[object, int]:
    """The outermost of the objects that hold ``holder`` attribute by attribute, each
    one that computes too (an ``Independent`` around a ``Uniform``, a mixture around
    its components): the one the user made and holds. Each step up the scan's owner
    chain (each holder's entry owns what it holds) is one step back along the
    culprit's path; no user code runs."""
    node = entry.owner
    while node is not None and node.obj is not holder:
        node = node.owner
    while node is not None and size > 1:
        above = node.owner
        if above is None or entry.path[size - 1][0] != "attr" or not _computes(above.obj):
            break
        node, holder, size = above, above.obj, size - 1
    return holder, size
