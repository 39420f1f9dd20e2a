"""The panel in a real browser: JupyterLab 4 and Notebook 7, driven by Playwright + Chromium.

What only a browser shows: the header (headline, best fix, buttons) is on the first
screen of a failing cell's output however long the traceback, the buttons render from
the kernel's bundle, Apply moves the live tensor in the kernel and says so, the failed
cell then runs, Insert adds the fix as a new cell right below the failed one, the panel
is readable in the dark theme, hostile names (HTML in a class name, a dict key, an
error message) are shown as text, never run, and the default ``jupyter nbconvert --to
html --execute`` export shows the panel offline.

Needs ``/usr/bin/chromium`` and ``playwright``, ``jupyterlab``, ``notebook`` in the venv
(``scripts/install-browser.sh``); skipped otherwise, or failed when
``IPYDEVICE_REQUIRE_BROWSER=1`` (CI). Screenshots go to
``$IPYDEVICE_SCREENSHOTS`` (default ``artifacts/browser``); ``tests/browser/run.sh --docs``
writes them to ``docs/``.
"""

from __future__ import annotations

import itertools
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

#: A forward pass through 20 nested blocks that fails in the innermost one: IPython's
#: traceback is then thousands of pixels tall, with the header above it.
DEEP_CELLS = [
    "%load_ext ipydevice",
    """import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, inner=None):
        super().__init__()
        self.inner = inner
        self.linear = nn.Linear(16, 16)

    def forward(self, x):
        if self.inner is not None:
            x = self.inner(x)
        return self.linear(x)


model = None
for _ in range(20):
    model = Block(model)
model = model.to("meta")  # "meta" stands in for the GPU
x = torch.randn(8, 16)  # the batch, still on the CPU""",
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
    # Verbose: the panel shows the error message too.
    f"%config IPyDevice.verbosity = 'Verbose'\nraise RuntimeError({EVIL_MESSAGE!r})",
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


def _url(server: JupyterServer, front_end: str, name: str) -> str:
    path = f"lab/tree/{name}" if front_end == "lab" else f"notebooks/{name}"
    return server.url(f"{path}?reset")


def _open(server: JupyterServer, page: Any, front_end: str, name: str) -> list[str]:
    """Opens the notebook; returns the page errors to ignore (Notebook 7.6.5 itself
    throws "Cannot read properties of undefined (reading 'schema')" on every page load,
    /tree included: only errors after the page is up count)."""
    open_notebook(page, _url(server, front_end, name))
    return list(page.errors)


def _failing_cell(page: Any, index: int) -> Any:
    """Runs the failing cell; returns it once its header, panel and buttons are there."""
    from playwright.sync_api import expect

    started = time.monotonic()
    failing = run_cell(page, index)
    expect(failing.locator(".ipydevice-header")).to_be_visible(timeout=60_000)
    expect(failing.locator(".ipydevice-panel")).to_be_attached(timeout=60_000)
    # A row of buttons beside the header's fix and beside each of the panel's fixes.
    header = failing.locator(".ipydevice-header .ipydevice-actions")
    expect(header).to_have_count(1, timeout=60_000)
    fixes = failing.locator(".ipydevice-panel .ipydevice-fix")
    expect(failing.locator(".ipydevice-panel .ipydevice-actions")).to_have_count(fixes.count())
    expect(header.locator(".ipydevice-copy")).to_be_visible(timeout=60_000)
    print(f"error cell to panel: {time.monotonic() - started:.1f} s")
    return failing


def _mismatch_flow(page: Any, shot: str | None = None) -> Any:
    """Runs the failing cell, checks header and panel, clicks Apply, re-runs; returns the cell."""
    from playwright.sync_api import expect

    run_cell(page, 0)
    run_cell(page, 1)
    failing = _failing_cell(page, 2)
    header = failing.locator(".ipydevice-header")
    expect(header).to_contain_text("is on cpu")
    expect(header).to_contain_text("x = x.to('meta')")
    panel = failing.locator(".ipydevice-panel")
    expect(panel).to_contain_text("device error")
    expect(panel).not_to_contain_text("is on cpu")  # the header above says the headline
    expect(panel.locator(".ipydevice-culprit")).to_contain_text("x")
    expect(panel.locator(".ipydevice-fix").first).to_contain_text("x = x.to('meta')")
    expect(
        failing.locator(".jp-RenderedText[data-mime-type='application/vnd.jupyter.stderr']").first
    ).to_contain_text("is not on the expected device")
    if shot:  # the first screen: the cell, the header and its buttons, the traceback's top
        below = failing.locator(".ipydevice-actions").first
        screenshot_around(
            page, header, SHOTS / shot, above=70, block="start", below=below, after=75
        )
    first = failing.locator(".ipydevice-actions").first  # the header's buttons
    copy = first.locator(".ipydevice-copy")
    expect(copy).to_have_text("Copy")
    copy.click()  # says whether it got there: no claim of success otherwise
    expect(first.locator(".ipydevice-status")).to_contain_text(
        re.compile("copied to the clipboard|could not copy"), timeout=10_000
    )
    first.locator(".ipydevice-apply").click()
    expect(first.locator(".ipydevice-status")).to_contain_text("moved x", timeout=10_000)
    expect(run_cell(page, 3).locator(".jp-OutputArea-output").last).to_contain_text("RERUN OK meta")
    return failing


def _buttons_aligned(actions: Any) -> None:
    """Apply, Copy and Insert share their top and their height (Copy once sat 2 px higher)."""
    boxes = [
        actions.locator(css).first.bounding_box()
        for css in (".ipydevice-apply", ".ipydevice-copy", ".ipydevice-insert")
    ]
    assert all(boxes), boxes
    tops = {round(b["y"]) for b in boxes}
    heights = {round(b["height"]) for b in boxes}
    assert len(tops) == 1 and len(heights) == 1, boxes


def test_jupyterlab_panel_apply_rerun_and_dark_theme(
    server: JupyterServer, page: Any, tmp_path: Path
) -> None:
    name = _notebook(server, tmp_path, "lab-mismatch.ipynb", MISMATCH_CELLS, raises=(2,))
    open_notebook(page, server.url(f"lab/tree/{name}?reset"))
    failing = _mismatch_flow(page, shot="first-screen.png")
    _buttons_aligned(failing.locator(".ipydevice-panel .ipydevice-actions").first)
    panel = failing.locator(".ipydevice-panel")
    below = panel
    screenshot_around(page, panel, SHOTS / "panel-light.png", above=40, below=below)
    set_lab_theme(page, "JupyterLab Dark")
    page.locator(CELLS).nth(2).locator(
        ".jp-InputArea-editor"
    ).click()  # same view as the light shot
    page.keyboard.press("Escape")
    screenshot_around(page, panel, SHOTS / "panel-dark.png", above=40, below=below)
    set_lab_theme(page, "JupyterLab Light")  # the setting is saved: later tests start light again
    assert page.errors == []  # type: ignore[attr-defined]


def test_notebook7_panel_apply_rerun(server: JupyterServer, page: Any, tmp_path: Path) -> None:
    name = _notebook(server, tmp_path, "nb7-mismatch.ipynb", MISMATCH_CELLS, raises=(2,))
    before = _open(server, page, "nb7", name)
    _mismatch_flow(page, shot="first-screen-notebook7.png")
    assert page.errors == before  # type: ignore[attr-defined]


@pytest.mark.parametrize("front_end", ["lab", "nb7"])
def test_the_header_is_on_the_first_screen_after_a_deep_traceback(
    server: JupyterServer, page: Any, tmp_path: Path, front_end: str
) -> None:
    from playwright.sync_api import expect

    name = _notebook(server, tmp_path, f"deep-{front_end}.ipynb", DEEP_CELLS, raises=(2,))
    before = _open(server, page, front_end, name)
    run_cell(page, 0)
    run_cell(page, 1)
    failing = _failing_cell(page, 2)
    outputs = failing.locator(".jp-OutputArea").first
    # The cell's output as the user meets it: its top at the top of the notebook's view.
    outputs.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)
    top = outputs.bounding_box()
    headline = failing.locator(".ipydevice-header .ipydevice-headline")
    fix = failing.locator(".ipydevice-actions").first
    traceback = failing.locator("[data-mime-type='application/vnd.jupyter.stderr']").first
    expect(headline).to_contain_text("is on cpu")
    box, buttons, error = headline.bounding_box(), fix.bounding_box(), traceback.bounding_box()
    view = page.viewport_size
    offset = box["y"] - top["y"]
    print(
        f"{front_end}: headline {offset:.0f} px below the top of the cell's output, best fix's"
        f" buttons at {buttons['y'] - top['y']:.0f} px; traceback {error['height']:.0f} px tall"
    )
    assert error["height"] > 1500, "the traceback is not long: the test proves nothing"
    assert error["y"] > buttons["y"] > box["y"]  # header, its buttons, then the traceback
    assert box["y"] >= 0 and buttons["y"] + buttons["height"] <= view["height"]
    # Apply from the header, re-run: it works.
    failing.locator(".ipydevice-actions").first.locator(".ipydevice-apply").click()
    expect(failing.locator(".ipydevice-actions").first).to_contain_text("moved x", timeout=10_000)
    expect(run_cell(page, 3).locator(".jp-OutputArea-output").last).to_contain_text("RERUN OK meta")
    assert page.errors == before  # type: ignore[attr-defined]


@pytest.mark.parametrize("front_end", ["lab", "nb7"])
def test_insert_adds_the_fix_right_below_the_failed_cell(
    server: JupyterServer, page: Any, tmp_path: Path, front_end: str
) -> None:
    from playwright.sync_api import expect

    cells = [*MISMATCH_CELLS[:3], "print('the cell after')"]
    name = _notebook(server, tmp_path, f"insert-{front_end}.ipynb", cells, raises=(2,))
    before = _open(server, page, front_end, name)
    run_cell(page, 0)
    run_cell(page, 1)
    failing = _failing_cell(page, 2)
    expect(page.locator(CELLS)).to_have_count(4)
    actions = failing.locator(".ipydevice-actions").first
    _buttons_aligned(actions)
    actions.locator(".ipydevice-insert").click()
    expect(actions.locator(".ipydevice-status")).to_contain_text("below this one")
    expect(page.locator(CELLS)).to_have_count(5)  # at once, no other cell run
    new = page.locator(CELLS).nth(3)
    expect(new.locator(".jp-InputArea-editor")).to_contain_text("x = x.to('meta')")
    expect(page.locator(CELLS).nth(4).locator(".jp-InputArea-editor")).to_contain_text(
        "the cell after"
    )
    assert page.errors == before  # type: ignore[attr-defined]


def test_minimal_verbosity_is_the_header_only(
    server: JupyterServer, page: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    cells = [MISMATCH_CELLS[0] + "\n%config IPyDevice.verbosity = 'Minimal'", *MISMATCH_CELLS[1:3]]
    name = _notebook(server, tmp_path, "minimal.ipynb", cells, raises=(2,))
    open_notebook(page, server.url(f"lab/tree/{name}?reset"))
    run_cell(page, 0)
    run_cell(page, 1)
    failing = run_cell(page, 2)
    header = failing.locator(".ipydevice-header")
    expect(header).to_be_visible(timeout=60_000)
    expect(failing.locator(".ipydevice-actions .ipydevice-apply")).to_have_count(1)
    expect(failing.locator(".ipydevice-panel")).to_have_count(0)
    expect(header).to_contain_text("verbosity")
    below = failing.locator(".ipydevice-actions").first
    screenshot_around(
        page, header, SHOTS / "panel-minimal.png", above=70, block="start", below=below, after=75
    )
    assert page.errors == []  # type: ignore[attr-defined]


def test_the_default_html_export_shows_the_panel_offline(browser: Any, tmp_path: Path) -> None:
    """``jupyter nbconvert --to html --execute`` with its defaults (widget state saved),
    opened from disk with the network off: the culprit and the fix are on the page."""
    import subprocess
    import sys

    notebook = write_notebook(tmp_path / "export.ipynb", MISMATCH_CELLS[:3], raises=(2,))
    env = {
        **os.environ,
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--execute", str(notebook)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    exported = tmp_path / "export.html"
    source = exported.read_text()
    assert "application/vnd.jupyter.widget-state+json" in source  # the default: state saved
    context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)
    try:
        page = context.new_page()
        page.goto(exported.as_uri())
        header, panel = page.locator(".ipydevice-header"), page.locator(".ipydevice-panel")
        for part in (header, panel):
            assert part.count() == 1 and part.is_visible()
            text = part.inner_text()
            assert "x = x.to('meta')" in text, text
            # The headline once: in the header, not again in the panel below the traceback.
            assert ("x is on cpu" in text) == (part is header), text
        culprit = panel.locator(".ipydevice-culprit")
        assert culprit.count() >= 1 and "x" in culprit.first.inner_text()
        screenshot_around(page, panel, SHOTS / "export-offline.png", above=40)
    finally:
        context.close()


def test_hostile_names_are_shown_as_text(server: JupyterServer, page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    name = _notebook(server, tmp_path, "hostile.ipynb", HOSTILE_CELLS, raises=(2, 4))
    open_notebook(page, server.url(f"lab/tree/{name}?reset"))
    run_cell(page, 0)
    run_cell(page, 1)
    failing = run_cell(page, 2)
    widget = failing.locator(".ipydevice-panel").first
    expect(widget).to_be_visible(timeout=60_000)
    header = failing.locator(".ipydevice-header").first
    static = run_cell(page, 3).locator(".ipydevice-panel").first
    message = run_cell(page, 4).locator(".ipydevice-panel").first
    expect(message).to_be_visible(timeout=60_000)
    for panel in (widget, static):  # textContent: the markup is text, not elements
        expect(panel).to_contain_text(f"batch[{EVIL_KEY!r}]")
        expect(panel).to_contain_text(EVIL_CLASS)
    expect(header).to_contain_text(f"batch[{EVIL_KEY!r}]")
    expect(message).to_contain_text("<img src=x onerror=window.__pwned=3>")
    expect(failing.locator(".ipydevice-panel .ipydevice-actions").last).to_contain_text("Copy")
    screenshot_around(page, widget, SHOTS / "panel-hostile.png")
    page.wait_for_timeout(500)  # time for an injected <img src=x> to fail and fire onerror
    for panel in (header, widget, static, message):
        assert panel.locator("img").count() == 0
        assert panel.locator("b", has_text=re.compile(r"^Evil$")).count() == 0
    assert page.evaluate("() => window.__pwned") is None
    assert page.errors == []  # type: ignore[attr-defined]


def _beside_code(block: Any) -> bool:
    """Whether ``block``'s code is followed at once by a row of buttons."""
    return bool(
        block.evaluate(
            "e => { const pre = e.querySelector('pre.ipydevice-code');"
            " const next = pre && pre.nextElementSibling;"
            " return Boolean(next && next.classList.contains('ipydevice-actions')); }"
        )
    )


def test_each_fix_has_its_buttons_beside_its_code(
    server: JupyterServer, page: Any, tmp_path: Path
) -> None:
    name = _notebook(server, tmp_path, "beside.ipynb", MISMATCH_CELLS, raises=(2,))
    open_notebook(page, server.url(f"lab/tree/{name}?reset"))
    run_cell(page, 0)
    run_cell(page, 1)
    failing = _failing_cell(page, 2)
    assert _beside_code(failing.locator(".ipydevice-header"))
    fixes = failing.locator(".ipydevice-panel .ipydevice-fix")
    assert fixes.count() >= 2
    for index in range(fixes.count()):
        assert _beside_code(fixes.nth(index)), index
    # No separate block of "Fix 1 / Fix 2" rows under the panel.
    assert failing.locator(".ipydevice-actions", has_text=re.compile(r"Fix \d")).count() == 0
    panel = failing.locator(".ipydevice-panel")
    screenshot_around(page, panel, SHOTS / "panel-beside.png", above=40, below=panel)
    assert page.errors == []  # type: ignore[attr-defined]


def test_without_the_widget_the_header_stands_alone(
    server: JupyterServer, page: Any, tmp_path: Path
) -> None:
    """The buttons' front-end module blocked (as where VS Code cannot load anywidget):
    the header still shows the headline, the panel the culprit, both the fix code as
    selectable text, and nothing sits between the header and the traceback."""
    from playwright.sync_api import expect

    page.route(re.compile(r".*/extensions/anywidget/.*"), lambda route: route.abort())
    name = _notebook(server, tmp_path, "no-widget.ipynb", MISMATCH_CELLS, raises=(2,))
    open_notebook(page, server.url(f"lab/tree/{name}?reset"))
    run_cell(page, 0)
    run_cell(page, 1)
    failing = run_cell(page, 2)
    header = failing.locator(".ipydevice-header")
    expect(header).to_be_visible(timeout=60_000)
    expect(failing.locator(".ipydevice-panel")).to_be_visible(timeout=60_000)
    page.wait_for_timeout(3_000)  # time for the widget to fail to load
    expect(header).to_contain_text("is on cpu")
    expect(failing.locator(".ipydevice-panel .ipydevice-culprit")).to_contain_text("x")
    for part in (header, failing.locator(".ipydevice-panel")):
        expect(part).to_contain_text("x = x.to('meta')")
        code = part.locator("pre.ipydevice-code").first
        assert code.evaluate("e => getComputedStyle(e).userSelect") != "none"
    outputs = failing.locator(".jp-OutputArea-child")
    # The header, then at once the traceback: no error box in between or inside.
    assert "ipydevice-header" in outputs.nth(0).inner_html()
    expect(outputs.nth(1)).to_contain_text("is not on the expected device")
    assert header.locator(".ipydevice-actions").count() == 0
    assert "Error" not in header.inner_text()
    screenshot_around(page, header, SHOTS / "no-widget.png", above=70, block="start")


def test_a_widget_reused_for_a_later_error_moves_its_buttons_there(
    server: JupyterServer, page: Any, tmp_path: Path
) -> None:
    """A failing cell run again: the widget of its cleared output serves the new panel
    (its buttons beside the new code, Apply acting on the new error). Past
    ``MAX_LIVE_BUTTONS`` errors in other cells, the oldest widget serves the newest
    panel: the oldest panel keeps its code and loses its buttons, as when closed."""
    from playwright.sync_api import expect

    from ipydevice.settings import MAX_LIVE_BUTTONS

    fails = ["out = model(x)"] * (MAX_LIVE_BUTTONS + 1)
    cells = [*MISMATCH_CELLS[:2], *fails, "out = model(x)\nprint('RERUN OK', out.device)"]
    raises = tuple(range(2, 2 + len(fails)))
    name = _notebook(server, tmp_path, "reuse.ipynb", cells, raises=raises)
    open_notebook(page, server.url(f"lab/tree/{name}?reset"))
    run_cell(page, 0)
    run_cell(page, 1)
    _failing_cell(page, 2)
    again = _failing_cell(page, 2)  # the same cell again: its widget is reused
    assert _beside_code(again.locator(".ipydevice-header"))
    for index in range(3, 2 + len(fails)):
        _failing_cell(page, index)
    oldest = page.locator(CELLS).nth(2)
    expect(oldest.locator(".ipydevice-panel .ipydevice-fix").first).to_contain_text("x.to(")
    expect(oldest.locator(".ipydevice-actions")).to_have_count(0, timeout=10_000)
    newest = page.locator(CELLS).nth(1 + len(fails))
    first = newest.locator(".ipydevice-header .ipydevice-actions")
    first.locator(".ipydevice-apply").click()
    expect(first.locator(".ipydevice-status")).to_contain_text("moved x", timeout=10_000)
    last = run_cell(page, 2 + len(fails)).locator(".jp-OutputArea-output").last
    expect(last).to_contain_text("RERUN OK meta")
    assert page.errors == []  # type: ignore[attr-defined]


CLICK_ORDERS = list(itertools.permutations(("copy", "insert", "apply")))


def _click_in_order(page: Any, failing: Any, order: tuple[str, ...], target: str) -> None:
    """Clicks the header's Copy, Insert and Apply in ``order``; each says it worked."""
    from playwright.sync_api import expect

    actions = failing.locator(".ipydevice-header .ipydevice-actions")
    status = actions.locator(".ipydevice-status")
    for button in order:
        cells = page.locator(CELLS).count()
        actions.locator(f".ipydevice-{button}").click()
        if button == "copy":
            said = re.compile("copied to the clipboard|could not copy")
        elif button == "insert":
            said = re.compile("added as a new cell below this one")
        else:
            said = re.compile(f"moved x to {target}")
        expect(status).to_contain_text(said, timeout=20_000)
        if button == "insert":
            expect(page.locator(CELLS)).to_have_count(cells + 1)


def _index_of(cells: list[str], text: str) -> int:
    """The index of the first cell whose source holds ``text`` (JupyterLab renders the
    cells on screen only: the index comes from the notebook file)."""
    return next(i for i, source in enumerate(cells) if text in source)


def test_the_quickstart_clicked_in_every_order_on_its_fake_cuda(
    server: JupyterServer, page: Any
) -> None:
    """notebooks/01-quickstart.ipynb itself, on its own fake CUDA (a FakeTensorMode the
    cell enters): Copy, Insert and Apply in each of the six orders, the failing cell run
    again before each. JupyterLab sends a widget's second and later messages over a
    kernel subshell, another thread than the cells', where torch's per-thread mode is
    off: Apply after Copy or Insert must still move x to the fake cuda:0."""
    import json

    from playwright.sync_api import expect

    notebook = REPO / "notebooks" / "01-quickstart.ipynb"
    cells = ["".join(cell["source"]) for cell in json.loads(notebook.read_text())["cells"]]
    name = server.add(notebook)
    open_notebook(page, server.url(f"lab/tree/{name}?reset"))
    run_cell(page, _index_of(cells, "%load_ext ipydevice"))
    setup = _index_of(cells, "FakeTensorMode(")
    failing_index = _index_of(cells, "out = model(x)")
    for order in CLICK_ORDERS:
        run_cell(page, setup)  # x on the CPU again (and the mode entered once more)
        failing = _failing_cell(page, failing_index)
        _click_in_order(page, failing, order, "cuda:0")
    # Each Insert added a cell below the failed one.
    runs = run_cell(page, _index_of(cells, 'print("it runs:"') + len(CLICK_ORDERS))
    expect(runs.locator(".jp-OutputArea-output").last).to_contain_text("it runs: (8, 2) on cuda:0")
    assert page.errors == []  # type: ignore[attr-defined]


def test_meta_clicked_in_every_order(server: JupyterServer, page: Any, tmp_path: Path) -> None:
    """The same six orders with ``meta`` standing in for the GPU (no mode involved)."""
    from playwright.sync_api import expect

    name = _notebook(server, tmp_path, "meta-orders.ipynb", MISMATCH_CELLS, raises=(2,))
    open_notebook(page, server.url(f"lab/tree/{name}?reset"))
    run_cell(page, 0)
    for order in CLICK_ORDERS:
        run_cell(page, 1)
        _click_in_order(page, _failing_cell(page, 2), order, "meta")
    rerun = run_cell(page, _index_of(MISMATCH_CELLS, "RERUN OK") + len(CLICK_ORDERS))
    expect(rerun.locator(".jp-OutputArea-output").last).to_contain_text("RERUN OK meta")
    assert page.errors == []  # type: ignore[attr-defined]
