"""The ``meta_device`` family. Meta tensors (shapes, no data) used where data is needed; ``model.to(device)`` on
a model built on meta makes the model itself the culprit (``to_empty`` is the fix)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ipydevice.collect import probe
from ipydevice.collect.paths import Path, format_path
from ipydevice.diagnosis.devices import with_index
from ipydevice.family import Blame, Family, MessageFacts, wording
from ipydevice.model import Finding

if TYPE_CHECKING:  # pragma: no cover
    from ipydevice.collect.frames import FrameView
    from ipydevice.collect.scan import Entry, Scan

ID = "meta_device"

WORDINGS = (
    # M meta: the fix is to materialise, not to move
    wording(
        ID,
        270,
        "meta",
        r"Cannot copy out of meta tensor|cannot be called on meta tensors|"
        r"non-meta parameter.{0,80}?to a meta parameter|Cannot inplace into non-meta tensor "
        r"with meta tensor",
        devs=("meta",),
        off="meta",
    ),
)


def _advice(facts: MessageFacts, target: str) -> str:
    return "meta tensors hold shapes, not data: materialise with to_empty(device=...) and load the weights"


def _is_meta_copy(facts: MessageFacts) -> bool:
    """``model.to(device)`` of a model built on meta: "Cannot copy out of meta tensor"."""
    return facts.devices == ("meta",)


def _target(facts: MessageFacts, views: Sequence[FrameView]) -> str:
    if not _is_meta_copy(facts):
        return ""
    return requested_device(views) or facts.expected or "cpu"


def requested_device(views: Sequence[FrameView]) -> str:
    """The device a failing ``Module.to(...)``/``to_empty`` call asked for."""
    for view in reversed(views):
        if view.frame.f_code.co_name in ("to", "to_empty") and view.self_module is not None:
            try:
                device = view.frame.f_locals.get("device")
            except Exception:
                continue
            if device is not None:
                return with_index(probe.device_str(device))
    return ""


def _blame(
    facts: MessageFacts, scan: Scan, views: Sequence[FrameView], target: str
) -> list[Blame] | None:
    """``model.to(device)`` on a model built on meta: the model itself is the culprit."""
    if not _is_meta_copy(facts):
        return None
    for view in views:
        owner = view.self_module
        if (
            owner is not None
            and view.frame.f_code.co_name in ("to", "cuda", "cpu", "_apply")
            and id(owner) in scan.entries
        ):
            entry = scan.entries[id(owner)]
            why = "built on the meta device, it holds no data: Module.to() cannot copy it, to_empty() allocates it"
            parts = meta_subtrees(entry) if entry.named else []
            name = format_path(parts[0]) if len(parts) == 1 else entry.name
            finding = Finding(
                name, "meta", "module", entry.where, why, rule="meta_model", target=target
            )
            return [Blame(finding, entry)]
    return []


def meta_subtrees(owner: Entry) -> list[Path]:
    """The biggest submodules of ``owner`` whose tensors are all on meta.

    A model built on meta gives ``[model]``; one with a meta head, ``[model.head]``,
    so that ``to_empty`` never wipes the real weights around it.
    """
    view = owner.module
    if view is None:
        return [owner.path]
    on_meta = {id(t): probe.tensor_facts(t).device == "meta" for _, t, _ in view.registered}
    found: list[tuple] = []
    for rel, tensor, _ in view.registered:
        if not on_meta[id(tensor)] or any(rel[: len(p)] == p for p in found):
            continue
        for size in range(len(rel)):
            prefix = rel[:size]
            if all(on_meta[id(t)] for r, t, _ in view.registered if r[:size] == prefix):
                found.append(prefix)
                break
    return [(*owner.path, *prefix) for prefix in found]


FAMILY = Family(
    ID,
    "a meta tensor (shape only, no data) was used where data is needed",
    WORDINGS,
    advice=_advice,
    target=_target,
    target_reason="the device the failing .to() asked for",
    blame=_blame,
    from_root_logger=True,
    about_meta=True,
    title="meta tensor used where data is needed",
)
