"""The cell callbacks of ``%load_ext ipydevice``: what happens when a cell starts and ends.

:class:`CellCallbacks` is the part of :class:`ipydevice.integrations.ipython._Hook`
that runs for *every* cell, failing or not (IPython's ``pre_run_cell`` and
``post_run_cell`` events), and the per-cell state it keeps: the id of the exception
last shown (ids only: holding an exception would keep its frames and tensors alive),
the header put out before the traceback, the stages that failed in this cell.

A cell that does not fail must cost nothing noticeable (``benchmarks/bench_idle.py``).
After each cell the hook *settles*: when nothing is left to look after (no stage
failed, no live widget or device warning, the failing path warmed up, watch mode
off) it is :attr:`~CellCallbacks.quiet`, and each callback is then a few attribute
reads. Anything that gives a cell work (a device warning, a header, a failed stage,
a setting) unsettles it. Like the rest of ``integrations/ipython_*``, this module
does not import IPython: the shell is passed in.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ipydevice.integrations.ipython_display import cell_exception, cell_id_of
from ipydevice.integrations.ipython_display import guarded as _guarded

if TYPE_CHECKING:  # pragma: no cover
    from ipydevice.integrations.ipython_warm import Warmer
    from ipydevice.integrations.warnings_hook import DeviceWarnings

__all__ = ["CellCallbacks"]

_T = TypeVar("_T")
_SYS = vars(sys)  # sys.last_value, read by the cell callbacks (one dict lookup)


class CellCallbacks:
    """The ``pre_run_cell`` and ``post_run_cell`` callbacks and the state of the cell
    running. The hook supplies the shell, the switches, the warnings and buttons it
    made, and the work after a failing cell (:meth:`diagnose_and_show`, :meth:`stage`,
    :meth:`watch_cell`)."""

    shell: Any
    config: Any  # IPyDevice
    device_warnings: DeviceWarnings | None
    panel: bool  # IPyDevice.panel and .watch, kept in step by the hook
    watch: bool
    _buttons: Any  # ipython_buttons.Buttons, made with the first widget

    def __init__(self) -> None:
        self.shown_before = id(_SYS.get("last_value"))
        # This cell: the exception the header was for (by id) and the header's
        # display id ('': no header, not a device error), the stages that failed
        # (each is reported once), and the cell's id from the front end.
        self.headed: tuple[int, str] | None = None
        self.failed: set[str] = set()
        self.deferred: Exception | None = None  # IPYDEVICE_DEBUG=1: raised after the traceback
        self.cell_info: Any = None  # this cell's ExecutionInfo (its id: :attr:`cell_id`)
        self.warmed = False  # the failing path's imports made (ipython_warm)
        self.warmer: Warmer | None = None  # made with the first cell that leaves torch imported
        self.quiet = False  # see the module's doc; settled after each cell

    # -- supplied by the hook ----------------------------------------------------------------

    def stage(
        self, name: str, func: Callable[..., _T], *args: Any, before: bool = False
    ) -> _T | None:
        raise NotImplementedError

    def diagnose_and_show(self, exc: BaseException, header: str = "") -> None:
        raise NotImplementedError

    def watch_cell(self, result: Any) -> None:
        raise NotImplementedError

    # -- the cell ----------------------------------------------------------------------------

    def in_kernel(self) -> bool:
        return getattr(self.shell, "kernel", None) is not None

    def settle(self) -> None:
        """Sets :attr:`quiet`: whether a cell that does not fail leaves the callbacks
        nothing to do beyond noting the cell (see :meth:`pre_run_cell`)."""
        buttons, warned = self._buttons, self.device_warnings
        self.quiet = (
            self.warmed
            and not self.watch
            and not self.failed
            and self.headed is None
            and self.deferred is None
            and (buttons is None or not buttons.busy)
            and (warned is None or not warned.busy)
        )

    def unsettle(self) -> None:
        """Something gave the callbacks work (a device warning was seen)."""
        self.quiet = False

    def pre_run_cell(self, info: Any = None) -> None:
        """The ``pre_run_cell`` callback: notes which exception was last shown, by id
        only, and the cell's id (its ``ExecutionInfo``: the id is read if needed); when
        not :attr:`quiet`, also starts the cell (:meth:`start_cell`)."""
        self.shown_before = id(_SYS.get("last_value"))
        self.cell_info = info
        if not self.quiet:
            self.start_cell()

    def start_cell(self) -> None:
        """Forgets the last cell's header and failed stages, lets every device warning
        be reported once in the new cell, and tells the buttons which cell runs."""
        self.headed, self.deferred = None, None
        if self.warmer is not None:  # no warm-up step while the cell runs
            self.warmer.cell_started()
        if self.failed:
            self.failed.clear()
        if self._buttons is not None and self._buttons.live:
            self._buttons.new_cell(self.cell_id)
        warned = self.device_warnings
        if warned is not None and warned.busy:
            _guarded("warning panel", warned.new_cell)

    @property
    def cell_id(self) -> str:
        return cell_id_of(self.cell_info, self.shell)

    def post_run_cell(self, result: Any) -> None:
        """The ``post_run_cell`` callback: the warning panels kept until the stock
        output, the full panel when the cell failed with a device error, and watch mode.
        A :attr:`quiet` hook returns at once from a cell that neither raised nor showed
        an exception."""
        if self.quiet:
            try:
                raised = result.error_in_exec is not None
            except AttributeError:  # no result (the cell itself could not run)
                raised = True
            if not raised and id(_SYS.get("last_value")) == self.shown_before:
                return
        try:
            self._finish_cell(result)
        finally:
            self.settle()

    def _finish_cell(self, result: Any) -> None:
        warned = self.device_warnings
        if warned is not None and warned.pending:
            _guarded("warning panel", warned.flush)
        if self.panel:
            exc = cell_exception(result, self.shown_before)
            if exc is not None:
                headed = self.headed
                if headed is None or headed[0] != id(exc):
                    self.diagnose_and_show(exc)
                elif headed[1]:  # the header before the traceback: diagnosed now, replaced
                    self.diagnose_and_show(exc, headed[1])
                self.shown_before = id(exc)  # a cell around a nested run_cell: not again
        self.headed = None
        if self._buttons is not None and self._buttons.busy:
            self._buttons.after_cell()
        if self.watch:
            self.stage("watch", self.watch_cell, result)
        if not self.warmed and "torch" in sys.modules:  # the failing path's imports, once
            self.warmed = self._warm()
        deferred, self.deferred = self.deferred, None
        if deferred is not None:  # a failure before the traceback, raised now (debugging)
            raise deferred

    def _warm(self) -> bool:
        """Schedules the failing path's imports on the kernel's loop, for when it is idle
        (:mod:`ipydevice.integrations.ipython_warm`); True once they are made (or, in a
        terminal, never to be made ahead)."""
        if self.warmer is None:
            from ipydevice.integrations.ipython_warm import Warmer

            widgets = lambda: bool(self.config.widget) and self.in_kernel()  # noqa: E731
            self.warmer = Warmer(getattr(self.shell, "kernel", None), widgets)
        self.warmer.after_cell()
        return self.warmer.done
