"""A device warning that came before the error, in the same cell: its demand decides.

Some libraries warn before the error they lead to. transformers' ``generate()``
warns "`input_ids` is on cuda, whereas the model is on cpu" and then fails in the
model's embedding with "Expected all tensors to be on the same device". The error
alone says only that two devices met, and the objects' evidence (a model wholly on
one device, the data on the other) would move the model to the data; the warning
says which of the two is placed on purpose: the model, so the inputs go where it is.

So when the error's own wording demands nothing (:func:`ipydevice.diagnosis.demands.demand_of`)
and a device warning of the same cell does, about the same devices (the warning's
device types are the error's), the error is read with the warning's demand: its
argument and its expected device, spelled as the error spells it (``cuda:0`` for the
warning's ``cuda``). The target's reason is then the demand's rule, in the warning's
words ("the warning says the model is on cpu: its inputs go there").

The warnings are the texts the caller saw (the IPython hook keeps those of the
running cell: :class:`ipydevice.integrations.warnings_hook.DeviceWarnings`); pure
otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ipydevice.diagnosis.demands import demand_of
from ipydevice.diagnosis.devices import device_type
from ipydevice.diagnosis.recognise import recognise
from ipydevice.family import MessageFacts

__all__ = ["MAX_WARNED", "heed_warnings"]

#: Warning texts read per error (the latest ones).
MAX_WARNED = 16


def heed_warnings(facts: MessageFacts, warned: Sequence[str]) -> MessageFacts:
    """``facts`` with the demand of the latest device warning in ``warned`` about the
    same devices, when the error's wording demands nothing itself."""
    if not warned or not facts.is_device_error or demand_of(facts) is not None:
        return facts
    types = {device_type(d) for d in facts.devices}
    for text in reversed(list(warned)[-MAX_WARNED:]):
        said = recognise(text, "UserWarning")
        if not said.is_device_error or demand_of(said) is None or not said.expected:
            continue
        if not said.devices or {device_type(d) for d in said.devices} != types:
            continue
        return dataclasses.replace(
            facts,
            argument=said.argument,
            expected=_as_named(said.expected, facts.devices),
            offending=_as_named(said.offending, facts.devices) if said.offending else None,
        )
    return facts


def _as_named(device: str, named: Sequence[str]) -> str:
    """``device`` as the error names it (``cuda`` -> ``cuda:0``) when it names one
    device of that type; else as the warning says it."""
    if ":" in device:
        return device
    same = {d for d in named if device_type(d) == device}
    return next(iter(same)) if len(same) == 1 else device
