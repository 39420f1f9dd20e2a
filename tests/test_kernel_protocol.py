"""The buttons' comm in a real kernel: Apply clicked as a front end clicks it.

A front end's click is a ``comm_msg`` to the widget's comm (ipywidgets' ``custom``
method); the kernel moves the object and sends the new status line back as a
widget state update. Run on the newest versions with the suite, and on Colab's
pinned versions by ``scripts/test-colab-pins.sh``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from test_kernel import MISMATCH, SETUP, Kernel, kind, outputs

pytestmark = pytest.mark.kernel

ACTIONS = "ipydevice.render.widget.FixActions"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    started = Kernel(tmp_path_factory.mktemp("ipython"))
    try:
        reply, _ = started.execute("%load_ext ipydevice\n" + SETUP)
        assert reply["content"]["status"] == "ok", reply["content"]
        yield started
    finally:
        started.shutdown()


def iopub_until_idle(kernel: Kernel, request: str) -> list[dict[str, Any]]:
    """The iopub messages of one request, up to its idle status."""
    seen = []
    while True:
        message = kernel.client.get_iopub_msg(timeout=90)
        if message["parent_header"].get("msg_id") != request:
            continue
        seen.append(message)
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            return seen


def send(kernel: Kernel, msg_type: str, content: dict[str, Any]) -> str:
    message = kernel.client.session.msg(msg_type, content)
    kernel.client.shell_channel.send(message)
    return str(message["header"]["msg_id"])


@pytest.mark.slow
def test_apply_through_the_buttons_comm(kernel: Kernel) -> None:
    request = send(
        kernel,
        "execute_request",
        {
            "code": MISMATCH,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": False,  # see Kernel.execute
        },
    )
    messages = iopub_until_idle(kernel, request)
    kernel.client.get_shell_msg(timeout=30)
    # the header before the traceback, the panel after it, then the one buttons'
    # widget, which puts each fix's buttons beside its code in both
    assert [kind(m) for m in outputs(messages)] == ["header", "error", "panel", "buttons"]
    opened = [
        m["content"]
        for m in messages
        if m["msg_type"] == "comm_open"
        and m["content"]["data"]["state"].get("_anywidget_id") == ACTIONS
    ]
    assert len(opened) == 1  # one widget per failed cell
    header_buttons = opened[0]
    assert header_buttons["data"]["state"]["fixes"][0]["code"] == "x = x.to('meta')"
    # the click: what the browser's model.send({action: "apply", index: 0}) sends
    click = send(
        kernel,
        "comm_msg",
        {
            "comm_id": header_buttons["comm_id"],
            "data": {"method": "custom", "content": {"action": "apply", "index": 0}},
        },
    )
    updates = [
        m["content"]["data"]["state"]
        for m in iopub_until_idle(kernel, click)
        if m["msg_type"] == "comm_msg" and m["content"]["data"].get("method") == "update"
    ]
    status = [state["status"] for state in updates if state.get("status")]
    assert status and "Re-run the cell" in status[-1], updates
    assert all(state.get("status_ok", True) for state in updates)
    reply, messages = kernel.execute("print(x.device)")
    assert reply["content"]["status"] == "ok"
    assert [m["content"]["text"] for m in outputs(messages)] == ["meta\n"]
    # re-run: it works now, and nothing more is shown
    reply, messages = kernel.execute(MISMATCH)
    assert reply["content"]["status"] == "ok"
    assert "panel" not in [kind(m) for m in outputs(messages)]


def test_the_buttons_module_goes_out_once_over_two_errors(kernel: Kernel) -> None:
    """Each error's widget carries a small loader; the module's text (9 kB) is in the
    state of one module host, sent once per session (by the first error)."""
    from ipydevice.render.widget import _ESM

    opened = []
    for _ in range(2):
        _, messages = kernel.execute("y = torch.randn(3, 4)\nmodel(y)")
        assert "buttons" in [kind(m) for m in outputs(messages)]
        opened.append(
            [m["content"]["data"]["state"] for m in messages if m["msg_type"] == "comm_open"]
        )
    first, second = (sum(_ESM in json.dumps(state) for state in states) for states in opened)
    assert first <= 1 and second == 0  # once per session (the first error, or before)
    states = opened[0] + opened[1]
    actions = [state for state in states if state.get("_anywidget_id") == ACTIONS]
    assert len(actions) == 2
    for state in actions:
        assert len(state["_esm"]) < 2000 and state["host"]
    assert actions[0]["host"] == actions[1]["host"]


def test_devices_after_apply(kernel: Kernel) -> None:
    reply, messages = kernel.execute("%devices")
    assert reply["content"]["status"] == "ok"
    (result,) = outputs(messages)
    assert result["msg_type"] == "execute_result"
    text = result["content"]["data"]["text/plain"]
    assert "meta" in text and "x" in text
    assert "ipydevice-panel" in result["content"]["data"]["text/html"]


def test_versions_in_the_kernel(kernel: Kernel) -> None:
    """The kernel runs the interpreter (and so the versions) of the tests."""
    _, messages = kernel.execute("import sys; print(sys.executable)")
    assert [m["content"]["text"].strip() for m in outputs(messages)] == [sys.executable]
