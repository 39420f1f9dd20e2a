"""What the IPython integration displays, as mime bundles: no IPython imported here.

:mod:`ipydevice.integrations.ipython` (the only module that imports IPython) decides *when* to
show something; this module decides *what*:

* :func:`header_bundle`: the compact header a Jupyter kernel shows *before* a device
  error's traceback: the headline, the best fix and a pointer to the full panel
  under the traceback, so that both are on the first screen however long the
  traceback is;
* :func:`panel_bundle`: the full panel, at a verbosity, shown after the traceback;
* :func:`watch_bundle`: watch mode's one short warning;
* :func:`cell_bound_names`, and the helpers that keep and restore the settings.

Every bundle is ``text/plain`` plus escaped ``text/html``: what nbconvert, nbviewer
and GitHub keep. The buttons are a separate widget output (:mod:`ipydevice.render.widget`).
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ipydevice._debug import failure_line

if TYPE_CHECKING:  # pragma: no cover
    from ipydevice.audits.checkup import Checkup
    from ipydevice.model import Diagnosis, Fix
    from ipydevice.settings import Settings

__all__ = [
    "anchor_of",
    "anchored",
    "best_fix",
    "cell_bound_names",
    "cell_exception",
    "cell_id_of",
    "guarded",
    "header_bundle",
    "is_device_error",
    "panel_bundle",
    "pending_header_bundle",
    "watch_bundle",
    "watch_checkup",
]

_T = TypeVar("_T")


def guarded(stage: str, func: Callable[..., _T], *args: Any) -> _T | None:
    """Runs one stage; a failure becomes one line on stderr (or is raised when debugging)."""
    try:
        return func(*args)
    except BaseException as failure:
        # Contained, whatever it is (see ipydevice._debug). A Ctrl-C while
        # ipydevice works stops it: the user's traceback is out already, and
        # letting it through would print ipydevice's and make it sys.last_value.
        print(failure_line(stage, failure), file=sys.stderr)
        return None


# -- settings ------------------------------------------------------------------------------


def settings_in_force() -> Settings | None:
    """The settings in force; ``None`` while :mod:`ipydevice.settings` is not imported
    (nothing can have changed them, so the defaults are in force). Loading does not
    import it: creating its dataclass would cost ``%load_ext`` a millisecond."""
    module = sys.modules.get("ipydevice.settings")
    return None if module is None else module.current()


def restore_settings(saved: Settings | None) -> None:
    """Puts back the settings :func:`settings_in_force` returned."""
    module = sys.modules.get("ipydevice.settings")
    if module is None:  # never imported: the defaults are still in force
        return
    if saved is None:
        saved = module.Settings()
    module.configure(**{f.name: getattr(saved, f.name) for f in dataclasses.fields(saved)})


# -- the cell's exception -----------------------------------------------------------------


def is_device_error(exc: BaseException) -> bool:
    """The cheap pre-filter: a regex over the message chain, no torch needed."""
    from ipydevice.diagnosis import message

    return message.recognise_exception(exc)[1].is_device_error


def cell_exception(result: Any, shown_before: int) -> BaseException | None:
    """The exception a cell raised (``result.error_in_exec``) or, failing that, one it showed.

    ``%run script.py`` and other magics catch the script's exception and show it
    themselves, so ``error_in_exec`` stays empty; ``sys.last_value`` then holds a new
    exception. Only ids are compared (``shown_before``: the id of ``sys.last_value``
    when the cell started, or of the one a nested ``run_cell``'s panel showed): holding
    the previous exception would keep its frames (and tensors) alive while the user
    frees them.
    """
    exc = getattr(result, "error_in_exec", None)
    if exc is not None:
        # (one a nested ``run_cell`` showed already, raised again by the cell around it)
        return exc if id(exc) != shown_before else None
    shown = vars(sys).get("last_value")
    # type(), not isinstance(): sys.last_value may be anything, a lying __class__ too.
    if issubclass(type(shown), BaseException) and id(shown) != shown_before:
        return shown
    return None


def cell_id_of(info: Any, shell: Any) -> str:
    """The front end's id of the cell running: ``info.cell_id`` (the ``ExecutionInfo``
    of ``pre_run_cell``), or in an older IPython the request's own metadata; ''."""
    cell_id = getattr(info, "cell_id", None)
    if not isinstance(cell_id, str):
        parent = getattr(shell, "parent_header", None)
        metadata = parent.get("metadata") if isinstance(parent, dict) else None
        cell_id = metadata.get("cellId") if isinstance(metadata, dict) else None
    return cell_id if isinstance(cell_id, str) else ""


# -- the panel and its header --------------------------------------------------------------


def best_fix(diagnosis: Diagnosis) -> Fix | None:
    """The fix the header shows (the first: fixes come best first)."""
    return diagnosis.fixes[0] if diagnosis.fixes else None


def panel_bundle(
    diagnosis: Diagnosis,
    terminal: bool = False,
    verbosity: str = "Context",
    colors: Any = None,
    headed: bool = False,
) -> dict[str, str]:
    """The full panel at ``verbosity``: plain text and escaped HTML; ``headed`` (at
    ``Context``): a header above the traceback says the headline, and the panel
    does not say it again.

    In terminal IPython the text fits the terminal's width and is coloured as
    IPython's tracebacks are: never under the ``NoColor`` scheme (``colors``, the
    shell's setting) or with ``NO_COLOR``; else on a TTY or with ``FORCE_COLOR``;
    in ASCII where stdout cannot encode its glyphs.
    """
    from ipydevice.render.text import as_verbosity

    level = as_verbosity(verbosity)
    if terminal or level != "context" or headed:
        from ipydevice.integrations.excepthook import terminal_style
        from ipydevice.render.html import render_diagnosis_html
        from ipydevice.render.text import render_diagnosis

        width, color = terminal_style(sys.stdout) if terminal else (100, False)
        if terminal and isinstance(colors, str) and colors.lower() == "nocolor":
            color = False
        headed = headed and level == "context"
        text = render_diagnosis(diagnosis, width, color=color, verbosity=level, headed=headed)
        if terminal:
            from ipydevice.render.layout import for_stream

            text = for_stream(text, sys.stdout)  # an ASCII-only terminal gets ASCII
        page = render_diagnosis_html(diagnosis, verbosity=level, headed=headed)
        return {"text/plain": text, "text/html": anchored(diagnosis, page)}
    return {"text/plain": str(diagnosis), "text/html": anchored(diagnosis, diagnosis._repr_html_())}


#: What the header says when no panel follows the traceback (verbosity Minimal).
MINIMAL_POINTER = "%config IPyDevice.verbosity = 'Context' for the whole report"


#: What the header says while the diagnosis runs (after the traceback), until it is replaced.
PENDING_POINTER = "finding the objects and the fix: they replace this line after the traceback"


def pending_header_bundle(exc: BaseException) -> dict[str, str]:
    """The header a kernel shows before the traceback: what the message says (the
    family, the devices), from no other evidence, so that the traceback is not kept
    waiting; :func:`header_bundle` replaces it in place (``update_display_data``). It
    carries no anchor: no buttons ever attach to it."""
    from ipydevice.diagnosis.message import from_message

    return header_bundle(from_message(exc), pointer=PENDING_POINTER, anchor=False)


def header_bundle(
    diagnosis: Diagnosis,
    panel_below: bool = True,
    pointer: str | None = None,
    anchor: bool = True,
) -> dict[str, str]:
    """The compact header shown before the traceback: the headline, the best fix and
    where the rest is (``panel_below``: the full panel follows the traceback;
    ``anchor``: its fix's buttons may be put beside its code)."""
    from ipydevice.render.html import render_header_html
    from ipydevice.render.text import HEADER_POINTER, render_header

    if pointer is None:
        pointer = HEADER_POINTER if panel_below else MINIMAL_POINTER
    page = render_header_html(diagnosis, pointer=pointer)
    return {
        "text/plain": render_header(diagnosis, pointer=pointer),
        "text/html": anchored(diagnosis, page) if anchor else page,
    }


#: The anchors of the last few diagnoses shown: (diagnosis, anchor), newest last.
_ANCHORS: list[tuple[Any, str]] = []


def anchor_of(diagnosis: Diagnosis) -> str:
    """The token that ties a diagnosis' header and panel outputs to its buttons' widget,
    which puts each fix's buttons beside its code in them (``data-ipydevice-anchor``)."""
    for held, anchor in _ANCHORS:
        if held is diagnosis:
            return anchor
    anchor = os.urandom(6).hex()
    _ANCHORS.append((diagnosis, anchor))
    del _ANCHORS[:-4]
    return anchor


def anchored(diagnosis: Diagnosis, page: str) -> str:
    """``page`` in a ``div`` carrying the diagnosis' anchor (plain HTML, complete alone)."""
    if not page:
        return page
    return (
        f'<div class="ipydevice-output" data-ipydevice-anchor="{anchor_of(diagnosis)}">{page}</div>'
    )


# -- watch mode ----------------------------------------------------------------------------


def watch_bundle(checkup: Checkup) -> dict[str, str]:
    """Watch mode's one short display: a line per problem and its first fix."""
    from html import escape  # lazily: %load_ext stays light

    lines, items = [], []
    for problem, fix in zip(checkup.problems, _fix_per_problem(checkup), strict=True):
        code = fix.code.splitlines()[0] if fix is not None and fix.code else ""
        lines.append(f"ipydevice · watch: `{problem.name}` {problem.why}")
        item = f"<code>{escape(problem.name)}</code> {escape(problem.why)}"
        if code:
            lines.append(f"    {code}")
            item += f' <code style="white-space:pre">{escape(code)}</code>'
        items.append(f"<div>{item}</div>")
    style = (
        "border-left:3px solid #e8590c;padding:2px 8px;margin:2px 0;"
        "font-family:var(--jp-ui-font-family,sans-serif);font-size:13px"
    )
    body = "<b>ipydevice · watch</b>" + "".join(items)
    return {
        "text/plain": "\n".join(lines),
        "text/html": f'<div class="ipydevice-watch" style="{style}">{body}</div>',
    }


def _fix_per_problem(checkup: Checkup) -> list[Any]:
    """The fix of each problem: one each, in order, or the one whose title names it."""
    problems, fixes = checkup.problems, checkup.fixes
    if len(fixes) == len(problems):
        return list(fixes)
    out = []
    for problem in problems:
        named = re.compile(rf"(?<![\w.\[]){re.escape(problem.name)}(?![\w\[])")
        out.append(next((f for f in fixes if named.search(f.title)), None))
    return out


def watch_checkup(shell: Any, result: Any) -> Checkup | None:
    """Watch mode: the names a successful cell bound, checked against the model.

    Cost independent of the model's size: the cell's source is parsed for the names
    it binds, and :func:`ipydevice.audits.watch` reads the device of one parameter of
    the model and of those names' tensors only.
    """
    if not getattr(result, "success", False):
        return None
    raw = getattr(getattr(result, "info", None), "raw_cell", None)
    if not isinstance(raw, str) or not raw.strip():
        return None
    names = cell_bound_names(shell, raw)
    if not names:
        return None
    from ipydevice.audits import checkup as audits

    return audits.watch(shell.user_ns, sorted(names))


def cell_bound_names(shell: Any, raw_cell: str) -> set[str]:
    """The names a cell binds at its top level, from its source (nothing is run).

    The cell is first turned into Python the way IPython does (magics, ``!cmd``)
    with ``shell.transform_cell``; a cell that does not parse binds nothing.
    """
    from ipydevice.code.statements import bound_names

    try:
        source = shell.transform_cell(raw_cell)
        tree = ast.parse(source)
    except (SyntaxError, ValueError, TypeError):
        return set()
    return bound_names(tree)
