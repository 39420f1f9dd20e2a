"""The device flow of the failed code (ipydevice/code/flow.py, ipydevice/diagnosis/flow.py)
and what it decides: the indexed tensor follows its indices where the computation lives,
the operand the message names ranks first, each move fix is checked against the rest of
the code (completed, or ranked below one that passes), and a dropped ``x.to(device)`` is
told and mended in place. Device errors come from the ``openreg`` stand-in
(tests/realworld/standin.py), which raises them in PyTorch's words."""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import pytest
from cells import Notebook

import ipydevice
from ipydevice.code.flow import Known, discarded_moves, first_clash, indexing_operands
from ipydevice.code.order import statements_before, statements_from
from ipydevice.diagnosis.devices import same_device

sys.path.insert(0, str(Path(__file__).resolve().parent / "realworld"))
from standin import standin

PRELUDE = "import torch, torch.nn as nn, torch.nn.functional as F\ndev = 'openreg'\n"


def _session(setup: str, cell: str) -> tuple[Notebook, ipydevice.Diagnosis]:
    nb = Notebook()
    nb.run(PRELUDE + textwrap.dedent(setup))
    d = ipydevice.diagnose(nb.fails(textwrap.dedent(cell)), namespace=nb.ns)
    return nb, d


def _runs_after_first_fix(nb: Notebook, d: ipydevice.Diagnosis, cell: str) -> None:
    fix = d.fixes[0]
    if fix.scope == "namespace":
        result = fix.apply(nb.ns)
        assert result.ok, result.message
        assert nb.error(textwrap.dedent(cell)) is None
    else:
        assert fix.scope == "cell", fix
        assert nb.error(fix.code) is None


@pytest.fixture(autouse=True)
def openreg():
    with standin():
        yield


# -- the model alone: text and a lookup ------------------------------------------------


def _table(values: dict[str, Known]):
    def lookup(node: ast.expr) -> Known | None:
        return values.get(ast.unparse(node))

    return lookup


def _clash(source: str, values: dict[str, Known], moved: dict[str, Known] | None = None):
    tree = ast.parse(textwrap.dedent(source))
    return first_clash(tree.body, _table(values), same_device, moved)


LIB = Known("library")


def test_creation_moves_and_modules_flow_through_the_statements():
    values = {"torch": LIB, "net": Known("module", "cuda:0"), "dev": Known("device", "cuda:0")}
    # made without device=: on the CPU, then fed to a module on cuda:0
    clash = _clash("a = torch.ones(3)\nb = net(a)\n", values)
    assert clash is not None and clash.lineno == 2 and set(clash.devices) == {"cuda:0", "cpu"}
    # .to() assigned: no clash; .to() dropped: the tensor stayed where it was
    assert _clash("a = torch.ones(3)\na = a.to(dev)\nb = net(a)\n", values) is None
    assert _clash("a = torch.ones(3)\na.to(dev)\nb = net(a)\n", values) is not None
    # a module's .to() moves the module itself
    assert _clash("a = torch.ones(3)\nnet.to('cpu')\nb = net(a)\n", values) is None
    # device= and *_like follow what they are given
    assert (
        _clash("a = torch.zeros(2, device=dev)\nc = torch.ones_like(a) + net(a)\n", values) is None
    )


def test_indexing_takes_cpu_indices_and_unknown_never_clashes():
    values = {
        "lut": Known("tensor", "cpu"),
        "ids": Known("tensor", "xpu:0"),
        "pos": Known("tensor", "cpu"),
        "h": Known("tensor", "xpu:0"),
    }
    assert _clash("r = h[pos]\n", values) is None  # CPU indices are allowed
    clash = _clash("r = lut[ids]\n", values)
    assert clash is not None and clash.operands == ("lut", "ids")
    # the result of the indexing is where the table is
    assert _clash("r = lut[pos] * h\n", values) is not None
    # a user function's result, a loop's variable: unknown
    assert _clash("r = helper(h) * lut\nfor q in items:\n    s = q + h\n", values) is None
    # what a fix leaves: the table moved over what the lookup reads
    assert _clash("r = lut[ids] * h\n", values, {"lut": Known("tensor", "xpu:0")}) is None


def test_statements_around_the_failing_one_and_dropped_moves():
    tree = ast.parse(
        "a = 1\nfor i in r:\n    b = 2\n    c = 3\n    c.cuda()\nd = 4\ndef f():\n    e = 5\n"
    )
    inner = tree.body[1].body[1]
    after = [s.lineno for s in statements_from(tree, inner, 10)]
    # its body's rest, the loop's next round up to it, then what follows the loop
    assert after == [4, 5, 3, 6, 7]
    before = [s.lineno for s in statements_before(tree, inner, 10)]
    assert before == [3, 1]
    assert [text for _, text in discarded_moves(tree.body[1].body)] == ["c"]
    assert statements_from(tree, inner, 2) == tree.body[1].body[1:3]


def test_indexing_operands_of_methods_and_library_calls():
    stmt = ast.parse("acc.index_put_((i, j), v, accumulate=True)\ny = torch.gather(s, 1, k)").body
    held, indices, _ = next(indexing_operands(stmt[0]))
    assert (ast.unparse(held), [ast.unparse(n) for n in indices]) == ("acc", ["i", "j"])
    second = [
        (ast.unparse(h), [ast.unparse(n) for n in ix]) for h, ix, _ in indexing_operands(stmt[1])
    ]
    assert ("s", ["k"]) in second


# -- 1: the indexed tensor follows its indices where the computation lives -------------

SCALES = """
stats = {'scale': torch.rand(10)}   # kept on the CPU
feats = torch.randn(4, 3).to(dev)
ids = torch.tensor([1, 2, 3, 4]).to(dev)
"""


def test_a_table_in_a_dict_follows_its_indices_to_the_accelerator():
    cell = "s = stats['scale'][ids]\nout = feats * s[:, None]\n"
    nb, d = _session(SCALES, cell)
    assert d.family == "index_mismatch"
    assert d.target == "openreg:0"
    assert "rest of the computation" in d.target_reason
    assert d.culprits[0].name == "stats['scale']"
    _runs_after_first_fix(nb, d, cell)
    assert nb.ns["out"].device.type == "openreg"


def test_the_table_read_in_a_function_of_the_user_follows_too():
    setup = SCALES + "def pick(idx):\n    return stats['scale'][idx]\n"
    cell = "out = feats * pick(ids)[:, None]\n"
    nb, d = _session(setup, cell)
    assert d.target == "openreg:0"
    assert d.culprits[0].name == "stats['scale']"
    _runs_after_first_fix(nb, d, cell)


def test_the_demand_stands_when_the_computation_is_on_the_cpu():
    setup = (
        "table = torch.rand(10, 3)\nhead = nn.Linear(3, 2)\nids = torch.tensor([1, 2]).to(dev)\n"
    )
    cell = "rows = table[ids]\nout = head(rows)\n"
    nb, d = _session(setup, cell)
    assert d.target == "cpu"
    assert [c.name for c in d.culprits] == ["ids"]
    _runs_after_first_fix(nb, d, cell)


def test_accumulating_index_put_moves_the_accumulator_to_its_operands():
    setup = """
    hist = torch.zeros(8)
    bins = torch.tensor([1, 3, 3]).to(dev)
    ones = torch.ones(3).to(dev)
    """
    cell = "hist.index_put_((bins,), ones, accumulate=True)\ntotal = hist.sum()\n"
    nb, d = _session(setup, cell)
    assert d.target == "openreg:0"
    assert d.culprits[0].name == "hist"
    _runs_after_first_fix(nb, d, cell)
    assert nb.ns["total"].device.type == "openreg"


# -- 6: the operand the message names ranks first ----------------------------------------


def test_the_index_of_a_gather_outranks_another_misplaced_tensor_on_the_line():
    setup = """
    shift = torch.zeros(3, 1)
    logits = torch.randn(3, 5).to(dev)
    choice = torch.zeros(3, 1, dtype=torch.long)
    """
    cell = "picked = shift + logits.gather(1, choice)\n"
    _, d = _session(setup, cell)
    assert d.culprits[0].name == "choice"


def test_the_weight_a_partial_passes_outranks_a_tensor_near_the_line():
    setup = """
    import functools
    class_weight = torch.ones(4)
    criterion = functools.partial(F.cross_entropy, weight=class_weight)
    logits = torch.randn(3, 4).to(dev)
    labels = torch.tensor([0, 1, 2]).to(dev)
    penalty = torch.zeros(1)
    """
    cell = "loss = criterion(logits, labels) + penalty\n"
    _, d = _session(setup, cell)
    assert "weight" in d.message
    # (named by the partial that holds it, or by the user's own name)
    assert d.culprits[0].name in ("class_weight", "criterion.keywords['weight']")
    assert "penalty" not in d.culprits[0].name


# -- 1, 4: each fix checked against the rest of the code ---------------------------------


def test_a_rebinding_is_not_first_when_the_function_reads_its_own_default():
    setup = """
    scale = torch.rand(3)
    class Norm:
        def __call__(self, v, s=scale):
            return v * s
    norm = Norm()
    x = torch.randn(2, 3).to(dev)
    """
    cell = "y = norm(x)\n"
    _, d = _session(setup, cell)
    assert d.culprits[0].name == "scale"
    first = d.fixes[0]
    assert not (first.scope == "namespace" and first.code.startswith("scale = scale.to"))
    assert any(f.scope == "source" for f in d.fixes[:1]), [f.title for f in d.fixes]


# -- 8: a dropped .to() ------------------------------------------------------------------


def test_a_dropped_to_is_told_and_mended_in_place():
    setup = "enc = nn.Linear(3, 2).to(dev)\nsample = torch.randn(2, 3)\n"
    cell = "sample.to(dev)\nz = enc(sample)\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "sample"
    assert "returns a new tensor" in d.culprits[0].why
    assert "Module.to" in d.culprits[0].why
    assert "returns a new tensor" in str(d)
    fix = d.fixes[0]
    assert fix.scope == "cell"
    assert fix.code == "sample = sample.to(dev)\nz = enc(sample)\n"
    _runs_after_first_fix(nb, d, cell)


def test_a_dropped_cuda_inside_a_loop_is_mended_where_it_is():
    setup = "enc = nn.Linear(3, 2).to(dev)\nrows = [torch.randn(2, 3)]\n"
    cell = "for r in rows:\n    r.to(device=dev)\n    z = enc(r)\n"
    _, d = _session(setup, cell)
    assert d.culprits[0].name.startswith("r")
    fix = next(f for f in d.fixes if f.scope == "cell")
    assert "    r = r.to(device=dev)\n    z = enc(r)" in fix.code
    assert fix.code.count(".to(") == 1


def test_a_module_moved_on_its_own_line_is_not_told():
    setup = "enc = nn.Linear(3, 2)\nsample = torch.randn(2, 3).to(dev)\n"
    cell = "enc.to('cpu')\nz = enc(sample)\n"
    _, d = _session(setup, cell)
    assert all("returns a new tensor" not in c.why for c in d.culprits)


def test_a_dropped_to_in_a_function_an_earlier_cell_defined_is_told():
    # another shape of mechanism 8: the useless line is in the user's function, not
    # in the failing cell, on the meta device, under another name
    nb = Notebook()
    nb.run(
        textwrap.dedent(
            """
            import torch, torch.nn as nn
            enc = nn.Linear(5, 2).to('meta')
            def embed(tokens):
                tokens.to('meta')
                return enc(tokens)
            tok = torch.randn(3, 5)
            """
        )
    )
    d = ipydevice.diagnose(nb.error("e = embed(tok)\n"), namespace=nb.ns)
    # named as the function reads it, the function's line mended first (the global
    # `tok` moved would only serve this one call)
    assert d.culprits[0].name == "tokens in embed"
    assert "`tokens.to('meta')` drops its result" in d.culprits[0].why
    assert "write `tokens = tokens.to('meta')`" in d.culprits[0].why
    assert d.fixes[0].scope == "source"
    assert d.fixes[0].code.strip() == "tokens = tokens.to('meta')"
