"""The failing path's imports, made before the first device error of a session.

The first device error would otherwise import the diagnosis engine, the renderers,
ipywidgets and anywidget (with the buttons' widget classes) on its way to the
traceback: about 80 ms that only the first error pays. No device error can happen
before torch is imported, so at the end of the first cell that leaves torch imported
(a cell that already took a second or more to import it) they are imported, once.
Loading the extension imports none of them (``%load_ext`` stays instant and never
imports torch, pandas or ipywidgets).

It runs in the cell's own thread: a background thread importing ipydevice's modules
while the shell imports others can meet Python's import-deadlock avoidance, which hands
one of them a partly initialised module (seen as ``partially initialized module
'ipydevice.settings'``). It ends with a full garbage collection, which those imports
would otherwise set off in the first failing cell. Whatever fails here is left for the
failing path, which reports it as it always does.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable

__all__ = ["MODULES", "SAMPLE", "Warmer", "warm", "warm_once"]

#: What the header, the diagnosis and the panel import (the buttons' are in :func:`warm`).
MODULES = (
    "ipydevice.pipeline.engine",
    "ipydevice.render.text",
    "ipydevice.render.html",
    "ipydevice.integrations.excepthook",
    "ipydevice.integrations.ipython_buttons",  # the hook makes its Buttons on first use
)


#: A device error's message, diagnosed (from the message alone: no frame, no object of
#: the user's is read) and rendered once, so that the first real error finds the
#: patterns compiled and the caches made.
SAMPLE = (
    "Expected all tensors to be on the same device, but found at least two devices, "
    "cuda:0 and cpu! (when checking argument for argument mat1 in method wrapper_addmm)"
)


def warm(widgets: bool) -> None:
    """Imports :data:`MODULES`, diagnoses and renders :data:`SAMPLE` and, when
    ``widgets``, makes the buttons' classes."""
    import importlib

    for name in MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # the failing path imports it again and reports it
            return
    try:
        from ipydevice.pipeline import engine
        from ipydevice.render.html import render_header_html
        from ipydevice.render.text import render_header

        sample = engine.diagnose(RuntimeError(SAMPLE), namespace={})
        for render in (render_header, render_header_html, str, type(sample)._repr_html_):
            render(sample)
    except Exception:  # the failing path does it again and reports it
        return
    if widgets:
        try:
            from ipydevice.render import widget

            if widget.available():
                widget.prepare()  # anywidget, ipywidgets and the widget classes
        except Exception:
            return
    # The objects these imports made tip the collector into a full collection: here,
    # while the user reads the cell's output, not in the first failing cell (a heap
    # that holds a large model takes a full collection hundreds of milliseconds).
    gc.collect()


#: Whether this process has warmed up: the imports last as long as the process, so
#: loading the extension again (``%reload_ext``) does not warm up again.
_WARMED = [False]


class Warmer:
    """Runs :func:`warm` once a process, after the first cell that leaves torch imported."""

    def __init__(self, widgets: Callable[[], bool]) -> None:
        self.widgets = widgets
        self.started = _WARMED[0]

    def after_cell(self) -> None:
        """The ``post_run_cell`` check: a flag, then a dict lookup, until it runs."""
        if self.started or "torch" not in sys.modules:
            return
        self.started = _WARMED[0] = True
        warm(self.widgets())


def warm_once(widgets: Callable[[], bool]) -> bool:
    """The ``post_run_cell`` step once torch is imported: :func:`warm`, once a process
    (``%reload_ext`` does not warm up again); True once done."""
    Warmer(widgets).after_cell()
    return True
