"""Test settings: ipydevice fails loud here (IPYDEVICE_DEBUG=1)."""

from __future__ import annotations

import linecache
import os

os.environ["IPYDEVICE_DEBUG"] = "1"

import pytest
from cells import Notebook
from hypothesis import settings

from ipydevice import settings as ipydevice_settings

# CI (.ci/run sets HYPOTHESIS_PROFILE=ci) draws the same examples on every run, so a
# green main stays green; local runs explore new ones (and keep failures in .hypothesis/).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# The time budget is wall-clock: on a busy machine a big (but bounded) scan could
# stop early and add a note the test does not expect. Tests of the budget set
# their own (tests/test_budget.py); subprocesses keep the default.
ipydevice_settings.configure(time_budget=60.0)


@pytest.fixture(autouse=True)
def fresh_kernel_cells() -> None:
    """Each test runs in a fresh kernel: the cells earlier tests registered in linecache
    (as IPython does) are forgotten, so one test's ``model.to('cpu')`` is no part of the
    next one's notebook (the placed-part rule reads the notebook's earlier cells)."""
    for name in [n for n in list(linecache.cache) if str(n).endswith("-test>")]:
        linecache.cache.pop(name, None)


@pytest.fixture
def nb() -> Notebook:
    """A namespace that runs cells the way IPython does (source in linecache)."""
    return Notebook()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
