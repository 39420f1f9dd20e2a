"""The cell callbacks (``ipydevice.integrations.ipython_cells``): a quiet hook.

A cell that does not fail must cost nothing noticeable (``benchmarks/bench_idle.py``):
once the hook has nothing to look after, its two callbacks only note the cell. These
tests hold that the quiet path misses nothing: every way a cell can give the hook work
(an error, an exception a magic shows, a device warning, a failed stage, watch mode)
still gets what it got before, and the hook is quiet again once that work is done.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from shells import loaded_shell, panels, run, run_captured, singleton_shell

from ipydevice.integrations import ipython as ext

SETUP = "import torch\nmodel = torch.nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)"
MISMATCH = "model(x)"
DISPATCHED = "You shouldn't move a model that is dispatched using accelerate hooks."


@pytest.fixture
def ip() -> Iterator[InteractiveShell]:
    with loaded_shell(SETUP, reset=True) as shell:  # watch mode reads the namespace's models
        yield shell


def hook(shell: InteractiveShell) -> Any:
    found = ext.hook_of(shell)
    assert found is not None
    return found


def test_a_hook_with_nothing_to_look_after_is_quiet(ip: InteractiveShell) -> None:
    run(ip, "a = 1")
    assert hook(ip).quiet  # torch imported: warmed up; no widget, warning or failure


def test_before_torch_is_imported_the_hook_is_not_quiet() -> None:
    with singleton_shell() as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        run(shell, "a = 1")
        # each cell looks for torch, to warm up the failing path once it is there
        assert hook(shell).quiet == hook(shell).warmed


@pytest.mark.slow
def test_a_quiet_hook_still_diagnoses_a_failing_cell(ip: InteractiveShell) -> None:
    run(ip, "a = 1")
    assert hook(ip).quiet
    cap, result = run_captured(ip, MISMATCH)
    assert isinstance(result.error_in_exec, RuntimeError)
    (bundle,) = panels(cap)
    assert "`x` is on cpu" in bundle["text/plain"]
    cap, _ = run_captured(ip, "b = 2")  # the same sys.last_value: no second panel
    assert panels(cap) == [] and hook(ip).quiet


@pytest.mark.slow
def test_a_quiet_hook_still_sees_an_exception_a_magic_shows(
    ip: InteractiveShell, tmp_path: Any
) -> None:
    script = tmp_path / "train.py"
    script.write_text(SETUP + "\n" + MISMATCH + "\n")
    run(ip, "a = 1")
    assert hook(ip).quiet
    cap, result = run_captured(ip, f"%run {script}")
    assert result.error_in_exec is None  # %run shows the traceback itself
    (bundle,) = panels(cap)
    assert "`x` is on cpu" in bundle["text/plain"]


@pytest.mark.slow
def test_watch_mode_is_never_quiet(ip: InteractiveShell) -> None:
    ip.run_line_magic("config", "IPyDevice.watch = True")
    run(ip, "a = 1")
    assert not hook(ip).quiet
    cap, _ = run_captured(ip, "batch = torch.randn(2, 4)")  # off the model's device
    assert any("batch" in out.data.get("text/plain", "") for out in cap.outputs)
    ip.run_line_magic("config", "IPyDevice.watch = False")
    run(ip, "a = 1")
    assert hook(ip).quiet


def test_a_device_warning_in_a_quiet_cell_gets_its_panel(ip: InteractiveShell) -> None:
    run(ip, "import logging\na = 1")
    found = hook(ip)
    if found.device_warnings is None:
        pytest.skip("no device-warning hook installed")
    assert found.quiet
    # a library logger's record: its panel waits for the cell's end (post_run_cell)
    cap, _ = run_captured(
        ip, f"logging.getLogger('accelerate.big_modeling').warning({DISPATCHED!r})"
    )
    assert len(panels(cap)) == 1
    assert not found.quiet  # the cell's warning texts are kept for the next cell's start
    run(ip, "a = 1")
    assert found.quiet and not found.device_warnings.texts


def test_a_failed_stage_is_reported_again_in_a_later_cell(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("IPYDEVICE_DEBUG", raising=False)
    found = hook(ip)

    def boom(exc: BaseException) -> Any:
        raise ValueError("injected")

    monkeypatch.setattr(found, "diagnose", boom)
    for _ in range(2):
        run(ip, "a = 1")
        assert found.quiet
        cap, _ = run_captured(ip, MISMATCH)
        assert cap.stderr.count("ipydevice") == 1, cap.stderr  # once per cell, each cell
        assert found.failed == {"diagnosis"} and not found.quiet
