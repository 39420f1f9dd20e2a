"""Choosing the target device: where things *should* go, and the evidence, in words.

The target is the device a dispatched model takes its inputs on; else where the
model taking part keeps its parameters; else what the message says is expected;
else where most of the operands are. When the message names the devices that met,
the target is one of them. A bare device type (``cuda``) is made concrete
(``cuda:0``) when an index is known. A wording that demands a device for one
argument is read before all this (:mod:`ipydevice.diagnosis.demands`).
"""

from __future__ import annotations

import ast
import os
from collections import Counter
from collections.abc import Iterator
from typing import Protocol

from ipydevice import registry
from ipydevice.collect.frames import FrameView, failing_statement
from ipydevice.collect.paths import format_path
from ipydevice.collect.scan import Entry, Scan
from ipydevice.diagnosis.devices import same_device, with_index
from ipydevice.family import MessageFacts

__all__ = ["choose_target", "concrete", "named_by_message", "same_device"]

_TENSOR_KINDS = ("tensor", "parameter", "buffer", "attribute")


class _Analysed(Protocol):
    @property
    def top_module(self) -> Entry | None: ...
    @property
    def failing_module(self) -> Entry | None: ...
    @property
    def split(self) -> str: ...
    @property
    def placed(self) -> str: ...


def choose_target(
    facts: MessageFacts, scan: Scan, analysis: _Analysed, views: list[FrameView]
) -> tuple[str, str]:
    """The device things should move to, and the evidence, in words.

    Evidence, strongest first: the family's own rule (``torch.load`` on a machine
    without that device, NumPy wanting the CPU), an optimizer's parameters, a
    dispatched model's first device, the parameters of the model taking part (or,
    for a model wholly on the CPU fed accelerator data, the data), the device the
    message expects, the tensor the failing call was made on. With no evidence
    either way an accelerator wins over the CPU: a majority of operands never
    decides between them (a CPU mask and a CPU cache do not outvote the attention
    scores on the GPU).

    When the message names the devices that met, the target is one of them: a
    module on ``meta`` used as a stateless skeleton (``functional_call``) is no
    evidence for an error between cuda:0 and cpu; the next evidence decides.
    """
    family = registry.family_of(facts.family)
    chosen = family.target(facts, views) if family is not None and family.target else ""
    if chosen:
        assert family is not None
        return chosen, family.target_reason or f"what a {family.id} error needs"
    first: tuple[str, str] | None = None
    for device, because in _evidence(facts, scan, analysis, views):
        if not device:
            continue
        if named_by_message(device, facts.devices):
            return device, because
        first = first or (device, because)
    return first or ("", "")


def named_by_message(device: str, devices: tuple[str, ...]) -> bool:
    """``device`` is one the message names, or the message names fewer than two."""
    named = set(devices)
    if len(named) < 2 or device == "?":
        return True
    for other in named:
        if same_device(device, other) or (other == "gpu" and device not in ("cpu", "meta")):
            return True
    return False


def _evidence(
    facts: MessageFacts, scan: Scan, analysis: _Analysed, views: list[FrameView]
) -> Iterator[tuple[str, str]]:
    """The candidate targets, strongest evidence first (see :func:`choose_target`)."""
    optimizer_target = _optimizer_target(scan)
    if optimizer_target:
        yield optimizer_target, "where the optimizer's parameters are"
    if analysis.split:
        part = analysis.failing_module
        name = f"`{part.name}`" if part is not None else "the part that failed"
        why = "the model moves between its parts' devices itself (split on purpose)"
        if analysis.placed:
            why = f"your code put it there on purpose (`{analysis.placed}`)"
        yield analysis.split, f"where {name} is: {why}"
    top = analysis.top_module
    if top is not None and top.module is not None:
        name = f"`{_root_name(top)}`"
        if top.module.dispatch_device:
            yield top.module.dispatch_device, f"the first device of {name}'s device map"
        chosen, from_data = _model_target(top, scan)
        if chosen:
            if from_data:
                yield chosen, f"where the data is ({name} is wholly on cpu)"
            yield chosen, f"where {name}'s parameters are"
    if facts.expected and facts.expected != "cpu":
        yield facts.expected, "the device the error message expects"
    # A message's "expected device cpu" only says which operand PyTorch checked
    # first; the tensor the call was made on, or an accelerator, says more.
    target, because = _operand_evidence(scan, facts, views)
    if facts.expected and (not target or target == "cpu"):
        yield facts.expected, "the device the error message expects"
    yield target, because


def _root_name(top: Entry) -> str:
    """The model as the user wrote it: ``net``, a local of ``main`` (whose frame the
    headline names), rather than ``net in main``; a method's ``self`` keeps its frame."""
    path = format_path(top.path)
    return path if path != "self" else top.name


def _optimizer_target(scan: Scan) -> str:
    """An optimizer that was stepping with state away from its parameters: the
    parameters' device is the target (state follows parameters, not the reverse)."""
    for entry in scan.entries.values():
        if entry.optimizer is not None and (entry.on_line or entry.where != "namespace"):
            misplaced = entry.optimizer.misplaced()
            if misplaced:
                return Counter(p for _, _, _, p in misplaced).most_common(1)[0][0]
    return ""


def _model_target(top: Entry, scan: Scan) -> tuple[str, bool]:
    """The model's device, and whether the data decided it (a model on the CPU)."""
    assert top.module is not None
    majority = top.module.majority()
    if majority != "cpu":
        return majority, False
    # A model wholly on the CPU fed data that sits on one accelerator: the user
    # most likely forgot model.to(device), so the accelerator is the target.
    others = {
        e.device
        for e in scan.entries.values()
        if (e.operand or e.on_line) and e.kind in _TENSOR_KINDS and e.parent_kind != "module"
    }
    others.discard("cpu")
    if len(top.module.shares()) == 1 and len(others) == 1:
        return others.pop(), True
    return majority, False


def _operand_evidence(scan: Scan, facts: MessageFacts, views: list[FrameView]) -> tuple[str, str]:
    """No model and no expected device: the tensor the failing call was made on
    (``scores`` of ``scores.masked_fill(mask, ...)``), else an accelerator among
    the operands (the user's line's, and what the failing library line read) over
    the CPU, else the operands' majority."""
    counts: Counter[str] = Counter()
    first: dict[str, Entry] = {}
    met = set(scan.met)  # what the failing library line read (``self.components_``) too
    for entry in scan.entries.values():
        if entry.kind in _TENSOR_KINDS and (entry.operand or entry.on_line or id(entry.obj) in met):
            device, shape = entry.facts.device, entry.facts.shape
            if shape != "()" and device != "?":
                counts[device] += 1
                first.setdefault(device, entry)
    receiver = _receiver(scan, views)
    if receiver is not None and receiver.device not in ("?", "cpu"):
        return (
            receiver.device,
            f"where `{receiver.name}`, the tensor the failing call was made on, is",
        )
    if counts:
        accelerators = [d for d in counts if d not in ("cpu", "meta")] or [
            d for d in counts if d != "cpu"
        ]
        if accelerators and "cpu" in counts:
            best = max(accelerators, key=lambda d: counts[d])
            return (
                best,
                f"the accelerator among the devices involved (`{first[best].name}` is there)",
            )
        ranked = sorted(counts, key=lambda d: (-counts[d], d == "cpu", d))
        return ranked[0], f"where most tensors involved are (`{first[ranked[0]].name}` is there)"
    accelerators = [d for d in facts.devices if d not in ("cpu", "gpu")]
    if accelerators:
        return accelerators[0], "the accelerator the error message names"
    return (facts.devices[0], "the device the error message names") if facts.devices else ("", "")


def _receiver(scan: Scan, views: list[FrameView]) -> Entry | None:
    """The tensor a method call on the innermost user frame's failing line is made
    on (``scores`` in ``scores.masked_fill(mask, v)``), when one is an operand."""
    user = [v for v in views if v.is_user]
    if not user:
        return None
    found = failing_statement(user[-1])
    if found is None:
        return None
    by_name = {
        str(e.path[0][1]): e
        for e in scan.entries.values()
        if e.kind in _TENSOR_KINDS and e.on_line and len(e.path) == 1
    }
    for node in ast.walk(found[0]):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = node.func.value
            if isinstance(receiver, ast.Name) and receiver.id in by_name:
                return by_name[receiver.id]
    return None


def concrete(target: str, scan: Scan, framed: bool = True) -> str:
    """``cuda`` becomes ``cuda:N``: the index the objects involved show, else the
    backend's current device."""
    if not target or ":" in target or target in ("cpu", "meta"):
        return target
    local_rank = os.environ.get("LOCAL_RANK", "")
    if target == "cuda" and local_rank.isascii() and local_rank.isdigit():
        return f"cuda:{local_rank}"  # each torchrun process owns the GPU of its local rank
    seen = Counter(e.device for e in scan.entries.values() if e.kind in _TENSOR_KINDS)
    indexed = [d for d, _ in seen.most_common() if d.startswith(target + ":")]
    if indexed:
        return indexed[0]
    # nothing there yet: the backend's current device, where torch would put it (a
    # report from the message alone, ``framed`` False, keeps the message's spelling)
    return with_index(target) if framed else target
