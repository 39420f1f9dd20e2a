"""``ipydevice.inventory()`` and ``%devices``: the namespace collected, then audited.

:func:`ipydevice.collect.inventory.census` collects the rows and totals; the
registered audits (:func:`ipydevice.audits.checkup.problems_of`) then read the roots it
scanned, and the :class:`~ipydevice.model.Inventory` keeps what they found.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ipydevice import render
from ipydevice._debug import contain, failure_line
from ipydevice.audits.checkup import problems_of
from ipydevice.collect import probe
from ipydevice.collect.inventory import census
from ipydevice.collect.namespace import user_namespace
from ipydevice.model import Inventory
from ipydevice.settings import current

__all__ = ["inventory"]

del render  # imported for the views the record delegates to (``print(inv)``, HTML, table)


def inventory(
    namespace: Mapping[str, Any] | None = None, names: Any = None, include_private: bool = False
) -> Inventory:
    """Where everything in ``namespace`` lives, grouped by device.

    Args:
        namespace: by default IPython's ``user_ns``, else ``__main__``'s globals.
        names: names (or dotted/indexed paths such as ``model.encoder``) to inspect in
            depth instead of listing the whole namespace.
        include_private: also list names starting with ``_``.

    Raises:
        KeyError: a name in ``names`` that the namespace does not hold (an object
            that holds nothing on a device is reported in ``notes`` instead).
    """
    if namespace is None:
        namespace = user_namespace()
    try:
        with probe.metadata_reads(current().time_budget):
            found = census(namespace, names, include_private)
            # The audits' findings (registered ones included, their failures in the
            # notes); source fixes are left to ``--check``.
            problems = tuple(
                problem.finding
                for group in found.audited
                for problem in problems_of(group, found.scan.notes)
                if problem.finding.rule != "factory_without_device"
            )
            notes = tuple(found.scan.settled_notes())
            return replace(found.inventory, problems=problems, notes=notes)
    except KeyError:
        raise
    except BaseException as failure:
        # What the user's objects raise (SystemExit included) is contained; a
        # Ctrl-C stops the inventory and reaches the caller.
        contain(failure)
        return Inventory(notes=(failure_line("inventory", failure),))
