"""The ``hf_warning`` family. Hugging Face ``generate()`` and accelerate dispatch/offload messages (warnings and
log records, shown also when logged on the root logger)."""

from __future__ import annotations

from ipydevice.family import Family, MessageFacts, wording

ID = "hf_warning"

WORDINGS = (
    # P Hugging Face generate() warning and accelerate dispatch/offload messages
    wording(
        ID,
        330,
        "generate()",
        r"\.generate\(\) with the `(?P<arg>\w+)` being on a device type"
        r" different.{0,200}?is on (?P<d1>@D),\s*whereas the model is on (?P<d2>@D)@E",
        off="d1",
        exp="d2",
    ),
    wording(
        ID,
        340,
        "a model that",
        r"move a model that (?:is dispatched|has some modules "
        r"offloaded)|a model that has been loaded in \d+-bit precision on a different device",
    ),
    wording(
        ID,
        350,
        "offloaded",
        r"parameters are on the meta device(?: device)? because they "
        r"were offloaded",
    ),
)


def _advice(facts: MessageFacts, target: str) -> str:
    if facts.argument == "input_ids":
        return "the inputs and the model are on different devices: inputs = inputs.to(model.device)"
    return "a model dispatched with device_map must not be moved: move its inputs to its first device instead"


FAMILY = Family(
    ID,
    "a Hugging Face / accelerate model and its inputs or dispatch disagree",
    WORDINGS,
    advice=_advice,
    from_root_logger=True,
    title="model and inputs on different devices",
)
