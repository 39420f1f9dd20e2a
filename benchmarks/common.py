"""Shared helpers for the benchmarks: timing, interleaving, the shell, the machine.

Every benchmark module runs as its own process (``python benchmarks/bench_x.py``)
and prints one JSON object on its last line of stdout: a fresh interpreter for
each, so that one benchmark's imports, heap and shell state never colour another's.

Figures are measured side by side in one run: the two arms of a comparison
alternate in small batches (A B A B ...), so that a noisy neighbour slows both
alike, and what is reported is the ratio of medians (and an A/A ratio, the
noise floor, where it helps). Absolute milliseconds are printed for reading,
never asserted by tests.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def quick() -> bool:
    """``IPYDEVICE_BENCH_QUICK=1``: fewer repetitions (a smoke run, figures rougher)."""
    return os.environ.get("IPYDEVICE_BENCH_QUICK") == "1"


def reps(full: int, fast: int) -> int:
    return fast if quick() else full


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def timed(func: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = func()
    return time.perf_counter() - start, value


def interleave(
    arms: dict[str, Callable[[], float]], rounds: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Runs each arm once per round, in alternating order (ABBA...), after ``warmup``
    untimed rounds. Each arm returns its own measured seconds."""
    names = list(arms)
    for _ in range(warmup):
        for name in names:
            arms[name]()
    out: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        order = names if index % 2 == 0 else names[::-1]
        for name in order:
            out[name].append(arms[name]())
    return out


@contextmanager
def gc_paused() -> Iterator[None]:
    """No collection in the middle of a timed block (both arms alike)."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def start_kernel(name: str) -> tuple[Any, Any]:
    """A real ipykernel through jupyter_client (manager, client), on this tree's
    ipydevice, with a profile of its own and without the tests' debug mode."""
    from jupyter_client.manager import start_new_kernel

    env = {
        **{k: v for k, v in os.environ.items() if k != "IPYDEVICE_DEBUG"},
        "IPYTHONDIR": tempfile.mkdtemp(prefix=f"ipydevice-bench-{name}-"),
        "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    return start_new_kernel(kernel_name="python3", env=env)


def make_shell() -> Any:
    """The in-process ``InteractiveShell`` singleton, history in memory, no profile."""
    os.environ.setdefault("IPYTHONDIR", tempfile.mkdtemp(prefix="ipydevice-bench-"))
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    return InteractiveShell.instance(config=config)


def emit(result: dict[str, Any]) -> None:
    """The benchmark's result, as the last line of stdout (read by run.py)."""
    sys.stdout.flush()
    print(json.dumps(result))


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    info: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gb": _memory_gb(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    for module in ("torch", "IPython", "ipywidgets", "ipydevice"):
        try:
            info[module] = __import__(module).__version__
        except Exception:  # pragma: no cover - reported, not fatal
            info[module] = "?"
    try:
        import torch

        info["cuda"] = torch.cuda.is_available()
    except Exception:  # pragma: no cover
        info["cuda"] = False
    return info


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def _memory_gb() -> float:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return 0.0


def load_average() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # pragma: no cover
        return -1.0
