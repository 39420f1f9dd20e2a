"""A pytest plugin: a test that fails with a device error gets the diagnosis.

Installed with ipydevice, it is active in every pytest run (a ``pytest11`` entry
point named ``ipydevice``); ``pytest -p no:ipydevice`` turns it off and
``pytest -p ipydevice`` turns it on where plugin autoloading is disabled. The
report is an "ipydevice" section under the failing test's traceback.

The diagnosis is taken while the report is made (the test's frames are still
alive) and kept as text only, in the report itself: it travels with the report,
so it appears under pytest-xdist (``-n``) and in junit XML (``--junitxml``). The
exception gets its short form as a note (PEP 678), which pytest prints under it.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

__all__ = ["add_section", "diagnosis_text"]

_SECTION = "ipydevice"


def diagnosis_text(item: Any, call: Any) -> str:
    """The text report for a failed test call, or '' (not a device error)."""
    excinfo = getattr(call, "excinfo", None)
    if excinfo is None or call.when != "call":
        return ""
    from ipydevice._debug import failure_line, is_interrupt
    from ipydevice.integrations.excepthook import report_text

    try:
        return report_text(
            excinfo.value, namespace=getattr(getattr(item, "module", None), "__dict__", None)
        )
    except BaseException as failure:  # never turn a test failure into a plugin crash
        # Contained, SystemExit too (see ipydevice._debug); a Ctrl-C stops the
        # test run, as it would without ipydevice.
        if is_interrupt(failure):
            raise
        return failure_line("report", failure)


def add_section(report: Any, text: str) -> None:
    """Adds ``text`` to the report as its "ipydevice" section.

    It goes into the failure's own representation where there is one (the part
    that junit XML writes and that pytest-xdist sends back from its workers), else
    into the report's sections."""
    addsection = getattr(getattr(report, "longrepr", None), "addsection", None)
    if callable(addsection):
        addsection(_SECTION, text)
    else:
        report.sections.append((_SECTION, text))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Generator[None, Any, None]:
    """pytest hook: the report of a test that failed with a device error gets
    the diagnosis. It is taken before pytest builds the report, so the note it
    attaches to the exception shows in the traceback pytest prints too."""
    text = diagnosis_text(item, call)
    outcome = yield
    if text:
        add_section(outcome.get_result(), text)
