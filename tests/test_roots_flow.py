"""Variations of the mechanisms that name a culprit from the root the user holds and
check a fix against the code, in shapes the corpus cases do not literally match (other
names, holders and devices; the ``openreg`` stand-in, tests/realworld/standin.py):

* the shortest path from a name the user holds (an object another root also reaches);
* a module of buffers only, wholly off the target, named as one thing;
* an index computed in the failing statement (``labels.argmax(1)``), and a table's
  siblings on its holder, when the computation lives on the indices' device;
* a closure read by a function a library calls (a hook): rebinding the global does not
  reach it, so the fix that remakes the tensor ranks first;
* a cached function's factories all given ``device=`` in one fix;
* a dropped ``.to()`` in a function of an earlier cell: mended there when the name is
  the function's own, left to the namespace move when it is a global."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from cells import Notebook

import ipydevice

sys.path.insert(0, str(Path(__file__).resolve().parent / "realworld"))
from standin import standin

PRELUDE = "import functools, torch, torch.nn as nn\ndev = 'openreg'\n"


@pytest.fixture(autouse=True)
def openreg():
    with standin():
        yield


def _session(setup: str, cell: str) -> tuple[Notebook, ipydevice.Diagnosis]:
    nb = Notebook()
    nb.run(PRELUDE + textwrap.dedent(setup))
    d = ipydevice.diagnose(nb.fails(textwrap.dedent(cell)), namespace=nb.ns)
    return nb, d


def _first_fix_runs(nb: Notebook, d: ipydevice.Diagnosis, cell: str, setup: str = "") -> Notebook:
    """The first fix, as the panel applies it, makes the whole cell run; the session
    it ran in (a new one for a source fix)."""
    fix = d.fixes[0]
    if fix.scope == "namespace":
        assert fix.apply(nb.ns).ok
    elif fix.scope == "source":  # the edited lines replace the old ones; the cells run again
        edited = (PRELUDE + textwrap.dedent(setup)).replace(fix.original.strip(), fix.code.strip())
        assert edited != PRELUDE + textwrap.dedent(setup), fix
        nb = Notebook()
        nb.run(edited)
    else:
        assert fix.scope == "cell", fix
        cell = fix.code
    assert nb.error(textwrap.dedent(cell)) is None, str(d)
    return nb


def test_an_object_two_roots_reach_is_named_from_the_shorter():
    # `trainer.net` is `net`: the kernel's tensor is `net.scorer.offset`, not the
    # path through the trainer the walk entered first
    setup = """
    class Scorer(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 1)
            self.offset = torch.zeros(3)          # a plain attribute: .to() leaves it
        def forward(self, x):
            return self.lin(x - self.offset)
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.scorer = Scorer()
        def forward(self, x):
            return self.scorer(x)
    class Trainer(nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net
        def forward(self, x):
            return self.net(x).mean()
    net = Net().to(dev)
    trainer = Trainer(net)
    x = torch.randn(4, 3, device=dev)
    """
    cell = "loss = trainer(x)\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "net.scorer.offset"
    assert d.target == "openreg:0"
    _first_fix_runs(nb, d, cell, setup)


def test_a_module_of_buffers_only_is_named_as_one_thing():
    setup = """
    class RunningStats(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.register_buffer('mean', torch.zeros(n))
            self.register_buffer('var', torch.ones(n))
        def forward(self, x):
            return (x - self.mean) / self.var.sqrt()
    norm = RunningStats(5)
    feats = torch.randn(2, 5, device=dev)
    """
    cell = "z = norm(feats)\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "norm"
    assert d.culprits[0].kind == "module"
    _first_fix_runs(nb, d, cell)
    assert nb.ns["z"].device.type == "openreg"


def test_an_index_computed_in_the_statement_follows_the_computation():
    # the indices are `scores.topk(2).indices`, computed where `scores` is
    setup = """
    vocab = torch.randn(12, 4)
    proj = nn.Linear(4, 12).to(dev)
    h = torch.randn(3, 4, device=dev)
    """
    cell = "scores = proj(h)\npicked = vocab[scores.topk(2).indices] + h[:, None]\n"
    nb, d = _session(setup, cell)
    assert d.target == "openreg:0"
    assert d.culprits[0].name == "vocab"
    _first_fix_runs(nb, d, cell)
    assert nb.ns["picked"].device.type == "openreg"


def test_a_tables_siblings_on_its_holder_go_with_it():
    # two schedules of one holder, read by a helper: neither outvotes the computation
    setup = """
    def lookup(values, steps):
        return values[steps][:, None]
    class Schedule:
        def __init__(self, n):
            self.alpha = torch.linspace(1.0, 0.1, n)
            self.sigma = torch.linspace(0.0, 0.9, n)
        def mix(self, a, b, steps):
            return lookup(self.alpha, steps) * a + lookup(self.sigma, steps) * b
    sched = Schedule(20)
    a = torch.randn(2, 3, device=dev)
    b = torch.randn(2, 3, device=dev)
    steps = torch.tensor([1, 7], device=dev)
    """
    cell = "mixed = sched.mix(a, b, steps)\n"
    nb, d = _session(setup, cell)
    assert d.target == "openreg:0"
    assert d.culprits[0].name == "sched.alpha"
    _first_fix_runs(nb, d, cell)
    assert nb.ns["mixed"].device.type == "openreg"


def test_a_closure_a_library_calls_is_not_reached_by_a_rebinding():
    # a forward pre-hook closes over `shift`; the module calls the hook, not the cell
    setup = """
    def shifted_by(shift):
        def pre(module, args):
            return (args[0] + shift,)
        return pre
    layer = nn.Linear(3, 3)
    shift = torch.ones(3)
    layer.register_forward_pre_hook(shifted_by(shift))
    layer.to(dev)
    inp = torch.randn(2, 3, device=dev)
    """
    cell = "y = layer(inp)\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "shift"
    assert d.fixes[0].scope == "source"  # remade on the device, the hook made again
    assert "device=dev" in d.fixes[0].code
    assert any(f.scope == "namespace" for f in d.fixes[1:])  # still offered, below
    _first_fix_runs(nb, d, cell, setup)


def test_a_cached_function_gets_device_on_every_factory():
    setup = """
    @functools.cache
    def grid(n):
        xs = torch.arange(n).float()
        ys = torch.linspace(0, 1, n)
        return torch.stack([xs, ys * xs], -1)
    pts = torch.randn(4, 2, device=dev)
    """
    cell = "moved = pts + grid(4)\n"
    nb, d = _session(setup, cell)
    fix = d.fixes[0]
    assert fix.scope == "source" and "cache_clear" in fix.title
    assert fix.code.count("device=dev") == 2
    _first_fix_runs(nb, d, cell, setup)


def test_a_dropped_to_of_a_global_in_a_function_is_not_made_local():
    # `table.to(dev)` in the function reads the global: assigning it there would make
    # `table` a local of the function (UnboundLocalError), so the global moves
    setup = """
    table = torch.randn(6, 2)
    def embed(ids):
        table.to(dev)
        return table[ids]
    ids = torch.tensor([0, 3], device=dev)
    w = torch.randn(2, 2, device=dev)
    """
    cell = "e = embed(ids) * w\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "table"
    assert "`table.to(dev)` drops its result" in d.culprits[0].why
    assert not any(f.scope == "source" and "table = table" in f.code for f in d.fixes)
    _first_fix_runs(nb, d, cell)


def test_a_library_object_is_named_as_the_object_not_its_tensors():
    # a Laplace noise model kept on a module: the user made `head.noise`, never its `loc`
    setup = """
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.noise = torch.distributions.Laplace(torch.zeros(3), torch.ones(3))
        def forward(self, x):
            y = self.lin(x)
            return y, self.noise.log_prob(y).sum()
    head = Head().to(dev)
    x = torch.randn(2, 3, device=dev)
    """
    cell = "y, lp = head(x)\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "head.noise"
    assert "a Laplace whose `loc` and `scale` are on cpu" in d.culprits[0].why
    _first_fix_runs(nb, d, cell)
    assert nb.ns["lp"].device.type == "openreg"


def test_a_library_objects_private_tensors_move_with_it():
    # a MultivariateNormal made from scale_tril keeps a private factor it computes with
    setup = """
    from torch.distributions import MultivariateNormal
    class Density(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(2, 2)
            self.base = MultivariateNormal(torch.zeros(2), scale_tril=torch.eye(2))
        def forward(self, x):
            return self.base.log_prob(self.proj(x))
    density = Density().to(dev)
    pts = torch.randn(5, 2, device=dev)
    """
    cell = "lp = density(pts)\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "density.base"
    assert "_unbroadcasted_scale_tril" in d.fixes[0].code
    _first_fix_runs(nb, d, cell)
    assert nb.ns["lp"].device.type == "openreg"


_SPLIT = """
class TwoPart(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4)      # kept on the CPU on purpose
        self.dec = nn.Linear(4, 2)
    def forward(self, x):
        h = self.enc(x)
        return self.dec(h.to(self.dec.bias.device))
net = TwoPart()
net.dec.to(dev)
"""


def test_a_part_kept_elsewhere_on_purpose_gets_its_inputs():
    # the model carries its activations between its parts' devices itself: the input
    # given to the CPU part follows it, the parts stay where they were put
    nb, d = _session(_SPLIT + "x = torch.randn(3, 4, device=dev)\n", "y = net(x)\n")
    assert d.target == "cpu"
    assert d.culprits[0].name == "x"
    assert not any("net" in c.name for c in d.culprits)
    _first_fix_runs(nb, d, "y = net(x)\n")
    assert nb.ns["y"].device.type == "openreg"


def test_moving_to_an_inputs_device_is_no_split():
    # `.to(x.device)` reads the input, not a part: a layer left behind is still moved
    setup = """
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(4, 4)
            self.scale = torch.ones(4)
        def forward(self, x):
            return self.head(self.body(x) * self.scale.to(x.device))
    net = Net().to(dev)
    net.head = nn.Linear(4, 2)          # added after the move
    x = torch.randn(3, 4, device=dev)
    """
    nb, d = _session(setup, "y = net(x)\n")
    assert d.target == "openreg:0"
    assert d.culprits[0].name == "net.head"
    _first_fix_runs(nb, d, "y = net(x)\n")


def test_an_object_with_its_own_to_is_named_for_what_it_holds_inside():
    # a tracker of the user's with a .to() of its own keeps running sums in a dict:
    # the user moves `stats`, not `stats.sums['loss']`
    setup = """
    class RunningStats:
        def __init__(self):
            self.sums = {'loss': torch.zeros(()), 'acc': torch.zeros(3)}
        def to(self, device):
            self.sums = {k: v.to(device) for k, v in self.sums.items()}
            return self
        def add(self, acc):
            self.sums['acc'] += acc
    stats = RunningStats()
    acc = torch.ones(3, device=dev)
    """
    cell = "stats.add(acc)\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "stats"
    assert "its own .to() moves it" in d.culprits[0].why
    _first_fix_runs(nb, d, cell)


def test_optimizer_state_is_named_for_the_tensor_the_step_met():
    """Not the first key of the state: RMSprop's ``square_avg``, which its step reads
    first, though a reload put ``momentum_buffer`` before it; of a parameter held in a
    dict of models. The fix still moves the whole state."""
    setup = """
        nets = {'student': nn.Linear(3, 2), 'teacher': nn.Linear(3, 2)}
        rms = torch.optim.RMSprop(nets['student'].parameters(), momentum=0.9, foreach=False)
        nets['student'](torch.randn(4, 3)).sum().backward()
        rms.step()
        torch.__future__.set_swap_module_params_on_conversion(True)
        nets['student'].to(dev)
        torch.__future__.set_swap_module_params_on_conversion(False)
        for p in nets['student'].parameters():
            p.grad = torch.ones_like(p)
            rms.state[p] = dict(reversed(list(rms.state[p].items())))  # another key order
        """
    nb, d = _session(setup, "rms.step()\n")
    assert d.culprits[0].name == "rms.state[nets['student'].weight]['square_avg']", str(d)
    assert d.target == "openreg:0"
    _first_fix_runs(nb, d, "rms.step()\n", setup)
    assert {
        v.device.type for s in nb.ns["rms"].state.values() for k, v in s.items() if k != "step"
    } == {"openreg"}


def test_a_fix_that_remakes_one_tensor_does_not_outrank_the_move_of_all():
    """A scoring module never moved and its targets made in an earlier cell: remaking
    the targets alone leaves the module's parameter, which its ``forward`` reads (the
    check sees a moved module's parameters moved), so the move of both ranks first."""
    setup = """
        class Margin(nn.Module):
            def __init__(self):
                super().__init__()
                self.centers = nn.Parameter(torch.zeros(4, 3))

            def forward(self, feats, targets):
                gap = feats - self.centers.index_select(0, targets)
                return gap.pow(2).sum()

        net = nn.Linear(5, 3).to(dev)
        scorer = Margin()
        inp = torch.randn(2, 5, device=dev)
        targets = torch.tensor([1, 3])
        """
    cell = "total = scorer(net(inp), targets)\n"
    nb, d = _session(setup, cell)
    assert {c.name for c in d.culprits} >= {"scorer", "targets"}, str(d)
    assert d.fixes[0].scope == "namespace" and "scorer.to(" in d.fixes[0].code, str(d)
    _first_fix_runs(nb, d, cell, setup)


def test_a_generator_a_method_passes_is_named_and_made_again():
    """A generator kept as a module's attribute and passed by its ``forward`` (not a
    cell's ``normal_(generator=gen)``): named from the model, made again from its seed,
    never "moved" (a generator has no ``.to()``)."""
    setup = """
        class Jitter(nn.Module):
            def __init__(self):
                super().__init__()
                self.rng = torch.Generator()
                self.rng.manual_seed(7)

            def forward(self, h):
                return h + 0.1 * torch.randn(h.shape, generator=self.rng, device=h.device)

        jit = Jitter().to(dev)
        h = torch.ones(2, 3, device=dev)
        """
    _, d = _session(setup, "out = jit(h)\n")
    assert d.culprits[0].name == "jit.rng" and d.culprits[0].kind == "generator", str(d)
    assert d.target == "openreg:0"
    fix = d.fixes[0]
    assert fix.code == "jit.rng = torch.Generator(device=dev).manual_seed(jit.rng.initial_seed())"
    assert [s.action for s in fix.steps] == ["remake_generator"]
    assert not any(".to(" in f.code and "rng" in f.code for f in d.fixes)
    # (openreg has no generators: tests/test_gpu.py applies it on CUDA)


def test_remaking_a_generator_keeps_its_seed_and_puts_it_back_on_failure():
    import torch

    from ipydevice.model import Fix, Step

    old = torch.Generator().manual_seed(11)
    ns = {"g": old, "holder": {"rng": torch.Generator().manual_seed(3)}}
    fix = Fix(
        "Make g again", "", "namespace", steps=(Step("remake_generator", (("name", "g"),), "cpu"),)
    )
    assert fix.apply(ns).ok
    assert ns["g"] is not old and ns["g"].initial_seed() == 11
    keep = ns["holder"]["rng"]
    bad = Fix(
        "two",
        "",
        "namespace",
        steps=(
            Step("remake_generator", (("name", "holder"), ("item", "rng")), "cpu"),
            Step("remake_generator", (("name", "holder"), ("item", "missing")), "cpu"),
        ),
    )
    assert not bad.apply(ns).ok
    assert ns["holder"]["rng"] is keep  # put back as it was


def test_a_hooks_free_variable_is_named_as_the_hook_reads_it_and_made_where_it_is_made():
    """A forward pre-hook made by a factory function closes over a CPU tensor: named
    ``offset in shift`` (not its cell's path), and the fix gives ``device=`` where the
    factory makes it; no fix assigns it inside the hook, which would make it a local
    of the hook (an UnboundLocalError)."""
    setup = """
        def make_shift(n):
            offset = torch.linspace(0, 1, n)
            def shift(module, args):
                return (args[0] - offset,)
            return shift

        enc = nn.Linear(4, 4).to(dev)
        enc.register_forward_pre_hook(make_shift(4))
        xs = torch.randn(3, 4, device=dev)
        """
    cell = "ys = enc(xs)\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "offset in shift", str(d)
    assert d.fixes[0].scope == "source" and "torch.linspace(0, 1, n, device=" in d.fixes[0].code
    assert not any(f.code.lstrip().startswith("offset = offset.to(") for f in d.fixes)
    _first_fix_runs(nb, d, cell, setup)


def test_a_layer_swapped_into_a_moved_model_is_named_as_one_module():
    """Not a ModuleDict's new head: a Sequential's layer replaced after ``.to()``, its
    weight and bias named together as ``trunk[2]``, and moved as a module."""
    setup = """
        trunk = nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 2)).to(dev)
        trunk[2] = nn.Linear(6, 2)          # a fresh layer, made on the CPU
        batch = torch.randn(5, 3, device=dev)
        """
    cell = "pred = trunk(batch)\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "trunk[2]" and d.culprits[0].kind == "module", str(d)
    assert len(d.culprits) == 1
    _first_fix_runs(nb, d, cell, setup)


def test_a_part_the_users_code_put_on_the_cpu_gets_its_inputs():
    """``.cpu()`` of a model's part in a cell of its own (not ``.to('cpu')`` of a
    top-level model): the part that failed stays where the user put it, and the input
    given to it goes there; without that statement the part is what moves."""
    setup = """
        class Pipe(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(6, 6)
                self.tail = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 2))

        pipe = Pipe().to(dev)
        """
    rest = "feats = pipe.stem(torch.randn(3, 6, device=dev))\n"
    cell = "scores = pipe.tail(feats)\n"

    def diagnosed(placing: str) -> ipydevice.Diagnosis:
        nb = Notebook()
        for source in (PRELUDE + textwrap.dedent(setup), placing, rest):
            nb.run(source)
        return ipydevice.diagnose(nb.fails(cell), namespace=nb.ns)

    # (first: the notebook's history holds no placing statement yet)
    moved = diagnosed("pipe.tail = pipe.tail.float().cpu()\n")  # no statement of its own
    assert moved.target == "openreg:0", str(moved)
    d = diagnosed("pipe.tail.cpu()\n")
    assert d.culprits[0].name == "feats" and d.target == "cpu", str(d)
    assert "pipe.tail.cpu()" in d.target_reason
    assert d.fixes[0].code == "feats = feats.to('cpu')"


@pytest.mark.parametrize(
    ("loop", "mended"),
    [
        ("for name, t in inputs.items():\n    t.to(dev)\n", "inputs[name] = t.to(dev)"),
        ("for i in range(len(parts)):\n    parts[i].to(dev)\n", "parts[i] = parts[i].to(dev)"),
    ],
    ids=["items-of-a-dict", "indices-of-a-list"],
)
def test_a_loops_dropped_moves_are_mended_in_the_loop(loop: str, mended: str):
    """Not ``for k in batch: batch[k].to(device)``: the values of ``.items()`` and the
    items of a list by index; the loop's line keeps what ``.to()`` returns."""
    setup = """
        head = nn.Linear(4, 1).to(dev)
        inputs = {'a': torch.randn(2, 4), 'b': torch.randn(2, 4)}
        parts = [torch.randn(2, 4), torch.randn(2, 4)]
        """
    first, second = ("inputs['a']", "inputs['b']") if "inputs" in loop else ("parts[0]", "parts[1]")
    cell = loop + f"y = head({first}) + head({second})\n"
    nb, d = _session(setup, cell)
    assert d.fixes[0].scope == "cell" and mended in d.fixes[0].code, str(d)
    assert ".to(dev).to(dev)" not in d.fixes[0].code
    _first_fix_runs(nb, d, cell, setup)


def test_a_dict_models_part_placed_by_keyword_keeps_its_place():
    """Not ``.cpu()`` of an attribute: ``.to(device='cpu')`` of a ``ModuleDict``'s item,
    and the layer that failed is a torch layer called by its key (not a scan entry of
    its own): the input goes to the part, the model stays."""
    nb = Notebook()
    nb.run(
        PRELUDE + "m = nn.ModuleDict({'enc': nn.Linear(3, 3), 'dec': nn.Linear(3, 2)}).to(dev)\n"
    )
    nb.run("m['dec'].to(device='cpu')\n")
    nb.run("h = m['enc'](torch.randn(2, 3, device=dev))\n")
    cell = "o = m['dec'](h)\n"
    d = ipydevice.diagnose(nb.fails(cell), namespace=nb.ns)
    assert d.culprits[0].name == "h" and d.target == "cpu", str(d)
    assert "m['dec'].to(device='cpu')" in d.target_reason
    _first_fix_runs(nb, d, cell)


def test_a_functions_loop_over_a_temporary_list_is_mended_where_it_is_defined():
    """The dropped ``xs[j].to(dev)`` is in a function an earlier cell defined, over a
    list the failing call builds (no name holds it): the function's line is mended,
    though torch's frames run code of a user's module file inside the call."""
    setup = """
        w = nn.Linear(3, 1).to(dev)
        def go(xs):
            for j in range(len(xs)):
                xs[j].to(dev)
            return w(xs[0]) + w(xs[1])
        """
    cell = "y = go([torch.randn(2, 3), torch.randn(2, 3)])\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "xs[0] in go" and "drops its result" in d.culprits[0].why
    assert d.fixes[0].scope == "source" and d.fixes[0].code.strip() == "xs[j] = xs[j].to(dev)"
    _first_fix_runs(nb, d, cell, setup)


def test_a_remade_generators_other_holders_are_named_in_its_fix():
    """A sampler given the same generator keeps the old one (a sampler draws on the
    CPU): the fix's code says so, and its title that the numbers start over."""
    setup = """
        class Jitter(nn.Module):
            def __init__(self, rng):
                super().__init__()
                self.rng = rng

            def forward(self, h):
                return h + torch.randn(h.shape, generator=self.rng, device=h.device)

        jit = Jitter(torch.Generator().manual_seed(5)).to(dev)
        sampler = torch.utils.data.RandomSampler(range(8), generator=jit.rng)
        """
    _, d = _session(setup, "out = jit(torch.ones(2, device=dev))\n")
    fix = d.fixes[0]
    assert d.culprits[0].kind == "generator" and fix.steps[0].action == "remake_generator"
    assert "numbers start over" in fix.title, fix
    # (named by the first holder the namespace walk meets; the other one is told)
    other = ({"jit.rng", "sampler.generator"} - {d.culprits[0].name}).pop()
    assert fix.code.splitlines()[1] == f"# `{other}` still holds the old generator", fix.code


def test_an_augmented_assignments_target_is_read_as_an_operand():
    """``running += ...`` reads ``running`` before it writes it: a CPU accumulator at a
    cell's top level is the culprit (not only the right-hand side's tensors)."""
    setup = """
        enc = nn.Linear(3, 4).to(dev)
        running = torch.zeros(4)
        """
    cell = "running += enc(torch.randn(2, 3, device=dev)).mean(0)\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "running" and d.target == "openreg:0", str(d)
    _first_fix_runs(nb, d, cell, setup)


def test_a_cells_loop_variable_is_named_by_what_the_loop_runs_over():
    """Not ``zip(grad_accum, ...)``: the values of a dict's ``.items()``, updated in
    place; the loop variable left bound (``s``) is one round's element, named
    ``stats['mean']``, and one fix moves every element."""
    setup = """
        enc = nn.Linear(3, 4).to(dev)
        stats = {'mean': torch.zeros(4), 'sq': torch.zeros(4)}
        """
    cell = """
        h = enc(torch.randn(2, 3, device=dev))
        for key, s in stats.items():
            s.add_(h.mean(0) if key == 'mean' else (h * h).mean(0))
        """
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "stats['mean']", str(d)
    _first_fix_runs(nb, d, cell, setup)


def test_a_loops_next_round_tells_where_an_indexed_accumulator_belongs():
    """A histogram on the CPU indexed by a model's predictions inside a ``while`` loop
    (not a ``for`` over a loader): the failing line is the loop's last, but its next
    round runs the model on the device again, so the histogram follows the
    predictions (not the predictions to the CPU)."""
    setup = """
        head = nn.Linear(3, 5).to(dev)
        hist = torch.zeros(5)
        """
    cell = """
        step = 0
        while step < 2:
            tok = head(torch.randn(4, 3, device=dev)).argmax(1)
            hist[tok] += 1
            step += 1
        """
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "hist" and d.target == "openreg:0", str(d)
    _first_fix_runs(nb, d, cell, setup)


def test_a_class_attribute_of_a_class_with_a_metaclass_is_read():
    """``Table.LUT`` where ``Table``'s metaclass is not ``type`` (as
    ``torch.autograd.Function``'s is not): read from the class dicts, named as written."""
    setup = """
        class Registry(type):
            pass

        class Table(metaclass=Registry):
            LUT = torch.linspace(0, 1, 4)

        def scale(x):
            return x * Table.LUT
        """
    cell = "y = scale(torch.ones(4, device=dev))\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "Table.LUT", str(d)
    _first_fix_runs(nb, d, cell, setup)


def test_a_frame_that_hides_itself_from_tracebacks_is_not_read():
    """``__tracebackhide__ = True`` (IPython's and pytest's convention): the frame is
    left out of the diagnosis, so the cell's own function is the innermost one."""
    from ipydevice.collect.frames import walk_frames

    nb = Notebook()
    nb.run(
        PRELUDE
        + textwrap.dedent(
            """
            def call_hidden(fn, *args):
                __tracebackhide__ = True
                return fn(*args)

            def mix(a, b):
                return call_hidden(torch.add, a, b)
            """
        )
    )
    exc = nb.fails("mix(torch.ones(2, device=dev), torch.ones(2))\n")
    labels = [v.label for v in walk_frames(exc.__traceback__, 50)]
    assert "mix" in labels and "call_hidden" not in labels, labels


def test_a_view_of_a_parameter_dicts_late_entry_is_named_by_the_entry():
    """Not a ``ParameterList`` read by a number: a ``ParameterDict`` entry added after
    ``.to()``, read by a variable key and viewed (``unsqueeze``) in ``forward``: named
    ``model.scales['fr']`` as its ``[]`` reads it, and the model is what moves."""
    setup = """
        class Scaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.scales = nn.ParameterDict({'en': nn.Parameter(torch.ones(4))})
                self.proj = nn.Linear(4, 4)

            def forward(self, x, lang):
                s = self.scales[lang].unsqueeze(0)
                return self.proj(x) * s

        model = Scaled().to(dev)
        model.scales['fr'] = nn.Parameter(torch.ones(4))
        """
    cell = "y = model(torch.randn(2, 4, device=dev), 'fr')\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "model.scales['fr']", str(d)
    _first_fix_runs(nb, d, cell, setup)


def test_a_layer_with_a_tensorless_submodule_added_after_to_is_one_module():
    """Not e3nn's traced graph: a task head holding its weight and an activation
    module, added to a ``ModuleDict`` after ``.to()``, its weight read by the model's
    own ``forward`` (no frame of the head runs): named ``net.heads['b']``."""
    setup = """
        import torch.nn.functional as F

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(2, 4))
                self.act = nn.GELU()

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.heads = nn.ModuleDict({'a': Head()})

            def forward(self, x, task):
                return self.heads[task].act(F.linear(self.body(x), self.heads[task].w))

        net = Net().to(dev)
        net.heads['b'] = Head()
        """
    cell = "y = net(torch.randn(3, 4, device=dev), 'b')\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "net.heads['b']" and d.culprits[0].kind == "module", str(d)
    _first_fix_runs(nb, d, cell, setup)


def test_a_loss_in_a_models_plain_list_is_named_as_a_module_and_moved_there():
    """Not a generator expression over ``zip``: weighted NLL losses a model keeps in a
    plain list, called by index in a loop, the message naming their ``weight``:
    named ``model.losses[0]`` (the module, not its weight), and the first fix
    reaches the list, which ``model.to()`` would leave on the CPU."""
    setup = """
        import torch.nn.functional as F

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 3)
                self.losses = [nn.NLLLoss(weight=torch.ones(3)) for _ in range(2)]

            def total(self, x, ys):
                logp = F.log_softmax(self.proj(x), -1)
                out = 0
                for i in range(len(self.losses)):
                    out = out + self.losses[i](logp, ys[i])
                return out

        model = Tagger().to(dev)
        """
    cell = "loss = model.total(torch.randn(2, 4, device=dev), torch.zeros(2, 2, dtype=torch.long, device=dev))\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "model.losses[0]", str(d)
    assert d.fixes[0].code != "model.to(dev)", d.fixes[0]
    _first_fix_runs(nb, d, cell, setup)


def test_a_dropped_move_in_the_function_that_called_the_failing_forward_is_mended():
    """Not a train step's timesteps: an evaluation helper drops ``mask.to(dev)``, and
    the model's own ``forward`` (another cell's code, further in) is where it fails:
    the helper's line is mended and the mask named as the helper reads it."""
    setup = """
        class Masked(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)

            def forward(self, x, mask):
                return self.proj(x).masked_fill(mask, 0.0)

        model = Masked().to(dev)

        def evaluate(x):
            mask = x.abs() > 5
            mask = mask.cpu()
            mask.to(dev)
            return model(x, mask)
        """
    cell = "out = evaluate(torch.randn(2, 4, device=dev))\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "mask in evaluate", str(d)
    assert d.fixes[0].code.strip() == "mask = mask.to(dev)", d.fixes[0]
    _first_fix_runs(nb, d, cell, setup)


def test_a_config_that_keeps_each_value_in_a_node_is_read_by_attribute():
    """Not OmegaConf: a config class of a user's framework that is a ``Mapping``,
    keeps sections and value nodes in a private ``_items`` dict and serves them as
    attributes: the tensor in a node is named ``opts.data.mean`` as the user reads
    it (not ``opts['data']``, not the section as a computing object), and moved there."""
    setup = """
        from collections.abc import Mapping

        class Node:
            def __init__(self, value, parent):
                self._value, self._parent, self._flags = value, parent, {}

        class Opts(Mapping):
            def __init__(self, parent=None, **values):
                object.__setattr__(self, '_parent', parent)
                object.__setattr__(self, '_items', {})
                for k, v in values.items():
                    self[k] = v

            def __setitem__(self, key, value):
                self._items[key] = value if isinstance(value, Opts) else Node(value, self)

            def __getitem__(self, key):
                item = self._items[key]
                return item if isinstance(item, Opts) else item._value

            def __getattr__(self, key):
                try:
                    return self[key]
                except KeyError:
                    raise AttributeError(key) from None

            def __setattr__(self, key, value):
                self[key] = value

            def __iter__(self):
                return iter(self._items)

            def __len__(self):
                return len(self._items)

        opts = Opts(data=Opts(mean=torch.zeros(3), scale=2.0))
        object.__setattr__(opts['data'], '_parent', opts)  # a section points back
        enc = nn.Linear(3, 3).to(dev)
        """
    cell = "z = enc(torch.randn(2, 3, device=dev) - opts.data.mean)\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "opts.data.mean", str(d)
    _first_fix_runs(nb, d, cell, setup)


def test_a_holders_own_to_that_drops_a_move_is_mended_in_the_method():
    """Not a predictor's prior: a lookup helper whose ``to(*args, **kwargs)`` keeps one
    tensor's move and drops the other's; calling it again cannot help, so the first
    fix mends the method's line where the class is defined."""
    setup = """
        class Lookup:
            def __init__(self):
                self.table = torch.arange(5.0)
                self.scale = torch.ones(1)

            def to(self, *args, **kwargs):
                self.scale = self.scale.to(*args, **kwargs)
                self.table.to(*args, **kwargs)
                return self

            def __call__(self, idx):
                return self.table[idx] * self.scale

        lookup = Lookup().to(dev)
        """
    cell = "v = lookup(torch.tensor([1, 2], device=dev))\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "lookup.table", str(d)
    fix = d.fixes[0]
    assert fix.scope == "source" and "Lookup.to" in fix.title, fix
    assert fix.code.strip() == "self.table = self.table.to(*args, **kwargs)", fix
    _first_fix_runs(nb, d, cell, setup)


def test_a_module_whose_own_table_is_indexed_follows_its_indices():
    # the indexed tensor is a buffer of a module never moved, read as `self.prior` in
    # the user's method, and the next line reads its parameter: the module follows
    setup = """
    class Table(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer('prior', torch.zeros(7))
            self.scale = nn.Parameter(torch.ones(7))

        def score(self, labels, feats):
            base = self.prior[labels[0]]
            return base + self.scale[labels[0]] * feats.sum()

    enc = nn.Linear(4, 4).to(dev)
    table = Table()
    labels = torch.randint(0, 7, (2, 5), device=dev)
    x = torch.randn(3, 4, device=dev)
    """
    cell = "feats = enc(x)\nout = table.score(labels, feats)\n"
    nb, d = _session(setup, cell)
    assert d.target == "openreg:0"
    assert [c.name for c in d.culprits][:1] == ["table"], str(d)
    assert d.headline.count("table") == 1, d.headline
    _first_fix_runs(nb, d, cell)
    assert nb.ns["out"].device.type == "openreg"


def test_a_distribution_around_another_is_named_as_the_one_the_user_holds():
    # a log-normal made as a transformed Normal: its tensors are the inner Normal's, and
    # the user holds (and would remake) the outer one
    setup = """
    from torch.distributions import Normal, TransformedDistribution
    from torch.distributions.transforms import ExpTransform
    noise = TransformedDistribution(Normal(torch.zeros(3), torch.ones(3)), [ExpTransform()])
    z = torch.rand(5, 3, device=dev) + 0.5
    """
    cell = "logp = noise.log_prob(z).sum()\n"
    nb, d = _session(setup, cell)
    assert d.target == "openreg:0"
    assert [c.name for c in d.culprits][:1] == ["noise"], str(d)
    _first_fix_runs(nb, d, cell)
    assert nb.ns["logp"].device.type == "openreg"


def test_a_tensor_a_call_wants_on_the_cpu_is_not_the_one_moved():
    # `seq_len` must stay on the CPU (pack_padded_sequence, by keyword); the mask made
    # from it in the same function is what meets the device
    setup = """
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    rnn = nn.RNN(4, 6, batch_first=True).to(dev)

    def pooled(x, seq_len):
        packed = pack_padded_sequence(x, lengths=seq_len, batch_first=True, enforce_sorted=False)
        h, _ = pad_packed_sequence(rnn(packed)[0], batch_first=True, total_length=x.shape[1])
        valid = seq_len.unsqueeze(1) > torch.arange(x.shape[1])
        return (h * valid.unsqueeze(-1)).sum(1)

    x = torch.randn(3, 5, 4, device=dev)
    seq_len = torch.tensor([5, 3, 2])
    """
    cell = "feats = pooled(x, seq_len)\n"
    nb, d = _session(setup, cell)
    assert d.target == "openreg:0"
    assert [c.name for c in d.culprits] == ["valid in pooled"], str(d)
    nb = _first_fix_runs(nb, d, cell, setup)
    assert nb.ns["feats"].device.type == "openreg"


def test_a_distribution_made_of_another_kept_privately_is_read_and_named():
    # a Beta keeps its numbers in a Dirichlet under a private name, served by no
    # attribute of that name: read there, and the culprit is the Beta the user holds
    setup = """
    mix = torch.distributions.Beta(torch.tensor([0.4]), torch.tensor([0.4]))
    x = torch.randn(6, 10, device=dev)
    """
    cell = "w = mix.sample((x.shape[0],)) * x\n"
    nb, d = _session(setup, cell)
    assert d.target == "openreg:0"
    assert [c.name for c in d.culprits] == ["mix"], str(d)
    _first_fix_runs(nb, d, cell)
    assert nb.ns["w"].device.type == "openreg"


def test_a_placeholder_attribute_set_after_the_move_is_moved_first():
    # the class declares `self.keep = None`; the notebook sets the tensor after `.to()`:
    # registering a buffer would not move it, so moving it comes first
    setup = """
    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.keep = None

        def forward(self, x):
            return self.lin(x) * self.keep

    gate = Gate().to(dev)
    gate.keep = torch.ones(4)
    x = torch.randn(2, 4, device=dev)
    """
    cell = "y = gate(x)\n"
    nb, d = _session(setup, cell)
    assert [c.name for c in d.culprits][:1] == ["gate.keep"], str(d)
    assert "register_buffer" not in d.fixes[0].code, d.fixes[0].code
    assert any("register_buffer" in f.code for f in d.fixes[1:])
    nb = _first_fix_runs(nb, d, cell, setup)
    assert nb.ns["y"].device.type == "openreg"


_MINILIB = """
import copy


class Averager:
    def __init__(self, model):
        self.averaged = copy.deepcopy(model)

    def update(self, params):
        for s, p in zip(self.averaged.parameters(), params):
            s.detach().mul_(0.9).add_(p.detach(), alpha=0.1)


class Runner:
    def __init__(self, step):
        self.step, self._handlers = step, []

    def on_step(self, handler, *args):
        self._handlers.append((handler, args))

    def run(self, data):
        for item in data:
            self.step(item)
            for handler, args in self._handlers:
                handler(*args)
"""


def test_what_a_librarys_own_failing_line_met_is_named_from_the_namespace(tmp_path, monkeypatch):
    # a library's averaged copy of the model, made before `.to()` and updated by a
    # library's runner: the failing line is the library's own in-place update, which no
    # user line reads; the copy it met is named, not the batch the cell passed along
    lib = tmp_path / "site-packages"
    lib.mkdir()
    (lib / "minilib_avg.py").write_text(_MINILIB)
    monkeypatch.syspath_prepend(str(lib))
    setup = """
    from minilib_avg import Averager, Runner
    net = nn.Linear(4, 3)
    avg = Averager(net)
    net.to(dev)
    runner = Runner(lambda xb: net(xb.to(dev)))
    runner.on_step(avg.update, list(net.parameters()))
    batch = [torch.randn(2, 4), torch.randn(2, 4)]
    """
    cell = "runner.run(batch)\n"
    _nb, d = _session(setup, cell)
    assert d.target == "openreg:0", str(d)
    assert [c.name for c in d.culprits][:1] == ["avg.averaged"], str(d)


def test_a_local_made_from_a_global_the_function_reads_is_named_by_the_global():
    # `proto` is made in the function from the notebook's `bank`, which no failing
    # line reads and no scan met before: the global is what the user moves
    setup = """
    bank = torch.randn(5, 4)

    def centred(x):
        proto = bank.mean(0, keepdim=True)
        return x - proto

    x = torch.randn(3, 4, device=dev)
    """
    cell = "y = centred(x)\n"
    nb, d = _session(setup, cell)
    assert [c.name for c in d.culprits] == ["bank"], str(d)
    _first_fix_runs(nb, d, cell)
    assert nb.ns["y"].device.type == "openreg"


def test_a_saved_rng_state_is_never_a_culprit():
    # a layer keeps the CPU RNG state it restores with torch.set_rng_state: a plain
    # tensor attribute that must stay on the CPU, beside the one that is misplaced
    setup = """
    class Noisy(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.saved = torch.get_rng_state()
            self.scale = torch.ones(4)

        def forward(self, x):
            torch.set_rng_state(self.saved)
            return self.lin(x) * self.scale

    layer = Noisy().to(dev)
    x = torch.randn(2, 4, device=dev)
    """
    cell = "y = layer(x)\n"
    _nb, d = _session(setup, cell)
    names = [c.name for c in d.culprits]
    assert names[:1] == ["layer.scale"] and "layer.saved" not in names, str(d)
    assert all("saved" not in f.code for f in d.fixes), [f.code for f in d.fixes]


def test_a_distribution_kept_by_the_users_own_object_is_named_as_its_attribute():
    # the outer distribution is held by a class of the user's: the name stops there
    # (`holder.dist`), at the user's attribute, not at the user's object
    setup = """
    from torch.distributions import Independent, Normal

    class Prior:
        def __init__(self):
            self.dist = Independent(Normal(torch.zeros(3), torch.ones(3)), 1)

    holder = Prior()

    def loglik(z):
        return holder.dist.log_prob(z).sum()

    z = torch.randn(5, 3, device=dev)
    """
    cell = "ll = loglik(z)\n"
    nb, d = _session(setup, cell)
    assert [c.name for c in d.culprits][:1] == ["holder.dist"], str(d)
    _first_fix_runs(nb, d, cell)
    assert nb.ns["ll"].device.type == "openreg"


_SMOOTH = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class _Kernel(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.register_buffer('taps', torch.ones(k) / k)

    def forward(self, x):
        return x * self.taps


class Smooth(nn.Module):
    def __init__(self, k):
        super().__init__()
        self._kernel = _Kernel(k)

    def forward(self, x):
        return self._kernel(x)
"""


def test_a_wrapper_layer_in_a_models_plain_dict_is_named_as_the_wrapper_and_moved_there(
    tmp_path, monkeypatch
):
    """Not julius in a plain list: a library's layer that only wraps a private one
    (``Smooth`` around ``_kernel``), kept by the user's model in a plain dict,
    so ``model.to()`` never moves it: named as the layer the user made
    (``model.smoothers['fine']``), not its private part, and the first fix reaches it."""
    lib = tmp_path / "site-packages"
    lib.mkdir()
    (lib / "minilib_smooth.py").write_text(_SMOOTH)
    monkeypatch.syspath_prepend(str(lib))
    setup = """
        from minilib_smooth import Smooth

        class Denoiser(nn.Module):
            def __init__(self):
                super().__init__()
                self.smoothers = {'fine': Smooth(16)}
                self.out = nn.Linear(16, 16)

            def forward(self, x):
                return self.out(self.smoothers['fine'](x))

        model = Denoiser().to(dev)
        """
    cell = "y = model(torch.randn(2, 1, 16, device=dev))\nloss = y.pow(2).mean()\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "model.smoothers['fine']", str(d)
    assert d.fixes[0].code.strip() != "model.to(dev)", d.fixes[0]
    moves = next(f for f in d.fixes if f.scope == "namespace")
    assert "model.smoothers.values()" in moves.code, moves  # (a dict's loop is over its values)
    assert moves.apply(nb.ns).ok
    assert nb.error(cell) is None


def test_a_tensor_read_only_through_its_move_on_the_line_is_no_operand():
    """Not a recurrent state beside a chunk: a CPU batch read on the failing line only
    as ``feats[:, :4].to(dev)`` reaches the call moved; the operand the call met on
    the CPU is the offset beside it, and that is the culprit."""
    setup = """
        layer = nn.Linear(4, 3).to(dev)
        feats = torch.randn(5, 6)
        offset = torch.zeros(3)
        """
    cell = "out = layer(feats[:, :4].to(dev)) + offset\nscore = out.sum()\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "offset", str(d)
    assert "feats" not in [c.name for c in d.culprits], str(d)
    _first_fix_runs(nb, d, cell, setup)


def test_a_dataclass_records_other_fields_off_the_target_move_with_the_one_named():
    """Not a KV cache: a training record of the user's whose fields the cell reads one
    line after another, both made on the CPU: the first fix moves every tensor field off
    the target, as a dict batch's rebuild does, not only the one the failing line read."""
    setup = """
        from dataclasses import dataclass

        @dataclass
        class Pair:
            inputs: torch.Tensor
            labels: torch.Tensor
            note: str = ''

        net = nn.Linear(6, 3).to(dev)
        pair = Pair(torch.randn(4, 6), torch.tensor([0, 1, 2, 1]))
        """
    cell = "logits = net(pair.inputs)\nloss = nn.functional.cross_entropy(logits, pair.labels)\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "pair.inputs", str(d)
    assert "pair.labels = pair.labels.to(dev)" in d.fixes[0].code, d.fixes[0]
    _first_fix_runs(nb, d, cell, setup)


_MINILIB_FIT = """
import torch


def fit(net, batches, loss_fn, device, steps=2):
    total = 0.0
    for i, (xb, yb) in enumerate(batches):
        if i == steps:
            break
        loss = loss_fn(net(xb.to(device)), yb.to(device))
        total = total + loss.detach()  # (no backward: the stand-in's autograd may lack it)
    return total
"""


def test_a_loaders_dataset_is_never_the_tensor_to_move(tmp_path, monkeypatch):
    """Not a learning-rate finder: a library's training helper is handed the loader
    whole; the dataset's tensors it serves stay on the CPU by design (each batch is moved
    in the loop), so the culprit is the loss's weight the step met, and the first fix
    moves the loss, not the dataset."""
    lib = tmp_path / "site-packages"
    lib.mkdir()
    (lib / "minilib_fit.py").write_text(_MINILIB_FIT)
    monkeypatch.syspath_prepend(str(lib))
    setup = """
        from torch.utils.data import DataLoader, TensorDataset
        from minilib_fit import fit
        net = nn.Linear(5, 3).to(dev)
        batches = DataLoader(TensorDataset(torch.randn(12, 5), torch.randint(0, 3, (12,))), batch_size=4)
        loss_fn = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5]))
        """
    cell = "last = fit(net, batches, loss_fn, dev)\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name.startswith("loss_fn"), str(d)
    assert not any("dataset" in c.name for c in d.culprits), str(d)
    _first_fix_runs(nb, d, cell, setup)
