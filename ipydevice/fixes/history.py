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

from ipydevice.collect.frames import FrameView, source_location
from ipydevice.diagnosis.culprits import Analysis
from ipydevice.fixes.rewrite import add_keyword
from ipydevice.fixes.source import _chain_factory, _last_assignment
from ipydevice.model import Fix

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


def history_fixes(analysis: Analysis, views: list[FrameView]) -> list[Fix]:
    """``device=`` on the factory calls of earlier notebook cells that made the
    culprits held under a name (``h0 = torch.zeros(1, b, 8)`` in In [3]): the
    latest assignment of each name wins, and one fix per cell changes all of its
    lines (``h0`` and ``c0`` together)."""
    names = [
        str(c.entries[0].path[0][1])
        for c in analysis.found
        if c.entries
        and c.entries[0].kind == "tensor"
        and len(c.entries[0].path) == 1
        and c.entries[0].path[0][0] == "name"
    ]
    if not names:
        return []
    target = analysis.target
    failed = next((v.summary.filename for v in views if v.is_user and v.is_module_level), "")
    if not _is_cell(failed):
        return []  # a script, or no cell failed: no notebook history to read
    cells = [f for f in list(linecache.cache) if _is_cell(f) and f != failed][-_MAX_CELLS:]
    found: dict[str, list[ast.Assign | ast.AnnAssign]] = {}
    sources: dict[str, list[str]] = {}
    trees: dict[str, ast.AST | None] = {}
    for name in dict.fromkeys(n for n in names if n.isidentifier()):
        for filename in reversed(cells):
            lines = sources.get(filename)
            if lines is None:
                lines = [
                    ln if ln.endswith("\n") else ln + "\n" for ln in linecache.getlines(filename)
                ]
                sources[filename] = lines
            if name not in "".join(lines):
                continue  # parsed only when the name is in it at all
            if filename not in trees:
                try:
                    trees[filename] = ast.parse("".join(lines))
                except (SyntaxError, ValueError):
                    trees[filename] = None
            tree = trees[filename]
            if tree is None:
                continue
            stmt = _last_assignment(tree, name, len(lines) + 1)
            if stmt is None:
                continue
            factory = _chain_factory(stmt.value)
            if factory is not None and not any(k.arg == "device" for k in factory.keywords):
                found.setdefault(filename, []).append(stmt)
            break  # the latest cell that made it decides, whatever it did
    fixes = []
    for filename, stmts in found.items():
        fix = _history_edit(filename, sources[filename], stmts, target)
        if fix is not None:
            fixes.append(fix)
    return fixes


def _history_edit(
    filename: str, lines: list[str], stmts: list[ast.Assign | ast.AnnAssign], target: str
) -> Fix | None:
    changed = list(lines)
    try:
        for stmt in sorted(stmts, key=lambda n: n.lineno, reverse=True):
            before = len(changed)
            changed = add_keyword(changed, _chain_factory(stmt.value), f"device={spell(target)}")
            if len(changed) != before:
                return None  # a call over several lines grew: too clever to splice
    except Exception:
        return None
    start = min(s.lineno for s in stmts)
    end = max(s.end_lineno or s.lineno for s in stmts)
    names = ", ".join(
        t.id
        for s in sorted(stmts, key=lambda n: n.lineno)
        for t in _targets(s)
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


def _targets(stmt: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return list(stmt.targets) if isinstance(stmt, ast.Assign) else [stmt.target]


def _is_cell(filename: str) -> bool:
    return filename.startswith("<ipython-input") or "ipykernel_" in filename
