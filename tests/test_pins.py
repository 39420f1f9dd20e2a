"""pyproject.toml's lowest versions are the ones the Colab job tests.

``scripts/test-colab-pins.sh`` runs the kernel tests on exactly Google Colab's
IPython, ipykernel, ipywidgets, anywidget and traitlets; the lower bounds that
pyproject.toml declares must be those pins, so what is declared is what is tested.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "test-colab-pins.sh"


def pins() -> dict[str, str]:
    text = SCRIPT.read_text(encoding="utf-8")
    block = text[text.index("PINS=(") : text.index(")", text.index("PINS=("))]
    return dict(re.findall(r'"([A-Za-z0-9_.-]+)==([0-9.]+)"', block))


def lower_bounds() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    bounds = {}
    for requirement in requirements:
        found = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9.]+)", requirement.strip())
        if found:
            bounds[found.group(1).lower().replace("_", "-")] = found.group(2)
    return bounds


def test_the_lower_bounds_are_the_colab_pins():
    pinned, bounds = pins(), lower_bounds()
    assert set(pinned) == {"ipython", "ipykernel", "ipywidgets", "anywidget", "traitlets"}
    for name, version in pinned.items():
        assert bounds.get(name) == version, f"pyproject.toml: {name}>={version} (the Colab pin)"


def test_ci_runs_the_colab_job():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "scripts/test-colab-pins.sh" in ci
