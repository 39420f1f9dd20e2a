"""Fixes from the notebook's history, in the user's words.

A tensor made in an earlier cell by a factory without ``device=``
(``h0 = torch.zeros(1, b, 8)`` in In [3]) gets the fix at that line, found in the
cells' source that IPython keeps in ``linecache``; and every fix's code says the
target the way the user does when a device variable holds it (``x.to(device)``).
"""

from __future__ import annotations

import ast
import linecache
from contextvars import ContextVar

from ipydevice.code.cells import (
    assigned,
    cell_index,
    cell_lines,
    forget_cells_but,
    is_cell_file,
    source_location,
)
from ipydevice.code.rewrite import add_keyword, drop_device_comments
from ipydevice.collect.frames import FrameView
from ipydevice.diagnosis.culprits import Analysis
from ipydevice.fixes.factories import chain_factory
from ipydevice.model import Fix, Step

__all__ = ["SPELLING", "history_fixes", "spell"]

#: (target, the user's name for it) while fixes are written: ``x.to(device)``.
SPELLING: ContextVar[tuple[str, str]] = ContextVar("ipydevice_spelling", default=("", ""))


def spell(target: str) -> str:
    """The target as the fix's code says it: the user's own device variable when
    the namespace holds one for it (``device``), else the literal (``'cuda:0'``)."""
    known, name = SPELLING.get()
    return name if name and known == target else repr(target)


#: Notebook cells looked at, latest first, for the line that made a culprit.
_MAX_CELLS = 100


def history_fixes(
    analysis: Analysis, views: list[FrameView], steps_of: dict[int, tuple[Step, ...]] | None = None
) -> list[Fix]:
    """``device=`` on the factory calls of earlier notebook cells that made the
    culprits held under a name (``h0 = torch.zeros(1, b, 8)`` in In [3]): the
    latest assignment of each name wins, and one fix per cell changes all of its
    lines (``h0`` and ``c0`` together). ``steps_of`` gets, for the fix check, what
    each fix does: the tensors it makes are on the target wherever the code reads
    them (a closure made in that cell too), which a ``share`` step of each says."""
    names = [
        str(c.entries[0].path[0][1])
        for c in analysis.found
        if c.entries
        and c.entries[0].kind in ("tensor", "generator")
        and len(c.entries[0].path) == 1
        and c.entries[0].path[0][0] == "name"
    ]
    if not names:
        return []
    target = analysis.target
    failed = next((v.summary.filename for v in views if v.is_user and v.is_module_level), "")
    if not is_cell_file(failed):
        return []  # a script, or no cell failed: no notebook history to read
    cells = [f for f in list(linecache.cache) if is_cell_file(f) and f != failed][-_MAX_CELLS:]
    forget_cells_but(cells)
    found: dict[str, list[ast.Assign | ast.AnnAssign]] = {}
    for name in dict.fromkeys(n for n in names if n.isidentifier()):
        for filename in reversed(cells):
            stmt = cell_index(filename).get(name)
            if stmt is None:
                continue
            factory = chain_factory(stmt.value)
            if (
                factory is not None
                and not any(k.arg == "device" for k in factory.keywords)
                and not _moved_after(stmt.value, factory)
            ):
                found.setdefault(filename, []).append(stmt)
            break  # the latest cell that made it decides, whatever it did
    fixes = []
    for filename, stmts in found.items():
        fix = _history_edit(filename, cell_lines(filename), stmts, target)
        if fix is not None:
            fixes.append(fix)
            if steps_of is not None:
                made = [t.id for s in stmts for t in assigned(s) if isinstance(t, ast.Name)]
                paths = [(("name", name),) for name in made]
                steps_of[id(fix)] = tuple(Step("share", p, target, p) for p in paths)
    return fixes


def _history_edit(
    filename: str, lines: list[str], stmts: list[ast.Assign | ast.AnnAssign], target: str
) -> Fix | None:
    changed = list(lines)
    try:
        for stmt in sorted(stmts, key=lambda n: n.lineno, reverse=True):
            before = len(changed)
            changed = add_keyword(changed, chain_factory(stmt.value), f"device={spell(target)}")
            if len(changed) != before:
                return None  # a call over several lines grew: too clever to splice
    except Exception:
        return None
    start = min(s.lineno for s in stmts)
    end = max(s.end_lineno or s.lineno for s in stmts)
    for stmt in stmts:
        changed = drop_device_comments(changed, stmt.lineno, stmt.end_lineno or stmt.lineno)
    names = ", ".join(
        t.id
        for s in sorted(stmts, key=lambda n: n.lineno)
        for t in assigned(s)
        if isinstance(t, ast.Name)
    )
    where = source_location(filename, start)
    return Fix(
        title=f"Create {names} on {target} where {where} makes {'them' if len(stmts) > 1 else 'it'}",
        code="".join(changed[start - 1 : end]),
        scope="source",
        location=where,
        original="".join(lines[start - 1 : end]),
        filename=filename,
        lineno=start,
        end_lineno=end,
    )


#: Dtypes as a chain spells them (``.to(torch.long)`` converts, it does not move).
_DTYPES = frozenset(
    [
        "float",
        "float16",
        "float32",
        "float64",
        "half",
        "double",
        "bfloat16",
        "int",
        "int8",
        "int16",
        "int32",
        "int64",
        "long",
        "short",
        "uint8",
        "bool",
        "complex64",
        "complex128",
        "cfloat",
        "cdouble",
    ]
)


def _moved_after(value: ast.expr | None, factory: ast.Call) -> bool:
    """A link of the chain after the factory moves the tensor
    (``torch.tensor([5, 3]).to(device)``, ``.cuda()``): ``device=`` on the factory
    would be undone by it, so it is no fix."""
    node: ast.expr | None = value
    while isinstance(node, ast.Call) and node is not factory:
        func = node.func
        if not isinstance(func, ast.Attribute):
            return False
        if func.attr in ("cuda", "cpu", "mps", "xpu"):
            return True
        if func.attr == "to" and _to_moves(node):
            return True
        node = func.value
    return False


def _to_moves(call: ast.Call) -> bool:
    if any(k.arg == "device" for k in call.keywords):
        return True
    if not call.args:
        return False
    first = call.args[0]
    return not (isinstance(first, ast.Attribute) and first.attr in _DTYPES)
