"""DataLoaders whose generator is not on the CPU (wrong with or without a model)."""

from __future__ import annotations

from ipydevice import registry
from ipydevice._debug import contain
from ipydevice.collect import probe
from ipydevice.collect.paths import format_path
from ipydevice.collect.scan import Entry
from ipydevice.model import Finding, Fix, Problem

__all__ = ["AUDIT"]


def _loader_problems(entry: Entry, name: str) -> list[Problem]:
    generator = probe.module_dict(entry.obj).get("generator")
    if generator is None:
        return []
    try:
        device = probe.device_str(generator.device)
    except BaseException as caught:
        contain(caught)
        return []
    if device == "cpu":
        return []
    why = f"its generator is on {device}: the DataLoader's sampler draws indices on the CPU"
    hint = Fix(
        "Give the DataLoader a CPU generator",
        "generator=torch.Generator()  # in DataLoader(...)",
        "source",
    )
    return [
        Problem(
            Finding(
                name, device, "DataLoader", entry.where, why, rule="generator_device", target="cpu"
            ),
            (hint,),
        )
    ]


def _loaders(entry: Entry) -> list[Problem]:
    if entry.module is not None or entry.optimizer is not None:
        return []
    if probe.class_name(entry.obj) != "DataLoader":
        return []
    return _loader_problems(entry, format_path(entry.path))


AUDIT = registry.Audit("loaders", _loaders, tensors=False)
