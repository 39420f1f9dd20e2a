"""The ``generator_mismatch`` family. A ``torch.Generator`` on another device than the tensors it fills; a DataLoader's
generator is the usual cause, so the namespace's DataLoaders are audited."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ipydevice.family import Family, MessageFacts, wording

if TYPE_CHECKING:  # pragma: no cover  (recognising a message reads no frame)
    from ipydevice.collect.frames import FrameView

ID = "generator_mismatch"

WORDINGS = (
    wording(
        ID,
        200,
        "for generator",
        r"Expected an? '(?P<d1>@D)' device type for "
        r"generator but found '(?P<d2>@D)'",
        arg="generator",
        exp="d1",
        off="d2",
    ),
)


def _advice(facts: MessageFacts, target: str) -> str:
    expected = facts.expected or target or "cuda"
    return f"the torch.Generator is on the wrong device: create it with torch.Generator(device={expected!r})"


def _target(facts: MessageFacts, views: Sequence[FrameView]) -> str:
    return facts.expected or ""


FAMILY = Family(
    ID,
    "a random generator is on another device than the tensors it fills",
    WORDINGS,
    advice=_advice,
    target=_target,
    target_reason="the device the error message expects the generator on",
    audited=("DataLoader",),
    title="random generator on another device",
)
