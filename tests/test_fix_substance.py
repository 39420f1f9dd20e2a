"""Fixes right in substance: Apply makes the cell run, and what it leaves is what the
user meant (immutable holders rebuilt, a meta model loaded rather than left empty)."""

from __future__ import annotations

import textwrap

import torch
from cells import Notebook

import ipydevice


def _applied(setup: str, cell: str) -> tuple[Notebook, ipydevice.Diagnosis]:
    nb = Notebook()
    nb.run(textwrap.dedent(setup))
    d = ipydevice.diagnose(nb.fails(cell), namespace=nb.ns)
    assert d.fixes, str(d)
    result = d.fixes[0].apply(nb.ns)
    assert result.ok, result.message
    assert nb.error(cell) is None
    return nb, d


MODEL = """
import collections, dataclasses
import torch, torch.nn as nn
model = nn.Linear(4, 2).to('meta')
"""


def test_a_frozen_dataclass_is_rebuilt_not_assigned():
    nb, d = _applied(
        MODEL
        + """
@dataclasses.dataclass(frozen=True)
class Batch:
    x: torch.Tensor
    y: torch.Tensor
batch = Batch(torch.randn(3, 4), torch.randn(3, 2))
""",
        "out = model(batch.x)\nloss = (out - batch.y).sum()\n",
    )
    assert (
        "dataclasses.replace(batch, x=batch.x.to('meta'), y=batch.y.to('meta'))" in d.fixes[0].code
    )
    assert nb.ns["batch"].x.device.type == "meta" and nb.ns["batch"].y.device.type == "meta"


def test_a_frozen_dataclass_inside_a_dict_is_stored_back():
    nb, _ = _applied(
        MODEL
        + """
@dataclasses.dataclass(frozen=True)
class Batch:
    x: torch.Tensor
data = {'train': Batch(torch.randn(3, 4))}
""",
        "out = model(data['train'].x)\n",
    )
    assert nb.ns["data"]["train"].x.device.type == "meta"


def test_a_tuple_inside_a_dict_is_rebuilt():
    nb, d = _applied(
        MODEL + "holder = {'pair': (torch.randn(3, 4), torch.randn(3, 2))}\n",
        "out = model(holder['pair'][0])\n",
    )
    assert d.fixes[0].code.startswith("holder['pair'] = tuple(")
    assert type(nb.ns["holder"]["pair"]) is tuple


def test_a_namedtuple_inside_a_dict_is_rebuilt_with_replace():
    nb, d = _applied(
        MODEL
        + "P = collections.namedtuple('P', 'x y')\n"
        + "holder = {'pair': P(torch.randn(3, 4), torch.randn(3, 2))}\n",
        "out = model(holder['pair'].x)\n",
    )
    assert "holder['pair']._replace(" in d.fixes[0].code
    assert type(nb.ns["holder"]["pair"]).__name__ == "P"


def test_a_meta_model_with_its_state_dict_at_hand_is_loaded():
    nb, d = _applied(
        MODEL + "sd = nn.Linear(4, 2).state_dict()\nx = torch.randn(3, 4)\n",
        "out = model(x)\n",
    )
    assert d.target == "cpu"
    assert "`model` is to be loaded from `sd`" in d.target_reason
    assert d.fixes[0].code.startswith("model.load_state_dict(sd, assign=True)")
    assert all("to_empty" not in f.code for f in d.fixes)
    assert torch.equal(nb.ns["model"].weight, nb.ns["sd"]["weight"])  # the real weights


def test_a_state_dict_after_a_long_session_is_still_found():
    # IPython adds _i<N> for every cell run: after a few thousand cells they are the
    # namespace's first names, and the state dict made since is past any bound on names.
    nb = Notebook()
    nb.run(textwrap.dedent(MODEL))
    nb.ns.update({f"_i{n}": "x = 1" for n in range(1, 3001)})
    nb.run("sd = nn.Linear(4, 2).state_dict()\nx = torch.randn(3, 4)\n")
    d = ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)
    assert d.fixes[0].code.startswith("model.load_state_dict(sd, assign=True)"), str(d)


def test_a_state_dict_of_another_model_is_not_used():
    nb = Notebook()
    nb.run(
        textwrap.dedent(
            MODEL
            + "sd = nn.Linear(8, 2).state_dict() | {'extra': torch.ones(1)}\nx = torch.randn(3, 4)\n"
        )
    )
    d = ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)
    assert all("load_state_dict(sd" not in f.code for f in d.fixes)


def test_a_loop_in_a_function_of_an_earlier_cell_gets_its_fix_there():
    # The loop is in a function an earlier cell defined; the failing cell only calls it.
    nb = Notebook()
    setup = textwrap.dedent(
        """
        import torch, torch.nn as nn
        dev = torch.device('meta')
        net = nn.Linear(4, 2).to(dev)

        def pairs():
            for _ in range(2):
                yield torch.randn(3, 4), torch.randn(3, 2)

        def fit(network, batches):
            seen = 0
            for step, (inputs, targets) in enumerate(batches()):
                pred = network(inputs)
                seen += pred.shape[0]
            return seen
        """
    )
    nb.run(setup)
    d = ipydevice.diagnose(nb.fails("n = fit(net, pairs)\n"), namespace=nb.ns)
    assert d.culprits[0].name == "inputs in fit"
    fix = next(f for f in d.fixes if f.scope == "source")
    assert "inputs.to(dev)" in fix.code and fix.original in setup
    nb.run(setup.replace(fix.original, fix.code, 1))
    assert nb.error("n = fit(net, pairs)\n") is None


def test_no_device_keyword_on_a_factory_whose_chain_moves_it_after():
    # ``device=`` on torch.tensor would be undone by the chained move: no such fix.
    nb = Notebook()
    nb.run("import torch\nfrom torch.nn.utils.rnn import pack_padded_sequence as pack\n")
    nb.run(
        "seq = torch.randn(2, 4, 3).to('meta')\n"
        "lens = torch.tensor([4, 2]).long().to('meta')\n"
        "mask = torch.ones(2, 4).to(torch.float64)\n"
    )
    d = ipydevice.diagnose(nb.fails("p = pack(seq, lens, batch_first=True)\n"), namespace=nb.ns)
    assert d.target == "cpu"
    assert [c.name for c in d.culprits][:1] == ["lens"]
    assert all("torch.tensor([4, 2], device=" not in f.code for f in d.fixes)
