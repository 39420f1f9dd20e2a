"""Apply never loses data: it acts on what the fix was made for or not at all, moves
everything or nothing, names the other owners it touches, and rebuilds holders
with everything else they had (issue 28, items 1-6)."""

from __future__ import annotations

import collections
import textwrap
from typing import Any

import pytest
import torch
import torch.nn as nn
from cells import Notebook

import ipydevice
from ipydevice.fixes.fingerprint import stamp
from ipydevice.model import Fix, Step

META_MODEL = "import collections, dataclasses\nimport torch, torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')\n"


def _diagnosed(setup: str, cell: str) -> tuple[Notebook, ipydevice.Diagnosis]:
    nb = Notebook()
    nb.run(textwrap.dedent(setup))
    d = ipydevice.diagnose(nb.fails(cell), namespace=nb.ns)
    assert d.fixes and d.fixes[0].can_apply, str(d)
    return nb, d


def _fix(namespace: dict[str, Any], *steps: Step) -> Fix:
    """A namespace fix of ``steps``, stamped as a diagnosis stamps its fixes."""
    return stamp([Fix("moves", "", "namespace", steps=steps)], namespace)[0]


def _to(name: str, target: str = "meta") -> Step:
    return Step("module_to", (("name", name),), target)


# -- 1. a stale panel ------------------------------------------------------------------


def test_a_rebound_name_is_refused_and_nothing_moves():
    nb, d = _diagnosed(META_MODEL + "x = torch.randn(3, 4)\n", "out = model(x)\n")
    nb.run("x = torch.randn(5, 4)\n")  # the user goes on; the panel stays
    result = d.fixes[0].apply(nb.ns)
    assert not result.ok and "x now holds another Tensor" in result.message
    assert "(5, 4)" in result.message and "nothing was moved" in result.message
    assert nb.ns["x"].device.type == "cpu" and nb.ns["x"].shape == (5, 4)


def test_a_rebound_entry_of_a_nested_dict_is_refused():
    # not a name: the tensor two keys down was replaced by one of the same shape
    nb, d = _diagnosed(
        META_MODEL + "data = {'train': {'x': torch.randn(3, 4)}}\n",
        "out = model(data['train']['x'])\n",
    )
    nb.run("data['train']['x'] = torch.randn(3, 4)\n")
    result = d.fixes[0].apply(nb.ns)
    assert not result.ok and "data['train']['x'] now holds another Tensor" in result.message
    assert nb.ns["data"]["train"]["x"].device.type == "cpu"


def test_a_rebound_tensor_inside_a_batch_dict_is_refused():
    # the fix moves the whole batch: each tensor in it is part of what it was made for
    nb, d = _diagnosed(
        META_MODEL + "batch = {'x': torch.randn(3, 4), 'y': torch.randn(3)}\n",
        "out = model(batch['x'])\n",
    )
    nb.run("batch['y'] = torch.zeros(3)\n")
    result = d.fixes[0].apply(nb.ns)
    assert not result.ok and "batch['y'] now holds another Tensor" in result.message
    assert nb.ns["batch"]["x"].device.type == "cpu"


def test_a_rebound_model_is_refused():
    ns: dict[str, Any] = {"model": nn.Linear(2, 2)}
    fix = _fix(ns, _to("model"))
    ns["model"] = nn.Linear(2, 2)  # same class, same shapes: still another model
    result = fix.apply(ns)
    assert not result.ok and "model now holds another Linear" in result.message
    assert ns["model"].weight.device.type == "cpu"


def test_a_tensor_changed_in_place_is_refused_and_the_same_one_is_applied():
    ns: dict[str, Any] = {"x": torch.randn(3)}
    fix = _fix(ns, Step("reassign", (("name", "x"),), "meta"))
    ns["x"].resize_(4)
    result = fix.apply(ns)
    assert not result.ok and "x has changed since this fix was made" in result.message
    ns["x"].resize_(3)
    assert fix.apply(ns).ok and ns["x"].device.type == "meta"
    again = fix.apply(ns)  # a second click: x holds the moved tensor now
    assert not again.ok and "x now holds another Tensor" in again.message


def test_the_widget_apply_refuses_a_rebound_name_too(nb):
    pytest.importorskip("anywidget")
    from ipydevice.render.widget import build_panel, click

    nb.run(META_MODEL + "x = torch.randn(3, 4)\n")
    panel = build_panel(
        ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns), lambda: nb.ns
    )
    nb.run("x = torch.ones(3, 4)\n")
    click(panel, "apply")
    assert not panel.status_ok and "x now holds another Tensor" in panel.status
    assert nb.ns["x"].device.type == "cpu"


def test_a_checkup_fix_is_refused_after_its_object_is_rebound():
    ns: dict[str, Any] = {"model": nn.Linear(2, 2), "opt": None}
    ns["opt"] = torch.optim.Adam(ns["model"].parameters())
    ns["model"](torch.randn(1, 2)).sum().backward()
    ns["opt"].step()
    for state in ns["opt"].state.values():
        state["exp_avg"] = state["exp_avg"].to("meta")
    result = ipydevice.check(namespace=ns)
    fix = next(f for f in result.fixes if f.can_apply)
    ns["opt"] = torch.optim.Adam(ns["model"].parameters())
    applied = fix.apply(ns)
    assert not applied.ok and "opt now holds another Adam" in applied.message


# -- 2. frozen dataclasses -------------------------------------------------------------

FROZEN = """
@dataclasses.dataclass(frozen=True{slots})
class Batch:
    x: torch.Tensor
    n: int = 1
    late: int = dataclasses.field(init=False, default=0)
    def __post_init__(self):
        object.__setattr__(self, 'n', self.n + 1)  # derived: 1 -> 2
batch = Batch(torch.randn(3, 4))
object.__setattr__(batch, 'late', 41)  # set after __init__
"""


@pytest.mark.parametrize("slots", ["", ", slots=True"])
def test_a_frozen_dataclass_is_rebuilt_without_running_its_init_again(slots):
    nb, d = _diagnosed(META_MODEL + FROZEN.format(slots=slots), "out = model(batch.x)\n")
    fix = d.fixes[0]
    assert "dataclasses.replace" not in fix.code and "copy.copy(batch)" in fix.code
    assert fix.apply(nb.ns).ok
    batch = nb.ns["batch"]
    assert (batch.n, batch.late, batch.x.device.type) == (2, 41, "meta")
    nb.run("out = model(batch.x)\n")


def test_the_copied_code_of_a_frozen_dataclass_keeps_its_fields_too():
    nb, d = _diagnosed(
        META_MODEL + FROZEN.format(slots="") + "holder = {'b': batch}\ndel batch\n",
        "out = model(holder['b'].x)\n",
    )
    assert "holder['b'] = copy.copy(holder['b'])" in d.fixes[0].code
    nb.run(d.fixes[0].code)  # what Copy puts on the clipboard, run as a cell
    b = nb.ns["holder"]["b"]
    assert (b.n, b.late, b.x.device.type) == (2, 41, "meta")


def test_a_frozen_dataclass_without_init_logic_keeps_dataclasses_replace():
    nb, d = _diagnosed(
        META_MODEL
        + "@dataclasses.dataclass(frozen=True)\nclass B:\n    x: torch.Tensor\n    k: int = 3\n"
        + "b = B(torch.randn(3, 4), 7)\n",
        "out = model(b.x)\n",
    )
    assert "dataclasses.replace(b, x=b.x.to('meta'))" in d.fixes[0].code
    assert d.fixes[0].apply(nb.ns).ok and nb.ns["b"].k == 7


# -- 3. dict and list subclasses, order, factory ---------------------------------------

HOLDERS = """
class Tagged(list):
    pass
class Named(dict):
    pass
ordered = collections.OrderedDict(a=torch.randn(3, 4), b=torch.randn(3, 4))
ordered.move_to_end('a')
counts = collections.defaultdict(list, x=torch.randn(3, 4))
tagged = Tagged([torch.randn(3, 4), 'label'])
tagged.tag = 'keep'
named = Named(x=torch.randn(3, 4))
named.source = 'train.csv'
"""


def _check_holders(ns: dict[str, Any]) -> None:
    assert list(ns["ordered"]) == ["b", "a"] and type(ns["ordered"]) is collections.OrderedDict
    assert ns["counts"].default_factory is list
    assert type(ns["tagged"]).__name__ == "Tagged" and ns["tagged"].tag == "keep"
    assert ns["tagged"][1] == "label"
    assert type(ns["named"]).__name__ == "Named" and ns["named"].source == "train.csv"
    for value in (ns["ordered"]["a"], ns["counts"]["x"], ns["tagged"][0], ns["named"]["x"]):
        assert value.device.type == "meta"


CELLS = [
    "out = model(ordered['a'])\n",
    "out = model(counts['x'])\n",
    "out = model(tagged[0])\n",
    "out = model(named['x'])\n",
]


def test_apply_keeps_type_attributes_order_and_factory():
    nb, _ = _diagnosed(META_MODEL + HOLDERS, CELLS[0])
    for cell in CELLS:
        d = ipydevice.diagnose(nb.fails(cell), namespace=nb.ns)
        assert d.fixes[0].apply(nb.ns).ok, d.fixes[0]
    _check_holders(nb.ns)


def test_the_copied_code_keeps_type_attributes_order_and_factory():
    nb, _ = _diagnosed(META_MODEL + HOLDERS, CELLS[0])
    for cell in CELLS:
        d = ipydevice.diagnose(nb.fails(cell), namespace=nb.ns)
        assert "type(" not in d.fixes[0].code  # an in-place update, not a new literal
        nb.run(d.fixes[0].code)
    _check_holders(nb.ns)


def test_a_tuple_subclass_is_rebuilt_as_itself_with_its_attributes():
    class Pair(tuple):
        def __new__(cls, items: Any, strict: bool) -> Any:  # not a tuple's signature
            return super().__new__(cls, items)

    pair = Pair([torch.randn(2), torch.randn(2)], strict=True)
    pair.origin = "loader"
    ns: dict[str, Any] = {"holder": {"pair": pair}}
    fix = _fix(ns, Step("reassign", (("name", "holder"), ("item", "pair"), ("item", 0)), "meta"))
    assert fix.apply(ns).ok
    rebuilt = ns["holder"]["pair"]
    assert type(rebuilt) is Pair and rebuilt.origin == "loader"
    assert rebuilt[0].device.type == "meta" and rebuilt[1].device.type == "cpu"


# -- 4. a layer shared with another model ---------------------------------------------


def test_a_shared_layer_is_named_in_the_code_and_the_result():
    nb, d = _diagnosed(
        """
        import torch, torch.nn as nn
        enc = nn.Linear(4, 4)
        model = nn.Sequential(enc, nn.Linear(4, 4).to('meta'), nn.Linear(4, 2).to('meta'))
        model2 = nn.Sequential(enc, nn.Linear(4, 3))
        x = torch.randn(3, 4, device='meta')
        """,
        "out = model(x)\n",
    )
    fix = d.fixes[0]
    # the other owners are looked for when Apply runs (a diagnosis' cost stays with
    # what the error is about): the result names them
    result = fix.apply(nb.ns)
    assert result.ok and "model2[0] moved too: model2 shares it with model" in result.message


def test_a_shared_module_dict_entry_and_a_tied_weight_are_named():
    enc, emb = nn.Linear(2, 2), nn.Embedding(5, 2)
    model = nn.ModuleDict({"enc": enc, "emb": emb})
    other = nn.Module()
    other.blocks = nn.ModuleDict({"enc": enc, "own": nn.Linear(2, 2)})
    tied = nn.Linear(2, 5)
    tied.weight = emb.weight  # a tied parameter, not a whole layer
    ns: dict[str, Any] = {"model": model, "other": other, "tied": tied, "alias": enc}
    result = _fix(ns, _to("model")).apply(ns)
    assert result.ok
    assert "other.blocks['enc'] moved too: other shares it with model" in result.message
    assert "tied.weight moved too: tied shares it with model" in result.message
    assert "alias" not in result.message  # a name of the moved layer itself is no other owner


def test_a_wrapper_holding_the_whole_model_is_not_an_other_owner():
    model = nn.Linear(2, 2)
    ns: dict[str, Any] = {"model": model, "wrapped": nn.Sequential(model)}
    result = _fix(ns, _to("model")).apply(ns)
    assert result.ok and result.message == "moved model to meta"


# -- 5. optimizers ----------------------------------------------------------------------


def _trained(optimizer: Any, model: nn.Module) -> Any:
    model(torch.randn(1, 2)).sum().backward()
    optimizer.step()
    return optimizer


def test_an_optimizer_whose_parameters_were_replaced_is_named():
    model = nn.Sequential(nn.Linear(2, 2))
    ns: dict[str, Any] = {
        "model": model,
        "opt": _trained(torch.optim.Adam(model.parameters()), model),
    }
    result = _fix(ns, _to("model")).apply(ns)  # cpu -> meta makes new Parameter objects
    assert result.ok
    assert "opt no longer holds model's parameters" in result.message
    assert "make it again over model.parameters()" in result.message


def test_an_optimizer_over_a_tensor_that_is_rebound_is_named():
    # not a model: a leaf tensor the optimizer updates, replaced by its moved copy
    w = torch.randn(3, requires_grad=True)
    ns: dict[str, Any] = {"w": w, "opt": torch.optim.Adam([w])}
    result = _fix(ns, Step("reassign", (("name", "w"),), "meta")).apply(ns)
    assert result.ok and "opt still holds the old w, not the moved one" in result.message


@pytest.fixture
def swapping() -> Any:
    """``Module.to`` keeps the Parameter objects (swapped in place), as a move
    between CUDA devices does with ``param.data``."""
    before = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    yield
    torch.__future__.set_swap_module_params_on_conversion(before)


def test_optimizer_state_moves_with_its_parameters(swapping):
    model = nn.Sequential(nn.Linear(2, 2))
    opt = _trained(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), model)
    ns: dict[str, Any] = {"model": model, "opt": opt}
    result = _fix(ns, _to("model")).apply(ns)
    assert result.ok and "moved 2 state tensors of opt" in result.message
    buffers = [s["momentum_buffer"] for s in opt.state.values()]
    assert all(b.device.type == "meta" for b in buffers)
    assert all(p.device.type == "meta" for g in opt.param_groups for p in g["params"])


# -- 6. all or nothing ------------------------------------------------------------------


class _Failing(nn.Linear):
    """A layer whose move fails (out of memory halfway through a model)."""

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")


class _Interrupted(nn.Linear):
    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        raise KeyboardInterrupt


def _layers(ns: dict[str, Any]) -> set[str]:
    model = ns["model"]
    return {t.device.type for t in [*model.parameters(), *model.buffers()]}


def test_a_move_that_fails_halfway_is_put_back_and_said():
    model = nn.Sequential(*[nn.Linear(2, 2) for _ in range(5)], _Failing(2, 2), nn.BatchNorm1d(2))
    weights = list(model.parameters())
    ns: dict[str, Any] = {"model": model}
    result = _fix(ns, _to("model")).apply(ns)
    assert not result.ok
    assert "could not move model: RuntimeError: CUDA out of memory" in result.message
    assert (
        "put back model[0], model[1], model[2], model[3], model[4] as they were" in result.message
    )
    assert "nothing was moved" in result.message
    assert _layers(ns) == {"cpu"}
    assert list(model.parameters()) == weights and all(
        a is b for a, b in zip(model.parameters(), weights, strict=True)
    )


def test_a_failing_later_step_puts_back_the_earlier_ones(swapping):
    # a tensor rebound, a model moved in place, an optimizer's state moved: then
    # the second model's move fails, and all three are put back
    model, broken = nn.Sequential(nn.Linear(2, 2)), nn.Sequential(nn.Linear(2, 2), _Failing(2, 2))
    opt = _trained(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), model)
    grads = [p.grad for p in model.parameters()]
    x = torch.randn(2)
    ns: dict[str, Any] = {"x": x, "model": model, "opt": opt, "broken": broken}
    fix = _fix(
        ns,
        Step("reassign", (("name", "x"),), "meta"),
        _to("model"),
        Step("optimizer_state", (("name", "opt"),), ""),
        _to("broken"),
    )
    result = fix.apply(ns)
    assert not result.ok and result.message.startswith("could not move broken: RuntimeError")
    put_back = result.message.split("put back", 1)[1]
    for name in ("broken[0]", "opt.state", "model[0]", "x"):
        assert name in put_back
    assert ns["x"] is x and _layers(ns) == {"cpu"}
    assert all(p.device.type == "cpu" for p in broken.parameters())
    assert all(
        p.grad is g and g.device.type == "cpu"
        for p, g in zip(model.parameters(), grads, strict=True)
    )
    assert all(s["momentum_buffer"].device.type == "cpu" for s in opt.state.values())


def test_ctrl_c_during_apply_puts_back_and_says_so():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2), _Interrupted(2, 2))
    ns: dict[str, Any] = {"model": model}
    result = _fix(ns, _to("model")).apply(ns)
    assert not result.ok and result.message.startswith("interrupted while moving model")
    assert "put back model[0], model[1] as they were" in result.message
    assert _layers(ns) == {"cpu"}


def test_ctrl_c_in_the_widget_leaves_a_status(nb):
    pytest.importorskip("anywidget")
    from ipydevice.render.widget import build_panel, click

    nb.run(META_MODEL + "x = torch.randn(3, 4)\n")
    d = ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)

    class Interrupting(dict):
        def __getitem__(self, key: str) -> Any:
            raise KeyboardInterrupt

    panel = build_panel(d, lambda: Interrupting(nb.ns))
    click(panel, "apply")
    assert (
        not panel.status_ok
        and "interrupted" in panel.status
        and "nothing was moved" in panel.status
    )
