"""Why the target was chosen: kept in the diagnosis, shown in every view."""

from __future__ import annotations

import re
import textwrap

from cells import Notebook

import ipydevice

SETUP = """
import torch
import torch.nn as nn
model = nn.Linear(4, 2).to('meta')
x = torch.randn(3, 4)
"""


def diagnosis(setup: str, cell: str) -> ipydevice.Diagnosis:
    nb = Notebook()
    nb.run(textwrap.dedent(setup))
    return ipydevice.diagnose(nb.fails(textwrap.dedent(cell)), namespace=nb.ns)


def test_the_model_is_the_evidence():
    d = diagnosis(SETUP, "out = model(x)\n")
    assert d.target == "meta"
    assert d.target_reason == "meta: where `model`'s parameters are"


def test_every_view_shows_the_reason():
    d = diagnosis(SETUP, "out = model(x)\n")
    assert "target meta: where `model`'s parameters are" in str(d)
    html = re.sub(r"<[^>]+>", "", d._repr_html_())  # `model` is set as code
    assert "target meta: where model&#x27;s parameters are" in html
    table = d.table()
    assert table.attrs["target_reason"] == d.target_reason
    assert table.loc[table["name"] == "model", "target"].tolist() == [d.target_reason]
    assert d.to_dict()["target_reason"] == d.target_reason


def test_no_majority_between_an_accelerator_and_the_cpu():
    """Two CPU tensors do not outvote the one the operation was called on."""
    d = diagnosis(
        """
        import torch
        scores = torch.randn(4, 4, device='meta')
        mask = torch.ones(4, 4, dtype=torch.bool)
        bias = torch.zeros(4, 4)
        """,
        "att = scores.masked_fill(mask, 0.0) + bias\n",
    )
    assert d.target == "meta"
    assert d.target_reason.startswith("meta: where `scores`, the tensor the failing call")
    assert [f.name for f in d.culprits][:1] == ["mask"]


def test_the_data_decides_for_a_model_wholly_on_the_cpu():
    d = diagnosis(
        """
        import torch
        import torch.nn as nn
        model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
        x = torch.randn(3, 4, device='meta')
        """,
        "out = model(x)\n",
    )
    assert d.target == "meta"
    assert d.target_reason == "meta: where the data is (`model` is wholly on cpu)"
    assert [f.name for f in d.culprits][:1] == ["model"]


def test_a_device_variable_is_used_in_the_fixes():
    d = diagnosis(SETUP + "device = torch.device('meta')\n", "out = model(x)\n")
    assert d.fixes[0].code == "x = x.to(device)"


def test_not_a_device_error_has_no_reason():
    nb = Notebook()
    d = ipydevice.diagnose(nb.fails("1 / 0\n"), namespace=nb.ns)
    assert not d.is_device_error and d.target_reason == ""
