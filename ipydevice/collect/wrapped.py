"""Code run by a wrapper (``%%time``, ``%timeit``, ``%%prun``, ``exec``, ``eval``): its source.

A wrapper compiles the user's text under a file name of its own (``<timed exec>``,
``<magic-timeit>``, ``<string>``, ``<timeit-src>``) that no source file or cache
holds, so the frame's line cannot be read and its operands stay unnamed. The text is
still at hand, and never needs running:

* among the string locals of the frames between the user's frame and the wrapped
  code (``cell``, ``expr`` of ``%%time``; ``cmd`` of ``cProfile.runctx``; ``stmt``
  of ``%timeit``);
* among the string arguments of the calls on the calling user line (``exec(src)``,
  ``eval('w + x')``, and the cell IPython rewrote:
  ``get_ipython().run_cell_magic('time', '', 'y = w + x\\n')``).

A candidate is taken when it parses and the statement at the frame's line uses only
names the frame's code object knows (its globals, locals and cells): the text is the
code that runs there, whatever wrapper compiled it. The names resolve in the globals
the code ran with (the frame's own), so nothing else changes for the engine.
"""

from __future__ import annotations

import ast
import dataclasses
import linecache
from types import CodeType

from ipydevice._debug import contain
from ipydevice.code.statements import file_tree, header_nodes, statement_at
from ipydevice.collect import probe
from ipydevice.collect.frames import FrameView, failing_statement, safe_value

__all__ = ["attach_sources", "is_wrapped"]

#: Longest text taken as a wrapped source, and locals read per frame.
_MAX_TEXT = 200_000
_MAX_LOCALS = 64


def is_wrapped(view: FrameView) -> bool:
    """A user frame whose code has a made-up file name no cache holds."""
    filename = view.frame.f_code.co_filename
    if not (view.is_user and filename.startswith("<") and filename.endswith(">")):
        return False
    if filename.startswith(("<ipython-input", "<frozen")):
        return False
    return not linecache.getlines(filename, view.frame.f_globals)


def attach_sources(views: list[FrameView]) -> list[FrameView]:
    """``views`` with the source of each wrapped frame attached (``FrameView.source``)."""
    for index, view in enumerate(views):
        if view.source is None and is_wrapped(view):
            try:
                found = _source_for(views, index)
            except BaseException as caught:
                contain(caught)
                found = None
            if found is not None:
                view.source = found
                line = found[view.lineno - 1].strip() if 0 < view.lineno <= len(found) else ""
                view.summary = dataclasses.replace(view.summary, line=line[:200])
    return views


def _source_for(views: list[FrameView], index: int) -> tuple[str, ...] | None:
    view = views[index]
    code = view.frame.f_code
    for text in _candidates(views, index):
        lines = _as_lines(text)
        if _fits(code, view.lineno, lines):
            return lines
    return None


def _candidates(views: list[FrameView], index: int) -> list[str]:
    """Strings that may be the wrapped code's text, nearest first: the locals of the
    frames between it and the user frame that called it, then that user line's
    string arguments."""
    out: list[str] = []
    caller = index - 1
    while caller >= 0 and not views[caller].is_user:
        out.extend(_string_locals(views[caller]))
        caller -= 1
    if caller >= 0:
        out.extend(_call_arguments(views[caller]))
    # A function the wrapped text defined (``exec("def f(): ...\nf()")``): that text.
    filename = views[index].frame.f_code.co_filename
    for outer in views[:index]:
        if outer.source is not None and outer.frame.f_code.co_filename == filename:
            out.append("".join(outer.source))
    return list(dict.fromkeys(out))


def _string_locals(view: FrameView) -> list[str]:
    """The frame's string locals, then those of its ``self`` (``Timer.src`` of the
    standard library's ``timeit``), read from the instance dict only."""
    try:
        values = list(view.frame.f_locals.values())[:_MAX_LOCALS]
        state = probe.module_dict(view.self_object)
        if type(state) is dict:
            values += list(state.values())[:_MAX_LOCALS]
    except BaseException as caught:
        contain(caught)
        return []
    return [v for v in values if type(v) is str and 0 < len(v) <= _MAX_TEXT]


def _call_arguments(view: FrameView) -> list[str]:
    found = failing_statement(view)
    if found is None:
        return []
    stmt, _ = found
    out: list[str] = []
    for part in header_nodes(stmt):
        for node in ast.walk(part):
            if not isinstance(node, ast.Call):
                continue
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, ast.Constant):
                    value = arg.value
                else:
                    ok, value = safe_value(arg, view.frame)
                    if not ok:
                        continue
                if type(value) is str and 0 < len(value) <= _MAX_TEXT:
                    out.append(value)
    return out


def _as_lines(text: str) -> tuple[str, ...]:
    return tuple(line + "\n" for line in text.splitlines())


def _fits(code: CodeType, lineno: int, lines: tuple[str, ...]) -> bool:
    """The statement at ``lineno`` of ``lines`` reads only names ``code`` knows."""
    if not 0 < lineno <= len(lines):
        return False
    tree = file_tree(code.co_filename, lines)
    if tree is None:
        return False
    stmt = statement_at(tree, lineno)
    if stmt is None:
        return False
    known = {*code.co_names, *code.co_varnames, *code.co_freevars, *code.co_cellvars}
    used = {
        node.id
        for part in header_nodes(stmt)
        for node in ast.walk(part)
        if isinstance(node, ast.Name)
    }
    return bool(used) and used <= known
