"""``notebooks/03-preflight.ipynb``: one section per audit rule of ``ipydevice.check``.

Each check cell stores the rules it expects in ``metadata.ipydevice.rules`` (an empty
list for the clean ones) and ends with::

    c = ipydevice.check(...)          # or: c = %devices --check ...
    print(sorted({p.rule for p in c.problems}))
    c

so the executed cell prints exactly those rules and shows the Checkup panel. Every rule
``ipydevice/audits/`` knows (``rule="..."``) must be shown by some cell: a new rule
fails here until the notebook gets a section for it.

The notebook is stored without outputs; the first test checks that (no kernel).
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from ipydevice.model import OPTIMIZER_STATE

nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parents[1]
NAME = "03-preflight.ipynb"
NOTEBOOK = ROOT / "notebooks" / NAME
AUDITS = ROOT / "ipydevice" / "audits"
ENDING = "print(sorted({p.rule for p in c.problems}))\nc"


def _read() -> Any:
    return nbformat.read(NOTEBOOK, as_version=4)


def _expected_rules(cell: Any) -> list[str] | None:
    return cell.get("metadata", {}).get("ipydevice", {}).get("rules")


def _check_cells(nb: Any) -> list[Any]:
    return [c for c in nb.cells if c.cell_type == "code" and _expected_rules(c) is not None]


def _audit_rules() -> set[str]:
    """Every rule name the audits (``ipydevice/audits/``) can put in a Finding."""
    text = "".join(p.read_text(encoding="utf-8") for p in sorted(AUDITS.glob("*.py")))
    rules = set(re.findall(r'\brule="(\w+)"', text))
    if "rule=OPTIMIZER_STATE" in text:
        rules.add(OPTIMIZER_STATE)
    return rules


def test_preflight_notebook_is_stored_clean() -> None:
    transformer = pytest.importorskip("IPython.core.inputtransformer2").TransformerManager()
    nb = _read()
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert "widgets" not in nb.metadata, "stored with widget state: clear it before committing"
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        assert cell.outputs == [], f"stored with outputs: {cell.source[:60]!r}"
        assert cell.execution_count is None
        assert "raises-exception" not in cell.get("metadata", {}).get("tags", []), (
            "nothing here fails"
        )
        ast.parse(transformer.transform_cell(cell.source))  # magics become Python
        if "ipydevice.check(" in cell.source or "%devices --check" in cell.source:
            assert _expected_rules(cell) is not None, (
                f"check cell without metadata.ipydevice.rules: {cell.source[:60]!r}"
            )
    checks = _check_cells(nb)
    assert checks
    for cell in checks:
        assert cell.source.rstrip().endswith(ENDING), (
            f"check cell must end with the rules and c: {cell.source[:60]!r}"
        )
        assert _expected_rules(cell) == sorted(set(_expected_rules(cell)))
    rules = _audit_rules()
    assert {"split_module", "stray_tensor", "optimizer_state"} <= rules, (
        rules
    )  # the grep still works
    shown = {rule for cell in checks for rule in _expected_rules(cell)}
    assert rules <= shown, f"rules with no section in {NAME}: {sorted(rules - shown)}"
    assert any(_expected_rules(c) == [] for c in checks), "no clean check"
    assert any(c.source.strip() == "%devices" for c in nb.cells if c.cell_type == "code")


# -- executed ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The notebook executed once, top to bottom, in a temporary copy."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from nbclient import NotebookClient

    workdir = tmp_path_factory.mktemp("preflight")
    shutil.copy(NOTEBOOK, workdir / NAME)
    nb = nbformat.read(workdir / NAME, as_version=4)
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        allow_errors=False,  # no cell here may fail
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute()
    return nb


def _streams(cell: Any) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def _printed_rules(cell: Any) -> list[str]:
    """The rules the cell printed (the last line of stdout that is a list literal)."""
    for line in reversed(_streams(cell).splitlines()):
        if line.startswith("["):
            return ast.literal_eval(line)
    raise AssertionError(f"no rules printed: {cell.source[:80]!r}\n{_streams(cell)}")


@pytest.mark.kernel
@pytest.mark.slow
def test_every_check_cell_shows_its_panel_and_rules(executed: Any) -> None:
    checks = _check_cells(executed)
    assert checks
    for cell in checks:
        expected = _expected_rules(cell)
        results = [o for o in cell.outputs if o.output_type in ("execute_result", "display_data")]
        panels = [o for o in results if "ipydevice-panel" in o.data.get("text/html", "")]
        assert len(panels) == 1, f"no Checkup panel: {cell.source[:80]!r}"
        text = panels[0].data["text/plain"]
        assert text.startswith("ipydevice · check"), text
        assert "<script" not in panels[0].data["text/html"].lower()
        assert _printed_rules(cell) == expected, (cell.source[:80], text)
        if expected:
            assert "✗" in text and "no device problems" not in text, text
        else:
            assert "no device problems found" in text, text


@pytest.mark.kernel
def test_namespace_fixes_report_what_they_moved(executed: Any) -> None:
    applied = [
        c for c in executed.cells if c.cell_type == "code" and ".apply(globals())" in c.source
    ]
    assert len(applied) >= 4
    for cell in applied:
        if "torch.cuda.is_available()" in cell.source:
            continue  # the DataParallel fix needs a GPU
        assert "moved" in _streams(cell), (cell.source[:80], _streams(cell))


@pytest.mark.kernel
def test_devices_magic_lists_the_namespace(executed: Any) -> None:
    cell = next(
        c for c in executed.cells if c.cell_type == "code" and c.source.strip() == "%devices"
    )
    results = [o for o in cell.outputs if o.output_type in ("execute_result", "display_data")]
    assert results, "no %devices output"
    assert "ipydevice-inventory" in results[0].data["text/html"]
    assert "meta" in results[0].data["text/plain"]
