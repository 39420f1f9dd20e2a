"""IPython connectivity: ``%load_ext ipydevice``, the automatic panel and ``%devices``.

This is the only module of ipydevice that imports IPython. It adapts the pure core
(:mod:`ipydevice.engine`, :mod:`ipydevice.census`, the renderers) to a shell:

* the **panel**: after a cell fails with a device error, one display output
  carrying ``text/plain`` and escaped ``text/html`` (plus the widget view of
  :mod:`ipydevice.widget` in a Jupyter kernel) appears under IPython's own
  traceback;
* ``%devices``: a device-aware ``%whos`` (see :meth:`DeviceMagics.devices`);
  ``%devices --check`` runs every audit of :mod:`ipydevice.audits` before
  training starts;
* device **warnings** (transformers' ``generate()`` device warning, accelerate's
  dispatch and offload warnings, torch's meta ``load_state_dict`` no-op) get the
  same panel, under the stock warning (:mod:`ipydevice.warnings_hook`;
  ``IPyDevice.warnings``, on by default);
* **watch mode** (``%config IPyDevice.watch = True``, off by default): after each
  successful cell, one short warning when a model and a batch-like variable the
  cell bound are on different devices (metadata only, see :meth:`_Hook.watch_cell`);
* ``IPyDevice``: the settings as traitlets (``%config IPyDevice.panel = False``,
  ``c.IPyDevice.max_rows = 30`` in a config file).

Hook mechanism: the ``post_run_cell`` event, reading ``result.error_in_exec``.
IPython fires it once per non-silent cell, after ``run_code`` has shown the stock
traceback and set ``sys.last_*``. ipykernel fires it inside the same execute
request, so the panel's ``display_data`` carries that request's parent header and
arrives right after the cell's ``error`` output, before the kernel goes idle
(checked in ``tests/test_kernel.py``). Chosen over ``set_custom_exc`` because it
changes nothing IPython does with the exception: the traceback, ``sys.last_*``,
``%tb``, ``%debug``, ``%pdb`` and the execute reply are exactly as without
ipydevice, and the single ``set_custom_exc`` slot that Colab and Jupyter AI use
stays theirs. It also makes "never lose the user's traceback" structural: the
traceback is printed before ipydevice runs at all. A ``pre_run_cell`` callback
notes the ``id`` of ``sys.last_value`` so that an exception a magic caught and
showed itself (``%run script.py``) gets a panel too.

Contract:

* Loading is instant: it imports neither torch, pandas nor ipywidgets, nor the
  engine (imported on the first failing cell only).
* Loading twice is harmless; unloading removes the callbacks, the configurable and
  ``%devices`` (putting back any ``%devices`` that was there before), puts back
  ``warnings.showwarning`` and removes the logging handler and filter, and
  restores the settings that were in force before loading. IPython has no API to
  unregister a magic, so ``%devices`` is popped from ``magics_manager.magics``.
  ``%config IPyDevice.*`` values live in ``shell.config`` like every IPython
  configurable's, so a later reload picks them up again.
* Every stage of the panel is guarded: a failure prints one line to stderr and
  the cell's output is otherwise untouched. With ``IPYDEVICE_DEBUG=1`` the failure
  is raised instead; IPython's event manager then prints
  ``Error in callback ...`` and shows ipydevice's traceback after the user's own
  (which also makes ``sys.last_value`` the ipydevice failure: debugging only).
* Only the last :class:`~ipydevice.model.Diagnosis` (strings only) is kept, for
  ``%devices --last``; never the exception, its traceback or any tensor.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import re
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from traitlets import Bool, Float, Int, default, observe
from traitlets.config import Configurable

from ipydevice._debug import contain, failure_line

if TYPE_CHECKING:  # pragma: no cover
    from IPython.core.interactiveshell import ExecutionResult, InteractiveShell

    from ipydevice.audits.checkup import Checkup
    from ipydevice.collect.inventory import Inventory
    from ipydevice.integrations.warnings_hook import DeviceWarnings
    from ipydevice.model import Diagnosis
    from ipydevice.settings import Settings

__all__ = [
    "DeviceMagics",
    "IPyDevice",
    "hook_of",
    "load",
    "panel_bundle",
    "unload",
    "watch_bundle",
]

MAGIC_NAME = "devices"

#: The :class:`~ipydevice.settings.Settings` fields mirrored as ``IPyDevice`` traits.
SETTING_TRAITS = (
    "max_rows",
    "max_depth",
    "max_items",
    "max_objects",
    "max_frames",
    "max_modules",
    "max_fixes",
    "show_library_frames",
    "time_budget",
)

_T = TypeVar("_T")


# -- settings, the traitlets way -----------------------------------------------------------


def _from_settings(name: str) -> Any:
    """A trait default that reads the setting in force, so ``%config`` shows the truth."""

    @default(name)
    def _default(self: Configurable) -> Any:
        from ipydevice.settings import current

        return getattr(current(), name)

    return _default


def _limit(help_text: str) -> Int:
    return Int(min=1, help=help_text).tag(config=True)


class IPyDevice(Configurable):
    """ipydevice's settings: ``%config IPyDevice.<name> = value`` or ``c.IPyDevice.<name>``.

    The limits mirror :class:`ipydevice.settings.Settings`; a change here calls
    :func:`ipydevice.settings.configure`.
    """

    panel = Bool(True, help="Show a diagnosis panel under every device error.").tag(config=True)
    widget = Bool(
        True,
        help="In a Jupyter kernel, add the interactive view (Apply, Copy, Insert buttons) "
        "to the panel; frontends without widgets show its HTML or text.",
    ).tag(config=True)
    insert_fix_cell = Bool(
        False, help="After a device error, put the best fix's code into the next input cell."
    ).tag(config=True)
    warnings = Bool(
        True,
        help="Show the panel under device warnings too: transformers' generate() device "
        "warning, accelerate's dispatch/offload warnings, torch's meta load_state_dict no-op.",
    ).tag(config=True)
    watch = Bool(
        False,
        help="After each successful cell, warn once when a model and a batch-like variable "
        "the cell defined are on different devices (metadata only).",
    ).tag(config=True)
    max_rows = _limit("Rows shown in a table before '… N more'.")
    max_depth = _limit("How deep containers and attribute chains are followed.")
    max_items = _limit("Items looked at in one container.")
    max_objects = _limit("Objects visited in one scan.")
    max_frames = _limit("Traceback frames walked, innermost first.")
    max_modules = _limit("Submodules walked in one module tree.")
    max_fixes = _limit("Fixes proposed in one diagnosis.")
    show_library_frames = Bool(help="Also list tensors held only by library frames.").tag(
        config=True
    )
    time_budget = Float(
        min=0.001,
        help="Wall-clock seconds the user code a scan cannot avoid (slow tensor-subclass "
        "properties) may take; then the scan stops and says so.",
    ).tag(config=True)

    _max_rows_default = _from_settings("max_rows")
    _max_depth_default = _from_settings("max_depth")
    _max_items_default = _from_settings("max_items")
    _max_objects_default = _from_settings("max_objects")
    _max_frames_default = _from_settings("max_frames")
    _max_modules_default = _from_settings("max_modules")
    _max_fixes_default = _from_settings("max_fixes")
    _show_library_frames_default = _from_settings("show_library_frames")
    _time_budget_default = _from_settings("time_budget")

    @observe(*SETTING_TRAITS)
    def _push_setting(self, change: Mapping[str, Any]) -> None:
        from ipydevice.settings import configure

        configure(**{change["name"]: change["new"]})


def _settings_in_force() -> Settings | None:
    """The settings in force; ``None`` while :mod:`ipydevice.settings` is not imported
    (nothing can have changed them, so the defaults are in force). Loading does not
    import it: creating its dataclass would cost ``%load_ext`` a millisecond."""
    module = sys.modules.get("ipydevice.settings")
    return None if module is None else module.current()


def _restore_settings(saved: Settings | None) -> None:
    module = sys.modules.get("ipydevice.settings")
    if module is None:  # never imported: the defaults are still in force
        return
    if saved is None:
        saved = module.Settings()
    module.configure(**{f.name: getattr(saved, f.name) for f in dataclasses.fields(saved)})


# -- the panel -----------------------------------------------------------------------------


def _guarded(stage: str, func: Callable[..., _T], *args: Any) -> _T | None:
    """Runs one stage; a failure becomes one line on stderr (or is raised when debugging)."""
    try:
        return func(*args)
    except BaseException as failure:
        # Contained, whatever it is (see ipydevice._debug). A Ctrl-C while
        # ipydevice works stops it: the user's traceback is out already, and
        # letting it through would print ipydevice's and make it sys.last_value.
        print(failure_line(stage, failure), file=sys.stderr)
        return None


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


def _is_device_error(exc: BaseException) -> bool:
    """The cheap pre-filter: a regex over the message chain, no torch needed."""
    from ipydevice.diagnosis import engine

    return engine.recognise_exception(exc)[1].is_device_error


def panel_bundle(diagnosis: Diagnosis, terminal: bool = False) -> dict[str, str]:
    """The panel's single display output: plain text for terminals, escaped HTML for the rest.

    In terminal IPython the text fits the terminal's width and is coloured when
    stdout is a TTY and ``NO_COLOR`` is unset.
    """
    text = str(diagnosis)
    if terminal:
        from ipydevice.integrations.excepthook import terminal_style
        from ipydevice.render.text import render_diagnosis

        width, color = terminal_style(sys.stdout)
        text = render_diagnosis(diagnosis, width=width, color=color)
    return {"text/plain": text, "text/html": diagnosis._repr_html_()}


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


def cell_bound_names(shell: InteractiveShell, raw_cell: str) -> set[str]:
    """The names a cell binds at its top level, from its source (nothing is run).

    The cell is first turned into Python the way IPython does (magics, ``!cmd``);
    a cell that does not parse binds nothing.
    """
    from ipydevice.collect.frames import bound_names

    try:
        source = shell.transform_cell(raw_cell)
        tree = ast.parse(source)
    except (SyntaxError, ValueError, TypeError):
        return set()
    return bound_names(tree)


def _publish(bundle: dict[str, str]) -> None:
    from IPython.display import display

    display(bundle, raw=True)


class _Hook:
    """What :func:`load` installed in one shell, and how to take it back."""

    def __init__(self, shell: InteractiveShell) -> None:
        self.shell = shell
        self.saved_settings = _settings_in_force()
        manager = shell.magics_manager
        self.saved_magic = manager.magics["line"].get(MAGIC_NAME)
        self.saved_registry = manager.registry.get(DeviceMagics.__name__)
        self.config = IPyDevice(parent=shell)
        self.magics = DeviceMagics(shell, hook=self)
        self.callbacks: dict[str, Callable[..., Any]] = {
            "pre_run_cell": self.pre_run_cell,
            "post_run_cell": self.post_run_cell,
        }
        self.shown_before = id(vars(sys).get("last_value"))
        self.last: Diagnosis | None = None
        self.device_warnings: DeviceWarnings | None = None
        self.panel, self.watch = True, False  # IPyDevice.panel and .watch, kept in step

    def install(self) -> None:
        """Registers the configurable, ``%devices``, the cell callbacks and, unless
        ``IPyDevice.warnings`` is off, the device-warning hooks."""
        cast("list[Configurable]", self.shell.configurables).append(self.config)
        self.shell.register_magics(self.magics)
        for event, callback in self.callbacks.items():
            self.shell.events.register(event, callback)
        self.config.observe(self._warnings_changed, names="warnings")
        self.config.observe(self._switches_changed, names=["panel", "watch"])
        self._switches_changed()
        if self.config.warnings:
            self.install_warnings()

    def _switches_changed(self, change: Mapping[str, Any] | None = None) -> None:
        # Read by the callbacks of every cell: plain attributes, not traitlets lookups.
        self.panel, self.watch = self.config.panel, self.config.watch

    def install_warnings(self) -> None:
        """Chains ``warnings.showwarning`` and adds the library loggers' handler."""
        if self.device_warnings is None:
            from ipydevice.integrations.warnings_hook import DeviceWarnings

            shell = self.shell
            self.device_warnings = DeviceWarnings(self.show_warning, lambda: shell.user_ns)
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
        self.remove_warnings()
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
        _restore_settings(self.saved_settings)
        self.last = None

    def pre_run_cell(self, info: Any = None) -> None:
        """The ``pre_run_cell`` callback: notes which exception was last shown, by id
        only, and lets every device warning be reported once in the new cell."""
        self.shown_before = id(vars(sys).get("last_value"))
        warned = self.device_warnings
        if warned is not None and (warned.seen or warned.pending):
            _guarded("warning panel", warned.new_cell)

    def post_run_cell(self, result: ExecutionResult) -> None:
        """The ``post_run_cell`` callback: the warning panels kept until the stock
        output, a panel when the cell failed with a device error, and watch mode."""
        warned = self.device_warnings
        if warned is not None and warned.pending:
            _guarded("warning panel", warned.flush)
        if self.panel:
            exc = self.cell_exception(result)
            if exc is not None:
                self.show_panel(exc)
        if self.watch:
            _guarded("watch", self.watch_cell, result)

    def show_warning(self, diagnosis: Diagnosis) -> None:
        """Displays a device warning's panel (called by :mod:`ipydevice.warnings_hook`)."""
        terminal = getattr(self.shell, "kernel", None) is None
        diagnosis = dataclasses.replace(diagnosis, kind="warning")
        bundle = _guarded("rendering", panel_bundle, diagnosis, terminal)
        if bundle is None:
            return
        if self.config.widget and not terminal:
            view = _guarded("widget", self.widget_view, diagnosis)
            bundle = {**(view or {}), **bundle}
        _guarded("display", _publish, bundle)

    def watch_cell(self, result: ExecutionResult) -> None:
        """Watch mode: the names a successful cell bound, checked against the model.

        Cost independent of the model's size: the cell's source is parsed for the
        names it binds, and :func:`ipydevice.audits.watch` reads the device of one
        parameter of the model and of those names' tensors only.
        """
        if not getattr(result, "success", False):
            return
        raw = getattr(getattr(result, "info", None), "raw_cell", None)
        if not isinstance(raw, str) or not raw.strip():
            return
        names = cell_bound_names(self.shell, raw)
        if not names:
            return
        from ipydevice.audits import checkup as audits

        checkup = audits.watch(self.shell.user_ns, sorted(names))
        if checkup:
            _publish(watch_bundle(checkup))

    def cell_exception(self, result: ExecutionResult) -> BaseException | None:
        """The exception the cell raised or, failing that, one it showed.

        ``%run script.py`` and other magics catch the script's exception and show
        it themselves, so ``error_in_exec`` stays empty; ``sys.last_value`` then
        holds a new exception. Only its ``id`` is compared: holding the previous
        exception would keep its frames (and tensors) alive while the user frees them.
        """
        exc = getattr(result, "error_in_exec", None)
        if exc is not None:
            return exc
        shown = vars(sys).get("last_value")
        # type(), not isinstance(): sys.last_value may be anything, a lying __class__ too.
        if issubclass(type(shown), BaseException) and id(shown) != self.shown_before:
            return shown
        return None

    def show_panel(self, exc: BaseException) -> None:
        """Diagnoses ``exc`` and displays the panel; each stage guarded."""
        if not _guarded("recognition", _is_device_error, exc):
            return
        diagnosis = _guarded("diagnosis", self.diagnose, exc)
        if diagnosis is None or not diagnosis.is_device_error:
            return
        self.last = diagnosis
        terminal = getattr(self.shell, "kernel", None) is None
        bundle = _guarded("rendering", panel_bundle, diagnosis, terminal)
        if bundle is not None:
            if self.config.widget and getattr(self.shell, "kernel", None) is not None:
                view = _guarded("widget", self.widget_view, diagnosis)
                bundle = {**(view or {}), **bundle}
            _guarded("display", _publish, bundle)
            if self.config.insert_fix_cell:
                _guarded("fix cell", self.insert_fix, diagnosis)
        plugins = sys.modules.get("ipydevice.plugins")
        if plugins is not None:  # imported by registering a listener, or nothing to call
            _guarded("listeners", plugins.notify, diagnosis)

    def widget_view(self, diagnosis: Diagnosis) -> dict[str, Any]:
        """The widget's own mime types; its buttons reach the namespace only when clicked."""
        from ipydevice.render.widget import build_panel, view_bundle

        shell = self.shell
        return view_bundle(build_panel(diagnosis, lambda: shell.user_ns, self.insert_code))

    def insert_code(self, code: str) -> None:
        """Queues ``code`` as a new cell below (``set_next_input``)."""
        self.shell.set_next_input(code, replace=False)

    def diagnose(self, exc: BaseException) -> Diagnosis:
        """:func:`ipydevice.engine.diagnose` against the shell's namespace."""
        from ipydevice.diagnosis import engine

        return engine.diagnose(exc, namespace=self.shell.user_ns)

    def insert_fix(self, diagnosis: Diagnosis) -> None:
        """Puts the best namespace or cell fix into the next input (a new cell below)."""
        fix = next(
            (f for f in diagnosis.fixes if f.scope in ("namespace", "cell") and f.code), None
        )
        if fix is not None:
            self.insert_code(fix.code)

    def last_diagnosis(self) -> Diagnosis:
        """The last device error's diagnosis, or the last exception's when none was kept.

        Raises:
            UsageError: no device error has happened (or it was not kept).
        """
        if self.last is not None:
            return self.last
        from ipydevice.diagnosis import engine

        exc = engine.last_exception()
        if exc is not None and _is_device_error(exc):
            self.last = _as_usage_error("%devices --last", self.diagnose, exc)
            return self.last
        raise UsageError("%devices --last: no device error to show yet")


# -- %devices ------------------------------------------------------------------------------

_ROOT_NAME = re.compile(r"\s*([^\W\d]\w*)")


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
        """::

          %devices [--last] [--check] [-a] [NAME ...]

        Where everything lives: tensors, modules, optimizers and containers by device.

        Lists the namespace grouped by device, with counts and bytes per device,
        one line per object (a module is one line with its device breakdown), and
        the problems found: a module split across devices, a tensor attribute
        .to() will not move, optimizer state away from its parameters, a tensor on
        another device than the model. Only metadata is read.

        Returns an object: after ``inv = %devices``, ``inv.table()`` is a pandas
        DataFrame, ``inv.problems`` the findings; ``%devices --last`` returns the
        last device error's Diagnosis.

        ``%devices --check [NAME ...]`` is the preflight: every audit (split
        modules, tensor attributes .to() skips, plain module lists, factory calls
        without device=, optimizer state, dispatched models, DataLoader
        generators, DataParallel, batches away from the model) on the NAMEs or
        the whole namespace. It lists the problems with their fixes, or says that
        none were found; ``c = %devices --check`` keeps the Checkup (falsy when
        all is well).

        Settings: ``%config IPyDevice.<name> = value``, or ``c.IPyDevice.<name>`` in a
        config file; ``%config IPyDevice`` shows the values in force.

          panel                 a panel under every device error (default True)
          widget                in Jupyter, the panel's Apply/Copy/Insert buttons (True)
          insert_fix_cell       put the best fix into a new cell below (False)
          warnings              a panel under device warnings too (True)
          watch                 after each cell, warn when a batch it defined is
                                on another device than the model (False)
          max_rows              rows shown in a table before "… N more"
          max_depth             how deep containers and attributes are followed
          max_items             items looked at in one container
          max_objects           objects visited in one scan
          max_frames            traceback frames walked, innermost first
          max_modules           submodules walked in one module tree
          max_fixes             fixes proposed in one diagnosis
          show_library_frames   also list tensors held only by library frames
          time_budget           seconds a scan may spend in user code it cannot
                                avoid (slow tensor-subclass properties); then it
                                stops and says so (2.0)

        Examples: ``%devices``, ``%devices model opt``, ``%devices model.encoder``,
        ``%devices --last``, ``%devices --check``, ``%devices --check model batch opt``,
        ``%config IPyDevice.panel = False``, ``%config IPyDevice.watch = True``.

        positional arguments:
          NAME       Inspect these objects in depth (a module's device map by
                     submodule path). Attribute and item paths work: model.encoder,
                     batch['x'].

        options:
          --last     Show the diagnosis of the last device error again.
          --check    Preflight: run every device audit on the NAMEs (or the whole
                     namespace) and list the problems with their fixes, before
                     training starts.
          -a, --all  Also list names starting with an underscore.
        """
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
        namespace = self.shell.user_ns
        for text in names:
            root = _ROOT_NAME.match(text)
            if root is None or root.group(1) not in namespace:
                raise UsageError(
                    f"%devices: no variable named {(root.group(1) if root else text)!r}"
                )

    def _check(self, names: list[str]) -> Checkup | None:
        """``%devices --check``: plain names are checked by name, paths
        (``model.encoder``, ``batch['x']``) are resolved first."""
        from ipydevice.audits import checkup as audits
        from ipydevice.collect.inventory import _parse_path
        from ipydevice.collect.paths import resolve

        self._require_names(names)
        namespace = self.shell.user_ns
        plain = [n for n in names if n.isidentifier()]
        objects = []
        for text in names:
            if text.isidentifier():
                continue
            path = _parse_path(text)
            try:
                if path is None:
                    raise LookupError(text)
                objects.append(resolve(path, namespace))
            except LookupError:
                raise UsageError(f"%devices: {text!r} has no such attribute or item") from None

        def run() -> Checkup:
            if names:
                return audits.check(*objects, namespace=namespace, names=plain)
            return audits.check(namespace=namespace)

        return _guarded("check", run)

    def _inventory(self, names: list[str], include_private: bool) -> Inventory:
        from ipydevice.collect import inventory as census

        namespace = self.shell.user_ns
        self._require_names(names)
        try:
            return _as_usage_error(
                "%devices", census.inventory, namespace, names or None, include_private
            )
        except KeyError as missing:
            name = missing.args[0] if missing.args else "?"
            raise UsageError(f"%devices: {name!r} has no such attribute or item") from None


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
