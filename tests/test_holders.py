"""Holder kinds: tensors held by plain objects, slotted, attrs and pydantic
classes, private stores, tuples inside dicts and closures are listed by
``%devices``/``inventory()`` and named in a diagnosis by the path the user
writes, with a fix that moves them."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from cells import Notebook
from shells import run, singleton_shell

import ipydevice
from ipydevice import plugins

torch = pytest.importorskip("torch")
attrs = pytest.importorskip("attrs")
pydantic = pytest.importorskip("pydantic")

HOLDERS = """
import functools
import torch, attrs, pydantic

class Slotted:
    __slots__ = ("table", "size")
    def __init__(self):
        self.table, self.size = torch.ones(3), 3

@attrs.define
class Weights:
    w: torch.Tensor

@attrs.define(frozen=True, slots=False)
class Frozen:
    bias: torch.Tensor

class Settings(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    embedding: torch.Tensor

class Storage:
    def __init__(self, **values):
        self._mapping = dict(values)

class Graph:
    '''keeps its tensors in a private store and serves them as attributes'''
    def __init__(self, **values):
        self.__dict__["_store"] = Storage(**values)
    def __getattr__(self, name):
        return self.__dict__["_store"]._mapping[name]
    def to(self, device):
        return Graph(**{k: v.to(device) for k, v in self._store._mapping.items()})

class Quiet:
    def __init__(self):
        self._cache = {"k": torch.ones(2)}

class Helper:
    def __init__(self):
        self.table = torch.ones(3)
    def __call__(self, x):
        return x + self.table

def make_scale():
    scale = torch.ones(3)
    return lambda x: x * scale

def shift(x, by):
    return x + by

slotted = Slotted()
weights = Weights(torch.ones(2))
frozen = Frozen(torch.ones(2))
settings = Settings(embedding=torch.ones(4))
graph = Graph(x=torch.ones(5), edge_index=torch.zeros(2, 4))
quiet = Quiet()
helper = Helper()
pair = {"a": (1, torch.ones(2))}
scale = make_scale()
shifted = functools.partial(shift, by=torch.ones(3))
"""


def notebook() -> Notebook:
    nb = Notebook()
    nb.run(textwrap.dedent(HOLDERS))
    return nb


@pytest.mark.parametrize(
    "name",
    [
        "slotted",
        "weights",
        "frozen",
        "settings",
        "graph",
        "quiet",
        "helper",
        "pair",
        "scale",
        "shifted",
    ],
)
def test_devices_lists_the_tensors_every_holder_kind_holds(name: str) -> None:
    rows = {r.name: r for r in ipydevice.inventory(notebook().ns).records}
    assert name in rows, sorted(rows)
    assert rows[name].device == "cpu" and rows[name].nbytes > 0


def test_the_devices_magic_lists_slotted_attrs_and_pydantic_holders() -> None:
    names = ("slotted", "weights", "settings", "graph", "helper")
    with singleton_shell() as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        run(shell, textwrap.dedent(HOLDERS))
        try:
            listed = shell.run_line_magic("devices", "")
            text = str(listed)
            for name in names:
                assert name in {r.name for r in listed.records}, text
            deep = shell.run_line_magic("devices", "slotted weights settings")
            assert {"slotted.table", "weights.w", "settings.embedding"} <= {
                r.name for r in deep.records
            }
        finally:
            for name in [*names, "frozen", "quiet", "pair", "scale", "shifted"]:
                shell.user_ns.pop(name, None)


def test_the_in_depth_view_names_what_a_holder_holds_as_the_user_writes_it() -> None:
    nb = notebook()
    seen = {r.name for r in ipydevice.inventory(nb.ns, names=list(nb.ns)[1:]).records}
    for name in (
        "slotted.table",
        "weights.w",
        "frozen.bias",
        "settings.embedding",
        "graph.x",
        "graph.edge_index",
        "quiet._cache",
        "helper.table",
        "shifted.keywords",
    ):
        assert name in seen, (name, sorted(seen))


def test_the_in_depth_view_lists_a_holders_contents_at_any_depth_and_counts_them() -> None:
    """``%devices h`` for a slotted object whose tensor sits in a tuple inside a dict:
    the tensor's row (``h.store['pair'][1]``), and each holder on the way counted as
    the namespace listing counts it."""
    nb = Notebook()
    nb.run(
        "import torch\n"
        "class Holder:\n    __slots__ = ('store',)\n"
        "    def __init__(self):\n        self.store = {'pair': (1, torch.zeros(5))}\n"
        "h = Holder()"
    )
    rows = {r.name: r for r in ipydevice.inventory(nb.ns, names=["h"]).records}
    assert rows["h.store['pair'][1]"].device == "cpu"
    for name in ("h", "h.store", "h.store['pair']"):
        assert [(s.device, s.count) for s in rows[name].shares] == [("cpu", 1)], name


def test_nested_holders_of_other_classes_are_walked_too() -> None:
    """Variations no rule names: a pydantic model inside an attrs class inside a
    dict, a slotted subclass, a helper held by a helper."""
    nb = notebook()
    nb.run(
        textwrap.dedent(
            """
            class Inner(pydantic.BaseModel):
                model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
                codes: torch.Tensor

            @attrs.define
            class Outer:
                inner: Inner

            class MoreSlots(Slotted):
                __slots__ = ("extra",)

            class Pipeline:
                def __init__(self):
                    self.pre = Helper()

            registry = {"enc": Outer(Inner(codes=torch.ones(3, device="meta")))}
            more = MoreSlots()
            more.extra = torch.ones(2, device="meta")
            pipeline = Pipeline()
            """
        )
    )
    inventory = ipydevice.inventory(nb.ns)
    rows = {r.name: r for r in inventory.records}
    assert rows["registry"].device == "meta"
    assert rows["more"].device == "mixed"
    assert rows["pipeline"].device == "cpu"
    deep = ipydevice.inventory(nb.ns, names=["registry", "more", "pipeline"])
    assert "more.extra" in {r.name for r in deep.records}


def _culprit(nb: Notebook, cell: str) -> Any:
    d = ipydevice.diagnose(nb.fails(cell), namespace=nb.ns)
    assert d.is_device_error and d.target == "meta", d
    return d


@pytest.mark.parametrize(
    ("cell", "culprit"),
    [
        ("helper(x)\n", "helper.table"),
        ("slotted.table + x\n", "slotted.table"),
        ("settings.embedding[:3] + x\n", "settings.embedding"),
        ("scale(x)\n", "scale.__closure__[0].cell_contents"),
    ],
)
def test_a_tensor_in_a_holder_is_named_by_its_path_and_moved(cell: str, culprit: str) -> None:
    nb = notebook()
    nb.run('x = torch.ones(3, device="meta")\n')
    d = _culprit(nb, cell)
    assert d.culprits[0].name == culprit, d
    fix = next(f for f in d.fixes if f.scope == "namespace")
    assert fix.apply(nb.ns).ok
    assert nb.error(cell) is None


BAG = """
class Bag:
    '''keeps its tensors in a private list, serves them as bag[i]'''
    def __init__(self, *things):
        self._things = list(things)
    def __getitem__(self, index):
        return self._things[index]
    def __setitem__(self, index, value):
        self._things[index] = value

bag = Bag(torch.ones(2, device="meta"), torch.ones(2))
"""


def test_a_holder_kind_of_the_users_own_names_and_moves_what_it_holds() -> None:
    nb = notebook()
    nb.run(textwrap.dedent(BAG))
    assert "bag" not in {r.name for r in ipydevice.inventory(nb.ns).records}
    plugins.holder(nb.ns["Bag"], lambda bag: enumerate(bag._things))
    try:
        assert "__main__.Bag" in plugins.holders()[:1]
        rows = {r.name: r for r in ipydevice.inventory(nb.ns).records}
        assert rows["bag"].device == "mixed"
        d = ipydevice.diagnose(nb.fails("bag[0] + bag[1]\n"), namespace=nb.ns)
        assert d.target == "meta" and d.culprits[0].name == "bag[1]", d
        fix = next(f for f in d.fixes if f.scope == "namespace")
        assert fix.apply(nb.ns).ok
        assert nb.error("bag[0] + bag[1]\n") is None
    finally:
        assert plugins.remove("__main__.Bag")
    assert "bag" not in {r.name for r in ipydevice.inventory(nb.ns).records}


def test_a_users_holder_kind_that_raises_or_yields_junk_is_contained(monkeypatch: Any) -> None:
    monkeypatch.delenv("IPYDEVICE_DEBUG", raising=False)
    nb = notebook()
    nb.run(textwrap.dedent(BAG))

    def junk(bag: Any) -> Any:
        yield "not a pair"
        yield (object(), bag._things[0])
        yield ("ok", bag._things[1])
        raise RuntimeError("down")

    plugins.holder(lambda cls: cls.__name__ == "Bag", junk, name="junk")
    try:
        assert "bag" not in {r.name for r in ipydevice.inventory(nb.ns).records}
    finally:
        plugins.remove("junk")

    def endless(bag: Any) -> Any:
        while True:
            yield ("ok", bag._things[1])

    plugins.holder(nb.ns["Bag"], endless, name="endless")
    try:
        rows = {r.name: r for r in ipydevice.inventory(nb.ns).records}
        assert rows["bag"].device == "cpu"
    finally:
        plugins.remove("endless")


IDENTITY = """
x = torch.ones(3, device="meta")

class Pipeline:
    def __init__(self):
        self.steps = {"pre": Helper()}

pipeline = Pipeline()

def run(h, x):
    return x + h.table
"""


@pytest.mark.parametrize(
    ("cell", "culprit", "fix"),
    [
        (  # ``self`` of a method frame, found under a dict inside another object
            "pipeline.steps['pre'](x)\n",
            "pipeline.steps['pre'].table",
            "pipeline.steps['pre'].table = pipeline.steps['pre'].table.to('meta')",
        ),
        ("run(helper, x)\n", "helper.table", "helper.table = helper.table.to('meta')"),
        ("graph.x[:3] + x\n", "graph.x", "graph = graph.to('meta')"),  # moved whole
        (
            "shifted(x)\n",
            "shifted.keywords['by']",
            "shifted.keywords['by'] = shifted.keywords['by'].to('meta')",
        ),
    ],
)
def test_frames_are_tied_back_to_the_namespace_by_identity(
    cell: str, culprit: str, fix: str
) -> None:
    nb = notebook()
    nb.run(textwrap.dedent(IDENTITY))
    d = _culprit(nb, cell)
    assert d.culprits[0].name == culprit, d
    assert d.fixes[0].code == fix, d
    assert d.fixes[0].apply(nb.ns).ok
    assert nb.error(cell) is None


def test_an_object_only_called_on_is_not_blamed_for_what_it_holds() -> None:
    """``scheduler.add_noise(clean, noise)``: a diffusers-style scheduler keeps tables
    it never reads in that call; the argument the operation read is the culprit."""
    nb = Notebook()
    nb.run(
        textwrap.dedent("""
        import torch

        class Scheduler:
            def __init__(self):
                self.betas = torch.linspace(0, 1, 10)        # stale, never read below
                self.timesteps = torch.arange(10)
            def add_noise(self, clean, noise):
                return clean * 0.5 + noise * 0.5

        scheduler = Scheduler()
        clean = torch.ones(3, device="meta")
        noise = torch.ones(3)
        """)
    )
    d = _culprit(nb, "noisy = scheduler.add_noise(clean, noise)\n")
    assert [c.name for c in d.culprits] == ["noise"], d


def test_a_class_seen_by_a_scan_is_not_kept_alive() -> None:
    import gc
    import weakref

    nb = Notebook()
    nb.run(
        "import torch\nclass Box:\n    def __init__(self):\n        self.t = torch.ones(2)\nbox = Box()\n"
    )
    assert "box" in {r.name for r in ipydevice.inventory(nb.ns).records}
    gone = weakref.ref(nb.ns["Box"])
    del nb.ns["Box"], nb.ns["box"]
    gc.collect()
    assert gone() is None


DEQUES = """
import collections

class Recent(collections.deque):
    '''a deque subclass whose own iteration must not run'''
    def __iter__(self):
        raise AssertionError("iterated")

window = collections.deque([torch.ones(3), torch.ones(3)], maxlen=4)
history = {"recent": Recent([torch.ones(3, device="meta"), torch.ones(3)])}
"""


@pytest.mark.parametrize(
    ("cell", "culprit"),
    [("window[1] + x\n", "window[1]"), ("history['recent'][1] + x\n", "history['recent'][1]")],
)
def test_a_tensor_in_a_deque_is_named_and_moved(cell: str, culprit: str) -> None:
    nb = notebook()
    nb.run(textwrap.dedent(DEQUES) + 'x = torch.ones(3, device="meta")\n')
    d = _culprit(nb, cell)
    assert culprit in [c.name for c in d.culprits], d
    fix = next(f for f in d.fixes if f.scope == "namespace")
    assert fix.apply(nb.ns).ok
    assert nb.error(cell) is None
    rows = {r.name: r for r in ipydevice.inventory(nb.ns).records}
    assert rows["window"].detail == "2 items" and "history" in rows
