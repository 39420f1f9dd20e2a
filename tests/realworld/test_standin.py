"""The openreg stand-in device (standin.py): a second device with data, for the cases
whose fix or library reads tensor values."""

from __future__ import annotations

import copy
import gc
import io

import pytest
import torch
import torch.nn as nn
from standin import _DATA, NAME, install, is_standin, standin
from torch.nn.utils.rnn import pack_padded_sequence

pytestmark = pytest.mark.realworld

_TWO = "Expected all tensors to be on the same device, but found at least two devices, "


@pytest.fixture(autouse=True)
def openreg(request):
    """Each test inside a case's stand-in context; ``test_outside_*`` after one."""
    if request.node.name.startswith("test_outside"):
        install()
        yield
        return
    with standin():
        yield


def test_tensors_carry_their_values_there_and_back():
    x = torch.arange(6.0).reshape(2, 3)
    y = x.to(NAME)
    assert str(y.device) == "openreg:0" and is_standin(y)
    back = y.to("cpu")
    assert back.device.type == "cpu" and torch.equal(back, x) and torch.equal(y.cpu(), x)
    assert back.data_ptr() != y.data_ptr()  # a copy, not the device's bytes
    assert (y + y).cpu().tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    assert y.sum().item() == 15.0 and bool((y > 4).any()) and not bool((y > 5).any())


def test_views_and_in_place_operators_share_the_bytes():
    y = torch.zeros(2, 3, device=NAME)
    row = y[0]
    row.add_(1)
    y.t()[2, 1] = 7.0
    y.view(-1)[3] = 5.0
    assert row._base is y and row.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    assert y.cpu().tolist() == [[1.0, 1.0, 1.0], [5.0, 0.0, 7.0]]
    out = torch.empty(0, device=NAME)
    assert torch.add(y, y, out=out) is out and out.cpu()[1, 2].item() == 14.0
    y.resize_(8)
    assert y.shape == (8,) and y.cpu()[:3].tolist() == [1.0, 1.0, 1.0]


def test_modules_and_parameters_move_with_their_values():
    torch.manual_seed(0)
    cpu = nn.Linear(3, 2)
    model = copy.deepcopy(cpu).to(NAME)
    assert type(model.weight) is nn.Parameter and model.weight.device.type == NAME
    assert torch.equal(model.weight.cpu(), cpu.weight.detach())
    x = torch.randn(4, 3)
    assert torch.allclose(model(x.to(NAME)).cpu(), cpu(x))
    twin = copy.deepcopy(model)  # a storage clone allocates on the device
    assert twin.weight.device.type == NAME and twin.weight.data_ptr() != model.weight.data_ptr()
    saved = io.BytesIO()
    torch.save(model.state_dict(), saved)
    saved.seek(0)
    loaded = torch.load(saved, map_location=NAME)
    assert loaded["bias"].device.type == NAME and torch.equal(loaded["bias"].cpu(), cpu.bias)
    assert model.to("cpu").weight.device.type == "cpu"


def test_factories_place_their_tensors_on_the_device():
    made = [
        torch.arange(4, device=NAME),
        torch.zeros(2, device=NAME),
        torch.full((2,), 3, device=NAME),
        torch.randn(2, 2, device=NAME),
        torch.tensor([1, 2], device=NAME),
        torch.ones(2).new_ones(3, device=NAME),
    ]
    assert all(t.device.type == NAME for t in made)
    assert made[0].cpu().tolist() == [0, 1, 2, 3] and made[2].cpu().tolist() == [3, 3]


def test_mixed_devices_raise_pytorchs_words():
    y = torch.ones(2, 3, device=NAME)
    with pytest.raises(RuntimeError, match=_TWO + "openreg:0 and cpu!$"):
        y + torch.ones(2, 3)
    with pytest.raises(RuntimeError, match=_TWO + "openreg:0 and cpu!$"):
        torch.ones(2, 3) * y  # TensorIterator names the device that is not the CPU first
    with pytest.raises(RuntimeError, match="got index is on openreg:0, different from other "):
        nn.functional.embedding(torch.tensor([1]).to(NAME), torch.randn(3, 2))
    with pytest.raises(RuntimeError, match=r"^indices should be either on cpu or on the same "):
        torch.arange(3.0)[torch.tensor([0]).to(NAME)]
    with pytest.raises(RuntimeError, match=r"^Expected a 'openreg' device type for generator but"):
        torch.randn(2, device=NAME, generator=torch.Generator())
    assert (y + torch.tensor(1.0)).device.type == NAME  # a 0-dim CPU tensor mixes
    assert y[torch.tensor([1])].device.type == NAME  # CPU indices, as on CUDA
    with pytest.raises(RuntimeError, match="got tensors is on cpu, different from other") as info:
        torch.cat([y, torch.ones(1, 3)])
    frames = _frames(info.value.__traceback__)  # no frame of the stand-in holds a tensor
    assert [f.f_code.co_name for f in frames][-1] == "_fallback"
    assert not [v for v in frames[-1].f_locals.values() if isinstance(v, torch.Tensor)]


def _frames(tb):
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def test_composite_kernels_keep_their_own_checks():
    embedded = torch.randn(3, 5, 4)
    lengths = torch.tensor([5, 3, 2])
    with pytest.raises(RuntimeError, match="should be a 1D CPU int64 tensor, but got 1D openreg:0"):
        pack_padded_sequence(embedded.to(NAME), lengths.to(NAME), batch_first=True)
    packed = pack_padded_sequence(embedded.to(NAME), lengths, batch_first=True)
    want = pack_padded_sequence(embedded, lengths, batch_first=True)
    assert packed.data.device.type == NAME and packed.batch_sizes.device.type == "cpu"
    assert torch.equal(packed.batch_sizes, want.batch_sizes)
    assert torch.equal(packed.data.cpu(), want.data)


def test_convolutions_run_there_and_check_their_inputs():
    conv = nn.Conv1d(2, 3, 3, padding=1)
    x = torch.randn(1, 2, 5)
    moved = copy.deepcopy(conv).to(NAME)
    y = moved(x.to(NAME))
    assert is_standin(y) and torch.allclose(y.cpu(), conv(x))
    image = nn.Conv2d(1, 2, 1).to(NAME)(torch.randn(1, 1, 3, 3).to(NAME))
    assert is_standin(image) and image.shape == (1, 2, 3, 3)
    with pytest.raises(RuntimeError, match="weight is on openreg:0, different from other"):
        moved(x)


@pytest.mark.slow
def test_the_bytes_go_with_the_last_tensor():
    gc.collect()
    before = len(_DATA)
    y = torch.randn(100, device=NAME)
    views = [y[1:], y.view(10, 10), y.detach()]
    assert len(_DATA) == before + 1
    del y
    gc.collect()
    assert len(_DATA) == before + 1  # the views keep the storage
    del views
    gc.collect()
    assert len(_DATA) == before


def test_the_device_is_available_inside_a_case():
    assert torch.accelerator.is_available() and torch.accelerator.current_accelerator().type == NAME
    assert getattr(torch, NAME).is_available()
    with standin():
        pass
    assert torch.accelerator.is_available()  # nested: still inside the outer one


def test_outside_a_case_the_device_is_unavailable():
    """The cases after a stand-in case, in the same process, see a CPU-only machine."""
    assert not torch.accelerator.is_available() and not getattr(torch, NAME).is_available()
    assert torch.zeros(1).device.type == "cpu"
