"""The example notebooks, executed in a real kernel with nbclient.

``notebooks/01-quickstart.ipynb`` and ``notebooks/02-error-gallery.ipynb`` are run top
to bottom in a temporary copy, with ``allow_errors=False``: nbclient lets a cell fail
only when it is tagged ``raises-exception``, so an untagged failure (or a tagged cell
that no longer fails) breaks the test. Each failing cell must show PyTorch's error and,
right after it, ipydevice's panel: a display output with escaped HTML and plain text
naming the family stored in the cell's ``metadata.ipydevice``, then its buttons (a
widget view); the compact header with the best fix comes before the error.

The notebooks are stored without outputs; the first test checks that (no kernel).
"""

from __future__ import annotations

import copy
import html
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from ipydevice.diagnosis.recognise import FAMILIES

nbformat = pytest.importorskip("nbformat")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
QUICKSTART = "01-quickstart.ipynb"
GALLERY = "02-error-gallery.ipynb"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
TAG = "raises-exception"


def _read(name: str) -> Any:
    return nbformat.read(NOTEBOOKS / name, as_version=4)


def _tags(cell: Any) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _expected_family(cell: Any) -> str | None:
    return cell.get("metadata", {}).get("ipydevice", {}).get("family")


@pytest.mark.parametrize("name", [QUICKSTART, GALLERY])
def test_notebook_is_stored_clean(name: str) -> None:
    nb = _read(name)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert "widgets" not in nb.metadata, "stored with widget state: clear it before committing"
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        assert cell.outputs == [], f"stored with outputs: {cell.source[:60]!r}"
        assert cell.execution_count is None
        if TAG in _tags(cell):
            assert _expected_family(cell), (
                f"error cell without metadata.ipydevice.family: {cell.source[:60]!r}"
            )


# -- executed ----------------------------------------------------------------------------------

_EXECUTED: dict[str, Any] = {}


@pytest.fixture(scope="module")
def run_notebook(tmp_path_factory: pytest.TempPathFactory):
    """Executes a notebook once per module in a temporary copy; returns the executed copy."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from nbclient import NotebookClient

    def run(name: str) -> Any:
        if name not in _EXECUTED:
            workdir = tmp_path_factory.mktemp(Path(name).stem)
            shutil.copy(NOTEBOOKS / name, workdir / name)
            nb = nbformat.read(workdir / name, as_version=4)
            client = NotebookClient(
                nb,
                timeout=120,
                kernel_name="python3",
                allow_errors=False,  # only cells tagged raises-exception may fail
                resources={"metadata": {"path": str(workdir)}},
            )
            client.execute()
            _EXECUTED[name] = nb
        return _EXECUTED[name]

    yield run
    _EXECUTED.clear()


def _panel_after_error(cell: Any, buttons: bool = False) -> dict[str, Any]:
    """The panel display output that follows the cell's error output (``buttons``:
    the widget output that follows the panel)."""
    kinds = [o.output_type for o in cell.outputs]
    assert "error" in kinds, f"the cell did not fail: {cell.source[:80]!r}"
    before = cell.outputs[: kinds.index("error")]
    assert before and "ipydevice-header" in before[0].data["text/html"], "no header first"
    after = cell.outputs[kinds.index("error") + 1 :]
    assert len(after) >= 1 + buttons, f"no panel after the error: {cell.source[:80]!r}"
    panel = after[int(buttons)]
    assert panel.output_type == "display_data", panel.output_type
    return panel.data


def _check_panel(data: dict[str, Any], family: str | None, widget: bool) -> None:
    assert 'class="ipydevice-panel' in data["text/html"]
    assert "<script" not in data["text/html"].lower()
    assert data["text/plain"].startswith("ipydevice · device error")
    if family:
        from ipydevice import registry

        found = registry.family_of(family)
        assert found is not None
        assert f"device error: {found.title}" in data["text/plain"]
    if widget:
        assert data[WIDGET_VIEW]["model_id"]


@pytest.mark.kernel
@pytest.mark.parametrize("name", [QUICKSTART, GALLERY])
@pytest.mark.slow
def test_every_error_cell_shows_its_panel(run_notebook, name: str) -> None:
    nb = run_notebook(name)
    failing = [c for c in nb.cells if c.cell_type == "code" and TAG in _tags(c)]
    assert failing
    for cell in failing:
        _check_panel(_panel_after_error(cell), _expected_family(cell), widget=False)
        assert WIDGET_VIEW not in _panel_after_error(cell), "exporters would drop the panel"
        buttons = _panel_after_error(cell, buttons=True)
        assert buttons[WIDGET_VIEW]["model_id"]
    for cell in nb.cells:  # nothing else failed (nbclient would have raised) or showed a panel
        if cell.cell_type == "code" and TAG not in _tags(cell):
            assert all(o.output_type != "error" for o in cell.outputs)


@pytest.mark.kernel
def test_gallery_covers_the_families_and_message_only_cells_show_panels(run_notebook) -> None:
    nb = run_notebook(GALLERY)
    families = {_expected_family(c) for c in nb.cells if c.cell_type == "code"} - {None}
    # Every family the engine knows has a cell: a new family needs a gallery entry.
    assert set(FAMILIES) <= families, sorted(set(FAMILIES) - families)
    message_only = [
        c for c in nb.cells if c.get("metadata", {}).get("ipydevice", {}).get("message_only")
    ]
    assert len(message_only) >= 7
    for cell in message_only:
        results = [o for o in cell.outputs if o.output_type == "execute_result"]
        assert len(results) == 1, cell.source[:80]
        _check_panel(results[0].data, _expected_family(cell), widget=False)


def _cell_with(nb: Any, source: str) -> Any:
    return next(c for c in nb.cells if c.cell_type == "code" and c.source.strip() == source)


def _text(cell: Any) -> str:
    parts = []
    for o in cell.outputs:
        if o.output_type == "stream":
            parts.append(o.text)
        elif "data" in o:
            parts.append(o.data.get("text/plain", ""))
    return "".join(parts)


@pytest.mark.kernel
def test_quickstart_applies_the_fix_and_the_cell_runs_again(run_notebook) -> None:
    nb = run_notebook(QUICKSTART)
    failing = _cell_with(nb, "out = model(x)")
    panel = _panel_after_error(failing)
    # The header above the traceback says the headline; the panel below does not repeat it.
    header = failing.outputs[0].data["text/plain"]
    assert "`x` is on cpu, `model` is on cuda:0" in header
    assert "`x` is on cpu, `model` is on cuda:0" not in panel["text/plain"]
    assert "x = x.to('cuda:0')" in panel["text/plain"]
    applied = next(c for c in nb.cells if "d.fixes[0].apply(globals())" in c.source)
    assert "moved x to cuda:0" in _text(applied)
    assert "Re-run the cell." in _text(applied) and "ApplyResult(" not in _text(applied)
    rerun = next(c for c in nb.cells if c.source.startswith("out = model(x)\nprint("))
    assert re.search(r"it runs: \(8, 2\) on cuda:0", _text(rerun)), _text(rerun)
    inventory = _cell_with(nb, "%devices")
    html = next(o for o in inventory.outputs if "data" in o).data["text/html"]
    assert "ipydevice-inventory" in html
    assert "cuda:0" in _text(inventory) and "x" in _text(inventory)
    one = _cell_with(nb, "%devices model")
    assert "model[0]" in _text(one) and "submodule" in _text(one)


@pytest.mark.kernel
def test_quickstart_exports_to_static_html_with_the_table(run_notebook) -> None:
    """An HTML export without widget state shows the escaped table, not a widget script."""
    pytest.importorskip("nbconvert")
    from nbconvert import HTMLExporter

    nb = copy.deepcopy(run_notebook(QUICKSTART))
    # Saved widget state makes nbconvert render the widget view (a script that needs
    # JavaScript from a CDN); without it, it falls back to the panel's text/html.
    nb.metadata.pop("widgets", None)
    body, _ = HTMLExporter().from_notebook_node(nb)
    start = body.find('<div class="ipydevice-panel"')
    assert start >= 0, "no panel in the export"
    end = body.find('<div class="jp-OutputArea-child', start)
    end = body.find('<div class="jp-Cell ', start) if end < 0 else end
    panel = body[start:end]  # the rendered panel, up to the next output or cell
    assert "<script" not in panel.lower()
    assert 'class="ipydevice-table"' in panel
    culprit_row = re.search(r'<div class="ipydevice-culprit".*?</div>', panel, re.S)
    assert culprit_row and re.search(r"<code[^>]*>x</code>", culprit_row.group()), (
        "culprit x not in the table"
    )
    assert "cuda:0" in panel and "x = x.to(" in panel
    stored = _panel_after_error(_cell_with(nb, "out = model(x)"))["text/html"]
    assert html.unescape(stored) in html.unescape(body), (
        "the panel's HTML was altered by the export"
    )
