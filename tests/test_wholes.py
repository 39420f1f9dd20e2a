"""A holder passed whole, wholly off the target, is the culprit (diagnosis/wholes.py);
an object whose own ``.to()`` returns nothing is moved in place (collect/walk.to_in_place).
Variations the corpus cases (a dict of fast weights, a list of EMA shadows, a fitted PCA)
do not literally match: other holders, calls and names, on the ``openreg`` stand-in."""

from __future__ import annotations

import pytest
from cells import Notebook
from test_roots_flow import PRELUDE, _session, openreg  # noqa: F401 (the stand-in, autouse)

SCALER = """
class Scaler:
    def fit(self, x):
        self.mean, self.std = x.mean(0), x.std(0)
        return self

    def to(self, device):
        self.mean = self.mean.to(device)
        self.std = self.std.to(device)

    def transform(self, x):
        return (x - self.mean) / self.std
"""


@pytest.fixture
def minilib(tmp_path, monkeypatch):
    """``Scaler`` as a library's class (a file under site-packages)."""
    lib = tmp_path / "site-packages"
    lib.mkdir()
    (lib / "minilib_scale.py").write_text("import torch\n" + SCALER)
    monkeypatch.syspath_prepend(str(lib))


def test_a_library_object_moved_in_place_by_its_own_to_is_named_and_kept(minilib):
    """A library's object the cell calls a method of, every tensor it holds on the
    CPU, is the culprit; its own ``.to()`` returns nothing, so the fix calls it and
    keeps the object (``x = x.to()`` would leave None under the name)."""
    setup = """
    from minilib_scale import Scaler
    scaler = Scaler().fit(torch.randn(50, 4))
    feats = torch.randn(8, 4, device=dev)
    """
    cell = "scaled = scaler.transform(feats)\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "scaler"
    assert d.fixes[0].code.strip() == "scaler.to(dev)"
    kept = nb.ns["scaler"]
    assert d.fixes[0].apply(nb.ns).ok
    assert nb.ns["scaler"] is kept
    assert str(kept.mean.device) == "openreg:0"
    assert nb.error(cell) is None


def test_a_users_own_class_keeps_its_attributes_names_and_moves_in_place():
    """The same class written in the notebook: its attributes are the user's, named as
    they wrote them (``norm.mean``); the fix is still the object's own in-place move."""
    setup = (
        SCALER + "norm = Scaler().fit(torch.randn(50, 4))\nfeats = torch.randn(8, 4, device=dev)\n"
    )
    cell = "scaled = norm.transform(feats)\n"
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "norm.mean"
    assert d.fixes[0].code.strip() == "norm.to(dev)"
    assert d.fixes[0].apply(nb.ns).ok
    assert nb.ns["norm"] is not None and nb.error(cell) is None


def test_an_in_place_move_is_put_back_when_a_later_step_fails():
    from ipydevice.fixes.transaction import Undo

    nb = Notebook()
    nb.run(PRELUDE + SCALER + "scaler = Scaler().fit(torch.randn(50, 4))\n")
    scaler = nb.ns["scaler"]
    mean = scaler.mean
    undo = Undo(nb.ns)
    undo.attributes("scaler", scaler)
    scaler.to("openreg")
    assert scaler.mean is not mean
    assert undo.rollback() == (["scaler"], [])
    assert scaler.mean is mean and str(scaler.std.device) == "cpu"


def test_a_tuple_passed_whole_to_a_library_call_is_named_as_the_tuple():
    cell = "torch._foreach_addcmul_(sq_avg, grads, grads, value=0.1)\n"
    setup = """
    net = nn.Linear(4, 2).to(dev)
    grads = [torch.ones_like(p) for p in net.parameters()]  # (no backward on the stand-in)
    sq_avg = tuple(torch.zeros(p.shape) for p in net.parameters())
    """
    nb, d = _session(setup, cell)
    assert d.culprits[0].name == "sq_avg"
    assert d.fixes[0].apply(nb.ns).ok
    assert type(nb.ns["sq_avg"]) is tuple
    assert nb.error(cell) is None


def test_a_dict_spread_into_a_call_keeps_its_items_names():
    """``attn(**qkv)`` hands the callee the items, one parameter each: the first culprit
    is the item the call met, not the dict."""
    setup = """
    attn = nn.MultiheadAttention(8, 2, batch_first=True).to(dev)
    qkv = {name: torch.randn(2, 5, 8) for name in ('query', 'key', 'value')}
    """
    _, d = _session(setup, "ctx, weights = attn(**qkv)\n")
    assert d.culprits[0].name.startswith("qkv[")


def test_a_holder_read_item_by_item_by_the_users_own_function_keeps_its_items():
    setup = """
    weights = {'w': torch.randn(4, 3), 'b': torch.zeros(3)}
    def score(x, weights):
        return x @ weights['w'] + weights['b']
    x = torch.randn(5, 4, device=dev)
    """
    _, d = _session(setup, "logits = score(x, weights)\n")
    assert d.culprits[0].name == "weights['w']"
