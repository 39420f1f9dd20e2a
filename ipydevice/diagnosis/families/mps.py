"""The ``mps`` family. Apple MPS wordings."""

from __future__ import annotations

from ipydevice.family import CONV_ROLES, Family, MessageFacts, wording

ID = "mps"

WORDINGS = (
    # Q MPS wordings; the same shape with another expected device is generic
    wording(
        ID,
        120,
        "placeholder storage",
        r"Placeholder storage has not been allocated on MPS device",
        devs=(),
        exp="mps",
    ),
    wording(
        ID,
        130,
        "expected on",
        r"Tensor for argument (?P<arg>\w+) is on (?P<d1>@D) but expected on "
        r"(?P<d2>mps(?::\d+)?)\b",
        off="d1",
        exp="d2",
    ),
    wording(
        ID,
        150,
        "_mps",
        r"(?P<op>\w+_mps):\s*(?P<arg>\w+)\(device='?(?P<d1>[\w:]+)'?\) and "
        r"(?P<role>\w+)\(device='?(?P<d2>[\w:]+)'?\) must be on the same device",
        roles=CONV_ROLES,
    ),
)


def _advice(facts: MessageFacts, target: str) -> str:
    return "an op on Apple's GPU got a tensor that is not on it: move it with .to('mps')"


FAMILY = Family(
    ID,
    "an op on Apple MPS got a tensor that is not on the MPS device",
    WORDINGS,
    advice=_advice,
    title="tensor not on the MPS device",
)
