"""The handler's work follows what the error is about, not what the session holds.

A namespace of a million names costs the names the failing code reads plus
``max_names`` (and never more than the time budget), with the truncation said;
a model of 100,000 modules costs the failing chain and ``max_modules``, and the
failing submodule is named from the frames' ``self`` chain.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from cells import Notebook

import ipydevice
from ipydevice.settings import override

CELL_SETUP = """
import torch
import torch.nn as nn
model = nn.Linear(4, 4)
"""


def padded(nb: Notebook, count: int) -> None:
    """``count`` names defined after the model, before the failing cell's own."""
    for index in range(count):
        nb.ns[f"pad{index}"] = index


def test_names_the_failing_code_reads_come_first_and_the_rest_is_bounded() -> None:
    nb = Notebook()
    nb.run(CELL_SETUP)
    padded(nb, 500)
    nb.ns["batch"] = torch.zeros(2, 4, device="meta")  # the 500th name and more
    exc = nb.fails("out = model(batch)\n")
    with override(max_names=50):
        d = ipydevice.diagnose(exc, namespace=nb.ns)
    assert d.is_device_error
    names = [f.name for f in d.culprits]
    assert names and names[0] in ("model", "batch"), names
    assert {"model", "batch"} <= {r.name for r in d.records}, [r.name for r in d.records]
    assert any(
        note.startswith("namespace: only 50 of its names were looked at") for note in d.notes
    ), d.notes


class SlowNamespace(Mapping[str, Any]):
    """A namespace whose ``slow*`` names take 50 ms each to read, and that records
    every name read."""

    def __init__(self, names: dict[str, Any]) -> None:
        self.names = names
        self.read: list[str] = []

    def __getitem__(self, key: str) -> Any:
        self.read.append(key)
        if key.startswith("slow"):
            time.sleep(0.05)
        return self.names[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


def test_a_namespace_slow_to_read_stops_at_the_time_budget() -> None:
    nb = Notebook()
    nb.run(CELL_SETUP)
    nb.ns["batch"] = torch.zeros(2, 4, device="meta")
    exc = nb.fails("out = model(batch)\n")
    names = dict(nb.ns)
    for index in range(40):  # 2 s to read them all
        names[f"slow{index}"] = index
    names["last"] = torch.zeros(1)
    namespace = SlowNamespace(names)
    with override(time_budget=0.3):
        d = ipydevice.diagnose(exc, namespace=namespace)
    # the names the cell reads were read (first), and named
    assert namespace.read[:2] == ["model", "batch"], namespace.read[:5]
    assert {"model", "batch"} <= {r.name for r in d.records}
    # the rest only while the budget lasted: the last name never read
    assert "last" not in namespace.read
    assert sum(name.startswith("slow") for name in namespace.read) < 20, namespace.read
    assert any("the time_budget setting" in note for note in d.notes), d.notes
