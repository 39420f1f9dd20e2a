"""Traceback frames as ipydevice reads them: whose code, which statement, which operands.

A frame is *user* code when its file is not in the standard library or an
installed package (notebook cells, scripts, the user's own modules). For the
statement that was running in a frame, :func:`line_operands` finds the names,
attribute chains and constant subscripts it uses (``x``, ``self.cache``,
``batch['input_ids']``) and looks their values up **without running anything**:
locals and globals by name, instance ``__dict__`` entries, a module's registered
parameters, buffers and submodules, and items of real dicts, lists and tuples.
Properties, ``__getattr__`` and ``__getitem__`` of other types are never called.

:class:`FrameView` holds a live frame and is transient: it never outlives one
diagnosis. Only :class:`~ipydevice.model.FrameSummary` (text) is kept.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import os
import re
import sys
import sysconfig
import types
from collections import UserDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any

from ipydevice._debug import contain
from ipydevice.collect import probe
from ipydevice.collect.holders.base import own_attribute
from ipydevice.model import FrameSummary

__all__ = [
    "FrameView",
    "bound_names",
    "cell_number",
    "is_cell_file",
    "is_generated_source",
    "is_top_level",
    "is_user_file",
    "line_operands",
    "method_receivers",
    "source_location",
    "walk_frames",
]


@dataclass(eq=False)
class FrameView:
    """One traceback frame, live (transient)."""

    frame: FrameType
    lineno: int
    summary: FrameSummary
    label: str
    is_user: bool
    #: the text a wrapper ran (``exec``, ``%%time``), when no cache holds it
    #: (see :mod:`ipydevice.collect.wrapped`)
    source: tuple[str, ...] | None = None

    @property
    def is_module_level(self) -> bool:
        """Cell or script top level: its locals are the whole namespace."""
        return is_top_level(self.frame.f_code.co_name)

    @property
    def self_module(self) -> Any:
        """The nn.Module whose method this frame runs, or None."""
        owner = _frame_local(self.frame, "self")
        return owner if probe.is_module(owner) else None

    @property
    def self_object(self) -> Any:
        """The ``self`` of a method frame, whatever its type, or None."""
        return _frame_local(self.frame, "self")

    def arguments(self) -> list[tuple[str, Any]]:
        """The frame's argument locals (not ``self``), in signature order."""
        code = self.frame.f_code
        count = code.co_argcount + code.co_kwonlyargcount
        names = list(code.co_varnames[:count])
        # *args then **kwargs follow the named arguments in co_varnames, each only
        # when its flag is set.
        for flag in (inspect.CO_VARARGS, inspect.CO_VARKEYWORDS):
            if code.co_flags & flag and len(code.co_varnames) > len(names):
                names.append(code.co_varnames[len(names)])
        out = []
        for name in names:
            if name != "self":
                value = _frame_local(self.frame, name)
                if value is not None:
                    out.append((name, value))
        return out

    def local_items(self, limit: int) -> list[tuple[str, Any]]:
        """Up to ``limit`` locals of a function frame (none for module level)."""
        if self.is_module_level:
            return []
        try:
            items = list(self.frame.f_locals.items())
        except BaseException as caught:
            contain(caught)
            return []
        return [(k, v) for k, v in items[:limit] if isinstance(k, str)]


def walk_frames(tb: TracebackType | None, limit: int) -> list[FrameView]:
    """The traceback's frames, outermost first, keeping the ``limit`` innermost."""
    views: list[FrameView] = []
    while tb is not None:
        frame, lineno = tb.tb_frame, tb.tb_lineno or 0
        code = frame.f_code
        filename = code.co_filename
        label = _qualname(frame)
        line = linecache.getline(filename, lineno, frame.f_globals).strip()
        user = is_user_file(filename)
        summary = FrameSummary(filename, lineno, label, line[:200], user)
        views.append(FrameView(frame, lineno, summary, label, user))
        tb = tb.tb_next
    # Frames outside the first cell or script top level belong to whatever ran it
    # (IPython's run_code, runpy, a test harness), not to the user's computation.
    top = next((i for i, v in enumerate(views) if v.is_user and v.is_module_level), 0)
    return views[top:][-limit:]


def is_top_level(co_name: str) -> bool:
    """The name of a module's or a cell's top-level code: ``<module>``, and
    ``<cell line: N>`` as IPython 7.34 (Colab's) and early 8.x name a cell's code."""
    return co_name == "<module>" or co_name.startswith("<cell line:")


def _qualname(frame: FrameType) -> str:
    code = frame.f_code
    qualname = getattr(code, "co_qualname", code.co_name)
    if is_top_level(code.co_name):
        if not is_cell_file(code.co_filename):
            return "<module>"
        number = cell_number(code.co_filename)
        return f"In [{number}]" if number is not None else "<cell>"
    if "." not in qualname:
        owner = _frame_local(frame, "self")
        if owner is not None:
            qualname = f"{probe.class_name(owner)}.{code.co_name}"
    return qualname.replace(".<locals>", "")


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


def _frame_local(frame: FrameType, name: str) -> Any:
    try:
        return frame.f_locals.get(name)
    except BaseException as caught:
        contain(caught)
        return None


def is_cell_file(filename: str) -> bool:
    """A notebook or IPython cell's pseudo-file (``<ipython-input-3-…>``, ipykernel's
    ``/tmp/ipykernel_…/….py``): its text is in ``linecache``, not on disk."""
    return filename.startswith("<ipython-input") or "ipykernel_" in filename


def is_generated_source(filename: str) -> bool:
    """Source that is no file to edit: a cell (:func:`is_cell_file`) or any other
    ``<...>`` text (``exec``, ``%%timeit``'s template, a nested ``run_cell``)."""
    return filename.startswith("<") or "ipykernel_" in filename


@functools.lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    roots = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            roots.add(os.path.realpath(sysconfig.get_paths()[key]))
        except BaseException as caught:
            contain(caught)
            continue
    roots.add(os.path.realpath(os.path.dirname(__file__)))
    return tuple(sorted(roots))


@functools.lru_cache(maxsize=1024)
def is_user_file(filename: str) -> bool:
    """True for code the user wrote: cells, scripts, their own modules."""
    if filename.startswith("<"):
        return not filename.startswith("<frozen")
    if "site-packages" in filename or "dist-packages" in filename:
        return False
    real = os.path.realpath(filename)
    return not any(real == root or real.startswith(root + os.sep) for root in _library_roots())


# -- source and statements -----------------------------------------------------------


def frame_tree(view: FrameView) -> tuple[ast.AST, int] | None:
    """The parsed source of the frame's function (or cell) and its line offset."""
    code = view.frame.f_code
    if view.source is not None:  # a wrapper's text: the whole of it runs as one block
        return _parse_block(code.co_filename, 1, True, len(view.source), view.source)
    lines = linecache.getlines(code.co_filename, view.frame.f_globals)
    if not lines:
        return None
    return _parse_block(
        code.co_filename, code.co_firstlineno, view.is_module_level, len(lines), tuple(lines)
    )


def file_tree(filename: str, lines: Sequence[str]) -> ast.AST | None:
    """The whole of a file's (or a cell's) ``lines``, parsed once per text: the same
    cache as :func:`frame_tree`'s (a cell's top level is parsed whole too)."""
    parsed = _parse_block(filename, 1, True, len(lines), tuple(lines))
    return parsed[0] if parsed is not None else None


@functools.lru_cache(maxsize=256)
def _parse_block(
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
    except (SyntaxError, ValueError, IndexError, TypeError):
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


def failing_statement(view: FrameView) -> tuple[ast.stmt, int] | None:
    """The statement running in ``view`` and the line offset of its source."""
    parsed = frame_tree(view)
    if parsed is None:
        return None
    tree, offset = parsed
    stmt = statement_at(tree, view.lineno - offset)
    return (stmt, offset) if stmt is not None else None


def line_operands(view: FrameView) -> list[tuple[str, Any, bool]]:
    """``(text, value, used_as_index)`` for each name or chain the statement uses.

    Only values found without running code are returned (see module docstring).
    """
    found = failing_statement(view)
    if found is None:
        return []
    stmt, _ = found
    out: list[tuple[str, Any, bool]] = []
    index_nodes = _per_statement(_index_nodes, stmt)
    for node in _per_statement(load_chains, stmt):
        resolved = resolvable_prefix(node, view.frame)
        if resolved is not None:
            chain, value = resolved
            out.append((_text(chain), value, id(node) in index_nodes))
    return out


def load_chains(stmt: ast.stmt) -> list[ast.expr]:
    """The names and chains a statement's own line reads (``batch['x']`` whole, not
    ``batch``), in the order Python evaluates them (source order), not
    ``ast.walk``'s breadth first: ``x * gamma + beta`` meets ``gamma`` before
    ``beta``, ``scores.masked_fill(mask, ...) + bias`` ``mask`` before ``bias``."""
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
    out.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
    return out


def method_receivers(view: FrameView) -> set[str]:
    """The chains the failing statement uses only to call a method on: ``scheduler`` of
    ``scheduler.add_noise(clean, noise)``. What such an object holds is not what the
    call reads (the method's own frame says what it read)."""
    found = failing_statement(view)
    if found is None:
        return set()
    return set(_per_statement(_receivers, found[0]))


def _receivers(stmt: ast.stmt) -> frozenset[str]:
    calls: set[str] = set()
    other: set[str] = set()
    callees = {
        id(n.func.value)
        for n in ast.walk(stmt)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    }
    for node in ast.walk(stmt):
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
            (calls if id(node) in callees else other).add(_text(node))
    return frozenset(calls - other)


#: What :func:`_per_statement` read of the statements met last: (function, statement) ->
#: (the statement, kept so that its id stays its own, what the function gave).
_STATEMENT_FACTS: dict[tuple[Any, int], tuple[ast.stmt, Any]] = {}
_MAX_STATEMENTS = 256


def _per_statement(func: Any, stmt: ast.stmt) -> Any:
    """``func(stmt)``, read once per statement: the parsed trees are kept per text
    (:func:`_parse_block`), so a cell failing again on the same line walks its
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


def resolvable_prefix(node: ast.AST, frame: FrameType) -> tuple[ast.AST, Any] | None:
    """The longest prefix of a chain that resolves: ``opt`` for ``opt.step``. ``frame``
    is a frame, or anything with its ``f_locals`` and ``f_globals``."""
    while isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        ok, value = safe_value(node, frame)
        if ok and value is not None:
            return node, value
        if isinstance(node, ast.Name):
            return None
        node = node.value
    return None


def _index_nodes(stmt: ast.AST) -> set[int]:
    nodes: set[int] = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
            nodes.update(id(inner) for inner in ast.walk(node.slice))
    return nodes


def _text(node: ast.AST) -> str:
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


def safe_value(node: ast.AST, frame: FrameType) -> tuple[bool, Any]:
    """Looks up a Name/Attribute/Subscript chain without calling user code."""
    if isinstance(node, ast.Name):
        for scope in (frame.f_locals, frame.f_globals):
            try:
                if node.id in scope:
                    return True, scope[node.id]
            except BaseException as caught:
                contain(caught)
                return False, None
        return False, None
    if isinstance(node, ast.Attribute):
        ok, base = safe_value(node.value, frame)
        return _attribute(base, node.attr) if ok else (False, None)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        ok, base = safe_value(node.value, frame)
        return _item(base, node.slice.value) if ok else (False, None)
    return False, None


def _attribute(base: Any, name: str) -> tuple[bool, Any]:
    """``base.name`` from registries, instance state and slots only (no properties, no
    ``__getattr__``, no lying ``__class__``: every test goes through ``type()``)."""
    state = probe.module_dict(base)
    try:
        if probe.is_module(base):
            for slot in ("_parameters", "_buffers", "_modules"):
                registered = state.get(slot)
                if type(registered) is dict and dict.__contains__(registered, name):
                    return True, dict.__getitem__(registered, name)
        if dict.__contains__(state, name):
            return True, dict.__getitem__(state, name)
        # a slot (``__slots__``): its member descriptor, read in C
        slot = own_attribute(type(base), name)
        if type(slot) is types.MemberDescriptorType:
            return True, slot.__get__(base, type(base))  # (unset: AttributeError, contained)
        if probe.is_a(base, tuple):
            fields = probe.class_attribute(type(base), "_fields")
            if type(fields) is tuple and name in fields:
                return True, tuple.__getitem__(base, fields.index(name))
    except BaseException as caught:
        contain(caught)
        return False, None
    return False, None


def _item(base: Any, key: Any) -> tuple[bool, Any]:
    """``base[key]`` for real dicts, lists, tuples and a UserDict's ``data``."""
    try:
        if probe.is_a(base, dict) and dict.__contains__(base, key):
            return True, dict.__getitem__(base, key)
        if probe.is_a(base, UserDict):
            data = probe.module_dict(base).get("data")
            if type(data) is dict and dict.__contains__(data, key):
                return True, dict.__getitem__(data, key)
        if type(key) is int and probe.is_a(base, (list, tuple)):
            getter = list.__getitem__ if probe.is_a(base, list) else tuple.__getitem__
            return True, getter(base, key)
    except BaseException as caught:
        contain(caught)
        return False, None
    return False, None


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
