"""A holder's own ``.to()`` that drops a move: ``self.log_prior.to(device)`` in it.

An object of the user's class with a ``.to()`` of its own is moved by calling it
(``predictor = predictor.to(device)``). When that method moves one of its tensors
with a line of its own and drops the result, the call leaves that tensor where it
was, however often it runs: the culprit is still there after the fix. The method's
line is what to mend (``self.log_prior = self.log_prior.to(device)``), a source fix
where the class is defined (a cell or a file of the user's), first among the fixes.

Read from the method's source only (``linecache``, nothing runs); the culprit must be
an attribute of the holder (``predictor.log_prior``) that the dropped line moves.
"""

from __future__ import annotations

import ast
import linecache
import types
from typing import Any

from ipydevice.code.cells import source_location
from ipydevice.code.flow import discarded_moves
from ipydevice.code.statements import iter_statements
from ipydevice.collect.frames import is_user_file
from ipydevice.collect.holders.base import own_attribute
from ipydevice.collect.roots import follow_path
from ipydevice.diagnosis.culprits import Analysis
from ipydevice.model import Fix

__all__ = ["own_to_fixes"]


def own_to_fixes(analysis: Analysis, namespace: Any) -> list[Fix]:
    """A source fix per culprit that its holder's own ``.to()`` moves and drops."""
    fixes: list[Fix] = []
    for culprit in analysis.found:
        entry = culprit.entries[0] if culprit.entries else None
        if entry is None or not entry.named or len(entry.path) < 2:
            continue
        kind, name = entry.path[-1]
        if kind != "attr":
            continue
        holder = follow_path(entry.path[:-1], namespace)
        method = own_attribute(type(holder), "to") if holder is not None else None
        if type(method) is not types.FunctionType:
            continue
        fix = _mended(method, name)
        if fix is not None and fix not in fixes:
            fixes.append(fix)
    return fixes


def _mended(method: types.FunctionType, name: str) -> Fix | None:
    code = method.__code__
    if not is_user_file(code.co_filename):
        return None
    lines = linecache.getlines(code.co_filename)
    first = code.co_firstlineno
    if not lines or first > len(lines):
        return None
    try:  # the method's own lines, dedented, parsed alone
        block = _block(lines, first)
        tree = ast.parse("".join(line[_indent(block[0]) :] for line in block))
    except (SyntaxError, ValueError, IndexError):
        return None
    function = tree.body[0] if tree.body else None
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or not function.args.args:
        return None
    own = function.args.args[0].arg  # ``self``
    for stmt, held in discarded_moves(iter_statements(function)):
        if held != f"{own}.{name}" or stmt.end_lineno != stmt.lineno:
            continue
        lineno = first + stmt.lineno - 1
        original = lines[lineno - 1]
        indent = original[: _indent(original)]
        call = original.strip().split("#")[0].strip()
        return Fix(
            title=f"Keep what .to() returns in {method.__qualname__}: `{held} = {call}`",
            code=f"{indent}{held} = {call}\n",
            scope="source",
            location=source_location(code.co_filename, lineno),
            original=original if original.endswith("\n") else original + "\n",
            filename=code.co_filename,
            lineno=lineno,
            end_lineno=lineno,
        )
    return None


def _block(lines: list[str], first: int) -> list[str]:
    """The method's lines: its ``def`` (decorators skipped) and every line indented
    more, or blank, after it."""
    start = first - 1
    while not lines[start].lstrip().startswith(("def ", "async def ")):
        start += 1
    margin = _indent(lines[start])
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > margin):
        end += 1
    return lines[start:end]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))
