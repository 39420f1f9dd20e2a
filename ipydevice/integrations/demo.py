"""A terminal tour of the classic device errors and what ipydevice says about them.

Runs on a CPU-only machine: ``FakeTensorMode`` gives real ``cuda:0`` messages
without a GPU, and the ``meta`` device stands in for one where FakeTensor cannot.
Each scenario is run as a small notebook cell (its source registered in
``linecache``, as IPython does), fails for real, and is diagnosed.
"""

from __future__ import annotations

import itertools
import linecache
import textwrap
from typing import Any

__all__ = ["SCENARIOS", "main", "run_scenario"]

_PRELUDE = """
import torch
import torch.nn as nn
from torch._subclasses.fake_tensor import FakeTensorMode

def on_fake_gpu(module, device='cuda:0'):
    # A module whose parameters are (fake) GPU tensors, so no GPU is needed.
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            m._parameters[name] = nn.Parameter(torch.empty(p.shape, device=device), requires_grad=False)
    return module
"""

SCENARIOS: list[tuple[str, str, str]] = [
    (
        "The classic: the model is on the GPU, the batch is not",
        """
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        with mode, torch.no_grad():
            model = on_fake_gpu(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)))
        inputs = torch.randn(8, 16)
        """,
        "with mode, torch.no_grad():\n    logits = model(inputs)\n",
    ),
    (
        "Two GPUs: the activations are on cuda:1, the layer on cuda:0",
        """
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        with mode, torch.no_grad():
            head = on_fake_gpu(nn.Linear(32, 4), 'cuda:0')
            hidden = torch.empty(8, 32, device='cuda:1')
        """,
        "with mode, torch.no_grad():\n    out = head(hidden)\n",
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


def _cell(source: str, namespace: dict[str, Any]) -> BaseException | None:
    name = f"<ipython-input-{next(_counter)}-demo>"
    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    try:
        exec(compile(source, name, "exec"), namespace)
    except Exception as exc:
        return exc
    return None


def run_scenario(setup: str, failing: str) -> Any:
    """Runs one scenario and returns its Diagnosis (or None if it did not fail)."""
    from ipydevice.pipeline.engine import diagnose

    namespace: dict[str, Any] = {"__name__": "__main__"}
    error = _cell(_PRELUDE + textwrap.dedent(setup), namespace)
    if error is not None:
        raise error
    exc = _cell(failing, namespace)
    return None if exc is None else diagnose(exc, namespace=namespace)


def main() -> int:
    """Prints each scenario's failing cell and ipydevice's report."""
    for number, (title, setup, failing) in enumerate(SCENARIOS, 1):
        print(f"\n{'━' * 100}\n{number}. {title}\n")
        print(
            "".join(
                f"    In [ ]: {line}" if i == 0 else f"            {line}"
                for i, line in enumerate(failing.splitlines(True))
            )
        )
        diagnosis = run_scenario(setup, failing)
        print(f"\n{diagnosis}" if diagnosis is not None else "(no error)")
    print(
        f"\n{'━' * 100}\nIn a notebook: %load_ext ipydevice shows this under the traceback, with Apply buttons."
    )
    return 0
