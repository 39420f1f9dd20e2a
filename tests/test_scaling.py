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
import ipydevice.settings
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


WIDE_MODEL = """
import torch
import torch.nn as nn


class Leaf(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4, device="meta")

    def forward(self, x):
        return self.proj(x) + torch.zeros(4)  # on the CPU


class Wide(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Identity() for _ in range(n)] + [Leaf()])

    def forward(self, x):
        return self.blocks[-1](x)


model = Wide(100_000)
x = torch.zeros(2, 4, device="meta")
"""


def test_the_failing_submodule_is_named_from_the_self_chain_without_walking_the_model(
    monkeypatch: Any,
) -> None:
    # 100,001 modules; the layer that failed is the last: a walk of max_modules
    # never reaches it, the frames' ``self`` chain names it.
    from ipydevice.collect import probe

    nb = Notebook()
    nb.run(WIDE_MODEL)
    exc = nb.fails("y = model(x)\n")
    reads = 0
    module_dict = probe.module_dict

    def counted(obj: Any) -> Any:
        nonlocal reads
        reads += 1
        return module_dict(obj)

    monkeypatch.setattr(probe, "module_dict", counted)
    d = ipydevice.diagnose(exc, namespace=nb.ns)
    assert d.is_device_error
    assert d.failing_module.startswith("model.blocks[100000]"), d.failing_module
    # the model's registries read about max_modules times, not once per module
    limit = ipydevice.settings.current().max_modules
    assert reads < 2 * limit, reads


def test_a_model_is_walked_once_however_deep_the_failing_chain(monkeypatch: Any) -> None:
    # model -> blocks[0] -> inner -> leaf: the views of the inner modules are cut
    # out of the model's, each module's registries read once.
    from ipydevice.collect import probe

    nb = Notebook()
    nb.run(
        WIDE_MODEL.replace("model = Wide(100_000)", "")
        + """
class Nest(nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.inner = Nest(depth - 1) if depth else Leaf()
        self.side = nn.ModuleList([nn.Linear(2, 2) for _ in range(50)])

    def forward(self, x):
        return self.inner(x)


model = Nest(6)
"""
    )
    exc = nb.fails("y = model(x)\n")
    seen: list[int] = []
    module_dict = probe.module_dict

    def counted(obj: Any) -> Any:
        seen.append(id(obj))
        return module_dict(obj)

    monkeypatch.setattr(probe, "module_dict", counted)
    d = ipydevice.diagnose(exc, namespace=nb.ns)
    assert d.failing_module.startswith("model" + ".inner" * 6), d.failing_module
    modules = len(list(nb.ns["model"].modules()))
    assert len(seen) < 2 * modules, (len(seen), modules)


EXPERTS = """
import torch
import torch.nn as nn


class Leaf(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4, device="meta")

    def forward(self, x):
        mask = torch.zeros(4)  # made here: no name reaches it
        return self.proj(x) + mask


class Block(nn.Module):
    def __init__(self, experts):
        super().__init__()
        self.leaf = Leaf()
        self.experts = nn.ModuleList([nn.Identity() for _ in range(experts)])

    def forward(self, x):
        return self.leaf(x)


class MoE(nn.Module):
    def __init__(self, experts):
        super().__init__()
        self.layers = nn.ModuleList([Block(experts) for _ in range(100)])

    def forward(self, x):
        return self.layers[-1](x)


x = torch.zeros(2, 4, device="meta")
"""


def test_a_search_for_a_frame_made_tensor_reads_the_same_in_a_wide_model(
    monkeypatch: Any,
) -> None:
    # 100 blocks of 30 or of 200 experts: naming ``mask`` (made in the failing
    # frame, held by no name) looks at up to max_objects objects, whatever the width;
    # the notes say where it stopped.
    from ipydevice.collect import scan, walk

    looked = 0

    def counted(module: Any, limit: int) -> Iterator[Any]:
        nonlocal looked
        for child in walk.module_children(module, limit):
            looked += 1
            yield child

    monkeypatch.setattr(scan, "module_children", counted)
    nb = Notebook()
    nb.run(EXPERTS)
    reads = []
    for experts in (30, 200):
        nb.run(f"model = MoE({experts})\n")
        exc = nb.fails("y = model(x)\n")
        looked = 0
        with override(max_objects=1000, max_modules=500):
            d = ipydevice.diagnose(exc, namespace=nb.ns)
        reads.append(looked)
        assert d.failing_module.startswith("model.layers[99].leaf"), d.failing_module
        assert d.culprits[0].name == "mask in Leaf.forward", [f.name for f in d.culprits]
        assert "scan stopped after 1000 objects" in d.notes, d.notes
    # (before the budget: 100 x 30 and 100 x 200 children, 3,000 and 20,000)
    assert max(reads) <= 1000 + 200, reads


def test_the_names_picked_are_the_same_whichever_way_the_namespace_is_read() -> None:
    """A namespace mostly of tensors is read with an ``id()`` per name, one mostly of
    ints and strings by type first: both pick exactly the names a plain loop picks
    (the wanted objects and those that walk), in namespace order."""
    from ipydevice.collect.scan import WALK, Scan

    model = torch.nn.Linear(2, 2)
    wanted_tensor, other = torch.zeros(1), torch.zeros(1)
    for share in (0, 1, 10, 100):  # tensors per 100 names
        values: list[Any] = []
        for index in range(2_000):
            if index % 100 < share:
                values.append(wanted_tensor if index % 7 == 0 else other)
            else:
                values.append(index if index % 2 else f"s{index}")
        values[1_234] = model
        scan = Scan(ipydevice.settings.current())
        scan.add(wanted_tensor, (("local", "t"),), "f")
        scan.add(model, (("local", "m"),), "f")
        wanted = {id(wanted_tensor)}
        got = scan._picked(values, list(map(type, values)), wanted)
        plain = [
            i
            for i, value in enumerate(values)
            if id(value) in wanted or scan._type_facts(value)[1] == WALK
        ]
        assert got == plain, share
        assert 1_234 in got
