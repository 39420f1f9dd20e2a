"""Tidy tables: ``Diagnosis.table()`` and ``Inventory.table()``."""

from __future__ import annotations

import pytest

import ipydevice
from ipydevice.render.table import parse_shape

pd = pytest.importorskip("pandas")

SETUP = (
    "import torch\nimport torch.nn as nn\n"
    "model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2).to('meta'))\n"
    "x = torch.randn(8, 4)\n"
    "scale = torch.tensor(2.0)\n"
    "opt = torch.optim.SGD(model[0].parameters(), lr=0.1)\n"
)


@pytest.fixture
def diagnosis(nb):
    nb.run(SETUP)
    return ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)


def test_missing_values_are_na_and_shapes_are_tuples(diagnosis):
    df = diagnosis.table()
    assert "devices" not in df.columns  # the breakdown is a table of its own
    row = df.set_index("name").loc["x"]
    assert row["shape"] == (8, 4) and row["dtype"] == "float32" and row["nbytes"] == 128
    assert row["detail"] is pd.NA
    module = df.set_index("name").loc["model"]
    assert module["shape"] is pd.NA and module["dtype"] is pd.NA
    assert not (df.select_dtypes(include=["string", "object"]) == "").any().any()
    assert str(df["name"].dtype) == "string" and str(df["nbytes"].dtype) == "Int64"
    assert df["culprit"].dtype == "boolean"


def test_the_inventory_table_is_tidy(nb):
    nb.run(SETUP)
    df = ipydevice.inventory(nb.ns).table().set_index("name")
    assert df.loc["x", "shape"] == (8, 4)
    assert df.loc["scale", "shape"] == ()  # 0-dim: a shape, and an empty one
    assert df.loc["model", "shape"] is pd.NA and df.loc["model", "device"] == "mixed"
    assert all(isinstance(s, tuple) or s is pd.NA for s in df["shape"])


def test_the_breakdown_is_a_long_table_of_numbers(nb, diagnosis):
    long = diagnosis.table(breakdown=True)
    assert list(long.columns) == ["name", "kind", "type", "device", "count", "nbytes", "culprit"]
    model = long[long["name"] == "model"].set_index("device")
    assert set(model.index) == {"cpu", "meta"}
    assert model.loc["cpu", "count"] == 2 and model.loc["cpu", "nbytes"] == 80
    assert model.loc["meta", "count"] == 2 and model.loc["meta", "nbytes"] == 40
    assert str(long["count"].dtype) == "Int64" and str(long["nbytes"].dtype) == "Int64"
    x = long[long["name"] == "x"]
    assert len(x) == 1 and x["count"].item() == 1 and x["nbytes"].item() == 128
    inv = ipydevice.inventory(nb.ns).table(breakdown=True)
    assert inv[inv["name"] == "opt"].set_index("device").loc["cpu", "count"] == 2
    assert not any("×" in str(v) for v in inv.to_numpy().ravel())


@pytest.mark.parametrize(
    ("text", "shape"),
    [("(8, 16)", (8, 16)), ("(3,)", (3,)), ("()", ()), ("", None), ("?", None), ("(s0, 4)", None)],
)
def test_parse_shape(text, shape):
    assert parse_shape(text) == shape
