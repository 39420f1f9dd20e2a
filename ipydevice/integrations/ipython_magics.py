"""The ``%devices`` magic's help and work, without IPython.

:class:`ipydevice.integrations.ipython.DeviceMagics` (the only place that imports IPython) parses
the line and turns :class:`MagicError` into IPython's ``UsageError``; what the
magic does with the names lives here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ipydevice.audits.checkup import Checkup

__all__ = ["DEVICES_HELP", "MagicError", "checkup", "require_names"]


class MagicError(Exception):
    """A mistake in the magic's line, worded for the user (shown as a UsageError)."""


def require_names(namespace: Mapping[str, Any], names: list[str]) -> None:
    """Every name's root (``model`` of ``model.encoder``) is in the namespace."""
    for text in names:
        root = re.match(r"\s*([^\W\d]\w*)", text)  # compiled on first use, not at load
        if root is None or root.group(1) not in namespace:
            raise MagicError(f"%devices: no variable named {(root.group(1) if root else text)!r}")


def checkup(namespace: Mapping[str, Any], names: list[str]) -> Callable[[], Checkup]:
    """``%devices --check [NAME ...]`` as a call to make: plain names are checked by
    name, paths (``model.encoder``, ``batch['x']``) are resolved first (a path that
    does not resolve is a :class:`MagicError` now, not when the call runs)."""
    from ipydevice.audits import checkup as audits
    from ipydevice.collect.inventory import parse_path
    from ipydevice.collect.paths import resolve

    plain = [n for n in names if n.isidentifier()]
    objects = []
    for text in names:
        if text.isidentifier():
            continue
        path = parse_path(text)
        try:
            if path is None:
                raise LookupError(text)
            objects.append(resolve(path, namespace))
        except LookupError:
            raise MagicError(f"%devices: {text!r} has no such attribute or item") from None

    def run() -> Checkup:
        if names:
            return audits.check(*objects, namespace=namespace, names=plain)
        return audits.check(namespace=namespace)

    return run


DEVICES_HELP = """::

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
          verbosity             Minimal, Context or Verbose; None (default)
                                follows %xmode
          widget                in Jupyter, the panel's Apply/Copy/Insert buttons (True)
          insert_fix_cell       put the best fix into a new cell below (False)
          warnings              a panel under device warnings too (True)
          watch                 after each cell, warn when a batch it defined is
                                on another device than the model (False)
          note                  attach the diagnosis to the exception as a note
                                and a payload, for what shows it later (False)
          max_rows              rows shown in a table before "… N more"
          max_depth             how deep containers and attributes are followed
          max_items             items looked at in one container
          max_objects           objects visited in one scan
          max_frames            traceback frames walked, innermost first
          max_modules           submodules walked in one module tree
          max_names             namespace names looked at beyond those the
                                failing code reads
          max_fixes             fixes proposed in one diagnosis
          show_library_frames   also list tensors held only by library frames
          note                  attach the diagnosis to the exception as a PEP 678
                                note and a payload (False)
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
