"""The failing path's warm-up (``ipydevice.integrations.ipython_warm``): small steps on
the kernel's loop while it is idle. The imports themselves are checked in a fresh
interpreter here and by ``tests/test_ipython.py``; in a real kernel by ``tests/test_kernel.py``."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from typing import Any

import pytest

from ipydevice.integrations import ipython_warm


class Loop:
    """A kernel's ``io_loop``: what was scheduled, run when the test says so."""

    def __init__(self) -> None:
        self.due: list[Any] = []

    def call_later(self, delay: float, callback: Any) -> None:
        self.due.append(callback)

    def run(self, limit: int = 10_000) -> int:
        ran = 0
        while self.due and ran < limit:
            self.due.pop(0)()
            ran += 1
        return ran


class Lock:
    def __init__(self) -> None:
        self.held = False

    def locked(self) -> bool:
        return self.held


class Kernel:
    def __init__(self) -> None:
        self.io_loop = Loop()
        self._main_asyncio_lock = Lock()


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """A process that has not warmed up, with torch imported, and the steps counted."""
    monkeypatch.setattr(ipython_warm, "_WARMED", [False])
    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch", object()))
    counted: list[bool] = []

    def steps(widgets: bool) -> Any:
        counted.append(widgets)
        yield
        yield

    monkeypatch.setattr(ipython_warm, "steps", steps)
    return counted


def test_the_warm_up_ends_with_a_full_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    """The objects its imports made would set off a full collection in the first
    failing cell (hundreds of milliseconds beside a large model): it runs here."""
    calls: list[tuple[object, ...]] = []
    monkeypatch.setattr(gc, "collect", lambda *args: calls.append(args) or 0)
    for _ in ipython_warm.steps(widgets=False):
        assert calls == []
    assert calls == [()]


def test_the_warm_up_diagnoses_only_its_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing of the user's is read: the sample is diagnosed with an empty namespace."""
    from ipydevice.pipeline import engine

    seen: list[tuple[BaseException, object]] = []
    diagnose = engine.diagnose

    def noting(exc: BaseException, **kwargs: object) -> object:
        seen.append((exc, kwargs.get("namespace")))
        return diagnose(exc, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "diagnose", noting)
    monkeypatch.setattr(gc, "collect", lambda *args: 0)
    for _ in ipython_warm.steps(widgets=False):
        pass
    ((exc, namespace),) = seen
    assert str(exc) == ipython_warm.SAMPLE and exc.__traceback__ is None and namespace == {}


def test_nothing_is_warmed_inside_a_cell_only_on_the_idle_loop(fresh: list[bool]) -> None:
    kernel = Kernel()
    warmer = ipython_warm.Warmer(kernel, lambda: True)
    warmer.cell_started()
    warmer.after_cell()  # the cell's end schedules; it does not warm
    assert fresh == [] and len(kernel.io_loop.due) == 1 and not warmer.done
    kernel.io_loop.run()
    assert fresh == [True] and warmer.done and ipython_warm._WARMED == [True]


@pytest.mark.parametrize("busy", ["cell", "request"])
def test_a_cell_or_a_request_holds_the_warm_up_until_the_kernel_is_idle(
    fresh: list[bool], busy: str
) -> None:
    kernel = Kernel()
    warmer = ipython_warm.Warmer(kernel, lambda: False)
    warmer.after_cell()
    kernel.io_loop.run(limit=2)  # two steps made
    if busy == "cell":
        warmer.cell_started()
    else:  # a request without a cell (a completion, user_expressions): no cell's end
        kernel._main_asyncio_lock.held = True
    for _ in range(5):  # it looks again, later, and does nothing
        assert kernel.io_loop.run(limit=1) == 1 and len(kernel.io_loop.due) == 1
    assert not warmer.done
    if busy == "cell":
        warmer.after_cell()  # already scheduled: not twice
        assert len(kernel.io_loop.due) == 1
    kernel._main_asyncio_lock.held = False
    kernel.io_loop.run()
    assert warmer.done and fresh == [False]


def test_the_warm_up_runs_once_a_process(fresh: list[bool]) -> None:
    """Loading the extension again does not warm up again (the imports stay made; the
    full collection it ends with would cost every reload hundreds of milliseconds)."""
    for _ in range(3):  # three loads of the extension, two cells each
        kernel = Kernel()
        warmer = ipython_warm.Warmer(kernel, lambda: False)
        warmer.after_cell()
        kernel.io_loop.run()
        warmer.after_cell()
        kernel.io_loop.run()
    assert fresh == [False]


@pytest.mark.parametrize("kernel", [None, object()], ids=["terminal", "no loop"])
def test_without_a_kernel_loop_nothing_is_warmed_ahead(fresh: list[bool], kernel: Any) -> None:
    warmer = ipython_warm.Warmer(kernel, lambda: False)
    warmer.after_cell()
    assert warmer.done and fresh == [] and ipython_warm._WARMED == [False]


def test_an_unloaded_extension_takes_no_further_step(fresh: list[bool]) -> None:
    kernel = Kernel()
    warmer = ipython_warm.Warmer(kernel, lambda: False)
    warmer.after_cell()
    warmer.stop()
    kernel.io_loop.run()
    assert fresh == [] and not warmer.done


def test_a_failing_step_ends_the_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """The failing path imports it again and reports it; the loop goes on."""
    monkeypatch.setattr(ipython_warm, "_WARMED", [False])
    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch", object()))

    def steps(widgets: bool) -> Any:
        yield
        raise ImportError("broken")

    monkeypatch.setattr(ipython_warm, "steps", steps)
    kernel = Kernel()
    warmer = ipython_warm.Warmer(kernel, lambda: False)
    warmer.after_cell()
    kernel.io_loop.run()
    assert warmer.done and kernel.io_loop.due == []


def test_imports_are_read_from_the_source_type_checking_ones_left_out() -> None:
    found = ipython_warm.imports_of("ipydevice.diagnosis.families.load_location")
    assert "ipydevice.family" in found and "ipydevice.diagnosis.devices" in found
    # under TYPE_CHECKING, or imported in a function: not at import
    assert "ipydevice.collect.frames" not in found and "ipydevice.collect.cell" not in found
    # a package's module named in `from package import module`
    assert "ipydevice.render" in ipython_warm.imports_of("ipydevice.pipeline.engine")


STEPS_PROBE = r"""
import json, sys
import IPython
from ipydevice.integrations import ipython_warm
ours = lambda: {m for m in sys.modules if m.split(".")[0] == "ipydevice"}
before, wide, count = ours(), [], 0
for _ in ipython_warm.steps(False):
    now = ours()
    new, count, before = sorted(now - before, key=len), count + 1, now
    if new and any(m != new[0] and not m.startswith(new[0] + ".") for m in new):
        wide.append(new)
missing = [m for m in ipython_warm.ROOTS if m not in sys.modules]
print(json.dumps({"wide": wide, "steps": count, "missing": missing}))
"""


def test_each_step_imports_one_module_or_one_package() -> None:
    """Small steps: a request that arrives waits for one module's import at most, or
    a package's with the modules its ``__init__`` imports (their own imports made)."""
    done = subprocess.run(
        [sys.executable, "-c", STEPS_PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["wide"] == [] and probe["missing"] == [] and probe["steps"] > 50, probe
