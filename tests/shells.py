"""Helpers for tests that drive a real in-process IPython shell."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import CapturedIO, capture_output


@contextlib.contextmanager
def singleton_shell(reset: bool = False) -> Iterator[InteractiveShell]:
    """IPython's singleton shell with ipydevice unloaded; afterwards ipydevice is
    unloaded again, ``%config IPyDevice`` forgotten and ipydevice's settings put
    back. ``reset`` also empties the namespace before and after."""
    from ipydevice import settings

    shell = InteractiveShell.instance()
    shell.extension_manager.unload_extension("ipydevice")
    saved = settings.current()
    if reset:
        shell.reset(new_session=False)
    try:
        yield shell
    finally:
        shell.extension_manager.unload_extension("ipydevice")
        shell.config.pop("IPyDevice", None)
        if reset:
            shell.reset(new_session=False)
        settings.configure(**{f.name: getattr(saved, f.name) for f in dataclasses.fields(saved)})


@contextlib.contextmanager
def loaded_shell(setup: str = "", reset: bool = False) -> Iterator[InteractiveShell]:
    """:func:`singleton_shell` with ``%load_ext ipydevice`` and ``setup`` run (it must
    succeed); ``reset``: in an empty namespace."""
    with singleton_shell(reset=reset) as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        if setup:
            run(shell, setup)
        yield shell


def run(shell: InteractiveShell, source: str) -> Any:
    """Runs a cell that must succeed; returns its result."""
    result = shell.run_cell(source)
    assert result.success, result.error_in_exec or result.error_before_exec
    return result.result


def run_captured(shell: InteractiveShell, source: str) -> tuple[CapturedIO, Any]:
    """Runs a cell, capturing its output (stdout, stderr and displays) as a front end
    shows it: an update of a display (``update_display_data``) replaces that display
    where it is."""
    with capture_output() as cap:
        result = shell.run_cell(source)
    fold_updates(cap)
    return cap, result


def fold_updates(cap: CapturedIO) -> None:
    """Replaces each display that a later output updates (same ``display_id``) by that
    update, in place, and drops the update itself: what a front end shows."""
    folded: list[dict[str, Any]] = []
    for output in cap._outputs:
        shown = (output.get("transient") or {}).get("display_id")
        if output.get("update") and shown:
            for index, earlier in enumerate(folded):
                if (earlier.get("transient") or {}).get("display_id") == shown:
                    folded[index] = {**output, "update": False}
            continue
        folded.append(output)
    cap._outputs[:] = folded


def panels(cap: CapturedIO) -> list[dict[str, Any]]:
    """The ipydevice panels among the captured displays."""
    return [out.data for out in cap.outputs if "ipydevice-panel" in out.data.get("text/html", "")]
