"""A time budget: metadata reads go around user hooks, and what remains is bounded.

* Tensor subclasses' ``device``/``shape``/``dtype``/size are read with subclass
  ``__torch_function__`` disabled (once per scan): a costly ``__torch_function__``
  is never called by a diagnosis, an inventory or a checkup.
* Class attributes are read from the class dicts (``type.__dict__['__dict__']``
  along the MRO): a metaclass's ``__getattribute__`` is never called, and
  ``check()`` never calls an object's ``__getattribute__`` or ``__class__``
  (a lazy proxy would load).
* What user code cannot be avoided (a subclass's own Python ``device`` property)
  runs within ``time_budget`` seconds; then the scan stops and its notes say so.

Bounds are counts of calls and CPU time; wall-clock time only stops a hang.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
import torch
from cells import Notebook
from test_hostile import bounded

import ipydevice
from ipydevice import settings

SETUP = "import torch\nmodel = torch.nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)\n"


def busy(seconds: float) -> None:
    """Burns CPU (not sleep): CPU-time bounds then see every call."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class CostlyTensor(torch.Tensor):
    """A 1 ms ``__torch_function__`` that counts its calls."""

    calls: ClassVar[list[str]] = []

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        CostlyTensor.calls.append(getattr(func, "__name__", "?"))
        busy(0.001)
        return super().__torch_function__(func, types, args, kwargs or {})


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    CostlyTensor.calls.clear()
    Counting.calls.clear()
    saved = settings.current()
    yield
    settings.configure(time_budget=saved.time_budget)


def frame_error(nb: Notebook, holding: str) -> BaseException:
    nb.run(SETUP + f"def run(model, x):\n    {holding}\n    return model(x)\n")
    return nb.fails("out = run(model, x)\n")


def test_a_thousand_costly_subclass_tensors_are_read_without_torch_function() -> None:
    nb = Notebook()
    tensors = [torch.ones(2, 3) for _ in range(1000)]
    nb.ns["tensors"] = [t.as_subclass(CostlyTensor) for t in tensors]
    solo = torch.ones(2, 3).as_subclass(CostlyTensor)
    CostlyTensor.calls.clear()
    # Five locals of 200 each (max_items): all 1,000 are scanned.
    exc = frame_error(
        nb, "a, b, c, d, e = (tensors[i : i + 200] for i in range(0, 1000, 200)); f = a[0]"
    )
    CostlyTensor.calls.clear()
    with bounded("diagnose"):  # CPU seconds, and a wall-clock deadline for a hang
        start = time.process_time()
        d = ipydevice.diagnose(exc, namespace=nb.ns)
        cpu = time.process_time() - start
    assert CostlyTensor.calls == []  # metadata reads: not one __torch_function__ call
    assert cpu < 1.0, cpu
    assert d.is_device_error and [c.name for c in d.culprits][:1] == ["x"]
    row = next(r for r in d.records if r.type_name == "CostlyTensor")
    assert (row.device, row.shape, row.dtype) == ("cpu", "(2, 3)", "float32")
    inv = ipydevice.inventory({"tensors": nb.ns["tensors"][:5], "t": solo})
    assert ipydevice.check(*nb.ns["tensors"][:50], namespace={}) is not None
    assert CostlyTensor.calls == []
    assert [(r.name, r.device, r.shape) for r in inv.records if r.name == "t"] == [
        ("t", "cpu", "(2, 3)")
    ]


class Counting(type):
    """A metaclass whose ``__getattribute__`` sleeps 2 s once armed, and counts."""

    calls: ClassVar[list[str]] = []
    armed: ClassVar[bool] = False

    def __getattribute__(cls, name: str) -> Any:
        if Counting.armed:
            Counting.calls.append(name)
            time.sleep(2)
        return super().__getattribute__(name)


class Slow(metaclass=Counting):
    pass


class SlowBatch(metaclass=Counting):
    """A dataclass-like holder (``is_dataclass`` would ask the metaclass)."""

    def __init__(self) -> None:
        self.inputs = torch.ones(2)


def test_a_slow_metaclass_is_never_asked() -> None:
    nb = Notebook()
    nb.ns.update(slow=Slow(), batch=SlowBatch(), cls=Slow)
    Counting.armed = True
    try:
        exc = frame_error(nb, "held = [slow, batch, cls, {'b': batch}]")
        Counting.calls.clear()
        d = ipydevice.diagnose(exc, namespace=nb.ns)
        ipydevice.inventory(nb.ns)
        ipydevice.check(nb.ns["slow"], nb.ns["batch"], namespace=nb.ns)
        ipydevice.check(namespace=nb.ns)
        assert Counting.calls == []
    finally:
        Counting.armed = False
    assert d.is_device_error and [c.name for c in d.culprits][:1] == ["x"]


class SlowPair(tuple, metaclass=Counting):
    """A batch tuple whose class asks a slow metaclass for every attribute."""


def test_a_culprit_held_by_a_slow_metaclass_class_gets_its_fix_without_asking() -> None:
    nb = Notebook()
    nb.run(SETUP)
    nb.ns["pair"] = SlowPair((torch.randn(3, 4), torch.ones(2)))
    Counting.armed = True
    try:
        exc = nb.fails("out = model(pair[0])\n")
        Counting.calls.clear()
        d = ipydevice.diagnose(exc, namespace=nb.ns)
        assert Counting.calls == []  # the fix planner read the class dicts, not the metaclass
    finally:
        Counting.armed = False
    assert d.is_device_error and d.culprits[0].name == "pair[0]"
    assert d.fixes


class LazyProxy:
    """A lazy-loading proxy: any attribute read (``__class__`` included) loads."""

    loads: ClassVar[list[str]] = []

    def __getattribute__(self, name: str) -> Any:
        LazyProxy.loads.append(name)
        return object.__getattribute__(self, name)


def test_check_never_loads_a_lazy_proxy() -> None:
    proxy = LazyProxy()
    namespace = {"proxy": proxy, "model": torch.nn.Linear(2, 2), "x": torch.ones(2)}
    LazyProxy.loads.clear()
    ipydevice.check(proxy, namespace=namespace)
    ipydevice.check(namespace=namespace)
    ipydevice.check(namespace=namespace, names=["proxy", "model"])
    ipydevice.inventory(namespace)
    assert LazyProxy.loads == []


class SlowDevice(torch.Tensor):
    """User code no reader can go around: a Python ``device`` property, 10 ms a read."""

    reads: ClassVar[int] = 0

    @property
    def device(self) -> Any:  # type: ignore[override]
        SlowDevice.reads += 1
        busy(0.01)
        return super().device


def test_unavoidable_user_code_is_bounded_by_the_time_budget() -> None:
    settings.configure(time_budget=0.2)
    nb = Notebook()
    nb.ns["tensors"] = [torch.ones(2).as_subclass(SlowDevice) for _ in range(1000)]
    exc = frame_error(nb, "a, b, c, d, e = (tensors[i : i + 200] for i in range(0, 1000, 200))")
    SlowDevice.reads = 0
    d = ipydevice.diagnose(exc, namespace=nb.ns)
    # 0.2 s at 10 ms a read: about 20 reads, not 1,000 or more (margin for the
    # scan's own time and a read or two per tensor).
    assert SlowDevice.reads <= 60, SlowDevice.reads
    notes = [n for n in d.notes if n.startswith("stopped after 0.2 s: ")]
    assert len(notes) == 1, d.notes
    assert d.is_device_error and [c.name for c in d.culprits][:1] == ["x"]
    SlowDevice.reads = 0
    inv = ipydevice.inventory({f"t{i}": t for i, t in enumerate(nb.ns["tensors"])})
    assert SlowDevice.reads <= 60, SlowDevice.reads
    assert any(n.startswith("stopped after 0.2 s: ") for n in inv.notes), inv.notes


def test_the_budget_is_a_setting() -> None:
    assert settings.Settings().time_budget == 2.0
    assert settings.configure(time_budget=0.5).time_budget == 0.5
    for bad in (0, -1.0, float("inf"), "1", True):
        with pytest.raises(ValueError, match="time_budget"):
            settings.configure(time_budget=bad)
    with settings.override(time_budget=3):
        assert settings.current().time_budget == 3


def test_the_budget_in_ipython() -> None:
    from shells import singleton_shell

    with singleton_shell() as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        shell.run_line_magic("config", "IPyDevice.time_budget = 0.75")
        assert settings.current().time_budget == 0.75
        doc = shell.find_line_magic("devices").__doc__
        assert "time_budget" in doc


class SleepyDevice(torch.Tensor):
    """A ``device`` property that sleeps (a remote lookup, a lock): 0.6 s a read."""

    reads: ClassVar[int] = 0

    @property
    def device(self) -> Any:  # type: ignore[override]
        SleepyDevice.reads += 1
        time.sleep(0.6)
        return super().device


class SleepyShape(torch.Tensor):
    """A variation: the ``shape`` is the slow read, and the budget is not spent by one."""

    reads: ClassVar[int] = 0
    pause: ClassVar[float] = 0.15

    @property
    def shape(self) -> Any:  # type: ignore[override]
        SleepyShape.reads += 1
        time.sleep(SleepyShape.pause)
        return super().shape


def test_the_budget_holds_inside_a_slow_read() -> None:
    """A read that outruns the budget stops every later read (the failing line's
    operands, the fix planner's, the audits'): the whole diagnosis costs the budget
    and the one read, and the panel says the scan stopped."""
    settings.configure(time_budget=0.4)
    nb = Notebook()
    nb.ns.update(t=torch.ones(3, 4).as_subclass(SleepyDevice))
    nb.ns["u"] = [torch.ones(3, 4).as_subclass(SleepyDevice) for _ in range(3)]
    exc = frame_error(nb, "x = t if u else x")
    ipydevice.diagnose(frame_error(nb, "pass"), namespace={"x": nb.ns["x"]})  # warm
    SleepyDevice.reads = 0
    start = time.perf_counter()
    d = ipydevice.diagnose(exc, namespace=nb.ns)
    took = time.perf_counter() - start
    assert SleepyDevice.reads == 1, SleepyDevice.reads
    assert took < 0.4 + 0.6 + 1.0, took  # the budget, the one read, the diagnosis' own time
    assert any(n.startswith("stopped after 0.4 s") for n in d.notes), d.notes
    assert d.is_device_error
    for run in (lambda: ipydevice.inventory(nb.ns), lambda: ipydevice.check(namespace=nb.ns)):
        SleepyDevice.reads = 0
        notes = run().notes
        assert SleepyDevice.reads == 1, SleepyDevice.reads
        assert any("SleepyDevice" in n or n.startswith("stopped after") for n in notes), notes


def test_a_slow_class_is_read_twice_per_diagnosis_and_each_object_once() -> None:
    """Two slow reads make a class slow (one may be a first-use pause): no third
    object of the class is read, and no object read slowly is read again."""
    settings.configure(time_budget=2.0)  # a tenth: 0.2 s; each read takes 0.25 s
    SleepyShape.pause = 0.25
    nb = Notebook()
    nb.ns["many"] = [torch.ones(3, 4).as_subclass(SleepyShape) for _ in range(20)]
    exc = frame_error(nb, "x = many[0] if many else x")
    SleepyShape.reads = 0
    d = ipydevice.diagnose(exc, namespace=nb.ns)
    assert SleepyShape.reads <= 2, SleepyShape.reads
    assert SleepyShape.reads == 1 or any("SleepyShape's metadata took" in n for n in d.notes)
    assert not any(n.startswith("stopped after") for n in d.notes), d.notes
    SleepyShape.reads = 0
    ipydevice.diagnose(exc, namespace=nb.ns)  # a new diagnosis reads them again
    assert 1 <= SleepyShape.reads <= 2
