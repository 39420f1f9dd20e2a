"""The panel in a real ipykernel, checked at the message level.

What a frontend receives for a failing cell, in the same execute request and
before the kernel goes idle: the compact header (a static ``display_data``),
IPython's ``error`` output exactly as without ipydevice, then the full panel
(static) and one buttons' widget view. Also
``%devices``' ``execute_result``, the ``set_next_input`` payload and auto-loading
through ``c.InteractiveShellApp.extensions`` in a kernel config file.

Two kernels in all (one per fixture), each with its own ``IPYTHONDIR``.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ipykernel")
start_new_kernel = pytest.importorskip("jupyter_client.manager").start_new_kernel

pytestmark = pytest.mark.kernel

SETUP = "import torch\nmodel = torch.nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)"
MISMATCH = "model(x)"
CUDA_TEXT = (
    "raise RuntimeError('Expected all tensors to be on the same device, but found at least "
    "two devices, cuda:0 and cpu!')"
)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class Kernel:
    """A started kernel and a client, with one helper to run code and collect iopub."""

    def __init__(self, ipython_dir: Path) -> None:
        env = {**os.environ, "IPYTHONDIR": str(ipython_dir)}
        self.manager, self.client = start_new_kernel(kernel_name="python3", env=env)

    def execute(self, code: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Runs ``code``; returns the execute_reply and the iopub messages, in order.

        ``stop_on_error=False``: ipykernel 6 (Colab's 6.17) aborts the requests that
        arrive just after an error (until an event-loop tick resets it), so on a busy
        machine the next cell would come back "aborted", with no output at all."""
        messages: list[dict[str, Any]] = []
        reply = self.client.execute_interactive(
            code, timeout=90, output_hook=messages.append, stop_on_error=False
        )
        return reply, messages

    def shutdown(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    started = Kernel(tmp_path_factory.mktemp("ipython"))
    try:
        reply, _ = started.execute("%load_ext ipydevice\n" + SETUP)
        assert reply["content"]["status"] == "ok", reply["content"]
        yield started
    finally:
        started.shutdown()


def outputs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages a frontend turns into cell outputs (not status or comm traffic)."""
    kinds = ("stream", "error", "display_data", "execute_result")
    return [m for m in messages if m["msg_type"] in kinds]


def kind(message: dict[str, Any]) -> str:
    """header, panel, buttons, or the message type."""
    data = message["content"].get("data", {})
    page = data.get("text/html", "")
    if "ipydevice-header" in page:
        return "header"
    if "ipydevice-panel" in page:
        return "panel"
    if WIDGET_VIEW in data:
        return "buttons"
    return str(message["msg_type"])


@pytest.mark.slow
def test_header_error_then_panel_in_the_same_request(kernel: Kernel) -> None:
    reply, messages = kernel.execute(MISMATCH)
    content = reply["content"]
    assert content["status"] == "error"
    assert content["ename"] == "RuntimeError"  # the reply is what it is without ipydevice
    shown = outputs(messages)
    assert [kind(m) for m in shown] == ["header", "error", "panel", "buttons"]
    header, error, panel, _ = shown
    assert "is not on the expected device cpu" in error["content"]["evalue"]
    request = reply["parent_header"]["msg_id"]
    assert all(m["parent_header"]["msg_id"] == request for m in shown)
    # The header before the traceback says what the message says; the diagnosis, made
    # after the traceback, replaces it in place (the same display id) before the panel.
    assert "`x`" not in header["content"]["data"]["text/plain"]
    shown_id = header["content"]["transient"]["display_id"]
    (update,) = [m for m in messages if m["msg_type"] == "update_display_data"]
    assert update["content"]["transient"]["display_id"] == shown_id
    assert messages.index(error) < messages.index(update) < messages.index(panel)
    assert "`x` is on cpu" in update["content"]["data"]["text/plain"]
    assert "x = x.to('meta')" in update["content"]["data"]["text/plain"]
    data = panel["content"]["data"]
    assert set(data) == {"text/plain", "text/html"}  # what exporters keep
    # The panel below the traceback does not say the header's headline again.
    assert data["text/plain"].startswith("ipydevice · device error: ")
    assert "is on cpu" not in data["text/plain"] and "is on cpu" not in data["text/html"]
    assert "x = x.to('meta')" in data["text/plain"]
    assert messages[-1]["msg_type"] == "status"
    assert messages[-1]["content"]["execution_state"] == "idle"


def test_what_the_cell_printed_stays_before_the_header(kernel: Kernel) -> None:
    _, messages = kernel.execute("print('epoch 1')\n" + MISMATCH)
    kinds = [kind(m) for m in outputs(messages)]
    assert kinds == ["stream", "header", "error", "panel", "buttons"], kinds


@pytest.mark.slow
def test_the_error_output_is_the_same_without_ipydevice(tmp_path: Path) -> None:
    started = Kernel(tmp_path)
    try:
        started.execute(SETUP)
        started.execute(MISMATCH)  # torch's first call takes another path (a one-time check)
        errors = []
        for code in ("%unload_ext ipydevice", "%load_ext ipydevice"):
            started.execute(code)
            for source in (MISMATCH, "1 / 0"):
                reply, messages = started.execute(source)
                (error,) = [m for m in messages if m["msg_type"] == "error"]
                # The prompt number differs from run to run: the rest may not.
                errors.append(
                    re.sub(
                        r"In\[\d+\]",
                        "In[N]",
                        json.dumps([error["content"], reply["content"]["traceback"]]),
                    )
                )
        assert errors[:2] == errors[2:]
    finally:
        started.shutdown()


def test_the_buttons_know_the_failed_cell(kernel: Kernel) -> None:
    client = kernel.client
    msg = client.session.msg(
        "execute_request",
        {
            "code": MISMATCH,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        },
        metadata={"cellId": "failed-cell-7"},
    )
    client.shell_channel.send(msg)
    states = []
    while True:
        message = client.get_iopub_msg(timeout=90)
        if message["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
            continue
        if message["msg_type"] == "comm_open":
            states.append(message["content"]["data"]["state"])
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            break
    client.get_shell_msg(timeout=30)
    actions = [s for s in states if s.get("_anywidget_id") == "ipydevice.render.widget.FixActions"]
    assert len(actions) == 1  # one widget per failed cell, after the panel
    assert {s["cell_id"] for s in actions} == {"failed-cell-7"}


def test_other_errors_get_no_panel(kernel: Kernel) -> None:
    reply, messages = kernel.execute("1 / 0")
    assert reply["content"]["status"] == "error"
    assert [m["msg_type"] for m in outputs(messages)] == ["error"]


def test_panel_without_widget_has_both_static_types(kernel: Kernel) -> None:
    kernel.execute("%config IPyDevice.widget = False")
    try:
        _, messages = kernel.execute(MISMATCH)
    finally:
        kernel.execute("%config IPyDevice.widget = True")
    assert [kind(m) for m in outputs(messages)] == ["header", "error", "panel"]


def test_devices_is_an_execute_result_with_both_types(kernel: Kernel) -> None:
    reply, messages = kernel.execute("%devices")
    assert reply["content"]["status"] == "ok"
    (result,) = outputs(messages)
    assert result["msg_type"] == "execute_result"
    data = result["content"]["data"]
    assert {"text/plain", "text/html"} <= set(data)
    assert "meta" in data["text/plain"] and "ipydevice-panel" in data["text/html"]
    reply, messages = kernel.execute("%devices nope")
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "UsageError"
    assert "no variable named 'nope'" in reply["content"]["evalue"]


def test_insert_fix_cell_sends_a_payload(kernel: Kernel) -> None:
    kernel.execute("%config IPyDevice.insert_fix_cell = True")
    try:
        reply, _ = kernel.execute(MISMATCH)
    finally:
        kernel.execute("%config IPyDevice.insert_fix_cell = False")
    payload = reply["content"]["payload"]
    assert payload == [{"source": "set_next_input", "text": "x = x.to('meta')", "replace": False}]


def test_autoload_from_the_kernel_config(tmp_path: Path) -> None:
    profile = tmp_path / "profile_default"
    profile.mkdir()
    (profile / "ipython_kernel_config.py").write_text(
        'c.InteractiveShellApp.extensions = ["ipydevice"]\nc.IPyDevice.max_rows = 2\n'
    )
    started = Kernel(tmp_path)
    try:
        _, messages = started.execute(CUDA_TEXT)  # message-only: no torch import, a quicker test
        kinds = [kind(m) for m in outputs(messages)]
        assert kinds == ["header", "error", "panel"], kinds  # no fixes: no buttons
        assert "cuda:0" in outputs(messages)[2]["content"]["data"]["text/plain"]
        _, messages = started.execute("from ipydevice.settings import current\ncurrent().max_rows")
        (result,) = outputs(messages)
        assert result["content"]["data"]["text/plain"] == "2"
    finally:
        started.shutdown()


@pytest.mark.slow
def test_the_failing_path_is_warmed_while_the_kernel_is_idle(tmp_path: Path) -> None:
    """The cell that imports torch imports nothing of the failing path, nor does the
    cell queued right behind it; once the kernel is idle its loop imports it, so the
    first device error imports nothing on its way."""
    started = Kernel(tmp_path)
    client = started.client
    try:
        started.execute("%load_ext ipydevice")
        probe = "import sys as _sys\nprint('ipydevice.pipeline.engine' in _sys.modules)"
        first = client.execute(SETUP, stop_on_error=False)
        second = client.execute(probe, stop_on_error=False)  # waiting while torch imports
        printed = []
        while True:
            message = client.get_iopub_msg(timeout=120)
            parent = message["parent_header"].get("msg_id")
            if parent == second and message["msg_type"] == "stream":
                printed.append(message["content"]["text"].strip())
            state = message["content"].get("execution_state")
            if parent == second and message["msg_type"] == "status" and state == "idle":
                break
        assert first != second and printed == ["False"]
        done = "__import__('ipydevice').integrations.ipython.hook_of(get_ipython()).warmer.done"
        for _ in range(240):  # idle: the loop warms, step by step
            _, messages = started.execute(f"print({done})")
            if [m["content"].get("text", "").strip() for m in outputs(messages)] == ["True"]:
                break
            time.sleep(0.5)
        else:
            raise AssertionError("the warm-up never ended")
        started.execute("_before = set(_sys.modules)")
        _, messages = started.execute(MISMATCH)
        kinds = [kind(m) for m in outputs(messages)]
        assert kinds[:3] == ["header", "error", "panel"], kinds
        _, messages = started.execute(
            "print(sorted(m for m in set(_sys.modules) - _before"
            " if m.split('.')[0] in ('ipydevice', 'ipywidgets', 'anywidget')))"
        )
        assert [m["content"]["text"].strip() for m in outputs(messages)] == ["[]"]
    finally:
        started.shutdown()
