"""A pytest plugin: a test that fails with a device error gets the diagnosis.

Enable it with ``pytest -p ipydevice`` (or ``addopts = -p ipydevice`` in the
project's pytest configuration). The report appears as an "ipydevice" section
under the failing test's traceback. The diagnosis is taken while the test's
frames are still alive, then kept as text only.
"""

from __future__ import annotations

from typing import Any

__all__ = ["attach", "record"]

_SECTION = "ipydevice"
_reports: dict[str, str] = {}


def record(item: Any, call: Any) -> None:
    """Diagnoses a failed test call while its traceback is at hand."""
    excinfo = getattr(call, "excinfo", None)
    if excinfo is None or call.when != "call":
        return
    from ipydevice.integrations.excepthook import report_text

    try:
        text = report_text(
            excinfo.value, namespace=getattr(getattr(item, "module", None), "__dict__", None)
        )
    except Exception as failure:  # never turn a test failure into a plugin crash
        from ipydevice._debug import debug_enabled, describe_failure

        if debug_enabled():
            raise
        text = describe_failure("report", failure)
    if text:
        _reports[item.nodeid] = text


def attach(report: Any) -> None:
    """Adds the stored text to the test's report as its own section."""
    text = _reports.pop(getattr(report, "nodeid", ""), None)
    if text and report.when == "call":
        report.sections.append((_SECTION, text))


def pytest_runtest_makereport(item: Any, call: Any) -> None:
    """pytest hook: see :func:`record`."""
    record(item, call)


def pytest_runtest_logreport(report: Any) -> None:
    """pytest hook: see :func:`attach`."""
    attach(report)
