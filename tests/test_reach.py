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
    assert d.culprits[0].name == "conv.parametrizations.weight[0][1].keep"
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


# -- functools caches -------------------------------------------------------------------


def test_a_cached_helpers_result_is_named_by_the_call_and_fixed_where_it_is_made():
    nb = Notebook()
    setup = textwrap.dedent(
        """
        import functools
        import torch
        @functools.cache
        def positions(length, scale=1):
            return torch.linspace(0, 1, length) * scale
        h = torch.randn(2, 6, device='cuda')
        """
    )
    cell = "out = h + positions(6)\n"
    with fake_cuda(), torch.no_grad():
        nb.run(setup)
        d = ipydevice.diagnose(nb.fails(cell), namespace=nb.ns)
    # named as the line writes it, where it is written; the fix says where it is kept
    assert d.culprits[0].name == "positions(6)"  # the cell's own words
    fix = d.fixes[0]
    assert fix.scope == "source" and "device='cuda:0'" in fix.code
    assert "positions.cache_clear()" in fix.title
    # the edited definition, run again, makes a new function with an empty cache
    again = Notebook()
    with fake_cuda(), torch.no_grad():
        again.run(setup.replace(fix.original, fix.code, 1))
        assert again.error(cell) is None
        assert again.ns["out"].device == torch.device("cuda", 0)


def test_cached_results_are_read_without_calling_bounded_or_not():
    import functools

    from ipydevice.collect.caches import cached_results

    calls = []

    @functools.lru_cache(maxsize=8)
    def table(n, *, kind="a"):
        calls.append(n)
        return [n, kind]

    table(3)
    table(4, kind="b")
    found = dict(cached_results(table, 10))
    assert found == {"3": [3, "a"], "4, kind='b'": [4, "b"]}
    assert calls == [3, 4]


# -- holders without .to() --------------------------------------------------------------


def _on_standin(setup: str, cell: str) -> tuple[Notebook, ipydevice.Diagnosis]:
    """The diagnosis of ``cell`` on the ``openreg`` stand-in (a device with data);
    its first fix applied, the cell must run."""
    from standin import standin

    nb = Notebook()
    with standin():
        nb.run(textwrap.dedent(setup))
        d = ipydevice.diagnose(nb.fails(textwrap.dedent(cell)), namespace=nb.ns)
        assert d.fixes and d.fixes[0].apply(nb.ns).ok, str(d)
        assert nb.error(textwrap.dedent(cell)) is None, str(d)
    return nb, d


def test_a_distribution_read_through_self_is_named_from_the_users_root_and_moved_whole():
    nb, d = _on_standin(
        """
        import torch, torch.nn as nn
        from torch.distributions import Independent, Normal
        class Flow(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 4)
                self.base = Independent(Normal(torch.zeros(4), torch.ones(4)), 1)
            def forward(self, x):
                return self.base.log_prob(self.net(x))
        flow = Flow().to('openreg')
        x = torch.randn(2, 4, device='openreg')
        """,
        "lp = flow(x)\n",
    )
    names = [f.name for f in d.culprits]
    # the Independent the user made is one thing to them, the Normal's loc and scale
    # its parts (both moved)
    assert names == ["flow.base"]
    assert "`base_dist.loc` and `base_dist.scale` are on cpu" in d.culprits[0].why
    assert " in Flow.forward" not in str(d)
    assert nb.ns["flow"].base.base_dist.scale.device.type != "cpu"


def test_the_other_tensors_of_a_holder_with_behaviour_move_with_the_one_read():
    nb, d = _on_standin(
        """
        import torch, torch.nn as nn
        from torch.distributions import Categorical
        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 3)
                self.extras = {'prior': Categorical(probs=torch.ones(3) / 3)}
            def forward(self, x):
                return self.net(x) + self.extras['prior'].logits
        policy = Policy().to('openreg')
        x = torch.randn(2, 4, device='openreg')
        """,
        "out = policy(x)\n",
    )
    # the Categorical is named as one thing, its logits and probs its parts
    assert [f.name for f in d.culprits] == ["policy.extras['prior']"]
    assert "`logits` and `probs` are on cpu" in d.culprits[0].why
    prior = nb.ns["policy"].extras["prior"]
    assert prior.probs.device.type != "cpu"  # sample() uses probs: it moved too


def test_a_plain_record_moves_only_the_field_read():
    d = _fixed(
        """
        import torch
        from types import SimpleNamespace
        opts = SimpleNamespace(temperature=torch.tensor([0.5, 2.0]), table=torch.ones(9), n=2)
        logits = torch.randn(3, 2, device='cuda')
        """,
        "scaled = logits / opts.temperature\n",
    )
    assert [f.name for f in d.culprits] == ["opts.temperature"]
    assert "opts.table" not in d.fixes[0].code


# -- defaults and closures (the closure holder) -----------------------------------------


def test_a_kw_only_default_and_a_closure_two_levels_deep_are_named_and_moved():
    d = _fixed(
        """
        import torch
        def make():
            offset = torch.ones(3)
            def middle():
                def inner(x, *, gain=torch.full((3,), 2.0)):
                    return x * gain + offset
                return inner
            return middle()
        step = make()
        x = torch.randn(3, device='cuda')
        """,
        "y = step(x)\n",
    )
    # named as the function reads them; the fix sets their paths
    assert [f.name for f in d.culprits] == ["gain in inner", "offset in inner"]
    assert "step.__kwdefaults__['gain']" in d.fixes[0].code
    assert "step.__closure__[0].cell_contents" in d.fixes[0].code
