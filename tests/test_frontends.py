"""Front ends other than JupyterLab, at the message level: what VS Code and Colab get.

* The header and the panel are plain ``display_data`` outputs that stand on their
  own; the buttons are one widget output *after* the panel (a front end that cannot
  load the widget shows its error there, never in the header), tied to the header
  and the panel by a ``data-ipydevice-anchor`` so that the browser puts each fix's
  buttons beside its code.
* VS Code (and Colab) cannot add a cell from a widget: Insert queues the code with
  ``set_next_input``, whose payload rides on the reply of the *next* execute request;
  VS Code puts it below that cell, and the status line says exactly that.
* Colab's shell sends the ``error`` message itself (with ``error_details``): the
  header comes before it, the panel and the buttons after, and Apply works through
  the buttons' comm.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ipykernel")
pytest.importorskip("anywidget")
start_new_kernel = pytest.importorskip("jupyter_client.manager").start_new_kernel

pytestmark = pytest.mark.kernel

TESTS = Path(__file__).resolve().parent
SETUP = "import torch\nmodel = torch.nn.Linear(4, 2).to('meta')\nx = torch.randn(3, 4)"
MISMATCH = "model(x)"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
ACTIONS = "ipydevice.render.widget.FixActions"


class Kernel:
    def __init__(self, ipython_dir: Path, *extra: str) -> None:
        path = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "IPYTHONDIR": str(ipython_dir), "PYTHONPATH": path}
        self.manager, self.client = start_new_kernel(
            kernel_name="python3", env=env, extra_arguments=list(extra)
        )

    def execute(self, code: str, cell_id: str = "") -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Runs ``code`` (with the cell id a notebook front end sends); returns the
        reply and the request's iopub messages, in order."""
        client = self.client
        content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}}
        msg = client.session.msg(
            "execute_request",
            {**content, "allow_stdin": False, "stop_on_error": True},
            metadata={"cellId": cell_id} if cell_id else {},
        )
        client.shell_channel.send(msg)
        messages = self._until_idle(msg["header"]["msg_id"])
        while True:
            reply = client.get_shell_msg(timeout=90)
            if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                return reply, messages

    def click(self, comm_id: str, subshell: str = "", **content: Any) -> list[dict[str, Any]]:
        """What the browser sends for a click: a custom message on the widget's comm
        (over ``subshell``, as JupyterLab 4.4+ sends widget messages)."""
        data = {"method": "custom", "content": content}
        msg = self.client.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        if subshell:
            msg["header"]["subshell_id"] = subshell
        self.client.shell_channel.send(msg)
        return self._until_idle(msg["header"]["msg_id"])

    def subshell(self) -> str:
        """A new kernel subshell (ipykernel 7), as JupyterLab makes one for widget comms."""
        request = self.client.session.msg("create_subshell_request", {})
        self.client.control_channel.send(request)
        while True:
            reply = self.client.get_control_msg(timeout=90)
            if reply["parent_header"].get("msg_id") == request["header"]["msg_id"]:
                return str(reply["content"]["subshell_id"])

    def _until_idle(self, msg_id: str) -> list[dict[str, Any]]:
        messages = []
        while True:
            message = self.client.get_iopub_msg(timeout=90)
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            messages.append(message)
            if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                return messages

    def shutdown(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def started(path: Path, *extra: str) -> Iterator[Kernel]:
    kernel = Kernel(path, *extra)
    try:
        reply, _ = kernel.execute("%load_ext ipydevice\n" + SETUP)
        assert reply["content"]["status"] == "ok", reply["content"]
        yield kernel
    finally:
        kernel.shutdown()


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    yield from started(tmp_path_factory.mktemp("ipython"))


@pytest.fixture(scope="module")
def colab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    yield from started(
        tmp_path_factory.mktemp("colab"), "--IPKernelApp.kernel_class=colab_kernel.ColabKernel"
    )


def kinds(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for m in messages:
        if m["msg_type"] not in ("stream", "error", "display_data", "execute_result"):
            continue
        data = m["content"].get("data", {})
        page = data.get("text/html", "")
        out.append(
            "header"
            if "ipydevice-header" in page
            else "panel"
            if "ipydevice-panel" in page
            else "buttons"
            if WIDGET_VIEW in data
            else m["msg_type"]
        )
    return out


def actions_comm(messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    (opened,) = [
        m
        for m in messages
        if m["msg_type"] == "comm_open"
        and m["content"]["data"]["state"].get("_anywidget_id") == ACTIONS
    ]
    return opened["content"]["comm_id"], opened["content"]["data"]["state"]


def status_of(messages: list[dict[str, Any]]) -> str:
    updates = [
        m["content"]["data"]["state"]
        for m in messages
        if m["msg_type"] == "comm_msg" and m["content"]["data"].get("method") == "update"
    ]
    return next(s["status"] for s in reversed(updates) if "status" in s)


@pytest.mark.slow
def test_the_header_stands_alone_and_the_buttons_come_last(kernel: Kernel) -> None:
    _, messages = kernel.execute(MISMATCH, cell_id="cell-1")
    assert kinds(messages) == ["header", "error", "panel", "buttons"]
    shown = [m for m in messages if m["msg_type"] == "display_data"]
    # The header as it stands once the diagnosis has replaced it in place, after the traceback.
    (update,) = [m for m in messages if m["msg_type"] == "update_display_data"]
    assert update["content"]["transient"] == shown[0]["content"]["transient"]
    header, panel = update["content"]["data"]["text/html"], shown[1]["content"]["data"]["text/html"]
    # What must be copyable is text in the HTML itself: the culprit, the headline, the code.
    for page in (header, panel):
        assert "x = x.to(&#x27;meta&#x27;)" in page and "<code" in page and "x</code>" in page
    _, state = actions_comm(messages)
    anchors = {re.search(r'data-ipydevice-anchor="(\w+)"', page)[1] for page in (header, panel)}
    assert anchors == {state["anchor"]}  # the widget finds both by it
    assert state["cell_id"] == "cell-1"


def test_insert_in_vscode_rides_on_the_next_reply(kernel: Kernel) -> None:
    _, messages = kernel.execute(MISMATCH, cell_id="cell-2")
    comm_id, state = actions_comm(messages)
    code = state["fixes"][0]["code"]
    status = status_of(kernel.click(comm_id, action="insert", index=0, frontend="vscode"))
    assert status.startswith("VS Code adds it as a new cell below the next cell you run")
    reply, _ = kernel.execute("1 + 1", cell_id="cell-3")  # the next cell the user runs
    payload = reply["content"]["payload"]
    assert payload == [{"source": "set_next_input", "text": code, "replace": False}]
    reply, _ = kernel.execute("2 + 2", cell_id="cell-4")
    assert reply["content"]["payload"] == []  # once


def test_a_failed_copy_is_reported_as_such(kernel: Kernel) -> None:
    _, messages = kernel.execute(MISMATCH, cell_id="cell-5")
    comm_id, _ = actions_comm(messages)
    assert "could not copy" in status_of(kernel.click(comm_id, action="copy-failed", index=0))


@pytest.mark.slow
def test_colab_output_path_header_error_panel_and_apply(colab: Kernel) -> None:
    reply, messages = colab.execute(MISMATCH)
    assert reply["content"]["status"] == "error"
    assert kinds(messages) == ["header", "error", "panel", "buttons"]
    (error,) = [m for m in messages if m["msg_type"] == "error"]
    assert error["content"]["error_details"] == {"colab": True}  # Colab's own, untouched
    comm_id, _ = actions_comm(messages)
    assert "moved x" in status_of(colab.click(comm_id, action="apply", index=0))
    reply, _ = colab.execute("out = model(x)\nprint(out.device)")
    assert reply["content"]["status"] == "ok"


CLICKS = ("copied", "inserted", "apply")


def _quickstart_cells() -> list[str]:
    import json

    notebook = json.loads((TESTS.parent / "notebooks" / "01-quickstart.ipynb").read_text())
    return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]


@pytest.mark.slow
def test_quickstart_apply_in_every_click_order_over_a_comm_subshell(tmp_path: Path) -> None:
    """notebooks/01-quickstart.ipynb as a user clicks through it in JupyterLab 4.4+,
    which sends widget messages over a kernel subshell: ipykernel hands a comm's first
    message to the cells' thread and the next ones to the subshell's thread, where the
    quickstart's fake CUDA (a FakeTensorMode entered in a cell: torch keeps it per
    thread) is not on. Apply must move ``x`` to the fake cuda:0 whatever came before it;
    then the ``ipydevice.diagnose()`` cell and the failed cell run."""
    import itertools

    cells = _quickstart_cells()
    kernel = Kernel(tmp_path)
    try:
        for source in cells[:2]:
            assert kernel.execute(source)[0]["content"]["status"] == "ok"
        subshell = kernel.subshell()
        for number, order in enumerate(itertools.permutations(CLICKS)):
            reply, _ = kernel.execute("x = torch.randn(8, 16)  # back on the CPU")
            assert reply["content"]["status"] == "ok", reply["content"]
            # The same cell again: its widget serves the new panel (no new comm).
            _, messages = kernel.execute(cells[2], cell_id="failed")
            if not number:
                comm_id, _ = actions_comm(messages)
            assert any(m["msg_type"].startswith("comm") for m in messages)
            for action in order:
                status = status_of(kernel.click(comm_id, subshell, action=action, index=0))
                if action == "apply":
                    assert status == "moved x to cuda:0. Re-run the cell.", (order, status)
            reply, messages = kernel.execute("print(x.device)")
            printed = "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")
            assert printed.strip() == "cuda:0", order
        reply, _ = kernel.execute(cells[3])
        assert reply["content"]["status"] == "ok", reply["content"]
        reply, messages = kernel.execute(cells[4])
        assert reply["content"]["status"] == "ok", reply["content"]
    finally:
        kernel.shutdown()


FAKE_CUDA_BATCH = """import torch
import torch.nn as nn
from torch._subclasses.fake_tensor import FakeTensorMode

torch.set_grad_enabled(False)
FakeTensorMode(allow_non_fake_inputs=True).__enter__()
net = nn.Linear(4, 2, device="meta")
net.weight = nn.Parameter(torch.empty(2, 4, device="cuda:0"), requires_grad=False)
net.bias = nn.Parameter(torch.empty(2, device="cuda:0"), requires_grad=False)
batch = {"x": torch.randn(3, 4)}  # a dict batch, still on the CPU"""


@pytest.mark.slow
def test_a_batch_under_a_cells_fake_cuda_applied_from_a_subshell_after_a_running_cell(
    tmp_path: Path,
) -> None:
    """The same for a dict batch, and a click that arrives while a cell runs: the row
    says that Apply waits, then what it did."""
    kernel = Kernel(tmp_path)
    try:
        reply, _ = kernel.execute("%load_ext ipydevice\n" + FAKE_CUDA_BATCH)
        assert reply["content"]["status"] == "ok", reply["content"]
        _, messages = kernel.execute("out = net(batch['x'])", cell_id="failed")
        comm_id, state = actions_comm(messages)
        assert "cuda:0" in state["fixes"][0]["code"], state["fixes"]
        subshell = kernel.subshell()
        kernel.click(comm_id, subshell, action="copied", index=0)  # routes the next to it
        busy = kernel.client.execute("import time\ntime.sleep(6)")  # a cell running
        while True:  # ... once the kernel has begun it
            message = kernel.client.get_iopub_msg(timeout=90)
            parent = message["parent_header"].get("msg_id")
            if parent == busy and message["msg_type"] == "execute_input":
                break
        status = status_of(kernel.click(comm_id, subshell, action="apply", index=0))
        assert status == "a cell is running: Apply waits for it to finish", status
        status = ""
        while "status" not in status:  # the cell's end, then Apply's own word
            message = kernel.client.get_iopub_msg(timeout=90)
            if message["msg_type"] == "comm_msg" and message["content"]["comm_id"] == comm_id:
                status = str(message["content"]["data"].get("state", {}))
        assert "moved " in status and "to cuda:0. Re-run the cell." in status, status
        reply, messages = kernel.execute("out = net(batch['x'])\nprint(out.device)")
        assert reply["content"]["status"] == "ok", reply["content"]
    finally:
        kernel.shutdown()
