"""The ``rnn_mismatch`` family. An RNN's input against its weights, its hidden state or ``pack_padded_sequence``'s lengths."""

from __future__ import annotations

from ipydevice.family import Family, MessageFacts, devices_text, to_target, wording

ID = "rnn_mismatch"

WORDINGS = (
    # H; pack_padded_sequence lengths (a CPU tensor with the wrong dtype is not a device error)
    wording(
        ID,
        170,
        "not at the same device",
        r"Input and (?P<role>parameter|hidden) tensors "
        r"are not at the same device,\s*found input tensor at (?P<d1>@D) and \w+ tensor at "
        r"(?P<d2>@D)@E",
    ),
    wording(
        ID,
        180,
        "'lengths'",
        r"'(?P<arg>lengths)' argument should be a 1D (?P<d1>\w+) "
        r"int64 tensor,\s*but got \d+D (?P<d2>@D) \w+ tensor",
        exp="d1",
        off="d2",
        differ=True,
    ),
)


def _advice(facts: MessageFacts, target: str) -> str:
    if facts.role == "hidden":
        return f"the RNN's hidden state is on another device than its input: create h0/c0 on the input's device{to_target(target)}"
    return f"an RNN's weights and its input are on different devices ({devices_text(facts)}): move the input{to_target(target)}"


FAMILY = Family(
    ID,
    "an RNN's input and its weights, hidden state or lengths disagree on device",
    WORDINGS,
    advice=_advice,
    title="RNN input and weights on different devices",
)
