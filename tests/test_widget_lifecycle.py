"""Nothing left behind: the buttons' widgets of a session are bounded and closed.

One widget per failed cell (the header and the panel are plain HTML, the buttons one
widget output after them, every widget sharing one ``Layout``); when the same cell runs
again, or with ``MAX_LIVE_BUTTONS`` alive, the widget of the earlier output serves the
new panel (closed if the re-run does not fail); all closed on ``%reset -f`` and on
``%unload_ext``. Counted in ipywidgets' own registry of live widgets.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from shells import run, run_captured, singleton_shell

from ipydevice.integrations import ipython as ext
from ipydevice.settings import MAX_LIVE_BUTTONS

pytest.importorskip("anywidget")
from ipywidgets.widgets.widget import _instances

SETUP = "import torch\nmodel = torch.nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)"
MISMATCH = "model(x)"


@pytest.fixture
def kernel_ip(monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    """The loaded shell, looking like ipykernel's."""
    for widget in actions():  # left by other tests' panels
        widget.close()
    with singleton_shell() as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        run(shell, SETUP)
        monkeypatch.setattr(shell, "kernel", object(), raising=False)
        yield shell


def actions() -> list[Any]:
    """The live buttons' widgets (ipywidgets' registry)."""
    return [w for w in _instances.values() if type(w).__name__ == "FixActions"]


def fail(shell: InteractiveShell, cell_id: str | None = None) -> None:
    _, result = run_captured(shell, MISMATCH) if cell_id is None else _run_cell(shell, cell_id)
    assert isinstance(result.error_in_exec, RuntimeError)


def _run_cell(shell: InteractiveShell, cell_id: str) -> tuple[Any, Any]:
    from IPython.utils.capture import capture_output

    with capture_output() as cap:
        result = shell.run_cell(MISMATCH, cell_id=cell_id)
    return cap, result


def test_one_widget_per_failed_cell(kernel_ip: InteractiveShell) -> None:
    fail(kernel_ip)  # the first error makes the shared Layout
    before = len(_instances)
    fail(kernel_ip)
    assert len(_instances) - before == 1  # not four: no header widget, no layouts of its own


def test_many_errors_leave_a_bounded_number_of_widgets_and_comms(
    kernel_ip: InteractiveShell,
) -> None:
    for _ in range(2 * MAX_LIVE_BUTTONS):
        fail(kernel_ip)
    live = actions()
    assert len(live) == MAX_LIVE_BUTTONS
    assert len(_instances) <= MAX_LIVE_BUTTONS + 2  # and the shared Layout and module host
    assert all(w.comm is not None for w in live)
    assert len(ext.hook_of(kernel_ip).buttons) == MAX_LIVE_BUTTONS


def test_a_long_session_keeps_at_most_a_few_widgets(kernel_ip: InteractiveShell) -> None:
    # Every live widget outlives the cells run after it, among the objects a kernel keeps
    # for each cell: the longer it lives, the more free space the allocator holds once
    # it is closed (benchmarks/bench_session.py: 8 live gave +2.1-2.3 MB per 1,000 errors
    # over stock, all of it free space; 4 live +1.7 MB).
    for _ in range(20):
        fail(kernel_ip)
    assert len(actions()) <= 4
    assert len(_instances) <= 6  # and the shared Layout and module host


def test_a_cell_run_again_gives_the_widget_of_its_previous_run_to_its_new_panel(
    kernel_ip: InteractiveShell,
) -> None:
    fail(kernel_ip, cell_id="cell-a")
    (first,) = actions()
    old_anchor = first.anchor
    fail(kernel_ip, cell_id="cell-b")
    for _ in range(4):
        fail(kernel_ip, cell_id="cell-a")
    # its output was cleared by the re-run: the same widget (one comm, no close and
    # open per error) now serves the new panel, with its anchor
    assert first.comm is not None and first.cell_id == "cell-a"
    assert first.anchor != old_anchor
    assert sorted(w.cell_id for w in actions()) == ["cell-a", "cell-b"]


def test_a_cell_run_again_without_an_error_closes_the_widget_of_its_previous_run(
    kernel_ip: InteractiveShell,
) -> None:
    fail(kernel_ip, cell_id="cell-a")
    (first,) = actions()
    from IPython.utils.capture import capture_output

    with capture_output():
        kernel_ip.run_cell("y = 1", cell_id="cell-a")
    assert first.comm is None  # its output was cleared, and no panel took it
    assert actions() == []
    assert not ext.hook_of(kernel_ip).buttons.spare


def test_a_reused_widget_acts_on_the_new_error_only(kernel_ip: InteractiveShell) -> None:
    from ipydevice.render.widget import click

    for _ in range(MAX_LIVE_BUTTONS):
        fail(kernel_ip)
    oldest = ext.hook_of(kernel_ip).buttons.live[min(ext.hook_of(kernel_ip).buttons.live)][1]
    stale = oldest.anchor
    run(kernel_ip, "x = torch.randn(3, 4)\nmodel = torch.nn.Linear(4, 2)")  # both on cpu
    run(kernel_ip, "x = x.to('meta')")
    fail(kernel_ip)  # past the bound: the oldest widget serves this error
    assert oldest.comm is not None and oldest.anchor != stale
    assert len(actions()) == MAX_LIVE_BUTTONS
    click(oldest, "apply", 0, anchor=stale)  # a click sent by a view of the earlier error
    assert kernel_ip.user_ns["x"].device.type == "meta" and oldest.status == ""
    click(oldest, "apply", 0, anchor=oldest.anchor)
    assert oldest.status_ok, oldest.status
    run(kernel_ip, "out = model(x)")  # the new error's fix moved x back to the CPU


@pytest.mark.slow
def test_reset_closes_every_widget(kernel_ip: InteractiveShell) -> None:
    fail(kernel_ip)
    fail(kernel_ip)
    assert len(actions()) == 2
    run(kernel_ip, "%reset -f")
    assert actions() == []
    run(kernel_ip, SETUP)
    fail(kernel_ip)  # and the buttons come back for the next error
    assert len(actions()) == 1


def test_unload_closes_every_widget(kernel_ip: InteractiveShell) -> None:
    fail(kernel_ip)
    fail(kernel_ip)
    kernel_ip.run_line_magic("unload_ext", "ipydevice")
    assert actions() == []


def test_a_widget_taken_for_reuse_is_closed_if_the_new_panel_fails(
    kernel_ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ipydevice.render import widget as widget_module

    for _ in range(MAX_LIVE_BUTTONS):
        fail(kernel_ip)
    buttons = ext.hook_of(kernel_ip).buttons
    oldest = buttons.live[min(buttons.live)][1]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("injected")

    monkeypatch.setattr(widget_module, "build_panel", broken)
    with pytest.raises(ValueError, match="injected"):
        buttons.show(ext.hook_of(kernel_ip).last, None)
    assert oldest.comm is None  # closed, not left alive and untracked
    assert len(actions()) == MAX_LIVE_BUTTONS - 1
