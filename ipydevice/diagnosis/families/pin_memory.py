"""The ``pin_memory`` family. ``pin_memory()`` of a tensor that is not on the CPU.

Pinning page-locks *CPU* memory so that the copy to the GPU is fast; a tensor on
the GPU already cannot be pinned: "cannot pin 'torch.cuda.FloatTensor' only dense
CPU tensors can be pinned". It comes most often from ``DataLoader(pin_memory=True)``
over a Dataset or ``collate_fn`` that moves its samples to the GPU (the
``worker_transfers`` audit names them): the loader pins what they return.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ipydevice.family import Family, MessageFacts, wording

if TYPE_CHECKING:  # pragma: no cover  (recognising a message reads no frame)
    from ipydevice.collect.frames import FrameView

ID = "pin_memory"

WORDINGS = (
    # aten's pin_memory ("dense CPU tensors"; a storage says "CPU memory"), and the
    # DataLoader's pin-memory thread, which re-raises it
    wording(
        ID,
        9,
        "pinned",
        r"cannot pin '(?P<d1>@D)' only (?:dense )?CPU (?:tensors|memory) can be pinned",
        off="d1",
        exp="cpu",
    ),
)


def _advice(facts: MessageFacts, target: str) -> str:
    return (
        "pin_memory() page-locks CPU memory for a faster copy to the GPU, so pin CPU tensors only: "
        "with DataLoader(pin_memory=True), return CPU tensors from the Dataset and collate_fn "
        "and move each batch to the GPU in the training loop (.to(device, non_blocking=True))"
    )


def _target(facts: MessageFacts, views: Sequence[FrameView]) -> str:
    return "cpu"


FAMILY = Family(
    ID,
    "a tensor that is not on the CPU was pinned: only CPU memory can be pinned",
    WORDINGS,
    advice=_advice,
    title="pinned tensor not on the CPU",
    target=_target,
    target_reason="only CPU memory can be pinned",
    audited=("DataLoader",),
)
