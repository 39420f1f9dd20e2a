"""Golden renderings: what users see for a handful of diagnoses, as reviewable files.

Each scenario of ``python -m ipydevice demo`` (CPU only: FakeTensorMode and the meta
device) is diagnosed and rendered as text and HTML; the result must match
``tests/golden/<scenario>.txt`` and ``.html``. A change in what users see then shows
as a diff of those files. To accept a change, regenerate them and review the diff::

    IPYDEVICE_REGENERATE_GOLDEN=1 python -m pytest tests/test_golden.py
    git diff tests/golden
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

from ipydevice.integrations.demo import SCENARIOS, run_scenario
from ipydevice.render.html import render_diagnosis_html
from ipydevice.render.text import render_diagnosis

GOLDEN = Path(__file__).resolve().parent / "golden"
REGENERATE = os.environ.get("IPYDEVICE_REGENERATE_GOLDEN") == "1"
NAMES = ["classic", "two_gpus", "tensor_attribute", "loss_weights", "factory_call"]


def _stable(text: str) -> str:
    """Cell names count up with every cell run in the process; HTML gets a line
    break after each closing block tag, so that a change shows as a short diff."""
    text = re.sub(r"(<|&lt;)ipython-input-\d+-demo\d*(>|&gt;)", r"\1ipython-input-N-demo\2", text)
    return re.sub(r"(</(?:div|tr|table|details|summary|pre|ul|li|h\d)>)", "\\1\n", text)


@pytest.mark.parametrize(("name", "scenario"), list(zip(NAMES, SCENARIOS, strict=True)), ids=NAMES)
def test_rendering_matches_the_golden_file(name: str, scenario: tuple[str, str, str]) -> None:
    _, setup, failing = scenario
    diagnosis = run_scenario(setup, failing)
    assert diagnosis is not None and diagnosis.is_device_error
    for suffix, rendered in (
        ("txt", render_diagnosis(diagnosis, width=100)),
        ("html", render_diagnosis_html(diagnosis)),
    ):
        path = GOLDEN / f"{name}.{suffix}"
        text = _stable(rendered) + "\n"
        if REGENERATE:
            path.write_text(text, encoding="utf-8")
        assert path.exists(), f"no {path.name}: run with IPYDEVICE_REGENERATE_GOLDEN=1"
        assert text == path.read_text(encoding="utf-8"), (
            f"{path.name} changed: if intended, regenerate with IPYDEVICE_REGENERATE_GOLDEN=1 "
            "and review `git diff tests/golden`"
        )
