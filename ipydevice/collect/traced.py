"""What the code torch.compile traced reads: its globals, closure cells and ``self``.

An error raised while Dynamo traced a function has no live frame of that function:
its failing lines are only named in the message's ``from user code:`` block
(:func:`ipydevice.collect.compiled.user_code_locations`). The function objects are
live, though: Dynamo's own frames hold the callables they trace and inline (the
compiled function, a module and its ``forward``). For each traced location whose
code one of them runs, the names of its failing line are looked up, without
running anything, where that function reads them: its closure cells, its
``__globals__``, and ``self`` for a module's method. They join the scan as operands
of the failing line, so a global tensor (``scale``) or a captured module is named
and moved like an operand of a plain cell.
"""

from __future__ import annotations

import ast
import linecache
import types
from collections.abc import Iterator, Mapping
from typing import Any

from ipydevice._debug import contain
from ipydevice.code.statements import file_tree, load_chains, statement_at
from ipydevice.collect import probe
from ipydevice.collect.frames import FrameView, resolvable_prefix, walk_frames
from ipydevice.collect.paths import Path
from ipydevice.collect.scan import Scan
from ipydevice.model import FrameSummary

__all__ = ["add_traced_operands"]

#: Locals read per Dynamo frame, and callables kept, while looking for the traced code.
_MAX_LOCALS = 64
_MAX_CALLABLES = 256


def add_traced_operands(
    scan: Scan,
    exc: BaseException,
    locations: tuple[FrameSummary, ...],
    namespace: Mapping[str, Any],
) -> None:
    """Adds what the traced ``locations`` read (see module docstring) to ``scan``.

    A closure cell's tensor is reached from the namespace through the function that
    holds it (``g._torchdynamo_orig_callable.__closure__[0].cell_contents`` for
    ``g = torch.compile(make())``): that path is what a move assigns to."""
    if not locations:
        return
    try:
        callables = _traced_callables(exc)
        for location in reversed(locations):  # innermost first, like the frames
            if not location.is_user:
                continue
            for function, owner in callables:
                if _runs(function, location):
                    _add_line(scan, location, _Scope(function, owner, namespace))
                    break
    except BaseException as caught:
        contain(caught)


def _namespace_path(obj: Any, namespace: Mapping[str, Any]) -> Path | None:
    """The namespace name of ``obj`` (a function, or ``self``), or of the compiled
    callable around a function."""
    try:
        items = list(namespace.items()) if type(namespace) is dict else []
    except BaseException as caught:
        contain(caught)
        return None
    for name, value in items:
        if type(name) is not str or name.startswith("_"):
            continue
        if value is obj:
            return (("name", name),)
        if (
            type(value) is types.FunctionType
            and probe.module_dict(value).get("_torchdynamo_orig_callable") is obj
        ):
            return (("name", name), ("attr", "_torchdynamo_orig_callable"))
    return None


def _traced_callables(exc: BaseException) -> list[tuple[types.FunctionType, Any]]:
    """``(function, self or None)`` for the callables Dynamo's frames hold."""
    out: list[tuple[types.FunctionType, Any]] = []
    seen: set[int] = set()
    for view in walk_frames(exc.__traceback__, 10_000):
        if view.is_user:
            continue
        for value in _locals(view):
            for function, owner in _functions_of(value):
                if id(function) not in seen and len(out) < _MAX_CALLABLES:
                    seen.add(id(function))
                    out.append((function, owner))
    return out


def _locals(view: FrameView) -> list[Any]:
    try:
        return list(view.frame.f_locals.values())[:_MAX_LOCALS]
    except BaseException as caught:
        contain(caught)
        return []


def _functions_of(value: Any) -> Iterator[tuple[types.FunctionType, Any]]:
    """A plain function; a bound method's function and ``self``; a module's
    ``forward`` and the module (a compiled module's original too)."""
    kind = type(value)
    if kind is types.FunctionType:
        yield value, None
        original = probe.module_dict(value).get("_torchdynamo_orig_callable")
        if type(original) is types.FunctionType:
            yield original, None
    elif kind is types.MethodType:
        function = value.__func__
        if type(function) is types.FunctionType:
            yield function, value.__self__
    elif probe.is_module(value):
        modules = [value]
        registered = probe.module_dict(value).get("_modules")
        if type(registered) is dict and probe.is_module(registered.get("_orig_mod")):
            modules.append(registered["_orig_mod"])  # torch.compile(module)
        for module in modules:
            forward = probe.class_attribute(type(module), "forward")
            if type(forward) is types.FunctionType:
                yield forward, module


def _runs(function: types.FunctionType, location: FrameSummary) -> bool:
    code = function.__code__
    if code.co_filename != location.filename or code.co_name != location.function.split(".")[-1]:
        return False
    lines = [line for _, _, line in code.co_lines() if line is not None]
    return bool(lines) and min([*lines, code.co_firstlineno]) <= location.lineno <= max(lines)


def _add_line(scan: Scan, location: FrameSummary, scope: _Scope) -> None:
    stmt = _statement(scope.function, location.lineno)
    if stmt is None:
        return
    where = location.function
    for node in load_chains(stmt):
        found = resolvable_prefix(node, scope)  # type: ignore[arg-type]
        if found is None:
            continue
        chain, value = found
        text = ast.unparse(chain)
        entry = scan.add(value, (("local", text),), where, on_line=True, operand=True, user=True)
        path = scope.path_of(chain)
        if entry is not None and not entry.named and path is not None:
            entry.path, entry.named, entry.where = path, True, "namespace"
            entry.alias = text


class _Scope:
    """What a frame of ``function`` would see: ``f_locals`` (its closure cells and
    ``self``) and ``f_globals``, as :func:`~ipydevice.collect.frames.safe_value` reads them."""

    def __init__(
        self, function: types.FunctionType, owner: Any, namespace: Mapping[str, Any]
    ) -> None:
        self.function = function
        #: namespace paths of the local names: a closure variable's, through the
        #: function that holds it; ``self``, when the namespace names it
        self.roots: dict[str, Path] = {}
        root = _namespace_path(function, namespace) if function.__closure__ else None
        names: dict[str, Any] = {}
        cells = function.__closure__ or ()
        for index, (name, cell) in enumerate(
            zip(function.__code__.co_freevars, cells, strict=False)
        ):
            try:
                names[name] = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if root is not None:
                steps = (("attr", "__closure__"), ("item", index), ("attr", "cell_contents"))
                self.roots[name] = (*root, *steps)
        if owner is not None and function.__code__.co_varnames[:1] == ("self",):
            names["self"] = owner
            found = _namespace_path(owner, namespace)
            if found is not None:
                self.roots["self"] = found
        self.f_locals = names
        self.f_globals = function.__globals__

    def path_of(self, chain: ast.AST) -> Path | None:
        """The namespace path of a chain that starts at a local with a root."""
        steps: list[tuple[str, Any]] = []
        while isinstance(chain, (ast.Attribute, ast.Subscript)):
            if isinstance(chain, ast.Attribute):
                steps.append(("attr", chain.attr))
            elif isinstance(chain.slice, ast.Constant):
                steps.append(("item", chain.slice.value))
            else:
                return None
            chain = chain.value
        if not isinstance(chain, ast.Name) or chain.id not in self.roots:
            return None
        return (*self.roots[chain.id], *reversed(steps))


def _statement(function: types.FunctionType, lineno: int) -> ast.stmt | None:
    """The statement at ``lineno`` of the file or cell that defines ``function``."""
    code = function.__code__
    lines = linecache.getlines(code.co_filename, function.__globals__)
    tree = file_tree(code.co_filename, lines) if lines else None
    return statement_at(tree, lineno) if tree is not None else None
