"""Small, position-exact edits of Python source text.

Used to rewrite a failed cell (insert a move before the failing statement, add
``map_location=`` to ``torch.load``) and to propose source fixes (add ``device=``
to a factory call, ``register_buffer``, ``nn.ModuleList``). Every edit keeps the
rest of the text byte for byte, and every result is checked with ``ast.parse``
before it is offered. Nothing here executes code.
"""

from __future__ import annotations

import ast

__all__ = ["add_keyword", "char_col", "insert_lines_before", "parses", "replace_span", "segment"]


def parses(source: str) -> bool:
    """True when ``source`` is valid Python."""
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


def char_col(line: str, byte_col: int) -> int:
    """AST columns count UTF-8 bytes; strings index characters."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def segment(lines: list[str], node: ast.expr | ast.stmt) -> str:
    """The exact source text of ``node`` (``lines`` keep their newlines)."""
    start, end = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    first = char_col(lines[start], node.col_offset)
    last = char_col(lines[end], node.end_col_offset or 0)
    if start == end:
        return lines[start][first:last]
    return lines[start][first:] + "".join(lines[start + 1 : end]) + lines[end][:last]


def replace_span(lines: list[str], node: ast.expr | ast.stmt, text: str) -> list[str]:
    """``lines`` with ``node``'s text replaced by ``text``."""
    start, end = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    first = char_col(lines[start], node.col_offset)
    last = char_col(lines[end], node.end_col_offset or 0)
    merged = lines[start][:first] + text + lines[end][last:]
    return lines[:start] + merged.splitlines(keepends=True) + lines[end + 1 :]


def insert_lines_before(lines: list[str], stmt: ast.stmt, new: list[str]) -> list[str]:
    """Inserts ``new`` statements before ``stmt``, at its indentation."""
    # ``a = 1; b = f(a)``: when the statement does not start its line, the new
    # lines go before the whole line, which is just as early for ``b``.
    index = stmt.lineno - 1
    line = lines[index]
    indent = line[: len(line) - len(line.lstrip())]
    return lines[:index] + [f"{indent}{text}\n" for text in new] + lines[index:]


def add_keyword(lines: list[str], call: ast.Call, keyword: str) -> list[str]:
    """Adds ``keyword`` (``name=value`` text) as the last argument of ``call``."""
    end_line = (call.end_lineno or call.lineno) - 1
    close = char_col(lines[end_line], call.end_col_offset or 0) - 1
    text = lines[end_line]
    before = text[:close].rstrip()
    if call.args or call.keywords:
        before += " " if before.endswith(",") else ", "
    return [*lines[:end_line], before + keyword + text[close:], *lines[end_line + 1 :]]
