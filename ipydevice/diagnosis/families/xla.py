"""The ``xla`` family. PyTorch/XLA: a CPU tensor where an XLA tensor was expected."""

from __future__ import annotations

from ipydevice.family import Family, MessageFacts, wording

ID = "xla"

WORDINGS = (
    wording(
        ID,
        460,
        "not an xla tensor",
        r"Input tensor is not an XLA tensor:\s*(?P<d1>[\w.]+)",
        off="d1",
        exp="xla",
    ),
)


def _advice(facts: MessageFacts, target: str) -> str:
    return "an XLA op got a CPU tensor: move the model and the batch to xm.xla_device()"


FAMILY = Family(
    ID,
    "a non-XLA tensor was passed where an XLA tensor was expected",
    WORDINGS,
    advice=_advice,
    title="tensor not on the XLA device",
)
