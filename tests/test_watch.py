"""Watch mode: ``%config IPyDevice.watch = True`` warns when a cell puts a batch
somewhere else than the model.

After each successful cell, the names the cell binds (read from its source with
``ast``, nothing run) are checked against the namespace's model with
:func:`ipydevice.audits.checkup.watch`: metadata only, one parameter of the model read.
``meta`` stands in for the accelerator.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import CapturedIO, capture_output
from mentions import mentions_ipydevice
from shells import run_captured, singleton_shell

from ipydevice.integrations import ipython as ext

torch = pytest.importorskip("torch")

SETUP = "import torch, torch.nn as nn\nmodel = nn.Linear(4, 2).to('meta')"
#: 32 blocks, on meta: 2,000 parameters would cost real time if walked.
BIG = (
    "import torch, torch.nn as nn\n"
    "blocks = [nn.Sequential(*[nn.Linear(64, 64) for _ in range(31)] + [nn.LayerNorm(64)]) "
    "for _ in range(32)]\n"
    "model = nn.Sequential(*blocks).to('meta')\n"
    "del blocks"
)


@pytest.fixture
def ip() -> Iterator[InteractiveShell]:
    with singleton_shell(reset=True) as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        run(shell, SETUP)
        yield shell


def run(shell: InteractiveShell, source: str) -> Any:
    result = shell.run_cell(source)
    assert result.success, result.error_in_exec or result.error_before_exec
    return result


def watches(cap: CapturedIO) -> list[dict[str, Any]]:
    return [out.data for out in cap.outputs if "ipydevice-watch" in out.data.get("text/html", "")]


def watch_on(shell: InteractiveShell) -> None:
    run(shell, "%config IPyDevice.watch = True")


# -- on and off --------------------------------------------------------------------------------


def test_off_by_default(ip: InteractiveShell) -> None:
    assert ext.hook_of(ip).config.watch is False
    cap, _ = run_captured(ip, "batch = torch.randn(3, 4)")
    assert cap.outputs == [] and cap.stdout == "" and cap.stderr == ""


def test_a_batch_on_another_device_warns_once(ip: InteractiveShell) -> None:
    watch_on(ip)
    cap, _ = run_captured(ip, "batch = torch.randn(3, 4)\ny = batch * 2")
    (display,) = watches(cap)
    assert set(display) == {"text/plain", "text/html"}
    text = display["text/plain"]
    assert text.startswith("ipydevice · watch: `batch` defined on cpu, but model is on meta")
    assert "batch = batch.to('meta')" in text
    assert "&#x27;meta&#x27;" in display["text/html"]  # escaped
    assert len(cap.outputs) == 1 and cap.stderr == ""


def test_several_strays_in_one_cell_are_one_display(ip: InteractiveShell) -> None:
    watch_on(ip)
    cap, _ = run_captured(ip, "a, b = torch.randn(3, 4), {'x': torch.ones(3, 4)}")
    (display,) = watches(cap)
    lines = display["text/plain"].splitlines()
    assert lines[0].startswith("ipydevice · watch: `a` defined on cpu")
    assert lines[1] == "    a = a.to('meta')"
    assert lines[2].startswith("ipydevice · watch: `b` defined on cpu")
    assert lines[3].startswith("    b = {k: v.to('meta')")


@pytest.mark.parametrize(
    "source",
    [
        "batch = torch.randn(3, 4, device='meta')",  # right device
        "lr = torch.tensor(0.1)",  # a CPU scalar is fine anywhere
        "n = 3\nname = 'x'",  # nothing on a device
        "torch.randn(3, 4)",  # binds nothing
        "%time t = 1",  # a magic: binds nothing the AST sees
        "def f(:\n  pass",  # does not parse
        "batch = torch.randn(3, 4)\n1 / 0",  # failed cell: no watch
    ],
)
@pytest.mark.slow
def test_nothing_for_a_correct_or_unrelated_cell(ip: InteractiveShell, source: str) -> None:
    watch_on(ip)
    cap, _ = run_captured(ip, source)
    assert watches(cap) == []
    assert not mentions_ipydevice(cap.stderr)


def test_only_names_the_cell_defined(ip: InteractiveShell) -> None:
    run(ip, "old = torch.randn(3, 4)")  # before watch mode: not this cell's business
    watch_on(ip)
    cap, _ = run_captured(ip, "new = old.sum(0, keepdim=True).to('meta')")
    assert watches(cap) == []


def test_switching_off_again_and_unloading(ip: InteractiveShell) -> None:
    watch_on(ip)
    run(ip, "%config IPyDevice.watch = False")
    cap, _ = run_captured(ip, "batch = torch.randn(3, 4)")
    assert watches(cap) == []
    watch_on(ip)
    ip.run_line_magic("unload_ext", "ipydevice")
    cap, _ = run_captured(ip, "batch = torch.randn(3, 4)")
    assert cap.outputs == []


def test_watch_from_the_config_file(ip: InteractiveShell) -> None:
    ip.run_line_magic("unload_ext", "ipydevice")
    ip.config.IPyDevice.watch = True
    ip.run_line_magic("load_ext", "ipydevice")
    cap, _ = run_captured(ip, "batch = torch.randn(3, 4)")
    assert len(watches(cap)) == 1


# -- cost -----------------------------------------------------------------------------------------


class Counting:
    """Counts calls of the Module methods that walk parameters and submodules."""

    NAMES = (
        "parameters",
        "named_parameters",
        "buffers",
        "named_buffers",
        "modules",
        "named_modules",
        "children",
    )

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        for name in self.NAMES:
            original = getattr(torch.nn.Module, name)
            monkeypatch.setattr(torch.nn.Module, name, self.wrap(name, original))

    def wrap(self, name: str, original: Any) -> Any:
        def counted(module: Any, *args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return original(module, *args, **kwargs)

        return counted


def test_a_big_model_costs_nothing(ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> None:
    run(ip, BIG)
    model = ip.user_ns["model"]
    assert len(model) == 32
    assert sum(1 for _ in model.parameters()) >= 2000
    watch_on(ip)
    hook = ext.hook_of(ip)
    result = run(ip, "batch = torch.randn(8, 64)")
    counting = Counting(monkeypatch)
    timings = []
    for _ in range(5):
        with capture_output() as cap:
            start = time.perf_counter()
            hook.watch_cell(result)
            timings.append(time.perf_counter() - start)
        assert len(watches(cap)) == 1
    assert counting.calls == []  # no parameter iteration at all: one registered tensor read
    assert min(timings) < 0.020, timings


def test_a_watched_cell_is_not_slower_than_an_unwatched_one(ip: InteractiveShell) -> None:
    run(ip, BIG)

    def best(source: str) -> float:
        times = []
        for _ in range(5):
            with capture_output():
                start = time.perf_counter()
                ip.run_cell(source)
                times.append(time.perf_counter() - start)
        return min(times)

    plain = best("batch = torch.randn(8, 64, device='meta')")
    watch_on(ip)
    watched = best("batch = torch.randn(8, 64, device='meta')")
    assert watched < plain + 0.020, (plain, watched)


def test_a_failing_watch_is_one_line_on_stderr(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ipydevice.audits import checkup as audits

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("watch exploded")

    monkeypatch.setattr(audits, "watch", boom)
    watch_on(ip)
    monkeypatch.setenv("IPYDEVICE_DEBUG", "0")
    cap, result = run_captured(ip, "batch = torch.randn(3, 4)")
    assert result.success and cap.outputs == []
    assert cap.stderr.strip() == (
        "ipydevice: watch failed (RuntimeError: watch exploded); set IPYDEVICE_DEBUG=1 for details"
    )
    monkeypatch.setenv("IPYDEVICE_DEBUG", "1")
    cap, _ = run_captured(ip, "batch = torch.randn(3, 4)")
    assert "watch exploded" in cap.stdout + cap.stderr  # IPython's "Error in callback"
