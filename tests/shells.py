"""Helpers for tests that drive a real in-process IPython shell."""

from __future__ import annotations

from typing import Any

from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import CapturedIO, capture_output


def run(shell: InteractiveShell, source: str) -> Any:
    """Runs a cell that must succeed; returns its result."""
    result = shell.run_cell(source)
    assert result.success, result.error_in_exec or result.error_before_exec
    return result.result


def run_captured(shell: InteractiveShell, source: str) -> tuple[CapturedIO, Any]:
    """Runs a cell, capturing its output (stdout, stderr and displays)."""
    with capture_output() as cap:
        result = shell.run_cell(source)
    return cap, result


def panels(cap: CapturedIO) -> list[dict[str, Any]]:
    """The ipydevice panels among the captured displays."""
    return [out.data for out in cap.outputs if "ipydevice-panel" in out.data.get("text/html", "")]
