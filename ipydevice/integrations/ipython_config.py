"""``IPyDevice``, ipydevice's settings as an IPython configurable: ``%config IPyDevice``.

A traitlets ``Configurable`` (traitlets, not IPython): ``%config IPyDevice.<name> =
value`` in a shell, ``c.IPyDevice.<name>`` in a config file. The limits and
``verbosity`` mirror :class:`ipydevice.settings.Settings`; a change here calls
:func:`ipydevice.settings.configure`. :mod:`ipydevice.integrations.ipython` registers it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from traitlets import Bool, CaselessStrEnum, Float, Int, default, observe
from traitlets.config import Configurable

__all__ = ["SETTING_TRAITS", "IPyDevice"]

#: The :class:`~ipydevice.settings.Settings` fields mirrored as ``IPyDevice`` traits.
SETTING_TRAITS = (
    "max_rows",
    "max_depth",
    "max_items",
    "max_objects",
    "max_frames",
    "max_modules",
    "max_names",
    "max_fixes",
    "show_library_frames",
    "time_budget",
    "verbosity",
    "note",
)

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

    The limits and ``verbosity`` mirror :class:`ipydevice.settings.Settings`; a change
    here calls :func:`ipydevice.settings.configure`.
    """

    panel = Bool(True, help="Show a diagnosis panel under every device error.").tag(config=True)
    verbosity = CaselessStrEnum(
        ["Minimal", "Context", "Verbose"],
        default_value=None,
        allow_none=True,
        help="How much the panel says: Minimal (the headline and the best fix), Context "
        "(the culprits, the objects involved and every fix) or Verbose (everything). "
        "None, the default, follows %xmode: Minimal under %xmode Minimal, Verbose under "
        "%xmode Verbose, Context otherwise.",
    ).tag(config=True)
    widget = Bool(
        True,
        help="In a Jupyter kernel, add the panel's Apply, Copy and Insert buttons (a widget "
        "output of their own, beside the panel's text and HTML).",
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
    note = Bool(
        help="Attach the diagnosis to the exception as a note (PEP 678) and a payload, so "
        "that what shows the exception later (%tb, a log, a re-raise in another process) "
        "shows it too. The cell's own traceback is formatted before and stays as it is.",
    ).tag(config=True)
    max_rows = _limit("Rows shown in a table before '… N more'.")
    max_depth = _limit("How deep containers and attribute chains are followed.")
    max_items = _limit("Items looked at in one container.")
    max_objects = _limit("Objects visited in one scan.")
    max_frames = _limit("Traceback frames walked, innermost first.")
    max_modules = _limit("Submodules walked in one module tree.")
    max_names = _limit(
        "Namespace names looked at in one diagnosis beyond those the failing code reads."
    )
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
    _max_names_default = _from_settings("max_names")
    _max_fixes_default = _from_settings("max_fixes")
    _show_library_frames_default = _from_settings("show_library_frames")
    _time_budget_default = _from_settings("time_budget")
    _verbosity_default = _from_settings("verbosity")
    _note_default = _from_settings("note")

    @observe(*SETTING_TRAITS)
    def _push_setting(self, change: Mapping[str, Any]) -> None:
        from ipydevice.settings import configure

        configure(**{change["name"]: change["new"]})
