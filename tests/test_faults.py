"""Fault injection: whatever fails inside ipydevice, the user's moment is no worse.

Every stage of the panel hook, of the widget and of ``%devices`` is made to fail
(``IPYDEVICE_DEBUG`` unset, as for a user), and then:

* the user's own traceback is shown, exactly once, and ``sys.last_value`` is
  the user's exception;
* ipydevice says so in one line on stderr, never with a traceback;
* the hook stays installed: with the fault gone, the next device error gets its
  panel (and with the fault still there, the next one still gets the user's
  traceback and one line).

What ``tests/test_ipython.py`` and ``tests/test_widget.py`` already cover (one
failing stage at a time, the notice's wording) is not repeated; this file adds
the stages they leave out, the "still installed afterwards" half, faults in the
callbacks of the widget's buttons and in ``%devices``, and leak checks through
the whole path (hook, panel, Apply, ``%devices``) in a real shell.

A fault found here is fixed, not marked: this file has no expected failures.
"""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import CapturedIO, capture_output
from shells import panels, run_captured, singleton_shell

from ipydevice.integrations import ipython as ext
from ipydevice.model import Diagnosis, Fix

SETUP = "import torch\nmodel = torch.nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)"
MISMATCH = "model(x)"
USER_TEXT = "is not on the expected device cpu"  # in the user's own traceback


# -- fixtures and helpers ---------------------------------------------------------------


@pytest.fixture
def ip(monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    """The singleton shell with ipydevice loaded, the setup run, debugging off."""
    with singleton_shell() as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        result = shell.run_cell(SETUP)
        assert result.success
        monkeypatch.delenv("IPYDEVICE_DEBUG", raising=False)
        yield shell


@pytest.fixture
def kernel(ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> InteractiveShell:
    """The shell pretending to be a Jupyter kernel: the panel then carries the widget."""
    pytest.importorskip("ipywidgets")
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    return ip


run = run_captured  # every cell here is captured


def assert_users_traceback_and_one_line(cap: CapturedIO, result: Any, stage: str) -> None:
    assert isinstance(result.error_in_exec, RuntimeError), result.error_in_exec
    assert cap.stdout.count(USER_TEXT) == 1, cap.stdout[-3000:]
    assert sys.last_value is result.error_in_exec
    lines = cap.stderr.splitlines()
    assert len(lines) == 1, cap.stderr
    assert lines[0].startswith(f"ipydevice: {stage} failed ("), lines
    assert lines[0].endswith("set IPYDEVICE_DEBUG=1 for details"), lines
    assert "Traceback" not in cap.stdout.replace(_users_traceback(cap.stdout), "")


def _users_traceback(stdout: str) -> str:
    """The user's own traceback (IPython prints exactly one for the cell)."""
    start = stdout.find("RuntimeError") if "Traceback" not in stdout else stdout.find("Traceback")
    end = stdout.find(USER_TEXT)
    return stdout[max(start, 0) : end + len(USER_TEXT) + 2]


def assert_panel_works(shell: InteractiveShell) -> None:
    """The hook is still there: a device error gets its panel."""
    cap, result = run(shell, MISMATCH)
    assert isinstance(result.error_in_exec, RuntimeError)
    assert cap.stderr == "", cap.stderr
    (bundle,) = panels(cap)
    # in a kernel the header above the traceback says the headline, the panel the rest
    said = " ".join(out.data.get("text/plain", "") for out in cap.outputs)
    assert "`x` is on cpu" in said and "x" in bundle["text/plain"]


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise ValueError("injected")


class _Unprintable(Exception):
    """An exception whose message cannot be read (``str()`` raises)."""

    def __str__(self) -> str:
        raise RuntimeError("no message for you")


def _unprintable(*args: Any, **kwargs: Any) -> Any:
    raise _Unprintable()


def _multiline(*args: Any, **kwargs: Any) -> Any:
    raise ValueError("first line\nsecond line\nthird line")


# -- the hook: every stage, and still installed afterwards --------------------------------

#: stage -> (what to break, needs a kernel for the stage to run)
HOOK_STAGES: dict[str, tuple[str, bool]] = {
    "recognition": ("ipydevice.diagnosis.message.recognise_exception", False),
    "diagnosis": ("ipydevice.pipeline.engine.diagnose", False),
    "rendering": ("ipydevice.render.text.render_diagnosis", False),
    "rendering_html": ("ipydevice.render.html.render_diagnosis_html", False),
    "widget": ("ipydevice.render.widget.build_panel", True),
    "widget_bundle": ("ipydevice.render.widget.view_bundle", True),
    "widget_model": ("ipywidgets.Widget.open", True),
    "display": ("IPython.display.display", False),
}


def _stage_name(stage: str) -> str:
    return stage.split("_")[0]


@pytest.mark.parametrize("stage", list(HOOK_STAGES))
@pytest.mark.slow
def test_a_failing_stage_leaves_the_traceback_one_line_and_the_hook(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    target, in_kernel = HOOK_STAGES[stage]
    if in_kernel:
        pytest.importorskip("ipywidgets")
        monkeypatch.setattr(ip, "kernel", object(), raising=False)
    with monkeypatch.context() as patch:
        patch.setattr(target, _boom)
        for _ in range(2):  # the fault persists: every device error, the same outcome
            cap, result = run(ip, MISMATCH)
            assert_users_traceback_and_one_line(cap, result, _stage_name(stage))
            if stage.startswith("widget"):  # the static panel still shows
                assert [set(b) for b in panels(cap)] == [{"text/plain", "text/html"}]
            elif stage != "display":
                assert cap.outputs == []
        cap, result = run(ip, "1 + 1")  # a good cell after a failure: nothing to say
        assert result.success and cap.stderr == "" and cap.outputs == []
    assert ext.hook_of(ip) is not None
    assert ip.events.callbacks["post_run_cell"].count(ext.hook_of(ip).post_run_cell) == 1
    assert_panel_works(ip)


@pytest.mark.parametrize(
    "raiser",
    [
        pytest.param(_unprintable, id="unprintable_message"),
        pytest.param(
            _multiline,
            id="multiline_message",
        ),
    ],
)
def test_the_notice_is_one_line_whatever_the_failure_says(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch, raiser: Any
) -> None:
    with monkeypatch.context() as patch:
        patch.setattr("ipydevice.pipeline.engine.diagnose", raiser)
        cap, result = run(ip, MISMATCH)
        assert_users_traceback_and_one_line(cap, result, "diagnosis")
    assert_panel_works(ip)


def test_a_failing_diagnosis_inside_the_engine_degrades_to_a_panel(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A failure after recognition, inside engine.diagnose's own guard (here the
    # fixes): the panel still shows, with what was known, and a note.
    with monkeypatch.context() as patch:
        patch.setattr("ipydevice.pipeline.engine.propose_fixes", _boom)
        cap, result = run(ip, MISMATCH)
        assert isinstance(result.error_in_exec, RuntimeError)
        assert cap.stdout.count(USER_TEXT) == 1
        (bundle,) = panels(cap)
        assert "diagnosis failed" in bundle["text/plain"]
        assert cap.stderr == ""
    assert_panel_works(ip)


def test_a_hostile_last_value_does_not_break_every_cell(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Something (a debugger, a library) leaves an odd object in sys.last_value.
    class LyingClass:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            raise RuntimeError("who am I")

    monkeypatch.setattr(sys, "last_value", LyingClass(), raising=False)
    cap, result = run(ip, "1 + 1")
    assert result.success
    assert "Traceback" not in cap.stdout + cap.stderr, cap.stdout + cap.stderr
    assert_panel_works(ip)


def test_a_failing_pre_run_cell_does_not_flood_every_cell(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = ext.hook_of(ip)
    if hook.device_warnings is None:
        pytest.skip("no device-warning hook installed")
    monkeypatch.setattr(hook.device_warnings, "new_cell", _boom)
    hook.device_warnings.seen.add("a warning reported in the last cell")  # work to do
    hook.device_warnings.touched()  # as a device warning tells the hook
    cap, result = run(ip, "1 + 1")
    assert result.success
    assert "Traceback" not in cap.stdout + cap.stderr, cap.stdout + cap.stderr
    assert len(cap.stderr.splitlines()) == 1 and "ipydevice" in cap.stderr


def test_a_keyboard_interrupt_during_the_diagnosis_keeps_the_traceback(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C while ipydevice works: the user's traceback is out already; the
    # interrupt reaches IPython, and the hook is still there for the next error.
    def interrupt(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr("ipydevice.pipeline.engine.diagnose", interrupt)
        with capture_output() as cap:
            try:
                result = ip.run_cell(MISMATCH)
            except KeyboardInterrupt:
                result = None
        assert result is not None, "the interrupt escaped run_cell"
        assert isinstance(result.error_in_exec, RuntimeError)
        assert sys.last_value is result.error_in_exec
        assert cap.stdout.count("Traceback") <= 1, cap.stdout[-3000:]
        assert len(cap.stderr.splitlines()) <= 1, cap.stderr
    assert_panel_works(ip)


# -- the widget: Apply, Copy and Insert callbacks ---------------------------------------


class _Button:
    """A button of the panel's widget: a click is the message the browser sends."""

    def __init__(self, panel: Any, action: str, index: int) -> None:
        self.panel, self.action, self.index = panel, action, index

    def click(self) -> None:
        from ipydevice.render.widget import click

        click(self.panel, self.action, self.index)


def _buttons(panel: Any, css: str) -> list[Any]:
    action = {"ipydevice-apply": "apply", "ipydevice-insert": "insert"}[css]
    return [_Button(panel, action, i) for i, row in enumerate(panel.fixes) if row[action]]


def _status(panel: Any) -> str:
    return ("✔ " if panel.status_ok else "✘ ") + panel.status


def _panel_of(cap: CapturedIO) -> Any:
    """The live buttons widget the hook displayed under the panel (found by its model id)."""
    views = [o.data for o in cap.outputs if "application/vnd.jupyter.widget-view+json" in o.data]
    model_id = views[-1]["application/vnd.jupyter.widget-view+json"]["model_id"]
    try:
        from ipywidgets.widgets.widget import _instances as registry
    except ImportError:  # ipywidgets 7
        import ipywidgets

        registry = ipywidgets.Widget.widgets
    return registry[model_id]


def test_apply_raising_inside_the_click_shows_in_the_status(
    kernel: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    cap, _ = run(kernel, MISMATCH)
    panel = _panel_of(cap)
    monkeypatch.setattr(Fix, "apply", _boom)
    _buttons(panel, "ipydevice-apply")[0].click()  # must not raise
    status = _status(panel)
    assert "✘" in status and "ValueError: injected" in status
    monkeypatch.undo()
    monkeypatch.delenv("IPYDEVICE_DEBUG", raising=False)
    _buttons(panel, "ipydevice-apply")[0].click()  # and a second click works
    assert "moved x to meta" in _status(panel)
    assert run(kernel, MISMATCH)[1].error_in_exec is None  # the fix took


def test_apply_raising_an_unprintable_exception(
    kernel: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    cap, _ = run(kernel, MISMATCH)
    panel = _panel_of(cap)
    monkeypatch.setattr(Fix, "apply", _unprintable)
    _buttons(panel, "ipydevice-apply")[0].click()
    assert "_Unprintable" in _status(panel)


def test_apply_when_the_namespace_getter_raises(
    kernel: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    cap, _ = run(kernel, MISMATCH)
    panel = _panel_of(cap)
    # The panel reaches the namespace through the shell at click time.
    monkeypatch.setattr(type(kernel), "user_ns", property(_boom), raising=False)
    try:
        _buttons(panel, "ipydevice-apply")[0].click()
    finally:
        monkeypatch.undo()
    assert "ValueError: injected" in _status(panel)


def test_insert_raising_inside_the_click_shows_in_the_status(
    kernel: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    cap, _ = run(kernel, MISMATCH)
    panel = _panel_of(cap)
    monkeypatch.setattr(kernel, "set_next_input", _boom)
    _buttons(panel, "ipydevice-insert")[0].click()
    assert "ValueError: injected" in _status(panel)


def test_copy_button_messages_and_a_missing_anywidget(
    kernel: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("anywidget")
    from ipydevice.render.widget import click

    cap, _ = run(kernel, MISMATCH)
    panel = _panel_of(cap)
    click(panel, "copied")  # what the frontend sends after a click
    assert panel.copies == 1
    # Without anywidget the panel comes without buttons, and says nothing about it.
    monkeypatch.setitem(sys.modules, "anywidget", None)
    cap, _result = run(kernel, MISMATCH)
    assert cap.stderr == ""
    assert len(panels(cap)) == 1
    assert not [o for o in cap.outputs if "application/vnd.jupyter.widget-view+json" in o.data]


def _walk(widget: Any) -> Iterator[Any]:
    yield widget
    for child in getattr(widget, "children", ()):
        yield from _walk(child)


# -- %devices --------------------------------------------------------------------------

DEVICES_FAULTS = {
    "inventory": ("ipydevice.pipeline.inventory.inventory", ""),
    "inventory_in_depth": ("ipydevice.pipeline.inventory.inventory", "model"),
    "last_diagnosis": ("ipydevice.pipeline.engine.diagnose", "--last"),
}


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(
            key,
        )
        for key in DEVICES_FAULTS
    ],
)
def test_devices_internals_raising_is_one_line(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    target, line = DEVICES_FAULTS[fault]
    if line == "--last":
        ext.hook_of(ip).last = None
        monkeypatch.setattr(
            sys,
            "last_value",
            RuntimeError(
                "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
            ),
            raising=False,
        )
    monkeypatch.setattr(target, _boom)
    cap, result = run(ip, f"%devices {line}")
    shown = cap.stdout + cap.stderr
    assert "Traceback" not in shown, shown[-3000:]
    assert result.error_in_exec is None or isinstance(result.error_in_exec, UsageError)
    assert len([ln for ln in shown.splitlines() if "injected" in ln]) == 1, shown


def test_devices_rendering_raising_is_one_line(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ipydevice.render.text.render_inventory", _boom)
    monkeypatch.setattr("ipydevice.render.html.render_inventory_html", _boom)
    cap, result = run(ip, "%devices")
    assert result.error_in_exec is None
    assert "Traceback" not in cap.stdout + cap.stderr, (cap.stdout + cap.stderr)[-3000:]


def test_devices_keeps_working_after_a_failure(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        patch.setattr("ipydevice.pipeline.inventory.inventory", _boom)
        run(ip, "%devices")
    inv = ip.run_line_magic("devices", "")
    assert {"model", "x"} <= {r.name for r in inv.records}


# -- leaks through the whole path: hook, panel, Apply, %devices ---------------------------

LEAK_SETUP = """
import weakref
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.cache = torch.ones(2)

    def forward(self, inputs):
        pos = torch.arange(inputs.shape[0])  # a frame-only local
        WEAK.append(weakref.ref(pos))
        return self.fc(inputs) + pos[:, None]

WEAK = []
model = Net().to('meta')
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(3, 4)
batch = {'x': x, 'ids': torch.arange(3)}
"""

WATCHED = ("x", "model", "model.fc.weight", "model.cache", "opt", "batch['ids']")


def _drop_the_last_error(shell: InteractiveShell) -> None:
    """IPython's own hold on the last error, which it keeps with or without
    ipydevice: ``sys.last_*``, the traceback formatter's ``tb`` and the last
    execution result (``error_in_exec``)."""
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            setattr(sys, name, None)
    if hasattr(shell.InteractiveTB, "tb"):
        shell.InteractiveTB.tb = None
    shell.last_execution_result = None


def _forget_everything(shell: InteractiveShell, names: list[str]) -> None:
    """What a user does to free memory: delete the names, clear Out, drop the error."""
    for name in names:
        shell.user_ns.pop(name, None)
    with capture_output():
        shell.run_line_magic("reset", "-f out")
    _drop_the_last_error(shell)
    gc.collect()


def _alive(refs: dict[str, weakref.ref[Any]]) -> list[str]:
    return [text for text, ref in refs.items() if ref() is not None]


@pytest.mark.parametrize("in_kernel", [False, True], ids=["terminal", "kernel"])
@pytest.mark.slow
def test_nothing_stays_alive_through_hook_panel_apply_and_devices(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch, in_kernel: bool
) -> None:
    if in_kernel:
        pytest.importorskip("ipywidgets")
        monkeypatch.setattr(ip, "kernel", object(), raising=False)
    cap, result = run(ip, LEAK_SETUP)
    assert result.success, result.error_in_exec
    refs = {text: weakref.ref(eval(text, ip.user_ns)) for text in WATCHED}
    cap, result = run(ip, "out = model(x)")  # the hook diagnoses and shows the panel
    assert isinstance(result.error_in_exec, RuntimeError)
    (_bundle,) = panels(cap)
    refs.update({f"WEAK[{i}]": r for i, r in enumerate(ip.user_ns["WEAK"])})
    assert len(refs) == len(WATCHED) + 1, "the frame-only local was not created"
    if in_kernel:  # click Apply on the displayed widget: it moves x by reference
        panel = _panel_of(cap)
        _buttons(panel, "ipydevice-apply")[0].click()
        assert "moved x" in _status(panel)
        refs["x (moved)"] = weakref.ref(ip.user_ns["x"])
    for line in ("%devices", "inv = %devices", "%devices model batch opt", "%devices --last"):
        cap, result = run(ip, line)
        assert result.error_in_exec is None, (line, result.error_in_exec)
    names = ["x", "model", "opt", "batch", "out", "inv", "WEAK", "Net"]
    _forget_everything(ip, names)
    assert not _alive(refs), f"still alive: {_alive(refs)}"
    # What ipydevice keeps (the last diagnosis, the panel) is still whole.
    last = ext.hook_of(ip).last
    assert isinstance(last, Diagnosis) and "x" in str(last)
    if in_kernel:
        assert panel.fixes


def test_no_reference_cycle_delays_the_release() -> None:
    """With the collector off, dropping the names and the error frees whatever it
    frees without ipydevice: its transient objects (scans, module views, frame
    views, the widget's callbacks) add no cycle that would hold a tensor until a
    collection. The same steps without ipydevice give the baseline: a failing
    forward's frames are cyclic by themselves (torch's wrappers), so the model
    and its input wait for the collector anyway.

    Run on the engine (a namespace and cells): IPython's own traceback formatting
    (stack_data's frame records) leaves cycles through the frames too.
    """
    baseline = _held_without_collector(use_ipydevice=False)
    held = _held_without_collector(use_ipydevice=True)
    assert held <= baseline, f"held only by the collector because of ipydevice: {held - baseline}"


def _held_without_collector(use_ipydevice: bool) -> set[str]:
    from cells import Notebook

    import ipydevice
    from ipydevice.render.widget import build_panel

    nb = Notebook()
    nb.run(LEAK_SETUP)
    exc = nb.fails("out = model(x)\n")
    refs = {text: weakref.ref(eval(text, nb.ns)) for text in WATCHED}
    refs.update({f"WEAK[{i}]": r for i, r in enumerate(nb.ns["WEAK"])})
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        if use_ipydevice:
            d = ipydevice.diagnose(exc, namespace=nb.ns)
            kept = [str(d), d._repr_html_(), d.to_dict()]
            inv = ipydevice.inventory(nb.ns)
            kept += [str(inv), inv._repr_html_(), ipydevice.inventory(nb.ns, names=["model"])]
            if _has_widgets():
                panel = build_panel(d, lambda: nb.ns, lambda code: None)
                kept.append(panel._repr_mimebundle_())
            assert d.culprits and kept
        del exc
        nb.ns.clear()
        held = set(_alive(refs))
    finally:
        if was:
            gc.enable()
    gc.collect()
    assert not _alive(refs)
    return held


def _has_widgets() -> bool:
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True
