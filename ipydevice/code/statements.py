"""Statements of the user's code as text: parsed once per text, read without running.

A cell or file is parsed once per text (:func:`parse_block`, :func:`file_tree`);
:func:`statement_at` finds the statement on a line, :func:`load_chains` the names
and chains its line reads (``x``, ``self.cache``, ``batch['input_ids']``), and
:func:`per_statement` keeps what a function read of a statement so a cell failing
again on the same line is walked once. Standard library only: no frame, no object.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
from collections.abc import Iterator, Sequence
from types import CodeType
from typing import Any

from ipydevice._debug import contain

__all__ = [
    "block_of",
    "bound_names",
    "chain_path",
    "chain_text",
    "code_tree",
    "device_moves",
    "encloses",
    "file_tree",
    "header_nodes",
    "index_nodes",
    "iter_statements",
    "load_chains",
    "parse_block",
    "per_statement",
    "receivers",
    "statement_at",
]


def code_tree(code: CodeType, globals_: Any = None) -> tuple[ast.AST, int] | None:
    """The block of a function's code (``def`` and body) from its file or cell,
    parsed once per text, and the offset of its lines in the file."""
    lines = linecache.getlines(code.co_filename, globals_)
    if not lines:
        return None
    return block_of(code.co_filename, code.co_firstlineno, False, lines)


def file_tree(filename: str, lines: Sequence[str]) -> ast.AST | None:
    """The whole of a file's (or a cell's) ``lines``, parsed once per text: the same
    cache as :func:`frame_tree`'s (a cell's top level is parsed whole too)."""
    parsed = block_of(filename, 1, True, lines)
    return parsed[0] if parsed is not None else None


#: ``(filename, first line, whole) -> (lines, parsed)``: the text as linecache keeps it.
_BY_LINES: dict[tuple[str, int, bool], tuple[Sequence[str], tuple[ast.AST, int] | None]] = {}


def block_of(
    filename: str, first: int, whole: bool, lines: Sequence[str]
) -> tuple[ast.AST, int] | None:
    """:func:`parse_block` of ``lines`` as linecache (or a view) keeps them: the same
    list is the same text, so a file's lines are copied and hashed, which costs what
    the file's length does (torch's ``functional.py`` on every error), only when its
    text was read anew."""
    key = (filename, first, whole)
    hit = _BY_LINES.get(key)
    if hit is not None and hit[0] is lines:
        return hit[1]
    parsed = parse_block(filename, first, whole, len(lines), tuple(lines))
    if len(_BY_LINES) >= 512:
        _BY_LINES.clear()
    _BY_LINES[key] = (lines, parsed)
    return parsed


@functools.lru_cache(maxsize=256)
def parse_block(
    filename: str, first: int, whole: bool, count: int, lines: tuple[str, ...]
) -> tuple[ast.AST, int] | None:
    try:
        if whole:
            return ast.parse("".join(lines)), 0
        block = inspect.getblock(list(lines[first - 1 :]))
        text = "".join(block)
        if text[:1] in (" ", "\t"):
            # Keep the real columns (so edits land in the file as it is): parse the
            # indented block under a dummy ``if`` instead of dedenting it.
            return ast.parse("if 1:\n" + text), first - 2
        return ast.parse(text), first - 1
    except (SyntaxError, ValueError, IndexError, TypeError, MemoryError, RecursionError):
        return None


def statement_at(tree: ast.AST, lineno: int) -> ast.stmt | None:
    """The innermost statement spanning ``lineno`` (of two on one line, the last).

    Descends through the statements that span the line only: expressions are
    never visited, so a long function costs what its nesting does."""
    best: ast.stmt | None = None
    level = _child_statements(tree)
    while level:
        spanning = [s for s in level if s.lineno <= lineno <= (s.end_lineno or s.lineno)]
        if not spanning:
            break
        best = spanning[-1]
        level = _child_statements(best)
    return best


def encloses(node: ast.stmt, inner: ast.stmt) -> bool:
    """Whether ``inner`` is inside ``node``: by their lines first (nodes of one tree
    nest by position), then by identity, so only the loops around it are walked."""
    if node is inner or not (
        node.lineno <= inner.lineno <= (inner.end_lineno or inner.lineno) <= (node.end_lineno or 0)
    ):
        return False
    return any(child is inner for child in ast.walk(node))


def iter_statements(tree: ast.AST) -> Iterator[ast.stmt]:
    """Every statement in ``tree``, outer before inner, without visiting expressions
    (what ``ast.walk`` spends most of its time on)."""
    stack = list(reversed(_child_statements(tree)))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(_child_statements(node)))


def _child_statements(node: ast.AST) -> list[ast.stmt]:
    """The statements directly inside ``node``: its bodies, ``else``, ``finally``,
    and the bodies of its ``except`` handlers and ``case`` clauses."""
    out: list[ast.stmt] = []
    for field in _BODY_FIELDS:
        items = getattr(node, field, None)
        if type(items) is not list:
            continue
        for item in items:
            if isinstance(item, ast.stmt):
                out.append(item)
            elif isinstance(item, (ast.ExceptHandler, ast.match_case)):
                out.extend(s for s in item.body if isinstance(s, ast.stmt))
    return out


_BODY_FIELDS = ("body", "handlers", "cases", "orelse", "finalbody")


def header_nodes(stmt: ast.stmt) -> list[ast.AST]:
    """The parts of a statement that run on its own line (not a compound's body)."""
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.target, stmt.iter]
    if isinstance(stmt, (ast.While, ast.If)):
        return [stmt.test]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return list(stmt.items)
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(stmt.decorator_list)
    if isinstance(stmt, ast.Try):
        return []
    return [stmt]


def load_chains(stmt: ast.stmt) -> list[ast.expr]:
    """The names and chains a statement's own line reads (``batch['x']`` whole, not
    ``batch``), in the order Python evaluates them (source order), not
    ``ast.walk``'s breadth first: ``x * gamma + beta`` meets ``gamma`` before
    ``beta``, ``scores.masked_fill(mask, ...) + bias`` ``mask`` before ``bias``; an
    augmented assignment's target is read too."""
    out: list[ast.expr] = []
    for part in header_nodes(stmt):
        inner = {
            id(n.value) for n in ast.walk(part) if isinstance(n, (ast.Attribute, ast.Subscript))
        }
        out.extend(
            node
            for node in ast.walk(part)
            if id(node) not in inner
            and isinstance(node, (ast.Name, ast.Attribute, ast.Subscript))
            and isinstance(getattr(node, "ctx", None), ast.Load)
        )
    if isinstance(stmt, ast.AugAssign) and isinstance(
        stmt.target, (ast.Name, ast.Attribute, ast.Subscript)
    ):
        out.append(stmt.target)  # ``acc += g`` reads ``acc`` first
    out.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
    return out


def receivers(stmt: ast.stmt) -> frozenset[str]:
    calls: set[str] = set()
    other: set[str] = set()
    callees = {
        id(n.func.value)
        for n in ast.walk(stmt)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    }
    for node in ast.walk(stmt):
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
            (calls if id(node) in callees else other).add(chain_text(node))
    return frozenset(calls - other)


def device_moves(stmt: ast.stmt) -> dict[int, ast.expr | None]:
    """``id(callee) -> device argument`` for the ``.to(...)``/``.cuda()`` calls on a
    statement's line whose receiver is a chain (``stream[:, 10:20].to(device)``; the
    callee ``stream[:, 10:20].to`` is the chain :func:`load_chains` gives): the call
    reads the moved copy, not the receiver. ``.cuda()`` has no argument (None)."""
    out: dict[int, ast.expr | None] = {}
    for node in ast.walk(stmt):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        receiver, name = node.func.value, node.func.attr
        if not isinstance(receiver, (ast.Name, ast.Attribute, ast.Subscript)):
            continue
        if name == "cuda" and not node.args:
            out[id(node.func)] = None
        elif name == "to":
            given = node.args[:1] or [k.value for k in node.keywords if k.arg == "device"]
            if given:
                out[id(node.func)] = given[0]
    return out


#: What :func:`per_statement` read of the statements met last: (function, statement) ->
#: (the statement, kept so that its id stays its own, what the function gave).
_STATEMENT_FACTS: dict[tuple[Any, int], tuple[ast.stmt, Any]] = {}


_MAX_STATEMENTS = 256


def per_statement(func: Any, stmt: ast.stmt) -> Any:
    """``func(stmt)``, read once per statement: the parsed trees are kept per text
    (:func:`parse_block`), so a cell failing again on the same line walks its
    statement once, not on every error. Statements only: no user object is kept."""
    key = (func, id(stmt))
    kept = _STATEMENT_FACTS.get(key)
    if kept is not None and kept[0] is stmt:
        return kept[1]
    value = func(stmt)
    if len(_STATEMENT_FACTS) >= _MAX_STATEMENTS:
        _STATEMENT_FACTS.pop(next(iter(_STATEMENT_FACTS)), None)
    _STATEMENT_FACTS[key] = (stmt, value)
    return value


def index_nodes(stmt: ast.AST) -> set[int]:
    nodes: set[int] = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
            nodes.update(id(inner) for inner in ast.walk(node.slice))
    return nodes


def chain_text(node: ast.AST) -> str:
    """The source text of a name or chain, as ``ast.unparse`` writes it; a name and
    a chain of attributes on a name (``self.q_proj.weight``) without it (an unparser
    is made per call: most of what the failing line's operands cost)."""
    if type(node) is ast.Name:
        return node.id
    if type(node) is ast.Attribute:
        parts = [node.attr]
        base = node.value
        while type(base) is ast.Attribute:
            parts.append(base.attr)
            base = base.value
        if type(base) is ast.Name:
            parts.append(base.id)
            return ".".join(reversed(parts))
    try:
        return ast.unparse(node)
    except BaseException as caught:
        contain(caught)
        return "?"


def bound_names(tree: ast.AST) -> set[str]:
    """Names a cell binds at its top level (assignments, loop targets, imports)."""
    names: set[str] = set()
    for node in _walk_top(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def _walk_top(tree: ast.AST) -> list[ast.AST]:
    out: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def chain_path(node: ast.AST) -> tuple[tuple[str, Any], ...] | None:
    """A name, attribute and literal-subscript chain (``model.layers[3]``,
    ``batch['x']``) as path steps (``('name', 'model'), ('attr', 'layers'),
    ('item', 3)``); None for any other expression."""
    steps: list[tuple[str, Any]] = []
    while True:
        if isinstance(node, ast.Name):
            return (("name", node.id), *reversed(steps))
        if isinstance(node, ast.Attribute):
            steps.append(("attr", node.attr))
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            steps.append(("item", node.slice.value))
        else:
            return None
        node = node.value
