"""Apply in the thread that ran the failed cell (``ipydevice.integrations.cell_thread``),
without a kernel: an event loop in a thread of its own stands for the kernel's cells."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from ipydevice.integrations import cell_thread
from ipydevice.integrations.cell_thread import WAITING, CellThread


class Cells:
    """A thread running an event loop, as the kernel's main thread runs the cells."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, fn: Any) -> Any:
        """Runs ``fn`` in the cells' thread, as a cell would; returns its result."""

        async def inside() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(inside(), self.loop).result(10)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def cells() -> Iterator[Cells]:
    made = Cells()
    try:
        yield made
    finally:
        made.stop()


class Widget:
    def __init__(self) -> None:
        self.said: list[tuple[str, bool, int]] = []

    def say(self, message: str, ok: bool = True, index: int = 0) -> None:
        self.said.append((message, ok, index))


def test_a_click_in_another_thread_is_handled_in_the_cells_thread(cells: Cells) -> None:
    where = cells.call(CellThread)  # made while the failed cell runs
    seen: list[tuple[str, Any]] = []

    def handler(widget: Any, content: Any, buffers: Any) -> None:
        seen.append((threading.current_thread().name, content["action"]))

    on_msg = where.wrap(handler)
    for action in ("copied", "inserted", "apply"):  # the subshell's thread: this one
        on_msg(Widget(), {"action": action, "index": 0}, [])
    here = threading.current_thread().name
    # Copy and Insert are words only, answered where they arrive; Apply moves objects.
    assert seen == [(here, "copied"), (here, "inserted"), (cells.thread.name, "apply")]


def test_a_click_in_the_cells_thread_or_without_a_loop_runs_at_once(cells: Cells) -> None:
    threads: list[str] = []
    work = lambda: threads.append(threading.current_thread().name)  # noqa: E731
    cells.call(lambda: CellThread().run(work, lambda: None))  # the cells' own thread
    CellThread().run(work, lambda: None)  # no event loop here (a terminal IPython)
    assert threads == [cells.thread.name, threading.current_thread().name]


def test_a_busy_cells_thread_is_waited_for_and_said(
    cells: Cells, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cell_thread, "WAIT", 0.2)
    where = cells.call(CellThread)
    release = threading.Event()
    cells.loop.call_soon_threadsafe(lambda: release.wait(10))  # a long cell
    widget, moved = Widget(), threading.Event()
    where.wrap(lambda w, c, b: (w.say("moved", True, c["index"]), moved.set()))(
        widget, {"action": "apply", "index": 1}, []
    )
    assert widget.said == [(WAITING, True, 1)]  # said at once, the subshell not held
    release.set()
    assert moved.wait(10)
    assert widget.said == [(WAITING, True, 1), ("moved", True, 1)]


def test_a_closed_loop_runs_the_click_where_it_arrives(cells: Cells) -> None:
    where = cells.call(CellThread)
    cells.stop()
    done: list[str] = []
    where.run(lambda: done.append(threading.current_thread().name), lambda: None)
    assert done == [threading.current_thread().name]
    cells.loop = asyncio.new_event_loop()  # for the fixture's stop
    cells.thread = threading.Thread(target=cells.loop.run_forever, daemon=True)
    cells.thread.start()
