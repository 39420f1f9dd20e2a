"""Small, position-exact edits of Python source text.

Used to rewrite a failed cell (insert a move before the failing statement, add
``map_location=`` to ``torch.load``) and to propose source fixes (add ``device=``
to a factory call, ``register_buffer``, ``nn.ModuleList``). Every edit keeps the
rest of the text byte for byte, and every result is checked with ``ast.parse``
before it is offered. Nothing here executes code.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

from ipydevice.code.cells import source_location
from ipydevice.model import Fix

__all__ = [
    "add_keyword",
    "char_col",
    "drop_device_comments",
    "insert_lines_before",
    "parses",
    "replace_span",
    "rewrite_fix",
    "segment",
]

#: A comment about where a tensor lives, which a rewrite of its device makes stale.
_DEVICE_WORDS = re.compile(r"\b(?:cpu|cuda|gpu|mps|xla|xpu|meta|device|host|accelerator)", re.I)


def parses(source: str) -> bool:
    """True when ``source`` is valid Python, or valid in IPython: a cell given back
    as the user typed it keeps its magic (``%%time``, ``%timeit``) and shell
    (``!ls``) lines, which are read as ``pass`` at their indentation."""
    for text in (source, _magics_as_pass(source)):
        if text is None:
            continue
        try:
            ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        return True
    return False


def _magics_as_pass(source: str) -> str | None:
    lines = source.splitlines()
    masked = [
        line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip()[:1] in ("%", "!") else line
        for line in lines
    ]
    return "\n".join(masked) if masked != lines else None


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


def drop_device_comments(lines: list[str], start: int, end: int) -> list[str]:
    """``lines`` without the comments of lines ``start`` to ``end`` (1-based) that
    speak of a device (``# made on the CPU``): after a rewrite that changes the
    device they would contradict the code. Other comments stay."""
    span = lines[start - 1 : end]
    text = "".join(span)
    if "#" not in text or not _DEVICE_WORDS.search(text):
        return lines  # no comment, or none that could speak of a device: no tokenizer
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return lines
    out = list(lines)
    for token in tokens:
        if token.type == tokenize.COMMENT and _DEVICE_WORDS.search(token.string):
            row, col = token.start
            index = start - 2 + row
            line = out[index]
            kept = line[:col].rstrip()
            if kept:  # a comment alone on its line is the user's note about the block: kept
                out[index] = kept + "\n"
    return out


def rewrite_fix(
    filename: str, lines: list[str], rewritten: list[str], title: str, cell: str = ""
) -> Fix:
    """A rewrite of ``lines`` as a :class:`~ipydevice.model.Fix`: a notebook cell
    (``cell``, its label) is given whole (scope ``cell``); a file gets the smallest span
    of lines that changed (scope ``source``, at ``file:line``)."""
    if cell:
        return Fix(
            title=title,
            code="".join(rewritten).rstrip("\n") + "\n",
            scope="cell",
            location=cell,
            original="".join(lines),
            filename=filename,
            lineno=1,
            end_lineno=len(lines),
        )
    start = 0
    while start < min(len(lines), len(rewritten)) and lines[start] == rewritten[start]:
        start += 1
    end_old, end_new = len(lines), len(rewritten)
    while end_old > start and end_new > start and lines[end_old - 1] == rewritten[end_new - 1]:
        end_old, end_new = end_old - 1, end_new - 1
    if end_old == start:  # pure insertion: show it with the line it precedes
        end_old, end_new = end_old + 1, end_new + 1
    return Fix(
        title=title,
        code="".join(rewritten[start:end_new]),
        scope="source",
        location=source_location(filename, start + 1),
        original="".join(lines[start:end_old]),
        filename=filename,
        lineno=start + 1,
        end_lineno=end_old,
    )
