"""The static HTML: each fact once, the three verbosities, the header, escaping, plurals.

Nothing here needs IPython: diagnoses come from real device errors on the ``meta``
device or are built from model records.
"""

from __future__ import annotations

import re
import textwrap

import pytest
from cells import Notebook

import ipydevice
from ipydevice.model import (
    DeviceShare,
    Diagnosis,
    Finding,
    Fix,
    FrameSummary,
    Inventory,
    ObjectRecord,
    Snapshot,
)
from ipydevice.render.html import (
    render_diagnosis_html,
    render_header_html,
    render_inventory_html,
)
from ipydevice.render.text import VERBOSITY_LEVELS

HOSTILE = '<img src=x onerror="alert(1)">'


@pytest.fixture(scope="module")
def classic() -> Diagnosis:
    nb = Notebook()
    nb.run(
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)\n"
    )
    return ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)


def visible_text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


def test_the_panel_says_each_fact_once(classic: Diagnosis) -> None:
    html = render_diagnosis_html(classic)
    text = visible_text(html)
    assert "x is on cpu, model is on meta" in text
    assert text.count("cpu") == 2  # the headline and the table's row
    assert "<ul" not in html  # no bullet restating the headline
    assert "move it to" not in text and "computation runs" not in text
    assert "Expected all tensors" not in text  # under its own traceback
    assert 'data-verbosity="context"' in html
    # the move and device= where the earlier cell made x (no rewrite of a one-line cell)
    assert html.count('class="ipydevice-fix"') == 2 and ">Fixes</div>" in html


def test_one_fix_is_not_numbered() -> None:
    d = Diagnosis(
        is_device_error=True,
        family="op_mismatch",
        target="cuda:0",
        culprits=(
            Finding(
                "x", "cpu", "tensor", "namespace", "on cpu, but the computation runs on cuda:0"
            ),
        ),
        fixes=(Fix("Move x to cuda:0", "x = x.to('cuda:0')", "namespace"),),
    )
    html = render_diagnosis_html(d)
    assert "<b>Fix: Move x to cuda:0</b>" in html and "Fixes" not in html


def test_minimal_is_the_headline_and_the_best_fix(classic: Diagnosis) -> None:
    html = render_diagnosis_html(classic, verbosity="minimal")
    assert 'class="ipydevice-panel ipydevice-minimal"' in html
    assert "ipydevice-table" not in html and "details below" not in html
    text = visible_text(html)
    assert "x is on cpu, model is on meta" in text
    assert "fix: move x to meta (run once, then re-run the cell)" in text
    assert "x = x.to(&#x27;meta&#x27;)" in html
    assert html.count("ipydevice-code") == 1  # only the best fix


def test_verbosity_takes_xmode_spelling(classic: Diagnosis) -> None:
    assert render_diagnosis_html(classic, verbosity="Minimal") == render_diagnosis_html(  # type: ignore[arg-type]
        classic, verbosity="minimal"
    )


def test_verbose_adds_message_findings_rows_and_frames(classic: Diagnosis) -> None:
    html = render_diagnosis_html(classic, verbosity="verbose", limit=1)
    text = visible_text(html)
    assert "Expected all tensors" in text or "is not on the expected device" in text
    assert "on cpu, but the computation runs on meta" in text
    assert "Frames (innermost last)" in text and "out = model(x)" in text
    assert "more object" not in text  # every row, whatever the limit


def test_a_headed_panel_leaves_the_headline_to_the_header(classic: Diagnosis) -> None:
    from ipydevice.render.text import render_diagnosis

    alone, headed = render_diagnosis_html(classic), render_diagnosis_html(classic, headed=True)
    assert "x is on cpu, model is on meta" in visible_text(alone)
    assert "x is on cpu, model is on meta" not in visible_text(headed)
    assert "x is on cpu, model is on meta" in visible_text(render_header_html(classic))
    for page in (headed, render_diagnosis(classic, headed=True)):
        assert "ipydevice · device error" in page and "x = x.to('meta')" in page.replace(
            "&#x27;", "'"
        )
    assert "`x` is on cpu" not in render_diagnosis(classic, headed=True)
    assert render_diagnosis(classic) == str(classic) and alone == classic._repr_html_()


def test_the_header_points_below_the_traceback(classic: Diagnosis) -> None:
    html = render_header_html(classic)
    assert html.startswith('<div class="ipydevice-header"')
    assert "ipydevice-panel" not in html  # the panel is the block after the traceback
    text = visible_text(html)
    assert "x is on cpu, model is on meta" in text
    assert "fix: move x to meta" in text and "details below the traceback" in text
    assert "ipydevice-table" not in html
    assert "details below" not in render_header_html(classic, pointer="")
    assert render_header_html(ipydevice.diagnose(ZeroDivisionError("x"))) == ""


def hostile_diagnosis() -> Diagnosis:
    return Diagnosis(
        is_device_error=True,
        family=HOSTILE,
        exc_type=HOSTILE,
        message=HOSTILE,
        target=HOSTILE,
        reference=HOSTILE,
        failing_module=f"{HOSTILE} (<b>Evil</b>)",
        culprits=(Finding(HOSTILE, HOSTILE, "tensor", HOSTILE, HOSTILE, location=HOSTILE),),
        causes=(Finding("<b>Evil</b>", "cpu", "module", "namespace", HOSTILE, rule="plain_list"),),
        fixes=(
            Fix(f"Move {HOSTILE} to cpu", f"x = {HOSTILE!r}", "source", location=HOSTILE),
            Fix(HOSTILE, HOSTILE, HOSTILE, original=HOSTILE),
        ),
        snapshot=Snapshot(
            (ObjectRecord(HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE, where=HOSTILE),)
        ),
        frames=(FrameSummary(HOSTILE, 1, HOSTILE, HOSTILE, True),),
        notes=(HOSTILE,),
    )


@pytest.mark.parametrize("verbosity", VERBOSITY_LEVELS)
def test_every_verbosity_escapes_everything(verbosity: str) -> None:
    html = render_diagnosis_html(hostile_diagnosis(), verbosity=verbosity)  # type: ignore[arg-type]
    assert "<img" not in html and "<b>Evil" not in html
    assert "&lt;img src=x onerror=" in html


def test_the_header_escapes_everything() -> None:
    html = render_header_html(hostile_diagnosis(), pointer=HOSTILE)
    assert "<img" not in html and "<b>Evil" not in html
    assert html.count("&lt;img src=x onerror=") >= 4  # headline (twice), fix title, code, pointer
    message_only = Diagnosis(is_device_error=True, family="x", advice=HOSTILE)
    assert "<img" not in render_header_html(message_only)


def test_inventory_plurals() -> None:
    one = Inventory(
        records=(ObjectRecord("x", "tensor", "Tensor", "cpu", "(3,)", "float32", 12),),
        totals=(DeviceShare("cpu", 1, 12),),
        problems=(Finding("x", "cpu", "tensor", "namespace", "on cpu, but model is on meta"),),
    )
    text = visible_text(render_inventory_html(one))
    assert "ipydevice · 1 object, 1 tensor on 1 device" in text
    assert "cpu 1 tensor · 12 B" in text
    assert "Problem" in text and "Problems" not in text


def test_folded_rows_are_counted_in_words() -> None:
    records = tuple(ObjectRecord(f"t{i}", "tensor", "Tensor", "cpu", "(1,)") for i in range(3))
    inv = Inventory(records=records, totals=(DeviceShare("cpu", 3, 12),))
    assert "1 more object</summary>" in render_inventory_html(inv, limit=2)
    assert "2 more objects</summary>" in render_inventory_html(inv, limit=1)


def test_folded_rows_are_escaped_text_in_one_pre() -> None:
    records = tuple(
        ObjectRecord(f"t{i}{HOSTILE}", "tensor", "Tensor", HOSTILE, "(1,)", where=HOSTILE)
        for i in range(4)
    )
    inv = Inventory(records=records, totals=(DeviceShare("cpu", 4, 16),))
    html = render_inventory_html(inv, limit=1)
    folded = html.split('<pre class="ipydevice-folded"')[1].split("</pre>")[0]
    assert "<img" not in html and folded.count("onerror=&quot;alert(1)&quot;&gt;") == 9
    assert "t1" in folded and "t3" in folded and "<div" not in folded


def test_context_html_has_no_repeated_headline_words_for_the_gallery() -> None:
    """The loss-weight case: the headline names the buffer, the fix moves the loss."""
    nb = Notebook()
    nb.run(
        textwrap.dedent(
            """
            import torch
            import torch.nn as nn
            model = nn.Linear(4, 3).to('meta')
            criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5]))
            x = torch.randn(8, 4, device='meta')
            y = torch.zeros(8, dtype=torch.long, device='meta')
            """
        )
    )
    d = ipydevice.diagnose(nb.fails("loss = criterion(model(x), y)\n"), namespace=nb.ns)
    text = visible_text(render_diagnosis_html(d))
    assert "criterion.weight is on cpu, model is on meta" in text
    assert "move it" not in text and "Move criterion to meta" in text


def _flagged_inventory(flagged: tuple[str, ...]) -> Inventory:
    """Nine rows on meta, two on cpu and one on cuda:1, in the namespace's order; the
    problems name ``flagged``."""
    meta = [ObjectRecord(f"m{i}", "tensor", "Tensor", "meta", "(1,)") for i in range(9)]
    cpu = [ObjectRecord(name, "tensor", "Tensor", "cpu", "(8, 16)") for name in ("x2", "y2")]
    other = [ObjectRecord("z", "tensor", "Tensor", "cuda:1", "(2,)")]
    problems = tuple(
        Finding(name, "?", "tensor", "namespace", "on the wrong device") for name in flagged
    )
    return Inventory(
        records=(*meta, *cpu, *other),
        totals=(DeviceShare("meta", 9, 0), DeviceShare("cpu", 2, 0), DeviceShare("cuda:1", 1, 0)),
        problems=problems,
    )


@pytest.mark.parametrize("flagged", [("x2",), ("y2", "z")])
def test_devices_shows_the_flagged_objects_first_never_folded(flagged: tuple[str, ...]) -> None:
    html = render_inventory_html(_flagged_inventory(flagged), limit=4)
    grid, _, folded = html.partition("<details>")
    for name in flagged:
        row = rf'<div class="ipydevice-culprit"[^>]*><span>✗</span><span><code[^>]*>{name}</code>'
        assert re.search(row, grid), f"{name} is not a marked row of the grid"
        assert not re.search(rf"\b{name}\b", folded.split("</pre>")[0])
    # flagged first: before any unflagged row
    first_plain = grid.index(">m0</code>")
    assert all(grid.index(f">{name}</code>") < first_plain for name in flagged)
    # and so does the text report, in its groups by device
    from ipydevice.render.text import render_inventory

    text = render_inventory(_flagged_inventory(flagged), max_rows=4)
    shown = text.split("more object")[0]
    assert all(f"✗  {name}" in shown for name in flagged), text


def test_apply_result_reads_as_the_button_status() -> None:
    from ipydevice.model import ApplyResult

    done = ApplyResult(True, "moved x to cuda:0", ("moved x to cuda:0",))
    assert str(done) == "moved x to cuda:0. Re-run the cell."
    assert repr(done) == "<ApplyResult ✓ moved x to cuda:0. Re-run the cell.>"
    assert done.ok and done.moved == ("moved x to cuda:0",)  # the fields stay
    failed = ApplyResult(False, f"could not move {HOSTILE}: gone")
    assert str(failed) == f"could not move {HOSTILE}: gone" and repr(failed).startswith(
        "<ApplyResult ✗"
    )
    html = failed._repr_html_()
    assert "<img" not in html and "✗ could not move" in html
    assert "ipydevice-applied" in done._repr_html_() and "✓ moved x" in done._repr_html_()


def test_the_table_and_code_wrap_in_a_narrow_notebook_rather_than_scroll(classic) -> None:
    """820 px wide with the file browser open leaves about 360 px: the columns shrink to
    a few characters each and wrap, and code wraps (its text unchanged); only the folded
    rows, a text table, keep their columns. Looked at in Chromium (light, dark, 368 px)."""
    long_code = Fix(
        "Move it", "x = " + " + ".join(f"term_{i}.to('cuda:0')" for i in range(12)), "namespace"
    )
    d = Diagnosis(
        is_device_error=True,
        family="device_mismatch",
        culprits=(Finding("x", "cpu", "tensor", "namespace", "on cpu"),),
        fixes=(long_code,),
        snapshot=classic.snapshot,
    )
    inventory = Inventory(
        records=tuple(ObjectRecord(f"t{i}", "tensor", "Tensor", "cpu", "(1,)") for i in range(9)),
        totals=(DeviceShare("cpu", 9, 36),),
    )
    for html in (
        render_diagnosis_html(d),
        render_diagnosis_html(classic),
        render_inventory_html(inventory),
    ):
        grid = re.search(r'class="ipydevice-table" style="([^"]*)"', html).group(1)
        assert "nowrap" not in grid and "overflow-wrap:anywhere" in grid
        columns = grid.split("grid:none/")[1].split(";")[0]
        assert "max-content" in columns and "auto)" not in columns  # each column may shrink
        for block in re.findall(r'<pre class="ipydevice-code" style="([^"]*)"', html):
            assert "white-space:pre-wrap" in block and "overflow-x" not in block
    assert long_code.code in render_diagnosis_html(d).replace("&#x27;", "'")
