"""The hooks for plain Python beside other libraries' hooks, the environment's text,
ASCII-only streams and torchelastic's error file written by several writers."""

from __future__ import annotations

import io
import json
import sys
import threading

import pytest

import ipydevice
from ipydevice.integrations import error_file, excepthook

DEVICE_ERROR = (
    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
)


def _device_error() -> RuntimeError:
    return RuntimeError(DEVICE_ERROR)


def _chained(name: str, below, seen: list[str]):
    """A library's hook that chains the hook it found, as rich and others do."""

    def hook(*args):
        seen.append(name)
        below(*args)

    return hook


@pytest.fixture
def clean_hooks(monkeypatch):
    seen: list[str] = []
    monkeypatch.setattr(sys, "excepthook", lambda *args: seen.append("stock"))
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append("stock"))
    monkeypatch.setattr(excepthook, "_previous", [])
    monkeypatch.setattr(excepthook, "_previous_thread", [])
    monkeypatch.setattr(excepthook, "_state", {"on": False, "threads": False, "namespace": None})
    return seen


def _stderr(monkeypatch) -> io.StringIO:
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)  # (in the test: pytest sets its own for each phase)
    return stderr


def test_install_uninstall_install_with_a_library_between_makes_no_loop(clean_hooks, monkeypatch):
    seen, stderr = clean_hooks, _stderr(monkeypatch)
    ipydevice.install()
    sys.excepthook = _chained("rich", sys.excepthook, seen)  # another library, above ours
    ipydevice.uninstall()  # cannot take ours out of rich's chain: a pass-through now
    assert not excepthook.installed()
    sys.excepthook(RuntimeError, _device_error(), None)
    assert seen == ["rich", "stock"] and "device error" not in stderr.getvalue()
    seen.clear()
    ipydevice.install()
    assert excepthook.installed()
    sys.excepthook(RuntimeError, _device_error(), None)  # no RecursionError
    assert seen == ["rich", "stock"]
    assert stderr.getvalue().count("ipydevice · device error") == 1
    # a variation: a second library, and the cycle twice more
    sys.excepthook = _chained("pretty", sys.excepthook, seen)
    for _ in range(2):
        ipydevice.uninstall()
        ipydevice.install()
    seen.clear()
    sys.excepthook(RuntimeError, _device_error(), None)
    assert seen == ["pretty", "rich", "stock"]
    assert stderr.getvalue().count("ipydevice · device error") == 2
    ipydevice.uninstall()
    seen.clear()
    sys.excepthook(ZeroDivisionError, ZeroDivisionError("x"), None)
    assert seen == ["pretty", "rich", "stock"]
    assert stderr.getvalue().count("ipydevice · device error") == 2


def test_the_thread_hook_chain_survives_a_library_between(clean_hooks, monkeypatch):
    seen, stderr = clean_hooks, _stderr(monkeypatch)
    ipydevice.install()
    threading.excepthook = _chained("library", threading.excepthook, seen)
    ipydevice.uninstall()
    ipydevice.install()

    def work():
        raise _device_error()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    ipydevice.uninstall()
    assert seen == ["library", "stock"]
    assert stderr.getvalue().count("ipydevice · device error") == 1


@pytest.mark.parametrize("raw", ["1\x1b[2J\x07", "0\r[rank 9/9] forged", "\u202e1", "7" * 500])
def test_the_environment_never_reaches_a_terminal_raw(monkeypatch, raw):
    monkeypatch.setenv("RANK", raw)
    monkeypatch.setenv("WORLD_SIZE", "2\x1b]0;title\x07")
    monkeypatch.setenv("LOCAL_RANK", "\x9b1m")
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE", raising=False)
    label = excepthook.rank_label()
    assert label.isprintable() and len(label) < 120
    text = excepthook.report_text(_device_error(), namespace={})
    assert text and all(line.isprintable() for line in text.splitlines())
    assert "\\x1b" in text or "\\u202e" in text or "..." in text
    from ipydevice.integrations.workers import process_label

    assert process_label().isprintable()


def test_an_ascii_only_stream_gets_the_report_in_ascii(clean_hooks, monkeypatch):
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")  # PYTHONIOENCODING=ascii
    monkeypatch.setattr(sys, "stderr", stream)
    ipydevice.install()
    try:
        sys.excepthook(RuntimeError, _device_error(), None)
    finally:
        ipydevice.uninstall()
    stream.flush()
    out = raw.getvalue().decode("ascii")
    assert "ipydevice - device error" in out


def test_for_stream_degrades_only_what_the_encoding_lacks():
    from ipydevice.render.layout import for_stream

    utf8 = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    latin = io.TextIOWrapper(io.BytesIO(), encoding="latin-1")
    ascii_ = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    text = "ipydevice · x… `数据` × 2"
    assert for_stream(text, utf8) == text
    assert for_stream(text, ascii_) == "ipydevice - x~ `\\u6570\\u636e` x 2"
    assert for_stream("café…", latin) == "café~"  # Latin-1 keeps its own letters
    assert for_stream(text, object()) == text  # no encoding said: UTF-8


def test_the_terminal_panel_in_ascii(monkeypatch):
    from ipydevice.integrations.ipython_display import panel_bundle
    from ipydevice.pipeline.engine import diagnose

    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    bundle = panel_bundle(diagnose(_device_error(), namespace={}), True, "Verbose")
    assert bundle["text/plain"].isascii()
    assert "ipydevice - device error" in bundle["text/plain"]


# -- torchelastic's error file -----------------------------------------------------------------


@pytest.fixture
def launcher(monkeypatch, tmp_path):
    path = tmp_path / "error.json"
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
    return path


@pytest.mark.parametrize("depth", [100_000, 3_000])
def test_a_deeply_nested_error_file_is_left_alone(launcher, depth):
    launcher.write_text("[" * depth + "]" * depth)
    before = launcher.read_text()
    excepthook.write_error_file(_device_error(), "REPORT")  # no RecursionError
    assert launcher.read_text() == before
    nested = {"message": {"extraInfo": {"py_callstack": "x"}, "deep": "[" * 10}}
    launcher.write_text(json.dumps(nested)[:-1] + ', "more": ' + "[" * depth + "]" * depth + "}")
    before = launcher.read_text()
    excepthook.write_error_file(_device_error(), "REPORT")
    assert launcher.read_text() == before


def test_an_oversized_error_file_is_left_alone(launcher, monkeypatch):
    monkeypatch.setattr(error_file, "MAX_BYTES", 100)
    data = {"message": {"message": "x", "extraInfo": {"py_callstack": "T" * 200}}}
    launcher.write_text(json.dumps(data))
    excepthook.write_error_file(_device_error(), "REPORT")
    assert "REPORT" not in launcher.read_text()


def test_two_writers_creating_the_error_file_both_get_their_report_in(launcher, monkeypatch):
    """The loser of the race to create the file adds its report to the winner's."""
    real = error_file._create
    raced = []

    def racing(path, text):
        if not raced:  # another writer creates the file first, between our check and create
            raced.append(True)
            excepthook.write_error_file(_device_error(), "FIRST")
        return real(path, text)

    monkeypatch.setattr(error_file, "_create", racing)
    excepthook.write_error_file(_device_error(), "SECOND")
    stack = json.loads(launcher.read_text())["message"]["extraInfo"]["py_callstack"]
    assert stack.count("FIRST") == 1 and stack.count("SECOND") == 1
    assert not [p for p in launcher.parent.iterdir() if p.name.startswith(".ipydevice-")]


def test_many_threads_writing_the_error_file_lose_no_report(launcher):
    reports = [f"REPORT-{i}" for i in range(8)]
    threads = [
        threading.Thread(target=excepthook.write_error_file, args=(_device_error(), r))
        for r in reports
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stack = json.loads(launcher.read_text())["message"]["extraInfo"]["py_callstack"]
    assert all(stack.count(r + "\n") == 1 for r in reports), stack


def test_a_threads_device_error_is_reported_in_ipython() -> None:
    """The shell shows the errors of cells; a thread's go to threading.excepthook,
    where %load_ext puts the report after the stock traceback, named from the
    shell's namespace. Unloading takes it out."""
    from shells import run, run_captured, singleton_shell

    cell = (
        "import threading, torch\n"
        "model = torch.nn.Linear(4, 2).to('meta')\n"
        "batch = torch.randn(3, 4)\n"
        "worker = threading.Thread(target=lambda: model(batch))\n"
        "worker.start(); worker.join()\n"
    )
    with singleton_shell(reset=True) as shell:
        shell.run_line_magic("load_ext", "ipydevice")
        cap, _ = run_captured(shell, cell)  # (the stock traceback: pytest's hook keeps it)
        assert "ipydevice · device error" in cap.stderr and "`batch`" in cap.stderr, cap.stderr
        # a variation: ipydevice.install() and uninstall() in a cell leave the shell's in place
        run(shell, "import ipydevice\nipydevice.install()\nipydevice.uninstall()")
        cap, _ = run_captured(shell, cell)
        assert cap.stderr.count("ipydevice · device error") == 1, cap.stderr
        shell.run_line_magic("unload_ext", "ipydevice")
        cap, _ = run_captured(shell, cell)
        assert "ipydevice" not in cap.stderr
