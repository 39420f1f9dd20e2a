"""A device-error family of a pretend library, written as a user would: one module.

``toykernel(q, k)`` of a made-up CUDA extension fails with ``toykernel: q on
cuda:0 but k on cpu``. Importing this module registers everything ipydevice needs
to recognise, explain and fix that error: no other file changes.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from ipydevice import plugins
from ipydevice.code.rewrite import replace_span, segment
from ipydevice.collect.cell import Cell, calls_in, cell_result
from ipydevice.family import Family, MessageFacts, wording
from ipydevice.model import Fix

ID = "toy_kernel"


def _advice(facts: MessageFacts, target: str) -> str:
    return f"toykernel needs q and k together: move k to {target or 'the device of q'}"


def _target(facts: MessageFacts, views: Sequence[Any]) -> str:
    return facts.expected or ""  # where q is


def _cell_fix(facts: MessageFacts, cell: Cell, target: str) -> Fix | None:
    """``toykernel(q, k)`` becomes ``toykernel(q, k.to(q.device))``."""
    for call in calls_in(cell):
        if getattr(call.func, "id", "") == "toykernel" and len(call.args) == 2:
            first, second = (segment(cell.lines, a) for a in call.args)
            if isinstance(call.args[1], ast.Name):
                rewritten = replace_span(
                    cell.lines, call, f"toykernel({first}, {second}.to({first}.device))"
                )
                return cell_result(cell, rewritten, f"Move {second} to {first}'s device")
    return None


FAMILY = Family(
    ID,
    "a toykernel call got q and k on different devices",
    (
        wording(
            ID,
            5000,
            "toykernel",
            r"toykernel: q on (?P<d1>@D) but (?P<arg>k) on (?P<d2>@D)@E",
            exp="d1",
            off="d2",
        ),
    ),
    advice=_advice,
    target=_target,
    cell_fix=_cell_fix,
)

plugins.family(FAMILY)
