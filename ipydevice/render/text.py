"""A diagnosis or an inventory as plain text: for terminals, logs and ``text/plain``.

Deterministic, no ANSI codes unless asked, columns fitted to ``width``. Takes model
objects only; never touches torch or IPython.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from ipydevice.collect.probe import format_bytes
from ipydevice.model import Diagnosis, Finding, ObjectRecord

__all__ = ["columns", "headline", "render_diagnosis", "shares_text"]

SCOPE_HINTS = {
    "namespace": "run once, then re-run the cell",
    "cell": "the failed cell, rewritten",
    "source": "change the code",
}


def _names(findings: Sequence[Finding]) -> str:
    names = [f"`{f.name}`" for f in findings[:3]]
    if len(findings) > 3:
        names.append(f"{len(findings) - 3} more")
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def kind_label(d: Diagnosis) -> str:
    """``device warning`` for warnings and log records, else ``device error``."""
    return "device warning" if d.kind == "warning" else "device error"


def headline(d: Diagnosis) -> str:
    """The one sentence that says who is where and what to do."""
    if not d.is_device_error:
        return f"not a device error ({d.exc_type})"
    if not d.culprits:
        return (
            d.advice
            or f"tensors on {' and '.join(dict.fromkeys(d.devices)) or 'two devices'} met in one operation"
        )
    culprits = [f for f in d.culprits if f.rule != "optimizer_state"] or list(d.culprits)
    devices = sorted({f.device for f in culprits})
    verb = "is" if len(culprits) == 1 else "are"
    text = f"{_names(culprits)} {verb} on {', '.join(devices)}"
    if d.reference and d.reference not in {f.name for f in culprits}:
        text += f", `{d.reference}` is on {d.target}"
    pronoun = "it" if len(culprits) == 1 else "them"
    if d.target != "meta" and all(f.device == "meta" for f in culprits):
        return (
            f"{text}: materialise {pronoun} on {d.target} with to_empty (meta tensors hold no data)"
        )
    return f"{text}: move {pronoun} to {d.target}"


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """Word wrap that never breaks names at hyphens (``<ipython-input-3-…>``)."""
    return textwrap.wrap(
        text,
        width,
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
        break_long_words=False,
    )


def plural(count: int, noun: str) -> str:
    """``1 tensor``, ``2 tensors``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def shares_text(record: ObjectRecord) -> str:
    """``cuda:0 ×12 (1.2 GB), cpu ×2 (16 B)`` for a module or container."""
    return ", ".join(f"{s.device} ×{s.count} ({format_bytes(s.nbytes)})" for s in record.shares)


def columns(rows: Sequence[Sequence[str]], width: int) -> list[str]:
    """Left-aligned columns; the last column is cut to fit ``width``."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        line = "  ".join([*cells, row[-1]]).rstrip()
        lines.append(line if len(line) <= width else line[: width - 1] + "…")
    return lines


def record_row(record: ObjectRecord, culprit_names: set[str]) -> list[str]:
    """One table row as strings: mark, name, kind, device, shape, dtype, size, where."""
    mark = "✗" if record.name in culprit_names else " "
    device = record.device if not record.shares or len(record.shares) == 1 else shares_text(record)
    size = format_bytes(record.nbytes) if record.nbytes else ""
    return [
        mark,
        record.name,
        record.kind,
        device or "-",
        record.shape,
        record.dtype,
        size,
        record.where,
    ]


def ordered_records(d: Diagnosis) -> list[ObjectRecord]:
    """Culprits first, then the rest in discovery order."""
    culprit_names = {f.name for f in d.culprits}
    first = [r for r in d.records if r.name in culprit_names]
    return first + [r for r in d.records if r.name not in culprit_names]


def render_diagnosis(
    d: Diagnosis, width: int = 100, max_rows: int | None = None, color: bool = False
) -> str:
    """The full text report; ``color`` adds ANSI emphasis (for terminals only)."""
    if not d.is_device_error:
        return f"ipydevice: {headline(d)}"
    from ipydevice.settings import current

    limit = max_rows or current().max_rows
    bold, red, reset = ("\x1b[1m", "\x1b[31m", "\x1b[0m") if color else ("", "", "")
    out = [f"{bold}ipydevice · {kind_label(d)}{reset} ({d.family})"]
    out += [f"{bold}{red}{line}{reset}" for line in _wrap(headline(d), width, "  ", "    ")]
    out.append("")
    first_line = d.message.splitlines()[0] if d.message else ""
    out += _wrap(f"{d.exc_type}: {first_line}", width, "  ", "    ")[:4]
    if d.failing_module:
        out.append(f"  failed in {d.failing_module}")
    out += _culprit_lines(d, width)
    out += _table_lines(d, width, limit)
    out += _fix_lines(d, width)
    if d.notes:
        out += ["", "  Notes"]
        for note in d.notes:
            out += _wrap(note, width, "    - ", "      ")
    return "\n".join(out)


def _culprit_lines(d: Diagnosis, width: int) -> list[str]:
    findings = list(d.culprits) + [
        c for c in d.causes if c.name not in {f.name for f in d.culprits}
    ]
    if not findings:
        return []
    rows = [
        [
            "✗" if f in d.culprits else "·",
            f.name,
            f.device,
            f.why + (f"  [{f.location}]" if f.location else ""),
        ]
        for f in findings
    ]
    return ["", "  On the wrong device", *("    " + line for line in columns(rows, width - 4))]


def _table_lines(d: Diagnosis, width: int, limit: int) -> list[str]:
    records = ordered_records(d)
    if not records:
        return []
    culprit_names = {f.name for f in d.culprits}
    header = ["", "name", "kind", "device", "shape", "dtype", "size", "where"]
    rows = [header] + [record_row(r, culprit_names) for r in records[:limit]]
    lines = ["", "  Objects involved", *("    " + line for line in columns(rows, width - 4))]
    if len(records) > limit:
        lines.append(f"    … {len(records) - limit} more (d.table() lists all)")
    return lines


def _fix_lines(d: Diagnosis, width: int = 100) -> list[str]:
    if not d.fixes:
        return []
    lines = ["", "  Fixes"]
    for number, fix in enumerate(d.fixes, 1):
        where = f", {fix.location}" if fix.location and fix.scope == "source" else ""
        title = f"{number}. {fix.title}  [{SCOPE_HINTS.get(fix.scope, fix.scope)}{where}]"
        lines += _wrap(title, width, "    ", "       ")
        lines.extend(
            "         " + code for code in textwrap.dedent(fix.code).rstrip("\n").splitlines()
        )
    return lines


def render_inventory(inv: Any, width: int = 100, max_rows: int | None = None) -> str:
    """``%devices`` as text: totals per device, rows grouped by device, problems."""
    from ipydevice.settings import current

    limit = max_rows or current().max_rows
    total = sum(t.count for t in inv.totals)
    title = f"ipydevice · {len(inv.records)} objects" + (
        f" ({', '.join(inv.names)})" if inv.names else ""
    )
    out = [f"{title}, {total} tensors on {len(inv.totals)} devices"]
    out += [
        "  " + line
        for line in columns(
            [[t.device, f"{t.count} tensors", format_bytes(t.nbytes)] for t in inv.totals], width
        )
    ]
    problem_names = {p.name for p in inv.problems}
    shown = 0
    for device, records in inv.by_device().items():
        if shown >= limit:
            break
        rows = [[*record_row(r, problem_names)[:-1], r.detail] for r in records[: limit - shown]]
        shown += len(rows)
        out += ["", f"  {device}", *("    " + line for line in columns(rows, width - 4))]
        if len(records) > len(rows):
            out.append(f"    … {len(records) - len(rows)} more on {device}")
    if len(inv.records) > shown:
        out.append(f"  … {len(inv.records) - shown} more objects (.table() lists all)")
    if inv.problems:
        out += ["", "  Problems"]
        for problem in inv.problems:
            out += _wrap(f"✗ {problem.name}: {problem.why}", width, "    ", "        ")
    if inv.notes:
        out += ["", *(f"  note: {n}" for n in inv.notes)]
    return "\n".join(out)


def render_checkup(checkup: Any, width: int = 100) -> str:
    """``ipydevice.check()`` / ``%devices --check`` as text."""
    if not checkup.problems:
        return "ipydevice · check: no device problems found"
    out = [f"ipydevice · check: {plural(len(checkup.problems), 'problem')}"]
    for problem in checkup.problems:
        where = f"  [{problem.location}]" if problem.location else ""
        out += _wrap(f"✗ {problem.name}: {problem.why}{where}", width, "  ", "      ")
    if checkup.fixes:
        out += ["", "  Fixes"]
        for number, fix in enumerate(checkup.fixes, 1):
            where = f", {fix.location}" if fix.location and fix.scope == "source" else ""
            out += _wrap(
                f"{number}. {fix.title}  [{SCOPE_HINTS.get(fix.scope, fix.scope)}{where}]",
                width,
                "    ",
                "       ",
            )
            out.extend(
                "         " + code for code in textwrap.dedent(fix.code).rstrip("\n").splitlines()
            )
    out += [f"  note: {n}" for n in checkup.notes]
    return "\n".join(out)
