"""Apply runs in the thread that ran the failed cell, whichever thread the click arrives in.

torch keeps part of its state per thread: the dispatch modes (``FakeTensorMode`` entered
with ``__enter__()``, as the quickstart does to fake a GPU), ``with torch.device(...)``,
grad mode, autocast. A cell's objects only make sense under the state of the thread
that made them: a fake ``cuda:0`` tensor moved in another thread is moved by the real
CUDA backend ("Torch not compiled with CUDA enabled" on a CPU-only build).

Widget messages do not always arrive in that thread. JupyterLab 4.4 and later send
each comm target's messages over a kernel subshell (ipykernel 7), a thread of its
own, and ipykernel routes a comm's messages to the subshell its last reply came from:
the first click lands in the cells' thread, the next ones in the subshell's. So the
Apply of a click is handed to the cells' event loop and waited for; while a cell runs
there, the row says that Apply waits for it (the subshell, which serves every widget,
is not held up) and the status follows once it is done. Without a running event loop
(a terminal IPython, tests) or when the click comes in the cells' thread, Apply runs
at once, where it is.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["WAIT", "WAITING", "CellThread"]

#: How long a click in another thread waits for the cells' thread before saying so (s).
WAIT = 3.0

WAITING = "a cell is running: Apply waits for it to finish"


class CellThread:
    """The thread (and its event loop) that is running the current cell."""

    def __init__(self) -> None:
        self.thread = threading.current_thread()
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # no event loop in this thread (a terminal IPython)
            self.loop = None

    def elsewhere(self) -> bool:
        """Whether this thread is not the cells' one, and work can be handed over."""
        loop = self.loop
        return (
            loop is not None
            and threading.current_thread() is not self.thread
            and self.thread.is_alive()
            and loop.is_running()
            and not loop.is_closed()
        )

    def run(self, work: Callable[[], None], waiting: Callable[[], None]) -> None:
        """Runs ``work`` in the cells' thread; calls ``waiting`` (here) when it has not
        started there within :data:`WAIT` seconds."""
        if not self.elsewhere():
            work()
            return
        lock = threading.Lock()
        started, done = threading.Event(), threading.Event()

        def job() -> None:
            with lock:
                started.set()
            try:
                work()
            finally:
                done.set()

        assert self.loop is not None
        self.loop.call_soon_threadsafe(job)  # with this thread's context: the click's parent
        if done.wait(WAIT):
            return
        with lock:
            if not started.is_set():
                waiting()

    def wrap(self, handler: Callable[[Any, Any, Any], None]) -> Callable[[Any, Any, Any], None]:
        """The buttons' message handler with Apply's clicks run in the cells' thread."""

        def on_msg(widget: Any, content: Any, buffers: Any) -> None:
            if not (isinstance(content, dict) and content.get("action") == "apply"):
                handler(widget, content, buffers)  # Copy, Insert: words only, answered here
                return
            index = content.get("index")
            at = index if isinstance(index, int) else 0
            self.run(
                lambda: handler(widget, content, buffers),
                lambda: widget.say(WAITING, True, at),
            )

        return on_msg
