"""``torch.compile`` errors that wrap a device mismatch, and how to see the plain error.

Dynamo traces the user's function with fake tensors, so a device mismatch surfaces
as ``torch._dynamo.exc.TorchRuntimeError`` (``Tensor device mismatch`` on 2.13,
``Dynamo failed to run FX node with fake tensors ... Unhandled FakeTensor Device
Propagation`` before), raised from ~30-50 Dynamo frames below the user's call.
The failing line inside the compiled function is only named in the message's
``from user code:`` block: no frame of it is live.

:func:`eager_hint` proposes running the failing call without ``torch.compile``:
the eager run raises the plain error (whose traceback reaches the real line, the
real module and its operands, so the ordinary diagnosis names the culprit) or
runs. Checked on torch 2.13 (``tests/test_compile.py``):

* ``with torch.compiler.set_stance("force_eager"):`` around the failing
  statement (torch >= 2.6) covers every case, including ``model.compile()`` in
  place and compiled functions called deep inside the user's own functions, and
  leaves nothing behind: the next compiled call compiles again.
* ``f._torchdynamo_orig_callable(...)`` for ``f = torch.compile(fn)`` and
  ``m._orig_mod(...)`` for ``m = torch.compile(module)`` (torch >= 2.0) rewrite the
  call itself; nothing else changes.
* Not proposed: ``torch._dynamo.config.patch(disable=True)`` marks the traced code
  object as skipped for good (the compiled function then silently runs eagerly
  after the ``with`` block ends); ``TORCHDYNAMO_DISABLE=1`` is read when
  ``torch.compile`` is called, so it needs the model rebuilt; and
  ``torch.compiler.disable(m)`` does not disable a module compiled in place.

Fixes are ``cell`` fixes (the whole cell rewritten) for notebook cells and
``source`` fixes (the lines of the statement) for files, like
:mod:`ipydevice.fixes.propose`. No code is executed: values on the failing line are read
with :func:`ipydevice.collect.frames.safe_value` (no properties, no ``__getattr__``).
"""

from __future__ import annotations

import ast
import copy
import linecache
import re
import sys
from collections.abc import Mapping
from types import TracebackType
from typing import Any, NamedTuple

from ipydevice._debug import contain, debug_enabled
from ipydevice.code.cells import cell_number, is_generated_source, source_location
from ipydevice.code.rewrite import char_col, parses, replace_span, rewrite_fix, segment
from ipydevice.collect import probe
from ipydevice.collect.frames import (
    FrameView,
    failing_statement,
    is_user_file,
    safe_value,
    walk_frames,
)
from ipydevice.model import Fix, FrameSummary

__all__ = [
    "before_dynamo",
    "eager_hint",
    "is_compile_error",
    "rewritten_fix",
    "user_code_locations",
]

#: Modules whose exceptions only come out of torch.compile.
_COMPILE_MODULES = ("torch._dynamo", "torch._inductor", "torch.compiler", "torch._functorch")
_COMPILE_TYPES = frozenset(
    {"TorchRuntimeError", "BackendCompilerFailed", "InternalTorchDynamoError", "InductorError"}
)
#: Text that only torch.compile prints (for an exception re-raised as a plain one).
_MARKERS = (
    "Dynamo failed to run FX node",
    "from user code:",
    "BackendCompilerFailed",
    "TorchRuntimeError",
    "TORCHDYNAMO_VERBOSE",
    "torch._dynamo",
)
_CHAIN_LIMIT = 8
_FRAME_LIMIT = 10_000
_USER_CODE_RE = re.compile(
    r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)', re.M
)
_STANCE = 'torch.compiler.set_stance("force_eager")'


# -- recognising ---------------------------------------------------------------------


def is_compile_error(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception it wraps) came out of ``torch.compile``.

    Reads the exception types of the chain (``torch._dynamo``, ``torch._inductor``)
    and, for exceptions re-raised as plain ones, Dynamo's own wording
    (``from user code:``, ``Dynamo failed to run FX node``). Never imports torch,
    never raises.
    """
    try:
        return _is_compile_error(exc)
    except BaseException as caught:
        contain(caught)
        return False


def _is_compile_error(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < _CHAIN_LIMIT:
        seen.add(id(current))
        kind = type(current)
        module = probe.class_module(kind)
        if probe.class_name(current) in _COMPILE_TYPES or module.startswith(_COMPILE_MODULES):
            return True
        text = _message(current)
        if any(marker in text for marker in _MARKERS):
            return True
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    return False


def _message(exc: BaseException) -> str:
    try:
        return str(exc)[:20_000]
    except BaseException as caught:
        contain(caught)
        return ""


def user_code_locations(message: str) -> tuple[FrameSummary, ...]:
    """The ``from user code:`` block of a Dynamo message as frame summaries.

    That block is where the traced code really failed (``MLP.forward``'s line, not
    the ``model(x)`` call): the engine can name it and read its source even
    though no frame of it is live. Outermost first, like a traceback.
    """
    text = message if isinstance(message, str) else ""
    start = text.find("from user code:")
    if start < 0:
        return ()
    block = text[start:]
    out = []
    for match in _USER_CODE_RE.finditer(block):
        filename, lineno = match["file"], int(match["line"])
        line_end = block.find("\n", match.end())
        following = block[match.end() + 1 : block.find("\n", line_end + 1)] if line_end >= 0 else ""
        line = following.strip() or linecache.getline(filename, lineno).strip()
        out.append(
            FrameSummary(filename, lineno, match["func"], line[:200], is_user_file(filename))
        )
    return tuple(out)


# -- the call site -------------------------------------------------------------------


def _is_dynamo_file(filename: str) -> bool:
    path = filename.replace("\\", "/")
    return "/torch/_dynamo/" in path or "/torch/compiler/" in path or "/torch/_inductor/" in path


def before_dynamo(views: list[FrameView]) -> list[FrameView]:
    """The frames up to the user's call into ``torch.compile``, Dynamo's own cut off.

    For the engine: Dynamo adds 30-50 frames (more for a compiled module) below
    the user's call, which push the cell's frame out of ``max_frames``, and its
    tracing frames hold FakeTensors, not the user's tensors. Unchanged when no
    Dynamo frame is there.
    """
    for index, view in enumerate(views):
        if _is_dynamo_file(view.summary.filename):
            return views[:index]
    return views


def _call_sites(tb: TracebackType | None) -> tuple[FrameView, FrameView] | None:
    """The user frames before Dynamo's: the outermost statement (the failed cell's
    line, or a script's) and the innermost one (the call of the compiled callable)."""
    views = walk_frames(tb, _FRAME_LIMIT)
    before = before_dynamo(views)
    if len(before) == len(views):
        return None  # no Dynamo frame: not raised by a compiled call
    users = [view for view in before if view.is_user]
    if not users:
        return None
    top = next((v for v in users if v.is_module_level), users[-1])
    return top, users[-1]


def _source_lines(view: FrameView) -> list[str]:
    lines = linecache.getlines(view.frame.f_code.co_filename, view.frame.f_globals)
    return [line if line.endswith("\n") else line + "\n" for line in lines]


def rewritten_fix(
    view: FrameView, lines: list[str], rewritten: list[str], title: str
) -> Fix | None:
    """A :class:`~ipydevice.model.Fix` from a rewrite of the source ``view`` runs.

    A notebook cell is given whole (scope ``cell``); a file gets the smallest span
    of lines that changed (scope ``source``, ``file:line``). None when the result
    does not parse.
    """
    if rewritten == lines or not parses("".join(rewritten)):
        return None
    filename = view.summary.filename
    label = _cell_label(view) if is_generated_source(filename) else ""
    return rewrite_fix(filename, lines, rewritten, title, label)


def _cell_label(view: FrameView) -> str:
    """``In [3]`` for the cell ``view`` runs in (also for a function defined there)."""
    number = cell_number(view.summary.filename)
    return f"In [{number}]" if number is not None else view.label


def _parsed_statement(view: FrameView) -> tuple[ast.stmt, list[str]] | None:
    """The statement running in ``view`` (line numbers of the file) and the file's lines."""
    found = failing_statement(view)
    lines = _source_lines(view)
    if found is None or not lines:
        return None
    stmt, offset = found
    if offset:
        # The parsed tree is cached: never shift it in place. The contexts are shared
        # (see sources.copy_node: a plain deepcopy follows executing's .parent links).
        stmt = copy.deepcopy(
            stmt, {id(n): n for n in ast.walk(stmt) if isinstance(n, ast.expr_context)}
        )
        for node in ast.walk(stmt):
            if hasattr(node, "lineno"):
                node.lineno += offset
                if getattr(node, "end_lineno", None) is not None:
                    node.end_lineno += offset  # type: ignore[attr-defined]
    return stmt, lines


# -- the hints -----------------------------------------------------------------------


def eager_hint(exc: BaseException, namespace: Mapping[str, Any] | None = None) -> tuple[Fix, ...]:
    """Ways to re-run the failing call without ``torch.compile``, to see the plain error.

    Args:
        exc: the exception (its traceback is read; nothing is kept).
        namespace: the user's names (only used to know whether ``torch`` is bound
            where the cell runs); by default the failing frame's globals.

    Returns:
        Up to two fixes, best first, empty when ``exc`` is not a compile error or
        the call site cannot be rewritten: the failing statement wrapped in
        ``torch.compiler.set_stance("force_eager")`` (torch >= 2.6), and the
        compiled callable replaced by the original one on the failing line
        (``m._orig_mod(x)``, ``f._torchdynamo_orig_callable(x)``).
    """
    try:
        return _eager_hint(exc, namespace)
    except BaseException as caught:
        contain(caught)
        # Called from the engine's fix stage: a failure here must not cost the
        # diagnosis its culprits and move fixes.
        if debug_enabled():
            raise
        return ()


def _eager_hint(exc: BaseException, namespace: Mapping[str, Any] | None) -> tuple[Fix, ...]:
    if not is_compile_error(exc):
        return ()
    sites = _call_sites(exc.__traceback__)
    if sites is None:
        return ()
    top, site = sites
    fixes: list[Fix | None] = []
    try:
        parsed = _parsed_statement(top)
        if parsed is not None:
            fixes.append(_stance_fix(top, *parsed, namespace))
        parsed = _parsed_statement(site)
        if parsed is not None:
            elsewhere = site.frame is not top.frame
            fixes.append(_original_callable_fix(site, *parsed, elsewhere=elsewhere))
    finally:
        del top, site, sites
    return tuple(f for f in fixes if f is not None)


def _has_set_stance() -> bool:
    torch = sys.modules.get("torch")
    compiler = getattr(torch, "compiler", None) if torch is not None else None
    return callable(getattr(compiler, "set_stance", None))


def _torch_bound(view: FrameView, namespace: Mapping[str, Any] | None) -> bool:
    torch = sys.modules.get("torch")
    scopes: list[Any] = [view.frame.f_globals]
    if namespace is not None:
        scopes.append(namespace)
    for scope in scopes:
        try:
            if scope.get("torch") is torch:
                return True
        except BaseException as caught:
            contain(caught)
            continue
    return False


def _stance_fix(
    view: FrameView, stmt: ast.stmt, lines: list[str], namespace: Mapping[str, Any] | None
) -> Fix | None:
    """``with torch.compiler.set_stance("force_eager"):`` around the failing statement."""
    if not _has_set_stance() or not _owns_its_lines(stmt, lines) or _multiline_string(stmt):
        return None
    first, last = stmt.lineno - 1, (stmt.end_lineno or stmt.lineno) - 1
    indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
    body = [("    " + line) if line.strip() else line for line in lines[first : last + 1]]
    header = [f"{indent}with {_STANCE}:  # without torch.compile, to see the plain error\n"]
    if not _torch_bound(view, namespace):
        header.insert(0, f"{indent}import torch\n")
    rewritten = lines[:first] + header + body + lines[last + 1 :]
    return rewritten_fix(
        view, lines, rewritten, "Run this line without torch.compile, to see the plain error"
    )


def _owns_its_lines(stmt: ast.stmt, lines: list[str]) -> bool:
    """Nothing else shares the statement's first or last line (``a = 1; b = f(a)``)."""
    first, last = stmt.lineno - 1, (stmt.end_lineno or stmt.lineno) - 1
    if first >= len(lines) or last >= len(lines):
        return False
    before = lines[first][: char_col(lines[first], stmt.col_offset)]
    after = lines[last][char_col(lines[last], stmt.end_col_offset or 0) :]
    return not before.strip() and (not after.strip() or after.strip().startswith("#"))


def _multiline_string(stmt: ast.stmt) -> bool:
    """Indenting the lines would change a string that spans them."""
    return any(
        isinstance(node, (ast.Constant, ast.JoinedStr))
        and (node.end_lineno or node.lineno) != node.lineno
        for node in ast.walk(stmt)
    )


def _original_callable_fix(
    view: FrameView, stmt: ast.stmt, lines: list[str], elsewhere: bool = False
) -> Fix | None:
    """``cm(x)`` -> ``cm._orig_mod(x)``; ``cfn(x)`` -> ``cfn._torchdynamo_orig_callable(x)``."""
    edits: list[tuple[ast.expr, str, str]] = []
    parts = (
        [stmt]
        if not isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With))
        else _headers(stmt)
    )
    for part in parts:
        for node in ast.walk(part):
            if isinstance(node, ast.Call) and isinstance(
                node.func, (ast.Name, ast.Attribute, ast.Subscript)
            ):
                ok, value = safe_value(node.func, view.frame)
                attribute = _original_attribute(value) if ok else None
                if attribute is not None:
                    edits.append((node.func, attribute, segment(lines, node.func)))
    if not edits:
        return None
    # Right to left, bottom to top: earlier positions stay valid.
    edits.sort(key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True)
    rewritten = list(lines)
    for node, attribute, text in edits:
        rewritten = replace_span(rewritten, node, f"{text}.{attribute}")
    names = ", ".join(
        dict.fromkeys(f"{text}.{attribute}" for _, attribute, text in reversed(edits))
    )
    title = f"Call the uncompiled {names} to see the plain error"
    if elsewhere:  # the compiled call is in a function the failed line calls
        title += f" (in {view.label}; then re-run the failed line)"
    return rewritten_fix(view, lines, rewritten, title)


def _headers(stmt: ast.stmt) -> list[ast.AST]:
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.iter]
    if isinstance(stmt, (ast.While, ast.If)):
        return [stmt.test]
    if isinstance(stmt, ast.With):
        return [item.context_expr for item in stmt.items]
    return [stmt]


def _original_attribute(value: Any) -> str | None:
    """Which attribute of a compiled callable holds the original (None if not compiled)."""
    module = probe.class_module(type(value))
    if probe.class_name(value) == "OptimizedModule" and module.startswith("torch._dynamo"):
        state = probe.module_dict(value)
        return "_orig_mod" if "_orig_mod" in state or _registered(state, "_orig_mod") else None
    state = probe.module_dict(value)
    if "_torchdynamo_orig_callable" in state and callable(state["_torchdynamo_orig_callable"]):
        return "_torchdynamo_orig_callable"
    return None


def _registered(state: dict[str, Any], name: str) -> bool:
    modules = state.get("_modules")
    return type(modules) is dict and name in modules


# -- the diagnosis's collector for errors raised while torch.compile traced ------------------


def failing_frames(original: BaseException, exc: BaseException, max_frames: int) -> list[FrameView]:
    """The frames a diagnosis scans: the last ``max_frames`` of ``exc``'s traceback.

    For an error raised while torch.compile traced the code, Dynamo's 30-50 frames
    would push the user's call out of ``max_frames``, and its tracing frames hold
    FakeTensors: the walk stops at the call into torch.compile.
    """
    if not is_compile_error(original):
        return walk_frames(exc.__traceback__, max_frames)
    return before_dynamo(walk_frames(exc.__traceback__, 10_000))[-max_frames:]


class Traced(NamedTuple):
    """What a torch.compile error adds to a diagnosis."""

    fixes: tuple[Fix, ...]
    frames: tuple[FrameSummary, ...] = ()
    notes: tuple[str, ...] = ()


def traced(
    original: BaseException,
    message: str,
    namespace: Mapping[str, Any] | None,
    fixes: tuple[Fix, ...],
    max_fixes: int,
) -> Traced:
    """For an error raised while torch.compile traced the code: the eager re-run
    hint after the move fixes, the user frames Dynamo traced (from its ``message``) and a note saying
    where it failed. Other errors keep their fixes and get nothing more."""
    if not is_compile_error(original):
        return Traced(fixes)
    hints = eager_hint(original, namespace)
    # The move fixes first, then the eager re-run; keep room for one hint.
    room = max(max_fixes - min(len(hints), 1), 1)
    frames = user_code_locations(message)
    where = next((f for f in reversed(frames) if f.is_user), None)
    failed_at = (
        f": it failed at {where.function}, {source_location(where.filename, where.lineno)} (`{where.line}`)"
        if where
        else ""
    )
    note = (
        f"raised while torch.compile traced the code{failed_at}; "
        "run it without torch.compile to see the plain error"
    )
    return Traced(tuple(fixes[:room]) + hints, frames, (note,))
