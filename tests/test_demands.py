"""A message that fixes one argument's device: that device is the target for the
argument, and the tensor passed as it is the culprit, whatever the model's device."""

from __future__ import annotations

import textwrap

import torch
from cells import Notebook
from torch.overrides import TorchFunctionMode

import ipydevice
from ipydevice.diagnosis.demands import DEMANDS


def _fails(nb: Notebook, setup: str, cell: str) -> ipydevice.Diagnosis:
    nb.run(textwrap.dedent(setup))
    return ipydevice.diagnose(nb.fails(textwrap.dedent(cell)), namespace=nb.ns)


RNN = """
import torch, torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence
rnn = nn.GRU(4, 8, batch_first=True).to('meta')
x = torch.randn(3, 5, 4, device='meta')
lengths = torch.tensor([5, 3, 2], device='meta')
"""


def test_lengths_go_to_the_cpu_whatever_the_model_device():
    nb = Notebook()
    cell = "packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)\nout, h = rnn(packed)\n"
    d = _fails(nb, RNN, cell)
    assert d.target == "cpu"
    assert "demands `lengths` on the CPU" in d.target_reason
    assert [f.name for f in d.culprits] == ["lengths"]
    assert d.fixes[0].code == "lengths = lengths.to('cpu')"
    assert [(s.action, s.path, s.target) for s in d.fixes[0].steps] == [
        ("reassign", (("name", "lengths"),), "cpu")
    ]
    # meta tensors hold no data to copy: put what the fix makes, then re-run the cell
    nb.ns["lengths"] = torch.tensor([5, 3, 2])
    assert nb.error(cell) is None
    assert nb.ns["x"].device.type == "meta"  # the batch stays where the model is


def test_lengths_by_keyword_and_as_an_expression():
    nb = Notebook()
    setup = RNN + "batch = {'x': x, 'lens': torch.tensor([5, 3, 2], device='meta')}\n"
    cell = "packed = pack_padded_sequence(batch['x'], batch_first=True, lengths=batch['lens'])\n"
    d = _fails(nb, setup, cell)
    assert d.target == "cpu"
    assert [f.name for f in d.culprits] == ["batch['lens']"]
    assert d.fixes[0].steps[0].target == "cpu"
    assert "x" not in d.fixes[0].code


def test_lengths_passed_through_a_function_of_the_user():
    nb = Notebook()
    setup = RNN + textwrap.dedent(
        """
        def encode(seq, lens):
            packed = pack_padded_sequence(seq, lens, batch_first=True, enforce_sorted=False)
            return rnn(packed)
        """
    )
    d = _fails(nb, setup, "out = encode(x, lengths)\n")
    assert d.target == "cpu"
    assert d.culprits and d.culprits[0].device == "meta"
    assert "x" not in [f.name for f in d.culprits]


class _CudaIndexing(TorchFunctionMode):
    """Indexing with indices on another device than the indexed tensor (not the
    CPU) raises as CUDA's kernel does; a CPU build lets meta indices through."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.__getitem__:
            base, index = args[0], args[1]
            for idx in index if isinstance(index, tuple) else (index,):
                if isinstance(idx, torch.Tensor) and idx.device.type not in (
                    "cpu",
                    base.device.type,
                ):
                    raise RuntimeError(
                        "indices should be either on cpu or on the same device as the "
                        f"indexed tensor ({base.device})"
                    )
        return func(*args, **(kwargs or {}))


def test_indices_go_where_the_indexed_tensor_is():
    """A CPU schedule indexed with timesteps on the accelerator (the model's device)."""
    nb = Notebook()
    nb.ns["_CudaIndexing"] = _CudaIndexing
    setup = """
    import torch, torch.nn as nn
    model = nn.Linear(4, 4).to('meta')
    alphas = torch.linspace(0.1, 0.9, 10)
    t = torch.tensor([1, 4], device='meta')
    """
    cell = "with _CudaIndexing():\n    a = alphas[t]\n"
    d = _fails(nb, setup, cell)
    assert d.family == "index_mismatch"
    assert d.target == "cpu"
    assert d.target_reason.startswith("cpu: the message demands the indices")
    assert [f.name for f in d.culprits] == ["t"]
    assert d.fixes[0].code == "t = t.to('cpu')"
    nb.ns["t"] = torch.tensor([1, 4])  # what the fix makes (meta holds no data to copy)
    assert nb.error(cell) is None


def _generator_check(device, generator):
    if generator.device.type != torch.device(device).type:
        raise RuntimeError(
            f"Expected a '{torch.device(device).type}' device type for generator but found "
            f"'{generator.device.type}'"
        )


def test_the_generator_demand_names_the_target():
    nb = Notebook()
    nb.ns["check"] = _generator_check
    d = _fails(nb, "import torch\ng = torch.Generator()\n", "check('meta', generator=g)\n")
    assert d.target == "meta"
    assert "demands the generator" in d.target_reason


def test_every_demand_names_a_distinct_argument():
    arguments = [d.argument for d in DEMANDS]
    assert len(arguments) == len(set(arguments))
    assert all(d.rule for d in DEMANDS)


# -- a warning's demand, for the error that follows it (ipydevice/diagnosis/warned.py) ----

GENERATE_WARNING = (
    "You are calling .generate() with the `input_ids` being on a device type different than "
    "your model's device. `input_ids` is on cuda, whereas the model is on cpu. You may "
    "experience unexpected behaviors or slower generation. Please make sure that you have put "
    "`input_ids` to the correct device by calling for example input_ids = input_ids.to('cpu') "
    "before running `.generate()`."
)
# what a GPU prints when the embedding then meets the CPU weight
EMBEDDING_ERROR = (
    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 "
    "and cpu! (when checking argument for argument index in method wrapper_CUDA__index_select)"
)


def test_an_error_demanding_nothing_takes_the_warnings_demand_in_its_devices():
    from ipydevice.diagnosis.recognise import recognise
    from ipydevice.diagnosis.warned import heed_warnings

    facts = heed_warnings(recognise(EMBEDDING_ERROR), ["an unrelated warning", GENERATE_WARNING])
    assert (facts.argument, facts.expected, facts.offending) == ("input_ids", "cpu", "cuda:0")
    assert facts.devices == ("cuda:0", "cpu") and facts.family == "index_mismatch"


def test_a_warning_about_other_devices_or_an_error_with_its_own_demand_is_left_alone():
    from ipydevice.diagnosis.recognise import recognise
    from ipydevice.diagnosis.warned import heed_warnings

    error = recognise(EMBEDDING_ERROR)
    meta = GENERATE_WARNING.replace("is on cuda", "is on meta")
    assert heed_warnings(error, [meta]) == error
    assert heed_warnings(error, []) == error
    lengths = recognise(
        "'lengths' argument should be a 1D CPU int64 tensor, but got 1D cuda:0 Long tensor"
    )
    assert heed_warnings(lengths, [GENERATE_WARNING]) == lengths
