"""IPython connectivity: ``%load_ext ipydevice``, the automatic panel and ``%devices``.

The only module of ipydevice that imports IPython: it decides *when* to show
something; ``ipython_display`` decides *what*, ``ipython_magics`` does ``%devices``.

* the **panel**, for a cell that fails with a device error. In a Jupyter kernel a
  compact **header** (headline, best fix) comes *before* IPython's traceback, so
  that it is on screen however long the traceback is, and the full panel comes after
  it; a terminal, which shows the end, gets the report after the traceback only.
  Each is a ``display_data`` with ``text/plain`` and escaped ``text/html`` (what
  exporters keep); the buttons (:mod:`ipydevice.render.widget`) are one widget output
  after the panel, kept and closed by ``ipython_buttons``;
* ``%devices`` (a device-aware ``%whos``) and ``%devices --check`` (every audit);
* device **warnings** get the same panel (``warnings_hook``);
* **watch mode**: a short warning when a cell binds a batch off the model's device;
* ``IPyDevice``: the settings as traitlets (``%config IPyDevice.verbosity = 'Minimal'``).

Hook mechanism. The shell instance's ``_showtraceback`` (the method that puts a
formatted traceback on screen: ``print`` in a terminal, the ``error`` message in
ipykernel) is wrapped for as long as the extension is loaded: in a kernel, just
before the traceback of a cell that just failed goes out, the header is displayed
from the message alone (nothing is diagnosed yet), then the stock method runs with
the stock arguments, so the traceback, ``sys.last_*``, ``%tb``, ``%debug``, ``%pdb`` and the
execute reply are exactly as without ipydevice. ``set_custom_exc`` is not used:
its single slot stays Colab's and Jupyter AI's, and their handlers, which call
``showtraceback``, get the header too. ``%tb`` gets no second header. The
``post_run_cell`` event then diagnoses, replaces the header in place (its display
id) with the headline and best fix, and shows the full panel, or,
when no traceback went through the wrapper (a terminal, a custom handler that
prints its own), diagnoses ``result.error_in_exec`` or a new ``sys.last_value``
(``%run script.py`` shows the script's exception itself).

Contract:

* Loading is instant: it imports neither torch, pandas nor ipywidgets, nor the
  engine (``ipython_warm`` imports them once a cell has imported torch, on the
  kernel's loop while it is idle, never inside a cell).
* Loading twice is harmless; unloading removes the callbacks, the ``_showtraceback``
  wrapper, the configurable and ``%devices`` (putting back any ``%devices`` that was
  there before), puts back ``warnings.showwarning`` and the logging handler, and
  restores the settings in force before loading. ``%config IPyDevice.*`` values
  live in ``shell.config``, so a later reload picks them up again.
* Every stage is guarded: a failure prints one line to stderr (once per cell) and
  the cell's output is otherwise untouched; the traceback always goes out. With
  ``IPYDEVICE_DEBUG=1`` a failure after the traceback is raised (IPython prints
  ``Error in callback ...``); one before it is retried after the traceback and
  raised there, never in the way of the user's traceback.
* Only the last Diagnosis (strings only) is kept, for ``%devices --last``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from traitlets.config import Configurable

from ipydevice._debug import contain, debug_enabled, describe_failure, failure_line, is_interrupt
from ipydevice.integrations import ipython_magics as magics
from ipydevice.integrations.ipython_cells import CellCallbacks
from ipydevice.integrations.ipython_config import IPyDevice
from ipydevice.integrations.ipython_display import (
    cell_bound_names,
    is_device_error,
    panel_bundle,
    restore_settings,
    settings_in_force,
    watch_bundle,
    watch_checkup,
)
from ipydevice.integrations.ipython_display import guarded as _guarded

if TYPE_CHECKING:  # pragma: no cover
    from IPython.core.interactiveshell import ExecutionResult, InteractiveShell

    from ipydevice.audits.checkup import Checkup
    from ipydevice.integrations.warnings_hook import DeviceWarnings
    from ipydevice.model import Diagnosis, Fix, Inventory

__all__ = [
    "DeviceMagics",
    "IPyDevice",
    "cell_bound_names",
    "hook_of",
    "load",
    "panel_bundle",
    "unload",
    "watch_bundle",
]

MAGIC_NAME = "devices"

_T = TypeVar("_T")
_MISSING = object()


# -- the panel -----------------------------------------------------------------------------


def _as_usage_error(stage: str, func: Callable[..., _T], *args: Any) -> _T:
    """Runs a magic's work; an internal failure becomes a one-line UsageError
    (IPython prints it without a traceback), unless debugging. KeyError (a name
    that is not there) is the caller's to word."""
    try:
        return func(*args)
    except KeyError:
        raise
    except BaseException as failure:
        contain(failure)  # SystemExit too (see ipydevice._debug); Ctrl-C is IPython's
        raise UsageError(failure_line(stage, failure)) from None


def _colors(shell: Any) -> Any:
    return getattr(shell, "colors", None)  # IPython's scheme: NoColor turns colour off


def _publish(bundle: dict[str, Any], display_id: str | None = None, update: bool = False) -> None:
    from IPython.display import display

    display(bundle, raw=True, display_id=display_id, **({"update": True} if update else {}))


class _Hook(CellCallbacks):
    """What :func:`load` installed in one shell, and how to take it back; the cell
    callbacks and their state are :class:`~ipydevice.integrations.ipython_cells.CellCallbacks`."""

    shell: InteractiveShell

    def __init__(self, shell: InteractiveShell) -> None:
        self.shell = shell
        self.saved_settings = settings_in_force()
        manager = shell.magics_manager
        self.saved_magic = manager.magics["line"].get(MAGIC_NAME)
        self.saved_registry = manager.registry.get(DeviceMagics.__name__)
        self.saved_showtraceback = vars(shell).get("_showtraceback", _MISSING)
        self.stock_showtraceback: Callable[..., Any] = shell._showtraceback
        self.config = IPyDevice(parent=shell)
        self.magics = DeviceMagics(shell, hook=self)
        self.callbacks: dict[str, Callable[..., Any]] = {
            "pre_run_cell": self.pre_run_cell,
            "post_run_cell": self.post_run_cell,
        }
        self.last: Diagnosis | None = None
        self.device_warnings: DeviceWarnings | None = None
        self.panel, self.watch = True, False  # IPyDevice.panel and .watch, kept in step
        self.active = False
        self._buttons: Any = None  # :attr:`buttons`, made with the first widget
        CellCallbacks.__init__(self)  # the per-cell state

    def install(self) -> None:
        """Registers the configurable, ``%devices``, the cell callbacks, the
        ``_showtraceback`` wrapper, the report of threads' device errors
        (``threading.excepthook``) and, unless ``IPyDevice.warnings`` is off, the
        device-warning hooks."""
        cast("list[Configurable]", self.shell.configurables).append(self.config)
        self.shell.register_magics(self.magics)
        for event, callback in self.callbacks.items():
            self.shell.events.register(event, callback)
        self.config.observe(self._warnings_changed, names="warnings")
        self.config.observe(self._switches_changed, names=["panel", "watch"])
        self._switches_changed()
        self.shell._showtraceback = self.show_traceback  # type: ignore[method-assign]
        self.active = True
        if self.config.warnings:
            self.install_warnings()
        from ipydevice.integrations.excepthook import install_threads

        shell = self.shell
        install_threads(lambda: shell.user_ns)  # a thread's device error, after its traceback

    def _switches_changed(self, change: Mapping[str, Any] | None = None) -> None:
        # Read by the callbacks of every cell: plain attributes, not traitlets lookups.
        self.panel, self.watch = self.config.panel, self.config.watch
        self.settle()

    def install_warnings(self) -> None:
        """Chains ``warnings.showwarning`` and adds the library loggers' handler."""
        if self.device_warnings is None:
            from ipydevice.integrations.warnings_hook import DeviceWarnings

            shell = self.shell
            self.device_warnings = DeviceWarnings(
                self.show_warning, lambda: shell.user_ns, touched=self.unsettle
            )
        self.device_warnings.install()

    def remove_warnings(self) -> None:
        """Puts ``warnings.showwarning`` back and removes the handler and filter."""
        if self.device_warnings is not None:
            self.device_warnings.remove()

    def _warnings_changed(self, change: Mapping[str, Any]) -> None:
        if change["new"]:
            self.install_warnings()
        else:
            self.remove_warnings()

    def remove(self) -> None:
        """Undoes :meth:`install` and puts back the settings in force before loading."""
        self.active = False
        self.remove_warnings()
        from ipydevice.integrations.excepthook import uninstall_threads

        uninstall_threads()
        if vars(self.shell).get("_showtraceback") == self.show_traceback:
            if self.saved_showtraceback is _MISSING:
                del self.shell._showtraceback
            else:
                self.shell._showtraceback = self.saved_showtraceback  # type: ignore[method-assign]
        # else: wrapped again since, by someone else; ours stays in their chain, inactive.
        with contextlib.suppress(ValueError, KeyError):  # install failed before observing
            self.config.unobserve(self._warnings_changed, names="warnings")
        with contextlib.suppress(ValueError, KeyError):
            self.config.unobserve(self._switches_changed, names=["panel", "watch"])
        for event, callback in self.callbacks.items():
            registered = self.shell.events.callbacks[event]
            if callback in registered:
                registered.remove(callback)
        for configurable in (self.config, self.magics):  # register_magics appends the magics too
            if configurable in self.shell.configurables:
                cast("list[Configurable]", self.shell.configurables).remove(configurable)
        manager = self.shell.magics_manager
        manager.magics["line"].pop(MAGIC_NAME, None)
        if self.saved_magic is not None:
            manager.magics["line"][MAGIC_NAME] = self.saved_magic
        manager.registry.pop(DeviceMagics.__name__, None)
        if self.saved_registry is not None:
            manager.registry[DeviceMagics.__name__] = self.saved_registry
        restore_settings(self.saved_settings)
        self.last = None
        if self._buttons is not None:  # made with the first buttons' widget
            self._buttons.unload()
        if self.warmer is not None:  # no further warm-up step on the kernel's loop
            self.warmer.stop()

    # -- stages ----------------------------------------------------------------------------

    def stage(
        self, name: str, func: Callable[..., _T], *args: Any, before: bool = False
    ) -> _T | None:
        """Runs one stage; a failure is one line on stderr, once per cell per stage.

        With ``IPYDEVICE_DEBUG=1`` it is raised instead, except ``before`` the
        traceback: then it returns None and the stage runs again after the traceback.
        """
        try:
            return func(*args)
        except BaseException as failure:  # contained, whatever it is (ipydevice._debug)
            if debug_enabled() and not is_interrupt(failure):
                if before and isinstance(failure, Exception):
                    self.deferred = self.deferred or failure
                    self.quiet = False
                    return None
                raise
            # A Ctrl-C stops ipydevice's work: letting it through would print
            # ipydevice's traceback and make it sys.last_value.
            self._report(name, describe_failure(name, failure))
        return None

    def _report(self, name: str, line: str) -> None:
        self.quiet = False
        if name not in self.failed:
            self.failed.add(name)
            print(line, file=sys.stderr)

    def verbosity(self) -> str:
        """The verbosity in force: ``IPyDevice.verbosity``, else what ``%xmode`` implies."""
        from ipydevice.settings import current, verbosity_for

        xmode = getattr(getattr(self.shell, "InteractiveTB", None), "mode", None)
        return verbosity_for(current().verbosity, xmode if isinstance(xmode, str) else None)

    # -- the traceback and the panel -------------------------------------------------------

    @property
    def buttons(self) -> Any:  # ipython_buttons.Buttons, imported with the first widget
        if self._buttons is None:
            from ipydevice.integrations.ipython_buttons import Buttons

            self._buttons = Buttons(self.shell, lambda b: self.stage("display", _publish, b))
        return self._buttons

    def show_traceback(self, etype: Any, evalue: Any, stb: Any) -> Any:
        """Wraps the shell's ``_showtraceback``: in a kernel, the header of a device
        error goes out first; then the stock method, with the stock arguments."""
        failure: BaseException | None = None
        try:
            if (
                self.active
                and self.panel
                and self.headed is None
                and id(evalue) != self.shown_before  # not %tb showing an old one again
                and isinstance(evalue, BaseException)
                and self.in_kernel()
            ):
                self.show_header(evalue)
        except BaseException as exc:  # the stages report their own; this is a last resort
            failure = exc  # contained (ipydevice._debug), said after the traceback
        shown = self.stock_showtraceback(etype, evalue, stb)
        if failure is not None:
            self._report("header", describe_failure("header", failure))
        return shown

    def show_header(self, exc: BaseException) -> None:
        """Displays the header of a device error before its traceback, from its message
        alone; the diagnosis runs after the traceback and replaces it in place."""
        from ipydevice.integrations.ipython_display import pending_header_bundle

        recognised = self.stage("recognition", is_device_error, exc, before=True)
        if recognised is None:  # failed: reported once (or retried after the traceback)
            if not debug_enabled():
                self.headed = (id(exc), "")
                self.quiet = False
            return
        bundle = (
            self.stage("rendering", pending_header_bundle, exc, before=True) if recognised else None
        )
        if recognised and bundle is None:
            return  # diagnosed and shown after the traceback, as in a terminal
        header = f"ipydevice-header-{os.urandom(6).hex()}" if bundle is not None else ""
        if header:
            self.stage("display", _publish, bundle, header, before=True)
            if "display" in self.failed or self.deferred is not None:
                return  # no header went out: the panel after the traceback, as in a terminal
        self.headed = (id(exc), header)
        self.quiet = False

    def show_warning(self, diagnosis: Diagnosis) -> None:
        """Displays a device warning's panel (called by :mod:`ipydevice.integrations.warnings_hook`)."""
        terminal = not self.in_kernel()
        diagnosis = dataclasses.replace(diagnosis, kind="warning")
        bundle = _guarded(
            "rendering", panel_bundle, diagnosis, terminal, "Context", _colors(self.shell)
        )
        if bundle is None:
            return
        _guarded("display", _publish, bundle)
        if self.config.widget and not terminal and diagnosis.fixes:
            _guarded("widget", self.buttons.show, diagnosis, None, self.cell_id, False)

    def watch_cell(self, result: ExecutionResult) -> None:
        """Watch mode: see :func:`ipydevice.integrations.ipython_display.watch_checkup`."""
        checkup = watch_checkup(self.shell, result)
        if checkup:
            _publish(watch_bundle(checkup))

    def diagnose_and_show(self, exc: BaseException, header: str = "") -> None:
        """Diagnoses ``exc`` after its traceback and displays the panel; replaces the
        ``header`` shown before the traceback (its display id) with the diagnosis'."""
        from ipydevice.integrations.ipython_display import header_bundle

        if not header and not self.stage("recognition", is_device_error, exc):
            return
        diagnosis = self.stage("diagnosis", self.diagnose, exc)
        if diagnosis is None or not diagnosis.is_device_error:
            if header:  # nothing to say after all: the header goes
                self.stage("display", _publish, {"text/plain": "", "text/html": ""}, header, True)
            return
        self.last = diagnosis
        if header:
            below = self.verbosity() != "Minimal"
            bundle = self.stage("rendering", header_bundle, diagnosis, below)
            if bundle is not None:
                self.stage("display", _publish, bundle, header, True)
        self.show_panel(diagnosis, headed=bool(header))

    def show_panel(self, diagnosis: Diagnosis, headed: bool) -> None:
        """The panel after the traceback, at the verbosity in force (in a kernel under
        Minimal, nothing more when the header went out before it), then the buttons."""
        kernel = self.in_kernel()
        verbosity = self.verbosity()
        fixes: list[Fix] | None = None
        if kernel and verbosity == "Minimal":
            from ipydevice.integrations.ipython_display import best_fix, header_bundle

            fix = best_fix(diagnosis)
            fixes = [fix] if fix is not None else []
            bundle = None if headed else self.stage("rendering", header_bundle, diagnosis, False)
        else:
            args = (diagnosis, not kernel, verbosity, _colors(self.shell), headed)
            bundle = self.stage("rendering", panel_bundle, *args)
        if bundle is not None:
            self.stage("display", _publish, bundle)
        if bundle is not None or headed:
            if kernel:
                self.show_buttons(diagnosis, fixes)
            if self.config.insert_fix_cell:
                self.stage("fix cell", self.insert_fix, diagnosis)
        plugins = sys.modules.get("ipydevice.plugins")
        if plugins is not None:  # imported by registering a listener, or nothing to call
            self.stage("listeners", plugins.notify, diagnosis)

    def show_buttons(self, diagnosis: Diagnosis, fixes: list[Fix] | None) -> None:
        """The buttons' widget output (one per panel, after it), when ``IPyDevice.widget``
        is on and there are fixes; they reach the namespace only when clicked."""
        if self.config.widget and (diagnosis.fixes if fixes is None else fixes):
            self.stage("widget", self.buttons.show, diagnosis, fixes, self.cell_id)

    def diagnose(self, exc: BaseException) -> Diagnosis:
        """:func:`ipydevice.pipeline.engine.diagnose` against the shell's namespace."""
        from ipydevice.pipeline import engine

        warned = self.device_warnings  # (the cell's device warnings: a demand of theirs decides)
        texts = tuple(warned.texts) if warned is not None else ()
        return engine.diagnose(exc, namespace=self.shell.user_ns, warned=texts)

    def insert_fix(self, diagnosis: Diagnosis) -> None:
        """Puts the best namespace or cell fix into the next input (a new cell below)."""
        fix = next(
            (f for f in diagnosis.fixes if f.scope in ("namespace", "cell") and f.code), None
        )
        if fix is not None:
            self.shell.set_next_input(fix.code, replace=False)  # a new cell below

    def last_diagnosis(self) -> Diagnosis:
        """The last device error's diagnosis, or the last exception's when none was kept.

        Raises:
            UsageError: no device error has happened (or it was not kept).
        """
        if self.last is not None:
            return self.last
        from ipydevice.pipeline import engine

        exc = engine.last_exception()
        if exc is not None and is_device_error(exc):
            self.last = _as_usage_error("%devices --last", self.diagnose, exc)
            return self.last
        raise UsageError("%devices --last: no device error to show yet")


# -- %devices ------------------------------------------------------------------------------


@functools.cache
def devices_parser() -> Any:
    """``%devices``' argument parser, built on first use: building it (argparse,
    gettext) would cost ``%load_ext`` a few milliseconds. The usage and options in
    :meth:`DeviceMagics.devices`' docstring (what ``%devices?`` shows) are this
    parser's help, written out; ``tests/test_ipython.py`` checks they agree."""
    from IPython.core.magic_arguments import argument, magic_arguments

    @magic_arguments()
    @argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="Inspect these objects in depth (a module's device map by submodule path). "
        "Attribute and item paths work: model.encoder, batch['x'].",
    )
    @argument(
        "--last", action="store_true", help="Show the diagnosis of the last device error again."
    )
    @argument(
        "--check",
        action="store_true",
        help="Preflight: run every device audit on the NAMEs (or the whole namespace) and "
        "list the problems with their fixes, before training starts.",
    )
    @argument(
        "-a", "--all", action="store_true", help="Also list names starting with an underscore."
    )
    def devices(line: str = "") -> None:
        """Where everything lives: tensors, modules, optimizers and containers by device."""

    return devices.parser


@magics_class
class DeviceMagics(Magics):
    """The ``%devices`` magic; a thin adapter over :func:`ipydevice.inventory`."""

    shell: InteractiveShell  # always given (Magics allows None)

    def __init__(self, shell: InteractiveShell, hook: _Hook) -> None:
        super().__init__(shell)
        self._hook = hook

    @line_magic
    def devices(self, line: str = "") -> Any:
        args = devices_parser().parse_argstring(line)
        if args.check:
            if args.last or args.all:
                raise UsageError("%devices: --check takes neither --last nor --all")
            return self._check(args.names)
        if args.last:
            if args.names:
                raise UsageError("%devices: --last takes no NAME")
            return self._hook.last_diagnosis()
        return self._inventory(args.names, include_private=args.all)

    def _require_names(self, names: list[str]) -> None:
        try:
            magics.require_names(self.shell.user_ns, names)
        except magics.MagicError as problem:
            raise UsageError(str(problem)) from None

    def _check(self, names: list[str]) -> Checkup | None:
        """``%devices --check``: plain names are checked by name, paths are resolved."""
        self._require_names(names)
        try:
            run = magics.checkup(self.shell.user_ns, names)
        except magics.MagicError as problem:
            raise UsageError(str(problem)) from None
        return _guarded("check", run)

    def _inventory(self, names: list[str], include_private: bool) -> Inventory:
        from ipydevice.pipeline import inventory as census

        namespace = self.shell.user_ns
        self._require_names(names)
        try:
            return _as_usage_error(
                "%devices", census.inventory, namespace, names or None, include_private
            )
        except KeyError as missing:
            name = missing.args[0] if missing.args else "?"
            raise UsageError(f"%devices: {name!r} has no such attribute or item") from None


DeviceMagics.devices.__doc__ = magics.DEVICES_HELP


# -- load / unload -------------------------------------------------------------------------

_HOOKS: dict[int, _Hook] = {}


def load(shell: InteractiveShell) -> None:
    """Installs the panel hook, ``%devices`` and ``IPyDevice`` in ``shell``; twice is harmless."""
    if id(shell) in _HOOKS:
        return
    hook = _Hook(shell)
    try:
        hook.install()
    except BaseException:
        hook.remove()
        raise
    _HOOKS[id(shell)] = hook


def unload(shell: InteractiveShell) -> None:
    """Puts ``shell`` back as it was before :func:`load`; harmless when not loaded."""
    hook = _HOOKS.pop(id(shell), None)
    if hook is not None:
        hook.remove()


def hook_of(shell: InteractiveShell) -> _Hook | None:
    """The hook :func:`load` installed in ``shell``, if any (for tests and tools)."""
    return _HOOKS.get(id(shell))
