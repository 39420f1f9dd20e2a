"""The ``generator_mismatch`` family. A ``torch.Generator`` on another device than the tensors it fills; a DataLoader's
generator is the usual cause, so the namespace's DataLoaders are audited. A generator the
failing line passes (``x.normal_(generator=gen)``) is the culprit; it cannot be moved, only
made again with ``device=`` where it is made (the fixes of earlier cells)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ipydevice.collect import probe
from ipydevice.family import Blame, Family, MessageFacts, wording
from ipydevice.model import Finding

if TYPE_CHECKING:  # pragma: no cover  (recognising a message reads no frame)
    from ipydevice.collect.frames import FrameView
    from ipydevice.collect.scan import Scan

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


def _blame(
    facts: MessageFacts, scan: Scan, views: Sequence[FrameView], target: str
) -> list[Blame] | None:
    """The generators the user's failing lines pass, innermost frame first; None
    (the usual search) when no line passes one (a DataLoader's own)."""
    from ipydevice.collect.entries import Entry
    from ipydevice.collect.frames import line_operands

    found: list[Blame] = []
    for index in range(len(views) - 1, -1, -1):
        view = views[index]
        if not view.is_user:
            continue
        for text, value, _ in line_operands(view):
            if not probe.is_generator(value) or any(b.entry.obj is value for b in found):
                continue
            device = probe.device_of(value)
            entry = scan.entries.get(id(value))  # (named since, when the culprits are found again)
            if entry is None:
                names = scan.namespace if type(scan.namespace) is dict else {}
                held = text.isidentifier() and dict.get(names, text) is value
                path = (("name" if held else "local", text),)
                entry = Entry(
                    value, path, "namespace" if held else view.label, "generator", user=True
                )
                entry.named = held
                entry.on_line, entry.operand, entry.frame = True, True, index
                entry._facts = probe.TensorFacts(device, "", "", 0, "")
                scan.entries[id(value)] = entry
            why = f"a torch.Generator on {device}: it cannot be moved, only made on {target or 'the device'}"
            finding = Finding(
                entry.name, device, "generator", entry.where, why, rule="generator", target=target
            )
            found.append(Blame(finding, entry))
    return found or None


FAMILY = Family(
    ID,
    "a random generator is on another device than the tensors it fills",
    WORDINGS,
    advice=_advice,
    target=_target,
    target_reason="the device the error message expects the generator on",
    audited=("DataLoader",),
    blame=_blame,
    title="random generator on another device",
)
