"""What the panel says and how it reads: no raw Markdown, no jargon, each fact once,
names shown as what they are, columns that fit.

Diagnoses come from real device errors on the ``meta`` device, or are built from
model records; nothing here needs IPython.
"""

from __future__ import annotations

import re
from html import unescape

import pytest
from cells import Notebook

import ipydevice
from ipydevice import plugins, registry
from ipydevice.model import Diagnosis, Finding
from ipydevice.render.html import (
    GRID_COLUMNS,
    code_block,
    render_diagnosis_html,
    render_header_html,
)
from ipydevice.render.text import render_diagnosis, render_header
from ipydevice.wording import visible

pytest.importorskip("torch")


def visible_text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


@pytest.fixture(scope="module")
def classic() -> Diagnosis:
    nb = Notebook()
    nb.run(
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)\n"
    )
    return ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)


def test_no_backquote_reaches_the_html_raw(classic: Diagnosis) -> None:
    assert "`" in classic.target_reason  # "meta: where `model`'s parameters are"
    for html in (render_diagnosis_html(classic, verbosity=v) for v in ("context", "verbose")):
        assert "`" not in html
        assert "<code" in html and "model</code>" in html
    # plain text keeps them, as its headline does
    assert "`model`'s parameters" in render_diagnosis(classic)


def test_backquoted_words_are_escaped_inside_code() -> None:
    d = Diagnosis(
        is_device_error=True,
        family="op_mismatch",
        target="cuda:0",
        target_reason="cuda:0: where `<b>m</b>`'s parameters are",
        culprits=(Finding("x", "cpu", "tensor", "namespace", "held as `<i>y</i>`", rule="x"),),
        notes=("see `a<b`",),
    )
    html = render_diagnosis_html(d, verbosity="verbose")
    assert "`" not in html
    assert "<b>m</b>" not in html and "&lt;b&gt;m&lt;/b&gt;</code>" in html
    assert "&lt;i&gt;y&lt;/i&gt;</code>" in html and "a&lt;b</code>" in html


def test_code_blocks_have_no_line_strips(classic: Diagnosis) -> None:
    block = code_block("a = 1\nb = 2")
    assert re.fullmatch(r"<pre[^>]*>a = 1\nb = 2</pre>", block)  # no <code> to style as inline code
    for html in (render_diagnosis_html(classic), render_header_html(classic)):
        assert "<pre" in html and "<code>" not in html
        assert not re.search(r"<pre[^>]*><code", html)


def test_the_boxes_size_their_padding_inside(classic: Diagnosis) -> None:
    for html in (render_diagnosis_html(classic), render_header_html(classic)):
        root = re.match(r'<div class="[^"]*" (?:data-verbosity="\w+" )?style="([^"]*)"', html)
        assert root is not None
        assert "box-sizing:border-box" in root[1] and "width:100%" in root[1]


def test_the_title_says_the_kind_of_error_in_words(classic: Diagnosis) -> None:
    text = render_diagnosis(classic)
    html = render_diagnosis_html(classic, verbosity="verbose")
    assert "op_mismatch" not in text and "op_mismatch" not in visible_text(html)
    assert text.splitlines()[0] == "ipydevice · device error: tensors on different devices"
    assert "device error: tensors on different devices" in visible_text(html)


def test_every_built_in_family_has_a_title_in_words() -> None:
    for family_id in plugins.families():
        family = registry.family_of(family_id)
        assert family is not None and family.title and "_" not in family.title, family_id


def test_a_title_without_words_is_the_kind_alone() -> None:
    d = Diagnosis(is_device_error=True, family="toy", target="cpu")
    assert render_diagnosis(d).splitlines()[0] == "ipydevice · device error"


# -- names shown as what they are ---------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("model", "model"),
        ("Evil\u202eLayer", "Evil\\u202eLayer"),
        ("a\u200bb", "a\\u200bb"),
        ("x\u2066y\u2069", "x\\u2066y\\u2069"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("pâté", "pâté"),
        ("名前", "名前"),
        ("line one\nline two\tend", "line one\nline two\tend"),
    ],
)
def test_visible_shows_invisible_characters(raw: str, shown: str) -> None:
    assert visible(raw) == shown
    assert visible(shown) == shown


def test_bidi_and_zero_width_names_are_visible_in_every_panel() -> None:
    nb = Notebook()
    nb.run(
        "import torch\nimport torch.nn as nn\n"
        "Evil = type('Evil\\u202eLayer', (nn.Linear,), {})\n"
        "model = nn.Sequential(Evil(4, 2)).to('meta')\n"
        "batch = {'x\\u200b': torch.randn(3, 4)}\n"
    )
    d = ipydevice.diagnose(nb.fails("out = model(batch['x\\u200b'])\n"), namespace=nb.ns)
    assert d.is_device_error
    rendered = [
        render_diagnosis(d, verbosity="verbose"),
        render_header(d),
        render_diagnosis_html(d, verbosity="verbose"),
        render_header_html(d),
        d.headline,
    ]
    for out in rendered:
        assert "\u202e" not in out and "\u200b" not in out
    assert "Evil\\u202eLayer" in rendered[2]  # the module's class in the table
    assert "x\\u200b" in rendered[0] and "x\\u200b" in rendered[2]
    assert any("\u202e" in r.type_name for r in d.records)  # the diagnosis keeps the name


def test_inventory_and_check_show_invisible_characters() -> None:
    import torch

    ns = {"a\u202eb": torch.zeros(2)}
    inv = ipydevice.inventory(ns)
    for out in (str(inv), inv._repr_html_()):
        assert "\u202e" not in out and "a\\u202eb" in out


def test_an_inventory_makes_visible_only_the_rows_it_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    """%devices over thousands of objects: the names are made visible a row at a time,
    for the rows shown (and the HTML's folded ones), not for every object found."""
    import torch

    from ipydevice.render import html, rows

    ns = {f"t{i}": torch.zeros(2) for i in range(1_000)}
    ns["a\u202eb"] = torch.zeros(2, device="meta")
    inv = ipydevice.inventory(ns)
    assert len(inv.records) > 900
    seen: list[object] = []
    for module in (rows, html):
        made = module.visible_record

        def counting(record: object, made=made) -> object:
            seen.append(record)
            return made(record)

        monkeypatch.setattr(module, "visible_record", counting)
    text = str(inv)
    assert 0 < len(seen) <= ipydevice.settings.current().max_rows
    seen.clear()
    page = inv._repr_html_()
    assert 0 < len(seen) <= ipydevice.settings.current().max_rows + html.FOLDED_ROWS
    for out in (text, page):
        assert "\u202e" not in out


# -- each fact once -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def one_line_cell() -> Diagnosis:
    nb = Notebook()
    nb.run(
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')\n"
        "x = torch.randn(3, 4)  # made on the CPU, for now\n"
    )
    return ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)


def test_a_one_line_cell_gets_no_rewrite_that_repeats_the_move(one_line_cell: Diagnosis) -> None:
    scopes = [f.scope for f in one_line_cell.fixes]
    assert scopes == ["namespace", "source"], [f.title for f in one_line_cell.fixes]


def test_a_cell_of_several_lines_keeps_its_rewrite() -> None:
    nb = Notebook()
    nb.run("import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')\n")
    d = ipydevice.diagnose(nb.fails("x = torch.randn(3, 4)\nout = model(x)\n"), namespace=nb.ns)
    assert "cell" in [f.scope for f in d.fixes]


def test_the_place_to_change_is_said_once(one_line_cell: Diagnosis) -> None:
    (fix,) = [f for f in one_line_cell.fixes if f.scope == "source"]
    assert fix.location and fix.location in fix.title
    for out in (
        render_diagnosis(one_line_cell),
        visible_text(render_diagnosis_html(one_line_cell)),
    ):
        assert out.count(fix.location) == 1, out
        assert "change the code" in out


def test_a_rewritten_line_drops_a_comment_that_now_contradicts_it(
    one_line_cell: Diagnosis,
) -> None:
    (fix,) = [f for f in one_line_cell.fixes if f.scope == "source"]
    assert "# made on the CPU" in fix.original
    assert fix.code.rstrip() == "x = torch.randn(3, 4, device='meta')"


def test_other_comments_stay() -> None:
    from ipydevice.code.rewrite import drop_device_comments

    lines = ["a = f(1)  # the batch\n", "# on the GPU below\n", "b = g()  # runs on cuda\n"]
    assert drop_device_comments(lines, 1, 3) == [
        "a = f(1)  # the batch\n",
        "# on the GPU below\n",
        "b = g()\n",
    ]


def test_the_meta_note_is_said_once() -> None:
    note = (
        "meta tensors hold no data: if the model should be real, materialise it "
        "(to_empty, then load its weights) rather than moving the rest to meta"
    )
    d = Diagnosis(
        is_device_error=True,
        family="op_mismatch",
        target="cpu",
        culprits=(Finding("model", "meta", "module", "namespace", "on meta", rule="meta_model"),),
        notes=(note, note),
    )
    for out in (render_diagnosis(d), visible_text(render_diagnosis_html(d))):
        assert out.count("meta tensors hold no data") == 1, out
    other = Diagnosis(is_device_error=True, family="op_mismatch", target="meta", notes=(note,))
    assert render_diagnosis(other).count("meta tensors hold no data") == 1


# -- nothing to check ---------------------------------------------------------------------


@pytest.mark.parametrize("namespace", [{}, {"n": 1, "s": "text", "cfg": {"lr": 0.1}}])
def test_check_with_nothing_to_check_says_so(namespace: dict) -> None:
    checkup = ipydevice.check(namespace=namespace)
    assert not checkup and checkup.checked == 0
    for out in (str(checkup), visible_text(checkup._repr_html_())):
        assert "nothing to check (no tensors, modules or optimizers found)" in out
        assert "no device problems found" not in out


def test_check_with_something_to_check_finds_no_problem() -> None:
    import torch

    checkup = ipydevice.check(namespace={"m": torch.nn.Linear(2, 2)})
    assert checkup.checked > 0 and "no device problems found" in str(checkup)


def test_an_empty_inventory_says_so() -> None:
    for inv, where in (
        (ipydevice.inventory({}), "in the namespace"),
        (ipydevice.inventory({"a": 1}, names=["a"]), "in a"),
    ):
        for out in (str(inv), visible_text(inv._repr_html_())):
            assert out == f"ipydevice · no tensors, modules or optimizers {where}"
            assert "0 objects" not in out and "0 devices" not in out


def test_devices_magic_on_an_empty_namespace() -> None:
    from shells import run_captured, singleton_shell

    with singleton_shell(reset=True) as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        cap, _ = run_captured(shell, "%devices")
        assert "no tensors, modules or optimizers in the namespace" in cap.stdout
        cap, _ = run_captured(shell, "%devices --check")
        assert "nothing to check" in cap.stdout


# -- optimizer state ----------------------------------------------------------------------

OPTIMIZER = """\
import torch, torch.nn as nn
model = nn.Linear(4, 2)
opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach={foreach})
model(torch.randn(3, 4)).sum().backward()
opt.step()
for p in model.parameters():
    opt.state[p]['exp_avg'] = opt.state[p]['exp_avg'].to('meta')
"""


@pytest.mark.parametrize("foreach", [True, False], ids=["foreach", "for-loop"])
def test_optimizer_state_has_its_row_and_its_label(foreach: bool) -> None:
    nb = Notebook()
    nb.run(OPTIMIZER.format(foreach=foreach))
    exc = nb.fails("opt.step()\n")
    # foreach raises the optimizer's own message, the for-loop the generic one
    assert ("same index" in str(exc)) is foreach
    d = ipydevice.diagnose(exc, namespace=nb.ns)
    assert d.family == "optimizer_state" and d.family_title == "optimizer state on another device"
    # named for the state tensor the step met first, the fix moving all of opt.state
    name = "opt.state[model.weight]['exp_avg']"
    (row,) = [r for r in d.records if r.name == name]
    assert row.device == "meta" and row.kind == "optimizer state"
    text = render_diagnosis(d)
    assert re.search(
        r"✗  opt\.state\[model\.weight\]\['exp_avg'\]\s+optimizer state\s+meta", text
    ), text
    assert "its parameter on cpu" in text and "opt.state.items()" in text
    html = render_diagnosis_html(d)
    assert re.search(
        r'<div class="ipydevice-culprit"[^>]*>.*?opt\.state\[model\.weight\]\[&#x27;exp_avg&#x27;\]</code>',
        html,
    ), html


# -- columns ------------------------------------------------------------------------------


def test_long_names_and_frames_wrap_whole_in_the_terminal() -> None:
    from ipydevice.model import ObjectRecord, Snapshot

    where = "DistributedDataParallel._log_and_throw, line 1234"
    d = Diagnosis(
        is_device_error=True,
        family="op_mismatch",
        target="cuda:0",
        culprits=(Finding("inputs", "cpu", "tensor", "namespace", "on cpu"),),
        snapshot=Snapshot(
            (
                ObjectRecord("inputs", "tensor", "Tensor", "cpu", "(8, 16)", "float32", 512),
                ObjectRecord(
                    "module in DistributedDataParallel.forward",
                    "module",
                    "Sequential",
                    "cuda:0",
                    nbytes=2048,
                    where=where,
                ),
            )
        ),
    )
    for width in (60, 80, 100):
        text = render_diagnosis(d, width=width)
        assert "…" not in text
        words = text.split()
        for word in ("DistributedDataParallel._log_and_throw,", "DistributedDataParallel.forward"):
            assert word in words, (width, text)
    html = render_diagnosis_html(d)
    assert "white-space:normal" in html and "DistributedDataParallel._log_and_throw" in html


def _frame_rows(extra_where: str | None) -> Diagnosis:
    """A culprit inside a forward, a namespace module, and a third row whose where is
    ``extra_where`` (``None``: a namespace tensor)."""
    from ipydevice.model import ObjectRecord, Snapshot

    third = (
        ObjectRecord("input_ids", "tensor", "Tensor", "meta", "(1, 16)", "int64", 128)
        if extra_where is None
        else ObjectRecord(
            "batch", "tensor", "Tensor", "cpu", "(8, 16)", "int64", 1024, where=extra_where
        )
    )
    return Diagnosis(
        is_device_error=True,
        family="op_mismatch",
        target="meta",
        culprits=(
            Finding("mask in Attention.forward", "cpu", "tensor", "Attention.forward", "on cpu"),
        ),
        snapshot=Snapshot(
            (
                ObjectRecord(
                    "mask in Attention.forward",
                    "tensor",
                    "Tensor",
                    "cpu",
                    "(16, 16)",
                    "float32",
                    1024,
                    where="Attention.forward",
                ),
                ObjectRecord("model.layers[0]", "module", "Block", "meta", nbytes=4096),
                third,
            )
        ),
    )


def test_the_where_column_only_when_it_adds_to_the_names() -> None:
    """A name that ends "in <frame>" or is a namespace path already says where it
    is: the column is left out of both tables unless some row's where adds to it."""
    d = _frame_rows(None)
    table = render_diagnosis(d).split("Objects involved")[1].split("Fix")[0]
    assert "mask in Attention.forward" in table and "model.layers[0]" in table
    assert "where" not in table and "namespace" not in table
    assert table.count("Attention.forward") == 1
    html = render_diagnosis_html(d)
    assert "<span>where</span>" not in html and f"grid:none/{GRID_COLUMNS};" in html
    assert ">Attention.forward<" not in html and ">namespace<" not in html
    for extra in ("DataLoader worker 0", "rank 1", "In [3]"):
        d = _frame_rows(extra)
        table = render_diagnosis(d).split("Objects involved")[1].split("Fix")[0]
        assert "where" in table.splitlines()[1] and extra in table, table
        assert "namespace" in table  # every row has the column once it is there
        html = render_diagnosis_html(d)
        assert "<span>where</span>" in html and f"grid:none/{GRID_COLUMNS} minmax(" in html
        assert f">{extra}<" in html and ">namespace<" in html


def test_a_wrapper_inside_torch_is_not_a_row_of_its_own() -> None:
    nb = Notebook()
    nb.run(
        "import torch\nimport torch.nn as nn\n"
        "model = nn.Sequential(nn.Linear(4, 2)).to('meta')\nx = torch.randn(3, 4)\n"
    )
    d = ipydevice.diagnose(nb.fails("out = nn.DataParallel(model)(x)\n"), namespace=nb.ns)
    assert [f.name for f in d.culprits] == ["x"]
    names = [r.name for r in d.records]
    assert "model" in names and not any(n.startswith("self in") for n in names), names
    assert "DataParallel.forward" not in render_diagnosis(d).split("Objects involved")[1]
