"""The buttons' widgets a shell shows, and when they are closed.

:mod:`ipydevice.integrations.ipython` decides when a panel is shown; this module
shows its buttons (:mod:`ipydevice.render.widget`) as one widget output after the
panel, and keeps every widget it made so that none is left behind:

* **one widget per failed cell**, displayed once, after the panel (the header and
  the panel are plain HTML that stand on their own; the widget adds the buttons);
  every widget shares one ``Layout`` widget, so a panel costs one comm;
* **superseded**: when a cell runs again (the front end clears its outputs), the
  widget of its previous run serves the cell's new panel, if it fails again (one
  state update instead of a widget opened and one closed), and is closed after the
  cell otherwise; the cell is known by the id the front end sends with each execution
  (JupyterLab, Notebook 7, VS Code);
* **bounded**: at most :data:`ipydevice.settings.MAX_LIVE_BUTTONS` are alive; past
  that, the oldest serves the new panel (its buttons disappear from its own panel,
  which stays, with the code);
* **reset and unload**: ``%reset -f`` and ``%unload_ext ipydevice`` close them all
  (unloading closes the widgets every panel shares too: the module host, the layout);
* **Apply in the cells' thread**: a click that arrives in another thread (JupyterLab's
  comm subshell) is applied in the thread that ran the failed cell, under its torch
  state (:mod:`ipydevice.integrations.cell_thread`).

IPython itself is not imported here: the shell is the one the hook was given.
"""

from __future__ import annotations

import contextlib
import sys
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ipydevice.model import Diagnosis, Fix

__all__ = ["Buttons"]

#: A name put into ``user_ns_hidden`` while widgets are alive: ``%reset`` clears it.
_MARK = "_ipydevice_buttons_"


class Buttons:
    """The live buttons' widgets of one shell, oldest first, by the output they belong to."""

    def __init__(self, shell: Any, publish: Callable[[dict[str, Any]], None]) -> None:
        self.shell = shell
        self.publish = publish
        self.live: OrderedDict[int, tuple[str, Any]] = OrderedDict()
        #: widgets of outputs this cell's run cleared: reused by its panel, else closed
        self.spare: list[Any] = []
        self.serial = 0

    def __len__(self) -> int:
        return len(self.live)

    # -- showing -------------------------------------------------------------------------

    def show(
        self,
        diagnosis: Diagnosis,
        fixes: list[Fix] | None,
        cell_id: str = "",
        with_namespace: bool = True,
    ) -> None:
        """Builds and displays the buttons for ``diagnosis``' fixes (or ``fixes``)."""
        from ipydevice.integrations.ipython_display import anchor_of
        from ipydevice.render.widget import available, build_panel, view_bundle

        if not available():
            return
        shell = self.shell
        namespace = (lambda: shell.user_ns) if with_namespace else None
        reuse = self.reusable()
        try:
            widget = build_panel(
                diagnosis,
                namespace,
                self.insert_code,
                fixes=fixes,
                cell_id=cell_id,
                anchor=anchor_of(diagnosis),
                reuse=reuse,
            )
        except BaseException:
            if reuse is not None:  # taken from the live ones: closed, not lost
                _close(reuse)
            raise
        in_cell_thread(widget)
        self.keep(widget, cell_id)
        self.publish(view_bundle(widget))

    def insert_code(self, code: str) -> None:
        """Queues ``code`` as a new cell below the next cell run (``set_next_input``)."""
        self.shell.set_next_input(code, replace=False)

    def reusable(self) -> Any:
        """A widget the next panel may have: one of an output this cell cleared, else,
        with :data:`~ipydevice.settings.MAX_LIVE_BUTTONS` alive, the oldest; else None."""
        from ipydevice.settings import MAX_LIVE_BUTTONS

        if self.spare:
            return self.spare.pop()
        if len(self.live) >= MAX_LIVE_BUTTONS:
            return self.live.popitem(last=False)[1][1]
        return None

    def keep(self, widget: Any, cell_id: str = "") -> None:
        """Notes ``widget`` as alive in the output of ``cell_id``; closes the oldest
        past the limit."""
        from ipydevice.settings import MAX_LIVE_BUTTONS

        self.serial += 1
        self.live[self.serial] = (cell_id, widget)
        hidden = getattr(self.shell, "user_ns_hidden", None)
        if isinstance(hidden, dict):
            hidden[_MARK] = True
        while len(self.live) > MAX_LIVE_BUTTONS:
            _close(self.live.popitem(last=False)[1][1])

    @property
    def busy(self) -> bool:
        """Widgets alive, or set aside for the cell running: the cells' ends look after them."""
        return bool(self.live or self.spare)

    # -- closing -------------------------------------------------------------------------

    def new_cell(self, cell_id: str) -> None:
        """A cell starts: the widget of that cell's previous run is set aside (its output
        is being cleared) for the cell's new panel, and all are closed after a ``%reset``."""
        if not self.live:
            return
        if self.was_reset():
            self.close_all()
        elif cell_id:
            for serial in [k for k, (cell, _) in self.live.items() if cell == cell_id]:
                self.spare.append(self.live.pop(serial)[1])

    def after_cell(self) -> None:
        """A cell ended: the widgets of the outputs it cleared that its panel did not
        reuse are closed, and after ``%reset -f`` every widget."""
        spare, self.spare = self.spare, []
        for widget in spare:
            _close(widget)
        if self.live and self.was_reset():
            self.close_all()

    def was_reset(self) -> bool:
        hidden = getattr(self.shell, "user_ns_hidden", None)
        return isinstance(hidden, dict) and _MARK not in hidden

    def close_all(self) -> None:
        """Closes every widget (unload, reset)."""
        live, self.live = self.live, OrderedDict()
        spare, self.spare = self.spare, []
        for widget in [*(w for _, w in live.values()), *spare]:
            _close(widget)
        hidden = getattr(self.shell, "user_ns_hidden", None)
        if isinstance(hidden, dict):
            hidden.pop(_MARK, None)

    def unload(self) -> None:
        """Closes every widget, and those all panels share (the buttons' module, the
        layout): ``%unload_ext``."""
        self.close_all()
        widget = sys.modules.get("ipydevice.render.widget")
        if widget is not None:  # never imported: no widget was ever made
            widget.close_shared()


def in_cell_thread(widget: Any) -> None:
    """Makes the widget's Apply run in this thread, the one running the failed cell,
    wherever its clicks arrive (:mod:`ipydevice.integrations.cell_thread`)."""
    from ipydevice.integrations.cell_thread import CellThread

    handler = getattr(widget, "handler", None)
    if handler is None:
        return
    widget.on_msg(handler, remove=True)
    widget.handler = CellThread().wrap(handler)
    widget.on_msg(widget.handler)


def _close(widget: Any) -> None:
    with contextlib.suppress(Exception):  # a comm already gone (kernel shutting down)
        widget.close()
