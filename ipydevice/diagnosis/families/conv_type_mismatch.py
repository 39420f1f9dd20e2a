"""The ``conv_type_mismatch`` family. A device mismatch worded as a type mismatch: ``Input type (torch.FloatTensor) and
weight type (torch.cuda.FloatTensor) should be the same`` (only when the devices differ)."""

from __future__ import annotations

from ipydevice.family import CONV_ROLES, Family, MessageFacts, devices_text, to_target, wording

ID = "conv_type_mismatch"

WORDINGS = (
    # G: a device mismatch reported as a type mismatch, only when the devices differ
    wording(
        ID,
        160,
        "type (",
        r"Input type \((?P<d1>[^()]+)\) and (?P<role>weight|bias) "
        r"type \((?P<d2>[^()]+)\) should be the same",
        differ=True,
        roles=CONV_ROLES,
    ),
)


def _advice(facts: MessageFacts, target: str) -> str:
    return f"despite the word 'type', a conv layer's input and weights are on different devices ({devices_text(facts)}): move the input{to_target(target)}"


FAMILY = Family(
    ID,
    "a convolution's input and parameters are on different devices",
    WORDINGS,
    advice=_advice,
    title="convolution input and weights on different devices",
)
