"""``%devices`` over a namespace of 100,000 tensors (as names and in a list).

A real in-process ``InteractiveShell`` with the extension loaded. The namespace
holds N small CPU and ``meta`` tensors twice over: as names ``t0`` ... and in one
list ``tensors``, beside a model. Timed: ``%devices`` (the magic returning its
Inventory) plus ``str()`` and ``_repr_html_()`` of it, what a frontend shows.
N is 1,000, 10,000 and 100,000, in interleaved rounds, so the scaling is read
from figures taken side by side.

Goal: under 300 ms at 100,000, and the cost grows with what is shown (bounded
by the settings), not with what exists: t(100k) / t(1k) well below 100.
"""

from __future__ import annotations

import time

from common import emit, gc_paused, make_shell, median, ms, reps

SIZES = (1_000, 10_000, 100_000)
GOAL_MS = 300.0

BUILD = """
import torch
for _k in [k for k in globals() if k.startswith('t') and k[1:].isdigit()]:
    del globals()[_k]
tensors = [torch.zeros(2, device='meta' if _i % 2 else 'cpu') for _i in range({n})]
for _i, _t in enumerate(tensors):
    globals()[f't{{_i}}'] = _t
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)).to('meta')
del _i, _t
"""


def main() -> dict:
    shell = make_shell()
    shell.run_line_magic("load_ext", "ipydevice")
    times: dict[int, list[float]] = {n: [] for n in SIZES}
    shown: dict[int, int] = {}
    notes: dict[int, tuple[str, ...]] = {}
    rounds = reps(5, 2)
    for index in range(rounds + 1):  # the first round warms up
        order = SIZES if index % 2 == 0 else SIZES[::-1]
        for n in order:
            result = shell.run_cell(BUILD.format(n=n))
            assert result.success, result.error_in_exec
            with gc_paused():
                start = time.perf_counter()
                inv = shell.run_line_magic("devices", "")
                text, html = str(inv), inv._repr_html_()
                elapsed = time.perf_counter() - start
            assert "ipydevice" in text and "ipydevice-panel" in html
            if index:
                times[n].append(elapsed)
            shown[n], notes[n] = len(inv.records), inv.notes
            del inv, text, html
    shell.run_cell("del tensors")
    shell.run_line_magic("unload_ext", "ipydevice")
    med = {n: median(values) for n, values in times.items()}
    top, small = med[SIZES[-1]], med[SIZES[0]]
    growth = top / small
    met = top * 1000 < GOAL_MS and growth < 10
    return {
        "name": "devices",
        "title": "%devices over 100,000 tensors (names and a list)",
        "goal": f"< {GOAL_MS:g} ms at 100,000; cost bounded by what is shown",
        "met": met,
        "figures": {
            **{f"devices_{n}_ms": ms(med[n]) for n in SIZES},
            "growth_100k_over_1k": round(growth, 2),
            "rows_listed_at_100k": shown[SIZES[-1]],
            "notes_at_100k": list(notes[SIZES[-1]]),
        },
        "headline": (
            f"{top * 1000:.0f} ms at 100,000 tensors; "
            f"{growth:.1f}x the cost at 1,000 (100x the tensors)"
        ),
        "notes": [],
    }


if __name__ == "__main__":
    emit(main())
