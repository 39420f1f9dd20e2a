"""The ``numpy_conversion`` family. ``.numpy()`` of a tensor that is not on the CPU."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ipydevice.family import Family, MessageFacts, wording

if TYPE_CHECKING:  # pragma: no cover  (recognising a message reads no frame or cell)
    from ipydevice.collect.cell import Cell
    from ipydevice.collect.frames import FrameView
    from ipydevice.model import Fix

ID = "numpy_conversion"

WORDINGS = (
    # L numpy (pre-1.5 said "CUDA tensor"; FakeTensor has its own wording)
    wording(
        ID,
        250,
        "numpy",
        r"can't convert (?P<d1>@D) (?:device type )?tensor to numpy",
        off="d1",
        exp="cpu",
        need=1,
    ),
    wording(
        ID,
        260,
        "tensor subclasses",
        r"\.numpy\(\) is not supported for tensor "
        r"subclasses",
        devs=(),
    ),
)


def _advice(facts: MessageFacts, target: str) -> str:
    return "NumPy only reads CPU memory: copy the tensor with .detach().cpu() before .numpy()"


def _target(facts: MessageFacts, views: Sequence[FrameView]) -> str:
    return "cpu"


def _cell_fix(facts: MessageFacts, cell: Cell, target: str) -> Fix | None:
    """``x.numpy()`` becomes ``x.detach().cpu().numpy()``."""
    from ipydevice.code.rewrite import replace_span, segment
    from ipydevice.collect.cell import calls_in, cell_result  # with the first fix, not the header

    for call in calls_in(cell):
        if isinstance(call.func, ast.Attribute) and call.func.attr == "numpy" and not call.args:
            base = segment(cell.lines, call.func.value)
            rewritten = replace_span(cell.lines, call, f"{base}.detach().cpu().numpy()")
            return cell_result(cell, rewritten, "Copy the tensor to the CPU before .numpy()")
    return None


FAMILY = Family(
    ID,
    "a tensor that is not on the CPU was converted to NumPy",
    WORDINGS,
    advice=_advice,
    target=_target,
    target_reason="NumPy arrays live on the CPU",
    cell_fix=_cell_fix,
    title="NumPy conversion of a tensor not on the CPU",
)
