"""Running notebook-style cells without IPython, for engine tests.

Each cell gets a unique file name and its source goes into ``linecache``, as
IPython does, so tracebacks, ``ast`` lookups and source fixes see real code.
"""

from __future__ import annotations

import ast
import itertools
import linecache
from typing import Any

_counter = itertools.count(1)


class Notebook:
    """A dict namespace plus ``run`` for cells."""

    def __init__(self) -> None:
        self.ns: dict[str, Any] = {"__name__": "__main__"}

    def cell(self, source: str) -> str:
        """Registers ``source`` as a cell and returns its file name."""
        name = f"<ipython-input-{next(_counter)}-test>"
        lines = source.splitlines(keepends=True)
        linecache.cache[name] = (len(source), None, lines, name)
        return name

    def run(self, source: str) -> Any:
        """Runs a cell that must succeed; returns the value of a last expression."""
        exc = self.error(source)
        if exc is not None:
            raise AssertionError(f"cell failed: {type(exc).__name__}: {exc}") from exc
        return self.ns.get("_")

    def error(self, source: str) -> BaseException | None:
        """Runs a cell and returns the exception it raised (None if it ran)."""
        filename = self.cell(source)
        tree = ast.parse(source)
        try:
            exec(compile(tree, filename, "exec"), self.ns)
        except Exception as exc:
            return exc
        return None

    def fails(self, source: str) -> BaseException:
        """Runs a cell that must fail; returns its exception."""
        exc = self.error(source)
        assert exc is not None, "the cell was expected to fail"
        return exc


#: A Dataset whose ``__getitem__`` fails with a device error (a CPU table through a
#: layer on ``meta``): in a DataLoader worker, the error comes back from that worker.
FAILING_DATASET = """
import torch, torch.nn as nn
from torch.utils.data import DataLoader, Dataset
import ipydevice

class Pairs(Dataset):
    def __init__(self):
        self.proj = nn.Linear(4, 4).to("meta")
        self.table = torch.randn(8, 4)
    def __len__(self):
        return 8
    def __getitem__(self, i):
        return self.proj(self.table[i])

ds = Pairs()
"""
