"""The panel in a real ipykernel, checked at the message level.

What a frontend receives for a failing cell: the ``error`` output, then the
panel's single ``display_data`` (``text/plain``, ``text/html`` and the widget
view) in the same execute request, before the kernel goes idle. Also
``%devices``' ``execute_result``, the ``set_next_input`` payload and auto-loading
through ``c.InteractiveShellApp.extensions`` in a kernel config file.

Two kernels in all (one per fixture), each with its own ``IPYTHONDIR``.
"""

from __future__ import annotations

import os
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
        """Runs ``code``; returns the execute_reply and the iopub messages, in order."""
        messages: list[dict[str, Any]] = []
        reply = self.client.execute_interactive(code, timeout=90, output_hook=messages.append)
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


def test_error_then_one_panel_in_the_same_request(kernel: Kernel) -> None:
    reply, messages = kernel.execute(MISMATCH)
    content = reply["content"]
    assert content["status"] == "error"
    assert content["ename"] == "RuntimeError"  # the reply is what it is without ipydevice
    shown = outputs(messages)
    assert [m["msg_type"] for m in shown] == ["error", "display_data"]
    error, panel = shown
    assert "is not on the expected device cpu" in error["content"]["evalue"]
    request = reply["parent_header"]["msg_id"]
    assert panel["parent_header"]["msg_id"] == request
    data = panel["content"]["data"]
    assert {"text/plain", "text/html"} <= set(data)
    assert "ipydevice-panel" in data["text/html"]
    assert "`x` is on cpu" in data["text/plain"]
    assert WIDGET_VIEW in data  # ipywidgets is installed in the test environment
    assert messages[-1]["msg_type"] == "status"
    assert messages[-1]["content"]["execution_state"] == "idle"


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
    panel = outputs(messages)[-1]
    assert panel["msg_type"] == "display_data"
    assert set(panel["content"]["data"]) == {"text/plain", "text/html"}


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
        kinds = [m["msg_type"] for m in outputs(messages)]
        assert kinds == ["error", "display_data"], kinds
        assert "cuda:0" in outputs(messages)[1]["content"]["data"]["text/plain"]
        _, messages = started.execute("from ipydevice.settings import current\ncurrent().max_rows")
        (result,) = outputs(messages)
        assert result["content"]["data"]["text/plain"] == "2"
    finally:
        started.shutdown()
