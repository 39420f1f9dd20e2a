"""The panel's buttons: Apply, Copy and Insert for each fix, as one small anywidget.

The panel's words (headline, culprits, objects, fixes' code) are a plain
``display_data`` output (``text/html`` and ``text/plain``) that every viewer and
exporter keeps; this widget is a second output beside it holding the buttons
only, so a viewer without a widget manager (nbconvert's default HTML export,
nbviewer, GitHub) loses nothing but the buttons.

Built from a :class:`~ipydevice.model.Diagnosis` (strings only) and a callable that
returns the user's namespace *at click time*, so the widget keeps no tensor alive.

* **Apply** sends a message to the kernel, which performs the fix with
  :meth:`Fix.apply` (moves by reference, never runs code) and reports what it did,
  or why it could not, in the status line; an exception in a callback is shown in
  the widget, never lost.
* **Copy** writes the snippet to the clipboard in the browser.
* **Insert** adds the snippet as a new code cell directly below the failed cell, in
  the browser, through the notebook model of the widget manager's document
  context (JupyterLab 4 and Notebook 7 share that manager); the failed cell is
  found by the ``cellId`` that the front end sent with its execute request. Where
  a front end has no such model (or the cell is gone), the kernel queues the code
  with ``set_next_input`` and the status line says where it will appear.

One widget (one comm) per panel, whatever the number of fixes. Stable CSS classes
for users and tests: ``ipydevice-actions`` (root), ``ipydevice-apply``,
``ipydevice-copy``, ``ipydevice-insert`` and ``ipydevice-status``.

anywidget (and ipywidgets under it) is imported here only, when a panel is built.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ipydevice.model import Diagnosis, Fix

__all__ = ["available", "build_panel", "click", "insertable", "view_bundle"]

Namespace = Callable[[], Mapping[str, Any]]

_ESM = """
const BUTTON = "jupyter-button widget-button";

function makeButton(label, className, tooltip) {
  const button = document.createElement("button");
  button.className = `${BUTTON} ${className}`;
  button.textContent = label;
  button.title = tooltip;
  // The same box for every button, so they line up whatever the theme's CSS says.
  Object.assign(button.style, {
    margin: "0", height: "var(--jp-widgets-inline-height, 28px)", minWidth: "72px",
    width: "auto", padding: "0 14px", lineHeight: "normal", boxSizing: "border-box",
    verticalAlign: "middle",
  });
  return button;
}

async function copyText(text) {
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
}

// The notebook model of the document this widget's manager serves: JupyterLab 4 and
// Notebook 7 (@jupyter-widgets/jupyterlab-manager) have one, other front ends may not.
function notebookOf(model) {
  try {
    const manager = model.widget_manager;
    const shared = manager && manager.context && manager.context.model
      && manager.context.model.sharedModel;
    return shared && typeof shared.insertCell === "function" ? shared : null;
  } catch (error) {
    return null;
  }
}

function insertBelow(model, code) {
  const cellId = model.get("cell_id");
  const notebook = notebookOf(model);
  if (!notebook || !cellId) return false;
  const index = notebook.cells.findIndex((cell) => cell.id === cellId);
  if (index < 0) return false;
  notebook.insertCell(index + 1, { cell_type: "code", source: code, metadata: {} });
  return true;
}

function render({ model, el }) {
  el.classList.add("ipydevice-actions");
  // The foot of the panel above it: the same edge and tint.
  const box = document.createElement("div");
  Object.assign(box.style, {
    borderLeft: "4px solid #e8590c", background: "rgba(232,89,12,0.07)",
    borderRadius: "0 4px 4px 0", padding: "2px 12px 8px 12px", margin: "0 0 6px 0",
    fontFamily: "var(--jp-ui-font-family, system-ui, sans-serif)", fontSize: "13px",
  });
  el.appendChild(box);
  const fixes = model.get("fixes");
  const anyApply = fixes.some((fix) => fix.apply);
  for (const [index, fix] of fixes.entries()) {
    const row = document.createElement("div");
    row.className = "ipydevice-actions-row";
    Object.assign(row.style, { display: "flex", alignItems: "center", gap: "6px", margin: "4px 0 0 0" });
    if (fixes.length > 1 || model.get("labelled")) {
      const label = document.createElement("span");
      label.textContent = fix.label;
      Object.assign(label.style, { minWidth: "3.5em", fontWeight: "600" });
      row.appendChild(label);
    }
    if (fix.apply) {
      const apply = makeButton("Apply", "ipydevice-apply mod-warning",
        "Move the live objects now, then re-run the cell");
      apply.onclick = () => model.send({ action: "apply", index });
      row.appendChild(apply);
    } else if (anyApply) {  // keep Copy and Insert in the same columns on every row
      const gap = makeButton("Apply", "", "");
      gap.style.visibility = "hidden";
      gap.setAttribute("aria-hidden", "true");
      row.appendChild(gap);
    }
    const copy = makeButton("Copy", "ipydevice-copy", "Copy this code to the clipboard");
    copy.onclick = async () => {
      await copyText(fix.code);
      copy.textContent = "Copied";
      model.send({ action: "copied", index });
      setTimeout(() => { copy.textContent = "Copy"; }, 1500);
    };
    row.appendChild(copy);
    if (fix.insert) {
      const insert = makeButton("Insert", "ipydevice-insert",
        "Add this code as a new cell below the failed cell");
      insert.onclick = () => {
        let done = false;
        try { done = insertBelow(model, fix.code); } catch (error) { done = false; }
        model.send({ action: done ? "inserted" : "insert", index });
      };
      row.appendChild(insert);
    }
    box.appendChild(row);
  }
  const status = document.createElement("div");
  status.className = "ipydevice-status";
  status.style.marginTop = "6px";
  const paint = () => {
    const text = model.get("status");
    status.textContent = "";
    status.style.display = text ? "block" : "none";
    if (!text) return;
    const mark = document.createElement("span");
    const ok = model.get("status_ok");
    mark.textContent = ok ? "✔ " : "✘ ";
    mark.style.color = ok ? "#2f9e44" : "#e03131";
    status.append(mark, text);
  };
  paint();
  model.on("change:status", paint);
  model.on("change:status_ok", paint);
  box.appendChild(status);
}
export default { render };
"""

#: The widget class, made once per anywidget module (making a widget class costs
#: more than building a panel).
_CLASS: dict[int, tuple[Any, type]] = {}


def _actions_class() -> type:
    import anywidget

    made = _CLASS.get(id(anywidget))
    if made is None or made[0] is not anywidget:
        made = (anywidget, _make_class(anywidget))
        _CLASS.clear()
        _CLASS[id(anywidget)] = made
    return made[1]


def _make_class(anywidget: Any) -> type:
    import traitlets

    class FixActions(anywidget.AnyWidget):
        """Apply, Copy and Insert for each fix; ``status`` is the line under them."""

        # anywidget's own traits, declared on the class: AnyWidget.__init__ would
        # otherwise add them to every instance, each time deriving a new class.
        _esm = traitlets.Unicode(_ESM).tag(sync=True)
        _anywidget_id = traitlets.Unicode("ipydevice.render.widget.FixActions").tag(sync=True)
        fixes = traitlets.List(traitlets.Dict()).tag(sync=True)
        labelled = traitlets.Bool(False).tag(sync=True)
        cell_id = traitlets.Unicode("").tag(sync=True)
        status = traitlets.Unicode("").tag(sync=True)
        status_ok = traitlets.Bool(True).tag(sync=True)
        copies = traitlets.Int(0)

        def add_traits(self, **traits: Any) -> None:
            missing = {name: t for name, t in traits.items() if not self.has_trait(name)}
            if missing:  # a trait this class does not declare: anywidget's way
                super().add_traits(**missing)

        def say(self, message: str, ok: bool = True) -> None:
            with self.hold_sync():
                self.status_ok = ok
                self.status = message

    return FixActions


def available() -> bool:
    """Whether the buttons can be built (anywidget importable); without it the panel
    is its static output alone."""
    try:
        import anywidget  # noqa: F401
    except ImportError:
        return False
    return True


def insertable(fix: Fix) -> bool:
    """A fix whose code makes sense as a new cell (not a change to a source file)."""
    return fix.scope in ("namespace", "cell") and bool(fix.code)


def build_panel(
    diagnosis: Diagnosis,
    namespace: Namespace | None = None,
    insert: Callable[[str], None] | None = None,
    *,
    fixes: Sequence[Fix] | None = None,
    cell_id: str = "",
    labelled: bool = False,
) -> Any:
    """The buttons for ``diagnosis``' fixes (or for ``fixes``, a selection of them).

    Args:
        diagnosis: what the buttons act on.
        namespace: returns the live namespace when Apply is clicked; without it
            there are no Apply buttons.
        insert: queues code as a new cell below the next cell run
            (``shell.set_next_input``), for front ends that cannot insert it below
            the failed cell; without it there are no Insert buttons.
        fixes: the fixes to give buttons to (default: all of them).
        cell_id: the failed cell's id, as the front end sent it.
        labelled: label the row with the fix's number even when there is one.
    """
    chosen = list(diagnosis.fixes if fixes is None else fixes)
    numbers = {id(fix): number for number, fix in enumerate(diagnosis.fixes, 1)}
    rows = [
        {
            "label": f"Fix {numbers.get(id(fix), index + 1)}",
            "code": textwrap.dedent(fix.code).rstrip(),
            "apply": fix.can_apply and namespace is not None,
            "insert": insert is not None and insertable(fix),
        }
        for index, fix in enumerate(chosen)
    ]
    actions = _actions_class()(fixes=rows, cell_id=cell_id, labelled=labelled)
    actions.on_msg(_handler(actions, chosen, rows, namespace, insert))
    return actions


def view_bundle(panel: Any) -> dict[str, Any]:
    """The widget's display data: a reference to its model, and an empty text.

    What ``Widget._repr_mimebundle_`` returns, without the plain-text ``repr`` of
    the widget that it builds only to cut it at 110 characters: a front end without
    widgets shows nothing for the buttons (the panel's words are their own output).
    """
    return {
        "application/vnd.jupyter.widget-view+json": {
            "version_major": 2,
            "version_minor": 0,
            "model_id": panel.model_id,
        },
        "text/plain": "",
    }


def _handler(
    actions: Any,
    fixes: list[Fix],
    rows: list[dict[str, Any]],
    namespace: Namespace | None,
    insert: Callable[[str], None] | None,
) -> Callable[[Any, Any, Any], None]:
    """The kernel side of a click: ``{"action": ..., "index": n}`` from the browser."""

    def on_msg(widget: Any, content: Any, buffers: Any) -> None:
        try:
            action = content.get("action") if isinstance(content, dict) else None
            index = content.get("index") if isinstance(content, dict) else None
            if not isinstance(index, int) or not 0 <= index < len(fixes):
                return
            fix, code = fixes[index], rows[index]["code"]
            if action == "apply" and namespace is not None and fix.can_apply:
                _apply(fix, namespace, actions.say)
            elif action == "copied":
                actions.copies += 1
                actions.say("copied to the clipboard")
            elif action == "inserted":
                actions.say("added as a new cell below the failed cell: run it, then re-run")
            elif action == "insert" and insert is not None:
                insert(code)
                actions.say(
                    "this front end cannot add cells from a widget: the fix appears as a new "
                    "cell below the next cell you run (or Copy it)"
                )
        except Exception as exc:
            try:
                detail = str(exc)
            except Exception:  # an exception whose message cannot be read
                detail = "?"
            actions.say(f"ipydevice could not do that: {type(exc).__name__}: {detail}", False)

    return on_msg


def _apply(fix: Fix, namespace: Namespace, say: Callable[[str, bool], None]) -> None:
    result = fix.apply(namespace())  # the live namespace: reassignments must land in it
    if result.ok:
        say(f"{result.message}. Re-run the cell.", True)
    else:
        say(result.message, False)


def click(panel: Any, action: str, index: int = 0) -> None:
    """What a click in the browser sends, sent from Python (for tests and tools)."""
    panel._handle_custom_msg({"action": action, "index": index}, [])
