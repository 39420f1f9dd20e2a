"""The engine's contract beyond the scenarios: non-device errors, message-only
diagnoses, exception chains, rendering, escaping, tables and fix safety."""

from __future__ import annotations

import ast
import json
import sys

import pytest
import torch
from cells import Notebook
from hypothesis import given, settings
from hypothesis import strategies as st

import ipydevice
from ipydevice.model import Diagnosis, Fix, Step

CLASSIC = (
    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
)


def meta_error(nb: Notebook, extra: str = "") -> BaseException:
    nb.run(
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)\n"
        + extra
    )
    return nb.fails("out = model(x)\n")


@pytest.mark.parametrize(
    "make",
    [
        lambda: 1 / 0,
        lambda: torch.ones(2, 3) @ torch.ones(4, 5),
        lambda: torch.ones(2, dtype=torch.float16) @ torch.ones(2),
        lambda: torch.nn.Linear(2, 2)(torch.ones(1, 3)),
        lambda: torch.ones(2).to("cuda"),
        lambda: {}["missing"],
    ],
    ids=["zero-division", "shape", "dtype", "linear-shape", "no-cuda", "key-error"],
)
def test_non_device_errors_are_not_device_errors(make):
    try:
        make()
    except Exception as exc:
        d = ipydevice.diagnose(exc)
    assert not d.is_device_error
    assert d.culprits == () and d.fixes == ()
    assert str(d).startswith("ipydevice: not a device error")


@pytest.mark.parametrize(
    "message",
    [
        "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity)",
        "CUDA error: device-side assert triggered",
        "Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be the same",
    ],
)
def test_near_misses_are_not_device_errors(message):
    assert not ipydevice.diagnose(RuntimeError(message)).is_device_error


def test_message_only_diagnosis():
    d = ipydevice.diagnose(RuntimeError(CLASSIC))
    assert d.is_device_error and d.family == "op_mismatch"
    assert d.devices == ("cuda:0", "cpu")
    assert d.target == "cuda:0"
    assert d.culprits == () and d.records == ()
    assert "cuda:0" in d.headline
    assert "ipydevice-panel" in d._repr_html_()


def test_default_exception_is_the_last_one_recorded(monkeypatch):
    exc = RuntimeError(CLASSIC)
    monkeypatch.setattr(sys, "last_exc", exc, raising=False)
    monkeypatch.setattr(sys, "last_value", exc, raising=False)
    assert ipydevice.diagnose().family == "op_mismatch"


def test_no_exception_at_all(monkeypatch):
    monkeypatch.delattr(sys, "last_exc", raising=False)
    monkeypatch.delattr(sys, "last_value", raising=False)
    d = ipydevice.diagnose()
    assert not d.is_device_error and d.notes


def test_device_error_wrapped_by_another_exception(nb):
    inner = meta_error(nb)
    try:
        raise ValueError("training step failed") from inner
    except ValueError as outer:
        d = ipydevice.diagnose(outer, namespace=nb.ns)
    assert d.is_device_error and [f.name for f in d.culprits] == ["x"]


def test_broken_str_exception():
    class Broken(RuntimeError):
        def __str__(self) -> str:
            raise ValueError("no")

    d = ipydevice.diagnose(Broken(CLASSIC))
    assert d.is_device_error  # the message is read from args


def test_text_report(nb):
    d = ipydevice.diagnose(meta_error(nb), namespace=nb.ns)
    text = str(d)
    assert "`x` is on cpu, `model` is on meta\n" in text
    assert "Move x to meta" in text and "x = x.to('meta')" in text
    assert d.failing_module == "model (Linear)"
    assert "failed in" not in text  # the headline names `model` already
    assert repr(d).startswith("<Diagnosis op_mismatch")


def test_table_puts_culprits_first(nb):
    d = ipydevice.diagnose(meta_error(nb), namespace=nb.ns)
    df = d.table()
    assert list(df.columns[:4]) == ["name", "kind", "type", "device"]
    assert df.iloc[0]["name"] == "x" and bool(df.iloc[0]["culprit"])
    assert "model" in set(df["name"])  # on-device parameters stay out of the snapshot


def test_to_dict_is_json(nb):
    d = ipydevice.diagnose(meta_error(nb), namespace=nb.ns)
    assert json.loads(json.dumps(d.to_dict()))["culprits"][0]["name"] == "x"


def test_truncation_is_visible(nb):
    extra = "".join(f"t{i} = torch.ones(2)\n" for i in range(30))
    nb.run(
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)\n"
        + extra
    )
    nb.run(
        "def step(model, x):\n"
        + "".join(f"    a{i} = torch.ones(2)\n" for i in range(30))
        + "    return model(x)\n"
    )
    exc = nb.fails("out = step(model, x)\n")
    with ipydevice.override(max_rows=5):
        d = ipydevice.diagnose(exc, namespace=nb.ns)
        text, html = str(d), d._repr_html_()
    assert "more (d.table() lists all)" in text
    assert "more objects</summary>" in html


HOSTILE = '<img src=x onerror="alert(1)">'


def test_html_escapes_names_keys_and_messages(nb):
    nb.ns["evil_key"] = HOSTILE
    nb.run(
        "import torch\nimport torch.nn as nn\n"
        "Evil = type('<b>Evil</b>', (nn.Linear,), {})\n"
        "model = Evil(4, 2).to('meta')\n"
        "batch = {evil_key: torch.randn(3, 4)}\n"
    )
    exc = nb.fails("out = model(batch[evil_key])\n")
    d = ipydevice.diagnose(exc, namespace=nb.ns)
    html = d._repr_html_()
    assert "<img" not in html and "<b>Evil" not in html and "<script" not in html
    assert "&lt;img src=x onerror=" in html
    assert "&lt;b&gt;Evil&lt;/b&gt;" in html
    for fix in d.fixes:
        ast.parse(fix.code)


def test_apply_reports_a_vanished_object(nb):
    d = ipydevice.diagnose(meta_error(nb), namespace=nb.ns)
    del nb.ns["x"]
    result = d.fixes[0].apply(nb.ns)
    assert not result.ok and "x no longer exists" in result.message


def test_apply_without_steps_says_so():
    result = Fix("Change the code", "pass", "source").apply({})
    assert not result.ok and "cannot be applied" in result.message


def test_apply_reports_a_failing_move():
    class Stubborn:
        def to(self, device: str) -> None:
            raise MemoryError("out of memory")

    ns = {"thing": Stubborn()}
    result = Fix(
        "Move",
        "thing = thing.to('cuda:0')",
        "namespace",
        steps=(Step("reassign", (("name", "thing"),), "cuda:0"),),
    ).apply(ns)
    assert not result.ok and "MemoryError: out of memory" in result.message


@settings(max_examples=60, deadline=None)
@given(key=st.text(min_size=1, max_size=30))
def test_fix_code_parses_and_never_evaluates_a_key(key):
    nb = Notebook()
    nb.ns["key"] = key
    nb.run(
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')\nbatch = {key: torch.randn(3, 4)}\n"
    )
    exc = nb.fails("out = model(batch[key])\n")
    d: Diagnosis = ipydevice.diagnose(exc, namespace=nb.ns)
    assert d.culprits[0].name == f"batch[{key!r}]"
    for fix in d.fixes:
        tree = ast.parse(fix.code)
        # The key only ever appears as a string literal, never as code.
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert names <= {"batch", "k", "v", "torch", "key", "model", "out"}
    assert d.fixes[0].apply(nb.ns).ok
    nb.run("out = model(batch[key])\n")
