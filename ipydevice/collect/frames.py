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
import sysconfig
import types
from collections import UserDict
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any

from ipydevice._debug import contain
from ipydevice.code.cells import cell_number, is_cell_file
from ipydevice.code.statements import (
    block_of,
    chain_text,
    device_moves,
    index_nodes,
    load_chains,
    per_statement,
    receivers,
    statement_at,
)
from ipydevice.collect import probe
from ipydevice.collect.holders.base import own_attribute
from ipydevice.model import FrameSummary

__all__ = [
    "FrameView",
    "is_top_level",
    "is_user_file",
    "line_operands",
    "method_receivers",
    "moved_on_line",
    "owns_name",
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
        if _hidden(frame):
            tb = tb.tb_next
            continue
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


def _hidden(frame: FrameType) -> bool:
    """A function frame that hides itself from tracebacks (``__tracebackhide__ =
    True``, as IPython's and pytest's tracebacks honour): a wrapper's, or a kernel
    written in Python for what is C++ elsewhere; its locals are not the user's."""
    if is_top_level(frame.f_code.co_name) or "__tracebackhide__" not in frame.f_code.co_varnames:
        return False
    value = _frame_local(frame, "__tracebackhide__")
    return value is True or (type(value) is int and value != 0)


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
    return qualname.rpartition("<locals>.")[2]  # the innermost scope: `film`, not `make_film.film`


def owns_name(frame: Any, name: str) -> bool:
    """``name`` is a local of the frame's function (an argument or a variable it binds),
    not a global or a closure's free variable, which ``f_locals`` also lists: assigning
    it there keeps it what it was."""
    try:
        code = frame.f_code
        return name in code.co_varnames or name in code.co_cellvars
    except Exception:
        return False


def _frame_local(frame: FrameType, name: str) -> Any:
    try:
        return frame.f_locals.get(name)
    except BaseException as caught:
        contain(caught)
        return None


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
        return block_of(code.co_filename, 1, True, view.source)
    lines = linecache.getlines(code.co_filename, view.frame.f_globals)
    if not lines:
        return None
    return block_of(code.co_filename, code.co_firstlineno, view.is_module_level, lines)


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
    indexed = per_statement(index_nodes, stmt)
    for node in per_statement(load_chains, stmt):
        resolved = resolvable_prefix(node, view.frame)
        if resolved is not None:
            chain, value = resolved
            out.append((chain_text(chain), value, id(node) in indexed))
    return out


def method_receivers(view: FrameView) -> set[str]:
    """The chains the failing statement uses only to call a method on: ``scheduler`` of
    ``scheduler.add_noise(clean, noise)``. What such an object holds is not what the
    call reads (the method's own frame says what it read)."""
    found = failing_statement(view)
    if found is None:
        return set()
    return set(per_statement(receivers, found[0]))


def moved_on_line(view: FrameView) -> set[str]:
    """The chains (as :func:`line_operands` writes them) the failing statement reads
    only through a move to an accelerator: ``stream`` of ``rnn(stream[:, 10:20].to(device),
    state)``. The call gets the moved copy; where the chain itself is does not matter."""
    found = failing_statement(view)
    moves = per_statement(device_moves, found[0]) if found is not None else {}
    if not moves:
        return set()
    moved: set[str] = set()
    other: set[str] = set()
    for node in per_statement(load_chains, found[0]):  # type: ignore[index]
        resolved = resolvable_prefix(node, view.frame)
        if resolved is None:
            continue
        text = chain_text(resolved[0])
        if id(node) not in moves:
            other.add(text)
            continue
        device = moves[id(node)]
        ok, value = safe_value(device, view.frame) if device is not None else (True, "cuda")
        where = probe.device_str(value) if ok else probe.UNKNOWN
        (moved if where not in ("cpu", probe.UNKNOWN) else other).add(text)
    return moved - other


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
        # a class attribute along the MRO (``self.MEAN`` kept by a base class), when
        # it is plain data: a descriptor's value would be user code
        # (a class of a metaclass, ``torch.autograd.Function``'s, is a class too)
        stored = own_attribute(base if issubclass(type(base), type) else type(base), name)
        if stored is not None and probe.class_attribute(type(stored), "__get__") is None:
            return True, stored
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
