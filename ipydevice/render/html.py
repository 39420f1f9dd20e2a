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

from ipydevice.collect.probe import format_bytes
from ipydevice.model import Diagnosis, Fix, ObjectRecord
from ipydevice.render.text import (
    SCOPE_HINTS,
    headline,
    kind_label,
    ordered_records,
    plural,
    shares_text,
)

__all__ = ["code_block", "header_html", "render_diagnosis_html", "table_html"]

ACCENT = "#e8590c"
ROOT_STYLE = (
    "font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;line-height:1.45;"
    f"color:inherit;border-left:4px solid {ACCENT};background:rgba(232,89,12,0.07);"
    "padding:8px 12px;margin:6px 0;border-radius:0 4px 4px 0;max-width:100%;overflow-x:auto"
)
CELL = "padding:2px 10px 2px 0;text-align:left;vertical-align:top;white-space:nowrap"
CODE = "font-family:var(--jp-code-font-family,ui-monospace,monospace);font-size:12px"
CULPRIT_ROW = "background:rgba(224,49,49,0.12)"
MUTED = "opacity:0.75"
FOLDED_ROWS = 200  # rows inside the folded section; the rest are counted, not rendered


def code_block(code: str) -> str:
    """Escaped code in a ``<pre>``."""
    style = f"{CODE};margin:4px 0 8px 0;padding:6px 8px;background:rgba(127,127,127,0.12);border-radius:3px;white-space:pre;overflow-x:auto"
    return f'<pre class="ipydevice-code" style="{style}"><code>{escape(code)}</code></pre>'


def _inline_code(text: str) -> str:
    """Escapes ``text`` and turns its backquoted names into ``<code>``."""
    parts = re.split(r"`([^`]*)`", text)
    out = []
    for index, part in enumerate(parts):
        out.append(
            f'<code style="{CODE};font-weight:600">{escape(part)}</code>'
            if index % 2
            else escape(part)
        )
    return "".join(out)


def table_html(records: Sequence[ObjectRecord], culprits: set[str], limit: int) -> str:
    """The objects as an HTML table, culprits marked, long tables folded."""
    header = "".join(
        f'<th style="{CELL};font-weight:600">{h}</th>'
        for h in ("", "name", "kind", "device", "shape", "dtype", "size", "where")
    )
    shown, rest = list(records[:limit]), list(records[limit:])
    body = "".join(_row(r, r.name in culprits) for r in shown)
    table = f'<table class="ipydevice-table" style="border-collapse:collapse;margin:6px 0"><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>'
    if rest:
        # Folded rows still cost bytes in the notebook: cap them too.
        folded, hidden = rest[:FOLDED_ROWS], len(rest) - FOLDED_ROWS
        more = "".join(_row(r, r.name in culprits) for r in folded)
        tail = (
            f'<div style="{MUTED}">… {hidden} more (.table() lists all)</div>' if hidden > 0 else ""
        )
        table += (
            f'<details><summary style="cursor:pointer;{MUTED}">{len(rest)} more objects</summary>'
            f'<table style="border-collapse:collapse;margin:6px 0"><tbody>{more}</tbody></table>{tail}</details>'
        )
    return table


def _row(record: ObjectRecord, is_culprit: bool) -> str:
    device = record.device if len(record.shares) <= 1 else shares_text(record)
    cells = [
        "✗" if is_culprit else "",
        f'<code style="{CODE}">{escape(record.name)}</code>',
        escape(record.kind if record.kind != "module" else f"module ({record.type_name})"),
        f"<b>{escape(device or '-')}</b>" if is_culprit else escape(device or "-"),
        escape(record.shape),
        escape(record.dtype),
        escape(format_bytes(record.nbytes)) if record.nbytes else "",
        f'<span style="{MUTED}">{escape(record.where)}</span>',
    ]
    style = f' style="{CULPRIT_ROW}"' if is_culprit else ""
    klass = ' class="ipydevice-culprit"' if is_culprit else ""
    return f"<tr{klass}{style}>" + "".join(f'<td style="{CELL}">{c}</td>' for c in cells) + "</tr>"


def fix_html(number: int, fix: Fix) -> str:
    """One fix: title, scope, location and its code."""
    hint = SCOPE_HINTS.get(fix.scope, fix.scope)
    where = f" · {escape(fix.location)}" if fix.location and fix.scope == "source" else ""
    title = f'<div><b>{number}. {escape(fix.title)}</b> <span style="{MUTED}">({escape(hint)}{where})</span></div>'
    return f'<div class="ipydevice-fix" data-scope="{escape(fix.scope)}">{title}{code_block(textwrap.dedent(fix.code).rstrip())}</div>'


def render_diagnosis_html(d: Diagnosis, limit: int | None = None) -> str:
    """The full static panel."""
    if not d.is_device_error:
        return f'<div class="ipydevice-panel" style="{ROOT_STYLE}">ipydevice: {escape(headline(d))}</div>'
    from ipydevice.settings import current

    limit = limit or current().max_rows
    parts = [header_html(d)]
    records = ordered_records(d)
    if records:
        parts.append(table_html(records, {f.name for f in d.culprits}, limit))
    if d.fixes:
        parts.append('<div style="font-weight:600;margin-top:6px">Fixes</div>')
        parts.extend(fix_html(i, fix) for i, fix in enumerate(d.fixes, 1))
    if d.notes:
        parts.append("".join(f'<div style="{MUTED}">note: {escape(n)}</div>' for n in d.notes))
    return f'<div class="ipydevice-panel" style="{ROOT_STYLE}">{"".join(parts)}</div>'


def header_html(d: Diagnosis) -> str:
    """Title, headline, message, failing module and findings (panel and widget share it)."""
    first_line = d.message.splitlines()[0] if d.message else ""
    parts = [
        f'<div style="font-weight:600">ipydevice · {kind_label(d)} <span style="{MUTED};font-weight:400">({escape(d.family or "")})</span></div>',
        f'<div class="ipydevice-headline" style="font-size:14px;margin:4px 0 2px 0">{_inline_code(headline(d))}</div>',
        f'<div style="{MUTED};{CODE}">{escape(d.exc_type)}: {escape(first_line[:300])}</div>',
    ]
    if d.failing_module:
        parts.append(
            f'<div style="{MUTED}">failed in <code style="{CODE}">{escape(d.failing_module)}</code></div>'
        )
    parts.append(_causes_html(d))
    return "".join(parts)


def _causes_html(d: Diagnosis) -> str:
    culprit_names = {f.name for f in d.culprits}
    items = [*d.culprits, *(c for c in d.causes if c.name not in culprit_names)]
    if not items:
        return ""
    lis = "".join(
        f'<li><code style="{CODE};font-weight:600">{escape(f.name)}</code> on <b>{escape(f.device)}</b>: {escape(f.why)}'
        + (f' <span style="{MUTED}">[{escape(f.location)}]</span>' if f.location else "")
        + "</li>"
        for f in items
    )
    return f'<ul style="margin:6px 0;padding-left:18px">{lis}</ul>'


def render_inventory_html(inv: Any, limit: int | None = None) -> str:
    """``%devices`` as a static panel: totals, a table grouped by device, problems."""
    from ipydevice.settings import current

    limit = limit or current().max_rows
    total = sum(t.count for t in inv.totals)
    title = f"ipydevice · {len(inv.records)} objects" + (
        f" ({', '.join(inv.names)})" if inv.names else ""
    )
    chips = " ".join(
        f'<span style="display:inline-block;margin:2px 6px 2px 0;padding:1px 8px;border-radius:9px;background:rgba(127,127,127,0.15)">'
        f"<b>{escape(t.device)}</b> {plural(t.count, 'tensor')} · {escape(format_bytes(t.nbytes))}</span>"
        for t in inv.totals
    )
    ordered = [r for records in inv.by_device().values() for r in records]
    parts = [
        f'<div style="font-weight:600">{escape(title)}, {plural(total, "tensor")} on {plural(len(inv.totals), "device")}</div>',
        f"<div>{chips}</div>",
        table_html(ordered, {p.name for p in inv.problems}, limit),
    ]
    if inv.problems:
        lis = "".join(
            f'<li><code style="{CODE};font-weight:600">{escape(p.name)}</code>: {escape(p.why)}</li>'
            for p in inv.problems
        )
        parts.append(
            f'<div style="font-weight:600;margin-top:6px">Problems</div><ul style="margin:4px 0;padding-left:18px">{lis}</ul>'
        )
    parts.extend(f'<div style="{MUTED}">note: {escape(n)}</div>' for n in inv.notes)
    return f'<div class="ipydevice-panel ipydevice-inventory" style="{ROOT_STYLE.replace(ACCENT, "#1c7ed6").replace("232,89,12", "28,126,214")}">{"".join(parts)}</div>'


def render_checkup_html(checkup: Any) -> str:
    """``ipydevice.check()`` / ``%devices --check`` as a static panel."""
    style = (
        ROOT_STYLE.replace(ACCENT, "#2f9e44").replace("232,89,12", "47,158,68")
        if not checkup.problems
        else ROOT_STYLE
    )
    if not checkup.problems:
        return f'<div class="ipydevice-panel ipydevice-check" style="{style}">ipydevice · check: no device problems found</div>'
    items = "".join(
        f'<li><code style="{CODE};font-weight:600">{escape(p.name)}</code>: {escape(p.why)}'
        + (f' <span style="{MUTED}">[{escape(p.location)}]</span>' if p.location else "")
        + "</li>"
        for p in checkup.problems
    )
    parts = [
        f'<div style="font-weight:600">ipydevice · check: {escape(plural(len(checkup.problems), "problem"))}</div>',
        f'<ul style="margin:6px 0;padding-left:18px">{items}</ul>',
    ]
    if checkup.fixes:
        parts.append('<div style="font-weight:600;margin-top:6px">Fixes</div>')
        parts.extend(fix_html(i, fix) for i, fix in enumerate(checkup.fixes, 1))
    parts.extend(f'<div style="{MUTED}">note: {escape(n)}</div>' for n in checkup.notes)
    return f'<div class="ipydevice-panel ipydevice-check" style="{style}">{"".join(parts)}</div>'
