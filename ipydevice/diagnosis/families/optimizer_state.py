"""The ``optimizer_state`` family. Optimizer state on another device than its parameters (a checkpoint loaded before
``model.to()``); GradScalers and LR schedulers in the namespace are audited too."""

from __future__ import annotations

from ipydevice.family import Family, MessageFacts, wording

ID = "optimizer_state"

WORDINGS = (
    # O optimizer: foreach names no device ("CPU" there is about `step`); capturable lists
    wording(
        ID,
        310,
        "same index",
        r"Tensors of the same index must be on the same device",
        devs=(),
    ),
    wording(
        ID,
        320,
        "capturable",
        r"capturable=(?:True|False),\s*(?:params and )?"
        r"state_steps (?:must|should)[^\[]*?(?:\[(?P<lst>[^\]]*)\]|tensors)",
    ),
)


def _advice(facts: MessageFacts, target: str) -> str:
    return "optimizer state and parameters are on different devices: move the state to each parameter's device (step excepted)"


FAMILY = Family(
    ID,
    "optimizer state is on a different device from the parameters",
    WORDINGS,
    advice=_advice,
    audited=(
        "GradScaler",
        "ReduceLROnPlateau",
        "LambdaLR",
        "StepLR",
        "OneCycleLR",
        "CosineAnnealingLR",
    ),
    title="optimizer state on another device",
)
