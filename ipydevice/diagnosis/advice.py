"""One sentence of advice per device error, from the message alone (a family's own
advice lives in its file under :mod:`ipydevice.diagnosis.families`).

Used as the headline when no live object could be examined (an exception without a
traceback, a warning, a message pasted from a log) and as a reminder otherwise.
Schema argument names are translated into what the user wrote (``mat1`` of
``addmm`` is the input of a ``Linear`` layer; ``index`` of ``index_select`` the
token ids of an ``Embedding``). Standard library only.
"""

from __future__ import annotations

from ipydevice import registry
from ipydevice.family import MessageFacts, devices_text, to_target

__all__ = ["advice", "argument_meaning"]

_ARGUMENTS = {
    "mat1": "the input of a Linear layer",
    "mat2": "a weight or the second matmul operand",
    "self": "the first operand (for addmm: a Linear layer's bias)",
    "index": "the indices (for an Embedding: the token ids)",
    "indices": "the indices",
    "tensors": "a tensor in the list given to torch.cat/stack",
    "weight": "a layer's weight or a loss's class weights",
    "target": "the targets of the loss",
    "input_ids": "the tokenizer's input_ids",
    "generator": "the random generator",
    "lengths": "the lengths of pack_padded_sequence",
    "window": "the window of torch.stft",
}


def argument_meaning(argument: str | None) -> str:
    """What a schema argument name usually is in user code ('' if unknown)."""
    return _ARGUMENTS.get(argument or "", "")


def advice(facts: MessageFacts, target: str) -> str:
    """The advice for ``facts``; ``target`` is where things should go ('' if unknown).

    A family's own advice when it has one, else what fits any placement error.
    """
    family = registry.family_of(facts.family)
    if family is not None and family.advice is not None:
        return family.advice(facts, target)
    to = to_target(target)
    meaning = argument_meaning(facts.argument)
    if facts.argument and meaning:
        where = f" is on {facts.offending}" if facts.offending else " is on another device"
        return f"`{facts.argument}` ({meaning}){where}: move it{to}"
    return f"tensors on {devices_text(facts)} met in one operation: move them{to}"
