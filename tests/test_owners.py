"""Owners over aliases: a loop variable or local bound to a module's parameter is
named by its owner (``m2.weight``), the fix moves the owner (``m2.to(...)``), and
no fix rebinds the alias (``p2 = p2.to(...)`` would leave the module unchanged)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from cells import Notebook

import ipydevice

torch = pytest.importorskip("torch")
# the corpus's fake CUDA device (FakeTensorMode): real device errors, no GPU
sys.path.insert(0, str(Path(__file__).resolve().parent / "realworld"))
fakecuda = pytest.importorskip("fakecuda")

SETUP = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.token = nn.Parameter(torch.zeros(3))
        self.register_buffer("scale", torch.ones(3))

ema_model = nn.Linear(3, 3).to("cuda")
student = nn.Linear(3, 3)
net = Net()

class Trainer:
    def __init__(self):
        self.models = {"teacher": nn.Linear(3, 3)}
        self.ema = nn.Linear(3, 3)

trainer = Trainer()
heads = {"a": nn.Linear(3, 2).to("cuda"), "b": nn.Linear(3, 2)}
"""

CASES = [
    (  # the EMA loop over two models side by side, in the cell
        "for p1, p2 in zip(ema_model.parameters(), student.parameters()):\n"
        "    p1.mul_(0.9).add_(p2, alpha=0.1)\n",
        ("student.weight", "student"),
    ),
    (  # other names, the update the other way round, nested in a helper loop
        "pairs = list(zip(student.parameters(), ema_model.parameters()))\n"
        "for i in range(1):\n"
        "    for src, dst in pairs:\n"
        "        dst.mul_(0.5).add_(src)\n",
        ("student.weight", "student"),
    ),
    (  # a local of an earlier cell that takes a module's parameter
        "out = ema_model(torch.ones(2, 3, device='cuda')) + w\n",
        ("net.token", "net"),
    ),
    (  # a buffer, inside a function of the user's
        "def shift(x):\n    s = net.scale\n    return x * s\nshift(torch.ones(3, device='cuda'))\n",
        ("net.scale", "net"),
    ),
]


CASES += [
    (  # modules held by an object of the user's, one step down
        "for a, b in zip(ema_model.parameters(), trainer.ema.parameters()):\n"
        "    a.mul_(0.9).add_(b, alpha=0.1)\n",
        ("trainer.ema.weight", "trainer.ema"),
    ),
    (  # a view made from a module's parameter on the line before
        "tok = net.token.expand(2, 3)\nout = ema_model(torch.ones(2, 3, device='cuda')) + tok\n",
        ("net.token", "net"),
    ),
    (  # a view of a buffer, made inside a function of the user's
        "def scaled(x):\n    row = net.scale[None]\n    return x * row\n"
        "scaled(torch.ones(2, 3, device='cuda'))\n",
        ("net.scale", "net"),
    ),
]


@pytest.mark.parametrize(
    ("cell", "expected"),
    CASES,
    ids=["ema", "pairs", "local", "buffer", "held", "view", "view-in-function"],
)
def test_an_alias_is_named_by_its_owner_and_the_owner_moves(
    cell: str, expected: tuple[str, str]
) -> None:
    culprit, owner = expected
    with fakecuda.fake_cuda(), torch.no_grad():
        nb = Notebook()
        nb.run(textwrap.dedent(SETUP))
        nb.run("w = net.token\n")
        d = ipydevice.diagnose(nb.fails(cell), namespace=nb.ns)
        assert d.is_device_error and d.target == "cuda:0", d
        named = [c.name for c in d.culprits]
        assert named[0] in (culprit, owner) and len(named) == 1, d
        for fix in d.fixes:
            for alias in ("p2", "src", "dst", "w =", "s ="):
                assert f"{alias} = {alias}.to(" not in fix.code, fix.code
        first = d.fixes[0]
        assert first.scope == "namespace" and first.code == f"{owner}.to('cuda:0')", d
        assert first.apply(nb.ns).ok
        moved = nb.ns[owner] if "." not in owner else nb.ns["trainer"].ema
        assert str(next(moved.parameters()).device) == "cuda:0"
        if " + w" not in cell:  # (fake CUDA gives a moved module new parameters: w is stale)
            assert nb.error(cell) is None


ELEMENTS = [
    (  # the loop variable over a dict of heads is the dict's element
        "outs = {}\nfor key, head in heads.items():\n"
        "    outs[key] = head(torch.ones(1, 3, device='cuda'))\n",
        "heads['b']",
    ),
    (  # a local bound to a module an object of the user's holds
        "m = trainer.ema\nout = m(torch.ones(1, 3, device='cuda'))\n",
        "trainer.ema",
    ),
]


@pytest.mark.parametrize(("cell", "owner"), ELEMENTS, ids=["loop-over-dict", "local-of-holder"])
def test_a_module_under_a_bare_name_is_named_by_its_holder(cell: str, owner: str) -> None:
    with fakecuda.fake_cuda(), torch.no_grad():
        nb = Notebook()
        nb.run(textwrap.dedent(SETUP))
        d = ipydevice.diagnose(nb.fails(cell), namespace=nb.ns)
        assert d.is_device_error and d.target == "cuda:0", d
        assert d.culprits[0].name == owner, d
        first = d.fixes[0]
        assert first.scope == "namespace" and first.code == f"{owner}.to('cuda:0')", d
        assert first.apply(nb.ns).ok
        assert nb.error(cell) is None


DERIVED_SETUP = """
import torch

class Sampler:
    __slots__ = ("alphas", "steps")

    def __init__(self, betas):
        self.alphas = torch.cumprod(1 - betas, 0)
        self.steps = len(betas)

    def q_sample(self, x0, t):
        a = self.alphas[t].view(-1, 1)
        return a.sqrt() * x0

class Helper:
    def __init__(self):
        self.weights = {"w": torch.ones(3, 2)}
        self.table = torch.arange(3.0)

    def project(self, x):
        w = self.weights["w"].t()
        return x @ w.t()

    def scale(self, x):
        s = self.table.float() * 2
        return x * s

sampler = Sampler(torch.full((10,), 0.01))
helper = Helper()
x = torch.ones(2, 3, device="cuda")
t = torch.tensor([1, 2], device="cuda")
"""

DERIVED = [
    ("out = sampler.q_sample(torch.ones(2, 1, device='cuda'), t)\n", "sampler.alphas"),
    ("out = helper.project(x)\n", "helper.weights['w']"),
    ("out = helper.scale(x)\n", "helper.table"),
]


@pytest.mark.parametrize(("cell", "source"), DERIVED, ids=["slots", "dict-view", "copy"])
def test_a_local_made_from_a_held_tensor_is_named_by_that_tensor(cell: str, source: str) -> None:
    with fakecuda.fake_cuda(), torch.no_grad():
        nb = Notebook()
        nb.run(textwrap.dedent(DERIVED_SETUP))
        d = ipydevice.diagnose(nb.fails(cell), namespace=nb.ns)
        assert d.is_device_error and d.target == "cuda:0", d
        assert d.culprits[0].name == source, d
        first = d.fixes[0]
        assert first.scope == "namespace" and first.code.startswith(f"{source} = {source}.to("), d
        assert first.apply(nb.ns).ok
        assert nb.error(cell) is None


SELF_MOVING = """
import torch
from torch import nn

class Meter(nn.Module):
    # keeps plain tensors as state and moves them itself, as a torchmetrics Metric does
    def __init__(self):
        super().__init__()
        self.total = torch.zeros(3)

    def _apply(self, fn, *args, **kwargs):
        this = super()._apply(fn, *args, **kwargs)
        this.total = fn(this.total)
        return this

    def forward(self, x):
        self.total = self.total + x.sum(0)
        return self.total

meter = Meter()
heads = [nn.Linear(3, 3).to("cuda"), nn.Linear(3, 3), nn.Linear(3, 3)]
meters = {"train": Meter(), "val": Meter()}
x = torch.ones(2, 3, device="cuda")
"""

SELF_MOVING_CASES = [
    ("out = meter(x)\n", ["meter"]),
    ("outs = [head(x) for head in heads]\n", ["heads[1]", "heads[2]"]),
    ("for name, m in meters.items():\n    m(x)\n", ["meters['train']", "meters['val']"]),
]


@pytest.mark.parametrize(
    ("cell", "culprits"), SELF_MOVING_CASES, ids=["own-apply", "list-loop", "dict-loop"]
)
def test_what_moves_itself_moves_whole_and_a_loop_moves_all_it_reaches(
    cell: str, culprits: list[str]
) -> None:
    with fakecuda.fake_cuda(), torch.no_grad():
        nb = Notebook()
        nb.run(textwrap.dedent(SELF_MOVING))
        d = ipydevice.diagnose(nb.fails(cell), namespace=nb.ns)
        assert d.is_device_error and d.target == "cuda:0", d
        assert [c.name for c in d.culprits] == culprits, d
        first = d.fixes[0]
        assert first.scope == "namespace", d
        assert first.code.splitlines() == [f"{c}.to('cuda:0')" for c in culprits], d
        assert first.apply(nb.ns).ok
        assert nb.error(cell) is None
