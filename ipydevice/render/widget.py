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
``ipydevice-fix`` (a fix's title and code), ``ipydevice-apply`` (Apply buttons),
``ipydevice-copy``, ``ipydevice-insert``, ``ipydevice-details`` (every object,
folded) and ``ipydevice-status`` (the line that reports what a click did).

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

__all__ = ["build_panel", "panel_bundle", "view_bundle"]

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


#: The Copy button's class, made once per anywidget module (making a widget class
#: costs more than a panel's other widgets together).
_COPY_CLASS: dict[int, tuple[Any, type]] = {}


def _copy_button(code: str, layout: Any = None) -> Any:
    """A Copy button, or None when anywidget is not installed."""
    try:
        import anywidget
    except ImportError:
        return None
    made = _COPY_CLASS.get(id(anywidget))
    if made is None or made[0] is not anywidget:
        made = (anywidget, _copy_class(anywidget))
        _COPY_CLASS.clear()
        _COPY_CLASS[id(anywidget)] = made
    return made[1](text=code) if layout is None else made[1](text=code, layout=layout)


def _copy_class(anywidget: Any) -> type:
    import traitlets

    class CopyButton(anywidget.AnyWidget):
        """Copies ``text`` to the clipboard; ``copies`` counts the clicks."""

        # anywidget's own traits, declared on the class: AnyWidget.__init__ would
        # otherwise add them to every instance, each time deriving a new class.
        _esm = traitlets.Unicode(_COPY_ESM).tag(sync=True)
        _anywidget_id = traitlets.Unicode("ipydevice.widget.CopyButton").tag(sync=True)
        text = traitlets.Unicode("").tag(sync=True)
        copies = traitlets.Int(0).tag(sync=True)

        def add_traits(self, **traits: Any) -> None:
            missing = {name: t for name, t in traits.items() if not self.has_trait(name)}
            if missing:  # a trait this class does not declare: anywidget's way
                super().add_traits(**missing)

    return CopyButton


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
    kit = _Kit()
    w = kit.w
    status = kit.html("")
    status.add_class("ipydevice-status")
    say = _reporter(status)
    children: list[Any] = [kit.html(_header_html(diagnosis))]
    for number, fix in enumerate(diagnosis.fixes, 1):
        children.extend(_fix_widgets(kit, number, fix, namespace, insert, say))
    more = _details(kit, diagnosis)
    if more is not None:
        children.append(more)
    children.append(status)
    root = w.VBox(
        children,
        layout=w.Layout(padding="8px 12px", margin="6px 0", border_left=f"4px solid {ACCENT}"),
    )
    root.add_class("ipydevice-panel")
    return root


def view_bundle(panel: Any) -> dict[str, Any]:
    """The widget's display data: a reference to its model.

    What ``Widget._repr_mimebundle_`` returns, without the plain-text ``repr`` of
    every child widget (and their HTML) that it builds only to cut it at 110
    characters; the panel's own text and HTML go beside it.
    """
    return {
        "application/vnd.jupyter.widget-view+json": {
            "version_major": 2,
            "version_minor": 0,
            "model_id": panel.model_id,
        }
    }


class _Kit:
    """Makes one panel's widgets, sharing their empty layout and style models.

    Every widget is a model with its own comm, and a DOM widget brings a Layout
    and a style model of its own: sharing the unstyled ones (a model may have many
    views) makes a panel about half as many comms.
    """

    def __init__(self) -> None:
        import ipywidgets as w

        self.w = w
        self.layout = w.Layout()
        # The style classes are not all exported: the first widget's is shared.
        self.style: Any = None
        self.button_style: Any = None

    def html(self, value: str, layout: Any = None) -> Any:
        layout = layout or self.layout
        if self.style is None:
            made = self.w.HTML(value=value, layout=layout)
            self.style = made.style
            return made
        return self.w.HTML(value=value, layout=layout, style=self.style)

    def button(self, **traits: Any) -> Any:
        if self.button_style is None:
            made = self.w.Button(layout=self.layout, **traits)
            self.button_style = made.style
            return made
        return self.w.Button(layout=self.layout, style=self.button_style, **traits)


def _reporter(status: Any) -> Callable[[str, bool], None]:
    def say(message: str, ok: bool = True) -> None:
        colour = "#2f9e44" if ok else "#e03131"
        mark = f'<span style="color:{colour}">{"✔" if ok else "✘"}</span>'
        status.value = f'<div style="margin-top:4px">{mark} {html.escape(message)}</div>'

    return say


def _header_html(d: Diagnosis) -> str:
    """The static header plus the culprits' rows (the rest is folded below)."""
    culprits = {f.name for f in d.culprits}
    rows = [r for r in ordered_records(d) if r.name in culprits] or ordered_records(d)[:3]
    table = table_html(rows, culprits, len(rows)) if rows else ""
    return f'<div style="{ROOT_STYLE.split(";border-left")[0]}">{header_html(d)}{table}</div>'


def _details(kit: _Kit, d: Diagnosis) -> Any:
    """Every object of the snapshot, folded (an HTML ``<details>``: one widget, not
    an Accordion of four)."""
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
    box = kit.html(body)
    box.add_class("ipydevice-details")
    return box


def _fix_widgets(
    kit: _Kit,
    number: int,
    fix: Fix,
    namespace: Namespace | None,
    insert: Callable[[str], None] | None,
    say: Callable[[str, bool], None],
) -> list[Any]:
    """A fix's title and code (one HTML widget, class ``ipydevice-fix``) and its
    buttons, laid out in the panel's own column: each widget costs a comm, so a
    fix has no box of its own."""
    hint = SCOPE_HINTS.get(fix.scope, fix.scope)
    where = f" · {html.escape(fix.location)}" if fix.location and fix.scope == "source" else ""
    title = f'<b>{number}. {html.escape(fix.title)}</b> <span style="opacity:0.75">({html.escape(hint)}{where})</span>'
    code = textwrap.dedent(fix.code).rstrip()
    buttons = []
    if fix.can_apply and namespace is not None:
        apply = kit.button(
            description="Apply",
            button_style="warning",
            tooltip="Move the live objects now, then re-run the cell",
            icon="check",
        )
        apply.add_class("ipydevice-apply")
        apply.on_click(_guarded(lambda _: _apply(fix, namespace, say), say))
        buttons.append(apply)
    copy = _copy_button(code, kit.layout)
    if copy is not None:
        buttons.append(copy)
    if insert is not None and fix.scope in ("namespace", "cell"):
        add = kit.button(description="Insert", tooltip="Add this code as a new cell", icon="plus")
        add.add_class("ipydevice-insert")
        add.on_click(_guarded(lambda _: _insert(code, insert, say), say))
        buttons.append(add)
    text = kit.html(f'<div style="margin-top:6px">{title}</div>{code_block(code)}')
    text.add_class("ipydevice-fix")
    return [text, kit.w.HBox(buttons, layout=kit.layout)]


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
        bundle.update(view_bundle(build_panel(diagnosis, namespace, insert)))
    bundle["text/plain"] = str(diagnosis)
    bundle["text/html"] = diagnosis._repr_html_()
    return bundle
