"""Copy and Insert code names exactly what Apply moves.

Python reads identifiers in NFKC form: ``ｘ`` (fullwidth x) written in code is
``x``. A fix must never spell a name that way: the code would act on another
object than Apply does.
"""

from __future__ import annotations

import unicodedata

import pytest

import ipydevice
from ipydevice.collect.paths import format_path, is_name

SETUP = "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4).to('meta')\n"


@pytest.mark.parametrize("name", ["ｘ", "ﬁle", "Ⅸ", "ℌ"])
def test_a_name_python_reads_as_another_is_not_a_plain_name(name):
    assert name.isidentifier() and unicodedata.normalize("NFKC", name) != name
    assert not is_name(name)
    assert format_path((("name", name),)) == f"globals()[{name!r}]"
    assert format_path((("name", "model"), ("attr", name))) == f"getattr(model, {name!r})"
    assert is_name("x") and is_name("données") and is_name("模型")  # NFKC-stable names stay plain


def code_of(d) -> str:
    return "\n".join(f.code for f in d.fixes if f.scope in ("namespace", "cell"))


def test_the_fix_for_a_fullwidth_name_moves_that_object(nb):
    nb.run(SETUP + "globals()['ｘ'] = torch.randn(3, 4)\n")
    d = ipydevice.diagnose(nb.fails("out = model(globals()['ｘ'])\n"), namespace=nb.ns)
    fix = d.fixes[0]
    assert fix.steps and fix.steps[0].path == (("name", "ｘ"),)
    assert "ｘ =" not in code_of(d) and "globals()['ｘ']" in fix.code
    nb.run(fix.code)  # Copy: the code run in the namespace moves `ｘ`, and `x` stays
    assert nb.ns["ｘ"].device.type == "meta"
    assert nb.ns["x"].device.type == "meta"
    nb.run("out = model(globals()['ｘ'])\n")


def test_a_submodule_attribute_spelled_to_reach_it(nb):
    nb.run(
        SETUP
        + "enc = nn.Sequential()\n"
        + "enc.add_module('ｌ', nn.Linear(4, 4).to('meta'))\n"
        + "enc.add_module('l', nn.Linear(4, 4))\n"
    )
    d = ipydevice.diagnose(nb.fails("out = enc(torch.randn(3, 4))\n"), namespace=nb.ns)
    fix = d.fixes[0]
    # a Sequential's submodule is written by its position: ``enc[0]`` is ``ｌ``
    assert fix.steps[0].path == (("name", "enc"), ("item", 0))
    assert "enc[0].to_empty(device='cpu')" in fix.code
    assert "enc.ｌ" not in code_of(d) and "enc.l" not in code_of(d)
    nb.run(fix.code)  # the meta submodule `ｌ` is materialised, not its neighbour `l`
    assert nb.ns["enc"]._modules["ｌ"].weight.device.type == "cpu"
    nb.run("out = enc(torch.randn(3, 4))\n")


def test_apply_and_the_code_agree(nb):
    nb.run(SETUP + "globals()['ｘ'] = torch.randn(3, 4)\n")
    d = ipydevice.diagnose(nb.fails("out = model(globals()['ｘ'])\n"), namespace=nb.ns)
    d.fixes[0].apply(nb.ns)
    assert nb.ns["ｘ"].device.type == "meta"
    assert nb.ns["x"].device.type == "meta"
