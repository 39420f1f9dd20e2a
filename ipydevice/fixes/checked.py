"""Each move fix checked against the rest of the code before it is offered.

A fix that gets past the failing line only to fail on the next is worse than none.
The device flow (:mod:`ipydevice.diagnosis.flow`) follows the failing statements and
the ones after them in every user frame on the stack, with the fix's moves applied
as the code will see them: a module moved in place is moved under every name; a name
bound again is moved for the code that reads that name from the namespace, not for a
function that holds the old tensor in a closure cell, a default or a local.

:meth:`FixCheck.rank`: a fix still predicted to fail ranks below the fixes that are
not (a fix that rebinds ``w`` while the failing function reads its own ``w``).

No user code runs; the flow is bounded (:mod:`ipydevice.diagnosis.flow`).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Sequence
from typing import Any

from ipydevice.collect.frames import FrameView, safe_value
from ipydevice.collect.paths import Path
from ipydevice.diagnosis.flow import DeviceFlow, Moves, device_flow, moved_module
from ipydevice.model import Fix, Step

__all__ = ["FixCheck"]


class FixCheck:
    """The failed code's device flow, to check fixes against (transient)."""

    def __init__(self, views: Sequence[FrameView], target: str) -> None:
        self.target = target
        top = next((v for v in views if v.is_user and v.is_module_level), None)
        self.frame = top.frame if top is not None else None
        self._views = views

    @functools.cached_property
    def flow(self) -> DeviceFlow | None:
        """The flow, read when a fix is first checked (one fix has nothing to rank)."""
        return device_flow(self._views) if self.frame is not None else None

    # -- what a fix does -------------------------------------------------------------
    def moves(self, steps: Iterable[Step]) -> Moves:
        moves = Moves(namespace=self.frame.f_globals if self.frame is not None else None)
        for step in steps:
            if not step.path or step.path[0][0] != "name":
                continue
            if step.action in ("module_to", "to_empty", "load_state_dict"):
                found = self._value(step.path)
                if found is not None:
                    moved_module(found[1], step.target, moves.objects)
            elif step.action in ("reassign", "mapping", "sequence"):
                if len(step.path) == 1:
                    moves.names[str(step.path[0][1])] = step.target
                else:
                    holder = self._value(step.path[:-1])
                    if holder is not None:
                        moves.attrs[(id(holder[1]), step.path[-1][1])] = step.target
            elif step.action == "share":  # a closure's cell given the moved object
                found = self._value(step.source)
                if found is not None:
                    moves.objects[id(found[1])] = step.target
        return moves

    def fails(self, steps: Iterable[Step]) -> bool:
        """The flow predicts a clash after ``steps``."""
        steps = tuple(steps)
        if self.flow is None or not steps:
            return False
        return self.flow.clash(self.moves(steps)) is not None

    # -- ranking ---------------------------------------------------------------------
    def rank(self, fixes: list[Fix], steps_of: dict[int, tuple[Step, ...]]) -> list[Fix]:
        """``fixes`` with those predicted to fail after the others, when another one
        is checked and predicted to pass (a fix without moves to check, such as
        ``device=`` in an earlier cell, is no evidence of a better one)."""
        if len(fixes) < 2:
            return fixes
        checked = [f for f in fixes if f.steps or steps_of.get(id(f))]
        failing = [f for f in checked if self.fails(f.steps or steps_of[id(f)])]
        if not failing or len(failing) == len(checked):
            return fixes
        return [f for f in fixes if f not in failing] + failing

    def _value(self, path: Path) -> tuple[bool, Any] | None:
        node = _node(path)
        if node is None or self.frame is None:
            return None
        ok, value = safe_value(node, self.frame)
        return (ok, value) if ok else None


def _node(path: Path) -> ast.expr | None:
    node: ast.expr | None = None
    for kind, key in path:
        if node is None:
            if kind != "name" or not isinstance(key, str):
                return None
            node = ast.Name(key, ast.Load())
        elif kind == "attr" and isinstance(key, str):
            node = ast.Attribute(node, key, ast.Load())
        elif kind == "item" and isinstance(key, (str, int)):
            node = ast.Subscript(node, ast.Constant(key), ast.Load())
        else:
            return None
    return node
