"""The panel's buttons: Apply, Copy and Insert for each fix, as one small anywidget.

The header and the panel (headline, culprits, objects, fixes' code) are plain
``display_data`` outputs (``text/html`` and ``text/plain``) that every viewer and
exporter keeps and that stand on their own: the culprit, the headline and each
fix's code are selectable text. This widget is one more output, after the panel;
in the browser it finds the header and the panel by their ``data-ipydevice-anchor``
and puts a row of buttons right under each fix's code. A front end that shows
outputs apart gets the rows as a block of their own; one that cannot load the
widget shows its error after the panel, never in the header.

Built from a :class:`~ipydevice.model.Diagnosis` (strings only) and a callable that
returns the user's namespace *at click time*, so the widget keeps no tensor alive.

* **Apply** sends a message to the kernel, which performs the fix with
  :meth:`Fix.apply` (moves by reference, never runs code) and reports what it did,
  or why it could not, in the row's status; an exception in a callback is shown in
  the widget, never lost.
* **Copy** writes the snippet to the clipboard in the browser, and says so only when
  it got there ("could not copy" otherwise).
* **Insert** adds the snippet as a new code cell directly below the failed cell, in
  the browser, through the notebook model of the widget manager's document
  context (JupyterLab 4 and Notebook 7 share that manager); the failed cell is
  found by the ``cellId`` that the front end sent with its execute request. Where
  a front end has no such model (VS Code, Colab), the kernel queues the code with
  ``set_next_input`` and the status says where that front end puts it. A rewritten
  cell is said to replace the failed one ("run the new cell instead").

One widget (one comm) per failed cell, whatever the number of fixes, sharing one
``Layout``. The ES module (9 kB) goes to the front end once per session, in the
state of one more widget, the module host (:func:`module_host`); each panel's
widget carries a loader of 1 kB that imports it from there. Stable CSS classes for users and tests: ``ipydevice-actions`` (each
row), ``ipydevice-apply``, ``ipydevice-copy``, ``ipydevice-insert`` and
``ipydevice-status``.

anywidget (and ipywidgets under it) is imported here only, when a panel is built.
"""

from __future__ import annotations

import contextlib
import functools
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ipydevice.model import Diagnosis, Fix
from ipydevice.render.widget_js import ESM as _ESM
from ipydevice.render.widget_js import LOADER as _LOADER

__all__ = [
    "available",
    "build_panel",
    "click",
    "close_shared",
    "insertable",
    "module_host",
    "prepare",
    "view_bundle",
]

Namespace = Callable[[], Mapping[str, Any]]

#: What the Insert button's tooltip says it does, by the fix's scope.
INSERT_TIPS = {
    "namespace": "Add this code as a new cell below the failed cell",
    "cell": "Add this rewritten cell below the failed cell (run it instead of the failed one)",
}

#: The status after the browser inserted the cell below the failed one, by scope.
INSERTED = {
    "namespace": "added as a new cell below this one: run it, then re-run this cell",
    "cell": "added below this cell as its replacement: run the new cell instead of this one",
}

#: Where a cell queued with ``set_next_input`` appears, by the front end the browser
#: says it is (none of them lets a widget add a cell itself).
FRONT_ENDS = {
    "vscode": "VS Code adds it as a new cell below the next cell you run",
    "colab": "Colab adds it as a new cell below the next cell you run",
    "": "this front end cannot add cells from a widget: it is queued for the next cell you "
    "run, which adds it below itself where the front end supports that",
}

#: What to do with a queued cell, by scope (a rewritten cell replaces the failed one).
QUEUED_AFTER = {"cell": "; run it instead of the failed cell"}

COPY_FAILED = (
    "could not copy: the browser refused the clipboard; select the code and copy it yourself"
)

#: The widget classes, made once per anywidget module (making a widget class costs
#: more than building a panel).
_CLASS: dict[int, tuple[Any, type, type]] = {}


def _actions_class() -> type:
    return _classes()[0]


def _classes() -> tuple[type, type]:
    """The buttons' widget class and the module host's class."""
    import anywidget

    made = _CLASS.get(id(anywidget))
    if made is None or made[0] is not anywidget:
        made = (anywidget, _make_class(anywidget), _make_host_class())
        _CLASS.clear()
        _CLASS[id(anywidget)] = made
    return made[1], made[2]


def prepare() -> None:
    """Imports anywidget and ipywidgets and makes the widget classes, ahead of the first
    panel (:mod:`ipydevice.integrations.ipython_warm`); opens no comm."""
    _classes()


def _make_host_class() -> type:
    import ipywidgets
    import traitlets

    class ButtonsModule(ipywidgets.Widget):
        """The buttons' ES module, as text in the state of a model without views
        (ipywidgets' base ``WidgetModel``, which every widget manager has)."""

        source = traitlets.Unicode(_ESM).tag(sync=True)

    return ButtonsModule


#: DOMWidget traits the buttons never set, left out of the widget's state: the front
#: end's model has the same defaults (no classes, no tooltip, not tabbable, views not
#: counted), and each error's widget is 76 bytes shorter.
_UNSENT = frozenset({"_dom_classes", "_view_count", "tabbable", "tooltip"})


def _make_class(anywidget: Any) -> type:
    import traitlets

    class FixActions(anywidget.AnyWidget):
        """Apply, Copy and Insert for each fix; ``status`` is the line under them."""

        # anywidget's own traits, declared on the class: AnyWidget.__init__ would
        # otherwise add them to every instance, each time deriving a new class.
        # The module itself comes once per session, from the host (see _LOADER).
        _esm = traitlets.Unicode(_LOADER).tag(sync=True)
        _anywidget_id = traitlets.Unicode("ipydevice.render.widget.FixActions").tag(sync=True)
        host = traitlets.Unicode("").tag(sync=True)
        fixes = traitlets.List(traitlets.Dict()).tag(sync=True)
        labelled = traitlets.Bool(False).tag(sync=True)
        cell_id = traitlets.Unicode("").tag(sync=True)
        anchor = traitlets.Unicode("").tag(sync=True)
        status = traitlets.Unicode("").tag(sync=True)
        status_ok = traitlets.Bool(True).tag(sync=True)
        status_index = traitlets.Int(-1).tag(sync=True)
        copies = traitlets.Int(0)
        #: the click handler of the error it serves (replaced when it is reused)
        handler: Any = None

        @traitlets.default("keys")
        def _default_keys(self) -> list[str]:
            return [name for name in super()._default_keys() if name not in _UNSENT]

        def add_traits(self, **traits: Any) -> None:
            missing = {name: t for name, t in traits.items() if not self.has_trait(name)}
            if missing:  # a trait this class does not declare: anywidget's way
                super().add_traits(**missing)

        def say(self, message: str, ok: bool = True, index: int = 0) -> None:
            with self.hold_sync():
                self.status_ok = ok
                self.status_index = index
                self.status = message

    return FixActions


#: The one ``Layout`` every panel's widget shares (a DOMWidget makes one each otherwise).
_LAYOUT: list[Any] = []


def _shared_layout() -> Any:
    import ipywidgets

    if not _LAYOUT or getattr(_LAYOUT[0], "comm", None) is None:  # none yet, or closed
        _LAYOUT[:] = [ipywidgets.Layout()]
    return _LAYOUT[0]


#: The session's one module host: the buttons' module goes to the front end once, in
#: its state, instead of in every panel's widget (9 kB an error otherwise).
_HOST: list[Any] = []


def module_host() -> Any:
    """The widget that carries the buttons' module; made again once closed."""
    if not _HOST or getattr(_HOST[0], "comm", None) is None:  # none yet, or closed
        _HOST[:] = [_classes()[1]()]
    return _HOST[0]


def close_shared() -> None:
    """Closes the widgets every panel shares (the module host, the layout): unload."""
    for shared in (_HOST, _LAYOUT):
        for widget in shared:
            with contextlib.suppress(Exception):  # a comm already gone (kernel shutting down)
                widget.close()
        shared.clear()


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
    anchor: str = "",
    reuse: Any = None,
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
        anchor: the ``data-ipydevice-anchor`` of the header and panel outputs the
            buttons go into, beside each fix's code; without it (or where they are
            not found) the buttons are a block of their own.
        reuse: a live widget of an earlier error whose output is gone or superseded:
            it is given this error's fixes and handler (one state update) instead of
            a new widget being opened and the old one closed; its views of the
            earlier error take their buttons away (the anchor changed).
    """
    chosen = list(diagnosis.fixes if fixes is None else fixes)
    numbers = {id(fix): number for number, fix in enumerate(diagnosis.fixes, 1)}
    rows = [
        {
            "label": f"Fix {numbers.get(id(fix), index + 1)}",
            "code": textwrap.dedent(fix.code).rstrip(),
            "apply": fix.can_apply and namespace is not None,
            "insert": insert is not None and insertable(fix),
            "insert_tip": INSERT_TIPS.get(fix.scope, ""),
        }
        for index, fix in enumerate(chosen)
    ]
    if reuse is not None and getattr(reuse, "comm", None) is not None:
        actions = reuse
        if actions.handler is not None:
            actions.on_msg(actions.handler, remove=True)
        with actions.hold_sync():
            actions.set_trait("fixes", rows)
            actions.set_trait("cell_id", cell_id)
            actions.set_trait("labelled", labelled)
            actions.set_trait("anchor", anchor)
            actions.set_trait("status", "")
            actions.set_trait("status_ok", True)
            actions.set_trait("status_index", -1)
        actions.copies = 0
    else:
        actions = _actions_class()(
            fixes=rows,
            cell_id=cell_id,
            labelled=labelled,
            anchor=anchor,
            host=module_host().model_id,
            layout=_shared_layout(),
        )
    actions.handler = _handler(actions, chosen, rows, namespace, insert)
    actions.on_msg(actions.handler)
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
        index = None
        try:
            action = content.get("action") if isinstance(content, dict) else None
            index = content.get("index") if isinstance(content, dict) else None
            if not isinstance(index, int) or not 0 <= index < len(fixes):
                return
            if content.get("anchor", actions.anchor) != actions.anchor:
                return  # a click on the buttons of an earlier error, sent as it was reused
            fix, code = fixes[index], rows[index]["code"]
            say = functools.partial(actions.say, index=index)
            if action == "apply" and namespace is not None and fix.can_apply:
                _apply(fix, namespace, say)
            elif action == "copied":
                actions.copies += 1
                say("copied to the clipboard")
            elif action == "copy-failed":
                say(COPY_FAILED, False)
            elif action == "inserted":
                say(INSERTED.get(fix.scope, INSERTED["namespace"]))
            elif action == "insert" and insert is not None:
                insert(code)
                where = FRONT_ENDS.get(content.get("frontend"), FRONT_ENDS[""])
                say(f"{where}{QUEUED_AFTER.get(fix.scope, '')} (or Copy it)")
        except Exception as exc:
            try:
                detail = str(exc)
            except Exception:  # an exception whose message cannot be read
                detail = "?"
            at = index if isinstance(index, int) else 0
            actions.say(f"ipydevice could not do that: {type(exc).__name__}: {detail}", False, at)

    return on_msg


def _apply(fix: Fix, namespace: Namespace, say: Callable[..., None]) -> None:
    try:
        result = fix.apply(namespace())  # the live namespace: reassignments must land in it
    except KeyboardInterrupt:  # before the fix began (Fix.apply reports its own)
        say("interrupted before anything moved: nothing was moved", False)
        return
    say(str(result), result.ok)


def click(panel: Any, action: str, index: int = 0, **more: Any) -> None:
    """What a click in the browser sends, sent from Python (for tests and tools)."""
    panel._handle_custom_msg({"action": action, "index": index, **more}, [])
