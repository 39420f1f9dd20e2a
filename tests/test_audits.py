"""Audits (ipydevice.check): every rule finds its problem, names it, fixes it,
points at the line to change, and stays silent on a correct setup."""

from __future__ import annotations

import types

import pytest
import torch
from cells import Notebook

import ipydevice

IMPORTS = "import torch\nimport torch.nn as nn\n"

NET = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.cache = torch.zeros(8)
        self.blocks = [nn.Linear(8, 8)]
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        pos = torch.arange(x.shape[-1])
        return self.head(self.body(x) + self.cache + pos)
"""


def notebook(source: str) -> Notebook:
    nb = Notebook()
    nb.run(IMPORTS + source)
    return nb


def by_rule(checkup, rule: str):
    found = [p for p in checkup.problems if p.rule == rule]
    assert found, f"no {rule} in {[p.rule for p in checkup.problems]}"
    return found[0]


def fix_for(checkup, needle: str):
    return next(f for f in checkup.fixes if needle in f.code)


def test_correct_setup_gives_no_problem():
    nb = notebook("""
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to('meta')
batch = {'x': torch.randn(3, 4, device='meta'), 'y': torch.zeros(3, dtype=torch.long, device='meta')}
opt = torch.optim.Adam(model.parameters())
model(batch['x']).sum().backward()
opt.step()
criterion = nn.CrossEntropyLoss(weight=torch.ones(2, device='meta'))
scale = torch.tensor(2.0)
""")
    assert all(s["step"].device.type == "cpu" for s in nb.ns["opt"].state.values())
    checkup = ipydevice.check(namespace=nb.ns)
    assert not checkup, str(checkup)
    assert "no device problems" in str(checkup)
    assert not ipydevice.check(
        nb.ns["model"], nb.ns["batch"], nb.ns["opt"], nb.ns["criterion"], namespace=nb.ns
    )


def test_split_module_head_added_after_to():
    source = NET.replace("        self.cache = torch.zeros(8)\n", "").replace(
        "        self.blocks = [nn.Linear(8, 8)]\n", ""
    )
    nb = notebook(
        source.replace(" + self.cache + pos", "")
        + "model = Net().to('meta')\nmodel.head = nn.Linear(8, 2)\n"
    )
    checkup = ipydevice.check(nb.ns["model"], namespace=nb.ns)
    problem = by_rule(checkup, "split_module")
    assert problem.name == "model" and "but model.head is not" in problem.why
    fix = fix_for(checkup, "model.to('meta')")
    assert fix.apply(nb.ns).ok
    assert not [
        p
        for p in ipydevice.check(nb.ns["model"], namespace=nb.ns).problems
        if p.rule == "split_module"
    ]


def test_unregistered_tensor_attribute():
    nb = notebook(NET + "model = Net().to('meta')\n")
    checkup = ipydevice.check(nb.ns["model"], namespace=nb.ns)
    problem = by_rule(checkup, "unregistered_tensor")
    assert problem.name == "model.cache" and problem.device == "cpu"
    source = fix_for(checkup, "register_buffer")
    # a cell named the IPython way says its number (``In [1], line 8``)
    assert source.scope == "source" and source.location.endswith(f"line {source.lineno}")
    assert source.code.strip() == "self.register_buffer('cache', torch.zeros(8), persistent=False)"
    assert fix_for(checkup, "model.cache = model.cache.to('meta')").apply(nb.ns).ok


def test_plain_list_of_layers():
    nb = notebook(NET + "model = Net()\n")
    checkup = ipydevice.check(nb.ns["model"], namespace=nb.ns)
    problem = by_rule(checkup, "plain_list")
    assert problem.name == "model.blocks" and problem.location
    assert (
        fix_for(checkup, "ModuleList").code.strip()
        == "self.blocks = nn.ModuleList([nn.Linear(8, 8)])"
    )


def test_factory_call_without_device_in_forward():
    nb = notebook(NET + "model = Net()\n")
    checkup = ipydevice.check(nb.ns["model"], namespace=nb.ns)
    problem = by_rule(checkup, "factory_without_device")
    assert problem.name == "Net.forward"
    fix = fix_for(checkup, "torch.arange")
    assert fix.code.strip() == "pos = torch.arange(x.shape[-1], device=x.device)"
    assert problem.location == fix.location


def test_dispatched_model_is_never_moved_and_inputs_go_to_its_first_device():
    nb = notebook("""
model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
model[1].to('meta')
model.hf_device_map = {'0': 'meta', '1': 'cpu'}
ids = torch.randn(3, 4)
good = torch.randn(3, 4, device='meta')
""")
    checkup = ipydevice.check(nb.ns["model"], nb.ns["ids"], namespace=nb.ns)
    assert [p.rule for p in checkup.problems] == [
        "stray_tensor"
    ]  # no split_module: dispatched on purpose
    assert checkup.problems[0].name == "ids" and checkup.problems[0].target == "meta"
    assert all(".to(" not in f.code or "model" not in f.code for f in checkup.fixes)
    assert not ipydevice.check(nb.ns["model"], nb.ns["good"], namespace=nb.ns)


def test_optimizer_state_away_from_its_parameters():
    nb = notebook("""
model = nn.Linear(4, 2).to('meta')
opt = torch.optim.Adam(model.parameters(), foreach=False)
model(torch.randn(3, 4, device='meta')).sum().backward()
opt.step()
for state in opt.state.values():
    state['exp_avg'] = torch.zeros(state['exp_avg'].shape)
""")
    checkup = ipydevice.check(nb.ns["opt"], namespace=nb.ns)
    problem = by_rule(checkup, "optimizer_state")
    assert problem.name == "opt.state" and problem.device == "cpu" and problem.target == "meta"
    assert "2 state tensors" in problem.why  # exp_avg only: step is exempt
    assert checkup.fixes[0].apply(nb.ns).ok
    assert not ipydevice.check(nb.ns["opt"], namespace=nb.ns)


def test_grad_scaler_for_another_device_type():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        scaler = torch.amp.GradScaler("cuda")  # warns and disables itself without CUDA
    nb = notebook("model = nn.Linear(4, 2)\n")
    nb.ns["scaler"] = scaler
    problem = by_rule(ipydevice.check(namespace=nb.ns), "scaler_device")
    assert problem.name == "scaler" and problem.device == "cuda"


def test_dataloader_generator_not_on_the_cpu():
    nb = notebook(
        "from torch.utils.data import DataLoader\nmodel = nn.Linear(4, 2)\nloader = DataLoader(list(range(8)), shuffle=True)\n"
    )
    nb.ns["loader"].generator = types.SimpleNamespace(device=torch.device("cuda", 0))
    problem = by_rule(ipydevice.check(namespace=nb.ns), "generator_device")
    assert problem.name == "loader" and problem.target == "cpu"


def test_dataparallel_module_not_on_device_ids_0():
    nb = notebook("model = nn.Linear(4, 2)\ndp = nn.DataParallel(model)\ndp.device_ids = [0]\n")
    problem = by_rule(ipydevice.check(nb.ns["dp"], namespace=nb.ns), "dataparallel")
    assert problem.name == "dp" and problem.target == "cuda:0" and problem.device == "cpu"


def test_ddp_rank_that_does_not_use_its_own_gpu(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    nb = notebook("""
class DistributedDataParallel(nn.Module):  # a stand-in with DDP's attributes (no GPU here)
    def __init__(self, module, device_ids):
        super().__init__()
        self.module = module
        self.device_ids = device_ids

ddp = DistributedDataParallel(nn.Linear(4, 2), device_ids=[0])
""")
    problem = by_rule(ipydevice.check(nb.ns["ddp"], namespace=nb.ns), "ddp_rank")
    assert problem.target == "cuda:1" and "local rank 1" in problem.why


def test_ddp_over_gloo_on_one_device_is_fine(tmp_path):
    import torch.distributed as dist

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        nb = notebook("model = nn.Linear(4, 2)\n")
        nb.ns["ddp"] = torch.nn.parallel.DistributedDataParallel(nb.ns["model"])
        assert not ipydevice.check(nb.ns["ddp"], namespace=nb.ns)
    finally:
        dist.destroy_process_group()


def test_batch_and_criterion_on_another_device_than_the_model():
    nb = notebook("""
model = nn.Linear(4, 3).to('meta')
batch = (torch.randn(3, 4), torch.zeros(3, dtype=torch.long))
criterion = nn.CrossEntropyLoss(weight=torch.ones(3))
""")
    checkup = ipydevice.check(namespace=nb.ns)
    names = {p.name: p for p in checkup.problems}
    assert names["batch"].rule == names["criterion"].rule == "stray_tensor"
    for fix in checkup.fixes:
        assert fix.apply(nb.ns).ok, fix
    assert not ipydevice.check(namespace=nb.ns)


def test_watch_reads_only_the_names_a_cell_bound():
    nb = notebook(
        "model = nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)\nok = torch.randn(3, 4, device='meta')\n"
    )
    assert [p.name for p in ipydevice.audits.checkup.watch(nb.ns, ["x", "ok"]).problems] == ["x"]
    assert not ipydevice.audits.checkup.watch(nb.ns, ["ok"])


def test_audits_explain_the_error_in_the_panel():
    source = NET.replace("        self.blocks = [nn.Linear(8, 8)]\n", "")
    nb = notebook(source + "model = Net().to('meta')\nx = torch.randn(2, 4, device='meta')\n")
    d = ipydevice.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)
    rules = {c.rule for c in d.causes}
    assert "unregistered_tensor" in rules
    assert any("register_buffer" in f.code for f in d.fixes)


def test_checkup_renders_and_tables():
    nb = notebook(NET + "model = Net().to('meta')\n")
    checkup = ipydevice.check(namespace=nb.ns)
    html = checkup._repr_html_()
    assert "ipydevice-panel" in html and "<script" not in html
    assert set(checkup.table()["rule"]) >= {
        "unregistered_tensor",
        "plain_list",
        "factory_without_device",
    }
    assert repr(checkup).startswith("<Checkup")


def test_stray_sources_in_a_models_methods():
    nb = notebook("""
import numpy as np

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x, table):
        extra = torch.from_numpy(table)
        tokens = self.tokenizer(["hi"], return_tensors="pt")
        state = torch.load("cache.pt")
        ok = torch.from_numpy(table).to(x.device)
        return self.proj(x) + extra

model = Encoder()
""")
    checkup = ipydevice.check(nb.ns["model"], namespace=nb.ns)
    codes = [f.code.strip() for f in checkup.fixes if f.scope == "source"]
    assert "extra = torch.from_numpy(table).to(x.device)" in codes
    assert 'tokens = self.tokenizer(["hi"], return_tensors="pt").to(x.device)' in codes
    assert 'state = torch.load("cache.pt", map_location=x.device)' in codes
    assert not any(code.startswith("ok =") for code in codes)  # moved on the spot: fine
    for problem in checkup.problems:
        assert problem.rule == "factory_without_device" and problem.location.startswith("In [")


def test_family_audits_join_the_error_panel():
    nb = notebook("""
from torch.utils.data import DataLoader
import types
model = nn.Linear(4, 2)
loader = DataLoader(list(range(8)), shuffle=True)
loader.generator = types.SimpleNamespace(device=torch.device('cuda', 0))
""")
    exc = nb.fails(
        "raise RuntimeError(\"Expected a 'cpu' device type for generator but found 'cuda'\")\n"
    )
    d = ipydevice.diagnose(exc, namespace=nb.ns)
    assert d.family == "generator_mismatch"
    assert [c.name for c in d.causes if c.rule == "generator_device"] == ["loader"]
    assert any("torch.Generator()" in f.code for f in d.fixes)

    nb.run("dp = nn.DataParallel(model)\ndp.device_ids = [0]\n")
    message = "module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found one of them on device: cpu"
    d = ipydevice.diagnose(nb.fails(f"raise RuntimeError({message!r})\n"), namespace=nb.ns)
    assert [c.name for c in d.causes if c.rule == "dataparallel"] == ["dp"]


def test_scheduler_holding_tensors_elsewhere():
    nb = notebook("""
model = nn.Linear(4, 2).to('meta')
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
scheduler.best = torch.tensor([0.5])  # a metric tensor kept instead of a float
""")
    problem = by_rule(ipydevice.check(namespace=nb.ns), "scheduler_device")
    assert problem.name == "scheduler" and problem.device == "cpu" and "best on cpu" in problem.why
    nb.ns["scheduler"].best = 0.5
    assert not [
        p for p in ipydevice.check(namespace=nb.ns).problems if p.rule == "scheduler_device"
    ]


def test_python_and_numpy_calls_are_not_torch_factories():
    """``range(3)`` is Python's and ``np.random.rand(3)`` NumPy's: neither is a torch
    factory without ``device=`` (only ``torch.<factory>`` spelled out is)."""
    nb = notebook(
        "import numpy as np\n"
        "class M(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.l = nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        idx = range(3)\n"
        "        noise = np.random.rand(3)\n"
        "        for _ in range(2):\n"
        "            x = self.l(x)\n"
        "        return x + torch.zeros(4)\n"
        "model = M().to('meta')\n"
    )
    problems = ipydevice.check(nb.ns["model"], namespace=nb.ns).problems
    assert [p.why.split("`")[1] for p in problems] == ["return x + torch.zeros(4)"]
