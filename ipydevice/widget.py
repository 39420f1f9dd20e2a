"""The error panel as an ipywidgets widget, with Apply, Copy and Insert buttons.

Built from a :class:`~ipydevice.model.Diagnosis` (strings only) and a callable that
returns the user's namespace *at click time*, so the widget keeps no tensor alive.
Apply performs a fix with :meth:`Fix.apply` (moves by reference, never runs code)
and reports what it did or why it could not in the status line; an exception in
a callback is shown in the widget, never lost. Copy is a small anywidget button
that writes the snippet to the clipboard. Insert queues the snippet as a new cell
through IPython's ``set_next_input``: Jupyter only inserts cells while a cell
runs, so the status says it appears when the next cell runs.

Stable CSS classes for users and tests: ``ipydevice-panel`` (root),
``ipydevice-apply`` (Apply buttons), ``ipydevice-copy``, ``ipydevice-insert``,
``ipydevice-status`` (the line that reports what a click did).

ipywidgets (and anywidget) are imported here only, when a panel is built.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

from ipydevice.model import Diagnosis, Fix
from ipydevice.render.html import ACCENT, ROOT_STYLE, code_block, header_html, table_html
from ipydevice.render.text import SCOPE_HINTS, ordered_records

__all__ = ["build_panel", "panel_bundle"]

Namespace = Callable[[], Mapping[str, Any]]

_COPY_ESM = """
function render({ model, el }) {
  const button = document.createElement("button");
  button.className = "ipydevice-copy jupyter-button widget-button";
  // Line up with the ipywidgets buttons beside it (same margin, height, width).
  el.style.margin = "var(--jp-widgets-margin, 2px)";
  button.style.margin = "0";
  button.style.height = "var(--jp-widgets-inline-height, 28px)";
  button.style.width = "var(--jp-widgets-inline-width-short, 148px)";
  button.textContent = "Copy";
  button.title = "Copy this code to the clipboard";
  button.onclick = async () => {
    const text = model.get("text");
    try {
      await navigator.clipboard.writeText(text);
    } catch (error) {
      const area = document.createElement("textarea");
      area.value = text;
      document.body.appendChild(area);
      area.select();
      document.execCommand("copy");
      area.remove();
    }
    button.textContent = "Copied";
    model.set("copies", model.get("copies") + 1);
    model.save_changes();
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
  };
  el.appendChild(button);
}
export default { render };
"""


def _copy_button(code: str) -> Any:
    """A Copy button, or None when anywidget is not installed."""
    try:
        import anywidget
        import traitlets
    except ImportError:
        return None

    class CopyButton(anywidget.AnyWidget):  # type: ignore[misc]
        _esm = _COPY_ESM
        text = traitlets.Unicode("").tag(sync=True)
        copies = traitlets.Int(0).tag(sync=True)

    return CopyButton(text=code)


def build_panel(
    diagnosis: Diagnosis,
    namespace: Namespace | None = None,
    insert: Callable[[str], None] | None = None,
) -> Any:
    """The panel widget for ``diagnosis``.

    Args:
        diagnosis: what to show.
        namespace: returns the live namespace when Apply is clicked; without it
            there are no Apply buttons.
        insert: queues code as a new cell (``shell.set_next_input``); without it
            there are no Insert buttons.
    """
    import ipywidgets as w

    status = w.HTML(value="", layout=w.Layout(margin="4px 0 0 0"))
    status.add_class("ipydevice-status")
    say = _reporter(status)
    children: list[Any] = [w.HTML(_header_html(diagnosis))]
    for number, fix in enumerate(diagnosis.fixes, 1):
        children.append(_fix_box(number, fix, namespace, insert, say))
    more = _details(diagnosis)
    if more is not None:
        children.append(more)
    children.append(status)
    root = w.VBox(
        children,
        layout=w.Layout(padding="8px 12px", margin="6px 0", border_left=f"4px solid {ACCENT}"),
    )
    root.add_class("ipydevice-panel")
    return root


def _reporter(status: Any) -> Callable[[str, bool], None]:
    def say(message: str, ok: bool = True) -> None:
        colour = "#2f9e44" if ok else "#e03131"
        status.value = (
            f'<span style="color:{colour}">{"✔" if ok else "✘"}</span> {html.escape(message)}'
        )

    return say


def _header_html(d: Diagnosis) -> str:
    """The static header plus the culprits' rows (the rest is folded below)."""
    culprits = {f.name for f in d.culprits}
    rows = [r for r in ordered_records(d) if r.name in culprits] or ordered_records(d)[:3]
    table = table_html(rows, culprits, len(rows)) if rows else ""
    return f'<div style="{ROOT_STYLE.split(";border-left")[0]}">{header_html(d)}{table}</div>'


def _details(d: Diagnosis) -> Any:
    """Every object of the snapshot, folded (an HTML ``<details>``: one widget, not
    an Accordion of four)."""
    import ipywidgets as w

    records = ordered_records(d)
    if len(records) <= len(d.culprits):
        return None
    table = table_html(records, {f.name for f in d.culprits}, len(records))
    notes = "".join(f'<div style="opacity:0.75">note: {html.escape(n)}</div>' for n in d.notes)
    body = (
        f'<details><summary style="cursor:pointer;font-weight:600">'
        f"All {len(records)} objects involved</summary>"
        f'<div style="overflow-x:auto;max-width:100%">{table}</div>{notes}</details>'
    )
    box = w.HTML(body)
    box.add_class("ipydevice-details")
    return box


def _fix_box(
    number: int,
    fix: Fix,
    namespace: Namespace | None,
    insert: Callable[[str], None] | None,
    say: Callable[[str, bool], None],
) -> Any:
    import ipywidgets as w

    hint = SCOPE_HINTS.get(fix.scope, fix.scope)
    where = f" · {html.escape(fix.location)}" if fix.location and fix.scope == "source" else ""
    title = w.HTML(
        f'<b>{number}. {html.escape(fix.title)}</b> <span style="opacity:0.75">({html.escape(hint)}{where})</span>'
    )
    code = textwrap.dedent(fix.code).rstrip()
    buttons = []
    if fix.can_apply and namespace is not None:
        apply = w.Button(
            description="Apply",
            button_style="warning",
            tooltip="Move the live objects now, then re-run the cell",
            icon="check",
        )
        apply.add_class("ipydevice-apply")
        apply.on_click(_guarded(lambda _: _apply(fix, namespace, say), say))
        buttons.append(apply)
    copy = _copy_button(code)
    if copy is not None:
        buttons.append(copy)
    if insert is not None and fix.scope in ("namespace", "cell"):
        add = w.Button(description="Insert", tooltip="Add this code as a new cell", icon="plus")
        add.add_class("ipydevice-insert")
        add.on_click(_guarded(lambda _: _insert(code, insert, say), say))
        buttons.append(add)
    box = w.VBox(
        [title, w.HTML(code_block(code)), w.HBox(buttons)], layout=w.Layout(margin="6px 0 0 0")
    )
    box.add_class("ipydevice-fix")
    return box


def _guarded(
    callback: Callable[[Any], None], say: Callable[[str, bool], None]
) -> Callable[[Any], None]:
    """Errors in a click show in the status line instead of vanishing."""

    def run(button: Any) -> None:
        try:
            callback(button)
        except Exception as exc:
            try:
                detail = str(exc)
            except Exception:  # an exception whose message cannot be read
                detail = "?"
            say(f"ipydevice could not do that: {type(exc).__name__}: {detail}", False)

    return run


def _apply(fix: Fix, namespace: Namespace, say: Callable[[str, bool], None]) -> None:
    result = fix.apply(namespace())  # the live namespace: reassignments must land in it
    if result.ok:
        say(f"{result.message}. Re-run the cell.", True)
    else:
        say(result.message, False)


def _insert(code: str, insert: Callable[[str], None], say: Callable[[str, bool], None]) -> None:
    insert(code)
    say("queued: Jupyter adds the fix as a new cell when the next cell runs (or copy it)", True)


def panel_bundle(
    diagnosis: Diagnosis,
    namespace: Namespace | None = None,
    insert: Callable[[str], None] | None = None,
    widget: bool = True,
) -> dict[str, Any]:
    """One display output: the widget view (when ``widget``), static HTML and text."""
    bundle: dict[str, Any] = {}
    if widget:
        panel = build_panel(diagnosis, namespace, insert)
        bundle.update(panel._repr_mimebundle_())
    bundle["text/plain"] = str(diagnosis)
    bundle["text/html"] = diagnosis._repr_html_()
    return bundle
