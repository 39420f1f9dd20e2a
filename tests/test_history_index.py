"""The earlier-cell search indexes each notebook cell once: the cost of an error
stays flat however long the session (it parsed up to 100 cells per error)."""

from __future__ import annotations

import pytest
from cells import Notebook

import ipydevice
from ipydevice.code import cells
from ipydevice.fixes import history

pytest.importorskip("torch")

SETUP = "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')\n"


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The cells parsed, in order."""
    seen: list[str] = []
    index = cells._index_cell

    def counting(filename: str) -> dict:
        seen.append(filename)
        return index(filename)

    monkeypatch.setattr(cells, "_index_cell", counting)
    return seen


def history_fix(d: ipydevice.Diagnosis) -> ipydevice.Fix | None:
    return next((f for f in d.fixes if f.scope == "source" and "device=" in f.code), None)


def test_each_cell_is_parsed_once_over_a_long_session(parses: list[str]) -> None:
    nb = Notebook()
    nb.run(SETUP)
    nb.run("x = torch.zeros(3, 4)\n")
    for n in range(60):  # many cells that mention x
        nb.run(f"y{n} = x.sum() + {n}\n")
    fix = history_fix(ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns))
    assert fix is not None and "torch.zeros(3, 4, device='meta')" in fix.code
    first = len(parses)
    assert first <= history._MAX_CELLS
    for n in range(60):  # each error after one new cell: x's cell leaves the window
        nb.run(f"z{n} = x.mean()\n")
        ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)
    assert len(parses) - first <= 2 * 60  # the new cell and the failed one, each once
    assert len(parses) == len(set(parses))  # no cell twice
    assert len(cells._INDEX) <= history._MAX_CELLS


def test_the_latest_cell_that_assigns_the_name_decides() -> None:
    nb = Notebook()
    nb.run(SETUP)
    nb.run("x = torch.zeros(3, 4)\n")
    nb.run("x = torch.ones(3, 4, device='cpu')\n")  # made with device= : no history fix
    assert history_fix(ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)) is None
    nb.run("if True:\n    x = torch.zeros(3, 4)\n    x = torch.rand(3, 4)\n")
    fix = history_fix(ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns))
    assert fix is not None and "torch.rand(3, 4, device='meta')" in fix.code
