"""One sentence of advice per family of device error, from the message alone.

Used as the headline when no live object could be examined (an exception without a
traceback, a warning, a message pasted from a log) and as a reminder otherwise.
Schema argument names are translated into what the user wrote (``mat1`` of
``addmm`` is the input of a ``Linear`` layer; ``index`` of ``index_select`` the
token ids of an ``Embedding``). Standard library only.
"""

from __future__ import annotations

from ipydevice.diagnosis.recognise import MessageFacts

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


def _devices(facts: MessageFacts) -> str:
    return " and ".join(dict.fromkeys(facts.devices)) or "two devices"


def advice(facts: MessageFacts, target: str) -> str:
    """The advice for ``facts``; ``target`` is where things should go ('' if unknown)."""
    family = facts.family or ""
    to = f" to {target}" if target else ""
    if family == "index_mismatch":
        return f"the indices must be on the CPU or where the indexed tensor is: move them{to}"
    if family == "conv_type_mismatch":
        return f"despite the word 'type', a conv layer's input and weights are on different devices ({_devices(facts)}): move the input{to}"
    if family == "rnn_mismatch":
        if facts.role == "hidden":
            return f"the RNN's hidden state is on another device than its input: create h0/c0 on the input's device{to}"
        return f"an RNN's weights and its input are on different devices ({_devices(facts)}): move the input{to}"
    if family == "generator_mismatch":
        expected = facts.expected or target or "cuda"
        return f"the torch.Generator is on the wrong device: create it with torch.Generator(device={expected!r})"
    if family == "load_location":
        return f"the checkpoint was saved from {facts.devices[0] if facts.devices else 'GPU'} tensors: load it with map_location={target or 'cpu'!r}"
    if family == "numpy_conversion":
        return "NumPy only reads CPU memory: copy the tensor with .detach().cpu() before .numpy()"
    if family == "meta_device":
        return "meta tensors hold shapes, not data: materialise with to_empty(device=...) and load the weights"
    if family == "dataparallel":
        return f"(Distributed)DataParallel needs the whole model on one device before wrapping: model.to({(facts.expected or target or 'cuda:0')!r}) first"
    if family == "optimizer_state":
        return "optimizer state and parameters are on different devices: move the state to each parameter's device (step excepted)"
    if family == "mps":
        return "an op on Apple's GPU got a tensor that is not on it: move it with .to('mps')"
    if family == "xla":
        return "an XLA op got a CPU tensor: move the model and the batch to xm.xla_device()"
    if family == "hf_warning":
        if facts.argument == "input_ids":
            return "the inputs and the model are on different devices: inputs = inputs.to(model.device)"
        return "a model dispatched with device_map must not be moved: move its inputs to its first device instead"
    meaning = argument_meaning(facts.argument)
    if facts.argument and meaning:
        where = f" is on {facts.offending}" if facts.offending else " is on another device"
        return f"`{facts.argument}` ({meaning}){where}: move it{to}"
    return f"tensors on {_devices(facts)} met in one operation: move them{to}"
