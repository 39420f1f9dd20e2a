"""Where a tensor is made: torch's factory calls in the source, and the edit that gives
them ``device=`` (or moves what ``torch.from_numpy``, a tokenizer or ``torch.load``
always leave on the CPU). Read with ``linecache`` and ``ast`` only; nothing runs.

:func:`factories_in` gives one source fix per stray call of a function;
:func:`factories_together` one fix for all of them (a cached helper whose ``inv`` and
``angles`` both need the device); :func:`apply_edit` turns an edit of a statement into
a :class:`~ipydevice.model.Fix`.
"""

from __future__ import annotations

import ast
import linecache
from typing import Any

from ipydevice.code.cells import source_location
from ipydevice.code.flow import FACTORIES
from ipydevice.code.rewrite import add_keyword, drop_device_comments, replace_span, segment
from ipydevice.code.statements import code_tree
from ipydevice.model import Fix

__all__ = [
    "apply_edit",
    "call_name",
    "chain_factory",
    "copy_node",
    "factories_in",
    "factories_together",
    "is_factory",
    "moved_calls",
    "shifted",
    "statement_of",
    "stray_source",
]

_ABSENT = object()


def is_factory(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    # ``torch.`` spelled out: a bare ``range(3)`` is Python's, ``np.random.rand`` NumPy's.
    name, base = call_name(node)
    return (name in FACTORIES or name in _DEVICE_BOUND) and base == "torch"


#: Calls that make an object bound to one device for good, given ``device=`` where it
#: is made: a ``torch.Generator`` cannot be moved, only made again.
_DEVICE_BOUND = frozenset({"Generator"})


def call_name(call: ast.Call) -> tuple[str, str]:
    """``("full", "torch")`` for ``torch.full(...)``, ``("full", "")`` for a bare
    ``full(...)``, ``("", "")`` for anything else called."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id, ""
    if isinstance(func, ast.Attribute):
        return func.attr, func.value.id if isinstance(func.value, ast.Name) else ""
    return "", ""


def chain_factory(node: Any) -> Any:
    """The factory call a value starts from: ``torch.full(...)`` itself, or at the
    head of a method chain (``torch.full(...).triu(1)``, ``torch.arange(n).float()``),
    where ``device=`` belongs. None for anything else."""
    while isinstance(node, ast.Call):
        if is_factory(node):
            return node
        if not isinstance(node.func, ast.Attribute):
            return None
        node = node.func.value
    return None


def copy_node(node: Any) -> Any:
    """A copy of an AST node: its fields and positions, the expression contexts shared.

    The parser shares one ``ast.Load()`` (and ``Store``, ``Del``) between every
    tree it builds, and IPython's tracebacks (``executing``, through stack_data)
    set ``.parent`` on every node they walk, shared contexts included: a plain
    deepcopy then follows ``Load().parent`` into a whole foreign module tree
    (100,000 nodes of torch's source, ~150 ms) on every copy. Only what the
    grammar defines is copied (no ``.parent``), without ``copy``'s memo and
    reductions (a few times faster: a fix's statement is copied on every error).
    """
    if isinstance(node, list):
        return [copy_node(item) for item in node]
    if not isinstance(node, ast.AST) or isinstance(node, ast.expr_context):
        return node  # constants' values, names, numbers: immutable
    kind = type(node)
    new = kind.__new__(kind)
    for name in (*node._fields, *node._attributes):
        value = getattr(node, name, _ABSENT)
        if value is not _ABSENT:
            setattr(new, name, copy_node(value))
    return new


def apply_edit(
    filename: str, lines: list[str], stmt: ast.stmt, offset: int, change: Any, title: str
) -> Fix | None:
    node = copy_node(stmt)
    ast.increment_lineno(node, offset)
    start, end = node.lineno, node.end_lineno or node.lineno
    try:
        changed = change(lines, node)
    except Exception:
        return None
    grown = len(changed) - len(lines)
    changed = drop_device_comments(changed, start, end + grown)
    original = "".join(lines[start - 1 : end])
    replacement = "".join(changed[start - 1 : end + grown])
    return Fix(
        title=title,
        code=replacement,
        scope="source",
        location=source_location(filename, start),
        original=original,
        filename=filename,
        lineno=start,
        end_lineno=end,
    )


def factories_in(code: Any, label: str, device: str = "") -> list[tuple[str, Fix]]:
    parsed = code_tree(code)
    if parsed is None:
        return []
    tree, offset = parsed
    lines = [ln if ln.endswith("\n") else ln + "\n" for ln in linecache.getlines(code.co_filename)]
    args = [a for a in code.co_varnames[1 : code.co_argcount] if a.isidentifier()]
    device = device or (f"{args[0]}.device" if args else "next(self.parameters()).device")
    out = []
    moved = moved_calls(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        edit = stray_source(node, moved, device)
        stmt = statement_of(tree, node) if edit is not None else None
        if edit is None or stmt is None:
            continue
        change, title = edit
        fix = apply_edit(
            code.co_filename,
            lines,
            stmt,
            offset,
            shifted(change, node, stmt),
            f"{title} in {label}",
        )
        if fix is not None:
            out.append((label, fix))
    return out


def factories_together(code: Any, label: str, device: str) -> Fix | None:
    """Every stray factory of the function ``code`` given ``device=`` in one edit
    (``inv`` and ``angles`` of a cached table both): a fix of one call leaves the
    others where they were, and the function's own arithmetic then mixes devices."""
    parsed = code_tree(code)
    if parsed is None:
        return None
    tree, offset = parsed
    lines = [ln if ln.endswith("\n") else ln + "\n" for ln in linecache.getlines(code.co_filename)]
    moved = moved_calls(tree)
    edits: list[tuple[ast.stmt, ast.Call, tuple[str, str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            edit = stray_source(node, moved, device)
            stmt = statement_of(tree, node) if edit is not None else None
            if edit is not None and stmt is not None:
                edits.append((stmt, node, edit[0]))
    if not edits:
        return None
    changed, first, last = list(lines), None, None
    # the last call first: the lines above an edit keep their numbers
    for stmt, call, change in sorted(
        edits, key=lambda e: (e[1].lineno, e[1].col_offset), reverse=True
    ):
        node = copy_node(stmt)
        ast.increment_lineno(node, offset)
        try:
            changed = shifted(change, call, stmt)(changed, node)
        except Exception:
            return None
        first = node.lineno if first is None else min(first, node.lineno)
        last = (
            (node.end_lineno or node.lineno)
            if last is None
            else max(last, node.end_lineno or node.lineno)
        )
    assert first is not None and last is not None
    grown = len(changed) - len(lines)
    changed = drop_device_comments(changed, first, last + grown)
    return Fix(
        title=f"Create the tensors on {device} in {label}",
        code="".join(changed[first - 1 : last + grown]),
        scope="source",
        location=source_location(code.co_filename, first),
        original="".join(lines[first - 1 : last]),
        filename=code.co_filename,
        lineno=first,
        end_lineno=last,
    )


def moved_calls(tree: ast.AST) -> set[int]:
    """Calls whose result is moved on the spot (``f(...).to(d)``, ``.cuda()``)."""
    out = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("to", "cuda")
        ):
            out.add(id(node.func.value))
    return out


def stray_source(call: ast.Call, moved: set[int], device: str) -> tuple[Any, str] | None:
    """How a call can leave a tensor off the model's device, and the edit that fixes it.

    Factories without ``device=``; ``torch.from_numpy`` and tokenizer calls
    (``return_tensors=...``), which always give CPU tensors; ``torch.load``
    without ``map_location``. Calls moved on the spot are fine.
    """
    if id(call) in moved:
        return None
    keywords = {k.arg for k in call.keywords}
    name, base = call_name(call)
    if is_factory(call) and "device" not in keywords:
        return ("keyword", f"device={device}"), "Create the tensor on the input's device"
    if base == "torch" and name == "from_numpy":
        return ("move", device), "Move the array's tensor (always on the CPU) to the model's device"
    if "return_tensors" in keywords:
        return (
            "move",
            device,
        ), "Move the tokenizer's tensors (always on the CPU) to the model's device"
    if base == "torch" and name == "load" and "map_location" not in keywords:
        return (
            "keyword",
            f"map_location={device}",
        ), "Load the checkpoint onto the model's device, not where it was saved"
    return None


def shifted(change: tuple[str, str], call: ast.Call, stmt: ast.stmt) -> Any:
    """An edit for :func:`apply_edit`, applied to ``call`` moved with ``stmt``."""
    kind, text = change

    def edit(lines: list[str], node: ast.stmt) -> list[str]:
        moved_call = copy_node(call)
        ast.increment_lineno(moved_call, node.lineno - stmt.lineno)
        if kind == "keyword":
            return add_keyword(lines, moved_call, text)
        return replace_span(lines, moved_call, f"{segment(lines, moved_call)}.to({text})")

    return edit


def statement_of(tree: ast.AST, target: ast.AST) -> ast.stmt | None:
    best = None
    for node in ast.walk(tree):
        compound = isinstance(node, (ast.FunctionDef, ast.If, ast.For, ast.While, ast.With))
        if (
            isinstance(node, ast.stmt)
            and not compound
            and any(child is target for child in ast.walk(node))
        ):
            best = node
    return best
