"""Load: ``%load_ext ipydevice`` in a fresh interpreter, and what it imports.

Each sample is a new Python process that starts an ``InteractiveShell`` and then
loads two extensions, timed one by one: ipydevice and, as a side-by-side
reference, IPython's own ``autoreload`` (the order alternates between samples).
The first load includes importing ``ipydevice`` and ``ipydevice.integrations.ipython``; "again"
is an unload and a second load (the hook alone). Afterwards ``sys.modules`` must
hold neither torch, pandas, ipywidgets, numpy nor ipydevice's engine.

Samples run with bytecode caches (as a user's second session does; see
:func:`child_env`); the first, which writes them, is not counted.

Goal: the first load under 5 ms, nothing heavy imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from common import ROOT, emit, median, reps

HEAVY = ("torch", "pandas", "ipywidgets", "numpy", "anywidget", "ipydevice.pipeline.engine")
GOAL_MS = 5.0

CHILD = r"""
import json, sys, time
sys.path.insert(0, {root!r})
sys.path.insert(0, {bench!r})
from common import make_shell
shell = make_shell()
order = {order!r}
out = {{}}
for name in order:
    start = time.perf_counter()
    shell.run_line_magic("load_ext", name)
    out[name] = (time.perf_counter() - start) * 1000
shell.run_line_magic("unload_ext", "ipydevice")
start = time.perf_counter()
shell.run_line_magic("load_ext", "ipydevice")
out["again"] = (time.perf_counter() - start) * 1000
out["imported"] = [m for m in {heavy!r} if m in sys.modules]
print(json.dumps(out))
"""


def child_env(pycache: str) -> dict[str, str]:
    """A user's environment: bytecode caches written and used.

    ``PYTHONDONTWRITEBYTECODE`` (set on some CI and sandbox machines) would make
    every sample compile ipydevice's sources, which no user's second session
    does; the caches go to a private prefix, so the checkout stays clean.
    """
    skip = {"IPYDEVICE_DEBUG", "PYTHONDONTWRITEBYTECODE"}
    env = {k: v for k, v in os.environ.items() if k not in skip}
    env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def sample(order: list[str], env: dict[str, str]) -> dict:
    code = CHILD.format(
        root=ROOT, bench=os.path.dirname(os.path.abspath(__file__)), order=order, heavy=HEAVY
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> dict:
    with tempfile.TemporaryDirectory(prefix="ipydevice-pycache-") as pycache:
        env = child_env(pycache)
        sample(["ipydevice", "autoreload"], env)  # writes the bytecode caches
        samples = []
        for index in range(reps(16, 4)):
            order = ["ipydevice", "autoreload"] if index % 2 == 0 else ["autoreload", "ipydevice"]
            samples.append(sample(order, env))
    load = median([s["ipydevice"] for s in samples])
    again = median([s["again"] for s in samples])
    reference = median([s["autoreload"] for s in samples])
    imported = sorted({m for s in samples for m in s["imported"]})
    met = load < GOAL_MS and not imported
    notes = []
    if imported:
        notes.append(f"imported on load: {', '.join(imported)}")
    return {
        "name": "load",
        "title": "%load_ext ipydevice (fresh process)",
        "goal": f"first load < {GOAL_MS:g} ms; torch, pandas, ipywidgets stay unimported",
        "met": met,
        "figures": {
            "first_load_ms": round(load, 3),
            "again_ms": round(again, 3),
            "autoreload_load_ms": round(reference, 3),
            "ratio_to_autoreload": round(load / reference, 2) if reference else None,
            "heavy_modules_imported": imported,
            "samples": len(samples),
        },
        "headline": f"{load:.2f} ms ({load / reference:.2f}x autoreload's); heavy imports: {imported or 'none'}",
        "notes": notes,
    }


if __name__ == "__main__":
    emit(main())
