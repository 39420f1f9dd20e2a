"""Text laid out in display columns: widths that count an east-asian wide character
as two and a combining mark as none, padding, cutting and wrapping at word
boundaries, and text a stream can encode. Standard library only; the text renderers
use it."""

from __future__ import annotations

import codecs
import textwrap
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["columns", "cut", "display_width", "for_stream", "pad", "wrap", "wrap_cell"]

#: The report's own glyphs in ASCII, one column each, so that tables stay aligned.
_ASCII_GLYPHS = str.maketrans(
    {
        "\u00b7": "-",  # the title's middle dot
        "\u2026": "~",  # a cut
        "\u2014": "-",
        "\u00d7": "x",
        "\u2717": "x",
        "\u2718": "x",
        "\u2714": "+",
        "\u203a": ">",
        "\u2501": "=",
        "\uff58": "x",
    }
)


def for_stream(text: str, stream: Any) -> str:
    """``text`` as ``stream`` can write it: unchanged where its encoding (UTF-8
    nearly everywhere) encodes every character; else (``PYTHONIOENCODING=ascii``, a
    Latin-1 console) the report's own glyphs in ASCII and any other character the
    encoding lacks as its backslash escape, never a ``UnicodeEncodeError``."""
    if text.isascii():
        return text
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError):
        encoding = "ascii"
    try:
        text.encode(encoding)
        return text
    except UnicodeEncodeError:
        pass
    degraded = text.translate(_ASCII_GLYPHS)
    return degraded.encode(encoding, "backslashreplace").decode(encoding, "replace")


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal: two for east-asian wide and full-width
    characters, none for combining marks and zero-width characters."""
    if text.isascii():
        return len(text)
    width = 0
    for char in text:
        if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def pad(text: str, width: int) -> str:
    return text + " " * max(width - display_width(text), 0)


def cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` display columns, ``…`` marking the cut."""
    if display_width(text) <= width:
        return text
    out, used = [], 0
    for char in text:
        w = display_width(char)
        if used + w > width - 1:
            break
        out.append(char)
        used += w
    return "".join(out) + "…"


def wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """Word wrap that never breaks names at hyphens (``<ipython-input-3-…>``)."""
    return textwrap.wrap(
        text,
        width,
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
        break_long_words=False,
    )


def wrap_cell(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` display columns, broken at spaces
    only: a word (a name) is never cut, and one wider than ``width`` has a line
    of its own."""
    if display_width(text) <= width:
        return [text]
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        joined = f"{line} {word}" if line else word
        if line and display_width(joined) > width:
            lines.append(line)
            line = word
        else:
            line = joined
    return [*lines, line]


def _longest_word(cells: Sequence[str]) -> int:
    return max((display_width(w) for cell in cells for w in cell.split(" ")), default=0)


def columns(
    rows: Sequence[Sequence[str]], width: int, caps: Mapping[int, int] | None = None
) -> list[str]:
    """Left-aligned columns padded by display width, fitted to ``width``: a column
    is as wide as its widest cell, at most ``caps[i]`` (never narrower than its
    longest word); cells wider than their column, and a last column wider than
    what is left of the line, wrap at spaces onto lines of their own. Nothing is
    cut: a name keeps every character, whole."""
    if not rows:
        return []
    caps = caps or {}
    count = len(rows[0])
    widths = []
    for i in range(count - 1):
        cells = [row[i] for row in rows]
        full = max(display_width(cell) for cell in cells)
        widths.append(max(min(full, caps.get(i, full)), _longest_word(cells)))
    left = width - sum(widths) - 2 * (count - 1)
    last = max(left, _longest_word([row[-1] for row in rows]), 1)
    lines = []
    for row in rows:
        wrapped = [wrap_cell(cell, widths[i]) for i, cell in enumerate(row[:-1])]
        wrapped.append(wrap_cell(row[-1], last))
        for k in range(max(len(c) for c in wrapped)):
            parts = [pad(c[k] if k < len(c) else "", widths[i]) for i, c in enumerate(wrapped[:-1])]
            tail = wrapped[-1][k] if k < len(wrapped[-1]) else ""
            lines.append("  ".join([*parts, tail]).rstrip())
    return lines
