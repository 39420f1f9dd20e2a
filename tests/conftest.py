"""Test settings: ipydevice fails loud here (IPYDEVICE_DEBUG=1)."""

from __future__ import annotations

import os

os.environ["IPYDEVICE_DEBUG"] = "1"

import pytest
from cells import Notebook


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
