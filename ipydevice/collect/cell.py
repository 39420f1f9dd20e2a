"""The failed cell (or script), parsed, and fixes that rewrite it.

A notebook cell's fix is the whole cell rewritten (scope ``cell``); a script's is
a source edit of the lines that changed. Error families build their own cell
fixes from :func:`calls_in` and :func:`cell_result`.
"""

from __future__ import annotations

import ast
import copy
import linecache
from collections.abc import Iterator
from dataclasses import dataclass, field

from ipydevice.code.cells import is_generated_source
from ipydevice.code.rawcell import raw_cell, unmagic
from ipydevice.code.rewrite import rewrite_fix
from ipydevice.code.statements import bound_names, file_tree, header_nodes, statement_at
from ipydevice.code.treefacts import tree_facts
from ipydevice.collect.frames import FrameView, failing_statement, frame_tree
from ipydevice.collect.wrapped import is_wrapped
from ipydevice.model import Fix

__all__ = [
    "Cell",
    "as_typed",
    "calls_in",
    "cell_result",
    "failed_cell",
    "notebook_function",
    "notebook_functions",
]


@dataclass(eq=False)
class Cell:
    """The failed cell (or script) and its failing statement (transient)."""

    view: FrameView
    lines: list[str]
    tree: ast.AST
    stmt: ast.stmt
    bound: set[str] = field(default_factory=set)


def failed_cell(views: list[FrameView]) -> Cell | None:
    """The notebook cell that failed; in a script (or a test file), the innermost
    function of that file whose statement failed (``def main(): for xb, yb in
    loader: ...``), else its top level: the same loop gets the same fix, at
    ``file:line``, wherever it sits. A notebook cell is given as the user typed it
    (see :func:`as_typed`)."""
    top = next((v for v in views if v.is_user and v.is_module_level), None)
    if top is not None and is_generated_source(top.summary.filename):
        cell = _cell_of(top)
        index = views.index(top)
        inner = next((v for v in views[index + 1 :] if v.is_user), None)
        if cell is None:
            return None
        cell.bound |= _run_binds(cell, inner)
        return as_typed(cell, inner)
    # The file the run started in (a script; under pytest, the test's file): a
    # library of the user's deeper down is not where the loop is.
    outermost = top or next((v for v in views if v.is_user), None)
    script = outermost.summary.filename if outermost is not None else None
    for view in reversed(views):
        filename = view.summary.filename
        if (
            view.is_user
            and not view.is_module_level
            and not is_generated_source(filename)
            and (script is None or filename == script)
        ):
            found = _function_cell(view)
            if found is not None:
                return found
            break
    return _cell_of(top) if top is not None else None


def notebook_function(views: list[FrameView]) -> Cell | None:
    """The innermost user function, defined in another notebook cell than the one
    that failed (``def train_epoch(): for xb, yb in loader: ...`` of In [2], called
    by ``total = train_epoch()``): its lines are where the failing statement is, so
    a fix that changes its locals is a source edit of that cell, as in a script."""
    return next(notebook_functions(views), None)


def notebook_functions(views: list[FrameView]) -> Iterator[Cell]:
    """Each function on the stack defined in another notebook cell than the one that
    failed, innermost first, up to the first frame that is not one (``forward`` of
    In [3], then ``train_step`` of In [3] that called it): a user's .py helper that
    torch called back, or a hook in a module file, is passed over."""
    top = next((v for v in views if v.is_user and v.is_module_level), None)
    if top is None or not is_generated_source(top.summary.filename):
        return
    for inner in reversed(views):
        if not inner.is_user or not is_generated_source(inner.summary.filename):
            continue
        if inner is top or inner.is_module_level or is_wrapped(inner):
            return  # (a wrapper's code, ``%timeit``'s ``inner``, has no cell of its own)
        if inner.summary.filename == top.summary.filename:
            return
        cell = _function_cell(inner)
        if cell is not None:
            yield cell


def _cell_of(view: FrameView) -> Cell | None:
    parsed = frame_tree(view)
    found = failing_statement(view)
    if parsed is None or found is None:
        return None
    lines = _source_lines(view)
    return Cell(view, lines, parsed[0], found[0], bound_names(parsed[0]))


def _function_cell(view: FrameView) -> Cell | None:
    """A function frame of a script as a cell: the whole file parsed (real line
    numbers, so edits land at ``file:line``), the names the function binds. The
    file is parsed once per text and read once per tree (:mod:`ipydevice.code.treefacts`)."""
    raw = _raw_lines(view)
    if not raw:
        return None
    tree = file_tree(view.frame.f_code.co_filename, raw)
    if tree is None:
        return None
    stmt = statement_at(tree, view.lineno)
    if stmt is None:
        return None
    facts = tree_facts(tree)
    function = facts.functions.get(view.frame.f_code.co_firstlineno)
    bound = set(facts.function_bound(function)) if function is not None else set()
    return Cell(view, _with_newlines(raw), tree, stmt, bound)


def as_typed(cell: Cell, inner: FrameView | None) -> Cell:
    """``cell`` in the user's own text, magic lines kept (:mod:`ipydevice.code.rawcell`).

    A line magic or ``exec`` keeps its line: the failing statement is the same. A
    cell magic (``%%time``) ran its body as code of its own (``inner``, whose text
    :mod:`ipydevice.collect.wrapped` found): the failing statement is the body's, at
    its line in the typed cell. A body run inside a function (``%%timeit``) would
    make a moved name local to it: that cell stays as IPython ran it."""
    raw = raw_cell(cell.view.summary.filename, cell.lines)
    if raw is None:
        return cell
    if not raw[0].startswith("%%"):
        if len(raw) != len(cell.lines):
            return cell
        return Cell(cell.view, raw, cell.tree, cell.stmt, cell.bound)
    if inner is None or inner.source is None or not inner.is_module_level:
        return cell
    body = frame_tree(inner)
    found = failing_statement(inner)
    if body is None or found is None:
        return cell
    shift = _shift(raw, inner.source, found[0])
    if shift is None:
        return cell
    tree = _shifted(body[0], shift)
    stmt = statement_at(tree, found[0].lineno + shift)
    if stmt is None:
        return cell
    return Cell(cell.view, raw, tree, stmt, bound_names(tree) | cell.bound)


def _run_binds(cell: Cell, inner: FrameView | None) -> set[str]:
    """Names that text the cell runs in its own namespace binds (``exec(src)``): a
    re-run of the cell binds them again, as if the cell did."""
    if inner is None or inner.source is None or not inner.is_module_level:
        return set()
    if inner.frame.f_globals is not cell.view.frame.f_globals:
        return set()
    body = frame_tree(inner)
    return bound_names(body[0]) if body is not None else set()


def _shift(raw: list[str], source: tuple[str, ...], stmt: ast.stmt) -> int | None:
    """How many lines down the typed cell holds ``stmt``'s lines of ``source``:
    the nearest to one (the magic line) of the places that match."""
    first, last = stmt.lineno - 1, (stmt.end_lineno or stmt.lineno) - 1
    typed = unmagic("".join(source))  # (a body's own line magics, as typed)
    lines = typed.splitlines() if typed is not None else list(source)
    wanted = [line.rstrip() for line in lines[first : last + 1]]
    fits = [
        shift
        for shift in range(-first, len(raw) - last)
        if [line.rstrip() for line in raw[first + shift : last + shift + 1]] == wanted
    ]
    return min(fits, key=lambda shift: abs(shift - 1)) if fits else None


def _shifted(tree: ast.AST, shift: int) -> ast.AST:
    # The parsed tree is cached: shift a copy (contexts shared, as in collect.compiled).
    copied = copy.deepcopy(
        tree, {id(n): n for n in ast.walk(tree) if isinstance(n, ast.expr_context)}
    )
    return ast.increment_lineno(copied, shift)


def _source_lines(view: FrameView) -> list[str]:
    return _with_newlines(_raw_lines(view))


def _raw_lines(view: FrameView) -> list[str]:
    return linecache.getlines(view.frame.f_code.co_filename, view.frame.f_globals)


def _with_newlines(lines: list[str]) -> list[str]:
    return [line if line.endswith("\n") else line + "\n" for line in lines]


def cell_result(cell: Cell, rewritten: list[str], title: str) -> Fix:
    """A notebook cell is shown whole; a script gets a source edit of the
    lines that changed, at ``file:line``."""
    filename = cell.view.summary.filename
    if not is_generated_source(filename) or not cell.view.is_module_level:
        return rewrite_fix(filename, cell.lines, rewritten, title.replace(" in the cell", ""))
    return rewrite_fix(filename, cell.lines, rewritten, title, cell.view.label)


def calls_in(cell: Cell) -> list[ast.Call]:
    calls: list[ast.Call] = []
    for part in header_nodes(cell.stmt):
        calls.extend(n for n in ast.walk(part) if isinstance(n, ast.Call))
    return calls
