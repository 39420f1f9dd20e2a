"""The text report: each fact once, the three verbosities, the header, colour, widths, plurals.

Diagnoses come from real device errors (the ``meta`` device stands in for a GPU) or
are built from model records; nothing here needs IPython.
"""

from __future__ import annotations

import io
import re
import textwrap

import pytest
from cells import Notebook

import ipydevice
from ipydevice.integrations import demo
from ipydevice.model import (
    DeviceShare,
    Diagnosis,
    Finding,
    Fix,
    FrameSummary,
    Inventory,
    ObjectRecord,
    Snapshot,
    Step,
)
from ipydevice.render.text import (
    HEADER_POINTER,
    VERBOSITY_LEVELS,
    as_verbosity,
    columns,
    display_width,
    headline,
    plural,
    render_diagnosis,
    render_header,
    render_inventory,
    use_color,
)

ANSI = re.compile(r"\x1b\[[0-9;]*m")
IMPORTS = "import torch\nimport torch.nn as nn\n"


def diagnose(setup: str, failing: str) -> Diagnosis:
    nb = Notebook()
    nb.run(IMPORTS + textwrap.dedent(setup))
    return ipydevice.diagnose(nb.fails(textwrap.dedent(failing)), namespace=nb.ns)


@pytest.fixture(scope="module")
def classic() -> Diagnosis:
    """The model on the "GPU" (meta), the batch not; set up in an earlier cell, so
    there is a namespace fix (and no cell fix: the cell is one line)."""
    return diagnose(
        "model = nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)\n", "out = model(x)\n"
    )


@pytest.fixture(scope="module")
def loss_weight() -> Diagnosis:
    return diagnose(
        """
        model = nn.Linear(4, 3).to('meta')
        criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5]))
        x = torch.randn(8, 4, device='meta')
        y = torch.zeros(8, dtype=torch.long, device='meta')
        """,
        "loss = criterion(model(x), y)\n",
    )


@pytest.fixture(scope="module")
def meta_model() -> Diagnosis:
    return diagnose(
        "with torch.device('meta'):\n    big = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))\n",
        "big.to('cpu')\n",
    )


def built(**changes: object) -> Diagnosis:
    """A diagnosis from records: `x` on cpu, `model` on cuda:0, one namespace fix."""
    fields: dict[str, object] = {
        "is_device_error": True,
        "family": "op_mismatch",
        "exc_type": "RuntimeError",
        "message": "Expected all tensors to be on the same device, but found at least two devices, cpu and cuda:0!",
        "target": "cuda:0",
        "reference": "model",
        "culprits": (
            Finding(
                "x", "cpu", "tensor", "namespace", "on cpu, but the computation runs on cuda:0"
            ),
        ),
        "fixes": (
            Fix(
                "Move x to cuda:0",
                "x = x.to('cuda:0')\n",
                "namespace",
                steps=(Step("reassign", (("name", "x"),), "cuda:0"),),
            ),
        ),
        "snapshot": Snapshot(
            (
                ObjectRecord("x", "tensor", "Tensor", "cpu", "(3, 4)", "float32", 48),
                ObjectRecord("model", "module", "Linear", "cuda:0", nbytes=40),
            )
        ),
        "frames": (FrameSummary("<ipython-input-1>", 1, "<module>", "out = model(x)", True),),
    }
    fields.update(changes)
    return Diagnosis(**fields)  # type: ignore[arg-type]


# -- each fact once ------------------------------------------------------------------------


def test_the_classic_says_each_fact_once(classic: Diagnosis) -> None:
    text = render_diagnosis(classic)
    assert text.splitlines()[1] == "  `x` is on cpu, `model` is on meta"
    # Where x is: the headline and its table row, no bullet restating it.
    assert text.count("on cpu") == 1 and "computation runs" not in text
    assert "On the wrong device" not in text and "move it to" not in text
    # The message is the last line of the traceback above the report.
    assert "Expected all tensors" not in text and "RuntimeError" not in text
    # The headline names `model`: no "failed in model (Linear)" beside it.
    assert "failed in" not in text
    assert "Fixes\n    1. Move x to meta  [run once, then re-run the cell]" in text
    # A cell of one line rewritten would be the move plus that line again.
    assert "in the cell, before the line that failed" not in text


def test_the_headline_speaks_of_what_the_fix_moves(loss_weight: Diagnosis) -> None:
    assert headline(loss_weight) == "`criterion.weight` is on cpu, `model` is on meta"
    text = render_diagnosis(loss_weight)
    assert "move it" not in text  # "it" was criterion.weight; the fix moves criterion
    assert "Fix: Move criterion to meta  [run once" in text
    assert "failed in criterion (CrossEntropyLoss)" in text  # not in the headline


def test_a_meta_model_is_materialised_not_moved(meta_model: Diagnosis) -> None:
    text = render_diagnosis(meta_model)
    assert headline(meta_model).startswith("`big` is on meta: meta tensors hold no data")
    assert "Fix: Materialise big on cpu with to_empty  [run once" in text
    assert "Move big" not in text
    assert "built on the meta device" not in text  # the headline said it


def test_a_finding_that_explains_keeps_its_line() -> None:
    d = diagnose(
        """
        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.cache = torch.randn(4)
                self.weight = nn.Parameter(torch.randn(4))

            def forward(self, x):
                return x + self.cache + self.weight

        layer = Layer().to('meta')
        v = torch.randn(4, device='meta')
        """,
        "out = layer(v)\n",
    )
    text = render_diagnosis(d)
    assert "✗ layer.cache: a plain tensor attribute: module.to() never moves it\n" in text
    assert "Register Layer.cache as a buffer" in text


def test_a_table_of_culprits_only_is_left_to_verbose() -> None:
    d = built(snapshot=Snapshot((ObjectRecord("x", "tensor", "Tensor", "cpu", "(3,)"),)))
    assert "Objects involved" not in render_diagnosis(d)
    assert "Objects involved" in render_diagnosis(d, verbosity="verbose")


def test_without_fixes_the_headline_says_what_to_do() -> None:
    assert headline(built(fixes=())) == "`x` is on cpu, `model` is on cuda:0: move it to cuda:0"
    two = (
        Finding("a", "cpu", "tensor", "namespace", "on cpu, but the computation runs on cuda:0"),
        Finding("b", "cpu", "tensor", "namespace", "on cpu, but the computation runs on cuda:0"),
    )
    assert headline(built(fixes=(), culprits=two)) == (
        "`a` and `b` are on cpu, `model` is on cuda:0: move them to cuda:0"
    )
    assert headline(built(reference="")) == "`x` is on cpu, the other tensors on cuda:0"


def test_a_message_without_a_traceback_is_shown() -> None:
    d = ipydevice.diagnose(RuntimeError("Tensor for argument input is on cpu but expected on mps"))
    text = render_diagnosis(d)
    assert "RuntimeError: Tensor for argument input is on cpu but expected on mps" in text
    # the advice (.to('mps')), the target's reason and the message
    assert text.count("mps") == 3


# -- verbosity -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Minimal", "minimal", "MINIMAL"])
def test_verbosity_takes_xmode_spelling(name: str) -> None:
    assert as_verbosity(name) == "minimal"
    assert VERBOSITY_LEVELS == ("minimal", "context", "verbose")


def test_an_unknown_verbosity_is_refused() -> None:
    with pytest.raises(ValueError, match="minimal, context, verbose"):
        render_diagnosis(built(), verbosity="loud")  # type: ignore[arg-type]


def test_minimal_is_the_headline_and_the_best_fix(classic: Diagnosis) -> None:
    lines = render_diagnosis(classic, verbosity="minimal").splitlines()
    assert lines == [
        "ipydevice · `x` is on cpu, `model` is on meta",
        "  fix: move x to meta [run once, then re-run the cell]",
        "      x = x.to('meta')",
    ]


def test_minimal_shows_the_lines_a_cell_fix_adds() -> None:
    # Made and used in one cell: re-running the cell is the only fix.
    d = diagnose(
        "",
        """
        model = nn.Linear(4, 3).to('meta')
        criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5]))
        x = torch.randn(8, 4, device='meta')
        y = torch.zeros(8, dtype=torch.long, device='meta')
        loss = criterion(model(x), y)
        """,
    )
    assert [f.scope for f in d.fixes] == ["cell"]
    assert "\n  Fix: Move criterion to meta in the cell" in render_diagnosis(d)  # not numbered
    lines = render_diagnosis(d, verbosity="minimal").splitlines()
    assert lines == [
        "ipydevice · `criterion.weight` is on cpu, `model` is on meta",
        "  fix: move criterion to meta in the cell, before the line that failed",
        "      criterion.to('meta')",
    ]


def test_minimal_fits_six_lines_with_long_code() -> None:
    code = "".join(f"line_{i} = {i}\n" for i in range(20))
    d = built(fixes=(Fix("Move x to cuda:0", code, "namespace"),))
    lines = render_diagnosis(d, verbosity="minimal", width=60).splitlines()
    assert len(lines) <= 6 and lines[-1].strip() == "…"


def test_verbose_says_everything() -> None:
    many = tuple(ObjectRecord(f"t{i}", "tensor", "Tensor", "cuda:0", "(2,)") for i in range(30))
    note = "scan stopped after 5000 objects"
    d = built(snapshot=Snapshot(built().records + many), notes=(note,))
    context = render_diagnosis(d, max_rows=5)
    verbose = render_diagnosis(d, max_rows=5, verbosity="verbose")
    assert "… 27 more (d.table() lists all)" in context and "t29" not in context
    assert "t29" in verbose and "more (d.table()" not in verbose
    assert "RuntimeError: Expected all tensors" in verbose  # the message
    assert "✗ x: on cpu, but the computation runs on cuda:0" in verbose  # every finding
    assert "Frames (innermost last)" in verbose and "out = model(x)" in verbose
    assert note in context and note in verbose


def test_the_header_points_below_the_traceback(classic: Diagnosis) -> None:
    header = render_header(classic)
    assert header.splitlines() == [
        "ipydevice · `x` is on cpu, `model` is on meta",
        "  fix: move x to meta [run once, then re-run the cell]",
        "      x = x.to('meta')",
        f"  ({HEADER_POINTER})",
    ]
    assert HEADER_POINTER == "details below the traceback"
    assert render_header(classic, pointer="").splitlines()[-1] == "      x = x.to('meta')"
    assert render_header(ipydevice.diagnose(ZeroDivisionError("x"))) == ""


def test_a_non_device_error_is_one_line_at_every_verbosity() -> None:
    d = ipydevice.diagnose(ZeroDivisionError("division by zero"))
    for level in VERBOSITY_LEVELS:
        assert render_diagnosis(d, verbosity=level) == (
            "ipydevice: not a device error (ZeroDivisionError)"
        )


# -- colour --------------------------------------------------------------------------------


class Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(
    ("env", "color", "tty", "expected"),
    [
        ({}, None, True, True),  # a terminal
        ({}, None, False, False),  # a pipe, a file
        ({"FORCE_COLOR": "1"}, None, False, True),
        ({"FORCE_COLOR": "0"}, None, False, False),
        ({"FORCE_COLOR": ""}, None, False, False),
        ({}, False, True, False),  # IPython's NoColor
        ({"FORCE_COLOR": "1"}, False, True, False),
        ({}, True, False, True),  # IPython's colour scheme
        ({"NO_COLOR": "1"}, True, True, False),  # NO_COLOR wins over everything
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, None, True, False),
        ({"NO_COLOR": ""}, None, True, True),  # set but empty: not set
    ],
)
def test_use_color(
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    color: bool | None,
    tty: bool,
    expected: bool,
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert use_color(color, Stream(tty)) is expected


def test_colour_reaches_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    d = built()
    plain = render_diagnosis(d)  # str(d), text/plain: never coloured
    assert not ANSI.search(plain) and not ANSI.search(str(d))
    coloured = render_diagnosis(d, color=True)
    assert ANSI.search(coloured) and ANSI.sub("", coloured) == plain
    header = render_header(d, color=True)
    assert ANSI.search(header) and ANSI.sub("", header) == render_header(d)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert ANSI.search(render_diagnosis(d, color=None))
    assert not ANSI.search(render_diagnosis(d))  # FORCE_COLOR does not colour str(d)
    monkeypatch.setenv("NO_COLOR", "1")
    assert not ANSI.search(render_diagnosis(d, color=True))
    assert not ANSI.search(render_header(d, color=True))


def test_the_scripts_hook_honours_force_color(monkeypatch: pytest.MonkeyPatch) -> None:
    from ipydevice.integrations.excepthook import terminal_style

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert terminal_style(Stream(False))[1] is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert terminal_style(Stream(True))[1] is False


# -- widths --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "width"),
    [
        ("model", 5),
        ("模型", 4),  # east-asian wide
        ("ｍｏｄｅｌ", 10),  # full-width latin
        ("café", 4),  # precomposed
        ("cafe\u0301", 4),  # e + combining acute
        ("a\u200bb", 2),  # zero-width space
        ("données_批次", 12),
    ],
)
def test_display_width(text: str, width: int) -> None:
    assert display_width(text) == width


def test_columns_align_wide_and_combining_names() -> None:
    rows = [["x", "cpu"], ["模型权重", "cuda:0"], ["cafe\u0301", "meta"], ["ｘ", "cpu"]]
    lines = columns(rows, 80)
    starts = {
        display_width(line[: line.rindex(row[1])]) for line, row in zip(lines, rows, strict=True)
    }
    assert starts == {10}  # 8 columns for 模型权重, then two spaces


def test_columns_wrap_at_spaces_and_never_cut_a_name() -> None:
    (line,) = columns([["name", "模型" * 20]], 20)
    assert line == "name  " + "模型" * 20  # one word: kept whole, on its own line
    lines = columns([["x", "DistributedDataParallel._log_and_throw, line 12"]], 30)
    assert lines == ["x  DistributedDataParallel._log_and_throw,", "   line 12"]


def test_inventory_columns_stay_aligned_with_wide_names() -> None:
    records = (
        ObjectRecord("模型", "module", "Linear", "cuda:0", nbytes=40, detail="2 parameters"),
        ObjectRecord("x", "tensor", "Tensor", "cuda:0", "(3, 4)", "float32", 48),
        ObjectRecord("批次_ids", "tensor", "Tensor", "cuda:0", "(3,)", "int64", 24),
    )
    inv = Inventory(records=records, totals=(DeviceShare("cuda:0", 4, 112),))
    lines = [line for line in render_inventory(inv).splitlines() if line.startswith("       ")]
    assert len(lines) == 3
    kinds = {
        display_width(line[: line.index(kind)])
        for line, kind in zip(lines, ("module", "tensor", "tensor"), strict=True)
    }
    assert len(kinds) == 1


# -- plurals -------------------------------------------------------------------------------


def test_plural() -> None:
    assert plural(1, "tensor") == "1 tensor"
    assert plural(0, "tensor") == "0 tensors"
    assert plural(2, "more object") == "2 more objects"
    assert plural(3, "index", "indices") == "3 indices"


def test_inventory_says_one_object_one_tensor_one_device() -> None:
    inv = Inventory(
        records=(ObjectRecord("x", "tensor", "Tensor", "cpu", "(3,)", "float32", 12),),
        totals=(DeviceShare("cpu", 1, 12),),
        problems=(Finding("x", "cpu", "tensor", "namespace", "on cpu, but model is on meta"),),
    )
    text = render_inventory(inv)
    assert text.splitlines()[0] == "ipydevice · 1 object, 1 tensor on 1 device"
    assert "  cpu  1 tensor  12 B" in text
    assert "\n  Problem\n" in text and "Problems" not in text
    assert "1 objects" not in text and "1 tensors" not in text and "1 devices" not in text


def test_inventory_plurals() -> None:
    records = tuple(ObjectRecord(f"t{i}", "tensor", "Tensor", "cpu", "(1,)") for i in range(3))
    inv = Inventory(records=records, totals=(DeviceShare("cpu", 2, 8), DeviceShare("meta", 1, 4)))
    assert render_inventory(inv, max_rows=2).splitlines()[0] == (
        "ipydevice · 3 objects, 3 tensors on 2 devices"
    )
    assert "  … 1 more object (.table() lists all)" in render_inventory(inv, max_rows=2)


def test_one_fix_is_not_numbered_several_are() -> None:
    one = render_diagnosis(built())
    assert "\n  Fix: Move x to cuda:0  [run once, then re-run the cell]\n" in one
    assert "Fixes" not in one and "1." not in one
    second = Fix(
        "Move x to cuda:0 in the cell, before the line that failed",
        "x = x.to('cuda:0')\nout = model(x)\n",
        "cell",
    )
    two = render_diagnosis(built(fixes=(*built().fixes, second)))
    assert "\n  Fixes\n    1. Move x to cuda:0  [run once" in two and "\n    2. Move x" in two


def test_inventory_in_depth_and_repr_say_one_tensor() -> None:
    import torch
    import torch.nn as nn

    ns = {"net": nn.Sequential(nn.Linear(2, 2, bias=False), nn.Linear(2, 2))}
    inv = ipydevice.inventory(ns, names="net")
    details = {r.name: r.detail for r in inv.records}
    assert details["net[0]"] == "1 tensor" and details["net[1]"] == "2 tensors"
    assert repr(ipydevice.inventory({"x": torch.ones(1)})) == (
        "<Inventory 1 object (cpu ×1); 0 problems>"
    )


def test_details_say_one_parameter_one_item() -> None:
    import torch
    import torch.nn as nn

    ns = {"emb": nn.Embedding(4, 2), "batch": [torch.ones(1)], "opt": None}
    ns["opt"] = torch.optim.SGD(ns["emb"].parameters())
    details = {r.name: r.detail for r in ipydevice.inventory(ns).records}
    assert details["emb"] == "1 parameter"
    assert details["batch"] == "1 item"
    assert details["opt"] == "1 parameter, 0 state tensors"


def test_a_frame_local_is_named_as_code_in_its_function() -> None:
    d = built(
        culprits=(
            Finding(
                "pos in PosEnc.forward",
                "cpu",
                "tensor",
                "PosEnc.forward",
                "on cpu, but the computation runs on cuda:0",
            ),
        )
    )
    assert headline(d) == "`pos` in PosEnc.forward is on cpu, `model` is on cuda:0"


def test_a_split_object_shows_counts_in_a_report_and_bytes_in_the_inventory() -> None:
    from ipydevice.render.html import table_html

    split = ObjectRecord(
        "model",
        "module",
        "Net",
        "mixed",
        nbytes=232,
        shares=(DeviceShare("meta", 2, 160), DeviceShare("cpu", 2, 72)),
    )
    d = built(snapshot=Snapshot((*built().records, split)))
    text = render_diagnosis(d)
    assert "meta ×2, cpu ×2  " in text and "(160 B)" not in text
    inv = Inventory(records=(split,), totals=(DeviceShare("meta", 2, 160),))
    assert "meta ×2 (160 B), cpu ×2 (72 B)" in render_inventory(inv)
    assert "meta ×2 (160 B), cpu ×2 (72 B)" in table_html([split], set(), 5, sizes=True)
    assert "meta ×2, cpu ×2<" in table_html([split], set(), 5)


def test_minimal_marks_a_headline_it_cuts() -> None:
    many = tuple(
        Finding(f"a_rather_long_tensor_name_{i}", f"cuda:{i}", "tensor", "namespace", "")
        for i in range(3)
    )
    lines = render_diagnosis(built(culprits=many), verbosity="minimal", width=40).splitlines()
    assert len(lines) <= 6 and lines[1].endswith("…")


def test_locals_of_one_function_name_it_once() -> None:
    local = Finding(
        "x in test_forward",
        "cpu",
        "tensor",
        "test_forward",
        "on cpu, but the computation runs on meta",
    )
    d = built(culprits=(local,), reference="model in test_forward", target="meta")
    assert headline(d) == "`x` is on cpu, `model` is on meta (in test_forward)"
    mixed = built(culprits=(local,), reference="model", target="meta")
    assert headline(mixed) == "`x` in test_forward is on cpu, `model` is on meta"


@pytest.mark.parametrize("number", range(len(demo.SCENARIOS)))
def test_the_demo_tour_says_each_fact_once(number: int) -> None:
    _, setup, failing = demo.SCENARIOS[number]
    d = demo.run_scenario(setup, failing)
    assert d is not None and d.fixes
    context = render_diagnosis(d)
    assert "computation runs on" not in context and "On the wrong device" not in context
    assert "move it to" not in context and "move them to" not in context  # the fixes say it
    assert context.count(headline(d)) == 1
    assert "[the failed cell, rewritten]" not in context
    minimal = render_diagnosis(d, verbosity="minimal").splitlines()
    assert 2 <= len(minimal) <= 6 and minimal[0] == f"ipydevice · {headline(d)}"
    assert len(render_header(d).splitlines()) <= 7


def test_the_default_table_shows_the_culprit_and_counts_the_rest() -> None:
    """At the default ``max_rows`` (8) the panel shows the culprit and the fix without
    scrolling: the culprit's row comes first wherever it was found, the rest are
    counted, in text and in HTML."""
    from ipydevice.render.html import render_diagnosis_html
    from ipydevice.settings import Settings

    assert Settings().max_rows == 8
    others = [ObjectRecord(f"t{i}", "tensor", "Tensor", "meta", "(2,)") for i in range(11)]
    records = (*others, ObjectRecord("late", "tensor", "Tensor", "cpu", "(2,)"))
    d = Diagnosis(
        is_device_error=True,
        family="op_mismatch",
        target="meta",
        culprits=(Finding("late", "cpu", "tensor", "namespace", "on cpu"),),
        snapshot=Snapshot(records),
        fixes=(Fix("Move late to meta", "late = late.to('meta')", "namespace"),),
    )
    table = render_diagnosis(d).split("Objects involved")[1]
    assert table.splitlines()[2].split()[:2] == ["✗", "late"], table
    assert "… 4 more (d.table() lists all)" in table and "t6" in table and "t7" not in table
    assert "late = late.to('meta')" in table
    html = render_diagnosis_html(d)
    assert html.index(">late<") < html.index("4 more objects</summary>") < html.index(" t7 ")
    # The folded rows are written as the text table writes its rows, escaped, in one <pre>.
    folded = html.split('<pre class="ipydevice-folded"')[1].split("</pre>")[0]
    assert "t7" in folded and "<span" not in folded and "name" in folded
