"""``%load_ext ipydevice`` in a real in-process ``InteractiveShell``.

The panel hook (``post_run_cell``), its coexistence with IPython's own machinery
(``set_custom_exc`` users, ``%tb``, ``%debug``, ``%pdb``), the load/unload
lifecycle, guarded failures, ``IPyDevice`` settings and ``%devices``.

``InteractiveShell.instance()`` is a process-wide singleton: every fixture
unloads the extension and restores what it changed. A plain ``InteractiveShell``
prints tracebacks to stdout; ``capture_output`` records stdout, stderr and every
``display()`` call (``cap.outputs``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import types
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from shells import panels, run, run_captured, singleton_shell

import ipydevice
from ipydevice import settings
from ipydevice.integrations import ipython as ext
from ipydevice.model import Diagnosis, Inventory

SETUP = "import torch\nmodel = torch.nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)"
MISMATCH = "model(x)"
CUDA_TEXT = (
    "raise RuntimeError('Expected all tensors to be on the same device, but found at least "
    "two devices, cuda:0 and cpu!')"
)


# -- fixtures and helpers -------------------------------------------------------------------


def state_of(shell: InteractiveShell) -> dict[str, Any]:
    """Everything load may touch, as comparable values."""
    manager = shell.magics_manager
    return {
        "events": {event: list(callbacks) for event, callbacks in shell.events.callbacks.items()},
        "custom_exceptions": shell.custom_exceptions,
        "CustomTB": shell.CustomTB,
        "_showtraceback": vars(shell).get("_showtraceback"),
        "showwarning": warnings.showwarning,
        "excepthook": sys.excepthook,
        "line_magics": dict(manager.magics["line"]),
        "cell_magics": dict(manager.magics["cell"]),
        "registry": dict(manager.registry),
        "configurables": list(shell.configurables),
        "settings": settings.current(),
    }


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    """The singleton shell, with ipydevice unloaded and IPyDevice config cleared after."""
    with singleton_shell() as ip:
        yield ip


@pytest.fixture
def ip(shell: InteractiveShell) -> InteractiveShell:
    """The shell with ipydevice loaded and the meta-device setup run."""
    shell.run_line_magic("load_ext", "ipydevice")
    run(shell, SETUP)
    return shell


# -- the panel ----------------------------------------------------------------------------


def test_meta_mismatch_shows_traceback_then_one_panel(ip: InteractiveShell) -> None:
    cap, result = run_captured(ip, MISMATCH)
    assert isinstance(result.error_in_exec, RuntimeError)
    assert "Traceback" in cap.stdout or "RuntimeError" in cap.stdout
    assert "is not on the expected device cpu" in cap.stdout
    assert cap.stderr == ""
    assert len(cap.outputs) == 1
    (bundle,) = panels(cap)
    assert set(bundle) == {"text/plain", "text/html"}
    assert "ipydevice · device error" in bundle["text/plain"]
    assert "`x` is on cpu" in bundle["text/plain"]
    assert "meta" in bundle["text/plain"]
    assert "<script" not in bundle["text/html"]
    assert ext.hook_of(ip).last.culprits[0].name == "x"
    assert ext.hook_of(ip).last.target == "meta"


def test_message_only_cuda_error_gets_a_panel(ip: InteractiveShell) -> None:
    cap, _ = run_captured(ip, CUDA_TEXT)
    (bundle,) = panels(cap)
    assert "cuda:0" in bundle["text/plain"]


def test_html_is_escaped(ip: InteractiveShell) -> None:
    ip.run_line_magic("config", "IPyDevice.verbosity = 'Verbose'")  # the message is shown
    source = "raise RuntimeError('Expected all tensors to be on the same device, but found at least two devices, cuda:0 and <b>cpu</b>!')"
    cap, _ = run_captured(ip, source)
    (bundle,) = panels(cap)
    assert "<b>cpu</b>" not in bundle["text/html"]
    assert "&lt;b&gt;" in bundle["text/html"]


@pytest.mark.parametrize(
    "source",
    [
        "1 / 0",
        "raise RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB')",
        "raise RuntimeError('mat1 and mat2 shapes cannot be multiplied (3x4 and 5x2)')",
        "{}['missing']",
        "raise KeyboardInterrupt",
    ],
)
def test_other_errors_look_exactly_as_without_ipydevice(
    shell: InteractiveShell, source: str
) -> None:
    run(shell, SETUP)
    plain, plain_result = run_captured(shell, source)
    shell.run_line_magic("load_ext", "ipydevice")
    cap, result = run_captured(shell, source)
    assert type(result.error_in_exec) is type(plain_result.error_in_exec)
    assert cap.stdout == plain.stdout
    assert cap.stderr == plain.stderr
    assert cap.outputs == []


def test_successful_cells_and_syntax_errors_show_nothing(ip: InteractiveShell) -> None:
    cap, _ = run_captured(ip, "y = x + 1\ny.shape")
    assert cap.outputs == [] and cap.stderr == ""
    cap, result = run_captured(ip, "def broken(:\n  pass")
    assert result.error_before_exec is not None
    assert cap.outputs == []


def test_run_script_that_fails_gets_a_panel(ip: InteractiveShell, tmp_path: Any) -> None:
    script = tmp_path / "train.py"
    script.write_text(SETUP + "\n" + MISMATCH + "\n")
    cap, result = run_captured(ip, f"%run {script}")
    assert result.error_in_exec is None  # %run shows the traceback itself
    assert "is not on the expected device cpu" in cap.stdout
    (bundle,) = panels(cap)
    assert "`x` is on cpu" in bundle["text/plain"]
    cap, _ = run_captured(ip, "1 + 1")  # the same last exception: no second panel
    assert panels(cap) == []


def test_panel_does_not_pin_the_exception(ip: InteractiveShell) -> None:
    run_captured(ip, MISMATCH)
    hook = ext.hook_of(ip)
    assert isinstance(hook.shown_before, int)
    held = [v for v in vars(hook).values() if isinstance(v, BaseException)]
    assert held == []
    assert isinstance(hook.last, Diagnosis)


def outputs_of(cap: Any) -> list[str]:
    """What each display was: header, panel or buttons (a widget view)."""
    kinds = []
    for out in cap.outputs:
        page = out.data.get("text/html", "")
        if "ipydevice-header" in page:
            kinds.append("header")
        elif "ipydevice-panel" in page:
            kinds.append("panel")
        elif "application/vnd.jupyter.widget-view+json" in out.data:
            kinds.append("buttons")
        else:
            kinds.append("other")
    return kinds


@pytest.fixture
def kernel_ip(ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> InteractiveShell:
    """The loaded shell, looking like ipykernel's (the header goes before tracebacks)."""
    pytest.importorskip("anywidget")
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    return ip


def test_in_a_kernel_the_header_comes_before_the_traceback(kernel_ip: InteractiveShell) -> None:
    order: list[str] = []
    hook = ext.hook_of(kernel_ip)
    assert hook is not None
    stock = hook.stock_showtraceback
    hook.stock_showtraceback = lambda *args: (order.append("traceback"), stock(*args))[1]
    from IPython.core import displaypub

    publish = displaypub.CapturingDisplayPublisher.publish

    def noting(self: Any, data: Any, *args: Any, **kwargs: Any) -> None:
        order.append("header" if "ipydevice-header" in data.get("text/html", "") else "display")
        publish(self, data, *args, **kwargs)

    from ipydevice.pipeline import engine

    diagnose = engine.diagnose

    def noted(*args: Any, **kwargs: Any) -> Any:
        order.append("diagnosis")
        return diagnose(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(displaypub.CapturingDisplayPublisher, "publish", noting)
        patch.setattr(engine, "diagnose", noted)
        cap, _ = run_captured(kernel_ip, MISMATCH)
    # The header from the message alone before the traceback (one display, nothing
    # diagnosed), replaced in place by the diagnosis' after it.
    assert order == ["header", "traceback", "diagnosis", "header", "display", "display"], order
    assert outputs_of(cap) == ["header", "panel", "buttons"]
    header = cap.outputs[0].data
    assert set(header) == {"text/plain", "text/html"}
    assert "`x` is on cpu" in header["text/plain"]
    assert "x = x.to('meta')" in header["text/plain"]
    assert "below the traceback" in header["text/plain"]
    assert set(cap.outputs[1].data) == {"text/plain", "text/html"}  # the panel: static only
    assert "is not on the expected device cpu" in cap.stdout


def test_one_diagnosis_for_the_header_and_the_panel(
    kernel_ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ipydevice.pipeline import engine

    calls: list[BaseException] = []
    diagnose = engine.diagnose

    def counting(exc: BaseException, **kwargs: Any) -> Diagnosis:
        calls.append(exc)
        return diagnose(exc, **kwargs)

    monkeypatch.setattr(engine, "diagnose", counting)
    cap, result = run_captured(kernel_ip, MISMATCH)
    assert calls == [result.error_in_exec]
    assert outputs_of(cap) == ["header", "panel", "buttons"]


def test_tb_shows_no_second_header(kernel_ip: InteractiveShell) -> None:
    run_captured(kernel_ip, MISMATCH)
    cap, _ = run_captured(kernel_ip, "%tb")
    assert "is not on the expected device cpu" in cap.stdout
    assert cap.outputs == []


def test_widget_off_leaves_the_static_outputs(kernel_ip: InteractiveShell) -> None:
    kernel_ip.run_line_magic("config", "IPyDevice.widget = False")
    cap, _ = run_captured(kernel_ip, MISMATCH)
    assert outputs_of(cap) == ["header", "panel"]


def test_in_a_kernel_the_panel_does_not_repeat_the_headers_headline(
    kernel_ip: InteractiveShell,
) -> None:
    cap, _ = run_captured(kernel_ip, MISMATCH)
    assert outputs_of(cap) == ["header", "panel", "buttons"]
    header, panel = cap.outputs[0].data, cap.outputs[1].data
    assert "`x` is on cpu" in header["text/plain"] and "ipydevice-headline" in header["text/html"]
    for mime in ("text/plain", "text/html"):
        assert "is on cpu" not in panel[mime], panel[mime]
    assert "ipydevice-headline" not in panel["text/html"]
    assert panel["text/plain"].startswith("ipydevice · device error: ")
    assert "ipydevice-title" in panel["text/html"]
    assert "target meta" in panel["text/plain"]  # the target's reason: the header does not say it
    assert "x = x.to('meta')" in panel["text/plain"]  # the objects and fixes stay
    # Standalone, the same diagnosis says its headline.
    alone = ext.hook_of(kernel_ip).last
    assert "`x` is on cpu" in str(alone) and "ipydevice-headline" in alone._repr_html_()


@pytest.mark.parametrize(
    ("xmode", "setting", "expected"),
    [
        ("Context", None, "context"),
        ("Minimal", None, "minimal"),
        ("Verbose", None, "verbose"),
        ("Plain", None, "context"),
        ("Minimal", "Verbose", "verbose"),
        ("Verbose", "minimal", "minimal"),
    ],
)
def test_verbosity_follows_xmode_unless_set(
    ip: InteractiveShell, xmode: str, setting: str | None, expected: str
) -> None:
    saved = ip.InteractiveTB.mode
    try:
        ip.run_line_magic("xmode", xmode)
        if setting is not None:
            ip.run_line_magic("config", f"IPyDevice.verbosity = {setting!r}")
        assert ext.hook_of(ip).verbosity().lower() == expected
        with capture_output() as cap:
            ip.run_cell(MISMATCH)
        (bundle,) = panels(cap)
        if expected == "minimal":
            assert "ipydevice-minimal" in bundle["text/html"]
            assert "x = x.to('meta')" in bundle["text/plain"]
            assert len(bundle["text/plain"].splitlines()) <= 8
        else:
            assert f'data-verbosity="{expected}"' in bundle["text/html"]
    finally:
        ip.run_line_magic("xmode", saved)


def test_minimal_in_a_kernel_is_the_header_only(kernel_ip: InteractiveShell) -> None:
    kernel_ip.run_line_magic("config", "IPyDevice.verbosity = 'Minimal'")
    cap, _ = run_captured(kernel_ip, MISMATCH)
    assert outputs_of(cap) == ["header", "buttons"]
    assert "verbosity" in cap.outputs[0].data["text/plain"]  # says how to see more


def test_config_rejects_a_bad_verbosity(ip: InteractiveShell) -> None:
    with capture_output():
        ip.run_line_magic("config", "IPyDevice.verbosity = 'loud'")
    assert settings.current().verbosity is None
    ip.run_line_magic("config", "IPyDevice.verbosity = 'verbose'")
    assert settings.current().verbosity == "Verbose"


# -- coexistence with IPython's own machinery ---------------------------------------------


def test_tb_and_last_value_see_the_device_error(ip: InteractiveShell) -> None:
    _, result = run_captured(ip, MISMATCH)
    assert sys.last_value is result.error_in_exec
    assert sys.last_type is RuntimeError
    cap, _ = run_captured(ip, "%tb")
    assert "is not on the expected device cpu" in cap.stdout
    assert cap.outputs == []


class FakePdb:
    """Stands in for the interactive debugger: records what it was asked to inspect."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.botframe: Any = None

    def reset(self) -> None:
        pass

    def interaction(self, frame: Any, exc: Any) -> None:
        self.seen.append(exc)

    def saw(self, exc: BaseException | None) -> bool:
        """Asked to inspect ``exc`` once: IPython 8 passes the exception, IPython 7
        (Colab's) its traceback from ``sys.last_traceback``, walked to the innermost frame."""
        if len(self.seen) != 1 or exc is None:
            return False
        (seen,) = self.seen
        if seen is exc:
            return True
        return _innermost(seen) is not None and _innermost(seen) is _innermost(exc.__traceback__)


def _innermost(tb: Any) -> Any:
    if not isinstance(tb, types.TracebackType):
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame


@pytest.fixture
def fake_pdb(ip: InteractiveShell) -> Iterator[FakePdb]:
    saved = ip.InteractiveTB.pdb
    ip.InteractiveTB.pdb = pdb = FakePdb()
    yield pdb
    ip.InteractiveTB.pdb = saved
    ip.call_pdb = False


def test_debug_sees_the_device_error(ip: InteractiveShell, fake_pdb: FakePdb) -> None:
    _, result = run_captured(ip, MISMATCH)
    run_captured(ip, "%debug")
    assert fake_pdb.saw(result.error_in_exec), fake_pdb.seen


def test_pdb_on_still_debugs_and_the_panel_follows(ip: InteractiveShell, fake_pdb: FakePdb) -> None:
    ip.call_pdb = True
    cap, result = run_captured(ip, MISMATCH)
    assert fake_pdb.saw(result.error_in_exec), fake_pdb.seen
    assert len(panels(cap)) == 1


@pytest.fixture
def other_extension(shell: InteractiveShell) -> Iterator[list[str]]:
    """Another extension (Colab, Jupyter AI) holding the set_custom_exc slot for KeyError."""
    calls: list[str] = []

    def handler(
        self: InteractiveShell, etype: type, value: BaseException, tb: Any, tb_offset: Any = None
    ) -> None:
        calls.append(etype.__name__)
        self.showtraceback((etype, value, tb), tb_offset=tb_offset)

    saved = (shell.custom_exceptions, shell.CustomTB)
    shell.set_custom_exc((KeyError, RuntimeError), handler)
    yield calls
    shell.custom_exceptions, shell.CustomTB = saved


def test_another_extensions_handler_keeps_working(
    shell: InteractiveShell, other_extension: list[str]
) -> None:
    run(shell, SETUP)
    before = (shell.custom_exceptions, shell.CustomTB)
    shell.run_line_magic("load_ext", "ipydevice")
    assert (shell.custom_exceptions, shell.CustomTB) == before
    cap, _ = run_captured(shell, "{}['k']")
    assert other_extension == ["KeyError"]
    assert "KeyError" in cap.stdout and cap.outputs == []
    cap, _ = run_captured(shell, MISMATCH)
    assert other_extension == ["KeyError", "RuntimeError"]
    assert "is not on the expected device cpu" in cap.stdout
    assert len(panels(cap)) == 1
    shell.run_line_magic("unload_ext", "ipydevice")
    assert (shell.custom_exceptions, shell.CustomTB) == before
    run_captured(shell, "{}['k']")
    assert other_extension[-1] == "KeyError"


@pytest.mark.parametrize("calls_showtraceback", [True, False])
def test_a_handler_registered_after_loading_is_called_and_the_panel_follows(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch, calls_showtraceback: bool
) -> None:
    pytest.importorskip("anywidget")
    run(shell, SETUP)
    shell.run_line_magic("load_ext", "ipydevice")
    monkeypatch.setattr(shell, "kernel", object(), raising=False)
    calls: list[str] = []

    def handler(
        self: InteractiveShell, etype: type, value: BaseException, tb: Any, tb_offset: Any = None
    ) -> None:
        calls.append(etype.__name__)
        if calls_showtraceback:  # Jupyter AI and Colab show the stock traceback first
            self.showtraceback((etype, value, tb), tb_offset=tb_offset)
        else:
            print(f"handled: {value}")

    saved = (shell.custom_exceptions, shell.CustomTB)
    shell.set_custom_exc((RuntimeError,), handler)
    try:
        cap, _ = run_captured(shell, MISMATCH)
    finally:
        shell.custom_exceptions, shell.CustomTB = saved
    assert calls == ["RuntimeError"]
    assert "is not on the expected device cpu" in cap.stdout
    # Through showtraceback: the header first; a handler that prints its own: the panel after.
    header = ["header"] if calls_showtraceback else []
    assert outputs_of(cap) == [*header, "panel", "buttons"]


@pytest.mark.parametrize(
    "source",
    [
        MISMATCH,
        CUDA_TEXT,
        "1 / 0",
        "raise RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB')",
        "{}['missing']",
    ],
)
@pytest.mark.parametrize("kernel", [False, True], ids=["terminal", "kernel"])
def test_traceback_text_is_identical_with_and_without_ipydevice(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch, source: str, kernel: bool
) -> None:
    """What IPython hands to ``_showtraceback`` (and prints) is the same, byte for byte."""
    pytest.importorskip("anywidget")
    if kernel:
        monkeypatch.setattr(shell, "kernel", object(), raising=False)
    run(shell, SETUP)
    seen: list[tuple[str, list[str]]] = []
    stock = InteractiveShell._showtraceback

    def recording(self: InteractiveShell, etype: type, value: BaseException, stb: Any) -> None:
        seen.append((etype.__name__, list(stb)))
        stock(self, etype, value, stb)

    run_captured(shell, source)  # torch's first call takes another path (a one-time check)
    monkeypatch.setattr(InteractiveShell, "_showtraceback", recording)
    plain, _ = run_captured(shell, source)
    shell.run_line_magic("load_ext", "ipydevice")
    loaded, result = run_captured(shell, source)
    assert result.error_in_exec is not None
    assert len(seen) == 2 and seen[0] == seen[1]
    assert loaded.stdout == plain.stdout
    assert sys.last_value is result.error_in_exec
    shell.run_line_magic("unload_ext", "ipydevice")
    assert "_showtraceback" not in vars(shell)


def test_unload_keeps_a_later_wrapper_of_showtraceback(shell: InteractiveShell) -> None:
    shell.run_line_magic("load_ext", "ipydevice")
    ours = shell._showtraceback
    later = lambda *args: ours(*args)  # noqa: E731 - another extension wrapping after us
    shell._showtraceback = later
    try:
        shell.run_line_magic("unload_ext", "ipydevice")
        assert shell._showtraceback is later
        with capture_output() as cap:
            shell.run_cell("1 / 0")
        assert "ZeroDivisionError" in cap.stdout and cap.outputs == []
    finally:
        del shell._showtraceback


# -- lifecycle ----------------------------------------------------------------------------


def test_unload_leaves_the_shell_exactly_as_it_was(shell: InteractiveShell) -> None:
    with capture_output():  # IPython loads its own magics lazily, on first use: do that first
        shell.run_line_magic("config", "")
        shell.run_line_magic("load_ext", "ipydevice")
        shell.run_line_magic("unload_ext", "ipydevice")
    before = state_of(shell)
    shell.run_line_magic("load_ext", "ipydevice")
    loaded = state_of(shell)
    assert loaded != before
    assert "devices" in loaded["line_magics"]
    run(shell, SETUP)
    run_captured(shell, MISMATCH)
    run_captured(shell, "%config IPyDevice.max_rows = 3")
    shell.run_line_magic("unload_ext", "ipydevice")
    assert state_of(shell) == before
    assert ext.hook_of(shell) is None


def test_load_twice_is_harmless(shell: InteractiveShell) -> None:
    run(shell, SETUP)
    shell.run_line_magic("load_ext", "ipydevice")
    once = state_of(shell)
    with capture_output() as cap:
        shell.run_line_magic("load_ext", "ipydevice")
    assert "already loaded" in cap.stdout
    ipydevice.load_ipython_extension(shell)  # bypassing the extension manager
    assert state_of(shell) == once
    cap, _ = run_captured(shell, MISMATCH)
    assert len(panels(cap)) == 1


def test_reload_ext_keeps_one_hook(shell: InteractiveShell) -> None:
    run(shell, SETUP)
    shell.run_line_magic("load_ext", "ipydevice")
    once = state_of(shell)
    shell.run_line_magic("reload_ext", "ipydevice")
    reloaded = state_of(shell)
    assert {k: len(v) for k, v in reloaded["events"].items()} == {
        k: len(v) for k, v in once["events"].items()
    }
    assert len(reloaded["configurables"]) == len(once["configurables"])
    cap, _ = run_captured(shell, MISMATCH)
    assert len(panels(cap)) == 1


def test_unload_when_not_loaded_is_harmless(shell: InteractiveShell) -> None:
    before = state_of(shell)
    ipydevice.unload_ipython_extension(shell)
    assert state_of(shell) == before


def test_unload_puts_back_a_previous_devices_magic(shell: InteractiveShell) -> None:
    def devices(line: str) -> str:
        return "theirs"

    shell.register_magic_function(devices, magic_kind="line", magic_name="devices")
    try:
        shell.run_line_magic("load_ext", "ipydevice")
        assert isinstance(shell.run_line_magic("devices", ""), Inventory)
        shell.run_line_magic("unload_ext", "ipydevice")
        assert shell.run_line_magic("devices", "") == "theirs"
    finally:
        shell.magics_manager.magics["line"].pop("devices", None)


def test_no_panel_after_unload(shell: InteractiveShell) -> None:
    run(shell, SETUP)
    shell.run_line_magic("load_ext", "ipydevice")
    shell.run_line_magic("unload_ext", "ipydevice")
    cap, _ = run_captured(shell, MISMATCH)
    assert cap.outputs == []
    with pytest.raises(UsageError):
        shell.run_line_magic("devices", "")


LOAD_PROBE = """
import json, sys, time
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
start = time.process_time()  # CPU time: a busy machine stretches wall-clock time
shell.run_line_magic("load_ext", "ipydevice")
first = time.process_time() - start
shell.run_line_magic("unload_ext", "ipydevice")
start = time.process_time()
shell.run_line_magic("load_ext", "ipydevice")
again = time.process_time() - start
heavy = [m for m in ("torch", "pandas", "ipywidgets", "numpy", "ipydevice.pipeline.engine") if m in sys.modules]
print(json.dumps({"first_ms": first * 1000, "again_ms": again * 1000, "imported": heavy}))
"""


def test_only_the_shell_module_imports_ipython() -> None:
    """The pure core and the integration's helper modules never import IPython."""
    import ast
    from pathlib import Path

    package = Path(ipydevice.__file__).parent
    importers = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            if any(n == "IPython" or n.startswith("IPython.") for n in names):
                importers.add(path.relative_to(package).as_posix())
    assert importers == {"integrations/ipython.py"}


def test_the_integration_helpers_import_without_ipython() -> None:
    code = (
        "import sys\n"
        "import ipydevice.integrations.ipython_display, ipydevice.integrations.ipython_magics, ipydevice.integrations.ipython_config\n"
        "import ipydevice.render.widget\n"
        "heavy = [m for m in ('IPython', 'torch', 'ipywidgets', 'anywidget') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_load_is_instant_and_imports_nothing_heavy(tmp_path: Any) -> None:
    env = {**os.environ, "IPYTHONDIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", LOAD_PROBE],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    probe = json.loads(out.stdout.strip().splitlines()[-1])
    assert probe["imported"] == []
    assert probe["first_ms"] < 50, probe  # includes importing ipydevice.integrations.ipython
    assert probe["again_ms"] < 50, probe


WARM_PROBE = r"""
import json, sys
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
shell = InteractiveShell.instance()

class Loop:  # the kernel's io_loop: what is scheduled runs when the test says it is idle
    due = []
    def call_later(self, delay, callback):
        self.due.append(callback)

class Kernel:  # a kernel's shell: the buttons are built
    io_loop = Loop()

shell.kernel = Kernel()
shell.run_line_magic("load_ext", "ipydevice")
HEAVY = ("torch", "ipywidgets", "anywidget", "ipydevice.pipeline.engine")
found = {"loaded": [m for m in HEAVY if m in sys.modules]}
shell.run_cell("y = 1")
found["plain_cell"] = [m for m in HEAVY if m in sys.modules]
with capture_output():
    shell.run_cell("import torch\nmodel = torch.nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)")
found["torch_cell"] = [m for m in HEAVY if m in sys.modules]
steps = 0
while Loop.due:  # idle: the steps, one after the other
    Loop.due.pop(0)()
    steps += 1
found["steps"] = steps
with capture_output():
    shell.run_cell("try:\n    torch.zeros(1, device='meta') + torch.zeros(2)\nexcept RuntimeError:\n    pass")
import threading
found["threads"] = [t.name for t in threading.enumerate() if t.name.startswith("ipydevice")]
before = set(sys.modules)
with capture_output() as cap:
    shell.run_cell("model(x)")
assert len(cap.outputs) >= 2, cap.outputs  # the panel and its buttons
found["first_error"] = sorted(
    m for m in set(sys.modules) - before
    if m.split(".")[0] in ("ipydevice", "ipywidgets", "anywidget", "traitlets", "comm")
)
print(json.dumps(found))
"""


@pytest.mark.slow
def test_the_failing_path_is_imported_on_the_idle_loop_after_the_torch_cell(
    tmp_path: Any,
) -> None:
    """``%load_ext`` and cells without torch import nothing heavy, nor does the cell
    that imports torch; after it, the kernel's loop imports the engine, the renderers
    and the widgets in steps (in the main thread: a background one could meet the
    import-deadlock avoidance), so that the first device error imports none of them."""
    pytest.importorskip("anywidget")
    env = {**os.environ, "IPYTHONDIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", WARM_PROBE],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    probe = json.loads(out.stdout.strip().splitlines()[-1])
    assert probe["loaded"] == [] and probe["plain_cell"] == []
    assert probe["torch_cell"] == ["torch"]  # the cell itself: torch only
    assert probe["steps"] > 50  # small steps
    assert probe["first_error"] == []
    assert probe["threads"] == []  # no thread of ipydevice's imports alongside the shell


# -- guarded failures ---------------------------------------------------------------------


def _raise(*args: Any, **kwargs: Any) -> Any:
    raise ValueError("injected")


STAGES = {
    "recognition": ("ipydevice.diagnosis.message.recognise_exception", False),
    "diagnosis": ("ipydevice.pipeline.engine.diagnose", False),
    "rendering": ("ipydevice.render.text.render_diagnosis", False),
    "display": ("IPython.display.display", False),
    "widget": ("ipydevice.render.widget.build_panel", True),
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_a_failure_keeps_the_traceback_and_prints_one_line(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    target, in_kernel = STAGES[stage]
    if in_kernel:
        pytest.importorskip("ipywidgets")
        monkeypatch.setattr(ip, "kernel", object(), raising=False)
    monkeypatch.setattr(target, _raise)
    monkeypatch.delenv("IPYDEVICE_DEBUG")
    cap, result = run_captured(ip, MISMATCH)
    assert isinstance(result.error_in_exec, RuntimeError)
    assert "is not on the expected device cpu" in cap.stdout
    lines = cap.stderr.splitlines()
    assert lines == [
        f"ipydevice: {stage} failed (ValueError: injected); set IPYDEVICE_DEBUG=1 for details"
    ]
    assert sys.last_value is result.error_in_exec
    if stage == "widget":  # the static panel still shows
        assert [set(b) for b in panels(cap)] == [{"text/plain", "text/html"}]
    elif stage != "display":
        assert cap.outputs == []


def test_insert_fix_failure_is_guarded_too(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    ip.run_line_magic("config", "IPyDevice.insert_fix_cell = True")
    monkeypatch.setattr(ip, "set_next_input", _raise)
    monkeypatch.delenv("IPYDEVICE_DEBUG")
    cap, _ = run_captured(ip, MISMATCH)
    assert len(panels(cap)) == 1
    assert cap.stderr.splitlines() == [
        "ipydevice: fix cell failed (ValueError: injected); set IPYDEVICE_DEBUG=1 for details"
    ]


@pytest.mark.parametrize("stage", ["recognition", "diagnosis", "rendering", "display"])
def test_with_debug_the_failure_surfaces_after_the_users_traceback(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    """IPython's event manager catches what a callback raises: it prints
    ``Error in callback`` and shows that traceback after the user's own."""
    monkeypatch.setattr(STAGES[stage][0], _raise)
    monkeypatch.setenv("IPYDEVICE_DEBUG", "1")
    cap, result = run_captured(ip, MISMATCH)
    assert isinstance(result.error_in_exec, RuntimeError)
    users = cap.stdout.index("is not on the expected device cpu")
    ours = cap.stdout.index("Error in callback")
    assert users < ours
    assert "ValueError" in cap.stdout[ours:] and "injected" in cap.stdout[ours:]
    # The cost, in debug mode only: sys.last_value (and so %debug) is ipydevice's failure.
    assert isinstance(sys.last_value, ValueError)


def test_with_debug_a_header_failure_surfaces_after_the_traceback(
    kernel_ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ipydevice.integrations.ipython_display.header_bundle", _raise)
    monkeypatch.setenv("IPYDEVICE_DEBUG", "1")
    cap, result = run_captured(kernel_ip, MISMATCH)
    assert isinstance(result.error_in_exec, RuntimeError)
    users = cap.stdout.index("is not on the expected device cpu")
    ours = cap.stdout.index("Error in callback")
    assert users < ours and "injected" in cap.stdout[ours:]
    assert outputs_of(cap) == ["panel", "buttons"]  # the panel still came


def test_without_debug_a_header_failure_is_one_line(
    kernel_ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ipydevice.integrations.ipython_display.header_bundle", _raise)
    monkeypatch.delenv("IPYDEVICE_DEBUG")
    cap, result = run_captured(kernel_ip, MISMATCH)
    assert "is not on the expected device cpu" in cap.stdout
    assert cap.stderr.splitlines() == [
        "ipydevice: rendering failed (ValueError: injected); set IPYDEVICE_DEBUG=1 for details"
    ]
    assert outputs_of(cap) == ["panel", "buttons"]
    assert sys.last_value is result.error_in_exec


# -- settings -----------------------------------------------------------------------------


def test_config_panel_off_and_on(ip: InteractiveShell) -> None:
    ip.run_line_magic("config", "IPyDevice.panel = False")
    cap, _ = run_captured(ip, MISMATCH)
    assert cap.outputs == []
    assert "is not on the expected device cpu" in cap.stdout
    ip.run_line_magic("config", "IPyDevice.panel = True")
    cap, _ = run_captured(ip, MISMATCH)
    assert len(panels(cap)) == 1


def test_config_limits_reach_the_settings_and_unload_restores_them(shell: InteractiveShell) -> None:
    settings.configure(max_rows=7)
    shell.run_line_magic("load_ext", "ipydevice")
    assert ext.hook_of(shell).config.max_rows == 7  # a value set from Python shows through
    shell.run_line_magic("config", "IPyDevice.max_rows = 20")
    shell.run_line_magic("config", "IPyDevice.max_depth = 2")
    assert settings.current().max_rows == 20
    assert settings.current().max_depth == 2
    cap, _ = run_captured(shell, "%config IPyDevice")
    assert "IPyDevice.max_rows=<Int>" in cap.stdout and "Current: 20" in cap.stdout
    shell.run_line_magic("unload_ext", "ipydevice")
    assert settings.current().max_rows == 7
    assert settings.current().max_depth == settings.Settings().max_depth


def test_config_rejects_a_bad_limit(ip: InteractiveShell, caplog: pytest.LogCaptureFixture) -> None:
    before = settings.current()
    run_captured(ip, "%config IPyDevice.max_rows = 0")  # IPython logs the TraitError
    assert "'max_rows' trait of an IPyDevice instance should not be less than 1" in caplog.text
    assert settings.current() == before


def test_config_file_values_apply_on_load(shell: InteractiveShell) -> None:
    shell.config.IPyDevice.max_rows = 30
    shell.config.IPyDevice.panel = False
    shell.run_line_magic("load_ext", "ipydevice")
    assert settings.current().max_rows == 30
    run(shell, SETUP)
    cap, _ = run_captured(shell, MISMATCH)
    assert cap.outputs == []


def test_max_rows_shortens_the_panel(ip: InteractiveShell) -> None:
    ip.run_line_magic("config", "IPyDevice.max_rows = 1")
    cap, _ = run_captured(ip, MISMATCH)
    (bundle,) = panels(cap)
    assert re.search(r"… \d+ more", bundle["text/plain"])


def test_insert_fix_cell_fills_the_next_input(ip: InteractiveShell) -> None:
    ip.rl_next_input = None
    run_captured(ip, MISMATCH)
    assert ip.rl_next_input is None  # off by default
    ip.run_line_magic("config", "IPyDevice.insert_fix_cell = True")
    run_captured(ip, MISMATCH)
    best = next(f for f in ext.hook_of(ip).last.fixes if f.scope in ("namespace", "cell"))
    assert ip.rl_next_input == best.code
    assert "x.to('meta')" in best.code
    ip.rl_next_input = None


# -- %devices -----------------------------------------------------------------------------


def test_devices_lists_the_namespace_by_device(ip: InteractiveShell) -> None:
    inv = ip.run_line_magic("devices", "")
    assert isinstance(inv, Inventory)
    names = {r.name for r in inv.records}
    assert {"model", "x"} <= names
    assert {t.device for t in inv.totals} == {"cpu", "meta"}
    assert any(p.name == "x" for p in inv.problems)
    bundle = inv._repr_mimebundle_()
    assert "ipydevice-panel" in bundle["text/html"]
    assert "meta" in bundle["text/plain"] and "cpu" in bundle["text/plain"]


def test_devices_result_assigns_and_gives_a_dataframe(ip: InteractiveShell) -> None:
    pd = pytest.importorskip("pandas")
    cap, _ = run_captured(ip, "inv = %devices")
    assert cap.outputs == [] and cap.stdout == ""
    table = ip.user_ns["inv"].table()
    assert isinstance(table, pd.DataFrame)
    assert {"model", "x"} <= set(table["name"])
    assert table.loc[table["name"] == "x", "device"].item() == "cpu"


def test_devices_display_is_the_panel_style(ip: InteractiveShell) -> None:
    cap, result = run_captured(ip, "%devices")
    assert isinstance(result.result, Inventory)
    assert "ipydevice ·" in cap.stdout  # the displayhook printed text/plain


def test_devices_names_in_depth(ip: InteractiveShell) -> None:
    run(
        ip,
        "net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))\nnet[1].to('meta')",
    )
    inv = ip.run_line_magic("devices", "net")
    assert inv.names == ("net",)
    by_name = {r.name: r.device for r in inv.records}
    assert by_name["net"] == "mixed"
    assert by_name["net[0]"] == "cpu" and by_name["net[1]"] == "meta"
    assert ip.run_line_magic("devices", "net[1]").records[0].device == "meta"
    run(ip, "batch = {'x': torch.zeros(2, device='meta')}")
    assert ip.run_line_magic("devices", "batch['x']").records[0].device == "meta"
    both = ip.run_line_magic("devices", "model x")
    assert {"model", "x"} <= {r.name for r in both.records}


def test_devices_all_includes_private_names(ip: InteractiveShell) -> None:
    run(ip, "_hidden = torch.zeros(2)")
    assert "_hidden" not in {r.name for r in ip.run_line_magic("devices", "").records}
    assert "_hidden" in {r.name for r in ip.run_line_magic("devices", "--all").records}
    assert "_hidden" in {r.name for r in ip.run_line_magic("devices", "-a").records}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("foo", "%devices: no variable named 'foo'"),
        ("model foo", "%devices: no variable named 'foo'"),
        ("model.nope", "%devices: 'model.nope' has no such attribute or item"),
        ("--bogus", "unrecognized arguments: --bogus"),
        ("--last model", "%devices: --last takes no NAME"),
        ("3x", "%devices: no variable named '3x'"),
    ],
)
def test_devices_bad_arguments_are_usage_errors(
    ip: InteractiveShell, line: str, message: str
) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        ip.run_line_magic("devices", line)
    cap, _ = run_captured(ip, f"%devices {line}")
    shown = cap.stdout + cap.stderr
    assert "UsageError" in shown and message in shown
    assert "Traceback" not in shown


def test_devices_last_before_any_device_error(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("last_value", "last_exc", "last_type", "last_traceback"):
        monkeypatch.delattr(sys, name, raising=False)
    run_captured(ip, "1 / 0")
    with pytest.raises(UsageError, match="no device error"):
        ip.run_line_magic("devices", "--last")


def test_devices_last_shows_the_last_diagnosis_again(ip: InteractiveShell) -> None:
    run_captured(ip, MISMATCH)
    panel_diagnosis = ext.hook_of(ip).last
    run_captured(ip, "1 / 0")  # a later non-device error does not replace it
    last = ip.run_line_magic("devices", "--last")
    assert last is panel_diagnosis
    assert last.culprits[0].name == "x"
    cap, _ = run_captured(ip, "%devices --last")
    assert "`x` is on cpu" in cap.stdout


def test_devices_last_with_the_panel_off_diagnoses_on_demand(ip: InteractiveShell) -> None:
    ip.run_line_magic("config", "IPyDevice.panel = False")
    run_captured(ip, MISMATCH)
    assert ext.hook_of(ip).last is None
    last = ip.run_line_magic("devices", "--last")
    assert isinstance(last, Diagnosis) and last.culprits[0].name == "x"


def test_devices_help_documents_every_setting(ip: InteractiveShell) -> None:
    doc = ip.find_line_magic("devices").__doc__
    assert "%devices [--last] [--check] [-a] [NAME ...]" in doc
    for name in ext.IPyDevice.class_trait_names(config=True):
        assert name in doc, name
    cap, _ = run_captured(ip, "%devices?")
    assert "--last" in cap.stdout and "IPyDevice" in cap.stdout


def test_devices_help_is_the_parsers_help(ip: InteractiveShell) -> None:
    """The parser is built on first use, so its usage and options are written out in
    the docstring: they must say what the parser says (wrapping aside)."""
    import inspect

    doc = " ".join(inspect.cleandoc(ip.find_line_magic("devices").__doc__).split())
    parser = ext.devices_parser()
    assert " ".join(parser.format_usage().replace("usage: ", "").split()) in doc
    options = parser.format_help().split("positional arguments:", 1)[1]
    assert "positional arguments: " + " ".join(options.split()) in doc


def test_devices_parser_is_built_on_first_use_only() -> None:
    """``%load_ext`` leaves argparse's work to the first ``%devices``."""
    import subprocess
    import sys

    code = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "import ipydevice.integrations.ipython as ext\n"
        "shell = InteractiveShell.instance()\n"
        "shell.run_line_magic('load_ext', 'ipydevice')\n"
        "assert ext.devices_parser.cache_info().currsize == 0\n"
        "assert 'ipydevice.settings' not in __import__('sys').modules\n"
        "shell.run_line_magic('devices', '-a')\n"
        "assert ext.devices_parser.cache_info().currsize == 1\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_devices_on_a_huge_hostile_namespace_is_quick(ip: InteractiveShell) -> None:
    run(ip, HOSTILE)
    start = time.process_time()  # CPU time: a busy machine stretches wall-clock time
    inv = ip.run_line_magic("devices", "")
    text, html = str(inv), inv._repr_html_()
    elapsed = time.process_time() - start
    assert elapsed < 2.0, elapsed
    assert inv.notes  # truncation is reported
    assert "more" in text
    assert "ipydevice-panel" in html
    for name in ("props", "selfish", "loop", "million", "tensors"):
        start = time.process_time()
        cap, result = run_captured(ip, f"%devices {name}")
        assert result.error_in_exec is None or isinstance(result.error_in_exec, UsageError)
        assert "Traceback" not in cap.stdout + cap.stderr
        assert time.process_time() - start < 2.0, name


def test_devices_with_thousands_of_tensors_notes_truncation(ip: InteractiveShell) -> None:
    run(
        ip,
        "for _i in range(5000):\n    globals()[f't{_i}'] = torch.zeros(2, device='meta' if _i % 2 else 'cpu')",
    )
    try:
        start = time.process_time()
        inv = ip.run_line_magic("devices", "")
        str(inv)
        # a guard against a walk of every tensor (minutes), not a speed test: the
        # process's CPU time counts torch's threads and the other tests' work, and the
        # speed is measured side by side by benchmarks/compare.py (`devices_100000_ms`)
        assert time.process_time() - start < 30.0
        assert any("only the first" in note for note in inv.notes)
        assert "more" in str(inv)
    finally:
        run(ip, "for _i in range(5000):\n    del globals()[f't{_i}']")


HOSTILE = """
for _i in range(2000):
    globals()[f't{_i}'] = torch.zeros(2, device='meta' if _i % 2 else 'cpu')

class Props:
    @property
    def device(self): raise RuntimeError('device')
    @property
    def shape(self): raise RuntimeError('shape')
    @property
    def __dict__(self): raise RuntimeError('__dict__')
    def __repr__(self): raise RuntimeError('repr')

class Selfish:
    def __getattr__(self, name): return self

props = Props()
selfish = Selfish()
loop = []
loop.append(loop)
million = list(range(1_000_000))
tensors = [torch.zeros(1) for _ in range(1000)]
"""
