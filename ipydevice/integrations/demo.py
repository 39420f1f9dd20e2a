"""A terminal tour of the classic device errors and what ipydevice says about them.

Runs on a CPU-only machine: ``FakeTensorMode`` gives real ``cuda:0`` messages
without a GPU, and the ``meta`` device stands in for one where FakeTensor cannot.
Each scenario is two small notebook cells, ``In [1]`` that sets up and ``In [2]``
that fails (their sources registered in ``linecache`` under the names IPython gives
cells, so that locations read ``In [1], line 2``), run in a fresh namespace and
diagnosed. The fake GPU's machinery is kept out of the cells shown: a scenario
that puts tensors on ``cuda`` runs its cells inside ``FakeTensorMode`` (and
``torch.no_grad()``), and :data:`_PRELUDE` (run first, not shown) defines
``on_fake_gpu``.
"""

from __future__ import annotations

import contextlib
import itertools
import linecache
import textwrap
from collections.abc import Iterator
from typing import Any

__all__ = ["SCENARIOS", "main", "run_scenario"]

_PRELUDE = """
import torch
import torch.nn as nn

def on_fake_gpu(module, device='cuda:0'):
    # A module whose parameters are (fake) GPU tensors, so no GPU is needed.
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            m._parameters[name] = nn.Parameter(torch.empty(p.shape, device=device), requires_grad=False)
    return module
"""

#: Printed once before the scenarios: what the cells shown take for granted.
FAKE_GPU_NOTE = (
    "No GPU needed: cells that use cuda run under PyTorch's FakeTensorMode (tensors with a device,\n"
    "a shape and a dtype but no data), on_fake_gpu(module) puts a module's parameters on that fake\n"
    "GPU, and the meta device stands in for a GPU elsewhere."
)

SCENARIOS: list[tuple[str, str, str]] = [
    (
        "The classic: the model is on the GPU, the batch is not",
        """
        model = on_fake_gpu(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)))
        inputs = torch.randn(8, 16)
        """,
        "logits = model(inputs)\n",
    ),
    (
        "Two GPUs: the activations are on cuda:1, the layer on cuda:0",
        """
        head = on_fake_gpu(nn.Linear(32, 4), 'cuda:0')
        hidden = torch.empty(8, 32, device='cuda:1')
        """,
        "out = head(hidden)\n",
    ),
    (
        "A tensor attribute that model.to() never moves (meta stands in for the GPU)",
        """
        class CustomLayer(nn.Module):
            def __init__(self):
                super().__init__()
                self.cache = torch.randn(10)
                self.weight = nn.Parameter(torch.randn(10))

            def forward(self, x):
                return x + self.cache + self.weight

        model = CustomLayer().to('meta')
        x = torch.randn(10, device='meta')
        """,
        "out = model(x)\n",
    ),
    (
        "Class weights of the loss left on the CPU",
        """
        model = nn.Linear(4, 3).to('meta')
        criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5]))
        x = torch.randn(8, 4, device='meta')
        y = torch.zeros(8, dtype=torch.long, device='meta')
        """,
        "loss = criterion(model(x), y)\n",
    ),
    (
        "A factory call inside forward() without device=",
        """
        class PosEnc(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)

            def forward(self, x):
                pos = torch.arange(x.shape[-1])
                return self.proj(x) + pos

        model = PosEnc().to('meta')
        x = torch.randn(2, 4, device='meta')
        """,
        "out = model(x)\n",
    ),
]

_counter = itertools.count(1)


def _cell(source: str, namespace: dict[str, Any], number: int) -> BaseException | None:
    """Runs ``source`` as cell ``In [number]``: named as IPython names a cell, its
    text in ``linecache``; each name unique in the process (a hash IPython would give)."""
    name = f"<ipython-input-{number}-demo{next(_counter)}>"
    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    try:
        exec(compile(source, name, "exec"), namespace)
    except Exception as exc:
        return exc
    return None


def _on_fake_gpu(setup: str, failing: str) -> bool:
    """A scenario whose cells put tensors on ``cuda``, which this machine may not have."""
    return any(word in setup + failing for word in ("cuda", "on_fake_gpu("))


@contextlib.contextmanager
def _fake_gpu(on: bool) -> Iterator[None]:
    if not on:
        yield
        return
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True), torch.no_grad():
        yield


def run_scenario(setup: str, failing: str) -> Any:
    """Runs one scenario's cells (``setup`` as ``In [1]``, ``failing`` as ``In [2]``)
    and returns the Diagnosis of the second's error (None if it did not fail)."""
    from ipydevice.pipeline.engine import diagnose

    namespace: dict[str, Any] = {"__name__": "__main__"}
    error = _cell(_PRELUDE, namespace, 0)
    with _fake_gpu(_on_fake_gpu(setup, failing)):
        error = error or _cell(textwrap.dedent(setup).lstrip("\n"), namespace, 1)
        if error is not None:
            raise error
        exc = _cell(failing, namespace, 2)
    return None if exc is None else diagnose(exc, namespace=namespace)


def _shown(number: int, source: str) -> str:
    """A cell as a notebook shows it: ``In [n]:`` before its first line."""
    prompt = f"    In [{number}]: "
    lines = source.strip("\n").splitlines()
    return "\n".join(
        ((prompt if i == 0 else " " * len(prompt)) + line).rstrip() for i, line in enumerate(lines)
    )


def main() -> int:
    """Prints each scenario's cells and ipydevice's report."""
    print(FAKE_GPU_NOTE)
    for number, (title, setup, failing) in enumerate(SCENARIOS, 1):
        print(f"\n{'━' * 100}\n{number}. {title}\n")
        print(_shown(1, textwrap.dedent(setup)) + "\n")
        print(_shown(2, failing))
        diagnosis = run_scenario(setup, failing)
        print(f"\n{diagnosis}" if diagnosis is not None else "(no error)")
    print(
        f"\n{'━' * 100}\nIn a notebook: %load_ext ipydevice shows this under the traceback, with Apply buttons."
    )
    return 0
