"""What is used with the model: batches (tensors, dicts, tuples) on another device,
CPU scalars and index tensors exempt; a loss's buffers; a GradScaler for another
device type; a learning-rate scheduler holding tensors elsewhere.
"""

from __future__ import annotations

from typing import Any

from ipydevice import registry
from ipydevice.audits.common import (
    BATCH_SIZE_LIMIT,
    module_to_fix,
    move_fix,
    stray_devices,
    tensor_items,
)
from ipydevice.collect import probe
from ipydevice.collect.paths import format_path
from ipydevice.collect.scan import Entry
from ipydevice.diagnosis.culprits import same_device
from ipydevice.model import Finding, Fix, Problem

__all__ = ["AUDIT"]


def _companion_problems(entry: Entry, device: str, model: str) -> list[Problem]:
    """Things used with the model: batches, losses, scalers, DataLoaders."""
    name = format_path(entry.path)
    kind = probe.class_name(entry.obj)
    if kind == "DataLoader":
        return []  # see problems_of
    if _is_scheduler(entry.obj):
        return _scheduler_problems(entry, name, device, model)
    if kind == "GradScaler":
        scaler_device = probe.module_dict(entry.obj).get("_device")
        if isinstance(scaler_device, str) and scaler_device != device.split(":")[0]:
            why = f"GradScaler for {scaler_device}, but {model} is on {device}"
            kind = device.split(":")[0]
            hint = Fix(
                f"Create the scaler for {kind}",
                f"{name} = torch.amp.GradScaler({kind!r})",
                "source",
            )
            return [
                Problem(
                    Finding(
                        name,
                        scaler_device,
                        "GradScaler",
                        entry.where,
                        why,
                        rule="scaler_device",
                        target=device,
                    ),
                    (hint,),
                )
            ]
        return []
    if (
        entry.module is not None
        and entry.module.registered
        and not any(k == "parameter" for _, _, k in entry.module.registered)
    ):
        majority = entry.module.majority()  # a loss with class weights, pos_weight, ...
        if not same_device(majority, device):
            why = f"its buffers are on {majority}, {model} is on {device}"
            finding = Finding(
                name, majority, "module", entry.where, why, rule="stray_tensor", target=device
            )
            return [Problem(finding, (module_to_fix(entry, device),) if entry.named else ())]
        return []
    if entry.kind == "container" and len(tensor_items(entry.obj)) > BATCH_SIZE_LIMIT:
        return []  # a dataset kept on the CPU, moved batch by batch: fine
    off = stray_devices(entry.obj, device)
    if not off:
        return []
    why = f"on {', '.join(off)}, but {model} is on {device}"
    finding = Finding(
        name, off[0], entry.kind, entry.where, why, rule="stray_tensor", target=device
    )
    return [
        Problem(finding, (move_fix(name, entry.obj, device, entry.path if entry.named else ()),))
    ]


def _is_scheduler(obj: Any) -> bool:
    # From the class's own dict: a metaclass's __getattribute__ is never asked.
    return probe.class_module(type(obj)).startswith("torch.optim.lr_scheduler")


def _scheduler_problems(entry: Entry, name: str, device: str, model: str) -> list[Problem]:
    """A learning-rate scheduler holding tensors elsewhere (``ReduceLROnPlateau.best``
    set from a metric tensor, a tensor ``base_lrs``): they are compared or multiplied
    with values on the model's device later."""
    state = probe.module_dict(entry.obj)
    off = []
    for key, value in list(state.items())[:64]:
        values = [value] if probe.is_tensor(value) else tensor_items(value)
        for tensor in values:
            dev, shape, *_ = probe.tensor_facts(tensor)
            if (
                dev not in ("?", "")
                and not same_device(dev, device)
                and not (shape == "()" and dev == "cpu")
            ):
                off.append((str(key), dev))
    if not off:
        return []
    held = ", ".join(f"{key} on {dev}" for key, dev in off[:3])
    why = f"holds tensors away from {model} ({device}): {held}"
    hint = Fix(
        "Give the scheduler plain numbers",
        f"{name}.step(metric.item())  # a Python float, not a tensor",
        "source",
    )
    return [
        Problem(
            Finding(
                name,
                off[0][1],
                probe.class_name(entry.obj),
                entry.where,
                why,
                rule="scheduler_device",
                target=device,
            ),
            (hint,),
        )
    ]


AUDIT = registry.Audit("companions", _companion_problems, companion=True)
