"""A diagnosis or an inventory as plain text: for terminals, logs and ``text/plain``.

Deterministic, no ANSI codes unless asked, columns fitted to ``width`` in display
columns (an east-asian wide character takes two, a combining mark none). Takes
model objects only; never touches torch or IPython.

Each fact is said once: the headline names the culprit and where the rest is, the
table lists the objects, a fix says what it does. How much is said is the
``verbosity``: ``minimal`` (the headline and the best fix, a few lines),
``context`` (the panel) or ``verbose`` (every object, the error message, the
frames, every fix and note).
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import textwrap
from collections.abc import Sequence
from typing import Any, Literal, cast, get_args

from ipydevice._debug import env_flag
from ipydevice.model import Diagnosis, Finding, Fix
from ipydevice.render.layout import columns, display_width
from ipydevice.render.layout import cut as _cut
from ipydevice.render.layout import wrap as _wrap
from ipydevice.render.rows import (
    flagged_first,
    record_row,
    row_lines,
    shares_text,
    table_records,
)
from ipydevice.wording import (
    format_bytes,
    plural,
    visible,
    visible_except,
    visible_fields,
    visible_record,
)

# fmt: off
__all__ = [
    "VERBOSITY_LEVELS", "Verbosity", "as_verbosity", "columns", "display_width", "headline",
    "plural", "render_diagnosis", "render_header", "render_inventory", "shares_text", "use_color",
]
# fmt: on

#: How much a report says: the headline and the best fix; the panel; everything.
Verbosity = Literal["minimal", "context", "verbose"]
VERBOSITY_LEVELS: tuple[Verbosity, ...] = get_args(Verbosity)

#: What the user does with a fix of each scope.
SCOPE_HINTS = {
    "namespace": "run once, then re-run the cell",
    "cell": "replace the cell",
    "source": "change the code",
}

#: The pointer a header printed before a traceback ends with.
HEADER_POINTER = "details below the traceback"

_MINIMAL_CODE_LINES = 4
_MAX_FRAMES = 30


def as_verbosity(value: object) -> Verbosity:
    """``value`` as a :data:`Verbosity`, whatever its case (``"Minimal"`` as
    ``%xmode`` writes it gives ``"minimal"``).

    Raises:
        ValueError: not one of the three levels.
    """
    if isinstance(value, str) and value.lower() in VERBOSITY_LEVELS:
        return cast(Verbosity, value.lower())
    raise ValueError(f"verbosity must be one of {', '.join(VERBOSITY_LEVELS)}, not {value!r}")


# -- words -------------------------------------------------------------------------------


def code_name(name: str) -> str:
    """```x``` for a name; ```pos`` in PosEnc.forward` for a frame's local."""
    local, sep, frame = name.partition(" in ")
    return f"`{local}` in {frame}" if sep and frame and " " not in local else f"`{name}`"


def _frame_of(name: str) -> str:
    local, sep, frame = name.partition(" in ")
    return frame if sep and " " not in local else ""


def _names(findings: Sequence[Finding], frame: str = "") -> str:
    """Up to three names as code; ``frame``: the function they are all locals of,
    said once by the caller."""
    names = [
        f"`{f.name.partition(' in ')[0]}`" if frame else code_name(f.name) for f in findings[:3]
    ]
    if len(findings) > 3:
        names.append(f"{len(findings) - 3} more")
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def kind_label(d: Diagnosis) -> str:
    """``device warning`` for warnings and log records, else ``device error``."""
    return "device warning" if d.kind == "warning" else "device error"


def title_parts(d: Diagnosis) -> tuple[str, str]:
    """The report's title: ``ipydevice · device error`` and the kind of error in
    words (``an operation received tensors on different devices``), never the
    family's id."""
    return f"ipydevice · {kind_label(d)}", d.family_title


def _headline_culprits(d: Diagnosis) -> list[Finding]:
    return [f for f in d.culprits if f.rule != "optimizer_state"] or list(d.culprits)


def headline(d: Diagnosis) -> str:
    """The one sentence that names the culprit, where it is and where the rest is.

    What to do is the best fix's title; a diagnosis with culprits but no fix says
    it here (``move it to cuda:0``); one without culprits is the family's advice.
    Invisible characters of names are shown as escapes (:func:`visible`).
    """
    return visible(_headline(d))


def _headline(d: Diagnosis) -> str:
    if not d.is_device_error:
        return f"not a device error ({d.exc_type})"
    if not d.culprits:
        return (
            d.advice
            or f"tensors on {' and '.join(dict.fromkeys(d.devices)) or 'two devices'} met in one operation"
        )
    culprits = _headline_culprits(d)
    devices = ", ".join(sorted({f.device for f in culprits}))
    verb = "is" if len(culprits) == 1 else "are"
    # Locals of one function (a script's or a test's): the function said once, at the end.
    frames = {_frame_of(f.name) for f in culprits} | (
        {_frame_of(d.reference)} if d.reference else set()
    )
    frame = frames.pop() if len(frames) == 1 and len(culprits) + bool(d.reference) > 1 else ""
    reference = f"`{d.reference.partition(' in ')[0]}`" if frame else code_name(d.reference)
    text = f"{_names(culprits, frame)} {verb} on {devices}"
    if culprits[0].rule == "initialised_cuda":  # forked_cuda: no move fixes it
        return f"{text} in the notebook's process: {d.advice}"
    names = {f.name for f in culprits}
    if culprits[0].rule == "meta_model" or d.family == "meta_device":
        text += (
            f": meta tensors hold no data, .to({d.target!r}) cannot copy them" if d.target else ""
        )
    elif d.family == "numpy_conversion":
        text += ": NumPy reads only CPU memory"
    elif culprits[0].rule == "demanded":
        text += (
            f": the error message demands {'it' if len(culprits) == 1 else 'them'} on {d.target}"
        )
    elif culprits[0].rule == "optimizer_state":
        one = len(culprits) == 1
        tensor = one and culprits[0].name.endswith("]")  # one state tensor, not the dict
        text += f", {'its' if one else 'their'} parameter{'' if tensor else 's'} on {d.target}"
    elif d.reference and d.reference not in names:
        text += f", {reference} is on {d.target}"
    elif d.target:
        text += f", the other tensors on {d.target}"
    if frame:
        text += f" (in {frame})"
    if not d.fixes and d.target:
        text += f": move {'it' if len(culprits) == 1 else 'them'} to {d.target}"
    return text


def _is_plain_why(f: Finding) -> bool:
    """The finding says only what the headline, the table and the fix say already."""
    if f.rule in ("meta_model", "optimizer_state", "demanded"):
        return True
    return bool(
        re.fullmatch(r"on \S+, but the computation runs on \S+", f.why)
        or re.fullmatch(r"an? \w+ of its module, on \S+; the computation runs on \S+", f.why)
    )


def why_text(f: Finding) -> str:
    """A finding's ``why`` without the devices the headline gives."""
    return re.sub(
        r"^a plain tensor attribute on \S+: (.*?)(, the model is on \S+)?$",
        r"a plain tensor attribute: \1",
        f.why,
    )


def explanations(d: Diagnosis, verbosity: Verbosity = "context") -> list[tuple[Finding, bool]]:
    """Findings worth a line, with whether each is a culprit: the culprits whose
    ``why`` explains something (a tensor attribute ``.to()`` never moves), then the
    causes; every finding at ``verbose``."""
    # A cause about a culprit, named without the frame that holds it (an audit's
    # ``net.scale`` of the culprit ``net.scale in main``), is said by the culprit's line.
    culprits = {(f.name.partition(" in ")[0], f.device) for f in d.culprits}
    found = [(f, True) for f in d.culprits] + [
        (c, False) for c in d.causes if (c.name.partition(" in ")[0], c.device) not in culprits
    ]
    if verbosity == "verbose":
        return found
    return [(f, is_culprit) for f, is_culprit in found if not is_culprit or not _is_plain_why(f)]


def shows_message(d: Diagnosis) -> bool:
    """The message goes in the report when no traceback shows it (a warning, a
    log record, an exception given to ``diagnose`` without its traceback)."""
    return d.kind == "warning" or not d.frames


def shown_notes(d: Diagnosis) -> list[str]:
    """The notes, each once, less those the headline already says ("meta tensors
    hold no data: ..." under a headline that says meta tensors hold no data)."""
    said = headline(d)
    return [
        note
        for note in dict.fromkeys(d.notes)
        if not (len(lead := note.partition(":")[0].strip()) > 12 and lead in said)
    ]


def failing_module_label(d: Diagnosis) -> str:
    """``model[0] (Linear)`` when the failing module is not already named by the
    headline (the culprit or the model beside it), else ''."""
    if not d.failing_module:
        return ""
    name = d.failing_module.split(" (")[0]
    if name == d.reference or name in {f.name for f in d.culprits}:
        return ""
    return d.failing_module


def fix_title(fix: Fix) -> str:
    """What the fix does (a move that materialises a meta module says so)."""
    title = fix.title
    materialises = (fix.steps and all(s.action == "to_empty" for s in fix.steps)) or (
        not fix.steps and ".to_empty(" in fix.code and ".to_empty(" not in fix.original
    )
    moved = re.fullmatch(r"Move (.+?) to (\S+)(.*)", title, re.DOTALL)
    if materialises and moved:
        title = f"Materialise {moved[1]} on {moved[2]} with to_empty{moved[3]}"
    return title


def fix_hint(fix: Fix) -> str:
    """What to do with the fix, and where (``change the code, file.py:12``)."""
    hint = SCOPE_HINTS.get(fix.scope, fix.scope)
    if fix.location and fix.scope == "source" and fix.location not in fix.title:
        hint += f" at {fix.location}"  # said once: not when the title says where
    return hint


def fix_excerpt(fix: Fix, limit: int = _MINIMAL_CODE_LINES) -> list[str]:
    """The lines a fix adds, for the compact views: a rewritten cell's new lines
    (not the whole cell), at most ``limit`` of them, ``…`` after a cut."""
    code = textwrap.dedent(fix.code).rstrip("\n").splitlines()
    if fix.scope == "cell" and fix.original:
        old = fix.original.rstrip("\n").splitlines()
        added = [
            line
            for tag, _, _, j1, j2 in difflib.SequenceMatcher(a=old, b=code).get_opcodes()
            if tag in ("insert", "replace")
            for line in code[j1:j2]
        ]
        code = textwrap.dedent("\n".join(added)).splitlines() if added else code
    code = [line for line in code if line.strip()]
    return code if len(code) <= limit else [*code[: limit - 1], "…"]


def compact_fix_parts(fix: Fix) -> tuple[str, str]:
    """The best fix in the compact views, where its code is an excerpt, not the
    cell: what it does (``move features to cuda:0``) and what to do with it, ''
    when the title says it (``... in the cell, before the line that failed``)."""
    title = fix_title(fix)
    if title[:1].isupper() and title[1:2].islower():
        title = title[0].lower() + title[1:]
    if fix.scope == "cell":
        return title, "" if "in the cell" in title else "in the cell"
    return title, fix_hint(fix)


def compact_fix_line(fix: Fix) -> str:
    """``move x to cuda:0 [run once, then re-run the cell]``: :func:`compact_fix_parts`
    as one line."""
    title, hint = compact_fix_parts(fix)
    return f"{title} [{hint}]" if hint else title


# -- colour ------------------------------------------------------------------------------


def use_color(color: bool | None = None, stream: Any = None) -> bool:
    """Whether a report gets ANSI colour.

    ``NO_COLOR`` (set and not empty) means never, and wins over everything; an
    explicit ``False`` (IPython's ``NoColor`` scheme) means never; an explicit
    ``True`` (a colour scheme) means yes; ``None`` asks the environment:
    ``FORCE_COLOR`` (on, as ipydevice reads every flag: not empty, ``0``, ``false``,
    ``no`` or ``off``) means yes even when ``stream``
    is not a terminal, else colour only when ``stream`` (default stdout) is a TTY.
    """
    if os.environ.get("NO_COLOR"):
        return False
    if color is not None:
        return color
    if env_flag("FORCE_COLOR"):
        return True
    try:
        return bool((stream if stream is not None else sys.stdout).isatty())
    except Exception:
        return False


class _Style:
    def __init__(self, on: bool) -> None:
        self.bold, self.red, self.dim, self.reset = (
            ("\x1b[1m", "\x1b[31m", "\x1b[2m", "\x1b[0m") if on else ("", "", "", "")
        )


# -- the diagnosis -----------------------------------------------------------------------


def render_diagnosis(
    d: Diagnosis,
    width: int = 100,
    max_rows: int | None = None,
    color: bool | None = False,
    verbosity: Verbosity = "context",
    headed: bool = False,
) -> str:
    """The text report.

    Args:
        d: the diagnosis.
        width: the columns to fit.
        max_rows: object rows shown at ``context`` (default: the ``max_rows``
            setting); ``verbose`` shows them all.
        color: ANSI emphasis, decided by :func:`use_color` (``False``, the default,
            gives plain text; ``None`` asks the environment and stdout).
        verbosity: ``minimal``, ``context`` or ``verbose`` (see the module doc).
        headed: the report follows a header that says the headline (a kernel's,
            above the traceback): the title line without the headline under it.
    """
    verbosity = as_verbosity(verbosity)
    style = _Style(use_color(color))
    d = visible_fields(d)
    if not d.is_device_error:
        return f"ipydevice: {headline(d)}"
    if verbosity == "minimal":
        return "\n".join(_compact_lines(d, width, style))
    from ipydevice.settings import current

    limit = len(d.records) if verbosity == "verbose" else max_rows or current().max_rows
    s = style
    title, kind = title_parts(d)
    out = [f"{s.bold}{title}{s.reset}" + (f": {kind}" if kind else "")]
    if not headed:
        out += [
            f"{s.bold}{s.red}{line}{s.reset}" for line in _wrap(headline(d), width, "  ", "    ")
        ]
    module = failing_module_label(d)
    if module:
        out += _wrap(f"failed in {module}", width, "  ", "    ")
    if d.target_reason:
        out += _wrap(f"target {d.target_reason}", width, "  ", "    ")
    for finding, is_culprit in explanations(d, verbosity):
        mark = "✗" if is_culprit else "·"
        where = f"  [{finding.location}]" if finding.location else ""
        out += _wrap(f"{mark} {finding.name}: {why_text(finding)}{where}", width, "  ", "      ")
    if d.message and (verbosity == "verbose" or shows_message(d)):
        lines = 12 if verbosity == "verbose" else 4
        out += ["", *_wrap(f"{d.exc_type}: {d.message}", width, "  ", "    ")[:lines]]
    out += _table_lines(d, width, limit, verbosity)
    out += _fix_lines(d.fixes, width, s)
    notes = shown_notes(d)
    if notes:
        out += ["", f"  {'Note' if len(notes) == 1 else 'Notes'}"]
        for note in notes:
            out += _wrap(note, width, "    - ", "      ")
    if verbosity == "verbose" and d.frames:
        out += ["", "  Frames (innermost last)"]
        for frame in d.frames[-_MAX_FRAMES:]:
            mark = "›" if frame.is_user else " "
            out += _wrap(
                f"{mark} {frame.filename.rpartition('site-packages/')[2]}:{frame.lineno} in {frame.function}",
                width,
                "    ",
                "      ",
            )
            if frame.line:
                out.append(_cut(f"        {frame.line.strip()}", width))
    return "\n".join(out)


def render_header(
    d: Diagnosis, width: int = 100, color: bool | None = False, pointer: str = HEADER_POINTER
) -> str:
    """The compact block shown before a traceback: the headline, the best fix and
    ``pointer`` (where the rest of the report is); '' for a non-device error."""
    if not d.is_device_error:
        return ""
    lines = _compact_lines(visible_fields(d), width, _Style(use_color(color)))
    return "\n".join([*lines, f"  ({pointer})" if pointer else ""]).rstrip("\n")


def _compact_lines(d: Diagnosis, width: int, s: _Style) -> list[str]:
    """``minimal``: the headline and the best fix, in about six lines."""
    first = _wrap(f"ipydevice · {headline(d)}", width, "", "    ")
    lines = [f"{s.bold}{s.red}{line}{s.reset}" for line in _clip(first, 2, width)]
    if d.fixes:
        fix = d.fixes[0]
        lines += _clip(_wrap(f"fix: {compact_fix_line(fix)}", width, "  ", "    "), 2, width)
        lines += [_cut(f"      {code}", width) for code in fix_excerpt(fix)]
    return lines


def _clip(lines: list[str], count: int, width: int) -> list[str]:
    """The first ``count`` lines, the last marked ``…`` when some were left out
    (whole words dropped to make room for it, never part of one)."""
    if len(lines) <= count:
        return lines
    last = lines[count - 1].rstrip()
    while display_width(last + " …") > width and " " in last.strip():
        last = last.rstrip().rsplit(" ", 1)[0]
    return [*lines[: count - 1], last + " …"]


def _table_lines(d: Diagnosis, width: int, limit: int, verbosity: Verbosity) -> list[str]:
    records = table_records(d, verbosity)
    if not records:
        return []
    shown = records[:limit]
    lines = ["", "  Objects involved"]
    lines += [
        "    " + line
        for line in row_lines(shown, {f.name for f in d.culprits}, width - 4, made_visible=True)
    ]
    if len(records) > limit:
        lines.append(f"    … {len(records) - limit} more (d.table() lists all)")
    return lines


def _fix_lines(fixes: Sequence[Fix], width: int = 100, s: _Style | None = None) -> list[str]:
    """Each fix: its title, what to do with it, its code. Numbered when several."""
    if not fixes:
        return []
    s = s or _Style(False)
    lines = [""]
    if len(fixes) > 1:
        lines.append("  Fixes")
    for number, fix in enumerate(fixes, 1):
        label = f"{number}. " if len(fixes) > 1 else "Fix: "
        indent = "    " if len(fixes) > 1 else "  "
        title = f"{label}{fix_title(fix)}  [{fix_hint(fix)}]"
        lines += [
            f"{s.bold}{line}{s.reset}" for line in _wrap(title, width, indent, indent + "   ")
        ]
        lines.extend(
            indent + "     " + code for code in textwrap.dedent(fix.code).rstrip("\n").splitlines()
        )
    return lines


# -- the inventory and the check ---------------------------------------------------------


def render_inventory(inv: Any, width: int = 100, max_rows: int | None = None) -> str:
    """``%devices`` as text: totals per device, rows grouped by device, problems."""
    from ipydevice.settings import current

    limit = max_rows or current().max_rows
    problem_names = {p.name for p in inv.problems}  # the rows' own names, as they are
    # the rows and problems shown are made visible one by one
    inv = visible_except(inv, "records", "problems")
    if not inv.records:
        return f"ipydevice · {nothing_here(inventory_scope(inv))}"
    total = sum(t.count for t in inv.totals)
    title = f"ipydevice · {plural(len(inv.records), 'object')}" + (
        f" ({', '.join(inv.names)})" if inv.names else ""
    )
    out = [f"{title}, {plural(total, 'tensor')} on {plural(len(inv.totals), 'device')}"]
    out += [
        "  " + line
        for line in columns(
            [[t.device, plural(t.count, "tensor"), format_bytes(t.nbytes)] for t in inv.totals],
            width,
        )
    ]
    shown = 0
    for device, records in flagged_first(inv.by_device(), problem_names).items():
        if shown >= limit:
            break
        rows = [
            [*record_row(r, problem_names, sizes=True)[:-1], visible(r.detail)]
            for r in records[: limit - shown]
        ]
        shown += len(rows)
        out += ["", f"  {visible(device)}", *("    " + line for line in columns(rows, width - 4))]
        if len(records) > len(rows):
            out.append(f"    … {len(records) - len(rows)} more on {visible(device)}")
    if len(inv.records) > shown:
        out.append(f"  … {plural(len(inv.records) - shown, 'more object')} (.table() lists all)")
    if inv.problems:
        out += ["", f"  {'Problem' if len(inv.problems) == 1 else 'Problems'}"]
        for problem in map(visible_record, inv.problems[:limit]):
            out += _wrap(f"✗ {problem.name}: {problem.why}", width, "    ", "        ")
        if len(inv.problems) > limit:
            out.append(f"    … {more_problems(len(inv.problems) - limit)}")
    if inv.notes:
        out += ["", *(f"  note: {n}" for n in inv.notes)]
    return "\n".join(out)


def more_problems(count: int) -> str:
    """What ``%devices`` says of the problems past ``max_rows``."""
    return f"{plural(count, 'more problem')} (.problems lists all)"


def inventory_scope(inv: Any) -> str:
    """Where ``%devices`` looked: ``in the namespace`` or ``in x, y``."""
    return f"in {', '.join(inv.names)}" if inv.names else "in the namespace"


def nothing_here(where: str = "found") -> str:
    """What ``%devices`` and ``check()`` say when there is nothing to look at."""
    return f"no tensors, modules or optimizers {where}"


def checkup_all_clear(checkup: Any) -> str:
    """``no device problems found``, or that there was nothing to check; ``in what
    was read`` where the notes say something was left unread (a wide registry, the
    time budget, a limit)."""
    if getattr(checkup, "checked", -1) == 0 and not checkup.notes:
        return f"nothing to check ({nothing_here()})"
    if checkup.notes:
        return "no device problems found in what was read (see the notes)"
    return "no device problems found"


def render_checkup(checkup: Any, width: int = 100) -> str:
    """``ipydevice.check()`` / ``%devices --check`` as text."""
    checkup = visible_fields(checkup)
    if not checkup.problems:
        head = f"ipydevice · check: {checkup_all_clear(checkup)}"
        return "\n".join([head, *(f"  note: {n}" for n in checkup.notes)])
    out = [f"ipydevice · check: {plural(len(checkup.problems), 'problem')}"]
    for problem in checkup.problems:
        where = f"  [{problem.location}]" if problem.location else ""
        out += _wrap(f"✗ {problem.name}: {problem.why}{where}", width, "  ", "      ")
    out += _fix_lines(checkup.fixes, width)
    out += [f"  note: {n}" for n in checkup.notes]
    return "\n".join(out)
