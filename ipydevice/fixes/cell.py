"""The failed cell (or script), parsed, and fixes that rewrite it.

A notebook cell's fix is the whole cell rewritten (scope ``cell``); a script's is
a source edit of the lines that changed. Error families build their own cell
fixes from :func:`calls_in` and :func:`cell_result`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ipydevice.collect.frames import (
    FrameView,
    bound_names,
    failing_statement,
    frame_tree,
    header_nodes,
    source_location,
)
from ipydevice.model import Fix

__all__ = ["Cell", "calls_in", "cell_result", "failed_cell"]


@dataclass(eq=False)
class Cell:
    """The failed cell (or script) and its failing statement (transient)."""

    view: FrameView
    lines: list[str]
    tree: ast.AST
    stmt: ast.stmt
    bound: set[str] = field(default_factory=set)


def failed_cell(views: list[FrameView]) -> Cell | None:
    for view in views:
        if view.is_user and view.is_module_level:
            parsed = frame_tree(view)
            found = failing_statement(view)
            if parsed is None or found is None:
                return None
            lines = _source_lines(view)
            return Cell(view, lines, parsed[0], found[0], bound_names(parsed[0]))
    return None


def _source_lines(view: FrameView) -> list[str]:
    import linecache

    lines = linecache.getlines(view.frame.f_code.co_filename, view.frame.f_globals)
    return [line if line.endswith("\n") else line + "\n" for line in lines]


def cell_result(cell: Cell, rewritten: list[str], title: str) -> Fix:
    """A notebook cell is shown whole; a script gets a source edit of the
    lines that changed, at ``file:line``."""
    filename = cell.view.summary.filename
    if not _is_notebook_cell(filename):
        return _script_edit(cell, rewritten, title.replace(" in the cell", ""))
    return Fix(
        title=title,
        code="".join(rewritten).rstrip("\n") + "\n",
        scope="cell",
        location=cell.view.label,
        original="".join(cell.lines),
        filename=filename,
        lineno=1,
        end_lineno=len(cell.lines),
    )


def _is_notebook_cell(filename: str) -> bool:
    return filename.startswith("<") or "ipykernel_" in filename


def _script_edit(cell: Cell, rewritten: list[str], title: str) -> Fix:
    """The smallest span of lines that differs, as a source fix."""
    old, new = cell.lines, rewritten
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old, end_new = end_old - 1, end_new - 1
    if end_old == start:  # pure insertion: show it with the line it precedes
        end_old, end_new = end_old + 1, end_new + 1
    return Fix(
        title=title,
        code="".join(new[start:end_new]),
        scope="source",
        location=source_location(cell.view.summary.filename, start + 1),
        original="".join(old[start:end_old]),
        filename=cell.view.summary.filename,
        lineno=start + 1,
        end_lineno=end_old,
    )


def calls_in(cell: Cell) -> list[ast.Call]:
    calls: list[ast.Call] = []
    for part in header_nodes(cell.stmt):
        calls.extend(n for n in ast.walk(part) if isinstance(n, ast.Call))
    return calls
