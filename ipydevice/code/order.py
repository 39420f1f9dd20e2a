"""The order statements run in, read from the tree: what runs after a statement (a
loop's body once more), what ran before it, in its scope only."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from ipydevice.code.statements import iter_statements

__all__ = ["statements_before", "statements_from"]


def statements_from(tree: ast.AST, stmt: ast.stmt, limit: int) -> list[ast.stmt]:
    """``stmt`` and the statements that run after it, in order: the rest of its body
    and of every body around it, at most ``limit``. A loop's body runs once more: its
    statements before ``stmt`` follow the rest of it (the next round's ``preds =
    model(xb)`` tells where the loop's work is)."""
    out: list[ast.stmt] = []
    for body, index, current, parent in _around(tree, stmt):
        rest = body[index:] if current is stmt else body[index + 1 :]
        out.extend(_flatten(rest, limit - len(out)))
        if isinstance(parent, _LOOPS) and body is parent.body and index:
            out.extend(_flatten(body[:index], limit - len(out)))
        if len(out) >= limit:
            break
    return out[:limit]


def statements_before(tree: ast.AST, stmt: ast.stmt, limit: int) -> list[ast.stmt]:
    """The statements that ran before ``stmt`` in its scope, nearest first: the earlier
    ones of its body and of every body around it (their compound statements whole),
    at most ``limit``."""
    out: list[ast.stmt] = []
    for body, index, _, _ in _around(tree, stmt):
        out.extend(reversed(_flatten(body[:index], limit)))
        if len(out) >= limit:
            break
    return out[:limit]


def _around(
    tree: ast.AST, stmt: ast.stmt
) -> Iterator[tuple[list[ast.stmt], int, ast.AST, ast.AST]]:
    """``(body, index, statement, parent)``: ``stmt`` in its body, then each compound
    statement around it in its own, innermost first, up to the function (or class)
    it is in; ``parent`` holds ``body``."""
    current: ast.AST = stmt
    for parent in reversed(_enclosing(tree, stmt)):
        for body in _bodies(parent):
            index = next((i for i, s in enumerate(body) if s is current), None)
            if index is not None:
                yield body, index, current, parent
                break
        if isinstance(parent, _SCOPES):
            return  # (a function's statements end where it returns)
        current = parent


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


#: (id(tree), id(stmt)) -> (tree, stmt, what encloses it): the trees are the parsers'
#: cached ones, and a diagnosis asks about the same statements several times.
_ENCLOSING: dict[tuple[int, int], tuple[ast.AST, ast.stmt, tuple[ast.AST, ...]]] = {}


def _enclosing(tree: ast.AST, stmt: ast.stmt) -> tuple[ast.AST, ...]:
    """The nodes with bodies around ``stmt``, outermost first (``tree`` included)."""
    cached = _ENCLOSING.get((id(tree), id(stmt)))
    if cached is not None and cached[0] is tree and cached[1] is stmt:
        return cached[2]
    if len(_ENCLOSING) > 256:
        _ENCLOSING.clear()
    found = tuple(_walk_down(tree, stmt))
    _ENCLOSING[(id(tree), id(stmt))] = (tree, stmt, found)
    return found


def _walk_down(tree: ast.AST, stmt: ast.stmt) -> list[ast.AST]:
    path: list[ast.AST] = [tree]
    node: ast.AST = tree
    while True:
        inner = next(
            (
                s
                for body in _bodies(node)
                for s in body
                if s is not stmt
                and s.lineno <= stmt.lineno <= (s.end_lineno or s.lineno)
                and _inside(s, stmt)
            ),
            None,
        )
        if inner is None:
            return path
        path.append(inner)
        node = inner


def _inside(node: ast.AST, stmt: ast.stmt) -> bool:
    return any(s is stmt for s in iter_statements(node))


def _bodies(node: ast.AST) -> list[list[ast.stmt]]:
    out = []
    for name in ("body", "orelse", "finalbody"):
        items = getattr(node, name, None)
        if type(items) is list and items and isinstance(items[0], ast.stmt):
            out.append(items)
    for handler in getattr(node, "handlers", None) or ():
        out.append(handler.body)
    return out


def _flatten(stmts: Iterable[ast.stmt], limit: int) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for stmt in stmts:
        if len(out) >= limit:
            break
        out.append(stmt)
        if not isinstance(stmt, _SCOPES):
            for body in _bodies(stmt):
                out.extend(_flatten(body, limit - len(out)))
    return out[:limit]
