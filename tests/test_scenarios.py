"""Real device errors on a CPU-only machine, diagnosed and fixed end to end.

The ``meta`` device stands in for a GPU: PyTorch raises genuine device errors when
meta and CPU tensors meet. Each scenario asserts the culprit's name, the target
and the fixes, then proves every namespace, cell and source fix works: from a
fresh namespace the error is reproduced, the fix applied (namespace fixes through
``Fix.apply``, by reference; cell fixes by running the rewritten cell; source
fixes by running the setup with the proposed lines), and the failed cell re-run.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Callable

import pytest
import torch
from cells import Notebook

import ipydevice
from ipydevice.model import Diagnosis, Fix

IMPORTS = (
    "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader, TensorDataset\n"
)


def scenario(setup: str, failing: str) -> tuple[Notebook, Diagnosis]:
    nb = Notebook()
    nb.run(IMPORTS + textwrap.dedent(setup))
    exc = nb.fails(textwrap.dedent(failing))
    d = ipydevice.diagnose(exc, namespace=nb.ns)
    print(d)  # shown by pytest when a test fails
    return nb, d


def culprit_names(d: Diagnosis) -> list[str]:
    return [f.name for f in d.culprits]


def rerun(fix: Fix) -> Fix:
    """``fix`` without what it was made for: to apply it to a namespace made again
    by the same cells (Apply refuses other objects than those a fix was made for)."""
    return dataclasses.replace(fix, made_for=())


def scopes(d: Diagnosis) -> list[str]:
    return [f.scope for f in d.fixes]


def verify_fixes(
    setup: str, failing: str, d: Diagnosis, after: Callable[[], None] = lambda: None
) -> None:
    """Every namespace, cell and source fix makes the failed cell run."""
    assert d.fixes, "no fix proposed"
    for fix in d.fixes:
        try:
            verify_fix(setup, failing, fix)
        finally:
            after()


def verify_fix(setup: str, failing: str, fix: Fix) -> None:
    setup = IMPORTS + textwrap.dedent(setup)
    failing = textwrap.dedent(failing)
    nb = Notebook()
    nb.run(setup)
    nb.fails(failing)
    if fix.scope == "namespace":
        assert fix.can_apply, fix
        # made for the first run's objects: applied to the same cells run again
        result = rerun(fix).apply(nb.ns)
        assert result.ok, result.message
        nb.run(failing)
    elif fix.scope == "cell":
        compile(fix.code, "<fix>", "exec")
        nb.run(fix.code)
    elif fix.scope == "source":
        assert fix.original in setup, (fix.original, setup)
        fresh = Notebook()
        fresh.run(setup.replace(fix.original, fix.code, 1))
        fresh.run(failing)
    else:  # pragma: no cover
        raise AssertionError(fix.scope)


def test_model_on_device_input_not_moved():
    setup = """
    model = nn.Linear(4, 2).to('meta')
    x = torch.randn(3, 4)
    """
    failing = "out = model(x)\n"
    _, d = scenario(setup, failing)
    assert d.is_device_error and d.target == "meta"
    assert culprit_names(d) == ["x"]
    assert d.reference == "model"
    assert d.fixes[0].scope == "namespace" and d.fixes[0].code == "x = x.to('meta')"
    assert "cell" not in scopes(d)  # the cell is one line: the move, then re-run, says it
    assert "`x` is on cpu, `model` is on meta" in d.headline
    verify_fixes(setup, failing, d)


def test_dataloader_batch_not_moved_inside_the_loop():
    setup = """
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to('meta')
    loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,))), batch_size=4)
    """
    failing = """
    for xb, yb in loader:
        out = model(xb)
    """
    _, d = scenario(setup, failing)
    assert d.target == "meta"
    assert culprit_names(d) == ["xb"]
    # The loop rebinds xb on every run: moving it in the namespace would not last.
    assert scopes(d)[0] == "cell"
    # Every tensor the loop gives the cell moves, yb too: the whole cell runs.
    assert "    xb = xb.to('meta')\n    yb = yb.to('meta')\n    out = model(xb)" in d.fixes[0].code
    verify_fixes(setup, failing, d)


def test_dict_batch():
    setup = """
    model = nn.Linear(4, 2).to('meta')
    batch = {'features': torch.randn(3, 4), 'ids': torch.arange(3), 'source': 'train.csv'}
    """
    failing = "out = model(batch['features'])\n"
    _, d = scenario(setup, failing)
    assert culprit_names(d) == ["batch['features']"]
    first = d.fixes[0]
    assert first.scope == "namespace" and first.code.startswith("batch = {k: v.to('meta')")
    verify_fixes(setup, failing, d)


def test_bce_pos_weight_left_on_cpu():
    setup = """
    model = nn.Linear(4, 1).to('meta')
    criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.0]))
    x = torch.randn(8, 4, device='meta')
    y = torch.ones(8, 1, device='meta')
    logits = model(x)
    """
    failing = "loss = criterion(logits, y)\n"
    _, d = scenario(setup, failing)
    assert d.target == "meta"
    assert culprit_names(d) == ["criterion.pos_weight"]
    assert d.fixes[0].code == "criterion.to('meta')"
    verify_fixes(setup, failing, d)


def test_cross_entropy_weight_left_on_cpu():
    setup = """
    model = nn.Linear(4, 3).to('meta')
    criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5]))
    x = torch.randn(8, 4, device='meta')
    y = torch.zeros(8, dtype=torch.long, device='meta')
    """
    failing = "loss = criterion(model(x), y)\n"
    _, d = scenario(setup, failing)
    assert d.target == "meta"
    assert culprit_names(d) == ["criterion.weight"]
    assert d.fixes[0].code == "criterion.to('meta')"
    verify_fixes(setup, failing, d)


OPTIMIZER_SETUP = """
model = nn.Linear(4, 2).to('meta')
opt = torch.optim.Adam(model.parameters(), foreach=False)
model(torch.randn(3, 4, device='meta')).sum().backward()
opt.step()
# Moments restored from a CPU copy (say, a checkpoint loaded with map_location='cpu').
for state in opt.state.values():
    state['exp_avg'] = torch.zeros(state['exp_avg'].shape)
    state['exp_avg_sq'] = torch.zeros(state['exp_avg_sq'].shape)
"""


def test_optimizer_state_left_behind():
    failing = "opt.step()\n"
    _, d = scenario(OPTIMIZER_SETUP, failing)
    assert culprit_names(d)[0] == "opt.state[model.weight]['exp_avg']"
    culprit = d.culprits[0]
    assert culprit.kind == "optimizer state" and culprit.device == "cpu"
    assert d.target == "meta"
    assert 'k != "step"' in d.fixes[0].code
    verify_fixes(OPTIMIZER_SETUP, failing, d)
    # step counters stay CPU scalars, as Adam wants them
    nb2 = Notebook()
    nb2.run(IMPORTS + textwrap.dedent(OPTIMIZER_SETUP))
    assert rerun(d.fixes[0]).apply(nb2.ns).ok
    steps = [s["step"].device.type for s in nb2.ns["opt"].state.values()]
    assert steps == ["cpu", "cpu"]


SEED_004 = """
class CustomLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = torch.randn(10)
        self.weight = nn.Parameter(torch.randn(10))

    def forward(self, x):
        return x + self.cache + self.weight

model = CustomLayer().to('meta')
x = torch.randn(10, device='meta')
"""


def test_tensor_attribute_not_registered_as_buffer():
    failing = "out = model(x)\n"
    _, d = scenario(SEED_004, failing)
    assert d.target == "meta"
    assert culprit_names(d) == ["model.cache"]
    assert d.culprits[0].kind == "attribute"
    # The root fix ranks above the stopgap move, which is offered next.
    assert d.fixes[1].code == "model.cache = model.cache.to('meta')"
    source = [f for f in d.fixes if f.scope == "source"]
    assert source[0] is d.fixes[0]
    assert "self.register_buffer('cache', torch.randn(10), persistent=False)" in source[0].code
    # a cell named the IPython way says its number: ``In [1], line 8``; a file ``name:8``
    where = source[0].location
    assert source[0].lineno > 0 and where.endswith(
        (f":{source[0].lineno}", f"line {source[0].lineno}")
    )
    assert any(c.rule == "unregistered_tensor" for c in d.causes)
    verify_fixes(SEED_004, failing, d)


PLAIN_LIST = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(4, 4) for _ in range(2)]
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)

model = Net().to('meta')
x = torch.randn(3, 4, device='meta')
"""


def test_layers_in_a_plain_list():
    failing = "out = model(x)\n"
    _, d = scenario(PLAIN_LIST, failing)
    assert d.target == "meta"
    assert culprit_names(d)[0] == "model.layers[0]"
    # The root fix (nn.ModuleList) first, then the move that works now.
    assert d.fixes[1].code == "for m in model.layers:\n    m.to('meta')"
    source = [f for f in d.fixes if f.scope == "source"]
    assert source[0] is d.fixes[0]
    assert "nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])" in source[0].code
    assert any(c.rule == "plain_list" for c in d.causes)
    verify_fixes(PLAIN_LIST, failing, d)


HEAD_AFTER_TO = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(torch.relu(self.body(x)))

model = Net().to('meta')
model.fc = nn.Linear(8, 3)
x = torch.randn(2, 4, device='meta')
"""


def test_head_added_after_to():
    failing = "out = model(x)\n"
    _, d = scenario(HEAD_AFTER_TO, failing)
    assert d.target == "meta"
    assert culprit_names(d) == ["model.fc"]
    assert d.culprits[0].kind == "module"
    assert d.fixes[0].code == "model.to('meta')"
    verify_fixes(HEAD_AFTER_TO, failing, d)


FACTORY_IN_FORWARD = """
class PosEnc(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        pos = torch.arange(x.shape[-1])
        return self.proj(x) + pos

model = PosEnc().to('meta')
x = torch.randn(2, 4, device='meta')
"""


def test_factory_call_inside_forward_without_device():
    failing = "out = model(x)\n"
    _, d = scenario(FACTORY_IN_FORWARD, failing)
    assert d.target == "meta"
    assert culprit_names(d) == ["pos in PosEnc.forward"]
    assert scopes(d) == ["source"]
    fix = d.fixes[0]
    assert fix.code.strip() == "pos = torch.arange(x.shape[-1], device=x.device)"
    verify_fixes(FACTORY_IN_FORWARD, failing, d)


MASK_MADE_BY_THE_CALLER = """
class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x, mask):
        scores = self.proj(x) @ x.transpose(-2, -1)
        return scores + mask

class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()

    def forward(self, x):
        t = x.shape[-2]
        causal = torch.full((t, t), float('-inf')).triu(1)
        return self.attn(x, causal)

model = Decoder().to('meta')
x = torch.randn(2, 3, 4, device='meta')
"""


def test_an_argument_is_fixed_where_its_caller_makes_it():
    """``mask`` of ``Attention.forward`` is an argument: the fix goes to the line
    of the caller that made it (under another name), at the head of the chain."""
    failing = "out = model(x)\n"
    _, d = scenario(MASK_MADE_BY_THE_CALLER, failing)
    assert d.target == "meta"
    assert culprit_names(d) == ["mask in Attention.forward"]
    fix = next(f for f in d.fixes if f.scope == "source")
    assert fix.title == "Create causal on the right device in Decoder.forward"
    assert fix.code.strip() == (
        "causal = torch.full((t, t), float('-inf'), device=x.device).triu(1)"
    )
    verify_fixes(MASK_MADE_BY_THE_CALLER, failing, d)


def test_lstm_hidden_state():
    setup = """
    lstm = nn.LSTM(4, 8, batch_first=True).to('meta')
    x = torch.randn(2, 5, 4, device='meta')
    h0 = torch.zeros(1, 2, 8)
    c0 = torch.zeros(1, 2, 8)
    """
    failing = "out, (h, c) = lstm(x, (h0, c0))\n"
    _, d = scenario(setup, failing)
    assert d.family == "rnn_mismatch"
    assert d.target == "meta"
    assert sorted(culprit_names(d)) == ["c0", "h0"]
    verify_fixes(setup, failing, d)


ATTENTION = """
class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qk = nn.Linear(8, 8)

    def forward(self, x, mask):
        scores = self.qk(x) @ x.transpose(-1, -2)
        return scores.masked_fill(mask, float('-inf')).softmax(-1)

model = Attention().to('meta')
x = torch.randn(2, 5, 8, device='meta')
mask = torch.ones(5, 5, dtype=torch.bool).triu(1)
"""


def test_mask():
    failing = "out = model(x, mask)\n"
    _, d = scenario(ATTENTION, failing)
    assert d.target == "meta"
    assert culprit_names(d) == ["mask"]
    verify_fixes(ATTENTION, failing, d)


def test_zero_dim_scalar_is_not_blamed():
    setup = """
    model = nn.Linear(4, 2).to('meta')
    x = torch.randn(3, 4, device='meta')
    scale = torch.tensor(0.5)
    offset = torch.ones(2)
    """
    failing = "out = model(x) * scale + offset\n"
    _, d = scenario(setup, failing)
    assert culprit_names(d) == ["offset"]
    assert "scale" in [r.name for r in d.records]
    verify_fixes(setup, failing, d)


HELPER = """
features = [torch.randn(4) for _ in range(3)]

def build_batch(rows):
    stacked = torch.stack([features[i] for i in rows])
    return stacked * 2

def predict(model, rows):
    batch = build_batch(rows)
    return model(batch)

model = nn.Linear(4, 2).to('meta')
"""


def test_culprit_only_in_a_helper_functions_locals():
    failing = "out = predict(model, [0, 2])\n"
    _, d = scenario(HELPER, failing)
    assert d.target == "meta"
    assert culprit_names(d)[0] == "batch in predict"
    fix = next(f for f in d.fixes if f.scope == "source")
    assert fix.code.strip() == "batch = build_batch(rows).to('meta')"
    verify_fixes(HELPER, failing, d)


def test_meta_model_moved_with_to():
    setup = """
    with torch.device('meta'):
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    """
    failing = "model.to('cpu')\n"
    _, d = scenario(setup, failing)
    assert d.family == "meta_device"
    assert d.target == "cpu"
    assert culprit_names(d)[0].startswith("model")
    assert "to_empty(device='cpu')" in d.fixes[0].code
    verify_fixes(setup, failing, d)


def test_torch_load_of_a_gpu_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    with monkeypatch.context() as patch:
        patch.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
        torch.save({"w": torch.randn(2, 2)}, path)
    setup = f"path = {str(path)!r}\n"
    failing = "state = torch.load(path)\n"
    _, d = scenario(setup, failing)
    assert d.family == "load_location"
    assert d.target == "cpu"
    assert d.fixes[0].scope == "cell"
    assert d.fixes[0].code == "state = torch.load(path, map_location='cpu')\n"
    verify_fixes(setup, failing, d)


FAKE_SETUP = """
from torch._subclasses.fake_tensor import FakeTensorMode
mode = FakeTensorMode(allow_non_fake_inputs=True)
mode.__enter__()
torch.set_grad_enabled(False)
with torch.device('meta'):
    model = nn.Linear(4, 2)
for name, p in list(model.named_parameters()):
    setattr(model, name, nn.Parameter(torch.empty(p.shape, device={model_device!r}), requires_grad=False))
x = torch.empty(3, 4, device={input_device!r})
"""


@pytest.mark.parametrize(
    ("model_device", "input_device"),
    [("cuda:0", "cpu"), ("cuda:0", "cuda:1")],
    ids=["cuda0-vs-cpu", "cuda0-vs-cuda1"],
)
def test_fake_cuda_devices(model_device, input_device):
    setup = FAKE_SETUP.format(model_device=model_device, input_device=input_device)
    failing = "out = model(x)\n"
    try:
        _, d = scenario(setup, failing)
    finally:
        mode_exit()
    assert d.family == "op_mismatch"
    assert set(d.devices) == {model_device, input_device}
    assert d.target == model_device
    assert culprit_names(d) == ["x"]
    assert d.fixes[0].code == f"x = x.to({model_device!r})"
    assert d.culprits[0].device == input_device
    verify_fixes(setup, failing, d, after=mode_exit)


def mode_exit() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    for mode in reversed(_get_current_dispatch_mode_stack()):
        if isinstance(mode, FakeTensorMode):
            mode.__exit__(None, None, None)
    torch.set_grad_enabled(True)


DISPATCHED = """
model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
model[0].to('meta')
model.hf_device_map = {'0': 'meta', '1': 'cpu'}  # as accelerate's dispatch records it
ids = torch.randn(3, 4)
"""


def test_dispatched_model_takes_its_inputs_on_its_first_device():
    failing = "out = model[0](ids)\n"
    _, d = scenario(DISPATCHED, failing)
    assert d.target == "meta"
    assert culprit_names(d) == ["ids"]
    assert all("model.to(" not in f.code and "model[0].to(" not in f.code for f in d.fixes)
    verify_fixes(DISPATCHED, failing, d)
