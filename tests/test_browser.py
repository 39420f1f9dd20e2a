"""The panel in a real browser: JupyterLab 4 and Notebook 7, driven by Playwright + Chromium.

What only a browser shows: the widget renders from the kernel's bundle, Apply moves
the live tensor in the kernel and says so in the status line, the failed cell then
runs, the panel is readable in the dark theme, and hostile names (HTML in a class
name, a dict key, an error message) are shown as text, never run.

Needs ``/usr/bin/chromium`` and ``playwright``, ``jupyterlab``, ``notebook`` in the venv
(``scripts/install-browser.sh``); skipped otherwise, or failed when
``IPYDEVICE_REQUIRE_BROWSER=1`` (CI). Screenshots go to
``$IPYDEVICE_SCREENSHOTS`` (default ``artifacts/browser``); ``tests/browser/run.sh --docs``
writes them to ``docs/``.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser.jupyter import (
    CELLS,
    CHROMIUM,
    CHROMIUM_ARGS,
    JupyterServer,
    missing_requirements,
    open_notebook,
    run_cell,
    screenshot_around,
    set_lab_theme,
    write_notebook,
)

_WHY = missing_requirements()
# CI sets IPYDEVICE_REQUIRE_BROWSER=1 after scripts/install-browser.sh: a missing
# browser is then a failure, not a silent skip.
_REQUIRED = os.environ.get("IPYDEVICE_REQUIRE_BROWSER") == "1"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(_WHY is not None and not _REQUIRED, reason=_WHY or ""),
]

REPO = Path(__file__).resolve().parents[1]
SHOTS = Path(os.environ.get("IPYDEVICE_SCREENSHOTS", REPO / "artifacts" / "browser"))

MISMATCH_CELLS = [
    "%load_ext ipydevice",
    "import torch\nimport torch.nn as nn\n\nmodel = nn.Linear(4, 2).to('meta')  # 'meta' stands in for the GPU\nx = torch.randn(3, 4)  # the batch, still on the CPU",
    "out = model(x)",
    "out = model(x)\nprint('RERUN OK', out.device)",
]

EVIL_KEY = '<img src=x onerror="window.__pwned=1">'
EVIL_CLASS = "<b>Evil</b><img src=x onerror=window.__pwned=2>"
EVIL_MESSAGE = (
    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    " <img src=x onerror=window.__pwned=3>"
)
HOSTILE_CELLS = [
    "%load_ext ipydevice",
    f"""import torch
import torch.nn as nn


def _init(self):
    nn.Module.__init__(self)
    self.scale = nn.Parameter(torch.ones(4))


# A module class whose name is HTML, a dict key that is HTML.
Evil = type({EVIL_CLASS!r}, (nn.Module,), {{"__init__": _init, "forward": lambda self, x: x * self.scale}})
model = Evil().to("meta")
key = {EVIL_KEY!r}
batch = {{key: torch.randn(3, 4)}}""",
    "out = model(batch[key])",
    "import ipydevice\n\nipydevice.diagnose()  # the static HTML panel, rendered by Jupyter itself",
    f"raise RuntimeError({EVIL_MESSAGE!r})",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    if _WHY is not None:
        pytest.fail(f"IPYDEVICE_REQUIRE_BROWSER=1 but {_WHY}")
    srv = JupyterServer(tmp_path_factory.mktemp("jupyter")).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.errors = errors  # type: ignore[attr-defined]
    try:
        yield pg
    finally:
        context.close()


def _notebook(
    server: JupyterServer, tmp_path: Path, name: str, cells: list[str], raises: tuple[int, ...]
) -> str:
    return server.add(write_notebook(tmp_path / name, cells, raises))


def _mismatch_flow(page: Any, shot: str | None = None, block: str = "center") -> Any:
    """Runs the failing cell, checks the panel, clicks Apply, re-runs; returns the panel."""
    from playwright.sync_api import expect

    run_cell(page, 0)
    run_cell(page, 1)
    started = time.monotonic()
    failing = run_cell(page, 2)
    panel = failing.locator(".ipydevice-panel").first
    expect(panel).to_be_visible(timeout=60_000)
    apply = panel.locator(".ipydevice-apply").first
    expect(apply).to_be_visible()
    print(f"error cell to panel: {time.monotonic() - started:.1f} s")
    expect(panel).to_contain_text("is on cpu")
    expect(panel.locator(".ipydevice-fix").first).to_contain_text("x = x.to('meta')")
    expect(failing.locator(".jp-OutputArea-output").first).to_contain_text(
        "is not on the expected device"
    )
    if shot:
        screenshot_around(page, panel, SHOTS / shot, block=block)
    copy = panel.locator(".ipydevice-copy").first  # anywidget renders it: the ESM ran
    expect(copy).to_have_text("Copy")
    copy.click()
    expect(copy).to_have_text("Copied")
    expect(copy).to_have_text("Copy", timeout=5_000)  # and back, as in the screenshots
    apply.click()
    status = panel.locator(".ipydevice-status")
    expect(status).to_contain_text("moved x", timeout=10_000)
    expect(run_cell(page, 3).locator(".jp-OutputArea-output").last).to_contain_text("RERUN OK meta")
    return panel


def test_jupyterlab_panel_apply_rerun_and_dark_theme(
    server: JupyterServer, page: Any, tmp_path: Path
) -> None:
    name = _notebook(server, tmp_path, "lab-mismatch.ipynb", MISMATCH_CELLS, raises=(2,))
    open_notebook(page, server.url(f"lab/tree/{name}?reset"))
    panel = _mismatch_flow(page, shot="panel-light.png")
    set_lab_theme(page, "JupyterLab Dark")
    page.locator(CELLS).nth(2).locator(
        ".jp-InputArea-editor"
    ).click()  # same view as the light shot
    page.keyboard.press("Escape")
    page.locator(".ipydevice-status").first.wait_for()
    screenshot_around(page, panel, SHOTS / "panel-dark.png")
    set_lab_theme(page, "JupyterLab Light")  # the setting is saved: later tests start light again
    assert page.errors == []  # type: ignore[attr-defined]


def test_notebook7_panel_apply_rerun(server: JupyterServer, page: Any, tmp_path: Path) -> None:
    name = _notebook(server, tmp_path, "nb7-mismatch.ipynb", MISMATCH_CELLS, raises=(2,))
    open_notebook(page, server.url(f"notebooks/{name}?reset"))
    # Notebook 7.6.5 itself throws "Cannot read properties of undefined (reading 'schema')"
    # on every page load, /tree included: only errors after the page is up count.
    before = list(page.errors)  # type: ignore[attr-defined]
    _mismatch_flow(page, shot="panel-notebook7.png", block="start")
    assert page.errors == before  # type: ignore[attr-defined]


def test_hostile_names_are_shown_as_text(server: JupyterServer, page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    name = _notebook(server, tmp_path, "hostile.ipynb", HOSTILE_CELLS, raises=(2, 4))
    open_notebook(page, server.url(f"lab/tree/{name}?reset"))
    run_cell(page, 0)
    run_cell(page, 1)
    widget = run_cell(page, 2).locator(".ipydevice-panel").first
    expect(widget).to_be_visible(timeout=60_000)
    static = run_cell(page, 3).locator(".ipydevice-panel").first
    message = run_cell(page, 4).locator(".ipydevice-panel").first
    expect(message).to_be_visible(timeout=60_000)
    for panel in (widget, static):  # textContent: the markup is text, not elements
        expect(panel).to_contain_text(f"batch[{EVIL_KEY!r}]")
        expect(panel).to_contain_text(EVIL_CLASS)
    expect(message).to_contain_text("<img src=x onerror=window.__pwned=3>")
    widget.locator(".ipydevice-details").get_by_text(re.compile("objects involved")).click()
    expect(widget.locator(".ipydevice-details")).to_contain_text(EVIL_CLASS)
    screenshot_around(page, widget, SHOTS / "panel-hostile.png")
    page.wait_for_timeout(500)  # time for an injected <img src=x> to fail and fire onerror
    for panel in (widget, static, message):
        assert panel.locator("img").count() == 0
        assert panel.locator("b", has_text=re.compile(r"^Evil$")).count() == 0
    assert page.evaluate("() => window.__pwned") is None
    assert page.errors == []  # type: ignore[attr-defined]
