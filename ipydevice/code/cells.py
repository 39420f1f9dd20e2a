"""Where code comes from: a notebook cell or a file, named as the user sees it.

A cell's pseudo-file (``<ipython-input-3-…>``, ipykernel's ``/tmp/ipykernel_…/….py``)
keeps its text in ``linecache``; :func:`source_location` says ``In [3], line 5`` for
it and ``train.py:5`` for a file. :func:`cell_index` indexes a cell's assignments
once (name -> the statement that last assigns it), for the fixes that go back to the
line that made a tensor. IPython is only looked up when already imported.
"""

from __future__ import annotations

import ast
import linecache
import re
import sys

from ipydevice._debug import contain
from ipydevice.code.statements import iter_statements

__all__ = [
    "assigned",
    "cell_index",
    "cell_lines",
    "cell_number",
    "forget_cells_but",
    "is_cell_file",
    "is_generated_source",
    "source_location",
]


#: The pseudo-file IPython's terminal compiles cell ``n`` as: ``<ipython-input-n-hash>``.
_CELL_NAME = re.compile(r"<ipython-input-(\d+)-[^>]*>$")


def cell_number(filename: str) -> int | None:
    """The ``In [n]`` number IPython gave the cell compiled as ``filename``.

    ipykernel names cells ``/tmp/ipykernel_<pid>/<hash>.py``; IPython's compiler
    keeps the map. IPython is only looked up when already imported. A name the map
    does not hold, written the way IPython's terminal names a cell
    (``<ipython-input-3-…>``: code another shell or process ran, a cell replayed),
    says its number itself.
    """
    ipython = sys.modules.get("IPython")
    found = None
    if ipython is not None:
        try:
            shell = ipython.get_ipython()
            found = getattr(getattr(shell, "compile", None), "_filename_map", {}).get(filename)
        except BaseException as caught:
            contain(caught)
    if isinstance(found, int) and not isinstance(found, bool):
        return found
    named = _CELL_NAME.match(filename)
    return int(named.group(1)) if named else None


def source_location(filename: str, lineno: int) -> str:
    """``In [3], line 5`` for a notebook cell, ``train.py:5`` for a file."""
    number = cell_number(filename) if is_cell_file(filename) else None
    if number is not None:
        return f"In [{number}], line {lineno}"
    label = filename if filename.startswith("<") else filename.rsplit("/", 1)[-1]
    return f"{label}:{lineno}"


def is_cell_file(filename: str) -> bool:
    """A notebook or IPython cell's pseudo-file (``<ipython-input-3-…>``, ipykernel's
    ``/tmp/ipykernel_…/….py``): its text is in ``linecache``, not on disk."""
    return filename.startswith("<ipython-input") or "ipykernel_" in filename


def is_generated_source(filename: str) -> bool:
    """Source that is no file to edit: a cell (:func:`is_cell_file`) or any other
    ``<...>`` text (``exec``, ``%%timeit``'s template, a nested ``run_cell``)."""
    return filename.startswith("<") or "ipykernel_" in filename


#: Each cell's assignments, indexed once: name -> its last single-target assignment.
#: A cell's source never changes (a re-run is a new cell); only the cells a search
#: looks at are kept.
_INDEX: dict[str, tuple[object, dict[str, ast.Assign | ast.AnnAssign]]] = {}


def cell_index(filename: str) -> dict[str, ast.Assign | ast.AnnAssign]:
    entry = linecache.cache.get(filename)
    size = entry[0] if entry else None  # a file name given new source is indexed again
    kept = _INDEX.get(filename)
    if kept is None or kept[0] != size:
        kept = _INDEX[filename] = (size, _index_cell(filename))
    return kept[1]


def _index_cell(filename: str) -> dict[str, ast.Assign | ast.AnnAssign]:
    """Parses a cell once: each name with the last statement that assigns it alone."""
    try:
        tree = ast.parse("".join(cell_lines(filename)))
    except (SyntaxError, ValueError):
        return {}
    index: dict[str, ast.Assign | ast.AnnAssign] = {}
    for node in iter_statements(tree):
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        targets = assigned(node)
        if len(targets) == 1 and isinstance(targets[0], ast.Name):
            last = index.get(targets[0].id)
            if last is None or node.lineno > last.lineno:
                index[targets[0].id] = node
    return index


def forget_cells_but(cells: list[str]) -> None:
    keep = set(cells)
    for filename in [f for f in _INDEX if f not in keep]:
        del _INDEX[filename]


def cell_lines(filename: str) -> list[str]:
    return [ln if ln.endswith("\n") else ln + "\n" for ln in linecache.getlines(filename)]


def assigned(stmt: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return list(stmt.targets) if isinstance(stmt, ast.Assign) else [stmt.target]
