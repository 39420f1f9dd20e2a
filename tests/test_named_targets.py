"""The target is among the devices the message names: an object elsewhere did not
meet in the failing operation (a meta skeleton beside a cuda:0 and cpu error)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import torch
from cells import Notebook

import ipydevice

sys.path.insert(0, str(Path(__file__).parent / "realworld"))
from fakecuda import fake_cuda


def _fake_cuda_case(setup: str, cell: str) -> tuple[Notebook, ipydevice.Diagnosis]:
    nb = Notebook()
    with fake_cuda(), torch.no_grad():
        nb.run(textwrap.dedent(setup))
        d = ipydevice.diagnose(nb.fails(textwrap.dedent(cell)), namespace=nb.ns)
        for fix in d.fixes[:1]:
            assert fix.apply(nb.ns).ok
            assert nb.error(textwrap.dedent(cell)) is None
    return nb, d


def test_a_functional_call_skeleton_on_meta_is_not_the_target():
    _, d = _fake_cuda_case(
        """
        import torch, torch.nn as nn
        from torch.func import functional_call
        skeleton = nn.Linear(4, 2).to('meta')
        params = {k: torch.randn(v.shape) for k, v in skeleton.named_parameters()}
        x = torch.randn(3, 4, device='cuda')
        """,
        "out = functional_call(skeleton, params, (x,))\n",
    )
    assert set(d.devices) == {"cuda:0", "cpu"}
    assert d.target == "cuda:0"
    assert "skeleton" not in [f.name for f in d.culprits]
    # the dict passed whole to functional_call, both its tensors on the CPU (wholes.py)
    assert [f.name for f in d.culprits] == ["params"]
    assert all("to_empty" not in f.code for f in d.fixes)


def test_a_vmap_ensemble_base_on_meta_is_not_the_target():
    _, d = _fake_cuda_case(
        """
        import copy
        import torch, torch.nn as nn
        from torch.func import functional_call, stack_module_state
        models = [nn.Linear(4, 2).to('cuda') for _ in range(3)]
        params, buffers = stack_module_state(models)
        base = copy.deepcopy(models[0]).to('meta')
        x = torch.randn(5, 4)

        def fmodel(p, b, inp):
            return functional_call(base, (p, b), (inp,))
        """,
        "out = fmodel({k: v[0] for k, v in params.items()}, buffers, x)\n",
    )
    assert d.target == "cuda:0"
    assert [f.name for f in d.culprits][:1] == ["x"]
    assert all("base" not in f.code for f in d.fixes)


def test_a_device_asked_for_without_an_index_is_the_backends_current_one():
    """``encoder.to(torch.device('openreg'))`` of a model built on meta: torch would put
    it on the backend's current device, so that is the target, with its index
    (``openreg:0``), as a tensor made there shows it; the fix keeps the user's spelling."""
    from standin import standin

    nb = Notebook()
    cell = "encoder = encoder.to(dev)\n"
    with standin():
        nb.run(
            textwrap.dedent(
                """
                import torch, torch.nn as nn
                dev = torch.device("openreg")
                with torch.device('meta'):
                    encoder = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
                """
            )
        )
        d = ipydevice.diagnose(nb.fails(cell), namespace=nb.ns)
        assert d.family == "meta_device"
        assert d.target == "openreg:0"
        assert "to_empty(device=dev)" in d.fixes[0].code
        assert d.fixes[0].apply(nb.ns).ok
        assert nb.error(cell) is None
        assert str(nb.ns["encoder"][0].weight.device) == "openreg:0"
