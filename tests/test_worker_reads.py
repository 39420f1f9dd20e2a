"""A DataLoader worker's error without ipydevice's hook: what the Dataset's failing
line read is named from the notebook's Dataset (``diagnosis/worker_reads.py``).

The worker's re-raised error is built here as torch builds it (the text of the
worker's traceback, raised from the iterator's ``__next__``), so no worker process
is needed; ``tests/test_unwrap.py`` and the corpus run real workers."""

from __future__ import annotations

import linecache

import pytest

import ipydevice

torch = pytest.importorskip("torch")
from torch.utils.data import Dataset, Subset  # noqa: E402

MESSAGE = (
    "Expected all tensors to be on the same device, but found at least two devices, meta and cpu!"
)


class Scaled(Dataset):
    def __init__(self, table, scale, offset):
        self.table, self.scale, self.offset = table, scale, offset

    def __len__(self):
        return len(self.table)

    def __getitem__(self, i):
        return self.table[i] * self.scale + self.offset


class _Iterator:
    """Stands for ``_MultiProcessingDataLoaderIter``: it holds the Dataset."""

    def __init__(self, dataset):
        self._dataset = dataset

    def __next__(self):
        code = Scaled.__getitem__.__code__
        raise RuntimeError(
            "Caught RuntimeError in DataLoader worker process 1.\n"
            "Original Traceback (most recent call last):\n"
            f'  File "{code.co_filename}", line {code.co_firstlineno + 1}, in __getitem__\n'
            "    return self.table[i] * self.scale + self.offset\n"
            f"RuntimeError: {MESSAGE}\n"
        )


def _error(dataset) -> BaseException:
    try:
        next(_Iterator(dataset))
    except RuntimeError as exc:
        return exc
    raise AssertionError("no error")


def test_the_datasets_attribute_is_named_from_the_loader_and_moved_to_the_cpu() -> None:
    ds = Scaled(torch.randn(4, 3), torch.ones(3, device="meta"), torch.zeros(3))
    loader = torch.utils.data.DataLoader(ds, batch_size=2)
    table = torch.randn(2, 2, device="meta")  # the notebook's own: never blamed
    d = ipydevice.diagnose(_error(ds), namespace={"loader": loader, "table": table})
    assert d.is_device_error
    assert [(c.name, c.device, c.where) for c in d.culprits] == [
        ("loader.dataset.scale", "meta", "DataLoader worker 1")
    ]
    assert d.target == "cpu" and d.target_reason.startswith("cpu: a DataLoader worker")
    assert d.fixes[0].code == "loader.dataset.scale = loader.dataset.scale.to('cpu')"


def test_a_subset_is_looked_through_and_a_cpu_dataset_blames_nothing() -> None:
    ds = Scaled(torch.randn(4, 3), torch.ones(3), torch.zeros(3, device="meta"))
    train = Subset(ds, [0, 1])
    d = ipydevice.diagnose(_error(train), namespace={"train": train})
    assert [c.name for c in d.culprits] == ["train.dataset.offset"]
    clean = Scaled(torch.randn(4, 3), torch.ones(3), torch.zeros(3))
    d = ipydevice.diagnose(_error(clean), namespace={"clean": clean})
    assert d.is_device_error and not d.culprits and not d.fixes


def test_the_cell_that_built_it_drops_the_device_moves_and_keeps_the_dtype() -> None:
    name = "<ipython-input-9901-worker-reads>"
    line = "ds = Scaled(t.to(torch.float16), s.to(device), o.cuda())\n"
    linecache.cache[name] = (len(line), None, [line], name)
    try:
        ds = Scaled(torch.randn(4, 3), torch.ones(3, device="meta"), torch.zeros(3))
        d = ipydevice.diagnose(_error(ds), namespace={"ds": ds, "device": "meta"})
    finally:
        del linecache.cache[name]
    first = d.fixes[0]  # a meta tensor has no data to move back: the rebuild first
    assert first.scope == "source"
    assert first.code == "ds = Scaled(t.to(torch.float16), s, o.cuda())\n"
    assert d.fixes[1].code == "ds.scale = ds.scale.to('cpu')"
