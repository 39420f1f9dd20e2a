"""A diagnosis keeps nothing alive: no tensor, module, frame or exception.

A diagnosis lives on in ``Out``, in a widget, in a log. If it held a tensor (or a
frame, which holds every local), a CUDA tensor would never be freed. So: make
tensors and modules (CPU and meta), keep weak references only, fail a cell,
diagnose, render every way, apply a fix, then drop the namespace, the exception
and ``sys.last_*``: after ``gc.collect()`` every referent must be gone while the
diagnosis is still alive and still renders.

The snapshot principle is also checked structurally: walking the dataclass fields
of a diagnosis (and an inventory) finds only ``str``/``int``/``float``/``bool``/
``None``, tuples, and ipydevice's model objects.
"""

from __future__ import annotations

import gc
import json
import sys
import textwrap
import weakref
from typing import Any

import hostile
import pytest
from cells import Notebook

import ipydevice
from ipydevice.model import Diagnosis

SETUP = """
import weakref
import torch
import torch.nn as nn
from collections import namedtuple

WEAK = []  # weak references to what only a frame ever holds

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.cache = torch.ones(2)  # an unregistered tensor attribute

    def forward(self, inputs):
        pos = torch.arange(inputs.shape[0])  # a frame-only local
        WEAK.append(weakref.ref(pos))
        return self.fc(inputs) + pos[:, None]

model = Encoder().to('meta')
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(3, 4)
Pair = namedtuple('Pair', 'inputs labels')
batch = {'x': x, 'ids': torch.arange(3), 'pair': Pair(torch.ones(3, 4), torch.zeros(3))}
lookup = [torch.ones(3, 4), {'deep': torch.zeros(1)}]

def step(model, x):
    scratch = torch.full((2,), 7.0)  # another frame-only local
    WEAK.append(weakref.ref(scratch))
    return model(x)
"""

FAILING = "out = step(model, x)\n"

#: Expressions (in the namespace) whose objects must die with it.
#: (dicts, lists and tuples cannot be weakly referenced: their tensors stand for them.)
WATCHED = (
    "x",
    "model",
    "model.fc",
    "model.fc.weight",
    "model.cache",
    "opt",
    "batch['ids']",
    "batch['pair'].inputs",
    "lookup[0]",
    "lookup[1]['deep']",
    "step",
    "Encoder",
)


def watch(nb: Notebook) -> dict[str, weakref.ref[Any]]:
    refs = {text: weakref.ref(eval(text, nb.ns)) for text in WATCHED}
    refs.update({f"WEAK[{i}]": ref for i, ref in enumerate(nb.ns["WEAK"])})
    return refs


def record_like_ipython(exc: BaseException) -> None:
    """IPython keeps the last error in ``sys.last_*``: a diagnosis runs with it there."""
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, exc.__traceback__
    sys.last_exc = exc  # Python 3.12 name; harmless before


def forget_last_error() -> None:
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            delattr(sys, name)


def use_everything(d: Diagnosis, nb: Notebook) -> list[Any]:
    """Every way a user reads a diagnosis; returns what they would keep."""
    kept: list[Any] = [
        str(d),
        repr(d),
        d.headline,
        d._repr_html_(),
        d._repr_mimebundle_(),
        d.table(),
        d.to_dict(),
    ]
    json.dumps(d.to_dict())  # plain data all the way down
    inv = ipydevice.inventory(nb.ns)
    kept += [inv, str(inv), inv._repr_html_(), inv.table()]
    fix = next(f for f in d.fixes if f.can_apply)
    result = fix.apply(nb.ns)
    assert result.ok, result.message
    kept.append(result)
    return kept


def test_diagnosis_keeps_nothing_alive() -> None:
    nb = Notebook()
    nb.run(textwrap.dedent(SETUP))
    exc = nb.fails(FAILING)
    refs = watch(nb)
    assert len(refs) == len(WATCHED) + 2, "the frame-only locals were not created"
    record_like_ipython(exc)
    try:
        d = ipydevice.diagnose(exc, namespace=nb.ns)
        assert d.is_device_error and d.culprits, d
        kept = use_everything(d, nb)
    finally:
        forget_last_error()
    del exc
    nb.ns.clear()
    gc.collect()
    alive = [text for text, ref in refs.items() if ref() is not None]
    assert not alive, f"still alive after the namespace and the error were dropped: {alive}"
    # The diagnosis itself survives, whole, and still renders.
    assert "ipydevice" in str(d) and d.records and kept
    hostile.assert_plain(d)


def test_default_diagnose_from_sys_last_keeps_nothing_alive() -> None:
    # ``diagnose()`` with no argument takes sys.last_*: it must not copy them anywhere.
    nb = Notebook()
    nb.run(textwrap.dedent(SETUP))
    exc = nb.fails(FAILING)
    refs = watch(nb)
    record_like_ipython(exc)
    try:
        d = ipydevice.diagnose(namespace=nb.ns)
        str(d), d._repr_html_()
    finally:
        forget_last_error()
    del exc
    nb.ns.clear()
    gc.collect()
    assert not [text for text, ref in refs.items() if ref() is not None]
    assert d.is_device_error


# -- the snapshot principle, structurally -----------------------------------------------------

FAILING_CELLS = {
    "operand": "out = step(model, x)\n",
    "dict_item": "out = model(batch['x'])\n",
    "namedtuple_field": "out = model(batch['pair'].inputs)\n",
    "list_item": "out = model.fc(lookup[0])\n",
    "attribute": "out = model.cache + model.fc.bias\n",
}


@pytest.mark.parametrize("cell", list(FAILING_CELLS.values()), ids=list(FAILING_CELLS))
def test_diagnosis_holds_plain_data_only(cell: str) -> None:
    nb = Notebook()
    nb.run(textwrap.dedent(SETUP))
    d = ipydevice.diagnose(nb.fails(cell), namespace=nb.ns)
    assert d.is_device_error, d
    hostile.assert_plain(d)
    hostile.assert_plain(ipydevice.inventory(nb.ns))
    hostile.assert_plain(ipydevice.inventory(nb.ns, names=["model", "batch", "opt"]))


def test_plain_data_checker_catches_objects() -> None:
    import torch

    from ipydevice.model import ObjectRecord, Snapshot

    leaky = Snapshot(
        (ObjectRecord("x", "tensor", "Tensor", "cpu", path=(("name", torch.ones(1)),)),)
    )
    assert hostile.plain_violations(leaky) == ["d.records[0].path[0][1]: torch.Tensor"]
    assert hostile.plain_violations(Snapshot(notes=(hostile.HostileStr("n"),)))
