"""Each move fix checked against the rest of the code before it is offered.

A fix that gets past the failing line only to fail on the next is worse than none.
The device flow (:mod:`ipydevice.diagnosis.flow`) follows the failing statements and
the ones after them in every user frame on the stack, with the fix's moves applied
as the code will see them: a module moved in place is moved under every name; a name
bound again is moved for the code that reads that name from the namespace, not for a
function that holds the old tensor in a closure cell, a default or a local.

* :meth:`FixCheck.complete`: when a clash is predicted on a tensor (or module) the
  code reads through the namespace (``h.w`` in a function, ``scores`` after the
  failing line), its move is added, and the fix checked again (a few rounds).
* :meth:`FixCheck.rank`: a fix still predicted to fail ranks below the fixes that are
  not (a fix that rebinds ``w`` while the failing function reads its own ``w``).

No user code runs; the flow is bounded (:mod:`ipydevice.diagnosis.flow`).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Sequence
from typing import Any

from ipydevice.code.statements import chain_path
from ipydevice.collect import probe
from ipydevice.collect.frames import FrameView, safe_value
from ipydevice.collect.paths import Path, format_path
from ipydevice.diagnosis.devices import same_device
from ipydevice.diagnosis.flow import DeviceFlow, Moves, device_flow
from ipydevice.fixes.history import spell
from ipydevice.model import Fix, Step

__all__ = ["FixCheck"]

_ROUNDS = 3
_SUBMODULES = 256


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
                    _moved_module(found[1], step.target, moves.objects)
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

    # -- completing and ranking ------------------------------------------------------
    def complete(self, steps: Sequence[Step]) -> list[tuple[Step, str, str]]:
        """Moves to add to ``steps`` (``(step, code, name)``) so that no clash is
        predicted, when the clashing operands are read through the namespace; [] when
        none are needed or none would do."""
        if self.flow is None or not steps:
            return []
        added: list[tuple[Step, str, str]] = []
        for _ in range(_ROUNDS):
            found = self.flow.clash_in(self.moves([*steps, *(a[0] for a in added)]))
            if found is None:
                return added
            clash, view = found
            more = [m for m in self._operand_moves(clash.operands, view) if m not in added]
            if not more:
                return []
            added.extend(more)
        found = self.flow.clash_in(self.moves([*steps, *(a[0] for a in added)]))
        return added if found is None else []

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

    def _operand_moves(
        self, operands: Sequence[str], view: FrameView
    ) -> list[tuple[Step, str, str]]:
        out = []
        for text in operands:
            try:
                node = ast.parse(text, mode="eval").body
            except SyntaxError:
                continue
            path = chain_path(node)
            if path is None or not self._global(str(path[0][1]), view):
                continue
            ok, value = safe_value(node, view.frame)
            if not ok:
                continue
            spelled = format_path(path)
            if probe.is_module(value):
                step = Step("module_to", path, self.target)
                out.append((step, f"{spelled}.to({spell(self.target)})", spelled))
            elif probe.is_tensor(value) and not same_device(probe.placement(value)[0], self.target):
                holder = safe_value(node.value, view.frame) if len(path) > 1 else (False, None)  # type: ignore[attr-defined]
                if holder[0] and probe.is_module(holder[1]):
                    continue  # a module's parameter moves with its module, not alone
                step = Step("reassign", path, self.target)
                out.append((step, f"{spelled} = {spelled}.to({spell(self.target)})", spelled))
        return out

    def _global(self, name: str, view: FrameView) -> bool:
        """``name`` read in ``view``'s code is the namespace's (not a local of it)."""
        frame = view.frame
        if self.frame is None or frame.f_globals is not self.frame.f_globals:
            return False
        try:
            if frame.f_locals is not frame.f_globals and name in frame.f_locals:
                return False
            return name in frame.f_globals
        except BaseException:
            return False

    def _value(self, path: Path) -> tuple[bool, Any] | None:
        node = _node(path)
        if node is None or self.frame is None:
            return None
        ok, value = safe_value(node, self.frame)
        return (ok, value) if ok else None


def _moved_module(module: Any, target: str, objects: dict[int, str]) -> None:
    """A module and (at most ``_SUBMODULES`` of) its submodules, moved in place, with
    their parameters and buffers (``self.proxies`` read in its ``forward``); plain
    tensor attributes stay (``Module.to`` never moves them)."""
    objects[id(module)] = target
    queue = [module]
    while queue and len(objects) < _SUBMODULES:
        attributes = probe.module_dict(queue.pop(0))
        for registered in (attributes.get("_parameters"), attributes.get("_buffers")):
            if type(registered) is dict:
                objects.update((id(t), target) for t in dict.values(registered) if t is not None)
        children = attributes.get("_modules")
        if type(children) is dict:
            for child in dict.values(children):
                if child is not None and id(child) not in objects:
                    objects[id(child)] = target
                    queue.append(child)


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
