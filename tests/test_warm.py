"""The failing path's warm-up (``ipydevice.integrations.ipython_warm``); the imports
themselves are checked in a fresh interpreter by ``tests/test_ipython.py``."""

from __future__ import annotations

import gc

import pytest

from ipydevice.integrations import ipython_warm


def test_the_warm_up_ends_with_a_full_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    """The objects its imports made would set off a full collection in the first
    failing cell (hundreds of milliseconds beside a large model): it runs here."""
    calls: list[tuple[object, ...]] = []
    monkeypatch.setattr(gc, "collect", lambda *args: calls.append(args) or 0)
    ipython_warm.warm(widgets=False)
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
    ipython_warm.warm(widgets=False)
    ((exc, namespace),) = seen
    assert str(exc) == ipython_warm.SAMPLE and exc.__traceback__ is None and namespace == {}


def test_the_warm_up_runs_once_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the extension again does not warm up again (the imports stay made; the
    full collection it ends with would cost every reload hundreds of milliseconds)."""
    import sys

    runs: list[bool] = []
    monkeypatch.setattr(ipython_warm, "warm", runs.append)
    monkeypatch.setattr(ipython_warm, "_WARMED", [False])
    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch", object()))
    for _ in range(3):  # three loads of the extension, two cells each
        warmer = ipython_warm.Warmer(lambda: False)
        warmer.after_cell()
        warmer.after_cell()
    assert runs == [False]
