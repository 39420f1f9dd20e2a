"""Error path: a failing forward pass through a LLaMA-7B-sized model on ``meta``.

The model: 32 blocks, d=4096, 32 heads, MLP 11008 (gate/up/down), vocabulary
32000, embeddings and head: 6.7 billion parameters, built on the ``meta`` device
(no memory). The mistake: ``forward`` builds its causal mask with
``torch.full(...)`` and no ``device=``, so the mask is on the CPU while the
scores are on ``meta`` (the classic factory-call-in-forward bug); the first
block's ``scores + mask`` raises. The namespace also holds 10,000 small tensors
(``t0`` ... ``t9999``), so that naming objects must not cost what exists.

Measured side by side, in one process, warm, in interleaved rounds:

* IPython's own traceback: ``InteractiveShell.showtraceback`` timed inside a real
  ``run_cell`` of the failing cell without the extension;
* what ipydevice adds, stage by stage: ``engine.diagnose``, the header shown before
  the traceback, ``str`` (the text panel), ``_repr_html_`` and the buttons' widget
  (``build_panel`` and its mime bundle: one widget per error, whose buttons go beside
  each fix in the header and the panel; the widget of the error before, superseded,
  is given this error's fixes, as the hook does when a failing cell runs again);
* end to end: ``run_cell`` of the failing cell with and without the extension
  loaded (with a stand-in kernel, so that the widget is built, as in Jupyter).

Goal: ipydevice adds under 10 ms, or under 5% of IPython's own traceback time,
whichever is larger. The 10 ms is judged on the best round, as ``timeit``
advises (other processes only ever add time: on this shared machine the same
diagnosis takes from 7 to 14 ms of the thread's own CPU time), the 5% on the
median of the per-round ratios (both measured in the same round); the median
round is reported beside the best. The cProfile top entries of the diagnosis
are kept in the results.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from typing import Any

from common import emit, gc_paused, make_shell, median, ms, reps

SETUP = r"""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x, mask):
        b, t, d = x.shape
        q = self.q_proj(x).view(b, t, self.heads, -1).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.heads, -1).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.heads, -1).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        scores = scores + mask
        out = scores.softmax(-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.input_layernorm = RMSNorm(dim)
        self.self_attn = Attention(dim, heads)
        self.post_attention_layernorm = RMSNorm(dim)
        self.mlp = MLP(dim, hidden)

    def forward(self, x, mask):
        x = x + self.self_attn(self.input_layernorm(x), mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, vocab=32000, dim=4096, heads=32, hidden=11008, layers=32):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, input_ids):
        t = input_ids.shape[-1]
        mask = torch.full((t, t), float("-inf")).triu(1)  # no device=: on the CPU
        h = self.embed_tokens(input_ids)
        for layer in self.layers:
            h = layer(h, mask)
        return self.lm_head(self.norm(h))


with torch.device("meta"):
    model = Llama()
input_ids = torch.zeros(1, 16, dtype=torch.long, device="meta")
for _i in range(10_000):
    globals()[f"t{_i}"] = torch.zeros(2)
del _i
"""

FAILING = "logits = model(input_ids)\n"

#: The goal: ipydevice adds at most this, or this share of IPython's traceback time.
GOAL_MS, GOAL_SHARE = 10.0, 0.05


class Stages:
    """One pass of ipydevice's work on an exception, each stage timed."""

    def __init__(self, shell: Any) -> None:
        from ipydevice.pipeline import engine
        from ipydevice.render.widget import build_panel, view_bundle

        self.shell, self.engine = shell, engine
        self.build_panel, self.view_bundle = build_panel, view_bundle
        from ipydevice.integrations.ipython_display import header_bundle

        self.header_bundle = header_bundle
        from ipydevice.integrations.ipython_display import anchor_of

        self.anchor_of = anchor_of
        self.previous: Any = None  # the widget of the pass before, reused as the hook does
        self.times: dict[str, list[float]] = {
            "diagnose": [],
            "header": [],
            "text": [],
            "html": [],
            "widget": [],
        }

    def run(self, exc: BaseException) -> float:
        shell = self.shell
        with gc_paused():
            t0 = time.perf_counter()
            d = self.engine.diagnose(exc, namespace=shell.user_ns)
            t1 = time.perf_counter()
            self.header_bundle(d)  # the header before the traceback
            th = time.perf_counter()
            str(d)
            t2 = time.perf_counter()
            d._repr_html_()
            t3 = time.perf_counter()
            # One buttons widget per error, as the hook makes it: its buttons go beside
            # each fix's code in the header and the panel (the anchor); the widget of the
            # error before, superseded (its cell run again), is given this error's fixes.
            panel = self.build_panel(
                d,
                lambda: shell.user_ns,
                lambda code: None,
                anchor=self.anchor_of(d),
                reuse=self.previous,
            )
            self.view_bundle(panel)  # what the hook displays
            t4 = time.perf_counter()
        self.previous = panel
        for name, value in zip(
            self.times, (t1 - t0, th - t1, t2 - th, t3 - t2, t4 - t3), strict=True
        ):
            self.times[name].append(value)
        self.last = d
        return t4 - t0


def main() -> dict:
    from IPython.utils.capture import capture_output

    shell = make_shell()
    shell.kernel = object()  # a stand-in: the hook then builds the widget, as in Jupyter
    result = shell.run_cell(SETUP)
    assert result.success, result.error_in_exec
    parameters = sum(p.numel() for p in shell.user_ns["model"].parameters())

    traceback_times: list[float] = []
    original = shell.showtraceback

    def timed_showtraceback(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            traceback_times.append(time.perf_counter() - start)

    shell.showtraceback = timed_showtraceback
    loaded = {"now": False}

    def cell(with_extension: bool) -> tuple[float, BaseException]:
        if with_extension != loaded["now"]:
            shell.run_line_magic("load_ext" if with_extension else "unload_ext", "ipydevice")
            loaded["now"] = with_extension
        with capture_output() as cap, gc_paused():
            start = time.perf_counter()
            outcome = shell.run_cell(FAILING)
            elapsed = time.perf_counter() - start
        exc = outcome.error_in_exec
        assert exc is not None and "device" in str(exc), exc
        panels = [o for o in cap.outputs if "ipydevice-panel" in o.data.get("text/html", "")]
        assert len(panels) == (1 if with_extension else 0), (with_extension, cap.stderr)
        return elapsed, exc

    stages = Stages(shell)
    end_to_end: dict[str, list[float]] = {"with": [], "without": []}
    ipython_tb: list[float] = []
    per_round: list[tuple[float, float]] = []  # (IPython's traceback, ipydevice's stages)
    rounds = reps(20, 3)
    for index in range(rounds + 2):  # two warm-up rounds
        order = (False, True) if index % 2 == 0 else (True, False)
        for with_extension in order:
            before = len(traceback_times)
            elapsed, exc = cell(with_extension)
            if index >= 2:
                end_to_end["with" if with_extension else "without"].append(elapsed)
                if not with_extension:
                    ipython_tb.extend(traceback_times[before:])
            if not with_extension:
                total = stages.run(exc)  # the same exception, diagnosed directly
                if index >= 2:
                    per_round.append((sum(traceback_times[before:]), total))
        del exc
    for values in stages.times.values():
        del values[:2]  # the warm-up rounds
    if loaded["now"]:
        shell.run_line_magic("unload_ext", "ipydevice")
    shell.showtraceback = original

    tb = median(ipython_tb)
    stage_ms = {name: ms(median(values)) for name, values in stages.times.items()}
    added = median([total for _, total in per_round])
    best = min(total for _, total in per_round)
    share = median([total / traceback for traceback, total in per_round])
    budget = max(GOAL_MS / 1000, GOAL_SHARE * tb)
    with_, without = median(end_to_end["with"]), median(end_to_end["without"])
    paired = median(
        [w - o for w, o in zip(end_to_end["with"], end_to_end["without"], strict=False)]
    )
    d = stages.last
    figures = {
        "parameters_billion": round(parameters / 1e9, 3),
        "namespace_tensors": 10_000,
        "ipython_traceback_ms": ms(tb),
        "run_cell_without_ms": ms(without),
        "run_cell_with_ms": ms(with_),
        "end_to_end_added_ms": ms(with_ - without),
        "end_to_end_added_paired_ms": ms(paired),
        **{f"{name}_ms": value for name, value in stage_ms.items()},
        "ipydevice_added_ms": ms(added),
        "ipydevice_added_best_ms": ms(best),
        "ipython_traceback_best_ms": ms(min(ipython_tb)),
        "added_share_of_traceback": round(share, 4),
        "budget_ms": ms(budget),
        "culprit": d.culprits[0].name if d.culprits else "",
        "failing_module": d.failing_module,
        "rounds": rounds,
    }
    # The absolute goal on the best round (timeit's rule: other processes only ever
    # add time, and this machine's host adds up to 70%); the share on the median of
    # per-round ratios (IPython's traceback and ipydevice's stages, same round).
    met = best <= GOAL_MS / 1000 or share <= GOAL_SHARE
    result = {
        "name": "error",
        "title": "error path: 6.7B-parameter meta model, 10,000 tensors in the namespace",
        "goal": f"ipydevice adds < max({GOAL_MS:g} ms, {GOAL_SHARE:.0%} of IPython's traceback)",
        "met": met,
        "figures": figures,
        "headline": (
            f"ipydevice adds {best * 1000:.1f} ms at best, {added * 1000:.1f} ms in the "
            f"median round = {share:.1%} of IPython's own traceback ({tb * 1000:.0f} ms)"
        ),
        "notes": [],
    }
    result["profile"] = profile(shell, exc_for_profile(shell))
    return result


def exc_for_profile(shell: Any) -> BaseException:
    from IPython.utils.capture import capture_output

    with capture_output():
        exc = shell.run_cell(FAILING).error_in_exec
    assert exc is not None
    return exc


def profile(shell: Any, exc: BaseException, top: int = 14) -> list[str]:
    """cProfile of ``engine.diagnose`` + renderers + widget (5 runs): the top
    entries by own time, then ipydevice's functions by cumulative time."""
    from ipydevice.pipeline import engine
    from ipydevice.render.widget import build_panel, view_bundle

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(5):
        d = engine.diagnose(exc, namespace=shell.user_ns)
        str(d), d._repr_html_()
        view_bundle(build_panel(d, lambda: shell.user_ns, lambda code: None))
    profiler.disable()
    lines = ["by own time:", *_stats(profiler, "tottime", top)]
    lines += ["", "ipydevice's functions by cumulative time:"]
    lines += _stats(profiler, "cumulative", top + 6, "ipydevice/")
    return lines


def _stats(profiler: cProfile.Profile, key: str, top: int, *restrict: str) -> list[str]:
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(*restrict, top)
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    return [line.replace(_root(), "") for line in lines[start : start + top + 1] if line]


def _root() -> str:
    import os

    return os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + "/"


if __name__ == "__main__":
    emit(main())
