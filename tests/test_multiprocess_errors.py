"""Device errors of multi-process training, on the messages torch, accelerate and
Lightning raise: ``forked_cuda``, ``pin_memory``, and the ``worker_transfers`` audit
(a Dataset or collate_fn that moves data to the GPU inside DataLoader workers)."""

from __future__ import annotations

import sys

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import ipydevice
from ipydevice import plugins
from ipydevice.audits.worker_transfers import device_transfers

TORCH_FORK = (
    "Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, "
    "you must use the 'spawn' start method"
)
# accelerate 1.x, notebook_launcher (launchers.py), during and before the launch
ACCELERATE = (
    "CUDA has been initialized before the `notebook_launcher` could create a forked subprocess. "
    "This likely stems from an outside import causing issues once the `notebook_launcher()` is "
    "called. Please review your imports and test them when running the `notebook_launcher()` to "
    "identify which one is problematic and causing CUDA to be initialized."
)
ACCELERATE_CHECK = (
    "An issue was found when verifying a stable environment for the notebook launcher."
    "This likely stems from an outside import causing issues once the `notebook_launcher()` is "
    "called. Please review your imports and test them when running the `notebook_launcher()` to "
    "identify which one is problematic and causing CUDA to be initialized."
)


@pytest.fixture
def bad_fork(monkeypatch):
    """torch's own state in a child forked after CUDA was initialised."""
    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)


def raised(call) -> BaseException:
    try:
        call()
    except BaseException as exc:
        return exc
    raise AssertionError("no error")


def cuda_objects() -> dict:
    with FakeTensorMode():
        weights = torch.empty(3, 4, device="cuda")
        model = torch.nn.Linear(4, 2)
        model.weight = torch.nn.Parameter(torch.empty(2, 4, device="cuda"))
        model.bias = torch.nn.Parameter(torch.empty(2, device="cuda"))
    return {"weights": weights, "model": model, "inputs": torch.ones(2)}


def test_torchs_own_fork_message(bad_fork):
    exc = raised(torch.cuda._lazy_init)  # what a forked child's first CUDA call raises
    assert str(exc).startswith("Cannot re-initialize CUDA in forked subprocess")
    d = ipydevice.diagnose(exc, namespace=cuda_objects())
    assert d.family == "forked_cuda"
    # what initialised CUDA in the notebook's process, named; the CPU tensor is not
    assert [(f.name, f.device) for f in d.culprits] == [("weights", "cuda:0"), ("model", "cuda:0")]
    assert "inputs" not in {r.name for r in d.records}
    # no move fixes it: restart, and CUDA work inside the launched function
    assert d.fixes == ()
    assert "restart the kernel" in d.headline and "inside the function you launch" in d.headline
    assert "restart the kernel" in str(d)


def test_the_fork_message_from_a_dataloader_worker(bad_fork):
    """As the notebook receives it: the worker's error re-raised with its traceback as text."""
    from torch._utils import ExceptionWrapper

    def worker():
        try:
            torch.cuda._lazy_init()
        except RuntimeError:
            ExceptionWrapper(sys.exc_info(), where="in DataLoader worker process 0").reraise()

    exc = raised(worker)
    assert "Caught RuntimeError in DataLoader worker process 0" in str(exc)
    d = ipydevice.diagnose(exc, namespace={})
    assert d.family == "forked_cuda" and "restart the kernel" in d.headline


def test_lightnings_fork_message(bad_fork):
    launchers = pytest.importorskip("lightning.fabric.strategies.launchers.multiprocessing")
    exc = raised(launchers._check_bad_cuda_fork)
    assert "Cannot re-initialize CUDA in forked subprocess" in str(exc)
    assert ipydevice.diagnose(exc, namespace={}).family == "forked_cuda"


@pytest.mark.parametrize(
    "message",
    [
        ACCELERATE,
        ACCELERATE_CHECK,
        "Lightning can't create new processes if CUDA is already initialized. Did you manually "
        "call `torch.cuda.*` functions, have moved the model to the device, or allocated memory "
        "on the GPU any other way? Please remove any such calls, or change the selected strategy. "
        "You will have to restart the Python kernel.",
        TORCH_FORK.replace("CUDA", "XPU"),
    ],
    ids=["accelerate", "accelerate-check", "lightning-old", "xpu"],
)
def test_launcher_forms(message):
    d = ipydevice.diagnose(RuntimeError(message), namespace=cuda_objects())
    assert d.family == "forked_cuda" and d.fixes == ()
    accelerator = "XPU" if "XPU" in message else "CUDA"
    assert f"on {accelerator} only inside the function you launch" in d.advice


def test_cuda_errors_that_are_not_about_forking_stay_out():
    for message in ("CUDA error: initialization error", "CUDA out of memory. Tried to allocate"):
        assert ipydevice.diagnose(RuntimeError(message)).family != "forked_cuda"


@pytest.mark.parametrize(
    "call",
    [
        lambda: torch.empty(3, device="meta").pin_memory(),  # "cannot pin 'MetaFloatType' ..."
        lambda: torch.empty(3, device="meta").untyped_storage().pin_memory(),
    ],
    ids=["tensor", "storage"],
)
def test_pin_memory_on_real_messages(call):
    exc = raised(call)
    assert "cannot pin" in str(exc) and "can be pinned" in str(exc)
    d = ipydevice.diagnose(exc, namespace={})
    assert d.family == "pin_memory" and d.target == "cpu"
    assert "pin CPU tensors only" in d.advice


def test_pin_memory_legacy_and_cuda_wordings():
    for kind in ("torch.cuda.FloatTensor", "CUDAFloatType"):
        message = f"cannot pin '{kind}' only dense CPU tensors can be pinned"
        d = ipydevice.diagnose(RuntimeError(message), namespace={})
        assert d.family == "pin_memory" and d.devices == ("cuda",), kind


def test_pin_memory_names_the_tensor(nb):
    nb.run("import torch\nbatch = torch.ones(2, 3, device='meta')")
    exc = nb.error("pinned = batch.pin_memory()")
    d = ipydevice.diagnose(exc, namespace=nb.ns)
    assert d.family == "pin_memory"
    assert [f.name for f in d.culprits] == ["batch"]


DATASET = """
import torch
from torch.utils.data import Dataset, DataLoader
device = "cuda"

class Pairs(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        x = torch.randn(4).to(torch.float32)  # a dtype: no transfer
        y = torch.zeros(1).to("cpu")
        return x.to(device), y

def to_gpu(batch):
    return [item.cuda() for item in batch]
"""


def test_worker_transfers_audit(nb):
    nb.run(DATASET)
    nb.run(
        "loader = DataLoader(Pairs(), batch_size=2, num_workers=2)\n"
        "collated = DataLoader(list(range(4)), collate_fn=to_gpu, num_workers=1)\n"
        "single = DataLoader(Pairs(), batch_size=2)  # no workers: the main process\n"
    )
    report = ipydevice.check(namespace=nb.ns, names=["loader", "collated", "single"])
    found = {f.name: f for f in report.problems if f.rule == "worker_transfers"}
    assert set(found) == {"loader.dataset", "collated.collate_fn"}, report.problems
    assert "Pairs.__getitem__ calls .to(device)" in found["loader.dataset"].why
    assert "2 worker processes" in found["loader.dataset"].why
    assert found["loader.dataset"].location.endswith(":13")  # the line of .to(device)
    assert ".cuda()" in found["collated.collate_fn"].why
    assert "into the training loop" in str(report)
    assert "worker_transfers" in plugins.audits()


def test_worker_transfers_explain_a_worker_fork_error(nb, bad_fork):
    from torch._utils import ExceptionWrapper

    nb.run(DATASET)
    nb.run("loader = DataLoader(Pairs(), batch_size=2, num_workers=2)")

    def worker():
        try:
            torch.cuda._lazy_init()
        except RuntimeError:
            ExceptionWrapper(sys.exc_info(), where="in DataLoader worker process 1").reraise()

    d = ipydevice.diagnose(raised(worker), namespace=nb.ns)
    assert d.family == "forked_cuda"
    assert any(f.rule == "worker_transfers" and f.name == "loader.dataset" for f in d.causes)
    assert any("training loop" in fix.title for fix in d.fixes)


def test_device_transfers_reads_the_source_only():
    def getitem(self, i):
        sample = self.data[i]
        return sample.to(self.device), torch.tensor(i, device="cuda:0"), sample.to(torch.half)

    assert [call for _, call in device_transfers(getitem)] == [
        ".to(self.device)",
        "device='cuda:0'",
    ]
    assert device_transfers(len) == []  # no Python source: nothing to read


def test_worker_transfers_explain_a_pin_memory_error(nb):
    """pin_memory=True over a Dataset that returns GPU tensors: wrong without workers too."""
    nb.run(DATASET)
    nb.run("pinned = DataLoader(Pairs(), batch_size=2, pin_memory=True)")
    report = ipydevice.check(namespace=nb.ns, names=["pinned"])
    (finding,) = [f for f in report.problems if f.rule == "worker_transfers"]
    assert finding.name == "pinned.dataset" and "pin_memory=True" in finding.why
    message = "cannot pin 'torch.cuda.FloatTensor' only dense CPU tensors can be pinned"
    d = ipydevice.diagnose(RuntimeError(message), namespace=nb.ns)
    assert d.family == "pin_memory"
    assert [f.name for f in d.causes if f.rule == "worker_transfers"] == ["pinned.dataset"]
