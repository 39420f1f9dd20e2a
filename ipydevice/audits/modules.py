"""Modules: parameters and buffers split across devices (outliers named by path);
tensor attributes ``.to()`` never moves (``register_buffer``); submodules in plain
lists or dicts (``nn.ModuleList``); in the methods of the user's module classes (read
with ``ast``, never run), calls that leave tensors off the model's device (rule
``factory_without_device``). A dispatched model (``hf_device_map``) is spread on purpose.
"""

from __future__ import annotations

import types
from typing import Any

from ipydevice import registry
from ipydevice.audits.common import (
    module_to_fix,
    say,
)
from ipydevice.code.flow import cpu_arguments
from ipydevice.code.statements import code_tree
from ipydevice.collect import probe
from ipydevice.collect.holders.base import class_dicts
from ipydevice.collect.paths import format_path
from ipydevice.collect.scan import Entry
from ipydevice.diagnosis.culprits import same_device
from ipydevice.model import Finding, Fix, Problem, Step
from ipydevice.wording import plural

__all__ = ["AUDIT", "module_problems"]


def module_problems(entry: Entry, factories: bool = True) -> list[Problem]:
    """Split devices, unregistered tensors, plain lists, factories, dispatch.

    ``factories=False`` skips reading the classes' source (the error path finds
    factory calls from the failing frame instead)."""
    view = entry.module
    if view is None:
        return []
    base = format_path(entry.path)
    majority = view.majority()
    out: list[Problem] = []
    if view.dispatch_device:
        return out  # spread over devices on purpose; see _companion_problems for inputs
    if sum(1 for s in view.shares() if s.device != probe.UNKNOWN) > 1:  # (unread: no evidence)
        out.append(_split(entry, majority))
    for rel, tensor, owner in view.attributes:
        if not _kept_on_cpu(owner, str(rel[-1][1])):
            out.append(_unregistered(entry, rel, tensor, owner, majority))
    for rel, members, owner in view.plain_lists:
        out.append(_plain_list(entry, rel, members, owner, majority))
    if factories:
        out.extend(_factories(entry, base))
    return out


def _split(entry: Entry, majority: str) -> Problem:
    view = entry.module
    assert view is not None
    outliers = _outlier_groups(entry, majority)
    shown = ", ".join(outliers[:3]) + (
        f" and {len(outliers) - 3} more" if len(outliers) > 3 else ""
    )
    why = f"split across devices: most of it is on {majority}, but {shown} {'is' if len(outliers) == 1 else 'are'} not"
    base = format_path(entry.path)
    finding = Finding(
        base, "mixed", "module", entry.where, why, rule="split_module", target=majority
    )
    return Problem(finding, (module_to_fix(entry, majority),) if entry.named else ())


def _outlier_groups(entry: Entry, majority: str) -> list[str]:
    """Off-majority tensors by name, a whole submodule named once (``model.head``)."""
    view = entry.module
    assert view is not None
    off = [
        rel
        for rel, t, _ in view.registered
        if probe.tensor_facts(t).device not in (majority, probe.UNKNOWN)
    ]
    names: list[str] = []
    for rel in off:
        owner = rel[:-1]
        whole = owner and all(r in off for r, _, _ in view.registered if r[: len(owner)] == owner)
        name = format_path((*entry.path, *(owner if whole else rel)))
        if name not in names:
            names.append(name)
    return names


def _kept_on_cpu(owner: Any, name: str) -> bool:
    """The class's own methods pass ``self.<name>`` where a call wants it on the CPU
    (``torch.set_rng_state(self.saved)``): not a tensor ``.to()`` should move."""
    wanted = f"self.{name}"
    for namespace in class_dicts(type(owner))[:4]:
        for value in list(namespace.values())[:64]:
            code = getattr(value, "__code__", None)
            parsed = code_tree(code) if isinstance(code, types.CodeType) else None
            if parsed is not None and wanted in cpu_arguments(parsed[0]):
                return True
    return False


def _unregistered(entry: Entry, rel: tuple, tensor: Any, owner: Any, majority: str) -> Problem:
    from ipydevice.fixes.source import register_buffer_fix

    name = format_path((*entry.path, *rel))
    device = probe.tensor_facts(tensor).device
    where = (
        "" if same_device(device, majority) else f" (it is on {device}, the module on {majority})"
    )
    why = f"a plain tensor attribute: .to() will never move it{where}"
    source = register_buffer_fix(owner, str(rel[-1][1]))
    finding = Finding(
        name,
        device,
        "attribute",
        entry.where,
        why,
        rule="unregistered_tensor",
        target=majority,
        location=source.location if source else "",
    )
    fixes = [f for f in (source,) if f is not None]
    if entry.named and not same_device(device, majority):
        path = (*entry.path, *rel)
        title = f"For now, move {name} to {majority} (the next .to() will leave it behind again)"
        fixes.append(
            Fix(
                title,
                f"{name} = {name}.to({say(majority)})",
                "namespace",
                steps=(Step("reassign", path, majority),),
            )
        )
    return Problem(finding, tuple(fixes))


def _plain_list(entry: Entry, rel: tuple, members: list, owner: Any, majority: str) -> Problem:
    from ipydevice.fixes.source import module_list_fix

    name = format_path((*entry.path, *rel))
    why = f"a plain list of {plural(len(members), 'module')}: .to() and .parameters() never see them (nor does the optimizer)"
    source = module_list_fix(owner, str(rel[-1][1]))
    finding = Finding(
        name,
        "",
        "plain list",
        entry.where,
        why,
        rule="plain_list",
        target=majority,
        location=source.location if source else "",
    )
    return Problem(finding, tuple(f for f in (source,) if f is not None))


def _factories(entry: Entry, base: str) -> list[Problem]:
    """Factory calls without ``device=`` in the methods of each user module class (once per class)."""
    from ipydevice.fixes.source import factory_fixes

    view = entry.module
    assert view is not None
    classes = {type(entry.obj)} | {type(module) for _, module in view.submodules}
    out = []
    for cls in sorted(classes, key=lambda c: c.__qualname__)[:50]:
        for label, fix in factory_fixes(cls):
            why = f"`{fix.original.strip()}` can leave a tensor off the model's device: {fix.title.split(' in ')[0].lower()}"
            finding = Finding(
                label,
                "",
                "source",
                entry.where,
                why,
                rule="factory_without_device",
                location=fix.location,
            )
            out.append(Problem(finding, (fix,)))
    return out


AUDIT = registry.Audit("modules", module_problems, tensors=False)
