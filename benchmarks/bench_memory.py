"""Memory: diagnosing an error whose frames hold 2 GB of tensors reads none of them.

In a fresh process: 8 CPU tensors of 256 MB (float32, ``torch.empty`` then one
``fill_``, so every page is resident) held by the namespace and by the locals of
the failing function, beside a model on ``meta``. After a warm-up diagnosis of
a small, unrelated device error (ipydevice's own modules imported), the peak RSS
is reset (``/proc/self/clear_refs``), then the big error is diagnosed and
rendered (``engine.diagnose``, text, HTML, the widget) and the peak read again
(``VmHWM``). A copy of even one tensor would add 256 MB; reading data page by
page would not show in RSS (the pages are resident) but would in time, so the
time is recorded too.

Goal: the peak RSS rises by under 5 MB.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

from common import ROOT, emit

GOAL_MB = 5.0
TENSORS, ELEMENTS = 8, 64 * 1024 * 1024  # 8 x 256 MB of float32

SETUP = """
import torch
import torch.nn as nn
model = nn.Linear(4, 2).to('meta')
x = torch.randn(3, 4)

def step(model, x, weights):
    held = list(weights)
    first, second = weights[0], weights[1]
    return model(x) + first[:2, None] * 0
"""


def status(field: str) -> int:
    """A ``/proc/self/status`` field in kB (``VmHWM``, ``VmRSS``)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def reset_peak() -> bool:
    """Resets VmHWM to the current RSS (Linux 4.0+); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def child() -> dict:
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import gc

    import torch
    from cells import Notebook

    from ipydevice.pipeline import engine
    from ipydevice.render.widget import build_panel

    nb = Notebook()
    nb.run(SETUP)
    # Warm-up: a small device error, diagnosed and rendered, imports everything.
    d = engine.diagnose(nb.fails("out = model(x)\n"), namespace=nb.ns)
    str(d), d._repr_html_(), build_panel(d, lambda: nb.ns)._repr_mimebundle_()
    weights = []
    for _ in range(TENSORS):
        tensor = torch.empty(ELEMENTS)
        tensor.fill_(1.0)  # every page resident
        weights.append(tensor)
    nb.ns["weights"] = weights
    for index, tensor in enumerate(weights):
        nb.ns[f"w{index}"] = tensor
    del tensor
    exc = nb.fails("out = step(model, x, weights)\n")
    gc.collect()
    resident = status("VmRSS")
    can_reset = reset_peak()
    peak_before = (
        status("VmHWM") if can_reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    )
    start = time.perf_counter()
    d = engine.diagnose(exc, namespace=nb.ns)
    text, _html = str(d), d._repr_html_()
    build_panel(d, lambda: nb.ns)._repr_mimebundle_()
    elapsed = time.perf_counter() - start
    peak_after = (
        status("VmHWM") if can_reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    )
    assert d.is_device_error and d.culprits, text
    return {
        "resident_mb": resident / 1024,
        "peak_before_mb": peak_before / 1024,
        "peak_after_mb": peak_after / 1024,
        "rise_mb": (peak_after - peak_before) / 1024,
        "peak_reset": can_reset,
        "seconds": elapsed,
        "culprit": d.culprits[0].name,
        "rows": len(d.records),
    }


def main() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "IPYDEVICE_DEBUG"}
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    found = json.loads(done.stdout.strip().splitlines()[-1])
    met = found["rise_mb"] < GOAL_MB
    notes = []
    if not found["peak_reset"]:
        notes.append(
            "/proc/self/clear_refs was refused: ru_maxrss used (the rise is a lower bound)"
        )
    return {
        "name": "memory",
        "title": "diagnose + render with 2 GB of CPU tensors in the frames",
        "goal": f"peak RSS rises < {GOAL_MB:g} MB",
        "met": met,
        "figures": {
            "tensors_gb": round(TENSORS * ELEMENTS * 4 / 1e9, 2),
            "resident_mb": round(found["resident_mb"], 1),
            "peak_rise_mb": round(found["rise_mb"], 2),
            "diagnose_and_render_ms": round(found["seconds"] * 1000, 1),
            "peak_reset_with_clear_refs": found["peak_reset"],
            "culprit": found["culprit"],
        },
        "headline": (
            f"peak RSS +{found['rise_mb']:.2f} MB over {found['resident_mb']:.0f} MB resident "
            f"({TENSORS} x 256 MB tensors in the frames)"
        ),
        "notes": notes,
    }


if __name__ == "__main__":
    if "--child" in sys.argv:
        print(json.dumps(child()))
    else:
        emit(main())
