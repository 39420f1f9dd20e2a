"""A diagnosis or an inventory as static HTML: escaped, inline styles, no script.

This is what nbconvert exports, static viewers and frontends without a widget
manager show. Every name, key, message and code line goes through
:func:`html.escape`; styles are inline (a ``<style>`` tag may not survive a
sanitizer) and use ``inherit`` and translucent colours so that light and dark
themes both stay readable. The root carries the ``ipydevice-panel`` class.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from html import escape
from typing import Any

from ipydevice.model import Diagnosis, Fix, ObjectRecord
from ipydevice.render.rows import (
    device_text,
    flagged_first,
    row_lines,
    shows_where,
    table_records,
)
from ipydevice.render.text import (
    HEADER_POINTER,
    Verbosity,
    as_verbosity,
    checkup_all_clear,
    compact_fix_parts,
    explanations,
    failing_module_label,
    fix_excerpt,
    fix_hint,
    fix_title,
    headline,
    inventory_scope,
    more_problems,
    nothing_here,
    plural,
    shown_notes,
    shows_message,
    title_parts,
    why_text,
)
from ipydevice.wording import format_bytes, visible_except, visible_fields, visible_record

__all__ = [
    "Verbosity",
    "code_block",
    "header_html",
    "panel_top_html",
    "render_apply_result_html",
    "render_diagnosis_html",
    "render_header_html",
    "table_html",
]

ACCENT = "#e8590c"
#: Translucent colours are written ``#rrggbbaa`` (``12`` is 0.07, ``1f`` 0.12, ``26``
#: 0.15): the same colour as ``rgba()`` to the 8 bits a browser keeps, in fewer bytes.
#: The code font, written once on each panel's root inside ``--ipydevice-font`` (the
#: inline names' 12px shorthand, :data:`INLINE`), which every name and code block inside
#: it reads (:data:`CODE`): 26 bytes a use instead of 60.
CODE_FONT = "var(--jp-code-font-family,ui-monospace,monospace)"
ROOT_STYLE = (
    "font:13px/1.45 var(--jp-ui-font-family,system-ui,sans-serif);"
    f"border-left:4px solid {ACCENT};background:{ACCENT}12;padding:8px 12px;"
    "margin:6px 0;border-radius:0 4px 4px 0;box-sizing:border-box;width:100%;overflow-x:auto;"
    # Inline names' font (:data:`INLINE`): JupyterLab's code line height where it has one,
    # as its ``code`` rule gives them; else normal, the same pixels as the inherited one.
    f"--ipydevice-font:12px/var(--jp-code-line-height,normal) {CODE_FONT}"
)
#: The object table is a CSS grid of rows, not a ``<table>``: a notebook's own table
#: rules (JupyterLab's ``.jp-RenderedHTMLCommon td``: right-aligned, padded, middle)
#: override anything a cell inherits, so a ``<td>`` needs its whole style inline
#: (80 bytes a cell, 11 kB a panel); a ``<span>`` inherits it from the grid once. Each
#: row is a subgrid (its columns the grid's), so that a row carries its background:
#: JupyterLab's stripes, header rule and table text (colour, size) are its own
#: variables, which mean nothing (no background, no rule, the panel's text) where
#: they are not defined. In a narrow notebook (820 px with the file browser open leaves
#: the output about 360 px) the columns shrink rather than the table scrolling sideways:
#: each keeps a few characters (:data:`GRID_COLUMNS`), a cell wraps at its spaces, and a
#: word wider than its column breaks.
GRID_COLUMNS = (
    "auto minmax(9ch,max-content) repeat(4,minmax(6ch,max-content)) minmax(4ch,max-content)"
)
GRID = (
    f"display:grid;grid:none/{GRID_COLUMNS} minmax(8ch,max-content);justify-content:start;"
    "column-gap:5px;margin:6px 0;line-height:normal;white-space:normal;overflow-wrap:anywhere;"
    "color:var(--jp-ui-font-color1);font-size:var(--jp-ui-font-size1)"
)
ROW = "display:grid;grid-column:1/-1;grid:none/subgrid;padding:2px 2px 2px 0"
HEAD_ROW = (
    f"{ROW};font-weight:600;border-bottom:var(--jp-border-width) solid var(--jp-border-color1)"
)
#: JupyterLab's stripes (``tbody tr:nth-child(odd)`` / ``(even)``), first row odd.
STRIPES = (
    "background:var(--jp-layout-color0)",
    "background:var(--jp-rendermime-table-row-background)",
)
#: Names and frames wrap at spaces (``pos in PosEnc.forward``), never inside a word.
WRAPS = "white-space:normal"
#: Inside a root of :data:`ROOT_STYLE` only (every ``render_*`` function's output).
#: The code font at 12px, the panel's line height kept (the shorthand would set the
#: inline names' one): code blocks, the folded rows, frames.
CODE = "font:var(--ipydevice-font);line-height:inherit"
#: An inline name's font (:data:`CODE` as one shorthand, 30 bytes less a name); the
#: shorthand also sets weight and line-height, so a bold name says its weight after it.
INLINE = "font:var(--ipydevice-font)"
CULPRIT_ROW = "background:#e031311f"
MUTED = "opacity:.75"
FOLDED_ROWS = 200  # rows inside the folded section; the rest are counted, not rendered
#: The folded rows' ``<pre>``: the code font, the table's colour, scrolling sideways
#: past :data:`FOLDED_WIDTH` columns rather than wrapping.
FOLDED = (
    f"{CODE};color:var(--jp-ui-font-color1);margin:4px 0;padding:0;white-space:pre;overflow-x:auto"
)
FOLDED_WIDTH = 120


def code_block(code: str) -> str:
    """Escaped code in a ``<pre>``, with no ``<code>`` inside: the notebook's inline-code
    style (its own background and padding) would give each line a strip in the block."""
    style = f"{CODE};margin:4px 0 8px 0;padding:6px 8px;background:#7f7f7f1f;border-radius:3px;white-space:pre-wrap;overflow-wrap:anywhere"
    return f'<pre class="ipydevice-code" style="{style}">{escape(code)}</pre>'


def _inline_code(text: str) -> str:
    """Escapes ``text`` and turns its backquoted names into ``<code>``: the words
    ipydevice writes (headlines, reasons, findings, notes) quote names the
    Markdown way, and no backquote reaches the HTML raw."""
    parts = re.split(r"`([^`]*)`", text)
    out = []
    for index, part in enumerate(parts):
        out.append(
            f'<code style="{INLINE};font-weight:600">{escape(part)}</code>'
            if index % 2
            else escape(part)
        )
    return "".join(out)


def table_html(
    records: Sequence[ObjectRecord],
    culprits: set[str],
    limit: int,
    sizes: bool = False,
    made_visible: bool = False,
) -> str:
    """The objects as a grid of rows, culprits marked, long tables folded (``sizes``:
    each device's bytes for an object on several, as ``%devices`` shows them;
    ``made_visible``: the rows are visible copies already, a diagnosis')."""
    shown, rest = list(records[:limit]), list(records[limit:])
    # Folded rows still cost bytes in the notebook: cap them too.
    folded, hidden = rest[:FOLDED_ROWS], len(rest) - FOLDED_ROWS
    where = shows_where(shown + folded)
    heads = ("", "name", "kind", "device", "shape", "dtype", "size", "where")
    header = "".join(f"<span>{h}</span>" for h in heads[: None if where else -1])
    grid = GRID if where else GRID.replace(" minmax(8ch,max-content);", ";", 1)
    body = "".join(
        _row(r, i, r.name in culprits, sizes, where, made_visible) for i, r in enumerate(shown)
    )
    table = f'<div class="ipydevice-table" style="{grid}"><div style="{HEAD_ROW}">{header}</div>{body}</div>'
    if rest:
        # Folded rows as the text report writes them, in one escaped <pre>: about 80
        # bytes a row where a styled grid row takes 450.
        more = "\n".join(row_lines(folded, culprits, FOLDED_WIDTH, sizes, where, made_visible))
        tail = (
            f'<div style="{MUTED}">… {hidden} more (.table() lists all)</div>' if hidden > 0 else ""
        )
        table += (
            f'<details><summary style="cursor:pointer;{MUTED}">{plural(len(rest), "more object")}</summary>'
            f'<pre class="ipydevice-folded" style="{FOLDED}">{escape(more)}</pre>{tail}</details>'
        )
    return table


def _row(
    record: ObjectRecord,
    index: int,
    is_culprit: bool,
    sizes: bool = False,
    where: bool = True,
    made_visible: bool = False,
) -> str:
    """One row: eight cells (seven without ``where``), the name and where wrapping at
    spaces (where's ``<span>`` is its cell; the name's ``<code>`` sits in one, inline,
    as the notebook styles it); ``index`` picks the row's stripe."""
    if not made_visible:
        record = visible_record(record)
    device = device_text(record, sizes)
    plain = [
        escape(record.kind if record.kind != "module" else f"module ({record.type_name})"),
        f"<b>{escape(device)}</b>" if is_culprit else escape(device),
        escape(record.shape),
        escape(record.dtype),
        escape(format_bytes(record.nbytes)) if record.nbytes else "",
    ]
    cells = (
        f"<span>{'✗' if is_culprit else ''}</span>"
        f'<span><code style="{INLINE};{WRAPS}">{escape(record.name)}</code></span>'
        + "".join(f"<span>{c}</span>" for c in plain)
        + (f'<span style="{MUTED};{WRAPS}">{escape(record.where)}</span>' if where else "")
    )
    if is_culprit:
        return f'<div class="ipydevice-culprit" style="{ROW};{CULPRIT_ROW}">{cells}</div>'
    return f'<div style="{ROW};{STRIPES[index % 2]}">{cells}</div>'


def fix_html(number: int, fix: Fix, numbered: bool = True) -> str:
    """One fix: what it does, what to do with it, its code."""
    label = f"{number}. " if numbered else "Fix: "
    title = (
        f"<div><b>{escape(label)}{_inline_code(fix_title(fix))}</b>"
        f' <span style="{MUTED}">({escape(fix_hint(fix))})</span></div>'
    )
    return f'<div class="ipydevice-fix" data-scope="{escape(fix.scope)}">{title}{code_block(textwrap.dedent(fix.code).rstrip())}</div>'


def fixes_html(fixes: Sequence[Fix]) -> str:
    """Every fix, numbered when there are several, under "Fix" or "Fixes"."""
    if not fixes:
        return ""
    if len(fixes) == 1:
        return fix_html(1, fixes[0], numbered=False)
    return '<div style="font-weight:600;margin-top:6px">Fixes</div>' + "".join(
        fix_html(i, fix) for i, fix in enumerate(fixes, 1)
    )


def render_diagnosis_html(
    d: Diagnosis, limit: int | None = None, verbosity: Verbosity = "context", headed: bool = False
) -> str:
    """The static panel: ``minimal`` is the headline and the best fix, ``context``
    the panel, ``verbose`` adds every object, the error message and the frames.
    ``headed``: the panel follows a header that says the headline (a kernel's,
    above the traceback), so it says its title without the headline."""
    verbosity = as_verbosity(verbosity)
    d = visible_fields(d)
    if not d.is_device_error:
        return f'<div class="ipydevice-panel" style="{ROOT_STYLE}">ipydevice: {escape(headline(d))}</div>'
    if verbosity == "minimal":
        return _compact_html(d, "ipydevice-panel ipydevice-minimal", "")
    from ipydevice.settings import current

    records = table_records(d, verbosity)
    limit = len(records) if verbosity == "verbose" else limit or current().max_rows
    parts = [panel_top_html(d, verbosity, headed)]
    if records:
        parts.append(table_html(records, {f.name for f in d.culprits}, limit, made_visible=True))
    parts.append(fixes_html(d.fixes))
    parts.extend(f'<div style="{MUTED}">note: {_inline_code(n)}</div>' for n in shown_notes(d))
    if verbosity == "verbose":
        parts.append(_frames_html(d))
    return f'<div class="ipydevice-panel" data-verbosity="{verbosity}" style="{ROOT_STYLE}">{"".join(parts)}</div>'


def render_header_html(d: Diagnosis, pointer: str = HEADER_POINTER) -> str:
    """The compact block shown before a traceback: the headline, the best fix's
    title and the lines it adds, and ``pointer`` (where the panel is); '' for a
    non-device error."""
    if not d.is_device_error:
        return ""
    return _compact_html(visible_fields(d), "ipydevice-header", pointer)


def _compact_html(d: Diagnosis, klass: str, pointer: str) -> str:
    parts = [
        f'<div class="ipydevice-headline" style="font-size:14px"><b>ipydevice</b> · {_inline_code(headline(d))}</div>'
    ]
    if d.fixes:
        fix = d.fixes[0]
        title, hint = compact_fix_parts(fix)
        parts.append(
            f'<div style="margin-top:2px">fix: {_inline_code(title)}'
            + (f' <span style="{MUTED}">({escape(hint)})</span>' if hint else "")
            + "</div>"
        )
        parts.append(code_block("\n".join(fix_excerpt(fix))))
    if pointer:
        parts.append(f'<div class="ipydevice-pointer" style="{MUTED}">{escape(pointer)}</div>')
    style = ROOT_STYLE.replace("padding:8px 12px", "padding:6px 12px")
    return f'<div class="{klass}" style="{style}">{"".join(parts)}</div>'


def panel_top_html(d: Diagnosis, verbosity: Verbosity = "context", headed: bool = False) -> str:
    """Title, headline, the failing module when the headline does not name it, and
    the findings that explain something (the panel and the widget share it);
    ``headed``: no headline (a header above says it)."""
    d = visible_fields(d)
    title, kind = title_parts(d)
    parts = [
        f'<div class="ipydevice-title" style="font-weight:600">{escape(title)}'
        + (f'<span style="font-weight:400">: {escape(kind)}</span>' if kind else "")
        + "</div>"
    ]
    if not headed:
        parts.append(
            f'<div class="ipydevice-headline" style="font-size:14px;margin:4px 0 2px 0">{_inline_code(headline(d))}</div>'
        )
    module = failing_module_label(d)
    if module:
        parts.append(
            f'<div style="{MUTED}">failed in <code style="{INLINE}">{escape(module)}</code></div>'
        )
    if d.target_reason:
        parts.append(
            f'<div class="ipydevice-target" style="{MUTED}">target {_inline_code(d.target_reason)}</div>'
        )
    if d.message and (verbosity == "verbose" or shows_message(d)):
        message = d.message if verbosity == "verbose" else d.message.splitlines()[0][:300]
        parts.append(
            f'<div style="{MUTED};{CODE};white-space:pre-wrap">{escape(d.exc_type)}: {escape(message)}</div>'
        )
    parts.append(_causes_html(d, verbosity))
    return "".join(parts)


#: The name the widget imports.
header_html = panel_top_html


def _causes_html(d: Diagnosis, verbosity: Verbosity = "context") -> str:
    items = explanations(d, verbosity)
    if not items:
        return ""
    lis = "".join(
        f'<li><code style="{INLINE};font-weight:600">{escape(f.name)}</code>: {_inline_code(why_text(f))}'
        + (f' <span style="{MUTED}">[{escape(f.location)}]</span>' if f.location else "")
        + "</li>"
        for f, _ in items
    )
    return f'<ul style="margin:6px 0;padding-left:18px">{lis}</ul>'


def _frames_html(d: Diagnosis) -> str:
    if not d.frames:
        return ""
    rows = "".join(
        f'<div style="{CODE}{"" if f.is_user else ";" + MUTED}">{escape(f.filename.rpartition("site-packages/")[2])}:{f.lineno} in {escape(f.function)}'
        + (f"<br>&nbsp;&nbsp;&nbsp;&nbsp;{escape(f.line.strip())}" if f.line else "")
        + "</div>"
        for f in d.frames[-30:]
    )
    return f'<details><summary style="cursor:pointer;{MUTED}">Frames (innermost last)</summary>{rows}</details>'


def render_inventory_html(inv: Any, limit: int | None = None) -> str:
    """``%devices`` as a static panel: totals, a table grouped by device, problems."""
    from ipydevice.settings import current

    limit = limit or current().max_rows
    problem_names = {p.name for p in inv.problems}  # the rows' own names, as they are
    # the rows and problems shown are made visible one by one
    inv = visible_except(inv, "records", "problems")
    style = ROOT_STYLE.replace(ACCENT, "#1c7ed6")
    if not inv.records:
        empty = escape(nothing_here(inventory_scope(inv)))
        return f'<div class="ipydevice-panel ipydevice-inventory" style="{style}">ipydevice · {empty}</div>'
    total = sum(t.count for t in inv.totals)
    title = f"ipydevice · {plural(len(inv.records), 'object')}" + (
        f" ({', '.join(inv.names)})" if inv.names else ""
    )
    chips = " ".join(
        f'<span style="display:inline-block;margin:2px 6px 2px 0;padding:1px 8px;border-radius:9px;background:#7f7f7f26">'
        f"<b>{escape(t.device)}</b> {plural(t.count, 'tensor')} · {escape(format_bytes(t.nbytes))}</span>"
        for t in inv.totals
    )
    groups = flagged_first(inv.by_device(), problem_names)
    ordered = [r for records in groups.values() for r in records]
    parts = [
        f'<div style="font-weight:600">{escape(title)}, {plural(total, "tensor")} on {plural(len(inv.totals), "device")}</div>',
        f"<div>{chips}</div>",
        table_html(ordered, problem_names, limit, sizes=True),
    ]
    if inv.problems:
        lis = "".join(
            f'<li><code style="{INLINE};font-weight:600">{escape(p.name)}</code>: {_inline_code(p.why)}</li>'
            for p in map(visible_record, inv.problems[:limit])
        )
        if len(inv.problems) > limit:
            lis += f'<li style="list-style:none;{MUTED}">… {escape(more_problems(len(inv.problems) - limit))}</li>'

        parts.append(
            f'<div style="font-weight:600;margin-top:6px">{"Problem" if len(inv.problems) == 1 else "Problems"}</div><ul style="margin:4px 0;padding-left:18px">{lis}</ul>'
        )
    parts.extend(f'<div style="{MUTED}">note: {_inline_code(n)}</div>' for n in inv.notes)
    return (
        f'<div class="ipydevice-panel ipydevice-inventory" style="{style}">{"".join(parts)}</div>'
    )


def render_checkup_html(checkup: Any) -> str:
    """``ipydevice.check()`` / ``%devices --check`` as a static panel."""
    checkup = visible_fields(checkup)
    style = ROOT_STYLE.replace(ACCENT, "#2f9e44") if not checkup.problems else ROOT_STYLE
    if not checkup.problems:
        notes = "".join(
            f'<div style="{MUTED}">note: {_inline_code(n)}</div>' for n in checkup.notes
        )
        return f'<div class="ipydevice-panel ipydevice-check" style="{style}">ipydevice · check: {escape(checkup_all_clear(checkup))}{notes}</div>'
    items = "".join(
        f'<li><code style="{INLINE};font-weight:600">{escape(p.name)}</code>: {_inline_code(p.why)}'
        + (f' <span style="{MUTED}">[{escape(p.location)}]</span>' if p.location else "")
        + "</li>"
        for p in checkup.problems
    )
    parts = [
        f'<div style="font-weight:600">ipydevice · check: {escape(plural(len(checkup.problems), "problem"))}</div>',
        f'<ul style="margin:6px 0;padding-left:18px">{items}</ul>',
    ]
    parts.append(fixes_html(checkup.fixes))
    parts.extend(f'<div style="{MUTED}">note: {_inline_code(n)}</div>' for n in checkup.notes)
    return f'<div class="ipydevice-panel ipydevice-check" style="{style}">{"".join(parts)}</div>'


def render_apply_result_html(result: Any) -> str:
    """What Apply did (an :class:`~ipydevice.model.ApplyResult`), as the button's status
    line says it: green with a tick when every move was made, else the panel's colour."""
    colour, mark = ("#2f9e44", "✓") if result.ok else (ACCENT, "✗")
    style = ROOT_STYLE.replace(ACCENT, colour).replace("padding:8px 12px", "padding:4px 12px")
    return f'<div class="ipydevice-applied" style="{style}">{mark} {escape(str(result))}</div>'
