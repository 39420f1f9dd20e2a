"""Reachability by identity: tensors kept in a class dict along the MRO or in a
module of the user's own files are named from the root the user holds, and every
path shown evaluates back to the same object (a list-like container's step is its
number or position, never a string key)."""

from __future__ import annotations

import sys
import textwrap
from collections import OrderedDict
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.utils.parametrize as parametrize
from cells import Notebook

import ipydevice
from ipydevice.collect.checked import MISSING, follow
from ipydevice.collect.walk import module_children

sys.path.insert(0, str(Path(__file__).parent / "realworld"))
from fakecuda import fake_cuda


def _fixed(setup: str, cell: str, ns: dict | None = None) -> ipydevice.Diagnosis:
    """The diagnosis of ``cell`` under fake CUDA; its first move of the namespace
    must make it run."""
    nb = Notebook()
    nb.ns.update(ns or {})
    with fake_cuda(), torch.no_grad():
        nb.run(textwrap.dedent(setup))
        d = ipydevice.diagnose(nb.fails(textwrap.dedent(cell)), namespace=nb.ns)
        moves = [f for f in d.fixes if f.scope == "namespace"]
        assert moves, str(d)
        assert moves[0].apply(nb.ns).ok
        assert nb.error(textwrap.dedent(cell)) is None, str(d)
    return d


# -- paths that evaluate ---------------------------------------------------------------


class _Gate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # keys that are not positions: `[1]` reads the second, not the one keyed '2'
        self.body = nn.Sequential(OrderedDict([("0", nn.Identity()), ("2", nn.Tanh())]))

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return self.body(w)


def test_list_like_steps_are_numbers_or_positions_and_evaluate():
    lin = nn.Linear(3, 3)
    parametrize.register_parametrization(lin, "weight", _Gate())
    plist = lin.parametrizations.weight
    assert [step for step, _ in module_children(plist, 10)] == [("item", 0), ("attr", "original")]
    gate = plist[0]
    assert [step for step, _ in module_children(gate.body, 10)] == [("item", 0), ("item", 1)]
    ns = {"lin": lin}
    path = (("name", "lin"), ("attr", "parametrizations"), ("item", "weight"), ("item", 0))
    assert follow((*path, ("attr", "body"), ("item", 1)), ns) is gate.body[1]
    assert follow((*path[:-1], ("item", "0")), ns) is MISSING  # `plist['0']` raises


def test_a_tensor_in_a_parametrization_is_named_by_a_path_that_runs():
    d = _fixed(
        """
        import torch, torch.nn as nn
        import torch.nn.utils.parametrize as P
        class Mask(nn.Module):
            def __init__(self):
                super().__init__()
                self.keep = torch.ones(2, 2, 1)
            def forward(self, w):
                return w * self.keep
        conv = nn.Conv1d(2, 2, 1)
        P.register_parametrization(conv, 'weight', nn.Sequential(nn.Identity(), Mask()))
        conv = conv.to('cuda')
        x = torch.randn(1, 2, 5, device='cuda')
        """,
        "y = conv(x)\n",
    )
    assert d.culprits[0].name == "conv.parametrizations['weight'][0][1].keep"
    assert "['0']" not in str(d) and "['1']" not in str(d)


def test_a_path_that_does_not_evaluate_is_not_shown_as_one():
    class Box:
        def __init__(self) -> None:
            self.__dict__["t"] = torch.ones(1)

        @property
        def t(self) -> torch.Tensor:  # shadows the instance dict: `box.t` is another
            return torch.zeros(1)

    box = Box()
    assert follow((("name", "box"), ("attr", "t")), {"box": box}) is not box.__dict__["t"]
    seq = nn.Sequential(nn.Identity())
    assert follow((("name", "s"), ("item", 3)), {"s": seq}) is MISSING
    assert follow((("name", "s"), ("attr", "missing")), {"s": Box()}) is MISSING


# -- class dicts along the MRO ---------------------------------------------------------


def test_a_grand_base_class_constant_read_through_self_is_named_by_its_class():
    d = _fixed(
        """
        import torch, torch.nn as nn
        class Stats(nn.Module):
            STD = torch.full((4,), 2.0)
        class Scaled(Stats):
            pass
        class Head(Scaled):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
            def forward(self, x):
                return self.proj(x) / self.STD
        head = Head().to('cuda')
        x = torch.randn(2, 4, device='cuda')
        """,
        "out = head(x)\n",
    )
    assert d.culprits[0].name == "Stats.STD"
    assert d.fixes[0].code == "Stats.STD = Stats.STD.to('cuda:0')"


def test_a_class_constant_in_a_table_of_a_class_nobody_holds_by_name_is_named_by_the_subclass():
    d = _fixed(
        """
        import torch
        class _Hidden:
            TABLE = {'scale': torch.ones(3)}
        class Mixer(_Hidden):
            def __call__(self, x):
                return x * self.TABLE['scale']
        mix = Mixer()
        x = torch.randn(3, device='cuda')
        """,
        "y = mix(x)\n",
    )
    assert d.culprits[0].name == "Mixer.TABLE['scale']"


def test_a_constant_of_the_users_own_module_is_named_through_the_module(tmp_path, monkeypatch):
    (tmp_path / "prep_consts.py").write_text(
        "import torch\nclass Norm:\n    MEAN = torch.zeros(3)\nOFFSET = torch.ones(3)\n"
        "def shift(x):\n    return x + OFFSET\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import prep_consts

    d = _fixed(
        """
        x = torch.randn(3, device='cuda')
        """,
        "y = prep.shift(x)\n",
        {"prep": prep_consts, "torch": torch},
    )
    assert d.culprits[0].name == "prep.OFFSET"
