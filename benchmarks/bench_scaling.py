"""Scaling: the error handler against the size of the session it runs in.

The handler is the call the IPython hook makes when a cell fails with a device
error, in-process: ``engine.diagnose(exc, namespace=shell.user_ns)``, then the
panel's text and HTML. It is timed beside IPython's own traceback for the same
error (``InteractiveTB.structured_traceback``, what ``showtraceback`` formats),
the two alternating in each round, for:

* **namespace**: 100, 10k, 100k and 1M names (one in ten a tensor, the others
  ints and strings) beside a small model on ``meta`` whose layer adds a CPU mask;
* **modules**: the same error in a model on ``meta`` of about 1k, 10k and 100k
  modules, 100 blocks of ever more experts (a mixture of experts: the failing chain,
  the model, its last block and the block's leaf, stays as it is), and in a tree
  ten wide of 16 to 100k modules (the failing chain one level deeper each time the
  model is ten times bigger: each module on it has its own view);
* **depth**: the error raised 1, 10 and 100 user frames down (a recursion);
* **history**: after 10, 1,000 and 10,000 cells run in the session.

Goals (issue 20): the handler at 1M names at most 2x its 100-name figure; flat
from 10k to 100k modules (at most 1.25x). Both are ratios of medians measured in
one run; the stock traceback's time and the ratio to it are printed for reading
(``handler / traceback``: how much the panel adds to what IPython already spends).
"""

from __future__ import annotations

import contextlib
import io
import sys
from typing import Any

from common import emit, gc_paused, interleave, make_shell, median, ms, reps, timed

SETUP = r"""
import torch
import torch.nn as nn


class Leaf(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4, device="meta")

    def forward(self, x):
        mask = torch.zeros(4)  # on the CPU: the classic factory call without device=
        return self.proj(x) + mask


class Tree(nn.Module):
    def __init__(self, n):
        super().__init__()
        if n <= 11:
            self.parts = nn.ModuleList([Leaf() for _ in range(max(1, n // 2))])
        else:
            self.parts = nn.ModuleList([Tree((n - 2) // 10) for _ in range(10)])

    def forward(self, x):
        return self.parts[0](x)


class Block(nn.Module):
    def __init__(self, experts):
        super().__init__()
        self.leaf = Leaf()
        self.experts = nn.ModuleList([nn.Linear(4, 4, device="meta") for _ in range(experts)])

    def forward(self, x):
        return self.leaf(x)


class MoE(nn.Module):
    # 100 blocks of experts: the model grows wide, the failing chain (the model,
    # layers[99], its leaf) stays as it is

    def __init__(self, n):
        super().__init__()
        self.layers = nn.ModuleList([Block(max(0, n // 100 - 3)) for _ in range(100)])

    def forward(self, x):
        return self.layers[-1](x)


def deep(model, x, depth):
    return model(x) if depth <= 1 else deep(model, x, depth - 1)


x = torch.zeros(2, 4, device="meta")
"""

NAMES = (100, 10_000, 100_000, 1_000_000)
MODULES = (16, 1_000, 10_000, 100_000)
DEPTHS = (1, 10, 100)
HISTORY = (10, 1_000, 10_000)
WIDTH = 48  # characters of the longest bar in the plot


def failing(shell: Any, cell: str) -> BaseException:
    """Runs ``cell`` (which must fail) without ipydevice and returns its exception."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        shell.run_cell(cell)
    exc = sys.last_value
    assert isinstance(exc, RuntimeError), exc
    return exc


def measure(shell: Any, exc: BaseException, rounds: int) -> dict[str, float]:
    """Median handler and stock-traceback times (ms) for ``exc``, interleaved."""
    from ipydevice.pipeline import engine

    namespace = shell.user_ns
    tb = exc.__traceback__
    notes: list[str] = []

    def handler() -> float:
        def run() -> None:
            diagnosis = engine.diagnose(exc, namespace=namespace)
            str(diagnosis)
            diagnosis._repr_html_()
            notes[:] = list(diagnosis.notes)

        return timed(run)[0]

    def stock() -> float:
        return timed(lambda: shell.InteractiveTB.structured_traceback(type(exc), exc, tb))[0]

    with gc_paused():
        times = interleave({"handler": handler, "stock": stock}, rounds)
    out = {"handler": median(times["handler"]), "stock": median(times["stock"])}
    out["truncated"] = float(any("were looked at" in n or "submodules" in n for n in notes))
    return out


def pad(namespace: dict[str, Any], count: int) -> None:
    import torch

    small = torch.zeros(1)
    for index in range(count):
        kind = index % 10
        namespace[f"v{index}"] = small if kind == 0 else (index if kind < 5 else f"s{index}")


def unpad(namespace: dict[str, Any], count: int) -> None:
    for index in range(count):
        namespace.pop(f"v{index}", None)


def bars(title: str, rows: list[tuple[str, float, float]]) -> list[str]:
    """A text plot: handler and traceback ms per size, one bar each."""
    top = max(max(h, s) for _, h, s in rows) or 1.0
    lines = [title]
    for label, handler, stock in rows:
        lines.append(
            f"{label:>8} handler   {'#' * max(1, round(handler / top * WIDTH)):<{WIDTH}} {handler:8.2f} ms"
        )
        lines.append(
            f"{'':>8} traceback {'=' * max(1, round(stock / top * WIDTH)):<{WIDTH}} {stock:8.2f} ms"
        )
    return lines


def label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k" if n >= 1000 else str(n)


def main() -> None:
    shell = make_shell()
    shell.run_cell(SETUP)
    ns = shell.user_ns
    rounds = reps(7, 3)
    figures: dict[str, Any] = {}
    plot: list[str] = []

    # namespace: a small model, ever more names
    shell.run_cell("model = Tree(16)")
    rows = []
    for count in NAMES:
        pad(ns, count - 100)
        exc = failing(shell, "y = model(x)")
        got = measure(shell, exc, rounds)
        unpad(ns, count - 100)
        rows.append((label(count), got["handler"] * 1000, got["stock"] * 1000))
        figures[f"names_{label(count)}_handler_ms"] = ms(got["handler"])
        figures[f"names_{label(count)}_vs_traceback"] = round(got["handler"] / got["stock"], 3)
        figures[f"names_{label(count)}_truncated"] = bool(got["truncated"])
        del exc
    plot += bars("namespace names (model of 42 modules)", rows)
    names_ratio = rows[-1][1] / rows[0][1]
    figures["names_1M_over_100"] = round(names_ratio, 2)

    # modules: ever bigger models, wide (the goal) and deep (a tree)
    for shape, sizes in (("MoE", MODULES[1:]), ("Tree", MODULES)):
        rows = []
        for count in sizes:
            shell.run_cell(f"model = {shape}({count})")
            exc = failing(shell, "y = model(x)")
            got = measure(shell, exc, rounds)
            rows.append((label(count), got["handler"] * 1000, got["stock"] * 1000))
            key = f"{shape.lower()}_{label(count)}"
            figures[f"{key}_handler_ms"] = ms(got["handler"])
            figures[f"{key}_vs_traceback"] = round(got["handler"] / got["stock"], 3)
            del exc
        what = "100 blocks of experts" if shape == "MoE" else "a tree ten wide"
        plot += ["", *bars(f"modules, {what} (the model's size, about)", rows)]
        figures[f"{shape.lower()}_100k_over_10k"] = round(rows[-1][1] / rows[-2][1], 2)
    modules_ratio = figures["moe_100k_over_10k"]

    # depth: the error deep in user frames
    shell.run_cell("model = Tree(16)")
    rows = []
    for depth in DEPTHS:
        exc = failing(shell, f"y = deep(model, x, {depth})")
        got = measure(shell, exc, rounds)
        rows.append((str(depth), got["handler"] * 1000, got["stock"] * 1000))
        figures[f"depth_{depth}_handler_ms"] = ms(got["handler"])
        figures[f"depth_{depth}_vs_traceback"] = round(got["handler"] / got["stock"], 3)
        del exc
    plot += ["", *bars("depth (user frames above the error)", rows)]

    # history: cells run before the error
    rows = []
    done = 0
    for count in HISTORY:
        with contextlib.redirect_stdout(io.StringIO()):
            for index in range(done, count):
                shell.run_cell(f"h{index % 100} = {index}", store_history=True)
        done = count
        exc = failing(shell, "y = model(x)")
        got = measure(shell, exc, rounds)
        rows.append((label(count), got["handler"] * 1000, got["stock"] * 1000))
        figures[f"history_{label(count)}_handler_ms"] = ms(got["handler"])
        figures[f"history_{label(count)}_vs_traceback"] = round(got["handler"] / got["stock"], 3)
        del exc
    plot += ["", *bars("history (cells run before)", rows)]

    met = names_ratio <= 2.0 and modules_ratio <= 1.25
    emit(
        {
            "name": "scaling",
            "title": "the handler against the namespace, the model, the depth and the history",
            "goal": "1M names <= 2x 100 names; 100k modules <= 1.25x 10k",
            "met": met,
            "headline": (
                f"1M names {names_ratio:.2f}x the 100-name handler "
                f"({figures['names_1M_handler_ms']} ms); "
                f"100k modules {modules_ratio:.2f}x 10k "
                f"({figures['moe_100k_handler_ms']} ms; a tree ten wide "
                f"{figures['tree_100k_over_10k']:.2f}x)"
            ),
            "figures": figures,
            "plot": plot,
            "notes": [
                "handler: engine.diagnose with the shell's namespace, then the panel's text "
                "and HTML, as the IPython hook does; traceback: IPython's "
                "structured_traceback for the same error; medians of interleaved rounds"
            ],
        }
    )


if __name__ == "__main__":
    main()
