"""The ``dataparallel`` family. (Distributed)DataParallel whose module is not on ``device_ids[0]``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ipydevice.family import Family, MessageFacts, wording

if TYPE_CHECKING:  # pragma: no cover  (recognising a message reads no frame)
    from ipydevice.collect.frames import FrameView

ID = "dataparallel"

WORDINGS = (
    # N DataParallel / DDP
    wording(
        ID,
        280,
        "device_ids[0]",
        r"module must have its parameters and buffers on device "
        r"(?P<d1>@D) \(device_ids\[0\]\) but found one of them on device:\s*(?P<d2>@D)@E",
        exp="d1",
        off="d2",
    ),
    wording(
        ID,
        290,
        "same type of devices",
        r"same type of devices,\s*but input module "
        r"parameters locate in \{(?P<lst>[^}]*)\}",
    ),
    wording(
        ID,
        300,
        "device_ids and output_device",
        r"device_ids and output_device arguments "
        r"only work with.{0,200}?module parameters \{(?P<lst>[^}]*)\}",
        arg="device_ids",
    ),
)


def _advice(facts: MessageFacts, target: str) -> str:
    return f"(Distributed)DataParallel needs the whole model on one device before wrapping: model.to({(facts.expected or target or 'cuda:0')!r}) first"


def _target(facts: MessageFacts, views: Sequence[FrameView]) -> str:
    return facts.expected or ""  # device_ids[0]


FAMILY = Family(
    ID,
    "a (Distributed)DataParallel model's parameters are on unexpected devices",
    WORDINGS,
    advice=_advice,
    target=_target,
    target_reason="device_ids[0], where the wrapped module's parameters must be",
    audited=("DataParallel", "DistributedDataParallel"),
    title="DataParallel parameters on unexpected devices",
)
