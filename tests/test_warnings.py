"""Device warnings get the panel: ``ipydevice.integrations.warnings_hook`` through ``%load_ext``.

transformers and accelerate are not installed here. Their messages are raised
with their exact text: ``warnings.warn(..., UserWarning)`` for transformers'
``generate()`` warning (from a stand-in library module under a ``site-packages``
directory, so its frame is a library frame as in the real thing, and straight
from a cell), ``logging.getLogger("accelerate.big_modeling").warning(...)`` for
accelerate's. torch's meta ``load_state_dict`` no-op is the real one.

pytest records warnings itself (``catch_warnings(record=True)`` around every
test), so the ``stock`` fixture puts a plain printing ``showwarning`` in place
first, as an interpreter has: the stock output then lands on ``sys.stderr``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import CapturedIO, capture_output
from shells import panels, run, singleton_shell

from ipydevice.diagnosis.recognise import recognise
from ipydevice.integrations import ipython as ext
from ipydevice.integrations import warnings_hook
from ipydevice.pipeline import live_warning

GENERATE = (
    "You are calling .generate() with the `input_ids` being on a device type different than "
    "your model's device. `input_ids` is on cpu, whereas the model is on cuda. You may "
    "experience unexpected behaviors or slower generation. Please make sure that you have put "
    "`input_ids` to the correct device by calling for example input_ids = input_ids.to('cuda') "
    "before running `.generate()`."
)
DISPATCHED = "You shouldn't move a model that is dispatched using accelerate hooks."
OFFLOADED = "Some parameters are on the meta device because they were offloaded to the cpu."
OLD_OFFLOADED = (
    "Some parameters are on the meta device device because they were offloaded to the cpu and disk."
)
META_LOAD = (
    "import torch.nn as nn\n"
    "net = nn.Linear(2, 2, device='meta')\n"
    "net.load_state_dict(nn.Linear(2, 2).state_dict())"
)
ORDINARY = [
    "warnings.warn('this API is deprecated', DeprecationWarning)",
    "warnings.warn('The given NumPy array is not writable', UserWarning)",
    "warnings.warn('torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.')",
    "warnings.warn('Torch was not compiled with flash attention.', UserWarning)",
    "import torch; torch.tensor(torch.ones(2))",  # torch's own copy-construct UserWarning
]

# A stand-in for transformers' GenerationMixin: warns from a library frame, with
# the real wording and the devices read from the objects.
FAKE_HF = """
import warnings
import torch


class TinyLM(torch.nn.Module):
    def __init__(self, device=None):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4, device=device)
        self.head = torch.nn.Linear(4, 10, device=device)

    @property
    def device(self):
        return self.head.weight.device

    def generate(self, input_ids=None, **kwargs):
        if input_ids.device.type != self.device.type:
            warnings.warn(
                "You are calling .generate() with the `input_ids` being on a device type different"
                " than your model's device. `input_ids` is on " + input_ids.device.type + ", whereas"
                " the model is on " + self.device.type + ". You may experience unexpected behaviors"
                " or slower generation. Please make sure that you have put `input_ids` to the correct"
                " device by calling for example input_ids = input_ids.to('" + self.device.type + "')"
                " before running `.generate()`.",
                UserWarning,
            )
        return input_ids


# Warns as generate() does, then runs the model on the inputs (and fails there when
# they are elsewhere, as transformers' embedding does).
class TinyGenerator(TinyLM):

    def generate(self, input_ids=None, **kwargs):
        super().generate(input_ids)
        return self.head(self.embed(input_ids)).argmax(-1)
"""


# -- fixtures and helpers -------------------------------------------------------------------


def stock_showwarning(
    message: Any, category: type, filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    """What an interpreter's ``showwarning`` does: the formatted warning on stderr."""
    stream = file if file is not None else sys.stderr
    stream.write(warnings.formatwarning(message, category, filename, lineno, line))


@pytest.fixture
def stock() -> Iterator[Any]:
    """Warnings shown by a printing showwarning, every time (no once-per-location)."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = stock_showwarning
        yield stock_showwarning


@pytest.fixture
def shell(stock: Any) -> Iterator[InteractiveShell]:
    with singleton_shell() as ip:
        yield ip


@pytest.fixture
def ip(
    shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> InteractiveShell:
    """Loaded, with the stand-in library importable as ``fakehf``."""
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "fakehf.py").write_text(FAKE_HF)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "fakehf", raising=False)
    shell.run_line_magic("load_ext", "ipydevice")
    run(shell, "import warnings, logging, torch")
    return shell


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict[str, str], str]]:
    """Every display ipydevice publishes, with the stderr written before it."""
    seen: list[tuple[dict[str, str], str]] = []
    original = ext._publish

    def record(bundle: dict[str, str]) -> None:
        stream = sys.stderr
        seen.append((bundle, stream.getvalue() if hasattr(stream, "getvalue") else ""))
        original(bundle)

    monkeypatch.setattr(ext, "_publish", record)
    return seen


def run_captured(shell: InteractiveShell, source: str) -> tuple[CapturedIO, Any]:
    with no_pytest_handlers(), capture_output() as cap:
        result = shell.run_cell(source)
    return cap, result


def warn_cell(text: str, times: int = 1) -> str:
    return f"for _ in range({times}):\n    warnings.warn({text!r}, UserWarning)"


def log_cell(text: str, logger: str = "accelerate.big_modeling") -> str:
    return f"logging.getLogger({logger!r}).warning({text!r})"


@contextlib.contextmanager
def no_pytest_handlers() -> Iterator[None]:
    """The root logger as in a fresh kernel: pytest adds its capture handlers to it
    around each test call, which would silence ``logging.lastResort``."""
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = [h for h in saved if not type(h).__module__.startswith("_pytest")]
    try:
        yield
    finally:
        root.handlers = saved


@contextlib.contextmanager
def root_handler() -> Iterator[Any]:
    """A root handler as ``logging.basicConfig`` adds, writing to a buffer."""
    import io

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield stream
    finally:
        root.removeHandler(handler)


# -- the messages -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "family"),
    [
        (GENERATE, "hf_warning"),
        (DISPATCHED, "hf_warning"),
        (OFFLOADED, "hf_warning"),
        (OLD_OFFLOADED, "hf_warning"),
    ],
)
def test_the_library_texts_are_device_warnings(text: str, family: str) -> None:
    assert recognise(text, "UserWarning").family == family


@pytest.mark.parametrize("source", ORDINARY)
def test_ordinary_warnings_are_not(source: str) -> None:
    text = source.split("(", 2)[-1].split("'")[1] if "warn(" in source else ""
    assert not recognise(text, "UserWarning").is_device_error


# -- warnings.warn ----------------------------------------------------------------------------


def test_generate_warning_from_a_cell_gets_one_panel_under_the_stock_output(
    ip: InteractiveShell, published: list[tuple[dict[str, str], str]]
) -> None:
    cap, result = run_captured(ip, warn_cell(GENERATE))
    assert result.success
    assert cap.stderr.count("UserWarning: You are calling .generate()") == 1
    (bundle,) = panels(cap)
    assert set(bundle) == {"text/plain", "text/html"}
    assert (
        "ipydevice · device warning: model and inputs on different devices" in bundle["text/plain"]
    )
    assert "UserWarning: You are calling .generate()" in bundle["text/plain"]
    # The text wraps to the terminal's width (80 columns under pytest-xdist).
    assert "inputs = inputs.to(model.device)" in " ".join(bundle["text/plain"].split())
    assert "ipydevice-panel" in bundle["text/html"] and "device warning" in bundle["text/html"]
    ((_, stderr_before),) = published
    assert "You are calling .generate()" in stderr_before  # the panel comes under it


def test_generate_warning_names_the_inputs_and_moves_them(ip: InteractiveShell) -> None:
    run(
        ip,
        "import fakehf\nmodel = fakehf.TinyLM(device='meta')\n"
        "inputs = {'input_ids': torch.ones(1, 4, dtype=torch.long)}",
    )
    cap, _ = run_captured(ip, "out = model.generate(**inputs)")
    assert "`input_ids` is on cpu, whereas the model is on meta" in cap.stderr
    (bundle,) = panels(cap)
    text = bundle["text/plain"]
    assert "`inputs['input_ids']` is on cpu" in text
    assert "`model` is on meta" in text
    fixes = text.split("Fix")[1]  # one fix: the cell is one line, its rewrite would repeat it
    assert "inputs" in fixes and ".to('meta')" in fixes  # the inputs go where the model is
    assert "PreTrainedModel" not in text and "fakehf" not in text.split("Fixes")[-1]


def test_generate_warning_targets_the_model_device_in_its_own_words(ip: InteractiveShell) -> None:
    """The model on the CPU and the inputs on the accelerator: the warning says where
    the model is, so the inputs go there (the model is not moved to the data)."""
    run(
        ip,
        "import fakehf\nmodel = fakehf.TinyLM()\n"
        "inputs = {'input_ids': torch.ones(1, 4, dtype=torch.long, device='meta')}",
    )
    cap, _ = run_captured(ip, "out = model.generate(**inputs)")
    assert "`input_ids` is on meta, whereas the model is on cpu" in cap.stderr
    (bundle,) = panels(cap)
    text = bundle["text/plain"]
    assert "target cpu: the warning says the model is on cpu" in text
    fixes = text.split("\n  Fix")[1]  # "Fixes" or, for one fix, "Fix: ..."
    assert "inputs" in fixes and ".to('cpu')" in fixes
    assert "model.to(" not in fixes


def test_a_warning_in_a_loop_gives_one_panel_per_cell(ip: InteractiveShell) -> None:
    cap, _ = run_captured(ip, warn_cell(GENERATE, times=5))
    # the stock output, untouched
    assert cap.stderr.count("UserWarning: You are calling .generate()") == 5
    assert len(panels(cap)) == 1
    cap, _ = run_captured(ip, warn_cell(GENERATE, times=2))
    assert len(panels(cap)) == 1  # a new cell: once again


def test_torch_meta_load_warning_gets_one_panel_with_assign_true(ip: InteractiveShell) -> None:
    cap, result = run_captured(ip, META_LOAD)
    assert result.success
    assert cap.stderr.count("to a meta parameter in the current model, which is a no-op") == 2
    (bundle,) = panels(cap)  # one per load, not one per parameter
    text = bundle["text/plain"]
    assert "ipydevice · device warning: meta tensor used where data is needed" in text
    assert "Objects involved" in text and "net " in text and "meta" in text
    assert "1. Load with assign=True" in text
    assert "net.load_state_dict(nn.Linear(2, 2).state_dict(), assign=True)" in text
    assert "net.to_empty(device='cpu')" in text  # the engine's own meta fix comes next


def test_the_assign_fix_runs_and_materialises_the_model(ip: InteractiveShell) -> None:
    diagnoses: list[Any] = []
    hook = ext.hook_of(ip)
    assert hook is not None and hook.device_warnings is not None
    hook.device_warnings.report = diagnoses.append
    run_captured(ip, META_LOAD)
    (diagnosis,) = diagnoses
    fix = diagnosis.fixes[0]
    assert fix.scope == "cell" and "assign=True" in fix.code
    cap, result = run_captured(ip, fix.code)
    assert result.success and "no-op" not in cap.stderr
    assert ip.user_ns["net"].weight.device.type == "cpu"


@pytest.mark.parametrize("source", ORDINARY)
def test_ordinary_warnings_get_no_panel(ip: InteractiveShell, source: str) -> None:
    cap, result = run_captured(ip, source)
    assert result.success
    assert "Warning" in cap.stderr  # shown as usual
    assert cap.outputs == []


def test_warnings_as_errors_still_raise_and_get_the_error_panel(ip: InteractiveShell) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cap, result = run_captured(ip, warn_cell(GENERATE))
    assert isinstance(result.error_in_exec, UserWarning)
    (bundle,) = panels(cap)
    assert "ipydevice · device error: model and inputs on different devices" in bundle["text/plain"]


def test_catch_warnings_record_still_records(ip: InteractiveShell) -> None:
    source = (
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    warnings.warn({GENERATE!r}, UserWarning)\n"
        "n = len(caught)"
    )
    cap, result = run_captured(ip, source)
    assert result.success and ip.user_ns["n"] == 1
    assert cap.stderr == "" and cap.outputs == []


def test_ignored_warnings_stay_silent(ip: InteractiveShell) -> None:
    source = "with warnings.catch_warnings():\n    warnings.simplefilter('ignore')\n" + (
        f"    warnings.warn({GENERATE!r}, UserWarning)"
    )
    cap, _ = run_captured(ip, source)
    assert cap.stderr == "" and cap.outputs == []


# -- accelerate's logger -----------------------------------------------------------------------


def stock_log_output(shell: InteractiveShell, source: str) -> str:
    """What ``source`` prints without ipydevice."""
    loaded = ext.hook_of(shell) is not None
    shell.run_line_magic("unload_ext", "ipydevice")
    try:
        cap, _ = run_captured(shell, source)
    finally:
        if loaded:
            shell.run_line_magic("load_ext", "ipydevice")
    return cap.stderr


@pytest.mark.parametrize("text", [DISPATCHED, OFFLOADED])
def test_accelerate_logger_warnings_get_one_panel_and_the_same_output(
    ip: InteractiveShell, text: str, published: list[tuple[dict[str, str], str]]
) -> None:
    source = log_cell(text)
    plain = stock_log_output(ip, source)
    assert plain == text + "\n"  # logging.lastResort's output
    published.clear()
    cap, result = run_captured(ip, source)
    assert result.success
    assert cap.stderr == plain  # printed once, as without ipydevice
    (bundle,) = panels(cap)
    assert (
        "ipydevice · device warning: model and inputs on different devices" in bundle["text/plain"]
    )
    assert "accelerate.big_modeling WARNING" in bundle["text/plain"]
    ((_, stderr_before),) = published
    assert text in stderr_before


def test_accelerate_panel_waits_for_a_root_handler(
    ip: InteractiveShell, published: list[tuple[dict[str, str], str]]
) -> None:
    with root_handler() as stream:
        cap, _ = run_captured(ip, log_cell(DISPATCHED) + "\nafter = 1")
        assert stream.getvalue() == f"WARNING:accelerate.big_modeling:{DISPATCHED}\n"
    assert cap.stderr == ""  # the root handler printed it; lastResort stayed silent
    assert len(panels(cap)) == 1


def test_accelerate_info_and_other_loggers_are_left_alone(ip: InteractiveShell) -> None:
    cap, _ = run_captured(ip, log_cell("Some random accelerate notice"))
    assert cap.stderr == "Some random accelerate notice\n" and cap.outputs == []
    cap, _ = run_captured(ip, f"logging.getLogger('accelerate').info({DISPATCHED!r})")
    assert cap.stderr == "" and cap.outputs == []
    cap, _ = run_captured(ip, log_cell(DISPATCHED, logger="mylib"))
    assert cap.stderr == DISPATCHED + "\n" and cap.outputs == []


def test_old_root_logged_offload_wording_gets_a_panel_after_the_cell(ip: InteractiveShell) -> None:
    cap, _ = run_captured(ip, f"logging.getLogger().warning({OLD_OFFLOADED!r})")
    assert cap.stderr == OLD_OFFLOADED + "\n"
    (bundle,) = panels(cap)
    assert "root WARNING" in bundle["text/plain"]
    cap, _ = run_captured(ip, "logging.getLogger().warning('my own training log: loss went up')")
    assert cap.outputs == []


def test_a_logged_message_in_a_loop_gives_one_panel(ip: InteractiveShell) -> None:
    cap, _ = run_captured(ip, f"for _ in range(4):\n    {log_cell(DISPATCHED)}")
    assert cap.stderr.count(DISPATCHED) == 4
    assert len(panels(cap)) == 1


# -- lifecycle and settings ---------------------------------------------------------------------


def hooks_installed(shell: InteractiveShell) -> bool:
    hook = ext.hook_of(shell)
    if hook is None or hook.device_warnings is None:
        return False
    dw = hook.device_warnings
    return (
        warnings.showwarning is dw._showwarning
        and dw.handler in logging.getLogger("accelerate").handlers
        and dw.handler in logging.getLogger("transformers").handlers
        and dw.root_filter in logging.getLogger().filters
    )


def test_unload_restores_showwarning_and_removes_the_handler(
    shell: InteractiveShell, stock: Any
) -> None:
    handlers = {n: list(logging.getLogger(n).handlers) for n in warnings_hook.LOGGERS}
    filters = list(logging.getLogger().filters)
    shell.run_line_magic("load_ext", "ipydevice")
    assert hooks_installed(shell)
    assert warnings.showwarning is not stock
    shell.run_line_magic("unload_ext", "ipydevice")
    assert warnings.showwarning is stock
    assert {n: list(logging.getLogger(n).handlers) for n in warnings_hook.LOGGERS} == handlers
    assert list(logging.getLogger().filters) == filters
    cap, _ = run_captured(shell, f"import warnings\nwarnings.warn({GENERATE!r})")
    assert "You are calling" in cap.stderr and cap.outputs == []


def test_reload_keeps_one_hook(shell: InteractiveShell, stock: Any) -> None:
    shell.run_line_magic("load_ext", "ipydevice")
    shell.run_line_magic("reload_ext", "ipydevice")
    assert hooks_installed(shell)
    assert (
        logging.getLogger("accelerate").handlers.count(ext.hook_of(shell).device_warnings.handler)
        == 1
    )
    cap, _ = run_captured(shell, f"import warnings\nwarnings.warn({GENERATE!r})")
    assert cap.stderr.count("UserWarning: You are calling") == 1 and len(panels(cap)) == 1
    shell.run_line_magic("unload_ext", "ipydevice")
    assert warnings.showwarning is stock


def test_a_later_showwarning_chain_is_left_working_on_unload(
    shell: InteractiveShell, stock: Any
) -> None:
    shell.run_line_magic("load_ext", "ipydevice")
    ours = warnings.showwarning
    calls: list[str] = []

    def later(message: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(str(message))
        ours(message, *args, **kwargs)

    warnings.showwarning = later
    shell.run_line_magic("unload_ext", "ipydevice")
    assert warnings.showwarning is later  # not ours to take away
    cap, _ = run_captured(shell, f"import warnings\nwarnings.warn({GENERATE!r})")
    assert len(calls) == 1 and "You are calling" in cap.stderr and cap.outputs == []


def test_the_warnings_setting_turns_the_hooks_off_and_on(ip: InteractiveShell, stock: Any) -> None:
    run(ip, "%config IPyDevice.warnings = False")
    assert warnings.showwarning is stock and not hooks_installed(ip)
    cap, _ = run_captured(ip, warn_cell(GENERATE))
    assert "You are calling" in cap.stderr and cap.outputs == []
    run(ip, "%config IPyDevice.warnings = True")
    assert hooks_installed(ip)
    cap, _ = run_captured(ip, warn_cell(GENERATE))
    assert len(panels(cap)) == 1


def test_warnings_off_in_the_config_installs_nothing(shell: InteractiveShell, stock: Any) -> None:
    shell.config.IPyDevice.warnings = False
    shell.run_line_magic("load_ext", "ipydevice")
    assert warnings.showwarning is stock
    assert ext.hook_of(shell).device_warnings is None


def test_loading_does_not_import_the_engine_or_torch() -> None:
    import subprocess

    code = (
        "import sys\nfrom IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\nip.run_line_magic('load_ext', 'ipydevice')\n"
        "import warnings\nwarnings.warn('an ordinary warning')\n"
        "print(sorted(m for m in ('torch', 'ipydevice.pipeline.engine', 'ipydevice.diagnosis.recognise') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "['ipydevice.diagnosis.recognise']"


# -- guarded ----------------------------------------------------------------------------------------


def failing_diagnosis(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("boom")


def test_a_failing_warning_panel_is_one_line_on_stderr(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live_warning, "diagnose_warning", failing_diagnosis)
    monkeypatch.setenv("IPYDEVICE_DEBUG", "0")
    cap, result = run_captured(ip, warn_cell(GENERATE) + "\ndone = True")
    assert result.success and ip.user_ns["done"]
    assert "You are calling .generate()" in cap.stderr  # the warning itself is still shown
    failures = [x for x in cap.stderr.splitlines() if x.startswith("ipydevice:")]
    assert failures == [
        "ipydevice: warning panel failed (RuntimeError: boom); set IPYDEVICE_DEBUG=1 for details"
    ]
    assert cap.outputs == []


def test_a_failing_warning_panel_raises_when_debugging(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live_warning, "diagnose_warning", failing_diagnosis)
    assert os.environ["IPYDEVICE_DEBUG"] == "1"
    _, result = run_captured(ip, warn_cell(GENERATE))
    assert isinstance(result.error_in_exec, RuntimeError) and str(result.error_in_exec) == "boom"


def test_a_warning_while_diagnosing_one_is_not_diagnosed_again(
    ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = live_warning.diagnose_warning
    calls: list[str] = []

    def noisy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        warnings.warn(OFFLOADED, UserWarning, stacklevel=1)  # another device warning, from inside
        return original(*args, **kwargs)

    monkeypatch.setattr(live_warning, "diagnose_warning", noisy)
    cap, _ = run_captured(ip, warn_cell(GENERATE))
    assert len(calls) == 1 and len(panels(cap)) == 1


def test_the_panel_keeps_no_frame_alive(ip: InteractiveShell) -> None:
    import gc
    import weakref

    run(ip, "import fakehf\nmodel = fakehf.TinyLM(device='meta')")
    run_captured(
        ip,
        "def use():\n    ids = torch.ones(1, 4, dtype=torch.long)\n    model.generate(ids)\n"
        "    return ids\nprobe = use()",
    )
    ref = weakref.ref(ip.user_ns.pop("probe"))
    gc.collect()
    assert ref() is None


# -- in a real kernel -------------------------------------------------------------------------------


@pytest.mark.kernel
def test_in_a_kernel_the_panel_follows_the_stock_warning(tmp_path: Path) -> None:
    pytest.importorskip("ipykernel")
    manager_module = pytest.importorskip("jupyter_client.manager")
    env = {**os.environ, "IPYTHONDIR": str(tmp_path)}
    manager, client = manager_module.start_new_kernel(kernel_name="python3", env=env)
    try:
        messages: list[dict[str, Any]] = []
        code = (
            "%load_ext ipydevice\n%config IPyDevice.widget = False\nimport warnings, logging\n"
            f"warnings.warn({GENERATE!r})\n{log_cell(DISPATCHED)}"
        )
        reply = client.execute_interactive(code, timeout=90, output_hook=messages.append)
        assert reply["content"]["status"] == "ok"
        kinds = ("stream", "display_data")
        outputs = [m for m in messages if m["msg_type"] in kinds]
        shown = [
            "panel" if m["msg_type"] == "display_data" else m["content"]["text"] for m in outputs
        ]
        text = "".join(s for s in shown if s != "panel")
        assert "UserWarning: You are calling .generate()" in text and DISPATCHED in text
        assert shown.count("panel") == 2
        first_panel = shown.index("panel")
        assert "You are calling .generate()" in "".join(shown[:first_panel])
        second = shown.index("panel", first_panel + 1)
        assert DISPATCHED in "".join(s for s in shown[first_panel + 1 : second] if s != "panel")
        panels_html = [
            m["content"]["data"]["text/html"] for m in outputs if m["msg_type"] == "display_data"
        ]
        assert all("ipydevice-panel" in h and "device warning" in h for h in panels_html)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_dash_w_error_still_raises() -> None:
    import subprocess

    code = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\nip.run_line_magic('load_ext', 'ipydevice')\n"
        f"cell = {('import warnings' + chr(10) + f'warnings.warn({GENERATE!r})')!r}\n"
        "r = ip.run_cell(cell)\n"
        "print('RESULT', type(r.error_in_exec).__name__)"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "IPYDEVICE_DEBUG": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "RESULT UserWarning" in done.stdout
    assert (
        "ipydevice · device error: model and inputs on different devices" in done.stdout
    )  # the error panel
    assert "device warning" not in done.stdout


# -- a warning, then the error it leads to --------------------------------------------------


def _fakecuda() -> Any:
    """The real-library corpus's CUDA stand-in (tests/realworld/fakecuda.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "realworld"))
    try:
        return importlib.import_module("fakecuda")
    finally:
        sys.path.pop(0)


def test_the_error_after_a_generate_warning_targets_the_model_in_the_warnings_words(
    ip: InteractiveShell,
) -> None:
    """generate() warns that the inputs are on cuda and the model on cpu, then fails in
    the model with "Expected all tensors to be on the same device": the model is where
    it was put, so the inputs go to it (the objects alone would move the model to the
    data). Other names than the warning's (``batch``, ``lm``), through ``**``."""
    fakecuda = _fakecuda()
    hook = ext.hook_of(ip)
    assert hook is not None
    with fakecuda.fake_cuda():
        run(
            ip,
            "import fakehf\nlm = fakehf.TinyGenerator()\n"
            "batch = {'input_ids': torch.ones(1, 4, dtype=torch.long).to('cuda')}",
        )
        hook.last = None
        cap, result = run_captured(ip, "out = lm.generate(**batch)")
        assert not result.success
        assert "`input_ids` is on cuda, whereas the model is on cpu" in cap.stderr
        diagnosis = hook.last
        assert diagnosis is not None and diagnosis.is_device_error
        assert diagnosis.target == "cpu"
        assert "the warning says the model is on cpu" in diagnosis.target_reason
        assert [c.name for c in diagnosis.culprits][:1] == ["batch['input_ids']"]
        first = diagnosis.fixes[0]
        assert "batch" in first.code and "'cpu'" in first.code and "lm.to(" not in first.code
        # the fix makes the cell run, its work on the model's device
        assert first.apply(ip.user_ns).ok
        cap, result = run_captured(ip, "out = lm.generate(**batch)")
        assert result.success, result.error_in_exec
        assert str(ip.user_ns["out"].device) == "cpu"


def test_a_warning_about_other_devices_does_not_decide(ip: InteractiveShell) -> None:
    """The cell's device warning is about meta and cpu; the error is about cuda:0 and
    cpu (the model's): the warning's demand is not the error's, the objects decide as usual."""
    fakecuda = _fakecuda()
    hook = ext.hook_of(ip)
    assert hook is not None
    with fakecuda.fake_cuda():
        run(ip, "net = torch.nn.Linear(4, 2)\nx = torch.randn(3, 4).to('cuda')")
        hook.last = None
        cell = warn_cell(GENERATE.replace("`input_ids` is on cpu", "`input_ids` is on meta"))
        run_captured(ip, cell + "\ny = net(x)")
        diagnosis = hook.last
        assert diagnosis is not None and diagnosis.is_device_error
        assert "warning" not in diagnosis.target_reason
