"""The cell as the user typed it, magics included.

IPython runs (and caches for tracebacks) the *transformed* cell: ``%%time`` becomes
``get_ipython().run_cell_magic('time', '', '...')``, ``%time f(x)`` becomes
``get_ipython().run_line_magic('time', 'f(x)')``. A fix that rewrites the cell must
give back the user's own text, magic lines kept. It is found, without running
anything:

1. in IPython's history, when the history's transformed text of that cell number is
   the text that ran (a cell run with ``store_history=False`` is not in it);
2. else by writing the magic calls back as magics, a statement at a time, where the
   call's arguments are plain strings (what IPython's transformer writes).

Line magics keep their line: the raw and the transformed cell have the same lines,
and only the text of those lines differs. IPython is read only when imported already.
"""

from __future__ import annotations

import ast
import sys

from ipydevice._debug import contain
from ipydevice.code.cells import cell_number
from ipydevice.code.statements import iter_statements

__all__ = ["raw_cell", "unmagic"]


def raw_cell(filename: str, lines: list[str]) -> list[str] | None:
    """The raw text of the cell whose transformed ``lines`` ran as ``filename``, or None
    when it is the same text (no magic in it) or cannot be told."""
    ran = "".join(lines)
    if "get_ipython()" not in ran:
        return None
    raw = _from_history(filename, ran)
    if raw is None or not _aligned(raw.splitlines(), ran.splitlines()):
        raw = unmagic(ran)
    if raw is None or raw.rstrip() == ran.rstrip():
        return None
    return [line + "\n" for line in raw.splitlines()]


def _aligned(raw: list[str], ran: list[str]) -> bool:
    """Line for line the cell that ran (the history keeps leading blank lines that
    IPython drops before running): each line is the same, or a magic for a call."""
    if raw and raw[0].startswith("%%"):
        return True  # its body is placed by the code it ran (collect.cell)
    if len(raw) != len(ran):
        return False
    return all(
        typed.rstrip() == done.rstrip()
        or ("get_ipython()" in done and typed.lstrip()[:1] in ("%", "!"))
        for typed, done in zip(raw, ran, strict=True)
    )


def _from_history(filename: str, ran: str) -> str | None:
    number = cell_number(filename)
    ipython = sys.modules.get("IPython")
    if number is None or ipython is None:
        return None
    try:
        history = ipython.get_ipython().history_manager
        parsed, raw = history.input_hist_parsed, history.input_hist_raw
        if not (0 <= number < len(parsed) and number < len(raw)):
            return None
        found_parsed, found_raw = parsed[number], raw[number]
    except BaseException as caught:
        contain(caught)
        return None
    if type(found_parsed) is not str or type(found_raw) is not str:
        return None
    return found_raw if found_parsed.rstrip() == ran.rstrip() else None


def unmagic(text: str) -> str | None:
    """``text`` with IPython's magic calls written back as magics, or None if it does
    not parse. Only whole-line statements of constant strings are written back."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    lines = text.splitlines()
    edits: list[tuple[int, int, list[str]]] = []
    for stmt in iter_statements(tree):
        found = _magic_of(stmt)
        if found is None:
            continue
        first, last = stmt.lineno - 1, (stmt.end_lineno or stmt.lineno) - 1
        indent = lines[first][: stmt.col_offset]
        if lines[first][: stmt.col_offset].strip() or lines[last].rstrip().endswith(";"):
            continue
        kind, name, line, body = found
        if kind != "cell" and first != last:
            continue  # the raw cell keeps the transformed cell's lines
        if kind == "cell":
            if first != 0:
                continue  # a cell magic is only ever the cell's first line
            new = [f"%%{name} {line}".rstrip(), *body.splitlines()]
        elif kind == "line":
            new = [f"{indent}%{name} {line}".rstrip()]
        else:
            new = [f"{indent}!{line}"]
        edits.append((first, last, new))
    for first, last, new in sorted(edits, reverse=True):
        lines[first : last + 1] = new
    return "\n".join(lines) + "\n"


def _magic_of(stmt: ast.stmt) -> tuple[str, str, str, str] | None:
    """``('cell'|'line'|'system', name, line, body)`` for IPython's own magic calls."""
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return None
    call = stmt.value
    func = call.func
    if not (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "get_ipython"
        and not func.value.args
        and not call.keywords
    ):
        return None
    args = [a.value for a in call.args if isinstance(a, ast.Constant) and type(a.value) is str]
    if len(args) != len(call.args):
        return None
    if func.attr == "run_cell_magic" and len(args) == 3:
        return "cell", args[0], args[1], args[2]
    if func.attr == "run_line_magic" and len(args) == 2:
        return "line", args[0], args[1], ""
    if func.attr == "system" and len(args) == 1:
        return "system", "", args[0], ""
    return None
