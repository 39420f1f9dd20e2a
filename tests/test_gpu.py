"""Real CUDA: the device errors ipydevice exists for, diagnosed and fixed on a GPU.

Every test is marked ``cuda``; ``conftest.py`` skips them where
``torch.cuda.is_available()`` is false, so this file imports and collects on any
machine (nothing touches CUDA at import time). Tests that need two GPUs also
skip, with a reason, where there is one.

Each scenario follows ``tests/test_scenarios.py``: reproduce the error from a
fresh namespace, check the family, the culprit's name and the target, then
prove every fix works (namespace fixes through ``Fix.apply``, by reference; cell
fixes by running the rewritten cell; source fixes by running the setup with the
proposed lines) by re-running the failed cell. Messages differ between torch
releases (``Expected all tensors to be on the same device`` and the newer ``but
got mat1 is on cpu``; conv's ``Input type ... and weight type``): the assertions
accept the families each release may print.

Beyond the scenarios: diagnosing reads no data (CUDA memory and the caching
allocator are untouched, no synchronisation is needed) and keeps nothing alive
(memory returns to where it was once the names and the error are gone), and
the panel shows in a real in-process shell.
"""

from __future__ import annotations

import gc
import sys
import textwrap
import weakref
from typing import Any

import pytest
import torch
from test_scenarios import IMPORTS, culprit_names, scenario, verify_fixes

import ipydevice

pytestmark = pytest.mark.cuda


def device_count() -> int:
    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


two_gpus = pytest.mark.skipif(device_count() < 2, reason="needs two CUDA devices")


# -- the classic: a model on cuda:0, an input on the CPU -------------------------------------


def test_model_on_cuda_input_on_cpu() -> None:
    setup = """
    model = nn.Linear(4, 2).to('cuda:0')
    x = torch.randn(3, 4)
    """
    failing = "out = model(x)\n"
    _, d = scenario(setup, failing)
    # "Expected all tensors to be on the same device ... cuda:0 and cpu!" or, in newer
    # releases, "... but got mat1 is on cpu, different from other tensors on cuda:0".
    assert d.family == "op_mismatch", d.family
    assert d.target == "cuda:0"
    assert culprit_names(d)[0] == "x"
    assert d.fixes[0].code == "x = x.to('cuda:0')"
    verify_fixes(setup, failing, d)


def test_dict_batch_on_cpu() -> None:
    setup = """
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).cuda()
    batch = {'features': torch.randn(3, 4), 'ids': torch.arange(3)}
    """
    failing = "out = model(batch['features'])\n"
    _, d = scenario(setup, failing)
    assert d.target == "cuda:0"
    assert culprit_names(d)[0] == "batch['features']"
    verify_fixes(setup, failing, d)


# -- conv: "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor)" ---------


def test_conv_input_type_with_devices() -> None:
    setup = """
    conv = nn.Conv2d(3, 8, kernel_size=3).cuda()
    images = torch.randn(2, 3, 16, 16)
    """
    failing = "features = conv(images)\n"
    _, d = scenario(setup, failing)
    assert d.family in ("conv_type_mismatch", "op_mismatch"), d.family
    assert d.target == "cuda:0"
    assert culprit_names(d)[0] == "images"
    verify_fixes(setup, failing, d)


# -- indices -------------------------------------------------------------------------------


def test_index_select_with_cpu_indices() -> None:
    # t_cuda[idx_cpu] is legal (advanced indexing takes CPU indices); index_select is not.
    setup = """
    table = torch.randn(10, 4, device='cuda:0')
    idx = torch.tensor([1, 3, 5])
    """
    failing = "rows = torch.index_select(table, 0, idx)\n"
    _, d = scenario(setup, failing)
    assert d.is_device_error
    assert d.family in ("index_mismatch", "op_mismatch"), d.family
    assert d.target == "cuda:0"
    assert "idx" in culprit_names(d), culprit_names(d)
    assert "table" not in culprit_names(d)
    verify_fixes(setup, failing, d)


def test_cpu_index_into_a_cuda_tensor_is_legal() -> None:
    # The legal mix is never a device error (ipydevice has nothing to say).
    table = torch.randn(10, 4, device="cuda:0")
    rows = table[torch.tensor([1, 3])]
    assert rows.device.type == "cuda"


@two_gpus
def test_indices_on_another_gpu() -> None:
    setup = """
    table = torch.randn(10, 4, device='cuda:0')
    idx = torch.tensor([1, 3, 5], device='cuda:1')
    """
    failing = "rows = table[idx]\n"
    _, d = scenario(setup, failing)
    assert d.is_device_error
    assert d.target == "cuda:0"
    assert "idx" in culprit_names(d)
    verify_fixes(setup, failing, d)


# -- generators ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "failing",
    [
        "z = torch.randn(3, device='cuda', generator=g)\n",
        "perm = torch.randperm(8, device='cuda', generator=g)\n",
    ],
    ids=["randn", "randperm"],
)
def test_cpu_generator_for_a_cuda_factory(failing: str) -> None:
    setup = """
    g = torch.Generator()
    g.manual_seed(0)
    """
    _, d = scenario(setup, failing)
    assert d.is_device_error
    assert d.family in ("generator_mismatch", "op_mismatch"), d.family
    assert d.target in ("cuda", "cuda:0"), d.target
    if d.fixes:
        verify_fixes(setup, failing, d)


# -- torch.load ------------------------------------------------------------------------------


def test_load_onto_a_device_that_does_not_exist(tmp_path: Any) -> None:
    path = tmp_path / "ckpt.pt"
    torch.save({"w": torch.randn(2, 2, device="cuda:0")}, path)
    missing = device_count()  # cuda:N with N GPUs: one past the last
    setup = f"path = {str(path)!r}\n"
    failing = f"state = torch.load(path, map_location='cuda:{missing}')\n"
    _nb, d = scenario(setup, failing)
    assert d.is_device_error, d
    assert d.family == "load_location", d.family
    verify_fixes(setup, failing, d)


def test_gpu_checkpoint_where_cuda_is_unavailable(tmp_path: Any, monkeypatch: Any) -> None:
    # A checkpoint saved on a GPU, loaded where torch sees no CUDA (a CPU-only
    # kernel): the real deserialisation error, the map_location fix.
    path = tmp_path / "ckpt.pt"
    torch.save({"w": torch.randn(2, 2, device="cuda:0")}, path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    setup = f"path = {str(path)!r}\n"
    failing = "state = torch.load(path)\n"
    _, d = scenario(setup, failing)
    assert d.family == "load_location"
    assert d.target == "cpu"
    assert "map_location='cpu'" in d.fixes[0].code
    verify_fixes(setup, failing, d)


# -- .numpy() of a CUDA tensor ---------------------------------------------------------------


def test_numpy_of_a_cuda_tensor() -> None:
    setup = """
    preds = torch.randn(4, 2, device='cuda:0', requires_grad=True) * 2
    """
    failing = "array = preds.numpy()\n"
    _, d = scenario(setup, failing)
    assert d.family == "numpy_conversion", d.family
    codes = [f.code for f in d.fixes]
    assert any(".detach().cpu().numpy()" in code for code in codes), codes
    verify_fixes(setup, failing, d)


# -- optimizer state left on the CPU ---------------------------------------------------------

OPTIMIZER_SETUP = """
model = nn.Linear(4, 2)
opt = torch.optim.Adam(model.parameters(), lr=0.1)
model(torch.randn(3, 4)).sum().backward()
opt.step()
opt.zero_grad()
model.to('cuda:0')  # moves the parameters in place; Adam's state stays on the CPU
x = torch.randn(3, 4, device='cuda:0')
model(x).sum().backward()
"""


GENERATOR_SETUP = """
gen = torch.Generator().manual_seed(0)
x = torch.rand(2, 3, device='cuda:0')
"""


def test_a_cpu_generator_is_made_again_on_cuda_from_its_seed() -> None:
    failing = "noise = x.new_empty(x.shape).normal_(generator=gen)\n"
    nb, d = scenario(GENERATOR_SETUP, failing)
    assert culprit_names(d)[0] == "gen" and d.target.startswith("cuda")
    assert d.fixes[0].steps[0].action == "remake_generator"
    result = d.fixes[0].apply(nb.ns)
    assert result.ok, result.message
    assert nb.ns["gen"].device.type == "cuda" and nb.ns["gen"].initial_seed() == 0
    nb.run(failing)
    verify_fixes(GENERATOR_SETUP, failing, d)


def test_optimizer_state_on_cpu_params_on_cuda() -> None:
    failing = "opt.step()\n"
    nb, d = scenario(OPTIMIZER_SETUP, failing)
    assert d.is_device_error
    assert culprit_names(d)[0].startswith("opt.state[model")
    assert d.target == "cuda:0"
    result = d.fixes[0].apply(nb.ns)  # Apply, then the step works
    assert result.ok, result.message
    nb.run(failing)
    steps = {s["step"].device.type for s in nb.ns["opt"].state.values()}
    assert steps == {"cpu"}  # Adam keeps its step counters on the CPU on purpose
    verify_fixes(OPTIMIZER_SETUP, failing, d)


# -- DataParallel with one GPU ---------------------------------------------------------------


def test_dataparallel_model_left_on_cpu() -> None:
    setup = """
    net = nn.DataParallel(nn.Linear(4, 2), device_ids=[0])
    x = torch.randn(3, 4)
    """
    failing = "out = net(x)\n"
    _, d = scenario(setup, failing)
    assert d.family == "dataparallel", d.family
    assert d.target == "cuda:0"
    verify_fixes(setup, failing, d)


# -- two GPUs --------------------------------------------------------------------------------


@two_gpus
def test_cuda0_versus_cuda1() -> None:
    setup = """
    model = nn.Linear(4, 2).to('cuda:1')
    x = torch.randn(3, 4, device='cuda:0')
    """
    failing = "out = model(x)\n"
    _, d = scenario(setup, failing)
    assert d.family == "op_mismatch"
    assert d.target == "cuda:1"
    assert culprit_names(d)[0] == "x"
    verify_fixes(setup, failing, d)


# -- metadata only, nothing kept -------------------------------------------------------------


def test_diagnosing_allocates_and_reads_nothing_on_the_gpu() -> None:
    nb, d = scenario(
        """
        model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(8)]).cuda()
        big = torch.empty(64, 1024, 1024, device='cuda:0')  # 256 MB, never read
        x = torch.randn(3, 256)
        """,
        "out = model(x)\n",
    )
    exc = nb.fails("out = model(x)\n")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    allocated = torch.cuda.memory_allocated()
    d = ipydevice.diagnose(exc, namespace=nb.ns)
    str(d), d._repr_html_(), ipydevice.inventory(nb.ns)
    assert torch.cuda.memory_allocated() == allocated
    assert torch.cuda.max_memory_allocated() == allocated
    assert culprit_names(d)[0] == "x"


def test_gpu_memory_is_released_after_the_diagnosis() -> None:
    nb = _notebook(
        """
        model = nn.Linear(1024, 1024).cuda()
        cache = torch.empty(32, 1024, 1024, device='cuda:0')  # 128 MB
        x = torch.randn(3, 1024)
        """
    )
    torch.cuda.synchronize()
    before_setup = torch.cuda.memory_allocated() - _bytes(nb.ns["model"], nb.ns["cache"])
    exc = nb.fails("out = model(x)\n")
    refs = [weakref.ref(nb.ns["cache"]), weakref.ref(nb.ns["model"].weight)]
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, exc.__traceback__
    try:
        d = ipydevice.diagnose(namespace=nb.ns)
        kept = (str(d), d._repr_html_(), ipydevice.inventory(nb.ns))
    finally:
        for name in ("last_type", "last_value", "last_traceback", "last_exc"):
            if hasattr(sys, name):
                setattr(sys, name, None)
    del exc
    nb.ns.clear()
    gc.collect()
    torch.cuda.synchronize()
    assert all(ref() is None for ref in refs)
    assert torch.cuda.memory_allocated() <= before_setup
    assert kept and d.culprits


# -- the second corpus's cases no CPU stand-in can run (tests/realworld/README.md) -----------


@pytest.mark.parametrize(
    ("setup", "failing", "culprit", "fix"),
    [
        (
            """
            from torch.nn.utils.rnn import pack_padded_sequence
            embedded = torch.randn(3, 5, 4).to('cuda')
            lengths = torch.tensor([5, 3, 2]).to('cuda')
            """,
            "packed = pack_padded_sequence(embedded, lengths, batch_first=True, "
            "enforce_sorted=False)\nsizes = packed.batch_sizes\n",
            "lengths",
            "lengths = lengths.to('cpu')",
        ),
        (
            """
            from torch.nn.utils.rnn import pack_padded_sequence

            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.emb = nn.Embedding(20, 4)

                def forward(self, ids, mask):
                    lengths = mask.sum(1)
                    return pack_padded_sequence(self.emb(ids), lengths, batch_first=True,
                                                enforce_sorted=False)

            encoder = Encoder().to('cuda')
            ids = torch.randint(0, 20, (3, 5)).to('cuda')
            mask = torch.ones(3, 5, dtype=torch.long).to('cuda')
            """,
            "packed = encoder(ids, mask)\nsizes = packed.batch_sizes\n",
            "lengths in Encoder.forward",
            "",
        ),
    ],
    ids=["in the cell", "in the forward"],
)
def test_pack_padded_lengths_go_to_the_cpu(
    setup: str, failing: str, culprit: str, fix: str
) -> None:
    from test_scenarios import verify_fix

    _, d = scenario(setup, failing)
    assert d.target == "cpu"
    assert culprit_names(d)[:1] == [culprit]
    if fix:
        assert d.fixes[0].code == fix
    verify_fix(setup, failing, d.fixes[0])


def test_generate_after_its_warning_moves_the_inputs_to_the_model() -> None:
    """generate() warns that the inputs are on cuda and the model on cpu. A transformers
    before huggingface/transformers#46590 then fails in the embedding: the warning's
    demand decides the error's target. Since that change generate() moves each forward's
    inputs itself and the cell runs, its work on cuda: the warning's panel is what the
    user gets. Either way: culprit ``input_ids``, target cpu, and the first fix makes the
    cell run with ``out`` on cpu (no warning, no error)."""
    pytest.importorskip("transformers")
    import warnings

    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from ipydevice.integrations import ipython as ext

    setup = (
        "import torch\nfrom transformers import GPT2Config, GPT2LMHeadModel\n"
        "config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=32, n_positions=32,\n"
        "                    bos_token_id=2, eos_token_id=3, pad_token_id=0)\n"
        "model = GPT2LMHeadModel(config)\n"
        "input_ids = torch.tensor([[4, 5, 6]]).to('cuda')\n"
    )
    cell = "out = model.generate(input_ids, max_new_tokens=2, do_sample=False)"
    shell = InteractiveShell.instance()
    with warnings.catch_warnings():  # shown, not recorded by pytest: the hook sees them
        warnings.simplefilter("always")
        warnings.showwarning = lambda *args, **kwargs: None
        shell.extension_manager.unload_extension("ipydevice")
        shell.run_line_magic("load_ext", "ipydevice")
        hook = ext.hook_of(shell)
        assert hook is not None and hook.device_warnings is not None
        shown: list = []
        report = hook.device_warnings.report
        hook.device_warnings.report = lambda d: (shown.append(d), report(d))
        try:
            shell.run_cell(setup)
            with capture_output():
                result = shell.run_cell(cell)
            last = hook.last if result.error_in_exec is not None else shown[0]
            assert last is not None and last.target == "cpu", last
            assert last.culprits[0].name == "input_ids"
            assert "the warning says the model is on cpu" in last.target_reason
            assert last.fixes[0].apply(shell.user_ns).ok
            shown.clear()
            with capture_output():
                result = shell.run_cell(cell)
            assert result.success, result.error_in_exec
            assert not shown, shown
            assert shell.user_ns["out"].device.type == "cpu"
        finally:
            hook.device_warnings.report = report
            shell.extension_manager.unload_extension("ipydevice")
            for name in ("model", "input_ids", "out", "config"):
                shell.user_ns.pop(name, None)


# -- the panel in a real shell ---------------------------------------------------------------


def test_panel_in_an_interactive_shell(monkeypatch: Any) -> None:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from ipydevice.integrations import ipython as ext

    shell = InteractiveShell.instance()
    shell.extension_manager.unload_extension("ipydevice")
    shell.run_line_magic("load_ext", "ipydevice")
    try:
        shell.run_cell("import torch\nmodel = torch.nn.Linear(4, 2).cuda()\nx = torch.randn(3, 4)")
        with capture_output() as cap:
            result = shell.run_cell("model(x)")
        assert isinstance(result.error_in_exec, RuntimeError)
        panels = [o.data for o in cap.outputs if "ipydevice-panel" in o.data.get("text/html", "")]
        assert len(panels) == 1
        assert "`x` is on cpu" in panels[0]["text/plain"]
        last = ext.hook_of(shell).last
        assert last.target == "cuda:0" and last.culprits[0].name == "x"
        inv = shell.run_line_magic("devices", "")
        assert {t.device for t in inv.totals} >= {"cuda:0", "cpu"}
    finally:
        shell.extension_manager.unload_extension("ipydevice")
        for name in ("model", "x"):
            shell.user_ns.pop(name, None)


# -- helpers -------------------------------------------------------------------------------


def _notebook(setup: str) -> Any:
    from cells import Notebook

    nb = Notebook()
    nb.run(IMPORTS + textwrap.dedent(setup))
    return nb


def _bytes(*objects: Any) -> int:
    total = 0
    for obj in objects:
        tensors = list(obj.parameters()) if isinstance(obj, torch.nn.Module) else [obj]
        total += sum(t.numel() * t.element_size() for t in tensors)
    return total
