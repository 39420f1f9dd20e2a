"""The failing path's imports, made while the kernel is idle, before the first device error.

The first device error would otherwise import the diagnosis engine, the renderers,
ipywidgets and anywidget (with the buttons' widget classes): about 80 ms that only the
first error pays. The header shown before the traceback needs little of it
(:mod:`ipydevice.diagnosis.message` and the two header renderers); the rest is imported
after the traceback. No device error can happen before torch is imported, so once a
cell has left torch imported, :class:`Warmer` imports the rest, once a process, while
the kernel has nothing else to do:

* after the cell's reply, on the kernel's own event loop (``kernel.io_loop``), in the
  main thread: a background thread importing ipydevice's modules while the shell
  imports others can meet Python's import-deadlock avoidance, which hands one of them
  a partly initialised module;
* in small steps (:func:`steps`: one module or package each, what it imports first, then the
  sample diagnosis, the widget classes and a full garbage collection), each scheduled
  with ``call_later`` and run only while no cell runs and no shell request is handled
  or queued: while one is, the next step waits and looks again :data:`DELAY` later. Never
  inside a user's cell: the cell that imports torch costs what it costs without
  ipydevice.

A terminal IPython has no kernel loop: nothing is warmed ahead there (it shows its
report after the traceback, so the imports never keep the traceback waiting).
Loading the extension imports none of this (``%load_ext`` stays instant). Whatever
fails here is left for the failing path, which reports it as it always does.
"""

from __future__ import annotations

import ast
import gc
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["ROOTS", "SAMPLE", "Warmer", "imports_of", "steps"]

#: What the diagnosis and the panel import after the traceback (the header's are among
#: them); :func:`steps` imports each module they import first, one a step.
ROOTS = (
    "ipydevice.diagnosis.message",
    "ipydevice.render.text",
    "ipydevice.render.html",
    "ipydevice.pipeline.engine",
    "ipydevice.integrations.excepthook",
    "ipydevice.integrations.ipython_buttons",  # the hook makes its Buttons on first use
    "ipydevice.integrations.cell_thread",  # where a click's Apply runs
)

#: A device error's message, diagnosed (from the message alone: no frame, no object of
#: the user's is read) and rendered once, so that the first real error finds the
#: patterns compiled and the caches made.
SAMPLE = (
    "Expected all tensors to be on the same device, but found at least two devices, "
    "cuda:0 and cpu! (when checking argument for argument mat1 in method wrapper_addmm)"
)

#: Seconds after a cell's end before the first step (the front end's next request, when
#: the user runs several cells, arrives first), and between steps.
DELAY, GAP = 0.2, 0.001


# -- the steps -----------------------------------------------------------------------------


def _source_of(name: str) -> str | None:
    """The source of ipydevice's module ``name``, found without importing it."""
    package = sys.modules["ipydevice"]
    base = os.path.join(os.path.dirname(package.__file__ or ""), *name.split(".")[1:])
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as file:
                return file.read()
    return None


def _run_at_import(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a module's body that run when it is imported, nested ones
    included; not ``if TYPE_CHECKING:`` blocks, not function or class bodies."""
    for node in body:
        if isinstance(node, ast.If):
            test = node.test
            checking = getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING"
            yield from _run_at_import(node.orelse if checking else node.body + node.orelse)
        elif isinstance(node, ast.Try):
            handlers = [s for h in node.handlers for s in h.body]
            yield from _run_at_import(node.body + handlers + node.orelse + node.finalbody)
        elif isinstance(node, ast.With):
            yield from _run_at_import(node.body)
        else:
            yield node


def imports_of(name: str) -> list[str]:
    """The ipydevice modules that importing ``name`` imports first: its packages and
    what its top level imports (read from its source; nothing is imported)."""
    parts = name.split(".")
    found = [".".join(parts[:i]) for i in range(1, len(parts))]
    source = _source_of(name)
    if source is None:
        return found
    for node in _run_at_import(ast.parse(source).body):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return [
        m
        for m in found
        if m.split(".")[0] == "ipydevice" and m != name and _source_of(m) is not None
    ]


def _modules(name: str, seen: set[str]) -> Iterator[None]:
    """Imports ``name`` after what it imports, one module a step (a parse, an import).

    A module of a package cannot be imported before the package, whose ``__init__``
    often imports its modules: what those modules import comes first, then the
    package with its modules, in one step."""
    if name in seen or name in sys.modules:
        return
    seen.add(name)
    yield from _dependencies(name, name, seen)
    if name not in sys.modules:
        importlib.import_module(name)
        yield


def _dependencies(name: str, package: str, seen: set[str]) -> Iterator[None]:
    """Imports what ``name`` imports, but ``package``'s own modules (see :func:`_modules`)."""
    found = imports_of(name)
    yield
    for dependency in found:
        if not dependency.startswith(package + "."):
            yield from _modules(dependency, seen)
        elif dependency not in seen and dependency not in sys.modules:
            seen.add(dependency)
            yield from _dependencies(dependency, package, seen)


def steps(widgets: bool) -> Iterator[None]:
    """The warm-up, one small piece of work between two ``yield``: each module of
    :data:`ROOTS`' imports (dependencies first), the sample diagnosed and rendered,
    the widget classes when ``widgets``, and a full garbage collection."""
    seen: set[str] = set()
    for root in ROOTS:
        yield from _modules(root, seen)
    from ipydevice.pipeline import engine
    from ipydevice.render.html import render_header_html
    from ipydevice.render.text import render_header

    sample = engine.diagnose(RuntimeError(SAMPLE), namespace={})
    yield
    for render in (render_header, render_header_html, str, type(sample)._repr_html_):
        render(sample)
        yield
    if widgets:
        from ipydevice.render import widget

        if widget.available():
            for name in ("ipywidgets", "anywidget"):
                importlib.import_module(name)
                yield
            widget.prepare()  # the widget classes
            yield
    # The objects these imports made tip the collector into a full collection: here,
    # while the user reads the cell's output, not in the first failing cell (a heap
    # that holds a large model takes a full collection hundreds of milliseconds).
    gc.collect()


# -- when they run -------------------------------------------------------------------------

#: Whether this process has warmed up: the imports last as long as the process, so
#: loading the extension again (``%reload_ext``) does not warm up again.
_WARMED = [False]


def _waiting(kernel: Any) -> bool:
    """Whether ``kernel`` handles a shell request (ipykernel 7 holds its lock from the
    moment it reads one) or has one queued (ipykernel 6). A request still in its socket
    is read by the loop before the next step runs, which then sees it: the socket itself
    is not polled here (reading a ZMQ socket's events would swallow the edge that wakes
    the loop for it)."""
    lock = getattr(kernel, "_main_asyncio_lock", None)
    if lock is not None and lock.locked():
        return True
    queue = getattr(kernel, "msg_queue", None)  # ipykernel 6
    return bool(queue is not None and queue.qsize())


class Warmer:
    """Runs :func:`steps` on the kernel's loop while it is idle, once a process, after
    the first cell that leaves torch imported.

    ``kernel`` is the shell's (None in a terminal: nothing is warmed ahead). The hook
    calls :meth:`cell_started` and :meth:`after_cell` around every cell until
    :attr:`done`."""

    def __init__(self, kernel: Any, widgets: Callable[[], bool]) -> None:
        self.kernel = kernel
        self.widgets = widgets
        self.loop: Any = getattr(kernel, "io_loop", None)
        self.done = _WARMED[0] or self.loop is None
        self.running = False  # a cell runs: no step
        self.scheduled = False
        self.stopped = False
        self._steps: Iterator[None] | None = None

    def cell_started(self) -> None:
        self.running = True

    def after_cell(self) -> None:
        """The ``post_run_cell`` check: a flag, then a dict lookup, until it runs; then
        the first step is scheduled after the cell's reply."""
        self.running = False
        if self.done or self.scheduled or self.stopped or "torch" not in sys.modules:
            return
        self.scheduled = True
        self.loop.call_later(DELAY, self._step)

    def stop(self) -> None:
        """The extension is unloaded: no further step."""
        self.stopped = True

    def _step(self) -> None:
        self.scheduled = False
        if self.done or self.stopped:
            return
        if _WARMED[0]:  # another load of the extension warmed up
            self.done = True
            return
        if self.running or _waiting(self.kernel):
            # A cell runs or a request is handled: look again later (a request without
            # a cell, a completion or a widget's message, ends without a cell's end).
            self.scheduled = True
            self.loop.call_later(DELAY, self._step)
            return
        if self._steps is None:
            self._steps = steps(self.widgets())
        try:
            next(self._steps)
        except StopIteration:
            self.done = _WARMED[0] = True
            return
        except Exception:  # the failing path does it again and reports it
            self.done = _WARMED[0] = True
            return
        self.scheduled = True
        self.loop.call_later(GAP, self._step)
