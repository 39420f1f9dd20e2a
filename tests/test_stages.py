"""Unit tests per stage, without IPython: recognise, analyse (culprits and target),
fix (propose and apply), and the text and HTML renderers on plain records.

Each stage is called directly with what the previous one hands over, so a failure
names the stage that broke.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from ipydevice.collect.scan import Scan
from ipydevice.diagnosis.culprits import analyse, choose_target, same_device
from ipydevice.diagnosis.recognise import recognise
from ipydevice.fixes.propose import propose_fixes
from ipydevice.model import Diagnosis, Finding, Fix, ObjectRecord, Snapshot, Step
from ipydevice.render.html import render_diagnosis_html
from ipydevice.render.text import headline, render_diagnosis
from ipydevice.settings import current

torch = pytest.importorskip("torch")
nn = torch.nn

META_MESSAGE = "Tensor on device cpu is not on the expected device meta!"


def _scan(**objects: Any) -> Scan:
    """A scan of ``objects`` as if the failing cell's line used them all."""
    scan = Scan(current())
    for name, obj in objects.items():
        flags = {"operand": True} if torch.is_tensor(obj) else {}
        scan.add(
            obj,
            (("name", name),),
            "namespace",
            named=True,
            on_line=True,
            user=True,
            frame=0,
            **flags,
        )
    return scan


# -- analyse -----------------------------------------------------------------------------


def test_the_model_sets_the_target_and_the_batch_is_the_culprit() -> None:
    facts = recognise(META_MESSAGE)
    analysis = analyse(facts, _scan(model=nn.Linear(4, 2).to("meta"), x=torch.randn(3, 4)), [])
    assert analysis.target == "meta"
    assert [(c.name, c.device, c.rule) for c in analysis.culprits] == [("x", "cpu", "wrong_device")]


def test_a_family_chooses_its_own_target() -> None:
    numpy = recognise("can't convert meta device type tensor to numpy.")
    assert numpy.family == "numpy_conversion"
    analysis = analyse(numpy, _scan(x=torch.empty(2, device="meta")), [])
    assert choose_target(numpy, _scan(), analysis, []) == ("cpu", "NumPy arrays live on the CPU")
    load = recognise(
        "Attempting to deserialize object on CUDA device 1 but torch.cuda.device_count() is 1."
    )
    assert choose_target(load, _scan(), analysis, [])[0] == "cuda:0"


def test_same_device_reads_a_bare_type_as_its_first_device() -> None:
    assert same_device("cuda", "cuda:0") and not same_device("cpu", "meta")


# -- fix -----------------------------------------------------------------------------------


def test_the_namespace_fix_moves_the_culprit_by_reference() -> None:
    namespace = {"model": nn.Linear(4, 2).to("meta"), "x": torch.randn(3, 4)}
    scan = _scan(**namespace)
    facts = recognise(META_MESSAGE)
    fixes = propose_fixes(facts, analyse(facts, scan, []), scan, [])
    assert [(f.code, f.scope) for f in fixes] == [("x = x.to('meta')", "namespace")]
    result = fixes[0].apply(namespace)
    assert result.ok and namespace["x"].device.type == "meta"


def test_a_fix_without_steps_is_not_applied() -> None:
    result = Fix("Read the docs", "help(torch.load)", "source").apply({})
    assert not result.ok and "cannot be applied" in result.message


def test_a_step_on_a_missing_name_fails_in_one_line() -> None:
    fix = Fix(
        "Move x", "x = x.to('cpu')", "namespace", steps=(Step("reassign", (("name", "x"),), "cpu"),)
    )
    result = fix.apply({})
    assert not result.ok and "\n" not in result.message


# -- render --------------------------------------------------------------------------------

DIAGNOSIS = Diagnosis(
    is_device_error=True,
    family="op_mismatch",
    exc_type="RuntimeError",
    message="Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
    summary="an operation received tensors on different devices",
    family_title="tensors on different devices",
    devices=("cuda:0", "cpu"),
    target="cuda:0",
    reference="model",
    culprits=(Finding("x<script>", "cpu", "tensor", "namespace", "on cpu", target="cuda:0"),),
    fixes=(Fix("Move x to cuda:0", "x = x.to('cuda:0')", "namespace"),),
    snapshot=Snapshot(
        (ObjectRecord("x<script>", "tensor", "Tensor", "cpu", "(3, 4)", "float32", 48),)
    ),
)


def test_text_rendering_names_the_culprit_target_and_fix() -> None:
    text = render_diagnosis(DIAGNOSIS, width=100)
    assert text.startswith("ipydevice · device error: tensors on different devices")
    assert "x = x.to('cuda:0')" in text and "cuda:0" in headline(DIAGNOSIS)
    assert all(len(line) <= 100 for line in text.splitlines())
    assert str(DIAGNOSIS) == text


def test_html_rendering_escapes_everything() -> None:
    html = render_diagnosis_html(DIAGNOSIS)
    assert "<script>" not in html and "x&lt;script&gt;" in html
    assert DIAGNOSIS._repr_html_() == html


def test_the_stages_need_no_ipython() -> None:
    code = (
        "import sys, ipydevice\n"
        "from ipydevice.pipeline import engine\n"
        "from ipydevice.diagnosis import culprits\n"
        "from ipydevice.fixes import propose\n"
        "from ipydevice.render import html, text\n"
        "assert 'IPython' not in sys.modules, 'a stage imported IPython'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
