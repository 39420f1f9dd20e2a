"""A tensor's ``.to()`` whose result was dropped: ``x.to(device)`` on its own line.

``Module.to`` moves the module in place and returns it, so ``model.to(device)`` on its
own line works; ``Tensor.to`` returns a new tensor and leaves ``x`` where it was, so
the same line does nothing. A culprit that the failed cell (or function, or a function
an earlier cell defined that the failing call ran) moved that way, before its failing
statement, is told so in its ``why``; the cell fix replaces that line with
``x = x.to(device)`` (:mod:`ipydevice.fixes.propose`).

The line is found by identity: the chain the dropped move was called on holds the
culprit itself (read with the safe readers, nothing called).
"""

from __future__ import annotations

import ast
import dataclasses
import linecache
import re
from collections.abc import Iterator, Sequence

from ipydevice.code.flow import discarded_moves, loop_item_moves
from ipydevice.code.order import statements_before
from ipydevice.code.rewrite import segment
from ipydevice.code.statements import chain_text
from ipydevice.collect.cell import Cell, failed_cell, notebook_functions
from ipydevice.collect.frames import FrameView, owns_name, safe_value
from ipydevice.collect.probe import is_tensor

__all__ = ["Discarded", "discarded", "dropping_function", "explain_discarded", "mends_locally"]

_BEFORE = 64  # statements read back from the failing one
_ITEMS = 256  # items of a holder a loop moved, looked at


@dataclasses.dataclass(frozen=True, slots=True)
class Discarded:
    """A dropped ``.to()``: its statement, the chain moved and the call's text."""

    stmt: ast.Expr
    held: str
    call: str
    #: the holder a loop moved the items of (``batch`` of ``batch[k]``), else ""
    holder: str = ""

    @property
    def assigned(self) -> str:
        return f"{self.held} = {self.call}"


def discarded(cell: Cell, objects: dict[int, object]) -> Iterator[tuple[int, Discarded]]:
    """``(id, dropped move)`` for each of ``objects`` (by id) that a statement of the
    cell before its failing one moved and dropped."""
    seen: set[int] = set()
    frame = cell.view.frame
    for stmt, held in discarded_moves(statements_before(cell.tree, cell.stmt, _BEFORE)):
        ok, value = safe_value(stmt.value.func.value, frame)  # type: ignore[attr-defined]
        if not ok or id(value) not in objects or id(value) in seen or not is_tensor(value):
            continue
        seen.add(id(value))
        try:
            call = segment(cell.lines, stmt.value)
        except (IndexError, ValueError):
            continue
        if "\n" not in call:
            yield id(value), Discarded(stmt, held, call)
    # a loop's items, moved and dropped one by one (``batch[k] = batch[k].to(device)``)
    for stmt, item, holder in loop_item_moves(statements_before(cell.tree, cell.stmt, _BEFORE)):
        ok, value = safe_value(holder, frame)
        if not ok:
            continue
        try:
            call = segment(cell.lines, stmt.value)
        except (IndexError, ValueError):
            continue
        items = dict.values(value) if type(value) is dict else value if type(value) is list else ()
        for held_item in list(items)[:_ITEMS]:
            key = id(held_item)
            if key in objects and key not in seen and is_tensor(held_item) and "\n" not in call:
                seen.add(key)
                yield key, Discarded(stmt, item, call, chain_text(holder))


def dropping_function(views: Sequence[FrameView], found: list) -> Cell | None:
    """The innermost function an earlier cell defined on the stack that dropped the
    ``.to()`` of a culprit (``train_step``'s ``t.to(device)``, ``t`` failing in the
    ``forward`` it calls), else the innermost such function."""
    functions = list(notebook_functions(list(views)))
    objects = {id(e.obj): e.obj for c in found for e in c.entries[:1]}
    if objects and len(functions) > 1:
        for cell in functions:
            if any(True for _ in discarded(cell, objects)):
                return cell
    return functions[0] if functions else None


#: a line that is only a move: ``x.to(device)``, ``batch['x'].cuda()`` (read before parsing)
_MOVE_LINE = re.compile(r"^[ \t]*[\w.\[\]'\"]+\.(?:to|cuda|cpu)\(.*\)[ \t]*(?:#.*)?$", re.M)


def _may_drop(view: FrameView) -> bool:
    """The frame's source has a line that is only a move (the cells are parsed only then)."""
    code = view.frame.f_code
    return bool(
        _MOVE_LINE.search("".join(linecache.getlines(code.co_filename, view.frame.f_globals)))
    )


def mends_locally(cell: Cell, move: Discarded) -> bool:
    """``x = x.to(device)`` in a function keeps ``x`` what it was: one of its locals
    (``self.x = ...`` included), not a global the assignment would make local."""
    return owns_name(cell.view.frame, move.held.split(".")[0].split("[")[0])


def explain_discarded(found: list, views: Sequence[FrameView]) -> None:
    """Tells each culprit (``Culprit``s of the analysis) moved by a dropped ``.to()``
    so, in its ``why``."""
    objects = {id(e.obj): e.obj for c in found for e in c.entries[:1]}
    if not objects or not any(_may_drop(v) for v in views if v.is_user):
        return
    # the failed cell, and the functions earlier cells defined that the failing call ran
    lines: dict[int, tuple[Discarded, str]] = {}
    for cell in (failed_cell(list(views)), *notebook_functions(list(views))):
        if cell is None:
            continue
        for key, dropped in discarded(cell, objects):
            # in a function an earlier cell defined, the local its line dropped the move of
            local = (
                not cell.view.is_module_level
                and dropped.held.isidentifier()
                and mends_locally(cell, dropped)
            )
            lines.setdefault(key, (dropped, cell.view.label if local else ""))
    for culprit in found:
        entry = culprit.entries[0] if culprit.entries else None
        told = lines.get(id(entry.obj)) if entry is not None else None
        if told is None:
            continue
        move, function = told
        if function and entry is not None:
            # the fix mends the function's line: the culprit is its local, as it reads it
            entry.alias = entry.alias or entry.name
            entry.path, entry.named, entry.where = (("local", move.held),), False, function
            culprit.finding = dataclasses.replace(culprit.finding, name=entry.name, where=function)
        why = (
            f"`{move.call}` drops its result: a tensor's .to() returns a new tensor and "
            f"leaves `{move.held}` where it was (unlike Module.to, which moves the module "
            f"in place); write `{move.assigned}`"
        )
        culprit.finding = dataclasses.replace(culprit.finding, why=why)
