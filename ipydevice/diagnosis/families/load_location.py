"""The ``load_location`` family. ``torch.load`` of a checkpoint saved from a device this machine does not have: the
fix is ``map_location``."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ipydevice.diagnosis.devices import normalise_device
from ipydevice.family import Family, MessageFacts, Parts, wording

if TYPE_CHECKING:  # pragma: no cover  (recognising a message reads no frame or cell)
    from ipydevice.collect.cell import Cell
    from ipydevice.collect.frames import FrameView
    from ipydevice.model import Fix

ID = "load_location"


def _cuda_ordinal(m: re.Match[str], parts: Parts) -> Parts:
    base = normalise_device(m["dt"])  # "on CUDA device 1" -> cuda:1
    dev = f"{base}:{int(m['di'])}" if base and ":" not in base else None
    parts["devices"], parts["offending"] = [dev], dev
    return parts


WORDINGS = (
    # K torch.load: the tagged device, then the map_location target when one is suggested
    wording(
        ID,
        210,
        "deserialize",
        r"deserialize object on an? (?P<d1>\w+) device but "
        r"torch\.\w+\.is_available\(\) is False(?:.{0,300}?map_location\s*=\s*torch\.device\(\s*"
        r"'(?P<d2>[\w:]+)'\s*\))?",
        off="d1",
        exp="d2",
    ),
    wording(
        ID,
        220,
        "deserialize",
        r"deserialize object on (?P<dt>\w+) device (?P<di>\d+) "
        r"but torch\.\w+\.device_count\(\) is \d+",
        extra=_cuda_ordinal,
    ),
    wording(
        ID,
        230,
        "restore data location",
        r"restore data location of \S+ \(tagged with "
        r"(?P<d1>[\w:]+)\)",
        off="d1",
    ),
    wording(
        ID,
        240,
        "storage device not recognized",
        r"Storage device not recognized:\s*"
        r"(?P<d1>@D)@E",
        off="d1",
    ),
)


def _advice(facts: MessageFacts, target: str) -> str:
    return f"the checkpoint was saved from {facts.devices[0] if facts.devices else 'GPU'} tensors: load it with map_location={target or 'cpu'!r}"


def _target(facts: MessageFacts, views: Sequence[FrameView]) -> str:
    """The CPU, or cuda:0 for a checkpoint saved from another GPU than the first."""
    for device in facts.devices:
        if device.startswith("cuda:") and device != "cuda:0":
            return "cuda:0"
    return "cpu"


def _cell_fix(facts: MessageFacts, cell: Cell, target: str) -> Fix | None:
    """``torch.load(...)`` with ``map_location=`` added, or rewritten when it names a
    device this machine does not have."""
    from ipydevice.code.rewrite import add_keyword, replace_span
    from ipydevice.collect.cell import calls_in, cell_result  # with the first fix, not the header

    for call in calls_in(cell):
        name = (
            call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        )
        if name != "load":
            continue
        given = next((k for k in call.keywords if k.arg == "map_location"), None)
        if given is None:
            rewritten = add_keyword(cell.lines, call, f"map_location={target!r}")
        else:
            # map_location='cuda' (or a device variable) on a machine without that
            # device: rewritten to a location that exists here.
            rewritten = replace_span(cell.lines, given.value, repr(target))
        return cell_result(cell, rewritten, f"Load the checkpoint onto {target} with map_location")
    return None


FAMILY = Family(
    ID,
    "a checkpoint names a device that is not available (use map_location)",
    WORDINGS,
    advice=_advice,
    target=_target,
    target_reason="a location this machine has, for the checkpoint's tensors",
    cell_fix=_cell_fix,
    title="checkpoint saved on a device not available here",
)
