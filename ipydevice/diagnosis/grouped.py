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

from ipydevice.collect import probe
from ipydevice.collect.paths import format_path
from ipydevice.collect.together import has_behaviour, users_class
from ipydevice.diagnosis.culprits import Culprit

__all__ = ["group_library_objects"]


def group_library_objects(found: list[Culprit]) -> list[Culprit]:
    """``found`` with the culprits that are tensor attributes of one library object
    merged into a culprit named as that object, where the first of them was."""
    groups: dict[int, Culprit] = {}
    out: list[Culprit] = []
    for culprit in found:
        holder = _library_holder(culprit)
        if holder is None:
            out.append(culprit)
            continue
        group = groups.get(id(holder))
        if group is None:
            entry = culprit.entries[0]
            finding = dataclasses.replace(
                culprit.finding, name=format_path(entry.path[:-1]), kind=probe.class_name(holder)
            )
            group = groups[id(holder)] = Culprit(finding, [])
            out.append(group)
        group.entries.extend(culprit.entries)
    for group in groups.values():
        parts = [f"`{e.path[-1][1]}`" for e in group.entries]
        listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
        finding = group.finding
        group.finding = dataclasses.replace(
            finding,
            why=(
                f"a {finding.kind} whose {listed} "
                f"{'is' if len(parts) == 1 else 'are'} on {finding.device}: it computes with "
                f"what it keeps, and the computation runs on {finding.target}"
            ),
        )
    return out


def _library_holder(culprit: Culprit) -> object | None:
    if len(culprit.entries) != 1 or culprit.owner is not None:
        return None
    entry = culprit.entries[0]
    holder = entry.container
    if (
        holder is None
        or not entry.named
        or len(entry.path) < 2
        or entry.path[-1][0] != "attr"
        or not probe.is_tensor(entry.obj)
        or probe.is_module(holder)
        or probe.is_optimizer(holder)
        or probe.is_a(holder, (tuple, list, dict))  # (a record's fields: a namedtuple's)
        or probe.class_attribute(type(holder), "to") is not None
        or not has_behaviour(type(holder))
    ):
        return None
    if users_class(type(holder)):
        return None  # (its attributes are the user's: they wrote them)
    return holder
